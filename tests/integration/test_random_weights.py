"""A random-weight model built by tools/device/make_model.py is recorded as ``weights: random``, and so is
a model quantised from it by the real quantise stage (llm-compressor RTN, seconds on CPU); the real
SmolLM2 stays ``real``.

Run (heavy; one at a time on a shared machine):
    flock /tmp/worthit-heavy.lock python -m pytest tests/integration/test_random_weights.py
"""

from __future__ import annotations

import json
import subprocess
from pathlib import Path

import pytest

from tests.conftest import ROOT, require_env
from tests.integration.test_quantize import run_stage
from worthit.models import RANDOM_WEIGHTS_KEY, build_manifest, fetch

pytestmark = [pytest.mark.quantize, pytest.mark.slow]


@pytest.fixture(scope="module")
def quantize_python() -> Path:
    return require_env("quantize")


def test_random_weights_are_labelled_through_quantisation(quantize_python, model_dir, tmp_path):
    out = tmp_path / "tiny"
    subprocess.run(
        [str(quantize_python), str(ROOT / "tools/device/make_model.py"), str(out), "--preset", "tiny"]
        + ["--tokenizer", str(model_dir)],
        check=True,
        timeout=600,
    )
    cfg = json.loads((out / "config.json").read_text())
    assert cfg[RANDOM_WEIGHTS_KEY] == "random" and cfg["hidden_size"] == 64
    base = fetch("tiny", f"path:{out}", tmp_path / "tiny-manifest")
    assert base.weights == "random" and base.parameters and base.parameters < 10_000_000
    spec = {"base": "tiny", "scheme": "W4A16_ASYM", "method": "rtn", "group_size": 32, "max_nll_increase": 5.0}
    q = run_stage(quantize_python, "tiny-rtn", spec, tmp_path / "tiny-manifest" / "manifest.json", tmp_path / "q")
    assert q["extra"]["status"] == "ok", q["extra"]["reason"]
    assert q["weights"] == "random"
    assert build_manifest("smol", f"path:{model_dir}", None, model_dir).weights == "real"

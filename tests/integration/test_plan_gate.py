"""The plan's prerequisite rules where the server starts: a variant that breaks one (here tensor-parallel
size 8 on a model with 28 attention heads) is never started, and its consumers record ``not_applicable``
with the rule's reason (no vLLM needed: the supervisor refuses before it would launch one)."""

from __future__ import annotations

import json
import shutil
import signal
import subprocess
import sys

from tests.conftest import ROOT
from worthit import schemas
from worthit.config import Study, validate
from worthit.experiments.kv.measure import measure_kv
from worthit.experiments.kv.tables import KV_CACHE
from worthit.models import Manifest

SUPERVISE = """
import sys, json
from pathlib import Path
from worthit.gating import Gpu
from worthit.server import supervise
a = json.loads(sys.argv[1])
gpus = [Gpu(str(i), "NVIDIA H200", "9.0") for i in range(8)]
sys.exit(supervise(Path(a["state"]), Path(a["log"]), variant="tp8", model_dir=a["model_dir"],
                   python="/nonexistent/python", args={"tensor-parallel-size": 8}, extra=[], env={}, devices=gpus))
"""


def test_tensor_parallel_8_on_28_heads_is_recorded_not_applicable_without_starting_a_server(tmp_path):
    model = tmp_path / "qwen7b-awq"
    model.mkdir()
    shutil.copy(ROOT / "tests/fixtures/models/qwen2.5-7b-instruct-awq/config.json", model / "config.json")
    manifest = tmp_path / "manifest.json"
    Manifest("qwen7b-awq", f"path:{model}", None, str(model)).write(manifest)
    state, log = tmp_path / "server.json", tmp_path / "serve.log"
    args = json.dumps({"state": str(state), "log": str(log), "model_dir": str(model)})
    proc = subprocess.Popen([sys.executable, "-c", SUPERVISE, args], cwd=ROOT)
    try:
        cfg = validate(
            {
                "study": "t",
                "models": {"qwen7b-awq": {"source": f"path:{model}"}},
                "variants": {
                    "tp8": {
                        "model": "qwen7b-awq",
                        "gpus": 8,
                        "engine_args": {"tensor-parallel-size": 8},
                        "experiments": ["kv"],
                    }
                },
            }
        )
        out = tmp_path / "kv.parquet"
        measure_kv(Study(cfg), "tp8", str(state), str(manifest), out=str(out))
        res = schemas.read(out, KV_CACHE)
        assert res.status == schemas.STATUS_NOT_APPLICABLE
        assert res.reason == "not applicable: tensor-parallel-size 8 does not divide 28 attention heads"
        assert "not starting the server" in log.read_text()
        assert proc.poll() is None  # the supervisor waits for its group to end, like a failed server's
    finally:
        proc.send_signal(signal.SIGTERM)
        assert proc.wait(timeout=10) == 0

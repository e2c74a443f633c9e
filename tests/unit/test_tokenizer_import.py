"""The client's tokenizer import stays quiet in the run's terminal (worthit.loadgen.prompts.tokenizer_class)."""

from __future__ import annotations

import importlib.util
import os
import subprocess
import sys

import pytest

ADVICE = "PyTorch was not found"


def _stderr(code: str) -> str:
    env = {k: v for k, v in os.environ.items() if k != "TRANSFORMERS_NO_ADVISORY_WARNINGS"}
    return subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, env=env, check=True).stderr


@pytest.mark.skipif(importlib.util.find_spec("torch") is not None, reason="transformers gives the advice without torch")
def test_the_tokenizer_library_loads_without_transformers_advice_about_pytorch() -> None:
    assert ADVICE in _stderr("import transformers")  # what every load job printed before
    assert ADVICE not in _stderr(
        "from worthit.loadgen import prompts; cls = prompts.tokenizer_class(); assert cls.__name__ == 'AutoTokenizer'"
    )


def test_the_tokenizer_library_loads_after_the_jobs_thread_variables_are_restored() -> None:
    """torch, where transformers brings it, reads OMP_NUM_THREADS as it loads: a job's 0 is undone first."""
    code = (
        "import os; os.environ.update(OMP_NUM_THREADS='0', WORTHIT_USER_OMP_NUM_THREADS='3'); "
        "from worthit.loadgen import prompts; prompts.tokenizer_class(); print(os.environ['OMP_NUM_THREADS'])"
    )
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True).stdout
    assert out.split() == ["3"]

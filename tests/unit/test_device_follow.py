"""tools/device/follow.sh, which runs a session's tune or variants across several device calls: a call leaves
the command running at its budget, the next call follows the same run to its end without starting another,
and STOP=1 stops it through its stop file, then its session, recording the exit status."""

from __future__ import annotations

import contextlib
import os
import subprocess
import time
import uuid
from collections.abc import Iterator
from pathlib import Path

import pytest

from worthit.config import ROOT

FOLLOW = ROOT / "tools" / "device" / "follow.sh"


@pytest.fixture
def name() -> Iterator[str]:
    n = f"test-{uuid.uuid4().hex[:10]}"
    yield n
    pid = Path(f"/tmp/follow-{n}.pid")
    if pid.exists() and pid.read_text().strip():
        with contextlib.suppress(ProcessLookupError):
            os.killpg(int(pid.read_text()), 9)
    for suffix in ("pid", "rc", "log"):
        Path(f"/tmp/follow-{n}.{suffix}").unlink(missing_ok=True)


def call(name: str, budget_s: float, *command: str, **env: str) -> subprocess.CompletedProcess[str]:
    until = str(int(time.time() + budget_s))
    return subprocess.run(
        [str(FOLLOW), name, "--", *command],
        env={**os.environ, "FOLLOW_UNTIL": until, **env},
        capture_output=True,
        text=True,
        timeout=120,
    )


def test_a_call_leaves_the_run_going_and_the_next_follows_it_to_its_end(name: str, tmp_path: Path) -> None:
    marks = tmp_path / "marks"
    script = f"echo started >> {marks}; sleep 6; echo finished"
    first = call(name, 2, "bash", "-c", script)
    assert first.returncode == 3, first.stdout + first.stderr  # still running at the call's end
    assert "still running" in first.stdout
    second = call(name, 30, "bash", "-c", script)
    assert second.returncode == 0, second.stdout + second.stderr
    assert "following the run an earlier call started" in second.stdout and "finished" in second.stdout
    assert marks.read_text() == "started\n"  # one run, not two
    assert Path(f"/tmp/follow-{name}.rc").read_text().strip() == "0"


def test_stop_asks_through_the_stop_file_then_signals_the_session(name: str, tmp_path: Path) -> None:
    stop = tmp_path / "stop"
    polite = f"for i in $(seq 1 60); do [ -f {stop} ] && exit 7; sleep 0.2; done"
    out = call(name, 1, "bash", "-c", polite, STOP="1", FOLLOW_STOP_FILE=str(stop), STOP_GRACE_S="5")
    assert out.returncode == 0 and "ended, exit 7" in out.stdout, out.stdout + out.stderr

    for suffix in ("pid", "rc"):
        Path(f"/tmp/follow-{name}.{suffix}").unlink(missing_ok=True)
    stubborn = "trap '' TERM; exec sleep 60"  # ignores SIGTERM: SIGKILL after the grace
    out = call(name, 1, "bash", "-c", stubborn, STOP="1", STOP_GRACE_S="2")
    assert out.returncode == 0 and "asked to stop" in out.stdout, out.stdout + out.stderr
    assert "ended, exit unknown (killed)" in out.stdout  # SIGKILL leaves no status to record
    pid = int(Path(f"/tmp/follow-{name}.pid").read_text())
    assert not _group_alive(pid), "a process of the stopped session is left"


def _group_alive(pgid: int, wait_s: float = 10.0) -> bool:
    """Whether the process group still has a member once the killed ones have been reaped (by init)."""
    deadline = time.monotonic() + wait_s
    while time.monotonic() < deadline:
        try:
            os.killpg(pgid, 0)
        except ProcessLookupError:
            return False
        time.sleep(0.2)
    return True

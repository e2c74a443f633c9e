"""The tune's Snakemake driver: a round's workflow on the tune's study, started so that a stop (SIGTERM,
Ctrl-C, the tune killed outright) reaches Snakemake and its jobs (:func:`run_snakemake`), and what to do when
the workflow ran none of some candidates' measurements (:class:`NotRun`)."""

from __future__ import annotations

import contextlib
import os
import signal
import subprocess
import sys
from collections.abc import Sequence
from pathlib import Path
from typing import Any

from worthit.config import ROOT
from worthit.server.cleanup import set_pdeathsig


class Interrupted(Exception):
    """The tune was asked to stop (SIGTERM) while the workflow ran: what finished is kept, the candidates of
    the round stay pending in the journal, and the same command resumes with them."""


class NotRun(Exception):
    """The workflow ran none of some candidates' measurements (a stale lock, a Snakemake error before any
    job): they are not failed candidates, so they stay pending; the message says what to do."""


# The round's Snakemake runs under this shell, the leader of a session of its own: told SIGTERM or SIGINT
# (by the tune, or by the kernel when the tune dies: PR_SET_PDEATHSIG), it passes SIGTERM to the whole session,
# Snakemake and its jobs, and waits for Snakemake. SIGTERM for both: a background job of a non-interactive
# shell ignores SIGINT, and so would the measurements under it.
GUARD = """stop() { trap '' TERM INT; kill -TERM 0; wait "$p"; exit "$1"; }
trap 'stop 143' TERM
trap 'stop 130' INT
"$@" & p=$!
wait "$p"
"""


def start_workflow(cmd: Sequence[str]) -> subprocess.Popen[bytes]:
    """Start a round's Snakemake so that a stop reaches its jobs as well, and so that it cannot outlive the
    tune: killed outright (SIGKILL, the OOM killer), the tune cannot forward a signal, so the kernel tells the
    workflow's guard (:data:`GUARD`) instead of letting the round run on, servers and all, with no one to read
    it. Snakemake alone, told SIGTERM, would wait for its running jobs: a server still starting and the load
    levels queued behind it hold such a stop for minutes, past the grace a cluster (SLURM's KillWait) or a
    time-boxed call gives before SIGKILL. Told too, each server stops its engine and each measurement ends
    unwritten (results are written whole or not at all), so the workflow ends within seconds."""
    return subprocess.Popen(  # noqa: PLW1509 (no threads start it)
        ["/bin/sh", "-c", GUARD, "worthit-tune-workflow", *cmd], preexec_fn=set_pdeathsig, start_new_session=True
    )


def stop_workflow(proc: subprocess.Popen[bytes], signum: int) -> None:
    """Pass a stop to the round's workflow (:func:`start_workflow`: Snakemake and its jobs, as a terminal's
    Ctrl-C reaches every process of its foreground group)."""
    with contextlib.suppress(ProcessLookupError, PermissionError):
        os.kill(proc.pid, signum)


def run_snakemake(config_file: Path, targets: Sequence[str], *, workdir: Path, cores: int, extra: Sequence[str]) -> int:
    """The workflow on the tune's study for ``targets``; a SIGTERM or Ctrl-C to the tune reaches it and its
    jobs (:func:`stop_workflow`: its servers stop) before the tune exits: :class:`Interrupted`, or the
    KeyboardInterrupt, so that no candidate is told an outcome the stop made. A server's state file a killed
    Snakemake left marked incomplete is unmarked when the workflow is parsed
    (:func:`worthit.server.state.forget_incomplete_marks`), so a resumed round measures its candidates."""
    cmd = [
        sys.executable,
        "-m",
        "snakemake",
        "-s",
        str(ROOT / "Snakefile"),
        "-d",
        str(workdir),
        "--configfile",
        str(config_file),
        "--cores",
        str(cores),
        "--keep-going",
        "--rerun-incomplete",
        *extra,
        *targets,
    ]
    proc = start_workflow(cmd)
    previous = signal.getsignal(signal.SIGTERM)
    stopped: list[int] = []

    def forward(signum: int, _frame: Any) -> None:
        stopped.append(signum)
        stop_workflow(proc, signum)

    signal.signal(signal.SIGTERM, forward)
    try:
        rc = proc.wait()
        if stopped:
            raise Interrupted(f"stopped by signal {stopped[0]} while the workflow ran (it exited with {rc})")
        return rc
    except KeyboardInterrupt:  # Ctrl-C: the workflow's own session did not see it; pass it on
        stop_workflow(proc, signal.SIGINT)
        proc.wait()
        raise
    finally:
        signal.signal(signal.SIGTERM, previous)
        if proc.poll() is None:
            stop_workflow(proc, signal.SIGTERM)
            proc.wait()


def not_run_message(shown: Sequence[str], rc: int, cfg_file: Path, workdir: Path) -> str:
    """What to do when the workflow ran none of some candidates' measurements (:class:`NotRun`)."""
    logs = sorted((workdir / ".snakemake" / "log").glob("*.snakemake.log"))
    where = f"its log: {logs[-1]}" if logs else "Snakemake's messages are above"
    return (
        f"the workflow ran no measurement of {len(shown)} candidate(s) ({'; '.join(shown)}): exit status {rc}, "
        f"{where}. Nothing was told of them: they stay pending, and the same command measures them. If "
        "Snakemake says the directory cannot be locked and no other Snakemake runs here (one killed outright "
        f"leaves its lock), unlock it first: snakemake -s {ROOT / 'Snakefile'} -d {workdir} --unlock "
        f"--configfile {cfg_file}"
    )

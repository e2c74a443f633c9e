"""A real one-node SLURM cluster for the cluster-submission tests (.ci/slurm/start-slurm.sh).

The fixture starts the cluster only when none is running, and then stops exactly the daemons it
started, pass or fail. A cluster someone else started (e.g. .ci/run-slurm) is used and left running.
Where the cluster cannot be started (not root, no apt-get) the tests skip with the reason, unless
WORTHIT_REQUIRE_SLURM=1 or CI=true, where that is a failure.
"""

from __future__ import annotations

import os
import shutil
import subprocess
from collections.abc import Iterator
from pathlib import Path

import pytest

from tests.conftest import ROOT, missing

SCRIPTS = ROOT / ".ci" / "slurm"
DAEMON_PIDFILES = ("run/slurmd.pid", "run/slurmctld.pid", "munge/munged.pid")
START_TIMEOUT_S = 300  # a cold apt-get install takes ~15 s; leave room for a slow mirror


def _cannot_start(reason: str) -> None:
    if os.environ.get("WORTHIT_REQUIRE_SLURM") == "1":
        pytest.fail(f"WORTHIT_REQUIRE_SLURM=1 but the SLURM cluster cannot start: {reason}")
    missing(reason)  # fails in CI


def _alive(pidfile: Path) -> bool:
    try:
        os.kill(int(pidfile.read_text().strip()), 0)
    except (OSError, ValueError):
        return False
    return True


def _script(name: str, env: dict[str, str], timeout_s: int) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        ["timeout", "-k", "10", str(timeout_s), str(SCRIPTS / name)], env=env, capture_output=True, text=True
    )


@pytest.fixture(scope="session")
def slurm_cluster() -> Iterator[Path]:
    """The cluster's state folder (config, logs, jobcomp.txt); the cluster runs while the tests do."""
    if os.geteuid() != 0:
        _cannot_start("the one-node SLURM cluster needs root (it installs packages and runs slurmd)")
    if not shutil.which("sbatch") and not shutil.which("apt-get"):
        _cannot_start("SLURM is not installed and there is no apt-get to install it")
    state = Path(os.environ.get("SLURM_CI_DIR", ROOT / ".slurm-ci"))
    env = {**os.environ, "SLURM_CI_DIR": str(state)}
    started_here = not _alive(state / "run" / "slurmctld.pid")
    try:
        if started_here:
            proc = _script("start-slurm.sh", env, START_TIMEOUT_S)
            if proc.returncode == 77:  # the script's "cannot run here"
                _cannot_start(proc.stderr.strip())
            assert proc.returncode == 0, f"start-slurm.sh failed:\n{proc.stdout}\n{proc.stderr}"
        yield state
    finally:
        if started_here:
            pids = {name: (state / name).read_text().strip() for name in DAEMON_PIDFILES if (state / name).exists()}
            proc = _script("stop-slurm.sh", env, 120)
            assert proc.returncode == 0, f"stop-slurm.sh failed:\n{proc.stdout}\n{proc.stderr}"
            survivors = [f"{name} (pid {pid})" for name, pid in pids.items() if Path(f"/proc/{pid}").exists()]
            assert not survivors, f"daemons survived stop-slurm.sh: {survivors}"

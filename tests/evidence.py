"""The GPU samples' raw results, which live on this repository's ``evidence`` branch (examples/README.md):
a test that rebuilds a sample from its per-request rows reads them through :func:`sample`.

``examples/<path>`` on the branch is found, in this order: under ``$WORTHIT_EVIDENCE`` (a checkout of the
branch), in the worktree docs/running.md suggests (``git worktree add ../worthit-evidence evidence``), or
extracted once from the local branch (``evidence`` or ``origin/evidence``) into the system's temporary folder,
keyed by the branch's commit. A clone that holds none of them skips the test and says how to get the branch.
"""

from __future__ import annotations

import os
import shutil
import subprocess
import tarfile
import tempfile
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
BRANCH = "evidence"
FETCH = f"git fetch origin {BRANCH}:{BRANCH}"


def _git(*args: str) -> subprocess.CompletedProcess[bytes]:
    return subprocess.run(["git", "-C", str(ROOT), *args], capture_output=True, check=False)


def _extracted(path: str) -> Path | None:
    """examples/<path> extracted from the local branch, or None where this clone lacks the branch. The whole
    sample folder holding it (its first two names, e.g. ``h200-qwen/h100-draft``) is extracted, once, so that
    two paths of one sample never leave a partial copy."""
    for ref in (BRANCH, f"origin/{BRANCH}"):
        rev = _git("rev-parse", "--verify", "--quiet", f"{ref}^{{commit}}")
        if rev.returncode == 0:
            break
    else:
        return None
    commit = rev.stdout.decode().strip()
    base = Path(tempfile.gettempdir()) / f"worthit-evidence-{commit[:12]}"
    unit = "/".join(path.split("/")[:2])
    done = base / ".done" / unit.replace("/", "~")
    if not done.exists():
        # each caller extracts into a folder of its own, then moves it into place: two test workers never see a
        # half-written tree, and the second one to finish keeps the first one's copy
        base.mkdir(parents=True, exist_ok=True)
        work = Path(tempfile.mkdtemp(dir=base, prefix=".part-"))
        archive = work / "part.tar"
        made = _git("archive", "--format=tar", f"--output={archive}", commit, f"examples/{unit}")
        if made.returncode != 0:
            raise FileNotFoundError(f"examples/{unit} is not on the {BRANCH} branch: {made.stderr.decode()}")
        with tarfile.open(archive) as tar:
            tar.extractall(work, filter="data")
        target = base / "examples" / unit
        target.parent.mkdir(parents=True, exist_ok=True)
        try:
            (work / "examples" / unit).rename(target)
        except OSError:
            if not target.exists():
                raise
        shutil.rmtree(work)
        done.parent.mkdir(parents=True, exist_ok=True)
        done.touch()
    return base / "examples" / path


def sample(path: str) -> Path:
    """The folder ``examples/<path>`` of the evidence branch; skips the calling test where no copy is reachable."""
    for given in (os.environ.get("WORTHIT_EVIDENCE"), str(ROOT.parent / "worthit-evidence")):
        if given and (Path(given) / "examples" / path).exists():
            return Path(given) / "examples" / path
    found = _extracted(path)
    if found is None:
        pytest.skip(f"needs the raw results of examples/{path} from the {BRANCH} branch: {FETCH}")
    return found

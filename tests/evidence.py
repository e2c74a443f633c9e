"""The GPU samples' raw results, which live on this repository's ``evidence`` branch (examples/README.md).

Two ways in:

* :func:`compact` -- ``examples/<path>`` from the compact extract committed under ``tests/fixtures/evidence/``
  (one ``.tar.xz`` a sample, :data:`SAMPLES`), extracted once into the system's temporary folder. It holds the
  sample's measured files as the branch has them, less what no test reads: the logs, the Snakemake benchmark
  files, the committed report (main keeps it) and the per-request rows' ``itl_ms`` lists (nulled: the gaps
  between chunks, the bulk of the bytes; every other value is the branch's). The tests that rebuild a sample
  read it: they run in CI, on a clone of main alone.
* :func:`sample` -- ``examples/<path>`` on the branch itself, found, in this order: under ``$WORTHIT_EVIDENCE``
  (a checkout of the branch), in the worktree docs/running.md suggests (``git worktree add ../worthit-evidence
  evidence``), or extracted once from the local branch (``evidence`` or ``origin/evidence``). Only the tests
  marked ``evidence`` read it (those that need every value, e.g. a whole committed report rebuilt); a clone
  without the branch skips them, in CI too (tests/conftest.py), saying how to get it.

``python -m tests.evidence`` writes the compact extracts again from the local branch.
"""

from __future__ import annotations

import hashlib
import io
import os
import shutil
import subprocess
import sys
import tarfile
import tempfile
from collections.abc import Callable
from pathlib import Path, PurePosixPath

import pyarrow as pa
import pyarrow.parquet as pq
import pytest

ROOT = Path(__file__).resolve().parents[1]
BRANCH = "evidence"
FETCH = f"git fetch origin {BRANCH}:{BRANCH}"
# the reason a test marked ``evidence`` skips with where the branch is absent (tests/conftest.py lets it skip in CI)
MISSING = f"needs the {BRANCH} branch"
FIXTURES = ROOT / "tests" / "fixtures" / "evidence"
# the samples the tests rebuild, each kept compact under FIXTURES
SAMPLES = ("h200-qwen/results", "h200-qwen/h100-int4-ngram", "h200-qwen/h100-prefix-fp8-kv", "h200-qwen/h100-draft")
SAMPLES += ("h200-qwen/tune",)
# left out of a compact extract: folders and files no test reads (main holds each sample's report)
DROPPED = frozenset({"logs", "benchmarks", "report", "report.html", "device"})
NULLED = "itl_ms"  # the per-request rows' list of gaps between chunks


def _git(*args: str) -> subprocess.CompletedProcess[bytes]:
    return subprocess.run(["git", "-C", str(ROOT), *args], capture_output=True, check=False)


def _unit(path: str) -> str:
    """The sample folder holding examples/<path>: the path itself where it names one, else its first two names."""
    for s in SAMPLES:
        if path == s or path.startswith(s + "/"):
            return s
    return "/".join(path.split("/")[:2])


def _unpacked(base: Path, unit: str, fill: Callable[[Path], None]) -> Path:
    """``base/examples/<unit>``, written once by ``fill(folder)`` (which writes ``folder/examples/<unit>``). Each
    caller fills a folder of its own, then moves it into place: two test workers never see a half-written tree,
    and the second one to finish keeps the first one's copy."""
    done = base / ".done" / unit.replace("/", "~")
    target = base / "examples" / unit
    if not done.exists():
        base.mkdir(parents=True, exist_ok=True)
        work = Path(tempfile.mkdtemp(dir=base, prefix=".part-"))
        fill(work)
        target.parent.mkdir(parents=True, exist_ok=True)
        try:
            (work / "examples" / unit).rename(target)
        except OSError:
            if not target.exists():
                raise
        shutil.rmtree(work)
        done.parent.mkdir(parents=True, exist_ok=True)
        done.touch()
    return target


def _branch_commit() -> str | None:
    for ref in (BRANCH, f"origin/{BRANCH}"):
        rev = _git("rev-parse", "--verify", "--quiet", f"{ref}^{{commit}}")
        if rev.returncode == 0:
            return rev.stdout.decode().strip()
    return None


def _from_branch(commit: str, unit: str, work: Path) -> None:
    archive = work / "part.tar"
    made = _git("archive", "--format=tar", f"--output={archive}", commit, f"examples/{unit}")
    if made.returncode != 0:
        raise FileNotFoundError(f"examples/{unit} is not on the {BRANCH} branch: {made.stderr.decode()}")
    with tarfile.open(archive) as tar:
        tar.extractall(work, filter="data")
    archive.unlink()


def _extracted(path: str) -> Path | None:
    """examples/<path> extracted from the local branch, or None where this clone lacks the branch. The whole
    sample folder holding it is extracted, once, so that two paths of one sample never leave a partial copy."""
    commit = _branch_commit()
    if commit is None:
        return None
    unit = _unit(path)
    base = Path(tempfile.gettempdir()) / f"worthit-evidence-{commit[:12]}"
    return _unpacked(base, unit, lambda work: _from_branch(commit, unit, work)) / Path(path).relative_to(unit)


def available() -> bool:
    """Whether :func:`sample` finds the branch (a checkout of it, or the local branch)."""
    given = [os.environ.get("WORTHIT_EVIDENCE"), str(ROOT.parent / "worthit-evidence")]
    return any(g and (Path(g) / "examples").is_dir() for g in given) or _branch_commit() is not None


def sample(path: str) -> Path:
    """The folder ``examples/<path>`` of the evidence branch; skips the calling test where no copy is reachable.
    Only tests marked ``evidence`` call it."""
    for given in (os.environ.get("WORTHIT_EVIDENCE"), str(ROOT.parent / "worthit-evidence")):
        if given and (Path(given) / "examples" / path).exists():
            return Path(given) / "examples" / path
    found = _extracted(path)
    if found is None:
        pytest.skip(f"{MISSING} (examples/{path}): {FETCH}, then pytest -m evidence")
    return found


def archive(unit: str) -> Path:
    """The compact extract of the sample folder ``examples/<unit>``."""
    return FIXTURES / f"{unit.replace('/', '~')}.tar.xz"


def compact(path: str) -> Path:
    """The folder ``examples/<path>`` of the compact extract committed on main (this module's docstring)."""
    unit = _unit(path)
    src = archive(unit)
    if not src.is_file():
        raise FileNotFoundError(f"{src}: no compact extract of examples/{unit} (python -m tests.evidence {unit})")
    digest = hashlib.sha256(src.read_bytes()).hexdigest()[:12]
    base = Path(tempfile.gettempdir()) / f"worthit-evidence-compact-{digest}"

    def fill(work: Path) -> None:
        with tarfile.open(src) as tar:
            tar.extractall(work, filter="data")

    return _unpacked(base, unit, fill) / Path(path).relative_to(unit)


def kept(rel: PurePosixPath) -> bool:
    """Whether a compact extract keeps the file at ``rel`` (relative to its sample folder)."""
    return not DROPPED.intersection(rel.parts)


def pruned(data: bytes) -> bytes:
    """A Parquet file as a compact extract keeps it: :data:`NULLED` nulled where the table has it, every other
    column, row and metadata entry as it was; uncompressed (the archive's xz compresses it far better)."""
    table = pq.read_table(io.BytesIO(data))
    if NULLED in table.column_names:
        i = table.column_names.index(NULLED)
        table = table.set_column(i, table.schema.field(i), pa.nulls(table.num_rows, table.schema.field(i).type))
    out = io.BytesIO()
    pq.write_table(table, out, compression="none")
    return out.getvalue()


def write_compact(unit: str) -> Path:
    """Write :func:`archive` of ``unit`` from the local branch: reproducible (sorted, no times or owners)."""
    commit = _branch_commit()
    if commit is None:
        raise SystemExit(f"the {BRANCH} branch is not here: {FETCH}")
    with tempfile.TemporaryDirectory() as tmp:
        _from_branch(commit, unit, Path(tmp))
        top = Path(tmp) / "examples" / unit
        dest = archive(unit)
        dest.parent.mkdir(parents=True, exist_ok=True)
        part = dest.with_name(dest.name + ".part")
        with tarfile.open(part, "w:xz", preset=9 | 0x80000000) as tar:  # 0x80000000: lzma.PRESET_EXTREME
            for f in sorted(p for p in top.rglob("*") if p.is_file()):
                rel = PurePosixPath(f.relative_to(top).as_posix())
                if not kept(rel):
                    continue
                data = f.read_bytes()
                if f.suffix == ".parquet":
                    data = pruned(data)
                info = tarfile.TarInfo(f"examples/{unit}/{rel}")
                info.size, info.mode, info.mtime = len(data), 0o644, 0
                tar.addfile(info, io.BytesIO(data))
        part.replace(dest)
    return dest


if __name__ == "__main__":
    for u in sys.argv[1:] or SAMPLES:
        print(write_compact(u), archive(u).stat().st_size)

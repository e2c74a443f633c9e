"""The GPU samples' raw results, kept in this repository's history (examples/README.md, "The raw results").

Two ways in:

* :func:`compact` -- ``examples/<path>`` from the compact extract committed under ``tests/fixtures/evidence/``
  (one ``.tar.xz`` a sample, :data:`SAMPLES`), extracted once into the system's temporary folder. It holds the
  sample's measured files as they were measured, less what no test reads: the logs, the Snakemake benchmark
  files, the committed report (main keeps it) and the per-request rows' ``itl_ms`` lists (nulled: the gaps
  between chunks, the bulk of the bytes; every other value as measured). The tests that rebuild a sample
  read it: they run in CI, on a clone of main alone.
* :func:`sample` -- ``examples/<path>`` with every file as it was measured, found, in this order: under
  ``$WORTHIT_EVIDENCE`` (a checkout of it), in the worktree docs/running.md suggests (``git worktree add
  ../worthit-evidence <commit>``), extracted once from a local ``evidence`` branch (``evidence`` or
  ``origin/evidence``), or from this repository's own history: :data:`HISTORY`, the last commit whose working
  tree held the raw results, under the folder names they had then (:data:`FORMER`). Only the tests marked
  ``evidence`` read it (those that need every value, e.g. a whole committed report rebuilt); a shallow clone
  without that commit skips them, in CI too (tests/conftest.py), saying how to get it.

``python -m tests.evidence`` writes the compact extracts again from the raw results.
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
# the last commit of main whose working tree held every sample's raw results (examples/README.md)
HISTORY = "40526c6447e9a470ed2fc1e01e8f39471b1f7a75"
# the sample folders renamed since: folder now -> folder at HISTORY
FORMER = {
    "h200-qwen/int8-kv-two-machines": "h200-qwen/sitting10",
    "h200-qwen/defaults-and-int8-kv": "h200-qwen/sitting11",
    "h200-qwen/7b-int4-first-try": "h200-qwen/sitting12",
    "h200-qwen/7b-int4": "h200-qwen/sitting13",
    "h200-qwen/h100-int4-ngram": "h200-qwen/sitting14",
    "h200-qwen/h100-prefix-fp8-kv": "h200-qwen/sitting15",
    "h200-qwen/h100-draft": "h200-qwen/sitting16",
    "h200-qwen/tune-confirmation-begun": "h200-qwen/tune-stop43",
    "h200-qwen/tune-confirmed": "h200-qwen/tune-stop45",
}
FETCH = f"git fetch --unshallow (the raw results are in commit {HISTORY[:7]} of main's history)"
# the reason a test marked ``evidence`` skips with where no copy is reachable (tests/conftest.py lets it skip in CI)
MISSING = "needs the raw results"
FIXTURES = ROOT / "tests" / "fixtures" / "evidence"
# samples measured after HISTORY, whose raw results were kept only as their compact extract (the per-request
# rows' itl_ms nulled, every other value as measured): :func:`sample` reads that
COMPACT_ONLY = frozenset({"h200-qwen/7b-24gb"})
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


def _source() -> tuple[str, dict[str, str]] | None:
    """The commit holding the raw results and its folder renames: a local ``evidence`` branch (today's names),
    else :data:`HISTORY` where this clone has it; None in a shallow clone without either."""
    for ref in (BRANCH, f"origin/{BRANCH}"):
        rev = _git("rev-parse", "--verify", "--quiet", f"{ref}^{{commit}}")
        if rev.returncode == 0:
            return rev.stdout.decode().strip(), {}
    if _git("cat-file", "-e", f"{HISTORY}^{{commit}}").returncode == 0:
        return HISTORY, FORMER
    return None


def _from_branch(commit: str, unit: str, work: Path, former: dict[str, str] | None = None) -> None:
    """``work/examples/<unit>`` from ``commit``, where the folder may have had another name (``former``)."""
    then = (former or {}).get(unit, unit)
    archive = work / "part.tar"
    made = _git("archive", "--format=tar", f"--output={archive}", commit, f"examples/{then}")
    if made.returncode != 0:
        raise FileNotFoundError(f"examples/{then} is not in commit {commit[:12]}: {made.stderr.decode()}")
    with tarfile.open(archive) as tar:
        tar.extractall(work, filter="data")
    archive.unlink()
    if then != unit:
        (work / "examples" / unit).parent.mkdir(parents=True, exist_ok=True)
        (work / "examples" / then).rename(work / "examples" / unit)


def _extracted(path: str) -> Path | None:
    """examples/<path> extracted from :func:`_source`, or None where this clone has neither. The whole sample
    folder holding it is extracted, once, so that two paths of one sample never leave a partial copy."""
    found = _source()
    if found is None:
        return None
    commit, former = found
    unit = _unit(path)
    base = Path(tempfile.gettempdir()) / f"worthit-evidence-{commit[:12]}"
    return _unpacked(base, unit, lambda work: _from_branch(commit, unit, work, former)) / Path(path).relative_to(unit)


def available() -> bool:
    """Whether :func:`sample` finds the raw results (a checkout of them, the local branch or main's history)."""
    given = [os.environ.get("WORTHIT_EVIDENCE"), str(ROOT.parent / "worthit-evidence")]
    return any(g and (Path(g) / "examples").is_dir() for g in given) or _source() is not None


def sample(path: str) -> Path:
    """The folder ``examples/<path>`` as measured (the module's docstring); skips the calling test where no copy
    is reachable.
    Only tests marked ``evidence`` call it."""
    if _unit(path) in COMPACT_ONLY:
        return compact(path)
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
    """Write :func:`archive` of ``unit`` from the raw results: reproducible (sorted, no times or owners)."""
    found = _source()
    if found is None:
        raise SystemExit(f"the raw results are not in this clone: {FETCH}")
    with tempfile.TemporaryDirectory() as tmp:
        _from_branch(found[0], unit, Path(tmp), found[1])
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

"""The default checkout stays small enough to read: the tracked files of the working tree weigh at most 25 MB
and at most 500 of them lie outside src/, tests/, docs/ and config/. The samples' raw results live in the
repository's history (commit 40526c6, examples/README.md), not in the working tree."""

from __future__ import annotations

import subprocess
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]
MAX_BYTES = 25_000_000
MAX_FILES_OUTSIDE = 500
PRODUCT = ("src/", "tests/", "docs/", "config/")


def _tracked() -> list[Path]:
    proc = subprocess.run(["git", "-C", str(ROOT), "ls-files", "-z"], capture_output=True, check=False)
    if proc.returncode != 0:
        pytest.skip(f"not a git checkout: {proc.stderr.decode().strip()}")
    # a file staged for removal but not yet committed is listed yet gone: it weighs nothing
    return [ROOT / name for name in proc.stdout.decode().split("\0") if name and (ROOT / name).is_file()]


def test_the_tracked_files_weigh_at_most_25_mb() -> None:
    files = _tracked()
    total = sum(f.stat().st_size for f in files)
    heaviest = sorted(files, key=lambda f: f.stat().st_size, reverse=True)[:5]
    said = ", ".join(f"{f.relative_to(ROOT)} ({f.stat().st_size / 1e6:.1f} MB)" for f in heaviest)
    assert total <= MAX_BYTES, f"{total / 1e6:.1f} MB tracked, at most {MAX_BYTES / 1e6:.0f} MB; heaviest: {said}"


def test_at_most_500_tracked_files_lie_outside_the_product() -> None:
    outside = [f.relative_to(ROOT).as_posix() for f in _tracked()]
    outside = [f for f in outside if not f.startswith(PRODUCT)]
    folders: dict[str, int] = {}
    for f in outside:
        top = "/".join(f.split("/")[:2])
        folders[top] = folders.get(top, 0) + 1
    most = ", ".join(f"{k}: {v}" for k, v in sorted(folders.items(), key=lambda kv: -kv[1])[:5])
    assert len(outside) <= MAX_FILES_OUTSIDE, f"{len(outside)} files outside {PRODUCT}; most in {most}"

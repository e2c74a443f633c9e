"""Atomic file writes: readers (and Snakemake) see the old file or the whole new one, never a part.

Every write goes to a temp file in the target's folder (same file system, so the rename is atomic),
is flushed to disk, and is renamed over the target; on any error the temp file is removed and the
target is left as it was. Standard library only: the server supervisor uses it in any environment.
"""

from __future__ import annotations

import contextlib
import os
import secrets
from collections.abc import Iterator
from pathlib import Path
from typing import BinaryIO


@contextlib.contextmanager
def target(path: str | os.PathLike[str], suffix: str = "") -> Iterator[Path]:
    """Yield a temp path beside ``path``; rename it over ``path`` when the block ends without error.

    For writers that want a path of their own (``df.to_csv(tmp)``, ``fig.savefig(tmp)``): ``suffix``
    keeps the extension a writer may infer the format from. The folder is created when missing; the
    block must create the temp file.
    """
    path = Path(path)
    path.parent.mkdir(parents=True, exist_ok=True)
    # a name no other writer picks; created by the writer with the usual (umask) permissions
    tmp = path.parent / f".{path.name}.{os.getpid()}.{secrets.token_hex(4)}{suffix or '.tmp'}"
    try:
        yield tmp
        with open(tmp, "rb+") as fh:
            os.fsync(fh.fileno())
        os.replace(tmp, path)
    except BaseException:
        tmp.unlink(missing_ok=True)
        raise


@contextlib.contextmanager
def open_binary(path: str | os.PathLike[str]) -> Iterator[BinaryIO]:
    """Yield a binary file handle whose contents replace ``path`` when the block ends without error."""
    with target(path) as tmp, open(tmp, "wb") as fh:
        yield fh
        fh.flush()


def write_bytes(path: str | os.PathLike[str], data: bytes) -> Path:
    """Replace ``path`` with ``data`` atomically; returns the path."""
    with target(path) as tmp:
        tmp.write_bytes(data)
    return Path(path)


def write_text(path: str | os.PathLike[str], text: str, encoding: str = "utf-8") -> Path:
    """Replace ``path`` with ``text`` atomically; returns the path."""
    return write_bytes(path, text.encode(encoding))

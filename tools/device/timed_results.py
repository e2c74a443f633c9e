"""The results under a folder whose figures a machine sets: every worthit result but those of the tables
``worthit.report.context.MACHINE_FREE_TABLES`` names (accuracy: item scores do not depend on the machine's
speed), read from each file's own metadata as the report reads it. ``tools/device/pack-sample.sh``'s
REMEASURE_VARIANTS leaves them out so a sitting measures a variant whole on its one machine.

    python tools/device/timed_results.py FOLDER [--delete]   # one path a line (removed with --delete)
"""

from __future__ import annotations

import argparse
from pathlib import Path

from worthit import schemas
from worthit.report.context import MACHINE_FREE_TABLES


def timed(folder: Path) -> list[Path]:
    """Every Parquet file below ``folder`` that is not of a machine-free table (a file of no worthit table
    counts as timed: it is left out rather than carried as if it were a machine-free result)."""
    return [
        p
        for p in sorted(folder.rglob("*.parquet"))
        if schemas.read_file_metadata(p).get(f"{schemas.META_PREFIX}table", "") not in MACHINE_FREE_TABLES
    ]


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("folder", type=Path)
    ap.add_argument("--delete", action="store_true", help="remove each file listed")
    a = ap.parse_args()
    for p in timed(a.folder):
        print(p)
        if a.delete:
            p.unlink()


if __name__ == "__main__":
    main()

"""Compare two runs' results tables, apart from what a rerun measures anew (used to check that a refactor
changed no behaviour: docs/architecture.md).

    .venvs/workflow/bin/python tools/tables_diff.py BEFORE/results/embedded-default AFTER/results/embedded-default

For every Parquet file under either folder: present in both, the same columns and types, the same number of
rows, and the same values in every column that is not a measured quantity. Measured quantities are the
floating-point columns (latencies, rates, intervals, ratios: a rerun measures them again) and the columns
that carry times or host details (``*_at``, ``*_s``, ``created``, ``host``...). What differs is listed; exit
status 1 when anything does.
"""

from __future__ import annotations

import sys
from pathlib import Path

import pyarrow as pa
import pyarrow.parquet as pq

# columns that are not floats yet differ from run to run by nature (times, paths of temporary files, hosts)
VOLATILE = ("_at", "_s", "created", "host", "timestamp", "time", "pid", "port", "url", "seed_used")


def _compared(field: pa.Field) -> bool:
    t = field.type
    if pa.types.is_floating(t) or (pa.types.is_list(t) and pa.types.is_floating(t.value_type)):
        return False
    if pa.types.is_struct(t) or (pa.types.is_list(t) and pa.types.is_struct(t.value_type)):
        return False  # nested records hold measured figures beside their keys
    return not any(field.name.endswith(v) or field.name == v for v in VOLATILE)


def diff(before: Path, after: Path) -> list[str]:
    files = {p.relative_to(before) for p in before.rglob("*.parquet")}
    files_after = {p.relative_to(after) for p in after.rglob("*.parquet")}
    out = [f"only before: {f}" for f in sorted(files - files_after)]
    out += [f"only after: {f}" for f in sorted(files_after - files)]
    for rel in sorted(files & files_after):
        a, b = pq.read_table(before / rel), pq.read_table(after / rel)
        if a.schema.remove_metadata() != b.schema.remove_metadata():
            out.append(f"{rel}: columns differ: {a.schema.names} vs {b.schema.names}")
            continue
        if a.num_rows != b.num_rows:
            out.append(f"{rel}: {a.num_rows} rows before, {b.num_rows} after")
            continue
        for field in a.schema:
            if _compared(field) and a.column(field.name).to_pylist() != b.column(field.name).to_pylist():
                out.append(f"{rel}: column {field.name} differs")
    return out


def main(argv: list[str]) -> int:
    if len(argv) != 2:
        print(__doc__, file=sys.stderr)
        return 2
    before, after = Path(argv[0]), Path(argv[1])
    found = diff(before, after)
    n = len(list(before.rglob("*.parquet")))
    print("\n".join(found) if found else f"{n} tables: the same files, columns, rows and non-measured values")
    return 1 if found else 0


if __name__ == "__main__":
    raise SystemExit(main(sys.argv[1:]))

"""A report table as it is stored and shown: its schema table, title, caption, columns and rows.

Rows are dicts of a :mod:`worthit.schemas` table (written as Parquet and CSV). Columns say how a cell
reads (``kind``): a measure shows its 95% interval, n and what the interval rests on; an outcome is a
badge; a variant name carries "(random weights)" where its model has them. Markdown and HTML render
every view the same way from these declarations, so no renderer knows a table by name.
"""

from __future__ import annotations

import math
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

from worthit import fmt, schemas

TEXT, NUM, INT, PCT, MEASURE, OUTCOME, VARIANT, CODE = (
    "text",
    "num",
    "int",
    "pct",
    "measure",
    "outcome",
    "variant",
    "code",
)
LONG = "long"  # text whose first clause stands for it in the page (the rest folds out)


@dataclass(frozen=True)
class Column:
    key: str
    header: str
    kind: str = TEXT
    digits: int = 1


@dataclass
class View:
    table: schemas.Table
    title: str
    caption: str
    columns: Sequence[Column]
    rows: list[dict[str, Any]]
    order: int = 50
    empty: str = "No rows: this study has no such results."
    notes: list[str] = field(default_factory=list)  # lines shown under the table (commands, rules)

    @property
    def short(self) -> str:
        """The file name stem: report_levels -> levels."""
        return short_name(self.table)


def short_name(table: schemas.Table) -> str:
    """A report table's short name, its files' stem: report_levels -> levels."""
    return table.name.removeprefix("report_")


def _missing(x: Any) -> bool:
    return fmt.is_missing(x)


def measure_text(row: Mapping[str, Any], key: str, digits: int = 1) -> str:
    """``12.3 [11.0, 14.1] n=64 (single run)``; an exact count reads ``12 (exact count)``."""
    v: Any = row.get(key)
    if _missing(v):
        return fmt.MISSING
    lo: Any = row.get(f"{key}_ci95_low")
    hi: Any = row.get(f"{key}_ci95_high")
    n: Any = row.get(f"{key}_n")
    basis = row.get(f"{key}_basis") or row.get("interval_basis")
    out = fmt.cell(float(v), digits)
    if basis == "exact count" or (not _missing(lo) and lo == hi == v and basis in (None, "exact count")):
        return f"{out} (exact count)"
    why = row.get(f"_{key}_why")  # display-only: why a figure has no interval
    has = not _missing(lo) and not _missing(hi)
    out += (
        f" [{fmt.cell(float(lo), digits)}, {fmt.cell(float(hi), digits)}]"
        if has
        else f" [no interval{': ' + why if why else ''}]"
    )
    if not _missing(n):
        out += f" n={int(n)}"
    if basis and has:
        out += f" ({basis})"
    return out


def cell_text(row: Mapping[str, Any], col: Column, labels: Callable[[str], str] | None = None) -> str:
    v: Any = row.get(col.key)
    if col.kind == MEASURE:
        return measure_text(row, col.key, col.digits)
    if _missing(v):
        return fmt.MISSING
    if col.kind == PCT:
        return f"{float(v):+,.{col.digits}f}%" if col.key.endswith("change_pct") else f"{float(v):,.{col.digits}f}%"
    if col.kind == INT and not isinstance(v, bool):
        return fmt.cell(int(v))
    if col.kind == NUM:
        return fmt.cell(float(v), col.digits)
    if col.kind == VARIANT and labels is not None:
        return labels(str(v))
    if isinstance(v, list):
        return fmt.cell(" ".join(map(str, v)))
    return fmt.cell(v, col.digits)


def markdown(view: View, labels: Callable[[str], str] | None = None) -> str:
    if not view.rows:
        return f"_{view.empty}_"
    cols = list(view.columns)
    lines = ["| " + " | ".join(c.header for c in cols) + " |", "|" + "---|" * len(cols)]
    for r in view.rows:
        lines.append("| " + " | ".join(cell_text(r, c, labels).replace("|", "\\|") for c in cols) + " |")
    return "\n".join(lines)


def pct(new: float | None, ref: float | None) -> float | None:
    if new is None or ref is None or ref == 0 or math.isnan(new) or math.isnan(ref):
        return None
    return (new - ref) / abs(ref) * 100


def measure_cols(prefix: str, m: Any) -> dict[str, Any]:
    """A :class:`~worthit.report.measure.Measure` as the four columns of a schema measure (plus, for display
    only, why it has no interval: keys starting with ``_`` are not written)."""
    if m is None or m.value is None:
        return {prefix: None, f"{prefix}_n": None, f"{prefix}_ci95_low": None, f"{prefix}_ci95_high": None}
    out = {
        prefix: m.value,
        f"{prefix}_n": m.n or None,
        f"{prefix}_ci95_low": m.low,
        f"{prefix}_ci95_high": m.high,
    }
    if m.why_none:
        out[f"_{prefix}_why"] = m.why_none
    return out


def stored(view: View) -> list[dict[str, Any]]:
    """The view's rows as its schema table stores them (display-only keys dropped)."""
    cols = set(view.table.columns)
    return [{k: v for k, v in r.items() if k in cols} for r in view.rows]

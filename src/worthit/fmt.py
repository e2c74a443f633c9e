"""Numbers and Markdown tables as every summary and report page shows them.

One cell format: missing (None, NaN, pandas' NA) is an en dash, booleans are yes/no, integers get
thousands separators, floats a fixed number of digits, text is folded onto one line with ``|``
escaped (a failure reason can hold a log line). A *measure* column shows its value with the 95%
interval and n stored beside it (``<key>_ci95_low``, ``<key>_ci95_high``, ``<key>_n``). Standard
library only.
"""

from __future__ import annotations

import math
import numbers
from collections.abc import Collection, Iterable, Mapping, Sequence
from typing import Any

MISSING = "–"


def is_missing(x: object) -> bool:
    """None, a float NaN, or pandas' NA (recognised without importing pandas)."""
    if x is None or type(x).__name__ == "NAType":
        return True
    return isinstance(x, numbers.Real) and not isinstance(x, numbers.Integral) and math.isnan(float(x))


def cell(x: object, digits: int = 1) -> str:
    """One table cell: ``1234`` -> ``1,234``, ``0.5`` -> ``0.5``, ``True`` -> ``yes``, None -> ``–``."""
    if is_missing(x):
        return MISSING
    if isinstance(x, bool) or type(x).__name__ == "bool_":  # numpy's bool is no int subclass
        return "yes" if x else "no"
    if isinstance(x, numbers.Integral):
        return f"{int(x):,}"
    if isinstance(x, numbers.Real):
        return f"{float(x):,.{digits}f}"
    return " ".join(str(x).split()).replace("|", "\\|")


def measure(row: Mapping[str, Any], key: str, digits: int = 1) -> str:
    """``row[key]`` with its interval and n: ``12.3 [11.0, 14.1] n=64``; ``[no CI]`` where the row has
    no interval for it (an interval of one point, as a value every run agrees on, is not shown)."""
    v: Any = row.get(key)
    if is_missing(v):
        return MISSING
    lo: Any = row.get(f"{key}_ci95_low")
    hi: Any = row.get(f"{key}_ci95_high")
    n: Any = row.get(f"{key}_n")
    out = cell(float(v), digits)
    if not is_missing(lo) and not is_missing(hi) and not (lo == hi == v):
        out += f" [{cell(float(lo), digits)}, {cell(float(hi), digits)}]"
    elif not (lo == hi == v):
        out += " [no CI]"
    if not is_missing(n):
        out += f" n={int(n)}"
    return out


def markdown_table(
    rows: Iterable[Mapping[str, Any]],
    columns: Iterable[tuple[str, str]],
    measures: Collection[str] = (),
    *,
    digits: int = 1,
    empty: str | None = None,
) -> str:
    """A Markdown table of ``rows`` (mappings, e.g. ``df.to_dict("records")``) in the given
    (key, header) columns; keys in ``measures`` show their interval (:func:`measure`). Without rows:
    ``empty`` when given, else the header alone."""
    cols: Sequence[tuple[str, str]] = list(columns)
    lines = ["| " + " | ".join(h for _, h in cols) + " |", "|" + "---|" * len(cols)]
    body = [
        "| " + " | ".join(measure(r, c, digits) if c in measures else cell(r.get(c), digits) for c, _ in cols) + " |"
        for r in rows
    ]
    if not body and empty is not None:
        return empty
    return "\n".join(lines + body)

"""The decision in the terminal: what ``worthit report`` and the end of a workflow run print.

The same rows as the top of the page (the verdicts table's headline columns, :mod:`worthit.report.headline`):
one line per optimisation with its verdict, the effect as measured, the accuracy cost, the effort and why; the
controls and helpers under it; then each registered experiment's part (its
:class:`~worthit.report.experiments.Summary`: the recommended deployments as their ``vllm serve`` commands with
what they promise and measured, what a token costs) and where the report is. Everything is read from stored rows,
so the end of a workflow run prints it from the report's Parquet tables without rebuilding anything.
"""

from __future__ import annotations

import os
import shutil
import sys
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any

from rich.console import Console
from rich.markup import escape
from rich.table import Table

from worthit import fmt, schemas
from worthit.report import experiments
from worthit.report.views import short_name

STYLES = {
    "adopt": "bold green",
    "reject": "bold red",
    "inconclusive": "bold yellow",
    "failed": "bold magenta",
    "suspect": "bold dark_orange",
}
Rows = Sequence[Mapping[str, Any]]


def escaped(x: Any) -> str:
    """A cell as text, with rich's markup characters escaped (a name may hold "[...]")."""
    return "" if fmt.is_missing(x) else escape(str(x))


def summary_tables() -> list[schemas.Table]:
    """The report tables the registered experiments' parts of the summary read, in their order."""
    return [t for s in experiments.summaries() for t in s.tables]


def decision_table(verdicts: Sequence[Mapping[str, Any]], width: int = 160) -> Table:
    """One row per optimisation; below ``width`` 120 the one line of why is left to the page."""
    why = width >= 120
    t = Table(title="What to turn on", title_justify="left", show_lines=True, expand=True)
    for col, ratio in (
        ("optimisation", 3),
        ("verdict", 2),
        ("effect as measured \\[95% interval]", 3),
        ("accuracy cost", 2),
        ("effort", 2),
        ("why", 4),
    )[: 6 if why else 5]:
        t.add_column(col, overflow="fold", ratio=ratio)
    for r in verdicts:
        if (escaped(r.get("role")) or "optimisation") != "optimisation" or r.get("outcome") == "control":
            continue
        outcome = escaped(r.get("outcome"))
        verdict = f"[{STYLES.get(outcome, 'bold')}]{outcome}[/]" + (
            (":" if outcome == "suspect" else "") + f"\n{escaped(r.get('condition'))}" if r.get("condition") else ""
        )
        t.add_row(
            f"{escaped(r.get('optimisation'))}\n[dim]{escaped(r.get('variant'))}[/dim]",
            verdict,
            (escaped(r.get("effect")) or escaped(r.get("benefit")))
            + (f"\n[dim]per workload: {escaped(r.get('by_workload'))}[/dim]" if r.get("by_workload") else ""),
            escaped(r.get("accuracy_summary")) or escaped(r.get("accuracy_cost")),
            escaped(r.get("effort")),
            *([escaped(r.get("why")) or escaped(r.get("reason"))[:200]] if why else []),
        )
    return t


def show_summary(
    verdicts: Rows,
    stored: Mapping[str, Rows],
    page: str | os.PathLike[str] | None = None,
    *,
    console: Console | None = None,
    gaps: str = "",
) -> None:
    """Print the decision table, the checks, each registered experiment's part and the report's path.

    ``stored``: the rows of the tables the experiments' parts read (:func:`summary_tables`), by short name; an
    experiment prints nothing of a table it is not given."""
    # a terminal's own width; a log or a pipe (the end of a workflow run, captured) gets a wide table
    width = shutil.get_terminal_size((160, 40)).columns if sys.stdout.isatty() else 160
    con = console or Console(width=width, highlight=False)
    con.print(decision_table(verdicts, con.width))
    for r in verdicts:
        role = escaped(r.get("role")) or ("control" if r.get("outcome") == "control" else "")
        if role and role != "optimisation":
            con.print(f"[dim]checked:[/dim] [bold]{escaped(r.get('variant'))}[/bold] ({role}): {escaped(r.get('why'))}")
    for part in experiments.summaries():
        part.show(con, stored)
    if gaps:
        con.print(f"\n{gaps}")
    if page:
        con.print(f"\nreport: {page}", markup=False)


def _rows(path: Path, table: schemas.Table) -> list[dict[str, Any]]:
    if not path.exists():
        return []
    rows: list[dict[str, Any]] = schemas.read(path, table).table.to_pylist()
    return rows


def print_results(results: str | os.PathLike[str], since: float | None = None, console: Console | None = None) -> bool:
    """The summary of a results folder's stored report (``results/<study>/report/*.parquet`` and
    ``report.html``), when its page exists and, with ``since``, was written after that time (the workflow's
    start: a run that did not render the report prints nothing). Returns whether it printed."""
    root = Path(results)
    page, tables = root / "report.html", root / "report"
    if not page.exists() or not (tables / "verdicts.parquet").exists():
        return False
    if since is not None and page.stat().st_mtime < since:
        return False
    try:
        verdicts = _rows(tables / "verdicts.parquet", schemas.REPORT_VERDICTS)
        stored = {short_name(t): _rows(tables / f"{short_name(t)}.parquet", t) for t in summary_tables()}
    except (schemas.SchemaError, schemas.UnreadableFile):  # an older report's tables: the page is still there
        (console or Console()).print(f"report: {page}")
        return True
    show_summary(verdicts, stored, page, console=console)
    return True


def after_run(results: str | os.PathLike[str], started: float) -> None:
    """The Snakefile's ``onsuccess:``: the decision, if this run wrote the report."""
    print_results(results, since=started)

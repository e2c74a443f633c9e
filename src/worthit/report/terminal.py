"""The decision in the terminal: what ``worthit report`` and the end of a workflow run print.

The same rows as the top of the page (the verdicts table's headline columns, :mod:`worthit.report.headline`):
one line per optimisation with its verdict, the effect as measured, the accuracy cost, the effort and why; the
controls and helpers under it; each recommended deployment as its ``vllm serve`` command with what it promises
(and measured, where validated); and where the report is. Everything is read from stored rows, so the end of a
workflow run prints it from the report's Parquet tables without rebuilding anything.
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
from worthit.experiments.deploy.tables import REPORT_DEPLOYMENTS, REPORT_TOKEN_COST, REPORT_VALIDATION
from worthit.experiments.deploy.token_cost import summary_lines
from worthit.report.decide import REGIME_NAMES
from worthit.report.views import measure_text

STYLES = {
    "adopt": "bold green",
    "reject": "bold red",
    "inconclusive": "bold yellow",
    "failed": "bold magenta",
    "suspect": "bold dark_orange",
}
PROMISED = (
    ("ttft_ms_p99", "TTFT P99", "ms"),
    ("tpot_ms_p99", "TPOT P99", "ms"),
    ("output_tok_per_s", "output", "tok/s"),
)


def _t(x: Any) -> str:
    """A cell as text, with rich's markup characters escaped (a name may hold "[...]")."""
    return "" if fmt.is_missing(x) else escape(str(x))


def _figure(row: Mapping[str, Any], key: str, unit: str) -> str:
    """``253 ms [217, 293]``: the value and its interval, without n and basis (the page has them); a value
    without an interval says what it rests on: ``1,661.5 ms [no interval: n=7, single run]``."""
    text, _, n = measure_text(row, key, 1 if unit == "ms" else 0).partition(" n=")
    value, _, rest = text.partition(" ")
    if rest == "[no interval]" and n:
        basis = row.get("interval_basis")
        rest = f"[no interval: n={n.split()[0]}" + (f", {basis}" if not fmt.is_missing(basis) else "") + "]"
    return f"{value} {unit} {rest}".strip()


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
        if (_t(r.get("role")) or "optimisation") != "optimisation" or r.get("outcome") == "control":
            continue
        outcome = _t(r.get("outcome"))
        verdict = f"[{STYLES.get(outcome, 'bold')}]{outcome}[/]" + (
            (":" if outcome == "suspect" else "") + f"\n{_t(r.get('condition'))}" if r.get("condition") else ""
        )
        t.add_row(
            f"{_t(r.get('optimisation'))}\n[dim]{_t(r.get('variant'))}[/dim]",
            verdict,
            (_t(r.get("effect")) or _t(r.get("benefit")))
            + (f"\n[dim]per workload: {_t(r.get('by_workload'))}[/dim]" if r.get("by_workload") else ""),
            _t(r.get("accuracy_summary")) or _t(r.get("accuracy_cost")),
            _t(r.get("effort")),
            *([_t(r.get("why")) or _t(r.get("reason"))[:200]] if why else []),
        )
    return t


def print_summary(
    verdicts: Sequence[Mapping[str, Any]],
    deployments: Sequence[Mapping[str, Any]],
    validation: Sequence[Mapping[str, Any]],
    page: str | os.PathLike[str] | None,
    *,
    console: Console | None = None,
    gaps: str = "",
    token_cost: Sequence[Mapping[str, Any]] = (),
) -> None:
    """Print the decision table, the checks, the deployments, what a token costs and the report's path."""
    # a terminal's own width; a log or a pipe (the end of a workflow run, captured) gets a wide table
    width = shutil.get_terminal_size((160, 40)).columns if sys.stdout.isatty() else 160
    con = console or Console(width=width, highlight=False)
    con.print(decision_table(verdicts, con.width))
    for r in verdicts:
        role = _t(r.get("role")) or ("control" if r.get("outcome") == "control" else "")
        if role and role != "optimisation":
            con.print(f"[dim]checked:[/dim] [bold]{_t(r.get('variant'))}[/bold] ({role}): {_t(r.get('why'))}")
    measured: dict[tuple[str, str], Mapping[str, Any]] = {
        (str(v.get("scenario")), str(v.get("quantity"))): v for v in validation
    }
    if deployments:
        con.print("\n[bold]Deployments[/bold]")
    for d in deployments:
        scenario = str(d.get("scenario"))
        name = REGIME_NAMES.get(scenario, scenario)
        if d.get("status") != schemas.STATUS_OK or fmt.is_missing(d.get("command")):
            con.print(f"{name}: none ({_t(d.get('reason')) or _t(d.get('status'))})")
            continue
        con.print(f"{name}: {_t(d.get('variant'))} at concurrency {_t(d.get('concurrency'))}")
        con.print(f"  {d.get('command')}", soft_wrap=True, markup=False)
        promised = []
        for key, label, unit in PROMISED:
            if fmt.is_missing(d.get(key)):
                continue
            text = f"{label} {_figure(d, key, unit)}"
            m = measured.get((scenario, {"output": "output tok/s"}.get(label, label)))
            if m is not None and not fmt.is_missing(m.get("measured")):
                text += f" (measured {_figure(m, 'measured', unit)}: {m.get('outcome')})"
            promised.append(text)
        con.print("  promises " + "; ".join(promised), markup=False)
    if token_cost:  # beside the deployments: energy and price at each variant's best level under the SLO
        con.print("\n[bold]What a token costs[/bold] (best level under the SLO)")
        for line in summary_lines(token_cost):
            con.print(f"  {line}", markup=False)
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
        deployments = _rows(tables / "deployments.parquet", REPORT_DEPLOYMENTS)
        validation = _rows(tables / "validation.parquet", REPORT_VALIDATION)
        token_cost = _rows(tables / "token_cost.parquet", REPORT_TOKEN_COST)
    except (schemas.SchemaError, schemas.UnreadableFile):  # an older report's tables: the page is still there
        (console or Console()).print(f"report: {page}")
        return True
    print_summary(verdicts, deployments, validation, page, console=console, token_cost=token_cost)
    return True


def after_run(results: str | os.PathLike[str], started: float) -> None:
    """The Snakefile's ``onsuccess:``: the decision, if this run wrote the report."""
    print_results(results, since=started)

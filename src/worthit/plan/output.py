"""The plan's output: its Parquet tables, its Markdown and the printed cards (pyarrow and rich are imported
when called)."""

from __future__ import annotations

import os
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any

from worthit.plan.prerequisites import MET, NOT_MET, UNKNOWN
from worthit.plan.shapes import GIB
from worthit.plan.study import StudyPlan


def write(plan: StudyPlan, path: str | os.PathLike[str]) -> Path:
    from worthit import schemas

    return schemas.write(path, schemas.PLAN, plan.rows, metadata=plan.metadata)


def write_comparison(
    rows: Sequence[Mapping[str, Any]], path: str | os.PathLike[str], metadata: Mapping[str, Any] | None = None
) -> Path:
    from worthit import schemas

    return schemas.write(path, schemas.PLAN_VS_MEASURED, list(rows), metadata=metadata)


def comparison_markdown(rows: Sequence[Mapping[str, Any]], study: str = "") -> str:
    from worthit.fmt import markdown_table

    shown = [
        {
            **r,
            "within": "–"
            if r.get("within_tolerance") is None
            else ("yes" if r["within_tolerance"] else f"NO ({r['flag']})"),
            "tol": f"{'x' if r['tolerance_kind'] == 'factor' else '±'}{r['tolerance']:g}"
            if r["tolerance_kind"] == "factor"
            else f"±{r['tolerance']:.0%}",
        }
        for r in rows
    ]
    cols = (
        ("variant", "variant"),
        ("quantity", "quantity"),
        ("predicted", "predicted"),
        ("measured", "measured"),
        ("unit", "unit"),
        ("ratio", "measured / predicted"),
        ("tol", "tolerance"),
        ("within", "within"),
        ("note", "note"),
    )
    head = f"# Plan vs measured{': ' + study if study else ''}\n\n"
    return head + markdown_table(shown, cols, digits=2, empty="nothing measured to compare") + "\n"


_MARK = {MET: "✓", NOT_MET: "✗", UNKNOWN: "?"}


def _fmt(x: Any, digits: int = 1, unit: str = "") -> str:
    from worthit.fmt import cell

    s = cell(x, digits)
    return s + (f" {unit}" if unit and s != "–" else "")


def card_lines(row: Mapping[str, Any]) -> list[tuple[str, str]]:
    """The predictions of one plan row as (quantity, value) pairs, in the card's order."""
    levels, tp = row.get("levels") or [], row.get("tpot_expected_ms") or []
    rise = ", ".join(f"c={c}: {t:.1f}" for c, t in zip(levels, tp, strict=False)) if tp else None
    ovh = row.get("overhead_gib")
    return [
        ("model config", str(row.get("model_config") or "–")),
        (
            "weights",
            _fmt((row.get("weight_bytes") or 0) / GIB if row.get("weight_bytes") else None, 2, "GiB")
            + (f" ({row['weight_source']})" if row.get("weight_source") else ""),
        ),
        ("KV bytes per token", _fmt(row.get("kv_bytes_per_token"), 0) + f" ({row.get('kv_cache_dtype') or 'auto'})"),
        (
            "KV pool",
            _fmt(row.get("kv_memory_gib"), 2, "GiB")
            + (f" after {ovh:.2f} GiB overhead ({row.get('overhead_source')})" if ovh is not None else ""),
        ),
        (
            "KV blocks × block",
            f"{_fmt(row.get('num_blocks'), 0)} × {_fmt(row.get('block_size_tokens'), 0)}"
            f" = {_fmt(row.get('kv_tokens'), 0)} tokens",
        ),
        (
            "critical concurrency",
            _fmt(row.get("critical_concurrency"), 1) + f" at {_fmt(row.get('tokens_per_request'), 0)} tokens/request",
        ),
        ("knee", _fmt(row.get("knee_concurrency"), 0) + (f" (bound: {row['bound']})" if row.get("bound") else "")),
        (
            "TPOT floor c=1",
            _fmt(row.get("tpot_floor_ms_c1"), 2, "ms") + f" at {_fmt(row.get('peak_bandwidth_gb_s'), 0)} GB/s",
        ),
        (
            "TPOT expected",
            (rise + " ms" if rise else "–")
            + (f" (bandwidth fraction {row['bandwidth_fraction']:.2f})" if row.get("bandwidth_fraction") else ""),
        ),
        ("throughput ceiling", _fmt(row.get("throughput_ceiling_tok_per_s"), 0, "tok/s")),
        ("estimated wall time", _fmt((row.get("est_wall_s") or 0) / 60 if row.get("est_wall_s") else None, 1, "min")),
    ]


def markdown(plan: StudyPlan) -> str:
    from worthit.fmt import markdown_table

    hw = plan.hardware
    lines = [f"# Plan: {plan.study} on {hw.name} x {hw.count or 'CPU'}", "", f"Hardware: {hw.source}", ""]
    if plan.calibration:
        lines += [f"Calibrated from {plan.calibration.source}", ""]
    for row in plan.rows:
        state = "not applicable" if row["status"] == "not_applicable" else "runs"
        lines += [f"## {row['variant']} ({row['model']}): {state}", ""]
        checks = [{**c, "status": f"{_MARK.get(c['status'], '')} {c['status']}"} for c in row["checks"]]
        lines += [
            markdown_table(
                checks,
                (("rule", "rule"), ("status", "status"), ("detail", "detail"), ("source", "source")),
                empty="no prerequisite concerns this variant",
            ),
            "",
        ]
        lines += [
            markdown_table([{"q": q, "v": v} for q, v in card_lines(row)], (("q", "prediction"), ("v", "value"))),
            "",
        ]
        if row.get("notes"):
            lines += [f"Notes: {row['notes']}", ""]
    if plan.workloads:
        lines += ["## Workloads: what each experiment's levels send, and why", ""]
        lines += [f"- {w}" for w in plan.workloads] + [""]
    total = sum(r.get("est_wall_s") or 0 for r in plan.rows)
    if total:
        lines.append(f"Estimated wall time of the study: {total / 3600:.1f} h (lm-eval excluded)")
    return "\n".join(lines) + "\n"


def print_cards(plan: StudyPlan, console: Any = None) -> None:
    from rich.console import Console
    from rich.panel import Panel
    from rich.table import Table

    console = console or Console()
    hw = plan.hardware
    console.print(f"[bold]Plan[/bold] {plan.study} on {hw.name} × {hw.count or 'CPU'} — {hw.source}")
    if plan.calibration:
        c = plan.calibration
        console.print(
            f"calibrated from {c.source} ({c.gpu}): bandwidth fraction {_fmt(c.bandwidth_fraction, 2)}, "
            f"overhead {_fmt(c.overhead_gib, 2, 'GiB')}, throughput fraction {_fmt(c.throughput_fraction, 2)}"
        )
    for row in plan.rows:
        checks = Table(show_header=True, box=None, pad_edge=False)
        for col in ("", "prerequisite", "detail", "source"):
            checks.add_column(col, overflow="fold")
        for c in row["checks"]:
            color = {MET: "green", NOT_MET: "red", UNKNOWN: "yellow"}[c["status"]]
            checks.add_row(
                f"[{color}]{_MARK[c['status']]}[/{color}]", c["rule"], c["detail"], f"[dim]{c['source']}[/dim]"
            )
        preds = Table(show_header=False, box=None, pad_edge=False)
        preds.add_column(style="bold")
        preds.add_column(overflow="fold")
        for q, v in card_lines(row):
            preds.add_row(q, v)
        body = Table.grid(padding=(1, 0))
        body.add_row(checks if row["checks"] else "[dim]no prerequisite concerns this variant[/dim]")
        body.add_row(preds)
        if row.get("notes"):
            body.add_row(f"[dim]{row['notes']}[/dim]")
        na = row["status"] == "not_applicable"
        title = f"{row['variant']} ({row['model']})" + (" — [red]not applicable[/red]" if na else "")
        console.print(Panel(body, title=title, border_style="red" if na else "green"))
    if plan.workloads:
        console.print("[bold]Workloads[/bold]: what each experiment's levels send, and why", highlight=False)
        for w in plan.workloads:
            console.print(f"  {w}", style="red" if "WARNING:" in w else None, highlight=False, markup=False)
    total = sum(r.get("est_wall_s") or 0 for r in plan.rows)
    if total:
        console.print(
            f"estimated wall time of the study: {total / 3600:.1f} h (lm-eval excluded); planned in {plan.took_s:.2f} s"
        )

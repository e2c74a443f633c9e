"""The deployments' report side: what the report core asks of the deploy stage, from the verdicts on.

Once every optimisation is decided, :mod:`.recommend` chooses the deployments and sets their validation runs
against the promise (the report's ``deployments`` and ``validation`` tables, :func:`verdict_views`); the
validation table needs the deployments served, so the decision's tables leave it to the page
(``after_decision``). The page shows each deployment as a command to copy under the decision
(:func:`deployment_blocks`) and the terminal prints it with what it promises and measured (:func:`show`, from
the stored rows alone: the end of a workflow run reads them back from their Parquet files).
"""

from __future__ import annotations

import shlex
from collections.abc import Mapping, Sequence
from typing import Any

from rich.console import Console

from worthit import fmt, schemas
from worthit.experiments.deploy.recommend import FIGURES, deployments_view, validation_view
from worthit.experiments.deploy.tables import REPORT_DEPLOYMENTS, REPORT_VALIDATION
from worthit.report.context import Context, Pair
from worthit.report.decide import REGIME_NAMES, Verdict
from worthit.report.experiments import Experiment, Rows, Summary
from worthit.report.render import badge
from worthit.report.terminal import escaped
from worthit.report.views import View, measure_text, short_name, stored

NAME = "deploy"
PROMISED = (  # the figures the terminal prints of a promise (the page shows every one of FIGURES)
    ("ttft_ms_p99", "TTFT P99", "ms"),
    ("tpot_ms_p99", "TPOT P99", "ms"),
    ("output_tok_per_s", "output", "tok/s"),
)


def analyse(_ctx: Context) -> None:
    """Nothing of its own to analyse: the deployments are chosen from the verdicts (:func:`verdict_views`)."""
    return None


def verdict_views(ctx: Context, _a: None, verdicts: Mapping[str, Verdict], pairs: Mapping[str, Pair]) -> list[View]:
    """The recommended deployments, and what their validation runs measured against the promise."""
    deployments = deployments_view(ctx, verdicts, pairs)
    return [deployments, validation_view(ctx, stored(deployments))]


# --- the page -------------------------------------------------------------------------------------------
def _text(x: Any) -> str:
    return "" if fmt.is_missing(x) else str(x)


def _command_lines(command: str) -> str:
    """``vllm serve MODEL --a 1 --b 2`` as one flag a line, with shell continuations (still one command)."""
    try:
        args = shlex.split(command)
    except ValueError:
        return command
    head: list[str] = []
    lines: list[list[str]] = []
    for a in args:
        if a.startswith("--") and (lines or head):
            lines.append([a])
        elif lines:
            lines[-1].append(a)
        else:
            head.append(a)
    out = [shlex.join(head)] + ["  " + shlex.join(x) for x in lines]
    return " \\\n".join(out)


def deployment_blocks(views: Sequence[View]) -> list[dict[str, Any]]:
    """Each recommended deployment as a command to copy, with the figures it promises and, where its
    validation ran, what it measured (a block of the page's deployments section)."""
    dep = next((v for v in views if v.table is REPORT_DEPLOYMENTS), None)
    val = next((v for v in views if v.table is REPORT_VALIDATION), None)
    measured: dict[tuple[str, str], Mapping[str, Any]] = {}
    for r in val.rows if val else []:
        measured[(str(r.get("scenario")), str(r.get("quantity")))] = r
    out: list[dict[str, Any]] = []
    for r in dep.rows if dep else []:
        scenario = str(r.get("scenario"))
        name = REGIME_NAMES.get(scenario, scenario)
        if r.get("status") != schemas.STATUS_OK or fmt.is_missing(r.get("command")):
            out.append({"title": name, "reason": _text(r.get("reason")) or _text(r.get("status"))})
            continue
        figs = []
        for key, label, _unit, _higher in FIGURES:
            if fmt.is_missing(r.get(key)):
                continue
            m = measured.get((scenario, label))
            figs.append(
                {
                    "label": label,
                    "promised": measure_text(r, key),
                    "measured": measure_text(m, "measured") if m is not None else "not validated",
                    "outcome": _text(m.get("outcome")) if m is not None else "",
                    "badge": badge(_text(m.get("outcome"))) if m is not None else "absent",
                }
            )
        slo = [
            f"P99 TTFT \u2264 {r['slo_ttft_ms']:g} ms" if not fmt.is_missing(r.get("slo_ttft_ms")) else "",
            f"P99 TPOT \u2264 {r['slo_tpot_ms']:g} ms" if not fmt.is_missing(r.get("slo_tpot_ms")) else "",
        ]
        out.append(
            {
                "title": f"{name}: {r.get('variant')} at concurrency {r.get('concurrency')}",
                "command": _command_lines(str(r["command"])),
                "figures": figs,
                "slo": ", ".join(x for x in slo if x),
                "chosen_by": _text(r.get("chosen_by")),
                "validated": any(f["outcome"] for f in figs),
            }
        )
    return out


# --- the terminal ---------------------------------------------------------------------------------------
def figure_text(row: Mapping[str, Any], key: str, unit: str) -> str:
    """``253 ms [217, 293]``: the value and its interval, without n and basis (the page has them); a value
    without an interval says what it rests on: ``1,661.5 ms [no interval: n=7, single run]``."""
    text, _, n = measure_text(row, key, 1 if unit == "ms" else 0).partition(" n=")
    value, _, rest = text.partition(" ")
    if rest == "[no interval]" and n:
        basis = row.get("interval_basis")
        rest = f"[no interval: n={n.split()[0]}" + (f", {basis}" if not fmt.is_missing(basis) else "") + "]"
    return f"{value} {unit} {rest}".strip()


def show(con: Console, rows: Mapping[str, Rows]) -> None:
    """Each recommended deployment: its ``vllm serve`` command and what it promises (and measured, where
    validated)."""
    deployments = rows.get(short_name(REPORT_DEPLOYMENTS), ())
    measured: dict[tuple[str, str], Mapping[str, Any]] = {
        (str(v.get("scenario")), str(v.get("quantity"))): v for v in rows.get(short_name(REPORT_VALIDATION), ())
    }
    if deployments:
        con.print("\n[bold]Deployments[/bold]")
    for d in deployments:
        scenario = str(d.get("scenario"))
        name = REGIME_NAMES.get(scenario, scenario)
        if d.get("status") != schemas.STATUS_OK or fmt.is_missing(d.get("command")):
            con.print(f"{name}: none ({escaped(d.get('reason')) or escaped(d.get('status'))})")
            continue
        con.print(f"{name}: {escaped(d.get('variant'))} at concurrency {escaped(d.get('concurrency'))}")
        con.print(f"  {d.get('command')}", soft_wrap=True, markup=False)
        promised = []
        for key, label, unit in PROMISED:
            if fmt.is_missing(d.get(key)):
                continue
            text = f"{label} {figure_text(d, key, unit)}"
            m = measured.get((scenario, {"output": "output tok/s"}.get(label, label)))
            if m is not None and not fmt.is_missing(m.get("measured")):
                text += f" (measured {figure_text(m, 'measured', unit)}: {m.get('outcome')})"
            promised.append(text)
        con.print("  promises " + "; ".join(promised), markup=False)


EXPERIMENT = Experiment(
    NAME,
    analyse,
    order=90,  # its part of the terminal's summary before what a token costs (token_cost, 95)
    verdict_views=verdict_views,
    after_decision=(REPORT_VALIDATION,),
    commands=deployment_blocks,
    summary=Summary((REPORT_DEPLOYMENTS, REPORT_VALIDATION), show),
)

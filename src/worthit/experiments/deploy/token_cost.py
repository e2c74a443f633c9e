"""What a token costs: per variant, its best level under the SLO, the energy its GPUs drew per output token
there (NVML, :mod:`worthit.energy`) and the price of a million output tokens (``cost.usd_per_gpu_hour``,
:mod:`worthit.price`). The report shows it beside the recommended deployments (``report_token_cost``) and the
terminal prints it under them."""

from __future__ import annotations

import statistics
from collections.abc import Mapping, Sequence
from typing import Any

from rich.console import Console

from worthit import energy, price, schemas
from worthit.experiments.deploy.tables import REPORT_TOKEN_COST
from worthit.experiments.loadtest.report import Level, LoadAnalysis
from worthit.report.context import Context
from worthit.report.experiments import Experiment, Rows, Summary
from worthit.report.views import INT, MEASURE, NUM, TEXT, VARIANT, Column, View, measure_cols, short_name

NAME = "token_cost"
NO_LEVEL = "no level met the SLO"


def best_under_slo(levels: Sequence[Level], ctx: Context) -> Level | None:
    """The level with the most output tok/s among those whose P99 TTFT and P99 TPOT meet the SLO."""
    cands = [lv for lv in levels if lv.ok and lv.meets(ctx.slo) is not False and lv.output_tok_per_s.value]
    return max(cands, key=lambda lv: lv.output_tok_per_s.value or 0.0) if cands else None


def level_energy(metadata: Sequence[Mapping[str, Any]]) -> tuple[float | None, int, str | None]:
    """(mean J per output token over the runs that measured it, those runs, why none did)."""
    records = [m.get("energy") if isinstance(m.get("energy"), Mapping) else None for m in metadata]
    values = [float(r["energy_j_per_output_token"]) for r in records if r and r.get("energy_j_per_output_token")]
    if values:
        return statistics.fmean(values), len(values), None
    reasons = [str(r.get("energy_reason")) for r in records if r and r.get("energy_reason")]
    return None, 0, (reasons[0] if reasons else energy.NOT_RECORDED)


def rows(ctx: Context, load: LoadAnalysis) -> list[dict[str, Any]]:
    out: list[dict[str, Any]] = []
    for v in ctx.variants:
        if not ctx.configured(v):
            continue
        usd = price.usd_per_gpu_hour(ctx.study.cfg, v)
        gpus = ctx.study.variant(v).gpus
        base: dict[str, Any] = {"variant": v, "usd_per_gpu_hour": usd, "gpus": gpus}
        best = best_under_slo(load.ok(v), ctx)
        if best is None:
            reason = NO_LEVEL if load.ok(v) else "no load level measured"
            out.append({**base, "status": schemas.STATUS_NOT_RUN, "reason": reason, "price_note": reason})
            continue
        files = ctx.results.variant(v).levels().get(best.concurrency, [])
        j, runs, why = level_energy([f.metadata for f in files if f.ok])
        tok = best.output_tok_per_s
        dollars = price.usd_per_million_tokens(usd, gpus, tok.value)
        out.append(
            {
                **base,
                "status": schemas.STATUS_OK,
                "reason": None,
                "concurrency": best.concurrency,
                "meets_slo": best.meets(ctx.slo),
                **measure_cols("output_tok_per_s", tok),
                "energy_j_per_output_token": j,
                "energy_runs": runs,
                "energy_reason": why,
                "usd_per_million_output_tokens": dollars,
                # more tokens per second, a lower price: the interval's bounds swap
                "usd_per_million_output_tokens_ci95_low": price.usd_per_million_tokens(usd, gpus, tok.high),
                "usd_per_million_output_tokens_ci95_high": price.usd_per_million_tokens(usd, gpus, tok.low),
                "price_note": None if dollars is not None else price.NOT_PRICED,
            }
        )
    return out


def analyse(ctx: Context) -> list[dict[str, Any]]:
    return rows(ctx, ctx.analyses["load"])


def views(ctx: Context, a: list[dict[str, Any]]) -> list[View]:
    cols = [
        Column("variant", "variant", VARIANT),
        Column("concurrency", "best level under the SLO", INT),
        Column("output_tok_per_s", "output tok/s", MEASURE),
        Column("energy_j_per_output_token", "J/output token", NUM),
        Column("energy_reason", "energy", TEXT),
        Column("usd_per_million_output_tokens", "USD per M output tokens", NUM),
        Column("price_note", "price", TEXT),
        Column("reason", "why none", TEXT),
    ]
    caption = (
        "What a token costs at each variant's best level under the SLO (the most output tok/s whose P99 TTFT and "
        "P99 TPOT meet it): the energy the server's GPUs drew per output token (NVML's counter, the mean over the "
        "level's runs) and USD per million output tokens = cost.usd_per_gpu_hour x GPUs / (output tok/s x 3600) x "
        "1e6, its interval from the output tok/s interval."
    )
    return [View(REPORT_TOKEN_COST, "What a token costs", caption, cols, a, order=11)]


def summary_lines(rows: Sequence[Mapping[str, Any]]) -> list[str]:
    """One line per variant for the terminal: its best level, J per output token and price, or why not."""
    ok = [r for r in rows if r.get("status") == schemas.STATUS_OK]
    reasons = {str(r.get("energy_reason") or energy.NOT_RECORDED) for r in ok}
    if (
        len(ok) > 1
        and len(reasons) == 1
        and all(
            r.get("energy_j_per_output_token") is None and r.get("usd_per_million_output_tokens") is None for r in ok
        )
    ):  # nothing to compare (a CPU run without a price): one line, not the same reason once per variant
        return [f"every variant: {reasons.pop()}; {price.NOT_PRICED}"]
    lines = []
    for r in rows:
        if r.get("status") != schemas.STATUS_OK:
            lines.append(f"{r.get('variant')}: {r.get('reason')}")
            continue
        j = r.get("energy_j_per_output_token")
        usd = r.get("usd_per_million_output_tokens")
        joules = f"{j:.3g} J/output token" if j is not None else str(r.get("energy_reason") or energy.NOT_RECORDED)
        dollars = f"${usd:.3g} per million output tokens" if usd is not None else price.NOT_PRICED
        lines.append(f"{r.get('variant')} at concurrency {r.get('concurrency')}: {joules}; {dollars}")
    return lines


def show(con: Console, rows: Mapping[str, Rows]) -> None:
    """Its lines in the terminal's summary, under the deployments: energy and price at each variant's best level
    under the SLO."""
    found = rows.get(short_name(REPORT_TOKEN_COST), ())
    if found:
        con.print("\n[bold]What a token costs[/bold] (best level under the SLO)")
        for line in summary_lines(found):
            con.print(f"  {line}", markup=False)


EXPERIMENT = Experiment(
    NAME, analyse, views=views, order=95, requires=("load",), summary=Summary((REPORT_TOKEN_COST,), show)
)

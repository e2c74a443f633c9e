"""The report tables that span experiments: verdicts, every judged comparison, the capability boundary,
and the failures. (Each experiment's own tables come from its module in :mod:`worthit.report.experiments`.)
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

from worthit import schemas
from worthit.report import experiments
from worthit.report.context import Context, Pair
from worthit.report.decide import WORDING, Comparison, Evidence, Verdict
from worthit.report.headline import headline
from worthit.report.regimes import judge
from worthit.report.views import LONG, MEASURE, OUTCOME, PCT, TEXT, VARIANT, Column, View, measure_cols

NOT_RUN_STATUS = "not run"
NOT_MADE_YET = (
    "configured, not measured yet: the workflow has not made this result (a run stopped before it, or the "
    "results were carried from a run without it); run the workflow again to measure it"
)


def verdict_rows(
    ctx: Context,
    verdicts: Mapping[str, Verdict],
    pairs: Mapping[str, Pair],
    evidence: Mapping[str, Evidence] | None = None,
) -> list[dict[str, Any]]:
    """One row per variant other than the baseline; with ``evidence``, each row's headline too (its role, the
    deciding effect in words, the accuracy cost and one line of why: :mod:`worthit.report.headline`)."""
    rows = []
    for v, x in verdicts.items():
        lat, thr = x.regimes.get("latency"), x.regimes.get("throughput")
        h = headline(ctx, pairs[v], x, evidence[v]) if evidence is not None and v in evidence else None
        rows.append(
            {
                "variant": v,
                "baseline": pairs[v].base or ctx.baseline,
                "optimisation": x.optimisation,
                "description": ctx.description(v) or None,
                "outcome": x.outcome,
                "condition": x.condition or None,
                "latency_outcome": lat.outcome if lat else None,
                "latency_detail": lat.detail if lat else None,
                "throughput_outcome": thr.outcome if thr else None,
                "throughput_detail": thr.detail if thr else None,
                "accuracy_outcome": x.accuracy_outcome if x.outcome not in ("failed", "not applicable") else None,
                "accuracy_detail": x.accuracy_detail or None,
                "benefit": x.benefit or None,
                "accuracy_cost": x.accuracy_cost or None,
                "worst_accuracy_delta_pt": x.worst_accuracy_delta_pt,
                "effort": x.effort,
                "reason": x.reason,
                "settle": x.settle or None,
                "interval_basis": x.basis or None,
                "status": x.status,
                "role": h.role if h else None,
                "effect": h.effect if h else None,
                "accuracy_summary": h.accuracy if h else None,
                "why": h.why if h else None,
                "by_workload": (h.by_workload or None) if h else None,
            }
        )
    return rows


def verdicts_view(
    ctx: Context,
    verdicts: Mapping[str, Verdict],
    pairs: Mapping[str, Pair],
    evidence: Mapping[str, Evidence] | None = None,
) -> View:
    r = ctx.rules
    cols = [
        Column("optimisation", "optimisation", TEXT),
        Column("variant", "variant", VARIANT),
        Column("outcome", "verdict", OUTCOME),
        Column("condition", "where it holds", TEXT),
        Column("latency_detail", "latency-first", LONG),
        Column("throughput_detail", "throughput-first", LONG),
        *experiments.verdict_columns(),  # the verdict's accuracy outcome
        Column("benefit", "benefit", LONG),
        Column("accuracy_cost", "accuracy cost", TEXT),
        Column("effort", "effort", TEXT),
        Column("reason", "reason", LONG),
        Column("settle", "what would settle it", LONG),
    ]
    by_task = "".join(f", {t} {b:g} pt" for t, b in r.max_accuracy_drop_pt_by_task.items())
    own = [f"{v} against `{p.base}`" for v, p in pairs.items() if p.base and p.base != ctx.baseline]
    caption = (
        f"Against the baseline `{ctx.baseline}`"
        + (f" ({'; '.join(own)})" if own else "")
        + ". Rules (decide:): a benefit is an improvement of at least "
        f"{r.min_speedup:g}x whose 95% interval lies clear of that margin"
        + ("" if r.require_significance else " (point estimates: require_significance is false)")
        + f"; accuracy may drop at most {r.max_accuracy_drop_pt:g} pt per task{by_task} (non-inferiority at 95%); "
        f"exact counts differ when they differ by more than {r.exact_tolerance_pct:g}%; a predicted speculative "
        f"speed-up below {r.min_predicted_speedup:g}x rejects unless measured otherwise; figures from a single run "
        "never settle a verdict (inconclusive, leaning the way they point, until independent runs confirm it). "
        "Verdicts per regime: latency-first (interactive SLO at P99) per load level, throughput-first (most "
        "output tok/s under the TPOT ceiling)."
    )
    legend = [f"**{o}**: {w}" for o, w in WORDING.items()]
    return View(
        schemas.REPORT_VERDICTS,
        "Verdicts",
        caption,
        cols,
        verdict_rows(ctx, verdicts, pairs, evidence),
        order=0,
        empty="No optimisation: the study has one variant.",
        notes=legend,
    )


def comparison_rows(ctx: Context, evidence: Mapping[str, Evidence], pairs: Mapping[str, Pair]) -> list[dict[str, Any]]:
    rows: list[dict[str, Any]] = []
    for v, e in evidence.items():
        pair = pairs[v]
        if e.status != schemas.STATUS_OK:
            rows.append(
                {
                    "variant": v,
                    "baseline": pair.base or ctx.baseline,
                    "optimisation": pair.optimisation,
                    "quantity": "all",
                    "status": e.status if e.status != NOT_RUN_STATUS else schemas.STATUS_FAILED,
                    "reason": e.reason,
                }
            )
            continue
        for c in e.comparisons:
            rows.append(_comparison_row(ctx, v, pair, c))
    return rows


def _comparison_row(ctx: Context, v: str, pair: Pair, c: Comparison) -> dict[str, Any]:
    finding, why = judge(c, ctx.rules)
    imp = c.improvement
    return {
        "variant": v,
        "baseline": pair.base or ctx.baseline,
        "optimisation": pair.optimisation,
        "regime": c.regime,
        "setting": c.setting.label or None,
        "quantity": c.quantity,
        "unit": c.unit,
        **measure_cols("baseline_value", c.without),
        **measure_cols("value", c.with_),
        "change_pct": c.change_pct,
        **measure_cols("improvement", imp),
        "finding": finding
        if c.judged
        else f"{finding} (shown; counts when worse)"
        if c.guard
        else f"{finding} (shown, not judged)",
        "interval_basis": (
            (imp.basis or imp.why_none or "")
            + (f"; widened x{c.spread:.2f} for machines ({c.spread_source})" if c.spread > 1 else "")
        )
        or None,
        "status": schemas.STATUS_OK,
        "reason": why if not c.judged else None,
    }


def comparison_view(ctx: Context, evidence: Mapping[str, Evidence], pairs: Mapping[str, Pair]) -> View:
    cols = [
        Column("optimisation", "optimisation", TEXT),
        Column("setting", "setting", TEXT),
        Column("quantity", "quantity", TEXT),
        Column("baseline_value", "without", MEASURE),
        Column("value", "with", MEASURE),
        Column("change_pct", "change", PCT),
        Column("improvement", "improvement factor", MEASURE, 2),
        Column("finding", "finding", OUTCOME),
    ]
    caption = (
        "Every figure the rules weigh (and some shown beside them), the side without the optimisation against "
        "the side with it: the improvement factor (> 1 better) with its 95% interval on the log scale."
    )
    return View(
        schemas.REPORT_COMPARISON,
        "Without vs with each optimisation",
        caption,
        cols,
        comparison_rows(ctx, evidence, pairs),
        order=30,
    )


def capability_view(rows: Sequence[dict[str, Any]]) -> View:
    cols = [
        Column("quantity", "boundary", TEXT),
        Column("value", "value", MEASURE),
        Column("unit", "unit", TEXT),
        Column("variant", "variant", VARIANT),
        Column("note", "note", TEXT),
    ]
    return View(
        schemas.REPORT_CAPABILITY,
        "Capability boundary",
        "The best figures this hardware and model reached.",
        cols,
        list(rows),
        order=60,
    )


def failure_rows(ctx: Context) -> list[dict[str, Any]]:
    rows: list[dict[str, Any]] = []
    for v in ctx.variants:
        res = ctx.results.variant(v)
        if not res.files and ctx.configured(v):
            rows.append(
                {
                    "variant": v,
                    "experiment": "all",
                    "status": NOT_RUN_STATUS,
                    "reason": "no results: the workflow has not run this variant",
                }
            )
        if res.files and ctx.configured(v):  # what the config asks of a variant that has results, not there
            have = {f.experiment for f in res.files}
            for exp in (c for c in ctx.study.consumers(v) if c not in have):
                rows.append({"variant": v, "experiment": exp, "status": NOT_RUN_STATUS, "reason": NOT_MADE_YET})
        for f in res.failures():
            rows.append(
                {
                    "variant": v,
                    "experiment": f.experiment,
                    "status": f.status,
                    "reason": f.cause or None,
                    "log_tail": f.log_tail or None,
                }
            )
        rows += experiments.failure_rows(ctx, v)  # what failed inside an ok file (one accuracy task)
    for name, f in ctx.results.aggregates.items():
        if not f.ok:
            rows.append(
                {"experiment": name, "status": f.status, "reason": f.cause or None, "log_tail": f.log_tail or None}
            )
    return rows


def failures_view(ctx: Context) -> View:
    cols = [
        Column("variant", "variant", VARIANT),
        Column("experiment", "result", TEXT),
        Column("status", "status", OUTCOME),
        Column("reason", "reason (root cause)", TEXT),
    ]
    return View(
        schemas.REPORT_FAILURES,
        "Failed, not applicable or not run",
        "Each with its reason; the log tail is in the Parquet table and the HTML page.",
        cols,
        failure_rows(ctx),
        order=95,
        empty="None: every experiment produced results.",
    )

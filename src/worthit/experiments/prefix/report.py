"""Prefix caching: TTFT of requests that share a prefix of each length, with the cache on and off.

It feeds the latency-first verdict of "prefix caching (on vs off)": TTFT P50 at each shared-prefix length
above zero, the side with the cache on against the side with it off (whichever of them is the variant).
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any

import matplotlib.pyplot as plt

from worthit import engine_args as eargs
from worthit import prom, schemas
from worthit.experiments.prefix.analysis import other_side
from worthit.experiments.prefix.tables import PREFIX, REPORT_PREFIX
from worthit.report import plots
from worthit.report.context import Context, Pair
from worthit.report.data import Loaded
from worthit.report.decide import LATENCY, Comparison, Setting
from worthit.report.experiments import Change, EvidenceItem, Experiment, Figure
from worthit.report.measure import SINGLE_RUN, Measure, quantile
from worthit.report.pooling import Pools, files_machine
from worthit.report.views import INT, MEASURE, NUM, PCT, TEXT, VARIANT, Column, View, measure_cols, pct
from worthit.stats import slope

NAME = "prefix"


@dataclass(frozen=True)
class Point:
    variant: str
    cache_on: bool
    prefix_tokens: int
    ttft_p50: Measure
    hit_rate: float | None
    machine: str | None = None  # the machine of its run (the pooled run-to-run spread is looked up there)


# The KV experiment's one-row probe of the served variant, whose prefix_caching flag is the server's own word;
# named by its table's name (as the load analysis is by its key), not imported: this folder imports no other.
KV_PROBE = "kv_cache"


def points_of(ctx: Context, variant: str) -> list[Point]:
    v = ctx.results.variant(variant)
    kv = v.first_row(KV_PROBE) or {}
    default_on = (
        bool(kv["prefix_caching"])
        if kv.get("prefix_caching") is not None
        else eargs.prefix_caching_on(ctx.engine_args(variant))
    )
    ttft: dict[int, list[float | None]] = {}
    hits: dict[int, list[float]] = {}
    files: dict[int, list[Loaded]] = {}
    for f in v.of(PREFIX.name):
        if not f.ok:
            continue
        rate = prom.hit_rate(f.metadata.get("metrics_delta") or {})
        for r in f.rows:
            if r.get("success"):
                ttft.setdefault(int(r["prefix_tokens"]), []).append(r.get("ttft_ms"))
                files.setdefault(int(r["prefix_tokens"]), []).append(f)
        if rate is not None and f.rows:
            hits.setdefault(int(f.rows[0]["prefix_tokens"]), []).append(rate)
    return [
        Point(
            variant,
            default_on,
            L,
            quantile(vals, 0.5),
            sum(hits[L]) / len(hits[L]) if hits.get(L) else None,
            files_machine(files[L]),
        )
        for L, vals in sorted(ttft.items())
    ]


def analyse(ctx: Context) -> dict[str, list[Point]]:
    return {v: p for v in ctx.variants if (p := points_of(ctx, v))}


def ttft_slope(points: Sequence[Point]) -> float | None:
    return slope([p.prefix_tokens for p in points], [p.ttft_p50.value for p in points])


def evidence(ctx: Context, a: dict[str, list[Point]], pair: Pair) -> list[EvidenceItem]:
    """TTFT P50 at each shared-prefix length, the sweep's single run widened by the study's pooled run-to-run
    spread of TTFT P50 on its machine (from the repeated load levels: :mod:`worthit.report.pooling`)."""
    wo = {p.prefix_tokens: p for p in a.get(pair.without, [])}
    load = ctx.analyses.get("load")
    pools: Pools = getattr(load, "pools", None) or Pools()
    out: list[EvidenceItem] = []
    quantity = "TTFT P50 (shared prefix)"
    for p in a.get(pair.with_, []):
        b = wo.get(p.prefix_tokens)
        if b is None or p.prefix_tokens == 0 or b.cache_on == p.cache_on:
            continue
        pool = pools.for_quantity(b.machine, quantity) or pools.for_quantity(p.machine, quantity)
        out.append(
            Comparison(
                quantity,
                "ms",
                b.ttft_p50,
                p.ttft_p50,
                False,
                LATENCY,
                Setting.prefix(p.prefix_tokens),
                run_spread=pool,
            )
        )
    return out


def _reference(a: dict[str, list[Point]], p: Point) -> Point | None:
    """The point of its other side (:func:`.analysis.other_side`)."""
    ref = other_side(
        ((q.variant, q.cache_on, q.prefix_tokens) for pts in a.values() for q in pts), p.prefix_tokens, p.cache_on
    )
    return next((q for q in a.get(ref, []) if q.prefix_tokens == p.prefix_tokens), None) if ref else None


def views(ctx: Context, a: dict[str, list[Point]]) -> list[View]:
    rows = []
    for v, pts in a.items():
        s = ttft_slope(pts)
        for p in pts:
            ref = _reference(a, p)
            rows.append(
                {
                    "variant": v,
                    "prefix_caching": p.cache_on,
                    "prefix_tokens": p.prefix_tokens,
                    **measure_cols("ttft_ms_p50", p.ttft_p50),
                    "reference": ref.variant if ref else None,
                    **measure_cols("reference_ttft_ms_p50", ref.ttft_p50 if ref else None),
                    "change_pct": pct(p.ttft_p50.value, ref.ttft_p50.value) if ref else None,
                    "hit_rate_pct": p.hit_rate * 100 if p.hit_rate is not None else None,
                    "ttft_slope_ms_per_1k_tokens": s * 1000 if s is not None else None,
                    "interval_basis": SINGLE_RUN,
                    "status": schemas.STATUS_OK,
                }
            )
    for v in ctx.variants:
        for f in ctx.results.variant(v).of(PREFIX.name):
            if not f.ok:
                rows.append({"variant": v, "status": f.status, "reason": f.cause})
    cols = [
        Column("variant", "variant", VARIANT),
        Column("prefix_caching", "cache", TEXT),
        Column("prefix_tokens", "shared prefix tokens", INT),
        Column("ttft_ms_p50", "TTFT P50 ms", MEASURE),
        Column("reference", "cache the other way", VARIANT),
        Column("reference_ttft_ms_p50", "its TTFT P50 ms", MEASURE),
        Column("change_pct", "change", PCT),
        Column("hit_rate_pct", "hit rate", PCT, 1),
        Column("ttft_slope_ms_per_1k_tokens", "TTFT slope ms / 1k tokens", NUM, 2),
        Column("status", "status", TEXT),
        Column("reason", "reason", TEXT),
    ]
    caption = (
        "TTFT of requests sharing a prefix of each length (a unique suffix each), with the cache on and off; "
        "hit rate = prefix-cache hit tokens / queried tokens (/metrics deltas; exact counts) in %. TTFT intervals "
        "within one run; the change and the slope are of point estimates (the verdict's comparison carries the "
        "change's interval)."
    )
    return [View(REPORT_PREFIX, "Prefix caching", caption, cols, rows, order=40)]


def capability(ctx: Context, a: dict[str, list[Point]]) -> list[dict[str, Any]]:
    best: tuple[float, Point, Point] | None = None
    for pts in a.values():
        for p in pts:
            ref = _reference(a, p)
            if p.cache_on and ref is not None and p.prefix_tokens > 0:
                ch = pct(p.ttft_p50.value, ref.ttft_p50.value)
                if ch is not None and (best is None or ch < best[0]):
                    best = (ch, p, ref)
    if best is None:
        return []
    ch, p, ref = best
    return [
        {
            "quantity": "largest prefill saving (TTFT P50)",
            "value": ch,
            "unit": "%",
            "value_n": p.ttft_p50.n,
            "variant": p.variant,
            "interval_basis": "no interval: a ratio of two medians",
            "note": f"{p.prefix_tokens:,}-token shared prefix vs {ref.variant} (cache off); "
            "bounded by the shared-prefix length",
        }
    ]


def _figure(ctx: Context, a: dict[str, list[Point]]) -> Any:
    if not a:
        return None
    fig, ax = plt.subplots(figsize=(7, 4.2))
    for v, pts in a.items():
        sel = [p for p in pts if p.ttft_p50.value is not None]
        if sel:
            ax.errorbar(
                [p.prefix_tokens for p in sel],
                [p.ttft_p50.value or 0.0 for p in sel],
                yerr=plots.errorbars([p.ttft_p50 for p in sel]),
                marker="o",
                capsize=3,
                label=f"{ctx.label(v)} (cache {'on' if sel[0].cache_on else 'off'})",
            )
    ax.set_xlabel("shared prefix length (tokens)")
    ax.set_ylabel("TTFT P50 (ms)")
    return plots.finish(fig, ax)


def change(a: Mapping[str, Any], b: Mapping[str, Any]) -> Change | None:
    """The pair's name when the variant turns prefix caching on or off (the side with the cache has it)."""
    if eargs.prefix_caching_on(a) == eargs.prefix_caching_on(b):
        return None
    return Change("prefix caching (on vs off)", baseline_has_it=eargs.prefix_caching_on(a))


EXPERIMENT = Experiment(
    NAME,
    analyse,
    evidence=evidence,
    views=views,
    figures=(
        Figure(
            "prefix_ttft",
            "TTFT P50 against shared-prefix length, prefix cache on and off (95% intervals).",
            _figure,
        ),
    ),
    capability=capability,
    order=40,
    change=change,
    flags=frozenset({eargs.PREFIX_CACHING, eargs.NO_PREFIX_CACHING}),
)

"""KV-cache capacity per variant, set against the knees of its load curves, and memory-bandwidth use.

Block counts are exact (read from the engine): compared exactly, a change below
``decide.exact_tolerance_pct`` is no difference. The knees: the throughput knee is the lowest level
reaching ``decide.knee.throughput_fraction`` of the peak output tok/s; the latency knee the highest level
whose TPOT P50 *and* TTFT P50 both stay within ``decide.knee.latency_factor`` x the lowest level's.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any

import matplotlib.pyplot as plt

from worthit import engine_args as eargs
from worthit import prom
from worthit.experiments.kv.tables import KV_CACHE, REPORT_CAPACITY
from worthit.experiments.loadtest.report import Level, LoadAnalysis
from worthit.experiments.specdec import model as specdec
from worthit.report import plots
from worthit.report.context import Context, Pair
from worthit.report.decide import Comparison, Setting
from worthit.report.evidence import Evidence
from worthit.report.experiments import EvidenceItem, Experiment, Figure
from worthit.report.mbu import Bandwidth, bytes_per_step, mbu
from worthit.report.measure import Measure
from worthit.report.outcomes import Finding
from worthit.report.plausibility import bandwidth_floor, weight_bytes_speedup
from worthit.report.views import INT, NUM, PCT, TEXT, VARIANT, Column, View, measure_cols

NAME = "capacity"
CAPACITY = NAME  # the regime of its figures, reported beside latency and throughput, never judged
_FLOAT_BYTES = {"float32": 4, "float16": 2, "bfloat16": 2}


@dataclass(frozen=True)
class Capacity:
    variant: str
    weight_bytes: int | None
    num_blocks: int | None
    kv_cache_gib: float | None
    kv_critical_concurrency: float | None
    throughput_knee: int | None
    latency_knee: int | None
    highest_level: int | None
    preemptions: float
    bound: str
    tpot_ms_p50: float | None
    mbu: float | None
    bandwidth: Bandwidth | None


def knees(levels: Sequence[Level], throughput_fraction: float, latency_factor: float) -> tuple[int | None, int | None]:
    """(throughput knee, latency knee) of a variant's ok levels (see the module doc)."""
    ok = sorted((lv for lv in levels if lv.ok), key=lambda lv: lv.concurrency)
    tps = [(lv.concurrency, lv.output_tok_per_s.value) for lv in ok if lv.output_tok_per_s.value]
    tk = None
    if tps:
        peak = max(v for _, v in tps)
        tk = min(c for c, v in tps if v >= throughput_fraction * peak)
    lk = None
    both = [lv for lv in ok if lv.tpot_p50.value and lv.ttft_p50.value]
    if both:
        tp0, tt0 = both[0].tpot_p50.value or 0.0, both[0].ttft_p50.value or 0.0
        within = [
            lv.concurrency
            for lv in both
            if (lv.tpot_p50.value or 0.0) <= latency_factor * tp0 and (lv.ttft_p50.value or 0.0) <= latency_factor * tt0
        ]
        # the knee is where the curve first leaves the band: levels past a break do not count
        lk = None
        for lv in both:
            if lv.concurrency not in within:
                break
            lk = lv.concurrency
    return tk, lk


def weights_read_per_step(
    kv: Mapping[str, Any] | None, meta: Mapping[str, Any], engine_args: Mapping[str, Any]
) -> int | None:
    """Bytes of weights read per step: the kv stage's ``weight_bytes`` (already as served:
    worthit.plan.served_weight_bytes), else the model manifest's bytes or parameters, rescaled when the engine
    casts a float model."""
    if (kv or {}).get("weight_bytes"):
        return int(kv["weight_bytes"])  # type: ignore[index]
    model = meta.get("model") or {}
    wb = model.get("weight_bytes")
    if not wb and model.get("parameters") and model.get("dtype") in _FLOAT_BYTES:
        wb = int(model["parameters"]) * _FLOAT_BYTES[model["dtype"]]
    if not wb:
        return None
    stored, served = model.get("dtype"), str(engine_args.get("dtype") or "auto")
    if stored in _FLOAT_BYTES and served in _FLOAT_BYTES and stored != served:
        wb = int(wb * _FLOAT_BYTES[served] / _FLOAT_BYTES[stored])
    return int(wb)


def capacity_of(ctx: Context, variant: str, levels: Sequence[Level]) -> Capacity:
    v = ctx.results.variant(variant)
    kv = v.first_row(KV_CACHE.name)
    tk, lk = knees(levels, ctx.rules.knee_throughput_fraction, ctx.rules.knee_latency_factor)
    crit = (kv or {}).get("critical_concurrency")
    ok = sorted((lv for lv in levels if lv.ok), key=lambda lv: lv.concurrency)
    highest = ok[-1].concurrency if ok else None
    pre = sum(lv.metrics_delta.get(prom.PREEMPTIONS, 0.0) for lv in ok)
    if pre > 0:
        bound = f"KV capacity: {pre:.0f} preemptions measured"
    elif crit is not None and tk is not None and crit <= tk:
        bound = f"KV capacity (critical concurrency {crit:,.0f} <= throughput knee {tk})"
    elif tk is not None and highest is not None and tk < highest:
        bound = f"compute/bandwidth: throughput saturates at concurrency {tk}, below the KV bound"
    elif highest is not None:
        bound = f"not reached: throughput still rising at the highest level measured ({highest})"
    else:
        bound = "n/a (no load levels)"
    first = ok[0] if ok else None
    wb = weights_read_per_step(kv, v.provenance(), ctx.engine_args(variant))
    bw = ctx.bandwidth
    util = None
    if first is not None and wb:
        lt = ctx.study.cfg.get("loadtest") or {}
        context = float(lt.get("prompt_tokens", 0)) + float(lt.get("output_tokens", 0)) / 2
        read = bytes_per_step(wb, (kv or {}).get("kv_bytes_per_token"), context, first.concurrency)
        # a speculative step yields several tokens (the level's counters: alpha where it drafted, one where it did
        # not): it lasts TPOT x its tokens, not TPOT
        per_step = specdec.tokens_per_step(first.metrics_delta, first.requests)
        tpot = first.tpot_p50.value
        step_ms = tpot * per_step if per_step and tpot is not None else tpot
        # the weights are split over the tensor-parallel GPUs: each reads its share, so the peak is theirs together
        tp = int(eargs.get(ctx.engine_args(variant), "tensor-parallel-size") or 1)
        util = mbu(read, step_ms, bw.gb_s * tp if bw else None)
    return Capacity(
        variant,
        wb,
        (kv or {}).get("num_blocks"),
        (kv or {}).get("kv_cache_gib"),
        crit,
        tk,
        lk,
        highest,
        pre,
        bound,
        first.tpot_p50.value if first else None,
        util,
        bw,
    )


def analyse(ctx: Context) -> dict[str, Capacity]:
    load: LoadAnalysis = ctx.analyses["load"]
    return {v: capacity_of(ctx, v, load.levels.get(v, [])) for v in ctx.variants}


def evidence(ctx: Context, a: dict[str, Capacity], pair: Pair) -> list[EvidenceItem]:
    b, v = a.get(pair.without), a.get(pair.with_)
    if b is None or v is None:
        return []
    out: list[EvidenceItem] = []
    s = Setting("")
    for q, unit, bv, vv, hib in (
        ("KV blocks", "blocks", b.num_blocks, v.num_blocks, True),
        (
            "weights",
            "GB",
            b.weight_bytes / 1e9 if b.weight_bytes else None,
            v.weight_bytes / 1e9 if v.weight_bytes else None,
            False,
        ),
    ):
        if bv and vv:
            out.append(Comparison(q, unit, Measure.exact(bv), Measure.exact(vv), hib, CAPACITY, s, judged=False))
    if b.kv_critical_concurrency and v.kv_critical_concurrency:
        out.append(
            Comparison(
                "critical concurrency (KV-bound)",
                "requests",
                Measure.exact(b.kv_critical_concurrency),
                Measure.exact(v.kv_critical_concurrency),
                True,
                CAPACITY,
                s,
                judged=False,
            )
        )
    return out


def views(ctx: Context, a: dict[str, Capacity]) -> list[View]:
    rows = [
        {
            "variant": c.variant,
            "weight_bytes": c.weight_bytes,
            "num_blocks": c.num_blocks,
            "kv_cache_gib": c.kv_cache_gib,
            "kv_critical_concurrency": c.kv_critical_concurrency,
            "throughput_knee_concurrency": c.throughput_knee,
            "latency_knee_concurrency": c.latency_knee,
            "highest_level": c.highest_level,
            "preemptions": c.preemptions,
            "bound": c.bound,
            "tpot_ms_p50": c.tpot_ms_p50,
            "mbu_pct": c.mbu * 100 if c.mbu is not None else None,
            "peak_bandwidth_gb_s": c.bandwidth.gb_s if c.bandwidth else None,
            "bandwidth_source": f"{c.bandwidth.name}: {c.bandwidth.source}"
            if c.bandwidth
            else "unknown hardware: MBU n/a",
        }
        for c in a.values()
        if c.num_blocks is not None or c.highest_level is not None
    ]
    cols = [
        Column("variant", "variant", VARIANT),
        Column("num_blocks", "KV blocks (exact count)", INT),
        Column("kv_cache_gib", "KV GiB", NUM, 2),
        Column("kv_critical_concurrency", "critical concurrency (KV)", NUM, 0),
        Column("throughput_knee_concurrency", "throughput knee", INT),
        Column("latency_knee_concurrency", "latency knee", INT),
        Column("bound", "bound", TEXT),
        Column("tpot_ms_p50", "TPOT P50 ms (lowest level)", NUM),
        Column("mbu_pct", "MBU", PCT, 0),
        Column("bandwidth_source", "peak bandwidth", TEXT),
    ]
    caption = (
        "KV capacity (exact counts read from the engine) against the knees of the load curves: the latency knee "
        "is the highest level whose TPOT P50 and TTFT P50 both stay within decide.knee.latency_factor of the "
        "lowest level's. MBU = (weight + KV bytes per decode step) / step time / peak bandwidth, the step time "
        "being the TPOT P50 point estimate (its interval is in the load levels table), times alpha for a "
        "speculative variant (a verify step yields alpha tokens, from the level's counters)."
    )
    # a pool sized for a smaller card (serve.emulate_gpu_memory_gib): capacity only, the speed is this machine's
    notes = [
        f"**{ctx.label(r['variant'])}**: {KV_POOL_LABEL.format(gib=gib)}, capacity only: its speed is this machine's"
        for r in rows
        if r["variant"] in ctx.study.variants and (gib := ctx.study.variant(str(r["variant"])).emulate_gpu_memory_gib)
    ]
    return [View(REPORT_CAPACITY, "Critical concurrency, knees and MBU", caption, cols, rows, order=80, notes=notes)]


KV_POOL_LABEL = "KV pool of a {gib:g} GiB card (emulated)"


def capability(ctx: Context, a: dict[str, Capacity]) -> list[dict[str, Any]]:
    kv = [c for c in a.values() if c.num_blocks]
    rows: list[dict[str, Any]] = []
    if kv:
        c = max(kv, key=lambda x: x.num_blocks or 0)
        note = (
            f"{c.kv_cache_gib:.2f} GiB; critical concurrency {c.kv_critical_concurrency:,.0f}"
            if c.kv_cache_gib is not None and c.kv_critical_concurrency is not None
            else None
        )
        rows.append(
            {
                "quantity": "KV capacity",
                **measure_cols("value", Measure.exact(c.num_blocks)),
                "unit": "blocks",
                "variant": c.variant,
                "interval_basis": "exact count",
                "note": note,
            }
        )
    fast = [c for c in a.values() if c.mbu is not None and c.bandwidth is not None]
    if fast:
        c = max(fast, key=lambda x: x.mbu or 0.0)
        assert c.bandwidth is not None and c.mbu is not None
        rows.append(
            {
                "quantity": "memory-bandwidth utilisation (lowest level)",
                "value": c.mbu * 100,
                "unit": "%",
                "variant": c.variant,
                "interval_basis": "no interval: a ratio of point estimates",
                "note": f"of {c.bandwidth.gb_s:,g} GB/s ({c.bandwidth.name})",
            }
        )
    return rows


def _figure(ctx: Context, a: dict[str, Capacity]) -> Any:
    caps = [c for c in a.values() if c.num_blocks]
    if not caps:
        return None
    fig, ax = plt.subplots(figsize=(max(5.0, 1.3 * len(caps)), 4.0))
    bars = ax.bar([ctx.label(c.variant) for c in caps], [c.num_blocks or 0 for c in caps], color="#4c72b0")
    for b, c in zip(bars, caps, strict=True):
        label = f"{c.kv_cache_gib:.2f} GiB" if c.kv_cache_gib is not None else ""
        if c.kv_critical_concurrency is not None:
            label += f"\ncrit. conc. {c.kv_critical_concurrency:,.0f}"
        ax.annotate(label, (b.get_x() + b.get_width() / 2, b.get_height()), ha="center", va="bottom", fontsize=8)
    ax.set_ylabel("KV blocks (exact count)")
    ax.margins(y=0.2)
    return plots.finish(fig, ax, legend=False, grid="y")


def checks(ctx: Context, a: Mapping[str, Capacity] | None, pair: Pair, e: Evidence) -> list[Finding | None]:
    """Its plausibility checks of one optimisation: each side's MBU against the bandwidth floor, then
    :func:`_bytes_check`."""
    capacity = a or {}
    return [
        *(
            bandwidth_floor(side, c.mbu, c.tpot_ms_p50)
            for side in dict.fromkeys((pair.without, pair.with_))
            if (c := capacity.get(side)) is not None
        ),
        _bytes_check(ctx, capacity, pair, e),
    ]


def _bytes_check(ctx: Context, capacity: Mapping[str, Capacity], pair: Pair, e: Evidence) -> Finding | None:
    """:func:`~worthit.report.plausibility.weight_bytes_speedup` at the lowest concurrency both sides measured,
    where only the weights differ in bytes (the same KV-cache dtype, no speculative drafting on either side)."""
    a, b = ctx.engine_args(pair.without), ctx.engine_args(pair.with_)
    if eargs.speculative_config(a) or eargs.speculative_config(b):
        return None
    if eargs.get(a, "kv-cache-dtype") != eargs.get(b, "kv-cache-dtype"):
        return None
    cw, cv = capacity.get(pair.without), capacity.get(pair.with_)
    tpot = [c for c in e.comparisons if c.quantity == "TPOT P50" and c.setting.dimension == "concurrency"]
    if cw is None or cv is None or not tpot:
        return None
    low = min(tpot, key=lambda c: c.setting.value or 0.0)
    return weight_bytes_speedup(cw.weight_bytes, cv.weight_bytes, low.improvement, low.setting.label)


EXPERIMENT = Experiment(
    NAME,
    analyse,
    evidence=evidence,
    views=views,
    figures=(
        Figure(
            "kv_capacity",
            "KV-cache capacity per variant (blocks; GiB and critical concurrency annotated).",
            _figure,
        ),
    ),
    capability=capability,
    checks=checks,
    order=20,
    requires=("load",),
)

"""The server's timeline (loadtest.timeline_interval_s): what the engine did during each load level.

Per variant and level, from the /metrics samples taken while the measured requests ran: the fullest KV-cache
usage, the most requests running and waiting, and the preemptions (the counter's rise over the level). The
check sets them against the KV-derived critical concurrency (KV tokens / tokens per request, from
:mod:`worthit.report.experiments.capacity`): above it the KV cache should fill and requests wait or get
preempted; at or below it neither should happen. A level that disagrees is flagged: the estimate misses
something (prefix caching sharing blocks, a workload longer or shorter than the study's lengths).
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

import matplotlib.pyplot as plt

from worthit import schemas
from worthit.loadgen.levels import CONC, parse_level
from worthit.report import plots
from worthit.report.context import Context
from worthit.report.experiments import Experiment, Figure, register
from worthit.report.experiments.capacity import Capacity
from worthit.report.views import INT, NUM, TEXT, VARIANT, Column, View

NAME = "timeline"
KV_FULL = 0.95  # KV usage at or above this share counts as full
CONSISTENT = "consistent"


@dataclass(frozen=True)
class LevelTimeline:
    variant: str
    level: str
    concurrency: int | None
    samples: list[dict[str, Any]]  # measured-phase scrapes of every run, in time order per run

    def _max(self, key: str) -> float | None:
        vals = [float(r[key]) for r in self.samples if r.get(key) is not None]
        return max(vals) if vals else None

    @property
    def kv_usage_max(self) -> float | None:
        return self._max("kv_cache_usage_frac")

    @property
    def running_max(self) -> float | None:
        return self._max("requests_running")

    @property
    def waiting_max(self) -> float | None:
        return self._max("requests_waiting")

    @property
    def preemptions(self) -> float:
        """The preemption counter's rise over each run's measured samples, summed over runs."""
        total = 0.0
        for run in {r.get("run") for r in self.samples}:
            vals = [
                float(r["preemptions_total"])
                for r in self.samples
                if r.get("run") == run and r.get("preemptions_total") is not None
            ]
            total += (max(vals) - min(vals)) if vals else 0.0
        return total


def analyse(ctx: Context) -> dict[str, list[LevelTimeline]]:
    out: dict[str, list[LevelTimeline]] = {}
    for v in ctx.variants:
        by_level: dict[str, list[dict[str, Any]]] = {}
        for f in ctx.results.variant(v).of(schemas.SERVER_TIMELINE.name):
            if not f.ok:
                continue
            for r in f.rows:
                if r.get("phase") == "measure" and not r.get("error"):
                    by_level.setdefault(str(r["level"]), []).append(r)
        levels = []
        for name, rows in by_level.items():
            lv = parse_level(name)
            conc = lv.concurrency if lv.kind == CONC else None
            rows.sort(key=lambda r: (r.get("run") or 1, r.get("t_s") or 0.0))
            levels.append(LevelTimeline(v, name, conc, rows))
        if levels:
            out[v] = sorted(levels, key=lambda t: (t.concurrency is None, t.concurrency or 0, t.level))
    return out


def check(t: LevelTimeline, critical: float | None) -> tuple[str, str]:
    """(check, note): the level's KV usage and preemptions against the critical concurrency."""
    if critical is None:
        return "no critical concurrency", "no KV measurement for this variant"
    if t.concurrency is None:
        return "not a closed-loop level", "an open-loop or replay level has no fixed concurrency to compare"
    kv = t.kv_usage_max
    full = kv is not None and kv >= KV_FULL
    preempted = t.preemptions > 0
    above = t.concurrency > critical
    seen = (
        f"KV usage up to {100 * (kv or 0):.0f}%, {t.preemptions:,.0f} preemptions at concurrency {t.concurrency} "
        f"(critical concurrency {critical:,.1f})"
    )
    if not above and preempted:
        return "preempted below the critical concurrency", seen + ": requests need more KV than the estimate says"
    if not above and full:
        return "KV full below the critical concurrency", seen + ": requests need more KV than the estimate says"
    if above and not full and not preempted:
        return "not full above the critical concurrency", seen + ": blocks are shared or requests are shorter"
    return CONSISTENT, seen


def _critical(ctx: Context, variant: str) -> float | None:
    caps: Mapping[str, Capacity] = ctx.analyses.get("capacity", {})
    cap = caps.get(variant)
    return cap.kv_critical_concurrency if cap is not None else None


def views(ctx: Context, a: dict[str, list[LevelTimeline]]) -> list[View]:
    rows = []
    for v, levels in a.items():
        crit = _critical(ctx, v)
        for t in levels:
            verdict, note = check(t, crit)
            kv = t.kv_usage_max
            rows.append(
                {
                    "variant": v,
                    "level": t.level,
                    "concurrency": t.concurrency,
                    "samples": len(t.samples),
                    "kv_usage_max_pct": None if kv is None else 100 * kv,
                    "requests_running_max": t.running_max,
                    "requests_waiting_max": t.waiting_max,
                    "preemptions": t.preemptions,
                    "kv_critical_concurrency": crit,
                    "check": verdict,
                    "note": note,
                    "status": schemas.STATUS_OK,
                }
            )
    cols = [
        Column("variant", "variant", VARIANT),
        Column("level", "level", TEXT),
        Column("samples", "samples", INT),
        Column("kv_usage_max_pct", "KV usage max %", NUM),
        Column("requests_running_max", "running max", NUM, 0),
        Column("requests_waiting_max", "waiting max", NUM, 0),
        Column("preemptions", "preemptions", NUM, 0),
        Column("kv_critical_concurrency", "critical conc.", NUM),
        Column("check", "check", TEXT),
    ]
    caption = (
        "The server's /metrics sampled during each level's measured requests (loadtest.timeline_interval_s): "
        f"KV usage counts as full from {100 * KV_FULL:.0f}%. Above the KV-derived critical concurrency the cache "
        "should fill and requests wait or get preempted; at or below it neither should happen."
    )
    return [
        View(schemas.REPORT_TIMELINE, "Server timeline: KV usage, queue, preemptions", caption, cols, rows, order=88)
    ]


def _figure(ctx: Context, a: dict[str, list[LevelTimeline]]) -> Any:
    variants = [v for v, levels in a.items() if any(t.concurrency is not None for t in levels)]
    if not variants:
        return None
    fig, axes = plt.subplots(len(variants), 2, figsize=(11, 3.0 * len(variants)), squeeze=False)
    for (ax_kv, ax_q), v in zip(axes, variants, strict=True):
        for t in (t for t in a[v] if t.concurrency is not None):
            first = [r for r in t.samples if (r.get("run") or 1) == 1]
            if not first:
                continue
            t0 = first[0]["t_s"]
            x = [r["t_s"] - t0 for r in first]
            ax_kv.plot(x, [100 * (r.get("kv_cache_usage_frac") or 0.0) for r in first], label=t.level)
            (line,) = ax_q.plot(x, [r.get("requests_running") or 0.0 for r in first], label=f"{t.level} running")
            ax_q.plot(
                x, [r.get("requests_waiting") or 0.0 for r in first], ls="--", color=line.get_color(), label="waiting"
            )
        crit = _critical(ctx, v)
        ax_kv.set_title(
            f"{ctx.label(v)}: KV usage (critical concurrency {crit:,.1f})" if crit else f"{ctx.label(v)}: KV usage",
            fontsize=9,
        )
        ax_kv.set_ylabel("KV cache usage (%)")
        ax_q.set_ylabel("requests")
        for ax in (ax_kv, ax_q):
            ax.set_xlabel("seconds into the level (run 1)")
    return plots.finish(fig, *axes.ravel(), legend_size=7)


register(
    Experiment(
        NAME,
        analyse,
        views=views,
        figures=(
            Figure(
                "timeline",
                "KV-cache usage and requests running (solid) and waiting (dashed) over each closed-loop level, run 1.",
                _figure,
            ),
        ),
        order=60,
        requires=("capacity",),
    )
)

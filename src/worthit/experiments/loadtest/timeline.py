"""The server's timeline (loadtest.timeline_interval_s) in the report: what the engine did during each level.

Each level's run-1 timeline is reduced by :func:`worthit.loadgen.timeline.summarize` (peak KV usage, most
requests running and waiting, preemptions over the measured requests), and the variant's grid levels are set
against the KV-derived critical concurrency (:mod:`worthit.experiments.kv.report`) by
:func:`worthit.loadgen.timeline.critical_check`: below it a level should neither fill the cache nor preempt,
above it it should. Levels of a named workload are shown but not checked (their requests have other lengths
than the ones the critical concurrency assumes).
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

import matplotlib.pyplot as plt

from worthit import schemas
from worthit.experiments.loadtest.tables import REPORT_TIMELINE, SERVER_TIMELINE
from worthit.loadgen import timeline as tl
from worthit.loadgen.levels import CONC, parse_level
from worthit.report import plots
from worthit.report.context import Context
from worthit.report.experiments import Experiment, Figure
from worthit.report.views import INT, NUM, TEXT, VARIANT, Column, View

if TYPE_CHECKING:
    from worthit.experiments.kv.report import Capacity

NAME = "timeline"


@dataclass
class VariantTimeline:
    variant: str
    rows: dict[str, list[dict[str, Any]]] = field(default_factory=dict)  # level -> run-1 timeline rows
    summaries: dict[str, tl.TimelineSummary] = field(default_factory=dict)
    check: tl.CriticalCheck | None = None

    def concurrency(self, level: str) -> int | None:
        lv = parse_level(level)
        return lv.concurrency if lv.kind == CONC and lv.workload is None else None


def _critical(ctx: Context, variant: str) -> float | None:
    caps: Mapping[str, Capacity] = ctx.analyses.get("capacity", {})
    cap = caps.get(variant)
    return cap.kv_critical_concurrency if cap is not None else None


def analyse(ctx: Context) -> dict[str, VariantTimeline]:
    out: dict[str, VariantTimeline] = {}
    for v in ctx.variants:
        vt = VariantTimeline(v)
        for f in ctx.results.variant(v).of(SERVER_TIMELINE.name):
            rows = [r for r in f.rows if (r.get("run") or 1) == 1] if f.ok else []
            if rows:
                vt.rows[str(rows[0]["level"])] = rows
        if not vt.rows:
            continue
        vt.summaries = {name: tl.summarize(rows) for name, rows in sorted(vt.rows.items())}
        grid = {c: s for name, s in vt.summaries.items() if (c := vt.concurrency(name)) is not None}
        vt.check = tl.critical_check(_critical(ctx, v), grid) if grid else None
        out[v] = vt
    return out


def views(ctx: Context, a: dict[str, VariantTimeline]) -> list[View]:
    rows = []
    for v, vt in a.items():
        checks = {lc.concurrency: lc for lc in vt.check.levels} if vt.check else {}
        for name, s in vt.summaries.items():
            c = vt.concurrency(name)
            lc = checks.get(c) if c is not None else None
            if c is None:
                verdict = "not checked (its own workload or an open loop)"
            elif lc is None or lc.agrees is None:
                verdict = "no critical concurrency or no samples"
            else:
                verdict = "agrees" if lc.agrees else "disagrees"
            kv = s.kv_cache_usage_frac_max
            rows.append(
                {
                    "variant": v,
                    "level": name,
                    "concurrency": c,
                    "samples": s.samples,
                    "kv_usage_max_pct": None if kv is None else 100 * kv,
                    "requests_running_max": s.requests_running_max,
                    "requests_waiting_max": s.requests_waiting_max,
                    "preemptions": s.preemptions,
                    "kv_critical_concurrency": vt.check.critical_concurrency if vt.check else None,
                    "check": verdict,
                    "note": f"{vt.check.verdict}: {vt.check.message}" if vt.check and c is not None else None,
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
        Column("check", "vs critical conc.", TEXT),
        Column("note", "the variant's check", TEXT),
    ]
    caption = (
        "The server's /metrics sampled during each level's measured requests (loadtest.timeline_interval_s, run "
        "1): above the KV-derived critical concurrency the cache should fill or requests get preempted; at or "
        "below it neither should happen (worthit.loadgen.timeline.critical_check)."
    )
    title = "Server timeline: KV usage, queue, preemptions"
    return [View(REPORT_TIMELINE, title, caption, cols, rows, order=88)]


def _figure(ctx: Context, a: dict[str, VariantTimeline]) -> Any:
    variants = [v for v, vt in a.items() if any(vt.concurrency(n) is not None for n in vt.rows)]
    if not variants:
        return None
    fig, axes = plt.subplots(len(variants), 2, figsize=(11, 3.0 * len(variants)), squeeze=False)
    for (ax_kv, ax_q), v in zip(axes, variants, strict=True):
        vt = a[v]
        for name in sorted(vt.rows, key=lambda n: vt.concurrency(n) or 0):
            if vt.concurrency(name) is None:
                continue
            rows = sorted((r for r in vt.rows[name] if not r.get("error")), key=lambda r: r["t_s"])
            measured = [r for r in rows if r.get("phase") == "measure"]
            if not measured:
                continue
            x = [r["t_s"] - measured[0]["t_s"] for r in measured]
            ax_kv.plot(x, [100 * (r.get(tl.KV_USAGE_COLUMN) or 0.0) for r in measured], label=name)
            (line,) = ax_q.plot(x, [r.get("requests_running") or 0.0 for r in measured], label=f"{name} running")
            ax_q.plot(
                x,
                [r.get("requests_waiting") or 0.0 for r in measured],
                ls="--",
                color=line.get_color(),
                label="waiting",
            )
        crit = _critical(ctx, v)
        ax_kv.set_title(
            f"{ctx.label(v)}: KV usage (critical concurrency {crit:,.1f})" if crit else f"{ctx.label(v)}: KV usage",
            fontsize=9,
        )
        ax_kv.set_ylabel("KV cache usage (%)")
        ax_q.set_ylabel("requests")
        for ax in (ax_kv, ax_q):
            ax.set_xlabel("seconds into the measured requests (run 1)")
    return plots.finish(fig, *axes.ravel(), legend_size=7)


EXPERIMENT = Experiment(
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

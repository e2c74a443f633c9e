"""The measured sweet spot (sweet_spot.parquet of each searched variant, :mod:`.search`).

Per variant: the bracket [highest concurrency meeting the SLO, lowest missing it), the grid levels and the
probes behind it, and the figures at the sweet spot (one probe or one grid run: a single run, whose
within-run interval is not given, so its figures read "no interval: one level of the search"). The
latency-first deployment (:mod:`worthit.experiments.deploy.recommend`) promises the sweet spot when it lies above the
grid's best level.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

import matplotlib.pyplot as plt

from worthit import schemas
from worthit.experiments.loadtest.report import Level
from worthit.experiments.sweet_spot.tables import REPORT_SWEET_SPOT, SWEET_SPOT
from worthit.report import plots
from worthit.report.context import Context
from worthit.report.experiments import Experiment, Figure
from worthit.report.measure import Measure
from worthit.report.views import INT, LONG, MEASURE, TEXT, VARIANT, Column, View, measure_cols

NAME = "sweet_spot"
ONE_LEVEL = "one level of the search (a single run)"


@dataclass(frozen=True)
class SweetSpot:
    variant: str
    status: str
    reason: str
    outcome: str | None = None
    lo: int | None = None
    hi: int | None = None
    description: str = ""
    rows: list[dict[str, Any]] = field(default_factory=list)  # grid levels and probes, as measured

    def at(self, concurrency: int | None) -> dict[str, Any] | None:
        """The measured row at a concurrency (a probe before a grid level of the same concurrency)."""
        hits = [r for r in self.rows if r.get("concurrency") == concurrency]
        return sorted(hits, key=lambda r: r.get("source") != "search")[0] if hits else None

    def level(self) -> Level | None:
        """The sweet spot as a load level (figures of its one measured run, without interval)."""
        row = self.at(self.lo)
        if self.status != schemas.STATUS_OK or row is None or not row.get("meets_slo"):
            return None
        n = int(row.get("n") or 0)

        def m(key: str) -> Measure:
            return Measure.none(row.get(key), n, ONE_LEVEL)

        return Level(
            self.variant,
            int(row["concurrency"]),
            schemas.STATUS_OK,
            "",
            n=n,
            n_errors=int(row.get("n_errors") or 0),
            runs=1,
            ttft_p50=m("ttft_ms_p50"),
            ttft_p99=m("ttft_ms_p99"),
            tpot_p50=m("tpot_ms_p50"),
            tpot_p99=m("tpot_ms_p99"),
            output_tok_per_s=m("output_tok_per_s"),
            goodput_tok_per_s=m("goodput_tok_per_s"),
        )


def analyse(ctx: Context) -> dict[str, SweetSpot]:
    out: dict[str, SweetSpot] = {}
    for v in ctx.variants:
        files = ctx.results.variant(v).of(SWEET_SPOT.name)
        if not files:
            continue
        f = files[0]
        if not f.ok:
            out[v] = SweetSpot(v, f.status, f.cause)
            continue
        md = f.metadata
        out[v] = SweetSpot(
            v,
            schemas.STATUS_OK,
            "",
            md.get("outcome"),
            md.get("lo"),
            md.get("hi"),
            str(md.get("description") or ""),
            sorted(f.rows, key=lambda r: (r.get("probe") or 0, r.get("concurrency") or 0)),
        )
    return out


def _row(s: SweetSpot) -> dict[str, Any]:
    base: dict[str, Any] = {"variant": s.variant, "status": s.status, "reason": s.reason or None}
    if s.status != schemas.STATUS_OK:
        return base
    at = s.level()
    return {
        **base,
        "outcome": s.outcome,
        "sweet_spot_concurrency": s.lo,
        "first_miss_concurrency": s.hi,
        "bracket_width": s.hi - s.lo if s.lo is not None and s.hi is not None else None,
        "grid_levels": sum(r.get("source") == "grid" for r in s.rows),
        "probes": sum(r.get("source") == "search" for r in s.rows),
        **measure_cols("ttft_ms_p99", at.ttft_p99 if at else Measure(None)),
        **measure_cols("tpot_ms_p99", at.tpot_p99 if at else Measure(None)),
        "description": s.description,
        "interval_basis": f"no interval: {ONE_LEVEL}" if at else None,
    }


def views(ctx: Context, a: dict[str, SweetSpot]) -> list[View]:
    cols = [
        Column("variant", "variant", VARIANT),
        Column("sweet_spot_concurrency", "sweet spot (meets SLO)", INT),
        Column("first_miss_concurrency", "first miss", INT),
        Column("probes", "probes", INT),
        Column("ttft_ms_p99", "TTFT P99 ms there", MEASURE),
        Column("tpot_ms_p99", "TPOT P99 ms there", MEASURE),
        Column("description", "search", LONG),
        Column("status", "status", TEXT),
        Column("reason", "reason", TEXT),
    ]
    caption = (
        "The highest concurrency whose P99 TTFT and P99 TPOT meet the SLO, bisected between the last passing and "
        "the first failing grid level (sweet_spot.variants; width sweet_spot.width). Each level is one run: "
        "a probe near the boundary may land either side on a rerun."
    )
    rows = [_row(a[v]) for v in ctx.variants if v in a]
    return [View(REPORT_SWEET_SPOT, "Sweet spot under the SLO", caption, cols, rows, order=85)]


def _figure(ctx: Context, a: dict[str, SweetSpot]) -> Any:
    found = [s for s in a.values() if s.status == schemas.STATUS_OK and s.rows]
    if not found:
        return None
    fig, axes = plt.subplots(1, len(found), figsize=(5.5 * len(found), 3.6), squeeze=False)
    for ax, s in zip(axes[0], found, strict=True):
        for source, marker in (("grid", "o"), ("search", "D")):
            for ok, color in ((True, "tab:green"), (False, "tab:red")):
                pts = [r for r in s.rows if r.get("source") == source and bool(r.get("meets_slo")) == ok]
                if pts:
                    ax.scatter(
                        [r["concurrency"] for r in pts],
                        [r.get("ttft_ms_p99") or 0.0 for r in pts],
                        marker=marker,
                        color=color,
                        label=f"{source}: {'meets' if ok else 'misses'} SLO",
                    )
        if ctx.slo.ttft_ms is not None:
            ax.axhline(ctx.slo.ttft_ms, color="grey", linestyle="--", linewidth=1, label="SLO TTFT")
        if s.lo is not None:
            ax.axvline(s.lo, color="tab:green", linewidth=1, alpha=0.5)
        ax.set_xscale("log", base=2)
        ax.set_xlabel("concurrency")
        ax.set_ylabel("TTFT P99 (ms)")
        ax.set_title(f"{ctx.label(s.variant)}: sweet spot {s.lo if s.lo is not None else 'none'}", fontsize=9)
    return plots.finish(fig, *axes[0], legend_size=7)


EXPERIMENT = Experiment(
    NAME,
    analyse,
    views=views,
    figures=(
        Figure(
            "sweet_spot",
            "The sweet-spot search: TTFT P99 of each grid level (circles) and probe (diamonds), green where the "
            "level meets the SLO; the vertical line is the sweet spot.",
            _figure,
        ),
    ),
    order=15,
    requires=("load",),
)

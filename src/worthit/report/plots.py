"""Drawing the report's figures (matplotlib, Agg) and writing them as PNG and SVG.

The experiments (:mod:`worthit.report.experiments`) declare which figures they have and draw them with
the helpers here; :func:`write` saves every figure whose data exist.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from pathlib import Path
from typing import Any

import matplotlib

matplotlib.use("Agg")
matplotlib.rcParams["svg.hashsalt"] = "worthit"  # the same figure gives the same SVG (ids are hashed from it)
import matplotlib.pyplot as plt  # noqa: E402
from matplotlib.figure import Figure  # noqa: E402

from worthit import atomic  # noqa: E402
from worthit.report.measure import Measure  # noqa: E402


def errorbars(ms: Sequence[Measure]) -> list[list[float]]:
    """Distances from each value to its interval (0 where it has none), as matplotlib's yerr wants them."""
    lo = [max(0.0, (m.value or 0) - m.low) if m.low is not None else 0.0 for m in ms]
    hi = [max(0.0, m.high - (m.value or 0)) if m.high is not None else 0.0 for m in ms]
    return [lo, hi]


def finish(fig: Figure, *axes: Any, legend: bool = True, grid: str = "both", legend_size: int = 8) -> Figure:
    """Every figure's tail: a light grid (on ``grid``'s axis), a small legend, a tight layout."""
    for ax in axes:
        ax.grid(alpha=0.3, axis=grid)
        if legend:
            ax.legend(fontsize=legend_size)
    fig.tight_layout()
    return fig


def concurrency_axis(ax: Any, levels: Sequence[int]) -> None:
    ax.set_xscale("log", base=2)
    ax.set_xticks(list(levels), [str(c) for c in levels])
    ax.minorticks_off()
    ax.set_xlabel("concurrency")


def _levels(series: Mapping[str, Sequence[Any]]) -> list[int]:
    return sorted({lv.concurrency for lvs in series.values() for lv in lvs})


def latency(series: Mapping[str, Sequence[Any]]) -> Figure:
    """TPOT and TTFT (P50 line, band to P99) against concurrency; ``series``: label -> load levels."""
    fig, axes = plt.subplots(1, 2, figsize=(11, 4.2))
    for ax, key, title in ((axes[0], "tpot", "TPOT (ms)"), (axes[1], "ttft", "TTFT (ms)")):
        for label, lvs in series.items():
            x = [lv.concurrency for lv in lvs]
            p50 = [getattr(lv, f"{key}_p50").value for lv in lvs]
            p99 = [getattr(lv, f"{key}_p99").value for lv in lvs]
            (line,) = ax.plot(x, p50, marker="o", label=f"{label} P50")
            ax.fill_between(x, p50, p99, alpha=0.2, color=line.get_color(), label=f"{label} to P99")
        concurrency_axis(ax, _levels(series))
        ax.set_ylabel(title)
    finish(fig, *axes)
    return fig


def throughput(series: Mapping[str, Sequence[Any]]) -> Figure:
    fig, axes = plt.subplots(1, 2, figsize=(11, 4.2))
    for ax, key, title in (
        (axes[0], "output_tok_per_s", "output tok/s"),
        (axes[1], "goodput_tok_per_s", "goodput tok/s (SLO met)"),
    ):
        for label, lvs in series.items():
            ms = [getattr(lv, key) for lv in lvs]
            ax.errorbar(
                [lv.concurrency for lv in lvs],
                [m.value for m in ms],
                yerr=errorbars(ms),
                marker="o",
                capsize=3,
                label=label,
            )
        concurrency_axis(ax, _levels(series))
        ax.set_ylabel(title)
    finish(fig, *axes)
    return fig


def write(
    figures: Mapping[str, tuple[str, Callable[[], Figure | None]]], outdir: str | Path, title: str = ""
) -> dict[str, dict[str, Any]]:
    """Draw each figure (name -> (caption, draw)); save those with data as <name>.png and <name>.svg.

    Returns {name: {png, svg, caption}}."""
    out = Path(outdir)
    out.mkdir(parents=True, exist_ok=True)
    written: dict[str, dict[str, Any]] = {}
    for name, (caption, draw) in figures.items():
        fig = draw()
        if fig is None:
            continue
        fig.suptitle(f"{title}: {name.replace('_', ' ')}" if title else name.replace("_", " "), fontsize=10)
        fig.tight_layout(rect=(0, 0, 1, 0.95))
        paths = {}
        for ext in ("png", "svg"):
            with atomic.target(out / f"{name}.{ext}", suffix=f".{ext}") as tmp:
                fig.savefig(tmp, format=ext, dpi=110, metadata={"Date": None} if ext == "svg" else None)
            paths[ext] = out / f"{name}.{ext}"
        plt.close(fig)
        written[name] = {**paths, "caption": caption}
    return written

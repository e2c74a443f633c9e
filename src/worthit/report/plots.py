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


def _band(ax: Any, x: Sequence[float], ms: Sequence[Measure], label: str, *, color: str, style: str) -> None:
    """A line through the values with their 95% intervals as a band (a value without one: the line only)."""
    y = [m.value if m.value is not None else float("nan") for m in ms]
    lo = [m.low if m.low is not None else v for m, v in zip(ms, y, strict=True)]
    hi = [m.high if m.high is not None else v for m, v in zip(ms, y, strict=True)]
    ax.plot(x, y, style, color=color, label=label, lw=1.6, ms=4)
    ax.fill_between(x, lo, hi, color=color, alpha=0.2, lw=0)


def with_without(
    quantity: str,
    unit: str,
    dimension: str,
    x: Sequence[float],
    *,
    without: Sequence[Measure],
    with_: Sequence[Measure],
    labels: tuple[str, str],
    accuracy: Sequence[tuple[str, float, tuple[float, float] | None, float]] = (),
    accuracy_note: str = "",
) -> Figure:
    """One optimisation at a glance: the figure that decided it, without and with it, against concurrency (or
    shared-prefix length) with 95% intervals as bands; beside it each task's accuracy change (points) with its
    interval against the bound (dashed), or why there is none (``accuracy_note``).

    ``accuracy``: (task, delta_pt, interval or None, bound_pt) per task."""
    fig, (ax, acc) = plt.subplots(1, 2, figsize=(6.4, 2.5), gridspec_kw={"width_ratios": [3, 2]})
    if dimension and len(x) > 1:
        _band(ax, x, without, labels[0], color="#7f7f7f", style="o--")
        _band(ax, x, with_, labels[1], color="#1f77b4", style="o-")
        if dimension == "concurrency":
            concurrency_axis(ax, [int(v) for v in x])
        else:
            ax.set_xticks(list(x), [f"{v:,.0f}" for v in x])
            ax.set_xlabel(f"{dimension} (tokens)" if dimension == "shared prefix" else dimension)
    else:  # one setting: the two sides side by side
        for i, (ms, label, color) in enumerate(((without, labels[0], "#7f7f7f"), (with_, labels[1], "#1f77b4"))):
            ax.errorbar([i], [ms[0].value], yerr=errorbars(ms[:1]), fmt="o", color=color, capsize=4, label=label)
        ax.set_xticks([0, 1], ["without", "with"])
        ax.set_xlim(-0.6, 1.6)
    ax.set_ylabel(f"{quantity} ({unit})" if unit else quantity, fontsize=8)
    ax.tick_params(labelsize=7)
    ax.xaxis.label.set_size(8)
    ax.grid(alpha=0.3)
    ax.legend(fontsize=7)
    if accuracy:
        ys = list(range(len(accuracy)))
        for y, (_task, d, iv, bound) in zip(ys, accuracy, strict=True):
            color = (
                "#2ca02c" if iv is not None and iv[0] > -bound else ("#d62728" if iv and iv[1] < -bound else "#ff7f0e")
            )
            err = [[d - iv[0]], [iv[1] - d]] if iv is not None else None
            acc.errorbar([d], [y], xerr=err, fmt="o", color=color, capsize=3, ms=4)
        bounds = sorted({b for *_, b in accuracy})
        for b in bounds:
            acc.axvline(-b, color="#d62728", ls="--", lw=1, label=f"\u2212{b:g} pt bound")
        acc.axvline(0, color="#555", lw=0.8)
        acc.set_yticks(ys, [t.removeprefix("worthit_") for t, *_ in accuracy], fontsize=7)
        acc.set_ylim(-0.7, len(accuracy) - 0.3)
        lo = min([-(bounds[-1]) * 1.5, *[(iv[0] if iv else d) - 0.5 for _, d, iv, _ in accuracy]])
        hi = max([1.0, *[(iv[1] if iv else d) + 0.5 for _, d, iv, _ in accuracy]])
        acc.set_xlim(lo, hi)
        acc.set_xlabel("accuracy change (pt)", fontsize=8)
        acc.tick_params(labelsize=7)
        acc.grid(alpha=0.3, axis="x")
        acc.legend(fontsize=7, loc="lower right" if lo < -10 else "best")
    else:
        acc.axis("off")
        acc.text(0.5, 0.5, accuracy_note or "no accuracy measured", ha="center", va="center", fontsize=8, wrap=True)
    fig.tight_layout()
    return fig


def svg_text(fig: Figure) -> str:
    """The figure as inline SVG (text as text: a small page), closed afterwards."""
    import io

    buf = io.StringIO()
    with matplotlib.rc_context({"svg.fonttype": "none"}):
        fig.savefig(buf, format="svg", metadata={"Date": None})
    plt.close(fig)
    text = buf.getvalue()
    return text[text.index("<svg") :]

"""The report's figures (matplotlib, Agg): PNG and SVG of each figure whose data exist."""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from pathlib import Path
from typing import Any

import matplotlib

matplotlib.use("Agg")
import matplotlib.pyplot as plt  # noqa: E402
from matplotlib.figure import Figure  # noqa: E402

from worthit import schemas  # noqa: E402
from worthit.report.analysis import Analysis, LevelFigures  # noqa: E402
from worthit.report.decide import Measure  # noqa: E402

CAPTIONS = {
    "latency": "TPOT and TTFT against concurrency per variant: P50 line, band up to P99.",
    "throughput": "Output tokens/s and goodput under the SLO against concurrency; bars are 95% intervals.",
    "prefix_ttft": "TTFT P50 against shared-prefix length, prefix cache on and off (95% intervals).",
    "accuracy": "Accuracy per task and variant; bars are 95% intervals from lm-eval's standard error.",
    "kv_capacity": "KV-cache capacity per variant (blocks; GiB and critical concurrency annotated).",
    "specdec": "Speculative decoding: predicted S = alpha / (k gamma + c) against the measured TPOT speed-up.",
}


def _ok(levels: Sequence[LevelFigures]) -> list[LevelFigures]:
    return sorted((lv for lv in levels if lv.ok), key=lambda lv: lv.concurrency)


def _err(ms: Sequence[Measure]) -> list[list[float]]:
    lo = [max(0.0, (m.value or 0) - m.ci_low) if m.ci_low is not None else 0.0 for m in ms]
    hi = [max(0.0, m.ci_high - (m.value or 0)) if m.ci_high is not None else 0.0 for m in ms]
    return [lo, hi]


def _conc_axis(ax: Any, a: Analysis) -> None:
    levels = sorted({lv.concurrency for v in a.variants for lv in _ok(a.levels[v])})
    ax.set_xscale("log", base=2)
    ax.set_xticks(levels, [str(c) for c in levels])
    ax.minorticks_off()
    ax.set_xlabel("concurrency")


def latency(a: Analysis) -> Figure | None:
    if not any(_ok(a.levels[v]) for v in a.variants):
        return None
    fig, axes = plt.subplots(1, 2, figsize=(11, 4.2))
    for ax, key, title in ((axes[0], "tpot", "TPOT (ms)"), (axes[1], "ttft", "TTFT (ms)")):
        for v in a.variants:
            lv = _ok(a.levels[v])
            if not lv:
                continue
            x = [x.concurrency for x in lv]
            p50 = [getattr(x, f"{key}_p50").value for x in lv]
            p99 = [getattr(x, f"{key}_p99").value for x in lv]
            (line,) = ax.plot(x, p50, marker="o", label=f"{v} P50")
            ax.fill_between(x, p50, p99, alpha=0.2, color=line.get_color(), label=f"{v} to P99")
        _conc_axis(ax, a)
        ax.set_ylabel(title)
        ax.grid(alpha=0.3)
        ax.legend(fontsize=8)
    fig.tight_layout()
    return fig


def throughput(a: Analysis) -> Figure | None:
    if not any(_ok(a.levels[v]) for v in a.variants):
        return None
    fig, axes = plt.subplots(1, 2, figsize=(11, 4.2))
    for ax, key, title in (
        (axes[0], "output_tok_per_s", "output tok/s"),
        (axes[1], "goodput_tok_per_s", "goodput tok/s (SLO met)"),
    ):
        for v in a.variants:
            lv = _ok(a.levels[v])
            if not lv:
                continue
            ms = [getattr(x, key) for x in lv]
            ax.errorbar(
                [x.concurrency for x in lv],
                [m.value for m in ms],
                yerr=_err(ms),
                marker="o",
                capsize=3,
                label=v,
            )
        _conc_axis(ax, a)
        ax.set_ylabel(title)
        ax.grid(alpha=0.3)
        ax.legend(fontsize=8)
    fig.tight_layout()
    return fig


def prefix_ttft(a: Analysis) -> Figure | None:
    agg = a.results.aggregates.get(schemas.PREFIX_SUMMARY.name)
    series: dict[str, tuple[list[float], list[float], list[list[float]]]] = {}
    if agg is not None and agg.ok and agg.rows:
        for r in sorted(agg.rows, key=lambda r: r.get("prefix_tokens") or 0):
            if r.get("ttft_ms_p50") is None:
                continue
            s = series.setdefault(
                f"{r['variant']} (cache {'on' if r.get('prefix_caching') else 'off'})", ([], [], [[], []])
            )
            s[0].append(r["prefix_tokens"])
            s[1].append(r["ttft_ms_p50"])
            s[2][0].append(0.0)
            s[2][1].append(0.0)
    else:
        for v, pts in a.prefix.items():
            for on in (True, False):
                sel = [p for p in pts if p.cache_on == on and p.ttft_p50.value is not None]
                if sel:
                    series[f"{v} (cache {'on' if on else 'off'})"] = (
                        [p.prefix_tokens for p in sel],
                        [p.ttft_p50.value or 0.0 for p in sel],
                        _err([p.ttft_p50 for p in sel]),
                    )
    if not series:
        return None
    fig, ax = plt.subplots(figsize=(7, 4.2))
    for label, (x, y, e) in series.items():
        ax.errorbar(x, y, yerr=e, marker="o", capsize=3, label=label)
    ax.set_xlabel("shared prefix length (tokens)")
    ax.set_ylabel("TTFT P50 (ms)")
    ax.grid(alpha=0.3)
    ax.legend(fontsize=8)
    fig.tight_layout()
    return fig


def accuracy(a: Analysis) -> Figure | None:
    have = {v: s for v, s in a.accuracy.items() if s}
    if not have:
        return None
    tasks = sorted({t for s in have.values() for t in s})
    fig, ax = plt.subplots(figsize=(max(6.0, 1.6 * len(tasks) * len(have) ** 0.5), 4.2))
    width = 0.8 / len(have)
    for i, (v, scores) in enumerate(have.items()):
        xs = [j + i * width for j, t in enumerate(tasks) if t in scores]
        ys = [float(scores[t]["value"]) * 100 for t in tasks if t in scores]
        es = [1.96 * float(scores[t].get("stderr") or 0) * 100 for t in tasks if t in scores]
        ax.bar(xs, ys, width, yerr=es, capsize=3, label=v)
    ax.set_xticks([j + 0.4 - width / 2 for j in range(len(tasks))], tasks)
    ax.set_ylabel("accuracy (%)")
    ax.grid(alpha=0.3, axis="y")
    ax.legend(fontsize=8)
    fig.tight_layout()
    return fig


def kv_capacity(a: Analysis) -> Figure | None:
    caps = [c for c in a.capacity.values() if c.num_blocks]
    if not caps:
        return None
    fig, ax = plt.subplots(figsize=(max(5.0, 1.3 * len(caps)), 4.0))
    bars = ax.bar([c.variant for c in caps], [c.num_blocks or 0 for c in caps], color="#4c72b0")
    for b, c in zip(bars, caps, strict=True):
        label = f"{c.kv_cache_gib:.2f} GiB" if c.kv_cache_gib is not None else ""
        if c.kv_critical_concurrency is not None:
            label += f"\ncrit. conc. {c.kv_critical_concurrency:.0f}"
        ax.annotate(label, (b.get_x() + b.get_width() / 2, b.get_height()), ha="center", va="bottom", fontsize=8)
    ax.set_ylabel("KV blocks")
    ax.margins(y=0.2)
    ax.grid(alpha=0.3, axis="y")
    fig.tight_layout()
    return fig


def specdec(a: Analysis) -> Figure | None:
    pts: list[tuple[str, float, float]] = []
    agg = a.results.aggregates.get(schemas.SPECDEC_SUMMARY.name)
    if agg is not None and agg.ok:
        pts = [
            (
                f"{r['variant']} c={r.get('concurrency')}",
                float(r["predicted_speedup"]),
                float(r["measured_speedup"]),
            )
            for r in agg.rows
            if r.get("predicted_speedup") is not None and r.get("measured_speedup") is not None
        ]
    else:
        for v, levels in a.spec.items():
            for s in levels:
                if s.predicted is not None and s.measured is not None and s.measured.improvement is not None:
                    pts.append((f"{v} c={s.concurrency}", s.predicted, s.measured.improvement))
    if not pts:
        return None
    fig, ax = plt.subplots(figsize=(5.5, 5))
    for label, p, m in pts:
        ax.scatter(p, m, label=label)
    hi = max(max(p, m) for _, p, m in pts) * 1.15
    ax.plot([0, hi], [0, hi], color="grey", lw=1, ls="--", label="measured = predicted")
    ax.axvline(a.rules.min_predicted_speedup, color="red", lw=1, ls=":", label="rule of thumb")
    ax.axhline(1.0, color="black", lw=0.5)
    ax.set_xlabel("predicted speed-up S")
    ax.set_ylabel("measured speed-up (TPOT)")
    ax.legend(fontsize=8)
    ax.grid(alpha=0.3)
    fig.tight_layout()
    return fig


FIGURES: Mapping[str, Callable[[Analysis], Figure | None]] = {
    "latency": latency,
    "throughput": throughput,
    "prefix_ttft": prefix_ttft,
    "accuracy": accuracy,
    "kv_capacity": kv_capacity,
    "specdec": specdec,
}


def write(a: Analysis, outdir: str | Path) -> dict[str, dict[str, Any]]:
    """Each figure with data as <name>.png and <name>.svg; returns {name: {png, svg, caption}}."""
    out = Path(outdir)
    out.mkdir(parents=True, exist_ok=True)
    written: dict[str, dict[str, Any]] = {}
    for name, make in FIGURES.items():
        fig = make(a)
        if fig is None:
            continue
        fig.suptitle(f"{a.study}: {name.replace('_', ' ')}", fontsize=10)
        fig.tight_layout(rect=(0, 0, 1, 0.95))
        paths = {}
        for ext in ("png", "svg"):
            tmp = out / f".{name}.tmp.{ext}"
            fig.savefig(tmp, format=ext, dpi=110, metadata={"Date": None} if ext == "svg" else None)
            tmp.replace(out / f"{name}.{ext}")
            paths[ext] = out / f"{name}.{ext}"
        plt.close(fig)
        written[name] = {**paths, "caption": CAPTIONS[name]}
    return written

"""What ``worthit tune`` shows when it ends: ``results/<study>-tune/tune/summary.md`` and ``pareto.svg``.

The answer first: per scenario the recommendation (the confirmation's, else the rounds' best, marked
unconfirmed) as a ``vllm serve`` command to copy, with its figure beside vLLM's defaults'. Then the Pareto front
as ``vllm bench sweep plot_pareto`` draws it: every measured level of every candidate, output tok/s per GPU
against tok/s per user (1000 / TPOT P50), the front drawn through the points no other point beats on both;
failed and pruned candidates are listed under it (they have no point). Then the trace, one row per candidate.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from worthit import atomic, secrets
from worthit.config import Study
from worthit.experiments.deploy.recommend import model_argv
from worthit.experiments.loadtest.report import levels_of
from worthit.metrics import Slo
from worthit.server import engine_flags
from worthit.stats import mean_ci95
from worthit.tune.candidates import derived_config, describe, gpus_of, tune_dir, variant_of
from worthit.tune.confirm import DEFAULTS
from worthit.tune.fresh_starts import ConfirmationRun, ScenarioConfirmation
from worthit.tune.prune import candidate_args
from worthit.tune.reached import UNITS, candidate_results
from worthit.tune.rounds import TuneRun, known_candidates
from worthit.tune.search import MEASURED, Candidate


@dataclass(frozen=True)
class FrontPoint:
    """One measured level of one candidate."""

    name: str
    concurrency: int
    per_user_tok_s: float  # 1000 / TPOT P50
    per_gpu_tok_s: float  # output tok/s / GPUs


def pareto(points: Sequence[FrontPoint]) -> list[FrontPoint]:
    """The points no other point beats on both axes (higher is better on both), by tok/s per user."""
    front = [
        p
        for p in points
        if not any(
            q.per_user_tok_s >= p.per_user_tok_s
            and q.per_gpu_tok_s >= p.per_gpu_tok_s
            and (q.per_user_tok_s > p.per_user_tok_s or q.per_gpu_tok_s > p.per_gpu_tok_s)
            for q in points
        )
    ]
    return sorted(front, key=lambda p: p.per_user_tok_s)


def points_of(cfg: Mapping[str, Any], candidates: Sequence[Candidate], results: Path) -> list[FrontPoint]:
    """Every measured level of the rounds' candidates."""
    if not candidates:
        return []
    study = Study(derived_config(cfg, candidates))
    slo = Slo.from_config(cfg.get("slo"))
    out: list[FrontPoint] = []
    for c in candidates:
        gpus = gpus_of(cfg, c.values)
        for lv in levels_of(candidate_results(study, variant_of(c.id), results), slo):
            tpot, tok = lv.tpot_p50.value, lv.output_tok_per_s.value
            if lv.ok and tpot and tok:
                out.append(FrontPoint(describe(c.values), lv.concurrency, 1000.0 / float(tpot), float(tok) / gpus))
    return out


def serve_command(cfg: Mapping[str, Any], values: Mapping[str, Any]) -> str:
    """The ``vllm serve`` command of a candidate, as a person would type it; a secret (``--api-key``) as the
    variable that holds it, never its value (docs/security.md)."""
    variant, args = candidate_args(cfg, values)
    model_name = str(cfg["variants"][variant]["model"])
    model, pin = model_argv(str(cfg["models"][model_name].get("source") or ""), model_name)
    extra = list(cfg["variants"][variant].get("extra_args") or [])
    return secrets.shell_command(["vllm", "serve", model, *pin, *engine_flags(args, extra)])


def _svg(points: Sequence[FrontPoint], path: Path) -> Path | None:
    if not points:
        return None
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    fig, ax = plt.subplots(figsize=(7, 4.5))
    for name in sorted({p.name for p in points}):
        mine = sorted((p for p in points if p.name == name), key=lambda p: p.concurrency)
        ax.plot([p.per_user_tok_s for p in mine], [p.per_gpu_tok_s for p in mine], "o-", alpha=0.6, label=name)
    front = pareto(points)
    ax.plot([p.per_user_tok_s for p in front], [p.per_gpu_tok_s for p in front], "k--", lw=1.5, label="Pareto front")
    for p in front:
        ax.annotate(
            f"c={p.concurrency}",
            (p.per_user_tok_s, p.per_gpu_tok_s),
            fontsize=7,
            xytext=(3, 3),
            textcoords="offset points",
        )
    ax.set_xlabel("tok/s per user (1000 / TPOT P50)")
    ax.set_ylabel("output tok/s per GPU")
    ax.set_title("Every candidate's load levels; the front no other point beats on both")
    ax.legend(fontsize=7, loc="best")
    ax.grid(alpha=0.3)
    fig.tight_layout()
    with atomic.target(path) as tmp:
        fig.savefig(tmp, format="svg")
    plt.close(fig)
    return path


def _confirmation_table(sc: ScenarioConfirmation, unit: str) -> list[str]:
    """Each re-measured candidate of one scenario beside vLLM's defaults: its figure per fresh start, the mean
    and its 95% interval over the starts (t), and which one the confirmation recommends."""
    rows = ["  | candidate | fresh starts | mean [95% interval] | per start |", "  |---|---|---|---|"]
    recommended = sc.decision.recommended if sc.decision is not None else None
    for name, runs in sorted(sc.runs.items(), key=lambda kv: (kv[0] != DEFAULTS, kv[0])):
        mean, low, high = mean_ci95(list(runs))
        shown = "–" if mean is None else f"{mean:,.1f}" + ("" if low is None else f" [{low:,.1f}, {high:,.1f}]")
        mark = " (recommended)" if name == recommended else ""
        starts = ", ".join(f"{r:,.1f}" for r in runs)
        rows.append(f"  | {name}{mark} | {len(runs)} | {shown} {unit} | {starts} |")
    return rows


def write(
    cfg: Mapping[str, Any], run: TuneRun, confirmation: ConfirmationRun | None, workdir: Path = Path(".")
) -> Path:
    """summary.md (and pareto.svg where a candidate measured something) in the tune's folder."""
    tdir = tune_dir(cfg, workdir)
    search = run.search
    candidates = known_candidates(search) if search is not None else []
    points = points_of(cfg, candidates, tdir.parent)
    svg = _svg(points, tdir / "pareto.svg")
    md: list[str] = [f"# worthit tune: {cfg['study']}", ""]
    md += ["## What to run", ""]
    decided = {sc.scenario: sc for sc in (confirmation.scenarios if confirmation else [])}
    by_id = {c.id: c for c in candidates}
    for s, best in run.best.items():
        unit = UNITS.get(s, s)
        sc = decided.get(s)
        if sc is not None and sc.decision is not None:
            d = sc.decision
            values = {} if d.recommended == DEFAULTS else by_id[sc.ids[d.recommended]].values
            runs = sc.runs.get(d.recommended, ())
            mean = sum(runs) / len(runs) if runs else 0.0
            head = "winner" if d.outcome == "winner" else "tie"
            md.append(
                f"- **{s}-first: {d.recommended}** ({head}, confirmed on {len(runs)} fresh starts: {mean:,.1f} {unit})"
            )
            md.append(f"  `{serve_command(cfg, values)}`")
            md.append(f"  why: {d.reasons[-1]}")
            md += ["", *_confirmation_table(sc, unit), ""]
        elif best is not None:
            values, figure = best
            md.append(
                f"- **{s}-first: {describe(values)}** (unconfirmed: the best of the rounds, {figure:,.1f} {unit})"
            )
            md.append(f"  `{serve_command(cfg, values)}`")
            if sc is not None and sc.note:
                md.append(f"  not confirmed: {sc.note}")
            if sc is not None and any(sc.runs.values()):
                md += ["", *_confirmation_table(sc, unit), ""]
        else:
            md.append(f"- **{s}-first**: no candidate measured")
    md.append("")
    if svg is not None:
        md += ["## The Pareto front", "", f"![Pareto front]({svg.name})", ""]
        front = pareto(points)
        md += ["| candidate | concurrency | tok/s per user | output tok/s per GPU |", "|---|---|---|---|"]
        md += [f"| {p.name} | {p.concurrency} | {p.per_user_tok_s:,.1f} | {p.per_gpu_tok_s:,.1f} |" for p in front]
        md.append("")
    md += [
        "## The search",
        "",
        "| round | candidate | scenario | status | figure | reason |",
        "|---|---|---|---|---|---|",
    ]
    for t in sorted(search.trace() if search else [], key=lambda t: (int(t["round"] or 0), str(t["scenario"]))):
        shown = f"{t['value']:,.1f}" if t["status"] == MEASURED and t["value"] is not None else "–"
        reason = str(t["reason"] or "").replace("|", "\\|")
        md.append(f"| {t['round']} | {describe(t['values'])} | {t['scenario']} | {t['status']} | {shown} | {reason} |")
    md.append("")
    md.append("Trace: `trace.parquet`" + ("; confirmation: `confirmation.parquet`" if confirmation else ""))
    path = tdir / "summary.md"
    atomic.write_text(path, "\n".join(md) + "\n")
    return path

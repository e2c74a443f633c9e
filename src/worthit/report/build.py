"""The report, stage by stage: results -> analyses -> evidence -> verdicts -> views and figures -> files.

:func:`build` runs every registered experiment's analysis (:mod:`worthit.report.experiments`), gathers
each optimisation's evidence, decides (:mod:`worthit.report.decide`) and assembles the views. The workflow
calls it three times (tables, figures, HTML: one rule each, see workflow/rules/report.smk);
``worthit report --results DIR`` calls it once to re-decide and re-render a results folder with an edited
``decide:`` section, serving nothing.
"""

from __future__ import annotations

import argparse
import os
import sys
from collections import Counter
from collections.abc import Callable, Iterable, Mapping
from dataclasses import dataclass, replace
from pathlib import Path
from typing import Any

import pandas as pd
from matplotlib.figure import Figure

from worthit import atomic, errors, schemas, secrets
from worthit.config import Study, config_hash
from worthit.config import load as load_config
from worthit.errors import InputError
from worthit.report import data, experiments, headline, plausibility, plots, terminal
from worthit.report.context import Context, Pair
from worthit.report.decide import Check, Comparison, Evidence, TaskAccuracy, Verdict, control_spread, decide
from worthit.report.experiments import Figure as ExpFigure
from worthit.report.experiments import registered
from worthit.report.render import markdown_page, write_html
from worthit.report.tables import capability_view, comparison_view, failures_view, verdicts_view
from worthit.report.views import View, stored
from worthit.tune import page as tune_page

PathLike = str | os.PathLike[str]
# What the decide_study rule writes: every report table but those an experiment writes after the decision
# (report_validation needs the deployments' validation runs, which need report_deployments: render_report
# writes it, see workflow/rules/report.smk).
DECISION_TABLES = tuple(
    t for t in schemas.report_tables() if not any(t is later for later in experiments.after_decision())
)


@dataclass
class Report:
    ctx: Context
    pairs: dict[str, Pair]
    evidence: dict[str, Evidence]
    verdicts: dict[str, Verdict]
    views: list[View]
    figures: dict[str, tuple[str, Callable[[], Figure | None]]]

    def view(self, table: schemas.Table) -> View:
        return next(v for v in self.views if v.table is table)

    def rows(self, table: schemas.Table) -> list[dict[str, Any]]:
        return stored(self.view(table))


def _measured(res: data.VariantResults) -> str:
    kinds = sorted({f.experiment.split("/")[0].split("~")[0] for f in res.files if f.ok})
    return ", ".join(kinds) or "nothing"


def _machines_note(ctx: Context, pair: Pair) -> list[str]:
    """Said when the two sides were not all measured on one machine, or the results cannot tell: the
    intervals hold run-to-run variation on a machine, not the difference between machines (another host,
    another GPU of the same model)."""
    without, with_ = ctx.machines(pair.without), ctx.machines(pair.with_)
    same = ctx.same_machine(pair.without, pair.with_)
    matched = ctx.matched_machines(pair.without, pair.with_)
    if same and len(matched) > 1:
        return [
            f"measured on {len(matched)} machines ({'; '.join(sorted(matched))}), each result of both sides on "
            "one of them (runs matched machine by machine): the machines' difference is inside both sides' "
            "intervals, not between them"
        ]
    if not without or not with_ or same:
        return []
    if same is None:
        return [
            f"whether one machine measured both sides is not recorded ({'; '.join(sorted(without | with_))}: a "
            "host name without GPU UUIDs): machine-to-machine variation may be in the difference, not in the "
            "intervals"
        ]
    return [
        f"measured on more than one machine ({pair.without}: {'; '.join(sorted(without))}; {pair.with_}: "
        f"{'; '.join(sorted(with_))}): machine-to-machine variation is not in the intervals; measure both "
        "on one machine to exclude it"
    ]


@dataclass(frozen=True)
class Spread:
    """How far two measurements of one configuration came apart on different machines: the widest a control
    of the study measured (worthit.report.decide.control_spread)."""

    factor: float
    control: str  # the control variant
    base: str  # the configuration it measured again
    what: str  # the figure the factor rests on


def machine_spread(pairs: Mapping[str, Pair], evidence: Mapping[str, Evidence]) -> Spread | None:
    """The widest spread any control of the study measured, or None when none measured one. It is the
    machines' difference, not the baseline's: it widens every pair whose sides were measured apart, whatever
    its baseline (a candidate judged against another candidate crosses the same machines)."""
    out: Spread | None = None
    for v, p in pairs.items():
        if not p.control or v not in evidence or evidence[v].status != schemas.STATUS_OK:
            continue
        g, what = control_spread(evidence[v])
        if g > (out.factor if out else 1.0):
            out = Spread(g, v, p.base, what)
    return out


def _widen(
    ctx: Context, pair: Pair, comps: list[Comparison], spread: Spread | None
) -> tuple[list[Comparison], list[str], str]:
    """A pair whose sides were not measured on one machine, in a study whose control moved: every comparison
    carries the control's factor on top of its interval; says so, and what would settle it."""
    if spread is None or pair.control or ctx.same_machine(pair.without, pair.with_):
        return comps, [], ""
    g, control = spread.factor, spread.control
    widened = [c if c.improvement.is_exact else replace(c, spread=g, spread_source=f"control {control}") for c in comps]
    note = (
        f"the control {control} measured {spread.base}'s own configuration up to x{g:.2f} apart ({spread.what}), "
        f"and {pair.variant}'s two sides were not measured on one machine: each timing interval here is widened "
        "by that factor, so only a difference larger than the machines' is decided"
    )
    if pair.base == spread.base:
        settle = (
            f"measure {pair.variant} beside a control of {pair.base} on one machine and judge it against that "
            f"control (variants.{pair.variant}.baseline)"
        )
    else:
        settle = f"measure {pair.variant} and {pair.base} on one machine"
    return widened, [note], settle


def _machines_basis(ctx: Context, pair: Pair, comps: list[Comparison]) -> str:
    """Where the two sides' timings were measured, as a verdict's interval basis says it: "one machine", the
    machines' widening, or nothing when the results cannot tell."""
    widened = next((c for c in comps if c.spread > 1), None)
    if widened is not None:
        return f"two machines, widened by the machines' x{widened.spread:.2f} ({widened.spread_source})"
    return "one machine" if ctx.same_machine(pair.without, pair.with_) else ""


def evidence_for(ctx: Context, pair: Pair, spread: Spread | None = None) -> Evidence:
    """Everything the experiments say about one optimisation, with the variants' failures; ``spread``: the
    widest difference a control of the study measured (:func:`machine_spread`)."""
    v = pair.variant
    res = ctx.results.variant(v)
    comps: list[Comparison] = []
    checks: list[Check] = []
    acc: list[TaskAccuracy] = []
    notes: list[str] = []
    for exp in registered():
        a = ctx.analyses.get(exp.name)
        for item in exp.evidence(ctx, a, pair) if exp.evidence else ():
            if isinstance(item, Comparison):
                comps.append(item)
            elif isinstance(item, Check):
                checks.append(item)
            else:
                acc.append(item)
        notes += list(exp.notes(ctx, a, pair)) if exp.notes else []
    notes += _machines_note(ctx, pair)
    comps, widened_notes, perf_settle = _widen(ctx, pair, comps, spread)
    notes += widened_notes
    acc_why, acc_settle = experiments.why_no_accuracy(ctx, pair) if not acc else ("", "")
    status, reason = res.status
    if not res.files:
        status, reason = "not run", "no results: the workflow has not run this variant"
    elif status == schemas.STATUS_OK and not any(c.judged for c in comps) and not checks and not acc and res.failures():
        first = res.failures()[0]  # what ran broke before it measured anything comparable
        status, reason = first.status, f"{first.experiment}: {first.cause}"
    base = ctx.results.variant(pair.base or ctx.baseline)
    if status == schemas.STATUS_OK and base.files and base.status[0] != schemas.STATUS_OK:
        reason = f"the baseline '{pair.base or ctx.baseline}' {base.status[0]}: {base.status[1]}"
    elif status == schemas.STATUS_OK and not any(c.judged for c in comps) and not checks and not acc:
        reason = f"nothing to compare: {v} measured {_measured(res)}, the baseline {_measured(base)}"
    e = Evidence(
        v,
        pair.optimisation,
        status,
        reason,
        comps,
        checks,
        acc,
        lossless=pair.lossless,
        random_weights=ctx.random_weights(pair.with_) or ctx.random_weights(pair.without),
        notes=notes,
        accuracy_failure=acc_why,
        accuracy_settle=acc_settle,
        accuracy_asked=experiments.asks_accuracy(ctx, v),
        control=pair.control,
        perf_settle=perf_settle,
        machines=_machines_basis(ctx, pair, comps),
        content_dependent=pair.content_dependent,
    )
    return replace(e, findings=tuple(plausibility.findings(ctx, pair, e)))


def _drawer(f: ExpFigure, ctx: Context, a: Any) -> Callable[[], Figure | None]:
    def draw() -> Figure | None:
        return f.draw(ctx, a)

    return draw


def build(study: Study, results: data.StudyResults) -> Report:
    ctx = Context.of(study, results)
    exps = registered()
    for exp in exps:
        ctx.analyses[exp.name] = exp.analyse(ctx)
    pairs = {v: ctx.pair(v) for v in ctx.others}
    controls = {v: evidence_for(ctx, p) for v, p in pairs.items() if p.control}  # first: they widen the others
    spread = machine_spread(pairs, controls)
    evidence = {v: controls.get(v) or evidence_for(ctx, p, spread) for v, p in pairs.items()}
    verdicts = {v: decide(e, ctx.rules) for v, e in evidence.items()}
    views = [verdicts_view(ctx, verdicts, pairs, evidence)]
    views += experiments.verdict_views(ctx, verdicts, pairs)  # what the verdicts chose
    views.append(comparison_view(ctx, evidence, pairs))
    capability: list[dict[str, Any]] = []
    figures: dict[str, tuple[str, Callable[[], Figure | None]]] = {}
    for exp in exps:
        a = ctx.analyses[exp.name]
        views += list(exp.views(ctx, a)) if exp.views else []
        capability += list(exp.capability(ctx, a)) if exp.capability else []
        for f in exp.figures:
            figures[f.name] = (f.caption, _drawer(f, ctx, a))
    views += [capability_view(capability), failures_view(ctx)]
    views.sort(key=lambda v: v.order)
    return Report(ctx, pairs, evidence, verdicts, views, figures)


def from_files(cfg: Mapping[str, Any], paths: Iterable[PathLike]) -> Report:
    """The report of result files (any order) under a validated config (the workflow's adapters)."""
    study = Study(cfg)
    return build(study, data.load([p for p in paths if Path(p).name != "summary.parquet"], None, study.variants))


def expected_results(study: Study) -> dict[str, list[str]]:
    """Each variant's result files below its folder, without .parquet: what the workflow's report reads."""
    return {v: study.result_files(v) for v in study.variants}


def from_dir(cfg: Mapping[str, Any], results_dir: PathLike, *, named_only: bool = False) -> Report:
    """The report of a results folder; ``named_only`` (``worthit report``): only the files the study names, as
    the workflow's report reads them (a stray copy is left out: :func:`worthit.report.data.result_paths`)."""
    study = Study(cfg)
    return build(study, data.load_dir(results_dir, study.variants, expected_results(study) if named_only else None))


def write_tables(
    report: Report, outdir: PathLike, metadata: Mapping[str, Any], tables: Iterable[schemas.Table] = DECISION_TABLES
) -> dict[str, Path]:
    """The chosen views as Parquet (schema module) and CSV, and all of them in tables.md."""
    out = Path(outdir)
    written: dict[str, Path] = {}
    for t in tables:
        v = report.view(t)
        rows = stored(v)
        written[v.short] = schemas.write(out / f"{v.short}.parquet", t, rows, metadata=metadata)
        with atomic.target(out / f"{v.short}.csv", suffix=".csv") as tmp:
            pd.DataFrame(rows, columns=t.columns).to_csv(tmp, index=False)
    if set(tables) >= set(DECISION_TABLES):
        # ... and the views of experiments registered outside the package (their tables are their own)
        views = [v for v in report.views if v.table in set(tables) or v.table not in schemas.report_tables()]
        atomic.write_text(out / "tables.md", markdown_page(report.ctx, views))
    return written


def study_views(results_dir: PathLike) -> list[View]:
    """The study-level tables other stages wrote beside the results, as report views, when present:
    what the study cost (cost.parquet, worthit.cost) and the plan against the measurement
    (plan_vs_measured.parquet, worthit.plan.compare)."""
    from worthit import cost
    from worthit.report import planned

    root = Path(results_dir)
    found: list[View] = []
    for name, table, make in (
        ("plan_vs_measured.parquet", schemas.PLAN_VS_MEASURED, planned.view),
        ("cost.parquet", schemas.STUDY_COST, cost.view),
    ):
        if (root / name).exists():
            found.append(make(schemas.read(root / name, table).table.to_pylist()))
    return found


def write_figures(report: Report, outdir: PathLike) -> dict[str, dict[str, Any]]:
    return plots.write(report.figures, Path(outdir), report.ctx.study.name)


def figures_in(report: Report, fig_dir: PathLike) -> dict[str, dict[str, Any]]:
    """The figures already written to ``fig_dir`` (the plot_study rule's output)."""
    d = Path(fig_dir)
    return {
        name: {"svg": d / f"{name}.svg", "png": d / f"{name}.png", "caption": cap}
        for name, (cap, _) in report.figures.items()
        if (d / f"{name}.svg").exists()
    }


def write_all(report: Report, outdir: PathLike, html: PathLike, metadata: Mapping[str, Any]) -> Path:
    """Tables, figures and the page in one go (``worthit report``, ``python -m worthit.report.build``)."""
    write_tables(report, outdir, metadata, schemas.report_tables())
    fig_dir = Path(outdir) / "figures"
    for old in [*fig_dir.glob("*.png"), *fig_dir.glob("*.svg")]:  # a figure this report no longer draws
        if old.stem not in report.figures:
            old.unlink()
    figs = write_figures(report, fig_dir)
    for old in [*fig_dir.glob("*.png"), *fig_dir.glob("*.svg")]:
        if old.stem not in figs:
            old.unlink()
    views = [*report.views, *study_views(Path(outdir).parent)]
    tune = tune_page.section(Path(outdir).parent)  # results/<study>-tune/tune/, where the study was tuned
    return write_html(report.ctx, views, figs, Path(html), decision_figures=decision_figures(report), tune=tune)


def decision_figures(report: Report) -> dict[str, str]:
    """Each optimisation's small figure for the top of the page, as inline SVG (worthit.report.headline)."""
    return headline.figures(report.ctx, report.pairs, report.verdicts, report.evidence)


def main(argv: list[str] | None = None) -> int:
    """``worthit report``: re-decide and re-render a results folder (no serving)."""
    ap = argparse.ArgumentParser(prog="worthit report", description=main.__doc__)
    ap.add_argument("--results", required=True, help="a results/<study> folder (variant~*/ inside)")
    ap.add_argument(
        "--configfile",
        help="the study config (default: <results>/report/config.yaml, written by the last report, else "
        "config/config.yaml); edit its decide: section to re-decide",
    )
    ap.add_argument("--out", help="report folder (default: <results>/report; the page goes next to it)")
    args = ap.parse_args(argv)
    root = Path(args.results)
    if not root.is_dir() or not any(root.glob("variant~*")):
        ap.error(f"--results {root}: not a results folder (no variant~*/ inside)")
    cfg_path = Path(args.configfile) if args.configfile else root / "report" / "config.yaml"
    if not cfg_path.exists():
        from worthit.config import ROOT

        cfg_path = ROOT / "config" / "config.yaml"
    try:
        cfg = load_config(cfg_path)
        report = from_dir(cfg, root, named_only=True)
    except InputError as e:  # a bad config or result file: its message, never a traceback
        return errors.report("worthit report", e)
    expected = expected_results(Study(cfg))
    left = data.result_paths(root, expected)[1]
    if left:  # read by no verdict: say so, so a file the user meant to count is not lost without a word
        tops = {p.relative_to(root).parts[0] for p in left}
        folders = sorted(t for t in tops if t.startswith("variant~") and t.split("~", 1)[1] not in expected)
        files = [p for p in left if p.relative_to(root).parts[0] not in folders]
        said = [f"{root / f}/ (a variant the study does not name)" for f in folders] + [str(p) for p in files]
        print(
            f"worthit report: left out {len(left)} result file{'s' if len(left) != 1 else ''} the study does not "
            f"name: {', '.join(said)}",
            file=sys.stderr,
        )
    out = Path(args.out) if args.out else root / "report"
    page = write_all(
        report,
        out,
        out.parent / "report.html" if not args.out else out / "report.html",
        {"config_hash": config_hash(cfg), "config_file": str(cfg_path)},
    )
    save_config(cfg, out)
    gaps = Counter(r["status"] for r in report.rows(schemas.REPORT_FAILURES))
    missing = ""
    if gaps:  # an incomplete or partly failed study says so where the verdicts are read
        counts = ", ".join(f"{n} {status}" for status, n in sorted(gaps.items()))
        missing = f"results missing or failed: {counts} (the report's 'Failed, not applicable or not run' lists them)"
    summarised = terminal.summary_tables()
    shown = {v.short: stored(v) for v in report.views if any(v.table is t for t in summarised)}
    terminal.show_summary(report.rows(schemas.REPORT_VERDICTS), shown, page, gaps=missing)
    return 0


def save_config(cfg: Mapping[str, Any], outdir: PathLike) -> Path:
    """The validated config beside the tables, so ``worthit report`` can re-render the folder later."""
    import yaml

    return atomic.write_text(Path(outdir) / "config.yaml", yaml.safe_dump(secrets.redact(dict(cfg)), sort_keys=False))


if __name__ == "__main__":
    raise SystemExit(main())

"""The report's experiments as a registry: each one module that declares what it contributes.

An :class:`Experiment` has a name, an ``analyse`` step (pure, over the typed results in the
:class:`~worthit.report.context.Context`; its result is stored under its name in ``ctx.analyses`` for the
experiments after it), the ``evidence`` it feeds the decision layer for one optimisation (comparisons,
checks, accuracy per task), its report tables (``views``), its figures and its rows of the capability
boundary; and, where it has them, what the shared report core asks of it in its stead (it names no experiment,
tests/unit/report/test_core.py): how a verdict's row is named (``change``, ``flags``, ``helper``,
``model_name``), its plausibility checks (``findings``, ``checks``, ``kv_scales_of``), accuracy's part of a
verdict (``asks_accuracy``, ``why_no_accuracy``, ``verdict_columns``, ``failures``), the tables it builds from the
verdicts (``verdict_views``; ``after_decision`` for one written with the page), and its parts of the page
(``provenance``, ``commands``) and of the terminal's summary (``summary``). The report runs the registered
experiments in ``order`` (after those they ``require``); adding one is a new module that calls :func:`register`,
and nothing else in the report changes (docs/architecture.md, "Adding an experiment", has the measurement
side)::

    def analyse(ctx):                      # variant -> what it measured
        return {v: ctx.results.variant(v).of("my_table") for v in ctx.variants}

    def evidence(ctx, a, pair):            # the side without vs the side with the optimisation
        return [Comparison("my figure", "ms", m(a[pair.without]), m(a[pair.with_]), False, LATENCY)]

    register(Experiment("mine", analyse, evidence=evidence, views=..., figures=(Figure(...),)))

tests/unit/report/test_report.py registers a toy experiment this way and finds its table in the page.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

from matplotlib.figure import Figure as MplFigure

from worthit.report.context import Context, Pair
from worthit.report.decide import Check, Comparison, TaskAccuracy
from worthit.report.evidence import Evidence
from worthit.report.outcomes import Finding, Verdict
from worthit.report.views import Column, View
from worthit.schemas import Table

if TYPE_CHECKING:
    from rich.console import Console

EvidenceItem = Comparison | Check | TaskAccuracy
Rows = Sequence[Mapping[str, Any]]


@dataclass(frozen=True)
class Figure:
    name: str
    caption: str
    draw: Callable[[Context, Any], MplFigure | None]


@dataclass(frozen=True)
class Change:
    """What a variant changes from its baseline, in an experiment's words (a part of the pair's name)."""

    name: str  # "prefix caching (on vs off)"
    baseline_has_it: bool = False  # the baseline is the side with the optimisation (the variant turns it off)
    content_dependent: bool = False  # its effect depends on what is generated: judged on real text


@dataclass(frozen=True)
class Helper:
    """A variant that is no optimisation but serves one (a draft model served alone for its speed)."""

    of: str  # added to the pair's name: "the draft model of spec, served alone for gamma"
    line: str  # the headline's line for it


@dataclass(frozen=True)
class Summary:
    """An experiment's lines in the terminal's summary, under the decision (``worthit report``, the end of a
    workflow run: :mod:`worthit.report.terminal`), printed from the stored rows of its report ``tables`` alone:
    the end of a run reads them back from their Parquet files and rebuilds nothing."""

    tables: Sequence[Table]
    # prints them to the console, given every summary's stored rows by table short name (report_x -> x)
    show: Callable[[Console, Mapping[str, Rows]], None]


@dataclass(frozen=True)
class Experiment:
    name: str
    analyse: Callable[[Context], Any]
    evidence: Callable[[Context, Any, Pair], Sequence[EvidenceItem]] | None = None
    views: Callable[[Context, Any], Sequence[View]] | None = None
    figures: Sequence[Figure] = ()
    capability: Callable[[Context, Any], Sequence[dict[str, Any]]] | None = None
    notes: Callable[[Context, Any, Pair], Sequence[str]] | None = None  # lines added to a verdict's reason
    order: int = 50
    requires: Sequence[str] = field(default_factory=tuple)
    # How the pair's name says what the experiment's engine flags change (the baseline's arguments, the
    # variant's); ``flags`` are the ones it names, which the generic flag changes leave out.
    change: Callable[[Mapping[str, Any], Mapping[str, Any]], Change | None] | None = None
    flags: frozenset[str] = frozenset()
    helper: Callable[[Context, str], Helper | None] | None = None  # the variant as a helper of this experiment
    # Its plausibility checks of one optimisation, on its analysis (worthit.report.plausibility.findings).
    findings: Callable[[Context, Any, Pair], Sequence[Finding | None]] | None = None
    # Its checks that read the optimisation's evidence too (run before ``findings``, in the experiments' order).
    checks: Callable[[Context, Any, Pair, Evidence], Sequence[Finding | None]] | None = None
    # How the pair's name says what a model of this experiment is (the config, the model's key), None for
    # a model it did not make (a quantised checkpoint: "AWQ W4A16 weights (awq)").
    model_name: Callable[[Mapping[str, Any], str], str | None] | None = None
    # The model whose KV-cache scales a model of this experiment carries, calibrated (the config, the model's
    # key), None for one without (worthit.report.plausibility.calibrated_kv_scales).
    kv_scales_of: Callable[[Mapping[str, Any], str], str | None] | None = None
    # Whether it measures the variant's accuracy, or the variant's config asks it to (Evidence.accuracy_asked: a
    # lossless optimisation's accuracy check reads it).
    asks_accuracy: Callable[[Context, str], bool] | None = None
    # Why none of its accuracy compares the pair's two sides, and what would settle it, when the optimisation's
    # evidence holds no task's accuracy (Evidence.accuracy_failure, accuracy_settle); None when it has nothing
    # to say.
    why_no_accuracy: Callable[[Context, Pair], tuple[str, str] | None] | None = None
    # Its columns of the verdicts table, after the regimes' (the verdict's accuracy outcome).
    verdict_columns: Sequence[Column] = ()
    # Its rows of the failures table for a variant beyond its failed result files (a failed task in an ok file).
    failures: Callable[[Context, str], Sequence[dict[str, Any]]] | None = None
    # Its tables that read the verdicts (the recommended deployments), built once every optimisation is decided:
    # (ctx, its analysis, the verdicts, the pairs), by variant.
    verdict_views: Callable[[Context, Any, Mapping[str, Verdict], Mapping[str, Pair]], Sequence[View]] | None = None
    # Its report tables that need results made from the decision's tables (the deployments' validation runs, served
    # from the deployments): left out of the decision's tables (worthit.report.build.DECISION_TABLES), written with
    # the page.
    after_decision: Sequence[Table] = ()
    # What the page's provenance records of its results (the tool versions they carry), added after vLLM's.
    provenance: Callable[[Context], Mapping[str, Any]] | None = None
    # Its commands to copy, shown under the decision (the page's deployments section: each a block of
    # templates/report.html.j2, title, command, figures, ...), from the report's views.
    commands: Callable[[Sequence[View]], Sequence[Mapping[str, Any]]] | None = None
    summary: Summary | None = None  # its lines in the terminal's summary


def changes(a: Mapping[str, Any], b: Mapping[str, Any]) -> tuple[list[Change], set[str]]:
    """What the registered experiments name of the change from engine arguments ``a`` to ``b``, and the
    flags they name (in the experiments' order)."""
    out = [c for e in registered() if e.change is not None and (c := e.change(a, b)) is not None]
    return out, {f for e in registered() for f in e.flags}


def helper_of(ctx: Context, variant: str) -> Helper | None:
    """The variant as a helper of a registered experiment, if it is one."""
    return next((h for e in registered() if e.helper is not None and (h := e.helper(ctx, variant))), None)


def model_name(cfg: Mapping[str, Any], model: str) -> str:
    """The model as the pair's name says it: in the words of the experiment that made it, else its key."""
    return next((n for e in registered() if e.model_name is not None and (n := e.model_name(cfg, model))), model)


def kv_scales_of(cfg: Mapping[str, Any], model: str) -> str | None:
    """The model whose calibrated KV-cache scales ``model`` carries, as the experiment that made it says."""
    found = (e.kv_scales_of(cfg, model) for e in registered() if e.kv_scales_of is not None)
    return next((s for s in found if s is not None), None)


def asks_accuracy(ctx: Context, variant: str) -> bool:
    """Whether a registered experiment measures the variant's accuracy, or the variant's config asks one to."""
    return any(e.asks_accuracy(ctx, variant) for e in registered() if e.asks_accuracy is not None)


def why_no_accuracy(ctx: Context, pair: Pair) -> tuple[str, str]:
    """(why, what would settle it) when no task's accuracy compares the pair's two sides, as the experiments
    that measure accuracy say it; ("", "") when none does."""
    said = [w for e in registered() if e.why_no_accuracy is not None and (w := e.why_no_accuracy(ctx, pair))]
    return "; ".join(why for why, _ in said), "; ".join(settle for _, settle in said)


def verdict_columns() -> list[Column]:
    """The registered experiments' columns of the verdicts table, in their order."""
    return [c for e in registered() for c in e.verdict_columns]


def failure_rows(ctx: Context, variant: str) -> list[dict[str, Any]]:
    """The registered experiments' rows of the failures table for the variant, beyond its failed files."""
    return [r for e in registered() if e.failures is not None for r in e.failures(ctx, variant)]


def verdict_views(ctx: Context, verdicts: Mapping[str, Verdict], pairs: Mapping[str, Pair]) -> list[View]:
    """The registered experiments' views that read the verdicts, in their order (each given its analysis)."""
    found = (e.verdict_views(ctx, ctx.analyses.get(e.name), verdicts, pairs) for e in registered() if e.verdict_views)
    return [v for views in found for v in views]


def after_decision() -> list[Table]:
    """The report tables the registered experiments write after the decision's (with the page)."""
    return [t for e in registered() for t in e.after_decision]


def provenance(ctx: Context) -> dict[str, Any]:
    """What the registered experiments record in the page's provenance, in their order."""
    return {k: v for e in registered() if e.provenance is not None for k, v in e.provenance(ctx).items()}


def commands(views: Sequence[View]) -> list[Mapping[str, Any]]:
    """The registered experiments' commands to copy under the decision, in their order."""
    return [b for e in registered() if e.commands is not None for b in e.commands(views)]


def summaries() -> list[Summary]:
    """The registered experiments' parts of the terminal's summary, in their order."""
    return [e.summary for e in registered() if e.summary is not None]


REGISTRY: dict[str, Experiment] = {}


def register(exp: Experiment) -> Experiment:
    """Add (or replace) an experiment; returns it, so a module can keep a handle."""
    REGISTRY[exp.name] = exp
    return exp


def unregister(name: str) -> None:
    REGISTRY.pop(name, None)


def registered() -> list[Experiment]:
    """The experiments in the order they run (an experiment after those it requires)."""
    from worthit import measurements

    measurements.load_plugins()  # an experiment module outside this package registers its report side too
    done: list[Experiment] = []
    pending = sorted(REGISTRY.values(), key=lambda e: (e.order, e.name))
    while pending:
        ready = [e for e in pending if all(r in {d.name for d in done} or r not in REGISTRY for r in e.requires)]
        if not ready:
            raise ValueError(f"experiments with circular requirements: {[e.name for e in pending]}")
        done.append(ready[0])
        pending.remove(ready[0])
    return done

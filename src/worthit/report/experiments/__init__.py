"""The report's experiments as a registry: each one module that declares what it contributes.

An :class:`Experiment` has a name, an ``analyse`` step (pure, over the typed results in the
:class:`~worthit.report.context.Context`; its result is stored under its name in ``ctx.analyses`` for the
experiments after it), the ``evidence`` it feeds the decision layer for one optimisation (comparisons,
checks, accuracy per task), its report tables (``views``), its figures and its rows of the capability
boundary. The report runs the registered experiments in ``order`` (after those they ``require``); adding
one is a new module that calls :func:`register`, and nothing else in the report changes
(docs/architecture.md, "Adding an experiment", has the measurement side)::

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
from typing import Any

from matplotlib.figure import Figure as MplFigure

from worthit.report.context import Context, Pair
from worthit.report.decide import Check, Comparison, TaskAccuracy
from worthit.report.evidence import Evidence
from worthit.report.outcomes import Finding
from worthit.report.views import View

EvidenceItem = Comparison | Check | TaskAccuracy


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

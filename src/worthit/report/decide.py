"""The decision layer: evidence about one optimisation -> one of six outcomes, per regime, in words.

Outcomes, never conflated:

- **adopt**: a benefit of at least ``min_speedup`` is demonstrated and no harm is, accuracy is
  acceptable (or cannot change: the optimisation is lossless);
- **reject**: a harm is demonstrated, the benefit is demonstrably below ``min_speedup``, or accuracy is
  unacceptable;
- **inconclusive**: the evidence cannot tell; the verdict says what would settle it (more runs, more
  accuracy items, a workload on which the drafter proposes);
- **not applicable**: a prerequisite the hardware or model lacks, known before serving;
- **failed**: it ran and broke (the root-cause line from its log);
- **not run**: nothing was measured that could be compared with the baseline.

A variant that changes nothing (the baseline's configuration measured again, on another machine or another
day) is a **control**, not an optimisation: its verdict says how far two measurements of one configuration
came apart. When a control shows they do, every comparison across those measurement conditions carries that
factor on top of its own intervals (``Comparison.spread``): a performance difference is decided only where it
exceeds what the machines alone moved.

Every judged figure is an improvement factor with a 95% interval (:func:`worthit.report.measure.ratio`),
set against the margins ``min_speedup`` and ``1 / min_speedup``: better when the whole interval lies
above the first, worse when it lies below the second, no meaningful difference when it lies between
them, undetermined otherwise. Exact counts (KV blocks) need no interval: a change below
``exact_tolerance_pct`` is no difference. Accuracy is a non-inferiority decision against
``max_accuracy_drop_pt`` (:class:`TaskAccuracy`).

Verdicts are per regime: **latency-first** (the interactive SLO on P99 TTFT and TPOT; per load level,
so a verdict may hold up to some concurrency) and **throughput-first** (the most output tok/s with P99
TPOT under the ceiling ``decide.throughput_tpot_ms``).

This module holds the rules (:func:`judge`, :func:`setting_outcome`, :func:`regime_verdict`, :func:`decide`);
the vocabulary and the verdict's types are in :mod:`worthit.report.outcomes`, the evidence and its interval
arithmetic in :mod:`worthit.report.evidence`, the words a verdict is said in in :mod:`worthit.report.wording`.
The public names of all four are importable from here, as before.
"""

from __future__ import annotations

import math
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field, replace
from typing import Any

from worthit.report.evidence import (
    Check,
    Comparison,
    Evidence,
    Setting,
    TaskAccuracy,
    Workload,
    pooled_range,
    range_groups,
)
from worthit.report.measure import SINGLE_RUN
from worthit.report.outcomes import (
    ADOPT,
    ALL_REGIMES,
    BETTER,
    CAPACITY,
    CONTROL,
    EQUIVALENT,
    FAILED,
    INCONCLUSIVE,
    INFO,
    LATENCY,
    NOT_APPLICABLE,
    NOT_MEASURED,
    NOT_NEEDED,
    NOT_REPORTED,
    NOT_RUN,
    OUTCOMES,
    REGIME_NAMES,
    REGIMES,
    REJECT,
    SUSPECT,
    THROUGHPUT,
    UNDETERMINED,
    WORDING,
    WORSE,
    Finding,
    RegimeVerdict,
    SettingOutcome,
    Verdict,
    WorkloadVerdict,
)
from worthit.report.wording import (
    comparisons_basis,
    outcome_ranges,
    regime_why,
    settle_performance,
    settle_single_run,
    verdict_basis,
    where_adopted,
)
from worthit.stats import ACC_INCONCLUSIVE, ACCEPTABLE, FAMILY_ALPHA, UNACCEPTABLE

__all__ = [
    "ACCEPTABLE",
    "ACC_INCONCLUSIVE",
    "ADOPT",
    "ALL_REGIMES",
    "BETTER",
    "CAPACITY",
    "CONTROL",
    "EQUIVALENT",
    "FAILED",
    "INCONCLUSIVE",
    "INFO",
    "LATENCY",
    "NOT_APPLICABLE",
    "NOT_MEASURED",
    "NOT_NEEDED",
    "NOT_REPORTED",
    "NOT_RUN",
    "OUTCOMES",
    "REGIMES",
    "REGIME_NAMES",
    "REJECT",
    "SUSPECT",
    "THROUGHPUT",
    "UNACCEPTABLE",
    "UNDETERMINED",
    "WORDING",
    "WORSE",
    "Check",
    "Comparison",
    "Evidence",
    "Finding",
    "RegimeVerdict",
    "Rules",
    "Setting",
    "SettingOutcome",
    "TaskAccuracy",
    "Verdict",
    "Workload",
    "WorkloadVerdict",
    "accuracy_outcome",
    "control_spread",
    "decide",
    "judge",
    "judged_on",
    "regime_verdict",
    "setting_outcome",
    "tail_harms",
    "trade_offs",
    "workloads_of",
]


@dataclass(frozen=True)
class Rules:
    """The ``decide:`` section of the study config."""

    max_accuracy_drop_pt: float = 3.0
    max_accuracy_drop_pt_by_task: Mapping[str, float] = field(default_factory=dict)
    min_speedup: float = 1.05
    require_significance: bool = True
    min_predicted_speedup: float = 1.3
    exact_tolerance_pct: float = 1.0
    throughput_tpot_ms: float | None = None
    effort: Mapping[str, str] = field(default_factory=dict)
    # A shown figure that is demonstrably worse is a harm (it rejects) only beyond both: by more than this
    # many percent and by more than this many ms; within either it is a trade-off (docs/verdicts.md, "Harms").
    max_harm_pct: float = 10.0
    max_harm_ms: float = 20.0

    @classmethod
    def from_config(cls, cfg: Mapping[str, Any]) -> Rules:
        d = dict(cfg.get("decide") or {})
        tp = d.get("throughput_tpot_ms")
        return cls(
            max_accuracy_drop_pt=float(d.get("max_accuracy_drop_pt", 3.0)),
            max_accuracy_drop_pt_by_task={
                k: float(v) for k, v in (d.get("max_accuracy_drop_pt_by_task") or {}).items()
            },
            min_speedup=float(d.get("min_speedup", 1.05)),
            require_significance=bool(d.get("require_significance", True)),
            min_predicted_speedup=float(d.get("min_predicted_speedup", 1.3)),
            exact_tolerance_pct=float(d.get("exact_tolerance_pct", 1.0)),
            throughput_tpot_ms=None if tp is None else float(tp),
            effort={k: str(v) for k, v in (d.get("effort") or {}).items()},
            max_harm_pct=float(d.get("max_harm_pct", 10.0)),
            max_harm_ms=float(d.get("max_harm_ms", 20.0)),
        )

    def max_drop(self, task: str) -> float:
        return float(self.max_accuracy_drop_pt_by_task.get(task, self.max_accuracy_drop_pt))


# --- one figure ----------------------------------------------------------------------------------
def judge(c: Comparison, rules: Rules) -> tuple[str, str]:
    """(finding, why) for one comparison."""
    imp = c.improvement
    if imp.value is None:
        return UNDETERMINED, f"{c.quantity}: no value on one side"
    f = imp.value
    if imp.is_exact:
        tol = rules.exact_tolerance_pct / 100
        if abs(f - 1) <= tol:
            return EQUIVALENT, f"{c.quantity}: within the {rules.exact_tolerance_pct:g}% tolerance of an exact count"
        return (BETTER if f > 1 else WORSE), f"{c.describe()} (exact count)"
    m = rules.min_speedup
    iv = imp.interval()
    if iv is None or not rules.require_significance:
        if iv is None and rules.require_significance:
            return UNDETERMINED, f"{c.describe()}: no interval ({imp.why_none or 'unknown'})"
        if f >= m:
            return BETTER, f"{c.describe()} (point estimate)"
        if f <= 1 / m:
            return WORSE, f"{c.describe()} (point estimate)"
        return EQUIVALENT, f"{c.describe()} (point estimate, within {m:g}x)"
    lo, hi = iv
    span = f"factor [{lo:.2f}, {hi:.2f}]"
    if imp.method:  # how an interval was made where it is not the usual (an exact small-sample test)
        span += f", {imp.method}"
    if c.spread > 1:
        span += f" with the machines' x{c.spread:.2f} ({c.spread_source})"
    if lo >= m:
        return BETTER, f"{c.describe()} ({span})"
    if hi <= 1 / m:
        return WORSE, f"{c.describe()} ({span})"
    if lo > 1 / m and hi < m:
        return EQUIVALENT, f"{c.describe()} ({span} within {1 / m:.2f}-{m:g})"
    return UNDETERMINED, f"{c.describe()} ({span} spans a {m:g}x margin)"


def _shown_worse(comparisons: Sequence[Comparison], rules: Rules) -> list[tuple[Comparison, str]]:
    out = []
    for c in comparisons:
        if c.guard and not c.judged:
            finding, why = judge(c, rules)
            if finding == WORSE:
                out.append((c, why))
    return out


def _harm_size(c: Comparison, rules: Rules) -> tuple[float, float | None] | None:
    """(change in %, in ms) of a worse figure as the rules weigh it: the least harm its interval allows (the
    point estimate where intervals are not required)."""
    if not rules.require_significance:
        pct = c.change_pct
        if pct is None:
            return None
        return (-pct if c.higher_is_better else pct), (None if c.higher_is_better else c.change_ms)
    return c.least_harm()


def is_harm(c: Comparison, rules: Rules) -> bool:
    """A worse figure counts against the optimisation only beyond both tolerances: more than
    ``max_harm_pct`` percent and (for a time) more than ``max_harm_ms`` ms."""
    size = _harm_size(c, rules)
    if size is None:
        return False
    pct, ms = size
    return pct > rules.max_harm_pct and (ms is None or ms > rules.max_harm_ms)


def _tolerance(rules: Rules) -> str:
    return f"{rules.max_harm_pct:g} % and {rules.max_harm_ms:g} ms"


def tail_harms(comparisons: Sequence[Comparison], rules: Rules) -> list[tuple[Comparison, str]]:
    """The shown figures (P99s, and the TTFT and TPOT beside a judged end-to-end time) that are demonstrably
    worse beyond both harm tolerances, with why: they count against the optimisation (docs/verdicts.md)."""
    return [
        (c, f"{why}, beyond the {_tolerance(rules)} a harm is tolerated")
        for c, why in _shown_worse(comparisons, rules)
        if is_harm(c, rules)
    ]


def trade_off_text(c: Comparison) -> str:
    """ "TTFT P50 +4.6 ms (+35%) at concurrency 1"."""
    ch, ms = c.change_pct, c.change_ms
    where = f" at {c.setting.label}" if c.setting.label else ""
    size = f"{ms:+,.1f} ms ({ch:+.0f}%)" if ms is not None and ch is not None else f"{ch:+.0f}%" if ch else "worse"
    return f"{c.quantity} {size}{where}"


def trade_offs(comparisons: Sequence[Comparison], rules: Rules) -> list[Comparison]:
    """The shown figures that are demonstrably worse but within a harm tolerance: a trade-off, said beside
    the verdict, never a rejection."""
    return [c for c, _ in _shown_worse(comparisons, rules) if not is_harm(c, rules)]


def setting_outcome(
    setting: Setting, comparisons: Sequence[Comparison], checks: Sequence[Check], rules: Rules
) -> SettingOutcome:
    """Combine the findings at one setting: a decisive check settles it; a demonstrated harm rejects; a
    demonstrated benefit adopts; benefits demonstrably below the margin reject; else inconclusive.

    Figures from a single run never settle it: their intervals hold the spread within one run, not the
    run-to-run variation, so what would adopt or reject is inconclusive, leaning that way, until independent
    runs confirm it."""
    out = _setting_outcome(setting, comparisons, checks, rules)
    if out.basis == SINGLE_RUN and out.outcome in (ADOPT, REJECT) and not any(ch.decisive for ch in checks):
        return replace(
            out,
            outcome=INCONCLUSIVE,
            reason=f"single run, leaning {out.outcome}: {out.reason}",
            settle=settle_single_run(setting),
            leaning=out.outcome,
            tradeoffs=(),
        )
    return out


def _setting_outcome(
    setting: Setting, comparisons: Sequence[Comparison], checks: Sequence[Check], rules: Rules
) -> SettingOutcome:
    judged = [(c, *judge(c, rules)) for c in comparisons if c.judged]
    basis = comparisons_basis([c for c, _, _ in judged])
    for ch in checks:
        if ch.decisive:
            out = INCONCLUSIVE if ch.finding == UNDETERMINED else (ADOPT if ch.finding == BETTER else REJECT)
            return SettingOutcome(setting, out, ch.reason, ch.settle, basis, deciding=ch.reason)
    slo_held = next((ch.reason for ch in checks if ch.finding == INFO), "")
    trades = tuple(
        trade_off_text(c) + (", within the SLO" if slo_held else f", within the {_tolerance(rules)} tolerated")
        for c in trade_offs(comparisons, rules)
    )
    better = [(c.describe(), why) for c, f, why in judged if f == BETTER] + [
        (ch.reason, ch.reason) for ch in checks if ch.finding == BETTER and not ch.prediction
    ]
    worse = (
        [(c.describe(), why) for c, f, why in judged if f == WORSE]
        + [(c.describe(), why) for c, why in tail_harms(comparisons, rules)]
        + [(ch.reason, ch.reason) for ch in checks if ch.finding == WORSE and not ch.prediction]
    )
    if not better:  # a model's warning stands only where no measurement shows a benefit
        worse += [(ch.reason, ch.reason) for ch in checks if ch.finding == WORSE and ch.prediction]
    undetermined = [(c, why) for c, f, why in judged if f == UNDETERMINED]
    undetermined_checks = [ch for ch in checks if ch.finding == UNDETERMINED]
    blocking = [ch for ch in undetermined_checks if ch.blocks_adoption]
    if worse:
        why = "worse: " + "; ".join(w for _, w in worse)
        why += " (although better: " + "; ".join(w for _, w in better) + ")" if better else ""
        return SettingOutcome(setting, REJECT, why, "", basis, deciding=worse[0][0], tradeoffs=trades)
    if better and blocking:
        why = "better: " + "; ".join(w for _, w in better) + "; but " + "; ".join(ch.reason for ch in blocking)
        settle = "; ".join(ch.settle for ch in blocking if ch.settle)
        return SettingOutcome(setting, INCONCLUSIVE, why, settle, basis, deciding=blocking[0].reason)
    if better:
        why = "better: " + "; ".join(w for _, w in better)
        return SettingOutcome(setting, ADOPT, why, "", basis, deciding=better[0][0], tradeoffs=trades)
    if judged and all(f == EQUIVALENT for _, f, _ in judged) and not undetermined_checks:
        return SettingOutcome(
            setting,
            REJECT,
            f"no benefit of at least {rules.min_speedup:g}x: " + "; ".join(w for _, _, w in judged),
            "",
            basis,
            deciding=f"no benefit of at least {rules.min_speedup:g}x",
        )
    if not judged and not [ch for ch in checks if ch.finding != INFO]:
        return SettingOutcome(setting, NOT_RUN, "nothing measured here", "", basis)
    why = "; ".join([w for _, w in undetermined] + [ch.reason for ch in undetermined_checks]) or "no judged figure"
    settle = "; ".join(
        filter(
            None,
            [settle_performance([c for c, _ in undetermined]) if undetermined else ""]
            + [ch.settle for ch in undetermined_checks],
        )
    )
    return SettingOutcome(setting, INCONCLUSIVE, "undetermined: " + why, settle, basis)


def _range_outcomes(
    regime: str, comparisons: Sequence[Comparison], by_dim: Mapping[str, Sequence[SettingOutcome]], rules: Rules
) -> list[SettingOutcome]:
    """A range decided as a whole where its levels alone could not: a dimension none of whose settings is
    rejected or waits on a check, whose judged figure, pooled over the levels (the geometric mean of the
    factors, :func:`worthit.report.evidence.pooled_range`), clears the margin. Half of the verdict's 5 % goes
    to these tests, shared among them (docs/statistics.md, "Error rates per verdict")."""
    groups = range_groups(comparisons)
    if not groups:
        return []
    coverage = 1 - FAMILY_ALPHA / (2 * len(groups))
    out = []
    for (reg, dim, quantity), cs in groups.items():
        outs = by_dim.get(dim, ())
        if reg != regime or not outs or all(o.outcome == ADOPT for o in outs):
            continue
        if any(o.outcome not in (ADOPT, INCONCLUSIVE) or o.leaning or o.deciding for o in outs if o.outcome != ADOPT):
            continue  # a rejected level, one a single run leans on, or one that waits on a check
        m = pooled_range(cs, coverage)
        iv = m.interval()
        if m.value is None or iv is None or not (iv[0] >= rules.min_speedup or iv[1] <= 1 / rules.min_speedup):
            continue
        first, last = cs[0].setting, cs[-1].setting
        where = f"{dim} {first.value:,g} to {last.value:,g}"
        ch = (m.value - 1) * 100 if cs[0].higher_is_better else (1 / m.value - 1) * 100
        text = (
            f"{quantity} {ch:+.0f}% over {where}, pooled over the {len(cs)} levels "
            f"(factor [{iv[0]:.2f}, {iv[1]:.2f}], {m.method})"
        )
        good = iv[0] >= rules.min_speedup
        out.append(
            SettingOutcome(
                Setting(f"{where} (pooled over the levels)", f"{dim} range"),
                ADOPT if good else REJECT,
                ("better: " if good else "worse: ") + text,
                "",
                comparisons_basis(cs),
                deciding=text,
            )
        )
    return out


def regime_verdict(
    regime: str, comparisons: Sequence[Comparison], checks: Sequence[Check], rules: Rules
) -> RegimeVerdict:
    cs = [c for c in comparisons if c.regime == regime]
    ks = [k for k in checks if k.regime == regime]
    overall = next((k for k in checks if k.regime == ALL_REGIMES and k.decisive), None)
    if overall is not None and (cs or ks):
        out = INCONCLUSIVE if overall.finding == UNDETERMINED else (ADOPT if overall.finding == BETTER else REJECT)
        return RegimeVerdict(
            regime,
            out,
            detail=f"{out}: {overall.reason}",
            settle=overall.settle,
            basis=comparisons_basis([c for c in cs if c.judged]),
        )
    settings = list(dict.fromkeys([c.setting for c in cs if c.judged] + [k.setting for k in ks]))
    if not settings:
        return RegimeVerdict(regime, NOT_RUN, detail="not measured")
    settings.sort(key=lambda s: (s.dimension, s.value if s.value is not None else math.inf, s.label))
    outs = [
        setting_outcome(s, [c for c in cs if c.setting == s], [k for k in ks if k.setting == s], rules)
        for s in settings
    ]
    outs = [o for o in outs if o.outcome != NOT_RUN] or outs
    by_dim: dict[str, list[SettingOutcome]] = {}
    for o in outs:
        by_dim.setdefault(o.setting.dimension, []).append(o)
    ranged = _range_outcomes(regime, comparisons, by_dim, rules)
    for o in ranged:
        by_dim[o.setting.dimension] = [o]
    outs += ranged
    covered = {o.setting.dimension.removesuffix(" range") for o in ranged}
    detail = "; ".join(outcome_ranges(v) for v in by_dim.values())
    kinds = {o.outcome for o in outs}
    if ADOPT in kinds:
        outcome = ADOPT
        condition = (
            ""
            if kinds == {ADOPT}
            else "; ".join(
                where_adopted(v) for d, v in by_dim.items() if any(o.outcome == ADOPT for o in v) and d not in covered
            )
        )
    elif REJECT in kinds:
        outcome, condition = REJECT, ""
    elif kinds == {NOT_RUN}:
        outcome, condition = NOT_RUN, ""
    else:
        outcome, condition = INCONCLUSIVE, ""  # where a single run leans: said, never settled
        if any(o.leaning == ADOPT for o in outs):
            where = "; ".join(
                where_adopted(v, leaning=True) for v in by_dim.values() if any(o.leaning == ADOPT for o in v)
            )
            condition = f"leaning {ADOPT} (single run) {where}"
        elif any(o.leaning == REJECT for o in outs):
            condition = f"leaning {REJECT} (single run)"
    basis = comparisons_basis([c for c in cs if c.judged])
    settle = "; ".join(dict.fromkeys(o.settle for o in outs if o.settle and o.outcome == INCONCLUSIVE))
    benefits = [  # a single run's benefit says so: it is not a settled one
        c.describe() + (" (single run)" if c.improvement.single_run else "")
        for c in cs
        if c.judged and judge(c, rules)[0] == BETTER
    ]
    return RegimeVerdict(
        regime,
        outcome,
        condition=condition,
        detail=detail,
        settings=outs,
        settle=settle,
        basis=basis,
        benefits=benefits,
        tradeoffs=tuple(dict.fromkeys(t for o in outs if o.outcome == ADOPT for t in o.tradeoffs)),
    )


# --- accuracy ------------------------------------------------------------------------------------
def accuracy_outcome(e: Evidence) -> tuple[str, str, str]:
    """(decision, detail, settle) over the tasks: unacceptable if any task is, acceptable if all are."""
    if e.random_weights:
        return NOT_REPORTED, "a side serves random weights: its accuracy means nothing", ""
    if not e.accuracy:
        if e.lossless:
            # a check the config asks for that has not run (or broke) is said, not waited for
            asked = f" (the accuracy check its config asks for: {e.accuracy_failure})" if e.accuracy_asked else ""
            return NOT_NEEDED, f"lossless by construction: the served outputs do not change{asked}", ""
        why = e.accuracy_failure or "no accuracy experiment on both sides"
        return NOT_MEASURED, why, e.accuracy_settle or "accuracy on both variants (experiments: [accuracy])"
    bad = [t for t in e.accuracy if t.decision == UNACCEPTABLE]
    unsure = [t for t in e.accuracy if t.decision == ACC_INCONCLUSIVE]
    if bad:
        worst = min(bad, key=lambda t: t.delta_pt)
        return UNACCEPTABLE, f"{worst.describe()}: entirely below -{worst.bound_pt:g} pt", ""
    if unsure:
        worst = min(unsure, key=lambda t: t.delta_pt)
        return (
            ACC_INCONCLUSIVE,
            f"{worst.describe()}: the interval spans -{worst.bound_pt:g} pt",
            "; ".join(t.settle() for t in unsure),
        )
    worst = min(e.accuracy, key=lambda t: t.delta_pt)
    return ACCEPTABLE, f"worst {worst.describe()}: above -{worst.bound_pt:g} pt", ""


def _accuracy_cost(e: Evidence) -> tuple[str, float | None]:
    if e.random_weights or not e.accuracy:
        return ("not needed" if e.lossless and not e.random_weights else "not measured"), None
    lo = min(t.delta_pt for t in e.accuracy)
    hi = max(t.delta_pt for t in e.accuracy)
    return (f"{lo:+.1f} pt" if abs(hi - lo) < 0.05 else f"{lo:+.1f} to {hi:+.1f} pt"), lo


def _finals(regimes: Mapping[str, RegimeVerdict], acc: str) -> dict[str, str]:
    """Each measured regime's outcome with accuracy taken into account: an unacceptable drop rejects, and a
    performance adoption waits for accuracy that is inconclusive or not measured."""
    finals: dict[str, str] = {}
    for r, rv in regimes.items():
        if rv.outcome == NOT_RUN:
            continue
        if acc == UNACCEPTABLE:
            finals[r] = REJECT
        elif rv.outcome == ADOPT and acc in (ACC_INCONCLUSIVE, NOT_MEASURED):
            finals[r] = INCONCLUSIVE
        else:
            finals[r] = rv.outcome
    return finals


def _overall(finals: Mapping[str, str], regimes: Mapping[str, RegimeVerdict]) -> tuple[str, str]:
    """(outcome, condition): adopted where any regime adopts, saying where; else reject; else inconclusive."""
    kinds = set(finals.values())
    adopted = [r for r, o in finals.items() if o == ADOPT]
    conds = [REGIME_NAMES[r] + (f", {regimes[r].condition}" if regimes[r].condition else "") for r in adopted]
    if kinds == {ADOPT}:
        partial = len(finals) < len(REGIMES) or any(regimes[r].condition for r in adopted)
        return ADOPT, "; ".join(conds) if partial else ""
    if ADOPT in kinds:
        return ADOPT, "; ".join(conds) + " only"
    if REJECT in kinds:
        return REJECT, ""
    leans = [  # where single runs lean: said, never decided
        f"{REGIME_NAMES[r]} {regimes[r].condition}"
        for r, o in finals.items()
        if o == INCONCLUSIVE and regimes[r].condition.startswith("leaning")
    ]
    return INCONCLUSIVE, "; ".join(leans)


# --- which workload a verdict rests on -------------------------------------------------------------
def _tagger(e: Evidence) -> Callable[[Setting], Workload | None]:
    """The workload of a setting: its own tag, else that of the load test's figures at the same setting (an
    experiment's check at a level does not know what the level sent)."""
    tags = {c.setting: c.setting.workload for c in e.comparisons if c.setting.workload is not None}
    return lambda s: s.workload if s.workload is not None else tags.get(s)


def workloads_of(e: Evidence) -> list[Workload]:
    """The workloads the judged figures were measured on, in order, each once (loops: on any of its levels)."""
    found: dict[str, Workload] = {}
    for c in e.comparisons:
        w = c.setting.workload
        if not c.judged or w is None:
            continue
        old = found.get(w.name)
        loops = w.loops if old is None or old.loops is None else (old.loops or bool(w.loops))
        found[w.name] = replace(w, loops=loops)
    return list(found.values())


def _only(e: Evidence, keep: Callable[[Workload | None], bool]) -> Evidence:
    tag = _tagger(e)
    return replace(
        e,
        comparisons=[c for c in e.comparisons if keep(tag(c.setting))],
        checks=[k for k in e.checks if keep(tag(k.setting))],
    )


def _named(name: str) -> Callable[[Workload | None], bool]:
    return lambda w: w is not None and w.name == name


def judged_on(e: Evidence) -> Evidence:
    """The evidence a verdict rests on: for an optimisation whose effect depends on what is generated
    (speculative decoding), measured on real text and on random tokens, the real-text levels (and what is
    not a load level); else all of it."""
    ws = workloads_of(e)
    if e.content_dependent and any(w.real_text for w in ws) and not all(w.real_text for w in ws):
        return _only(e, lambda w: w is None or w.real_text)
    return e


def _workload_note(e: Evidence, ws: Sequence[Workload]) -> str:
    real = [w.name for w in ws if w.real_text]
    synthetic = [w for w in ws if not w.real_text]
    loops = [w.name for w in synthetic if w.loops]
    looping = f" ({', '.join(loops)}: the responses are mostly loops)" if loops else ""
    if real and synthetic and e.content_dependent:
        return (
            f"judged on real text ({', '.join(real)}); {', '.join(w.name for w in synthetic)} shown beside it, not "
            f"judged: its effect depends on what is generated{looping}"
        )
    if synthetic and not real and e.content_dependent:
        return (
            f"measured on {', '.join(w.name for w in synthetic)} only, and its effect depends on what is "
            f"generated{looping}: measure it on real text (a sharegpt or jsonl workload in loadtest.workload_levels)"
        )
    return f"measured on {len(ws)} workloads ({', '.join(w.label for w in ws)}), judged on all of them"


def decide(e: Evidence, rules: Rules) -> Verdict:
    """The verdict on one optimisation (:func:`decide_figures`), unless a plausibility check tripped
    (``e.findings``, :mod:`worthit.report.plausibility`): then it is **suspect**, never adopt or reject, says
    what to check, and keeps what the figures alone would have decided (``would_be``)."""
    v = decide_figures(e, rules)
    if not e.findings or v.outcome in (FAILED, NOT_APPLICABLE, NOT_RUN, CONTROL):
        return v
    checks = "; ".join(dict.fromkeys(f.what_to_check for f in e.findings))
    tripped = "; ".join(f"{f.check}: {f.reason}" for f in e.findings)
    return replace(
        v,
        outcome=SUSPECT,
        condition=checks,
        finals={r: SUSPECT for r in v.finals},
        would_be=v.outcome,
        findings=tuple(e.findings),
        reason=f"suspect, before it is published (the figures alone: {v.outcome}): {tripped}; {v.reason}",
        settle="; ".join(filter(None, [checks, v.settle])),
        tradeoffs=(),
    )


def decide_figures(e: Evidence, rules: Rules) -> Verdict:
    """The verdict on one optimisation's figures; measured on several workloads (or a content-dependent one on random
    tokens only), it says the verdict on each alone, and a content-dependent optimisation is judged on its
    real-text levels where it has any (docs/verdicts.md, "Which workload")."""
    ws = workloads_of(e) if e.status == "ok" and not e.control else []
    synthetic_only = e.content_dependent and bool(ws) and not any(w.real_text for w in ws)
    if len(ws) < 2 and not synthetic_only:
        return _decide(e, rules)
    on = judged_on(e)
    v = _decide(on, rules)
    judged = {w.name for w in workloads_of(on)}
    parts = []
    for w in ws:
        sub = _only(e, _named(w.name))
        parts.append(WorkloadVerdict(w, _decide(sub, rules), sub, w.name in judged))
    parts.sort(key=lambda p: (not p.judged, not p.workload.real_text))
    return replace(v, by_workload=tuple(parts), reason="; ".join(filter(None, [v.reason, _workload_note(e, ws)])))


def _decide(e: Evidence, rules: Rules) -> Verdict:
    effort = rules.effort.get(e.variant, "not stated")
    base: dict[str, Any] = {
        "variant": e.variant,
        "optimisation": e.optimisation or e.variant,
        "effort": effort,
        "status": e.status,
    }
    if e.status in ("failed", FAILED):
        return Verdict(**base, outcome=FAILED, reason=e.reason or "failed")
    if e.status in ("not_applicable", NOT_APPLICABLE):
        return Verdict(**base, outcome=NOT_APPLICABLE, reason=e.reason or "not applicable")
    if e.status == NOT_RUN:
        return Verdict(**base, outcome=NOT_RUN, reason=e.reason or "not run", settle="run the workflow on it")
    if e.control:
        return _control_verdict(e, rules, base)
    acc, acc_detail, acc_settle = accuracy_outcome(e)
    cost, worst = _accuracy_cost(e)
    regimes = {r: regime_verdict(r, e.comparisons, e.checks, rules) for r in REGIMES}
    finals = _finals(regimes, acc)
    benefits = [b for rv in regimes.values() for b in rv.benefits]
    basis = verdict_basis([c for c in e.comparisons if c.judged])
    common: dict[str, Any] = {
        **base,
        "regimes": regimes,
        "finals": finals,
        "accuracy_outcome": acc,
        "accuracy_detail": acc_detail,
        "accuracy_cost": cost,
        "worst_accuracy_delta_pt": worst,
        "benefit": "; ".join(dict.fromkeys(benefits)) or "none demonstrated",
        "basis": f"{basis}; {e.machines}" if basis and e.machines else basis,
    }
    if not finals:
        if acc == UNACCEPTABLE:
            return Verdict(**common, outcome=REJECT, reason=f"accuracy {acc}: {acc_detail}")
        why = e.reason or "no performance figure in common with the baseline"
        return Verdict(**common, outcome=NOT_RUN, reason=why, settle="measure it on the experiments the baseline runs")
    outcome, condition = _overall(finals, regimes)
    costs = list(dict.fromkeys(t for r, o in finals.items() if o == ADOPT for t in regimes[r].tradeoffs))
    if outcome == ADOPT and costs:  # what it costs where it is adopted, beside the verdict
        shown = "; ".join(costs[:2]) + (f"; and {len(costs) - 2} more" if len(costs) > 2 else "")
        condition = "; ".join(filter(None, [condition, f"trade-off: {shown}"]))
    reasons = []
    if basis == SINGLE_RUN:
        reasons.append("single run: the intervals are within one run; run-to-run variation is not in them")
    whys: dict[str, list[str]] = {}
    for r, o in finals.items():
        rv = regimes[r]
        head = REGIME_NAMES[r] + (f" {o} (performance {rv.outcome}, accuracy {acc})" if o != rv.outcome else "")
        whys.setdefault(regime_why(rv), []).append(head)
    for why, heads in whys.items():  # a reason both regimes share is said once
        reasons.append(" and ".join(heads) + (f": {why}" if why else ""))
    reasons.append(f"accuracy {acc}: {acc_detail}")
    reasons += list(e.notes)
    settle = [regimes[r].settle for r, o in finals.items() if o == INCONCLUSIVE and regimes[r].settle]
    if e.perf_settle and any(o == INCONCLUSIVE and regimes[r].outcome == INCONCLUSIVE for r, o in finals.items()):
        settle.insert(0, e.perf_settle)
    if INCONCLUSIVE in finals.values() and acc in (ACC_INCONCLUSIVE, NOT_MEASURED):
        settle.append(acc_settle)
    return Verdict(
        **common,
        outcome=outcome,
        condition=condition,
        reason="; ".join(reasons),
        settle="; ".join(dict.fromkeys(p for p in settle if p)),
        tradeoffs=tuple(costs) if outcome == ADOPT else (),
    )


def control_spread(e: Evidence) -> tuple[float, str]:
    """(factor, what it rests on): how far a control's two measurements of one configuration came apart,
    the largest of its judged timing and throughput figures (point estimates, either direction; 1.0 when
    it measured nothing comparable). Exact counts are left out: they do not move between machines."""
    worst, what = 1.0, ""
    for c in e.comparisons:
        f = c.improvement.value if c.judged and not c.improvement.is_exact else None
        if f is None or not f > 0 or math.isnan(f):
            continue
        g = max(f, 1 / f)
        if g > worst:
            worst, what = g, c.describe()
    return worst, what


def _control_verdict(e: Evidence, rules: Rules, base: Mapping[str, Any]) -> Verdict:
    """A control is not adopted or rejected: it says which figures two measurements of one configuration
    demonstrably differ on, and by how much at most."""
    judged = [c for c in e.comparisons if c.judged]
    found = [(c, *judge(c, rules)) for c in judged]
    apart = [why for _, f, why in found if f in (BETTER, WORSE)]
    g, what = control_spread(e)
    basis = verdict_basis(judged)
    if not judged:
        reason = e.reason or "nothing measured that compares with its baseline"
        return Verdict(**base, outcome=CONTROL, reason=reason, settle="measure it on the experiments the baseline runs")
    if apart:
        head = (
            f"two measurements of one configuration differ on {len(apart)} of {len(judged)} judged figures: "
            + "; ".join(apart[:3])
            + (f"; and {len(apart) - 3} more" if len(apart) > 3 else "")
        )
    else:
        head = f"no difference demonstrated on {len(judged)} judged figures"
    reason = f"{head}; at most x{g:.2f} apart ({what})" if what else head
    return Verdict(
        **base,
        outcome=CONTROL,
        reason="; ".join([reason, *e.notes]),
        benefit="not an optimisation",
        basis=basis,
        accuracy_outcome=NOT_NEEDED,
    )

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

This module holds the verdict (:func:`decide`: the regimes, accuracy and the workloads together, and a
control's); the rules per figure, setting and regime (:func:`~worthit.report.regimes.judge`,
:func:`~worthit.report.regimes.setting_outcome`, :func:`~worthit.report.regimes.regime_verdict`) are in
:mod:`worthit.report.regimes`, their thresholds (the ``decide:`` section) in :mod:`worthit.report.rules`; the
vocabulary and the verdict's types are in :mod:`worthit.report.outcomes`, the evidence and its interval
arithmetic in :mod:`worthit.report.evidence`, the words a verdict is said in in :mod:`worthit.report.wording`.
The vocabulary's, the evidence's and the wording's public names are importable from here too.
"""

from __future__ import annotations

import math
from collections.abc import Callable, Mapping, Sequence
from dataclasses import replace
from typing import Any

from worthit.report.evidence import (
    Check,
    Comparison,
    Evidence,
    Setting,
    TaskAccuracy,
    Workload,
)
from worthit.report.measure import SINGLE_RUN
from worthit.report.outcomes import (
    ADOPT,
    ALL_REGIMES,
    BETTER,
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
from worthit.report.regimes import judge, regime_verdict
from worthit.report.rules import Rules
from worthit.report.wording import (
    regime_why,
    verdict_basis,
)
from worthit.stats import ACC_INCONCLUSIVE, ACCEPTABLE, UNACCEPTABLE

__all__ = [
    "ACCEPTABLE",
    "ACC_INCONCLUSIVE",
    "ADOPT",
    "ALL_REGIMES",
    "BETTER",
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
    "Setting",
    "SettingOutcome",
    "TaskAccuracy",
    "Verdict",
    "Workload",
    "WorkloadVerdict",
    "accuracy_outcome",
    "control_spread",
    "decide",
    "judged_on",
    "workloads_of",
]


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

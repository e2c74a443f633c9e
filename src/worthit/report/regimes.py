"""The decision rules for performance: one figure against the margins (:func:`judge`), the figures of one
setting (a load level, a context length: :func:`setting_outcome`) and a regime's verdict over its settings
(:func:`regime_verdict`), with the harms and trade-offs among the figures shown (docs/verdicts.md, "Harms").
The verdict over regimes and accuracy is :mod:`worthit.report.decide`'s; the thresholds are :class:`Rules`.
"""

from __future__ import annotations

import math
from collections.abc import Mapping, Sequence
from dataclasses import replace

from worthit.report.evidence import (
    Check,
    Comparison,
    Setting,
    pooled_range,
    range_groups,
)
from worthit.report.measure import SINGLE_RUN
from worthit.report.outcomes import (
    ADOPT,
    ALL_REGIMES,
    BETTER,
    EQUIVALENT,
    INCONCLUSIVE,
    INFO,
    NOT_RUN,
    REJECT,
    UNDETERMINED,
    WORSE,
    RegimeVerdict,
    SettingOutcome,
)
from worthit.report.rules import Rules
from worthit.report.wording import (
    comparisons_basis,
    outcome_ranges,
    settle_performance,
    settle_single_run,
    where_adopted,
)
from worthit.stats import FAMILY_ALPHA


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

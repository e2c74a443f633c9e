"""The decision in a few words per optimisation: what each one's verdict rests on, read off its evidence.

The report opens with one row per optimisation the user can turn on (docs/reading-a-verdict.md): its verdict,
the **headline effect** (the figure that decided it, as measured, with its interval: "TPOT P50 −52 % at
concurrency 1 [−63, −41 %]"), the accuracy cost (the worst task's change with its interval and the decision),
the effort and one line of why. Nothing here decides: the verdict is :func:`worthit.report.decide.decide`'s;
this module only chooses which of its figures to show first and says it short.

Variants that are not optimisations get a **role** instead of a row: a *control* (the baseline's configuration
measured again: how far two measurements of one configuration came apart) and a *helper* (a draft model
served alone so that γ can be measured). They appear under the table, in "how the evidence was checked".
"""

from __future__ import annotations

import math
import re
from collections.abc import Mapping
from dataclasses import dataclass

from matplotlib.figure import Figure

from worthit.report import plots
from worthit.report.context import Context, Pair
from worthit.report.decide import (
    ADOPT,
    BETTER,
    EQUIVALENT,
    FAILED,
    INCONCLUSIVE,
    NOT_APPLICABLE,
    NOT_RUN,
    REGIME_NAMES,
    REJECT,
    SUSPECT,
    UNDETERMINED,
    WORSE,
    Comparison,
    Evidence,
    TaskAccuracy,
    Verdict,
    Workload,
    WorkloadVerdict,
    control_spread,
    judged_on,
)
from worthit.report.experiments import helper_of
from worthit.report.measure import SINGLE_RUN
from worthit.report.regimes import judge, tail_harms
from worthit.report.rules import Rules
from worthit.stats import UNACCEPTABLE

OPTIMISATION, ROLE_CONTROL, HELPER = "optimisation", "control", "helper"
ROLES = (OPTIMISATION, ROLE_CONTROL, HELPER)
WHY_MAX = 200  # characters of the one line of why (the full reason is one click away)
MINUS = "\u2212"


def role(ctx: Context, pair: Pair) -> str:
    """What a variant is to the study: an optimisation to turn on, a control, or a helper of an experiment
    (:func:`worthit.report.experiments.helper_of`: a draft model served alone, say)."""
    if pair.control:
        return ROLE_CONTROL
    if helper_of(ctx, pair.variant) is not None:
        return HELPER
    return OPTIMISATION


def signed(x: float, digits: int = 0) -> str:
    """``+16``, ``−52`` (a true minus sign), ``0``."""
    s = f"{x:+,.{digits}f}"
    if s.lstrip("+-").strip("0.") == "":
        return s.lstrip("+-")
    return s.replace("-", MINUS)


def change_interval_pct(c: Comparison) -> tuple[float, float] | None:
    """The 95% interval of the change (with - without) / without in %, from the improvement factor's."""
    iv = c.improvement.interval()
    if iv is None or c.improvement.is_exact:
        return None
    lo, hi = iv
    if c.higher_is_better:
        return (lo - 1) * 100, (hi - 1) * 100
    if lo <= 0:
        return None
    return (1 / hi - 1) * 100, (1 / lo - 1) * 100


def _finding_note(c: Comparison, finding: str) -> str:
    """Why a figure decided nothing, in a few words."""
    imp = c.improvement
    if finding == EQUIVALENT:
        return "no meaningful difference"
    if finding not in (UNDETERMINED,):
        return SINGLE_RUN if imp.single_run else ""
    why = []
    if c.spread > 1:
        why.append(f"machines differ up to \u00d7{c.spread:.2f}")
    if imp.single_run:
        why.append(SINGLE_RUN)
    if imp.interval() is None and not imp.is_exact:
        why.append("no interval")
    return UNDETERMINED + (f" ({', '.join(why)})" if why else "")


# Beyond this the width of an interval says "far too few runs", not a size: a 2-run level's simultaneous interval
# can reach millions of percent (a t quantile of 1 degree of freedom), which reads as a measurement.
MAX_SHOWN_PCT = 10_000.0


def _bound(x: float) -> str:
    """An interval bound in %, ``>+10,000`` (a factor over 100) past what a bound can usefully say."""
    return f">{signed(MAX_SHOWN_PCT)}" if x > MAX_SHOWN_PCT else signed(x)


def effect_text(c: Comparison, finding: str = "") -> str:
    """ "TPOT P50 −52 % at concurrency 1 [−63, −41 %]"; an undetermined figure says so and why."""
    ch = c.change_pct
    where = f" at {c.setting.label}" if c.setting.label else ""
    if ch is None:
        return f"{c.quantity}{where}: not measured on one side"
    iv = change_interval_pct(c)
    text = f"{c.quantity} {signed(ch)} %{where}"
    if c.improvement.is_exact:
        text += " (exact count)"
    elif iv is not None:
        text += f" [{_bound(iv[0])}, {_bound(iv[1])} %]"
    note = _finding_note(c, finding)
    return f"{text}, {note}" if note else text


def _log_size(c: Comparison) -> float:
    f = c.improvement.value
    return abs(math.log(f)) if f and f > 0 else 0.0


def deciding(v: Verdict, e: Evidence, rules: Rules) -> tuple[Comparison, str] | None:
    """The figure that carries the verdict, with its finding: for an adoption the largest benefit where it is
    adopted, for a rejection the largest harm (else the benefit shown to be below the margin), for an open
    verdict the way a single run leans, else the largest effect that could not be decided. Only figures the
    verdict rests on (:func:`worthit.report.decide.judged_on`: a content-dependent optimisation's real-text
    levels), and among equal findings a real-text level's first: the headline never comes from random
    tokens where real text tells the same."""
    e = judged_on(e)
    judged = [(c, judge(c, rules)[0]) for c in e.comparisons if c.judged and c.improvement.value is not None]
    judged += [(c, WORSE) for c, _ in tail_harms(e.comparisons, rules)]
    if not judged:
        return None
    outcome = v.would_be if v.outcome == SUSPECT else v.outcome  # a suspect verdict's figures as they fell
    adopted = {r for r, o in v.finals.items() if o in (ADOPT, SUSPECT)}
    if outcome == ADOPT:
        order = [BETTER]
        judged = [(c, f) for c, f in judged if c.regime in adopted] or judged
    elif outcome == REJECT or f"leaning {REJECT}" in (v.condition or ""):
        order = [WORSE, EQUIVALENT, UNDETERMINED, BETTER]
    else:
        order = [BETTER, UNDETERMINED, WORSE, EQUIVALENT]
    for want in order:
        found = [(c, f) for c, f in judged if f == want]
        if found:
            # the latency-first regime first (the interactive SLO), real text before random tokens, a judged
            # figure before a tail, then the largest effect
            return max(found, key=lambda cf: (cf[0].regime == "latency", _real(cf[0]), cf[0].judged, _log_size(cf[0])))
    return max(judged, key=lambda cf: _log_size(cf[0]))


def _real(c: Comparison) -> bool:
    return c.setting.workload is not None and c.setting.workload.real_text


LOOPS = "the drafter predicts the model's loops, not your traffic"


def _at_level(text: str) -> str:
    """A workload level's figure at its concurrency, the workload being named before it."""
    return re.sub(r"workload level [^ ]+/conc~(\d+)", r"concurrency \1", text)


def _workload_word(wv: WorkloadVerdict, d: tuple[Comparison, str] | None) -> str:
    """How one workload came out, in a word or two: "no gain" where the benefit is shown to be below the
    margin, else the outcome."""
    v = wv.verdict
    if v.outcome == REJECT and d is not None and d[1] == EQUIVALENT:
        return "no gain"
    if v.outcome == INCONCLUSIVE and (v.condition or "").startswith("leaning"):
        return v.condition.split(" (single run)")[0] + " (single run)"
    return v.outcome


def workload_part(wv: WorkloadVerdict, rules: Rules, content_dependent: bool) -> str:
    """ "sharegpt (real text): no gain, E2E P50 −1 % at concurrency 4 [−9, +8 %]" ; random tokens shown
    beside a real-text verdict say so, and where the responses are mostly loops."""
    w: Workload = wv.workload
    d = deciding(wv.verdict, wv.evidence, rules)
    effect = _at_level(effect_text(*d)) if d else "nothing compares"
    text = f"{w.label}: {_workload_word(wv, d)}, {effect}"
    if w.loops and not w.real_text:
        text += ", where the model loops" + (f" ({LOOPS})" if content_dependent else "")
    if not wv.judged:
        text += " (shown, not judged)"
    return text


def workload_line(v: Verdict, e: Evidence, rules: Rules) -> str:
    """The verdict per workload in one line (empty where it was measured on one): the workloads it rests on
    first."""
    line = "; ".join(workload_part(wv, rules, e.content_dependent) for wv in v.by_workload)
    if line and e.content_dependent and not any(wv.workload.real_text for wv in v.by_workload):
        line += "; no real-text level measured, and its effect depends on what is generated"
    return line


def worst_task(e: Evidence) -> TaskAccuracy | None:
    return min(e.accuracy, key=lambda t: t.delta_pt) if e.accuracy else None


def accuracy_text(v: Verdict, e: Evidence) -> str:
    """The worst task's change with its interval, and the accuracy decision: "worthit_gsm −0.2 pt [−0.6,
    +0.2]: acceptable"; a variant without a measurement says why ("not needed (lossless)")."""
    if v.outcome in (FAILED, NOT_APPLICABLE) or v.outcome == NOT_RUN and not e.accuracy:
        return "\u2014"
    t = worst_task(e)
    if t is None or e.random_weights:
        return v.accuracy_outcome
    iv = t.interval
    ci = f" [{signed(iv[0], 1)}, {signed(iv[1], 1)}]" if iv else " [no interval]"
    return f"{t.task} {signed(t.delta_pt, 1)} pt{ci}: {v.accuracy_outcome}"


def _short(text: str, limit: int = WHY_MAX) -> str:
    text = " ".join(text.split())
    if len(text) <= limit:
        return text
    cut = text[: limit - 1].rsplit(" ", 1)[0].rstrip(";,:")
    return cut + "\u2026"


def _regime_phrase(v: Verdict, r: str, with_final: bool = True) -> str:
    """How one regime came out, short: its ranges where its settings have an order ("adopt up to concurrency 1,
    reject from 16"), the reason of a check that settled every setting at once, else the outcome alone."""
    rv = v.regimes[r]
    final = v.finals.get(r, rv.outcome)
    ranged = bool(rv.settings) and all(o.setting.dimension for o in rv.settings) and bool(rv.detail)
    settled = not rv.settings and ": " in rv.detail  # one check settled the regime (a drafter that never proposed)
    word = rv.outcome if rv.outcome != INCONCLUSIVE else UNDETERMINED
    what = rv.detail if ranged or settled else word
    if with_final and final != rv.outcome:
        what = f"{final} ({what} on speed; accuracy {v.accuracy_outcome})"
    return what


def _regimes(v: Verdict, with_final: bool = True) -> list[str]:
    """Each measured regime's phrase, regimes that read the same said once ("latency-first and
    throughput-first inconclusive: ...")."""
    by: dict[str, list[str]] = {}
    for r in v.finals:
        by.setdefault(_regime_phrase(v, r, with_final), []).append(REGIME_NAMES[r])
    return [f"{' and '.join(names)} {what}" for what, names in by.items()]


def why_line(v: Verdict, e: Evidence) -> str:
    """One line (at most :data:`WHY_MAX` characters) of why: each regime's outcome where it holds, the accuracy
    decision, and what kept a figure open (the machines' spread, a single run)."""
    if v.outcome in (FAILED, NOT_APPLICABLE, NOT_RUN) and not v.finals:
        return _short(v.reason)
    if v.outcome == SUSPECT:  # what tripped first: the figures' own verdict is one click away
        return _short(f"suspect ({v.would_be} on its figures alone): " + "; ".join(f.reason for f in v.findings))
    if v.accuracy_outcome == UNACCEPTABLE:
        perf = ", ".join(_regimes(v, with_final=False))
        parts = [f"accuracy unacceptable ({accuracy_text(v, e).split(':')[0]})", f"on speed: {perf}"]
    else:
        parts = [*_regimes(v), f"accuracy {v.accuracy_outcome}"]
    spread = max((c.spread for c in e.comparisons if c.judged), default=1.0)
    if spread > 1 and INCONCLUSIVE in v.finals.values():
        parts.append(f"the sides were measured on different machines (\u00d7{spread:.2f} apart)")
    if v.basis == SINGLE_RUN and INCONCLUSIVE in v.finals.values():
        parts.append(SINGLE_RUN)
    return _short("; ".join(parts))


@dataclass(frozen=True)
class Headline:
    """One optimisation's row of the decision table (and, for a control or helper, its line under it)."""

    variant: str
    role: str
    effect: str  # the deciding figure in words, with its interval ("" when nothing compares)
    accuracy: str
    why: str
    comparison: Comparison | None = None  # the deciding figure, for the figure beside the table
    finding: str = ""
    by_workload: str = ""  # the verdict per workload in one line, where it was measured on several


def headline(ctx: Context, pair: Pair, v: Verdict, e: Evidence) -> Headline:
    r = role(ctx, pair)
    d = deciding(v, e, ctx.rules)
    if v.outcome in (FAILED, NOT_APPLICABLE) or d is None:
        effect = {FAILED: "not measured (failed)", NOT_APPLICABLE: "not measured (not applicable)"}.get(
            v.outcome, "nothing measured that compares"
        )
    else:
        effect = effect_text(*d)
    if r == ROLE_CONTROL:
        return Headline(pair.variant, r, effect, "\u2014", control_line(pair, e), d[0] if d else None)
    if r == HELPER:
        return Headline(pair.variant, r, effect, "\u2014", helper_line(ctx, pair), d[0] if d else None)
    return Headline(
        pair.variant,
        r,
        effect,
        accuracy_text(v, e),
        why_line(v, e),
        d[0] if d else None,
        d[1] if d else "",
        workload_line(v, e, ctx.rules),
    )


def control_line(pair: Pair, e: Evidence) -> str:
    """What a control showed: how far the two measurements of one configuration came apart."""
    g, what = control_spread(e)
    judged = [c for c in e.comparisons if c.judged]
    if not judged:
        return f"{pair.variant} measured {pair.base}'s configuration again; nothing compares yet"
    if g <= 1:
        return f"{pair.variant} measured {pair.base}'s configuration again: no difference on {len(judged)} figures"
    return (
        f"{pair.variant} measured {pair.base}'s configuration again: up to \u00d7{g:.2f} apart ({what}); every "
        "comparison whose two sides were measured on different machines is widened by this factor"
    )


def helper_line(ctx: Context, pair: Pair) -> str:
    """What a helper is for, in the words of the experiment it serves."""
    h = helper_of(ctx, pair.variant)
    return h.line if h is not None else f"{pair.variant} serves another variant"


def headlines(
    ctx: Context, pairs: Mapping[str, Pair], verdicts: Mapping[str, Verdict], evidence: Mapping[str, Evidence]
) -> dict[str, Headline]:
    return {v: headline(ctx, pairs[v], x, evidence[v]) for v, x in verdicts.items()}


def optimisations(heads: Mapping[str, Headline]) -> list[str]:
    return [v for v, h in heads.items() if h.role == OPTIMISATION]


def checks(heads: Mapping[str, Headline]) -> list[Headline]:
    """The controls and helpers: the lines of "how the evidence was checked"."""
    return [h for h in heads.values() if h.role != OPTIMISATION]


def figure(ctx: Context, pair: Pair, v: Verdict, e: Evidence, *, h: Headline) -> Figure | None:
    """The optimisation's small figure: the deciding figure's quantity, without and with, at every setting of
    its dimension (concurrency, shared-prefix length) the evidence holds, and each task's accuracy change."""
    c = h.comparison
    if c is None or h.role != OPTIMISATION:
        return None
    same = [
        x
        for x in e.comparisons
        if x.quantity == c.quantity and x.regime == c.regime and x.setting.dimension == c.setting.dimension
    ]
    if c.setting.dimension and all(x.setting.value is not None for x in same):
        same.sort(key=lambda x: float(x.setting.value or 0))
        xs = [float(x.setting.value or 0) for x in same]
    else:
        same, xs = [c], [0.0]
    acc = [(t.task, t.delta_pt, t.interval, t.bound_pt) for t in sorted(e.accuracy, key=lambda t: t.task)]
    note = "" if acc else f"accuracy: {v.accuracy_outcome}"
    return plots.with_without(
        c.quantity,
        c.unit,
        c.setting.dimension if len(same) > 1 else "",
        xs,
        without=[x.without for x in same],
        with_=[x.with_ for x in same],
        labels=(f"without ({ctx.label(pair.without)})", f"with ({ctx.label(pair.with_)})"),
        accuracy=acc,
        accuracy_note=note,
    )


def figures(
    ctx: Context,
    pairs: Mapping[str, Pair],
    verdicts: Mapping[str, Verdict],
    evidence: Mapping[str, Evidence],
) -> dict[str, str]:
    """Each optimisation's small figure as inline SVG, by variant (none where nothing compares)."""
    out: dict[str, str] = {}
    for v, h in headlines(ctx, pairs, verdicts, evidence).items():
        fig = figure(ctx, pairs[v], verdicts[v], evidence[v], h=h)
        if fig is not None:
            out[v] = plots.svg_text(fig)
    return out

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
"""

from __future__ import annotations

import math
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field, replace
from typing import Any

from worthit.report.measure import EXACT, SINGLE_RUN, Measure, basis_class, ratio, runs_in
from worthit.stats import (
    ACC_INCONCLUSIVE,
    ACCEPTABLE,
    NO_CHANGE,
    RULE_OF_THREE,
    UNACCEPTABLE,
    Z_95,
    PooledSpread,
    hodges_lehmann_log_ratio,
    noninferiority,
    t_quantile,
    values_for_exact_coverage,
    welch_df,
    z_quantile,
)

# --- the six outcomes on an optimisation, and a control's ------------------------------------------
ADOPT = "adopt"
REJECT = "reject"
INCONCLUSIVE = "inconclusive"
NOT_APPLICABLE = "not applicable"
FAILED = "failed"
NOT_RUN = "not run"
CONTROL = "control"
OUTCOMES = (ADOPT, REJECT, INCONCLUSIVE, NOT_APPLICABLE, FAILED, NOT_RUN, CONTROL)
WORDING = {
    ADOPT: "turn it on: the benefit is demonstrated and accuracy holds",
    REJECT: "leave it off: it is worse, its benefit is below the margin, or accuracy drops too far",
    INCONCLUSIVE: "the evidence cannot tell yet; the verdict says what would settle it",
    NOT_APPLICABLE: "this hardware or model lacks a prerequisite (known before serving)",
    FAILED: "it ran and broke; the reason is the root cause from its log",
    NOT_RUN: "nothing measured that compares with the baseline",
    CONTROL: "not an optimisation: the baseline's configuration measured again; it says how far two "
    "measurements of one configuration differ (another machine, another day)",
}

# --- findings on one figure -----------------------------------------------------------------------
BETTER = "better"
WORSE = "worse"
EQUIVALENT = "no meaningful difference"
UNDETERMINED = "undetermined"
INFO = "information"

# --- regimes --------------------------------------------------------------------------------------
LATENCY = "latency"
THROUGHPUT = "throughput"
CAPACITY = "capacity"
ALL_REGIMES = "all"  # a check that settles every regime (a speculative variant whose drafter never proposed)
REGIMES = (LATENCY, THROUGHPUT)
REGIME_NAMES = {LATENCY: "latency-first", THROUGHPUT: "throughput-first"}

# --- accuracy decisions ---------------------------------------------------------------------------
NOT_MEASURED = "not measured"
NOT_NEEDED = "not needed (lossless)"
NOT_REPORTED = "not reported (random weights)"


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
        )

    def max_drop(self, task: str) -> float:
        return float(self.max_accuracy_drop_pt_by_task.get(task, self.max_accuracy_drop_pt))


@dataclass(frozen=True)
class Setting:
    """Where a figure was measured: a load level, a shared-prefix length, or the regime as a whole."""

    label: str  # "concurrency 4", "1500-token shared prefix", "best under the TPOT ceiling"
    dimension: str = ""  # "concurrency", "shared prefix" ('' for a one-off setting)
    value: float | None = None

    @classmethod
    def concurrency(cls, c: int) -> Setting:
        return cls(f"concurrency {c}", "concurrency", c)

    @classmethod
    def prefix(cls, tokens: int) -> Setting:
        return cls(f"{tokens:,}-token shared prefix", "shared prefix", tokens)


@dataclass(frozen=True)
class Comparison:
    """One figure, without vs with the optimisation. ``judged``: whether the rules weigh it (else shown only).
    ``guard``: a figure shown, not judged, that still counts against the optimisation where it is demonstrably
    worse: a load level's P99s, whose intervals are too wide to adopt on but not to see a tail the median hides
    (docs/verdicts.md, "Tails")."""

    quantity: str
    unit: str
    without: Measure
    with_: Measure
    higher_is_better: bool
    regime: str = LATENCY
    setting: Setting = Setting("")
    judged: bool = True
    guard: bool = False
    # Measurement conditions the two sides do not share (two machines): the factor a control measured between
    # two measurements of one configuration, and that control's name. The interval is widened by it.
    spread: float = 1.0
    spread_source: str = ""
    # The study's run-to-run spread of this kind of figure on the machine of a single-run comparison (the
    # prefix sweep, a level measured once): it goes on top of the within-run interval (docs/statistics.md).
    run_spread: PooledSpread | None = None

    @property
    def change_pct(self) -> float | None:
        b, v = self.without.value, self.with_.value
        if b is None or v is None or b == 0 or math.isnan(b) or math.isnan(v):
            return None
        return (v - b) / abs(b) * 100

    @property
    def improvement(self) -> Measure:
        """Factor by which the optimisation is better (> 1) or worse (< 1), with its 95% interval: the two
        sides' intervals combined (:func:`worthit.report.measure.ratio`), two small single runs by their exact
        Mann-Whitney interval, a single run widened by the pooled run-to-run spread, and the machines' spread
        on top where the sides were measured apart."""
        num, den = (self.with_, self.without) if self.higher_is_better else (self.without, self.with_)
        r, coverage = _small_samples(ratio(num, den), num, den)
        r = _with_run_spread(r, self.run_spread, coverage)
        if self.spread <= 1 or r.is_exact or r.low is None or r.high is None:
            return r
        g = self.spread
        return replace(r, low=r.low / g, high=r.high * g)

    @property
    def basis(self) -> str:
        imp = self.improvement
        return imp.basis or imp.why_none

    def describe(self) -> str:
        ch = self.change_pct
        where = f" at {self.setting.label}" if self.setting.label else ""
        return f"{self.quantity} {ch:+.0f}%{where}" if ch is not None else f"{self.quantity} n/a{where}"


def _small_samples(r: Measure, num: Measure, den: Measure) -> tuple[Measure, float]:
    """A ratio of two single runs too small for order-statistic intervals (fewer than six values a side),
    given its exact distribution-free interval: the Hodges-Lehmann interval of the ratio from the
    Mann-Whitney distribution, with the coverage it has (97.1% for 4 against 4). Where the values cannot
    reach 95% the figure has no interval and says what would give one. Returns (measure, its coverage)."""
    if r.value is None or r.interval() is not None or r.is_exact or not (num.values and den.values):
        return r, 0.95
    ex = hodges_lehmann_log_ratio(num.values, den.values)
    if ex is None:
        return r, 0.95
    if not ex.reaches:
        need = values_for_exact_coverage(0.95)
        why = (
            f"{ex.m} vs {ex.n} values: an exact interval covers at most {ex.coverage:.0%}; "
            f"{need} values a side give 95%"
        )
        return replace(r, why_none=why), 0.95
    method = f"exact Mann-Whitney interval, {ex.m} vs {ex.n} values, {ex.coverage:.1%} coverage"
    return (
        replace(r, low=min(ex.low, r.value), high=max(ex.high, r.value), basis=SINGLE_RUN, why_none="", method=method),
        ex.coverage,
    )


def _with_run_spread(r: Measure, pool: PooledSpread | None, coverage: float = 0.95) -> Measure:
    """A ratio of two single runs with the study's pooled run-to-run spread added: each side's figure varies
    from run to run by the pool's sd on the log scale, so the log ratio's variance grows by 2 s_pool^2; the
    interval is a t-interval on the Welch-Satterthwaite degrees of freedom of within-run and pooled parts."""
    iv = r.interval()
    if pool is None or r.basis != SINGLE_RUN or iv is None or r.value is None or iv[0] <= 0:
        return r
    se_within = (math.log(iv[1]) - math.log(iv[0])) / (2 * z_quantile(coverage))
    se_run = pool.sd_log * math.sqrt(2)
    se = math.hypot(se_within, se_run)
    df = welch_df(se_within, math.inf, se_run, pool.df)
    t = t_quantile(df) if math.isfinite(df) else Z_95
    low, high = r.value * math.exp(-t * se), r.value * math.exp(t * se)
    return replace(r, low=low, high=high, basis=f"{SINGLE_RUN}; {pool.describe()}", df=df, pool=pool)


@dataclass(frozen=True)
class Check:
    """A finding the experiment states itself (an SLO broken, a predicted speed-up below the rule of thumb).

    ``prediction``: from a model, not a measurement (a measured benefit outweighs it). ``decisive``: it
    settles the setting on its own (an unknown alpha makes a speculative verdict inconclusive whatever
    the timings say).
    """

    regime: str
    setting: Setting
    finding: str
    reason: str
    settle: str = ""
    prediction: bool = False
    decisive: bool = False


@dataclass(frozen=True)
class TaskAccuracy:
    """One task's change vs the baseline, in points, with its standard error (paired or unpaired)."""

    task: str
    metric: str
    baseline_value: float  # [0, 1]
    value: float  # [0, 1]
    delta_pt: float
    stderr_pt: float | None
    n: int  # items behind the standard error (paired documents, or the variant's items)
    method: str  # paired / unpaired
    bound_pt: float
    task_size: int | None = None
    filter: str = "none"

    @property
    def interval(self) -> tuple[float, float] | None:
        if self.stderr_pt is None or math.isnan(self.stderr_pt):
            return None
        return (self.delta_pt - Z_95 * self.stderr_pt, self.delta_pt + Z_95 * self.stderr_pt)

    @property
    def decision(self) -> str:
        return noninferiority(self.delta_pt, self.stderr_pt, self.bound_pt)

    @property
    def items_needed(self) -> int | None:
        """Items at which the observed variance would put the interval clear of -bound (None: no number
        would, the estimate sits on the bound, or there is no standard error)."""
        if self.stderr_pt is None or not self.n or self.decision != ACC_INCONCLUSIVE:
            return None
        gap = abs(self.delta_pt + self.bound_pt)
        if gap == 0:
            return None
        if self.method == NO_CHANGE:  # the rule-of-three half-width shrinks as 1/n, not 1/sqrt(n)
            return math.ceil(RULE_OF_THREE * 100 / gap)
        return math.ceil(self.n * (Z_95 * self.stderr_pt / gap) ** 2)

    @property
    def delta(self) -> Measure:
        iv = self.interval
        if iv is None:
            return Measure.none(self.delta_pt, self.n, "no standard error")
        return Measure(self.delta_pt, self.n, iv[0], iv[1], f"{self.method}, {self.n} items")

    def describe(self) -> str:
        iv = self.interval
        ci = f" [{iv[0]:+.1f}, {iv[1]:+.1f}]" if iv else " [no interval]"
        return f"{self.task} ({self.metric}) {self.delta_pt:+.1f} pt{ci} n={self.n} {self.method}"

    def settle(self) -> str:
        need = self.items_needed
        if self.decision != ACC_INCONCLUSIVE:
            return ""
        if self.stderr_pt is None:
            return f"{self.task}: scores with a standard error (lm-eval's samples)"
        if need is None:
            return f"{self.task}: the change sits on the -{self.bound_pt:g} pt bound; no number of items settles it"
        have = f"; the task has {self.task_size:,}" if self.task_size else ""
        enough = "" if not self.task_size else (" (enough)" if self.task_size >= need else " (not enough)")
        return f"{self.task}: about {need:,} items at the observed variance{have}{enough}"


@dataclass(frozen=True)
class Evidence:
    """Everything the rules weigh for one optimisation (oriented: ``with_`` has it, ``without`` does not)."""

    variant: str
    optimisation: str = ""
    status: str = "ok"  # ok / failed / not_applicable / not run
    reason: str = ""
    comparisons: Sequence[Comparison] = ()
    checks: Sequence[Check] = ()
    accuracy: Sequence[TaskAccuracy] = ()
    lossless: bool = False  # accuracy cannot change (prefix caching, speculative decoding's exact sampling)
    random_weights: bool = False  # a side serves random weights: accuracy means nothing
    accuracy_failure: str = ""  # why no task's accuracy compares the sides (failed, not run yet, not configured)
    accuracy_settle: str = ""  # what would measure it
    accuracy_asked: bool = False  # the variant's config runs accuracy (or it ran): a lossless one's check
    notes: Sequence[str] = ()
    control: bool = False  # the base's configuration measured again (worthit.report.context.Pair.control)
    perf_settle: str = ""  # what would settle performance beyond more runs (one machine for both sides)
    machines: str = ""  # where the two sides were measured: "one machine", or the machines' widening


@dataclass(frozen=True)
class SettingOutcome:
    setting: Setting
    outcome: str
    reason: str
    settle: str = ""
    basis: str = ""
    leaning: str = ""  # an inconclusive outcome's direction: what a single run's figures would have decided

    @property
    def label(self) -> str:
        """How the outcome reads in a range: "adopt", or "leaning adopt (single run)"."""
        return f"leaning {self.leaning} (single run)" if self.leaning else self.outcome


@dataclass(frozen=True)
class RegimeVerdict:
    regime: str
    outcome: str
    condition: str = ""  # "up to concurrency 4"
    detail: str = ""  # "adopt up to concurrency 4, reject from 16"
    settings: Sequence[SettingOutcome] = ()
    settle: str = ""
    basis: str = ""
    benefits: Sequence[str] = ()


@dataclass(frozen=True)
class Verdict:
    variant: str
    optimisation: str
    outcome: str
    reason: str
    condition: str = ""
    regimes: Mapping[str, RegimeVerdict] = field(default_factory=dict)
    finals: Mapping[str, str] = field(default_factory=dict)  # per measured regime, accuracy taken into account
    accuracy_outcome: str = NOT_MEASURED
    accuracy_detail: str = ""
    accuracy_cost: str = ""
    worst_accuracy_delta_pt: float | None = None
    benefit: str = ""
    settle: str = ""
    basis: str = ""
    effort: str = "not stated"
    status: str = "ok"


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


def tail_harms(comparisons: Sequence[Comparison], rules: Rules) -> list[tuple[Comparison, str]]:
    """The guard figures (shown, not judged) that are demonstrably worse, with why: they count as harms."""
    out = []
    for c in comparisons:
        if c.guard and not c.judged:
            finding, why = judge(c, rules)
            if finding == WORSE:
                out.append((c, why))
    return out


def _settle_perf(cs: Sequence[Comparison]) -> str:
    if any(c.improvement.single_run for c in cs):
        return "independent runs (loadtest.repeats: 3): the intervals are from a single run"
    if any(c.improvement.interval() is None and not c.improvement.is_exact for c in cs):
        return "more requests per level (loadtest.num_requests): a figure has no interval"
    return "more runs (loadtest.repeats): the interval spans the margin"


def _basis(cs: Sequence[Comparison]) -> str:
    bases = {c.improvement.basis for c in cs if c.improvement.value is not None}
    if SINGLE_RUN in bases:
        return SINGLE_RUN
    widened = sorted(b for b in bases if b.startswith(SINGLE_RUN))  # a single run with the pooled spread
    if widened:
        return widened[0]
    runs = [b for b in bases if runs_in(b)]
    if runs:
        return min(runs, key=lambda b: (runs_in(b) or 0, b))
    return EXACT if bases == {EXACT} else ""


def _span(xs: Sequence[float]) -> str:
    return f"{xs[0]:g}" if len(xs) == 1 else f"{xs[0]:g}-{xs[-1]:g}"


def _verdict_basis(cs: Sequence[Comparison]) -> str:
    """What a verdict's intervals rest on: one basis ("3 runs", "3 runs, run-to-run spread pooled over 15
    cells (30 df)"), or where each holds when they differ ("2 runs (concurrency, workload level); single run
    (shared prefix)")."""
    pairs = [(c.improvement, c.setting.dimension or c.setting.label) for c in cs]
    known = [(m, w) for m, w in pairs if m.value is not None and m.basis]
    classes: dict[str, list[Measure]] = {}
    where: dict[str, dict[str, None]] = {}
    for m, w in known:
        if m.basis == EXACT:
            continue
        k = basis_class(m)
        classes.setdefault(k, []).append(m)
        where.setdefault(k, {})[w] = None
    if not classes:
        return EXACT if known else ""

    def text(k: str) -> str:
        pools = {m.pool for m in classes[k] if m.pool is not None}
        if not pools:
            return k
        cells = sorted({len(p.cells) for p in pools})
        dfs = sorted({p.df for p in pools})
        return f"{k} over {_span(cells)} cells ({_span(dfs)} df)"

    order = sorted(classes, key=lambda k: (k.startswith(SINGLE_RUN), k))
    if len(order) == 1:
        return text(order[0])
    return "; ".join(f"{text(k)} ({', '.join(where[k])})" for k in order)


def _settle_single_run(setting: Setting) -> str:
    if setting.dimension == "shared prefix":  # the prefix sweep runs once: workload levels repeat
        return (
            "independent runs: a workload level with a shared prefix on both variants (workloads:, "
            "loadtest.repeats >= 2); the prefix sweep is a single run"
        )
    return "independent runs (loadtest.repeats >= 2): the intervals are from a single run"


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
        return SettingOutcome(
            setting,
            INCONCLUSIVE,
            f"single run, leaning {out.outcome}: {out.reason}",
            _settle_single_run(setting),
            out.basis,
            leaning=out.outcome,
        )
    return out


def _setting_outcome(
    setting: Setting, comparisons: Sequence[Comparison], checks: Sequence[Check], rules: Rules
) -> SettingOutcome:
    judged = [(c, *judge(c, rules)) for c in comparisons if c.judged]
    basis = _basis([c for c, _, _ in judged])
    for ch in checks:
        if ch.decisive:
            out = INCONCLUSIVE if ch.finding == UNDETERMINED else (ADOPT if ch.finding == BETTER else REJECT)
            return SettingOutcome(setting, out, ch.reason, ch.settle, basis)
    better = [why for _, f, why in judged if f == BETTER] + [
        ch.reason for ch in checks if ch.finding == BETTER and not ch.prediction
    ]
    worse = (
        [why for _, f, why in judged if f == WORSE]
        + [f"{why}, a tail the medians hide" for _, why in tail_harms(comparisons, rules)]
        + [ch.reason for ch in checks if ch.finding == WORSE and not ch.prediction]
    )
    if not better:  # a model's warning stands only where no measurement shows a benefit
        worse += [ch.reason for ch in checks if ch.finding == WORSE and ch.prediction]
    undetermined = [(c, why) for c, f, why in judged if f == UNDETERMINED]
    undetermined_checks = [ch for ch in checks if ch.finding == UNDETERMINED]
    if worse:
        why = "worse: " + "; ".join(worse) + (" (although better: " + "; ".join(better) + ")" if better else "")
        return SettingOutcome(setting, REJECT, why, "", basis)
    if better:
        return SettingOutcome(setting, ADOPT, "better: " + "; ".join(better), "", basis)
    if judged and all(f == EQUIVALENT for _, f, _ in judged) and not undetermined_checks:
        return SettingOutcome(
            setting,
            REJECT,
            f"no benefit of at least {rules.min_speedup:g}x: " + "; ".join(w for _, _, w in judged),
            "",
            basis,
        )
    if not judged and not checks:
        return SettingOutcome(setting, NOT_RUN, "nothing measured here", "", basis)
    why = "; ".join([w for _, w in undetermined] + [ch.reason for ch in undetermined_checks]) or "no judged figure"
    settle = "; ".join(
        filter(
            None,
            [_settle_perf([c for c, _ in undetermined]) if undetermined else ""]
            + [ch.settle for ch in undetermined_checks],
        )
    )
    return SettingOutcome(setting, INCONCLUSIVE, "undetermined: " + why, settle, basis)


def _ranges(outs: Sequence[SettingOutcome]) -> str:
    """ "adopt up to concurrency 4, reject from 16" for one dimension; "adopt at 1, 4; reject at 16" otherwise."""
    if not outs:
        return ""
    dim = outs[0].setting.dimension
    # an ordered dimension (concurrency, prefix length) reads as ranges; one without values (a workload level)
    # as a list of where
    if any(o.setting.value is None for o in outs):
        dim = ""
    runs: list[tuple[str, list[SettingOutcome]]] = []
    for o in outs:
        if runs and runs[-1][0] == o.label:
            runs[-1][1].append(o)
        else:
            runs.append((o.label, [o]))
    if len(runs) == 1:
        return f"{runs[0][0]} at every {dim} measured" if dim else f"{runs[0][0]}: {outs[0].reason}"

    def val(o: SettingOutcome) -> str:
        return f"{o.setting.value:,g}" if o.setting.value is not None else o.setting.label

    parts = []
    for i, (out, group) in enumerate(runs):
        if not dim:
            parts.append(f"{out} at " + ", ".join(o.setting.label for o in group))
        elif i == 0:
            parts.append(f"{out} up to {dim} {val(group[-1])}")
        elif i == len(runs) - 1:
            parts.append(f"{out} from {val(group[0])}")
        else:
            parts.append(f"{out} at {', '.join(val(o) for o in group)}")
    return ", ".join(parts)


def _where(outs: Sequence[SettingOutcome], leaning: bool = False) -> str:
    """Where an outcome list adopts (``leaning``: leans to adopt): "up to concurrency 4", "from 1,500-token
    shared prefix", "at ..."."""
    flags = [(o.leaning if leaning else o.outcome) == ADOPT for o in outs]
    dim = outs[0].setting.dimension if all(o.setting.value is not None for o in outs) else ""
    adopted = [o for o, f in zip(outs, flags, strict=True) if f]

    def val(o: SettingOutcome) -> str:
        return f"{o.setting.value:,g}" if o.setting.value is not None else o.setting.label

    if dim and all(flags):
        return f"at every {dim} measured"
    k = flags.index(False) if False in flags else len(flags)
    if dim and all(flags[:k]) and not any(flags[k:]):
        return f"up to {dim} {val(adopted[-1])}"
    j = flags.index(True)
    if dim and all(flags[j:]) and not any(flags[:j]):
        return f"from {dim} {val(adopted[0])}"
    return "at " + ", ".join(o.setting.label for o in adopted)


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
            basis=_basis([c for c in cs if c.judged]),
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
    detail = "; ".join(_ranges(v) for v in by_dim.values())
    kinds = {o.outcome for o in outs}
    if ADOPT in kinds:
        outcome = ADOPT
        condition = (
            ""
            if kinds == {ADOPT}
            else "; ".join(_where(v) for v in by_dim.values() if any(o.outcome == ADOPT for o in v))
        )
    elif REJECT in kinds:
        outcome, condition = REJECT, ""
    elif kinds == {NOT_RUN}:
        outcome, condition = NOT_RUN, ""
    else:
        outcome, condition = INCONCLUSIVE, ""  # where a single run leans: said, never settled
        if any(o.leaning == ADOPT for o in outs):
            where = "; ".join(_where(v, leaning=True) for v in by_dim.values() if any(o.leaning == ADOPT for o in v))
            condition = f"leaning {ADOPT} (single run) {where}"
        elif any(o.leaning == REJECT for o in outs):
            condition = f"leaning {REJECT} (single run)"
    basis = _basis([c for c in cs if c.judged])
    settle = "; ".join(dict.fromkeys(o.settle for o in outs if o.settle and o.outcome == INCONCLUSIVE))
    benefits = [  # a single run's benefit says so: it is not a settled one
        c.describe() + (" (single run)" if c.improvement.single_run else "")
        for c in cs
        if c.judged and judge(c, rules)[0] == BETTER
    ]
    return RegimeVerdict(regime, outcome, condition, detail, outs, settle, basis, benefits)


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


def _why(rv: RegimeVerdict) -> str:
    """Why a regime came out as it did: the reasons of the settings that carry its outcome (at most two)."""
    carrying = [o for o in rv.settings if o.outcome == rv.outcome] or list(rv.settings)
    carrying = [o for o in carrying if o.leaning] or carrying  # what a single run leans to, first
    if not carrying or not carrying[0].setting.dimension:
        return rv.detail.split(": ", 1)[-1] if rv.detail else ""
    return "; ".join(f"{o.setting.label}: {o.reason}" for o in carrying[:2])


def decide(e: Evidence, rules: Rules) -> Verdict:
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
    basis = _verdict_basis([c for c in e.comparisons if c.judged])
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
    reasons = []
    if basis == SINGLE_RUN:
        reasons.append("single run: the intervals are within one run; run-to-run variation is not in them")
    whys: dict[str, list[str]] = {}
    for r, o in finals.items():
        rv = regimes[r]
        head = REGIME_NAMES[r] + (f" {o} (performance {rv.outcome}, accuracy {acc})" if o != rv.outcome else "")
        whys.setdefault(_why(rv), []).append(head)
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
    basis = _verdict_basis(judged)
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

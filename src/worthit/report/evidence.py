"""The evidence the decision rules weigh (:mod:`worthit.report.decide`): where a figure was measured
(:class:`Setting`), one figure without vs with the optimisation (:class:`Comparison`, whose improvement factor
carries the arithmetic of its 95% interval: small samples, the pooled run-to-run spread, the machines'
spread), a finding an experiment states itself (:class:`Check`), one task's accuracy change
(:class:`TaskAccuracy`), and all of it for one optimisation (:class:`Evidence`)."""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass, field, replace

from worthit.report.measure import SINGLE_RUN, Measure, ratio
from worthit.report.outcomes import LATENCY, Finding
from worthit.stats import (
    ACC_INCONCLUSIVE,
    NO_CHANGE,
    RULE_OF_THREE,
    Z_95,
    PooledSpread,
    family_coverage,
    hodges_lehmann_log_ratio,
    noninferiority,
    t_quantile,
    values_for_exact_coverage,
    welch_df,
    z_quantile,
)


@dataclass(frozen=True)
class Workload:
    """What a load level sent: its workload (a name of ``workloads:``, or the grid's random tokens), whether
    its prompts are real text (the kind says: :func:`worthit.loadgen.workloads.real_text`), and whether the
    level's responses are mostly loops (:func:`worthit.loadgen.repetition.mostly_loops`; None: not recorded)."""

    name: str  # "sharegpt", or "random tokens" for the grid's fixed-length random prompts
    real_text: bool
    loops: bool | None = None

    @property
    def label(self) -> str:
        """ "sharegpt (real text)", "random tokens" ."""
        if self.real_text:
            return f"{self.name} (real text)"
        return self.name if "random" in self.name else f"{self.name} (random tokens)"


@dataclass(frozen=True)
class Setting:
    """Where a figure was measured: a load level, a shared-prefix length, or the regime as a whole."""

    label: str  # "concurrency 4", "1500-token shared prefix", "best under the TPOT ceiling"
    dimension: str = ""  # "concurrency", "shared prefix" ('' for a one-off setting)
    value: float | None = None
    # what the level sent, where it is a load level (None elsewhere); not part of the setting's identity, so
    # an experiment's check at a level meets the load test's figures there without knowing the workload
    workload: Workload | None = field(default=None, compare=False)

    @classmethod
    def concurrency(cls, c: int, workload: Workload | None = None) -> Setting:
        return cls(f"concurrency {c}", "concurrency", c, workload)

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
    # How many judged figures the verdict this comparison belongs to weighs, and whether it also judges ranges
    # of levels as a whole: its interval is the simultaneous one over all of them (Bonferroni: 1 - 5%/family,
    # or 1 - 2.5%/family where the other half goes to the ranges), so that the verdict errs at most 5 %, not
    # each figure (docs/statistics.md, "What the rules promise"). Set by :class:`Evidence`.
    family: int = 1
    ranged: bool = False

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
        spread = _with_run_spread(r, self.run_spread, coverage)
        r = _simultaneous(spread, self.family, self.ranged, 0.95 if spread is not r else coverage)
        if self.spread <= 1 or r.is_exact or r.low is None or r.high is None:
            return r
        g = self.spread
        return replace(r, low=r.low / g, high=r.high * g)

    @property
    def basis(self) -> str:
        imp = self.improvement
        return imp.basis or imp.why_none

    @property
    def change_ms(self) -> float | None:
        """with - without in ms (None: not a time, or a side unknown)."""
        b, v = self.without.value, self.with_.value
        if self.unit != "ms" or b is None or v is None or math.isnan(b) or math.isnan(v):
            return None
        return v - b

    def least_harm(self) -> tuple[float, float | None] | None:
        """The smallest harm the interval allows, where the whole interval is a harm: (change in %, change
        in ms, None for a figure that is not a time), read at the interval's end nearest no change (None: the
        interval reaches no change, or there is none)."""
        imp = self.improvement
        iv = imp.interval() if not imp.is_exact else ((imp.value, imp.value) if imp.value is not None else None)
        b = self.without.value
        if iv is None or b is None or iv[1] >= 1 or iv[1] <= 0:
            return None
        hi = iv[1]  # improvement factor nearest 1: the least harm
        pct = (1 - hi) * 100 if self.higher_is_better else (1 / hi - 1) * 100
        ms = b * (1 / hi - 1) if self.unit == "ms" and not self.higher_is_better else None
        return pct, ms

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


def _simultaneous(r: Measure, family: int, ranged: bool = False, coverage: float = 0.95) -> Measure:
    """A 95% interval widened to the simultaneous one over ``family`` figures (each 1 - 5%/family: Bonferroni;
    1 - 2.5%/family where the verdict spends the other half on ranges: ``ranged``), on the log scale about the
    estimate; a t quantile where the interval's degrees of freedom are known."""
    iv = r.interval()
    shares = 2 * family if ranged else family
    if shares <= 1 or r.is_exact or iv is None or r.value is None or r.value <= 0 or iv[0] <= 0:
        return r
    want = family_coverage(shares)
    finite = r.df is not None and math.isfinite(r.df) and r.df > 0
    q0 = t_quantile(r.df, coverage) if finite and r.df is not None else z_quantile(coverage)
    q1 = t_quantile(r.df, want) if finite and r.df is not None else z_quantile(want)
    k = q1 / q0
    f = r.value
    low, high = f * (iv[0] / f) ** k, f * (iv[1] / f) ** k
    note = f"simultaneous {want:.2%} interval over {family} judged figure{'s' if family > 1 else ''}"
    note += " and their ranges" if ranged else ""
    return replace(r, low=min(low, f), high=max(high, f), method=f"{r.method}; {note}" if r.method else note)


def _weighed(c: Comparison) -> bool:
    return c.judged and not (c.without.is_exact and c.with_.is_exact) and c.without.known and c.with_.known


def judged_family(cs: Sequence[Comparison]) -> int:
    """How many figures a verdict weighs with an interval: its judged comparisons that are not exact counts
    and have a value on both sides."""
    return sum(1 for c in cs if _weighed(c))


def range_groups(cs: Sequence[Comparison]) -> dict[tuple[str, str, str], list[Comparison]]:
    """The ranges a verdict also tests as a whole: per regime, ordered dimension (concurrency, shared prefix)
    and judged quantity, the comparisons at two or more of its settings, none of them a single run (whose
    intervals hold no run-to-run variation)."""
    groups: dict[tuple[str, str, str], list[Comparison]] = {}
    for c in cs:
        ordered = c.setting.dimension and c.setting.value is not None
        if _weighed(c) and ordered and not c.improvement.basis.startswith(SINGLE_RUN):
            groups.setdefault((c.regime, c.setting.dimension, c.quantity), []).append(c)
    return {k: sorted(v, key=lambda c: c.setting.value or 0.0) for k, v in groups.items() if len(v) >= 2}


def pooled_range(cs: Sequence[Comparison], coverage: float) -> Measure:
    """One figure over a range of settings as a whole: the geometric mean of its improvement factors with the
    ``coverage`` interval exp(mean log f +- t se), se = sqrt(sum se_i^2) / k (the levels' runs are
    independent), t on the fewest degrees of freedom of any level; the machines' spread on top."""
    logs, ses, dfs = [], [], []
    for c in cs:
        imp = replace(c, family=1, ranged=False, spread=1.0).improvement
        iv = imp.interval()
        if imp.value is None or iv is None or imp.value <= 0 or iv[0] <= 0:
            return Measure(None)
        df = imp.df if imp.df is not None and math.isfinite(imp.df) and imp.df > 0 else math.inf
        q = t_quantile(df) if math.isfinite(df) else Z_95
        logs.append(math.log(imp.value))
        ses.append(imp.log_se if imp.log_se is not None else (math.log(iv[1]) - math.log(iv[0])) / (2 * q))
        dfs.append(df)
    k = len(logs)
    centre, se, df = sum(logs) / k, math.sqrt(sum(x * x for x in ses)) / k, min(dfs)
    q = t_quantile(df, coverage) if math.isfinite(df) else z_quantile(coverage)
    g = max(c.spread for c in cs)
    f = math.exp(centre)
    return Measure(
        f,
        k,
        math.exp(centre - q * se) / g,
        math.exp(centre + q * se) * g,
        cs[0].improvement.basis,
        method=f"{coverage:.2%} interval of the geometric mean over {k} levels",
    )


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
    # an undetermined finding that keeps a benefit from adopting (a P99 that may break the SLO met without it)
    blocks_adoption: bool = False


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
    # its effect depends on what is generated (speculative decoding): judged on real-text levels where any
    # was measured, its random-token levels shown beside the verdict (docs/verdicts.md, "Which workload")
    content_dependent: bool = False
    # plausibility checks that tripped (worthit.report.plausibility): the verdict is suspect, not published
    findings: Sequence[Finding] = ()

    def __post_init__(self) -> None:
        # every figure's interval is the simultaneous one over the judged figures of this verdict
        m, ranged = judged_family(self.comparisons), bool(range_groups(self.comparisons))
        if any(c.family != m or c.ranged != ranged for c in self.comparisons):
            object.__setattr__(
                self, "comparisons", tuple(replace(c, family=m, ranged=ranged) for c in self.comparisons)
            )

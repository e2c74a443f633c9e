"""The decision rules: evidence about one variant against the baseline -> adopt / reject / not applicable /
no measurable difference, with the reason in words.

Rules (``decide:`` in the study config): the largest accuracy drop per task in points, the smallest
speed-up that counts as a benefit, whether a benefit must be statistically significant (its 95%
interval clear of the baseline's), the rule-of-thumb floor for a predicted speculative speed-up, and
an effort label per variant. The asymmetry is deliberate: a benefit must be demonstrated (a change
whose interval overlaps the baseline is "no measurable difference", never a win), while an accuracy
drop beyond the bound rejects on its point estimate (a possible loss is not waved through for lack
of samples).
"""

from __future__ import annotations

import math
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

ADOPT = "adopt"
REJECT = "reject"
NOT_APPLICABLE = "not applicable"
NO_DIFFERENCE = "no measurable difference"
VERDICTS = (ADOPT, REJECT, NOT_APPLICABLE, NO_DIFFERENCE)


@dataclass(frozen=True)
class Measure:
    """A reported figure: its value, the sample size behind it and a 95% interval (None = unknown).

    ``exact`` marks a deterministic quantity (a block count read from the engine) whose change needs
    no interval to be real.
    """

    value: float | None
    n: int = 0
    ci_low: float | None = None
    ci_high: float | None = None
    exact: bool = False

    @property
    def has_ci(self) -> bool:
        return self.exact or (self.ci_low is not None and self.ci_high is not None)

    def interval(self) -> tuple[float, float] | None:
        if self.value is None:
            return None
        if self.exact:
            return (self.value, self.value)
        if self.ci_low is None or self.ci_high is None:
            return None
        return (self.ci_low, self.ci_high)

    def fmt(self, digits: int = 1, unit: str = "") -> str:
        if self.value is None or (isinstance(self.value, float) and math.isnan(self.value)):
            return "n/a"
        text = f"{self.value:,.{digits}f}{unit}"
        if self.exact:
            return text
        ci = (
            f"[{self.ci_low:,.{digits}f}, {self.ci_high:,.{digits}f}]"
            if self.ci_low is not None and self.ci_high is not None
            else "[no CI]"
        )
        return f"{text} {ci} n={self.n}"


@dataclass(frozen=True)
class Comparison:
    """One quantity, baseline vs variant. ``kind``: latency, throughput, capacity."""

    quantity: str
    unit: str
    baseline: Measure
    variant: Measure
    higher_is_better: bool
    kind: str = "latency"

    @property
    def change_pct(self) -> float | None:
        b, v = self.baseline.value, self.variant.value
        if b is None or v is None or b == 0:
            return None
        return (v - b) / abs(b) * 100

    @property
    def improvement(self) -> float | None:
        """Factor by which the variant is better (>1) or worse (<1)."""
        b, v = self.baseline.value, self.variant.value
        if b is None or v is None or b <= 0 or v <= 0:
            return None
        return v / b if self.higher_is_better else b / v

    @property
    def significant(self) -> bool | None:
        """True when the two 95% intervals do not overlap; None when either has no interval."""
        a, b = self.baseline.interval(), self.variant.interval()
        if a is None or b is None:
            return None
        if self.baseline.exact and self.variant.exact:
            return a[0] != b[0]
        return a[1] < b[0] or b[1] < a[0]

    def describe(self) -> str:
        ch = self.change_pct
        return f"{self.quantity} {ch:+.0f}%" if ch is not None else f"{self.quantity} n/a"


@dataclass(frozen=True)
class AccuracyDelta:
    """One task's score, baseline vs variant, in [0, 1] with lm-eval's standard errors."""

    task: str
    baseline: float
    variant: float
    baseline_stderr: float | None = None
    variant_stderr: float | None = None
    n: int = 0

    @property
    def change_pt(self) -> float:
        return (self.variant - self.baseline) * 100

    @property
    def ci_pt(self) -> tuple[float, float] | None:
        if self.baseline_stderr is None or self.variant_stderr is None:
            return None
        half = 1.96 * math.hypot(self.baseline_stderr, self.variant_stderr) * 100
        return (self.change_pt - half, self.change_pt + half)

    @property
    def significant(self) -> bool | None:
        ci = self.ci_pt
        return None if ci is None else (ci[0] > 0 or ci[1] < 0)


@dataclass(frozen=True)
class Rules:
    max_accuracy_drop_pt: float = 3.0
    max_accuracy_drop_pt_by_task: Mapping[str, float] = field(default_factory=dict)
    min_speedup: float = 1.05
    require_significance: bool = True
    min_predicted_speedup: float = 1.3
    effort: Mapping[str, str] = field(default_factory=dict)

    @classmethod
    def from_config(cls, cfg: Mapping[str, Any]) -> Rules:
        d = dict(cfg.get("decide") or {})
        return cls(
            max_accuracy_drop_pt=float(d.get("max_accuracy_drop_pt", 3.0)),
            max_accuracy_drop_pt_by_task={
                k: float(v) for k, v in (d.get("max_accuracy_drop_pt_by_task") or {}).items()
            },
            min_speedup=float(d.get("min_speedup", 1.05)),
            require_significance=bool(d.get("require_significance", True)),
            min_predicted_speedup=float(d.get("min_predicted_speedup", 1.3)),
            effort={k: str(v) for k, v in (d.get("effort") or {}).items()},
        )

    def max_drop(self, task: str) -> float:
        return float(self.max_accuracy_drop_pt_by_task.get(task, self.max_accuracy_drop_pt))


@dataclass(frozen=True)
class Evidence:
    """Everything the rules look at for one variant."""

    variant: str
    status: str = "ok"  # ok / failed / not_applicable (from the result files)
    reason: str = ""
    description: str = ""
    comparisons: Sequence[Comparison] = ()
    accuracy: Sequence[AccuracyDelta] = ()
    predicted_speedup: float | None = None


@dataclass(frozen=True)
class Verdict:
    variant: str
    verdict: str
    reason: str
    benefit: str
    accuracy_cost: str
    effort: str
    status: str = "ok"
    predicted_speedup: float | None = None
    max_accuracy_drop_pt: float | None = None


def _counts(c: Comparison, rules: Rules) -> bool:
    """The change is real: significant, or significance unknown and not required."""
    sig = c.significant
    return bool(sig) if rules.require_significance else sig is not False


def decide(e: Evidence, rules: Rules) -> Verdict:
    effort = rules.effort.get(e.variant, "not stated")
    if e.status != "ok":
        why = e.reason or e.status
        return Verdict(
            e.variant,
            NOT_APPLICABLE,
            why if e.status == "not_applicable" else f"failed: {why}",
            "—",
            "—",
            effort,
            e.status,
            e.predicted_speedup,
        )

    if not e.comparisons and not e.accuracy:
        return Verdict(
            e.variant,
            NOT_APPLICABLE,
            "no figures to compare with the baseline (not measured)",
            "—",
            "not measured",
            effort,
            e.status,
            e.predicted_speedup,
        )
    benefits = [c for c in e.comparisons if (c.improvement or 0) >= rules.min_speedup and _counts(c, rules)]
    small = [c for c in e.comparisons if c.improvement and 1 < c.improvement < rules.min_speedup and _counts(c, rules)]
    harms = [
        c
        for c in e.comparisons
        if c.kind != "capacity" and c.improvement and c.improvement <= 1 / rules.min_speedup and _counts(c, rules)
    ]
    benefit = ", ".join(c.describe() for c in benefits) or "none measurable"

    drops = [a for a in e.accuracy if -a.change_pt > rules.max_drop(a.task)]
    worst = min((a.change_pt for a in e.accuracy), default=None)
    if e.accuracy:
        lo, hi = min(a.change_pt for a in e.accuracy), max(a.change_pt for a in e.accuracy)
        acc_cost = f"{lo:+.1f} pt" if abs(hi - lo) < 0.05 else f"{lo:+.1f} to {hi:+.1f} pt"
    else:
        acc_cost = "not measured"
    max_drop = -worst if worst is not None else None

    reasons: list[str] = []
    if drops:
        reasons.append(
            "accuracy: "
            + ", ".join(
                f"{a.task} {a.change_pt:+.1f} pt exceeds the {rules.max_drop(a.task):g} pt bound"
                + ("" if a.significant else " (not significant at 95%)")
                for a in drops
            )
        )
    if e.predicted_speedup is not None and e.predicted_speedup < rules.min_predicted_speedup:
        reasons.append(
            f"predicted speculative speed-up {e.predicted_speedup:.2f}x is below the "
            f"{rules.min_predicted_speedup:g}x rule of thumb"
        )
    if drops:
        verdict = REJECT
    elif harms and not benefits:
        verdict = REJECT
        reasons.insert(0, "worse: " + ", ".join(c.describe() for c in harms))
    elif harms:
        verdict = REJECT
        reasons.insert(
            0,
            "trade-off: better "
            + ", ".join(c.describe() for c in benefits)
            + " but worse "
            + ", ".join(c.describe() for c in harms),
        )
    elif benefits:
        verdict = ADOPT
        reasons.insert(
            0,
            f"better by at least {rules.min_speedup:g}x"
            + (" (95% intervals clear of the baseline)" if rules.require_significance else "")
            + f" in {len(benefits)} figure(s)"
            + ("" if e.accuracy else "; accuracy not measured"),
        )
    elif small:
        verdict = REJECT
        reasons.insert(
            0,
            f"benefit below the minimum speed-up of {rules.min_speedup:g}x: " + ", ".join(c.describe() for c in small),
        )
    else:
        verdict = NO_DIFFERENCE
        reasons.insert(
            0,
            "every change lies within the run-to-run noise (95% intervals overlap the baseline)"
            if e.comparisons
            else "no figures to compare with the baseline",
        )
    return Verdict(
        e.variant,
        verdict,
        "; ".join(reasons),
        benefit,
        acc_cost,
        effort,
        e.status,
        e.predicted_speedup,
        max_drop,
    )


def predicted_speculative_speedup(
    alpha: float | None, k: float | None, gamma: float | None, c: float | None
) -> float | None:
    """S = alpha / (k * gamma + c): tokens per verify step over the cost of k drafts plus one verify."""
    if alpha is None or k is None or gamma is None or c is None:
        return None
    denom = k * gamma + c
    return alpha / denom if denom > 0 else None

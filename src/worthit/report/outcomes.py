"""The vocabulary of a verdict (:mod:`worthit.report.decide`): the outcomes, the findings on one figure, the
regimes and the accuracy decisions, each with the words the report uses; and what a verdict holds, per
setting, per regime and overall."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from worthit.report.evidence import Evidence, Setting, Workload

# --- the six outcomes on an optimisation, and a control's ------------------------------------------
ADOPT = "adopt"
REJECT = "reject"
INCONCLUSIVE = "inconclusive"
NOT_APPLICABLE = "not applicable"
FAILED = "failed"
NOT_RUN = "not run"
CONTROL = "control"
SUSPECT = "suspect"
OUTCOMES = (ADOPT, REJECT, INCONCLUSIVE, NOT_APPLICABLE, FAILED, NOT_RUN, CONTROL, SUSPECT)
WORDING = {
    ADOPT: "turn it on: the benefit is demonstrated and accuracy holds",
    REJECT: "leave it off: it is worse, its benefit is below the margin, or accuracy drops too far",
    INCONCLUSIVE: "the evidence cannot tell yet; the verdict says what would settle it",
    NOT_APPLICABLE: "this hardware or model lacks a prerequisite (known before serving)",
    FAILED: "it ran and broke; the reason is the root cause from its log",
    NOT_RUN: "nothing measured that compares with the baseline",
    CONTROL: "not an optimisation: the baseline's configuration measured again; it says how far two "
    "measurements of one configuration differ (another machine, another day)",
    SUSPECT: "not published as adopt or reject: the result contradicts how the technique works; the verdict says "
    'what to check first (docs/verdicts.md, "Suspect results")',
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
ALL_REGIMES = "all"  # a check that settles every regime (a speculative variant whose drafter never proposed)
REGIMES = (LATENCY, THROUGHPUT)
REGIME_NAMES = {LATENCY: "latency-first", THROUGHPUT: "throughput-first"}

# --- accuracy decisions ---------------------------------------------------------------------------
NOT_MEASURED = "not measured"
NOT_NEEDED = "not needed (lossless)"
NOT_REPORTED = "not reported (random weights)"


@dataclass(frozen=True)
class Finding:
    """A plausibility check that tripped (:mod:`worthit.report.plausibility`): which, why, what to check."""

    check: str  # "calibrated KV scales", "lossless accuracy", "bandwidth floor", "speculative model", ...
    reason: str  # what was measured against what the technique allows
    what_to_check: str


@dataclass(frozen=True)
class SettingOutcome:
    setting: Setting
    outcome: str
    reason: str
    settle: str = ""
    basis: str = ""
    leaning: str = ""  # an inconclusive outcome's direction: what a single run's figures would have decided
    deciding: str = ""  # the figure (or check) that carried the outcome: "TTFT P99 +38% at concurrency 64"
    tradeoffs: Sequence[str] = ()  # worse figures within the harm tolerance: "TTFT P50 +4.6 ms (+35%) at ..."

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
    tradeoffs: Sequence[str] = ()  # where it is adopted: worse figures within the harm tolerance


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
    tradeoffs: Sequence[str] = ()  # what it costs where it is adopted, within the harm tolerance
    # measured on several workloads: the verdict on each alone, the ones it rests on marked judged
    by_workload: Sequence[WorkloadVerdict] = ()
    # a suspect verdict: what the figures alone would have decided, and the checks that tripped
    would_be: str = ""
    findings: Sequence[Finding] = ()


@dataclass(frozen=True)
class WorkloadVerdict:
    """An optimisation's verdict on one workload's levels alone (docs/verdicts.md, "Which workload"):
    ``judged``: the overall verdict rests on it (a content-dependent optimisation's synthetic workloads are
    shown beside a real-text verdict, not judged)."""

    workload: Workload
    verdict: Verdict
    evidence: Evidence
    judged: bool = True

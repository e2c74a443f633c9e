"""The winner's-curse guard: the best of many noisy candidates is usually lucky, so the top candidates (and
vLLM's defaults) are measured again on fresh server starts and a winner is declared only when its interval
clears the runner-up's and the defaults' by ``decide.min_speedup``.

The statistics are the report's: each side's runs make a :class:`~worthit.report.measure.Measure`
(:func:`~worthit.report.measure.over_runs`), the pair a :class:`~worthit.report.evidence.Comparison`, and
:func:`worthit.report.regimes.judge` says whether the factor's interval lies clear of the margin. Otherwise
it is a tie, and the recommendation is the candidate with the fewest changed flags among those no other
candidate demonstrably beats (vLLM's defaults change none).
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass

from worthit.report.evidence import Comparison
from worthit.report.measure import Measure, over_runs
from worthit.report.outcomes import BETTER, THROUGHPUT
from worthit.report.regimes import judge
from worthit.report.rules import Rules

DEFAULTS = "vLLM defaults"
WINNER = "winner"
TIE = "tie"


@dataclass(frozen=True)
class Confirmed:
    """One candidate re-measured: its runs' figure (higher is better) and how many flags it changes."""

    name: str
    runs: tuple[float, ...]
    changed_flags: int

    @property
    def measure(self) -> Measure:
        return over_runs(self.runs, len(self.runs))


@dataclass(frozen=True)
class Confirmation:
    outcome: str  # WINNER or TIE
    recommended: str
    naive_best: str  # the highest mean, lucky or not
    reasons: tuple[str, ...]


def _compare(quantity: str, best: Confirmed, other: Confirmed) -> Comparison:
    return Comparison(quantity, "", other.measure, best.measure, higher_is_better=True, regime=THROUGHPUT)


def decide(
    candidates: Sequence[Confirmed], defaults: Confirmed, rules: Rules, quantity: str = "output tok/s per GPU"
) -> Confirmation:
    """Winner or tie among the re-measured ``candidates`` and vLLM's ``defaults``."""
    pool = [*candidates, defaults]
    ranked = sorted(pool, key=lambda c: (-(c.measure.value or 0.0), c.changed_flags, c.name))
    best = ranked[0]
    rivals = [c for c in ranked[1:2] if c is not defaults] + ([defaults] if best is not defaults else [])
    reasons: list[str] = []
    cleared = True
    for rival in rivals:
        finding, why = judge(_compare(quantity, best, rival), rules)
        reasons.append(f"{best.name} vs {rival.name}: {finding}: {why}")
        cleared = cleared and finding == BETTER
    if best is not defaults and cleared:
        return Confirmation(WINNER, best.name, best.name, tuple(reasons))
    # a tie: the simplest of those no other candidate demonstrably beats
    level = [
        c for c in ranked if not any(judge(_compare(quantity, o, c), rules)[0] == BETTER for o in ranked if o is not c)
    ]
    pick = min(level, key=lambda c: (c.changed_flags, -(c.measure.value or 0.0), c.name))
    reasons.append(
        f"tie among {', '.join(c.name for c in level)}: recommend {pick.name}, the fewest changed flags "
        f"({pick.changed_flags})"
    )
    return Confirmation(TIE, pick.name, best.name, tuple(reasons))


def changed_flags(values: Mapping[str, object], defaults: Mapping[str, object]) -> int:
    """How many of a candidate's values differ from vLLM's defaults (a flag without a known default counts)."""
    return sum(1 for k, v in values.items() if k not in defaults or defaults[k] != v)

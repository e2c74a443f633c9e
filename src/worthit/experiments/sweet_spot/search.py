"""The measured sweet spot: the highest concurrency whose P99 TTFT and P99 TPOT meet the SLO.

The load grid (``loadtest.levels``) is coarse: 1, 4, 16, 64. The search starts from the grid's crossover,
the last passing level ``lo`` below the first failing level ``hi`` (run 1 of each), and bisects between
them, measuring one closed-loop level per probe on the variant's server, until ``hi - lo <= width`` or
``max_probes`` levels were measured. The answer is a bracket: ``lo`` passes (measured), ``hi`` fails
(measured), the sweet spot lies in [lo, hi). Latency is taken as monotone in concurrency, which a noisy
probe may contradict: the search keeps the bracket the measurements imply and records every probe, so a
reader can see a probe that passed above one that failed.

Edge cases are answers too: every grid level passing ("not reached: at least the highest level measured")
and none passing ("below the lowest level") start no probe and say so.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass, field

# how the search ended (sweet_spot metadata 'outcome')
BRACKETED = "bracketed"  # lo passes, hi fails, hi - lo <= width
PROBE_LIMIT = "probe_limit"  # max_probes measured before the bracket was narrow enough
ALL_PASS = "all_pass"  # every grid level meets the SLO: the sweet spot is at least the highest level
NONE_PASS = "none_pass"  # no grid level meets it, not even the lowest
NO_GRID = "no_grid"  # no grid level was measured successfully


@dataclass(frozen=True)
class Probe:
    concurrency: int
    meets: bool
    source: str  # "grid" or "search"


@dataclass
class Bracket:
    """The bracket after the grid and each probe; ``probes`` in the order measured."""

    lo: int | None
    hi: int | None
    outcome: str
    probes: list[Probe] = field(default_factory=list)

    @property
    def sweet_spot(self) -> int | None:
        """The highest concurrency measured to meet the SLO below the first failing one (None: none)."""
        return self.lo

    def describe(self) -> str:
        if self.outcome == NO_GRID:
            return "no grid level was measured: nothing to search from"
        if self.outcome == NONE_PASS:
            return f"no level meets the SLO, not even concurrency {self.hi}"
        if self.outcome == ALL_PASS:
            return f"every level meets the SLO: the sweet spot is at least concurrency {self.lo} (not reached)"
        n = sum(p.source == "search" for p in self.probes)
        if self.lo is None:  # the probe limit hit while searching below a failing lowest level
            return (
                f"concurrency {self.hi} misses the SLO; the probe limit was reached before a passing level ({n} probes)"
            )
        text = f"concurrency {self.lo} meets the SLO, {self.hi} does not ({n} probe(s) between grid levels)"
        if self.outcome == PROBE_LIMIT and self.hi is not None:
            text += f"; the probe limit was reached with the bracket {self.hi - self.lo} wide"
        return text


def crossover(grid: Sequence[tuple[int, bool]]) -> tuple[int | None, int | None]:
    """(last passing level below the first failing one, first failing level) of the grid's outcomes."""
    ordered = sorted(grid)
    hi = next((c for c, ok in ordered if not ok), None)
    passing = [c for c, ok in ordered if ok and (hi is None or c < hi)]
    return (max(passing) if passing else None), hi


def search(
    grid: Sequence[tuple[int, bool]], measure: Callable[[int], bool], width: int = 1, max_probes: int = 6
) -> Bracket:
    """Bisect the grid's crossover with ``measure(concurrency) -> meets the SLO`` until ``hi - lo <= width``.

    ``grid``: (concurrency, meets) of the grid's measured levels. A failing lowest level above 1 is searched
    down to 1 (the bracket's lower end is then 0: "nothing passes" is measured, not assumed)."""
    if width < 1 or max_probes < 1:
        raise ValueError(f"width and max_probes must be >= 1 (got {width}, {max_probes})")
    probes = [Probe(c, ok, "grid") for c, ok in sorted(grid)]
    if not probes:
        return Bracket(None, None, NO_GRID, probes)
    lo, hi = crossover(grid)
    if hi is None:
        return Bracket(lo, None, ALL_PASS, probes)
    low = lo or 0  # nothing passes: search down towards concurrency 1
    n = 0
    while hi - low > width and n < max_probes:
        mid = (low + hi) // 2  # >= 1: the loop runs only while hi - low >= 2
        ok = measure(mid)
        probes.append(Probe(mid, ok, "search"))
        n += 1
        if ok:
            low = mid
        else:
            hi = mid
    if low == 0:
        return Bracket(None, hi, NONE_PASS if hi - low <= width or hi == 1 else PROBE_LIMIT, probes)
    return Bracket(low, hi, BRACKETED if hi - low <= width else PROBE_LIMIT, probes)

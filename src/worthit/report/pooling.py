"""The study's run-to-run spread, pooled where the data has it (docs/statistics.md, "Pooled run-to-run spread").

Every load level measured in two or more independent runs is a *cell* of each of its figures (TTFT P50, TPOT
P99, output tok/s, ...). Cells that share a machine and a kind of figure estimate one run-to-run variability;
their log-scale variances pool into one estimate with the sum of their degrees of freedom
(:func:`worthit.stats.pool_spread`). A level's interval then rests on that pooled estimate, not on the one
degree of freedom of its own two runs, and a single run (the prefix sweep) carries it on top of its
within-run interval, so that it can decide.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, field

from worthit.provenance import machine
from worthit.report.data import Loaded
from worthit.stats import PooledSpread, SpreadCell, pool_spread

# The quantity names the comparisons use for the kinds of figure a level has (the cells' ``kind``; the load
# experiment's levels name theirs).
QUANTITY_KIND = {
    "E2E P50": "e2e_p50",
    "TTFT P50": "ttft_p50",
    "TTFT P99": "ttft_p99",
    "TPOT P50": "tpot_p50",
    "TPOT P99": "tpot_p99",
    "output tok/s": "output_tok_per_s",
    "goodput tok/s": "goodput_tok_per_s",
    "TTFT P50 (shared prefix)": "ttft_p50",
}


def files_machine(files: Sequence[Loaded]) -> str | None:
    """The one machine that measured every file (worthit.provenance.machine), None when they differ or do not
    say: such a cell is not pooled with any other."""
    found = {machine(f.metadata.get("hardware")) for f in files}
    return next(iter(found)) if len(found) == 1 and None not in found else None


def pool_group(machine_id: str | None, workload: str | None, ends_at_eos: bool | None) -> str | None:
    """What a level's run-to-run spread pools with: the machine's levels, or, for a level of a named ``workload``
    whose replies end at EOS (a ShareGPT level), only the levels of that workload. Such a level varies from run
    to run with the lengths its replies take, a spread of its own; pooled with fixed-length levels it would widen
    every one of their intervals (on the embedded default's 3-4 request ShareGPT levels, TTFT P50's pooled
    spread went from 15 % to 33 %), so it pools apart (docs/statistics.md, "Between runs")."""
    if machine_id is None:
        return None
    return f"{machine_id}|workload={workload}" if workload is not None and ends_at_eos else machine_id


@dataclass(frozen=True)
class Cell:
    machine: str | None
    kind: str
    name: str  # e.g. "baseline/conc~4"
    values: tuple[float, ...]


@dataclass
class Pools:
    """The pooled run-to-run spread by (machine, kind of figure)."""

    by: Mapping[tuple[str, str], PooledSpread] = field(default_factory=dict)

    def get(self, machine_id: str | None, kind: str | None) -> PooledSpread | None:
        if machine_id is None or kind is None:
            return None
        return self.by.get((machine_id, kind))

    def for_quantity(self, machine_id: str | None, quantity: str) -> PooledSpread | None:
        return self.get(machine_id, QUANTITY_KIND.get(quantity))


def pools_of(cells: Iterable[Cell]) -> Pools:
    groups: dict[tuple[str, str], list[SpreadCell]] = {}
    for c in cells:
        if c.machine is not None and len(c.values) >= 2:
            groups.setdefault((c.machine, c.kind), []).append(SpreadCell(c.name, c.values))
    out = {key: p for key, cs in groups.items() if (p := pool_spread(cs)) is not None}
    return Pools(out)

"""Replay tuning strategies on a recorded grid: how many server-minutes each needs to reach a configuration
within 5 % of the grid's best, and how often the winner it declares is the true one (issue 35, point 7).

The ground truth is an exhaustive grid of a small space measured with repeats (``grid.json``, written by
``benchmarks/tune/grid.py`` from a worthit study whose variants are the grid's points). Every measurement a
strategy asks for is answered by one of that point's recorded runs, drawn at random: the replay carries the
grid's own run-to-run noise, and a strategy that trusts one run can be fooled as a live one would be.

Strategies, each over many seeds:

- ``auto_tune``: vLLM's ``benchmarks/auto_tune/auto_tune.sh`` as its README describes it: every point of the
  ``max-num-seqs`` x ``max-num-batched-tokens`` grid in order, one server start and one measurement each, no
  repeats; the best measured figure wins (its gpu-memory-utilization probe is counted as
  ``--probe-starts`` extra starts of the first point);
- ``random``: points in a random order, one measurement each, until the budget; the best measured wins;
- ``worthit``: :class:`worthit.tune.search.TuneSearch` (Optuna TPE) proposes rounds of candidates,
  each measured once, then the top candidates and vLLM's defaults are measured again
  (:func:`worthit.tune.confirm.decide`: a winner only when its interval clears the runner-up's and
  the defaults', else the tie's fewest changed flags).

    .venvs/workflow/bin/python benchmarks/tune/replay.py GRID.json --seeds 200 --out RESULTS.json
"""

from __future__ import annotations

import argparse
import json
import math
import random
import statistics
import sys
import tempfile
from collections.abc import Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from worthit.report.rules import Rules
from worthit.tune import confirm
from worthit.tune.search import Outcome, TuneSearch, candidate_id
from worthit.tune.space import parse

WITHIN = 0.05  # "a configuration within 5 % of the grid's best"


@dataclass(frozen=True)
class Grid:
    """A recorded grid: its space (a ``tune:`` section), vLLM's defaults as a point, and each point's runs."""

    tune: dict[str, Any]
    defaults: dict[str, Any]
    runs: dict[str, list[dict[str, float]]]  # candidate id -> its runs: {scenario figure..., server_minutes}
    values: dict[str, dict[str, Any]]  # candidate id -> its flag values

    @classmethod
    def load(cls, path: Path) -> Grid:
        raw = json.loads(path.read_text())
        runs: dict[str, list[dict[str, float]]] = {}
        values: dict[str, dict[str, Any]] = {}
        for r in raw["runs"]:
            cid = candidate_id(r["values"])
            values[cid] = dict(r["values"])
            runs.setdefault(cid, []).append({k: float(v) for k, v in r.items() if k not in ("values", "run")})
        return cls(raw["tune"], dict(raw["defaults"]), runs, values)

    def true_value(self, cid: str, scenario: str) -> float:
        """A point's figure as the grid knows it: the mean over its runs."""
        return statistics.fmean(r[scenario] for r in self.runs[cid])

    def best(self, scenario: str) -> float:
        return max(self.true_value(c, scenario) for c in self.runs)


@dataclass
class Ledger:
    """What one strategy spent and found, in order."""

    minutes: float = 0.0
    starts: int = 0
    incumbent: str | None = None
    incumbent_value: float = -math.inf
    reached_at_min: float | None = None  # server-minutes when the incumbent first came within 5 % of the best
    trace: list[tuple[str, float]] = field(default_factory=list)

    def measure(self, grid: Grid, cid: str, scenario: str, rng: random.Random) -> float:
        run = rng.choice(grid.runs[cid])
        self.minutes += run["server_minutes"]
        self.starts += 1
        self.trace.append((cid, run[scenario]))
        return run[scenario]

    def offer(self, grid: Grid, cid: str, figure: float, scenario: str) -> None:
        """A measured figure: the incumbent changes when it beats the incumbent's."""
        if figure > self.incumbent_value:
            self.incumbent, self.incumbent_value = cid, figure
        if self.reached_at_min is None and grid.true_value(self.incumbent or cid, scenario) >= (1 - WITHIN) * grid.best(
            scenario
        ):
            self.reached_at_min = self.minutes


def _grid_order(grid: Grid) -> list[str]:
    """The points in auto_tune.sh's loop order: max-num-seqs outer, max-num-batched-tokens inner, then the rest."""
    keys = ("max-num-seqs", "max-num-batched-tokens")

    def key(cid: str) -> tuple[Any, ...]:
        v = grid.values[cid]
        return (*(v.get(k, 0) for k in keys), json.dumps(v, sort_keys=True, default=str))

    return sorted(grid.runs, key=key)


def auto_tune(grid: Grid, scenario: str, rng: random.Random, *, probe_starts: int = 0, budget: int = 10**9) -> Ledger:
    led = Ledger()
    order = _grid_order(grid)
    for _ in range(probe_starts):  # the gpu-memory-utilization probe: starts that fail, each paid
        led.minutes += statistics.fmean(r["server_minutes"] for r in grid.runs[order[0]])
        led.starts += 1
    for cid in order:
        if led.starts >= budget:
            break
        led.offer(grid, cid, led.measure(grid, cid, scenario, rng), scenario)
    return led


def random_search(grid: Grid, scenario: str, rng: random.Random, *, budget: int) -> Ledger:
    led = Ledger()
    order = list(grid.runs)
    rng.shuffle(order)
    for cid in order[:budget]:
        led.offer(grid, cid, led.measure(grid, cid, scenario, rng), scenario)
    return led


def worthit_tune(
    grid: Grid, scenario: str, rng: random.Random, *, seed: int, budget: int, rules: Rules, rounds: int | None = None
) -> Ledger:
    """TuneSearch rounds until ``rounds`` (default: the grid's ``tune.rounds``, as a live tune stops) or the
    budget less the confirmation's starts, whichever first, then confirm the top candidates."""
    cfg = {"tune": {**grid.tune, "seed": seed, "scenarios": [scenario]}, "variants": {}}
    section = parse(cfg, "grid")
    confirm_starts = section.confirm_starts
    rounds = section.rounds if rounds is None else rounds
    led = Ledger()
    measured: dict[str, list[float]] = {}
    with tempfile.TemporaryDirectory() as tmp:
        search = TuneSearch(section, Path(tmp) / "journal.log")
        round_ = 0
        while led.starts + confirm_starts < budget and round_ < rounds:
            proposed = search.propose(round_)
            if not proposed:
                break
            for c in proposed:
                if led.starts + confirm_starts >= budget:
                    break
                cid = c.id
                if cid not in grid.runs:  # a point the grid did not record: the build refused it
                    search.record(c, Outcome.failed("not in the recorded grid"))
                    continue
                figure = led.measure(grid, cid, scenario, rng)
                measured.setdefault(cid, []).append(figure)
                search.record(c, Outcome.measured({scenario: figure}))
                led.offer(grid, cid, figure, scenario)
            round_ += 1
    top = sorted(measured, key=lambda c: -max(measured[c]))[: section.confirm_top]
    default_id = candidate_id(grid.defaults)
    confirmed = []
    for cid in top:
        runs = [led.measure(grid, cid, scenario, rng) for _ in range(section.confirm_repeats)]
        confirmed.append(confirm.Confirmed(cid, tuple(runs), confirm.changed_flags(grid.values[cid], grid.defaults)))
    defaults = confirm.Confirmed(
        confirm.DEFAULTS, tuple(led.measure(grid, default_id, scenario, rng) for _ in range(section.confirm_repeats)), 0
    )
    verdict = confirm.decide(confirmed, defaults, rules)
    led.incumbent = default_id if verdict.recommended == confirm.DEFAULTS else verdict.recommended
    return led


def _summary(grid: Grid, scenario: str, ledgers: Sequence[Ledger]) -> dict[str, Any]:
    best = grid.best(scenario)
    true_best = max(grid.runs, key=lambda c: grid.true_value(c, scenario))
    reached = [led.reached_at_min for led in ledgers if led.reached_at_min is not None]
    winners = [led.incumbent for led in ledgers]
    spent = [led.minutes for led in ledgers]
    return {
        "seeds": len(ledgers),
        "reached_within_5pct": len(reached),
        "minutes_to_within_5pct_median": statistics.median(reached) if reached else None,
        "minutes_to_within_5pct_range": [min(reached), max(reached)] if reached else None,
        "minutes_to_within_5pct_quartiles": statistics.quantiles(reached, n=4) if len(reached) > 1 else None,
        "minutes_spent_median": statistics.median(spent),
        "minutes_spent_range": [min(spent), max(spent)],
        "starts_median": statistics.median(led.starts for led in ledgers),
        "winner_is_true_best_pct": 100.0 * sum(w == true_best for w in winners) / len(ledgers),
        "winner_within_5pct_pct": 100.0
        * sum(w is not None and grid.true_value(w, scenario) >= (1 - WITHIN) * best for w in winners)
        / len(ledgers),
    }


def replay(
    grid: Grid, scenario: str, *, seeds: int, budget: int, probe_starts: int = 0, rounds: int | None = None
) -> dict[str, Any]:
    """Every strategy over ``seeds`` seeds on one scenario: the summary per strategy."""
    rules = Rules.from_config({})
    out: dict[str, Any] = {"scenario": scenario, "points": len(grid.runs), "grid_best": grid.best(scenario)}
    ledgers: dict[str, list[Ledger]] = {"auto_tune": [], "random": [], "worthit": []}
    for s in range(seeds):
        ledgers["auto_tune"].append(auto_tune(grid, scenario, random.Random(s), probe_starts=probe_starts))
        ledgers["random"].append(random_search(grid, scenario, random.Random(s), budget=budget))
        ledgers["worthit"].append(
            worthit_tune(grid, scenario, random.Random(s), seed=s, budget=budget, rules=rules, rounds=rounds)
        )
    out["strategies"] = {name: _summary(grid, scenario, led) for name, led in ledgers.items()}
    return out


def main(argv: Sequence[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("grid", type=Path, help="grid.json (benchmarks/tune/grid.py)")
    ap.add_argument("--scenario", default="throughput", choices=["throughput", "latency"])
    ap.add_argument("--seeds", type=int, default=100)
    ap.add_argument("--budget", type=int, default=None, help="server starts (default: the tune section's)")
    ap.add_argument("--probe-starts", type=int, default=0, help="auto_tune's failed gpu-memory-utilization starts")
    ap.add_argument(
        "--rounds", type=int, default=None, help="worthit's search rounds at most (default: tune.rounds, as live)"
    )
    ap.add_argument("--out", type=Path, default=None)
    a = ap.parse_args(argv)
    grid = Grid.load(a.grid)
    budget = a.budget or int((grid.tune.get("budget") or {}).get("server_starts") or 24)
    result = replay(grid, a.scenario, seeds=a.seeds, budget=budget, probe_starts=a.probe_starts, rounds=a.rounds)
    text = json.dumps(result, indent=1)
    if a.out:
        a.out.write_text(text + "\n")
    print(text)
    return 0


if __name__ == "__main__":
    sys.exit(main())

"""The decision rules' error rate and power, in simulated studies drawn at the spreads real studies observe
(docs/statistics.md, "What the rules promise").

Each simulated study has the embedded default's shape: four load-tested variants at concurrency 1, 4 and 16,
each level measured in ``repeats`` runs, whose TPOT P50 and TTFT P50 vary from run to run log-normally with
the observed sd. The candidate and the baseline go through the product's own pipeline: the pool
(:func:`worthit.stats.pool_spread`), each level's measure (:func:`worthit.report.measure.pooled_over_runs`),
the comparisons and the verdict (:func:`worthit.report.decide.decide`). Run with ``-s`` to print the table.
"""

from __future__ import annotations

import math
from collections import Counter

import numpy as np
import pytest

from worthit.report.decide import (
    ADOPT,
    BETTER,
    LATENCY,
    REJECT,
    WORSE,
    Comparison,
    Evidence,
    Rules,
    Setting,
    decide,
    judge,
)
from worthit.report.measure import pooled_over_runs
from worthit.stats import SpreadCell, pool_spread

LEVELS = (1, 4, 16)
VARIANTS = ("baseline", "candidate", "other1", "other2")
QUANTITIES = (("tpot", "TPOT P50"), ("ttft", "TTFT P50"), ("tpot99", "TPOT P99"), ("ttft99", "TTFT P99"))
GUARDS = {"tpot99", "ttft99"}  # shown, counted only when demonstrably worse (docs/verdicts.md, "Tails")
# Run-to-run sd of log(figure) pooled over the repeated load levels of real runs: a quiet 2-core CPU run of
# the embedded default (examples/embedded-default/results; test_the_cpu_spreads_are_the_committed_runs checks
# them) and the H200 sample on one machine (its P99s taken as its P50s': too few repeated cells to pool).
OBSERVED = {
    "cpu": {"tpot": 0.133, "ttft": 0.044, "tpot99": 0.105, "ttft99": 0.047},
    "h200": {"tpot": 0.078, "ttft": 0.164, "tpot99": 0.078, "ttft99": 0.164},
}
STUDIES = 300
RULES = Rules()


def simulate(sd: dict[str, float], effect: float, repeats: int = 2, studies: int = STUDIES, seed: int = 0):
    """(verdict outcomes, per-judged-figure findings) over simulated studies; ``effect``: how many times faster
    the candidate's TPOT (P50 and P99) is, as a log ratio, at every level (TTFT unchanged). The P99s are
    guards, as the load experiment makes them."""
    rng = np.random.default_rng(seed)
    verdicts: Counter[str] = Counter()
    figures: Counter[str] = Counter()
    for _ in range(studies):
        runs = {
            (v, c, k): tuple(
                100.0
                * math.exp(-(effect if v == "candidate" and k in ("tpot", "tpot99") else 0.0))
                * np.exp(rng.normal(0.0, sd[k], repeats))
            )
            for v in VARIANTS
            for c in LEVELS
            for k, _ in QUANTITIES
        }
        pools = {
            k: pool_spread([SpreadCell(f"{v}/{c}", x) for (v, c, kk), x in runs.items() if kk == k])
            for k, _ in QUANTITIES
        }
        comps = []
        for c in LEVELS:
            for k, q in QUANTITIES:
                b = pooled_over_runs(runs[("baseline", c, k)], 20, pools[k], f"baseline/{c}")
                w = pooled_over_runs(runs[("candidate", c, k)], 20, pools[k], f"candidate/{c}")
                guard = k in GUARDS
                comp = Comparison(q, "ms", b, w, False, LATENCY, Setting.concurrency(c), not guard, guard)
                comps.append(comp)
                if not guard:
                    figures[judge(comp, RULES)[0]] += 1
        verdicts[decide(Evidence("candidate", comparisons=comps, lossless=True), RULES).outcome] += 1
    return verdicts, figures


def _rate(counter: Counter[str], *keys: str) -> float:
    return sum(counter[k] for k in keys) / sum(counter.values())


def _mc(p: float, n: int) -> float:
    """Three Monte Carlo standard errors of a rate p estimated from n draws."""
    return 3 * math.sqrt(max(p * (1 - p), 1e-4) / n)


@pytest.mark.parametrize("machine", sorted(OBSERVED))
def test_no_effect_is_called_better_or_worse_more_often_than_the_stated_rate(machine):
    verdicts, figures = simulate(OBSERVED[machine], effect=0.0)
    n_fig = sum(figures.values())
    better, worse = _rate(figures, BETTER), _rate(figures, WORSE)
    wrong = _rate(verdicts, ADOPT, REJECT)
    print(f"\n{machine}: no effect: figures better {better:.1%}, worse {worse:.1%}; verdicts decided {wrong:.1%}")
    # per judged figure: each side of a 95 % interval errs at most 2.5 %
    assert better <= 0.025 + _mc(0.025, n_fig) and worse <= 0.025 + _mc(0.025, n_fig)
    # per verdict: at most the union bound over its 6 judged figures both ways and its 6 guards one way
    assert wrong <= 6 * 0.05 + 6 * 0.025
    # and in fact far less: the stated verdict-level rate (docs/statistics.md)
    assert wrong <= 0.15 + _mc(0.15, STUDIES)


@pytest.mark.parametrize("machine", sorted(OBSERVED))
def test_an_effect_of_three_spreads_is_adopted_in_most_studies_with_two_repeats(machine):
    sd = OBSERVED[machine]["tpot"]
    verdicts, _ = simulate(OBSERVED[machine], effect=3 * sd)
    power = _rate(verdicts, ADOPT)
    print(f"\n{machine}: TPOT {math.exp(3 * sd) - 1:.0%} faster (3 sd): adopted in {power:.0%} (2 repeats)")
    assert power >= 0.6
    assert _rate(verdicts, REJECT) <= 0.03  # a real benefit is almost never rejected


def test_twice_the_spread_is_adopted_in_most_cpu_studies_and_more_repeats_raise_the_power():
    sd = OBSERVED["cpu"]
    two, _ = simulate(sd, effect=2 * sd["tpot"], repeats=2)
    three, _ = simulate(sd, effect=2 * sd["tpot"], repeats=3)
    p2, p3 = _rate(two, ADOPT), _rate(three, ADOPT)
    print(
        f"\ncpu: TPOT {math.exp(2 * sd['tpot']) - 1:.0%} faster (2 sd): adopted in {p2:.0%} (2 repeats), {p3:.0%} (3)"
    )
    assert p2 >= 0.5
    assert p3 > p2


def test_the_cpu_spreads_are_the_committed_runs(tmp_path):
    """OBSERVED["cpu"] is what the product pools from the committed quiet CPU run of the embedded default."""
    import re
    from pathlib import Path

    import pandas as pd

    from worthit.config import load
    from worthit.report import build

    root = Path(__file__).resolve().parents[2]
    results = root / "examples" / "embedded-default" / "results"
    report = build.from_dir(load(results / "report" / "config.yaml"), results)
    build.write_all(report, tmp_path / "report", tmp_path / "report.html", {})
    comp = pd.read_parquet(tmp_path / "report" / "comparison.parquet")
    pooled = {}
    for quantity, key in (("TPOT P50", "tpot"), ("TTFT P50", "ttft"), ("TPOT P99", "tpot99"), ("TTFT P99", "ttft99")):
        bases = comp.loc[comp.quantity == quantity, "interval_basis"].dropna()
        sds = {
            float(m[1]) / 100 for b in bases if (m := re.search(r"pooled over \d+ cells?, \d+ df \(sd ([\d.]+)%\)", b))
        }
        assert len(sds) == 1, (quantity, sds)
        pooled[key] = sds.pop()
    assert pooled == pytest.approx(OBSERVED["cpu"], abs=0.0015)

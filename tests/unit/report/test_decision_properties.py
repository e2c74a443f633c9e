"""The decision rules' error rate and power, per verdict, in simulated studies drawn at the spreads real studies
observe (docs/statistics.md, "What the rules promise").

Each simulated study has the embedded default's shape: four load-tested variants at concurrency 1, 4 and 16,
each level measured in ``repeats`` runs, whose figures vary from run to run log-normally with the observed sd:
E2E P50 (judged: the wait a user has), and TTFT and TPOT at P50 and P99 beside it (shown; each counts against
the optimisation only as a harm beyond ``decide.max_harm_pct`` and ``max_harm_ms``). The candidate and the
baseline go through the product's own pipeline: the pool (:func:`worthit.stats.pool_spread`), each level's
measure (:func:`worthit.report.measure.pooled_over_runs`), the comparisons, the simultaneous intervals over the
verdict's judged figures and the verdict (:func:`worthit.report.decide.decide`).

``python tests/unit/report/test_decision_properties.py`` prints the table docs/statistics.md holds; a test checks
that the page holds exactly what the rules give now.
"""

from __future__ import annotations

import functools
import math
from collections import Counter
from pathlib import Path

import numpy as np
import pytest

from worthit.report.decide import ADOPT, BETTER, LATENCY, REJECT, WORSE, Comparison, Evidence, Setting, decide
from worthit.report.measure import pooled_over_runs
from worthit.report.regimes import judge
from worthit.report.rules import Rules
from worthit.stats import SpreadCell, pool_spread

ROOT = Path(__file__).resolve().parents[3]
LEVELS = (1, 4, 16)
VARIANTS = ("baseline", "candidate", "other1", "other2")
QUANTITIES = (
    ("e2e", "E2E P50"),
    ("ttft", "TTFT P50"),
    ("tpot", "TPOT P50"),
    ("ttft99", "TTFT P99"),
    ("tpot99", "TPOT P99"),
)
JUDGED = {"e2e"}  # the rest are shown beside it and count only as harms (docs/verdicts.md, "Harms")
# Run-to-run sd of log(figure) pooled over the repeated load levels of committed runs: a quiet 2-core CPU run
# of the embedded default (examples/embedded-default/results; test_the_cpu_spreads_are_the_committed_runs
# checks them) and the widest of the three lent H100s of examples/h200-qwen/one-machine (h100-prefix-fp8-kv's).
OBSERVED = {
    "cpu": {"e2e": 0.094, "ttft": 0.085, "tpot": 0.158, "ttft99": 0.054, "tpot99": 0.122},
    "h100": {"e2e": 0.159, "ttft": 0.157, "tpot": 0.157, "ttft99": 0.128, "tpot99": 0.144},
}
# Each level's baseline figures in ms, as those runs measured them (concurrency 1, 4, 16).
TYPICAL = {
    "cpu": {
        "e2e": (2100, 2900, 9300),
        "ttft": (350, 1350, 5700),
        "tpot": (57, 51, 115),
        "ttft99": (400, 1700, 7000),
        "tpot99": (70, 65, 150),
    },
    "h100": {
        "e2e": (730, 960, 1500),
        "ttft": (27, 135, 300),
        "tpot": (2.8, 3.3, 4.8),
        "ttft99": (30, 200, 450),
        "tpot99": (3.0, 3.8, 5.5),
    },
}
STUDIES = 300
RULES = Rules()
EFFECTS = {"none": 0.0, "2 sd": 2.0, "3 sd": 3.0}  # the candidate's E2E (and TPOT) faster by this many E2E sds


def simulate(machine: str, effect: float, repeats: int = 2, studies: int = STUDIES, seed: int = 0):
    """(verdict outcomes, per-judged-figure findings) over simulated studies; ``effect``: how many of the E2E's
    run-to-run sds faster the candidate's E2E and TPOT (P50 and P99) are, as a log ratio, at every level (TTFT
    unchanged)."""
    sd, typical = OBSERVED[machine], TYPICAL[machine]
    shift = effect * sd["e2e"]
    rng = np.random.default_rng(seed)
    verdicts: Counter[str] = Counter()
    figures: Counter[str] = Counter()
    for _ in range(studies):
        runs = {
            (v, i, k): tuple(
                typical[k][i]
                * math.exp(-(shift if v == "candidate" and k in ("e2e", "tpot", "tpot99") else 0.0))
                * np.exp(rng.normal(0.0, sd[k], repeats))
            )
            for v in VARIANTS
            for i in range(len(LEVELS))
            for k, _ in QUANTITIES
        }
        pools = {
            k: pool_spread([SpreadCell(f"{v}/{i}", x) for (v, i, kk), x in runs.items() if kk == k])
            for k, _ in QUANTITIES
        }
        comps = []
        for i, c in enumerate(LEVELS):
            for k, q in QUANTITIES:
                b = pooled_over_runs(runs[("baseline", i, k)], 20, pools[k], f"baseline/{i}")
                w = pooled_over_runs(runs[("candidate", i, k)], 20, pools[k], f"candidate/{i}")
                judged = k in JUDGED
                comps.append(Comparison(q, "ms", b, w, False, LATENCY, Setting.concurrency(c), judged, not judged))
        e = Evidence("candidate", comparisons=comps, lossless=True)  # the family: its judged figures
        for comp in e.comparisons:
            if comp.judged:
                figures[judge(comp, RULES)[0]] += 1
        verdicts[decide(e, RULES).outcome] += 1
    return verdicts, figures


def _rate(counter: Counter[str], *keys: str) -> float:
    return sum(counter[k] for k in keys) / sum(counter.values())


def _mc(p: float, n: int) -> float:
    """Two Monte Carlo standard errors of a rate p estimated from n draws."""
    return 2 * math.sqrt(max(p * (1 - p), 1e-4) / n)


@functools.cache
def run(machine: str, effect: str, repeats: int) -> tuple[Counter[str], Counter[str]]:
    return simulate(machine, EFFECTS[effect], repeats)


def table() -> str:
    """The table docs/statistics.md holds, from the rules as they are."""
    lines = [
        "| machine | effect on E2E P50 at every level | per judged figure | verdicts: 2 repeats | 3 repeats |",
        "|---|---|---|---|---|",
    ]
    for machine in OBSERVED:
        sd = OBSERVED[machine]["e2e"]
        for effect, k in EFFECTS.items():
            cells = []
            for repeats in (2, 3):
                verdicts, figures = run(machine, effect, repeats)
                if k == 0:
                    cells.append(f"adopted {_rate(verdicts, ADOPT):.1%}, rejected {_rate(verdicts, REJECT):.1%}")
                else:
                    cells.append(f"adopted {_rate(verdicts, ADOPT):.0%}, rejected {_rate(verdicts, REJECT):.1%}")
            _, figs = run(machine, effect, 2)
            per_fig = f"better {_rate(figs, BETTER):.1%}, worse {_rate(figs, WORSE):.1%}" if k == 0 else ""
            what = "none (one configuration twice)" if k == 0 else f"{effect} ({math.exp(k * sd) - 1:.0%} faster)"
            lines.append(f"| {machine.upper()} | {what} | {per_fig} | {cells[0]} | {cells[1]} |")
    return "\n".join(lines)


@pytest.mark.parametrize("machine", sorted(OBSERVED))
@pytest.mark.parametrize("repeats", [2, 3])
def test_one_configuration_compared_with_itself_is_decided_in_at_most_5_percent_of_studies(machine, repeats):
    verdicts, figures = run(machine, "none", repeats)
    decided = _rate(verdicts, ADOPT, REJECT)
    # per verdict, all judged figures and levels together: the simultaneous intervals hold 95 % together
    assert decided <= 0.05 + _mc(0.05, STUDIES), verdicts
    # per judged figure, each way: at most 2.5 % over the family of three
    n = sum(figures.values())
    assert _rate(figures, BETTER) <= 0.025 / 3 + _mc(0.025 / 3, n)
    assert _rate(figures, WORSE) <= 0.025 / 3 + _mc(0.025 / 3, n)


@pytest.mark.parametrize("machine", sorted(OBSERVED))
def test_twice_the_spread_is_adopted_in_most_studies_with_three_runs(machine):
    three, _ = run(machine, "2 sd", 3)
    two, _ = run(machine, "2 sd", 2)
    assert _rate(three, ADOPT) >= 0.6, three
    assert _rate(three, ADOPT) > _rate(two, ADOPT)  # more runs, more power
    assert _rate(three, REJECT) <= 0.01  # a real benefit is almost never rejected


@pytest.mark.parametrize("machine", sorted(OBSERVED))
def test_three_spreads_are_adopted_in_most_studies_with_two_runs(machine):
    verdicts, _ = run(machine, "3 sd", 2)
    assert _rate(verdicts, ADOPT) >= 0.6, verdicts


def test_the_statistics_page_holds_the_table_the_rules_give():
    page = (ROOT / "docs" / "statistics.md").read_text()
    assert table() in page, "docs/statistics.md: paste `python tests/unit/report/test_decision_properties.py`"


def test_the_cpu_spreads_are_the_committed_runs(tmp_path):
    """OBSERVED["cpu"] is what the product pools from the committed quiet CPU run of the embedded default."""
    import re

    import pandas as pd

    from worthit.config import load
    from worthit.report import build

    results = ROOT / "examples" / "embedded-default" / "results"
    report = build.from_dir(load(results / "report" / "config.yaml"), results)
    build.write_all(report, tmp_path / "report", tmp_path / "report.html", {})
    comp = pd.read_parquet(tmp_path / "report" / "comparison.parquet")
    pooled = {}
    for key, quantity in QUANTITIES:
        bases = comp.loc[comp.quantity == quantity, "interval_basis"].dropna()
        # levels pool by workload (docs/statistics.md): the random-token grid is the largest pool, the one the
        # simulation stands for; a workload with levels of its own (ShareGPT, ending at EOS) pools apart
        pools = {
            (int(m[1]), float(m[2]) / 100)
            for b in bases
            if (m := re.search(r"pooled over (\d+) cells?, \d+ df \(sd ([\d.]+)%\)", b))
        }
        assert pools, quantity
        largest = max(n for n, _ in pools)
        sds = {sd for n, sd in pools if n == largest}
        assert len(sds) == 1, (quantity, pools)
        pooled[key] = sds.pop()
    assert pooled == pytest.approx(OBSERVED["cpu"], abs=0.0015)


if __name__ == "__main__":
    print(table())

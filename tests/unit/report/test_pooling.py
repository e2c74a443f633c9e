"""The run-to-run spread pooled across a study's cells, and exact tests between two small samples
(worthit.stats, worthit.report.measure, worthit.report.decide; docs/statistics.md)."""

from __future__ import annotations

import itertools
import math

import numpy as np
import pytest

from worthit.report.decide import ADOPT, BETTER, INCONCLUSIVE, UNDETERMINED, Comparison, Setting
from worthit.report.measure import SINGLE_RUN, over_runs, pooled_over_runs, quantile, ratio
from worthit.report.pooling import Cell, pools_of
from worthit.report.regimes import judge, setting_outcome
from worthit.report.rules import Rules
from worthit.stats import (
    SpreadCell,
    hodges_lehmann_log_ratio,
    mann_whitney_null,
    pool_spread,
    t_95,
    values_for_exact_coverage,
)

RULES = Rules()


# --- the pool ---------------------------------------------------------------------------------------
def test_the_pool_is_the_df_weighted_mean_of_the_cells_log_variances():
    cells = [SpreadCell("a", (10.0, 11.0)), SpreadCell("b", (20.0, 19.0, 21.5)), SpreadCell("c", (5.0, 5.2))]
    p = pool_spread(cells)
    assert p is not None
    logs = [np.log(c.values) for c in cells]
    expect = sum((len(x) - 1) * np.var(x, ddof=1) for x in logs) / sum(len(x) - 1 for x in logs)
    assert p.var_log == pytest.approx(expect)
    assert p.df == 1 + 2 + 1 and p.cells == ("a", "b", "c") and not p.outliers
    assert "pooled over 3 cells, 4 df" in p.describe()


def test_a_cell_far_outside_the_pool_keeps_its_own_spread_and_says_why():
    rng = np.random.default_rng(1)
    cells = [SpreadCell(f"c{i}", tuple(100 * np.exp(rng.normal(0, 0.02, 3)))) for i in range(12)]
    wild = SpreadCell("wild", (100.0, 180.0, 60.0))
    p = pool_spread([*cells, wild])
    assert p is not None and p.outliers == ("wild",) and "wild" not in p.cells and p.df == 24
    m = pooled_over_runs(wild.values, 30, p, "wild")
    assert m.pool is None and "own run-to-run spread" in m.basis and "F test" in m.basis
    # an ordinary cell rests on the pool: 24 df, not its own 2
    ok = pooled_over_runs(cells[0].values, 30, p, "c0")
    assert ok.pool is p and ok.df == 24 and "pooled over 12 cells, 24 df" in ok.basis


def test_one_cell_is_no_pool_and_cells_need_a_machine():
    assert pool_spread([SpreadCell("a", (1.0, 2.0))]) is None
    pools = pools_of([Cell(None, "ttft_p50", "a", (1.0, 1.1)), Cell(None, "ttft_p50", "b", (2.0, 2.1))])
    assert not pools.by  # a cell whose machine is unknown (or spans machines) is pooled with nothing
    pools = pools_of([Cell("m1", "ttft_p50", "a", (1.0, 1.1)), Cell("m1", "ttft_p50", "b", (2.0, 2.1))])
    assert set(pools.by) == {("m1", "ttft_p50")} and pools.for_quantity("m1", "TTFT P50 (shared prefix)")
    assert pools.for_quantity("m2", "TTFT P50") is None


def test_two_runs_decide_on_the_pools_degrees_of_freedom_where_their_own_one_cannot():
    # the chat level of a CPU run: TTFT P50 -68 % from 2 runs a side
    without, with_ = (1500.0, 1800.0), (520.0, 560.0)
    own = Comparison("TTFT P50", "ms", over_runs(without, 40), over_runs(with_, 40), False)
    assert judge(own, RULES)[0] == UNDETERMINED  # t on 1 df = 12.7: the interval cannot exclude anything
    rng = np.random.default_rng(0)
    cells = [SpreadCell(f"c{i}", tuple(300 * np.exp(rng.normal(0, 0.08, 2)))) for i in range(20)]
    p = pool_spread([*cells, SpreadCell("wo", without), SpreadCell("w", with_)])
    assert p is not None and p.df == 22
    pooled = Comparison(
        "TTFT P50", "ms", pooled_over_runs(without, 40, p, "wo"), pooled_over_runs(with_, 40, p, "w"), False
    )
    finding, why = judge(pooled, RULES)
    assert finding == BETTER, why
    imp = pooled.improvement
    # the ratio's interval is a t-interval on the pool's 22 df with the two means' pooled standard errors
    se = p.sd_log * math.sqrt(1 / 2 + 1 / 2)
    assert imp.df == 22 and imp.high / imp.low == pytest.approx(math.exp(2 * t_95(22) * se))
    assert imp.basis.startswith("2 runs; run-to-run spread pooled over 22 cells, 22 df")


# --- two small samples --------------------------------------------------------------------------------
@pytest.mark.parametrize(("m", "n"), [(1, 1), (2, 3), (4, 4), (3, 5)])
def test_the_mann_whitney_null_distribution_is_exact(m, n):
    counts = np.zeros(m * n + 1)
    for first in itertools.combinations(range(m + n), m):
        u = sum(1 for i in first for j in range(m + n) if j not in first and j < i)
        counts[u] += 1
    assert mann_whitney_null(m, n) == pytest.approx(tuple(counts / counts.sum()))


def test_four_against_four_values_reach_97_percent_and_three_against_three_only_90():
    ex = hodges_lehmann_log_ratio([10120, 9800, 10400, 10050], [519, 505, 540, 530])
    assert ex is not None and ex.reaches and ex.coverage == pytest.approx(1 - 2 / 70)
    assert 18 < ex.low < ex.estimate < ex.high < 21  # the smallest and largest of the 16 pairwise ratios
    small = hodges_lehmann_log_ratio([3.0, 4.0, 5.0], [1.0, 2.0, 2.5])
    assert small is not None and not small.reaches and small.coverage == pytest.approx(0.9)
    assert values_for_exact_coverage(0.95) == 4 and values_for_exact_coverage(0.99) == 5


def test_the_exact_intervals_coverage_holds_in_simulation():
    rng = np.random.default_rng(3)
    hits = 0
    trials = 4000
    for _ in range(trials):
        a = np.exp(rng.normal(math.log(2.0), 0.3, 4))
        b = np.exp(rng.normal(0.0, 0.3, 4))
        ex = hodges_lehmann_log_ratio(list(a), list(b))
        assert ex is not None
        hits += ex.low <= 2.0 <= ex.high
    assert hits / trials >= 1 - 2 / 70 - 3 * math.sqrt(0.03 * 0.97 / trials)


def _prefix_sides(k: int) -> tuple[list[float], list[float]]:
    off = [10120.0, 9870.0, 10400.0, 10005.0, 9950.0][:k]
    on = [519.0, 507.0, 530.0, 542.0, 525.0][:k]
    return off, on


def test_a_factor_of_19_from_4_requests_a_side_is_decided_with_the_pooled_spread():
    off, on = _prefix_sides(4)
    b, v = quantile(off, 0.5), quantile(on, 0.5)
    assert b.interval() is None and v.interval() is None  # 4 values cannot bound a median at 95 %
    s = Setting.prefix(1024)
    alone = Comparison("TTFT P50 (shared prefix)", "ms", b, v, False, setting=s)
    finding, why = judge(alone, RULES)
    assert finding == BETTER and "exact Mann-Whitney interval, 4 vs 4 values, 97.1% coverage" in why
    # a single run alone never settles: run-to-run variation is not in it
    out = setting_outcome(s, [alone], [], RULES)
    assert out.outcome == INCONCLUSIVE and out.leaning == ADOPT
    # with the study's pooled run-to-run spread of TTFT on that machine it does
    rng = np.random.default_rng(0)
    pool = pool_spread([SpreadCell(f"c{i}", tuple(300 * np.exp(rng.normal(0, 0.15, 2)))) for i in range(14)])
    assert pool is not None
    widened = Comparison("TTFT P50 (shared prefix)", "ms", b, v, False, setting=s, run_spread=pool)
    imp = widened.improvement
    assert imp.basis.startswith(f"{SINGLE_RUN}; run-to-run spread pooled over 14 cells, 14 df")
    assert imp.low < alone.improvement.low and imp.high > alone.improvement.high  # wider, never narrower
    assert setting_outcome(s, [widened], [], RULES).outcome == ADOPT


def test_three_values_a_side_say_what_coverage_they_have_and_what_would_give_95():
    off, on = _prefix_sides(3)
    c = Comparison("TTFT P50 (shared prefix)", "ms", quantile(off, 0.5), quantile(on, 0.5), False)
    finding, why = judge(c, RULES)
    assert finding == UNDETERMINED
    assert "3 vs 3 values: an exact interval covers at most 90%; 4 values a side give 95%" in why


def test_an_exact_ratio_of_two_full_intervals_is_unchanged():
    a, b = quantile(list(range(100, 140)), 0.5), quantile(list(range(200, 240)), 0.5)
    assert ratio(a, b).interval() is not None
    c = Comparison("TTFT P50", "ms", b, a, False)
    assert c.improvement.method == ""


def _write_level(path, ttfts, meta):
    from worthit import schemas
    from worthit.experiments.loadtest.tables import LOAD_REQUESTS

    for i, ttft in enumerate(ttfts):
        rows = [
            {
                "variant": "baseline",
                "concurrency": meta["concurrency"],
                "request_id": r,
                "success": True,
                "start_s": float(r),
                "ttft_ms": ttft * (1 + 0.01 * r),
                "e2e_ms": ttft * 3,
                "output_tokens": 8,
                "prompt_tokens": 32,
                "itl_ms": [5.0] * 7,
            }
            for r in range(4)
        ]
        name = path if i == 0 else path.with_name(path.stem + f".rep~{i + 1}.parquet")
        schemas.write(name, LOAD_REQUESTS, rows, metadata={**meta, "repeat": i + 1, "hardware": {"host": "box"}})


def test_a_level_whose_replies_end_at_eos_pools_apart_from_the_fixed_length_levels(tmp_path):
    """A ShareGPT level ending at EOS varies with its replies' lengths: its spread must not widen the grid's."""
    import yaml

    from tests.conftest import ROOT
    from worthit.config import Study, validate
    from worthit.experiments.loadtest.report import analyse
    from worthit.report.context import Context
    from worthit.report.data import load_dir

    load = tmp_path / "variant~baseline" / "load"
    for c in (1, 4):
        _write_level(load / f"conc~{c}.parquet", [100.0, 104.0], {"concurrency": c, "ignore_eos": True})
    for c, ttfts in ((1, [100.0, 300.0]), (4, [300.0, 100.0])):
        eos = {"concurrency": c, "level_kind": "conc", "level_workload": "sharegpt", "level": f"sharegpt/conc~{c}"}
        eos.update(workload_name="sharegpt", ignore_eos=False)
        _write_level(load / "sharegpt" / f"conc~{c}.parquet", ttfts, eos)
    cfg = validate(yaml.safe_load((ROOT / "tests" / "fixtures" / "embedded-default" / "config.yaml").read_text()), "t")
    pools = analyse(Context.of(Study(cfg), load_dir(tmp_path))).pools
    grid, apart = pools.get("box", "ttft_p50"), pools.get("box|workload=sharegpt", "ttft_p50")
    assert grid is not None and apart is not None
    assert len(grid.cells) == 2 and len(apart.cells) == 2
    assert grid.var_log < 0.05**2 < apart.var_log  # 4 % between the grid's runs, a factor of 3 on the EOS level

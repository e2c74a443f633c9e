"""The column-wise aggregation gives exactly the figures the row-by-row one gave.

Oracles: the summary committed with the recorded study (tests/fixtures/embedded-default/summary.parquet,
written by the row-by-row implementation) and that implementation itself, kept as the aggregation
benchmark's reference (benchmarks/aggregation/reference.py).
"""

import dataclasses
import importlib.util
import math
import random
import sys
from pathlib import Path

import numpy as np
import pyarrow.parquet as pq
import pytest
import yaml

from worthit import metrics, schemas, stats
from worthit.aggregate import summary_rows
from worthit.experiments.loadtest.tables import ENERGY_COLUMNS, LOAD_REQUESTS, SUMMARY
from worthit.loadgen.levels import SUMMARY_COLUMNS
from worthit.metrics import Slo, bootstrap_ratio_ci95, summarize

ROOT = Path(__file__).resolve().parents[2]
FIXTURE = ROOT / "tests" / "fixtures" / "embedded-default"


def _reference():
    spec = importlib.util.spec_from_file_location("aggregation_reference", ROOT / "benchmarks/aggregation/reference.py")
    assert spec and spec.loader
    module = importlib.util.module_from_spec(spec)
    sys.modules[spec.name] = module  # dataclasses look their module up
    spec.loader.exec_module(module)
    return module


reference = _reference()
REPETITION = ("repeated_ngram_share_p50", "looping_share")  # summary columns newer than the recorded study
ENERGY = tuple(c.name for c in ENERGY_COLUMNS)  # newer too: the recorded levels say energy was not recorded


def _fixture_inputs():
    cfg = yaml.safe_load((FIXTURE / "config.yaml").read_text())
    kv = {v: str(FIXTURE / f"variant~{v}" / "kv.parquet") for v in cfg["variants"]}
    load = {v: sorted(str(p) for p in (FIXTURE / f"variant~{v}" / "load").glob("*.parquet")) for v in cfg["variants"]}
    return kv, load, Slo(**cfg["slo"])


def test_summary_of_the_recorded_study_is_the_committed_one():
    kv, load, slo = _fixture_inputs()
    committed = pq.read_table(FIXTURE / "summary.parquet").to_pylist()
    columns = committed[0].keys()  # the file predates the run column, the open-loop level columns and repetition
    assert set(columns) >= set(SUMMARY.columns) - {"run", *SUMMARY_COLUMNS, *REPETITION, *ENERGY}
    rows = [{k: r.get(k) for k in columns} for r in summary_rows(kv, load, slo)]
    assert len(rows) == len(committed) == 6
    assert rows == committed  # exact: every percentile, rate and count to the bit


def test_summary_rows_equal_the_reference_on_the_recorded_study():
    kv, load, slo = _fixture_inputs()
    rows = summary_rows(kv, load, slo)
    # the reference predates the responses' repetition, which the recorded study's requests lack (null)
    assert all(r[k] is None for r in rows for k in REPETITION)
    assert all(r["energy_j"] is None and r["energy_reason"] for r in rows if r.get("n"))
    kept = [{k: v for k, v in r.items() if k not in (*REPETITION, *ENERGY)} for r in rows]
    assert kept == reference.summary_rows(kv, load, slo)


def test_every_recorded_level_summarises_as_the_reference_did_to_the_bit():
    _, load, slo = _fixture_inputs()
    for path in (p for paths in load.values() for p in paths):
        table = schemas.read(path, LOAD_REQUESTS).table
        new = dataclasses.asdict(summarize(table, slo))
        assert new == dataclasses.asdict(reference.summarize(table.to_pylist(), slo)), path
        assert new == dataclasses.asdict(summarize(table.to_pylist(), slo)), path  # rows and table agree
        assert new["itl_ms"]["n"] > 0 and new["ttft_ms"]["ci95_low"] is not None


def _record(rng: random.Random, i: int) -> dict:
    """A request as the load generator records it, with every irregularity a level can hold."""
    ok = rng.random() > 0.2
    tokens = rng.choice([0, 1, 2, 5, 17]) if ok else 0
    ttft = rng.choice([None, math.nan, rng.uniform(5, 900)]) if rng.random() < 0.1 else rng.uniform(5, 900)
    # a NaN TTFT (not None) is kept as a value; the request's end stays a number (a NaN end has no defined
    # maximum: Python's max() depended on where it stood)
    t0 = 100.0 if ttft is None or math.isnan(ttft) else ttft
    e2e = None if ttft is None or (not ok and rng.random() < 0.7) else (t0 if tokens < 2 else t0 + 300 * rng.random())
    return {
        "variant": "v",
        "concurrency": 4,
        "request_id": i,
        "start_s": rng.uniform(0, 3),
        "output_tokens": rng.choice([tokens, None]) if ok and rng.random() < 0.05 else tokens,
        "ttft_ms": ttft,
        "e2e_ms": e2e,
        "tpot_ms": metrics.tpot_ms(ttft, e2e, tokens) if ok else None,
        "itl_ms": rng.choice([None, [], [rng.uniform(1, 80) for _ in range(max(tokens - 1, 0))]]),
        "success": ok,
        "error": None if ok else rng.choice([None, "timeout", "HTTP 500: " + "x" * 200]),
    }


@pytest.mark.parametrize("seed", range(12))
def test_irregular_levels_summarise_as_the_reference_did(seed):
    rng = random.Random(seed)
    records = [_record(rng, i) for i in range(rng.choice([0, 1, 3, 7, 40, 300]))]
    slo = rng.choice([Slo(), Slo(ttft_ms=400), Slo(ttft_ms=600, tpot_ms=10, e2e_ms=800)])
    expected = dataclasses.asdict(reference.summarize(records, slo))
    assert dataclasses.asdict(summarize(records, slo)) == expected
    table = schemas.to_arrow(LOAD_REQUESTS, records)
    assert dataclasses.asdict(summarize(table, slo)) == expected


@pytest.mark.parametrize("seed", range(4))
def test_slo_mask_is_the_per_request_rule(seed):
    rng = random.Random(100 + seed)
    records = [_record(rng, i) for i in range(200)]
    for slo in (Slo(), Slo(ttft_ms=300), Slo(tpot_ms=5), Slo(ttft_ms=500, tpot_ms=8, e2e_ms=700)):
        expected = [slo.met(r) for r in records]
        assert slo.met_mask(records).tolist() == expected
        assert slo.met_mask(schemas.to_arrow(LOAD_REQUESTS, records)).tolist() == expected


def _full_sum_ranks(n: int, q: float) -> tuple[int, int]:
    """The order-statistic ranks from the binomial CDF summed over all n + 1 terms (the reference)."""
    cdf = reference._binom_cdf(n, q)
    r = 0
    while r < n and cdf[r] <= 0.025:
        r += 1
    u = n + 1
    while u > 1 and 1 - cdf[u - 2] <= 0.025:
        u -= 1
    return r, u


@pytest.mark.parametrize("q", [0.01, 0.25, 0.5, 0.9, 0.99, 0.999])
def test_windowed_binomial_ranks_are_the_full_sums(q):
    for n in [*range(6, 260), 1000, 4321, 30000]:
        assert stats.order_ranks(n, q) == _full_sum_ranks(n, q), n


def test_quantile_interval_picks_the_sorted_order_statistics():
    rng = np.random.default_rng(3)
    for n in (6, 7, 50, 1001):
        values = rng.lognormal(3, 1, n)
        for q in (0.5, 0.9, 0.99):
            assert stats.quantile_ci95(values, q) == reference.quantile_ci95(values.tolist(), q)


def test_bootstrap_in_blocks_is_the_bootstrap_drawn_at_once(monkeypatch):
    rng = np.random.default_rng(5)
    num, den = rng.integers(1, 300, 997).astype(float), rng.uniform(0.5, 9, 997)
    idx = np.random.default_rng(11).integers(0, num.size, size=(200, num.size))
    boot = num[idx].sum(axis=1) / den[idx].sum(axis=1)
    expected = tuple(np.percentile(boot / (num.sum() / den.sum()), [2.5, 97.5]))
    monkeypatch.setattr(metrics, "BOOTSTRAP_BLOCK_VALUES", 3 * num.size + 1)  # blocks of 3 resamples
    assert bootstrap_ratio_ci95(num, den, resamples=200, seed=11) == pytest.approx(expected, rel=0, abs=0)
    lo, hi = expected
    assert lo < 1 < hi


def test_bootstrap_has_no_interval_without_a_positive_ratio():
    assert bootstrap_ratio_ci95([], []) is None
    assert bootstrap_ratio_ci95([0.0, 0.0], [1.0, 2.0]) is None

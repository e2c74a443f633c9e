"""Prefix-caching analysis: TTFT reduction, hit rate, slope of TTFT against prefix length."""

from __future__ import annotations

import pytest

from worthit.experiments.prefix.analysis import other_side, reduction_pct
from worthit.experiments.prefix.measure import summary_rows
from worthit.prom import hit_rate
from worthit.stats import slope


def test_hit_rate_is_hit_tokens_over_queried_tokens():
    assert hit_rate({"vllm:prefix_cache_queries_total": 1000, "vllm:prefix_cache_hits_total": 992}) == 0.992
    assert hit_rate({}) is None


def test_reduction_is_relative_to_the_cache_off_reference():
    assert reduction_pct(113.4, 38.3) == pytest.approx(66.2, abs=0.1)
    assert reduction_pct(None, 1.0) is None and reduction_pct(0.0, 1.0) is None


def test_slope_is_least_squares_and_skips_missing_points():
    assert slope([0, 1000, 2000], [10.0, 20.0, 30.0]) == pytest.approx(0.01)
    assert slope([0, 1000, 2000], [10.0, None, 30.0]) == pytest.approx(0.01)
    assert slope([1000], [5.0]) is None


def _row(variant, on, n, p50, status="ok"):
    return {
        "variant": variant,
        "status": status,
        "reason": None if status == "ok" else "exited",
        "prefix_caching": on,
        "prefix_tokens": n,
        "ttft_ms_p50": p50,
        "ttft_ms_p99": p50 and p50 * 1.1,
    }


def test_cache_on_rows_are_compared_with_the_cache_off_variant_length_by_length():
    rows = summary_rows(
        [
            _row("on", True, 0, 30.0),
            _row("on", True, 1500, 27.7),
            _row("on", True, 4000, 38.3),
            _row("off", False, 0, 30.0),
            _row("off", False, 1500, 50.8),
            _row("off", False, 4000, 113.4),
        ]
    )
    on = {r["prefix_tokens"]: r for r in rows if r["variant"] == "on"}
    assert on[4000]["reference_variant"] == "off"
    assert on[4000]["ttft_p50_reduction_pct"] == pytest.approx(66.2, abs=0.1)
    assert on[1500]["ttft_p50_reduction_pct"] == pytest.approx(45.5, abs=0.1)
    assert on[0]["slope_reduction_pct"] > 80
    off = [r for r in rows if r["variant"] == "off"]
    assert all(r.get("reference_variant") is None for r in off)
    assert off[0]["ttft_slope_ms_per_1k_tokens"] == pytest.approx(slope([0, 1500, 4000], [30.0, 50.8, 113.4]) * 1000)


def test_a_failed_length_stays_a_row_and_is_left_out_of_the_slope():
    rows = summary_rows(
        [_row("on", True, 0, 10.0), _row("on", True, 100, 11.0), _row("on", True, 200, None, status="failed")]
    )
    assert [r["status"] for r in rows] == ["ok", "ok", "failed"]
    assert rows[0]["ttft_slope_ms_per_1k_tokens"] == pytest.approx(10.0)


def test_the_other_side_is_the_first_variant_measured_at_that_length_with_the_cache_the_other_way():
    measured = [("on", True, 0), ("on", True, 512), ("off_a", False, 0), ("off_b", False, 0), ("off_b", False, 512)]
    assert other_side(measured, 0, cache_on=True) == "off_a"  # the first cache-off variant, in study order
    assert other_side(measured, 512, cache_on=True) == "off_b"  # off_a has no 512: the next one that does
    assert other_side(measured, 512, cache_on=False) == "on"
    assert other_side([("on", True, 0)], 0, cache_on=True) is None


def test_the_summary_and_the_report_compare_with_the_same_other_side():
    """One rule for both analyses of the measurement (the summary's reference_variant is the report's)."""
    rows = summary_rows(
        [
            _row("on", True, 0, 30.0),
            _row("on", True, 512, 20.0),
            _row("off_a", False, 0, 31.0),
            _row("off_b", False, 0, 32.0),
            _row("off_b", False, 512, 60.0),
        ]
    )
    on = {r["prefix_tokens"]: r for r in rows if r["variant"] == "on"}
    assert (on[0]["reference_variant"], on[512]["reference_variant"]) == ("off_a", "off_b")
    assert on[512]["ref_ttft_ms_p50"] == 60.0

import math

import pytest

from worthit.metrics import Slo, Stat, median_ci95, percentile, summarize, tpot_ms


def rec(start_s, ttft, e2e, tokens, itl=(), success=True, error=None):
    return {
        "start_s": start_s,
        "ttft_ms": ttft,
        "e2e_ms": e2e,
        "output_tokens": tokens,
        "tpot_ms": tpot_ms(ttft, e2e, tokens) if success else None,
        "itl_ms": list(itl),
        "success": success,
        "error": error,
    }


def test_tpot_excludes_first_token():
    # 10 tokens: first at 100 ms, last at 190 ms -> 9 gaps of 10 ms
    assert tpot_ms(100.0, 190.0, 10) == pytest.approx(10.0)


def test_tpot_undefined_for_single_output_token():
    assert tpot_ms(50.0, 50.0, 1) is None


def test_tpot_undefined_when_every_token_arrived_with_the_first():
    assert tpot_ms(50.0, 50.0, 16) is None and tpot_ms(50.0, 50.0001, 2) == pytest.approx(0.0001)


def test_tpot_uses_usage_tokens_not_chunks_under_multi_token_chunks():
    # spec decode: 3 chunks carried 9 tokens; TPOT divides by tokens - 1, not chunks - 1
    assert tpot_ms(20.0, 100.0, 9) == pytest.approx(10.0)


def test_percentile_interpolates_linearly():
    assert percentile([1.0, 2.0, 3.0, 4.0], 50) == pytest.approx(2.5)
    assert percentile([0.0, 10.0], 99) == pytest.approx(9.9)
    assert percentile([], 50) is None


def test_stat_carries_sample_size_and_ignores_missing():
    s = Stat.of([1.0, None, 3.0])
    assert s.n == 2 and s.mean == 2.0 and s.p50 == 2.0


def test_median_ci_needs_six_samples_and_brackets_the_median():
    assert median_ci95([1, 2, 3]) == (None, None)
    vals = list(range(100))
    lo, hi = median_ci95(vals)
    assert lo < 49.5 < hi
    assert lo >= 35 and hi <= 65


def test_summarize_counts_errors_and_excludes_them_from_latency():
    recs = [rec(0.0, 100, 190, 10, itl=[10] * 9), rec(0.0, None, None, 0, success=False, error="HTTP 500: x")]
    s = summarize(recs)
    assert s.n == 2 and s.n_errors == 1
    assert s.ttft_ms.n == 1 and s.ttft_ms.p50 == 100
    assert s.errors == {"HTTP 500: x": 1}


def test_throughput_counts_output_tokens_over_first_start_to_last_end():
    recs = [rec(0.0, 100, 1000, 10), rec(1.0, 100, 1000, 30)]  # ends at 1.0 s and 2.0 s
    s = summarize(recs)
    assert s.duration_s == pytest.approx(2.0)
    assert s.output_tok_per_s == pytest.approx(20.0)
    assert s.requests_per_s == pytest.approx(1.0)


def test_goodput_counts_only_requests_meeting_every_slo():
    # the 2nd misses the TTFT SLO, the 3rd the TPOT one (100 ms)
    recs = [rec(0.0, 100, 190, 10), rec(0.0, 500, 590, 10), rec(0.0, 100, 1000, 10)]
    s = summarize(recs, Slo(ttft_ms=200, tpot_ms=50))
    assert s.goodput_requests_per_s == pytest.approx(1 / s.duration_s)
    assert s.goodput_tok_per_s == pytest.approx(10 / s.duration_s)


def test_slo_single_token_request_has_no_tpot_to_violate():
    assert Slo(tpot_ms=1).met(rec(0.0, 10, 10, 1))
    assert not Slo(ttft_ms=5).met(rec(0.0, 10, 10, 1))


def test_failed_request_never_meets_slo():
    assert not Slo().met(rec(0.0, None, None, 0, success=False))


def test_summarize_of_nothing_has_no_rates():
    s = summarize([])
    assert s.n == 0 and s.output_tok_per_s is None and math.isnan(float("nan"))

"""The real client against the calibration server, configured to emit each case a metric must handle.

These check what the client records (correctness, with generous timing tolerance); how fast and how
exact it is under load is measured by benchmarks/loadgen_fidelity, not here.
"""

from __future__ import annotations

import asyncio
from typing import Any

import pytest

from tests.unit.loadgen_server import ITL_MS, TTFT_MS, calibration_server  # noqa: F401  (fixture)
from worthit.loadgen.calibration import Timing
from worthit.loadgen.client import ClientConfig, RequestSpec, closed_loop, open_loop, run
from worthit.metrics import summarize


def one(
    url: str,
    max_tokens: int = 8,
    endpoint: str = "completions",
    fast: bool = True,
    timeout_s: float = 30.0,
    **calibration: Any,
) -> dict[str, Any]:
    cfg = ClientConfig(
        base_url=url,
        model="calibration",
        endpoint=endpoint,
        request_timeout_s=timeout_s,
        extra_body={"calibration": calibration} if calibration else {},
        fast=fast,
    )
    res = asyncio.run(closed_loop(cfg, [RequestSpec("hello", 1, max_tokens)], 1))
    assert len(res.records) == 1
    return res.rows()[0]


@pytest.mark.parametrize("fast", [True, False], ids=["protocol", "aiohttp"])
@pytest.mark.parametrize("endpoint", ["completions", "chat"])
def test_ttft_tpot_and_itl_match_the_servers_schedule(server: str, endpoint: str, fast: bool) -> None:
    r = one(server, max_tokens=16, endpoint=endpoint, fast=fast)
    assert r["success"] and r["error"] is None
    assert r["output_tokens"] == 16 and r["chunks"] == 16 and len(r["itl_ms"]) == 15
    assert TTFT_MS <= r["ttft_ms"] < TTFT_MS + 40
    assert r["tpot_ms"] == pytest.approx(ITL_MS, abs=1.0)
    assert r["e2e_ms"] == pytest.approx(r["ttft_ms"] + 15 * r["tpot_ms"])


def test_single_output_token_has_ttft_and_e2e_but_no_tpot(server: str) -> None:
    r = one(server, max_tokens=1)
    assert r["success"] and r["output_tokens"] == 1 and r["chunks"] == 1
    assert r["tpot_ms"] is None and r["itl_ms"] == []
    assert r["e2e_ms"] == r["ttft_ms"]


def test_multi_token_chunks_count_tokens_from_usage_not_chunks(server: str) -> None:
    r = one(server, max_tokens=12, tokens_per_chunk=4)  # 3 chunks, 12 tokens (speculative decoding)
    assert r["success"] and r["chunks"] == 3 and r["output_tokens"] == 12
    # (e2e - ttft) spans 2 chunk gaps of ITL_MS; TPOT divides it by 11 tokens, not 2 chunks
    assert r["tpot_ms"] == pytest.approx(2 * ITL_MS / 11, abs=0.5)
    assert Timing(itl_ms=ITL_MS, tokens_per_chunk=4).true_tpot_ms(12) == pytest.approx(2 * ITL_MS / 11)


def test_empty_chunks_are_neither_tokens_nor_timed(server: str) -> None:
    # an empty chunk arrives at once (like chat's role chunk), and one before every later content chunk
    r = one(server, max_tokens=6, empty_chunks=True)
    assert r["success"] and r["chunks"] == 6 and r["output_tokens"] == 6
    assert r["ttft_ms"] >= TTFT_MS  # the immediate empty chunk did not count as the first token


def test_usage_only_final_chunk_is_not_a_token_and_provides_counts(server: str) -> None:
    r = one(server, max_tokens=5)
    assert r["chunks"] == 5 and r["output_tokens"] == 5 and r["prompt_tokens_reported"] == 1
    assert len(r["itl_ms"]) == 4  # no gap was added for the usage chunk


def test_without_usage_tokens_fall_back_to_chunks(server: str) -> None:
    r = one(server, max_tokens=5, usage="none")
    assert r["success"] and r["output_tokens"] == 5 and r["prompt_tokens_reported"] is None


@pytest.mark.parametrize("fast", [True, False], ids=["protocol", "aiohttp"])
@pytest.mark.parametrize(
    "fail, reason",
    [
        ("http500", "HTTP 500"),
        ("stream_error", "server error in stream"),
        ("truncate", "connection lost mid-response"),
        ("no_content", "stream ended without content"),
    ],
)
def test_errored_request_is_recorded_with_its_reason(server: str, fail: str, reason: str, fast: bool) -> None:
    r = one(server, max_tokens=6, fail=fail, fast=fast)
    assert not r["success"]
    assert reason in r["error"]
    assert r["tpot_ms"] is None


def test_timeout_is_recorded_not_raised(server: str) -> None:
    r = one(server, max_tokens=4, ttft_ms=3000, timeout_s=0.3)
    assert not r["success"] and r["error"].startswith("timeout after 0.3s")


def test_wrong_output_length_is_a_failure_under_ignore_eos(server: str) -> None:
    cfg = ClientConfig(base_url=server, model="m", extra_body={"max_tokens": 3})  # server sends 3
    rec = asyncio.run(closed_loop(cfg, [RequestSpec("x", 1, 5)], 1)).records[0]
    assert not rec.success and rec.error == "expected 5 output tokens, got 3"


def test_errors_are_counted_in_the_summary_not_dropped(server: str) -> None:
    cfg = ClientConfig(base_url=server, model="m")
    bad = ClientConfig(base_url=server, model="m", extra_body={"calibration": {"fail": "http500"}})
    ok = asyncio.run(closed_loop(cfg, [RequestSpec("x", 1, 4)] * 3, 2)).rows()
    failed = asyncio.run(closed_loop(bad, [RequestSpec("x", 1, 4)], 1)).rows()
    s = summarize(ok + failed)
    assert s.n == 4 and s.n_errors == 1 and s.ttft_ms.n == 3


def test_closed_loop_keeps_concurrency_and_records_every_request(server: str) -> None:
    cfg = ClientConfig(base_url=server, model="m")
    res = asyncio.run(closed_loop(cfg, [RequestSpec("x", 1, 8)] * 16, 8))
    assert [r.request_id for r in res.records] == list(range(16))
    s = summarize(res.rows())
    assert s.n_errors == 0 and s.ttft_ms.n == 16
    assert s.ttft_ms.p50 == pytest.approx(TTFT_MS, rel=0.5)
    assert s.tpot_ms.p50 == pytest.approx(ITL_MS, rel=0.25)
    # 8 in flight: two waves of requests, so the second wave starts after the first ends
    starts = sorted(r["start_s"] for r in res.rows())
    assert starts[7] < starts[8]


def test_duration_bounded_closed_loop_stops_starting_requests_at_the_deadline(server: str) -> None:
    cfg = ClientConfig(base_url=server, model="m")
    res = asyncio.run(closed_loop(cfg, [RequestSpec("x", 1, 4)] * 2, 2, duration_s=0.3))
    assert len(res.records) >= 4  # cycled through the two specs
    assert len({r.request_id for r in res.records}) == len(res.records)
    assert all(r.start_ns - res.t0_ns < 0.3e9 + 0.05e9 for r in res.records)
    assert all(r.success for r in res.records)


def test_open_loop_records_every_arrival(server: str) -> None:
    cfg = ClientConfig(base_url=server, model="m")
    res = asyncio.run(open_loop(cfg, [RequestSpec("x", 1, 4)] * 10, rate_per_s=200, seed=1))
    assert len(res.records) == 10 and all(r.success for r in res.records)


def test_worker_processes_merge_their_records(server: str) -> None:
    cfg = ClientConfig(base_url=server, model="m")
    res = run(cfg, [RequestSpec("x", 1, 4)] * 12, concurrency=4, processes=2)
    assert res.processes == 2
    assert [r.request_id for r in res.records] == list(range(12))
    assert all(r.success for r in res.records)
    assert max(r.start_ns for r in res.records) - res.t0_ns < 5e9  # one clock across processes

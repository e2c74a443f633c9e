"""The real client against the calibration server, configured to emit each case a metric must handle.

These check what the client records (correctness, with generous timing tolerance); how fast and how
exact it is under load is measured by benchmarks/loadgen_fidelity, not here.
"""

from __future__ import annotations

import asyncio
import json
import os
import signal
import time
import urllib.request
from pathlib import Path
from typing import Any

import pytest

from tests.unit.loadgen_server import (  # noqa: F401  (fixture)
    ITL_MS,
    TTFT_MS,
    calibration_server,
    running_calibration_server,
)
from worthit.loadgen import transports
from worthit.loadgen.client import ClientConfig, RequestRecord, RequestSpec, closed_loop, open_loop, run, sessions_loop
from worthit.loadgen.sse import SseTimer
from worthit.metrics import summarize
from worthit.testing.calibration import Timing


def one(
    url: str,
    max_tokens: int = 8,
    endpoint: str = "completions",
    fast: bool = True,
    timeout_s: float = 30.0,
    request_id_prefix: str | None = None,
    **calibration: Any,
) -> dict[str, Any]:
    cfg = ClientConfig(
        base_url=url,
        model="calibration",
        endpoint=endpoint,
        request_timeout_s=timeout_s,
        extra_body={"calibration": calibration} if calibration else {},
        fast=fast,
        request_id_prefix=request_id_prefix,
    )
    res = asyncio.run(closed_loop(cfg, [RequestSpec("hello", 1, max_tokens)], 1))
    assert len(res.records) == 1
    return res.rows()[0]


def server_records(url: str, prefix: str) -> list[dict[str, Any]]:
    with urllib.request.urlopen(f"{url}/stats/requests?prefix={prefix}", timeout=10) as r:
        return list(json.loads(r.read())["requests"])


@pytest.mark.parametrize("fast", [True, False], ids=["protocol", "aiohttp"])
@pytest.mark.parametrize("endpoint", ["completions", "chat"])
def test_ttft_tpot_and_itl_match_the_servers_schedule(server: str, endpoint: str, fast: bool) -> None:
    r = one(server, max_tokens=16, endpoint=endpoint, fast=fast)
    assert r["success"] and r["error"] is None
    # chat: vLLM's role-only chunk comes with the first token and is timed as vllm bench serve times it
    chunks = 16 + (endpoint == "chat")
    assert r["output_tokens"] == 16 and r["chunks"] == chunks and len(r["itl_ms"]) == chunks - 1
    assert TTFT_MS <= r["ttft_ms"] < TTFT_MS + 40
    if endpoint == "completions":
        assert r["first_text_ms"] == r["ttft_ms"]  # every chunk has text
    else:
        assert r["first_text_ms"] >= r["ttft_ms"]  # the role chunk was first
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


@pytest.mark.parametrize("fast", [True, False], ids=["protocol", "aiohttp"])
@pytest.mark.parametrize("endpoint", ["completions", "chat"])
def test_empty_text_chunks_are_timed_as_tokens(server: str, endpoint: str, fast: bool) -> None:
    # half the token chunks carry empty text (multi-byte output), the first among them
    assert [Timing(empty_share=0.5).empty(j) for j in range(4)] == [True, False, True, False]
    prefix = f"empty-{endpoint}-{fast}-"
    r = one(server, max_tokens=8, endpoint=endpoint, fast=fast, request_id_prefix=prefix, empty_share=0.5)
    assert r["success"] and r["error"] is None and r["output_tokens"] == 8
    chunks = 8 + (endpoint == "chat")
    assert r["chunks"] == chunks and len(r["itl_ms"]) == chunks - 1  # skipping empty text would give 4 and 3
    assert r["e2e_ms"] == pytest.approx(r["ttft_ms"] + sum(r["itl_ms"]))
    # TTFT is the first (empty) chunk; the first visible text came with the next one
    assert r["first_text_ms"] >= r["ttft_ms"]
    # the server's own record of this request: 8 writes; nothing can be read before it was written
    (rec,) = server_records(server, prefix)
    assert rec["id"] == prefix + "0" and rec["tokens"] == 8 and len(rec["writes_s"]) == 8
    assert r["ttft_ms"] >= (rec["writes_s"][0] - rec["arrival_s"]) * 1e3
    assert r["first_text_ms"] >= (rec["writes_s"][1] - rec["arrival_s"]) * 1e3


def test_a_stream_of_only_empty_text_is_a_success_without_visible_text(server: str) -> None:
    r = one(server, max_tokens=5, empty_share=1.0)
    assert r["success"] and r["error"] is None
    assert r["chunks"] == 5 and r["output_tokens"] == 5 and len(r["itl_ms"]) == 4
    assert r["ttft_ms"] >= TTFT_MS and r["first_text_ms"] is None


def test_sse_parser_times_chunks_with_choices_and_nothing_else() -> None:
    """vLLM's own event shapes, fed with chosen arrival times: what counts as a token chunk."""
    rec = RequestRecord(request_id=0, prompt_tokens=3)
    timer = SseTimer(rec, start=0)

    def ev(obj: dict[str, Any]) -> bytes:
        return b"data: " + json.dumps(obj, separators=(",", ":")).encode() + b"\n\n"

    def chat(delta: dict[str, Any]) -> bytes:
        return ev({"id": "c", "object": "chat.completion.chunk", "choices": [{"index": 0, "delta": delta}]})

    timer.feed(b": keep-alive\n\n", 1_000_000)  # SSE comment: not a token
    timer.feed(chat({"role": "assistant", "content": ""}), 10_000_000)  # role chunk: timed (TTFT)
    timer.feed(chat({"content": ""}), 12_000_000)  # a token inside a multi-byte character: timed
    timer.feed(chat({"content": "\u4f60"}), 15_000_000)  # first visible text
    timer.feed(b": ping\r\n\r\n", 16_000_000)
    timer.feed(chat({"content": "\u597d"})[:20], 17_000_000)  # an event split over two reads
    timer.feed(chat({"content": "\u597d"})[20:], 18_000_000)
    usage = {"prompt_tokens": 3, "completion_tokens": 3, "total_tokens": 6}
    timer.feed(ev({"id": "c", "choices": [], "usage": usage}) + b"data: [DONE]\n\n", 30_000_000)
    out = timer.finish(expected_tokens=3)
    assert out.success and out.error is None
    assert out.ttft_ms == 10.0 and out.first_text_ms == 15.0
    assert out.itl_ms == [2.0, 3.0, 3.0] and out.chunks == 4
    assert out.e2e_ms == 18.0 and out.output_tokens == 3  # the usage event ended nothing
    assert out.tpot_ms == 4.0

    # without usage, tokens fall back to chunks less chat's role chunk
    rec = RequestRecord(request_id=1, prompt_tokens=3)
    timer = SseTimer(rec, start=0)
    timer.feed(chat({"role": "assistant", "content": ""}) + chat({"content": ""}) + chat({"content": "a"}), 5)
    assert timer.finish(expected_tokens=2).output_tokens == 2


def test_a_stream_read_at_once_has_no_tpot_rather_than_zero() -> None:
    """A client that waited for a CPU reads the whole stream in one read: E2E = TTFT, so no time between
    tokens was observed; its TPOT is undefined (left out of the level's TPOT), not a 0 ms decode step."""
    rec = RequestRecord(request_id=0, prompt_tokens=3)
    timer = SseTimer(rec, start=0)
    events = b"".join(
        b"data: " + json.dumps({"id": "c", "choices": [{"index": 0, "text": t}]}).encode() + b"\n\n"
        for t in ("a", "b", "c", "d")
    )
    timer.feed(events + b"data: [DONE]\n\n", 900_000_000)
    out = timer.finish(expected_tokens=4)
    assert out.success and out.chunks == 4 and out.output_tokens == 4
    assert out.ttft_ms == out.e2e_ms == 900.0 and out.itl_ms == [0.0, 0.0, 0.0]
    assert out.tpot_ms is None
    first = out.row(t0_ns=0)
    level = summarize([first, {**first, "request_id": 1, "e2e_ms": 930.0, "tpot_ms": 10.0}])
    assert level.tpot_ms.n == 1 and level.tpot_ms.p50 == 10.0


def test_clock_starts_before_the_request_is_built(server: str, monkeypatch: pytest.MonkeyPatch) -> None:
    built: list[int] = []
    real = transports._payload

    def payload(cfg: ClientConfig, spec: RequestSpec) -> dict[str, Any]:
        built.append(time.perf_counter_ns())
        return real(cfg, spec)

    monkeypatch.setattr(transports, "_payload", payload)
    for fast in (True, False):
        cfg = ClientConfig(base_url=server, model="m", fast=fast)
        rec = asyncio.run(closed_loop(cfg, [RequestSpec("x", 1, 2)], 1)).records[0]
        assert rec.success and rec.start_ns <= built[-1]


def test_request_ids_reach_the_server_and_match_its_record(server: str) -> None:
    cfg = ClientConfig(base_url=server, model="m", request_id_prefix="match-")
    res = asyncio.run(closed_loop(cfg, [RequestSpec("x", 1, 6)] * 3, 3))
    recs = {r["id"]: r for r in server_records(server, "match-")}
    assert sorted(recs) == ["match-0", "match-1", "match-2"]
    for c in res.records:
        s = recs[f"match-{c.request_id}"]
        assert len(s["writes_s"]) == c.chunks == 6 and len(c.itl_ms) == 5
        # one clock (perf_counter) on both sides: the request left before it arrived, each chunk was
        # written before it was read
        assert c.start_ns / 1e9 <= s["arrival_s"]
        assert c.ttft_ms is not None and c.ttft_ms >= (s["writes_s"][0] - s["arrival_s"]) * 1e3


def test_bad_calibration_values_are_refused_with_the_allowed_range(server: str) -> None:
    r = one(server, max_tokens=4, empty_share=1.5)
    assert not r["success"] and "HTTP 400" in r["error"] and "empty_share 1.5 not in [0, 1]" in r["error"]


def test_every_worker_writes_its_records_on_sigusr1(tmp_path: Path) -> None:
    with running_calibration_server("--workers", "2", "--record-dir", str(tmp_path)) as (url, proc):
        cfg = ClientConfig(base_url=url, model="m", request_id_prefix="w-")
        res = asyncio.run(closed_loop(cfg, [RequestSpec("x", 1, 3)] * 24, 8))
        assert all(r.success for r in res.records)
        os.kill(proc.pid, signal.SIGUSR1)
        deadline = time.monotonic() + 30
        while len(list(tmp_path.glob("*.json"))) < 2 and time.monotonic() < deadline:
            time.sleep(0.05)
        dumps = [json.loads(p.read_text()) for p in tmp_path.glob("*.json")]
    assert len({d["pid"] for d in dumps}) == 2  # both workers answered, each with its own file
    ids = sorted(r["id"] for d in dumps for r in d["requests"])
    assert ids == sorted(f"w-{i}" for i in range(24))


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
        ("no_content", "stream ended without a token"),
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


def test_a_reply_ended_early_is_a_success_when_eos_is_honoured(server: str) -> None:
    """ignore_eos off (a real-text workload's default): the request asks the server to stop at EOS, a reply
    shorter than max_tokens succeeds with the tokens the server counted, a one-token reply has no TPOT, and
    the summary's tok/s and goodput count the tokens produced."""
    from worthit.metrics import Slo

    honour = ClientConfig(base_url=server, model="m", ignore_eos=False)
    assert transports._payload(honour, RequestSpec("x", 1, 5))["ignore_eos"] is False
    # tokens 30 ms apart: each its own read, even on a loaded machine
    spaced = {"calibration": {"itl_ms": 30}}
    three = ClientConfig(base_url=server, model="m", ignore_eos=False, extra_body={"max_tokens": 3, **spaced})
    one_token = ClientConfig(base_url=server, model="m", ignore_eos=False, extra_body={"max_tokens": 1})
    rows = asyncio.run(closed_loop(three, [RequestSpec("x", 1, 5)] * 2, 2)).rows()
    rows += asyncio.run(closed_loop(one_token, [RequestSpec("x", 1, 5)], 1)).rows()
    assert [r["success"] for r in rows] == [True] * 3 and [r["error"] for r in rows] == [None] * 3
    assert [r["output_tokens"] for r in rows] == [3, 3, 1]
    assert rows[2]["tpot_ms"] is None and all(r["tpot_ms"] is not None for r in rows[:2])
    s = summarize(rows, Slo(tpot_ms=1e6))
    assert s.n_errors == 0 and s.tpot_ms.n == 2 and s.ttft_ms.n == 3
    assert s.duration_s is not None and s.output_tok_per_s == pytest.approx(7 / s.duration_s)
    # the one-token reply has no TPOT to break the bound: all three requests count as goodput
    assert s.goodput_requests_per_s == pytest.approx(3 / s.duration_s)


def test_errors_are_counted_in_the_summary_not_dropped(server: str) -> None:
    cfg = ClientConfig(base_url=server, model="m")
    bad = ClientConfig(base_url=server, model="m", extra_body={"calibration": {"fail": "http500"}})
    ok = asyncio.run(closed_loop(cfg, [RequestSpec("x", 1, 4)] * 3, 2)).rows()
    failed = asyncio.run(closed_loop(bad, [RequestSpec("x", 1, 4)], 1)).rows()
    s = summarize(ok + failed)
    assert s.n == 4 and s.n_errors == 1 and s.ttft_ms.n == 3


def test_closed_loop_keeps_concurrency_and_records_every_request(server: str) -> None:
    # tokens 20 ms apart: on a loaded machine 5 ms gaps can reach the client in one read, leaving no TPOT
    spaced = {"calibration": {"itl_ms": 20}}
    cfg = ClientConfig(base_url=server, model="m", request_id_prefix="loop-", extra_body=spaced)
    res = asyncio.run(closed_loop(cfg, [RequestSpec("x", 1, 8)] * 16, 8))
    assert [r.request_id for r in res.records] == list(range(16))
    s = summarize(res.rows())
    assert s.n_errors == 0 and s.ttft_ms.n == 16 and s.tpot_ms.n == 16
    # each request as the server served it: every chunk timed, none read before the server wrote it
    served = {r["id"]: r for r in server_records(server, "loop-")}
    for c in res.records:
        w = served[f"loop-{c.request_id}"]["writes_s"]
        assert len(w) == c.chunks == 8 and c.ttft_ms is not None and c.e2e_ms is not None
        assert c.start_ns / 1e9 + c.ttft_ms / 1e3 >= w[0] and c.start_ns / 1e9 + c.e2e_ms / 1e3 >= w[-1]
    # 8 in flight: two waves of requests, so the second wave starts after the first ends
    starts = sorted(r["start_s"] for r in res.rows())
    assert starts[7] < starts[8]


def test_duration_bounded_closed_loop_stops_starting_requests_at_the_deadline(server: str) -> None:
    cfg = ClientConfig(base_url=server, model="m")
    res = asyncio.run(closed_loop(cfg, [RequestSpec("x", 1, 4)] * 2, 2, duration_s=0.3))
    assert len(res.records) >= 4  # cycled through the two specs
    assert len({r.request_id for r in res.records}) == len(res.records)
    # a worker checks the deadline before each request, so at most its last one starts after the deadline
    # (a stall of a busy machine between the check and the start); how far after is the machine's load
    assert sum(1 for r in res.records if r.start_ns - res.t0_ns >= 0.3e9) <= 2
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
    # one clock across processes: another clock's zero (boot, epoch) would put starts hours apart; the
    # bound is loose so that a busy machine's stalls cannot fail it
    assert max(r.start_ns for r in res.records) - res.t0_ns < 60e9


@pytest.mark.parametrize("loop", ["closed", "sessions", "open", "processes"])
def test_after_warmup_runs_between_the_warm_up_and_the_first_measured_request(server: str, loop: str) -> None:
    # a level reads the server's counters here (worthit.experiments.loadtest.measure): every warm-up request
    # has been served by then, and no measured request has started
    prefix = f"warm-{loop}-"
    cfg = ClientConfig(base_url=server, model="m", request_id_prefix=prefix)
    specs, warm = [RequestSpec("x", 1, 4)] * 6, [RequestSpec("w", 1, 16)] * 3
    seen: list[tuple[int, int]] = []

    def hook() -> None:
        seen.append((len(server_records(server, prefix)), time.perf_counter_ns()))

    if loop == "closed":
        res = asyncio.run(closed_loop(cfg, specs, 2, warmup=warm, after_warmup=hook))
    elif loop == "sessions":
        res = asyncio.run(
            sessions_loop(cfg, [specs[:3], specs[3:]], arrivals_s=[0.0, 0.01], warmup=warm, after_warmup=hook)
        )
    elif loop == "open":
        res = asyncio.run(open_loop(cfg, specs, rate_per_s=200, seed=1, warmup=warm, after_warmup=hook))
    else:
        res = run(cfg, specs, concurrency=4, processes=2, warmup=warm, after_warmup=hook)
    assert len(seen) == 1 and all(r.success for r in res.records) and len(res.records) == 6
    served_then, at_ns = seen[0]
    assert served_then == len(warm)  # the warm-up answered in full, nothing measured finished yet
    assert at_ns < min(r.start_ns for r in res.records)  # and nothing measured had started
    assert len(server_records(server, prefix)) == len(warm) + len(specs)

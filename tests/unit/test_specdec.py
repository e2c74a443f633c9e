"""The speculative-decoding model S = alpha / (k gamma + c) and its inputs, on the study's own numbers."""

from __future__ import annotations

import pytest

from worthit.experiments.specdec import measure as specdec
from worthit.experiments.specdec.measure import (
    NOT_WORTH_TRYING,
    WORTH_TRYING,
    alpha_from_counters,
    c_at_concurrency,
    c_from_verify,
    decode_steps,
    gamma_from_tpot,
    implied_c,
    k_for_speedup,
    predicted_speedup,
    spec_rows,
    verdict,
    verify_medians,
)

# The study: Qwen2.5-0.5B drafting for Qwen2.5-7B on one RTX 3090.
ALPHA, GAMMA, C = 3.08, 0.20, 1.73


def test_study_numbers_give_k_of_five_for_its_predicted_speedup_of_1_13():
    assert round(k_for_speedup(ALPHA, GAMMA, C, 1.13)) == 5
    assert predicted_speedup(ALPHA, 5, GAMMA, C) == pytest.approx(1.13, abs=0.005)


def test_study_prediction_is_flagged_not_worth_trying():
    assert verdict(predicted_speedup(ALPHA, 5, GAMMA, C)) == NOT_WORTH_TRYING
    assert verdict(1.3) == WORTH_TRYING
    assert verdict(None) is None


def test_speedup_falls_as_drafts_get_longer_at_fixed_alpha():
    assert predicted_speedup(ALPHA, 2, GAMMA, C) > predicted_speedup(ALPHA, 5, GAMMA, C)


def test_model_free_drafting_speedup_is_alpha_over_c():
    assert predicted_speedup(2.0, 4, 0.0, 1.25) == pytest.approx(1.6)


def test_no_prediction_without_a_positive_step_cost_or_with_an_unknown_input():
    assert predicted_speedup(2.0, 4, 0.0, 0.0) is None
    assert predicted_speedup(2.0, 4, 0.0, -0.3) is None  # a c below zero is timing noise
    assert predicted_speedup(None, 4, 0.0, 1.25) is None
    assert predicted_speedup(2.0, 4, None, 1.25) is None


def test_alpha_counts_the_targets_own_token():
    # 21 draft steps whose 84 draft tokens were all accepted: 4 + 1 tokens per verify step
    assert alpha_from_counters(21, 84) == 5.0
    assert alpha_from_counters(0, 0) is None


def test_decode_steps_are_bounded_below_by_drafts_when_outputs_are_cut():
    # 3 requests x 32 tokens; 21 drafts x 4 accepted: accepted tokens past max_tokens are cut
    tokens, steps = decode_steps(96, 3, 21, 84)
    assert tokens == 93 and steps == 21
    # ngram that rarely matches: most steps carry no draft
    tokens, steps = decode_steps(96, 3, 5, 3)
    assert steps == 90


def test_gamma_is_the_tpot_ratio_of_draft_to_target():
    assert gamma_from_tpot(3.94, 19.7) == pytest.approx(0.20)
    assert gamma_from_tpot(None, 19.7) is None


def test_c_adds_the_extra_verify_forward_to_one_decode_step():
    # verifying 5 tokens takes 14.4 ms more than 1 token; a plain decode step is 19.7 ms
    assert c_from_verify(40.0 + 14.381, 40.0, 19.7) == pytest.approx(1.73, abs=0.001)
    assert c_from_verify(None, 40.0, 19.7) is None


def test_implied_c_reproduces_the_measurement_by_construction():
    c = implied_c(ALPHA, 5, GAMMA, 19.55, tpot_base_ms=19.7)
    assert predicted_speedup(ALPHA, 5, GAMMA, c) == pytest.approx(19.7 / 19.55)


def _level(tpot, drafts=0.0, accepted=0.0, draft_tokens=0.0, generated=0.0, requests=0):
    return {
        "status": "ok",
        "reason": None,
        "tpot_ms_p50": tpot,
        "ttft_ms_p99": 100.0,
        "requests": requests,
        "metrics_delta": {
            specdec.DRAFTS: drafts,
            specdec.ACCEPTED: accepted,
            specdec.DRAFT_TOKENS: draft_tokens,
            specdec.GENERATED: generated,
        },
    }


def test_rows_put_prediction_next_to_measured_speedup_per_concurrency():
    spec = {
        1: _level(19.55, drafts=100, accepted=208, draft_tokens=500, generated=330, requests=4),
        16: _level(25.0, drafts=100, accepted=208, draft_tokens=500, generated=330, requests=4),
    }
    base = {1: _level(19.7), 16: _level(23.3)}
    draft = {1: _level(3.94)}
    rows = spec_rows(
        "spec",
        {"model": "draft", "num_speculative_tokens": 5},
        "base",
        "draft",
        levels=spec,
        base_levels=base,
        draft_levels=draft,
        # verify timed at concurrency 1 only: c is known there, and at 16 the row says it was not timed
        verify={(1, 1): 40.0, (1, 6): 54.381},
    )
    assert [r["concurrency"] for r in rows] == [1, 16]
    assert rows[1]["c"] is None and "at concurrency 16" in rows[1]["note"]
    r1 = rows[0]
    assert r1["method"] == "draft_model" and r1["k"] == 5
    assert r1["alpha"] == pytest.approx(3.08) and r1["gamma"] == pytest.approx(0.20)
    assert r1["c"] == pytest.approx(1.73, abs=0.001)
    assert r1["predicted_speedup"] == pytest.approx(1.13, abs=0.005)
    assert r1["measured_speedup"] == pytest.approx(19.7 / 19.55)
    assert r1["verdict"] == NOT_WORTH_TRYING and r1["note"] is None
    assert rows[1]["measured_speedup"] == pytest.approx(23.3 / 25.0)  # worse at 16, as in the study


def test_ngram_needs_no_draft_variant_and_a_failed_level_stays_a_row():
    spec = {
        1: _level(10.0, drafts=10, accepted=10, draft_tokens=40, generated=100, requests=2),
        4: {"status": "failed", "reason": "server exited"},
    }
    rows = spec_rows(
        "ng",
        {"method": "ngram", "num_speculative_tokens": 4},
        "base",
        None,
        levels=spec,
        base_levels={1: _level(12.0), 4: _level(14.0)},
        draft_levels=None,
        verify={(1, 1): 40.0, (1, 5): 43.0, (4, 1): 50.0, (4, 5): 64.0},
    )
    assert rows[0]["gamma"] == 0.0 and rows[0]["c"] == pytest.approx(1.25)
    assert rows[0]["predicted_speedup"] == pytest.approx(2.0 / 1.25)
    assert rows[1]["status"] == "failed" and rows[1]["reason"] == "server exited"
    assert rows[1].get("predicted_speedup") is None
    # c at concurrency 4 is the one timed there, against the base's TPOT at 4: 1 + (64 - 50) / 14 = 2.0
    assert rows[1]["c"] == pytest.approx(2.0)


def test_c_follows_the_verify_timing_at_each_concurrency():
    rows = [
        {"concurrency": conc, "new_tokens": m, "ttft_ms": t, "success": True}
        for conc, m, t in ((1, 1, 40.0), (1, 5, 44.0), (16, 1, 80.0), (16, 5, 200.0))
        for _ in range(3)
    ] + [{"new_tokens": 1, "ttft_ms": 41.0, "success": True}]  # a row from before the column: concurrency 1
    medians = verify_medians(rows)
    assert medians[(1, 1)] == 40.0 and medians[(16, 5)] == 200.0
    assert c_at_concurrency(medians, 4, 1, 20.0) == pytest.approx(1.2)
    # sixteen sequences verifying 4 extra tokens each: a compute-bound step costs far more
    assert c_at_concurrency(medians, 4, 16, 40.0) == pytest.approx(4.0)
    assert c_at_concurrency(medians, 4, 4, 30.0) is None


def test_missing_inputs_leave_the_prediction_empty_and_say_why():
    rows = spec_rows(
        "d",
        {"model": "x", "num_speculative_tokens": 3},
        "base",
        None,
        levels={1: _level(10.0, drafts=5, accepted=5, generated=40, requests=2)},
        base_levels={1: _level(9.0)},
        draft_levels=None,
        verify={},
        verify_failure="verify timing failed: server exited",
    )
    assert rows[0]["predicted_speedup"] is None and rows[0]["verdict"] is None
    assert "gamma unknown" in rows[0]["note"] and "server exited" in rows[0]["note"]


def _fake_verify_server(monkeypatch: pytest.MonkeyPatch, foreign_requests: int) -> None:
    """run_verify against a stand-in server: every request it sends succeeds with one token; the counters
    move by what it sent (and by ``foreign_requests`` of another client's, 100 prompt tokens each)."""
    from worthit import prom
    from worthit.loadgen.records import RequestRecord, RequestSpec, RunResult

    sent = {"requests": 0, "prompt": 0}
    monkeypatch.setattr(specdec, "scrape", lambda url, key=None: 'vllm:cache_config_info{block_size="16"} 1.0\n')
    monkeypatch.setattr(specdec, "load_tokenizer", lambda d: None)

    def specs(tok, context, sizes, repeats, *, concurrency=1, seed=0):  # noqa: ANN001, ANN202
        one = [RequestSpec("x", context + m, 1) for m in sizes]
        return one[0], [(m, [RequestSpec("x", context + m, 1)] * concurrency) for m in sizes for _ in range(repeats)]

    async def loop(cfg, wave, conc):  # noqa: ANN001, ANN202
        recs = []
        for i, s in enumerate(wave):
            sent["requests"] += 1
            sent["prompt"] += s.prompt_tokens
            recs.append(RequestRecord(i, s.prompt_tokens, ttft_ms=5.0, output_tokens=1, success=True))
        return RunResult(recs, 0, 0, 0.0)

    scrapes = iter(range(2))

    def counters(url, key=None):  # noqa: ANN001, ANN202
        extra = foreign_requests if next(scrapes) else 0
        return {
            prom.REQUESTS_FINISHED: float(sent["requests"] + extra),
            prom.PROMPT_TOKENS: float(sent["prompt"] + 100 * extra),
            prom.GENERATION_TOKENS: float(sent["requests"] + extra),
        }

    monkeypatch.setattr(specdec, "verify_specs", specs)
    monkeypatch.setattr(specdec, "closed_loop", loop)
    monkeypatch.setattr(specdec, "counters", counters)


@pytest.mark.parametrize("foreign", [0, 1])
def test_verify_timing_records_another_client_on_the_server(monkeypatch: pytest.MonkeyPatch, foreign: int) -> None:
    """The verify step's TTFTs and hit rate are taken on the base variant's server: a request of another
    client in the window is recorded (the report then reads the file as failed, with the reason)."""
    _fake_verify_server(monkeypatch, foreign)
    rows, meta = specdec.run_verify("http://x", "m", "tok", 512, sizes=[1, 5], repeats=2, concurrencies=[1, 4])
    assert len(rows) == 2 * 2 * (1 + 4)
    assert meta["traffic"]["shared"] is bool(foreign)
    assert meta["traffic"]["other_requests"] == foreign

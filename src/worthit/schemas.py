"""Every Parquet table worthit writes, defined once.

A table is a list of :class:`Field` (name, Arrow type, description). From it come the pyarrow schema,
the documentation and the checks on read. Files are written atomically (temp file + rename) with
provenance and a status in the key-value metadata, so a failed experiment is a file too: zero rows,
``status`` = ``failed`` / ``not_applicable`` and its reason and log tail.
"""

from __future__ import annotations

import contextlib
import json
import os
from collections.abc import Iterable, Iterator, Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pyarrow as pa
import pyarrow.parquet as pq

from worthit import atomic, fmt, secrets
from worthit.errors import InputError

STATUS_OK = "ok"
STATUS_FAILED = "failed"
STATUS_NOT_APPLICABLE = "not_applicable"
STATUS_NOT_RUN = "not_run"  # nothing was measured because nothing was there to measure (e.g. no deployment)
STATUSES = (STATUS_OK, STATUS_FAILED, STATUS_NOT_APPLICABLE, STATUS_NOT_RUN)

META_PREFIX = "worthit."


@dataclass(frozen=True)
class Field:
    name: str
    type: pa.DataType
    description: str
    nullable: bool = True


@dataclass(frozen=True)
class Table:
    name: str
    description: str
    fields: tuple[Field, ...]

    @property
    def schema(self) -> pa.Schema:
        return pa.schema(
            [
                pa.field(f.name, f.type, nullable=f.nullable, metadata={"description": f.description})
                for f in self.fields
            ],
            metadata={f"{META_PREFIX}table": self.name},
        )

    @property
    def columns(self) -> list[str]:
        return [f.name for f in self.fields]

    def markdown(self) -> str:
        cols = (("name", "column"), ("type", "type"), ("description", "description"))
        rows = [{"name": f"`{f.name}`", "type": str(f.type), "description": f.description} for f in self.fields]
        return "\n".join([f"### `{self.name}`", "", self.description, "", fmt.markdown_table(rows, cols)])


def _f(name: str, typ: pa.DataType, description: str, nullable: bool = True) -> Field:
    return Field(name, typ, description, nullable)


_VARIANT = _f("variant", pa.string(), "variant name from the study config", False)

LOAD_REQUESTS = Table(
    "load_requests",
    "One row per measured request of one load level (warm-up requests excluded, counted in metadata).",
    (
        _VARIANT,
        _f("concurrency", pa.int32(), "closed-loop in-flight requests (0 for open loop)", False),
        _f("request_rate_per_s", pa.float64(), "open-loop target rate; null for closed loop"),
        _f("request_id", pa.int32(), "index of the request within the level", False),
        _f("prompt_tokens", pa.int32(), "prompt length in tokens as sent"),
        _f("prompt_tokens_reported", pa.int32(), "prompt tokens from the server's usage"),
        _f("output_tokens", pa.int32(), "output tokens from the server's usage (0 on error)"),
        _f("start_s", pa.float64(), "request start, seconds since the level's first request", False),
        _f("ttft_ms", pa.float64(), "time to the first streamed chunk with a choice, its text empty or not"),
        _f("first_text_ms", pa.float64(), "time to the first chunk with non-empty text; null if none"),
        _f("e2e_ms", pa.float64(), "time to the last chunk with a choice"),
        _f("tpot_ms", pa.float64(), "(e2e - ttft) / (output_tokens - 1); null for one token"),
        _f("itl_ms", pa.list_(pa.float64()), "gaps between chunks with a choice"),
        _f("chunks", pa.int32(), "chunks with a choice received (timed as tokens, as vllm bench serve does)"),
        _f("success", pa.bool_(), "request completed with the expected output", False),
        _f("error", pa.string(), "error reason; null on success"),
        _f("scheduled_s", pa.float64(), "open loop: when the request was due, on the start_s clock; null closed"),
        _f("queue_delay_ms", pa.float64(), "open loop: start - scheduled start (the client's queueing delay)"),
        _f("session_id", pa.int32(), "conversation workloads: the conversation (session) of the request"),
        _f("turn", pa.int32(), "conversation workloads: the turn within its conversation, from 0"),
    ),
)

SERVER_TIMELINE = Table(
    "server_timeline",
    "The server's /metrics scraped at a fixed interval during one load level (load/<level>.timeline.parquet, "
    "beside its requests): gauges as sampled, counters cumulative since the server started (differences "
    "between rows are what happened in between). Gauges are summed over engines, KV usage is the fullest "
    "engine's.",
    (
        _VARIANT,
        _f("level", pa.string(), "the load level: conc~16, rate~2.5, chat/conc~4, prod/replay", False),
        _f("run", pa.int32(), "run of the level (loadtest.repeats)"),
        _f("t_s", pa.float64(), "when the server answered (mid-scrape), on the requests' start_s clock", False),
        _f("phase", pa.string(), "warmup (before the first measured request) / measure / after", False),
        _f("scrape_ms", pa.float64(), "round trip of the scrape"),
        _f("kv_cache_usage_frac", pa.float64(), "vllm:kv_cache_usage_perc: share of KV blocks in use, 0-1"),
        _f("requests_running", pa.float64(), "vllm:num_requests_running"),
        _f("requests_waiting", pa.float64(), "vllm:num_requests_waiting"),
        _f("preemptions_total", pa.float64(), "vllm:num_preemptions_total"),
        _f("prefix_cache_queries_total", pa.float64(), "vllm:prefix_cache_queries_total (prompt tokens looked up)"),
        _f("prefix_cache_hits_total", pa.float64(), "vllm:prefix_cache_hits_total (of those, tokens found)"),
        _f("prompt_tokens_total", pa.float64(), "vllm:prompt_tokens_total"),
        _f("generation_tokens_total", pa.float64(), "vllm:generation_tokens_total"),
        _f("spec_decode_drafts_total", pa.float64(), "vllm:spec_decode_num_drafts_total (null without speculation)"),
        _f("spec_decode_draft_tokens_total", pa.float64(), "vllm:spec_decode_num_draft_tokens_total"),
        _f("spec_decode_accepted_tokens_total", pa.float64(), "vllm:spec_decode_num_accepted_tokens_total"),
        _f("error", pa.string(), "why this scrape failed; null when it answered"),
    ),
)

KV_CACHE = Table(
    "kv_cache",
    "KV-cache capacity of one served variant, from /metrics cache_config_info and the model config.",
    (
        _VARIANT,
        _f("num_blocks", pa.int64(), "KV blocks the engine allocated (num_gpu_blocks)"),
        _f("block_size_tokens", pa.int32(), "tokens per KV block"),
        _f("kv_tokens", pa.int64(), "num_blocks * block_size_tokens"),
        _f("cache_dtype", pa.string(), "KV cache dtype as the engine reports it"),
        _f("kv_bytes_per_token", pa.int64(), "2 * layers * kv_heads * head_dim * dtype bytes"),
        _f("kv_cache_gib", pa.float64(), "kv_tokens * kv_bytes_per_token / 2^30"),
        _f("prefix_caching", pa.bool_(), "automatic prefix caching enabled"),
        _f("tokens_per_request", pa.int32(), "prompt + output tokens of the study's workload"),
        _f("critical_concurrency", pa.float64(), "kv_tokens / tokens_per_request"),
        _f("weight_bytes", pa.int64(), "weight bytes as vLLM serves them (floating tensors at the served dtype)"),
    ),
)

SWEET_SPOT = Table(
    "sweet_spot",
    "The SLO sweet-spot search of one variant (sweet_spot.variants): one row per level it judged, the grid's "
    "(run 1) and the probes it measured between the last passing and the first failing grid level; the "
    "bracket and how the search ended are in the metadata (outcome, lo, hi, width, description).",
    (
        _VARIANT,
        _f("concurrency", pa.int32(), "closed-loop concurrency of the level"),
        _f("source", pa.string(), "grid (a loadtest level, run 1) or search (a probe measured by the search)"),
        _f("probe", pa.int32(), "order in which the search measured it (0 for grid levels)"),
        _f("meets_slo", pa.bool_(), "P99 TTFT and P99 TPOT within the SLO"),
        _f("n", pa.int32(), "requests measured"),
        _f("n_errors", pa.int32(), "requests that failed"),
        _f("ttft_ms_p50", pa.float64(), "median time to first token"),
        _f("ttft_ms_p99", pa.float64(), "P99 time to first token"),
        _f("tpot_ms_p50", pa.float64(), "median time per output token"),
        _f("tpot_ms_p99", pa.float64(), "P99 time per output token"),
        _f("output_tok_per_s", pa.float64(), "output tokens per second of the level"),
        _f("goodput_tok_per_s", pa.float64(), "output tokens per second of requests meeting the SLO"),
    ),
)

PREFIX = Table(
    "prefix_requests",
    "One row per request of the prefix-caching experiment at one shared-prefix length.",
    (
        _VARIANT,
        _f("prefix_tokens", pa.int32(), "shared prefix length", False),
        _f("concurrency", pa.int32(), "closed-loop requests in flight"),
        _f("request_id", pa.int32(), "index of the request", False),
        _f("prompt_tokens", pa.int32(), "prefix + unique suffix tokens"),
        _f("prompt_tokens_reported", pa.int32(), "prompt tokens from the server's usage"),
        _f("output_tokens", pa.int32(), "output tokens from usage"),
        _f("ttft_ms", pa.float64(), "time to first content chunk"),
        _f("e2e_ms", pa.float64(), "time to last content chunk"),
        _f("success", pa.bool_(), "request completed", False),
        _f("error", pa.string(), "error reason; null on success"),
    ),
)

ACCURACY = Table(
    "accuracy",
    "lm-eval results for one variant, a row per task, metric and filter; a task that failed or timed out "
    "is one row with status failed, its reason and a null metric.",
    (
        _VARIANT,
        _f("task", pa.string(), "lm-eval task name", False),
        _f("metric", pa.string(), "metric name (acc, acc_norm, exact_match, ...); null when the task failed"),
        _f("filter", pa.string(), "lm-eval filter the metric was computed after"),
        _f("status", pa.string(), "ok / failed"),
        _f("reason", pa.string(), "why the task failed; null when ok"),
        _f("value", pa.float64(), "score in [0, 1]"),
        _f("stderr", pa.float64(), "lm-eval's bootstrap / analytic standard error"),
        _f("n", pa.int32(), "samples evaluated"),
        _f("num_fewshot", pa.int32(), "few-shot examples per prompt"),
        _f("lm_eval_version", pa.string(), "lm-eval version"),
        _f("duration_s", pa.float64(), "wall time of the task's lm-eval run"),
    ),
)

ACCURACY_SAMPLES = Table(
    "accuracy_samples",
    "Per-document scores of one variant from lm-eval's sample logs, so variants can be compared pairwise.",
    (
        _VARIANT,
        _f("task", pa.string(), "lm-eval task name", False),
        _f("metric", pa.string(), "metric name", False),
        _f("filter", pa.string(), "lm-eval filter", False),
        _f("doc_id", pa.int32(), "lm-eval's document index within the task's evaluated split", False),
        _f("value", pa.float64(), "the document's score (1/0 for acc and exact_match)"),
    ),
)

ACCURACY_SUMMARY = Table(
    "accuracy_summary",
    "Accuracy per variant x task x metric next to the baseline variant's, with the change, its 95% interval "
    "(paired over the same documents where both variants' per-document scores exist, else from "
    "sqrt(stderr^2 + baseline stderr^2)) and the non-inferiority decision against the task's max drop: the "
    "numbers the report's accuracy table and verdicts use.",
    (
        _VARIANT,
        _f("status", pa.string(), "ok / failed", False),
        _f("reason", pa.string(), "why the task or variant failed"),
        _f("task", pa.string(), "lm-eval task name"),
        _f("metric", pa.string(), "metric name"),
        _f("filter", pa.string(), "lm-eval filter"),
        _f("value", pa.float64(), "score in [0, 1]"),
        _f("stderr", pa.float64(), "standard error of value"),
        _f("n", pa.int32(), "samples evaluated"),
        _f("num_fewshot", pa.int32(), "few-shot examples per prompt"),
        _f("baseline_variant", pa.string(), "the variant compared with"),
        _f("baseline_value", pa.float64(), "the baseline variant's score on the same task, metric, filter"),
        _f("baseline_stderr", pa.float64(), "its standard error"),
        _f("delta_pt", pa.float64(), "(value - baseline_value) x 100, in percentage points"),
        _f("delta_stderr_pt", pa.float64(), "standard error of delta_pt (see delta_method)"),
        _f(
            "delta_method",
            pa.string(),
            "paired: std of per-document differences / sqrt(n_paired); 'paired, no document changed': the "
            "rule-of-three bound 3.69 / n_paired as the 95% limit; unpaired: sqrt(se^2 + se_base^2)",
        ),
        _f("n_paired", pa.int32(), "documents scored by both variants (paired methods)"),
        _f("delta_ci95_low_pt", pa.float64(), "95% interval of delta_pt, low (delta - 1.96 x delta_stderr_pt)"),
        _f("delta_ci95_high_pt", pa.float64(), "95% interval of delta_pt, high"),
        _f("max_drop_pt", pa.float64(), "the task's bound: decide.max_accuracy_drop_pt(_by_task)"),
        _f(
            "decision",
            pa.string(),
            "acceptable (interval above -max_drop_pt), unacceptable (below) or inconclusive (straddles it)",
        ),
    ),
)

SUMMARY = Table(
    "summary",
    "One row per variant x load level: latency percentiles, throughput, goodput and KV capacity.",
    (
        _VARIANT,
        _f("status", pa.string(), "ok / failed / not_applicable", False),
        _f("reason", pa.string(), "why the variant failed or does not apply"),
        _f("concurrency", pa.int32(), "closed-loop concurrency"),
        _f("run", pa.int32(), "run of the level (loadtest.repeats; run 1 when not repeated)"),
        _f("n", pa.int32(), "measured requests"),
        _f("n_errors", pa.int32(), "requests that failed"),
        _f("n_warmup", pa.int32(), "warm-up requests sent before measuring (excluded)"),
        _f("ttft_ms_p50", pa.float64(), "TTFT median"),
        _f("ttft_ms_p99", pa.float64(), "TTFT 99th percentile"),
        _f("tpot_ms_p50", pa.float64(), "TPOT median"),
        _f("tpot_ms_p99", pa.float64(), "TPOT 99th percentile"),
        _f("itl_ms_p50", pa.float64(), "inter-token latency median"),
        _f("e2e_ms_p50", pa.float64(), "end-to-end latency median"),
        _f("output_tok_per_s", pa.float64(), "output tokens of successful requests / duration"),
        _f("requests_per_s", pa.float64(), "successful requests / duration"),
        _f("goodput_tok_per_s", pa.float64(), "output tokens of requests meeting every SLO / duration"),
        _f("goodput_requests_per_s", pa.float64(), "requests meeting every SLO / duration"),
        _f("duration_s", pa.float64(), "first request start to last request end"),
        _f("num_blocks", pa.int64(), "KV blocks of the variant"),
        _f("kv_tokens", pa.int64(), "KV capacity in tokens"),
        _f("kv_cache_gib", pa.float64(), "KV capacity in GiB"),
        _f("critical_concurrency", pa.float64(), "KV tokens / tokens per request"),
        _f("level", pa.string(), "the load level: conc~16, rate~2.5, chat/conc~4, prod/replay"),
        _f("workload", pa.string(), "the workload the level sent (null: the fixed-length random prompts)"),
        _f("request_rate_per_s", pa.float64(), "open loop: the target request rate; null for closed loop"),
        _f("achieved_rate_per_s", pa.float64(), "open loop: scheduled starts / the time the client took to start them"),
        _f("queue_delay_ms_p50", pa.float64(), "open loop: client queueing delay (start - scheduled start) median"),
        _f("queue_delay_ms_p99", pa.float64(), "open loop: client queueing delay 99th percentile"),
        _f("rate_delivered", pa.bool_(), "open loop: false when the client could not deliver the rate (see reason)"),
    ),
)


def _measure(name: str, what: str) -> tuple[Field, ...]:
    """A reported figure with its sample size and 95% interval (worthit.report)."""
    return (
        _f(name, pa.float64(), what),
        _f(f"{name}_n", pa.int32(), f"samples behind {name} (requests, items, or runs when interval_basis is runs)"),
        _f(f"{name}_ci95_low", pa.float64(), f"95% interval of {name}, low (equal to it for an exact count)"),
        _f(f"{name}_ci95_high", pa.float64(), f"95% interval of {name}, high (equal to it for an exact count)"),
    )


_REPORT_STATUS = (
    _f("status", pa.string(), "ok / failed / not_applicable", False),
    _f("reason", pa.string(), "why it failed or does not apply"),
)
_INTERVAL_BASIS = _f(
    "interval_basis",
    pa.string(),
    "what the 95% intervals rest on: 'N runs' (t-interval over independent runs of the level), 'single run' "
    "(order statistics or a bootstrap within one run), 'exact count', or why there is none",
)
# The figures a load level (and a deployment's promise, and its validation) is described by.
_LEVEL_MEASURES = (
    *_measure("ttft_ms_p50", "TTFT median"),
    *_measure("ttft_ms_p99", "TTFT 99th percentile"),
    *_measure("tpot_ms_p50", "TPOT median"),
    *_measure("tpot_ms_p99", "TPOT 99th percentile"),
    *_measure("output_tok_per_s", "output tokens/s"),
    *_measure("goodput_tok_per_s", "goodput tokens/s (requests meeting the interactive SLO)"),
)

REPORT_LEVELS = Table(
    "report_levels",
    "Report: per variant x load level, every figure with n and a 95% interval: over independent runs when the "
    "level was repeated (loadtest.repeats), else within its one run (order statistics for percentiles, a "
    "bootstrap over requests for rates), labelled by interval_basis.",
    (
        _VARIANT,
        _f("concurrency", pa.int32(), "closed-loop concurrency"),
        *_REPORT_STATUS,
        _f("n", pa.int32(), "measured requests (all runs)"),
        _f("n_errors", pa.int32(), "failed requests"),
        _f("runs", pa.int32(), "independent runs of this level"),
        _INTERVAL_BASIS,
        *_LEVEL_MEASURES,
        _f("runs_tpot_ms_p50_min", pa.float64(), "smallest TPOT P50 over runs (spread)"),
        _f("runs_tpot_ms_p50_max", pa.float64(), "largest TPOT P50 over runs (spread)"),
        _f("runs_output_tok_per_s_min", pa.float64(), "smallest output tok/s over runs (spread)"),
        _f("runs_output_tok_per_s_max", pa.float64(), "largest output tok/s over runs (spread)"),
        _f("meets_slo", pa.bool_(), "P99 TTFT and P99 TPOT within the interactive SLO (slo.ttft_ms, slo.tpot_ms)"),
        _f(
            "under_throughput_tpot_ms",
            pa.bool_(),
            "P99 TPOT within the throughput-first ceiling (decide.throughput_tpot_ms)",
        ),
    ),
)

REPORT_COMPARISON = Table(
    "report_comparison",
    "Report: every figure the decision rules judge, baseline vs variant, with the improvement factor's 95% "
    "interval and what the rules found (better / worse / no meaningful difference / undetermined).",
    (
        _VARIANT,
        _f("baseline", pa.string(), "the variant it is compared with", False),
        _f("optimisation", pa.string(), "the optimisation as the user turns it on"),
        _f("regime", pa.string(), "latency (interactive) / throughput (batch) / capacity"),
        _f("setting", pa.string(), "where it was measured: concurrency 4, 1500-token shared prefix, ..."),
        _f("quantity", pa.string(), "what is compared (TPOT P50, TTFT P50, output tok/s, KV blocks, ...)", False),
        _f("unit", pa.string(), "unit of the values"),
        *_measure("baseline_value", "the side without the optimisation"),
        *_measure("value", "the side with the optimisation"),
        _f("change_pct", pa.float64(), "(with - without) / without x 100"),
        *_measure("improvement", "factor by which the optimisation is better (> 1) or worse (< 1)"),
        _f("finding", pa.string(), "better / worse / no meaningful difference / undetermined / information"),
        _INTERVAL_BASIS,
        *_REPORT_STATUS,
    ),
)

REPORT_ACCURACY = Table(
    "report_accuracy",
    "Report: accuracy as a non-inferiority decision per variant x task: the change vs the baseline with its "
    "95% interval (paired over the documents both scored where lm-eval's samples exist, else the two "
    "standard errors combined), set against -decide.max_accuracy_drop_pt.",
    (
        _VARIANT,
        _f("baseline", pa.string(), "the variant compared with"),
        _f("task", pa.string(), "lm-eval task"),
        _f("metric", pa.string(), "the metric compared (acc_norm, acc, exact_match, ...)"),
        _f("filter", pa.string(), "lm-eval filter"),
        _f("baseline_value_pct", pa.float64(), "the baseline's score in %"),
        _f("value_pct", pa.float64(), "the variant's score in %"),
        *_measure("delta_pt", "variant - baseline in percentage points"),
        _f("delta_stderr_pt", pa.float64(), "standard error of delta_pt"),
        _f("method", pa.string(), "paired (per-document differences) / unpaired (standard errors combined)"),
        _f("bound_pt", pa.float64(), "the largest acceptable drop in points"),
        _f("decision", pa.string(), "acceptable / unacceptable / inconclusive", False),
        _f("items_needed", pa.int64(), "items that would decide an inconclusive task at the observed variance"),
        _f("task_size", pa.int64(), "items the task has, where known"),
        _f("note", pa.string(), "what the decision rests on, in words"),
        *_REPORT_STATUS,
    ),
)

REPORT_VERDICTS = Table(
    "report_verdicts",
    "Report: the decision table, one row per optimisation (a variant against the baseline), per regime: "
    "latency-first (interactive SLO) and throughput-first (output tok/s under a TPOT ceiling), with the "
    "accuracy decision, from the configurable `decide:` rules.",
    (
        _VARIANT,
        _f("baseline", pa.string(), "the variant it is compared with"),
        _f("optimisation", pa.string(), "the optimisation as the user turns it on, e.g. prefix caching (on vs off)"),
        _f("description", pa.string(), "the variant's description from the config"),
        _f(
            "outcome",
            pa.string(),
            "adopt / reject / inconclusive / not applicable / failed / not run / control (it repeats its baseline)",
            False,
        ),
        _f("condition", pa.string(), "where the outcome holds, e.g. latency-first, up to concurrency 4"),
        _f("latency_outcome", pa.string(), "the latency-first outcome"),
        _f("latency_detail", pa.string(), "per setting, e.g. adopt up to concurrency 4, reject from 16"),
        _f("throughput_outcome", pa.string(), "the throughput-first outcome"),
        _f("throughput_detail", pa.string(), "the best output tok/s under the TPOT ceiling, each side"),
        _f("accuracy_outcome", pa.string(), "acceptable / unacceptable / inconclusive / not measured / not needed"),
        _f("accuracy_detail", pa.string(), "the deciding task's change, interval and bound"),
        _f("benefit", pa.string(), "benefits demonstrated"),
        _f("accuracy_cost", pa.string(), "accuracy change range"),
        _f("worst_accuracy_delta_pt", pa.float64(), "largest per-task accuracy drop in points (negative)"),
        _f("effort", pa.string(), "effort label from decide.effort"),
        _f("reason", pa.string(), "why, in words"),
        _f("settle", pa.string(), "what would settle an inconclusive outcome"),
        _INTERVAL_BASIS,
        _f("status", pa.string(), "ok / failed / not_applicable / not run of the variant's results", False),
        _f("role", pa.string(), "optimisation / control / helper (a draft model served alone for gamma)"),
        _f("effect", pa.string(), "the figure that decided it, as measured, with its interval, in words"),
        _f("accuracy_summary", pa.string(), "the worst task's change with its interval, and the decision"),
        _f("why", pa.string(), "the reason in one line (at most 200 characters)"),
    ),
)

REPORT_CAPACITY = Table(
    "report_capacity",
    "Report: per variant, KV capacity set against the knees of the throughput and latency curves, and "
    "memory-bandwidth utilisation at the lowest level.",
    (
        _VARIANT,
        _f("weight_bytes", pa.int64(), "weight bytes read per decode step (as served)"),
        _f("num_blocks", pa.int64(), "KV blocks (exact count)"),
        _f("kv_cache_gib", pa.float64(), "KV capacity in GiB"),
        _f("kv_critical_concurrency", pa.float64(), "KV tokens / tokens per request"),
        _f(
            "throughput_knee_concurrency",
            pa.int32(),
            "lowest level reaching decide.knee.throughput_fraction of peak output tok/s",
        ),
        _f(
            "latency_knee_concurrency",
            pa.int32(),
            "highest level whose TPOT P50 and TTFT P50 both stay within decide.knee.latency_factor x the "
            "lowest level's",
        ),
        _f("highest_level", pa.int32(), "highest concurrency measured"),
        _f("preemptions", pa.float64(), "vllm:num_preemptions_total over the load levels"),
        _f("bound", pa.string(), "what limits concurrency"),
        _f("tpot_ms_p50", pa.float64(), "TPOT P50 at the lowest level"),
        _f("mbu_pct", pa.float64(), "(weight + KV bytes per step) / TPOT / peak bandwidth in %; null when unknown"),
        _f("peak_bandwidth_gb_s", pa.float64(), "peak memory bandwidth used for MBU"),
        _f("bandwidth_source", pa.string(), "datasheet or config the peak comes from"),
    ),
)

REPORT_CAPABILITY = Table(
    "report_capability",
    "Report: the capability boundary of this hardware + model (fastest TPOT, highest throughput, KV "
    "capacity, largest prefill saving).",
    (
        _f("quantity", pa.string(), "the boundary", False),
        *_measure("value", "the best figure measured"),
        _f("unit", pa.string(), "unit"),
        _f("variant", pa.string(), "the variant reaching it"),
        _INTERVAL_BASIS,
        _f("note", pa.string(), "setting and what bounds it"),
    ),
)

REPORT_PREFIX = Table(
    "report_prefix",
    "Report: prefix caching per variant x shared-prefix length: TTFT with the cache on and off, the change, "
    "and the prefix-cache hit rate in %.",
    (
        _VARIANT,
        _f("prefix_caching", pa.bool_(), "automatic prefix caching on in this variant"),
        _f("prefix_tokens", pa.int32(), "shared prefix length"),
        *_measure("ttft_ms_p50", "TTFT median"),
        _f("reference", pa.string(), "the variant with the cache the other way"),
        *_measure("reference_ttft_ms_p50", "its TTFT median at the same length"),
        _f("change_pct", pa.float64(), "(this - reference) / reference x 100"),
        _f("hit_rate_pct", pa.float64(), "prefix-cache hit tokens / queried tokens over the measured requests, %"),
        _f("ttft_slope_ms_per_1k_tokens", pa.float64(), "least-squares slope of TTFT P50 vs prefix length"),
        _INTERVAL_BASIS,
        *_REPORT_STATUS,
    ),
)

REPORT_SWEET_SPOT = Table(
    "report_sweet_spot",
    "Report: the measured sweet spot per searched variant (sweet_spot.variants): the highest concurrency whose "
    "P99 TTFT and P99 TPOT meet the SLO, as a bracket [passes, fails) from the grid and the search's probes.",
    (
        _VARIANT,
        _f("outcome", pa.string(), "bracketed, probe_limit, all_pass (not reached), none_pass or no_grid"),
        _f("sweet_spot_concurrency", pa.int32(), "highest concurrency measured to meet the SLO below the first miss"),
        _f("first_miss_concurrency", pa.int32(), "lowest concurrency measured to miss it"),
        _f("bracket_width", pa.int32(), "first miss - sweet spot (the search stops at sweet_spot.width)"),
        _f("grid_levels", pa.int32(), "grid levels judged (run 1 of loadtest.levels)"),
        _f("probes", pa.int32(), "levels the search measured between grid levels"),
        *_measure("ttft_ms_p99", "TTFT P99 at the sweet spot"),
        *_measure("tpot_ms_p99", "TPOT P99 at the sweet spot"),
        _f("description", pa.string(), "the search's answer in words"),
        _INTERVAL_BASIS,
        *_REPORT_STATUS,
    ),
)

REPORT_TIMELINE = Table(
    "report_timeline",
    "Report: the server's timeline per variant x closed-loop level (loadtest.timeline_interval_s): the fullest "
    "KV usage, the most requests running and waiting, the preemptions during the measured requests, and "
    "whether they agree with the KV-derived critical concurrency (KV full and preemptions begin above it).",
    (
        _VARIANT,
        _f("level", pa.string(), "the load level (conc~16, chat/conc~4)"),
        _f("concurrency", pa.int32(), "its closed-loop concurrency"),
        _f("samples", pa.int32(), "scrapes during the measured requests (all runs)"),
        _f("kv_usage_max_pct", pa.float64(), "fullest KV-cache usage sampled, %"),
        _f("requests_running_max", pa.float64(), "most requests running at once"),
        _f("requests_waiting_max", pa.float64(), "most requests waiting at once"),
        _f("preemptions", pa.float64(), "preemptions during the measured requests (counter difference)"),
        _f("kv_critical_concurrency", pa.float64(), "KV tokens / tokens per request (report_capacity)"),
        _f("check", pa.string(), "agrees / disagrees with the critical concurrency, or why it was not checked"),
        _f("note", pa.string(), "the variant's check: its verdict (worthit.loadgen.timeline.VERDICTS) and why"),
        *_REPORT_STATUS,
    ),
)

REPORT_SPECDEC = Table(
    "report_specdec",
    "Report: speculative decoding per variant x load level, from measurements only: the spec-decode counters "
    "(drafts, draft tokens, accepted), alpha and the acceptance rate, gamma, c at the level's concurrency, "
    "predicted S = alpha / (k gamma + c) and the measured TPOT speed-up with its interval.",
    (
        _VARIANT,
        _f("base_variant", pa.string(), "the target served without speculation"),
        _f("method", pa.string(), "speculative method (ngram, draft_model, eagle, ...)"),
        _f("k", pa.int32(), "draft tokens proposed per step"),
        _f("concurrency", pa.int32(), "closed-loop concurrency"),
        _f("drafts", pa.float64(), "speculative steps that proposed drafts (counter delta)"),
        _f("draft_tokens", pa.float64(), "draft tokens proposed (counter delta)"),
        _f("accepted_tokens", pa.float64(), "draft tokens accepted (counter delta)"),
        _f("alpha", pa.float64(), "tokens per verify step = 1 + accepted / drafts; null when nothing was proposed"),
        _f("acceptance_rate_pct", pa.float64(), "accepted / proposed draft tokens, %"),
        _f("gamma", pa.float64(), "draft step cost / target step cost (0 for model-free drafting)"),
        _f("c", pa.float64(), "verify step cost / plain decode step cost at this concurrency"),
        _f("c_source", pa.string(), "how c was measured at this concurrency"),
        _f("predicted_speedup", pa.float64(), "S = alpha / (k gamma + c)"),
        *_measure("measured_speedup", "base TPOT P50 / speculative TPOT P50"),
        _f("rule", pa.string(), "predicted S against decide.min_predicted_speedup"),
        _f("note", pa.string(), "what a missing number lacks"),
        _INTERVAL_BASIS,
        *_REPORT_STATUS,
    ),
)

REPORT_FAILURES = Table(
    "report_failures",
    "Report: every experiment that failed, does not apply, or was not run, with its reason (the root-cause "
    "line from the log where there is one).",
    (
        _f("variant", pa.string(), "variant"),
        _f("experiment", pa.string(), "the result, e.g. load/conc~4, kv, accuracy", False),
        _f("status", pa.string(), "failed / not_applicable / not run", False),
        _f("reason", pa.string(), "why"),
        _f("log_tail", pa.string(), "the last lines of the log"),
    ),
)

REPORT_DEPLOYMENTS = Table(
    "report_deployments",
    "Report: recommended deployments, one per scenario (latency-first: the SLO-feasible concurrency; "
    "throughput-first: the most output tok/s under the TPOT ceiling), each an exact `vllm serve` argv with "
    "the concurrency and the figures it promises. The validate_deployment stage (worthit.deploy) serves each "
    "argv as printed and loads it at that concurrency (results/<study>/deployment~<scenario>/load*.parquet).",
    (
        _f("scenario", pa.string(), "latency / throughput", False),
        *_REPORT_STATUS,
        _f("variant", pa.string(), "the variant deployed"),
        _f("model", pa.string(), "the model as the config names it (hub id, or the path vLLM loads)"),
        _f("model_source", pa.string(), "the config's model source"),
        _f("argv", pa.list_(pa.string()), "the exact command, one argument per item"),
        _f("command", pa.string(), "argv shell-quoted, to paste"),
        _f("max_num_seqs", pa.int32(), "--max-num-seqs in argv"),
        _f("concurrency", pa.int32(), "the concurrency the promise holds at (closed-loop requests in flight)"),
        _f("chosen_by", pa.string(), "which measurement chose each flag"),
        _f("slo_ttft_ms", pa.float64(), "P99 TTFT bound promised (latency scenario)"),
        _f("slo_tpot_ms", pa.float64(), "P99 TPOT bound promised (TPOT ceiling in the throughput scenario)"),
        _f("runs", pa.int32(), "independent runs behind the promise"),
        _INTERVAL_BASIS,
        *_LEVEL_MEASURES,
    ),
)

REPORT_VALIDATION = Table(
    "report_validation",
    "Report: each recommended deployment's promise against its validation runs (worthit.deploy), per figure; "
    "a miss is a measured value beyond the promised 95% interval on the worse side.",
    (
        _f("scenario", pa.string(), "latency / throughput", False),
        _f("variant", pa.string(), "the variant deployed"),
        _f("quantity", pa.string(), "the figure", False),
        _f("unit", pa.string(), "unit"),
        *_measure("promised", "the figure the report promised"),
        *_measure("measured", "the figure the validation run measured"),
        _f("outcome", pa.string(), "met / miss / better than promised / not validated", False),
        *_REPORT_STATUS,
    ),
)


PREFIX_SUMMARY = Table(
    "prefix_summary",
    "Prefix caching per variant x shared-prefix length: TTFT with the cache on vs off, hit rate, and the "
    "slope of TTFT against prefix length (least squares over the lengths).",
    (
        _VARIANT,
        _f("status", pa.string(), "ok / failed / not_applicable", False),
        _f("reason", pa.string(), "why the length failed or does not apply"),
        _f("prefix_caching", pa.bool_(), "automatic prefix caching on in this variant"),
        _f("prefix_tokens", pa.int32(), "shared prefix length"),
        _f("n", pa.int32(), "measured requests"),
        _f("n_errors", pa.int32(), "requests that failed"),
        _f("ttft_ms_p50", pa.float64(), "TTFT median"),
        _f("ttft_ms_p99", pa.float64(), "TTFT 99th percentile"),
        _f("hit_rate", pa.float64(), "prefix-cache hit tokens / queried tokens over the measured requests"),
        _f("reference_variant", pa.string(), "the cache-off variant this row is compared with"),
        _f("ref_ttft_ms_p50", pa.float64(), "reference TTFT median at the same length"),
        _f("ref_ttft_ms_p99", pa.float64(), "reference TTFT 99th percentile at the same length"),
        _f("ttft_p50_reduction_pct", pa.float64(), "(ref - this) / ref x 100 of TTFT P50"),
        _f("ttft_p99_reduction_pct", pa.float64(), "(ref - this) / ref x 100 of TTFT P99"),
        _f("ttft_slope_ms_per_1k_tokens", pa.float64(), "least-squares slope of TTFT P50 vs prefix length"),
        _f("ref_ttft_slope_ms_per_1k_tokens", pa.float64(), "the reference variant's slope"),
        _f("slope_reduction_pct", pa.float64(), "(ref slope - slope) / ref slope x 100"),
    ),
)

VERIFY = Table(
    "verify_requests",
    "Verify-step timing on the base variant: waves of `concurrency` requests of a cached context plus m new "
    "tokens, one output step each; TTFT(m = k + 1) - TTFT(m = 1) at a concurrency is the extra cost of "
    "verifying k draft tokens for that many sequences in one step.",
    (
        _VARIANT,
        _f("new_tokens", pa.int32(), "uncached tokens after the context (1 = a plain decode step)", False),
        _f("context_tokens", pa.int32(), "cached context before them", False),
        _f("concurrency", pa.int32(), "requests of this size sent at once (one batch: a step of that many sequences)"),
        _f("request_id", pa.int32(), "index of the request (sizes interleaved)", False),
        _f("ttft_ms", pa.float64(), "time to first content chunk"),
        _f("success", pa.bool_(), "request completed", False),
        _f("error", pa.string(), "error reason; null on success"),
    ),
)

SPECDEC_SUMMARY = Table(
    "specdec_summary",
    "Speculative decoding per variant x concurrency: alpha, gamma, c, predicted S = alpha / (k gamma + c) "
    "next to the measured TPOT speed-up over the base variant.",
    (
        _VARIANT,
        _f("status", pa.string(), "ok / failed / not_applicable", False),
        _f("reason", pa.string(), "why it failed or does not apply"),
        _f("method", pa.string(), "speculative method (ngram, draft_model, eagle, ...)"),
        _f("k", pa.int32(), "num_speculative_tokens: draft tokens proposed per step"),
        _f("concurrency", pa.int32(), "closed-loop concurrency of the load level"),
        _f("base_variant", pa.string(), "the target served without speculation"),
        _f("draft_variant", pa.string(), "the variant serving the draft model alone (gamma)"),
        _f("alpha", pa.float64(), "tokens per verify step = 1 + accepted / drafts (as vLLM logs it)"),
        _f("acceptance_rate", pa.float64(), "accepted / proposed draft tokens"),
        _f("draft_coverage", pa.float64(), "decode steps that carried a draft / all decode steps"),
        _f("alpha_effective", pa.float64(), "decode tokens / decode steps, steps without a draft included"),
        _f("gamma", pa.float64(), "draft step cost / target step cost (0 for model-free drafting)"),
        _f(
            "c",
            pa.float64(),
            "verify step cost / plain decode step cost, timed on the base variant at this concurrency",
        ),
        _f("c_implied", pa.float64(), "alpha TPOT_spec / TPOT_base - k gamma: c implied by the measurement"),
        _f("predicted_speedup", pa.float64(), "S = alpha / (k gamma + c)"),
        _f("tpot_ms_p50", pa.float64(), "TPOT median with speculation"),
        _f("base_tpot_ms_p50", pa.float64(), "TPOT median of the base variant at the same concurrency"),
        _f("measured_speedup", pa.float64(), "base TPOT P50 / speculative TPOT P50"),
        _f("ttft_ms_p99", pa.float64(), "TTFT 99th percentile with speculation"),
        _f("base_ttft_ms_p99", pa.float64(), "TTFT 99th percentile of the base variant"),
        _f("verdict", pa.string(), "'not worth trying' if predicted S < threshold, else 'worth trying'"),
        _f("note", pa.string(), "what a missing number lacks"),
    ),
)


_CHECK = pa.struct(
    [
        pa.field("rule", pa.string()),
        pa.field("status", pa.string()),
        pa.field("detail", pa.string()),
        pa.field("source", pa.string()),
    ]
)

PLAN = Table(
    "plan",
    "worthit plan: per variant, its prerequisites on the planned hardware (met / not_met / unknown, with the "
    "rule's source) and its figures predicted on paper (worthit.plan): weights, KV pool and blocks, critical "
    "concurrency, decode roofline per load level, knee, throughput ceiling, wall time. Null where an input "
    "(model shapes, bandwidth) is unknown; notes say which.",
    (
        _VARIANT,
        _f("model", pa.string(), "model name from the study config", False),
        _f("model_config", pa.string(), "where the model's shapes came from (given file, manifest, hub, unknown)"),
        _f("status", pa.string(), "ok, or not_applicable when a prerequisite is not met", False),
        _f("reason", pa.string(), "the first unmet prerequisite, as the not-applicable records state it"),
        _f("failed_rule", pa.string(), "name of that rule"),
        _f("checks", pa.list_(_CHECK), "every prerequisite that concerns the variant: rule, status, detail, source"),
        _f("gpu", pa.string(), "GPU planned for (or CPU)"),
        _f("gpu_count", pa.int32(), "GPUs available to the plan"),
        _f("tensor_parallel_size", pa.int32(), "tensor-parallel size of the variant"),
        _f("data_parallel_size", pa.int32(), "data-parallel size (engine replicas)"),
        _f(
            "weight_bytes",
            pa.int64(),
            "weight bytes as served (the checkpoint's tensors at the served dtype: plan.served_weight_bytes; "
            "else computed from the shapes)",
        ),
        _f(
            "weight_source",
            pa.string(),
            "checkpoint tensors at DTYPE, checkpoint files (no shapes known), or shapes (dtype or quantisation)",
        ),
        _f("kv_cache_dtype", pa.string(), "KV cache dtype argument (auto = the served dtype)"),
        _f("kv_bytes_per_token", pa.int64(), "2 x layers x KV heads x head dim x dtype bytes"),
        _f("block_size_tokens", pa.int32(), "tokens per KV block"),
        _f("gpu_memory_utilization", pa.float64(), "share of GPU memory vLLM may use"),
        _f("gpu_memory_gib", pa.float64(), "GPU memory as CUDA reports it, per GPU"),
        _f("max_num_seqs", pa.int32(), "max-num-seqs (vLLM's default for this hardware when unset)"),
        _f("tokens_per_request", pa.int32(), "prompt + output tokens of the study's requests"),
        _f(
            "overhead_gib",
            pa.float64(),
            "per-GPU memory vLLM keeps besides weights and KV (activations, graphs, workspaces)",
        ),
        _f("overhead_source", pa.string(), "model, config or calibration the overhead comes from"),
        _f("kv_memory_gib", pa.float64(), "predicted KV pool per GPU"),
        _f("num_blocks", pa.int64(), "predicted KV blocks (per engine replica)"),
        _f("kv_tokens", pa.int64(), "num_blocks x block_size_tokens"),
        _f("critical_concurrency", pa.float64(), "kv_tokens x replicas / tokens_per_request"),
        _f("peak_bandwidth_gb_s", pa.float64(), "peak memory bandwidth of the GPUs one replica spans, GB/s"),
        _f("bandwidth_fraction", pa.float64(), "share of peak bandwidth decode is expected to reach"),
        _f("bandwidth_source", pa.string(), "assumed, or the calibration it was measured in"),
        _f("levels", pa.list_(pa.int32()), "concurrencies predicted (1 and the study's load levels)"),
        _f(
            "tpot_floor_ms",
            pa.list_(pa.float64()),
            "roofline TPOT per level: max(bytes per step / bandwidth, FLOPs / tensor throughput)",
        ),
        _f("tpot_expected_ms", pa.list_(pa.float64()), "tpot_floor_ms / bandwidth_fraction per level"),
        _f("output_tok_per_s", pa.list_(pa.float64()), "concurrency / tpot_expected per level"),
        _f("tpot_floor_ms_c1", pa.float64(), "TPOT floor at concurrency 1"),
        _f("tpot_expected_ms_c1", pa.float64(), "expected TPOT at concurrency 1"),
        _f("compute_knee_concurrency", pa.float64(), "concurrency where a decode step turns compute-bound"),
        _f("knee_concurrency", pa.float64(), "predicted knee: the lowest of the KV, max-num-seqs and compute limits"),
        _f("bound", pa.string(), "which limit sets the knee"),
        _f("throughput_ceiling_tok_per_s", pa.float64(), "expected output tok/s at the KV / max-num-seqs limit"),
        _f(
            "est_wall_s",
            pa.float64(),
            "estimated wall time of the variant's measurements (server start included, lm-eval excluded)",
        ),
        _f("notes", pa.string(), "what could not be predicted and why"),
    ),
)

PLAN_VS_MEASURED = Table(
    "plan_vs_measured",
    "The plan set against the measurement (worthit.plan.compare): per variant and quantity the predicted and "
    "measured figure, measured / predicted, and whether it lies within the tolerance (relative: |ratio - 1| <= "
    "tolerance; factor: 1/tolerance <= ratio <= tolerance).",
    (
        _VARIANT,
        _f(
            "quantity",
            pa.string(),
            "kv_blocks, critical_concurrency, knee_concurrency, tpot_ms_c<lowest level>, output_tok_per_s",
            False,
        ),
        _f("unit", pa.string(), "unit of predicted and measured"),
        _f("predicted", pa.float64(), "the plan's figure"),
        _f("measured", pa.float64(), "the study's figure"),
        _f("ratio", pa.float64(), "measured / predicted"),
        _f("tolerance", pa.float64(), "allowed deviation (see tolerance_kind)"),
        _f("tolerance_kind", pa.string(), "relative or factor"),
        _f("within_tolerance", pa.bool_(), "null when either figure is missing"),
        _f("flag", pa.string(), "over / under when outside the tolerance"),
        _f("note", pa.string(), "how the measured figure was taken (level, knee rule, MBU)"),
    ),
)


STUDY_COST = Table(
    "study_cost",
    "What the study cost (worthit.cost; results/<study>/cost.parquet): one row per server (each variant, each "
    "validated deployment) with its start time, serving time, lifetime and GPU-minutes; one per stage "
    "(Snakemake rule) with its jobs' wall and CPU time from their benchmark files; one for the study's totals.",
    (
        _f("scope", pa.string(), "server, stage or study", False),
        _f("name", pa.string(), "the variant or deployment~<scenario> (server), the rule (stage), the study", False),
        _f("jobs", pa.int32(), "jobs with a benchmark file (a server: its serve job)"),
        _f("wall_s", pa.float64(), "server: lifetime, start to stop; stage and study: summed wall time of its jobs"),
        _f("wall_s_max", pa.float64(), "stage: its longest job"),
        _f("cpu_s", pa.float64(), "stage and study: summed CPU time of the jobs' processes"),
        _f("max_rss_mib", pa.float64(), "stage and study: the largest peak resident memory of one job"),
        _f("server_start_s", pa.float64(), "server: supervisor start to vLLM listening (last start in its log)"),
        _f("serving_s", pa.float64(), "server: listening to stop (its measurements and the waits between them)"),
        _f("gpus", pa.int32(), "server: GPUs it claimed (0 on the CPU)"),
        _f("gpu_minutes", pa.float64(), "server: lifetime x gpus / 60; study: the sum"),
        _f("planned_wall_s", pa.float64(), "server: the plan's estimated wall time (est_wall_s), where a plan exists"),
        _f("device", pa.string(), "server: vLLM's device (cuda, cpu) from its log"),
        _f("source", pa.string(), "where the times come from (benchmark file, server log)"),
        _f("note", pa.string(), "why a figure is missing or a lower bound"),
    ),
)

REPORT_TABLES = (
    REPORT_VERDICTS,
    REPORT_DEPLOYMENTS,
    REPORT_VALIDATION,
    REPORT_ACCURACY,
    REPORT_COMPARISON,
    REPORT_PREFIX,
    REPORT_SPECDEC,
    REPORT_SWEET_SPOT,
    REPORT_TIMELINE,
    REPORT_CAPABILITY,
    REPORT_CAPACITY,
    REPORT_LEVELS,
    REPORT_FAILURES,
)


TABLES: dict[str, Table] = {
    t.name: t
    for t in (
        LOAD_REQUESTS,
        SERVER_TIMELINE,
        KV_CACHE,
        PREFIX,
        SWEET_SPOT,
        ACCURACY,
        SUMMARY,
        PREFIX_SUMMARY,
        VERIFY,
        SPECDEC_SUMMARY,
        ACCURACY_SUMMARY,
        ACCURACY_SAMPLES,
        PLAN,
        PLAN_VS_MEASURED,
        STUDY_COST,
        *REPORT_TABLES,
    )
}


def register(table: Table) -> Table:
    """Add an experiment's table to :data:`TABLES` (worthit.measurements); a second, different table of
    the same name is refused."""
    known = TABLES.get(table.name)
    if known is not None and known != table:
        raise ValueError(f"a Parquet table named {table.name!r} is already defined; give the new one another name")
    TABLES[table.name] = table
    return table


class SchemaError(InputError):
    """A Parquet file does not match the table it claims to be."""


class UnreadableFile(InputError):
    """A file is not Parquet at all (cut short, overwritten, not written by worthit): not a schema mismatch,
    which a reader may answer by reading the file raw."""


@contextlib.contextmanager
def _readable(path: str | os.PathLike[str]) -> Iterator[None]:
    """pyarrow's error on a file that is not Parquet becomes :class:`UnreadableFile` naming it and what to
    do (a missing file stays :class:`FileNotFoundError`)."""
    try:
        yield
    except FileNotFoundError:
        raise
    except (pa.ArrowException, OSError) as e:
        raise UnreadableFile(
            f"{path}: not a readable Parquet file ({e}); worthit writes each result whole (a temporary file, "
            "then a rename), so it was damaged or replaced afterwards: delete it and run snakemake again to "
            "measure it anew"
        ) from None


def _decoded(raw: Mapping[bytes, bytes] | None) -> dict[str, str]:
    return {k.decode(): v.decode() for k, v in (raw or {}).items()}


def read_arrow(path: str | os.PathLike[str]) -> pa.Table:
    """The whole Parquet file as Arrow, or :class:`UnreadableFile`."""
    with _readable(path):
        return pq.read_table(path)


def read_file_metadata(path: str | os.PathLike[str]) -> dict[str, str]:
    """The Parquet file's key-value metadata (its footer alone), decoded, or :class:`UnreadableFile`."""
    with _readable(path):
        return _decoded(pq.read_schema(path).metadata)


def _encode_meta(meta: Mapping[str, Any]) -> dict[bytes, bytes]:
    out: dict[bytes, bytes] = {}
    for k, v in meta.items():
        key = k if k.startswith(META_PREFIX) else META_PREFIX + k
        out[key.encode()] = (v if isinstance(v, str) else json.dumps(v, default=str)).encode()
    return out


def to_arrow(table: Table, rows: Sequence[Mapping[str, Any]] | Any) -> pa.Table:
    """Rows (a list of dicts or a pandas DataFrame) -> an Arrow table with exactly the table's columns."""
    if hasattr(rows, "to_dict"):  # a DataFrame
        rows = rows.to_dict("records")
    rows = list(rows)
    unknown = {k for r in rows for k in r} - set(table.columns)
    if unknown:
        raise SchemaError(f"table {table.name}: unknown columns {sorted(unknown)}; allowed: {table.columns}")
    cols = {f.name: [r.get(f.name) for r in rows] for f in table.fields}
    return pa.Table.from_pydict(cols, schema=table.schema)


def write(
    path: str | os.PathLike[str],
    table: Table,
    rows: Sequence[Mapping[str, Any]] | Any = (),
    *,
    status: str = STATUS_OK,
    reason: str | None = None,
    log_tail: str | None = None,
    metadata: Mapping[str, Any] | None = None,
) -> Path:
    """Write rows atomically: a temp file in the same folder, fsync, then rename over ``path``."""
    if status not in STATUSES:
        raise ValueError(f"status {status!r} not in {STATUSES}")
    arrow = to_arrow(table, rows)
    meta = dict(arrow.schema.metadata or {})
    # nothing secret is written (worthit.secrets; docs/security.md): keys, tokens, URL credentials
    said = {"status": status, "reason": reason or "", "log_tail": log_tail or ""}
    meta.update(_encode_meta(secrets.redact(said)))
    meta.update(_encode_meta(secrets.redact(dict(metadata or {}))))
    arrow = arrow.replace_schema_metadata(meta)
    path = Path(path)
    with atomic.open_binary(path) as fh:
        pq.write_table(arrow, fh)
    return path


def write_failure(
    path: str | os.PathLike[str],
    table: Table,
    reason: str,
    *,
    log_tail: str = "",
    status: str = STATUS_FAILED,
    metadata: Mapping[str, Any] | None = None,
) -> Path:
    """A failed (or not applicable) experiment: zero rows, the reason and the log tail in metadata."""
    return write(path, table, [], status=status, reason=reason, log_tail=log_tail, metadata=metadata)


@dataclass(frozen=True)
class Result:
    """A table read back: its rows as Arrow, its status and its decoded metadata."""

    table: pa.Table
    status: str
    reason: str
    log_tail: str
    metadata: dict[str, Any]

    @property
    def ok(self) -> bool:
        return self.status == STATUS_OK

    def to_pandas(self) -> Any:
        return self.table.to_pandas()


def read(path: str | os.PathLike[str], table: Table) -> Result:
    """Read a file written by :func:`write`, checking it is the expected table."""
    arrow = read_arrow(path)
    meta = _decoded(arrow.schema.metadata)
    name = meta.get(f"{META_PREFIX}table")
    if name != table.name:
        raise SchemaError(f"{path}: holds table {name!r}, expected {table.name!r}")
    missing = [f for f in table.fields if f.name not in arrow.column_names]
    if any(not f.nullable for f in missing):
        raise SchemaError(f"{path}: table {table.name} lacks columns {sorted(f.name for f in missing)}")
    for f in missing:  # a nullable column added after the file was written reads as nulls
        arrow = arrow.append_column(pa.field(f.name, f.type), pa.nulls(arrow.num_rows, f.type))
    decoded: dict[str, Any] = {}
    for k, v in meta.items():
        if not k.startswith(META_PREFIX):
            continue
        try:
            decoded[k[len(META_PREFIX) :]] = json.loads(v)
        except json.JSONDecodeError:
            decoded[k[len(META_PREFIX) :]] = v
    return Result(
        table=arrow.select(table.columns),
        status=str(decoded.get("status", STATUS_OK)),
        reason=str(meta.get(f"{META_PREFIX}reason", "")),
        log_tail=str(meta.get(f"{META_PREFIX}log_tail", "")),
        metadata=decoded,
    )


def docs(tables: Iterable[Table] = TABLES.values()) -> str:
    return "\n\n".join(t.markdown() for t in tables)

"""The KV-cache experiment's table: the capacity of one served variant."""

from __future__ import annotations

import pyarrow as pa

from worthit.schemas.definition import VARIANT, Table, column

KV_CACHE = Table(
    "kv_cache",
    "KV-cache capacity of one served variant, from /metrics cache_config_info and the model config.",
    (
        VARIANT,
        column("num_blocks", pa.int64(), "KV blocks the engine allocated (num_gpu_blocks)"),
        column("block_size_tokens", pa.int32(), "tokens per KV block"),
        column("kv_tokens", pa.int64(), "num_blocks * block_size_tokens"),
        column("cache_dtype", pa.string(), "KV cache dtype as the engine reports it"),
        column("kv_bytes_per_token", pa.int64(), "2 * layers * kv_heads * head_dim * dtype bytes"),
        column("kv_cache_gib", pa.float64(), "kv_tokens * kv_bytes_per_token / 2^30"),
        column("prefix_caching", pa.bool_(), "automatic prefix caching enabled"),
        column("tokens_per_request", pa.int32(), "prompt + output tokens of the study's workload"),
        column("critical_concurrency", pa.float64(), "kv_tokens / tokens_per_request"),
        column("weight_bytes", pa.int64(), "weight bytes as vLLM serves them (floating tensors at the served dtype)"),
    ),
)


REPORT_CAPACITY = Table(
    "report_capacity",
    "Report: per variant, KV capacity set against the knees of the throughput and latency curves, and "
    "memory-bandwidth utilisation at the lowest level.",
    (
        VARIANT,
        column("weight_bytes", pa.int64(), "weight bytes read per decode step (as served)"),
        column("num_blocks", pa.int64(), "KV blocks (exact count)"),
        column("kv_cache_gib", pa.float64(), "KV capacity in GiB"),
        column("kv_critical_concurrency", pa.float64(), "KV tokens / tokens per request"),
        column(
            "throughput_knee_concurrency",
            pa.int32(),
            "lowest level reaching decide.knee.throughput_fraction of peak output tok/s",
        ),
        column(
            "latency_knee_concurrency",
            pa.int32(),
            "highest level whose TPOT P50 and TTFT P50 both stay within decide.knee.latency_factor x the "
            "lowest level's",
        ),
        column("highest_level", pa.int32(), "highest concurrency measured"),
        column("preemptions", pa.float64(), "vllm:num_preemptions_total over the load levels"),
        column("bound", pa.string(), "what limits concurrency"),
        column("tpot_ms_p50", pa.float64(), "TPOT P50 at the lowest level"),
        column("mbu_pct", pa.float64(), "(weight + KV bytes per step) / TPOT / peak bandwidth in %; null when unknown"),
        column("peak_bandwidth_gb_s", pa.float64(), "peak memory bandwidth used for MBU"),
        column("bandwidth_source", pa.string(), "datasheet or config the peak comes from"),
    ),
)

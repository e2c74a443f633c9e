"""The prefix-caching experiment's measurement: one shared-prefix length on a variant's server, written as raw
request rows (``prefix_requests``) with the measured requests' counter deltas. Its analysis (TTFT with the cache
on vs off, hit rate, slope of TTFT against prefix length) is the report's (:mod:`.report`), the one place those
figures are computed.

Each length sends one common prefix of L tokens followed by a unique suffix per request, as token ids so
the prefix is byte-identical. Warm-up requests with the same prefix go first and are excluded: they put
the prefix in the cache, so the measured requests show the steady state a chat system with a long system
prompt sees. The hit rate is the /metrics prefix-cache counter delta over the measured requests only.
Prefixes differ between lengths (seeded by the length), so one length never warms another.
"""

from __future__ import annotations

import asyncio
import logging
from typing import Any

from worthit import prom
from worthit.config import Study
from worthit.experiments.prefix.section import section
from worthit.experiments.prefix.tables import PREFIX
from worthit.loadgen.client import ClientConfig, closed_loop
from worthit.loadgen.prompts import SharedPrefixWorkload, load_tokenizer
from worthit.metrics import percentile, prometheus_delta
from worthit.models import Manifest
from worthit.server import ServerState
from worthit.stages import consume, counters, result_meta

log = logging.getLogger("worthit")


def run_prefix_length(
    url: str,
    model: str,
    *,
    tokenizer_dir: str,
    prefix_tokens: int,
    suffix_tokens: int,
    output_tokens: int,
    num_requests: int,
    concurrency: int = 1,
    warmup: int = 1,
    seed: int = 0,
    timeout_s: float = 600.0,
    api_key: str | None = None,
) -> tuple[list[dict[str, Any]], dict[str, Any]]:
    """One shared-prefix length: per-request rows and metadata with the measured requests' counter deltas
    (``api_key``: the server's, sent with every request and scrape)."""
    tok = load_tokenizer(tokenizer_dir)
    specs = SharedPrefixWorkload(
        prefix_tokens, suffix_tokens, output_tokens, warmup + num_requests, seed=seed * 1_000_003 + prefix_tokens
    ).build(tok)
    warm, measured = specs[:warmup], specs[warmup:]
    cfg = ClientConfig(base_url=url, model=model, request_timeout_s=timeout_s, api_key=api_key)
    if warm:
        asyncio.run(closed_loop(cfg, warm, 1))
    before = counters(url, api_key)
    result = asyncio.run(closed_loop(cfg, measured, concurrency))
    after = counters(url, api_key)
    delta = prometheus_delta(before, after)
    rows = []
    for rec in result.records:
        rows.append(
            {
                "prefix_tokens": prefix_tokens,
                "concurrency": concurrency,
                "request_id": rec.request_id,
                "prompt_tokens": rec.prompt_tokens,
                "prompt_tokens_reported": rec.prompt_tokens_reported,
                "output_tokens": rec.output_tokens,
                "ttft_ms": rec.ttft_ms,
                "e2e_ms": rec.e2e_ms,
                "success": rec.success,
                "error": rec.error,
            }
        )
    meta = {
        "n_warmup": len(warm),
        "wall_s": result.wall_s,
        "metrics_delta": delta,
        "hit_rate": prom.hit_rate(delta),
        "traffic": prom.other_traffic(delta, rows, len(warm)),
        "workload": {
            "prefix_tokens": prefix_tokens,
            "suffix_tokens": suffix_tokens,
            "output_tokens": output_tokens,
            "num_requests": num_requests,
            "concurrency": concurrency,
            "seed": seed,
        },
    }
    return rows, meta


def prefix_test(
    study: Study, variant: str, *, prefix_tokens: int, state_path: str, manifest_path: str, out: str
) -> None:
    """The prefix_test rule: one length on the variant's server, in its turn; failures are results."""
    pc = section(study.cfg)
    manifest = Manifest.load(manifest_path)
    meta = result_meta(
        study, variant, manifest, prefix_tokens=prefix_tokens, prefix_caching=study.variant(variant).prefix_caching
    )

    def body(state: ServerState) -> tuple[list[dict[str, Any]], dict[str, Any]]:
        rows, extra = run_prefix_length(
            state.url,
            state.served_model_name,
            tokenizer_dir=manifest.model_dir,
            prefix_tokens=prefix_tokens,
            suffix_tokens=pc.suffix_tokens,
            output_tokens=pc.output_tokens,
            num_requests=pc.num_requests,
            concurrency=pc.concurrency,
            warmup=pc.warmup_requests,
            seed=pc.seed,
            timeout_s=pc.request_timeout_s,
            api_key=study.api_key,
        )
        for r in rows:
            r["variant"] = variant
        ok = [r["ttft_ms"] for r in rows if r["success"]]
        log.info(
            "prefix %d tokens: %d/%d ok, TTFT P50 %s ms, hit rate %s",
            prefix_tokens,
            len(ok),
            len(rows),
            percentile(ok, 50),
            extra["hit_rate"],
        )
        return rows, extra

    consume(
        study, variant, f"prefix/len~{prefix_tokens}", out, table=PREFIX, state_path=state_path, meta=meta, body=body
    )

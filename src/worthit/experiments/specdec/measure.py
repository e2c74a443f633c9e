"""Speculative decoding's own measurement: the verify-step timing on the base variant's server, the input c of
S = alpha / (k gamma + c) (:mod:`.model`). It writes raw request rows (``verify_requests``); the analysis of every
speculative variant (alpha, gamma, c, predicted and measured speed-up per workload and level) is the report's
(:mod:`.report`), the one place each of those figures is computed.

c = verify step cost / plain decode step cost, measured *independently* of the speculative run: on the base
variant's server, requests of a cached context plus m new tokens and one output step, so the only forward that
differs between m = 1 (a plain decode step) and m = k + 1 (a verify step) is the k extra tokens.
"""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Sequence
from typing import Any

from worthit import prom
from worthit.config import Study
from worthit.experiments.loadtest.section import section as load_section
from worthit.experiments.specdec.section import section, verify_sizes
from worthit.experiments.specdec.tables import VERIFY
from worthit.loadgen.client import ClientConfig, RequestSpec, closed_loop
from worthit.loadgen.prompts import SharedPrefixWorkload, load_tokenizer
from worthit.metrics import percentile, prometheus_delta
from worthit.models import Manifest
from worthit.server import ServerState
from worthit.stages import consume, counters, result_meta, scrape

log = logging.getLogger("worthit")


# --- measuring c on the base variant -----------------------------------------------------------------


def verify_specs(
    tok: Any, context_tokens: int, sizes: Sequence[int], repeats: int, *, concurrency: int = 1, seed: int = 0
) -> tuple[RequestSpec, list[tuple[int, list[RequestSpec]]]]:
    """A warm-up request (puts the context in the cache) and the timed waves: ``repeats`` x each size, sizes
    interleaved so drift over the run hits every size alike, each wave ``concurrency`` requests of one size
    with suffixes of their own. One context for all: the same seed builds the same prefix."""
    n = repeats * concurrency + 1
    by_size = {m: SharedPrefixWorkload(context_tokens, m, 1, n, seed=seed).build(tok) for m in sizes}
    warm = by_size[min(sizes)][0]
    waves = [(m, by_size[m][1 + i * concurrency : 1 + (i + 1) * concurrency]) for i in range(repeats) for m in sizes]
    return warm, waves


def run_verify(
    url: str,
    model: str,
    tokenizer_dir: str,
    context_tokens: int,
    *,
    sizes: Sequence[int],
    repeats: int,
    seed: int = 0,
    timeout_s: float = 600.0,
    concurrencies: Sequence[int] = (1,),
    api_key: str | None = None,
) -> tuple[list[dict[str, Any]], dict[str, Any]]:
    """Time one-step requests of a cached context + m new tokens for each m in ``sizes``, in waves of each
    concurrency (a wave's requests start together, so the server batches them into one step)."""
    info = prom.cache_config(scrape(url, api_key))
    block = int(float(info.get("block_size", 16)))
    # Only full blocks are cached: round the context down to a block multiple (at least one block).
    context = max(block, context_tokens // block * block)
    tok = load_tokenizer(tokenizer_dir)
    cfg = ClientConfig(base_url=url, model=model, request_timeout_s=timeout_s, api_key=api_key)
    rows: list[dict[str, Any]] = []
    sent: list[dict[str, Any]] = []  # every timed request's row, for the traffic check (worthit.prom)
    before = None
    for conc in concurrencies:
        warm, waves = verify_specs(tok, context, sizes, repeats, concurrency=conc, seed=seed)
        asyncio.run(closed_loop(cfg, [warm], 1))
        before = before or counters(url, api_key)
        for m, wave in waves:
            result = asyncio.run(closed_loop(cfg, wave, conc))
            sent += result.rows()
            rows += [
                {
                    "new_tokens": m,
                    "context_tokens": context,
                    "concurrency": conc,
                    "request_id": len(rows) + i,
                    "ttft_ms": rec.ttft_ms,
                    "success": rec.success,
                    "error": rec.error,
                }
                for i, rec in enumerate(result.records)
            ]
    delta = prometheus_delta(before or {}, counters(url, api_key))
    # the warm-up of every concurrency after the first falls inside the counted window
    traffic = prom.other_traffic(delta, sent, n_warmup=max(0, len(concurrencies) - 1))
    if traffic is not None and traffic["shared"]:
        log.warning("verify: %s", prom.traffic_reason(traffic))
    return rows, {
        "metrics_delta": delta,
        "hit_rate": prom.hit_rate(delta),
        **({"traffic": traffic} if traffic is not None else {}),
        "block_size_tokens": block,
        "prefix_caching": str(info.get("enable_prefix_caching", "")).lower() == "true",
        "workload": {
            "context_tokens": context,
            "sizes": list(sizes),
            "repeats": repeats,
            "seed": seed,
            "concurrencies": list(concurrencies),
        },
    }


def measure_verify(study: Study, variant: str, state_path: str, manifest_path: str, *, out: str) -> None:
    """The measure_verify rule: verify-step timing on the base variant's server, in its turn."""
    sd, lt = section(study.cfg), load_section(study.cfg)
    sizes = verify_sizes(study)
    context = int(sd.verify_context_tokens or lt.prompt_tokens)
    manifest = Manifest.load(manifest_path)
    meta = result_meta(study, variant, manifest)

    def body(state: ServerState) -> tuple[list[dict[str, Any]], dict[str, Any]]:
        rows, extra = run_verify(
            state.url,
            state.served_model_name,
            manifest.model_dir,
            context,
            sizes=sizes,
            repeats=sd.verify_repeats,
            seed=lt.seed,
            timeout_s=lt.request_timeout_s,
            concurrencies=lt.levels,
            api_key=study.api_key,
        )
        for r in rows:
            r["variant"] = variant
        for conc in lt.levels:
            for m in sizes:
                ttft = [
                    r["ttft_ms"] for r in rows if r["new_tokens"] == m and r["concurrency"] == conc and r["success"]
                ]
                log.info(
                    "verify %d new tokens on %d cached, %d at once: TTFT P50 %s ms (n=%d)",
                    m,
                    rows[0]["context_tokens"],
                    conc,
                    percentile(ttft, 50),
                    len(ttft),
                )
        log.info("prefix-cache hit rate over the timed requests: %s", extra["hit_rate"])
        return rows, extra

    consume(study, variant, "specdec/verify", out, table=VERIFY, state_path=state_path, meta=meta, body=body)

"""The measurements that run against a variant's server (the service group's consumers).

Each stage waits for the server, measures, and writes one Parquet file. When the server cannot serve
(it died, never became ready, lacks a capability) the stage writes a failure record instead of raising,
so one variant's failure is a row in the report and never a crashed study.
"""

from __future__ import annotations

import asyncio
import logging
import sys
from collections.abc import Callable
from pathlib import Path
from typing import Any

from worthit import kv as kvmod
from worthit import prom, schemas
from worthit.config import ConfigError, Study, config_hash
from worthit.loadgen.client import ClientConfig, RequestRecord, closed_loop
from worthit.loadgen.workload import RandomWorkload, load_tokenizer
from worthit.metrics import prometheus_delta
from worthit.models import Manifest
from worthit.provenance import stamp
from worthit.server import ServerFailed, ServerState, consumer_presence, http_get, turn, wait_ready

log = logging.getLogger("worthit")


def setup_logging(path: str | None) -> None:
    handlers: list[logging.Handler] = [logging.StreamHandler(sys.stderr)]
    if path:
        Path(path).parent.mkdir(parents=True, exist_ok=True)
        handlers = [logging.FileHandler(path, mode="w")]
    logging.basicConfig(
        level=logging.INFO, format="%(asctime)s %(levelname)s %(message)s", handlers=handlers, force=True
    )


def scrape(url: str) -> str:
    status, body = http_get(url.rstrip("/") + "/metrics", timeout=30)
    if status != 200:
        raise ServerFailed(f"GET /metrics answered HTTP {status}")
    return body


def counters(url: str) -> dict[str, float]:
    """The server's watched counters now (:data:`worthit.prom.WATCHED_COUNTERS`), summed over labels."""
    return kvmod.counters(scrape(url), prom.WATCHED_COUNTERS)


def result_meta(study: Study, variant: str, manifest: Manifest, **extra: Any) -> dict[str, Any]:
    """The provenance every measurement of ``variant`` records: the served model, the engine arguments,
    the config's hash, and the measurement's own settings in ``extra``."""
    return stamp(
        variant=variant,
        manifest=manifest,
        engine_args=study.variant(variant).engine_args,
        config_hash=config_hash(study.cfg),
        **extra,
    )


def _consume(
    study: Study,
    variant: str,
    consumer: str,
    out: str,
    table: schemas.Table,
    state_path: str,
    meta: dict[str, Any],
    body: Callable[[ServerState], tuple[list[dict[str, Any]], dict[str, Any]]],
) -> None:
    """Wait for the server, take this measurement's turn on it, measure, write; failures are results."""
    order = list(study.consumers(variant))
    try:
        with consumer_presence(state_path, consumer, order.index(consumer)):
            state, rows, extra = _measure_in_turn(study, consumer, order, state_path, body)
    except ServerFailed as e:
        log.error("server not available (%s): %s", e.status, e.reason)
        schemas.write_failure(out, table, e.reason, log_tail=e.log_tail, status=e.status, metadata=meta)
        return
    schemas.write(out, table, rows, metadata={**meta, **extra, **stamp(server_url=state.url)})


def _measure_in_turn(
    study: Study,
    consumer: str,
    order: list[str],
    state_path: str,
    body: Callable[[ServerState], tuple[list[dict[str, Any]], dict[str, Any]]],
) -> tuple[ServerState, list[dict[str, Any]], dict[str, Any]]:
    state = wait_ready(state_path, study.cfg["serve"]["startup_timeout_s"])
    with turn(state_path, order.index(consumer), consumer):
        log.info("measuring %s on %s", consumer, state.url)
        wait_ready(state_path, 30)  # it may have died while we waited for our turn
        rows, extra = body(state)
    return state, rows, extra


def measure_kv(study: Study, variant: str, state_path: str, manifest_path: str, out: str) -> None:
    v = study.variant(variant)
    manifest = Manifest.load(manifest_path)
    meta = result_meta(study, variant, manifest)

    def body(state: ServerState) -> tuple[list[dict[str, Any]], dict[str, Any]]:
        row = kvmod.kv_row(variant, scrape(state.url), manifest.model_dir, v.served_dtype, study.tokens_per_request)
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

    _consume(study, variant, "kv", out, schemas.KV_CACHE, state_path, meta, body)


def run_level(
    url: str,
    model: str,
    tokenizer_dir: str,
    concurrency: int,
    num_requests: int,
    prompt_tokens: int,
    output_tokens: int,
    warmup: int = 2,
    seed: int = 0,
    endpoint: str = "completions",
    timeout_s: float = 600.0,
    progress: bool = True,
) -> tuple[list[dict[str, Any]], dict[str, Any]]:
    """One closed-loop level: records (one per request) and run metadata incl. /metrics deltas."""
    tok = load_tokenizer(tokenizer_dir)
    specs = RandomWorkload(prompt_tokens, output_tokens, num_requests, seed=seed).build(tok, offset=concurrency)
    warm = RandomWorkload(prompt_tokens, output_tokens, warmup, seed=seed + 1).build(tok, offset=concurrency)
    cfg = ClientConfig(base_url=url, model=model, endpoint=endpoint, request_timeout_s=timeout_s)
    before = counters(url)
    done = 0

    def on_done(rec: RequestRecord) -> None:
        nonlocal done
        done += 1
        log.info(
            "conc=%d request %d/%d %s ttft=%.1fms e2e=%.1fms tokens=%d%s",
            concurrency,
            done,
            num_requests,
            "ok" if rec.success else "FAILED",
            rec.ttft_ms or -1,
            rec.e2e_ms or -1,
            rec.output_tokens,
            f" error={rec.error}" if rec.error else "",
        )

    result = asyncio.run(closed_loop(cfg, specs, concurrency, warmup=warm, on_done=on_done if progress else None))
    after = counters(url)
    meta = {
        "n_warmup": result.warmup,
        "wall_s": result.wall_s,
        "metrics_delta": prometheus_delta(before, after),
        "workload": {
            "prompt_tokens": prompt_tokens,
            "output_tokens": output_tokens,
            "num_requests": num_requests,
            "seed": seed,
            "endpoint": endpoint,
        },
    }
    return result.rows(), meta


def loadtest(
    study: Study, variant: str, concurrency: int, state_path: str, manifest_path: str, out: str, run: int = 1
) -> None:
    """One run of one load level. Run r of a level uses its own prompts (seed + 2(r-1)), so a server
    with prefix caching on cannot answer a repeat from the cache of an earlier run."""
    if not 1 <= run <= study.repeats:
        raise ConfigError(
            f"{out}: run {run} of level {concurrency} is not part of the study "
            f"(loadtest.repeats is {study.repeats}); raise loadtest.repeats to {run} to measure it"
        )
    lt = study.cfg["loadtest"]
    manifest = Manifest.load(manifest_path)
    meta = result_meta(study, variant, manifest, concurrency=concurrency, repeat=run)
    seed = int(lt["seed"]) + 2 * (run - 1)  # run 1: prompts from seed, warm-up from seed + 1

    def body(state: ServerState) -> tuple[list[dict[str, Any]], dict[str, Any]]:
        rows, extra = run_level(
            state.url,
            state.served_model_name,
            manifest.model_dir,
            concurrency,
            study.num_requests(concurrency),
            lt["prompt_tokens"],
            lt["output_tokens"],
            lt["warmup_requests"],
            seed,
            lt["endpoint"],
            lt["request_timeout_s"],
        )
        for r in rows:
            r.update(variant=variant, concurrency=concurrency, request_rate_per_s=None)
        ok = sum(r["success"] for r in rows)
        log.info("conc=%d run %d: %d/%d requests succeeded", concurrency, run, ok, len(rows))
        return rows, extra

    _consume(study, variant, study.load_name(concurrency, run), out, schemas.LOAD_REQUESTS, state_path, meta, body)

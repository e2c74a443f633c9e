"""The prefix-caching experiment: measurement (one shared-prefix length on a variant's server) and
analysis (TTFT with the cache on vs off, hit rate, slope of TTFT against prefix length).

Each length sends one common prefix of L tokens followed by a unique suffix per request, as token ids so
the prefix is byte-identical. Warm-up requests with the same prefix go first and are excluded: they put
the prefix in the cache, so the measured requests show the steady state a chat system with a long system
prompt sees. The hit rate is the /metrics prefix-cache counter delta over the measured requests only.
Prefixes differ between lengths (seeded by the length), so one length never warms another.
"""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any

import pandas as pd

from worthit import prom, schemas
from worthit.config import Study
from worthit.experiments.prefix.analysis import other_side, reduction_pct
from worthit.experiments.prefix.tables import PREFIX, PREFIX_SUMMARY
from worthit.loadgen.client import ClientConfig, closed_loop
from worthit.loadgen.prompts import SharedPrefixWorkload, load_tokenizer
from worthit.metrics import percentile, prometheus_delta
from worthit.models import Manifest
from worthit.schemas import STATUS_OK
from worthit.server import ServerState
from worthit.stages import consume, counters, result_meta
from worthit.stats import slope

log = logging.getLogger("worthit")

# --- measurement -------------------------------------------------------------------------------------


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
    pc = study.cfg["prefix"]
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
            suffix_tokens=pc["suffix_tokens"],
            output_tokens=pc["output_tokens"],
            num_requests=pc["num_requests"],
            concurrency=pc["concurrency"],
            warmup=pc["warmup_requests"],
            seed=pc["seed"],
            timeout_s=pc["request_timeout_s"],
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


# --- analysis (pure) ---------------------------------------------------------------------------------


def length_row(variant: str, prefix_caching: bool, prefix_tokens: int, result: schemas.Result) -> dict[str, Any]:
    """One variant x length file reduced to the summary's own columns."""
    row: dict[str, Any] = {
        "variant": variant,
        "status": result.status,
        "reason": result.reason or None,
        "prefix_caching": prefix_caching,
        "prefix_tokens": prefix_tokens,
    }
    if not result.ok:
        return row
    recs = result.table.to_pylist()
    ttft = [r["ttft_ms"] for r in recs if r["success"]]
    row.update(
        n=len(recs),
        n_errors=len(recs) - len(ttft),
        ttft_ms_p50=percentile(ttft, 50),
        ttft_ms_p99=percentile(ttft, 99),
        hit_rate=prom.hit_rate(result.metadata.get("metrics_delta") or {}),
    )
    return row


def summary_rows(rows: Sequence[Mapping[str, Any]]) -> list[dict[str, Any]]:
    """Add the comparisons: every cache-on row against its other side (:func:`.analysis.other_side`: the first
    variant measured at its length with the cache off), and each variant's slope of TTFT P50 against prefix
    length (ms per 1,000 prefix tokens)."""
    out = [dict(r) for r in rows]
    by_variant: dict[str, list[dict[str, Any]]] = {}
    for r in out:
        by_variant.setdefault(r["variant"], []).append(r)
    slopes = {}
    for v, rs in by_variant.items():
        ok = [r for r in rs if r["status"] == STATUS_OK]
        s = slope([r["prefix_tokens"] for r in ok], [r.get("ttft_ms_p50") for r in ok])
        slopes[v] = None if s is None else s * 1000.0
    measured = [(r["variant"], bool(r.get("prefix_caching")), r["prefix_tokens"]) for r in out]
    by_point = {(r["variant"], r["prefix_tokens"]): r for r in out}
    for r in out:
        r["ttft_slope_ms_per_1k_tokens"] = slopes[r["variant"]]
        if not r.get("prefix_caching"):
            continue
        ref = other_side(measured, r["prefix_tokens"], cache_on=True)
        if ref is None:
            continue
        ref_row = by_point[(ref, r["prefix_tokens"])]
        r.update(
            reference_variant=ref,
            ref_ttft_ms_p50=ref_row.get("ttft_ms_p50"),
            ref_ttft_ms_p99=ref_row.get("ttft_ms_p99"),
            ref_ttft_slope_ms_per_1k_tokens=slopes.get(ref),
        )
        r["ttft_p50_reduction_pct"] = reduction_pct(r["ref_ttft_ms_p50"], r.get("ttft_ms_p50"))
        r["ttft_p99_reduction_pct"] = reduction_pct(r["ref_ttft_ms_p99"], r.get("ttft_ms_p99"))
        r["slope_reduction_pct"] = reduction_pct(slopes.get(ref), slopes[r["variant"]])
    return out


def read_rows(files: Mapping[tuple[str, int], str], prefix_caching: Mapping[str, bool]) -> list[dict[str, Any]]:
    """{(variant, length): path} -> summary rows (failed files become rows with their status)."""
    rows = [
        length_row(v, prefix_caching[v], n, schemas.read(path, PREFIX))
        for (v, n), path in sorted(files.items(), key=lambda kv: (list(prefix_caching).index(kv[0][0]), kv[0][1]))
    ]
    return summary_rows(rows)


COLUMNS = (
    ("variant", "variant"),
    ("prefix_caching", "cache"),
    ("prefix_tokens", "prefix tokens"),
    ("n", "n"),
    ("ttft_ms_p50", "TTFT P50 ms"),
    ("ttft_ms_p99", "TTFT P99 ms"),
    ("hit_rate_pct", "hit rate %"),
    ("reference_variant", "vs"),
    ("ref_ttft_ms_p50", "ref TTFT P50 ms"),
    ("ttft_p50_reduction_pct", "P50 reduction %"),
    ("ttft_p99_reduction_pct", "P99 reduction %"),
)
SLOPE_COLUMNS = (
    ("variant", "variant"),
    ("prefix_caching", "cache"),
    ("ttft_slope_ms_per_1k_tokens", "TTFT slope ms / 1k prefix tokens"),
    ("slope_reduction_pct", "slope reduction %"),
)


def write_summary(
    rows: list[dict[str, Any]], *, parquet: str | Path, md: str | Path, study: str, metadata: Mapping[str, Any]
) -> None:
    from worthit.aggregate import failures_section, markdown_table, write_markdown

    schemas.write(parquet, PREFIX_SUMMARY, rows, metadata=metadata)
    df = pd.DataFrame(rows, columns=PREFIX_SUMMARY.columns)
    ok = df[df["status"] == STATUS_OK].copy()
    ok["hit_rate_pct"] = ok["hit_rate"].astype(float) * 100.0
    failed = df[df["status"] != STATUS_OK]
    parts = [
        f"# {study}: prefix caching",
        "",
        "TTFT of requests sharing a prefix of the given length (unique suffix each), cache on vs off; "
        "reduction = (off - on) / off.",
        "",
        markdown_table(ok, COLUMNS),
        "",
        "## TTFT against prefix length (least squares)",
        "",
        markdown_table(ok.drop_duplicates("variant"), SLOPE_COLUMNS),
        "",
    ]
    write_markdown(md, parts + failures_section(failed, ("prefix_tokens", "prefix tokens")))

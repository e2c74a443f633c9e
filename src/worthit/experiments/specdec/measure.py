"""Speculative decoding: is it worth trying here? The speed-up model S = alpha / (k gamma + c), its
inputs measured on this machine, and the measured TPOT speed-up next to the prediction.

One speculative step proposes k draft tokens (k draft steps, each costing gamma target steps), then the
target verifies them in one forward (costing c plain decode steps) and keeps alpha tokens on average
(the accepted drafts plus the one token the target always contributes). Per generated token that is
(k gamma + c) / alpha target steps, hence S = alpha / (k gamma + c) (docs/architecture.md). The inputs:

- alpha = 1 + accepted / drafts, from the spec-decode counter deltas of each load level of the
  speculative variant (:data:`worthit.prom.SPEC_DRAFTS`, :data:`worthit.prom.SPEC_ACCEPTED_TOKENS`; vLLM logs the same
  quantity as "mean acceptance length"). Steps where the proposer found nothing (ngram without a match)
  carry no draft and are not in it: ``draft_coverage`` and ``alpha_effective`` show how much that matters.
- gamma = TPOT of the draft model served alone / TPOT of the target served alone, both at the lowest
  concurrency (the study's method). Model-free proposers (ngram, suffix) have gamma = 0. A standalone
  TPOT includes per-step serving overhead the in-engine draft does not pay, so gamma is an upper bound.
- c = verify step cost / plain decode step cost, measured *independently* of the speculative run: on the
  base variant's server, requests of a cached context plus m new tokens and one output step, so the only
  forward that differs between m = 1 (a plain decode step) and m = k + 1 (a verify step) is the k extra
  tokens: c = 1 + (TTFT(k + 1) - TTFT(1)) / TPOT_base. Rejection sampling and draft bookkeeping are not in
  it, so this c is a lower bound of the engine's real verify cost.

Deriving c from the speculative run itself (c = alpha TPOT_spec / TPOT_base - k gamma) would make the
prediction equal the measurement by construction; that number is reported as ``c_implied``, a diagnostic
of what the model misses, never as the input of the prediction.
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
from worthit.experiments.loadtest.tables import LOAD_REQUESTS
from worthit.experiments.specdec.tables import SPECDEC_SUMMARY, VERIFY
from worthit.loadgen.client import ClientConfig, RequestSpec, closed_loop
from worthit.loadgen.prompts import SharedPrefixWorkload, load_tokenizer
from worthit.metrics import percentile, prometheus_delta, summarize
from worthit.models import Manifest
from worthit.server import ServerState
from worthit.stages import consume, counters, result_meta, scrape

log = logging.getLogger("worthit")

MODEL_FREE_METHODS = frozenset({"ngram", "suffix", "ngram_gpu"})
NOT_WORTH_TRYING = "not worth trying"
WORTH_TRYING = "worth trying"
DRAFTS, DRAFT_TOKENS, ACCEPTED = prom.SPEC_DRAFTS, prom.SPEC_DRAFT_TOKENS, prom.SPEC_ACCEPTED_TOKENS
GENERATED = prom.GENERATION_TOKENS


# --- the model (pure) --------------------------------------------------------------------------------


def predicted_speedup(alpha: float | None, k: float | None, gamma: float | None, c: float | None) -> float | None:
    """S = alpha / (k gamma + c): plain decode time per token over speculative time per token.

    None (no prediction) when an input is unknown or the step cost k gamma + c is not positive (a c
    measured below zero is timing noise, not a free verify step).
    """
    if alpha is None or k is None or gamma is None or c is None:
        return None
    cost = k * gamma + c
    return alpha / cost if cost > 0 else None


def k_for_speedup(alpha: float, gamma: float, c: float, speedup: float) -> float:
    """The draft length at which the model predicts ``speedup`` (inverse of :func:`predicted_speedup`)."""
    if gamma <= 0:
        raise ValueError("with gamma = 0 the speed-up does not depend on k")
    return (alpha / speedup - c) / gamma


def verdict(speedup: float | None, threshold: float = 1.3) -> str | None:
    """The study's rule of thumb: below ``threshold`` the gain will not survive real-world overheads."""
    if speedup is None:
        return None
    return NOT_WORTH_TRYING if speedup < threshold else WORTH_TRYING


def alpha_from_counters(drafts: float, accepted: float) -> float | None:
    """Tokens per verify step: accepted drafts per draft step + the target's own token."""
    return 1.0 + accepted / drafts if drafts > 0 else None


def alpha_of(delta: Mapping[str, float]) -> float | None:
    """Tokens per verify step from a run's counter deltas (/metrics); None where nothing was drafted."""
    return alpha_from_counters(delta.get(DRAFTS, 0.0), delta.get(ACCEPTED, 0.0))


def acceptance_rate(draft_tokens: float, accepted: float) -> float | None:
    return accepted / draft_tokens if draft_tokens > 0 else None


def decode_steps(generated: float, requests: int, drafts: float, accepted: float) -> tuple[float, float] | None:
    """(decode tokens, estimated decode steps) over a run.

    Each request's first token comes from its prefill; every later token comes from a decode step that
    yields 1 + accepted tokens. Accepted tokens past max_tokens are counted by vLLM but cut from the
    output, so ``generated - requests - accepted`` can undercount steps; every draft is a step, which
    bounds it from below.
    """
    tokens = generated - requests
    if tokens <= 0:
        return None
    return tokens, max(drafts, tokens - accepted)


def gamma_from_tpot(draft_tpot_ms: float | None, target_tpot_ms: float | None) -> float | None:
    if draft_tpot_ms is None or not target_tpot_ms:
        return None
    return draft_tpot_ms / target_tpot_ms


def c_from_verify(
    ttft_verify_ms: float | None, ttft_decode_ms: float | None, tpot_base_ms: float | None
) -> float | None:
    """c = 1 + (TTFT of k + 1 new tokens - TTFT of 1 new token) / plain decode TPOT."""
    if ttft_verify_ms is None or ttft_decode_ms is None or not tpot_base_ms:
        return None
    return 1.0 + (ttft_verify_ms - ttft_decode_ms) / tpot_base_ms


def implied_c(
    alpha: float | None, k: int, gamma: float | None, tpot_spec_ms: float | None, *, tpot_base_ms: float | None
) -> float | None:
    """The c at which the model would reproduce the measured TPOT ratio (a diagnostic, not an input)."""
    if alpha is None or gamma is None or tpot_spec_ms is None or not tpot_base_ms:
        return None
    return alpha * tpot_spec_ms / tpot_base_ms - k * gamma


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
    sd = study.cfg["specdec"]
    context = int(sd["verify_context_tokens"] or study.cfg["loadtest"]["prompt_tokens"])
    manifest = Manifest.load(manifest_path)
    meta = result_meta(study, variant, manifest)

    def body(state: ServerState) -> tuple[list[dict[str, Any]], dict[str, Any]]:
        rows, extra = run_verify(
            state.url,
            state.served_model_name,
            manifest.model_dir,
            context,
            sizes=study.verify_sizes,
            repeats=int(sd["verify_repeats"]),
            seed=study.cfg["loadtest"]["seed"],
            timeout_s=study.cfg["loadtest"]["request_timeout_s"],
            concurrencies=study.levels,
            api_key=study.api_key,
        )
        for r in rows:
            r["variant"] = variant
        for conc in study.levels:
            for m in study.verify_sizes:
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


# --- analysis ----------------------------------------------------------------------------------------


def level_stats(result: schemas.Result) -> dict[str, Any]:
    """A load level reduced to what the analysis needs."""
    if not result.ok:
        return {"status": result.status, "reason": result.reason}
    recs = result.table.to_pylist()
    s = summarize(recs)
    return {
        "status": schemas.STATUS_OK,
        "reason": None,
        "tpot_ms_p50": s.tpot_ms.p50,
        "ttft_ms_p99": s.ttft_ms.p99,
        "metrics_delta": result.metadata.get("metrics_delta") or {},
        "requests": len(recs) + int(result.metadata.get("n_warmup") or 0),
    }


def verify_medians(rows: Sequence[Mapping[str, Any]]) -> dict[tuple[int, int], float | None]:
    """TTFT median per (concurrency, new tokens) of the verify timing's rows (files from before the
    concurrency column was measured at concurrency 1)."""
    by: dict[tuple[int, int], list[float]] = {}
    for r in rows:
        if r.get("success") and r.get("ttft_ms") is not None:
            key = (int(r.get("concurrency") or 1), int(r["new_tokens"]))
            by.setdefault(key, []).append(float(r["ttft_ms"]))
    return {key: percentile(v, 50) for key, v in by.items()}


def c_at_concurrency(
    medians: Mapping[tuple[int, int], float | None], k: int, concurrency: int, tpot_base_ms: float | None
) -> float | None:
    """c at a concurrency from the verify timing at that concurrency: 1 + (TTFT(k + 1) - TTFT(1)) / the base's
    TPOT at the same concurrency (None where that concurrency was not timed). The one definition the
    speculative-decoding summary and the report use."""
    return c_from_verify(medians.get((concurrency, k + 1)), medians.get((concurrency, 1)), tpot_base_ms)


def method_of(spec_config: Mapping[str, Any]) -> str:
    return str(spec_config.get("method") or ("draft_model" if spec_config.get("model") else "unknown"))


def spec_rows(
    variant: str,
    spec_config: Mapping[str, Any],
    base: str,
    draft: str | None,
    *,
    levels: Mapping[int, Mapping[str, Any]],
    base_levels: Mapping[int, Mapping[str, Any]],
    draft_levels: Mapping[int, Mapping[str, Any]] | None,
    verify: Mapping[tuple[int, int], float | None],
    verify_failure: str | None = None,
    threshold: float = 1.3,
) -> list[dict[str, Any]]:
    """One row per load level of a speculative variant (pure: inputs already reduced); ``verify``: the verify
    timing's TTFT medians by (concurrency, new tokens), so c is the one measured at each level's concurrency."""
    method = method_of(spec_config)
    k = int(spec_config.get("num_speculative_tokens") or 0)
    low = min(base_levels) if base_levels else None
    base_low = base_levels.get(low, {}) if low is not None else {}
    notes: list[str] = []
    if method in MODEL_FREE_METHODS:
        gamma: float | None = 0.0
    elif draft is None:
        gamma = None
        notes.append("gamma unknown: name the variant serving the draft model in specdec.draft_variants")
    else:
        draft_low = draft_levels[min(draft_levels)] if draft_levels else {}
        gamma = gamma_from_tpot(draft_low.get("tpot_ms_p50"), base_low.get("tpot_ms_p50"))
        if gamma is None:
            notes.append(f"gamma unknown: no TPOT for draft variant {draft} or base {base}")
    rows = []
    for conc in sorted(levels):
        lv = levels[conc]
        c = c_at_concurrency(verify, k, conc, base_levels.get(conc, {}).get("tpot_ms_p50"))
        c_notes: list[str] = []
        if c is None:
            c_notes.append(
                "c unknown: "
                + (verify_failure or f"no verify timing for k + 1 = {k + 1} at concurrency {conc} on {base}")
            )
        elif c < 1:
            c_notes.append(f"c = {c:.2f} < 1: verifying {k} extra tokens cost less than the timing noise")
        row: dict[str, Any] = {
            "variant": variant,
            "status": lv["status"],
            "reason": lv.get("reason"),
            "method": method,
            "k": k,
            "concurrency": conc,
            "base_variant": base,
            "draft_variant": draft,
            "gamma": gamma,
            "c": c,
        }
        if lv["status"] != schemas.STATUS_OK:
            rows.append(row)
            continue
        d = lv.get("metrics_delta") or {}
        alpha = alpha_of(d)
        steps = decode_steps(
            d.get(GENERATED, 0.0), int(lv.get("requests") or 0), d.get(DRAFTS, 0.0), d.get(ACCEPTED, 0.0)
        )
        bl = base_levels.get(conc, {})
        tpot, base_tpot = lv.get("tpot_ms_p50"), bl.get("tpot_ms_p50")
        pred = predicted_speedup(alpha, k, gamma, c)
        row_notes = notes + c_notes + ([] if alpha is not None else ["alpha unknown: no drafts counted"])
        row.update(
            alpha=alpha,
            acceptance_rate=acceptance_rate(d.get(DRAFT_TOKENS, 0.0), d.get(ACCEPTED, 0.0)),
            draft_coverage=(d.get(DRAFTS, 0.0) / steps[1]) if steps else None,
            alpha_effective=(steps[0] / steps[1]) if steps else None,
            c_implied=implied_c(alpha, k, gamma, tpot, tpot_base_ms=base_tpot),
            predicted_speedup=pred,
            tpot_ms_p50=tpot,
            base_tpot_ms_p50=base_tpot,
            measured_speedup=(base_tpot / tpot) if tpot and base_tpot else None,
            ttft_ms_p99=lv.get("ttft_ms_p99"),
            base_ttft_ms_p99=bl.get("ttft_ms_p99"),
            verdict=verdict(pred, threshold),
            note="; ".join(row_notes) or None,
        )
        rows.append(row)
    return rows


def summary_rows(
    study: Study, load_files: Mapping[tuple[str, int], str], verify_file: str | None
) -> list[dict[str, Any]]:
    """Every speculative variant x level, from the files the aggregate rule gets."""

    def levels_of(variant: str | None) -> dict[int, dict[str, Any]]:
        return {c: level_stats(schemas.read(p, LOAD_REQUESTS)) for (v, c), p in load_files.items() if v == variant}

    base = study.specdec_base
    verify_res = schemas.read(verify_file, VERIFY) if verify_file else None
    verify = verify_medians(verify_res.table.to_pylist()) if verify_res is not None and verify_res.ok else {}
    failure = None if verify_res is None or verify_res.ok else f"verify timing {verify_res.status}: {verify_res.reason}"
    rows: list[dict[str, Any]] = []
    for v in study.spec_variants:
        draft = study.draft_variant(v)
        rows += spec_rows(
            v,
            study.variant(v).speculative_config or {},
            base,
            draft,
            levels=levels_of(v),
            base_levels=levels_of(base),
            draft_levels=levels_of(draft) if draft else None,
            verify=verify,
            verify_failure=failure,
            threshold=float(
                study.cfg["decide"]["min_predicted_speedup"]
            ),  # the one rule of thumb, as the verdict uses it
        )
    return rows


COLUMNS = (
    ("variant", "variant"),
    ("method", "method"),
    ("k", "k"),
    ("concurrency", "conc"),
    ("alpha", "α"),
    ("gamma", "γ"),
    ("c", "c"),
    ("predicted_speedup", "predicted S"),
    ("measured_speedup", "measured TPOT speed-up"),
    ("tpot_ms_p50", "TPOT P50 ms"),
    ("base_tpot_ms_p50", "base TPOT P50 ms"),
    ("c_implied", "c implied"),
    ("acceptance_rate", "acceptance"),
    ("verdict", "verdict"),
)


def write_summary(
    rows: list[dict[str, Any]],
    parquet: str | Path,
    md: str | Path,
    study: str,
    *,
    metadata: Mapping[str, Any],
    threshold: float = 1.3,
) -> None:
    from worthit.aggregate import failures_section, markdown_table, write_markdown
    from worthit.fmt import cell

    schemas.write(parquet, SPECDEC_SUMMARY, rows, metadata=metadata)
    df = pd.DataFrame(rows, columns=SPECDEC_SUMMARY.columns)
    ok = df[df["status"] == schemas.STATUS_OK]
    failed = df[df["status"] != schemas.STATUS_OK].drop_duplicates(["variant", "reason"])
    notes = sorted({n for n in ok["note"].dropna()})
    parts = [
        f"# {study}: speculative decoding",
        "",
        "Predicted S = α / (kγ + c) next to the measured TPOT speed-up (base TPOT P50 / speculative "
        f"TPOT P50) at each concurrency; predicted S < {cell(threshold, 2)} is flagged "
        f'"{NOT_WORTH_TRYING}". '
        "α from the spec-decode counters of each level, γ from the draft model served alone, c from "
        'verify-step timing on the base variant; "c implied" is the c that would make the model match '
        "the measurement (a diagnostic, not an input).",
        "",
        markdown_table(ok, COLUMNS),
        "",
    ]
    parts += [f"- {n}" for n in notes] + ([""] if notes else [])
    write_markdown(md, parts + failures_section(failed, ("concurrency", "conc")))

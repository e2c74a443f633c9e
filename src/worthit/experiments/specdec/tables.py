"""The speculative-decoding experiment's tables: the verify-step timing on the base variant, and the
summary per variant x concurrency."""

from __future__ import annotations

import pyarrow as pa

from worthit.schemas.definition import VARIANT, Table, column
from worthit.schemas.report import INTERVAL_BASIS, REPORT_STATUS, measure_columns

VERIFY = Table(
    "verify_requests",
    "Verify-step timing on the base variant: waves of `concurrency` requests of a cached context plus m new "
    "tokens, one output step each; TTFT(m = k + 1) - TTFT(m = 1) at a concurrency is the extra cost of "
    "verifying k draft tokens for that many sequences in one step.",
    (
        VARIANT,
        column("new_tokens", pa.int32(), "uncached tokens after the context (1 = a plain decode step)", False),
        column("context_tokens", pa.int32(), "cached context before them", False),
        column(
            "concurrency", pa.int32(), "requests of this size sent at once (one batch: a step of that many sequences)"
        ),
        column("request_id", pa.int32(), "index of the request (sizes interleaved)", False),
        column("ttft_ms", pa.float64(), "time to first content chunk"),
        column("success", pa.bool_(), "request completed", False),
        column("error", pa.string(), "error reason; null on success"),
    ),
    added=("concurrency",),
)

SPECDEC_SUMMARY = Table(
    "specdec_summary",
    "Speculative decoding per variant x concurrency: alpha, gamma, c, predicted S = alpha / (k gamma + c) "
    "next to the measured TPOT speed-up over the base variant.",
    (
        VARIANT,
        column("status", pa.string(), "ok / failed / not_applicable", False),
        column("reason", pa.string(), "why it failed or does not apply"),
        column("method", pa.string(), "speculative method (ngram, draft_model, eagle, ...)"),
        column("k", pa.int32(), "num_speculative_tokens: draft tokens proposed per step"),
        column("concurrency", pa.int32(), "closed-loop concurrency of the load level"),
        column("base_variant", pa.string(), "the target served without speculation"),
        column("draft_variant", pa.string(), "the variant serving the draft model alone (gamma)"),
        column("alpha", pa.float64(), "tokens per verify step = 1 + accepted / drafts (as vLLM logs it)"),
        column("acceptance_rate", pa.float64(), "accepted / proposed draft tokens"),
        column("draft_coverage", pa.float64(), "decode steps that carried a draft / all decode steps"),
        column("alpha_effective", pa.float64(), "decode tokens / decode steps, steps without a draft included"),
        column("gamma", pa.float64(), "draft step cost / target step cost (0 for model-free drafting)"),
        column(
            "c",
            pa.float64(),
            "verify step cost / plain decode step cost, timed on the base variant at this concurrency",
        ),
        column("c_implied", pa.float64(), "alpha TPOT_spec / TPOT_base - k gamma: c implied by the measurement"),
        column("predicted_speedup", pa.float64(), "S = alpha / (k gamma + c)"),
        column("tpot_ms_p50", pa.float64(), "TPOT median with speculation"),
        column("base_tpot_ms_p50", pa.float64(), "TPOT median of the base variant at the same concurrency"),
        column("measured_speedup", pa.float64(), "base TPOT P50 / speculative TPOT P50"),
        column("ttft_ms_p99", pa.float64(), "TTFT 99th percentile with speculation"),
        column("base_ttft_ms_p99", pa.float64(), "TTFT 99th percentile of the base variant"),
        column("verdict", pa.string(), "'not worth trying' if predicted S < threshold, else 'worth trying'"),
        column("note", pa.string(), "what a missing number lacks"),
    ),
)


REPORT_SPECDEC = Table(
    "report_specdec",
    "Report: speculative decoding per variant x load level, from measurements only: the spec-decode counters "
    "(drafts, draft tokens, accepted), alpha and the acceptance rate, gamma, c at the level's concurrency, "
    "predicted S = alpha / (k gamma + c) and the measured TPOT speed-up with its interval.",
    (
        VARIANT,
        column("base_variant", pa.string(), "the target served without speculation"),
        column("method", pa.string(), "speculative method (ngram, draft_model, eagle, ...)"),
        column("k", pa.int32(), "draft tokens proposed per step"),
        column("concurrency", pa.int32(), "closed-loop concurrency"),
        column("drafts", pa.float64(), "speculative steps that proposed drafts (counter delta)"),
        column("draft_tokens", pa.float64(), "draft tokens proposed (counter delta)"),
        column("accepted_tokens", pa.float64(), "draft tokens accepted (counter delta)"),
        column("alpha", pa.float64(), "tokens per verify step = 1 + accepted / drafts; null when nothing was proposed"),
        column("acceptance_rate_pct", pa.float64(), "accepted / proposed draft tokens, %"),
        column("gamma", pa.float64(), "draft step cost / target step cost (0 for model-free drafting)"),
        column("c", pa.float64(), "verify step cost / plain decode step cost at this concurrency"),
        column("c_source", pa.string(), "how c was measured at this concurrency"),
        column("predicted_speedup", pa.float64(), "S = alpha / (k gamma + c)"),
        *measure_columns("measured_speedup", "base TPOT P50 / speculative TPOT P50"),
        column("rule", pa.string(), "predicted S against decide.min_predicted_speedup"),
        column("note", pa.string(), "what a missing number lacks"),
        INTERVAL_BASIS,
        *REPORT_STATUS,
    ),
)

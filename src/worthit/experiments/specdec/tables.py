"""The speculative-decoding experiment's tables: the verify-step timing on the base variant (a raw
measurement), and the report's table per variant x workload x level (the one analysis of it)."""

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

REPORT_SPECDEC = Table(
    "report_specdec",
    "Report: speculative decoding per variant x workload x load level, from measurements only: the spec-decode "
    "counters (drafts, draft tokens, accepted), alpha, the acceptance rate and how often the drafter proposed, "
    "gamma, c at the level's concurrency, the predicted speed-up S and the measured TPOT speed-up "
    "against the base variant's level of the same workload, with its interval.",
    (
        VARIANT,
        column("base_variant", pa.string(), "the target served without speculation"),
        column("method", pa.string(), "speculative method (ngram, draft_model, eagle, ...)"),
        column("k", pa.int32(), "draft tokens proposed per step"),
        column("workload", pa.string(), "the workload the level sent: a name of workloads:, or random (tokens)"),
        column("level", pa.string(), "the load level: conc~N on the grid, <workload>/conc~N for a workload level"),
        column("concurrency", pa.int32(), "closed-loop concurrency"),
        column("drafts", pa.float64(), "speculative steps that proposed drafts (counter delta)"),
        column("draft_tokens", pa.float64(), "draft tokens proposed (counter delta)"),
        column("accepted_tokens", pa.float64(), "draft tokens accepted (counter delta)"),
        column("alpha", pa.float64(), "tokens per verify step = 1 + accepted / drafts; null when nothing was proposed"),
        column("acceptance_rate_pct", pa.float64(), "accepted / proposed draft tokens, %"),
        column(
            "draft_coverage_pct",
            pa.float64(),
            "draft steps / decode steps, %: how often the drafter proposed at all (counter deltas)",
        ),
        column(
            "repeated_ngram_share_p50",
            pa.float64(),
            "median over the level's responses of the share of 4-grams repeating an earlier one of the response",
        ),
        column(
            "mostly_loops",
            pa.bool_(),
            "the median response is a loop (worthit.loadgen.repetition); null where the level predates the measure",
        ),
        column(
            "ends_at_eos",
            pa.bool_(),
            "the level's replies ended at the model's end-of-sequence (ignore_eos off, a real-text workload's "
            "default); false: each generated its max_tokens; null where the level predates the record",
        ),
        column("gamma", pa.float64(), "draft step cost / target step cost (0 for model-free drafting)"),
        column("c", pa.float64(), "verify step cost / plain decode step cost at this concurrency"),
        column("c_source", pa.string(), "how c was measured at this concurrency"),
        column(
            "c_implied",
            pa.float64(),
            "the c at which predicted S equals the measured speed-up (a diagnostic, not an input)",
        ),
        column(
            "predicted_speedup",
            pa.float64(),
            "S = (f alpha + 1 - f) / (f (k gamma + c) + 1 - f), f = draft_coverage_pct / 100 (alpha / (k gamma + c) "
            "where every step drafts)",
        ),
        *measure_columns("measured_speedup", "base TPOT P50 / speculative TPOT P50"),
        column("rule", pa.string(), "predicted S against decide.min_predicted_speedup"),
        column("note", pa.string(), "what a missing number lacks"),
        INTERVAL_BASIS,
        *REPORT_STATUS,
    ),
    added=(
        "workload",
        "level",
        "draft_coverage_pct",
        "repeated_ngram_share_p50",
        "mostly_loops",
        "c_implied",
        "ends_at_eos",
    ),
)

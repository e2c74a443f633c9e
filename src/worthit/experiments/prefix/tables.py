"""The prefix-caching experiment's tables: its requests per shared-prefix length, and their summary."""

from __future__ import annotations

import pyarrow as pa

from worthit.schemas.definition import VARIANT, Table, column
from worthit.schemas.report import INTERVAL_BASIS, REPORT_STATUS, measure_columns

PREFIX = Table(
    "prefix_requests",
    "One row per request of the prefix-caching experiment at one shared-prefix length.",
    (
        VARIANT,
        column("prefix_tokens", pa.int32(), "shared prefix length", False),
        column("concurrency", pa.int32(), "closed-loop requests in flight"),
        column("request_id", pa.int32(), "index of the request", False),
        column("prompt_tokens", pa.int32(), "prefix + unique suffix tokens"),
        column("prompt_tokens_reported", pa.int32(), "prompt tokens from the server's usage"),
        column("output_tokens", pa.int32(), "output tokens from usage"),
        column("ttft_ms", pa.float64(), "time to first content chunk"),
        column("e2e_ms", pa.float64(), "time to last content chunk"),
        column("success", pa.bool_(), "request completed", False),
        column("error", pa.string(), "error reason; null on success"),
    ),
)


PREFIX_SUMMARY = Table(
    "prefix_summary",
    "Prefix caching per variant x shared-prefix length: TTFT with the cache on vs off, hit rate, and the "
    "slope of TTFT against prefix length (least squares over the lengths).",
    (
        VARIANT,
        column("status", pa.string(), "ok / failed / not_applicable", False),
        column("reason", pa.string(), "why the length failed or does not apply"),
        column("prefix_caching", pa.bool_(), "automatic prefix caching on in this variant"),
        column("prefix_tokens", pa.int32(), "shared prefix length"),
        column("n", pa.int32(), "measured requests"),
        column("n_errors", pa.int32(), "requests that failed"),
        column("ttft_ms_p50", pa.float64(), "TTFT median"),
        column("ttft_ms_p99", pa.float64(), "TTFT 99th percentile"),
        column("hit_rate", pa.float64(), "prefix-cache hit tokens / queried tokens over the measured requests"),
        column("reference_variant", pa.string(), "the cache-off variant this row is compared with"),
        column("ref_ttft_ms_p50", pa.float64(), "reference TTFT median at the same length"),
        column("ref_ttft_ms_p99", pa.float64(), "reference TTFT 99th percentile at the same length"),
        column("ttft_p50_reduction_pct", pa.float64(), "(ref - this) / ref x 100 of TTFT P50"),
        column("ttft_p99_reduction_pct", pa.float64(), "(ref - this) / ref x 100 of TTFT P99"),
        column("ttft_slope_ms_per_1k_tokens", pa.float64(), "least-squares slope of TTFT P50 vs prefix length"),
        column("ref_ttft_slope_ms_per_1k_tokens", pa.float64(), "the reference variant's slope"),
        column("slope_reduction_pct", pa.float64(), "(ref slope - slope) / ref slope x 100"),
    ),
)


REPORT_PREFIX = Table(
    "report_prefix",
    "Report: prefix caching per variant x shared-prefix length: TTFT with the cache on and off, the change, "
    "and the prefix-cache hit rate in %.",
    (
        VARIANT,
        column("prefix_caching", pa.bool_(), "automatic prefix caching on in this variant"),
        column("prefix_tokens", pa.int32(), "shared prefix length"),
        *measure_columns("ttft_ms_p50", "TTFT median"),
        column("reference", pa.string(), "the variant with the cache the other way"),
        *measure_columns("reference_ttft_ms_p50", "its TTFT median at the same length"),
        column("change_pct", pa.float64(), "(this - reference) / reference x 100"),
        column("hit_rate_pct", pa.float64(), "prefix-cache hit tokens / queried tokens over the measured requests, %"),
        column("ttft_slope_ms_per_1k_tokens", pa.float64(), "least-squares slope of TTFT P50 vs prefix length"),
        INTERVAL_BASIS,
        *REPORT_STATUS,
    ),
)

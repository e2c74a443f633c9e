"""The prefix-caching experiment's tables: its requests per shared-prefix length (a raw measurement), and the
report's table of them (the one analysis)."""

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

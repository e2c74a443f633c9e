"""The SLO sweet-spot search's table."""

from __future__ import annotations

import pyarrow as pa

from worthit.schemas.definition import VARIANT, Table, column
from worthit.schemas.report import INTERVAL_BASIS, REPORT_STATUS, measure_columns

SWEET_SPOT = Table(
    "sweet_spot",
    "The SLO sweet-spot search of one variant (sweet_spot.variants): one row per level it judged, the grid's "
    "(run 1) and the probes it measured between the last passing and the first failing grid level; the "
    "bracket and how the search ended are in the metadata (outcome, lo, hi, width, description).",
    (
        VARIANT,
        column("concurrency", pa.int32(), "closed-loop concurrency of the level"),
        column("source", pa.string(), "grid (a loadtest level, run 1) or search (a probe measured by the search)"),
        column("probe", pa.int32(), "order in which the search measured it (0 for grid levels)"),
        column("meets_slo", pa.bool_(), "P99 TTFT and P99 TPOT within the SLO"),
        column("n", pa.int32(), "requests measured"),
        column("n_errors", pa.int32(), "requests that failed"),
        column("ttft_ms_p50", pa.float64(), "median time to first token"),
        column("ttft_ms_p99", pa.float64(), "P99 time to first token"),
        column("tpot_ms_p50", pa.float64(), "median time per output token"),
        column("tpot_ms_p99", pa.float64(), "P99 time per output token"),
        column("output_tok_per_s", pa.float64(), "output tokens per second of the level"),
        column("goodput_tok_per_s", pa.float64(), "output tokens per second of requests meeting the SLO"),
    ),
)


REPORT_SWEET_SPOT = Table(
    "report_sweet_spot",
    "Report: the measured sweet spot per searched variant (sweet_spot.variants): the highest concurrency whose "
    "P99 TTFT and P99 TPOT meet the SLO, as a bracket [passes, fails) from the grid and the search's probes.",
    (
        VARIANT,
        column("outcome", pa.string(), "bracketed, probe_limit, all_pass (not reached), none_pass or no_grid"),
        column(
            "sweet_spot_concurrency", pa.int32(), "highest concurrency measured to meet the SLO below the first miss"
        ),
        column("first_miss_concurrency", pa.int32(), "lowest concurrency measured to miss it"),
        column("bracket_width", pa.int32(), "first miss - sweet spot (the search stops at sweet_spot.width)"),
        column("grid_levels", pa.int32(), "grid levels judged (run 1 of loadtest.levels)"),
        column("probes", pa.int32(), "levels the search measured between grid levels"),
        *measure_columns("ttft_ms_p99", "TTFT P99 at the sweet spot"),
        *measure_columns("tpot_ms_p99", "TPOT P99 at the sweet spot"),
        column("description", pa.string(), "the search's answer in words"),
        INTERVAL_BASIS,
        *REPORT_STATUS,
    ),
)

"""The deploy stage's report tables: the recommended deployments and their validation runs."""

from __future__ import annotations

import pyarrow as pa

from worthit.schemas.definition import Table, column
from worthit.schemas.report import INTERVAL_BASIS, LEVEL_MEASURES, REPORT_STATUS, measure_columns

REPORT_DEPLOYMENTS = Table(
    "report_deployments",
    "Report: recommended deployments, one per scenario (latency-first: the SLO-feasible concurrency; "
    "throughput-first: the most output tok/s under the TPOT ceiling), each an exact `vllm serve` argv with "
    "the concurrency and the figures it promises. The validate_deployment stage (worthit.experiments.deploy) "
    "serves each argv as printed and loads it at that concurrency "
    "(results/<study>/deployment~<scenario>/load*.parquet).",
    (
        column("scenario", pa.string(), "latency / throughput", False),
        *REPORT_STATUS,
        column("variant", pa.string(), "the variant deployed"),
        column("model", pa.string(), "the model as the config names it (hub id, or the path vLLM loads)"),
        column("model_source", pa.string(), "the config's model source"),
        column("argv", pa.list_(pa.string()), "the exact command, one argument per item"),
        column("command", pa.string(), "argv shell-quoted, to paste"),
        column("max_num_seqs", pa.int32(), "--max-num-seqs in argv"),
        column("concurrency", pa.int32(), "the concurrency the promise holds at (closed-loop requests in flight)"),
        column("chosen_by", pa.string(), "which measurement chose each flag"),
        column("slo_ttft_ms", pa.float64(), "P99 TTFT bound promised (latency scenario)"),
        column("slo_tpot_ms", pa.float64(), "P99 TPOT bound promised (TPOT ceiling in the throughput scenario)"),
        column("runs", pa.int32(), "independent runs behind the promise"),
        INTERVAL_BASIS,
        *LEVEL_MEASURES,
    ),
)


REPORT_VALIDATION = Table(
    "report_validation",
    "Report: each recommended deployment's promise against its validation runs (worthit.experiments.deploy), "
    "per figure; a miss is a measured value beyond the promised 95% interval on the worse side.",
    (
        column("scenario", pa.string(), "latency / throughput", False),
        column("variant", pa.string(), "the variant deployed"),
        column("quantity", pa.string(), "the figure", False),
        column("unit", pa.string(), "unit"),
        *measure_columns("promised", "the figure the report promised"),
        *measure_columns("measured", "the figure the validation run measured"),
        column("outcome", pa.string(), "met / miss / better than promised / not validated", False),
        *REPORT_STATUS,
    ),
)

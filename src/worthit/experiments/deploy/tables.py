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


REPORT_TOKEN_COST = Table(
    "report_token_cost",
    "Report: what a token costs, per variant at its best level under the SLO (the most output tok/s whose P99 "
    "TTFT and P99 TPOT meet it): the energy the server's GPUs drew per output token (NVML, worthit.energy) and "
    "USD per million output tokens = cost.usd_per_gpu_hour x GPUs / (output tok/s x 3600) x 1e6 "
    "(worthit.price). Null with the reason where not measured or not priced; never a zero.",
    (
        column("variant", pa.string(), "the variant", False),
        *REPORT_STATUS,
        column("concurrency", pa.int32(), "its best level under the SLO"),
        column("meets_slo", pa.bool_(), "that level meets the SLO (null: no SLO set, every level counts)"),
        *measure_columns("output_tok_per_s", "output tok/s at that level"),
        column("energy_j_per_output_token", pa.float64(), "joules per output token, mean over the level's runs"),
        column("energy_runs", pa.int32(), "runs whose energy was measured"),
        column("energy_reason", pa.string(), "why the energy was not measured (no NVIDIA GPU: NVML); null if it was"),
        column("usd_per_gpu_hour", pa.float64(), "cost.usd_per_gpu_hour (the variant's own, else the study's)"),
        column("gpus", pa.int32(), "GPUs the server holds (variants.<v>.gpus)"),
        column("usd_per_million_output_tokens", pa.float64(), "the price of a million output tokens at that level"),
        column("usd_per_million_output_tokens_ci95_low", pa.float64(), "95% interval, low (from output tok/s high)"),
        column("usd_per_million_output_tokens_ci95_high", pa.float64(), "95% interval, high (from output tok/s low)"),
        column("price_note", pa.string(), "why not priced (set cost.usd_per_gpu_hour); null when priced"),
    ),
)

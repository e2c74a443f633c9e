"""The tune's Parquet table: its trace, one row per candidate and scenario (worthit.experiments.tune.rounds)."""

from __future__ import annotations

import pyarrow as pa

from worthit import schemas
from worthit.schemas.definition import Table, column

TUNE_TRACE = Table(
    "tune_trace",
    "What `worthit tune` did: one row per candidate and scenario, in the order the rounds asked for them: its "
    "flag values, whether it was measured, failed or pruned by the plan (and why), and the figure each scenario "
    "ranks it by. The candidates' own load levels are ordinary results of the tune's study "
    "(results/<study>-tune/variant~tune_<id>/load/).",
    (
        column("round", pa.int32(), "the round that asked for the candidate (0 first)"),
        column("candidate_id", pa.string(), "hash of the candidate's values; its variant is tune_<id>"),
        column("scenario", pa.string(), "latency (highest load per GPU meeting the SLO) or throughput"),
        column("status", pa.string(), "measured, failed or pruned"),
        column("value", pa.float64(), "the scenario's figure: concurrency per GPU, or output tok/s per GPU"),
        column("values_json", pa.string(), "the candidate's flag values (and variant) as JSON"),
        column("reason", pa.string(), "why it failed or was pruned ('' when measured)"),
    ),
)
schemas.register(TUNE_TRACE)

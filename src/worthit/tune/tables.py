"""The tune's Parquet tables: its trace, one row per candidate and scenario (:mod:`worthit.tune.rounds`), and its
confirmation (:mod:`worthit.tune.fresh_starts`); :func:`worthit.tune.register` adds them to the schema module's
index."""

from __future__ import annotations

import pyarrow as pa

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
        column("scenario", pa.string(), "latency (concurrency per GPU at which the SLO is reached) or throughput"),
        column("status", pa.string(), "measured, failed or pruned"),
        column("value", pa.float64(), "the scenario's figure: concurrency per GPU, or output tok/s per GPU"),
        column("values_json", pa.string(), "the candidate's flag values (and variant) as JSON"),
        column("reason", pa.string(), "why it failed or was pruned ('' when measured)"),
    ),
)

TUNE_CONFIRMATION = Table(
    "tune_confirmation",
    "The tune's confirmation: per scenario, each re-measured candidate (the top of the rounds and vLLM's "
    "defaults) with its figure from every fresh server start, and the decision: the winner, or a tie and the "
    "candidate recommended (the fewest changed flags among those no other demonstrably beats).",
    (
        column("scenario", pa.string(), "latency or throughput"),
        column("name", pa.string(), "the candidate's flag values, or 'vLLM defaults'"),
        column("candidate_id", pa.string(), "hash of its values"),
        column("runs_json", pa.string(), "its figure from each fresh start, in start order (JSON list)"),
        column("mean", pa.float64(), "the mean of its runs"),
        column("changed_flags", pa.int32(), "flags (and a variant) it changes from the baseline as configured"),
        column("outcome", pa.string(), "winner, tie or '' (the decision of its scenario, on its recommended row)"),
        column("recommended", pa.bool_(), "the scenario's recommendation"),
        column("reason", pa.string(), "the decision's reasons, on the recommended row"),
    ),
)
TABLES = (TUNE_TRACE, TUNE_CONFIRMATION)

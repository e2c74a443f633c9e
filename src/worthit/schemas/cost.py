"""What a study cost: its table."""

from __future__ import annotations

import pyarrow as pa

from worthit.schemas.definition import Table, column

STUDY_COST = Table(
    "study_cost",
    "What the study cost (worthit.cost; results/<study>/cost.parquet): one row per server (each variant, each "
    "validated deployment) with its start time, serving time, lifetime and GPU-minutes; one per stage "
    "(Snakemake rule) with its jobs' wall and CPU time from their benchmark files; one for the study's totals.",
    (
        column("scope", pa.string(), "server, stage or study", False),
        column(
            "name", pa.string(), "the variant or deployment~<scenario> (server), the rule (stage), the study", False
        ),
        column("jobs", pa.int32(), "jobs with a benchmark file (a server: its serve job)"),
        column(
            "wall_s", pa.float64(), "server: lifetime, start to stop; stage and study: summed wall time of its jobs"
        ),
        column("wall_s_max", pa.float64(), "stage: its longest job"),
        column("cpu_s", pa.float64(), "stage and study: summed CPU time of the jobs' processes"),
        column("max_rss_mib", pa.float64(), "stage and study: the largest peak resident memory of one job"),
        column("server_start_s", pa.float64(), "server: supervisor start to vLLM listening (last start in its log)"),
        column("serving_s", pa.float64(), "server: listening to stop (its measurements and the waits between them)"),
        column("gpus", pa.int32(), "server: GPUs it claimed (0 on the CPU)"),
        column("gpu_minutes", pa.float64(), "server: lifetime x gpus / 60; study: the sum"),
        column(
            "planned_wall_s", pa.float64(), "server: the plan's estimated wall time (est_wall_s), where a plan exists"
        ),
        column("device", pa.string(), "server: vLLM's device (cuda, cpu) from its log"),
        column("source", pa.string(), "where the times come from (benchmark file, server log)"),
        column("note", pa.string(), "why a figure is missing or a lower bound"),
    ),
)

"""The plan's tables (worthit plan): the figures predicted on paper, and the plan against the measurement."""

from __future__ import annotations

import pyarrow as pa

from worthit.schemas.definition import VARIANT, Table, column

_CHECK = pa.struct(
    [
        pa.field("rule", pa.string()),
        pa.field("status", pa.string()),
        pa.field("detail", pa.string()),
        pa.field("source", pa.string()),
    ]
)

PLAN = Table(
    "plan",
    "worthit plan: per variant, its prerequisites on the planned hardware (met / not_met / unknown, with the "
    "rule's source) and its figures predicted on paper (worthit.plan): weights, KV pool and blocks, critical "
    "concurrency, decode roofline per load level, knee, throughput ceiling, wall time. Null where an input "
    "(model shapes, bandwidth) is unknown; notes say which.",
    (
        VARIANT,
        column("model", pa.string(), "model name from the study config", False),
        column("model_config", pa.string(), "where the model's shapes came from (given file, manifest, hub, unknown)"),
        column("status", pa.string(), "ok, or not_applicable when a prerequisite is not met", False),
        column("reason", pa.string(), "the first unmet prerequisite, as the not-applicable records state it"),
        column("failed_rule", pa.string(), "name of that rule"),
        column(
            "checks", pa.list_(_CHECK), "every prerequisite that concerns the variant: rule, status, detail, source"
        ),
        column("gpu", pa.string(), "GPU planned for (or CPU)"),
        column("gpu_count", pa.int32(), "GPUs available to the plan"),
        column("tensor_parallel_size", pa.int32(), "tensor-parallel size of the variant"),
        column("data_parallel_size", pa.int32(), "data-parallel size (engine replicas)"),
        column(
            "weight_bytes",
            pa.int64(),
            "weight bytes as served (the checkpoint's tensors at the served dtype: plan.served_weight_bytes; "
            "else computed from the shapes)",
        ),
        column(
            "weight_source",
            pa.string(),
            "checkpoint tensors at DTYPE, checkpoint files (no shapes known), or shapes (dtype or quantisation)",
        ),
        column("kv_cache_dtype", pa.string(), "KV cache dtype argument (auto = the served dtype)"),
        column("kv_bytes_per_token", pa.int64(), "2 x layers x KV heads x head dim x dtype bytes"),
        column("block_size_tokens", pa.int32(), "tokens per KV block"),
        column("gpu_memory_utilization", pa.float64(), "share of GPU memory vLLM may use"),
        column("gpu_memory_gib", pa.float64(), "GPU memory as CUDA reports it, per GPU"),
        column(
            "emulated_gpu_memory_gib",
            pa.float64(),
            "the card whose KV pool the variant is served with (serve.emulate_gpu_memory_gib; null: this one's)",
        ),
        column("max_num_seqs", pa.int32(), "max-num-seqs (vLLM's default for this hardware when unset)"),
        column("tokens_per_request", pa.int32(), "prompt + output tokens of the study's requests"),
        column(
            "overhead_gib",
            pa.float64(),
            "per-GPU memory vLLM keeps besides weights and KV (activations, graphs, workspaces)",
        ),
        column("overhead_source", pa.string(), "model, config or calibration the overhead comes from"),
        column("kv_memory_gib", pa.float64(), "predicted KV pool per GPU"),
        column("num_blocks", pa.int64(), "predicted KV blocks (per engine replica)"),
        column("kv_tokens", pa.int64(), "num_blocks x block_size_tokens"),
        column("critical_concurrency", pa.float64(), "kv_tokens x replicas / tokens_per_request"),
        column("peak_bandwidth_gb_s", pa.float64(), "peak memory bandwidth of the GPUs one replica spans, GB/s"),
        column("bandwidth_fraction", pa.float64(), "share of peak bandwidth decode is expected to reach"),
        column("bandwidth_source", pa.string(), "assumed, or the calibration it was measured in"),
        column("kernel", pa.string(), "W4A16 kernel family (Machete, Marlin, CPU); null for other weights"),
        column(
            "kernel_efficiency",
            pa.float64(),
            "share of bandwidth_fraction the W4A16 kernel reaches, calibrated on measured MBU (worthit.plan.kernels)",
        ),
        column("levels", pa.list_(pa.int32()), "concurrencies predicted (1 and the study's load levels)"),
        column(
            "tpot_floor_ms",
            pa.list_(pa.float64()),
            "roofline TPOT per level: max(bytes per step / bandwidth, FLOPs / tensor throughput)",
        ),
        column("tpot_expected_ms", pa.list_(pa.float64()), "tpot_floor_ms / bandwidth_fraction per level"),
        column("output_tok_per_s", pa.list_(pa.float64()), "concurrency / tpot_expected per level"),
        column("tpot_floor_ms_c1", pa.float64(), "TPOT floor at concurrency 1"),
        column("tpot_expected_ms_c1", pa.float64(), "expected TPOT at concurrency 1"),
        column("compute_knee_concurrency", pa.float64(), "concurrency where a decode step turns compute-bound"),
        column(
            "knee_concurrency", pa.float64(), "predicted knee: the lowest of the KV, max-num-seqs and compute limits"
        ),
        column("bound", pa.string(), "which limit sets the knee"),
        column("throughput_ceiling_tok_per_s", pa.float64(), "expected output tok/s at the KV / max-num-seqs limit"),
        column(
            "est_wall_s",
            pa.float64(),
            "estimated wall time of the variant's measurements (server start included, lm-eval excluded)",
        ),
        column("notes", pa.string(), "what could not be predicted and why"),
    ),
)

PLAN_VS_MEASURED = Table(
    "plan_vs_measured",
    "The plan set against the measurement (worthit.plan.compare): per variant and quantity the predicted and "
    "measured figure, measured / predicted, and whether it lies within the tolerance (relative: |ratio - 1| <= "
    "tolerance; factor: 1/tolerance <= ratio <= tolerance).",
    (
        VARIANT,
        column(
            "quantity",
            pa.string(),
            "kv_blocks, critical_concurrency, knee_concurrency, tpot_ms_c<lowest level>, output_tok_per_s",
            False,
        ),
        column("unit", pa.string(), "unit of predicted and measured"),
        column("predicted", pa.float64(), "the plan's figure"),
        column("measured", pa.float64(), "the study's figure"),
        column("ratio", pa.float64(), "measured / predicted"),
        column("tolerance", pa.float64(), "allowed deviation (see tolerance_kind)"),
        column("tolerance_kind", pa.string(), "relative or factor"),
        column("within_tolerance", pa.bool_(), "null when either figure is missing"),
        column("flag", pa.string(), "over / under when outside the tolerance"),
        column("note", pa.string(), "how the measured figure was taken (level, knee rule, MBU)"),
    ),
)

"""Plan before you measure: each variant's prerequisites checked and its figures predicted on paper.

For every variant of a study this package answers, without starting an engine:

* **Prerequisites** (:func:`check`, :mod:`worthit.plan.prerequisites`): rules a variant must meet to run
  at all on the given hardware, each with its source. A rule that fails makes the variant *not
  applicable*: the server supervisor asks these rules (through :func:`worthit.gating.not_applicable`) and
  never starts such a server.
* **Predictions** (:func:`predict`, :mod:`worthit.plan.predictions`): weight bytes, KV bytes per token, KV
  blocks and tokens at the configured memory share (the memory model: :mod:`worthit.plan.memory`), the
  critical concurrency, the decode-step roofline for TPOT at every load level, the knee, the throughput
  ceiling and the study's estimated wall time.

After a study, :func:`compare` (:mod:`worthit.plan.measured`) sets the plan against the measurements
(``plan_vs_measured``), flagging every figure off by more than its tolerance; :func:`calibrate` turns a
finished study into the fractions ``--calibration`` feeds the next plan.

The modules, each one idea: :mod:`~worthit.plan.shapes` (model shapes, dtype bytes), :mod:`~worthit.plan.hardware`,
:mod:`~worthit.plan.checkpoints` (model folders and their weights as served), :mod:`~worthit.plan.memory`,
:mod:`~worthit.plan.prerequisites`, :mod:`~worthit.plan.predictions`, :mod:`~worthit.plan.model_sources` (where
each model's shapes come from), :mod:`~worthit.plan.study` (the study plan, and what the workflow leaves out),
:mod:`~worthit.plan.measured`, :mod:`~worthit.plan.output` (Parquet, Markdown, the printed cards) and
:mod:`~worthit.plan.cli` (``worthit plan``). Everything public is importable from ``worthit.plan``.

The rules and predictions import only the standard library (the supervisor runs them in any
environment); writing Parquet, reading results and printing cards import their libraries when called.
"""

from __future__ import annotations

from worthit.config import ROOT as REPO_ROOT
from worthit.plan.checkpoints import local_model_folder, served_weight_bytes
from worthit.plan.cli import parse_model_configs, run_cli
from worthit.plan.hardware import Hardware, hardware_for, host_cpu_has_avx512_or_amx, vllm_defaults
from worthit.plan.measured import DEFAULT_TOLERANCES, calibrate, compare
from worthit.plan.memory import CUDA_GRAPH_GIB_PER_LAYER, NON_TORCH_GIB, memory_overhead_gib
from worthit.plan.model_sources import model_configs
from worthit.plan.output import card_lines, comparison_markdown, markdown, print_cards, write, write_comparison
from worthit.plan.predictions import (
    DEFAULT_BANDWIDTH_FRACTION,
    SERVER_START_S,
    PlanCalibration,
    Roofline,
    WorkloadShape,
    predict,
)
from worthit.plan.prerequisites import (
    DRAFT_FREE_METHODS,
    MARLIN_METHODS,
    MET,
    NOT_MET,
    RULE_SOURCES,
    RULES,
    UNKNOWN,
    PrerequisiteCheck,
    Subject,
    check,
    first_unmet,
    rule_cpu_int4,
    rule_draft_tokenizer,
    rule_fp8_kv,
    rule_gpu_count,
    rule_marlin,
    rule_memory_fit,
    rule_parallel_divisibility,
    rule_quant_group_size,
    serving_subject,
)
from worthit.plan.shapes import (
    DTYPE_BYTES,
    GIB,
    PER_TOKEN_HEAD_SCALE_BYTES,
    ModelShape,
    PlanError,
    Quant,
    dtype_bytes,
    kv_bytes_per_token,
    max_model_len,
    parallel_sizes,
    served_dtype,
)
from worthit.plan.study import RuledOut, StudyPlan, fill_in, make_plan, refused_before_serving, workload

__all__ = [
    "CUDA_GRAPH_GIB_PER_LAYER",
    "DEFAULT_BANDWIDTH_FRACTION",
    "DEFAULT_TOLERANCES",
    "DRAFT_FREE_METHODS",
    "DTYPE_BYTES",
    "GIB",
    "MARLIN_METHODS",
    "MET",
    "NON_TORCH_GIB",
    "NOT_MET",
    "PER_TOKEN_HEAD_SCALE_BYTES",
    "REPO_ROOT",
    "RULES",
    "RULE_SOURCES",
    "SERVER_START_S",
    "UNKNOWN",
    "Hardware",
    "ModelShape",
    "PlanCalibration",
    "PlanError",
    "PrerequisiteCheck",
    "Quant",
    "Roofline",
    "RuledOut",
    "StudyPlan",
    "Subject",
    "WorkloadShape",
    "calibrate",
    "card_lines",
    "check",
    "compare",
    "comparison_markdown",
    "dtype_bytes",
    "fill_in",
    "first_unmet",
    "hardware_for",
    "host_cpu_has_avx512_or_amx",
    "kv_bytes_per_token",
    "local_model_folder",
    "make_plan",
    "markdown",
    "max_model_len",
    "memory_overhead_gib",
    "model_configs",
    "parallel_sizes",
    "parse_model_configs",
    "predict",
    "print_cards",
    "refused_before_serving",
    "rule_cpu_int4",
    "rule_draft_tokenizer",
    "rule_fp8_kv",
    "rule_gpu_count",
    "rule_marlin",
    "rule_memory_fit",
    "rule_parallel_divisibility",
    "rule_quant_group_size",
    "run_cli",
    "served_dtype",
    "served_weight_bytes",
    "serving_subject",
    "vllm_defaults",
    "workload",
    "write",
    "write_comparison",
]

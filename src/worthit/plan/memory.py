"""The memory model: what vLLM's profiler reserves per GPU besides the weights and the KV cache.

vLLM gives the KV cache ``gpu-memory-utilization x total memory`` less everything else it measured at
start-up: the weights, the activation peak of one ``max-num-batched-tokens`` forward pass, the CUDA-graph
pool (vLLM >= 0.21 counts it), and persistent non-weight memory (attention-backend and cuBLAS workspaces,
loaded kernels). We model the activation peak as tokens x (2 x intermediate + 4 x hidden) activations, the
graph pool as a constant per layer (0.89 GiB for a 28-layer 7B measured on the H200), and the rest as one
constant fitted between the two measured points this project has (an RTX 3090 left ~2.5 GiB beyond the
weights, an H200 ~1.3 GiB; :data:`NON_TORCH_GIB`). ``--calibration results/<study>`` replaces the modelled
overhead by what a finished study measured (:mod:`worthit.plan.measured`).
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from worthit import engine_args as eargs
from worthit.plan.hardware import Hardware, vllm_defaults
from worthit.plan.shapes import GIB, ModelShape, dtype_bytes, int_or_none, parallel_sizes, served_dtype

# Persistent non-weight memory vLLM's profiler counts besides activations and graphs: attention-backend
# and cuBLAS workspaces, kernels loaded by torch.compile and CUDA. Fitted: with the activation and graph
# terms below it puts the RTX 3090 study's measured KV blocks (5,306 bf16, 15,839 AWQ) within +6% / +2% and
# the H200 example's (128,943) within -1.3% (docs/experiments.md, "Plan before you measure"); a constant cannot
# do better, since the smaller GPU showed the larger overhead (about 2.5 GiB vs 1.3 GiB beyond the weights).
NON_TORCH_GIB = 1.25
# CUDA-graph pool per decoder layer: 0.89 GiB for 28 layers on the H200 (vLLM 0.25, 51 sizes x 2 modes;
# examples/h200/results/logs/serve/bf16.log, "Graph capturing finished").
CUDA_GRAPH_GIB_PER_LAYER = 0.89 / 28


def memory_overhead_gib(shape: ModelShape, args: Mapping[str, Any] | None, hw: Hardware) -> float:
    """Non-weight, non-KV memory vLLM's profiler reserves per GPU (module docstring)."""
    tp, pp, _ = parallel_sizes(args)
    tokens = int_or_none(eargs.get(args, "max-num-batched-tokens")) or vllm_defaults(hw)[0]
    act_b = dtype_bytes(served_dtype(shape, args, hw.cpu)) or 2
    activations = tokens * (2 * shape.intermediate / tp + 4 * shape.hidden) * act_b / GIB
    graphs = 0.0 if eargs.get(args, "enforce-eager") else CUDA_GRAPH_GIB_PER_LAYER * shape.layers / pp
    return NON_TORCH_GIB + graphs + activations

"""Predictions: a variant's figures on paper, from its shapes, the hardware and the study's workload.

Weight bytes, KV bytes per token (2 x layers x KV heads x head dim x dtype bytes), KV blocks and tokens at
the configured memory share (:mod:`worthit.plan.memory`), the critical concurrency at the study's request
length, the decode-step roofline (bytes read per step / bandwidth, or FLOPs / tensor throughput when that
is slower) for TPOT at concurrency 1 and at every load level, the knee and the throughput ceiling, and the
study's estimated wall time. Standard library only.
"""

from __future__ import annotations

import math
import os
from dataclasses import dataclass
from typing import Any

from worthit import engine_args as eargs
from worthit.plan import kernels
from worthit.plan.hardware import Hardware, vllm_defaults
from worthit.plan.memory import memory_overhead_gib
from worthit.plan.prerequisites import Subject
from worthit.plan.shapes import GIB, ModelShape, int_or_none, kv_bytes_per_token, kv_split, max_model_len

# Typical decode efficiency when nothing was measured: an RTX 3090 (Qwen2.5-7B) reached ~0.8 of peak
# bandwidth at concurrency 1, the H200 0.68 (docs/hardware-results.md).
DEFAULT_BANDWIDTH_FRACTION = 0.75
SERVER_START_S = 180.0  # a cold vLLM start with CUDA graphs (examples/h200: about 3 minutes)


@dataclass(frozen=True)
class PlanCalibration:
    """Fractions measured by a finished study, to replace the plan's assumptions (:func:`worthit.plan.calibrate`)."""

    source: str
    gpu: str | None = None
    bandwidth_fraction: float | None = None
    overhead_gib: float | None = None
    throughput_fraction: float | None = None


@dataclass(frozen=True)
class WorkloadShape:
    """The study's request shape and grid, as the predictions need them."""

    prompt_tokens: int
    output_tokens: int
    levels: tuple[int, ...]
    requests: tuple[int, ...] = ()  # requests per level (measured + warm-up), one run
    repeats: int = 1
    prefix: tuple[tuple[int, int], ...] = ()  # (prompt tokens, requests) per prefix length
    prefix_output_tokens: int = 0
    experiments: tuple[str, ...] = ()
    # load levels beyond the grid, costed with the grid's request shape: (concurrency, requests, runs) of each
    # workload level the variant measures (loadtest.workload_levels) and of each sweet-spot probe
    extra: tuple[tuple[int, int, int], ...] = ()

    @property
    def tokens_per_request(self) -> int:
        return self.prompt_tokens + self.output_tokens

    @property
    def decode_context(self) -> float:
        """Mean context a decode step reads per sequence: the prompt and half the output."""
        return self.prompt_tokens + self.output_tokens / 2


@dataclass(frozen=True)
class Roofline:
    """One decode step of a replica: every (active) weight read once plus each sequence's KV, against the
    bandwidth; or 2 FLOPs per active parameter per sequence against the tensor throughput, if slower."""

    weight_bytes: float
    kv_bytes_per_seq: float
    bandwidth_b_s: float
    flops_per_seq: float
    flops_s: float

    def step_s(self, c: float) -> float:
        mem_s = (self.weight_bytes + c * self.kv_bytes_per_seq) / self.bandwidth_b_s
        return max(mem_s, c * self.flops_per_seq / self.flops_s) if self.flops_s else mem_s

    @property
    def compute_knee(self) -> float | None:
        """Concurrency where the step turns compute-bound: (W + c kv) / bw = c f / F."""
        if not self.flops_s:
            return None
        denom = self.flops_per_seq / self.flops_s - self.kv_bytes_per_seq / self.bandwidth_b_s
        return self.weight_bytes / self.bandwidth_b_s / denom if denom > 0 else None


def predict(
    s: Subject,
    hw: Hardware,
    wl: WorkloadShape,
    *,
    calibration: PlanCalibration | None = None,
    bandwidth_fraction: float = DEFAULT_BANDWIDTH_FRACTION,
    overhead_gib: float | None = None,
    server_start_s: float | None = None,
) -> dict[str, Any]:
    """The figures of one variant on ``hw`` (None where an input is unknown; ``notes`` says which)."""
    out: dict[str, Any] = {"notes": []}
    m = s.shape
    if m is None:
        out["notes"].append("model shapes unknown: no prediction (plan with --model-config NAME=FILE)")
        return out
    known, out["weight_source"] = s.weights(hw.cpu)
    weights = int(known or 0)
    out.update(
        weight_bytes=weights,
        kv_cache_dtype=str(eargs.get(s.args, "kv-cache-dtype") or "auto"),
        kv_bytes_per_token=kv_bytes_per_token(m, s.args, hw.cpu),
        block_size_tokens=int_or_none(eargs.get(s.args, "block-size")) or (128 if hw.cpu else 16),
        gpu_memory_utilization=None if hw.cpu else float(eargs.get(s.args, "gpu-memory-utilization") or 0.9),
        gpu_memory_gib=hw.memory_gib,
        max_num_seqs=int_or_none(eargs.get(s.args, "max-num-seqs")) or vllm_defaults(hw)[1],
        tokens_per_request=wl.tokens_per_request,
    )
    _predict_kv_pool(out, s, m, hw, wl=wl, calibration=calibration, overhead_gib=overhead_gib)
    if hw.cpu or hw.bandwidth_gb_s is None:
        out["notes"].append("no bandwidth figure for this hardware: no TPOT or throughput prediction (--gpu NAME)")
        return out
    fraction = bandwidth_fraction
    out["bandwidth_source"] = "assumed (plan.bandwidth_fraction)"
    if calibration and calibration.bandwidth_fraction:
        fraction = calibration.bandwidth_fraction
        out["bandwidth_source"] = f"calibration: {calibration.source}"
    bf16_fraction, kernel_note = fraction, None
    if (kernel := kernels.family(s, hw)) is not None:  # a W4A16 kernel reaches part of it (worthit.plan.kernels)
        cal = kernels.calibration(kernel, hw)
        out.update(kernel=kernel, kernel_efficiency=cal.efficiency if cal else None)
        if cal is not None:
            fraction *= cal.efficiency
            kernel_note = (
                f"kernel efficiency {cal.efficiency:.2f} of bf16's bandwidth fraction, calibrated on {cal.source}"
            )
        else:
            kernel_note = "kernel efficiency not calibrated: the step is scaled by weight bytes alone"
    tp, pp, dp = s.parallel
    roof = Roofline(
        weight_bytes=weights if not m.experts else weights * m.active_params / max(m.params, 1),
        kv_bytes_per_seq=out["kv_bytes_per_token"] * wl.decode_context,
        bandwidth_b_s=hw.bandwidth_gb_s * 1e9 * tp * pp,
        flops_per_seq=2.0 * m.active_params,
        flops_s=(hw.tensor_tflops or 0) * 1e12 * tp * pp,
    )
    levels = sorted(set(wl.levels) | {1})
    floor = [roof.step_s(c) * 1e3 for c in levels]
    expected = [f / fraction for f in floor]
    limits = {
        "KV capacity": out.get("critical_concurrency"),
        "max-num-seqs": float(out["max_num_seqs"] * dp),
        "compute": roof.compute_knee,
    }
    bound, knee = min(((k, v) for k, v in limits.items() if v is not None), key=lambda kv: kv[1])
    ceiling_c = min(v for k, v in limits.items() if v is not None and k != "compute")
    ceiling = ceiling_c * fraction / roof.step_s(ceiling_c) if ceiling_c else None
    if ceiling is not None and calibration and calibration.throughput_fraction:
        ceiling *= calibration.throughput_fraction
    out.update(
        peak_bandwidth_gb_s=hw.bandwidth_gb_s * tp * pp,
        bandwidth_fraction=bf16_fraction,
        levels=levels,
        tpot_floor_ms=floor,
        tpot_expected_ms=expected,
        output_tok_per_s=[c * 1e3 / t for c, t in zip(levels, expected, strict=True)],
        tpot_floor_ms_c1=floor[0],
        tpot_expected_ms_c1=expected[0],
        compute_knee_concurrency=roof.compute_knee,
        knee_concurrency=knee,
        bound=bound,
        throughput_ceiling_tok_per_s=ceiling,
        est_wall_s=_wall_s(roof, wl, fraction, server_start_s),
    )
    if kernel_note:
        out["notes"].append(f"W4A16 ({kernel}): {expected[0]:.2f} ms/step at concurrency 1, {kernel_note}")
    if eargs.speculative_config(s.args):
        out["notes"].append("speculative decoding: TPOT predicted for plain decoding (see the specdec analysis)")
    if "accuracy" in wl.experiments:
        out["notes"].append("wall time excludes lm-eval (its duration depends on the tasks' sizes)")
    return out


def _predict_kv_pool(
    out: dict[str, Any],
    s: Subject,
    m: ModelShape,
    hw: Hardware,
    *,
    wl: WorkloadShape,
    calibration: PlanCalibration | None,
    overhead_gib: float | None,
) -> None:
    """KV memory, blocks, tokens and critical concurrency of one replica (per GPU for the memory)."""
    tp, pp, dp = s.parallel
    explicit = eargs.get(s.args, "kv-cache-memory-bytes")
    kv_mem: float | None = None
    if explicit:
        kv_mem = float(explicit)
        out["overhead_source"] = "kv-cache-memory-bytes (no profiling)"
    elif hw.cpu:
        space = os.environ.get("VLLM_CPU_KVCACHE_SPACE")
        kv_mem = float(space) * GIB if space else None
        if kv_mem is None:
            out["notes"].append("CPU without kv-cache-memory-bytes: KV pool size unknown")
    elif hw.memory_gib is not None:
        if overhead_gib is not None:
            ovh, src = float(overhead_gib), "config: plan.memory_overhead_gib"
        elif calibration and calibration.overhead_gib is not None:
            ovh, src = calibration.overhead_gib, f"calibration: {calibration.source}"
        else:
            ovh, src = memory_overhead_gib(m, s.args, hw), "model: activations + CUDA graphs + non-torch"
        out.update(overhead_gib=ovh, overhead_source=src)
        kv_mem = out["gpu_memory_utilization"] * hw.memory_gib * GIB - out["weight_bytes"] / (tp * pp) - ovh * GIB
    if kv_mem is None:
        return
    block = out["block_size_tokens"]
    blocks = max(0, int(kv_mem // (block * out["kv_bytes_per_token"] / kv_split(m, tp, pp))))
    kv_tokens = blocks * block
    out.update(
        kv_memory_gib=kv_mem / GIB,
        num_blocks=blocks,
        kv_tokens=kv_tokens,
        critical_concurrency=kv_tokens * dp / wl.tokens_per_request,
    )
    need = max_model_len(m, s.args)
    if kv_tokens < need:
        out["notes"].append(f"KV pool of {kv_tokens:,} tokens is below max-model-len {need:,}: vLLM refuses to start")


def _wall_s(roof: Roofline, wl: WorkloadShape, fraction: float, server_start_s: float | None) -> float:
    """Server start, then every measurement one after another: waves of requests, each a prefill
    (compute-bound) and its output tokens at the level's expected TPOT."""
    start = server_start_s if server_start_s is not None else SERVER_START_S
    prefill_s_per_token = roof.flops_per_seq / (roof.flops_s * fraction) if roof.flops_s else 0.0
    wall = start + (5.0 if "kv" in wl.experiments else 0.0)

    def level_s(c: int, n: int, runs: int) -> float:
        per_request = wl.prompt_tokens * prefill_s_per_token + wl.output_tokens * roof.step_s(c) / fraction
        return runs * math.ceil(n / c) * per_request

    if "loadtest" in wl.experiments:
        wall += sum(level_s(c, n, wl.repeats) for c, n in zip(wl.levels, wl.requests, strict=False))
    wall += sum(level_s(c, n, runs) for c, n, runs in wl.extra)
    if "prefix" in wl.experiments:
        for tokens, n in wl.prefix:
            wall += n * (tokens * prefill_s_per_token + wl.prefix_output_tokens * roof.step_s(1) / fraction)
    return wall

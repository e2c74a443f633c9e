"""The plan learns the kernels: how much of bf16's bandwidth fraction a W4A16 kernel reaches.

The plan predicts a decode step as its bytes over the bandwidth, divided by the fraction of peak bandwidth a step
reaches (:data:`worthit.plan.predictions.DEFAULT_BANDWIDTH_FRACTION`). Scaled by weight bytes alone, INT4 would
take a third of bf16's step; the W4A16 kernels do not: on one H200, the Qwen2.5-7B-shaped model of
examples/h200-qwen/7b-int4 decoded in 3.79 ms (Machete) and 3.11 ms (Marlin) against bf16's 4.76, where weight
bytes alone said 1.56 ms (MBU 31 % and 37 % against bf16's 67 %). Each kernel family's efficiency is its MBU over
bf16's on the same machine and model (``src/worthit/data/kernel_efficiency.csv``: the measured TPOTs and weight
bytes behind it, at most 1), and the plan divides bf16's fraction by it for a W4A16 variant. A GPU not in the table
takes its family's row of the nearest peak bandwidth: the fixed cost of a step (attention, launches, sampling)
weighs more the faster the weights are read, so Marlin reaches bf16's fraction on an RTX 3090 and 0.56 of it on an
H200. The CPU's int4 kernel is not calibrated: the plan predicts no TPOT on a CPU.

Which family serves a variant (vLLM 0.25): a checkpoint in AWQ or GPTQ format, ``linear-backend: marlin``, or
a GPU below sm_90 -> Marlin; a compressed-tensors W4A16 checkpoint on sm_90 -> Machete (vLLM's choice).
"""

from __future__ import annotations

import csv
import functools
from dataclasses import dataclass
from pathlib import Path

from worthit import engine_args as eargs
from worthit.plan.hardware import Hardware
from worthit.plan.prerequisites import Subject

TABLE = Path(__file__).resolve().parent.parent / "data" / "kernel_efficiency.csv"
MACHETE, MARLIN, CPU = "Machete", "Marlin", "CPU"
_MARLIN_FORMATS = ("awq", "gptq", "awq_marlin", "gptq_marlin")


@dataclass(frozen=True)
class KernelCalibration:
    """One measured pair: bf16 and a W4A16 kernel on one GPU and model, TPOT P50 at concurrency 1."""

    family: str
    gpu: str
    peak_bandwidth_gb_s: float
    bf16_tpot_ms: float
    w4a16_tpot_ms: float
    bf16_weight_bytes: float
    w4a16_weight_bytes: float
    source: str

    @property
    def efficiency(self) -> float:
        """The W4A16 step's MBU over bf16's (weight bytes per step time, at one bandwidth), at most 1."""
        return min(1.0, (self.w4a16_weight_bytes / self.w4a16_tpot_ms) / (self.bf16_weight_bytes / self.bf16_tpot_ms))


@functools.cache
def table(path: Path = TABLE) -> tuple[KernelCalibration, ...]:
    with open(path, newline="") as f:
        return tuple(
            KernelCalibration(
                r["family"],
                r["gpu"],
                float(r["peak_bandwidth_gb_s"]),
                float(r["bf16_tpot_ms"]),
                float(r["w4a16_tpot_ms"]),
                float(r["bf16_weight_bytes"]),
                float(r["w4a16_weight_bytes"]),
                r["source"],
            )
            for r in csv.DictReader(f)
        )


def family(s: Subject, hw: Hardware) -> str | None:
    """The W4A16 kernel family that serves ``s`` on ``hw`` (None: its weights are not 4-bit)."""
    q = s.quant
    if q is None or q.bits != 4:
        return None
    if hw.cpu:
        return CPU
    backend = str(eargs.get(s.args, "linear-backend") or "").lower()
    method = str(eargs.get(s.args, "quantization") or q.method or "").lower()
    if backend == "marlin" or method in _MARLIN_FORMATS or (hw.compute_capability or (0, 0)) < (9, 0):
        return MARLIN
    return MACHETE


def calibration(kernel: str, hw: Hardware) -> KernelCalibration | None:
    """The family's row for this GPU, else its row of the nearest peak bandwidth (None: never measured)."""
    rows = [r for r in table() if r.family == kernel]
    exact = [r for r in rows if r.gpu.lower() in hw.name.lower() or hw.name.lower() in r.gpu.lower()]
    if exact or not rows:
        return exact[0] if exact else None
    bw = hw.bandwidth_gb_s or 0.0
    return min(rows, key=lambda r: abs(r.peak_bandwidth_gb_s - bw))

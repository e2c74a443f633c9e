"""The accelerators worthit knows by name: one table of datasheet figures for planning and for MBU.

Each entry gives what a plan needs to reason about a GPU the user may not have: peak memory bandwidth
(decimal GB/s, datasheet), memory capacity as CUDA reports it (``cudaMemGetInfo`` total, GiB: a little
below the marketing size, the driver keeps the rest), compute capability, and dense tensor-core
throughput (bf16, fp16 where the GPU has no bf16; TFLOP/s, datasheet, no sparsity). Names match what
``nvidia-smi`` reports, by regular expression: the first pattern that matches wins, so the specific
variants (80GB, PCIe, NVL, Ti) come before their family.

This module imports only the standard library: the server supervisor's gate uses it in any environment.
"""

from __future__ import annotations

import re
from dataclasses import dataclass

_NV = "https://www.nvidia.com/"
# CUDA's total is the datasheet size less what the driver reserves; where we did not read it off a
# device, it is estimated as nvidia-smi's total less about 0.5 GiB (what the H200 shows: 140.40 vs 139.80).
_EST = "estimate: nvidia-smi total less the driver's reserve"


@dataclass(frozen=True)
class Bandwidth:
    """A peak memory bandwidth and where it comes from (the report's MBU denominator)."""

    name: str
    gb_s: float
    source: str


@dataclass(frozen=True)
class GpuSpec:
    """One GPU model's datasheet figures."""

    pattern: str
    name: str
    bandwidth_gb_s: float
    memory_gib: float
    compute_capability: tuple[int, int] | None  # None: not a CUDA device
    tensor_tflops: float | None
    source: str
    memory_source: str = _EST

    @property
    def sm(self) -> str:
        if self.compute_capability is None:
            return "not CUDA"
        major, minor = self.compute_capability
        return f"sm_{major}{minor}"

    @property
    def bandwidth(self) -> Bandwidth:
        return Bandwidth(self.name, self.bandwidth_gb_s, self.source)


GPUS: tuple[GpuSpec, ...] = (
    GpuSpec(
        r"H200",
        "NVIDIA H200 (SXM / NVL)",
        4800,
        139.80,
        (9, 0),
        989,
        _NV + "en-us/data-center/h200/",
        "measured: cudaMemGetInfo total on an H200 (nvidia-smi: 143771 MiB)",
    ),
    GpuSpec(r"H100.*NVL", "NVIDIA H100 NVL", 3900, 93.1, (9, 0), 835, _NV + "en-us/data-center/h100/"),
    GpuSpec(r"H100.*PCI", "NVIDIA H100 PCIe", 2000, 79.2, (9, 0), 756, _NV + "en-us/data-center/h100/"),
    GpuSpec(r"H100", "NVIDIA H100 SXM", 3350, 79.2, (9, 0), 989, _NV + "en-us/data-center/h100/"),
    GpuSpec(
        r"A100.*80\s*GB.*PCI|A100.*PCI.*80\s*GB",
        "NVIDIA A100 80GB PCIe",
        1935,
        79.2,
        (8, 0),
        312,
        _NV + "en-us/data-center/a100/",
    ),
    GpuSpec(r"A100.*80\s*GB", "NVIDIA A100 80GB SXM", 2039, 79.2, (8, 0), 312, _NV + "en-us/data-center/a100/"),
    GpuSpec(r"A100", "NVIDIA A100 40GB", 1555, 39.4, (8, 0), 312, _NV + "en-us/data-center/a100/"),
    GpuSpec(r"B200", "NVIDIA B200", 8000, 178.4, (10, 0), 2250, _NV + "en-us/data-center/dgx-b200/"),
    GpuSpec(r"L40S", "NVIDIA L40S", 864, 44.4, (8, 9), 362, _NV + "en-us/data-center/l40s/"),
    GpuSpec(r"L40\b", "NVIDIA L40", 864, 44.4, (8, 9), 181, _NV + "en-us/data-center/l40/"),
    GpuSpec(r"\bL4\b", "NVIDIA L4", 300, 22.0, (8, 9), 121, _NV + "en-us/data-center/l4/"),
    GpuSpec(r"A10G", "NVIDIA A10G", 600, 22.0, (8, 6), 70, "https://aws.amazon.com/ec2/instance-types/g5/"),
    GpuSpec(r"\bA10\b", "NVIDIA A10", 600, 22.0, (8, 6), 125, _NV + "en-us/data-center/products/a10-gpu/"),
    GpuSpec(r"\bT4\b", "NVIDIA T4", 320, 14.75, (7, 5), 65, _NV + "en-us/data-center/tesla-t4/"),
    GpuSpec(r"V100.*16\s*GB", "NVIDIA V100 SXM2 16GB", 900, 15.8, (7, 0), 125, _NV + "en-us/data-center/v100/"),
    GpuSpec(r"V100", "NVIDIA V100 SXM2", 900, 31.7, (7, 0), 125, _NV + "en-us/data-center/v100/"),
    GpuSpec(
        r"RTX\s*6000\s*Ada",
        "NVIDIA RTX 6000 Ada",
        960,
        47.5,
        (8, 9),
        182,
        _NV + "en-us/design-visualization/rtx-6000/",
    ),
    GpuSpec(
        r"RTX\s*A6000",
        "NVIDIA RTX A6000",
        768,
        47.5,
        (8, 6),
        155,
        _NV + "en-us/design-visualization/rtx-a6000/",
    ),
    GpuSpec(
        r"RTX\s*4090",
        "NVIDIA GeForce RTX 4090",
        1008,
        23.65,
        (8, 9),
        165,
        _NV + "en-us/geforce/graphics-cards/40-series/rtx-4090/",
    ),
    GpuSpec(
        r"RTX\s*3090\s*Ti",
        "NVIDIA GeForce RTX 3090 Ti",
        1008,
        23.65,
        (8, 6),
        80,
        _NV + "en-us/geforce/graphics-cards/30-series/rtx-3090-3090ti/",
    ),
    GpuSpec(
        r"RTX\s*3090",
        "NVIDIA GeForce RTX 3090",
        936,
        23.69,
        (8, 6),
        71,
        _NV + "en-us/geforce/graphics-cards/30-series/rtx-3090-3090ti/",
        "PyTorch's reported total capacity of a 24 GB RTX 3090 (23.69 GiB)",
    ),
    GpuSpec(
        r"MI300X",
        "AMD Instinct MI300X",
        5300,
        191.5,
        None,
        1307,
        "https://www.amd.com/en/products/accelerators/instinct/mi300/mi300x.html",
    ),
)


def lookup(name: str | None) -> GpuSpec | None:
    """The table entry for a GPU name as ``nvidia-smi`` (or a user) writes it; None when unknown."""
    if not name:
        return None
    for spec in GPUS:
        if re.search(spec.pattern, name, re.IGNORECASE):
            return spec
    return None


def known_names() -> list[str]:
    return [g.name for g in GPUS]

"""Memory-bandwidth utilisation: (weight bytes + KV bytes read per decode step) / TPOT / peak bandwidth.

Decode is bandwidth-bound: each step reads every weight once plus the KV cache of every sequence in
the batch. Peak bandwidth comes from the study config (``hardware.peak_bandwidth_gb_s``) or from the
datasheet table below, matched against the GPU name that ``nvidia-smi`` reports. Unknown hardware
(a CPU, an unlisted GPU) has no MBU: the report says "n/a" rather than guess.
"""

from __future__ import annotations

import re
from dataclasses import dataclass


@dataclass(frozen=True)
class Bandwidth:
    name: str
    gb_s: float
    source: str


_NV = "https://www.nvidia.com/"
# Datasheet peak memory bandwidth, decimal GB/s. Order matters: the first pattern that matches wins,
# so the more specific variants (80GB, PCIe, NVL) come before their family.
GPU_BANDWIDTH: tuple[tuple[str, Bandwidth], ...] = (
    (r"H200", Bandwidth("NVIDIA H200 (SXM / NVL)", 4800, _NV + "en-us/data-center/h200/")),
    (r"H100.*NVL", Bandwidth("NVIDIA H100 NVL", 3900, _NV + "en-us/data-center/h100/")),
    (r"H100.*PCI", Bandwidth("NVIDIA H100 PCIe", 2000, _NV + "en-us/data-center/h100/")),
    (r"H100", Bandwidth("NVIDIA H100 SXM", 3350, _NV + "en-us/data-center/h100/")),
    (
        r"A100.*80\s*GB.*PCI|A100.*PCI.*80\s*GB",
        Bandwidth("NVIDIA A100 80GB PCIe", 1935, _NV + "en-us/data-center/a100/"),
    ),
    (r"A100.*80\s*GB", Bandwidth("NVIDIA A100 80GB SXM", 2039, _NV + "en-us/data-center/a100/")),
    (r"A100", Bandwidth("NVIDIA A100 40GB", 1555, _NV + "en-us/data-center/a100/")),
    (r"B200", Bandwidth("NVIDIA B200", 8000, _NV + "en-us/data-center/dgx-b200/")),
    (r"L40S", Bandwidth("NVIDIA L40S", 864, _NV + "en-us/data-center/l40s/")),
    (r"L40\b", Bandwidth("NVIDIA L40", 864, _NV + "en-us/data-center/l40/")),
    (r"\bL4\b", Bandwidth("NVIDIA L4", 300, _NV + "en-us/data-center/l4/")),
    (r"A10G", Bandwidth("NVIDIA A10G", 600, "https://aws.amazon.com/ec2/instance-types/g5/")),
    (r"\bA10\b", Bandwidth("NVIDIA A10", 600, _NV + "en-us/data-center/products/a10-gpu/")),
    (r"\bT4\b", Bandwidth("NVIDIA T4", 320, _NV + "en-us/data-center/tesla-t4/")),
    (r"V100", Bandwidth("NVIDIA V100 SXM2", 900, _NV + "en-us/data-center/v100/")),
    (
        r"RTX\s*6000\s*Ada",
        Bandwidth("NVIDIA RTX 6000 Ada", 960, _NV + "en-us/design-visualization/rtx-6000/"),
    ),
    (r"RTX\s*A6000", Bandwidth("NVIDIA RTX A6000", 768, _NV + "en-us/design-visualization/rtx-a6000/")),
    (
        r"RTX\s*4090",
        Bandwidth("NVIDIA GeForce RTX 4090", 1008, _NV + "en-us/geforce/graphics-cards/40-series/rtx-4090/"),
    ),
    (
        r"RTX\s*3090\s*Ti",
        Bandwidth(
            "NVIDIA GeForce RTX 3090 Ti",
            1008,
            _NV + "en-us/geforce/graphics-cards/30-series/rtx-3090-3090ti/",
        ),
    ),
    (
        r"RTX\s*3090",
        Bandwidth("NVIDIA GeForce RTX 3090", 936, _NV + "en-us/geforce/graphics-cards/30-series/rtx-3090-3090ti/"),
    ),
    (
        r"MI300X",
        Bandwidth(
            "AMD Instinct MI300X",
            5300,
            "https://www.amd.com/en/products/accelerators/instinct/mi300/mi300x.html",
        ),
    ),
)


def peak_bandwidth(gpu: str | None, configured_gb_s: float | None = None) -> Bandwidth | None:
    """The configured figure if any, else the datasheet figure for ``gpu``; None when unknown."""
    if configured_gb_s:
        return Bandwidth(gpu or "configured", float(configured_gb_s), "config: hardware.peak_bandwidth_gb_s")
    if not gpu:
        return None
    for pattern, bw in GPU_BANDWIDTH:
        if re.search(pattern, gpu, re.IGNORECASE):
            return bw
    return None


def bytes_per_step(
    weight_bytes: float,
    kv_bytes_per_token: float | None = None,
    context_tokens: float = 0.0,
    concurrency: int = 1,
) -> float:
    """Bytes one decode step reads: every weight once, plus each sequence's KV cache."""
    return float(weight_bytes) + float(kv_bytes_per_token or 0) * context_tokens * concurrency


def mbu(bytes_read: float, tpot_ms: float | None, peak_gb_s: float | None) -> float | None:
    """Fraction of peak bandwidth a decode step uses; None when TPOT or the peak is unknown."""
    if not tpot_ms or not peak_gb_s or tpot_ms <= 0:
        return None
    return bytes_read / (tpot_ms / 1e3) / (peak_gb_s * 1e9)

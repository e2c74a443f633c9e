"""Memory-bandwidth utilisation: (weight bytes + KV bytes read per decode step) / TPOT / peak bandwidth.

Decode is bandwidth-bound: each step reads every weight once plus the KV cache of every sequence in
the batch. Peak bandwidth comes from the study config (``hardware.peak_bandwidth_gb_s``) or from the
datasheet table in :mod:`worthit.gpus`, matched against the GPU name that ``nvidia-smi`` reports. Unknown hardware
(a CPU, an unlisted GPU) has no MBU: the report says "n/a" rather than guess.
"""

from __future__ import annotations

from worthit.gpus import GPUS, Bandwidth, lookup

__all__ = ["GPU_BANDWIDTH", "Bandwidth", "bytes_per_step", "mbu", "peak_bandwidth"]


# The datasheet table lives in worthit.gpus (one table for the plan and the report); this view keeps
# the (pattern, Bandwidth) pairs the report has always read.
GPU_BANDWIDTH: tuple[tuple[str, Bandwidth], ...] = tuple((g.pattern, g.bandwidth) for g in GPUS)


def peak_bandwidth(gpu: str | None, configured_gb_s: float | None = None) -> Bandwidth | None:
    """The configured figure if any, else the datasheet figure for ``gpu``; None when unknown."""
    if configured_gb_s:
        return Bandwidth(gpu or "configured", float(configured_gb_s), "config: hardware.peak_bandwidth_gb_s")
    if not gpu:
        return None
    spec = lookup(gpu)
    return spec.bandwidth if spec else None


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

"""What a token costs in energy: NVML's total-energy counter of every GPU a server holds, read before and after
a load level's measured requests.

NVML's ``nvmlDeviceGetTotalEnergyConsumption`` is a per-GPU counter of millijoules since the driver loaded
(Volta and later). A level reads it on every GPU the server holds (its ``CUDA_VISIBLE_DEVICES``: the
tensor-parallel group) after the warm-up and after the last measured request, beside the server's other
counters (:func:`worthit.experiments.loadtest.measure.measure_level`); the difference, summed over the GPUs,
is the energy the serving GPUs drew for the measured requests, idle gaps included, and divided by the output
tokens of those requests it is ``energy_j_per_output_token``. The host, CPU and fans are not counted.

Where nothing can be read — no NVML (a CPU server, nvidia-ml-py missing), a GPU without the counter, a counter
that went backwards (reset or wrap-around) — the figures are None and ``energy_reason`` says why; never a
zero. Readers are plain callables returning one counter per GPU, so the arithmetic is tested with any
sequence of readings (tests/unit/test_energy.py).
"""

from __future__ import annotations

import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Any

NO_NVML = "not measured: no NVIDIA GPU (NVML)"
NOT_RECORDED = "not measured: the level was recorded without energy readings"

Reader = Callable[[], Sequence[int]]  # one millijoule counter per GPU; raises Unavailable


class Unavailable(Exception):
    """The counters cannot be read; the message is the reason the results record."""


@dataclass(frozen=True)
class Reading:
    """The counters at one moment (``mj`` None: unreadable, ``reason`` says why)."""

    mj: tuple[int, ...] | None
    t_s: float
    reason: str | None = None


def read(reader: Reader | None, clock: Callable[[], float] = time.monotonic) -> Reading:
    """One reading of every GPU's counter (``reader`` None: there is no GPU to read)."""
    if reader is None:
        return Reading(None, clock(), NO_NVML)
    try:
        values = tuple(int(v) for v in reader())
    except Unavailable as e:
        return Reading(None, clock(), str(e))
    if not values:
        return Reading(None, clock(), NO_NVML)
    return Reading(values, clock())


def between(before: Reading, after: Reading) -> dict[str, Any]:
    """The energy between two readings: ``energy_j`` (all GPUs), ``energy_s``, ``energy_gpus`` and
    ``energy_reason`` (None when measured)."""
    out: dict[str, Any] = {"energy_j": None, "energy_s": None, "energy_gpus": None, "energy_reason": None}
    if before.mj is None or after.mj is None:
        out["energy_reason"] = before.reason or after.reason or NO_NVML
        return out
    if len(before.mj) != len(after.mj):
        out["energy_reason"] = f"not measured: {len(before.mj)} GPUs read before the level, {len(after.mj)} after"
        return out
    back = [i for i, (a, b) in enumerate(zip(before.mj, after.mj, strict=True)) if b < a]
    if back:
        out["energy_reason"] = (
            f"not measured: the energy counter of GPU {', '.join(map(str, back))} went backwards during the level "
            "(a driver reset or wrap-around)"
        )
        return out
    out.update(
        energy_j=sum(b - a for a, b in zip(before.mj, after.mj, strict=True)) / 1e3,
        energy_s=after.t_s - before.t_s,
        energy_gpus=len(after.mj),
    )
    return out


def per_output_token(energy_j: float | None, output_tokens: int | None) -> float | None:
    """Joules per output token (None when either is unknown or no token came out)."""
    if energy_j is None or not output_tokens:
        return None
    return energy_j / output_tokens


def nvml_reader(cuda_visible_devices: str | None) -> Reader:
    """A reader of NVML's total-energy counter on the GPUs ``cuda_visible_devices`` names (indices or
    ``GPU-...`` UUIDs, as the supervisor gives the server; None: every GPU). :class:`Unavailable` when there is
    no NVML, no GPU, or a GPU without the counter."""
    try:
        import pynvml  # nvidia-ml-py: vLLM's own dependency on a GPU
    except ImportError:
        raise Unavailable(f"{NO_NVML}: nvidia-ml-py is not installed") from None
    try:
        pynvml.nvmlInit()
        ids = [d.strip() for d in cuda_visible_devices.split(",") if d.strip()] if cuda_visible_devices else None
        if ids is None:
            handles = [pynvml.nvmlDeviceGetHandleByIndex(i) for i in range(pynvml.nvmlDeviceGetCount())]
        else:
            handles = [
                pynvml.nvmlDeviceGetHandleByUUID(d)
                if d.startswith(("GPU-", "MIG-"))
                else pynvml.nvmlDeviceGetHandleByIndex(int(d))
                for d in ids
            ]
    except (pynvml.NVMLError, ValueError) as e:
        raise Unavailable(f"{NO_NVML}: {e}") from None
    if not handles:
        raise Unavailable(NO_NVML)

    def reader() -> list[int]:
        try:
            return [int(pynvml.nvmlDeviceGetTotalEnergyConsumption(h)) for h in handles]
        except pynvml.NVMLError_NotSupported:
            raise Unavailable("not measured: the GPU does not report total energy (NVML: not supported)") from None
        except pynvml.NVMLError as e:
            raise Unavailable(f"not measured: NVML could not read the energy counter ({e})") from None

    reader()  # a GPU without the counter says so before the level, not after
    return reader


def reader_for(cuda_visible_devices: str | None) -> tuple[Reader | None, str | None]:
    """The reader for a server's GPUs (its CUDA_VISIBLE_DEVICES; None: every GPU NVML sees), or None and why
    there is none (a CPU server: no NVML, or no GPU)."""
    try:
        return nvml_reader(cuda_visible_devices), None
    except Unavailable as e:
        return None, str(e)

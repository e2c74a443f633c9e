"""Hardware: what the plan runs on (a GPU model x count, or a CPU), and which to plan for."""

from __future__ import annotations

import functools
import platform
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, replace
from pathlib import Path
from typing import Any

from worthit import gating, gpus
from worthit.plan.shapes import PlanError, int_or_none


@dataclass(frozen=True)
class Hardware:
    """What the plan runs on: a GPU model x count (from the table, or the devices found), or a CPU."""

    name: str
    count: int
    memory_gib: float | None = None
    bandwidth_gb_s: float | None = None
    compute_capability: tuple[int, int] | None = None
    tensor_tflops: float | None = None
    source: str = ""
    cpu: bool = False
    # a CPU server's x86 AVX-512 or AMX (vLLM's CPU backend needs one for an fp8 KV cache); None: unknown
    cpu_avx512_or_amx: bool | None = None

    @classmethod
    def named(cls, name: str, count: int = 1) -> Hardware:
        spec = gpus.lookup(name)
        if spec is None:
            raise PlanError(f"--gpu {name!r}: not in worthit's GPU table (known: {', '.join(gpus.known_names())})")
        return cls.from_spec(spec, count, spec.name)

    @classmethod
    def from_spec(cls, spec: gpus.GpuSpec, count: int, name: str | None = None) -> Hardware:
        return cls(
            name=name or spec.name,
            count=count,
            memory_gib=spec.memory_gib,
            bandwidth_gb_s=spec.bandwidth_gb_s,
            compute_capability=spec.compute_capability,
            tensor_tflops=spec.tensor_tflops,
            source=f"GPU table: {spec.name} ({spec.source}; memory: {spec.memory_source})",
        )

    @classmethod
    def from_devices(cls, devices: Sequence[gating.Gpu]) -> Hardware:
        """The devices a server will use (``nvidia-smi``); none means a CPU server."""
        if not devices:
            return cls.host_cpu()
        first = devices[0]
        spec = gpus.lookup(first.name)
        base = cls.from_spec(spec, len(devices), first.name) if spec else cls(first.name, len(devices))
        return replace(base, compute_capability=min(d.capability for d in devices), source=base.source or "nvidia-smi")

    @classmethod
    def host_cpu(cls, avx512_or_amx: bool | None = None) -> Hardware:
        """This machine's CPU (``avx512_or_amx`` None: read off ``/proc/cpuinfo``)."""
        has = host_cpu_has_avx512_or_amx() if avx512_or_amx is None else avx512_or_amx
        return cls("CPU", 0, source="no GPU: vLLM's CPU backend", cpu=True, cpu_avx512_or_amx=has)

    def override(self, hw_cfg: Mapping[str, Any]) -> Hardware:
        """The study config's ``hardware`` figures, where it gives them, win over the table's."""
        out = self
        if hw_cfg.get("peak_bandwidth_gb_s"):
            out = replace(out, bandwidth_gb_s=float(hw_cfg["peak_bandwidth_gb_s"]))
        if hw_cfg.get("memory_gib"):
            out = replace(out, memory_gib=float(hw_cfg["memory_gib"]))
        if hw_cfg.get("compute_capability"):
            major, _, minor = str(hw_cfg["compute_capability"]).partition(".")
            out = replace(out, compute_capability=(int(major), int(minor or 0)))
        if self.cpu and hw_cfg.get("cpu_avx512_or_amx") is not None:
            out = replace(out, cpu_avx512_or_amx=bool(hw_cfg["cpu_avx512_or_amx"]))
        return out

    @property
    def sm(self) -> str:
        if self.compute_capability is None:
            return "compute capability unknown"
        return "sm_{}{}".format(*self.compute_capability)

    def devices(self) -> list[gating.Gpu]:
        cc = self.compute_capability
        return [gating.Gpu(str(i), self.name, f"{cc[0]}.{cc[1]}") for i in range(self.count)] if cc else []


@functools.cache
def _host_cpuinfo() -> str | None:
    """``/proc/cpuinfo``, read once per process (every plan check of a CPU server asks)."""
    try:
        return Path("/proc/cpuinfo").read_text()
    except OSError:
        return None


def host_cpu_has_avx512_or_amx(cpuinfo: str | None = None, machine: str | None = None) -> bool | None:
    """Whether this CPU is x86 with AVX-512 (``avx512f``) or AMX (``amx_tile``); None when its flags cannot
    be read. Not x86: False (vLLM's CPU backend: "FP8 KV cache on CPU requires x86 with AVX-512 or AMX")."""
    if (machine if machine is not None else platform.machine()).lower() not in ("x86_64", "amd64"):
        return False
    if cpuinfo is None:
        cpuinfo = _host_cpuinfo()
        if cpuinfo is None:
            return None
    for line in cpuinfo.splitlines():
        if line.startswith("flags"):
            return bool({"avx512f", "amx_tile"} & set(line.partition(":")[2].split()))
    return None


def vllm_defaults(hw: Hardware) -> tuple[int, int]:
    """vLLM's default (max-num-batched-tokens, max-num-seqs) for its OpenAI server on this hardware."""
    if hw.cpu:
        return 2048, 256
    mem = hw.memory_gib or 0.0
    if mem >= 160:
        return 16384, 1024
    if mem >= 70 and "a100" not in hw.name.lower():
        return 8192, 1024
    return 2048, 256


def hardware_for(cfg: Mapping[str, Any], gpu: str | None = None, count: int | None = None) -> Hardware:
    """The hardware to plan for: ``--gpu`` (the table), else the config's ``hardware.gpu``, else the
    GPUs ``nvidia-smi`` finds here, else this host's CPU."""
    hw_cfg = cfg.get("hardware") or {}
    if count is not None and count < 1:
        raise PlanError(f"--gpus {count}: GPUs available must be at least 1 (leave it out to plan for the CPU)")
    count = count or int_or_none(hw_cfg.get("gpu_count"))
    name = gpu or hw_cfg.get("gpu")
    if name:
        if gpus.lookup(name) is None and not (hw_cfg.get("peak_bandwidth_gb_s") and hw_cfg.get("memory_gib")):
            raise PlanError(
                f"GPU {name!r} is not in worthit's GPU table (known: {', '.join(gpus.known_names())}); "
                "name one of them, or give hardware.peak_bandwidth_gb_s, hardware.memory_gib and "
                "hardware.compute_capability in the study config"
            )
        spec = gpus.lookup(name)
        return Hardware.from_spec(spec, count or 1) if spec else Hardware(name, count or 1, source="config: hardware")
    found = gating.detect_gpus()
    if found:
        hw = Hardware.from_devices(found)
        return replace(hw, count=count or hw.count)
    return Hardware.host_cpu()

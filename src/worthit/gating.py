"""Hardware gating: decide, before a server starts, whether a variant can run on this machine at all.

A variant that needs a feature the hardware lacks is *not applicable* here, which is a result in its
own right (the study's "FP8 KV cache: not applicable on Ampere"), not a failure to debug. The rules are
:mod:`worthit.plan`'s (the FP8 KV gate is defined here and is one of them), pure functions of the engine
arguments, the model's config and the devices; :func:`detect_gpus` asks ``nvidia-smi``.
This module imports only the standard library (and :mod:`worthit.engine_args` and :mod:`worthit.plan`,
which do too): the server supervisor runs it in any environment.
"""

from __future__ import annotations

import os
import shutil
import subprocess
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from worthit import engine_args as eargs

# FP8 KV cache on CUDA needs FP8 hardware support: Ada (sm_89) or Hopper (sm_90) and newer.
FP8_KV_DTYPES = frozenset({"fp8", "fp8_e4m3", "fp8_e5m2"})
FP8_MIN_COMPUTE_CAPABILITY = (8, 9)


@dataclass(frozen=True)
class Gpu:
    """One CUDA device as ``nvidia-smi`` describes it."""

    index: str
    name: str
    compute_cap: str  # "8.6"

    @property
    def capability(self) -> tuple[int, int]:
        major, _, minor = self.compute_cap.strip().partition(".")
        return int(major), int(minor or 0)

    @property
    def sm(self) -> str:
        major, minor = self.capability
        return f"sm_{major}{minor}"


def parse_nvidia_smi(text: str) -> list[Gpu]:
    """``nvidia-smi --query-gpu=index,name,compute_cap --format=csv,noheader`` -> devices."""
    gpus = []
    for line in text.splitlines():
        parts = [p.strip() for p in line.split(",")]
        if len(parts) >= 3 and parts[0].isdigit():
            gpus.append(Gpu(parts[0], ", ".join(parts[1:-1]), parts[-1]))
    return gpus


def detect_gpus(visible: str | None = None) -> list[Gpu]:
    """The CUDA devices the server will use: all of them, or those named in ``visible``
    (a CUDA_VISIBLE_DEVICES value of indices). An empty list means no NVIDIA GPU (CPU, or no driver)."""
    if not shutil.which("nvidia-smi"):
        return []
    try:
        out = subprocess.run(
            ["nvidia-smi", "--query-gpu=index,name,compute_cap", "--format=csv,noheader"],
            capture_output=True,
            text=True,
            timeout=30,
        )
    except (OSError, subprocess.SubprocessError):
        return []
    gpus = parse_nvidia_smi(out.stdout)
    if visible is not None and visible.strip():
        wanted = [v.strip() for v in visible.split(",")]
        if all(w.isdigit() for w in wanted):
            gpus = [g for g in gpus if g.index in wanted]
    return gpus


def kv_cache_dtype_gate(kv_cache_dtype: str | None, gpus: Sequence[Gpu]) -> str | None:
    """Why this KV-cache dtype cannot run on these devices, or None when it can.

    No GPUs means a CPU server: its rule (x86 with AVX-512 or AMX) is :func:`worthit.plan.rule_fp8_kv`'s.
    """
    if not kv_cache_dtype or str(kv_cache_dtype) not in FP8_KV_DTYPES:
        return None
    for gpu in gpus:
        if gpu.capability < FP8_MIN_COMPUTE_CAPABILITY:
            need = ".".join(map(str, FP8_MIN_COMPUTE_CAPABILITY))
            return (
                f"not applicable: {gpu.name} is {gpu.sm}; --kv-cache-dtype {kv_cache_dtype} "
                f"needs compute capability >= {need} (Ada, Hopper or newer)"
            )
    return None


def not_applicable(
    engine_args: Mapping[str, Any] | None,
    gpus: Sequence[Gpu],
    model_dir: str | os.PathLike[str] | None = None,
    python: str | None = None,
) -> str | None:
    """The first reason a variant cannot run on these devices, or None: every prerequisite rule of
    :mod:`worthit.plan` (FP8 KV and Marlin compute capability, int4 kernels on a CPU, GPU count, head
    divisibility, the draft's tokenizer, quantisation group size, memory) over the engine arguments and,
    when ``model_dir`` is given, the model's config.json. A rule that cannot be checked (shapes or GPU
    unknown) never refuses. ``python``: the serve env's interpreter, whose vLLM is asked what it supports when a
    rule needs it (FP8 weights, suffix decoding, LMCache: :mod:`worthit.plan.vllm_support`)."""
    from worthit import plan  # plan builds on this module's Gpu and FP8 gate
    from worthit.plan import prerequisites, vllm_support

    try:
        subject = plan.serving_subject(engine_args, model_dir)
        if python and prerequisites.needs_support(engine_args):
            subject.support = vllm_support.ask(python)
        unmet = plan.first_unmet(plan.check(subject, plan.Hardware.from_devices(gpus)))
    except Exception:  # a rule that breaks on an odd config must not stop a server: the FP8 gate still holds
        return kv_cache_dtype_gate(eargs.get(engine_args, "kv-cache-dtype"), gpus)
    return unmet.reason if unmet else None

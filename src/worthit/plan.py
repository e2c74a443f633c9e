"""Plan before you measure: each variant's prerequisites checked and its figures predicted on paper.

For every variant of a study this module answers, without starting an engine:

* **Prerequisites** (:func:`check`): rules a variant must meet to run at all on the given hardware, each
  with its source — FP8 KV cache needs compute capability >= 8.9, Marlin kernels >= 8.0; tensor,
  pipeline and data parallelism need that many GPUs and heads divisible by the tensor-parallel size; a
  draft model must share the target's tokenizer; a quantisation group must divide the width of every
  quantised layer (on one GPU's shard); the weights plus one ``max-model-len`` sequence's KV must fit in
  the memory vLLM may use. A rule that fails makes the variant *not applicable*: the server supervisor
  asks these rules (through :func:`worthit.gating.not_applicable`) and never starts such a server.
* **Predictions** (:func:`predict`): weight bytes, KV bytes per token (2 x layers x KV heads x head dim
  x dtype bytes), KV blocks and tokens at the configured memory share, the critical concurrency at the
  study's request length, the decode-step roofline (bytes read per step / bandwidth, or FLOPs / tensor
  throughput when that is slower) for TPOT at concurrency 1 and at every load level, the knee and the
  throughput ceiling, and the study's estimated wall time.

How the KV pool is predicted (vLLM's profiler, modelled simply): vLLM gives the KV cache
``gpu-memory-utilization x total memory`` less everything else it measured at start-up: the weights,
the activation peak of one ``max-num-batched-tokens`` forward pass, the CUDA-graph pool (vLLM >= 0.21
counts it), and persistent non-weight memory (attention-backend and cuBLAS workspaces, loaded kernels).
We model the activation peak as tokens x (2 x intermediate + 4 x hidden) activations, the graph pool as
a constant per layer (0.89 GiB for a 28-layer 7B measured on the H200), and the rest as one constant
fitted between the two measured points this project has (an RTX 3090 left ~2.5 GiB beyond the weights,
an H200 ~1.3 GiB; :data:`NON_TORCH_GIB`). ``--calibration results/<study>`` replaces the
modelled overhead (and the assumed bandwidth fraction) by what a finished study measured.

After a study, :func:`compare` sets the plan against the measurements (``plan_vs_measured``), flagging
every figure off by more than its tolerance.

The rules and predictions import only the standard library (the supervisor runs them in any
environment); writing Parquet, reading results and printing cards import their libraries when called.
"""

from __future__ import annotations

import contextlib
import functools
import json
import math
import os
import platform
import time
from collections.abc import Mapping, Sequence
from dataclasses import asdict, dataclass, field, replace
from pathlib import Path
from typing import Any

from worthit import engine_args as eargs
from worthit import errors, gating, gpus, models
from worthit.config import Study
from worthit.errors import InputError
from worthit.quantize import NO_WEIGHTS

MET, NOT_MET, UNKNOWN = "met", "not_met", "unknown"
GIB = 2**30
REPO_ROOT = Path(__file__).resolve().parents[2]

# Bytes per element of a weight or KV dtype, as configs and engine arguments spell them.
DTYPE_BYTES = {
    "float32": 4,
    "fp32": 4,
    "float": 4,
    "bfloat16": 2,
    "bf16": 2,
    "float16": 2,
    "fp16": 2,
    "half": 2,
    "fp8": 1,
    "fp8_e4m3": 1,
    "fp8_e5m2": 1,
    "fp8_inc": 1,
    "fp8_ds_mla": 1,
    "int8": 1,
    "int8_per_token_head": 1,  # vLLM's INT8 KV cache: int8 elements plus a float32 scale per token and KV head
    "fp8_per_token_head": 1,
}
# Bytes of the scale each *_per_token_head KV cache keeps per token, layer, KV head and K or V (vLLM's page size)
PER_TOKEN_HEAD_SCALE_BYTES = 4

# --- the memory model's constants (module docstring) ---------------------------------------------------
# Persistent non-weight memory vLLM's profiler counts besides activations and graphs: attention-backend
# and cuBLAS workspaces, kernels loaded by torch.compile and CUDA. Fitted: with the activation and graph
# terms below it puts the seed study's RTX 3090 (5,306 blocks bf16, 15,839 AWQ) within +6% / +2% and
# the committed H200 run (128,943 blocks) within -1.3%; a constant cannot do better, since the smaller
# GPU showed the larger overhead (about 2.5 GiB vs 1.3 GiB beyond the weights).
NON_TORCH_GIB = 1.25
# CUDA-graph pool per decoder layer: 0.89 GiB for 28 layers on the H200 (vLLM 0.25, 51 sizes x 2 modes;
# examples/h200/results/logs/serve/bf16.log, "Graph capturing finished").
CUDA_GRAPH_GIB_PER_LAYER = 0.89 / 28
# Typical decode efficiency when nothing was measured: the seed study's 3090 reached ~0.8 of peak
# bandwidth at concurrency 1, the H200 0.68 (docs/hardware-results.md).
DEFAULT_BANDWIDTH_FRACTION = 0.75
DEFAULT_TOLERANCES = {"kv_blocks": 0.10, "tpot": 0.25, "throughput": 0.30, "knee_factor": 2.0}
SERVER_START_S = 180.0  # a cold vLLM start with CUDA graphs (examples/h200: about 3 minutes)

RULE_SOURCES = {
    "fp8_kv_cache": "vLLM quantized KV cache: FP8 (E4M3/E5M2) needs compute capability >= 8.9 (Ada, Hopper); "
    "on CPU, x86 with AVX-512 or AMX",
    "marlin_kernels": "vLLM quantization kernels: Marlin needs compute capability >= 8.0, AWQ GEMM >= 7.5",
    "cpu_int4_kernels": "vLLM's CPU backend: int4 weights (AWQ, GPTQ, compressed-tensors W4A16) run on its "
    "cpu_gemm_wna16 kernel, built into its AVX-512 kernels only (an x86 CPU without AVX-512 loads the AVX2 build)",
    "gpu_count": "vLLM parallelism: tensor x pipeline x data parallel size GPUs, one engine process each",
    "parallel_divisibility": "vLLM tensor parallelism: attention heads, KV heads (or their replicas) and "
    "the MLP width split evenly across GPUs",
    "draft_tokenizer": "speculative decoding: draft and target propose and verify the same token ids",
    "quant_group_size": "grouped int4/int8 weights: a group spans group_size input channels of one GPU's shard",
    "memory_fit": "vLLM refuses to start when one max-model-len sequence's KV does not fit beside the weights",
}


class PlanError(InputError):
    """The plan cannot be made as asked; the message names the input and what is allowed."""


# ---------------------------------------------------------------------------------------------------------
# Model shapes


@dataclass(frozen=True)
class Quant:
    """A checkpoint's weight quantisation, from its ``quantization_config``."""

    method: str
    bits: int | None
    group_size: int | None
    zero_point: bool = False


@dataclass(frozen=True)
class ModelShape:
    """What the plan needs of a model, from a Hugging Face ``config.json``."""

    layers: int
    hidden: int
    heads: int
    kv_heads: int
    head_dim: int
    intermediate: int
    vocab: int
    max_position: int | None
    dtype: str
    tied_embeddings: bool
    model_type: str = ""
    bos_token_id: int | None = None
    eos_token_id: Any = None
    experts: int = 0
    experts_per_token: int = 0
    quant: Quant | None = None
    source: str = ""

    @classmethod
    def from_config(cls, cfg: Mapping[str, Any], source: str = "") -> ModelShape:
        text = cfg.get("text_config") or cfg  # multimodal models keep the language model's config here
        try:
            heads = int(text["num_attention_heads"])
            hidden = int(text["hidden_size"])
            return cls(
                layers=int(text["num_hidden_layers"]),
                hidden=hidden,
                heads=heads,
                kv_heads=int(text.get("num_key_value_heads") or heads),
                head_dim=int(text.get("head_dim") or hidden // heads),
                intermediate=int(text.get("moe_intermediate_size") or text.get("intermediate_size") or 4 * hidden),
                vocab=int(text.get("vocab_size") or cfg.get("vocab_size") or 0),
                max_position=_int_or_none(text.get("max_position_embeddings")),
                dtype=str(text.get("torch_dtype") or text.get("dtype") or cfg.get("torch_dtype") or "bfloat16"),
                tied_embeddings=bool(cfg.get("tie_word_embeddings", text.get("tie_word_embeddings", False))),
                model_type=str(text.get("model_type") or cfg.get("model_type") or ""),
                bos_token_id=_int_or_none(cfg.get("bos_token_id", text.get("bos_token_id"))),
                eos_token_id=cfg.get("eos_token_id", text.get("eos_token_id")),
                experts=int(text.get("num_local_experts") or text.get("num_experts") or 0),
                experts_per_token=int(text.get("num_experts_per_tok") or 0),
                quant=_quant(cfg.get("quantization_config") or text.get("quantization_config")),
                source=source,
            )
        except (KeyError, TypeError, ValueError) as e:
            raise PlanError(f"{source or 'config.json'}: not a decoder config the plan understands ({e!r})") from None

    @classmethod
    def from_file(cls, path: str | os.PathLike[str]) -> ModelShape:
        p = Path(path)
        if p.is_dir():
            p = p / "config.json"
        try:
            cfg = json.loads(p.read_text())
        except (OSError, json.JSONDecodeError) as e:
            raise PlanError(f"{p}: cannot read a model config.json ({e})") from None
        return cls.from_config(cfg, str(p))

    def linear_in_features(self, tp: int = 1) -> dict[str, int]:
        """In-features of each kind of linear layer on one GPU's shard (row-parallel layers are split)."""
        return {
            "q/k/v_proj": self.hidden,
            "o_proj": self.heads * self.head_dim // tp,
            "gate/up_proj": self.hidden,
            "down_proj": self.intermediate // tp,
        }

    def _linear_params(self) -> tuple[int, int]:
        """(all linear-layer weights, those one token reads) over the decoder layers."""
        attn = self.hidden * (self.heads * self.head_dim) * 2 + self.hidden * (self.kv_heads * self.head_dim) * 2
        mlp = 3 * self.hidden * self.intermediate
        experts, active = max(self.experts, 1), max(self.experts_per_token, 1) if self.experts else 1
        return self.layers * (attn + mlp * experts), self.layers * (attn + mlp * active)

    @property
    def embedding_params(self) -> int:
        return self.vocab * self.hidden * (1 if self.tied_embeddings else 2)

    @property
    def params(self) -> int:
        return self.embedding_params + self._linear_params()[0] + (2 * self.layers + 1) * self.hidden

    @property
    def active_params(self) -> int:
        """Parameters one token's forward pass reads (all of them, unless experts are routed)."""
        return self.embedding_params + self._linear_params()[1] + (2 * self.layers + 1) * self.hidden

    def weight_bytes(self, dtype_bytes: int, active: bool = False) -> int:
        """Bytes of the weights as served: linear layers at the checkpoint's quantisation, the rest at dtype."""
        linear = self._linear_params()[1 if active else 0]
        other = self.embedding_params + (2 * self.layers + 1) * self.hidden
        q = self.quant
        if q and q.bits:
            per_group = 2 + (q.bits / 8 if q.zero_point else 0)  # an fp16 scale (and a packed zero point)
            group = q.group_size or self.hidden  # per channel: one scale per output row
            linear_bytes = linear * q.bits / 8 + linear / group * per_group
        else:
            linear_bytes = linear * dtype_bytes
        return int(linear_bytes + other * dtype_bytes)


def _int_or_none(x: Any) -> int | None:
    try:
        return None if x is None else int(x)
    except (TypeError, ValueError):
        return None


def _quant(qc: Mapping[str, Any] | None) -> Quant | None:
    if not qc:
        return None
    method = str(qc.get("quant_method") or "unknown").lower()
    if method == "compressed-tensors":
        for group in (qc.get("config_groups") or {}).values():
            w = (group or {}).get("weights") or {}
            if w:
                return Quant(
                    method,
                    _int_or_none(w.get("num_bits")),
                    _int_or_none(w.get("group_size")) if w.get("strategy") in (None, "group") else None,
                    zero_point=not w.get("symmetric", True),
                )
        if qc.get("kv_cache_scheme"):  # KV-cache scales only: the weights are not quantised
            return None
        return Quant(method, None, None)
    if method in ("fp8", "fbgemm_fp8", "modelopt"):
        return Quant(method, 8, None)
    return Quant(
        method,
        _int_or_none(qc.get("bits") or qc.get("w_bit") or qc.get("weight_bits")),
        _int_or_none(qc.get("group_size") or qc.get("q_group_size")),
        zero_point=bool(qc.get("zero_point", not qc.get("sym", True))),
    )


def dtype_bytes(name: str | None) -> int | None:
    return DTYPE_BYTES.get(str(name).lower()) if name else None


def served_dtype(shape: ModelShape, args: Mapping[str, Any] | None, cpu: bool) -> str:
    """The activation dtype vLLM serves with: the ``dtype`` argument, or (auto) the checkpoint's, except
    that auto turns an fp32 checkpoint into fp16 on a GPU."""
    d = str(eargs.get(args, "dtype") or "auto").lower()
    if d != "auto":
        return d
    if shape.quant and shape.quant.method in ("awq", "gptq", "awq_marlin", "gptq_marlin"):
        return "float16"
    return "float16" if (shape.dtype == "float32" and not cpu) else shape.dtype


def kv_bytes_per_token(shape: ModelShape, args: Mapping[str, Any] | None, cpu: bool = False) -> int:
    """2 (K and V) x layers x KV heads x head dim x bytes per element, over the whole model."""
    kv_dtype = str(eargs.get(args, "kv-cache-dtype") or "auto").lower()
    dt = served_dtype(shape, args, cpu) if kv_dtype == "auto" else kv_dtype
    b = dtype_bytes(dt)
    if b is None:
        raise PlanError(f"unknown KV cache dtype {dt!r} (allowed: {', '.join(sorted(DTYPE_BYTES))})")
    scale = PER_TOKEN_HEAD_SCALE_BYTES if dt.endswith("_per_token_head") else 0
    return 2 * shape.layers * shape.kv_heads * (shape.head_dim * b + scale)


# ---------------------------------------------------------------------------------------------------------
# Hardware


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


# ---------------------------------------------------------------------------------------------------------
# Prerequisites


@dataclass(frozen=True)
class Check:
    """One prerequisite of one variant: met, not met (the variant cannot run) or unknown (not checkable)."""

    rule: str
    status: str
    detail: str
    source: str = ""

    @property
    def reason(self) -> str:
        return self.detail if self.detail.startswith("not applicable:") else f"not applicable: {self.detail}"


@dataclass
class Subject:
    """A variant as the rules see it: engine arguments, the GPUs it claims, its model (and draft)."""

    name: str
    args: Mapping[str, Any]
    shape: ModelShape | None = None
    checkpoint: Path | None = None  # the model folder whose weight files are served (None: not on this machine)
    gpus_claimed: int | None = None
    draft: ModelShape | None = None
    draft_name: str | None = None
    tokenizer: Path | None = None
    draft_tokenizer: Path | None = None
    planned_quant: Quant | None = None  # a quantize: model not made yet: its plan's group size

    @property
    def parallel(self) -> tuple[int, int, int]:
        return parallel_sizes(self.args)

    @property
    def quant(self) -> Quant | None:
        return (self.shape.quant if self.shape else None) or self.planned_quant

    def weights(self, cpu: bool = False) -> tuple[int | None, str]:
        """Weight bytes as served and where they come from: the checkpoint's tensors, else the shapes."""
        if self.shape is None:
            wb = served_weight_bytes(self.checkpoint, None) if self.checkpoint else 0
            return (wb, "checkpoint files") if wb else (None, "unknown")
        m, dt = self.shape, served_dtype(self.shape, self.args, cpu)
        if self.checkpoint is not None:
            wb = served_weight_bytes(self.checkpoint, dt, m.dtype)
            if wb:
                return wb, f"checkpoint tensors at {dt}"
        q = m.quant
        label = f"shapes ({q.method} int{q.bits}, group {q.group_size})" if q and q.bits else f"shapes ({dt})"
        return m.weight_bytes(dtype_bytes(dt) or 2), label


def parallel_sizes(args: Mapping[str, Any] | None) -> tuple[int, int, int]:
    """(tensor, pipeline, data) parallel sizes of the engine arguments (1 when unset)."""
    tp, pp, dp = (int(eargs.get(args, f"{k}-parallel-size") or 1) for k in ("tensor", "pipeline", "data"))
    return tp, pp, dp


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


def _check(rule: str, status: str, detail: str) -> Check:
    return Check(rule, status, detail, RULE_SOURCES[rule])


def _cpu_isa_check(rule: str, hw: Hardware, isa: str, refused: str, served: str) -> Check:
    """A CPU rule on ``Hardware.cpu_avx512_or_amx``: unknown flags never refuse, a CPU without ``isa`` gets
    ``refused``, one with it ``served``."""
    if hw.cpu_avx512_or_amx is None:
        return _check(rule, UNKNOWN, f"CPU: whether it has {isa} is unknown")
    if not hw.cpu_avx512_or_amx:
        return _check(rule, NOT_MET, refused)
    return _check(rule, MET, f"CPU with {isa}: {served}")


def rule_fp8_kv(s: Subject, hw: Hardware) -> Check | None:
    dt = eargs.get(s.args, "kv-cache-dtype")
    if not dt or str(dt) not in gating.FP8_KV_DTYPES:
        return None
    if hw.cpu:
        return _cpu_isa_check(
            "fp8_kv_cache",
            hw,
            "AVX-512 or AMX",
            f"not applicable: this CPU has neither AVX-512 nor AMX; --kv-cache-dtype {dt} on vLLM's CPU "
            'backend needs one of them ("FP8 KV cache on CPU requires x86 with AVX-512 or AMX"); it runs on an x86 '
            "CPU with AVX-512 or AMX, or a CUDA GPU of compute capability 8.9 or newer (Ada, Hopper)",
            "vLLM's CPU backend stores fp8 KV itself",
        )
    if hw.compute_capability is None:
        return _check("fp8_kv_cache", UNKNOWN, f"{hw.name}: compute capability unknown")
    refused = gating.kv_cache_dtype_gate(str(dt), hw.devices())
    if refused:
        return _check("fp8_kv_cache", NOT_MET, refused)
    return _check("fp8_kv_cache", MET, f"{hw.name} is {hw.sm} >= sm_89")


MARLIN_METHODS = frozenset({"awq_marlin", "gptq_marlin", "marlin", "gptq_marlin_24"})


def rule_marlin(s: Subject, hw: Hardware) -> Check | None:
    asked = str(eargs.get(s.args, "quantization") or "").lower()
    ckpt = s.quant.method if s.quant else ""
    if hw.cpu or not (asked in MARLIN_METHODS or ckpt in ("awq", "gptq")):
        return None
    if hw.compute_capability is None:
        return _check("marlin_kernels", UNKNOWN, f"{hw.name}: compute capability unknown")
    cc = hw.compute_capability
    if cc >= (8, 0):
        return _check("marlin_kernels", MET, f"{hw.name} is {hw.sm} >= sm_80 (Marlin int4 kernels)")
    if asked in MARLIN_METHODS:
        return _check(
            "marlin_kernels",
            NOT_MET,
            f"{hw.name} is {hw.sm}; --quantization {asked} needs compute capability >= 8.0 (Ampere or newer)",
        )
    if ckpt == "awq" and cc < (7, 5):
        return _check("marlin_kernels", NOT_MET, f"{hw.name} is {hw.sm}; AWQ kernels need compute capability >= 7.5")
    return _check("marlin_kernels", MET, f"{hw.name} is {hw.sm}: no Marlin, vLLM falls back to {ckpt} GEMM kernels")


def rule_cpu_int4(s: Subject, hw: Hardware) -> Check | None:
    q = s.quant
    if not hw.cpu or q is None or q.bits != 4:
        return None
    return _cpu_isa_check(
        "cpu_int4_kernels",
        hw,
        "AVX-512",
        f"not applicable: this CPU has no AVX-512; {q.method} int4 weights on vLLM's CPU backend need its "
        "cpu_gemm_wna16 kernel, which only its AVX-512 build has (the AVX2 build fails the first request: "
        "\"'_C' object has no attribute 'cpu_gemm_wna16'\"); they run on an x86 CPU with AVX-512 or a CUDA GPU",
        f"vLLM's cpu_gemm_wna16 serves {q.method} int4 weights",
    )


def rule_gpu_count(s: Subject, hw: Hardware) -> Check | None:
    tp, pp, dp = s.parallel
    need = tp * pp * dp
    if hw.cpu:
        return None
    what = f"tensor {tp} x pipeline {pp} x data {dp} = {need} GPU(s)"
    if s.gpus_claimed is not None and s.gpus_claimed < need:
        return _check(
            "gpu_count",
            NOT_MET,
            f"{what}, but the variant claims gpus: {s.gpus_claimed} (set 'gpus: {need}' on the variant)",
        )
    if hw.count < need:
        return _check("gpu_count", NOT_MET, f"{what}, but {hw.name} x {hw.count} has {hw.count}")
    return _check("gpu_count", MET, f"{what} of {hw.count}")


def rule_parallel_divisibility(s: Subject, hw: Hardware) -> Check | None:
    tp, pp, _ = s.parallel
    if tp == 1 and pp == 1:
        return None
    if s.shape is None:
        return _check("parallel_divisibility", UNKNOWN, "model shapes unknown")
    m = s.shape
    bad = []
    if m.heads % tp:
        bad.append(f"{m.heads} attention heads")
    if m.kv_heads % tp and tp % m.kv_heads:
        bad.append(f"{m.kv_heads} KV heads (neither divides the other)")
    if m.intermediate % tp:
        bad.append(f"MLP width {m.intermediate}")
    if pp > m.layers:
        bad.append(f"{m.layers} layers over {pp} pipeline stages")
    if bad:
        return _check("parallel_divisibility", NOT_MET, f"tensor-parallel-size {tp} does not divide {', '.join(bad)}")
    kv = f"{m.kv_heads} KV heads" + (f" (replicated x{tp // m.kv_heads})" if tp > m.kv_heads else "")
    return _check("parallel_divisibility", MET, f"{m.heads} heads, {kv}, MLP {m.intermediate} split {tp} ways")


DRAFT_FREE_METHODS = frozenset({"ngram", "[ngram]", "suffix", "eagle", "eagle3", "medusa", "mlp_speculator", "mtp"})


def rule_draft_tokenizer(s: Subject, hw: Hardware) -> Check | None:
    sc = eargs.speculative_config(s.args)
    if not sc or not sc.get("model") or str(sc.get("method") or "").lower() in DRAFT_FREE_METHODS:
        return None
    name = str(sc["model"])
    if sc.get("use_heterogeneous_vocab"):
        return _check("draft_tokenizer", MET, f"draft {name}: use_heterogeneous_vocab maps the two vocabularies")
    if s.draft is None or s.shape is None:
        return _check(
            "draft_tokenizer",
            UNKNOWN,
            f"draft {name}: its config is not available (plan with --model-config {name}=FILE)",
        )
    tok = _tokenizer_vocab(s.tokenizer), _tokenizer_vocab(s.draft_tokenizer)
    if tok[0] is not None and tok[1] is not None:
        if tok[0] != tok[1]:
            return _check("draft_tokenizer", NOT_MET, f"draft {name} has another tokenizer than the target")
        return _check("draft_tokenizer", MET, f"draft {name}: same tokenizer vocabulary ({len(tok[0])} tokens)")
    t, d = s.shape, s.draft
    same_ids = d.bos_token_id == t.bos_token_id and d.eos_token_id == t.eos_token_id
    if d.vocab == t.vocab and same_ids:
        return _check(
            "draft_tokenizer", MET, f"draft {name}: vocabulary {d.vocab} and special-token ids as the target's"
        )
    if same_ids and d.model_type == t.model_type and d.vocab <= t.vocab:
        return _check(
            "draft_tokenizer",
            MET,
            f"draft {name}: embedding rows {d.vocab} vs {t.vocab} differ by padding only "
            f"(same {t.model_type} family and special-token ids; tokenizer files not compared)",
        )
    return _check(
        "draft_tokenizer",
        NOT_MET,
        f"draft {name} does not share the target's tokenizer: vocabulary {d.vocab} vs {t.vocab}, "
        f"bos/eos {d.bos_token_id}/{d.eos_token_id} vs {t.bos_token_id}/{t.eos_token_id}",
    )


def _tokenizer_vocab(folder: Path | None) -> dict[str, int] | None:
    """The token -> id map of a folder's tokenizer.json (its model vocabulary and added tokens)."""
    if folder is None or not (folder / "tokenizer.json").is_file():
        return None
    try:
        tok = json.loads((folder / "tokenizer.json").read_text())
    except (OSError, json.JSONDecodeError):
        return None
    vocab = (
        dict((tok.get("model") or {}).get("vocab") or {})
        if isinstance((tok.get("model") or {}).get("vocab"), dict)
        else {}
    )
    for added in tok.get("added_tokens") or []:
        vocab[str(added.get("content"))] = int(added.get("id", -1))
    return vocab or None


def rule_quant_group_size(s: Subject, hw: Hardware) -> Check | None:
    q = s.quant
    if q is None or not q.group_size or q.group_size <= 0:
        return None
    if s.shape is None:
        return _check("quant_group_size", UNKNOWN, "model shapes unknown")
    tp = s.parallel[0]
    widths = s.shape.linear_in_features(tp)
    bad = {k: w for k, w in widths.items() if w % q.group_size}
    shard = f" per GPU at tensor-parallel-size {tp}" if tp > 1 else ""
    if bad:
        listed = ", ".join(f"{k} {w}" for k, w in bad.items())
        return _check(
            "quant_group_size",
            NOT_MET,
            f"group size {q.group_size} does not divide the in-features{shard} of {listed}",
        )
    return _check(
        "quant_group_size",
        MET,
        f"group size {q.group_size} divides every in-feature{shard} ({_widths(widths)})",
    )


def _widths(widths: Mapping[str, int]) -> str:
    return ", ".join(map(str, sorted(set(widths.values()))))


def rule_memory_fit(s: Subject, hw: Hardware, overhead_gib: float | None = None) -> Check | None:
    if hw.cpu:
        return None
    all_weights = s.weights()[0]
    if s.shape is None or all_weights is None:
        return _check("memory_fit", UNKNOWN, "model shapes unknown")
    if hw.memory_gib is None:
        return _check("memory_fit", UNKNOWN, f"{hw.name}: memory size unknown")
    tp, pp, _ = s.parallel
    util = float(eargs.get(s.args, "gpu-memory-utilization") or 0.9)
    budget = util * hw.memory_gib * GIB
    weights = all_weights / (tp * pp)
    max_len = max_model_len(s.shape, s.args)
    seq_kv = max_len * kv_bytes_per_token(s.shape, s.args) / _kv_split(s.shape, tp, pp)
    need = weights + seq_kv
    explicit = eargs.get(s.args, "kv-cache-memory-bytes")
    what = f"weights {weights / GIB:.2f} GiB + one {max_len:,}-token sequence's KV {seq_kv / GIB:.2f} GiB per GPU"
    if explicit:
        if seq_kv > float(explicit):
            return _check("memory_fit", NOT_MET, f"{what}: the KV alone exceeds kv-cache-memory-bytes {explicit}")
        budget = hw.memory_gib * GIB
        util = 1.0
    if need > budget:
        return _check(
            "memory_fit",
            NOT_MET,
            f"{what} = {need / GIB:.2f} GiB > {util:g} x {hw.memory_gib:g} GiB = {budget / GIB:.2f} GiB on {hw.name}",
        )
    margin = ""
    if overhead_gib is not None and need + overhead_gib * GIB > budget:
        margin = f"; tight: with ~{overhead_gib:.1f} GiB of activations and graphs vLLM may refuse to start"
    return _check("memory_fit", MET, f"{what} = {need / GIB:.2f} of {budget / GIB:.2f} GiB{margin}")


RULES = (
    rule_fp8_kv,
    rule_marlin,
    rule_cpu_int4,
    rule_gpu_count,
    rule_parallel_divisibility,
    rule_draft_tokenizer,
    rule_quant_group_size,
)


def check(s: Subject, hw: Hardware, overhead_gib: float | None = None) -> list[Check]:
    """Every rule that concerns this variant, in a fixed order (FP8 first, memory last)."""
    out = [c for rule in RULES if (c := rule(s, hw)) is not None]
    if overhead_gib is None and s.shape is not None and not hw.cpu:
        overhead_gib = memory_overhead_gib(s.shape, s.args, hw)
    mem = rule_memory_fit(s, hw, overhead_gib)
    return out + ([mem] if mem else [])


def first_unmet(checks: Sequence[Check]) -> Check | None:
    return next((c for c in checks if c.status == NOT_MET), None)


def serving_subject(
    args: Mapping[str, Any] | None, model_dir: str | os.PathLike[str] | None, variant: str = ""
) -> Subject:
    """A variant as the supervisor knows it at start: its engine arguments and its model folder."""
    args = dict(args or {})
    shape, folder = None, None
    if model_dir is not None and (Path(model_dir) / "config.json").is_file():
        try:
            shape, folder = ModelShape.from_file(model_dir), Path(model_dir)
        except PlanError:
            shape = None
    s = Subject(variant, args, shape, folder, tokenizer=folder)
    sc = eargs.speculative_config(args)
    if sc and sc.get("model"):
        folder = local_model_folder(str(sc["model"]))
        if folder is not None:
            with contextlib.suppress(PlanError):
                s.draft, s.draft_name, s.draft_tokenizer = ModelShape.from_file(folder), str(sc["model"]), folder
    return s


def _weight_files(d: Path) -> list[Path]:
    """The weight files vLLM loads from a model folder: its safetensors files, else its PyTorch .bin files (a
    repository shipping both is loaded from safetensors), else a GGUF file."""
    for pattern in ("*.safetensors", "*.bin", "*.gguf"):
        files = sorted(p for p in d.glob(pattern) if not p.name.startswith(("consolidated", "training_args")))
        if files:
            return files
    return []


def served_weight_bytes(model_dir: str | os.PathLike[str], dtype: str | None, stored_dtype: str | None = None) -> int:
    """Bytes of the weights as vLLM holds them when it serves in ``dtype``: each floating tensor at that
    dtype (a checkpoint saved in fp32 and served in bf16 counts half its file), other tensors (packed
    integers, FP8) and quantisation scales and zero points as stored, and a tied ``lm_head.weight``
    (``tie_word_embeddings``) not at all: vLLM loads one table for both. Files without a readable header
    count their size (a ``.bin`` checkpoint rescaled from ``stored_dtype`` to ``dtype`` when both are float
    dtypes). ``dtype`` None: the files' bytes. The one rule for the plan's predictions and the kv stage's
    ``weight_bytes``; examples/h200-qwen/README.md, "Sitting 8", says why it reads the headers: a checkpoint
    written in fp32 by a GPU calibration doubled the weights and MBU figures of a variant served in bf16."""
    d = Path(model_dir)
    served = dtype_bytes(dtype)
    try:
        tied = bool(json.loads((d / "config.json").read_text()).get("tie_word_embeddings"))
    except (OSError, ValueError):
        tied = False
    total = 0
    for f in _weight_files(d):
        head = None
        if f.suffix == ".safetensors" and served is not None:
            with contextlib.suppress(OSError, ValueError):
                head = models.safetensors_header(f)
        if head is None:
            stored = dtype_bytes(stored_dtype)
            scale = f.suffix == ".bin" and served is not None and stored is not None
            total += f.stat().st_size * served // stored if scale else f.stat().st_size  # type: ignore[operator]
            continue
        embed = any(n.endswith("embed_tokens.weight") for n in head)
        for name, t in head.items():
            if tied and embed and name.endswith("lm_head.weight"):
                continue
            if t["dtype"] in models.SAFETENSORS_FLOATS and not models.is_quantization_param(name):
                total += math.prod(t["shape"]) * served
            else:
                begin, end = t["data_offsets"]
                total += int(end) - int(begin)
    return total


def local_model_folder(ref: str) -> Path | None:
    """A model named as vLLM takes it (a folder, or a hub id) resolved on this machine without a download:
    the folder itself, or the id's newest snapshot in the Hugging Face cache."""
    p = Path(ref).expanduser()
    if (p / "config.json").is_file():
        return p
    if ref.count("/") != 1:
        return None
    cache = Path(
        os.environ.get("HF_HUB_CACHE")
        or Path(os.environ.get("HF_HOME", Path.home() / ".cache" / "huggingface")) / "hub"
    )
    snaps = sorted((cache / f"models--{ref.replace('/', '--')}" / "snapshots").glob("*/config.json"))
    return snaps[-1].parent if snaps else None


# ---------------------------------------------------------------------------------------------------------
# Predictions


def max_model_len(shape: ModelShape, args: Mapping[str, Any] | None) -> int:
    asked = _int_or_none(eargs.get(args, "max-model-len"))
    return asked or shape.max_position or 2048


def _kv_split(shape: ModelShape, tp: int, pp: int) -> float:
    """How many ways one token's KV is divided among a replica's GPUs (KV heads replicate past tp = heads)."""
    return min(tp, shape.kv_heads) * pp


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


def memory_overhead_gib(shape: ModelShape, args: Mapping[str, Any] | None, hw: Hardware) -> float:
    """Non-weight, non-KV memory vLLM's profiler reserves per GPU (module docstring)."""
    tp, pp, _ = parallel_sizes(args)
    tokens = _int_or_none(eargs.get(args, "max-num-batched-tokens")) or vllm_defaults(hw)[0]
    act_b = dtype_bytes(served_dtype(shape, args, hw.cpu)) or 2
    activations = tokens * (2 * shape.intermediate / tp + 4 * shape.hidden) * act_b / GIB
    graphs = 0.0 if eargs.get(args, "enforce-eager") else CUDA_GRAPH_GIB_PER_LAYER * shape.layers / pp
    return NON_TORCH_GIB + graphs + activations


@dataclass(frozen=True)
class Calibration:
    """Fractions measured by a finished study, to replace the plan's assumptions."""

    source: str
    gpu: str | None = None
    bandwidth_fraction: float | None = None
    overhead_gib: float | None = None
    throughput_fraction: float | None = None


@dataclass(frozen=True)
class Workload:
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
    wl: Workload,
    calibration: Calibration | None = None,
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
        block_size_tokens=_int_or_none(eargs.get(s.args, "block-size")) or (128 if hw.cpu else 16),
        gpu_memory_utilization=None if hw.cpu else float(eargs.get(s.args, "gpu-memory-utilization") or 0.9),
        gpu_memory_gib=hw.memory_gib,
        max_num_seqs=_int_or_none(eargs.get(s.args, "max-num-seqs")) or vllm_defaults(hw)[1],
        tokens_per_request=wl.tokens_per_request,
    )
    _predict_kv_pool(out, s, m, hw, wl, calibration, overhead_gib)
    if hw.cpu or hw.bandwidth_gb_s is None:
        out["notes"].append("no bandwidth figure for this hardware: no TPOT or throughput prediction (--gpu NAME)")
        return out
    fraction = bandwidth_fraction
    out["bandwidth_source"] = "assumed (plan.bandwidth_fraction)"
    if calibration and calibration.bandwidth_fraction:
        fraction = calibration.bandwidth_fraction
        out["bandwidth_source"] = f"calibration: {calibration.source}"
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
        bandwidth_fraction=fraction,
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
    wl: Workload,
    calibration: Calibration | None,
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
    blocks = max(0, int(kv_mem // (block * out["kv_bytes_per_token"] / _kv_split(m, tp, pp))))
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


def _wall_s(roof: Roofline, wl: Workload, fraction: float, server_start_s: float | None) -> float:
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


# ---------------------------------------------------------------------------------------------------------
# The study plan


@dataclass
class StudyPlan:
    """A plan of every variant of a study on one hardware: rows of the ``plan`` table, and what they used."""

    study: str
    hardware: Hardware
    rows: list[dict[str, Any]]
    calibration: Calibration | None = None
    shapes: dict[str, str] = field(default_factory=dict)  # model -> where its config came from
    took_s: float = 0.0

    @property
    def metadata(self) -> dict[str, Any]:
        return {
            "study": self.study,
            "hardware": asdict(self.hardware),
            "calibration": asdict(self.calibration) if self.calibration else None,
            "model_configs": self.shapes,
            "constants": {
                "non_torch_gib": NON_TORCH_GIB,
                "cuda_graph_gib_per_layer": CUDA_GRAPH_GIB_PER_LAYER,
            },
            "took_s": self.took_s,
        }


def workload(cfg: Mapping[str, Any], experiments: Sequence[str] = (), variant: str | None = None) -> Workload:
    """The request shape and levels of the study; with ``variant``, also the levels beyond the grid it
    measures: the closed-loop workload levels that name it (or name none, where it load-tests) and, where
    sweet_spot.variants names it, its probes (sweet_spot.max_probes, one run each, costed at the grid's
    geometric-mean concurrency: where the bracket lies is known only once the grid is measured). Rate and
    replay levels are not costed."""
    lt, px = cfg["loadtest"], cfg["prefix"]
    levels = tuple(int(c) for c in lt["levels"])
    n = lt["num_requests"]
    repeats = int(lt.get("repeats", 1))

    def requests(c: int) -> int:
        return max(int(n["min"]), int(n["per_concurrency"]) * c) + int(lt["warmup_requests"])

    extra: list[tuple[int, int, int]] = []
    if variant is not None:
        study = Study(cfg)  # which workload levels a variant measures: one rule (Study.variant_levels)
        beyond = [lv.concurrency for lv in study.variant_levels(variant) if lv.workload is not None]
        extra += [(c, requests(c), repeats) for c in beyond if c is not None]
        if "loadtest" in experiments and levels and variant in study.sweet_spot_variants:
            mid = max(1, round(math.exp(sum(math.log(c) for c in levels) / len(levels))))
            extra += [(mid, requests(mid), 1)] * int(cfg["sweet_spot"]["max_probes"])
    return Workload(
        prompt_tokens=int(lt["prompt_tokens"]),
        output_tokens=int(lt["output_tokens"]),
        levels=levels,
        requests=tuple(requests(c) for c in levels),
        repeats=repeats,
        prefix=tuple(
            (int(L) + int(px["suffix_tokens"]), int(px["num_requests"]) + int(px["warmup_requests"]))
            for L in px["lengths"]
        ),
        prefix_output_tokens=int(px["output_tokens"]),
        experiments=tuple(experiments),
        extra=tuple(extra),
    )


def model_configs(
    cfg: Mapping[str, Any],
    root: Path,
    given: Mapping[str, str] | None = None,
    hub: bool = True,
) -> dict[str, tuple[ModelShape | None, Path | None, Path | None, str]]:
    """Per model of the study (and per draft model named by a speculative-config): its shape, its
    checkpoint folder when the weights are on disk (:func:`served_weight_bytes` reads them), its folder (for
    the tokenizer), and where the shape came from.

    Sources, first found wins: ``given`` (``--model-config NAME=FILE``, then ``plan.model_configs``), the
    fetched model's manifest, a ``path:`` source, the hub's config.json alone (``hf:`` sources, when
    ``hub``); a ``quantize:`` model not made yet takes its base model's shapes."""
    given = {**(cfg.get("plan", {}).get("model_configs") or {}), **(given or {})}
    out: dict[str, tuple[ModelShape | None, Path | None, Path | None, str]] = {}
    names = list(cfg["models"])
    drafts = {
        str(sc["model"])
        for v in cfg["variants"].values()
        if (sc := eargs.speculative_config({**cfg["serve"]["engine_args"], **(v.get("engine_args") or {})}))
        and sc.get("model")
    }
    unknown = sorted(set(given) - set(names) - drafts)
    if unknown:  # a typo would otherwise plan without the config the user meant to give
        raise PlanError(
            f"model config (--model-config or plan.model_configs) for {', '.join(map(repr, unknown))}: not a "
            f"model of the study (models: {', '.join(names)}) nor a draft model a variant's speculative-config "
            f"names ({', '.join(sorted(drafts)) or 'none'})"
        )
    for name in names:
        out[name] = _model_config(name, cfg["models"][name], root, given, hub)
    for name in names:  # a quantize: model not on disk yet plans on its base's shapes
        spec = cfg["models"][name]
        if out[name][0] is None and "quantize" in spec and out.get(spec["quantize"]["base"], (None,))[0] is not None:
            base = out[spec["quantize"]["base"]]
            out[name] = (base[0], None, base[2], f"{base[3]} (base of the quantize plan)")
    for ref in sorted(drafts - set(names)):  # a draft named like one of the study's models is that model
        same = [m for m, ms in cfg["models"].items() if _source_ref(ms) == ref and out[m][0] is not None]
        out[ref] = out[same[0]] if same and ref not in given else _model_config(ref, {}, root, given, hub)
    return out


def _source_ref(spec: Mapping[str, Any]) -> str | None:
    """ORG/NAME of a hub source, the folder of a path: source."""
    source = str(spec.get("source", ""))
    if source.startswith(("hf:", "modelscope:")):
        return source.split(":", 1)[1].split("@")[0]
    return source[5:] if source.startswith("path:") else None


def _model_config(
    name: str, spec: Mapping[str, Any], root: Path, given: Mapping[str, str], hub: bool
) -> tuple[ModelShape | None, Path | None, Path | None, str]:
    source = str(spec.get("source", ""))
    ref = _source_ref(spec)
    for key in (name, ref):
        if key and key in given:
            path = Path(given[key]).expanduser()
            if not path.is_absolute():
                path = next((b / path for b in (root, REPO_ROOT) if (b / path).exists()), path)
            return ModelShape.from_file(path), None, path if path.is_dir() else path.parent, f"given: {path}"
    manifest = root / "resources" / "models" / name / "manifest.json"
    if manifest.is_file():
        try:
            d = Path(json.loads(manifest.read_text())["model_dir"])
            if (d / "config.json").is_file():
                return ModelShape.from_file(d), d, d, f"manifest: {manifest}"
        except (OSError, ValueError, KeyError, PlanError):
            pass
    if source.startswith("path:"):
        d = Path(source[5:]).expanduser()
        if (d / "config.json").is_file():
            return ModelShape.from_file(d), d, d, f"path: {d}"
    folder = local_model_folder(name) if not spec else None  # a draft named by hub id or folder
    if folder is not None:
        return ModelShape.from_file(folder), folder, folder, f"local: {folder}"
    hub_id = ref if source.startswith("hf:") else (name if not spec and name.count("/") == 1 else None)
    if hub and hub_id:
        fetched = _hub_config(hub_id, source.split("@")[1] if "@" in source else None)
        if fetched is not None:
            return ModelShape.from_file(fetched), None, None, f"hub: {hub_id} config.json"
    return None, None, None, "unknown"


def _hub_config(repo: str, revision: str | None) -> Path | None:
    """The hub's config.json of ``repo`` alone (no weights); None when the hub cannot be reached."""
    if os.environ.get("HF_HUB_OFFLINE", "").strip().lower() in ("1", "true", "yes"):
        return None
    try:
        from huggingface_hub import hf_hub_download

        return Path(hf_hub_download(repo, "config.json", revision=revision))
    except Exception:  # any hub failure (no network, gated, unknown repo) leaves the shape unknown
        return None


def _planned_quant(spec: Mapping[str, Any]) -> Quant | None:
    q = spec.get("quantize")
    if not q:
        return None
    scheme = str(q.get("scheme", "W4A16_ASYM"))
    if scheme == NO_WEIGHTS:  # weights as the base's (a checkpoint of KV-cache scales only)
        return None
    bits = 4 if scheme.startswith("W4") else 8
    group = q.get("group_size", 64) if scheme.startswith("W4") else None
    return Quant("compressed-tensors", bits, group, zero_point=scheme.endswith("ASYM"))


def make_plan(
    cfg: Mapping[str, Any],
    hw: Hardware,
    root: Path = Path("."),
    given: Mapping[str, str] | None = None,
    calibration: Calibration | None = None,
    hub: bool = True,
) -> StudyPlan:
    """The plan of a validated study config on ``hw``."""
    t0 = time.monotonic()
    pcfg = cfg.get("plan") or {}
    configs = model_configs(cfg, root, given, hub)
    hw = hw.override(cfg.get("hardware") or {})
    rows = []
    for vname, v in cfg["variants"].items():
        args = {**cfg["serve"]["engine_args"], **(v.get("engine_args") or {})}
        mspec = cfg["models"][v["model"]]
        shape, checkpoint, folder, _ = configs.get(v["model"], (None, None, None, ""))
        s = Subject(vname, args, shape, checkpoint, int(v.get("gpus", 1)), tokenizer=folder)
        if "quantize" in mspec and (shape is None or shape.quant is None):  # not made yet: judged by its recipe
            s.planned_quant = _planned_quant(mspec)
            s.shape = replace(shape, quant=s.planned_quant) if shape is not None else None
            s.checkpoint = None
        sc = eargs.speculative_config(args)
        d = configs.get(str(sc["model"])) if sc and sc.get("model") else None
        if sc and d is not None and d[0] is not None:
            s.draft, s.draft_name, s.draft_tokenizer = d[0], str(sc["model"]), d[2]
        try:
            checks = check(s, hw, pcfg.get("memory_overhead_gib"))
            pred = predict(
                s,
                hw,
                workload(cfg, v.get("experiments") or (), vname),
                calibration,
                float(pcfg.get("bandwidth_fraction") or DEFAULT_BANDWIDTH_FRACTION),
                pcfg.get("memory_overhead_gib"),
                pcfg.get("server_start_s"),
            )
        except PlanError as e:
            checks, pred = [Check("model", UNKNOWN, str(e))], {"notes": [str(e)]}
        failed = first_unmet(checks)
        row = {
            "variant": vname,
            "model": v["model"],
            "model_config": configs.get(v["model"], (None, None, None, "unknown"))[3],
            "status": "not_applicable" if failed else "ok",
            "reason": failed.reason if failed else None,
            "failed_rule": failed.rule if failed else None,
            "checks": [asdict(c) for c in checks],
            "gpu": hw.name,
            "gpu_count": hw.count,
            "tensor_parallel_size": s.parallel[0],
            "data_parallel_size": s.parallel[2],
            **{k: v for k, v in pred.items() if k != "notes"},
            "notes": "; ".join(pred.get("notes", [])) or None,
        }
        rows.append(row)
    return StudyPlan(
        study=str(cfg["study"]),
        hardware=hw,
        rows=rows,
        calibration=calibration,
        shapes={k: v[3] for k, v in configs.items()},
        took_s=time.monotonic() - t0,
    )


def fill_in(
    rows: Sequence[Mapping[str, Any]], metadata: Mapping[str, Any], cfg: Mapping[str, Any], root: Path
) -> list[dict[str, Any]]:
    """The plan's rows, those without predictions (model shapes unknown before the fetch) planned again
    now that the models' manifests exist, on the hardware the plan was made for."""
    out = [dict(r) for r in rows]
    if all(r.get("kv_bytes_per_token") is not None for r in out):
        return out
    hw_meta = dict(metadata.get("hardware") or {})
    if hw_meta.get("compute_capability") is not None:
        hw_meta["compute_capability"] = tuple(hw_meta["compute_capability"])
    hw = Hardware(**hw_meta) if hw_meta else hardware_for(cfg)
    again = {r["variant"]: r for r in make_plan(cfg, hw, root, hub=False).rows}
    for i, r in enumerate(out):
        fresh = again.get(r["variant"])
        if r.get("kv_bytes_per_token") is None and fresh and fresh.get("kv_bytes_per_token") is not None:
            note = "planned after the model was fetched (its shapes were unknown before)"
            out[i] = {**fresh, "notes": "; ".join(x for x in (note, fresh.get("notes")) if x)}
    return out


def hardware_for(cfg: Mapping[str, Any], gpu: str | None = None, count: int | None = None) -> Hardware:
    """The hardware to plan for: ``--gpu`` (the table), else the config's ``hardware.gpu``, else the
    GPUs ``nvidia-smi`` finds here, else this host's CPU."""
    hw_cfg = cfg.get("hardware") or {}
    if count is not None and count < 1:
        raise PlanError(f"--gpus {count}: GPUs available must be at least 1 (leave it out to plan for the CPU)")
    count = count or _int_or_none(hw_cfg.get("gpu_count"))
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


@dataclass(frozen=True)
class Refused:
    """What the workflow leaves out before anything runs (workflow/rules/common.smk): the variants the plan
    rules not applicable, each with the reason its server and every measurement of it record, and the
    ``quantize:`` models no other variant would serve, which are never made (quantize.smk)."""

    variants: dict[str, str] = field(default_factory=dict)
    models: dict[str, str] = field(default_factory=dict)

    def reason(self, cfg: Mapping[str, Any], variant: str) -> str | None:
        """Why ``variant`` is not served (None: it is): the plan's reason, and that its model was not made."""
        if variant not in self.variants:
            return None
        model = str(cfg["variants"][variant]["model"])
        return self.variants[variant] + (f"; {self.models[model]}" if model in self.models else "")

    def manifest(self, cfg: Mapping[str, Any], model: str) -> dict[str, Any]:
        """The manifest standing in for a model not made: its would-be source and folder, status
        ``not_applicable`` and why (the serve stage refuses any status but ok; the report reads it)."""
        q = cfg["models"][model]["quantize"]
        return asdict(
            models.Manifest(
                name=model,
                source=f"quantize:{q['base']}:{q.get('method', 'awq')}:{q.get('scheme', 'W4A16_ASYM')}",
                revision=None,
                model_dir=f"resources/models/{model}/model",
                extra={"status": "not_applicable", "reason": self.models[model], "quantization": dict(q)},
            )
        )


def refused_before_serving(cfg: Mapping[str, Any], hw: Hardware, vllm_version: str, root: Path = Path(".")) -> Refused:
    """What the plan of ``cfg`` on ``hw`` rules out before anything is fetched or served.

    Only a plan for a CPU whose servers run vLLM's CPU build (``vllm_version`` ends in ``+cpu``, as the
    serve environment's does) rules anything out here: this host's CPU is then where every server of the
    study runs. A GPU plan (the config's ``hardware.gpu``, or the submitting host's nvidia-smi) is left to the
    supervisor's gate on the devices each server is given, and a CPU plan beside a GPU build of vLLM is a
    cluster's login node planning for itself. A ``quantize:`` model is not made when every variant serving it
    is ruled out and no other variant's speculative-config names it. Planned without the hub: this runs at
    every parse of the workflow."""
    if not hw.cpu or not vllm_version.endswith("+cpu"):
        return Refused()
    rows = make_plan(cfg, hw, root, hub=False).rows
    out = Refused({str(r["variant"]): str(r["reason"]) for r in rows if r["status"] == "not_applicable"})
    drafts = " ".join(
        str(sc.get("model") or "")
        for name, v in cfg["variants"].items()
        if name not in out.variants
        and (sc := eargs.speculative_config({**cfg["serve"]["engine_args"], **(v.get("engine_args") or {})}))
    )
    for name, spec in cfg["models"].items():
        users = [v for v, vs in cfg["variants"].items() if vs["model"] == name]
        if "quantize" in spec and users and all(v in out.variants for v in users) and name not in drafts:
            out.models[name] = (
                f"model '{name}' was not quantised: the plan rules every variant serving it "
                f"({', '.join(users)}) not applicable on this hardware"
            )
    return out


# ---------------------------------------------------------------------------------------------------------
# Calibration and predicted-vs-measured (these read Parquet: pyarrow is imported when called)


def _read(path: Path, table: Any) -> Any:
    from worthit import schemas

    return schemas.read(path, table) if path.is_file() else None


def _engine_util(args: Mapping[str, Any]) -> float:
    return float(eargs.get(args, "gpu-memory-utilization") or 0.9)


def calibrate(results: str | os.PathLike[str]) -> Calibration:
    """Fractions a finished study measured (``results/<study>``): the bandwidth fraction at the lowest
    load level (MBU: weight and KV bytes per step / TPOT / peak), the memory vLLM kept beyond weights and
    KV, and (when the study has a ``plan_vs_measured`` table) measured / predicted throughput."""
    from worthit import schemas

    root = Path(results)
    if not root.is_dir():
        raise PlanError(f"--calibration {root}: no such results folder (expected results/<study>)")
    summary = _read(root / "summary.parquet", schemas.SUMMARY)
    mbus, overheads, gpu = [], [], None
    for kv_path in sorted(root.glob("variant~*/kv.parquet")):
        res = _read(kv_path, schemas.KV_CACHE)
        if res is None or not res.ok or res.table.num_rows == 0:
            continue
        row = res.to_pandas().iloc[0].to_dict()
        meta = res.metadata
        args = meta.get("engine_args") or {}
        hwm = meta.get("hardware") or {}
        gpu = gpu or hwm.get("gpu")
        spec = gpus.lookup(hwm.get("gpu"))
        tp = int(eargs.get(args, "tensor-parallel-size") or 1)
        kv_bytes = float(row["kv_tokens"]) * float(row["kv_bytes_per_token"])
        if spec is not None and not eargs.get(args, "kv-cache-memory-bytes") and row.get("weight_bytes"):
            cap = spec.memory_gib * GIB
            overheads.append((_engine_util(args) * cap - (float(row["weight_bytes"]) + kv_bytes) / tp) / GIB)
        if summary is None or spec is None or eargs.speculative_config(args):
            continue
        variant = row["variant"]
        df = summary.to_pandas()
        df = df[(df["variant"] == variant) & (df["status"] == "ok") & df["tpot_ms_p50"].notna()]
        if df.empty:
            continue
        lowest = df[df["concurrency"] == df["concurrency"].min()]
        c = int(lowest["concurrency"].iloc[0])
        tpot = float(lowest["tpot_ms_p50"].median())
        wl = _workload_of(root / kv_path.parent.name / "load" / f"conc~{c}.parquet")
        ctx = wl[0] + wl[1] / 2 if wl else float(row["tokens_per_request"]) * 0.75
        read = float(row["weight_bytes"]) + c * ctx * float(row["kv_bytes_per_token"])
        mbus.append(read / (tpot / 1e3) / (spec.bandwidth_gb_s * 1e9 * tp))
    ratios = []
    pvm = _read(root / "plan_vs_measured.parquet", schemas.PLAN_VS_MEASURED)
    if pvm is not None and pvm.table.num_rows:
        df = pvm.to_pandas()
        ratios = [float(r) for r in df[(df["quantity"] == "output_tok_per_s") & df["ratio"].notna()]["ratio"]]
    if not mbus and not overheads:
        raise PlanError(f"--calibration {root}: no measured KV capacity or TPOT of a known GPU to calibrate from")
    return Calibration(
        source=str(root),
        gpu=gpu,
        bandwidth_fraction=_median(mbus),
        overhead_gib=_median(overheads),
        throughput_fraction=_median(ratios),
    )


def _median(xs: Sequence[float]) -> float | None:
    if not xs:
        return None
    s = sorted(xs)
    mid = len(s) // 2
    return s[mid] if len(s) % 2 else (s[mid - 1] + s[mid]) / 2


def _workload_of(load_path: Path) -> tuple[int, int] | None:
    from worthit import schemas

    res = _read(load_path, schemas.LOAD_REQUESTS)
    w = (res.metadata.get("workload") if res else None) or {}
    if w.get("prompt_tokens") and w.get("output_tokens"):
        return int(w["prompt_tokens"]), int(w["output_tokens"])
    return None


def measured_knee(levels: Sequence[tuple[int, float]], fraction: float = 0.9) -> int | None:
    """The lowest concurrency whose output tok/s reaches ``fraction`` of the best measured."""
    pts = [(c, t) for c, t in levels if t is not None and not math.isnan(t)]
    if not pts:
        return None
    peak = max(t for _, t in pts)
    return min(c for c, t in pts if t >= fraction * peak)


def compare(
    plan_rows: Sequence[Mapping[str, Any]],
    results: str | os.PathLike[str],
    tolerances: Mapping[str, float] | None = None,
    knee_fraction: float = 0.9,
) -> list[dict[str, Any]]:
    """Rows of the ``plan_vs_measured`` table: per variant, each predicted figure next to its measurement."""
    from worthit import schemas

    tol = {**DEFAULT_TOLERANCES, **(tolerances or {})}
    root = Path(results)
    summary = _read(root / "summary.parquet", schemas.SUMMARY)
    sdf = summary.to_pandas() if summary is not None else None
    out: list[dict[str, Any]] = []

    def add(variant: str, quantity: str, unit: str, pred: Any, meas: Any, kind: str, t: float, note: str = "") -> None:
        ok_pred, ok_meas = pred is not None and not _nan(pred), meas is not None and not _nan(meas)
        ratio = float(meas) / float(pred) if ok_pred and ok_meas and float(pred) else None
        within: bool | None = None
        if ratio is not None:
            within = (1 / t <= ratio <= t) if kind == "factor" else abs(ratio - 1) <= t
        out.append(
            {
                "variant": variant,
                "quantity": quantity,
                "unit": unit,
                "predicted": float(pred) if ok_pred else None,
                "measured": float(meas) if ok_meas else None,
                "ratio": ratio,
                "tolerance": t,
                "tolerance_kind": kind,
                "within_tolerance": within,
                "flag": None if within is not False else ("over" if ratio is not None and ratio > 1 else "under"),
                "note": note or None,
            }
        )

    for p in plan_rows:
        v = str(p["variant"])
        if p.get("status") == "not_applicable":
            continue
        kv = _read(root / f"variant~{v}" / "kv.parquet", schemas.KV_CACHE)
        kvrow = kv.to_pandas().iloc[0].to_dict() if kv is not None and kv.ok and kv.table.num_rows else {}
        if p.get("num_blocks") is not None or kvrow:
            add(v, "kv_blocks", "blocks", p.get("num_blocks"), kvrow.get("num_blocks"), "relative", tol["kv_blocks"])
            add(
                v,
                "critical_concurrency",
                "requests",
                p.get("critical_concurrency"),
                kvrow.get("critical_concurrency"),
                "relative",
                tol["kv_blocks"],
            )
        if sdf is None:
            continue
        d = sdf[(sdf["variant"] == v) & (sdf["status"] == "ok") & sdf["concurrency"].notna()]
        if d.empty:
            continue
        by_level = d.groupby("concurrency").agg({"tpot_ms_p50": "median", "output_tok_per_s": "median"})
        pts = [(int(c), float(r["output_tok_per_s"])) for c, r in by_level.iterrows()]
        knee, highest = measured_knee(pts, knee_fraction), max(c for c, _ in pts)
        note = (
            f"predicted bound: {p.get('bound')}; measured: lowest level reaching {knee_fraction:.0%} of the best "
            f"tok/s (levels {', '.join(str(c) for c, _ in pts)})"
        )
        if knee == highest and (p.get("knee_concurrency") or 0) > highest:
            # throughput still rose at the highest level: the knee lies beyond the levels measured
            note += f"; still rising at {highest}: the knee is beyond the levels measured, not judged"
            knee = None
        add(v, "knee_concurrency", "requests", p.get("knee_concurrency"), knee, "factor", tol["knee_factor"], note)
        lowest = int(by_level.index.min())
        levels = list(p.get("levels") or [])
        exp = list(p.get("tpot_expected_ms") or [])
        floor = list(p.get("tpot_floor_ms") or [])
        i = levels.index(lowest) if lowest in levels else None
        tpot_meas = float(by_level.loc[lowest, "tpot_ms_p50"])
        mbu = floor[i] / tpot_meas if i is not None and floor and tpot_meas else None
        add(
            v,
            f"tpot_ms_c{lowest}",
            "ms",
            exp[i] if i is not None and exp else None,
            tpot_meas,
            "relative",
            tol["tpot"],
            f"roofline floor {floor[i]:.2f} ms: achieved bandwidth fraction (MBU) {mbu:.0%}"
            if mbu is not None and i is not None
            else "",
        )
        best_c, best = max(pts, key=lambda x: x[1])
        j = levels.index(best_c) if best_c in levels else None
        tput = list(p.get("output_tok_per_s") or [])
        ceiling = p.get("throughput_ceiling_tok_per_s")
        add(
            v,
            "output_tok_per_s",
            "tok/s",
            tput[j] if j is not None and tput else None,
            best,
            "relative",
            tol["throughput"],
            f"best measured at concurrency {best_c}; roofline ceiling {ceiling:,.0f} tok/s at the predicted limit"
            if ceiling is not None
            else f"best measured at concurrency {best_c}",
        )
    return out


def _nan(x: Any) -> bool:
    try:
        return math.isnan(float(x))
    except (TypeError, ValueError):
        return True


# ---------------------------------------------------------------------------------------------------------
# Output: Parquet, Markdown and the printed cards


def write(plan: StudyPlan, path: str | os.PathLike[str]) -> Path:
    from worthit import schemas

    return schemas.write(path, schemas.PLAN, plan.rows, metadata=plan.metadata)


def write_comparison(
    rows: Sequence[Mapping[str, Any]], path: str | os.PathLike[str], metadata: Mapping[str, Any] | None = None
) -> Path:
    from worthit import schemas

    return schemas.write(path, schemas.PLAN_VS_MEASURED, list(rows), metadata=metadata)


def comparison_markdown(rows: Sequence[Mapping[str, Any]], study: str = "") -> str:
    from worthit.fmt import markdown_table

    shown = [
        {
            **r,
            "within": "–"
            if r.get("within_tolerance") is None
            else ("yes" if r["within_tolerance"] else f"NO ({r['flag']})"),
            "tol": f"{'x' if r['tolerance_kind'] == 'factor' else '±'}{r['tolerance']:g}"
            if r["tolerance_kind"] == "factor"
            else f"±{r['tolerance']:.0%}",
        }
        for r in rows
    ]
    cols = (
        ("variant", "variant"),
        ("quantity", "quantity"),
        ("predicted", "predicted"),
        ("measured", "measured"),
        ("unit", "unit"),
        ("ratio", "measured / predicted"),
        ("tol", "tolerance"),
        ("within", "within"),
        ("note", "note"),
    )
    head = f"# Plan vs measured{': ' + study if study else ''}\n\n"
    return head + markdown_table(shown, cols, digits=2, empty="nothing measured to compare") + "\n"


_MARK = {MET: "✓", NOT_MET: "✗", UNKNOWN: "?"}


def _fmt(x: Any, digits: int = 1, unit: str = "") -> str:
    from worthit.fmt import cell

    s = cell(x, digits)
    return s + (f" {unit}" if unit and s != "–" else "")


def card_lines(row: Mapping[str, Any]) -> list[tuple[str, str]]:
    """The predictions of one plan row as (quantity, value) pairs, in the card's order."""
    levels, tp = row.get("levels") or [], row.get("tpot_expected_ms") or []
    rise = ", ".join(f"c={c}: {t:.1f}" for c, t in zip(levels, tp, strict=False)) if tp else None
    ovh = row.get("overhead_gib")
    return [
        ("model config", str(row.get("model_config") or "–")),
        (
            "weights",
            _fmt((row.get("weight_bytes") or 0) / GIB if row.get("weight_bytes") else None, 2, "GiB")
            + (f" ({row['weight_source']})" if row.get("weight_source") else ""),
        ),
        ("KV bytes per token", _fmt(row.get("kv_bytes_per_token"), 0) + f" ({row.get('kv_cache_dtype') or 'auto'})"),
        (
            "KV pool",
            _fmt(row.get("kv_memory_gib"), 2, "GiB")
            + (f" after {ovh:.2f} GiB overhead ({row.get('overhead_source')})" if ovh is not None else ""),
        ),
        (
            "KV blocks × block",
            f"{_fmt(row.get('num_blocks'), 0)} × {_fmt(row.get('block_size_tokens'), 0)}"
            f" = {_fmt(row.get('kv_tokens'), 0)} tokens",
        ),
        (
            "critical concurrency",
            _fmt(row.get("critical_concurrency"), 1) + f" at {_fmt(row.get('tokens_per_request'), 0)} tokens/request",
        ),
        ("knee", _fmt(row.get("knee_concurrency"), 0) + (f" (bound: {row['bound']})" if row.get("bound") else "")),
        (
            "TPOT floor c=1",
            _fmt(row.get("tpot_floor_ms_c1"), 2, "ms") + f" at {_fmt(row.get('peak_bandwidth_gb_s'), 0)} GB/s",
        ),
        (
            "TPOT expected",
            (rise + " ms" if rise else "–")
            + (f" (bandwidth fraction {row['bandwidth_fraction']:.2f})" if row.get("bandwidth_fraction") else ""),
        ),
        ("throughput ceiling", _fmt(row.get("throughput_ceiling_tok_per_s"), 0, "tok/s")),
        ("estimated wall time", _fmt((row.get("est_wall_s") or 0) / 60 if row.get("est_wall_s") else None, 1, "min")),
    ]


def markdown(plan: StudyPlan) -> str:
    from worthit.fmt import markdown_table

    hw = plan.hardware
    lines = [f"# Plan: {plan.study} on {hw.name} x {hw.count or 'CPU'}", "", f"Hardware: {hw.source}", ""]
    if plan.calibration:
        lines += [f"Calibrated from {plan.calibration.source}", ""]
    for row in plan.rows:
        state = "not applicable" if row["status"] == "not_applicable" else "runs"
        lines += [f"## {row['variant']} ({row['model']}): {state}", ""]
        checks = [{**c, "status": f"{_MARK.get(c['status'], '')} {c['status']}"} for c in row["checks"]]
        lines += [
            markdown_table(
                checks,
                (("rule", "rule"), ("status", "status"), ("detail", "detail"), ("source", "source")),
                empty="no prerequisite concerns this variant",
            ),
            "",
        ]
        lines += [
            markdown_table([{"q": q, "v": v} for q, v in card_lines(row)], (("q", "prediction"), ("v", "value"))),
            "",
        ]
        if row.get("notes"):
            lines += [f"Notes: {row['notes']}", ""]
    total = sum(r.get("est_wall_s") or 0 for r in plan.rows)
    if total:
        lines.append(f"Estimated wall time of the study: {total / 3600:.1f} h (lm-eval excluded)")
    return "\n".join(lines) + "\n"


def print_cards(plan: StudyPlan, console: Any = None) -> None:
    from rich.console import Console
    from rich.panel import Panel
    from rich.table import Table

    console = console or Console()
    hw = plan.hardware
    console.print(f"[bold]Plan[/bold] {plan.study} on {hw.name} × {hw.count or 'CPU'} — {hw.source}")
    if plan.calibration:
        c = plan.calibration
        console.print(
            f"calibrated from {c.source} ({c.gpu}): bandwidth fraction {_fmt(c.bandwidth_fraction, 2)}, "
            f"overhead {_fmt(c.overhead_gib, 2, 'GiB')}, throughput fraction {_fmt(c.throughput_fraction, 2)}"
        )
    for row in plan.rows:
        checks = Table(show_header=True, box=None, pad_edge=False)
        for col in ("", "prerequisite", "detail", "source"):
            checks.add_column(col, overflow="fold")
        for c in row["checks"]:
            color = {MET: "green", NOT_MET: "red", UNKNOWN: "yellow"}[c["status"]]
            checks.add_row(
                f"[{color}]{_MARK[c['status']]}[/{color}]", c["rule"], c["detail"], f"[dim]{c['source']}[/dim]"
            )
        preds = Table(show_header=False, box=None, pad_edge=False)
        preds.add_column(style="bold")
        preds.add_column(overflow="fold")
        for q, v in card_lines(row):
            preds.add_row(q, v)
        body = Table.grid(padding=(1, 0))
        body.add_row(checks if row["checks"] else "[dim]no prerequisite concerns this variant[/dim]")
        body.add_row(preds)
        if row.get("notes"):
            body.add_row(f"[dim]{row['notes']}[/dim]")
        na = row["status"] == "not_applicable"
        title = f"{row['variant']} ({row['model']})" + (" — [red]not applicable[/red]" if na else "")
        console.print(Panel(body, title=title, border_style="red" if na else "green"))
    total = sum(r.get("est_wall_s") or 0 for r in plan.rows)
    if total:
        console.print(
            f"estimated wall time of the study: {total / 3600:.1f} h (lm-eval excluded); planned in {plan.took_s:.2f} s"
        )


def parse_model_configs(items: Sequence[str] | None) -> dict[str, str]:
    out = {}
    for item in items or []:
        name, sep, path = item.partition("=")
        if not sep or not name or not path:
            raise PlanError(f"--model-config {item!r}: expected NAME=FILE (a model of the study, or a draft's hub id)")
        out[name] = path
    return out


def run_cli(a: Any) -> int:
    """``worthit plan``: plan a study config, write plan.parquet (and plan.md beside it), print the cards."""
    from worthit.config import load

    try:
        cfg = load(a.configfile or REPO_ROOT / "config" / "config.yaml")
        hw = hardware_for(cfg, a.gpu, a.gpus)
        cal = calibrate(a.calibration) if a.calibration else None
        hub = bool(cfg["plan"]["hub_configs"]) and not a.no_hub
        plan = make_plan(cfg, hw, Path.cwd(), parse_model_configs(a.model_config), cal, hub)
    except InputError as e:  # a bad config, model config or calibration result
        return errors.report("worthit plan", e)
    out = Path(a.out or f"results/{plan.study}/plan.parquet")
    write(plan, out)
    from worthit import atomic

    atomic.write_text(out.with_suffix(".md"), markdown(plan))
    print_cards(plan)
    print(f"wrote {out} and {out.with_suffix('.md')}")
    return 0

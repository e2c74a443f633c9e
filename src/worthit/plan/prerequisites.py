"""Prerequisites: the rules a variant must meet to run at all on the given hardware, each with its source.

FP8 KV cache needs compute capability >= 8.9, Marlin kernels >= 8.0; tensor, pipeline and data parallelism
need that many GPUs and heads divisible by the tensor-parallel size; a draft model must share the target's
tokenizer; a quantisation group must divide the width of every quantised layer (on one GPU's shard); the
weights plus one ``max-model-len`` sequence's KV must fit in the memory vLLM may use. Four more concern the
switches a Hopper user weighs (docs/experiments.md, "FP8 weights, async scheduling, KV offload, suffix
decoding"): FP8 weights, async scheduling, KV offloading and suffix decoding, each checked against what the
serve environment's vLLM says of itself (:mod:`worthit.plan.vllm_support`) where it was asked.

A rule that fails makes the variant *not applicable*: the server supervisor asks these rules (through
:func:`worthit.gating.not_applicable`) and never starts such a server. Standard library only.
"""

from __future__ import annotations

import contextlib
import json
import os
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from worthit import engine_args as eargs
from worthit import gating
from worthit.plan.checkpoints import local_model_folder, served_weight_bytes
from worthit.plan.hardware import Hardware
from worthit.plan.memory import memory_overhead_gib
from worthit.plan.shapes import (
    GIB,
    ModelShape,
    PlanError,
    Quant,
    dtype_bytes,
    kv_bytes_per_token,
    kv_split,
    max_model_len,
    parallel_sizes,
    served_dtype,
)
from worthit.plan.vllm_support import VllmSupport

MET, NOT_MET, UNKNOWN = "met", "not_met", "unknown"

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
    "fp8_weights": "vLLM's Fp8Config: get_min_capability() (7.5 in vLLM 0.25; below 8.9 weight-only FP8 through "
    "Marlin, FP8 tensor cores from 8.9) and get_supported_act_dtypes() (bfloat16, float16)",
    "async_scheduling": "vLLM's VllmConfig: async scheduling is on by default and refused beside speculative "
    "methods other than EAGLE/MTP/ngram_gpu/draft model/DSpark; its CPU platform turns it off",
    "kv_offloading": "vLLM's --kv-offloading-size/--kv-offloading-backend (native: OffloadingConnector, CUDA-alike "
    "and XPU GPUs only; lmcache: the lmcache package and an LMCache server)",
    "suffix_decoding": "vLLM's SpeculativeConfig: suffix decoding needs the arctic_inference package "
    "(has_arctic_inference())",
}


@dataclass(frozen=True)
class PrerequisiteCheck:
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
    support: VllmSupport | None = None  # what the serve env's vLLM says it supports (None: not asked)

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


def _check(rule: str, status: str, detail: str) -> PrerequisiteCheck:
    return PrerequisiteCheck(rule, status, detail, RULE_SOURCES[rule])


def _cpu_isa_check(rule: str, hw: Hardware, *, isa: str, refused: str, served: str) -> PrerequisiteCheck:
    """A CPU rule on ``Hardware.cpu_avx512_or_amx``: unknown flags never refuse, a CPU without ``isa`` gets
    ``refused``, one with it ``served``."""
    if hw.cpu_avx512_or_amx is None:
        return _check(rule, UNKNOWN, f"CPU: whether it has {isa} is unknown")
    if not hw.cpu_avx512_or_amx:
        return _check(rule, NOT_MET, refused)
    return _check(rule, MET, f"CPU with {isa}: {served}")


def rule_fp8_kv(s: Subject, hw: Hardware) -> PrerequisiteCheck | None:
    dt = eargs.get(s.args, "kv-cache-dtype")
    if not dt or str(dt) not in gating.FP8_KV_DTYPES:
        return None
    if hw.cpu:
        return _cpu_isa_check(
            "fp8_kv_cache",
            hw,
            isa="AVX-512 or AMX",
            refused=f"not applicable: this CPU has neither AVX-512 nor AMX; --kv-cache-dtype {dt} on vLLM's CPU "
            'backend needs one of them ("FP8 KV cache on CPU requires x86 with AVX-512 or AMX"); it runs on an x86 '
            "CPU with AVX-512 or AMX, or a CUDA GPU of compute capability 8.9 or newer (Ada, Hopper)",
            served="vLLM's CPU backend stores fp8 KV itself",
        )
    if hw.compute_capability is None:
        return _check("fp8_kv_cache", UNKNOWN, f"{hw.name}: compute capability unknown")
    refused = gating.kv_cache_dtype_gate(str(dt), hw.devices())
    if refused:
        return _check("fp8_kv_cache", NOT_MET, refused)
    return _check("fp8_kv_cache", MET, f"{hw.name} is {hw.sm} >= sm_89")


MARLIN_METHODS = frozenset({"awq_marlin", "gptq_marlin", "marlin", "gptq_marlin_24"})


def rule_marlin(s: Subject, hw: Hardware) -> PrerequisiteCheck | None:
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


def rule_cpu_int4(s: Subject, hw: Hardware) -> PrerequisiteCheck | None:
    q = s.quant
    if not hw.cpu or q is None or q.bits != 4:
        return None
    return _cpu_isa_check(
        "cpu_int4_kernels",
        hw,
        isa="AVX-512",
        refused=f"not applicable: this CPU has no AVX-512; {q.method} int4 weights on vLLM's CPU backend need its "
        "cpu_gemm_wna16 kernel, which only its AVX-512 build has (the AVX2 build fails the first request: "
        "\"'_C' object has no attribute 'cpu_gemm_wna16'\"); they run on an x86 CPU with AVX-512 or a CUDA GPU",
        served=f"vLLM's cpu_gemm_wna16 serves {q.method} int4 weights",
    )


def rule_gpu_count(s: Subject, hw: Hardware) -> PrerequisiteCheck | None:
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


def rule_parallel_divisibility(s: Subject, hw: Hardware) -> PrerequisiteCheck | None:
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


def rule_draft_tokenizer(s: Subject, hw: Hardware) -> PrerequisiteCheck | None:
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


def rule_quant_group_size(s: Subject, hw: Hardware) -> PrerequisiteCheck | None:
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


def rule_memory_fit(s: Subject, hw: Hardware, overhead_gib: float | None = None) -> PrerequisiteCheck | None:
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
    seq_kv = max_len * kv_bytes_per_token(s.shape, s.args) / kv_split(s.shape, tp, pp)
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


FP8_WEIGHT_METHODS = frozenset({"fp8", "fp8_per_tensor", "fp8_per_tensor_dynamic"})
# vLLM 0.25's Fp8Config.get_min_capability() and the capability of FP8 tensor cores (Ada, Hopper): the
# serve env's vLLM, when asked, says the first itself
FP8_WEIGHTS_MIN_CAPABILITY = 75
FP8_WEIGHTS_DTYPES = ("bfloat16", "float16")


def _not_asked(rule: str, what: str) -> PrerequisiteCheck:
    return _check(rule, UNKNOWN, f"{what}: the serve env's vLLM was not asked (plan with it installed)")


def rule_fp8_weights(s: Subject, hw: Hardware) -> PrerequisiteCheck | None:
    q = str(eargs.get(s.args, "quantization") or "").lower()
    if q not in FP8_WEIGHT_METHODS:
        return None
    sup = s.support
    dtypes = sup.fp8_act_dtypes if sup and sup.fp8_act_dtypes else FP8_WEIGHTS_DTYPES
    dt = str(eargs.get(s.args, "dtype") or "auto").lower().replace("torch.", "")
    dt = {"half": "float16", "float": "float32", "bf16": "bfloat16", "fp16": "float16", "fp32": "float32"}.get(dt, dt)
    if dt not in ("auto", *dtypes):
        return _check(
            "fp8_weights",
            NOT_MET,
            f'not applicable: --quantization {q} with --dtype {dt}: vLLM refuses it ("torch.{dt} is not supported '
            f'for quantization method fp8. Supported dtypes: {", ".join(dtypes)}")',
        )
    if hw.cpu:
        if sup is None or not sup.cpu or sup.fp8_quant_kernel is None:
            return _not_asked("fp8_weights", f"--quantization {q} on vLLM's CPU backend")
        if not sup.fp8_quant_kernel:
            return _check(
                "fp8_weights",
                NOT_MET,
                f"not applicable: {sup.where} has no FP8 quantisation kernel (its _C.static_scaled_fp8_quant is a "
                'stub): it accepts the flag, then fails loading the weights ("_C::static_scaled_fp8_quant() '
                'expected at most 0 argument(s) but received 4"); FP8 weights run on a CUDA GPU of compute '
                "capability 7.5 or newer",
            )
        return _check("fp8_weights", MET, f"{sup.where} has an FP8 quantisation kernel")
    if hw.compute_capability is None:
        return _check("fp8_weights", UNKNOWN, f"{hw.name}: compute capability unknown")
    need = sup.fp8_min_capability if sup and sup.fp8_min_capability is not None else FP8_WEIGHTS_MIN_CAPABILITY
    cc = hw.compute_capability
    said = sup.where if sup and sup.fp8_min_capability is not None else "vLLM 0.25"
    if cc[0] * 10 + cc[1] < need:
        return _check(
            "fp8_weights",
            NOT_MET,
            f"not applicable: {hw.name} is {hw.sm}; {said}'s FP8 weights need compute capability >= "
            f"{need // 10}.{need % 10} (Fp8Config.get_min_capability())",
        )
    if cc < gating.FP8_MIN_COMPUTE_CAPABILITY:
        return _check(
            "fp8_weights",
            MET,
            f"{hw.name} is {hw.sm} < sm_89: no FP8 tensor cores, vLLM serves FP8 weights weight-only through "
            "Marlin (the bytes read halve, the matmuls stay 16-bit)",
        )
    return _check("fp8_weights", MET, f"{hw.name} is {hw.sm} >= sm_89: FP8 tensor cores (W8A8, dynamic scales)")


def rule_async_scheduling(s: Subject, hw: Hardware) -> PrerequisiteCheck | None:
    if eargs.get(s.args, eargs.ASYNC_SCHEDULING) is not True:
        return None
    if hw.cpu:
        return _check(
            "async_scheduling",
            NOT_MET,
            "not applicable: vLLM's CPU backend turns async scheduling off whatever --async-scheduling says (its "
            'CpuPlatform.check_and_update_config: "async scheduling is not required on CPU"); it runs on a '
            "CUDA GPU",
        )
    sc = eargs.speculative_config(s.args)
    if sc and not eargs.async_scheduling_on(eargs.without(s.args, eargs.ASYNC_SCHEDULING)):
        method = sc.get("method") or "draft_model"
        return _check(
            "async_scheduling",
            NOT_MET,
            f'not applicable: vLLM refuses --async-scheduling beside {method} speculative decoding ("Currently, '
            "async scheduling is only supported with EAGLE/MTP/Draft Model/NGram GPU/DSpark kind of speculative "
            'decoding")',
        )
    return _check(
        "async_scheduling",
        MET,
        "on a GPU; vLLM 0.25 already schedules asynchronously by default, so the variant serves what a baseline "
        "without the flag serves: measure it against async-scheduling: false",
    )


KV_OFFLOAD_CONNECTORS = {"OffloadingConnector": "native", "SimpleCPUOffloadConnector": "native"}


def _offloading(args: Mapping[str, Any]) -> tuple[str, str] | None:
    """(backend, how it is asked) of a variant that offloads KV, else None."""
    size = eargs.get(args, "kv-offloading-size")
    if size is not None:
        backend = str(eargs.get(args, "kv-offloading-backend") or "native")
        return backend, f"--kv-offloading-size {size} --kv-offloading-backend {backend}"
    kt = eargs.get(args, "kv-transfer-config")
    if isinstance(kt, str):
        try:
            kt = json.loads(kt)
        except ValueError:
            return None
    connector = str((kt or {}).get("kv_connector") or "") if isinstance(kt, Mapping) else ""
    if connector in KV_OFFLOAD_CONNECTORS:
        return KV_OFFLOAD_CONNECTORS[connector], f"--kv-transfer-config kv_connector {connector}"
    if connector.startswith("LMCache"):
        return "lmcache", f"--kv-transfer-config kv_connector {connector}"
    return None


def rule_kv_offloading(s: Subject, hw: Hardware) -> PrerequisiteCheck | None:
    asked = _offloading(s.args)
    if asked is None:
        return None
    backend, how = asked
    sup = s.support
    if sup and sup.offloading_backends is not None and backend not in sup.offloading_backends:
        listed = ", ".join(sup.offloading_backends)
        return _check("kv_offloading", NOT_MET, f"not applicable: {sup.where} offloads KV to {listed}, not {backend}")
    if backend == "lmcache":
        if sup is None:
            return _not_asked("kv_offloading", f"{how}: whether the lmcache package is installed")
        if not sup.lmcache:
            return _check(
                "kv_offloading",
                NOT_MET,
                f"not applicable: {how} needs the lmcache package, which {sup.where} cannot import "
                "(\"No module named 'lmcache'\"), and an LMCache server beside it",
            )
        return _check("kv_offloading", MET, f"{how}: {sup.where} imports lmcache (its server must run beside vLLM)")
    if hw.cpu:
        return _check(
            "kv_offloading",
            NOT_MET,
            f"not applicable: {how} on vLLM's CPU backend: its CPU offloading spec refuses to start (\"CPU "
            'Offloading is currently only supported on CUDA-alike and XPU GPUs"); it runs on a CUDA GPU',
        )
    return _check("kv_offloading", MET, f"{how}: vLLM's OffloadingConnector on {hw.name}")


def rule_suffix_decoding(s: Subject, hw: Hardware) -> PrerequisiteCheck | None:
    sc = eargs.speculative_config(s.args)
    if not sc or str(sc.get("method") or "").lower() != "suffix":
        return None
    sup = s.support
    if sup is None or sup.arctic_inference is None:
        return _not_asked("suffix_decoding", "suffix decoding: whether arctic_inference is installed")
    if not sup.arctic_inference:
        return _check(
            "suffix_decoding",
            NOT_MET,
            f'not applicable: {sup.where} cannot import arctic_inference ("Arctic Inference is required for '
            'suffix decoding. Install via `pip install arctic-inference==0.1.1`.")',
        )
    return _check("suffix_decoding", MET, f"{sup.where} imports arctic_inference (suffix trees, no draft model)")


RULES = (
    rule_fp8_kv,
    rule_marlin,
    rule_cpu_int4,
    rule_gpu_count,
    rule_parallel_divisibility,
    rule_draft_tokenizer,
    rule_quant_group_size,
    rule_fp8_weights,
    rule_async_scheduling,
    rule_kv_offloading,
    rule_suffix_decoding,
)


def check(s: Subject, hw: Hardware, overhead_gib: float | None = None) -> list[PrerequisiteCheck]:
    """Every rule that concerns this variant, in a fixed order (FP8 first, memory last)."""
    out = [c for rule in RULES if (c := rule(s, hw)) is not None]
    if overhead_gib is None and s.shape is not None and not hw.cpu:
        overhead_gib = memory_overhead_gib(s.shape, s.args, hw)
    mem = rule_memory_fit(s, hw, overhead_gib)
    return out + ([mem] if mem else [])


def first_unmet(checks: Sequence[PrerequisiteCheck]) -> PrerequisiteCheck | None:
    return next((c for c in checks if c.status == NOT_MET), None)


def needs_support(args: Mapping[str, Any] | None) -> bool:
    """Whether a rule judges these engine arguments on what the serve env's vLLM says of itself (FP8 weights,
    LMCache offloading, suffix decoding): only then is it worth asking (:func:`worthit.plan.vllm_support.ask`)."""
    args = args or {}
    sc = eargs.speculative_config(args) or {}
    offload = _offloading(args)
    return (
        str(eargs.get(args, "quantization") or "").lower() in FP8_WEIGHT_METHODS
        or str(sc.get("method") or "").lower() == "suffix"
        or (offload is not None and offload[0] != "native")
    )


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

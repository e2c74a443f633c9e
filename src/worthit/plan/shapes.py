"""Model shapes: what the plan needs of a model's ``config.json``, and the bytes its weights and KV take.

Also the error every part of the plan raises (:class:`PlanError`) and how engine arguments split a model
(parallel sizes, ``max-model-len``, the KV split). Standard library only.
"""

from __future__ import annotations

import json
import os
from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from worthit import engine_args as eargs
from worthit.errors import InputError

GIB = 2**30

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


class PlanError(InputError):
    """The plan cannot be made as asked; the message names the input and what is allowed."""


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
                max_position=int_or_none(text.get("max_position_embeddings")),
                dtype=str(text.get("torch_dtype") or text.get("dtype") or cfg.get("torch_dtype") or "bfloat16"),
                tied_embeddings=bool(cfg.get("tie_word_embeddings", text.get("tie_word_embeddings", False))),
                model_type=str(text.get("model_type") or cfg.get("model_type") or ""),
                bos_token_id=int_or_none(cfg.get("bos_token_id", text.get("bos_token_id"))),
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


def int_or_none(x: Any) -> int | None:
    """``x`` as an int; None when it is None or not a whole number's spelling."""
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
                    int_or_none(w.get("num_bits")),
                    int_or_none(w.get("group_size")) if w.get("strategy") in (None, "group") else None,
                    zero_point=not w.get("symmetric", True),
                )
        if qc.get("kv_cache_scheme"):  # KV-cache scales only: the weights are not quantised
            return None
        return Quant(method, None, None)
    if method in ("fp8", "fbgemm_fp8", "modelopt"):
        return Quant(method, 8, None)
    return Quant(
        method,
        int_or_none(qc.get("bits") or qc.get("w_bit") or qc.get("weight_bits")),
        int_or_none(qc.get("group_size") or qc.get("q_group_size")),
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


def parallel_sizes(args: Mapping[str, Any] | None) -> tuple[int, int, int]:
    """(tensor, pipeline, data) parallel sizes of the engine arguments (1 when unset)."""
    tp, pp, dp = (int(eargs.get(args, f"{k}-parallel-size") or 1) for k in ("tensor", "pipeline", "data"))
    return tp, pp, dp


def max_model_len(shape: ModelShape, args: Mapping[str, Any] | None) -> int:
    asked = int_or_none(eargs.get(args, "max-model-len"))
    return asked or shape.max_position or 2048


def kv_split(shape: ModelShape, tp: int, pp: int) -> float:
    """How many ways one token's KV is divided among a replica's GPUs (KV heads replicate past tp = heads)."""
    return min(tp, shape.kv_heads) * pp

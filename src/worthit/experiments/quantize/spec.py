"""A model's ``quantize:`` block, typed (:class:`QuantizePlan`), and the values each key may take.

Standard library only: the workflow environment reads these at parse time.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any

from worthit.errors import InputError

NO_WEIGHTS = "NONE"  # weights left as they are: a checkpoint carrying KV-cache scales only
SCHEMES = ("W4A16_ASYM", "W4A16", "W8A8", "FP8_DYNAMIC", NO_WEIGHTS)
# KV-cache schemes (models.<m>.quantize.kv_cache): llm-compressor's kv_cache_scheme, static per-tensor
# scales calibrated on the calibration text; vLLM uses them when the variant serves kv-cache-dtype fp8.
# The observer is named: without one llm-compressor takes "minmax" for keys and values, a moving average
# (constant 0.01) of each calibration batch's range, so the scale stays near the first window's range and
# every larger key or value saturates at 448 x scale; "static_minmax" keeps the range of all the calibration
# text (docs/hardware-results.md, "FP8 KV cache with calibrated scales").
KV_CACHE_SCHEMES: dict[str, dict[str, Any]] = {
    "fp8": {
        "num_bits": 8,
        "type": "float",
        "symmetric": True,
        "strategy": "tensor",
        "dynamic": False,
        "observer": "static_minmax",
    },
}
METHODS = ("awq", "rtn", "autoawq")
# What each method can produce; W8A8/FP8 are per-channel weights with dynamic activations (no
# calibration data), and AWQ's scale search only pays off for low-bit weight-only schemes.
METHOD_SCHEMES = {
    "awq": ("W4A16_ASYM", "W4A16"),
    "rtn": SCHEMES,  # NONE: nothing to round; the KV scales are calibrated
    "autoawq": ("W4A16_ASYM", "W4A16"),
}
GROUPED_SCHEMES = ("W4A16_ASYM", "W4A16")
GROUP_SIZES = (32, 64, 128, 256)
# Architectures AutoAWQ 0.2.9 has model classes for (subset relevant here); llm-compressor's list is
# read from its AWQ mapping registry at run time.
AUTOAWQ_ARCHITECTURES = (
    "LlamaForCausalLM",
    "MistralForCausalLM",
    "Qwen2ForCausalLM",
    "Qwen3ForCausalLM",
    "GemmaForCausalLM",
    "Gemma2ForCausalLM",
    "Phi3ForCausalLM",
)


class QuantizeError(InputError):
    """The quantisation plan cannot work; the message names the config key and the allowed values."""


class NotAvailable(RuntimeError):
    """The backend is not installed here (recorded as a result, never a crashed study)."""


@dataclass(frozen=True)
class CalibrationText:
    """Where the calibration text comes from and how much of it is cut into windows (``calibration:``)."""

    dataset: str = "builtin"  # builtin | file:PATH(.jsonl|.txt) | a hub dataset id
    split: str = "train"
    text_column: str = "text"
    samples: int = 16
    seq_len: int = 128


@dataclass(frozen=True)
class QuantizePlan:
    """One model's ``quantize:`` block from the study config, typed."""

    name: str
    base: str
    scheme: str = "W4A16_ASYM"
    method: str = "awq"
    group_size: int | None = 64
    ignore: tuple[str, ...] = ("lm_head",)
    calibration: CalibrationText = field(default_factory=CalibrationText)
    max_nll_increase: float = 1.0
    max_kl: float | None = None
    calibration_dtype: str = "float32"
    n_grid: int = 20
    duo_scaling: bool = True
    kv_cache: str | None = None

    @classmethod
    def from_config(cls, name: str, spec: Mapping[str, Any]) -> QuantizePlan:
        cal = dict(spec.get("calibration") or {})
        known = {f for f in CalibrationText.__dataclass_fields__}
        return cls(
            name=name,
            base=str(spec["base"]),
            scheme=str(spec.get("scheme", "W4A16_ASYM")),
            method=str(spec.get("method", "awq")),
            group_size=None if spec.get("group_size", 64) is None else int(spec.get("group_size", 64)),
            ignore=tuple(spec.get("ignore", ["lm_head"])),
            calibration=CalibrationText(**{k: v for k, v in cal.items() if k in known}),
            max_nll_increase=float(spec.get("max_nll_increase", 1.0)),
            max_kl=None if spec.get("max_kl") is None else float(spec["max_kl"]),
            calibration_dtype=str(spec.get("calibration_dtype", "float32")),
            n_grid=int(spec.get("n_grid", 20)),
            duo_scaling=bool(spec.get("duo_scaling", True)),
            kv_cache=None if spec.get("kv_cache") is None else str(spec["kv_cache"]),
        )

    @property
    def needs_calibration(self) -> bool:
        return self.method in ("awq", "autoawq") or self.kv_cache is not None

    def key(self, sub: str) -> str:
        return f"models.{self.name}.quantize.{sub}"

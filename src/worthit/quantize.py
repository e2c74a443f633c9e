"""The quantisation stage (``quantize_model``): a base model -> a quantised checkpoint + manifest.

Backends, behind one interface (:func:`quantize`):
  ``awq``      llm-compressor's AWQ transform + a separate ``QuantizationModifier`` (W4A16[_ASYM])
  ``rtn``      llm-compressor round-to-nearest (W4A16[_ASYM], W8A8 int8, FP8_DYNAMIC; no calibration)
  ``autoawq``  AutoAWQ, only where it is installed (patched: its CPU weight backup aliases the live
               tensor and silently corrupts the checkpoint); otherwise recorded as not available.

Every quantised model passes a quality gate before anything serves it: NLL of the held-out text
(``data/heldout.jsonl``, written by the project) under the quantised checkpoint as written to disk, vs
the base model, plus the mean KL between their next-token distributions. A model beyond the bound is
a *failed* result: its manifest says ``status: failed`` and why, and the serve stage records the
failure instead of starting vLLM (see :mod:`worthit.server`).

The plan checks (:func:`validate_plan`) are pure: they read the base model's config.json and
safetensors headers, so they run in the workflow environment at parse time and again before any work.
torch, transformers and llm-compressor are imported only inside the functions that need them; this
module runs in the quantize environment (``<quantize_python> -m worthit.quantize``).
"""

from __future__ import annotations

import argparse
import contextlib
import json
import logging
import math
import os
import re
import resource
import shutil
import sys
import time
import traceback
from collections.abc import Iterator, Mapping, Sequence
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any

from worthit import errors
from worthit.errors import InputError
from worthit.models import Manifest, build_manifest, is_quantization_param, safetensors_header

log = logging.getLogger("worthit.quantize")

DATA = Path(__file__).resolve().parent / "data"
CALIBRATION_FILE = DATA / "calibration.jsonl"
HELDOUT_FILE = DATA / "heldout.jsonl"

NO_WEIGHTS = "NONE"  # weights left as they are: a checkpoint carrying KV-cache scales only
SCHEMES = ("W4A16_ASYM", "W4A16", "W8A8", "FP8_DYNAMIC", NO_WEIGHTS)
# KV-cache schemes (models.<m>.quantize.kv_cache): llm-compressor's kv_cache_scheme, static per-tensor
# scales calibrated on the calibration text; vLLM uses them when the variant serves kv-cache-dtype fp8.
KV_CACHE_SCHEMES: dict[str, dict[str, Any]] = {
    "fp8": {"num_bits": 8, "type": "float", "symmetric": True, "strategy": "tensor", "dynamic": False},
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

STATUS_OK = "ok"
STATUS_FAILED = "failed"
STATUS_NOT_AVAILABLE = "not_available"


class QuantizeError(InputError):
    """The quantisation plan cannot work; the message names the config key and the allowed values."""


class NotAvailable(RuntimeError):
    """The backend is not installed here (recorded as a result, never a crashed study)."""


@dataclass(frozen=True)
class Calibration:
    dataset: str = "builtin"  # builtin | file:PATH(.jsonl|.txt) | a hub dataset id
    split: str = "train"
    text_column: str = "text"
    samples: int = 16
    seq_len: int = 128


@dataclass(frozen=True)
class Plan:
    """One model's ``quantize:`` block from the study config, typed."""

    name: str
    base: str
    scheme: str = "W4A16_ASYM"
    method: str = "awq"
    group_size: int | None = 64
    ignore: tuple[str, ...] = ("lm_head",)
    calibration: Calibration = field(default_factory=Calibration)
    max_nll_increase: float = 1.0
    max_kl: float | None = None
    calibration_dtype: str = "float32"
    n_grid: int = 20
    duo_scaling: bool = True
    kv_cache: str | None = None

    @classmethod
    def from_config(cls, name: str, spec: Mapping[str, Any]) -> Plan:
        cal = dict(spec.get("calibration") or {})
        known = {f for f in Calibration.__dataclass_fields__}
        return cls(
            name=name,
            base=str(spec["base"]),
            scheme=str(spec.get("scheme", "W4A16_ASYM")),
            method=str(spec.get("method", "awq")),
            group_size=None if spec.get("group_size", 64) is None else int(spec.get("group_size", 64)),
            ignore=tuple(spec.get("ignore", ["lm_head"])),
            calibration=Calibration(**{k: v for k, v in cal.items() if k in known}),
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


# ---------------------------------------------------------------------------------------------------------
# Validation (pure: config.json + safetensors headers)


def safetensors_shapes(model_dir: Path) -> dict[str, list[int]]:
    """Tensor name -> shape from every safetensors header of a model folder, without loading tensors."""
    shapes: dict[str, list[int]] = {}
    for path in sorted(Path(model_dir).glob("*.safetensors")):
        shapes.update({k: list(v["shape"]) for k, v in safetensors_header(path).items()})
    return shapes


def _ignored(module: str, ignore: Sequence[str]) -> bool:
    """llm-compressor's matching: ``re:PATTERN`` is a regex on the module name, else a name suffix."""
    for pat in ignore:
        if pat.startswith("re:"):
            if re.match(pat[3:], module):
                return True
        elif module == pat or module.endswith("." + pat):
            return True
    return False


def quantised_linears(model_dir: Path, ignore: Sequence[str] = ("lm_head",)) -> dict[str, int]:
    """Linear layers the scheme will quantise -> their in-features (2-D ``*.weight`` tensors other than
    embeddings, minus the ignore list)."""
    out: dict[str, int] = {}
    for name, shape in safetensors_shapes(model_dir).items():
        if not name.endswith(".weight") or len(shape) != 2 or "embed" in name:
            continue
        module = name[: -len(".weight")]
        if not _ignored(module, ignore):
            out[module] = int(shape[1])
    return out


def architecture(model_dir: Path) -> str:
    cfg = json.loads((Path(model_dir) / "config.json").read_text())
    archs = cfg.get("architectures") or ["?"]
    return str(archs[0])


def _validate_kv_cache(plan: Plan) -> None:
    """The KV-cache scales of a plan (``kv_cache``), and a plan that leaves the weights alone (``NONE``)."""
    if plan.kv_cache is not None and plan.kv_cache not in KV_CACHE_SCHEMES:
        raise QuantizeError(
            f"key '{plan.key('kv_cache')}': unknown KV-cache scheme {plan.kv_cache!r} "
            f"(allowed: {', '.join(KV_CACHE_SCHEMES)}, or null)"
        )
    if plan.scheme == NO_WEIGHTS and plan.kv_cache is None:
        raise QuantizeError(
            f"key '{plan.key('scheme')}': {NO_WEIGHTS} leaves the weights as they are, so the plan needs "
            f"'{plan.key('kv_cache')}' (allowed: {', '.join(KV_CACHE_SCHEMES)}), or a weight scheme "
            f"(allowed: {', '.join(x for x in SCHEMES if x != NO_WEIGHTS)})"
        )
    if plan.kv_cache is not None and plan.method == "autoawq":
        raise QuantizeError(
            f"key '{plan.key('kv_cache')}': method autoawq cannot calibrate KV-cache scales "
            "(allowed with kv_cache: awq, rtn)"
        )


def validate_plan(
    plan: Plan, base_dir: Path | None = None, supported_architectures: Sequence[str] | None = None
) -> None:
    """Raise :class:`QuantizeError` for a plan that cannot work, before any model is loaded.

    ``base_dir`` (the base model folder) enables the checks that need the weights' shapes;
    ``supported_architectures`` (the backend's list) enables the architecture check.
    """
    if plan.scheme not in SCHEMES:
        raise QuantizeError(
            f"key '{plan.key('scheme')}': unknown scheme {plan.scheme!r} (allowed: {', '.join(SCHEMES)})"
        )
    if plan.method not in METHODS:
        raise QuantizeError(
            f"key '{plan.key('method')}': unknown method {plan.method!r} (allowed: {', '.join(METHODS)})"
        )
    if plan.scheme not in METHOD_SCHEMES[plan.method]:
        raise QuantizeError(
            f"key '{plan.key('scheme')}': method {plan.method} cannot produce "
            f"{plan.scheme} (allowed with {plan.method}: "
            f"{', '.join(METHOD_SCHEMES[plan.method])}; use method rtn for the others)"
        )
    _validate_kv_cache(plan)
    grouped = plan.scheme in GROUPED_SCHEMES
    if grouped and plan.group_size not in GROUP_SIZES:
        raise QuantizeError(
            f"key '{plan.key('group_size')}': {plan.group_size!r} "
            f"(allowed for {plan.scheme}: {', '.join(map(str, GROUP_SIZES))})"
        )
    cal = plan.calibration
    if plan.needs_calibration and (cal.samples < 1 or cal.seq_len < 8):
        raise QuantizeError(
            f"key '{plan.key('calibration')}': samples >= 1 and seq_len >= 8 needed "
            f"(got samples={cal.samples}, seq_len={cal.seq_len})"
        )
    if plan.max_nll_increase <= 0:
        raise QuantizeError(f"key '{plan.key('max_nll_increase')}': must be > 0 (nats per token)")
    if plan.calibration_dtype not in ("float32", "bfloat16", "float16"):
        raise QuantizeError(
            f"key '{plan.key('calibration_dtype')}': {plan.calibration_dtype!r} (allowed: float32, bfloat16, float16)"
        )
    if base_dir is None:
        return
    base_dir = Path(base_dir)
    if not (base_dir / "config.json").exists():
        raise QuantizeError(f"key '{plan.key('base')}': base model {plan.base!r} at {base_dir} has no config.json")
    arch = architecture(base_dir)
    if supported_architectures is not None and arch not in supported_architectures:
        raise QuantizeError(
            f"key '{plan.key('method')}': method {plan.method} does not support "
            f"architecture {arch} of base model {plan.base!r} (supported: "
            f"{', '.join(sorted(supported_architectures))}; method rtn works for any "
            "model made of Linear layers)"
        )
    linears = quantised_linears(base_dir, plan.ignore)
    if not linears and plan.scheme != NO_WEIGHTS:
        raise QuantizeError(
            f"key '{plan.key('base')}': base model {plan.base!r} has no safetensors "
            f"Linear weights to quantise in {base_dir}"
        )
    if grouped:
        assert plan.group_size is not None
        bad = {m: n for m, n in linears.items() if n % plan.group_size}
        if bad:
            widths = sorted(set(bad.values()))
            fits = [g for g in GROUP_SIZES if all(n % g == 0 for n in linears.values())]
            raise QuantizeError(
                f"key '{plan.key('group_size')}': {plan.group_size} does not divide the in-features "
                f"{', '.join(map(str, widths))} of {len(bad)} layer(s) of {plan.base!r} (e.g. "
                f"{next(iter(bad))}) (allowed for this model: {', '.join(map(str, fits)) or 'none'})"
            )


def _known_model_dir(spec: Mapping[str, Any], manifest: Path) -> Path | None:
    """The base model's folder if it is already on disk (a path: source, or a fetched manifest)."""
    src = str(spec.get("source", ""))
    if src.startswith("path:"):
        d = Path(src[5:]).expanduser()
        return d if (d / "config.json").exists() else None
    with contextlib.suppress(OSError, ValueError, KeyError):
        d = Path(json.loads(Path(manifest).read_text())["model_dir"])
        return d if (d / "config.json").exists() else None
    return None


def _default_manifest(model: str) -> Path:
    return Path(f"resources/models/{model}/manifest.json")


def check_quantize_plans(cfg: Mapping[str, Any], source: str, manifest_of: Any = _default_manifest) -> list[Plan]:
    """Parse-time checks of every ``quantize:`` block of a validated study config: the base is a fetched
    model, and the plan fits it (group size vs layer widths) when the base is already on disk."""
    models = cfg["models"]
    fetched = [m for m, s in models.items() if "quantize" not in s]
    plans = []
    for name, spec in models.items():
        if "quantize" not in spec:
            continue
        plan = Plan.from_config(name, spec["quantize"])
        if plan.base not in fetched:
            raise QuantizeError(
                f"{source}: key '{plan.key('base')}': {plan.base!r} is not a model with a "
                f"source (allowed: {', '.join(fetched) or 'none'})"
            )
        try:
            validate_plan(plan, _known_model_dir(models[plan.base], manifest_of(plan.base)))
        except QuantizeError as e:
            raise QuantizeError(f"{source}: {e}") from None
        plans.append(plan)
    return plans


# ---------------------------------------------------------------------------------------------------------
# Text: calibration windows and held-out text


def read_texts(path: Path, column: str = "text") -> list[str]:
    """A .jsonl file (one object per line, text in ``column``) or a plain text file (one text)."""
    if path.suffix == ".jsonl":
        return [json.loads(line)[column] for line in path.read_text().splitlines() if line.strip()]
    return [path.read_text()]


def calibration_texts(cal: Calibration) -> list[str]:
    if cal.dataset == "builtin":
        return read_texts(CALIBRATION_FILE)
    if cal.dataset.startswith("file:"):
        return read_texts(Path(cal.dataset[5:]).expanduser(), cal.text_column)
    from datasets import load_dataset  # a hub dataset: honours HF_ENDPOINT / HF_DATASETS_OFFLINE

    ds = load_dataset(cal.dataset, split=cal.split)
    texts: list[str] = []
    for row in ds:
        if row.get(cal.text_column):
            texts.append(str(row[cal.text_column]))
        if len(texts) >= cal.samples * 4:  # plenty to fill samples x seq_len windows
            break
    return texts


def token_windows(token_lists: Sequence[Sequence[int]], samples: int, seq_len: int) -> list[list[int]]:
    """Concatenate the tokenised texts and cut ``samples`` windows of ``seq_len`` tokens (wrapping
    around when the texts are shorter than samples x seq_len)."""
    stream = [t for toks in token_lists for t in toks]
    if not stream:
        raise QuantizeError("calibration set is empty")
    need = samples * seq_len
    while len(stream) < need:
        stream = stream + stream
    return [stream[i * seq_len : (i + 1) * seq_len] for i in range(samples)]


# ---------------------------------------------------------------------------------------------------------
# Backends


def _torch_dtype(name: str) -> Any:
    import torch

    return {"float32": torch.float32, "bfloat16": torch.bfloat16, "float16": torch.float16}[name]


def patch_llmcompressor_for_cpu() -> None:
    """llm-compressor's AWQ pins cached activations for faster host->device copies; without an
    accelerator ``pin_memory()`` raises "Cannot access accelerator device when none is available".
    On such a machine pinning buys nothing: make it a no-op."""
    import torch
    from llmcompressor.pipelines.cache import IntermediatesCache

    if torch.accelerator.is_available() or getattr(IntermediatesCache, "_worthit_cpu_patch", False):
        return
    IntermediatesCache.pin_memory = lambda self, batch_index, input_names=None: None  # type: ignore[method-assign]
    IntermediatesCache._worthit_cpu_patch = True  # type: ignore[attr-defined]


def llmcompressor_awq_architectures() -> list[str]:
    from llmcompressor.modifiers.transform.awq import AWQ_DYNAMIC_MAPPING_REGISTRY, AWQ_MAPPING_REGISTRY

    return sorted({*AWQ_MAPPING_REGISTRY, *AWQ_DYNAMIC_MAPPING_REGISTRY})


def llmcompressor_recipe(plan: Plan) -> list[Any]:
    """The current llm-compressor form: the AWQ transform (scale search only) followed by a separate
    QuantizationModifier that owns the scheme and the ignore list."""
    from compressed_tensors.quantization import QuantizationArgs, QuantizationScheme, preset_name_to_scheme
    from llmcompressor.modifiers.quantization import QuantizationModifier

    kv = None if plan.kv_cache is None else QuantizationArgs(**KV_CACHE_SCHEMES[plan.kv_cache])
    if plan.scheme == NO_WEIGHTS:  # the KV-cache scales alone (llm-compressor's e2e test kv_cache_fp8)
        return [QuantizationModifier(kv_cache_scheme=kv, ignore=list(plan.ignore))]
    scheme = preset_name_to_scheme(plan.scheme, ["Linear"])
    if plan.scheme in GROUPED_SCHEMES:
        assert scheme.weights is not None
        scheme = QuantizationScheme(
            targets=["Linear"], weights=scheme.weights.model_copy(update={"group_size": plan.group_size})
        )
    quant = QuantizationModifier(config_groups={"group_0": scheme}, kv_cache_scheme=kv, ignore=list(plan.ignore))
    if plan.method != "awq":
        return [quant]
    from llmcompressor.modifiers.transform.awq import AWQModifier

    return [AWQModifier(duo_scaling=plan.duo_scaling, n_grid=plan.n_grid), quant]


def run_llmcompressor(plan: Plan, base_dir: Path, out: Path) -> dict[str, Any]:
    import torch
    from datasets import Dataset
    from llmcompressor import oneshot
    from transformers import AutoModelForCausalLM, AutoTokenizer

    patch_llmcompressor_for_cpu()
    torch.manual_seed(0)
    tok = AutoTokenizer.from_pretrained(str(base_dir))
    # Calibrate in fp32 on CPU: bf16 matmuls are several times slower without native bf16.
    model = AutoModelForCausalLM.from_pretrained(str(base_dir), dtype=_torch_dtype(plan.calibration_dtype))
    model.eval()
    kwargs: dict[str, Any] = {}
    info: dict[str, Any] = {}
    if plan.needs_calibration:
        cal = plan.calibration
        texts = calibration_texts(cal)
        windows = token_windows(
            [tok(t, add_special_tokens=False)["input_ids"] for t in texts], cal.samples, cal.seq_len
        )
        ds = Dataset.from_dict({"input_ids": windows, "attention_mask": [[1] * len(w) for w in windows]})
        kwargs = dict(
            dataset=ds,
            num_calibration_samples=len(windows),
            max_seq_length=cal.seq_len,
            shuffle_calibration_samples=False,
        )
        info["calibration_tokens"] = sum(len(w) for w in windows)
        info["calibration_texts"] = len(texts)
    oneshot(model=model, recipe=llmcompressor_recipe(plan), **kwargs)
    base_dtype = _base_dtype(base_dir)
    if base_dtype and base_dtype != plan.calibration_dtype:
        # Serve-side dtype is the variant's; keep the unquantised parts (embeddings, norms) as compact
        # as the base checkpoint so "bytes after" compares like with like. This casts what the model holds
        # (its scales too); recast_saved_floats below rewrites what the save still wrote in another dtype.
        model.to(_torch_dtype(base_dtype))
    model.save_pretrained(str(out), save_compressed=True)
    if base_dtype:
        info["recast_tensors"] = recast_saved_floats(out, base_dtype)
    tok.save_pretrained(str(out))
    with contextlib.suppress(Exception):
        model.generation_config.save_pretrained(str(out))
    info["backend"] = "llm-compressor"
    info["backend_version"] = _version("llmcompressor")
    return info


@contextlib.contextmanager
def _autoawq_cpu_backup_fix() -> Iterator[None]:
    """AutoAWQ's scale search backs the block up with ``{k: v.cpu() for k, v in state_dict()}``: on CPU
    ``.cpu()`` returns the same tensor, the in-place scaling rewrites the "backup", and the restore
    restores nothing -- a silently corrupted checkpoint (NLL 12 instead of 3). Clone the backup."""
    from awq.quantize.quantizer import AwqQuantizer  # type: ignore[import-not-found]

    original = AwqQuantizer._search_best_scale

    def patched(
        self: Any,
        module: Any,
        prev_op: Any,
        layers: list[Any],
        inp: Any,
        module2inspect: Any = None,
        kwargs: Any = None,
    ) -> Any:
        target = module2inspect if module2inspect is not None else layers[0]
        cls_state_dict = type(target).state_dict

        def cloned_state_dict(*a: Any, **k: Any) -> Any:
            return {n: v.detach().clone() for n, v in cls_state_dict(target, *a, **k).items()}

        target.state_dict = cloned_state_dict
        try:
            return original(self, module, prev_op, layers, inp, module2inspect, kwargs or {})
        finally:
            del target.state_dict

    AwqQuantizer._search_best_scale = patched
    try:
        yield
    finally:
        AwqQuantizer._search_best_scale = original


def run_autoawq(plan: Plan, base_dir: Path, out: Path) -> dict[str, Any]:
    try:
        from awq import AutoAWQForCausalLM  # type: ignore[import-not-found]
    except Exception as e:  # ImportError, or its pins broken against this env's torch/transformers
        raise NotAvailable(
            "AutoAWQ is not installed in the quantize environment (it is archived; 0.2.9 pins old "
            f"torch/transformers that cannot be met next to llm-compressor): {type(e).__name__}: {e}. "
            "Use method awq (llm-compressor) instead."
        ) from e
    from transformers import AutoTokenizer

    tok = AutoTokenizer.from_pretrained(str(base_dir))
    dtype = _torch_dtype(plan.calibration_dtype)
    model = AutoAWQForCausalLM.from_pretrained(str(base_dir), torch_dtype=dtype)
    cal = plan.calibration
    texts = calibration_texts(cal)
    quant_config = {
        "zero_point": plan.scheme == "W4A16_ASYM",
        "q_group_size": plan.group_size,
        "w_bit": 4,
        "version": "GEMM",
    }
    with _autoawq_cpu_backup_fix():
        model.quantize(
            tok,
            quant_config=quant_config,
            calib_data=texts,
            n_parallel_calib_samples=None,
            max_calib_samples=cal.samples,
            max_calib_seq_len=cal.seq_len,
        )
    model.save_quantized(str(out))
    tok.save_pretrained(str(out))
    return {"backend": "autoawq", "backend_version": _version("autoawq"), "quant_config": quant_config}


def _version(dist: str) -> str | None:
    import importlib.metadata as md

    try:
        return md.version(dist)
    except md.PackageNotFoundError:
        return None


def recast_saved_floats(out: Path, dtype: str) -> int:
    """Rewrite the saved checkpoint's floating tensors in ``dtype`` (the base's), quantisation scales and
    zero points excepted, and make config.json say so; returns how many tensors were cast. ``model.to``
    before the save is not enough on a GPU: the sitting-8 KV-only checkpoint came out in fp32 (twice the
    bf16 base) although the model had been cast (examples/h200-qwen/README.md, "Sitting 8")."""
    import torch
    from safetensors import safe_open
    from safetensors.torch import load_file, save_file

    from worthit.models import record_dtype

    target = _torch_dtype(dtype)
    floats = (torch.float32, torch.float16, torch.bfloat16, torch.float64)
    cast = 0
    for f in sorted(Path(out).glob("*.safetensors")):
        tensors = load_file(str(f))
        todo = [
            k for k, v in tensors.items() if v.dtype in floats and v.dtype != target and not is_quantization_param(k)
        ]
        if not todo:
            continue
        for k in todo:
            tensors[k] = tensors[k].to(target).contiguous()
        with safe_open(str(f), "pt") as h:
            meta = h.metadata() or {"format": "pt"}
        tmp = f.with_name(f.name + ".tmp")
        save_file(tensors, str(tmp), metadata=meta)
        tmp.replace(f)
        cast += len(todo)
    index = Path(out) / "model.safetensors.index.json"
    if cast and index.exists():
        idx = json.loads(index.read_text())
        idx.setdefault("metadata", {})["total_size"] = sum(p.stat().st_size for p in Path(out).glob("*.safetensors"))
        index.write_text(json.dumps(idx, indent=2) + "\n")
    if (Path(out) / "config.json").exists():
        record_dtype(Path(out) / "config.json", dtype)
    return cast


def _base_dtype(model_dir: Path) -> str | None:
    cfg = json.loads((Path(model_dir) / "config.json").read_text())
    d = cfg.get("torch_dtype") or cfg.get("dtype")
    return str(d) if d in ("float32", "bfloat16", "float16") else None


# ---------------------------------------------------------------------------------------------------------
# Quality gate


@dataclass
class GateResult:
    nll_base: float | None
    nll_quantized: float | None
    nll_increase: float | None
    kl: float | None
    tokens: int
    max_nll_increase: float
    max_kl: float | None
    passed: bool
    reason: str = ""
    wall_s: float = 0.0

    def to_dict(self) -> dict[str, Any]:
        return asdict(self)


def _load_for_gate(model_dir: Path) -> Any:
    import torch
    from transformers import AutoModelForCausalLM

    model = AutoModelForCausalLM.from_pretrained(str(model_dir), dtype=torch.float32)
    model.eval()
    return model


def nll_and_kl(
    base_dir: Path | None, quant_dir: Path, texts: Sequence[str], max_tokens: int = 512
) -> tuple[float | None, float, float | None, int]:
    """Mean NLL per token of ``texts`` under the base and the quantised model, and the mean
    KL(base || quantised) of the next-token distributions (nats)."""
    import torch
    from transformers import AutoTokenizer

    tok = AutoTokenizer.from_pretrained(str(quant_dir))
    quant = _load_for_gate(quant_dir)
    base = _load_for_gate(base_dir) if base_dir is not None else None
    nll_b = nll_q = kl = 0.0
    n = 0
    with torch.inference_mode():
        for text in texts:
            ids = tok(text, return_tensors="pt")["input_ids"][:, :max_tokens]
            if ids.shape[1] < 2:
                continue
            target = ids[:, 1:]
            lq = torch.log_softmax(quant(ids).logits[:, :-1].float(), dim=-1)
            nll_q += float(-lq.gather(-1, target[..., None]).sum())
            if base is not None:
                lb = torch.log_softmax(base(ids).logits[:, :-1].float(), dim=-1)
                nll_b += float(-lb.gather(-1, target[..., None]).sum())
                kl += float((lb.exp() * (lb - lq)).sum())
            n += target.numel()
    if n == 0:
        raise QuantizeError("held-out text is empty")
    return (nll_b / n if base is not None else None), nll_q / n, (kl / n if base is not None else None), n


def quality_gate(
    base_dir: Path | None,
    quant_dir: Path,
    max_nll_increase: float,
    max_kl: float | None = None,
    texts: Sequence[str] | None = None,
) -> GateResult:
    """Judge a quantised checkpoint as written to disk against its base model."""
    t0 = time.monotonic()
    texts = list(texts) if texts is not None else read_texts(HELDOUT_FILE)
    nll_b, nll_q, kl, n = nll_and_kl(base_dir, quant_dir, texts)
    inc = None if nll_b is None else nll_q - nll_b
    reasons = []
    if not math.isfinite(nll_q):
        reasons.append(f"held-out NLL of the quantised model is {nll_q}")
    if inc is not None and inc > max_nll_increase:
        reasons.append(
            f"held-out NLL rose by {inc:.3f} nats/token ({nll_b:.3f} -> {nll_q:.3f}), "
            f"above the bound max_nll_increase={max_nll_increase}"
        )
    if kl is not None and max_kl is not None and kl > max_kl:
        reasons.append(f"KL(base || quantised) {kl:.3f} nats/token above the bound max_kl={max_kl}")
    return GateResult(
        nll_base=nll_b,
        nll_quantized=nll_q,
        nll_increase=inc,
        kl=kl,
        tokens=n,
        max_nll_increase=max_nll_increase,
        max_kl=max_kl,
        passed=not reasons,
        reason="; ".join(reasons),
        wall_s=time.monotonic() - t0,
    )


# ---------------------------------------------------------------------------------------------------------
# The stage


def peak_rss_bytes() -> int:
    return int(resource.getrusage(resource.RUSAGE_SELF).ru_maxrss) * 1024  # Linux reports KiB


def model_bytes(model_dir: Path) -> int:
    return sum(p.stat().st_size for p in Path(model_dir).glob("*.safetensors"))


def write_result_manifest(
    out_dir: Path,
    plan: Plan,
    base: Manifest,
    model_dir: Path,
    status: str,
    reason: str,
    quant: Mapping[str, Any],
    gate: GateResult | None,
) -> Manifest:
    """The quantised model's manifest: the usual model manifest (files, hashes, bytes) plus, in
    ``extra``, the quantisation record, the gate's numbers and the status the serve stage obeys."""
    source = f"quantize:{plan.base}:{plan.method}:{plan.scheme}" + (f"+kv_{plan.kv_cache}" if plan.kv_cache else "")
    if (model_dir / "config.json").exists():
        m = build_manifest(plan.name, source, base.hash, model_dir)
    else:
        m = Manifest(
            name=plan.name,
            source=source,
            revision=base.hash,
            model_dir=str(model_dir.resolve()),
            fetched_at=time.time(),
        )
    m.extra.update(
        status=status, reason=reason, quantization=dict(quant), quality_gate=gate.to_dict() if gate else None
    )
    m.write(out_dir / "manifest.json")
    return m


def quantize(plan: Plan, base_manifest: Path, out_dir: Path) -> Manifest:
    """Validate, quantise, gate, write the manifest. Bad input raises :class:`QuantizeError`; a backend
    that is not installed, a crash of the backend or a failed gate are recorded in the manifest."""
    base = Manifest.load(base_manifest)
    base_dir = Path(base.model_dir)
    validate_plan(plan, base_dir)
    if plan.method == "awq":
        validate_plan(plan, base_dir, llmcompressor_awq_architectures())
    elif plan.method == "autoawq":
        validate_plan(plan, base_dir, AUTOAWQ_ARCHITECTURES)
    out_dir.mkdir(parents=True, exist_ok=True)
    model_dir = out_dir / "model"
    staging = out_dir / "model.partial"
    shutil.rmtree(staging, ignore_errors=True)
    quant: dict[str, Any] = {
        "base": plan.base,
        "base_hash": base.hash,
        "scheme": plan.scheme,
        "kv_cache": plan.kv_cache,
        "method": plan.method,
        "group_size": plan.group_size if plan.scheme in GROUPED_SCHEMES else None,
        "ignore": list(plan.ignore),
        "calibration": asdict(plan.calibration) if plan.needs_calibration else None,
        "calibration_dtype": plan.calibration_dtype,
        "bytes_before": model_bytes(base_dir),
    }
    if plan.method == "awq":
        quant.update(n_grid=plan.n_grid, duo_scaling=plan.duo_scaling)
    log.info(
        "quantising %s (%s, %s %s, group %s) -> %s",
        plan.base,
        base_dir,
        plan.method,
        plan.scheme,
        quant["group_size"],
        model_dir,
    )

    def record(status: str, reason: str, gate: GateResult | None = None) -> Manifest:
        return write_result_manifest(out_dir, plan, base, model_dir, status, reason, quant, gate)

    t0 = time.monotonic()
    try:
        runner = run_autoawq if plan.method == "autoawq" else run_llmcompressor
        quant.update(runner(plan, base_dir, staging))
    except NotAvailable as e:
        log.error("%s", e)
        shutil.rmtree(staging, ignore_errors=True)
        return record(STATUS_NOT_AVAILABLE, str(e))
    except Exception as e:  # a backend crash is a failed result, not a crashed study
        log.error("quantisation failed:\n%s", traceback.format_exc())
        shutil.rmtree(staging, ignore_errors=True)
        return record(STATUS_FAILED, f"{plan.method} {plan.scheme} failed: {type(e).__name__}: {e}")
    quant["wall_s"] = round(time.monotonic() - t0, 2)
    quant["peak_rss_bytes"] = peak_rss_bytes()
    quant["bytes_after"] = model_bytes(staging)
    shutil.rmtree(model_dir, ignore_errors=True)
    os.replace(staging, model_dir)
    log.info(
        "quantised in %.1f s, peak RSS %.2f GB, %.1f MB -> %.1f MB",
        quant["wall_s"],
        quant["peak_rss_bytes"] / 1e9,
        quant["bytes_before"] / 1e6,
        quant["bytes_after"] / 1e6,
    )
    try:
        gate = quality_gate(base_dir, model_dir, plan.max_nll_increase, plan.max_kl)
    except Exception as e:  # a checkpoint transformers cannot even load is a failed gate too
        log.error("quality gate could not evaluate the checkpoint:\n%s", traceback.format_exc())
        return record(STATUS_FAILED, f"quality gate could not load or run the checkpoint: {type(e).__name__}: {e}")
    log.info(
        "quality gate: NLL base %.4f, quantised %.4f (+%.4f), KL %.4f over %d tokens: %s",
        gate.nll_base,
        gate.nll_quantized,
        gate.nll_increase,
        gate.kl,
        gate.tokens,
        "passed" if gate.passed else "FAILED: " + gate.reason,
    )
    status = STATUS_OK if gate.passed else STATUS_FAILED
    reason = "" if gate.passed else f"quality gate failed for {plan.name}: {gate.reason}"
    return record(status, reason, gate)


def manifest_status(manifest: Mapping[str, Any]) -> tuple[str, str]:
    """(status, reason) of any model manifest: what :func:`write_result_manifest` put in ``extra``
    (a failed quality gate, a backend that is not available); fetched models carry none and are ok.
    The serve stage refuses any status but ok. Standard library only (the supervisor imports it)."""
    extra = manifest.get("extra") or {}
    return str(extra.get("status") or STATUS_OK), str(extra.get("reason") or "")


def _scheme_label(q: Mapping[str, Any]) -> str | None:
    """The weights' scheme, and the KV-cache scales beside it: "W4A16_ASYM", "NONE + KV fp8"."""
    if not q.get("scheme"):
        return None
    return str(q["scheme"]) + (f" + KV {q['kv_cache']}" if q.get("kv_cache") else "")


def weights_row(manifest: Mapping[str, Any]) -> dict[str, Any]:
    """The comparison table's "weights" facts of one model: scheme, bytes, cost and the gate's numbers."""
    extra = manifest.get("extra") or {}
    q = extra.get("quantization") or {}
    g = extra.get("quality_gate") or {}
    cal = q.get("calibration") or {}
    status, reason = manifest_status(manifest)
    return {
        "model": manifest.get("name"),
        "status": status,
        "reason": reason or None,
        "scheme": _scheme_label(q),
        "method": q.get("method"),
        "group_size": q.get("group_size"),
        "calibration_samples": cal.get("samples"),
        "calibration_seq_len": cal.get("seq_len"),
        "quantize_wall_s": q.get("wall_s"),
        "quantize_peak_rss_gib": (q["peak_rss_bytes"] / 2**30 if q.get("peak_rss_bytes") else None),
        "weight_bytes_before": q.get("bytes_before"),
        "weight_bytes": q.get("bytes_after", manifest.get("weight_bytes")),
        "nll_base": g.get("nll_base"),
        "nll": g.get("nll_quantized"),
        "nll_increase": g.get("nll_increase"),
        "kl": g.get("kl"),
    }


def main(argv: Sequence[str] | None = None) -> int:
    p = argparse.ArgumentParser(
        prog="python -m worthit.quantize", description="Quantise a model (or judge a checkpoint); write its manifest."
    )
    sub = p.add_subparsers(dest="cmd", required=True)
    q = sub.add_parser("run", help="quantise a base model per a quantize: block of the study config")
    q.add_argument("--name", required=True, help="the quantised model's name (a key of models)")
    q.add_argument("--spec", required=True, help="JSON: the model's quantize: block")
    q.add_argument("--base-manifest", required=True, type=Path)
    q.add_argument("--out", required=True, type=Path, help="folder for model/ and manifest.json")
    g = sub.add_parser("gate", help="held-out NLL/KL of a checkpoint against its base model")
    g.add_argument("--model", required=True, type=Path)
    g.add_argument("--base", type=Path, help="base model folder (NLL increase and KL need it)")
    g.add_argument("--max-nll-increase", type=float, default=1.0)
    g.add_argument("--max-kl", type=float)
    ns = p.parse_args(argv)
    logging.basicConfig(level=logging.INFO, format="%(asctime)s %(levelname)s %(message)s", force=True)
    if ns.cmd == "gate":
        res = quality_gate(ns.base, ns.model, ns.max_nll_increase, ns.max_kl)
        print(json.dumps(res.to_dict(), indent=1))
        return 0 if res.passed else 1
    try:
        m = quantize(Plan.from_config(ns.name, json.loads(ns.spec)), ns.base_manifest, ns.out)
    except QuantizeError as e:
        return errors.report("python -m worthit.quantize", e)
    status, reason = manifest_status(asdict(m))
    print(f"{m.name}: {status}{': ' + reason if reason else ''}; manifest {ns.out / 'manifest.json'}")
    return 0


if __name__ == "__main__":
    sys.exit(main())

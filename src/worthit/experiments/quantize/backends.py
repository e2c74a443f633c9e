"""The backends that write a quantised checkpoint (``run_<backend>(plan, base_dir, out) -> record``):

  ``llm-compressor``  methods ``awq`` (the AWQ transform + a separate ``QuantizationModifier``) and ``rtn``;
                      patched on a machine without an accelerator (:func:`patch_llmcompressor_for_cpu`)
  ``autoawq``         only where it is installed, patched for the duration of a run: its CPU weight backup
                      aliases the live tensor and silently corrupts the checkpoint
                      (:func:`_autoawq_cpu_backup_fix`); otherwise :class:`NotAvailable`.

torch, transformers and the backends are imported inside the functions: they exist only in the quantize
environment.
"""

from __future__ import annotations

import contextlib
import json
from collections.abc import Iterator
from pathlib import Path
from typing import Any

from worthit.experiments.quantize.spec import GROUPED_SCHEMES, KV_CACHE_SCHEMES, NO_WEIGHTS, NotAvailable, QuantizePlan
from worthit.experiments.quantize.text import calibration_texts, token_windows
from worthit.models import is_quantization_param


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


def llmcompressor_recipe(plan: QuantizePlan) -> list[Any]:
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


def run_llmcompressor(plan: QuantizePlan, base_dir: Path, out: Path) -> dict[str, Any]:
    import torch
    from datasets import Dataset
    from llmcompressor import oneshot
    from transformers import AutoModelForCausalLM, AutoTokenizer

    patch_llmcompressor_for_cpu()
    torch.manual_seed(0)
    tok = AutoTokenizer.from_pretrained(str(base_dir))
    # Calibrate in fp32 on CPU: bf16 matmuls are several times slower without native bf16. A data-free
    # scheme (round-to-nearest) has no forward pass: the whole model goes to the accelerator where there is
    # one, as llm-compressor's model-loading guide recommends for its data-free pipeline (on a CPU a 7B's
    # rounding and packing took over six minutes; docs/experiments.md). Calibrated schemes keep the model on
    # the host: llm-compressor's sequential pipeline onloads one layer at a time.
    load: dict[str, Any] = {"dtype": _torch_dtype(plan.calibration_dtype)}
    if not plan.needs_calibration and torch.cuda.is_available():
        load["device_map"] = "auto"
    model = AutoModelForCausalLM.from_pretrained(str(base_dir), **load)
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
        *,
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


def run_autoawq(plan: QuantizePlan, base_dir: Path, out: Path) -> dict[str, Any]:
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
    before the save is not enough on a GPU: a KV-only checkpoint calibrated there came out in fp32, twice
    the bf16 base, although the model had been cast (docs/experiments.md, "Weight quantisation")."""
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

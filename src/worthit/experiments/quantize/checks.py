"""The plan checks (:func:`validate_plan`, :func:`check_quantize_plans`): pure, they read the base model's
config.json and safetensors headers, so they run in the workflow environment at parse time and again in
the stage before any work.
"""

from __future__ import annotations

import contextlib
import json
import re
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any

from worthit.experiments.quantize.spec import (
    GROUP_SIZES,
    GROUPED_SCHEMES,
    KV_CACHE_SCHEMES,
    METHOD_SCHEMES,
    METHODS,
    NO_WEIGHTS,
    SCHEMES,
    QuantizeError,
    QuantizePlan,
)
from worthit.models import safetensors_header


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


def _validate_kv_cache(plan: QuantizePlan) -> None:
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
    plan: QuantizePlan, base_dir: Path | None = None, supported_architectures: Sequence[str] | None = None
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


def check_quantize_plans(
    cfg: Mapping[str, Any], source: str, manifest_of: Any = _default_manifest
) -> list[QuantizePlan]:
    """Parse-time checks of every ``quantize:`` block of a validated study config: the base is a fetched
    model, and the plan fits it (group size vs layer widths) when the base is already on disk."""
    models = cfg["models"]
    fetched = [m for m, s in models.items() if "quantize" not in s]
    plans = []
    for name, spec in models.items():
        if "quantize" not in spec:
            continue
        plan = QuantizePlan.from_config(name, spec["quantize"])
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

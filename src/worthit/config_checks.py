"""What the schema cannot check in a study config: cross-references between its sections and the values of the
engine arguments worthit reads itself. Each check raises :class:`~worthit.config.ConfigError` naming the file, the
key and the allowed values; :func:`worthit.config.validate` runs them after the schema.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from worthit import engine_args as eargs
from worthit.config import ConfigError


def named_once(cfg: Mapping[str, Any], source: str) -> None:
    """An accuracy task is evaluated once (a repeated one would be scored twice under one name)."""
    seen: set[str] = set()
    for i, task in enumerate((cfg.get("accuracy") or {}).get("tasks") or []):
        if task["name"] in seen:
            raise ConfigError(
                f"{source}: key 'accuracy.tasks[{i}].name': task {task['name']!r} is listed twice (list it once; "
                "a task's limit and few-shot setting are set on that one entry)"
            )
        seen.add(task["name"])


def quantize_bases(cfg: Mapping[str, Any], source: str) -> None:
    """A ``quantize:`` model's base is another model of the study that has a source (it is fetched, then
    quantised): the plan and the report read its shapes, and the workflow makes it first."""
    fetched = [m for m, spec in cfg["models"].items() if "quantize" not in spec]
    for name, spec in cfg["models"].items():
        base = (spec.get("quantize") or {}).get("base")
        if "quantize" in spec and base not in fetched:
            why = "a model cannot be its own base" if base == name else f"{base!r} is not a model with a source"
            raise ConfigError(
                f"{source}: key 'models.{name}.quantize.base': {why} (allowed: {', '.join(fetched) or 'none'})"
            )


# Engine arguments worthit reads itself (the plan's GPUs and KV pool, the sweet spot, the tune's prunes), with the
# values they take: any other is passed to vLLM as written, and vLLM judges it.
READ_ENGINE_ARGS: dict[str, tuple[type, float, float, str]] = {
    "tensor-parallel-size": (int, 1, float("inf"), "a whole number of GPUs, 1 or more"),
    "pipeline-parallel-size": (int, 1, float("inf"), "a whole number of GPUs, 1 or more"),
    "data-parallel-size": (int, 1, float("inf"), "a whole number of engine replicas, 1 or more"),
    "max-num-seqs": (int, 1, float("inf"), "a whole number of sequences, 1 or more"),
    "gpu-memory-utilization": (float, 1e-9, 1.0, "a fraction of the GPU's memory, above 0 and at most 1"),
}


def _number(value: Any, kind: type) -> float | None:
    """``value`` as ``kind`` (a number, or a string of one, as vLLM's parser takes it), None when it is not one."""
    if isinstance(value, bool):
        return None
    try:
        number = kind(value)
    except (TypeError, ValueError):
        return None
    if kind is int and not isinstance(value, int) and str(value).strip() != str(number):
        return None  # "2.5", "two"
    return float(number)


def engine_args(cfg: Mapping[str, Any], source: str) -> None:
    """The engine arguments worthit reads itself have the values it can read (a traceback in the plan
    otherwise, or a figure per GPU on the wrong count), and a ``speculative-config`` is a mapping or its JSON."""
    places = [("serve.engine_args", cfg["serve"]["engine_args"])]
    places += [(f"variants.{n}.engine_args", v.get("engine_args") or {}) for n, v in cfg["variants"].items()]
    for where, args in places:
        for key, value in args.items():
            name = eargs.flag(key)
            if value is None:
                continue
            if name in READ_ENGINE_ARGS:
                kind, low, high, what = READ_ENGINE_ARGS[name]
                n = _number(value, kind)
                if n is None or not low <= n <= high:
                    raise ConfigError(f"{source}: key '{where}.{key}': {value!r} is not {what}")
            elif name == eargs.SPECULATIVE_CONFIG and not _speculative_config_value(key, value):
                raise ConfigError(
                    f"{source}: key '{where}.{key}': {value!r} is not a speculative config: write a mapping "
                    "(method, num_speculative_tokens, and model for a draft model) or its JSON as a string"
                )


def _speculative_config_value(key: str, value: Any) -> bool:
    """A mapping, or a string of a JSON mapping (as ``vllm serve --speculative-config`` takes it)."""
    return isinstance(value, Mapping) or (isinstance(value, str) and eargs.speculative_config({key: value}) is not None)


def sweet_spot(cfg: Mapping[str, Any], source: str) -> None:
    """A searched variant exists, load-tests, and there is an SLO to search against."""
    from worthit.experiments.sweet_spot.section import section

    searched = section(cfg).variants
    names = ", ".join(cfg["variants"])
    for i, name in enumerate(searched):
        key = f"{source}: key 'sweet_spot.variants[{i}]'"
        if name not in cfg["variants"]:
            raise ConfigError(f"{key}: unknown variant {name!r} (allowed: {names})")
        if "loadtest" not in cfg["variants"][name].get("experiments", ["loadtest"]):
            raise ConfigError(
                f"{key}: variant {name!r} runs no load test (add 'loadtest' to variants.{name}.experiments)"
            )
    slo = cfg.get("slo") or {}
    if searched and slo.get("ttft_ms") is None and slo.get("tpot_ms") is None:
        raise ConfigError(
            f"{source}: key 'sweet_spot.variants': the search looks for the highest concurrency meeting the SLO, "
            "and none is set: set slo.ttft_ms and/or slo.tpot_ms, or empty sweet_spot.variants"
        )


def specdec(cfg: Mapping[str, Any], source: str) -> None:
    from worthit.experiments.specdec.section import section

    sd = section(cfg)
    names = ", ".join(cfg["variants"])
    if sd.base_variant is not None and sd.base_variant not in cfg["variants"]:
        raise ConfigError(
            f"{source}: key 'specdec.base_variant': unknown variant {sd.base_variant!r} (allowed: {names})"
        )
    for spec, draft in sd.draft_variants.items():
        for name in (spec, draft):
            if name not in cfg["variants"]:
                raise ConfigError(
                    f"{source}: key 'specdec.draft_variants.{spec}': unknown variant {name!r} (allowed: {names})"
                )

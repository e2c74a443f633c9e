"""The ``decide:`` section of a study's config as typed values: the one door every reader goes through.

Its defaults are written once, in config/schema.yaml (``decide``): :class:`Rules` takes them from there, so a
``Rules()`` built in code, a config that leaves the section out and the validated config decide alike.
"""

from __future__ import annotations

import functools
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from typing import Any, TypeVar

import yaml

T = TypeVar("T")


@functools.cache
def schema_defaults() -> dict[str, Any]:
    """The ``decide:`` section's defaults from config/schema.yaml (an object's, such as ``knee``, per key)."""
    from worthit.config import SCHEMA_PATH

    doc = yaml.load(SCHEMA_PATH.read_text(), Loader=getattr(yaml, "CSafeLoader", yaml.SafeLoader))
    out: dict[str, Any] = {}
    for key, prop in doc["properties"]["decide"]["properties"].items():
        sub = prop.get("properties")
        out[key] = {k: p.get("default") for k, p in sub.items()} if sub else prop.get("default")
    return out


def _float(v: Any) -> float:
    return float(v)


def _optional_float(v: Any) -> float | None:
    return None if v is None else float(v)


def _floats(v: Any) -> dict[str, float]:
    return {str(k): float(x) for k, x in (v or {}).items()}


def _strs(v: Any) -> dict[str, str]:
    return {str(k): str(x) for k, x in (v or {}).items()}


# How each field reads its key of the section: (key, sub-key of an object or None, conversion).
_READ: dict[str, tuple[str, str | None, Callable[[Any], Any]]] = {
    "max_accuracy_drop_pt": ("max_accuracy_drop_pt", None, _float),
    "max_accuracy_drop_pt_by_task": ("max_accuracy_drop_pt_by_task", None, _floats),
    "min_speedup": ("min_speedup", None, _float),
    "require_significance": ("require_significance", None, bool),
    "min_predicted_speedup": ("min_predicted_speedup", None, _float),
    "exact_tolerance_pct": ("exact_tolerance_pct", None, _float),
    "throughput_tpot_ms": ("throughput_tpot_ms", None, _optional_float),
    "effort": ("effort", None, _strs),
    "max_harm_pct": ("max_harm_pct", None, _float),
    "max_harm_ms": ("max_harm_ms", None, _float),
    "knee_throughput_fraction": ("knee", "throughput_fraction", _float),
    "knee_latency_factor": ("knee", "latency_factor", _float),
}


def _read(section: Mapping[str, Any], name: str) -> Any:
    """Field ``name`` from a ``decide:`` section, the schema's default where the section leaves it out."""
    key, sub, convert = _READ[name]
    d = schema_defaults()[key]
    v = section.get(key, d)
    if sub is not None:
        v = {**d, **(v or {})}[sub]
    return convert(v)


def _default(name: str, convert: Callable[[Any], T]) -> T:
    """A field whose default is the schema's (read when a Rules is built, not when this module is imported)."""
    return field(default_factory=lambda: convert(_read({}, name)))


@dataclass(frozen=True)
class Rules:
    """The ``decide:`` section of the study config (each field's meaning: config/schema.yaml, ``decide``)."""

    max_accuracy_drop_pt: float = _default("max_accuracy_drop_pt", _float)
    max_accuracy_drop_pt_by_task: Mapping[str, float] = _default("max_accuracy_drop_pt_by_task", _floats)
    min_speedup: float = _default("min_speedup", _float)
    require_significance: bool = _default("require_significance", bool)
    min_predicted_speedup: float = _default("min_predicted_speedup", _float)
    exact_tolerance_pct: float = _default("exact_tolerance_pct", _float)
    throughput_tpot_ms: float | None = _default("throughput_tpot_ms", _optional_float)
    effort: Mapping[str, str] = _default("effort", _strs)
    # A shown figure that is demonstrably worse is a harm (it rejects) only beyond both: by more than this
    # many percent and by more than this many ms; within either it is a trade-off (docs/verdicts.md, "Harms").
    max_harm_pct: float = _default("max_harm_pct", _float)
    max_harm_ms: float = _default("max_harm_ms", _float)
    # The knees of the load curves (decide.knee), read by the KV capacity analysis and the plan's comparison.
    knee_throughput_fraction: float = _default("knee_throughput_fraction", _float)
    knee_latency_factor: float = _default("knee_latency_factor", _float)

    @classmethod
    def from_config(cls, cfg: Mapping[str, Any]) -> Rules:
        """The rules of a study config (validated or not: a key it leaves out takes the schema's default)."""
        section = dict(cfg.get("decide") or {})
        return cls(**{name: _read(section, name) for name in _READ})

    def max_drop(self, task: str) -> float:
        return float(self.max_accuracy_drop_pt_by_task.get(task, self.max_accuracy_drop_pt))

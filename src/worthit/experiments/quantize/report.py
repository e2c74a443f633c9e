"""The quantisation stage's report side: how an optimisation's name says what a quantised checkpoint is.

The stage measures nothing itself (its variants' servers are measured by the other experiments), so its
analysis is empty; its hooks name a model it made (``models.<name>.quantize``) in the pair's name and say
whose KV-cache scales it carries, calibrated.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from worthit.experiments.quantize.spec import NO_WEIGHTS
from worthit.report.context import Context
from worthit.report.experiments import Experiment

NAME = "quantize"


def _plan(cfg: Mapping[str, Any], model: str) -> Mapping[str, Any]:
    """``models.<model>.quantize`` of the config, empty for a model the stage does not make."""
    return ((cfg.get("models") or {}).get(model) or {}).get("quantize") or {}


def model_name(cfg: Mapping[str, Any], model: str) -> str | None:
    """ "AWQ W4A16 weights + FP8 KV-cache scales (awq_kv)" for a model the stage makes, else None."""
    q = _plan(cfg, model)
    if not q:
        return None
    kv = f"{str(q['kv_cache']).upper()} KV-cache scales" if q.get("kv_cache") else ""
    if str(q.get("scheme")) == NO_WEIGHTS:
        return f"{kv} ({model})"
    scheme = str(q.get("scheme") or "").replace("_", " ")
    weights = f"{str(q.get('method') or '').upper()} {scheme} weights".strip()
    return f"{weights}{' + ' + kv if kv else ''} ({model})"


def kv_scales_of(cfg: Mapping[str, Any], model: str) -> str | None:
    """The base model whose KV-cache scales a checkpoint the stage makes carries, calibrated on it ("" when
    its config names none), else None (no ``kv_cache`` scheme, or not a model the stage makes)."""
    q = _plan(cfg, model)
    return str(q.get("base") or "") if q.get("kv_cache") else None


def analyse(_ctx: Context) -> None:
    return None


EXPERIMENT = Experiment(NAME, analyse, model_name=model_name, kv_scales_of=kv_scales_of, order=0)

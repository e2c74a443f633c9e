"""The quantisation stage's report side: how an optimisation's name says what a quantised checkpoint is.

The stage measures nothing itself (its variants' servers are measured by the other experiments), so its
analysis is empty; its hooks name a model it made (``models.<name>.quantize``) in the pair's name, say
whose KV-cache scales it carries, calibrated, and add to the verdict of a checkpoint with fewer weight bytes
than its base whether the base's decode step is bound by reading them (:func:`notes`).
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from worthit.experiments.kv.report import NAME as CAPACITY
from worthit.experiments.quantize.spec import NO_WEIGHTS
from worthit.report.context import Context, Pair
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


# A decode step whose bytes read at peak bandwidth take at least this share of it (MBU) is bandwidth-bound:
# fewer weight bytes shorten it. Below, host work and kernel launches set most of it (docs/hardware-results.md:
# a 7B at MBU 67-77 % gained from INT4 weights, a 1.5B at 36-48 % did not).
BANDWIDTH_BOUND_MBU = 0.5


def notes(ctx: Context, _a: None, pair: Pair) -> list[str]:
    """For a checkpoint this stage made from the other side's model with fewer weight bytes (quantised
    weights), one line on the base's decode step at its lowest level: its MBU, whether it is bandwidth-bound,
    and the most fewer bytes could save of it (the bytes' share of the step x the share of them cut, with
    kernels at peak bandwidth), beside the checkpoint's own step."""
    base, made = pair.without, pair.with_
    if str(_plan(ctx.study.cfg, ctx.model(made)).get("base") or "") != ctx.model(base):
        return []
    capacity = ctx.analyses.get(CAPACITY) or {}
    cw, cv = capacity.get(base), capacity.get(made)
    if cw is None or cv is None or not cw.weight_bytes or not cv.weight_bytes or cw.mbu is None:
        return []
    if cw.tpot_ms_p50 is None or cv.weight_bytes >= cw.weight_bytes:
        return []
    cut = 1 - cv.weight_bytes / cw.weight_bytes
    bound = "bandwidth-bound" if cw.mbu >= BANDWIDTH_BOUND_MBU else "not bandwidth-bound (host work and launches)"
    theirs = f"; {made}'s: {cv.tpot_ms_p50:,.2f} ms, MBU {cv.mbu:.0%}" if cv.mbu is not None and cv.tpot_ms_p50 else ""
    return [
        f"{bound}: {base}'s decode step at its lowest level takes {cw.tpot_ms_p50:,.2f} ms at MBU {cw.mbu:.0%}, so "
        f"{cw.weight_bytes / cv.weight_bytes:.1f}x fewer weight bytes can save at most {cw.mbu * cut:.0%} of it "
        f"(kernels at peak bandwidth){theirs}"
    ]


EXPERIMENT = Experiment(NAME, analyse, model_name=model_name, kv_scales_of=kv_scales_of, notes=notes, order=0)

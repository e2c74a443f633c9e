"""Pruning by the plan: what a candidate can reach at most, from :mod:`worthit.plan`'s predictions for its
model, the hardware and its flags, and the two prunes that follow. Bounds, never point guesses:

* **KV capacity**: the predicted KV pool, taken ``kv_margin`` larger (the memory model is an estimate), holds
  at most ``fit`` sequences of the study's prompt + output tokens. A ``max-num-seqs`` above ``fit`` can never
  be used: the candidate is the same as its twin at the largest searched value <= ``fit``, which dominates
  it; it is pruned only where that twin is in the space.
* **Throughput**: output tok/s per GPU is at most the usable concurrency over the decode step's roofline
  floor at peak bandwidth (every weight and each sequence's KV read once a step, or the FLOPs at peak
  tensor throughput); ``c / step(c)`` grows with ``c``, so the usable concurrency gives the largest. A
  candidate whose bound cannot beat the current best's measured lower bound is pruned. Speculative decoding
  can beat the plain-decoding roofline, so such a candidate is never pruned so.
"""

from __future__ import annotations

import math
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

from worthit import engine_args as eargs
from worthit.plan.hardware import Hardware, vllm_defaults
from worthit.plan.predictions import WorkloadShape, predict
from worthit.plan.prerequisites import Subject
from worthit.plan.shapes import ModelShape
from worthit.tune.space import SPEC_SOURCES, VARIANT, Choices, Range, TuneSection, engine_args

MAX_NUM_SEQS = "max-num-seqs"


@dataclass(frozen=True)
class Bound:
    """What the plan says a candidate can reach at most (None: unknown, so no prune rests on it)."""

    kv_tokens: int | None
    tokens_per_request: int
    kv_margin: float
    max_num_seqs: int
    fit_seqs: int | None  # most sequences of prompt + output tokens the pool holds, with the margin
    usable_concurrency: int | None  # min(max-num-seqs, fit, the study's highest load)
    output_tok_per_s_per_gpu_max: float | None


def merge_args(base: Mapping[str, Any], over: Mapping[str, Any]) -> dict[str, Any]:
    out = dict(base)
    for k, v in over.items():
        old = eargs.get(out, k)
        out = eargs.without(out, k)
        out[k] = {**old, **v} if isinstance(old, Mapping) and isinstance(v, Mapping) else v
    return out


def candidate_args(cfg: Mapping[str, Any], values: Mapping[str, Any]) -> tuple[str, dict[str, Any]]:
    """(variant, engine arguments) a candidate serves: serve's, its variant's over them (flag by flag, as
    :class:`worthit.config.Study` merges them), then its own values, merged into a JSON flag's mapping; a
    speculative k of 0 turns speculation off."""
    variant = str(values.get(VARIANT) or cfg.get("baseline_variant") or next(iter(cfg["variants"])))
    args = eargs.merged(cfg["serve"]["engine_args"], cfg["variants"][variant].get("engine_args"))
    return variant, eargs.speculation_zero_off(merge_args(args, engine_args(values)))


def bound(
    shape: ModelShape | None,
    args: Mapping[str, Any],
    hw: Hardware,
    *,
    prompt_tokens: int,
    output_tokens: int,
    kv_margin: float,
    max_load: int | None = None,
) -> Bound:
    """The plan's bound on one candidate (its merged engine arguments ``args``) on ``hw``."""
    tpr = prompt_tokens + output_tokens
    m = int(eargs.get(args, MAX_NUM_SEQS) or vllm_defaults(hw)[1])
    s = Subject("tune", args, shape)
    tp, pp, dp = s.parallel
    wl = WorkloadShape(prompt_tokens, output_tokens, levels=(1,))
    p = predict(s, hw, wl)
    kv = p.get("kv_tokens")
    fit = int(math.floor(kv * dp * (1 + kv_margin) / tpr)) if kv is not None else None
    usable = min(x for x in (m, fit, max_load) if x is not None)
    tok_s: float | None = None
    if not eargs.speculative_config(args) and shape is not None:
        per_replica = max(1, math.ceil(usable / dp))
        at = predict(s, hw, WorkloadShape(prompt_tokens, output_tokens, levels=(per_replica,)))
        floors = dict(zip(at.get("levels") or [], at.get("tpot_floor_ms") or [], strict=False))
        if floors.get(per_replica):
            tok_s = dp * per_replica * 1e3 / floors[per_replica] / (tp * pp * dp)
    return Bound(kv, tpr, kv_margin, m, fit, usable, tok_s)


def _twin(section: TuneSection, fit: int) -> int | None:
    """The largest max-num-seqs of the space at or below ``fit`` (None: none is)."""
    dim = section.space.get(MAX_NUM_SEQS)
    if isinstance(dim, Range):
        if fit < dim.low:
            return None
        step = dim.step or 1
        return int(dim.low + math.floor((fit - dim.low) / step) * step)
    if isinstance(dim, Choices):
        ok = [int(c) for c in dim.choices if isinstance(c, int | float) and not isinstance(c, bool) and c <= fit]
        return max(ok) if ok else None
    return None


def kv_prune(b: Bound, section: TuneSection) -> str | None:
    """Why a candidate's max-num-seqs can never be used (None: it can, or the plan cannot tell)."""
    if b.fit_seqs is None or b.kv_tokens is None or b.max_num_seqs <= b.fit_seqs:
        return None
    twin = _twin(section, b.fit_seqs)
    if twin is None:
        return None
    return (
        f"pruned by the plan (predicted KV pool {b.kv_tokens:,} tokens holds at most {b.fit_seqs} sequences of "
        f"{b.tokens_per_request} tokens, {b.kv_margin:.0%} margin included: max-num-seqs {b.max_num_seqs} can "
        f"never be used; dominated by the same candidate at max-num-seqs {twin})"
    )


def throughput_prune(b: Bound, best_lower_tok_s_per_gpu: float | None) -> str | None:
    """Why a candidate cannot beat the best's measured lower bound of output tok/s per GPU (None: it might)."""
    top = b.output_tok_per_s_per_gpu_max
    if top is None or best_lower_tok_s_per_gpu is None or top >= best_lower_tok_s_per_gpu:
        return None
    return (
        f"pruned by the plan (predicted at most {top:,.0f} output tok/s per GPU at {b.usable_concurrency} "
        f"sequences, the roofline at peak bandwidth; the best's measured lower bound is "
        f"{best_lower_tok_s_per_gpu:,.0f})"
    )


def unservable(variant: str, args: Mapping[str, Any]) -> str | None:
    """Why vLLM would refuse a candidate's merged arguments before the plan is even asked (None: it would
    not): a speculative k with nothing to propose the tokens, e.g. ``num_speculative_tokens`` from the space
    over a variant without a speculative ``method`` or draft ``model``."""
    sc = eargs.speculative_config(args)
    if sc is None or any(sc.get(f) for f in SPEC_SOURCES):
        return None
    return (
        f"not served: speculative k {sc.get('num_speculative_tokens')} over variant '{variant}', which has no "
        "speculative-config method or draft model to propose the tokens (vLLM would refuse to start)"
    )


def screen(b: Bound, section: TuneSection, best_lower_tok_s_per_gpu: float | None = None) -> str | None:
    """Why the plan prunes a candidate before it is served (the KV prune first), None to serve it."""
    return kv_prune(b, section) or throughput_prune(b, best_lower_tok_s_per_gpu)

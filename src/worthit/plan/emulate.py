"""Capacity where memory binds: the KV pool a smaller card would leave a variant, on a large one.

``serve.emulate_gpu_memory_gib`` (or a variant's own ``emulate_gpu_memory_gib``) names a card size; the
variant is served with the KV pool the plan's memory model (:mod:`worthit.plan.memory`) computes for a card
of that size and that model's weights: ``gpu-memory-utilization x card - weights per GPU - the activation
and CUDA-graph overhead vLLM's profiler would reserve there``, passed to vLLM as ``--kv-cache-memory-bytes``
(which makes vLLM skip its own sizing and ignore gpu-memory-utilization). It emulates capacity only: KV
blocks, critical concurrency, preemptions and what they do to goodput are the smaller card's; the speed of
every step (bandwidth, compute) and vLLM's scheduler defaults stay the large card's
(docs/experiments.md, "Capacity of a smaller card"). Standard library only: the supervisor runs it.
"""

from __future__ import annotations

import os
from collections.abc import Mapping
from dataclasses import dataclass, replace
from typing import TYPE_CHECKING, Any

from worthit import engine_args as eargs
from worthit.plan.hardware import Hardware
from worthit.plan.memory import memory_overhead_gib
from worthit.plan.shapes import GIB, ModelShape, PlanError, Quant, dtype_bytes, parallel_sizes, served_dtype

if TYPE_CHECKING:
    from worthit.plan.prerequisites import Subject

KEY = "emulate_gpu_memory_gib"
FLAG = "kv-cache-memory-bytes"
# vLLM's online weight quantisation of an unquantised checkpoint: linear layers at one byte a weight
ONLINE_8BIT = ("fp8", "ptpc_fp8")


class EmulationError(PlanError):
    """The emulated card cannot hold the variant: the message names the key, the model and the numbers."""


def emulated_card(gib: float) -> Hardware:
    """A GPU of ``gib`` GiB as the memory model sees it (its size picks vLLM's default batch, hence the
    activation overhead; nothing else of it is used)."""
    return Hardware(f"a {gib:g} GiB card (emulated)", 1, memory_gib=gib, source=f"{KEY}: {gib:g}")


@dataclass(frozen=True)
class EmulatedPool:
    """The KV memory per GPU a ``card_gib`` card leaves, and the terms it is made of."""

    card_gib: float
    utilization: float
    weight_bytes_per_gpu: float
    overhead_gib: float
    kv_bytes: int

    @property
    def label(self) -> str:
        """What the report prints beside the variant's KV figures."""
        return f"KV pool of a {self.card_gib:g} GiB card (emulated)"

    def describe(self) -> str:
        return (
            f"{self.label}: {self.utilization:g} x {self.card_gib:g} GiB - weights "
            f"{self.weight_bytes_per_gpu / GIB:.2f} GiB - activations and graphs {self.overhead_gib:.2f} GiB = "
            f"{self.kv_bytes / GIB:.2f} GiB per GPU ({FLAG} {self.kv_bytes}); capacity only: the speed is this "
            "machine's"
        )

    def as_record(self) -> dict[str, Any]:
        """The figures for a run's metadata (the server log and state file)."""
        return {
            "card_gib": self.card_gib,
            "gpu_memory_utilization": self.utilization,
            "weight_bytes_per_gpu": self.weight_bytes_per_gpu,
            "overhead_gib": self.overhead_gib,
            "kv_cache_memory_bytes": self.kv_bytes,
            "label": self.label,
        }


def emulated_pool(
    shape: ModelShape,
    args: Mapping[str, Any] | None,
    weight_bytes: float,
    card_gib: float,
    *,
    where: str,
    overhead_gib: float | None = None,
) -> EmulatedPool:
    """The KV pool per GPU of a ``card_gib`` card serving ``shape`` (``weight_bytes`` over all GPUs) with the
    engine arguments ``args``; :class:`EmulationError` naming ``where`` (the config key's place) when the card
    cannot hold the weights and the overhead, or when ``args`` already fix the pool."""
    if card_gib <= 0 or not _finite(card_gib):
        raise EmulationError(f"{where}: {KEY} must be a positive number of GiB, got {card_gib!r}")
    if eargs.get(args, FLAG):
        raise EmulationError(
            f"{where}: {KEY} {card_gib:g} and engine argument {FLAG} {eargs.get(args, FLAG)} both size the KV "
            "pool: keep one"
        )
    tp, pp, _ = parallel_sizes(args)
    util = float(eargs.get(args, "gpu-memory-utilization") or 0.9)
    ovh = overhead_gib if overhead_gib is not None else memory_overhead_gib(shape, args, emulated_card(card_gib))
    per_gpu = weight_bytes / (tp * pp)
    budget = util * card_gib * GIB
    kv = int(budget - per_gpu - ovh * GIB)
    if kv <= 0:
        raise EmulationError(
            f"{where}: {KEY} {card_gib:g}: {shape.source or 'the model'} needs weights {per_gpu / GIB:.2f} GiB + "
            f"activations and graphs {ovh:.2f} GiB = {(per_gpu + ovh * GIB) / GIB:.2f} GiB per GPU, more than "
            f"gpu-memory-utilization {util:g} x {card_gib:g} GiB = {budget / GIB:.2f} GiB: a card of that size cannot "
            f"hold it (raise {KEY}, or drop it for this variant)"
        )
    return EmulatedPool(card_gib, util, per_gpu, ovh, kv)


def served_weights(s: Subject, cpu: bool = False) -> int:
    """Weight bytes the variant's server holds: the checkpoint's (or the shapes') as served, except that an
    unquantised checkpoint served with ``quantization: fp8`` (vLLM quantises its linear layers to FP8 while
    loading) holds those layers at one byte a weight."""
    weights = s.weights(cpu)[0] or 0
    method = str(eargs.get(s.args, "quantization") or "").lower()
    if s.shape is not None and s.shape.quant is None and method in ONLINE_8BIT:
        served = dtype_bytes(served_dtype(s.shape, s.args, cpu)) or 2
        return replace(s.shape, quant=Quant(method, 8, None)).weight_bytes(served)
    return int(weights)


def _finite(x: float) -> bool:
    return x == x and x not in (float("inf"), float("-inf"))


def serve_args(
    args: Mapping[str, Any] | None,
    model_dir: str | os.PathLike[str],
    card_gib: float,
    *,
    where: str,
) -> tuple[dict[str, Any], EmulatedPool]:
    """``args`` with ``--kv-cache-memory-bytes`` set to the pool a ``card_gib`` card leaves the model in
    ``model_dir`` (its config.json and its weight files as served), and that pool."""
    from worthit.plan.prerequisites import serving_subject  # prerequisites builds on memory, as this does

    s = serving_subject(args, model_dir)
    weights = served_weights(s)
    if s.shape is None or not weights:
        raise EmulationError(
            f"{where}: {KEY} {card_gib:g}: {os.fspath(model_dir)}/config.json or its weight files are missing or "
            "unreadable: the emulated KV pool needs the model's shapes and weight bytes"
        )
    pool = emulated_pool(s.shape, args, weights, card_gib, where=where)
    return {**dict(args or {}), FLAG: pool.kv_bytes}, pool

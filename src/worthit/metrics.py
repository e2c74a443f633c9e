"""Serving metrics, defined as vLLM's benchmark defines them (DESIGN §9).

Pure functions over per-request records: no I/O, no clocks. TTFT = first content chunk - start;
E2E = last content chunk - start; TPOT = (E2E - TTFT) / (output_tokens - 1), output tokens from the
server's ``usage``; ITL = gaps between content chunks; goodput = requests (and their output tokens)
meeting every SLO, divided by the duration. Percentiles interpolate linearly (numpy's default).
"""

from __future__ import annotations

import math
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, field

import numpy as np

from worthit.stats import median_ci95

PERCENTILES = (50, 90, 99)


def tpot_ms(ttft_ms: float | None, e2e_ms: float | None, output_tokens: int) -> float | None:
    """Time per output token after the first; undefined (None) for fewer than two tokens."""
    if ttft_ms is None or e2e_ms is None or output_tokens < 2:
        return None
    return (e2e_ms - ttft_ms) / (output_tokens - 1)


def percentile(values: Sequence[float], q: float) -> float | None:
    """Linear-interpolated percentile; None for no values."""
    vals = [v for v in values if v is not None and not math.isnan(v)]
    if not vals:
        return None
    return float(np.percentile(np.asarray(vals, dtype=float), q))


@dataclass(frozen=True)
class Stat:
    """A distribution summary that carries its sample size."""

    n: int
    mean: float | None
    p50: float | None
    p90: float | None
    p99: float | None
    ci95_low: float | None = None
    ci95_high: float | None = None

    @classmethod
    def of(cls, values: Iterable[float | None]) -> Stat:
        vals = [float(v) for v in values if v is not None and not math.isnan(float(v))]
        if not vals:
            return cls(0, None, None, None, None)
        arr = np.asarray(vals)
        lo, hi = median_ci95(vals)
        return cls(
            n=len(vals),
            mean=float(arr.mean()),
            p50=percentile(vals, 50),
            p90=percentile(vals, 90),
            p99=percentile(vals, 99),
            ci95_low=lo,
            ci95_high=hi,
        )


@dataclass(frozen=True)
class Slo:
    """Service-level objectives a request must all meet to count towards goodput (None = unbounded)."""

    ttft_ms: float | None = None
    tpot_ms: float | None = None
    e2e_ms: float | None = None

    def met(self, r: Mapping[str, object]) -> bool:
        if not r.get("success"):
            return False
        for key, bound in (("ttft_ms", self.ttft_ms), ("tpot_ms", self.tpot_ms), ("e2e_ms", self.e2e_ms)):
            if bound is None:
                continue
            value = r.get(key)
            if key == "tpot_ms" and value is None:  # single-token outputs have no TPOT to violate
                continue
            if value is None or float(value) > bound:  # type: ignore[arg-type]
                return False
        return True


@dataclass(frozen=True)
class LevelSummary:
    """One load level reduced to the study's figures."""

    n: int
    n_errors: int
    duration_s: float | None
    output_tok_per_s: float | None
    requests_per_s: float | None
    goodput_tok_per_s: float | None
    goodput_requests_per_s: float | None
    ttft_ms: Stat
    tpot_ms: Stat
    itl_ms: Stat
    e2e_ms: Stat
    errors: dict[str, int] = field(default_factory=dict)


def summarize(records: Sequence[Mapping[str, object]], slo: Slo | None = None) -> LevelSummary:
    """Reduce per-request records (columns of the ``load_requests`` table) to a :class:`LevelSummary`.

    Duration runs from the first request's start to the last request's end, errors included, so a
    level that stalls on failing requests shows lower throughput rather than hiding it.
    """
    slo = slo or Slo()
    ok = [r for r in records if r.get("success")]
    errors: dict[str, int] = {}
    for r in records:
        if not r.get("success"):
            reason = str(r.get("error") or "unknown")[:120]
            errors[reason] = errors.get(reason, 0) + 1
    ends = [
        float(r["start_s"]) + float(r["e2e_ms"]) / 1e3  # type: ignore[arg-type]
        for r in records
        if r.get("e2e_ms") is not None
    ]
    starts = [float(r["start_s"]) for r in records]  # type: ignore[arg-type]
    duration = (max(ends) - min(starts)) if ends and starts else None
    out_tokens = sum(int(r.get("output_tokens") or 0) for r in ok)  # type: ignore[call-overload]
    good = [r for r in ok if slo.met(r)]
    good_tokens = sum(int(r.get("output_tokens") or 0) for r in good)  # type: ignore[call-overload]

    def rate(x: float) -> float | None:
        return x / duration if duration and duration > 0 else None

    itl: list[float] = []
    for r in ok:
        itl.extend(float(g) for g in (r.get("itl_ms") or []))  # type: ignore[union-attr]
    return LevelSummary(
        n=len(records),
        n_errors=len(records) - len(ok),
        duration_s=duration,
        output_tok_per_s=rate(out_tokens),
        requests_per_s=rate(len(ok)),
        goodput_tok_per_s=rate(good_tokens),
        goodput_requests_per_s=rate(len(good)),
        ttft_ms=Stat.of(r.get("ttft_ms") for r in ok),  # type: ignore[misc]
        tpot_ms=Stat.of(r.get("tpot_ms") for r in ok),  # type: ignore[misc]
        itl_ms=Stat.of(itl),
        e2e_ms=Stat.of(r.get("e2e_ms") for r in ok),  # type: ignore[misc]
        errors=errors,
    )


def prometheus_delta(before: Mapping[str, float], after: Mapping[str, float]) -> dict[str, float]:
    """Counter increases over a run (counters absent before count from zero)."""
    return {k: after[k] - before.get(k, 0.0) for k in after}

"""Serving metrics, defined as vLLM's benchmark defines them (docs/architecture.md, "Definitions").

Pure functions over per-request records: no I/O, no clocks. A token chunk is a streamed chunk that carries a
choice, its text empty or not (vLLM sends empty text when a token ends inside a multi-byte character), as
``vllm bench serve`` counts them. TTFT = first token chunk - start; E2E = last token chunk - start;
TPOT = (E2E - TTFT) / (output_tokens - 1), output tokens from the server's ``usage`` (undefined where all
tokens arrived at once, E2E = TTFT); ITL = gaps between token
chunks; goodput = requests (and their output tokens)
meeting every SLO, divided by the duration. Percentiles interpolate linearly (numpy's default).

Records are a ``load_requests`` Arrow table or a sequence of row dicts; either way they are reduced as
columns (numpy over Arrow buffers), never row by row in Python, so a level of 100,000 requests and
their inter-token gaps summarises in tens of milliseconds.
"""

from __future__ import annotations

import itertools
from collections import Counter
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any, TypeAlias

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc

from worthit.stats import median_ci95

PERCENTILES = (50, 90, 99)
BOOTSTRAP_BLOCK_VALUES = 4_000_000  # resampled indices drawn at once (32 MB of int64)

Records: TypeAlias = pa.Table | Sequence[Mapping[str, Any]]


def tpot_ms(ttft_ms: float | None, e2e_ms: float | None, output_tokens: int) -> float | None:
    """Time per output token after the first; undefined (None) for fewer than two tokens, and where every
    token arrived with the first (E2E = TTFT: one network read, or one event, brought the whole stream, so
    no time between tokens was observed; ``vllm bench serve`` would count it as 0 ms and pull the median
    down with a decode speed no engine has: seen when the client's process waited for a CPU)."""
    if ttft_ms is None or e2e_ms is None or output_tokens < 2 or e2e_ms <= ttft_ms:
        return None
    return (e2e_ms - ttft_ms) / (output_tokens - 1)


def present(values: Iterable[float | None] | np.ndarray | pa.Array | pa.ChunkedArray) -> np.ndarray:
    """The values as float64, missing ones (None, null, NaN) dropped, order kept."""
    arr: np.ndarray
    if isinstance(values, pa.Array | pa.ChunkedArray):
        arr = pc.cast(values, pa.float64()).to_numpy(zero_copy_only=False)
    elif isinstance(values, np.ndarray):
        arr = values.astype(np.float64, copy=False)
    else:
        arr = np.asarray(values if isinstance(values, Sequence) else list(values), dtype=np.float64)
    nan = np.isnan(arr)
    return arr[~nan] if nan.any() else arr


def percentile(values: Iterable[float | None] | np.ndarray, q: float) -> float | None:
    """Linear-interpolated percentile; None for no values."""
    arr = present(values)
    return float(np.percentile(arr, q)) if arr.size else None


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
    def of(cls, values: Iterable[float | None] | np.ndarray | pa.Array | pa.ChunkedArray) -> Stat:
        arr = present(values)
        if not arr.size:
            return cls(0, None, None, None, None)
        p50, p90, p99 = (float(p) for p in np.percentile(arr, PERCENTILES))
        lo, hi = median_ci95(arr)
        return cls(n=int(arr.size), mean=float(arr.mean()), p50=p50, p90=p90, p99=p99, ci95_low=lo, ci95_high=hi)


@dataclass(frozen=True)
class Columns:
    """The columns of per-request records that the metrics read, as numpy arrays (NaN where missing)."""

    start_s: np.ndarray
    ttft_ms: np.ndarray
    tpot_ms: np.ndarray
    e2e_ms: np.ndarray
    null: dict[str, np.ndarray]  # per latency column: value missing (None / null; a NaN is present)
    output_tokens: np.ndarray  # int64, 0 where missing
    success: np.ndarray  # bool
    itl_ms: np.ndarray  # the successful requests' gaps, flattened in request order
    failure_reasons: list[Any]  # the error column of the failed requests, in order

    @property
    def n(self) -> int:
        return int(self.success.size)

    @classmethod
    def of(cls, records: Records) -> Columns:
        if isinstance(records, pa.Table):
            return cls._of_table(records)
        return cls._of_rows(records)

    @classmethod
    def _of_table(cls, t: pa.Table) -> Columns:
        def col(name: str, typ: pa.DataType) -> pa.ChunkedArray:
            return t.column(name) if name in t.column_names else pa.chunked_array([pa.nulls(t.num_rows, typ)])

        def floats(name: str) -> np.ndarray:
            out: np.ndarray = pc.cast(col(name, pa.float64()), pa.float64()).to_numpy(zero_copy_only=False)
            return out

        success = pc.fill_null(col("success", pa.bool_()), False).to_numpy(zero_copy_only=False).astype(bool)
        itl = col("itl_ms", pa.list_(pa.float64()))
        lengths = pc.fill_null(pc.list_value_length(itl), 0).to_numpy(zero_copy_only=False)
        gaps = pc.list_flatten(itl).to_numpy(zero_copy_only=False).astype(np.float64, copy=False)
        errors = pc.filter(col("error", pa.string()), pa.array(~success)).to_pylist()
        latency = ("ttft_ms", "tpot_ms", "e2e_ms")
        return cls(
            start_s=floats("start_s"),
            ttft_ms=floats("ttft_ms"),
            tpot_ms=floats("tpot_ms"),
            e2e_ms=floats("e2e_ms"),
            null={k: col(k, pa.float64()).is_null().to_numpy(zero_copy_only=False) for k in latency},
            output_tokens=pc.fill_null(pc.cast(col("output_tokens", pa.int64()), pa.int64()), 0).to_numpy(
                zero_copy_only=False
            ),
            success=success,
            itl_ms=gaps[np.repeat(success, lengths)],
            failure_reasons=errors,
        )

    @classmethod
    def _of_rows(cls, rows: Sequence[Mapping[str, Any]]) -> Columns:
        n = len(rows)
        success = np.fromiter((bool(r.get("success")) for r in rows), dtype=bool, count=n)

        def floats(name: str) -> np.ndarray:
            return np.asarray([r.get(name) for r in rows], dtype=np.float64).reshape(n)

        gaps = itertools.chain.from_iterable(r.get("itl_ms") or () for r, ok in zip(rows, success, strict=True) if ok)
        return cls(
            start_s=np.asarray([r["start_s"] for r in rows], dtype=np.float64).reshape(n),
            ttft_ms=floats("ttft_ms"),
            tpot_ms=floats("tpot_ms"),
            e2e_ms=floats("e2e_ms"),
            null={
                k: np.fromiter((r.get(k) is None for r in rows), dtype=bool, count=n)
                for k in ("ttft_ms", "tpot_ms", "e2e_ms")
            },
            output_tokens=np.fromiter((int(r.get("output_tokens") or 0) for r in rows), dtype=np.int64, count=n),
            success=success,
            itl_ms=np.fromiter((np.nan if g is None else g for g in gaps), dtype=np.float64),
            failure_reasons=[r.get("error") for r, ok in zip(rows, success, strict=True) if not ok],
        )


@dataclass(frozen=True)
class Slo:
    """Service-level objectives a request must all meet to count towards goodput (None = unbounded)."""

    ttft_ms: float | None = None
    tpot_ms: float | None = None
    e2e_ms: float | None = None

    def met(self, r: Mapping[str, Any]) -> bool:
        """One request: successful, and within every bound (see :meth:`met_mask`, the same rule over columns)."""
        if not r.get("success"):
            return False
        for key, bound in (("ttft_ms", self.ttft_ms), ("tpot_ms", self.tpot_ms), ("e2e_ms", self.e2e_ms)):
            if bound is None:
                continue
            value = r.get(key)
            if key == "tpot_ms" and value is None:  # single-token outputs have no TPOT to violate
                continue
            if value is None or float(value) > bound:
                return False
        return True

    @classmethod
    def from_config(cls, section: Mapping[str, Any] | None) -> Slo:
        """The study's ``slo:`` section (keys it does not know, and a missing section, are ignored)."""
        return cls(**{k: v for k, v in (section or {}).items() if k in ("ttft_ms", "tpot_ms", "e2e_ms")})

    @property
    def interactive(self) -> bool:
        """Whether a level can be judged against it: a TTFT or TPOT bound is set."""
        return self.ttft_ms is not None or self.tpot_ms is not None

    def level_met(self, ttft_p99_ms: float | None, tpot_p99_ms: float | None) -> bool | None:
        """A load level meets the SLO when its P99 TTFT and P99 TPOT do (None: no TTFT or TPOT bound set).
        A level without a TTFT fails a TTFT bound; one without a TPOT (single-token outputs) has none to fail.
        The one rule for the latency-first verdicts, the deployment and the sweet-spot search."""
        if not self.interactive:
            return None
        ok = True
        if self.ttft_ms is not None:
            ok &= ttft_p99_ms is not None and ttft_p99_ms <= self.ttft_ms
        if self.tpot_ms is not None:
            ok &= tpot_p99_ms is None or tpot_p99_ms <= self.tpot_ms
        return ok

    def met_mask(self, records: Records | Columns) -> np.ndarray:
        """Per request, whether it met every objective (:meth:`met` over columns): a missing TTFT or E2E
        fails its bound, a missing TPOT (one output token) has none to violate."""
        c = records if isinstance(records, Columns) else Columns.of(records)
        mask = c.success.copy()
        for key, values, bound in (
            ("ttft_ms", c.ttft_ms, self.ttft_ms),
            ("tpot_ms", c.tpot_ms, self.tpot_ms),
            ("e2e_ms", c.e2e_ms, self.e2e_ms),
        ):
            if bound is None:
                continue
            within = ~(values > bound)  # NaN compares False: a NaN value is not over the bound
            mask &= within if key == "tpot_ms" else within & ~c.null[key]
        return mask


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


def summarize(records: Records | Columns, slo: Slo | None = None) -> LevelSummary:
    """Reduce per-request records (the ``load_requests`` table, or its rows) to a :class:`LevelSummary`.

    Duration runs from the first request's start to the last request's end, errors included, so a
    level that stalls on failing requests shows lower throughput rather than hiding it.
    """
    slo = slo or Slo()
    c = records if isinstance(records, Columns) else Columns.of(records)
    ok = c.success
    has_end = ~c.null["e2e_ms"]
    duration = (
        float(np.max(c.start_s[has_end] + c.e2e_ms[has_end] / 1e3) - np.min(c.start_s)) if has_end.any() else None
    )
    good = slo.met_mask(c)
    n_ok, n_good = int(ok.sum()), int(good.sum())
    out_tokens, good_tokens = int(c.output_tokens[ok].sum()), int(c.output_tokens[good].sum())

    def rate(x: float) -> float | None:
        return x / duration if duration and duration > 0 else None

    return LevelSummary(
        n=c.n,
        n_errors=c.n - n_ok,
        duration_s=duration,
        output_tok_per_s=rate(out_tokens),
        requests_per_s=rate(n_ok),
        goodput_tok_per_s=rate(good_tokens),
        goodput_requests_per_s=rate(n_good),
        ttft_ms=Stat.of(c.ttft_ms[ok]),
        tpot_ms=Stat.of(c.tpot_ms[ok]),
        itl_ms=Stat.of(c.itl_ms),
        e2e_ms=Stat.of(c.e2e_ms[ok]),
        errors=dict(Counter(str(e or "unknown")[:120] for e in c.failure_reasons)),
    )


def bootstrap_ratio_ci95(
    numerator: Sequence[float] | np.ndarray,
    denominator: Sequence[float] | np.ndarray,
    resamples: int = 1000,
    seed: int = 0,
) -> tuple[float, float] | None:
    """95% percentile-bootstrap interval of sum(numerator) / sum(denominator) over rows resampled with
    replacement, as multiples of the point estimate (e.g. (0.93, 1.06)); None without a positive ratio.

    Seeded (``numpy.random.default_rng(seed)``, ``resamples`` x n indices drawn row-major), vectorised, and
    drawn in blocks of about :data:`BOOTSTRAP_BLOCK_VALUES` indices so memory stays bounded at any n: the
    interval is the same as from drawing all resamples at once.
    """
    num, den = np.asarray(numerator, dtype=np.float64), np.asarray(denominator, dtype=np.float64)
    n = num.size
    if not n or num.sum() <= 0 or den.sum() <= 0:
        return None
    point = num.sum() / den.sum()
    rng = np.random.default_rng(seed)
    rows_per_block = max(1, BOOTSTRAP_BLOCK_VALUES // n)
    boot = np.empty(resamples, dtype=np.float64)
    for start in range(0, resamples, rows_per_block):
        stop = min(resamples, start + rows_per_block)
        idx = rng.integers(0, n, size=(stop - start, n))
        boot[start:stop] = num[idx].sum(axis=1) / np.maximum(den[idx].sum(axis=1), 1e-12)
    lo, hi = np.percentile(boot / point, [2.5, 97.5])
    return float(lo), float(hi)


def prometheus_delta(before: Mapping[str, float], after: Mapping[str, float]) -> dict[str, float]:
    """Counter increases over a run (counters absent before count from zero)."""
    return {k: after[k] - before.get(k, 0.0) for k in after}

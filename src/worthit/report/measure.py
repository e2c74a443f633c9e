"""A reported figure: its value, the sample behind it, its 95% interval and what that interval rests on.

Every number the report shows is a :class:`Measure`. Its ``basis`` says why a reader may trust the
interval: independent runs of the level (``3 runs``), the spread within one run (``single run``: the
run-to-run variation is not in it), an exact count read from the engine (``exact count``: no interval
is needed), or, when there is no interval, the reason (``why_none``). A mean over runs whose interval uses
the study's pooled run-to-run spread carries its log-scale standard error and degrees of freedom, so that a
ratio of two such means is a t-interval on the pooled degrees of freedom (docs/statistics.md).
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass, replace

import numpy as np

from worthit.metrics import bootstrap_ratio_ci95, percentile
from worthit.stats import (
    Z_95,
    PooledSpread,
    SpreadCell,
    heterogeneity_p,
    positive_mean_ci95,
    quantile_ci95,
    t_quantile,
    welch_df,
)

SINGLE_RUN = "single run"
EXACT = "exact count"


SMALL_SAMPLE = 20  # a single run's values are kept up to this many, for an exact test between two small samples


def runs_basis(runs: int) -> str:
    return f"{runs} runs"


def runs_in(basis: str) -> int | None:
    """The number of runs a basis names ("2 runs; run-to-run spread pooled ..." -> 2), None otherwise."""
    head = basis.split(maxsplit=1)
    return int(head[0]) if len(head) == 2 and head[0].isdigit() and head[1].startswith("runs") else None


@dataclass(frozen=True)
class Measure:
    value: float | None
    n: int = 0  # requests, items or runs behind the value
    low: float | None = None
    high: float | None = None
    basis: str = ""  # runs_basis(k), SINGLE_RUN or EXACT; "" without an interval
    why_none: str = ""  # why there is no interval
    # A t-interval on the log scale whose pieces are known (a mean over runs with the pooled spread): the
    # standard error of log(value), its degrees of freedom, and the pool it came from (same pool: same df).
    log_se: float | None = None
    df: float | None = None
    pool: PooledSpread | None = None
    values: tuple[float, ...] = ()  # a small single run's values (an exact test between two of them)
    method: str = ""  # how the interval was made where it is not the usual way (an exact small-sample test)

    @classmethod
    def exact(cls, value: float | None, n: int = 1) -> Measure:
        return cls(None if value is None else float(value), n, value, value, EXACT)

    @classmethod
    def none(cls, value: float | None, n: int, why: str) -> Measure:
        return cls(value, n, why_none=why)

    @property
    def is_exact(self) -> bool:
        return self.basis == EXACT

    @property
    def known(self) -> bool:
        return self.value is not None and not math.isnan(self.value)

    def interval(self) -> tuple[float, float] | None:
        if not self.known or self.low is None or self.high is None:
            return None
        return (self.low, self.high)

    @property
    def single_run(self) -> bool:
        return self.basis == SINGLE_RUN

    def scaled(self, factor: float) -> Measure:
        """The same figure in other units (x 100 for a percentage)."""

        def s(x: float | None) -> float | None:
            return None if x is None else x * factor

        lo, hi = s(self.low), s(self.high)
        if lo is not None and hi is not None and lo > hi:
            lo, hi = hi, lo
        return replace(self, value=s(self.value), low=lo, high=hi)

    def text(self, digits: int = 1, unit: str = "") -> str:
        """``12.3 ms [11.0, 14.1] n=64, single run``; an exact count has no brackets."""
        if not self.known:
            return "n/a"
        assert self.value is not None
        out = f"{self.value:,.{digits}f}{unit}"
        if self.is_exact:
            return f"{out} ({EXACT})"
        iv = self.interval()
        out += f" [{iv[0]:,.{digits}f}, {iv[1]:,.{digits}f}]" if iv else " [no interval]"
        tail = [f"n={self.n}"] if self.n else []
        tail += [self.basis or self.why_none] if (self.basis or self.why_none) else []
        return out + (" " + ", ".join(tail) if tail else "")


def _clean(values: Sequence[float | None]) -> list[float]:
    return [float(v) for v in values if v is not None and not math.isnan(float(v))]


def quantile(values: Sequence[float | None], q: float) -> Measure:
    """The q-quantile of one run's values with its distribution-free 95% interval (order statistics).

    The estimate interpolates linearly (numpy's default); the interval is clipped to contain it, since
    the order statistics bracket a population quantile, not the interpolated sample one.
    """
    vals = _clean(values)
    if not vals:
        return Measure(None, 0)
    est = percentile(vals, q * 100)
    lo, hi = quantile_ci95(vals, q)
    kept = tuple(vals) if len(vals) <= SMALL_SAMPLE else ()
    if lo is None or hi is None:
        side = "both sides" if lo is None and hi is None else ("above" if hi is None else "below")
        return replace(
            Measure.none(est, len(vals), f"{len(vals)} values cannot bound P{q * 100:g} {side}"), values=kept
        )
    assert est is not None
    return Measure(est, len(vals), min(lo, est), max(hi, est), SINGLE_RUN, values=kept)


def over_runs(per_run: Sequence[float | None], n: int) -> Measure:
    """The mean of one positive figure (a latency, a rate) over independent runs with a Student t 95% interval
    on the log scale (:func:`worthit.stats.positive_mean_ci95`: never below zero); ``n`` = requests behind it."""
    vals = _clean(per_run)
    mean, lo, hi = positive_mean_ci95(vals)
    if mean is None:
        return Measure(None, n)
    if lo is None or hi is None:
        return Measure.none(mean, n, "one run")
    return Measure(mean, n, lo, hi, runs_basis(len(vals)))


def pooled_over_runs(per_run: Sequence[float | None], n: int, pool: PooledSpread | None, cell: str = "") -> Measure:
    """The mean of a positive figure over independent runs with the study's pooled run-to-run spread: the
    t-interval exp(mean(log x) +- t(df_pool) s_pool / sqrt(k)), widened to contain the arithmetic mean.

    The cell keeps its own interval (:func:`over_runs`) where there is no pool, where it was left out of the
    pool (its spread is far outside the rest's: the reason is said), or where its own runs carry at least as
    many degrees of freedom as the pool."""
    vals = _clean(per_run)
    own = over_runs(vals, n)
    if pool is None or len(vals) < 2 or min(vals) <= 0 or len(vals) - 1 >= pool.df:
        return own
    k = len(vals)
    mine = SpreadCell(cell, tuple(vals))
    if cell in pool.outliers:
        p = heterogeneity_p(mine, pool.var_log, pool.df)
        ratio_sd = math.sqrt(mine.var_log / pool.var_log) if pool.var_log > 0 else math.inf
        why = f"own run-to-run spread: x{ratio_sd:.1f} the pool's sd (F test p = {p:.2g} < 0.01)"
        return replace(own, basis=f"{own.basis}; {why}" if own.basis else own.basis, why_none=own.why_none)
    mean = float(np.mean(vals))
    centre = float(np.mean(np.log(vals)))
    se = pool.sd_log / math.sqrt(k)
    half = t_quantile(pool.df) * se
    return Measure(
        mean,
        n,
        min(mean, math.exp(centre - half)),
        max(mean, math.exp(centre + half)),
        f"{runs_basis(k)}; {pool.describe()}",
        log_se=se,
        df=pool.df,
        pool=pool,
    )


def bootstrap_rate(
    tokens: Sequence[float], latency_s: Sequence[float], measured: float | None, resamples: int = 1000, *, seed: int = 0
) -> Measure:
    """A closed loop's token rate within one run: the bootstrap interval of tokens / latency over requests
    (Little's law), scaled to the measured rate."""
    n = len(tokens)
    if measured is None:
        return Measure(None, n)
    if n < 6:
        return Measure.none(measured, n, f"{n} requests are too few for a bootstrap")
    tok, lat = np.asarray(tokens, dtype=float), np.asarray(latency_s, dtype=float)
    if lat.sum() <= 0 or tok.sum() <= 0:
        return Measure(measured, n, measured, measured, SINGLE_RUN) if measured == 0 else Measure.none(measured, n, "")
    ratio = bootstrap_ratio_ci95(tok, lat, resamples, seed)  # in blocks: bounded memory at any n
    assert ratio is not None  # both sums are positive
    return Measure(measured, n, measured * ratio[0], measured * ratio[1], SINGLE_RUN)


def combined_basis(*ms: Measure) -> str:
    """What an interval computed from several measures rests on: the weakest of them."""
    bases = [m.basis for m in ms if m.known]
    if not bases or any(not b for b in bases):
        return ""
    if all(b == EXACT for b in bases):
        return EXACT
    if any(b == SINGLE_RUN for b in bases):
        return SINGLE_RUN
    runs = [(runs_in(b) or 0, b) for b in bases if b != EXACT]
    return min(runs)[1]


def basis_class(m: Measure) -> str:
    """What a figure's interval rests on, without the pool's particulars: "exact count", "3 runs", "3 runs,
    run-to-run spread pooled", "single run", "single run + pooled run-to-run spread"."""
    b = m.basis
    if b == EXACT or not b:
        return b
    k = runs_in(b)
    if k is not None:
        return runs_basis(k) + (", run-to-run spread pooled" if m.pool is not None else "")
    return SINGLE_RUN + (" + pooled run-to-run spread" if m.pool is not None else "")


def _log_se(m: Measure) -> float | None:
    """Standard error of log(value) from a 95% interval (asymmetric intervals averaged on the log scale)."""
    if m.is_exact:
        return 0.0
    iv = m.interval()
    if iv is None or iv[0] <= 0 or iv[1] <= 0:
        return None
    return (math.log(iv[1]) - math.log(iv[0])) / (2 * Z_95)


def _pool_df(p: PooledSpread | None) -> float:
    return p.df if p is not None else math.inf


def ratio(numerator: Measure, denominator: Measure) -> Measure:
    """numerator / denominator with a 95% interval from the two (independent) intervals on the log scale."""
    a, b = numerator.value, denominator.value
    if a is None or b is None or not numerator.known or not denominator.known or a <= 0 or b <= 0:
        return Measure(None)
    r = a / b
    n = min(numerator.n or 0, denominator.n or 0)
    basis = combined_basis(numerator, denominator)
    if basis == EXACT:
        return Measure(r, n, r, r, EXACT)
    if numerator.log_se is not None and denominator.log_se is not None and numerator.df and denominator.df:
        # two t-intervals whose pieces are known: pooled standard errors, one pool's df (else Welch's)
        sa, sb = numerator.log_se, denominator.log_se
        se = math.hypot(sa, sb)
        same = numerator.pool is not None and numerator.pool == denominator.pool
        df = numerator.df if same else welch_df(sa, numerator.df, sb, denominator.df)
        t = t_quantile(df) if math.isfinite(df) else Z_95
        return Measure(
            r,
            n,
            r * math.exp(-t * se),
            r * math.exp(t * se),
            basis,
            log_se=se,
            df=df,
            # the pool with fewer degrees of freedom names what the interval rests on
            pool=numerator.pool if same else min((numerator.pool, denominator.pool), key=_pool_df),
        )
    la, lb = _log_se(numerator), _log_se(denominator)
    if la is None or lb is None:
        why = numerator.why_none or denominator.why_none or "a side has no interval"
        return Measure.none(r, n, why)
    se = math.hypot(la, lb)
    return Measure(r, n, r * math.exp(-Z_95 * se), r * math.exp(Z_95 * se), basis)

"""The study's statistics, each defined once: the 95% z value, intervals, significance, slope.

Intervals are 95%, two-sided. Percentile intervals are distribution-free (binomial order statistics),
the interval of a mean over a few repeated runs uses Student's t, and a difference of two scores uses
the normal approximation with its standard error. The run-to-run spread is pooled across the study's
cells (:func:`pool_spread`), and two small samples are compared by the exact Mann-Whitney interval of
their ratio (:func:`hodges_lehmann_log_ratio`). docs/statistics.md gives every formula.
"""

from __future__ import annotations

import functools
import math
from collections.abc import Sequence
from dataclasses import dataclass

import numpy as np
from scipy import stats as sps

Z_95 = 1.96  # two-sided 95% quantile of the standard normal
# Two-sided 95% quantiles of Student's t by degrees of freedom (runs - 1); Z_95 beyond the table.
T_95 = {1: 12.706, 2: 4.303, 3: 3.182, 4: 2.776, 5: 2.571, 6: 2.447, 7: 2.365, 8: 2.306, 9: 2.262}
MIN_ORDER_STAT_N = 6  # fewer samples cannot bound a median at 95%


def _clean(values: Sequence[float | None]) -> list[float]:
    return [float(v) for v in values if v is not None and not math.isnan(float(v))]


_EXP_ZERO = -750.0  # math.exp of anything below is exactly 0.0


def _binom_cdf_window(n: int, q: float) -> tuple[int, list[float]]:
    """(i0, [P(X <= k) for k = i0..i1]), X ~ Binomial(n, q), summed term by term in log space from k = 0.

    Only a window around the mode is computed: every term outside it has a log below -750, which
    ``math.exp`` returns as exactly 0.0, so the sums inside the window are bit for bit those of the full
    sum from 0, P(X <= k) is 0.0 below the window and stays at its last value above it. The window spans
    about 80 standard deviations, not n + 1 terms (a median of 10 M values costs ~250,000 terms).
    """
    lq, lp, lf = math.log(q), math.log1p(-q), math.lgamma(n + 1)

    def log_term(i: int) -> float:
        return lf - math.lgamma(i + 1) - math.lgamma(n - i + 1) + i * lq + (n - i) * lp

    mode = min(n, int((n + 1) * q))
    width = int(40 * math.sqrt(n * q * (1 - q))) + 8
    i0 = max(0, mode - width)
    while i0 > 0 and log_term(i0) >= _EXP_ZERO:  # the terms rise up to the mode: all below i0 are smaller
        i0 = max(0, i0 - width)
    i1 = min(n, mode + width)
    while i1 < n and log_term(i1) >= _EXP_ZERO:
        i1 = min(n, i1 + width)
    out, total = [], 0.0
    for i in range(i0, i1 + 1):
        total += math.exp(log_term(i))
        out.append(min(total, 1.0))
    return i0, out


@functools.lru_cache(maxsize=256)
def order_ranks(n: int, q: float) -> tuple[int, int]:
    """The 1-based ranks (r, s) of the order statistics bounding the q-quantile of n values at 95%:
    r is the largest rank with P(Binomial(n, q) <= r - 1) <= 2.5% (0: none), s the smallest with
    P(Binomial(n, q) >= s) <= 2.5% (n + 1: none)."""
    i0, cdf = _binom_cdf_window(n, q)
    # P(X <= k) is 0.0 below the window and cdf[-1] above it; both tests below are monotone in k
    first_above = next((i0 + j for j, c in enumerate(cdf) if c > 0.025), n)
    first_upper = next((i0 + j for j, c in enumerate(cdf) if 1 - c <= 0.025), n)
    return min(first_above, n), min(first_upper, n) + 1


def quantile_ci95(values: Sequence[float] | np.ndarray, q: float) -> tuple[float | None, float | None]:
    """Distribution-free 95% interval of the q-quantile from order statistics; None on a side the sample
    cannot bound (e.g. the upper side of a P99 from 30 values), both None below six values.

    Exact binomial ranks: the lower bound is the r-th smallest value for the largest r with
    P(Binomial(n, q) <= r - 1) <= 2.5%, the upper the s-th for the smallest s with P(Binomial(n, q) >= s)
    <= 2.5% (ranks from 1), so each side holds at 97.5% and the interval at 95% or more. The two order
    statistics come from one partial sort (``numpy.partition``), not a full one.
    """
    n = len(values)
    if n < MIN_ORDER_STAT_N or not 0 < q < 1:
        return None, None
    r, u = order_ranks(n, float(q))
    kth = [k - 1 for k in (r, u) if 1 <= k <= n]
    s = np.partition(np.asarray(values, dtype=float), kth) if kth else None
    return (
        float(s[r - 1]) if s is not None and r >= 1 else None,
        float(s[u - 1]) if s is not None and u <= n else None,
    )


def median_ci95(values: Sequence[float] | np.ndarray) -> tuple[float | None, float | None]:
    """Distribution-free 95% interval of the median (both sides bounded from six values on)."""
    return quantile_ci95(values, 0.5)


def t_95(df: float) -> float:
    """Two-sided 95% Student t quantile for ``df`` degrees of freedom (any df > 0; fractional from
    Welch-Satterthwaite)."""
    return t_quantile(df, 0.95)


@functools.lru_cache(maxsize=4096)
def t_quantile(df: float, coverage: float = 0.95) -> float:
    """The two-sided ``coverage`` quantile of Student's t with ``df`` degrees of freedom."""
    if df <= 0:
        raise ValueError(f"degrees of freedom must be positive, got {df}")
    return float(sps.t.ppf(0.5 + coverage / 2, df))


@functools.lru_cache(maxsize=256)
def z_quantile(coverage: float) -> float:
    """The two-sided ``coverage`` quantile of the standard normal."""
    return float(sps.norm.ppf(0.5 + coverage / 2))


FAMILY_ALPHA = 0.05  # a verdict's error rate: all its judged figures together (docs/statistics.md)


def family_coverage(family: int, alpha: float = FAMILY_ALPHA) -> float:
    """The coverage of each of ``family`` intervals that hold together with probability 1 - alpha (Bonferroni)."""
    return 1 - alpha / max(1, family)


def mean_ci95(values: Sequence[float | None]) -> tuple[float | None, float | None, float | None]:
    """(mean, low, high): a t-interval of the mean of a few repeated runs; no interval below two values."""
    vals = _clean(values)
    if not vals:
        return None, None, None
    mean = float(np.mean(vals))
    if len(vals) < 2:
        return mean, None, None
    half = t_95(len(vals) - 1) * float(np.std(vals, ddof=1)) / math.sqrt(len(vals))
    return mean, mean - half, mean + half


def positive_mean_ci95(values: Sequence[float | None]) -> tuple[float | None, float | None, float | None]:
    """(mean, low, high) of a positive figure over a few runs (a latency, a rate): the t-interval on the log
    scale, exp(mean(log x) +- t s_log / sqrt(k)), widened to contain the arithmetic mean. Latencies and
    rates vary multiplicatively and cannot fall below zero; over two runs a t-interval on the raw scale
    (t = 12.7) routinely reaches negative values, this one never does. Values at or below zero (a goodput
    of 0) fall back to the raw-scale interval clipped at zero. No interval below two values."""
    vals = _clean(values)
    if not vals:
        return None, None, None
    mean = float(np.mean(vals))
    if len(vals) < 2:
        return mean, None, None
    if min(vals) <= 0:
        _, lo, hi = mean_ci95(vals)
        return mean, max(0.0, lo or 0.0), hi
    logs = np.log(vals)
    half = t_95(len(vals) - 1) * float(np.std(logs, ddof=1)) / math.sqrt(len(vals))
    centre = float(np.mean(logs))
    return mean, min(mean, math.exp(centre - half)), max(mean, math.exp(centre + half))


def normal_ci95(value: float | None, stderr: float | None) -> tuple[float | None, float | None]:
    """value ± Z_95 x stderr; (None, None) when either is unknown."""
    if value is None or stderr is None or math.isnan(value) or math.isnan(stderr):
        return None, None
    return value - Z_95 * stderr, value + Z_95 * stderr


def combined_stderr(a: float, b: float) -> float:
    """Standard error of the difference of two independent estimates."""
    return float((a**2 + b**2) ** 0.5)


# Accuracy as a non-inferiority decision (docs/architecture.md, "The decision layer"): the 95% interval of the
# change against -bound.
ACCEPTABLE = "acceptable"
UNACCEPTABLE = "unacceptable"
ACC_INCONCLUSIVE = "inconclusive"
# Paired scores where no document changed have no variance to estimate an interval from; the change is then
# bounded by the "rule of three": with none of n documents flipped, the flip rate is below 3.69 / n (two-sided
# 95%), and so is the drop.
NO_CHANGE = "paired, no document changed"
RULE_OF_THREE = 3.69


def noninferiority(delta_pt: float | None, stderr_pt: float | None, bound_pt: float) -> str:
    """Acceptable when the 95% interval of the change lies above -bound, unacceptable when it lies below,
    inconclusive when it straddles -bound or has no standard error. The one rule for the accuracy
    summary, the report's accuracy table and the verdicts."""
    lo, hi = normal_ci95(delta_pt, stderr_pt)
    if lo is None or hi is None:
        return ACC_INCONCLUSIVE
    if lo > -bound_pt:
        return ACCEPTABLE
    if hi < -bound_pt:
        return UNACCEPTABLE
    return ACC_INCONCLUSIVE


def slope(xs: Sequence[float], ys: Sequence[float | None]) -> float | None:
    """Least-squares slope of ys against xs (points with a missing or NaN y are left out); None below
    two distinct xs."""
    pts = [(float(x), float(y)) for x, y in zip(xs, ys, strict=True) if y is not None and not math.isnan(float(y))]
    if len({x for x, _ in pts}) < 2:
        return None
    return float(np.polyfit([p[0] for p in pts], [p[1] for p in pts], 1)[0])


# --- the run-to-run spread, pooled over the study's cells ---------------------------------------------
HETEROGENEITY_ALPHA = 0.01  # a cell whose spread exceeds the rest's at this level keeps its own


@dataclass(frozen=True)
class SpreadCell:
    """One cell's independent runs of one figure (a variant's level, one quantity), positive values."""

    name: str
    values: tuple[float, ...]

    @property
    def df(self) -> int:
        return len(self.values) - 1

    @functools.cached_property
    def var_log(self) -> float:
        return float(np.var(np.log(self.values), ddof=1))


@dataclass(frozen=True)
class PooledSpread:
    """The pooled variance of log(figure) between independent runs: sum(df_i s_i^2) / sum(df_i)."""

    var_log: float
    df: int
    cells: tuple[str, ...]
    outliers: tuple[str, ...] = ()  # cells left out: their spread is far outside the rest's

    @property
    def sd_log(self) -> float:
        return math.sqrt(self.var_log)

    def describe(self) -> str:
        out = f"run-to-run spread pooled over {len(self.cells)} cells, {self.df} df (sd {self.sd_log * 100:.1f}%)"
        n = len(self.outliers)
        if not n:
            return out
        return out + (
            "; 1 cell far outside it keeps its own" if n == 1 else f"; {n} cells far outside it keep their own"
        )


def _pooled(cells: Sequence[SpreadCell]) -> tuple[float, int]:
    df = sum(c.df for c in cells)
    return (sum(c.df * c.var_log for c in cells) / df if df else 0.0), df


def heterogeneity_p(cell: SpreadCell, rest_var_log: float, rest_df: int) -> float:
    """One-sided p-value that the cell's run-to-run variance exceeds the rest's: P(F(df, rest_df) >= s^2 / s_rest^2).
    0 when the rest shows no spread at all and the cell does; 1 when the cell shows none."""
    if cell.var_log <= 0:
        return 1.0
    if rest_var_log <= 0:
        return 0.0
    return float(sps.f.sf(cell.var_log / rest_var_log, cell.df, rest_df))


def pool_spread(cells: Sequence[SpreadCell], alpha: float = HETEROGENEITY_ALPHA) -> PooledSpread | None:
    """Pool the run-to-run variance of cells that share a machine and a kind of figure.

    Each cell with two or more positive runs contributes its log-scale sample variance with ``runs - 1``
    degrees of freedom. A cell whose variance is far above that of all the others (one-sided F test at
    ``alpha``) is left out of the pool (it keeps its own interval); the rest are pooled again. None with
    fewer than two cells: one cell's own spread is all there is.
    """
    usable = [c for c in cells if c.df >= 1 and all(v > 0 and math.isfinite(v) for v in c.values)]
    if len(usable) < 2:
        return None
    outliers = []
    total_ss, total_df = sum(c.df * c.var_log for c in usable), sum(c.df for c in usable)
    for c in usable:  # against the pool of all the others
        rest_df = total_df - c.df
        rest_var = (total_ss - c.df * c.var_log) / rest_df if rest_df else 0.0
        if heterogeneity_p(c, max(rest_var, 0.0), rest_df) < alpha:
            outliers.append(c.name)
    kept = [c for c in usable if c.name not in outliers]
    if len(kept) < 2:
        return None
    var, df = _pooled(kept)
    return PooledSpread(var, df, tuple(c.name for c in kept), tuple(outliers))


def welch_df(se_a: float, df_a: float, se_b: float, df_b: float) -> float:
    """Welch-Satterthwaite degrees of freedom of a difference of two estimates with their own errors."""
    num = (se_a**2 + se_b**2) ** 2
    den = (se_a**4 / df_a if df_a > 0 else 0.0) + (se_b**4 / df_b if df_b > 0 else 0.0)
    return num / den if den > 0 else math.inf


# --- two small samples: the exact Mann-Whitney interval of a ratio ---------------------------------
@functools.lru_cache(maxsize=256)
def mann_whitney_null(m: int, n: int) -> tuple[float, ...]:
    """P(U = u), u = 0..m*n, for the Mann-Whitney count U of two samples of m and n values with no ties
    under the null hypothesis (both from one distribution): the coefficients of the Gaussian binomial
    [m+n choose m]_q, divided by C(m+n, m)."""
    # f[i][j] = counts of U for samples of i and j values; f(i, j, u) = f(i-1, j, u - j) + f(i, j-1, u)
    prev = [np.ones(1, dtype=float) for _ in range(n + 1)]  # i = 0: U = 0 whatever j
    for i in range(1, m + 1):
        cur = [np.ones(1, dtype=float)]  # j = 0
        for j in range(1, n + 1):
            size = i * j + 1
            out = np.zeros(size)
            a = prev[j]  # f(i-1, j): shift by j
            out[j : j + len(a)] += a
            b = cur[j - 1]
            out[: len(b)] += b
            cur.append(out)
        prev = cur
    counts = prev[n]
    return tuple(float(x) for x in counts / counts.sum())


@dataclass(frozen=True)
class ExactRatio:
    """The Hodges-Lehmann ratio of two samples and its exact distribution-free interval."""

    estimate: float  # the median of the m x n pairwise ratios
    low: float
    high: float
    coverage: float  # the interval's exact coverage (at least the asked one, where it is reachable)
    m: int
    n: int

    @property
    def reaches(self) -> bool:
        return self.coverage >= 0.95 - 1e-12


def hodges_lehmann_log_ratio(a: Sequence[float], b: Sequence[float], coverage: float = 0.95) -> ExactRatio | None:
    """How many times the values of ``a`` exceed those of ``b``: the median of the pairwise ratios a_i / b_j
    with the exact interval [D_(k), D_(mn+1-k)] of the sorted ratios, k the largest with
    P(U <= k - 1) <= (1 - coverage) / 2 under the Mann-Whitney null (a shift on the log scale; no other
    assumption). Where even k = 1 (the smallest and largest ratio) cannot reach ``coverage``, the widest
    interval is returned with the coverage it has (``reaches`` false). None without positive values."""
    xa = [float(v) for v in a if v is not None and float(v) > 0 and math.isfinite(float(v))]
    xb = [float(v) for v in b if v is not None and float(v) > 0 and math.isfinite(float(v))]
    if not xa or not xb:
        return None
    m, n = len(xa), len(xb)
    d = np.sort(np.subtract.outer(np.log(xa), np.log(xb)).ravel())
    cdf = np.cumsum(mann_whitney_null(m, n))
    half = (1 - coverage) / 2
    ks = [k for k in range(1, m * n // 2 + 1) if cdf[k - 1] <= half + 1e-12]
    k = ks[-1] if ks else 1
    cov = 1 - 2 * float(cdf[k - 1])
    return ExactRatio(
        float(math.exp(np.median(d))), float(math.exp(d[k - 1])), float(math.exp(d[m * n - k])), cov, m, n
    )


def values_for_exact_coverage(coverage: float = 0.95) -> int:
    """The fewest values a side (equal sides) whose exact Mann-Whitney interval reaches ``coverage``:
    2 / C(2n, n) <= 1 - coverage."""
    n = 1
    while 2 / math.comb(2 * n, n) > 1 - coverage + 1e-12:
        n += 1
    return n

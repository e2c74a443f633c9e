"""The row-by-row aggregation that `worthit.metrics` replaced (commit 03fcefb), kept as the benchmark's
reference and the equivalence tests' oracle: same definitions, computed over Python lists of row dicts.

Only what `worthit.aggregate.summary_rows` used: `summarize` and its `Stat`, `Slo.met`, the percentile and
the median's order-statistic interval (the binomial CDF summed over all n + 1 terms).
"""

from __future__ import annotations

import math
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

import numpy as np

from worthit import schemas
from worthit.experiments.kv.tables import KV_CACHE
from worthit.experiments.loadtest.tables import LOAD_REQUESTS
from worthit.metrics import Slo


def _binom_cdf(n: int, q: float) -> list[float]:
    lq, lp, lf = math.log(q), math.log1p(-q), math.lgamma(n + 1)
    out, total = [], 0.0
    for i in range(n + 1):
        total += math.exp(lf - math.lgamma(i + 1) - math.lgamma(n - i + 1) + i * lq + (n - i) * lp)
        out.append(min(total, 1.0))
    return out


def quantile_ci95(values: Sequence[float], q: float) -> tuple[float | None, float | None]:
    n = len(values)
    if n < 6 or not 0 < q < 1:
        return None, None
    s, cdf = sorted(values), _binom_cdf(n, q)
    r = 0
    while r < n and cdf[r] <= 0.025:
        r += 1
    u = n + 1
    while u > 1 and 1 - cdf[u - 2] <= 0.025:
        u -= 1
    return (float(s[r - 1]) if r >= 1 else None, float(s[u - 1]) if u <= n else None)


def percentile(values: Sequence[float], q: float) -> float | None:
    vals = [v for v in values if v is not None and not math.isnan(v)]
    if not vals:
        return None
    return float(np.percentile(np.asarray(vals, dtype=float), q))


@dataclass(frozen=True)
class Stat:
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
        lo, hi = quantile_ci95(vals, 0.5)
        return cls(
            len(vals), float(arr.mean()), percentile(vals, 50), percentile(vals, 90), percentile(vals, 99), lo, hi
        )


@dataclass(frozen=True)
class LevelSummary:
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


def summarize(records: Sequence[Mapping[str, Any]], slo: Slo | None = None) -> LevelSummary:
    slo = slo or Slo()
    ok = [r for r in records if r.get("success")]
    errors: dict[str, int] = {}
    for r in records:
        if not r.get("success"):
            reason = str(r.get("error") or "unknown")[:120]
            errors[reason] = errors.get(reason, 0) + 1
    ends = [float(r["start_s"]) + float(r["e2e_ms"]) / 1e3 for r in records if r.get("e2e_ms") is not None]
    starts = [float(r["start_s"]) for r in records]
    duration = (max(ends) - min(starts)) if ends and starts else None
    out_tokens = sum(int(r.get("output_tokens") or 0) for r in ok)
    good = [r for r in ok if slo.met(r)]
    good_tokens = sum(int(r.get("output_tokens") or 0) for r in good)

    def rate(x: float) -> float | None:
        return x / duration if duration and duration > 0 else None

    itl: list[float] = []
    for r in ok:
        itl.extend(float(g) for g in (r.get("itl_ms") or []))
    return LevelSummary(
        n=len(records),
        n_errors=len(records) - len(ok),
        duration_s=duration,
        output_tok_per_s=rate(out_tokens),
        requests_per_s=rate(len(ok)),
        goodput_tok_per_s=rate(good_tokens),
        goodput_requests_per_s=rate(len(good)),
        ttft_ms=Stat.of(r.get("ttft_ms") for r in ok),
        tpot_ms=Stat.of(r.get("tpot_ms") for r in ok),
        itl_ms=Stat.of(itl),
        e2e_ms=Stat.of(r.get("e2e_ms") for r in ok),
        errors=errors,
    )


def summary_rows(
    kv_files: Mapping[str, str], load_files: Mapping[str, Sequence[str]], slo: Slo
) -> list[dict[str, Any]]:
    """`worthit.aggregate.summary_rows` as it was: each level's rows read back as a list of dicts."""
    rows: list[dict[str, Any]] = []
    for variant in dict.fromkeys([*kv_files, *load_files]):
        kv: dict[str, Any] = {}
        status, reason = schemas.STATUS_OK, None
        if variant in kv_files:
            res = schemas.read(kv_files[variant], KV_CACHE)
            if res.ok and res.table.num_rows:
                kv = res.table.to_pylist()[0]
            elif not res.ok:
                status, reason = res.status, res.reason
        kv_cols = {k: kv.get(k) for k in ("num_blocks", "kv_tokens", "kv_cache_gib", "critical_concurrency")}
        levels = list(load_files.get(variant, []))
        if not levels:
            rows.append({"variant": variant, "status": status, "reason": reason, **kv_cols})
        level_rows: list[dict[str, Any]] = []
        for path in levels:
            res = schemas.read(path, LOAD_REQUESTS)
            conc, run = res.metadata.get("concurrency"), int(res.metadata.get("repeat") or 1)
            if not res.ok:
                level_rows.append(
                    {"variant": variant, "status": res.status, "reason": res.reason, "concurrency": conc, "run": run}
                    | kv_cols
                )
                continue
            recs = res.table.to_pylist()
            s = summarize(recs, slo)
            level_rows.append(
                {
                    "variant": variant,
                    "status": status,
                    "reason": reason,
                    "concurrency": conc if conc is not None else (recs[0]["concurrency"] if recs else None),
                    "run": run,
                    "n": s.n,
                    "n_errors": s.n_errors,
                    "n_warmup": res.metadata.get("n_warmup"),
                    "ttft_ms_p50": s.ttft_ms.p50,
                    "ttft_ms_p99": s.ttft_ms.p99,
                    "tpot_ms_p50": s.tpot_ms.p50,
                    "tpot_ms_p99": s.tpot_ms.p99,
                    "itl_ms_p50": s.itl_ms.p50,
                    "e2e_ms_p50": s.e2e_ms.p50,
                    "output_tok_per_s": s.output_tok_per_s,
                    "requests_per_s": s.requests_per_s,
                    "goodput_tok_per_s": s.goodput_tok_per_s,
                    "goodput_requests_per_s": s.goodput_requests_per_s,
                    "duration_s": s.duration_s,
                    **kv_cols,
                }
            )
        rows += sorted(level_rows, key=lambda r: (r["concurrency"] or 0, r["run"]))
    return rows

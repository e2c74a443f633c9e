"""From results to reported figures, each with n and a 95% interval.

Per load level: TTFT and TPOT percentiles (order-statistic intervals), output and goodput tokens/s
(a bootstrap over requests of the closed-loop rate, Little's law: concurrency x tokens / latency,
scaled to the measured value; across repeats, a t-interval over the runs). Per variant against the
baseline: the comparisons the rules judge, accuracy per task, KV capacity, the knees of the
throughput and latency curves, MBU, and the prefix-caching and speculative-decoding experiments when
their results exist.
"""

from __future__ import annotations

import math
import re
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

import numpy as np

from worthit import schemas
from worthit.metrics import Slo, median_ci95, percentile, summarize
from worthit.report.data import StudyResults, VariantResults, engine_args_of
from worthit.report.decide import (
    AccuracyDelta,
    Comparison,
    Evidence,
    Measure,
    Rules,
    predicted_speculative_speedup,
)
from worthit.report.mbu import Bandwidth, bytes_per_step, mbu, peak_bandwidth

# two-sided 95% Student t quantiles for small run counts (df = runs - 1)
_T95 = {1: 12.706, 2: 4.303, 3: 3.182, 4: 2.776, 5: 2.571, 6: 2.447, 7: 2.365, 8: 2.306, 9: 2.262}
_FLOAT_BYTES = {"float32": 4, "float16": 2, "bfloat16": 2}


def quantile_ci95(values: Sequence[float], q: float) -> tuple[float | None, float | None]:
    """Distribution-free 95% interval of the q-quantile from order statistics; None on a side the
    sample cannot bound (e.g. the upper side of a P99 from 30 requests)."""
    if q == 0.5:
        return median_ci95(values)
    n = len(values)
    if n < 6:
        return None, None
    s = sorted(values)
    half = 1.96 * math.sqrt(n * q * (1 - q))
    lo, hi = int(math.floor(n * q - half)), int(math.ceil(n * q + half)) - 1
    return (float(s[lo]) if lo >= 0 else None, float(s[hi]) if hi <= n - 1 else None)


def stat_measure(values: Sequence[float | None], q: float) -> Measure:
    vals = [float(v) for v in values if v is not None and not math.isnan(float(v))]
    if not vals:
        return Measure(None, 0)
    lo, hi = quantile_ci95(vals, q)
    return Measure(percentile(vals, q * 100), len(vals), lo, hi)


def rate_measure(
    records: Sequence[Mapping[str, Any]],
    measured: float | None,
    concurrency: int,
    slo: Slo | None = None,
    resamples: int = 1000,
    seed: int = 0,
) -> Measure:
    """Bootstrap interval of a closed loop's token rate, scaled to the measured value."""
    n = len(records)
    if measured is None or n < 6:
        return Measure(measured, n)
    tokens = np.array(
        [
            float(r.get("output_tokens") or 0) if r.get("success") and (slo is None or slo.met(r)) else 0.0
            for r in records
        ]
    )
    lat = np.array([float(r.get("e2e_ms") or 0) / 1e3 for r in records])
    if lat.sum() <= 0 or tokens.sum() <= 0:
        return Measure(measured, n, measured, measured) if measured == 0 else Measure(measured, n)
    point = tokens.sum() / lat.sum()
    idx = np.random.default_rng(seed).integers(0, n, size=(resamples, n))
    boot = tokens[idx].sum(axis=1) / np.maximum(lat[idx].sum(axis=1), 1e-12)
    lo, hi = np.percentile(boot / point, [2.5, 97.5])
    return Measure(measured, n, measured * float(lo), measured * float(hi))


def runs_measure(values: Sequence[float | None], n_requests: int) -> Measure:
    """Mean over repeated runs with a t-interval (n = requests behind it)."""
    vals = [v for v in values if v is not None]
    if not vals:
        return Measure(None, n_requests)
    mean = float(np.mean(vals))
    if len(vals) < 2:
        return Measure(mean, n_requests)
    half = _T95.get(len(vals) - 1, 1.96) * float(np.std(vals, ddof=1)) / math.sqrt(len(vals))
    return Measure(mean, n_requests, mean - half, mean + half)


@dataclass(frozen=True)
class LevelFigures:
    variant: str
    concurrency: int
    status: str
    reason: str
    n: int = 0
    n_errors: int = 0
    runs: int = 0
    ttft_p50: Measure = Measure(None)
    ttft_p99: Measure = Measure(None)
    tpot_p50: Measure = Measure(None)
    tpot_p99: Measure = Measure(None)
    output_tok_per_s: Measure = Measure(None)
    goodput_tok_per_s: Measure = Measure(None)
    spread_tpot_p50: tuple[float, float] | None = None  # min, max over repeats
    spread_output_tok_per_s: tuple[float, float] | None = None
    metrics_delta: dict[str, float] = field(default_factory=dict)

    @property
    def ok(self) -> bool:
        return self.status == schemas.STATUS_OK and self.n > self.n_errors


def level_figures(v: VariantResults, slo: Slo) -> list[LevelFigures]:
    out = []
    for c, files in v.levels().items():
        good = [f for f in files if f.ok]
        if not good:
            out.append(LevelFigures(v.name, c, files[0].status, files[0].reason))
            continue
        records = [r for f in good for r in f.rows]
        per_run = [summarize(f.rows, slo) for f in good]
        delta: dict[str, float] = {}
        for f in good:
            for k, val in (f.metadata.get("metrics_delta") or {}).items():
                delta[k] = delta.get(k, 0.0) + float(val)
        ok = [r for r in records if r.get("success")]
        if len(good) > 1:
            out_tps = runs_measure([s.output_tok_per_s for s in per_run], len(records))
            good_tps = runs_measure([s.goodput_tok_per_s for s in per_run], len(records))
            tp = [s.tpot_ms.p50 for s in per_run if s.tpot_ms.p50 is not None]
            tps = [s.output_tok_per_s for s in per_run if s.output_tok_per_s is not None]
            spread_tp = (min(tp), max(tp)) if tp else None
            spread_tps = (min(tps), max(tps)) if tps else None
        else:
            s = per_run[0]
            out_tps = rate_measure(records, s.output_tok_per_s, c)
            good_tps = rate_measure(records, s.goodput_tok_per_s, c, slo)
            spread_tp = spread_tps = None
        out.append(
            LevelFigures(
                v.name,
                c,
                schemas.STATUS_OK,
                "",
                n=len(records),
                n_errors=len(records) - len(ok),
                runs=len(good),
                ttft_p50=stat_measure([r.get("ttft_ms") for r in ok], 0.5),
                ttft_p99=stat_measure([r.get("ttft_ms") for r in ok], 0.99),
                tpot_p50=stat_measure([r.get("tpot_ms") for r in ok], 0.5),
                tpot_p99=stat_measure([r.get("tpot_ms") for r in ok], 0.99),
                output_tok_per_s=out_tps,
                goodput_tok_per_s=good_tps,
                spread_tpot_p50=spread_tp,
                spread_output_tok_per_s=spread_tps,
                metrics_delta=delta,
            )
        )
    return out


# ---------------------------------------------------------------------------------------- accuracy
_METRIC_PRIORITY = ("acc_norm", "acc", "exact_match", "em", "f1")
_FILTER_PRIORITY = ("none", "strict-match", "flexible-extract")


def primary_scores(rows: Sequence[Mapping[str, Any]]) -> dict[str, dict[str, Any]]:
    """One score per task: acc_norm before acc before exact_match; the unfiltered/strict filter first."""
    best: dict[str, tuple[tuple[int, int], dict[str, Any]]] = {}
    for r in rows:
        if r.get("value") is None:
            continue
        metric, _, filt = str(r.get("metric", "")).partition(",")
        filt = str(r.get("filter") or filt or "none")
        rank = (
            _METRIC_PRIORITY.index(metric) if metric in _METRIC_PRIORITY else len(_METRIC_PRIORITY),
            _FILTER_PRIORITY.index(filt) if filt in _FILTER_PRIORITY else len(_FILTER_PRIORITY),
        )
        task = str(r["task"])
        if task not in best or rank < best[task][0]:
            best[task] = (rank, {**r, "metric": metric, "filter": filt})
    return {t: row for t, (_, row) in sorted(best.items())}


def accuracy_of(v: VariantResults) -> dict[str, dict[str, Any]]:
    rows = [r for f in v.of(schemas.ACCURACY.name) if f.ok for r in f.rows]
    return primary_scores(rows)


def accuracy_deltas(base: Mapping[str, Mapping[str, Any]], var: Mapping[str, Mapping[str, Any]]) -> list[AccuracyDelta]:
    return [
        AccuracyDelta(
            t,
            float(base[t]["value"]),
            float(var[t]["value"]),
            base[t].get("stderr"),
            var[t].get("stderr"),
            int(var[t].get("n") or 0),
        )
        for t in var
        if t in base
    ]


# ------------------------------------------------------------------------- capacity, knees and MBU
@dataclass(frozen=True)
class Capacity:
    variant: str
    weight_bytes: int | None
    num_blocks: int | None
    kv_cache_gib: float | None
    kv_critical_concurrency: float | None
    throughput_knee: int | None
    latency_knee: int | None
    highest_level: int | None
    preemptions: float
    bound: str
    tpot_ms_p50: float | None
    mbu: float | None
    bandwidth: Bandwidth | None


def knees(
    levels: Sequence[LevelFigures], throughput_fraction: float = 0.9, latency_factor: float = 2.0
) -> tuple[int | None, int | None]:
    """Throughput knee: the lowest level reaching ``fraction`` of the peak output tok/s. Latency knee: the
    highest level whose TPOT P50 stays within ``factor`` x the lowest level's."""
    ok = [lv for lv in levels if lv.ok]
    tps = [(lv.concurrency, lv.output_tok_per_s.value) for lv in ok if lv.output_tok_per_s.value]
    tk = None
    if tps:
        peak = max(v for _, v in tps)
        tk = min(c for c, v in tps if v >= throughput_fraction * peak)
    tp = [(lv.concurrency, lv.tpot_p50.value) for lv in ok if lv.tpot_p50.value]
    lk = None
    if tp:
        first = tp[0][1]
        within = [c for c, v in tp if v <= latency_factor * first]
        lk = max(within) if within else None
    return tk, lk


def served_weight_bytes(
    kv: Mapping[str, Any] | None, meta: Mapping[str, Any], engine_args: Mapping[str, Any]
) -> int | None:
    """Bytes of weights read per step: the checkpoint's, rescaled when the engine casts a float model."""
    model = meta.get("model") or {}
    wb = (kv or {}).get("weight_bytes") or model.get("weight_bytes")
    if not wb and model.get("parameters") and model.get("dtype") in _FLOAT_BYTES:
        wb = int(model["parameters"]) * _FLOAT_BYTES[model["dtype"]]
    if not wb:
        return None
    stored, served = model.get("dtype"), str(engine_args.get("dtype") or "auto")
    if stored in _FLOAT_BYTES and served in _FLOAT_BYTES and stored != served:
        wb = int(wb * _FLOAT_BYTES[served] / _FLOAT_BYTES[stored])
    return int(wb)


def capacity(
    v: VariantResults,
    levels: Sequence[LevelFigures],
    engine_args: Mapping[str, Any],
    bandwidth: Bandwidth | None,
    context_tokens: float,
    knee_cfg: Mapping[str, Any],
) -> Capacity:
    kv = v.kv
    tk, lk = knees(levels, float(knee_cfg.get("throughput_fraction", 0.9)), float(knee_cfg.get("latency_factor", 2.0)))
    crit = (kv or {}).get("critical_concurrency")
    ok = [lv for lv in levels if lv.ok]
    highest = max((lv.concurrency for lv in ok), default=None)
    pre = sum(lv.metrics_delta.get("vllm:num_preemptions_total", 0.0) for lv in ok)
    if pre > 0:
        bound = f"KV capacity: {pre:.0f} preemptions measured"
    elif crit is not None and tk is not None and crit <= tk:
        bound = f"KV capacity (critical concurrency {crit:.0f} <= throughput knee {tk})"
    elif tk is not None and highest is not None and tk < highest:
        bound = f"compute/bandwidth: throughput saturates at concurrency {tk}, below the KV bound"
    elif highest is not None:
        bound = f"not reached: throughput still rising at the highest level measured ({highest})"
    else:
        bound = "n/a (no load levels)"
    first = ok[0] if ok else None
    wb = served_weight_bytes(kv, v.provenance(), engine_args)
    util = None
    if first is not None and wb:
        read = bytes_per_step(wb, (kv or {}).get("kv_bytes_per_token"), context_tokens, first.concurrency)
        util = mbu(read, first.tpot_p50.value, bandwidth.gb_s if bandwidth else None)
    return Capacity(
        v.name,
        wb,
        (kv or {}).get("num_blocks"),
        (kv or {}).get("kv_cache_gib"),
        crit,
        tk,
        lk,
        highest,
        pre,
        bound,
        first.tpot_p50.value if first else None,
        util,
        bandwidth,
    )


def study_bandwidth(study: StudyResults, cfg: Mapping[str, Any]) -> Bandwidth | None:
    hw = cfg.get("hardware") or {}
    gpu = hw.get("gpu")
    if not gpu:
        for f in study.all_files():
            gpu = (f.metadata.get("hardware") or {}).get("gpu")
            if gpu:
                break
    return peak_bandwidth(gpu, hw.get("peak_bandwidth_gb_s"))


# ---------------------------------------------------------------------------------- comparisons
def common_levels(a: Sequence[LevelFigures], b: Sequence[LevelFigures]) -> list[int]:
    return sorted({lv.concurrency for lv in a if lv.ok} & {lv.concurrency for lv in b if lv.ok})


def _at(levels: Sequence[LevelFigures], c: int) -> LevelFigures:
    return next(lv for lv in levels if lv.concurrency == c)


def best_goodput(levels: Sequence[LevelFigures]) -> LevelFigures | None:
    ok = [lv for lv in levels if lv.ok and lv.goodput_tok_per_s.value is not None]
    return max(ok, key=lambda lv: lv.goodput_tok_per_s.value or 0.0) if ok else None


def comparisons(
    base: Sequence[LevelFigures],
    var: Sequence[LevelFigures],
    base_kv: Mapping[str, Any] | None,
    var_kv: Mapping[str, Any] | None,
) -> list[Comparison]:
    out: list[Comparison] = []
    if base_kv and var_kv and base_kv.get("num_blocks") and var_kv.get("num_blocks"):
        out.append(
            Comparison(
                "KV blocks",
                "blocks",
                Measure(float(base_kv["num_blocks"]), 1, exact=True),
                Measure(float(var_kv["num_blocks"]), 1, exact=True),
                True,
                "capacity",
            )
        )
    levels = common_levels(base, var)
    if levels:
        lo, hi = levels[0], levels[-1]
        b, v = _at(base, lo), _at(var, lo)
        out.append(Comparison(f"TPOT P50 @ c={lo}", "ms", b.tpot_p50, v.tpot_p50, False, "latency"))
        out.append(Comparison(f"TTFT P50 @ c={lo}", "ms", b.ttft_p50, v.ttft_p50, False, "latency"))
        b, v = _at(base, hi), _at(var, hi)
        if hi != lo:
            out.append(Comparison(f"TPOT P50 @ c={hi}", "ms", b.tpot_p50, v.tpot_p50, False, "latency"))
        out.append(
            Comparison(f"output tok/s @ c={hi}", "tok/s", b.output_tok_per_s, v.output_tok_per_s, True, "throughput")
        )
    bg, vg = best_goodput(base), best_goodput(var)
    if bg and vg:
        out.append(Comparison("best goodput", "tok/s", bg.goodput_tok_per_s, vg.goodput_tok_per_s, True, "throughput"))
    return out


# --------------------------------------------------------------------------- speculative decoding
SPEC_COUNTERS = (
    "vllm:spec_decode_num_drafts_total",
    "vllm:spec_decode_num_draft_tokens_total",
    "vllm:spec_decode_num_accepted_tokens_total",
)


@dataclass(frozen=True)
class SpecLevel:
    variant: str
    concurrency: int
    alpha: float | None  # tokens per verify step (accepted + 1 bonus)
    k: float | None  # draft tokens per step
    acceptance_rate: float | None
    predicted: float | None
    measured: Comparison | None


def is_speculative(engine_args: Mapping[str, Any], levels: Sequence[LevelFigures]) -> bool:
    if any(str(k).lstrip("-").replace("_", "-") == "speculative-config" and v for k, v in engine_args.items()):
        return True
    return any(lv.metrics_delta.get(SPEC_COUNTERS[0], 0) > 0 for lv in levels)


def spec_levels(
    variant: str,
    levels: Sequence[LevelFigures],
    base: Sequence[LevelFigures],
    spec_cfg: Mapping[str, Any],
    meta: Mapping[str, Any],
) -> list[SpecLevel]:
    model = dict(meta.get("spec_decode_model") or {})
    gamma = model.get("gamma", spec_cfg.get("draft_cost_ratio"))
    c_ratio = model.get("c", spec_cfg.get("verify_cost_ratio"))
    out = []
    for lv in levels:
        if not lv.ok:
            continue
        d = lv.metrics_delta
        drafts, dtok, acc = (d.get(k) for k in SPEC_COUNTERS)
        alpha = 1 + acc / drafts if drafts and acc is not None else None
        k = dtok / drafts if drafts and dtok is not None else None
        rate = acc / dtok if dtok and acc is not None else None
        pred = predicted_speculative_speedup(alpha, k, gamma, c_ratio)
        meas = None
        b = [x for x in base if x.ok and x.concurrency == lv.concurrency]
        if b:
            meas = Comparison(f"TPOT P50 @ c={lv.concurrency}", "ms", b[0].tpot_p50, lv.tpot_p50, False)
        out.append(SpecLevel(variant, lv.concurrency, alpha, k, rate, pred, meas))
    return out


# ------------------------------------------------------------------------------- prefix caching
@dataclass(frozen=True)
class PrefixPoint:
    variant: str
    cache_on: bool
    prefix_tokens: int
    ttft_p50: Measure
    hit_rate: float | None


_OFF_KEYS = re.compile(r"^(no-enable-prefix-caching)$")


def prefix_comparisons(base: Sequence[PrefixPoint], variant: Sequence[PrefixPoint]) -> list[Comparison]:
    """TTFT with a shared prefix, baseline vs variant, at each prefix length both measured (> 0): what
    turning prefix caching on or off changes, so the verdict table judges that experiment too."""
    ref = {p.prefix_tokens: p for p in base}
    out = []
    for p in sorted(variant, key=lambda p: p.prefix_tokens):
        b = ref.get(p.prefix_tokens)
        if b is None or p.prefix_tokens == 0 or b.cache_on == p.cache_on:
            continue
        out.append(
            Comparison(
                f"TTFT P50, {p.prefix_tokens}-token shared prefix", "ms", b.ttft_p50, p.ttft_p50, False, "latency"
            )
        )
    return out


def prefix_caching_on(engine_args: Mapping[str, Any], kv: Mapping[str, Any] | None) -> bool:
    if kv is not None and kv.get("prefix_caching") is not None:
        return bool(kv["prefix_caching"])
    for k, v in engine_args.items():
        key = str(k).lstrip("-").replace("_", "-")
        if _OFF_KEYS.match(key) and v:
            return False
        if key == "enable-prefix-caching" and v is False:
            return False
    return True  # vLLM V1 default


def prefix_points(v: VariantResults, engine_args: Mapping[str, Any]) -> list[PrefixPoint]:
    default_on = prefix_caching_on(engine_args, v.kv)
    groups: dict[tuple[bool, int], list[float | None]] = {}
    hits: dict[tuple[bool, int], list[float]] = {}
    for f in v.of(schemas.PREFIX.name):
        if not f.ok:
            continue
        d = f.metadata.get("metrics_delta") or {}
        for r in f.rows:
            if not r.get("success"):
                continue
            on = r.get("prefix_caching", r.get("cache_enabled", default_on))
            key = (bool(on) if on is not None else default_on, int(r["prefix_tokens"]))
            groups.setdefault(key, []).append(r.get("ttft_ms"))
            q = d.get("vllm:prefix_cache_queries_total")
            if q:
                hits.setdefault(key, []).append(float(d.get("vllm:prefix_cache_hits_total", 0.0)) / float(q))
    return [
        PrefixPoint(
            v.name,
            on,
            L,
            stat_measure(vals, 0.5),
            float(np.mean(hits[(on, L)])) if hits.get((on, L)) else None,
        )
        for (on, L), vals in sorted(groups.items(), key=lambda kv: (not kv[0][0], kv[0][1]))
    ]


def slope(points: Sequence[PrefixPoint]) -> float | None:
    xs = [p.prefix_tokens for p in points if p.ttft_p50.value is not None]
    ys = [p.ttft_p50.value for p in points if p.ttft_p50.value is not None]
    if len(set(xs)) < 2:
        return None
    return float(np.polyfit(xs, ys, 1)[0])


@dataclass
class Analysis:
    """Everything the tables, plots and HTML need."""

    study: str
    baseline: str
    rules: Rules
    slo: Slo
    variants: list[str]
    descriptions: dict[str, str]
    engine_args: dict[str, dict[str, Any]]
    extra_args: dict[str, list[str]]
    status: dict[str, tuple[str, str]]
    levels: dict[str, list[LevelFigures]]
    accuracy: dict[str, dict[str, dict[str, Any]]]
    comparisons: dict[str, list[Comparison]]
    accuracy_deltas: dict[str, list[AccuracyDelta]]
    capacity: dict[str, Capacity]
    prefix: dict[str, list[PrefixPoint]]
    spec: dict[str, list[SpecLevel]]
    evidence: dict[str, Evidence]
    bandwidth: Bandwidth | None
    results: StudyResults
    cfg: Mapping[str, Any]


def analyse(study: StudyResults, cfg: Mapping[str, Any]) -> Analysis:
    rules = Rules.from_config(cfg)
    slo = Slo(**{k: v for k, v in (cfg.get("slo") or {}).items() if k in ("ttft_ms", "tpot_ms", "e2e_ms")})
    names = list(dict.fromkeys([*(cfg.get("variants") or {}), *study.variants]))
    baseline = cfg.get("baseline_variant") or (names[0] if names else "")
    lt = cfg.get("loadtest") or {}
    context = float(lt.get("prompt_tokens", 0)) + float(lt.get("output_tokens", 0)) / 2
    decide_cfg = cfg.get("decide") or {}
    bw = study_bandwidth(study, cfg)
    res = {n: study.variant(n) for n in names}
    eargs = {n: engine_args_of(cfg, n, res[n]) for n in names}
    levels = {n: level_figures(res[n], slo) for n in names}
    acc = {n: accuracy_of(res[n]) for n in names}
    cap = {n: capacity(res[n], levels[n], eargs[n], bw, context, decide_cfg.get("knee") or {}) for n in names}
    prefix = {n: p for n in names if (p := prefix_points(res[n], eargs[n]))}
    spec = {
        n: spec_levels(n, levels[n], levels.get(baseline, []), decide_cfg.get("speculative") or {}, res[n].provenance())
        for n in names
        if n != baseline and is_speculative(eargs[n], levels[n])
    }
    comps, deltas, evidence = {}, {}, {}
    for n in names:
        if n == baseline:
            continue
        comps[n] = comparisons(
            levels.get(baseline, []), levels[n], res[baseline].kv if baseline in res else None, res[n].kv
        ) + prefix_comparisons(prefix.get(baseline, []), prefix.get(n, []))
        deltas[n] = accuracy_deltas(acc.get(baseline, {}), acc[n])
        preds = [s.predicted for s in spec.get(n, []) if s.predicted is not None]
        status, reason = res[n].status
        if status == schemas.STATUS_OK and not any(lv.ok for lv in levels[n]) and not res[n].kv and levels[n]:
            status, reason = levels[n][0].status, levels[n][0].reason
        evidence[n] = Evidence(
            n,
            status,
            reason,
            (cfg.get("variants") or {}).get(n, {}).get("description", ""),
            comps[n],
            deltas[n],
            max(preds) if preds else None,
        )
    return Analysis(
        study=str(cfg.get("study", "study")),
        baseline=baseline,
        rules=rules,
        slo=slo,
        variants=names,
        descriptions={n: (cfg.get("variants") or {}).get(n, {}).get("description", "") for n in names},
        engine_args=eargs,
        extra_args={n: list((cfg.get("variants") or {}).get(n, {}).get("extra_args") or []) for n in names},
        status={n: res[n].status for n in names},
        levels=levels,
        accuracy=acc,
        comparisons=comps,
        accuracy_deltas=deltas,
        capacity=cap,
        prefix=prefix,
        spec=spec,
        evidence=evidence,
        bandwidth=bw,
        results=study,
        cfg=cfg,
    )

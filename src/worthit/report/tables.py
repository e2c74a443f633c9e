"""The report's tables as rows of the ``report_*`` schemas, and their Markdown / CSV / Parquet files."""

from __future__ import annotations

import math
import shlex
from collections.abc import Iterable, Mapping, Sequence
from pathlib import Path
from typing import Any

import pandas as pd

from worthit import schemas
from worthit.report.analysis import Analysis, LevelFigures, slope
from worthit.report.decide import ADOPT, NO_DIFFERENCE, Comparison, Measure, Verdict, decide
from worthit.server import engine_flags


def _m(prefix: str, m: Measure | None) -> dict[str, Any]:
    m = m or Measure(None)
    return {
        prefix: m.value,
        f"{prefix}_n": m.n if m.value is not None else None,
        f"{prefix}_ci95_low": m.value if m.exact else m.ci_low,
        f"{prefix}_ci95_high": m.value if m.exact else m.ci_high,
    }


def _pct(new: float | None, ref: float | None) -> float | None:
    if new is None or ref is None or ref == 0:
        return None
    return (new - ref) / abs(ref) * 100


# ------------------------------------------------------------------------------------------ levels
def level_rows(a: Analysis) -> list[dict[str, Any]]:
    rows = []
    for v in a.variants:
        for lv in a.levels[v]:
            sp, st = lv.spread_tpot_p50, lv.spread_output_tok_per_s
            rows.append(
                {
                    "variant": v,
                    "concurrency": lv.concurrency,
                    "status": lv.status,
                    "reason": lv.reason or None,
                    "n": lv.n,
                    "n_errors": lv.n_errors,
                    "runs": lv.runs,
                    **_m("ttft_ms_p50", lv.ttft_p50),
                    **_m("ttft_ms_p99", lv.ttft_p99),
                    **_m("tpot_ms_p50", lv.tpot_p50),
                    **_m("tpot_ms_p99", lv.tpot_p99),
                    **_m("output_tok_per_s", lv.output_tok_per_s),
                    **_m("goodput_tok_per_s", lv.goodput_tok_per_s),
                    "runs_tpot_ms_p50_min": sp[0] if sp else None,
                    "runs_tpot_ms_p50_max": sp[1] if sp else None,
                    "runs_output_tok_per_s_min": st[0] if st else None,
                    "runs_output_tok_per_s_max": st[1] if st else None,
                }
            )
    return rows


# -------------------------------------------------------------------------------------- comparison
def _cmp_row(v: str, base: str, c: Comparison) -> dict[str, Any]:
    return {
        "variant": v,
        "baseline": base,
        "quantity": c.quantity,
        "unit": c.unit,
        "kind": c.kind,
        **_m("baseline_value", c.baseline),
        **_m("value", c.variant),
        "change_pct": c.change_pct,
        "significant": c.significant,
        "status": schemas.STATUS_OK,
    }


def comparison_rows(a: Analysis) -> list[dict[str, Any]]:
    rows: list[dict[str, Any]] = []
    b = a.baseline
    bcap = a.capacity.get(b)
    for v in a.variants:
        if v == b:
            continue
        ev = a.evidence[v]
        if ev.status != schemas.STATUS_OK:
            rows.append({"variant": v, "baseline": b, "quantity": "all", "status": ev.status, "reason": ev.reason})
            continue
        cap = a.capacity[v]
        exact = [
            (
                "weights",
                "GB",
                "weights",
                bcap.weight_bytes / 1e9 if bcap and bcap.weight_bytes else None,
                cap.weight_bytes / 1e9 if cap.weight_bytes else None,
                False,
            ),
            ("KV cache", "GiB", "capacity", bcap.kv_cache_gib if bcap else None, cap.kv_cache_gib, True),
            (
                "critical concurrency (KV-bound)",
                "requests",
                "capacity",
                bcap.kv_critical_concurrency if bcap else None,
                cap.kv_critical_concurrency,
                True,
            ),
        ]
        for q, unit, kind, bv, vv, hib in exact:
            if bv is None and vv is None:
                continue
            rows.append(
                _cmp_row(
                    v,
                    b,
                    Comparison(q, unit, Measure(bv, 1, exact=True), Measure(vv, 1, exact=True), hib, kind),
                )
            )
        rows += [_cmp_row(v, b, c) for c in a.comparisons[v]]
        for d in a.accuracy_deltas[v]:
            ci = d.ci_pt
            bse, vse = d.baseline_stderr, d.variant_stderr
            rows.append(
                {
                    "variant": v,
                    "baseline": b,
                    "quantity": f"accuracy: {d.task}",
                    "unit": "%",
                    "kind": "accuracy",
                    "baseline_value": d.baseline * 100,
                    "baseline_value_n": a.accuracy[b][d.task].get("n"),
                    "baseline_value_ci95_low": (d.baseline - 1.96 * bse) * 100 if bse is not None else None,
                    "baseline_value_ci95_high": (d.baseline + 1.96 * bse) * 100 if bse is not None else None,
                    "value": d.variant * 100,
                    "value_n": d.n or None,
                    "value_ci95_low": (d.variant - 1.96 * vse) * 100 if vse is not None else None,
                    "value_ci95_high": (d.variant + 1.96 * vse) * 100 if vse is not None else None,
                    "change_pct": _pct(d.variant, d.baseline),
                    "change_pt": d.change_pt,
                    "significant": d.significant,
                    "status": schemas.STATUS_OK,
                    "reason": f"change 95% CI [{ci[0]:+.1f}, {ci[1]:+.1f}] pt" if ci else None,
                }
            )
    return rows


# ---------------------------------------------------------------------------------------- verdicts
def verdicts(a: Analysis) -> list[Verdict]:
    return [decide(a.evidence[v], a.rules) for v in a.variants if v in a.evidence]


def verdict_rows(a: Analysis, vs: Sequence[Verdict]) -> list[dict[str, Any]]:
    return [
        {
            "variant": x.variant,
            "description": a.descriptions.get(x.variant) or None,
            "benefit": x.benefit,
            "accuracy_cost": x.accuracy_cost,
            "max_accuracy_drop_pt": x.max_accuracy_drop_pt,
            "effort": x.effort,
            "verdict": x.verdict,
            "reason": x.reason,
            "predicted_speedup": x.predicted_speedup,
            "status": x.status,
        }
        for x in vs
    ]


# ---------------------------------------------------------------------------------------- capacity
def capacity_rows(a: Analysis) -> list[dict[str, Any]]:
    return [
        {
            "variant": c.variant,
            "weight_bytes": c.weight_bytes,
            "num_blocks": c.num_blocks,
            "kv_cache_gib": c.kv_cache_gib,
            "kv_critical_concurrency": c.kv_critical_concurrency,
            "throughput_knee_concurrency": c.throughput_knee,
            "latency_knee_concurrency": c.latency_knee,
            "highest_level": c.highest_level,
            "preemptions": c.preemptions,
            "bound": c.bound,
            "tpot_ms_p50": c.tpot_ms_p50,
            "mbu": c.mbu,
            "peak_bandwidth_gb_s": c.bandwidth.gb_s if c.bandwidth else None,
            "bandwidth_source": (
                f"{c.bandwidth.name}: {c.bandwidth.source}" if c.bandwidth else "unknown hardware: MBU n/a"
            ),
        }
        for c in a.capacity.values()
    ]


# ------------------------------------------------------------------------------------- experiments
def _agg_rows(a: Analysis, table: str) -> list[dict[str, Any]] | None:
    f = a.results.aggregates.get(table)
    return f.rows if f is not None and f.ok else None


def prefix_rows(a: Analysis) -> list[dict[str, Any]]:
    rows: list[dict[str, Any]] = []
    agg = _agg_rows(a, schemas.PREFIX_SUMMARY.name)
    if agg is not None:
        for r in agg:
            rows.append(
                {
                    "experiment": "prefix caching",
                    "variant": r["variant"],
                    "setting": f"prefix {r.get('prefix_tokens')} tokens, cache "
                    f"{'on' if r.get('prefix_caching') else 'off'}",
                    "quantity": "TTFT P50",
                    "unit": "ms",
                    "value": r.get("ttft_ms_p50"),
                    "value_n": r.get("n"),
                    "reference": r.get("reference_variant"),
                    "reference_value": r.get("ref_ttft_ms_p50"),
                    "change_pct": -r["ttft_p50_reduction_pct"] if r.get("ttft_p50_reduction_pct") is not None else None,
                    "status": r.get("status") or "ok",
                    "reason": r.get("reason"),
                }
            )
            if r.get("hit_rate") is not None:
                rows.append(
                    {
                        "experiment": "prefix caching",
                        "variant": r["variant"],
                        "setting": f"prefix {r.get('prefix_tokens')} tokens",
                        "quantity": "hit rate",
                        "unit": "",
                        "value": r["hit_rate"],
                        "status": "ok",
                    }
                )
        return rows
    on = {v: p for v, p in a.prefix.items() if any(x.cache_on for x in p)}
    off = {v: p for v, p in a.prefix.items() if any(not x.cache_on for x in p)}
    ref_name = next(iter(off), None)
    ref = {x.prefix_tokens: x for x in off.get(ref_name, []) if not x.cache_on} if ref_name else {}
    for v, pts in a.prefix.items():
        for x in pts:
            r = ref.get(x.prefix_tokens) if x.cache_on else None
            sig = None
            if r is not None:
                iv, ir = x.ttft_p50.interval(), r.ttft_p50.interval()
                sig = None if iv is None or ir is None else (iv[1] < ir[0] or ir[1] < iv[0])
            rows.append(
                {
                    "experiment": "prefix caching",
                    "variant": v,
                    "setting": f"prefix {x.prefix_tokens} tokens, cache {'on' if x.cache_on else 'off'}",
                    "quantity": "TTFT P50",
                    "unit": "ms",
                    **_m("value", x.ttft_p50),
                    "reference": f"{ref_name} (cache off)" if r is not None else None,
                    "reference_value": r.ttft_p50.value if r is not None else None,
                    "change_pct": _pct(x.ttft_p50.value, r.ttft_p50.value) if r is not None else None,
                    "significant": sig,
                    "status": "ok",
                }
            )
            if x.hit_rate is not None:
                rows.append(
                    {
                        "experiment": "prefix caching",
                        "variant": v,
                        "setting": f"prefix {x.prefix_tokens} tokens",
                        "quantity": "hit rate",
                        "unit": "",
                        "value": x.hit_rate,
                        "status": "ok",
                    }
                )
    ref_slope = slope([x for x in off.get(ref_name, []) if not x.cache_on]) if ref_name else None
    for v, pts in on.items():
        s = slope([x for x in pts if x.cache_on])
        if s is not None:
            rows.append(
                {
                    "experiment": "prefix caching",
                    "variant": v,
                    "setting": "all lengths",
                    "quantity": "TTFT slope",
                    "unit": "ms per 1k prefix tokens",
                    "value": s * 1000,
                    "reference": f"{ref_name} (cache off)" if ref_slope is not None else None,
                    "reference_value": ref_slope * 1000 if ref_slope is not None else None,
                    "change_pct": _pct(s, ref_slope),
                    "status": "ok",
                }
            )
    return rows


def spec_rows(a: Analysis) -> list[dict[str, Any]]:
    rows: list[dict[str, Any]] = []
    agg = _agg_rows(a, schemas.SPECDEC_SUMMARY.name)
    if agg is not None:
        for r in agg:
            base = r.get("base_variant")
            st = r.get("status") or "ok"
            rows.append(
                {
                    "experiment": "speculative decoding",
                    "variant": r["variant"],
                    "setting": f"{r.get('method') or ''} k={r.get('k')} c={r.get('concurrency')}".strip(),
                    "quantity": "TPOT P50",
                    "unit": "ms",
                    "value": r.get("tpot_ms_p50"),
                    "reference": base,
                    "reference_value": r.get("base_tpot_ms_p50"),
                    "change_pct": _pct(r.get("tpot_ms_p50"), r.get("base_tpot_ms_p50")),
                    "status": st,
                    "reason": r.get("reason"),
                }
            )
            for q, key in (
                ("predicted speed-up S", "predicted_speedup"),
                ("measured speed-up", "measured_speedup"),
                ("alpha (tokens per verify step)", "alpha"),
                ("gamma", "gamma"),
                ("c", "c"),
            ):
                if r.get(key) is not None:
                    rows.append(
                        {
                            "experiment": "speculative decoding",
                            "variant": r["variant"],
                            "setting": f"c={r.get('concurrency')}",
                            "quantity": q,
                            "unit": "x" if "speed" in q else "",
                            "value": r[key],
                            "status": st,
                        }
                    )
        return rows
    for v, levels in a.spec.items():
        for s in levels:
            if s.measured is not None:
                m = s.measured
                rows.append(
                    {
                        "experiment": "speculative decoding",
                        "variant": v,
                        "setting": f"c={s.concurrency}",
                        "quantity": "TPOT P50",
                        "unit": "ms",
                        **_m("value", m.variant),
                        "reference": a.baseline,
                        "reference_value": m.baseline.value,
                        "change_pct": m.change_pct,
                        "significant": m.significant,
                        "status": "ok",
                    }
                )
            for q, val in (
                ("alpha (tokens per verify step)", s.alpha),
                ("acceptance rate", s.acceptance_rate),
                ("predicted speed-up S", s.predicted),
            ):
                if val is not None:
                    rows.append(
                        {
                            "experiment": "speculative decoding",
                            "variant": v,
                            "setting": f"c={s.concurrency}",
                            "quantity": q,
                            "unit": "",
                            "value": val,
                            "status": "ok",
                        }
                    )
    return rows


def kv_dtype_rows(a: Analysis) -> list[dict[str, Any]]:
    rows = []
    base = a.capacity.get(a.baseline)
    for v in a.variants:
        dt = next(
            (val for k, val in a.engine_args[v].items() if str(k).lstrip("-").replace("_", "-") == "kv-cache-dtype"),
            None,
        )
        if v == a.baseline or not dt or dt == "auto":
            continue
        ev = a.evidence.get(v)
        if ev is not None and ev.status != schemas.STATUS_OK:
            rows.append(
                {
                    "experiment": "KV cache dtype",
                    "variant": v,
                    "setting": f"kv-cache-dtype {dt}",
                    "quantity": "KV blocks",
                    "status": ev.status,
                    "reason": ev.reason,
                }
            )
            continue
        cap = a.capacity[v]
        rows.append(
            {
                "experiment": "KV cache dtype",
                "variant": v,
                "setting": f"kv-cache-dtype {dt}",
                "quantity": "KV blocks",
                "unit": "blocks",
                "value": cap.num_blocks,
                "value_n": 1,
                "reference": a.baseline,
                "reference_value": base.num_blocks if base else None,
                "change_pct": _pct(cap.num_blocks, base.num_blocks if base else None),
                "status": "ok",
            }
        )
        for d in a.accuracy_deltas.get(v, []):
            rows.append(
                {
                    "experiment": "KV cache dtype",
                    "variant": v,
                    "setting": f"kv-cache-dtype {dt}",
                    "quantity": f"accuracy: {d.task}",
                    "unit": "pt",
                    "value": d.variant * 100,
                    "reference": a.baseline,
                    "reference_value": d.baseline * 100,
                    "change_pct": _pct(d.variant, d.baseline),
                    "significant": d.significant,
                    "status": "ok",
                }
            )
    return rows


def failure_rows(a: Analysis) -> list[dict[str, Any]]:
    rows = []
    for v in a.variants:
        for f in a.results.variant(v).failures():
            rows.append(
                {
                    "experiment": f.experiment.split("/")[0],
                    "variant": v,
                    "setting": f.experiment,
                    "quantity": "result",
                    "status": f.status,
                    "reason": f.reason or None,
                }
            )
        for f in a.results.variant(v).of(schemas.ACCURACY.name):  # one failed task in an ok file
            for r in f.rows:
                if r.get("status") not in (None, schemas.STATUS_OK):
                    rows.append(
                        {
                            "experiment": "accuracy",
                            "variant": v,
                            "setting": r.get("task"),
                            "quantity": "result",
                            "status": r["status"],
                            "reason": r.get("reason"),
                        }
                    )
    for name, f in a.results.aggregates.items():
        if not f.ok:
            rows.append({"experiment": name, "quantity": "result", "status": f.status, "reason": f.reason or None})
    return rows


def experiment_rows(a: Analysis) -> list[dict[str, Any]]:
    return prefix_rows(a) + spec_rows(a) + kv_dtype_rows(a) + failure_rows(a)


# -------------------------------------------------------------------------------------- capability
def capability_rows(a: Analysis) -> list[dict[str, Any]]:
    rows: list[dict[str, Any]] = []
    ok = [lv for v in a.variants for lv in a.levels[v] if lv.ok]
    lowest = min((lv.concurrency for lv in ok), default=None)
    tp = [lv for lv in ok if lv.tpot_p50.value is not None and lv.concurrency == lowest]
    if tp:
        lv = min(tp, key=lambda x: x.tpot_p50.value or math.inf)
        cap = a.capacity[lv.variant]
        mbu = (
            f"MBU {cap.mbu:.0%} of {cap.bandwidth.gb_s:g} GB/s"
            if cap.mbu is not None and cap.bandwidth
            else "MBU n/a (peak bandwidth unknown)"
        )
        rows.append(
            {
                "quantity": "fastest TPOT P50 (lowest concurrency)",
                **_m("value", lv.tpot_p50),
                "unit": "ms",
                "variant": lv.variant,
                "note": f"concurrency {lv.concurrency}; {mbu}",
            }
        )
    th = [lv for lv in ok if lv.output_tok_per_s.value is not None]
    if th:
        lv = max(th, key=lambda x: x.output_tok_per_s.value or 0)
        cap = a.capacity[lv.variant]
        rows.append(
            {
                "quantity": "highest output throughput",
                **_m("value", lv.output_tok_per_s),
                "unit": "tok/s",
                "variant": lv.variant,
                "note": f"concurrency {lv.concurrency}; {cap.bound}",
            }
        )
    kv = [c for c in a.capacity.values() if c.num_blocks]
    if kv:
        c = max(kv, key=lambda x: x.num_blocks or 0)
        rows.append(
            {
                "quantity": "KV capacity",
                **_m("value", Measure(float(c.num_blocks or 0), 1, exact=True)),
                "unit": "blocks",
                "variant": c.variant,
                "note": f"{c.kv_cache_gib:.2f} GiB; critical concurrency {c.kv_critical_concurrency:.0f}"
                if c.kv_cache_gib is not None and c.kv_critical_concurrency is not None
                else None,
            }
        )
    saving = [r for r in prefix_rows(a) if r["quantity"] == "TTFT P50" and r.get("change_pct") is not None]
    if saving:
        r = min(saving, key=lambda x: x["change_pct"])
        rows.append(
            {
                "quantity": "largest prefill saving (TTFT)",
                "value": r["change_pct"],
                "unit": "%",
                "value_n": r.get("value_n"),
                "variant": r["variant"],
                "note": f"{r['setting']}; bounded by the shared-prefix length",
            }
        )
    return rows


# ------------------------------------------------------------------------------------- deployments
def model_ref(cfg: Mapping[str, Any], variant: str) -> str:
    """What `vllm serve` should load: the hub id or local folder of the variant's model."""
    model = ((cfg.get("variants") or {}).get(variant) or {}).get("model", variant)
    src = str(((cfg.get("models") or {}).get(model) or {}).get("source", ""))
    kind, _, rest = src.partition(":")
    if kind in ("hf", "modelscope"):
        return rest.split("@", 1)[0]
    if kind == "path":
        return rest
    return f"resources/models/{model}/model"


def serve_command(a: Analysis, variant: str, max_num_seqs: int) -> str:
    args = {
        k: val for k, val in a.engine_args[variant].items() if str(k).lstrip("-").replace("_", "-") != "max-num-seqs"
    }
    args["max-num-seqs"] = max_num_seqs
    return shlex.join(["vllm", "serve", model_ref(a.cfg, variant), *engine_flags(args, a.extra_args[variant])])


def _meets(lv: LevelFigures, a: Analysis) -> bool:
    s = a.slo
    return (s.tpot_ms is None or (lv.tpot_p99.value is not None and lv.tpot_p99.value <= s.tpot_ms)) and (
        s.ttft_ms is None or (lv.ttft_p99.value is not None and lv.ttft_p99.value <= s.ttft_ms)
    )


def deployable(a: Analysis, vs: Sequence[Verdict]) -> list[str]:
    """The baseline and every variant the rules adopt (or that match it within noise)."""
    good = {x.variant for x in vs if x.verdict in (ADOPT, NO_DIFFERENCE)}
    return [v for v in a.variants if v == a.baseline or v in good]


def _deploy_row(a: Analysis, scenario: str, lv: LevelFigures, why: str) -> dict[str, Any]:
    return {
        "scenario": scenario,
        "variant": lv.variant,
        "max_num_seqs": lv.concurrency,
        "command": serve_command(a, lv.variant, lv.concurrency),
        "status": "ok",
        "reason": why,
        **_m("tpot_ms_p50", lv.tpot_p50),
        **_m("tpot_ms_p99", lv.tpot_p99),
        **_m("ttft_ms_p50", lv.ttft_p50),
        **_m("ttft_ms_p99", lv.ttft_p99),
        **_m("output_tok_per_s", lv.output_tok_per_s),
        **_m("goodput_tok_per_s", lv.goodput_tok_per_s),
    }


def deployment_rows(a: Analysis, vs: Sequence[Verdict]) -> list[dict[str, Any]]:
    cands = [lv for v in deployable(a, vs) for lv in a.levels[v] if lv.ok]
    rows = []
    meet = [lv for lv in cands if _meets(lv, a)]
    slo = ", ".join(f"{k} <= {getattr(a.slo, k):g}" for k in ("ttft_ms", "tpot_ms") if getattr(a.slo, k) is not None)
    if meet:
        lv = max(meet, key=lambda x: (x.concurrency, -(x.tpot_p50.value or math.inf)))
        rows.append(
            _deploy_row(
                a,
                "latency",
                lv,
                f"highest concurrency whose P99 meets the SLO ({slo or 'none set'}); lowest TPOT P50 among those",
            )
        )
    else:
        rows.append(
            {
                "scenario": "latency",
                "status": schemas.STATUS_NOT_APPLICABLE,
                "reason": f"no measured level meets the SLO at P99 ({slo})" if cands else "no load levels",
            }
        )
    gp = [lv for lv in cands if lv.goodput_tok_per_s.value]
    if gp:
        lv = max(gp, key=lambda x: x.goodput_tok_per_s.value or 0.0)
        rows.append(
            _deploy_row(
                a,
                "throughput",
                lv,
                "highest goodput under the SLO" if slo else "highest output throughput (no SLO set)",
            )
        )
    else:
        rows.append(
            {
                "scenario": "throughput",
                "status": schemas.STATUS_NOT_APPLICABLE,
                "reason": "no level has goodput under the SLO" if cands else "no load levels",
            }
        )
    return rows


# -------------------------------------------------------------------------------------- rendering
def fmt(x: Any, digits: int = 1) -> str:
    if x is None or (isinstance(x, float) and math.isnan(x)):
        return "–"
    if isinstance(x, bool):
        return "yes" if x else "no"
    if isinstance(x, float):
        return f"{x:,.{digits}f}"
    return f"{x:,}" if isinstance(x, int) else str(x).replace("|", "\\|").replace("\n", " ")


def fmt_measure(r: Mapping[str, Any], key: str, digits: int = 1) -> str:
    v = r.get(key)
    if v is None or (isinstance(v, float) and math.isnan(v)):
        return "–"
    lo, hi, n = r.get(f"{key}_ci95_low"), r.get(f"{key}_ci95_high"), r.get(f"{key}_n")
    out = fmt(float(v), digits)
    if lo is not None and hi is not None and not (lo == hi == v):
        out += f" [{fmt(float(lo), digits)}, {fmt(float(hi), digits)}]"
    elif not (lo == hi == v):
        out += " [no CI]"
    if n is not None and not (isinstance(n, float) and math.isnan(n)):
        out += f" n={int(n)}"
    return out


def markdown(
    rows: Sequence[Mapping[str, Any]], columns: Iterable[tuple[str, str]], measures: Iterable[str] = ()
) -> str:
    cols, ms = list(columns), set(measures)
    lines = ["| " + " | ".join(h for _, h in cols) + " |", "|" + "---|" * len(cols)]
    for r in rows:
        lines.append("| " + " | ".join(fmt_measure(r, c) if c in ms else fmt(r.get(c)) for c, _ in cols) + " |")
    return "\n".join(lines) if rows else "_no rows_"


# what each table shows in Markdown/HTML: (columns, measure columns)
VIEWS: dict[str, tuple[tuple[tuple[str, str], ...], tuple[str, ...]]] = {
    "report_verdicts": (
        (
            ("variant", "optimisation"),
            ("description", "what it changes"),
            ("benefit", "benefit"),
            ("accuracy_cost", "accuracy cost"),
            ("effort", "effort"),
            ("verdict", "verdict"),
            ("reason", "reason"),
        ),
        (),
    ),
    "report_deployments": (
        (
            ("scenario", "scenario"),
            ("variant", "variant"),
            ("max_num_seqs", "max-num-seqs"),
            ("tpot_ms_p50", "TPOT P50 ms"),
            ("ttft_ms_p50", "TTFT P50 ms"),
            ("ttft_ms_p99", "TTFT P99 ms"),
            ("output_tok_per_s", "output tok/s"),
            ("goodput_tok_per_s", "goodput tok/s"),
            ("reason", "why"),
        ),
        ("tpot_ms_p50", "ttft_ms_p50", "ttft_ms_p99", "output_tok_per_s", "goodput_tok_per_s"),
    ),
    "report_comparison": (
        (
            ("variant", "variant"),
            ("quantity", "quantity"),
            ("unit", "unit"),
            ("baseline_value", "baseline"),
            ("value", "variant value"),
            ("change_pct", "change %"),
            ("change_pt", "change pt"),
            ("significant", "significant"),
            ("reason", "note"),
        ),
        ("baseline_value", "value"),
    ),
    "report_experiments": (
        (
            ("experiment", "experiment"),
            ("variant", "variant"),
            ("setting", "setting"),
            ("quantity", "quantity"),
            ("value", "value"),
            ("unit", "unit"),
            ("reference", "reference"),
            ("reference_value", "reference value"),
            ("change_pct", "change %"),
            ("status", "status"),
            ("reason", "reason"),
        ),
        ("value",),
    ),
    "report_capability": (
        (
            ("quantity", "boundary"),
            ("value", "value"),
            ("unit", "unit"),
            ("variant", "variant"),
            ("note", "note"),
        ),
        ("value",),
    ),
    "report_capacity": (
        (
            ("variant", "variant"),
            ("num_blocks", "KV blocks"),
            ("kv_cache_gib", "KV GiB"),
            ("kv_critical_concurrency", "critical concurrency (KV)"),
            ("throughput_knee_concurrency", "throughput knee"),
            ("latency_knee_concurrency", "latency knee"),
            ("bound", "bound"),
            ("tpot_ms_p50", "TPOT P50 ms (lowest level)"),
            ("mbu", "MBU"),
            ("bandwidth_source", "peak bandwidth"),
        ),
        (),
    ),
    "report_levels": (
        (
            ("variant", "variant"),
            ("concurrency", "conc"),
            ("n", "n"),
            ("n_errors", "errors"),
            ("runs", "runs"),
            ("ttft_ms_p50", "TTFT P50 ms"),
            ("ttft_ms_p99", "TTFT P99 ms"),
            ("tpot_ms_p50", "TPOT P50 ms"),
            ("tpot_ms_p99", "TPOT P99 ms"),
            ("output_tok_per_s", "output tok/s"),
            ("goodput_tok_per_s", "goodput tok/s"),
            ("status", "status"),
            ("reason", "reason"),
        ),
        ("ttft_ms_p50", "ttft_ms_p99", "tpot_ms_p50", "tpot_ms_p99", "output_tok_per_s", "goodput_tok_per_s"),
    ),
}


def _run_range(r: Mapping[str, Any], key: str) -> str | None:
    lo, hi = r.get(f"runs_{key}_min"), r.get(f"runs_{key}_max")
    if lo is None or hi is None or (isinstance(lo, float) and math.isnan(lo)):
        return None
    return f"{fmt(float(lo))}–{fmt(float(hi))}"


def shown(
    table: str, rows: Sequence[Mapping[str, Any]]
) -> tuple[tuple[tuple[str, str], ...], tuple[str, ...], list[Mapping[str, Any]]]:
    """What a table shows (Markdown and HTML alike): its columns, measure columns and display rows."""
    cols, ms = VIEWS[table]
    out: list[Mapping[str, Any]] = list(rows)
    if table == "report_capacity":
        out = [{**r, "mbu": f"{r['mbu']:.0%}" if r.get("mbu") is not None else "n/a"} for r in out]
    if table == "report_levels" and any((r.get("runs") or 0) > 1 for r in out):
        # repeated levels (loadtest.repeats): the run-to-run spread next to the interval over runs
        out = [
            {**r, "tpot_runs": _run_range(r, "tpot_ms_p50"), "tps_runs": _run_range(r, "output_tok_per_s")} for r in out
        ]
        at = [c for c, _ in cols].index("output_tok_per_s") + 1
        cols = (
            *cols[:at],
            ("tpot_runs", "TPOT P50 per run (min–max)"),
            ("tps_runs", "output tok/s per run (min–max)"),
            *cols[at:],
        )
    return cols, ms, out


def view(table: str, rows: Sequence[Mapping[str, Any]]) -> str:
    cols, ms, out = shown(table, rows)
    return markdown(out, cols, ms)


def build(a: Analysis) -> dict[str, list[dict[str, Any]]]:
    """Every report table's rows, keyed by table name (verdicts first)."""
    vs = verdicts(a)
    return {
        schemas.REPORT_VERDICTS.name: verdict_rows(a, vs),
        schemas.REPORT_DEPLOYMENTS.name: deployment_rows(a, vs),
        schemas.REPORT_COMPARISON.name: comparison_rows(a),
        schemas.REPORT_EXPERIMENTS.name: experiment_rows(a),
        schemas.REPORT_CAPABILITY.name: capability_rows(a),
        schemas.REPORT_CAPACITY.name: capacity_rows(a),
        schemas.REPORT_LEVELS.name: level_rows(a),
    }


TITLES = {
    "report_verdicts": "Verdicts",
    "report_deployments": "Recommended deployments",
    "report_comparison": "Baseline vs optimised",
    "report_experiments": "Other experiments",
    "report_capability": "Capability boundary",
    "report_capacity": "Critical concurrency, knees and MBU",
    "report_levels": "Load levels (n and 95% intervals)",
}


def write(
    a: Analysis, tables: Mapping[str, list[dict[str, Any]]], outdir: str | Path, metadata: Mapping[str, Any]
) -> dict[str, Path]:
    """Each table as Parquet (schema module), CSV and Markdown, plus tables.md with all of them."""
    out = Path(outdir)
    out.mkdir(parents=True, exist_ok=True)
    written: dict[str, Path] = {}
    parts = [f"# {a.study}: study report", "", f"Baseline: `{a.baseline}`.", ""]
    for name, rows in tables.items():
        t = schemas.TABLES[name]
        short = name.removeprefix("report_")
        written[short] = schemas.write(out / f"{short}.parquet", t, rows, metadata=metadata)
        df = pd.DataFrame(rows, columns=t.columns)
        tmp = out / f".{short}.csv.tmp"
        df.to_csv(tmp, index=False)
        tmp.replace(out / f"{short}.csv")
        parts += [f"## {TITLES[name]}", "", view(name, rows), ""]
        if name == schemas.REPORT_DEPLOYMENTS.name:
            parts += [f"- **{r['scenario']}**: `{r['command']}`" for r in rows if r.get("command")] + [""]
    tmp = out / ".tables.md.tmp"
    tmp.write_text("\n".join(parts))
    tmp.replace(out / "tables.md")
    return written

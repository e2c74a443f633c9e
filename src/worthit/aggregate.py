"""Results -> the study's summary table (Parquet + Markdown).

Reads every variant's KV and load-level files through the schema module, reduces each level with
:mod:`worthit.metrics` (as Arrow columns, not rows), and writes one row per variant x level. Failed
experiments become rows with their status and reason, so the summary always has every variant.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Mapping, Sequence
from pathlib import Path
from typing import Any

import pandas as pd

from worthit import atomic, fmt, prom, schemas
from worthit.experiments.kv.tables import KV_CACHE
from worthit.loadgen.levels import summary_columns
from worthit.metrics import Slo, summarize
from worthit.stats import NO_CHANGE, RULE_OF_THREE, Z_95, combined_stderr, noninferiority, normal_ci95


def summary_rows(
    kv_files: Mapping[str, str], load_files: Mapping[str, Sequence[str]], slo: Slo
) -> list[dict[str, Any]]:
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
            res = schemas.read(path, schemas.LOAD_REQUESTS)
            conc, run = res.metadata.get("concurrency"), int(res.metadata.get("repeat") or 1)
            if not res.ok:
                level_rows.append(
                    {
                        "variant": variant,
                        "status": res.status,
                        "reason": res.reason,
                        "concurrency": conc,
                        "run": run,
                        **kv_cols,
                        **summary_columns(res.metadata),
                    }
                )
                continue
            s = summarize(res.table, slo)
            first_conc = res.table.column("concurrency")[0].as_py() if res.table.num_rows else None
            level = summary_columns(res.metadata)
            undelivered = level.get("rate_delivered") is False  # an open-loop rate the client fell short of
            traffic = res.metadata.get("traffic")
            shared = isinstance(traffic, dict) and bool(traffic.get("shared"))  # another client on the server
            level_rows.append(
                {
                    "variant": variant,
                    "status": schemas.STATUS_FAILED if shared else status,
                    "reason": prom.traffic_reason(traffic)  # type: ignore[arg-type]
                    if shared
                    else (res.metadata.get("rate_reason") if undelivered else reason),
                    "concurrency": conc if conc is not None else first_conc,
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
                    **level,
                }
            )
        # runs of a level next to each other (they are measured round after round)
        rows += sorted(level_rows, key=lambda r: (r["concurrency"] or 0, r["run"]))
    return rows


def markdown_table(df: pd.DataFrame, columns: Iterable[tuple[str, str]]) -> str:
    """A DataFrame's rows as a Markdown table (cells as :func:`worthit.fmt.cell` writes them)."""
    return fmt.markdown_table(df.to_dict("records"), columns)


def failures_section(failed: pd.DataFrame, setting: tuple[str, str]) -> list[str]:
    """The Markdown section listing failed or not-applicable rows (nothing when there are none)."""
    if not len(failed):
        return []
    cols = (("variant", "variant"), setting, ("status", "status"), ("reason", "reason"))
    return ["## Failed or not applicable", "", markdown_table(failed, cols), ""]


def write_markdown(path: str | Path, parts: list[str]) -> None:
    """Write a Markdown page atomically (temp file, then rename)."""
    atomic.write_text(path, "\n".join(parts))


SUMMARY_COLUMNS = (
    ("variant", "variant"),
    ("concurrency", "conc"),
    ("n", "n"),
    ("n_errors", "errors"),
    ("ttft_ms_p50", "TTFT P50 ms"),
    ("ttft_ms_p99", "TTFT P99 ms"),
    ("tpot_ms_p50", "TPOT P50 ms"),
    ("tpot_ms_p99", "TPOT P99 ms"),
    ("output_tok_per_s", "output tok/s"),
    ("requests_per_s", "req/s"),
    ("goodput_tok_per_s", "goodput tok/s"),
)
KV_COLUMNS = (
    ("variant", "variant"),
    ("num_blocks", "KV blocks"),
    ("kv_tokens", "KV tokens"),
    ("kv_cache_gib", "KV GiB"),
    ("critical_concurrency", "critical concurrency"),
)


OPEN_LOOP_COLUMNS = (
    ("variant", "variant"),
    ("level", "level"),
    ("run", "run"),
    ("request_rate_per_s", "target req/s"),
    ("achieved_rate_per_s", "achieved req/s"),
    ("queue_delay_ms_p50", "client queue P50 ms"),
    ("queue_delay_ms_p99", "client queue P99 ms"),
    ("rate_delivered", "delivered"),
    ("reason", "why not"),
)


def open_loop_section(ok: pd.DataFrame) -> list[str]:
    """Open-loop levels: the rate asked for, the rate the client achieved, its queueing delay, and whether
    it delivered the level (one it did not deliver measured a lower rate than its name says)."""
    rates = ok[ok["rate_delivered"].notna()]
    if not len(rates):
        return []
    return ["## Open-loop levels", "", markdown_table(rates, OPEN_LOOP_COLUMNS), ""]


def write_summary(
    rows: list[dict[str, Any]], parquet: str | Path, md: str | Path, study: str, metadata: Mapping[str, Any]
) -> None:
    schemas.write(parquet, schemas.SUMMARY, rows, metadata=metadata)
    df = pd.DataFrame(rows, columns=schemas.SUMMARY.columns)
    # counts stay integers in the Markdown even where a failed variant leaves them empty
    for col in ("concurrency", "run", "n", "n_errors", "n_warmup", "num_blocks", "kv_tokens"):
        df[col] = df[col].astype("Int64")
    ok = df[df["status"] == schemas.STATUS_OK]
    kv = df.drop_duplicates("variant")
    failed = df[df["status"] != schemas.STATUS_OK].drop_duplicates(["variant", "reason"])
    columns: tuple[tuple[str, str], ...] = SUMMARY_COLUMNS
    if (df["run"].fillna(1) > 1).any():  # repeated levels: one row per run, the spread is in plain sight
        columns = (*SUMMARY_COLUMNS[:2], ("run", "run"), *SUMMARY_COLUMNS[2:])
    if df["level"].notna().any():  # levels other than plain concurrencies: each named
        columns = (columns[0], ("level", "level"), *columns[1:])
    parts = [
        f"# {study}: summary",
        "",
        "## Load levels",
        "",
        markdown_table(ok, columns),
        "",
        *open_loop_section(ok),
        "## KV cache",
        "",
        markdown_table(kv, KV_COLUMNS),
        "",
    ]
    write_markdown(md, parts + failures_section(failed, ("concurrency", "conc")))


# ---------------------------------------------------------------------------------------------- accuracy
ACCURACY_COLUMNS = (
    ("variant", "variant"),
    ("task", "task"),
    ("metric", "metric"),
    ("filter", "filter"),
    ("n", "n"),
    ("num_fewshot", "shots"),
    ("value", "score"),
    ("stderr", "± stderr"),
    ("delta_pt", "Δ vs baseline pt"),
    ("delta_ci95", "95% interval pt"),
    ("delta_method", "method"),
    ("max_drop_pt", "max drop pt"),
    ("decision", "decision"),
)


def accuracy_delta(
    value: float | None, stderr: float | None, base: float | None, base_stderr: float | None
) -> tuple[float | None, float | None]:
    """Change vs the baseline in percentage points and its standard error, the two scores taken as
    independent (their standard errors combined).

    The two scores come from the same items, so treating them as independent overstates the error of the
    difference: the fallback when lm-eval's per-document samples are missing.
    """
    if value is None or base is None or pd.isna(value) or pd.isna(base):
        return None, None
    delta = (value - base) * 100
    if stderr is None or base_stderr is None or pd.isna(stderr) or pd.isna(base_stderr):
        return delta, None
    return delta, combined_stderr(stderr, base_stderr) * 100


def paired_delta(
    scores: Mapping[int, float | None], base: Mapping[int, float | None]
) -> tuple[float | None, float | None, int]:
    """Change vs the baseline over the documents both scored, in points: delta, its stderr, n.

    Both variants answer the same documents, so the error of the change is that of the mean per-document
    difference, far smaller than the two scores' errors combined when most answers agree.
    """
    diffs = [
        float(s) - float(b)
        for d in scores.keys() & base.keys()
        if (s := scores[d]) is not None and (b := base[d]) is not None
    ]
    n = len(diffs)
    if n < 2:
        return None, None, n
    mean = sum(diffs) / n
    var = sum((x - mean) ** 2 for x in diffs) / (n - 1)
    return mean * 100, (var / n) ** 0.5 * 100, n


def task_delta(
    scores: Mapping[int, float | None],
    base_scores: Mapping[int, float | None],
    row: Mapping[str, Any],
    base: Mapping[str, Any],
) -> tuple[float, float | None, int, str] | None:
    """The change of one task's score vs the baseline, computed one way everywhere (the accuracy summary,
    the report's accuracy table, the verdicts): (delta pt, its standard error, n, method).

    paired over the documents both scored where per-document scores exist; where no document changed,
    the standard error that puts the rule-of-three bound (3.69 / n) at the 95% limit; otherwise unpaired
    from the two scores' standard errors (n: the variant's items). None when there is no change to give."""
    d, se, n = paired_delta(scores, base_scores)
    method = "paired"
    if se == 0 and n:
        method, se = NO_CHANGE, RULE_OF_THREE / n * 100 / Z_95
    if se is None:
        d, se = accuracy_delta(row.get("value"), row.get("stderr"), base.get("value"), base.get("stderr"))
        method, n = "unpaired", int(row.get("n") or 0)
    return None if d is None else (float(d), se, int(n), method)


def _per_doc(path: str) -> dict[tuple[Any, Any, Any], dict[int, float | None]]:
    res = schemas.read(path, schemas.ACCURACY_SAMPLES)
    out: dict[tuple[Any, Any, Any], dict[int, float | None]] = {}
    for r in res.table.to_pylist() if res.ok else []:
        out.setdefault((r["task"], r["metric"], r["filter"]), {})[r["doc_id"]] = r["value"]
    return out


def accuracy_rows(
    files: Mapping[str, str],
    baseline: str,
    sample_files: Mapping[str, str] | None = None,
    max_drop_pt: Callable[[str], float] = lambda task: 3.0,
) -> list[dict[str, Any]]:
    """Every variant's accuracy.parquet -> rows with the change vs ``baseline`` (same task/metric/filter)
    and the non-inferiority decision against ``max_drop_pt(task)`` (:func:`task_delta`,
    :func:`worthit.stats.noninferiority`: the numbers the report shows).

    With ``sample_files`` (each variant's accuracy_samples.parquet) the change and its error are paired
    over the documents both variants scored; otherwise the two scores' stderrs are combined.
    """
    per_doc = {v: _per_doc(p) for v, p in (sample_files or {}).items()}
    base_docs = per_doc.get(baseline, {})
    per_variant: dict[str, list[dict[str, Any]]] = {}
    for variant, path in files.items():
        res = schemas.read(path, schemas.ACCURACY)
        if not res.ok:
            per_variant[variant] = [{"variant": variant, "status": res.status, "reason": res.reason}]
            continue
        per_variant[variant] = [
            {k: r.get(k) for k in schemas.ACCURACY_SUMMARY.columns if k in r} for r in res.table.to_pylist()
        ]
    base = {
        (r.get("task"), r.get("metric"), r.get("filter")): r
        for r in per_variant.get(baseline, [])
        if r.get("status") == schemas.STATUS_OK
    }
    rows: list[dict[str, Any]] = []
    for recs in per_variant.values():
        for r in recs:
            row = {**r, "status": r.get("status") or schemas.STATUS_OK}
            key = (r.get("task"), r.get("metric"), r.get("filter"))
            b = base.get(key)
            if b is not None and row["status"] == schemas.STATUS_OK:
                found = task_delta(per_doc.get(r["variant"], {}).get(key, {}), base_docs.get(key, {}), r, b)
                d, se, n, method = found if found is not None else (None, None, None, None)
                bound = float(max_drop_pt(str(r.get("task"))))
                lo, hi = normal_ci95(d, se)
                row.update(
                    baseline_variant=baseline,
                    baseline_value=b.get("value"),
                    baseline_stderr=b.get("stderr"),
                    delta_pt=d,
                    delta_stderr_pt=se,
                    delta_ci95_low_pt=lo,
                    delta_ci95_high_pt=hi,
                    delta_method=method,
                    n_paired=n if method not in (None, "unpaired") else None,
                    max_drop_pt=bound,
                    decision=noninferiority(d, se, bound) if d is not None else None,
                )
            rows.append(row)
    return rows


def write_accuracy_summary(
    rows: list[dict[str, Any]],
    parquet: str | Path,
    md: str | Path,
    study: str,
    baseline: str,
    metadata: Mapping[str, Any],
) -> None:
    schemas.write(parquet, schemas.ACCURACY_SUMMARY, rows, metadata=metadata)
    df = pd.DataFrame(rows, columns=schemas.ACCURACY_SUMMARY.columns)
    ok = df[df["status"] == schemas.STATUS_OK].copy()
    for col in ("value", "stderr"):
        ok[col] = ok[col] * 100
    ok["delta_ci95"] = [
        f"[{lo:+.1f}, {hi:+.1f}]" if pd.notna(lo) and pd.notna(hi) else "no interval"
        for lo, hi in zip(ok["delta_ci95_low_pt"], ok["delta_ci95_high_pt"], strict=True)
    ]
    failed = df[df["status"] != schemas.STATUS_OK]
    parts = [
        f"# {study}: accuracy",
        "",
        f"Scores and standard errors in percent; Δ in percentage points vs `{baseline}` with its 95% interval "
        "(paired over the documents both variants scored where their per-document scores exist, else unpaired). "
        "Decision (non-inferiority): acceptable when the interval lies above −(max drop), unacceptable when it "
        "lies below, inconclusive when it straddles it.",
        "",
        markdown_table(ok, ACCURACY_COLUMNS),
        "",
    ]
    if len(failed):
        parts += [
            "## Failed",
            "",
            markdown_table(
                failed, (("variant", "variant"), ("task", "task"), ("status", "status"), ("reason", "reason"))
            ),
            "",
        ]
    write_markdown(md, parts)

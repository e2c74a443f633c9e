"""The accuracy summary: every variant's scores against the baseline's, task by task, with the change in
points, its standard error (paired over the documents both scored where lm-eval's per-document samples
exist) and the non-inferiority decision; ``accuracy_summary.parquet`` and ``.md``. The report's accuracy
table and the verdicts take their change from :func:`task_delta` too, so the numbers are one everywhere.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from pathlib import Path
from typing import Any

import pandas as pd

from worthit import schemas
from worthit.aggregate import markdown_table, write_markdown
from worthit.experiments.accuracy.tables import ACCURACY, ACCURACY_SAMPLES, ACCURACY_SUMMARY
from worthit.stats import NO_CHANGE, RULE_OF_THREE, Z_95, combined_stderr, noninferiority, normal_ci95

ACCURACY_COLUMNS = (
    ("variant", "variant"),
    ("task", "task"),
    ("metric", "metric"),
    ("filter", "filter"),
    ("n", "n"),
    ("num_fewshot", "shots"),
    ("value", "score"),
    ("stderr", "± stderr"),
    ("baseline_variant", "vs"),
    ("delta_pt", "Δ pt"),
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
    res = schemas.read(path, ACCURACY_SAMPLES)
    out: dict[tuple[Any, Any, Any], dict[int, float | None]] = {}
    for r in res.table.to_pylist() if res.ok else []:
        out.setdefault((r["task"], r["metric"], r["filter"]), {})[r["doc_id"]] = r["value"]
    return out


def accuracy_rows(
    files: Mapping[str, str],
    baseline: str,
    sample_files: Mapping[str, str] | None = None,
    max_drop_pt: Callable[[str], float] = lambda task: 3.0,
    baseline_of: Callable[[str], str] | None = None,
) -> list[dict[str, Any]]:
    """Every variant's accuracy.parquet -> rows with the change vs the variant it is judged against (same
    task/metric/filter) and the non-inferiority decision against ``max_drop_pt(task)`` (:func:`task_delta`,
    :func:`worthit.stats.noninferiority`: the numbers the report shows).

    ``baseline_of(variant)`` names that variant (the study's :meth:`worthit.config.Study.baseline_of`: a
    variant's own ``baseline:``, else ``baseline_variant``), as the report pairs them; without it every variant
    is compared with ``baseline``. A variant judged against one that measured no accuracy gets no change.

    With ``sample_files`` (each variant's accuracy_samples.parquet) the change and its error are paired
    over the documents both variants scored; otherwise the two scores' stderrs are combined.
    """
    per_doc = {v: _per_doc(p) for v, p in (sample_files or {}).items()}
    per_variant: dict[str, list[dict[str, Any]]] = {}
    for variant, path in files.items():
        res = schemas.read(path, ACCURACY)
        if not res.ok:
            per_variant[variant] = [{"variant": variant, "status": res.status, "reason": res.reason}]
            continue
        per_variant[variant] = [
            {k: r.get(k) for k in ACCURACY_SUMMARY.columns if k in r} for r in res.table.to_pylist()
        ]

    def scored(variant: str) -> dict[tuple[Any, Any, Any], dict[str, Any]]:
        return {
            (r.get("task"), r.get("metric"), r.get("filter")): r
            for r in per_variant.get(variant, [])
            if r.get("status") == schemas.STATUS_OK
        }

    rows: list[dict[str, Any]] = []
    for variant, recs in per_variant.items():
        against = baseline_of(variant) if baseline_of is not None else baseline
        base = scored(against)
        base_docs = per_doc.get(against, {})
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
                    baseline_variant=against,
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
    *,
    baseline: str,
    metadata: Mapping[str, Any],
) -> None:
    schemas.write(parquet, ACCURACY_SUMMARY, rows, metadata=metadata)
    df = pd.DataFrame(rows, columns=ACCURACY_SUMMARY.columns)
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
        "Scores and standard errors in percent; Δ in percentage points vs the variant each is judged against "
        f"(its own `baseline:`, else `{baseline}`) with its 95% interval "
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

"""The accuracy experiment's tables (lm-eval): scores per task, per-document scores, and the comparison
with the baseline."""

from __future__ import annotations

import pyarrow as pa

from worthit.schemas.definition import VARIANT, Table, column
from worthit.schemas.report import REPORT_STATUS, measure_columns

ACCURACY = Table(
    "accuracy",
    "lm-eval results for one variant, a row per task, metric and filter; a task that failed or timed out "
    "is one row with status failed, its reason and a null metric.",
    (
        VARIANT,
        column("task", pa.string(), "lm-eval task name", False),
        column("metric", pa.string(), "metric name (acc, acc_norm, exact_match, ...); null when the task failed"),
        column("filter", pa.string(), "lm-eval filter the metric was computed after"),
        column("status", pa.string(), "ok / failed"),
        column("reason", pa.string(), "why the task failed; null when ok"),
        column("value", pa.float64(), "score in [0, 1]"),
        column("stderr", pa.float64(), "lm-eval's bootstrap / analytic standard error"),
        column("n", pa.int32(), "samples evaluated"),
        column("num_fewshot", pa.int32(), "few-shot examples per prompt"),
        column("lm_eval_version", pa.string(), "lm-eval version"),
        column("duration_s", pa.float64(), "wall time of the task's lm-eval run"),
    ),
)

ACCURACY_SAMPLES = Table(
    "accuracy_samples",
    "Per-document scores of one variant from lm-eval's sample logs, so variants can be compared pairwise.",
    (
        VARIANT,
        column("task", pa.string(), "lm-eval task name", False),
        column("metric", pa.string(), "metric name", False),
        column("filter", pa.string(), "lm-eval filter", False),
        column("doc_id", pa.int32(), "lm-eval's document index within the task's evaluated split", False),
        column("value", pa.float64(), "the document's score (1/0 for acc and exact_match)"),
    ),
)

ACCURACY_SUMMARY = Table(
    "accuracy_summary",
    "Accuracy per variant x task x metric next to the baseline variant's, with the change, its 95% interval "
    "(paired over the same documents where both variants' per-document scores exist, else from "
    "sqrt(stderr^2 + baseline stderr^2)) and the non-inferiority decision against the task's max drop: the "
    "numbers the report's accuracy table and verdicts use.",
    (
        VARIANT,
        column("status", pa.string(), "ok / failed", False),
        column("reason", pa.string(), "why the task or variant failed"),
        column("task", pa.string(), "lm-eval task name"),
        column("metric", pa.string(), "metric name"),
        column("filter", pa.string(), "lm-eval filter"),
        column("value", pa.float64(), "score in [0, 1]"),
        column("stderr", pa.float64(), "standard error of value"),
        column("n", pa.int32(), "samples evaluated"),
        column("num_fewshot", pa.int32(), "few-shot examples per prompt"),
        column("baseline_variant", pa.string(), "the variant compared with"),
        column("baseline_value", pa.float64(), "the baseline variant's score on the same task, metric, filter"),
        column("baseline_stderr", pa.float64(), "its standard error"),
        column("delta_pt", pa.float64(), "(value - baseline_value) x 100, in percentage points"),
        column("delta_stderr_pt", pa.float64(), "standard error of delta_pt (see delta_method)"),
        column(
            "delta_method",
            pa.string(),
            "paired: std of per-document differences / sqrt(n_paired); 'paired, no document changed': the "
            "rule-of-three bound 3.69 / n_paired as the 95% limit; unpaired: sqrt(se^2 + se_base^2)",
        ),
        column("n_paired", pa.int32(), "documents scored by both variants (paired methods)"),
        column("delta_ci95_low_pt", pa.float64(), "95% interval of delta_pt, low (delta - 1.96 x delta_stderr_pt)"),
        column("delta_ci95_high_pt", pa.float64(), "95% interval of delta_pt, high"),
        column("max_drop_pt", pa.float64(), "the task's bound: decide.max_accuracy_drop_pt(_by_task)"),
        column(
            "decision",
            pa.string(),
            "acceptable (interval above -max_drop_pt), unacceptable (below) or inconclusive (straddles it)",
        ),
    ),
)


REPORT_ACCURACY = Table(
    "report_accuracy",
    "Report: accuracy as a non-inferiority decision per variant x task: the change vs the baseline with its "
    "95% interval (paired over the documents both scored where lm-eval's samples exist, else the two "
    "standard errors combined), set against -decide.max_accuracy_drop_pt.",
    (
        VARIANT,
        column("baseline", pa.string(), "the variant compared with"),
        column("task", pa.string(), "lm-eval task"),
        column("metric", pa.string(), "the metric compared (acc_norm, acc, exact_match, ...)"),
        column("filter", pa.string(), "lm-eval filter"),
        column("baseline_value_pct", pa.float64(), "the baseline's score in %"),
        column("value_pct", pa.float64(), "the variant's score in %"),
        *measure_columns("delta_pt", "variant - baseline in percentage points"),
        column("delta_stderr_pt", pa.float64(), "standard error of delta_pt"),
        column("method", pa.string(), "paired (per-document differences) / unpaired (standard errors combined)"),
        column("bound_pt", pa.float64(), "the largest acceptable drop in points"),
        column("decision", pa.string(), "acceptable / unacceptable / inconclusive", False),
        column("items_needed", pa.int64(), "items that would decide an inconclusive task at the observed variance"),
        column("task_size", pa.int64(), "items the task has, where known"),
        column("note", pa.string(), "what the decision rests on, in words"),
        *REPORT_STATUS,
    ),
)

"""What the report core asks of the accuracy experiment (worthit.experiments.accuracy.report), through the hooks
it registers: the verdicts table's accuracy column, a failed task's row of the failures table, the lm-eval
version in the page's provenance, and whether a variant asks for accuracy."""

from __future__ import annotations

from pathlib import Path
from typing import Any

from worthit import schemas
from worthit.experiments.accuracy.report import EXPERIMENT
from worthit.experiments.accuracy.tables import ACCURACY
from worthit.report import build, experiments
from worthit.report.render import provenance


def _accuracy(results: Path, variant: str, rows: list[dict[str, Any]]) -> None:
    base = {"variant": variant, "metric": "acc", "filter": "none", "stderr": 0.02, "n": 400}
    schemas.write(results / f"variant~{variant}" / "accuracy.parquet", ACCURACY, [{**base, **r} for r in rows])


def test_the_verdicts_table_has_the_accuracy_column_after_the_regimes() -> None:
    assert experiments.REGISTRY[EXPERIMENT.name] is EXPERIMENT
    assert [(c.key, c.header) for c in experiments.verdict_columns()] == [("accuracy_outcome", "accuracy")]


def test_a_failed_task_in_an_ok_file_is_a_row_of_the_failures_table(results: Path, cfg: dict[str, Any]) -> None:
    _accuracy(
        results,
        "baseline",
        [
            {"task": "arc_easy", "status": "ok", "value": 0.75, "lm_eval_version": "0.4.13"},
            {"task": "gsm8k", "status": "failed", "reason": "lm-eval timed out"},
        ],
    )
    r = build.from_dir(cfg, results)
    failed = [x for x in r.rows(schemas.REPORT_FAILURES) if x["experiment"].startswith("accuracy/")]
    assert failed == [
        {"variant": "baseline", "experiment": "accuracy/gsm8k", "status": "failed", "reason": "lm-eval timed out"}
    ]
    prov = provenance(r.ctx)
    assert prov["lm_eval_version"] == "0.4.13"
    assert list(prov)[:3] == ["worthit_version", "vllm_version", "lm_eval_version"]  # the page's order
    assert experiments.asks_accuracy(r.ctx, "baseline") and not experiments.asks_accuracy(r.ctx, "no_prefix_cache")


def test_without_accuracy_results_the_provenance_says_no_lm_eval_version(results: Path, cfg: dict[str, Any]) -> None:
    assert provenance(build.from_dir(cfg, results).ctx)["lm_eval_version"] is None

"""The study-level tables beside the results reach the report page: the plan against the measurement
and what the study cost."""

from __future__ import annotations

from pathlib import Path

from worthit import schemas
from worthit.report.build import study_views


def test_plan_vs_measured_becomes_a_report_table_with_its_tolerance_verdicts(tmp_path: Path) -> None:
    rows = [
        {
            "variant": "bf16",
            "quantity": "kv_blocks",
            "unit": "blocks",
            "predicted": 127207.0,
            "measured": 128943.0,
            "ratio": 1.0136,
            "tolerance": 0.1,
            "tolerance_kind": "relative",
            "within_tolerance": True,
        },
        {
            "variant": "bf16",
            "quantity": "output_tok_per_s",
            "unit": "tok/s",
            "predicted": 13000.0,
            "measured": 7688.0,
            "ratio": 0.59,
            "tolerance": 1.5,
            "tolerance_kind": "factor",
            "within_tolerance": False,
            "flag": "under",
        },
        {"variant": "fp8", "quantity": "kv_blocks", "unit": "blocks", "predicted": 254000.0},
    ]
    schemas.write(tmp_path / "plan_vs_measured.parquet", schemas.PLAN_VS_MEASURED, rows)
    (view,) = study_views(tmp_path)
    assert view.table is schemas.PLAN_VS_MEASURED and len(view.rows) == 3
    assert [r["verdict"] for r in view.rows] == ["yes", "no: under", "not judged"]
    assert [r["tolerance_shown"] for r in view.rows] == ["±10%", "within 1.5x", ""]


def test_a_study_without_those_tables_adds_no_view(tmp_path: Path) -> None:
    assert study_views(tmp_path) == []

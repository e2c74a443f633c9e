"""A real A/A pair on vLLM (CPU): the baseline against a variant whose only difference is a flag that changes
nothing measurable (the sampling seed of an ignore-eos load) is neither adopted nor rejected: the verdict's
simultaneous intervals (docs/statistics.md, "Error rates per verdict") do not decide on nothing. The load is
the smallest that gives two runs a level."""

from __future__ import annotations

from pathlib import Path

import pytest

from tests.conftest import run_snakemake, study_config
from worthit import schemas

pytestmark = [pytest.mark.vllm, pytest.mark.slow]


def test_a_flag_that_changes_nothing_is_neither_adopted_nor_rejected(tmp_path: Path, model_dir: Path) -> None:
    cfg = study_config(model_dir, validate_deployments=False)
    cfg["loadtest"].update(repeats=2, num_requests={"min": 6, "per_concurrency": 2})
    cfg["variants"]["base"]["experiments"] = ["loadtest"]
    cfg["variants"]["seeded"] = {"model": "smol", "engine_args": {"seed": 1}, "experiments": ["loadtest"]}
    run_snakemake(tmp_path, cfg, "results/t/report/verdicts.parquet", timeout=1500)  # the decision, no page

    (v,) = [
        r
        for r in schemas.read(tmp_path / "results/t/report/verdicts.parquet", schemas.REPORT_VERDICTS).table.to_pylist()
        if r["variant"] == "seeded"
    ]
    assert v["outcome"] == "inconclusive", (v["outcome"], v["condition"], v["reason"])
    assert v["interval_basis"].startswith("2 runs"), v["interval_basis"]  # judged over runs, not within one
    assert "simultaneous" in v["reason"] and "E2E P50" in v["reason"]  # the wait judged, per verdict
    assert v["settle"]  # says what would settle it

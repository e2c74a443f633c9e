"""The evaluate_accuracy rule in the real workflow: a consumer of the variant's server, aggregated vs baseline."""

from __future__ import annotations

import pytest

from tests.conftest import require_env, run_snakemake, study_config
from worthit import schemas
from worthit.experiments.accuracy.tables import ACCURACY, ACCURACY_SAMPLES, ACCURACY_SUMMARY

pytestmark = [pytest.mark.vllm, pytest.mark.lmeval, pytest.mark.slow]


def test_accuracy_runs_on_the_served_variant_and_reaches_the_aggregate(tmp_path, model_dir):
    require_env("evaluate")
    cfg = study_config(model_dir, validate_deployments=False)  # serving the recommendations: deploy.smk's test
    cfg["variants"]["base"]["experiments"] = ["kv", "accuracy"]
    cfg["accuracy"] = {"tasks": [{"name": "worthit_arc", "limit": 8}, {"name": "not_a_task_xyz"}]}
    run_snakemake(tmp_path, cfg)
    vdir = tmp_path / "results/t/variant~base"
    res = schemas.read(vdir / "accuracy.parquet", ACCURACY)
    assert res.ok and res.metadata["vllm_version"] and res.metadata["accuracy"]["tasks"][0]["limit"] == 8
    rows = {(r["task"], r["metric"]): r for r in res.table.to_pylist()}
    assert rows[("worthit_arc", "acc")]["n"] == 8 and rows[("worthit_arc", "acc")]["status"] == "ok"
    bad = rows[("not_a_task_xyz", None)]
    assert bad["status"] == "failed" and "include path" in bad["reason"] and "registry" in bad["reason"]
    assert list((vdir / "accuracy" / "worthit_arc").rglob("samples_worthit_arc_*.jsonl"))
    summary = schemas.read(tmp_path / "results/t/accuracy_summary.parquet", ACCURACY_SUMMARY)
    arc = [r for r in summary.table.to_pylist() if r["task"] == "worthit_arc" and r["metric"] == "acc"][0]
    # the baseline against itself: every document alike, so the change is bounded by the rule of three (3.69 / n)
    assert arc["delta_pt"] == 0 and arc["baseline_variant"] == "base"
    assert arc["delta_method"] == "paired, no document changed" and arc["n_paired"] == 8
    assert arc["delta_ci95_high_pt"] == pytest.approx(369 / 8) and arc["decision"] == "inconclusive"
    docs = schemas.read(vdir / "accuracy_samples.parquet", ACCURACY_SAMPLES).table.to_pylist()
    assert {d["doc_id"] for d in docs if d["metric"] == "acc"} == set(range(8))
    md = (tmp_path / "results/t/accuracy_summary.md").read_text()
    assert "worthit_arc" in md and "not_a_task_xyz" in md
    assert (tmp_path / "results/t/summary.md").exists()  # the performance summary still builds

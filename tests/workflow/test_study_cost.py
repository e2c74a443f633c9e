"""What a real study cost (cost.parquet), and where its server's compile cache lives: the real workflow on real
vLLM (CPU), one variant."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from tests.conftest import run_snakemake, study_config
from worthit import compile_cache, schemas

pytestmark = [pytest.mark.vllm, pytest.mark.slow]


def test_study_cost_has_the_server_start_and_every_stage_wall_time(tmp_path: Path, model_dir: Path) -> None:
    cfg = study_config(model_dir, validate_deployments=False)
    run_snakemake(tmp_path, cfg)
    results = tmp_path / "results" / "t"

    spec = json.loads((results / "variant~base" / "serve_spec.json").read_text())
    cache = spec["env"][compile_cache.ENV]
    assert cache.startswith("resources/vllm-cache/smol/vllm-0.32") and len(cache.rsplit("-", 1)[1]) == 12

    rows = schemas.read(results / "cost.parquet", schemas.STUDY_COST).table.to_pylist()
    server = next(r for r in rows if r["scope"] == "server")
    assert server["name"] == "base" and server["device"] == "cpu" and server["gpu_minutes"] == 0
    assert server["source"] == "server log, exit record"  # the supervisor recorded its stop
    assert 1 < server["server_start_s"] < server["wall_s"] and server["serving_s"] > 0
    plan = schemas.read(results / "plan.parquet", schemas.PLAN).table.to_pylist()[0]
    assert server["planned_wall_s"] == plan["est_wall_s"]  # the plan's estimate beside it (none for a CPU)

    stages = {r["name"]: r for r in rows if r["scope"] == "stage"}
    ran = {"plan_study", "write_serve_spec", "measure_kv", "loadtest", "aggregate", "decide_study", "plot_study"}
    assert ran <= stages.keys(), stages.keys()
    assert stages["loadtest"]["jobs"] == 2 and stages["write_serve_spec"]["wall_s"] >= 0  # a printf: 0.00 s
    assert all(stages[s]["wall_s"] > 0 for s in ran - {"write_serve_spec"})
    # a benchmark file per job of every rule but the server (a service) and the two after this table
    files = {p.parent.relative_to(results / "benchmarks").parts[0] for p in (results / "benchmarks").rglob("*.tsv")}
    assert "serve_variant" not in files and ran <= files
    study = rows[-1]
    assert study["scope"] == "study" and study["wall_s"] == pytest.approx(sum(r["wall_s"] for r in stages.values()))
    assert "## Servers" in (results / "cost.md").read_text()

    dry = run_snakemake(tmp_path, cfg, "-n")
    assert "Nothing to be done" in dry.stdout + dry.stderr

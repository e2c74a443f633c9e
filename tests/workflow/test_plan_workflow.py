"""The plan in the real workflow: plan_study needs nothing fetched or served (the first job of a run) and
writes plan.parquet and plan.md for the hardware the study names; compare_plan ends the DAG."""

from __future__ import annotations

import re
import shutil

from tests.conftest import ROOT, run_snakemake
from worthit import schemas

FIXTURES = ROOT / "tests" / "fixtures" / "models"


def study(tmp_path):
    models = {}
    for name, fixture in (("qwen7b", "qwen2.5-7b-instruct"), ("qwen7b-awq", "qwen2.5-7b-instruct-awq")):
        d = tmp_path / "models" / name
        d.mkdir(parents=True)
        shutil.copy(FIXTURES / fixture / "config.json", d / "config.json")
        models[name] = {"source": f"path:{d}"}
    return {
        "study": "plantest",
        "models": models,
        "serve": {"engine_args": {"gpu-memory-utilization": 0.9, "max-model-len": 4096}},
        "variants": {
            "bf16": {"model": "qwen7b", "experiments": ["kv", "loadtest"]},
            "awq_int4": {"model": "qwen7b-awq", "engine_args": {"quantization": "awq_marlin"}},
            "fp8_kv": {"model": "qwen7b", "engine_args": {"kv-cache-dtype": "fp8"}},
        },
        "loadtest": {"prompt_tokens": 512, "output_tokens": 256, "levels": [1, 16]},
        "hardware": {"gpu": "NVIDIA GeForce RTX 3090"},
        "plan": {"hub_configs": False},
    }


def test_plan_study_runs_alone_before_anything_is_fetched(tmp_path):
    work = tmp_path / "work"
    proc = run_snakemake(work, study(tmp_path), "results/plantest/plan.parquet")
    out = proc.stdout + proc.stderr
    assert "plan_study" in out and "fetch_model" not in out and "serve_variant" not in out
    res = schemas.read(work / "results/plantest/plan.parquet", schemas.PLAN)
    rows = {r["variant"]: r for r in res.table.to_pylist()}
    assert rows["fp8_kv"]["status"] == "not_applicable" and "sm_86" in rows["fp8_kv"]["reason"]
    assert rows["awq_int4"]["status"] == "ok"
    assert [c["status"] for c in rows["awq_int4"]["checks"] if c["rule"] == "marlin_kernels"] == ["met"]
    assert rows["bf16"]["kv_bytes_per_token"] == 57344 and rows["bf16"]["levels"] == [1, 16]
    assert rows["bf16"]["model_config"].startswith("path: ")
    md = (work / "results/plantest/plan.md").read_text()
    assert "## fp8_kv (qwen7b): not applicable" in md
    assert (
        "fp8_kv: not_applicable not applicable: NVIDIA GeForce RTX 3090 is sm_86"
        in (work / "results/plantest/logs/plan.log").read_text()
    )


def test_every_run_plans_first_and_compares_last(tmp_path):
    proc = run_snakemake(tmp_path / "work", study(tmp_path), "-n")
    stats = dict(re.findall(r"^(\w+)\s+(\d+)$", proc.stdout + proc.stderr, re.MULTILINE))
    assert stats["plan_study"] == "1" and stats["compare_plan"] == "1"

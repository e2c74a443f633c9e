"""report.smk on recorded results: the rules build the tables, figures and HTML, a second run has nothing to
do, and `snakemake --report` works. No server starts: only the report rules may run. (That a changed result
reruns the summary, and only it, is tested on a real run in test_service_lifecycle.py.)"""

from __future__ import annotations

import shutil
from pathlib import Path

import pytest
import yaml

from tests.conftest import run_snakemake
from worthit import schemas
from worthit.schemas import report_tables

FIXTURE = Path(__file__).resolve().parents[1] / "fixtures" / "embedded-default"
# the page shows what the study cost (study_cost), which reads the plan (plan_study), and the plan against the
# measurement (compare_plan, which reads the models' manifests)
ONLY_REPORT = (
    "--allowed-rules",
    "decide_study",
    "plot_study",
    "render_report",
    "plan_study",
    "study_cost",
    "compare_plan",
)
TARGET = "results/embedded-default/report.html"

pytestmark = pytest.mark.slow


def test_report_rules_build_once_and_snakemake_report_works(tmp_path: Path, model_dir: Path) -> None:
    results = tmp_path / "results" / "embedded-default"
    shutil.copytree(FIXTURE, results, ignore=shutil.ignore_patterns("config.yaml"))
    cfg = yaml.safe_load((FIXTURE / "config.yaml").read_text())
    for name in cfg["models"]:  # the fetched model's manifest, as fetch_model leaves it (the plan reads its shapes)
        (tmp_path / "resources" / "models" / name).mkdir(parents=True)
        shutil.copy(model_dir.parent / "manifest.json", tmp_path / "resources" / "models" / name / "manifest.json")
    cfg["validate_deployments"] = False  # serving the recommended commands is deploy.smk's (tested there)
    # the target goes first: --allowed-rules takes every name after it
    first = run_snakemake(tmp_path, cfg, TARGET, *ONLY_REPORT)
    # the run ends with the decision (Snakefile onsuccess: worthit.report.terminal)
    assert "What to turn on" in first.stdout and "no_prefix_cache" in first.stdout and "vllm serve" in first.stdout
    assert f"report: {TARGET}" in first.stdout
    report = results / "report"
    assert {p.name for p in report.glob("*.parquet")} == {
        f"{t.name.removeprefix('report_')}.parquet" for t in report_tables()
    }
    verdicts = schemas.read(report / "verdicts.parquet", schemas.REPORT_VERDICTS).table.to_pylist()
    assert [v["optimisation"] for v in verdicts] == ["prefix caching (on vs off)"]
    assert (report / "figures" / "latency.svg").exists() and (tmp_path / TARGET).stat().st_size > 10_000
    page = (tmp_path / TARGET).read_text()
    assert "What the study cost" in page and "Predicted before measuring" in page

    # the report re-decides the folder outside Snakemake (a copy: Snakemake's own files stay untouched) from
    # the config it kept beside the tables
    from worthit.cli import main

    copy = tmp_path / "shared" / "embedded-default"
    shutil.copytree(results, copy)
    assert main(["report", "--results", str(copy)]) == 0
    assert schemas.read(copy / "report" / "verdicts.parquet", schemas.REPORT_VERDICTS).table.to_pylist() == verdicts

    dry = run_snakemake(tmp_path, cfg, TARGET, "-n", *ONLY_REPORT)
    assert "Nothing to be done" in dry.stdout + dry.stderr
    assert "What to turn on" not in dry.stdout  # nothing rendered: nothing printed

    run_snakemake(tmp_path, cfg, TARGET, "--report", str(tmp_path / "report.zip"), *ONLY_REPORT)
    assert (tmp_path / "report.zip").stat().st_size > 10_000

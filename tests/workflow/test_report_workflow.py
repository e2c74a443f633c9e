"""report.smk on recorded results: the rules build the tables, figures and HTML, `snakemake --report` works,
and the report is rebuilt only when a result changes. No server starts: only the report rules may run."""

from __future__ import annotations

import os
import shutil
import time
from pathlib import Path

import pytest
import yaml

from tests.conftest import run_snakemake

FIXTURE = Path(__file__).resolve().parents[1] / "fixtures" / "embedded-default"
ONLY_REPORT = ("--allowed-rules", "decide_study", "plot_study", "render_report")
TARGET = "results/embedded-default/report.html"

pytestmark = pytest.mark.slow


def test_report_rules_build_once_and_again_only_when_a_result_changes(tmp_path: Path) -> None:
    results = tmp_path / "results" / "embedded-default"
    shutil.copytree(FIXTURE, results, ignore=shutil.ignore_patterns("config.yaml"))
    cfg = yaml.safe_load((FIXTURE / "config.yaml").read_text())
    run_snakemake(tmp_path, cfg, *ONLY_REPORT, TARGET)
    report = results / "report"
    assert {p.name for p in report.glob("*.parquet")} == {
        f"{t}.parquet"
        for t in ("verdicts", "deployments", "comparison", "experiments", "capability", "capacity", "levels")
    }
    assert (report / "figures" / "latency.svg").exists() and (tmp_path / TARGET).stat().st_size > 10_000

    dry = run_snakemake(tmp_path, cfg, *ONLY_REPORT, "-n", TARGET)
    assert "Nothing to be done" in dry.stdout + dry.stderr

    level = results / "variant~baseline" / "load" / "conc~4.parquet"
    later = time.time() + 5
    os.utime(level, (later, later))
    # a plan over the whole workflow: the summary and the report are redone, no measurement is
    # (--allowed-rules would hide the change: it treats other rules' outputs as fixed sources)
    dry = run_snakemake(tmp_path, cfg, "-n", TARGET)
    out = dry.stdout + dry.stderr
    stats = out[out.index("Job stats:") :]
    assert "decide_study" in stats and "render_report" in stats and "aggregate" in stats
    assert "serve_variant" not in stats and "loadtest" not in stats

    run_snakemake(tmp_path, cfg, *ONLY_REPORT, "--report", str(tmp_path / "report.zip"), TARGET)
    assert (tmp_path / "report.zip").stat().st_size > 10_000

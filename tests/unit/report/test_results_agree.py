"""One analysis per measurement: a results folder never holds two values of one quantity.

The committed embedded-default results (examples/embedded-default/results) are rendered again as the workflow
renders them (the report's tables, the study summaries of aggregate.smk, the plan against the measurement of
plan.smk), and every figure that appears in two files is read from each and compared."""

from __future__ import annotations

import math
import shutil
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pyarrow.parquet as pq
import pytest

from worthit import measurements, plan, schemas
from worthit.aggregate import summary_rows, write_summary
from worthit.config import Study, load
from worthit.experiments.accuracy.summary import accuracy_rows, write_accuracy_summary
from worthit.experiments.specdec.section import spec_variants
from worthit.metrics import Slo
from worthit.paths import parse
from worthit.report import build
from worthit.report.rules import Rules

EMBEDDED = Path(__file__).resolve().parents[3] / "examples" / "embedded-default" / "results"
Key = tuple[Any, ...]


def _rows(path: Path) -> list[dict[str, Any]]:
    return [r for r in pq.read_table(path).to_pylist() if r.get("status", "ok") == "ok"]


@pytest.fixture(scope="module")
def rendered(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """The committed measurements rendered again: the report, summary, accuracy_summary and plan_vs_measured."""
    out = tmp_path_factory.mktemp("agree") / "results"
    shutil.copytree(
        EMBEDDED,
        out,
        ignore=shutil.ignore_patterns(
            "report", "logs", "benchmarks", "*.html", "*.md", "summary.parquet", "*_*.parquet"
        ),
    )
    shutil.copy(EMBEDDED / "plan.parquet", out / "plan.parquet")
    cfg = load(EMBEDDED / "report" / "config.yaml")
    study = Study(cfg)
    report = build.from_dir(cfg, out, named_only=True)
    build.write_tables(report, out / "report", {})
    kv = {parse(p).variant: str(p) for p in out.glob("variant~*/kv.parquet")}
    loads: dict[str, list[str]] = {}
    for p in sorted(out.glob("variant~*/load/**/*.parquet")):
        loads.setdefault(parse(p).variant, []).append(str(p))
    write_summary(
        summary_rows(kv, loads, Slo.from_config(cfg["slo"])), out / "summary.parquet", out / "s.md", "t", metadata={}
    )
    acc = {parse(p).variant: str(p) for p in out.glob("variant~*/accuracy.parquet")}
    samples = {parse(p).variant: str(p) for p in out.glob("variant~*/accuracy_samples.parquet")}
    base = str(cfg["baseline_variant"])
    write_accuracy_summary(
        accuracy_rows(acc, base, samples, Rules.from_config(cfg).max_drop, baseline_of=study.baseline_of),
        out / "accuracy_summary.parquet",
        out / "a.md",
        "t",
        baseline=base,
        metadata={},
    )
    planned = schemas.read(out / "plan.parquet", schemas.PLAN).table.to_pylist()
    rows = plan.compare(planned, out, cfg["plan"]["tolerances"], Rules.from_config(cfg).knee_throughput_fraction)
    plan.write_comparison(rows, out / "plan_vs_measured.parquet", {})
    assert spec_variants(study) and study.variants_with("prefix")  # the study has both experiments
    return out


PLAN_QUANTITIES = {
    "kv_blocks": "kv blocks",
    "critical_concurrency": "critical concurrency",
    "knee_concurrency": "throughput knee",
    "output_tok_per_s": "best output tok/s",
}


def report_figures(results: Path) -> Iterator[tuple[Key, str, float]]:
    rep = results / "report"
    for r in _rows(rep / "capacity.parquet"):
        v = r["variant"]
        yield ("kv blocks", v), "report/capacity", r["num_blocks"]
        yield ("critical concurrency", v), "report/capacity", r["kv_critical_concurrency"]
        yield ("throughput knee", v), "report/capacity", r["throughput_knee_concurrency"]
    grid: dict[str, list[dict[str, Any]]] = {}
    for r in _rows(rep / "levels.parquet"):
        grid.setdefault(r["variant"], []).append(r)
        yield ("TPOT P50 pooled", r["variant"], r["concurrency"]), "report/levels", r["tpot_ms_p50"]
    for v, lv in grid.items():
        yield ("best output tok/s", v), "report/levels", max(r["output_tok_per_s"] for r in lv)
    for r in _rows(rep / "accuracy.parquet"):
        key = (r["variant"], r["task"], r["metric"], r["filter"])
        yield ("accuracy change pt", *key), "report/accuracy", r["delta_pt"]
        yield ("accuracy change low", *key), "report/accuracy", r["delta_pt_ci95_low"]
        yield ("accuracy change high", *key), "report/accuracy", r["delta_pt_ci95_high"]


def study_figures(results: Path) -> Iterator[tuple[Key, str, float]]:
    for r in _rows(results / "summary.parquet"):
        if r.get("num_blocks") is not None:
            yield ("kv blocks", r["variant"]), "summary", r["num_blocks"]
            yield ("critical concurrency", r["variant"]), "summary", r["critical_concurrency"]
    for r in _rows(results / "plan_vs_measured.parquet"):
        v, q, m = r["variant"], r["quantity"], r["measured"]
        if q in PLAN_QUANTITIES:
            yield (PLAN_QUANTITIES[q], v), "plan_vs_measured", m
        elif q.startswith("tpot_ms_c"):
            yield ("TPOT P50 pooled", v, int(q.removeprefix("tpot_ms_c"))), "plan_vs_measured", m
    for r in _rows(results / "accuracy_summary.parquet"):
        if r["variant"] != r["baseline_variant"]:
            key = (r["variant"], r["task"], r["metric"], r["filter"])
            yield ("accuracy change pt", *key), "accuracy_summary", r["delta_pt"]
            yield ("accuracy change low", *key), "accuracy_summary", r["delta_ci95_low_pt"]
            yield ("accuracy change high", *key), "accuracy_summary", r["delta_ci95_high_pt"]


def shared_figures(results: Path) -> dict[Key, dict[str, float]]:
    """Every figure that appears in more than one file of a results folder: quantity key -> file -> value."""
    seen: dict[Key, dict[str, float]] = {}
    for key, where, value in [*report_figures(results), *study_figures(results)]:
        if value is not None and not (isinstance(value, float) and math.isnan(value)):
            seen.setdefault(key, {})[where] = float(value)
    return {k: by for k, by in seen.items() if len(by) > 1}


def disagreements(shared: dict[Key, dict[str, float]]) -> dict[Key, dict[str, float]]:
    return {
        k: by for k, by in shared.items() if max(by.values()) - min(by.values()) > 1e-9 * max(map(abs, by.values()))
    }


def test_every_figure_in_two_files_of_a_rendered_study_agrees(rendered: Path) -> None:
    shared = shared_figures(rendered)
    # the figures the issue named appear in two files: knee, TPOT at the lowest level, accuracy change
    assert {k[0] for k in shared} >= {"kv blocks", "throughput knee", "TPOT P50 pooled", "accuracy change pt"}
    assert not disagreements(shared)


def test_a_figure_computed_twice_differently_is_caught(rendered: Path, tmp_path: Path) -> None:
    """The check itself: a plan_vs_measured whose knee came from another rule than the report's disagrees."""
    copy = tmp_path / "results"
    shutil.copytree(rendered, copy)
    rows = pq.read_table(copy / "plan_vs_measured.parquet").to_pylist()
    knee = next(r for r in rows if r["quantity"] == "knee_concurrency" and r["measured"] is not None)
    knee["measured"] *= 2
    plan.write_comparison(rows, copy / "plan_vs_measured.parquet", {})
    assert ("throughput knee", knee["variant"]) in disagreements(shared_figures(copy))


def test_no_study_level_file_repeats_an_experiments_analysis(rendered: Path) -> None:
    """Prefix caching and speculative decoding have one analysis, the report's: no aggregate of their own."""
    study = Study(load(EMBEDDED / "report" / "config.yaml"))
    outputs = [o for m in measurements.registered() for o in m.outputs(study, "R")]
    assert not [o for o in outputs if "prefix" in o or "specdec" in o]
    assert (rendered / "report" / "specdec.parquet").exists() and (rendered / "report" / "prefix.parquet").exists()

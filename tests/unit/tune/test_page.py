"""The tune in the study's report and in a page of its own, rendered from the committed tune example's files
(examples/tune-example: summary.md, pareto.svg) beside the committed embedded-default results."""

from __future__ import annotations

import shutil
from pathlib import Path

from worthit.tune import page

ROOT = Path(__file__).resolve().parents[3]
TUNE = ROOT / "examples" / "tune-example"
STUDY = ROOT / "examples" / "embedded-default" / "results"


def _tune_beside(results: Path) -> Path:
    tdir = results.with_name(results.name + "-tune") / "tune"
    tdir.mkdir(parents=True)
    for f in ("summary.md", "pareto.svg"):
        shutil.copy(TUNE / f, tdir / f)
    return tdir


def test_a_study_without_a_tune_has_no_tune_section(tmp_path: Path) -> None:
    assert page.tune_folder(tmp_path / "results" / "s") is None and page.section(tmp_path / "results" / "s") is None


def test_the_section_leads_with_each_scenarios_pick_and_inlines_the_pareto_front(tmp_path: Path) -> None:
    results = tmp_path / "results" / "s"
    tdir = _tune_beside(results)
    sec = page.section(results)
    assert sec is not None and sec["folder"] == str(tdir)
    assert sec["line"] == "latency-first: vLLM defaults (tie); throughput-first: vLLM defaults (tie)"
    assert "<svg" in sec["html"] and "pareto.svg" not in sec["html"].split("<svg")[0]  # inline, not a link
    assert "<h1>" not in sec["html"] and "<table>" in sec["html"]  # the trace as a table
    # the tune's own page: self-contained
    html = page.write_page(tdir).read_text()
    assert html.startswith("<!doctype html>") and "<svg" in html and "What to run" in html


def test_markup_in_a_summary_is_shown_as_text_not_run(tmp_path: Path) -> None:
    tdir = _tune_beside(tmp_path / "results" / "s")
    (tdir / "summary.md").write_text("# t\n\n- **latency-first: <script>alert(1)</script>** (tie)\n")
    sec = page.section(tmp_path / "results" / "s")
    assert sec is not None and "<script>" not in sec["html"] and "&lt;script&gt;" in sec["html"]


def test_the_study_report_shows_its_tune_folded_under_the_deployments(tmp_path: Path) -> None:
    from worthit.report.build import main

    results = tmp_path / "results" / "embedded-default"
    shutil.copytree(STUDY, results)
    assert main(["--results", str(results)]) == 0
    assert 'id="h-tune"' not in (results / "report.html").read_text()
    _tune_beside(results)
    assert main(["--results", str(results)]) == 0
    html = (results / "report.html").read_text()
    assert html.index('id="deployments"') < html.index('id="h-tune"') < html.index('id="detail"')
    assert "latency-first: vLLM defaults (tie)" in html and html.count("<svg") >= 2

"""loadtest.repeats on real vLLM (CPU), read from the embedded default study (config/config.yaml: every level
run twice), which CI has just run before the suite (tests/conftest.py ``embedded_study``): every level of every
load-tested variant measured again with fresh prompts, round after round; the summary and the report show the
run-to-run spread; raising repeats adds runs and redoes none."""

from __future__ import annotations

import re
from pathlib import Path

import pytest
import yaml

from tests.conftest import ROOT, embedded_snakemake
from tests.workflow.test_scheduling import planned
from worthit import schemas
from worthit.config import Study, load
from worthit.experiments.loadtest.section import section as load_section
from worthit.experiments.loadtest.tables import LOAD_REQUESTS, REPORT_LEVELS, SUMMARY

pytestmark = [pytest.mark.vllm, pytest.mark.slow]


def run_name(level: str, run: int) -> str:
    """A load run's name (its file's and its log's, below load/): conc~4, chat/conc~4.rep~2."""
    return f"{level}{'' if run == 1 else f'.rep~{run}'}"


def run_file(variant: str, level: str, run: int) -> str:
    """A load run's file below the results folder: variant~v/load/conc~4.parquet."""
    return f"variant~{variant}/load/{run_name(level, run)}.parquet"


def check_repeated_runs(results: Path, study: Study) -> None:
    """Every run of every level of every load-tested variant: measured, with its own prompts, round after round;
    the summary and the report's levels hold each run and their spread."""
    lt = load_section(study.cfg)
    assert lt.repeats >= 2, "the embedded default study must repeat its levels for this test"
    measured = []
    for v in lt.load_tested:
        runs = {
            (lv.name, r): schemas.read(results / run_file(v, lv.name, r), LOAD_REQUESTS) for lv, r in lt.level_runs(v)
        }
        if all(res.status == "not_applicable" for res in runs.values()):
            continue  # AWQ INT4 on a CPU without AVX-512: recorded as such, never served (test_not_applicable_skips)
        measured.append(v)
        for (name, r), res in runs.items():
            assert res.ok and res.metadata["repeat"] == r, (v, name, r, res.reason)
            assert res.table.num_rows == res.metadata["workload"]["num_requests"] > 0, (v, name, r)
            if lt.level(name).workload is None:  # a workload's level sends what its sessions hold
                assert res.table.num_rows == lt.level_requests(lt.level(name)), (v, name, r)
            if r > 1:  # fresh prompts: no prefix-cache hits across runs
                before = runs[(name, r - 1)].metadata["workload"]["seed"]
                assert res.metadata["workload"]["seed"] == before + 2, (v, name, r)
        # round after round: every level once, then every level again (each run's log says when it started)
        logs = results / "logs" / "loadtest" / v
        started = {
            key: next(ln[:23] for ln in (logs / f"{run_name(*key)}.log").read_text().splitlines() if "measuring" in ln)
            for key in runs
        }
        assert sorted(started, key=started.get) == [(lv.name, r) for lv, r in lt.level_runs(v)], (v, started)
    assert study.cfg["baseline_variant"] in measured

    summary = schemas.read(results / "summary.parquet", SUMMARY).to_pandas()
    plain = summary[summary.level.isna()]  # the concurrency grid (a workload level names itself)
    levels = schemas.read(results / "report" / "levels.parquet", REPORT_LEVELS).to_pandas()
    tables = (results / "report" / "tables.md").read_text()
    assert "| run |" in (results / "summary.md").read_text()
    for v in measured:
        if "loadtest" not in study.variant(v).experiments:
            continue  # measures only a workload level
        mine = plain[plain.variant == v]
        expected = sorted((c, r) for r in range(1, lt.repeats + 1) for c in lt.levels)
        assert sorted(zip(mine.concurrency, mine.run, strict=True)) == expected, v
        lv_rows = levels[levels.variant == v]
        assert sorted(lv_rows.concurrency) == sorted(lt.levels), v
        for _, lv in lv_rows.iterrows():
            per_run = mine[mine.concurrency == lv.concurrency]
            assert lv.runs == lt.repeats and lv.n == per_run.n.sum() == lt.repeats * lt.num_requests(lv.concurrency)
            assert lv.runs_tpot_ms_p50_min == pytest.approx(per_run.tpot_ms_p50.min())
            assert lv.runs_tpot_ms_p50_max == pytest.approx(per_run.tpot_ms_p50.max())
            assert lv.output_tok_per_s == pytest.approx(per_run.output_tok_per_s.mean())
            # the page's figures say what their intervals rest on (the per-run min–max stays in levels.parquet)
            assert f"n={lv.n} ({lt.repeats} runs)" in tables, (v, lv.concurrency)


def test_repeated_levels_are_measured_summarised_and_extended(embedded_study: Path, tmp_path: Path) -> None:
    cfg = load(ROOT / "config" / "config.yaml")
    study, lt = Study(cfg), load_section(cfg)
    check_repeated_runs(embedded_study, study)

    # one more run per level: only the new runs are planned, the measured ones stay (a dry run on the finished
    # study itself, with the config's repeats raised by one)
    more = yaml.safe_load((ROOT / "config" / "config.yaml").read_text())
    more["loadtest"]["repeats"] = lt.repeats + 1
    (tmp_path / "more.yaml").write_text(yaml.safe_dump(more, sort_keys=False))
    target = str(embedded_study.relative_to(ROOT) / "summary.parquet")
    dry = embedded_snakemake("--configfile", str(tmp_path / "more.yaml"), "-n", target, timeout=600)
    out = dry.stdout + dry.stderr
    assert dry.returncode == 0, out[-3000:]
    new = {run_file(v, lv.name, lt.repeats + 1) for v in lt.load_tested for lv in lt.variant_levels(v)}
    assert planned(out).get("loadtest") == len(new), out[-3000:]
    made = {
        m
        for ln in out.splitlines()
        if ln.strip().startswith("output:")
        for m in re.findall(r"variant~[^/\s,]+/load/\S+?\.parquet", ln)
    }
    assert made == new, out[-3000:]

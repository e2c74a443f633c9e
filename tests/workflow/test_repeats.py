"""loadtest.repeats on real vLLM (CPU): every level measured again with fresh prompts, round after round;
the summary and the report show the run-to-run spread; raising repeats adds runs and redoes none."""

from __future__ import annotations

import pytest

from tests.conftest import run_snakemake, study_config
from tests.workflow.test_scheduling import planned
from worthit import schemas
from worthit.experiments.loadtest.tables import LOAD_REQUESTS, REPORT_LEVELS, SUMMARY

pytestmark = [pytest.mark.vllm, pytest.mark.slow]


def test_repeated_levels_are_measured_summarised_and_extended(tmp_path, model_dir):
    loadtest = {
        "prompt_tokens": 16,
        "output_tokens": 4,
        "levels": [1, 2],
        "num_requests": {"min": 4, "per_concurrency": 2},
        "warmup_requests": 1,
        "repeats": 2,
    }
    cfg = study_config(model_dir, loadtest=loadtest)
    cfg["variants"]["base"]["experiments"] = ["kv", "loadtest"]
    run_snakemake(tmp_path, cfg, "results/t/summary.parquet", "results/t/report/levels.parquet")
    load = tmp_path / "results/t/variant~base/load"
    files = {
        (c, r): load / (f"conc~{c}.parquet" if r == 1 else f"conc~{c}.rep~{r}.parquet") for c in (1, 2) for r in (1, 2)
    }
    runs = {k: schemas.read(p, LOAD_REQUESTS) for k, p in files.items()}
    for (_c, r), res in runs.items():
        assert res.ok and res.table.num_rows == 4 and res.metadata["repeat"] == r
        assert res.metadata["workload"]["seed"] == 2 * (r - 1)  # fresh prompts: no prefix-cache hits across runs
    # round after round: 1, 2, then 1 and 2 again (each run's log says when it started measuring)
    logs = tmp_path / "results/t/logs/loadtest/base"
    started = {
        name: next(ln[:23] for ln in (logs / f"{name}.log").read_text().splitlines() if "measuring" in ln)
        for name in ("conc~1", "conc~2", "conc~1.rep~2", "conc~2.rep~2")
    }
    assert sorted(started, key=started.get) == ["conc~1", "conc~2", "conc~1.rep~2", "conc~2.rep~2"]

    summary = schemas.read(tmp_path / "results/t/summary.parquet", SUMMARY).to_pandas()
    assert sorted(zip(summary.concurrency, summary.run, strict=True)) == [(1, 1), (1, 2), (2, 1), (2, 2)]
    assert "| run |" in (tmp_path / "results/t/summary.md").read_text()
    levels = schemas.read(tmp_path / "results/t/report/levels.parquet", REPORT_LEVELS).to_pandas()
    for _, lv in levels.iterrows():
        per_run = summary[summary.concurrency == lv.concurrency]
        assert lv.runs == 2 and lv.n == 8
        assert lv.runs_tpot_ms_p50_min == pytest.approx(per_run.tpot_ms_p50.min())
        assert lv.runs_tpot_ms_p50_max == pytest.approx(per_run.tpot_ms_p50.max())
        assert lv.output_tok_per_s == pytest.approx(per_run.output_tok_per_s.mean())
    # the page's figures say what their intervals rest on (the per-run min–max stays in levels.parquet)
    assert "n=8 (2 runs)" in (tmp_path / "results/t/report/tables.md").read_text()

    # one more run per level: only the new runs are planned, the measured ones stay
    cfg["loadtest"]["repeats"] = 3
    dry = run_snakemake(tmp_path, cfg, "-n", "results/t/summary.parquet")
    out = dry.stdout + dry.stderr
    assert planned(out).get("loadtest") == 2, out[-3000:]
    made = {ln.split("/load/")[-1] for ln in out.splitlines() if ln.strip().startswith("output:") and "/load/" in ln}
    assert made == {"conc~1.rep~3.parquet", "conc~2.rep~3.parquet"}, out[-3000:]

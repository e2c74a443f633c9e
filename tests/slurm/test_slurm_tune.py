"""worthit tune on a real one-node SLURM cluster: a round's candidates are each one GPU job, side by side, and
what they measured is the tune's trace (tests/slurm/conftest.py starts the cluster)."""

from __future__ import annotations

import os
import subprocess
import time
from datetime import datetime
from pathlib import Path

import pytest
import yaml

from tests.conftest import ROOT, VENVS, processes_in, require_env, study_config
from tests.slurm.test_slurm_study import RUN_TIMEOUT_S, ci_overrides, scontrol_job, slurm_jobs
from worthit import schemas
from worthit.tune.search import candidate_id
from worthit.tune.tables import TUNE_TRACE

pytestmark = [pytest.mark.slurm, pytest.mark.vllm, pytest.mark.slow]


def test_a_rounds_candidates_are_one_gpu_job_each_and_run_side_by_side(tmp_path, model_dir, slurm_cluster):
    python = require_env("workflow")
    cfg = study_config(model_dir, validate_deployments=False)
    cfg["loadtest"]["levels"] = [2]
    cfg["variants"]["base"]["experiments"] = ["loadtest"]
    cfg["tune"] = {"space": {"max-num-seqs": {"choices": [1, 4]}}, "rounds": 1, "per_round": 2}
    cfgfile = tmp_path / "study.yaml"
    cfgfile.write_text(yaml.safe_dump(cfg, sort_keys=False))
    env = {
        **os.environ,
        "VIRTUAL_ENV": str(VENVS / "workflow"),
        "PATH": f"{VENVS / 'workflow' / 'bin'}{os.pathsep}{os.environ.get('PATH', '')}",
    }
    worthit = Path(python).parent / "worthit"
    cmd = [str(worthit), "tune", "--config", str(cfgfile), "--no-hub", "--no-confirm"]
    cmd += ["--profile", str(ROOT / "profiles" / "slurm"), "--", *ci_overrides()]
    proc = subprocess.run(
        ["timeout", "-k", "60", str(RUN_TIMEOUT_S), *cmd], capture_output=True, text=True, env=env, cwd=tmp_path
    )
    (tmp_path / "tune.out").write_text(proc.stdout + proc.stderr)
    assert proc.returncode == 0, proc.stdout[-3000:] + proc.stderr[-3000:]

    rows = schemas.read(tmp_path / "results/t-tune/tune/trace.parquet", TUNE_TRACE).table.to_pylist()
    assert {(r["candidate_id"], r["status"]) for r in rows} == {
        (candidate_id({"max-num-seqs": n}), "measured") for n in (1, 4)
    }
    # each candidate's server group was one SLURM job with one GPU, and the two ran at the same time
    logs = tmp_path / ".snakemake" / "slurm_logs"
    groups = {
        i: log
        for i, log in slurm_jobs(tmp_path).items()
        if log.parts[0].startswith("group_serve") and "rule serve_variant:" in (logs / log).read_text()
    }
    assert len(groups) == 2, slurm_jobs(tmp_path)
    jobs = [scontrol_job(i) for i in groups]
    assert all(j["JobState"] == "COMPLETED" and j["TresPerJob"] == "gres:gpu:1" for j in jobs), jobs
    spans = sorted((datetime.fromisoformat(j["StartTime"]), datetime.fromisoformat(j["EndTime"])) for j in jobs)
    assert spans[1][0] < spans[0][1], f"the round's candidates ran one after the other: {spans}"
    deadline = time.monotonic() + 60
    while (left := processes_in(tmp_path)) and time.monotonic() < deadline:
        time.sleep(1)
    assert left == []
    assert "throughput-first:" in proc.stdout

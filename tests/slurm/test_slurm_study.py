"""The study through `snakemake --profile profiles/slurm` on a real one-node SLURM cluster (fake GPUs).

One server group per variant becomes one SLURM job holding a GPU; two variants' jobs run at once when the
cluster has GPUs for both; the results are the tables a local run plans, each valid against its schema; no server
outlives its job.
"""

from __future__ import annotations

import os
import re
import subprocess
import time
from datetime import datetime
from pathlib import Path

import pyarrow as pa
import pyarrow.parquet as pq
import pytest
import yaml

from tests.conftest import ROOT, VENVS, processes_in, require_env, run_snakemake, study_config
from worthit import schemas
from worthit.experiments.kv.tables import KV_CACHE
from worthit.experiments.loadtest.tables import SUMMARY

pytestmark = [pytest.mark.slurm, pytest.mark.vllm, pytest.mark.slow]

RUN_TIMEOUT_S = 1500

PROFILE = yaml.safe_load((ROOT / "profiles" / "slurm" / "config.yaml").read_text())

# CPU/memory sizes on this 2-CPU CI node for the rules the profile sizes (servers, lm-eval, the rest).
CI_MEM_MB = {"serve_variant": 3000, "serve_deployment": 3000, "evaluate_accuracy": 2000}


def ci_overrides() -> list[str]:
    """The profile as a user runs it, with its machine-size keys scaled down to this 2-CPU CI node.

    A command-line flag replaces the profile's key as a whole, so each list is derived from *every* rule
    the profile names: a rule added to the profile (a new server group) is scaled down here too instead of
    reaching sbatch with the flag's default (threads 0 -> --cpus-per-task=0, which sbatch rejects).
    """
    threads = [f"{rule}={min(int(n), 1)}" for rule, n in PROFILE["set-threads"].items()]
    resources = [
        f"{rule}:{key}={value}"
        for rule, res in PROFILE["set-resources"].items()
        for key, value in (("mem_mb", CI_MEM_MB.get(rule, 1000)), ("runtime", 20))
        if key in res
    ]
    return [
        "--resources",
        "gpu=2",  # two GPU jobs in flight: the variants' groups may run at once
        "--set-threads",
        *threads,
        "--set-resources",
        *resources,
        "--default-resources",
        "runtime=10",
        "mem_mb=300",
        "--slurm-init-seconds-before-status-checks",
        "5",
    ]


def test_ci_overrides_scale_every_rule_the_profile_sizes():
    args = ci_overrides()
    threads = args[args.index("--set-threads") + 1 : args.index("--set-resources")]
    assert {t.split("=")[0] for t in threads} == set(PROFILE["set-threads"])
    assert all(int(t.split("=")[1]) in (0, 1) for t in threads)
    # a rule the profile gives CPUs keeps at least one (sbatch rejects --cpus-per-task=0)
    assert all(int(t.split("=")[1]) == 1 for t in threads if PROFILE["set-threads"][t.split("=")[0]] > 0)
    resources = args[args.index("--set-resources") + 1 : args.index("--default-resources")]
    assert {r.split(":")[0] for r in resources} == set(PROFILE["set-resources"])


def two_variant_study(model_dir: Path) -> dict:
    cfg = study_config(model_dir)
    cfg["variants"]["small_batch"] = {"model": "smol", "engine_args": {"max-num-seqs": 4}}
    return cfg


def snakemake_slurm(workdir: Path, cfg: dict, *args: str) -> subprocess.CompletedProcess[str]:
    """`snakemake --profile profiles/slurm` from the workflow environment, as a cluster user runs it.

    The job's inner Snakemake and the server run with the submitting interpreter (sbatch --export=ALL
    and the serve rule's sys.executable), so the workflow venv must be the one on PATH.
    """
    python = require_env("workflow")
    workdir.mkdir(parents=True, exist_ok=True)
    cfgfile = workdir / "study.yaml"
    cfgfile.write_text(yaml.safe_dump(cfg, sort_keys=False))
    env = {
        **os.environ,
        "VIRTUAL_ENV": str(VENVS / "workflow"),
        "PATH": f"{VENVS / 'workflow' / 'bin'}{os.pathsep}{os.environ.get('PATH', '')}",
    }
    cmd = [
        "timeout",
        "-k",
        "60",
        str(RUN_TIMEOUT_S),
        str(python),
        "-m",
        "snakemake",
        "-s",
        str(ROOT / "Snakefile"),
        "-d",
        str(workdir),
        "--configfile",
        str(cfgfile),
        "--profile",
        str(ROOT / "profiles" / "slurm"),
        *args,
    ]
    proc = subprocess.run(cmd, capture_output=True, text=True, env=env, cwd=workdir)
    (workdir / "snakemake.out").write_text(proc.stdout + proc.stderr)
    return proc


def slurm_jobs(workdir: Path) -> dict[str, Path]:
    """SLURM job id -> its log, from the plugin's log folders (`group_serve_<rules>/`, `rule_<name>/...`)."""
    root = workdir / ".snakemake" / "slurm_logs"
    return {log.stem: log.relative_to(root) for log in sorted(root.rglob("*.log"))}


def scontrol_job(job_id: str) -> dict[str, str]:
    """A job as slurmctld still holds it after it ended (MinJobAge=600 here; no sacct without slurmdbd)."""
    out = subprocess.run(
        ["timeout", "10", "scontrol", "-o", "show", "job", job_id], capture_output=True, text=True, check=True
    ).stdout
    return dict(re.findall(r"(\S+?)=(\S*)", out))


def result_schemas(results: Path) -> dict[str, pa.Schema]:
    """Every Parquet file under ``results`` (relative path -> Arrow schema without metadata)."""
    return {
        str(p.relative_to(results)): pq.read_schema(p).remove_metadata() for p in sorted(results.rglob("*.parquet"))
    }


def test_each_variant_is_one_gpu_job_and_results_match_a_local_run(tmp_path, model_dir, slurm_cluster):
    cfg = two_variant_study(model_dir)
    cluster_dir = tmp_path / "cluster"
    proc = snakemake_slurm(cluster_dir, cfg, *ci_overrides())
    assert proc.returncode == 0, (
        f"snakemake --profile profiles/slurm failed ({proc.returncode}):\n{proc.stdout[-3000:]}\n{proc.stderr[-6000:]}"
    )

    # each variant's server group (server + KV + both load levels) was one SLURM job with one GPU
    jobs = slurm_jobs(cluster_dir)
    logs = cluster_dir / ".snakemake" / "slurm_logs"
    groups = {i: log for i, log in jobs.items() if log.parts[0].startswith("group_serve")}
    variant_groups = {i: log for i, log in groups.items() if "rule serve_variant:" in (logs / log).read_text()}
    assert len(variant_groups) == 2, jobs
    for variant in ("base", "small_batch"):
        serving = [
            i
            for i, log in variant_groups.items()
            if f"output: results/t/variant~{variant}/server.json (service)" in (logs / log).read_text()
        ]
        assert len(serving) == 1, (variant, jobs)
    # each recommended deployment the report validates is a server group of its own, like a variant's
    deployed = sorted({p.parent.name for p in (cluster_dir / "results/t").glob("deployment~*/load*.parquet")})
    deploy_groups = [log for i, log in groups.items() if i not in variant_groups]
    assert len(deploy_groups) == len(deployed), (deployed, jobs)
    assert all("rule serve_deployment:" in (logs / log).read_text() for log in deploy_groups), jobs
    # no member of a server group was submitted on its own
    assert not [
        log
        for log in jobs.values()
        if log.parts[0]
        in (
            "rule_serve_variant",
            "rule_loadtest",
            "rule_measure_kv",
            "rule_serve_deployment",
            "rule_validate_deployment",
        )
    ], jobs
    for job in map(scontrol_job, groups):
        assert job["JobState"] == "COMPLETED", job
        assert job["TresPerJob"] == "gres:gpu:1", job  # the plugin's --gpus=1 from `resources: gpu=1`
    group_jobs = [scontrol_job(i) for i in variant_groups]
    # the cluster had GPUs for both: the two variants' jobs ran at the same time
    spans = sorted((datetime.fromisoformat(j["StartTime"]), datetime.fromisoformat(j["EndTime"])) for j in group_jobs)
    assert spans[1][0] < spans[0][1], f"variant jobs ran one after the other: {spans}"

    # the servers ran inside their jobs and none outlived them
    deadline = time.monotonic() + 60
    while (left := processes_in(cluster_dir)) and time.monotonic() < deadline:
        time.sleep(1)
    assert left == []

    # the same tables as a local run: every Parquet file a local (dry) run of the study plans, no other, each
    # valid against its table in the schema module, and the summary has every variant x level
    # (the local plan serves no deployment: the cluster run did, above; what is compared is the study's tables)
    dry = run_snakemake(tmp_path / "local", {**cfg, "validate_deployments": False}, "-n")
    local_plan = {
        f
        for ln in (dry.stdout + dry.stderr).splitlines()
        if ln.strip().startswith("output:")
        for f in ln.split(":", 1)[1].replace(" (service)", "").split(",")
        if f.strip().endswith(".parquet")
    }
    local_tables = {f.strip().removeprefix("results/") for f in local_plan} - {"t/report/validation.parquet"}
    cluster_tables = {
        k
        for k in result_schemas(cluster_dir / "results")
        if "/deployment~" not in k and k != "t/report/validation.parquet"
    }
    assert cluster_tables == local_tables
    for name in cluster_tables:
        path = cluster_dir / "results" / name
        table = pq.read_schema(path).metadata[f"{schemas.META_PREFIX}table".encode()].decode()
        assert schemas.read(path, schemas.table_named(table)) is not None, name  # raises on a schema mismatch
    summary = schemas.read(cluster_dir / "results/t/summary.parquet", SUMMARY).to_pandas()
    keys = sorted(zip(summary["variant"], summary["concurrency"], summary["status"], strict=True))
    assert keys == [(v, c, "ok") for v in ("base", "small_batch") for c in (1, 2)]
    for variant in ("base", "small_batch"):
        kv = schemas.read(cluster_dir / f"results/t/variant~{variant}/kv.parquet", KV_CACHE)
        assert kv.ok and kv.table.column("num_blocks")[0].as_py() > 0

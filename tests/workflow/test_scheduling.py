"""What Snakemake plans around the service jobs (dry runs, no engine): a server is never planned
without the measurements that need it, and never planned for results that are complete."""

from __future__ import annotations

import os
import re
import subprocess
import sys
import time
from pathlib import Path

import yaml

from tests.conftest import ROOT, study_config

HOUR_AGO = time.time() - 3600


def dry_run(workdir: Path, *targets: str) -> str:
    proc = subprocess.run(
        [
            sys.executable,
            "-m",
            "snakemake",
            "-s",
            str(ROOT / "Snakefile"),
            "-d",
            str(workdir),
            "-n",
            "--cores",
            "1",
            *targets,
            "--configfile",
            str(workdir / "study.yaml"),
        ],
        capture_output=True,
        text=True,
        timeout=300,
    )
    assert proc.returncode == 0, proc.stdout[-3000:] + proc.stderr[-3000:]
    return proc.stdout + proc.stderr


def planned(out: str) -> dict[str, int]:
    """The job counts of the dry run's 'Job stats' table."""
    table = out.split("Job stats:", 1)[1].split("total", 1)[0] if "Job stats:" in out else ""
    return {m[0]: int(m[1]) for m in re.findall(r"^(\w+)\s+(\d+)\s*$", table, flags=re.M)}


def stale_state_study(tmp_path: Path) -> Path:
    """A study whose model and server spec are newer than the variant's server state file, as after a
    re-fetched model or results copied from another machine."""
    cfg = study_config(tmp_path / "model")
    (tmp_path / "study.yaml").write_text(yaml.safe_dump(cfg, sort_keys=False))
    var = tmp_path / "results/t/variant~base"
    var.mkdir(parents=True)
    state = var / "server.json"
    state.write_text("{}")
    os.utime(state, (HOUR_AGO, HOUR_AGO))
    manifest = tmp_path / "resources/models/smol/manifest.json"
    manifest.parent.mkdir(parents=True)
    manifest.write_text("{}")
    (var / "serve_spec.json").write_text("{}")
    return var


def test_a_server_with_a_stale_state_file_is_planned_with_its_consumers(tmp_path):
    var = stale_state_study(tmp_path)
    jobs = planned(dry_run(tmp_path, str(var.relative_to(tmp_path) / "load/conc~2.parquet")))
    assert jobs.get("loadtest") == 1 and jobs.get("serve_variant") == 1, jobs


def test_complete_results_plan_no_server(tmp_path):
    var = stale_state_study(tmp_path)
    outputs = [var / "kv.parquet", var / "load/conc~1.parquet", var / "load/conc~2.parquet"]
    for f in outputs:
        f.parent.mkdir(parents=True, exist_ok=True)
        f.write_bytes(b"")
    jobs = planned(dry_run(tmp_path, *(str(f.relative_to(tmp_path)) for f in outputs)))
    assert "serve_variant" not in jobs, jobs

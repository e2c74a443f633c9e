"""The real workflow on real vLLM (CPU): results, failures as results, and no server outliving its group."""

from __future__ import annotations

import contextlib
import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest
import yaml

from tests.conftest import ROOT, pids_in, processes_in, run_snakemake, study_config
from worthit import schemas
from worthit.experiments.kv.tables import KV_CACHE
from worthit.experiments.loadtest.tables import LOAD_REQUESTS, SUMMARY

pytestmark = [pytest.mark.vllm, pytest.mark.slow]


def wait_gone(workdir: Path, timeout_s: float = 60) -> list[str]:
    deadline = time.monotonic() + timeout_s
    while (left := processes_in(workdir)) and time.monotonic() < deadline:
        time.sleep(1)
    return left


def test_study_runs_end_to_end_leaves_no_server_and_rebuilds_only_what_a_changed_result_feeds(tmp_path, model_dir):
    # (serving the recommended deployments, servers too, is test_deployment_validation's)
    cfg = study_config(model_dir, validate_deployments=False)
    cfg["variants"]["broken"] = {"model": "smol", "engine_args": {"kv-cache-dtype": "not-a-dtype"}}
    # an abbreviation vLLM's parser would silently take for --max-num-seqs, which worthit reads in full
    cfg["variants"]["misspelt"] = {"model": "smol", "engine_args": {"max-num-seq": 2}, "experiments": ["kv"]}
    run_snakemake(tmp_path, cfg)
    base = tmp_path / "results/t/variant~base"
    kv = schemas.read(base / "kv.parquet", KV_CACHE)
    assert kv.ok and kv.table.column("num_blocks")[0].as_py() > 0
    for c in (1, 2):
        res = schemas.read(base / f"load/conc~{c}.parquet", LOAD_REQUESTS)
        rows = res.table.to_pylist()
        assert len(rows) == 3 and all(r["success"] for r in rows), rows
        assert all(r["output_tokens"] == 8 and r["prompt_tokens"] == 32 for r in rows)
        assert res.metadata["n_warmup"] == 1 and res.metadata["vllm_version"]
    # a server that cannot start is a recorded failure with its log tail, not a crashed study
    broken = schemas.read(tmp_path / "results/t/variant~broken/kv.parquet", KV_CACHE)
    assert broken.status == "failed" and "exited" in broken.reason
    assert "invalid choice: 'not-a-dtype'" in broken.reason  # the cause, not only "exited"
    assert "not-a-dtype" in broken.log_tail
    # refused before any server starts, naming the key and the flag it would have been read as
    misspelt = schemas.read(tmp_path / "results/t/variant~misspelt/kv.parquet", KV_CACHE)
    assert misspelt.status == "failed", misspelt.reason
    assert "engine argument 'max-num-seq'" in misspelt.reason and "no flag --max-num-seq " in misspelt.reason
    assert "closest accepted: max-num-seqs" in misspelt.reason
    assert "starting:" not in (tmp_path / "results/t/logs/serve/misspelt.log").read_text()
    summary = tmp_path / "results/t/summary.parquet"
    table = schemas.read(summary, SUMMARY).to_pandas()
    assert set(table["variant"]) == {"base", "broken", "misspelt"}
    assert (table.loc[table.variant == "broken", "status"] == "failed").all()
    assert "Failed or not applicable" in (tmp_path / "results/t/summary.md").read_text()
    assert wait_gone(tmp_path) == []
    # nothing to do on a second look; forcing one level reruns that level and the summary, not the other level
    level2 = base / "load/conc~2.parquet"
    before, level2_before = summary.stat().st_mtime_ns, level2.stat().st_mtime_ns
    dry = run_snakemake(tmp_path, cfg, "-n")
    assert "Nothing to be done" in dry.stdout + dry.stderr
    run_snakemake(tmp_path, cfg, "--forcerun", "results/t/variant~base/load/conc~1.parquet")
    assert summary.stat().st_mtime_ns > before
    assert level2.stat().st_mtime_ns == level2_before
    assert wait_gone(tmp_path) == []


def test_failing_consumer_stops_the_server(tmp_path, model_dir, monkeypatch):
    # Snakemake does not terminate a service whose group fails before its consumers start; the
    # supervisor then stops by itself once no consumer is present (after 120 s by default).
    monkeypatch.setenv("WORTHIT_ORPHAN_AFTER_S", "20")
    cfg = study_config(model_dir)
    # a file where the level's output folder must go: the load-test job fails for real
    out = tmp_path / "results/t/variant~base"
    out.mkdir(parents=True)
    (out / "load").write_text("not a folder")
    proc = run_snakemake(tmp_path, cfg, check=False)
    assert proc.returncode != 0
    assert wait_gone(tmp_path) == [], "a vLLM server outlived its failed group"


def start_snakemake(tmp_path, cfg, *args, **popen) -> subprocess.Popen:
    """The workflow on ``cfg`` in the background, in its own process group (``popen``: more Popen arguments)."""
    cfgfile = tmp_path / "study.yaml"
    cfgfile.write_text(yaml.safe_dump(cfg))
    cmd = [sys.executable, "-m", "snakemake", "-s", str(ROOT / "Snakefile"), "-d", str(tmp_path)]
    cmd += ["--configfile", str(cfgfile), "--cores", "1", *args]
    # Ctrl-C at a terminal reaches a Snakemake its shell started with SIGINT at its default; a test run started
    # in the background by a script (`.ci/run &`) inherits SIGINT ignored, and so would every job it starts
    popen.setdefault("preexec_fn", lambda: signal.signal(signal.SIGINT, signal.SIG_DFL))
    return subprocess.Popen(cmd, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL, start_new_session=True, **popen)


def start_and_wait_for_load(tmp_path, model_dir, num_requests):
    """Start snakemake in its own process group; return it once a load level is measuring."""
    cfg = study_config(
        model_dir,
        loadtest={
            "prompt_tokens": 32,
            "output_tokens": 64,
            "levels": [1, 2],
            "num_requests": {"min": num_requests, "per_concurrency": 1},
        },
    )
    proc = start_snakemake(tmp_path, cfg)
    log = tmp_path / "results/t/logs/loadtest/base/conc~1.log"
    deadline = time.monotonic() + 400
    while time.monotonic() < deadline and proc.poll() is None:
        if log.exists() and "request 1/" in log.read_text():
            break
        time.sleep(1)
    assert proc.poll() is None, "snakemake ended before the load test started"
    assert any("vllm" in p for p in processes_in(tmp_path))
    return proc


def test_ctrl_c_stops_the_server_and_leaves_no_partial_result(tmp_path, model_dir):
    # Ctrl-C at a terminal: SIGINT to snakemake's whole process group
    proc = start_and_wait_for_load(tmp_path, model_dir, num_requests=50)
    os.killpg(proc.pid, signal.SIGINT)
    proc.wait(timeout=120)
    assert wait_gone(tmp_path) == [], "processes left after Ctrl-C"
    assert not (tmp_path / "results/t/variant~base/load/conc~1.parquet").exists()
    assert not list((tmp_path / "results/t/variant~base").rglob("*.tmp"))


def test_sigterm_to_snakemake_finishes_running_measurements_then_stops_the_server(tmp_path, model_dir):
    # SIGTERM is Snakemake's graceful stop: no new jobs, running ones finish, then the group ends
    proc = start_and_wait_for_load(tmp_path, model_dir, num_requests=6)
    proc.send_signal(signal.SIGTERM)
    proc.wait(timeout=300)
    assert wait_gone(tmp_path) == [], "processes left after SIGTERM to snakemake"
    assert not (tmp_path / "results/t/summary.parquet").exists(), "no new jobs after SIGTERM"


def test_sigkill_to_snakemake_stops_the_server_and_a_rerun_measures_what_it_cut(tmp_path, model_dir):
    # Snakemake cannot clean up after SIGKILL: the supervisor notices its parent is gone
    proc = start_and_wait_for_load(tmp_path, model_dir, num_requests=12)
    proc.kill()
    proc.wait(timeout=30)
    left = wait_gone(tmp_path, timeout_s=90)
    for pid in pids_in(tmp_path):  # the orphaned consumer scripts are not ours to wait for
        with contextlib.suppress(OSError):
            os.kill(pid, signal.SIGKILL)
    assert not any("vllm" in p.lower() or "worthit.server" in p for p in left), left  # VLLM::EngineCore too
    # the killed run left its lock and its running jobs' outputs marked incomplete, the server's state file
    # among them: run again as Snakemake says (--unlock, --rerun-incomplete), the cut level is measured, where
    # Snakemake 9 alone would start the marked server without it (worthit.server.state.forget_incomplete_marks)
    cfg = yaml.safe_load((tmp_path / "study.yaml").read_text())
    level = "results/t/variant~base/load/conc~1.parquet"
    run_snakemake(tmp_path, cfg, "--unlock")
    again = run_snakemake(tmp_path, cfg, "--rerun-incomplete", level, timeout=600)
    out = again.stdout + again.stderr
    assert "loadtest" in out.split("Job stats:")[1].split("total")[0], out[-3000:]
    res = schemas.read(tmp_path / level, LOAD_REQUESTS)
    assert res.ok and res.table.num_rows == 12, res.reason
    assert wait_gone(tmp_path) == []


def test_a_stop_request_ends_a_background_snakemake_and_keeps_what_finished(tmp_path, model_dir):
    # tools/device/run-study.sh at the end of a call's budget: Snakemake runs in the background of a script
    # (its jobs inherit SIGINT ignored), and the stop file asks every measurement to leave, writing nothing.
    # Found on the H200: with SIGINT ignored the request was lost and each call ended in SIGKILL.
    cfg = study_config(
        model_dir,
        loadtest={
            "prompt_tokens": 32,
            "output_tokens": 64,
            "levels": [1, 8],
            "num_requests": {"min": 4, "per_concurrency": 8},
        },
    )
    stop = tmp_path / "stop"
    proc = start_snakemake(
        tmp_path,
        cfg,
        "--keep-going",
        "--keep-incomplete",
        env={**os.environ, "WORTHIT_STOP_FILE": str(stop)},
        preexec_fn=lambda: signal.signal(signal.SIGINT, signal.SIG_IGN),  # as `snakemake ... &` in a script
    )
    load = tmp_path / "results/t/variant~base/load"
    try:
        deadline = time.monotonic() + 400
        while not (load / "conc~1.parquet").exists() and proc.poll() is None and time.monotonic() < deadline:
            time.sleep(0.2)
        assert (load / "conc~1.parquet").exists(), "level 1 was never written"
        stop.touch()  # level 8 (48 requests) is starting or measuring now
        proc.wait(timeout=120)
    finally:
        if proc.poll() is None:
            os.killpg(proc.pid, signal.SIGKILL)
            proc.wait()
    assert proc.returncode != 0, "the stop request was not honoured: every measurement finished"
    assert not (load / "conc~8.parquet").exists()
    assert "stopped on request" in (tmp_path / "results/t/logs/loadtest/base/conc~8.log").read_text()
    assert schemas.read(load / "conc~1.parquet", LOAD_REQUESTS).ok  # kept: the next run measures the rest
    assert wait_gone(tmp_path) == []
    stop.unlink()
    # run_snakemake writes the config with its keys in their own order, start_snakemake sorted them: the same
    # study, which must not rerun what was measured (Snakemake compares the serve spec's params as text)
    dry = run_snakemake(tmp_path, cfg, "-n", "--rerun-incomplete")
    out = dry.stdout + dry.stderr
    made = {ln.split("/load/")[-1] for ln in out.splitlines() if ln.strip().startswith("output:") and "/load/" in ln}
    assert made == {"conc~8.parquet"}, out[-3000:]  # level 1 and kv were kept, not planned again

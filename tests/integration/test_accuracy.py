"""Real lm-eval (evaluate env) against real vLLM on CPU (serve env), through worthit's own supervisor."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import pytest

from tests.conftest import CPU_ENGINE_ARGS, require_env, supervised_server
from worthit import schemas
from worthit.experiments.accuracy import measure as acc
from worthit.experiments.accuracy.tables import ACCURACY, ACCURACY_SAMPLES
from worthit.server import ServerState

pytestmark = [pytest.mark.vllm, pytest.mark.lmeval, pytest.mark.slow]

ACC_CFG = {
    "num_concurrent": 4,
    "max_retries": 3,
    "max_length": 2048,
    "timeout_s": 600,
    "seed": 1234,
    "parallel_tasks": 2,
}


def _serve(tmp: Path, model_dir: Path, serve_python: Path, extra_args: dict | None = None) -> Iterator[ServerState]:
    with supervised_server(tmp, model_dir, serve_python, {**CPU_ENGINE_ARGS, **(extra_args or {})}, variant="t") as st:
        yield st


@pytest.fixture(scope="module")
def server(tmp_path_factory, model_dir, serve_python) -> Iterator[ServerState]:
    yield from _serve(tmp_path_factory.mktemp("srv"), model_dir, serve_python)


@pytest.fixture(scope="module")
def evaluate_python() -> Path:
    return require_env("evaluate")


def test_shipped_tasks_score_through_the_served_endpoint(server, model_dir, evaluate_python, tmp_path):
    cfg = {
        **ACC_CFG,
        "tasks": [
            {"name": "worthit_arc", "limit": 24},
            {"name": "worthit_hellaswag", "limit": 12},
            {"name": "worthit_gsm", "limit": 4},
        ],
    }
    rows, samples, meta = acc.evaluate(
        "t",
        server.url,
        server.served_model_name,
        str(model_dir),
        acc_cfg=cfg,
        python=str(evaluate_python),
        raw_dir=tmp_path / "raw",
        max_length=2048,
    )
    schemas.write(tmp_path / "accuracy.parquet", ACCURACY, rows)
    schemas.write(tmp_path / "accuracy_samples.parquet", ACCURACY_SAMPLES, samples)
    arc_docs = {s["doc_id"] for s in samples if s["task"] == "worthit_arc" and s["metric"] == "acc"}
    assert arc_docs == set(range(24))
    by = {(r["task"], r["metric"], r["filter"]): r for r in rows}
    assert all(r["status"] == "ok" for r in rows), [r["reason"] for r in rows]
    arc = by[("worthit_arc", "acc", "none")]
    assert arc["n"] == 24 and arc["num_fewshot"] == 0 and arc["lm_eval_version"].startswith("0.4")
    assert 0 <= arc["value"] <= 1 and arc["stderr"] > 0
    assert by[("worthit_hellaswag", "acc_norm", "none")]["n"] == 12
    gsm = by[("worthit_gsm", "exact_match", "strict-match")]
    assert gsm["n"] == 4 and gsm["num_fewshot"] == 3
    assert ("worthit_gsm", "exact_match", "flexible-extract") in by
    # lm-eval's own results JSON and per-sample logs are kept next to the Parquet
    for task in ("worthit_arc", "worthit_hellaswag", "worthit_gsm"):
        assert acc.find_results(tmp_path / "raw" / task) is not None
        samples = list((tmp_path / "raw" / task).rglob(f"samples_{task}_*.jsonl"))
        assert samples and samples[0].read_text().strip()
    assert "--include_path" in meta["lm_eval_commands"]["worthit_arc"]


def test_unknown_task_and_timeout_are_failed_rows_and_the_other_tasks_still_run(
    server, model_dir, evaluate_python, tmp_path
):
    cfg = {
        **ACC_CFG,
        "tasks": [
            {"name": "no_such_task_anywhere"},
            {"name": "worthit_gsm", "limit": 50, "timeout_s": 8},
            {"name": "worthit_arc", "limit": 4},
        ],
    }
    rows, _, _ = acc.evaluate(
        "t",
        server.url,
        server.served_model_name,
        str(model_dir),
        acc_cfg=cfg,
        python=str(evaluate_python),
        raw_dir=tmp_path / "raw",
        max_length=2048,
    )
    by = {r["task"]: r for r in rows}
    unknown = by["no_such_task_anywhere"]
    assert unknown["status"] == "failed"
    assert str(tmp_path / "raw" / "tasks") in unknown["reason"] and "lm_eval/tasks" in unknown["reason"]
    assert by["worthit_gsm"]["status"] == "failed" and "timed out after 8 s" in by["worthit_gsm"]["reason"]
    assert by["worthit_arc"]["status"] == "ok" and by["worthit_arc"]["n"] == 4


def test_a_server_without_prompt_logprobs_is_named_as_the_missing_capability(
    tmp_path, model_dir, serve_python, evaluate_python
):
    for state in _serve(tmp_path, model_dir, serve_python, {"max-logprobs": 0}):
        cfg = {**ACC_CFG, "tasks": [{"name": "worthit_arc", "limit": 4}]}
        rows, _, _ = acc.evaluate(
            "t",
            state.url,
            state.served_model_name,
            str(model_dir),
            acc_cfg=cfg,
            python=str(evaluate_python),
            raw_dir=tmp_path / "raw",
            max_length=2048,
        )
        assert len(rows) == 1 and rows[0]["status"] == "failed"
        assert "does not return prompt logprobs" in rows[0]["reason"] and "worthit_arc" in rows[0]["reason"]

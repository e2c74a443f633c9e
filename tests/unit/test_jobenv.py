"""The thread-count variables a job's programs get back from Snakemake's ``threads: 0`` (worthit.jobenv)."""

from __future__ import annotations

import os
import subprocess
import sys

import pytest

from worthit import jobenv


def test_a_zero_from_snakemake_goes_back_to_the_users_value_or_unset() -> None:
    user = {"OMP_NUM_THREADS": "4", "PATH": "/bin"}
    jobenv.remember(user)
    assert user["WORTHIT_USER_OMP_NUM_THREADS"] == "4" and user["WORTHIT_USER_MKL_NUM_THREADS"] == ""
    # what Snakemake gives a job of threads: 0 (snakemake/shell.py: every variable set to the threads)
    job = {**user, **dict.fromkeys(jobenv.THREAD_VARS, "0")}
    env = jobenv.restored(job)
    assert env["OMP_NUM_THREADS"] == "4" and env["PATH"] == "/bin"
    assert not any(name in env for name in jobenv.THREAD_VARS if name != "OMP_NUM_THREADS")


def test_a_real_thread_count_is_kept_and_remembering_twice_keeps_the_first() -> None:
    env = {"OMP_NUM_THREADS": "3"}
    jobenv.remember(env)
    env["OMP_NUM_THREADS"] = "8"  # a cluster profile's set-threads: 8 for the server's group
    jobenv.remember(env)  # the job's own Snakemake parses the Snakefile again
    assert env["WORTHIT_USER_OMP_NUM_THREADS"] == "3"
    assert jobenv.restored(env)["OMP_NUM_THREADS"] == "8"
    # no remembered value (a job started outside the workflow): unset, so the program picks its default
    assert "OMP_NUM_THREADS" not in jobenv.restored({"OMP_NUM_THREADS": "0"})


def test_restore_here_fixes_the_process_before_a_library_reads_it(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("OMP_NUM_THREADS", "0")
    monkeypatch.setenv("WORTHIT_USER_OMP_NUM_THREADS", "")
    monkeypatch.setenv("MKL_NUM_THREADS", "0")
    monkeypatch.setenv("WORTHIT_USER_MKL_NUM_THREADS", "2")
    jobenv.restore_here()
    assert "OMP_NUM_THREADS" not in os.environ and os.environ["MKL_NUM_THREADS"] == "2"
    # and a child started now sees it too (putenv, not only Python's mapping)
    out = subprocess.run(
        [sys.executable, "-c", "import os; print(os.environ.get('OMP_NUM_THREADS'), os.environ['MKL_NUM_THREADS'])"],
        capture_output=True,
        text=True,
        check=True,
    )
    assert out.stdout.split() == ["None", "2"]

"""Every shipped study plans (snakemake -n) and is exactly what its file says."""

from __future__ import annotations

import re
import subprocess
import sys

import pytest
import yaml

from tests.conftest import ROOT

STUDIES = sorted((ROOT / "config" / "studies").glob("*.yaml"))


def gpus_needed(configfile) -> int:
    """The most GPUs one variant of the study claims (``--resources gpu=N`` must grant at least that)."""
    cfg = yaml.safe_load(configfile.read_text())
    return max([int(v.get("gpus", 1)) for v in cfg["variants"].values()] or [1])


def dry_run(tmp_path, configfile):
    return subprocess.run(
        [
            sys.executable,
            "-m",
            "snakemake",
            "-s",
            str(ROOT / "Snakefile"),
            "-d",
            str(tmp_path),
            "--configfile",
            str(configfile),
            "-n",
            "--cores",
            "1",
            "--resources",
            f"gpu={gpus_needed(configfile)}",
        ],
        capture_output=True,
        text=True,
        timeout=300,
    )


@pytest.mark.parametrize("study", STUDIES, ids=[s.stem for s in STUDIES])
def test_study_plans_every_variant_and_only_those(tmp_path, study):
    proc = dry_run(tmp_path, study)
    assert proc.returncode == 0, proc.stdout[-3000:] + proc.stderr[-3000:]
    out = proc.stdout + proc.stderr
    cfg = yaml.safe_load(study.read_text())
    planned = set(re.findall(r"variant~([A-Za-z0-9_.-]+)/", out))
    assert planned == set(cfg["variants"]), "a study file must not inherit the default study's variants"


def test_rtx3090_study_reproduces_the_seed_study_grid(tmp_path):
    cfg = yaml.safe_load((ROOT / "config/studies/qwen2.5-7b-rtx3090.yaml").read_text())
    assert cfg["loadtest"]["levels"] == [1, 2, 4, 8, 16, 32, 64]
    assert cfg["prefix"]["lengths"] == [0, 1500, 4000]
    assert [t["name"] for t in cfg["accuracy"]["tasks"]] == ["hellaswag", "arc_easy", "arc_challenge", "gsm8k"]
    assert {"bf16", "awq_int4", "fp8_kv", "int8_kv", "spec_draft"} <= set(cfg["variants"])


def test_bad_study_file_gets_an_error_naming_file_key_and_allowed_values(tmp_path):
    bad = tmp_path / "bad.yaml"
    bad.write_text(
        yaml.safe_dump(
            {"models": {"m": {"source": "hf:a/b"}}, "variants": {"v": {"model": "m"}}, "loadtest": {"endpoint": "grpc"}}
        )
    )
    proc = dry_run(tmp_path, bad)
    out = proc.stdout + proc.stderr
    assert proc.returncode != 0
    assert "bad.yaml" in out and "loadtest.endpoint" in out and "completions, chat" in out
    assert "Traceback" not in out

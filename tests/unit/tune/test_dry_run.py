"""worthit tune --dry-run: the section and its flags checked, the space counted, the plan's prunes listed,
nothing served. vLLM's flags are given here; tests/integration/test_tune_vllm_flags.py asks the real one."""

from __future__ import annotations

import copy
from pathlib import Path

import pytest
import yaml

from tests.conftest import ROOT
from worthit import cli
from worthit.tune import dry_run as D
from worthit.tune import flags as F

SEED = ROOT / "config" / "studies" / "qwen2.5-7b-rtx3090.yaml"
QWEN7B = ROOT / "tests" / "fixtures" / "models" / "qwen2.5-7b-instruct" / "config.json"
ACCEPTED = {"max-num-seqs", "max-num-batched-tokens", "gpu-memory-utilization", "enable-chunked-prefill"}


def write_study(tmp_path: Path, space: dict) -> Path:
    raw = yaml.safe_load(SEED.read_text())
    raw.setdefault("plan", {})["model_configs"] = {m: str(QWEN7B) for m in raw["models"]}
    raw["plan"]["hub_configs"] = False
    raw["tune"] = {"space": copy.deepcopy(space), "budget": {"server_starts": 30, "gpu_minutes": 120}}
    f = tmp_path / "study.yaml"
    f.write_text(yaml.safe_dump(raw))
    return f


@pytest.fixture
def accepted(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(F, "accepted_flags", lambda python: ("0.0-test", set(ACCEPTED)))


SPACE = {
    "max-num-seqs": [8, 512],
    "max-num-batched-tokens": [2048, 4096, 8192],
    "gpu-memory-utilization": {"low": 0.85, "high": 0.95, "step": 0.05},
    "enable-chunked-prefill": [True, False],
}


def test_the_dry_run_prints_space_count_prunes_and_budget(
    tmp_path: Path, accepted: None, capsys: pytest.CaptureFixture[str]
) -> None:
    f = write_study(tmp_path, SPACE)
    assert cli.main(["tune", "--dry-run", "--config", str(f), "--gpu", "RTX 3090", "--no-hub"]) == 0
    out = capsys.readouterr().out
    assert "tune on NVIDIA GeForce RTX 3090 (vLLM 0.0-test): every flag accepted by vllm serve --help=all" in out
    assert "  max-num-seqs            integers 8 .. 512" in out
    assert "  gpu-memory-utilization  floats 0.85 .. 0.95, step 0.05" in out
    assert f"candidates: {505 * 3 * 3 * 2:,}" in out
    assert "pruned by the plan before serving: " in out and "dominated by the same candidate at max-num-seqs" in out
    # 4 rounds x 4 candidates, then (2 scenarios x top 3 + the defaults) x 4 repeats
    assert "budget: 30 server starts or 120 GPU-minutes (the rounds and the confirmation would start 44" in out
    assert "nothing was served" in out and not (tmp_path / "results").exists()


def test_the_prunes_count_every_max_num_seqs_the_pool_cannot_use(tmp_path: Path, accepted: None) -> None:
    from worthit.config import load
    from worthit.plan import Hardware

    cfg = load(write_study(tmp_path, SPACE))
    d = D.dry_run(cfg, source="s", hw=Hardware.named("RTX 3090"), accepted=("t", ACCEPTED), hub=False)
    assert len(d.pruned) == 3 * 3 * 2 and not d.at_ends  # every combination of the other flags
    for g in d.pruned:  # each group: the values above its fit, none at or below
        assert g.values == list(range(g.values[0], 513)) and f"max-num-seqs {g.values[0] - 1})" in g.reason
    more = {g.others["gpu-memory-utilization"]: len(g.values) for g in d.pruned}
    assert more[0.85] > more[0.95]  # a smaller pool prunes more


def test_an_unknown_flag_is_refused_with_the_closest(
    tmp_path: Path, accepted: None, capsys: pytest.CaptureFixture[str]
) -> None:
    f = write_study(tmp_path, {"max-num-seq": [8, 64]})
    assert cli.main(["tune", "--dry-run", "--config", str(f), "--gpu", "RTX 3090"]) == 2
    err = capsys.readouterr().err
    assert f"worthit tune: error: {f}: key 'tune.space.max-num-seq': vLLM 0.0-test has no flag --max-num-seq" in err
    assert "closest accepted: max-num-seqs" in err and "Traceback" not in err


def test_a_bad_value_and_an_empty_space_are_errors_not_tracebacks(
    tmp_path: Path, accepted: None, capsys: pytest.CaptureFixture[str]
) -> None:
    f = write_study(tmp_path, {"max-num-seqs": [512, 8]})
    assert cli.main(["tune", "--dry-run", "--config", str(f)]) == 2
    assert "key 'tune.space.max-num-seqs': low 512 must be below high 8" in capsys.readouterr().err
    f = write_study(tmp_path, {})
    assert cli.main(["tune", "--dry-run", "--config", str(f)]) == 2
    assert "tune.space is empty" in capsys.readouterr().err


def test_without_dry_run_a_study_without_a_tune_is_an_error_not_a_run(capsys: pytest.CaptureFixture[str]) -> None:
    assert cli.main(["tune"]) == 2  # the embedded default has no tune: section
    err = capsys.readouterr().err
    assert "tune.space is empty: no tune to run" in err and "Traceback" not in err


def test_the_dry_run_names_the_served_configurations_whose_accuracy_gates_them(
    tmp_path: Path, accepted: None, capsys: pytest.CaptureFixture[str]
) -> None:
    raw = yaml.safe_load(write_study(tmp_path, {"max-num-seqs": [8, 64]}).read_text())
    base = raw["baseline_variant"]
    other = next(v for v, spec in raw["variants"].items() if spec["model"] != raw["variants"][base]["model"])
    raw["tune"]["space"]["variant"] = [base, other]
    f = tmp_path / "study.yaml"
    f.write_text(yaml.safe_dump(raw))
    assert cli.main(["tune", "--dry-run", "--config", str(f), "--gpu", "RTX 3090", "--no-hub"]) == 0
    out = capsys.readouterr().out
    line = next(x for x in out.splitlines() if x.startswith("accuracy: "))
    model = raw["variants"][other]["model"]
    assert line.startswith(f"accuracy: 1 served configuration(s) change what is served ({model}")
    assert "screened on 50 items per task against the baseline before its load" in line

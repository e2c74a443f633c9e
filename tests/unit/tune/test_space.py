"""worthit tune: the tune: section parsed into ranges and choices, and its errors (file, key path, form)."""

from __future__ import annotations

import copy
from pathlib import Path
from typing import Any

import pytest
import yaml

from tests.conftest import ROOT
from worthit.config import ConfigError, load, validate
from worthit.tune import space as S

EMBEDDED = yaml.safe_load((ROOT / "config" / "config.yaml").read_text())


def study(tune: dict[str, Any]) -> dict[str, Any]:
    raw = copy.deepcopy(EMBEDDED)
    raw["tune"] = tune
    return validate(raw, "study.yaml")


def test_defaults_fill_an_empty_section() -> None:
    t = S.parse(validate(copy.deepcopy(EMBEDDED), "x"))
    assert t.space == {} and t.scenarios == ("latency", "throughput")
    assert (t.budget.server_starts, t.budget.gpu_minutes, t.rounds, t.per_round) == (24, None, 4, 4)
    assert (t.confirm_top, t.confirm_repeats, t.kv_margin, t.seed) == (3, 4, 0.25, 0)


def test_every_form_of_the_space() -> None:
    t = S.parse(
        study(
            {
                "space": {
                    "max-num-seqs": [8, 512],
                    "gpu-memory-utilization": [0.85, 0.95],
                    "max-num-batched-tokens": {"low": 2048, "high": 16384, "log": True},
                    "block-size": {"low": 16, "high": 64, "step": 16},
                    "enable-chunked-prefill": [True, False],
                    "speculative-config.num_speculative_tokens": [0, 2, 4, 6],
                    "kv-cache-dtype": {"choices": ["auto", "fp8"]},
                    "variant": ["baseline", "spec_ngram"],
                },
                "budget": {"server_starts": 10, "gpu_minutes": 90},
            }
        )
    )
    sp = t.space
    assert sp["max-num-seqs"] == S.Range(8, 512, integer=True)
    assert sp["gpu-memory-utilization"] == S.Range(0.85, 0.95, integer=False)
    assert sp["max-num-batched-tokens"] == S.Range(2048, 16384, integer=True, log=True)
    assert sp["block-size"].size() == 4 and sp["block-size"].values() == [16, 32, 48, 64]
    assert sp["enable-chunked-prefill"] == S.Choices((True, False))
    assert sp["speculative-config.num_speculative_tokens"] == S.Choices((0, 2, 4, 6))
    assert sp["kv-cache-dtype"] == S.Choices(("auto", "fp8"))
    assert t.flags == [k for k in sp if k != "variant"]
    assert t.size() is None  # a continuous float range
    assert (t.budget.server_starts, t.budget.gpu_minutes) == (10, 90)


def test_a_countable_space_is_counted() -> None:
    t = S.parse(study({"space": {"max-num-seqs": [8, 15], "enable-chunked-prefill": [True, False]}}))
    assert t.size() == 16


def test_dotted_keys_fold_into_their_json_flag() -> None:
    assert S.engine_args({"variant": "a", "speculative-config.num_speculative_tokens": 4, "max-num-seqs": 8}) == {
        "speculative-config": {"num_speculative_tokens": 4},
        "max-num-seqs": 8,
    }


@pytest.mark.parametrize(
    ("value", "says"),
    [
        ([512, 8], "low 512 must be below high 8"),
        ({"low": 1, "high": 8, "log": True, "step": 2}, "both log and stepped"),
        ({"low": 1}, "range mapping has keys low, high"),
        ({"choices": 3}, "a choices mapping holds only a list"),
        ([1, 1, 2], "a choice is repeated"),
        ({"low": 0, "high": 8, "log": True}, "log range needs low > 0"),
    ],
)
def test_a_bad_value_names_the_file_the_key_and_the_form(value: object, says: str) -> None:
    with pytest.raises(ConfigError) as e:
        S.parse(study({"space": {"max-num-seqs": value}}), "study.yaml")
    msg = str(e.value)
    assert msg.startswith("study.yaml: key 'tune.space.max-num-seqs': ") and says in msg
    assert "allowed: a range [low, high]" in msg


def test_an_unknown_variant_and_a_misspelt_flag_are_refused() -> None:
    with pytest.raises(ConfigError, match=r"tune.space.variant': unknown variant 'bf16' \(allowed: choices among"):
        S.parse(study({"space": {"variant": ["baseline", "bf16"]}}), "s.yaml")
    with pytest.raises(ConfigError, match="tune.space.max_num_seqs': spell the flag as on the command line"):
        S.parse(study({"space": {"max_num_seqs": [1, 4]}}), "s.yaml")
    with pytest.raises(ConfigError, match="tune.space.--max-num-seqs'"):
        S.parse(study({"space": {"--max-num-seqs": [1, 4]}}), "s.yaml")


def test_the_schema_checks_the_rest_of_the_section(tmp_path: Path) -> None:
    raw = copy.deepcopy(EMBEDDED)
    raw["tune"] = {"budget": {"server_starts": 0}, "scenarios": ["fastest"], "space": {"max-num-seqs": "many"}}
    f = tmp_path / "study.yaml"
    f.write_text(yaml.safe_dump(raw))
    with pytest.raises(ConfigError) as e:
        load(f)
    msg = str(e.value)
    assert f"{f}: key 'tune.budget.server_starts'" in msg and "minimum" in msg
    assert f"{f}: key 'tune.scenarios[0]'" in msg and "allowed: latency, throughput" in msg
    assert f"{f}: key 'tune.space.max-num-seqs': 'many' is not of type 'array', 'object'" in msg


def test_a_speculative_k_without_any_proposer_is_refused_naming_the_variants() -> None:
    with pytest.raises(ConfigError) as e:
        S.parse(study({"space": {"speculative-config.num_speculative_tokens": [0, 2, 4]}}), "s.yaml")
    msg = str(e.value)
    assert msg.startswith("s.yaml: key 'tune.space.speculative-config.num_speculative_tokens': ")
    assert "no variant the candidates build on (baseline) has a speculative-config method" in msg
    assert "0 means no speculation" in msg
    # a proposer in the space, or k = 0 alone, is fine
    k = "speculative-config.num_speculative_tokens"
    S.parse(study({"space": {k: [0, 4], "speculative-config.method": {"choices": ["ngram"]}}}), "s.yaml")
    S.parse(study({"space": {k: {"choices": [0]}}}), "s.yaml")

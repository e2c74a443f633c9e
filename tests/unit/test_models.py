"""The manifest says whether a model's weights are real or random."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from worthit.models import RANDOM_WEIGHTS_KEY, Manifest, SourceError, build_manifest, fetch, record_dtype


def _model(d: Path, **cfg: object) -> Path:
    d.mkdir(parents=True)
    (d / "config.json").write_text(json.dumps({"model_type": "qwen2", "torch_dtype": "bfloat16", **cfg}))
    (d / "tokenizer.json").write_text("{}")
    return d


def test_a_marked_config_makes_a_random_weights_manifest_and_an_unmarked_one_a_real_one(tmp_path):
    assert build_manifest("r", "path:x", None, _model(tmp_path / "r", **{RANDOM_WEIGHTS_KEY: "random"})).weights == (
        "random"
    )
    assert build_manifest("q", "path:x", None, _model(tmp_path / "q")).weights == "real"


def test_the_path_source_writes_the_key_and_load_reads_it_back(tmp_path):
    src = _model(tmp_path / "m", **{RANDOM_WEIGHTS_KEY: "random"})
    m = fetch("m", f"path:{src}", tmp_path / "out")
    on_disk = json.loads((tmp_path / "out" / "manifest.json").read_text())
    assert on_disk["weights"] == "random" == Manifest.load(tmp_path / "out" / "manifest.json").weights == m.weights


def test_a_manifest_written_before_the_key_existed_loads_as_real(tmp_path):
    m = Manifest(name="old", source="path:/x", revision=None, model_dir="/x")
    d = json.loads(json.dumps(m.__dict__))
    del d["weights"]
    (tmp_path / "manifest.json").write_text(json.dumps(d))
    assert Manifest.load(tmp_path / "manifest.json").weights == "real"


def test_an_unknown_mark_is_an_error_naming_the_file_key_and_allowed_values(tmp_path):
    d = _model(tmp_path / "bad", **{RANDOM_WEIGHTS_KEY: "fake"})
    with pytest.raises(SourceError) as e:
        build_manifest("bad", "path:x", None, d)
    assert str(d / "config.json") in str(e.value) and RANDOM_WEIGHTS_KEY in str(e.value)
    assert "random, real" in str(e.value)


def test_a_converted_checkpoint_names_the_dtype_its_weights_were_saved_in(tmp_path):
    # a transformers version that recorded the float32 the GGUF was dequantised in beside bf16 weights
    cfg = tmp_path / "config.json"
    cfg.write_text(json.dumps({"model_type": "qwen2", "torch_dtype": "float32", "hidden_size": 8}))
    record_dtype(cfg, "bfloat16")
    out = json.loads(cfg.read_text())
    assert out["torch_dtype"] == out["dtype"] == "bfloat16" and out["hidden_size"] == 8

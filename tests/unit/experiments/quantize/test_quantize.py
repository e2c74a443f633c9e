"""The quantisation plan checks, calibration windows, and the serve stage's refusal of a failed model.

Pure and fast: model folders here are config.json + a safetensors header (zero-filled tensors), which is
all the plan checks read.
"""

from __future__ import annotations

import json
import struct
import subprocess
import sys
import time
from pathlib import Path

import pytest

from worthit import config as cfgmod
from worthit.experiments.quantize import (
    QuantizeError,
    QuantizePlan,
    check_quantize_plans,
    manifest_status,
    quantised_linears,
    token_windows,
    validate_plan,
    weights_row,
)
from worthit.server import ServerFailed, wait_ready

ROOT = Path(__file__).resolve().parents[4]


def write_model(d: Path, shapes: dict[str, list[int]], arch: str = "LlamaForCausalLM") -> Path:
    """A model folder with real safetensors framing (bf16 zeros) and a config.json."""
    d.mkdir(parents=True, exist_ok=True)
    header: dict[str, object] = {}
    offset = 0
    for name, shape in shapes.items():
        n = 2
        for s in shape:
            n *= s
        header[name] = {"dtype": "BF16", "shape": shape, "data_offsets": [offset, offset + n]}
        offset += n
    raw = json.dumps(header).encode()
    (d / "model.safetensors").write_bytes(struct.pack("<Q", len(raw)) + raw + b"\0" * offset)
    (d / "config.json").write_text(json.dumps({"architectures": [arch], "dtype": "bfloat16"}))
    return d


def smollm2_like(d: Path, arch: str = "LlamaForCausalLM") -> Path:
    """SmolLM2-135M's widths (hidden 576, MLP 1536, 3 KV heads of 64), one layer."""
    p = "model.layers.0."
    return write_model(
        d,
        {
            "model.embed_tokens.weight": [64, 576],
            p + "self_attn.q_proj.weight": [576, 576],
            p + "self_attn.k_proj.weight": [192, 576],
            p + "self_attn.v_proj.weight": [192, 576],
            p + "self_attn.o_proj.weight": [576, 576],
            p + "mlp.gate_proj.weight": [1536, 576],
            p + "mlp.up_proj.weight": [1536, 576],
            p + "mlp.down_proj.weight": [576, 1536],
            p + "input_layernorm.weight": [576],
            "lm_head.weight": [100, 50],
        },
        arch,
    )


def plan(**kw: object) -> QuantizePlan:
    spec: dict[str, object] = {"base": "smol"}
    spec.update(kw)
    return QuantizePlan.from_config("smol-q", spec)


def test_group_size_128_is_refused_for_smollm2_naming_the_key_and_the_sizes_that_fit(tmp_path: Path) -> None:
    base = smollm2_like(tmp_path / "m")
    with pytest.raises(QuantizeError) as e:
        validate_plan(plan(group_size=128), base)
    msg = str(e.value)
    assert "models.smol-q.quantize.group_size" in msg
    assert "576" in msg and "allowed for this model: 32, 64" in msg


def test_group_size_64_fits_every_smollm2_layer(tmp_path: Path) -> None:
    validate_plan(plan(group_size=64), smollm2_like(tmp_path / "m"))


def test_ignored_lm_head_and_embeddings_are_not_quantised_layers(tmp_path: Path) -> None:
    layers = quantised_linears(smollm2_like(tmp_path / "m"), ["lm_head"])
    assert "lm_head" not in layers and not any("embed" in k for k in layers)
    assert layers["model.layers.0.mlp.down_proj"] == 1536 and len(layers) == 7
    # with lm_head quantised its in-features (50) must divide too, and do not
    with pytest.raises(QuantizeError, match="lm_head"):
        validate_plan(plan(ignore=[]), tmp_path / "m")


def test_regex_ignore_matches_module_names(tmp_path: Path) -> None:
    layers = quantised_linears(smollm2_like(tmp_path / "m"), ["lm_head", "re:.*mlp\\..*"])
    assert not any(".mlp." in k for k in layers) and len(layers) == 4


def test_unknown_scheme_names_the_key_and_the_allowed_schemes() -> None:
    with pytest.raises(QuantizeError, match=r"scheme': unknown scheme 'W3A16' \(allowed: W4A16_ASYM"):
        validate_plan(plan(scheme="W3A16"))


def test_unknown_method_is_refused() -> None:
    with pytest.raises(QuantizeError, match=r"quantize\.method'.*allowed: awq, rtn, autoawq"):
        validate_plan(plan(method="gptq"))


def test_awq_cannot_produce_fp8_and_points_to_rtn() -> None:
    with pytest.raises(QuantizeError, match="use method rtn"):
        validate_plan(plan(scheme="FP8_DYNAMIC", method="awq"))
    validate_plan(plan(scheme="FP8_DYNAMIC", method="rtn", group_size=None))


def test_channelwise_schemes_ignore_the_group_size(tmp_path: Path) -> None:
    validate_plan(plan(scheme="W8A8", method="rtn", group_size=128), smollm2_like(tmp_path / "m"))


def test_kv_cache_scales_alone_or_beside_weights_and_what_is_refused(tmp_path: Path) -> None:
    base = smollm2_like(tmp_path / "m")
    kv_only = plan(scheme="NONE", method="rtn", kv_cache="fp8")
    validate_plan(kv_only, base)
    assert kv_only.needs_calibration  # static KV scales come from the calibration text, even with rtn
    validate_plan(plan(kv_cache="fp8"), base)  # AWQ weights and KV scales in one checkpoint
    with pytest.raises(QuantizeError, match=r"'models.smol-q.quantize.scheme': NONE leaves the weights.*kv_cache"):
        validate_plan(plan(scheme="NONE", method="rtn"), base)
    with pytest.raises(QuantizeError, match=r"quantize.kv_cache': unknown KV-cache scheme 'int8' \(allowed: fp8"):
        validate_plan(plan(kv_cache="int8"), base)
    with pytest.raises(QuantizeError, match="method awq cannot produce NONE"):
        validate_plan(plan(scheme="NONE", kv_cache="fp8"), base)
    with pytest.raises(QuantizeError, match="autoawq cannot calibrate KV-cache scales"):
        validate_plan(plan(method="autoawq", kv_cache="fp8"), base)
    cfg = cfgmod.validate(_study({"smol": {"source": "path:/x"}, "q": {"quantize": {"base": "smol"}}}))
    assert "kv_cache" not in cfg["models"]["q"]["quantize"]  # unset: a plan made before it stays up to date
    with pytest.raises(cfgmod.ConfigError, match=r"kv_cache"):
        cfgmod.validate(_study({"smol": {"source": "path:/x"}, "q": {"quantize": {"base": "smol", "kv_cache": "x"}}}))


def test_architecture_the_backend_cannot_handle_is_refused_before_work(tmp_path: Path) -> None:
    base = smollm2_like(tmp_path / "m", arch="MambaForCausalLM")
    supported = ["LlamaForCausalLM", "Qwen2ForCausalLM"]
    with pytest.raises(QuantizeError, match=r"not support architecture MambaForCausalLM.*LlamaForCausalLM"):
        validate_plan(plan(), base, supported_architectures=supported)


def test_calibration_windows_wrap_around_short_text() -> None:
    w = token_windows([[1, 2, 3], [4, 5]], samples=3, seq_len=4)
    assert w == [[1, 2, 3, 4], [5, 1, 2, 3], [4, 5, 1, 2]]


def test_builtin_calibration_and_heldout_text_are_disjoint_and_cover_prose_code_dialogue() -> None:
    data = ROOT / "src" / "worthit" / "data"
    cal = [json.loads(x) for x in (data / "calibration.jsonl").read_text().splitlines()]
    held = [json.loads(x) for x in (data / "heldout.jsonl").read_text().splitlines()]
    assert {c["kind"] for c in cal} == {c["kind"] for c in held} == {"prose", "code", "dialogue"}
    assert not {c["text"] for c in cal} & {c["text"] for c in held}


def _study(models: dict[str, object]) -> dict[str, object]:
    return {"models": models, "variants": {"q": {"model": next(iter(models))}}}


def test_schema_fills_quantize_defaults_and_refuses_source_plus_quantize() -> None:
    cfg = cfgmod.validate(_study({"smol": {"source": "path:/x"}, "q": {"quantize": {"base": "smol"}}}))
    q = cfg["models"]["q"]["quantize"]
    assert q["scheme"] == "W4A16_ASYM" and q["method"] == "awq" and q["group_size"] == 64
    assert q["ignore"] == ["lm_head"] and q["calibration"]["dataset"] == "builtin"
    with pytest.raises(cfgmod.ConfigError, match="models.q"):
        cfgmod.validate(
            _study({"smol": {"source": "path:/x"}, "q": {"source": "path:/y", "quantize": {"base": "smol"}}})
        )


def test_quantised_base_must_be_a_fetched_model_and_plans_are_checked_against_it(tmp_path: Path) -> None:
    base = smollm2_like(tmp_path / "m")
    ok = {"smol": {"source": f"path:{base}"}, "q": {"quantize": {"base": "smol", "group_size": 64}}}
    assert [p.name for p in check_quantize_plans({"models": ok}, "study.yaml")] == ["q"]
    with pytest.raises(QuantizeError, match=r"study.yaml: key 'models.q.quantize.base'.*allowed: smol"):
        check_quantize_plans({"models": {**ok, "q": {"quantize": {"base": "nope"}}}}, "study.yaml")
    with pytest.raises(QuantizeError, match="study.yaml: key 'models.q.quantize.group_size'"):
        check_quantize_plans({"models": {**ok, "q": {"quantize": {"base": "smol", "group_size": 128}}}}, "study.yaml")


def test_weights_row_reports_scheme_bytes_cost_and_gate_numbers() -> None:
    m = {
        "name": "q",
        "weight_bytes": 10,
        "extra": {
            "status": "ok",
            "quantization": {
                "scheme": "W4A16_ASYM",
                "method": "awq",
                "group_size": 64,
                "calibration": {"samples": 8, "seq_len": 128},
                "wall_s": 90.0,
                "peak_rss_bytes": 2**30,
                "bytes_before": 40,
                "bytes_after": 10,
            },
            "quality_gate": {"nll_base": 2.5, "nll_quantized": 2.6, "nll_increase": 0.1, "kl": 0.1},
        },
    }
    row = weights_row(m)
    assert row["weight_bytes_before"] == 40 and row["weight_bytes"] == 10
    assert row["calibration_samples"] == 8 and row["quantize_peak_rss_gib"] == 1.0
    assert row["nll_increase"] == 0.1 and row["status"] == "ok"


def test_fetched_manifests_are_servable_and_failed_ones_carry_their_reason() -> None:
    assert manifest_status({"name": "x", "extra": {"quantization_config": None}}) == ("ok", "")
    assert manifest_status({"extra": {"status": "failed", "reason": "NLL rose"}}) == ("failed", "NLL rose")


def test_server_refuses_a_model_that_failed_its_gate_and_consumers_get_the_reason(tmp_path: Path) -> None:
    manifest = tmp_path / "manifest.json"
    manifest.write_text(
        json.dumps(
            {
                "name": "q",
                "model_dir": str(tmp_path),
                "extra": {
                    "status": "failed",
                    "reason": "quality gate failed for q: held-out NLL rose by 9.1 nats/token",
                },
            }
        )
    )
    state = tmp_path / "server.json"
    spec = {"variant": "awq", "manifest": str(manifest), "python": "/nonexistent/python", "args": {}}
    proc = subprocess.Popen(
        [
            sys.executable,
            "-m",
            "worthit.server",
            "--state",
            str(state),
            "--log",
            str(tmp_path / "serve.log"),
            "--spec",
            json.dumps(spec),
        ]
    )
    try:
        t0 = time.monotonic()
        with pytest.raises(ServerFailed) as e:
            wait_ready(state, timeout_s=20, poll_s=0.1)
        assert time.monotonic() - t0 < 20
        assert "not served" in e.value.reason and "NLL rose by 9.1" in e.value.reason
        assert e.value.status == "failed"
        assert proc.poll() is None  # stays up until the service group ends
    finally:
        proc.terminate()
        assert proc.wait(timeout=10) == 0
    assert "not starting" in (tmp_path / "serve.log").read_text()


def test_the_report_names_a_kv_scales_model_by_what_it_changes() -> None:
    from worthit.report.context import _model_name

    models = {
        "kv": {"quantize": {"base": "smol", "scheme": "NONE", "method": "rtn", "kv_cache": "fp8"}},
        "awq_kv": {"quantize": {"base": "smol", "scheme": "W4A16_ASYM", "method": "awq", "kv_cache": "fp8"}},
    }
    assert _model_name({"models": models}, "kv") == "FP8 KV-cache scales (kv)"
    assert _model_name({"models": models}, "awq_kv") == "AWQ W4A16 ASYM weights + FP8 KV-cache scales (awq_kv)"


def test_weights_row_names_the_kv_cache_scales_beside_the_scheme() -> None:
    q = {"scheme": "NONE", "kv_cache": "fp8", "method": "rtn", "bytes_before": 10, "bytes_after": 10}
    assert weights_row({"name": "kv", "extra": {"status": "ok", "quantization": q}})["scheme"] == "NONE + KV fp8"

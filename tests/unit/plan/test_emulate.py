"""serve.emulate_gpu_memory_gib: the KV pool of a smaller card on a large one (worthit.plan.emulate) — the
seed study's RTX 3090 pool planned on an H200, the arithmetic, and the errors a user gets."""

from __future__ import annotations

import copy
import json
from pathlib import Path

import pytest

from tests.conftest import ROOT
from worthit import plan as P
from worthit.config import ConfigError, Study, load, validate
from worthit.plan import emulate
from worthit.plan.shapes import GIB

MODELS = ROOT / "tests" / "fixtures" / "models"
QWEN7B = MODELS / "qwen2.5-7b-instruct" / "config.json"
SEED_STUDY = ROOT / "config" / "studies" / "qwen2.5-7b-rtx3090.yaml"
SEED_CONFIGS = {
    "qwen2.5-7b": str(QWEN7B),
    "qwen2.5-7b-awq": str(MODELS / "qwen2.5-7b-instruct-awq" / "config.json"),
    "qwen2.5-0.5b": str(MODELS / "qwen2.5-0.5b-instruct" / "config.json"),
}
# the seed study's measured KV blocks on its RTX 3090 (tests/unit/plan/test_plan.py, STUDY_BLOCKS)
SEED_BLOCKS = {"bf16": 5306, "awq_int4": 15839}
RTX3090 = P.Hardware.named("NVIDIA GeForce RTX 3090")
H200 = P.Hardware.named("NVIDIA H200")


def rows(cfg: dict, hw: P.Hardware) -> dict[str, dict]:
    return {r["variant"]: r for r in P.make_plan(cfg, hw, ROOT / "no-such-dir", given=SEED_CONFIGS, hub=False).rows}


def emulated_seed(gib: float) -> dict:
    cfg = load(SEED_STUDY)
    cfg["serve"]["emulate_gpu_memory_gib"] = gib
    return cfg


def test_an_h200_emulating_the_3090_gets_the_3090_s_planned_pool_and_the_seed_s_blocks():
    on_3090 = rows(load(SEED_STUDY), RTX3090)
    on_h200 = rows(emulated_seed(float(RTX3090.memory_gib or 0)), H200)
    plain_h200 = rows(load(SEED_STUDY), H200)
    for v, measured in SEED_BLOCKS.items():
        assert on_h200[v]["num_blocks"] == on_3090[v]["num_blocks"], v
        assert on_h200[v]["num_blocks"] == pytest.approx(measured, rel=0.10), v
        assert on_h200[v]["num_blocks"] < plain_h200[v]["num_blocks"] / 5, v  # the H200 leaves 8-25x as much
        assert on_h200[v]["emulated_gpu_memory_gib"] == pytest.approx(23.69)
        assert "KV pool of a 23.69 GiB card (emulated)" in on_h200[v]["notes"]
        assert on_h200[v]["overhead_source"] == "kv-cache-memory-bytes (no profiling)"
    # INT4 weights free memory: the pool triples, as it did on the seed's card
    assert on_h200["awq_int4"]["num_blocks"] / on_h200["bf16"]["num_blocks"] == pytest.approx(3.0, rel=0.10)
    # speed stays the H200's: the roofline is the H200's bandwidth
    assert on_h200["bf16"]["tpot_floor_ms_c1"] == pytest.approx(plain_h200["bf16"]["tpot_floor_ms_c1"])
    assert plain_h200["bf16"]["emulated_gpu_memory_gib"] is None


def test_the_pool_is_utilisation_x_card_less_weights_and_overhead_per_gpu():
    shape = P.ModelShape.from_file(QWEN7B)
    weights = 15.2e9
    pool = emulate.emulated_pool(shape, {"gpu-memory-utilization": 0.8}, weights, 24, where="w", overhead_gib=2.0)
    assert pool.kv_bytes == int(0.8 * 24 * GIB - weights - 2.0 * GIB)
    tp2 = emulate.emulated_pool(shape, {"tensor-parallel-size": 2}, weights, 24, where="w", overhead_gib=2.0)
    assert tp2.kv_bytes == int(0.9 * 24 * GIB - weights / 2 - 2.0 * GIB)  # each GPU holds half the weights
    # the overhead is the memory model's for a card of that size (vLLM's smaller default batch below 70 GiB)
    modelled = emulate.emulated_pool(shape, {}, weights, 24, where="w")
    assert modelled.overhead_gib == pytest.approx(P.memory_overhead_gib(shape, {}, RTX3090))
    assert modelled.as_record()["kv_cache_memory_bytes"] == modelled.kv_bytes
    assert "24 GiB card (emulated)" in modelled.describe()


def test_a_card_too_small_for_the_weights_is_refused_naming_the_key_and_the_numbers():
    shape = P.ModelShape.from_file(QWEN7B)
    with pytest.raises(emulate.EmulationError) as e:
        emulate.emulated_pool(shape, {}, 15.2e9, 16, where="variant 'bf16'")
    msg = str(e.value)
    assert "variant 'bf16'" in msg and "emulate_gpu_memory_gib 16" in msg
    assert "weights 14.16 GiB" in msg and "0.9 x 16 GiB = 14.40 GiB" in msg and str(QWEN7B) in msg
    # in the plan, the variant is ruled not applicable with that reason
    bf16 = rows(emulated_seed(16), H200)["bf16"]
    assert bf16["status"] == "not_applicable" and bf16["failed_rule"] == "memory_fit"
    assert "emulate_gpu_memory_gib 16" in bf16["reason"]
    assert rows(emulated_seed(16), H200)["awq_int4"]["status"] == "ok"  # INT4's 5.5 GB fit


def test_emulation_and_an_explicit_kv_cache_size_conflict():
    shape = P.ModelShape.from_file(QWEN7B)
    with pytest.raises(emulate.EmulationError, match="kv-cache-memory-bytes 1000 both size"):
        emulate.emulated_pool(shape, {"kv-cache-memory-bytes": 1000}, 1e9, 24, where="w")


def test_serve_args_need_the_model_s_files(tmp_path: Path):
    with pytest.raises(emulate.EmulationError, match="config.json or its weight files are missing"):
        emulate.serve_args({}, tmp_path, 24, where="variant 'bf16'")
    (tmp_path / "config.json").write_text(QWEN7B.read_text())
    _, from_shapes = emulate.serve_args({}, tmp_path, 24, where="v")  # no weight files: the shapes' bytes
    assert from_shapes.weight_bytes_per_gpu == P.ModelShape.from_file(QWEN7B).weight_bytes(2)
    # weights read off the safetensors header as vLLM holds them: a 7B-sized table of one tensor
    header = json.dumps({"w": {"dtype": "BF16", "shape": [7_600_000_000], "data_offsets": [0, 0]}}).encode()
    (tmp_path / "model.safetensors").write_bytes(len(header).to_bytes(8, "little") + header)
    args, pool = emulate.serve_args({"max-model-len": 4096}, tmp_path, 24, where="v")
    assert args == {"max-model-len": 4096, "kv-cache-memory-bytes": pool.kv_bytes}
    assert pool.weight_bytes_per_gpu == 15_200_000_000


def test_a_variant_overrides_or_drops_the_study_s_card():
    cfg = emulated_seed(24)
    cfg["variants"]["awq_int4"]["emulate_gpu_memory_gib"] = 12
    cfg["variants"]["fp8_kv"]["emulate_gpu_memory_gib"] = None
    study = Study(validate(cfg, "seed"))
    assert study.variant("bf16").emulate_gpu_memory_gib == 24
    assert study.variant("awq_int4").emulate_gpu_memory_gib == 12
    assert study.variant("fp8_kv").emulate_gpu_memory_gib is None
    assert Study(load(SEED_STUDY)).variant("bf16").emulate_gpu_memory_gib is None
    bad = copy.deepcopy(cfg)
    bad["serve"]["emulate_gpu_memory_gib"] = 0
    with pytest.raises(ConfigError, match="emulate_gpu_memory_gib"):
        validate(bad, "seed")


def test_online_fp8_weights_leave_the_pool_of_one_byte_linear_layers():
    shape = P.ModelShape.from_file(QWEN7B)
    bf16 = emulate.served_weights(P.Subject("bf16", {}, shape))
    fp8 = emulate.served_weights(P.Subject("fp8", {"quantization": "fp8"}, shape))
    # the linear layers (6.5 B weights) drop to one byte; embeddings and lm_head stay bf16
    assert bf16 - fp8 == pytest.approx(6.53e9, rel=0.01)
    cfg = emulated_seed(24)
    cfg["variants"]["fp8_w"] = {**cfg["variants"]["bf16"], "engine_args": {"quantization": "fp8"}}
    planned = rows(validate(cfg, "seed"), H200)
    assert planned["fp8_w"]["kv_memory_gib"] - planned["bf16"]["kv_memory_gib"] == pytest.approx(
        (bf16 - fp8) / GIB, rel=0.01
    )


def test_the_report_labels_an_emulated_pool_capacity_only(tmp_path: Path):
    import shutil

    import yaml

    from worthit.experiments.kv.tables import REPORT_CAPACITY
    from worthit.report import build

    fixture = ROOT / "tests" / "fixtures" / "embedded-default"
    for d in fixture.glob("variant~*"):
        shutil.copytree(d, tmp_path / d.name)
    cfg = validate(yaml.safe_load((fixture / "config.yaml").read_text()), "fixture")
    cfg["serve"]["emulate_gpu_memory_gib"] = 24
    cfg["variants"]["no_prefix_cache"]["emulate_gpu_memory_gib"] = None
    notes = build.from_dir(cfg, tmp_path).view(REPORT_CAPACITY).notes
    assert any("KV pool of a 24 GiB card (emulated), capacity only" in n and "baseline" in n for n in notes)
    assert not any("no_prefix_cache" in n for n in notes)


def _supervise(tmp_path: Path, gib: float) -> tuple[dict, str]:
    """The real supervisor (python -m worthit.server) on a 7B's config.json, its server a command that exits at
    once: what it recorded once the server's exit (or its refusal) is written, and its log."""
    import signal
    import subprocess
    import sys
    import time

    model = tmp_path / "m"
    model.mkdir(parents=True)
    (model / "config.json").write_text(QWEN7B.read_text())
    spec = {
        "variant": "bf16",
        "model_dir": str(model),
        "python": "/bin/false",
        "args": {},
        "emulate_gpu_memory_gib": gib,
    }
    state = tmp_path / "server.json"
    cmd = [sys.executable, "-m", "worthit.server", "--state", str(state), "--log", str(tmp_path / "serve.log")]
    proc = subprocess.Popen([*cmd, "--spec", json.dumps(spec)], cwd=ROOT)
    try:
        exit_file = tmp_path / "server.json.exit"
        deadline = time.monotonic() + 60
        while not exit_file.exists() and time.monotonic() < deadline:
            time.sleep(0.2)
        time.sleep(0.5)  # the state file follows the exit file
        return json.loads(state.read_text()), (tmp_path / "serve.log").read_text()
    finally:
        proc.send_signal(signal.SIGTERM)
        proc.wait(timeout=30)


def test_the_supervisor_serves_the_emulated_pool_or_refuses_a_card_too_small(tmp_path: Path):
    state, log = _supervise(tmp_path / "a", 24)
    flag = state["command"].index("--kv-cache-memory-bytes")
    pool = emulate.emulated_pool(
        P.ModelShape.from_file(QWEN7B), {}, P.ModelShape.from_file(QWEN7B).weight_bytes(2), 24, where=""
    )
    assert int(state["command"][flag + 1]) == pool.kv_bytes
    assert "[worthit] KV pool of a 24 GiB card (emulated): 0.9 x 24 GiB - weights 14.18 GiB" in log
    refused, log = _supervise(tmp_path / "b", 16)
    assert refused["command"] == []  # nothing started
    assert "not starting the server: variant 'bf16' (serve.emulate_gpu_memory_gib" in log
    assert "cannot hold it" in log

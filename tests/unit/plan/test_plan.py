"""worthit plan: every prerequisite rule, every prediction, and the plan checked against measurements —
the seed study's RTX 3090 figures (STUDY: 5,306 / 15,839 blocks, critical concurrency ~88, TPOT 19.7 ms)
and the committed H200 run (examples/h200: 128,943 blocks)."""

from __future__ import annotations

import json
from dataclasses import replace
from pathlib import Path

import pytest

from tests.conftest import ROOT
from worthit import cli, gating, schemas
from worthit import plan as P
from worthit.config import load
from worthit.experiments.kv.tables import KV_CACHE
from worthit.experiments.quantize import manifest_status as quantize_status
from worthit.plan import predictions, shapes, study

MODELS = ROOT / "tests" / "fixtures" / "models"
QWEN7B = MODELS / "qwen2.5-7b-instruct" / "config.json"
QWEN7B_AWQ = MODELS / "qwen2.5-7b-instruct-awq" / "config.json"
QWEN05B = MODELS / "qwen2.5-0.5b-instruct" / "config.json"
H200_RESULTS = ROOT / "examples" / "h200" / "results"
SEED_STUDY = ROOT / "config" / "studies" / "qwen2.5-7b-rtx3090.yaml"
SEED_CONFIGS = {"qwen2.5-7b": str(QWEN7B), "qwen2.5-7b-awq": str(QWEN7B_AWQ), "qwen2.5-0.5b": str(QWEN05B)}

# The seed study's published figures (tests/fixtures/study-rtx3090.yaml): the measurements the plan must predict.
STUDY_BLOCKS = {"bf16": 5306, "awq_int4": 15839}
STUDY_CRITICAL_CONCURRENCY_BF16 = 88
STUDY_TPOT_MS_C1 = {"bf16": 19.7, "awq_int4": 6.84}
BLOCK = 16

# SmolLM2-135M-Instruct's published config.json (the embedded model), shape fields.
SMOLLM2 = {
    "hidden_size": 576,
    "intermediate_size": 1536,
    "num_attention_heads": 9,
    "num_hidden_layers": 30,
    "num_key_value_heads": 3,
    "vocab_size": 49152,
    "max_position_embeddings": 8192,
    "tie_word_embeddings": True,
    "torch_dtype": "bfloat16",
    "model_type": "llama",
    "bos_token_id": 1,
    "eos_token_id": 2,
}

RTX3090 = P.Hardware.named("NVIDIA GeForce RTX 3090")
H200 = P.Hardware.named("NVIDIA H200")


def qwen(path: Path = QWEN7B) -> P.ModelShape:
    return P.ModelShape.from_file(path)


def subject(args: dict | None = None, shape: P.ModelShape | None = None, **kw: object) -> P.Subject:
    return P.Subject("v", dict(args or {}), shape if shape is not None else qwen(), **kw)  # type: ignore[arg-type]


def rules(s: P.Subject, hw: P.Hardware) -> dict[str, P.PrerequisiteCheck]:
    return {c.rule: c for c in P.check(s, hw)}


def seed_plan(hw: P.Hardware = RTX3090, calibration: P.PlanCalibration | None = None) -> dict[str, dict]:
    cfg = load(SEED_STUDY)
    plan = P.make_plan(cfg, hw, ROOT / "no-such-dir", given=SEED_CONFIGS, calibration=calibration, hub=False)
    return {r["variant"]: r for r in plan.rows}


def h200_plan(calibration: P.PlanCalibration | None = None) -> dict[str, dict]:
    cfg = load(ROOT / "examples" / "h200" / "config.yaml")
    given = {"qwen7b-random": str(QWEN7B), "smollm2-135m": _smollm2_dir()}
    plan = P.make_plan(cfg, H200, ROOT / "no-such-dir", given=given, calibration=calibration, hub=False)
    return {r["variant"]: r for r in plan.rows}


def _smollm2_dir() -> str:
    import tempfile

    d = Path(tempfile.mkdtemp()) / "smollm2"
    d.mkdir()
    (d / "config.json").write_text(json.dumps(SMOLLM2))
    return str(d)


def measured(results: Path, variant: str) -> dict:
    res = schemas.read(results / f"variant~{variant}" / "kv.parquet", KV_CACHE)
    return res.to_pandas().iloc[0].to_dict()


# ------------------------------------------------------------------------------------------ model shapes
def test_qwen7b_kv_bytes_per_token_is_layers_x_kv_heads_x_head_dim_x_2_x_2_bytes():
    m = qwen()
    assert (m.layers, m.kv_heads, m.head_dim) == (28, 4, 128)
    assert P.kv_bytes_per_token(m, {}) == 28 * 4 * 128 * 2 * 2 == 57344
    assert P.kv_bytes_per_token(m, {"kv-cache-dtype": "fp8"}) == 57344 // 2


def test_int8_per_token_head_kv_counts_a_float32_scale_per_token_and_kv_head():
    # vLLM's page size for int8_per_token_head: int8 elements plus 4 bytes of scale per head, for K and V
    m = qwen()
    assert P.kv_bytes_per_token(m, {"kv-cache-dtype": "int8_per_token_head"}) == 2 * 28 * 4 * (128 + 4) == 29568


def test_bf16_weight_bytes_from_shapes_match_the_7b_checkpoint_served_on_the_h200():
    files = measured(H200_RESULTS, "bf16")["weight_bytes"]  # the safetensors files of the served 7B
    assert qwen().weight_bytes(2) == pytest.approx(files, rel=1e-4)


def test_awq_int4_weights_are_a_third_of_bf16_packed_plus_scales_and_zero_points():
    bf16, awq = qwen().weight_bytes(2), qwen(QWEN7B_AWQ).weight_bytes(2)
    q = qwen(QWEN7B_AWQ).quant
    assert q == P.Quant("awq", 4, 128, zero_point=True)
    linear = qwen().params - qwen().embedding_params - (2 * 28 + 1) * 3584
    assert awq == int(linear / 2 + linear / 128 * 2.5 + (qwen().params - linear) * 2)
    assert 0.3 < awq / bf16 < 0.4


def test_a_config_without_attention_shapes_is_a_clear_error(tmp_path):
    (tmp_path / "config.json").write_text(json.dumps({"model_type": "vision"}))
    with pytest.raises(P.PlanError, match="config.json: not a decoder config"):
        P.ModelShape.from_file(tmp_path)


# ------------------------------------------------------------------------------------------ prerequisites
def test_fp8_kv_is_not_applicable_on_sm86_with_the_gate_s_reason_and_runs_on_sm89():
    c = rules(subject({"kv-cache-dtype": "fp8"}), RTX3090)["fp8_kv_cache"]
    assert c.status == P.NOT_MET
    assert c.reason == gating.kv_cache_dtype_gate("fp8", [gating.Gpu("0", "NVIDIA GeForce RTX 3090", "8.6")])
    assert rules(subject({"kv-cache-dtype": "fp8"}), P.Hardware.named("L4"))["fp8_kv_cache"].status == P.MET
    assert rules(subject({"kv-cache-dtype": "fp8"}), P.Hardware.host_cpu(True))["fp8_kv_cache"].status == P.MET
    assert "fp8_kv_cache" not in rules(subject({}), RTX3090)


def test_marlin_needs_sm80_and_awq_kernels_sm75():
    awq = qwen(QWEN7B_AWQ)
    t4, v100 = P.Hardware.named("Tesla T4"), P.Hardware.named("Tesla V100-SXM2-32GB")
    assert rules(subject({"quantization": "awq_marlin"}, awq), RTX3090)["marlin_kernels"].status == P.MET
    bad = rules(subject({"quantization": "awq_marlin"}, awq), t4)["marlin_kernels"]
    assert bad.status == P.NOT_MET and "needs compute capability >= 8.0" in bad.detail
    assert rules(subject({}, awq), t4)["marlin_kernels"].status == P.MET  # falls back to AWQ GEMM
    assert rules(subject({}, awq), v100)["marlin_kernels"].status == P.NOT_MET
    assert "marlin_kernels" not in rules(subject({}), RTX3090)


def test_parallelism_needs_as_many_gpus_as_it_spans_and_claims_them():
    tp2 = {"tensor-parallel-size": 2}
    two = P.Hardware.named("H200", 2)
    assert rules(subject(tp2), H200)["gpu_count"].status == P.NOT_MET
    assert rules(subject(tp2, gpus_claimed=2), two)["gpu_count"].status == P.MET
    claim = rules(subject(tp2, gpus_claimed=1), two)["gpu_count"]
    assert claim.status == P.NOT_MET and "set 'gpus: 2'" in claim.detail
    dp = rules(subject({"tensor-parallel-size": 2, "data-parallel-size": 2}), P.Hardware.named("H200", 3))
    assert dp["gpu_count"].status == P.NOT_MET


def test_tensor_parallel_size_must_divide_the_heads():
    assert (
        rules(subject({"tensor-parallel-size": 4}), P.Hardware.named("H200", 4))["parallel_divisibility"].status
        == P.MET
    )
    bad = rules(subject({"tensor-parallel-size": 8}), P.Hardware.named("H200", 8))["parallel_divisibility"]
    assert bad.status == P.NOT_MET and "28 attention heads" in bad.detail
    assert "parallel_divisibility" not in rules(subject({}), H200)


def test_kv_heads_fewer_than_gpus_are_replicated_not_refused():
    m = P.ModelShape.from_config({**json.loads(QWEN7B.read_text()), "num_attention_heads": 32, "hidden_size": 4096})
    c = rules(subject({"tensor-parallel-size": 8}, m), P.Hardware.named("H200", 8))["parallel_divisibility"]
    assert c.status == P.MET and "replicated x2" in c.detail


def test_quant_group_size_must_divide_every_in_feature_of_a_gpu_shard():
    awq = qwen(QWEN7B_AWQ)
    assert rules(subject({}, awq), RTX3090)["quant_group_size"].status == P.MET
    tp8 = rules(subject({"tensor-parallel-size": 8}, awq), P.Hardware.named("H200", 8))["quant_group_size"]
    assert tp8.status == P.NOT_MET and "down_proj 2368" in tp8.detail  # 18944 / 8 is no multiple of 128
    smol = P.ModelShape.from_config(SMOLLM2)
    g128 = P.Subject("v", {}, smol, planned_quant=P.Quant("compressed-tensors", 4, 128))
    assert rules(g128, RTX3090)["quant_group_size"].status == P.NOT_MET  # 576 % 128
    g64 = P.Subject("v", {}, smol, planned_quant=P.Quant("compressed-tensors", 4, 64))
    assert rules(g64, RTX3090)["quant_group_size"].status == P.MET


def _draft(method: str = "draft_model", **extra: object) -> dict:
    return {"speculative-config": {"method": method, "model": "Qwen/Qwen2.5-0.5B-Instruct", **extra}}


def test_a_draft_of_the_same_family_padded_to_another_vocab_size_shares_the_tokenizer():
    s = subject(_draft(), draft=qwen(QWEN05B))
    c = rules(s, RTX3090)["draft_tokenizer"]
    assert c.status == P.MET and "151936 vs 152064" in c.detail


def test_a_draft_of_another_family_is_not_applicable():
    s = subject(_draft(), draft=P.ModelShape.from_config(SMOLLM2))
    assert rules(s, RTX3090)["draft_tokenizer"].status == P.NOT_MET
    s.args = _draft(use_heterogeneous_vocab=True)
    assert rules(s, RTX3090)["draft_tokenizer"].status == P.MET


def test_tokenizer_files_decide_when_both_are_there(tmp_path):
    a, b = tmp_path / "a", tmp_path / "b"
    for d, vocab in ((a, {"x": 0, "y": 1}), (b, {"x": 0, "z": 1})):
        d.mkdir()
        (d / "tokenizer.json").write_text(json.dumps({"model": {"vocab": vocab}, "added_tokens": []}))
    s = subject(_draft(), draft=qwen(QWEN05B), tokenizer=a, draft_tokenizer=b)
    assert rules(s, RTX3090)["draft_tokenizer"].status == P.NOT_MET
    s.draft_tokenizer = a
    assert rules(s, RTX3090)["draft_tokenizer"].status == P.MET


def test_a_draft_whose_config_is_unknown_is_unknown_and_ngram_needs_no_draft():
    assert rules(subject(_draft()), RTX3090)["draft_tokenizer"].status == P.UNKNOWN
    ngram = {"speculative-config": {"method": "ngram", "num_speculative_tokens": 4}}
    assert "draft_tokenizer" not in rules(subject(ngram), RTX3090)


def test_weights_and_one_max_model_len_sequence_must_fit_in_the_memory_share():
    t4 = P.Hardware.named("Tesla T4")
    c = rules(subject({"max-model-len": 32768}), t4)["memory_fit"]
    assert c.status == P.NOT_MET and "14.18 GiB" in c.detail
    assert rules(subject({"max-model-len": 4096}), RTX3090)["memory_fit"].status == P.MET
    tight = rules(subject({"max-model-len": 32768, "gpu-memory-utilization": 0.72}), RTX3090)["memory_fit"]
    assert tight.status == P.MET and "tight" in tight.detail
    assert "memory_fit" not in rules(subject({}), P.Hardware.host_cpu())


def test_the_supervisor_gate_refuses_with_the_plan_s_first_unmet_rule():
    devices = [gating.Gpu(str(i), "NVIDIA H200", "9.0") for i in range(8)]
    reason = gating.not_applicable({"tensor-parallel-size": 8}, devices, QWEN7B_AWQ.parent)
    assert reason == "not applicable: tensor-parallel-size 8 does not divide 28 attention heads"
    assert gating.not_applicable({"tensor-parallel-size": 4}, devices[:4], QWEN7B_AWQ.parent) is None
    assert gating.not_applicable({"tensor-parallel-size": 2}, devices[:1]) is not None  # without a model dir too
    assert gating.not_applicable({}, [], QWEN7B.parent) is None  # a CPU server


# ------------------------------------------------------------------------------------------ predictions
def test_seed_study_kv_blocks_for_bf16_and_awq_within_10_percent():
    rows = seed_plan()
    for variant, blocks in STUDY_BLOCKS.items():
        assert rows[variant]["num_blocks"] == pytest.approx(blocks, rel=0.10), variant
        assert rows[variant]["kv_bytes_per_token"] == 57344


def test_seed_study_critical_concurrency_within_10_percent():
    bf16 = seed_plan()["bf16"]
    # at the config's 512 + 256 tokens, against the study's own blocks at that length
    assert bf16["critical_concurrency"] == pytest.approx(STUDY_BLOCKS["bf16"] * BLOCK / 768, rel=0.10)
    # the study's ~88 is its KV tokens over ~965 tokens per request; at that length:
    tokens = STUDY_BLOCKS["bf16"] * BLOCK / STUDY_CRITICAL_CONCURRENCY_BF16
    assert bf16["kv_tokens"] / tokens == pytest.approx(STUDY_CRITICAL_CONCURRENCY_BF16, rel=0.10)


def test_seed_study_fp8_kv_is_not_applicable_on_the_3090():
    fp8 = seed_plan()["fp8_kv"]
    assert fp8["status"] == "not_applicable" and fp8["failed_rule"] == "fp8_kv_cache"
    assert "sm_86" in fp8["reason"]
    assert seed_plan()["int8_kv"]["status"] == "ok"


def test_seed_study_tpot_floor_bounds_the_measured_tpot_from_below():
    rows = seed_plan()
    for variant, tpot in STUDY_TPOT_MS_C1.items():
        assert rows[variant]["tpot_floor_ms_c1"] < tpot, variant
        assert rows[variant]["tpot_floor_ms_c1"] / tpot > 0.6, variant  # decode is bandwidth-bound: close to it


def test_tpot_rises_with_concurrency_and_turns_compute_bound_at_the_knee():
    bf16 = seed_plan()["bf16"]
    floors = bf16["tpot_floor_ms"]
    assert bf16["levels"] == [1, 2, 4, 8, 16, 32, 64]
    assert all(a < b for a, b in zip(floors, floors[1:], strict=False))
    assert bf16["bound"] == "compute" and bf16["knee_concurrency"] == bf16["compute_knee_concurrency"]
    assert bf16["knee_concurrency"] < bf16["critical_concurrency"]


def test_awq_reads_fewer_bytes_per_step_so_its_floor_and_knee_are_lower():
    rows = seed_plan()
    assert rows["awq_int4"]["tpot_floor_ms_c1"] < rows["bf16"]["tpot_floor_ms_c1"] / 2
    assert rows["awq_int4"]["knee_concurrency"] < rows["bf16"]["knee_concurrency"]


def test_wall_time_counts_the_server_start_and_every_level_and_grows_with_repeats():
    rows = seed_plan()
    assert rows["bf16"]["est_wall_s"] > P.SERVER_START_S
    cfg = load(SEED_STUDY)
    cfg["loadtest"]["repeats"] += 2
    again = {r["variant"]: r for r in P.make_plan(cfg, RTX3090, ROOT / "x", given=SEED_CONFIGS, hub=False).rows}
    assert again["bf16"]["est_wall_s"] > rows["bf16"]["est_wall_s"]


def test_h200_kv_prediction_within_2_percent_of_the_committed_run():
    rows = h200_plan()
    for variant in ("bf16", "no_prefix_cache"):
        assert rows[variant]["num_blocks"] == pytest.approx(measured(H200_RESULTS, variant)["num_blocks"], rel=0.02)
    assert rows["fp8_kv"]["status"] == "ok"  # sm_90
    assert rows["fp8_kv"]["num_blocks"] == pytest.approx(2 * rows["bf16"]["num_blocks"], rel=0.001)


def test_cpu_kv_pool_from_kv_cache_memory_bytes_is_exact():
    kv = schemas.read(ROOT / "tests/fixtures/embedded-default/variant~baseline/kv.parquet", KV_CACHE)
    row, args = kv.to_pandas().iloc[0].to_dict(), kv.metadata["engine_args"]
    s = P.Subject("baseline", args, P.ModelShape.from_config(SMOLLM2))
    pred = P.predict(s, P.Hardware.host_cpu(), P.WorkloadShape(128, 32, (1,)))
    assert (pred["num_blocks"], pred["block_size_tokens"]) == (row["num_blocks"], row["block_size_tokens"])
    assert pred["kv_bytes_per_token"] == row["kv_bytes_per_token"]
    assert "tpot_floor_ms_c1" not in pred
    assert "no bandwidth figure" in "; ".join(pred["notes"])


def test_unknown_shapes_predict_nothing_and_say_so():
    pred = P.predict(P.Subject("v", {}), RTX3090, P.WorkloadShape(512, 256, (1,)))
    assert set(pred) == {"notes"} and "--model-config" in pred["notes"][0]


# ------------------------------------------------------------------------------------------ calibration, compare
def test_calibration_from_the_h200_run_reproduces_its_blocks_and_bandwidth_fraction():
    cal = P.calibrate(H200_RESULTS)
    assert cal.gpu == "NVIDIA H200"
    assert 0.5 < cal.bandwidth_fraction < 0.8  # MBU at concurrency 1 (README: 69%)
    assert 0 < cal.overhead_gib < 3
    rows = h200_plan(cal)
    assert rows["bf16"]["num_blocks"] == pytest.approx(measured(H200_RESULTS, "bf16")["num_blocks"], rel=0.005)
    assert rows["bf16"]["bandwidth_source"].startswith("calibration: ")


def test_calibration_of_a_folder_without_results_is_a_clear_error(tmp_path):
    with pytest.raises(P.PlanError, match="no measured KV capacity"):
        P.calibrate(tmp_path)
    with pytest.raises(P.PlanError, match="no such results folder"):
        P.calibrate(tmp_path / "missing")


def test_plan_vs_measured_on_the_h200_run_flags_what_lies_outside_its_tolerance():
    rows = P.compare(list(h200_plan().values()), H200_RESULTS)
    by = {(r["variant"], r["quantity"]): r for r in rows}
    kv = by[("bf16", "kv_blocks")]
    assert kv["within_tolerance"] and kv["measured"] == measured(H200_RESULTS, "bf16")["num_blocks"]
    tpot = by[("bf16", "tpot_ms_c1")]
    assert tpot["measured"] > tpot["predicted"] * 0.5 and "MBU" in tpot["note"]
    tput = by[("bf16", "output_tok_per_s")]
    assert tput["within_tolerance"] is False and tput["flag"] == "under"  # the roofline ignores scheduling
    assert ("fp8_kv", "tpot_ms_c1") not in by  # its load levels failed: nothing measured to compare
    knee = by[("bf16", "knee_concurrency")]  # tok/s still rose at 64, the highest level: not judged
    assert knee["measured"] is None and knee["within_tolerance"] is None and "beyond the levels" in knee["note"]
    schemas.to_arrow(schemas.PLAN_VS_MEASURED, rows)
    assert "| bf16 | kv_blocks |" in P.comparison_markdown(rows)


# ------------------------------------------------------------------------------------------ hardware, CLI
def test_a_gpu_missing_from_the_table_is_an_error_naming_the_known_ones():
    cfg = load(SEED_STUDY)
    cfg["hardware"] = {"gpu": "Voodoo 5"}
    with pytest.raises(P.PlanError, match="not in worthit's GPU table.*NVIDIA H200"):
        P.hardware_for(cfg)
    cfg["hardware"].update(peak_bandwidth_gb_s=100, memory_gib=8, compute_capability="7.0")
    hw = P.hardware_for(cfg).override(cfg["hardware"])
    assert (hw.bandwidth_gb_s, hw.memory_gib, hw.compute_capability) == (100, 8, (7, 0))


def test_model_config_arguments_need_name_equals_file():
    assert P.parse_model_configs(["a=b/c.json"]) == {"a": "b/c.json"}
    with pytest.raises(P.PlanError, match="NAME=FILE"):
        P.parse_model_configs(["nofile"])


def test_cli_plans_the_seed_study_for_a_gpu_it_does_not_have(tmp_path, capsys):
    out = tmp_path / "plan.parquet"
    configs = [f"--model-config={k}={v}" for k, v in SEED_CONFIGS.items()]
    rc = cli.main(
        ["plan", "--configfile", str(SEED_STUDY), "--gpu", "RTX 3090", *configs, "--no-hub", "--out", str(out)]
    )
    assert rc == 0
    res = schemas.read(out, schemas.PLAN)
    rows = {r["variant"]: r for r in res.table.to_pylist()}
    assert rows["fp8_kv"]["status"] == "not_applicable"
    assert {c["rule"] for c in rows["awq_int4"]["checks"]} >= {"marlin_kernels", "quant_group_size", "memory_fit"}
    assert res.metadata["hardware"]["name"] == "NVIDIA GeForce RTX 3090"
    assert "not applicable" in capsys.readouterr().out
    assert out.with_suffix(".md").read_text().startswith("# Plan: qwen2.5-7b-rtx3090")


def test_cli_unknown_gpu_exits_2_with_the_reason(capsys):
    assert cli.main(["plan", "--configfile", str(SEED_STUDY), "--gpu", "Voodoo 5", "--no-hub"]) == 2
    assert "not in worthit's GPU table" in capsys.readouterr().err


def test_cli_refuses_a_model_config_for_no_model_of_the_study_and_zero_gpus(tmp_path, capsys):
    name, path = next(iter(SEED_CONFIGS.items()))
    args = ["plan", "--configfile", str(SEED_STUDY), "--gpu", "RTX 3090", "--no-hub", "--out", str(tmp_path / "p")]
    assert cli.main([*args, f"--model-config={name}x={path}"]) == 2  # a typo in the name: not used silently
    err = capsys.readouterr().err
    assert f"for '{name}x': not a model of the study" in err and name in err.split("models: ")[1]
    assert cli.main([*args, "--gpus", "0"]) == 2 and "--gpus 0" in capsys.readouterr().err
    assert not (tmp_path / "p").exists()


# ------------------------------------------------------------------------------------------ where shapes come from
def test_an_hf_model_is_planned_from_the_hub_s_config_json_alone(tmp_path):
    import os
    import subprocess
    import sys

    import yaml

    from tests.hubserver import FakeHubRepo, serve_repo

    folder = tmp_path / "repo"
    folder.mkdir()
    (folder / "config.json").write_bytes(QWEN7B.read_bytes())
    (folder / "model.safetensors").write_bytes(b"\0" * 4096)  # weights the plan must not download
    cfg = {
        "study": "hub",
        "models": {"q": {"source": "hf:Qwen/Qwen2.5-7B-Instruct"}},
        "variants": {"v": {"model": "q"}},
    }
    (tmp_path / "study.yaml").write_text(yaml.safe_dump(cfg))
    with serve_repo(FakeHubRepo.from_folder("Qwen/Qwen2.5-7B-Instruct", folder)) as hub:
        env = {k: v for k, v in os.environ.items() if not k.startswith(("HF_", "HUGGINGFACE_"))}
        env |= {"HF_ENDPOINT": hub.url, "HF_HOME": str(tmp_path / "hf"), "NO_PROXY": "127.0.0.1,localhost"}
        out = tmp_path / "plan.parquet"
        cmd = [sys.executable, "-m", "worthit.cli", "plan", "--configfile", str(tmp_path / "study.yaml")]
        proc = subprocess.run(
            [*cmd, "--gpu", "H200", "--out", str(out)],
            env=env,
            cwd=tmp_path,
            capture_output=True,
            text=True,
            timeout=120,
        )
        assert proc.returncode == 0, proc.stderr[-3000:]
        fetched = {p.rsplit("/", 1)[-1] for m, p, s in hub.requests if m == "GET" and "/resolve/" in p}
    row = schemas.read(out, schemas.PLAN).table.to_pylist()[0]
    assert row["model_config"] == "hub: Qwen/Qwen2.5-7B-Instruct config.json"
    assert row["kv_bytes_per_token"] == 57344 and row["weight_source"] == "shapes (bfloat16)"
    assert fetched == {"config.json"}


def test_variants_unplanned_before_the_fetch_are_planned_from_the_manifest_afterwards(tmp_path):
    cfg = load(SEED_STUDY)
    before = P.make_plan(cfg, RTX3090, tmp_path, hub=False)
    assert all(r.get("kv_bytes_per_token") is None for r in before.rows if r["model"] == "qwen2.5-7b")
    model = tmp_path / "weights" / "qwen2.5-7b"
    model.mkdir(parents=True)
    (model / "config.json").write_bytes(QWEN7B.read_bytes())
    manifest = tmp_path / "resources" / "models" / "qwen2.5-7b" / "manifest.json"
    manifest.parent.mkdir(parents=True)
    manifest.write_text(json.dumps({"model_dir": str(model)}))
    rows = {r["variant"]: r for r in P.fill_in(before.rows, before.metadata, cfg, tmp_path)}
    assert (
        rows["bf16"]["kv_bytes_per_token"] == 57344 and "planned after the model was fetched" in rows["bf16"]["notes"]
    )
    assert rows["bf16"]["gpu"] == "NVIDIA GeForce RTX 3090"
    assert rows["awq_int4"].get("kv_bytes_per_token") is None  # its model is still unknown


def test_checkpoint_weights_count_the_tensors_vllm_loads_at_the_served_dtype(tmp_path):
    import numpy as np
    from safetensors.numpy import save_file

    (tmp_path / "config.json").write_text(json.dumps({**json.loads(QWEN7B.read_text()), "torch_dtype": "float32"}))
    save_file({"model.embed_tokens.weight": np.zeros((100, 10), np.float32)}, str(tmp_path / "model.safetensors"))
    (tmp_path / "pytorch_model.bin").write_bytes(b"\0" * 4000)  # the same weights again: not loaded
    s = P.serving_subject({"dtype": "bfloat16"}, tmp_path)
    assert s.weights() == (2000, "checkpoint tensors at bfloat16")
    s.args = {"dtype": "float32"}
    assert s.weights() == (4000, "checkpoint tensors at float32")
    # the kv stage's weight_bytes is the same function: the plan's prediction and the measurement agree
    assert P.served_weight_bytes(tmp_path, "bfloat16") == 2000
    # a PyTorch checkpoint has no header to read: its files' bytes, rescaled from the config's dtype
    (tmp_path / "model.safetensors").unlink()
    assert P.serving_subject({"dtype": "bfloat16"}, tmp_path).weights() == (2000, "checkpoint tensors at bfloat16")
    assert P.served_weight_bytes(tmp_path, None) == 4000  # no served dtype: the files as they are


def test_the_time_estimate_counts_workload_levels_and_sweet_spot_probes_beyond_the_grid() -> None:
    cfg = load(ROOT / "config" / "config.yaml")  # chat at concurrency 4 on both variants; baseline's sweet spot
    lt, ss = cfg["loadtest"], cfg["sweet_spot"]
    runs = int(lt["repeats"])
    base = P.workload(cfg, cfg["variants"]["baseline"]["experiments"], "baseline")
    off = P.workload(cfg, cfg["variants"]["no_prefix_cache"]["experiments"], "no_prefix_cache")
    chat = (4, max(lt["num_requests"]["min"], 4 * lt["num_requests"]["per_concurrency"]) + lt["warmup_requests"], runs)
    assert chat in base.extra and chat in off.extra  # the cache-off variant runs no grid, only the chat level
    probes = [e for e in base.extra if e[2] == 1 and e != chat]
    assert len(probes) == ss["max_probes"] and not [e for e in off.extra if e != chat]
    roof = P.Roofline(weight_bytes=1e9, kv_bytes_per_seq=1e6, bandwidth_b_s=1e11, flops_per_seq=1e9, flops_s=1e13)
    bare = replace(base, extra=())
    per_level = [predictions._wall_s(roof, replace(base, extra=(e,)), 1.0, 0.0) for e in base.extra]
    # each level beyond the grid adds its own time, and the estimate is their sum over the grid's
    grid = predictions._wall_s(roof, bare, 1.0, 0.0)
    assert predictions._wall_s(roof, base, 1.0, 0.0) == pytest.approx(grid + sum(t - grid for t in per_level))
    assert all(t > grid for t in per_level)


def test_a_checkpoint_of_kv_cache_scales_only_plans_with_unquantised_weights() -> None:
    # the plan before it is made (scheme NONE) and the checkpoint's own quantization_config after
    assert study._planned_quant({"quantize": {"base": "smol", "scheme": "NONE", "kv_cache": "fp8"}}) is None
    kv_only = {
        "quant_method": "compressed-tensors",
        "config_groups": {"group_0": {"targets": ["Linear"], "weights": None}},
        "kv_cache_scheme": {"num_bits": 8, "type": "float", "strategy": "tensor"},
    }
    assert shapes._quant(kv_only) is None
    with_weights = {**kv_only, "config_groups": {"group_0": {"weights": {"num_bits": 4, "group_size": 128}}}}
    assert shapes._quant(with_weights) == P.Quant("compressed-tensors", 4, 128, zero_point=False)


def test_fp8_kv_on_a_cpu_without_avx512_or_amx_is_not_applicable_with_vllms_reason():
    c = rules(subject({"kv-cache-dtype": "fp8"}), P.Hardware.host_cpu(False))["fp8_kv_cache"]
    assert c.status == P.NOT_MET and "neither AVX-512 nor AMX" in c.reason and "requires x86" in c.reason
    unknown = rules(subject({"kv-cache-dtype": "fp8"}), P.Hardware("CPU", 0, cpu=True))["fp8_kv_cache"]
    assert unknown.status == P.UNKNOWN  # flags unread: never refused
    assert "fp8_kv_cache" not in rules(subject({}), P.Hardware.host_cpu(False))


def test_the_cpu_flags_that_allow_an_fp8_kv_cache():
    avx2 = "processor\t: 0\nflags\t\t: fpu sse2 avx avx2 fma\n"
    assert P.host_cpu_has_avx512_or_amx(avx2, "x86_64") is False
    assert P.host_cpu_has_avx512_or_amx(avx2.replace("avx2", "avx2 avx512f avx512bw"), "x86_64") is True
    assert P.host_cpu_has_avx512_or_amx(avx2.replace("avx2", "avx2 amx_tile"), "x86_64") is True
    assert P.host_cpu_has_avx512_or_amx("Features\t: fp asimd\n", "aarch64") is False  # not x86
    assert P.host_cpu_has_avx512_or_amx("processor\t: 0\n", "x86_64") is None  # no flags line


def test_int4_weights_on_a_cpu_without_avx512_are_not_applicable_with_vllms_reason():
    awq = qwen(QWEN7B_AWQ)
    c = rules(subject({}, awq), P.Hardware.host_cpu(False))["cpu_int4_kernels"]
    assert c.status == P.NOT_MET and "no AVX-512" in c.reason and "cpu_gemm_wna16" in c.reason
    assert P.first_unmet(P.check(subject({}, awq), P.Hardware.host_cpu(False))) == c
    assert rules(subject({}, awq), P.Hardware.host_cpu(True))["cpu_int4_kernels"].status == P.MET
    assert rules(subject({}, awq), P.Hardware("CPU", 0, cpu=True))["cpu_int4_kernels"].status == P.UNKNOWN
    # a quantise stage's model, planned before it exists, is judged by its recipe's bits
    planned = subject({}, qwen(), planned_quant=P.Quant("compressed-tensors", 4, 32))
    assert rules(planned, P.Hardware.host_cpu(False))["cpu_int4_kernels"].status == P.NOT_MET
    assert "cpu_int4_kernels" not in rules(subject({}, qwen()), P.Hardware.host_cpu(False))  # bf16 weights
    assert "cpu_int4_kernels" not in rules(subject({}, awq), RTX3090)  # a GPU: the Marlin rule judges
    eight_bit = subject({}, qwen(), planned_quant=P.Quant("compressed-tensors", 8, None))
    assert "cpu_int4_kernels" not in rules(eight_bit, P.Hardware.host_cpu(False))


def cpu_study(extra_models: dict | None = None, **extra_variants: dict) -> dict:
    """A CPU study before anything is fetched: a base model (shapes unknown), its AWQ int4 quantisation,
    the baseline, an FP8 KV variant and the int4 variant (with any ``extra_models`` and ``extra_variants``)."""
    from worthit.config import validate

    return validate(
        {
            "study": "cpu",
            "models": {
                "smol": {"source": "hf:org/smol"},
                "smol-awq": {"quantize": {"base": "smol", "method": "awq", "scheme": "W4A16_ASYM", "group_size": 64}},
                **(extra_models or {}),
            },
            "variants": {
                "baseline": {"model": "smol"},
                "fp8_kv": {"model": "smol", "engine_args": {"kv-cache-dtype": "fp8"}},
                "awq_int4": {"model": "smol-awq"},
                **extra_variants,
            },
        }
    )


def test_a_quantisation_only_variants_the_plan_refuses_would_serve_is_not_made(tmp_path: Path) -> None:
    cfg = cpu_study()
    avx2 = P.refused_before_serving(cfg, P.Hardware.host_cpu(False), "0.32.0+cpu", tmp_path)
    assert set(avx2.variants) == {"fp8_kv", "awq_int4"} and set(avx2.models) == {"smol-awq"}
    # the int4 variant's row: the plan's reason, the hardware that would serve it, and that nothing was made
    why = avx2.reason(cfg, "awq_int4")
    assert why is not None and why.startswith("not applicable: this CPU has no AVX-512")
    assert "x86 CPU with AVX-512 or a CUDA GPU" in why and "model 'smol-awq' was not quantised" in why
    assert avx2.reason(cfg, "fp8_kv") == avx2.variants["fp8_kv"] and "compute capability 8.9" in avx2.variants["fp8_kv"]
    assert avx2.reason(cfg, "baseline") is None
    # its stand-in manifest: what the serve stage refuses and the report reads, the recipe it would have made
    m = avx2.manifest(cfg, "smol-awq")
    assert quantize_status(m) == ("not_applicable", avx2.models["smol-awq"])
    assert m["source"] == "quantize:smol:awq:W4A16_ASYM" and m["model_dir"] == "resources/models/smol-awq/model"
    # a CPU with AVX-512 serves both; a GPU plan, or a CPU plan beside a GPU build of vLLM (a cluster's
    # login node), rules nothing out before serving: the supervisor's gate judges the devices each server gets
    assert P.refused_before_serving(cfg, P.Hardware.host_cpu(True), "0.32.0+cpu", tmp_path) == P.RuledOut()
    assert P.refused_before_serving(cfg, P.Hardware.host_cpu(False), "0.32.0", tmp_path) == P.RuledOut()
    assert P.refused_before_serving(cfg, RTX3090, "0.32.0", tmp_path) == P.RuledOut()
    # unknown CPU flags never refuse
    assert P.refused_before_serving(cfg, P.Hardware("CPU", 0, cpu=True), "0.32.0+cpu", tmp_path) == P.RuledOut()


def test_a_quantisation_another_variant_serves_or_drafts_with_is_made() -> None:
    w8 = cpu_study(
        {"smol-w8": {"quantize": {"base": "smol", "scheme": "W8A8", "group_size": None}}},
        w8={"model": "smol-w8"},
        awq_too={"model": "smol-awq"},
    )
    refused = P.refused_before_serving(w8, P.Hardware.host_cpu(False), "0.32.0+cpu")
    assert "w8" not in refused.variants and "smol-w8" not in refused.models  # 8-bit weights: no int4 kernel needed
    assert set(refused.models) == {"smol-awq"}  # both of its variants are refused
    spec = {"method": "draft_model", "model": "resources/models/smol-awq/model", "num_speculative_tokens": 2}
    drafted = cpu_study(spec_awq={"model": "smol", "engine_args": {"speculative-config": spec}})
    kept = P.refused_before_serving(drafted, P.Hardware.host_cpu(False), "0.32.0+cpu")
    assert "awq_int4" in kept.variants and "spec_awq" not in kept.variants and kept.models == {}


def test_the_plan_judges_a_quantisation_by_its_recipe_before_any_shape_is_known(tmp_path: Path) -> None:
    rows = {r["variant"]: r for r in P.make_plan(cpu_study(), P.Hardware.host_cpu(False), tmp_path, hub=False).rows}
    assert rows["awq_int4"]["status"] == "not_applicable" and rows["awq_int4"]["failed_rule"] == "cpu_int4_kernels"
    assert rows["baseline"]["status"] == "ok" and rows["awq_int4"]["model_config"] == "unknown"


def test_the_study_config_can_say_what_its_cpu_has() -> None:
    assert P.Hardware.host_cpu(True).override({"cpu_avx512_or_amx": False}).cpu_avx512_or_amx is False
    assert P.Hardware.host_cpu(False).override({"cpu_avx512_or_amx": True}).cpu_avx512_or_amx is True
    assert P.Hardware.host_cpu(False).override({"cpu_avx512_or_amx": None}).cpu_avx512_or_amx is False
    assert RTX3090.override({"cpu_avx512_or_amx": False}).cpu_avx512_or_amx is None  # a GPU: not its CPU's flags

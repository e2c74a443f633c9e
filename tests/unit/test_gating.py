"""Hardware gating: fp8 KV cache needs compute capability >= 8.9 on CUDA; CPUs are not gated."""

from __future__ import annotations

from worthit.gating import Gpu, kv_cache_dtype_gate, not_applicable, parse_nvidia_smi

RTX3090 = Gpu("0", "NVIDIA GeForce RTX 3090", "8.6")
L4 = Gpu("0", "NVIDIA L4", "8.9")
H200 = Gpu("0", "NVIDIA H200", "9.0")


def test_fp8_kv_is_not_applicable_on_sm86():
    reason = kv_cache_dtype_gate("fp8", [RTX3090])
    assert reason is not None
    assert reason.startswith("not applicable: NVIDIA GeForce RTX 3090 is sm_86")


def test_fp8_kv_runs_on_sm89_and_sm90():
    assert kv_cache_dtype_gate("fp8", [L4]) is None
    assert kv_cache_dtype_gate("fp8_e5m2", [H200]) is None


def test_cpu_is_not_gated():
    assert kv_cache_dtype_gate("fp8", []) is None


def test_other_kv_dtypes_are_not_gated():
    assert kv_cache_dtype_gate("auto", [RTX3090]) is None
    assert kv_cache_dtype_gate(None, [RTX3090]) is None


def test_any_older_device_of_a_multi_gpu_server_gates_it():
    assert kv_cache_dtype_gate("fp8_e4m3", [H200, RTX3090]) is not None


def test_engine_args_are_read_in_either_spelling():
    assert not_applicable({"kv-cache-dtype": "fp8"}, [RTX3090])
    assert not_applicable({"kv_cache_dtype": "fp8"}, [RTX3090])
    assert not_applicable({"dtype": "float16"}, [RTX3090]) is None


def test_nvidia_smi_csv_is_parsed_with_commas_in_names():
    gpus = parse_nvidia_smi("0, NVIDIA H200, 9.0\n1, NVIDIA GeForce RTX 3090, 8.6\n\n")
    assert [g.sm for g in gpus] == ["sm_90", "sm_86"] and gpus[1].name == "NVIDIA GeForce RTX 3090"

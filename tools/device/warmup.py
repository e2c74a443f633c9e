"""A throwaway vLLM engine start on the device machine, before the study's first server.

The first vLLM start on a freshly lent machine paid ~2 minutes that every later start on it did not, whatever
the model and with vLLM's compile cache cold for all of them (examples/h200-qwen/README.md, its sixth session): the
per-machine kernel caches (Triton's, FlashInfer's JIT builds of the sampler) fill then. This engine has the
study model's shape (Qwen2.5-Coder-1.5B-Instruct: the config below) and random weights (``load_format
dummy``: no checkpoint, no tokenizer), the server's batch limits, and its own compile cache (``VLLM_CACHE_ROOT``
set by tools/device/warmup.sh), so it fills the machine's caches while the real checkpoint converts and
leaves the study's compile cache cold. It starts, builds its engine (compile, kernel warm-up, CUDA graphs),
generates a few tokens, and exits, printing how long each part took.
  python3 tools/device/warmup.py MODEL_DIR   # MODEL_DIR: written here (config.json only)
"""

from __future__ import annotations

import json
import sys
import time
from pathlib import Path

QWEN25_CODER_15B = {  # Qwen/Qwen2.5-Coder-1.5B-Instruct's config.json, the fields vLLM reads
    "architectures": ["Qwen2ForCausalLM"],
    "model_type": "qwen2",
    "hidden_size": 1536,
    "intermediate_size": 8960,
    "num_hidden_layers": 28,
    "num_attention_heads": 12,
    "num_key_value_heads": 2,
    "vocab_size": 151936,
    "max_position_embeddings": 32768,
    "rope_theta": 1000000.0,
    "rms_norm_eps": 1e-6,
    "hidden_act": "silu",
    "tie_word_embeddings": True,
    "use_sliding_window": False,
    "sliding_window": 32768,
    "max_window_layers": 28,
    "attention_dropout": 0.0,
    "bos_token_id": 151643,
    "eos_token_id": 151645,
    "torch_dtype": "bfloat16",
}


def main(model_dir: str) -> int:
    t0 = time.time()
    out = Path(model_dir)
    out.mkdir(parents=True, exist_ok=True)
    (out / "config.json").write_text(json.dumps(QWEN25_CODER_15B, indent=1))
    from vllm import LLM, SamplingParams  # the carried vLLM (PYTHONPATH=/tmp/site)

    t_import = time.time()
    llm = LLM(
        model=str(out),
        load_format="dummy",
        skip_tokenizer_init=True,
        dtype="bfloat16",
        max_model_len=8192,
        gpu_memory_utilization=0.90,
        max_num_batched_tokens=8192,  # what `vllm serve` uses on this GPU (the LLM class would take 16,384)
        max_num_seqs=1024,
    )
    t_engine = time.time()
    prompts = [{"prompt_token_ids": list(range(1000, 1512))} for _ in range(4)]
    llm.generate(prompts, SamplingParams(max_tokens=16, ignore_eos=True, detokenize=False))
    t_gen = time.time()
    print(
        f"warm-up: import {t_import - t0:.1f} s, engine {t_engine - t_import:.1f} s, "
        f"first generation {t_gen - t_engine:.1f} s, total {t_gen - t0:.1f} s",
        flush=True,
    )
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1]))

"""Build a model with random weights from an architecture preset, for performance-only studies.

Random weights decode at the speed of real ones (same shapes, same bytes), so TPOT, throughput and KV
capacity are real; accuracy is not (use a real model for that). Built on the GPU when there is one.
The config.json says so (``"worthit_weights": "random"``, worthit.models.RANDOM_WEIGHTS_KEY): the model's
manifest then records ``weights: random`` (so does any model quantised from it), and the report labels it.
usage: python make_model.py OUT_DIR --preset qwen2.5-7b --tokenizer TOKENIZER_DIR
"""

from __future__ import annotations

import argparse
import shutil
import time
from pathlib import Path
from typing import Any

RANDOM_WEIGHTS_KEY = "worthit_weights"  # = worthit.models.RANDOM_WEIGHTS_KEY (this script runs without worthit)

PRESETS: dict[str, dict[str, Any]] = {
    # Qwen/Qwen2.5-7B-Instruct's shapes (7.6 B parameters)
    "qwen2.5-7b": dict(
        hidden_size=3584,
        intermediate_size=18944,
        num_hidden_layers=28,
        num_attention_heads=28,
        num_key_value_heads=4,
        vocab_size=152064,
        max_position_embeddings=32768,
        rope_theta=1e6,
        rms_norm_eps=1e-6,
        tie_word_embeddings=False,
    ),
    # Qwen/Qwen2.5-0.5B-Instruct's shapes (the study's draft model)
    "qwen2.5-0.5b": dict(
        hidden_size=896,
        intermediate_size=4864,
        num_hidden_layers=24,
        num_attention_heads=14,
        num_key_value_heads=2,
        vocab_size=151936,
        max_position_embeddings=32768,
        rope_theta=1e6,
        rms_norm_eps=1e-6,
        tie_word_embeddings=True,
    ),
    # a few million parameters, for tests on CPU; the vocabulary is the tokenizer's
    "tiny": dict(
        hidden_size=64,
        intermediate_size=128,
        num_hidden_layers=2,
        num_attention_heads=4,
        num_key_value_heads=2,
        vocab_size=None,
        max_position_embeddings=2048,
        rope_theta=1e4,
        rms_norm_eps=1e-6,
        tie_word_embeddings=True,
    ),
}


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__)
    p.add_argument("out", type=Path)
    p.add_argument("--preset", choices=sorted(PRESETS), default="qwen2.5-7b")
    p.add_argument("--tokenizer", type=Path, required=True, help="folder whose tokenizer files are copied")
    ns = p.parse_args()
    import torch
    from transformers import AutoTokenizer, Qwen2Config, Qwen2ForCausalLM

    t = time.time()
    tok = AutoTokenizer.from_pretrained(str(ns.tokenizer))
    shapes = dict(PRESETS[ns.preset])
    shapes["vocab_size"] = shapes["vocab_size"] or len(tok)
    cfg = Qwen2Config(
        **shapes,
        bos_token_id=tok.bos_token_id,
        eos_token_id=tok.eos_token_id,
        torch_dtype="bfloat16",
        **{RANDOM_WEIGHTS_KEY: "random"},
    )
    torch.set_default_dtype(torch.bfloat16)
    with torch.device("cuda" if torch.cuda.is_available() else "cpu"):
        model = Qwen2ForCausalLM(cfg)
    model.save_pretrained(str(ns.out), safe_serialization=True)
    tok.save_pretrained(str(ns.out))
    for f in ("generation_config.json",):
        if (ns.tokenizer / f).exists():
            shutil.copy(ns.tokenizer / f, ns.out / f)
    n = sum(p.numel() for p in model.parameters())
    print(f"{ns.preset}: {n / 1e9:.2f} B parameters, random weights, built in {time.time() - t:.0f} s -> {ns.out}")


if __name__ == "__main__":
    main()

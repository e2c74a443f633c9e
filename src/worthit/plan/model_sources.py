"""Where each model's shapes come from: a given config.json, the fetched model's manifest, a ``path:``
source, a local folder or the hub's config.json alone."""

from __future__ import annotations

import json
import os
from collections.abc import Mapping
from pathlib import Path
from typing import Any

from worthit import engine_args as eargs
from worthit.config import ROOT
from worthit.plan.checkpoints import local_model_folder
from worthit.plan.shapes import ModelShape, PlanError


def model_configs(
    cfg: Mapping[str, Any],
    root: Path,
    given: Mapping[str, str] | None = None,
    hub: bool = True,
) -> dict[str, tuple[ModelShape | None, Path | None, Path | None, str]]:
    """Per model of the study (and per draft model named by a speculative-config): its shape, its
    checkpoint folder when the weights are on disk (:func:`~worthit.plan.checkpoints.served_weight_bytes`
    reads them), its folder (for the tokenizer), and where the shape came from.

    Sources, first found wins: ``given`` (``--model-config NAME=FILE``, then ``plan.model_configs``), the
    fetched model's manifest, a ``path:`` source, the hub's config.json alone (``hf:`` sources, when
    ``hub``); a ``quantize:`` model not made yet takes its base model's shapes."""
    given = {**(cfg.get("plan", {}).get("model_configs") or {}), **(given or {})}
    out: dict[str, tuple[ModelShape | None, Path | None, Path | None, str]] = {}
    names = list(cfg["models"])
    drafts = {
        str(sc["model"])
        for v in cfg["variants"].values()
        if (sc := eargs.speculative_config(eargs.merged(cfg["serve"]["engine_args"], v.get("engine_args"))))
        and sc.get("model")
    }
    unknown = sorted(set(given) - set(names) - drafts)
    if unknown:  # a typo would otherwise plan without the config the user meant to give
        raise PlanError(
            f"model config (--model-config or plan.model_configs) for {', '.join(map(repr, unknown))}: not a "
            f"model of the study (models: {', '.join(names)}) nor a draft model a variant's speculative-config "
            f"names ({', '.join(sorted(drafts)) or 'none'})"
        )
    for name in names:
        out[name] = _model_config(name, cfg["models"][name], root, given=given, hub=hub)
    for name in names:  # a quantize: model not on disk yet plans on its base's shapes
        spec = cfg["models"][name]
        if out[name][0] is None and "quantize" in spec and out.get(spec["quantize"]["base"], (None,))[0] is not None:
            base = out[spec["quantize"]["base"]]
            out[name] = (base[0], None, base[2], f"{base[3]} (base of the quantize plan)")
    for ref in sorted(drafts - set(names)):  # a draft named like one of the study's models is that model
        same = [m for m, ms in cfg["models"].items() if _source_ref(ms) == ref and out[m][0] is not None]
        out[ref] = out[same[0]] if same and ref not in given else _model_config(ref, {}, root, given=given, hub=hub)
    return out


def _source_ref(spec: Mapping[str, Any]) -> str | None:
    """ORG/NAME of a hub source, the folder of a path: source."""
    source = str(spec.get("source", ""))
    if source.startswith(("hf:", "modelscope:")):
        return source.split(":", 1)[1].split("@")[0]
    return source[5:] if source.startswith("path:") else None


def _model_config(
    name: str, spec: Mapping[str, Any], root: Path, *, given: Mapping[str, str], hub: bool
) -> tuple[ModelShape | None, Path | None, Path | None, str]:
    source = str(spec.get("source", ""))
    ref = _source_ref(spec)
    for key in (name, ref):
        if key and key in given:
            path = Path(given[key]).expanduser()
            if not path.is_absolute():
                path = next((b / path for b in (root, ROOT) if (b / path).exists()), path)
            return ModelShape.from_file(path), None, path if path.is_dir() else path.parent, f"given: {path}"
    manifest = root / "resources" / "models" / name / "manifest.json"
    if manifest.is_file():
        try:
            d = Path(json.loads(manifest.read_text())["model_dir"])
            if (d / "config.json").is_file():
                return ModelShape.from_file(d), d, d, f"manifest: {manifest}"
        except (OSError, ValueError, KeyError, PlanError):
            pass
    if source.startswith("path:"):
        d = Path(source[5:]).expanduser()
        if (d / "config.json").is_file():
            return ModelShape.from_file(d), d, d, f"path: {d}"
    folder = local_model_folder(name) if not spec else None  # a draft named by hub id or folder
    if folder is not None:
        return ModelShape.from_file(folder), folder, folder, f"local: {folder}"
    hub_id = ref if source.startswith("hf:") else (name if not spec and name.count("/") == 1 else None)
    if hub and hub_id:
        fetched = _hub_config(hub_id, source.split("@")[1] if "@" in source else None)
        if fetched is not None:
            return ModelShape.from_file(fetched), None, None, f"hub: {hub_id} config.json"
    return None, None, None, "unknown"


def _hub_config(repo: str, revision: str | None) -> Path | None:
    """The hub's config.json of ``repo`` alone (no weights); None when the hub cannot be reached."""
    if os.environ.get("HF_HUB_OFFLINE", "").strip().lower() in ("1", "true", "yes"):
        return None
    try:
        from huggingface_hub import hf_hub_download

        return Path(hf_hub_download(repo, "config.json", revision=revision))
    except Exception:  # any hub failure (no network, gated, unknown repo) leaves the shape unknown
        return None

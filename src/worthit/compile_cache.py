"""Warm server starts: vLLM's compile cache under resources/, one folder per model, engine arguments and vLLM.

vLLM keeps its torch.compile artefacts (Dynamo/AOT graphs; in the installed 0.32 the Inductor and Triton
caches beside them) under ``VLLM_CACHE_ROOT`` (default ``~/.cache/vllm``), in sub-folders named by a hash of
everything that shapes the compiled graph. Pointing ``VLLM_CACHE_ROOT`` at a folder of the workflow's own,
keyed by what the variant serves (its model as configured, its engine arguments and extra arguments, the
vLLM version installed for the serve stage), makes every later start of that server warm: a forced load
level, a resumed study, the deployment validation serving the same command. The folder lives with the
models (``resources/vllm-cache/<model>/vllm-<version>-<key>``), outside any one study's results, so studies
sharing a model and arguments share it too. A ``VLLM_CACHE_ROOT`` set in the study's env wins.
CUDA graphs are captured at every start; vLLM keeps no cache of them.

One part of vLLM's cache does not depend on the variant: ``modelinfos``, its inspection of each model
class (done in a subprocess that imports the model's module; ~8 s of every cold start on two CPU cores),
keyed by a hash of the module's source. :func:`share_model_info` points that sub-folder of a variant's
cache at vLLM's default location, so every variant and study on the machine shares it, as every vLLM
without worthit does (measured: ``benchmarks/warm_start/run.py``, docs/running.md "How it runs").
"""

from __future__ import annotations

import functools
import hashlib
import json
import os
import re
import subprocess
from collections.abc import Iterable, Mapping, Sequence
from pathlib import Path
from typing import Any

ENV = "VLLM_CACHE_ROOT"
MODEL_INFO = "modelinfos"  # vLLM's cache of model-class inspections under VLLM_CACHE_ROOT
ROOT = "resources/vllm-cache"  # relative to the workflow's working directory, as resources/models is


def site_packages(python: str) -> list[Path]:
    """The ``site-packages`` folders of interpreter ``python``'s environment (``<venv>/bin/python``)."""
    return sorted((Path(python).parent.parent).glob("lib/python3*/site-packages"))


def dist_info_version(places: Iterable[Path]) -> str | None:
    """The version of the first ``vllm-*.dist-info`` in ``places`` (folders on a Python path), None if none."""
    for place in places:
        for info in sorted(place.glob("vllm-*.dist-info")):
            if m := re.fullmatch(r"vllm-(.+)\.dist-info", info.name):
                return m.group(1)
    return None


@functools.lru_cache(maxsize=8)
def vllm_version(python: str) -> str:
    """The vLLM version installed for interpreter ``python``: from its environment's ``vllm-*.dist-info``
    (no import: this runs while Snakemake builds its DAG), else by asking the interpreter; ``unknown``
    when neither answers."""
    if found := dist_info_version(site_packages(python)):
        return found
    try:
        out = subprocess.run(
            [python, "-c", "import importlib.metadata as m; print(m.version('vllm'))"],
            capture_output=True,
            text=True,
            timeout=60,
            check=True,
        )
    except (OSError, subprocess.SubprocessError):
        return "unknown"
    return out.stdout.strip() or "unknown"


def cache_dir(
    model: str,
    model_config: Mapping[str, Any],
    engine_args: Mapping[str, Any],
    extra_args: Sequence[str],
    *,
    version: str,
) -> str:
    """``resources/vllm-cache/<model>/vllm-<version>-<key>``: key = hash of the model's config entry, the
    engine arguments and the extra arguments (any change gives a new, cold folder)."""
    what = {"model": model, "model_config": model_config, "engine_args": engine_args, "extra_args": list(extra_args)}
    key = hashlib.sha256(json.dumps(what, sort_keys=True, default=str).encode()).hexdigest()[:12]
    safe = re.sub(r"[^A-Za-z0-9._+-]", "_", version)
    return f"{ROOT}/{model}/vllm-{safe}-{key}"


def with_cache(
    env: Mapping[str, str],
    python: str,
    model: str,
    model_config: Mapping[str, Any],
    *,
    engine_args: Mapping[str, Any],
    extra_args: Sequence[str],
) -> dict[str, str]:
    """The server's environment with ``VLLM_CACHE_ROOT`` set to its cache folder (unless ``env`` sets it)."""
    if ENV in env:
        return dict(env)
    return {**env, ENV: cache_dir(model, model_config, engine_args, extra_args, version=vllm_version(python))}


def default_root(env: Mapping[str, str]) -> Path:
    """vLLM's own cache root when ``VLLM_CACHE_ROOT`` is unset: ``$XDG_CACHE_HOME/vllm`` or ``~/.cache/vllm``."""
    home = env.get("HOME") or os.path.expanduser("~")
    return Path(env.get("XDG_CACHE_HOME") or Path(home) / ".cache") / "vllm"


def share_model_info(env: Mapping[str, str], cwd: Path | None = None) -> Path | None:
    """Link ``<VLLM_CACHE_ROOT>/modelinfos`` (relative roots resolved against ``cwd``) to vLLM's default
    ``modelinfos`` folder, before vLLM starts with ``env``; return the link, or None when there is nothing to
    share (no root set, the root is vLLM's default, the folder exists as a real one: kept as it is) or the
    shared folder cannot be made (vLLM then inspects the model class itself: slower, the same result).
    vLLM writes each entry atomically and checks its hash when reading it, so servers may share it at once."""
    if not env.get(ENV):
        return None
    root = Path(env[ENV])
    if not root.is_absolute():
        root = (cwd or Path.cwd()) / root
    shared = default_root(env) / MODEL_INFO
    link = root / MODEL_INFO
    try:
        if root.resolve() == shared.parent.resolve():
            return None
        if link.is_symlink() and link.resolve() == shared.resolve():
            return link
        if link.exists() or link.is_symlink():
            return None
        shared.mkdir(parents=True, exist_ok=True)
        root.mkdir(parents=True, exist_ok=True)
        tmp = root / f".{MODEL_INFO}.{os.getpid()}"
        tmp.unlink(missing_ok=True)
        tmp.symlink_to(shared, target_is_directory=True)
        os.replace(tmp, link)  # atomic: a server starting beside this one sees the link or nothing
    except OSError:
        return None
    return link

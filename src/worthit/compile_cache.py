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
"""

from __future__ import annotations

import functools
import hashlib
import json
import re
import subprocess
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any

ENV = "VLLM_CACHE_ROOT"
ROOT = "resources/vllm-cache"  # relative to the workflow's working directory, as resources/models is


@functools.lru_cache(maxsize=8)
def vllm_version(python: str) -> str:
    """The vLLM version installed for interpreter ``python``: from its environment's ``vllm-*.dist-info``
    (no import: this runs while Snakemake builds its DAG), else by asking the interpreter; ``unknown``
    when neither answers."""
    prefix = Path(python).parent.parent  # <venv>/bin/python -> <venv>
    for info in sorted(prefix.glob("lib/python3*/site-packages/vllm-*.dist-info")):
        if m := re.fullmatch(r"vllm-(.+)\.dist-info", info.name):
            return m.group(1)
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
    model: str, model_config: Mapping[str, Any], engine_args: Mapping[str, Any], extra_args: Sequence[str], version: str
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
    engine_args: Mapping[str, Any],
    extra_args: Sequence[str],
) -> dict[str, str]:
    """The server's environment with ``VLLM_CACHE_ROOT`` set to its cache folder (unless ``env`` sets it)."""
    if ENV in env:
        return dict(env)
    return {**env, ENV: cache_dir(model, model_config, engine_args, extra_args, vllm_version(python))}

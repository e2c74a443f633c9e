"""Provenance stamped into every result: versions, hardware, model hash, engine args, config hash."""

from __future__ import annotations

import contextlib
import json
import platform
import shutil
import subprocess
import time
from collections.abc import Mapping
from functools import lru_cache
from pathlib import Path
from typing import Any

from worthit import __version__
from worthit.server import http_get


@lru_cache(maxsize=1)
def hardware() -> dict[str, Any]:
    cpu = platform.processor() or ""
    with contextlib.suppress(OSError):
        for line in Path("/proc/cpuinfo").read_text().splitlines():
            if line.startswith("model name"):
                cpu = line.split(":", 1)[1].strip()
                break
    info: dict[str, Any] = {"cpu": cpu, "host": platform.node(), "gpu": None, "driver": None}
    if shutil.which("nvidia-smi"):
        with contextlib.suppress(OSError, subprocess.SubprocessError):
            out = subprocess.run(
                [
                    "nvidia-smi",
                    "--query-gpu=name,driver_version,compute_cap,memory.total,uuid",
                    "--format=csv,noheader",
                ],
                capture_output=True,
                text=True,
                timeout=30,
            ).stdout.strip()
            if out:
                gpus = [[x.strip() for x in line.split(",")] for line in out.splitlines()]
                first = gpus[0]
                info.update(
                    gpu=first[0],
                    driver=first[1],
                    compute_capability=first[2],
                    gpu_memory=first[3],
                    gpu_count=len(gpus),
                    gpu_uuids=[g[4] for g in gpus if len(g) > 4],
                )
    return info


def machine(hw: Mapping[str, Any] | None) -> str | None:
    """Which machine a result was measured on, from its ``hardware`` stamp: the host name, and the GPUs'
    UUIDs where recorded (lent or cloud machines often share one host name). None without a stamp."""
    if not hw:
        return None
    uuids = sorted(str(u).removeprefix("GPU-")[:8] for u in hw.get("gpu_uuids") or [])
    return str(hw.get("host") or "unknown host") + (f" (GPU {', '.join(uuids)})" if uuids else "")


def server_version(url: str) -> str | None:
    with contextlib.suppress(Exception):
        status, body = http_get(url.rstrip("/") + "/version", timeout=5)
        if status == 200:
            return str(json.loads(body).get("version"))
    return None


def stamp(
    *,
    variant: str | None = None,
    server_url: str | None = None,
    manifest: Any = None,
    engine_args: Mapping[str, Any] | None = None,
    config_hash: str | None = None,
    **extra: Any,
) -> dict[str, Any]:
    meta: dict[str, Any] = {
        "worthit_version": __version__,
        "created_at": time.strftime("%Y-%m-%dT%H:%M:%S%z"),
        "hardware": hardware(),
    }
    if variant:
        meta["variant"] = variant
    if server_url:
        meta["vllm_version"] = server_version(server_url)
    if manifest is not None:
        meta["model"] = {
            "name": manifest.name,
            "source": manifest.source,
            "hash": manifest.hash,
            "parameters": manifest.parameters,
            "dtype": manifest.dtype,
            "weights": getattr(manifest, "weights", "real"),  # random: performance only (worthit.report labels it)
        }
    if engine_args is not None:
        meta["engine_args"] = dict(engine_args)
    if config_hash:
        meta["config_hash"] = config_hash
    meta.update(extra)
    return meta

"""Cold vs warm start of one variant's server: vLLM's compile cache in a folder of its own (as the serve rule sets
``VLLM_CACHE_ROOT``, worthit.compile_cache), started twice through the product's supervisor.

    flock /tmp/worthit-heavy.lock .venvs/workflow/bin/python benchmarks/warm_start/run.py [--out results.json]

Starts: (1) torch.compile on, empty cache folder (cold); (2) the same again (warm: the compiled graphs load
from the folder); (3) cold again in a fresh folder (what a second start gains without the cache: the page
cache, vLLM's other caches); (4) --enforce-eager for reference (no compilation; the embedded study's
setting); (5) eager in a fresh folder with an empty shared ``modelinfos`` (vLLM inspects the model class in
a subprocess) and (6) eager in another fresh folder whose ``modelinfos`` link finds (5)'s inspection
(worthit.compile_cache.share_model_info). ``--only NAME ...`` runs some of them. Each start is timed
from the supervisor's launch to /health answering, and from the log (worthit.cost: supervisor start to vLLM
listening); the log's compile lines say whether the cache was hit. The model is the embedded one
(resources/models/smollm2-135m, fetched by the default study or the tests).
"""

from __future__ import annotations

import argparse
import json
import os
import re
import shutil
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(ROOT / "src"))

from worthit import compile_cache, cost  # noqa: E402
from worthit.server import consumer_presence, wait_ready  # noqa: E402

RUNS = ("cold", "warm", "cold_again", "eager", "eager_info_cold", "eager_info_shared")
ARGS = {"dtype": "float32", "max-model-len": 2048, "kv-cache-memory-bytes": 1073741824}
COMPILE_LINES = re.compile(
    r"(?:saved AOT compiled function|Directly load|Compiling model again|init engine|torch\.compile took).*"
)


def start_once(
    workdir: Path,
    model_dir: str,
    python: str,
    args: dict[str, Any],
    cache: Path,
    timeout_s: float,
    env: dict[str, str] | None = None,
) -> dict[str, Any]:
    workdir.mkdir(parents=True, exist_ok=True)
    state, log = workdir / "server.json", workdir / "server.log"
    spec = {
        "variant": "smol",
        "model_dir": model_dir,
        "python": python,
        "args": args,
        "extra": [],
        "env": {compile_cache.ENV: str(cache)},
        "gpus": 0,
    }
    cmd = [sys.executable, "-m", "worthit.server", "--state", str(state), "--log", str(log), "--spec", json.dumps(spec)]
    t0 = time.perf_counter()
    proc = subprocess.Popen(cmd, cwd=workdir, env={**os.environ, "PYTHONPATH": str(ROOT / "src"), **(env or {})})
    try:
        with consumer_presence(state, "warm-start-benchmark"):
            wait_ready(state, timeout_s)
            ready_s = time.perf_counter() - t0
    finally:
        proc.terminate()
        proc.wait(120)
    text = log.read_text(errors="replace")
    return {
        "ready_s": round(ready_s, 1),
        "log_start_s": cost.parse_server_log(text).start_s,
        "compile_lines": [m.group(0)[:300] for m in COMPILE_LINES.finditer(text)],
        "cache_mib": round(sum(p.stat().st_size for p in cache.rglob("*") if p.is_file()) / 2**20, 1),
        "model_info_inspected_s": _inspection_s(text),
    }


def _inspection_s(log_text: str) -> float | None:
    """Seconds from vLLM's argument dump to 'Resolved architecture': the model-class inspection (a subprocess
    when ``modelinfos`` has no entry for the class), at the log's one-second resolution."""
    stamps = [
        re.search(rf"(\d\d:\d\d:\d\d) \[[\w.]+:\d+\] {what}", log_text)
        for what in ("non-default args", "Resolved architecture")
    ]
    if not all(stamps):
        return None
    a, b = (_seconds(m.group(1)) for m in stamps if m)
    return float(b - a)


def _seconds(clock: str) -> int:
    h, m, s = (int(x) for x in clock.split(":"))
    return 3600 * h + 60 * m + s


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--model-dir", default=str(ROOT / "resources" / "models" / "smollm2-135m" / "model"))
    ap.add_argument("--python", default=str(ROOT / ".venvs" / "serve" / "bin" / "python"))
    ap.add_argument("--timeout-s", type=float, default=900)
    ap.add_argument("--out", type=Path)
    ap.add_argument("--only", nargs="+", choices=RUNS, help="run these starts only (default: all, in order)")
    a = ap.parse_args()
    result: dict[str, Any] = {
        "vllm": compile_cache.vllm_version(a.python),
        "load_before": os.getloadavg(),
        "cpus": os.cpu_count(),
        "args": ARGS,
    }
    with tempfile.TemporaryDirectory(prefix="warm-start-") as tmp:
        base, cache = Path(tmp), Path(tmp) / "vllm-cache"
        caches = {
            "cold": cache,
            "warm": cache,
            "cold_again": base / "fresh-cache",
            "eager": base / "eager-cache",
            "eager_info_cold": base / "info-cold-cache",
            "eager_info_shared": base / "info-shared-cache",
        }
        xdg = {"XDG_CACHE_HOME": str(base / "xdg")}  # an empty shared modelinfos folder, filled by the first start
        for name in a.only or RUNS:
            args = {**ARGS, "enforce-eager": True} if name.startswith("eager") else ARGS
            env = xdg if name.startswith("eager_info") else None
            result[name] = start_once(base / name, a.model_dir, a.python, args, caches[name], a.timeout_s, env)
            print(name, json.dumps(result[name], indent=1), flush=True)
        shutil.rmtree(cache, ignore_errors=True)
    result["load_after"] = os.getloadavg()
    if a.out:
        a.out.write_text(json.dumps(result, indent=1))


if __name__ == "__main__":
    main()

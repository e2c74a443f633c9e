"""The ``worthit`` command: tools to use outside the workflow.

``worthit loadtest`` runs one load level against any OpenAI-compatible server (closed loop at a
concurrency, or open loop at a request rate) with the workflow's client and metrics, prints a summary
table, and can write the per-request records as the workflow's ``load_requests`` Parquet table. It sends
the key in OPENAI_API_KEY (as ``vllm bench serve`` does; ``--api-key-env NAME`` for another variable) and any
``--header K:V`` a gateway wants; https:// certificates are verified unless ``--insecure``.
``worthit plan`` checks each variant's prerequisites and predicts its figures from the roofline, before
anything runs (:mod:`worthit.plan`).
``worthit tune --dry-run --config FILE`` checks a study's ``tune:`` section against the installed vLLM and
counts its search, the candidates the plan prunes before serving among them (:mod:`worthit.tune`).
``worthit report`` re-decides and re-renders a results folder (:mod:`worthit.report.build`); ``worthit combine``
brings chosen variants of several results folders (sessions on several machines) into one (:mod:`worthit.combine`).
"""

from __future__ import annotations

import argparse
import asyncio
import logging
import sys
from collections.abc import Sequence
from pathlib import Path
from typing import Any

from worthit import errors, prom, secrets
from worthit.fmt import cell
from worthit.loadgen.client import ClientConfig, Refused, RequestSpec, open_loop, run
from worthit.metrics import LevelSummary, Slo, Stat, prometheus_delta, summarize


def _counters(url: str, api_key: str | None = None) -> dict[str, float] | None:
    """The server's watched Prometheus counters, or None when it has no /metrics."""
    from worthit import prom
    from worthit.server import http_get

    try:
        status, body = http_get(url.rstrip("/") + "/metrics", timeout=10, api_key=api_key)
    except OSError:
        return None
    return prom.counters(body, prom.WATCHED_COUNTERS) if status == 200 else None


def _specs(a: argparse.Namespace) -> tuple[list[RequestSpec], list[RequestSpec]]:
    if a.tokenizer:
        from worthit.loadgen.prompts import RandomWorkload, load_tokenizer

        tok = load_tokenizer(a.tokenizer)
        if a.prompts:  # the workflow's reader of the user's prompts (loadtest.workloads: kind jsonl)
            from worthit.loadgen.workloads import Lengths, UserPrompts

            prompts = UserPrompts("cli", Path(a.prompts), Lengths.parse(a.output_tokens, "--output-tokens"))
            specs = prompts.build(tok, a.endpoint, a.num_requests, seed=a.seed).specs
        else:
            specs = RandomWorkload(
                a.prompt_tokens, a.output_tokens, a.num_requests, seed=a.seed, prompt_tokens_spread=a.prompt_spread
            ).build(tok)
        warm = RandomWorkload(a.prompt_tokens, a.output_tokens, a.warmup, seed=a.seed + 1).build(tok)
        return specs, warm
    # Without a tokenizer the prompt length is approximate: say so rather than pretend.
    logging.warning(
        "no --tokenizer: prompts are %d repeated words, not exactly %d tokens", a.prompt_tokens, a.prompt_tokens
    )
    spec = RequestSpec(" hello" * a.prompt_tokens, -1, a.output_tokens)
    return [spec] * a.num_requests, [spec] * a.warmup


def print_summary(s: LevelSummary, title: str, deltas: dict[str, float] | None = None) -> None:
    from rich.console import Console
    from rich.table import Table

    console = Console()
    t = Table(title=title)
    for col in ("metric", "n", "mean", "p50", "p90", "p99", "p50 95% CI"):
        t.add_column(col, justify="left" if col == "metric" else "right")
    rows: list[tuple[str, Stat]] = [
        ("TTFT ms", s.ttft_ms),
        ("TPOT ms", s.tpot_ms),
        ("ITL ms", s.itl_ms),
        ("E2E ms", s.e2e_ms),
    ]
    for name, st in rows:
        ci = f"{cell(st.ci95_low, 2)} – {cell(st.ci95_high, 2)}" if st.ci95_low is not None else "-"
        t.add_row(name, str(st.n), cell(st.mean, 2), cell(st.p50, 2), cell(st.p90, 2), cell(st.p99, 2), ci)
    console.print(t)
    r = Table(show_header=False)
    r.add_column("figure")
    r.add_column("value", justify="right")
    r.add_row("requests (errors)", f"{s.n} ({s.n_errors})")
    r.add_row("duration s", cell(s.duration_s, 2))
    r.add_row("output tok/s", cell(s.output_tok_per_s))
    r.add_row("requests/s", cell(s.requests_per_s, 3))
    r.add_row("goodput requests/s", cell(s.goodput_requests_per_s, 3))
    r.add_row("goodput tok/s", cell(s.goodput_tok_per_s))
    for k, v in (deltas or {}).items():
        r.add_row(f"Δ {k}", cell(v, 0))
    console.print(r)
    for reason, count in s.errors.items():
        console.print(f"[red]{count} x {reason}[/red]")


def _headers(items: Sequence[str] | None) -> dict[str, str]:
    """``--header K:V`` options as a mapping (a bad one is an :class:`worthit.errors.InputError`)."""
    out: dict[str, str] = {}
    for item in items or []:
        k, sep, v = item.partition(":")
        if not sep or not k.strip():
            raise errors.InputError(f"--header {item!r}: expected NAME:VALUE, e.g. 'X-Api-Key: <key>'")
        out[k.strip()] = v.strip()
    return out


def loadtest(a: argparse.Namespace) -> int:
    import os

    api_key = os.environ.get(a.api_key_env) or None
    secrets.register(api_key)
    cfg = ClientConfig(
        base_url=a.url,
        model=a.model,
        endpoint=a.endpoint,
        request_timeout_s=a.timeout_s,
        ignore_eos=not a.no_ignore_eos,
        api_key=api_key,
        headers=_headers(a.header),
        verify_tls=not a.insecure,
    )
    specs, warm = _specs(a)
    try:
        return _loadtest(a, cfg, specs, warm)
    except Refused as e:
        fix = f"set {a.api_key_env} to the server's key (or name another variable with --api-key-env)"
        if a.header:
            fix += ", or check the --header values"
        print(f"worthit loadtest: {secrets.auth_failure(e.status, e.url, api_key, fix)}", file=sys.stderr)
        return 1


def _loadtest(a: argparse.Namespace, cfg: ClientConfig, specs: list[RequestSpec], warm: list[RequestSpec]) -> int:
    scraped: list[dict[str, float] | None] = []

    def read_before() -> None:  # after the warm-up: the deltas count the measured requests only
        scraped.append(_counters(a.url, cfg.api_key))

    if a.request_rate:
        result = asyncio.run(
            open_loop(
                cfg,
                specs,
                a.request_rate,
                burstiness=a.burstiness,
                seed=a.seed,
                max_concurrency=a.concurrency,
                warmup=warm,
                duration_s=a.duration_s,
                after_warmup=read_before,
            )
        )
    else:
        result = run(
            cfg,
            specs,
            a.concurrency,
            processes=a.processes,
            warmup=warm,
            duration_s=a.duration_s,
            after_warmup=read_before,
        )
    before = scraped[0] if scraped else None
    after = _counters(a.url, cfg.api_key)
    deltas = {k: v for k, v in prometheus_delta(before, after).items() if v} if before and after else None
    rows = result.rows()
    slo = Slo(a.slo_ttft_ms, a.slo_tpot_ms, a.slo_e2e_ms)
    s = summarize(rows, slo)
    mode = f"rate {a.request_rate}/s" if a.request_rate else f"concurrency {a.concurrency}"
    print_summary(s, f"{a.url} {a.model}: {mode}, {a.prompt_tokens} → {a.output_tokens} tokens", deltas)
    traffic = prom.other_traffic(deltas, rows) if before and after else None
    if traffic and traffic["shared"]:
        print(f"warning: {prom.traffic_reason(traffic)}", file=sys.stderr)
    if a.out:
        from worthit import schemas
        from worthit.experiments.loadtest.tables import LOAD_REQUESTS

        for r in rows:
            r.update(
                variant=a.variant, concurrency=0 if a.request_rate else a.concurrency, request_rate_per_s=a.request_rate
            )
        meta: dict[str, Any] = {
            "n_warmup": result.warmup,
            "wall_s": result.wall_s,
            "metrics_delta": deltas,
            "metrics_after_warmup": True,
            "traffic": traffic,
            "workload": {
                "prompt_tokens": a.prompt_tokens,
                "output_tokens": a.output_tokens,
                "num_requests": a.num_requests,
                "seed": a.seed,
                "endpoint": a.endpoint,
            },
            "server_url": a.url,
        }
        schemas.write(a.out, LOAD_REQUESTS, rows, metadata=meta)
        print(f"wrote {len(rows)} requests to {a.out}")
    return 0 if s.n_errors == 0 else 1


def main(argv: Sequence[str] | None = None) -> int:
    ap = argparse.ArgumentParser(
        prog="worthit", description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    sub = ap.add_subparsers(dest="command", required=True)
    lt = sub.add_parser("loadtest", help="run one load level against an OpenAI-compatible server")
    lt.add_argument("--url", required=True, help="server base URL, e.g. http://127.0.0.1:8000 (or https://)")
    lt.add_argument(
        "--api-key-env",
        default=secrets.CLIENT_KEY_ENV,
        metavar="NAME",
        help="the environment variable holding the server's API key, sent as 'Authorization: Bearer' "
        "(default: OPENAI_API_KEY, as vllm bench serve reads it; unset: no key)",
    )
    lt.add_argument(
        "--header",
        action="append",
        metavar="K:V",
        help="a header every request sends (repeatable), for a gateway that wants its own",
    )
    lt.add_argument("--insecure", action="store_true", help="do not verify an https:// server's certificate")
    lt.add_argument("--model", required=True, help="served model name")
    lt.add_argument("--endpoint", choices=("completions", "chat"), default="completions")
    lt.add_argument(
        "--concurrency",
        type=int,
        default=1,
        help="closed-loop requests in flight (the cap on in-flight requests with --request-rate)",
    )
    lt.add_argument("--request-rate", type=float, default=None, help="open loop: requests per second")
    lt.add_argument("--burstiness", type=float, default=1.0, help="gamma shape of arrivals; 1 = Poisson")
    lt.add_argument("--num-requests", type=int, default=32)
    lt.add_argument(
        "--duration-s",
        type=float,
        default=None,
        help="stop starting requests after this long (cycling through the prompts)",
    )
    lt.add_argument("--prompt-tokens", type=int, default=256)
    lt.add_argument("--prompt-spread", type=float, default=0.0, help="uniform +- fraction of prompt length")
    lt.add_argument("--output-tokens", type=int, default=64)
    lt.add_argument("--prompts", default=None, help="JSONL file of prompts (a 'prompt' field per line)")
    lt.add_argument("--tokenizer", default=None, help="model folder whose tokenizer builds exact-length prompts")
    lt.add_argument("--warmup", type=int, default=2, help="warm-up requests, excluded from the figures")
    lt.add_argument("--seed", type=int, default=0)
    lt.add_argument("--timeout-s", type=float, default=600.0, help="per-request timeout")
    lt.add_argument("--processes", type=int, default=1, help="client worker processes (closed loop)")
    lt.add_argument(
        "--no-ignore-eos", action="store_true", help="let the model stop early (then output length is not checked)"
    )
    lt.add_argument("--slo-ttft-ms", type=float, default=None)
    lt.add_argument("--slo-tpot-ms", type=float, default=None)
    lt.add_argument("--slo-e2e-ms", type=float, default=None)
    lt.add_argument("--variant", default="cli", help="variant name written to --out")
    lt.add_argument("--out", default=None, help="write per-request records to this Parquet file")
    sub.add_parser(
        "report", help="re-decide and re-render a results folder (no serving); see worthit.report.build", add_help=False
    )
    sub.add_parser(
        "combine",
        help="copy chosen variants of several results folders into one (each session's baseline under its own "
        "name); see worthit.combine",
        add_help=False,
    )
    if argv is None:
        argv = sys.argv[1:]
    if argv and argv[0] == "report":  # its own parser: python -m worthit.report.build
        from worthit.report.build import main as report_main

        return report_main(list(argv[1:]))
    if argv and argv[0] == "combine":  # its own parser
        from worthit.combine import main as combine_main

        return combine_main(list(argv[1:]))
    pl = sub.add_parser("plan", help="check every variant's prerequisites and predict its figures, before measuring")
    pl.add_argument("--configfile", default=None, help="study config (default: the embedded one)")
    pl.add_argument("--gpu", default=None, help="plan for this GPU (worthit's table), e.g. 'RTX 3090', H200")
    pl.add_argument("--gpus", type=int, default=None, help="GPUs available (default: 1 with --gpu, else found)")
    pl.add_argument("--model-config", action="append", metavar="NAME=FILE", help="a model's config.json (repeatable)")
    pl.add_argument("--calibration", default=None, help="results/<study> of a finished study: use its fractions")
    pl.add_argument("--no-hub", action="store_true", help="never read a config.json from the hub")
    pl.add_argument("--no-vllm", action="store_true", help="do not ask the serve env's vLLM what it supports")
    pl.add_argument("--out", default=None, help="plan Parquet file (default: results/<study>/plan.parquet)")
    tu = sub.add_parser("tune", help="search engine flags for the best deployment under the SLO, in rounds")
    tu.add_argument("--dry-run", action="store_true", help="check the tune: section and count it; serve nothing")
    tu.add_argument("--cores", type=int, default=1, help="Snakemake's --cores for each round (default 1)")
    tu.add_argument("--profile", default=None, help="a Snakemake profile for the rounds (e.g. profiles/slurm)")
    tu.add_argument(
        "--no-confirm",
        action="store_true",
        help="serve no confirmation: one an earlier run began is judged on the fresh starts it measured",
    )
    tu.add_argument("--config", default=None, help="study config with a tune: section (default: the embedded one)")
    tu.add_argument("--gpu", default=None, help="plan the prunes for this GPU (worthit's table), e.g. H200")
    tu.add_argument("--gpus", type=int, default=None, help="GPUs available (default: 1 with --gpu, else found)")
    tu.add_argument("--model-config", action="append", metavar="NAME=FILE", help="a model's config.json (repeatable)")
    tu.add_argument("--no-hub", action="store_true", help="never read a config.json from the hub")
    tu.add_argument(
        "snakemake_args",
        nargs="*",
        metavar="-- SNAKEMAKE_ARG",
        help="after --: more arguments for each round's Snakemake (e.g. -- --set-resources serve_variant:mem_mb=8000)",
    )
    a = ap.parse_args(argv)
    logging.basicConfig(level=logging.WARNING, format="%(levelname)s %(message)s")
    if a.command == "plan":
        from worthit.plan import run_cli

        return run_cli(a)
    if a.command == "tune":
        from worthit.tune.dry_run import run_cli as tune_cli

        return tune_cli(a)
    if a.command == "loadtest":
        if a.concurrency < 1 or a.num_requests < 1:
            ap.error("--concurrency and --num-requests must be >= 1")
        if a.prompts and not a.tokenizer:
            ap.error("--prompts needs --tokenizer (the served model's folder): each prompt's tokens are counted")
        try:
            return loadtest(a)
        except errors.InputError as e:
            return errors.report("worthit loadtest", e)
    return 2


if __name__ == "__main__":
    sys.exit(main())

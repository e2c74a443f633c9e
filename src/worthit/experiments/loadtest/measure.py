"""The load levels on a variant's server: one level (closed-loop concurrency, open-loop rate or a workload's
sessions) measured request by request, with the server's counters before and after and its gauges sampled
through the run (the timeline), written as ``load_requests`` (and ``server_timeline``) Parquet."""

from __future__ import annotations

import asyncio
import json
import logging
from collections.abc import Callable, Coroutine, Mapping
from dataclasses import dataclass
from typing import Any

from worthit import energy, prom, schemas
from worthit.config import ConfigError, Study
from worthit.experiments.loadtest.section import section
from worthit.experiments.loadtest.tables import LOAD_REQUESTS, SERVER_TIMELINE
from worthit.loadgen import levels as levelmod
from worthit.loadgen import timeline as tl
from worthit.loadgen.client import ClientConfig, Refused, RequestRecord, closed_loop, sessions_loop
from worthit.loadgen.levels import CONC, LoadLevel
from worthit.loadgen.prompts import RandomWorkload, load_tokenizer
from worthit.loadgen.records import RequestSpec, RunResult
from worthit.loadgen.repetition import repeated_ngram_share
from worthit.loadgen.workloads import LevelRequests, NamedWorkload, ShareGPT, from_config
from worthit.metrics import prometheus_delta
from worthit.models import Manifest
from worthit.server import ServerState, server_errors
from worthit.server.ready import http_get
from worthit.stages import consume, counters, refused, result_meta

log = logging.getLogger("worthit")


@dataclass
class LevelRun:
    """One level measured: its request rows, run metadata, and the timeline's raw scrapes (if any)."""

    rows: list[dict[str, Any]]
    meta: dict[str, Any]
    samples: list[tl.Sample] | None
    t0_ns: int

    @property
    def end_s(self) -> float | None:
        """When the last measured request ended, on the rows' start_s clock."""
        ends = [r["start_s"] + r["e2e_ms"] / 1e3 for r in self.rows if r.get("e2e_ms") is not None]
        return max(ends) if ends else None


def _progress(label: str, total: int) -> Callable[[RequestRecord], None]:
    done = 0

    def on_done(rec: RequestRecord) -> None:
        nonlocal done
        done += 1
        log.info(
            "%s request %d/%d %s ttft=%.1fms e2e=%.1fms tokens=%d%s",
            label,
            done,
            total,
            "ok" if rec.success else "FAILED",
            rec.ttft_ms or -1,
            rec.e2e_ms or -1,
            rec.output_tokens,
            f" error={rec.error}" if rec.error else "",
        )

    return on_done


def add_repetition(rows: list[dict[str, Any]], records: list[RequestRecord], tok: Any) -> None:
    """Each row's ``repeated_ngram_share``: its response's text re-encoded with the model's tokenizer
    (:mod:`worthit.loadgen.repetition`), after the level, so it times nothing."""
    for row, rec in zip(rows, records, strict=True):
        row["repeated_ngram_share"] = repeated_ngram_share(tok.encode(rec.output_text, add_special_tokens=False))


def _corpus_warmup(wl: NamedWorkload, tok: Any, endpoint: str, n: int, *, seed: int, offset: int) -> list[RequestSpec]:
    """A sharegpt level's warm-up, drawn from the corpus too (its next seed's draw; nothing for other kinds), so
    the server warms up on the prompts it then serves (the level's /metrics deltas start after the warm-up
    whatever it sent: :func:`measure_level`)."""
    if not isinstance(wl, ShareGPT) or n <= 0:
        return []
    return wl.build(tok, endpoint, n, seed=seed + 1, offset=offset).specs[:n]


def served_context(url: str, api_key: str | None = None) -> int | None:
    """The served model's context (vLLM's ``max_model_len`` in ``GET /v1/models``); None where not told."""
    try:
        status, body = http_get(url.rstrip("/") + "/v1/models", timeout=30, api_key=api_key)
        models = (json.loads(body).get("data") or [{}]) if status == 200 else [{}]
        value = models[0].get("max_model_len")
    except (OSError, ValueError, AttributeError, IndexError):
        return None
    return int(value) if isinstance(value, int) and value > 0 else None


def _offset(level: LoadLevel) -> int:
    """The seed offset of a level's prompts: its concurrency (as always), distinct ranges for the others."""
    if level.kind == CONC:
        return int(level.concurrency or 0)
    return 1_000_000 + round(float(level.rate_per_s or 0) * 1000) if level.kind == levelmod.RATE else 2_000_000


def _loop(
    cfg: ClientConfig,
    level: LoadLevel,
    to_send: LevelRequests,
    arrivals: list[float] | None,
    warm: list[RequestSpec],
    on_done: Callable[[RequestRecord], None] | None,
    max_concurrency: int | None,
    after_warmup: Callable[[], None],
) -> Coroutine[Any, Any, RunResult]:
    """The loop a level runs: closed over requests or sessions, or sessions at their arrivals."""
    if arrivals is None and to_send.flat:
        conc = int(level.concurrency or 1)
        return closed_loop(cfg, to_send.specs, conc, warmup=warm, on_done=on_done, after_warmup=after_warmup)
    if arrivals is None:
        return sessions_loop(
            cfg,
            to_send.sessions,
            concurrency=int(level.concurrency or 1),
            think_time_s=to_send.think_time_s,
            warmup=warm,
            on_done=on_done,
            after_warmup=after_warmup,
        )
    return sessions_loop(
        cfg,
        to_send.sessions,
        arrivals_s=arrivals,
        think_time_s=to_send.think_time_s,
        warmup=warm,
        on_done=on_done,
        max_concurrency=max_concurrency,
        after_warmup=after_warmup,
    )


def level_energy(
    before: list[energy.Reading], after: energy.Reading, rows: list[dict[str, Any]], no_reader: str | None
) -> dict[str, Any]:
    """The level's energy record: the GPUs' joules between the reading after the warm-up and the one after the
    last measured request, the seconds between them, and per output token of the measured requests."""
    first = before[0] if before else energy.Reading(None, 0.0, "not measured: the level sent no measured request")
    out = energy.between(first, after)
    if out["energy_reason"] and no_reader:
        out["energy_reason"] = no_reader
    tokens = sum(int(r.get("output_tokens") or 0) for r in rows)
    return {**out, "energy_j_per_output_token": energy.per_output_token(out["energy_j"], tokens)}


def measure_level(
    url: str,
    model: str,
    tokenizer_dir: str,
    level: LoadLevel,
    *,
    workload: Mapping[str, Any] | None,
    num_requests: int,
    prompt_tokens: int,
    output_tokens: int,
    warmup: int = 2,
    seed: int = 0,
    endpoint: str = "completions",
    timeout_s: float = 600.0,
    progress: bool = True,
    open_loop: Mapping[str, Any] | None = None,
    timeline_interval_s: float | None = None,
    api_key: str | None = None,
    gpus: str | None = None,
    energy_reader: energy.Reader | None = None,
) -> LevelRun:
    """One level: closed loop at a concurrency, open loop at a rate, or a trace replayed in time.

    ``workload``: ``{"name": ..., **its config}`` (None: random prompts of exactly ``prompt_tokens``
    tokens, the study's default); ``open_loop``: the loadtest section's arrival, max_concurrency,
    rate_tolerance and max_queue_delay_ms; ``timeline_interval_s``: scrape /metrics that often meanwhile;
    ``api_key``: the server's key, sent with every request and scrape. The server's counters are read after
    the warm-up and after the last measured request, so ``metrics_delta`` (and the speculative acceptance,
    the prefix-cache hit rate and the traffic check read off it) counts the measured requests only. A request
    the server refuses (HTTP 401/403) ends the level at once: :class:`ServerFailed` naming the cause and the
    fix. ``gpus``: the server's CUDA_VISIBLE_DEVICES, whose NVML energy counters are read beside the server's
    counters (``energy_reader`` replaces NVML; :mod:`worthit.energy`); the level's metadata records the
    joules, the seconds between the readings and the joules per output token, or why they were not measured.
    """
    tok = load_tokenizer(tokenizer_dir)
    offset = _offset(level)
    warm = RandomWorkload(prompt_tokens, output_tokens, warmup, seed=seed + 1).build(tok, offset=offset)
    ignore_eos = True  # random-token prompts of a fixed output length: every request generates exactly it
    if workload is None:
        specs = RandomWorkload(prompt_tokens, output_tokens, num_requests, seed=seed).build(tok, offset=offset)
        to_send = LevelRequests([[s] for s in specs])
        described: dict[str, Any] = {
            "prompt_tokens": prompt_tokens,
            "output_tokens": output_tokens,
            "num_requests": num_requests,
            "seed": seed,
            "endpoint": endpoint,
        }
    else:
        defaults = {"prompt_tokens": prompt_tokens, "output_tokens": output_tokens}
        wl = from_config(
            str(workload["name"]),
            {k: v for k, v in workload.items() if k != "name"},
            defaults=defaults,
            max_model_len=served_context(url, api_key),
        )
        # a closed loop keeps every worker busy; an open loop starts num_requests sessions (conversations)
        sessions = level.concurrency or (num_requests if level.kind == levelmod.RATE else 1)
        to_send = wl.build(tok, endpoint, num_requests, seed=seed, offset=offset, min_sessions=sessions)
        warm = _corpus_warmup(wl, tok, endpoint, warmup, seed=seed, offset=offset) or warm
        ignore_eos = wl.ignore_eos  # real text: a reply ends where the model ends it (max_tokens a cap)
        described = {**to_send.describe, "num_requests": len(to_send.specs), "seed": seed, "endpoint": endpoint}
    ol = dict(open_loop or {})
    arrivals: list[float] | None = None
    if level.kind == levelmod.RATE:
        arrival = ol.get("arrival") or {}
        burst = float(arrival.get("burstiness", 1.0)) if arrival.get("distribution") == "gamma" else 1.0
        arrivals = levelmod.rate_arrivals(len(to_send.sessions), float(level.rate_per_s or 0), burst, seed)
    elif level.kind == levelmod.REPLAY:
        arrivals = to_send.arrivals_s
    cfg = ClientConfig(
        base_url=url,
        model=model,
        endpoint=endpoint,
        ignore_eos=ignore_eos,
        request_timeout_s=timeout_s,
        api_key=api_key,
    )
    label = f"conc={level.concurrency}" if level.kind == CONC else level.name
    on_done = _progress(label, len(to_send.specs)) if progress else None
    before: dict[str, float] = {}
    reader, no_energy = (energy_reader, None) if energy_reader is not None else energy.reader_for(gpus)
    energy_before: list[energy.Reading] = []

    def read_before() -> None:  # between the warm-up and the first measured request
        before.update(counters(url, api_key))
        energy_before.append(energy.read(reader))

    scraper = tl.Scraper(url, timeline_interval_s, api_key=api_key).start() if timeline_interval_s else None
    try:
        run = _loop(cfg, level, to_send, arrivals, warm, on_done, ol.get("max_concurrency"), read_before)
        result = asyncio.run(run)
    except Refused as e:
        raise refused(e, api_key) from None
    finally:
        samples = scraper.stop() if scraper is not None else None
    energy_after = energy.read(reader)
    rows = result.rows()
    add_repetition(rows, result.records, tok)
    try:
        after = counters(url, api_key)
    except OSError:
        if not server_errors(rows):
            raise
        # the server died during the level: its requests' errors say so (consume_in_turn records the failure)
        return LevelRun(rows, {"n_warmup": result.warmup, "wall_s": result.wall_s}, samples, result.t0_ns)
    if not to_send.flat:
        where = to_send.positions()
        for r in rows:
            r["session_id"], r["turn"] = where[r["request_id"]]
    meta: dict[str, Any] = {
        "n_warmup": result.warmup,
        "wall_s": result.wall_s,
        "metrics_delta": prometheus_delta(before, after),
        "metrics_after_warmup": True,  # the delta counts the measured requests, not the warm-up
        "workload": described,
        "energy": level_energy(energy_before, energy_after, rows, no_energy),
        "ignore_eos": ignore_eos,  # false: replies end at the model's end-of-sequence (output lengths vary)
    }
    traffic = prom.other_traffic(meta["metrics_delta"], rows)
    if traffic is not None:
        meta["traffic"] = traffic
        if traffic["shared"]:
            log.warning("%s: %s", label, prom.traffic_reason(traffic))
    if arrivals is not None:
        firsts = [r for r in rows if not r.get("turn")]
        d = levelmod.delivery(
            [r["scheduled_s"] for r in firsts],
            [r["start_s"] for r in firsts],
            float(ol.get("rate_tolerance", 0.05)),
            float(ol.get("max_queue_delay_ms", 100.0)),
        )
        meta.update(d.metadata(), arrival=ol.get("arrival"), max_concurrency=ol.get("max_concurrency"))
        if not d.delivered:
            log.warning("%s: the client did not deliver the schedule: %s", level.name, d.reason)
    return LevelRun(rows, meta, samples, result.t0_ns)


def study_level(
    study: Study,
    variant: str,
    level: LoadLevel,
    url: str,
    *,
    served_model_name: str,
    tokenizer_dir: str,
    run: int = 1,
    seed_offset: int = 0,
    timeline_interval_s: float | None = None,
    gpus: str | None = None,
) -> LevelRun:
    """One level as the study's ``loadtest`` section defines it for ``variant``: its workload, request
    count, lengths, warm-up, endpoint, timeout and open-loop settings. Run r uses its own prompts
    (seed + seed_offset + 2(r-1); its warm-up the next seed), so a server with prefix caching on cannot
    answer a repeat from the cache of an earlier run. The load stage, the sweet-spot search and the
    deployment validation all measure through here."""
    lt = section(study.cfg)
    wl_name = lt.workload_name(variant, level)
    return measure_level(
        url,
        served_model_name,
        tokenizer_dir,
        level,
        workload=None if wl_name is None else {"name": wl_name, **lt.workloads[wl_name]},
        num_requests=lt.level_requests(level),
        prompt_tokens=lt.prompt_tokens,
        output_tokens=lt.output_tokens,
        warmup=lt.warmup_requests,
        seed=lt.seed + seed_offset + 2 * (run - 1),
        endpoint=lt.endpoint,
        timeout_s=lt.request_timeout_s,
        open_loop=lt.open_loop,
        timeline_interval_s=timeline_interval_s,
        api_key=study.api_key,
        gpus=gpus,
    )


def loadtest(
    study: Study,
    variant: str,
    level: int | str | LoadLevel,
    state_path: str,
    *,
    manifest_path: str,
    out: str,
    run: int = 1,
    timeline_out: str | None = None,
) -> None:
    """One run of one load level (a concurrency, a level's name such as rate~2.5, or a LoadLevel). Run r of a
    level uses its own prompts (seed + 2(r-1)), so a server with prefix caching on cannot answer a repeat
    from the cache of an earlier run. With ``timeline_out`` the server's /metrics are sampled every
    ``loadtest.timeline_interval_s`` during the level and written there."""
    lt = section(study.cfg)
    lv = LoadLevel(CONC, level) if isinstance(level, int) else lt.level(level) if isinstance(level, str) else level
    if not 1 <= run <= lt.repeats:
        raise ConfigError(
            f"{out}: run {run} of level {lv.name} is not part of the study "
            f"(loadtest.repeats is {lt.repeats}); raise loadtest.repeats to {run} to measure it"
        )
    manifest = Manifest.load(manifest_path)
    wl_name = lt.workload_name(variant, lv)
    default = lv.kind == CONC and wl_name is None
    extra_meta: dict[str, Any] = {"concurrency": lv.concurrency or 0, "repeat": run}
    if not default:  # the level, its kind and workload (the default levels' metadata stays as it was)
        extra_meta.update(lv.describe(), workload_name=wl_name)
    meta = result_meta(study, variant, manifest, **extra_meta)
    interval = lt.timeline_interval_s if timeline_out else None
    timeline: list[dict[str, Any]] | None = None

    def body(state: ServerState) -> tuple[list[dict[str, Any]], dict[str, Any]]:
        nonlocal timeline
        measured = study_level(
            study,
            variant,
            lv,
            state.url,
            served_model_name=state.served_model_name,
            tokenizer_dir=manifest.model_dir,
            run=run,
            seed_offset=0,
            timeline_interval_s=interval,
            gpus=state.gpus,
        )
        rows = measured.rows
        for r in rows:
            r.update(variant=variant, concurrency=lv.concurrency or 0, request_rate_per_s=lv.rate_per_s)
        if measured.samples is not None:
            timeline = tl.timeline_rows(
                measured.samples, measured.t0_ns, measured.end_s, variant, level=lv.name, run=run
            )
        ok = sum(r["success"] for r in rows)
        log.info(
            "%s run %d: %d/%d requests succeeded", f"conc={lv.concurrency}" if default else lv.name, run, ok, len(rows)
        )
        return rows, measured.meta

    consume(study, variant, lv.path(run), out, table=LOAD_REQUESTS, state_path=state_path, meta=meta, body=body)
    if timeline_out:
        if timeline is not None:
            schemas.write(timeline_out, SERVER_TIMELINE, timeline, metadata={**meta, "interval_s": interval})
        else:  # the level failed: so does its timeline, for the same reason
            res = schemas.read(out, LOAD_REQUESTS)
            schemas.write_failure(
                timeline_out,
                SERVER_TIMELINE,
                res.reason or "the level was not measured",
                status=res.status,
                metadata=meta,
            )

"""Asyncio streaming client for OpenAI-compatible completions and chat completions.

Closed loop: exactly ``concurrency`` requests in flight until the request list is used up. Open loop:
requests start at Poisson (or gamma, with burstiness) intervals at a target rate, however many are in
flight. Each request's timestamps come from ``perf_counter_ns``; output tokens from the server's
``usage`` (one chunk can carry several tokens under speculative decoding). Errors, HTTP failures and
timeouts are recorded per request, never dropped.
"""

from __future__ import annotations

import asyncio
import json
import random
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from typing import Any

import aiohttp

from worthit.metrics import tpot_ms

ENDPOINTS = {"completions": "/v1/completions", "chat": "/v1/chat/completions"}


@dataclass(frozen=True)
class RequestSpec:
    """One request to send: a prompt (text or token ids), its length, and the output length."""

    prompt: str | list[int]
    prompt_tokens: int
    max_tokens: int


@dataclass
class RequestRecord:
    """What happened to one request; times in ms relative to its start unless named otherwise."""

    request_id: int
    prompt_tokens: int
    start_ns: int = 0
    ttft_ms: float | None = None
    e2e_ms: float | None = None
    output_tokens: int = 0
    prompt_tokens_reported: int | None = None
    itl_ms: list[float] = field(default_factory=list)
    chunks: int = 0
    success: bool = False
    error: str | None = None

    @property
    def tpot_ms(self) -> float | None:
        return tpot_ms(self.ttft_ms, self.e2e_ms, self.output_tokens) if self.success else None

    def row(self, t0_ns: int) -> dict[str, Any]:
        return {
            "request_id": self.request_id,
            "prompt_tokens": self.prompt_tokens,
            "prompt_tokens_reported": self.prompt_tokens_reported,
            "output_tokens": self.output_tokens,
            "start_s": (self.start_ns - t0_ns) / 1e9,
            "ttft_ms": self.ttft_ms,
            "e2e_ms": self.e2e_ms,
            "tpot_ms": self.tpot_ms,
            "itl_ms": self.itl_ms,
            "chunks": self.chunks,
            "success": self.success,
            "error": self.error,
        }


@dataclass(frozen=True)
class ClientConfig:
    base_url: str
    model: str
    endpoint: str = "completions"
    ignore_eos: bool = True
    temperature: float = 0.0
    request_timeout_s: float = 600.0
    extra_body: dict[str, Any] = field(default_factory=dict)

    def __post_init__(self) -> None:
        if self.endpoint not in ENDPOINTS:
            raise ValueError(f"endpoint {self.endpoint!r} not in {sorted(ENDPOINTS)}")


def _payload(cfg: ClientConfig, spec: RequestSpec) -> dict[str, Any]:
    body: dict[str, Any] = {
        "model": cfg.model,
        "max_tokens": spec.max_tokens,
        "temperature": cfg.temperature,
        "stream": True,
        "stream_options": {"include_usage": True},
        "ignore_eos": cfg.ignore_eos,
    }
    if cfg.endpoint == "chat":
        text = spec.prompt if isinstance(spec.prompt, str) else json.dumps(spec.prompt)
        body["messages"] = [{"role": "user", "content": text}]
    else:
        body["prompt"] = spec.prompt
    body.update(cfg.extra_body)
    return body


def _content(choice: dict[str, Any], chat: bool) -> str:
    if chat:
        delta = choice.get("delta") or {}
        return (delta.get("content") or "") + (delta.get("reasoning_content") or "")
    return choice.get("text") or ""


async def send(session: aiohttp.ClientSession, cfg: ClientConfig, spec: RequestSpec,
               request_id: int) -> RequestRecord:
    """Send one streaming request and time it. Never raises for request-level failures."""
    rec = RequestRecord(request_id=request_id, prompt_tokens=spec.prompt_tokens)
    chat = cfg.endpoint == "chat"
    url = cfg.base_url.rstrip("/") + ENDPOINTS[cfg.endpoint]
    rec.start_ns = start = time.perf_counter_ns()
    last = start
    usage_tokens: int | None = None
    try:
        async with session.post(url, json=_payload(cfg, spec),
                                timeout=aiohttp.ClientTimeout(total=cfg.request_timeout_s)) as resp:
            if resp.status != 200:
                body = (await resp.text())[:300]
                rec.error = f"HTTP {resp.status}: {body}"
                return rec
            buf = b""
            async for data in resp.content.iter_any():
                now = time.perf_counter_ns()
                buf += data
                *events, buf = buf.split(b"\n\n")
                for event in events:
                    for line in event.split(b"\n"):
                        if not line.startswith(b"data:"):
                            continue
                        payload = line[5:].strip()
                        if payload == b"[DONE]":
                            continue
                        msg = json.loads(payload)
                        if "error" in msg and not msg.get("choices"):
                            raise RuntimeError(f"server error in stream: {msg['error']}")
                        if msg.get("usage"):
                            usage_tokens = msg["usage"].get("completion_tokens")
                            rec.prompt_tokens_reported = msg["usage"].get("prompt_tokens")
                        choices = msg.get("choices") or []
                        if choices and _content(choices[0], chat):
                            if rec.ttft_ms is None:
                                rec.ttft_ms = (now - start) / 1e6
                            else:
                                rec.itl_ms.append((now - last) / 1e6)
                            last = now
                            rec.chunks += 1
            if rec.ttft_ms is None:
                rec.error = "stream ended without content"
                return rec
            rec.e2e_ms = (last - start) / 1e6
            if usage_tokens is None:
                # Servers that omit usage: fall back to one token per chunk (exact without spec decode)
                usage_tokens = rec.chunks
            rec.output_tokens = int(usage_tokens)
            if cfg.ignore_eos and rec.output_tokens != spec.max_tokens:
                rec.error = f"expected {spec.max_tokens} output tokens, got {rec.output_tokens}"
                return rec
            rec.success = True
    except asyncio.TimeoutError:
        rec.error = f"timeout after {cfg.request_timeout_s:.0f}s"
    except (aiohttp.ClientError, RuntimeError, ValueError) as e:
        rec.error = f"{type(e).__name__}: {e}"[:300]
    return rec


def make_session(concurrency: int) -> aiohttp.ClientSession:
    # One connection per in-flight request: aiohttp's default cap of 100 would queue requests above it
    # inside the client and inflate TTFT.
    conn = aiohttp.TCPConnector(limit=max(1, concurrency), limit_per_host=max(1, concurrency),
                                force_close=False, enable_cleanup_closed=True)
    return aiohttp.ClientSession(connector=conn, timeout=aiohttp.ClientTimeout(total=None))


@dataclass
class RunResult:
    records: list[RequestRecord]
    t0_ns: int
    warmup: int
    wall_s: float

    def rows(self) -> list[dict[str, Any]]:
        return [r.row(self.t0_ns) for r in self.records]


Progress = Callable[[RequestRecord], None]


async def closed_loop(cfg: ClientConfig, specs: Sequence[RequestSpec], concurrency: int,
                      warmup: Sequence[RequestSpec] = (), on_done: Progress | None = None) -> RunResult:
    """Exactly ``concurrency`` requests in flight until ``specs`` is used up."""
    if concurrency < 1:
        raise ValueError("concurrency must be >= 1")
    async with make_session(concurrency) as session:
        if warmup:
            await asyncio.gather(*(send(session, cfg, s, -1 - i) for i, s in enumerate(warmup)))
        queue: asyncio.Queue[tuple[int, RequestSpec]] = asyncio.Queue()
        for i, s in enumerate(specs):
            queue.put_nowait((i, s))
        records: list[RequestRecord] = []

        async def worker() -> None:
            while True:
                try:
                    i, s = queue.get_nowait()
                except asyncio.QueueEmpty:
                    return
                rec = await send(session, cfg, s, i)
                records.append(rec)
                if on_done:
                    on_done(rec)

        t0 = time.perf_counter_ns()
        await asyncio.gather(*(worker() for _ in range(min(concurrency, len(specs)))))
        wall = (time.perf_counter_ns() - t0) / 1e9
    records.sort(key=lambda r: r.request_id)
    first = min((r.start_ns for r in records), default=t0)
    return RunResult(records=records, t0_ns=first, warmup=len(warmup), wall_s=wall)


def arrival_gaps(n: int, rate_per_s: float, burstiness: float = 1.0, seed: int = 0) -> list[float]:
    """Inter-arrival gaps in seconds: gamma(shape=burstiness, mean 1/rate); burstiness 1 = Poisson."""
    if rate_per_s <= 0 or burstiness <= 0:
        raise ValueError("rate and burstiness must be > 0")
    rng = random.Random(seed)
    theta = 1.0 / (rate_per_s * burstiness)
    return [rng.gammavariate(burstiness, theta) for _ in range(n)]


async def open_loop(cfg: ClientConfig, specs: Sequence[RequestSpec], rate_per_s: float,
                    burstiness: float = 1.0, seed: int = 0, max_concurrency: int | None = None,
                    warmup: Sequence[RequestSpec] = (), on_done: Progress | None = None) -> RunResult:
    """Start requests at a target rate (Poisson or gamma arrivals), independent of completions."""
    gaps = arrival_gaps(len(specs), rate_per_s, burstiness, seed)
    limit = max_concurrency or len(specs) or 1
    async with make_session(limit) as session:
        if warmup:
            await asyncio.gather(*(send(session, cfg, s, -1 - i) for i, s in enumerate(warmup)))
        sem = asyncio.Semaphore(limit)
        records: list[RequestRecord] = []

        async def one(i: int, s: RequestSpec) -> None:
            async with sem:
                rec = await send(session, cfg, s, i)
            records.append(rec)
            if on_done:
                on_done(rec)

        t0 = time.perf_counter_ns()
        tasks = []
        next_at = time.perf_counter()
        for i, (s, gap) in enumerate(zip(specs, gaps)):
            delay = next_at - time.perf_counter()
            if delay > 0:
                await asyncio.sleep(delay)
            tasks.append(asyncio.create_task(one(i, s)))
            next_at += gap
        await asyncio.gather(*tasks)
        wall = (time.perf_counter_ns() - t0) / 1e9
    records.sort(key=lambda r: r.request_id)
    first = min((r.start_ns for r in records), default=t0)
    return RunResult(records=records, t0_ns=first, warmup=len(warmup), wall_s=wall)

"""Asyncio streaming client for OpenAI-compatible completions and chat completions.

Closed loop: exactly ``concurrency`` requests in flight until the request list is used up. Open loop:
requests start at Poisson (or gamma, with burstiness) intervals at a target rate, however many are in
flight. Each request's timestamps come from ``perf_counter_ns``, its clock started before the request
is built (as ``vllm bench serve`` does); output tokens from the server's ``usage`` (one chunk can carry
several tokens under speculative decoding). Errors, HTTP failures and timeouts are recorded per
request, never dropped.

What is timed, as ``vllm bench serve`` times it (vllm/benchmarks/lib/endpoint_request_func.py): every
streamed event that carries a choice is a token chunk, whether or not its text is empty. vLLM sends a
chunk with empty text whenever a token ends inside a multi-byte character (Chinese, emoji, ...) or is
special, and chat's first chunk carries only the role; TTFT is the first such chunk, ITL the gaps
between them, E2E the last. The usage-only final event (no choices), SSE comments (keep-alives) and
``[DONE]`` are not tokens. The first chunk with visible text is recorded beside it as
``first_text_ms``.

Speed: for ``http://`` URLs requests go over a small HTTP/1.1 client built on ``asyncio.Protocol`` (one
keep-alive connection per in-flight request, so the pool is always the concurrency): the response is
parsed in ``data_received``, timestamped there, without a coroutine wake-up per network read. That is
several times cheaper per streamed token than aiohttp's reader, which matters on a small CPU where the
client shares cores with the server it measures. ``https://`` URLs go through aiohttp with the same SSE
parser, TLS verification on unless ``verify_tls`` is off. Every request carries the server's API key
(``Authorization: Bearer``) and any other headers a gateway wants (``ClientConfig.api_key``, ``headers``); a
request the server refuses (HTTP 401/403) ends the level at once with :class:`Refused`: nothing measured
without the key is evidence. When one process still can't keep up, :func:`run` spreads the clients over
worker processes and merges their records (``perf_counter_ns`` is the system-wide monotonic clock, so times compare).
"""

from __future__ import annotations

import asyncio
import json
import multiprocessing as mp
import random
import time
from collections.abc import Callable, Sequence
from contextlib import nullcontext
from dataclasses import dataclass, field
from typing import Any
from urllib.parse import urlsplit

import aiohttp

from worthit import secrets
from worthit.metrics import tpot_ms

ENDPOINTS = {"completions": "/v1/completions", "chat": "/v1/chat/completions"}
# A server answering these refuses the client, not the request: the level stops (Refused).
REFUSED_STATUSES = (401, 403)


class Refused(Exception):
    """The server refused a request for want of (the right) credentials: HTTP 401 or 403."""

    def __init__(self, status: int, detail: str, url: str) -> None:
        super().__init__(status, detail, url)
        self.status, self.detail, self.url = status, detail, url

    def __str__(self) -> str:
        return f"HTTP {self.status} from {self.url}: {self.detail}"


@dataclass(frozen=True)
class RequestSpec:
    """One request to send: a prompt (text or token ids), its length, and the output length.

    ``messages`` (chat endpoint only): the conversation to send instead of one user message holding the
    prompt (``prompt`` is then its rendering, for the record).
    """

    prompt: str | list[int]
    prompt_tokens: int
    max_tokens: int
    messages: tuple[dict[str, str], ...] | None = None


@dataclass
class RequestRecord:
    """What happened to one request; times in ms relative to its start unless named otherwise."""

    request_id: int
    prompt_tokens: int
    start_ns: int = 0
    sent_ns: int = 0  # when the request was written (the http:// client only; 0 where unknown)
    ttft_ms: float | None = None
    first_text_ms: float | None = None  # first chunk whose text is not empty
    e2e_ms: float | None = None
    output_tokens: int = 0
    prompt_tokens_reported: int | None = None
    itl_ms: list[float] = field(default_factory=list)
    chunks: int = 0
    success: bool = False
    error: str | None = None
    scheduled_ns: int | None = None  # open loop: when the request was due (start - this: queueing delay)
    http_status: int = 0  # the response's status (0: none came)

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
            "first_text_ms": self.first_text_ms,
            "e2e_ms": self.e2e_ms,
            "tpot_ms": self.tpot_ms,
            "itl_ms": self.itl_ms,
            "chunks": self.chunks,
            "success": self.success,
            "error": self.error,
            "scheduled_s": None if self.scheduled_ns is None else (self.scheduled_ns - t0_ns) / 1e9,
            "queue_delay_ms": None if self.scheduled_ns is None else (self.start_ns - self.scheduled_ns) / 1e6,
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
    fast: bool = True  # the asyncio.Protocol client for http:// (False: aiohttp for everything)
    # Sent as X-Request-Id (prefix + request id), so a server's own log of a request can be matched
    # with the client's record (benchmarks/loadgen_fidelity); None sends no such header.
    request_id_prefix: str | None = None
    # The server's API key, sent as "Authorization: Bearer <key>" (None: no such header), other headers a
    # gateway wants, and whether an https:// server's certificate is verified.
    api_key: str | None = field(default=None, repr=False)
    headers: dict[str, str] = field(default_factory=dict, repr=False)
    verify_tls: bool = True

    def __post_init__(self) -> None:
        if self.endpoint not in ENDPOINTS:
            raise ValueError(f"endpoint {self.endpoint!r} not in {sorted(ENDPOINTS)}")


def _headers(cfg: ClientConfig, request_id: int) -> dict[str, str]:
    out = secrets.auth_headers(cfg.api_key, cfg.headers)
    if cfg.request_id_prefix is not None:
        out["X-Request-Id"] = f"{cfg.request_id_prefix}{request_id}"
    return out


def _payload(cfg: ClientConfig, spec: RequestSpec) -> dict[str, Any]:
    body: dict[str, Any] = {
        "model": cfg.model,
        "max_tokens": spec.max_tokens,
        "temperature": cfg.temperature,
        "stream": True,
        "stream_options": {"include_usage": True},
        "ignore_eos": cfg.ignore_eos,
    }
    if cfg.endpoint == "chat" and spec.messages:
        body["messages"] = list(spec.messages)
    elif cfg.endpoint == "chat":
        text = spec.prompt if isinstance(spec.prompt, str) else json.dumps(spec.prompt)
        body["messages"] = [{"role": "user", "content": text}]
    else:
        body["prompt"] = spec.prompt
    body.update(cfg.extra_body)
    return body


def _content(choice: dict[str, Any]) -> str:
    text = choice.get("text")
    if text is not None:
        return str(text)
    delta = choice.get("delta") or {}
    return (delta.get("content") or "") + (delta.get("reasoning_content") or delta.get("reasoning") or "")


def _plain_choice(payload: bytes) -> bool:
    """True for an event that certainly carries a choice and nothing else we need (no usage, no error).

    Saves the JSON parse on nearly every event once the first visible text has been seen. Inside JSON
    strings quotes are escaped, so these byte patterns can only be the keys themselves; other spellings
    (spaces after the colon) are simply parsed in full.
    """
    return b'"choices":[{' in payload and b'"usage":{' not in payload and b'"error"' not in payload


class _SseTimer:
    """Parses one response's SSE stream as bytes arrive and times its token chunks.

    A token chunk is an event that carries a choice, its text empty or not (see the module's docstring);
    usage-only events, comments and ``[DONE]`` are not timed.
    """

    __slots__ = ("rec", "start", "last", "buf", "usage_tokens", "itl", "error", "role_chunks")

    def __init__(self, rec: RequestRecord, start: int) -> None:
        self.rec = rec
        self.start = start
        self.last = start
        self.buf = b""
        self.usage_tokens: int | None = None
        self.itl = rec.itl_ms
        self.error: str | None = None
        self.role_chunks = 0  # chat's role-only first chunk: timed, but no token of its own

    def feed(self, data: bytes, now: int) -> None:
        if self.buf:
            data = self.buf + data
        if b"\r" in data:
            data = data.replace(b"\r\n", b"\n")
        if b"\n\n" not in data:
            self.buf = data
            return
        *events, self.buf = data.split(b"\n\n")
        for event in events:
            for line in event.split(b"\n") if b"\n" in event else (event,):
                if not line.startswith(b"data:"):
                    continue  # SSE comments and other fields
                payload = line[5:].strip()
                if payload == b"[DONE]" or not payload:
                    continue
                if self.rec.first_text_ms is not None and _plain_choice(payload):
                    self._token_chunk(now)  # fast path: no JSON parse needed
                    continue
                try:
                    msg = json.loads(payload.decode())
                except ValueError:
                    self.error = f"malformed SSE data: {payload[:100]!r}"
                    continue
                self._message(msg, now)

    def _token_chunk(self, now: int) -> None:
        """A chunk that carries a choice: the first sets TTFT, each later one adds an inter-token gap."""
        rec = self.rec
        if rec.ttft_ms is None:
            rec.ttft_ms = (now - self.start) / 1e6
        else:
            self.itl.append((now - self.last) / 1e6)
        self.last = now
        rec.chunks += 1

    def _message(self, msg: dict[str, Any], now: int) -> None:
        usage = msg.get("usage")
        if usage:
            self.usage_tokens = usage.get("completion_tokens")
            self.rec.prompt_tokens_reported = usage.get("prompt_tokens")
        choices = msg.get("choices")
        if choices:
            choice = choices[0] if isinstance(choices[0], dict) else {}
            if self.rec.first_text_ms is None and _content(choice):
                self.rec.first_text_ms = (now - self.start) / 1e6
            elif self.rec.chunks == 0 and "role" in (choice.get("delta") or {}):
                self.role_chunks = 1
            self._token_chunk(now)
        elif "error" in msg:
            self.error = f"server error in stream: {json.dumps(msg['error'])[:250]}"

    def finish(self, expected_tokens: int | None) -> RequestRecord:
        """Close the record: success only with content, no stream error and the expected token count."""
        rec = self.rec
        if self.error:
            rec.error = self.error
        elif rec.ttft_ms is None:
            rec.error = "stream ended without a token (no event carried a choice)"
        else:
            rec.e2e_ms = (self.last - self.start) / 1e6
            # Servers that omit usage: one token per chunk but chat's role chunk (exact without
            # speculative decoding).
            fallback = rec.chunks - self.role_chunks
            rec.output_tokens = int(self.usage_tokens if self.usage_tokens is not None else fallback)
            if expected_tokens is not None and rec.output_tokens != expected_tokens:
                rec.error = f"expected {expected_tokens} output tokens, got {rec.output_tokens}"
            else:
                rec.success = True
        if rec.e2e_ms is None and rec.ttft_ms is not None:
            rec.e2e_ms = (self.last - self.start) / 1e6
        if not rec.success and self.usage_tokens is not None:
            rec.output_tokens = int(self.usage_tokens)
        return rec


async def send(session: aiohttp.ClientSession, cfg: ClientConfig, spec: RequestSpec, request_id: int) -> RequestRecord:
    """Send one streaming request through aiohttp and time it. Never raises for request-level failures."""
    start = time.perf_counter_ns()  # before the request is built, as vllm bench serve starts its clock
    rec = RequestRecord(request_id=request_id, prompt_tokens=spec.prompt_tokens, start_ns=start)
    url = cfg.base_url.rstrip("/") + ENDPOINTS[cfg.endpoint]
    timer = _SseTimer(rec, start)
    try:
        async with session.post(
            url,
            json=_payload(cfg, spec),
            headers=_headers(cfg, request_id),
            timeout=aiohttp.ClientTimeout(total=cfg.request_timeout_s),
            ssl=cfg.verify_tls,
        ) as resp:
            rec.http_status = resp.status
            if resp.status != 200:
                body = (await resp.text())[:300]
                rec.error = f"HTTP {resp.status}: {body}"
                return rec
            async for data in resp.content.iter_any():
                timer.feed(data, time.perf_counter_ns())
    except asyncio.TimeoutError:
        timer.error = f"timeout after {cfg.request_timeout_s:g}s"
    except (aiohttp.ClientPayloadError, aiohttp.ServerDisconnectedError) as e:
        timer.error = f"ConnectionError: connection lost mid-response ({e})"[:300]
    except (aiohttp.ClientError, OSError) as e:
        timer.error = f"{type(e).__name__}: {e}"[:300]
    return timer.finish(spec.max_tokens if cfg.ignore_eos else None)


def make_session(concurrency: int) -> aiohttp.ClientSession:
    # One connection per in-flight request: aiohttp's default cap of 100 would queue requests above it
    # inside the client and inflate TTFT.
    conn = aiohttp.TCPConnector(
        limit=max(1, concurrency), limit_per_host=max(1, concurrency), force_close=False, enable_cleanup_closed=True
    )
    return aiohttp.ClientSession(connector=conn, timeout=aiohttp.ClientTimeout(total=None))


class _HttpProtocol(asyncio.BufferedProtocol):
    """One keep-alive HTTP/1.1 connection carrying one streaming request at a time.

    Buffered: asyncio's plain protocols allocate a 256 KiB buffer for every read (mmap-sized, so each
    read maps and unmaps memory); reading into one reused buffer is markedly cheaper per SSE event.
    """

    def __init__(self) -> None:
        self.transport: asyncio.Transport | None = None
        self._view = memoryview(bytearray(64 * 1024))
        self.closed = False
        self._reset(None, None)

    def _reset(self, timer: _SseTimer | None, done: asyncio.Future[None] | None) -> None:
        self.timer = timer
        self.done = done
        self.head = b""
        self.status = 0
        self.mode = "head"  # head -> chunked | length | close -> end
        self.remaining = 0
        self.chunk_buf = b""
        self.body = b""  # non-200 bodies, kept for the error message
        self.keep_alive = True

    def begin(self, request: bytes, timer: _SseTimer, done: asyncio.Future[None]) -> None:
        self._reset(timer, done)
        assert self.transport is not None
        self.transport.write(request)

    def connection_made(self, transport: asyncio.BaseTransport) -> None:
        self.transport = transport  # type: ignore[assignment]

    def connection_lost(self, exc: Exception | None) -> None:
        self.closed = True
        if self.done is not None and not self.done.done():
            if self.mode == "close":
                self.done.set_result(None)
            else:
                why = exc or "closed by peer"
                self.done.set_exception(ConnectionError(f"connection lost mid-response ({why})"))

    def get_buffer(self, sizehint: int) -> memoryview:
        return self._view

    def buffer_updated(self, nbytes: int) -> None:
        self.data_received(self._view[:nbytes].tobytes())

    def data_received(self, data: bytes) -> None:
        now = time.perf_counter_ns()
        if self.done is None or self.done.done():
            return
        if self.mode == "head":
            self.head += data
            end = self.head.find(b"\r\n\r\n")
            if end < 0:
                return
            data = self.head[end + 4 :]
            self._headers(self.head[:end])
        if self.mode == "chunked":
            self._chunked(data, now)
        elif self.mode == "length":
            data = data[: self.remaining]
            self.remaining -= len(data)
            self._body(data, now)
            if self.remaining <= 0:
                self._end()
        elif self.mode == "close":
            self._body(data, now)

    def _headers(self, raw: bytes) -> None:
        lines = raw.decode("latin-1").split("\r\n")
        parts = lines[0].split(" ", 2)
        self.status = int(parts[1]) if len(parts) > 1 and parts[1].isdigit() else 0
        headers = {}
        for line in lines[1:]:
            k, _, v = line.partition(":")
            headers[k.strip().lower()] = v.strip().lower()
        self.keep_alive = headers.get("connection") != "close" and parts[0] != "HTTP/1.0"
        if "chunked" in headers.get("transfer-encoding", ""):
            self.mode = "chunked"
        elif "content-length" in headers:
            self.mode, self.remaining = "length", int(headers["content-length"])
            if self.remaining == 0:
                self._end()
        else:
            self.mode, self.keep_alive = "close", False

    def _body(self, data: bytes, now: int) -> None:
        if not data:
            return
        if self.status == 200:
            self.timer.feed(data, now)  # type: ignore[union-attr]
        elif len(self.body) < 1000:
            self.body += data

    def _chunked(self, data: bytes, now: int) -> None:
        # Transfer-encoding framing: "<hex size>\r\n<data>\r\n" ... "0\r\n\r\n". Only whole chunks are
        # passed on: servers write one SSE event per chunk, and an event is not complete before its
        # chunk is, so nothing is timed later than it could be.
        buf = self.chunk_buf + data if self.chunk_buf else data
        pos, n = 0, len(buf)
        out: list[bytes] = []
        while True:
            eol = buf.find(b"\r\n", pos)
            if eol < 0:
                break
            size = int(buf[pos:eol].split(b";", 1)[0] or b"0", 16)
            if size == 0:  # last chunk (trailers, if any, are ignored)
                self.chunk_buf = b""
                if out:
                    self._body(b"".join(out), now)
                self._end()
                return
            end = eol + 2 + size
            if end + 2 > n:
                break
            out.append(buf[eol + 2 : end])
            pos = end + 2
        self.chunk_buf = buf[pos:] if pos < n else b""
        if out:
            self._body(out[0] if len(out) == 1 else b"".join(out), now)

    def _end(self) -> None:
        self.mode = "end"
        if not self.keep_alive and self.transport is not None:
            self.transport.close()
        if self.done is not None and not self.done.done():
            self.done.set_result(None)


class _FastClient:
    """Requests over raw keep-alive connections, one connection per concurrent request slot."""

    def __init__(self, cfg: ClientConfig) -> None:
        u = urlsplit(cfg.base_url)
        if u.scheme != "http":
            raise ValueError(f"the fast client speaks plain http only, not {u.scheme!r}")
        self.cfg = cfg
        self.host = u.hostname or "127.0.0.1"
        self.port = u.port or 80
        self.path = u.path.rstrip("/") + ENDPOINTS[cfg.endpoint]
        self.idle: list[_HttpProtocol] = []

    async def _conn(self) -> _HttpProtocol:
        while self.idle:
            c = self.idle.pop()
            if not c.closed and c.keep_alive:
                return c
        loop = asyncio.get_running_loop()
        _, proto = await loop.create_connection(_HttpProtocol, self.host, self.port)
        return proto

    def _request(self, spec: RequestSpec, request_id: int) -> bytes:
        body = json.dumps(_payload(self.cfg, spec)).encode()
        extra = "".join(f"{k}: {v}\r\n" for k, v in _headers(self.cfg, request_id).items())
        head = (
            f"POST {self.path} HTTP/1.1\r\nHost: {self.host}:{self.port}\r\n"
            f"Content-Type: application/json\r\nAccept: text/event-stream\r\n{extra}"
            f"Content-Length: {len(body)}\r\n\r\n"
        ).encode()
        return head + body

    async def send(self, spec: RequestSpec, request_id: int) -> RequestRecord:
        cfg = self.cfg
        start = time.perf_counter_ns()  # before the request is built, as vllm bench serve starts its clock
        rec = RequestRecord(request_id=request_id, prompt_tokens=spec.prompt_tokens, start_ns=start)
        request = self._request(spec, request_id)
        timer = _SseTimer(rec, start)
        conn: _HttpProtocol | None = None
        try:
            async with asyncio.timeout(cfg.request_timeout_s) if hasattr(asyncio, "timeout") else nullcontext():
                conn = await self._conn()
                done: asyncio.Future[None] = asyncio.get_running_loop().create_future()
                rec.sent_ns = time.perf_counter_ns()
                conn.begin(request, timer, done)
                await done
            rec.http_status = conn.status
            if conn.status != 200:
                timer.error = f"HTTP {conn.status}: {conn.body.decode(errors='replace')[:300]}"
        except (asyncio.TimeoutError, TimeoutError):
            timer.error = f"timeout after {cfg.request_timeout_s:g}s"
        except (OSError, ConnectionError, ValueError) as e:
            timer.error = f"{type(e).__name__}: {e}"[:300]
        if conn is not None:
            if conn.mode == "end" and not conn.closed and conn.keep_alive:
                self.idle.append(conn)
            elif conn.transport is not None:
                conn.transport.close()
        return timer.finish(spec.max_tokens if cfg.ignore_eos else None)

    def close(self) -> None:
        for c in self.idle:
            if c.transport is not None:
                c.transport.close()
        self.idle.clear()


Sender = Callable[[RequestSpec, int], Any]


class _Client:
    """The fast client for http, aiohttp for anything else; same records either way."""

    def __init__(self, cfg: ClientConfig, concurrency: int) -> None:
        self.cfg = cfg
        self.concurrency = concurrency
        self.fast = _FastClient(cfg) if urlsplit(cfg.base_url).scheme == "http" and cfg.fast else None
        self.session: aiohttp.ClientSession | None = None

    async def __aenter__(self) -> _Client:
        if self.fast is None:
            self.session = make_session(self.concurrency)
        return self

    async def __aexit__(self, *exc: object) -> None:
        if self.fast is not None:
            self.fast.close()
        if self.session is not None:
            await self.session.close()

    async def send(self, spec: RequestSpec, request_id: int) -> RequestRecord:
        """One request's record; :class:`Refused` when the server refuses the client (401/403)."""
        if self.fast is not None:
            rec = await self.fast.send(spec, request_id)
        else:
            assert self.session is not None
            rec = await send(self.session, self.cfg, spec, request_id)
        if rec.http_status in REFUSED_STATUSES:
            detail = (rec.error or "").split(": ", 1)[-1]
            raise Refused(rec.http_status, detail, self.cfg.base_url.rstrip("/") + ENDPOINTS[self.cfg.endpoint])
        return rec


@dataclass
class RunResult:
    records: list[RequestRecord]
    t0_ns: int
    warmup: int
    wall_s: float
    processes: int = 1

    def rows(self) -> list[dict[str, Any]]:
        return [r.row(self.t0_ns) for r in self.records]


Progress = Callable[[RequestRecord], None]


def _result(records: list[RequestRecord], t0: int, warmup: int, wall: float, processes: int = 1) -> RunResult:
    records.sort(key=lambda r: r.request_id)
    first = min((r.start_ns for r in records), default=t0)
    return RunResult(records=records, t0_ns=first, warmup=warmup, wall_s=wall, processes=processes)


async def closed_loop(
    cfg: ClientConfig,
    specs: Sequence[RequestSpec],
    concurrency: int,
    warmup: Sequence[RequestSpec] = (),
    on_done: Progress | None = None,
    duration_s: float | None = None,
    ids: Sequence[int] | None = None,
    start_at_ns: int | None = None,
    id_stride: int | None = None,
) -> RunResult:
    """Exactly ``concurrency`` requests in flight until ``specs`` is used up.

    With ``duration_s``, requests cycle through ``specs`` until that many seconds have passed since the
    first start; requests in flight at the deadline run to completion and are recorded.
    """
    if concurrency < 1:
        raise ValueError("concurrency must be >= 1")
    if not specs:
        return RunResult([], time.perf_counter_ns(), 0, 0.0)
    ids = list(ids) if ids is not None else list(range(len(specs)))
    stride = id_stride or len(specs)  # ids of the k-th pass through specs: id + k * stride, never reused
    async with _Client(cfg, concurrency) as client:
        if warmup:
            await asyncio.gather(*(client.send(s, -1 - i) for i, s in enumerate(warmup)))
        if start_at_ns is not None:
            await asyncio.sleep(max(0.0, (start_at_ns - time.perf_counter_ns()) / 1e9))
        records: list[RequestRecord] = []
        counter = iter(range(10**12))
        n = len(specs)
        t0 = time.perf_counter_ns()
        deadline = t0 + int(duration_s * 1e9) if duration_s else None

        async def worker() -> None:
            while True:
                k = next(counter)
                if deadline is None:
                    if k >= n:
                        return
                elif time.perf_counter_ns() >= deadline:
                    return
                i = ids[k % n] + (k // n) * stride
                rec = await client.send(specs[k % n], i)
                records.append(rec)
                if on_done:
                    on_done(rec)

        width = concurrency if deadline is not None else min(concurrency, n)
        await asyncio.gather(*(worker() for _ in range(width)))
        wall = (time.perf_counter_ns() - t0) / 1e9
    return _result(records, t0, len(warmup), wall)


class _Stop:
    """Set once a watched task has ended with an exception (:class:`Refused`): an open loop then stops
    starting arrivals, and gathering its tasks raises it."""

    def __init__(self) -> None:
        self._set = False

    def is_set(self) -> bool:
        return self._set

    def watch(self, task: asyncio.Task[None]) -> asyncio.Task[None]:
        task.add_done_callback(self._done)
        return task

    def _done(self, task: asyncio.Task[None]) -> None:
        if not task.cancelled() and task.exception() is not None:
            self._set = True


async def _dispatch(
    session: Callable[[int, int | None], Any], n: int, width: int, arrivals_s: Sequence[float] | None, t0: int
) -> None:
    """Run sessions 0..n-1: ``width`` workers taking the next one (closed loop), or each at its arrival."""
    if arrivals_s is None:
        order = iter(range(n))

        async def worker() -> None:
            for i in order:
                await session(i, None)

        await asyncio.gather(*(worker() for _ in range(min(width, n))))
        return
    tasks = []
    refused = _Stop()
    for i, at in enumerate(arrivals_s):
        due = t0 + int(at * 1e9)
        delay = (due - time.perf_counter_ns()) / 1e9
        if delay > 0:
            await asyncio.sleep(delay)
        if refused.is_set():  # a refused request ends the level at once: no more arrivals
            break
        tasks.append(refused.watch(asyncio.create_task(session(i, due))))
    await asyncio.gather(*tasks)


async def sessions_loop(
    cfg: ClientConfig,
    sessions: Sequence[Sequence[RequestSpec]],
    concurrency: int | None = None,
    arrivals_s: Sequence[float] | None = None,
    think_time_s: float = 0.0,
    warmup: Sequence[RequestSpec] = (),
    on_done: Progress | None = None,
    max_concurrency: int | None = None,
) -> RunResult:
    """Sessions of requests sent one after the other (a conversation's turns), ``think_time_s`` apart.

    Closed loop (``concurrency``): that many sessions in flight; a worker runs a session's requests in
    order, then takes the next session. Open loop (``arrivals_s``, one offset in seconds per session):
    session i starts ``arrivals_s[i]`` after the level's start, however many are in flight (at most
    ``max_concurrency`` requests when set: the others wait, and the wait counts as their queueing
    delay). Open-loop records carry ``scheduled_ns``: the session's arrival for its first request, the
    previous request's end plus the think time for the others; ``start_s`` counts from the first
    arrival. Request ids number the requests session by session.
    """
    if (concurrency is None) == (arrivals_s is None):
        raise ValueError("give either concurrency (closed loop) or arrivals_s (open loop)")
    if concurrency is not None and concurrency < 1:
        raise ValueError("concurrency must be >= 1")
    if arrivals_s is not None and len(arrivals_s) != len(sessions):
        raise ValueError(f"{len(arrivals_s)} arrivals for {len(sessions)} sessions")
    first_id, n = [], 0
    for s in sessions:
        first_id.append(n)
        n += len(s)
    records: list[RequestRecord] = []
    width = concurrency or max_concurrency or max(1, n)
    async with _Client(cfg, width) as client:
        if warmup:
            await asyncio.gather(*(client.send(s, -1 - i) for i, s in enumerate(warmup)))
        sem = asyncio.Semaphore(max_concurrency) if max_concurrency and arrivals_s is not None else None

        async def session(i: int, due: int | None) -> None:
            for turn, spec in enumerate(sessions[i]):
                if turn and think_time_s > 0:
                    await asyncio.sleep(think_time_s)
                if due is not None and turn:
                    due = time.perf_counter_ns()
                async with sem if sem is not None else nullcontext():
                    rec = await client.send(spec, first_id[i] + turn)
                rec.scheduled_ns = due
                records.append(rec)
                if on_done:
                    on_done(rec)

        t0 = time.perf_counter_ns()
        await _dispatch(session, len(sessions), width, arrivals_s, t0)
        wall = (time.perf_counter_ns() - t0) / 1e9
    records.sort(key=lambda r: r.request_id)
    if arrivals_s is None:
        return _result(records, t0, len(warmup), wall)
    return RunResult(records=records, t0_ns=t0, warmup=len(warmup), wall_s=wall)


def arrival_gaps(n: int, rate_per_s: float, burstiness: float = 1.0, seed: int = 0) -> list[float]:
    """Inter-arrival gaps in seconds: gamma(shape=burstiness, mean 1/rate); burstiness 1 = Poisson."""
    if rate_per_s <= 0 or burstiness <= 0:
        raise ValueError("rate and burstiness must be > 0")
    rng = random.Random(seed)
    theta = 1.0 / (rate_per_s * burstiness)
    return [rng.gammavariate(burstiness, theta) for _ in range(n)]


async def open_loop(
    cfg: ClientConfig,
    specs: Sequence[RequestSpec],
    rate_per_s: float,
    burstiness: float = 1.0,
    seed: int = 0,
    max_concurrency: int | None = None,
    warmup: Sequence[RequestSpec] = (),
    on_done: Progress | None = None,
    duration_s: float | None = None,
) -> RunResult:
    """Start requests at a target rate (Poisson or gamma arrivals), independent of completions.

    With ``duration_s``, arrivals stop at the deadline (cycling through ``specs`` if needed).
    """
    n_max = len(specs) if duration_s is None else max(len(specs), int(rate_per_s * duration_s * 2) + 16)
    gaps = arrival_gaps(n_max, rate_per_s, burstiness, seed)
    limit = max_concurrency or n_max or 1
    async with _Client(cfg, limit) as client:
        if warmup:
            await asyncio.gather(*(client.send(s, -1 - i) for i, s in enumerate(warmup)))
        sem = asyncio.Semaphore(limit)
        records: list[RequestRecord] = []

        async def one(i: int, s: RequestSpec) -> None:
            async with sem:
                rec = await client.send(s, i)
            records.append(rec)
            if on_done:
                on_done(rec)

        t0 = time.perf_counter_ns()
        deadline = t0 + int(duration_s * 1e9) if duration_s else None
        tasks = []
        refused = _Stop()
        next_at = time.perf_counter()
        for i, gap in enumerate(gaps):
            delay = next_at - time.perf_counter()
            if delay > 0:
                await asyncio.sleep(delay)
            if (deadline is not None and time.perf_counter_ns() >= deadline) or refused.is_set():
                break
            tasks.append(refused.watch(asyncio.create_task(one(i, specs[i % len(specs)]))))
            next_at += gap
        await asyncio.gather(*tasks)
        wall = (time.perf_counter_ns() - t0) / 1e9
    return _result(records, t0, len(warmup), wall)


def _worker(
    cfg: ClientConfig,
    specs: list[RequestSpec],
    ids: list[int],
    concurrency: int,
    warmup: list[RequestSpec],
    duration_s: float | None,
    ready: Any,
    go: Any,
    start_at: Any,
    id_stride: int,
) -> list[RequestRecord]:
    async def main() -> RunResult:
        ready.put(1)
        go.wait()
        return await closed_loop(
            cfg,
            specs,
            concurrency,
            warmup=warmup,
            duration_s=duration_s,
            ids=ids,
            start_at_ns=start_at.value,
            id_stride=id_stride,
        )

    return asyncio.run(main()).records


def run(
    cfg: ClientConfig,
    specs: Sequence[RequestSpec],
    concurrency: int,
    processes: int = 1,
    warmup: Sequence[RequestSpec] = (),
    duration_s: float | None = None,
    on_done: Progress | None = None,
) -> RunResult:
    """A closed-loop level, in this process or spread over ``processes`` worker processes.

    Workers get every ``processes``-th request and a share of the concurrency, warm up, then start at
    the same instant; their records are merged. ``on_done`` is only called in-process. Workers are
    spawned, so a script calling this with ``processes`` > 1 needs the ``if __name__ == "__main__"`` guard.
    """
    processes = max(1, min(processes, concurrency, max(1, len(specs))))
    if processes == 1:
        return asyncio.run(closed_loop(cfg, specs, concurrency, warmup=warmup, on_done=on_done, duration_s=duration_s))
    from concurrent.futures import ProcessPoolExecutor

    ctx = mp.get_context("spawn")
    manager = ctx.Manager()
    ready, go = manager.Queue(), manager.Event()
    start_at = manager.Value("q", 0)
    shares = [concurrency // processes + (1 if w < concurrency % processes else 0) for w in range(processes)]
    t0 = time.perf_counter_ns()
    with manager, ProcessPoolExecutor(processes, mp_context=ctx) as pool:
        futs = [
            pool.submit(
                _worker,
                cfg,
                list(specs[w::processes]),
                list(range(len(specs)))[w::processes],
                shares[w],
                list(warmup[w::processes]),
                duration_s,
                ready,
                go,
                start_at,
                len(specs),
            )
            for w in range(processes)
        ]
        for _ in range(processes):
            ready.get()
        # Start together, after every worker's warm-up: a little ahead, so all are waiting.
        start_at.value = time.perf_counter_ns() + int(0.5e9) + int(2e9 if warmup else 0)
        begin = start_at.value
        go.set()
        records = [r for f in futs for r in f.result()]
    wall = (time.perf_counter_ns() - begin) / 1e9
    return _result(records, t0, len(warmup), wall, processes)

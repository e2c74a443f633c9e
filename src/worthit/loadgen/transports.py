"""How a request reaches the server: a small HTTP/1.1 client of its own for ``http://``, aiohttp for the rest.

For ``http://`` URLs requests go over a small HTTP/1.1 client built on ``asyncio.Protocol`` (one keep-alive
connection per in-flight request, so the pool is always the concurrency): the response is parsed in
``data_received``, timestamped there, without a coroutine wake-up per network read. That is several times
cheaper per streamed token than aiohttp's reader, which matters on a small CPU where the client shares cores
with the server it measures. ``https://`` URLs (and ``ClientConfig.fast`` off) go through aiohttp with the
same SSE parser (:mod:`worthit.loadgen.sse`), TLS verification on unless ``verify_tls`` is off. Every request
carries the server's API key (``Authorization: Bearer``) and any other headers a gateway wants
(``ClientConfig.api_key``, ``headers``). :class:`Client` picks the transport and turns a refusal (HTTP
401/403) into :class:`~worthit.loadgen.records.Refused`. Which requests are sent when is
:mod:`worthit.loadgen.scheduling`'s business.
"""

from __future__ import annotations

import asyncio
import json
import time
from contextlib import nullcontext
from dataclasses import dataclass, field
from typing import Any
from urllib.parse import urlsplit

import aiohttp

from worthit import secrets
from worthit.loadgen.records import REFUSED_STATUSES, Refused, RequestRecord, RequestSpec
from worthit.loadgen.sse import SseTimer

ENDPOINTS = {"completions": "/v1/completions", "chat": "/v1/chat/completions"}


@dataclass(frozen=True)
class ClientConfig:
    """Where requests go and what each carries besides its prompt: the model, the endpoint, sampling, headers."""

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
    """A request's headers: the key, the gateway's own, and its X-Request-Id where asked for."""
    out = secrets.auth_headers(cfg.api_key, cfg.headers)
    if cfg.request_id_prefix is not None:
        out["X-Request-Id"] = f"{cfg.request_id_prefix}{request_id}"
    return out


def _payload(cfg: ClientConfig, spec: RequestSpec) -> dict[str, Any]:
    """A request's JSON body: a streamed completion (or chat) with usage, and the config's extra body."""
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


async def send(session: aiohttp.ClientSession, cfg: ClientConfig, spec: RequestSpec, request_id: int) -> RequestRecord:
    """Send one streaming request through aiohttp and time it. Never raises for request-level failures."""
    start = time.perf_counter_ns()  # before the request is built, as vllm bench serve starts its clock
    rec = RequestRecord(request_id=request_id, prompt_tokens=spec.prompt_tokens, start_ns=start)
    url = cfg.base_url.rstrip("/") + ENDPOINTS[cfg.endpoint]
    timer = SseTimer(rec, start)
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
    """An aiohttp session for :func:`send` with one connection per in-flight request."""
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

    def _reset(self, timer: SseTimer | None, done: asyncio.Future[None] | None) -> None:
        self.timer = timer
        self.done = done
        self.head = b""
        self.status = 0
        self.mode = "head"  # head -> chunked | length | close -> end
        self.remaining = 0
        self.chunk_buf = b""
        self.body = b""  # non-200 bodies, kept for the error message
        self.keep_alive = True

    def begin(self, request: bytes, timer: SseTimer, done: asyncio.Future[None]) -> None:
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
        timer = SseTimer(rec, start)
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


class Client:
    """The fast client for http, aiohttp for anything else; same records either way."""

    def __init__(self, cfg: ClientConfig, concurrency: int) -> None:
        self.cfg = cfg
        self.concurrency = concurrency
        self.fast = _FastClient(cfg) if urlsplit(cfg.base_url).scheme == "http" and cfg.fast else None
        self.session: aiohttp.ClientSession | None = None

    async def __aenter__(self) -> Client:
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

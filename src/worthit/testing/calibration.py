"""A synthetic OpenAI-compatible SSE server with deterministic timing, to measure the load generator.

It exists only to calibrate ``worthit.loadgen`` (and ``vllm bench serve``) against a server whose true
TTFT and inter-chunk latency are known; it is never a stand-in for vLLM in stage tests.

Timing: chunk ``j`` of a request is due at ``arrival + ttft + j * itl`` (an absolute schedule, so a late
chunk never delays the next one). One scheduler per process writes every due chunk of every stream
straight to its transport (chunked transfer framing), instead of one sleeping coroutine per stream: at
256 streams x 200 chunks/s that is the difference between keeping up and falling behind. asyncio's timers
round up to whole milliseconds (epoll), so the scheduler waits on the loop until ~1 ms before the next
due chunk and sleeps the rest with ``time.sleep`` (microseconds, no spinning: the client under test
needs the CPU).

Chunks look like vLLM's: completions send one ``text`` chunk per token chunk; chat sends a role-only
chunk (``"content":""``) in the same write as the first token chunk, as vLLM does. With ``empty_share``
that share of the token chunks carry empty text, as vLLM sends them when a token ends inside a
multi-byte character (the first chunk of every ``1 / empty_share`` is the empty one, so the first chunk
of a stream is empty whenever the share is above 0).

What the server actually did is recorded per request: when its bytes were read, the time of every write,
its ``X-Request-Id`` header. ``GET /stats`` summarises it (``?prefix=`` keeps the ids that start so),
``GET /stats/requests`` lists it, and with ``--record-dir`` SIGUSR1 makes every worker process write its
records to ``<dir>/<pid>.json`` and forget them: a client's per-request error is its measurement minus
the server's own record of that request (benchmarks/loadgen_fidelity).

Per-request behaviour can be overridden with a ``calibration`` object in the request body (used by the
tests): ``ttft_ms``, ``itl_ms``, ``tokens_per_chunk``, ``empty_share``, ``usage`` (``"final"``: usage-only
final chunk as vLLM sends it, ``"none"``: no usage), ``fail`` (``"http500"``, ``"stream_error"``: an error
event mid-stream, ``"truncate"``: the connection is cut mid-stream, ``"no_content"``: a stream without any
chunk that carries a choice).

Run: ``python -m worthit.testing.calibration --port 8123 --ttft-ms 50 --itl-ms 5 [--workers 2]``.
"""

from __future__ import annotations

import argparse
import asyncio
import heapq
import itertools
import json
import math
import multiprocessing as mp
import os
import signal
import socket
import tempfile
import time
from collections.abc import Sequence
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import Any

from aiohttp import web, web_protocol, web_server

USAGES = ("final", "none")
FAILURES = ("http500", "stream_error", "truncate", "no_content")
SPIN_S = 0.0012  # asyncio timers fire up to 1 ms late; sleep precisely for the last stretch
BATCH_S = 0.00005  # chunks due within this window of now are written in the same pass (not spun for)


@dataclass(frozen=True)
class Timing:
    """What the server does for one request."""

    ttft_ms: float = 50.0
    itl_ms: float = 5.0
    tokens_per_chunk: int = 1
    empty_share: float = 0.0  # share of token chunks with empty text (multi-byte output)
    usage: str = "final"
    fail: str | None = None

    def __post_init__(self) -> None:
        if not 0.0 <= self.empty_share <= 1.0:
            raise ValueError(f"calibration: empty_share {self.empty_share!r} not in [0, 1]")
        if self.usage not in USAGES:
            raise ValueError(f"calibration: usage {self.usage!r} not in {list(USAGES)}")
        if self.fail is not None and self.fail not in FAILURES:
            raise ValueError(f"calibration: fail {self.fail!r} not in {list(FAILURES)}")

    def empty(self, j: int) -> bool:
        """Whether token chunk ``j`` (from 0) carries empty text: ceil(m * share) of the first m do."""
        s = self.empty_share
        return math.ceil((j + 1) * s - 1e-9) > math.ceil(j * s - 1e-9)

    def chunks(self, output_tokens: int) -> list[int]:
        """Tokens carried by each token chunk."""
        k = max(1, self.tokens_per_chunk)
        full, rest = divmod(max(0, output_tokens), k)
        return [k] * full + ([rest] if rest else [])

    def true_ttft_ms(self) -> float:
        return self.ttft_ms

    def true_tpot_ms(self, output_tokens: int) -> float | None:
        """(E2E - TTFT) / (tokens - 1) as a perfect client would measure it."""
        n_chunks = len(self.chunks(output_tokens))
        if output_tokens < 2:
            return None
        return (n_chunks - 1) * self.itl_ms / (output_tokens - 1)

    def override(self, body: dict[str, Any]) -> Timing:
        extra = body.get("calibration") or {}
        allowed = {f for f in self.__dataclass_fields__}
        unknown = set(extra) - allowed
        if unknown:
            raise ValueError(f"calibration: unknown keys {sorted(unknown)}; allowed: {sorted(allowed)}")
        return replace(self, **extra) if extra else self


@dataclass(eq=False)
class _Stream:
    transport: asyncio.Transport
    frames: list[bytes]  # fully framed HTTP chunks, one per scheduled write
    times: list[float]  # perf_counter due time of each frame
    done: asyncio.Future[None]
    arrival: float
    next: int = 0
    writes: list[float] = field(default_factory=list)  # perf_counter just before each frame's write
    max_late_s: float = 0.0


@dataclass(frozen=True)
class Record:
    """What the server did for one completed request (perf_counter seconds, the system's monotonic clock)."""

    request_id: str | None  # the X-Request-Id header
    arrival_s: float  # its bytes were read
    writes_s: list[float]  # just before each frame's write (frame j carries token chunk j)
    tokens: int
    max_late_s: float

    @property
    def ttft_ms(self) -> float:
        return (self.writes_s[0] - self.arrival_s) * 1e3

    @property
    def tpot_ms(self) -> float | None:
        if self.tokens < 2:
            return None
        return (self.writes_s[-1] - self.writes_s[0]) * 1e3 / (self.tokens - 1)

    def json(self) -> dict[str, Any]:
        return {
            "id": self.request_id,
            "arrival_s": self.arrival_s,
            "writes_s": self.writes_s,
            "tokens": self.tokens,
            "max_late_ms": self.max_late_s * 1e3,
        }


class _StampedHandler(web_protocol.RequestHandler):
    """aiohttp's connection handler, noting when request bytes were read off the socket.

    A request's schedule starts there, not when its handler runs: in a burst (a closed loop's wave of
    256 requests) the handlers run one after another, and without this the last one's TTFT would carry
    the others' parsing time, which is the server's lateness, not the client's error.
    """

    __slots__ = ("rx_time",)

    def data_received(self, data: bytes) -> None:
        self.rx_time = time.perf_counter()
        super().data_received(data)


def _stamp_arrivals() -> None:
    # Only in the calibration server's own process; a version of aiohttp without this hook just
    # falls back to the handler's start time.
    if hasattr(web_server, "RequestHandler"):
        web_server.RequestHandler = _StampedHandler


def _frame(payload: bytes) -> bytes:
    return b"%x\r\n%s\r\n" % (len(payload), payload)


def _event(obj: dict[str, Any]) -> bytes:
    return b"data: " + json.dumps(obj, separators=(",", ":")).encode() + b"\n\n"


def _chunk(rid: str, model: str, chat: bool, text: str, *, finish: str | None, role: bool = False) -> dict[str, Any]:
    """One streamed chunk as vLLM writes it."""
    if chat:
        choice: dict[str, Any] = {
            "index": 0,
            "delta": {"role": "assistant", "content": text} if role else {"content": text},
            "logprobs": None,
            "finish_reason": finish,
        }
        return {"id": rid, "object": "chat.completion.chunk", "created": 0, "model": model, "choices": [choice]}
    return {
        "id": rid,
        "object": "text_completion",
        "created": 0,
        "model": model,
        "choices": [{"index": 0, "text": text, "logprobs": None, "finish_reason": finish, "stop_reason": None}],
    }


def _token_frames(timing: Timing, sizes: list[int], rid: str, model: str, *, chat: bool) -> list[bytes]:
    """One framed write per token chunk; chat's role-only chunk goes out with the first, as vLLM does.

    Built in microseconds: in a closed loop's burst this runs once per request before the next request's
    bytes are read, so its cost would count as the next request's delay.
    """
    role = _frame(_event(_chunk(rid, model, chat, "", finish=None, role=True))) if chat else b""
    cache: dict[tuple[int, bool, bool, bool], bytes] = {}  # chunks repeat: encode and frame each kind once
    last = len(sizes) - 1

    def frame(j: int) -> bytes:
        key = (sizes[j], j == last, timing.empty(j), j == 0 and chat)
        f = cache.get(key)
        if f is None:
            text = "" if key[2] else " tok" * key[0]
            data = _frame(_event(_chunk(rid, model, chat, text, finish="length" if key[1] else None)))
            f = cache[key] = role + data if key[3] else data
        return f

    if last >= 2 and not timing.empty_share:  # first, identical middle chunks, last
        return [frame(0), *([frame(1)] * (last - 1)), frame(last)]
    return [frame(j) for j in range(len(sizes))]


class Scheduler:
    """Writes every stream's due chunks; one per process."""

    def __init__(self) -> None:
        self.heap: list[tuple[float, int, _Stream]] = []  # (due time, tie-breaker, stream)
        self.seq = itertools.count()
        self.waiter: asyncio.Future[None] | None = None
        self.records: list[Record] = []

    def add(self, s: _Stream) -> None:
        heapq.heappush(self.heap, (s.times[0], next(self.seq), s))
        if self.waiter is not None and not self.waiter.done():
            self.waiter.set_result(None)

    async def run(self) -> None:
        loop = asyncio.get_running_loop()
        clock = time.perf_counter
        heap = self.heap

        def wake(fut: asyncio.Future[None]) -> None:
            if not fut.done():
                fut.set_result(None)

        while True:
            now = clock()
            wait = heap[0][0] - now if heap else None
            if wait is None or wait > SPIN_S:
                # Sleep until shortly before the next chunk is due, or until a new stream arrives.
                self.waiter = fut = loop.create_future()
                timer = loop.call_later(wait - SPIN_S, wake, fut) if wait is not None else None
                await fut
                self.waiter = None
                if timer is not None:
                    timer.cancel()
                continue
            if wait > BATCH_S:  # the last stretch: timers are millisecond-coarse, time.sleep is not
                time.sleep(wait)
                now = clock()
            horizon = now + BATCH_S
            pop, push, seq = heapq.heappop, heapq.heappush, self.seq
            while heap and heap[0][0] <= horizon:
                s = pop(heap)[2]
                if s.transport.is_closing():
                    if not s.done.done():
                        s.done.set_result(None)
                    continue
                t = clock()  # before the write: a chunk cannot be read earlier than this
                s.transport.write(s.frames[s.next])
                s.max_late_s = max(s.max_late_s, t - s.times[s.next])
                s.writes.append(t)
                s.next += 1
                if s.next < len(s.frames):
                    push(heap, (s.times[s.next], next(seq), s))
                elif not s.done.done():
                    s.done.set_result(None)
            # Let the loop read sockets and accept new requests between passes.
            await asyncio.sleep(0)


@web.middleware
async def _guard_v1(request: web.Request, handler: Any) -> web.StreamResponse:
    """As vLLM guards its API with VLLM_API_KEY (vllm/entrypoints/serve/middleware/authenticate.py): /v1 paths
    answer 401 without ``Authorization: Bearer <key>``; /health and /metrics are open."""
    if (
        request.path.startswith("/v1")
        and request.headers.get("Authorization") != f"Bearer {os.environ['VLLM_API_KEY']}"
    ):
        return web.json_response({"error": "Unauthorized"}, status=401)
    response: web.StreamResponse = await handler(request)
    return response


class CalibrationServer:
    def __init__(
        self, timing: Timing, model: str = "calibration", record_dir: str | None = None, started: Any = None
    ) -> None:
        self.timing = timing
        self.model = model
        self.record_dir = record_dir
        self.started = started  # (shared counter, workers): healthy once every worker has started
        self.sched: Scheduler | None = None
        self.ids = itertools.count()

    def app(self) -> web.Application:
        app = web.Application(middlewares=[_guard_v1] if os.environ.get("VLLM_API_KEY") else [])
        app.router.add_post("/v1/completions", self.handle)
        app.router.add_post("/v1/chat/completions", self.handle)
        app.router.add_get("/health", self.health)
        app.router.add_get("/v1/models", self.models)
        app.router.add_get("/stats", self.stats)
        app.router.add_get("/stats/requests", self.stats_requests)
        app.router.add_post("/stats/reset", self.reset)
        app.router.add_get("/metrics", self.metrics)
        app.on_startup.append(self._start)
        return app

    async def _start(self, app: web.Application) -> None:
        self.sched = Scheduler()
        loop = asyncio.get_running_loop()
        app["scheduler_task"] = loop.create_task(self.sched.run())
        if self.record_dir is not None:
            loop.add_signal_handler(signal.SIGUSR1, self.dump)
        if self.started is not None:
            with self.started[0].get_lock():
                self.started[0].value += 1

    def dump(self) -> None:
        """Write this process's records to ``<record_dir>/<pid>.json`` (atomically) and forget them."""
        assert self.sched is not None and self.record_dir is not None
        recs, self.sched.records = self.sched.records, []
        data = json.dumps({"pid": os.getpid(), "requests": [r.json() for r in recs]})
        out = Path(self.record_dir) / f"{os.getpid()}.json"
        with tempfile.NamedTemporaryFile("w", dir=self.record_dir, suffix=".tmp", delete=False) as f:
            f.write(data)
        os.replace(f.name, out)

    async def health(self, request: web.Request) -> web.Response:
        if self.started is not None and self.started[0].value < self.started[1]:
            return web.Response(status=503, text="workers starting")
        return web.Response(text="ok")

    async def models(self, request: web.Request) -> web.Response:
        return web.json_response({"object": "list", "data": [{"id": self.model, "object": "model"}]})

    async def metrics(self, request: web.Request) -> web.Response:
        n = len(self.sched.records) if self.sched else 0
        return web.Response(text=f"# calibration server\ncalibration:requests_total {n}\n")

    async def reset(self, request: web.Request) -> web.Response:
        assert self.sched is not None
        self.sched.records.clear()
        return web.json_response({"ok": True, "pid": os.getpid()})

    def _records(self, request: web.Request) -> list[Record]:
        assert self.sched is not None
        prefix = request.query.get("prefix")
        recs = self.sched.records
        return recs if prefix is None else [r for r in recs if (r.request_id or "").startswith(prefix)]

    async def stats_requests(self, request: web.Request) -> web.Response:
        """This process's record of every completed request (``?prefix=``: ids that start so)."""
        return web.json_response({"pid": os.getpid(), "requests": [r.json() for r in self._records(request)]})

    async def stats(self, request: web.Request) -> web.Response:
        """What this process actually did: TTFT, TPOT and lateness per request, summarised."""
        recs = self._records(request)
        ttft = sorted(r.ttft_ms for r in recs)
        tpot = sorted(t for r in recs if (t := r.tpot_ms) is not None)
        late = sorted(r.max_late_s * 1e3 for r in recs)

        def pct(v: Sequence[float], q: float) -> float | None:
            if not v:
                return None
            k = (len(v) - 1) * q / 100
            lo, hi = math.floor(k), math.ceil(k)
            return v[lo] + (v[hi] - v[lo]) * (k - lo)

        return web.json_response(
            {
                "pid": os.getpid(),
                "n": len(recs),
                "ttft_ms": {"p50": pct(ttft, 50), "p99": pct(ttft, 99)},
                "tpot_ms": {"p50": pct(tpot, 50), "p99": pct(tpot, 99)},
                "max_late_ms": {"p50": pct(late, 50), "p99": pct(late, 99), "max": late[-1] if late else None},
            }
        )

    async def handle(self, request: web.Request) -> web.StreamResponse:
        arrival = min(getattr(request.protocol, "rx_time", None) or time.perf_counter(), time.perf_counter())
        assert self.sched is not None
        try:
            body = await request.json()
            timing = self.timing.override(body)
            n = int(body.get("max_tokens") or 16)
        except (ValueError, TypeError) as e:
            return web.json_response({"error": {"message": str(e), "type": "BadRequestError"}}, status=400)
        if timing.fail == "http500":
            return web.json_response({"error": {"message": "calibration: injected failure"}}, status=500)
        chat = request.path.endswith("/chat/completions")
        prompt = body.get("prompt") if not chat else body.get("messages")
        prompt_tokens = (
            len(prompt)
            if isinstance(prompt, list) and prompt and isinstance(prompt[0], int)
            else len(json.dumps(prompt).split())
        )
        include_usage = bool((body.get("stream_options") or {}).get("include_usage"))
        rid = f"cmpl-{os.getpid()}-{next(self.ids)}"
        request_id = request.headers.get("X-Request-Id")

        resp = web.StreamResponse(headers={"Content-Type": "text/event-stream", "Cache-Control": "no-cache"})
        await resp.prepare(request)
        writer = resp._payload_writer  # headers go out now, not with the first chunk (as uvicorn does)
        if writer is not None and hasattr(writer, "send_headers"):
            writer.send_headers()
        transport = request.transport
        assert transport is not None

        sizes = [] if timing.fail == "no_content" else timing.chunks(n)
        t_first = arrival + timing.ttft_ms / 1e3
        frames = _token_frames(timing, sizes, rid, self.model, chat=chat)
        itl_s = timing.itl_ms / 1e3
        times = [t_first + j * itl_s for j in range(len(sizes))]
        tail = b""
        if timing.fail == "stream_error":
            tail += _event({"error": {"message": "calibration: injected error", "code": 500}})
        elif include_usage and timing.usage == "final":
            tail += _event(
                {
                    "id": rid,
                    "object": "chat.completion.chunk" if chat else "text_completion",
                    "created": 0,
                    "model": self.model,
                    "choices": [],
                    "usage": {
                        "prompt_tokens": prompt_tokens,
                        "completion_tokens": n,
                        "total_tokens": prompt_tokens + n,
                    },
                }
            )
        tail += b"data: [DONE]\n\n"
        if timing.fail == "truncate":
            # Cut the connection halfway through the content.
            frames = frames[: max(1, len(frames) // 2)]
            times = times[: len(frames)]
        elif frames:
            frames[-1] = frames[-1] + _frame(tail)  # the usage chunk and [DONE] go out with the last token
        else:
            frames, times = [_frame(tail)], [t_first]
        stream = _Stream(transport, frames, times, asyncio.get_running_loop().create_future(), arrival)
        self.sched.add(stream)
        await stream.done
        if timing.fail == "truncate":
            transport.close()
            return resp
        if sizes and len(stream.writes) == len(frames):
            self.sched.records.append(Record(request_id, arrival, stream.writes, n, stream.max_late_s))
        await resp.write_eof()
        return resp


def _serve(
    host: str,
    port: int,
    timing: Timing,
    model: str,
    *,
    reuse_port: bool,
    sock: socket.socket | None = None,
    record_dir: str | None = None,
    started: Any = None,
) -> None:
    server = CalibrationServer(timing, model, record_dir, started)
    _stamp_arrivals()
    web.run_app(
        server.app(),
        host=None if sock else host,
        port=None if sock else port,
        sock=sock,
        reuse_port=reuse_port if not sock else None,
        print=None,
        access_log=None,
        handle_signals=True,
    )


def serve(
    host: str,
    port: int,
    timing: Timing,
    model: str = "calibration",
    *,
    workers: int = 1,
    record_dir: str | None = None,
) -> None:
    """Serve in the foreground; with ``workers`` > 1, that many processes share the port (SO_REUSEPORT).

    With ``record_dir``, SIGUSR1 to this process makes every worker write its records there.
    """
    if workers <= 1:
        _serve(host, port, timing, model, reuse_port=False, record_dir=record_dir)
        return
    ctx = mp.get_context("spawn")
    # Workers inherit "ignore" until their own handler is installed; this process passes SIGUSR1 on.
    signal.signal(signal.SIGUSR1, signal.SIG_IGN)
    started = (ctx.Value("i", 0), workers)  # /health answers 503 until every worker runs
    procs = [
        ctx.Process(
            target=_serve,
            args=(host, port, timing, model),
            kwargs={"reuse_port": True, "record_dir": record_dir, "started": started},
            daemon=True,
        )
        for _ in range(workers)
    ]
    for p in procs:
        p.start()

    def stop(*_: object) -> None:
        for p in procs:
            if p.is_alive():
                p.terminate()

    def forward(*_: object) -> None:
        for p in procs:
            if p.is_alive() and p.pid is not None:
                os.kill(p.pid, signal.SIGUSR1)

    signal.signal(signal.SIGTERM, stop)
    signal.signal(signal.SIGINT, stop)
    signal.signal(signal.SIGUSR1, forward)
    for p in procs:
        p.join()


def main(argv: Sequence[str] | None = None) -> None:
    ap = argparse.ArgumentParser(
        prog="python -m worthit.testing.calibration",
        description=__doc__,
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    ap.add_argument("--host", default="127.0.0.1")
    ap.add_argument("--port", type=int, default=8123)
    ap.add_argument("--ttft-ms", type=float, default=50.0)
    ap.add_argument("--itl-ms", type=float, default=5.0, help="interval between token chunks")
    ap.add_argument("--tokens-per-chunk", type=int, default=1)
    ap.add_argument(
        "--empty-share", type=float, default=0.0, help="share of token chunks with empty text (multi-byte output)"
    )
    ap.add_argument("--usage", choices=USAGES, default="final")
    ap.add_argument("--model", default="calibration")
    ap.add_argument("--workers", type=int, default=1, help="processes sharing the port via SO_REUSEPORT")
    ap.add_argument("--record-dir", help="on SIGUSR1 every worker writes its per-request records here")
    a = ap.parse_args(argv)
    if not 0.0 <= a.empty_share <= 1.0:
        ap.error(f"--empty-share {a.empty_share} not in [0, 1]")
    timing = Timing(a.ttft_ms, a.itl_ms, a.tokens_per_chunk, a.empty_share, a.usage)
    serve(a.host, a.port, timing, a.model, workers=a.workers, record_dir=a.record_dir)


if __name__ == "__main__":
    main()

"""When requests start: the closed and open loops a load level runs, in this process or over worker processes.

Closed loop (:func:`closed_loop`): exactly ``concurrency`` requests in flight until the request list is used
up. Open loop (:func:`open_loop`): requests start at Poisson (or gamma, with burstiness) intervals at a target
rate, however many are in flight. Sessions (:func:`sessions_loop`): a conversation's turns sent one after the
other, with either loop starting the sessions. When one process cannot keep up, :func:`run` spreads a closed
loop's clients over worker processes and merges their records (``perf_counter_ns`` is the system-wide
monotonic clock, so times compare). Every loop sends its warm-up first and then calls ``after_warmup``
(when given) before the first measured request: a level reads the server's counters there, so its deltas
count the measured requests only. A request the server refuses (HTTP 401/403) ends the level at once with
:class:`~worthit.loadgen.records.Refused`. How each request travels is :mod:`worthit.loadgen.transports`'.
"""

from __future__ import annotations

import asyncio
import multiprocessing as mp
import queue
import random
import time
from collections.abc import Callable, Sequence
from concurrent.futures import Future
from contextlib import nullcontext
from typing import Any

from worthit.loadgen.records import Progress, RequestRecord, RequestSpec, RunResult
from worthit.loadgen.transports import Client, ClientConfig


def _result(records: list[RequestRecord], t0: int, *, warmup: int, wall: float, processes: int = 1) -> RunResult:
    """The run's records by request id, its clock starting at the first request's start."""
    records.sort(key=lambda r: r.request_id)
    first = min((r.start_ns for r in records), default=t0)
    return RunResult(records=records, t0_ns=first, warmup=warmup, wall_s=wall, processes=processes)


async def closed_loop(
    cfg: ClientConfig,
    specs: Sequence[RequestSpec],
    concurrency: int,
    *,
    warmup: Sequence[RequestSpec] = (),
    on_done: Progress | None = None,
    duration_s: float | None = None,
    ids: Sequence[int] | None = None,
    start_at_ns: int | None = None,
    id_stride: int | None = None,
    after_warmup: Callable[[], object] | None = None,
) -> RunResult:
    """Exactly ``concurrency`` requests in flight until ``specs`` is used up.

    With ``duration_s``, requests cycle through ``specs`` until that many seconds have passed since the
    first start; requests in flight at the deadline run to completion and are recorded. ``after_warmup``
    runs (in a thread) once the warm-up has ended, before the first measured request.
    """
    if concurrency < 1:
        raise ValueError("concurrency must be >= 1")
    if not specs:
        if after_warmup is not None:
            after_warmup()
        return RunResult([], time.perf_counter_ns(), 0, 0.0)
    ids = list(ids) if ids is not None else list(range(len(specs)))
    stride = id_stride or len(specs)  # ids of the k-th pass through specs: id + k * stride, never reused
    async with Client(cfg, concurrency) as client:
        if warmup:
            await asyncio.gather(*(client.send(s, -1 - i) for i, s in enumerate(warmup)))
        if after_warmup is not None:
            await asyncio.to_thread(after_warmup)
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
    return _result(records, t0, warmup=len(warmup), wall=wall)


class _Stop:
    """Set once a watched task has ended with an exception (:class:`~worthit.loadgen.records.Refused`): an open
    loop then stops starting arrivals, and gathering its tasks raises it."""

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
    session: Callable[[int, int | None], Any], n: int, *, width: int, arrivals_s: Sequence[float] | None, t0: int
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
    *,
    concurrency: int | None = None,
    arrivals_s: Sequence[float] | None = None,
    think_time_s: float = 0.0,
    warmup: Sequence[RequestSpec] = (),
    on_done: Progress | None = None,
    max_concurrency: int | None = None,
    after_warmup: Callable[[], object] | None = None,
) -> RunResult:
    """Sessions of requests sent one after the other (a conversation's turns), ``think_time_s`` apart.

    Closed loop (``concurrency``): that many sessions in flight; a worker runs a session's requests in
    order, then takes the next session. Open loop (``arrivals_s``, one offset in seconds per session):
    session i starts ``arrivals_s[i]`` after the level's start, however many are in flight (at most
    ``max_concurrency`` requests when set: the others wait, and the wait counts as their queueing
    delay). Open-loop records carry ``scheduled_ns``: the session's arrival for its first request, the
    previous request's end plus the think time for the others; ``start_s`` counts from the first
    arrival. Request ids number the requests session by session. ``after_warmup`` runs (in a thread) once
    the warm-up has ended, before the first session starts.
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
    async with Client(cfg, width) as client:
        if warmup:
            await asyncio.gather(*(client.send(s, -1 - i) for i, s in enumerate(warmup)))
        if after_warmup is not None:
            await asyncio.to_thread(after_warmup)
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
        await _dispatch(session, len(sessions), width=width, arrivals_s=arrivals_s, t0=t0)
        wall = (time.perf_counter_ns() - t0) / 1e9
    records.sort(key=lambda r: r.request_id)
    if arrivals_s is None:
        return _result(records, t0, warmup=len(warmup), wall=wall)
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
    *,
    burstiness: float = 1.0,
    seed: int = 0,
    max_concurrency: int | None = None,
    warmup: Sequence[RequestSpec] = (),
    on_done: Progress | None = None,
    duration_s: float | None = None,
    after_warmup: Callable[[], object] | None = None,
) -> RunResult:
    """Start requests at a target rate (Poisson or gamma arrivals), independent of completions.

    With ``duration_s``, arrivals stop at the deadline (cycling through ``specs`` if needed).
    ``after_warmup`` runs (in a thread) once the warm-up has ended, before the first arrival.
    """
    n_max = len(specs) if duration_s is None else max(len(specs), int(rate_per_s * duration_s * 2) + 16)
    gaps = arrival_gaps(n_max, rate_per_s, burstiness, seed)
    limit = max_concurrency or n_max or 1
    async with Client(cfg, limit) as client:
        if warmup:
            await asyncio.gather(*(client.send(s, -1 - i) for i, s in enumerate(warmup)))
        if after_warmup is not None:
            await asyncio.to_thread(after_warmup)
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
    return _result(records, t0, warmup=len(warmup), wall=wall)


def _worker(
    *,
    cfg: ClientConfig,
    specs: list[RequestSpec],
    ids: list[int],
    concurrency: int,
    warmup: list[RequestSpec],
    duration_s: float | None,
    ready: Any,
    go: Any,
    warmed: Any,
    measure: Any,
    start_at: Any,
    id_stride: int,
) -> list[RequestRecord]:
    """One worker process of :func:`run`: report that it started, wait for the go, warm up, report that, wait
    for the go to measure, then run its share of the level from the common start instant."""

    def measured_start() -> None:
        warmed.put(1)
        measure.wait()
        if start_at.value < 0:
            raise RuntimeError("the level was abandoned before it was measured")
        time.sleep(max(0.0, (start_at.value - time.perf_counter_ns()) / 1e9))

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
            id_stride=id_stride,
            after_warmup=measured_start,
        )

    return asyncio.run(main()).records


def _wait_for(q: Any, n: int, futs: Sequence[Future[list[RequestRecord]]]) -> None:
    """Take ``n`` reports off ``q``; a worker that ended before reporting raises its exception here."""
    got = 0
    while got < n:
        try:
            q.get(timeout=0.5)
            got += 1
        except queue.Empty:
            ended = [f for f in futs if f.done()]
            if ended:
                ended[0].result()  # raises the worker's exception
                raise RuntimeError("a load worker ended before its warm-up did") from None


def run(
    cfg: ClientConfig,
    specs: Sequence[RequestSpec],
    concurrency: int,
    *,
    processes: int = 1,
    warmup: Sequence[RequestSpec] = (),
    duration_s: float | None = None,
    on_done: Progress | None = None,
    after_warmup: Callable[[], object] | None = None,
) -> RunResult:
    """A closed-loop level, in this process or spread over ``processes`` worker processes.

    Workers get every ``processes``-th request and a share of the concurrency, warm up, then start at
    the same instant; their records are merged. ``after_warmup`` runs here once every worker's warm-up has
    ended, before any measured request. ``on_done`` is only called in-process. Workers are spawned, so a
    script calling this with ``processes`` > 1 needs the ``if __name__ == "__main__"`` guard.
    """
    processes = max(1, min(processes, concurrency, max(1, len(specs))))
    if processes == 1:
        loop = closed_loop(
            cfg, specs, concurrency, warmup=warmup, on_done=on_done, duration_s=duration_s, after_warmup=after_warmup
        )
        return asyncio.run(loop)
    from concurrent.futures import ProcessPoolExecutor

    ctx = mp.get_context("spawn")
    manager = ctx.Manager()
    ready, go, warmed, measure = manager.Queue(), manager.Event(), manager.Queue(), manager.Event()
    start_at = manager.Value("q", 0)
    shares = [concurrency // processes + (1 if w < concurrency % processes else 0) for w in range(processes)]
    t0 = time.perf_counter_ns()
    with manager, ProcessPoolExecutor(processes, mp_context=ctx) as pool:
        futs = [
            pool.submit(
                _worker,
                cfg=cfg,
                specs=list(specs[w::processes]),
                ids=list(range(len(specs)))[w::processes],
                concurrency=shares[w],
                warmup=list(warmup[w::processes]),
                duration_s=duration_s,
                ready=ready,
                go=go,
                warmed=warmed,
                measure=measure,
                start_at=start_at,
                id_stride=len(specs),
            )
            for w in range(processes)
        ]
        for _ in range(processes):
            ready.get()
        go.set()
        try:
            _wait_for(warmed, processes, futs)
            if after_warmup is not None:
                after_warmup()
            # Start together, after every worker's warm-up: a little ahead, so all are waiting.
            start_at.value = time.perf_counter_ns() + int(0.5e9)
        except BaseException:
            start_at.value = -1  # the workers give up instead of measuring
            raise
        finally:
            measure.set()
        begin = start_at.value
        records = [r for f in futs for r in f.result()]
    wall = (time.perf_counter_ns() - begin) / 1e9
    return _result(records, t0, warmup=len(warmup), wall=wall, processes=processes)

"""Load levels: what one load-test job measures, the name of its result file, and whether an open-loop
rate was delivered.

Three kinds of level:

* closed loop at a concurrency, ``load/conc~16`` (``loadtest.levels``): exactly that many requests (or
  conversations) in flight;
* open loop at a request rate, ``load/rate~2.5`` (``loadtest.rates``): requests (or conversations) start
  at Poisson or gamma arrival times, however many are in flight;
* the replay of a trace in time, ``load/<trace>/replay``: each request starts at the trace's offset.

The levels of ``loadtest.levels`` and ``loadtest.rates`` use the variant's workload (``variants.<v>.workload``,
else ``loadtest.workload``, else the fixed-length random prompts) and keep these plain names. A level of
``loadtest.workload_levels`` names its own workload and lives in a folder named after it:
``load/chat/conc~4``, ``load/chat/rate~2``, ``load/prod/replay``. Run r > 1 of a level
(``loadtest.repeats``) adds ``.rep~r``.

Open-loop arrivals are drawn from a gamma distribution (shape = burstiness; 1 is Poisson) and then
scaled so that the level's mean inter-arrival gap is exactly 1 / rate: the rate offered is the rate
named, whatever the sample. :func:`delivery` then checks what the client achieved against it.
Standard library only (the config module imports this one).
"""

from __future__ import annotations

import math
import random
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any

CONC, RATE, REPLAY = "conc", "rate", "replay"
KINDS = (CONC, RATE, REPLAY)


def rate_str(rate_per_s: float) -> str:
    """A rate as it appears in a file name: 2.5 -> '2.5', 4.0 -> '4', 0.125 -> '0.125' (no exponent)."""
    if not rate_per_s > 0 or math.isinf(rate_per_s):
        raise ValueError(f"a request rate must be a positive number, not {rate_per_s!r}")
    s = f"{rate_per_s:.6f}".rstrip("0").rstrip(".")
    if s in ("", "0"):
        raise ValueError(f"request rate {rate_per_s!r} is below 0.000001/s")
    return s


@dataclass(frozen=True)
class LoadLevel:
    """One load level: its kind, its concurrency or rate, and the workload it names (None: the variant's)."""

    kind: str
    value: float | None = None  # concurrency (conc) or requests per second (rate); None for replay
    workload: str | None = None

    def __post_init__(self) -> None:
        if self.kind not in KINDS:
            raise ValueError(f"level kind {self.kind!r} not in {KINDS}")
        if self.kind == REPLAY and self.workload is None:
            raise ValueError("a replay level names its trace workload")
        if self.kind != REPLAY and (self.value is None or self.value <= 0):
            raise ValueError(f"a {self.kind} level needs a positive value, not {self.value!r}")
        if self.kind == CONC and self.value is not None and self.value != int(self.value):
            raise ValueError(f"a concurrency is a whole number, not {self.value!r}")

    @property
    def concurrency(self) -> int | None:
        return int(self.value) if self.kind == CONC and self.value is not None else None

    @property
    def rate_per_s(self) -> float | None:
        return float(self.value) if self.kind == RATE and self.value is not None else None

    @property
    def open_loop(self) -> bool:
        return self.kind != CONC

    @property
    def name(self) -> str:
        """Below ``load/``: conc~16, rate~2.5, chat/conc~4, prod/replay."""
        if self.kind == CONC:
            base = f"conc~{self.concurrency}"
        elif self.kind == RATE:
            base = f"rate~{rate_str(float(self.value or 0))}"
        else:
            base = "replay"
        return f"{self.workload}/{base}" if self.workload else base

    def path(self, run: int = 1) -> str:
        """The run's result below the variant folder, without .parquet: load/conc~16, load/rate~2.rep~2."""
        return f"load/{self.name}" + (f".rep~{run}" if run > 1 else "")

    def timeline_path(self, run: int = 1) -> str:
        """The run's server timeline (loadtest.timeline_interval_s) beside it: load/conc~16.timeline."""
        return self.path(run) + ".timeline"

    def describe(self) -> dict[str, Any]:
        """The level as file metadata records it."""
        return {
            "level": self.name,
            "level_kind": self.kind,
            "concurrency": self.concurrency if self.kind == CONC else 0,
            "request_rate_per_s": self.rate_per_s,
            "level_workload": self.workload,
        }


def parse_level(name: str) -> LoadLevel:
    """The inverse of :attr:`LoadLevel.name`: 'conc~4', 'rate~2.5', 'chat/conc~4', 'prod/replay'."""
    workload, _, base = name.rpartition("/")
    wl = workload or None
    if base == "replay":
        return LoadLevel(REPLAY, None, wl)
    kind, sep, value = base.partition("~")
    if not sep or kind not in (CONC, RATE):
        raise ValueError(f"{name!r} is not a load level (conc~C, rate~R, or <workload>/replay)")
    try:
        return LoadLevel(kind, int(value) if kind == CONC else float(value), wl)
    except ValueError as e:
        raise ValueError(f"{name!r} is not a load level: {e}") from None


def rate_arrivals(n: int, rate_per_s: float, burstiness: float = 1.0, seed: int = 0) -> list[float]:
    """Start offsets in seconds of ``n`` open-loop arrivals at ``rate_per_s``.

    Gaps are gamma(shape = burstiness, mean 1 / rate) draws (burstiness 1: Poisson arrivals; below 1
    burstier, above 1 more regular), then scaled so their mean is exactly 1 / rate: n arrivals span
    (n - 1) / rate seconds. The first arrival is at 0.
    """
    if rate_per_s <= 0 or burstiness <= 0:
        raise ValueError("rate and burstiness must be > 0")
    if n <= 0:
        return []
    rng = random.Random(seed)
    theta = 1.0 / (rate_per_s * burstiness)
    gaps = [rng.gammavariate(burstiness, theta) for _ in range(n - 1)]
    total = sum(gaps)
    scale = ((n - 1) / rate_per_s) / total if total > 0 else 1.0
    out, t = [0.0], 0.0
    for g in gaps:
        t += g * scale
        out.append(t)
    return out


@dataclass(frozen=True)
class Delivery:
    """How well an open-loop level delivered its schedule."""

    target_rate_per_s: float | None  # the rate the schedule offered ((n - 1) / its span); None: a single arrival
    achieved_rate_per_s: float | None  # (n - 1) / (last start - first start) of the scheduled starts
    n: int  # scheduled starts (requests, or conversations' first turns)
    queue_delay_ms_p50: float | None
    queue_delay_ms_p99: float | None
    queue_delay_ms_max: float | None
    delivered: bool
    reason: str | None  # why it was not delivered

    def metadata(self) -> dict[str, Any]:
        return {
            "target_rate_per_s": self.target_rate_per_s,
            "achieved_rate_per_s": self.achieved_rate_per_s,
            "scheduled_starts": self.n,
            "queue_delay_ms_p50": self.queue_delay_ms_p50,
            "queue_delay_ms_p99": self.queue_delay_ms_p99,
            "queue_delay_ms_max": self.queue_delay_ms_max,
            "rate_delivered": self.delivered,
            "rate_reason": self.reason,
        }


SUMMARY_COLUMNS = (
    "level",
    "workload",
    "request_rate_per_s",
    "achieved_rate_per_s",
    "queue_delay_ms_p50",
    "queue_delay_ms_p99",
    "rate_delivered",
)


def summary_columns(metadata: Mapping[str, Any]) -> dict[str, Any]:
    """A load file's level and open-loop delivery as the summary table shows them; nothing for the plain
    concurrency levels of the fixed-length prompts (their metadata names no level: their rows stay as
    they were)."""
    if not metadata.get("level"):
        return {}
    return {
        "level": metadata.get("level"),
        "workload": metadata.get("workload_name"),
        **{k: metadata.get(k) for k in SUMMARY_COLUMNS[2:]},
    }


def _quantile(values: Sequence[float], q: float) -> float | None:
    vals = sorted(values)
    if not vals:
        return None
    pos = (len(vals) - 1) * q
    lo, hi = math.floor(pos), math.ceil(pos)
    return vals[lo] + (vals[hi] - vals[lo]) * (pos - lo)


def delivery(
    scheduled_s: Sequence[float],
    start_s: Sequence[float],
    rate_tolerance: float = 0.05,
    max_queue_delay_ms: float = 100.0,
) -> Delivery:
    """Compare an open-loop schedule with the starts the client achieved (pairs of one arrival each).

    The level is *not delivered* when the achieved rate is off the scheduled one by more than
    ``rate_tolerance`` (a fraction), or when the 99th percentile of the client's queueing delay (start -
    scheduled start) exceeds ``max_queue_delay_ms``: the server was then offered less than the level
    names, and its latencies belong to a lower rate.
    """
    if len(scheduled_s) != len(start_s):
        raise ValueError(f"{len(scheduled_s)} scheduled starts but {len(start_s)} starts")
    n = len(scheduled_s)
    delays = [(s - d) * 1e3 for d, s in zip(scheduled_s, start_s, strict=True)]
    p50, p99 = _quantile(delays, 0.5), _quantile(delays, 0.99)
    worst = max(delays) if delays else None

    def rate(times: Sequence[float]) -> float | None:
        span = max(times) - min(times) if n > 1 else 0.0
        return (n - 1) / span if span > 0 else None

    target, achieved = rate(scheduled_s), rate(start_s)
    reasons = []
    if target is not None and achieved is not None and abs(achieved / target - 1) > rate_tolerance:
        reasons.append(
            f"achieved {achieved:.3g} requests/s of the {target:.3g}/s scheduled "
            f"(off by {abs(achieved / target - 1):.1%}, tolerance {rate_tolerance:.0%})"
        )
    if p99 is not None and p99 > max_queue_delay_ms:
        reasons.append(f"client queueing delay P99 {p99:.1f} ms > {max_queue_delay_ms:g} ms")
    return Delivery(
        target_rate_per_s=target,
        achieved_rate_per_s=achieved,
        n=n,
        queue_delay_ms_p50=p50,
        queue_delay_ms_p99=p99,
        queue_delay_ms_max=worst,
        delivered=not reasons,
        reason="; ".join(reasons) or None,
    )

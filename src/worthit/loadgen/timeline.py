"""The server's timeline during a load level (its ``/metrics`` sampled at a fixed interval) and the check of
the KV-derived critical concurrency against it.

:class:`Scraper` runs in a background thread of the load-test process: it GETs ``/metrics`` on a fixed
grid of ``interval_s`` (a slow answer does not shift the later samples) and keeps the raw text. The text
is parsed only after the level (:func:`timeline_rows`), so the client's event loop shares the
interpreter with nothing heavier than a socket read while it times requests.

:func:`summarize` reduces one level's rows (the ``server_timeline`` table) to its peak KV usage, queue
and the preemptions during the measured requests; :func:`critical_check` sets those, level by level,
against the critical concurrency the KV capacity predicts (KV tokens / tokens per request): below it a
level should neither fill the cache nor preempt, above it it should.
"""

from __future__ import annotations

import math
import threading
import time
import urllib.error
import urllib.request
from collections.abc import Mapping, Sequence
from dataclasses import asdict, dataclass
from typing import Any

from worthit import prom, secrets
from worthit.prom import parse_metrics

# timeline column -> vLLM metric (summed over its label sets: engines)
SUMMED = {
    "requests_running": prom.REQUESTS_RUNNING,
    "requests_waiting": prom.REQUESTS_WAITING,
    "preemptions_total": prom.PREEMPTIONS,
    "prefix_cache_queries_total": prom.PREFIX_CACHE_QUERIES,
    "prefix_cache_hits_total": prom.PREFIX_CACHE_HITS,
    "prompt_tokens_total": prom.PROMPT_TOKENS,
    "generation_tokens_total": prom.GENERATION_TOKENS,
    "spec_decode_drafts_total": prom.SPEC_DRAFTS,
    "spec_decode_draft_tokens_total": prom.SPEC_DRAFT_TOKENS,
    "spec_decode_accepted_tokens_total": prom.SPEC_ACCEPTED_TOKENS,
}
# KV usage is a share per engine: the fullest engine's is the one that preempts
KV_USAGE_COLUMN = "kv_cache_usage_frac"


@dataclass(frozen=True)
class Sample:
    """One scrape: when it was sent and answered (perf_counter_ns), the text, or why it failed."""

    sent_ns: int
    done_ns: int
    text: str | None
    error: str | None = None


class Scraper:
    """Scrape ``<url>/metrics`` every ``interval_s`` in a daemon thread between :meth:`start` and :meth:`stop`."""

    def __init__(self, url: str, interval_s: float, timeout_s: float = 10.0, api_key: str | None = None) -> None:
        if not interval_s > 0:
            raise ValueError(f"interval_s must be > 0, not {interval_s!r}")
        self.url = url.rstrip("/") + "/metrics"
        self.headers = secrets.auth_headers(api_key)
        self.interval_s, self.timeout_s = interval_s, timeout_s
        self.samples: list[Sample] = []
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._run, name="metrics-timeline", daemon=True)

    def _scrape(self) -> Sample:
        sent = time.perf_counter_ns()
        try:
            req = urllib.request.Request(self.url, headers=self.headers)
            with urllib.request.urlopen(req, timeout=self.timeout_s) as resp:  # noqa: S310 - the server's own
                text = resp.read().decode(errors="replace")
            return Sample(sent, time.perf_counter_ns(), text)
        except (urllib.error.URLError, OSError, TimeoutError) as e:
            return Sample(sent, time.perf_counter_ns(), None, f"{type(e).__name__}: {e}"[:300])

    def _run(self) -> None:
        start = time.perf_counter()
        k = 0
        while not self._stop.is_set():
            self.samples.append(self._scrape())
            k += 1
            # the next grid point still ahead (a scrape slower than the interval skips the ones it overran)
            k = max(k, math.ceil((time.perf_counter() - start) / self.interval_s))
            self._stop.wait(max(0.0, start + k * self.interval_s - time.perf_counter()))

    def start(self) -> Scraper:
        self._thread.start()
        return self

    def stop(self) -> list[Sample]:
        """Stop, take one last sample (the state after the level), and return every sample."""
        self._stop.set()
        self._thread.join()
        self.samples.append(self._scrape())
        return self.samples


def parse_sample(text: str) -> dict[str, float | None]:
    """One /metrics text -> the timeline's metric columns (None where the server has no such metric)."""
    parsed = parse_metrics(text)
    row: dict[str, float | None] = {}
    for col, name in SUMMED.items():
        row[col] = sum(v for _, v in parsed[name]) if name in parsed else None
    usage = parsed.get(prom.KV_CACHE_USAGE)
    row[KV_USAGE_COLUMN] = max(v for _, v in usage) if usage else None
    return row


def timeline_rows(
    samples: Sequence[Sample], t0_ns: int, end_s: float | None, variant: str, *, level: str, run: int = 1
) -> list[dict[str, Any]]:
    """``server_timeline`` rows: times on the requests' clock (``t0_ns`` is their start_s 0), phases by
    the first measured request (t = 0) and the last one's end (``end_s``)."""
    rows = []
    for s in samples:
        t = ((s.sent_ns + s.done_ns) / 2 - t0_ns) / 1e9
        phase = "warmup" if t < 0 else ("after" if end_s is not None and t > end_s else "measure")
        row: dict[str, Any] = {
            "variant": variant,
            "level": level,
            "run": run,
            "t_s": t,
            "phase": phase,
            "scrape_ms": (s.done_ns - s.sent_ns) / 1e6,
            "error": s.error,
        }
        if s.text is not None:
            try:
                row.update(parse_sample(s.text))
            except ValueError as e:  # prometheus_client's parser on a malformed text
                row["error"] = f"unparsable /metrics: {e}"[:300]
        rows.append(row)
    return rows


@dataclass(frozen=True)
class TimelineSummary:
    """One level's timeline over its measured requests."""

    samples: int  # answered scrapes in the measured window
    kv_cache_usage_frac_max: float | None
    kv_cache_usage_frac_mean: float | None
    requests_running_max: float | None
    requests_waiting_max: float | None
    preemptions: (
        float | None
    )  # preemptions between the last scrape before the first request and the first after the last

    def row(self) -> dict[str, Any]:
        return asdict(self)


def _vals(rows: Sequence[Mapping[str, Any]], col: str) -> list[float]:
    return [float(r[col]) for r in rows if r.get(col) is not None and not math.isnan(float(r[col]))]


def summarize(rows: Sequence[Mapping[str, Any]]) -> TimelineSummary:
    """A level's ``server_timeline`` rows -> its :class:`TimelineSummary` (the measured window only)."""
    ok = sorted((r for r in rows if not r.get("error")), key=lambda r: float(r["t_s"]))
    measured = [r for r in ok if r.get("phase") == "measure"]
    # the preemption counter from just before the window to just after it: nothing in between is missed
    before = [r for r in ok if r.get("phase") == "warmup"][-1:] or measured[:1]
    after = [r for r in ok if r.get("phase") == "after"][:1] or measured[-1:]
    span = _vals([*before, *after], "preemptions_total")
    usage = _vals(measured, KV_USAGE_COLUMN)
    running, waiting = _vals(measured, "requests_running"), _vals(measured, "requests_waiting")
    return TimelineSummary(
        samples=len(measured),
        kv_cache_usage_frac_max=max(usage) if usage else None,
        kv_cache_usage_frac_mean=sum(usage) / len(usage) if usage else None,
        requests_running_max=max(running) if running else None,
        requests_waiting_max=max(waiting) if waiting else None,
        preemptions=span[-1] - span[0] if len(span) == 2 else None,
    )


@dataclass(frozen=True)
class LevelCheck:
    concurrency: int
    kv_cache_usage_frac_max: float | None
    preemptions: float | None
    requests_waiting_max: float | None
    saturated: bool | None  # KV usage reached the ceiling or the server preempted; None without samples
    expected_saturated: bool | None  # concurrency above the critical concurrency; None without one
    agrees: bool | None


@dataclass(frozen=True)
class CriticalCheck:
    """The KV-derived critical concurrency set against the levels where the cache filled and preempted."""

    critical_concurrency: float | None
    ceiling_frac: float
    levels: tuple[LevelCheck, ...]
    last_clear: int | None  # highest concurrency below first_saturated that neither filled nor preempted
    first_saturated: int | None  # lowest concurrency whose KV usage reached the ceiling, or that preempted
    first_preempted: int | None  # lowest concurrency with preemptions
    verdict: str  # consistent / saturates_below_prediction / holds_above_prediction / not_reached / no_timeline
    preemptions_seen: bool  # any level preempted: its latencies include recomputed requests
    message: str

    def rows(self) -> list[dict[str, Any]]:
        """One row per level (for a table or a plot), the check's findings repeated on each."""
        head = {
            "critical_concurrency": self.critical_concurrency,
            "ceiling_frac": self.ceiling_frac,
            "last_clear": self.last_clear,
            "first_saturated": self.first_saturated,
            "first_preempted": self.first_preempted,
            "verdict": self.verdict,
            "preemptions_seen": self.preemptions_seen,
        }
        return [{**asdict(lv), **head} for lv in self.levels]


VERDICTS = ("consistent", "saturates_below_prediction", "holds_above_prediction", "not_reached", "no_timeline")


def critical_check(
    critical_concurrency: float | None, levels: Mapping[int, TimelineSummary], ceiling_frac: float = 0.98
) -> CriticalCheck:
    """Check the KV-derived critical concurrency against closed-loop levels' timelines (concurrency -> summary).

    A level is *saturated* when its KV usage reached ``ceiling_frac`` or the server preempted during it.
    The prediction holds (``consistent``) when every level at or below the critical concurrency is clear and
    the first saturated level is above it; ``saturates_below_prediction`` when a level at or below it
    saturated (longer sequences than the prediction assumed, or blocks lost to fragmentation);
    ``holds_above_prediction`` when a level above it stayed clear (shared prefix blocks, requests that
    never all peak together); ``not_reached`` when no level went above it and none saturated.
    ``preemptions_seen`` flags any preemption: those levels' latencies include recomputation.

    For a workload other than the fixed-length prompts, take the critical concurrency as KV tokens / the
    mean of prompt_tokens + output_tokens over the level's requests.
    """
    checks = []
    for c in sorted(levels):
        s = levels[c]
        if s.samples == 0:
            sat = None
        else:
            full = s.kv_cache_usage_frac_max is not None and s.kv_cache_usage_frac_max >= ceiling_frac
            sat = full or bool(s.preemptions and s.preemptions > 0)
        exp = None if critical_concurrency is None else c > critical_concurrency
        checks.append(
            LevelCheck(
                concurrency=c,
                kv_cache_usage_frac_max=s.kv_cache_usage_frac_max,
                preemptions=s.preemptions,
                requests_waiting_max=s.requests_waiting_max,
                saturated=sat,
                expected_saturated=exp,
                agrees=None if sat is None or exp is None else sat == exp,
            )
        )
    measured = [lv for lv in checks if lv.saturated is not None]
    first_sat = next((lv.concurrency for lv in measured if lv.saturated), None)
    first_pre = next((lv.concurrency for lv in measured if lv.preemptions and lv.preemptions > 0), None)
    clear = [
        lv.concurrency for lv in measured if not lv.saturated and (first_sat is None or lv.concurrency < first_sat)
    ]
    last_clear = max(clear) if clear else None
    seen = first_pre is not None
    cc = critical_concurrency
    if not measured:
        verdict, msg = "no_timeline", "no level has a timeline to check the critical concurrency against"
    elif cc is None:
        verdict, msg = "no_timeline", "no KV-derived critical concurrency to check"
    elif any(lv.saturated and lv.concurrency <= cc for lv in measured):
        verdict = "saturates_below_prediction"
        msg = f"the KV cache filled (or the server preempted) at concurrency {first_sat}, not above {cc:.1f}"
    elif any(not lv.saturated and lv.concurrency > cc for lv in measured):
        held = max(lv.concurrency for lv in measured if not lv.saturated and lv.concurrency > cc)
        verdict, msg = "holds_above_prediction", f"concurrency {held} stayed clear above the critical {cc:.1f}"
    elif first_sat is None:
        verdict, msg = "not_reached", f"no level went above the critical concurrency {cc:.1f}, and none saturated"
    else:
        verdict = "consistent"
        below = f"clear up to concurrency {last_clear}, " if last_clear is not None else ""
        msg = f"{below}saturated from concurrency {first_sat}, above the critical {cc:.1f}"
    if seen:
        msg += f"; preemptions from concurrency {first_pre}"
    return CriticalCheck(
        critical_concurrency=cc,
        ceiling_frac=ceiling_frac,
        levels=tuple(checks),
        last_clear=last_clear,
        first_saturated=first_sat,
        first_preempted=first_pre,
        verdict=verdict,
        preemptions_seen=seen,
        message=msg,
    )

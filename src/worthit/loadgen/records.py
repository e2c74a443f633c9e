"""What the load generator sends and what it records: a request to send, what happened to it, a level's run.

Times in a record come from ``perf_counter_ns``, the request's clock started before the request is built (as
``vllm bench serve`` does); output tokens from the server's ``usage`` (one chunk can carry several tokens under
speculative decoding). Errors, HTTP failures and timeouts are recorded per request, never dropped; a request
the server refuses for want of credentials (HTTP 401/403) ends the level at once (:class:`Refused`).
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from typing import Any

from worthit.metrics import tpot_ms

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


def spec_tokens(specs: Sequence[RequestSpec]) -> tuple[int, int]:
    """The prompt tokens and the most output tokens (``max_tokens``) of ``specs``, summed: what a server counts
    for them at most (a warm-up's own traffic, :func:`worthit.prom.other_traffic`)."""
    return sum(s.prompt_tokens for s in specs), sum(s.max_tokens for s in specs)


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
    output_text: str = ""  # the generated text (its repetition is measured: worthit.loadgen.repetition)

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


@dataclass
class RunResult:
    """A level's records (by request id), the clock its ``start_s`` counts from, and how it ran."""

    records: list[RequestRecord]
    t0_ns: int
    warmup: int
    wall_s: float
    processes: int = 1

    def rows(self) -> list[dict[str, Any]]:
        return [r.row(self.t0_ns) for r in self.records]


# Called with each request's record as it ends (a progress line).
Progress = Callable[[RequestRecord], None]

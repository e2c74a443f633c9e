"""Reading a streamed response: its server-sent events parsed as bytes arrive, its token chunks timed.

What is timed, as ``vllm bench serve`` times it (vllm/benchmarks/lib/endpoint_request_func.py): every
streamed event that carries a choice is a token chunk, whether or not its text is empty. vLLM sends a
chunk with empty text whenever a token ends inside a multi-byte character (Chinese, emoji, ...) or is
special, and chat's first chunk carries only the role; TTFT is the first such chunk, ITL the gaps
between them, E2E the last. The usage-only final event (no choices), SSE comments (keep-alives) and
``[DONE]`` are not tokens. The first chunk with visible text is recorded beside it as
``first_text_ms``.
"""

from __future__ import annotations

import json
from typing import Any

from worthit.loadgen.records import RequestRecord


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


class SseTimer:
    """Parses one response's SSE stream as bytes arrive and times its token chunks.

    A token chunk is an event that carries a choice, its text empty or not (see the module's docstring);
    usage-only events, comments and ``[DONE]`` are not timed.
    """

    __slots__ = ("rec", "start", "last", "buf", "usage_tokens", "itl", "error", "role_chunks", "parts")

    def __init__(self, rec: RequestRecord, start: int) -> None:
        self.rec = rec
        self.start = start
        self.last = start
        self.buf = b""
        self.usage_tokens: int | None = None
        self.itl = rec.itl_ms
        self.error: str | None = None
        self.role_chunks = 0  # chat's role-only first chunk: timed, but no token of its own
        # The generated text, piece by piece: text already parsed, or a fast-path event's raw payload, parsed
        # only when the response has ended (finish), so reading the text costs the timing nothing.
        self.parts: list[str | bytes] = []

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
                    self._token_chunk(now)  # fast path: no JSON parse needed (its text is read at the end)
                    self.parts.append(payload)
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
            self.parts.append(_content(choice))
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
        rec.output_text = self.text()
        return rec

    def text(self) -> str:
        """The response's generated text (a fast-path event's text parsed here, after the response ended)."""
        out = []
        for part in self.parts:
            if isinstance(part, bytes):
                try:
                    choices = json.loads(part.decode()).get("choices") or [{}]
                    part = _content(choices[0] if isinstance(choices[0], dict) else {})
                except (ValueError, AttributeError):
                    part = ""  # already screened as a choice event; an unreadable one adds no text
            out.append(part)
        self.parts = []
        return "".join(out)

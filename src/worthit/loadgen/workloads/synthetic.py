"""The generated kinds: ``random`` (random-token prompts of drawn lengths), ``trace`` (a request trace's lengths,
arrivals and shared prefixes) and ``conversation`` (multi-turn chats). Their prompts are random tokens."""

from __future__ import annotations

import csv
import math
import random
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from worthit.loadgen.prompts import Prompter, WorkloadError
from worthit.loadgen.records import RequestSpec
from worthit.loadgen.workloads.base import Lengths, LevelRequests, NamedWorkload, _int_field, _jsonl_objects, _rng
from worthit.loadgen.workloads.corpus import CorpusShapes


class RandomLengths(NamedWorkload):
    """Random-token prompts and outputs with lengths drawn from :class:`Lengths`."""

    kind = "random"

    def __init__(self, name: str, prompt: Lengths, output: Lengths) -> None:
        super().__init__(name)
        self.prompt, self.output = prompt, output

    def build(
        self, tok: Any, endpoint: str, num_requests: int, *, seed: int, offset: int = 0, min_sessions: int = 1
    ) -> LevelRequests:
        rng, p = _rng(seed, offset), Prompter(tok, endpoint)
        sessions = []
        for _ in range(max(num_requests, min_sessions)):
            n_in, n_out = self.prompt.sample(rng), self.output.sample(rng)
            sessions.append([p.from_ids(p.random_ids(n_in, rng), n_out)])
        return LevelRequests(sessions, describe=self.describe())

    def describe(self) -> dict[str, Any]:
        return {**super().describe(), "prompt_tokens": self.prompt.describe(), "output_tokens": self.output.describe()}


@dataclass(frozen=True)
class TraceRequest:
    """One request of a trace: when it arrives, its lengths, and the prefix it shares (if any)."""

    arrival_s: float
    input_tokens: int
    output_tokens: int
    prefix_id: str | None = None
    prefix_tokens: int = 0


class Trace(NamedWorkload):
    """A request trace: arrival offsets, input and output lengths, optional shared-prefix ids."""

    kind = "trace"
    COLUMNS = ("arrival_s", "input_tokens", "output_tokens", "prefix_id", "prefix_tokens")

    def __init__(
        self,
        name: str,
        path: Path,
        *,
        time_scale: float = 1.0,
        prefix_tokens: int | None = None,
        limit: int | None = None,
    ) -> None:
        super().__init__(name)
        self.path, self.time_scale = path, time_scale
        rows = self._read(path, limit)
        self.requests: list[TraceRequest] = []
        for where, obj in rows:
            unknown = sorted(set(obj) - set(self.COLUMNS))
            if unknown:
                raise WorkloadError(f"{where}: unknown key(s) {unknown} (allowed keys: {', '.join(self.COLUMNS)})")
            arrival = obj.get("arrival_s")
            try:
                arrival_s = float(arrival)  # type: ignore[arg-type]
            except (TypeError, ValueError):
                raise WorkloadError(
                    f"{where}: key 'arrival_s' must be a number of seconds >= 0, got {arrival!r}"
                ) from None
            if not arrival_s >= 0 or math.isinf(arrival_s):
                raise WorkloadError(f"{where}: key 'arrival_s' must be a number of seconds >= 0, got {arrival!r}")
            n_in = int(_int_field(obj, "input_tokens", where, minimum=1) or 0)
            n_out = int(_int_field(obj, "output_tokens", where, minimum=1) or 0)
            pid = obj.get("prefix_id")
            pid = None if pid in (None, "") else str(pid)
            pt = _int_field(obj, "prefix_tokens", where, minimum=0, required=False)
            if pid is not None and pt is None:
                if prefix_tokens is None:
                    raise WorkloadError(
                        f"{where}: key 'prefix_id' is set but no 'prefix_tokens' (add it to the line, or set "
                        f"workloads.{name}.prefix_tokens)"
                    )
                pt = prefix_tokens
            pt = (pt or 0) if pid is not None else 0
            if pt > n_in:
                raise WorkloadError(f"{where}: key 'prefix_tokens' ({pt}) exceeds 'input_tokens' ({n_in})")
            self.requests.append(TraceRequest(arrival_s, n_in, n_out, pid, pt))
        self.requests.sort(key=lambda r: r.arrival_s)

    @staticmethod
    def _read(path: Path, limit: int | None) -> list[tuple[str, dict[str, Any]]]:
        if path.suffix.lower() == ".csv":
            out = []
            with open(path, encoding="utf-8", newline="") as fh:
                reader = csv.DictReader(fh)
                for lineno, row in enumerate(reader, 2):
                    out.append((f"{path}:{lineno}", {k: v for k, v in row.items() if k is not None}))
                    if limit and len(out) >= limit:
                        break
            if not out:
                raise WorkloadError(f"{path}: no requests in the file (expected a header and one row a request)")
            return out
        return [(f"{path}:{lineno}", obj) for lineno, obj in _jsonl_objects(path, limit)]

    def build(
        self, tok: Any, endpoint: str, num_requests: int, *, seed: int, offset: int = 0, min_sessions: int = 1
    ) -> LevelRequests:
        """``num_requests`` <= 0: the whole trace with its arrival offsets (a replay level); else that many
        of its requests in order (from the start again when the trace is shorter), without arrivals."""
        rng, p = _rng(seed, offset), Prompter(tok, endpoint)
        replay = num_requests <= 0
        reqs = (
            self.requests
            if replay
            else [self.requests[i % len(self.requests)] for i in range(max(num_requests, min_sessions))]
        )
        longest: dict[str, int] = {}
        for r in reqs:
            if r.prefix_id is not None:
                longest[r.prefix_id] = max(longest.get(r.prefix_id, 0), r.prefix_tokens)
        prefixes = {pid: p.random_ids(n, rng) for pid, n in sorted(longest.items())}
        sessions = []
        for r in reqs:
            head = prefixes[r.prefix_id][: r.prefix_tokens] if r.prefix_id is not None else []
            ids = head + p.random_ids(r.input_tokens - len(head), rng)
            sessions.append([p.from_ids(ids, r.output_tokens)])
        arrivals = None
        if replay:
            t0 = reqs[0].arrival_s
            arrivals = [(r.arrival_s - t0) * self.time_scale for r in reqs]
        return LevelRequests(sessions, arrivals_s=arrivals, describe=self.describe())

    def describe(self) -> dict[str, Any]:
        return {
            **super().describe(),
            "path": str(self.path),
            "requests": len(self.requests),
            "time_scale": self.time_scale,
            "span_s": (self.requests[-1].arrival_s - self.requests[0].arrival_s) * self.time_scale,
        }

    def files(self) -> list[str]:
        return [str(self.path)]


class Conversations(NamedWorkload):
    """Multi-turn chats: each turn sends the whole history and a new user message."""

    kind = "conversation"

    def __init__(
        self,
        name: str,
        *,
        turns: Lengths,
        user: Lengths,
        output: Lengths,
        system_tokens: int = 0,
        conversations: int | None = None,
        think_time_s: float = 0.0,
        shape: CorpusShapes | None = None,
    ) -> None:
        super().__init__(name)
        self.turns, self.user, self.output = turns, user, output
        self.system_tokens, self.conversations, self.think_time_s = system_tokens, conversations, think_time_s
        self.shape = shape  # turn counts and lengths from a corpus (shape_from) instead of the distributions

    def build(
        self, tok: Any, endpoint: str, num_requests: int, *, seed: int, offset: int = 0, min_sessions: int = 1
    ) -> LevelRequests:
        """``conversations`` chats if set, else enough for ``num_requests`` turns (and ``min_sessions`` chats)."""
        rng, p = _rng(seed, offset), Prompter(tok, endpoint)
        # One system prompt for every conversation, as a chat service sends to all its users.
        system = p.random_ids(self.system_tokens, random.Random(seed * 7_919 + 1)) if self.system_tokens else []
        sessions: list[list[RequestSpec]] = []
        total = 0
        shapes = self.shape.draws(tok, rng) if self.shape is not None else None
        while (self.conversations is not None and len(sessions) < self.conversations) or (
            self.conversations is None and (total < num_requests or len(sessions) < min_sessions)
        ):
            history: list[tuple[str, list[int]]] = [("system", system)] if system else []
            session: list[RequestSpec] = []
            if shapes is None:
                for _ in range(self.turns.sample(rng)):
                    self._turn(p, rng, history, session, self.user.sample(rng), lambda: self.output.sample(rng))
            else:  # a corpus conversation's turn count and lengths, random tokens as content
                for n_user, n_reply in next(shapes):
                    self._turn(p, rng, history, session, n_user, lambda n=n_reply: n)  # type: ignore[misc]
            sessions.append(session)
            total += len(session)
        describe = self.describe()
        if self.shape is not None:
            describe["turns_sent_mean"] = total / len(sessions) if sessions else 0.0
        return LevelRequests(sessions, think_time_s=self.think_time_s, describe=describe)

    def _turn(
        self,
        p: Prompter,
        rng: random.Random,
        history: list[tuple[str, list[int]]],
        session: list[RequestSpec],
        n_user: int,
        n_out: Callable[[], int],
    ) -> None:
        """One turn: a new user message of ``n_user`` tokens, the request, and the reply the history carries
        into the next turn (as long as the output asked for; ``n_out`` drawn after the message, in that order)."""
        history.append(("user", p.random_ids(n_user, rng)))
        out = n_out()
        session.append(self._spec(p, history, out))
        history.append(("assistant", p.random_ids(out, rng)))

    @staticmethod
    def _spec(p: Prompter, history: list[tuple[str, list[int]]], n_out: int) -> RequestSpec:
        if p.endpoint == "completions":  # token ids: the history is byte-identical from turn to turn
            return p.from_ids([t for _, ids in history for t in ids], n_out)
        return p.from_messages([{"role": role, "content": p.tok.decode(ids)} for role, ids in history], n_out)

    def describe(self) -> dict[str, Any]:
        lengths = (
            self.shape.describe()
            if self.shape is not None
            else {
                "turns": self.turns.describe(),
                "user_tokens": self.user.describe(),
                "output_tokens": self.output.describe(),
            }
        )
        return {
            **super().describe(),
            **lengths,
            "system_tokens": self.system_tokens,
            "conversations": self.conversations,
            "think_time_s": self.think_time_s,
        }

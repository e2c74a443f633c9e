"""What every workload kind shares: length distributions (:class:`Lengths`), the requests a level sends
(:class:`LevelRequests`), the workload base class (:class:`NamedWorkload`), and the checks of the files and
fields the kinds read. The kinds themselves: :mod:`worthit.loadgen.workloads`."""

from __future__ import annotations

import json
import math
import random
from collections.abc import Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from worthit.loadgen.prompts import WorkloadError
from worthit.loadgen.records import RequestSpec

DISTRIBUTIONS = ("fixed", "uniform", "normal", "lognormal")
KINDS = ("random", "jsonl", "trace", "conversation", "sharegpt")
# The keys each kind reads (besides kind and description); any other key is an error naming these.
# (ignore_eos: every kind's.)
KIND_KEYS = {
    "random": ("prompt_tokens", "output_tokens", "ignore_eos"),
    "jsonl": ("path", "output_tokens", "limit", "ignore_eos"),
    "trace": ("path", "limit", "time_scale", "prefix_tokens", "ignore_eos"),
    "conversation": (
        "turns",
        "user_tokens",
        "output_tokens",
        "system_tokens",
        "conversations",
        "think_time_s",
        "shape_from",
        "path",
        "max_turns",
        "max_user_tokens",
        "max_output_tokens",
        "ignore_eos",
    ),
    "sharegpt": (
        "path",
        "turns",
        "output_tokens",
        "min_tokens",
        "max_prompt_tokens",
        "max_total_tokens",
        "ignore_eos",
    ),
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
        # Whether a request asks the server to ignore the end-of-sequence token and generate exactly its
        # max_tokens. Synthetic kinds do (their lengths are the experiment); real-text kinds do not, as ``vllm
        # bench serve --dataset-name sharegpt`` does not: a reply the model ends early ends there (its
        # max_tokens, the recorded reply's length or a fixed one, is a cap), instead of running on into the
        # loops that flatter an n-gram drafter (docs/experiments.md, "Workloads"). ``ignore_eos`` sets it.
        self.ignore_eos = not self.realistic

    def build(
        self, tok: Any, endpoint: str, num_requests: int, *, seed: int, offset: int = 0, min_sessions: int = 1
    ) -> LevelRequests:
        """About ``num_requests`` requests (a conversation ends its last chat), in at least ``min_sessions``
        sessions; ``seed`` and ``offset`` fix every random choice."""
        raise NotImplementedError

    def describe(self) -> dict[str, Any]:
        return {"name": self.name, "kind": self.kind, "ignore_eos": self.ignore_eos}

    def files(self) -> list[str]:
        """Files the workload reads (inputs of the levels that use it)."""
        return []


def _rng(seed: int, offset: int) -> random.Random:
    """The random draws of one level (``offset``) of a workload seeded with ``seed``."""
    return random.Random(seed * 1_000_003 + offset)


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

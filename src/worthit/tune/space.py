"""The ``tune:`` section as typed values: the search space (ranges and choices over engine flags and the
variant), the budget, the scenarios, the rounds and the confirmation.

config/schema.yaml checks the section's shape and fills its defaults; :func:`parse` reads the space, whose
values JSON Schema can only call "a list or a mapping", and raises a :class:`worthit.config.ConfigError` that
names the file, the key path (``tune.space.max-num-seqs``) and the form allowed.
"""

from __future__ import annotations

import math
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from worthit import engine_args as eargs
from worthit.config import ConfigError

VARIANT = "variant"
LATENCY = "latency"
THROUGHPUT = "throughput"
RANGE_FORM = "a range [low, high] or {low, high, log, step}"
CHOICES_FORM = "choices [a, b, c, ...] (three or more, or booleans, or strings) or {choices: [...]}"
Value = bool | int | float | str


@dataclass(frozen=True)
class Range:
    """A numeric range; integers when ``integer`` (both ends written as integers)."""

    low: float
    high: float
    integer: bool
    log: bool = False
    step: float | None = None

    def size(self) -> int | None:
        """How many values the range holds (None: a continuous float range)."""
        if self.integer:
            return int((self.high - self.low) // (self.step or 1)) + 1
        if self.step:
            return int(math.floor((self.high - self.low) / self.step + 1e-9)) + 1
        return None

    def values(self) -> list[float]:
        """Its values where countable, else its two ends."""
        n = self.size()
        if n is None:
            return [self.low, self.high]
        step = self.step or 1
        return [int(self.low + i * step) if self.integer else self.low + i * step for i in range(n)]

    def describe(self) -> str:
        kind = "integers" if self.integer else "floats"
        extra = (", log" if self.log else "") + (f", step {self.step:g}" if self.step else "")
        return f"{kind} {self.low:g} .. {self.high:g}{extra}"


@dataclass(frozen=True)
class Choices:
    """A set of values to choose among."""

    choices: tuple[Value, ...]

    def size(self) -> int:
        return len(self.choices)

    def describe(self) -> str:
        return "one of " + ", ".join(str(c) for c in self.choices)


Dimension = Range | Choices


@dataclass(frozen=True)
class Budget:
    server_starts: int | None
    gpu_minutes: float | None


@dataclass(frozen=True)
class TuneSection:
    """The validated ``tune:`` section."""

    space: dict[str, Dimension]
    budget: Budget
    scenarios: tuple[str, ...]
    rounds: int
    per_round: int
    confirm_top: int
    confirm_repeats: int
    kv_margin: float
    seed: int
    accuracy_screen_items: int = 50
    accuracy_near_front_items: int | None = None
    accuracy_near_front: float = 0.1

    @property
    def flags(self) -> list[str]:
        """The engine flags searched (the space less ``variant``)."""
        return [k for k in self.space if k != VARIANT]

    @property
    def confirm_starts(self) -> int:
        """Server starts the confirmation takes: the top of each scenario and vLLM's defaults, ``confirm.repeats``
        fresh starts each."""
        return (len(self.scenarios) * self.confirm_top + 1) * self.confirm_repeats

    def size(self) -> int | None:
        """Candidates in the space (None where a float range is continuous)."""
        total = 1
        for dim in self.space.values():
            n = dim.size()
            if n is None:
                return None
            total *= n
        return total


def _is_number(x: object) -> bool:
    return isinstance(x, int | float) and not isinstance(x, bool)


def _range(key: str, low: object, high: object, *, log: object = False, step: object = None) -> Range:
    if not (_is_number(low) and _is_number(high)):
        raise ValueError(f"low and high must be numbers, got {low!r} and {high!r}")
    lo, hi = float(low), float(high)  # type: ignore[arg-type]
    if lo >= hi:
        raise ValueError(f"low {low!r} must be below high {high!r}")
    if not isinstance(log, bool):
        raise ValueError(f"log must be true or false, got {log!r}")
    if step is not None and (not _is_number(step) or float(step) <= 0):  # type: ignore[arg-type]
        raise ValueError(f"step must be a positive number, got {step!r}")
    if log and lo <= 0:
        raise ValueError("a log range needs low > 0")
    if log and step is not None:
        raise ValueError("a range cannot be both log and stepped (Optuna samples neither so)")
    integer = isinstance(low, int) and isinstance(high, int) and (step is None or isinstance(step, int))
    return Range(lo, hi, integer, log, None if step is None else float(step))  # type: ignore[arg-type]


def _choices(values: Sequence[object]) -> Choices:
    if len(values) < 1:
        raise ValueError("no choices")
    if not all(isinstance(v, bool | int | float | str) for v in values):
        raise ValueError("choices must be numbers, booleans or strings")
    if len(set(map(repr, values))) != len(values):
        raise ValueError("a choice is repeated")
    return Choices(tuple(values))  # type: ignore[arg-type]


def dimension(key: str, raw: object) -> Dimension:
    """One value of ``tune.space`` as a range or choices (ValueError says what is wrong)."""
    if isinstance(raw, Mapping):
        if "choices" in raw:
            extra = set(raw) - {"choices"}
            if extra or not isinstance(raw["choices"], list):
                raise ValueError(f"a choices mapping holds only a list 'choices' (found {sorted(raw)})")
            return _choices(raw["choices"])
        extra = set(raw) - {"low", "high", "log", "step"}
        if extra or not {"low", "high"} <= set(raw):
            raise ValueError(f"a range mapping has keys low, high and optionally log, step (found {sorted(raw)})")
        return _range(key, raw["low"], raw["high"], log=raw.get("log", False), step=raw.get("step"))
    if isinstance(raw, list):
        if len(raw) == 2 and all(_is_number(v) for v in raw):
            return _range(key, raw[0], raw[1])
        return _choices(raw)
    raise ValueError(f"got {raw!r}")


def parse(cfg: Mapping[str, Any], source: str = "config") -> TuneSection:
    """The ``tune:`` section of a validated study config (its defaults filled by the schema)."""
    t = cfg.get("tune") or {}
    space: dict[str, Dimension] = {}
    variants = list(cfg.get("variants") or {})
    for key, raw in (t.get("space") or {}).items():
        where = f"{source}: key 'tune.space.{key}'"
        try:
            dim = dimension(key, raw)
        except ValueError as e:
            raise ConfigError(f"{where}: {e} (allowed: {RANGE_FORM}; or {CHOICES_FORM})") from None
        if key == VARIANT:
            unknown = [c for c in (dim.choices if isinstance(dim, Choices) else [raw]) if c not in variants]
            if isinstance(dim, Range) or unknown:
                raise ConfigError(
                    f"{where}: unknown variant {unknown[0]!r} (allowed: choices among {', '.join(variants)})"
                )
        elif key.startswith("-") or "_" in key.split(".", 1)[0] or not key.split(".", 1)[0]:
            raise ConfigError(
                f"{where}: spell the flag as on the command line without '--' (e.g. max-num-seqs, "
                "speculative-config.num_speculative_tokens)"
            )
        space[key] = dim
    _check_speculation(cfg, space, source)
    b = t.get("budget") or {}
    c = t.get("confirm") or {}
    return TuneSection(
        space=space,
        budget=Budget(b.get("server_starts", 24), b.get("gpu_minutes")),
        scenarios=tuple(t.get("scenarios") or (LATENCY, THROUGHPUT)),
        rounds=int(t.get("rounds", 4)),
        per_round=int(t.get("per_round", 4)),
        confirm_top=int(c.get("top", 3)),
        confirm_repeats=int(c.get("repeats", 4)),
        kv_margin=float((t.get("prune") or {}).get("kv_margin", 0.25)),
        seed=int(t.get("seed", 0)),
        accuracy_screen_items=int((t.get("accuracy") or {}).get("screen_items", 50)),
        accuracy_near_front_items=(t.get("accuracy") or {}).get("near_front_items"),
        accuracy_near_front=float((t.get("accuracy") or {}).get("near_front", 0.1)),
    )


SPEC_K = "speculative-config.num_speculative_tokens"
SPEC_SOURCES = ("method", "model")  # what vLLM proposes the k tokens with: a method (ngram, ...) or a draft model


def _check_speculation(cfg: Mapping[str, Any], space: Mapping[str, Dimension], source: str) -> None:
    """A speculative k above 0 needs something to propose the tokens (a method or a draft model) in the
    space or in a variant the candidates build on: else no candidate with a k could start. (Where only some
    variants have one, the rounds skip the others' k > 0 unserved: ``prune.unservable``.)"""
    if SPEC_K not in space or any(f"speculative-config.{f}" in space for f in SPEC_SOURCES):
        return
    dim = space[SPEC_K]
    if isinstance(dim, Choices) and all(v == 0 for v in dim.choices):
        return
    vdim = space.get(VARIANT)
    bases = list(vdim.choices) if isinstance(vdim, Choices) else [cfg.get("baseline_variant")]
    serve_args = (cfg.get("serve") or {}).get("engine_args")
    for base in bases:
        v = (cfg.get("variants") or {}).get(base) or {}
        sc = eargs.speculative_config(eargs.merged(serve_args, v.get("engine_args"))) or {}
        if any(sc.get(f) for f in SPEC_SOURCES):
            return
    raise ConfigError(
        f"{source}: key 'tune.space.{SPEC_K}': a k above 0 needs a proposer, and no variant the candidates "
        f"build on ({', '.join(map(str, bases))}) has a speculative-config method or model (set "
        "speculative-config.method, e.g. ngram, in a variant's engine_args or in the space; 0 means no "
        "speculation)"
    )


def engine_args(values: Mapping[str, Any]) -> dict[str, Any]:
    """A candidate's flag values as engine arguments: dotted keys folded into their JSON flag's mapping,
    ``variant`` left out. To merge over a variant's own arguments (then
    :func:`worthit.engine_args.speculation_zero_off`); :func:`changed_args` for what the candidate changes."""
    out: dict[str, Any] = {}
    for key, v in values.items():
        if key == VARIANT:
            continue
        head, dot, field = key.partition(".")
        if dot:
            out.setdefault(head, {})[field] = v
        else:
            out[key] = v
    return out


def changed_args(values: Mapping[str, Any]) -> dict[str, Any]:
    """The flags a candidate sets, as its serve command shows them: a speculative k of 0 is no
    speculation, so no ``--speculative-config`` (``speculative-config.num_speculative_tokens: [0, 2, 4]``)."""
    return eargs.speculation_zero_off(engine_args(values))

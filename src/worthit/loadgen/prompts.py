"""Prompts with exact token counts, built with the served model's tokenizer, and the requests they make.

Random-token prompts are decoded to text and re-encoded until the round trip gives exactly the target
length (the way vLLM's random dataset does it, with the check made explicit). :class:`RandomWorkload` makes
fixed-length prompts (the load levels' default, the warm-up); :class:`SharedPrefixWorkload` puts a common
prefix of L tokens before a unique suffix, for the prefix-caching experiment; :class:`Prompter` turns token
ids, text or chat messages into requests for one endpoint, counting tokens as the server will (the named
workloads of :mod:`worthit.loadgen.workloads` build their requests with it). Everything is seeded, so a level
re-run sends the same prompts.
"""

from __future__ import annotations

import os
import random
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Protocol

from worthit import jobenv
from worthit.errors import InputError
from worthit.loadgen.records import RequestSpec

ENDPOINTS = ("completions", "chat")


class Tokenizer(Protocol):
    def encode(self, text: str, add_special_tokens: bool = ...) -> list[int]: ...
    def decode(self, ids: Sequence[int], skip_special_tokens: bool = ...) -> str: ...


class WorkloadError(InputError):
    """A workload that cannot be built as configured (a bad file, key or length), named with where it is."""


def tokenizer_class() -> Any:
    """transformers' ``AutoTokenizer`` (a heavy import, made only where prompts are built), without the advice
    transformers prints as it loads where PyTorch is missing: the client needs only the tokenizer, and the
    advice reached the run's terminal once for every load job (36 lines in the embedded study's). Where torch
    is there, it reads the thread-count variables as it loads: a job's are restored first (:mod:`worthit.jobenv`)."""
    jobenv.restore_here()
    os.environ.setdefault("TRANSFORMERS_NO_ADVISORY_WARNINGS", "1")
    from transformers import AutoTokenizer

    return AutoTokenizer


def load_tokenizer(model_dir: str | Path) -> Any:
    """The model folder's tokenizer, offline."""
    AutoTokenizer = tokenizer_class()  # noqa: N806 (the class, under its own name)
    try:
        return AutoTokenizer.from_pretrained(str(model_dir), local_files_only=True)
    except (OSError, ValueError) as e:  # no tokenizer files there, or none transformers can read
        raise WorkloadError(f"{model_dir}: no tokenizer could be loaded from this folder ({e})") from None


def _normal_ids(tok: Any) -> list[int]:
    """The tokenizer's ids that are not special tokens: what random prompts are drawn from."""
    special = set(getattr(tok, "all_special_ids", []) or [])
    vocab = getattr(tok, "vocab_size", None) or len(tok)
    return [i for i in range(vocab) if i not in special]


def exact_prompt(
    tok: Any, n_tokens: int, rng: random.Random, pool: Sequence[int], *, attempts: int = 20
) -> tuple[str, list[int]]:
    """A text whose encoding (without special tokens) is exactly ``n_tokens`` long."""
    if n_tokens <= 0:
        return "", []
    ids = [rng.choice(pool) for _ in range(n_tokens)]
    for _ in range(attempts):
        text = tok.decode(ids, skip_special_tokens=True)
        ids2 = tok.encode(text, add_special_tokens=False)
        if len(ids2) == n_tokens:
            return text, ids2
        # The round trip merged or split tokens: pad with fresh random ids or cut, then try again.
        ids = ids2[:n_tokens] + [rng.choice(pool) for _ in range(max(0, n_tokens - len(ids2)))]
    raise WorkloadError(f"could not build a {n_tokens}-token prompt whose round trip is exact")


@dataclass(frozen=True)
class RandomWorkload:
    """``num_requests`` random-token prompts of ``prompt_tokens`` (within a spread), each asking for
    ``output_tokens``."""

    prompt_tokens: int
    output_tokens: int
    num_requests: int
    seed: int = 0
    prompt_tokens_spread: float = 0.0  # uniform +- fraction; 0 = fixed length
    output_tokens_spread: float = 0.0

    def build(self, tok: Any, offset: int = 0) -> list[RequestSpec]:
        rng = random.Random(self.seed * 1_000_003 + offset)
        pool = _normal_ids(tok)
        specs = []
        for _ in range(self.num_requests):
            p = _spread(self.prompt_tokens, self.prompt_tokens_spread, rng)
            o = _spread(self.output_tokens, self.output_tokens_spread, rng)
            text, ids = exact_prompt(tok, p, rng, pool)
            specs.append(RequestSpec(prompt=text, prompt_tokens=len(ids), max_tokens=o))
        return specs


def _spread(mean: int, frac: float, rng: random.Random) -> int:
    if frac <= 0:
        return mean
    lo, hi = max(1, int(mean * (1 - frac))), max(1, int(mean * (1 + frac)))
    return rng.randint(lo, hi)


@dataclass(frozen=True)
class SharedPrefixWorkload:
    """A common prefix of ``prefix_tokens`` then a unique suffix per request."""

    prefix_tokens: int
    suffix_tokens: int
    output_tokens: int
    num_requests: int
    seed: int = 0

    def build(self, tok: Any) -> list[RequestSpec]:
        rng = random.Random(self.seed)
        pool = _normal_ids(tok)
        _, prefix_ids = exact_prompt(tok, self.prefix_tokens, rng, pool)
        specs = []
        for _ in range(self.num_requests):
            _, suffix_ids = exact_prompt(tok, self.suffix_tokens, rng, pool)
            ids = prefix_ids + suffix_ids
            # Token ids keep the prefix byte-identical across requests (text could re-merge at the seam).
            specs.append(RequestSpec(prompt=ids, prompt_tokens=len(ids), max_tokens=self.output_tokens))
        return specs


class Prompter:
    """Turns token ids or messages into request specs for one endpoint, counting tokens as the server will."""

    def __init__(self, tok: Any, endpoint: str) -> None:
        if endpoint not in ENDPOINTS:
            raise WorkloadError(f"endpoint {endpoint!r} (allowed: {', '.join(ENDPOINTS)})")
        self.tok = tok
        self.endpoint = endpoint
        self.pool = _normal_ids(tok)

    def template(self, messages: Sequence[Mapping[str, str]]) -> str:
        """The chat template's rendering (with the assistant's turn opened), as the server renders it."""
        if not getattr(self.tok, "chat_template", None):
            raise WorkloadError(
                "the model's tokenizer has no chat template, so chat messages cannot be sent or counted; "
                "use loadtest.endpoint: completions with text prompts"
            )
        return str(self.tok.apply_chat_template(list(messages), tokenize=False, add_generation_prompt=True))

    def count(self, text: str) -> int:
        return len(self.tok.encode(text, add_special_tokens=False))

    def from_ids(self, ids: list[int], max_tokens: int) -> RequestSpec:
        if self.endpoint == "completions":
            return RequestSpec(prompt=ids, prompt_tokens=len(ids), max_tokens=max_tokens)
        return self.from_messages([{"role": "user", "content": self.tok.decode(ids)}], max_tokens)

    def from_text(self, text: str, max_tokens: int) -> RequestSpec:
        if self.endpoint == "completions":
            return RequestSpec(prompt=text, prompt_tokens=self.count(text), max_tokens=max_tokens)
        return self.from_messages([{"role": "user", "content": text}], max_tokens)

    def from_messages(self, messages: Sequence[Mapping[str, str]], max_tokens: int) -> RequestSpec:
        rendered = self.template(messages)
        if self.endpoint == "completions":
            return RequestSpec(prompt=rendered, prompt_tokens=self.count(rendered), max_tokens=max_tokens)
        msgs = tuple({"role": str(m["role"]), "content": str(m["content"])} for m in messages)
        return RequestSpec(prompt=rendered, prompt_tokens=self.count(rendered), max_tokens=max_tokens, messages=msgs)

    def random_ids(self, n: int, rng: random.Random) -> list[int]:
        """Exactly ``n`` random token ids whose decoded text re-encodes to themselves."""
        return exact_prompt(self.tok, n, rng, self.pool)[1]

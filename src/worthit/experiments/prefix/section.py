"""The ``prefix:`` section of a study config as typed values, read through one door (:func:`section`), as the
tune's section is (:func:`worthit.tune.space.parse`). Its keys, bounds and defaults are written once, in this
folder's ``section.yaml``; a config the schema has not filled yet takes the defaults from there."""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any

SECTION_FILE = Path(__file__).with_name("section.yaml")


@dataclass(frozen=True)
class PrefixSection:
    """The prefix-caching experiment's settings (each key's meaning: section.yaml)."""

    lengths: tuple[int, ...]
    suffix_tokens: int
    output_tokens: int
    num_requests: int
    concurrency: int
    warmup_requests: int
    request_timeout_s: float
    seed: int

    def prompt_tokens(self, length: int) -> int:
        """The prompt of a request at shared-prefix length ``length``: the prefix and its unique suffix."""
        return int(length) + self.suffix_tokens


def section(cfg: Mapping[str, Any]) -> PrefixSection:
    """The ``prefix:`` section of ``cfg`` (validated or not: a key it leaves out takes its default)."""
    from worthit.measurements import section_defaults

    d = {**section_defaults(SECTION_FILE), **dict(cfg.get("prefix") or {})}
    return PrefixSection(
        lengths=tuple(int(n) for n in d["lengths"]),
        suffix_tokens=int(d["suffix_tokens"]),
        output_tokens=int(d["output_tokens"]),
        num_requests=int(d["num_requests"]),
        concurrency=int(d["concurrency"]),
        warmup_requests=int(d["warmup_requests"]),
        request_timeout_s=float(d["request_timeout_s"]),
        seed=int(d["seed"]),
    )

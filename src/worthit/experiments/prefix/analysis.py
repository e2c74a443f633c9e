"""The prefix-caching experiment's one rule of comparison, used by its report (:mod:`.report`): which variant is
the other side of a measured point."""

from __future__ import annotations

from collections.abc import Iterable


def other_side(measured: Iterable[tuple[str, bool, int]], prefix_tokens: int, cache_on: bool) -> str | None:
    """The reference of a point measured at ``prefix_tokens`` with the cache ``cache_on``: the first variant, in
    study order, measured at the same length with the cache the other way. ``measured`` holds
    ``(variant, cache_on, prefix_tokens)`` of every measured point, in study order; None when there is none."""
    return next((v for v, on, n in measured if n == prefix_tokens and on != cache_on), None)

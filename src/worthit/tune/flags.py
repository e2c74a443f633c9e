"""worthit tune's space keys checked against the flags the installed vLLM accepts: its own ``vllm serve
--help=all``, parsed and cached per version by :mod:`worthit.vllm_flags` (not a list of ours)."""

from __future__ import annotations

from collections.abc import Iterable

from worthit.config import ConfigError
from worthit.vllm_flags import FlagsUnavailable, accepted_flags, help_text, hint, parse_help

__all__ = ["FlagsUnavailable", "accepted_flags", "check_flags", "help_text", "parse_help"]


def check_flags(keys: Iterable[str], accepted: set[str], *, version: str, source: str = "config") -> None:
    """Refuse a space key whose flag (the part before a dot) this vLLM does not accept, naming the closest."""
    for key in keys:
        name = key.split(".", 1)[0]
        if name not in accepted:
            raise ConfigError(
                f"{source}: key 'tune.space.{key}': vLLM {version} has no flag --{name} ({hint(name, accepted)})"
            )

"""The ``sweet_spot:`` section of a study config as typed values, read through one door (:func:`section`). Its
keys, bounds and defaults are written once, in this folder's ``section.yaml``; a config the schema has not filled
yet takes the defaults from there."""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any

SECTION_FILE = Path(__file__).with_name("section.yaml")


@dataclass(frozen=True)
class SweetSpotSection:
    """The sweet-spot search's settings (each key's meaning: section.yaml)."""

    variants: tuple[str, ...]
    width: int
    max_probes: int


def section(cfg: Mapping[str, Any]) -> SweetSpotSection:
    """The ``sweet_spot:`` section of ``cfg`` (validated or not: a key it leaves out takes its default)."""
    from worthit.measurements import section_defaults

    d = {**section_defaults(SECTION_FILE), **dict(cfg.get("sweet_spot") or {})}
    return SweetSpotSection(
        variants=tuple(str(v) for v in d["variants"]), width=int(d["width"]), max_probes=int(d["max_probes"])
    )

"""The ``specdec:`` section of a study config as typed values, read through one door (:func:`section`), as the
prefix and sweet-spot sections are; and the study's speculative variants, their base and their drafts, which
only this experiment asks about. Keys, bounds and defaults are written once, in this folder's ``section.yaml``;
a config the schema has not filled yet takes the defaults from there."""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from worthit.config import Study

SECTION_FILE = Path(__file__).with_name("section.yaml")


@dataclass(frozen=True)
class SpecdecSection:
    """The speculative-decoding analysis' settings (each key's meaning: section.yaml)."""

    base_variant: str | None
    draft_variants: Mapping[str, str]
    verify_context_tokens: int | None
    verify_repeats: int


def section(cfg: Mapping[str, Any]) -> SpecdecSection:
    """The ``specdec:`` section of ``cfg`` (validated or not: a key it leaves out takes its default)."""
    from worthit.measurements import section_defaults

    d = {**section_defaults(SECTION_FILE), **dict(cfg.get("specdec") or {})}
    ctx = d.get("verify_context_tokens")
    return SpecdecSection(
        base_variant=str(d["base_variant"]) if d.get("base_variant") else None,
        draft_variants={str(k): str(v) for k, v in (d.get("draft_variants") or {}).items()},
        verify_context_tokens=int(ctx) if ctx is not None else None,
        verify_repeats=int(d["verify_repeats"]),
    )


def spec_variants(study: Study) -> list[str]:
    """Variants served with a speculative-config (measured by their load levels)."""
    return [v for v in study.variants_with("loadtest") if study.variant(v).speculative_config]


def base_variant(study: Study) -> str:
    """The target model served without speculation: ``specdec.base_variant``, else ``baseline_variant``."""
    return section(study.cfg).base_variant or str(study.cfg["baseline_variant"])


def draft_variant(study: Study, spec_variant: str) -> str | None:
    """The variant that serves ``spec_variant``'s draft model alone (None: a model-free method)."""
    return section(study.cfg).draft_variants.get(spec_variant) or None


def load_variants(study: Study) -> list[str]:
    """The variants whose load levels the speculative-decoding table reads: the speculative ones, the base and
    the drafts, where measured."""
    specs = spec_variants(study)
    names = [*specs, base_variant(study), *(draft_variant(study, v) for v in specs)]
    measured = study.variants_with("loadtest")
    return [v for v in dict.fromkeys(names) if v and v in measured]


def verify_sizes(study: Study) -> list[int]:
    """Tokens per sequence a verify step processes (k + 1), one per distinct k, plus 1 (plain decode)."""
    ks = {
        int((study.variant(v).speculative_config or {}).get("num_speculative_tokens") or 0)
        for v in spec_variants(study)
    }
    return sorted({1} | {k + 1 for k in ks if k > 0})

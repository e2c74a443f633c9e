"""The fact tables in ``worthit/data/task_tables/`` (JSON; its README says what each holds), read as
tuples, and what the three task generators share: the people in the stories, and a round-robin order."""

from __future__ import annotations

import json
from collections.abc import Sequence
from importlib import resources
from typing import Any, TypeVar

T = TypeVar("T")
DATA = resources.files("worthit") / "data"


def table(name: str) -> dict[str, Any]:
    """One table file of ``data/task_tables/``, by file name."""
    loaded: dict[str, Any] = json.loads((DATA / "task_tables" / name).read_text(encoding="utf-8"))
    return loaded


def pairs(rows: Sequence[Sequence[Any]]) -> tuple[tuple[Any, Any], ...]:
    """Two-column rows as a tuple of pairs."""
    return tuple((a, b) for a, b in rows)


def round_robin(groups: Sequence[Sequence[T]]) -> list[T]:
    """One of each group in turn (first of each, then second of each, ...), so any prefix mixes the groups."""
    return [g[i] for i in range(max(map(len, groups), default=0)) for g in groups if i < len(g)]


PEOPLE: tuple[tuple[str, str], ...] = pairs(table("people.json")["people"])  # (name, pronoun)

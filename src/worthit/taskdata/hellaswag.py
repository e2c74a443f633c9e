"""worthit_hellaswag: 4-way sentence completion in HellaSwag's schema, from the activities in
``data/task_tables/hellaswag.json``; the wrong endings belong to other activities."""

from __future__ import annotations

import random
from typing import Any

from worthit.taskdata.tables import PEOPLE, round_robin, table

# (activity, first sentence, continuation start, correct ending). The first table is the original set (its
# 126 items come first, unchanged); the families after it add the rest.
_TABLE = table("hellaswag.json")
FIRST_ACTIVITIES: tuple[tuple[str, str, str, str], ...] = tuple(
    (label, ctx_a, ctx_b, ending) for label, ctx_a, ctx_b, ending in _TABLE["activities"]
)

# The added families: every row is one checkable fact (its own ending); wrong endings come from other families.
# Family -> (activity, first sentence, correct ending); the family's continuation start is the same for all.
MORE_ACTIVITIES: dict[str, tuple[tuple[str, str, str], ...]] = {
    family: tuple((label, ctx_a, ending) for label, ctx_a, ending in rows["activities"])
    for family, rows in _TABLE["more_activities"].items()
}
CONTINUATION: dict[str, str] = {family: rows["continuation"] for family, rows in _TABLE["more_activities"].items()}
FAMILY_OF: tuple[str, ...] = ("activities",) * len(FIRST_ACTIVITIES) + tuple(
    f for f, rows in MORE_ACTIVITIES.items() for _ in rows
)
# Every activity, the original ones first: label -> its one right ending.
ACTIVITIES: tuple[tuple[str, str, str, str], ...] = FIRST_ACTIVITIES + tuple(
    (label, ctx_a, CONTINUATION[f], ending) for f, rows in MORE_ACTIVITIES.items() for label, ctx_a, ending in rows
)
MORE_VARIANTS = 4  # items per added activity: other people, other wrong endings


def original_items(rng: random.Random, n_items: int, offset: int) -> list[dict[str, Any]]:
    """``n_items`` items of the original activities, in turn from the ``offset``-th (people likewise)."""
    items = []
    for i in range(n_items):
        k = (i + offset) % len(FIRST_ACTIVITIES)
        label, ctx_a, ctx_b, ending = FIRST_ACTIVITIES[k]
        name, pron = PEOPLE[(i * 3 + offset) % len(PEOPLE)]
        others = rng.sample([j for j in range(len(FIRST_ACTIVITIES)) if j != k], 3)
        endings = [FIRST_ACTIVITIES[j][3] for j in others]
        gold = rng.randrange(4)
        endings.insert(gold, ending)
        a, b = ctx_a.format(n=name, p=pron), ctx_b.format(n=name, p=pron)
        items.append(
            {
                "ind": i,
                "activity_label": label,
                "ctx_a": a,
                "ctx_b": b,
                "ctx": f"{a} {b}",
                "endings": endings,
                "source_id": f"worthit-{k}",
                "split": "",
                "split_type": "indomain",
                "label": str(gold),
            }
        )
    return items


def added_items(rng: random.Random, start: int) -> list[dict[str, Any]]:
    """The added families' items, round by round (each round has every added activity once, the families
    taking turns), so a limit keeps the activities distinct and the families mixed for as long as it can."""
    by_family: dict[str, list[int]] = {}
    for k in range(len(FIRST_ACTIVITIES), len(ACTIVITIES)):
        by_family.setdefault(FAMILY_OF[k], []).append(k)
    order = round_robin(list(by_family.values()))
    items: list[dict[str, Any]] = []
    for v in range(MORE_VARIANTS):
        for k in order:
            label, ctx_a, ctx_b, ending = ACTIVITIES[k]
            name, pron = PEOPLE[(k + 3 * v) % len(PEOPLE)]
            pool = [j for j in range(len(ACTIVITIES)) if FAMILY_OF[j] != FAMILY_OF[k]]
            endings = [ACTIVITIES[j][3] for j in rng.sample(pool, 3)]
            gold = rng.randrange(4)
            endings.insert(gold, ending)
            a, b = ctx_a.format(n=name, p=pron), ctx_b.format(n=name, p=pron)
            items.append(
                {
                    "ind": start + len(items),
                    "activity_label": label,
                    "ctx_a": a,
                    "ctx_b": b,
                    "ctx": f"{a} {b}",
                    "endings": endings,
                    "source_id": f"worthit-{k}",
                    "split": "",
                    "split_type": "indomain",
                    "label": str(gold),
                }
            )
    return items

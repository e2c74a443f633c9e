"""worthit_arc: 4-choice science questions in ARC's schema, from the fact tables in
``data/task_tables/arc.json`` (three wrong answers from the other rows) and from numbers computed from
the question."""

from __future__ import annotations

import random
from collections.abc import Sequence
from typing import Any

from worthit.taskdata.tables import pairs, table

Row = tuple[str, str, list[str]]  # (question, answer, wrong answers to pick three from)
_TABLE = table("arc.json")
ANIMAL_CLASSES: dict[str, tuple[str, ...]] = {cls: tuple(animals) for cls, animals in _TABLE["animal_classes"].items()}
ORGANS: tuple[tuple[str, str], ...] = pairs(_TABLE["organs"])  # (organ, what it does)
UNITS: tuple[tuple[str, str], ...] = pairs(_TABLE["units"])  # (quantity, a unit it is measured in)
STATES: dict[str, tuple[str, ...]] = {state: tuple(things) for state, things in _TABLE["states"].items()}
# Written questions: (question, correct answer, three wrong answers).
FACTS: tuple[tuple[str, str, tuple[str, str, str]], ...] = tuple(
    (question, answer, (w1, w2, w3)) for question, answer, (w1, w2, w3) in _TABLE["facts"]
)


def original_rows() -> list[Row]:
    """Every question the original fact tables give."""
    rows: list[Row] = []
    for cls, animals in ANIMAL_CLASSES.items():
        article = "an" if cls[0] in "aeiou" else "a"
        others = [a for c, xs in ANIMAL_CLASSES.items() if c != cls for a in xs]
        rows += [(f"Which of these animals is {article} {cls}?", a, others) for a in animals]
    for organ, job in ORGANS:
        rows.append((f"Which part of the body {job}?", f"the {organ}", [f"the {o}" for o, _ in ORGANS if o != organ]))
    for qty, unit in UNITS:
        rows.append(
            (f"Which unit is used to measure {qty}?", f"the {unit}", [f"the {u}" for _, u in UNITS if u != unit])
        )
    for state, things in STATES.items():
        others = [t for s, xs in STATES.items() if s != state for t in xs]
        rows += [(f"At room temperature, which of these is a {state}?", t, others) for t in things[:4]]
    rows += [(q, a, list(w)) for q, a, w in FACTS]
    return rows


def to_items(rng: random.Random, rows: Sequence[Row], prefix: str, start: int = 0) -> list[dict[str, Any]]:
    """The rows as ARC items (ids ``prefix-start``, ...), each with three of its wrong answers, shuffled."""
    items = []
    for i, (question, answer, wrong) in enumerate(rows, start):
        choices = rng.sample(sorted(set(wrong)), 3)
        gold = rng.randrange(4)
        choices.insert(gold, answer)
        labels = ["A", "B", "C", "D"]
        items.append(
            {
                "id": f"{prefix}-{i}",
                "question": question,
                "choices": {"text": choices, "label": labels},
                "answerKey": labels[gold],
            }
        )
    return items


# The added ARC families: each row is a checkable fact (a table entry, or a number computed from the question).
MORE_ANIMALS: dict[str, tuple[str, ...]] = {cls: tuple(animals) for cls, animals in _TABLE["more_animals"].items()}
ELEMENTS: tuple[tuple[str, str], ...] = pairs(_TABLE["elements"])  # (element, chemical symbol)
# (larger unit, smaller unit in the plural, how many of the smaller make one larger)
CONVERSIONS: tuple[tuple[str, str, int], ...] = tuple((big, small, n) for big, small, n in _TABLE["conversions"])
YOUNG: tuple[tuple[str, str], ...] = pairs(_TABLE["young"])  # (animal, its young)
PLANETS: tuple[str, ...] = tuple(_TABLE["planets"])  # in order from the Sun
ORDINALS: tuple[str, ...] = tuple(_TABLE["ordinals"])
POLYGONS: tuple[tuple[str, int], ...] = pairs(_TABLE["polygons"])  # (shape, number of sides)


def an(word: str) -> str:
    """The word with its indefinite article."""
    return f"an {word}" if word[0] in "aeiou" else f"a {word}"


def _numeric(answer: int, candidates: Sequence[int], unit: str) -> tuple[str, list[str]]:
    """An answer and its wrong answers as "N unit": the candidates that are positive and not the answer."""
    wrong = sorted({c for c in candidates if c > 0 and c != answer})
    return f"{answer} {unit}".rstrip(), [f"{c} {unit}".rstrip() for c in wrong]


def added_rows() -> dict[str, list[Row]]:
    """The added questions, by family."""
    fam: dict[str, list[Row]] = {}
    classes = {c: ANIMAL_CLASSES[c] + MORE_ANIMALS[c] for c in ANIMAL_CLASSES}
    fam["animal classes"] = [
        (f"Which of these animals is {an(cls)}?", a, [x for c, xs in classes.items() if c != cls for x in xs])
        for cls, animals in MORE_ANIMALS.items()
        for a in animals
    ]
    fam["animal classes"] += [
        (f"What kind of animal is {an(a)}?", an(cls), [an(c) for c in classes if c != cls])
        for cls, animals in classes.items()
        for a in animals
    ]
    fam["units"] = [
        (f"The {unit} is a unit of which quantity?", qty, [q for q, _ in UNITS if q != qty]) for qty, unit in UNITS
    ]
    fam["states of matter"] = [
        (
            f"What state of matter is {thing} at room temperature?",
            state,
            [s for s in STATES if s != state] + ["plasma"],
        )
        for state, things in STATES.items()
        for thing in things
    ]
    fam["chemical symbols"] = [
        (f"What is the chemical symbol for {el}?", sym, [s for _, s in ELEMENTS if s != sym]) for el, sym in ELEMENTS
    ]
    fam["chemical symbols"] += [
        (f"Which element has the chemical symbol {sym}?", el, [e for e, _ in ELEMENTS if e != el])
        for el, sym in ELEMENTS
    ]
    factors = sorted({f for _, _, f in CONVERSIONS})
    fam["unit conversions"] = [
        (
            f"How many {small} are in {k} {big}s?",
            *_numeric(k * f, [k * g for g in factors] + [k + f, f * (k + 1)], ""),
        )
        for big, small, f in CONVERSIONS
        for k in range(2, 10)
    ]
    fam["speed"] = [
        (
            f"A car travels {v * t} kilometers in {t} hours at a steady speed. What is its speed?",
            *_numeric(v, [v * t * t, v * t + t, v * t - t, v * t], "kilometers per hour"),
        )
        for v in range(20, 100, 10)
        for t in range(2, 8)
    ]
    fam["force"] = [
        (
            f"What force is needed to accelerate a {m}-kilogram cart at {a} meters per second squared?",
            *_numeric(m * a, [m + a, m, a, m * a * 2, m * a * 10], "newtons"),
        )
        for m in (2, 3, 4, 5, 6, 8, 10, 12)
        for a in (2, 3, 4, 5, 6)
    ]
    fam["electric circuits"] = [
        (
            f"A current of {i} amperes flows through a {r}-ohm resistor. What is the voltage across the resistor?",
            *_numeric(i * r, [i + r, r, i, i * r * 2, i * r * 10], "volts"),
        )
        for i in (2, 3, 4, 5)
        for r in (3, 5, 10, 12, 20, 30, 50, 100)
    ]
    fam["work"] = [
        (
            f"How much work is done when a force of {f} newtons pushes a box {d} meters?",
            *_numeric(f * d, [f + d, f, d, f * d * 2, f * d * 10], "joules"),
        )
        for f in (5, 10, 20, 25, 50)
        for d in (2, 3, 4, 6)
    ]
    fam["young animals"] = [
        (f"What is a young {animal} called?", an(young), [an(y) for _, y in YOUNG if y != young])
        for animal, young in YOUNG
    ]
    fam["planets"] = [
        (f"Which planet is {ORDINALS[i]} from the Sun?", p, [q for q in PLANETS if q != p])
        for i, p in enumerate(PLANETS)
        if i > 0
    ]
    fam["planets"] += [
        (
            f"Which planet comes right after {p} in order from the Sun?",
            PLANETS[i + 1],
            [q for q in PLANETS if q != PLANETS[i + 1]],
        )
        for i, p in enumerate(PLANETS[:-1])
    ]
    fam["shapes"] = [
        (f"How many sides does {an(shape)} have?", str(n), [str(m) for _, m in POLYGONS if m != n])
        for shape, n in POLYGONS
    ]
    return fam

"""worthit_gsm: one- and two-step arithmetic word problems in GSM8K's schema, every worked step an
``a op b = c`` line that computes, the answer after ``####``."""

from __future__ import annotations

import random

from worthit.taskdata.tables import PEOPLE, table

THINGS: tuple[str, ...] = tuple(table("gsm.json")["things"])


def _item(rng: random.Random) -> dict[str, str]:
    name, pron = rng.choice(PEOPLE)
    thing = rng.choice(THINGS)
    kind = rng.choice(("add", "sub", "mul", "add_sub", "div"))
    cap = pron.capitalize()
    if kind == "add":
        a, b = rng.randint(2, 40), rng.randint(2, 40)
        q = f"{name} has {a} {thing}. {cap} gets {b} more {thing}. How many {thing} does {name} have now?"
        steps, ans = [f"{name} has {a} + {b} = {a + b} {thing}."], a + b
    elif kind == "sub":
        a = rng.randint(10, 60)
        b = rng.randint(1, a - 1)
        q = f"{name} has {a} {thing}. {cap} gives away {b} {thing}. How many {thing} does {name} have left?"
        steps, ans = [f"{name} has {a} - {b} = {a - b} {thing} left."], a - b
    elif kind == "mul":
        a, b = rng.randint(2, 9), rng.randint(2, 9)
        q = f"{name} has {a} boxes. Each box holds {b} {thing}. How many {thing} does {name} have in total?"
        steps, ans = [f"{name} has {a} * {b} = {a * b} {thing}."], a * b
    elif kind == "div":
        b, c = rng.randint(2, 6), rng.randint(2, 9)
        a = b * c
        q = f"{name} shares {a} {thing} equally among {b} friends. How many {thing} does each friend get?"
        steps, ans = [f"Each friend gets {a} / {b} = {c} {thing}."], c
    else:
        a, b = rng.randint(5, 30), rng.randint(2, 20)
        c = rng.randint(1, a + b - 1)
        q = (
            f"{name} has {a} {thing}. {cap} buys {b} more and then gives {c} to a friend. "
            f"How many {thing} does {name} have now?"
        )
        steps = [
            f"After buying, {name} has {a} + {b} = {a + b} {thing}.",
            f"After giving some away, {pron} has {a + b} - {c} = {a + b - c} {thing}.",
        ]
        ans = a + b - c
    return {"question": q, "answer": " ".join(steps) + f"\n#### {ans}"}


def original_items(rng: random.Random, n: int) -> list[dict[str, str]]:
    """``n`` distinct problems of the original kinds."""
    out: list[dict[str, str]] = []
    seen: set[str] = set()
    while len(out) < n:
        item = _item(rng)
        if item["question"] not in seen:
            seen.add(item["question"])
            out.append(item)
    return out


def _added_item(rng: random.Random) -> dict[str, str]:
    """The added problems: the original kinds half of the time, two-step kinds otherwise."""
    if rng.random() < 0.5:
        return _item(rng)
    name, pron = rng.choice(PEOPLE)
    thing = rng.choice(THINGS)
    kind = rng.choice(("packs", "change", "pages", "two_gifts", "half"))
    if kind == "packs":
        a, b, c = rng.randint(2, 9), rng.randint(3, 12), rng.randint(1, 9)
        q = (
            f"{name} buys {a} packs of {thing} with {b} {thing} in each pack, and {c} loose {thing}. "
            f"How many {thing} does {name} have?"
        )
        steps = [f"The packs hold {a} * {b} = {a * b} {thing}.", f"With the loose ones, {a * b} + {c} = {a * b + c}."]
        ans = a * b + c
    elif kind == "change":
        price, n = rng.randint(2, 9), rng.randint(2, 6)
        bill = next(x for x in (20, 50, 100) if x > price * n)
        q = (
            f"{thing.capitalize()} cost {price} dollars each. {name} buys {n} of them and pays with a {bill}-dollar "
            f"bill. How many dollars of change does {name} get?"
        )
        steps = [
            f"{n} {thing} cost {n} * {price} = {n * price} dollars.",
            f"The change is {bill} - {n * price} = {bill - n * price} dollars.",
        ]
        ans = bill - n * price
    elif kind == "pages":
        r, d, e = rng.randint(5, 30), rng.randint(2, 7), rng.randint(3, 40)
        q = (
            f"{name} reads {r} pages of a book every day for {d} days, and then {e} more pages on Sunday. "
            f"How many pages does {name} read in all?"
        )
        steps = [f"In {d} days {pron} reads {r} * {d} = {r * d} pages.", f"In all, {r * d} + {e} = {r * d + e} pages."]
        ans = r * d + e
    elif kind == "two_gifts":
        b, c = rng.randint(2, 20), rng.randint(2, 20)
        a = rng.randint(b + c + 1, b + c + 40)
        q = (
            f"{name} has {a} {thing}. {pron.capitalize()} gives {b} to a brother and {c} to a sister. "
            f"How many {thing} does {name} have left?"
        )
        steps = [
            f"After the brother, {a} - {b} = {a - b} {thing}.",
            f"After the sister, {a - b} - {c} = {a - b - c} {thing}.",
        ]
        ans = a - b - c
    else:
        h, b = rng.randint(3, 30), rng.randint(2, 25)
        a = 2 * h
        q = (
            f"{name} has {a} {thing} and gives half of them to a friend. Then {pron} buys {b} more. "
            f"How many {thing} does {name} have now?"
        )
        steps = [f"Half of {a} is {a} / 2 = {h} {thing}.", f"Then {h} + {b} = {h + b} {thing}."]
        ans = h + b
    return {"question": q, "answer": " ".join(steps) + f"\n#### {ans}"}


def added_items(rng: random.Random, n: int, seen: set[str]) -> list[dict[str, str]]:
    """``n`` more problems, none of them asked before (``seen``, the questions so far, grows with them)."""
    out: list[dict[str, str]] = []
    while len(out) < n:
        item = _added_item(rng)
        if item["question"] not in seen:
            seen.add(item["question"])
            out.append(item)
    return out

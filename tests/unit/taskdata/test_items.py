"""The offline tasks at full size: at least 500 items each, the same bytes on every machine, and every
item's answer checked against the facts it was made from (tables, or numbers recomputed from the text)."""

from __future__ import annotations

import json
import os
import re
import subprocess
import sys
from collections import Counter
from importlib import resources
from pathlib import Path

import pytest

from worthit import taskdata
from worthit.taskdata import arc, hellaswag

ROOT = Path(__file__).resolve().parents[3]
DATA = taskdata.generate()
EVALUATED = {"worthit_hellaswag": "validation", "worthit_arc": "test", "worthit_gsm": "test"}


@pytest.mark.parametrize("task", taskdata.TASKS)
def test_every_task_has_at_least_500_distinct_evaluated_items(task):
    items = DATA[task][EVALUATED[task]]
    assert len(items) >= 500
    assert len({json.dumps(it, sort_keys=True) for it in items}) == len(items)
    assert sum(taskdata.families(task).values()) == len(items)
    assert sum(taskdata.families(task, 300).values()) == 300


def test_the_bytes_do_not_depend_on_the_interpreter_run(tmp_path):
    """Two interpreters with different hash seeds write identical task files (no set or dict order leaks)."""
    outs = []
    for seed in ("1", "2"):
        out = tmp_path / seed
        env = {**os.environ, "PYTHONHASHSEED": seed, "PYTHONPATH": str(ROOT / "src")}
        subprocess.run([sys.executable, "-m", "worthit.taskdata", str(out)], check=True, env=env, capture_output=True)
        outs.append({p.relative_to(out): p.read_bytes() for p in sorted(out.rglob("*.jsonl"))})
    assert outs[0] == outs[1] and len(outs[0]) == 6


def test_the_written_task_files_are_the_package_s_own_with_absolute_data_files(tmp_path):
    """What lm-eval reads is the package data's task files (found through importlib.resources, as an
    installed package has them), only each YAML's data_files made absolute."""
    shipped = resources.files("worthit") / "data" / "tasks"
    taskdata.write_tasks(tmp_path / "out")
    out = (tmp_path / "out").resolve()
    assert (out / "worthit_utils.py").read_bytes() == (shipped / "worthit_utils.py").read_bytes()
    for task in taskdata.TASKS:
        written = (out / f"{task}.yaml").read_text()
        assert f'"{out}/{task}/' in written
        assert written.replace(f'"{out}/', '"') == (shipped / f"{task}.yaml").read_text()


def test_a_limit_of_the_original_size_keeps_to_the_original_families():
    assert taskdata.families("worthit_hellaswag", 126) == {"activities": 126}
    assert taskdata.families("worthit_arc", 105) == {"science facts": 105}
    assert taskdata.families("worthit_gsm", 128) == {"one- and two-step problems": 128}
    # past them, every added family turns up within one round
    n_arc = len(arc.added_rows())
    assert len(taskdata.families("worthit_arc", 105 + n_arc)) == 1 + n_arc
    assert len(taskdata.families("worthit_hellaswag", 126 + 4)) == 1 + 4
    with pytest.raises(KeyError, match="hellaswag"):
        taskdata.families("hellaswag")


def test_hellaswag_every_label_has_one_ending_and_wrong_endings_come_from_other_families():
    table = hellaswag.ACTIVITIES
    assert len({a[0] for a in table}) == len(table) == len({a[3] for a in table})
    family_of_ending = {a[3]: hellaswag.FAMILY_OF[i] for i, a in enumerate(table)}
    ending_of = {a[0]: a[3] for a in table}
    items = DATA["worthit_hellaswag"]["validation"]
    for it in items[126:]:
        gold = int(it["label"])
        assert it["endings"][gold] == ending_of[it["activity_label"]]
        family = family_of_ending[it["endings"][gold]]
        assert all(family_of_ending[e] != family for i, e in enumerate(it["endings"]) if i != gold), it
        assert "{" not in it["ctx"] and it["ctx"] == f"{it['ctx_a']} {it['ctx_b']}"
    # every added activity appears once per round, with a different person each time
    added = Counter(it["activity_label"] for it in items[126:])
    assert set(added.values()) == {hellaswag.MORE_VARIANTS}
    assert Counter(int(it["label"]) for it in items).most_common(1)[0][1] / len(items) < 0.3


# --------------------------------------------------------------------------------------------- ARC
_TABLE_CHECKS = {
    r"What is the chemical symbol for (.+)\?": lambda m: dict(arc.ELEMENTS)[m[1]],
    r"Which element has the chemical symbol (\w+)\?": lambda m: {s: e for e, s in arc.ELEMENTS}[m[1]],
    r"What is a young (.+) called\?": lambda m: arc.an(dict(arc.YOUNG)[m[1]]),
    r"How many sides does an? (\w+) have\?": lambda m: str(dict(arc.POLYGONS)[m[1]]),
    r"Which planet is (\w+) from the Sun\?": lambda m: arc.PLANETS[arc.ORDINALS.index(m[1])],
    r"Which planet comes right after (\w+) in order from the Sun\?": lambda m: arc.PLANETS[arc.PLANETS.index(m[1]) + 1],
    r"The (.+) is a unit of which quantity\?": lambda m: {u: q for q, u in arc.UNITS}[m[1]],
    r"What state of matter is (.+) at room temperature\?": lambda m: next(
        s for s, xs in arc.STATES.items() if m[1] in xs
    ),
    # numbers recomputed from the question
    r"How many (\w+) are in (\d+) (\w+)s\?": lambda m: str(
        int(m[2]) * next(f for big, small, f in arc.CONVERSIONS if (big, small) == (m[3], m[1]))
    ),
    r"A car travels (\d+) kilometers in (\d+) hours": lambda m: f"{int(m[1]) // int(m[2])} kilometers per hour",
    r"accelerate a (\d+)-kilogram cart at (\d+) meters": lambda m: f"{int(m[1]) * int(m[2])} newtons",
    r"A current of (\d+) amperes flows through a (\d+)-ohm": lambda m: f"{int(m[1]) * int(m[2])} volts",
    r"a force of (\d+) newtons pushes a box (\d+) meters": lambda m: f"{int(m[1]) * int(m[2])} joules",
}


def _animal_class(name: str) -> str:
    classes = {c: arc.ANIMAL_CLASSES[c] + arc.MORE_ANIMALS[c] for c in arc.ANIMAL_CLASSES}
    (cls,) = [c for c, xs in classes.items() if name in xs]
    return cls


def _arc_answer(question: str, choices: list[str]) -> str:
    """The one right choice, worked out from the facts and arithmetic behind the question alone."""
    if m := re.fullmatch(r"Which of these animals is an? (\w+)\?", question):
        (right,) = [c for c in choices if _animal_class(c) == m[1]]
        return right
    if m := re.fullmatch(r"What kind of animal is an? (.+)\?", question):
        return arc.an(_animal_class(m[1]))
    for pattern, answer in _TABLE_CHECKS.items():
        if m := re.search(pattern, question):
            return answer(m)
    raise AssertionError(f"no check for {question!r}")


def test_arc_every_added_item_has_exactly_the_right_answer_as_its_key():
    items = DATA["worthit_arc"]["test"][105:]
    assert len(items) >= 400
    for it in items:
        text, labels = it["choices"]["text"], it["choices"]["label"]
        assert len(set(text)) == 4 and labels == ["A", "B", "C", "D"]
        right = _arc_answer(it["question"], text)
        assert text.count(right) == 1 and text[labels.index(it["answerKey"])] == right, it
    assert len({it["id"] for it in DATA["worthit_arc"]["test"]}) == len(DATA["worthit_arc"]["test"])


def test_arc_no_room_temperature_item_calls_ice_a_solid_or_steam_a_gas():
    for it in DATA["worthit_arc"]["test"] + DATA["worthit_arc"]["train"]:
        if "room temperature" in it["question"]:
            assert not {"ice", "steam"} & set(it["choices"]["text"]), it


# --------------------------------------------------------------------------------------------- GSM
def test_gsm_every_step_computes_from_the_question_and_the_final_answer_is_the_last_result():
    data = DATA["worthit_gsm"]
    assert not {it["question"] for it in data["test"]} & {it["question"] for it in data["train"]}
    kinds = Counter()
    for it in data["test"]:
        steps, final = it["answer"].split("\n#### ")
        known = {int(x) for x in re.findall(r"\d+", it["question"])} | {2}  # "half" divides by 2
        ops = re.findall(r"(\d+) ([-+*/]) (\d+) = (\d+)", steps)
        assert ops, it
        for a, op, b, c in ops:
            assert {int(a), int(b)} <= known, it  # operands come from the question or an earlier step
            assert eval(f"{a} {op} {b}") == int(c), it  # noqa: S307 - digits and one operator
            known.add(int(c))
        assert int(final) == int(ops[-1][3]) >= 0
        kinds[len(ops)] += 1
    assert kinds[2] > 200  # the added problems are mostly two-step

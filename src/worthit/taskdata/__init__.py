"""The offline accuracy tasks the embedded default study runs: written by the project, generated here.

No hub is reachable on the machines the embedded default targets, and no package ships HellaSwag, ARC
or GSM8K data. So this module generates three tasks in the same shapes (and the original datasets'
JSONL schemas), deterministically from a fixed seed, and writes lm-eval task YAMLs that read them
through ``dataset_path: json``:

- ``worthit_hellaswag``: 4-way sentence completion (HellaSwag schema: ``activity_label``, ``ctx_a``,
  ``ctx_b``, ``endings``, ``label``); the wrong endings belong to other everyday activities. 626 items:
  167 activities (42 original, then tools, places, jobs, situations), each with its one right ending.
- ``worthit_arc``: 4-choice science questions (ARC schema: ``question``, ``choices.{text,label}``,
  ``answerKey``) from fact tables (animal classes, organs, units, states of matter, chemical symbols,
  young animals, planets, shapes) and from numbers computed from the question (unit conversions,
  speed, force, voltage, work). 602 items.
- ``worthit_gsm``: arithmetic word problems, generate-until with exact match on the number after
  ``####`` (GSM8K schema: ``question``, ``answer``); every worked step is an ``a op b = c`` line that
  computes. 600 items.

Each task holds at least 500 evaluated items, so a real model's paired differences can decide a
3-point non-inferiority bound. The original items (126, 105, 128) come first and are unchanged, so a
``limit`` no larger than those evaluates what it did before; :func:`families` says which families the
first N items were drawn from.

The package data hold what is not code (``worthit/data/README.md`` describes each file):

- ``data/task_tables/*.json``: the facts the items are made from (activities, people, fact tables).
- ``data/tasks/``: the lm-eval task files, as lm-eval ships its own (``lm_eval/tasks/hellaswag/``): one
  YAML per task, whose ``data_files`` name the splits relative to the include path, and
  ``worthit_utils.py`` (the hellaswag task's ``process_docs``). :func:`write_tasks` copies them, the
  ``data_files`` made absolute, beside the generated JSONL splits.

The names carry a ``worthit_`` prefix so they never shadow lm-eval's own ``hellaswag``, ``arc_easy``,
``arc_challenge`` and ``gsm8k``, which real studies name and lm-eval fetches as usual. Standard library
only: this runs in the workflow environment.

Run ``python -m worthit.taskdata DIR`` to write the tasks for a hand-run ``lm_eval --include_path DIR``.
"""

from __future__ import annotations

import argparse
import json
import random
from collections.abc import Sequence
from pathlib import Path
from typing import Any

from worthit.taskdata import arc, gsm, hellaswag
from worthit.taskdata.tables import DATA, round_robin

SEED = 20261129
TASKS = ("worthit_hellaswag", "worthit_arc", "worthit_gsm")
# lm-eval output types, so the accuracy stage knows which tasks need prompt logprobs.
OUTPUT_TYPES = {
    "worthit_hellaswag": "multiple_choice",
    "worthit_arc": "multiple_choice",
    "worthit_gsm": "generate_until",
}
TASK_FILES = DATA / "tasks"  # the lm-eval task files write_tasks copies
_UTILS = "worthit_utils.py"  # the module the hellaswag YAML's process_docs names
_DATA_FILES = "\n  data_files: "  # the YAML line that names a task's splits

# Evaluated items per task (at least 500 each, so a 3-point non-inferiority bound on paired differences
# can be decided for a real model). The original items come first in every task, unchanged, so a
# study's limit of at most 126 (hellaswag), 105 (arc) or 128 (gsm) items evaluates what it did before.
GSM_TEST_ITEMS = 600


def _build() -> tuple[dict[str, dict[str, list[dict[str, Any]]]], dict[str, list[str]]]:
    """Every task's splits, and the family of each evaluated item (task -> one name per item, in order)."""
    rng = random.Random(SEED)
    arc_rows = arc.original_rows()
    # A fixed sixth of the original questions is the few-shot pool, the rest the evaluated split.
    arc_train = [r for i, r in enumerate(arc_rows) if i % 6 == 5]
    arc_test = [r for i, r in enumerate(arc_rows) if i % 6 != 5]
    gsm_items = gsm.original_items(rng, 160)
    hs_val = hellaswag.original_items(rng, 126, 0)
    hs_train = hellaswag.original_items(rng, 24, 5)
    arc_test_items = arc.to_items(rng, arc_test, "test")
    arc_train_items = arc.to_items(rng, arc_train, "train")
    # The added items come from a generator of their own, so the original ones stay as they were.
    more = random.Random(SEED + 1)
    hs_more = hellaswag.added_items(more, len(hs_val))
    arc_families = arc.added_rows()
    arc_more = arc.to_items(more, round_robin(list(arc_families.values())), "test", len(arc_test_items))
    gsm_more = gsm.added_items(more, GSM_TEST_ITEMS - 128, {it["question"] for it in gsm_items})
    data = {
        "worthit_hellaswag": {"validation": hs_val + hs_more, "train": hs_train},
        "worthit_arc": {"test": arc_test_items + arc_more, "train": arc_train_items},
        "worthit_gsm": {"test": gsm_items[:128] + gsm_more, "train": gsm_items[128:]},
    }
    families = {
        "worthit_hellaswag": ["activities"] * len(hs_val)
        + [hellaswag.FAMILY_OF[int(it["source_id"][8:])] for it in hs_more],
        "worthit_arc": ["science facts"] * len(arc_test_items)
        + round_robin([[f] * len(rows) for f, rows in arc_families.items()]),
        "worthit_gsm": ["one- and two-step problems"] * 128 + ["more two-step problems"] * len(gsm_more),
    }
    return data, families


def generate() -> dict[str, dict[str, list[dict[str, Any]]]]:
    """Every task's splits (task -> split -> rows), the same on every call and every machine."""
    return _build()[0]


def families(task: str, limit: int | None = None) -> dict[str, int]:
    """How many of the first ``limit`` evaluated items (all when None) of ``task`` each family holds: what
    an accuracy figure on a worthit task was measured on."""
    if task not in TASKS:
        raise KeyError(f"{task!r} is not one of worthit's offline tasks {TASKS}")
    counts: dict[str, int] = {}
    for f in _build()[1][task][:limit]:
        counts[f] = counts.get(f, 0) + 1
    return counts


def _task_yaml(task: str, dest: Path) -> tuple[str, dict[str, Path]]:
    """``task``'s YAML as shipped in ``data/tasks/`` with its ``data_files`` made absolute under ``dest``
    (lm-eval's json loader resolves relative paths against the working directory, not the YAML), and
    where each split goes."""
    text = (TASK_FILES / f"{task}.yaml").read_text(encoding="utf-8")
    head, line, rest = text.partition(_DATA_FILES)
    mapping, newline, tail = rest.partition("\n")
    if not line:
        raise ValueError(f"data/tasks/{task}.yaml names no data_files")
    files = {split: dest / rel for split, rel in json.loads(mapping).items()}
    return head + line + json.dumps({split: str(path) for split, path in files.items()}) + newline + tail, files


def write_tasks(dest: str | Path) -> list[str]:
    """Write every task's JSONL splits and YAML under ``dest`` (an lm-eval include path), and the
    hellaswag task's ``worthit_utils.py``; return the task names."""
    dest = Path(dest).resolve()
    dest.mkdir(parents=True, exist_ok=True)
    for task, splits in generate().items():
        text, files = _task_yaml(task, dest)
        if set(files) != set(splits):
            raise ValueError(f"data/tasks/{task}.yaml names the splits {sorted(files)}, not {sorted(splits)}")
        for split, path in files.items():
            path.parent.mkdir(parents=True, exist_ok=True)
            path.write_text("".join(json.dumps(r, sort_keys=True) + "\n" for r in splits[split]), encoding="utf-8")
        (dest / f"{task}.yaml").write_text(text, encoding="utf-8")
    (dest / _UTILS).write_text((TASK_FILES / _UTILS).read_text(encoding="utf-8"), encoding="utf-8")
    return list(TASKS)


def main(argv: Sequence[str] | None = None) -> int:
    p = argparse.ArgumentParser(
        prog="python -m worthit.taskdata", description="Write worthit's offline lm-eval tasks (YAML + JSONL)."
    )
    p.add_argument("dest", type=Path, help="folder to pass to lm_eval --include_path")
    ns = p.parse_args(argv)
    for name in write_tasks(ns.dest):
        print(name)
    return 0

"""docs/architecture.md walks prefix caching from its config key to its verdict through its own files and at
most three shared ones; the walk's list of files is true: each exists, the experiment's folder holds no module
the walk leaves out, and none of its own files imports another experiment."""

from __future__ import annotations

import re

from tests.conftest import ROOT

FOLDER = "src/worthit/experiments/prefix/"


def _walk() -> tuple[list[str], list[str]]:
    text = (ROOT / "docs/architecture.md").read_text()
    start = text.index("Files of the walk, its own:")
    own_part, shared_part = text[start:].split("Shared, three:", 1)
    shared_part = shared_part.split("`tests/unit/report/test_architecture_walk.py`", 1)[0]
    paths = re.compile(r"`([\w./-]+\.(?:py|yaml|smk))`")
    return paths.findall(own_part), paths.findall(shared_part)


def test_the_prefix_walk_names_files_that_exist_and_at_most_three_shared_ones() -> None:
    own, shared = _walk()
    missing = [p for p in [*own, *shared] if not (ROOT / p).is_file()]
    assert own and not missing, missing
    assert all(p.startswith(FOLDER) or "prefix" in p.rsplit("/", 1)[-1] for p in own)
    assert 1 <= len(shared) <= 3 and not any(p.startswith(FOLDER) for p in shared)


def test_the_walk_leaves_no_module_of_the_folder_out_and_no_other_experiment_is_imported() -> None:
    own, _ = _walk()
    folder = {str(p.relative_to(ROOT)) for p in (ROOT / FOLDER).iterdir() if p.suffix in (".py", ".yaml")}
    assert folder <= set(own), sorted(folder - set(own))
    other = re.compile(r"worthit\.experiments\.(?!prefix\b)\w+")
    imports = {p: other.findall((ROOT / p).read_text()) for p in own}
    assert not {p: m for p, m in imports.items() if m}

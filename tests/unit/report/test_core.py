"""The shared report core (src/worthit/report/, less the experiments' own folders) names no experiment: an
experiment's row names, headline pieces, plausibility checks, accuracy columns, tables built from the verdicts,
page sections and terminal lines come from the hooks it registers (:mod:`worthit.report.experiments`: ``change``,
``flags``, ``helper``, ``findings``, ``checks``, ``model_name``, ``kv_scales_of``, ``asks_accuracy``,
``why_no_accuracy``, ``verdict_columns``, ``failures``, ``verdict_views``, ``after_decision``, ``provenance``,
``commands``, ``summary``; a measurement's ``levels`` and ``machine_free`` tables), and the core iterates the
registered experiments. An experiment is named in code by its key as a string (``"specdec"``), its config
section (``cfg["specdec"]``) or its module (``worthit.experiments.specdec``)."""

from __future__ import annotations

import re
from pathlib import Path

from tests.conftest import ROOT
from worthit import measurements
from worthit.report import experiments

CORE = [*sorted((ROOT / "src/worthit/report").glob("*.py")), ROOT / "src/worthit/report/experiments/__init__.py"]

# The experiments the core still names, each (module, experiment) with what is left to move behind a hook.
# None is left; nothing may be added here.
NOT_YET: dict[tuple[str, str], str] = {}


def _names() -> set[str]:
    return {e.name for e in experiments.registered()} | {m.name for m in measurements.registered()}


def _mentions(path: Path, name: str) -> list[int]:
    n = re.escape(name)
    pattern = re.compile(rf"""["']{n}["']|\bexperiments\.{n}\b""")
    return [i for i, line in enumerate(path.read_text().splitlines(), 1) if pattern.search(line)]


def test_the_report_core_names_no_experiment_beyond_what_is_left_to_move() -> None:
    found = {(p.name, n): _mentions(p, n) for p in CORE for n in _names()}
    found = {k: v for k, v in found.items() if v}
    new = {f"src/worthit/report/{k[0]}:{v[0]} names {k[1]!r}" for k, v in found.items() if k not in NOT_YET}
    assert not new, f"the report core names an experiment; give the experiment a hook instead: {sorted(new)}"
    moved = sorted(k for k in NOT_YET if k not in found)
    assert not moved, f"no longer named: remove {moved} from NOT_YET"


def test_prefix_caching_and_speculative_decoding_are_named_only_in_their_folders() -> None:
    assert not {n for _, n in NOT_YET} & {"prefix", "specdec"}
    assert {"prefix", "specdec"} <= _names()

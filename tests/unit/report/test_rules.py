"""The ``decide:`` section has one door, :class:`worthit.report.rules.Rules`, and its defaults are written once,
in config/schema.yaml: a Rules built in code, a config without the section and the schema agree, a change to
the schema's default changes the rules, and no other module of the package or the workflow reads the section."""

from __future__ import annotations

import re
from pathlib import Path
from typing import Any

import pytest
import yaml

from tests.conftest import ROOT
from worthit.config import load_schema, validate
from worthit.report import rules as rules_mod
from worthit.report.rules import Rules

# Modules that name the section without reading a rule from it, and why.
ALLOWED = {
    "src/worthit/report/rules.py": "the door itself",
    "src/worthit/tune/studies.py": "writes the section of the tune's own studies (no effort labels)",
}


def _schema_decide() -> dict[str, Any]:
    doc = yaml.safe_load((ROOT / "config" / "schema.yaml").read_text())
    return dict(doc["properties"]["decide"]["properties"])


def test_the_rules_defaults_are_the_schemas() -> None:
    props = _schema_decide()
    knee = props["knee"]["properties"]
    for r in (Rules(), Rules.from_config({}), Rules.from_config({"decide": None})):
        assert r.min_speedup == props["min_speedup"]["default"]
        assert r.min_predicted_speedup == props["min_predicted_speedup"]["default"]
        assert r.max_accuracy_drop_pt == props["max_accuracy_drop_pt"]["default"]
        assert (r.max_harm_pct, r.max_harm_ms) == (props["max_harm_pct"]["default"], props["max_harm_ms"]["default"])
        assert r.knee_throughput_fraction == knee["throughput_fraction"]["default"]
        assert r.knee_latency_factor == knee["latency_factor"]["default"]


def test_a_validated_config_and_the_bare_one_read_alike() -> None:
    cfg = yaml.safe_load((ROOT / "config" / "config.yaml").read_text())
    cfg.pop("decide", None)
    assert Rules.from_config(validate(cfg)) == Rules.from_config(cfg) == Rules()
    assert "decide" in load_schema()["properties"]


def test_a_changed_schema_default_changes_the_rules(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    text = (ROOT / "config" / "schema.yaml").read_text()
    changed = re.sub(r"(min_predicted_speedup: \{[^}]*default: )1\.3", r"\g<1>1.7", text, count=1)
    assert changed != text
    (tmp_path / "schema.yaml").write_text(changed)
    monkeypatch.setattr("worthit.config.SCHEMA_PATH", tmp_path / "schema.yaml")
    rules_mod.schema_defaults.cache_clear()
    try:
        assert Rules().min_predicted_speedup == Rules.from_config({}).min_predicted_speedup == 1.7
    finally:
        rules_mod.schema_defaults.cache_clear()


def test_no_other_module_reads_the_decide_section() -> None:
    raw = re.compile(r"""\.get\(\s*["']decide["']|\[\s*["']decide["']\s*\]""")
    found = []
    for top in ("src/worthit", "workflow"):
        for p in sorted((ROOT / top).rglob("*")):
            if p.suffix not in (".py", ".smk") and p.name != "Snakefile":
                continue
            rel = str(p.relative_to(ROOT))
            if rel in ALLOWED:
                continue
            found += [f"{rel}:{i}" for i, line in enumerate(p.read_text().splitlines(), 1) if raw.search(line)]
    assert found == [], f"read decide: through Rules.from_config instead: {found}"

"""The committed embedded-default study (tests/fixtures/embedded-default) as fixtures for the report's tests:
its validated config, and a copy of its results to change in a test's own folder (tests/unit/conftest.py
offers them to every unit test by name; a module's own fixture of the same name takes precedence)."""

from __future__ import annotations

import json
import shutil
from pathlib import Path
from typing import Any

import pyarrow.parquet as pq
import pytest
import yaml

from worthit import paths
from worthit.config import validate

FIXTURE = Path(__file__).resolve().parents[1] / "fixtures" / "embedded-default"


@pytest.fixture
def cfg() -> dict[str, Any]:
    return validate(yaml.safe_load((FIXTURE / "config.yaml").read_text()))


@pytest.fixture
def results(tmp_path: Path) -> Path:
    out = tmp_path / "results"
    shutil.copytree(FIXTURE, out, ignore=shutil.ignore_patterns("config.yaml"))
    return out


def placed(path: Path) -> None:
    """Rewrite a result file's metadata to say what its place says (the variant of its folder; a load run's
    concurrency and run from its name), as the workflow would have written it there: a test that copies one
    variant's or level's files to make another's (worthit refuses a file whose metadata names another place)."""
    place = paths.parse(path)
    table = pq.read_table(path)
    meta = dict(table.schema.metadata or {})
    meta[b"worthit.variant"] = json.dumps(place.variant).encode()
    if place.kind == "load/conc":
        meta[b"worthit.concurrency"] = str(place.value).encode()
        meta[b"worthit.repeat"] = str(place.run).encode()
    pq.write_table(table.replace_schema_metadata(meta), path)


def copy_result(src: Path, dst: Path) -> None:
    """``src`` copied to ``dst`` as the result of ``dst``'s place (:func:`placed`)."""
    shutil.copy(src, dst)
    placed(dst)


def copy_variant(src: Path, dst: Path, ignore: Any = None) -> None:
    """A variant's folder copied to another variant's, each file the result of its new place."""
    shutil.copytree(src, dst, ignore=ignore)
    for p in sorted(dst.rglob("*.parquet")):
        placed(p)

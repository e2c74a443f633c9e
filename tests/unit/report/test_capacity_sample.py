"""The 24 GiB-pool sample (examples/h200-qwen/7b-24gb): its report rebuilt from the raw results kept compact
(tests/fixtures/evidence), checked against the committed tables and against what the sample's README and
docs/hardware-results.md say it measured: the capacity half of the seed's headline."""

from __future__ import annotations

from pathlib import Path

import pandas as pd
import pytest

from tests import evidence
from worthit.config import load
from worthit.report import build

SAMPLE = Path(__file__).resolve().parents[3] / "examples" / "h200-qwen" / "7b-24gb"
CONFIG = Path(__file__).resolve().parents[3] / "config" / "studies" / "h100-qwen2.5-7b-24gb.yaml"


@pytest.fixture(scope="module")
def rebuilt(tmp_path_factory: pytest.TempPathFactory) -> Path:
    results = evidence.compact("h200-qwen/7b-24gb") / "results"
    out = tmp_path_factory.mktemp("cap") / "report"
    build.write_tables(build.from_dir(load(CONFIG), results), out, {})
    return out


@pytest.mark.parametrize("table", ["capacity", "levels", "sweet_spot", "token_cost", "verdicts", "timeline"])
def test_the_committed_tables_are_what_the_raw_results_give(rebuilt: Path, table: str) -> None:
    kept = pd.read_csv(SAMPLE / "results" / "report" / f"{table}.csv")
    again = pd.read_csv(rebuilt / f"{table}.csv")
    pd.testing.assert_frame_equal(kept, again, check_exact=False, rtol=1e-9)


def test_int4_frees_the_pool_bf16_runs_out_of(rebuilt: Path) -> None:
    cap = pd.read_csv(rebuilt / "capacity.csv").set_index("variant")
    assert (cap.loc["bf16", "num_blocks"], cap.loc["int4_machete", "num_blocks"]) == (5939, 16468)
    assert round(cap.loc["bf16", "kv_critical_concurrency"]) == 124
    assert round(cap.loc["int4_machete", "kv_critical_concurrency"]) == 343
    # past bf16's critical concurrency the pool binds: preemptions on bf16, none on INT4
    assert cap.loc["bf16", "preemptions"] == 170 and cap.loc["int4_machete", "preemptions"] == 0
    levels = pd.read_csv(rebuilt / "levels.csv").set_index(["variant", "concurrency"])
    out = levels["output_tok_per_s"]
    assert out[("int4_machete", 256)] / out[("bf16", 256)] == pytest.approx(1.31, abs=0.01)
    spots = pd.read_csv(rebuilt / "sweet_spot.csv").set_index("variant")["sweet_spot_concurrency"]
    assert spots.to_dict() == {"bf16": 32, "int4_machete": 32}
    verdict = pd.read_csv(rebuilt / "verdicts.csv").set_index("variant").loc["int4_machete"]
    assert verdict["outcome"] == "adopt" and verdict["throughput_outcome"] == "adopt"

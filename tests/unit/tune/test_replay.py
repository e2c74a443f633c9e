"""benchmarks/tune/replay.py: the strategies replayed on a recorded grid, each measurement one of a point's
recorded runs. Here a grid built by hand, with a known best and the noise of a few percent a CPU shows."""

from __future__ import annotations

import importlib.util
import json
import random
import sys
from pathlib import Path

from tests.conftest import ROOT

spec = importlib.util.spec_from_file_location("tune_replay", ROOT / "benchmarks/tune/replay.py")
replay = importlib.util.module_from_spec(spec)
assert spec.loader is not None
sys.modules["tune_replay"] = replay  # dataclasses look their module up
spec.loader.exec_module(replay)

SEQS, TOKENS = (2, 4, 8, 16), (256, 512, 2048)


def _grid(tmp_path: Path, *, lucky: bool = False) -> Path:
    """Throughput rises with max-num-seqs; the best point (16, 2048) stands 25 % above the rest. With
    ``lucky``, a weaker point has one run far above its others (the run a single-run search keeps)."""
    rng = random.Random(7)
    runs = []
    for s in SEQS:
        for t in TOKENS:
            mean = 100.0 * (1 + 0.1 * SEQS.index(s)) * (1.25 if (s, t) == (16, 2048) else 1.0)
            for r in range(1, 5):
                figure = mean * (1 + rng.gauss(0, 0.03))
                if lucky and (s, t) == (4, 256) and r == 1:
                    figure = 200.0
                runs.append(
                    {
                        "values": {"max-num-seqs": s, "max-num-batched-tokens": t},
                        "run": r,
                        "throughput": figure,
                        "latency": float(s),
                        "server_minutes": 1.5,
                    }
                )
    tune = {
        "space": {"max-num-seqs": list(SEQS), "max-num-batched-tokens": list(TOKENS)},
        "rounds": 6,
        "per_round": 2,
        "confirm": {"top": 2, "repeats": 4},
        "budget": {"server_starts": 24},
    }
    path = tmp_path / "grid.json"
    path.write_text(
        json.dumps({"tune": tune, "defaults": {"max-num-seqs": 16, "max-num-batched-tokens": 512}, "runs": runs})
    )
    return path


def test_every_strategy_is_replayed_on_the_grid_and_auto_tune_spends_the_whole_grid(tmp_path: Path) -> None:
    grid = replay.Grid.load(_grid(tmp_path))
    assert len(grid.runs) == 12 and all(len(r) == 4 for r in grid.runs.values())
    out = replay.replay(grid, "throughput", seeds=6, budget=24)
    at, rnd, wt = (out["strategies"][k] for k in ("auto_tune", "random", "worthit"))
    assert at["starts_median"] == 12 and at["minutes_spent_median"] == 18.0  # one start per point, no repeats
    assert at["reached_within_5pct"] == 6  # the grid holds the best: an exhaustive scan finds it
    assert rnd["starts_median"] == 12  # a budget above the grid: every point once
    # the confirmation measures the top 2 and the defaults 4 times each within the 24 starts
    assert wt["starts_median"] <= 24
    assert wt["winner_within_5pct_pct"] >= 50.0


def test_a_lucky_run_fools_a_single_run_scan_more_often_than_the_confirmed_search(tmp_path: Path) -> None:
    grid = replay.Grid.load(_grid(tmp_path, lucky=True))
    out = replay.replay(grid, "throughput", seeds=20, budget=24)
    at, wt = out["strategies"]["auto_tune"], out["strategies"]["worthit"]
    # auto_tune keeps the lucky point whenever it draws the 200 (one run in four); the confirmation's
    # repeats see through it
    assert at["winner_is_true_best_pct"] < 100.0
    assert wt["winner_is_true_best_pct"] > at["winner_is_true_best_pct"]


grid_spec = importlib.util.spec_from_file_location("tune_grid", ROOT / "benchmarks/tune/grid.py")
grid_mod = importlib.util.module_from_spec(grid_spec)
assert grid_spec.loader is not None
sys.modules["tune_grid"] = grid_mod
grid_spec.loader.exec_module(grid_mod)


def test_the_grid_study_has_one_variant_per_point_and_reads_both_scenarios() -> None:
    from worthit.config import validate

    cfg = validate(
        {
            "models": {"m": {"source": "hf:Qwen/Qwen2.5-7B-Instruct"}},
            "variants": {"bf16": {"model": "m", "engine_args": {"max-model-len": 2048}}},
            "tune": {"space": {"max-num-seqs": [2, 4, 8], "max-num-batched-tokens": {"choices": [256, 2048]}}},
        }
    )
    study = grid_mod.grid_study(cfg)
    assert len(study["variants"]) == 6 and study["baseline_variant"] == "p000"
    p = study["variants"]["p005"]
    assert p["engine_args"] == {"max-model-len": 2048, "max-num-seqs": 8, "max-num-batched-tokens": 2048}
    assert p["experiments"] == ["loadtest"] and "tune" not in study
    validate(study)  # a study the workflow takes as it is

    rows = [
        {
            "status": "ok",
            "concurrency": 1,
            "tpot_ms_p50": 20.0,
            "tpot_ms_p99": 22.0,
            "ttft_ms_p99": 90.0,
            "output_tok_per_s": 50.0,
        },
        {
            "status": "ok",
            "concurrency": 8,
            "tpot_ms_p50": 40.0,
            "tpot_ms_p99": 60.0,
            "ttft_ms_p99": 400.0,
            "output_tok_per_s": 190.0,
        },
        {
            "status": "failed",
            "concurrency": 16,
            "tpot_ms_p50": None,
            "tpot_ms_p99": None,
            "ttft_ms_p99": None,
            "output_tok_per_s": None,
        },
    ]
    slo = {"slo": {"ttft_ms": 200.0, "tpot_ms": 50.0}, "decide": {"throughput_tpot_ms": 50.0}}
    assert grid_mod._figures(rows, slo) == {"throughput": 190.0, "latency": 1.0}

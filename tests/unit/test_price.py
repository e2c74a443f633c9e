"""What a token costs (worthit.price, the report's token_cost table): USD per million output tokens at each
variant's best level under the SLO, energy per output token beside it, and "not priced" / "not measured"
with the reason where there is nothing to state."""

from __future__ import annotations

import io
import shutil
from pathlib import Path

import pytest
import yaml
from rich.console import Console

from tests.conftest import ROOT
from worthit import energy, price
from worthit.config import validate
from worthit.experiments.deploy import token_cost
from worthit.experiments.deploy.tables import REPORT_TOKEN_COST
from worthit.report import build
from worthit.report.terminal import show_summary

FIXTURE = ROOT / "tests" / "fixtures" / "embedded-default"


def test_the_price_of_a_million_tokens_is_the_gpu_hours_they_take():
    # 1,000 tok/s: a million tokens in 1,000 s = 0.2778 GPU-hours at $2.50
    assert price.usd_per_million_tokens(2.5, 1, 1000.0) == pytest.approx(2.5 * 1e6 / 3.6e6)
    assert price.usd_per_million_tokens(2.5, 2, 1000.0) == pytest.approx(2 * 2.5 * 1e6 / 3.6e6)  # TP=2: two GPUs
    assert price.usd_per_million_tokens(2.5, 1, 2000.0) == pytest.approx(price.usd_per_million_tokens(2.5, 1, 1e3) / 2)
    assert price.usd_per_million_tokens(None, 1, 1000.0) is None
    assert price.usd_per_million_tokens(2.5, 1, 0.0) is None and price.usd_per_million_tokens(2.5, 1, None) is None


def test_a_variant_s_own_price_overrides_the_study_s():
    cfg = {"cost": {"usd_per_gpu_hour": 2.5}, "variants": {"a": {}, "b": {"cost": {"usd_per_gpu_hour": 1.0}}}}
    assert price.usd_per_gpu_hour(cfg, "a") == 2.5 and price.usd_per_gpu_hour(cfg, "b") == 1.0
    assert price.usd_per_gpu_hour({"variants": {"a": {}}}, "a") is None


def test_energy_per_token_is_the_mean_over_the_runs_that_measured_it():
    runs = [
        {"energy": {"energy_j_per_output_token": 0.2}},
        {"energy": {"energy_j_per_output_token": 0.4}},
        {"energy": {"energy_j_per_output_token": None, "energy_reason": "not measured: counter reset"}},
    ]
    assert token_cost.level_energy(runs) == (pytest.approx(0.3), 2, None)
    assert token_cost.level_energy(runs[2:]) == (None, 0, "not measured: counter reset")
    assert token_cost.level_energy([{}]) == (None, 0, energy.NOT_RECORDED)


def _report(tmp_path: Path, cost: dict | None) -> list[dict]:
    for d in FIXTURE.glob("variant~*"):  # the recorded study's levels (its summary.parquet predates columns)
        shutil.copytree(d, tmp_path / d.name)
    cfg = validate(yaml.safe_load((FIXTURE / "config.yaml").read_text()), "fixture")
    if cost is not None:
        cfg["cost"] = cost
    return build.from_dir(cfg, tmp_path).rows(REPORT_TOKEN_COST)


def test_the_report_prices_each_variant_s_best_level_under_the_slo(tmp_path: Path):
    rows = {r["variant"]: r for r in _report(tmp_path, {"usd_per_gpu_hour": 2.5})}
    base = rows["baseline"]
    # the recorded baseline: 16 misses the SLO's 250 ms TPOT, 4 meets it with more tok/s than 1
    assert base["concurrency"] == 4 and base["meets_slo"] is True
    assert base["usd_per_million_output_tokens"] == pytest.approx(2.5 / (base["output_tok_per_s"] * 3600) * 1e6)
    assert base["usd_per_million_output_tokens_ci95_low"] < base["usd_per_million_output_tokens"]
    assert base["usd_per_million_output_tokens_ci95_high"] > base["usd_per_million_output_tokens"]
    assert base["price_note"] is None
    # measured on a CPU before energy was read: null with the reason, never a zero
    assert base["energy_j_per_output_token"] is None and base["energy_reason"] == energy.NOT_RECORDED
    out = io.StringIO()
    show_summary([], {"token_cost": list(rows.values())}, console=Console(file=out, width=200))
    text = out.getvalue()
    assert "What a token costs" in text and "baseline at concurrency 4" in text
    assert f"${base['usd_per_million_output_tokens']:.3g} per million output tokens" in text


def test_an_unpriced_study_says_how_to_price_it(tmp_path: Path):
    (base, *_) = _report(tmp_path, None)
    assert base["usd_per_million_output_tokens"] is None and base["price_note"] == price.NOT_PRICED
    assert "not priced (set cost.usd_per_gpu_hour)" in token_cost.summary_lines([base])[0]


def test_an_unpriced_cpu_study_says_it_once_not_once_per_variant(tmp_path: Path):
    rows = _report(tmp_path, None)
    assert len([r for r in rows if r["status"] == "ok"]) > 1
    lines = token_cost.summary_lines(rows)
    assert lines == [f"every variant: {energy.NOT_RECORDED}; {price.NOT_PRICED}"]

"""Prefix-caching analysis: the change of TTFT against the other side, hit rate, slope of TTFT against prefix
length (the report's, the one analysis of the measurement)."""

from __future__ import annotations

import pytest

from worthit.experiments.prefix.analysis import other_side
from worthit.prom import hit_rate
from worthit.stats import slope


def test_hit_rate_is_hit_tokens_over_queried_tokens():
    assert hit_rate({"vllm:prefix_cache_queries_total": 1000, "vllm:prefix_cache_hits_total": 992}) == 0.992
    assert hit_rate({}) is None


def test_slope_is_least_squares_and_skips_missing_points():
    assert slope([0, 1000, 2000], [10.0, 20.0, 30.0]) == pytest.approx(0.01)
    assert slope([0, 1000, 2000], [10.0, None, 30.0]) == pytest.approx(0.01)
    assert slope([1000], [5.0]) is None


def test_the_other_side_is_the_first_variant_measured_at_that_length_with_the_cache_the_other_way():
    measured = [("on", True, 0), ("on", True, 512), ("off_a", False, 0), ("off_b", False, 0), ("off_b", False, 512)]
    assert other_side(measured, 0, cache_on=True) == "off_a"  # the first cache-off variant, in study order
    assert other_side(measured, 512, cache_on=True) == "off_b"  # off_a has no 512: the next one that does
    assert other_side(measured, 512, cache_on=False) == "on"
    assert other_side([("on", True, 0)], 0, cache_on=True) is None


def test_the_report_compares_each_cache_on_length_with_its_other_side_in_one_sign_convention():
    """The committed embedded default: change = (this - other side) / other side, negative where the cache saves."""
    from pathlib import Path

    from worthit.config import load
    from worthit.experiments.prefix.tables import REPORT_PREFIX
    from worthit.report import build

    results = Path(__file__).resolve().parents[4] / "examples" / "embedded-default" / "results"
    view = build.from_dir(load(results / "report" / "config.yaml"), results).view(REPORT_PREFIX)
    rows = {(r["variant"], r["prefix_tokens"]): r for r in view.rows if r.get("status") == "ok"}
    on, off = rows[("baseline", 512)], rows[("no_prefix_cache", 512)]
    assert on["reference"] == "no_prefix_cache" and off["reference"] == "baseline"
    assert on["change_pct"] == pytest.approx((on["ttft_ms_p50"] - off["ttft_ms_p50"]) / off["ttft_ms_p50"] * 100)
    assert on["change_pct"] < -50 < off["change_pct"]  # the cache saves most of a 512-token prefill
    assert on["hit_rate_pct"] > 90


def test_the_prefix_section_is_read_through_one_door_with_its_folders_defaults() -> None:
    from pathlib import Path

    import yaml

    from tests.conftest import ROOT
    from worthit.config import validate
    from worthit.experiments.prefix.section import SECTION_FILE, section

    props = yaml.safe_load(Path(SECTION_FILE).read_text())["prefix"]["properties"]
    bare = section({})
    assert bare.lengths == tuple(props["lengths"]["default"])
    assert (bare.suffix_tokens, bare.num_requests) == (
        props["suffix_tokens"]["default"],
        props["num_requests"]["default"],
    )
    mine = section({"prefix": {"lengths": [0, 64], "suffix_tokens": 8}})
    assert (mine.lengths, mine.prompt_tokens(64), mine.output_tokens) == (
        (0, 64),
        72,
        props["output_tokens"]["default"],
    )
    cfg = yaml.safe_load((ROOT / "config" / "config.yaml").read_text())
    assert section(validate(cfg)) == section(cfg)

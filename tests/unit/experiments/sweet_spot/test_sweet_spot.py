"""The sweet-spot search (experiments.sweet_spot.search): bisection between the last pass and first miss."""

from __future__ import annotations

import pytest

from worthit.config import ConfigError, validate
from worthit.experiments.sweet_spot import search


def threshold(limit: int, seen: list[int] | None = None):
    """A monotone 'meets the SLO' up to ``limit`` concurrent requests, recording what was probed."""

    def measure(c: int) -> bool:
        if seen is not None:
            seen.append(c)
        return c <= limit

    return measure


@pytest.mark.parametrize("limit", [4, 5, 7, 9, 12, 15])
def test_the_bracket_contains_the_true_limit_and_is_within_the_width(limit):
    grid = [(c, c <= limit) for c in (1, 4, 16)]
    seen: list[int] = []
    found = search.search(grid, threshold(limit, seen), width=1)
    assert found.outcome == search.BRACKETED
    assert (found.lo, found.hi) == (limit, limit + 1)
    assert found.sweet_spot == limit
    # every probe lies strictly inside the grid's crossover [4, 16]
    assert all(4 < c < 16 for c in seen)
    assert [p.concurrency for p in found.probes if p.source == "search"] == seen


def test_a_wider_width_stops_earlier_with_fewer_probes():
    grid = [(1, True), (4, True), (64, False)]
    narrow = search.search(grid, threshold(20), width=1)
    wide = search.search(grid, threshold(20), width=8)
    assert wide.hi - wide.lo <= 8 and wide.lo <= 20 < wide.hi
    assert len(wide.probes) < len(narrow.probes)


def test_the_probe_limit_ends_the_search_and_says_so():
    found = search.search([(1, True), (1024, False)], threshold(300), width=1, max_probes=3)
    assert found.outcome == search.PROBE_LIMIT
    assert sum(p.source == "search" for p in found.probes) == 3
    assert found.lo is not None and found.hi is not None and found.lo <= 300 < found.hi
    assert "probe limit" in found.describe()


def test_every_grid_level_passing_starts_no_probe_and_reads_not_reached():
    found = search.search([(1, True), (4, True)], threshold(100))
    assert found.outcome == search.ALL_PASS and found.lo == 4 and found.hi is None
    assert [p.source for p in found.probes] == ["grid", "grid"]
    assert "not reached" in found.describe()


def test_a_failing_lowest_level_is_searched_down_to_one():
    seen: list[int] = []
    found = search.search([(4, False), (16, False)], threshold(1, seen))
    assert (found.lo, found.hi, found.outcome) == (1, 2, search.BRACKETED)
    none = search.search([(1, False), (4, False)], threshold(0))
    assert none.outcome == search.NONE_PASS and none.lo is None and none.hi == 1
    assert "not even" in none.describe()


def test_a_noisy_probe_keeps_the_bracket_the_measurements_imply():
    # 8 passes, 6 misses (noise): the search trusts each probe as it comes, the bracket stays consistent
    answers = {10: False, 7: True, 8: False}
    found = search.search([(4, True), (16, False)], lambda c: answers[c], width=1)
    assert (found.lo, found.hi) == (7, 8)
    assert {(p.concurrency, p.meets) for p in found.probes} >= {(10, False), (7, True), (8, False)}


def test_the_crossover_is_the_last_pass_below_the_first_miss():
    # a pass above the first miss (noise) does not move the crossover up
    assert search.crossover([(1, True), (4, True), (16, False), (64, True)]) == (4, 16)
    assert search.crossover([]) == (None, None)


def test_no_grid_is_an_answer_not_an_error():
    assert search.search([], threshold(1)).outcome == search.NO_GRID


def _cfg(**sweet):
    return {
        "models": {"m": {"source": "path:/x"}},
        "variants": {"base": {"model": "m"}, "kvonly": {"model": "m", "experiments": ["kv"]}},
        "slo": {"ttft_ms": 100},
        "sweet_spot": sweet,
    }


def test_config_names_the_key_and_allowed_values_for_a_bad_sweet_spot():
    with pytest.raises(ConfigError, match=r"study.yaml: key 'sweet_spot.variants\[0\]': unknown variant 'nope'"):
        validate(_cfg(variants=["nope"]), "study.yaml")
    with pytest.raises(ConfigError, match="runs no load test"):
        validate(_cfg(variants=["kvonly"]), "study.yaml")
    with pytest.raises(ConfigError, match="sweet_spot.width"):
        validate(_cfg(variants=["base"], width=0), "study.yaml")
    cfg = _cfg(variants=["base"])
    cfg["slo"] = {}
    with pytest.raises(ConfigError, match="set slo.ttft_ms"):
        validate(cfg, "study.yaml")
    ok = validate(_cfg(variants=["base"]), "study.yaml")
    assert ok["sweet_spot"] == {"variants": ["base"], "width": 1, "max_probes": 6}


def test_the_sweet_spot_section_is_read_through_one_door_with_its_folders_defaults() -> None:
    from pathlib import Path

    import yaml

    from worthit.experiments.sweet_spot.section import SECTION_FILE, section

    props = yaml.safe_load(Path(SECTION_FILE).read_text())["sweet_spot"]["properties"]
    bare = section({})
    assert (bare.variants, bare.width, bare.max_probes) == (
        tuple(props["variants"]["default"]),
        props["width"]["default"],
        props["max_probes"]["default"],
    )
    mine = section({"sweet_spot": {"variants": ["base"], "max_probes": 2}})
    assert (mine.variants, mine.max_probes, mine.width) == (("base",), 2, props["width"]["default"])

"""Which load levels a variant measures (``variant_levels`` of the load test's section): the grid on load-tested
variants, and a workload level on the variants it names, even those that run no grid (a conversation level on the
cache-off variant)."""

from __future__ import annotations

import pytest

from worthit.config import ConfigError, Study, validate
from worthit.experiments.loadtest.section import section as load_section
from worthit.experiments.prefix.section import section as prefix_section


def _study(**level) -> Study:
    return Study(
        validate(
            {
                "models": {"m": {"source": "path:/x"}},
                "variants": {
                    "base": {"model": "m"},
                    "nocache": {"model": "m", "experiments": ["kv", "prefix"]},
                    "fp8": {"model": "m"},
                },
                "workloads": {"chat": {"kind": "conversation", "turns": 2}},
                "loadtest": {"levels": [1, 4], "repeats": 2, "workload_levels": [{"workload": "chat", **level}]},
            }
        )
    )


def test_a_workload_level_naming_variants_runs_on_exactly_those():
    s = _study(concurrency=4, variants=["base", "nocache"])
    lt = load_section(s.cfg)
    assert [lv.name for lv in lt.variant_levels("base")] == ["conc~1", "conc~4", "chat/conc~4"]
    assert [lv.name for lv in lt.variant_levels("nocache")] == ["chat/conc~4"]  # no grid: not load-tested
    assert [lv.name for lv in lt.variant_levels("fp8")] == ["conc~1", "conc~4"]
    assert lt.load_tested == ["base", "nocache", "fp8"]
    # every run of each, in the order measured, and the consumers take their turns in that order
    assert [lv.path(r) for lv, r in lt.level_runs("nocache")] == ["load/chat/conc~4", "load/chat/conc~4.rep~2"]
    assert list(s.consumers("nocache")) == ["kv", "load/chat/conc~4", "load/chat/conc~4.rep~2"] + [
        f"prefix/len~{n}" for n in prefix_section(s.cfg).lengths
    ]


def test_without_variants_a_workload_level_runs_on_every_load_tested_variant():
    lt = load_section(_study(concurrency=2).cfg)
    assert [lv.name for lv in lt.variant_levels("fp8")] == ["conc~1", "conc~4", "chat/conc~2"]
    assert lt.variant_levels("nocache") == []
    assert "nocache" not in lt.load_tested


def test_an_unknown_variant_in_a_workload_level_names_the_key_and_the_allowed_ones():
    with pytest.raises(ConfigError, match=r"loadtest.workload_levels\[0\].variants': unknown variant 'nope'"):
        _study(concurrency=2, variants=["nope"])

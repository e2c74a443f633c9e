"""The ``loadtest:`` section read through one door (``section(cfg)``), with its folder's defaults, and the load
levels it gives each variant, which ``config.Study`` no longer carries."""

from __future__ import annotations

import yaml

from worthit.config import Study, validate
from worthit.experiments.loadtest.section import SECTION_FILE, section
from worthit.loadgen.levels import CONC, RATE, LoadLevel

MIN = {"models": {"m": {"source": "path:/m"}}, "variants": {"a": {"model": "m"}}}
# what Study carried before the load test's folder did: none of it is Study's any more
MOVED = (
    "levels",
    "grid_levels",
    "all_grid_levels",
    "repeats",
    "load_runs",
    "load_name",
    "run_of",
    "num_requests",
    "load_levels",
    "variant_levels",
    "load_tested",
    "level_runs",
    "level",
    "workload_name",
    "workload_files",
    "level_requests",
    "timeline_interval_s",
    "timeline_files",
    "tokens_per_request",
)


def test_the_section_takes_its_folders_defaults_and_reads_as_the_validated_config() -> None:
    props = yaml.safe_load(SECTION_FILE.read_text())["loadtest"]["properties"]
    bare = section(MIN)
    assert bare == section(validate(MIN))  # a config the schema has not filled yet reads the same
    assert bare.levels == tuple(props["levels"]["default"]) and bare.repeats == props["repeats"]["default"]
    assert bare.tokens_per_request == props["prompt_tokens"]["default"] + props["output_tokens"]["default"]
    assert bare.num_requests(1) == props["num_requests"]["properties"]["min"]["default"]
    assert bare.open_loop == {
        "arrival": {"distribution": "poisson", "burstiness": 1.0},
        "max_concurrency": None,
        "rate_tolerance": 0.05,
        "max_queue_delay_ms": 100.0,
    }
    assert bare.load_tested == ["a"] and bare.timeline_files("a") == []


def test_levels_runs_and_workloads_of_each_variant() -> None:
    cfg = validate(
        {
            **MIN,
            "variants": {"a": {"model": "m", "levels": [2]}, "b": {"model": "m", "experiments": ["kv"]}},
            "workloads": {"chat": {"kind": "conversation", "turns": 2}},
            "loadtest": {
                "levels": [1, 4],
                "rates": [2],
                "repeats": 2,
                "workload_levels": [{"workload": "chat", "rate": 0.5, "variants": ["b"]}],
            },
        }
    )
    lt = section(cfg)
    assert lt.all_grid_levels == [1, 4, 2] and lt.grid_levels("a") == [2] and lt.grid_levels("b") == [1, 4]
    assert [x.name for x in lt.load_levels] == ["conc~1", "conc~4", "conc~2", "rate~2", "chat/rate~0.5"]
    assert lt.variant_levels("a") == [LoadLevel(CONC, 2), LoadLevel(RATE, 2.0)]
    assert lt.variant_levels("b") == [lt.level("chat/rate~0.5")] and lt.load_tested == ["a", "b"]
    assert [lv.path(r) for lv, r in lt.level_runs("b")] == ["load/chat/rate~0.5", "load/chat/rate~0.5.rep~2"]
    assert (
        lt.workload_name("b", lt.level("chat/rate~0.5")) == "chat" and lt.workload_name("a", lt.level("conc~2")) is None
    )
    assert lt.level_requests(lt.level("rate~2")) == 120  # 60 s at 2/s
    assert list(Study(cfg).consumers("b")) == ["kv", "load/chat/rate~0.5", "load/chat/rate~0.5.rep~2"]


def test_study_carries_none_of_the_load_tests_accessors() -> None:
    assert [name for name in MOVED if hasattr(Study, name)] == []

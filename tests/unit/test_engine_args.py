"""The four optimisations a Hopper user weighs (FP8 weights, async scheduling, KV offload, suffix decoding):
how the report names and classifies each (worthit.report.context.pair), which decides whether accuracy is
judged, and when vLLM schedules asynchronously (worthit.engine_args.async_scheduling_on)."""

from __future__ import annotations

from typing import Any

import pytest

from worthit import engine_args as eargs
from worthit.config import Study, validate
from worthit.report.context import Context
from worthit.report.data import StudyResults
from worthit.report.evidence import TaskAccuracy
from worthit.report.plausibility import lossless_accuracy


def _ctx(variants: dict[str, Any]) -> Context:
    cfg = {
        "models": {"m": {"source": "hf:Qwen/Qwen2.5-Coder-1.5B-Instruct"}},
        "variants": {"bf16": {"model": "m"}, **variants},
        "baseline_variant": "bf16",
    }
    return Context.of(Study(validate(cfg)), StudyResults(variants={}))


HOPPER = {
    "fp8_weights": {"model": "m", "engine_args": {"quantization": "fp8"}},
    "sync_sched": {"model": "m", "engine_args": {"async-scheduling": False}},
    "kv_offload": {"model": "m", "engine_args": {"kv-offloading-size": 8, "kv-offloading-backend": "native"}},
    "spec_suffix": {"model": "m", "engine_args": {"speculative-config": {"method": "suffix"}}},
}


def test_only_fp8_weights_changes_the_outputs_so_only_it_is_judged_on_accuracy() -> None:
    ctx = _ctx(HOPPER)
    pairs = {v: ctx.pair(v) for v in HOPPER}
    assert not pairs["fp8_weights"].lossless and pairs["fp8_weights"].optimisation == "--quantization fp8 (vs unset)"
    assert all(pairs[v].lossless for v in ("sync_sched", "kv_offload", "spec_suffix"))
    assert pairs["spec_suffix"].optimisation == "speculative decoding (suffix)"
    assert pairs["spec_suffix"].content_dependent  # a drafter: judged on real text
    assert not pairs["kv_offload"].content_dependent and not pairs["fp8_weights"].content_dependent
    assert "--kv-offloading-size 8 (vs unset)" in pairs["kv_offload"].optimisation


def test_turning_async_scheduling_off_is_judged_as_async_scheduling_on_vs_off() -> None:
    # vLLM 0.25 schedules asynchronously by default: the baseline is the side that has it
    pair = _ctx(HOPPER).pair("sync_sched")
    assert pair.optimisation == "async scheduling (on vs off)"
    assert pair.inverted and pair.with_ == "bf16" and pair.without == "sync_sched"


def test_async_scheduling_asked_against_its_off_form_has_the_variant_on() -> None:
    ctx = _ctx({**HOPPER, "async_sched": {"model": "m", "engine_args": {"async-scheduling": True}}})
    ctx.study.cfg["variants"]["async_sched"]["baseline"] = "sync_sched"
    pair = ctx.pair("async_sched")
    assert pair.base == "sync_sched" and pair.optimisation == "async scheduling (on vs off)"
    assert not pair.inverted and pair.lossless


def test_asking_for_the_default_names_no_optimisation() -> None:
    # async-scheduling: true beside vLLM 0.25's default serves what the baseline serves: the name says so
    pair = _ctx({"async_sched": {"model": "m", "engine_args": {"async-scheduling": True}}}).pair("async_sched")
    assert pair.optimisation == "async_sched (same engine arguments as bf16)" and not pair.control


@pytest.mark.parametrize(
    ("args", "on"),
    [
        ({}, True),
        ({"async-scheduling": False}, False),
        ({"no-async-scheduling": True}, False),
        ({"async_scheduling": True, "speculative-config": {"method": "suffix"}}, True),  # as asked
        ({"speculative-config": {"method": "suffix"}}, False),
        ({"speculative-config": {"method": "ngram", "num_speculative_tokens": 4}}, False),
        ({"speculative-config": '{"method": "eagle3", "model": "x"}'}, True),
        ({"speculative-config": {"method": "ngram_gpu"}}, True),
        ({"speculative-config": {"model": "draft", "num_speculative_tokens": 4}}, False),
        ({"speculative-config": {"method": "deepseek_mtp"}}, True),
    ],
)
def test_when_vllm_schedules_asynchronously(args: dict[str, Any], on: bool) -> None:
    assert eargs.async_scheduling_on(args) is on


def test_a_lossless_optimisation_whose_accuracy_moved_is_flagged() -> None:
    # gsm8k down 7 pt with a standard error of 2 pt over 200 paired items: [-10.9, -3.1], clear of the noise
    moved = [TaskAccuracy("gsm8k", "exact_match", 0.62, 0.55, -7.0, 2.0, 200, "paired", 2.0)]
    ctx = _ctx(HOPPER)
    flags = {v: lossless_accuracy(ctx.pair(v).lossless, moved) for v in HOPPER}
    assert flags["fp8_weights"] is None  # lossy: a drop is its accuracy cost, judged, not suspect
    assert all(flags[v] is not None for v in ("sync_sched", "kv_offload", "spec_suffix"))

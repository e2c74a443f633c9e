"""How the report names the optimisation a variant applies to the baseline (worthit.report.context.pair)."""

from __future__ import annotations

from worthit.config import Study, validate
from worthit.report.context import Context
from worthit.report.data import StudyResults

CFG = {
    "models": {"m": {"source": "hf:Qwen/Qwen2.5-7B-Instruct"}, "d": {"source": "hf:Qwen/Qwen2.5-0.5B-Instruct"}},
    "variants": {
        "base": {"model": "m"},
        "spec": {"model": "m", "engine_args": {"speculative_config": {"model": "d", "num_speculative_tokens": 5}}},
        "draft": {"model": "d"},
        "small": {"model": "d"},
    },
    "baseline_variant": "base",
    "specdec": {"draft_variants": {"spec": "draft"}},
}


def _ctx() -> Context:
    return Context.of(Study(validate(CFG)), StudyResults(variants={}))


def test_a_draft_variant_is_named_as_the_draft_of_its_speculative_variant() -> None:
    ctx = _ctx()
    draft, small = ctx.pair("draft"), ctx.pair("small")
    assert draft.optimisation.endswith("[the draft model of spec, served alone for gamma]")
    assert (
        "draft model of" not in small.optimisation
        and small.optimisation.split(" [")[0] == draft.optimisation.split(" [")[0]
    )
    assert not draft.lossless  # another model: still judged on accuracy like any model swap
    assert "draft model of" not in ctx.pair("spec").optimisation


def test_a_default_turned_off_is_named_by_its_flag() -> None:
    cfg = {
        "models": {"m": {"source": "hf:Qwen/Qwen2.5-7B-Instruct"}},
        "variants": {
            "base": {"model": "m", "engine_args": {"gpu-memory-utilization": 0.9}},
            "eager": {"model": "m", "engine_args": {"enforce-eager": True, "gpu-memory-utilization": 0.8}},
            "no_chunked": {"model": "m", "engine_args": {"no-enable-chunked-prefill": True}},
            "seqs": {"model": "m", "engine_args": {"max-num-seqs": 16}},
        },
        "baseline_variant": "base",
    }
    ctx = Context.of(Study(validate(cfg)), StudyResults(variants={}))
    eager = ctx.pair("eager")
    # CUDA graphs off is what the variant changes; the memory share is left out of the name
    assert eager.optimisation == "--enforce-eager (vs unset)" and eager.lossless
    assert ctx.pair("no_chunked").optimisation == "--no-enable-chunked-prefill (vs unset)"
    assert ctx.pair("seqs").optimisation == "--max-num-seqs 16 (vs unset)"

"""worthit tune: pruning by the plan, on numbers: Qwen2.5-7B (bf16) on an RTX 3090, 512 + 256 tokens.

The plan predicts a KV pool of 89,808 tokens at gpu-memory-utilization 0.9 (test_plan checks the memory
model against the seed study's 5,306 blocks x 16 = 84,896): 116.9 requests of 768 tokens, 146 with the 25%
margin. The decode step at 32 sequences reads 15.2 GB of weights and 32 x 640 tokens x 57,344 B of KV at
936 GB/s: 17.5 ms, so at most 32 / 17.5 ms = 1,826 output tok/s.
"""

from __future__ import annotations

import pytest

from tests.conftest import ROOT
from worthit.plan import Hardware, ModelShape
from worthit.tune.prune import bound, candidate_args, kv_prune, screen, throughput_prune
from worthit.tune.space import Choices, Range, TuneSection, parse

QWEN7B = ModelShape.from_file(ROOT / "tests" / "fixtures" / "models" / "qwen2.5-7b-instruct" / "config.json")
RTX3090 = Hardware.named("RTX 3090")
ARGS = {"gpu-memory-utilization": 0.9, "max-model-len": 4096}


def section(seqs: Range | Choices) -> TuneSection:
    s = parse({"variants": {"a": {}}, "tune": {}})
    return TuneSection(**{**s.__dict__, "space": {"max-num-seqs": seqs}})


def b(max_num_seqs: int, **extra: object):  # type: ignore[no-untyped-def]
    args = {**ARGS, "max-num-seqs": max_num_seqs, **extra}
    return bound(QWEN7B, args, RTX3090, prompt_tokens=512, output_tokens=256, kv_margin=0.25, max_load=256)


def test_the_bound_on_numbers() -> None:
    x = b(32)
    assert x.kv_tokens == 89_808 and x.tokens_per_request == 768
    assert x.fit_seqs == 146 == int(89_808 * 1.25 / 768)
    assert x.usable_concurrency == 32
    assert x.output_tok_per_s_per_gpu_max == pytest.approx(1826, rel=0.01)
    assert b(512).usable_concurrency == 146  # the KV pool, not max-num-seqs, limits it


def test_a_max_num_seqs_the_kv_pool_can_never_use_is_pruned_as_dominated() -> None:
    why = kv_prune(b(512), section(Range(8, 512, integer=True)))
    assert why is not None and why.startswith("pruned by the plan (predicted KV pool 89,808 tokens")
    assert "max-num-seqs 512 can never be used; dominated by the same candidate at max-num-seqs 146" in why
    assert kv_prune(b(146), section(Range(8, 512, integer=True))) is None  # fits: kept
    assert kv_prune(b(140), section(Range(8, 512, integer=True))) is None
    # choices: the twin is the largest choice that fits
    assert "at max-num-seqs 128)" in str(kv_prune(b(256), section(Choices((8, 64, 128, 256, 512)))))
    # no choice fits: nothing dominates the candidate, so it is kept (a bound, not a guess)
    assert kv_prune(b(256), section(Choices((256, 512)))) is None


def test_the_margin_keeps_a_candidate_the_estimate_could_be_wrong_about() -> None:
    # 130 sequences are more than the 116.9 the point estimate fits, but within the 25% margin
    assert kv_prune(b(130), section(Range(8, 512, integer=True))) is None


def test_no_kv_figure_no_prune() -> None:
    cpu = Hardware.host_cpu(avx512_or_amx=True)
    x = bound(QWEN7B, {"max-num-seqs": 512}, cpu, prompt_tokens=512, output_tokens=256, kv_margin=0.25)
    assert x.kv_tokens is None and x.fit_seqs is None and x.output_tok_per_s_per_gpu_max is None
    assert kv_prune(x, section(Range(8, 512, integer=True))) is None


def test_a_candidate_whose_bound_cannot_beat_the_best_is_pruned() -> None:
    x = b(32)  # at most 1,826 tok/s
    why = throughput_prune(x, best_lower_tok_s_per_gpu=2000.0)
    assert why is not None and why.startswith("pruned by the plan (predicted at most 1,826 output tok/s per GPU")
    assert "best's measured lower bound is 2,000" in why
    assert throughput_prune(x, best_lower_tok_s_per_gpu=1800.0) is None  # it might still win
    assert throughput_prune(x, best_lower_tok_s_per_gpu=None) is None  # nothing measured yet
    assert throughput_prune(b(512), best_lower_tok_s_per_gpu=2000.0) is None  # 146 sequences can reach it


def test_speculative_decoding_is_never_pruned_by_the_plain_roofline() -> None:
    x = b(32, **{"speculative-config": {"method": "ngram", "num_speculative_tokens": 4}})
    assert x.output_tok_per_s_per_gpu_max is None and throughput_prune(x, 1e9) is None


def test_candidate_args_merge_serve_variant_and_values() -> None:
    cfg = {
        "serve": {"engine_args": {"max_model_len": 2048, "speculative-config": {"method": "ngram"}}},
        "variants": {"base": {"engine_args": {}}, "spec": {"engine_args": {"max-num-seqs": 4}}},
        "baseline_variant": "base",
    }
    v, args = candidate_args(cfg, {"variant": "spec", "speculative-config.num_speculative_tokens": 3})
    assert v == "spec"
    assert args == {
        "max_model_len": 2048,
        "speculative-config": {"method": "ngram", "num_speculative_tokens": 3},
        "max-num-seqs": 4,
    }
    assert candidate_args(cfg, {"max-num-seqs": 8})[0] == "base"


def test_screen_applies_both_prunes_kv_first() -> None:
    space = section(Range(8, 512, integer=True))
    assert "can never be used" in str(screen(b(512), space, best_lower_tok_s_per_gpu=1e9))
    assert "predicted at most 1,826" in str(screen(b(32), space, best_lower_tok_s_per_gpu=2000.0))
    assert screen(b(32), space) is None


def test_a_speculative_k_with_nothing_to_propose_it_is_not_served_and_says_why() -> None:
    from worthit.tune.prune import unservable

    assert unservable("bf16", {"max-num-seqs": 8}) is None
    assert unservable("spec", {"speculative-config": {"method": "ngram", "num_speculative_tokens": 4}}) is None
    assert unservable("draft", {"speculative_config": {"model": "/m/0.5b", "num_speculative_tokens": 5}}) is None
    why = unservable("bf16", {"speculative-config": {"num_speculative_tokens": 4}})
    assert why is not None
    assert why.startswith("not served: speculative k 4 over variant 'bf16'") and "vLLM would refuse" in why

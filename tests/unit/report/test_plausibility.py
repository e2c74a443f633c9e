"""Plausibility before publication: each check that encodes how a technique works trips on a result that
contradicts it and stays quiet on one that does not; a tripped check makes the verdict suspect, never adopt or
reject, and the decision table says what to check (docs/verdicts.md, "Suspect results")."""

from __future__ import annotations

from rich.console import Console

from worthit.report import plausibility as P
from worthit.report.decide import ADOPT, LATENCY, REJECT, SUSPECT, Comparison, Evidence, Setting, TaskAccuracy, decide
from worthit.report.measure import Measure, runs_basis
from worthit.report.rules import Rules
from worthit.report.terminal import decision_table


def _task(delta_pt: float, stderr_pt: float) -> TaskAccuracy:
    return TaskAccuracy("worthit_gsm", "exact_match", 0.6, 0.6 + delta_pt / 100, delta_pt, stderr_pt, 500, "paired", 3)


def test_calibrated_kv_scales_worse_than_scales_of_one_are_suspect() -> None:
    bad = P.calibrated_kv_scales(True, True, [_task(-29.8, 2.65)])  # the one-machine sample's [-35.0, -24.6]
    assert bad is not None and "less accurate than scales of 1.0" in bad.reason
    assert "k_scale/v_scale" in bad.what_to_check and "hardware-results.md" in bad.what_to_check
    assert P.calibrated_kv_scales(True, True, [_task(-0.5, 0.4)]) is None  # not demonstrably worse
    assert P.calibrated_kv_scales(True, True, [_task(+2.0, 0.5)]) is None  # better, as calibration should be
    assert P.calibrated_kv_scales(True, False, [_task(-29.8, 2.65)]) is None  # against BF16: the format's cost
    assert P.calibrated_kv_scales(False, True, [_task(-29.8, 2.65)]) is None


def test_a_lossless_optimisation_that_moves_accuracy_beyond_its_noise_is_suspect() -> None:
    moved = P.lossless_accuracy(True, [_task(-4.0, 1.0)])  # [-6.0, -2.0]: clear of 0 by 2 pt
    assert moved is not None and "cannot change what the model generates" in moved.reason
    assert P.lossless_accuracy(True, [_task(+4.0, 1.0)]) is not None  # either way
    assert P.lossless_accuracy(True, [_task(-0.2, 0.2)]) is None  # the samples' [-0.6, +0.2]
    assert P.lossless_accuracy(True, [_task(-1.5, 0.3)]) is None  # [-2.1, -0.9]: within the 1 pt noise
    assert P.lossless_accuracy(False, [_task(-4.0, 1.0)]) is None  # a lossy one may move it


def test_a_decode_step_faster_than_its_bytes_allow_is_suspect() -> None:
    fast = P.bandwidth_floor("awq_int4", 1.3, 2.1)
    assert fast is not None and "MBU 130%" in fast.reason and "peak_bandwidth_gb_s" in fast.what_to_check
    assert P.bandwidth_floor("awq_int4", 0.48, 4.0) is None
    assert P.bandwidth_floor("awq_int4", None, 4.0) is None  # a CPU: no MBU


def test_a_speed_up_beyond_the_weights_bytes_is_suspect() -> None:
    def factor(f: float) -> Measure:
        return Measure(f, 3, f * 0.95, f * 1.05, runs_basis(3))

    # one H100's AWQ INT4: 3.55 GB of bf16 weights against 1.63 GB
    assert P.weight_bytes_speedup(3_554_176_000, 1_634_947_136, factor(1.3)) is None
    fast = P.weight_bytes_speedup(3_554_176_000, 1_634_947_136, factor(3.0), "concurrency 1")
    assert fast is not None and "at most 2.17x" in fast.reason and "concurrency 1" in fast.reason
    assert P.weight_bytes_speedup(3_554_176_000, 3_554_176_000, factor(3.0)) is None  # same bytes: not this check
    assert P.weight_bytes_speedup(None, 1_634_947_136, factor(3.0)) is None


def _spec(predicted: float, measured: float, rel: float = 0.05) -> P.SpecPoint:
    m = Measure(measured, 3, measured * (1 - rel), measured * (1 + rel), runs_basis(3))
    return P.SpecPoint("concurrency 1", predicted, m, "alpha 2.70, k 5, gamma 0.70, c 3.45", 20.7)


def test_speculative_decoding_far_outside_its_own_model_is_suspect_both_ways() -> None:
    slow = P.speculative_model([_spec(0.38, 0.13)])  # the draft-model sample: a third of its prediction
    assert slow is not None and "\u00d70.13" in slow.reason and "the c that would match: 20.70" in slow.reason
    assert P.speculative_model([_spec(1.2, 3.0)]) is not None  # 2.5 times its prediction
    assert P.speculative_model([_spec(1.68, 2.43)]) is None  # ngram on one H100: x1.44 of it
    assert P.speculative_model([_spec(2.04, 1.11, rel=0.3)]) is None  # the interval reaches half of it
    assert P.speculative_model([_spec(2.04, 1.11, rel=0.3), _spec(0.38, 0.13)]) is not None


def test_two_sides_that_differ_in_more_than_the_optimisation_are_suspect() -> None:
    both = P.one_change({"model": "smollm2-135m-awq vs smollm2-135m", "--dtype": "bfloat16 vs float32"})
    assert both is not None and "2 things" in both.reason and "--dtype (bfloat16 vs float32)" in both.reason
    assert "variants.awq_int4.baseline" in P.one_change({"model": "x", "--dtype": "y"}, "awq_int4").what_to_check  # type: ignore[union-attr]
    assert P.one_change({"model": "smollm2-135m-awq vs smollm2-135m"}) is None
    assert P.one_change({"model": "a-awq vs a", "--quantization": "awq_marlin vs unset"}) is None  # one together
    assert P.one_change({"model": "a-int4 vs a", "--linear-backend": "marlin vs unset"}) is None  # its kernel
    assert P.one_change({"--kv-cache-dtype": "fp8 vs unset", "--calculate-kv-scales": "True vs unset"}) is None
    assert P.one_change({}) is None


def test_a_suspect_verdict_is_never_adopt_or_reject_and_says_what_to_check() -> None:
    m = lambda v: Measure(v, 3, v * 0.98, v * 1.02, runs_basis(3))  # noqa: E731
    fast = Comparison("E2E P50", "ms", m(900.0), m(300.0), False, LATENCY, Setting.concurrency(1))
    e = Evidence("spec_draft", "speculative decoding (draft_model, k=5)", comparisons=[fast], lossless=True)
    assert decide(e, Rules()).outcome == ADOPT
    tripped = P.speculative_model([_spec(0.38, 0.13)])
    assert tripped is not None
    v = decide(Evidence("spec_draft", "x", comparisons=[fast], lossless=True, findings=(tripped,)), Rules())
    assert v.outcome == SUSPECT and v.would_be == ADOPT and set(v.finals.values()) == {SUSPECT}
    assert v.condition == tripped.what_to_check and v.reason.startswith("suspect, before it is published")
    slow = Comparison("E2E P50", "ms", m(300.0), m(900.0), False, LATENCY, Setting.concurrency(1))
    assert decide(Evidence("x", comparisons=[slow], findings=(tripped,)), Rules()).would_be == REJECT
    row = {"variant": "spec_draft", "optimisation": "x", "outcome": v.outcome, "condition": v.condition}
    con = Console(width=200, record=True)
    con.print(decision_table([row], 200))
    text = " ".join(con.export_text().split())
    assert "suspect:" in text and "which of alpha, gamma" in text
    assert "adopt" not in text and "reject" not in text

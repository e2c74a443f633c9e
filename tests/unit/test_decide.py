"""The decision rules on the reference study's own numbers (STUDY.md) reproduce its verdicts.

The study publishes point estimates without intervals; the evidence below gives each latency figure
a +-2% interval (the run-to-run noise of a closed-loop level on one GPU) and each accuracy score
lm-eval's standard error for its task size. KV block counts are exact.
"""

from __future__ import annotations

import math

import pytest

from worthit.report.decide import (
    ADOPT,
    NO_DIFFERENCE,
    NOT_APPLICABLE,
    REJECT,
    AccuracyDelta,
    Comparison,
    Evidence,
    Measure,
    Rules,
    decide,
    predicted_speculative_speedup,
)

BASE_ACC = {"hellaswag": 0.805, "arc_easy": 0.810, "arc_challenge": 0.555, "gsm8k": 0.713}
TASK_N = {"hellaswag": 10042, "arc_easy": 2376, "arc_challenge": 1172, "gsm8k": 1319}


def noisy(value: float, n: int = 64, rel: float = 0.02) -> Measure:
    return Measure(value, n, value * (1 - rel), value * (1 + rel))


def acc(task: str, variant: float) -> AccuracyDelta:
    def se(p: float) -> float:
        return math.sqrt(p * (1 - p) / TASK_N[task])

    return AccuracyDelta(task, BASE_ACC[task], variant, se(BASE_ACC[task]), se(variant), TASK_N[task])


def blocks(base: int, variant: int) -> Comparison:
    return Comparison(
        "KV blocks", "blocks", Measure(base, 1, exact=True), Measure(variant, 1, exact=True), True, "capacity"
    )


def tpot(label: str, base: float, variant: float) -> Comparison:
    return Comparison(label, "ms", noisy(base), noisy(variant), False, "latency")


RULES = Rules(
    max_accuracy_drop_pt=3.0,
    min_speedup=1.05,
    require_significance=True,
    min_predicted_speedup=1.3,
    effort={"awq": "low (ready-made checkpoint)", "specdec": "medium", "kv_int8": "low"},
)

AWQ = Evidence(
    "awq",
    comparisons=[
        blocks(5306, 15839),
        tpot("TPOT P50 @ c=1", 19.7, 6.84),
        Comparison("output tok/s @ c=32", "tok/s", noisy(978), noisy(2126), True, "throughput"),
        Comparison("best goodput", "tok/s", noisy(826), noisy(4547), True, "throughput"),
    ],
    accuracy=[
        acc("hellaswag", 0.796),
        acc("arc_easy", 0.788),
        acc("arc_challenge", 0.545),
        acc("gsm8k", 0.692),
    ],
)

SPECDEC = Evidence(
    "specdec",
    comparisons=[
        tpot("TPOT P50 @ c=1", 19.7, 19.55),
        tpot("TPOT P50 @ c=16", 19.7 * 1.5, 19.7 * 1.5 * 1.074),
    ],
    predicted_speedup=predicted_speculative_speedup(alpha=3.08, k=5, gamma=0.20, c=1.73),
)

KV_INT8 = Evidence(
    "kv_int8",
    comparisons=[blocks(5306, 10612), tpot("TPOT P50 @ c=1", 19.7, 19.8)],
    accuracy=[acc("hellaswag", 0.655)],
)

KV_FP8 = Evidence(
    "kv_fp8",
    status="not_applicable",
    reason="--kv-cache-dtype fp8 needs compute capability >= 8.9 (Ada, Hopper); this GPU is sm_86",
)


def test_awq_is_adopted_on_the_study_numbers() -> None:
    v = decide(AWQ, RULES)
    assert v.verdict == ADOPT, v.reason
    assert "TPOT P50 @ c=1 -65%" in v.benefit and "output tok/s @ c=32 +117%" in v.benefit
    assert v.accuracy_cost == "-2.2 to -0.9 pt"
    assert v.effort == "low (ready-made checkpoint)"


def test_speculative_decoding_is_rejected_on_the_study_numbers() -> None:
    v = decide(SPECDEC, RULES)
    assert v.verdict == REJECT
    assert "TPOT P50 @ c=16 +7%" in v.reason
    assert "1.13x is below the 1.3x rule of thumb" in v.reason


def test_predicted_speculative_speedup_matches_the_study() -> None:
    assert predicted_speculative_speedup(3.08, 5, 0.20, 1.73) == pytest.approx(1.13, abs=0.005)


def test_int8_kv_cache_is_rejected_for_its_accuracy_collapse() -> None:
    v = decide(KV_INT8, RULES)
    assert v.verdict == REJECT
    assert "hellaswag -15.0 pt exceeds the 3 pt bound" in v.reason


def test_fp8_kv_cache_is_not_applicable_on_ampere() -> None:
    v = decide(KV_FP8, RULES)
    assert v.verdict == NOT_APPLICABLE
    assert "8.9" in v.reason


def test_a_change_within_the_noise_is_no_measurable_difference_never_a_win() -> None:
    e = Evidence("x", comparisons=[tpot("TPOT P50 @ c=1", 19.7, 19.2)])  # -2.5%, intervals overlap
    assert decide(e, RULES).verdict == NO_DIFFERENCE
    e = Evidence("x", comparisons=[tpot("TPOT P50 @ c=1", 19.7, 17.0)])  # -14%, intervals clear
    wide = Evidence(
        "x",
        comparisons=[Comparison("TPOT", "ms", Measure(19.7, 6, 15.0, 25.0), Measure(17.0, 6, 14.0, 22.0), False)],
    )
    assert decide(e, RULES).verdict == ADOPT
    assert decide(wide, RULES).verdict == NO_DIFFERENCE


def test_a_figure_without_an_interval_cannot_be_a_win_when_significance_is_required() -> None:
    e = Evidence(
        "x",
        comparisons=[Comparison("tok/s", "tok/s", Measure(100.0, 1), Measure(200.0, 1), True, "throughput")],
    )
    assert decide(e, RULES).verdict == NO_DIFFERENCE
    assert decide(e, Rules(require_significance=False)).verdict == ADOPT


def test_a_significant_gain_below_the_minimum_speedup_is_rejected() -> None:
    e = Evidence(
        "x",
        comparisons=[Comparison("TPOT", "ms", Measure(20.0, 100, 19.9, 20.1), Measure(19.5, 100, 19.4, 19.6), False)],
    )
    v = decide(e, RULES)
    assert v.verdict == REJECT and "below the minimum speed-up" in v.reason


def test_per_task_accuracy_bound_overrides_the_default() -> None:
    strict = Rules(max_accuracy_drop_pt=3.0, max_accuracy_drop_pt_by_task={"arc_easy": 2.0})
    v = decide(AWQ, strict)
    assert v.verdict == REJECT and "arc_easy -2.2 pt exceeds the 2 pt bound" in v.reason


def test_a_failed_variant_is_not_applicable_with_its_reason() -> None:
    v = decide(Evidence("x", status="failed", reason="server died: CUDA out of memory"), RULES)
    assert v.verdict == NOT_APPLICABLE and v.reason == "failed: server died: CUDA out of memory"


def test_rules_read_from_the_decide_section_of_the_config() -> None:
    r = Rules.from_config(
        {
            "decide": {
                "max_accuracy_drop_pt": 1.5,
                "min_speedup": 1.1,
                "require_significance": False,
                "effort": {"awq": "low"},
            }
        }
    )
    assert (r.max_drop("gsm8k"), r.min_speedup, r.require_significance, r.effort["awq"]) == (
        1.5,
        1.1,
        False,
        "low",
    )


def test_a_variant_without_figures_is_not_applicable_rather_than_no_difference() -> None:
    v = decide(Evidence("x"), RULES)
    assert v.verdict == NOT_APPLICABLE and "not measured" in v.reason


def test_turning_prefix_caching_off_is_rejected_on_shared_prefix_ttft():
    from worthit.report.analysis import PrefixPoint, prefix_comparisons
    from worthit.report.decide import Evidence, Rules, decide

    on = [PrefixPoint("base", True, L, Measure(t, 6, t * 0.95, t * 1.05), 0.9) for L, t in ((0, 100), (1024, 130))]
    off = [PrefixPoint("off", False, L, Measure(t, 6, t * 0.95, t * 1.05), None) for L, t in ((0, 110), (1024, 3100))]
    comps = prefix_comparisons(on, off)
    assert [c.quantity for c in comps] == ["TTFT P50, 1024-token shared prefix"]  # length 0 shares nothing
    v = decide(Evidence("off", comparisons=comps), Rules())
    assert v.verdict == "reject" and "1024-token shared prefix" in v.reason

"""The decision layer: the reference study's own figures reproduce its verdicts, and the rules keep their
promises whatever the numbers (seeded random cases: an interval straddling a bound is inconclusive, a
verdict resting on one run says "single run", a crash is never "not applicable")."""

from __future__ import annotations

import math
import re
from pathlib import Path

import numpy as np
import pytest
import yaml

from worthit.experiments.specdec.model import predicted_speedup
from worthit.experiments.specdec.report import rule_check
from worthit.report.decide import (
    ACC_INCONCLUSIVE,
    ACCEPTABLE,
    ADOPT,
    BETTER,
    EQUIVALENT,
    FAILED,
    INCONCLUSIVE,
    INFO,
    LATENCY,
    NOT_APPLICABLE,
    NOT_NEEDED,
    NOT_REPORTED,
    NOT_RUN,
    OUTCOMES,
    REJECT,
    THROUGHPUT,
    UNACCEPTABLE,
    UNDETERMINED,
    WORSE,
    Check,
    Comparison,
    Evidence,
    Setting,
    TaskAccuracy,
    decide,
)
from worthit.report.measure import SINGLE_RUN, Measure, runs_basis
from worthit.report.regimes import judge
from worthit.report.rules import Rules
from worthit.stats import Z_95

STUDY = yaml.safe_load((Path(__file__).resolve().parents[2] / "fixtures" / "study-rtx3090.yaml").read_text())


# ------------------------------------------------------------------------ the study's figures as evidence
def setting(label: str) -> Setting:
    if m := re.fullmatch(r"concurrency (\d+)", label):
        return Setting.concurrency(int(m[1]))
    if m := re.fullmatch(r"(\d+)-token shared prefix", label):
        return Setting.prefix(int(m[1]))
    return Setting(label)


def measure(value: float, exact: bool = False) -> Measure:
    if exact:
        return Measure.exact(value)
    rel, runs = STUDY["noise"]["rel"], STUDY["noise"]["runs"]
    return Measure(value, runs, value * (1 - rel), value * (1 + rel), runs_basis(runs))


def task(name: str, value_pct: float, bound: float) -> TaskAccuracy:
    base = STUDY["baseline_accuracy_pct"][name] / 100
    d, n = value_pct / 100 - base, STUDY["task_size"][name]
    flips = max(STUDY["flips"][name], abs(d))
    se_pt = math.sqrt((flips - d * d) / n) * 100
    return TaskAccuracy(name, "acc", base, value_pct / 100, d * 100, se_pt, n, "paired", bound, n)


def evidence(name: str, rules: Rules) -> Evidence:
    o = STUDY["optimisations"][name]
    comps = [
        Comparison(
            f["quantity"],
            f["unit"],
            measure(f["without"], f.get("exact", False)),
            measure(f["with"], f.get("exact", False)),
            f.get("higher_is_better", False),
            f["regime"],
            setting(f["setting"]),
            f.get("judged", True),
            f.get("guard", False),
        )
        for f in o.get("figures", [])
    ]
    checks = [
        c
        for s in o.get("speculative", [])
        if (
            c := rule_check(
                setting(s["setting"]), s["drafts"], s["alpha"], s["k"], gamma=s["gamma"], c=s["c"], threshold=1.3
            )
        )
    ]
    acc = [task(t, v, rules.max_drop(t)) for t, v in (o.get("accuracy_pct") or {}).items()]
    return Evidence(
        name,
        o["optimisation"],
        o.get("status", "ok"),
        o.get("reason", ""),
        comps,
        checks,
        acc,
        lossless=o.get("lossless", False),
    )


RULES = Rules(**STUDY["rules"], effort={k: v.get("effort", "") for k, v in STUDY["optimisations"].items()})


@pytest.mark.parametrize("name", list(STUDY["optimisations"]))
def test_the_study_figures_reproduce_the_study_verdicts(name: str) -> None:
    v = decide(evidence(name, RULES), RULES)
    assert v.outcome == STUDY["optimisations"][name]["study_verdict"], v.reason


def test_awq_is_adopted_in_both_regimes_with_its_accuracy_acceptable() -> None:
    v = decide(evidence("awq_int4", RULES), RULES)
    assert v.finals == {LATENCY: ADOPT, THROUGHPUT: ADOPT} and v.condition == ""
    assert v.accuracy_outcome == ACCEPTABLE and v.accuracy_cost == "-2.2 to -0.9 pt"
    assert "TPOT P50 -65% at concurrency 1" in v.benefit and "+117%" in v.benefit
    assert v.basis == "3 runs" and v.effort == "low (ready-made checkpoint)"


def test_a_3_pt_bound_leaves_awq_inconclusive_and_says_how_many_gsm8k_items_would_decide() -> None:
    strict = Rules(max_accuracy_drop_pt=3.0)
    v = decide(evidence("awq_int4", strict), strict)
    assert v.outcome == INCONCLUSIVE and v.accuracy_outcome == ACC_INCONCLUSIVE
    gsm = task("gsm8k", 69.2, 3.0)
    assert gsm.decision == ACC_INCONCLUSIVE and gsm.items_needed is not None and gsm.items_needed > 1319
    assert (
        f"gsm8k: about {gsm.items_needed:,} items at the observed variance; the task has 1,319 (not enough)" in v.settle
    )


def test_prefix_caching_is_adopted_for_latency_first_serving_on_shared_prefix_ttft() -> None:
    v = decide(evidence("prefix_caching", RULES), RULES)
    assert v.outcome == ADOPT and v.condition == "latency-first"  # no throughput figure: that regime is not run
    assert v.regimes[THROUGHPUT].outcome == NOT_RUN and v.accuracy_outcome == NOT_NEEDED
    assert "adopt at every shared prefix measured" in v.regimes[LATENCY].detail


def test_speculative_decoding_is_rejected_by_measurement_and_by_the_rule_of_thumb() -> None:
    v = decide(evidence("spec_draft", RULES), RULES)
    assert v.outcome == REJECT
    assert "predicted speed-up S = 1.13x is below the 1.3x rule of thumb" in v.reason
    assert predicted_speedup(3.08, 5, 0.20, 1.73) == pytest.approx(1.13, abs=0.005)
    c16 = next(o for o in v.regimes[LATENCY].settings if o.setting.value == 16)
    # TPOT +7.4% with a +-2% interval on each side is not clearly past 5%, but the TTFT P99 x25 is a harm far
    # beyond both tolerances
    assert c16.outcome == REJECT and c16.deciding == "TTFT P99 +2400% at concurrency 16"
    assert "TPOT P50 +7% at concurrency 16" not in c16.reason


def test_int8_kv_is_rejected_for_its_accuracy_collapse_with_no_performance_figure() -> None:
    v = decide(evidence("int8_kv", RULES), RULES)
    assert v.outcome == REJECT and v.accuracy_outcome == UNACCEPTABLE
    assert "hellaswag (acc) -15.0 pt" in v.reason


def test_fp8_kv_is_not_applicable_on_ampere_with_the_prerequisite_named() -> None:
    v = decide(evidence("fp8_kv", RULES), RULES)
    assert v.outcome == NOT_APPLICABLE and "8.9" in v.reason


# ------------------------------------------------------------------------------------- properties
RNG = np.random.default_rng(20261201)


def _cases(n: int = 300) -> list[tuple[float, float, float]]:
    return [(float(RNG.uniform(-20, 5)), float(RNG.uniform(0.05, 8)), float(RNG.uniform(0.5, 10))) for _ in range(n)]


@pytest.mark.parametrize(("delta", "se", "bound"), _cases())
def test_accuracy_is_acceptable_unacceptable_or_inconclusive_exactly_as_its_interval_lies(
    delta: float, se: float, bound: float
) -> None:
    t = TaskAccuracy("t", "acc", 0.5, 0.5 + delta / 100, delta, se, 500, "paired", bound, 10_000)
    lo, hi = delta - Z_95 * se, delta + Z_95 * se
    expected = ACCEPTABLE if lo > -bound else (UNACCEPTABLE if hi < -bound else ACC_INCONCLUSIVE)
    assert t.decision == expected
    if expected == ACC_INCONCLUSIVE:  # straddles the bound: says how many items would decide it
        assert t.items_needed is not None and t.items_needed > 500
        more = TaskAccuracy(
            "t", "acc", 0.5, 0.5, delta, se * math.sqrt(500 / t.items_needed), t.items_needed, "paired", bound
        )
        assert more.decision != ACC_INCONCLUSIVE or abs(delta + bound) < 1e-9


def _perf(rng: np.random.Generator, runs: int) -> Evidence:
    comps = []
    for c in (1, 4, 16):
        base = float(rng.uniform(5, 50))
        factor = float(rng.uniform(0.5, 2.0))
        rel = float(rng.uniform(0.005, 0.2))
        basis = SINGLE_RUN if runs == 1 else runs_basis(runs)
        b = Measure(base, 32, base * (1 - rel), base * (1 + rel), basis)
        v = Measure(base / factor, 32, base / factor * (1 - rel), base / factor * (1 + rel), basis)
        comps.append(Comparison("TPOT P50", "ms", b, v, False, LATENCY, Setting.concurrency(c)))
    return Evidence("x", "x", comparisons=comps, lossless=True)


@pytest.mark.parametrize("seed", range(200))
def test_one_run_never_settles_a_performance_verdict_it_leans_and_says_what_would(seed: int) -> None:
    rng = np.random.default_rng(seed)
    one, three = decide(_perf(rng, 1), Rules()), decide(_perf(np.random.default_rng(seed), 3), Rules())
    assert one.outcome == INCONCLUSIVE and one.reason.startswith("single run:") and one.basis == SINGLE_RUN
    assert one.benefit == "none demonstrated" or all(b.endswith("(single run)") for b in one.benefit.split("; "))
    # the same figures over three runs: where those settle it, the single run leans the same way
    assert "single run" not in three.reason and three.basis == "3 runs"
    if three.outcome in (ADOPT, REJECT):
        assert one.condition.startswith(f"latency-first leaning {three.outcome} (single run)")
        assert "independent runs (loadtest.repeats >= 2)" in one.settle


@pytest.mark.parametrize("seed", range(200))
def test_a_figure_is_better_worse_or_equivalent_only_when_its_whole_interval_says_so(seed: int) -> None:
    rng = np.random.default_rng(seed)
    b = Measure(10.0, 20, 9.0, 11.0, SINGLE_RUN)
    v = float(rng.uniform(5, 20))
    rel = float(rng.uniform(0.01, 0.3))
    c = Comparison("TPOT P50", "ms", b, Measure(v, 20, v * (1 - rel), v * (1 + rel), SINGLE_RUN), False)
    finding, _ = judge(c, Rules(min_speedup=1.05))
    lo, hi = c.improvement.interval() or (math.nan, math.nan)
    assert finding == (
        BETTER
        if lo >= 1.05
        else WORSE
        if hi <= 1 / 1.05
        else EQUIVALENT
        if lo > 1 / 1.05 and hi < 1.05
        else UNDETERMINED
    )


def test_a_crash_is_failed_with_its_cause_and_never_not_applicable() -> None:
    crash = decide(Evidence("x", status="failed", reason="ValueError: Free memory on device cuda:0 ..."), Rules())
    gate = decide(Evidence("x", status="not_applicable", reason="needs compute capability >= 8.9"), Rules())
    assert crash.outcome == FAILED and crash.reason.startswith("ValueError: Free memory")
    assert gate.outcome == NOT_APPLICABLE
    assert len({crash.outcome, gate.outcome, decide(Evidence("x", status=NOT_RUN), Rules()).outcome}) == 3


def test_every_outcome_has_its_own_wording_and_badge() -> None:
    from worthit.report.decide import WORDING
    from worthit.report.render import badge

    assert len(OUTCOMES) == 8  # the six verdicts on an optimisation, a control's, and a suspect result's
    assert set(WORDING) == set(OUTCOMES) and len(set(WORDING.values())) == len(OUTCOMES)
    assert len({badge(o) for o in OUTCOMES}) == len(OUTCOMES)


def test_exact_counts_within_the_tolerance_are_no_difference_and_beyond_it_are_a_change() -> None:
    def kv(b: int, v: int) -> str:
        return judge(Comparison("KV blocks", "blocks", Measure.exact(b), Measure.exact(v), True), Rules())[0]

    assert kv(128_943, 129_015) == EQUIVALENT  # the H200 sample's 0.06%: not "significant" on n=1
    assert kv(128_943, 257_813) == BETTER and kv(128_943, 124_453) == WORSE


def test_a_drafter_that_never_proposed_leaves_the_verdict_inconclusive_not_rejected() -> None:
    worse = Comparison(
        "TPOT P50",
        "ms",
        Measure(5.0, 64, 4.9, 5.1, "3 runs"),
        Measure(7.0, 64, 6.9, 7.1, "3 runs"),
        False,
        LATENCY,
        Setting.concurrency(1),
    )
    check = rule_check(Setting.concurrency(1), 0.0, None, 4, gamma=0.0, c=1.7, threshold=1.3)
    v = decide(Evidence("spec", comparisons=[worse], checks=[check] if check else [], lossless=True), Rules())
    assert v.outcome == INCONCLUSIVE and "alpha unknown" in v.reason and "drafter proposes" in v.settle


def test_a_conditional_verdict_says_up_to_which_concurrency_it_holds() -> None:
    def lvl(c: int, base: float, var: float) -> Comparison:
        return Comparison(
            "TPOT P50",
            "ms",
            Measure(base, 64, base * 0.99, base * 1.01, "3 runs"),
            Measure(var, 64, var * 0.99, var * 1.01, "3 runs"),
            False,
            LATENCY,
            Setting.concurrency(c),
        )

    v = decide(Evidence("x", comparisons=[lvl(1, 20, 10), lvl(4, 22, 12), lvl(16, 30, 45)], lossless=True), Rules())
    assert v.outcome == ADOPT and v.condition == "latency-first, up to concurrency 4"
    assert v.regimes[LATENCY].detail == "adopt up to concurrency 4, reject from 16"
    # adopted at levels that do not form one range: each named once, under its dimension, with the figure
    # that flips the level between (the data alternates)
    gap = [lvl(1, 20, 10), lvl(4, 22, 32), lvl(16, 30, 15), lvl(64, 40, 20)]
    v = decide(Evidence("x", comparisons=gap, lossless=True), Rules())
    assert (
        v.outcome == ADOPT and v.condition == "latency-first, at concurrency 1, 16 and 64; rejected at 4: TPOT P50 +45%"
    )
    assert v.regimes[LATENCY].detail == "adopt up to concurrency 1, reject at 4 (TPOT P50 +45%), adopt from 16"
    # a level inside the range that could not be decided keeps it one range, and is named
    hole = [
        lvl(1, 20, 10),
        Comparison("TPOT P50", "ms", _m3(22, 0.3), _m3(20, 0.3), False, LATENCY, Setting.concurrency(4)),
        lvl(16, 30, 15),
        lvl(64, 40, 45),
    ]
    v = decide(Evidence("x", comparisons=hole, lossless=True), Rules())
    assert v.outcome == ADOPT and v.condition == "latency-first, up to concurrency 16 (undecided at 4)"
    assert v.regimes[LATENCY].detail == "adopt up to concurrency 1, inconclusive at 4, adopt at 16, reject from 64"


def _m3(x: float, rel: float) -> Measure:
    return Measure(x, 64, x * (1 - rel), x * (1 + rel), "3 runs")


def test_random_weights_are_never_judged_on_accuracy() -> None:
    e = Evidence(
        "x", accuracy=[TaskAccuracy("t", "acc", 0.5, 0.2, -30.0, 1.0, 100, "paired", 3.0)], random_weights=True
    )
    assert decide(e, Rules()).accuracy_outcome == NOT_REPORTED


def test_rules_read_from_the_decide_section_of_the_config() -> None:
    r = Rules.from_config(
        {
            "decide": {
                "max_accuracy_drop_pt": 1.5,
                "min_speedup": 1.1,
                "throughput_tpot_ms": 80,
                "effort": {"awq": "low"},
                "max_harm_pct": 20,
                "max_harm_ms": 100,
            }
        }
    )
    assert (r.max_drop("gsm8k"), r.min_speedup, r.throughput_tpot_ms, r.effort["awq"]) == (1.5, 1.1, 80.0, "low")
    assert (r.max_harm_pct, r.max_harm_ms) == (20.0, 100.0)
    assert (Rules.from_config({}).max_harm_pct, Rules.from_config({}).max_harm_ms) == (10.0, 20.0)


def test_a_verdict_settled_by_repeated_levels_names_the_single_run_figures_beside_it() -> None:
    def m(v: float, basis: str) -> Measure:
        return Measure(v, 32, v * 0.98, v * 1.02, basis)

    comps = [
        Comparison("TTFT P50", "ms", m(40.0, "3 runs"), m(20.0, "3 runs"), False, LATENCY, Setting.concurrency(4)),
        Comparison("TTFT P50", "ms", m(30.0, SINGLE_RUN), m(15.0, SINGLE_RUN), False, LATENCY, Setting.prefix(1500)),
    ]
    v = decide(Evidence("x", "x", comparisons=comps, lossless=True), Rules())
    # the repeated level settles it; the prefix sweep's single run leans the same way and is said to
    assert v.outcome == ADOPT and not v.reason.startswith("single run")
    assert v.basis == "3 runs (concurrency); single run (shared prefix)"
    prefix = next(o for o in v.regimes[LATENCY].settings if o.setting.dimension == "shared prefix")
    assert prefix.outcome == INCONCLUSIVE and prefix.leaning == ADOPT and "workload level" in prefix.settle


def test_a_harm_within_a_tolerance_is_a_trade_off_said_beside_the_adoption() -> None:
    # ngram speculation at concurrency 1 on one H100 (examples/h200-qwen/one-machine): the answer ends sooner,
    # the first token comes 4.6 ms later; both sides meet the SLO
    def fig(q: str, base: float, var: float, judged: bool) -> Comparison:
        m = lambda x: Measure(x, 64, x * 0.97, x * 1.03, "3 runs")  # noqa: E731
        return Comparison(q, "ms", m(base), m(var), False, LATENCY, Setting.concurrency(1), judged, not judged)

    comps = [fig("E2E P50", 572, 246, True), fig("TTFT P50", 13.1, 17.7, False), fig("TPOT P50", 2.19, 0.90, False)]
    held = Check(LATENCY, Setting.concurrency(1), INFO, "the SLO (TTFT P99 <= 500 ms) holds with and without it")
    v = decide(Evidence("x", comparisons=comps, checks=[held], lossless=True), Rules())
    assert v.outcome == ADOPT
    assert v.condition == "latency-first; trade-off: TTFT P50 +4.6 ms (+35%) at concurrency 1, within the SLO"
    assert v.tradeoffs == ("TTFT P50 +4.6 ms (+35%) at concurrency 1, within the SLO",)
    # the same +35% on a first token of 1.3 s is 460 ms: beyond both tolerances, a harm
    comps[1] = fig("TTFT P50", 1310, 1770, False)
    v = decide(Evidence("x", comparisons=comps, checks=[held], lossless=True), Rules())
    assert v.outcome == REJECT and "TTFT P50 +35% at concurrency 1" in v.reason
    # the tolerance is the study's: decide.max_harm_pct / max_harm_ms
    loose = Rules(max_harm_pct=50.0)
    assert decide(Evidence("x", comparisons=comps, checks=[held], lossless=True), loose).outcome == ADOPT


def test_a_benefit_waits_while_a_p99_may_break_the_slo_met_without_it() -> None:
    c1 = Setting.concurrency(1)
    e2e = Comparison("E2E P50", "ms", _m3(500, 0.02), _m3(300, 0.02), False, LATENCY, c1)
    maybe = Check(LATENCY, c1, UNDETERMINED, "may break the SLO", "more runs", blocks_adoption=True)
    v = decide(Evidence("x", comparisons=[e2e], checks=[maybe], lossless=True), Rules())
    assert v.outcome == INCONCLUSIVE and "may break the SLO" in v.reason and "more runs" in v.settle
    broken = Check(LATENCY, c1, WORSE, "breaks the SLO (TTFT P99 <= 500 ms) that is met without it")
    assert decide(Evidence("x", comparisons=[e2e], checks=[broken], lossless=True), Rules()).outcome == REJECT


def test_a_tail_the_medians_hide_counts_against_an_optimisation_only_when_demonstrated() -> None:
    # Capping the batch on a compute-bound CPU: the median request is served sooner, the queued ones later.
    def fig(q: str, base: float, var: float, rel: float, guard: bool = False) -> Comparison:
        m = lambda x: Measure(x, 32, x * (1 - rel), x * (1 + rel), "2 runs")  # noqa: E731
        return Comparison(q, "ms", m(base), m(var), False, LATENCY, Setting.concurrency(16), not guard, guard)

    medians = [fig("TPOT P50", 115, 56, 0.05), fig("TTFT P50", 5700, 4800, 0.03)]
    tail_worse = fig("TTFT P99", 5700, 9200, 0.05, guard=True)
    v = decide(Evidence("x", comparisons=[*medians, tail_worse], lossless=True), Rules())
    assert v.outcome == REJECT
    assert "TTFT P99 +61% at concurrency 16" in v.reason and "beyond the 10 % and 20 ms a harm is tolerated" in v.reason
    assert "although better: TPOT P50 -51%" in v.reason
    # a P99 whose interval spans the margin is shown, not weighed: the medians decide
    tail_open = fig("TTFT P99", 5700, 6300, 0.3, guard=True)
    assert decide(Evidence("x", comparisons=[*medians, tail_open], lossless=True), Rules()).outcome == ADOPT
    # and a P99 that is better never adopts on its own
    tail_better = fig("TTFT P99", 9200, 5700, 0.05, guard=True)
    equal = [fig("TPOT P50", 100, 100, 0.01), fig("TTFT P50", 100, 100, 0.01)]
    assert decide(Evidence("x", comparisons=[*equal, tail_better], lossless=True), Rules()).outcome == REJECT


def test_a_benefit_at_every_level_too_small_for_one_level_is_decided_over_the_range() -> None:
    def lvl(c: int, base: float, var: float, rel: float = 0.12) -> Comparison:
        return Comparison("E2E P50", "ms", _m3(base, rel), _m3(var, rel), False, LATENCY, Setting.concurrency(c))

    steady = [lvl(1, 100, 80), lvl(4, 200, 160), lvl(16, 400, 320)]  # 20 % shorter waits at every level
    alone = [judge(c, Rules())[0] for c in Evidence("x", comparisons=steady, lossless=True).comparisons]
    assert alone == [UNDETERMINED] * 3  # no level decides it on its own simultaneous interval
    v = decide(Evidence("x", comparisons=steady, lossless=True), Rules())
    assert v.outcome == ADOPT and v.condition == "latency-first, at concurrency 1 to 16 (pooled over the levels)"
    assert "E2E P50 -20% over concurrency 1 to 16, pooled over the 3 levels" in v.reason
    # a level that is rejected keeps the range from being pooled over it: the levels speak for themselves
    split = [*steady[:2], lvl(16, 400, 600, 0.02)]
    v = decide(Evidence("x", comparisons=split, lossless=True), Rules())
    assert v.outcome == REJECT and "pooled" not in v.reason

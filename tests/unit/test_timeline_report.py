"""The report's server-timeline check (worthit.report.experiments.timeline): KV usage and preemptions of each
level against the KV-derived critical concurrency."""

from __future__ import annotations

from worthit.report.experiments.timeline import CONSISTENT, LevelTimeline, check


def _level(conc: int | None, kv: list[float], preempt: list[float], runs: int = 1) -> LevelTimeline:
    rows = [
        {"run": r, "t_s": 0.1 * i, "kv_cache_usage_frac": k, "preemptions_total": p, "requests_running": 1.0}
        for r in range(1, runs + 1)
        for i, (k, p) in enumerate(zip(kv, preempt, strict=True))
    ]
    return LevelTimeline("v", f"conc~{conc}" if conc else "rate~2", conc, rows)


def test_preemptions_are_the_counter_rise_over_each_run():
    t = _level(8, [0.5, 1.0, 1.0], [10.0, 12.0, 17.0], runs=2)
    assert t.preemptions == 14.0 and t.kv_usage_max == 1.0


def test_full_and_preempted_above_the_critical_concurrency_is_consistent():
    verdict, note = check(_level(8, [0.4, 0.99], [0.0, 3.0]), critical=2.3)
    assert verdict == CONSISTENT and "3 preemptions at concurrency 8" in note and "2.3" in note


def test_preemption_at_or_below_the_critical_concurrency_is_flagged():
    assert check(_level(2, [0.6, 0.9], [0.0, 1.0]), critical=2.3)[0] == "preempted below the critical concurrency"
    assert check(_level(2, [0.6, 0.97], [0.0, 0.0]), critical=2.3)[0] == "KV full below the critical concurrency"


def test_room_to_spare_above_the_critical_concurrency_is_flagged():
    verdict, note = check(_level(16, [0.2, 0.3], [0.0, 0.0]), critical=4.0)
    assert verdict == "not full above the critical concurrency" and "shared" in note


def test_levels_without_a_concurrency_or_a_kv_measurement_say_why():
    assert check(_level(None, [0.5], [0.0]), critical=4.0)[0] == "not a closed-loop level"
    assert check(_level(4, [0.5], [0.0]), critical=None)[0] == "no critical concurrency"

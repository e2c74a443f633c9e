"""worthit tune: the winner's-curse guard: a winner only when its interval clears the runner-up's and the
defaults' by decide.min_speedup; else a tie, recommending the fewest changed flags."""

from __future__ import annotations

from worthit.report.rules import Rules
from worthit.tune.confirm import DEFAULTS, TIE, WINNER, Confirmed, changed_flags, decide

RULES = Rules(min_speedup=1.05)
DEFAULT_RUNS = Confirmed(DEFAULTS, (900.0, 910.0, 905.0, 895.0), 0)


def test_the_lucky_best_is_no_winner() -> None:
    # A's mean (1,100) is the highest only through one lucky run (1,400); B is steady at 1,060
    lucky = Confirmed("A", (1000.0, 1010.0, 990.0, 1400.0), 3)
    steady = Confirmed("B", (1060.0, 1065.0, 1055.0, 1062.0), 1)
    v = decide([lucky, steady], DEFAULT_RUNS, RULES)
    assert v.naive_best == "A" and v.outcome == TIE and v.recommended == "B"
    assert any("A vs B: undetermined" in r and "spans a 1.05x margin" in r for r in v.reasons)
    assert "tie among A, B: recommend B, the fewest changed flags (1)" in v.reasons[-1]  # the defaults are beaten


def test_a_clear_best_wins() -> None:
    best = Confirmed("A", (1200.0, 1210.0, 1190.0, 1205.0), 3)
    second = Confirmed("B", (1000.0, 1010.0, 990.0, 1005.0), 1)
    v = decide([best, second], DEFAULT_RUNS, RULES)
    assert (v.outcome, v.recommended) == (WINNER, "A")
    assert [r.split(":")[0] for r in v.reasons] == ["A vs B", "A vs vLLM defaults"]
    assert all(": better: " in r for r in v.reasons)


def test_clearing_the_runner_up_is_not_enough_when_the_margin_is_not_met() -> None:
    # +3% over the runner-up, measured tightly: the interval lies below the 5% margin
    best = Confirmed("A", (1030.0, 1031.0, 1029.0, 1030.0), 2)
    second = Confirmed("B", (1000.0, 1001.0, 999.0, 1000.0), 1)
    v = decide([best, second], DEFAULT_RUNS, RULES)
    assert v.outcome == TIE and v.recommended == "B"


def test_a_tie_with_the_defaults_recommends_the_defaults() -> None:
    lucky = Confirmed("A", (1000.0, 1010.0, 990.0, 1300.0), 3)
    defaults = Confirmed(DEFAULTS, (1040.0, 1050.0, 1045.0, 1035.0), 0)
    v = decide([lucky], defaults, RULES)
    assert (v.outcome, v.recommended, v.naive_best) == (TIE, DEFAULTS, "A")


def test_the_defaults_best_is_never_a_winner() -> None:
    v = decide([Confirmed("A", (800.0, 805.0, 795.0, 800.0), 2)], DEFAULT_RUNS, RULES)
    assert (v.outcome, v.recommended) == (TIE, DEFAULTS)


def test_changed_flags_counts_what_differs_from_the_defaults() -> None:
    assert changed_flags({"max-num-seqs": 256, "enable-chunked-prefill": True}, {"max-num-seqs": 256}) == 1
    assert changed_flags({"max-num-seqs": 64}, {"max-num-seqs": 256}) == 1

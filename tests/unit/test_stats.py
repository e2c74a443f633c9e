"""Intervals of a figure over a few independent runs (worthit.stats)."""

from __future__ import annotations

import pytest

from worthit.stats import mean_ci95, positive_mean_ci95


@pytest.mark.parametrize("runs", [[10.0, 30.0], [1.0, 9.0], [5.0, 5.1, 30.0], [0.2, 40.0, 41.0]])
def test_an_interval_over_runs_of_a_positive_figure_never_falls_below_zero(runs):
    mean, lo, hi = positive_mean_ci95(runs)
    assert mean == pytest.approx(sum(runs) / len(runs))
    assert lo is not None and hi is not None and 0 < lo <= mean <= hi
    # the raw-scale t-interval over the same runs would start below zero for the two-run cases
    if len(runs) == 2:
        assert mean_ci95(runs)[1] < 0


def test_equal_runs_give_a_point_interval_and_a_zero_run_clips_at_zero():
    assert positive_mean_ci95([7.0, 7.0]) == pytest.approx((7.0, 7.0, 7.0))
    mean, lo, hi = positive_mean_ci95([0.0, 4.0])
    assert (mean, lo) == (2.0, 0.0) and hi > 4.0
    assert positive_mean_ci95([3.0]) == (3.0, None, None)
    assert positive_mean_ci95([]) == (None, None, None)

"""Change over the last 7 and 30 days (analysis.change) on simulated series with white +
flicker noise, outliers and gaps (benchmarks/bench_alarms.py's generator)."""

from __future__ import annotations

import sys
from pathlib import Path

import numpy as np

from analysis.change import recent_change
from analysis.pipeline import AnalysisOptions, analyze_rover

sys.path.insert(0, str(Path(__file__).resolve().parent.parent / "benchmarks"))
import bench_alarms as bench  # noqa: E402

SEED = 777


def _estimates(epochs):
    a = analyze_rover(epochs, serial_number="T", options=AnalysisOptions.build(),
                      sampling_period_s=3600.0, alarm_levels=None)
    return a.estimates


def _east_creep(rate_mm_per_day: float):
    def motion(day):
        return rate_mm_per_day * day, 0.0 * day, -0.5 * rate_mm_per_day * day
    return motion


def test_a_steady_creep_changes_by_rate_times_days_within_its_sigma():
    rate = 0.8  # mm/day east, 0.4 mm/day down
    est = _estimates(bench.stable_point(1, SEED, 90, 0.0, _east_creep(rate)))
    for days in (7, 30):
        c = recent_change(est, days)
        assert c is not None
        assert days <= c.span_days <= days + 1.0
        for comp, truth in (("east", rate * c.span_days), ("up", -0.5 * rate * c.span_days),
                            ("north", 0.0)):
            assert abs(c.change_mm[comp] - truth) < 4.0 * c.sigma_mm[comp] + 0.3, (days, comp)
        h, sh = c.horizontal_mm()
        assert abs(h - rate * c.span_days) < 4.0 * sh + 0.5


def test_points_at_rest_change_by_no_more_than_their_sigma_says():
    """Over 12 points at rest the 7- and 30-day changes are about zero: |change| beyond 3
    sigma in at most 1 of 72 components (a sigma that ignores the flicker noise fails)."""
    beyond = total = 0
    for index in range(12):
        est = _estimates(bench.stable_point(index, SEED, 120, 0.0))
        for days in (7, 30):
            c = recent_change(est, days)
            assert c is not None
            for comp, white_mm in zip(("east", "north", "up"), bench.WHITE_MM):
                total += 1
                beyond += abs(c.change_mm[comp]) > 3.0 * c.sigma_mm[comp]
                assert 0.0 < c.sigma_mm[comp] < 2.0 * white_mm  # not blown up
    assert total == 72 and beyond <= 1, beyond


def test_a_series_shorter_than_the_window_or_with_a_gap_there_has_no_change():
    est = _estimates(bench.stable_point(2, SEED, 20, 0.0))
    assert recent_change(est, 7) is not None
    assert recent_change(est, 30) is None  # 20 days of data
    assert recent_change(None, 7) is None
    epochs = bench.stable_point(3, SEED, 60, 0.0)
    t = epochs["ts"]
    end = t[-1]
    hole = (t > end - np.timedelta64(10, "D")) & (t < end - np.timedelta64(5, "D"))
    cut = {k: v[~hole] for k, v in epochs.items()}
    assert recent_change(_estimates(cut), 7) is None  # no data within a day of 7 days back
    assert recent_change(_estimates(cut), 30) is not None

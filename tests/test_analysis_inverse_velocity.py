"""Inverse velocity (analysis.inverse_velocity) and the failure-time forecast made from it
(analysis.forecast, Voight's law fitted to the displacement) with its refusals."""

from __future__ import annotations

import re

import numpy as np
import pytest

from analysis import forecast
from analysis.inverse_velocity import inverse_velocity

T0 = np.datetime64("2026-01-01T00:00", "ns")
DAY = np.timedelta64(86_400_000_000_000, "ns")


def at(days) -> np.ndarray:
    return T0 + np.rint(np.asarray(days, np.float64) * 86_400e9).astype(np.int64).astype(
        "timedelta64[ns]")


def days_between(a, b) -> float:
    return float((a - b) / DAY)


def fukuzono(seed: int, *, creep_mm_per_day: float = 5.0, creep_days: float = 20.0,
             onset_to_failure_days: float = 50.0, lead_days: float = 10.0,
             noise_m: float = 0.003, ) -> tuple[np.ndarray, np.ndarray, np.datetime64,
                                                np.datetime64]:
    """Hourly positions of a slope creeping at a steady rate, then accelerating from the
    onset with v = 1 / (A (tf - t)) (inverse velocity falling linearly to zero at the
    failure tf, continuous with the creep rate at the onset), plus white noise; the series
    ends ``lead_days`` before the failure.  Returns t, displacement (m), onset, failure."""
    rng = np.random.default_rng(seed)
    tf = creep_days + onset_to_failure_days
    d = np.arange(0.0, tf - lead_days, 1.0 / 24.0)
    a = 1.0 / (creep_mm_per_day * onset_to_failure_days)  # 1/mm
    x_mm = np.where(d < creep_days, creep_mm_per_day * d,
                    creep_mm_per_day * creep_days
                    + np.log(onset_to_failure_days / np.maximum(tf - d, 1e-9)) / a)
    x = x_mm / 1000.0 + noise_m * rng.standard_normal(d.size)
    return at(d), x, at(creep_days), at(tf)


# ----------------------------------------------------------------------------- velocity

def test_inverse_velocity_of_steady_motion():
    rng = np.random.default_rng(1)
    d = np.arange(0, 30, 1 / 24)
    x = 0.004 * d + 0.003 * rng.standard_normal(d.size)  # 4 mm/day
    iv = inverse_velocity(at(d), x, smoothing_days=2.0)
    assert iv.t.size == 14  # 30 days of 2-day windows ending at the last epoch (one short)
    assert (iv.n_points == 48).all() and iv.smoothing_days == 2.0 and iv.step_days == 2.0
    # velocity noise of a 48-epoch, 2-day line through 3 mm noise: 3 * sqrt(12/48) / 2 mm/day
    assert np.median(iv.velocity_sigma_mm_per_day) == pytest.approx(0.75, rel=0.15)
    assert np.abs(iv.velocity_mm_per_day - 4.0).max() < 4 * 0.75
    assert np.allclose(iv.inverse_velocity_day_per_mm, 1 / iv.velocity_mm_per_day)
    # windows are centred on their data: the last one is the mean time of the last 2 days
    assert days_between(iv.t[-1], at(d[-1])) == pytest.approx(-(47 / 2) / 24, abs=1e-6)


def test_inverse_velocity_gaps_overlap_and_backward_motion():
    d = np.arange(0, 20, 1 / 24)
    keep = (d < 5) | (d > 7.5)  # a 2.5-day outage
    x = -0.002 * d  # moving backwards: no inverse velocity
    iv = inverse_velocity(at(d[keep]), x[keep], smoothing_days=1.0)
    assert np.allclose(iv.velocity_mm_per_day, -2.0)
    assert np.isnan(iv.inverse_velocity_day_per_mm).all()
    centres = (iv.t - T0) / DAY
    assert not ((centres > 5) & (centres < 7.5)).any()  # windows inside the outage dropped
    dense = inverse_velocity(at(d), -x, smoothing_days=1.0, step_days=0.25)
    assert dense.t.size == 76  # (19.96 - 1) / 0.25 + 1 windows of 1 day, 6 hours apart
    assert np.allclose(dense.inverse_velocity_day_per_mm, 0.5)
    with pytest.raises(ValueError, match="smoothing_days"):
        inverse_velocity(at(d), x, smoothing_days=0)
    assert inverse_velocity(at(d[:2]), x[:2]).t.size == 0


# ----------------------------------------------------------------------------- forecast

def test_fukuzono_forecast_ten_days_before_failure():
    t, x, onset, failure = fukuzono(seed=7)
    f = inverse_velocity(t, x).forecast()
    assert f.supported, f.reason
    assert f.interval[0] <= failure <= f.interval[1]
    assert abs(days_between(f.failure_time, failure)) < 2.0
    assert f.lead_days == pytest.approx(days_between(failure, f.last_time), abs=2.0)
    assert f.r2 >= 0.7 and f.n_points >= 8 and f.slope_per_mm < 0
    assert abs(days_between(f.onset, onset)) < 6.0  # the automatic onset is near the true one
    # the displacement fit (Voight, alpha fitted: the simulator's 2 within its interval)
    # bounds the failure on both sides, the last data before the interval; its profile
    # interval is not necessarily longer on the far side, as Fieller's of the old
    # inverse-velocity line was
    assert f.method == "displacement" and f.alpha_interval[0] <= 2.0 <= f.alpha_interval[1]
    assert f.data_end < f.interval[0] < f.failure_time < f.interval[1]
    assert "Inverse velocity reaches zero at" in f.describe() and "alpha = 2" in f.describe()


def test_fukuzono_forecast_accuracy_and_coverage_over_seeds():
    """40 noise realisations: the 95 % interval holds the truth in most, and the forecast
    10 days ahead is within 2 days of it in nearly all (measured: sd ~0.7 day)."""
    errors, inside = [], 0
    for seed in range(40):
        t, x, _, failure = fukuzono(seed=100 + seed)
        f = inverse_velocity(t, x).forecast()
        assert f.supported, (seed, f.reason)
        errors.append(days_between(f.failure_time, failure))
        inside += f.interval[0] <= failure <= f.interval[1]
    errors = np.abs(errors)
    assert inside >= 34  # >= 85 % for a nominal 95 %
    assert (errors < 2.0).mean() >= 0.95 and np.median(errors) < 1.0


def test_forecast_with_the_onset_given():
    t, x, onset, failure = fukuzono(seed=3)
    f = inverse_velocity(t, x).forecast(start=onset)
    assert f.supported and not f.onset_automatic and f.onset >= onset
    assert abs(days_between(f.failure_time, failure)) < 2.0


def test_refuses_steady_creep():
    rng = np.random.default_rng(2)
    d = np.arange(0, 60, 1 / 24)
    x = 0.005 * d + 0.003 * rng.standard_normal(d.size)  # 5 mm/day, no acceleration
    iv = inverse_velocity(at(d), x)
    f = iv.forecast()
    assert not f.supported and f.failure_time is None and f.interval is None
    assert "no onset of acceleration" in f.reason
    g = iv.forecast(start=at(20))  # an onset imposed on steady creep is not accepted either
    assert not g.supported
    assert "not decreasing" in g.reason or "below 0.70" in g.reason or \
        "not significantly" in g.reason


def test_refuses_a_stable_point():
    rng = np.random.default_rng(4)
    d = np.arange(0, 60, 1 / 24)
    x = 0.003 * rng.standard_normal(d.size)
    f = inverse_velocity(at(d), x).forecast()
    assert not f.supported
    count = re.search(r"only (\d+) velocity (values?) usable", f.reason)
    assert count and "need 8" in f.reason, f.reason
    assert count[2] == ("value" if count[1] == "1" else "values")  # not "1 velocity values"


def test_refuses_too_few_points_in_the_accelerating_phase():
    t, x, _, failure = fukuzono(seed=5)
    iv = inverse_velocity(t, x)
    f = iv.forecast(start=iv.t[-4])
    assert not f.supported
    assert f.reason.startswith("only 4 points in the accelerating phase") and \
        f.reason.endswith("need 8")
    short = inverse_velocity(t[-12 * 24:], x[-12 * 24:]).forecast()  # 12 days: 5 windows
    assert not short.supported and "only 5 velocity values usable" in short.reason


def test_a_series_too_short_for_any_window_is_refused_by_the_displacement_forecast():
    """Fewer than 3 epochs: no windows, and the forecast (the displacement method, the only
    one) refuses for lack of resolved velocities."""
    iv = inverse_velocity(at([0.0, 1.0]), [0.0, 0.001])
    assert iv.t.size == 0 and iv.data_t.size == 0 and iv.data_mm.size == 0
    f = iv.forecast()
    assert not f.supported and f.method == "displacement"
    assert "only 0 velocity values usable" in f.reason and "need 8" in f.reason
    with pytest.raises(ValueError, match="confidence"):
        iv.forecast(confidence=1.5)


def test_the_forecast_runs_with_its_module_constants():
    """The defaults the pipeline calls the forecast with are the constants the report's
    methods page states."""
    import inspect
    params = inspect.signature(forecast.forecast_from_displacement).parameters
    assert params["min_points"].default == forecast.MIN_POINTS == 8
    assert params["min_velocity_snr"].default == forecast.MIN_VELOCITY_SNR
    assert params["confidence"].default == forecast.CONFIDENCE
    assert params["max_horizon_days"].default == forecast.MAX_HORIZON_DAYS
    assert params["window_days"].default == forecast.WINDOW_DAYS

"""Inverse velocity: the velocity of a displacement series over moving windows and its
inverse, the quantity whose fall to zero forecasts a slope's failure.

Fukuzono (1985, "A new method for predicting the failure time of a slope", Proc. 4th Int.
Conf. and Field Workshop on Landslides, Tokyo, 145-150) observed in large-scale slope
experiments that before failure the inverse of the velocity falls about linearly with time,
reaching zero at the failure; Voight (1988, Nature 332:125-130) gave the general law (1/v
linear is his alpha = 2).  Practice since (Carla et al. 2017, Landslides 14:517-534;
Intrieri et al. 2019, Earth-Sci. Rev. 193:333-349) insists that velocities be smoothed first
(raw differences of noisy positions are noise).  The values here are what the report's
inverse-velocity figure plots and what says whether the motion is resolved at all; the
failure time itself is fitted to the positions (``analysis.forecast``), which this keeps.

Times are numpy ``datetime64`` (UTC); displacement in metres in, mm and mm/day out.
"""

from __future__ import annotations

from dataclasses import dataclass, field

import numpy as np

from analysis.forecast import FailureForecast, forecast_from_displacement
from analysis.lines import window_lines
from analysis.timebase import finite_in_time_order

_NS_PER_DAY = 86_400e9


@dataclass(frozen=True)
class InverseVelocity:
    """Velocity, its 1-sigma and inverse velocity, one value per smoothing window.

    ``t``: the mean time of each window's epochs (a least-squares slope is the velocity at
    its data's mean time, so this carries no lag even where a window is truncated).
    ``inverse_velocity_day_per_mm`` is NaN where the velocity is not positive (no motion in
    the direction of the displacement: its inverse is infinite or meaningless).
    ``n_points``: epochs in each window."""

    t: np.ndarray
    velocity_mm_per_day: np.ndarray
    velocity_sigma_mm_per_day: np.ndarray
    inverse_velocity_day_per_mm: np.ndarray
    n_points: np.ndarray
    smoothing_days: float
    step_days: float
    data_t: np.ndarray | None = field(default=None, repr=False)
    data_mm: np.ndarray | None = field(default=None, repr=False)

    def forecast(self, **kwargs) -> FailureForecast:
        """The failure-time forecast from the displacement these values came from
        (``data_t``, ``data_mm``): ``forecast.forecast_from_displacement``, Voight's alpha = 2
        law fitted to the positions, with an interval that allows for correlated noise;
        keyword arguments are its own."""
        return forecast_from_displacement(self, **kwargs)


def inverse_velocity(t, displacement_m, *, smoothing_days: float = 2.0,
                     step_days: float | None = None,
                     min_coverage: float = 0.5) -> InverseVelocity:
    """Velocity (mm/day) of ``displacement_m`` (one component or a length, metres) by least
    squares over moving windows of ``smoothing_days``, and its inverse (day/mm).

    Why a least-squares slope over a window: at hourly sampling with ~3 mm noise, the
    difference of two epochs an hour apart has a noise of ~100 mm/day; a line through
    ``n`` epochs spread over ``w`` days has a velocity noise of ``sigma * sqrt(12 / n) / w``,
    which falls as ``w**-1.5`` (3 mm hourly: 2.1 mm/day for 1 day, 0.75 mm/day for 2 days).
    Default 2 days: for the failure forecast, independent 2-day velocities carry 4 times the
    information of 1-day ones from the same data (measured on a synthetic Fukuzono slope
    with 3 mm noise, 10 days before failure: forecast error sd 0.7 day with 2-day windows,
    1.6 days with 1-day windows); a slope days from failure changes its velocity within
    less than a day, where 1 day or less is better.  Choose ``smoothing_days`` so the
    velocity noise (returned per window) is well below the velocities of interest; a long
    window blurs a fast acceleration, which biases the forecast early (the safe side).

    Windows end at the last epoch and step back by ``step_days`` (default: the window
    length, so the windows do not overlap and each velocity is an independent estimate,
    which the forecast's uncertainty assumes; a shorter step gives smoother plots).  A
    window holding fewer than ``min_coverage`` of the epochs expected at the median spacing
    (an outage), or fewer than 3, gives no value."""
    w = float(smoothing_days)
    if not (np.isfinite(w) and w > 0):
        raise ValueError(f"smoothing_days must be positive, not {smoothing_days!r}")
    step = w if step_days is None else float(step_days)
    if not (np.isfinite(step) and step > 0):
        raise ValueError(f"step_days must be positive, not {step_days!r}")
    t, x, ok = finite_in_time_order(t, displacement_m)
    empty = np.empty(0)
    if ok.size < 3:
        return InverseVelocity(np.empty(0, "datetime64[ns]"), empty, empty, empty,
                               np.empty(0, np.int64), w, step,
                               data_t=np.empty(0, "datetime64[ns]"), data_mm=empty)
    t0 = t[ok[0]]
    # window bounds in integer nanoseconds: exact, whatever the rounding of float days
    ns = (t[ok] - t0).astype("timedelta64[ns]").astype(np.int64)
    days, xs = ns.astype(np.float64) / _NS_PER_DAY, x[ok]
    spacing = np.diff(days)
    spacing = float(np.median(spacing[spacing > 0])) if (spacing > 0).any() else np.nan
    w_ns, step_ns = int(round(w * _NS_PER_DAY)), int(round(step * _NS_PER_DAY))
    span_ns = int(ns[-1])
    count = (span_ns - w_ns) // step_ns + 1 if span_ns >= w_ns else 1
    ends = ns[-1] - step_ns * np.arange(count, dtype=np.int64)[::-1]
    lo = np.searchsorted(ns, ends - w_ns, "right" if span_ns >= w_ns else "left")
    hi = np.searchsorted(ns, ends, "right")
    need = max(3, int(np.ceil(min_coverage * w / spacing))) if np.isfinite(spacing) else 3
    keep = (hi - lo) >= need
    lo, hi = lo[keep], hi[keep]
    lines = window_lines(days, xs, lo, hi)
    slope, sigma, mean_t = lines.slope, lines.slope_sigma, lines.t_mean
    v = 1000.0 * slope
    with np.errstate(divide="ignore", invalid="ignore"):
        inv = np.where(v > 0, 1.0 / v, np.nan)
    times = t0 + np.rint(mean_t * _NS_PER_DAY).astype(np.int64).astype("timedelta64[ns]")
    return InverseVelocity(times, v, 1000.0 * sigma, inv, (hi - lo).astype(np.int64), w, step,
                           data_t=t[ok].astype("datetime64[ns]"), data_mm=1000.0 * xs)


__all__ = ["InverseVelocity", "inverse_velocity"]

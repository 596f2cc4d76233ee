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
from analysis.stats import median
from analysis.timebase import finite_in_time_order

_NS_PER_DAY = 86_400e9
# A smoothing window holds at least this many readings at the median spacing: a week of
# daily readings.  Chosen for the linear forecast (``analysis.forecast_linear``) on
# synthetic daily slopes (alpha = 2, creep 2 mm/day, 5 mm white scatter, seeds 1000-1099 of
# tests/test_forecast_linear.py's generator): 7 and 3 days before failure, windows of 4
# readings dated 5 and 25 of 100 slopes, of 5: 12 and 34, of 7: 29 and 52 (28 and 52 of
# the intervals holding the failure), of 9: 27 and 58 (25 and 57), at the cost of a
# coarser velocity near failure.
MIN_WINDOW_POINTS = 7


@dataclass(frozen=True)
class InverseVelocity:
    """Velocity, its 1-sigma and inverse velocity, one value per smoothing window.

    ``t``: the mean time of each window's epochs (a least-squares slope is the velocity at
    its data's mean time, so this carries no lag even where a window is truncated).
    ``inverse_velocity_day_per_mm`` is NaN where the velocity is not positive (no motion in
    the direction of the displacement: its inverse is infinite or meaningless).
    ``n_points``: epochs in each window.  ``smoothing_days``: the window length used (the
    one asked for, or longer on sparse data: see ``inverse_velocity``).
    ``scatter_mm``: each window's residual scatter about its line (mm, n - 2 degrees of
    freedom) and ``time_spread_days`` the root of its sum of squared time deviations, so
    that a scatter pooled over many windows gives each velocity's sigma as
    ``pooled / time_spread_days`` (``pooled_velocity_sigma``): a window of 5 daily readings
    measures its own scatter with 3 degrees of freedom, which is noise."""

    t: np.ndarray
    velocity_mm_per_day: np.ndarray
    velocity_sigma_mm_per_day: np.ndarray
    inverse_velocity_day_per_mm: np.ndarray
    n_points: np.ndarray
    smoothing_days: float
    step_days: float
    data_t: np.ndarray | None = field(default=None, repr=False)
    data_mm: np.ndarray | None = field(default=None, repr=False)
    scatter_mm: np.ndarray | None = field(default=None, repr=False)
    time_spread_days: np.ndarray | None = field(default=None, repr=False)

    def pooled_velocity_sigma(self) -> np.ndarray:
        """Each window's velocity 1-sigma (mm/day) from the median of the windows' residual
        variances instead of its own: the same white-noise formula, a scatter measured with
        many degrees of freedom.  The median, because a window on a sharply curving (failing)
        displacement also holds the curvature in its residuals.  Falls back to the windows'
        own sigmas when the scatter is not known."""
        if self.scatter_mm is None or self.time_spread_days is None:
            return np.asarray(self.velocity_sigma_mm_per_day, np.float64)
        s2 = self.scatter_mm ** 2
        ok = np.isfinite(s2)
        if not ok.any():
            return np.asarray(self.velocity_sigma_mm_per_day, np.float64)
        # the median of s^2 with k degrees of freedom is sigma^2 (1 - 2 / (9 k))^3
        # (Wilson-Hilferty): 0.79 sigma^2 at k = 3, so it is corrected to sigma^2
        k = max(median(self.n_points[ok]) - 2.0, 1.0)
        pooled = median(s2[ok]) / (1.0 - 2.0 / (9.0 * k)) ** 3
        with np.errstate(divide="ignore", invalid="ignore"):
            return np.sqrt(pooled) / self.time_spread_days

    def forecast(self, **kwargs) -> FailureForecast:
        """The failure-time forecast from the displacement these values came from
        (``data_t``, ``data_mm``): ``forecast.forecast_from_displacement``, Voight's alpha = 2
        law fitted to the positions, with an interval that allows for correlated noise;
        keyword arguments are its own."""
        return forecast_from_displacement(self, **kwargs)


def inverse_velocity(t, displacement_m, *, smoothing_days: float = 2.0,
                     step_days: float | None = None, min_coverage: float = 0.5,
                     min_window_points: int = MIN_WINDOW_POINTS) -> InverseVelocity:
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
    (an outage), or fewer than 3, gives no value.

    Sparse data (one reading a day from a prism or a daily GNSS solution): a window is a time
    span, but never shorter than ``min_window_points`` times the median spacing, so that it
    holds that many readings where none is missing (4-day windows of daily readings held 3
    to 5 each, whose velocities at 5 mm scatter were +-1.6 mm/day or worse; with
    ``min_window_points`` 7 they are 7-day windows, +-0.9 mm/day).  The window used is
    ``smoothing_days`` of the result; on hourly data nothing changes (a 4-day window holds
    96).  When ``step_days`` is not given the step follows the widened window."""
    w = float(smoothing_days)
    if not (np.isfinite(w) and w > 0):
        raise ValueError(f"smoothing_days must be positive, not {smoothing_days!r}")
    if step_days is not None and not (np.isfinite(float(step_days)) and float(step_days) > 0):
        raise ValueError(f"step_days must be positive, not {step_days!r}")
    if int(min_window_points) < 3:
        raise ValueError(f"min_window_points must be at least 3, not {min_window_points!r}")
    t, x, ok = finite_in_time_order(t, displacement_m)
    empty = np.empty(0)
    if ok.size < 3:
        step = w if step_days is None else float(step_days)
        return InverseVelocity(np.empty(0, "datetime64[ns]"), empty, empty, empty,
                               np.empty(0, np.int64), w, step,
                               data_t=np.empty(0, "datetime64[ns]"), data_mm=empty,
                               scatter_mm=empty, time_spread_days=empty)
    t0 = t[ok[0]]
    # window bounds in integer nanoseconds: exact, whatever the rounding of float days
    ns = (t[ok] - t0).astype("timedelta64[ns]").astype(np.int64)
    days, xs = ns.astype(np.float64) / _NS_PER_DAY, x[ok]
    spacing = np.diff(days)
    spacing = median(spacing[spacing > 0]) if (spacing > 0).any() else np.nan
    if np.isfinite(spacing):
        w = max(w, int(min_window_points) * spacing)
    step = w if step_days is None else float(step_days)
    w_ns, step_ns = round(w * _NS_PER_DAY), round(step * _NS_PER_DAY)
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
                           data_t=t[ok].astype("datetime64[ns]"), data_mm=1000.0 * xs,
                           scatter_mm=1000.0 * np.sqrt(lines.residual_variance),
                           time_spread_days=np.sqrt(lines.stt))


__all__ = ["MIN_WINDOW_POINTS", "InverseVelocity", "inverse_velocity"]

"""Early warning: the inverse-velocity failure forecast, and threshold alarm levels.

Inverse velocity.  Fukuzono (1985, "A new method for predicting the failure time of a
slope", Proc. 4th Int. Conf. and Field Workshop on Landslides, Tokyo, 145-150) observed in
large-scale slope experiments that before failure the inverse of the velocity falls about
linearly with time, reaching zero at the failure; Voight (1988, Nature 332:125-130) gave the
general law (1/v linear is his alpha = 2).  Plotting 1/v and extending its line to zero is
the standard first forecast of a slope's failure time.  Practice since (Carla et al. 2017,
Landslides 14:517-534; Intrieri et al. 2019, Earth-Sci. Rev. 193:333-349) insists that
velocities be smoothed first (raw differences of noisy positions are noise), that only the
accelerating phase be fitted, and that a forecast be stated with its uncertainty and only
when the trend is clear: a forecast from a noisy or non-accelerating series misleads.  So
``forecast_failure`` refuses, with the reason in words, whenever the data do not support one.

Alarm levels.  The engineer sets ordered levels (``alert`` < ``alarm`` < ``emergency``) on
displacement (mm) and velocity (mm/day); ``evaluate_alarms`` says which is reached and when
each was first crossed.

Times are numpy ``datetime64`` (UTC); displacement in metres in, mm and mm/day out.
"""

from __future__ import annotations

import math
from dataclasses import dataclass, field
from typing import Mapping, Sequence

import numpy as np

from analysis.timebase import as_datetime64, finite_in_time_order

_NS_PER_DAY = 86_400e9


def _days(t, t0: np.datetime64) -> np.ndarray:
    return (as_datetime64(t) - t0).astype("timedelta64[ns]").astype(np.float64) / _NS_PER_DAY


def _at(t0: np.datetime64, days: float) -> np.datetime64:
    return t0 + np.timedelta64(int(round(days * _NS_PER_DAY)), "ns")


# ------------------------------------------------------------------------ inverse velocity

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

    def forecast(self, **kwargs) -> "FailureForecast":
        """The failure-time forecast.  With the displacement these values came from (as
        ``inverse_velocity`` keeps it: ``data_t``, ``data_mm``): ``forecast_from_displacement``,
        the alpha = 2 law fitted to the positions, with an interval that allows for
        correlated noise.  Without: ``forecast_failure``, a line through these values, with
        their velocity sigmas (so windows whose velocity is lost in the noise are left out)."""
        if self.data_t is not None and self.data_mm is not None:
            return forecast_from_displacement(self, **kwargs)
        return forecast_failure(self.t, self.inverse_velocity_day_per_mm,
                                velocity_sigma_mm_per_day=self.velocity_sigma_mm_per_day,
                                velocity_mm_per_day=self.velocity_mm_per_day, **kwargs)


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
                               np.empty(0, np.int64), w, step)
    t0 = t[ok[0]]
    days, xs = _days(t[ok], t0), x[ok]
    spacing = np.diff(days)
    spacing = float(np.median(spacing[spacing > 0])) if (spacing > 0).any() else np.nan
    # window bounds in integer nanoseconds: exact, whatever the rounding of float days
    ns = (t[ok] - t0).astype("timedelta64[ns]").astype(np.int64)
    w_ns, step_ns = int(round(w * _NS_PER_DAY)), int(round(step * _NS_PER_DAY))
    span_ns = int(ns[-1])
    count = (span_ns - w_ns) // step_ns + 1 if span_ns >= w_ns else 1
    ends = ns[-1] - step_ns * np.arange(count, dtype=np.int64)[::-1]
    lo = np.searchsorted(ns, ends - w_ns, "right" if span_ns >= w_ns else "left")
    hi = np.searchsorted(ns, ends, "right")
    need = max(3, int(np.ceil(min_coverage * w / spacing))) if np.isfinite(spacing) else 3
    keep = (hi - lo) >= need
    lo, hi = lo[keep], hi[keep]
    slope, sigma, mean_t = _window_lines(days, xs, lo, hi)
    v = 1000.0 * slope
    with np.errstate(divide="ignore", invalid="ignore"):
        inv = np.where(v > 0, 1.0 / v, np.nan)
    times = t0 + np.rint(mean_t * _NS_PER_DAY).astype(np.int64).astype("timedelta64[ns]")
    return InverseVelocity(times, v, 1000.0 * sigma, inv, (hi - lo).astype(np.int64), w, step,
                           data_t=t[ok].astype("datetime64[ns]"), data_mm=1000.0 * xs)


def _window_lines(days: np.ndarray, x: np.ndarray, lo: np.ndarray, hi: np.ndarray,
                  block_elements: int = 1 << 21) -> tuple[np.ndarray, ...]:
    """Least-squares slope, its formal 1-sigma (from the scatter about the line) and the mean
    time of ``x`` against ``days`` over each index window [lo, hi).  Sums are taken about
    each window's first epoch, so years of data lose no precision; blocks of windows are
    processed as padded matrices."""
    m = lo.size
    slope, sigma, mean_t = np.full(m, np.nan), np.full(m, np.nan), np.full(m, np.nan)
    if m == 0:
        return slope, sigma, mean_t
    count = hi - lo
    width = int(count.max())
    rows = max(1, block_elements // max(width, 1))
    k = np.arange(width)
    for a in range(0, m, rows):
        b = min(m, a + rows)
        valid = k[None, :] < count[a:b, None]
        cols = np.where(valid, lo[a:b, None] + k[None, :], lo[a:b, None])
        tt = np.where(valid, days[cols] - days[lo[a:b], None], 0.0)
        xx = np.where(valid, x[cols] - x[lo[a:b], None], 0.0)
        n = count[a:b].astype(np.float64)
        tm = tt.sum(axis=1) / n
        xm = xx.sum(axis=1) / n
        dt = np.where(valid, tt - tm[:, None], 0.0)
        dx = np.where(valid, xx - xm[:, None], 0.0)
        stt = (dt * dt).sum(axis=1)
        stx = (dt * dx).sum(axis=1)
        with np.errstate(divide="ignore", invalid="ignore"):
            bb = stx / stt
            res = np.where(valid, dx - bb[:, None] * dt, 0.0)
            s2 = (res * res).sum(axis=1) / np.maximum(n - 2.0, 1.0)
            slope[a:b] = np.where(stt > 0, bb, np.nan)
            sigma[a:b] = np.where((stt > 0) & (n > 2), np.sqrt(s2 / stt), np.nan)
        mean_t[a:b] = days[lo[a:b]] + tm
    return slope, sigma, mean_t


# ------------------------------------------------------------------------ failure forecast

@dataclass(frozen=True)
class FailureForecast:
    """The inverse-velocity forecast of the time of failure, or the reason there is none.

    ``supported`` False: no forecast can honestly be made, ``reason`` says why in words;
    the fit figures that were computed are still given, for the report.  When supported:
    ``failure_time`` where the fitted inverse-velocity line reaches zero, and ``interval``
    its ``confidence`` interval (displacement method: profile likelihood allowing for
    correlated noise; line method: Fieller's interval for the zero crossing of the line).
    ``onset``: start of the fitted (accelerating) phase, ``onset_automatic`` whether it was
    found by the rule of ``forecast_failure``; ``n_points`` values fitted over ``span_days``;
    ``r2`` of the fit; ``slope_per_mm``: d(1/v)/dt, (day/mm) per day = 1/mm (negative when
    accelerating); ``lag1_autocorrelation`` of the residuals and the ``effective_points``
    the uncertainty was computed with; ``last_time``: the latest inverse-velocity value in
    the fitted phase; ``data_end``: the last epoch (the line fit: ``last_time``);
    ``lead_days``: failure time minus ``data_end``.  ``method``: "displacement" (Voight's
    law fitted to the positions, ``forecast_from_displacement``) or "inverse-velocity line"
    (``forecast_failure``); ``alpha`` Voight's exponent used (2: Fukuzono's straight
    inverse velocity); ``noise_inflation``: the factor by which the interval's threshold was
    raised for correlated (flicker) noise (displacement method)."""

    supported: bool
    reason: str
    failure_time: np.datetime64 | None = None
    interval: tuple[np.datetime64, np.datetime64] | None = None
    confidence: float = 0.95
    onset: np.datetime64 | None = None
    onset_automatic: bool = True
    n_points: int = 0
    span_days: float = float("nan")
    r2: float = float("nan")
    slope_per_mm: float = float("nan")
    lag1_autocorrelation: float = float("nan")
    effective_points: float = float("nan")
    last_time: np.datetime64 | None = None
    lead_days: float = float("nan")
    method: str = "inverse-velocity line"
    alpha: float = 2.0
    data_end: np.datetime64 | None = None
    noise_inflation: float = float("nan")

    def describe(self) -> str:
        """One sentence for a report."""
        if not self.supported:
            return f"No failure-time forecast: {self.reason}."
        lo, hi = self.interval
        if self.method == "displacement":
            return (f"Inverse velocity reaches zero at {_iso(self.failure_time)} "
                    f"({self.lead_days:.1f} days after the last data; "
                    f"{100 * self.confidence:g} % interval {_iso(lo)} to {_iso(hi)}), from "
                    f"the displacement since {_iso(self.onset)} fitted by Voight's law with "
                    f"alpha = {self.alpha:g} (inverse velocity falling linearly), the "
                    f"interval allowing for correlated noise; the {self.n_points} "
                    f"inverse-velocity values since the onset agree with it to R² "
                    f"{self.r2:.2f}.")
        return (f"Inverse velocity reaches zero at {_iso(self.failure_time)} "
                f"({self.lead_days:.1f} days after the last data; {100 * self.confidence:g} % "
                f"interval {_iso(lo)} to {_iso(hi)}), from {self.n_points} values over "
                f"{self.span_days:.1f} days since {_iso(self.onset)}, R² {self.r2:.2f}.")


def _iso(t: np.datetime64 | None) -> str:
    return "-" if t is None else str(np.datetime_as_string(t, unit="m")) + "Z"


def forecast_failure(t, inverse_velocity_day_per_mm, *, start=None, min_points: int = 8,
                     min_r2: float = 0.7, confidence: float = 0.95,
                     max_horizon_days: float = 365.0,
                     velocity_sigma_mm_per_day=None, velocity_mm_per_day=None,
                     min_velocity_snr: float = 2.0) -> FailureForecast:
    """Failure time where the inverse velocity, fitted by a straight line over the
    accelerating phase, reaches zero (Fukuzono 1985) - or a refusal saying why not.

    ``t``, ``inverse_velocity_day_per_mm``: one value per velocity window, ideally from
    non-overlapping windows (``inverse_velocity``'s default), so that each is an independent
    estimate.  NaN values (no positive velocity) are left out.  When the velocities and
    their 1-sigma are given (``InverseVelocity.forecast`` gives them), values whose velocity
    is below ``min_velocity_snr`` sigmas are left out too: their inverse is noise.

    The accelerating phase starts at ``start`` when given.  Otherwise it is found by this
    rule: the onset is the breakpoint of the best (least-squares) continuous two-segment
    fit, constant before the onset (steady creep) and linear after it to the end, over all
    breakpoints leaving at least ``min_points`` values after them; so it is the latest
    onset after which the inverse velocity falls steadily, and an earlier episode does not
    count.  The two-segment fit must beat a constant (steady creep) by the Bayesian
    information criterion, counting the breakpoint as a parameter; else there is no onset.

    The line is fitted by least squares over the phase, weighted when the velocity sigmas
    are given: by the delta method an inverse velocity's sigma is sigma_v / v^2, so a
    creep-phase value (2 +- 0.7 mm/day: 0.5 +- 0.18 day/mm) counts ~250 times less than a
    late one (8 +- 0.7: 0.125 +- 0.011); the weights use the fitted line, not the measured
    value, so a value that came out low is not favoured.  Unweighted, the noisy early values
    dominate the fit and the forecast is mostly refused as too noisy.  R² is that of the
    (weighted) fit.  The uncertainty allows for correlated residuals: the covariance is
    scaled by (1 + r)/(1 - r) and the degrees of freedom reduced to n (1 - r)/(1 + r) - 2,
    r the residuals' lag-1 autocorrelation (positive r: overlapping windows, or an inverse
    velocity that curves).  The interval of
    the zero crossing is Fieller's (the times at which the line's ``confidence`` band
    contains zero): exact for a straight line with Gaussian errors, and asymmetric, longer
    on the far side, as it should be.

    Refusals (``supported=False`` and a ``reason``), in this order: fewer than
    ``min_points`` usable values; no onset of acceleration (automatic rule); fewer than
    ``min_points`` values in the phase; a slope that is not negative (no acceleration);
    R² below ``min_r2`` (too noisy to extrapolate); a slope not significantly negative at
    ``confidence`` (the interval would be unbounded); a zero crossing before the last data
    (the line says failure has already happened: the slope has failed, or the acceleration
    stopped); an interval reaching more than ``max_horizon_days`` beyond the last data.

    Defaults: ``min_points`` 8 (8 independent velocities - 16 days at the 2-day default -
    is the fewest for which a slope, its scatter and its R² mean anything: 6 degrees of
    freedom); ``min_r2`` 0.7 (the straight line must explain most of the variation, or its
    zero crossing is driven by noise; an engineering judgement, not a standard);
    ``confidence`` 0.95; ``max_horizon_days`` 365: the method is a short-term forecast, a
    crossing further ahead says only that there is no imminent failure to forecast.

    Limits: a straight line is Voight's alpha = 2; for alpha < 2 (concave inverse velocity)
    the line forecasts late, for alpha > 2 early, and the correlated residuals then widen
    the interval.  The forecast assumes the acceleration continues; rain, excavation or
    remedial works change it.  It is one input to judgement, never the only one."""
    if not 0.5 < confidence < 1.0:
        raise ValueError(f"confidence must be between 0.5 and 1, not {confidence}")
    if min_points < 3:
        raise ValueError(f"min_points must be at least 3, not {min_points}")
    t_all = as_datetime64(t)
    y_all = np.asarray(inverse_velocity_day_per_mm, dtype=np.float64)
    if t_all.shape != y_all.shape or t_all.ndim != 1:
        raise ValueError(f"times {t_all.shape} and inverse velocities {y_all.shape} must be "
                         f"1-D and of equal length")
    usable = np.isfinite(y_all) & (y_all > 0) & ~np.isnat(t_all)
    dropped_noise = 0
    sig = None
    if velocity_sigma_mm_per_day is not None:
        sig = np.asarray(velocity_sigma_mm_per_day, dtype=np.float64)
        if sig.shape != y_all.shape:
            raise ValueError(f"{sig.size} velocity sigmas for {y_all.size} values")
        vel = (1.0 / y_all if velocity_mm_per_day is None
               else np.asarray(velocity_mm_per_day, dtype=np.float64))
        with np.errstate(invalid="ignore"):
            resolved = (vel >= min_velocity_snr * sig) & (sig > 0)
        dropped_noise = int((usable & ~resolved).sum())
        usable &= resolved
    order = np.flatnonzero(usable)
    order = order[np.argsort(t_all[order], kind="stable")]
    sigma_v = sig[order] if sig is not None else None
    cl = f"{100 * confidence:g} %"
    if order.size < min_points:
        extra = (f" ({dropped_noise} more with a velocity under {min_velocity_snr:g} sigma "
                 f"of its noise)" if dropped_noise else "")
        return FailureForecast(False, f"only {order.size} velocity values usable{extra}; "
                               f"need {min_points}: velocity not resolved above noise, or "
                               f"too short a series", confidence=confidence,
                               n_points=int(order.size))
    ts, y = t_all[order], y_all[order]
    t0 = ts[0]
    x = _days(ts, t0)
    last = ts[-1]
    automatic = start is None
    if automatic:
        j, better = _onset(x, y, min_points, _weights(sigma_v, y))
        if not better:
            return FailureForecast(False, "no onset of acceleration: a steady inverse velocity "
                                   "(steady creep or no motion) fits the data as well as a "
                                   "fall from an onset", confidence=confidence,
                                   n_points=int(y.size), last_time=last)
        phase = np.arange(j, y.size)
    else:
        phase = np.flatnonzero(ts >= as_datetime64(start))
    onset = ts[phase[0]] if phase.size else as_datetime64(start)
    base = dict(confidence=confidence, onset=onset, onset_automatic=automatic,
                n_points=int(phase.size), last_time=last)
    if phase.size < min_points:
        return FailureForecast(False, f"only {phase.size} points in the accelerating phase "
                               f"(since {_iso(onset)}); need {min_points}", **base)
    xp, yp = x[phase], y[phase]
    fit = _line_fit(xp, yp, None if sigma_v is None else sigma_v[phase])
    base.update(span_days=float(xp[-1] - xp[0]), r2=fit.r2, slope_per_mm=fit.slope,
                lag1_autocorrelation=fit.rho, effective_points=fit.n_eff)
    if not fit.slope < 0:
        return FailureForecast(False, f"inverse velocity is not decreasing (slope "
                               f"{fit.slope:+.3g} (day/mm)/day): no acceleration", **base)
    if not fit.r2 >= min_r2:
        return FailureForecast(False, f"R² {fit.r2:.2f} below {min_r2:.2f}: trend too noisy "
                               f"to extrapolate", **base)
    q = _student_t_quantile(0.5 + 0.5 * confidence, max(fit.n_eff - 2.0, 1.0))
    crossing = _fieller_zero(fit, q)
    if crossing is None:
        return FailureForecast(False, f"inverse-velocity slope {fit.slope:+.3g} (day/mm)/day "
                               f"is not significantly below zero at {cl}: the failure time "
                               f"cannot be bounded", **base)
    x0, x_lo, x_hi = crossing
    last_x = float(x[-1])
    if x0 <= last_x:
        return FailureForecast(False, f"the fitted line reaches zero at {_iso(_at(t0, x0))}, "
                               f"before the last data ({_iso(last)}): the acceleration did "
                               f"not continue as a straight inverse-velocity line (the slope "
                               f"may have failed, or slowed down)", **base)
    if x_hi - last_x > max_horizon_days:
        return FailureForecast(False, f"the {cl} interval of the failure time reaches "
                               f"{x_hi - last_x:.0f} days beyond the last data (more than "
                               f"{max_horizon_days:g}): too uncertain to state", **base)
    return FailureForecast(True, "", failure_time=_at(t0, x0),
                           interval=(_at(t0, x_lo), _at(t0, x_hi)),
                           lead_days=float(x0 - last_x), data_end=last, **base)


def forecast_from_displacement(iv: InverseVelocity, *, start=None, min_points: int = 8,
                               confidence: float = 0.95, max_horizon_days: float = 365.0,
                               min_velocity_snr: float = 2.0, window_days: float = 180.0,
                               ) -> FailureForecast:
    """Failure time from the displacement behind ``iv`` (``iv.data_t``, ``iv.data_mm``):
    Voight's law with alpha = 2 (velocity b / (tf - t) after an onset, steady creep before;
    the inverse velocity falls linearly to zero at tf, Fukuzono 1985) fitted to the
    positions of the last ``window_days``, with a profile-likelihood interval of tf that
    allows for time-correlated noise (``analysis.forecast``) - or a refusal saying why not.

    The windowed inverse velocities of ``iv`` are used only to say whether the motion is
    resolved at all (at least ``min_points`` values with a velocity of ``min_velocity_snr``
    sigmas, as ``forecast_failure``), and for the figures: ``onset`` is the first of them at
    or after the fitted onset, ``last_time`` the last, ``n_points`` their count, ``r2`` how
    well the fitted inverse-velocity line (tf - t) / b explains them (weighted as in
    ``forecast_failure``), ``slope_per_mm`` = -1 / b.

    ``start``: the onset, when known (else it is fitted).  Refusals: too few resolved
    velocity values (or in the phase since ``start``); no acceleration (a steady velocity,
    or a velocity step, fits as well: steady creep or no motion); a failure time the data
    cannot bound at ``confidence``; an interval reaching beyond ``max_horizon_days``."""
    from analysis import forecast as fc

    if not 0.5 < confidence < 1.0:
        raise ValueError(f"confidence must be between 0.5 and 1, not {confidence}")
    if min_points < 3:
        raise ValueError(f"min_points must be at least 3, not {min_points}")
    cl = f"{100 * confidence:g} %"
    y, v, sig = (iv.inverse_velocity_day_per_mm, iv.velocity_mm_per_day,
                 iv.velocity_sigma_mm_per_day)
    with np.errstate(invalid="ignore"):
        resolved = np.isfinite(y) & (y > 0) & (v >= min_velocity_snr * sig) & (sig > 0)
    usable = int(resolved.sum())
    unresolved = int((np.isfinite(y) & (y > 0) & ~resolved).sum())
    t_data = as_datetime64(iv.data_t)
    last = t_data[-1] if t_data.size else None
    base = dict(confidence=confidence, method="displacement", alpha=2.0, data_end=last,
                onset_automatic=start is None)
    if usable < min_points:
        extra = (f" ({unresolved} more with a velocity under {min_velocity_snr:g} sigma "
                 f"of its noise)" if unresolved else "")
        return FailureForecast(False, f"only {usable} velocity values usable{extra}; "
                               f"need {min_points}: velocity not resolved above noise, or "
                               f"too short a series", n_points=usable, last_time=last, **base)
    onset_ns = None
    if start is not None:
        start = as_datetime64(start)
        in_phase = resolved & (iv.t >= start)
        if int(in_phase.sum()) < min_points:
            return FailureForecast(False, f"only {int(in_phase.sum())} points in the "
                                   f"accelerating phase (since {_iso(start)}); need "
                                   f"{min_points}", onset=start, n_points=int(in_phase.sum()),
                                   last_time=last, **base)
        onset_ns = int(start.astype("datetime64[ns]").astype(np.int64))
    ns = t_data.astype("datetime64[ns]").astype(np.int64)
    end_ns = int(ns[-1])
    recent = ns >= end_ns - int(window_days * _NS_PER_DAY)
    fit, origin = fc.fit_failure(ns[recent], np.asarray(iv.data_mm)[recent], end_ns=end_ns,
                                 confidence=confidence, max_horizon_days=max_horizon_days,
                                 onset_ns=onset_ns, t_quantile=_student_t_quantile)
    t_origin = np.datetime64(origin, "ns")
    extra = dict(lag1_autocorrelation=fit.rho, noise_inflation=fit.inflation)
    if np.isfinite(fit.ta):
        onset_t = _at(t_origin, fit.ta)
        used = resolved & (iv.t >= onset_t)
        onset_shown = iv.t[used][0] if used.any() else onset_t
        last_shown = iv.t[used][-1] if used.any() else last
        extra.update(onset=onset_shown, n_points=int(used.sum()), last_time=last_shown,
                     span_days=float((last_shown - onset_shown) / np.timedelta64(1, "D")))
        if np.isfinite(fit.b_mm) and np.isfinite(fit.tf):
            extra.update(slope_per_mm=-1.0 / fit.b_mm,
                         r2=_line_r2(iv, used, fit.tf, fit.b_mm, t_origin))
    else:
        extra.update(last_time=last)
    if not fit.ok:
        if fit.why == "too few":
            reason = (f"only {fit.n_bins} six-hour bins of positions in the last "
                      f"{window_days:g} days: too short a series")
        elif fit.why == "no acceleration":
            reason = ("no onset of acceleration: a steady velocity (steady creep or no "
                      "motion) fits the displacement as well as an acceleration towards failure"
                      if start is None else
                      f"the displacement since {_iso(start)} shows no acceleration (inverse "
                      f"velocity not decreasing): a steady velocity fits as well")
        else:
            reason = (f"the acceleration is not significantly different from a steady "
                      f"velocity at {cl} once correlated noise is allowed for: the failure "
                      f"time cannot be bounded")
        return FailureForecast(False, reason, **{**base, **extra})
    t_end = (end_ns - origin) / _NS_PER_DAY
    if fit.hi - t_end > max_horizon_days:
        return FailureForecast(False, f"the {cl} interval of the failure time reaches "
                               f"{fit.hi - t_end:.0f} days beyond the last data (more than "
                               f"{max_horizon_days:g}): too uncertain to state",
                               **{**base, **extra})
    return FailureForecast(True, "", failure_time=_at(t_origin, fit.tf),
                           interval=(_at(t_origin, fit.lo), _at(t_origin, fit.hi)),
                           lead_days=float(fit.tf - t_end),
                           effective_points=float(fit.n_bins) / max(fit.inflation, 1.0),
                           **{**base, **extra})


def _line_r2(iv: InverseVelocity, used: np.ndarray, tf_days: float, b_mm: float,
             t_origin: np.datetime64) -> float:
    """Weighted R² of the inverse velocities ``used`` about the line (tf - t) / b."""
    if int(used.sum()) < 3:
        return float("nan")
    x = _days(iv.t[used], t_origin)
    y = iv.inverse_velocity_day_per_mm[used]
    line = np.maximum((tf_days - x) / b_mm, 1e-6)
    w = _weights(iv.velocity_sigma_mm_per_day[used], line)
    w = w / w.sum()
    ym = float(w @ y)
    tss = float(w @ (y - ym) ** 2)
    return 1.0 - float(w @ (y - line) ** 2) / tss if tss > 0 else float("nan")


@dataclass(frozen=True)
class _Fit:
    """y = a + slope (x - x_mean), with the covariance already inflated for correlation."""

    x_mean: float
    a: float
    slope: float
    var_a: float
    var_slope: float
    r2: float
    rho: float
    n_eff: float


def _weights(sigma_v: np.ndarray | None, inv: np.ndarray) -> np.ndarray | None:
    """Least-squares weights of inverse velocities: 1 / their variance, which by the delta
    method is (sigma_v * inv^2)^2 (the inverse of a velocity of 2 +- 0.7 mm/day is 0.5 +-
    0.18 day/mm, of 8 +- 0.7 is 0.125 +- 0.011: a creep-phase value is worth ~1/250 of a
    late one).  ``inv`` is the fitted line where there is one, so a value is not favoured
    for having come out low.  None: no sigmas, equal weights."""
    if sigma_v is None:
        return None
    return 1.0 / (sigma_v * inv * inv) ** 2


def _weighted_line(x: np.ndarray, y: np.ndarray, w: np.ndarray):
    """One weighted line: normalised weights, weighted mean x, x - mean, weighted Sxx,
    intercept at the mean x and slope."""
    w = w / w.sum()
    xm = float(w @ x)
    dx = x - xm
    sxx = float(w @ (dx * dx))
    a = float(w @ y)
    return w, xm, dx, sxx, a, float(w @ (dx * (y - a))) / sxx


def _line_fit(x: np.ndarray, y: np.ndarray, sigma_v: np.ndarray | None = None) -> _Fit:
    """Weighted least-squares line (weights from ``sigma_v`` and the fitted line, three
    passes; equal weights without ``sigma_v``), R² and the residuals' lag-1 correlation."""
    n = x.size
    w = _weights(sigma_v, y)
    w = np.ones(n) if w is None else w
    floor = 0.25 * float(np.min(y))  # a line reaching zero inside the data: bounded weights
    w, xm, dx, sxx, a, slope = _weighted_line(x, y, w)
    for _ in range(3 if sigma_v is not None else 0):
        w = _weights(sigma_v, np.maximum(a + slope * dx, floor))
        w, xm, dx, sxx, a, slope = _weighted_line(x, y, w)
    res = y - a - slope * dx
    wrss = float(w @ (res * res))
    wtss = float(w @ ((y - a) ** 2))
    r2 = 1.0 - wrss / wtss if wtss > 0 else float("nan")
    s2 = wrss * n / (n - 2)  # residual variance of unit weight (weights sum to n)
    z = res * np.sqrt(w)
    zz = float(z @ z)
    rho = float(z[1:] @ z[:-1]) / zz if zz > 0 else 0.0
    inflation = (1.0 + rho) / (1.0 - rho) if 0.0 < rho < 1.0 else 1.0
    return _Fit(xm, a, slope, s2 / n * inflation, s2 / (n * sxx) * inflation, r2, rho,
                n / inflation)


def _fieller_zero(fit: _Fit, q: float) -> tuple[float, float, float] | None:
    """Zero crossing of the line and Fieller's interval: the x where |a + b u| <=
    q * sqrt(var_a + u^2 var_b), u = x - x_mean.  None when the slope is not significant
    (then the set is unbounded)."""
    a, b = fit.a, fit.slope
    qa = b * b - q * q * fit.var_slope
    if qa <= 0:
        return None
    disc = a * a * fit.var_slope + b * b * fit.var_a - q * q * fit.var_a * fit.var_slope
    root = q * math.sqrt(max(disc, 0.0))
    u1, u2 = (-a * b - root) / qa, (-a * b + root) / qa
    return fit.x_mean - a / b, fit.x_mean + min(u1, u2), fit.x_mean + max(u1, u2)


def _onset(x: np.ndarray, y: np.ndarray, min_points: int,
           weights: np.ndarray | None = None) -> tuple[int, bool]:
    """Index of the breakpoint of the best continuous "constant, then linear" fit (weighted
    least squares) with at least ``min_points`` values from the breakpoint on, and whether
    that fit beats a constant by BIC (3 parameters - level, slope, breakpoint - against 1)
    with a falling line."""
    n = x.size
    w = np.ones(n) if weights is None else weights * (n / weights.sum())
    cand = np.arange(0, n - min_points + 1)
    if cand.size > 2000:  # a very long series: every k-th breakpoint is enough
        cand = cand[:: int(np.ceil(cand.size / 2000))]
    h = np.maximum(x[None, :] - x[cand, None], 0.0)  # (candidates, n)
    sw = float(w.sum())
    sh, shh, shy = h @ w, (h * h) @ w, h @ (w * y)
    sy, syy = float(w @ y), float(w @ (y * y))
    det = sw * shh - sh * sh
    with np.errstate(divide="ignore", invalid="ignore"):
        c = (shh * sy - sh * shy) / det
        b = (sw * shy - sh * sy) / det
        rss = syy - c * sy - b * shy
    rss = np.where(det > 0, np.maximum(rss, 0.0), np.inf)
    best = int(np.argmin(rss))
    rss_const = float(w @ ((y - sy / sw) ** 2))
    floor = 1e-12 * max(syy, 1e-300)
    bic_hinge = n * math.log(max(rss[best], floor) / n) + 3 * math.log(n)
    bic_const = n * math.log(max(rss_const, floor) / n) + 1 * math.log(n)
    return int(cand[best]), bool(bic_hinge < bic_const and b[best] < 0)


def _student_t_quantile(p: float, dof: float) -> float:
    """The ``p`` quantile (0.5 < p < 1) of Student's t with ``dof`` (> 0, not necessarily
    whole) degrees of freedom: bisection on the CDF, the density integrated by Simpson's
    rule (numpy only; accurate to ~1e-6)."""
    log_norm = math.lgamma((dof + 1) / 2) - math.lgamma(dof / 2) - 0.5 * math.log(dof * math.pi)

    def cdf_above_half(x: float) -> float:
        u = np.linspace(0.0, x, 4001)
        f = np.exp(log_norm - (dof + 1) / 2 * np.log1p(u * u / dof))
        h = x / 4000
        return float(h / 3 * (f[0] + f[-1] + 4 * f[1:-1:2].sum() + 2 * f[2:-1:2].sum()))

    target = p - 0.5
    lo, hi = 0.0, 2.0
    while cdf_above_half(hi) < target:
        lo, hi = hi, hi * 2.0
        if hi > 1e7:
            return float("inf")
    for _ in range(60):
        mid = 0.5 * (lo + hi)
        if cdf_above_half(mid) < target:
            lo = mid
        else:
            hi = mid
    return 0.5 * (lo + hi)


# ------------------------------------------------------------------------ alarm levels

@dataclass(frozen=True, init=False)
class AlarmLevels:
    """Ordered alarm levels of one quantity: ``names[i]`` is reached when the size of the
    quantity is at least ``thresholds[i]`` (in ``unit``: mm for displacement, mm/day for
    velocity, as the mirror stores them).  Built from ``{name: threshold}`` or
    ``[(name, threshold), ...]`` in ascending order of severity:
    ``AlarmLevels({"alert": 10, "alarm": 25, "emergency": 50}, "mm")``.

    Validated, with a ValueError saying what is wrong: at least one level, names non-empty
    and distinct, thresholds finite, positive and strictly ascending (each level more
    severe than the one before; levels given out of order are refused rather than sorted,
    since a swapped pair is more likely a typing error than an intent)."""

    names: tuple[str, ...]
    thresholds: tuple[float, ...]
    unit: str

    def __init__(self, levels: Mapping[str, float] | Sequence[tuple[str, float]],
                 unit: str = "") -> None:
        if isinstance(levels, Mapping):
            pairs = list(levels.items())
        else:
            pairs = list(levels or ())
            if not all(isinstance(p, (tuple, list)) and len(p) == 2 for p in pairs):
                raise ValueError(f"alarm levels: give {{name: threshold}} or "
                                 f"[(name, threshold), ...], not {levels!r}")
        if not pairs:
            raise ValueError("alarm levels: give at least one level (name and threshold)")
        names = tuple(p[0] for p in pairs)
        for name in names:
            if not isinstance(name, str) or not name.strip():
                raise ValueError(f"alarm level names must be non-empty text, not {name!r}")
        if len(set(names)) != len(names):
            raise ValueError(f"alarm level names must be distinct: {list(names)}")
        thresholds = []
        for name, value in pairs:
            try:
                value = float(value)
            except (TypeError, ValueError):
                raise ValueError(f"alarm level {name!r}: threshold must be a number, not "
                                 f"{value!r}") from None
            if not (math.isfinite(value) and value > 0):
                raise ValueError(f"alarm level {name!r}: threshold must be a positive "
                                 f"number, not {value:g}")
            thresholds.append(value)
        for (n1, v1), (n2, v2) in zip(zip(names, thresholds), zip(names[1:], thresholds[1:])):
            if not v2 > v1:
                raise ValueError(f"alarm thresholds must be strictly ascending: {n2!r} "
                                 f"({v2:g}) must be above {n1!r} ({v1:g})")
        object.__setattr__(self, "names", names)
        object.__setattr__(self, "thresholds", tuple(thresholds))
        object.__setattr__(self, "unit", str(unit))

    def index(self, values) -> np.ndarray:
        """For each value, 0 when below every level, else 1 + the index of the highest
        level reached (|value| >= threshold); NaN gives 0."""
        v = np.abs(np.asarray(values, dtype=np.float64))
        idx = np.searchsorted(np.asarray(self.thresholds), v, side="right")
        return np.where(np.isfinite(v), idx, 0)


def alarm_state(value: float, levels: AlarmLevels) -> str | None:
    """The highest level whose threshold the size of ``value`` reaches (>=), or None.

    The size (absolute value) is compared, whatever the sign: a settlement of -30 mm
    reaches a 25 mm displacement level.  NaN (no value) reaches nothing."""
    i = int(levels.index(float(value)))
    return levels.names[i - 1] if i else None


def alarm_states(values, levels: AlarmLevels) -> np.ndarray:
    """``alarm_state`` of each value: an object array of level names and None."""
    names = np.array((None,) + levels.names, dtype=object)
    return names[levels.index(values)]


@dataclass(frozen=True)
class QuantityAlarm:
    """The alarm state of one quantity: ``current_value`` (the latest finite value) and the
    level it reaches, ``max_value`` (largest size) and the level that reaches;
    ``first_crossed``: for each level reached, when it was first reached (datetime64 if
    times were given) and ``first_crossed_index`` (position in the values)."""

    quantity: str
    unit: str
    levels: AlarmLevels
    current_value: float
    current_level: str | None
    max_value: float
    max_level: str | None
    first_crossed: dict[str, np.datetime64] = field(default_factory=dict)
    first_crossed_index: dict[str, int] = field(default_factory=dict)

    @property
    def rank(self) -> int:
        """0 below every level, 1 at the first level, ..."""
        return self.levels.names.index(self.current_level) + 1 if self.current_level else 0

    @property
    def max_rank(self) -> int:
        return self.levels.names.index(self.max_level) + 1 if self.max_level else 0


@dataclass(frozen=True)
class AlarmState:
    """Alarm state of a point: per quantity (None when it had no values or no levels), and
    ``overall``: the worst current level, from ``overall_quantity``; ``overall_max``: the
    worst level reached at any time.  Ladders are compared by position (the second level of
    one is as severe as the second of the other, as in the usual alert / alarm / emergency
    scheme used for both); a tie goes to displacement."""

    displacement: QuantityAlarm | None
    velocity: QuantityAlarm | None
    overall: str | None
    overall_quantity: str | None
    overall_max: str | None

    @property
    def rank(self) -> int:
        """0 below every level (or none set), 1 at the first level of the worst quantity,
        and so on: what tables tint their rows by."""
        if not self.overall or not self.overall_quantity:
            return 0
        quantity = getattr(self, self.overall_quantity, None)
        return quantity.rank if quantity is not None else 1

    def describe(self) -> str:
        parts = []
        for qa in (self.displacement, self.velocity):
            if qa is not None:
                parts.append(f"{qa.quantity} {qa.current_value:.1f} {qa.unit}: "
                             f"{qa.current_level or 'below all levels'}")
        return "; ".join(parts) if parts else "no alarm levels evaluated"


def _quantity_alarm(quantity: str, values, levels: AlarmLevels | None, t) -> QuantityAlarm | None:
    if values is None or levels is None:
        return None
    v = np.atleast_1d(np.asarray(values, dtype=np.float64))
    finite = np.flatnonzero(np.isfinite(v))
    if finite.size == 0:
        return None
    times = None
    if t is not None:
        times = as_datetime64(t)
        if times.shape != v.shape:
            raise ValueError(f"{quantity}: {v.size} values but {times.size} times")
    idx = levels.index(v)
    current = float(v[finite[-1]])
    size = np.abs(v[finite])
    max_value = float(v[finite[np.argmax(size)]])
    first_index, first_time = {}, {}
    for i, name in enumerate(levels.names, start=1):
        hits = np.flatnonzero(idx >= i)
        if hits.size:
            first_index[name] = int(hits[0])
            if times is not None:
                first_time[name] = times[hits[0]]
    return QuantityAlarm(quantity, levels.unit, levels, current,
                         alarm_state(current, levels), max_value,
                         alarm_state(max_value, levels), first_time, first_index)


def evaluate_alarms(displacement_mm, velocity_mm_per_day,
                    displacement_levels: AlarmLevels | None,
                    velocity_levels: AlarmLevels | None, *, t=None,
                    t_velocity=None) -> AlarmState:
    """Alarm levels reached by displacement (mm) and velocity (mm/day).

    Each may be a single value (the current one) or a series in time order, with its times
    ``t`` (and ``t_velocity`` when velocities have their own times, e.g. one per smoothing
    window; default ``t``): the current level is that of the latest finite value, and each
    level's first crossing is reported.  A quantity given as None, or with levels None, is
    not evaluated.  Velocities should be smoothed (``inverse_velocity``): the first
    crossing of a noisy series is a noise spike."""
    disp = _quantity_alarm("displacement", displacement_mm, displacement_levels, t)
    vel = _quantity_alarm("velocity", velocity_mm_per_day, velocity_levels,
                          t_velocity if t_velocity is not None else t)
    present = [qa for qa in (disp, vel) if qa is not None]
    overall = overall_quantity = overall_max = None
    if present:
        worst = max(present, key=lambda qa: qa.rank)  # first wins a tie: displacement
        if worst.rank:
            overall, overall_quantity = worst.current_level, worst.quantity
        worst_max = max(present, key=lambda qa: qa.max_rank)
        overall_max = worst_max.max_level
    return AlarmState(disp, vel, overall, overall_quantity, overall_max)


__all__ = ["InverseVelocity", "inverse_velocity", "FailureForecast", "forecast_failure",
           "AlarmLevels", "alarm_state", "alarm_states", "QuantityAlarm", "AlarmState",
           "evaluate_alarms"]

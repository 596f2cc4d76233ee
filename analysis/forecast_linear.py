"""The classic linear inverse-velocity forecast (Fukuzono 1985), beside devmon's Voight fit.

What slope and mine engineers know: smoothed velocities, their inverse 1/v against time, a
straight line through the values of the accelerating phase, and the failure where the
line reaches zero (Fukuzono 1985; Voight 1988 with alpha = 2).  The practice followed
here is that of Carla et al. (2017, Landslides 14:517-534) and the review of Intrieri et al.
(2019, Earth-Sci. Rev. 193:333-349): velocities smoothed before they are inverted, the line
fitted from the onset of acceleration (OOA) on, and the forecast re-made at each new
reading.  What is devmon's own, and why:

* Velocities: ``analysis.inverse_velocity`` (least-squares slopes over windows that do not
  overlap, each at least ``MIN_WINDOW_POINTS`` readings long on sparse data), each with a
  sigma from the scatter pooled over all windows (``pooled_velocity_sigma``).
* The line is fitted by least squares weighted by each value's noise: the sigma of 1/v is
  sigma_v / v^2 (delta method), taken at the line, not at the value (iterated), so a slow,
  noisy value (1/v large and wild) does not steer the line and a value is not favoured
  for having come out low.  Ordinary least squares on 1/v, which the papers draw, dated
  21, 39 and 25 of 100 synthetic daily slopes 7, 3 and 1 days before failure (alpha = 2,
  creep 2 mm/day, seeds 1000-1099, the same onset rule), the weighted fit 29, 52 and 54;
  on seeds 2000-2099 23, 31 and 27 against 33, 52 and 50.  Both intervals held the
  failure in all but 1-3 of them.
* The onset: the window, among those of the last ``PHASE_WINDOW_DAYS``, that best splits
  the velocities into a steady part (a constant velocity) and a part whose 1/v falls on a
  line, by the chi-square of both parts in velocity units plus 2 per parameter (Akaike);
  the line needs ``MIN_PHASE_POINTS`` values.  Papers pick the OOA by eye or by a
  threshold; a forecast re-made unattended needs a rule.
* Whether the slope accelerates at all is decided apart from the line, so that picking the
  onset cannot manufacture an acceleration (``acceleration_test``): through the daily
  medians of the positions of the last ``ACCELERATION_WINDOW_DAYS``, a quadratic and a
  line whose slope changes ``HINGE_DAYS`` before the end; the better of the two must show
  a velocity at the last data and an acceleration both above zero at one-sided
  ``ACCELERATION_CONFIDENCE`` (shared between the two, Bonferroni), with the noise of the
  ``NOISE_WINDOW_DAYS`` before the window and an AR(1) inflation for correlated noise, or
  the window's own noise (about a line over its days before the last ``HINGE_DAYS``) when
  that is larger: real GNSS noise changes with the season, and a multi-day excursion in
  height measured against a quieter past passed for an acceleration.
  The pipeline tests along the direction of the window's own motion
  (``acceleration_along_motion``; why there: its docstring).
* The interval: Fieller's for the zero of the line (the times where the line's value is
  within q sigma of zero, q Student's at ``CONFIDENCE`` with n - 2 degrees of freedom),
  the line's covariance scaled by the chi-square per degree of freedom (never below 1)
  and by (1 + r) / (1 - r) for a lag-1 correlation r > 0 of its residuals.  It knows the
  noise of the velocities, not whether the law holds: for alpha > 2 the true 1/v curves
  down and a line through it points late (the unsafe side), for alpha < 2 early.  Its
  lower end is clipped to the last data (the slope stood then).

States (``LinearForecast.state``):

* ``dated``: acceleration established, the line reaches zero after the last data and its
  interval is bounded within ``MAX_HORIZON_DAYS``: a failure time and its interval.
* ``imminent``: acceleration established and the line is at zero at or before the last
  data (the most recent velocities are about as high as the line allows): failure may be
  imminent.  A safe-side signal, not a date.
* ``accelerating, not dated``: acceleration established, but the line cannot date it (too
  few or too noisy values: its zero is not bounded at ``CONFIDENCE``).  The statement is
  "accelerating; failure possible within N days": N where the line reaches zero when it
  falls as steeply as the data allow (its slope at the one-sided ``CONFIDENCE`` bound, its
  value at the last data as fitted), or, without a falling line, v / (a + q sigma_a) of
  the acceleration test (Fukuzono's law: time left = v / (dv/dt)), which comes late near
  failure (a 30-day trend lags a hyperbola).  Measured on synthetic daily slopes (5 mm
  scatter, creep 1 or 2 mm/day, 7, 3 and 1 days before failure): N / true time left had a
  median of 0.1-0.5 at alpha = 2 and 0.4-1.0 at alpha = 2.3; N came after the failure in
  0-25 % of the slopes at alpha = 2 and 27-50 % at alpha = 2.3 (a handful of noisy
  inverse velocities; a steeper law is the unsafe side here too).
* ``no acceleration``: no velocity or no acceleration significantly above zero.
* ``too few data``: fewer than ``MIN_ACCELERATION_DAYS`` daily medians in the window.

Calibration and scoring.  ``ACCELERATION_CONFIDENCE`` (and the test's windows) were chosen
on points that do not accelerate, evaluated at month ends along their motion: simulated
hourly white + flicker points (``benchmarks/bench_alarms.py``'s generator), one year blocks
of the calibration station LHAS's real daily residuals (``benchmarks/real_noise.py``,
hourly with the alarm benchmark's white noise, and daily with 1 mm), and daily 5 mm white
noise points at rest and creeping.  With the quiet noise alone, 1.1 % (LHAS hourly),
1.5 % (LHAS daily), 1.4 % (P156 hourly) and 0.9 % (P156 daily) of evaluations warned:
each warning looked at was a 15-25 mm excursion in height over the last days of a window
noisier than the 60 days before it.  The window's own noise (no threshold moved, nothing
tuned) brought them to 0.4 % and 0.6 % on LHAS; scored on P156,
0.0 % hourly and daily (the upper 95 % bound for 0 of 352 is 0.9 %).  What remains warns on LHAS's largest height
excursions (e.g. +20 mm in March 1997, against 6-7 mm scatter): a 30-day test cannot
tell those from an acceleration.  The price, on the synthetic slopes below (seeds
2000-2099, warnings before -> after): 3 days before failure 94 -> 87 % at alpha = 2, creep
1 mm/day, 46 -> 24 % at alpha = 2.3; 7 days before 98 -> 91 % at alpha = 2, creep 2 mm/day
(a marginal, late acceleration is measured against more noise).

``MIN_WINDOW_POINTS`` and the weighting were chosen on synthetic daily slopes (alpha = 2,
seeds 1000-1099 of ``tests/test_forecast_linear.py``'s generator);
seeds 2000-2099 score them: at creep 2 mm/day (alpha = 2) 91 % of the slopes warned 7
days before failure (32 dated, 30 of those intervals holding the failure), all 3 and 1
days before, none 30 days before (the onset); at creep 1 mm/day 18 %, 87 % and 100 %; at
alpha = 2.3 and creep 1 mm/day only 4 %, 24 % and 77 % (a late, sharp acceleration).
The real prism records of ``benchmarks/data/`` were not looked at while choosing any
constant.  ``benchmarks/bench_forecast_linear.py`` prints these figures.

Pure numpy; times ``datetime64[ns]`` (UTC), displacement in mm, velocity in mm/day.
Size: about 715 lines: the forecast, its acceleration test and its agreement check with the
Voight fit belong together (one reads the states' rules in one place).
"""

from __future__ import annotations

import math
from dataclasses import dataclass, replace

import numpy as np

from analysis.forecast import FailureForecast, bin_series
from analysis.inverse_velocity import InverseVelocity, inverse_velocity
from analysis.stats import student_t_quantile
from analysis.timebase import as_datetime64

CONFIDENCE = 0.95
ACCELERATION_CONFIDENCE = 0.999  # one-sided, for the velocity and the acceleration
ACCELERATION_WINDOW_DAYS = 30.0
# Besides the quadratic, a change of velocity in the last 7 days of the window (a line with a
# hinge there), each test at half the error rate (Bonferroni): a quadratic over 30 days
# hardly sees the last days of a sharp (alpha > 2) acceleration.
HINGE_DAYS = 7.0
MIN_ACCELERATION_DAYS = 8  # daily medians the quadratic needs (3 parameters, 5 to spare)
NOISE_WINDOW_DAYS = 60.0
MIN_NOISE_DAYS = 15
MIN_EARLY_DAYS = 5  # daily medians of the window's early days that measure its noise
MIN_PHASE_POINTS = 4  # values on the line (2 parameters, 2 to spare)
PHASE_WINDOW_DAYS = 180.0
MAX_HORIZON_DAYS = 365.0
MAX_LAG1 = 0.8  # the residual correlation used for inflation is capped here (factor 9)
# the line's weights use the line, floored at this fraction of the smallest observed 1/v
# (the line may reach zero inside the phase: an infinite weight would follow)
WEIGHT_FLOOR = 0.25
IRLS_ITERATIONS = 8

DATED = "dated"
IMMINENT = "imminent"
ACCELERATING = "accelerating, not dated"
NO_ACCELERATION = "no acceleration"
TOO_FEW = "too few data"
STATES = (DATED, IMMINENT, ACCELERATING, NO_ACCELERATION, TOO_FEW)
WARNING_STATES = (DATED, IMMINENT, ACCELERATING)

_NS_PER_DAY = 86_400e9


@dataclass(frozen=True)
class Acceleration:
    """A trend through the daily medians of the last ``window_days``: velocity at the last
    data (mm/day) and acceleration (mm/day^2), each with its 1-sigma (inflated for
    correlated residuals by ``inflation``, a variance factor), over ``n_days`` medians.
    ``hinge_days`` 0: a quadratic; else a line whose slope changes ``hinge_days`` before the
    last data, the acceleration being that change over ``hinge_days``."""

    velocity_mm_per_day: float
    velocity_sigma_mm_per_day: float
    acceleration_mm_per_day2: float
    acceleration_sigma_mm_per_day2: float
    n_days: int
    window_days: float
    inflation: float
    noise_dof: int = 0
    noise_source: str = "own"
    tests: int = 1
    hinge_days: float = 0.0

    def describe(self) -> str:
        """How the acceleration was measured, for a statement."""
        return (f"over the last {self.window_days:g} days" if not self.hinge_days else
                f"in the last {self.hinge_days:g} days against the {self.window_days:g} before")

    def significant(self, confidence: float) -> bool:
        """Velocity and acceleration both above zero at one-sided ``confidence``, shared
        among the ``tests`` windows tried (Bonferroni: each at 1 - (1 - confidence) /
        tests)."""
        level = 1.0 - (1.0 - confidence) / max(self.tests, 1)
        q = student_t_quantile(level, max(self.noise_dof, 1))
        return (self.velocity_mm_per_day > q * self.velocity_sigma_mm_per_day
                and self.acceleration_mm_per_day2 > q * self.acceleration_sigma_mm_per_day2)


@dataclass(frozen=True)
class InverseVelocityLine:
    """The line 1/v = intercept + slope (t - data end) (day/mm, t in days) through the
    values ``used`` (a mask over the ``InverseVelocity`` values) from ``onset``; its
    covariance (already scaled by ``scale`` and ``inflation``), the lag-1 correlation of
    its residuals and ``chi2`` (velocity units) over ``dof`` degrees of freedom."""

    intercept_day_per_mm: float
    slope_per_mm: float
    cov: np.ndarray
    used: np.ndarray
    onset: np.datetime64
    chi2: float
    dof: int
    scale: float
    lag1: float
    inflation: float

    def zero_days(self) -> float:
        """Days from the data end to the line's zero (negative: before the data end; inf
        when the line does not fall)."""
        return -self.intercept_day_per_mm / self.slope_per_mm if self.slope_per_mm < 0 \
            else math.inf

    def fieller(self, q: float) -> tuple[float, float]:
        """The days from the data end where the line is within ``q`` sigma of zero, as
        (near, far): (near, inf) when the slope is not significant at q (a one-sided set
        from ``near`` on, or the whole axis: near -inf)."""
        a, b = self.intercept_day_per_mm, self.slope_per_mm
        vaa, vab, vbb = self.cov[0, 0], self.cov[0, 1], self.cov[1, 1]
        a2, a1, a0 = b * b - q * q * vbb, 2.0 * (a * b - q * q * vab), a * a - q * q * vaa
        disc = a1 * a1 - 4.0 * a2 * a0
        if a2 > 0.0 and disc >= 0.0:
            r = math.sqrt(disc)
            return (-a1 - r) / (2.0 * a2), (-a1 + r) / (2.0 * a2)
        if a2 < 0.0 and disc >= 0.0 and a0 > 0.0:
            # outside the roots: (-inf, r1] and [r2, inf) with r1 < 0 < r2 (the line's value
            # at the data end is significantly above zero); the future part is [r2, inf)
            r = math.sqrt(disc)
            roots = sorted(((-a1 - r) / (2.0 * a2), (-a1 + r) / (2.0 * a2)))
            return roots[1], math.inf
        return -math.inf, math.inf


@dataclass(frozen=True)
class LinearForecast:
    """The linear inverse-velocity forecast: ``state`` (one of ``STATES``) and
    ``statement``, the sentence a user reads.  ``dated``: ``failure_time`` and its
    ``confidence`` ``interval``; ``imminent``: ``failure_time`` is the line's zero, at or
    before ``data_end``; ``accelerating, not dated``: ``within_days`` (N of "failure
    possible within N days") and ``within_basis`` (how N was derived).  ``line`` (None
    without one) is drawn by the figure from ``onset`` to the zero; ``acceleration`` is
    the test that decides whether the slope accelerates; ``lead_days`` = failure time
    minus ``data_end``; ``n_points`` the values on the line."""

    state: str
    statement: str
    data_end: np.datetime64 | None = None
    failure_time: np.datetime64 | None = None
    interval: tuple[np.datetime64, np.datetime64] | None = None
    lead_days: float = math.nan
    within_days: float = math.nan
    within_basis: str = ""
    onset: np.datetime64 | None = None
    n_points: int = 0
    confidence: float = CONFIDENCE
    line: InverseVelocityLine | None = None
    acceleration: Acceleration | None = None

    @property
    def warns(self) -> bool:
        """Dated, imminent or accelerating: something for an engineer to act on."""
        return self.state in WARNING_STATES

    def describe(self) -> str:
        """The statement: one or two sentences for the CLI, the GUI and the report."""
        return self.statement

    def line_at(self, t) -> np.ndarray:
        """The fitted 1/v (day/mm) at the times ``t`` (for the figure)."""
        if self.line is None or self.data_end is None:
            return np.full(np.shape(t), np.nan)
        d = _days(as_datetime64(t), self.data_end)
        return self.line.intercept_day_per_mm + self.line.slope_per_mm * d


@dataclass(frozen=True)
class ForecastAgreement:
    """Whether the linear forecast and the Voight fit (``analysis.forecast``) agree:
    ``agree`` True/False (None: the Voight fit was not made) and ``text`` in words."""

    agree: bool | None
    text: str


# ----------------------------------------------------------------------------- the forecast

def linear_forecast_from_displacement(t, displacement_m, *, smoothing_days: float = 4.0,
                                      **kwargs) -> LinearForecast:
    """``linear_forecast`` of the displacement ``displacement_m`` (metres, along the motion)
    at the times ``t``, through ``inverse_velocity(t, displacement_m, smoothing_days=...)``
    (the pipeline's windows: ``analysis.pipeline.INVERSE_VELOCITY_SMOOTHING_DAYS``);
    keyword arguments are ``linear_forecast``'s."""
    iv = inverse_velocity(t, displacement_m, smoothing_days=smoothing_days)
    return linear_forecast(iv, **kwargs)


def linear_forecast(iv: InverseVelocity, *, confidence: float = CONFIDENCE,
                    acceleration_confidence: float = ACCELERATION_CONFIDENCE,
                    max_horizon_days: float = MAX_HORIZON_DAYS,
                    acceleration: Acceleration | None = None) -> LinearForecast:
    """The classic linear inverse-velocity forecast of the values ``iv`` and the positions
    behind them (``iv.data_t``, ``iv.data_mm``): the module's docstring says how, and
    which state it ends in.  ``acceleration``: the acceleration test to decide by (the
    pipeline's, ``acceleration_along_motion``); None: ``acceleration_test`` of the
    positions behind ``iv``."""
    if not 0.5 < confidence < 1.0 or not 0.5 < acceleration_confidence < 1.0:
        raise ValueError(f"confidence levels must be between 0.5 and 1, not {confidence} "
                         f"and {acceleration_confidence}")
    t_data = as_datetime64(iv.data_t) if iv.data_t is not None else np.empty(0, "M8[ns]")
    if t_data.size < 3:
        return LinearForecast(TOO_FEW, f"Linear inverse velocity: {t_data.size} readings; "
                              f"too few to say whether the slope accelerates.",
                              data_end=t_data[-1] if t_data.size else None,
                              confidence=confidence)
    end = t_data[-1]
    acc = acceleration if acceleration is not None else acceleration_test(
        t_data, np.asarray(iv.data_mm, np.float64))
    base = {"data_end": end, "confidence": confidence, "acceleration": acc}
    if acc is None:
        return LinearForecast(TOO_FEW, f"Linear inverse velocity: fewer than "
                              f"{MIN_ACCELERATION_DAYS} days with readings in the last "
                              f"{ACCELERATION_WINDOW_DAYS:g} days; too few to say whether "
                              f"the slope accelerates.", **base)
    if not acc.significant(acceleration_confidence):
        return LinearForecast(NO_ACCELERATION, _no_acceleration_text(
            acc, acceleration_confidence), **base)
    line = fit_line(iv, end)
    if line is None or line.slope_per_mm >= 0:
        return _accelerating_from_velocity(acc, line, confidence, base)
    return _from_line(line, acc, confidence, max_horizon_days, base)


def _from_line(line: InverseVelocityLine, acc: Acceleration, confidence: float,
               max_horizon_days: float, base: dict) -> LinearForecast:
    """Imminent, dated or accelerating, from a falling line (the acceleration is
    established)."""
    end = base["data_end"]
    extra = {"line": line, "onset": line.onset, "n_points": int(line.used.sum())}
    zero = line.zero_days()
    when = _at(end, zero)
    if zero <= 0.0:
        return LinearForecast(IMMINENT, (
            f"Failure may be imminent: the linear inverse-velocity line through the "
            f"{extra['n_points']} values since {_iso(line.onset)} reached zero at "
            f"{_iso(when)}, at or before the last data ({_iso(end)}). A safe-side signal "
            f"of the most recent velocities, not a date."), failure_time=when,
            lead_days=zero, **extra, **base)
    q = student_t_quantile(0.5 + 0.5 * confidence, max(line.dof, 1))
    near, far = line.fieller(q)
    if math.isfinite(far) and far <= max_horizon_days:
        lo, hi = _at(end, max(near, 0.0)), _at(end, far)
        return LinearForecast(DATED, (
            f"Failure at {_iso(when)}, where the inverse-velocity line reaches zero "
            f"({zero:.1f} days after the last data; {100 * confidence:g} % interval "
            f"{_iso(lo)} to {_iso(hi)}), fitted to the {extra['n_points']} values since "
            f"{_iso(line.onset)}."), failure_time=when, interval=(lo, hi), lead_days=zero,
            **extra, **base)
    q1 = student_t_quantile(confidence, max(line.dof, 1))
    within = line.intercept_day_per_mm / (-line.slope_per_mm + q1 * math.sqrt(line.cov[1, 1]))
    basis = (f"where the inverse-velocity line reaches zero when it falls as steeply as the "
             f"data allow at one-sided {100 * confidence:g} %; at its fitted slope: "
             f"{_days_text(zero)}")
    return LinearForecast(ACCELERATING, _accelerating_text(acc, within, basis),
                          within_days=within, within_basis=basis, **extra, **base)


def _accelerating_from_velocity(acc: Acceleration, line: InverseVelocityLine | None,
                                confidence: float, base: dict) -> LinearForecast:
    """Accelerating, no falling line to date it: N = v / (a + q sigma_a), Fukuzono's time
    to failure (alpha = 2) at the steepest acceleration the data allow."""
    q1 = student_t_quantile(confidence, max(acc.noise_dof, 1))
    steep = acc.acceleration_mm_per_day2 + q1 * acc.acceleration_sigma_mm_per_day2
    within = acc.velocity_mm_per_day / steep
    basis = (f"velocity over its rate of increase at one-sided {100 * confidence:g} % "
             f"(Fukuzono's law: the time left to failure); the inverse velocities give "
             f"{'too few values for a line' if line is None else 'no falling line'}")
    extra = {} if line is None else {"line": line, "onset": line.onset,
                                     "n_points": int(line.used.sum())}
    return LinearForecast(ACCELERATING, _accelerating_text(acc, within, basis),
                          within_days=within, within_basis=basis, **extra, **base)


def _days_text(days: float) -> str:
    """``1 day``, ``12 days``: whole days, at least 1."""
    n = max(round(days), 1)
    return f"{n} day" if n == 1 else f"{n} days"


def _accelerating_text(acc: Acceleration, within: float, basis: str) -> str:
    when = f"failure possible within {_days_text(within)}"
    return (f"Accelerating; {when} ({basis}). The velocity is "
            f"{acc.velocity_mm_per_day:.2f} ± {acc.velocity_sigma_mm_per_day:.2f} mm/day, "
            f"rising by {acc.acceleration_mm_per_day2:.3f} ± "
            f"{acc.acceleration_sigma_mm_per_day2:.3f} mm/day² {acc.describe()}; too few or "
            f"too noisy inverse velocities to date a failure.")


def _no_acceleration_text(acc: Acceleration, confidence: float) -> str:
    return (f"No acceleration over the last {acc.window_days:g} days: the velocity is "
            f"{acc.velocity_mm_per_day:.2f} ± {acc.velocity_sigma_mm_per_day:.2f} mm/day and "
            f"its change {acc.acceleration_mm_per_day2:+.3f} ± "
            f"{acc.acceleration_sigma_mm_per_day2:.3f} mm/day² {acc.describe()}, not both "
            f"above zero at one-sided {100 * confidence:g} %.")


# ----------------------------------------------------------------------------- acceleration

def acceleration_test(t: np.ndarray, x_mm: np.ndarray,
                      window_days: float = ACCELERATION_WINDOW_DAYS) -> Acceleration | None:
    """``_trend`` of the last ``window_days`` as a quadratic and as a line with a hinge
    ``HINGE_DAYS`` before the end: the one whose velocity and acceleration are the more
    significant (the smaller of their two t-values), counting the two tried
    (``Acceleration.tests``) so that its significance allows for the choice; None when
    the window has too few data."""
    ns = as_datetime64(t).astype(np.int64)
    x_mm = np.asarray(x_mm, np.float64)
    found = [q for q in (_trend(ns, x_mm, window_days, h) for h in (0.0, HINGE_DAYS))
             if q is not None]
    if not found:
        return None
    best = max(found, key=lambda q: min(q.velocity_mm_per_day / q.velocity_sigma_mm_per_day,
                                        q.acceleration_mm_per_day2
                                        / q.acceleration_sigma_mm_per_day2))
    return replace(best, tests=2)


def _trend(ns: np.ndarray, x_mm: np.ndarray, window_days: float, hinge_days: float
           ) -> Acceleration | None:
    """A quadratic in time (``hinge_days`` 0), or a line whose slope changes
    ``hinge_days`` before the last data, through the daily medians of the positions of the
    last ``window_days``: the velocity at the last data and the acceleration with their
    sigmas.
    Daily medians, so that hourly GNSS and daily prisms are tested alike and an outlier
    does not decide; None with fewer than ``MIN_ACCELERATION_DAYS`` medians.

    The noise behind the sigmas: the scatter and lag-1 correlation r of the daily medians
    about a steady velocity over the ``NOISE_WINDOW_DAYS`` before the window (the point's own
    noise, measured where it is not failing), the variance inflated by (1 + r) / (1 - r)
    for r > 0; with fewer than ``MIN_NOISE_DAYS`` medians there, the quadratic's own
    residuals.  Why not always the residuals: a quadratic does not follow the last days of
    a failure (1/v linear is a hyperbola in velocity), and its misfit, read as correlated
    noise, hid the acceleration in 1 of 10 daily slopes one day before failure."""
    end_ns = int(ns[-1])
    window_ns = int(window_days * _NS_PER_DAY)
    u, med = _daily_medians(ns, x_mm, end_ns - window_ns, end_ns)
    if u.size < MIN_ACCELERATION_DAYS:
        return None
    bend = u * u if not hinge_days else np.maximum(u + hinge_days, 0.0)
    if hinge_days and int((bend > 0).sum()) < 3:
        return None
    design = np.stack([np.ones_like(u), u, bend], axis=1)
    coef, *_ = np.linalg.lstsq(design, med, rcond=None)
    s2, r, dof, source = _quiet_noise(ns, x_mm, end_ns, window_ns)
    if source is None:
        resid = med - design @ coef
        dof = u.size - 3
        s2, r, source = float(resid @ resid) / dof, _lag1(resid), "own"
    else:
        early_s2, early_dof = _early_window_noise(u, med)
        if early_s2 > s2:
            s2, dof, source = early_s2, min(dof, early_dof), "window"
    inflation = (1.0 + r) / (1.0 - r) if r > 0 else 1.0
    cov = np.linalg.inv(design.T @ design) * s2 * inflation
    if not hinge_days:
        return Acceleration(float(coef[1]), float(math.sqrt(cov[1, 1])), float(2.0 * coef[2]),
                            float(2.0 * math.sqrt(cov[2, 2])), int(u.size),
                            float(window_days), float(inflation), int(dof), source)
    # velocity at the end: b + c; acceleration: the change c spread over the hinge's days
    v_sigma = math.sqrt(cov[1, 1] + 2.0 * cov[1, 2] + cov[2, 2])
    return Acceleration(float(coef[1] + coef[2]), v_sigma, float(coef[2] / hinge_days),
                        float(math.sqrt(cov[2, 2]) / hinge_days), int(u.size),
                        float(window_days), float(inflation), int(dof), source,
                        hinge_days=float(hinge_days))


def acceleration_along_motion(t, east_m, north_m, up_m,
                              window_days: float = ACCELERATION_WINDOW_DAYS
                              ) -> Acceleration | None:
    """``acceleration_test`` of the positions along the direction of their least-squares
    velocity over the last ``window_days`` (east, north, up in metres).

    Why this direction and not the one the figures use (from the reference to the mean of
    the last day): a stable point's noise projected on the direction of its own last day
    always ends high, which a quadratic reads as an acceleration (4.5 % of month-ends of
    simulated white-noise points warned, 0 % along a fixed direction).  Along the
    window's line slope the curvature is unbiased: a least-squares slope and the
    quadratic term are uncorrelated (orthogonal polynomials), and so are the slope and the
    quadratic term of a shorter trailing window.  On a moving slope both directions are
    its motion."""
    t = as_datetime64(t)
    comps = [np.asarray(c, np.float64) * 1000.0 for c in (east_m, north_m, up_m)]
    ok = np.isfinite(comps[0]) & np.isfinite(comps[1]) & np.isfinite(comps[2])
    t, comps = t[ok], [c[ok] for c in comps]
    if t.size < 3:
        return None
    days = _days(t, t[-1])
    recent = days >= -window_days
    if int(recent.sum()) < 3 or np.ptp(days[recent]) <= 0:
        return None
    slope = np.array([np.polyfit(days[recent], c[recent], 1)[0] for c in comps])
    norm = float(np.linalg.norm(slope))
    if not (np.isfinite(norm) and norm > 0):
        return None
    along = sum(c * (s / norm) for c, s in zip(comps, slope))
    return acceleration_test(t, along, window_days)


def _daily_medians(ns: np.ndarray, x_mm, lo_ns: int, hi_ns: int
                   ) -> tuple[np.ndarray, np.ndarray]:
    """Daily (UTC) medians of the positions with lo_ns < time <= hi_ns: their mean times in
    days relative to ``hi_ns`` (<= 0) and the medians (mm)."""
    sel = (ns > lo_ns) & (ns <= hi_ns)
    if not sel.any():
        return np.empty(0), np.empty(0)
    part = ns[sel]
    days, med, _ = bin_series(part, np.asarray(x_mm, np.float64)[sel], 1.0)
    origin = (int(part[0]) // int(_NS_PER_DAY)) * int(_NS_PER_DAY)
    ok = np.isfinite(med)
    return days[ok] - (hi_ns - origin) / _NS_PER_DAY, med[ok]


def _quiet_noise(ns: np.ndarray, x_mm, end_ns: int, window_ns: int
                 ) -> tuple[float, float, int, str | None]:
    """Variance, lag-1 correlation and degrees of freedom of the daily medians about a line
    over the ``NOISE_WINDOW_DAYS`` before the acceleration window; source None when there
    are fewer than ``MIN_NOISE_DAYS`` medians."""
    hi = end_ns - window_ns
    u, med = _daily_medians(ns, x_mm, hi - int(NOISE_WINDOW_DAYS * _NS_PER_DAY), hi)
    if u.size < MIN_NOISE_DAYS:
        return math.nan, 0.0, 0, None
    design = np.stack([np.ones_like(u), u], axis=1)
    coef, *_ = np.linalg.lstsq(design, med, rcond=None)
    resid = med - design @ coef
    dof = u.size - 2
    return float(resid @ resid) / dof, _lag1(resid), dof, "quiet"


def _early_window_noise(u: np.ndarray, med: np.ndarray) -> tuple[float, int]:
    """Variance and degrees of freedom of the daily medians about a line over the window's
    days before its last ``HINGE_DAYS`` (NaN, 0 with fewer than ``MIN_EARLY_DAYS``).

    Why: real GNSS noise is not stationary.  On the stable points that warned (LHAS and
    P156 daily, e.g. LHAS 1997-03-13 and P156 2011-11-28) the 60 quiet days before the
    window scattered 2.4-4.7 mm along the motion, the window itself 3.5-8.5 mm (a noisier
    season, mostly in height), and a multi-day excursion of 15-25 mm in height at the
    window's end, measured against the quieter noise, passed for an acceleration.  The
    window's early days show that noise without the last days, where an acceleration
    concentrates (on a failing slope they hold its slow start, which a line follows to
    within a fraction of the scatter)."""
    early = u < -HINGE_DAYS
    n = int(early.sum())
    if n < MIN_EARLY_DAYS:
        return math.nan, 0
    design = np.stack([np.ones(n), u[early]], axis=1)
    coef, *_ = np.linalg.lstsq(design, med[early], rcond=None)
    resid = med[early] - design @ coef
    return float(resid @ resid) / (n - 2), n - 2


def _lag1(resid: np.ndarray) -> float:
    """Lag-1 autocorrelation of residuals, capped at ``MAX_LAG1`` (0 for fewer than 4)."""
    if resid.size < 4:
        return 0.0
    den = float(resid @ resid)
    if den <= 0:
        return 0.0
    return float(min(max(float(resid[1:] @ resid[:-1]) / den, -1.0), MAX_LAG1))


# ----------------------------------------------------------------------------- the line

def fit_line(iv: InverseVelocity, end: np.datetime64) -> InverseVelocityLine | None:
    """The line through the inverse velocities from the onset (module docstring), or None
    with fewer than ``MIN_PHASE_POINTS`` positive velocities in the last
    ``PHASE_WINDOW_DAYS``."""
    t = _days(as_datetime64(iv.t), end)
    v = np.asarray(iv.velocity_mm_per_day, np.float64)
    sig = iv.pooled_velocity_sigma()
    ok = np.isfinite(t) & np.isfinite(v) & np.isfinite(sig) & (sig > 0) & \
        (t >= -PHASE_WINDOW_DAYS)
    idx = np.flatnonzero(ok)
    if int((v[idx] > 0).sum()) < MIN_PHASE_POINTS:
        return None
    best, best_score = None, math.inf
    for k in range(idx.size - MIN_PHASE_POINTS + 1):
        phase, before = idx[k:], idx[:k]
        fit = _irls(t[phase], v[phase], sig[phase])
        if fit is None:
            continue
        score = fit[2] + _steady_chi2(v[before], sig[before]) + 2.0 * (3 if k else 2)
        if score < best_score:
            best, best_score = (phase, fit), score
    if best is None:
        return None
    phase, (coef, cov_unit, chi2, resid) = best
    used = np.zeros(t.size, bool)
    used[phase] = True
    used &= v > 0
    dof = max(int(used.sum()) - 2, 1)
    scale = max(chi2 / dof, 1.0)
    lag1 = _lag1(resid)
    inflation = (1.0 + lag1) / (1.0 - lag1) if lag1 > 0 else 1.0
    return InverseVelocityLine(float(coef[0]), float(coef[1]), cov_unit * scale * inflation,
                               used, as_datetime64(iv.t)[phase[0]], float(chi2), dof,
                               float(scale), float(lag1), float(inflation))


def _steady_chi2(v: np.ndarray, sig: np.ndarray) -> float:
    """Chi-square of velocities about their weighted mean (a steady velocity)."""
    if v.size == 0:
        return 0.0
    w = 1.0 / sig ** 2
    mean = float(w @ v) / float(w.sum())
    return float(w @ (v - mean) ** 2)


def _irls(t: np.ndarray, v: np.ndarray, sig: np.ndarray):
    """Weighted least squares of 1/v = a + b t over the positive velocities, the weights
    1 / (sigma_v h^2)^2 at the line h (delta method), iterated from weights at the values.
    Returns (coef, unit covariance, chi-square in velocity units over all values, the
    standardised residuals in time order) or None when the values do not define a line."""
    pos = v > 0
    if int(pos.sum()) < MIN_PHASE_POINTS or np.ptp(t[pos]) <= 0:
        return None
    tp, y, sp = t[pos], 1.0 / v[pos], sig[pos]
    floor = WEIGHT_FLOOR * float(y.min())
    h = y.copy()
    design = np.stack([np.ones_like(tp), tp], axis=1)
    try:
        for _ in range(IRLS_ITERATIONS):
            w = 1.0 / (sp * np.maximum(h, floor) ** 2) ** 2
            coef = np.linalg.solve(design.T @ (design * w[:, None]), design.T @ (w * y))
            h_new = design @ coef
            converged = np.allclose(h_new, h, rtol=1e-6, atol=0.0)
            h = h_new
            if converged:
                break
        w = 1.0 / (sp * np.maximum(h, floor) ** 2) ** 2
        cov = np.linalg.inv(design.T @ (design * w[:, None]))
    except np.linalg.LinAlgError:
        return None
    resid = (y - h) * np.sqrt(w)
    # chi-square in velocity units over every value of the phase (also v <= 0: a model
    # velocity 1 / h against it), so that phases are compared on the same values
    h_all = np.maximum(coef[0] + coef[1] * t, floor)
    chi2 = float((((v - 1.0 / h_all) / sig) ** 2).sum())
    return coef, cov, chi2, resid


# ----------------------------------------------------------------------------- agreement

def compare(linear: LinearForecast, voight: FailureForecast | None) -> ForecastAgreement:
    """Whether the linear forecast and the Voight fit agree, in words: both dated and
    their intervals overlap (and whether the linear date lies inside the Voight interval);
    imminent and a Voight interval starting within a day of the last data; accelerating
    within N days and a Voight interval starting within those N days; neither forecasting
    a failure.  Otherwise they disagree, and the text says which is the more urgent."""
    if voight is None:
        return ForecastAgreement(None, "The Voight fit was not made: nothing to compare.")
    v_ok = bool(voight.supported)
    if not linear.warns:
        if not v_ok:
            return ForecastAgreement(True, "Both forecasts agree: neither forecasts a "
                                           "failure.")
        return ForecastAgreement(False, f"They disagree: only the Voight fit forecasts a "
                                        f"failure ({_iso(voight.failure_time)}); the linear "
                                        f"method says: {linear.state}.")
    if not v_ok:
        return ForecastAgreement(False, f"They disagree: only the linear method warns "
                                        f"({linear.state}); the Voight fit gives no date "
                                        f"({voight.reason}).")
    lo, hi = voight.interval
    span = f"{_iso(lo)} to {_iso(hi)}"
    if linear.state == DATED:
        llo, lhi = linear.interval
        if not (llo <= hi and lo <= lhi):
            side = "earlier" if linear.failure_time < lo else "later"
            return ForecastAgreement(False, f"They disagree: the linear date "
                                            f"{_iso(linear.failure_time)} and its interval "
                                            f"lie {side} than the Voight fit's ({span}).")
        inside = bool(lo <= linear.failure_time <= hi)
        return ForecastAgreement(True, f"Both forecasts agree: their intervals overlap, and "
                                       f"the linear date {_iso(linear.failure_time)} lies "
                                       f"{'inside' if inside else 'outside'} the Voight "
                                       f"fit's interval ({span}).")
    end = linear.data_end
    if linear.state == IMMINENT:
        near = bool(lo <= end + np.timedelta64(1, "D"))
        return ForecastAgreement(near, (
            "Both forecasts agree that failure is near: the linear line is at zero and the "
            f"Voight interval ({span}) starts within a day of the last data." if near else
            f"They disagree: the linear line is already at zero (imminent) while the Voight "
            f"fit dates failure at {_iso(voight.failure_time)} ({span}); the linear signal is "
            f"the more urgent."))
    limit = end + np.timedelta64(round(linear.within_days * _NS_PER_DAY), "ns")
    near = bool(lo <= limit)
    return ForecastAgreement(near, (
        f"Both forecasts agree: the Voight interval ({span}) starts within the "
        f"{linear.within_days:.0f} days in which the linear method says failure is "
        f"possible." if near else
        f"They disagree: the linear method says failure is possible within "
        f"{linear.within_days:.0f} days, before the Voight interval ({span}) starts; the "
        f"linear statement is the more urgent."))


# ----------------------------------------------------------------------------- helpers

def _days(t: np.ndarray, origin: np.datetime64) -> np.ndarray:
    return (t - origin).astype("timedelta64[ns]").astype(np.float64) / _NS_PER_DAY


def _at(origin: np.datetime64, days: float) -> np.datetime64:
    return origin + np.timedelta64(round(days * _NS_PER_DAY), "ns")


def _iso(t: np.datetime64 | None) -> str:
    return "-" if t is None else str(np.datetime_as_string(t, unit="m")) + "Z"


__all__ = [
    "ACCELERATING", "ACCELERATION_CONFIDENCE", "ACCELERATION_WINDOW_DAYS", "CONFIDENCE", "DATED",
    "IMMINENT", "MAX_HORIZON_DAYS", "MIN_ACCELERATION_DAYS", "MIN_NOISE_DAYS",
    "MIN_PHASE_POINTS", "NOISE_WINDOW_DAYS", "NO_ACCELERATION", "PHASE_WINDOW_DAYS", "STATES",
    "TOO_FEW", "WARNING_STATES", "Acceleration", "ForecastAgreement", "InverseVelocityLine",
    "LinearForecast", "acceleration_along_motion", "acceleration_test", "compare", "fit_line",
    "linear_forecast", "linear_forecast_from_displacement",
]

"""Velocity, acceleration and their honest uncertainties from a displacement series.

Two estimators of a constant velocity, for the two questions an engineer asks:

* ``ols_velocity``: least squares of offset + rate (+ annual and semiannual terms, + an
  offset at each known step).  It gives the trend line to draw over the data, the seasonal
  amplitudes and step sizes, and a rate sigma that accounts for time-correlated noise.
* ``midas_velocity``: MIDAS (Blewitt et al. 2016), the median of the slopes of data pairs
  one year apart.  Robust to outliers, unknown steps and seasonal motion without modelling
  any of them; the estimator behind the Nevada Geodetic Laboratory's station velocities.

Why the uncertainty needs care.  GNSS position noise is time-correlated ("coloured"): beside
white noise it has flicker noise, whose power grows as 1/frequency (Zhang et al. 1997,
Mao et al. 1999, Williams et al. 2004).  The formal least-squares sigma assumes white noise
and is then too small by a factor of 5-10 for multi-year daily series (Mao et al. 1999),
and by as much for hourly series: flicker that is invisible epoch to epoch still moves the
weekly and monthly means, and those set the rate.  A correction from the lag-1
autocorrelation (AR(1)) only sees short-range correlation and misses most of it (in
tests/test_analysis_trends.py its 95% intervals hold the truth in a third of the trials).
So ``ols_velocity`` fits a white + flicker noise model to the residuals and propagates it
exactly (``analysis.noise``); see ``ols_velocity`` for the method and the references.  MIDAS uses its
published, deliberately conservative formula.

Sliding-window velocities (``sliding_velocity``) show a change of rate; ``acceleration``
fits a quadratic with the same noise treatment as ``ols_velocity``.

Times are numpy ``datetime64`` (UTC, see ``analysis.timebase``); positions in metres; rates
in m/yr (geodetic convention, Julian year of 365.25 days) with mm/yr and mm/day views.
Epochs whose position is NaN are ignored; unsorted epochs are sorted first.

Size: about 650 lines for the two estimators and what they share (inputs, results, steps,
intervals); the noise model they fit with is ``analysis.noise``.
"""

from __future__ import annotations

import math
from dataclasses import dataclass

import numpy as np

from analysis.lines import window_lines
from analysis.noise import MIN_CI_DOF, Fit, NoiseModel, ls_fit  # noqa: F401 (re-exported)
from analysis.stats import median, student_t_quantile
from analysis.timebase import DAYS_PER_YEAR, as_datetime64, years_since

MAD_TO_SIGMA = 1.4826  # 1 / Phi^-1(3/4): scaled MAD = sigma for Gaussian data
MIDAS_TOLERANCE_YR = 0.001  # midas.f: pairs "precisely" one year apart, within 0.001 yr
MIDAS_MIN_PAIRS = 10  # midas.f: fatal below 10 pairs
MIDAS_ONE_YEAR_MIN_SPAN_YR = 1.1  # shorter step-free spans use half their length instead
_NS_PER_DAY = 86_400e9


# ----------------------------------------------------------------------------- results

@dataclass(frozen=True)
class TrendResult:
    """A constant velocity, its uncertainty and the fitted trend.

    ``velocity_m_per_yr`` with ``sigma_m_per_yr`` (1 sigma) and ``ci95_m_per_yr`` (the 95%
    interval: Student-t with ``dof`` degrees of freedom, ``inf`` meaning the normal
    quantile 1.96).  ``n_epochs``: epochs used.  The trend model is ``intercept_m`` at
    ``t_ref`` + velocity * (t - t_ref) + seasonal terms + ``step_offsets_m`` after each of
    ``step_times`` (the known steps actually used, those with data on both sides); evaluate
    it with ``model(t)`` to draw the line.  ``seasonal_m``: the (cos, sin) coefficients of
    the annual and the semiannual term (phase from ``t_ref``), None when not fitted.

    OLS only: ``noise`` (the noise model behind the sigma).  MIDAS only: ``n_pairs`` (pairs
    kept after trimming), ``separation_yr`` (pair separation), ``n_pairs_sigma`` (pairs the
    uncertainty counts: the daily pairs for sub-daily data)."""

    method: str
    velocity_m_per_yr: float
    sigma_m_per_yr: float
    ci95_m_per_yr: tuple[float, float]
    n_epochs: int
    dof: float
    t_ref: np.datetime64
    t_first: np.datetime64
    t_last: np.datetime64
    intercept_m: float
    step_times: np.ndarray
    step_offsets_m: np.ndarray
    residual_rms_m: float
    annual_amplitude_m: float | None = None
    semiannual_amplitude_m: float | None = None
    seasonal_m: tuple[float, float, float, float] | None = None
    noise: NoiseModel | None = None
    n_pairs: int | None = None
    separation_yr: float | None = None
    n_pairs_sigma: int | None = None

    @property
    def velocity_mm_per_yr(self) -> float:
        return self.velocity_m_per_yr * 1e3

    @property
    def sigma_mm_per_yr(self) -> float:
        return self.sigma_m_per_yr * 1e3

    @property
    def velocity_mm_per_day(self) -> float:
        return self.velocity_m_per_yr * 1e3 / DAYS_PER_YEAR

    @property
    def sigma_mm_per_day(self) -> float:
        return self.sigma_m_per_yr * 1e3 / DAYS_PER_YEAR

    @property
    def ci95_mm_per_yr(self) -> tuple[float, float]:
        return (self.ci95_m_per_yr[0] * 1e3, self.ci95_m_per_yr[1] * 1e3)

    def model(self, t) -> np.ndarray:
        """The fitted trend (metres) at times ``t``: what a plot draws over the data."""
        yr = years_since(as_datetime64(t), self.t_ref)
        out = self.intercept_m + self.velocity_m_per_yr * yr
        if self.seasonal_m is not None:
            out = out + _seasonal_columns(yr, True, True) @ np.asarray(self.seasonal_m)
        for when, offset in zip(self.step_times, self.step_offsets_m):
            out = out + offset * (as_datetime64(t) >= when)
        return out

    def describe(self) -> str:
        lo, hi = self.ci95_mm_per_yr
        return (f"{self.velocity_mm_per_yr:.2f} +- {self.sigma_mm_per_yr:.2f} mm/yr (1 sigma; "
                f"95%: {lo:.2f}..{hi:.2f}; {self.method.upper()}, {self.n_epochs} epochs)")


@dataclass(frozen=True)
class AccelerationResult:
    """Acceleration from a quadratic fit x = a + v (t - t_ref) + c (t - t_ref)^2 / 2.

    ``acceleration_m_per_yr2`` (c) with ``sigma_m_per_yr2`` (1 sigma, coloured noise as in
    ``ols_velocity``) and ``ci95_m_per_yr2``; ``velocity_m_per_yr`` is the velocity at
    ``t_ref`` (the mean epoch time by default) with its sigma."""

    acceleration_m_per_yr2: float
    sigma_m_per_yr2: float
    ci95_m_per_yr2: tuple[float, float]
    velocity_m_per_yr: float
    velocity_sigma_m_per_yr: float
    t_ref: np.datetime64
    n_epochs: int
    dof: float
    noise: NoiseModel

    @property
    def acceleration_mm_per_yr2(self) -> float:
        return self.acceleration_m_per_yr2 * 1e3

    @property
    def sigma_mm_per_yr2(self) -> float:
        return self.sigma_m_per_yr2 * 1e3

    @property
    def acceleration_mm_per_day2(self) -> float:
        return self.acceleration_m_per_yr2 * 1e3 / DAYS_PER_YEAR ** 2

    @property
    def sigma_mm_per_day2(self) -> float:
        return self.sigma_m_per_yr2 * 1e3 / DAYS_PER_YEAR ** 2


@dataclass(frozen=True)
class SlidingVelocity:
    """Velocities over sliding windows, one value per window (NaN where a window has fewer
    than ``min_epochs`` epochs or the estimator refused).  ``t``: window centres;
    ``n_epochs``: epochs in each window.  With ``method="ols"`` the sigmas assume white
    noise (they show which windows are noisier, and are too small for correlated noise:
    use ``ols_velocity`` on a window for a sigma to report)."""

    t: np.ndarray
    velocity_m_per_yr: np.ndarray
    sigma_m_per_yr: np.ndarray
    n_epochs: np.ndarray
    window_days: float
    step_days: float
    method: str

    @property
    def velocity_mm_per_day(self) -> np.ndarray:
        return self.velocity_m_per_yr * 1e3 / DAYS_PER_YEAR

    @property
    def sigma_mm_per_day(self) -> np.ndarray:
        return self.sigma_m_per_yr * 1e3 / DAYS_PER_YEAR

    @property
    def velocity_mm_per_yr(self) -> np.ndarray:
        return self.velocity_m_per_yr * 1e3

    @property
    def sigma_mm_per_yr(self) -> np.ndarray:
        return self.sigma_m_per_yr * 1e3


# ----------------------------------------------------------------------------- inputs

def _prepare(t, x_m, sigma_m=None) -> tuple[np.ndarray, np.ndarray, np.ndarray | None]:
    """Epochs as sorted datetime64[ns], positions and sigmas as float64; epochs with a NaN
    position (or sigma) or a NaT time dropped."""
    t = as_datetime64(t).ravel()
    x = np.asarray(x_m, dtype=np.float64).ravel()
    if t.shape != x.shape:
        raise ValueError(f"{t.size} times but {x.size} positions: they must pair up")
    keep = np.isfinite(x) & ~np.isnat(t)
    s = None
    if sigma_m is not None:
        s = np.broadcast_to(np.asarray(sigma_m, dtype=np.float64).ravel(), x.shape)
        keep &= np.isfinite(s)
        if np.any(s[keep] <= 0):
            raise ValueError("sigma_m must be positive (a zero sigma is an infinite weight)")
    if keep.all() and (t.size < 2 or bool(np.all(t[1:] >= t[:-1]))):
        return t, x, s  # already clean and in time order: nothing to select
    order = np.argsort(t[keep], kind="stable")
    t, x = t[keep][order], x[keep][order]
    return t, x, (None if s is None else s[keep][order])


def _usable_steps(t: np.ndarray, steps) -> np.ndarray:
    """The known steps (datetime64[ns]) that split the sorted epochs ``t`` with data on both
    sides; of several steps with no epoch between them only the first is kept (their
    offsets cannot be told apart).  Steps outside the span are ignored."""
    if steps is None:
        return np.empty(0, "datetime64[ns]")
    s = np.sort(as_datetime64(np.atleast_1d(steps)).ravel())
    s = s[~np.isnat(s)]
    split = np.searchsorted(t, s, side="left")  # first epoch at or after the step
    inside = (split > 0) & (split < t.size)
    _, first = np.unique(split[inside], return_index=True)
    return s[inside][first]


def _segment_bounds(t: np.ndarray, steps: np.ndarray) -> np.ndarray:
    """Index boundaries [0, ..., n] of the step-free segments (an epoch at a step time
    belongs to the segment after it)."""
    return np.concatenate([[0], np.searchsorted(t, steps, side="left"), [t.size]])


def _seasonal_columns(yr: np.ndarray, annual: bool, semiannual: bool) -> np.ndarray:
    cols = []
    if annual:
        cols += [np.cos(2 * np.pi * yr), np.sin(2 * np.pi * yr)]
    if semiannual:
        cols += [np.cos(4 * np.pi * yr), np.sin(4 * np.pi * yr)]
    return np.column_stack(cols) if cols else np.empty((yr.size, 0))


# ------------------------------------------------------------------ intervals

def _ci95(value: float, sigma: float, dof: float) -> tuple[float, float]:
    q = student_t_quantile(0.975, dof)
    return (value - q * sigma, value + q * sigma)


# ------------------------------------------------------------------------------ OLS

def _years(t: np.ndarray, t_ref) -> tuple[np.ndarray, np.datetime64]:
    ref = t[0] if t_ref is None else as_datetime64(t_ref).reshape(-1)[0]
    return years_since(t, ref), ref


def ols_velocity(t, x_m, sigma_m=None, *, annual: bool = False, semiannual: bool = False,
                 steps=None, t_ref=None, random_walk_m_per_sqrt_yr: float = 0.0
                 ) -> TrendResult:
    """Velocity (m/yr) of one displacement component ``x_m`` (metres) by least squares of
    offset + rate [+ annual sin/cos] [+ semiannual sin/cos] [+ a Heaviside offset at each of
    ``steps``], weighted by 1/``sigma_m``^2 when given (metres, per epoch).

    ``steps``: datetime64 array-like of known offsets (antenna change, base-station change,
    ...); steps outside the data or with no data on one side are ignored, and the ones used
    come back in ``step_times`` with their offsets.  ``t_ref``: epoch of the intercept
    (default: the first epoch).  NaN positions are ignored; unsorted epochs are sorted.

    Uncertainty.  The noise is modelled as white + flicker noise, the usual model for GNSS
    coordinate series (Williams et al. 2004, J. Geophys. Res. 109, B03412; Mao, Harrison &
    Dixon 1999, J. Geophys. Res. 104, 2797-2816).  Its two amplitudes are fitted to the
    empirical semivariogram of the residuals at ~20 log-spaced lags (one sampling interval
    to a quarter of the span) by weighted least squares (Cressie 1985, Math. Geol. 17,
    563-586), against the expected semivariogram of the *residuals*, computed exactly, so
    that the part of the noise the fit absorbs does not bias the amplitudes low.  The white
    amplitude is the a-posteriori variance factor of the given sigmas (scaling ``sigma_m``
    changes nothing).  The rate variance is then propagated exactly, f a S a' for the white
    part and -b^2 sum_ij a_i a_j gamma(t_i - t_j) for flicker (a: the least-squares weights
    of the rate; gamma: the flicker semivariogram of the fractional-integration filter of
    Hosking 1981 / Williams 2003, J. Geod. 76, 483-494, on a regular grid at the median
    sampling interval), by FFT in O(n log n).  This is a method-of-moments fit, not the
    maximum likelihood of Hector (Bos et al. 2013, J. Geod. 87, 351-360), which would cost
    O(n^2) or more per series.

    Random-walk (monument) noise is not fitted: with flicker present the data cannot tell
    it apart, and a random walk of 1.5 mm/yr^0.5 over 5 years of daily data leaves the
    interval covering ~70% instead of 95% (MIDAS likewise) in simulations.  Where the
    monument is known to wander, give ``random_walk_m_per_sqrt_yr`` (m/yr^0.5; of the order
    of 1 mm/yr^0.5 has been reported for GNSS monuments, e.g. Langbein 2008, J. Geophys.
    Res. 113, B05405): it is added to the covariance as known.  Short-range correlated
    noise (sub-daily multipath, troposphere) is absorbed by the flicker part and makes the
    sigma conservative (~1.6-2.3x in simulations with hours-long AR(1) noise).

    The 95% interval uses Student's t with Satterthwaite's (1946, Biometrics Bull. 2,
    110-114) effective degrees of freedom of the rate variance, from the asymptotic
    covariance of the semivariogram estimates (Gaussian fourth moments) propagated to the
    amplitudes, at least 2 and at most n - p: the amplitudes of a short series are uncertain
    and its interval is wider than +-1.96 sigma (dof ~14-30 for 60-120 days of hourly data,
    ~30-60 for 5-12 years of daily data).  Series with too few epochs for two lags: white
    noise, a-posteriori variance factor, n - p degrees of freedom.  Checked by simulation
    (white + flicker noise, seasonal terms, a step, gaps; tests/test_analysis_trends.py):
    the intervals held the true rate in 95.7% of 1800 daily 5-year series and 95.6% of
    1800 hourly 60-120 day series, with errors / sigma of spread 1.0-1.07.

    A ``ValueError`` says why when there are too few epochs for the terms asked for."""
    t, x, s = _prepare(t, x_m, sigma_m)
    steps_used = _usable_steps(t, steps)
    p = 2 + 2 * annual + 2 * semiannual + steps_used.size
    if t.size < p + 3 or t[-1] == t[0]:
        raise ValueError(f"least-squares velocity needs at least {p + 3} epochs at two or "
                         f"more distinct times for {p} parameters (offset, rate"
                         f"{', seasonal terms' if annual or semiannual else ''}"
                         f"{', steps' if steps_used.size else ''}); got {t.size}")
    yr, ref = _years(t, t_ref)
    seasonal = _seasonal_columns(yr, annual, semiannual)
    heaviside = (t[:, None] >= steps_used[None, :]).astype(np.float64)
    design = np.column_stack([np.ones(t.size), yr, seasonal, heaviside])
    fit = ls_fit(yr if t_ref is None else years_since(t), x, s, design,
                  random_walk_m_per_sqrt_yr)
    return _ols_result(t, ref, fit, annual, semiannual, steps_used)


def _ols_result(t, ref, fit: Fit, annual: bool, semiannual: bool,
                steps_used: np.ndarray) -> TrendResult:
    ns = 2 * annual + 2 * semiannual
    seasonal = np.zeros(4)  # annual cos, sin, semiannual cos, sin
    seasonal[[k for k, on in enumerate((annual, annual, semiannual, semiannual)) if on]] = (
        fit.coef[2:2 + ns])
    v, sig, dof = float(fit.coef[1]), float(math.sqrt(fit.cov[1, 1])), float(fit.dof[1])
    return TrendResult(
        method="ols", velocity_m_per_yr=v, sigma_m_per_yr=sig, ci95_m_per_yr=_ci95(v, sig, dof),
        n_epochs=int(t.size), dof=dof, t_ref=ref, t_first=t[0], t_last=t[-1],
        intercept_m=float(fit.coef[0]), step_times=steps_used,
        step_offsets_m=np.asarray(fit.coef[2 + ns:], dtype=np.float64),
        residual_rms_m=float(np.sqrt(np.mean(fit.residuals ** 2))),
        annual_amplitude_m=float(np.hypot(*seasonal[:2])) if annual else None,
        semiannual_amplitude_m=float(np.hypot(*seasonal[2:])) if semiannual else None,
        seasonal_m=tuple(float(c) for c in seasonal) if ns else None, noise=fit.noise)


# ---------------------------------------------------------------------------- MIDAS

def _forward_pairs(t_yr: np.ndarray, separation: float, tol: float
                   ) -> tuple[np.ndarray, np.ndarray]:
    """MIDAS pair selection forward in time in one step-free segment: midas.f's
    ``selectpair``, vectorised.  Each epoch i (while one ``separation`` later is still in
    the data) is paired with the first epoch j at least ``separation - tol`` later if that
    one is within ``separation + tol``; otherwise (a data gap) with midas.f's running index
    k, the next epoch not yet used by such a gap pair: k_i = max(k_{i-1}, j_i) + [gap pair],
    solved with a cumulative maximum.  When k reaches the last epoch it starts again
    ("cycle through all possible future partners again"), which restarts the recurrence:
    a loop over those restarts only."""
    n = t_yr.size
    first = np.nonzero(t_yr <= t_yr[-1] + tol - separation)[0]
    j = np.searchsorted(t_yr, t_yr[first] + separation - tol, side="left")
    first, j = first[j < n], j[j < n]  # (rounding at the very end)
    gap = t_yr[j] - t_yr[first] >= separation + tol
    partner = j.copy()
    start, k0 = 0, -1
    while start < first.size:
        g = gap[start:].astype(np.int64)
        used_before = np.cumsum(g) - g
        running = np.maximum.accumulate(np.concatenate([[k0], j[start:] - used_before]))[1:]
        running += used_before
        partner[start:] = np.where(gap[start:], running, j[start:])
        wrapped = np.nonzero(gap[start:] & (running >= n - 1))[0]
        if wrapped.size == 0:
            break
        start, k0 = start + int(wrapped[0]) + 1, 0  # k back to the first epoch
    return first, partner


def _midas_pairs(t_yr: np.ndarray, bounds: np.ndarray, separation: float, tol: float
                 ) -> tuple[np.ndarray, np.ndarray]:
    """Forward and backward pairs (the backward selection on reversed, negated times makes
    the estimator time-symmetric, as in midas.f) within each step-free segment."""
    first, second = [], []
    for lo, hi in zip(bounds[:-1], bounds[1:]):
        if hi - lo < 2:
            continue
        seg = t_yr[lo:hi]
        i, j = _forward_pairs(seg, separation, tol)
        ib, jb = _forward_pairs(-seg[::-1], separation, tol)
        m = hi - lo
        first += [i + lo, m - 1 - jb + lo]
        second += [j + lo, m - 1 - ib + lo]
    if not first:
        return np.empty(0, np.int64), np.empty(0, np.int64)
    return np.concatenate(first), np.concatenate(second)


def _trimmed_median(slopes: np.ndarray) -> tuple[float, float, int]:
    """midas.f's statistics: median and 1.4826 MAD, drop slopes 2 or more of those from the
    median, then median and 1.4826 MAD again.  Returns (median, sigma-tilde, kept)."""
    med = median(slopes)
    dev = np.abs(slopes - med)
    kept = slopes[dev < 2.0 * MAD_TO_SIGMA * median(dev)]
    if kept.size == 0:  # more than half the slopes identical: nothing to trim against
        kept = slopes
    med = median(kept)
    return med, MAD_TO_SIGMA * median(np.abs(kept - med)), int(kept.size)


def _midas_sigma(sigma_tilde: float, n_pairs: int) -> float:
    """midas.f: standard error of a median, sqrt(pi/2) sigma / sqrt(N), with N / 4 because
    each coordinate is used a nominal 4 times, then times 3 "to be realistic" (the ad hoc
    factor of Blewitt et al. 2016 for correlated noise)."""
    return 3.0 * math.sqrt(math.pi / 2.0) * sigma_tilde / math.sqrt(n_pairs / 4.0)


def _days_of(t: np.ndarray) -> tuple[np.ndarray, np.ndarray, np.ndarray, np.ndarray]:
    """Each epoch's UTC day (t sorted), the indices of each day's middle epochs (lower,
    upper) and the day's median time: what the daily medians take from the times."""
    day = t.astype("datetime64[D]").astype(np.int64)
    starts = np.concatenate([[0], np.nonzero(np.diff(day))[0] + 1])
    counts = np.diff(np.concatenate([starts, [day.size]]))
    lo, hi = starts + (counts - 1) // 2, starts + counts // 2
    ns = t.astype(np.int64)
    return day, lo, hi, ((ns[lo] + ns[hi]) // 2).astype("datetime64[ns]")


def _day_medians(day: np.ndarray, lo: np.ndarray, hi: np.ndarray, x: np.ndarray
                 ) -> np.ndarray:
    """Median position of each day (``_days_of``): the day's values sorted in place of
    its epochs, the middle two averaged."""
    xs = x[np.lexsort((x, day))]
    return 0.5 * (xs[lo] + xs[hi])


def _default_separation(t_yr: np.ndarray, bounds: np.ndarray) -> float:
    """One year when a step-free segment spans at least ``MIDAS_ONE_YEAR_MIN_SPAN_YR`` (one
    year plus ~5 weeks of pairs); otherwise half the longest step-free segment, which pairs
    every epoch of its first half with one of its second half (the longest lever arm that
    still uses all the data once per direction)."""
    spans = t_yr[bounds[1:] - 1] - t_yr[bounds[:-1]]
    longest = float(spans.max())
    return 1.0 if longest >= MIDAS_ONE_YEAR_MIN_SPAN_YR else longest / 2.0


def _tolerance(t_yr: np.ndarray) -> float:
    """midas.f's 0.001 yr (8.8 h) for daily data; half the median sampling interval when
    that is smaller, so that hourly data are paired with the epoch nearest the separation."""
    dt = np.diff(t_yr)
    positive = dt[dt > 0]
    half = 0.5 * median(positive) if positive.size else MIDAS_TOLERANCE_YR
    return min(MIDAS_TOLERANCE_YR, half)


def midas_velocity(t, x_m, steps=None, *, separation_yr: float | None = None) -> TrendResult:
    """Velocity (m/yr) of ``x_m`` (metres) by MIDAS, the Median Interannual Difference
    Adjusted for Skewness: Blewitt, Kreemer, Hammond & Gazeaux (2016), "MIDAS robust trend
    estimator for accurate GPS station velocities without step detection", J. Geophys.
    Res. Solid Earth 121, 2054-2068, doi:10.1002/2015JB012552.

    Followed: the paper and NGL's public ``midas.f`` (MIDAS4), whose pair selection this
    reproduces pair for pair (tested against a transcription of its ``selectpair``).
    Pairs of epochs one year apart (within 0.001 yr; across a data gap, the next epoch not
    yet used, cycling back when those run out), selected forward and, on reversed time,
    backward so the estimator is time-symmetric; no pair spans a known step (``steps``:
    datetime64 array-like; outside the data, ignored; an epoch at a step time counts as
    after it, where midas.f drops epochs within 0.001 yr of the step).  The slope of each
    pair; median and sigma-tilde = 1.4826 MAD; slopes 2 sigma-tilde or more from the median
    dropped; median (the velocity) and sigma-tilde again; sigma_v = 3 sqrt(pi/2)
    sigma-tilde / sqrt(N/4), N the pairs kept: sqrt(pi/2) for the standard error of a
    median, N/4 because each epoch is used a nominal 4 times, 3 an ad hoc factor for
    realism (midas.f's comments).  The 95% interval is +-1.96 sigma_v (the formula is a
    large-sample one).  An annual signal cancels in one-year pairs, and steps and outliers
    move only a minority of pair slopes, which the median ignores.

    Extensions for monitoring rovers (midas.f needs 1.02 yr of daily data):

    * ``separation_yr`` None: one year when a step-free stretch of the data spans at least
      1.1 yr (~5 weeks of pairs), otherwise half the longest step-free stretch, which pairs
      each epoch of its first half with one of its second half (stretches shorter than the
      separation give no pairs).  Below one year seasonal motion is not cancelled: it is
      part of the velocity measured over the period.
    * Tolerance: 0.001 yr, or half the median sampling interval if smaller, so that hourly
      epochs pair with the epoch nearest the separation.
    * Sub-daily data (more than 1.5 epochs per day with data): the velocity is the median
      over all epochs' pairs, but pairs of hourly epochs are strongly correlated (the same
      days' noise), so the uncertainty is the formula above applied to the series of daily
      medians with the same separation: one pair per day, and sigma-tilde at the daily
      scale.  In simulations (white + flicker noise, 60-120 days hourly) counting every
      hourly pair gave 0.7-3.7x the actual scatter depending on the noise colour (too
      small under strong flicker), and counting days with the hourly sigma-tilde 2.7-19x.
      This gives 1.3-4.8x for the white + flicker mixes simulated, and ~9x for pure white
      noise (the published factor 3 assumes correlated noise).

    MIDAS's sigma is deliberately conservative (the factor 3): in simulations with white +
    flicker noise it is ~1.0-1.5x the actual scatter for 5-10 years of daily data and ~2x
    for the hourly case of tests/test_analysis_trends.py.

    The intercept and ``step_offsets_m`` are medians of x - v (t - t_first) per step-free
    segment, for drawing the trend (MIDAS itself estimates no offsets).  ``ValueError``
    when fewer than 10 pairs (10 daily pairs for sub-daily data) can be formed, saying
    what is needed."""
    t, x, _ = _prepare(t, x_m)
    return _midas_fit(_midas_layout(t, steps, separation_yr), x)


def midas_velocities(t, series: dict, steps=None, *, separation_yr: float | None = None
                     ) -> dict:
    """``midas_velocity`` of each series of ``series`` (name -> positions at the times
    ``t``), as a dict of the same names: its TrendResult, or the ValueError it raised.  The
    pairs depend on the times alone: series finite at the same epochs (east, north, up,
    along, across of one rover) share one selection of pairs, each result exactly what a
    call of its own gives."""
    out: dict = {}
    shared: dict = {}  # finite mask's bytes -> (sorted times, order, layout or error)
    t_ns = as_datetime64(t).ravel()
    for name, x_m in series.items():
        x_all = np.asarray(x_m, dtype=np.float64).ravel()
        if x_all.shape != t_ns.shape:
            out[name] = _outcome(lambda: midas_velocity(t, x_m, steps,
                                                        separation_yr=separation_yr))
            continue
        keep = np.isfinite(x_all) & ~np.isnat(t_ns)
        key = keep.tobytes()
        if key not in shared:
            order = np.flatnonzero(keep)
            order = order[np.argsort(t_ns[order], kind="stable")]
            times = t_ns[order]
            shared[key] = (order, _outcome(lambda: _midas_layout(times, steps, separation_yr)))
        order, layout = shared[key]
        out[name] = layout if isinstance(layout, ValueError) else \
            _outcome(lambda: _midas_fit(layout, x_all[order]))
    return out


def _outcome(compute):
    """``compute()``, or the ValueError it raised."""
    try:
        return compute()
    except ValueError as err:
        return err


@dataclass(frozen=True)
class _MidasLayout:
    """What MIDAS takes from the times alone (sorted, finite): the segments, the pairs and,
    for sub-daily data, the days' median times and their pairs."""

    t: np.ndarray
    yr: np.ndarray
    steps_used: np.ndarray
    bounds: np.ndarray
    separation_yr: float
    i: np.ndarray
    j: np.ndarray
    daily: tuple | None  # (day of each epoch's run starts, lo, hi, yd, di, dj)


def _midas_layout(t: np.ndarray, steps, separation_yr: float | None) -> _MidasLayout:
    if t.size < 2 or t[-1] == t[0]:
        raise ValueError(f"MIDAS needs epochs at two or more distinct times; got {t.size}")
    steps_used = _usable_steps(t, steps)
    bounds = _segment_bounds(t, steps_used)
    yr = years_since(t)
    sep = _default_separation(yr, bounds) if separation_yr is None else float(separation_yr)
    tol = _tolerance(yr)
    if not sep > 2 * tol:
        raise ValueError(f"separation_yr={sep} is too short for the sampling of these data")
    i, j = _midas_pairs(yr, bounds, sep, tol)
    _require_pairs(i.size, sep, yr, "pairs")
    daily = None
    days = np.unique(t.astype("datetime64[D]")).size
    if t.size > 1.5 * days:  # sub-daily: count one pair per day, at the daily scale
        day, lo, hi, td = _days_of(t)
        yd = years_since(td, t[0])
        di, dj = _midas_pairs(yd, _segment_bounds(td, steps_used), sep, _tolerance(yd))
        _require_pairs(di.size, sep, yr, "daily pairs (sub-daily data count one per day)")
        daily = (day, lo, hi, yd, di, dj)
    return _MidasLayout(t, yr, steps_used, bounds, sep, i, j, daily)


def _midas_fit(layout: _MidasLayout, x: np.ndarray) -> TrendResult:
    """MIDAS of the positions ``x`` (finite, at ``layout.t``)."""
    t, yr, i, j, bounds = layout.t, layout.yr, layout.i, layout.j, layout.bounds
    v, sigma_tilde, kept = _trimmed_median((x[j] - x[i]) / (yr[j] - yr[i]))
    n_sigma, sigma_tilde_s = kept, sigma_tilde
    if layout.daily is not None:
        day, lo, hi, yd, di, dj = layout.daily
        xd = _day_medians(day, lo, hi, x)
        _, sigma_tilde_s, n_sigma = _trimmed_median((xd[dj] - xd[di]) / (yd[dj] - yd[di]))
    sig = _midas_sigma(sigma_tilde_s, n_sigma)
    levels = _segment_levels(x - v * yr, bounds)
    resid = x - v * yr - np.repeat(levels, np.diff(bounds))
    return TrendResult(
        method="midas", velocity_m_per_yr=v, sigma_m_per_yr=sig,
        ci95_m_per_yr=_ci95(v, sig, math.inf), n_epochs=int(t.size), dof=math.inf,
        t_ref=t[0], t_first=t[0], t_last=t[-1], intercept_m=float(levels[0]),
        step_times=layout.steps_used, step_offsets_m=np.diff(levels),
        residual_rms_m=float(np.sqrt(np.mean(resid ** 2))), n_pairs=kept,
        separation_yr=layout.separation_yr, n_pairs_sigma=int(n_sigma))


def _require_pairs(n_pairs: int, sep: float, yr: np.ndarray, what: str) -> None:
    if n_pairs < MIDAS_MIN_PAIRS:
        raise ValueError(
            f"MIDAS needs at least {MIDAS_MIN_PAIRS} {what} {sep * DAYS_PER_YEAR:.1f} days "
            f"apart within step-free stretches; these data give {n_pairs} (span "
            f"{(yr[-1] - yr[0]) * DAYS_PER_YEAR:.1f} days): use a longer series, fewer "
            f"steps or ols_velocity")


def _segment_levels(y: np.ndarray, bounds: np.ndarray) -> np.ndarray:
    """Median of ``y`` in each step-free segment (segments are non-empty)."""
    return np.array([median(y[lo:hi]) for lo, hi in zip(bounds[:-1], bounds[1:])])


# ------------------------------------------------------------------------ acceleration

def acceleration(t, x_m, sigma_m=None, *, t_ref=None,
                 random_walk_m_per_sqrt_yr: float = 0.0) -> AccelerationResult:
    """Acceleration (m/yr^2) of ``x_m`` (metres) from a (weighted) least-squares quadratic
    x = a + v (t - t_ref) + c (t - t_ref)^2 / 2, c being the acceleration; ``t_ref``
    defaults to the mean epoch time, where ``velocity_m_per_yr`` is then the mean velocity.
    The uncertainty is treated exactly as in ``ols_velocity`` (white + flicker noise
    fitted to the residuals, Satterthwaite dof for the 95% interval).  A slope that creeps
    faster and faster shows as a significant positive c along the motion."""
    t, x, s = _prepare(t, x_m, sigma_m)
    if t.size < 6 or t[-1] == t[0]:
        raise ValueError(f"an acceleration needs at least 6 epochs at distinct times for "
                         f"the 3 quadratic parameters; got {t.size}")
    if t_ref is None:
        offset_ns = (t - t[0]).astype(np.int64).astype(np.float64).mean()
        t_ref = t[0] + np.timedelta64(int(round(offset_ns)), "ns")
    yr, ref = _years(t, t_ref)
    design = np.column_stack([np.ones(t.size), yr, 0.5 * yr * yr])
    fit = ls_fit(years_since(t), x, s, design, random_walk_m_per_sqrt_yr)
    c, sig, dof = float(fit.coef[2]), float(math.sqrt(fit.cov[2, 2])), float(fit.dof[2])
    return AccelerationResult(
        acceleration_m_per_yr2=c, sigma_m_per_yr2=sig, ci95_m_per_yr2=_ci95(c, sig, dof),
        velocity_m_per_yr=float(fit.coef[1]),
        velocity_sigma_m_per_yr=float(math.sqrt(fit.cov[1, 1])), t_ref=ref,
        n_epochs=int(t.size), dof=dof, noise=fit.noise)


# ------------------------------------------------------------------- sliding velocity

def _window_ends(days: np.ndarray, window_days: float, step_days: float) -> np.ndarray:
    """Window ends (days from the first epoch), ascending: the last window ends at the last
    epoch (the newest velocity is the one monitoring needs), the others every ``step_days``
    before it while a whole window fits after the first epoch (one window if the span is
    shorter than a window)."""
    span = float(days[-1])
    count = max(int(math.floor((span - window_days) / step_days + 1e-9)) + 1, 1)
    return span - np.arange(count)[::-1] * step_days


def sliding_velocity(t, x_m, window_days: float, step_days: float | None = None, *,
                     method: str = "ols", min_epochs: int = 10) -> SlidingVelocity:
    """Velocity over windows of ``window_days`` moved by ``step_days`` (default: half a
    window), so a change of rate shows.  The last window ends at the last epoch; a window
    (end - window_days, end] holds the epochs after its start up to its end.

    ``method``: ``"ols"`` (straight line per window, computed for all windows at once from
    cumulative sums of t, x, t^2, t x, x^2, O(n); the sigmas assume white noise, from each
    window's residual variance, so they rank windows by noise but are too small for GNSS
    noise: use ``ols_velocity`` on a window for a sigma to report) or ``"midas"``
    (``midas_velocity`` per window, a loop over windows; its sigma).  Windows with fewer
    than ``min_epochs`` epochs, or where MIDAS refuses, give NaN."""
    if method not in ("ols", "midas"):
        raise ValueError(f"unknown method {method!r}: use 'ols' or 'midas'")
    if not window_days > 0:
        raise ValueError("window_days must be positive")
    step_days = window_days / 2.0 if step_days is None else float(step_days)
    if not step_days > 0:
        raise ValueError("step_days must be positive")
    t, x, _ = _prepare(t, x_m)
    if t.size == 0:
        raise ValueError("no epochs with a finite position")
    days = (t - t[0]).astype(np.int64).astype(np.float64) / _NS_PER_DAY
    ends = _window_ends(days, window_days, step_days)
    lo = np.searchsorted(days, ends - window_days, side="right")
    hi = np.searchsorted(days, ends, side="right")
    centres = ends - window_days / 2.0
    if days[-1] < window_days:  # a span shorter than one window: the window is all the data
        lo[:] = 0
        centres[:] = days[-1] / 2.0
    if method == "ols":
        lines = window_lines(days, x, lo, hi)
        v, s = lines.slope * DAYS_PER_YEAR, lines.slope_sigma * DAYS_PER_YEAR
    else:
        v, s = _window_midas(t, x, lo, hi)
    n = hi - lo
    few = n < max(min_epochs, 3)
    v[few] = np.nan
    s[few] = np.nan
    centres = t[0] + (centres * _NS_PER_DAY).astype(np.int64).astype("timedelta64[ns]")
    return SlidingVelocity(centres, v, s, n, float(window_days), step_days, method)


def _window_midas(t: np.ndarray, x: np.ndarray, lo: np.ndarray, hi: np.ndarray
                  ) -> tuple[np.ndarray, np.ndarray]:
    v = np.full(lo.size, np.nan)
    s = np.full(lo.size, np.nan)
    for k, (a, b) in enumerate(zip(lo, hi)):
        try:
            fit = midas_velocity(t[a:b], x[a:b])
        except ValueError:
            continue
        v[k], s[k] = fit.velocity_m_per_yr, fit.sigma_m_per_yr
    return v, s


def noise_corrected_lengths(components: list[np.ndarray], sigmas: list[np.ndarray]
                            ) -> tuple[np.ndarray, np.ndarray]:
    """Length of a vector from its noisy components and their 1-sigmas, corrected for the
    noise, with its 1-sigma; element-wise over arrays (any unit, the same for all): the one
    home of the 2D and 3D rates and displacement lengths (``vector_rate``, the alarms'
    values at every epoch, the recent change).

    The rule: each component contributes the noise-corrected square of its own size,
    ``max(v_i^2 - s_i^2, 0)``, and the length is the root of their sum,
    ``sqrt(sum_i max(v_i^2 - s_i^2, 0))``.  Why:

    * the plain length ``sqrt(sum v_i^2)`` is biased upwards, its square by ``sum s_i^2``
      on average, so a point at rest reads a speed of about its noise (the demo's stable
      rover: 0.22 mm/day in 3D); each corrected square is unbiased while the component is
      clear of its noise, and a component within its noise adds nothing;
    * correcting the sum instead, ``sqrt(max(sum v_i^2 - sum s_i^2, 0))``, let the noise of
      one component cancel the motion of another: the vertical's sigma, 2-3 times the
      horizontal's, made a rover creeping 24 mm/yr read 0.000 in 3D while its horizontal
      rate read 0.064 mm/day.  Per component, a component beyond its noise always shows:
      the length is at least that component's own corrected size, never zero;
    * the 3D length is at least the horizontal one by construction: its square is the
      horizontal's plus the vertical's own corrected part, which is never negative.

    The price is at rest: the clipped parts are never negative, so a point at rest reads
    about half its plain length on average (zero only when every component is within its
    noise: 32 % of the time in 3D), against a third for the corrected sum; its 1-sigma
    interval holds the true zero 70 % of the time, as a 1-sigma interval should, and it
    passes 2.33 sigma (the alarms' 99 % one-sided test) 2 % of the time (Monte Carlo,
    sigmas 1, 1, 2.5: tests/test_vector_rates.py; benchmarks/bench_alarms.py measures
    what that costs in false alarms).

    The sigma: first-order propagation of the length through the measured components,
    ``sqrt(sum v_i^2 s_i^2 / sum v_i^2)`` (independent components): the correction moves
    the value, and its own derivative ``v_i / length`` grows without bound as the length
    nears zero, where it stops meaning anything.  At zero length, the largest component
    sigma: a motion that large along that component reads zero about half the time, so a
    zero says no more than that.  NaN where a component or its sigma is NaN."""
    v = [np.asarray(c, np.float64) for c in components]
    s = [np.asarray(x, np.float64) for x in sigmas]
    if not v or len(v) != len(s):
        raise ValueError(f"{len(v)} components but {len(s)} sigmas: give one sigma each")
    squared = sum(np.maximum(c * c - e * e, 0.0) for c, e in zip(v, s))
    length = np.sqrt(squared)
    plain = sum(c * c for c in v)
    with np.errstate(divide="ignore", invalid="ignore"):
        along = np.sqrt(sum((c * e) ** 2 for c, e in zip(v, s)) / plain)
    largest = np.max(np.broadcast_arrays(*s), axis=0)
    sigma = np.where(length > 0, along, largest)
    return length, np.where(np.isnan(length), np.nan, sigma)


def vector_rate(rates, sigmas) -> tuple[float, float]:
    """Length of a velocity vector from its component rates and their 1-sigmas, corrected
    for noise, with its 1-sigma (any unit, the same for all): ``noise_corrected_lengths``
    of one vector (see there for the rule and why)."""
    length, sigma = noise_corrected_lengths(list(np.asarray(rates, np.float64)),
                                            list(np.asarray(sigmas, np.float64)))
    return float(length), float(sigma)

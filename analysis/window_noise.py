"""A point's own noise at the scale of each alarm window, measured on its data as it arrives.

Why.  The alarm rule compares a trailing-window displacement or velocity with a level at a
stated confidence, so it needs the error of that estimate.  A formal least-squares sigma
assumes independent epochs; real GNSS noise is time-correlated (flicker, multipath, the
atmosphere: daily solutions wander by millimetres over weeks), so on real permanent-station
residuals the formal sigma of a 7-day velocity from hourly epochs was 2-7 times too small
and 71 % of point-months at rest reached a level (issue 28, benchmarks/bench_alarms.py
``--real-noise``).  A model fitted to simulated noise does not transfer either.  So each
error is measured where it matters, on the point's own record, causally (at each epoch only
from data up to it), the way Hector or CATS would give it from a noise model but without
assuming the model:

* **velocity**: the estimates of successive windows (``window`` days apart) differ by twice
  their noise variance (and by any change of motion, which only makes the measure
  conservative); the standard deviation of those differences over the trailing
  ``NOISE_HISTORY_DAYS``, divided by sqrt 2, is the velocity's sigma;
* **displacement**: the difference of two positions ``L`` days apart (now and the
  reference) carries white noise at once and flicker or random-walk wander growing with
  ``L``, which a scatter about a line misses (the line takes the wander for motion).  The
  mean square of second differences at lags of 1 to 8 days (steady motion cancels in them)
  is measured over the trailing ``POSITION_HISTORY_DAYS`` and extended to ``L`` along a
  power law, as power-law noise models (Hector, CATS) do (``position_sigma``);
* each measure is taken once per ``grid_days`` (a day, or the reading interval when it is
  longer) and holds from then until the next, with the ``k`` independent samples behind it
  (differences of windows; daily positions less two) as its degrees of freedom: the rule's
  one-sided test uses Student's quantile at ``k`` (``student_quantile``), so an alarm on a
  young record, or on a noise measured over a short history, needs a larger margin while
  the sigma shown stays an honest 1-sigma;
* below ``MIN_NOISE_SAMPLES`` the noise is unknown and the level is not evaluated (the
  caller says so): a level is never tested against a guessed noise.

The formal sigma remains a floor (the measure cannot claim less noise than the scatter
inside a window shows).  Pure numpy; times in days on the caller's axis.
"""

from __future__ import annotations

import math
import warnings
from functools import lru_cache

import numpy as np
from numpy.lib.stride_tricks import sliding_window_view

from analysis.stats import median, student_t_quantile

# The trailing span a point's velocity noise is measured over.  Chosen by a rule fixed
# beforehand on the calibration station's noise only (LHAS blocks, bench_alarms' points at
# rest, x1 and x0.5, 288 point-months each): the longest of 91, 56 and 42 days with no
# point-month at a level (0 of 288: a one-sided 95 % bound of 1 %, the rule of three).
# 91 days gave 3 and 1, 56 days 1 and 1, 42 days 0 and 0; scored on P156: 0 and 0 (5 and 4
# at 91 days; benchmarks/bench_alarm_history.py).  Shorter histories hold fewer window
# differences, so Student's margin widens.
NOISE_HISTORY_DAYS = 42.0
MIN_NOISE_SAMPLES = 2  # independent samples of the noise before a level may be tested
MAX_DOF = 400  # Student's factor is taken as at 400 degrees of freedom beyond (< 1 % from 1)
POSITION_HISTORY_DAYS = 365.0  # the trailing span the position noise's growth is measured over
# grid steps at which that growth is measured: longer lags let the onset of a creep (a kink,
# which second differences see at every lag that spans it) inflate the noise for months
LAGS = 2 ** np.arange(4)
MIN_SECOND_DIFFERENCES = 2  # per lag, in units of the lag (independent samples)


def grid_days(days: np.ndarray) -> float:
    """How often the noise is measured: daily, or at the median reading interval when the
    readings are sparser than daily."""
    gaps = np.diff(days)
    gaps = gaps[gaps > 0]
    return max(1.0, median(gaps)) if gaps.size else 1.0


def _on_grid(days: np.ndarray, values: np.ndarray, step: float) -> tuple[np.ndarray, np.ndarray]:
    """The grid times from the first epoch and, at each, the latest value at or before it
    (NaN when that value is older than one step: an outage repeats nothing)."""
    grid = days[0] + step * np.arange(int(math.floor((days[-1] - days[0]) / step)) + 1)
    idx = np.searchsorted(days, grid, side="right") - 1
    return grid, np.where(days[idx] > grid - step, values[..., idx], np.nan)


def _trailing(values: np.ndarray, size: int) -> np.ndarray:
    """Rows of the trailing ``size`` grid values ending at each grid point (NaN before),
    along the last axis."""
    padded = np.concatenate([np.full(values.shape[:-1] + (size - 1,), np.nan), values],
                            axis=-1)
    return sliding_window_view(padded, size, axis=-1)


def _spread(rows: np.ndarray) -> np.ndarray:
    """Standard deviation of each row's finite values.  Not a robust spread: the tails are
    what an alarm tests, and real GNSS noise has heavier tails than its core shows (with a
    MAD, real-noise points reached a level in 8 % of point-months at 99 %).  A change of
    motion inside the history inflates it, but measured on the accelerating slope of
    benchmarks/bench_alarms.py a MAD gave the same velocity-alert delay (17.7 against
    17.6 days): the delay is the window's lag and the margin, not the measure."""
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", RuntimeWarning)  # all-NaN rows give NaN
        return np.sqrt(np.nanmean((rows - np.nanmean(rows, axis=-1)[..., None]) ** 2,
                                  axis=-1))


@lru_cache(maxsize=4096)
def _student(confidence: float, dof: int) -> float:
    """Student's one-sided quantile (cached: the same few hundred degrees of freedom recur
    in every analysis)."""
    return student_t_quantile(confidence, float(dof))


def student_quantile(dof: np.ndarray, confidence: float) -> np.ndarray:
    """Student's one-sided ``confidence`` quantile at each ``dof``, the margin in sigmas a
    value must clear: on a young record the noise is known from few samples, so the margin
    is wider (NaN below ``MIN_NOISE_SAMPLES``; whole degrees, capped at ``MAX_DOF``, where
    it is within 1 % of the normal quantile)."""
    dof = np.asarray(dof, np.float64)
    out = np.full(dof.shape, np.nan)
    ok = dof >= MIN_NOISE_SAMPLES
    whole = np.minimum(np.floor(np.where(ok, dof, MIN_NOISE_SAMPLES)), MAX_DOF).astype(int)
    values, index = np.unique(whole[ok], return_inverse=True)
    out[ok] = np.array([_student(confidence, int(k)) for k in values])[index]
    return out


def _at_epochs(days: np.ndarray, grid: np.ndarray, values: np.ndarray) -> np.ndarray:
    """Each epoch gets the measure of the last grid point at or before it (causal)."""
    return values[..., np.searchsorted(grid, days, side="right") - 1]


def velocity_sigma(days: np.ndarray, slope: np.ndarray, formal: np.ndarray, window: float
                   ) -> tuple[np.ndarray, np.ndarray]:
    """The 1-sigma of each epoch's trailing-window velocity (``slope``, any unit per day),
    measured from successive windows' differences (see the module's docstring), and the
    independent differences behind it (its degrees of freedom); NaN where fewer than
    ``MIN_NOISE_SAMPLES`` exist.  ``slope`` and ``formal`` may be components x epochs (one
    pass; each row what a call of its own gives)."""
    if days.size == 0:
        return np.empty(np.shape(slope)), np.empty(np.shape(slope))
    step = grid_days(days)
    grid, v = _on_grid(days, slope, step)
    lag = max(1, int(round(window / step)))
    diff = np.full(v.shape, np.nan)
    diff[..., lag:] = v[..., lag:] - v[..., :-lag]
    rows = _trailing(diff, max(1, int(round(NOISE_HISTORY_DAYS / step))))
    sigma = _spread(rows) / math.sqrt(2.0)
    dof = np.isfinite(rows).sum(axis=-1) * step / window
    return _measured(days, grid, sigma, dof, formal)


def _measured(days: np.ndarray, grid: np.ndarray, sigma: np.ndarray, dof: np.ndarray,
              formal: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """The grid's sigma and dof at each epoch, the formal sigma a floor, NaN while the
    noise rests on fewer than ``MIN_NOISE_SAMPLES`` samples."""
    known = np.isfinite(sigma) & (dof >= MIN_NOISE_SAMPLES)
    at_sigma = _at_epochs(days, grid, np.where(known, sigma, np.nan))
    at_dof = _at_epochs(days, grid, np.where(known, dof, np.nan))
    return np.where(np.isfinite(at_sigma), np.fmax(at_sigma, formal), np.nan), at_dof


def _trailing_mean(values: np.ndarray, size: int) -> tuple[np.ndarray, np.ndarray]:
    """Mean and count of the finite values among the trailing ``size`` at each index
    (along the last axis)."""
    ok = np.isfinite(values)
    first = np.zeros(values.shape[:-1] + (1,))
    c_sum = np.concatenate([first, np.cumsum(np.where(ok, values, 0.0), axis=-1)], axis=-1)
    c_n = np.concatenate([first.astype(np.int64), np.cumsum(ok, axis=-1)], axis=-1)
    lo = np.maximum(np.arange(values.shape[-1]) + 1 - size, 0)
    hi = np.arange(values.shape[-1]) + 1
    n = c_n[..., hi] - c_n[..., lo]
    with np.errstate(divide="ignore", invalid="ignore"):
        return np.where(n > 0, (c_sum[..., hi] - c_sum[..., lo]) / n, np.nan), n


def _second_differences(x: np.ndarray, history: int) -> tuple[np.ndarray, np.ndarray]:
    """At each grid point, the trailing mean square of second differences
    x(s) - 2 x(s - lag) + x(s - 2 lag) for every lag of ``LAGS`` (grid x lags, after any
    leading axes of ``x``; NaN where fewer than ``MIN_SECOND_DIFFERENCES`` exist)."""
    out = np.full(x.shape + (LAGS.size,), np.nan)
    size = x.shape[-1]
    for k, lag in enumerate(LAGS):
        if size <= 2 * lag:
            break
        q = np.full(x.shape, np.nan)
        q[..., 2 * lag:] = (x[..., 2 * lag:] - 2.0 * x[..., lag:-lag] + x[..., :-2 * lag]) ** 2
        mean, n = _trailing_mean(q, history)
        out[..., k] = np.where(n >= MIN_SECOND_DIFFERENCES * lag, mean, np.nan)
    return out


def _at_lag(s2: np.ndarray, lag: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """Each row's second-difference power at its own ``lag`` (grid steps): the least-squares
    line through log power against log lag of the lags measured, its slope kept within
    [0, 1] (white noise to random walk), read at ``lag`` (NaN with no lag measured); and
    that slope."""
    ok = np.isfinite(s2) & (s2 > 0)
    u = np.log(LAGS.astype(np.float64))
    y = np.log(np.where(ok, s2, 1.0))
    n = ok.sum(axis=-1)
    with np.errstate(divide="ignore", invalid="ignore"):
        um = np.where(ok, u, 0).sum(axis=-1) / n
        ym = np.where(ok, y, 0).sum(axis=-1) / n
        du = np.where(ok, u - um[..., None], 0.0)
        slope = ((du * np.where(ok, y - ym[..., None], 0.0)).sum(axis=-1)
                 / (du * du).sum(axis=-1))
    slope = np.clip(np.where(np.isfinite(slope), slope, 0.0), 0.0, 1.0)
    power = np.exp(ym + slope * (np.log(np.maximum(lag, 1.0)) - um))
    return np.where(n > 0, power, np.nan), slope


def position_sigma(days: np.ndarray, value: np.ndarray, formal: np.ndarray,
                   reference_day: float) -> tuple[np.ndarray, float, np.ndarray]:
    """The sigma of each epoch's displacement from the reference (``value``: the trailing
    window's position, any unit; ``reference_day``: the reference's mean time).

    What it must hold is the noise of a difference of two positions ``L`` days apart (now
    and the reference): white noise gives it at once, flicker and random-walk wander grow
    with ``L``, and a scatter about a line misses that wander (the line takes it for
    motion).  Second differences x(s) - 2 x(s - lag) + x(s - 2 lag) cancel any steady
    motion, and their mean square is S2(lag) = 8 g(lag) - 2 g(2 lag), g the semivariogram
    (half the variance of a difference of two positions that far apart).  S2 is measured
    over the trailing ``POSITION_HISTORY_DAYS`` at lags of 1 to 8 grid steps (``LAGS``) and
    extended to ``L`` along a power law in the lag (``_at_lag``), as power-law noise models
    (Hector, CATS) do; for g ~ lag^beta (beta 0: white, 1: random walk) the displacement's
    variance 2 g(L) is S2(L) 2 / (8 - 2^(1 + beta)).  Also returns the reference's part of
    the last finite sigma (half its variance) and the degrees of freedom (daily positions
    less two); NaN while too few exist.  ``value`` and ``formal`` may be components x
    epochs (one pass; each row what a call of its own gives, the reference's part then one
    per row)."""
    if days.size == 0:
        empty = np.empty(np.shape(value))
        return empty, (0.0 if empty.ndim == 1 else np.zeros(empty.shape[0])), empty.copy()
    step = grid_days(days)
    grid, x = _on_grid(days, value, step)
    history = max(3, int(round(POSITION_HISTORY_DAYS / step)))
    s2 = _second_differences(x, history)
    lag = np.abs(grid - reference_day) / step
    _, n = _trailing_mean(np.where(np.isfinite(x), 1.0, np.nan), history)
    power, beta = _at_lag(s2, lag)
    # semivariogram g ~ lag^beta: S2 = 8 g(L) - 2 g(2L) = (8 - 2^(1 + beta)) g(L)
    share = 2.0 / (8.0 - 2.0 ** (1.0 + beta))
    sigma, dof = _measured(days, grid, np.sqrt(share * power), n - 2.0, formal)
    return sigma, _reference_part(sigma), dof


def _reference_part(sigma: np.ndarray):
    """The reference's part of each row's last finite sigma (half its variance), 0 when it
    has none; a float for one row."""
    parts = [float(f[-1]) / math.sqrt(2.0) if f.size else 0.0
             for f in (row[np.isfinite(row)] for row in sigma.reshape(-1, sigma.shape[-1]))]
    return parts[0] if sigma.ndim == 1 else np.array(parts)

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
exactly; see ``ols_velocity`` for the method and the references.  MIDAS uses its
published, deliberately conservative formula.

Sliding-window velocities (``sliding_velocity``) show a change of rate; ``acceleration``
fits a quadratic with the same noise treatment as ``ols_velocity``.

Times are numpy ``datetime64`` (UTC, see ``analysis.timebase``); positions in metres; rates
in m/yr (geodetic convention, Julian year of 365.25 days) with mm/yr and mm/day views.
Epochs whose position is NaN are ignored; unsorted epochs are sorted first.
"""

from __future__ import annotations

import math
import threading
from dataclasses import dataclass
from functools import lru_cache

import numpy as np

from analysis.lines import window_lines
from analysis.stats import student_t_quantile
from analysis.timebase import DAYS_PER_YEAR, as_datetime64, years_since

MAD_TO_SIGMA = 1.4826  # 1 / Phi^-1(3/4): scaled MAD = sigma for Gaussian data
MIDAS_TOLERANCE_YR = 0.001  # midas.f: pairs "precisely" one year apart, within 0.001 yr
MIDAS_MIN_PAIRS = 10  # midas.f: fatal below 10 pairs
MIDAS_ONE_YEAR_MIN_SPAN_YR = 1.1  # shorter step-free spans use half their length instead
MIN_CI_DOF = 2.0  # Satterthwaite dof below 2 (a chi-square with its mode at 0) not trusted
_VARIOGRAM_LAGS = 20  # log-spaced lags at which the residual semivariogram is fitted
_VARIOGRAM_MAX_FRACTION = 0.25  # longest lag fitted: a quarter of the span
_MAX_GRID = 1 << 20  # the noise model's regular grid has at most this many cells
_MAX_FREQUENCIES = 1 << 15  # frequencies in the Satterthwaite integral
_NS_PER_DAY = 86_400e9


# ----------------------------------------------------------------------------- results

@dataclass(frozen=True)
class NoiseModel:
    """The residual noise model behind an OLS sigma: white noise plus flicker noise (fitted),
    plus random walk (given, not fitted).

    ``white_m``: standard deviation of the white part of one epoch (for weighted fits, at
    the mean of the given variances).  ``variance_factor``: the a-posteriori variance factor
    of the white part relative to the given ``sigma_m`` (1 sigma of unit weight squared;
    without ``sigma_m`` it is ``white_m**2``).  ``flicker_m_per_yr025``: flicker amplitude
    in the convention of Williams (2003): the flicker part is that amplitude times
    ``grid_yr**0.25`` times the fractional-integration filter (Hosking 1981) of unit white
    noise, ``grid_yr`` being the sampling interval of the regular grid the model lives on
    (``grid_days``).  In this convention the same physical flicker shows an amplitude
    proportional to grid_days^-1/4: hourly data give 24^(1/4) = 2.2 times the daily value.
    ``random_walk_m_per_sqrt_yr``: the random walk given to ``ols_velocity`` (0 if none)."""

    white_m: float
    variance_factor: float
    flicker_m_per_yr025: float
    random_walk_m_per_sqrt_yr: float
    grid_days: float

    def describe(self) -> str:
        return (f"white {self.white_m * 1e3:.2f} mm + flicker "
                f"{self.flicker_m_per_yr025 * 1e3:.2f} mm/yr^0.25 + random walk "
                f"{self.random_walk_m_per_sqrt_yr * 1e3:.2f} mm/yr^0.5")


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


# ------------------------------------------------------- least squares + noise model

def _pow2(n: int) -> int:
    return 1 << max(1, int(math.ceil(math.log2(max(n, 2)))))


def _flicker_filter(n: int) -> np.ndarray:
    """The first ``n`` coefficients of the fractional-integration filter that turns white
    noise into flicker noise (spectral index -1): h_0 = 1, h_k = h_{k-1} (k - 1/2) / k
    (Hosking 1981; Kasdin 1995; Williams 2003, eq. 7)."""
    k = np.arange(1, n, dtype=np.float64)
    return np.concatenate([[1.0], np.cumprod((k - 0.5) / k)])


@lru_cache(maxsize=8)
def _flicker_semivariogram_pow2(size: int) -> np.ndarray:
    """Semivariogram of unit flicker noise at lags 0..size-1 grid steps: half the variance of
    x_{k+l} - x_k in the stationary limit, 1/2 sum_j (h_j - h_{j-l})^2 (h_{<0} = 0), summed
    over 4x ``size`` terms (the omitted tail is < 0.2% at the longest lag) with one FFT
    autocorrelation of the filter."""
    m = 4 * size
    h = _flicker_filter(m)
    cum = np.concatenate([[0.0], np.cumsum(h * h)])
    spec = np.fft.rfft(h, 2 * m)
    auto = np.fft.irfft(spec * np.conj(spec), 2 * m)[:size]
    lag = np.arange(size)
    g = 0.5 * (cum[m] + cum[m - lag] - 2.0 * auto)
    g[0] = 0.0
    g.setflags(write=False)
    return g


def _flicker_semivariogram(n: int) -> np.ndarray:
    return _flicker_semivariogram_pow2(_pow2(n))[:n]


def _toeplitz_rows(kernel: np.ndarray, rows: np.ndarray) -> np.ndarray:
    """``rows`` (p, N) times the symmetric Toeplitz matrix whose first row is ``kernel``
    (length N), by FFT convolution."""
    n = rows.shape[1]
    nfft = _pow2(2 * n)
    ker = np.zeros(nfft)
    ker[:n] = kernel
    ker[nfft - n + 1:] = kernel[1:][::-1]
    prod = np.fft.rfft(rows, nfft, axis=1) * np.fft.rfft(ker)
    return np.fft.irfft(prod, nfft, axis=1)[:, :n]


@lru_cache(maxsize=8)
def _flicker_spectrum(n: int) -> np.ndarray:
    """The FFT of the circulant embedding of the unit flicker semivariogram at lags
    0..n-1 (``_toeplitz_rows``'s kernel transform, kept: every grid of n cells uses it)."""
    kernel = _flicker_semivariogram(n)
    nfft = _pow2(2 * n)
    ker = np.zeros(nfft)
    ker[:n] = kernel
    ker[nfft - n + 1:] = kernel[1:][::-1]
    spectrum = np.fft.rfft(ker)
    spectrum.setflags(write=False)
    return spectrum


def _flicker_rows(rows: np.ndarray, step_yr: float) -> np.ndarray:
    """``rows`` (p, N) times the flicker semivariogram matrix per unit b^2 on a grid of N
    cells of ``step_yr`` (``_toeplitz_rows`` with ``_flicker_kernel``, its transform kept)."""
    n = rows.shape[1]
    nfft = _pow2(2 * n)
    prod = np.fft.rfft(rows, nfft, axis=1) * (_flicker_spectrum(n) * math.sqrt(step_yr))
    return np.fft.irfft(prod, nfft, axis=1)[:, :n]


@dataclass(frozen=True)
class _Grid:
    """Epochs placed on a regular grid (the noise model lives on one)."""

    index: np.ndarray  # grid cell of each epoch
    size: int
    step_yr: float


def _grid(t_yr: np.ndarray) -> _Grid:
    """A regular grid at the median sampling interval (coarser if the span would need more
    than ``_MAX_GRID`` cells)."""
    dt = np.diff(t_yr)
    positive = dt[dt > 0]
    span = float(t_yr[-1] - t_yr[0])
    step = float(np.median(positive)) if positive.size else 1.0 / DAYS_PER_YEAR
    step = max(step, span / (_MAX_GRID - 1))
    index = np.rint((t_yr - t_yr[0]) / step).astype(np.int64)
    return _Grid(index, int(index[-1]) + 1, step)


def _nnls(b: np.ndarray, y: np.ndarray) -> np.ndarray:
    """Non-negative least squares for a handful of columns: the unconstrained solution when
    it is non-negative (no constraint binds: its residual is the least of all), else the
    best of the column subsets whose unconstrained solution is non-negative (exact, and
    cheap for 2 columns)."""
    p = b.shape[1]
    sol = _lstsq(b, y)
    if np.all(sol >= 0):
        return sol
    best, best_rss = np.zeros(p), float(y @ y)
    for cols in _subsets(p)[:-1]:
        sol = _lstsq(b[:, cols], y)
        if np.all(sol >= 0):
            full = np.zeros(p)
            full[list(cols)] = sol
            res = b @ full - y
            rss = float(res @ res)
            if rss < best_rss:
                best, best_rss = full, rss
    return best


@lru_cache(maxsize=8)
def _subsets(p: int) -> tuple[tuple[int, ...], ...]:
    """The non-empty subsets of p columns, in the order of their bit masks (all last)."""
    return tuple(tuple(k for k in range(p) if mask >> k & 1) for mask in range(1, 1 << p))


def _lstsq(b: np.ndarray, y: np.ndarray) -> np.ndarray:
    """Least squares of ``y`` on one or two columns by Gram-Schmidt (as accurate as
    LAPACK's, which costs ~20 us a call here); more columns by ``np.linalg.lstsq``."""
    if b.shape[1] == 1:
        col = b[:, 0]
        norm2 = float(col @ col)
        return np.array([float(col @ y) / norm2 if norm2 > 0 else 0.0])
    if b.shape[1] > 2:
        return np.linalg.lstsq(b, y, rcond=None)[0]
    b1, b2 = b[:, 0], b[:, 1]
    n1 = math.sqrt(float(b1 @ b1))
    if n1 == 0:
        return np.array([0.0, *_lstsq(b[:, 1:], y)])
    q1 = b1 / n1
    r12 = float(q1 @ b2)
    w = b2 - r12 * q1
    r22 = math.sqrt(float(w @ w))
    if r22 <= 1e-15 * max(n1, abs(r12)):  # dependent columns: the first alone
        return np.array([float(q1 @ y) / n1, 0.0])
    c2 = float((w / r22) @ y) / r22
    return np.array([(float(q1 @ y) - r12 * c2) / n1, c2])


def _flicker_kernel(grid: _Grid) -> np.ndarray:
    """Flicker semivariogram per unit b^2 (b in m/yr^0.25) at lags 0..size-1 grid steps."""
    return _flicker_semivariogram(grid.size) * math.sqrt(grid.step_yr)


def _flicker_density(nu: np.ndarray, step_yr: float) -> np.ndarray:
    """Two-sided spectral density (per grid step) of flicker per unit b^2: the filter's
    |1 - e^(-2 pi i nu)|^-1 = 1 / (2 sin pi nu), times step^(1/2)."""
    return math.sqrt(step_yr) / (2.0 * np.sin(np.pi * nu))


def _random_walk_kernel(grid: _Grid) -> np.ndarray:
    """Random-walk semivariogram per unit q (m^2/yr): q * lag / 2."""
    return 0.5 * grid.step_yr * np.arange(grid.size, dtype=np.float64)


# The coloured parts of the fitted noise model: (semivariogram on the grid, the grid's
# semivariogram matrix applied to rows, spectral density).  Random walk is not among them:
# with flicker present, 5 years of daily data cannot tell the two apart, and in simulations
# fitting both made the rate sigma scatter by a factor of ~1.4 (sd of its log 0.36-0.48,
# Satterthwaite dof ~2) against ~1.1 for white + flicker.  A known random walk (monument
# instability) can be given instead (ols_velocity).

_COLOURED = ((_flicker_kernel, _flicker_rows, _flicker_density),)


@dataclass(frozen=True)
class _Fit:
    coef: np.ndarray
    cov: np.ndarray  # coloured-noise covariance; row/column 0 (intercept) is NaN
    residuals: np.ndarray
    noise: NoiseModel
    dof: np.ndarray  # Satterthwaite dof of each parameter's variance


def _estimator_rows(design: np.ndarray, s2: np.ndarray) -> np.ndarray:
    """The (p, n) matrix A of weighted least squares, coef = A x, weights 1/s2: normal
    equations on equilibrated columns (p is small; LAPACK's QR is ~100x slower here)."""
    sw = 1.0 / np.sqrt(s2)
    b = design * sw[:, None]
    scale = np.sqrt(np.einsum("ij,ij->j", b, b))  # (np.sum over axis 0 of 2 columns: ms)
    scale[scale == 0] = 1.0
    b = b / scale
    normal = b.T @ b
    eig = np.linalg.eigvalsh(normal)
    if not eig[0] > 1e-10 * eig[-1]:
        raise ValueError("the model is not determined by these epochs (a step or seasonal "
                         "term without data to fit it): use fewer terms or more data")
    return np.linalg.solve(normal, b.T) / scale[:, None] * sw


def _on_grid(a: np.ndarray, grid: _Grid) -> np.ndarray:
    """Rows of ``a`` (p, n) summed into the grid cells of their epochs (p, size)."""
    return np.stack([np.bincount(grid.index, weights=row, minlength=grid.size) for row in a])


@dataclass(frozen=True, eq=False)
class _NoiseBasis:
    """Everything the noise model needs that depends on the epochs, their weights and the
    design but not on the positions, so that the components of one rover (east, north, up,
    along, ...: the same epochs) compute it once (``_noise_basis``).

    ``a``: the estimator rows (coef = a @ x).  ``k``: A C A' per unit amplitude of each noise
    component (white: A S A'; coloured: A Gamma A', the negative of a covariance; rows and
    columns of the intercept zero: never used).  The empirical semivariogram is taken at
    one epoch per occupied grid cell (``rep``, in ``cells``) at ``lags`` (grid steps, those
    with at least 3 pairs; ``npairs``), on a dense grid array (``present`` marks the
    occupied cells) or, for sparse grids, over the ``pairs`` (i, j) of each lag;
    ``expected``: the expected semivariogram of the residuals per unit amplitude of each
    component at those lags; ``spectral``: what the amplitudes' covariance needs
    (``_amplitude_covariance``)."""

    t_yr: np.ndarray
    s2: np.ndarray | None  # None: unit weights
    design: np.ndarray
    a: np.ndarray
    grid: _Grid
    k: tuple[np.ndarray, ...]
    cells: np.ndarray
    rep: np.ndarray
    present: np.ndarray | None
    empty: np.ndarray | None  # the empty cells of a dense grid, when few (1 in 8 at most)
    pairs: tuple[tuple[np.ndarray, np.ndarray], ...] | None
    lags: np.ndarray
    npairs: np.ndarray
    expected: np.ndarray  # (lags, components)
    spectral: np.ndarray | None  # (components, components, lags, lags)
    mean_s2: float

    def matches(self, t_yr: np.ndarray, s2: np.ndarray | None, design: np.ndarray) -> bool:
        return (self.t_yr.shape == t_yr.shape and self.design.shape == design.shape
                and (self.s2 is None) == (s2 is None)
                and np.array_equal(self.t_yr, t_yr) and np.array_equal(self.design, design)
                and (s2 is None or np.array_equal(self.s2, s2)))


_BASES: list[_NoiseBasis] = []  # the last few noise bases, newest first
_BASES_KEPT = 4
_BASES_LOCK = threading.Lock()


def _noise_basis(t_yr: np.ndarray, s2: np.ndarray | None, design: np.ndarray) -> _NoiseBasis:
    """The noise basis of these epochs, weights (None: unit) and design: one of the last
    few computed (the same epochs' other components), else computed.  Thread-safe (the GUI
    analyses in worker threads); the result does not depend on what was kept."""
    with _BASES_LOCK:
        for basis in _BASES:
            if basis.matches(t_yr, s2, design):
                return basis
    basis = _compute_noise_basis(t_yr, s2, design)
    with _BASES_LOCK:
        _BASES.insert(0, basis)
        del _BASES[_BASES_KEPT:]
    return basis


def _compute_noise_basis(t_yr: np.ndarray, s2_given: np.ndarray | None,
                         design: np.ndarray) -> _NoiseBasis:
    """The ``_NoiseBasis`` of these epochs (years), variances (None: unit) and design.

    The expected semivariogram of least-squares *residuals* is not the noise's: the fit
    absorbs part of the slow noise.  With r = (I - P) e and d the difference operator of a
    pair, E (r_j - r_i)^2 = u' C u with u = (I - P') d = d - A' G' d, which needs only
    C A' and A C A': summed over a lag's pairs it is one small matrix product of the lag's
    mean dG dG' (G the design) and mean dM dG' (M = C A' at the epochs).  The intercept's
    column of G has no differences, so its row of A is never propagated; for white noise
    C A' = S A' = G (G' S^-1 G)^-1 = G K, so that mean dM dG' = mean dG dG' K."""
    n, p = design.shape
    s2 = np.ones(n) if s2_given is None else s2_given
    a = _estimator_rows(design, s2)
    grid = _grid(t_yr)
    q = p - 1  # the columns of G (rows of A) that change with time
    a_grid = _on_grid(a[1:], grid)
    k_white = (a * s2) @ a.T
    k = [k_white]
    cells, rep = np.unique(grid.index, return_index=True)  # one epoch per occupied cell
    m_cells, kernels = [], []
    for kernel_fn, rows_fn, _ in _COLOURED:
        gamma_a = rows_fn(a_grid, grid.step_yr)  # rows: Gamma a_k' on the grid
        k_c = np.zeros((p, p))
        k_c[1:, 1:] = a_grid @ gamma_a.T
        k.append(k_c)
        m_cells.append(gamma_a[:, cells].T)
        kernels.append(kernel_fn(grid))
    lags = np.unique(np.rint(np.geomspace(
        1, max(1, int(grid.size * _VARIOGRAM_MAX_FRACTION)), _VARIOGRAM_LAGS)).astype(int))
    z = np.column_stack([design[rep, 1:], *m_cells, s2[rep]])
    dense = grid.size <= 4 * cells.size
    found = list(_lag_grams(z, cells, grid.size, lags, dense))
    lag_used = np.array([f[0] for f in found], dtype=np.int64)
    npairs = np.array([f[1] for f in found], dtype=np.float64)
    m = z.shape[1] - 1
    grams = np.array([f[2] for f in found], dtype=np.float64).reshape(len(found), m, m)
    s2_sums = np.array([f[3] for f in found], dtype=np.float64)
    pairs = [f[4] for f in found]
    dgdg = grams[:, :q, :q]
    expected = np.empty((len(found), len(k)))
    expected[:, 0] = 0.5 * s2_sums / npairs - 0.5 * np.einsum("ij,lij->l", k_white[1:, 1:], dgdg)
    for c, (kern, k_c) in enumerate(zip(kernels, k[1:])):
        trace = np.einsum("lii->l", grams[:, q * (c + 1):q * (c + 2), :q])
        expected[:, 1 + c] = kern[lag_used] - 0.5 * (
            -2.0 * trace + np.einsum("ij,lij->l", k_c[1:, 1:], dgdg))
    present = empty = None
    if dense:
        present = np.zeros(grid.size)
        present[cells] = 1.0
        if grid.size - cells.size <= grid.size // 8:
            empty = np.flatnonzero(present == 0)
    mean_s2 = float(np.mean(s2))
    spectral = (_spectral_moments(lag_used, npairs, grid.step_yr)
                if len(found) >= len(k) else None)
    return _NoiseBasis(t_yr, s2_given, design, a, grid, tuple(k), cells, rep, present, empty,
                       None if dense else tuple(pairs), lag_used, npairs, expected,
                       spectral, mean_s2)


def _lag_grams(z: np.ndarray, cells: np.ndarray, size: int, lags: np.ndarray, dense: bool):
    """For each lag (grid steps) with at least 3 pairs of occupied cells that far apart:
    (lag, pairs, mean over the pairs of dz dz' for all columns of ``z`` but the last, sum
    over the pairs of last-column values of both ends, the pairs (i, j) as indices into
    ``z``: None on the dense path).  On a dense grid array when the cells are mostly
    occupied (slices, no gathers), else by index lookup."""
    m = z.shape[1] - 1
    if dense:
        grid_z = np.zeros((m, size))  # one contiguous row per column of z
        grid_z[:, cells] = z[:, :m].T
        present = np.zeros(size)
        present[cells] = 1.0
        last = np.zeros(size)
        last[cells] = z[:, m]
        for lag in lags:
            both = present[lag:] * present[:-lag]
            count = int(both.sum())
            if count < 3:
                continue
            dz = grid_z[:, lag:] - grid_z[:, :-lag]
            gram = (dz * both) @ dz.T / count
            yield lag, count, gram, float(both @ (last[lag:] + last[:-lag])), None
        return
    where = np.full(size, -1, dtype=np.int64)
    where[cells] = np.arange(cells.size)
    for lag in lags:
        ok = cells + lag < size
        j = where[cells[ok] + lag]
        i = np.nonzero(ok)[0][j >= 0]
        j = j[j >= 0]
        if i.size < 3:
            continue
        dz = z[j, :m] - z[i, :m]
        yield (lag, int(i.size), dz.T @ dz / i.size, float(z[i, m].sum() + z[j, m].sum()),
               (i, j))


def _semivariogram(resid: np.ndarray, basis: _NoiseBasis) -> np.ndarray:
    """The residuals' empirical semivariogram at the basis' lags (one epoch per cell):
    half the mean of (r_j - r_i)^2 over each lag's pairs.  On the dense grid array (empty
    cells hold zeros, so absent pairs add no cross product) the sum over a lag's pairs is
    sum r_j^2 + sum r_i^2 - 2 sum r_i r_j: the squares from prefix sums, less the cells
    whose partner is empty (when few are), else by dot products with the occupied cells;
    the cross products one dot product a lag."""
    r = resid if basis.rep.size == resid.size else resid[basis.rep]
    if basis.present is None:
        out = np.empty(basis.lags.size)
        for c, (i, j) in enumerate(basis.pairs):
            d = r[j] - r[i]
            out[c] = 0.5 * float(d @ d) / i.size
        return out
    size = basis.present.size
    if size == r.size:  # every cell holds one epoch (regular sampling without gaps)
        grid_r = r
    else:
        grid_r = np.zeros(size)
        grid_r[basis.cells] = r
    # sum over a lag's pairs of r_j^2 (and of r_i^2): over all cells from the lag on (up to
    # size - lag), less the cells whose partner cell is empty; then the cross products
    r2 = np.concatenate([grid_r * grid_r, [0.0]])  # index size: no cell, 0
    lags, empty = basis.lags, basis.empty
    if empty is None:  # many empty cells
        p = basis.present
        squares = np.array([float(p[:-lag] @ r2[lag:size]) + float(r2[:size - lag] @ p[lag:])
                            for lag in lags.tolist()])
    else:
        cum = np.concatenate([[0.0], np.cumsum(r2[:size])])
        squares = (cum[size] - cum[lags]) + cum[size - lags]
        if empty.size:
            ahead = empty[None, :] + lags[:, None]
            behind = empty[None, :] - lags[:, None]
            squares = squares - r2[np.where(ahead < size, ahead, size)].sum(axis=1)
            squares = squares - r2[np.where(behind >= 0, behind, size)].sum(axis=1)
    cross = np.array([float(grid_r[lag:] @ grid_r[:-lag]) for lag in lags.tolist()])
    return 0.5 * (squares - 2.0 * cross) / basis.npairs


def _ls_fit(t_yr: np.ndarray, x: np.ndarray, sigma: np.ndarray | None,
            design: np.ndarray, random_walk_m_per_sqrt_yr: float = 0.0) -> _Fit:
    """(Weighted) least squares of ``x`` on ``design`` (column 0 the constant), with the
    parameter covariance under a white + flicker noise model fitted to the residuals, plus
    a known random walk if given.

    Every parameter but the intercept has weights summing to zero (its estimate ignores a
    constant added to the data), so its variance needs only the noise semivariogram, which
    flicker and random walk have (their variance does not exist):
    Var(a.e) = -sum_ij a_i a_j gamma(t_i - t_j) (Matheron's intrinsic random functions;
    Cressie 1993, sec. 2.3)."""
    n, p = design.shape
    basis = _noise_basis(t_yr, None if sigma is None else sigma * sigma, design)
    s2 = np.ones(n) if basis.s2 is None else basis.s2
    coef = basis.a @ x
    resid = x - design @ coef
    amp, dof_fn = _fit_noise(resid, s2, basis)
    sign = np.array([1.0] + [-1.0] * len(_COLOURED))  # coloured K are -covariances
    cov = sum(c * s * k for c, s, k in zip(amp, sign, basis.k))
    known_rw = np.zeros((p, p))
    if random_walk_m_per_sqrt_yr:  # known: no estimation variance
        grid_a = _on_grid(basis.a, basis.grid)
        walk = _toeplitz_rows(_random_walk_kernel(basis.grid), grid_a)
        known_rw = -random_walk_m_per_sqrt_yr ** 2 * (grid_a @ walk.T)
    cov = cov + known_rw
    cov[0, :] = cov[:, 0] = np.nan
    dof = [np.nan] + [dof_fn(sign * np.array([k[i, i] for k in basis.k]), known_rw[i, i])
                      for i in range(1, p)]
    noise = NoiseModel(white_m=math.sqrt(amp[0] * basis.mean_s2),
                       variance_factor=float(amp[0]),
                       flicker_m_per_yr025=math.sqrt(amp[1]),
                       random_walk_m_per_sqrt_yr=float(random_walk_m_per_sqrt_yr),
                       grid_days=basis.grid.step_yr * DAYS_PER_YEAR)
    return _Fit(coef, cov, resid, noise, np.array(dof))


def _fit_noise(resid: np.ndarray, s2: np.ndarray, basis: _NoiseBasis):
    """Amplitudes (white variance factor, flicker b^2) fitted to the residuals'
    semivariogram by weighted least squares with Cressie's (1985) weights N(h) / gamma(h)^2
    (iterated with the model), non-negative; and a function giving the Satterthwaite dof of
    a variance sum_c amp_c V_c (+ a known part).  Too short a series for a noise model:
    white noise with the a-posteriori variance factor."""
    n, p = basis.design.shape
    dof_white = float(n - p)
    if basis.spectral is None:
        f = float(np.sum(resid * resid / s2)) / max(dof_white, 1.0)
        return np.array([f] + [0.0] * len(_COLOURED)), lambda v, known=0.0: dof_white
    npairs, expected = basis.npairs, basis.expected
    emp = _semivariogram(resid, basis)
    weight = np.sqrt(npairs) / np.maximum(emp, 1e-300)
    amp = _nnls(expected * weight[:, None], emp * weight)
    for _ in range(3):
        weight = np.sqrt(npairs) / np.maximum(expected @ amp, 1e-300 + 1e-12 * emp.max())
        amp = _nnls(expected * weight[:, None], emp * weight)
    cov_amp = _amplitude_covariance(amp, basis, weight)

    def dof(v: np.ndarray, known: float = 0.0) -> float:
        var_total = float(amp @ v) + known
        var_var = float(v @ cov_amp @ v)
        if var_var <= 0 or var_total <= 0:
            return dof_white
        return float(min(max(2.0 * var_total ** 2 / var_var, MIN_CI_DOF), dof_white))

    return amp, dof


def _spectral_moments(lags: np.ndarray, npairs: np.ndarray, step_yr: float) -> np.ndarray:
    """The amplitude-independent part of the semivariogram estimates' covariance
    (``_amplitude_covariance``): with the noise density S = sum_c amp_c f_c (f_0 the white
    level 1, f_c the coloured densities), the covariance of the estimates at lags l1, l2 is
    sum_cd amp_c amp_d W_cd[l1, l2], W_cd = (8 / sqrt(N1 N2)) int f_c f_d sin^2(pi v l1)
    sin^2(pi v l2) dv, the integral by the midpoint rule over ``nf`` frequencies in (0, 1/2).

    sin^2 a sin^2 b = (1 - cos 2a - cos 2b + cos(2a - 2b) / 2 + cos(2a + 2b) / 2) / 4, so
    each W_cd is made of the cosine sums F(m) = sum_v f_c f_d cos(2 pi v m) at m = 0, l1,
    l2, |l1 - l2|, l1 + l2, all of which one FFT gives: no (lags x nf) matrix of sines,
    and no large matrix product (threaded BLAS stalls when the cores are busy).  Agrees
    with the direct sum to ~1e-11 (the flicker term sums values ~4 nf times larger)."""
    nf = int(min(max(4 * lags.max(), 1024), _MAX_FREQUENCIES))
    nu = (np.arange(nf) + 0.5) / (2 * nf)
    shapes = [np.ones(nf)] + [dens(nu, step_yr) for _, _, dens in _COLOURED]
    whole = lags.astype(np.int64)
    l1, l2 = whole[:, None], whole[None, :]
    # F(m) over m in [0, 4 nf): F(m + 2 nf) = -F(m) and F(2 nf - m) = -F(m), so every m
    # folds into [0, nf], where F(m) = Re(e^(i pi m / 2 nf) conj(rfft(f, 2 nf)[m]))
    m = np.stack(np.broadcast_arrays(np.zeros_like(l1), l1, l2, np.abs(l1 - l2), l1 + l2))
    m = m % (4 * nf)
    sign = np.where(m >= 2 * nf, -1.0, 1.0)
    m = np.where(m >= 2 * nf, m - 2 * nf, m)
    sign = np.where(m > nf, -sign, sign)
    m = np.where(m > nf, 2 * nf - m, m)
    terms = sign * np.array([1.0, -1.0, -1.0, 0.5, 0.5])[:, None, None] * 0.25
    theta = np.pi * np.arange(nf + 1) / (2 * nf)
    cos_theta, sin_theta = np.cos(theta), np.sin(theta)
    scale = 16.0 / (2 * nf) / np.sqrt(np.outer(npairs, npairs))
    k = len(shapes)
    out = np.empty((k, k, lags.size, lags.size))
    for c in range(k):
        for d in range(c, k):
            spectrum = np.fft.rfft(shapes[c] * shapes[d], 2 * nf)
            cosine_sums = cos_theta * spectrum.real + sin_theta * spectrum.imag
            out[c, d] = out[d, c] = np.sum(terms * cosine_sums[m], axis=0) * scale
    return out


def _amplitude_covariance(amp: np.ndarray, basis: _NoiseBasis, weight: np.ndarray
                          ) -> np.ndarray:
    """Covariance of the fitted amplitudes, for the Satterthwaite dof.  Semivariogram
    estimates at lags l1, l2 of a process with two-sided spectral density S have, for long
    series, covariance (8 / N) int_{-1/2}^{1/2} S(v)^2 sin^2(pi v l1) sin^2(pi v l2) dv
    (Gaussian fourth moments, Whittle's approximation); it is propagated through the
    weighted least squares that gave the amplitudes.  S is linear in the amplitudes, so
    the integral is a quadratic form in them (``_spectral_moments``)."""
    level = np.concatenate([[amp[0] * basis.mean_s2], amp[1:]])
    cov_emp = np.tensordot(np.outer(level, level), basis.spectral, axes=2)
    m = np.linalg.pinv(basis.expected * weight[:, None]) * weight
    return m @ cov_emp @ m.T


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
    fit = _ls_fit(yr if t_ref is None else years_since(t), x, s, design,
                  random_walk_m_per_sqrt_yr)
    return _ols_result(t, ref, fit, annual, semiannual, steps_used)


def _ols_result(t, ref, fit: _Fit, annual: bool, semiannual: bool,
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
    med = float(np.median(slopes))
    dev = np.abs(slopes - med)
    kept = slopes[dev < 2.0 * MAD_TO_SIGMA * float(np.median(dev))]
    if kept.size == 0:  # more than half the slopes identical: nothing to trim against
        kept = slopes
    med = float(np.median(kept))
    return med, MAD_TO_SIGMA * float(np.median(np.abs(kept - med))), int(kept.size)


def _midas_sigma(sigma_tilde: float, n_pairs: int) -> float:
    """midas.f: standard error of a median, sqrt(pi/2) sigma / sqrt(N), with N / 4 because
    each coordinate is used a nominal 4 times, then times 3 "to be realistic" (the ad hoc
    factor of Blewitt et al. 2016 for correlated noise)."""
    return 3.0 * math.sqrt(math.pi / 2.0) * sigma_tilde / math.sqrt(n_pairs / 4.0)


def _daily_medians(t: np.ndarray, x: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """Median time and median position of each UTC day with data (t sorted)."""
    day = t.astype("datetime64[D]").astype(np.int64)
    order = np.lexsort((x, day))
    starts = np.concatenate([[0], np.nonzero(np.diff(day))[0] + 1])
    counts = np.diff(np.concatenate([starts, [day.size]]))
    lo, hi = starts + (counts - 1) // 2, starts + counts // 2
    xs = x[order]
    ns = t.astype(np.int64)
    t_mid = ((ns[lo] + ns[hi]) // 2).astype("datetime64[ns]")
    return t_mid, 0.5 * (xs[lo] + xs[hi])


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
    half = 0.5 * float(np.median(positive)) if positive.size else MIDAS_TOLERANCE_YR
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
    v, sigma_tilde, kept = _trimmed_median((x[j] - x[i]) / (yr[j] - yr[i]))
    n_sigma, sigma_tilde_s = kept, sigma_tilde
    days = np.unique(t.astype("datetime64[D]")).size
    if t.size > 1.5 * days:  # sub-daily: count one pair per day, at the daily scale
        td, xd = _daily_medians(t, x)
        yd = years_since(td, t[0])
        di, dj = _midas_pairs(yd, _segment_bounds(td, steps_used), sep, _tolerance(yd))
        _require_pairs(di.size, sep, yr, "daily pairs (sub-daily data count one per day)")
        _, sigma_tilde_s, n_sigma = _trimmed_median((xd[dj] - xd[di]) / (yd[dj] - yd[di]))
    sig = _midas_sigma(sigma_tilde_s, n_sigma)
    levels = _segment_levels(x - v * yr, bounds)
    resid = x - v * yr - np.repeat(levels, np.diff(bounds))
    return TrendResult(
        method="midas", velocity_m_per_yr=v, sigma_m_per_yr=sig,
        ci95_m_per_yr=_ci95(v, sig, math.inf), n_epochs=int(t.size), dof=math.inf,
        t_ref=t[0], t_first=t[0], t_last=t[-1], intercept_m=float(levels[0]),
        step_times=steps_used, step_offsets_m=np.diff(levels),
        residual_rms_m=float(np.sqrt(np.mean(resid ** 2))), n_pairs=kept,
        separation_yr=sep, n_pairs_sigma=int(n_sigma))


def _require_pairs(n_pairs: int, sep: float, yr: np.ndarray, what: str) -> None:
    if n_pairs < MIDAS_MIN_PAIRS:
        raise ValueError(
            f"MIDAS needs at least {MIDAS_MIN_PAIRS} {what} {sep * DAYS_PER_YEAR:.1f} days "
            f"apart within step-free stretches; these data give {n_pairs} (span "
            f"{(yr[-1] - yr[0]) * DAYS_PER_YEAR:.1f} days): use a longer series, fewer "
            f"steps or ols_velocity")


def _segment_levels(y: np.ndarray, bounds: np.ndarray) -> np.ndarray:
    """Median of ``y`` in each step-free segment (segments are non-empty)."""
    return np.array([np.median(y[lo:hi]) for lo, hi in zip(bounds[:-1], bounds[1:])])


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
    fit = _ls_fit(years_since(t), x, s, design, random_walk_m_per_sqrt_yr)
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


def vector_rate(rates, sigmas) -> tuple[float, float]:
    """Length of a velocity vector from its component rates and their 1-sigmas, corrected
    for noise, with its 1-sigma (any unit, the same for all).

    The plain length ``sqrt(sum v_i^2)`` of noisy components is biased upwards: its square
    exceeds the true one by ``sum sigma_i^2`` on average, so a point that does not move reads
    a speed of about its noise (the demo's stable rover: 0.22 mm/day in 3D, 80 mm/yr).  This
    returns ``sqrt(max(sum v_i^2 - sum sigma_i^2, 0))``, unbiased in the square; zero when
    the components are within their noise.  Its sigma is first-order propagation on the
    length (independent components), and the largest component sigma when the length is zero:
    what a level must be compared with, not the length alone."""
    v = np.asarray(rates, np.float64)
    s = np.asarray(sigmas, np.float64)
    squared = float(np.sum(v ** 2) - np.sum(s ** 2))
    length = float(np.sqrt(squared)) if squared > 0 else 0.0
    if length > 0:
        sigma = float(np.sqrt(np.sum((v * s) ** 2)) / np.sqrt(np.sum(v ** 2)))
    else:
        sigma = float(s.max())
    return length, sigma

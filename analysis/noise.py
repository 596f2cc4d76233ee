"""The noise of a GNSS position series and the least-squares fit that honours it: white plus
flicker noise (plus a given random walk), fitted to the residuals on a regular grid and
propagated exactly into the covariance of the fitted parameters.

Why it needs care: GNSS position noise is time-correlated ("coloured"); beside white noise it
has flicker noise, whose power grows as 1/frequency (Zhang et al. 1997, Mao et al. 1999,
Williams et al. 2004), so a formal least-squares sigma is too small by a factor of 5-10 for
multi-year series.  ``ls_fit`` is what ``analysis.trends`` (``ols_velocity``,
``acceleration``) fits with; ``NoiseModel`` describes the noise it found.  Apart from
``trends`` because it is a method of its own (the flicker filter and its spectrum, the noise
basis kept for a rover's other components, the residual semivariogram, the Satterthwaite
degrees of freedom), used there but not about velocities.

Times in years (``t_yr``), positions in metres.
"""

from __future__ import annotations

import math
import threading
from dataclasses import dataclass
from functools import lru_cache

import numpy as np

from analysis.stats import median
from analysis.timebase import DAYS_PER_YEAR

MIN_CI_DOF = 2.0  # Satterthwaite dof below 2 (a chi-square with its mode at 0) not trusted
_VARIOGRAM_LAGS = 20  # log-spaced lags at which the residual semivariogram is fitted
_VARIOGRAM_MAX_FRACTION = 0.25  # longest lag fitted: a quarter of the span
_MAX_GRID = 1 << 20  # the noise model's regular grid has at most this many cells
_MAX_FREQUENCIES = 1 << 15  # frequencies in the Satterthwaite integral


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
    step = median(positive) if positive.size else 1.0 / DAYS_PER_YEAR
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
class Fit:
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


def ls_fit(t_yr: np.ndarray, x: np.ndarray, sigma: np.ndarray | None,
            design: np.ndarray, random_walk_m_per_sqrt_yr: float = 0.0) -> Fit:
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
    return Fit(coef, cov, resid, noise, np.array(dof))


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

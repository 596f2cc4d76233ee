"""Issue 18, point 3: the faster least-squares noise model (analysis.trends) and MAD cleaning
(analysis.cleaning) give what the previous implementations gave.

The previous implementations are kept below, copied from the commit before the change
(2001b4e; the helpers they share with today's code are imported, those that changed are
copied), and run on random series with gaps, outages, outliers, irregular times, weights,
steps and seasonal terms.  The least-squares estimates themselves are the same to the last
bit but for summation order; the noise amplitudes, sigmas and degrees of freedom to 1e-8
(the new covariance of the semivariogram estimates sums cosines where the old one summed
products of sines: ~1e-11 apart); the outlier flags and running medians are identical.
Their speed is measured by benchmarks/bench_analysis.py (figures, not timed tests).
"""

from __future__ import annotations

import math
from dataclasses import dataclass

import numpy as np
import pytest

from analysis import cleaning, noise, stats, trends
from analysis.timebase import years_since

T0 = np.datetime64("2025-03-01T00:00", "ns")


# ------------------------------------------------- reference: trends.py before issue 18

def old_nnls(b, y):
    p = b.shape[1]
    best, best_rss = np.zeros(p), float(y @ y)
    for mask in range(1, 1 << p):
        cols = [k for k in range(p) if mask >> k & 1]
        sol, *_ = np.linalg.lstsq(b[:, cols], y, rcond=None)
        if np.all(sol >= 0):
            full = np.zeros(p)
            full[cols] = sol
            rss = float(np.sum((b @ full - y) ** 2))
            if rss < best_rss:
                best, best_rss = full, rss
    return best


OLD_COLOURED = ((noise._flicker_kernel, noise._flicker_density),)


@dataclass(frozen=True)
class OldFit:
    coef: np.ndarray
    cov: np.ndarray
    residuals: np.ndarray
    noise: trends.NoiseModel
    dof: np.ndarray


def old_estimator_rows(design, s2):
    sw = 1.0 / np.sqrt(s2)
    b = design * sw[:, None]
    scale = np.sqrt(np.sum(b * b, axis=0))
    scale[scale == 0] = 1.0
    b = b / scale
    normal = b.T @ b
    eig = np.linalg.eigvalsh(normal)
    if not eig[0] > 1e-10 * eig[-1]:
        raise ValueError("the model is not determined by these epochs (a step or seasonal "
                         "term without data to fit it): use fewer terms or more data")
    return np.linalg.solve(normal, b.T) / scale[:, None] * sw


def old_propagation(a, s2, grid, kernel_fns):
    a_grid = noise._on_grid(a, grid)
    k, m, kernels = [(a * s2) @ a.T], [(a * s2).T], []
    for kernel_fn in kernel_fns:
        kernel = kernel_fn(grid)
        gamma_a = noise._toeplitz_rows(kernel, a_grid)
        k.append(a_grid @ gamma_a.T)
        m.append(gamma_a[:, grid.index].T)
        kernels.append(kernel)
    return tuple(k), tuple(m), tuple(kernels)


def old_ls_fit(t_yr, x, sigma, design, random_walk_m_per_sqrt_yr=0.0):
    n, p = design.shape
    s2 = np.ones(n) if sigma is None else sigma * sigma
    a = old_estimator_rows(design, s2)
    coef = a @ x
    resid = x - design @ coef
    grid = noise._grid(t_yr)
    fitted = old_propagation(a, s2, grid, [fn for fn, _ in OLD_COLOURED])
    amp, dof_fn = old_fit_noise(resid, s2, design, grid, fitted)
    sign = np.array([1.0] + [-1.0] * len(OLD_COLOURED))
    cov = sum(c * s * k for c, s, k in zip(amp, sign, fitted[0]))
    known_rw = np.zeros((p, p))
    if random_walk_m_per_sqrt_yr:
        walk = noise._toeplitz_rows(noise._random_walk_kernel(grid), noise._on_grid(a, grid))
        known_rw = -random_walk_m_per_sqrt_yr ** 2 * (noise._on_grid(a, grid) @ walk.T)
    cov = cov + known_rw
    cov[0, :] = cov[:, 0] = np.nan
    dof = [np.nan] + [dof_fn(sign * np.array([k[i, i] for k in fitted[0]]), known_rw[i, i])
                      for i in range(1, p)]
    model = trends.NoiseModel(white_m=math.sqrt(amp[0] * float(np.mean(s2))),
                              variance_factor=float(amp[0]),
                              flicker_m_per_yr025=math.sqrt(amp[1]),
                              random_walk_m_per_sqrt_yr=float(random_walk_m_per_sqrt_yr),
                              grid_days=grid.step_yr * trends.DAYS_PER_YEAR)
    return OldFit(coef, cov, resid, model, np.array(dof))


def old_variogram_rows(resid, s2, design, grid, prop):
    n, p = design.shape
    k_all, m_all, kernels = prop
    lags = np.unique(np.rint(np.geomspace(
        1, max(1, int(grid.size * noise._VARIOGRAM_MAX_FRACTION)),
        noise._VARIOGRAM_LAGS)).astype(int))
    cells, rep = np.unique(grid.index, return_index=True)
    z = np.column_stack([design, *m_all, resid, s2])[rep]
    blocks = [slice(p * (c + 1), p * (c + 2)) for c in range(len(m_all))]
    rows = []
    for lag, count, gram, s2_sum in old_lag_grams(z, cells, grid.size, lags):
        dgdg = gram[:p, :p]
        proj = [-2.0 * np.trace(gram[b, :p]) + np.sum(k * dgdg) for b, k in zip(blocks, k_all)]
        white = 0.5 * s2_sum / count + 0.5 * proj[0]
        coloured = [kern[lag] - 0.5 * pr for kern, pr in zip(kernels, proj[1:])]
        rows.append((lag, count, 0.5 * gram[-1, -1], white, *coloured))
    return rows


def old_lag_grams(z, cells, size, lags):
    m = z.shape[1] - 1
    if size <= 4 * cells.size:
        dense = np.zeros((size, z.shape[1]))
        dense[cells] = z
        present = np.zeros(size)
        present[cells] = 1.0
        for lag in lags:
            both = present[lag:] * present[:-lag]
            count = int(both.sum())
            if count < 3:
                continue
            dz = dense[lag:, :m] - dense[:-lag, :m]
            gram = (dz * both[:, None]).T @ dz / count
            yield lag, count, gram, float(both @ (dense[lag:, m] + dense[:-lag, m]))
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
        yield lag, int(i.size), dz.T @ dz / i.size, float(z[i, m].sum() + z[j, m].sum())


def old_fit_noise(resid, s2, design, grid, prop):
    n, p = design.shape
    dof_white = float(n - p)
    rows = old_variogram_rows(resid, s2, design, grid, prop)
    ncomp = 1 + len(OLD_COLOURED)
    if len(rows) < ncomp:
        f = float(np.sum(resid * resid / s2)) / max(dof_white, 1.0)
        return np.array([f] + [0.0] * len(OLD_COLOURED)), lambda v, known=0.0: dof_white
    cols = [np.array(c, dtype=np.float64) for c in zip(*rows)]
    lag_used, npairs, emp, basis = cols[0], cols[1], cols[2], np.column_stack(cols[3:])
    weight = np.sqrt(npairs) / np.maximum(emp, 1e-300)
    amp = old_nnls(basis * weight[:, None], emp * weight)
    for _ in range(3):
        weight = np.sqrt(npairs) / np.maximum(basis @ amp, 1e-300 + 1e-12 * emp.max())
        amp = old_nnls(basis * weight[:, None], emp * weight)
    cov_amp = old_amplitude_covariance(amp, float(np.mean(s2)), grid.step_yr, lag_used,
                                       npairs, basis, weight)

    def dof(v, known=0.0):
        var_total = float(amp @ v) + known
        var_var = float(v @ cov_amp @ v)
        if var_var <= 0 or var_total <= 0:
            return dof_white
        return float(min(max(2.0 * var_total ** 2 / var_var, trends.MIN_CI_DOF), dof_white))

    return amp, dof


def old_amplitude_covariance(amp, mean_s2, step_yr, lags, npairs, basis, weight):
    nf = int(min(max(4 * lags.max(), 1024), noise._MAX_FREQUENCIES))
    nu = (np.arange(nf) + 0.5) / (2 * nf)
    density = amp[0] * mean_s2 + sum(c * dens(nu, step_yr)
                                     for c, (_, dens) in zip(amp[1:], OLD_COLOURED))
    s = np.sin(np.pi * np.outer(lags, nu)) ** 2
    cov_emp = 16.0 * (s * (density * density / (2 * nf))) @ s.T / np.sqrt(
        np.outer(npairs, npairs))
    m = np.linalg.pinv(basis * weight[:, None]) * weight
    return m @ cov_emp @ m.T


def old_student_t_quantile(p, dof):
    if math.isinf(dof):
        def upper_tail(q):
            return 0.5 * math.erfc(q / math.sqrt(2.0))
    else:
        def upper_tail(q):
            return stats._t_upper_tail(q, float(dof))
    tail = 1.0 - p
    lo, hi = 0.0, 1.0
    while upper_tail(hi) > tail:
        lo, hi = hi, 2.0 * hi
    while hi - lo > 1e-12 * hi:
        mid = 0.5 * (lo + hi)
        lo, hi = (mid, hi) if upper_tail(mid) > tail else (lo, mid)
    return 0.5 * (lo + hi)


# ------------------------------------------------ reference: cleaning.py before issue 18

def old_window_medians(lo, hi, gather, *, max_points=cleaning._MAX_WINDOW_POINTS):
    lo = np.asarray(lo, np.int64)
    count = np.asarray(hi, np.int64) - lo
    n = lo.size
    out = np.full(n, np.nan)
    used = np.clip(count, 0, max_points)
    width = int(used.max()) if n else 0
    if width == 0:
        return out
    rows_per_block = max(1, (1 << 21) // width)
    k = np.arange(width)
    for a in range(0, n, rows_per_block):
        b = min(n, a + rows_per_block)
        m = used[a:b, None]
        valid = k[None, :] < m
        step = np.maximum(count[a:b, None], 1)
        cols = lo[a:b, None] + (k[None, :] * step) // np.maximum(m, 1)
        cols = np.where(valid, cols, 0)
        values = np.where(valid, gather(np.arange(a, b)[:, None], cols), np.inf)
        mm = used[a:b]
        ok = mm > 0
        i1 = np.maximum((mm - 1) // 2, 0)
        i2 = np.maximum(mm // 2, 0)
        kth = np.unique(np.concatenate([i1, i2]))
        if kth.size <= 8:
            values = np.partition(values, kth, axis=1)
        else:
            values.sort(axis=1)
        r = np.arange(b - a)
        med = 0.5 * (values[r, i1] + values[r, i2])
        out[a:b] = np.where(ok, med, np.nan)
    return out


def old_mad_outliers(t, x_m, *, window_days=1.0, threshold=5.0, scale_window_days=10.0,
                     min_side_points=5, min_scale_m=0.0005):
    order, days, x = cleaning._prepare(t, x_m)
    out = np.zeros(np.shape(x_m), bool)
    n = days.size
    if n < min_side_points:
        return out
    spacing = cleaning._median_spacing_days(days)
    w = max(float(window_days), (2 * min_side_points - 2) * spacing)
    half = 0.5 * w
    i = np.arange(n)
    lo = np.searchsorted(days, days - half, "left")
    hi = np.searchsorted(days, days + half, "right")
    stride = max(1, int(np.median(hi - lo)) // (2 * cleaning._MAX_WINDOW_POINTS))
    a = np.unique(np.append(np.arange(0, n, stride), n - 1))
    lo_a, hi_a = lo[a], hi[a]
    ta = days[a]

    def values(rows, cols):
        return x[cols]

    def local_level(wlo, whi, slo, shi, split):
        m1, m2 = old_window_medians(slo, split, values), old_window_medians(split, shi, values)
        tau1 = cleaning._median_times(days, slo, split)
        tau2 = cleaning._median_times(days, split, shi)
        with np.errstate(invalid="ignore", divide="ignore"):
            slope = np.where((tau2 > tau1) & (split - slo >= 2) & (shi - split >= 2),
                             (m2 - m1) / (tau2 - tau1), 0.0)
        level = old_window_medians(
            wlo, whi, lambda rows, cols: x[cols] - slope[rows] * (days[cols] - ta[rows]))
        if stride == 1:
            return level
        ok = np.isfinite(level)
        return np.interp(days, ta[ok], level[ok]) if ok.any() else np.full(n, np.nan)

    before = np.searchsorted(days, ta - w, "left")
    after = np.searchsorted(days, ta + w, "right")
    level_c = local_level(lo_a, hi_a, lo_a, hi_a, (lo_a + hi_a) // 2)
    level_l = local_level(lo_a, a + 1, before, a + 1, lo_a)
    level_r = local_level(a, hi_a, a, after, hi_a)
    r_c = x - level_c
    res_c = np.where(hi - lo >= min_side_points, np.abs(r_c), np.inf)
    res_l = np.where(i + 1 - lo >= min_side_points, np.abs(x - level_l), np.inf)
    res_r = np.where(hi - i >= min_side_points, np.abs(x - level_r), np.inf)
    residual = np.minimum(np.minimum(res_c, res_l), res_r)
    scale = old_running_scale(days, np.abs(r_c), hi - lo >= min_side_points, w,
                              scale_window_days)
    scale = np.maximum(scale, min_scale_m)
    out[order] = np.isfinite(residual) & (residual > threshold * scale)
    return out


def old_running_scale(days, abs_res, usable, w, scale_window_days):
    r = abs_res[usable]
    dd = days[usable]
    if r.size == 0:
        return np.full(days.shape, np.nan)
    if scale_window_days is None:
        return np.full(days.shape, cleaning.MAD_TO_SIGMA * float(np.median(r)))
    sw = max(float(scale_window_days), 5.0 * w)
    anchors = np.arange(dd[0], dd[-1] + 0.5 * w, 0.5 * w)
    lo = np.searchsorted(dd, anchors - 0.5 * sw, "left")
    hi = np.searchsorted(dd, anchors + 0.5 * sw, "right")
    med = old_window_medians(lo, hi, lambda rows, cols: r[cols],
                             max_points=4 * cleaning._MAX_WINDOW_POINTS)
    ok = np.isfinite(med)
    if not ok.any():
        return np.full(days.shape, cleaning.MAD_TO_SIGMA * float(np.median(r)))
    return cleaning.MAD_TO_SIGMA * np.interp(days, anchors[ok], med[ok])


# ----------------------------------------------------------------------------- series

def rover_series(rng, kind: str):
    """Times and one displacement component: hourly with dropped epochs and outages,
    jittered and unsorted, daily over years, sparse irregular (a sparse noise grid), or a
    short one; with creep, flicker-like wander, 1 % outliers of 5 cm, a NaN or two."""
    if kind == "hourly":
        n, step = int(rng.integers(800, 4000)), 3600.0
        secs = np.arange(n) * step
        keep = rng.random(n) > 0.02
        start = int(rng.integers(0, n - 100))
        keep[start:start + int(rng.integers(24, 72))] = False
        secs = secs[keep]
    elif kind == "jittered":
        n = int(rng.integers(500, 3000))
        secs = np.arange(n) * 3600.0 + rng.normal(0, 90, n)
        secs = rng.permutation(secs)
    elif kind == "daily":
        secs = np.sort(rng.choice(int(3.5 * 365), int(rng.integers(400, 1000)),
                                  replace=False)) * 86400.0
    elif kind == "sparse":
        secs = np.sort(rng.uniform(0, 400 * 86400.0, int(rng.integers(300, 900))))
    else:  # short
        secs = np.arange(int(rng.integers(8, 14))) * 86400.0
    t = T0 + (secs * 1e9).astype(np.int64).astype("timedelta64[ns]")
    yr = secs / (365.25 * 86400.0)
    n = secs.size
    x = (0.012 * yr + 0.002 * rng.standard_normal(n)
         + 0.004 * np.cumsum(rng.standard_normal(n)) / np.sqrt(n))
    x[rng.random(n) < 0.01] += 0.05
    x[rng.integers(0, n, 2)] = np.nan
    return t, x


KINDS = ("hourly", "jittered", "daily", "sparse", "short")


def close(a, b, rtol):
    a, b = np.asarray(a, np.float64), np.asarray(b, np.float64)
    return np.array_equal(np.isnan(a), np.isnan(b)) and np.allclose(
        a[~np.isnan(a)], b[~np.isnan(b)], rtol=rtol, atol=0.0)


# ----------------------------------------------------------------------------- tests

@pytest.mark.parametrize("seed", range(6))
def test_the_least_squares_noise_model_gives_what_the_previous_one_gave(seed):
    """ols_velocity's fit (coefficients, covariance, noise amplitudes, Satterthwaite dof)
    against the previous implementation, for every kind of series and model: weights,
    steps, annual and semiannual terms, a known random walk; and the fit of a second
    component of the same epochs (the noise basis kept) is the one computed afresh."""
    rng = np.random.default_rng([18, seed])
    for kind in KINDS:
        t, x = rover_series(rng, kind)
        sigma = rng.uniform(0.001, 0.004, t.size) if seed % 2 else None
        steps = t[np.isfinite(x)][[t.size // 3]] if kind in ("hourly", "daily") else None
        annual = kind == "daily"
        rw = 0.001 if seed % 3 == 0 else 0.0
        tt, xx, s = trends._prepare(t, x, sigma)
        used = trends._usable_steps(tt, steps)
        yr = years_since(tt)
        design = np.column_stack([np.ones(tt.size), yr, trends._seasonal_columns(
            yr, annual, annual), (tt[:, None] >= used[None, :]).astype(np.float64)])
        old = old_ls_fit(yr, xx, s, design, rw)
        noise._BASES.clear()
        new = noise.ls_fit(yr, xx, s, design, rw)
        again = noise.ls_fit(yr, xx, s, design, rw)  # the basis kept from the call above
        assert noise._BASES and noise._BASES[0].matches(
            yr, None if s is None else s * s, design)
        for fit in (new, again):
            assert close(fit.coef, old.coef, 1e-12), kind
            assert close(fit.residuals, old.residuals, 1e-9), kind
            assert close(fit.cov, old.cov, 1e-8), (kind, fit.cov, old.cov)
            assert close(fit.dof, old.dof, 1e-8), (kind, fit.dof, old.dof)
            for name in ("white_m", "variance_factor", "flicker_m_per_yr025", "grid_days"):
                assert close(getattr(fit.noise, name), getattr(old.noise, name), 1e-8), name
        result = trends.ols_velocity(t, x, sigma, annual=annual, semiannual=annual,
                                     steps=steps, random_walk_m_per_sqrt_yr=rw)
        assert close(result.sigma_m_per_yr, math.sqrt(old.cov[1, 1]), 1e-8)
        assert close(result.velocity_m_per_yr, old.coef[1], 1e-12)


def test_acceleration_gives_what_it_gave():
    """The quadratic fit's noise model too, its basis kept for the next series of the same
    epochs."""
    rng = np.random.default_rng(7)
    for kind in ("hourly", "jittered", "daily"):
        t, x = rover_series(rng, kind)
        tt, xx, _ = trends._prepare(t, x)
        result = trends.acceleration(t, x)
        yr, _ = trends._years(tt, result.t_ref)
        design = np.column_stack([np.ones(tt.size), yr, 0.5 * yr * yr])
        assert noise._BASES[0].matches(years_since(tt), None, design)
        old = old_ls_fit(years_since(tt), xx, None, design)
        assert close(result.acceleration_m_per_yr2, old.coef[2], 1e-12)
        assert close(result.sigma_m_per_yr2, math.sqrt(old.cov[2, 2]), 1e-8)
        assert close(result.dof, old.dof[2], 1e-8)


def test_the_student_t_quantile_is_the_same_in_a_few_cdf_evaluations(monkeypatch):
    """Newton from the Cornish-Fisher approximation: the quantile bisection found, in at
    most 12 evaluations of the t CDF (10 for the Cauchy's 99.95 %, 3-5 usually; bisection
    took 40-50)."""
    calls = []
    real = stats._t_upper_tail

    def counted(q, dof):
        calls.append(q)
        return real(q, dof)

    monkeypatch.setattr(stats, "_t_upper_tail", counted)
    for p in (0.6, 0.9, 0.975, 0.995, 0.9995):
        for dof in (1.0, 2.0, 2.7, 5.0, 14.3, 30.0, 120.5, 1e4):
            expected = old_student_t_quantile(p, dof)
            calls.clear()
            got = stats.student_t_quantile.__wrapped__(p, dof)
            assert abs(got - expected) <= 1e-11 * expected, (p, dof, got, expected)
            assert len(calls) <= 12, (p, dof, len(calls))
    assert stats.student_t_quantile(0.975, math.inf) == pytest.approx(1.959963984540054,
                                                                      rel=1e-12)


@pytest.mark.parametrize("seed", range(4))
def test_mad_outliers_flag_the_epochs_the_previous_implementation_flagged(seed):
    rng = np.random.default_rng([181, seed])
    for kind in KINDS:
        t, x = rover_series(rng, kind)
        for kwargs in ({}, {"window_days": 3.0, "scale_window_days": None},
                       {"threshold": 3.5, "min_side_points": 3}):
            expected = old_mad_outliers(t, x, **kwargs)
            assert np.array_equal(cleaning.mad_outliers(t, x, **kwargs), expected), (kind,
                                                                                    kwargs)
    # minute data: windows longer than 151 epochs use an evenly spread sample of them
    t = T0 + np.arange(6000) * np.timedelta64(60, "s")
    x = 0.003 * rng.standard_normal(t.size)
    x[rng.random(t.size) < 0.01] += 0.04
    assert np.array_equal(cleaning.mad_outliers(t, x), old_mad_outliers(t, x))


def test_running_medians_are_those_of_the_previous_implementation():
    """Windows of every length (empty, one value, even and odd counts, sampled ones longer
    than max_points), plain and detrended per row."""
    rng = np.random.default_rng(5)
    values = rng.standard_normal(3000)
    days = np.cumsum(rng.uniform(0.01, 0.05, values.size))
    lo = rng.integers(0, values.size, 2000)
    hi = np.minimum(lo + rng.integers(0, 400, lo.size), values.size)
    slope = rng.normal(0, 0.1, lo.size)
    for max_points in (151, 40):
        plain = cleaning._window_medians(lo, hi, lambda rows, take: take(values),
                                         max_points=max_points)
        old = old_window_medians(lo, hi, lambda rows, cols: values[cols],
                                 max_points=max_points)
        assert np.array_equal(plain, old, equal_nan=True)
        tilted = cleaning._window_medians(
            lo, hi, lambda rows, take: take(values) - slope[rows] * take(days),
            max_points=max_points)
        old = old_window_medians(lo, hi, lambda rows, cols: values[cols] - slope[rows]
                                 * days[cols], max_points=max_points)
        assert np.array_equal(tilted, old, equal_nan=True)


def test_the_fast_median_is_numpys_bit_for_bit():
    """``stats.median`` replaces np.median in the analysis's hot paths (MIDAS's trimmed
    medians, MADs): the same number on odd and even lengths, ties, integers, huge and tiny
    values, NaN when any value is NaN or none is given (np.median warns there)."""
    rng = np.random.default_rng(31)
    for n in list(range(1, 80)) + [999, 1000, 4096]:
        for values in (rng.standard_normal(n) * 10.0 ** rng.integers(-9, 9),
                       rng.integers(-5, 5, n), np.round(rng.standard_normal(n), 1)):
            assert stats.median(values) == np.median(values)
            assert isinstance(stats.median(values), float)
        with_nan = rng.standard_normal(n)
        with_nan[rng.integers(n)] = np.nan
        assert math.isnan(stats.median(with_nan))
    assert math.isnan(stats.median(np.empty(0)))
    assert stats.median([[3.0, 1.0], [2.0, 5.0]]) == 2.5  # flattened, as np.median

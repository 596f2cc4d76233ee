"""Velocity estimators (analysis.trends), checked against what nobody on this project made:
NGL station LHAS (Lhasa, on the fast-moving Eurasian plate interior), and against series
with a known truth and realistic GNSS noise (white + flicker, seasonal terms, steps,
outliers), many times over, so that the stated 95% intervals are shown to hold 95% and to
be no wider than they need be.

Run with ``-s`` to see the figures (LHAS velocities, coverage, spreads).
"""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest

from analysis import stats, trends
from analysis.formats import read_tenv3
from analysis.geodesy import geodetic_to_enu, normalize_longitude
from analysis.timebase import DAYS_PER_YEAR

LHAS = Path("/work/shared/reference-data") / "LHAS.tenv3"
T0 = np.datetime64("2021-03-01T00:00", "ns")


# ----------------------------------------------------------------------------- helpers

def hourly(days: float, start=T0) -> np.ndarray:
    return start + np.arange(int(days * 24)) * np.timedelta64(1, "h")


def daily(days: int, start=T0) -> np.ndarray:
    return start + np.arange(days) * np.timedelta64(1, "D")


def years(t) -> np.ndarray:
    return (t - t[0]).astype(np.int64) / (86_400e9 * DAYS_PER_YEAR)


def flicker(rng, trials: int, n: int, amplitude: float, dt_yr: float) -> np.ndarray:
    """Flicker noise (power spectral density ~ 1/f), ``trials`` series of ``n`` epochs at once,
    by the spectral method: Gaussian Fourier coefficients scaled by f^-1/2 with random
    phases, inverse FFT over 4x the length (so the lowest frequencies are not periodic over
    the series), the first ``n`` samples kept.  Scaled so that its low-frequency spectrum
    is that of flicker of ``amplitude`` (m/yr^0.25) in the Williams (2003) convention at
    sampling ``dt_yr``; independent of the module's time-domain filter on purpose."""
    m = 1 << int(np.ceil(np.log2(4 * n)))
    f = np.fft.rfftfreq(m)
    scale = np.zeros_like(f)
    scale[1:] = f[1:] ** -0.5
    z = rng.standard_normal((trials, f.size)) + 1j * rng.standard_normal((trials, f.size))
    noise = np.fft.irfft(z * scale, m, axis=1)[:, :n]
    return noise * np.sqrt(m / (4 * np.pi)) * amplitude * dt_yr ** 0.25


def white_noise_sigmas(yr: np.ndarray, x: np.ndarray, design: np.ndarray
                       ) -> tuple[float, float]:
    """Rate sigma of plain least squares: formal (white noise, a-posteriori variance) and
    with the AR(1) effective-sample-size inflation (1 + rho) / (1 - rho) of the residuals'
    lag-1 autocorrelation, the two usual shortcuts this module does not take."""
    coef, *_ = np.linalg.lstsq(design, x, rcond=None)
    r = x - design @ coef
    s2 = r @ r / (x.size - design.shape[1])
    formal = np.sqrt(s2 * np.linalg.inv(design.T @ design)[1, 1])
    rho = (r[1:] @ r[:-1]) / (r @ r)
    return float(formal), float(formal * np.sqrt((1 + rho) / (1 - rho)))


# ---------------------------------------------------------------------- LHAS (real data)

@pytest.fixture(scope="module")
def lhas():
    series = read_tenv3(LHAS)
    lon = normalize_longitude(series["lon"])
    ref = (series["lat"][0], float(lon[0]), series["h"][0])
    east, north, up = geodetic_to_enu(series["lat"], lon, series["h"], ref)
    t = series["t"]
    # the antenna-height changes are the known steps (the column says 1995-08-23, 0 to
    # 0.058 m, plus one day at 0 on 2003-10-21)
    steps = t[1:][np.diff(series["antenna_m"]) != 0]
    return t, {"east": east, "north": north, "up": up}, steps


def test_lhas_both_estimators_find_the_plate_motion(lhas):
    t, enu, steps = lhas
    assert steps.size >= 1 and steps[0] == np.datetime64("1995-08-23T12:00", "ns")
    fits = {}
    for name in ("east", "north", "up"):
        ols = trends.ols_velocity(t, enu[name], annual=True, semiannual=True, steps=steps)
        midas = trends.midas_velocity(t, enu[name], steps=steps)
        fits[name] = ols, midas
        print(f"\nLHAS {name:5}: OLS {ols.describe()}, noise {ols.noise.describe()}, "
              f"dof {ols.dof:.0f}\n             MIDAS {midas.describe()}, {midas.n_pairs} "
              f"pairs {midas.separation_yr} yr apart")
    for name, expected in (("east", 46.0), ("north", 16.0)):
        ols, midas = fits[name]
        for fit in (ols, midas):
            assert abs(fit.velocity_mm_per_yr - expected) < 3.0
            assert 0.05 < fit.sigma_mm_per_yr < 1.5  # coloured noise: not the formal ~0.03
            assert fit.ci95_mm_per_yr[0] < fit.velocity_mm_per_yr < fit.ci95_mm_per_yr[1]
        assert abs(ols.velocity_mm_per_yr - midas.velocity_mm_per_yr) < 1.0
        assert ols.n_epochs == midas.n_epochs == t.size
        assert midas.separation_yr == 1.0 and midas.n_pairs > 4000
    # the up offset at the antenna change is the antenna height change, 58 mm
    ols_up = fits["up"][0]
    assert ols_up.step_times[0] == steps[0]
    assert abs(abs(ols_up.step_offsets_m[0]) - 0.058) < 0.005
    # and the model draws through the data
    for name in ("east", "north"):
        ols = fits[name][0]
        resid = enu[name] - ols.model(t)
        assert abs(np.sqrt(np.mean(resid ** 2)) - ols.residual_rms_m) < 1e-9
        assert ols.residual_rms_m < 0.006


def test_lhas_midas_shrugs_off_outliers_and_an_unknown_step(lhas):
    t, enu, steps = lhas
    rng = np.random.default_rng(2016)
    bad = rng.random(t.size) < 0.04  # 4% of epochs displaced by 3-8 cm
    middle = t[0] + (t[-1] - t[0]) / 2
    for name in ("east", "north"):
        x = enu[name]
        spoilt = (x + bad * rng.choice([-1.0, 1.0], t.size) * rng.uniform(0.03, 0.08, t.size)
                  + 0.05 * (t >= middle))  # a 5 cm step nobody was told about
        clean = trends.midas_velocity(t, x, steps=steps)
        dirty = trends.midas_velocity(t, spoilt, steps=steps)
        ols_clean = trends.ols_velocity(t, x, annual=True, semiannual=True, steps=steps)
        ols_dirty = trends.ols_velocity(t, spoilt, annual=True, semiannual=True, steps=steps)
        shift_midas = dirty.velocity_mm_per_yr - clean.velocity_mm_per_yr
        shift_ols = ols_dirty.velocity_mm_per_yr - ols_clean.velocity_mm_per_yr
        print(f"\nLHAS {name} with outliers and an unknown 5 cm step: MIDAS moves "
              f"{shift_midas:+.2f} mm/yr (sigma {clean.sigma_mm_per_yr:.2f}), OLS "
              f"{shift_ols:+.2f} mm/yr")
        assert abs(shift_midas) < 2.0 * clean.sigma_mm_per_yr
        assert abs(shift_ols) > 3.0


# ------------------------------------------------------- coverage with a known truth

def simulate(kind: str, trials: int, seed: int):
    """``trials`` series with a known rate: daily 5-year series (seasonal terms, white 1.5 mm
    + flicker 4 mm/yr^0.25) or hourly 60-120 day series (white 2.5 mm + flicker 6 mm/yr^0.25
    at hourly sampling, ~2.7 in daily terms), each with a known step of up to 8 mm and 5%
    of epochs missing; the MIDAS copy also has 3% outliers of 2-5 cm."""
    rng = np.random.default_rng(seed)
    if kind == "daily":
        n_max, dt, dt_yr = 1826, np.timedelta64(1, "D"), 1 / DAYS_PER_YEAR
        rate, white, amplitude = 0.005, 1.5e-3, 4e-3
        lengths = np.full(trials, n_max)
    else:
        n_max, dt, dt_yr = 120 * 24, np.timedelta64(1, "h"), 1 / (24 * DAYS_PER_YEAR)
        rate, white, amplitude = 0.0365, 2.5e-3, 6e-3  # 0.1 mm/day
        lengths = rng.integers(60 * 24, n_max + 1, trials)
    t = T0 + np.arange(n_max) * dt
    yr = years(t)
    x = rate * yr + white * rng.standard_normal((trials, n_max))
    x += flicker(rng, trials, n_max, amplitude, dt_yr)
    if kind == "daily":
        phase = rng.uniform(0, 2 * np.pi, (trials, 2))
        x += 3e-3 * np.sin(2 * np.pi * yr + phase[:, :1]) + 1e-3 * np.sin(
            4 * np.pi * yr + phase[:, 1:])
    step_at = t[(0.42 * lengths).astype(int)]
    x += rng.uniform(-8e-3, 8e-3, (trials, 1)) * (t[None, :] >= step_at[:, None])
    keep = (rng.random((trials, n_max)) > 0.05) & (np.arange(n_max) < lengths[:, None])
    outliers = rng.random((trials, n_max)) < 0.03
    spoilt = x + outliers * rng.choice([-1.0, 1.0], (trials, n_max)) * rng.uniform(
        0.02, 0.05, (trials, n_max))
    return t, x, spoilt, keep, step_at, rate


def coverage_and_spread(fits: list[tuple[float, float, float, float]], rate: float
                        ) -> tuple[float, float]:
    """Fraction of 95% intervals holding the truth, and the spread (standard deviation) of
    the errors in units of each fit's stated sigma: 1 for honest sigmas, 3 if they are three
    times too small, 1/3 if three times too large."""
    v, sigma, lo, hi = (np.array(c) for c in zip(*fits))
    return float(np.mean((lo <= rate) & (rate <= hi))), float(np.std((v - rate) / sigma))


# 300 trials: a calibrated 95% interval covers at least 93% of them with probability 0.96
# (binomial), one that really covers 90% does so with probability 0.05.  Requiring 95% of
# a finite number of trials would fail a calibrated interval half of the time.
TRIALS = 300
MIN_COVERAGE = 0.93


@pytest.mark.parametrize("kind", ["daily", "hourly"])
def test_stated_intervals_hold_the_true_rate(kind):
    t, x, spoilt, keep, step_at, rate = simulate(kind, TRIALS, seed=20160419)
    seasonal = kind == "daily"
    ols, midas, naive, ar1 = [], [], [], []
    for k in range(TRIALS):
        tk = t[keep[k]]
        fit = trends.ols_velocity(tk, x[k, keep[k]], annual=seasonal, semiannual=seasonal,
                                  steps=[step_at[k]])
        ols.append((fit.velocity_m_per_yr, fit.sigma_m_per_yr, *fit.ci95_m_per_yr))
        fit = trends.midas_velocity(tk, spoilt[k, keep[k]], steps=[step_at[k]])
        midas.append((fit.velocity_m_per_yr, fit.sigma_m_per_yr, *fit.ci95_m_per_yr))
        if k < 100:  # the shortcuts, for comparison
            yr = years(tk)
            cols = [np.ones(tk.size), yr, (tk >= step_at[k]).astype(float)]
            if seasonal:
                cols += [f(w * np.pi * yr) for w in (2, 4) for f in (np.cos, np.sin)]
            formal, inflated = white_noise_sigmas(yr, x[k, keep[k]], np.column_stack(cols))
            v = ols[k][0]
            naive.append((v, formal, v - 1.96 * formal, v + 1.96 * formal))
            ar1.append((v, inflated, v - 1.96 * inflated, v + 1.96 * inflated))
    results = {name: coverage_and_spread(fits, rate)
               for name, fits in (("OLS", ols), ("MIDAS", midas), ("white-noise OLS", naive),
                                  ("AR(1)-corrected OLS", ar1))}
    for name, (cover, spread) in results.items():
        print(f"\n{kind}: {name:20} covers {cover:.3f}, errors/sigma spread {spread:.2f}")
    cover, spread = results["OLS"]
    assert cover >= MIN_COVERAGE and 0.7 < spread < 1.3
    cover, spread = results["MIDAS"]
    assert cover >= MIN_COVERAGE and 1 / 3 < spread < 1.3  # MIDAS is conservative by design
    # the shortcuts fail this very test: the white-noise sigma is several times too small
    # and the AR(1) correction does not reach the flicker noise that sets the rate error
    assert results["white-noise OLS"][1] > 3.0 and results["white-noise OLS"][0] < 0.6
    assert results["AR(1)-corrected OLS"][0] < 0.8


def test_a_known_random_walk_widens_the_interval():
    rng = np.random.default_rng(7)
    t = daily(1500)
    x = 1.5e-3 * rng.standard_normal(t.size) + flicker(rng, 1, t.size, 4e-3, 1 / 365.25)[0]
    plain = trends.ols_velocity(t, x)
    walk = trends.ols_velocity(t, x, random_walk_m_per_sqrt_yr=1.5e-3)
    assert plain.velocity_m_per_yr == walk.velocity_m_per_yr
    assert walk.sigma_m_per_yr > 1.2 * plain.sigma_m_per_yr
    assert walk.noise.random_walk_m_per_sqrt_yr == 1.5e-3


# ------------------------------------------------------------------------ behaviour

def test_ols_recovers_a_noiseless_model_exactly():
    t = daily(900)
    yr = years(t)
    steps = np.array([t[300] - np.timedelta64(6, "h"), t[700]])
    x = (0.2 + 0.012 * yr + 0.003 * np.cos(2 * np.pi * yr) - 0.001 * np.sin(2 * np.pi * yr)
         + 0.0005 * np.sin(4 * np.pi * yr) + 0.004 * (t >= steps[0]) - 0.007 * (t >= steps[1]))
    fit = trends.ols_velocity(t, x, annual=True, semiannual=True, steps=steps)
    assert fit.velocity_m_per_yr == pytest.approx(0.012, abs=1e-12)
    assert fit.intercept_m == pytest.approx(0.2, abs=1e-12)
    assert np.allclose(fit.step_offsets_m, [0.004, -0.007], atol=1e-12)
    assert fit.annual_amplitude_m == pytest.approx(np.hypot(0.003, 0.001), abs=1e-12)
    assert fit.semiannual_amplitude_m == pytest.approx(0.0005, abs=1e-12)
    assert np.allclose(fit.model(t), x, atol=1e-12)
    assert fit.velocity_mm_per_yr == pytest.approx(12.0)
    assert fit.velocity_mm_per_day == pytest.approx(12.0 / 365.25)
    assert fit.sigma_mm_per_day == pytest.approx(fit.sigma_mm_per_yr / 365.25)
    # another reference epoch moves the intercept, not the line
    later = trends.ols_velocity(t, x, annual=True, semiannual=True, steps=steps,
                                t_ref=t[450])
    assert later.velocity_m_per_yr == pytest.approx(0.012, abs=1e-12)
    assert np.allclose(later.model(t), x, atol=1e-12)


def test_weights_scale_out_and_steps_outside_the_data_are_ignored():
    rng = np.random.default_rng(3)
    t = hourly(30)
    sigma = rng.uniform(1e-3, 4e-3, t.size)
    x = 1e-4 * np.arange(t.size) + sigma * rng.standard_normal(t.size)
    a = trends.ols_velocity(t, x, sigma)
    b = trends.ols_velocity(t, x, 10 * sigma)  # only the variance factor changes
    assert b.velocity_m_per_yr == pytest.approx(a.velocity_m_per_yr, rel=1e-9)
    assert b.sigma_m_per_yr == pytest.approx(a.sigma_m_per_yr, rel=1e-6)
    assert b.noise.variance_factor == pytest.approx(a.noise.variance_factor / 100, rel=1e-6)
    outside = [t[0] - np.timedelta64(1, "D"), t[-1] + np.timedelta64(1, "h")]
    for fit, ref in ((trends.ols_velocity(t, x, sigma, steps=outside), a),
                     (trends.midas_velocity(t, x, steps=outside),
                      trends.midas_velocity(t, x))):
        assert fit.step_times.size == 0 and fit.step_offsets_m.size == 0
        assert fit.velocity_m_per_yr == ref.velocity_m_per_yr
    # two steps with no epoch between them are one offset
    twin = [t[100] - np.timedelta64(20, "m"), t[100] - np.timedelta64(10, "m")]
    assert np.array_equal(trends.ols_velocity(t, x, steps=twin).step_times, twin[:1])


def test_nans_are_ignored_and_unsorted_epochs_are_sorted():
    rng = np.random.default_rng(4)
    t = hourly(40)
    x = 2e-4 * np.arange(t.size) + 2e-3 * rng.standard_normal(t.size)
    holes = rng.random(t.size) < 0.1
    x_nan = np.where(holes, np.nan, x)
    order = rng.permutation(t.size)
    for estimator in (trends.ols_velocity, trends.midas_velocity):
        ref = estimator(t[~holes], x[~holes])
        with_nans = estimator(t, x_nan)
        shuffled = estimator(t[order], x_nan[order])
        for fit in (with_nans, shuffled):
            assert fit.n_epochs == int((~holes).sum())
            assert fit.velocity_m_per_yr == pytest.approx(ref.velocity_m_per_yr, rel=1e-12)
            assert fit.sigma_m_per_yr == pytest.approx(ref.sigma_m_per_yr, rel=1e-9)
    with pytest.raises(ValueError, match="must pair up"):
        trends.ols_velocity(t, x[:-1])


def test_too_few_epochs_are_refused_with_the_reason():
    t = hourly(0.25)  # 6 epochs
    x = np.linspace(0, 1e-3, t.size)
    with pytest.raises(ValueError, match=r"needs at least 7 epochs.*got 6"):
        trends.ols_velocity(t, x, steps=[t[2], t[4]])
    with pytest.raises(ValueError, match=r"MIDAS needs at least 10 pairs"):
        trends.midas_velocity(t, x)
    with pytest.raises(ValueError, match="at least 6 epochs"):
        trends.acceleration(t[:5], x[:5])
    with pytest.raises(ValueError, match="two or more distinct times"):
        trends.midas_velocity(np.repeat(t[:1], 20), np.zeros(20))
    # hourly data: MIDAS counts one pair per day for its uncertainty
    with pytest.raises(ValueError, match="daily pairs"):
        trends.midas_velocity(hourly(8), np.zeros(8 * 24))


def test_midas_on_a_short_hourly_series():
    rng = np.random.default_rng(5)
    t = hourly(45)
    x = 3e-4 * np.arange(t.size) + 2e-3 * rng.standard_normal(t.size)  # 7.2 mm/day
    jump = t[500]
    x[500:] += 0.02
    fit = trends.midas_velocity(t, x, steps=[jump])
    span = (t[-1] - jump).astype(np.int64) / 86_400e9  # the longest step-free stretch
    assert fit.separation_yr * DAYS_PER_YEAR == pytest.approx(span / 2, rel=1e-6)
    assert fit.velocity_mm_per_day == pytest.approx(7.2, abs=3 * fit.sigma_mm_per_day)
    assert fit.n_pairs_sigma < fit.n_pairs / 10  # the uncertainty counts days, not hours
    assert fit.step_offsets_m[0] == pytest.approx(0.02, abs=0.002)
    assert np.sqrt(np.mean((x - fit.model(t)) ** 2)) == pytest.approx(fit.residual_rms_m)
    assert fit.dof == np.inf
    lo, hi = fit.ci95_m_per_yr
    assert (hi - lo) / 2 == pytest.approx(1.959964 * fit.sigma_m_per_yr, rel=1e-6)


def test_midas_pair_selection_is_symmetric_and_one_year_apart():
    t = daily(3 * 365)
    keep = np.ones(t.size, bool)
    keep[400:470] = False  # a 70-day gap: its partners are the next unused epochs
    t = t[keep]
    x = 0.01 * years(t)
    fit = trends.midas_velocity(t, x)
    assert fit.separation_yr == 1.0
    assert fit.velocity_m_per_yr == pytest.approx(0.01, abs=1e-12)
    assert fit.sigma_m_per_yr == pytest.approx(0.0, abs=1e-15)
    yr = years(t)
    i, j = trends._midas_pairs(yr, np.array([0, t.size]), 1.0, trends._tolerance(yr))
    forward = i.size // 2
    assert np.all(j > i) and np.all(yr[j] - yr[i] >= 1.0 - 0.001)
    exact = yr[j] - yr[i] < 1.0 + 0.001
    assert exact.mean() > 0.8
    fwd = set(zip(i[:forward], j[:forward]))
    assert len(fwd) == forward  # no pair twice in one direction
    # across the gap, the forward pairs take distinct partners
    gap_pairs = j[:forward][~exact[:forward]]
    assert np.unique(gap_pairs).size == gap_pairs.size


def selectpair_reference(t: np.ndarray, tol: float) -> list[tuple[int, int]]:
    """midas.f's ``selectpair`` (MIDAS4, no steps) transcribed literally, 0-based."""
    m, k, out = t.size, -1, []
    for i in range(m):
        if t[i] > t[m - 1] + tol - 1.0:
            break
        for j in range(i + 1, m):
            if k < j:
                k = j
            fdt = t[j] - t[i] - 1.0
            if fdt < -tol:
                continue
            if fdt < tol:
                i2 = j
            else:
                i2 = k
                if k == m - 1:
                    k = -1
                k += 1
            out.append((i, i2))
            break
    return out


def test_midas_pairs_are_those_of_midas_f():
    rng = np.random.default_rng(10)
    for _ in range(12):
        days = np.arange(int(365.25 * rng.uniform(1.05, 2.0)))
        keep = rng.random(days.size) > rng.uniform(0.0, 0.5)
        for _ in range(rng.integers(1, 4)):  # and a few long gaps
            a = rng.integers(0, days.size)
            keep[a:a + rng.integers(5, 90)] = False
        t = (days[keep] + 0.5) / 365.25
        i, j = trends._forward_pairs(t, 1.0, 0.001)
        assert list(zip(i.tolist(), j.tolist())) == selectpair_reference(t, 0.001)


def test_student_t_quantiles_match_the_tables():
    table = {1: 12.7062047, 2: 4.30265273, 3: 3.18244631, 5: 2.57058184, 10: 2.22813885,
             30: 2.04227246, np.inf: 1.95996398}
    for dof, q in table.items():
        assert stats.student_t_quantile(0.975, dof) == pytest.approx(q, abs=1e-7)


# ---------------------------------------------------------- sliding, acceleration

def test_sliding_velocity_shows_a_change_of_rate():
    rng = np.random.default_rng(8)
    t = hourly(60)
    d = np.arange(t.size) / 24.0
    x = np.where(d < 30, 0.002 * d, 0.06 + 0.005 * (d - 30)) + 0.002 * rng.standard_normal(
        t.size)  # 2 mm/day, then 5 mm/day
    s = trends.sliding_velocity(t, x, window_days=5.0, step_days=2.5)
    centre_days = (s.t - t[0]).astype(np.int64) / 86_400e9
    early, late = centre_days < 27, centre_days > 33
    assert early.sum() >= 8 and late.sum() >= 8
    assert np.all(np.abs(s.velocity_mm_per_day[early] - 2.0) < 0.3)
    assert np.all(np.abs(s.velocity_mm_per_day[late] - 5.0) < 0.3)
    assert np.all(s.n_epochs[early | late] == 120)
    assert centre_days[-1] == pytest.approx(d[-1] - 2.5)  # the last window ends at the end
    # each window is the straight line through its epochs (end - 5 days, end]
    for k in (0, 7, -1):
        inside = (d > centre_days[k] - 2.5 + 1e-9) & (d <= centre_days[k] + 2.5 + 1e-9)
        slope, _ = np.polyfit(d[inside], x[inside], 1)
        assert s.velocity_mm_per_day[k] == pytest.approx(slope * 1e3, rel=1e-9)
        assert s.n_epochs[k] == inside.sum()
    assert np.all(s.sigma_mm_per_day[early | late] > 0)
    # MIDAS windows agree, and empty windows are NaN
    m = trends.sliding_velocity(t, x, window_days=14.0, step_days=14.0, method="midas")
    assert m.t.size == 4 and m.method == "midas"
    assert abs(m.velocity_mm_per_day[0] - 2.0) < 0.3 and abs(m.velocity_mm_per_day[-1] - 5) < 0.3
    gap = trends.sliding_velocity(np.concatenate([t[:240], t[-240:]]),
                                  np.concatenate([x[:240], x[-240:]]), window_days=5.0)
    assert np.isnan(gap.velocity_m_per_yr).sum() >= 5


def test_acceleration_recovers_a_known_quadratic():
    rng = np.random.default_rng(9)
    t = hourly(90)
    d = np.arange(t.size) / 24.0
    accel_mm_day2 = 0.004
    x = 1e-3 * (0.5 * d + 0.5 * accel_mm_day2 * d ** 2) + 0.002 * rng.standard_normal(t.size)
    fit = trends.acceleration(t, x)
    assert fit.acceleration_mm_per_day2 == pytest.approx(accel_mm_day2,
                                                         abs=3 * fit.sigma_mm_per_day2)
    assert fit.sigma_mm_per_day2 < accel_mm_day2 / 5
    assert fit.acceleration_mm_per_yr2 == pytest.approx(fit.acceleration_mm_per_day2 * 365.25 ** 2)
    assert fit.ci95_m_per_yr2[0] < fit.acceleration_m_per_yr2 < fit.ci95_m_per_yr2[1]
    # the velocity is at the mean epoch: 0.5 + 0.004 * 45 mm/day
    assert fit.velocity_m_per_yr * 1e3 / 365.25 == pytest.approx(0.68, abs=0.05)
    straight = trends.acceleration(t, 1e-3 * 0.5 * d + 0.002 * rng.standard_normal(t.size))
    assert abs(straight.acceleration_m_per_yr2) < 3 * straight.sigma_m_per_yr2


def test_the_length_of_noisy_rates_is_corrected_for_their_noise():
    """Issue 16: the 3D velocity as the plain length of three noisy component rates read the
    demo's stable rover at 0.22 mm/day.  Monte Carlo, fixed seed: the corrected length is
    unbiased in the square where the plain one is not, and far smaller for a point at rest."""
    from analysis.trends import vector_rate

    rng = np.random.default_rng(16)
    sigma = np.array([1.0, 1.0, 2.0])
    for truth in (np.zeros(3), np.array([3.0, 4.0, 0.0]) * 2):
        rates = truth + rng.normal(size=(20000, 3)) * sigma
        plain = np.sqrt(np.sum(rates ** 2, axis=1))
        corrected = np.array([vector_rate(r, sigma)[0] for r in rates])
        true_length = float(np.linalg.norm(truth))
        assert np.mean(plain ** 2) - true_length ** 2 == pytest.approx(np.sum(sigma ** 2),
                                                                       rel=0.05)
        if true_length:
            assert abs(np.mean(corrected) - true_length) < 0.05 * true_length
            assert np.mean(plain) - true_length > 0.2
        else:
            # 0.54: corrected per component, so no component hides another's motion
            # (issue 28; tests/test_vector_rates.py); the corrected sum read 0.34
            assert np.mean(corrected) < 0.6 * np.mean(plain)
            assert np.median(corrected) < 1.0  # at rest: most readings within one sigma
    assert vector_rate([0.0, 0.0, 0.0], [0.1, 0.2, 0.3]) == (0.0, 0.3)


def _same_trend(a, b) -> bool:
    """Two TrendResults field for field (arrays compared by value)."""
    from dataclasses import fields
    for f in fields(a):
        va, vb = getattr(a, f.name), getattr(b, f.name)
        if isinstance(va, np.ndarray) or isinstance(vb, np.ndarray):
            if not np.array_equal(va, vb):
                return False
        elif va != vb and not (va != va and vb != vb):  # NaN equals NaN here
            return False
    return True


@pytest.mark.parametrize("case", ["hourly", "hourly-steps", "daily", "nan-in-one", "short"])
def test_midas_velocities_share_pairs_and_give_each_series_its_own_result(case):
    """``midas_velocities`` (the pipeline's five components at once) gives, for every
    series, exactly ``midas_velocity``'s result, or the same refusal: with steps, daily
    and hourly sampling, a value missing in one series only, and too short a record."""
    rng = np.random.default_rng(len(case))
    t = daily(400) if case == "daily" else hourly(3 if case == "short" else 60)
    t = t[rng.random(t.size) > 0.05]
    steps = t[[t.size // 3]] if case == "hourly-steps" else None
    series = {name: 0.001 * rng.standard_normal(t.size) + rate * years(t)
              for name, rate in (("east", 0.02), ("north", -0.01), ("up", 0.0),
                                 ("along", 0.015), ("across", 0.003))}
    if case == "nan-in-one":
        series["north"][rng.choice(t.size, 9, replace=False)] = np.nan
    together = trends.midas_velocities(t, series, steps)
    assert list(together) == list(series)
    for name, x in series.items():
        try:
            alone = trends.midas_velocity(t, x, steps)
        except ValueError as err:
            assert isinstance(together[name], ValueError) and str(together[name]) == str(err)
            assert case == "short"
            continue
        assert _same_trend(together[name], alone), name

"""One windowed least-squares line (analysis.lines) and one home for the normal and t
quantiles (analysis.stats), held to the three line fits and the three quantiles they
replaced (copied below as they were before issue 26).

The old line fits were not all the same arithmetic: the inverse velocity's summed each
window's deviations directly (two passes, exact but for rounding), the sliding velocity's
and the alarm rule's used cumulative sums over the whole series, which lose digits once
the series is long compared with a window (up to 1e-5 of a slope on three years of hourly
data, measured).  The new fit agrees with the exact one to ~1e-13 of a slope's sigma and
with the cumulative-sum ones to within their own rounding, which the tests bound by how
far those were from the exact fit.
"""

from __future__ import annotations

import math

import numpy as np
import pytest

from analysis import alarms, stats, trends
from analysis.inverse_velocity import inverse_velocity
from analysis.lines import window_lines
from analysis.timebase import DAYS_PER_YEAR

# ------------------------------------------------------------ reference: before issue 26

def old_inverse_velocity_lines(days: np.ndarray, x: np.ndarray, lo: np.ndarray, hi: np.ndarray,
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


def old_sliding_lines(days: np.ndarray, x: np.ndarray, lo: np.ndarray, hi: np.ndarray
                  ) -> tuple[np.ndarray, np.ndarray]:
    """Least-squares slope (m/yr) and white-noise sigma of each window [lo, hi), all at once
    from cumulative sums (times and positions centred first, for precision)."""
    d = days - days.mean()
    y = x - x.mean()

    def window_sum(values: np.ndarray) -> np.ndarray:
        c = np.concatenate([[0.0], np.cumsum(values)])
        return c[hi] - c[lo]

    n = (hi - lo).astype(np.float64)
    st, sy = window_sum(d), window_sum(y)
    with np.errstate(divide="ignore", invalid="ignore"):
        stt = window_sum(d * d) - st * st / n
        sty = window_sum(d * y) - st * sy / n
        syy = window_sum(y * y) - sy * sy / n
        slope = sty / stt
        rss = np.maximum(syy - slope * sty, 0.0)
        sigma = np.sqrt(rss / (n - 2) / stt)
    bad = ~(stt > 1e-12 * np.maximum(n, 1.0))  # a window of coincident times
    slope[bad] = np.nan
    sigma[bad] = np.nan
    return slope * DAYS_PER_YEAR, sigma * DAYS_PER_YEAR


def old_trailing_lines(days: np.ndarray, x: np.ndarray, window: float, min_epochs: int,
                    min_span: float) -> tuple[np.ndarray, ...]:
    """For each epoch i, the least-squares line through the epochs in (days[i] - window,
    days[i]]: its value at days[i], slope, and their formal sigmas (white noise, from the
    scatter about the line).  Prefix sums about the series' middle: O(n)."""
    n = days.size
    lo = np.searchsorted(days, days - window, side="right")
    hi = np.arange(1, n + 1)
    d = days - days[n // 2] if n else days
    cs = [np.concatenate([[0.0], np.cumsum(v)]) for v in
          (np.ones(n), d, d * d, x, d * x, x * x)]
    s1, st, stt, sx, stx, sxx = (c[hi] - c[lo] for c in cs)
    with np.errstate(divide="ignore", invalid="ignore"):
        tm, xm = st / s1, sx / s1
        ctt = stt - s1 * tm * tm
        slope = (stx - s1 * tm * xm) / ctt
        rss = np.maximum(sxx - s1 * xm * xm - slope * (stx - s1 * tm * xm), 0.0)
        s2 = rss / np.maximum(s1 - 2.0, 1.0)
        value = xm + slope * (d - tm)
        sigma_slope = np.sqrt(s2 / ctt)
        sigma_value = np.sqrt(s2 * (1.0 / s1 + (d - tm) ** 2 / ctt))
    span = days - days[lo]
    ok = (s1 >= min_epochs) & (span >= min_span) & (ctt > 0)
    nan = np.full(n, np.nan)
    return (np.where(ok, value, nan), np.where(ok, slope, nan),
            np.where(ok, sigma_value, nan), np.where(ok, sigma_slope, nan))


def old_warning_t_quantile(p: float, dof: float) -> float:
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


def old_alarms_normal_quantile(p: float) -> float:
    """Phi^-1(p), by bisection on erf (numpy/math only; exact to 1e-10)."""
    lo, hi = -10.0, 10.0
    for _ in range(80):
        mid = 0.5 * (lo + hi)
        if 0.5 * (1.0 + math.erf(mid / math.sqrt(2.0))) < p:
            lo = mid
        else:
            hi = mid
    return 0.5 * (lo + hi)


# ----------------------------------------------------------------------------- helpers

def series(seed: int, days: float, step_days: float = 1 / 24, gap: bool = True):
    """Hourly-ish positions (m): an offset, a trend, an acceleration, white noise, jittered
    times and (``gap``) a 5-day outage; days since the first epoch."""
    rng = np.random.default_rng(seed)
    d = np.arange(0.0, days, step_days)
    d = d + rng.uniform(0.0, 0.1 * step_days, d.size)
    if gap:
        d = d[(d < 0.4 * days) | (d > 0.4 * days + 5.0)]
    x = 0.03 + 4e-4 * d + 2e-6 * d * d + 0.003 * rng.standard_normal(d.size)
    return d, x


def trailing(d: np.ndarray, window: float) -> tuple[np.ndarray, np.ndarray]:
    return np.searchsorted(d, d - window, side="right"), np.arange(1, d.size + 1)


def close_in_sigmas(new: np.ndarray, old: np.ndarray, sigma: np.ndarray, tol: float) -> bool:
    """Same NaNs, and finite values within ``tol`` of their sigma (of their size where there
    is no sigma: a line through two epochs)."""
    if not np.array_equal(np.isnan(new), np.isnan(old)):
        return False
    ok = np.isfinite(old)
    scale = np.where(np.isfinite(sigma), sigma, np.abs(old))
    return bool(np.all(np.abs(new[ok] - old[ok]) <= tol * scale[ok]))


# ----------------------------------------------------------------------------- lines

@pytest.mark.parametrize("seed, days, window", [(1, 60, 4.0), (2, 365, 2.0), (3, 1000, 1.0),
                                                (4, 30, 7.0)])
def test_window_lines_match_the_exact_two_pass_fit(seed, days, window):
    """Non-overlapping windows (the inverse velocity's) and trailing ones (the alarm
    rule's): slope, its sigma and the mean time as the old inverse velocity's direct sums
    gave them, to 1e-12 of the sigma, at any length of series."""
    d, x = series(seed, days)
    for lo, hi in (trailing(d, window), (np.arange(0, d.size - 5, 5), np.arange(5, d.size, 5))):
        new = window_lines(d, x, lo, hi)
        slope, sigma, mean_t = old_inverse_velocity_lines(d, x, lo, hi)
        assert close_in_sigmas(new.slope, slope, sigma, 1e-12)
        assert close_in_sigmas(new.slope_sigma, sigma, sigma, 1e-12)
        assert np.allclose(new.t_mean, mean_t, rtol=0, atol=1e-12 * window)
        assert np.array_equal(new.n, hi - lo)


def test_inverse_velocity_is_what_it_was():
    """The inverse velocity, its sigma and times, end to end (only the line fit changed)."""
    from analysis.timebase import finite_in_time_order  # noqa: F401  (the same input path)
    d, x = series(5, 90)
    t = np.datetime64("2026-01-01", "ns") + np.rint(d * 86_400e9).astype(np.int64).astype(
        "timedelta64[ns]")
    iv = inverse_velocity(t, x, smoothing_days=4.0)
    ns = (t - t[0]).astype(np.int64)
    w = int(4 * 86_400e9)
    ends = ns[-1] - w * np.arange((ns[-1] - w) // w + 1)[::-1]
    lo, hi = np.searchsorted(ns, ends - w, "right"), np.searchsorted(ns, ends, "right")
    keep = (hi - lo) >= 48
    slope, sigma, mean_t = old_inverse_velocity_lines(ns / 86_400e9, x, lo[keep], hi[keep])
    assert close_in_sigmas(iv.velocity_mm_per_day, 1000 * slope, 1000 * sigma, 1e-12)
    assert close_in_sigmas(iv.velocity_sigma_mm_per_day, 1000 * sigma, 1000 * sigma, 1e-12)
    old_t = t[0] + np.rint(mean_t * 86_400e9).astype(np.int64).astype("timedelta64[ns]")
    assert np.abs((iv.t - old_t).astype(np.int64)).max() <= 1  # ns


@pytest.mark.parametrize("seed, days, window", [(6, 60, 7.0), (7, 365, 30.0), (8, 200, 3.0)])
def test_sliding_velocity_is_what_it_was_within_the_old_rounding(seed, days, window):
    """``trends.sliding_velocity``: the old cumulative sums over the whole series were off
    the exact fit by their rounding; the new values are at least as close to the exact
    ones, and equal the old to within that rounding (and 1e-12 of the sigma)."""
    d, x = series(seed, days)
    t = np.datetime64("2026-01-01", "ns") + np.rint(d * 86_400e9).astype(np.int64).astype(
        "timedelta64[ns]")
    sv = trends.sliding_velocity(t, x, window)
    days_ = (t - t[0]).astype(np.int64).astype(np.float64) / 86_400e9
    ends = trends._window_ends(days_, window, window / 2)
    lo = np.searchsorted(days_, ends - window, side="right")
    hi = np.searchsorted(days_, ends, side="right")
    old_v, old_s = old_sliding_lines(days_, x, lo, hi)
    exact, exact_s, _ = old_inverse_velocity_lines(days_, x, lo, hi)
    exact, exact_s = exact * DAYS_PER_YEAR, exact_s * DAYS_PER_YEAR
    few = (hi - lo) < 10
    old_v[few] = old_s[few] = exact[few] = exact_s[few] = np.nan
    old_error = np.nanmax(np.abs(old_v - exact) / exact_s)
    assert close_in_sigmas(sv.velocity_m_per_yr, exact, exact_s, max(1e-12, 0.0) + 1e-12)
    assert close_in_sigmas(sv.velocity_m_per_yr, old_v, exact_s, old_error + 1e-12)
    assert close_in_sigmas(sv.sigma_m_per_yr, old_s, exact_s, 1e-9)


@pytest.mark.parametrize("seed, days", [(9, 60), (10, 400)])
def test_alarm_trailing_lines_are_what_they_were_within_the_old_rounding(seed, days):
    """The alarm rule's trailing displacement and velocity at every epoch, with their
    sigmas: equal to the old to within the old cumulative sums' own rounding, measured
    against the exact fit (1e-12 of the sigma where that rounding was smaller)."""
    d, x = series(seed, days)
    for window, min_epochs, min_span in ((1.0, 3, 0.25), (7.0, 10, 3.5)):
        new = alarms._trailing_lines(d, x, window, min_epochs, min_span,
                                     np.zeros(d.size, np.int64))
        old = old_trailing_lines(d, x, window, min_epochs, min_span)
        lo, hi = trailing(d, window)
        exact, exact_s, _ = old_inverse_velocity_lines(d, x, lo, hi)
        ok = np.isfinite(old[1])
        old_error = float(np.max(np.abs(old[1] - exact)[ok] / exact_s[ok]))
        exact = np.where(ok, exact, np.nan)  # the rule's own minimum epochs and span
        assert close_in_sigmas(new[1], exact, exact_s, 1e-12)  # slope: the exact fit
        for k, sigma in ((0, old[2]), (1, old[3]), (2, old[2]), (3, old[3])):
            assert close_in_sigmas(new[k], old[k], sigma, max(1e-12, 10 * old_error)), k


def test_window_lines_edge_cases():
    d = np.array([0.0, 0.0, 0.0, 1.0, 2.0, 3.0])
    x = np.array([1.0, 2.0, 3.0, 4.0, 5.0, 6.0])
    lines = window_lines(d, x, np.array([0, 0, 3, 2, 4]), np.array([3, 6, 5, 2, 6]))
    assert np.isnan(lines.slope[0]) and np.isnan(lines.slope_sigma[0])  # coincident times
    assert lines.slope[2] == pytest.approx(1.0) and np.isnan(lines.slope_sigma[2])  # 2 epochs
    assert lines.n[3] == 0 and np.isnan(lines.slope[3]) and np.isnan(lines.t_mean[3])  # empty
    assert lines.slope[4] == pytest.approx(1.0) and lines.value_at(np.array(3.0))[4] == \
        pytest.approx(6.0)
    empty = window_lines(np.empty(0), np.empty(0), np.empty(0, int), np.empty(0, int))
    assert empty.slope.size == 0


# ----------------------------------------------------------------------------- quantiles

def test_student_t_quantiles_match_the_tables():
    for p, dof, expected in [(0.975, 1, 12.7062), (0.975, 6, 2.4469), (0.975, 10, 2.2281),
                             (0.995, 3, 5.8409), (0.95, 20, 1.7247), (0.975, 1000, 1.9623)]:
        assert stats.student_t_quantile(p, dof) == pytest.approx(expected, abs=2e-4)


def test_the_forecasts_t_quantile_is_what_it_was():
    """The forecast used the old early-warning module's Simpson-rule quantile (documented
    to ~1e-6); the two agree to 1e-11 over the forecast's range (95 %, 7 to 700 dof; 4e-12
    measured, the old rule's integration error)."""
    for dof in (1, 3, 7, 10.5, 20, 57, 100, 250, 700):
        for p in (0.9, 0.95, 0.975, 0.995):
            old = old_warning_t_quantile(p, dof)
            assert stats.student_t_quantile(p, dof) == pytest.approx(old, rel=1e-11, abs=0)


def test_the_alarm_rules_normal_quantile_is_what_it_was():
    """``AlarmRule.z``: the same to 1e-13 (the trend module's was only good to 1e-12)."""
    for p in (0.5, 0.6, 0.9, 0.95, 0.975, 0.99, 0.995, 0.999, 0.9995):
        assert stats.normal_quantile(p) == pytest.approx(old_alarms_normal_quantile(p),
                                                         rel=1e-13, abs=1e-15)
        assert alarms.AlarmRule(confidence=p).z == stats.normal_quantile(p)
    assert stats.normal_quantile(0.975) == 1.959963984540054
    assert stats.normal_quantile(0.5) == 0.0 and stats.normal_quantile(0.025) == \
        -stats.normal_quantile(0.975)
    assert stats.student_t_quantile(0.99, math.inf) == stats.normal_quantile(0.99)

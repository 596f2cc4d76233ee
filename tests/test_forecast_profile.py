"""The failure forecast's profile (``analysis.forecast._Profiler``) computed from suffix sums
gives what whitening the model's columns per onset gave (the first version, kept below as
it was before the change, its column generalised from alpha = 2 to any Voight exponent for
issue 28), and so does the whole forecast.

The new version sums products in another order, over segments between onsets, and writes
the column as a difference from the first epoch (log((tf - t0) / (tf - t)) at alpha = 2,
((tf - t0)^p - (tf - t)^p) / p otherwise, through expm1): residual sums of squares and
amplitudes agree to 1e-9 relative wherever they are finite, and the fits admitted (finite)
are the same.  Speed is measured by benchmarks/bench_forecast.py and
benchmarks/bench_many_rovers.py (figures, not timed tests)."""

from __future__ import annotations

import sys
from pathlib import Path

import numpy as np
import pytest

from analysis import forecast

sys.path.insert(0, str(Path(__file__).resolve().parent.parent / "benchmarks"))
from bench_forecast import forecast as pipeline_forecast
from bench_forecast import slope_series


def old_profile(t, y, phi, ta_grid, tf_grid, p=0.0):
    """``forecast._profile`` before issue 18 (commit 5098632), its column log((tf - ta) /
    (tf - max(t, ta))) generalised to Voight's ((tf - ta)^p - (tf - max(t, ta))^p) / p
    (p = (alpha - 2) / (alpha - 1); the log at p = 0); ``p`` a number or one per tf."""
    _whiten = forecast._whiten
    p = np.broadcast_to(np.asarray(p, float), tf_grid.shape)[:, None]
    yw = _whiten(y, phi)
    one = _whiten(np.ones_like(t), phi)
    rss = np.full((ta_grid.size, tf_grid.size), np.inf)
    bb = np.full((ta_grid.size, tf_grid.size), np.nan)
    rss_step = np.full(ta_grid.size, np.inf)
    eps = 1e-9
    for i, ta in enumerate(ta_grid):
        h = _whiten(np.minimum(t - ta, 0.0), phi)
        tm = np.maximum(t, ta)
        with np.errstate(divide="ignore", invalid="ignore"):
            left, right = tf_grid[:, None] - ta, tf_grid[:, None] - tm[None, :]
            g = np.where(p == 0.0, np.log(left / right),
                         (left ** p - right ** p) / np.where(p == 0.0, 1.0, p))
        g = _whiten(g, phi)
        base = np.stack([one, h])
        a11 = base @ base.T
        a11[1, 1] += eps * (1.0 + a11[1, 1])
        a12 = g @ base.T
        a22 = np.einsum("ij,ij->i", g, g)
        r1 = base @ yw
        r2 = g @ yw
        inv11 = np.linalg.inv(a11)
        k = a12 @ inv11
        s = a22 - np.einsum("ij,ij->i", k, a12)
        num = r2 - k @ r1
        with np.errstate(divide="ignore", invalid="ignore"):
            b = num / s
        rss0 = float(yw @ yw - r1 @ inv11 @ r1)
        r = rss0 - np.where(s > 0, num * b, 0.0)
        valid = (s > 0) & (b > 0)
        rss[i] = np.where(valid, np.maximum(r, 0.0), np.inf)
        bb[i] = np.where(valid, b, np.nan)
        st = _whiten(np.maximum(t - ta, 0.0), phi)
        xs = np.stack([one, h, st])
        m = xs @ xs.T + eps * np.diag([0.0, 1.0 + xs[1] @ xs[1], 0.0])
        coef = np.linalg.solve(m, xs @ yw)
        rss_step[i] = float(yw @ yw - coef @ (xs @ yw))
    return rss, bb, rss_step


def binned_slope(seed: int, horizon: float, motion: str):
    """6-hour bins of a synthetic slope (accelerating, or the same noise on steady creep or
    at rest), as ``fit_failure`` makes them."""
    t, x, _ = slope_series(seed, 0, horizon)
    ns = t.astype(np.int64)
    days = (ns - ns[0]) / 86_400e9
    if motion != "accelerating":
        x = x - np.polyval(np.polyfit(days, x, 1), days)  # the noise left
        x = x + (0.0005 * days if motion == "creep" else 0.0)
    tb, yb, _ = forecast.bin_series(ns, x * 1000.0)
    return tb, yb


def grids(tb, rng, onset_before_data: bool):
    span = tb[-1] - tb[0]
    ta = np.linspace(tb[0], tb[-1] - max(4.0, 0.05 * span), forecast.ONSET_CANDIDATES)
    ta[3] = tb[7]  # an onset exactly at an epoch
    if onset_before_data:
        ta[0] = tb[0] - 1.5
    lead = np.geomspace(0.01, 2.0 * 365.0, forecast.LEAD_GRID)
    return ta, tb[-1] + 0.1 + lead


@pytest.mark.parametrize("seed", range(4))
@pytest.mark.parametrize("motion", ["accelerating", "creep", "rest"])
@pytest.mark.parametrize("alpha", [2.0, 1.6, 2.4])
def test_the_profile_is_what_whitening_per_onset_gave(seed, motion, alpha):
    rng = np.random.default_rng(seed)
    tb, yb = binned_slope(seed, (30.0, 14.0, 7.0, 3.0)[seed], motion)
    keep = rng.random(tb.size) > 0.05  # dropped bins: irregular spacing
    t, y = tb[keep], yb[keep]
    rho = (0.0, 0.3, 0.7, 0.95)[seed]
    phi = np.concatenate([[0.0], rho ** (np.diff(t) / forecast.BIN_DAYS)])
    ta, tf = grids(t, rng, onset_before_data=seed % 2 == 1)
    p = forecast._exponent(alpha)
    new, old = forecast._profile(t, y, phi, ta, tf, p), old_profile(t, y, phi, ta, tf, p)
    for got, want in zip(new, old):
        assert np.array_equal(np.isfinite(got), np.isfinite(want))
        ok = np.isfinite(want)
        assert ok.any()
        np.testing.assert_allclose(got[ok], want[ok], rtol=1e-9, atol=1e-9 * np.abs(want[ok]).max())


def test_one_given_onset_profiles_as_before():
    tb, yb = binned_slope(5, 7.0, "accelerating")
    phi = np.concatenate([[0.0], 0.5 ** (np.diff(tb) / forecast.BIN_DAYS)])
    ta, tf = np.array([tb[40] + 0.01]), tb[-1] + np.geomspace(0.01, 60.0, 64)
    for got, want in zip(forecast._profile(tb, yb, phi, ta, tf), old_profile(tb, yb, phi, ta, tf)):
        np.testing.assert_allclose(got, want, rtol=1e-9)


def test_an_exponent_per_failure_time_profiles_as_before():
    """The bisection over alpha gives each failure time its own exponent."""
    tb, yb = binned_slope(6, 3.0, "accelerating")
    phi = np.concatenate([[0.0], 0.6 ** (np.diff(tb) / forecast.BIN_DAYS)])
    ta, tf = grids(tb, np.random.default_rng(6), onset_before_data=False)
    p = forecast._exponent(np.random.default_rng(7).uniform(1.5, 2.5, tf.size))
    p[::7] = 0.0  # alpha = 2 among them
    got = forecast._profiles(tb, yb, phi, ta, tf, p[None, :])
    want = old_profile(tb, yb, phi, ta, tf, p)
    for g, w in zip((got[0][0], got[1][0], got[2]), want):
        ok = np.isfinite(w)
        assert np.array_equal(np.isfinite(g), ok) and ok.any()
        np.testing.assert_allclose(g[ok], w[ok], rtol=1e-9, atol=1e-9 * np.abs(w[ok]).max())


class OldProfiler:
    """``forecast._Profiler`` with every sum from ``old_profile``."""

    def __init__(self, t, y, phi, ta_grid):
        self.args = (t, y, phi, ta_grid)
        self.rss_step = None

    def logs(self, tf_grid):
        return tf_grid

    def sums(self, tf_grid, exponents):
        out = [old_profile(*self.args, tf_grid, p) for p in exponents]
        self.rss_step = out[0][2]
        return np.stack([o[0] for o in out]), np.stack([o[1] for o in out])


@pytest.mark.parametrize("trial", range(6))
def test_the_pipeline_forecast_is_what_it_was(trial, monkeypatch):
    """The forecast a creeping or accelerating rover gets (supported or refused, and why;
    failure time and interval) is the first version's."""
    t, x, _ = slope_series(11, trial, (14.0, 7.0, 3.0)[trial % 3])
    if trial >= 3:  # steady creep: refused
        days = (t - t[0]) / np.timedelta64(1, "D")
        x = x - np.polyval(np.polyfit(days, x, 1), days) + 0.0007 * days
    new = pipeline_forecast(t, x)
    monkeypatch.setattr(forecast, "_Profiler", OldProfiler)
    old = pipeline_forecast(t, x)
    assert (new.supported, new.reason) == (old.supported, old.reason)
    if old.supported:
        for a, b in [(new.failure_time, old.failure_time), *zip(new.interval, old.interval)]:
            assert abs(a - b) <= np.timedelta64(1, "s"), (a, b)
    assert trial >= 3 or old.supported  # the accelerating slopes are forecast at all

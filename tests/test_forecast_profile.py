"""The failure forecast's profile (``analysis.forecast._profile``) computed from suffix sums
gives what whitening the model's columns per onset gave (the first version, kept below as
it was before the change), and so does the whole forecast.

The new version sums products in another order and writes log((tf - ta) / (tf - t)) as a
difference of two logs from the first epoch: residual sums of squares and amplitudes agree
to 1e-9 relative wherever they are finite, and the fits admitted (finite) are the same.
Speed is measured by benchmarks/bench_many_rovers.py (figures, not timed tests)."""

from __future__ import annotations

import sys
from pathlib import Path

import numpy as np
import pytest

from analysis import forecast

sys.path.insert(0, str(Path(__file__).resolve().parent.parent / "benchmarks"))
from bench_forecast import forecast as pipeline_forecast  # noqa: E402
from bench_forecast import slope_series  # noqa: E402


def old_profile(t, y, phi, ta_grid, tf_grid):
    """``forecast._profile`` before issue 18 (commit 5098632)."""
    _whiten = forecast._whiten
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
            g = np.log((tf_grid[:, None] - ta) / (tf_grid[:, None] - tm[None, :]))
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
def test_the_profile_is_what_whitening_per_onset_gave(seed, motion):
    rng = np.random.default_rng(seed)
    tb, yb = binned_slope(seed, (30.0, 14.0, 7.0, 3.0)[seed], motion)
    keep = rng.random(tb.size) > 0.05  # dropped bins: irregular spacing
    t, y = tb[keep], yb[keep]
    rho = (0.0, 0.3, 0.7, 0.95)[seed]
    phi = np.concatenate([[0.0], rho ** (np.diff(t) / forecast.BIN_DAYS)])
    ta, tf = grids(t, rng, onset_before_data=seed % 2 == 1)
    new, old = forecast._profile(t, y, phi, ta, tf), old_profile(t, y, phi, ta, tf)
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


@pytest.mark.parametrize("trial", range(6))
def test_the_pipeline_forecast_is_what_it_was(trial, monkeypatch):
    """The forecast a creeping or accelerating rover gets (supported or refused, and why;
    failure time and interval) is the first version's."""
    t, x, _ = slope_series(11, trial, (14.0, 7.0, 3.0)[trial % 3])
    if trial >= 3:  # steady creep: refused
        days = (t - t[0]) / np.timedelta64(1, "D")
        x = x - np.polyval(np.polyfit(days, x, 1), days) + 0.0007 * days
    new = pipeline_forecast(t, x)
    monkeypatch.setattr(forecast, "_profile", old_profile)
    old = pipeline_forecast(t, x)
    assert (new.supported, new.reason) == (old.supported, old.reason)
    if old.supported:
        for a, b in [(new.failure_time, old.failure_time), *zip(new.interval, old.interval)]:
            assert abs(a - b) <= np.timedelta64(1, "s"), (a, b)
    assert trial >= 3 or old.supported  # the accelerating slopes are forecast at all

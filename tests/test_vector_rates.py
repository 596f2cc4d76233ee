"""2D and 3D rates corrected for noise that do not hide motion (issue 28, point 7).

The user's cases, from the demo: the noise-corrected 3D current velocity of the rover
"Illgraben GNSS creep 02", creeping 24 mm/yr, read 0.000 ± 0.200 mm/day while its horizontal
rate read 0.064 (the vertical's noise, subtracted from the sum of the squares, cancelled the
horizontal motion), and the velocity chart's last-7-days line contradicted its own 7-day
windows.  The formula is checked through both of its callers (``trends.vector_rate``, one
vector; ``alarms.noise_corrected_length``, element-wise at every epoch), by Monte Carlo with
fixed seeds, and on a creeping rover's whole analysis (hourly epochs as the reference
server makes them: 25 mm/yr along a slope, up -0.3 x along, white noise at the epochs'
reported sigmas).
"""

from __future__ import annotations

import numpy as np
import pytest

from analysis import alarms, trends
from analysis.figures import velocity_figure
from analysis.pipeline import RECENT_WINDOW_DAYS, AnalysisOptions, analyze_rover
from devmon_sync.server.gnss import enu_to_geodetic

START = np.datetime64("2026-01-01T00:00", "s")


def _scalar(rates, sigmas) -> tuple[float, float]:
    return trends.vector_rate(rates, sigmas)


def _elementwise(rates, sigmas) -> tuple[float, float]:
    length, sigma = alarms.noise_corrected_length([np.array([r]) for r in rates],
                                                  [np.array([s]) for s in sigmas])
    return float(length[0]), float(sigma[0])


LENGTH = pytest.mark.parametrize("length", [_scalar, _elementwise], ids=["vector_rate", "alarms"])


# ----------------------------------------------------------------------------- the rule

@LENGTH
def test_the_vertical_noise_does_not_hide_a_horizontal_creep(length):
    """Creep 02's last-7-days rates in the demo (mm/day): east -0.075 ± 0.051, north -0.069
    ± 0.060, up -0.030 ± 0.200.  The horizontal is resolved; the 3D rate must not read
    less than it, let alone zero."""
    rates, sigmas = [-0.075, -0.069, -0.030], [0.051, 0.060, 0.200]
    horizontal, _ = length(rates[:2], sigmas[:2])
    rate_3d, sigma_3d = length(rates, sigmas)
    assert horizontal == pytest.approx(np.sqrt(0.075**2 - 0.051**2 + 0.069**2 - 0.060**2))
    assert rate_3d >= horizontal > 0.06, (rate_3d, horizontal)
    assert sigma_3d < 0.2  # the sigma of a length along the measured motion


@LENGTH
@pytest.mark.parametrize("significant", [0, 1, 2])
def test_a_component_beyond_twice_its_noise_always_shows(length, significant):
    """One component at 2 sigma, the others at rest, with the others' noise up to 3 times
    larger: the length is at least that component's own corrected size."""
    sigmas = np.array([0.05, 0.06, 0.2])
    rng = np.random.default_rng(28 + significant)
    for _ in range(200):
        rates = rng.normal(size=3) * sigmas
        rates[significant] = rng.choice([-1, 1]) * rng.uniform(2.0, 3.0) * sigmas[significant]
        own = np.sqrt(rates[significant] ** 2 - sigmas[significant] ** 2)
        assert length(rates, sigmas)[0] >= own - 1e-12, (rates, sigmas)
        if significant < 2:
            assert length(rates[:2], sigmas[:2])[0] >= own - 1e-12, (rates, sigmas)


@LENGTH
def test_3d_is_never_below_the_horizontal(length):
    rng = np.random.default_rng(7)
    for _ in range(500):
        sigmas = rng.uniform(0.02, 0.3, 3)
        rates = rng.normal(size=3) * sigmas * rng.uniform(0, 3)
        assert length(rates, sigmas)[0] >= length(rates[:2], sigmas[:2])[0], (rates, sigmas)


def test_a_point_at_rest_reads_near_zero_and_a_creep_reads_its_size():
    """Monte Carlo, sigmas 1, 1, 2.5 (east, north, up, as hourly GNSS noise has them).  At
    rest, the plain length reads the noise (2.5 on average); the corrected one reads zero
    about a third of the time, its 1-sigma interval holds the true zero about as often as
    a 1-sigma interval should (68 %), and it passes 2.33 sigma (the alarms' 99 % one-sided
    test) about 2 % of the time.  A creep at about twice the noise
    per horizontal component (true 3D length 3.07): the corrected length reads it within
    5 % on average; correcting the sum instead read it 13-17 % short."""
    rng = np.random.default_rng(16)
    sigmas = np.array([1.0, 1.0, 2.5])
    at_rest = rng.normal(size=(20000, 3)) * sigmas
    plain = np.sqrt(np.sum(at_rest ** 2, axis=1))
    length, sigma = alarms.noise_corrected_length(list(at_rest.T), list(np.broadcast_to(
        sigmas[:, None], (3, 20000))))
    assert np.mean(length == 0) > 0.25
    assert np.mean(length) < 0.6 * np.mean(plain)
    assert np.median(length) < 0.5 * sigmas.max()
    assert np.mean(length <= sigma) > 0.6
    assert np.mean(length > 2.33 * sigma) < 0.03
    truth = np.array([2.0, 2.0, -1.2])
    moving = truth + rng.normal(size=(20000, 3)) * sigmas
    length, _ = alarms.noise_corrected_length(list(moving.T), list(np.broadcast_to(
        sigmas[:, None], (3, 20000))))
    assert np.mean(length) == pytest.approx(np.linalg.norm(truth), rel=0.05)


def test_the_sigma_is_first_order_and_the_largest_at_zero():
    rates, sigmas = np.array([3.0, 4.0, 0.0]), np.array([0.1, 0.2, 0.3])
    length, sigma = trends.vector_rate(rates, sigmas)
    assert length == pytest.approx(np.sqrt(9 - 0.01 + 16 - 0.04))
    assert sigma == pytest.approx(np.sqrt((3 * 0.1) ** 2 + (4 * 0.2) ** 2) / 5.0)
    assert trends.vector_rate([0.05, -0.1, 0.2], [0.1, 0.2, 0.3]) == (0.0, 0.3)
    value, spread = alarms.noise_corrected_length(  # a window without data: NaN
        [np.array([np.nan, 0.0]), np.array([0.1, 0.0])], [np.array([0.1, 0.1]),
                                                          np.array([0.2, np.nan])])
    assert np.isnan(value).all() and np.isnan(spread).all()


# ----------------------------------------------------------------------------- a creeping rover

def creep_epochs(days: int = 90, seed: int = 2) -> dict:
    """Hourly epochs of a rover creeping 25 mm/yr towards azimuth 227 deg (creep 02's) and
    sinking 0.3 mm per mm, with white noise at the reported sigmas (the reference server's
    creep scenario: 1.2 mm horizontal, 2.8 mm up)."""
    rng = np.random.default_rng(seed)
    hours = np.arange(days * 24)
    along = 0.025 * hours / (24 * 365.25)
    az = np.radians(227.0)
    sigma = np.array([0.00126, 0.00114, 0.00276])
    enu = [along * np.sin(az), along * np.cos(az), -0.3 * along]
    e, n, u = (c + s * rng.standard_normal(hours.size) for c, s in zip(enu, sigma))
    lat, lon, eh = enu_to_geodetic(46.3, 7.6, 1200.0, e, n, u)
    m = hours.size
    return {"ts": START + hours.astype("timedelta64[h]").astype("timedelta64[s]"),
            "lat": lat, "lon": lon, "eh": eh, "sde": np.full(m, sigma[0]),
            "sdn": np.full(m, sigma[1]), "sdu": np.full(m, sigma[2]),
            "q": np.ones(m, np.int64), "ns": np.full(m, 18), "ar": np.full(m, 20.0),
            "base_station_id": np.ones(m, np.int64)}


@pytest.fixture(scope="module")
def creep():
    return analyze_rover(creep_epochs(), serial_number="CREEP02", options=AnalysisOptions(),
                         sampling_period_s=3600.0)


def test_a_creeping_rover_s_lengths_never_hide_a_resolved_component(creep):
    """At every epoch the alarms evaluate: 3D >= horizontal, and where a component's 7-day
    velocity is beyond twice its sigma, both lengths that contain it are at least its own
    corrected size."""
    est = creep.estimates
    h, _ = alarms.component_series(est, "velocity", "horizontal")
    d3, _ = alarms.component_series(est, "velocity", "3d")
    ok = np.isfinite(h) & np.isfinite(d3)
    assert ok.sum() > 1500
    assert np.all(d3[ok] >= h[ok] - 1e-12), np.mean(d3[ok] < h[ok])
    for name in ("east", "north", "up"):
        v = est.velocity_m_per_day[name] * 1e3
        s = est.velocity_sigma_m_per_day[name] * 1e3
        beyond = ok & (np.abs(v) >= 2 * s)
        own = np.sqrt(v[beyond] ** 2 - s[beyond] ** 2)
        assert np.all(d3[beyond] >= own - 1e-12), (name, np.mean(d3[beyond] < own))
        if name != "up":
            assert np.all(h[beyond] >= own - 1e-12), (name, np.mean(h[beyond] < own))
    recent = creep.summary()["recent_velocity_mm_per_day"]
    assert recent["3d"][0] >= recent["horizontal"][0]


def _direction(analysis) -> np.ndarray:
    """The chart's direction, worked out here: from the reference to the mean of the last
    day's displacement."""
    d = analysis.displacement
    last = d.t >= d.t[-1] - np.timedelta64(1, "D")
    vec = np.array([np.mean(c[last]) for c in (d.east_m, d.north_m, d.up_m)])
    return vec / np.linalg.norm(vec)


def test_the_chart_s_last_7_days_line_is_its_own_last_7_day_window(creep):
    """The velocity chart draws 7-day windows along the direction of motion; its
    last-7-days line is the current velocity in that same direction, over the same window
    ending at the same epoch, so it sits on the last window; the summary's current
    component velocities give the same number."""
    s = creep.sliding
    assert s.window_days == RECENT_WINDOW_DAYS  # a 90-day record: the chart's windows are 7 days
    fig = velocity_figure(creep)
    recent = next(a for a in fig.axes[0].get_lines() if a.get_gid() == "recent:velocity")
    window = next(a for a in fig.axes[0].get_lines() if a.get_gid() == "data:velocity")
    last_window = float(np.asarray(window.get_ydata())[-1])
    assert last_window == pytest.approx(float(s.velocity_mm_per_day[-1]))
    assert np.allclose(recent.get_ydata(), last_window, rtol=1e-9), (recent.get_ydata(),
                                                                      last_window)
    x = np.asarray(recent.get_xdata())
    end = creep.displacement.t[-1]
    assert x[-1] == end and x[0] == end - np.timedelta64(int(RECENT_WINDOW_DAYS * 86400), "s")
    summary = creep.summary()["recent_velocity_mm_per_day"]
    along = sum(u * summary[c][0] for u, c in zip(_direction(creep), ("east", "north", "up")))
    assert along == pytest.approx(last_window, rel=1e-9)
    assert "along the motion" in recent.get_label()

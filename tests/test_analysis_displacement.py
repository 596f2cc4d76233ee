"""Displacement from a chosen reference: components, lengths, direction, slope axes."""

from __future__ import annotations

import numpy as np
import pytest
from pyproj import Transformer

from analysis.displacement import (Reference, along_across, displacement_enu,
                                   largest_disagreement)

LAT0, LON0, H0 = 46.55, 7.98, 2100.0
ECEF = Transformer.from_crs("EPSG:4979", "EPSG:4978", always_xy=True)
GEO = Transformer.from_crs("EPSG:4978", "EPSG:4979", always_xy=True)


def positions(e, n, u):
    """Geodetic positions of local offsets from (LAT0, LON0, H0), through pyproj's ECEF
    (independent of analysis.geodesy)."""
    x0, y0, z0 = ECEF.transform(LON0, LAT0, H0)
    p, lam = np.radians(LAT0), np.radians(LON0)
    x = x0 - np.sin(lam) * e - np.sin(p) * np.cos(lam) * n + np.cos(p) * np.cos(lam) * u
    y = y0 + np.cos(lam) * e - np.sin(p) * np.sin(lam) * n + np.cos(p) * np.sin(lam) * u
    z = z0 + np.cos(p) * n + np.sin(p) * u
    lon, lat, h = GEO.transform(x, y, z)
    return np.asarray(lat), np.asarray(lon), np.asarray(h)


def hourly(days: int) -> np.ndarray:
    return np.datetime64("2026-01-01T00:00", "ns") + np.arange(days * 24) * np.timedelta64(1, "h")


def test_components_lengths_and_direction_of_a_known_motion():
    t = hourly(10)
    k = np.arange(t.size) / t.size
    e, n, u = 0.30 * k, -0.40 * k, -0.12 * k  # 0.5 m horizontal towards 143.13 degrees
    d = displacement_enu(t, *positions(e, n, u), Reference.parse("first"))
    assert np.allclose(d.east_m, e, atol=1e-7) and np.allclose(d.north_m, n, atol=1e-7)
    assert np.allclose(d.up_m, u, atol=1e-7)
    assert d.horizontal_m[-1] == pytest.approx(np.hypot(e[-1], n[-1]), abs=1e-7)
    assert d.length_3d_m[-1] == pytest.approx(np.sqrt(e[-1] ** 2 + n[-1] ** 2 + u[-1] ** 2),
                                              abs=1e-7)
    assert d.direction_deg[-1] == pytest.approx(np.degrees(np.arctan2(0.3, -0.4)) % 360, abs=1e-5)
    assert np.isnan(d.direction_deg[0])  # no motion at the reference: no direction
    along, across = d.along_across(143.130102)
    assert along[-1] == pytest.approx(0.5 * k[-1], abs=1e-6)
    assert abs(across[-1]) < 1e-6


def test_along_and_across_signs():
    along, across = along_across([1.0, 0.0], [0.0, 1.0], 90.0)  # azimuth east
    assert np.allclose(along, [1.0, 0.0]) and np.allclose(across, [0.0, -1.0])
    along, across = along_across([0.0], [1.0], 0.0)  # azimuth north, motion north
    assert along[0] == pytest.approx(1.0) and across[0] == pytest.approx(0.0)


def test_references_first_date_and_window():
    t = hourly(4)
    rng = np.random.default_rng(1)
    e = 0.001 * rng.standard_normal(t.size) + 0.01 * np.arange(t.size) / 24  # 10 mm/day
    lat, lon, h = positions(e, np.zeros_like(e), np.zeros_like(e))
    first = displacement_enu(t, lat, lon, h, Reference.parse("first"))
    assert first.east_m[0] == 0.0 and first.reference.describe() == "first epoch"
    on_day2 = displacement_enu(t, lat, lon, h, Reference.parse("2026-01-02T00:20"))
    assert on_day2.east_m[24] == pytest.approx(0.0, abs=1e-9)  # nearest epoch: 00:00
    window = displacement_enu(t, lat, lon, h, Reference.parse("2026-01-01..2026-01-01"))
    assert np.mean(window.east_m[:24]) == pytest.approx(0.0, abs=1e-9)
    assert window.reference.kind == "window"
    # Day 1 averages to 4.8 mm, day 4 to 34.8 mm at 10 mm/day: 30 mm apart, noise averaged out
    assert np.mean(window.east_m[72:]) == pytest.approx(0.030, abs=0.0005)


def test_the_default_reference_is_the_mean_of_the_first_day():
    """Issue 16: one epoch's noise entered every displacement (bench_alarms: 18.5 % of the
    months of points at rest at the 10 mm alert).  The default is the first 24 h's mean:
    its noise is that of one epoch over the square root of the day's epochs."""
    t = hourly(4)
    rng = np.random.default_rng(2)
    e = 0.003 * rng.standard_normal(t.size)
    d = displacement_enu(t, *positions(e, np.zeros_like(e), np.zeros_like(e)))
    assert d.reference.kind == "start" and d.reference.describe() == "mean of the first 24 h"
    day = t <= t[0] + np.timedelta64(24, "h")
    assert np.mean(d.east_m[day]) == pytest.approx(0.0, abs=1e-9)
    assert abs(np.mean(d.east_m[~day])) < 0.002  # within the day mean's noise (3 mm / 5)
    assert Reference.parse("start:48h").hours == 48.0
    assert Reference.parse(None) == Reference()
    with pytest.raises(ValueError, match="start:48h"):
        Reference.parse("start:longh")


@pytest.mark.parametrize("text", ["yesterday", "2026-13-01", "2026-01-05..2026-01-01"])
def test_a_bad_reference_says_what_to_write(text):
    with pytest.raises(ValueError, match="use 'first', a date"):
        Reference.parse(text)


def test_a_reference_window_outside_the_data_names_the_span():
    t = hourly(2)
    with pytest.raises(ValueError, match="no epoch in the reference window.*data span 2026-01-01"):
        Reference.parse("2025-06-01..2025-06-02").mask(t)


def test_largest_disagreement_ignores_the_offset_between_references():
    ours = np.array([0.0, 0.001, 0.002, 0.0031])
    theirs = ours + 0.5  # the service's reference is elsewhere
    theirs[3] += 0.0004
    assert largest_disagreement(ours, theirs) == pytest.approx(0.0004, abs=1e-9)


def test_swapped_latitude_and_longitude_are_refused():
    from analysis.geodesy import geodetic_to_ecef

    with pytest.raises(ValueError, match="latitude 236.09 is beyond.*swapped"):
        geodetic_to_ecef([236.09], [40.02], [489.0])

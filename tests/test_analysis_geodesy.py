"""Geodesy (analysis.geodesy) and map grids (analysis.projections), checked against what
nobody on this project made: an agency's published displacements (PBO station P156), a
laboratory's series whose longitudes run outside -180..180 (NGL station LHAS), pyproj's own
ECEF and projections, and the textbook series for transverse Mercator scale and convergence.

Run with ``-s`` to see the largest disagreements printed.
"""

from __future__ import annotations

import threading

import time
from pathlib import Path

import numpy as np
import pytest
from pyproj import CRS, Geod, Transformer

from analysis import projections
from analysis.formats import read_pbo_pos, read_tenv3
from analysis.geodesy import (WGS84_A_M, WGS84_E2, geodetic_to_ecef, geodetic_to_enu,
                              normalize_longitude)
from analysis.projections import (GridDisplacement, GridFactors, crs_from_projection,
                                  enu_to_grid_rotation, gaussian_radius_m, grid_displacement,
                                  grid_factors, parse_crs, project, require_projected)

REFERENCE_DATA = Path("/work/shared/reference-data")
P156 = REFERENCE_DATA / "P156.pbo.final_igs08.pos"
LHAS = REFERENCE_DATA / "LHAS.tenv3"

ECEF = Transformer.from_crs("EPSG:4979", "EPSG:4978", always_xy=True)
GEO = Transformer.from_crs("EPSG:4978", "EPSG:4979", always_xy=True)
WGS84_GEOD = Geod(ellps="WGS84")

SITE_GRID = ("+proj=tmerc +lat_0=46.0466 +lon_0=7.9650 +k=1 +x_0=5000 +y_0=10000 +ellps=WGS84 "
             "+units=m +no_defs")  # as the reference server writes a site grid (Mattmark dam)


def enu_to_geodetic(lat0, lon0, h0, e, n, u):
    """Local offsets (m) at a reference point to geodetic positions, through pyproj's ECEF:
    independent of analysis.geodesy (as the reference server's enu_to_geodetic)."""
    x0, y0, z0 = ECEF.transform(lon0, lat0, h0)
    p, lam = np.radians(lat0), np.radians(lon0)
    sp, cp, sl, cl = np.sin(p), np.cos(p), np.sin(lam), np.cos(lam)
    x = x0 - sl * e - sp * cl * n + cp * cl * u
    y = y0 + cl * e - sp * sl * n + cp * sl * u
    z = z0 + cp * n + sp * u
    lon, lat, h = GEO.transform(x, y, z)
    return np.asarray(lat), np.asarray(lon), np.asarray(h)


# ----------------------------------------------------------------------------- real data

def test_p156_enu_matches_the_agency_displacements_at_every_epoch():
    pos = read_pbo_pos(P156)
    assert pos["lat"].size == 3196
    assert pos["ref"][1] > 180.0  # the header writes the reference longitude as 0..360 east
    east, north, up = geodetic_to_enu(pos["lat"], pos["lon"], pos["h"], ref=pos["ref"])
    worst = {name: float(np.max(np.abs(ours - theirs)))
             for name, ours, theirs in (("north", north, pos["dn"]), ("east", east, pos["de"]),
                                        ("up", up, pos["du"]))}
    print("\nP156, 3196 epochs, largest |ours - agency| (mm): "
          + ", ".join(f"{k} {v * 1000:.3f}" for k, v in worst.items()))
    for name, ours, theirs in (("north", north, pos["dn"]), ("east", east, pos["de"]),
                               ("up", up, pos["du"])):
        bad = np.abs(ours - theirs) > 0.001
        assert not bad.any(), f"{name}: {int(bad.sum())} epochs off by more than 1 mm " \
                              f"(worst {worst[name] * 1000:.3f} mm)"
    assert np.all(np.isfinite(east) & np.isfinite(north) & np.isfinite(up))


def test_p156_residual_is_the_agencys_spherical_convention_not_noise():
    """What is left (0.7 mm north over 0.27 m of motion) is a scale, not scatter: PBO's dN and
    dE are the latitude and longitude differences times the equatorial radius (dN = a dphi,
    dE = a cos(phi) dlambda), 0.26 % and 0.14 % off the ellipsoid's M and N at 40 degrees.
    Reproducing that convention leaves only the file's rounding (~0.01 mm)."""
    pos = read_pbo_pos(P156)
    lat0, lon0, h0 = pos["ref"]
    dphi = np.radians(pos["lat"] - lat0)
    dlam = np.radians(pos["lon"] - lon0)
    assert np.max(np.abs(WGS84_A_M * dphi - pos["dn"])) < 3e-5
    assert np.max(np.abs(WGS84_A_M * np.cos(np.radians(lat0)) * dlam - pos["de"])) < 3e-5
    assert np.max(np.abs(pos["h"] - h0 - pos["du"])) < 1.1e-5
    # ... and the exact north differs from the agency's by that scale, to the file's rounding
    _, north, _ = geodetic_to_enu(pos["lat"], pos["lon"], pos["h"], ref=pos["ref"])
    meridian_radius = WGS84_A_M * (1 - WGS84_E2) / (
        1 - WGS84_E2 * np.sin(np.radians(lat0)) ** 2) ** 1.5
    slope = np.polyfit(north, north - pos["dn"], 1)[0]
    assert slope == pytest.approx(1.0 - WGS84_A_M / meridian_radius, abs=2e-4)  # -0.26 %


def test_p156_reference_positions_in_the_header_agree():
    """The header gives the reference position twice, as ECEF and as lat/lon/height."""
    xyz = None
    for line in P156.read_text(encoding="ascii", errors="replace").splitlines():
        if line.startswith("XYZ Reference position"):
            xyz = np.array([float(v) for v in line.split(":", 1)[1].split()[:3]])
            break
    assert xyz is not None
    ours = np.array(geodetic_to_ecef(*read_pbo_pos(P156)["ref"]))
    assert np.max(np.abs(ours - xyz)) < 2e-4  # both are rounded to 0.01 mm


def test_lhas_longitudes_below_minus_180_give_the_same_enu():
    series = read_tenv3(LHAS)
    lat, lon, h = series["lat"], series["lon"], series["h"]
    assert lat.size == 3631
    assert np.all(lon < -180.0)  # written as -268.896..., i.e. 91.104 E
    ref = (lat[0], lon[0], h[0])
    raw = geodetic_to_enu(lat, lon, h, ref=ref)
    lon_n = normalize_longitude(lon)
    assert np.all((lon_n > 91.10) & (lon_n < 91.11))
    wrapped = geodetic_to_enu(lat, lon_n, h, ref=(lat[0], float(lon_n[0]), h[0]))
    for a, b in zip(raw, wrapped):
        assert np.max(np.abs(a - b)) < 1e-6
    # NGL's own local coordinates from the first epoch agree too (its convention, not ours)
    worst = [float(np.max(np.abs(ours - (series[k] - series[k][0]))))
             for ours, k in zip(raw, ("e", "n", "u"))]
    print(f"\nLHAS, 3631 epochs, largest |ours - NGL| (mm): east {worst[0] * 1e3:.3f}, "
          f"north {worst[1] * 1e3:.3f}, up {worst[2] * 1e3:.3f}")
    assert max(worst) < 1e-3


# ----------------------------------------------------------------------------- geodesy

def test_normalize_longitude_edges():
    cases = {180.0: -180.0, -180.0: -180.0, 360.0: 0.0, 0.0: 0.0, 540.0: -180.0,
             -540.0: -180.0, 720.0: 0.0, 179.5: 179.5, -179.5: -179.5, 181.0: -179.0,
             236.0938828649: -123.9061171351, -268.8960142076: 91.1039857924}
    got = normalize_longitude(list(cases))
    assert got.dtype == np.float64 and got.shape == (len(cases),)
    np.testing.assert_allclose(got, list(cases.values()), rtol=0, atol=1e-11)
    assert np.all((got >= -180.0) & (got < 180.0))
    assert np.isnan(normalize_longitude(np.nan))
    assert normalize_longitude(np.zeros((2, 3))).shape == (2, 3)


def test_geodetic_to_ecef_matches_pyproj_worldwide_in_any_longitude_convention():
    rng = np.random.default_rng(20240601)
    n = 20_000
    lat = np.degrees(np.arcsin(rng.uniform(-1.0, 1.0, n)))
    lon = rng.uniform(-180.0, 180.0, n)
    lat = np.concatenate([lat, [90.0, -90.0, 0.0, 0.0, 29.6573392384, 40.0244429509]])
    lon = np.concatenate([lon, [0.0, 123.0, 180.0, -180.0, -268.8960142076 + 360.0,
                                236.0938828649 - 360.0]])
    h = rng.uniform(-500.0, 9000.0, lat.size)
    x, y, z = (np.asarray(v) for v in ECEF.transform(lon, lat, h))
    worst = 0.0
    for lon_as_written in (lon, lon % 360.0, lon - 360.0):  # -180..180, 0..360, -540..-180
        ours = geodetic_to_ecef(lat, lon_as_written, h)
        d = max(float(np.max(np.abs(a - b))) for a, b in zip(ours, (x, y, z)))
        worst = max(worst, d)
        assert d < 1e-6
    assert np.any((lon - 360.0 > -269.0) & (lon - 360.0 < -268.8))  # -268.9-style included
    print(f"\ngeodetic_to_ecef vs pyproj EPSG:4979->4978, {lat.size} points x 3 longitude "
          f"conventions: largest difference {worst:.2e} m")


@pytest.mark.parametrize("lat0, lon0, h0", [
    (40.0244429509, 236.0938828649, 488.99986),  # P156, longitude 0..360
    (29.6573392384, -268.8960142076, 3624.70788),  # LHAS, longitude below -180
    (46.0466, 7.9650, 2205.0),
    (-40.2140, 175.9030, 610.0),
    (0.0, 179.99, 0.0),  # offsets cross the antimeridian
    (89.95, 30.0, 100.0),  # offsets cross the pole
    (-89.99, -45.0, 2800.0),
])
def test_geodetic_to_enu_round_trip_through_pyproj(lat0, lon0, h0):
    rng = np.random.default_rng(7)
    e = rng.uniform(-10_000.0, 10_000.0, 2000)
    n = rng.uniform(-10_000.0, 10_000.0, 2000)
    u = rng.uniform(-1_000.0, 1_000.0, 2000)
    e[:3], n[:3], u[:3] = [0.0, 10_000.0, -10_000.0], [0.0, 10_000.0, -10_000.0], 0.0
    lat, lon, h = enu_to_geodetic(lat0, lon0, h0, e, n, u)
    east, north, up = geodetic_to_enu(lat, lon, h, ref=(lat0, lon0, h0))
    # pyproj's ECEF-to-geodetic is good to ~0.5 um below 6 km height: it is the floor here
    for ours, truth in ((east, e), (north, n), (up, u)):
        assert np.max(np.abs(ours - truth)) < 1e-6


# ----------------------------------------------------------------------------- reading CRSs

def test_parse_crs_accepts_the_documented_forms():
    utm = CRS.from_epsg(32633)
    for text in ("EPSG:32633", "32633", "  epsg:32633 ", 32633, utm.to_wkt(), utm):
        assert parse_crs(text) == utm, text
    tmerc = parse_crs("+proj=tmerc +lat_0=0 +lon_0=15 +k=0.9996 +x_0=500000 +y_0=0 "
                      "+ellps=WGS84 +units=m +no_defs")
    assert tmerc.is_projected
    lat, lon = np.array([46.0, 47.5]), np.array([14.0, 16.5])
    np.testing.assert_allclose(np.array(project(lat, lon, tmerc)),
                               np.array(project(lat, lon, "EPSG:32633")), rtol=0, atol=1e-6)


@pytest.mark.parametrize("text", ["not a crs", "+proj=foo +ellps=WGS84", "EPSG:999999", "",
                                  "   ", "PROJCRS[broken", "enu", None])
def test_parse_crs_garbage_gives_a_clear_error_without_pyproj_traceback(text):
    with pytest.raises(ValueError) as info:
        parse_crs(text)
    message = str(info.value)
    for form in ("EPSG:32633", "PROJ string", "WKT"):
        assert form in message
    if text and text.strip():
        assert text.strip()[:20] in message
    assert "CRSError" not in message and "proj_create" not in message
    assert info.value.__cause__ is None  # no pyproj error chained: the message is the story
    assert info.value.__context__ is None or info.value.__suppress_context__


def test_crs_from_projection_entries_as_the_service_sends_them():
    standard = {"id": 101, "label": "WGS 84 / UTM zone 32N", "projectionType": "standard",
                "srid": 32632, "verticalDatum": "EGM2008", "heightType": "orthometric"}
    site = {"id": 102, "label": "Mattmark dam site grid", "projectionType": "proj_string",
            "projString": SITE_GRID, "verticalDatum": None, "heightType": "ellipsoidal"}
    assert crs_from_projection(standard) == CRS.from_epsg(32632)
    site_crs = crs_from_projection(site)
    assert site_crs.is_projected
    # the grid's origin is where its PROJ string says, and pyproj agrees everywhere else
    e0, n0 = project(46.0466, 7.9650, site_crs)
    assert (float(e0), float(n0)) == pytest.approx((5000.0, 10000.0), abs=1e-6)
    rng = np.random.default_rng(3)
    lat, lon = 46.0466 + rng.uniform(-0.05, 0.05, 500), 7.965 + rng.uniform(-0.05, 0.05, 500)
    direct = Transformer.from_crs("EPSG:4326", SITE_GRID, always_xy=True).transform(lon, lat)
    np.testing.assert_allclose(np.array(project(lat, lon, site_crs)), np.array(direct),
                               rtol=0, atol=1e-9)
    # the store's snake_case rows read the same
    row = {"id": 102, "label": "x", "projection_type": "proj_string", "proj_string": SITE_GRID}
    assert crs_from_projection(row) == site_crs


@pytest.mark.parametrize("entry, words", [
    ({"id": 7, "label": "Grid A", "projectionType": "standard", "srid": None}, "srid"),
    ({"id": 7, "label": "Grid A", "projectionType": "standard", "srid": 999999}, "EPSG"),
    ({"id": 7, "label": "Grid A", "projectionType": "proj_string", "projString": ""},
     "projString"),
    ({"id": 7, "label": "Grid A", "projectionType": "proj_string",
      "projString": "+proj=nonsense"}, "+proj=nonsense"),
    ({"id": 7, "label": "Grid A", "projectionType": "custom"}, "projectionType"),
])
def test_crs_from_projection_names_the_bad_entry(entry, words):
    with pytest.raises(ValueError, match="projection 7") as info:
        crs_from_projection(entry)
    assert "Grid A" in str(info.value) and words in str(info.value)


# ----------------------------------------------------------------------------- projecting

def test_utm_projection_matches_pyproj_directly():
    rng = np.random.default_rng(11)
    lat, lon = rng.uniform(35.0, 60.0, 5000), rng.uniform(12.0, 18.0, 5000)
    e, n = project(lat, lon, "EPSG:32633")
    e_ref, n_ref = Transformer.from_crs("EPSG:4326", "EPSG:32633", always_xy=True).transform(
        lon, lat)
    # bit for bit: the service's projected coordinates come from the same PROJ operation
    np.testing.assert_array_equal(e, e_ref)
    np.testing.assert_array_equal(n, n_ref)
    # longitudes written 0..360 or below -180 land on the same grid point
    e2, n2 = project(lat, lon + 360.0, "EPSG:32633")
    e3, n3 = project(lat, lon - 360.0, "EPSG:32633")
    assert np.max(np.abs(e2 - e)) < 1e-6 and np.max(np.abs(n3 - n)) < 1e-6
    assert np.max(np.abs(e3 - e)) < 1e-6 and np.max(np.abs(n2 - n)) < 1e-6
    # easting first, whatever the CRS declares: NZTM (EPSG:2193) is northing-first in EPSG
    e_nz, n_nz = project(-40.214, 175.903, "EPSG:2193")
    assert 1.7e6 < e_nz < 2.0e6 and 5.4e6 < n_nz < 5.7e6


def test_grid_in_feet_comes_back_in_metres():
    e_m, n_m = project(34.364, -119.446, "EPSG:2229")  # California zone 5, US survey feet
    e_ft, n_ft = Transformer.from_crs("EPSG:4326", "EPSG:2229", always_xy=True).transform(
        -119.446, 34.364)
    assert float(e_m) == pytest.approx(e_ft * 1200.0 / 3937.0, abs=1e-9)
    assert float(n_m) == pytest.approx(n_ft * 1200.0 / 3937.0, abs=1e-9)


def test_compound_crs_projects_with_its_horizontal_part():
    assert require_projected("EPSG:2056+5728") == CRS.from_epsg(2056)
    a = np.array(project(46.0466, 7.9650, "EPSG:2056+5728"))
    b = np.array(project(46.0466, 7.9650, "EPSG:2056"))
    assert np.max(np.abs(a - b)) < 1e-9


@pytest.mark.parametrize("crs, words", [("EPSG:4326", "geographic"), ("4979", "geographic"),
                                        ("EPSG:4978", "geocentric"), ("EPSG:5703", "vertical")])
def test_non_projected_targets_are_refused(crs, words):
    with pytest.raises(ValueError, match=words) as info:
        project(46.0, 7.0, crs)
    assert "projected CRS" in str(info.value) and "enu" in str(info.value)
    with pytest.raises(ValueError, match="projected CRS"):
        grid_factors(46.0, 7.0, crs)
    with pytest.raises(ValueError, match="projected CRS"):
        require_projected(crs)


def test_west_or_south_pointing_grids_are_refused_but_polar_grids_accepted():
    for crs in ("EPSG:22275", "EPSG:5513"):  # South African Lo15, S-JTSK south/west axes
        with pytest.raises(ValueError, match="axes pointing"):
            project(-28.0, 15.0, crs)
    e, n = project(-75.0, 30.0, "EPSG:3031")  # Antarctic polar stereographic
    e_ref, n_ref = Transformer.from_crs("EPSG:4326", "EPSG:3031", always_xy=True).transform(
        30.0, -75.0)
    assert (float(e), float(n)) == pytest.approx((e_ref, n_ref), abs=1e-9)


def test_bad_positions_and_sources_are_refused():
    with pytest.raises(ValueError, match="latitude"):
        project([46.0, 95.0], [7.0, 7.0], "EPSG:32632")  # lat/lon swapped somewhere
    with pytest.raises(ValueError, match="not geographic"):
        project(46.0, 7.0, "EPSG:32632", source_crs="EPSG:32633")
    e, n = project([46.0, np.nan], [7.0, 7.0], "EPSG:32632")  # a missing epoch stays missing
    assert np.isfinite(e[0]) and np.isnan(e[1]) and np.isnan(n[1])


def test_transformer_is_built_once_and_reused():
    crs = parse_crs("+proj=tmerc +lat_0=12.3456 +lon_0=-65.4321 +k=1 +x_0=1000 +y_0=2000 "
                    "+ellps=WGS84 +units=m +no_defs")  # a pair no other test uses
    built = []
    original = projections.Transformer.from_crs

    def counting(*args, **kw):
        built.append(args)
        return original(*args, **kw)

    projections.Transformer.from_crs = counting
    try:
        for _ in range(5):
            project(np.array([12.3456, 12.35]), np.array([-65.4321, -65.43]), crs)
        assert len(built) == 1  # built once and reused ...
        first = projections.transformer("EPSG:4326", crs)
        assert first is projections.transformer("4326", crs)
        other = []  # ... per thread: a PROJ object never crosses threads
        worker = threading.Thread(target=lambda: other.append(
            projections.transformer("EPSG:4326", crs)))
        worker.start()
        worker.join()
        assert len(built) == 2 and other[0] is not first
    finally:
        projections.Transformer.from_crs = original


def test_a_million_points_in_one_call():
    rng = np.random.default_rng(5)
    lat = rng.uniform(45.0, 48.0, 1_000_000)
    lon = rng.uniform(6.0, 12.0, 1_000_000)
    start = time.perf_counter()
    e, n = project(lat, lon, "EPSG:32632")
    elapsed = time.perf_counter() - start
    print(f"\nprojected 1e6 points in {elapsed:.3f} s")
    assert e.shape == n.shape == (1_000_000,) and np.all(np.isfinite(e) & np.isfinite(n))
    pick = rng.integers(0, lat.size, 100)
    e_ref, n_ref = Transformer.from_crs("EPSG:4326", "EPSG:32632", always_xy=True).transform(
        lon[pick], lat[pick])
    assert np.max(np.abs(e[pick] - e_ref)) < 1e-9 and np.max(np.abs(n[pick] - n_ref)) < 1e-9


# ----------------------------------------------------------------------------- grid factors

def _second_eccentricity_eta2(lat_deg):
    return WGS84_E2 / (1.0 - WGS84_E2) * np.cos(np.radians(lat_deg)) ** 2


def test_utm_scale_factor_at_and_away_from_the_central_meridian():
    lats = np.array([0.0, 10.0, 30.0, 46.0, 60.0, 80.0])
    at_cm = grid_factors(lats, np.full(lats.shape, 15.0), "EPSG:32633")
    np.testing.assert_allclose(at_cm.scale_factor, 0.9996, rtol=0, atol=1e-9)
    assert at_cm.conformal
    np.testing.assert_allclose(at_cm.parallel_scale, at_cm.meridional_scale, rtol=1e-8)
    assert "meridional" in at_cm.method
    lat = 46.0
    dlon = np.array([0.25, 0.5, 1.0, 2.0, 3.0])
    f = grid_factors(np.full(dlon.shape, lat), 15.0 + dlon, "EPSG:32633")
    x2 = (np.radians(dlon) * np.cos(np.radians(lat))) ** 2
    assert np.all(np.diff(f.scale_factor) > 0)  # grows away from the central meridian
    # first order, k0 (1 + (dlon cos lat)^2 / 2): to 5e-6 (2.2e-6 is the eta^2 term at 3 deg)
    np.testing.assert_allclose(f.scale_factor, 0.9996 * (1 + x2 / 2), rtol=0, atol=5e-6)
    # with the ellipsoid's eta^2 (Redfearn): to 1e-7 (the 4th-order term is 5e-8 at 3 deg)
    eta2 = _second_eccentricity_eta2(lat)
    np.testing.assert_allclose(f.scale_factor, 0.9996 * (1 + x2 / 2 * (1 + eta2)),
                               rtol=0, atol=1e-7)


def test_utm_convergence_sign_and_size():
    """Convergence is the angle from true north to grid north, clockwise: positive east of the
    central meridian in the north, negative in the south (grid bearing = azimuth - gamma)."""
    lat = np.array([46.0, 46.0, -33.0, -33.0, 5.0])
    dlon = np.array([0.8, -0.6, 0.9, -1.0, 0.5])
    f = grid_factors(lat, 15.0 + dlon, "EPSG:32633")
    first_order = dlon * np.sin(np.radians(lat))
    np.testing.assert_allclose(f.convergence_deg, first_order, rtol=0, atol=1e-3)
    assert np.all(np.sign(f.convergence_deg) == np.sign(first_order))
    # at the zone edge the third-order series holds to 1e-5 degrees
    lat, dlon = 46.0, np.array([-3.0, 2.0, 3.0])
    f = grid_factors(np.full(3, lat), 15.0 + dlon, "EPSG:32633")
    s, c, w = np.sin(np.radians(lat)), np.cos(np.radians(lat)), np.radians(dlon)
    eta2 = _second_eccentricity_eta2(lat)
    series = np.degrees(w * s + w ** 3 / 3 * s * c ** 2 * (1 + 3 * eta2 + 2 * eta2 ** 2))
    np.testing.assert_allclose(f.convergence_deg, series, rtol=0, atol=1e-5)
    # the sign convention, directly: a short step due north has grid bearing -gamma
    e, n = project([46.0, 46.0 + 1e-4], [18.0, 18.0], "EPSG:32633")
    bearing = np.degrees(np.arctan2(e[1] - e[0], n[1] - n[0]))
    assert bearing == pytest.approx(-f.convergence_deg[2], abs=1e-5)


def test_elevation_and_combined_factor():
    f = grid_factors(45.0, 15.0, "EPSG:32633", h_m=1000.0)
    assert float(f.elevation_factor) == pytest.approx(1.0 - 1000.0 / 6.37e6, abs=1e-6)
    s2 = np.sin(np.radians(45.0)) ** 2
    m = WGS84_A_M * (1 - WGS84_E2) / (1 - WGS84_E2 * s2) ** 1.5
    n = WGS84_A_M / np.sqrt(1 - WGS84_E2 * s2)
    r = np.sqrt(m * n)  # Gaussian mean radius, by hand
    assert float(f.radius_m) == pytest.approx(r, rel=1e-12)
    assert float(gaussian_radius_m(45.0)) == pytest.approx(r, rel=1e-12)
    assert float(f.elevation_factor) == pytest.approx(r / (r + 1000.0), rel=1e-12)
    assert float(f.combined_factor) == pytest.approx(0.9996 * r / (r + 1000.0), rel=1e-9)
    assert float(f.ground_distance_m(999.6)) == pytest.approx(999.6 / float(f.combined_factor))
    assert float(f.grid_distance_m(f.ground_distance_m(123.4))) == pytest.approx(123.4)
    no_height = grid_factors(45.0, 15.0, "EPSG:32633")
    assert no_height.elevation_factor is None and no_height.combined_factor is None
    with pytest.raises(ValueError, match="h_m"):
        no_height.ground_distance_m(100.0)


@pytest.mark.parametrize("crs, lat, lon", [
    ("EPSG:32632", 46.0466, 7.9650),
    (SITE_GRID, 46.06, 7.98),
    ("EPSG:2056", 46.0466, 7.9650),  # CH1903+ on Bessel: a datum shift on the way
    ("EPSG:27700", 51.0960, 1.2440),  # OSGB36 on Airy
    ("EPSG:2193", -40.2140, 175.9030),  # northing-first in EPSG
    ("EPSG:2229", 34.3640, -119.4460),  # US survey feet
    ("EPSG:32760", -40.2140, 175.9030),
])
def test_factors_match_the_grid_geometry_of_short_lines(crs, lat, lon):
    """Independent of PROJ's factors: a 10 m WGS 84 geodesic (at height 0) has grid length
    10 m x combined factor (at h = 0: on another datum the point is not at height 0 on its
    ellipsoid, ~51 m below on Bessel, 8 ppm; OSGB36's Helmert adds 20 ppm of scale), and a
    step of azimuth A has grid bearing A - total convergence."""
    f = grid_factors(lat, lon, crs, h_m=0.0)
    for azimuth in (0.0, 60.0, 90.0):
        lon1, lat1, _ = WGS84_GEOD.fwd(lon, lat, azimuth + 180.0, 5.0)
        lon2, lat2, _ = WGS84_GEOD.fwd(lon, lat, azimuth, 5.0)
        e, n = project([lat1, lat2], [lon1, lon2], crs)
        assert np.hypot(e[1] - e[0], n[1] - n[0]) / 10.0 == pytest.approx(
            float(f.combined_factor), abs=2e-8)
        bearing = np.degrees(np.arctan2(e[1] - e[0], n[1] - n[0]))
        assert (bearing - (azimuth - float(f.total_convergence_deg)) + 180) % 360 - 180 == \
            pytest.approx(0.0, abs=1e-6)
    if crs in ("EPSG:2056", "EPSG:27700"):  # the datum's own height is what was used
        assert abs(float(f.height_m)) > 20.0 and abs(float(f.elevation_factor) - 1) > 3e-6
        assert 0 < abs(float(f.datum_rotation_deg)) < 0.002  # arc-seconds
    else:
        assert abs(float(f.height_m)) < 1e-6
        assert float(f.datum_rotation_deg) == pytest.approx(0.0, abs=1e-9)
    if crs == "EPSG:27700":  # the 7-parameter Helmert's scale, -20.4894 ppm OSGB36 to WGS 84
        assert float(f.datum_scale) == pytest.approx(1 + 20.4894e-6, abs=2e-8)
    else:
        assert float(f.datum_scale) == pytest.approx(1.0, abs=1e-9)


def test_non_conformal_projection_has_no_enu_rotation():
    f = grid_factors(40.0, -100.0, "EPSG:5070", h_m=100.0)  # CONUS Albers equal-area
    assert not f.conformal
    with pytest.raises(ValueError, match="not conformal"):
        f.enu_to_grid(1.0, 0.0)
    with pytest.raises(ValueError, match="not conformal"):
        enu_to_grid_rotation(40.0, -100.0, 100.0, "EPSG:5070")


# ----------------------------------------------------------------------------- displacement

def test_grid_displacement_reference_conventions_and_height_labels():
    rng = np.random.default_rng(2)
    k = np.linspace(0.0, 1.0, 20)
    lat, lon, eh = enu_to_geodetic(46.0466, 7.9650, 2205.0, 0.3 * k, -0.2 * k, -0.05 * k)
    oh = eh - 51.9 + 0.001 * rng.standard_normal(k.size)  # orthometric: minus the geoid
    by_index = grid_displacement(lat, lon, oh, "EPSG:32632", 0, height_type="orthometric",
                                 vertical_datum="EGM2008")
    assert isinstance(by_index, GridDisplacement)
    assert by_index.height_type == "orthometric" and by_index.vertical_datum == "EGM2008"
    assert by_index.d_easting_m[0] == 0.0 and by_index.d_height_m[0] == 0.0
    np.testing.assert_allclose(by_index.d_height_m, oh - oh[0], rtol=0, atol=1e-12)
    assert "UTM zone 32N" in by_index.crs_name and by_index.transformation
    by_position = grid_displacement(lat, lon, oh, "EPSG:32632", (lat[0], lon[0] + 360.0, oh[0]),
                                    height_type="orthometric")
    for a, b in ((by_index.d_easting_m, by_position.d_easting_m),
                 (by_index.d_northing_m, by_position.d_northing_m),
                 (by_index.d_height_m, by_position.d_height_m)):
        assert np.max(np.abs(a - b)) < 1e-7  # the +360 costs a few nm of rounding
    window = np.zeros(k.size, bool)
    window[:4] = True
    by_window = grid_displacement(lat, lon, eh, "EPSG:32632", window, height_type="ellipsoidal")
    assert by_window.height_type == "ellipsoidal"
    assert by_window.reference_easting_m == pytest.approx(np.mean(by_index.easting_m[:4]))
    np.testing.assert_allclose(np.mean(by_window.d_height_m[:4]), 0.0, atol=1e-12)
    with pytest.raises(ValueError, match="height_type"):
        grid_displacement(lat, lon, eh, "EPSG:32632", 0, height_type="geoid")
    with pytest.raises(ValueError, match="at least one"):
        grid_displacement(lat, lon, eh, "EPSG:32632", np.zeros(k.size, bool),
                          height_type="ellipsoidal")
    with pytest.raises(ValueError, match="reference"):
        grid_displacement(lat, lon, eh, "EPSG:32632", "first", height_type="ellipsoidal")


@pytest.mark.parametrize("crs, lat0, lon0, h0", [
    ("EPSG:32632", 46.30, 11.95, 2400.0),  # 2.95 degrees east of the CM, near the zone edge
    ("EPSG:32719", -33.447, -71.95, 2400.0),  # southern hemisphere, near the western edge
    ("EPSG:2056", 46.0466, 7.9650, 2205.0),  # national grid on another datum
    ("EPSG:27700", 51.0960, 1.2440, 45.0),
])
def test_grid_and_enu_displacements_agree_after_convergence_and_scale(crs, lat0, lon0, h0):
    """A point moving 2 m east (and a little north and down) over 50 epochs: its grid
    displacement, turned back by the convergence and divided by the combined factor, is its
    ENU displacement to < 0.1 mm; without either correction it is not."""
    k = np.linspace(0.0, 1.0, 50)
    e_true, n_true, u_true = 2.0 * k, 0.5 * k, -0.3 * k
    lat, lon, h = enu_to_geodetic(lat0, lon0, h0, e_true, n_true, u_true)
    east, north, _ = geodetic_to_enu(lat, lon, h, ref=(lat[0], lon[0], h[0]))
    grid = grid_displacement(lat, lon, h, crs, 0, height_type="ellipsoidal")
    f = grid_factors(lat0, lon0, crs, h_m=h0)
    e_back, n_back = f.grid_to_enu(grid.d_easting_m, grid.d_northing_m)
    worst = max(np.max(np.abs(e_back - east)), np.max(np.abs(n_back - north)))
    raw = max(np.max(np.abs(grid.d_easting_m - east)), np.max(np.abs(grid.d_northing_m - north)))
    print(f"\n{crs} at ({lat0}, {lon0}, {h0} m): gamma {float(f.convergence_deg):+.4f} deg, "
          f"k {float(f.scale_factor):.7f}, combined {float(f.combined_factor):.7f}; "
          f"|ENU - grid back to ENU| {worst * 1e3:.5f} mm, uncorrected {raw * 1e3:.2f} mm")
    assert worst < 1e-4
    de, dn = f.enu_to_grid(east, north)
    assert max(np.max(np.abs(de - grid.d_easting_m)), np.max(np.abs(dn - grid.d_northing_m))) \
        < 1e-4
    matrix = enu_to_grid_rotation(lat0, lon0, h0, crs)
    assert matrix.shape == (2, 2)
    mapped = matrix @ np.vstack([east, north])
    assert np.max(np.abs(mapped - np.vstack([grid.d_easting_m, grid.d_northing_m]))) < 1e-4
    # the convergence is what matters most: uncorrected grid and ENU differ by millimetres
    assert raw > 1e-3


def test_near_the_utm_zone_edge_scale_and_elevation_each_matter():
    """At 2400 m near the zone edge, rotating without the scale leaves 0.3 mm over 2 m, and
    the scale without the elevation factor 0.75 mm: both are needed for 0.1 mm."""
    lat0, lon0, h0, crs = 46.30, 11.95, 2400.0, "EPSG:32632"
    k = np.linspace(0.0, 1.0, 50)
    lat, lon, h = enu_to_geodetic(lat0, lon0, h0, 2.0 * k, 0.0 * k, 0.0 * k)
    east, north, _ = geodetic_to_enu(lat, lon, h, ref=(lat0, lon0, h0))
    grid = grid_displacement(lat, lon, h, crs, (lat0, lon0, h0), height_type="ellipsoidal")
    f = grid_factors(lat0, lon0, crs, h_m=h0)
    g = np.radians(float(f.convergence_deg))
    rot_e = grid.d_easting_m * np.cos(g) + grid.d_northing_m * np.sin(g)  # rotation only
    assert np.max(np.abs(rot_e - east)) > 2e-4
    assert np.max(np.abs(rot_e / float(f.scale_factor) - east)) > 5e-4  # no elevation factor
    assert np.max(np.abs(rot_e / float(f.combined_factor) - east)) < 1e-5
    assert isinstance(f, GridFactors)

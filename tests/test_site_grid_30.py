"""Issue 30, point 10: with no --projection the site plan and the point register gave
positions as "East/North of centroid" (local ENU), not in the site's grid that engineers'
drawings use.  Now they are in a grid the site's projections (mirrored from the service)
offer, chosen by one stated rule (``devmon_sync.analyze.site_plans.choose_site_grid``):
the site's stated default, else a national grid, else a UTM zone, else the site's own
proj_string grid, else local ENU as before.  The analysis itself stays in its frame.

One small world is synced (3 sites: Illgraben with UTM 32N, a site grid and CH1903+ / LV95,
its stated default the national grid; Mattmark with no GNSS configuration; Folkestone), its three
rovers analysed once.  The rules without a stated default are shown on the mirror's own
projection rows, the default taken away (a service that states none).  One register page
and one plan page are drawn and read back."""

from __future__ import annotations

from dataclasses import replace

import numpy as np
import pytest
from support import needs_poppler, pdf_text, synced_mirror

from analysis.pipeline import AnalysisOptions
from analysis.plan_figure import plan_view_figure
from analysis.projections import project
from devmon_sync.analyze.rovers import analyze_devices
from devmon_sync.analyze.site_plans import (
    PlanRover,
    choose_site_grid,
    place_rovers,
    plan_positions,
    site_plans,
)
from devmon_sync.report import ReportOptions, build_report, register
from devmon_sync.report.pages import plan_pages
from devmon_sync.report.render import write_pages
from devmon_sync.server import WorldSize
from devmon_sync.store import Mirror, queries, report_queries

WORLD = WorldSize(sites=3, devices=4, days=5)  # a base and three rovers, all at Illgraben
UTM = "WGS 84 / UTM zone 32N"
LV95 = "CH1903+ / LV95"


@pytest.fixture(scope="module")
def mirror_path(tmp_path_factory):
    return synced_mirror(tmp_path_factory.mktemp("grid30") / "mirror.duckdb", WORLD)


@pytest.fixture(scope="module")
def world(mirror_path):
    """(analyses of the rovers, their site's uuid, the sites by name, each site's GNSS
    configuration as the store reads it, the rovers' positions)."""
    with Mirror.open(mirror_path, read_only=True) as m:
        devices = [d for d in queries.gnss_devices(m) if d.epochs]
        analyses = analyze_devices(m, [d.serial_number for d in devices], AnalysisOptions())
        sites = {p.name: p.uuid for p in report_queries.sites(m)}
        gnss = report_queries.site_gnss(m, list(sites.values()))
        positions = plan_positions(m, [a.serial_number for a in analyses])
    (site,) = {d.site_uuid for d in devices}
    return analyses, site, sites, gnss, positions


def plan_rovers(world, site_uuid=None) -> list[PlanRover]:
    analyses, site, sites, *_ = world
    name = {u: n for n, u in sites.items()}[site_uuid or site]
    return [PlanRover(a, site_uuid or site, name, a.display_name) for a in analyses]


def centroid(world) -> tuple[np.ndarray, np.ndarray]:
    positions = world[4]
    lat = np.array([p[0] for p in positions.values()])
    lon = np.array([p[1] for p in positions.values()])
    return lat, lon


def without_default(site: report_queries.SiteGnss, **config) -> report_queries.SiteGnss:
    """The site as a service that states no default projection (or states ``config``)
    would give it."""
    return replace(site, config={k: v for k, v in site.config.items()
                                 if k != "defaultProjectionId"} | config)


def keep(site: report_queries.SiteGnss, *types_or_srids) -> report_queries.SiteGnss:
    return replace(site, projections=tuple(
        p for p in site.projections
        if p["srid"] in types_or_srids or p["projection_type"] in types_or_srids))


# ----------------------------------------------------------------------------- the rule

def test_the_plan_and_register_use_the_sites_stated_default_grid(mirror_path, world):
    """Before: frame 'local ENU', axes "east/north of the rovers' centroid", register
    headers "East of centroid"; now the site's stated default (our server's
    ``defaultProjectionId``: its national grid, CH1903+ / LV95) names the axes, the headers
    and the frame, says why, and places each rover at its projected position."""
    _, site, _, gnss, positions = world
    with Mirror.open(mirror_path, read_only=True) as m:
        (plan,) = site_plans(m, plan_rovers(world))
    assert gnss[site].config["defaultProjectionId"] == 103  # the national grid's id
    assert plan.axis_names == (f"{LV95} E", f"{LV95} N")
    assert LV95 in plan.frame_label and "EPSG:2056" in plan.frame_label
    assert "default" in plan.frame_label
    for sn, p in zip(plan.serial_numbers, plan.points):
        lat, lon, _ = positions[sn]
        assert (p.easting_m, p.northing_m) == pytest.approx(
            tuple(float(v) for v in project(lat, lon, "EPSG:2056")), abs=1e-6)
    headers = [c.header for c in register.register_columns(plan)]
    assert f"{LV95} E (m)" in headers and f"{LV95} N (m)" in headers
    fig = plan_view_figure(list(plan.points), frame_label=plan.frame_label,
                           axis_names=plan.axis_names)
    assert fig.axes[0].get_xlabel() == f"{LV95} E (m)"
    assert fig.axes[0].get_ylabel() == f"{LV95} N (m)"


def test_without_a_stated_default_national_grid_then_utm_then_site_grid(world):
    """(2) a national grid (an EPSG projected CRS that is no UTM zone), else (3) a UTM zone,
    else (4) the site's proj_string grid, else local ENU."""
    _, site, _, gnss, _ = world
    lat, lon = centroid(world)
    illgraben = without_default(gnss[site])
    grid = choose_site_grid(illgraben, lat, lon)
    assert (grid.name, grid.code, grid.projection_id) == (LV95, "EPSG:2056", 103)
    assert "national grid" in grid.why
    grid = choose_site_grid(keep(illgraben, 32632, "proj_string"), lat, lon)
    assert (grid.name, grid.code) == (UTM, "EPSG:32632") and "UTM zone" in grid.why
    grid = choose_site_grid(keep(illgraben, "proj_string"), lat, lon)
    assert (grid.name, grid.code, grid.projection_id) == ("Illgraben slope site grid", None,
                                                          102)
    assert "own grid" in grid.why
    assert choose_site_grid(keep(illgraben), lat, lon).crs is None


def test_a_stated_default_is_a_hint_checked_against_the_sites_projections(world):
    """A default naming none of the site's projections is passed over (and said); another
    spelling of the default, or its id as text, is recognised too."""
    _, site, _, gnss, _ = world
    lat, lon = centroid(world)
    grid = choose_site_grid(without_default(gnss[site], defaultProjectionId=999), lat, lon)
    assert grid.code == "EPSG:2056" and "national grid" in grid.why
    assert "defaultProjectionId 999" in grid.label and "none of the site's" in grid.label
    grid = choose_site_grid(without_default(gnss[site], defaultProjection={"id": 102}),
                            lat, lon)
    assert grid.projection_id == 102 and "default" in grid.why
    grid = choose_site_grid(without_default(gnss[site], defaultProjectionId="103"), lat, lon)
    assert grid.projection_id == 103 and "default" in grid.why


def test_a_grid_that_does_not_cover_the_site_is_passed_over(world):
    """A national grid of another country (New Zealand's, EPSG:2193, listed at a Swiss
    site) would place the rovers thousands of km off: the next candidate is taken, and the
    grid passed over is named."""
    _, site, _, gnss, _ = world
    lat, lon = centroid(world)
    wrong = dict(gnss[site].projections[0], id=7, label="NZTM", projection_type="standard",
                 srid=2193, proj_string=None)
    illgraben = without_default(gnss[site])
    grid = choose_site_grid(replace(keep(illgraben, 32632), projections=(
        wrong, *keep(illgraben, 32632).projections)), lat, lon)
    assert grid.code == "EPSG:32632"
    assert any("2193" in p or "NZTM" in p for p in grid.passed_over)


def test_a_site_without_projections_keeps_local_enu(mirror_path, world):
    """Mattmark has no GNSS configuration: its plan stays east/north of the centroid."""
    _, _, sites, gnss, _ = world
    mattmark = sites["Mattmark dam"]
    assert gnss[mattmark].projections == ()
    with Mirror.open(mirror_path, read_only=True) as m:
        (plan,) = site_plans(m, plan_rovers(world, mattmark))
    assert plan.axis_names == ("east of the rovers' centroid", "north of the rovers' centroid")
    assert plan.frame_label.startswith("local ENU")
    headers = [c.header for c in register.register_columns(plan)]
    assert any("centroid" in h for h in headers)


# ----------------------------------------------------------------------------- the pages

@needs_poppler
def test_the_register_and_plan_pages_name_the_grid(mirror_path, world, tmp_path):
    """The register page and the plan page of the site, drawn and read back: both name the
    grid and why."""
    site = world[1]
    with Mirror.open(mirror_path, read_only=True) as m:
        data = build_report(m, ReportOptions(site=site))
    specs = plan_pages(data)
    texts = {}
    for kind in ("register", "plan"):
        i = next(i for i, s in enumerate(specs) if s.kind == kind)
        write_pages(data, specs, i, i + 1, tmp_path / f"{kind}.pdf")
        texts[kind] = " ".join(pdf_text(tmp_path / f"{kind}.pdf").split())
    for kind, text in texts.items():
        assert "EPSG:2056" in text and "default projection" in text, kind
        assert "centroid" not in text, kind
    assert f"{LV95} E (m)" in texts["plan"] and f"{LV95} N (m)" in texts["plan"]
    assert "E (m)" in texts["register"] and "N (m)" in texts["register"]


def test_arrows_on_a_grid_plan_point_along_the_grid_not_local_north(world):
    """The analysis is in local east/north; the plan in a grid whose north differs by the
    meridian convergence (about 1 degree at Illgraben in UTM 32N, 1.4 degrees west of the
    zone's central meridian).  Each arrow must point where the rover moved as the grid
    shows it: the bearing on the grid of a step along its true azimuth (pyproj's Geod and
    the projection, not the code under test), and keep its length (ground mm)."""
    from pyproj import Geod

    analyses, site, _, gnss, positions = world
    utm = {site: keep(without_default(gnss[site]), 32632)}
    (plan,) = place_rovers(plan_rovers(world), positions, utm)
    assert plan.axis_names == (f"{UTM} E", f"{UTM} N")
    geod = Geod(ellps="WGS84")
    turned = 0
    for a, p in zip(analyses, plan.points):
        east, north = (a.end_displacement_m[k] * 1e3 for k in ("east", "north"))
        lat, lon, _ = positions[a.serial_number]
        lon2, lat2, _ = geod.fwd(lon, lat, np.degrees(np.arctan2(east, north)), 100.0)
        x, y = project(np.array([lat, lat2]), np.array([lon, lon2]), "EPSG:32632")
        on_grid = np.degrees(np.arctan2(x[1] - x[0], y[1] - y[0]))
        drawn = np.degrees(np.arctan2(p.d_east_mm, p.d_north_mm))
        assert abs((drawn - on_grid + 180) % 360 - 180) < 0.01, (a.serial_number, drawn, on_grid)
        assert np.hypot(p.d_east_mm, p.d_north_mm) == pytest.approx(np.hypot(east, north))
        turned += abs((np.degrees(np.arctan2(east, north)) - drawn + 180) % 360 - 180) > 0.5
    assert turned == len(analyses)  # local north is about a degree off the grid's here

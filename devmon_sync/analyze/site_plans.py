"""Site plans: the analysed rovers of each site at their latest positions, in one frame, with
their point numbers; what the report's plan pages and the GUI's plan view both draw
(``analysis.plan_figure.plan_view_figure``), computed once here so the two place the same points.

Positions are ``browse.gnss_positions`` (the median of each rover's last day of epochs),
projected into the analyses' frame when it is a grid (``--projection``).  When the analyses
are in local ENU (no ``--projection``), positions are given in the site's own grid, the one
engineers' drawings use, chosen among the site's projections by ``choose_site_grid``; a site
that offers none keeps east/north of its rovers' centroid.  Only positions change: the
displacements and velocities (the plan's arrows) stay in the analyses' frame.  Point numbers
come from the caller (the report details resolved by ``devmon_sync.report.points``).
``site_plans`` reads the mirror: call it where the mirror may be read (the report's build, a
GUI worker); ``place_rovers`` and ``choose_site_grid`` are the pure parts.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, replace

import numpy as np
from pyproj import CRS

from analysis import plan_figure
from analysis.geodesy import geodetic_to_enu
from analysis.pipeline import RoverAnalysis
from analysis.projections import crs_from_projection, grid_factors, project, require_projected
from devmon_sync.store import Mirror, browse, report_queries
from devmon_sync.store.report_queries import SiteGnss

#: the plan of the rovers that belong to no site is named so
NO_SITE = "devices without a site"

Position = tuple[float, float, float]  # lat, lon (degrees), ellipsoidal height (m; NaN: unknown)


@dataclass(frozen=True)
class PlanRover:
    """One analysed rover to place: its analysis, its site, how a plan names it when its
    position is unknown (``SitePlan.unplaced``) and its point number (None: none given)."""

    analysis: RoverAnalysis
    site_uuid: str | None
    site_name: str | None
    label: str
    number: str | None = None

    @property
    def serial_number(self) -> str:
        return self.analysis.serial_number


@dataclass(frozen=True)
class SitePlan:
    """The analysed rovers of one site on a plan: points in ``frame_label`` (metres),
    with ``unplaced`` the rovers whose position is unknown."""

    site_uuid: str | None
    site_name: str
    frame_label: str
    axis_names: tuple[str, str]
    points: tuple[plan_figure.PlanPoint, ...]
    serial_numbers: tuple[str, ...]  # of the points, in the same order
    unplaced: tuple[str, ...] = ()
    heights_m: tuple[float, ...] = ()  # ellipsoidal, of the points (NaN: not known)

    @property
    def coordinate_headers(self) -> tuple[str, str]:
        """The headers of a table's easting and northing columns (metres), naming the
        plan's axes: the site grid's name ("CH1903+ / LV95 E (m)"), else "Easting" for a
        chosen grid, else east/north of the centroid."""
        return _HEADERS.get(self.axis_names, (f"{self.axis_names[0]} (m)",
                                              f"{self.axis_names[1]} (m)"))


ENU_AXES = ("east of the rovers' centroid", "north of the rovers' centroid")
FRAME_GRID_AXES = ("grid easting", "grid northing")
_HEADERS = {ENU_AXES: ("East of\ncentroid\nm", "North of\ncentroid\nm"),
            FRAME_GRID_AXES: ("Easting\nm", "Northing\nm")}


# ----------------------------------------------------------------------------- site grid

#: Keys under which a service may state a site's default projection in its SiteGnssConfig
#: (whose fields the spec does not show): our reference server's, and the likely others.
STATED_DEFAULT_KEYS = ("defaultProjectionId", "defaultProjection", "default_projection_id",
                       "defaultProjectionID", "default_projection")
#: Degrees a position may lie outside a projection's stated area of use and still be placed
#: in it (a site near a UTM zone's edge is often drawn in the neighbouring zone).
AREA_MARGIN_DEG = 2.0


@dataclass(frozen=True)
class SiteGrid:
    """The grid a site's plan and register give positions in: ``crs`` (None: local ENU
    about the rovers' centroid), its ``name`` ("CH1903+ / LV95"), ``code`` ("EPSG:2056";
    None for a PROJ string), ``why`` it was chosen, the site's ``projection_id`` and the
    site's projections ``passed_over`` (each with the reason)."""

    crs: CRS | None
    name: str
    code: str | None
    why: str
    projection_id: int | None = None
    passed_over: tuple[str, ...] = ()

    @property
    def label(self) -> str:
        """The plan's frame label: which grid and why, in one short line."""
        code = f" ({self.code})" if self.code else ""
        passed = f"; passed over: {'; '.join(self.passed_over)}" if self.passed_over else ""
        return f"{self.name}{code}: {self.why}{passed}"


@dataclass(frozen=True)
class _Candidate:
    entry: dict
    crs: CRS
    horizontal: CRS

    @property
    def is_utm(self) -> bool:
        return self.horizontal.utm_zone is not None

    @property
    def kind(self) -> str | None:
        return self.entry.get("projection_type")

    def grid(self, why: str, passed_over: list[str]) -> SiteGrid:
        standard = self.kind == "standard"
        name = self.horizontal.name if standard else (
            self.entry.get("label") or f"site grid {self.entry.get('id')}")
        return SiteGrid(self.crs, name, f"EPSG:{self.entry.get('srid')}" if standard else None,
                        why, self.entry.get("id"), tuple(passed_over))


def choose_site_grid(site: SiteGnss | None, lat_deg: np.ndarray,
                     lon_deg: np.ndarray) -> SiteGrid:
    """The grid to give a site's positions in when the analyses are in local ENU, among the
    site's projections (``site``: as ``report_queries.site_gnss`` reads it; None: the site
    is unknown or there is none), for rovers at ``lat_deg``/``lon_deg``.  The rule:

    1. the site's stated default projection, when its SiteGnssConfig carries one under a
       key devmon recognises (``STATED_DEFAULT_KEYS``; our reference server says
       ``defaultProjectionId``).  The spec does not show that object's fields, so the
       value is only a hint: it is used when it names one of the site's projections;
    2. else a ``standard`` projection whose EPSG code is a projected CRS that is not a UTM
       zone: a national grid, what drawings are usually in;
    3. else a UTM zone;
    4. else a ``proj_string`` projection: the site's own grid;
    5. else local ENU about the rovers' centroid (crs None), as with no projections.

    Within a rule the lowest projection id wins.  A projection is passed over (named in
    ``SiteGrid.passed_over`` with the reason, never silently) when it cannot be read, is
    not a projected grid, its area of use misses the rovers by more than
    ``AREA_MARGIN_DEG`` or it cannot project them."""
    if site is None:
        return SiteGrid(None, "local ENU", None, "no projections known for the site")
    passed: dict[str, str] = {}  # projection id (as text): why it was passed over
    candidates = []
    for entry in sorted(site.projections, key=lambda p: (p.get("id") is None, p.get("id"))):
        candidate, problem = _candidate(entry, lat_deg, lon_deg)
        if candidate is not None:
            candidates.append(candidate)
        else:
            passed[str(entry.get("id"))] = problem
    key, stated = _stated_default(site)
    default = next((c for c in candidates if str(c.entry.get("id")) == stated), None)
    if default is not None:
        return default.grid("the site's default projection", list(passed.values()))
    if stated in passed:
        passed[stated] = f"the stated default, {passed[stated]}"
    elif key is not None:
        passed = {"": f"the stated default ({key} {stated}), which is none of the "
                      f"site's projections", **passed}
    rules = ((lambda c: c.kind == "standard" and not c.is_utm, "the site's national grid"),
             (lambda c: c.kind == "standard" and c.is_utm, "the site's UTM zone"),
             (lambda c: c.kind == "proj_string", "the site's own grid"))
    for fits, why in rules:
        chosen = next((c for c in candidates if fits(c)), None)
        if chosen is not None:
            return chosen.grid(why, list(passed.values()))
    why = ("none of the site's projections places its rovers" if site.projections
           else "the site lists no projection")
    return SiteGrid(None, "local ENU", None, why, None, tuple(passed.values()))


def _name(entry: Mapping) -> str:
    label = entry.get("label")
    return f"projection {entry.get('id')}" + (f" ({label})" if label else "")


def _candidate(entry: dict, lat_deg: np.ndarray, lon_deg: np.ndarray
               ) -> tuple[_Candidate | None, str]:
    """The projection as a candidate grid, or None and why it cannot be one here."""
    try:
        crs = crs_from_projection(entry)
        horizontal = require_projected(crs)
    except ValueError as err:
        return None, str(err) if str(err).startswith("projection ") \
            else f"{_name(entry)}: {err}"
    area = horizontal.area_of_use or crs.area_of_use
    if area is not None and not _covers(area.bounds, lat_deg, lon_deg):
        where = area.name.split(" - ")[0].split(";")[0]
        return None, f"{_name(entry)}: the rovers lie outside its area of use ({where})"
    try:
        project(lat_deg, lon_deg, crs)
    except ValueError as err:
        return None, f"{_name(entry)}: {err}"
    return _Candidate(entry, crs, horizontal), ""


def _covers(bounds: tuple[float, float, float, float], lat_deg: np.ndarray,
            lon_deg: np.ndarray) -> bool:
    """Whether every position lies within ``bounds`` (west, south, east, north; degrees;
    west > east across the antimeridian) widened by ``AREA_MARGIN_DEG``."""
    west, south, east, north = bounds
    m = AREA_MARGIN_DEG
    lat = np.asarray(lat_deg, dtype=float)
    lon = (np.asarray(lon_deg, dtype=float) + 180.0) % 360.0 - 180.0
    in_lat = (lat >= south - m) & (lat <= north + m)
    if west <= east:
        in_lon = (lon >= west - m) & (lon <= east + m)
    else:
        in_lon = (lon >= west - m) | (lon <= east + m)
    return bool(np.all(in_lat & in_lon))


def _stated_default(site: SiteGnss) -> tuple[str | None, str | None]:
    """(the key, the projection id as text) of the default projection the site's
    configuration states (a number, a text, or an object with an ``id``); (None, None)
    when it states none under a key devmon recognises."""
    key = next((k for k in STATED_DEFAULT_KEYS if site.config.get(k) is not None), None)
    if key is None:
        return None, None
    value = site.config[key]
    stated = value.get("id") if isinstance(value, Mapping) else value
    return key, str(stated).strip()


# ----------------------------------------------------------------------------- plans

def plan_positions(mirror: Mirror,
                   serials: Iterable[str] | None = None) -> dict[str, Position]:
    """Where a plan draws each rover (of ``serials``; None: every rover):
    ``browse.gnss_positions`` as (lat, lon, ellipsoidal height); a rover without a finite
    lat/lon is left out."""
    cols = browse.gnss_positions(mirror)
    wanted = None if serials is None else set(serials)
    return {sn: (float(lat), float(lon), float(h))
            for sn, lat, lon, h in zip(cols["serial_number"], cols["lat"], cols["lon"],
                                       cols["eh"])
            if (wanted is None or sn in wanted) and np.isfinite(lat) and np.isfinite(lon)}


def site_plans(mirror: Mirror, rovers: Sequence[PlanRover]) -> list[SitePlan]:
    """``place_rovers`` at the positions the mirror holds now, in the grids of their sites
    (two queries)."""
    sites = report_queries.site_gnss(mirror, sorted({r.site_uuid for r in rovers
                                                     if r.site_uuid is not None}))
    return place_rovers(rovers, plan_positions(mirror, [r.serial_number for r in rovers]),
                        sites)


def place_rovers(rovers: Sequence[PlanRover], positions: Mapping[str, Position],
                 sites: Mapping[str, SiteGnss] | None = None) -> list[SitePlan]:
    """One plan per site holding ``rovers``, in the order the sites first appear; a site
    none of whose rovers has a position has no plan.  Each rover at its position in the
    analysis frame (the site's first placed rover's) when it is a grid; else in the site's
    grid (``choose_site_grid`` among ``sites[site_uuid]``, the sites' GNSS configurations;
    None: none known), else east/north of the placed rovers' centroid; numbered with its
    ``number``."""
    by_site: dict[str | None, list[PlanRover]] = {}
    for r in rovers:
        by_site.setdefault(r.site_uuid, []).append(r)
    plans = []
    for site_uuid, members in by_site.items():
        placed = [r for r in members if r.serial_number in positions]
        unplaced = tuple(r.label for r in members if r.serial_number not in positions)
        name = members[0].site_name or NO_SITE
        if not placed:
            continue
        lat, lon, h = (np.array([positions[r.serial_number][i] for r in placed])
                       for i in range(3))
        # a rover placed at its device location has no height: the others' mean is as good
        # for a plan (it moves east/north by micrometres)
        h = np.where(np.isfinite(h), h, np.nanmean(h) if np.isfinite(h).any() else 0.0)
        site = None if site_uuid is None else (sites or {}).get(site_uuid)
        x, y, label, axes, turn = _placed(placed[0].analysis.frame, site, site_uuid, lat, lon,
                                          h)
        at = {r.serial_number: (float(xi), float(yi)) for r, xi, yi in zip(placed, x, y)}
        points = [plan_figure.turned(replace(p, number=r.number), float(t)) for p, r, t in
                  zip(plan_figure.plan_points([r.analysis for r in placed], at), placed, turn)]
        plans.append(SitePlan(site_uuid, name, label, axes, tuple(points),
                              tuple(r.serial_number for r in placed), unplaced,
                              tuple(float(v) for v in h)))
    return plans


def _placed(frame, site: SiteGnss | None, site_uuid: str | None, lat: np.ndarray,
            lon: np.ndarray, h: np.ndarray
            ) -> tuple[np.ndarray, np.ndarray, str, tuple[str, str], np.ndarray]:
    """(x, y, frame label, axis names, turn) of positions: in the analysis frame's grid,
    else in the site's grid, else east/north of their centroid.  ``turn`` (degrees,
    clockwise) takes the analyses' displacements into the plan's axes: 0 but where local
    east/north displacements are drawn on a grid, whose north is the meridian convergence
    away (about a degree in a UTM zone 100 km off its central meridian)."""
    none = np.zeros(lat.shape)
    if frame.crs is not None:
        x, y = project(lat, lon, frame.crs)
        return x, y, frame.label, FRAME_GRID_AXES, none
    grid = (choose_site_grid(site, lat, lon) if site_uuid is not None
            else SiteGrid(None, "local ENU", None, "devices without a site"))
    if grid.crs is not None:
        x, y = project(lat, lon, grid.crs)
        turn = grid_factors(lat, lon, grid.crs).total_convergence_deg
        return x, y, grid.label, (f"{grid.name} E", f"{grid.name} N"), turn
    x, y, _ = geodetic_to_enu(lat, lon, h, (float(lat.mean()), float(lon.mean()),
                                            float(h.mean())))
    return x, y, grid.label, ENU_AXES, none


def plan_of_site(plans: Sequence[SitePlan], site_uuid: str | None) -> SitePlan | None:
    """The plan of ``site_uuid`` among ``plans`` (None: it has none)."""
    return next((p for p in plans if p.site_uuid == site_uuid), None)


__all__ = [
    "AREA_MARGIN_DEG",
    "ENU_AXES",
    "FRAME_GRID_AXES",
    "NO_SITE",
    "STATED_DEFAULT_KEYS",
    "PlanRover",
    "SiteGrid",
    "SitePlan",
    "choose_site_grid",
    "place_rovers",
    "plan_of_site",
    "plan_positions",
    "site_plans",
]

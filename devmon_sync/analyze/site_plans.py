"""Site plans: the analysed rovers of each site at their latest positions, in one frame, with
their point numbers; what the report's plan pages and the GUI's plan view both draw
(``analysis.plan_figure.plan_view_figure``), computed once here so the two place the same points.

Positions are ``browse.gnss_positions`` (the median of each rover's last day of epochs),
projected into the analyses' frame when it is a grid, else east/north of the site's rovers'
centroid.  Point numbers come from the caller (the report details resolved by
``devmon_sync.report.points``).  ``site_plans`` reads the mirror: call it where the mirror
may be read (the report's build, a GUI worker); ``place_rovers`` is the pure part.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, replace

import numpy as np

from analysis import plan_figure
from analysis.geodesy import geodetic_to_enu
from analysis.pipeline import RoverAnalysis
from analysis.projections import project
from devmon_sync.store import Mirror, browse

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
    """``place_rovers`` at the positions the mirror holds now (one query)."""
    return place_rovers(rovers, plan_positions(mirror, [r.serial_number for r in rovers]))


def place_rovers(rovers: Sequence[PlanRover],
                 positions: Mapping[str, Position]) -> list[SitePlan]:
    """One plan per site holding ``rovers``, in the order the sites first appear; a site
    none of whose rovers has a position has no plan.  Each rover at its position in the
    analysis frame (the site's first placed rover's): projected for a grid, else east/north
    of the placed rovers' centroid; numbered with its ``number``."""
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
        frame = placed[0].analysis.frame
        if frame.crs is not None:
            x, y = project(lat, lon, frame.crs)
            label, axes = frame.label, ("grid easting", "grid northing")
        else:
            x, y, _ = geodetic_to_enu(lat, lon, h, (float(lat.mean()), float(lon.mean()),
                                                    float(h.mean())))
            label = "local ENU"
            axes = ("east of the rovers' centroid", "north of the rovers' centroid")
        at = {r.serial_number: (float(xi), float(yi)) for r, xi, yi in zip(placed, x, y)}
        points = [replace(p, number=r.number) for p, r in
                  zip(plan_figure.plan_points([r.analysis for r in placed], at), placed)]
        plans.append(SitePlan(site_uuid, name, label, axes, tuple(points),
                              tuple(r.serial_number for r in placed), unplaced,
                              tuple(float(v) for v in h)))
    return plans


def plan_of_site(plans: Sequence[SitePlan], site_uuid: str | None) -> SitePlan | None:
    """The plan of ``site_uuid`` among ``plans`` (None: it has none)."""
    return next((p for p in plans if p.site_uuid == site_uuid), None)


__all__ = ["NO_SITE", "PlanRover", "SitePlan", "place_rovers", "plan_of_site",
           "plan_positions", "site_plans"]

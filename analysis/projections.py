"""Positions on the map grid a dam owner's drawings use: projected coordinates, point scale
factor, meridian convergence, and displacements in grid easting/northing.

A projected CRS (a UTM zone, a national grid, a site's own transverse Mercator) is what the
drawings are in, and grid displacements are what gets reported against them.  Grid metres are
not ground metres, and grid north is not true north: at a point, a grid displacement is the
local east/north (ENU) displacement turned by the meridian convergence and stretched by the
point scale factor k (and by R/(R+h), the elevation factor, because ENU metres are at the
point's height and the projection maps the ellipsoid).  Near the edge of a UTM zone that is
~0.1 % in length and a couple of degrees in direction: millimetres over metres of motion.
This module gives both numbers, so a report can say which frame a millimetre is in.

Conventions, everywhere in this module:

* Arguments are (latitude, longitude) in degrees in that order, as in ``analysis.geodesy``;
  pyproj is driven with ``always_xy=True``, so internally and for every CRS the order is
  (longitude, latitude) in and (easting, northing) out, whatever axis order the CRS's EPSG
  definition declares (EPSG:2193 is northing-first; results here are still easting-first).
* Grid coordinates are returned in metres even when the CRS is in feet (``*_m`` names);
  a CRS whose axes point west or south (South African Lo, S-JTSK EPSG:5513) is refused
  rather than reported with flipped signs.
* Longitudes in any 360-degree convention are accepted (PBO's 0..360, NGL's -268.9).
* Meridian convergence ``gamma`` is the angle from true north to grid north, clockwise
  positive: grid bearing = true azimuth - gamma.  On UTM it is ~ (lon - lon0) * sin(lat):
  positive east of the central meridian in the northern hemisphere.  A grid on another
  datum adds the datum shift's own turn (arc-seconds) and scale (0 to ~20 ppm), measured
  and reported apart (``GridFactors.datum_rotation_deg``, ``datum_scale``).

Transformers are built once per (source, target) pair *and thread*: pyproj ties each PROJ
object to its creating thread's context (pyproj 3.7 frees that context with the thread state,
and an object freed on another thread used a dangling context: a segfault at exit of the
GUI).  Only numpy and pyproj are used.
"""

from __future__ import annotations

import threading
from collections.abc import Mapping
from dataclasses import dataclass
from functools import lru_cache

import numpy as np
from pyproj import CRS, Geod, Proj, Transformer
from pyproj.exceptions import CRSError

from analysis.geodesy import normalize_longitude

LATLON_CRS = "EPSG:4326"  # the srid the service gives epoch positions in
HEIGHT_TYPES = ("ellipsoidal", "orthometric")
ACCEPTED_CRS_FORMS = ("an EPSG code (EPSG:32633 or 32633), a PROJ string "
                      "(+proj=tmerc +lat_0=... +lon_0=... +ellps=WGS84) or a WKT definition")
FACTORS_METHOD = ("PROJ proj_factors via pyproj.Proj.get_factors at the point's latitude and "
                  "longitude on the projection's own datum; k is the meridional scale")
# Conformal when the meridional and parallel scales agree and meridians cross parallels at
# right angles to within PROJ's numerical differentiation (~1e-9 in scale, ~1e-6 degrees).
_CONFORMAL_SCALE_TOL = 1e-7
_CONFORMAL_ANGLE_TOL_DEG = 1e-4


# ----------------------------------------------------------------------------- reading CRSs

def parse_crs(text: str | int | CRS) -> CRS:
    """A CRS from what an engineer types: ``EPSG:32633``, ``32633``, a PROJ string
    (``+proj=tmerc ...``) or a WKT definition; a ``pyproj.CRS`` is returned as it is.

    A ``ValueError`` naming the input and the accepted forms when pyproj cannot read it (the
    pyproj error is not chained: it means nothing to the engineer reading the message)."""
    if isinstance(text, CRS):
        return text
    if isinstance(text, (int, np.integer)) and not isinstance(text, bool):
        text = f"EPSG:{int(text)}"
    if not isinstance(text, str):
        raise ValueError(f"cannot read {text!r} as a coordinate reference system: give "
                         f"{ACCEPTED_CRS_FORMS}")
    stripped = text.strip()
    if stripped.lower() == "enu":
        raise ValueError("'enu' is the local east-north-up frame, not a coordinate reference "
                         f"system: for grid coordinates give {ACCEPTED_CRS_FORMS}")
    if stripped.isdigit():
        stripped = f"EPSG:{stripped}"
    if stripped:
        try:
            return CRS.from_user_input(stripped)
        except (CRSError, TypeError, ValueError):
            pass
    raise ValueError(f"cannot read {_short(text)!r} as a coordinate reference system: give "
                     f"{ACCEPTED_CRS_FORMS}")


def crs_from_projection(entry: Mapping) -> CRS:
    """The CRS of one entry of a solution's ``projectionMetadata``: ``projectionType``
    ``standard`` carries an EPSG ``srid``, ``proj_string`` a ``projString``.  The store's
    snake_case rows (``projection_type``, ``proj_string``) are read too.  A ``ValueError``
    naming the entry (id and label) when it is incomplete or unreadable."""
    name = f"projection {entry.get('id')} ({entry.get('label')!r})"
    kind = entry.get("projectionType", entry.get("projection_type"))
    try:
        if kind == "standard":
            srid = entry.get("srid")
            if isinstance(srid, str) and srid.strip().isdigit():
                srid = int(srid)
            if isinstance(srid, bool) or not isinstance(srid, (int, np.integer, float)) \
                    or not float(srid).is_integer():
                raise ValueError(f"a standard projection needs an integer EPSG srid, got "
                                 f"{srid!r}")
            return parse_crs(f"EPSG:{int(srid)}")
        if kind == "proj_string":
            text = entry.get("projString", entry.get("proj_string"))
            if not isinstance(text, str) or not text.strip():
                raise ValueError(f"a proj_string projection needs a projString, got {text!r}")
            return parse_crs(text)
        raise ValueError(f"unknown projectionType {kind!r}: expected 'standard' or "
                         f"'proj_string'")
    except ValueError as err:
        raise ValueError(f"{name}: {err}") from None


def _short(text, limit: int = 80) -> str:
    text = str(text)
    return text if len(text) <= limit else text[:limit] + "..."


@dataclass(frozen=True)
class _Grid:
    """A projected target, checked: the horizontal CRS and its unit in metres."""

    crs: CRS  # the horizontal (projected) CRS; a compound CRS's projected part
    unit_m: float  # metres per CRS unit (1 for metres, 0.3048006096... for US survey feet)


def _projected(crs) -> _Grid:
    """The projected (horizontal) part of ``crs``, or a ``ValueError`` saying why it cannot
    carry grid displacements: geographic or geocentric, axes pointing west/south, mixed
    units."""
    crs = parse_crs(crs)
    horizontal = crs
    if crs.is_compound:
        horizontal = next((s for s in crs.sub_crs_list if s.is_projected or s.is_geographic),
                          crs.sub_crs_list[0])
    if not horizontal.is_projected:
        kind = ("a geographic (degrees)" if horizontal.is_geographic
                else f"a {horizontal.type_name.lower().removesuffix(' crs')}")
        raise ValueError(f"{crs.name} is {kind} CRS, not a projection: millimetres of "
                         f"displacement need a projected CRS (a UTM zone such as EPSG:32632, "
                         f"a national grid, the site's grid) or 'enu' for the local "
                         f"east-north-up frame")
    axes = [a for a in horizontal.axis_info if a.direction not in ("up", "down")][:2]
    directions = [a.direction.lower() for a in axes]
    # East/north axes, in either order, or a polar grid whose axes both run along meridians.
    if not (set(directions) <= {"east", "north"} or len(set(directions)) == 1):
        raise ValueError(f"{crs.name} has axes pointing {'/'.join(directions)}: devmon reports "
                         f"easting/northing, so choose the east/north variant of this grid "
                         f"(for S-JTSK EPSG:5514 rather than EPSG:5513)")
    units = {a.unit_conversion_factor for a in axes}
    if len(units) != 1:
        raise ValueError(f"{crs.name} has different units on its two axes; not supported")
    return _Grid(horizontal, float(units.pop()))


def require_projected(crs) -> CRS:
    """The projected (horizontal) CRS of ``crs`` (a compound CRS's projected part), or the
    ``ValueError`` ``project`` would raise: for checking a user's choice up front."""
    return _projected(crs).crs


def _geographic(source_crs) -> CRS:
    source = parse_crs(source_crs)
    if not source.is_geographic:
        raise ValueError(f"source CRS {source.name} is not geographic: positions must be "
                         f"latitude/longitude (the solution's srid, EPSG:4326 in practice)")
    return source


# ----------------------------------------------------------------------------- transformers

_PER_THREAD = threading.local()


def _per_thread_cache(function):
    """Like ``lru_cache`` (unbounded: a few CRS pairs per run), but one cache per thread, so
    each PROJ object is built, used and freed on one thread."""
    def cached(*key):
        caches = _PER_THREAD.__dict__.setdefault("caches", {})
        cache = caches.setdefault(function.__name__, {})
        if key not in cache:
            cache[key] = function(*key)
        return cache[key]
    cached.__doc__, cached.__name__ = function.__doc__, function.__name__
    return cached


@_per_thread_cache
def _cached_transformer(source_srs: str, target_srs: str) -> Transformer:
    """Building a Transformer costs milliseconds (a proj.db search for the operation); each
    (source, target) pair is built once per thread, keyed by the CRSs' definition strings."""
    return Transformer.from_crs(CRS.from_user_input(source_srs), CRS.from_user_input(target_srs),
                                always_xy=True)


@_per_thread_cache
def _cached_proj(srs: str) -> Proj:
    """The bare projection of a CRS (for its scale factors and inverse), built once."""
    return Proj(CRS.from_user_input(srs))


def transformer(source_crs, target_crs) -> Transformer:
    """The shared ``always_xy=True`` Transformer between two CRSs: (longitude, latitude) or
    (easting, northing) in, the same order out, whatever the EPSG axis order."""
    return _cached_transformer(parse_crs(source_crs).srs, parse_crs(target_crs).srs)


def _describe(transformer_: Transformer, easting_m: float, northing_m: float,
              unit_m: float) -> str:
    """PROJ's description of the operation used at a grid point, with its accuracy: where
    several candidate datum shifts exist (OSGB36) PROJ picks per point, so ask it for the
    one used there (one inverse transform).  Informational: best effort under threads."""
    try:
        transformer_.transform(easting_m / unit_m, northing_m / unit_m,
                               direction="INVERSE")
        operation = transformer_.get_last_used_operation()
    except Exception:  # noqa: BLE001 - a description must never fail an analysis
        return transformer_.description
    accuracy = getattr(operation, "accuracy", -1.0)
    return operation.description + (f" (accuracy {accuracy:g} m)" if accuracy and
                                     accuracy > 0 else " (accuracy unknown)")


def _latlon(lat_deg, lon_deg) -> tuple[np.ndarray, np.ndarray]:
    lat = np.asarray(lat_deg, dtype=np.float64)
    lon = np.asarray(lon_deg, dtype=np.float64)
    outside = (lon < -180.0) | (lon > 180.0)
    if outside.any():  # wrap only those: in-range values go to PROJ bit for bit
        lon = np.where(outside, normalize_longitude(lon), lon)
    lat, lon = np.broadcast_arrays(lat, lon)
    bad = np.abs(lat) > 90.0
    if bad.any():
        raise ValueError(f"{int(bad.sum())} latitude(s) outside -90..90 degrees (first "
                         f"{lat[bad].flat[0]!r}): latitude and longitude swapped?")
    return lat, lon


def _check_projected(lat, lon, x, y, crs: CRS) -> None:
    failed = np.isfinite(lat) & np.isfinite(lon) & ~(np.isfinite(x) & np.isfinite(y))
    if failed.any():
        raise ValueError(f"{int(failed.sum())} of {lat.size} positions cannot be projected in "
                         f"{crs.name} (first at lat {lat[failed].flat[0]:.6f}, lon "
                         f"{lon[failed].flat[0]:.6f}): outside the projection's domain")


# ----------------------------------------------------------------------------- projecting

def project(lat_deg, lon_deg, crs, *, source_crs=LATLON_CRS) -> tuple[np.ndarray, np.ndarray]:
    """Grid easting and northing (metres, in that order) of geodetic positions.

    ``lat_deg``/``lon_deg`` are degrees in ``source_crs`` (the solution's srid, EPSG:4326),
    arrays of any (broadcastable) shape, projected in one vectorised call.  ``crs`` is
    anything ``parse_crs`` reads; it must be projected (a geographic CRS is refused: degrees
    are not what millimetres are measured in).  Feet are converted to metres.  NaN positions
    give NaN; a ``ValueError`` when PROJ cannot project a finite position.

    The transformation is 2D, as the service's own projected coordinates are: where the
    target is on another datum (CH1903+, OSGB36) PROJ applies the datum shift at height 0,
    which moves absolute coordinates by ~2 cm per km of height against a 3D shift, and the
    shift itself is only as good as its published accuracy (metres for a 3-parameter
    Helmert; ``GridDisplacement.transformation`` names it).  Both are constant at a site, so
    displacements are unaffected (< 0.03 mm per metre of vertical motion)."""
    grid = _projected(crs)
    source = _geographic(source_crs)
    lat, lon = _latlon(lat_deg, lon_deg)
    x, y = _cached_transformer(source.srs, grid.crs.srs).transform(lon, lat)
    x = np.asarray(x, dtype=np.float64) * grid.unit_m
    y = np.asarray(y, dtype=np.float64) * grid.unit_m
    _check_projected(lat, lon, x, y, grid.crs)
    return x, y


# ----------------------------------------------------------------------------- grid factors

@dataclass(frozen=True)
class GridFactors:
    """Scale and direction of a projection at points, relating grid to ground and to ENU.

    From the projection itself (PROJ): ``scale_factor`` k, grid length / ellipsoid length of
    a short line at the point (the meridional scale; equal to ``parallel_scale`` for a
    conformal projection, ``conformal``), and ``convergence_deg`` gamma, the angle from true
    north to grid north, clockwise positive (grid bearing = true azimuth - gamma).

    From the datum transformation between the positions' CRS (WGS 84) and the projection's
    datum, measured on short lines: ``datum_scale`` (1 for WGS 84 grids and for pure datum
    translations such as CH1903+; 1 + 20 ppm for the 7-parameter OSGB36 Helmert) and
    ``datum_rotation_deg``, the azimuth on the projection's datum of a step due north on
    WGS 84 (arc-seconds at most).  ``total_convergence_deg`` = gamma - datum rotation is the
    angle from ENU north to grid north.

    ``radius_m``: Gaussian mean radius sqrt(M N) of the projection's ellipsoid at the point.
    With a height: ``height_m`` is the ellipsoidal height above the projection's own
    ellipsoid (a WGS 84 height converted: a CH1903+ Bessel height is ~51 m lower in the
    Alps), ``elevation_factor`` = R / (R + h) and ``combined_factor`` = k * datum_scale * R /
    (R + h): grid distance = combined factor * ground distance (horizontal, at the point's
    height), so ground = grid / combined factor.  ``method`` says where k came from."""

    scale_factor: np.ndarray
    meridional_scale: np.ndarray
    parallel_scale: np.ndarray
    convergence_deg: np.ndarray
    conformal: bool
    datum_scale: np.ndarray
    datum_rotation_deg: np.ndarray
    radius_m: np.ndarray
    height_m: np.ndarray | None
    elevation_factor: np.ndarray | None
    combined_factor: np.ndarray | None
    crs_name: str
    method: str = FACTORS_METHOD

    @property
    def total_convergence_deg(self) -> np.ndarray:
        """Angle from ENU (WGS 84) north to grid north, clockwise positive, degrees."""
        return self.convergence_deg - self.datum_rotation_deg

    def _combined(self, what: str) -> np.ndarray:
        if self.combined_factor is None:
            raise ValueError(f"{what} needs the elevation factor: call grid_factors with h_m "
                             f"(ellipsoidal height, m)")
        return self.combined_factor

    def ground_distance_m(self, grid_distance_m) -> np.ndarray:
        """Horizontal ground distance (m, at the point's height) of a short grid distance."""
        return np.asarray(grid_distance_m, np.float64) / self._combined("ground distance")

    def grid_distance_m(self, ground_distance_m) -> np.ndarray:
        """Grid distance (m) of a short horizontal ground distance at the point's height."""
        return np.asarray(ground_distance_m, np.float64) * self._combined("grid distance")

    def _similarity(self, what: str) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
        if not self.conformal:
            raise ValueError(f"{self.crs_name} is not conformal (its scale depends on "
                             f"direction): no rotation plus one scale relates ENU to its grid")
        gamma = np.radians(self.total_convergence_deg)
        return self._combined(what), np.cos(gamma), np.sin(gamma)

    def enu_to_grid(self, east_m, north_m) -> tuple[np.ndarray, np.ndarray]:
        """Grid easting/northing displacement (m) of a small local east/north displacement
        (m) at the point: rotated by the total convergence, scaled by the combined factor."""
        c, cos_g, sin_g = self._similarity("ENU to grid")
        e, n = np.asarray(east_m, np.float64), np.asarray(north_m, np.float64)
        return c * (e * cos_g - n * sin_g), c * (e * sin_g + n * cos_g)

    def grid_to_enu(self, d_easting_m, d_northing_m) -> tuple[np.ndarray, np.ndarray]:
        """Local east/north displacement (m) of a small grid displacement (m) at the point:
        the inverse of ``enu_to_grid``."""
        c, cos_g, sin_g = self._similarity("grid to ENU")
        de, dn = np.asarray(d_easting_m, np.float64), np.asarray(d_northing_m, np.float64)
        return (de * cos_g + dn * sin_g) / c, (-de * sin_g + dn * cos_g) / c


def gaussian_radius_m(lat_deg, semi_major_m: float = 6_378_137.0,
                      semi_minor_m: float = 6_356_752.314245179) -> np.ndarray:
    """Gaussian mean radius of curvature sqrt(M N) (m) at geodetic latitudes (degrees): the
    mean over azimuths of the ellipsoid's radius, standard for the elevation factor (the
    radius in a line's own azimuth differs by < 0.4 %, i.e. < 1e-6 of the line's length at
    1,600 m above the ellipsoid).  Default ellipsoid WGS 84."""
    m, n = _radii_m(lat_deg, semi_major_m, semi_minor_m)
    return np.sqrt(m * n)


def _radii_m(lat_deg, a: float, b: float) -> tuple[np.ndarray, np.ndarray]:
    """Meridional (M) and prime-vertical (N) radii of curvature, m."""
    e2 = 1.0 - (b / a) ** 2
    s = np.sin(np.radians(np.asarray(lat_deg, np.float64)))
    w2 = 1.0 - e2 * s * s
    return a * (1.0 - e2) / w2 ** 1.5, a / np.sqrt(w2)


@lru_cache(maxsize=16)
def _cached_geod(a: float, b: float) -> Geod:
    return Geod(a=a, b=b)


_DATUM_STEP_M = 100.0  # short enough to be local, long enough for 1e-10 in scale


def grid_factors(lat_deg, lon_deg, crs, *, h_m=None, source_crs=LATLON_CRS) -> GridFactors:
    """Point scale factor, meridian convergence, the datum transformation's scale and
    rotation and, given ellipsoidal heights ``h_m`` (m, in ``source_crs``: WGS 84 for
    EPSG:4326), elevation and combined factors at positions (degrees).  See ``GridFactors``
    for the definitions and sign conventions.

    k and gamma come from PROJ (numerical derivatives of the projection, ~1e-10 in k) at the
    position's latitude/longitude on the projection's own datum (the projected point mapped
    back through the bare projection), so a national grid on Bessel or Airy gets its own
    ellipsoid's factors.  The datum scale and rotation compare 100 m steps north and east on
    the source ellipsoid with their images on the projection's ellipsoid (lengths taken at
    the points' heights, so a pure translation gives exactly 1)."""
    grid = _projected(crs)
    source = _geographic(source_crs)
    lat, lon = _latlon(lat_deg, lon_deg)
    h = np.broadcast_to(np.asarray(0.0 if h_m is None else h_m, np.float64), lat.shape)
    target3d = grid.crs.to_3d()
    forward = _cached_transformer(source.to_3d().srs, target3d.srs)
    h_unit = target3d.axis_info[2].unit_conversion_factor
    proj = _cached_proj(grid.crs.srs)

    def on_projection_datum(lat_s, lon_s):
        x, y, hh = (np.asarray(v, np.float64) for v in forward.transform(lon_s, lat_s, h))
        lon_p, lat_p = (np.asarray(v, np.float64) for v in proj(x, y, inverse=True))
        return x, y, lat_p, lon_p, hh * h_unit

    x, y, lat_p, lon_p, height = on_projection_datum(lat, lon)
    _check_projected(lat, lon, x, y, grid.crs)
    f = proj.get_factors(lon_p, lat_p)
    meridional = np.asarray(f.meridional_scale, np.float64)
    parallel = np.asarray(f.parallel_scale, np.float64)
    angle = np.asarray(f.meridian_parallel_angle, np.float64)
    finite = np.isfinite(meridional) & np.isfinite(parallel) & np.isfinite(angle)
    conformal = bool(np.all(np.abs(meridional - parallel)[finite]
                            <= _CONFORMAL_SCALE_TOL * meridional[finite])
                     and np.all(np.abs(angle[finite] - 90.0) <= _CONFORMAL_ANGLE_TOL_DEG))

    src_ell, dst_ell = source.ellipsoid, grid.crs.ellipsoid
    src_ab = (src_ell.semi_major_metre, src_ell.semi_minor_metre)
    dst_ab = (dst_ell.semi_major_metre, dst_ell.semi_minor_metre)
    src_geod, dst_geod = _cached_geod(*src_ab), _cached_geod(*dst_ab)
    m_s, n_s = _radii_m(lat, *src_ab)
    m_t, n_t = _radii_m(lat_p, *dst_ab)
    scales, rotation = [], None
    for azimuth, r_s, r_t in ((0.0, m_s, m_t), (90.0, n_s, n_t)):
        lon_q, lat_q, _ = src_geod.fwd(lon, lat, np.full(lat.shape, azimuth),
                                       np.full(lat.shape, _DATUM_STEP_M))
        _, _, lat_qp, lon_qp, h_q = on_projection_datum(np.asarray(lat_q), np.asarray(lon_q))
        az, _, dist = (np.asarray(v, np.float64) for v in dst_geod.inv(lon_p, lat_p, lon_qp,
                                                                         lat_qp))
        # lengths at the points' heights: a datum translation moves heights, not lengths
        length_t = dist * (r_t + (height + h_q) / 2.0) / r_t
        scales.append(length_t / (_DATUM_STEP_M * (r_s + h) / r_s))
        if rotation is None:
            rotation = (az + 180.0) % 360.0 - 180.0
    datum_scale = (scales[0] + scales[1]) / 2.0

    radius = gaussian_radius_m(lat_p, *dst_ab)
    elevation = combined = None
    out_height = None
    if h_m is not None:
        out_height = height
        elevation = radius / (radius + height)
        combined = meridional * datum_scale * elevation
    return GridFactors(meridional, meridional, parallel,
                       np.asarray(f.meridian_convergence, np.float64), conformal, datum_scale,
                       rotation, radius, out_height, elevation, combined, grid.crs.name)


def enu_to_grid_rotation(lat_deg: float, lon_deg: float, h_m: float, crs, *,
                         source_crs=LATLON_CRS) -> np.ndarray:
    """The 2x2 matrix ``A`` with (d_easting, d_northing) = A @ (east, north) for a small
    displacement at the point (lat, lon degrees; ellipsoidal height m):
    ``A = c [[cos g, -sin g], [sin g, cos g]]`` with g the total convergence (ENU north to
    grid north, clockwise: the meridian convergence less the datum rotation) and c the
    combined factor k * datum_scale * R/(R+h).  Its inverse takes grid displacements back to
    ENU.  A ``ValueError`` for a non-conformal projection (no single scale exists)."""
    factors = grid_factors(float(lat_deg), float(lon_deg), crs, h_m=float(h_m),
                           source_crs=source_crs)
    c, cos_g, sin_g = (float(v) for v in factors._similarity("the ENU to grid rotation"))
    return c * np.array([[cos_g, -sin_g], [sin_g, cos_g]])


# ----------------------------------------------------------------------------- displacement

@dataclass(frozen=True)
class GridDisplacement:
    """Grid displacement of each epoch from a reference position, metres.

    ``easting_m``/``northing_m`` are the epochs' grid coordinates, ``d_easting_m``/
    ``d_northing_m`` their differences from the reference's, ``d_height_m`` the change of
    the height the caller passed, which is ``height_type`` (ellipsoidal or orthometric, on
    ``vertical_datum`` when known): the two differ by the geoid undulation (tens of metres)
    and their changes by its slope (centimetres across a site), so they are never mixed.
    Grid displacements are not ENU: see ``GridFactors``.  ``transformation`` is PROJ's
    description of the operation used (which datum shift) and its accuracy."""

    easting_m: np.ndarray
    northing_m: np.ndarray
    d_easting_m: np.ndarray
    d_northing_m: np.ndarray
    d_height_m: np.ndarray
    reference_easting_m: float
    reference_northing_m: float
    reference_height_m: float
    height_type: str
    vertical_datum: str | None
    crs_name: str
    transformation: str


def grid_displacement(lat_deg, lon_deg, h_m, crs,
                      ref: tuple[float, float, float] | int | np.ndarray, *, height_type: str,
                      vertical_datum: str | None = None,
                      source_crs=LATLON_CRS) -> GridDisplacement:
    """Grid easting/northing (m) and height displacements of positions (degrees; heights in
    metres of the kind ``height_type`` names) from a reference, in a projected ``crs``.

    ``ref`` is, as for ENU, the reference position (lat0_deg, lon0_deg, h0_m) with h0 of the
    same height type; or the index of the reference epoch; or a boolean mask of epochs
    whose mean grid position and height is the reference (a quiet baseline window).
    ``height_type`` is required, so that a displacement is never labelled with a height it
    is not a change of."""
    if height_type not in HEIGHT_TYPES:
        raise ValueError(f"height_type {height_type!r}: use one of {', '.join(HEIGHT_TYPES)}")
    grid = _projected(crs)
    source = _geographic(source_crs)
    easting, northing = project(lat_deg, lon_deg, crs, source_crs=source)
    h = np.broadcast_to(np.asarray(h_m, np.float64), easting.shape)
    if isinstance(ref, (int, np.integer)) and not isinstance(ref, bool):
        e0, n0, h0 = (float(v.reshape(-1)[ref]) for v in (easting, northing, h))
    elif isinstance(ref, np.ndarray) and ref.dtype == bool:
        if ref.shape != easting.shape or not ref.any():
            raise ValueError(f"reference mask of shape {ref.shape} selecting {int(ref.sum())} "
                             f"epochs: it must select at least one of the {easting.size}")
        e0, n0, h0 = (float(np.nanmean(v[ref])) for v in (easting, northing, h))
    else:
        try:
            lat0, lon0, h0 = (float(v) for v in ref)
        except (TypeError, ValueError):
            raise ValueError(f"reference {ref!r}: give (lat_deg, lon_deg, h_m), an epoch "
                             f"index or a boolean mask of epochs") from None
        e0, n0 = (float(v) for v in project(lat0, lon0, crs, source_crs=source))
    description = _describe(_cached_transformer(source.srs, grid.crs.srs), e0, n0, grid.unit_m)
    return GridDisplacement(easting, northing, easting - e0, northing - n0, h - h0, e0, n0, h0,
                            height_type, vertical_datum, grid.crs.name, description)

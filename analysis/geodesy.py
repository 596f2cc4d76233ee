"""Geodetic coordinates to a local east-north-up frame, exactly.

Positions go geodetic (latitude, longitude, ellipsoidal height) to Earth-centred Cartesian
(ECEF) on the WGS 84 ellipsoid, and the ECEF difference from a reference point is rotated into
the reference point's local frame.  No flat-earth shortcut: the closed-form ECEF formula is
exact, and float64 keeps the difference of two ~6,400 km coordinates to ~1 nm, so the result
is right to far below a millimetre at any distance a monitoring network spans.

The arithmetic is plain numpy on whole arrays (millions of epochs at once); pyproj's geocentric
conversion (EPSG:4979 to EPSG:4978) gives bit-identical ECEF coordinates (tested).
"""

from __future__ import annotations

import numpy as np

# WGS 84 (NIMA TR8350.2); GRS 80 differs in the flattening by 1e-10, 0.1 mm in ECEF.
WGS84_A_M = 6_378_137.0
WGS84_F = 1.0 / 298.257223563
WGS84_E2 = WGS84_F * (2.0 - WGS84_F)


def normalize_longitude(lon_deg) -> np.ndarray:
    """Longitudes wrapped into [-180, 180) degrees.  Real files write them as 0..360 east
    (PBO) or even below -180 (NGL's ``-268.896`` is 91.104 E)."""
    lon = np.asarray(lon_deg, dtype=np.float64)
    return (lon + 180.0) % 360.0 - 180.0


def geodetic_to_ecef(lat_deg, lon_deg, h_m) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """WGS 84 geodetic latitude, longitude (degrees) and ellipsoidal height (metres) as ECEF
    X, Y, Z in metres.  Longitudes in any 360-degree convention are accepted (wrapped first,
    so every convention gives the same bits); a latitude beyond +-90 degrees is refused (it
    is most often latitude and longitude swapped)."""
    lat_deg = np.asarray(lat_deg, dtype=np.float64)
    if np.any(np.abs(lat_deg) > 90.0):
        raise ValueError(f"latitude {lat_deg[np.abs(lat_deg) > 90.0].flat[0]:g} is beyond "
                         f"+-90 degrees: are latitude and longitude swapped?")
    lat = np.radians(lat_deg)
    lon = np.radians(normalize_longitude(lon_deg))
    h = np.asarray(h_m, dtype=np.float64)
    sin_lat = np.sin(lat)
    cos_lat = np.cos(lat)
    n = WGS84_A_M / np.sqrt(1.0 - WGS84_E2 * sin_lat * sin_lat)  # prime vertical radius
    r = (n + h) * cos_lat
    return r * np.cos(lon), r * np.sin(lon), (n * (1.0 - WGS84_E2) + h) * sin_lat


def enu_rotation(lat0_deg: float, lon0_deg: float) -> np.ndarray:
    """The 3x3 matrix turning an ECEF difference into (east, north, up) at the point."""
    lat, lon = np.radians(lat0_deg), np.radians(lon0_deg)
    sl, cl, so, co = np.sin(lat), np.cos(lat), np.sin(lon), np.cos(lon)
    return np.array([[-so, co, 0.0],
                     [-sl * co, -sl * so, cl],
                     [cl * co, cl * so, sl]])


def geodetic_to_enu(lat_deg, lon_deg, h_m, ref: tuple[float, float, float]
                    ) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """East, north and up (metres) of each position in the local frame at ``ref`` =
    (lat0_deg, lon0_deg, h0_m), all heights ellipsoidal.  Works on arrays of any shape."""
    lat0, lon0, h0 = (float(v) for v in ref)
    x, y, z = geodetic_to_ecef(lat_deg, lon_deg, h_m)
    x0, y0, z0 = geodetic_to_ecef(lat0, lon0, h0)
    dx, dy, dz = x - x0, y - y0, z - z0
    r = enu_rotation(lat0, lon0)
    east = r[0, 0] * dx + r[0, 1] * dy
    north = r[1, 0] * dx + r[1, 1] * dy + r[1, 2] * dz
    up = r[2, 0] * dx + r[2, 1] * dy + r[2, 2] * dz
    return east, north, up

"""GNSS solution epochs with real deformation signals and honest geodesy.

Each rover follows a scenario: a true local motion (east, north, up in metres from its
reference position) given in closed form.  Measured positions add the scenario's events (a
base-station switch, an antenna change), white noise whose sigmas are exactly the ones the
epoch reports, and outliers.  lat/lon/eh come from the measured local offsets through ECEF with
pyproj; dE..d3d, vE..vU and the projected coordinates are derived from the same numbers, so
every field of an epoch agrees with every other.
"""

from __future__ import annotations

from dataclasses import dataclass
from functools import lru_cache

import numpy as np
from pyproj import Transformer

from devmon_sync.server import noise
from devmon_sync.server.clock import DAY_S
from devmon_sync.server.series import YEAR_S, in_outage, sample_times
from devmon_sync.server.world import Device, Projection, World, gnss_event_times

GPS_EPOCH_S = 315964800  # 1980-01-06T00:00:00Z
GPS_LEAP_S = 18
LATLON_SRID = 4326
ID_STRIDE = 10_000_000  # epoch id = (device index + 1) * ID_STRIDE + sample index


@lru_cache(maxsize=None)
def _transformer(src: str, dst: str) -> Transformer:
    """Transformers are costly to build and thread-safe to share: build each pair once."""
    return Transformer.from_crs(src, dst, always_xy=True)


def enu_to_geodetic(lat0: float, lon0: float, h0: float, e: np.ndarray, n: np.ndarray,
                    u: np.ndarray) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """Local east/north/up offsets (m) at a reference point to latitude, longitude, height."""
    x0, y0, z0 = _transformer("EPSG:4979", "EPSG:4978").transform(lon0, lat0, h0)
    phi, lam = np.radians(lat0), np.radians(lon0)
    sp, cp, sl, cl = np.sin(phi), np.cos(phi), np.sin(lam), np.cos(lam)
    x = x0 - sl * e - sp * cl * n + cp * cl * u
    y = y0 + cl * e - sp * sl * n + cp * sl * u
    z = z0 + cp * n + sp * u
    lon, lat, h = _transformer("EPSG:4978", "EPSG:4979").transform(x, y, z)
    return np.asarray(lat), np.asarray(lon), np.asarray(h)


def project(projection: Projection, lat: np.ndarray, lon: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """Easting and northing (m) of geodetic positions in a site projection."""
    e, n = _transformer("EPSG:4326", projection.crs).transform(lon, lat)
    return np.asarray(e), np.asarray(n)


# ----------------------------------------------------------------------------- scenarios

def _along_unit(dev: Device) -> tuple[float, float]:
    az = np.radians(dev.gnss_config.get("azimuth") or 0.0)
    return float(np.sin(az)), float(np.cos(az))


def true_motion(world: World, dev: Device, t: np.ndarray) -> tuple[np.ndarray, ...]:
    """True (east, north, up) displacement in metres of the device's scenario at ``t``."""
    tf = t.astype(np.float64)
    years = (tf - dev.installed_s) / YEAR_S
    scenario = dev.role.gnss_scenario
    events = gnss_event_times(dev.role, world.origin_s, world.anchor_s)
    up = np.zeros_like(tf)
    if scenario == "creep":
        along = 0.025 * years
        up = -0.3 * along
    elif scenario == "accelerating":
        along = _accelerating_along(tf, dev.installed_s, events)
        up = -0.4 * along
    elif scenario == "seasonal":
        season = np.cos(2 * np.pi * (tf / YEAR_S - 0.62))
        along = 0.008 * season + 0.001 * years
        up = 0.003 * season - 0.001 * years
    elif scenario == "step":
        along = 0.010 * years
    elif scenario == "outliers":
        along = 0.015 * years
    else:  # stable reference point: only a millimetre of seasonal breathing in height
        along = np.zeros_like(tf)
        up = 0.0008 * np.cos(2 * np.pi * (tf / YEAR_S - 0.6))
    se, sn = _along_unit(dev)
    return along * se, along * sn, up


def _accelerating_along(tf: np.ndarray, installed_s: int, events: dict) -> np.ndarray:
    """Creep, then Fukuzono-style acceleration: velocity ~ 1/(t_f - t) from the onset, so the
    inverse velocity falls linearly to zero at t_f; capped at 200 mm/d once the slope fails."""
    v0 = 0.5e-3 / DAY_S  # m/s before onset
    vmax = 0.200 / DAY_S
    ta, tfail = events["acceleration_onset"], events["failure"]
    span = tfail - ta
    tc = tfail - v0 * span / vmax  # when the capped velocity is reached
    before = v0 * (np.minimum(tf, ta) - installed_s)
    mid = np.clip(tf, ta, tc)
    accel = v0 * span * np.log(span / (tfail - mid))
    capped = vmax * np.maximum(tf - tc, 0.0)
    return before + accel + capped


# ----------------------------------------------------------------------------- epochs

@dataclass
class Epochs:
    """Columns of a device's epochs in a window (one row per epoch, ascending time)."""

    t: np.ndarray
    ids: np.ndarray
    deleted: np.ndarray
    cols: dict[str, np.ndarray]
    bs: np.ndarray
    proj: dict[int, tuple[np.ndarray, np.ndarray, np.ndarray]]

    def __len__(self) -> int:
        return int(self.t.size)


def _gaps(world: World, dev: Device) -> list[tuple[int, int]]:
    if dev.role.gnss_scenario != "outliers":
        return []
    span = dev.outage_until_s - dev.installed_s
    return [(dev.installed_s + int(span * f) // 3600 * 3600,
             dev.installed_s + int(span * f) // 3600 * 3600 + d * DAY_S)
            for f, d in ((0.22, 2), (0.5, 5), (0.78, 3))]


def _deleted_window(dev: Device) -> tuple[int, int]:
    if dev.role.gnss_scenario != "outliers":
        return (0, 0)
    a = dev.installed_s + int((dev.outage_until_s - dev.installed_s) * 0.62) // DAY_S * DAY_S
    return a, a + DAY_S


def epoch_times(world: World, dev: Device, start_s: int, end_s: int, now_s: int,
                include_deleted: bool) -> np.ndarray:
    """Timestamps (int64 s) of the device's solution epochs in [start_s, end_s]."""
    if dev.role.gnss_scenario in (None, "base"):
        return np.empty(0, np.int64)
    sensor = next(s for s in dev.sensors if s.is_gnss)
    t = sample_times(dev, sensor, start_s, end_s, now_s)
    keep = ~_in_any(t, _gaps(world, dev))
    if not include_deleted:
        keep &= ~_in_any(t, [_deleted_window(dev)])
    return t[keep]


def _in_any(t: np.ndarray, spans: list[tuple[int, int]]) -> np.ndarray:
    mask = np.zeros(t.shape, bool)
    for a, b in spans:
        mask |= (t >= a) & (t < b)
    return mask


def _quality(dev: Device, k: np.ndarray) -> dict[str, np.ndarray]:
    key = noise.stream_key(dev.serial, "gnss-quality")
    ns = 12 + (noise.uniform(key, k) * 14).astype(np.int64)
    is_float = noise.uniform(key ^ 1, k) < 0.02
    sigma_h = 0.0012 * np.sqrt(20.0 / ns) * np.where(is_float, 6.0, 1.0)
    ratio = np.where(is_float, 1.0 + 1.5 * noise.uniform(key ^ 2, k),
                     3.0 + 40.0 * noise.uniform(key ^ 2, k))
    return {"ns": ns, "q": np.where(is_float, 2, 1), "ar": np.round(ratio, 1),
            "sde": np.round(sigma_h * 1.05, 5), "sdn": np.round(sigma_h * 0.95, 5),
            "sdu": np.round(sigma_h * 2.3, 5)}


def measured_enu(world: World, dev: Device, t: np.ndarray,
                 quality: dict[str, np.ndarray] | None = None) -> tuple[np.ndarray, ...]:
    """What the receiver measures: true motion + events + noise (at the reported sigmas)
    + outliers.  A pure function of t, so any epoch can be recomputed (for velocities)."""
    k = (t - dev.installed_s) // dev.sampling_s
    q = quality or _quality(dev, k)
    e, n, u = true_motion(world, dev, t)
    key = noise.stream_key(world.seed, dev.serial, "gnss-noise")
    e = e + q["sde"] * noise.normal(key, k)
    n = n + q["sdn"] * noise.normal(key ^ 1, k)
    u = u + q["sdu"] * noise.normal(key ^ 2, k)
    events = gnss_event_times(dev.role, world.origin_s, world.anchor_s)
    if "base_station_switch" in events:
        after = t >= events["base_station_switch"]
        e, n, u = e + 0.003 * after, n - 0.002 * after, u + 0.005 * after
    if "antenna_change" in events:
        after = t >= events["antenna_change"]
        e, n, u = e + 0.002 * after, n - 0.001 * after, u + 0.012 * after
    if dev.role.gnss_scenario == "outliers":
        okey = noise.stream_key(world.seed, dev.serial, "outlier")
        hit = noise.uniform(okey, k) < 0.015
        size = 0.02 + 0.06 * noise.uniform(okey ^ 1, k)
        angle = 2 * np.pi * noise.uniform(okey ^ 2, k)
        e = e + np.where(hit, size * np.cos(angle), 0.0)
        n = n + np.where(hit, size * np.sin(angle), 0.0)
        u = u + np.where(hit, 1.5 * size * (noise.uniform(okey ^ 3, k) - 0.5), 0.0)
        bad = _in_any(t, [_deleted_window(dev)])  # the day an operator later deleted
        e, u = e + 0.15 * bad, u - 0.2 * bad
    return e, n, u


def _base_station_ids(world: World, dev: Device, t: np.ndarray) -> np.ndarray:
    current = (dev.gnss_config.get("baseStation") or {}).get("id", 0)
    events = gnss_event_times(dev.role, world.origin_s, world.anchor_s)
    if "base_station_switch" in events and dev.site:
        previous = dev.site.base_stations[0].id
        return np.where(t >= events["base_station_switch"], current, previous)
    return np.full(t.shape, current, np.int64)


def epochs(world: World, dev: Device, start_s: int, end_s: int, now_s: int,
           include_deleted: bool = False) -> Epochs:
    """All fields of the device's epochs in [start_s, end_s], as numpy columns."""
    t = epoch_times(world, dev, start_s, end_s, now_s, include_deleted)
    k = (t - dev.installed_s) // dev.sampling_s
    # Velocities need the epochs one day earlier too: measure both sets in one pass.
    both = np.union1d(t, t - DAY_S)
    q_both = _quality(dev, (both - dev.installed_s) // dev.sampling_s)
    enu_both = measured_enu(world, dev, both, q_both)
    at = np.searchsorted(both, t)
    q = {name: col[at] for name, col in q_both.items()}
    e, n, u = (c[at] for c in enu_both)
    lat, lon, eh = enu_to_geodetic(dev.lat, dev.lon, dev.height_m, e, n, u)
    oh = eh - dev.site.place.geoid_undulation_m
    cols = {"lat": lat, "lon": lon, "eh": eh, "oh": oh, "dE": e, "dN": n, "dU": u,
            "d2d": np.hypot(e, n), "d3d": np.sqrt(e * e + n * n + u * u), **q}
    before = np.searchsorted(both, t - DAY_S)
    cols.update(_velocities(world, dev, t, (e, n, u), tuple(c[before] for c in enu_both)))
    tilt_key = noise.stream_key(world.seed, dev.serial, "tilt")
    along = e * _along_unit(dev)[0] + n * _along_unit(dev)[1]
    cols["roll"] = 0.21 + 0.01 * noise.normal(tilt_key, k)
    cols["pitch"] = -0.35 + 4.0 * along + 0.01 * noise.normal(tilt_key ^ 1, k)
    proj = {}
    for p in dev.site.projections:
        pe, pn = project(p, lat, lon)
        proj[p.id] = (pe, pn, eh if p.height_type == "ellipsoidal" else oh)
    deleted = _in_any(t, [_deleted_window(dev)])
    return Epochs(t, (dev.index + 1) * ID_STRIDE + k, deleted, cols,
                  _base_station_ids(world, dev, t), proj)


def _velocities(world: World, dev: Device, t: np.ndarray, now: tuple,
                day_before: tuple) -> dict[str, np.ndarray]:
    """vE, vN, vU (mm/d): change since the epoch one day earlier; NaN when it does not exist."""
    prev = t - DAY_S
    exists = (prev >= dev.installed_s) & ~_in_any(prev, _gaps(world, dev) + [_deleted_window(dev)])
    if prev.size:
        exists &= ~in_outage(dev, prev)
    nan = np.where(exists, 1000.0, np.nan)
    return {name: (x - x0) * nan for name, x, x0 in zip(("vE", "vN", "vU"), now, day_before,
                                                          strict=True)}


def gps_time(t: np.ndarray) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """GPS week, day of week and seconds of week of UTC times ``t``."""
    gps = t - GPS_EPOCH_S + GPS_LEAP_S
    week, tow = np.divmod(gps, 7 * DAY_S)
    return week, tow // DAY_S, tow

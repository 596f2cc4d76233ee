"""Readings of every raw and derived parameter, computed for the window a request asks for.

Each value is a pure function of (seed, parameter, timestamp), so any window gives the same
points as any other window covering them, and nothing is held in memory between requests.
The physics is simple but plausible and shared by a site's instruments: one rainfall series
per site drives its rain gauges, piezometers, river levels and soil moisture; one air
temperature drives the thermal cycles of tiltmeters, crack meters and logger internals.
"""

from __future__ import annotations

import math

import numpy as np

from devmon_sync.server import noise
from devmon_sync.server.clock import DAY_S, HOUR_S
from devmon_sync.server.world import Device, Parameter, Sensor, Site, World

YEAR_S = 365.25 * DAY_S
_SYNOPTIC_DAYS = (3.1, 5.3, 8.7)


# ----------------------------------------------------------------------------- sample times

def last_transmission_s(device: Device, now_s: int) -> int | None:
    """Time of the device's most recent transmission at ``now_s`` (None: never transmitted)."""
    if device.tx_s is None:
        return None
    limit = now_s if device.stopped_s is None else min(now_s, device.stopped_s)
    k = math.floor((limit - device.installed_s - device.tx_phase_s) / device.tx_s)
    if k < 0 or (device.stopped_s is not None and device.stopped_s <= device.installed_s):
        return None
    return device.installed_s + device.tx_phase_s + k * device.tx_s


def data_until_s(device: Device, sensor: Sensor, now_s: int) -> int | None:
    """Newest time whose samples the service has received, or None when it has none."""
    if device.tx_s is None:
        until = now_s if device.installed_s < now_s else None
    else:
        until = last_transmission_s(device, now_s)
    if until is not None and sensor.active_until_s is not None:
        until = min(until, sensor.active_until_s)
    return until


def _sampling(device: Device) -> tuple[int, int]:
    """(period, offset) of the sampling grid; virtual devices get daily manual readings."""
    if device.sampling_s is None:
        return DAY_S, 9 * HOUR_S
    return int(device.sampling_s), 0


def sample_times(device: Device, sensor: Sensor, start_s: int, end_s: int,
                 now_s: int) -> np.ndarray:
    """Timestamps (int64 s) of the points that exist in [start_s, end_s] (both inclusive)."""
    until = data_until_s(device, sensor, now_s)
    if until is None:
        return np.empty(0, np.int64)
    period, offset = _sampling(device)
    grid0 = device.installed_s + offset
    lo = max(start_s, sensor.active_from_s, grid0)
    hi = min(end_s, until)
    if hi < lo:
        return np.empty(0, np.int64)
    k0 = -(-(lo - grid0) // period)
    k1 = (hi - grid0) // period
    t = grid0 + np.arange(k0, k1 + 1, dtype=np.int64) * period
    if t.size == 0:
        return t
    keep = ~in_outage(device, t)
    if device.sampling_s is None:  # manual readings: weekdays only, some days skipped
        weekday = ((t // DAY_S) + 3) % 7  # 1970-01-01 was a Thursday (3)
        skip = noise.uniform(noise.stream_key(device.serial, "manual"), t // DAY_S) < 0.15
        keep &= (weekday < 5) & ~skip
    return t[keep]


def outages(device: Device, start_s: int, end_s: int) -> list[tuple[int, int]]:
    """The device's outages overlapping [start_s, end_s]: no data was recorded then."""
    first_day = max(device.installed_s, start_s - 3 * DAY_S) // DAY_S
    last_day = min(end_s, device.outage_until_s) // DAY_S
    if last_day < first_day:
        return []
    days = np.arange(first_day, last_day + 1, dtype=np.int64)
    key = noise.stream_key(device.serial, "outage")
    hit = noise.uniform(key, days) < 0.025
    days = days[hit]
    starts = days * DAY_S + (noise.uniform(key ^ 1, days) * 24).astype(np.int64) * HOUR_S
    lengths = (2 + (noise.uniform(key ^ 2, days) * 46).astype(np.int64)) * HOUR_S
    ends = np.minimum(starts + lengths, device.outage_until_s)
    return [(int(a), int(b)) for a, b in zip(starts, ends) if b > start_s and a <= end_s]


def in_outage(device: Device, t: np.ndarray) -> np.ndarray:
    mask = np.zeros(t.shape, bool)
    for a, b in outages(device, int(t[0]), int(t[-1])):
        mask |= (t >= a) & (t < b)
    return mask


# ----------------------------------------------------------------------------- site physics

def air_temperature(site: Site, t: np.ndarray, damp: float = 1.0, lag_h: float = 0.0) -> np.ndarray:
    """Air temperature (°C): annual and daily cycles plus passing weather, damped and lagged
    for instruments buried or shaded (a buried piezometer barely sees the daily cycle)."""
    p = site.place
    ts = t.astype(np.float64) - lag_h * HOUR_S
    hemisphere = 1.0 if p.lat >= 0 else -1.0
    annual = 9.0 * hemisphere * np.cos(2 * np.pi * (ts / YEAR_S - 0.5528))
    solar_h = (ts / HOUR_S + p.lon / 15.0) % 24.0
    daily = 5.0 * np.cos(2 * np.pi * (solar_h - 15.0) / 24.0)
    return p.mean_temp_c + annual * (0.5 + 0.5 * damp) + damp * (daily + synoptic(site, ts, 2.5))


def synoptic(site: Site, ts: np.ndarray, amplitude: float) -> np.ndarray:
    """Passing weather systems: a sum of slow sinusoids with site-specific phases."""
    out = np.zeros_like(ts, dtype=np.float64)
    for k, days in enumerate(_SYNOPTIC_DAYS):
        phase = (noise.stream_key(site.uuid, "synoptic", k) % 1000) / 1000.0 * 2 * np.pi
        out += np.sin(2 * np.pi * ts / (days * DAY_S) + phase)
    return amplitude * out / len(_SYNOPTIC_DAYS)


def rain_events(site: Site, start_s: int, end_s: int) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """Rain events starting in [start_s, end_s]: (start s, duration h, total mm)."""
    key = noise.stream_key(site.uuid, "rain")
    days = np.arange(start_s // DAY_S - 1, end_s // DAY_S + 1, dtype=np.int64)
    wet = noise.uniform(key, days) < 0.28
    days = days[wet]
    starts = days * DAY_S + (noise.uniform(key ^ 1, days) * 24).astype(np.int64) * HOUR_S
    hours = 1 + (noise.uniform(key ^ 2, days) * 10).astype(np.int64)
    total = -np.log1p(-noise.uniform(key ^ 3, days) * 0.999) * 11.0
    keep = (starts >= start_s) & (starts <= end_s)
    return starts[keep], hours[keep], total[keep]


def hourly_rain_mm(site: Site, hour_start: np.ndarray) -> np.ndarray:
    """Rain (mm) in each hour starting at ``hour_start``."""
    out = np.zeros(hour_start.shape, np.float64)
    if hour_start.size == 0:
        return out
    starts, hours, total = rain_events(site, int(hour_start.min()) - DAY_S, int(hour_start.max()))
    for s, h, a in zip(starts, hours, total):
        out += np.where((hour_start >= s) & (hour_start < s + h * HOUR_S), a / h, 0.0)
    return out


def rain_in_period_mm(site: Site, t: np.ndarray, period_s: int) -> np.ndarray:
    """Rain (mm) that fell in the sampling period ending at each t."""
    if period_s <= HOUR_S:
        hour = ((t - 1) // HOUR_S) * HOUR_S
        return hourly_rain_mm(site, hour) * (period_s / HOUR_S)
    out = np.zeros(t.shape)
    for k in range(period_s // HOUR_S):
        out += hourly_rain_mm(site, ((t - 1) // HOUR_S - k) * HOUR_S)
    return out


def rain_response(site: Site, t: np.ndarray, tau_h: float, rise_h: float = 3.0) -> np.ndarray:
    """Response to rain (per mm) of a store that fills within ``rise_h`` and drains with time
    constant ``tau_h``: how pore pressure, river level and soil moisture follow rainfall."""
    out = np.zeros(t.shape, np.float64)
    if t.size == 0:
        return out
    lookback = int(8 * tau_h * HOUR_S)
    starts, _, total = rain_events(site, int(t.min()) - lookback, int(t.max()))
    tf = t.astype(np.float64)
    for s, a in zip(starts, total, strict=True):
        dt = np.clip((tf - s) / HOUR_S, 0.0, 8 * tau_h)  # rain has no effect before it falls
        live = (tf > s) & ((tf - s) / HOUR_S < 8 * tau_h)
        out += np.where(live, a * (1 - np.exp(-dt / rise_h)) * np.exp(-dt / tau_h), 0.0)
    return out


# ----------------------------------------------------------------------------- generators

def _seasonal(t: np.ndarray, site: Site) -> np.ndarray:
    hemisphere = 1.0 if site.place.lat >= 0 else -1.0
    return hemisphere * np.cos(2 * np.pi * (t / YEAR_S - 0.3))


def _gen_value(dev: Device, sensor: Sensor, p: Parameter, t: np.ndarray, key: int) -> np.ndarray:
    site = dev.site
    a = p.args
    n = noise.normal(key, t // 60)
    tf = t.astype(np.float64)
    if p.gen == "temperature":
        return air_temperature(site, t, a.get("damp", 1.0), a.get("lag_h", 0.0)) + 0.03 * n
    if p.gen == "rain_mm":
        return rain_in_period_mm(site, t, _sampling(dev)[0])
    if p.gen == "rain_response":
        return a["base"] + a["gain"] * rain_response(site, t, a["tau_h"]) + a["noise"] * n
    if p.gen == "piezo_digits":
        pressure = 35.0 + 6.0 * _seasonal(tf, site) + 1.1 * rain_response(site, t, 120.0) \
            + 0.05 * n
        temp = air_temperature(site, t, 0.15, 12.0)
        return 8650.0 - (pressure - 0.0312 * (temp - 12.0)) / 0.1275
    if p.gen == "tilt":
        temp = air_temperature(site, t, 0.8, 1.0) - site.place.mean_temp_c
        drift = (tf - dev.installed_s) / (30 * DAY_S)
        if a["axis"] == 0:
            return 0.0125 + 0.0021 * temp + 0.0004 * drift + 0.0002 * n
        return -0.0310 + 0.0012 * temp - 0.0001 * drift + 0.0002 * n
    if p.gen == "barometric":
        base = 1013.25 * math.exp(-(dev.height_m or 0.0) / 8434.0)
        tide = 0.8 * np.cos(2 * np.pi * (tf / HOUR_S + site.place.lon / 15.0 - 10.0) / 12.0)
        return base + synoptic(site, tf, 9.0) + tide + 0.1 * n
    if p.gen == "humidity":
        temp = air_temperature(site, t) - site.place.mean_temp_c
        wet = rain_response(site, t, 6.0, 0.5)
        return np.clip(72.0 - 2.6 * temp + 2.0 * wet + 2.0 * n, 8.0, 100.0)
    if p.gen == "wind_speed":
        return np.abs(3.0 + synoptic(site, tf + 1e5, 4.0) + 1.2 * n)
    if p.gen == "wind_direction":
        return (240.0 + 25.0 * synoptic(site, tf + 2e5, 2.0) + 20.0 * n) % 360.0
    if p.gen == "crack":
        temp = air_temperature(site, t, 0.6, 2.0) - site.place.mean_temp_c
        days = (tf - dev.installed_s) / DAY_S
        return 0.800 + 0.0150 * days - 0.0110 * temp + 0.002 * n
    if p.gen == "smooth":
        solar_h = (tf / HOUR_S + site.place.lon / 15.0) % 24.0
        return (a["mean"] + a["annual"] * _seasonal(tf, site)
                + a["daily"] * np.cos(2 * np.pi * (solar_h - 15.0) / 24.0) + a["noise"] * n)
    if p.gen == "survey":
        days = (tf - dev.installed_s) / DAY_S
        return -0.045 * days - 3.0 * (1 - np.exp(-days / 20.0)) + 0.3 * n
    raise ValueError(f"no generator {p.gen!r}")


def _with_faults(dev: Device, p: Parameter, t: np.ndarray, v: np.ndarray) -> np.ndarray:
    if p.fault_rate <= 0:
        return v
    faulty = noise.uniform(noise.stream_key(dev.serial, p.uuid, "fault"), t) < p.fault_rate
    return np.where(faulty, np.nan, v)


def raw_values(world: World, dev: Device, sensor: Sensor, p: Parameter,
               t: np.ndarray) -> np.ndarray:
    """Full-precision values of a raw parameter at ``t`` (NaN where the point is null)."""
    if t.size == 0:  # also: a device with no site (never deployed) has no physics to run
        return np.empty(0, np.float64)
    key = noise.stream_key(world.seed, p.uuid)
    return _with_faults(dev, p, t, _gen_value(dev, sensor, p, t, key))


def values(world: World, dev: Device, sensor: Sensor, p: Parameter, t: np.ndarray,
           memo: dict | None = None) -> np.ndarray:
    """Values of any parameter at ``t``; a derived one is its formula over its sensor's raw
    values (NaN where any input is null).  ``memo`` (keyed by parameter UUID, for one ``t``)
    lets a request that serves a sensor's raw and derived parameters compute each raw once."""
    memo = {} if memo is None else memo
    if p.uuid not in memo:
        if p.source_type == "derived":
            by_name = {q.name: q for q in sensor.params}
            out = np.full(t.shape, p.const, np.float64)
            for name, coef, zero in p.terms:
                out += coef * (values(world, dev, sensor, by_name[name], t, memo) - zero)
            memo[p.uuid] = out
        else:
            memo[p.uuid] = raw_values(world, dev, sensor, p, t)
    return memo[p.uuid]

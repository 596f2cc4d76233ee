"""Time conventions shared by every analysis routine.

Timestamps are numpy ``datetime64`` arrays in UTC (any unit; naive, as numpy has no time
zones, and always meaning UTC).  Rates are per Julian year of 365.25 days, the unit of
geodetic velocities (mm/yr), and per day, the unit of slope monitoring (mm/day).
"""

from __future__ import annotations

import numpy as np

SECONDS_PER_DAY = 86_400.0
DAYS_PER_YEAR = 365.25
SECONDS_PER_YEAR = SECONDS_PER_DAY * DAYS_PER_YEAR


def as_datetime64(t) -> np.ndarray:
    """``t`` as a datetime64[ns] array (accepts datetime64 of any unit, ISO strings, or
    timezone-aware ``datetime`` objects, which are converted to UTC)."""
    arr = np.asarray(t)
    if arr.dtype.kind == "M":
        return arr.astype("datetime64[ns]")
    if arr.dtype == object:
        from datetime import timezone

        flat = [x.astimezone(timezone.utc).replace(tzinfo=None)
                if getattr(x, "tzinfo", None) is not None else x for x in arr.ravel()]
        return np.array(flat, dtype="datetime64[ns]").reshape(arr.shape)
    return arr.astype("datetime64[ns]")


def seconds_since(t, t0=None) -> np.ndarray:
    """Seconds (float64) from ``t0`` (default: the first element of ``t``) to each ``t``."""
    t = as_datetime64(t)
    origin = t.flat[0] if t0 is None else as_datetime64(t0)
    return (t - origin).astype("timedelta64[ns]").astype(np.float64) / 1e9


def years_since(t, t0=None) -> np.ndarray:
    """Julian years (365.25 d, float64) from ``t0`` (default: the first ``t``) to each ``t``."""
    return seconds_since(t, t0) / SECONDS_PER_YEAR


def days_since(t, t0=None) -> np.ndarray:
    """Days (float64) from ``t0`` (default: the first ``t``) to each ``t``."""
    return seconds_since(t, t0) / SECONDS_PER_DAY


def per_year_to_per_day(rate_per_yr):
    """A rate per Julian year as a rate per day."""
    return np.asarray(rate_per_yr) / DAYS_PER_YEAR


def finite_in_time_order(t, x, *, also_finite=None) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """The first step of every series routine: ``t`` as datetime64[ns] and ``x`` as float64
    (1-D, equal length, or a ValueError saying so), and the indices of the epochs with a
    time and a finite value (and a finite ``also_finite``, when given) in time order (stable
    sort, so equal times keep their input order).  Returns (t, x, order)."""
    t = as_datetime64(t)
    x = np.asarray(x, dtype=np.float64)
    if t.shape != x.shape or t.ndim != 1:
        raise ValueError(f"times {t.shape} and values {x.shape} must be 1-D of equal length")
    keep = np.isfinite(x) & ~np.isnat(t)
    if also_finite is not None:
        keep &= np.isfinite(also_finite)
    ok = np.flatnonzero(keep)
    return t, x, ok[np.argsort(t[ok], kind="stable")]

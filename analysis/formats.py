"""Readers of two public GNSS time-series formats, into numpy columns.

Agencies publish daily station positions in these formats (EarthScope/UNAVCO PBO ``.pos``,
Nevada Geodetic Laboratory ``tenv3``).  devmon reads them to check its own geodesy and trend
estimators against series nobody on the project made, and so that an engineer can compare a
monitoring rover with a nearby permanent station.  Columns are returned as they stand in the
file (longitudes too, which ``tenv3`` writes outside -180..180); converting is the caller's job.
"""

from __future__ import annotations

from pathlib import Path

import numpy as np

MJD_EPOCH = np.datetime64("1858-11-17T00:00:00", "ns")


def _mjd_to_datetime64(mjd: np.ndarray) -> np.ndarray:
    """Modified Julian dates (float days) as datetime64[ns], rounded to the second."""
    seconds = np.round(np.asarray(mjd, dtype=np.float64) * 86_400.0).astype(np.int64)
    return MJD_EPOCH + seconds.astype("timedelta64[s]").astype("timedelta64[ns]")


def read_pbo_pos(path: str | Path) -> dict[str, np.ndarray | tuple[float, float, float]]:
    """A PBO ``.pos`` file (format 1.1): ``t`` (datetime64[ns], UTC), ``lat``, ``lon`` (deg,
    longitude as written: 0..360 east), ``h`` (ellipsoidal, m), the agency's ``dn``, ``de``,
    ``du`` from the reference position and their sigmas ``sn``, ``se``, ``su`` (m), and
    ``ref``: the header's NEU reference position (lat deg, lon deg, h m)."""
    ref = None
    header_lines = 0
    with open(path, encoding="ascii", errors="replace") as f:
        for line in f:
            header_lines += 1
            if line.startswith("NEU Reference position"):
                lat0, lon0, h0 = (float(v) for v in line.split(":", 1)[1].split()[:3])
                ref = (lat0, lon0, h0)
            if line.startswith("*YYYYMMDD"):
                break
    if ref is None:
        raise ValueError(f"{path}: no 'NEU Reference position' line; not a PBO .pos file")
    cols = np.loadtxt(path, skiprows=header_lines, usecols=range(2, 22), dtype=np.float64)
    return {"t": _mjd_to_datetime64(cols[:, 0]), "lat": cols[:, 10], "lon": cols[:, 11],
            "h": cols[:, 12], "dn": cols[:, 13], "de": cols[:, 14], "du": cols[:, 15],
            "sn": cols[:, 16], "se": cols[:, 17], "su": cols[:, 18], "ref": ref}


def read_tenv3(path: str | Path) -> dict[str, np.ndarray]:
    """An NGL ``tenv3`` file: ``t`` (datetime64[ns], noon UTC of each day, as NGL's decimal
    years are), ``lat``, ``lon`` (deg, as written, sometimes outside -180..180), ``h``
    (ellipsoidal, m), NGL's own local ``e``, ``n``, ``u`` (m, integer and fractional parts
    summed), their sigmas ``se``, ``sn``, ``su`` (m) and ``antenna_m`` (antenna height, m)."""
    cols = np.loadtxt(path, skiprows=1, usecols=range(2, 23), dtype=np.float64, ndmin=2)
    # After station and date: 0 decimal year, 1 MJD, 2 week, 3 day, 4 reflon, 5 e0, 6 east,
    # 7 n0, 8 north, 9 u0, 10 up, 11 antenna, 12-14 sigmas e n u, 15-17 correlations,
    # 18 latitude, 19 longitude, 20 height.
    return {"t": _mjd_to_datetime64(cols[:, 1] + 0.5), "lat": cols[:, 18], "lon": cols[:, 19],
            "h": cols[:, 20], "e": cols[:, 5] + cols[:, 6], "n": cols[:, 7] + cols[:, 8],
            "u": cols[:, 9] + cols[:, 10], "antenna_m": cols[:, 11], "se": cols[:, 12],
            "sn": cols[:, 13], "su": cols[:, 14]}

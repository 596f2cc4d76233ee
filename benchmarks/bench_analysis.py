"""Throughput of the analysis: displacement, cleaning, least-squares and MIDAS velocity for
1,000 series of 10,000 epochs, against a bare numpy baseline doing the same arithmetic.

    /work/venv/bin/python benchmarks/bench_analysis.py [--series 1000] [--epochs 10000]

Each stage runs over every series (a Python loop over series, never over epochs) and is
timed as a whole, best of ``--repeat``; the baseline is the same arithmetic written inline
with no checks, options or result objects, so the ratio is what devmon's care costs.
Prints epochs per second per stage and the ratio devmon/baseline (1.0 = as fast as bare numpy).

The series share their epochs, as a rover's east, north and up do, and least squares keeps
the part of its noise model that depends on the epochs alone for the next series of the
same epochs; "least-squares velocity, own epochs" times series that each miss a different
epoch (none shares it; the same baseline on the same series).
"""

from __future__ import annotations

import argparse
import platform
import sys
import time
from pathlib import Path

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from analysis import cleaning, trends  # noqa: E402
from analysis.geodesy import geodetic_to_enu  # noqa: E402

A, F = 6_378_137.0, 1 / 298.257223563
E2 = F * (2 - F)


def make_series(n_series: int, n_epochs: int, seed: int = 1):
    """Hourly rover positions: creep of 0-50 mm/yr, 2 mm noise, 1 % outliers."""
    rng = np.random.default_rng(seed)
    t = np.datetime64("2025-01-01T00:00", "ns") + np.arange(n_epochs) * np.timedelta64(1, "h")
    years = np.arange(n_epochs) / (24 * 365.25)
    lat0 = rng.uniform(-60, 60, n_series)
    lon0 = rng.uniform(-180, 180, n_series)
    rate = rng.uniform(0, 0.05, n_series)[:, None]
    east = rate * years + 0.002 * rng.standard_normal((n_series, n_epochs))
    north = 0.5 * rate * years + 0.002 * rng.standard_normal((n_series, n_epochs))
    up = 0.004 * rng.standard_normal((n_series, n_epochs))
    east += np.where(rng.random((n_series, n_epochs)) < 0.01, 0.05, 0.0)
    m_per_deg = 111_320.0
    lat = lat0[:, None] + north / m_per_deg
    lon = lon0[:, None] + east / (m_per_deg * np.cos(np.radians(lat0[:, None])))
    return t, lat, lon, 500.0 + up


def baseline_enu(lat, lon, h):
    la, lo = np.radians(lat), np.radians(lon)
    n = A / np.sqrt(1 - E2 * np.sin(la) ** 2)
    x, y, z = ((n + h) * np.cos(la) * np.cos(lo), (n + h) * np.cos(la) * np.sin(lo),
               (n * (1 - E2) + h) * np.sin(la))
    dx, dy, dz = x - x[0], y - y[0], z - z[0]
    sl, cl, so, co = np.sin(la[0]), np.cos(la[0]), np.sin(lo[0]), np.cos(lo[0])
    return (-so * dx + co * dy, -sl * co * dx - sl * so * dy + cl * dz,
            cl * co * dx + cl * so * dy + sl * dz)


def baseline_mad(x, width=24):
    """Running median and MAD over a fixed window of epochs (sliding_window_view)."""
    pad = np.pad(x, (width // 2, width - 1 - width // 2), mode="edge")
    win = np.lib.stride_tricks.sliding_window_view(pad, width)
    med = np.median(win, axis=1)
    res = x - med
    mad = np.median(np.abs(res - np.median(res)))
    return np.abs(res) > 5 * 1.4826 * mad


def baseline_ols(years, x):
    g = np.column_stack([np.ones_like(years), years])
    coef, *_ = np.linalg.lstsq(g, x, rcond=None)
    return coef[1]


def baseline_midas(years, x, sep):
    j = np.searchsorted(years, years + sep)
    ok = j < years.size
    slopes = (x[j[ok]] - x[ok]) / (years[j[ok]] - years[ok])
    med = np.median(slopes)
    mad = 1.4826 * np.median(np.abs(slopes - med))
    keep = np.abs(slopes - med) < 2 * mad
    return np.median(slopes[keep])


def best_of(fn, repeat: int) -> float:
    times = []
    for _ in range(repeat):
        start = time.perf_counter()
        fn()
        times.append(time.perf_counter() - start)
    return min(times)


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--series", type=int, default=1000)
    ap.add_argument("--epochs", type=int, default=10_000)
    ap.add_argument("--repeat", type=int, default=3)
    args = ap.parse_args()
    t, lat, lon, h = make_series(args.series, args.epochs)
    years = (t - t[0]).astype(np.float64) / (365.25 * 86400e9)
    total = args.series * args.epochs
    print(f"bench_analysis: {platform.machine()} {platform.system()}, Python "
          f"{platform.python_version()}, numpy {np.__version__}; {args.series} series x "
          f"{args.epochs} epochs = {total:,} epochs; best of {args.repeat}")
    enu = [geodetic_to_enu(lat[i], lon[i], h[i], (lat[i, 0], lon[i, 0], h[i, 0]))
           for i in range(args.series)]
    east = [e for e, _, _ in enu]
    sep = min(1.0, years[-1] / 2)
    # each series without a different epoch: no two series share their epochs
    own = [np.delete(np.arange(args.epochs), 1 + i % (args.epochs - 2))
           for i in range(args.series)]
    stages = {
        "displacement (geodetic -> ENU)": (
            lambda: [geodetic_to_enu(lat[i], lon[i], h[i], (lat[i, 0], lon[i, 0], h[i, 0]))
                     for i in range(args.series)],
            lambda: [baseline_enu(lat[i], lon[i], h[i]) for i in range(args.series)]),
        "cleaning (MAD outliers, 1-day window)": (
            lambda: [cleaning.mad_outliers(t, x) for x in east],
            lambda: [baseline_mad(x) for x in east]),
        "least-squares velocity": (
            lambda: [trends.ols_velocity(t, x) for x in east],
            lambda: [baseline_ols(years, x) for x in east]),
        "least-squares velocity, own epochs": (
            lambda: [trends.ols_velocity(t[k], x[k]) for k, x in zip(own, east)],
            lambda: [baseline_ols(years[k], x[k]) for k, x in zip(own, east)]),
        "MIDAS velocity": (
            lambda: [trends.midas_velocity(t, x) for x in east],
            lambda: [baseline_midas(years, x, sep) for x in east]),
    }
    print(f"{'stage':40} {'devmon s':>9} {'epochs/s':>13} {'numpy s':>9} {'epochs/s':>13} "
          f"{'devmon/numpy':>13}")
    for name, (ours, bare) in stages.items():
        a, b = best_of(ours, args.repeat), best_of(bare, args.repeat)
        print(f"{name:40} {a:9.3f} {total / a:13,.0f} {b:9.3f} {total / b:13,.0f} "
              f"{b / a:12.2f}x")


if __name__ == "__main__":
    main()

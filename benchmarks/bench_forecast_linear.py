#!/usr/bin/env python3
"""The classic linear inverse-velocity forecast (``analysis.forecast_linear``): how often it
warns before a failure, how good its dates and its "failure possible within N days" are,
and how often it warns on points that do not accelerate.

1. Synthetic daily slopes (``tests/test_forecast_linear.py``'s ``failure_series``: one
   reading a day at 10:00 +- 2 h, 5 mm white scatter, steady creep of 1 or 2 mm/day for
   60 days, then Voight's law with alpha 1.7, 2 or 2.3 reaching failure 30 days after the
   onset), cut 30, 14, 7, 3 and 1 days before the failure: per cut the states, the dated
   forecasts whose interval holds the failure, their median error (days, negative =
   early), and for "accelerating, not dated" N / true time left (median) and the share of
   N later than the failure.  ``--seeds calibration`` (1000-1099: the seeds the weighting
   and ``inverse_velocity.MIN_WINDOW_POINTS`` were chosen on) or ``evaluation``
   (2000-2099, the default).  ``--ols`` also runs an ordinary (unweighted) least-squares
   line on 1/v with the same onset rule, for comparison.
2. Points that do not accelerate, evaluated at each month end from day 60 as the pipeline
   does (the acceleration tested along the last 30 days' motion,
   ``forecast_linear.acceleration_along_motion``): hourly white + flicker points
   (``bench_alarms.py``'s noise), one-year blocks of real daily GNSS residuals
   (``real_noise.py``; hourly: interpolated plus ``bench_alarms``' white noise; daily: plus
   1 mm), and daily 5 mm white-noise points at rest and creeping 1 mm/day.  The station
   LHAS calibrated ``ACCELERATION_CONFIDENCE``; P156 scores it.  Blocks start 91 days
   apart and overlap, so one real transient can be counted in up to four blocks.

    python benchmarks/bench_forecast_linear.py            # 100 slopes per case, 43 points
    python benchmarks/bench_forecast_linear.py --quick    # 20 slopes, 10 points
"""

from __future__ import annotations

import argparse
import sys
import time
from collections import Counter
from pathlib import Path

import numpy as np

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))
sys.path.insert(0, str(ROOT / "tests"))
import bench_alarms
import real_noise
from test_forecast_linear import failure_series

from analysis import forecast_linear as fl
from analysis.inverse_velocity import inverse_velocity

LEADS = (30.0, 14.0, 7.0, 3.0, 1.0)
SEEDS = {"calibration": 1000, "evaluation": 2000}
DAY = np.timedelta64(86_400_000_000_000, "ns")
T0 = np.datetime64("2025-01-01T00:00", "ns")
SMOOTHING_DAYS = 4.0  # analysis.pipeline.INVERSE_VELOCITY_SMOOTHING_DAYS


def at_days(d: np.ndarray) -> np.ndarray:
    return T0 + np.rint(np.asarray(d) * 86_400e9).astype(np.int64).astype("timedelta64[ns]")


def slopes(seed0: int, n: int, alpha: float, creep: float) -> None:
    """Part 1 for one alpha and creep rate."""
    print(f"\nalpha {alpha:g}, creep {creep:g} mm/day, seeds {seed0}-{seed0 + n - 1}")
    for lead in LEADS:
        states, errors, covered, ratios = Counter(), [], 0, []
        for seed in range(seed0, seed0 + n):
            t, x, failure = failure_series(seed, lead_days=lead, alpha=alpha,
                                           creep_mm_per_day=creep)
            f = fl.linear_forecast(inverse_velocity(t, x, smoothing_days=SMOOTHING_DAYS))
            states[f.state] += 1
            if f.state == fl.DATED:
                covered += f.interval[0] <= failure <= f.interval[1]
                errors.append((f.failure_time - failure) / DAY)
            elif f.state == fl.ACCELERATING:
                ratios.append(f.within_days / ((failure - t[-1]) / DAY))
        warn = sum(states[s] for s in fl.WARNING_STATES)
        text = (f"  {lead:>4g} d before: warn {warn:3d}/{n} (dated {states[fl.DATED]}, "
                f"imminent {states[fl.IMMINENT]}, accelerating {states[fl.ACCELERATING]})")
        if errors:
            text += (f"; dated: {covered}/{len(errors)} cover, median error "
                     f"{np.median(errors):+.1f} d")
        if ratios:
            r = np.asarray(ratios)
            text += f"; N/true median {np.median(r):.2f}, N later {np.mean(r > 1):.0%}"
        print(text)


def _ols(t, v, sig):
    """Ordinary least squares of 1/v (the papers' fit), in ``fl._irls``'s return form."""
    pos = v > 0
    if int(pos.sum()) < fl.MIN_PHASE_POINTS or np.ptp(t[pos]) <= 0:
        return None
    tp, y = t[pos], 1.0 / v[pos]
    design = np.stack([np.ones_like(tp), tp], axis=1)
    coef, *_ = np.linalg.lstsq(design, y, rcond=None)
    r = y - design @ coef
    s2 = float(r @ r) / max(y.size - 2, 1)
    h_all = np.maximum(coef[0] + coef[1] * t, fl.WEIGHT_FLOOR * float(y.min()))
    chi2 = float((((v - 1.0 / h_all) / sig) ** 2).sum())
    return coef, np.linalg.inv(design.T @ design) * s2, chi2, r / np.sqrt(max(s2, 1e-30))


def main_motion_series(kind: str, i: int) -> tuple[np.ndarray, list[np.ndarray]]:
    """Days and east, north, up (mm) of null point ``i`` of ``kind``."""
    rng = np.random.default_rng([77, i])
    if kind.startswith("daily 5 mm"):
        days = np.arange(365.0) + 10.0 / 24.0
        enu = [5.0 * rng.standard_normal(days.size) for _ in range(3)]
        if "creep" in kind:
            enu[0] = enu[0] + days
        return days, enu
    if kind == "hourly white + flicker":
        n = 365 * 24
        return np.arange(n) / 24.0, [w * rng.standard_normal(n) + bench_alarms.flicker(rng, n, f)
                                     for w, f in zip(bench_alarms.WHITE_MM,
                                                     bench_alarms.FLICKER_MM_YR025,
                                                     strict=True)]
    station = kind.split()[-1]
    blocks = real_noise.blocks(station)
    block = blocks[i % len(blocks)]
    if kind.startswith("daily"):
        days, enu = real_noise.daily(block)
        return days, [x + 1.0 * rng.standard_normal(x.size) for x in enu]
    hours = np.arange(365 * 24)
    real, has = real_noise.hourly(block, hours)
    return hours[has] / 24.0, [w * rng.standard_normal(hours.size)[has] + r[has]
                               for w, r in zip(bench_alarms.WHITE_MM, real, strict=True)]


def nulls(kinds: list[str], n: int) -> None:
    """Part 2: the share of month-end evaluations that warn."""
    print("\nPoints that do not accelerate (month ends from day 60, along their motion)")
    for kind in kinds:
        states = Counter()
        for i in range(n):
            days, enu = main_motion_series(kind, i)
            for end in range(60, int(days[-1]) + 1, 30):
                keep = days <= end
                d, (e, nn, u) = days[keep], [c[keep] for c in enu]
                acc = fl.acceleration_along_motion(at_days(d), e / 1e3, nn / 1e3, u / 1e3)
                iv = inverse_velocity(at_days(d), e / 1e3, smoothing_days=SMOOTHING_DAYS)
                states[fl.linear_forecast(iv, acceleration=acc).state] += 1
        total = sum(states.values())
        warn = sum(states[s] for s in fl.WARNING_STATES)
        print(f"  {kind:28} warned {warn:3d}/{total} = {100 * warn / total:.1f} %   "
              f"{dict(states)}")


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--quick", action="store_true", help="20 slopes per case, 10 points")
    ap.add_argument("--seeds", choices=tuple(SEEDS), default="evaluation")
    ap.add_argument("--ols", action="store_true", help="also the unweighted line (alpha 2)")
    ap.add_argument("--no-nulls", action="store_true", help="part 1 only")
    args = ap.parse_args(argv)
    n_slopes, n_points = (20, 10) if args.quick else (100, 43)
    start = time.process_time()
    for alpha in (1.7, 2.0, 2.3):
        for creep in (1.0, 2.0):
            slopes(SEEDS[args.seeds], n_slopes, alpha, creep)
    if args.ols:
        weighted = fl._irls
        fl._irls = _ols
        try:
            print("\nOrdinary least squares on 1/v (unweighted), same onset rule:")
            slopes(SEEDS[args.seeds], n_slopes, 2.0, 2.0)
        finally:
            fl._irls = weighted
    if not args.no_nulls:
        nulls(["hourly white + flicker", "hourly real LHAS", "daily real LHAS",
               "daily 5 mm at rest", "daily 5 mm creep"], n_points)
        print("  scored on the evaluation station:")
        nulls(["hourly real P156", "daily real P156"], min(n_points, 32))
    print(f"\nCPU {time.process_time() - start:.0f} s")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())

#!/usr/bin/env python3
"""Coverage, error and stability of the inverse-velocity failure forecast (issue 16, point 5).

What is simulated.  The reference server's accelerating slope
(``devmon_sync.server.gnss._accelerating_along``): steady creep at ``v0`` until the onset
``ta``, then velocity ``v0 L / (tf - t)`` (L = tf - ta; Voight's alpha = 2, inverse velocity
falling linearly to zero at the failure ``tf``), i.e. displacement
``v0 L log(L / (tf - t))`` after the onset.  Per trial, drawn at random (fixed seeds):
L 40-110 days (the demo's is 70.5), v0 0.3-1.0 mm/day (the demo's 0.5), 15-45 days of
creep recorded before the onset (the demo's 31.5), the failure at a random time of day.
Hourly epochs of the displacement along the direction of motion, plus

* white noise 1.2-2.5 mm (the server's ~1.2 mm horizontal, ~1.5 mm along its 3D direction
  of motion, up to the 2.5 mm of ``bench_alarms.py``);
* flicker noise 2.5 mm/yr^0.25 (``bench_alarms.py``'s horizontal figure; the power-law
  filter of Hosking / Kasdin, d = 0.5, copied from there);
* 2 % "float" epochs with 6 x the white sigma (as the server's), and 0.5 % outliers at
  5-10 x the white sigma, random sign (as ``bench_alarms.py``);
* gaps: 1 % of single epochs missing, and with probability 0.3 one outage of 1-3 days.

Each trial is analysed as the pipeline does (``inverse_velocity(t, x, smoothing_days=4)``
then ``.forecast()``) with the data ending 30, 14, 7 and 3 days before the failure; the
stability figure re-runs it with the data ending 2-6 h earlier still.

Reported per horizon: the share of trials with a forecast (``supported``); the coverage of
the stated 95 % interval AMONG SUPPORTED forecasts (a refusal is neither a hit nor a miss:
it is reported as the share refused; ``cover/all`` counts refusals as non-covering too);
the median absolute error (hours) and median interval width (hours) of the supported
forecasts; the stability: among trials supported at both data ends, the share where the
later forecast lies in the earlier one's interval and the forecast moved by no more than
the half-width of that interval on the side it moved to, and the median |move| (hours).

    python benchmarks/bench_forecast.py            # 200 trials per horizon
    python benchmarks/bench_forecast.py --quick    # 40 trials per horizon
"""

from __future__ import annotations

import argparse
import os
import sys
import time
from concurrent.futures import ProcessPoolExecutor
from pathlib import Path

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))
from analysis.inverse_velocity import inverse_velocity  # noqa: E402

HORIZONS_DAYS = (30.0, 14.0, 7.0, 3.0)
SMOOTHING_DAYS = 4.0  # analysis.pipeline.INVERSE_VELOCITY_SMOOTHING_DAYS
HOUR_YR = 1.0 / (365.25 * 24.0)
FLICKER_MM_YR025 = 2.5
WHITE_MM = (1.2, 2.5)
FLOAT_RATE, FLOAT_FACTOR = 0.02, 6.0
OUTLIER_RATE, OUTLIER_SIGMAS = 0.005, (5.0, 10.0)
DROP_RATE, OUTAGE_PROBABILITY, OUTAGE_DAYS = 0.01, 0.3, (1, 3)
T0 = np.datetime64("2026-01-01T00:00", "ns")
_NS_DAY = 86_400e9


def flicker(rng: np.random.Generator, n: int, amplitude_mm_yr025: float) -> np.ndarray:
    """Flicker noise (mm) of ``n`` hourly samples (copied from ``bench_alarms.py``): white
    innovations through the fractional differencing filter h_0 = 1, h_k = h_{k-1}
    (k - 1 + d) / k, d = 0.5 (spectral index -1), scaled by amplitude x dt^0.25 (dt in
    years)."""
    k = np.arange(1, n)
    h = np.concatenate([[1.0], np.cumprod((k - 1 + 0.5) / k)])
    w = rng.standard_normal(n) * amplitude_mm_yr025 * HOUR_YR ** 0.25
    size = 1 << int(np.ceil(np.log2(2 * n)))
    return np.fft.irfft(np.fft.rfft(h, size) * np.fft.rfft(w, size), size)[:n]


def slope_series(seed: int, trial: int, horizon_days: float, *, flicker_mm: float =
                 FLICKER_MM_YR025) -> tuple[np.ndarray, np.ndarray, np.datetime64]:
    """One synthetic accelerating slope whose data end ``horizon_days`` before failure:
    times (datetime64[ns]), displacement along the motion (m) and the true failure time.
    The same (seed, trial) gives the same slope and noise for every horizon: only the data
    end moves."""
    rng = np.random.default_rng([seed, trial])
    span = rng.uniform(40.0, 110.0)  # onset to failure, days
    v0 = rng.uniform(0.3, 1.0)  # mm/day before the onset
    before = rng.uniform(15.0, 45.0)  # days recorded before the onset
    white = rng.uniform(*WHITE_MM)
    tf = before + span + rng.uniform(0.0, 1.0)  # days from the first epoch; any time of day
    n = int(np.floor((tf - 3.0 + 1e-9) * 24)) + 1  # hourly epochs to 3 days before failure
    d = np.arange(n) / 24.0
    ta = tf - span
    mid = np.clip(d, ta, tf - 1e-9)
    x = v0 * (np.minimum(d, ta)) + v0 * span * np.log(span / (tf - mid))
    noise = white * rng.standard_normal(n) + flicker(rng, n, flicker_mm)
    floats = rng.random(n) < FLOAT_RATE
    noise += np.where(floats, (FLOAT_FACTOR - 1.0) * white * rng.standard_normal(n), 0.0)
    hit = rng.random(n) < OUTLIER_RATE
    noise += np.where(hit, rng.uniform(*OUTLIER_SIGMAS, n) * white * rng.choice((-1.0, 1.0), n),
                      0.0)
    keep = rng.random(n) >= DROP_RATE
    if rng.random() < OUTAGE_PROBABILITY:
        a = int(rng.integers(0, n))
        keep[a:a + 24 * int(rng.integers(OUTAGE_DAYS[0], OUTAGE_DAYS[1] + 1))] = False
    keep[:24] = True
    keep &= d <= tf - horizon_days
    t = T0 + np.rint(d[keep] * _NS_DAY).astype(np.int64).astype("timedelta64[ns]")
    failure = T0 + np.timedelta64(int(round(tf * _NS_DAY)), "ns")
    return t, (x + noise)[keep] / 1000.0, failure


def forecast(t: np.ndarray, x_m: np.ndarray):
    """The pipeline's forecast of one series."""
    return inverse_velocity(t, x_m, smoothing_days=SMOOTHING_DAYS).forecast()


def _hours(dt) -> float:
    return float(dt / np.timedelta64(1, "s")) / 3600.0


def one_trial(args: tuple) -> dict:
    """Forecast at one horizon and with the data ending 2-6 h earlier: figures in hours."""
    seed, trial, horizon = args
    t, x, failure = slope_series(seed, trial, horizon)
    f = forecast(t, x)
    out = {"supported": bool(f.supported), "reason": f.reason}
    if f.supported:
        lo, hi = f.interval
        out.update(error_h=_hours(f.failure_time - failure), covered=bool(lo <= failure <= hi),
                   width_h=_hours(hi - lo), lo_h=_hours(f.failure_time - lo),
                   hi_h=_hours(hi - f.failure_time))
    shift = np.random.default_rng([seed, trial, 99]).uniform(2.0, 6.0)
    cut = t[-1] - np.timedelta64(int(shift * 3600e9), "ns")
    g = forecast(t[t <= cut], x[t <= cut])
    out["shift_supported"] = bool(g.supported)
    if f.supported and g.supported:
        move = _hours(g.failure_time - f.failure_time)
        half = out["hi_h"] if move > 0 else out["lo_h"]
        glo, ghi = g.interval
        out.update(move_h=move, stable=bool(abs(move) <= half and lo <= g.failure_time <= hi),
                   move_ratio=abs(move) / max(half, 1e-9),
                   overlap=bool(glo <= hi and lo <= ghi))
    return out


def summarise(results: list[dict]) -> dict:
    """Figures of one horizon's trials."""
    n = len(results)
    sup = [r for r in results if r["supported"]]
    both = [r for r in sup if "move_h" in r]

    def med(v) -> float:
        return float(np.median(v)) if len(v) else float("nan")

    return {"trials": n, "supported": len(sup) / n if n else float("nan"),
            "coverage": (sum(r["covered"] for r in sup) / len(sup)) if sup else float("nan"),
            "coverage_all": sum(r["covered"] for r in sup) / n if n else float("nan"),
            "mae_h": med([abs(r["error_h"]) for r in sup]),
            "bias_h": med([r["error_h"] for r in sup]),
            "width_h": med([r["width_h"] for r in sup]),
            "stable": (sum(r["stable"] for r in both) / len(both)) if both else float("nan"),
            "move_h": med([abs(r["move_h"]) for r in both]),
            "move_ratio": med([r["move_ratio"] for r in both]),
            "pairs": len(both)}


def run(trials: int, seed: int, workers: int = 1, horizons=HORIZONS_DAYS) -> dict:
    jobs = [(seed, i, h) for h in horizons for i in range(trials)]
    if workers > 1:
        with ProcessPoolExecutor(workers) as pool:
            res = list(pool.map(one_trial, jobs, chunksize=4))
    else:
        res = [one_trial(j) for j in jobs]
    return {h: summarise(res[k * trials:(k + 1) * trials]) for k, h in enumerate(horizons)}


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--trials", type=int, default=200, help="trials per horizon (200)")
    p.add_argument("--quick", action="store_true", help="40 trials per horizon")
    p.add_argument("--seed", type=int, default=16)
    p.add_argument("--workers", type=int, default=min(2, os.cpu_count() or 1))
    args = p.parse_args()
    trials = 40 if args.quick else args.trials
    print("Inverse-velocity failure forecast on synthetic accelerating slopes (server physics, "
          "alpha = 2): onset-to-failure 40-110 d, creep 0.3-1.0 mm/d before the onset; "
          f"hourly, white {WHITE_MM[0]:g}-{WHITE_MM[1]:g} mm + flicker {FLICKER_MM_YR025:g} "
          f"mm/yr^0.25, {FLOAT_RATE:.0%} float epochs x{FLOAT_FACTOR:g}, {OUTLIER_RATE:.1%} "
          f"outliers, {DROP_RATE:.0%} dropped epochs, outages; {SMOOTHING_DAYS:g}-day "
          f"velocity windows; {trials} trials per horizon, seed {args.seed}.")
    print("Coverage is among supported forecasts (a refusal is counted apart, as 'refused'); "
          "cover/all counts refusals as misses.  Stable: forecast with the data ending 2-6 h "
          "earlier lies in the first interval and moved by at most its half-width.\n")
    started = time.perf_counter()
    figures = run(trials, args.seed, args.workers)
    print(f"{'days before':>11} {'supported':>9} {'coverage':>8} {'cover/all':>9} "
          f"{'MAE h':>7} {'bias h':>7} {'width h':>8} {'stable':>7} {'|move| h':>8} "
          f"{'move/half':>9}")
    for h, s in figures.items():
        print(f"{h:11g} {s['supported']:9.0%} {s['coverage']:8.1%} {s['coverage_all']:9.1%} "
              f"{s['mae_h']:7.1f} {s['bias_h']:+7.1f} {s['width_h']:8.1f} {s['stable']:7.0%} "
              f"{s['move_h']:8.1f} {s['move_ratio']:9.2f}")
    print(f"\n{time.perf_counter() - started:.0f} s, {args.workers} worker(s)")


if __name__ == "__main__":
    main()

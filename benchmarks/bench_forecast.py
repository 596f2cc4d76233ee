"""Coverage, error, lateness and stability of the failure forecast (issue 16 point 5; issue 28
point 4: a forecast that admits Voight's alpha is unknown, on real noise).

What is simulated.  An accelerating slope after Voight (1988): steady creep at ``v0`` until
the onset ``ta``, then velocity ``v0 (L / (tf - t))^q`` with L = tf - ta and q = 1 / (alpha -
1) (the inverse velocity to the power alpha - 1 falls linearly to zero at the failure ``tf``;
alpha = 2, ``--alpha 2``, is the reference server's slope, ``devmon_sync.server.gnss.
_accelerating_along``, with the inverse velocity itself a straight line), i.e. displacement
``v0 L^q (L^p - (tf - t)^p) / p`` after the onset, p = 1 - q (``v0 L log(L / (tf - t))`` at
alpha = 2).  Per trial, drawn at random (fixed seeds): L 40-110 days (the demo's is 70.5), v0
0.3-1.0 mm/day (the demo's 0.5), 15-45 days of creep recorded before the onset (the demo's
31.5), the failure at a random time of day.  Hourly epochs of the displacement along the
direction of motion, plus

* white noise 1.2-2.5 mm (the server's ~1.2 mm horizontal, ~1.5 mm along its 3D direction
  of motion, up to the 2.5 mm of ``bench_alarms.py``);
* coloured noise, either simulated flicker noise 2.5 mm/yr^0.25 (``bench_alarms.py``'s
  horizontal figure; the power-law filter of Hosking / Kasdin, d = 0.5, copied from there)
  or, with ``--real-noise SCALE``, real noise: SCALE times the daily position residuals of a
  permanent GNSS station (``real_noise.py``: trend, steps and seasonal terms removed),
  linearly interpolated to the hourly epochs, along a random horizontal azimuth (east and
  north together), from a one-year block of the station chosen by the trial and a random
  start within it (gaps of the real record over ``real_noise.MAX_GAP_DAYS`` stay gaps);
  ``--station`` picks the station: ``real_noise.EVALUATION_STATION`` (P156) by default, the
  data every figure in docs/benchmarks.md is scored on, or ``real_noise.CALIBRATION_STATION``
  (LHAS), the data ``analysis.forecast.CALIBRATION`` was tuned on;
* 2 % "float" epochs with 6 x the white sigma (as the server's), and 0.5 % outliers at
  5-10 x the white sigma, random sign (as ``bench_alarms.py``);
* gaps: 1 % of single epochs missing, and with probability 0.3 one outage of 1-3 days.

Each trial is analysed as the pipeline does (``inverse_velocity(t, x, smoothing_days=4)``
then ``.forecast()``) with the data ending 30, 14, 7 and 3 days before the failure; the
stability figure re-runs it with the data ending 2-6 h earlier still.  The same (seed,
trial) gives the same slope parameters and noise at every alpha and horizon.

Reported per alpha and horizon: the share of trials with a forecast (``supported``); the
coverage of the stated 95 % interval AMONG SUPPORTED forecasts (a refusal is neither a hit
nor a miss: it is reported as the share refused; ``cover/all`` counts refusals as
non-covering too); the median absolute error and the median signed error (``bias``,
forecast minus truth, hours: positive is late); ``late h``, the median lateness (forecast
after the truth, hours; an early forecast counts 0, so it is max(bias, 0)), and ``late``,
the share of forecasts after the truth; the median interval width (hours) of the supported
forecasts; the stability: among trials supported at both data ends, the share where the
later forecast lies in the earlier one's interval and the forecast moved by no more than
the half-width of that interval on the side it moved to, and the median |move| (hours);
``ms``: the median time of one forecast (``inverse_velocity`` and ``.forecast()``).

``--calibrate F ...`` prints instead, for each candidate value F of the forecast's
``CALIBRATION``, the coverage pooled over every alpha and horizon and that of the
least-covered cell, and the smallest candidate meeting the rule (pooled >= 95 %, every cell
>= 90 %): run it on the calibration station only.  ``--creep N`` prints the forecast's time
on N steady-creep series (and how they were refused): its cost per creeping rover.

    python benchmarks/bench_forecast.py            # 200 trials per horizon, alpha = 2
    python benchmarks/bench_forecast.py --quick    # 40 trials per horizon
    python benchmarks/bench_forecast.py --alpha --real-noise 1      # alpha 1.7-2.3, P156
    python benchmarks/bench_forecast.py --alpha --real-noise 1 --station LHAS --calibrate 2 2.5 3
    python benchmarks/bench_forecast.py --creep 200
"""

from __future__ import annotations

import argparse
import os
import re
import sys
import time
from collections import Counter
from concurrent.futures import ProcessPoolExecutor
from pathlib import Path
from typing import NamedTuple

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))
sys.path.insert(0, str(Path(__file__).resolve().parent))
import real_noise  # benchmarks/real_noise.py

from analysis.inverse_velocity import inverse_velocity

HORIZONS_DAYS = (30.0, 14.0, 7.0, 3.0)
ALPHAS = (1.7, 1.9, 2.0, 2.1, 2.3)  # issue 28's true alphas, --alpha's list when none given
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


def displacement_mm(d: np.ndarray, *, v0: float, ta: float, tf: float,
                    alpha: float) -> np.ndarray:
    """Voight's slope at days ``d``: creep ``v0`` (mm/day) until ``ta``, then velocity
    ``v0 (L / (tf - t))^q`` (L = tf - ta, q = 1 / (alpha - 1)), continuous at the onset."""
    span = tf - ta
    mid = np.clip(d, ta, tf - 1e-9)
    q = 1.0 / (alpha - 1.0)
    p = 1.0 - q
    if abs(p) < 1e-12:
        after = v0 * span * np.log(span / (tf - mid))
    else:
        after = v0 * span ** q * (span ** p - (tf - mid) ** p) / p
    return v0 * np.minimum(d, ta) + after


def real_coloured(seed: int, trial: int, n: int, station: str) -> tuple[np.ndarray, np.ndarray]:
    """Real coloured noise (mm) at ``n`` hourly epochs: a station's daily residuals
    (``real_noise.hourly``) along a random horizontal azimuth, from the one-year block
    ``trial`` (cycling) at a random start within it; and whether each epoch has data."""
    rng = np.random.default_rng([seed, trial, 28])
    blocks = real_noise.blocks(station)
    block = blocks[trial % len(blocks)]
    room_h = max(real_noise.BLOCK_DAYS * 24 - n - 48, 0)
    hours = np.arange(n) + 24.0 + float(rng.integers(0, room_h + 1))
    enu, has = real_noise.hourly(block, hours)
    azimuth = rng.uniform(0.0, 2.0 * np.pi)
    return np.sin(azimuth) * enu[0] + np.cos(azimuth) * enu[1], has


def slope_series(seed: int, trial: int, horizon_days: float, *, flicker_mm: float =
                 FLICKER_MM_YR025, alpha: float = 2.0, real_scale: float | None = None,
                 station: str = real_noise.EVALUATION_STATION
                 ) -> tuple[np.ndarray, np.ndarray, np.datetime64]:
    """One synthetic accelerating slope whose data end ``horizon_days`` before failure:
    times (datetime64[ns]), displacement along the motion (m) and the true failure time.
    The same (seed, trial) gives the same slope and noise for every horizon and alpha: only
    the data end (and the curve after the onset) moves.  ``real_scale``: the coloured noise
    is that times ``station``'s real residuals (``real_coloured``) instead of flicker."""
    rng = np.random.default_rng([seed, trial])
    span = rng.uniform(40.0, 110.0)  # onset to failure, days
    v0 = rng.uniform(0.3, 1.0)  # mm/day before the onset
    before = rng.uniform(15.0, 45.0)  # days recorded before the onset
    white = rng.uniform(*WHITE_MM)
    tf = before + span + rng.uniform(0.0, 1.0)  # days from the first epoch; any time of day
    n = int(np.floor((tf - 3.0 + 1e-9) * 24)) + 1  # hourly epochs to 3 days before failure
    d = np.arange(n) / 24.0
    x = displacement_mm(d, v0=v0, ta=tf - span, tf=tf, alpha=alpha)
    noise = white * rng.standard_normal(n)
    coloured = flicker(rng, n, flicker_mm)  # drawn either way: the same draws follow
    has = np.ones(n, bool)
    if real_scale is None:
        noise += coloured
    else:
        real, has = real_coloured(seed, trial, n, station)
        noise += real_scale * real
    floats = rng.random(n) < FLOAT_RATE
    noise += np.where(floats, (FLOAT_FACTOR - 1.0) * white * rng.standard_normal(n), 0.0)
    hit = rng.random(n) < OUTLIER_RATE
    noise += np.where(hit, rng.uniform(*OUTLIER_SIGMAS, n) * white * rng.choice((-1.0, 1.0), n),
                      0.0)
    keep = (rng.random(n) >= DROP_RATE) & has
    if rng.random() < OUTAGE_PROBABILITY:
        a = int(rng.integers(0, n))
        keep[a:a + 24 * int(rng.integers(OUTAGE_DAYS[0], OUTAGE_DAYS[1] + 1))] = False
    keep[:24] = True
    keep &= d <= tf - horizon_days
    t = T0 + np.rint(d[keep] * _NS_DAY).astype(np.int64).astype("timedelta64[ns]")
    failure = T0 + np.timedelta64(round(tf * _NS_DAY), "ns")
    return t, (x + noise)[keep] / 1000.0, failure


def forecast(t: np.ndarray, x_m: np.ndarray, **kwargs):
    """The pipeline's forecast of one series (``kwargs``: of ``.forecast()``, e.g. a
    ``calibration`` to try)."""
    return inverse_velocity(t, x_m, smoothing_days=SMOOTHING_DAYS).forecast(**kwargs)


class Job(NamedTuple):
    """One trial: the slope (seed, trial, alpha, noise) and the data end (horizon);
    ``calibration`` None: the forecast's own; ``stability``: also forecast with the data
    ending 2-6 h earlier."""

    seed: int
    trial: int
    horizon: float
    alpha: float = 2.0
    real_scale: float | None = None
    station: str = real_noise.EVALUATION_STATION
    calibration: float | None = None
    stability: bool = True


def _hours(dt) -> float:
    return float(dt / np.timedelta64(1, "s")) / 3600.0


def one_trial(args: tuple) -> dict:
    """Forecast at one horizon and with the data ending 2-6 h earlier: figures in hours.
    ``args``: a ``Job``, or (seed, trial, horizon) for alpha = 2 and flicker noise."""
    job = Job(*args)
    seed, trial = job.seed, job.trial
    t, x, failure = slope_series(seed, trial, job.horizon, alpha=job.alpha,
                                 real_scale=job.real_scale, station=job.station)
    kwargs = {} if job.calibration is None else {"calibration": job.calibration}
    started = time.perf_counter()
    f = forecast(t, x, **kwargs)
    out = {"supported": bool(f.supported), "reason": f.reason,
           "ms": 1000.0 * (time.perf_counter() - started)}
    if f.supported:
        lo, hi = f.interval
        out.update(error_h=_hours(f.failure_time - failure), covered=bool(lo <= failure <= hi),
                   width_h=_hours(hi - lo), lo_h=_hours(f.failure_time - lo),
                   hi_h=_hours(hi - f.failure_time))
    if not job.stability:
        return out
    shift = np.random.default_rng([seed, trial, 99]).uniform(2.0, 6.0)
    cut = t[-1] - np.timedelta64(int(shift * 3600e9), "ns")
    g = forecast(t[t <= cut], x[t <= cut], **kwargs)
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
    """Figures of one (alpha, horizon) cell's trials."""
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
            "late_h": med([max(r["error_h"], 0.0) for r in sup]),
            "late_share": (sum(r["error_h"] > 0 for r in sup) / len(sup)) if sup
            else float("nan"),
            "width_h": med([r["width_h"] for r in sup]),
            "stable": (sum(r["stable"] for r in both) / len(both)) if both else float("nan"),
            "move_h": med([abs(r["move_h"]) for r in both]),
            "move_ratio": med([r["move_ratio"] for r in both]),
            "pairs": len(both), "ms": med([r["ms"] for r in results])}


def run(trials: int, seed: int, workers: int = 1, horizons=HORIZONS_DAYS, *,
        alpha: float = 2.0, real_scale: float | None = None,
        station: str = real_noise.EVALUATION_STATION, calibration: float | None = None,
        stability: bool = True) -> dict:
    """Figures per horizon of ``trials`` slopes with Voight's ``alpha`` (and real noise of
    ``station`` times ``real_scale``, when given; the forecast's ``calibration`` when
    given)."""
    jobs = [Job(seed, i, h, alpha, real_scale, station, calibration, stability)
            for h in horizons for i in range(trials)]
    res = _map(one_trial, jobs, workers)
    return {h: summarise(res[k * trials:(k + 1) * trials]) for k, h in enumerate(horizons)}


def _map(fn, jobs: list, workers: int) -> list:
    if workers > 1:
        with ProcessPoolExecutor(workers) as pool:
            return list(pool.map(fn, jobs, chunksize=4))
    return [fn(j) for j in jobs]


POOLED_COVERAGE, CELL_COVERAGE = 0.95, 0.90  # the calibration rule (``calibrate``)
HEADER = (f"{'alpha':>5} {'days before':>11} {'supported':>9} {'coverage':>8} {'cover/all':>9} "
          f"{'MAE h':>7} {'bias h':>7} {'late h':>6} {'late':>5} {'width h':>8} {'stable':>7} "
          f"{'|move| h':>8} {'move/half':>9} {'ms':>5}")


def row(alpha: float, h: float, s: dict) -> str:
    """One printed line of the table."""
    return (f"{alpha:5g} {h:11g} {s['supported']:9.0%} {s['coverage']:8.1%} "
            f"{s['coverage_all']:9.1%} {s['mae_h']:7.1f} {s['bias_h']:+7.1f} "
            f"{s['late_h']:6.1f} {s['late_share']:5.0%} {s['width_h']:8.1f} "
            f"{s['stable']:7.0%} {s['move_h']:8.1f} {s['move_ratio']:9.2f} {s['ms']:5.0f}")


CREEP_DAYS = 60.0  # a creeping rover's record for ``creep_cost`` (1,440 hourly epochs)


def creep_cost(trials: int, seed: int, real_scale: float | None, station: str) -> dict:
    """The forecast's time on steady creep (0.3-1.0 mm/day for ``CREEP_DAYS``, the noise of
    ``slope_series``: white + flicker or real noise), the moving rover the pipeline meets
    most and the forecast's dearest case (every pass runs before it refuses): median and
    95th percentile ms over ``trials`` series, one process, and the refusals' reasons."""
    times, reasons = [], Counter()
    for trial in range(trials):
        rng = np.random.default_rng([seed, trial, 60])
        n = int(CREEP_DAYS * 24)
        d = np.arange(n) / 24.0
        noise = rng.uniform(*WHITE_MM) * rng.standard_normal(n)
        has = np.ones(n, bool)
        if real_scale is None:
            noise += flicker(rng, n, FLICKER_MM_YR025)
        else:
            real, has = real_coloured(seed, trial, n, station)
            noise += real_scale * real
        t = T0 + np.rint(d[has] * _NS_DAY).astype(np.int64).astype("timedelta64[ns]")
        x_m = (rng.uniform(0.3, 1.0) * d + noise)[has] / 1000.0
        iv = inverse_velocity(t, x_m, smoothing_days=SMOOTHING_DAYS)
        started = time.perf_counter()
        f = iv.forecast()
        times.append(1000.0 * (time.perf_counter() - started))
        reasons[re.sub(r"\d+", "N", re.split(r"[:;(]", f.reason)[0]).strip()
                if not f.supported else "supported"] += 1
    return {"median_ms": float(np.median(times)), "p95_ms": float(np.quantile(times, 0.95)),
            "reasons": reasons}


def calibrate(candidates: list[float], trials: int, seed: int, workers: int,
              alphas: list[float], real_scale: float | None, station: str) -> float | None:
    """Coverage of the 95 % interval per candidate value of the forecast's ``calibration``
    (``analysis.forecast.CALIBRATION``) over every alpha and horizon: pooled over all of
    them, and of the least-covered (alpha, horizon) cell, among supported forecasts; the
    smallest candidate with a pooled coverage of at least ``POOLED_COVERAGE`` and every
    cell at least ``CELL_COVERAGE`` is the rule's choice (printed and returned)."""
    print(f"{'factor':>6} {'coverage':>8} {'least cell':>10} {'at alpha, days':>14} "
          f"{'supported':>9} {'cover/all':>9}")
    chosen = None
    for c in sorted(candidates):
        cells = {(a, h): s for a in alphas for h, s in run(
            trials, seed, workers, alpha=a, real_scale=real_scale, station=station,
            calibration=c, stability=False).items()}
        supported = sum(s["supported"] for s in cells.values())
        covered = sum(s["coverage_all"] for s in cells.values())
        least = min(cells, key=lambda k: np.nan_to_num(cells[k]["coverage"], nan=2.0))
        pooled = covered / supported if supported else float("nan")
        print(f"{c:6g} {pooled:8.1%} {cells[least]['coverage']:10.1%} "
              f"{f'{least[0]:g}, {least[1]:g}':>14} {supported / len(cells):9.0%} "
              f"{covered / len(cells):9.1%}", flush=True)
        if chosen is None and pooled >= POOLED_COVERAGE and all(
                not s["coverage"] < CELL_COVERAGE for s in cells.values()):
            chosen = c
    print(f"\nRule: the smallest factor with a pooled coverage >= {POOLED_COVERAGE:.0%} and "
          f"every (alpha, days) cell >= {CELL_COVERAGE:.0%}: "
          f"{'none of these' if chosen is None else f'{chosen:g}'}")
    return chosen


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--trials", type=int, default=200, help="trials per horizon (200)")
    p.add_argument("--quick", action="store_true", help="40 trials per horizon")
    p.add_argument("--seed", type=int, default=16)
    p.add_argument("--workers", type=int, default=min(2, os.cpu_count() or 1))
    p.add_argument("--alpha", type=float, nargs="*", default=[2.0], metavar="ALPHA",
                   help="Voight's alpha of the simulated slopes, one or more (2: the server's"
                        f" physics; given with no value: {' '.join(map(str, ALPHAS))})")
    p.add_argument("--real-noise", type=float, default=None, metavar="SCALE",
                   help="coloured noise from a real station's residuals (real_noise.py) "
                        "times SCALE instead of simulated flicker noise")
    p.add_argument("--station", default=real_noise.EVALUATION_STATION,
                   choices=(real_noise.EVALUATION_STATION, real_noise.CALIBRATION_STATION),
                   help=f"real noise from the evaluation station "
                        f"({real_noise.EVALUATION_STATION}, default) or the calibration "
                        f"station ({real_noise.CALIBRATION_STATION}, the data "
                        f"analysis.forecast.CALIBRATION was tuned on)")
    p.add_argument("--calibrate", type=float, nargs="+", default=None, metavar="FACTOR",
                   help="instead of the table: the coverage of every alpha and horizon "
                        "with each of these values of the forecast's calibration factor "
                        "(analysis.forecast.CALIBRATION), and the rule's choice among them; "
                        "tune on the calibration station only")
    p.add_argument("--creep", type=int, default=None, metavar="N",
                   help="instead of the table: the forecast's time on N steady-creep series "
                        "(the cost per creeping rover in the pipeline), one process")
    args = p.parse_args()
    trials = 40 if args.quick else args.trials
    alphas = args.alpha or list(ALPHAS)
    if any(not 1.0 < a < 10.0 for a in alphas):
        p.error(f"--alpha must be between 1 and 10 (Voight's exponent), not {alphas}")
    if args.real_noise is None:
        coloured = f"flicker {FLICKER_MM_YR025:g} mm/yr^0.25"
    else:
        role = ("calibration" if args.station == real_noise.CALIBRATION_STATION
                else "evaluation")
        coloured = (f"real noise x{args.real_noise:g} of {args.station} (the {role} "
                    f"station: {real_noise.station_noise(args.station).describe()})")
    print("Failure forecast on synthetic accelerating slopes (Voight, alpha "
          f"{', '.join(f'{a:g}' for a in alphas)}): onset-to-failure 40-110 d, creep "
          f"0.3-1.0 mm/d before the onset; hourly, white {WHITE_MM[0]:g}-{WHITE_MM[1]:g} mm + "
          f"{coloured}, {FLOAT_RATE:.0%} float epochs x{FLOAT_FACTOR:g}, {OUTLIER_RATE:.1%} "
          f"outliers, {DROP_RATE:.0%} dropped epochs, outages; {SMOOTHING_DAYS:g}-day "
          f"velocity windows; {trials} trials per alpha and horizon, seed {args.seed}.")
    print("Coverage is among supported forecasts (a refusal is counted apart); cover/all "
          "counts refusals as misses.  bias: median of forecast - truth (+ late); late h: "
          "median lateness (an early forecast counts 0); late: share after the truth.  "
          "Stable: forecast with the data ending 2-6 h earlier lies in the first interval "
          "and moved by at most its half-width.  ms: median time of one forecast.\n")
    started = time.perf_counter()
    if args.creep:
        c = creep_cost(args.creep, args.seed, args.real_noise, args.station)
        print(f"Steady creep, {args.creep} series of {CREEP_DAYS:g} days: forecast median "
              f"{c['median_ms']:.1f} ms, 95th percentile {c['p95_ms']:.1f} ms; "
              + ", ".join(f"{k}: {v}" for k, v in c["reasons"].most_common()))
        return
    if args.calibrate:
        calibrate(args.calibrate, trials, args.seed, args.workers, alphas, args.real_noise,
                  args.station)
        print(f"\n{time.perf_counter() - started:.0f} s, {args.workers} worker(s)")
        return
    print(HEADER)
    for alpha in alphas:
        figures = run(trials, args.seed, args.workers, alpha=alpha,
                      real_scale=args.real_noise, station=args.station)
        for h, s in figures.items():
            print(row(alpha, h, s), flush=True)
    print(f"\n{time.perf_counter() - started:.0f} s, {args.workers} worker(s)")


if __name__ == "__main__":
    main()

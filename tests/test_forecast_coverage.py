"""Honest failure-time forecasts (issue 16, point 5; issue 28, point 4): coverage of the
stated 95 % interval on synthetic accelerating slopes (the reference server's physics,
white + flicker noise, outliers, gaps; ``benchmarks/bench_forecast.py`` at small trial
counts, fixed seeds), at Voight's alpha = 2 and beside it, stability against the data end
moving by a few hours, refusals, and the user's case."""

from __future__ import annotations

import numpy as np
import pytest

from analysis.inverse_velocity import inverse_velocity
from support import bench_module

bench = bench_module("bench_forecast")

HOUR = np.timedelta64(3_600_000_000_000, "ns")


def demo_forecast(end: str):
    """The pipeline's forecast of the demo's accelerating rover (seed 42, 6 sites, 48
    devices, 90 days, clock 2026-11-23: failure 2026-12-05 00:00) on its epochs up to
    ``end``."""
    from analysis.pipeline import analyze_rover
    from devmon_sync.server import gnss
    from devmon_sync.server.world import WorldSize, build_world

    anchor_s = int(np.datetime64("2026-11-23", "s").astype(np.int64))
    world = build_world(42, anchor_s, WorldSize(6, 48, 90))
    dev = next(d for d in world.devices if d.role.gnss_scenario == "accelerating")
    failure = np.datetime64(gnss.gnss_event_times(dev.role, world.origin_s,
                                                  world.anchor_s)["failure"], "s")
    end_s = int(np.datetime64(end, "s").astype(np.int64))
    ep = gnss.epochs(world, dev, world.origin_s, end_s, end_s)
    c = ep.cols
    epochs = {"ts": ep.t.astype("datetime64[s]"), "bs": None, "base_station_id": ep.bs,
              **{k: c[k] for k in ("lat", "lon", "eh", "sde", "sdn", "sdu", "q", "ns", "ar")}}
    del epochs["bs"]
    return analyze_rover(epochs, serial_number=dev.serial).forecast, failure


def test_the_users_case_covers_the_failure_and_is_stable():
    """Reported: 2026-12-08 with a 95 % interval from 12-05 20:15 while the simulator failed
    at 12-05 00:00, and a move of 31 h for data ending 2 h earlier.  Reproduced before the
    fix with data ending 2026-11-23 07:00: 12-08 06:34, interval from 12-05 20:30, and a
    move of 61 h from the data ending at 05:00.

    With alpha fitted (issue 28) the forecast 12 days ahead is 96 h late (alpha 1.89, 1.64
    to 2.2 allowed), its interval 11-30 18:28 to 12-23 09:42: twelve days before failure
    the data do not tell alpha = 2 from 1.9, and 0.1 in alpha moves the failure time by
    days.  This test asked for 24 h until then, which held only because alpha was fixed at
    the simulator's own 2; what it asks now is that the interval hold the failure and alpha
    = 2, and that the forecast be stable."""
    f, failure = demo_forecast("2026-11-23T07:00")
    g, _ = demo_forecast("2026-11-23T05:00")
    assert f.supported and g.supported, (f.reason, g.reason)
    lo, hi = f.interval
    assert lo <= failure <= hi, f
    assert f.alpha_interval[0] <= 2.0 <= f.alpha_interval[1], f.alpha_interval
    move = g.failure_time - f.failure_time
    half = (hi - f.failure_time) if move > np.timedelta64(0, "ns") else (f.failure_time - lo)
    assert abs(move) <= half and lo <= g.failure_time <= hi
    assert abs(move) < 6 * HOUR


def test_the_users_case_three_days_before_failure():
    """Data ending 3 days before the demo's failure: within 12 h of it (issue 28's goal),
    the interval holding it, alpha = 2 among the alphas allowed and no more than 0.25 wide
    around it (the data now tell alpha)."""
    f, failure = demo_forecast("2026-12-02T00:00")
    assert f.supported, f.reason
    lo, hi = f.interval
    assert lo <= failure <= hi and abs(f.failure_time - failure) < 12 * HOUR, f
    a_lo, a_hi = f.alpha_interval
    assert a_lo <= 2.0 <= a_hi and a_hi - a_lo <= 0.25, f.alpha_interval


@pytest.fixture(scope="module")
def figures():
    """24 trials per horizon (12 until issue 28: with alpha fitted, 30 days ahead one of the
    8 supported forecasts of 12 trials missed, which is 87.5 % of 8 and says little either
    way; of 100 trials 97.3 % covered, docs/benchmarks.md)."""
    return bench.run(trials=24, seed=16, workers=1)


@pytest.mark.parametrize("horizon", bench.HORIZONS_DAYS)
def test_coverage_at_each_horizon(figures, horizon):
    s = figures[horizon]
    assert s["coverage"] >= 0.90, s  # among supported forecasts
    if horizon <= 14:
        assert s["supported"] >= 0.80, s
    else:  # 30 days ahead a refusal can be honest, but not always
        assert s["supported"] >= 0.40, s


def test_error_shrinks_towards_failure_and_is_stable(figures):
    """Until issue 28 this asked for median errors under 24 / 12 / 4 h at 14 / 7 / 3 days,
    which held with alpha fixed at the simulator's own 2; with alpha fitted they are
    ~120 / 25 / 4 h (``docs/benchmarks.md``): what is asked now is that the error shrink
    towards failure, and the forecast not be late whatever alpha
    (``test_not_late_whatever_alpha``)."""
    mae = [figures[h]["mae_h"] for h in bench.HORIZONS_DAYS]
    assert mae[0] > mae[1] > mae[2] > mae[3], mae
    for h in bench.HORIZONS_DAYS:
        s = figures[h]
        assert s["pairs"] == 0 or s["stable"] >= 0.9, s
        assert s["pairs"] == 0 or s["move_ratio"] < 0.3, s


@pytest.mark.parametrize("alpha", [1.9, 2.1, 2.3])
def test_not_late_whatever_alpha(alpha):
    """Three days before failure, slopes of Voight's alpha 1.9-2.3: the median forecast is
    not later than 12 h after the failure, and the interval holds it (issue 28's goals).
    Before (alpha fixed at 2), on these 12 slopes: the interval held the failure in none
    of them at any of the three alphas, and the median forecast came 42 h late at 2.1 and
    144 h late at 2.3 (28 h early at 1.9)."""
    s = bench.run(trials=12, seed=16, workers=1, horizons=(3.0,), alpha=alpha,
                  stability=False)[3.0]
    assert s["supported"] >= 0.8 and s["coverage"] >= 0.9, s
    assert s["late_h"] <= 12.0, s


def _noise(seed: int, n: int) -> np.ndarray:
    rng = np.random.default_rng(seed)
    return 1.5 * rng.standard_normal(n) + bench.flicker(rng, n, bench.FLICKER_MM_YR025)


def test_refuses_steady_creep_and_a_stable_point_with_flicker_noise():
    d = np.arange(0.0, 90.0, 1.0 / 24.0)
    t = bench.T0 + np.rint(d * 86_400e9).astype(np.int64).astype("timedelta64[ns]")
    for seed in range(4):
        creep = (2.0 * d + _noise(seed, d.size)) / 1000.0  # 2 mm/day, steady
        f = inverse_velocity(t, creep, smoothing_days=4.0).forecast()
        assert not f.supported and f.failure_time is None, (seed, f)
        assert "no onset of acceleration" in f.reason or "cannot be bounded" in f.reason
        still = _noise(100 + seed, d.size) / 1000.0
        g = inverse_velocity(t, still, smoothing_days=4.0).forecast()
        assert not g.supported and g.failure_time is None, (seed, g)

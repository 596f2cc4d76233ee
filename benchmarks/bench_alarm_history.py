#!/usr/bin/env python3
"""How long a history the alarms' velocity noise needs: false alarms on real-noise points at
rest, per station, for each trailing history (``analysis.window_noise.NOISE_HISTORY_DAYS``).

The rule that chose 42 days, fixed before the runs: the longest of the histories given
whose points built from the calibration station (LHAS) reach no level in any point-month at
noise x1 and x0.5 (0 of 288: the rule of three's one-sided 95 % bound of 1 %); P156 scores
the choice.  Each point is ``bench_alarms.stable_point`` (hourly, one year, real noise),
analysed once over its whole record (the alarm history is causal, so a month's episodes are
those a user evaluating at that month's end would have seen begin), the demo's levels.

    python benchmarks/bench_alarm_history.py                      # 91 56 42 days, x1 x0.5
    python benchmarks/bench_alarm_history.py --days 91 --scales 1
"""

from __future__ import annotations

import argparse
import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))
import bench_alarms as bench  # noqa: E402
from analysis import window_noise  # noqa: E402
from analysis.pipeline import analyze_rover  # noqa: E402

POINTS = 48
SEED = 20250101


def point_months_at_a_level(scale: float) -> dict[str, tuple[int, int]]:
    """(point-months with a level reached, point-months) per station."""
    out = {"LHAS": [0, 0], "P156": [0, 0]}
    dates = bench.report_dates(365)
    for i in range(POINTS):
        epochs = bench.stable_point(i, SEED, 365, 0.0, real_scale=scale)
        a = analyze_rover(epochs, serial_number=f"REST{i}", sampling_period_s=3600.0,
                          alarm_levels=bench.LEVELS)
        station = bench.REAL_BLOCKS[i % len(bench.REAL_BLOCKS)][0]
        for start, end in zip([bench.START] + dates[:-1], dates):
            out[station][1] += 1
            out[station][0] += any(h.first_exceeded < end and h.last_exceeded >= start
                                   for h in a.alarm.history)
    return {k: (v[0], v[1]) for k, v in out.items()}


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--days", type=float, nargs="+", default=[91.0, 56.0, 42.0])
    p.add_argument("--scales", type=float, nargs="+", default=[1.0, 0.5])
    args = p.parse_args()
    print(f"{'history d':>10}{'noise':>7}{'LHAS (calibration)':>22}{'P156 (scoring)':>20}")
    for days in args.days:
        window_noise.NOISE_HISTORY_DAYS = days
        for scale in args.scales:
            r = point_months_at_a_level(scale)
            cells = [f"{r[s][0]}/{r[s][1]} ({r[s][0] / r[s][1]:.2%})" for s in ("LHAS", "P156")]
            print(f"{days:>10g}{scale:>7g}{cells[0]:>22}{cells[1]:>20}", flush=True)


if __name__ == "__main__":
    main()

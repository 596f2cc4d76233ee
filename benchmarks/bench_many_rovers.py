#!/usr/bin/env python3
"""Analysis of many rovers at once (issue 18, point 3): the process pool of ``devmon
analyze --jobs`` and ``devmon report --jobs`` (``devmon_sync.analyze.pool``).

1. Simulated rovers: 5,000 rovers of 1,500 hourly epochs each, analysed by
   ``analysis.pipeline.analyze_rover`` (the demo's options and alarm levels) through
   ``analyze_pool.run``, the helper the commands use, on every core.  The epochs come from
   ``bench_alarms.py``'s generator (``stable_point``: white + flicker noise, 0.5 %
   outliers, 1 % single epochs missing, outages of 1-3 days), each made in its worker: at
   rest, creeping (1 mm/day) from day 30, or accelerating from day 30 towards a failure on
   day 90 (``bench_alarms.py``'s motions, shifted), in the proportions of ``--mix``
   (default 8:1:1, a network where most points are stable; a moving rover costs more: the
   failure forecast is fitted to it).  Printed: total wall time (generation included),
   analysis ms per rover by motion (measured in the workers), the serial time against the
   pool's on the first ``--ratio-rovers`` rovers (alternated, repeated), and peak memory
   of this process and of a worker.
2. Break-even: rovers of a synced mirror analysed through ``analyze_pool.run``
   (``devmon_sync.analyze.rovers.analyze_device``, workers opening the mirror read-only) serially
   and on 2 workers, for growing numbers of rovers: below how many the pool's start-up
   costs more than it saves (``analyze_pool.MIN_ROVERS_PER_WORKER``).
3. End to end: ``devmon analyze --db MIRROR --jobs 1`` against ``--jobs 2`` (subprocesses,
   alternated, repeated), and whether the two print the same bytes.

The mirror (a reference-server world synced in-process; 300 devices, 60 days: ~80 rovers of
~1,200 epochs; ``--quick``: 60 devices) is kept at ``--mirror`` when given, else made in a
temporary folder.  The machine is shared: every comparison is repeated and alternated, and
min and median are printed.

    python benchmarks/bench_many_rovers.py            # 5,000 rovers; ~3.5 min
    python benchmarks/bench_many_rovers.py --quick    # 200 rovers, smaller mirror; ~1 min
"""

from __future__ import annotations

import argparse
import os
import platform
import resource
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))
sys.path.insert(0, str(Path(__file__).resolve().parent))
from analysis.pipeline import AnalysisOptions, analyze_rover  # noqa: E402
from bench_alarms import (LEVELS, accelerating_motion, creep_motion,  # noqa: E402
                          stable_point)
from devmon_sync.analyze import pool as analyze_pool  # noqa: E402

EPOCHS = 1500
DAYS = 70  # generated, then cut to the first EPOCHS epochs (gaps remove ~4 %)
SEED = 20260101
SCENARIOS = ("at rest", "creeping", "accelerating")
# creeping from day 30; accelerating from day 30 towards a failure on day 90
MOTIONS = (None, lambda day: creep_motion(day + 60.0), lambda day: accelerating_motion(day + 70.0))


def simulated_rover(mirror, index: int, seed: int, scenario: int) -> tuple:
    """In a worker: one rover made and analysed; (generation s, analysis CPU s, epochs,
    alarm level, 3D velocity mm/day)."""
    start = time.process_time()
    epochs = stable_point(index, seed, DAYS, 0.0, MOTIONS[scenario])
    epochs = {k: v[:EPOCHS] for k, v in epochs.items()}
    made = time.process_time()
    a = analyze_rover(epochs, serial_number=f"SIM{index:05d}", options=AnalysisOptions.build(),
                      sampling_period_s=3600.0, alarm_levels=LEVELS)
    done = time.process_time()
    return (made - start, done - made, int(epochs["ts"].size),
            a.alarm.overall if a.alarm else None, a.velocity["3d"].mm_per_day)


def peak_mb(who) -> float:
    return resource.getrusage(who).ru_maxrss / 1024.0


def cpu_seconds() -> float:
    """CPU time of this process and of its finished children (the pool's workers)."""
    return sum(r.ru_utime + r.ru_stime for r in (resource.getrusage(resource.RUSAGE_SELF),
                                                 resource.getrusage(resource.RUSAGE_CHILDREN)))


def measured(fn) -> tuple[float, float, object]:
    """(wall s, CPU s of this process and the workers, result) of ``fn()``."""
    wall, cpu = time.perf_counter(), cpu_seconds()
    out = fn()
    return time.perf_counter() - wall, cpu_seconds() - cpu, out


def spread(values) -> str:
    return f"min {min(values):.2f}, median {statistics.median(values):.2f}"


def load() -> str:
    return "load average " + "/".join(f"{x:.1f}" for x in os.getloadavg())


def population(n: int, mix: str) -> list[int]:
    """The scenario of each rover: ``mix`` weights (at rest:creeping:accelerating) as a
    repeating pattern (8:1:1: in every ten rovers, eight at rest, one of each motion)."""
    weights = [int(w) for w in mix.split(":")]
    pattern = [k for k, w in enumerate(weights) for _ in range(w)]
    return [pattern[i % len(pattern)] for i in range(n)]


def simulated(args) -> None:
    n = args.rovers
    kinds = population(n, args.mix)
    tasks = [(i, SEED, kind) for i, kind in enumerate(kinds)]
    counts = ", ".join(f"{kinds.count(k)} {name}" for k, name in enumerate(SCENARIOS))
    workers = analyze_pool.worker_count(None, n) if args.workers is None else args.workers
    print(f"1. {n:,} simulated rovers of {EPOCHS} hourly epochs ({counts}), {workers} "
          f"workers (analyze_pool.run); {load()}")
    wall, cpu, out = measured(lambda: analyze_pool.run(simulated_rover, tasks, jobs=None,
                                                       workers=args.workers))
    failed = [o for o in out if isinstance(o, analyze_pool.Failed)]
    ok = [o for o in out if not isinstance(o, analyze_pool.Failed)]
    made = np.array([o[0] for o in ok]) * 1e3
    analysed = np.array([o[1] for o in ok]) * 1e3
    print(f"   total {wall:.1f} s wall ({load()}), {len(failed)} refused; {cpu:.1f} CPU s in "
          f"all ({cpu / n * 1e3:.1f} ms a rover), so ~{cpu / workers:.0f} s on {workers} "
          f"idle cores; {int(np.median([o[2] for o in ok]))} epochs per rover")
    print(f"   analysis CPU per rover (in the workers): mean {np.mean(analysed):.1f} ms, "
          f"median {np.median(analysed):.1f}, p95 {np.percentile(analysed, 95):.1f}; "
          f"generation median {np.median(made):.1f} ms")
    done = [kinds[i] for i, o in enumerate(out) if not isinstance(o, analyze_pool.Failed)]
    by_kind = ", ".join(
        f"{name} {np.mean(analysed[[k == kind for k in done]]):.1f} ms"
        for kind, name in enumerate(SCENARIOS) if kind in done)
    print(f"   analysis CPU mean by motion: {by_kind}")
    levels = {}
    for o in ok:
        levels[o[3]] = levels.get(o[3], 0) + 1
    print(f"   alarm levels at the end: {levels}")
    print(f"   peak memory: this process {peak_mb(resource.RUSAGE_SELF):.0f} MB, largest "
          f"worker {peak_mb(resource.RUSAGE_CHILDREN):.0f} MB")
    m = min(args.ratio_rovers, n)
    runs = {0: [], None: []}
    for _ in range(args.repeat):
        for w in (0, None):
            runs[w].append(measured(lambda: analyze_pool.run(simulated_rover, tasks[:m],
                                                             jobs=None, workers=w))[:2])
    serial, pool = ([r[0] for r in runs[k]] for k in (0, None))
    ratios = [a / b for a, b in zip(serial, pool)]
    overhead = [b[1] / a[1] for a, b in zip(runs[0], runs[None])]
    print(f"   serial against the pool, the first {m} rovers ({args.repeat}x, alternated; "
          f"{load()}): serial {spread(serial)} s, pool {spread(pool)} s wall; serial/pool "
          f"{spread(ratios)}x (ideal {workers}x on idle cores); the pool's CPU / serial CPU "
          f"{spread(overhead)}x")


def mirror_rovers(path: Path) -> list:
    from devmon_sync.store import Mirror, queries

    with Mirror.open(path, read_only=True) as m:
        return [d for d in queries.gnss_devices(m) if d.epochs]


def break_even(path: Path, args) -> None:
    from devmon_sync.analyze.rovers import analyze_device
    from devmon_sync.store import Mirror

    devices = mirror_rovers(path)
    options = AnalysisOptions.build()
    print(f"\n2. Break-even: rovers of the mirror analysed serially and on 2 workers "
          f"(analyze_pool.run, analyze_device; {args.repeat}x, alternated)")
    print(f"   ({load()}; CPU: this process and the workers)")
    print(f"   {'rovers':>6} {'serial s':>9} {'2 workers s':>12} {'serial/pool':>12} "
          f"{'serial CPU s':>13} {'pool CPU s':>11}")
    counts = sorted({c for c in (8, 16, 24, 32, 48, 64, len(devices)) if c <= len(devices)})
    with Mirror.open(path, read_only=True) as mirror:
        for count in counts:
            tasks = [(d, options, None, None) for d in devices[:count]]
            runs = {0: [], 2: []}
            for _ in range(args.repeat):
                for workers in (0, 2):
                    runs[workers].append(measured(lambda: analyze_pool.run(
                        analyze_device, tasks, mirror=mirror, workers=workers))[:2])
            (s, sc), (p, pc) = ([statistics.median(v) for v in zip(*runs[k])] for k in (0, 2))
            print(f"   {count:6d} {s:9.2f} {p:12.2f} {s / p:11.2f}x {sc:13.2f} {pc:11.2f}")
    print(f"   (the commands use the pool from {2 * analyze_pool.MIN_ROVERS_PER_WORKER} rovers "
          f"on 2 workers: analyze_pool.MIN_ROVERS_PER_WORKER = "
          f"{analyze_pool.MIN_ROVERS_PER_WORKER})")


def end_to_end(path: Path, args) -> None:
    n = len(mirror_rovers(path))
    print(f"\n3. devmon analyze --db MIRROR (all {n} rovers), --jobs 1 against --jobs 2 "
          f"({args.repeat}x, alternated)")
    times = {1: [], 2: []}
    cpus = {1: [], 2: []}
    outputs = {}
    for _ in range(args.repeat):
        for jobs in (1, 2):
            wall, cpu, done = measured(lambda: subprocess.run(
                [sys.executable, "-m", "devmon_sync", "analyze", "--db", str(path), "--jobs",
                 str(jobs)], capture_output=True, check=True))
            times[jobs].append(wall)
            cpus[jobs].append(cpu)
            outputs.setdefault(jobs, done.stdout)
    ratios = [a / b for a, b in zip(times[1], times[2])]
    print(f"   --jobs 1 {spread(times[1])} s; --jobs 2 {spread(times[2])} s wall; "
          f"jobs1/jobs2 {spread(ratios)}x ({load()}); CPU --jobs 1 "
          f"{statistics.median(cpus[1]):.2f} s, --jobs 2 {statistics.median(cpus[2]):.2f} s; "
          f"per rover (--jobs 2, median wall) {statistics.median(times[2]) / n * 1e3:.0f} ms")
    print(f"   same output: {'yes' if outputs[1] == outputs[2] else 'NO'} "
          f"({len(outputs[1]):,} bytes)")


def synced(path: Path, devices: int) -> Path:
    if path.exists():
        return path
    from _common import sync_world
    from devmon_sync.server import WorldSize

    took, counts = sync_world(path, WorldSize(sites=6, devices=devices, days=60))
    print(f"   (synced {path}: {counts[0]} devices, {counts[3]:,} GNSS epochs in {took:.0f} s)")
    return path


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--quick", action="store_true", help="200 rovers, a 60-device mirror")
    p.add_argument("--rovers", type=int, default=None, help="simulated rovers (5000)")
    p.add_argument("--mix", default="8:1:1",
                   help="rovers at rest:creeping:accelerating (default 8:1:1)")
    p.add_argument("--ratio-rovers", type=int, default=400,
                   help="rovers of the serial/pool comparison (default 400)")
    p.add_argument("--workers", type=int, default=None,
                   help="workers of part 1 (default: worker_count, one per core)")
    p.add_argument("--repeat", type=int, default=3)
    p.add_argument("--mirror", type=Path, help="keep (or reuse) the synced mirror here")
    p.add_argument("--skip-simulated", action="store_true")
    args = p.parse_args()
    args.rovers = args.rovers or (200 if args.quick else 5000)
    if args.quick:
        args.ratio_rovers = min(args.ratio_rovers, 100)
    print(f"bench_many_rovers: {platform.machine()} {platform.system()}, "
          f"{os.cpu_count()} cores, Python {platform.python_version()}, numpy "
          f"{np.__version__}")
    if not args.skip_simulated:
        simulated(args)
    with tempfile.TemporaryDirectory() as tmp:
        devices = 60 if args.quick else 300
        path = synced(args.mirror or Path(tmp) / f"world-{devices}.duckdb", devices)
        break_even(path, args)
        end_to_end(path, args)


if __name__ == "__main__":
    main()

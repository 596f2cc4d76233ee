#!/usr/bin/env python3
"""What the desktop app reads when it opens a 100-million-reading mirror, and at each later
click (issue 18, point 1): every read through the store API the window uses
(``browse.OPENING_READS``, the list ``gui.main_window`` runs), timed one by one, with the
process's peak memory.

The mirror is built once by a real sync from the in-process reference server (400 devices,
730 days: about 104M readings, 1.6 GB, some 4 minutes) and cached, keyed by its size, under
``$DEVMON_BENCH_CACHE`` (default ``~/.cache/devmon-bench``), so later runs time only the
reads; a cached mirror of an older schema is upgraded first (the upgrade's time is printed:
what a user's first open after updating devmon costs).

    python benchmarks/bench_open_large.py                 # 400 devices x 730 days
    python benchmarks/bench_open_large.py --devices 60 --days 120 --repeat 3   # a quick look

Goals: the opening reads under 2 s in all, each click under 300 ms.  Each read is timed
cold (the first, right after opening the file: what a user waits for) and warm (best of
``--repeat``).  The baseline is a bare DuckDB ``count(*)`` of readings per parameter
(``GROUP BY``: one pass over the table), the least a read that looks at the data can cost.
"""

from __future__ import annotations

import argparse
import os
import platform
import resource
import shutil
import sys
import time
from datetime import timedelta
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO))
sys.path.insert(0, str(Path(__file__).resolve().parent))

from _common import sync_world  # noqa: E402

from devmon_sync.server import WorldSize  # noqa: E402
from devmon_sync.store import Mirror, browse, queries  # noqa: E402
from devmon_sync.store.mirror import OlderSchemaError  # noqa: E402
from devmon_sync.store.schema import LATEST_VERSION  # noqa: E402

OPEN_GOAL_S = 2.0
CLICK_GOAL_S = 0.3


def cached_mirror(size: WorldSize) -> Path:
    """The synced mirror of ``size``, built on first use (by a real sync) and kept."""
    root = Path(os.environ.get("DEVMON_BENCH_CACHE", Path.home() / ".cache" / "devmon-bench"))
    path = root / f"mirror-{size.sites}s-{size.devices}d-{size.days}days.duckdb"
    if path.exists():
        upgrade(path)
        return path
    root.mkdir(parents=True, exist_ok=True)
    partial = path.with_suffix(".partial")
    for stale in (partial, Path(f"{partial}.wal")):
        stale.unlink(missing_ok=True)
    print(f"building {path.name} by a real sync (once; minutes)...", flush=True)
    seconds, counts = sync_world(partial, size)
    print(f"  synced in {seconds:.0f} s: {counts[2]:,} readings, {counts[3]:,} epochs",
          flush=True)
    shutil.move(partial, path)
    return path


def upgrade(path: Path) -> None:
    """Migrate a cached mirror of an older schema (a read-write open does it)."""
    try:
        Mirror.open(path, read_only=True).close()
    except OlderSchemaError:
        t = time.perf_counter()
        Mirror.open(path).close()
        print(f"upgraded the cached mirror to schema {LATEST_VERSION} in "
              f"{time.perf_counter() - t:.1f} s", flush=True)


def timed(fn, m, repeat: int) -> tuple[float, float]:
    """(first call, best of the next ``repeat``) in seconds."""
    t = time.perf_counter()
    fn(m)
    cold = time.perf_counter() - t
    warm = []
    for _ in range(repeat):
        t = time.perf_counter()
        fn(m)
        warm.append(time.perf_counter() - t)
    return cold, min(warm) if warm else cold


def clicks(m) -> list[tuple[str, object]]:
    """The reads of a user's later clicks: a device, a site's health, a year of the busiest
    parameter's plot, one rover's epochs for the GNSS tab, its positions for the plan."""
    busiest = m._row("SELECT parameter_uuid::VARCHAR FROM readings GROUP BY 1 "
                     "ORDER BY count(*) DESC LIMIT 1")[0]
    device = m._row("SELECT device_serial_number FROM parameters WHERE uuid = ?::UUID",
                    [busiest])[0]
    site = m._row("SELECT site_uuid::VARCHAR FROM devices WHERE serial_number = ?", [device])[0]
    rover = next(d for d in queries.gnss_devices(m) if d.epochs)
    end = m._row("SELECT max(ts) FROM readings WHERE parameter_uuid = ?::UUID", [busiest])[0]
    start = end - timedelta(days=365)
    return [
        ("device sheet (device_details)", lambda m: browse.device_details(m, device)),
        ("site health of one site", lambda m: browse.site_health(m, site)),
        ("parameter info", lambda m: browse.parameter_info(m, busiest)),
        ("plot: one year, decimated", lambda m: browse.readings_decimated(
            m, busiest, start, end, 1500)),
        ("plot: visible-range stats", lambda m: browse.readings_stats(m, busiest, start, end)),
        ("GNSS tab: one rover's epochs", lambda m: queries.gnss_epochs(m, rover.serial_number)),
        ("GNSS plan: positions", browse.gnss_positions),
        ("alarm levels of a rover", lambda m: queries.alarm_levels(m, rover.serial_number)),
    ]


def baseline(m) -> None:
    m.con.execute("SELECT parameter_uuid, count(*) FROM readings GROUP BY 1").fetchall()


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--devices", type=int, default=400)
    ap.add_argument("--days", type=int, default=730)
    ap.add_argument("--sites", type=int, default=6)
    ap.add_argument("--repeat", type=int, default=3)
    args = ap.parse_args()
    path = cached_mirror(WorldSize(args.sites, args.devices, args.days))
    t = time.perf_counter()
    with Mirror.open(path, read_only=True) as m:
        opened = time.perf_counter() - t
        counts = m._row("SELECT (SELECT count(*) FROM readings), (SELECT count(*) FROM "
                        "gnss_epochs)")
        print(f"bench_open_large: {platform.machine()} {platform.system()}, Python "
              f"{platform.python_version()}; {args.devices} devices x {args.days} days: "
              f"{counts[0]:,} readings, {counts[1]:,} epochs, "
              f"{path.stat().st_size / 1e9:.2f} GB; cold = first call after opening, "
              f"warm = best of {args.repeat}")
        print(f"{'read':44} {'cold s':>8} {'warm s':>8}")
        print(f"{'open the file (read-only)':44} {opened:8.3f}")
        total = 0.0
        for _key, name, fn in browse.OPENING_READS:
            cold, warm = timed(fn, m, args.repeat)
            total += cold
            print(f"{'open: ' + name:44} {cold:8.3f} {warm:8.3f}")
        print(f"{'OPENING IN ALL (cold)':44} {total + opened:8.3f}   goal < {OPEN_GOAL_S:g} s")
        worst = 0.0
        for name, fn in clicks(m):
            cold, warm = timed(fn, m, args.repeat)
            worst = max(worst, cold)
            print(f"{'click: ' + name:44} {cold:8.3f} {warm:8.3f}")
        print(f"{'SLOWEST CLICK (cold)':44} {worst:8.3f}   goal < {CLICK_GOAL_S:g} s")
        cold, warm = timed(baseline, m, args.repeat)
        print(f"{'baseline: count(*) per parameter':44} {cold:8.3f} {warm:8.3f}")
    peak = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024
    print(f"peak memory (max RSS): {peak:.0f} MiB")


if __name__ == "__main__":
    main()

#!/usr/bin/env python3
"""What it costs the desktop app to hold no lock on the mirror (issue 15, point 8).

The window used to keep one read-write connection open; now each task opens the file
read-only at its first read and closes it (``devmon_sync.store.access.MirrorAccess``), so a
scheduled `devmon sync` can write the file beside it.  This times, on a synced 200-device
mirror, the window's reads both ways, best of ``--repeat``:

* opening: ``Mirror.open(read_only=True)`` + close, alone (what each task now adds);
* the overview a refresh reads (device tree, group tree, site health, GNSS devices, last
  sync), through a held connection against through a fresh ``MirrorAccess`` task view;
* one parameter's readings (a plot), likewise;
* the same with another task's view open meanwhile (the DuckDB instance is then shared, so
  the open costs nothing).

    python benchmarks/bench_mirror_access.py [--days 30] [--repeat 7]    # about 2 minutes

The machine is shared: read the ratios, not the milliseconds.
"""

from __future__ import annotations

import argparse
import platform
import sys
import tempfile
import time
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO))
sys.path.insert(0, str(Path(__file__).resolve().parent))

from _common import sync_world  # noqa: E402

from devmon_sync.server import WorldSize  # noqa: E402
from devmon_sync.store import Mirror, browse  # noqa: E402
from devmon_sync.store.access import MirrorAccess  # noqa: E402


def overview(m) -> None:
    """What the window's refresh reads (``browse.OPENING_READS``, as the GUI runs it)."""
    for _key, _what, read in browse.OPENING_READS:
        read(m)


def best(fn, repeat: int) -> float:
    times = []
    for _ in range(repeat):
        t = time.perf_counter()
        fn()
        times.append(time.perf_counter() - t)
    return min(times)


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--days", type=int, default=30, help="history of the 200-device world")
    ap.add_argument("--repeat", type=int, default=7)
    args = ap.parse_args()
    with tempfile.TemporaryDirectory() as tmp:
        path = Path(tmp) / "mirror.duckdb"
        synced, counts = sync_world(path, WorldSize(devices=200, days=args.days))
        size_mb = path.stat().st_size / 1e6
        print(f"bench_mirror_access: {platform.machine()} {platform.system()}, Python "
              f"{platform.python_version()}; 200 devices, {args.days} days: {counts[2]:,} "
              f"readings, {counts[3]:,} epochs, {size_mb:.0f} MB (synced in {synced:.0f} s)")
        with Mirror.open(path, read_only=True) as m:
            uuid = m._row("SELECT parameter_uuid::VARCHAR FROM readings GROUP BY 1 "
                          "ORDER BY count(*) DESC LIMIT 1")[0]
        access = MirrorAccess(path)

        def through_access(fn):
            def run():
                view = access.for_thread()
                try:
                    fn(view)
                finally:
                    view.close()
            return run

        held = Mirror.open(path, read_only=True)
        try:
            rows = [
                ("open + close alone", None,
                 best(lambda: Mirror.open(path, read_only=True).close(), args.repeat)),
                ("overview (refresh)", best(lambda: overview(held), args.repeat),
                 best(through_access(overview), args.repeat)),
                ("one parameter's readings", best(lambda: browse.readings(held, uuid),
                                                  args.repeat),
                 best(through_access(lambda m: browse.readings(m, uuid)), args.repeat)),
            ]
        finally:
            held.close()
        other = access.for_thread()
        other.schema_version()  # another task's view open: the instance is shared
        try:
            rows.append(("overview, another task reading", None,
                         best(through_access(overview), args.repeat)))
        finally:
            other.close()
    print(f"{'read':32} {'held conn ms':>13} {'per-task ms':>12} {'ratio':>7}")
    for name, a, b in rows:
        ratio = f"{b / a:7.2f}" if a else "      -"
        held_ms = f"{a * 1000:13.1f}" if a else f"{'-':>13}"
        print(f"{name:32} {held_ms} {b * 1000:12.1f} {ratio}")


if __name__ == "__main__":
    main()

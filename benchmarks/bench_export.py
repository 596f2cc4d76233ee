#!/usr/bin/env python3
"""`devmon export` at scale (issue 18, point 2): the first export of a large mirror, the next
one with nothing new, and one after the last day changed, against a bare DuckDB baseline.

The mirror is ``bench_open_large.py``'s: a real sync of 400 devices x 730 days (~104M
readings, 1.6 GB), built once and cached under ``$DEVMON_BENCH_CACHE``
(``~/.cache/devmon-bench``); ``--quick`` uses 60 devices x 120 days.  It is copied into a
temporary folder first (the export records what it wrote in the mirror, and the third step
changes data), so the cache is never touched.

1. ``devmon export --format parquet`` (a subprocess, as a user runs it) into an empty folder.
2. The same command again: nothing new, so nothing is written.
3. The last day of readings deleted from the copy (every device's latest month changes, as
   after a re-sync replaced that day), then the command again: only those partitions.

The baseline is what the export does at least: one bare DuckDB ``COPY ... PARTITION_BY
(device_serial_number, month)`` per partitioned table, of the same rows with the same types
(UUIDs as text, zstd), into another empty folder, with no fingerprints, manifest or atomic
renames: once with DuckDB's default memory limit (80 % of RAM) and once with the limit every
devmon connection sets (``store.mirror.MEMORY_LIMIT``, for a laptop's memory), so the two
costs (devmon's bookkeeping, the memory cap) show apart.  Printed: seconds, partitions and
files written and peak memory of each step, and the ratio of the first export to the
baselines.

    python benchmarks/bench_export.py            # the 104M-reading mirror; ~7 min
    python benchmarks/bench_export.py --quick    # 60 devices x 120 days; ~1 min
"""

from __future__ import annotations

import argparse
import os
import platform
import re
import shutil
import subprocess
import sys
import tempfile
import time
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO))
sys.path.insert(0, str(Path(__file__).resolve().parent))

import duckdb  # noqa: E402
from bench_open_large import cached_mirror  # noqa: E402

from devmon_sync.server import WorldSize  # noqa: E402
from devmon_sync.store.mirror import MEMORY_LIMIT  # noqa: E402

# The partitioned tables as the export writes them (UUIDs as text, device and month as the
# Hive folders), for the baseline.
SHAPED = {
    "readings": "SELECT r.* REPLACE (r.parameter_uuid::VARCHAR AS parameter_uuid), "
                "p.device_serial_number, strftime(r.ts AT TIME ZONE 'UTC', '%Y-%m') AS month "
                "FROM readings r JOIN parameters p ON p.uuid = r.parameter_uuid",
    "gnss_epochs": "SELECT * REPLACE (sensor_uuid::VARCHAR AS sensor_uuid), "
                   "strftime(ts AT TIME ZONE 'UTC', '%Y-%m') AS month FROM gnss_epochs",
    "gnss_projected": "SELECT g.* REPLACE (g.sensor_uuid::VARCHAR AS sensor_uuid), "
                      "s.device_serial_number, strftime(g.ts AT TIME ZONE 'UTC', '%Y-%m') "
                      "AS month FROM gnss_projected g JOIN gnss_solutions s USING (sensor_uuid)",
}


def measured(argv: list[str]) -> tuple[float, str, float]:
    """Run ``argv``: (wall seconds, its stdout, its peak memory in MB, from ``wait4``).
    Each command is its own process, and so is the baseline: a child's peak is its own
    (this process holds no DuckDB buffers a fork would count)."""
    with tempfile.TemporaryFile("w+") as out, tempfile.TemporaryFile("w+") as err:
        start = time.perf_counter()
        proc = subprocess.Popen(argv, stdout=out, stderr=err, text=True)
        _, status, usage = os.wait4(proc.pid, 0)
        took = time.perf_counter() - start
        out.seek(0)
        err.seek(0)
        if os.waitstatus_to_exitcode(status):
            sys.exit(f"{argv[2:4]} failed: {err.read().strip()}")
        return took, out.read(), usage.ru_maxrss / 1024


def export(db: Path, out: Path) -> tuple[float, str, float]:
    """``devmon export`` in a subprocess: (wall seconds, its summary line, peak MB)."""
    took, stdout, peak = measured([sys.executable, "-m", "devmon_sync", "export", "--db",
                                   str(db), "--out", str(out)])
    summary = next(line for line in stdout.splitlines() if " unchanged, " in line
                   and line.startswith(tuple("0123456789")))
    return took, summary, peak


BASELINE = """
import sys, duckdb
con = duckdb.connect(sys.argv[1], read_only=True)
con.execute("SET TimeZone = 'UTC'")
if len(sys.argv) > 3:
    con.execute(f"SET memory_limit = '{{sys.argv[3]}}'")
for table, select in {shaped!r}.items():
    con.execute(f"COPY ({{select}}) TO '{{sys.argv[2]}}/{{table}}' (FORMAT parquet, "
                f"COMPRESSION zstd, PARTITION_BY (device_serial_number, month))")
"""


def baseline(db: Path, out: Path, memory_limit: str | None) -> tuple[float, float]:
    """Bare DuckDB COPY of the partitioned tables, partitioned the same way, in a process
    of its own, with DuckDB's default memory limit (80 % of RAM) or ``memory_limit``:
    (seconds, peak MB)."""
    out.mkdir()
    took, _, peak = measured([sys.executable, "-c", BASELINE.format(shaped=SHAPED), str(db),
                              str(out), *([memory_limit] if memory_limit else [])])
    shutil.rmtree(out)
    return took, peak


def change_last_day(db: Path) -> int:
    """Delete the last day of readings (every device's latest month changes): rows deleted."""
    con = duckdb.connect(str(db))
    (n,) = con.execute("DELETE FROM readings WHERE ts > (SELECT max(ts) FROM readings) "
                       "- INTERVAL 1 DAY").fetchone()
    con.close()
    return int(n)


def size_of(folder: Path) -> tuple[int, int]:
    files = [p for p in folder.rglob("*") if p.is_file()]
    return len(files), sum(p.stat().st_size for p in files)


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--quick", action="store_true", help="60 devices x 120 days")
    args = ap.parse_args()
    size = WorldSize(6, 60, 120) if args.quick else WorldSize(6, 400, 730)
    cached = cached_mirror(size)
    print(f"bench_export: {platform.machine()} {platform.system()}, {os.cpu_count()} cores, "
          f"Python {platform.python_version()}, duckdb {duckdb.__version__}; "
          f"load average {'/'.join(f'{x:.1f}' for x in os.getloadavg())}")
    with tempfile.TemporaryDirectory(dir=cached.parent) as tmp:
        db = Path(tmp) / "mirror.duckdb"
        shutil.copy(cached, db)
        con = duckdb.connect(str(db), read_only=True)
        (readings,) = con.execute("SELECT count(*) FROM readings").fetchone()
        con.close()
        print(f"mirror: {cached.name} ({readings:,} readings, "
              f"{cached.stat().st_size / 1e9:.2f} GB), copied")
        bare = {}
        for limit in (None, MEMORY_LIMIT):
            bare[limit], peak = baseline(db, Path(tmp) / "bare", limit)
            print(f"baseline, bare DuckDB COPY ... PARTITION_BY of the 3 partitioned tables, "
                  f"memory limit {limit or 'DuckDB default (80 % of RAM)'}: {bare[limit]:.1f} "
                  f"s, peak {peak:.0f} MB")
        out = Path(tmp) / "export"
        steps = [("first export", None), ("again, nothing new", None),
                 ("after the last day changed", change_last_day)]
        first = None
        for name, before in steps:
            extra = ""
            if before is not None:
                extra = f" ({before(db):,} readings deleted first)"
            took, summary, peak = export(db, out)
            first = first or took
            written = re.sub(r"; manifest .*", "", summary)
            print(f"{name:28} {took:7.1f} s  peak {peak:5.0f} MB  {written}{extra}")
        files, size_e = size_of(out)
        print(f"export folder: {files:,} files, {size_e / 1e9:.2f} GB; first export / "
              f"baseline {first / bare[MEMORY_LIMIT]:.2f}x at devmon's memory limit "
              f"({MEMORY_LIMIT}), {first / bare[None]:.2f}x against DuckDB's default")


if __name__ == "__main__":
    main()

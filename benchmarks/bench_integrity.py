#!/usr/bin/env python3
"""What checking a mirror file whole costs (``devmon_sync.store.integrity.check``, issue 29):
the read a command pays before it writes to a file devmon did not last check or write
itself (a copy, a restore, another program), so that a damaged file is never written to.

The mirror is a real one made by ``Mirror.open`` (every table of the schema), its
``readings`` table filled directly in DuckDB with ``--readings`` rows (1,000 parameters, one
reading a minute; not through a sync: only the file's size matters here), then checkpointed
and closed.  Timed alternately, ``--repeat`` times each, in one process:

- the check (every column of every table read once: each block's checksum verified);
- the baseline: a bare DuckDB ``count(*)`` of readings per parameter (one pass over the
  table, the least a read that looks at the data costs).

The figure is the ratio check / baseline (median).  The file is written under ``--dir``
(default: a temporary folder) and removed.

    python benchmarks/bench_integrity.py --readings 20000000 --repeat 3
"""

from __future__ import annotations

import argparse
import statistics
import sys
import tempfile
import time
from pathlib import Path

import duckdb

REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO))

from devmon_sync.store import Mirror  # noqa: E402
from devmon_sync.store.integrity import check  # noqa: E402

PARAMETERS = 1000


def build(path: Path, readings: int) -> float:
    """A mirror at ``path`` holding ``readings`` rows; its size in MB."""
    Mirror.open(path).close()
    con = duckdb.connect(str(path))
    con.execute(f"""
        INSERT INTO readings
        SELECT ('00000000-0000-4000-8000-' || lpad((i % {PARAMETERS})::VARCHAR, 12, '0'))::UUID,
               TIMESTAMPTZ '2024-01-01 00:00:00+00' + INTERVAL 1 MINUTE * (i // {PARAMETERS}),
               sin(i * 0.001) * 10 + (i % 7) * 0.01
        FROM range({readings}) t(i)""")
    con.execute("CHECKPOINT")
    con.close()
    return path.stat().st_size / 1e6


def timed(fn) -> float:
    started = time.perf_counter()
    fn()
    return time.perf_counter() - started


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--readings", type=int, default=20_000_000)
    p.add_argument("--repeat", type=int, default=3)
    p.add_argument("--dir", default=None, help="where to write the mirror (default: a temp dir)")
    args = p.parse_args()
    with tempfile.TemporaryDirectory(dir=args.dir) as tmp:
        path = Path(tmp) / "mirror.duckdb"
        mb = build(path, args.readings)
        print(f"mirror: {args.readings:,} readings, {mb:,.0f} MB")
        checks, bases = [], []
        for _ in range(args.repeat):
            con = duckdb.connect(str(path), read_only=True)
            checks.append(timed(lambda: check(con, str(path))))
            con.close()
            con = duckdb.connect(str(path), read_only=True)
            bases.append(timed(lambda: con.execute(
                "SELECT parameter_uuid, count(*) FROM readings GROUP BY ALL").fetchall()))
            con.close()
        c, b = statistics.median(checks), statistics.median(bases)
        print(f"check whole file: median {c:.2f} s ({args.readings / c / 1e6:.0f} M readings/s,"
              f" {mb / c:,.0f} MB/s)")
        print(f"baseline count(*) per parameter: median {b:.2f} s")
        print(f"ratio check / baseline: {c / b:.2f}")


if __name__ == "__main__":
    main()

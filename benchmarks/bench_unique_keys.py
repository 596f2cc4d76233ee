#!/usr/bin/env python3
"""What a PRIMARY KEY would cost the mirror's data tables, against the check devmon uses.

Inserts windows of readings (200 streams x 500 points, as a sync commits them) into a DuckDB
file with the mirror's memory limit, three ways: no key; a PRIMARY KEY (parameter_uuid, ts);
no key but the count check ``Mirror._refuse_doubles`` runs after each insert.  Then the same
for GNSS epochs (16 sensors x 625 epochs, 28 columns): no key, a PRIMARY KEY (sensor_uuid,
epoch_id), INSERT OR REPLACE with it.  Prints CPU seconds, the ratio to no key, and the
file size.

    python benchmarks/bench_unique_keys.py                 # 5M readings, 500k epochs
    python benchmarks/bench_unique_keys.py --windows 250   # 25M readings, as bench_sync
"""

from __future__ import annotations

import argparse
import os
import tempfile
import time
import uuid
from pathlib import Path

import duckdb
import numpy as np
import pyarrow as pa

MEMORY_LIMIT = "256MB"  # devmon_sync.store.mirror.MEMORY_LIMIT
US = pa.timestamp("us", tz="UTC")


def readings(path: Path, mode: str, windows: int) -> tuple[float, float]:
    con = duckdb.connect(str(path))
    con.execute(f"SET memory_limit = '{MEMORY_LIMIT}'")
    key = ", PRIMARY KEY (parameter_uuid, ts)" if mode == "primary key" else ""
    con.execute(f"CREATE TABLE readings (parameter_uuid UUID NOT NULL, ts TIMESTAMPTZ NOT NULL, "
                f"value DOUBLE{key})")
    keys = [str(uuid.uuid4()) for _ in range(200)]
    rng = np.random.default_rng(1)
    cpu = 0.0
    for w in range(windows):
        index = np.repeat(np.arange(200, dtype=np.int32), 500)
        ts = (np.tile(np.arange(500, dtype=np.int64), 200) + w * 500) * 600_000_000
        table = pa.table({"key_index": index, "ts": pa.array(ts, US),
                          "value": rng.random(100_000)})
        con.register("staging", table)
        c0 = time.process_time()
        con.execute("BEGIN")
        con.execute("INSERT INTO readings SELECT (?::UUID[])[key_index + 1], ts, value "
                    "FROM staging", [keys])
        if mode == "count check":
            con.execute("SELECT count(*) FROM readings WHERE list_contains(?::UUID[], "
                        "parameter_uuid) AND ts BETWEEN ? AND ?",
                        [keys, table.column("ts")[0].as_py(), table.column("ts")[-1].as_py()]
                        ).fetchall()
        con.execute("COMMIT")
        cpu += time.process_time() - c0
        con.unregister("staging")
    con.close()
    return cpu, os.path.getsize(path) / 1e6


def epochs(path: Path, mode: str, windows: int) -> tuple[float, float]:
    con = duckdb.connect(str(path))
    con.execute(f"SET memory_limit = '{MEMORY_LIMIT}'")
    key = ", PRIMARY KEY (sensor_uuid, epoch_id)" if mode != "no key" else ""
    columns = ", ".join(f"c{i} DOUBLE" for i in range(25))
    con.execute(f"CREATE TABLE gnss_epochs (sensor_uuid UUID NOT NULL, epoch_id BIGINT NOT NULL, "
                f"ts TIMESTAMPTZ, {columns}{key})")
    keys = [str(uuid.uuid4()) for _ in range(16)]
    rng = np.random.default_rng(2)
    verb = "INSERT OR REPLACE" if mode == "insert or replace" else "INSERT"
    cpu = 0.0
    for w in range(windows):
        n = 10_000
        table = pa.table({"k": np.repeat(np.arange(16, dtype=np.int32), n // 16 + 1)[:n],
                          "id": np.arange(n, dtype=np.int64) + w * n,
                          "ts": pa.array((np.arange(n) + w * n) * 3_600_000_000, US),
                          **{f"c{i}": rng.random(n) for i in range(25)}})
        con.register("staging", table)
        c0 = time.process_time()
        con.execute("BEGIN")
        con.execute(f"{verb} INTO gnss_epochs SELECT (?::UUID[])[k + 1], id, ts, "
                    + ", ".join(f"c{i}" for i in range(25)) + " FROM staging", [keys])
        con.execute("COMMIT")
        cpu += time.process_time() - c0
        con.unregister("staging")
    con.close()
    return cpu, os.path.getsize(path) / 1e6


def main() -> int:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--windows", type=int, default=50, help="reading windows of 100,000 points")
    p.add_argument("--epoch-windows", type=int, default=50, help="epoch windows of 10,000")
    args = p.parse_args()
    with tempfile.TemporaryDirectory() as tmp:
        for label, fn, modes, n in (
                (f"readings, {args.windows * 100_000:,} rows", readings,
                 ("no key", "primary key", "count check"), args.windows),
                (f"GNSS epochs, {args.epoch_windows * 10_000:,} rows", epochs,
                 ("no key", "primary key", "insert or replace"), args.epoch_windows)):
            print(label)
            base = None
            for mode in modes:
                cpu, mb = fn(Path(tmp) / f"{fn.__name__}-{mode.replace(' ', '-')}.duckdb",
                             mode, n)
                base = base or cpu
                print(f"  {mode:18} CPU {cpu:6.2f} s  x{cpu / base:4.2f}   file {mb:7.1f} MB")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())

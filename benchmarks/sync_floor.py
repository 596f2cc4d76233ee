#!/usr/bin/env python3
"""The least a sync of these answers can spend, and dlt doing the same: two contenders for
``bench_sync_contenders.py``.

Both replay the data requests a devmon sync sent (``requests.jsonl``: one ``{"path", "body"}``
per line, recorded by the benchmark), over HTTP with one ``requests.Session``, against the
same reference server, and keep what the answers hold in a DuckDB file:

* ``floor``: a bare script.  Each answer is decoded with msgspec into typed structs, its
  columns built as Arrow arrays (timestamps parsed by Arrow) and appended to the table with
  one ``INSERT ... SELECT`` from the registered Arrow table.  No check of any kind: no
  completeness proof, no quarantine, no duplicate or revision handling, no ledger.
* ``dlt``: a dlt resource as its users write one: ``response.json()``, one dict per point,
  ``pa.Table.from_pylist``, yielded to dlt's Arrow path (``write_disposition="append"``,
  parquet staging, its DuckDB destination);
* ``dlt-msgspec``: dlt given the floor's decoded Arrow tables (what dlt's loading alone
  adds).

Self-contained (no devmon import), so it runs in a venv of its own: dlt pins versions devmon
need not share.

    python benchmarks/sync_floor.py floor --url URL --key KEY --requests R.jsonl --db F.duckdb
    /path/to/dlt-venv/bin/python benchmarks/sync_floor.py dlt ...   # needs dlt[duckdb], numpy

Prints ``RESULT {json}`` last: rows kept, and the CPU seconds of the replay alone (after
imports), every thread of the process.
"""

from __future__ import annotations

import argparse
import json
import sys
import time
from operator import attrgetter
from pathlib import Path

import msgspec
import pyarrow as pa
import pyarrow.compute as pc
import requests

UTC_US = pa.timestamp("us", tz="UTC")


class Point(msgspec.Struct, gc=False):
    timestamp: str
    value: float | None = None


class Series(msgspec.Struct, gc=False):
    parameterUuid: str
    data: list[Point] | None = None


class SeriesAnswer(msgspec.Struct, gc=False):
    items: list[Series]


class Quality(msgspec.Struct, gc=False):
    sdn: float | None = None
    sde: float | None = None
    sdu: float | None = None
    q: float | None = None
    ns: float | None = None
    ar: float | None = None


class Xyz(msgspec.Struct, gc=False):
    e: float | None = None
    n: float | None = None
    h: float | None = None


class Debug(msgspec.Struct, gc=False):
    ps: str | None = None
    err: str | int | float | None = None
    at: str | None = None
    gw: float | None = None
    gd: float | None = None
    gt: float | None = None
    log: str | None = None


class Epoch(msgspec.Struct, gc=False, rename={"de": "dE", "dn": "dN", "du": "dU",
                                              "ve": "vE", "vn": "vN", "vu": "vU"}):
    id: int
    timestamp: str
    bs: int | None = None
    lat: float | None = None
    lon: float | None = None
    eh: float | None = None
    oh: float | None = None
    quality: Quality | None = None
    roll: float | None = None
    pitch: float | None = None
    de: float | None = None
    dn: float | None = None
    du: float | None = None
    d2d: float | None = None
    d3d: float | None = None
    ve: float | None = None
    vn: float | None = None
    vu: float | None = None
    proj: dict[str, Xyz] | None = None
    debug: Debug | None = None


class Solution(msgspec.Struct, gc=False):
    sensorUuid: str
    deviceSerialNumber: str | None = None
    data: list[Epoch] | None = None


class GnssAnswer(msgspec.Struct, gc=False):
    items: list[Solution]


READINGS = msgspec.json.Decoder(SeriesAnswer)
GNSS = msgspec.json.Decoder(GnssAnswer)
NUMBERS = ("lat", "lon", "eh", "oh", "roll", "pitch", "de", "dn", "du", "d2d", "d3d",
           "ve", "vn", "vu")
QUALITY = ("sdn", "sde", "sdu", "q", "ns", "ar")
NO_QUALITY, NO_DEBUG = Quality(), Debug()

TABLES = {
    "readings": "parameter_uuid UUID, ts TIMESTAMPTZ, value DOUBLE",
    "gnss_epochs": "sensor_uuid UUID, epoch_id BIGINT, device_serial_number VARCHAR, "
                   "ts TIMESTAMPTZ, base_station_id BIGINT, "
                   + ", ".join(f"{k} DOUBLE" for k in NUMBERS + QUALITY)
                   + ", debug_ps VARCHAR, debug_err VARCHAR, debug_at TIMESTAMPTZ, "
                     "debug_gw DOUBLE, debug_gd DOUBLE, debug_gt DOUBLE, debug_log VARCHAR",
    "gnss_projected": "sensor_uuid UUID, epoch_id BIGINT, projection_id BIGINT, "
                      "ts TIMESTAMPTZ, e DOUBLE, n DOUBLE, h DOUBLE",
}


def keys_repeated(keys: list[str], counts: list[int]) -> pa.DictionaryArray:
    index = pa.array(range(len(keys)), pa.int32())
    return pa.DictionaryArray.from_arrays(pc.take(index, _repeat(counts)), pa.array(keys))


def _repeat(counts: list[int]) -> pa.Array:
    import numpy as np
    return pa.array(np.repeat(np.arange(len(counts), dtype=np.int32), counts))


def readings_table(body: bytes) -> pa.Table:
    keys, counts, stamps, values = [], [], [], []
    for s in READINGS.decode(body).items:
        data = s.data or []
        keys.append(s.parameterUuid)
        counts.append(len(data))
        stamps += [p.timestamp for p in data]
        values += [p.value for p in data]
    return pa.table({"parameter_uuid": keys_repeated(keys, counts),
                     "ts": pc.cast(pa.array(stamps, pa.string()), UTC_US),
                     "value": pa.array(values, pa.float64())})


def gnss_tables(body: bytes) -> dict[str, pa.Table]:
    epochs, keys, serials, counts = [], [], [], []
    for s in GNSS.decode(body).items:
        data = s.data or []
        epochs += data
        keys.append(s.sensorUuid)
        serials.append(s.deviceSerialNumber)
        counts.append(len(data))

    def column(name: str, rows=epochs) -> list:
        return list(map(attrgetter(name), rows))
    quality = [e.quality or NO_QUALITY for e in epochs]
    debug = [e.debug or NO_DEBUG for e in epochs]
    sensor = keys_repeated(keys, counts)
    ids = pa.array(column("id"), pa.int64())
    ts = pc.cast(pa.array(column("timestamp"), pa.string()), UTC_US)
    cols = {"sensor_uuid": sensor, "epoch_id": ids,
            "device_serial_number": keys_repeated(serials, counts).cast(pa.string()),
            "ts": ts, "base_station_id": pa.array(column("bs"), pa.int64())}
    cols.update({k: pa.array(column(k), pa.float64()) for k in NUMBERS})
    cols.update({k: pa.array(column(k, quality), pa.float64()) for k in QUALITY})
    cols.update({"debug_ps": pa.array(column("ps", debug), pa.string()),
                 "debug_err": pa.array([None if v is None else str(v)
                                        for v in column("err", debug)], pa.string()),
                 "debug_at": pc.cast(pa.array(column("at", debug), pa.string()), UTC_US)})
    cols.update({f"debug_{k}": pa.array(column(k, debug), pa.float64())
                 for k in ("gw", "gd", "gt")})
    cols["debug_log"] = pa.array(column("log", debug), pa.string())
    rows, pids, xyz = [], [], []
    for i, e in enumerate(epochs):
        for pid, p in (e.proj or {}).items():
            rows.append(i)
            pids.append(int(pid))
            xyz.append(p)
    at = pa.array(rows, pa.int64())
    projected = {"sensor_uuid": pc.take(sensor, at), "epoch_id": pc.take(ids, at),
                 "projection_id": pa.array(pids, pa.int64()), "ts": pc.take(ts, at)}
    projected.update({k: pa.array(column(k, xyz), pa.float64()) for k in "enh"})
    return {"gnss_epochs": pa.table(cols), "gnss_projected": pa.table(projected)}


def replayed(url: str, key: str, requests_file: Path):
    """(gnss?, response) of each recorded request sent again, in order."""
    with requests.Session() as session:
        session.headers.update({"X-API-Key": key, "Accept": "application/json"})
        for line in requests_file.read_text().splitlines():
            asked = json.loads(line)
            answer = session.post(url + asked["path"], json=asked["body"], timeout=300)
            answer.raise_for_status()
            yield asked["path"].endswith("/gnss"), answer


def answers(url: str, key: str, requests_file: Path):
    """(table name, Arrow table) of every answer to the recorded requests, in order."""
    for gnss, answer in replayed(url, key, requests_file):
        if gnss:
            yield from gnss_tables(answer.content).items()
        else:
            yield "readings", readings_table(answer.content)


def idiomatic_tables(url: str, key: str, requests_file: Path):
    """The answers as a dlt user writes a resource: ``response.json()``, one dict per point
    (GNSS epochs flattened, projections one row each), ``pa.Table.from_pylist``."""
    for gnss, answer in replayed(url, key, requests_file):
        items = answer.json()["items"]
        if not gnss:
            yield "readings", _timestamps(pa.Table.from_pylist(
                [{"parameter_uuid": it["parameterUuid"], "ts": p["timestamp"],
                  "value": p["value"]} for it in items for p in it["data"] or []]))
            continue
        epochs, projected = [], []
        for it in items:
            for e in it["data"] or []:
                epochs.append(_epoch_row(it, e))
                projected += [{"sensor_uuid": it["sensorUuid"], "epoch_id": e["id"],
                               "projection_id": int(pid), "ts": e["timestamp"], **xyz}
                              for pid, xyz in (e.get("proj") or {}).items()]
        yield "gnss_epochs", _timestamps(pa.Table.from_pylist(epochs), "debug_at")
        yield "gnss_projected", _timestamps(pa.Table.from_pylist(projected))


def _epoch_row(item: dict, e: dict) -> dict:
    """One GNSS epoch of an item, flattened to the columns of ``gnss_epochs``."""
    row = {"sensor_uuid": item["sensorUuid"], "epoch_id": e["id"],
           "device_serial_number": item["deviceSerialNumber"], "ts": e["timestamp"],
           "base_station_id": e.get("bs")}
    row.update({k: e.get(k) for k in ("lat", "lon", "eh", "oh", "roll", "pitch", "d2d",
                                      "d3d")})
    row.update({k.lower(): e.get(k) for k in ("dE", "dN", "dU", "vE", "vN", "vU")})
    row.update({k: (e.get("quality") or {}).get(k) for k in QUALITY})
    debug = e.get("debug") or {}
    row.update({f"debug_{k}": debug.get(k) for k in ("ps", "at", "gw", "gd", "gt", "log")})
    err = debug.get("err")
    row["debug_err"] = None if err is None else str(err)
    return row


def _timestamps(table: pa.Table, *more: str) -> pa.Table:
    """ISO 8601 text columns as UTC timestamps (``ts`` and ``more``)."""
    for name in ("ts",) + more:
        if name in table.column_names:
            at = table.column_names.index(name)
            table = table.set_column(at, name, pc.cast(table.column(name), UTC_US))
    return table


def run_floor(args) -> int:
    import duckdb

    con = duckdb.connect(args.db)
    for name, columns in TABLES.items():
        con.execute(f"CREATE TABLE {name} ({columns})")
    rows = 0
    for name, table in answers(args.url, args.key, Path(args.requests)):
        con.register("answer", table)
        con.execute(f"INSERT INTO {name} SELECT * FROM answer")
        con.unregister("answer")
        rows += table.num_rows if name != "gnss_projected" else 0
    con.close()
    return rows


def run_dlt(args) -> int:
    import dlt

    rows = {"n": 0}
    source = idiomatic_tables if args.contender == "dlt" else answers

    @dlt.resource(name="answers", write_disposition="append")
    def tables():
        for name, table in source(args.url, args.key, Path(args.requests)):
            if table.num_rows == 0:
                continue
            rows["n"] += table.num_rows if name != "gnss_projected" else 0
            # dlt's Arrow path: one table per name, dictionary keys as plain strings
            table = table.set_column(0, table.schema.field(0).name,
                                     table.column(0).cast(pa.string()))
            yield dlt.mark.with_table_name(table, name)

    pipeline = dlt.pipeline(pipeline_name="devmon_bench", destination=dlt.destinations.duckdb(
        args.db), dataset_name="mirror", pipelines_dir=args.work, progress=None)
    pipeline.run(tables())
    return rows["n"]


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("contender", choices=("floor", "dlt", "dlt-msgspec"))
    p.add_argument("--url", required=True)
    p.add_argument("--key", required=True)
    p.add_argument("--requests", required=True)
    p.add_argument("--db", required=True)
    p.add_argument("--work", help="dlt's pipelines folder (dlt only)")
    args = p.parse_args(argv)
    if args.contender != "floor":
        import dlt  # noqa: F401  (imported before the clock starts, as devmon's modules are)
    import duckdb  # noqa: F401
    c0, w0 = time.process_time(), time.perf_counter()
    rows = (run_floor if args.contender == "floor" else run_dlt)(args)
    print("RESULT " + json.dumps({"rows": rows, "cpu_s": time.process_time() - c0,
                                  "wall_s": time.perf_counter() - w0}))
    return 0


if __name__ == "__main__":
    sys.exit(main())

"""``stream_stats``: rows and first and last time per parameter or GNSS sensor, kept equal to
a count, min and max over ``readings``/``gnss_epochs`` by every commit of data, inside its
transaction (what the app reads on opening, without scanning the data).  SQL and arrays only;
``Mirror.commit_readings``/``commit_epochs`` call it.

A commit knows what it inserts: the window's rows after it are its staged rows, counted here
in numpy, not by scanning the stored table again (issue 31: that scan was most of the sync's
CPU lost since 0ac290f).
"""

from __future__ import annotations

from collections.abc import Container
from datetime import datetime

import duckdb
import numpy as np
import pyarrow as pa

from devmon_sync.store.staged import StagedReadings, us_of

TABLES = {"readings": ("readings", "parameter_uuid"), "gnss": ("gnss_epochs", "sensor_uuid")}
_UTC_US = pa.timestamp("us", tz="UTC")

Stats = dict[str, tuple]
"""{key: (rows, first, last)} of some streams' rows (first, last: microseconds since 1970,
None when there is none: integers compare and convert at a fraction of datetimes' cost)."""


def stored_in_window(con: duckdb.DuckDBPyConnection, kind: str, keys: list[str],
                     start: datetime, end: datetime) -> Stats:
    """The streams' stored rows in [start, end] (a scan of the window's time range only)."""
    table, key = TABLES[kind]
    rows = con.execute(
        f"SELECT {key}::VARCHAR, count(*), epoch_us(min(ts)), epoch_us(max(ts)) FROM {table} "
        f"WHERE list_contains(?::UUID[], {key}) AND ts BETWEEN ? AND ? GROUP BY 1",
        [keys, start, end]).fetchall()
    return {r[0]: r[1:] for r in rows}


def staged(staging: pa.Table, key_list: list[str], start: datetime, end: datetime) -> Stats:
    """The rows of ``staging`` (``key_index``, ``ts``) a commit inserts, those in
    [start, end], per key of ``key_list``."""
    if staging.num_rows == 0:
        return {}
    ts = staging.column("ts").combine_chunks().cast(_UTC_US).cast(pa.int64()).to_numpy()
    codes = staging.column("key_index").combine_chunks().to_numpy()
    bounds = pa.array([start, end], _UTC_US).cast(pa.int64()).to_numpy()
    inside = (ts >= bounds[0]) & (ts <= bounds[1])
    ts, codes = ts[inside], codes[inside]
    n = len(key_list)
    count = np.bincount(codes, minlength=n)
    first = np.full(n, np.iinfo(np.int64).max)
    last = np.full(n, np.iinfo(np.int64).min)
    np.minimum.at(first, codes, ts)
    np.maximum.at(last, codes, ts)
    held = np.flatnonzero(count)
    return {key_list[i]: (c, a, b) for i, c, a, b in zip(
        held.tolist(), count[held].tolist(), first[held].tolist(), last[held].tolist())}


def of_staged(keys: list[str], rows: StagedReadings) -> Stats:
    """``staged`` of a readings commit's rows as ``staged.readings`` holds them (sorted by
    stream and time: each stream's count and edges are where its run of rows starts and
    ends)."""
    n = len(rows)
    if n == 0:
        return {}
    new = np.ones(n, bool)
    new[1:] = rows.key[1:] != rows.key[:-1]
    starts = np.flatnonzero(new)
    ends = np.append(starts[1:], n)
    return {keys[k]: (c, a, b) for k, c, a, b in zip(
        rows.key[starts].tolist(), (ends - starts).tolist(), rows.us[starts].tolist(),
        rows.us[ends - 1].tolist())}


def stored(con: duckdb.DuckDBPyConnection, kind: str) -> Stats:
    """Every stream's row of ``stream_stats`` of ``kind`` (one read a run: the commits of
    the run keep it, ``Mirror._stream_stats``)."""
    return {r[0]: r[1:] for r in con.execute(
        "SELECT key::VARCHAR, rows, epoch_us(first_ts), epoch_us(last_ts) FROM stream_stats "
        "WHERE kind = ?",
        [kind]).fetchall()}


def fold(con: duckdb.DuckDBPyConnection, kind: str, keys: list[str], start: datetime,
         end: datetime, before: Stats, now: Stats, old: Stats) -> Stats:
    """The streams' ``stream_stats`` rows once a window [start, end] was replaced
    (``before``: its rows then, ``now``: its rows after, ``old``: the streams' rows
    before it, by key), not written (``write``: once a transaction, however many windows
    it commits).  Rows outside the window did not change, so: rows = old - before + now;
    the first time is the old one unless that lay in the window, then the window's first
    row (nothing precedes it); likewise the last.  Only a window left empty where the old
    first or last row lay needs the stream's own min/max (a rare correction): it is read
    then, from the table as the transaction has written it so far."""
    table, key = TABLES[kind]
    start, end = us_of(start), us_of(end)
    out = {}
    for k in keys:
        n0, t0, t1 = old.get(k, (0, None, None))
        b_n = before.get(k, (0, None, None))[0]
        w_n, w0, w1 = now.get(k, (0, None, None))
        n = n0 - b_n + w_n
        in_window = [t is not None and start <= t <= end for t in (t0, t1)]
        if (in_window[0] or in_window[1]) and not w_n and n:
            t0, t1 = con.execute(f"SELECT epoch_us(min(ts)), epoch_us(max(ts)) FROM {table} "
                                 f"WHERE {key} = ?", [k]).fetchall()[0]
        else:
            t0 = w0 if in_window[0] or t0 is None else (t0 if w0 is None else min(t0, w0))
            t1 = w1 if in_window[1] or t1 is None else (t1 if w1 is None else max(t1, w1))
        out[k] = (n, t0 if n else None, t1 if n else None)
    return out


def write(con: duckdb.DuckDBPyConnection, kind: str, rows: Stats,
          existing: Container[str]) -> None:
    """Write ``rows`` (by key) to ``stream_stats``: an UPDATE of the keys in ``existing``
    (those with a row), an INSERT of the others."""
    _write(con, kind, {k: v for k, v in rows.items() if k in existing}, "UPDATE stream_stats "
           "s SET rows = n.rows, first_ts = n.first_ts, last_ts = n.last_ts FROM "
           "staging_stats n WHERE s.kind = ? AND s.key = n.key::UUID")
    _write(con, kind, {k: v for k, v in rows.items() if k not in existing},
           "INSERT INTO stream_stats SELECT ?, key::UUID, rows, first_ts, last_ts "
           "FROM staging_stats")


def _write(con: duckdb.DuckDBPyConnection, kind: str, rows: Stats, sql: str) -> None:
    """One statement over ``rows`` as an Arrow table ``staging_stats`` (an UPDATE of the
    rows that exist costs half an INSERT OR REPLACE, measured)."""
    if not rows:
        return
    staging_stats = pa.table({  # noqa: F841 (read by name: a replacement scan, staged.py)
        "key": pa.array(list(rows), pa.string()),
        "rows": pa.array([v[0] for v in rows.values()], pa.int64()),
        "first_ts": _stamps([v[1] for v in rows.values()]),
        "last_ts": _stamps([v[2] for v in rows.values()])})
    con.execute(sql, [kind])


def _stamps(us: list[int | None]) -> pa.Array:
    """UTC timestamps of microseconds since 1970 (None: null)."""
    return pa.array(us, pa.int64()).cast(_UTC_US)

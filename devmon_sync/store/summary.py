"""Six-hour summaries of each parameter's readings (``readings_summary``): what a long plot
and its statistics need, a few rows a day per parameter instead of every reading.

Why: a mirror's readings are stored in the order syncs commit them, so every row group holds
a few hours of *every* parameter; a year of one parameter then costs a scan of a year of all
of them (1.0 s for the decimated plot alone in a 1B-reading mirror, ``bench_scaling.py``),
growing with the network, not with the series.  Each commit keeps the summary of the slots
its window touched (``replace_window``, in the commit's transaction: never stale), and a
long range is read from the slots it covers whole plus the raw readings of its two partial
slots at the ends, so results are exact: the same counts, extremes, first and last points,
mean and least-squares rate as the raw readings give, and min-max decimation that keeps
every spike at its own time (in buckets of whole slots).

A slot is ``epoch_us(ts) // SLOT_US`` (6 hours, UTC).  Per parameter and slot: ``readings``
(faulty ones included), ``valid``, the lowest and highest valid value at their times, the
first and last valid reading, and the sums a least-squares line needs, over valid readings,
with ``d`` the time in days since the slot's start (small, so that the sums keep their
precision): ``sum_value``, ``sum_d``, ``sum_d2``, ``sum_dv``.

Size: over 600 lines, because the commits' writing (numpy, a group's windows at once) and
the readers' SQL (whole slots plus the raw edges) must agree on one definition of a slot
and of every figure, to the last bit of a sum; ``mismatches`` checks them against each
other.
"""

from __future__ import annotations

import re
from datetime import datetime, timedelta, timezone

import duckdb
import numpy as np
import pyarrow as pa
import pyarrow.compute as pc

from devmon_sync.store.staged import StagedReadings, sort_order

SLOT_HOURS = 6
SLOT_US = SLOT_HOURS * 3_600_000_000
DAY_US = 86_400_000_000
#: Above this many readings (of every parameter) estimated in a range, its plot and
#: statistics read the summary: ~0.2 s of raw scan on a 2-core laptop (bench_scaling.py).
RAW_SCAN_ROWS = 20_000_000

_EPOCH = datetime(1970, 1, 1, tzinfo=timezone.utc)

TABLE_SQL = """
CREATE TABLE IF NOT EXISTS readings_summary (
    parameter_uuid UUID NOT NULL, slot BIGINT NOT NULL, readings BIGINT NOT NULL,
    valid BIGINT NOT NULL, min_value DOUBLE, min_ts TIMESTAMPTZ, max_value DOUBLE,
    max_ts TIMESTAMPTZ, first_ts TIMESTAMPTZ, first_value DOUBLE, last_ts TIMESTAMPTZ,
    last_value DOUBLE, sum_value DOUBLE, sum_d DOUBLE, sum_d2 DOUBLE, sum_dv DOUBLE);
COMMENT ON TABLE readings_summary IS 'Per parameter and 6-hour slot (epoch_us(ts) // 21600e6, '
    'UTC): readings, valid ones, extremes, first and last valid reading and least-squares '
    'sums (d: days since the slot start), kept by every commit; equal to an aggregate of '
    'readings (devmon_sync/store/summary.py)';
"""

_VALID = "FILTER (WHERE value IS NOT NULL)"
_AGGREGATES = f"""count(*) AS readings, count(value) AS valid,
    min(value) AS min_value, arg_min(ts, (value, ts)) {_VALID} AS min_ts,
    max(value) AS max_value, arg_max(ts, (value, -epoch_us(ts))) {_VALID} AS max_ts,
    min(ts) {_VALID} AS first_ts, arg_min(value, ts) {_VALID} AS first_value,
    max(ts) {_VALID} AS last_ts, arg_max(value, ts) {_VALID} AS last_value,
    sum(value) AS sum_value, sum(d) {_VALID} AS sum_d, sum(d * d) {_VALID} AS sum_d2,
    sum(d * value) AS sum_dv"""
#: The slot of ``ts`` in SQL, rounded down as Python's ``//`` (DuckDB's ``//`` truncates:
#: a time before 1970 would fall in another slot than the commits' numpy gives it).
_SLOT_SQL = (f"((epoch_us(ts) - ((epoch_us(ts) % {SLOT_US}) + {SLOT_US}) % {SLOT_US}) "
             f"// {SLOT_US})")
_SLOTTED = (f"SELECT parameter_uuid, ts, value, slot, (epoch_us(ts) - slot * {SLOT_US}) / "
            f"{DAY_US}::DOUBLE AS d FROM (SELECT *, {_SLOT_SQL} AS slot FROM ({{rows}}))")
_SUMMARISE = (f"SELECT parameter_uuid, slot, {_AGGREGATES} FROM ({_SLOTTED}) "
              "GROUP BY parameter_uuid, slot")

#: Slots x parameters summarised by one statement of ``build``.
BUILD_GROUPS = 250_000


def build(con: duckdb.DuckDBPyConnection) -> None:
    """The whole summary from the readings (the migration that adds it; benchmarks'
    mirrors), a span of slots at a time, each of at most ``BUILD_GROUPS`` slots x
    parameters: one aggregate of a 100M-reading mirror held 2 GB, 8 x devmon's DuckDB
    memory budget (it would have been ~20 GB at 1B)."""
    con.execute("DELETE FROM readings_summary")
    parameters, first, last = con.execute(
        "SELECT count(*), min(first_ts), max(last_ts) FROM stream_stats "
        "WHERE kind = 'readings'").fetchall()[0]
    if not parameters:  # not kept yet (a file older than stream_stats is migrated first)
        parameters, first, last = con.execute(
            "SELECT 1000, min(ts), max(ts) FROM readings").fetchall()[0]
    if first is None:
        return
    step = max(1, BUILD_GROUPS // parameters)
    sql = "INSERT INTO readings_summary " + _SUMMARISE.format(
        rows="SELECT parameter_uuid, ts, value FROM readings WHERE ts >= ? AND ts < ?")
    for slot in range(slot_of(first), slot_of(last) + 1, step):
        con.execute(sql, [slot_start(slot), slot_start(slot + step)])


def slot_of(ts: datetime) -> int:
    """The 6-hour slot holding ``ts`` (UTC-aware)."""
    return _us(ts) // SLOT_US


def slot_start(slot: int) -> datetime:
    return _EPOCH + timedelta(microseconds=slot * SLOT_US)


def _us(ts: datetime) -> int:
    delta = ts - _EPOCH
    return (delta.days * 86_400 + delta.seconds) * 1_000_000 + delta.microseconds


# ------------------------------------------------------------------------------- writing

def replace_window(con: duckdb.DuckDBPyConnection, keys: list[str], rows: StagedReadings,
                   start: datetime, end: datetime, tails: dict | None = None) -> None:
    """After a commit replaced stored readings of ``keys`` in [start, end] by ``rows`` (the
    staged rows in the window, ``staged.readings``): the summary of every slot the window
    touches, again, from the staged rows (no second read of what was just written).  The
    slots holding ``start`` and ``end`` may also hold readings outside the window: those
    two are read whole from ``readings``.  A window that only adds (nothing stored at or
    after its start: a first sync, an append) goes through ``Appends`` instead.  Summed up
    in numpy: DuckDB's aggregate with the extremes' times cost 5x a plain one, a fifth of
    the sync's CPU.  ``tails``: see ``Appends``; kept up to date here too."""
    s0, s1 = slot_of(start), slot_of(end)
    key, us, value = rows.key, rows.us, rows.value
    inside = (us >= (s0 + 1) * SLOT_US) & (us < s1 * SLOT_US)
    key, us, value = key[inside], us[inside], value[inside]
    edges = _edge_readings(con, keys, s0, s1)
    key = np.concatenate([key, edges.column("k").to_numpy().astype(np.int64)])
    us = np.concatenate([us, edges.column("us").to_numpy().astype(np.int64)])
    value = np.concatenate([value, _values(edges.column("value"))])
    summarised = _summarise(key, us, value)
    con.execute("DELETE FROM readings_summary WHERE list_contains(?::UUID[], parameter_uuid) "
                "AND slot BETWEEN ? AND ?", [keys, s0, s1])
    if summarised.num_rows:
        summary_rows = summarised  # noqa: F841 (read by name: a replacement scan, staged.py)
        con.execute("INSERT INTO readings_summary SELECT (?::UUID[])[k + 1], * EXCLUDE (k) "
                    "FROM summary_rows", [keys])
    if tails is not None:
        _keep_tails(tails, keys, summarised, s1)


class Appends:
    """The summaries of consecutive windows of one transaction that only add readings
    (nothing stored at or after their start: a first sync, an append), summed up window by
    window and written by one DELETE and one INSERT however many windows (``write``), not
    two statements a window (issue 31: the sync's CPU).  A window's slots held nothing
    else, but for its start's slot when the window starts inside it: the summary kept of
    that slot (in the file, or written by a window before it in the batch) is merged in.
    The pieces of a slot (the kept summary, then each window's, in their order) are merged
    once, at ``write``, in the order one commit a window merged them: the same figures to
    the last bit.

    ``tails``: the caller's copy, per key, of the summary this connection last wrote of the
    key's last slot (``{key: (slot, figures or None)}``), brought up to date by ``write``;
    a window that ``continues`` the one its run committed just before merges its start's
    slot from there, for a key whose entry names that slot, instead of reading it back.
    The caller drops the copy at a run's start and whenever a transaction does not
    commit."""

    def __init__(self, con: duckdb.DuckDBPyConnection, tails: dict):
        self.con, self.tails = con, tails
        self._index: dict[str, int] = {}  # every key of the batch, in order of arrival
        self._pieces: list[dict] = []  # in order: kept summaries and windows' pieces
        self._last: dict[str, int] = {}  # per key, the last slot the batch wrote
        self._kept_at: list[tuple[np.ndarray, int]] = []  # (keys, slot) of kept rows

    def add(self, keys: list[str], rows: StagedReadings, start: datetime, end: datetime,
            continues: bool = False) -> None:
        """One window's summary pieces, from its staged rows (sorted, ``staged.readings``)."""
        s0, s1 = slot_of(start), slot_of(end)
        index = np.array([self._index.setdefault(key, len(self._index)) for key in keys],
                         np.int64)
        if _us(start) > s0 * SLOT_US:  # the start's slot began before the window
            outside = [i for i, key in enumerate(keys) if self._last.get(key) != s0]
            kept = self._kept(keys, outside, s0, continues) if outside else {"k": ()}
            if len(kept["k"]):
                kept["k"] = index[kept["k"]]
                self._pieces.append(kept)
                self._kept_at.append((kept["k"], s0))
        pieces = _summary_pieces(rows.key, rows.us, rows.value)
        if pieces:
            pieces["k"] = index[pieces["k"]]
            self._pieces.append(pieces)
        self._last.update((key, s1) for key in keys)

    def _kept(self, keys: list[str], at: list[int], slot: int, continues: bool) -> dict:
        """The summary the file holds of ``slot`` for ``keys[i]``, ``i`` in ``at`` (none of
        the batch), as pieces for ``_reduce``: from ``tails`` for the keys whose entry
        names that slot when the window continues its run's last one, the others read."""
        trusted = [i for i in at if continues and keys[i] not in self._last
                   and self.tails.get(keys[i], (None,))[0] == slot]
        pieces = _tail_pieces(keys, trusted, slot, self.tails)
        rest = sorted(set(at) - set(trusted))
        if rest:
            read = _stored_pieces(self.con, [keys[i] for i in rest], slot)
            read["k"] = np.array(rest, np.int64)[read["k"]]
            pieces = {name: np.concatenate([pieces[name], read[name]]) for name in pieces}
        return pieces

    def write(self) -> None:
        """The batch's rows into ``readings_summary`` (the kept rows it merged deleted
        first), ``tails`` brought up to date; then the batch is empty."""
        keys = list(self._index)
        if self._kept_at:
            k = np.concatenate([k for k, _ in self._kept_at])
            slots = np.concatenate([np.full(len(k), s, np.int64) for k, s in self._kept_at])
            merged_slots = pa.table({  # noqa: F841 (read by name: a replacement scan)
                "k": pa.array(k, pa.int64()), "slot": pa.array(slots, pa.int64())})
            self.con.execute(
                "DELETE FROM readings_summary s USING (SELECT (?::UUID[])[k + 1] AS p, slot "
                "FROM merged_slots) m WHERE s.parameter_uuid = m.p AND s.slot = m.slot "
                "AND s.slot BETWEEN ? AND ?", [keys, int(slots.min()), int(slots.max())])
        written = pa.table({})
        if self._pieces:
            written = _reduce({name: np.concatenate([p[name] for p in self._pieces])
                               for name in self._pieces[0]})
            summary_rows = written  # noqa: F841 (read by name: a replacement scan, staged.py)
            self.con.execute("INSERT INTO readings_summary SELECT (?::UUID[])[k + 1], "
                             "* EXCLUDE (k) FROM summary_rows", [keys])
        self._keep_tails(keys, written)
        self._index, self._pieces, self._last, self._kept_at = {}, [], {}, []

    def _keep_tails(self, keys: list[str], written: pa.Table) -> None:
        """Note, per key of the batch, the row just written of its last slot (None: none)."""
        for key, slot in self._last.items():
            self.tails[key] = (slot, None)
        if not written.num_rows:
            return
        last = np.array([self._last[key] for key in keys], np.int64)
        at = written.column("slot").to_numpy() == last[written.column("k").to_numpy()]
        pieces = _table_pieces(written.filter(pa.array(at)))
        figures = zip(*(pieces[name].tolist() for name in _FIGURES))
        for k, row in zip(pieces["k"].tolist(), figures):
            self.tails[keys[k]] = (self._last[keys[k]], row)


#: A piece's figures, in the order ``tails`` holds them.
_FIGURES = ("readings", "valid", "min_value", "min_ts", "max_value", "max_ts", "first_ts",
            "first_value", "last_ts", "last_value", "sum_value", "sum_d", "sum_d2", "sum_dv")


def _keep_tails(tails: dict, keys: list[str], written: pa.Table, slot: int) -> None:
    """Note, per key of the window, the summary just written of its last slot (None: no
    row)."""
    for key in keys:
        tails[key] = (slot, None)
    if not written.num_rows:
        return
    last = written.filter(pc.equal(written.column("slot"), slot))
    if not last.num_rows:
        return
    pieces = _table_pieces(last)
    figures = list(zip(*(pieces[name].tolist() for name in _FIGURES)))
    for k, row in zip(pieces["k"].tolist(), figures):
        tails[keys[k]] = (slot, row)


def _tail_pieces(keys: list[str], at: list[int], slot: int, tails: dict) -> dict:
    """The summary ``tails`` holds of ``slot`` for ``keys[i]``, ``i`` in ``at`` (each entry
    of that slot), as pieces for ``_reduce`` (``k``: the index into ``keys``)."""
    found = [(i, tails[keys[i]][1]) for i in at if tails[keys[i]][1] is not None]
    pieces = {"k": np.array([i for i, _ in found], np.int64),
              "slot": np.full(len(found), slot, np.int64)}
    for n, name in enumerate(_FIGURES):
        kind = np.float64 if "value" in name or name.startswith("sum") else np.int64
        pieces[name] = np.array([row[n] for _, row in found], kind)
    return pieces


def _edge_readings(con: duckdb.DuckDBPyConnection, keys: list[str], s0: int,
                   s1: int) -> pa.Table:
    """Every reading of ``keys`` in slots ``s0`` and ``s1`` (``k``, ``us``, ``value``)."""
    return con.sql(
        "SELECT list_position($keys::UUID[], parameter_uuid) - 1 AS k, epoch_us(ts) AS us, "
        "value FROM readings WHERE list_contains($keys::UUID[], parameter_uuid) AND ts >= $a "
        "AND ts < $b UNION ALL SELECT list_position($keys::UUID[], parameter_uuid) - 1, "
        "epoch_us(ts), value FROM readings WHERE $two AND "
        "list_contains($keys::UUID[], parameter_uuid) AND ts >= $c AND ts < $d",
        params={"keys": keys, "a": slot_start(s0), "b": slot_start(s0 + 1), "two": s1 > s0,
                "c": slot_start(s1), "d": slot_start(s1 + 1)}).to_arrow_table()


_NONE_US = 2 ** 62  # a piece's first (last: minus it) time when it has no valid reading


def _values(column: pa.ChunkedArray) -> np.ndarray:
    """Values as float64, NULL (a faulty point) as NaN: readings hold no NaN of their own
    (a NaN in an answer is quarantined)."""
    return column.to_numpy(zero_copy_only=False).astype(np.float64)


def _stored_pieces(con: duckdb.DuckDBPyConnection, keys: list[str], slot: int) -> dict:
    """The summary kept of ``slot`` for ``keys``, as pieces for ``_reduce``."""
    t = con.sql(f"SELECT list_position($keys::UUID[], parameter_uuid) - 1 AS k, slot, "
                f"readings, valid, min_value, coalesce(epoch_us(min_ts), {_NONE_US}) AS min_ts, "
                f"max_value, coalesce(epoch_us(max_ts), {_NONE_US}) AS max_ts, "
                f"coalesce(epoch_us(first_ts), {_NONE_US}) AS first_ts, first_value, "
                f"coalesce(epoch_us(last_ts), {-_NONE_US}) AS last_ts, "
                f"last_value, coalesce(sum_value, 0) AS sum_value, coalesce(sum_d, 0) AS sum_d, "
                f"coalesce(sum_d2, 0) AS sum_d2, coalesce(sum_dv, 0) AS sum_dv "
                f"FROM readings_summary WHERE list_contains($keys::UUID[], parameter_uuid) "
                f"AND slot = $slot", params={"keys": keys, "slot": slot}).to_arrow_table()
    return {name: t.column(name).to_numpy(zero_copy_only=False).astype(
        np.float64 if "value" in name or name.startswith("sum") else np.int64)
        for name in t.column_names}


def _summarise(key: np.ndarray, us: np.ndarray, value: np.ndarray,
               presorted: bool = False) -> pa.Table:
    """Summary rows (as ``_reduce`` gives them) of readings given as arrays (NaN: faulty)."""
    if len(us) == 0:
        return pa.table({})
    return _summary_table(*_summary_arrays(key, us, value, presorted))


_FIGURE_NAMES = ("k", "slot", "readings", "valid", "min_value", "min_ts", "max_value",
                 "max_ts", "first_ts", "first_value", "last_ts", "last_value")
_SUMS = ("sum_value", "sum_d", "sum_d2", "sum_dv")


def _summary_pieces(key: np.ndarray, us: np.ndarray, value: np.ndarray) -> dict:
    """Pieces for ``_reduce`` (as ``_table_pieces`` gives them of ``_summarise``'s rows,
    without the table between) of readings sorted by key and time."""
    if len(us) == 0:
        return {}
    *figures, sums = _summary_arrays(key, us, value, True)
    pieces = dict(zip(_FIGURE_NAMES, figures))
    pieces.update(zip(_SUMS, sums))
    none = pieces["valid"] == 0
    if none.any():  # a slot without a valid reading: its figures as a NULL reads back
        for name in ("min_value", "max_value", "first_value", "last_value"):
            pieces[name] = np.where(none, np.nan, pieces[name])
        for name in ("min_ts", "max_ts", "first_ts", "last_ts"):
            pieces[name] = np.where(none, -_NONE_US if name == "last_ts" else _NONE_US,
                                    pieces[name])
        for name in _SUMS:
            pieces[name] = np.where(none, 0.0, pieces[name])
    return pieces


def _summary_arrays(key: np.ndarray, us: np.ndarray, value: np.ndarray,
                    presorted: bool) -> tuple:
    """The figures of each key and slot of readings given as arrays (NaN: faulty): sorted
    by key and time once (``presorted``: they are), then one pass of ``reduceat`` per
    figure; without a faulty reading, without the masks.  In ``_summary_table``'s order,
    the sums last, as a list; a slot without a valid reading holds anything."""
    n = len(us)
    order = None if presorted else sort_order(key, us)
    if order is not None:
        key, us, value = key[order], us[order], value[order]
    slot, offset_us = np.divmod(us, SLOT_US)  # (one pass: ``us - slot * SLOT_US`` exactly)
    new = np.ones(n, bool)
    new[1:] = (key[1:] != key[:-1]) | (slot[1:] != slot[:-1])
    starts = np.flatnonzero(new)
    readings = np.diff(np.append(starts, n))
    d = offset_us / DAY_US
    ok = ~np.isnan(value)
    if ok.all():  # the usual window: every point readable
        valid, first, last = readings, starts, starts + readings - 1
        low = np.minimum.reduceat(value, starts)
        high = np.maximum.reduceat(value, starts)
        low_at = value == np.repeat(low, readings)  # (each row against its slot's extreme)
        high_at, v0 = value == np.repeat(high, readings), value
    else:
        valid = np.add.reduceat(ok.astype(np.int64), starts)
        low = np.minimum.reduceat(np.where(ok, value, np.inf), starts)
        high = np.maximum.reduceat(np.where(ok, value, -np.inf), starts)
        index = np.arange(n)
        first = np.minimum.reduceat(np.where(ok, index, n - 1), starts)
        last = np.maximum.reduceat(np.where(ok, index, 0), starts)
        d = np.where(ok, d, 0.0)
        v0 = np.where(ok, value, 0.0)
        low_at = ok & (value == np.repeat(low, readings))
        high_at = ok & (value == np.repeat(high, readings))
    return (key[starts], slot[starts], readings, valid, low,
            np.minimum.reduceat(np.where(low_at, us, _NONE_US), starts), high,
            np.minimum.reduceat(np.where(high_at, us, _NONE_US), starts),
            us[first], value[first], us[last], value[last],
            [np.add.reduceat(x, starts) for x in (v0, d, d * d, d * v0)])


def _summary_table(key, slot, readings, valid, low, low_ts, high, high_ts, first_ts,
                   first_value, last_ts, last_value, sums) -> pa.Table:
    """The summary rows as Arrow: every figure NULL in a slot without a valid reading."""
    none = valid == 0
    stamp, real = pa.timestamp("us", tz="UTC"), pa.float64()

    def column(values, kind) -> pa.Array:
        return pa.array(values, kind, mask=none)

    return pa.table({
        "k": key, "slot": slot, "readings": readings, "valid": valid,
        "min_value": column(low, real), "min_ts": column(low_ts, stamp),
        "max_value": column(high, real), "max_ts": column(high_ts, stamp),
        "first_ts": column(first_ts, stamp), "first_value": column(first_value, real),
        "last_ts": column(last_ts, stamp), "last_value": column(last_value, real),
        **{name: column(x, real) for name, x in zip(("sum_value", "sum_d", "sum_d2",
                                                      "sum_dv"), sums)}})


def _table_pieces(t: pa.Table) -> dict:
    """Summary rows (``_reduce``'s output) as pieces again."""
    out = {}
    for name in t.column_names:
        column = t.column(name)
        if pa.types.is_timestamp(column.type):
            fill = -_NONE_US if name == "last_ts" else _NONE_US
            column = pc.fill_null(column.cast(pa.int64()), fill)
        elif name.startswith("sum"):
            column = pc.fill_null(column, 0.0)
        out[name] = column.to_numpy(zero_copy_only=False)
    return out


def _reduce(p: dict) -> pa.Table:
    """Pieces (a reading each, or a kept summary) merged per key and slot into summary rows
    (``k``: the key's index, then the table's columns): what ``_SUMMARISE`` computes in
    SQL, an extreme's ties to its earliest time as there."""
    n = len(p["k"])
    if n == 0:
        return pa.table({})
    order = np.argsort(p["k"] * (2 ** 40) + (p["slot"] - p["slot"].min()), kind="stable")
    p = {name: column[order] for name, column in p.items()}
    new = np.ones(n, bool)
    new[1:] = (p["k"][1:] != p["k"][:-1]) | (p["slot"][1:] != p["slot"][:-1])
    starts = np.flatnonzero(new)
    group = np.cumsum(new) - 1
    valid = np.add.reduceat(p["valid"], starts)

    def pick(values: np.ndarray, fill: float, ufunc) -> np.ndarray:
        return ufunc.reduceat(np.where(np.isnan(values), fill, values), starts)

    def time_of(values, ts, best) -> np.ndarray:  # earliest time of the group's extreme
        return np.minimum.reduceat(np.where(values == best[group], ts, _NONE_US), starts)

    low = pick(p["min_value"], np.inf, np.minimum)
    high = pick(p["max_value"], -np.inf, np.maximum)
    first = np.minimum.reduceat(p["first_ts"], starts)
    last = np.maximum.reduceat(p["last_ts"], starts)

    def value_at(ts, values, when) -> np.ndarray:  # ts unique per key: one piece matches
        return np.maximum.reduceat(np.where(ts == when[group], values, -np.inf), starts)

    return _summary_table(
        p["k"][starts], p["slot"][starts], np.add.reduceat(p["readings"], starts), valid,
        low, time_of(p["min_value"], p["min_ts"], low), high,
        time_of(p["max_value"], p["max_ts"], high), first,
        value_at(p["first_ts"], p["first_value"], first), last,
        value_at(p["last_ts"], p["last_value"], last),
        [_in_order(p[name], starts) for name in _SUMS])


def _in_order(x: np.ndarray, starts: np.ndarray) -> np.ndarray:
    """Per group (from each of ``starts`` to the next), its values added one after the
    other, in order: the sums each commit's merge of one piece into the kept ones gave
    (``reduceat`` adds the rest of a group to its first in another order, and a sum's
    last bits depend on the order)."""
    counts = np.diff(np.append(starts, len(x)))
    out = x[starts].copy()
    for r in range(1, int(counts.max()) if len(counts) else 0):
        more = np.flatnonzero(counts > r)
        out[more] += x[starts[more] + r]
    return out


def resummarise(con: duckdb.DuckDBPyConnection, since: datetime) -> None:
    """Every slot from the one holding ``since`` summarised again from the readings: after
    readings were deleted outside a commit (a benchmark's clean-up)."""
    first = slot_of(since)
    con.execute("DELETE FROM readings_summary WHERE slot >= ?", [first])
    con.execute("INSERT INTO readings_summary " + _SUMMARISE.format(
        rows="SELECT parameter_uuid, ts, value FROM readings WHERE ts >= ?"),
        [slot_start(first)])


# ------------------------------------------------------------------------------- reading

def pays(con: duckdb.DuckDBPyConnection, start: datetime, end: datetime) -> bool:
    """Whether [start, end] is read better from the summary: it spans two slots or more and
    the readings of every parameter in it (each stream's rows spread evenly over its span,
    from ``stream_stats``) are estimated above ``RAW_SCAN_ROWS``."""
    if end - start < timedelta(hours=2 * SLOT_HOURS):
        return False
    (estimate,) = con.execute("""
        SELECT coalesce(sum(rows::DOUBLE * greatest(0, epoch_us(least(last_ts, $end))
                                            - epoch_us(greatest(first_ts, $start)))
                             / greatest(epoch_us(last_ts) - epoch_us(first_ts), 1)), 0)
        FROM stream_stats WHERE kind = 'readings'""",
                              {"start": start, "end": end}).fetchall()[0]
    return estimate > RAW_SCAN_ROWS


def _used(sql: str, params: dict) -> dict:
    """The named parameters ``sql`` refers to (DuckDB refuses any other)."""
    return {k: v for k, v in params.items() if re.search(rf"\${k}\b", sql)}


def _range_params(key: str, start: datetime, end: datetime) -> dict:
    """Slots ``a`` <= s < ``b`` lie whole inside [start, end]; the raw edges are
    [start, a) and [b, end]."""
    a = -(-_us(start) // SLOT_US)  # the first slot starting at or after start
    b = (_us(end) + 1) // SLOT_US  # slots before b end at or before end
    return {"key": key, "start": start, "end": end, "a": a, "b": max(a, b),
            "a_ts": slot_start(a), "b_ts": slot_start(max(a, b)),
            "s0": slot_of(start), "s0_ts": slot_start(slot_of(start)),
            "s1": slot_of(end), "s1_end": slot_start(slot_of(end) + 1)}


_EDGES = """edge AS (
    SELECT ts, value FROM readings WHERE parameter_uuid = $key::UUID
        AND ts >= $start AND ts < $a_ts
    UNION ALL
    SELECT ts, value FROM readings WHERE parameter_uuid = $key::UUID
        AND ts >= $b_ts AND ts <= $end)"""

_DECIMATED = f"""
WITH whole AS (
    SELECT slot, readings, min_ts, min_value, max_ts, max_value FROM readings_summary
    WHERE parameter_uuid = $key::UUID AND slot >= $a AND slot < $b),
{_EDGES},
pieces AS (
    SELECT (slot - $a) // $width AS k, min_ts AS t_lo, min_value AS v_lo, max_ts AS t_hi,
           max_value AS v_hi FROM whole
    UNION ALL
    SELECT CASE WHEN ts < $a_ts THEN -1 ELSE ({_SLOT_SQL} - $a) // $width END,
           ts, value, ts, value FROM edge),
bucket AS (
    SELECT k, arg_min(t_lo, v_lo) AS t_lo, min(v_lo) AS v_lo, arg_max(t_hi, v_hi) AS t_hi,
           max(v_hi) AS v_hi FROM pieces GROUP BY k),
total AS (SELECT coalesce((SELECT sum(readings) FROM whole), 0)
                 + (SELECT count(*) FROM edge) AS n),
points AS (
    SELECT t_lo AS ts, v_lo AS value FROM bucket WHERE t_lo IS NOT NULL
    UNION ALL SELECT t_hi, v_hi FROM bucket WHERE t_hi <> t_lo)
SELECT list(ts ORDER BY ts) AS ts, list(value ORDER BY ts) AS value,
       (SELECT n FROM total) AS total
FROM points
"""


def decimated(con: duckdb.DuckDBPyConnection, key: str, start: datetime, end: datetime,
              buckets: int) -> tuple[pa.Table, int] | None:
    """Min-max decimation of parameter ``key`` over [start, end] from the summary: buckets
    of whole slots (as many as fit in ``buckets``, at least one slot wide), each keeping its
    lowest and highest valid reading at their own times; the partial slots at the ends from
    the raw readings; the nearest valid reading before and after the range added.  Returns
    (``ts``/``value`` table in time order, readings in the range), or None when the range
    holds at most 2 x ``buckets`` readings: then every reading is wanted, raw."""
    params = _range_params(key, start, end)
    span_slots = max(1, params["b"] - params["a"])
    params["width"] = max(1, -(-span_slots // int(buckets)))
    table = con.sql(_DECIMATED, params=_used(_DECIMATED, params)).to_arrow_table()
    total = table.column("total")[0].as_py() or 0
    if total <= 2 * buckets:
        return None
    before, after = _nearest(con, params, "before"), _nearest(con, params, "after")
    ts = table.column("ts").combine_chunks().flatten().to_pylist()
    values = table.column("value").combine_chunks().flatten().to_pylist()
    ts, values = ([p[0] for p in before] + ts + [p[0] for p in after],
                  [p[1] for p in before] + values + [p[1] for p in after])
    points = pa.table({"ts": pa.array(ts, pa.timestamp("us", tz="UTC")),
                       "value": pa.array(values, pa.float64())})
    return points, int(total)


#: How far the nearest valid reading outside a range is first looked for: 30 days of slots
#: (a search of every earlier slot read the whole summary: 0.35 s cold at 1B).
NEAR_SLOTS = 30 * 24 // SLOT_HOURS

_NEAR = {
    "before": ("SELECT ts, value FROM readings WHERE parameter_uuid = $key::UUID AND value IS "
               "NOT NULL AND ts >= $s0_ts AND ts < $start ORDER BY ts DESC LIMIT 1",
               "SELECT last_ts, last_value FROM readings_summary WHERE parameter_uuid = "
               "$key::UUID AND valid > 0 AND slot < $s0 {bound} ORDER BY slot DESC LIMIT 1",
               "AND slot >= $s0 - $near"),
    "after": ("SELECT ts, value FROM readings WHERE parameter_uuid = $key::UUID AND value IS "
              "NOT NULL AND ts > $end AND ts < $s1_end ORDER BY ts LIMIT 1",
              "SELECT first_ts, first_value FROM readings_summary WHERE parameter_uuid = "
              "$key::UUID AND valid > 0 AND slot > $s1 {bound} ORDER BY slot LIMIT 1",
              "AND slot <= $s1 + $near"),
}


def _nearest(con: duckdb.DuckDBPyConnection, params: dict, side: str) -> list[tuple]:
    """The nearest valid reading ``before`` start or ``after`` end, as [(ts, value)] (empty:
    none): in the raw readings of the slot holding that end, else the last (first) valid
    reading of the nearest summarised slot, looked for within ``NEAR_SLOTS`` first."""
    raw, slots, bound = _NEAR[side]
    params = {**params, "near": NEAR_SLOTS}
    for sql in (raw, slots.format(bound=bound), slots.format(bound="")):
        found = con.execute(sql, _used(sql, params)).fetchall()
        if found:
            return [(found[0][0], found[0][1])]
    return []


_STATS = f"""
WITH {_EDGES},
parts AS (
    SELECT valid AS n, readings - valid AS faulty, min_value AS lo, max_value AS hi,
           sum_value AS sy, valid * a + sum_d AS sx,
           valid * a * a + 2 * a * sum_d + sum_d2 AS sxx, a * sum_value + sum_dv AS sxy,
           first_ts, first_value, last_ts, last_value
    FROM (SELECT *, (slot * {SLOT_US} - epoch_us($start)) / {DAY_US}::DOUBLE AS a
          FROM readings_summary WHERE parameter_uuid = $key::UUID AND slot >= $a AND slot < $b)
    UNION ALL
    SELECT count(value), count(*) - count(value), min(value), max(value), sum(value),
           sum(x) {_VALID}, sum(x * x) {_VALID}, sum(x * value),
           min(ts) {_VALID}, arg_min(value, ts) {_VALID},
           max(ts) {_VALID}, arg_max(value, ts) {_VALID}
    FROM (SELECT ts, value, (epoch_us(ts) - epoch_us($start)) / {DAY_US}::DOUBLE AS x
          FROM edge)),
agg AS (
    SELECT sum(n) AS n, sum(faulty) AS faulty, min(lo) AS lo, max(hi) AS hi, sum(sy) AS sy,
           sum(sx) AS sx, sum(sxx) AS sxx, sum(sxy) AS sxy, min(first_ts) AS first_time,
           arg_min(first_value, first_ts) AS first_value, max(last_ts) AS last_time,
           arg_max(last_value, last_ts) AS last_value FROM parts)
SELECT coalesce(n, 0) AS count, coalesce(faulty, 0) AS faulty, lo AS min, hi AS max,
       CASE WHEN n > 0 THEN sy / n END AS mean, first_time, first_value, last_time,
       last_value,
       CASE WHEN n >= 2 AND n * sxx - sx * sx > 0
            THEN (n * sxy - sx * sy) / (n * sxx - sx * sx) END AS rate_per_day
FROM agg
"""


def stats(con: duckdb.DuckDBPyConnection, key: str, start: datetime, end: datetime) -> dict:
    """``browse.readings_stats`` of parameter ``key`` over [start, end] from the summary
    (the slots inside whole, the raw readings of the partial ones): the same figures."""
    result = con.execute(_STATS, _used(_STATS, _range_params(key, start, end)))
    names = [d[0] for d in result.description]
    return dict(zip(names, result.fetchall()[0]))


# ------------------------------------------------------------------------------- checking

_SAME = ("s.readings = f.readings AND s.valid = f.valid "
         "AND s.min_value IS NOT DISTINCT FROM f.min_value "
         "AND s.min_ts IS NOT DISTINCT FROM f.min_ts "
         "AND s.max_value IS NOT DISTINCT FROM f.max_value "
         "AND s.max_ts IS NOT DISTINCT FROM f.max_ts "
         "AND s.first_ts IS NOT DISTINCT FROM f.first_ts "
         "AND s.first_value IS NOT DISTINCT FROM f.first_value "
         "AND s.last_ts IS NOT DISTINCT FROM f.last_ts "
         "AND s.last_value IS NOT DISTINCT FROM f.last_value AND " + " AND ".join(
             f"coalesce(abs(s.{c} - f.{c}) <= 1e-9 * (1 + abs(f.{c})), "
             f"s.{c} IS NOT DISTINCT FROM f.{c})"
             for c in ("sum_value", "sum_d", "sum_d2", "sum_dv")))


def mismatches(con: duckdb.DuckDBPyConnection) -> int:
    """Slots whose stored summary differs from an aggregate of the readings now (missing,
    extra or other figures; sums to 1e-9 relative, their order of addition differs): 0 for
    a mirror every commit kept.  A full scan: for checks, not for the commits."""
    (n,) = con.execute(
        f"WITH f AS ({_SUMMARISE.format(rows='SELECT parameter_uuid, ts, value FROM readings')})"
        " SELECT count(*) FROM readings_summary s FULL OUTER JOIN f "
        "USING (parameter_uuid, slot) WHERE s.slot IS NULL OR f.slot IS NULL "
        f"OR NOT ({_SAME})").fetchall()[0]
    return int(n)


#: ``keys`` (a list parameter) as rows: each UUID ``u`` with its index ``i`` (a hash join:
#: ``list_position`` on every row cost 1.7x the time).
_KEYS = ("ks AS (SELECT unnest($keys::UUID[]) AS u, "
         "generate_subscripts($keys::UUID[], 1) - 1 AS i)")


def slots_differing(con: duckdb.DuckDBPyConnection, keys: list[str], start: datetime,
                    end: datetime) -> list[tuple[str, int, str, str]]:
    """(parameter, slot, device serial, parameter name) of ``keys`` whose stored summary
    differs from its readings, over the slots holding [start, end] (whole slots), as
    ``mismatches`` judges them.  The readings are summarised as the commits summarise them
    (numpy, ~30 ns a reading: DuckDB's aggregate with the extremes' times took 0.8 us), then
    compared with the stored rows in SQL; read through the time bounds, so a window's check
    reads that window's slots only."""
    params = {"keys": keys, "lo": slot_start(slot_of(start)),
              "hi": slot_start(slot_of(end) + 1), "s0": slot_of(start), "s1": slot_of(end)}
    rows = con.sql(f"WITH {_KEYS} SELECT i AS k, epoch_us(ts) AS us, value FROM readings "
                   "JOIN ks ON parameter_uuid = u WHERE ts >= $lo AND ts < $hi",
                   params=_used("$keys $lo $hi", params)).to_arrow_table()
    fresh = _summarise(rows.column("k").to_numpy().astype(np.int64),
                       rows.column("us").to_numpy(), _values(rows.column("value")))
    if not fresh.num_columns:  # no readings: every stored slot of the range differs
        fresh = con.sql("SELECT * EXCLUDE (parameter_uuid), 0::BIGINT AS k FROM "
                        "readings_summary LIMIT 0").to_arrow_table()
    con.register("fresh_summary", fresh)
    try:
        found = con.execute(
            f"WITH {_KEYS}, f AS (SELECT * FROM fresh_summary), s AS (SELECT i AS k, r.* "
            "FROM readings_summary r JOIN ks ON r.parameter_uuid = u "
            "WHERE slot BETWEEN $s0 AND $s1), "
            "d AS (SELECT k, slot FROM s FULL OUTER JOIN f USING (k, slot) WHERE s.slot IS NULL "
            f"OR f.slot IS NULL OR NOT ({_SAME})) "
            "SELECT ks.u::VARCHAR AS key, d.slot, coalesce(p.device_serial_number, '?'), "
            "coalesce(p.name, key) FROM d JOIN ks ON ks.i = d.k "
            "LEFT JOIN parameters p ON p.uuid = ks.u ORDER BY 1, 2",
            _used("$keys $s0 $s1", params)).fetchall()
    finally:
        con.unregister("fresh_summary")
    return [(key, int(slot), device, name) for key, slot, device, name in found]


def rebuild_slots(con: duckdb.DuckDBPyConnection, slots: list[tuple[str, int]]) -> None:
    """The summary of each (parameter, slot) again, from its readings (``build``'s
    aggregate): one delete and one insert for all of them, the slots joined as a table."""
    if not slots:
        return
    keys, numbers = zip(*slots)
    con.register("rebuilt_slots", pa.table({"u": pa.array(keys, pa.string()),
                                            "slot": pa.array(numbers, pa.int64())}))
    try:
        con.execute("DELETE FROM readings_summary r USING rebuilt_slots b "
                    "WHERE r.parameter_uuid = b.u::UUID AND r.slot = b.slot")
        con.execute("INSERT INTO readings_summary " + _SUMMARISE.format(
            rows="SELECT r.parameter_uuid, r.ts, r.value FROM readings r JOIN rebuilt_slots b "
                 "ON r.parameter_uuid = b.u::UUID AND r.ts >= to_timestamp(b.slot * "
                 f"{SLOT_US // 1_000_000}) AND r.ts < to_timestamp((b.slot + 1) * "
                 f"{SLOT_US // 1_000_000})"))
    finally:
        con.unregister("rebuilt_slots")

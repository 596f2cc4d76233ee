"""An answer's points as numpy arrays, for the completeness judge and the window fetcher.

Timestamps become integer milliseconds since 1970 (the judge's unit), stream keys become
indices into a window's keys, and points outside a window are cut off.  No HTTP, no SQL.
"""

from __future__ import annotations

from datetime import datetime, timedelta, timezone

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc

from devmon_sync.sync.proof import judge as completeness
from devmon_sync.sync.plan import Window

_EPOCH = datetime(1970, 1, 1, tzinfo=timezone.utc)
_MS = timedelta(milliseconds=1)


def within(table: pa.Table, w: Window) -> pa.Table:
    """Rows of ``table`` inside [w.start, w.end] (an answer may hold a point on the
    millisecond the request was widened by)."""
    if table.num_rows == 0:
        return table
    ts = table.column("ts")
    bounds = pc.min_max(ts)
    lo, hi = bounds["min"].as_py(), bounds["max"].as_py()
    if lo is not None and lo >= w.start and hi <= w.end:
        return table  # the usual case: nothing to cut
    keep = pc.and_(pc.greater_equal(ts, pa.scalar(w.start, ts.type)),
                   pc.less_equal(ts, pa.scalar(w.end, ts.type)))
    return table.filter(keep)


def received(keys: list[str], key_column, ts_column, quarantine: pa.Table | None,
             period_ms: np.ndarray) -> tuple[completeness.Received, np.ndarray]:
    """Per-stream counts and edges of the readable points and of quarantined ones whose time
    could be read (they show where data is, even if its value could not be kept); and how
    many rows of the table each stream has (what is committed)."""
    index = {k: i for i, k in enumerate(keys)}
    codes, ts = key_indices(key_column, index), ms_array(ts_column)
    rows = None  # the table's rows per stream: the judged counts, unless evidence is added
    if quarantine is not None and quarantine.num_rows:
        qkeys = quarantine.column("key").to_pylist()
        qts = [_evidence_ms(t, text) for t, text in zip(quarantine.column("ts").to_pylist(),
                                                       quarantine.column("ts_text").to_pylist())]
        found = [(index.get(k, -1), t) for k, t in zip(qkeys, qts) if t is not None]
        if found:
            rows = np.bincount(codes[codes >= 0], minlength=len(keys))
            qcodes, qms = (np.array(x, np.int64) for x in zip(*found))
            codes, ts = np.r_[codes, qcodes], np.r_[ts, qms]
    got = completeness.received(len(keys), codes, ts, period_ms)
    return got, got.count.copy() if rows is None else rows


def _evidence_ms(ts: datetime | None, text: str | None) -> int | None:
    """Where a quarantined point lies, as evidence that data exists there (never stored):
    its timestamp, or one without a timezone read as UTC."""
    if ts is not None:
        return ms(ts)
    try:
        t = datetime.fromisoformat(str(text).replace("Z", "+00:00"))
    except ValueError:
        return None
    return ms(t if t.tzinfo else t.replace(tzinfo=timezone.utc))


def key_indices(column, index: dict[str, int]) -> np.ndarray:
    """Index into the window's keys of each row's (dictionary-encoded) key."""
    column = column.combine_chunks() if isinstance(column, pa.ChunkedArray) else column
    if len(column) == 0:
        return np.zeros(0, np.int64)
    if not pa.types.is_dictionary(column.type):
        column = column.cast(pa.string()).dictionary_encode()
    lookup = np.array([index.get(k, -1) for k in column.dictionary.to_pylist()], np.int64)
    return lookup[column.indices.to_numpy(zero_copy_only=False)]


def ms_array(ts_column) -> np.ndarray:
    """Integer ms of a timestamp column."""
    if len(ts_column) == 0:
        return np.zeros(0, np.int64)
    us = pc.cast(ts_column, pa.timestamp("us", tz="UTC")).cast(pa.int64())
    return us.to_numpy(zero_copy_only=False) // 1000


def ms_many(times: list[datetime | None]) -> np.ndarray:
    """Float ms of many datetimes (NaN for None), each distinct one converted once (a
    window's cursors are mostly one and the same end)."""
    seen: dict[datetime, float] = {}
    return np.array([np.nan if t is None else seen.setdefault(t, float(ms(t)))
                     if t not in seen else seen[t] for t in times], dtype=np.float64)


def ms(t: datetime) -> int:
    """Integer ms since 1970 of an aware datetime (rounded down)."""
    return (t - _EPOCH) // _MS


def dt(t_ms: float) -> datetime:
    """The UTC datetime of ``t_ms`` ms since 1970."""
    return _EPOCH + timedelta(milliseconds=int(t_ms))


def nan_min(a: np.ndarray) -> float:
    return float(np.nanmin(a)) if np.isfinite(a).any() else np.nan


def nan_max(a: np.ndarray) -> float:
    return float(np.nanmax(a)) if np.isfinite(a).any() else np.nan

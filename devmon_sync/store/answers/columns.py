"""Constants and column builders of the answer decoders: Arrow types, timestamps, keys."""

from __future__ import annotations

import gc
from contextlib import contextmanager
from datetime import datetime, timedelta, timezone

import msgspec
import numpy as np
import pyarrow as pa
import pyarrow.compute as pc

UTC_TIMESTAMP = pa.timestamp("us", tz="UTC")
KEY_TYPE = pa.dictionary(pa.int32(), pa.string())
QUARANTINE_SCHEMA = pa.schema([("key", pa.string()),  # parameterUuid or GNSS sensorUuid
                               ("ts", UTC_TIMESTAMP),  # null when unreadable
                               ("ts_text", pa.string()),  # the timestamp as sent (JSON text
                               #                            when not a string; null if absent)
                               ("raw", pa.string()),  # the point / epoch as JSON text
                               ("reason", pa.string())])

INT64_MIN, INT64_MAX = -2**63, 2**63 - 1
INT32_MIN, INT32_MAX = -2**31, 2**31 - 1  # gnss_solutions.srid is an INTEGER
_EPOCH = datetime(1970, 1, 1, tzinfo=timezone.utc)
_ONE_US = timedelta(microseconds=1)
# The instants a Python datetime can hold: the cursors and every reader of the mirror go
# through datetime, so a point outside them (Arrow reads "0001-01-01T00:00+01:00" as year 0)
# would break them later.  Arrow and DuckDB hold far more.
TS_MIN_US = (datetime.min.replace(tzinfo=timezone.utc) - _EPOCH) // _ONE_US
TS_MAX_US = (datetime.max.replace(tzinfo=timezone.utc) - _EPOCH) // _ONE_US
_ARROW_ERRORS = (pa.ArrowInvalid, pa.ArrowTypeError, pa.ArrowNotImplementedError,
                 OverflowError)

# ----------------------------------------------------------------------------- columns


@contextmanager
def collector_paused():
    """Pause Python's cyclic garbage collector while an answer is decoded.

    Decoding allocates hundreds of thousands of lists and dicts, none of them in a cycle;
    each few hundred allocations would make the collector walk a generation, and in a process
    holding a large heap (the sync, the GUI) that doubled the decoding time (measured:
    26 vs 12 us per GNSS epoch, 790 vs 540 ns per reading)."""
    enabled = gc.isenabled()
    gc.disable()
    try:
        yield
    finally:
        if enabled:
            gc.enable()


def key_codes(keys: list[str | None], counts: list[int]) -> tuple[np.ndarray, pa.Array]:
    """Per row, the index of its item's key in the distinct keys (in first-seen order), and
    those keys: one dictionary entry per key even when the service repeats an item."""
    index: dict[str | None, int] = {}
    codes = np.array([index.setdefault(k, len(index)) for k in keys], dtype=np.int32)
    return np.repeat(codes, counts), pa.array(list(index), pa.string())


def repeated_keys(keys: list[str | None], counts: list[int]) -> pa.DictionaryArray:
    """``keys[i]`` repeated ``counts[i]`` times, dictionary-encoded (one entry per distinct
    key, even if the service repeats an item)."""
    return pa.DictionaryArray.from_arrays(*key_codes(keys, counts))


def rows_per_key(column: pa.Array | pa.ChunkedArray) -> dict[str, int]:
    """How many rows each key of a (dictionary-encoded) key column has."""
    counts = pc.value_counts(column)
    keys = counts.field("values")
    if pa.types.is_dictionary(keys.type):
        keys = keys.cast(pa.string())
    return dict(zip(keys.to_pylist(), counts.field("counts").to_pylist()))


def text_column(values: list) -> pa.Array:
    """String column; a value that is not text is kept as its JSON text."""
    try:
        return pa.array(values, pa.string())
    except (pa.ArrowInvalid, pa.ArrowTypeError):
        return pa.array([v if v is None or isinstance(v, str) else
                         msgspec.json.encode(v).decode() for v in values], pa.string())


def fast_timestamps(texts: list[str | None]) -> pa.Array | None:
    """UTC timestamps of ISO 8601 strings that name their offset (None stays null), or None
    when Arrow refuses one of them or one lies outside what a datetime holds: then the slow
    path reads each on its own.  Arrow parses the usual forms at tens of millions a second."""
    try:
        stamps = pc.cast(pa.array(texts, pa.string()), UTC_TIMESTAMP)
    except _ARROW_ERRORS:
        return None
    bounds = pc.min_max(stamps)
    low, high = bounds["min"].value, bounds["max"].value
    if low is not None and (low < TS_MIN_US or high > TS_MAX_US):
        return None
    return stamps


def fast_int64(values: list) -> pa.Array | None:
    """Int64 column of JSON integers, or None when one does not fit (e.g. 2**63)."""
    try:
        return pa.array(values, pa.int64())
    except _ARROW_ERRORS:
        return None


def int64_numpy(array: pa.Array) -> np.ndarray:
    """The int64 values of an int64 or timestamp array without nulls, as numpy."""
    return array.view(pa.int64()).to_numpy(zero_copy_only=False)



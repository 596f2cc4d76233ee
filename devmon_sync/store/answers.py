"""Data answers (POST /sensor-data, POST /sensor-data/gnss) to Arrow columns: no SQL, no HTTP.

This is the sync's hot path, so it is written for speed: msgspec decodes the body straight
into small typed objects (no dicts, and ``gc=False`` so millions of them never wake the
garbage collector), one list comprehension per column turns them into Arrow arrays, and
Arrow's C++ ISO 8601 parser turns the timestamp strings into UTC timestamps.  Keys repeated
on every row (a parameter's or sensor's UUID) are dictionary-encoded: one string per
stream, an int32 index per row.

The rule for what the service sends: **decode per point; a bad value is quarantined, never
blocking, never silently changed.**  A clean body takes the fast path above and nothing
else.  Only when something does not fit (msgspec refuses the body, Arrow refuses a
timestamp, a value is not a number, two copies of a point disagree) is the body read again
by the slow path: Python's ``json`` (which accepts the bare ``NaN`` / ``Infinity`` some
servers write), then one point at a time.  A point that cannot be read as the API defines
it goes to the answer's quarantine table with its JSON text and the reason; the other points
of the answer are kept.  A value sent as a numeric string (``"1.5"``) is read and counted,
``null`` stays NULL (a faulty point, as the service means it), and a point sent twice is
kept once, the last copy winning (a differing earlier copy is quarantined).

Only a body that is not JSON at all, or not the answer's shape (no ``items`` list, an item
without its key), raises ValueError, which the client treats as a damaged answer and fetches
again.
"""

from __future__ import annotations

import gc
import json
import math
import re
from contextlib import contextmanager
from dataclasses import dataclass, field
from datetime import datetime, timedelta, timezone
from operator import attrgetter
from typing import Any

import msgspec
import numpy as np
import pyarrow as pa
import pyarrow.compute as pc

from devmon_sync import api_contract as contract

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


# ----------------------------------------------------------------------------- lenient JSON


class _Bad:
    """A JSON token the API does not allow where a number goes: the bare ``NaN`` /
    ``Infinity`` / ``-Infinity`` some servers write, a number beyond float64 (``1e999``) or an
    integer too long for Python to read.  It keeps the text so the quarantine shows it as
    sent."""

    __slots__ = ("text", "why")

    def __init__(self, text: str, why: str) -> None:
        self.text, self.why = text, why

    def __repr__(self) -> str:
        return self.text


def _constant(text: str) -> _Bad:
    return _Bad(text, "is not a number the API allows")


def _float(text: str) -> float | _Bad:
    value = float(text)
    return value if math.isfinite(value) else _Bad(text, "is not a finite number")


def _int(text: str) -> int | _Bad:
    try:
        return int(text)
    except ValueError:  # longer than sys.get_int_max_str_digits()
        return _Bad(text, "is not a number that can be read")


def lenient_loads(body: bytes) -> Any:
    """The body as Python objects, bare NaN / Infinity and unreadable numbers as ``_Bad``.

    Raises ValueError for a body that is not JSON at all (HTML, empty, cut short)."""
    try:
        return json.loads(body, parse_constant=_constant, parse_float=_float, parse_int=_int)
    except (ValueError, RecursionError) as err:  # JSONDecodeError, UnicodeDecodeError
        raise ValueError(f"not a JSON answer: {err}") from None


def raw_json(value: Any) -> str:
    """Compact JSON text of a leniently parsed value, bad tokens written as they were sent
    (``NaN``, ``1e999``), so a quarantined point reads as the server wrote it."""
    if type(value) is _Bad:
        return value.text
    if isinstance(value, dict):
        return "{" + ",".join(json.dumps(k, ensure_ascii=False) + ":" + raw_json(v)
                              for k, v in value.items()) + "}"
    if isinstance(value, list):
        return "[" + ",".join(raw_json(v) for v in value) + "]"
    return json.dumps(value, ensure_ascii=False)


def _shown(value: Any, limit: int = 80) -> str:
    """A value as a reason quotes it: strings with quotes, the rest as JSON text."""
    text = repr(value) if isinstance(value, str) else raw_json(value)
    return text if len(text) <= limit else text[:limit - 3] + "..."


# ----------------------------------------------------------------------------- one value

_DECIMAL = re.compile(r"[+-]?(?:[0-9]+(?:\.[0-9]*)?|\.[0-9]+)(?:[eE][+-]?[0-9]+)?")
_INTEGER = re.compile(r"[+-]?[0-9]+")
_MISSING = object()


def read_number(value: Any) -> tuple[float | None, str | None, bool]:
    """``(number, problem, was_a_string)`` of a value where the API puts a number.

    A finite JSON number is kept; null stays None (the service's faulty point); a string
    holding exactly a decimal literal is read (and counted by the caller, since the service
    should not send one); anything else is a problem, worded to follow the value's name."""
    kind = type(value)
    if value is None or (kind is float and math.isfinite(value)):
        return value, None, False
    if kind is float:  # not from lenient_loads, which makes 1e999 a _Bad
        return None, f"{_shown(value)} is not a finite number", False
    if kind is int:
        try:
            return float(value), None, False
        except OverflowError:
            return None, f"{_shown(value)} is beyond the float range", False
    if kind is str:
        if not _DECIMAL.fullmatch(value):
            return None, f"{_shown(value)} is not a number", False
        number = float(value)
        if not math.isfinite(number):
            return None, f"{_shown(value)} is not a finite number", False
        return number, None, True
    if kind is _Bad:
        return None, f"{_shown(value)} {value.why}", False
    return None, f"{_shown(value)} is not a number", False


def read_int64(value: Any, strings: bool = True) -> tuple[int | None, str | None, bool]:
    """``(integer, problem, was_a_string)`` of a value where the API puts an integer; a
    string of digits is read only when ``strings``."""
    kind = type(value)
    if value is None:
        return None, None, False
    if strings and kind is str and _INTEGER.fullmatch(value):
        value, was_string = int(value), True
    elif kind is int:
        was_string = False
    elif kind is _Bad:
        return None, f"{_shown(value)} {value.why}", False
    else:
        return None, f"{_shown(value)} is not an integer", False
    if not INT64_MIN <= value <= INT64_MAX:
        return None, f"{_shown(value)} is outside int64", False
    return value, None, was_string


def _timestamp_problem(message: str) -> str:
    if "without a timezone" in message:
        return "has no timezone"
    if "out of range" in message:
        return "is out of range"
    return "is not a date-time"


def _arrow_timestamp(text: str) -> int | None:
    """Microseconds Arrow reads from ``text`` (None if it cannot): what the fast path would
    have accepted, so one bad point elsewhere never changes how this one is read."""
    try:
        return pc.cast(pa.array([text], pa.string()), UTC_TIMESTAMP)[0].value
    except _ARROW_ERRORS:
        return None


def read_timestamp(text: str) -> tuple[int | None, str | None]:
    """``(microseconds since 1970 UTC, problem)`` of a date-time string, read as
    ``api_contract.parse_timestamp`` reads it (an offset is required) or as Arrow does."""
    try:
        return (contract.parse_timestamp(text) - _EPOCH) // _ONE_US, None
    except ValueError as err:
        problem = _timestamp_problem(str(err))
    if problem != "has no timezone":
        us = _arrow_timestamp(text)
        if us is not None:
            return (us, None) if TS_MIN_US <= us <= TS_MAX_US else (us, "is out of range")
    return None, problem


class _Stamps:
    """Timestamps of one answer read once each: every series of an answer repeats them."""

    def __init__(self) -> None:
        self.seen: dict[str, tuple[int | None, str | None]] = {}

    def read(self, value: Any) -> tuple[int | None, str | None, str | None]:
        """``(microseconds or None, text as sent or None, problem or None)``; the problem
        names the value (``'2026-01-01T00:00:00' has no timezone``)."""
        if value is _MISSING or value is None:
            return None, None, "is missing"
        if type(value) is not str:
            text = raw_json(value)
            return None, text, f"{_shown(value)} is not a date-time"
        known = self.seen.get(value)
        if known is None:
            known = self.seen[value] = read_timestamp(value)
        us, problem = known
        if problem is None:
            return us, value, None
        return None, value, f"{_shown(value)} {problem}"


# ----------------------------------------------------------------------------- quarantine


def empty_quarantine() -> pa.Table:
    """A quarantine table without rows."""
    return QUARANTINE_SCHEMA.empty_table()


class _Quarantine:
    """Rows of an answer's quarantine table, gathered one by one on the slow path."""

    def __init__(self) -> None:
        self.rows: list[tuple] = []

    def add(self, key: str | None, us: int | None, ts_text: str | None, raw: str,
            reason: str) -> None:
        self.rows.append((key, us, ts_text, raw, reason))

    def table(self) -> pa.Table:
        if not self.rows:
            return empty_quarantine()
        columns = list(zip(*self.rows))
        return pa.table([pa.array(c, f.type) for c, f in zip(columns, QUARANTINE_SCHEMA)],
                        schema=QUARANTINE_SCHEMA)


# ----------------------------------------------------------------------------- duplicates


@dataclass(frozen=True)
class _Duplicates:
    """Rows of a table where some (key, id) came more than once: ``kept`` (in answer order)
    and, for each ``dropped`` row, the ``winner`` row of the same (key, id) that is kept."""

    kept: np.ndarray
    dropped: np.ndarray
    winner: np.ndarray


def _monotone_within(codes: np.ndarray, ids: np.ndarray) -> bool:
    """True when ``ids`` strictly increase (or strictly decrease) within each run of equal
    ``codes``: then no (code, id) repeats, known without sorting."""
    if len(ids) < 2:
        return True
    step = np.diff(ids)
    new_key = codes[1:] != codes[:-1]
    return bool(np.all((step > 0) | new_key)) or bool(np.all((step < 0) | new_key))


def last_wins(codes: np.ndarray, ids: np.ndarray, items_unique: bool) -> _Duplicates | None:
    """Which rows to keep so that each (code, id) appears once, the last in answer order
    winning; None when nothing repeats.

    The usual answer (one item per key, times increasing) is recognised in one pass; any
    other is sorted by (code, id) with a stable sort, so the copies of a point stay in answer
    order and the last of each run is the one kept."""
    if len(codes) < 2 or (items_unique and _monotone_within(codes, ids)):
        return None
    order = np.lexsort((ids, codes))
    c, i = codes[order], ids[order]
    repeat = (c[1:] == c[:-1]) & (i[1:] == i[:-1])  # row k and row k + 1 are one point
    if not repeat.any():
        return None
    last = np.append(~repeat, True)
    group = np.concatenate(([0], np.cumsum(~repeat)))
    winners = order[last]
    dropped, winner = order[~last], winners[group[~last]]
    in_answer_order = np.argsort(dropped, kind="stable")
    return _Duplicates(np.sort(winners), dropped[in_answer_order], winner[in_answer_order])


def _rows_differ(table: pa.Table, a: np.ndarray, b: np.ndarray, skip: tuple[str, ...]
                 ) -> np.ndarray:
    """Per pair, True when row ``a[k]`` and row ``b[k]`` of ``table`` differ in any column
    but ``skip`` (null equals null, NaN equals NaN)."""
    differ = np.zeros(len(a), dtype=bool)
    left, right = table.take(a), table.take(b)
    for name in table.column_names:
        if name in skip:
            continue
        x, y = left.column(name), right.column(name)
        same = pc.or_kleene(pc.equal(x, y), pc.and_(x.is_null(), y.is_null()))
        if pa.types.is_floating(x.type):
            same = pc.or_kleene(same, pc.and_(pc.is_nan(x), pc.is_nan(y)))
        differ |= ~pc.fill_null(same, False).to_numpy(zero_copy_only=False)
    return differ


def _number_text(value: float | None) -> str:
    return "null" if value is None else repr(value)


# ----------------------------------------------------------------------------- readings

class _Point(msgspec.Struct, gc=False):
    timestamp: str
    value: float | None = None  # ints are read as floats; anything else takes the slow path


class _Series(msgspec.Struct, gc=False):
    parameterUuid: str
    data: list[_Point] | None = []


class _SeriesAnswer(msgspec.Struct, gc=False):
    items: list[_Series]


_SERIES = msgspec.json.Decoder(_SeriesAnswer)


@dataclass(frozen=True)
class ReadingsAnswer:
    """One POST /sensor-data answer as the mirror stores it."""

    table: pa.Table  # parameter_uuid (dictionary), ts, value: readable points, unique per
    #                  (parameter_uuid, ts)
    quarantine: pa.Table = field(default_factory=empty_quarantine)  # QUARANTINE_SCHEMA
    parsed_strings: int = 0  # values sent as numeric strings, read as numbers
    duplicates_dropped: int = 0  # identical repeats dropped (differing ones are quarantined)
    null_series: tuple[str, ...] = ()  # parameterUuids sent with "data": null
    keys: tuple[str, ...] = ()  # every parameterUuid with an item, in order, each once


def readings_from_json(body: bytes) -> ReadingsAnswer:
    """Points (parameter_uuid, ts, value) of a POST /sensor-data answer, with the points that
    could not be read in quarantine.

    Raises ValueError only for a body that is not JSON or not such an answer."""
    with collector_paused():
        try:  # the decoded objects are passed on, never named: that frees them sooner and
            #   measurably faster (0.6 ms of 18 for 100 000 points)
            decoded = _readings_fast(_SERIES.decode(body))
        except msgspec.DecodeError:  # ValidationError too: NaN, "1.5", naive time, ...
            decoded = None
        return decoded or readings_lenient(body)


def _readings_fast(answer: _SeriesAnswer) -> ReadingsAnswer | None:
    """The answer when every point is clean (identical repeats allowed), else None."""
    uuids, counts, stamps, values, null_series = [], [], [], [], []
    for item in answer.items:
        data = item.data
        if data is None:
            null_series.append(item.parameterUuid)
            data = []
        uuids.append(item.parameterUuid)
        counts.append(len(data))
        stamps += [p.timestamp for p in data]
        values += [p.value for p in data]
    ts = fast_timestamps(stamps)
    if ts is None:
        return None
    codes, dictionary = key_codes(uuids, counts)
    table = _readings_table(codes, dictionary, ts, pa.array(values, pa.float64()))
    keys = tuple(dictionary.to_pylist())
    dups = last_wins(codes, int64_numpy(ts), len(keys) == len(uuids))
    dropped = 0
    if dups is not None:
        if _rows_differ(table, dups.dropped, dups.winner, ("parameter_uuid", "ts")).any():
            return None  # the slow path quarantines the differing copies with their text
        table, dropped = table.take(dups.kept), len(dups.dropped)
    return ReadingsAnswer(table, empty_quarantine(), duplicates_dropped=dropped,
                          null_series=tuple(dict.fromkeys(null_series)), keys=keys)


def _readings_table(codes: np.ndarray, dictionary: pa.Array, ts: pa.Array,
                    values: pa.Array) -> pa.Table:
    return pa.table({"parameter_uuid": pa.DictionaryArray.from_arrays(codes, dictionary),
                     "ts": ts, "value": values})


def _items(doc: Any, key: str) -> list[tuple[str, Any, dict]]:
    """``(key, data, item)`` of each item of a leniently parsed answer; ValueError when the
    body is not ``{"items": [...]}`` with a string ``key`` on every item."""
    items = doc.get("items") if isinstance(doc, dict) else None
    if not isinstance(items, list):
        raise ValueError("not a data answer: no items list")
    out = []
    for item in items:
        if not isinstance(item, dict) or not isinstance(item.get(key), str):
            raise ValueError(f"not a data answer: an item without a {key} string")
        data = item.get("data", [])
        if data is not None and not isinstance(data, list):
            raise ValueError(f"not a data answer: data of {item[key]} is not a list")
        out.append((item[key], data, item))
    return out


class _ReadingsBuilder:
    """The slow path's state over one readings answer: kept points, quarantine, counts."""

    def __init__(self) -> None:
        self.index: dict[str, int] = {}
        self.codes: list[int] = []
        self.us: list[int] = []
        self.values: list[float | None] = []
        self.sources: list[dict] = []
        self.quarantine = _Quarantine()
        self.stamps = _Stamps()
        self.parsed_strings = 0

    def point(self, key: str, code: int, point: Any) -> None:
        """Keep one point, or quarantine it with the reasons it cannot be read."""
        if type(point) is not dict:
            self.quarantine.add(key, None, None, raw_json(point), "point is not an object")
            return
        us, ts_text, ts_problem = self.stamps.read(point.get("timestamp", _MISSING))
        value, problem, was_string = read_number(point.get("value"))
        if ts_problem is None and problem is None:
            self.codes.append(code)
            self.us.append(us)
            self.values.append(value)
            self.sources.append(point)
            self.parsed_strings += was_string
            return
        reasons = [] if ts_problem is None else [f"timestamp {ts_problem}"]
        if problem is not None:
            reasons.append(f"value {problem}")
        self.quarantine.add(key, us, ts_text, raw_json(point), "; ".join(reasons))


def readings_lenient(body: bytes) -> ReadingsAnswer:
    """The slow path: every point read on its own, bad ones quarantined.  The kept points
    make exactly the table the fast path makes of the same points."""
    items = _items(lenient_loads(body), "parameterUuid")
    b = _ReadingsBuilder()
    null_series: dict[str, None] = {}
    for key, data, _ in items:
        code = b.index.setdefault(key, len(b.index))
        if data is None:
            null_series[key] = None
            continue
        for point in data:
            b.point(key, code, point)
    codes = np.array(b.codes, dtype=np.int32)
    ts_us = np.array(b.us, dtype=np.int64)
    keys = tuple(b.index)
    table = _readings_table(codes, pa.array(keys, pa.string()), pa.array(ts_us, UTC_TIMESTAMP),
                            pa.array(b.values, pa.float64()))
    dups = last_wins(codes, ts_us, len(keys) == len(items))
    dropped = 0
    if dups is not None:
        differ = _rows_differ(table, dups.dropped, dups.winner, ("parameter_uuid", "ts"))
        for d, w in zip(dups.dropped[differ].tolist(), dups.winner[differ].tolist()):
            point = b.sources[d]
            b.quarantine.add(keys[b.codes[d]], b.us[d], point.get("timestamp"),
                             raw_json(point), "duplicate timestamp in one answer: kept value "
                             f"{_number_text(b.values[w])}, dropped {_number_text(b.values[d])}")
        table, dropped = table.take(dups.kept), int((~differ).sum())
    return ReadingsAnswer(table, b.quarantine.table(), b.parsed_strings, dropped,
                          tuple(null_series), keys)


# ----------------------------------------------------------------------------- GNSS

class _Quality(msgspec.Struct, gc=False):
    sdn: float | None = None
    sde: float | None = None
    sdu: float | None = None
    q: float | None = None
    ns: float | None = None
    ar: float | None = None


class _Debug(msgspec.Struct, gc=False):
    ps: Any = None
    err: Any = None
    at: str | None = None
    gw: float | None = None
    gd: float | None = None
    gt: float | None = None
    log: Any = None


class _Xyz(msgspec.Struct, gc=False):
    e: float | None = None
    n: float | None = None
    h: float | None = None


class _Epoch(msgspec.Struct, gc=False, rename={"de": "dE", "dn": "dN", "du": "dU",
                                                 "ve": "vE", "vn": "vN", "vu": "vU"}):
    id: int
    timestamp: str
    bs: int | None = None
    lat: float | None = None
    lon: float | None = None
    eh: float | None = None
    oh: float | None = None
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
    quality: _Quality | None = None
    debug: _Debug | None = None
    proj: dict[str, _Xyz | None] | None = None


class _Solution(msgspec.Struct, gc=False):
    sensorUuid: str
    deviceSerialNumber: str | None = None
    srid: Any = None
    units: msgspec.Raw = msgspec.Raw(b"null")
    projectionMetadata: msgspec.Raw = msgspec.Raw(b"null")
    baseStations: msgspec.Raw = msgspec.Raw(b"null")
    data: list[_Epoch] | None = []


class _GnssAnswer(msgspec.Struct, gc=False):
    items: list[_Solution]


_GNSS = msgspec.json.Decoder(_GnssAnswer)

EPOCH_NUMBERS = ("lat", "lon", "eh", "oh", "roll", "pitch", "de", "dn", "du", "d2d", "d3d",
                 "ve", "vn", "vu")
QUALITY_NUMBERS = ("sdn", "sde", "sdu", "q", "ns", "ar")
DEBUG_NUMBERS = ("gw", "gd", "gt")
_JSON_NAME = {"de": "dE", "dn": "dN", "du": "dU", "ve": "vE", "vn": "vN", "vu": "vU"}
_NO_QUALITY, _NO_DEBUG, _NO_XYZ = _Quality(), _Debug(), _Xyz()


@dataclass(frozen=True)
class GnssAnswer:
    """One POST /sensor-data/gnss answer as the mirror stores it."""

    epochs: pa.Table  # one row per epoch, columns named as gnss_epochs', unique per
    #                   (sensor_uuid, epoch_id)
    projected: pa.Table  # one row per kept epoch and projection
    solutions: list[dict]  # per sensor: srid, units, projections, base stations (JSON text)
    quarantine: pa.Table = field(default_factory=empty_quarantine)  # QUARANTINE_SCHEMA
    parsed_strings: int = 0  # numbers sent as numeric strings, read as numbers
    duplicates_dropped: int = 0  # identical repeated epochs dropped (differing: quarantined)
    null_series: tuple[str, ...] = ()  # sensorUuids sent with "data": null
    keys: tuple[str, ...] = ()  # every sensorUuid with an item, in order, each once

    def only(self, sensor_uuids: set[str] | list[str]) -> GnssAnswer:
        """The part of the answer about these sensors.  The two counts stay the whole
        answer's (they are not kept per sensor)."""
        keep = set(sensor_uuids)
        wanted = pa.array(sorted(keep), pa.string())

        def rows_of(table: pa.Table, column: str = "sensor_uuid") -> pa.Table:
            key = table.column(column).cast(pa.string())
            return table.filter(pc.is_in(key, value_set=wanted))
        return GnssAnswer(rows_of(self.epochs), rows_of(self.projected),
                          [s for s in self.solutions if s["sensor_uuid"] in keep],
                          rows_of(self.quarantine, "key"), self.parsed_strings,
                          self.duplicates_dropped,
                          tuple(k for k in self.null_series if k in keep),
                          tuple(k for k in self.keys if k in keep))


def gnss_from_json(body: bytes) -> GnssAnswer:
    """Epochs, projected coordinates and solution descriptions of a GNSS answer, with the
    epochs that could not be read in quarantine.

    Raises ValueError only for a body that is not JSON or not such an answer."""
    with collector_paused():
        try:  # the decoded objects are passed on, never named: that frees them sooner and
            #   measurably faster (0.6 ms of 18 for 100 000 points)
            decoded = _gnss_fast(_GNSS.decode(body))
        except msgspec.DecodeError:  # ValidationError too: NaN, huge id, naive time, ...
            decoded = None
        return decoded or gnss_lenient(body)


def _gnss_fast(answer: _GnssAnswer) -> GnssAnswer | None:
    """The answer when every epoch is clean (identical repeats allowed), else None."""
    epochs: list[_Epoch] = []
    sensors, serials, counts, null_series = [], [], [], []
    for item in answer.items:
        data = item.data
        if data is None:
            null_series.append(item.sensorUuid)
            data = []
        epochs += data
        sensors.append(item.sensorUuid)
        serials.append(item.deviceSerialNumber)
        counts.append(len(data))
    debug = [e.debug or _NO_DEBUG for e in epochs]
    ids = fast_int64([e.id for e in epochs])
    bs = fast_int64([e.bs for e in epochs])
    ts = fast_timestamps([e.timestamp for e in epochs])
    at = fast_timestamps([d.at for d in debug])
    if ids is None or bs is None or ts is None or at is None:
        return None
    codes, dictionary = key_codes(sensors, counts)
    table = _epochs_table(epochs, debug, pa.DictionaryArray.from_arrays(codes, dictionary),
                          repeated_keys(serials, counts).cast(pa.string()), ids, bs, ts, at)
    made = _projected_table(epochs, table)
    if made is None:
        return None
    projected, per_epoch = made
    keys = tuple(dictionary.to_pylist())
    dups = last_wins(codes, int64_numpy(ids), len(keys) == len(sensors))
    dropped = 0
    if dups is not None:
        if _epochs_differ(table, epochs, dups).any():
            return None  # the slow path quarantines the differing copies with their text
        table, projected = _keep_epochs(table, projected, per_epoch, dups.kept)
        dropped = len(dups.dropped)
    return GnssAnswer(table, projected, _solutions([_solution_row(i) for i in answer.items]),
                      empty_quarantine(), 0, dropped, tuple(dict.fromkeys(null_series)), keys)


def _epochs_table(epochs: list[_Epoch], debug: list[_Debug], sensor_keys: pa.Array,
                  serials: pa.Array, ids: pa.Array, bs: pa.Array, ts: pa.Array,
                  at: pa.Array) -> pa.Table:
    """The gnss_epochs columns of clean epochs (identifiers and times already read)."""
    def column(name: str, rows=epochs) -> list:
        return list(map(attrgetter(name), rows))
    quality = [e.quality or _NO_QUALITY for e in epochs]
    err = [None if v is None else v if isinstance(v, str) else msgspec.json.encode(v).decode()
           for v in column("err", debug)]
    cols = {"sensor_uuid": sensor_keys, "epoch_id": ids, "device_serial_number": serials,
            "ts": ts, "base_station_id": bs}
    cols.update({k: pa.array(column(k), pa.float64()) for k in EPOCH_NUMBERS})
    cols.update({k: pa.array(column(k, quality), pa.float64()) for k in QUALITY_NUMBERS})
    cols.update({"debug_ps": text_column(column("ps", debug)), "debug_err": text_column(err),
                 "debug_at": at})
    cols.update({f"debug_{k}": pa.array(column(k, debug), pa.float64())
                 for k in DEBUG_NUMBERS})
    cols["debug_log"] = text_column(column("log", debug))
    return pa.table(cols)


def _projected_table(epochs: list[_Epoch], table: pa.Table
                     ) -> tuple[pa.Table, np.ndarray] | None:
    """One row per (epoch, projection) from each epoch's ``proj`` map, and how many rows
    each epoch has; the sensor, epoch id and time are taken from the epochs table's rows.
    None when a key of a map is not an integer projection id (the slow path quarantines that
    epoch)."""
    maps = [e.proj or {} for e in epochs]
    counts = np.array([len(m) for m in maps], dtype=np.int64)
    try:
        projection_ids = pc.cast(pa.array([k for m in maps for k in m], pa.string()),
                                 pa.int64())
    except _ARROW_ERRORS:
        return None
    xyz = [v or _NO_XYZ for m in maps for v in m.values()]
    base = table.select(["sensor_uuid", "epoch_id", "ts"]).take(
        np.repeat(np.arange(len(maps)), counts))
    projected = pa.table({"sensor_uuid": base.column("sensor_uuid"),
                          "epoch_id": base.column("epoch_id"),
                          "projection_id": projection_ids, "ts": base.column("ts"),
                          **{k: pa.array(list(map(attrgetter(k), xyz)), pa.float64())
                             for k in ("e", "n", "h")}})
    return projected, counts


def _keep_epochs(table: pa.Table, projected: pa.Table, counts: np.ndarray,
                 kept: np.ndarray) -> tuple[pa.Table, pa.Table]:
    """The kept epochs and the projected rows of exactly those epochs, matched by position
    (a dropped copy has the same sensor and id as the kept one)."""
    mask = np.zeros(table.num_rows, dtype=bool)
    mask[kept] = True
    return table.take(kept), projected.filter(pa.array(np.repeat(mask, counts)))


def _epochs_differ(table: pa.Table, epochs: list, dups: _Duplicates) -> np.ndarray:
    """Per dropped epoch, True when it differs from the kept copy in any column or in its
    projected coordinates."""
    differ = _rows_differ(table, dups.dropped, dups.winner, ("sensor_uuid", "epoch_id"))
    return differ | np.array([(epochs[d].proj or {}) != (epochs[w].proj or {})
                              for d, w in zip(dups.dropped.tolist(), dups.winner.tolist())],
                             dtype=bool)


def _json_text(raw: msgspec.Raw, empty: str) -> str:
    """The JSON text as sent (so keys the schema does not model are kept); null is empty."""
    text = bytes(raw).decode()
    return empty if text == "null" else text


def _solution_row(item: _Solution) -> dict:
    srid = item.srid
    return {"sensor_uuid": item.sensorUuid, "device_serial_number": item.deviceSerialNumber,
            "srid": srid if type(srid) is int and INT32_MIN <= srid <= INT32_MAX else None,
            "units": _json_text(item.units, "{}"),
            "projection_metadata": _json_text(item.projectionMetadata, "[]"),
            "base_stations": _json_text(item.baseStations, "[]")}


def _solutions(rows: list[dict]) -> list[dict]:
    """One solution per sensor, the last item's winning (gnss_solutions' key is the
    sensor)."""
    return list({row["sensor_uuid"]: row for row in rows}.values())


# ----------------------------------------------------------------------------- GNSS, slow

_PROJECTION_ID = re.compile(r"-?[0-9]+")  # what Arrow's cast, the fast path, reads
_EPOCH_FIELDS = tuple((n, _JSON_NAME.get(n, n)) for n in EPOCH_NUMBERS)
_QUALITY_FIELDS = tuple((n, n) for n in QUALITY_NUMBERS)
_DEBUG_FIELDS = tuple((n, n) for n in DEBUG_NUMBERS)
_XYZ_FIELDS = (("e", "e"), ("n", "n"), ("h", "h"))


@dataclass
class _EpochRead:
    """One epoch as the slow path read it: a clean ``_Epoch`` or the problems it has."""

    epoch: _Epoch | None = None
    ts_us: int | None = None
    at_us: int | None = None
    ts_text: str | None = None
    problems: list[str] = field(default_factory=list)
    parsed_strings: int = 0

    def number(self, value: Any, name: str) -> float | None:
        number, problem, was_string = read_number(value)
        if problem is not None:
            self.problems.append(f"{name} {problem}")
        self.parsed_strings += was_string
        return number

    def numbers(self, obj: dict, fields: tuple[tuple[str, str], ...], prefix: str = ""
                ) -> dict:
        """The struct fields of ``obj`` named in ``fields`` (struct name, JSON name).  A
        float or null is taken as it is: that is nearly every value, and the slow path
        reads some 30 per epoch."""
        out = {}
        for name, key in fields:
            value = obj.get(key)
            out[name] = value if value is None or type(value) is float else \
                self.number(value, prefix + key)
        return out

    def part(self, obj: dict, name: str) -> dict | None:
        """A nested object (quality, debug, proj): None when absent or null."""
        value = obj.get(name)
        if value is None or isinstance(value, dict):
            return value
        self.problems.append(f"{name} {_shown(value)} is not an object")
        return None


def _text(value: Any) -> str | None:
    """A text field as the fast path stores it: text as is, anything else as JSON text."""
    return value if value is None or isinstance(value, str) else raw_json(value)


def read_epoch(raw: Any, stamps: _Stamps) -> _EpochRead:
    """Read one leniently parsed epoch field by field, noting every problem."""
    r = _EpochRead()
    if type(raw) is not dict:
        r.problems.append("epoch is not an object")
        return r
    epoch_id, problem, _ = read_int64(raw.get("id"), strings=False)
    if epoch_id is None:
        r.problems.append(f"epoch id {problem or 'is missing'}")
    r.ts_us, r.ts_text, problem = stamps.read(raw.get("timestamp", _MISSING))
    if problem is not None:
        r.problems.append(f"timestamp {problem}")
    bs, problem, was_string = read_int64(raw.get("bs"))
    if problem is not None:
        r.problems.append(f"bs {problem}")
    r.parsed_strings += was_string
    numbers = r.numbers(raw, _EPOCH_FIELDS)
    quality, debug = r.part(raw, "quality"), r.part(raw, "debug")
    quality = None if quality is None else _Quality(**r.numbers(quality, _QUALITY_FIELDS,
                                                                 "quality."))
    debug = None if debug is None else _read_debug(debug, r, stamps)
    proj = _read_proj(r.part(raw, "proj"), r)
    if not r.problems:
        r.epoch = _Epoch(id=epoch_id, timestamp=r.ts_text, bs=bs, quality=quality,
                         debug=debug, proj=proj, **numbers)
    return r


def _read_debug(debug: dict, r: _EpochRead, stamps: _Stamps) -> _Debug:
    at = debug.get("at")
    at_text = None
    if at is not None:
        r.at_us, at_text, problem = stamps.read(at)
        if problem is not None:
            r.problems.append(f"debug.at {problem}")
    return _Debug(ps=_text(debug.get("ps")), err=_text(debug.get("err")), at=at_text,
                  log=_text(debug.get("log")), **r.numbers(debug, _DEBUG_FIELDS, "debug."))


def _read_proj(proj: dict | None, r: _EpochRead) -> dict[str, _Xyz | None] | None:
    if proj is None:
        return None
    out: dict[str, _Xyz | None] = {}
    for key, xyz in proj.items():
        if not (len(key) <= 20 and _PROJECTION_ID.fullmatch(key)
                and INT64_MIN <= int(key) <= INT64_MAX):
            r.problems.append(f"proj key {key!r} is not a projection id")
        if xyz is None or not isinstance(xyz, dict):
            if xyz is not None:
                r.problems.append(f"proj.{key} {_shown(xyz)} is not an object")
            out[key] = None
            continue
        out[key] = _Xyz(**r.numbers(xyz, _XYZ_FIELDS, f"proj.{key}."))
    return out


class _EpochsBuilder:
    """The slow path's state over one GNSS answer: kept epochs, quarantine, counts."""

    def __init__(self) -> None:
        self.epochs: list[_Epoch] = []
        self.ts_us: list[int] = []
        self.at_us: list[int | None] = []
        self.sources: list[dict] = []
        self.sensors: list[str] = []
        self.serials: list[str | None] = []
        self.counts: list[int] = []
        self.quarantine = _Quarantine()
        self.stamps = _Stamps()
        self.parsed_strings = 0

    def item(self, key: str, serial: str | None, data: list) -> None:
        kept = 0
        for raw in data:
            r = read_epoch(raw, self.stamps)
            if r.problems:
                self.quarantine.add(key, r.ts_us, r.ts_text, raw_json(raw),
                                    "; ".join(r.problems))
                continue
            self.epochs.append(r.epoch)
            self.ts_us.append(r.ts_us)
            self.at_us.append(r.at_us)
            self.sources.append(raw)
            self.parsed_strings += r.parsed_strings
            kept += 1
        self.sensors.append(key)
        self.serials.append(serial)
        self.counts.append(kept)


def gnss_lenient(body: bytes) -> GnssAnswer:
    """The slow path: every epoch read on its own, bad ones quarantined whole.  The kept
    epochs make exactly the tables the fast path makes of the same epochs."""
    items = _items(lenient_loads(body), "sensorUuid")
    b = _EpochsBuilder()
    null_series: dict[str, None] = {}
    for key, data, item in items:
        if data is None:
            null_series[key] = None
        b.item(key, _text(item.get("deviceSerialNumber")), data or [])
    codes, dictionary = key_codes(b.sensors, b.counts)
    ids = pa.array([e.id for e in b.epochs], pa.int64())
    table = _epochs_table(b.epochs, [e.debug or _NO_DEBUG for e in b.epochs],
                          pa.DictionaryArray.from_arrays(codes, dictionary),
                          repeated_keys(b.serials, b.counts).cast(pa.string()), ids,
                          pa.array([e.bs for e in b.epochs], pa.int64()),
                          pa.array(np.array(b.ts_us, dtype=np.int64), UTC_TIMESTAMP),
                          pa.array(b.at_us, UTC_TIMESTAMP))
    projected, per_epoch = _projected_table(b.epochs, table)
    keys = tuple(dictionary.to_pylist())
    dups = last_wins(codes, int64_numpy(ids), len(keys) == len(items))
    dropped = 0
    if dups is not None:
        differ = _epochs_differ(table, b.epochs, dups)
        for d, w in zip(dups.dropped[differ].tolist(), dups.winner[differ].tolist()):
            fields = ", ".join(_differing_fields(table, b.epochs, d, w))
            b.quarantine.add(keys[codes[d]], b.ts_us[d], b.sources[d].get("timestamp"), raw_json(b.sources[d]),
                             f"duplicate epoch id {b.epochs[d].id} in one answer: kept the "
                             f"last copy, dropped one differing in {fields}")
        table, projected = _keep_epochs(table, projected, per_epoch, dups.kept)
        dropped = int((~differ).sum())
    solutions = _solutions([_lenient_solution_row(item) for _, _, item in items])
    return GnssAnswer(table, projected, solutions, b.quarantine.table(), b.parsed_strings,
                      dropped, tuple(null_series), keys)


def _differing_fields(table: pa.Table, epochs: list[_Epoch], a: int, b: int) -> list[str]:
    """Names of the columns (and ``proj``) in which epochs ``a`` and ``b`` differ."""
    left, right = table.take([a, b]).to_pylist()
    names = [k for k in left if left[k] != right[k]]
    if (epochs[a].proj or {}) != (epochs[b].proj or {}):
        names.append("proj")
    return names


def _lenient_solution_row(item: dict) -> dict:
    """``_solution_row`` of a leniently parsed item (the JSON parts re-encoded compactly)."""
    def json_text(name: str, empty: str) -> str:
        value = item.get(name)
        return empty if value is None else raw_json(value)
    srid = item.get("srid")
    return {"sensor_uuid": item["sensorUuid"],
            "device_serial_number": _text(item.get("deviceSerialNumber")),
            "srid": srid if type(srid) is int and INT32_MIN <= srid <= INT32_MAX else None,
            "units": json_text("units", "{}"),
            "projection_metadata": json_text("projectionMetadata", "[]"),
            "base_stations": json_text("baseStations", "[]")}

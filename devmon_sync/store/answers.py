"""Data answers (POST /sensor-data, POST /sensor-data/gnss) to Arrow columns: no SQL, no HTTP.

This is the sync's hot path, so it is written for speed: msgspec decodes the body straight
into small typed objects (no dicts, and ``gc=False`` so millions of them never wake the
garbage collector), one list comprehension per column turns them into Arrow arrays, and
Arrow's C++ ISO 8601 parser turns the timestamp strings into UTC timestamps.  Keys repeated
on every row (a parameter's or sensor's UUID) are dictionary-encoded: one string per
stream, an int32 index per row.

Lenient where the service might stray: extra keys are ignored (the metadata tables keep raw
JSON; data points have no room for it), a number field carrying something else becomes NULL,
and a timestamp Arrow cannot read is parsed by ``api_contract.parse_timestamp``, which names
the bad value.  A body of the wrong shape raises ValueError, which the client treats as a
damaged answer and fetches again.
"""

from __future__ import annotations

import gc
from contextlib import contextmanager
from dataclasses import dataclass
from operator import attrgetter
from typing import Any

import msgspec
import numpy as np
import pyarrow as pa
import pyarrow.compute as pc

from devmon_sync import api_contract as contract

UTC_TIMESTAMP = pa.timestamp("us", tz="UTC")
KEY_TYPE = pa.dictionary(pa.int32(), pa.string())

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



def utc_timestamps(texts: list) -> pa.Array:
    """UTC timestamps of ISO 8601 strings that name their offset (None stays null).

    Arrow parses the usual forms at tens of millions per second; anything it refuses
    (nanoseconds, a missing offset, text) goes through ``parse_timestamp`` one by one, which
    accepts what it can and raises ValueError naming the first value it cannot."""
    try:
        return pc.cast(pa.array(texts, pa.string()), UTC_TIMESTAMP)
    except (pa.ArrowInvalid, pa.ArrowTypeError, pa.ArrowNotImplementedError):
        return pa.array([None if t is None else contract.parse_timestamp(t) for t in texts],
                        UTC_TIMESTAMP)


def float_column(values: list) -> pa.Array:
    """Float64 column; a value that is not a number becomes null instead of failing."""
    try:
        return pa.array(values, pa.float64())
    except (pa.ArrowInvalid, pa.ArrowTypeError):
        return pa.array([v if isinstance(v, (int, float)) and not isinstance(v, bool) else None
                         for v in values], pa.float64())


def int_column(values: list) -> pa.Array:
    """Int64 column; a value that is not a whole number in range becomes null."""
    try:
        return pa.array(values, pa.int64())
    except (pa.ArrowInvalid, pa.ArrowTypeError, OverflowError):
        return pa.array([v if isinstance(v, int) and not isinstance(v, bool)
                         and -2**63 <= v < 2**63 else None for v in values], pa.int64())


def text_column(values: list) -> pa.Array:
    """String column; a value that is not text is kept as its JSON text."""
    try:
        return pa.array(values, pa.string())
    except (pa.ArrowInvalid, pa.ArrowTypeError):
        return pa.array([v if v is None or isinstance(v, str) else
                         msgspec.json.encode(v).decode() for v in values], pa.string())


def repeated_keys(keys: list[str | None], counts: list[int]) -> pa.DictionaryArray:
    """``keys[i]`` repeated ``counts[i]`` times, dictionary-encoded (one entry per distinct
    key, even if the service repeats an item)."""
    index: dict[str, int] = {}
    codes = np.array([index.setdefault(k, len(index)) for k in keys], dtype=np.int32)
    return pa.DictionaryArray.from_arrays(np.repeat(codes, counts),
                                          pa.array(list(index), pa.string()))


def rows_per_key(column: pa.Array | pa.ChunkedArray) -> dict[str, int]:
    """How many rows each key of a (dictionary-encoded) key column has."""
    counts = pc.value_counts(column)
    keys = counts.field("values")
    if pa.types.is_dictionary(keys.type):
        keys = keys.cast(pa.string())
    return dict(zip(keys.to_pylist(), counts.field("counts").to_pylist()))


# ----------------------------------------------------------------------------- readings

class _Point(msgspec.Struct, gc=False):
    timestamp: str
    value: Any = None


class _Series(msgspec.Struct, gc=False):
    parameterUuid: str
    data: list[_Point] = []


class _SeriesAnswer(msgspec.Struct, gc=False):
    items: list[_Series]


_SERIES = msgspec.json.Decoder(_SeriesAnswer)


def readings_from_json(body: bytes) -> pa.Table:
    """Columns (parameter_uuid, ts, value) of a POST /sensor-data answer, one row per point.

    Raises ValueError for a body that is not such an answer."""
    with collector_paused():
        return _readings(_SERIES.decode(body))


def _readings(answer: _SeriesAnswer) -> pa.Table:
    uuids, counts, stamps, values = [], [], [], []
    for item in answer.items:
        data = item.data
        uuids.append(item.parameterUuid)
        counts.append(len(data))
        stamps += [p.timestamp for p in data]
        values += [p.value for p in data]
    return pa.table({"parameter_uuid": repeated_keys(uuids, counts),
                     "ts": utc_timestamps(stamps), "value": float_column(values)})


# ----------------------------------------------------------------------------- GNSS

class _Quality(msgspec.Struct, gc=False):
    sdn: Any = None
    sde: Any = None
    sdu: Any = None
    q: Any = None
    ns: Any = None
    ar: Any = None


class _Debug(msgspec.Struct, gc=False):
    ps: Any = None
    err: Any = None
    at: Any = None
    gw: Any = None
    gd: Any = None
    gt: Any = None
    log: Any = None


class _Xyz(msgspec.Struct, gc=False):
    e: Any = None
    n: Any = None
    h: Any = None


class _Epoch(msgspec.Struct, gc=False, rename={"de": "dE", "dn": "dN", "du": "dU",
                                                 "ve": "vE", "vn": "vN", "vu": "vU"}):
    id: Any = None
    timestamp: Any = None
    bs: Any = None
    lat: Any = None
    lon: Any = None
    eh: Any = None
    oh: Any = None
    roll: Any = None
    pitch: Any = None
    de: Any = None
    dn: Any = None
    du: Any = None
    d2d: Any = None
    d3d: Any = None
    ve: Any = None
    vn: Any = None
    vu: Any = None
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
    data: list[_Epoch] = []


class _GnssAnswer(msgspec.Struct, gc=False):
    items: list[_Solution]


_GNSS = msgspec.json.Decoder(_GnssAnswer)

EPOCH_NUMBERS = ("lat", "lon", "eh", "oh", "roll", "pitch", "de", "dn", "du", "d2d", "d3d",
                 "ve", "vn", "vu")
QUALITY_NUMBERS = ("sdn", "sde", "sdu", "q", "ns", "ar")
DEBUG_NUMBERS = ("gw", "gd", "gt")
_NO_QUALITY, _NO_DEBUG, _NO_XYZ = _Quality(), _Debug(), _Xyz()


@dataclass(frozen=True)
class GnssAnswer:
    """One POST /sensor-data/gnss answer as the mirror stores it."""

    epochs: pa.Table  # one row per epoch, columns named as gnss_epochs'
    projected: pa.Table  # one row per epoch and projection
    solutions: list[dict]  # per sensor: srid, units, projections, base stations (JSON text)

    def only(self, sensor_uuids: set[str] | list[str]) -> "GnssAnswer":
        """The part of the answer about these sensors."""
        keep = set(sensor_uuids)
        wanted = pa.array(sorted(keep), pa.string())

        def rows_of(table: pa.Table) -> pa.Table:
            key = table.column("sensor_uuid").cast(pa.string())
            return table.filter(pc.is_in(key, value_set=wanted))
        return GnssAnswer(rows_of(self.epochs), rows_of(self.projected),
                          [s for s in self.solutions if s["sensor_uuid"] in keep])


def gnss_from_json(body: bytes) -> GnssAnswer:
    """Epochs, projected coordinates and solution descriptions of a GNSS answer.

    Raises ValueError for a body that is not such an answer."""
    with collector_paused():
        return _gnss(_GNSS.decode(body))


def _gnss(answer: _GnssAnswer) -> GnssAnswer:
    epochs: list[_Epoch] = []
    sensors, serials, counts = [], [], []
    for item in answer.items:
        epochs += item.data
        sensors.append(item.sensorUuid)
        serials.append(item.deviceSerialNumber)
        counts.append(len(item.data))
    table = _epochs_table(epochs, sensors, serials, counts)
    return GnssAnswer(table, _projected_table(epochs, table),
                      [_solution_row(item) for item in answer.items])


def _epochs_table(epochs: list[_Epoch], sensors: list[str], serials: list[str | None],
                  counts: list[int]) -> pa.Table:
    def column(name: str, rows=epochs) -> list:
        return list(map(attrgetter(name), rows))
    quality = [e.quality or _NO_QUALITY for e in epochs]
    debug = [e.debug or _NO_DEBUG for e in epochs]
    err = [None if v is None else v if isinstance(v, str) else msgspec.json.encode(v).decode()
           for v in column("err", debug)]
    cols = {"sensor_uuid": repeated_keys(sensors, counts), "epoch_id": int_column(column("id")),
            "device_serial_number": repeated_keys(serials, counts).cast(pa.string()),
            "ts": utc_timestamps(column("timestamp")), "base_station_id": int_column(column("bs"))}
    cols.update({k: float_column(column(k)) for k in EPOCH_NUMBERS})
    cols.update({k: float_column(column(k, quality)) for k in QUALITY_NUMBERS})
    cols.update({"debug_ps": text_column(column("ps", debug)), "debug_err": text_column(err),
                 "debug_at": utc_timestamps([v if isinstance(v, str) else None
                                             for v in column("at", debug)])})
    cols.update({f"debug_{k}": float_column(column(k, debug)) for k in DEBUG_NUMBERS})
    cols["debug_log"] = text_column(column("log", debug))
    return pa.table(cols)


def _projected_table(epochs: list[_Epoch], table: pa.Table) -> pa.Table:
    """One row per (epoch, projection) from each epoch's ``proj`` map; the sensor, epoch id
    and time are taken from the epochs table's rows."""
    maps = [e.proj if isinstance(e.proj, dict) else {} for e in epochs]
    rows = np.repeat(np.arange(len(maps)), [len(m) for m in maps])
    xyz = [v if isinstance(v, _Xyz) else _NO_XYZ for m in maps for v in m.values()]
    base = table.select(["sensor_uuid", "epoch_id", "ts"]).take(rows)
    return pa.table({"sensor_uuid": base.column("sensor_uuid"),
                     "epoch_id": base.column("epoch_id"),
                     "projection_id": _projection_ids([k for m in maps for k in m]),
                     "ts": base.column("ts"),
                     **{k: float_column(list(map(attrgetter(k), xyz))) for k in ("e", "n", "h")}})


def _projection_ids(keys: list[str]) -> pa.Array:
    """The ``proj`` map's keys as integers (null for a key that is not one)."""
    try:
        return pc.cast(pa.array(keys, pa.string()), pa.int64())
    except pa.ArrowInvalid:
        return pa.array([int(k) if k.lstrip("-").isdigit() else None for k in keys], pa.int64())


def _json_text(raw: msgspec.Raw, empty: str) -> str:
    """The JSON text as sent (so keys the schema does not model are kept); null is empty."""
    text = bytes(raw).decode()
    return empty if text == "null" else text


def _solution_row(item: _Solution) -> dict:
    srid = item.srid
    return {"sensor_uuid": item.sensorUuid, "device_serial_number": item.deviceSerialNumber,
            "srid": srid if isinstance(srid, int) and not isinstance(srid, bool) else None,
            "units": _json_text(item.units, "{}"),
            "projection_metadata": _json_text(item.projectionMetadata, "[]"),
            "base_stations": _json_text(item.baseStations, "[]")}

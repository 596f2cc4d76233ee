"""POST /sensor-data/gnss answers to Arrow columns: the fast path, and the slow path that
reads one epoch at a time when the fast one cannot (``gnss_lenient``)."""

from __future__ import annotations

import re
from dataclasses import dataclass, field
from typing import Any, Callable

import msgspec
import numpy as np
import pyarrow as pa
import pyarrow.compute as pc

from devmon_sync.identifiers import canonical_uuid
from devmon_sync.store.answers.columns import (
    _ARROW_ERRORS,
    collector_paused,
    fast_int64,
    fast_timestamps,
    INT64_MAX,
    INT64_MIN,
    int64_numpy,
    key_codes,
    repeated_keys,
    text_column,
    UTC_TIMESTAMP,
)
from devmon_sync.store.answers.quarantine import (
    _Duplicates,
    empty_quarantine,
    last_wins,
    lenient_loads,
    _MISSING,
    _Quarantine,
    raw_json,
    read_integer,
    read_number,
    _rows_differ,
    _shown,
    _Stamps,
)
from devmon_sync.store.answers.readings import _items

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
    id: int | str  # a string: an int64 as proto3 JSON writes it ("250000000"), read by
    timestamp: str  #  ``_ids`` with the one rule (``read_integer``)
    bs: int | str | None = None
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


def _field_reader(name: str) -> Callable[[list], list]:
    """``[row.<name> for row in rows]`` compiled for one field: a comprehension reads a
    struct's field in 0.56x the time ``list(map(attrgetter(name), rows))`` takes (0.13
    against 0.23 ms for 7,608 epochs), and every epoch's 30 fields are read this way."""
    if not name.isidentifier():
        raise ValueError(f"not a field name: {name!r}")
    return eval(f"lambda rows: [row.{name} for row in rows]")  # noqa: S307 (our constants)


_FIELD = {name: _field_reader(name) for name in (
    *EPOCH_NUMBERS, *QUALITY_NUMBERS, *DEBUG_NUMBERS, "ps", "err", "log", "e", "n", "h")}
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
        answer's (they are not kept per sensor).  The answer itself when it is about
        these sensors alone (the usual case: nothing filtered, no key cast to text)."""
        keep = set(sensor_uuids)
        if self._only_about(keep):
            return self
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

    def _only_about(self, keep: set[str]) -> bool:
        """Whether every row, solution and key of the answer is of a sensor in ``keep``
        (a key column's distinct values are its dictionary's, when it has one)."""
        def keys_of(table: pa.Table, column: str) -> list | None:
            values = table.column(column).combine_chunks()
            if table.num_rows == 0:
                return []
            return values.dictionary.to_pylist() if pa.types.is_dictionary(values.type) \
                else None
        parts = [keys_of(self.epochs, "sensor_uuid"), keys_of(self.projected, "sensor_uuid"),
                 self.quarantine.column("key").to_pylist(), self.keys, self.null_series,
                 [s["sensor_uuid"] for s in self.solutions]]
        return all(part is not None and keep.issuperset(part) for part in parts)


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
        if decoded is not None:
            return decoded
        return gnss_lenient(body)


def _gnss_fast(answer: _GnssAnswer) -> GnssAnswer | None:
    """The answer when every epoch is clean (identical repeats allowed), else None."""
    epochs: list[_Epoch] = []
    sensors, serials, counts, null_series = [], [], [], []
    for item in answer.items:
        data = item.data
        uuid = canonical_uuid(item.sensorUuid)
        if data is None:
            null_series.append(uuid)
            data = []
        epochs += data
        sensors.append(uuid)
        serials.append(item.deviceSerialNumber)
        counts.append(len(data))
    debug = [e.debug or _NO_DEBUG for e in epochs]
    ids, id_strings = _ids([e.id for e in epochs])
    bs, bs_strings = _ids([e.bs for e in epochs])
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
                      empty_quarantine(), id_strings + bs_strings, dropped,
                      tuple(dict.fromkeys(null_series)), keys)


def _ids(values: list) -> tuple[pa.Array | None, int]:
    """Int64 column of epoch or base station ids, and how many were written as strings;
    None when one does not fit or cannot be read as an integer (the slow path says why).
    A service writing int64 as proto3 JSON does sends every id as a string, so reading them
    here keeps its answers on the fast path."""
    column = fast_int64(values)
    if column is not None:
        return column, 0
    strings = sum(type(v) is str for v in values)
    if not strings:
        return None, 0
    return fast_int64([_string_id(v) if type(v) is str else v for v in values]), strings


def _string_id(text: str) -> int | str:
    """The integer a string id holds, or the string itself when it holds none (then the
    int64 column refuses it, and the slow path quarantines the epoch with the reason)."""
    whole, problem, _ = read_integer(text)
    return text if problem is not None else whole


def _epochs_table(epochs: list[_Epoch], debug: list[_Debug], sensor_keys: pa.Array,
                  serials: pa.Array, ids: pa.Array, bs: pa.Array, ts: pa.Array,
                  at: pa.Array) -> pa.Table:
    """The gnss_epochs columns of clean epochs (identifiers and times already read)."""
    def column(name: str, rows=epochs) -> list:
        return _FIELD[name](rows)
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
                          **{k: pa.array(_FIELD[k](xyz), pa.float64())
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
    return {"sensor_uuid": canonical_uuid(item.sensorUuid),
            "device_serial_number": item.deviceSerialNumber,
            "srid": read_integer(srid, 32)[0],
            "units": _json_text(item.units, "{}"),
            "projection_metadata": _json_text(item.projectionMetadata, "[]"),
            "base_stations": _json_text(item.baseStations, "[]")}


def _solutions(rows: list[dict]) -> list[dict]:
    """One solution per sensor, the last item's winning (gnss_solutions' key is the
    sensor)."""
    return list({row["sensor_uuid"]: row for row in rows}.values())


# ----------------------------------------------------------------------------- slow path
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
    epoch_id, problem, was_string = read_integer(raw.get("id"))
    if epoch_id is None:
        r.problems.append(f"epoch id {problem or 'is missing'}")
    r.parsed_strings += was_string
    r.ts_us, r.ts_text, problem = stamps.read(raw.get("timestamp", _MISSING))
    if problem is not None:
        r.problems.append(f"timestamp {problem}")
    bs, problem, was_string = read_integer(raw.get("bs"))
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
            b.quarantine.add(keys[codes[d]], b.ts_us[d], b.sources[d].get("timestamp"),
                             raw_json(b.sources[d]),
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
    return {"sensor_uuid": canonical_uuid(item["sensorUuid"]),
            "device_serial_number": _text(item.get("deviceSerialNumber")),
            "srid": read_integer(srid, 32)[0],
            "units": json_text("units", "{}"),
            "projection_metadata": json_text("projectionMetadata", "[]"),
            "base_stations": json_text("baseStations", "[]")}

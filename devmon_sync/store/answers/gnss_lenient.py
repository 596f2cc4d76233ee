"""POST /sensor-data/gnss answers read one epoch at a time (the slow path)."""

from __future__ import annotations

import re
from dataclasses import dataclass, field
from typing import Any

import numpy as np
import pyarrow as pa

from devmon_sync.store.answers.columns import (
    INT32_MAX,
    INT32_MIN,
    INT64_MAX,
    INT64_MIN,
    UTC_TIMESTAMP,
    int64_numpy,
    key_codes,
    repeated_keys,
)
from devmon_sync.store.answers.gnss import (
    _JSON_NAME,
    _NO_DEBUG,
    DEBUG_NUMBERS,
    EPOCH_NUMBERS,
    QUALITY_NUMBERS,
    GnssAnswer,
    _Debug,
    _Epoch,
    _epochs_differ,
    _epochs_table,
    _keep_epochs,
    _projected_table,
    _Quality,
    _solutions,
    _Xyz,
)
from devmon_sync.store.answers.readings import _items
from devmon_sync.store.answers.quarantine import (
    _MISSING,
    _Quarantine,
    _shown,
    _Stamps,
    last_wins,
    lenient_loads,
    raw_json,
    read_int64,
    read_number,
)

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

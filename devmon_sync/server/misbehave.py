"""Misbehaviour on demand: answers that are 200 OK yet silently hold less, or odd, data.

Real services do things the spec does not forbid and a sync client must survive: cap an
answer without saying so, clip a long range, treat ``endDate`` as exclusive, emit ``NaN``,
numbers as strings, timestamps without ``Z``, duplicate points, ids outside int64.  Each such
behaviour is switched on through ``ServerConfig.misbehaviour`` so tests can prove the client
copes.  Which point goes wrong is a pure function of (seed, series UUID, timestamp), so the
same point misbehaves the same way in every answer that contains it, as a real, persistent
data defect would.

Only answers of a misbehaving server pass through here (re-encoded by Python's json, which
writes bare NaN / Infinity and ints of any size); an honest server never calls this module.
"""

from __future__ import annotations

import copy
import json
import math
from dataclasses import dataclass, fields

import numpy as np
import orjson

from devmon_sync.api_contract import parse_timestamp
from devmon_sync.server import noise

DAY_S = 86400
HUGE_ID = 2**63  # one past int64's maximum, and far beyond the spec's +-(2**53 - 1)
CAP_KEEP = ("oldest", "newest", "first_items", "spread")
_DATA_ENDPOINTS = ("sensor_data", "latest", "gnss")
_DEVICE_ENDPOINTS = ("sites", "devices", "device", "device_groups", "device_group")
_RECORD_LISTS = ("items", "grouped", "ungrouped")  # where an answer's records are (not its
#                                                    paging envelope: total, offset, ...)


@dataclass(frozen=True)
class Misbehaviour:
    """What a misbehaving server does to its 200 answers; everything is off by default.

    Caps, clipping and the exclusive end act on POST /sensor-data and /sensor-data/gnss.
    The per-point rates (0..1) act on the points of those two and of /sensor-data/latest.
    """

    cap_points: int = 0            # /sensor-data returns at most this many points (0: off)
    cap_epochs: int = 0            # /sensor-data/gnss returns at most this many epochs
    cap_keep: str = "oldest"       # which survive a cap: oldest, newest, first_items or
    #                                spread (evenly thinned, first and last kept: a service
    #                                that downsamples long answers without saying so)
    cap_per_series: bool = False   # cap each item separately, not the whole answer
    clip_range_days: float = 0.0   # answer only [startDate, startDate + days] (0: off)
    exclusive_end: bool = False    # leave out points stamped exactly endDate
    nan_rate: float = 0.0          # value (GNSS: lat) written as bare NaN
    infinity_rate: float = 0.0     # value (GNSS: lat) written as bare Infinity / -Infinity
    string_number_rate: float = 0.0  # value (GNSS: eh) written as a JSON string
    naive_timestamp_rate: float = 0.0  # timestamp without its Z
    duplicate_rate: float = 0.0    # point / epoch repeated right after itself
    duplicate_conflict: bool = False  # the repeat differs: value + 1.0, GNSS lat + 1e-6
    huge_epoch_id_rate: float = 0.0  # GNSS epoch id becomes 2**63 + id
    huge_legacy_ids: bool = False  # every legacyDeviceId becomes 2**63
    metadata_number_strings: bool = False  # every number of the records of sites, devices,
    #                                sensors and groups (lat, samplingPeriodSeconds, battery,
    #                                channelIndex, arpHeight, projection srid, ...) and of the
    #                                data items' descriptions (srid, channelIndex; never their
    #                                points) written as a JSON string: "46.3030235", "600"
    epoch_id_strings: bool = False  # every GNSS epoch id and base station id (bs) written as a
    #                                JSON string, as proto3 JSON writes an int64: "250000000"
    null_data_empty: bool = False  # an item with no points is sent with "data": null
    period_claim_divisor: int = 0  # device configs claim a sampling period this many times
    #                                shorter than the data's (a logger set to 10 minutes that
    #                                uploads hourly): honest data that looks thinned
    seed: int = 0

    def __post_init__(self) -> None:
        for f in fields(self):
            value = getattr(self, f.name)
            if f.name.endswith("_rate") and not 0.0 <= value <= 1.0:
                raise ValueError(f"{f.name} must be a share between 0 and 1, not {value!r}")
        for name in ("cap_points", "cap_epochs", "clip_range_days", "period_claim_divisor"):
            value = getattr(self, name)
            if not (value >= 0 and math.isfinite(value)):
                raise ValueError(f"{name} must be 0 (off) or positive, not {value!r}")
        if self.cap_keep not in CAP_KEEP:
            raise ValueError(f"cap_keep must be one of {', '.join(CAP_KEEP)}, "
                             f"not {self.cap_keep!r}")

    @property
    def active(self) -> bool:
        """True when any misbehaviour is switched on.  The modifiers (``seed``, ``cap_keep``,
        ``cap_per_series``, ``duplicate_conflict``) change nothing alone, so alone they leave
        the server honest and its answers byte-identical."""
        return any(getattr(self, f.name) for f in fields(self)
                   if f.name not in ("seed", "cap_keep", "cap_per_series",
                                     "duplicate_conflict"))


# ----------------------------------------------------------------------------- settings

def setting_names() -> list[str]:
    """The names ``devmon serve --misbehave NAME=VALUE`` accepts (fields, dashes for _)."""
    return [f.name.replace("_", "-") for f in fields(Misbehaviour)]


def parse_setting(text: str) -> tuple[str, object]:
    """``cap-points=5000`` to ``("cap_points", 5000)``, the value checked as the field would.

    Raises ValueError with a one-line message naming what is wrong.
    """
    name, sep, raw = text.partition("=")
    field_name = name.strip().replace("-", "_")
    types = {f.name: f.type for f in fields(Misbehaviour)}
    if not sep or field_name not in types:
        raise ValueError(f"{text!r} is not NAME=VALUE with NAME one of "
                         f"{', '.join(setting_names())}")
    value = _convert(types[field_name], raw.strip(), name.strip())
    try:
        Misbehaviour(**{field_name: value})  # the field's own checks: ranges, cap-keep choices
    except ValueError as err:
        raise ValueError(str(err).replace(field_name, name.strip(), 1)) from None
    return field_name, value


def _convert(kind: str, raw: str, name: str) -> object:
    # ``from __future__ import annotations`` keeps the field types as their source text.
    try:
        if kind == "int":
            return int(raw)
        if kind == "float":
            value = float(raw)
            if not math.isfinite(value):
                raise ValueError
            return value
    except ValueError:
        raise ValueError(f"{name}={raw!r}: not a {'whole' if kind == 'int' else 'finite'} number") \
            from None
    if kind == "bool":
        lowered = raw.lower()
        if lowered in ("1", "true", "yes", "on"):
            return True
        if lowered in ("0", "false", "no", "off"):
            return False
        raise ValueError(f"{name}={raw!r}: not true or false")
    return raw


def from_settings(settings: list[tuple[str, object]]) -> Misbehaviour:
    """The Misbehaviour of parsed ``NAME=VALUE`` settings (a later one wins)."""
    return Misbehaviour(**dict(settings))


# ----------------------------------------------------------------------------- rewriting

def apply(m: Misbehaviour, endpoint: str, request: object, result: object) -> bytes:
    """The bytes a misbehaving server sends for ``result``, the honest answer of ``endpoint``.

    ``request`` is the parsed POST body (or the GET query).  Endpoints no misbehaviour
    concerns keep their honest encoding byte for byte.
    """
    if not _concerns(m, endpoint):
        return orjson.dumps(result)
    doc = orjson.loads(orjson.dumps(result))  # plain lists and dicts, Fragments expanded
    body = request if isinstance(request, dict) else {}
    if endpoint == "sensor_data":
        _rewrite_items(m, doc["items"], _SeriesKind, body, m.cap_points)
    elif endpoint == "gnss":
        _rewrite_items(m, doc["items"], _EpochKind, body, m.cap_epochs)
    elif endpoint == "latest":  # no window to clip or cap: only the points go wrong
        _rewrite_items(m, doc["items"], _SeriesKind)
    if m.huge_legacy_ids:
        _huge_legacy_ids(doc)
    if m.period_claim_divisor:
        _claim_shorter_periods(doc, m.period_claim_divisor)
    if m.metadata_number_strings:
        _numbers_as_strings_in_records(doc, endpoint)
    return json.dumps(doc, allow_nan=True, ensure_ascii=False,
                      separators=(",", ":")).encode()


def _concerns(m: Misbehaviour, endpoint: str) -> bool:
    return endpoint in _DATA_ENDPOINTS or (
        (m.huge_legacy_ids or m.period_claim_divisor) and endpoint in _DEVICE_ENDPOINTS) or (
        m.metadata_number_strings and endpoint in (*_DEVICE_ENDPOINTS, "sensor"))


def _numbers_as_strings_in_records(doc: object, endpoint: str) -> None:
    """Every number of the answer's records becomes its JSON text as a string; the paging
    envelope and the data points stay numbers (``string_number_rate`` spoils points)."""
    if endpoint in ("device_group", "sensor") or not isinstance(doc, dict):
        _stringify_numbers(doc)  # the answer is the record itself
        return
    for name in _RECORD_LISTS:
        for record in doc.get(name) or ():
            if endpoint in _DATA_ENDPOINTS and isinstance(record, dict):
                points = record.pop("data", None)
                _stringify_numbers(record)
                record["data"] = points
            else:
                _stringify_numbers(record)


def _stringify_numbers(node: object) -> None:
    """Numbers in ``node``'s dicts and lists, however deep, written as strings in place
    (a float as its shortest round-trip text, as the honest JSON writes it; booleans stay)."""
    children = node.items() if isinstance(node, dict) else \
        enumerate(node) if isinstance(node, list) else ()
    for key, value in list(children):
        if isinstance(value, (int, float)) and not isinstance(value, bool):
            node[key] = repr(value) if isinstance(value, float) else str(value)
        else:
            _stringify_numbers(value)


def _claim_shorter_periods(node: object, divisor: int) -> None:
    """Every ``samplingPeriodSeconds`` anywhere in the answer is divided by ``divisor``."""
    if isinstance(node, dict):
        if isinstance(node.get("samplingPeriodSeconds"), int):
            node["samplingPeriodSeconds"] = max(1, node["samplingPeriodSeconds"] // divisor)
        for value in node.values():
            _claim_shorter_periods(value, divisor)
    elif isinstance(node, list):
        for value in node:
            _claim_shorter_periods(value, divisor)


def _huge_legacy_ids(node: object) -> None:
    """Every non-null ``legacyDeviceId`` anywhere in the answer becomes 2**63."""
    if isinstance(node, dict):
        if node.get("legacyDeviceId") is not None:
            node["legacyDeviceId"] = HUGE_ID
        for value in node.values():
            _huge_legacy_ids(value)
    elif isinstance(node, list):
        for value in node:
            _huge_legacy_ids(value)


def _rewrite_items(m: Misbehaviour, items: list[dict], kind, body: dict | None = None,
                   cap: int = 0) -> None:
    """Drop, then spoil, the points of each item, in the order a real service might: the
    query's window first (``body`` None: the endpoint has none), then the size cap, then
    the stored values' defects, which therefore never depend on the cap."""
    times = [_seconds(item["data"]) for item in items]
    keep = [np.ones(t.size, bool) for t in times]
    if body is not None and m.exclusive_end:
        keep = _drop_end(keep, times, body.get("endDate"))
    if body is not None and m.clip_range_days:
        keep = _clip(keep, times, body.get("startDate"), m.clip_range_days)
    if cap:
        keep = _cap(keep, times, cap, m.cap_keep, m.cap_per_series)
    for item, t, k in zip(items, times, keep, strict=True):
        data = [p for p, kept in zip(item["data"], k.tolist(), strict=True) if kept]
        item["data"] = kind.spoil(m, item, data, t[k])
        if m.null_data_empty and not item["data"]:
            item["data"] = None


def _seconds(data: list[dict]) -> np.ndarray:
    """Unix seconds of the points' timestamps (the server writes whole seconds, UTC, Z)."""
    if not data:
        return np.empty(0, np.int64)
    text = np.array([p["timestamp"][:19] for p in data], dtype="datetime64[s]")
    return text.astype(np.int64)


def _instant(text: object) -> float | None:
    """Unix seconds of a request's date-time, None when absent or not one."""
    if not isinstance(text, str):
        return None
    try:
        return parse_timestamp(text).timestamp()
    except ValueError:
        return None


def _drop_end(keep: list, times: list, end_text: object) -> list:
    """``endDate`` taken as exclusive: the points stamped exactly at it go.  Without an
    ``endDate`` the end is the server's clock, which no point is compared with."""
    end = _instant(end_text)
    if end is None:
        return keep
    return [k & (t != end) for k, t in zip(keep, times, strict=True)]


def _clip(keep: list, times: list, start_text: object, days: float) -> list:
    """Only [startDate, startDate + days] is answered.  Without a ``startDate`` the window
    counts from the oldest point of the answer."""
    start = _instant(start_text)
    if start is None:
        alive = [t[k] for t, k in zip(times, keep, strict=True) if k.any()]
        if not alive:
            return keep
        start = float(min(a.min() for a in alive))
    limit = start + days * DAY_S
    return [k & (t <= limit) for k, t in zip(keep, times, strict=True)]


def _cap(keep: list, times: list, n: int, how: str, per_series: bool) -> list:
    """At most ``n`` surviving points, in the whole answer or in each item."""
    if per_series:
        return [_cap_one(k, t, n, how) for k, t in zip(keep, times, strict=True)]
    sizes = [k.size for k in keep]
    merged = _cap_one(np.concatenate(keep) if keep else np.empty(0, bool),
                      np.concatenate(times) if times else np.empty(0, np.int64), n, how)
    return np.split(merged, np.cumsum(sizes)[:-1]) if keep else keep


def _cap_one(keep: np.ndarray, t: np.ndarray, n: int, how: str) -> np.ndarray:
    """Keep ``n`` of the points ``keep`` marks: the first ``n`` in answer order
    (``first_items``), ``n`` spread evenly over the answer order from the first to the last
    (``spread``: every stream thinned alike, its edges intact), or the oldest / newest ``n``
    by timestamp, ties in answer order."""
    alive = np.flatnonzero(keep)
    if alive.size <= n:
        return keep
    if how == "first_items":
        chosen = alive[:n]
    elif how == "spread":
        chosen = alive[np.unique(np.linspace(0, alive.size - 1, n).round().astype(np.int64))]
    else:
        by_time = alive[np.argsort(t[alive], kind="stable")]
        chosen = by_time[:n] if how == "oldest" else by_time[-n:]
    out = np.zeros_like(keep)
    out[chosen] = True
    return out


def _chosen(m: Misbehaviour, what: str, uuid: str, t: np.ndarray, rate: float) -> list[bool]:
    """Which points of the series ``uuid`` (at Unix seconds ``t``) get fault ``what``."""
    if not rate or t.size == 0:
        return [False] * t.size
    return (noise.uniform(noise.stream_key(m.seed, "misbehave", what, uuid), t) < rate).tolist()


def _faults(m: Misbehaviour, uuid: str, t: np.ndarray) -> dict[str, list[bool]]:
    """Every per-point fault of one series, each drawn from its own stream."""
    negative = _chosen(m, "infinity-sign", uuid, t, 0.5)
    return {"nan": _chosen(m, "nan", uuid, t, m.nan_rate),
            "inf": _chosen(m, "infinity", uuid, t, m.infinity_rate),
            "neg": negative,
            "str": _chosen(m, "string", uuid, t, m.string_number_rate),
            "naive": _chosen(m, "naive", uuid, t, m.naive_timestamp_rate),
            "dup": _chosen(m, "duplicate", uuid, t, m.duplicate_rate),
            "huge": _chosen(m, "huge-id", uuid, t, m.huge_epoch_id_rate)}


def _bad_number(value: object, f: dict, i: int) -> object:
    """NaN wins over Infinity, Infinity over a string; a null never becomes a string."""
    if f["nan"][i]:
        return math.nan
    if f["inf"][i]:
        return -math.inf if f["neg"][i] else math.inf
    if f["str"][i] and isinstance(value, (int, float)):
        return repr(float(value)) if isinstance(value, float) else str(value)
    return value


class _SeriesKind:
    """Points ``{timestamp, value}`` of a reading series, keyed by parameterUuid."""

    @staticmethod
    def spoil(m: Misbehaviour, item: dict, data: list[dict], t: np.ndarray) -> list[dict]:
        f = _faults(m, item["parameterUuid"], t)
        out = []
        for i, point in enumerate(data):
            honest = point["value"]
            bad = {"timestamp": _naive(point["timestamp"], f["naive"][i]),
                   "value": _bad_number(honest, f, i)}
            out.append(bad)
            if f["dup"][i]:
                repeat = dict(bad)
                if m.duplicate_conflict and isinstance(honest, (int, float)):
                    repeat["value"] = honest + 1.0
                out.append(repeat)
        return out


class _EpochKind:
    """GNSS epochs, keyed by the item's sensorUuid: faults land in lat, eh and id."""

    @staticmethod
    def spoil(m: Misbehaviour, item: dict, data: list[dict], t: np.ndarray) -> list[dict]:
        f = _faults(m, item["sensorUuid"], t)
        no_string = dict(f, str=[False] * t.size)
        out = []
        for i, epoch in enumerate(data):
            honest_lat = epoch["lat"]
            epoch["timestamp"] = _naive(epoch["timestamp"], f["naive"][i])
            epoch["lat"] = _bad_number(honest_lat, no_string, i)
            if f["str"][i] and isinstance(epoch["eh"], (int, float)):
                epoch["eh"] = repr(float(epoch["eh"]))
            if f["huge"][i]:
                epoch["id"] = HUGE_ID + epoch["id"]
            if m.epoch_id_strings:
                epoch["id"] = str(epoch["id"])
                if isinstance(epoch.get("bs"), int):
                    epoch["bs"] = str(epoch["bs"])
            out.append(epoch)
            if f["dup"][i]:
                repeat = copy.deepcopy(epoch)
                if m.duplicate_conflict and isinstance(honest_lat, (int, float)):
                    repeat["lat"] = honest_lat + 1e-6
                out.append(repeat)
        return out


def _naive(stamp: str, naive: bool) -> str:
    return stamp[:-1] if naive and stamp.endswith("Z") else stamp

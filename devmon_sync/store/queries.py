"""Reading the mirror for analysis, the GUI and reports: numpy columns out, SQL kept here.

Every function takes an open ``Mirror`` and returns plain Python values or dicts of numpy
arrays (timestamps as ``datetime64[us]`` in UTC, NULL numbers as NaN), so callers never see
DuckDB.  Alarm levels (set by the user) and the alarm history (written by the analysis)
are what this module writes into the mirror; a sync never touches them.

Size: about 615 lines, because a rover's analysis reads its epochs, its alarm levels (with
their inheritance from groups and sites) and its alarm history together, one at a time or
by batch (issue 31); ``browse`` (the GUI's tables) and ``report_queries`` hold the rest.
"""

from __future__ import annotations

import json
from contextlib import contextmanager
from dataclasses import dataclass, field
from datetime import datetime, timezone

import duckdb
import numpy as np
import pyarrow as pa

from analysis.alarms import COMPONENT_MEANINGS, QUANTITIES
from devmon_sync.store.mirror import Mirror, StoreError

EPOCH_FIELDS = ("epoch_id", "ts", "lat", "lon", "eh", "oh", "sdn", "sde", "sdu", "q", "ns", "ar",
                "base_station_id", "de", "dn", "du", "ve", "vn", "vu")
# The alarm keys are the analysis' (``analysis.alarms``): what is stored is what it evaluates.
ALARM_QUANTITIES = QUANTITIES  # {quantity: unit}; alone, a key means the 3D length
ALARM_COMPONENTS = COMPONENT_MEANINGS  # {component besides 3d: meaning}
PARAMETER_QUANTITY = "parameter:"  # + a parameter uuid: levels on that parameter's values
ALARM_SCOPES = ("device", "site", "group")  # what levels are set on, most specific first


@dataclass(frozen=True)
class GnssDevice:
    """A GNSS rover as the mirror knows it: what an analysis needs besides its epochs."""

    serial_number: str
    display_name: str
    site_uuid: str | None
    site_name: str | None
    sensor_uuid: str | None
    azimuth_deg: float | None
    srid: int | None
    projections: list[dict] = field(default_factory=list)  # the solution's projectionMetadata
    events: list[dict] = field(default_factory=list)  # _internal.metadata.gnssEvents: type, at
    sampling_period_s: float | None = None
    site_timezone: str | None = None
    epochs: int = 0
    first: datetime | None = None
    last: datetime | None = None


def _columns(table: pa.Table) -> dict[str, np.ndarray]:
    """Arrow columns as numpy: timestamps as naive UTC datetime64[us], NULL numbers as NaN."""
    out = {}
    for name in table.column_names:
        col = table.column(name)
        if pa.types.is_timestamp(col.type):
            col = col.cast(pa.timestamp("us"))
            out[name] = col.to_numpy().astype("datetime64[us]")
        elif pa.types.is_integer(col.type) and col.null_count:
            out[name] = col.cast(pa.float64()).to_numpy()
        else:
            out[name] = col.to_numpy(zero_copy_only=False)
    return out


def gnss_devices(mirror: Mirror) -> list[GnssDevice]:
    """Every GNSS rover (base stations excluded) with its site, azimuth, projections and the
    span of its mirrored epochs (``stream_stats``), by serial number.  (Joining the epochs
    before counting them took 16 s at 100M readings.)"""
    rows = mirror.con.execute("""
        SELECT c.device_serial_number, coalesce(d.display_name, c.device_serial_number),
               d.site_uuid::VARCHAR, s.name, g.sensor_uuid::VARCHAR, c.azimuth_deg, g.srid,
               g.projection_metadata, coalesce(e.n, 0), e.t0, e.t1,
               d.raw->'$._internal.metadata.gnssEvents', d.sampling_period_s, s.timezone
        FROM device_gnss_config c
        LEFT JOIN devices d ON d.serial_number = c.device_serial_number
        LEFT JOIN sites s ON s.uuid = d.site_uuid
        LEFT JOIN gnss_solutions g ON g.device_serial_number = c.device_serial_number
        LEFT JOIN (SELECT key AS sensor_uuid, rows AS n, first_ts AS t0, last_ts AS t1
                   FROM stream_stats WHERE kind = 'gnss') e ON e.sensor_uuid = g.sensor_uuid
        WHERE NOT coalesce(c.is_base_station, false)
        ORDER BY 1, 5""").fetchall()
    return [GnssDevice(serial_number=r[0], display_name=r[1], site_uuid=r[2], site_name=r[3],
                       sensor_uuid=r[4], azimuth_deg=r[5], srid=r[6],
                       projections=json.loads(r[7]) if r[7] else [], epochs=r[8], first=r[9],
                       last=r[10], events=_events(r[11]), sampling_period_s=r[12],
                       site_timezone=r[13])
            for r in rows]


def _events(raw: str | None) -> list[dict]:
    """Known events of a device (antenna change, base-station switch), as the service's
    ``_internal.metadata.gnssEvents`` lists them; [] when it lists none or not a list."""
    events = json.loads(raw) if raw else []
    return [e for e in events if isinstance(e, dict)] if isinstance(events, list) else []


def serials_named(mirror: Mirror, text: str) -> list[str]:
    """The serial numbers of the devices ``text`` names: its serial number exactly, else
    every device whose serial number, display name, alias or name it is (in any case),
    sorted; [] when none."""
    if mirror._row("SELECT 1 FROM devices WHERE serial_number = ?", [text]):
        return [text]
    rows = mirror.con.execute(
        "SELECT serial_number FROM devices WHERE lower(serial_number) = lower(?) UNION "
        "SELECT serial_number FROM devices WHERE lower(?) IN (lower(display_name), "
        "lower(alias), lower(name)) ORDER BY 1", [text.strip(), text.strip()]).fetchall()
    return [r[0] for r in rows]


def resolve_serial(mirror: Mirror, text: str) -> str | None:
    """The serial number of the device ``text`` names (``serials_named``); None when none
    does.  A StoreError when several devices share that name (give the serial number)."""
    serials = serials_named(mirror, text)
    if len(serials) > 1:
        raise StoreError(f"{len(serials)} devices are named {text!r} in {mirror.path} "
                         f"({', '.join(serials)}): give the serial number")
    return serials[0] if serials else None


def gnss_device(mirror: Mirror, serial_number: str) -> GnssDevice:
    """One GNSS rover, by serial number or name in any case (``resolve_serial``); a
    StoreError naming the known ones when it is not in the mirror."""
    devices = gnss_devices(mirror)
    serial = resolve_serial(mirror, serial_number)
    for d in devices:
        if d.serial_number == serial:
            return d
    known = ", ".join(d.serial_number for d in devices[:12]) or "none"
    raise StoreError(f"No GNSS rover {serial_number!r} in {mirror.path} (rovers: {known}"
                     f"{', ...' if len(devices) > 12 else ''}). Check the serial number, or "
                     f"run `devmon sync` if the device is new.")


def gnss_epochs(mirror: Mirror, serial_number: str, start: datetime | None = None,
                end: datetime | None = None) -> dict[str, np.ndarray]:
    """The mirrored epochs of a rover in [start, end], in time order, as numpy columns
    (``EPOCH_FIELDS``: lat/lon in degrees, heights and displacements in metres, sigmas in
    metres, velocities in mm/day)."""
    table = mirror.con.sql(
        f"SELECT {', '.join(EPOCH_FIELDS)} FROM gnss_epochs WHERE device_serial_number = ? "
        "AND ts >= coalesce(?::TIMESTAMPTZ, '-infinity') "
        "AND ts <= coalesce(?::TIMESTAMPTZ, 'infinity') ORDER BY ts, epoch_id",
        params=[serial_number, start, end]).to_arrow_table()
    return _columns(table)


def gnss_epochs_of_devices(mirror: Mirror, serial_numbers: list[str],
                           start: datetime | None = None, end: datetime | None = None
                           ) -> dict[str, dict[str, np.ndarray]]:
    """``gnss_epochs`` of several rovers in one query: {serial: columns}, each as
    ``gnss_epochs`` gives it (an empty set of columns for a rover without epochs then).  One
    scan of gnss_epochs for them all, not one per rover (9 ms a rover of a 500-device world
    when each had its own: issue 31)."""
    table = mirror.con.sql(
        f"SELECT device_serial_number, {', '.join(EPOCH_FIELDS)} FROM gnss_epochs "
        "WHERE list_contains(?::VARCHAR[], device_serial_number) "
        "AND ts >= coalesce(?::TIMESTAMPTZ, '-infinity') "
        "AND ts <= coalesce(?::TIMESTAMPTZ, 'infinity') "
        "ORDER BY device_serial_number, ts, epoch_id",
        params=[list(serial_numbers), start, end]).to_arrow_table()
    serials = table.column(0).combine_chunks().dictionary_encode()
    table = table.drop_columns(["device_serial_number"])
    codes = serials.indices.to_numpy(zero_copy_only=False)
    edges = np.r_[0, np.flatnonzero(np.diff(codes)) + 1, len(codes)]
    names = serials.dictionary.to_pylist()
    out = {names[codes[a]]: _columns(table.slice(a, b - a))  # per rover: its own NULLs
           for a, b in zip(edges[:-1], edges[1:]) if b > a}
    none = _columns(table.slice(0, 0))
    return {sn: out.get(sn, none) for sn in serial_numbers}


def gnss_projected(mirror: Mirror, serial_number: str, projection_id: int,
                   start: datetime | None = None,
                   end: datetime | None = None) -> dict[str, np.ndarray]:
    """The service's projected coordinates (e, n, h in metres) of a rover's epochs in one
    projection, in time order."""
    table = mirror.con.sql(
        "SELECT p.epoch_id, p.ts, p.e, p.n, p.h FROM gnss_projected p "
        "JOIN gnss_solutions g ON g.sensor_uuid = p.sensor_uuid "
        "WHERE g.device_serial_number = ? AND p.projection_id = ? "
        "AND p.ts >= coalesce(?::TIMESTAMPTZ, '-infinity') "
        "AND p.ts <= coalesce(?::TIMESTAMPTZ, 'infinity') ORDER BY p.ts, p.epoch_id",
        params=[serial_number, projection_id, start, end]).to_arrow_table()
    return _columns(table)


# ----------------------------------------------------------------------------- alarm levels
#
# Levels are set on a device, a site or a device group (``alarm_level_settings``).  The
# ladder that applies to a device for a quantity is its own, else its groups' (the nearest:
# a group it is a member of before that group's parents; among groups equally near, the
# most cautious ladder, the one whose lowest threshold is lowest), else its site's.

def device_exists(mirror: Mirror, serial_number: str) -> bool:
    """Whether the mirror knows a device of that serial number."""
    return mirror._row("SELECT count(*) FROM devices WHERE serial_number = ?",
                       [serial_number])[0] > 0


def alarm_quantity(base: str, component: str | None = None) -> str:
    """The key of a quantity's levels: ``displacement`` (3D), ``velocity:vertical``, ..."""
    return base if component in (None, "", "3d") else f"{base}:{component}"


def split_alarm_quantity(quantity: str) -> tuple[str, str | None]:
    """(``displacement`` or ``velocity``, component or None for the 3D length) of a GNSS
    quantity key; a StoreError naming the valid keys for anything else (parameters too)."""
    base, _, component = quantity.partition(":")
    if base in ALARM_QUANTITIES and (not component or component in ALARM_COMPONENTS):
        return base, component or None
    raise StoreError(f"Unknown alarm quantity {quantity!r}: use one of "
                     f"{', '.join(ALARM_QUANTITIES)}, optionally followed by :COMPONENT "
                     f"({', '.join(ALARM_COMPONENTS)}), or {PARAMETER_QUANTITY}<parameter uuid>.")


@dataclass(frozen=True)
class AlarmScope:
    """What alarm levels are set on: a device (``scope_id`` its serial number), a site or a
    device group (``scope_id`` its uuid as text), with its name for people."""

    scope: str
    scope_id: str
    name: str

    def describe(self) -> str:
        """``device SN-1 (Rover 1)``, ``site Illgraben``, ``group Dam crest``."""
        if self.scope == "device":
            return f"device {self.scope_id}" + \
                (f" ({self.name})" if self.name != self.scope_id else "")
        return f"{self.scope} {self.name}"


def alarm_scope(mirror: Mirror, scope: str, text: str) -> AlarmScope:
    """The device (by serial number), site or group (by uuid or name, any case) ``text``
    names; a StoreError listing what exists when it names none, or several."""
    if scope == "device":
        row = mirror._row("SELECT serial_number, coalesce(nullif(display_name, ''), "
                          "serial_number) FROM devices WHERE serial_number = ?",
                          [resolve_serial(mirror, text) or text])
        if row is None:
            raise StoreError(f"no device {text!r} in {mirror.path}: check the serial number "
                             f"(`devmon status --db {mirror.path}` lists them)")
        return AlarmScope("device", row[0], row[1])
    if scope not in ALARM_SCOPES:
        raise StoreError(f"Unknown alarm scope {scope!r}: use one of {', '.join(ALARM_SCOPES)}.")
    from devmon_sync.store import report_queries

    places = report_queries.sites(mirror) if scope == "site" else report_queries.groups(mirror)
    needle = text.strip().casefold()
    hits = [p for p in places if p.uuid.casefold() == needle] or \
           [p for p in places if p.name.casefold() == needle]
    if len(hits) == 1:
        return AlarmScope(scope, hits[0].uuid, hits[0].name)
    if hits:
        raise StoreError(f"{len(hits)} {scope}s are named {text!r} in {mirror.path}: give the "
                         f"uuid of one ({'; '.join(p.uuid for p in hits)})")
    known = "; ".join(f"{p.name} ({p.uuid})" for p in places[:10]) or "none"
    more = ", ..." if len(places) > 10 else ""
    raise StoreError(f"no {scope} {text!r} in {mirror.path}: give a {scope} uuid or name "
                     f"({scope}s: {known}{more}), or run `devmon sync` if it is new")


# The ladder that applies to each asked device for each quantity, with where it comes from:
# candidates ranked by tier (0 the device, 1 + depth its groups, 1000 its site), then by
# the lowest threshold of the ladder (the most cautious), then by id (a stable choice).
_APPLIED_SQL = """
WITH RECURSIVE asked AS (SELECT DISTINCT unnest(?::VARCHAR[]) AS serial),
tree(serial, group_uuid, depth) AS (
    SELECT m.device_serial_number, m.group_uuid, 0 FROM device_group_members m
    WHERE m.device_serial_number IN (SELECT serial FROM asked)
    UNION ALL
    SELECT t.serial, g.parent_uuid, t.depth + 1 FROM tree t
    JOIN device_groups g ON g.uuid = t.group_uuid
    WHERE g.parent_uuid IS NOT NULL AND t.depth < 32),
candidates AS (
    SELECT serial, 'device' AS scope, serial AS scope_id, 0 AS tier FROM asked
    UNION ALL
    SELECT serial, 'group', group_uuid::VARCHAR, 1 + min(depth) FROM tree GROUP BY ALL
    UNION ALL
    SELECT a.serial, 'site', d.site_uuid::VARCHAR, 1000 FROM asked a
    JOIN devices d ON d.serial_number = a.serial WHERE d.site_uuid IS NOT NULL),
ladders AS (
    SELECT c.serial, s.quantity, c.scope, c.scope_id, c.tier, min(s.threshold) AS lowest
    FROM candidates c
    JOIN alarm_level_settings s ON s.scope = c.scope AND s.scope_id = c.scope_id
    GROUP BY c.serial, s.quantity, c.scope, c.scope_id, c.tier),
chosen AS (
    SELECT * FROM ladders QUALIFY row_number() OVER (
        PARTITION BY serial, quantity ORDER BY tier, lowest, scope_id) = 1)
SELECT c.serial, c.quantity, s.level, s.threshold, c.scope,
       coalesce(CASE c.scope WHEN 'site' THEN si.name WHEN 'group' THEN g.name END, c.scope_id)
FROM chosen c
JOIN alarm_level_settings s ON s.scope = c.scope AND s.scope_id = c.scope_id
    AND s.quantity = c.quantity
LEFT JOIN sites si ON c.scope = 'site' AND si.uuid = TRY_CAST(c.scope_id AS UUID)
LEFT JOIN device_groups g ON c.scope = 'group' AND g.uuid = TRY_CAST(c.scope_id AS UUID)
ORDER BY c.serial, c.quantity, s.threshold
"""


def _applied(mirror: Mirror, serial_numbers: list[str]
             ) -> dict[str, dict[str, tuple[str, dict[str, float]]]]:
    """{serial: {quantity: (source in words, {level: threshold} ascending)}} for every
    asked serial number (``{}`` when no level applies to it)."""
    out: dict[str, dict[str, tuple[str, dict[str, float]]]] = \
        {sn: {} for sn in serial_numbers}
    for serial, quantity, level, threshold, scope, name in mirror.con.execute(
            _APPLIED_SQL, [list(serial_numbers)]).fetchall():
        source = "device" if scope == "device" else f"{scope} {name}"
        out[serial].setdefault(quantity, (source, {}))[1][level] = threshold
    return out


def alarm_levels_of_devices(mirror: Mirror, serial_numbers: list[str]
                            ) -> dict[str, dict[str, dict[str, float]]]:
    """The levels that apply to each device, in one query: {serial: {quantity: {level:
    threshold}}} as ``alarm_levels`` gives for one (``{}`` for a device without any)."""
    return alarm_levels_and_sources(mirror, serial_numbers)[0]


def alarm_levels_and_sources(mirror: Mirror, serial_numbers: list[str]
                             ) -> tuple[dict[str, dict[str, dict[str, float]]],
                                        dict[str, dict[str, str]]]:
    """``alarm_levels`` and ``alarm_level_sources`` of each device, from one query:
    ({serial: levels}, {serial: sources})."""
    applied = _applied(mirror, list(serial_numbers))
    return ({sn: {q: levels for q, (_, levels) in per.items()} for sn, per in applied.items()},
            {sn: {q: source for q, (source, _) in per.items()} for sn, per in applied.items()})


def alarm_levels(mirror: Mirror, serial_number: str) -> dict[str, dict[str, float]]:
    """The alarm levels that apply to the device: {quantity: {level name: threshold}},
    thresholds ascending (displacement keys in mm, velocity keys in mm/day, a parameter's in
    its unit), each quantity's ladder its own, else its groups', else its site's (see
    ``alarm_level_sources``); empty when none apply."""
    return alarm_levels_of_devices(mirror, [serial_number])[serial_number]


def alarm_level_sources(mirror: Mirror, serial_number: str) -> dict[str, str]:
    """Where each of the device's levels (``alarm_levels``) comes from, in words:
    {quantity: "device" | "group <name>" | "site <name>"}."""
    return alarm_levels_and_sources(mirror, [serial_number])[1][serial_number]


def alarm_levels_set(mirror: Mirror, scope: str, scope_id: str
                     ) -> dict[str, dict[str, float]]:
    """The levels set on one device, site or group itself (not those it inherits):
    {quantity: {level: threshold}}, ascending; ``scope_id`` as in ``AlarmScope``."""
    out: dict[str, dict[str, float]] = {}
    for quantity, level, threshold in mirror.con.execute(
            "SELECT quantity, level, threshold FROM alarm_level_settings "
            "WHERE scope = ? AND scope_id = ? ORDER BY quantity, threshold",
            [scope, scope_id]).fetchall():
        out.setdefault(quantity, {})[level] = threshold
    return out


@contextmanager
def _writing(mirror: Mirror):
    """One transaction; a full disk or a dead file becomes the store's one message."""
    try:
        with mirror._transaction():
            yield
    except duckdb.Error as err:  # a full disk: the store's one message, not DuckDB's
        error = mirror._write_error(err)
        if error is None:
            raise
        raise error from None


def set_alarm_levels(mirror: Mirror, scope_id: str, quantity: str,
                     levels: dict[str, float], scope: str = "device") -> None:
    """Replace the levels of one quantity set on a device (``scope_id`` its serial number),
    a site or a group (``scope_id`` its uuid; see ``alarm_scope``); ``{}`` clears them.  One
    transaction.  Levels on a parameter are per device only.  The caller validates the
    levels (names, ascending positive thresholds)."""
    set_alarm_ladders(mirror, scope_id, {quantity: levels}, scope)


def set_alarm_ladders(mirror: Mirror, scope_id: str, ladders: dict[str, dict[str, float]],
                      scope: str = "device") -> None:
    """``set_alarm_levels`` for several quantities at once ({quantity: levels}, ``{}``
    clears one), all or nothing: one transaction."""
    resolved = [(quantity, *_ladder_target(mirror, scope, scope_id, quantity), levels)
                for quantity, levels in ladders.items()]
    now = datetime.now(timezone.utc)
    with _writing(mirror):
        for quantity, target_id, unit, levels in resolved:
            mirror.con.execute("DELETE FROM alarm_level_settings WHERE scope = ? AND "
                               "scope_id = ? AND quantity = ?", [scope, target_id, quantity])
            if levels:
                mirror.con.execute(
                    "INSERT INTO alarm_level_settings SELECT ?, ?, ?, unnest(?::VARCHAR[]), "
                    "unnest(?::DOUBLE[]), ?, ?",
                    [scope, target_id, quantity, list(levels),
                     [float(v) for v in levels.values()], unit, now])


def _ladder_target(mirror: Mirror, scope: str, scope_id: str, quantity: str
                   ) -> tuple[str, str]:
    """The scope id as stored and the unit of a quantity's thresholds there; a StoreError
    in words for an unknown scope, site or group, or a parameter outside a device."""
    if scope == "device":
        return scope_id, _alarm_unit(mirror, scope_id, quantity)
    if scope not in ("site", "group"):
        raise StoreError(f"Unknown alarm scope {scope!r}: use one of {', '.join(ALARM_SCOPES)}.")
    if quantity.startswith(PARAMETER_QUANTITY):
        raise StoreError(f"Levels on a parameter are set per device, not per {scope}: "
                         f"use --device with the parameter's device.")
    unit = ALARM_QUANTITIES[split_alarm_quantity(quantity)[0]]
    table = "sites" if scope == "site" else "device_groups"
    row = mirror._row(f"SELECT uuid::VARCHAR FROM {table} WHERE uuid = TRY_CAST(? AS UUID)",
                      [scope_id])
    if row is None:
        raise StoreError(f"no {scope} {scope_id!r} in {mirror.path}: give the uuid of a "
                         f"mirrored {scope}, or run `devmon sync` if it is new")
    return row[0], unit


def _alarm_unit(mirror: Mirror, serial_number: str, quantity: str) -> str:
    """The unit of a quantity's thresholds; a parameter's levels are in its own unit (the
    unit its mirrored values have) and it must belong to the device."""
    if quantity.startswith(PARAMETER_QUANTITY):
        row = mirror._row("SELECT coalesce(display_unit, base_unit, '') FROM parameters "
                          "WHERE uuid::VARCHAR = ? AND device_serial_number = ?",
                          [quantity[len(PARAMETER_QUANTITY):], serial_number])
        if row is None:
            raise StoreError(f"Device {serial_number} has no parameter "
                             f"{quantity[len(PARAMETER_QUANTITY):]!r}: check the uuid "
                             f"(the GUI's browser shows each parameter's).")
        return row[0]
    return ALARM_QUANTITIES[split_alarm_quantity(quantity)[0]]


def parameter_alarm_levels(mirror: Mirror, parameter_uuids: list[str]
                           ) -> dict[str, dict[str, float]]:
    """Alarm levels set on parameters' values: {uuid: {level: threshold}}, ascending, in
    each parameter's unit; parameters without levels are left out."""
    out: dict[str, dict[str, float]] = {}
    for quantity, level, threshold in mirror.con.execute(
            "SELECT quantity, level, threshold FROM alarm_level_settings WHERE scope = 'device' "
            "AND quantity IN (SELECT ? || unnest(?::VARCHAR[])) ORDER BY quantity, threshold",
            [PARAMETER_QUANTITY, list(parameter_uuids)]).fetchall():
        out.setdefault(quantity[len(PARAMETER_QUANTITY):], {})[level] = threshold
    return out


# ----------------------------------------------------------------------------- alarm history

#: The fields of one ``alarm_history`` row (besides the device), as ``replace_alarm_history``
#: takes them and ``alarm_history`` gives them back.  Times are UTC (aware datetimes out;
#: in, naive datetimes and numpy datetime64 are taken as UTC).
ALARM_HISTORY_FIELDS = ("quantity", "level", "level_rank", "threshold", "first_exceeded",
                        "last_exceeded", "exceeded_at_end", "peak_value", "unit", "reference",
                        "evaluated_until", "evaluated_at", "episodes")
_HISTORY_TIMES = ("first_exceeded", "last_exceeded", "evaluated_until", "evaluated_at")
_HISTORY_TYPES = {"quantity": pa.string(), "level": pa.string(), "level_rank": pa.int32(),
                  "episodes": pa.int32(),
                  "threshold": pa.float64(), "exceeded_at_end": pa.bool_(),
                  "peak_value": pa.float64(), "unit": pa.string(), "reference": pa.string(),
                  **{k: pa.timestamp("us", tz="UTC") for k in _HISTORY_TIMES}}


def _utc(value) -> datetime | None:
    """A time for the history: None/NaT stay None; naive (and datetime64) is UTC."""
    if value is None:
        return None
    if isinstance(value, np.datetime64):
        if np.isnat(value):
            return None
        value = value.astype("datetime64[us]").item()
    if not isinstance(value, datetime):
        raise ValueError(f"alarm history: a time must be a datetime or numpy datetime64, "
                         f"not {value!r}")
    return value.replace(tzinfo=timezone.utc) if value.tzinfo is None else \
        value.astimezone(timezone.utc)


def _number(value) -> float | None:
    return None if value is None or not np.isfinite(float(value)) else float(value)


def replace_alarm_history(mirror: Mirror, serial_number: str, rows: list[dict],
                          evaluation: dict | None = None) -> None:
    """Replace the device's alarm history with ``rows`` (one per quantity and level
    exceeded; keys among ``ALARM_HISTORY_FIELDS``, ``quantity`` and ``level`` required), in
    one transaction.  Left out: ``unit`` is the quantity's; ``threshold`` and
    ``level_rank`` (0 the lowest) are the level's in the ladder that applies now (None when
    it has no such level); ``evaluated_at`` is now.  A ValueError for a malformed row."""
    replace_alarm_histories(mirror, [(serial_number, rows, evaluation)])


def replace_alarm_histories(mirror: Mirror, histories: list[tuple[str, list[dict],
                                                                  dict | None]]) -> None:
    """``replace_alarm_history`` of several devices, (serial, rows, evaluation) each, in one
    transaction and a few statements (a batch of evaluated rovers: a transaction each cost
    12 ms a rover, more than its analysis; issue 31).  A device given twice: the last."""
    now = datetime.now(timezone.utc)
    histories = list({serial: (serial, rows, ev) for serial, rows, ev in histories}.values())
    serials = [serial for serial, _, _ in histories]
    # the ladders only when a row leaves its rank or threshold to them (an evaluation's
    # rows give both: no query then)
    ladders = alarm_levels_of_devices(mirror, serials) if any(
        "level_rank" not in row or "threshold" not in row
        for _, rows, _ in histories for row in rows) else {sn: {} for sn in serials}
    columns: dict[str, list] = {k: [] for k in ("device_serial_number",) + ALARM_HISTORY_FIELDS}
    for serial, rows, _ in histories:
        for values in _history_rows(mirror, serial, rows, ladders[serial], now):
            columns["device_serial_number"].append(serial)
            for key in ALARM_HISTORY_FIELDS:
                columns[key].append(values[key])
    table = pa.table({k: pa.array(v, type=_HISTORY_TYPES.get(k, pa.string()))
                      for k, v in columns.items()})
    evaluated = [(serial, ev) for serial, _, ev in histories if ev is not None]
    evaluations = pa.table({
        "device_serial_number": pa.array([sn for sn, _ in evaluated], pa.string()),
        "evaluated_until": pa.array([_utc(ev.get("evaluated_until")) for _, ev in evaluated],
                                    pa.timestamp("us", tz="UTC")),
        "evaluated_at": pa.array([now] * len(evaluated), pa.timestamp("us", tz="UTC")),
        "rule": pa.array([ev.get("rule") for _, ev in evaluated], pa.string()),
        "note": pa.array([ev.get("note") or "" for _, ev in evaluated], pa.string())})
    with _writing(mirror):
        mirror.con.execute("DELETE FROM alarm_history WHERE list_contains(?::VARCHAR[], "
                           "device_serial_number)", [serials])
        for name, rows, sql in (
                ("alarm_evaluation_rows", evaluations,
                 "INSERT OR REPLACE INTO alarm_evaluations SELECT * FROM alarm_evaluation_rows"),
                ("alarm_history_rows", table,
                 f"INSERT INTO alarm_history (device_serial_number, "
                 f"{', '.join(ALARM_HISTORY_FIELDS)}) SELECT * FROM alarm_history_rows")):
            if rows.num_rows:
                mirror.con.register(name, rows)
                try:
                    mirror.con.execute(sql)
                finally:
                    mirror.con.unregister(name)


def _history_rows(mirror: Mirror, serial_number: str, rows: list[dict],
                  ladders: dict[str, dict[str, float]], now: datetime) -> list[dict]:
    """One device's history rows checked and completed (``replace_alarm_history``)."""
    out, seen = [], set()
    for row in rows:
        unknown = set(row) - set(ALARM_HISTORY_FIELDS)
        if unknown or not row.get("quantity") or not row.get("level"):
            raise ValueError(f"alarm history row {row!r}: give quantity and level, and only "
                             f"fields among {', '.join(ALARM_HISTORY_FIELDS)}")
        quantity, level = str(row["quantity"]), str(row["level"])
        if (quantity, level) in seen:
            raise ValueError(f"alarm history: {quantity} {level} is given twice")
        seen.add((quantity, level))
        ladder = list(ladders.get(quantity, {}).items())
        names = [name for name, _ in ladder]
        rank = row.get("level_rank", names.index(level) if level in names else None)
        threshold = row.get("threshold", dict(ladder).get(level))
        unit = row.get("unit") or _alarm_unit(mirror, serial_number, quantity)
        values = {"quantity": quantity, "level": level, "level_rank": rank,
                  "threshold": _number(threshold), "peak_value": _number(row.get("peak_value")),
                  "exceeded_at_end": None if row.get("exceeded_at_end") is None
                  else bool(row["exceeded_at_end"]), "unit": unit,
                  "reference": None if row.get("reference") is None else str(row["reference"]),
                  "episodes": None if row.get("episodes") is None else int(row["episodes"]),
                  **{k: _utc(row.get(k)) for k in _HISTORY_TIMES}}
        values["evaluated_at"] = values["evaluated_at"] or now
        out.append(values)
    return out


def alarm_history(mirror: Mirror, serial_number: str) -> list[dict]:
    """The device's alarm history: one dict per quantity and level exceeded (keys
    ``ALARM_HISTORY_FIELDS``), by first exceedance, then quantity and ladder position."""
    return alarm_histories(mirror, [serial_number])[serial_number]


def alarm_histories(mirror: Mirror, serial_numbers: list[str]) -> dict[str, list[dict]]:
    """``alarm_history`` of each device, from one query: {serial: its rows} (``[]`` for a
    device without any)."""
    cursor = mirror.con.execute(
        f"SELECT device_serial_number, {', '.join(ALARM_HISTORY_FIELDS)} FROM alarm_history "
        f"WHERE device_serial_number IN (SELECT unnest(?::VARCHAR[])) "
        f"ORDER BY device_serial_number, first_exceeded NULLS LAST, quantity, level_rank, "
        f"level", [list(serial_numbers)])
    out: dict[str, list[dict]] = {sn: [] for sn in serial_numbers}
    for serial, *row in cursor.fetchall():
        out[serial].append(dict(zip(ALARM_HISTORY_FIELDS, row)))
    return out


def alarm_rule(mirror: Mirror) -> dict[str, float]:
    """The mirror's alarm rule as set with `devmon alarms --confidence/--min-duration`:
    {confidence, min_duration_hours} (only those set; empty: the analysis' defaults)."""
    row = mirror._row("SELECT confidence, min_duration_hours FROM alarm_rule WHERE id = 1")
    if row is None:
        return {}
    return {k: v for k, v in zip(("confidence", "min_duration_hours"), row) if v is not None}


def set_alarm_rule(mirror: Mirror, confidence: float | None = None,
                   min_duration_hours: float | None = None) -> None:
    """Set the rule's confidence and/or minimum duration (None keeps what is set); the
    caller validates the values (``analysis.alarms.AlarmRule``)."""
    with _writing(mirror):
        mirror.con.execute(
            "INSERT INTO alarm_rule VALUES (1, ?, ?, ?) ON CONFLICT (id) DO UPDATE SET "
            "confidence = coalesce(excluded.confidence, alarm_rule.confidence), "
            "min_duration_hours = coalesce(excluded.min_duration_hours, "
            "alarm_rule.min_duration_hours), set_at = excluded.set_at",
            [confidence, min_duration_hours, datetime.now(timezone.utc)])


def alarm_evaluation_due(mirror: Mirror, serial_numbers: list[str] | None = None, *,
                         only_stale: bool = True) -> list[str]:
    """GNSS rovers whose alarm history needs (re)evaluating: those with epochs and with
    displacement or velocity levels that apply to them, or with a stored history or
    evaluation (their levels may have gone); with ``only_stale``, only those never
    evaluated, with epochs newer than the last evaluation, or with levels set since.
    ``serial_numbers`` limits the answer to those (default: every rover)."""
    rovers = mirror.con.execute(  # newest epoch per rover from stream_stats, not a scan
        "SELECT g.device_serial_number, max(st.last_ts) FROM stream_stats st "
        "JOIN gnss_solutions g ON g.sensor_uuid = st.key "
        "WHERE st.kind = 'gnss' AND st.rows > 0 AND g.device_serial_number IS NOT NULL "
        "AND (?::VARCHAR[] IS NULL OR list_contains(?::VARCHAR[], g.device_serial_number)) "
        "GROUP BY 1 ORDER BY 1", [serial_numbers, serial_numbers]).fetchall()
    if not rovers:
        return []
    serials = [sn for sn, _ in rovers]
    levels = alarm_levels_of_devices(mirror, serials)
    known = dict(mirror.con.execute(
        "SELECT device_serial_number, evaluated_until FROM alarm_evaluations").fetchall())
    evaluated_at = dict(mirror.con.execute(
        "SELECT device_serial_number, evaluated_at FROM alarm_evaluations").fetchall())
    with_history = {sn for (sn,) in mirror.con.execute(
        "SELECT DISTINCT device_serial_number FROM alarm_history").fetchall()}
    newest_setting = mirror._row("SELECT max(set_at) FROM alarm_level_settings")[0]
    due = []
    for serial, last_ts in rovers:
        if not any(not q.startswith(PARAMETER_QUANTITY) for q in levels[serial]):
            if serial in with_history:  # its levels are gone: its history goes too
                due.append(serial)
            continue
        stale = (known.get(serial) is None or last_ts > known[serial]
                 or (newest_setting is not None and newest_setting > evaluated_at[serial]))
        if stale or not only_stale:
            due.append(serial)
    return due


def worst_alarm_levels(mirror: Mirror, serial_numbers: list[str] | None = None
                       ) -> dict[str, str]:
    """Per device, the most severe level still exceeded at the end of its last evaluation:
    {serial: level name}, the highest ladder position over every quantity (a tie: the
    first quantity by name).  Devices with none are left out; ``serial_numbers`` limits
    the answer to those devices (default: every device)."""
    return dict(mirror.con.execute(
        "SELECT device_serial_number, level FROM alarm_history WHERE exceeded_at_end "
        "AND (?::VARCHAR[] IS NULL OR list_contains(?::VARCHAR[], device_serial_number)) "
        "QUALIFY row_number() OVER (PARTITION BY device_serial_number "
        "ORDER BY level_rank DESC NULLS LAST, quantity, level) = 1 "
        "ORDER BY 1",
        [serial_numbers, serial_numbers]).fetchall())

"""Every read the desktop GUI makes: the device tree, groups, the device panel, site health,
time series for plots, "data as of" and GNSS positions for the plan view.

The GUI never writes SQL (the store owns it) and never sees DuckDB: each function takes a
``Mirror`` first (from a worker thread: ``mirror.for_thread()``) and returns dataclasses,
plain Python values or numpy arrays.  Single timestamps are UTC-aware ``datetime``; timestamp
columns are naive-UTC ``datetime64[us]`` arrays (as in ``queries``); NULL numbers are NaN.
Timestamp arguments are UTC-aware datetimes (naive ones are taken as UTC) or None for an
open end.  Nothing here depends on the connection's TimeZone setting, which a
``for_thread()`` cursor does not inherit.

Fields of GNSS sensors (lat, dE, vU, ...) are parameters in the service's metadata, but their
values are mirrored as epochs (``gnss_epochs``), not readings: every function here reads a
GNSS field's series from its epoch column, so a rover's parameters have counts and plots
like any other parameter's.

Size: about 1,250 lines, kept in one module because it is one consumer's read API (the GUI
asks only this module), each function one query, and they share the rules above (GNSS
fields read from epoch columns, time arguments, NaN for NULL) that a split would repeat.
"""

from __future__ import annotations

import json
import re
from collections.abc import Callable
from dataclasses import dataclass, replace
from datetime import datetime, timedelta, timezone

import numpy as np
import pyarrow as pa

from devmon_sync.timestamps import parse_timestamp
from devmon_sync.store.mirror import Mirror, StoreError
from devmon_sync.store import queries, summary
from devmon_sync.store.queries import _columns

NO_SITE = "No site"
MISSING_SENSOR = "Other parameters"
# parameterType of a GNSS sensor's parameter -> the gnss_epochs column holding its values
# (same unit: degrees, metres, mm/d).
GNSS_FIELDS = {
    "gnss_lat": "lat", "gnss_lon": "lon", "gnss_eh": "eh", "gnss_oh": "oh",
    "gnss_de": "de", "gnss_dn": "dn", "gnss_du": "du", "gnss_d2d": "d2d", "gnss_d3d": "d3d",
    "gnss_ve": "ve", "gnss_vn": "vn", "gnss_vu": "vu", "gnss_roll": "roll",
    "gnss_pitch": "pitch",
}
_GNSS_TYPES = ", ".join(f"'{t}'" for t in GNSS_FIELDS)  # a constant SQL list, no user text
_IN_RANGE = ("ts BETWEEN coalesce($start::TIMESTAMPTZ, '-infinity') "
             "AND coalesce($end::TIMESTAMPTZ, 'infinity')")


def _display(table: str, fallback: str) -> str:
    """The spec's display name rule (alias, else name, else ``fallback``) as SQL; an empty
    text counts as unset, as it does for the sync's ``devices.display_name``."""
    return f"coalesce(nullif({table}.alias, ''), nullif({table}.name, ''), {fallback})"


# --------------------------------------------------------------------------- small helpers

def _utc(value: datetime | None) -> datetime | None:
    """A datetime as UTC-aware (naive taken as UTC); None stays None.  Applied to arguments
    before DuckDB sees them (a naive value would be read in the session's time zone) and to
    single values it returns (a thread's cursor answers in the machine's time zone)."""
    if value is None:
        return None
    if value.tzinfo is None:
        return value.replace(tzinfo=timezone.utc)
    return value.astimezone(timezone.utc)


def _records(mirror: Mirror, sql: str, params: list | dict | None = None) -> list[dict]:
    """Rows as dicts by column name, read to the end (see ``Mirror._row``)."""
    result = mirror.con.execute(sql, params or [])
    names = [d[0] for d in result.description]
    return [dict(zip(names, row)) for row in result.fetchall()]


def _json(text: str | None):
    """A JSON value from the mirror (None for SQL NULL or text that does not parse)."""
    if text is None:
        return None
    try:
        return json.loads(text)
    except ValueError:
        return None


def _text(value) -> str | None:
    return value if isinstance(value, str) and value else None


def _number(value) -> float | None:
    return float(value) if isinstance(value, (int, float)) and not isinstance(value, bool) \
        else None


def _timestamp(value) -> datetime | None:
    """A timestamp from raw JSON (ISO 8601 with an offset); None when absent or malformed."""
    try:
        return parse_timestamp(value)
    except ValueError:
        return None


def _dig(obj, *path):
    """``obj[path[0]][path[1]]...``; None as soon as a level is missing or not an object."""
    for key in path:
        if not isinstance(obj, dict):
            return None
        obj = obj.get(key)
    return obj


def _list(value) -> list:
    return value if isinstance(value, list) else []


def _obj(value) -> dict:
    return value if isinstance(value, dict) else {}


def natural_key(text: str) -> str:
    """A sort key ordering names as people count (``P2`` before ``P10``: each run of digits
    zero-padded), case ignored.  Text, so that a Qt sort role can hold it as well."""
    return re.sub(r"\d+", lambda m: m.group().zfill(12), text.casefold())


def _severity_then_name(rank: int | None, name: str, serial: str) -> tuple:
    """The order a monitoring desk reads points in: the most severe level first (``rank``:
    the level's place in its ladder, None or -1 below every level), then by name as people
    count (P2 before P10)."""
    return (-(rank if rank is not None else -1), natural_key(name), serial)


def _bool(value) -> bool | None:
    return value if isinstance(value, bool) else None


# =========================================================================== device tree

@dataclass(frozen=True)
class ParameterNode:
    """A leaf of the device tree: one plottable series."""

    uuid: str
    name: str  # alias, else name
    unit: str | None  # display unit, else base unit
    parameter_type: str | None
    source_type: str | None  # raw or derived
    readings: int  # rows in the mirror (faulty points included); GNSS fields: epochs
    first: datetime | None
    last: datetime | None


@dataclass(frozen=True)
class SensorNode:
    uuid: str | None  # None: the pseudo-sensor holding parameters whose sensor is unknown
    name: str  # alias, else name, else type
    type: str | None
    is_active: bool | None
    parameters: tuple[ParameterNode, ...]
    deleted_at: datetime | None = None  # when a sync found it deleted upstream; archive kept

    @property
    def archived_points(self) -> int:
        """Readings (or, for a GNSS sensor, epochs) the mirror keeps of its busiest field."""
        return max((p.readings for p in self.parameters), default=0)


def deleted_upstream_label(deleted_at: datetime) -> str:
    """``deleted upstream 2026-11-20, archive kept``: how the GUI and the report label a
    sensor the service no longer lists, so a person knows why it gets no new data and that
    its old data are still shown (the UTC day a sync noticed it gone)."""
    return f"deleted upstream {_utc(deleted_at).date().isoformat()}, archive kept"


def removed_upstream_label(removed_at: datetime) -> str:
    """``removed upstream 2026-11-20, archive kept``: how the GUI labels a device the service
    no longer lists (decommissioned, or moved out of the key's reach), so a person knows why
    it gets no new data and that its old data are still shown (the UTC day a sync noticed)."""
    return f"removed upstream {_utc(removed_at).date().isoformat()}, archive kept"


@dataclass(frozen=True)
class DeviceNode:
    serial_number: str
    display_name: str  # alias, else name, else serial number (spec 2.2)
    alias: str | None
    name: str | None
    device_kind: str | None
    state: str | None
    connection_status: str | None
    tags: tuple[str, ...]  # tag names
    is_gnss_rover: bool  # a GNSS configuration that solves positions (not a base station)
    is_gnss_base: bool
    site_uuid: str | None
    sensors: tuple[SensorNode, ...]
    removed_at: datetime | None = None  # when a sync found it no longer listed; archive kept

    @property
    def archived_points(self) -> int:
        """Points the mirror keeps of it: each sensor's busiest field's, summed."""
        return sum(s.archived_points for s in self.sensors)


@dataclass(frozen=True)
class SiteNode:
    uuid: str | None  # None: the "No site" node of devices assigned to no site
    name: str
    timezone: str | None
    devices: tuple[DeviceNode, ...]


def device_tree(mirror: Mirror) -> list[SiteNode]:
    """Sites -> devices -> sensors -> parameters, with each parameter's reading count and
    span, for the GUI's navigation tree.  Four queries whatever the size of the mirror (one
    aggregate pass over readings and epochs), so it stays fast with hundreds of devices.

    Sites and devices are sorted by name (case-insensitive), devices without a site come last
    under a "No site" node (uuid None); sensors follow their channel index and parameters
    their read index, the order the device reads them.  A site holding no device is kept."""
    parameters = _tree_parameters(mirror)
    sensors = _tree_sensors(mirror, parameters)
    devices = _tree_devices(mirror, sensors)
    return _tree_sites(mirror, devices)


def _tree_parameters(mirror: Mirror) -> dict[tuple[str, str | None], list[ParameterNode]]:
    """Parameter nodes by (device serial number, sensor uuid), the sensor None when it is
    not mirrored; in read order."""
    rows = mirror.con.execute(f"""
        WITH {_stats_ctes()}
        SELECT p.uuid::VARCHAR AS uuid, p.device_serial_number AS serial,
               s.uuid::VARCHAR AS sensor_uuid, {_display('p', 'p.uuid::VARCHAR')} AS name,
               coalesce(nullif(p.display_unit, ''), p.base_unit) AS unit,
               p.parameter_type, p.source_type, st.n, st.t0, st.t1
        FROM parameters p
        JOIN pstats st ON st.uuid = p.uuid
        LEFT JOIN sensors s ON s.uuid = p.sensor_uuid
        ORDER BY p.device_serial_number, p.read_index NULLS LAST, name, p.uuid""").fetchall()
    out: dict = {}
    for uuid, serial, sensor, name, unit, ptype, source, n, t0, t1 in rows:
        node = ParameterNode(uuid, name, unit, ptype, source, int(n), _utc(t0), _utc(t1))
        out.setdefault((serial, sensor), []).append(node)
    return out


#: CTEs ``rstats(parameter_uuid, n, t0, t1)`` and ``estats(sensor_uuid, device_serial_number,
#: n, t0, t1)``: rows and time span of each parameter's readings and each GNSS sensor's
#: epochs, from ``stream_stats`` (kept by every commit) instead of a scan of the data.
STREAM_CTES = """
        rstats AS (SELECT key AS parameter_uuid, rows AS n, first_ts AS t0, last_ts AS t1
                   FROM stream_stats WHERE kind = 'readings'),
        estats AS (SELECT st.key AS sensor_uuid, g.device_serial_number, st.rows AS n,
                          st.first_ts AS t0, st.last_ts AS t1
                   FROM stream_stats st JOIN gnss_solutions g ON g.sensor_uuid = st.key
                   WHERE st.kind = 'gnss')"""


def _stats_ctes(readings_where: str = "TRUE", epochs_where: str = "TRUE") -> str:
    """CTEs ending in ``pstats(uuid, gnss_type, n, t0, t1)``: per parameter its rows in the
    mirror and their first and last time, from readings, or from the epochs of its sensor
    for a GNSS field (``stream_stats``: no scan of the data).  The filters narrow them (e.g.
    to one device)."""
    return f"""
        {STREAM_CTES},
        rs AS (SELECT * FROM rstats WHERE {readings_where}),
        es AS (SELECT * FROM estats WHERE {epochs_where}),
        src AS (SELECT p.uuid, p.sensor_uuid,
                       CASE WHEN g.sensor_uuid IS NOT NULL
                            AND lower(p.parameter_type) IN ({_GNSS_TYPES})
                            THEN lower(p.parameter_type) END AS gnss_type
                FROM parameters p LEFT JOIN gnss_solutions g ON g.sensor_uuid = p.sensor_uuid),
        pstats AS (
            SELECT src.uuid, src.gnss_type,
                   coalesce(CASE WHEN src.gnss_type IS NULL THEN rs.n ELSE es.n END, 0) AS n,
                   CASE WHEN src.gnss_type IS NULL THEN rs.t0 ELSE es.t0 END AS t0,
                   CASE WHEN src.gnss_type IS NULL THEN rs.t1 ELSE es.t1 END AS t1
            FROM src LEFT JOIN rs ON rs.parameter_uuid = src.uuid
            LEFT JOIN es ON es.sensor_uuid = src.sensor_uuid)"""


def _tree_sensors(mirror: Mirror, parameters: dict) -> dict[str, list[SensorNode]]:
    """Sensor nodes by device serial number, each holding its parameter nodes; parameters
    whose sensor is not mirrored go under a pseudo-sensor, so none is lost."""
    rows = mirror.con.execute(f"""
        SELECT uuid::VARCHAR, device_serial_number, {_display('sensors', 'type')} AS name,
               type, is_active, deleted_at
        FROM sensors ORDER BY device_serial_number, channel_index NULLS LAST, name, uuid
        """).fetchall()
    out: dict[str, list[SensorNode]] = {}
    for uuid, serial, name, stype, active, deleted_at in rows:
        params = tuple(parameters.pop((serial, uuid), ()))
        out.setdefault(serial, []).append(SensorNode(uuid, name or "sensor", stype, active,
                                                     params, _utc(deleted_at)))
    for (serial, _), params in sorted(parameters.items(), key=lambda kv: kv[0][0]):
        out.setdefault(serial, []).append(SensorNode(None, MISSING_SENSOR, None, None,
                                                     tuple(params)))
    return out


def _tree_devices(mirror: Mirror, sensors: dict) -> list[DeviceNode]:
    rows = mirror.con.execute(f"""
        SELECT d.serial_number, {_display('d', 'd.serial_number')} AS label, d.alias,
               d.name, d.device_kind, d.state, d.connection_status,
               coalesce(json_extract_string(d.raw, '$.tags[*].name'), []) AS tags,
               c.device_serial_number IS NOT NULL AND NOT coalesce(c.is_base_station, false),
               coalesce(c.is_base_station, false), d.site_uuid::VARCHAR, d.removed_at
        FROM devices d LEFT JOIN device_gnss_config c ON c.device_serial_number = d.serial_number
        ORDER BY lower(label), d.serial_number""").fetchall()
    return [DeviceNode(sn, name, alias, nm, kind, state, status,
                       tuple(t for t in tags if t is not None), rover, base, site,
                       tuple(sensors.get(sn, ())), _utc(removed))
            for sn, name, alias, nm, kind, state, status, tags, rover, base, site, removed
            in rows]


def _tree_sites(mirror: Mirror, devices: list[DeviceNode]) -> list[SiteNode]:
    """Site nodes holding their devices; a device whose site the mirror does not hold (the
    key may see a device but not its site) gets a node named as the device names it."""
    sites = {uuid: (name or uuid, tz) for uuid, name, tz in mirror.con.execute(
        "SELECT uuid::VARCHAR, name, timezone FROM sites").fetchall()}
    for uuid, name in mirror.con.execute(
            "SELECT DISTINCT site_uuid::VARCHAR, raw->>'$.site.name' FROM devices "
            "WHERE site_uuid IS NOT NULL AND site_uuid NOT IN (SELECT uuid FROM sites)"
            ).fetchall():
        sites.setdefault(uuid, (name or uuid, None))
    members: dict[str | None, list[DeviceNode]] = {}
    for d in devices:
        members.setdefault(d.site_uuid, []).append(d)
    nodes = sorted((SiteNode(uuid, name, tz, tuple(members.get(uuid, ())))
                    for uuid, (name, tz) in sites.items()),
                   key=lambda s: (s.name.casefold(), s.uuid))
    if members.get(None):
        nodes.append(SiteNode(None, NO_SITE, None, tuple(members[None])))
    return nodes


def matches(device: DeviceNode, text: str) -> bool:
    """Whether the tree's filter box text matches the device: a case-insensitive substring
    of its serial number, alias, name or one of its tag names (empty text matches all)."""
    needle = text.strip().casefold()
    if not needle:
        return True
    haystack = (device.serial_number, device.alias or "", device.name or "", *device.tags)
    return any(needle in item.casefold() for item in haystack)


def filter_tree(sites: list[SiteNode], text: str) -> list[SiteNode]:
    """The tree with only the devices ``matches`` keeps, and only the sites still holding
    one (all of it for empty text), so the GUI filters without asking the store again."""
    if not text.strip():
        return list(sites)
    kept = [replace(s, devices=tuple(d for d in s.devices if matches(d, text))) for s in sites]
    return [s for s in kept if s.devices]


# =========================================================================== device groups

@dataclass(frozen=True)
class GroupNode:
    uuid: str
    name: str
    description: str | None
    parent_uuid: str | None  # as mirrored; None for a root, also one made root (see below)
    children: tuple[GroupNode, ...]
    members: tuple[str, ...]  # serial numbers of the devices directly in this group


@dataclass(frozen=True)
class GroupTree:
    roots: tuple[GroupNode, ...]
    ungrouped: tuple[str, ...]  # serial numbers of the devices in no group


def group_tree(mirror: Mirror) -> GroupTree:
    """Device groups nested by ``parent_uuid`` with their member devices, and the devices in
    no group, for the GUI's "Groups" view.  A group whose parent is not mirrored becomes a
    root, and a parent cycle (never valid, but the data is the service's) is broken at its
    first group by name, so every group appears exactly once.  Sorted by name; members are
    devices of the mirror only, by display name."""
    groups = {r["uuid"]: r for r in _records(mirror, """
        SELECT uuid::VARCHAR AS uuid, coalesce(name, uuid::VARCHAR) AS name, description,
               parent_uuid::VARCHAR AS parent_uuid FROM device_groups""")}
    members: dict[str, list[str]] = {}
    for group, serial in mirror.con.execute(f"""
            SELECT m.group_uuid::VARCHAR, d.serial_number
            FROM device_group_members m JOIN devices d ON d.serial_number = m.device_serial_number
            ORDER BY lower({_display('d', 'd.serial_number')}), d.serial_number""").fetchall():
        members.setdefault(group, []).append(serial)
    parent = _effective_parents(groups)
    children: dict[str | None, list[str]] = {}
    for uuid in sorted(groups, key=lambda u: (groups[u]["name"].casefold(), u)):
        children.setdefault(parent[uuid], []).append(uuid)

    def node(uuid: str) -> GroupNode:
        g = groups[uuid]
        return GroupNode(uuid, g["name"], g["description"], g["parent_uuid"],
                         tuple(node(c) for c in children.get(uuid, ())),
                         tuple(members.get(uuid, ())))

    grouped = {s for serials in members.values() for s in serials}
    ungrouped = [sn for (sn,) in mirror.con.execute(
        f"SELECT serial_number FROM devices d ORDER BY lower({_display('d', 'serial_number')}), "
        "serial_number").fetchall() if sn not in grouped]
    return GroupTree(tuple(node(u) for u in children.get(None, ())), tuple(ungrouped))


def _effective_parents(groups: dict[str, dict]) -> dict[str, str | None]:
    """Each group's parent for display: None when missing or itself; in a cycle, the group
    first by name loses its parent, which makes the cycle a tree under it."""
    parent = {u: g["parent_uuid"] if g["parent_uuid"] in groups and g["parent_uuid"] != u
              else None for u, g in groups.items()}
    for start in sorted(groups):
        path, at = [], start
        while at is not None and at not in path:
            path.append(at)
            at = parent[at]
        if at is not None:  # walked back onto the path: a cycle
            cycle = path[path.index(at):]
            parent[min(cycle, key=lambda u: (groups[u]["name"].casefold(), u))] = None
    return parent


# =========================================================================== device panel

@dataclass(frozen=True)
class Modem:
    type: str | None  # lte, unknown, or a satellite modem kind
    model: str | None
    imei: str | None
    iccid: str | None
    uuid: str | None


@dataclass(frozen=True)
class Tag:
    name: str
    colour: str | None


@dataclass(frozen=True)
class QueuedCommand:
    uuid: str | None
    status: str | None  # processing or queued (spec 3.2)
    created_at: datetime | None


@dataclass(frozen=True)
class GnssConfig:
    processing_mode: str | None  # static or kinematic
    antenna_type: str | None
    arp_height_m: float | None
    azimuth_deg: float | None
    lever_arm_compensation: bool | None
    is_base_station: bool
    base_station_id: int | None
    base_station_type: str | None  # cors, private, device
    base_station_name: str | None
    base_station_status: str | None  # active, inactive, no_data


@dataclass(frozen=True)
class DeviceDetails:
    """Everything the device panel shows, as the last sync found it."""

    serial_number: str
    display_name: str
    alias: str | None
    name: str | None
    description: str | None
    device_kind: str | None
    state: str | None
    connection_status: str | None
    last_seen: datetime | None
    next_tx: datetime | None  # estimated next scheduled transmission
    last_tx: datetime | None
    last_data: datetime | None  # newest data point the service received
    sampling_period_s: float | None
    tx_period_s: float | None
    battery_pct: float | None
    battery_voltage_v: float | None
    battery_remaining: str | None  # the service's estimate, text (e.g. "12 months")
    battery_is_charging: bool | None
    power_source: str | None  # battery, external
    signal_quality: str | None  # no_signal, weak, ok, good (older "no signal" normalised)
    rssi_dbm: float | None
    rsrp_dbm: float | None
    rsrq_db: float | None
    tx_success_rate_pct: float | None
    tx_protocol: str | None  # coap, mqtt
    lte_tx_mode: str | None  # terrestrial, satellite
    connection_error: str | None
    metadata_error: str | None
    faults: tuple[str, ...]  # parameter faults, sensor errors and the metadata error, readable
    sensor_warnings: tuple[str, ...]
    product: str | None
    hardware_model: str | None
    hardware_revision: str | None
    firmware_version: str | None
    firmware: str | None  # the firmware's full version string
    modems: tuple[Modem, ...]
    tags: tuple[Tag, ...]
    queued_command: QueuedCommand | None
    gnss: GnssConfig | None
    site_uuid: str | None
    site_name: str | None
    site_timezone: str | None
    lat: float | None
    lon: float | None
    readings_in_mirror: int
    epochs_in_mirror: int
    last_reading: datetime | None  # newest reading or epoch in the mirror
    # the most severe alarm level reached now (the stored evaluation, ``alarm_history``), its
    # place in its ladder (0 the mildest) and the level key that reached it; None: none
    alarm_level: str | None = None
    alarm_rank: int | None = None
    alarm_quantity: str | None = None


#: The most severe level each device is at now (its last evaluation), with its place in its
#: ladder and the key that reached it: one row per device at a level.
_LEVEL_NOW = """SELECT device_serial_number AS sn,
                       arg_max(level, coalesce(level_rank, -1)) AS alarm_level,
                       max(coalesce(level_rank, -1)) AS alarm_rank,
                       arg_max(quantity, coalesce(level_rank, -1)) AS alarm_quantity
                FROM alarm_history WHERE exceeded_at_end GROUP BY 1"""


def device_details(mirror: Mirror, serial_number: str) -> DeviceDetails:
    """The device panel's content for one device: typed columns where the mirror has them,
    the rest from the device's JSON as the service sent it (tolerating missing keys and the
    older schema variant).  A StoreError naming the serial number when it is not mirrored."""
    rows = _records(mirror, f"""
        WITH {_stats_ctes('parameter_uuid IN (SELECT uuid FROM parameters '
                          'WHERE device_serial_number = $sn)',
                          'device_serial_number = $sn')},
        mine AS (SELECT sum(pstats.n) FILTER (WHERE gnss_type IS NULL) AS readings,
                        max(pstats.t1) AS last_reading
                 FROM pstats JOIN parameters p ON p.uuid = pstats.uuid
                 WHERE p.device_serial_number = $sn)
        SELECT d.*, {_display('d', 'd.serial_number')} AS display, d.site_uuid::VARCHAR AS site,
               coalesce(s.name, d.raw->>'$.site.name') AS site_name, s.timezone AS site_timezone,
               c.processing_mode, c.antenna_type, c.arp_height_m, c.azimuth_deg,
               c.lever_arm_compensation, c.is_base_station, c.base_station_id,
               c.base_station_type, c.base_station_name, c.raw AS gnss_raw,
               c.device_serial_number IS NOT NULL AS has_gnss,
               coalesce(mine.readings, 0) AS readings_in_mirror,
               (SELECT coalesce(sum(n), 0) FROM es) AS epochs_in_mirror,
               greatest(mine.last_reading, (SELECT max(t1) FROM es)) AS last_reading,
               (SELECT list({{'sensor': {_display('x', 'x.type')},
                              'health': x.raw->'$.health'}} ORDER BY x.channel_index)
                FROM sensors x WHERE x.device_serial_number = $sn) AS sensor_health,
               al.alarm_level, al.alarm_rank, al.alarm_quantity
        FROM devices d
        LEFT JOIN sites s ON s.uuid = d.site_uuid
        LEFT JOIN device_gnss_config c ON c.device_serial_number = d.serial_number
        LEFT JOIN ({_LEVEL_NOW}) al ON al.sn = d.serial_number
        CROSS JOIN mine
        WHERE d.serial_number = $sn""", {"sn": serial_number})
    if not rows:
        raise StoreError(f"No device {serial_number!r} in {mirror.path}. Check the serial "
                         f"number, or run `devmon sync` if the device is new.")
    return _details(rows[0])


def _details(r: dict) -> DeviceDetails:
    raw = _obj(_json(r["raw"]))
    health = _obj(raw.get("health"))
    connection = _obj(health.get("connection"))
    strength = _obj(connection.get("signalStrength"))
    sensors = [(s["sensor"], _json(s["health"])) for s in r["sensor_health"] or ()]
    return DeviceDetails(
        serial_number=r["serial_number"], display_name=r["display"], alias=r["alias"],
        name=r["name"], description=r["description"], device_kind=r["device_kind"],
        state=r["state"], connection_status=r["connection_status"],
        last_seen=_utc(r["last_seen"]), next_tx=_utc(r["next_tx"]),
        last_tx=_timestamp(raw.get("lastTxTimestamp")), last_data=_utc(r["last_data"]),
        sampling_period_s=r["sampling_period_s"], tx_period_s=r["tx_period_s"],
        battery_pct=r["battery_percentage"], battery_voltage_v=r["battery_voltage"],
        battery_remaining=_text(_dig(health, "battery", "remaining")),
        battery_is_charging=_bool(_dig(health, "battery", "isCharging")),
        power_source=r["power_source"],
        signal_quality=_signal_quality(r["signal_quality"] or strength.get("signalQuality")
                                       or connection.get("signalQuality")),
        rssi_dbm=_number(strength.get("rssi")), rsrp_dbm=_number(strength.get("rsrp")),
        rsrq_db=_number(strength.get("rsrq")), tx_success_rate_pct=r["tx_success_rate"],
        tx_protocol=_text(connection.get("txProtocol")),
        lte_tx_mode=_text(connection.get("lteTxMode")),
        connection_error=_error_text(connection.get("error")),
        metadata_error=_metadata_error(health),
        faults=tuple(_faults(health, sensors)), sensor_warnings=tuple(_warnings(sensors)),
        product=r["product"], hardware_model=r["hardware_model"],
        hardware_revision=_text(_dig(raw, "hardware", "revision")),
        firmware_version=r["firmware_version"], firmware=_text(_dig(raw, "firmware", "string")),
        modems=tuple(_modem(m) for m in _list(raw.get("modems")) if isinstance(m, dict)),
        tags=tuple(Tag(str(t.get("name")), _text(t.get("colour")))
                   for t in _list(raw.get("tags")) if isinstance(t, dict) and t.get("name")),
        queued_command=_queued(raw.get("queuedCommand")),
        gnss=_gnss(r) if r["has_gnss"] else None,
        site_uuid=r["site"], site_name=r["site_name"], site_timezone=r["site_timezone"],
        lat=r["lat"], lon=r["lon"], readings_in_mirror=int(r["readings_in_mirror"]),
        epochs_in_mirror=int(r["epochs_in_mirror"]), last_reading=_utc(r["last_reading"]),
        alarm_level=r["alarm_level"], alarm_rank=r["alarm_rank"],
        alarm_quantity=r["alarm_quantity"])


def _signal_quality(value) -> str | None:
    """The current enum (``no_signal``...); the older variant's ``no signal`` normalised."""
    return value.strip().replace(" ", "_") if isinstance(value, str) and value.strip() else None


def _error_text(error) -> str | None:
    """``{code, message}`` (spec 2.2.1) as "message (code 408)"; None for no error."""
    if not isinstance(error, dict):
        return _text(error)
    message, code = _text(error.get("message")), error.get("code")
    if message is None and code is None:
        return None
    return f"{message or 'error'} (code {code})" if code is not None else message


def _metadata_error(health: dict) -> str | None:
    """``health.sensors.metadataError``, or the older variant's single ``error``."""
    sensors = _obj(health.get("sensors"))
    return _error_text(sensors.get("metadataError")) or _error_text(sensors.get("error"))


def _faults(health: dict, sensors: list[tuple[str, dict | None]]) -> list[str]:
    """Readable lines for every problem the device reports about its sensors: each
    parameter fault of the last transmission, each sensor's health errors, the metadata
    error (or the older variant's single error)."""
    lines = []
    for item in _list(_dig(health, "sensors", "errors")):
        sensor = _text(_dig(item, "sensorAlias")) or "sensor"
        for fault in _list(_dig(item, "parameterFaults")):
            said = _obj(_dig(fault, "summary"))
            what = _text(said.get("message")) or _text(said.get("reason")) or "fault"
            reason = _text(said.get("reason"))
            lines.append(f"{sensor} / {_text(_dig(fault, 'parameterAlias')) or 'parameter'}: "
                         f"{what}" + (f" ({reason})" if reason and reason not in what else ""))
    for sensor, sensor_health in sensors:
        lines += [f"{sensor}: {e}" for e in _list(_dig(sensor_health, "errors")) if e]
    metadata = _metadata_error(health)
    return lines + ([f"Metadata error: {metadata}"] if metadata else [])


def _warnings(sensors: list[tuple[str, dict | None]]) -> list[str]:
    return [f"{sensor}: {w}" for sensor, h in sensors for w in _list(_dig(h, "warnings")) if w]


def _modem(m: dict) -> Modem:
    return Modem(_text(m.get("type")), _text(m.get("model")), _text(m.get("imei")),
                 _text(m.get("iccid")), _text(m.get("uuid")))


def _queued(command) -> QueuedCommand | None:
    if not isinstance(command, dict):
        return None
    return QueuedCommand(_text(command.get("uuid")), _text(command.get("status")),
                         _timestamp(command.get("createdAt")))


def _gnss(r: dict) -> GnssConfig:
    raw = _json(r["gnss_raw"]) or {}
    return GnssConfig(
        processing_mode=r["processing_mode"], antenna_type=r["antenna_type"],
        arp_height_m=r["arp_height_m"], azimuth_deg=r["azimuth_deg"],
        lever_arm_compensation=r["lever_arm_compensation"],
        is_base_station=bool(r["is_base_station"]), base_station_id=r["base_station_id"],
        base_station_type=r["base_station_type"], base_station_name=r["base_station_name"],
        base_station_status=_text(_dig(raw, "baseStation", "status")))


# =========================================================================== site health

HEALTH_COLUMNS = (
    ("display_name", "Device"), ("serial_number", "Serial number"), ("device_kind", "Kind"),
    ("state", "State"), ("connection_status", "Connection"), ("alarm_level", "Alarm level"),
    ("last_seen", "Last seen (UTC)"), ("next_tx", "Next transmission (UTC)"),
    ("battery_pct", "Battery (%)"), ("power_source", "Power source"),
    ("signal_quality", "Signal"), ("tx_success_rate_pct", "Tx success (%)"),
    ("faults", "Faults"), ("last_reading", "Last reading (UTC)"),
    ("readings_in_mirror", "Readings in mirror"), ("epochs_in_mirror", "GNSS epochs in mirror"),
)


@dataclass(frozen=True)
class HealthTable:
    """A table model: ``rows`` of plain values in the order of ``keys`` (identifiers with
    units) and ``labels`` (headers with units).  Times are UTC-aware datetimes; ``faults``
    counts what ``device_details(...).faults`` lists."""

    keys: tuple[str, ...]
    labels: tuple[str, ...]
    rows: list[list]
    #: per row, the place of its ``alarm_level`` in its ladder (0 the mildest; None: at no
    #: level): what orders the rows by severity and colours them
    alarm_ranks: tuple = ()

    def column(self, key: str) -> list:
        """One column's values, top to bottom."""
        at = self.keys.index(key)
        return [row[at] for row in self.rows]


def site_health(mirror: Mirror, site_uuid: str | None = None) -> HealthTable:
    """One row per device of the site (every device when ``site_uuid`` is None), the most
    severe alarm level first, then by name as people count (P2 before P10): the
    at-a-glance table of a site's state, connection, power, signal, faults and how much of
    its data the mirror holds.  An unknown site gives no rows."""
    rows = _records(mirror, f"""
        WITH {STREAM_CTES},
             rd AS (SELECT p.device_serial_number AS sn, sum(r.n) AS n, max(r.t1) AS t1
                    FROM rstats r JOIN parameters p ON p.uuid = r.parameter_uuid GROUP BY 1),
             ep AS (SELECT device_serial_number AS sn, sum(n) AS n, max(t1) AS t1
                    FROM estats GROUP BY 1),
             al AS ({_LEVEL_NOW}),
             sh AS (SELECT device_serial_number AS sn,
                           list({{'sensor': {_display('x', 'x.type')},
                                  'health': x.raw->'$.health'}}) AS sensor_health
                    FROM sensors x GROUP BY 1)
        SELECT {_display('d', 'd.serial_number')} AS display_name, d.serial_number,
               d.device_kind, d.state, d.connection_status, al.alarm_level, al.alarm_rank,
               d.last_seen, d.next_tx,
               d.battery_percentage AS battery_pct, d.power_source,
               coalesce(d.signal_quality,
                        d.raw->>'$.health.connection.signalStrength.signalQuality',
                        d.raw->>'$.health.connection.signalQuality') AS signal_quality,
               d.tx_success_rate AS tx_success_rate_pct, d.raw->'$.health' AS health,
               sh.sensor_health, greatest(rd.t1, ep.t1) AS last_reading,
               coalesce(rd.n, 0) AS readings_in_mirror, coalesce(ep.n, 0) AS epochs_in_mirror
        FROM devices d LEFT JOIN rd ON rd.sn = d.serial_number
        LEFT JOIN ep ON ep.sn = d.serial_number LEFT JOIN sh ON sh.sn = d.serial_number
        LEFT JOIN al ON al.sn = d.serial_number
        WHERE $site IS NULL OR d.site_uuid = TRY_CAST($site AS UUID)""",
        {"site": site_uuid})
    rows.sort(key=lambda r: _severity_then_name(r["alarm_rank"], r["display_name"],
                                                r["serial_number"]))
    keys = tuple(k for k, _ in HEALTH_COLUMNS)
    return HealthTable(keys, tuple(label for _, label in HEALTH_COLUMNS),
                       [[_health_value(r, k) for k in keys] for r in rows],
                       tuple(r["alarm_rank"] for r in rows))


def _health_value(r: dict, key: str):
    if key == "faults":
        sensors = [(s["sensor"], _json(s["health"])) for s in r["sensor_health"] or ()]
        return len(_faults(_obj(_json(r["health"])), sensors))
    if key == "signal_quality":
        return _signal_quality(r[key])
    if key in ("last_seen", "next_tx", "last_reading"):
        return _utc(r[key])
    return int(r[key]) if key.endswith("_in_mirror") else r[key]


# =========================================================================== time series

@dataclass(frozen=True)
class ParameterInfo:
    """What a plot or an export needs to label one parameter's series."""

    uuid: str
    name: str  # alias, else name
    parameter_name: str | None  # the internal name
    unit: str | None  # display unit, else base unit: the unit of the mirrored values
    parameter_type: str | None
    source_type: str | None
    display_precision: int | None
    sensor_uuid: str | None
    sensor_name: str | None
    serial_number: str
    device_name: str
    site_name: str | None
    site_timezone: str | None
    gnss_field: str | None  # the gnss_epochs column holding its values, for a GNSS field
    readings: int
    first: datetime | None
    last: datetime | None


def parameter_info(mirror: Mirror, parameter_uuid: str) -> ParameterInfo:
    """Names, unit, device, site and reading span of one parameter; a StoreError naming
    the uuid when the mirror does not hold it."""
    rows = _records(mirror, f"""
        WITH {_stats_ctes('parameter_uuid = TRY_CAST($p AS UUID)',
                          'sensor_uuid = (SELECT sensor_uuid FROM parameters '
                          'WHERE uuid = TRY_CAST($p AS UUID))')}
        SELECT p.uuid::VARCHAR AS uuid, {_display('p', 'p.uuid::VARCHAR')} AS name,
               p.name AS parameter_name,
               coalesce(nullif(p.display_unit, ''), p.base_unit) AS unit, p.parameter_type,
               p.source_type, p.display_precision, p.sensor_uuid::VARCHAR AS sensor_uuid,
               {_display('x', 'x.type')} AS sensor_name, p.device_serial_number,
               {_display('d', 'p.device_serial_number')} AS device_name,
               coalesce(s.name, d.raw->>'$.site.name') AS site_name, s.timezone,
               st.gnss_type, st.n, st.t0, st.t1
        FROM parameters p JOIN pstats st ON st.uuid = p.uuid
        LEFT JOIN sensors x ON x.uuid = p.sensor_uuid
        LEFT JOIN devices d ON d.serial_number = p.device_serial_number
        LEFT JOIN sites s ON s.uuid = d.site_uuid
        WHERE p.uuid = TRY_CAST($p AS UUID)""", {"p": parameter_uuid})
    if not rows:
        raise _unknown_parameter(mirror, parameter_uuid)
    r = rows[0]
    return ParameterInfo(
        uuid=r["uuid"], name=r["name"], parameter_name=r["parameter_name"], unit=r["unit"],
        parameter_type=r["parameter_type"], source_type=r["source_type"],
        display_precision=r["display_precision"], sensor_uuid=r["sensor_uuid"],
        sensor_name=r["sensor_name"], serial_number=r["device_serial_number"],
        device_name=r["device_name"], site_name=r["site_name"], site_timezone=r["timezone"],
        gnss_field=GNSS_FIELDS.get(r["gnss_type"]), readings=int(r["n"]),
        first=_utc(r["t0"]), last=_utc(r["t1"]))


def _unknown_parameter(mirror: Mirror, parameter_uuid: str) -> StoreError:
    return StoreError(f"No parameter {parameter_uuid!r} in {mirror.path}: pick one from the "
                      f"device tree, or run `devmon sync` if it is new.")


_READINGS_SOURCE = "(SELECT ts, value FROM readings WHERE parameter_uuid = $key::UUID)"


def _source(mirror: Mirror, parameter_uuid: str) -> tuple[str, dict]:
    """A subquery yielding the parameter's ``(ts, value)`` rows, and its parameters: from
    readings, or from its sensor's epoch column for a GNSS field.  The column name comes
    from ``GNSS_FIELDS``, never from the data."""
    row = mirror._row("""
        SELECT p.uuid::VARCHAR, p.sensor_uuid::VARCHAR, lower(p.parameter_type),
               g.sensor_uuid IS NOT NULL
        FROM parameters p LEFT JOIN gnss_solutions g ON g.sensor_uuid = p.sensor_uuid
        WHERE p.uuid = TRY_CAST(? AS UUID)""", [parameter_uuid])
    if row is None:
        raise _unknown_parameter(mirror, parameter_uuid)
    uuid, sensor, ptype, has_solution = row
    column = GNSS_FIELDS.get(ptype) if has_solution else None
    if column:
        return (f"(SELECT ts, {column} AS value FROM gnss_epochs "
                f"WHERE sensor_uuid = $key::UUID)", {"key": sensor})
    return _READINGS_SOURCE, {"key": uuid}


def _long_range(mirror: Mirror, source: str, params: dict, start: datetime | None,
                end: datetime | None, via_summary: bool | None
                ) -> tuple[datetime, datetime] | None:
    """[start, end] (open ends: the parameter's first and last reading, from
    ``stream_stats``) when the range is to be read from the readings' 6-hour summaries:
    ``via_summary`` True, or None and ``summary.pays``; None for the raw readings (and for
    a GNSS field, a parameter without readings, or a range shorter than two slots)."""
    if via_summary is False or source != _READINGS_SOURCE:
        return None
    row = mirror._row("SELECT first_ts, last_ts FROM stream_stats WHERE kind = 'readings' "
                      "AND key = ?::UUID", [params["key"]])
    if row is None or row[0] is None:
        return None
    t0, t1 = _utc(start) or _utc(row[0]), _utc(end) or _utc(row[1])
    if t1 - t0 < timedelta(hours=2 * summary.SLOT_HOURS):
        return None
    return (t0, t1) if via_summary or summary.pays(mirror.con, t0, t1) else None


def readings(mirror: Mirror, parameter_uuid: str, start: datetime | None = None,
             end: datetime | None = None) -> dict[str, np.ndarray]:
    """Every reading of the parameter in [start, end] at full resolution, in time order:
    ``ts`` (datetime64[us], UTC) and ``value`` (float64 in the parameter's unit, NaN for a
    faulty point).  For CSV export and checks; plots use ``readings_decimated``."""
    source, params = _source(mirror, parameter_uuid)
    table = mirror.con.sql(f"SELECT ts, value FROM {source} WHERE {_IN_RANGE} ORDER BY ts",
                           params={**params, "start": _utc(start), "end": _utc(end)}
                           ).to_arrow_table()
    return _series(table)


def _series(table: pa.Table) -> dict[str, np.ndarray]:
    """``ts`` and ``value`` columns, with the right dtypes even when there are no rows."""
    cols = _columns(table)
    return {"ts": cols["ts"].astype("datetime64[us]"),
            "value": np.asarray(cols["value"], dtype=np.float64)}


_DECIMATE = """
WITH lim AS (
    SELECT epoch_us(t0) AS us0, (epoch_us(t1) - epoch_us(t0)) // $buckets + 1 AS width_us,
           (SELECT count(*) FROM {src} WHERE {in_range}) AS total
    FROM ({bounds})),
every AS (SELECT ts, value FROM {src}, lim WHERE lim.total <= 2 * $buckets AND {in_range}),
bucket AS (
    SELECT (epoch_us(ts) - lim.us0) // greatest(lim.width_us, 1) AS k,
           arg_min(ts, value) AS t_lo, min(value) AS v_lo,
           arg_max(ts, value) AS t_hi, max(value) AS v_hi
    FROM {src}, lim WHERE lim.total > 2 * $buckets AND {in_range} GROUP BY k),
before AS (SELECT ts, value FROM {src} WHERE value IS NOT NULL AND ts < $start::TIMESTAMPTZ
           ORDER BY ts DESC LIMIT 1),
after AS (SELECT ts, value FROM {src} WHERE value IS NOT NULL AND ts > $end::TIMESTAMPTZ
          ORDER BY ts LIMIT 1),
points AS (
    FROM every
    UNION ALL SELECT t_lo, v_lo FROM bucket WHERE t_lo IS NOT NULL
    UNION ALL SELECT t_hi, v_hi FROM bucket WHERE t_hi <> t_lo
    UNION ALL SELECT * FROM (FROM before UNION ALL FROM after)
    WHERE (SELECT total FROM lim) > 0)
SELECT list(ts ORDER BY ts) AS ts, list(value ORDER BY ts) AS value,
       (SELECT total FROM lim) AS total
FROM points
"""


def _bounds(source: str, open_ended: bool) -> str:
    """SELECT of the range's ends ``t0, t1``: the arguments, an open end replaced by the
    series' first or last time.  Given both, the series is not scanned for them (DuckDB
    would evaluate a ``coalesce``'s subquery all the same)."""
    if not open_ended:
        return "SELECT $start::TIMESTAMPTZ AS t0, $end::TIMESTAMPTZ AS t1"
    return ("SELECT coalesce($start::TIMESTAMPTZ, lo) AS t0, coalesce($end::TIMESTAMPTZ, hi) "
            f"AS t1 FROM (SELECT min(ts) AS lo, max(ts) AS hi FROM {source})")


def readings_decimated(mirror: Mirror, parameter_uuid: str, start: datetime | None = None,
                       end: datetime | None = None, buckets: int = 1500, *,
                       via_summary: bool | None = None) -> dict:
    """The parameter's series in [start, end] reduced for a plot ``buckets`` pixels wide,
    in one DuckDB query: the range is cut in ``buckets`` equal-width time buckets (whole
    microseconds: ``(end - start) // buckets + 1`` wide) and each keeps its lowest and its
    highest reading at their own timestamps, in time order (min-max decimation: spikes and
    the range's extremes are never lost).  A range holding at most 2 x ``buckets`` readings
    comes back unchanged (faulty points as NaN); decimated, faulty points are skipped.

    When the range holds readings, the nearest valid reading before ``start`` and after
    ``end`` are added, so the line reaches the plot's edges; an empty range gives empty
    arrays.  Open ends (None) stand for the first and last reading.

    A range too long to scan every parameter's readings of (``summary.pays``; or
    ``via_summary`` True) is read from the 6-hour summaries: its buckets are then whole
    slots (at least 6 hours wide, so fewer than ``buckets`` for a range under ``buckets``
    x 6 hours), with the same guarantees.

    Returns ``ts`` (datetime64[us], UTC), ``value`` (float64), ``total`` (readings in the
    range, faulty ones included) and ``decimated`` (whether buckets were used); at most
    2 x ``buckets`` + 2 points."""
    if buckets < 1:
        raise ValueError(f"buckets must be at least 1, not {buckets}")
    source, params = _source(mirror, parameter_uuid)
    long_range = _long_range(mirror, source, params, start, end, via_summary)
    if long_range is not None:
        found = summary.decimated(mirror.con, params["key"], *long_range, int(buckets))
        if found is not None:
            points, total = found
            return {**_series(points), "total": total, "decimated": True}
    sql = _DECIMATE.format(src=source, in_range=_IN_RANGE,
                           bounds=_bounds(source, start is None or end is None))
    table = mirror.con.sql(sql, params={**params, "start": _utc(start), "end": _utc(end),
                                        "buckets": int(buckets)}).to_arrow_table()
    total = table.column("total")[0].as_py() or 0
    points = pa.table({"ts": table.column("ts").combine_chunks().flatten(),
                       "value": table.column("value").combine_chunks().flatten()})
    return {**_series(points), "total": int(total), "decimated": total > 2 * buckets}


def readings_stats(mirror: Mirror, parameter_uuid: str, start: datetime | None = None,
                   end: datetime | None = None, *, via_summary: bool | None = None) -> dict:
    """Summary of the parameter's readings in [start, end] for the plot's side panel:
    ``count`` (valid readings), ``faulty`` (NULL points), ``min``, ``max``, ``mean``,
    ``first_time``/``first_value`` and ``last_time``/``last_value`` (first and last valid
    reading; times UTC-aware) and ``rate_per_day``: the least-squares slope of value against
    time (DuckDB ``regr_slope``), in the parameter's unit per day; robust to noise at the
    ends, unlike (last - first) / days.  None for what an empty range cannot give.  A long
    range is read from the 6-hour summaries (as ``readings_decimated``): the same figures."""
    source, params = _source(mirror, parameter_uuid)
    long_range = _long_range(mirror, source, params, start, end, via_summary)
    if long_range is not None:
        return _stats_row(summary.stats(mirror.con, params["key"], *long_range))
    row = _records(mirror, f"""
        WITH agg AS (
            SELECT count(value) AS count, count(*) - count(value) AS faulty,
                   min(value) AS min, max(value) AS max, avg(value) AS mean,
                   regr_slope(value, epoch_us(ts) / 86400e6) AS rate_per_day
            FROM {source} WHERE {_IN_RANGE}),
        head AS (SELECT ts, value FROM {source} WHERE {_IN_RANGE} AND value IS NOT NULL
                 ORDER BY ts LIMIT 1),
        tail AS (SELECT ts, value FROM {source} WHERE {_IN_RANGE} AND value IS NOT NULL
                 ORDER BY ts DESC LIMIT 1)
        SELECT agg.count, agg.faulty, agg.min, agg.max, agg.mean,
               head.ts AS first_time, head.value AS first_value,
               tail.ts AS last_time, tail.value AS last_value, agg.rate_per_day
        FROM agg LEFT JOIN head ON true LEFT JOIN tail ON true""",
        {**params, "start": _utc(start), "end": _utc(end)})[0]
    return _stats_row(row)


def _stats_row(row: dict) -> dict:
    row["first_time"], row["last_time"] = _utc(row["first_time"]), _utc(row["last_time"])
    row["count"], row["faulty"] = int(row["count"]), int(row["faulty"])
    return row


# =========================================================================== freshness

def last_synced(mirror: Mirror, serial_numbers: list[str] | None = None) -> datetime | None:
    """When a sync last committed a window of data (readings or GNSS epochs) for any of
    these devices, or for any device when None: the "data as of" time of the GUI and of
    reports.  A sync that finds nothing new still commits its windows, so this is when the
    mirror last asked the service, not when the newest point was measured.  With no
    windows at all (a metadata-only mirror), the end of the last successful run when asking
    for every device; None when nothing was committed."""
    row = mirror._row("""
        SELECT coalesce(
            (SELECT max(w.committed_at) FROM sync_windows w
             WHERE $serials IS NULL OR w.stream IN (
                 SELECT 'readings:' || uuid::VARCHAR FROM parameters
                 WHERE list_contains($serials, device_serial_number)
                 UNION ALL SELECT 'gnss:' || sensor_uuid::VARCHAR FROM gnss_solutions
                 WHERE list_contains($serials, device_serial_number))),
            (SELECT max(finished_at) FROM sync_runs WHERE status = 'ok' AND $serials IS NULL))
        """, {"serials": None if serial_numbers is None else list(serial_numbers)})
    return _utc(row[0]) if row else None


# =========================================================================== GNSS plan

def gnss_positions(mirror: Mirror) -> dict[str, np.ndarray]:
    """Where to draw each GNSS rover on a plan: per rover (base stations excluded) the
    median lat, lon (degrees) and eh (m) of its epochs in the 24 h up to its last one (a
    median, so an outlier epoch does not move the marker), with ``ts`` that last epoch,
    ``epochs`` how many the median used and ``site_uuid``.  A rover with no epoch yet is
    placed at its device location (``from_epochs`` False, eh NaN).  One query; sorted by
    serial number."""
    table = mirror.con.sql(f"""
        WITH last AS (SELECT key AS sensor_uuid, last_ts AS t1 FROM stream_stats
                      WHERE kind = 'gnss' AND rows > 0),
             day AS (SELECT e.device_serial_number AS sn, median(e.lat) AS lat,
                            median(e.lon) AS lon, median(e.eh) AS eh, max(e.ts) AS ts,
                            count(*) AS n
                     FROM gnss_epochs e JOIN last ON last.sensor_uuid = e.sensor_uuid
                     WHERE e.ts > last.t1 - INTERVAL 1 DAY GROUP BY 1)
        SELECT c.device_serial_number AS serial_number,
               {_display('d', 'c.device_serial_number')} AS display_name,
               d.site_uuid::VARCHAR AS site_uuid,
               coalesce(day.lat, d.lat)::DOUBLE AS lat, coalesce(day.lon, d.lon)::DOUBLE AS lon,
               day.eh::DOUBLE AS eh, day.ts, coalesce(day.n, 0) AS epochs,
               day.sn IS NOT NULL AS from_epochs
        FROM device_gnss_config c
        LEFT JOIN devices d ON d.serial_number = c.device_serial_number
        LEFT JOIN day ON day.sn = c.device_serial_number
        WHERE NOT coalesce(c.is_base_station, false)
        ORDER BY 1""").to_arrow_table()
    cols = _columns(table)
    cols["ts"] = cols["ts"].astype("datetime64[us]")
    return cols


# ----------------------------------------------------------------------------- overview

#: A device whose newest data is older than this, before the newest data of the mirror, is
#: "stale": it has stopped sending, or the sync no longer reaches it.
STALE_AFTER = timedelta(hours=24)


@dataclass(frozen=True)
class PointAtLevel:
    """A device at an alarm level now: the most severe level it is at (``rank`` its
    position in its ladder), the quantity key that reached it, and the device."""

    level: str
    rank: int
    quantity: str
    display_name: str
    serial_number: str


@dataclass(frozen=True)
class SiteOverview:
    """One site at a glance, what a monitoring desk opens on: its devices and their
    connection, the rovers at each alarm level now ({level: count}, from the alarm
    history, and ``at_level`` each by name, worst first), the devices whose data stopped
    (``stale``, by name) and its newest data."""

    uuid: str | None
    name: str
    devices: int
    online: int
    offline: int
    levels: dict
    stale: tuple
    newest_data: datetime | None
    at_level: tuple = ()  # PointAtLevel, worst first


def site_overview(mirror: Mirror) -> list[SiteOverview]:
    """Per site (and "No site"): per device its newest data (``stream_stats``, no scan of
    the data), then the sites' sums."""
    rows = _records(mirror, f"""
        WITH {STREAM_CTES},
             data AS (SELECT sn, max(t1) AS t1 FROM (
                 SELECT p.device_serial_number AS sn, r.t1 FROM rstats r
                     JOIN parameters p ON p.uuid = r.parameter_uuid
                 UNION ALL SELECT device_serial_number, t1 FROM estats)
                 GROUP BY 1),
             newest AS (SELECT max(t1) AS t FROM data),
             al AS (SELECT device_serial_number AS sn,
                           arg_max(level, coalesce(level_rank, -1)) AS level,
                           max(coalesce(level_rank, -1)) AS level_rank,
                           arg_max(quantity, coalesce(level_rank, -1)) AS quantity
                    FROM alarm_history WHERE exceeded_at_end GROUP BY 1)
        SELECT d.site_uuid::VARCHAR AS uuid, coalesce(s.name, 'No site') AS name,
               count(*) AS devices,
               count(*) FILTER (WHERE d.connection_status = 'online') AS online,
               count(*) FILTER (WHERE d.connection_status = 'offline') AS offline,
               list(al.level) FILTER (WHERE al.level IS NOT NULL) AS levels,
               list({{'level': al.level, 'rank': al.level_rank, 'quantity': al.quantity,
                     'name': {_display('d', 'd.serial_number')}, 'sn': d.serial_number}}
                    ORDER BY al.level_rank DESC, {_display('d', 'd.serial_number')})
                   FILTER (WHERE al.level IS NOT NULL) AS at_level,
               list({_display('d', 'd.serial_number')}
                    ORDER BY {_display('d', 'd.serial_number')}) FILTER (WHERE data.t1 < (SELECT t FROM newest) - INTERVAL {
                       int(STALE_AFTER.total_seconds())} SECOND) AS stale,
               max(data.t1) AS newest_data
        FROM devices d LEFT JOIN sites s ON s.uuid = d.site_uuid
        LEFT JOIN data ON data.sn = d.serial_number LEFT JOIN al ON al.sn = d.serial_number
        GROUP BY d.site_uuid, s.name ORDER BY (d.site_uuid IS NULL), lower(s.name)""")
    out = []
    for r in rows:
        levels: dict[str, int] = {}
        for level in r["levels"] or ():
            levels[level] = levels.get(level, 0) + 1
        at_level = tuple(PointAtLevel(p["level"], p["rank"], p["quantity"], p["name"], p["sn"])
                         for p in r["at_level"] or ())
        out.append(SiteOverview(r["uuid"], r["name"], r["devices"], r["online"], r["offline"],
                                levels, tuple(r["stale"] or ()), r["newest_data"], at_level))
    return out


@dataclass(frozen=True)
class LevelledPoint:
    """A GNSS rover that alarm levels apply to (its own, its groups' or its site's), or
    that is at a level now: the most severe level it is at (None: below every level;
    ``rank`` its place in its ladder, -1 below), the key that reached it, and its site."""

    serial_number: str
    display_name: str
    site_name: str
    level: str | None
    rank: int
    quantity: str | None
    keys: tuple[str, ...] = ()  # the level keys that apply (``displacement:horizontal``...)


def _gnss_keys(levels: dict) -> tuple[str, ...]:
    """The displacement and velocity keys among a device's levels (not a parameter's)."""
    return tuple(q for q in levels if q.partition(":")[0] in queries.ALARM_QUANTITIES)


def levelled_points(mirror: Mirror) -> list[LevelledPoint]:
    """Every GNSS rover (base stations aside) with displacement or velocity levels, or at a
    level now: the most severe level first, then by name as people count (P2 before P10).
    What the Overview lists, and the rovers whose H and V lights the window evaluates."""
    rovers = _records(mirror, f"""
        SELECT c.device_serial_number AS sn, {_display('d', 'c.device_serial_number')} AS name,
               coalesce(s.name, $no_site) AS site, al.alarm_level, al.alarm_rank,
               al.alarm_quantity
        FROM device_gnss_config c
        LEFT JOIN devices d ON d.serial_number = c.device_serial_number
        LEFT JOIN sites s ON s.uuid = d.site_uuid
        LEFT JOIN ({_LEVEL_NOW}) al ON al.sn = c.device_serial_number
        WHERE NOT coalesce(c.is_base_station, false)""", {"no_site": NO_SITE})
    levels = queries.alarm_levels_of_devices(mirror, [r["sn"] for r in rovers])
    points = [LevelledPoint(r["sn"], r["name"], r["site"], r["alarm_level"],
                            -1 if r["alarm_rank"] is None else r["alarm_rank"],
                            r["alarm_quantity"], _gnss_keys(levels[r["sn"]]))
              for r in rovers if r["alarm_level"] or _gnss_keys(levels[r["sn"]])]
    return sorted(points, key=lambda p: _severity_then_name(p.rank, p.display_name,
                                                            p.serial_number))


def points_at_level(mirror: Mirror) -> list[LevelledPoint]:
    """Every rover at an alarm level now (its last evaluation), the most severe first, then
    by name: what a sync says after it, whichever rovers it evaluated again."""
    return [p for p in levelled_points(mirror) if p.level]


# ----------------------------------------------------------------------------- source

@dataclass(frozen=True)
class SourceService:
    """Where the mirror's data come from: the address of the service its last successful
    sync read (``base_url``, as the client used it) and when that sync ended."""

    base_url: str
    synced_at: datetime | None


def source_service(mirror: Mirror) -> SourceService | None:
    """The service of the mirror's last successful sync; None before any."""
    row = mirror._row("""
        SELECT base_url, finished_at FROM sync_runs
        WHERE status = 'ok' AND coalesce(base_url, '') <> ''
        ORDER BY finished_at DESC NULLS LAST, run_id DESC LIMIT 1""")
    return SourceService(row[0], _utc(row[1])) if row else None


# ----------------------------------------------------------------------------- revisions

@dataclass(frozen=True)
class Revisions:
    """What the service changed in its past, as the syncs saw it (``reading_revisions``,
    ``epoch_revisions``): a report issued before ``first_seen`` may rest on old values."""

    values: int
    epochs: int
    first_seen: datetime | None
    last_seen: datetime | None
    deleted_sensors: int = 0

    @property
    def any(self) -> bool:
        return bool(self.values or self.epochs)

    @property
    def what(self) -> str:
        """'1,234 values and 56 GNSS epochs', leaving out a count of none."""
        parts = [f"{self.values:,} value{'s' * (self.values != 1)}" if self.values else "",
                 f"{self.epochs:,} GNSS epoch{'s' * (self.epochs != 1)}" if self.epochs else ""]
        return " and ".join(p for p in parts if p)

    def sentence(self, when: Callable[[datetime], str]) -> str:
        """One line for a person (``when`` writes a time), empty when nothing changed."""
        if not self.any:
            return ""
        return (f"the service revised {self.what} since {when(self.first_seen)} (last "
                f"{when(self.last_seen)}): reports made before may rest on the old ones")


def revisions(mirror: Mirror, serial_numbers: list[str] | None = None) -> Revisions:
    """The service's revisions of the whole mirror, or of the devices ``serial_numbers``."""
    devices = "" if serial_numbers is None else " AND device_serial_number IN (SELECT " \
        "unnest(?::VARCHAR[]))"
    params = [] if serial_numbers is None else [serial_numbers]
    row = mirror.con.execute(f"""
        WITH r AS (SELECT seen_at FROM reading_revisions WHERE parameter_uuid IN (
                       SELECT uuid FROM parameters WHERE true{devices})),
             e AS (SELECT seen_at FROM epoch_revisions WHERE sensor_uuid IN (
                       SELECT sensor_uuid FROM gnss_solutions WHERE true{devices}))
        SELECT (SELECT count(*) FROM r), (SELECT count(*) FROM e),
               least((SELECT min(seen_at) FROM r), (SELECT min(seen_at) FROM e)),
               greatest((SELECT max(seen_at) FROM r), (SELECT max(seen_at) FROM e)),
               (SELECT count(*) FROM sensors WHERE deleted_at IS NOT NULL{devices})""",
                             params * 3).fetchall()[0]
    return Revisions(row[0], row[1], _utc(row[2]), _utc(row[3]), row[4])


# ----------------------------------------------------------------------------- opening

#: What the desktop window reads when a mirror opens, in order, as (key, what, read(mirror)):
#: ``gui.main_window`` runs this list and ``benchmarks/bench_open_large.py`` times it, so
#: the benchmark measures exactly what a user waits for.
OPENING_READS = (
    ("sites", "device tree", device_tree), ("groups", "group tree", group_tree),
    ("health", "site health (every device)", lambda m: site_health(m, None)),
    ("gnss", "GNSS rovers", queries.gnss_devices),
    ("last_synced", "last sync", last_synced),
    ("alarms", "worst alarm levels", queries.worst_alarm_levels),
    ("sites_at_a_glance", "sites at a glance", site_overview),
    ("levelled_points", "points with alarm levels", levelled_points),
    ("source", "the mirror's source service", source_service),
    ("revisions", "the service's revisions", revisions))

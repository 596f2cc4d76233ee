"""Reads a report needs besides the analyses: which devices a scope (site, group, serial
numbers) holds, and the sites and groups a user may name.

Kept apart from ``queries`` (analysis) and ``browse`` (GUI) so the report's scope rules live
in one place; like them, every function takes a ``Mirror`` first (a worker thread passes its
own ``mirror.for_thread()``) and returns dataclasses, never DuckDB objects.
"""

from __future__ import annotations

import json
from dataclasses import dataclass, field
from datetime import UTC, datetime

from devmon_sync.store.mirror import Mirror

#: A device's GNSS role: a rover solves positions that can be analysed; a base station
#: (the reference of the rovers' baselines) does not move by definition.
ROVER, BASE = "rover", "base"

_DEVICE_COLUMNS = """
    d.serial_number, coalesce(nullif(d.display_name, ''), d.serial_number) AS display_name,
    d.site_uuid::VARCHAR AS site_uuid, coalesce(s.name, d.raw->>'$.site.name') AS site_name,
    CASE WHEN c.device_serial_number IS NULL THEN NULL
         WHEN coalesce(c.is_base_station, false) THEN 'base' ELSE 'rover' END AS gnss_role
"""
_DEVICE_JOINS = """
    LEFT JOIN sites s ON s.uuid = d.site_uuid
    LEFT JOIN device_gnss_config c ON c.device_serial_number = d.serial_number
"""
_ORDER = "ORDER BY lower(display_name), d.serial_number"


@dataclass(frozen=True)
class ScopeDevice:
    """A device of a report's scope, as the mirror knows it."""

    serial_number: str
    display_name: str
    site_uuid: str | None
    site_name: str | None
    gnss_role: str | None  # ROVER, BASE, or None: no GNSS configuration

    @property
    def is_rover(self) -> bool:
        return self.gnss_role == ROVER


@dataclass(frozen=True)
class Place:
    """A site or a device group a scope may name: its uuid and its name."""

    uuid: str
    name: str


def _devices(mirror: Mirror, where: str, params: list) -> list[ScopeDevice]:
    rows = mirror.con.execute(f"SELECT {_DEVICE_COLUMNS} FROM devices d {_DEVICE_JOINS} "
                              f"WHERE {where} {_ORDER}", params).fetchall()
    return [ScopeDevice(*row) for row in rows]


def sites(mirror: Mirror) -> list[Place]:
    """Every mirrored site, by name (case-insensitive), then uuid."""
    return [Place(u, n) for u, n in mirror.con.execute(
        "SELECT uuid::VARCHAR, coalesce(name, uuid::VARCHAR) AS n FROM sites "
        "ORDER BY lower(n), uuid").fetchall()]


def groups(mirror: Mirror) -> list[Place]:
    """Every mirrored device group, by name (case-insensitive), then uuid."""
    return [Place(u, n) for u, n in mirror.con.execute(
        "SELECT uuid::VARCHAR, coalesce(name, uuid::VARCHAR) AS n FROM device_groups "
        "ORDER BY lower(n), uuid").fetchall()]


def site_devices(mirror: Mirror, site_uuid: str) -> list[ScopeDevice]:
    """The devices assigned to a site, by display name; [] for an unknown site."""
    return _devices(mirror, "d.site_uuid = TRY_CAST(? AS UUID)", [site_uuid])


#: The group ``?`` and the groups nested in it at any depth (today's nesting: the mirror
#: keeps no history of it); a parent cycle in the service's data is walked once.
_TREE = """WITH RECURSIVE tree(uuid) AS (
            SELECT uuid FROM device_groups WHERE uuid = TRY_CAST(? AS UUID)
            UNION SELECT g.uuid FROM device_groups g JOIN tree t ON g.parent_uuid = t.uuid)"""

#: Memberships over time (``device_group_history``) as ``spans(group_uuid, serial, since,
#: until)``, ``since`` NULL where the mirror cannot tell when it began: recorded NULL
#: (before the history was kept), or the first membership the mirror recorded of the device
#: (its first sync saw the device already in the group).  A current membership the history
#: does not hold (a key that never lists whole groups) counts from ever, until now.
_SPANS = """spans AS (
        SELECT h.group_uuid, h.device_serial_number AS serial,
               CASE WHEN h.member_from IS NULL OR (NOT f.before_history
                         AND h.member_from = f.first_from) THEN NULL
                    ELSE h.member_from END AS since,
               h.member_until AS until
        FROM device_group_history h JOIN (
            SELECT device_serial_number, min(member_from) AS first_from,
                   bool_or(member_from IS NULL) AS before_history
            FROM device_group_history GROUP BY 1) f USING (device_serial_number)
        UNION ALL
        SELECT m.group_uuid, m.device_serial_number, NULL, NULL FROM device_group_members m
        WHERE NOT EXISTS (SELECT 1 FROM device_group_history h WHERE h.member_until IS NULL
                          AND h.group_uuid = m.group_uuid
                          AND h.device_serial_number = m.device_serial_number))"""

#: ``spans`` of the tree's groups overlapping the period [$2, $3] (NULL: open).
_IN_PERIOD = """(since IS NULL OR since <= coalesce(?::TIMESTAMPTZ, 'infinity'))
        AND (until IS NULL OR until > coalesce(?::TIMESTAMPTZ, '-infinity'))"""


def group_devices(mirror: Mirror, group_uuid: str, start: datetime | None = None,
                  end: datetime | None = None) -> list[ScopeDevice]:
    """The devices of a group and of the groups nested in it (at any depth), each once, by
    display name.  Without a period, today's members; with one (UTC-aware ``start`` and/or
    ``end``, None: open), every device that was a member at some time in it, as the syncs
    saw the memberships change: a report of last month takes last month's members.  [] for
    an unknown group or one whose members are not mirrored."""
    if start is None and end is None:
        return _devices(mirror, f"""d.serial_number IN ({_TREE}
            SELECT device_serial_number FROM device_group_members
            WHERE group_uuid IN (SELECT uuid FROM tree))""", [group_uuid])
    return _devices(mirror, f"""d.serial_number IN ({_TREE}, {_SPANS}
        SELECT serial FROM spans WHERE group_uuid IN (SELECT uuid FROM tree)
        AND {_IN_PERIOD})""", [group_uuid, end, start])


@dataclass(frozen=True)
class MembershipChange:
    """A device whose membership of a group (or of a group nested in it) in a period is not
    what it is today: it ``left`` the group since, or ``joined`` it since.  ``at``: when a
    sync saw it change (the change happened between that sync and the one before);
    ``groups_now``: the names of the groups it is in today."""

    serial_number: str
    display_name: str
    change: str  # "left" or "joined"
    at: datetime | None
    groups_now: tuple[str, ...]


def group_changes(mirror: Mirror, group_uuid: str, start: datetime | None,
                  end: datetime | None) -> list[MembershipChange]:
    """How the members of the group in the period (``group_devices`` with the period)
    differ from today's: the devices that left it since and those that joined it since,
    by display name.  [] when they are the same."""
    then = {d.serial_number: d for d in group_devices(mirror, group_uuid, start, end)}
    now = {d.serial_number: d for d in group_devices(mirror, group_uuid)}
    if then.keys() == now.keys():
        return []
    rows = {(sn, change): at for sn, change, at in mirror.con.execute(f"""
        {_TREE}, {_SPANS}
        SELECT serial, 'left', max(until) FROM spans
        WHERE group_uuid IN (SELECT uuid FROM tree) GROUP BY 1
        UNION ALL
        SELECT serial, 'joined', max(since) FROM spans
        WHERE group_uuid IN (SELECT uuid FROM tree) AND until IS NULL GROUP BY 1""",
        [group_uuid]).fetchall()}
    names = _groups_now(mirror, sorted(then.keys() ^ now.keys()))
    out = [MembershipChange(sn, d.display_name, "left", _utc(rows.get((sn, "left"))),
                            names.get(sn, ()))
           for sn, d in then.items() if sn not in now]
    out += [MembershipChange(sn, d.display_name, "joined", _utc(rows.get((sn, "joined"))),
                             names.get(sn, ()))
            for sn, d in now.items() if sn not in then]
    return sorted(out, key=lambda c: (c.display_name.casefold(), c.serial_number))


def _groups_now(mirror: Mirror, serial_numbers: list[str]) -> dict[str, tuple[str, ...]]:
    rows = mirror.con.execute("""
        SELECT m.device_serial_number, list(coalesce(g.name, m.group_uuid::VARCHAR)
                                            ORDER BY lower(coalesce(g.name, '')))
        FROM device_group_members m LEFT JOIN device_groups g ON g.uuid = m.group_uuid
        WHERE list_contains(?::VARCHAR[], m.device_serial_number) GROUP BY 1""",
        [serial_numbers]).fetchall()
    return {sn: tuple(names) for sn, names in rows}


def _utc(value: datetime | None) -> datetime | None:
    """A TIMESTAMPTZ as UTC-aware (a worker's cursor answers in the machine's zone)."""
    return None if value is None else value.astimezone(UTC)


def devices_by_serial(mirror: Mirror, serial_numbers: list[str]) -> list[ScopeDevice]:
    """The named devices the mirror holds, in the order named (each once); unknown serial
    numbers are left out, so the caller can name them."""
    found = {d.serial_number: d for d in _devices(
        mirror, "list_contains(?::VARCHAR[], d.serial_number)", [list(serial_numbers)])}
    return [found[sn] for sn in dict.fromkeys(serial_numbers) if sn in found]


@dataclass(frozen=True)
class PointSetup:
    """How a rover is set up, for the report's point register: its antenna (type, height
    of the antenna reference point in m), processing mode, base station and sampling
    period (s); None where the service does not say."""

    serial_number: str
    antenna_type: str | None
    arp_height_m: float | None
    processing_mode: str | None
    base_station_name: str | None
    base_station_type: str | None
    sampling_period_s: float | None


def point_setups(mirror: Mirror, serial_numbers: list[str]) -> dict[str, PointSetup]:
    """The setup of each named device that has a GNSS configuration, by serial number."""
    rows = mirror.con.execute("""
        SELECT c.device_serial_number, nullif(c.antenna_type, ''), c.arp_height_m,
               c.processing_mode, nullif(c.base_station_name, ''), c.base_station_type,
               d.sampling_period_s
        FROM device_gnss_config c LEFT JOIN devices d ON d.serial_number = c.device_serial_number
        WHERE list_contains(?::VARCHAR[], c.device_serial_number)""",
        [list(serial_numbers)]).fetchall()
    return {row[0]: PointSetup(*row) for row in rows}


@dataclass(frozen=True)
class DeletedSensor:
    """A sensor of a device in scope that the service no longer lists (deleted upstream):
    when a sync noticed it gone, and the points the mirror keeps of it (its readings, or
    its epochs for a GNSS sensor), which the report's analyses still use."""

    serial_number: str
    sensor_uuid: str
    name: str
    deleted_at: datetime
    archived_points: int


def deleted_sensors(mirror: Mirror, serial_numbers: list[str]
                    ) -> dict[str, tuple[DeletedSensor, ...]]:
    """The sensors deleted upstream of each named device that has any, by serial number,
    in channel order."""
    rows = mirror.con.execute("""
        SELECT s.device_serial_number, s.uuid::VARCHAR,
               coalesce(nullif(s.alias, ''), nullif(s.name, ''), s.type, 'sensor'),
               s.deleted_at,
               coalesce(greatest(
                   (SELECT max(t.rows) FROM stream_stats t JOIN parameters p
                    ON t.kind = 'readings' AND t.key = p.uuid WHERE p.sensor_uuid = s.uuid),
                   (SELECT max(t.rows) FROM stream_stats t
                    WHERE t.kind = 'gnss' AND t.key = s.uuid)), 0)
        FROM sensors s
        WHERE s.deleted_at IS NOT NULL AND list_contains(?::VARCHAR[], s.device_serial_number)
        ORDER BY s.device_serial_number, s.channel_index NULLS LAST, s.uuid""",
        [list(serial_numbers)]).fetchall()
    out: dict[str, list[DeletedSensor]] = {}
    for sn, uuid, name, deleted_at, points in rows:
        out.setdefault(sn, []).append(DeletedSensor(sn, uuid, name, _utc(deleted_at),
                                                    int(points)))
    return {sn: tuple(sensors) for sn, sensors in out.items()}


@dataclass(frozen=True)
class SiteGnss:
    """A site's GNSS configuration as mirrored: ``config``, the service's SiteGnssConfig
    object as it gave it (the spec shows none of its fields, so it is kept whole for the
    caller to read what it recognises; {} when the site has none) and ``projections``, the
    site's projection rows (``projections`` table: id, label, projection_type, srid,
    proj_string, vertical_datum, height_type), by id."""

    site_uuid: str
    config: dict = field(default_factory=dict)
    projections: tuple[dict, ...] = ()


_PROJECTION_COLUMNS = ("id", "label", "projection_type", "srid", "proj_string",
                       "vertical_datum", "height_type")


def site_gnss(mirror: Mirror, site_uuids: list[str]) -> dict[str, SiteGnss]:
    """The GNSS configuration and projections of each named site the mirror holds, by site
    uuid (as ``uuid::VARCHAR`` writes it); an unknown site is left out.  A configuration
    that is not a JSON object (null: the site has none) is {}."""
    configs = mirror.con.execute("""
        SELECT uuid::VARCHAR, json_extract(raw, '$.gnss')::VARCHAR FROM sites
        WHERE list_contains(?::VARCHAR[], uuid::VARCHAR)""", [list(site_uuids)]).fetchall()
    rows = mirror.con.execute(f"""
        SELECT site_uuid::VARCHAR, {', '.join(_PROJECTION_COLUMNS)} FROM projections
        WHERE list_contains(?::VARCHAR[], site_uuid::VARCHAR) ORDER BY site_uuid, id""",
        [list(site_uuids)]).fetchall()
    projections: dict[str, list[dict]] = {}
    for site_uuid, *values in rows:
        projections.setdefault(site_uuid, []).append(dict(zip(_PROJECTION_COLUMNS, values)))
    out = {}
    for site_uuid, text in configs:
        config = json.loads(text) if text else None
        out[site_uuid] = SiteGnss(site_uuid, config if isinstance(config, dict) else {},
                                  tuple(projections.get(site_uuid, ())))
    return out

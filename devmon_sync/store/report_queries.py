"""Reads a report needs besides the analyses: which devices a scope (site, group, serial
numbers) holds, and the sites and groups a user may name.

Kept apart from ``queries`` (analysis) and ``browse`` (GUI) so the report's scope rules live
in one place; like them, every function takes a ``Mirror`` first (a worker thread passes its
own ``mirror.for_thread()``) and returns dataclasses, never DuckDB objects.
"""

from __future__ import annotations

from dataclasses import dataclass

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


def group_devices(mirror: Mirror, group_uuid: str) -> list[ScopeDevice]:
    """The devices of a group and of the groups nested in it (at any depth), each once, by
    display name; a parent cycle in the service's data is walked once.  [] for an unknown
    group or one whose members are not mirrored."""
    return _devices(mirror, """d.serial_number IN (
        WITH RECURSIVE tree(uuid) AS (
            SELECT uuid FROM device_groups WHERE uuid = TRY_CAST(? AS UUID)
            UNION SELECT g.uuid FROM device_groups g JOIN tree t ON g.parent_uuid = t.uuid)
        SELECT device_serial_number FROM device_group_members
        WHERE group_uuid IN (SELECT uuid FROM tree))""", [group_uuid])


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

"""`devmon verify`'s metadata check: how the mirror's devices, groups, sensors and parameters
differ from what the service lists now.  Pure: no HTTP, no SQL.

Both sides arrive as rows with the mirror's column names: the service's answers parsed by the
sync's own ``store.records.metadata_from_api`` (``Metadata.tables()``), the mirror's read by
``store.audit.metadata_rows``.  So a difference is one the sync would write, never a quirk of
a second parser.  Compared: which devices exist, each device's site, names and group
memberships, which sensors exist (one the service no longer lists while the mirror holds it
active was deleted upstream; one the mirror marks deleted is no difference; so for devices,
with ``removed_at``), and each parameter's presence, names and units.  What changes by itself (health, battery, last data)
is not compared.
"""

from __future__ import annotations

from dataclasses import dataclass, field

_UUID_COLUMNS = ("uuid", "site_uuid", "sensor_uuid", "group_uuid", "parent_uuid")
"""Compared in lower case: services write UUIDs in either case."""

_FIELDS = {"devices": (("name", "name"), ("alias", "display name"), ("site_uuid", "site")),
           "sensors": (("name", "name"), ("alias", "display name")),
           "parameters": (("name", "name"), ("alias", "display name"),
                          ("base_unit", "base unit"), ("display_unit", "display unit"))}
"""(column, words) compared per table: what a user reads and a report prints."""


@dataclass(frozen=True)
class MetadataDifference:
    """One way the mirror's metadata differs from the service's, for one device."""

    device: str  # serial number
    what: str
    mirror: str
    service: str


@dataclass
class Side:
    """One side's metadata, keyed for comparison (UUIDs in lower case)."""

    sites: dict[str, dict] = field(default_factory=dict)
    devices: dict[str, dict] = field(default_factory=dict)
    groups: dict[str, dict] = field(default_factory=dict)
    members: dict[str, set[str]] = field(default_factory=dict)
    """Per device serial, the UUIDs of the groups it is a member of."""
    sensors: dict[str, dict] = field(default_factory=dict)
    parameters: dict[str, dict] = field(default_factory=dict)

    def sensors_of(self, serial: str) -> dict[str, dict]:
        return {u: s for u, s in self.sensors.items() if s.get("device_serial_number") == serial}


def side(tables: dict[str, list[dict]]) -> Side:
    """A side from rows named as the mirror's columns (``Metadata.tables()`` or
    ``audit.metadata_rows``)."""
    rows = {name: [_lower_uuids(r) for r in tables.get(name) or ()] for name in
            ("sites", "devices", "device_groups", "device_group_members", "sensors",
             "parameters")}
    out = Side(sites={r["uuid"]: r for r in rows["sites"]},
               devices={r["serial_number"]: r for r in rows["devices"]},
               groups={r["uuid"]: r for r in rows["device_groups"]},
               sensors={r["uuid"]: r for r in rows["sensors"]},
               parameters={r["uuid"]: r for r in rows["parameters"]})
    for m in rows["device_group_members"]:
        out.members.setdefault(m["device_serial_number"], set()).add(m["group_uuid"])
    return out


def to_confirm(mirror: Side, service: Side, sensors_listed: set[str]) -> set[str]:
    """Devices whose sensors the service's list may not have held whole: the mirror holds an
    active sensor the list lacks, or the list gave the device no sensor list.  Their full
    records (GET /devices/{sn}) decide, before a sensor is called deleted upstream: a service
    may ignore the option that lists inactive sensors."""
    out = set()
    for serial in set(mirror.devices) & set(service.devices):
        active = {u for u, s in mirror.sensors_of(serial).items() if not s.get("deleted_at")}
        if active and (serial not in sensors_listed or active - set(service.sensors)):
            out.add(serial)
    return out


def compare(mirror: Side, service: Side, sensors_listed: set[str],
            groups_whole: bool) -> list[MetadataDifference]:
    """Every difference, by device then what.  ``sensors_listed``: devices whose record
    carried its whole sensor list (only those can show a sensor deleted); ``groups_whole``:
    the group listing was whole (else memberships are not compared)."""
    out: list[MetadataDifference] = []
    for serial in sorted(set(mirror.devices) | set(service.devices)):
        removed = serial in mirror.devices and mirror.devices[serial].get("removed_at")
        if serial not in service.devices:
            if not removed:
                out.append(MetadataDifference(serial, "device", "held, with its data",
                                              "not listed (removed, or out of this key's "
                                              "reach)"))
        elif serial not in mirror.devices:
            out.append(MetadataDifference(serial, "device", "missing", "listed"))
        else:
            if removed:
                out.append(MetadataDifference(serial, "device", "marked removed upstream",
                                              "listed"))
            out += _device(serial, mirror, service)
            if groups_whole:
                out += _memberships(serial, mirror, service)
            out += _sensors(serial, mirror, service, serial in sensors_listed)
    return out


def _device(serial: str, mirror: Side, service: Side) -> list[MetadataDifference]:
    out = []
    for column, words in _FIELDS["devices"]:
        a, b = mirror.devices[serial].get(column), service.devices[serial].get(column)
        if a != b:
            if column == "site_uuid":
                a, b = _site(mirror, a), _site(service, b)
            out.append(MetadataDifference(serial, words, _text(a), _text(b)))
    return out


def _memberships(serial: str, mirror: Side, service: Side) -> list[MetadataDifference]:
    a, b = mirror.members.get(serial, set()), service.members.get(serial, set())
    if a == b:
        return []
    return [MetadataDifference(serial, "groups", _groups(mirror, a), _groups(service, b))]


def _sensors(serial: str, mirror: Side, service: Side,
             listed_whole: bool) -> list[MetadataDifference]:
    out = []
    mine, theirs = mirror.sensors_of(serial), service.sensors_of(serial)
    for uuid in sorted(set(mine) | set(theirs)):
        a, b = mine.get(uuid), theirs.get(uuid)
        label = f"sensor {_label(a or b, uuid)}"
        if b is None:
            if not a.get("deleted_at") and listed_whole:
                out.append(MetadataDifference(serial, label, "active",
                                              "deleted upstream (not in the device's record)"))
            continue
        if a is None:
            out.append(MetadataDifference(serial, label, "missing", "listed"))
            continue
        if a.get("deleted_at"):
            out.append(MetadataDifference(serial, label, "marked deleted", "listed"))
        out += _fields(serial, label, "sensors", a, b)
        out += _parameters(serial, uuid, mirror, service)
    return out


def _parameters(serial: str, sensor: str, mirror: Side,
                service: Side) -> list[MetadataDifference]:
    mine = {u: p for u, p in mirror.parameters.items() if p.get("sensor_uuid") == sensor}
    theirs = {u: p for u, p in service.parameters.items() if p.get("sensor_uuid") == sensor}
    out = []
    for uuid in sorted(set(mine) | set(theirs)):
        a, b = mine.get(uuid), theirs.get(uuid)
        label = f"parameter {_label(a or b, uuid, 'name')}"
        if a is None:
            out.append(MetadataDifference(serial, label, "missing", "listed"))
        elif b is None:
            out.append(MetadataDifference(serial, label, "held",
                                          "not listed in its sensor (removed upstream)"))
        else:
            out += _fields(serial, label, "parameters", a, b)
    return out


def _fields(serial: str, label: str, table: str, a: dict, b: dict) -> list[MetadataDifference]:
    return [MetadataDifference(serial, f"{label}: {words}", _text(a.get(c)), _text(b.get(c)))
            for c, words in _FIELDS[table] if a.get(c) != b.get(c)]


def _lower_uuids(row: dict) -> dict:
    return {k: v.lower() if k in _UUID_COLUMNS and isinstance(v, str) else v
            for k, v in row.items()}


def _label(row: dict, uuid: str, *names: str) -> str:
    names = names or ("alias", "name")
    shown = next((row.get(n) for n in names if row.get(n)), None)
    return f"{shown} ({uuid[:8]})" if shown else uuid


def _site(s: Side, uuid: str | None) -> str | None:
    if uuid is None:
        return None
    return _label(s.sites.get(uuid) or {}, uuid, "name")


def _groups(s: Side, uuids: set[str]) -> str:
    return ", ".join(sorted(_label(s.groups.get(u) or {}, u, "name") for u in uuids)) or "none"


def _text(value) -> str:
    return "none" if value is None else str(value)

"""API objects to the mirror's columns: pure Python, no SQL, no HTTP.

Lenient on purpose: a missing optional key, a null, an enum value the spec never showed or
an extra key is stored as it comes (NULL or the text), and every metadata row keeps its whole
raw JSON object, so nothing the service sends is lost even when the schema does not model it.

Numbers are read by their meaning, with the data path's rule (``answers.quarantine``): a
number written as a string (``"46.3030235"``, ``"600"``) is read and counted
(``Metadata.parsed_strings``); a value that still cannot be read (``"abc"``, ``"2.5"`` for an
index, an id beyond 64 bits) is NULL in its column, kept as sent in the raw JSON and recorded
in ``Metadata.problems`` with its resource, field and value: never a silent NULL.
"""

from __future__ import annotations

import hashlib
import json
from dataclasses import dataclass, field

import orjson
import pyarrow as pa

from devmon_sync.store.answers.quarantine import read_integer, read_number


def _raw(obj: dict) -> str:
    """The object as JSON text, exactly as sent (a number orjson cannot write, such as an id
    beyond 64 bits or NaN, goes through Python's json instead)."""
    try:
        return orjson.dumps(obj).decode()
    except (TypeError, orjson.JSONEncodeError):
        return json.dumps(obj, allow_nan=True)


def _get(obj: dict | None, *path, default=None):
    for key in path:
        if not isinstance(obj, dict):
            return default
        obj = obj.get(key)
    return default if obj is None else obj


@dataclass
class Metadata:
    """Rows of every metadata table from one sync's metadata requests."""

    sites: list[dict] = field(default_factory=list)
    devices: list[dict] = field(default_factory=list)
    device_groups: list[dict] = field(default_factory=list)
    device_group_members: list[dict] = field(default_factory=list)
    sensors: list[dict] = field(default_factory=list)
    parameters: list[dict] = field(default_factory=list)
    sensor_attributes: list[dict] = field(default_factory=list)
    device_gnss_config: list[dict] = field(default_factory=list)
    base_stations: list[dict] = field(default_factory=list)
    projections: list[dict] = field(default_factory=list)
    problems: list[tuple[str, str]] = field(default_factory=list)
    """(resource, message) of values that could not be stored as they came."""
    parsed_strings: int = 0
    """Numbers the service wrote as strings (``"600"``), read as numbers."""
    groups_whole: bool = False
    """True when the group rows are every group with all its devices (a full listing): the
    mirror's memberships then follow them, ending those the listing no longer holds."""
    sensors_listed: list[str] = field(default_factory=list)
    """Devices whose records carried their whole sensor list (inactive sensors included):
    a mirrored sensor of theirs that the list no longer holds was deleted upstream."""
    devices_whole: bool = False
    """True when the device rows are every device the key can see (a device list known
    whole, ``sync.metadata.MetadataReader``): a mirrored device they lack was removed
    upstream (or moved out of the key's reach)."""

    def tables(self) -> dict[str, list[dict]]:
        return {name: getattr(self, name) for name in self.__dataclass_fields__
                if name not in ("problems", "parsed_strings", "groups_whole",
                                "sensors_listed", "devices_whole")}

    def number(self, resource: str, name: str, value) -> float | None:
        """The value of a DOUBLE column; an unreadable one is a problem (see ``_unread``)."""
        number, problem, was_string = read_number(value)
        self._note(resource, name, problem, was_string)
        return number

    def integer(self, resource: str, name: str, value, bits: int = 64) -> int | None:
        """The value of a BIGINT column (INTEGER with ``bits=32``): a whole number however
        written, else a problem."""
        whole, problem, was_string = read_integer(value, bits)
        self._note(resource, name, problem, was_string)
        return whole

    def key(self, resource: str, name: str, value, table: str) -> int | None:
        """An id that is part of ``table``'s key (a site's base stations, projections): a row
        cannot be stored without it, so when it is missing or cannot be read the row is left
        out, and that is a problem (the owner's raw JSON keeps the object as sent)."""
        whole, problem, was_string = read_integer(value)
        self.parsed_strings += was_string
        if whole is None:
            owner = resource.split(":", 1)[0]
            self.problems.append((resource, (
                f"{name} {problem or 'is missing'}: not stored in {table} (the id is its "
                f"key), kept as sent in the {owner}'s raw JSON; tell the service's operators "
                f"if it matters")))
        return whole

    def _note(self, resource: str, name: str, problem: str | None, was_string: bool) -> None:
        self.parsed_strings += was_string
        if problem is not None:
            self.problems.append((resource, _unread(resource, name, problem)))


def _unread(resource: str, name: str, problem: str) -> str:
    """What a problem says of a value that could not be read: what, where it is kept, what
    to do."""
    owner = resource.split(":", 1)[0].replace("_", " ")
    return (f"{name} {problem}: stored as NULL, kept as sent in the {owner}'s raw JSON; "
            f"the spec asks for a number here: tell the service's operators if it matters")


def metadata_from_api(sites: list[dict], devices: list[dict], groups: dict,
                      whole: bool = False, devices_whole: bool = False) -> Metadata:
    """Flatten GET /sites, GET /devices (with sensors) and GET /device-groups answers;
    ``whole``: they are the service's full listings (not a completion of a few devices);
    ``devices_whole``: the device list is known to hold every device the key can see."""
    meta = Metadata(groups_whole=whole, devices_whole=devices_whole)
    sites = [bounded(meta, f"site:{s.get('uuid')}", s) for s in sites]
    devices = [bounded(meta, f"device:{d.get('serialNumber')}", d) for d in devices]
    groups = {**groups, "grouped": [bounded(meta, f"device_group:{g.get('uuid')}", g)
                                    for g in groups.get("grouped") or ()]}
    if whole:
        meta.sensors_listed = [d["serialNumber"] for d in devices
                               if isinstance(d.get("sensors"), list)]
    for s in sites:
        meta.sites.append(site_row(s))
        _add_site_gnss(meta, s["uuid"], s.get("gnss") or {})
    for d in devices:
        _add_device(meta, d)
    for g in groups.get("grouped") or ():
        _add_group(meta, g)
    return meta


MAX_TEXT_CHARS = 65_536
"""The longest text of a metadata object (a name, a description, any string in it) stored
whole.  No real name comes near it; a hostile or broken service's 100 MB name exhausted
the mirror's memory budget in the metadata commit and ended the sync.  A longer text is
cut to this, in its column and in the object's raw JSON, and reported (``bounded``)."""


def bounded(meta: Metadata, resource: str, obj: dict) -> dict:
    """``obj`` with every string longer than ``MAX_TEXT_CHARS`` cut to it, each cut a
    problem of ``resource`` naming the field, its length and the SHA-256 of the whole text
    (so the value can be recognised, though not kept).  An object whose whole JSON is not
    longer than the bound holds no such string and is returned as it is, unread."""
    if len(_raw(obj)) <= MAX_TEXT_CHARS:
        return obj
    return _cut(meta, resource, obj, "")


def _cut(meta: Metadata, resource: str, value, path: str):
    if isinstance(value, str) and len(value) > MAX_TEXT_CHARS:
        digest = hashlib.sha256(value.encode("utf-8", "surrogatepass")).hexdigest()
        meta.problems.append((resource, (
            f"{path or 'a text'} of {len(value):,} characters (SHA-256 {digest}): stored its "
            f"first {MAX_TEXT_CHARS:,}, in its column and in the raw JSON; no name or "
            f"description is that long: tell the service's operators")))
        return value[:MAX_TEXT_CHARS]
    if isinstance(value, dict):
        return {k: _cut(meta, resource, v, f"{path}.{k}" if path else str(k))
                for k, v in value.items()}
    if isinstance(value, list):
        return [_cut(meta, resource, v, f"{path}[{i}]") for i, v in enumerate(value)]
    return value


def site_row(s: dict) -> dict:
    return {"uuid": s["uuid"], "org_uuid": s.get("orgUuid"), "name": s.get("name"),
            "description": s.get("description"), "timezone": s.get("timezone"),
            "raw": _raw(s)}  # whole, as given: its device list (includeDevices) included


def _add_site_gnss(meta: Metadata, site_uuid: str, gnss: dict) -> None:
    """The site's base stations and projections.  Their id is part of the table's key, so
    one whose id cannot be read is not a row; the site's raw JSON keeps it (a problem)."""
    resource = f"site:{site_uuid}"
    for i, bs in enumerate(gnss.get("baseStations") or ()):
        station_id = meta.key(resource, f"gnss.baseStations[{i}].id", bs.get("id"),
                              "base_stations")
        if station_id is not None:
            meta.base_stations.append({"site_uuid": site_uuid, "id": station_id,
                                       "type": bs.get("type"), "name": bs.get("name"),
                                       "status": bs.get("status"), "raw": _raw(bs)})
    for i, p in enumerate(gnss.get("projections") or ()):
        row = projection_row(meta, site_uuid, p, f"gnss.projections[{i}]")
        if row["id"] is not None:
            meta.projections.append(row)


def projection_row(meta: Metadata, site_uuid: str, p: dict, where: str) -> dict:
    """One projection of a site (``where``: its place in the site, for a problem)."""
    resource = f"site:{site_uuid}"
    return {"site_uuid": site_uuid, "id": meta.key(resource, f"{where}.id", p.get("id"),
                                                   "projections"),
            "label": p.get("label"), "projection_type": p.get("projectionType"),
            "srid": meta.integer(resource, f"{where}.srid", p.get("srid"), 32),
            "proj_string": p.get("projString"), "vertical_datum": p.get("verticalDatum"),
            "height_type": p.get("heightType"), "raw": _raw(p)}


def _add_device(meta: Metadata, d: dict) -> None:
    health = d.get("health") or {}
    resource = f"device:{d['serialNumber']}"

    def number(*path: str) -> float | None:
        return meta.number(resource, ".".join(path), _get(d, *path))

    meta.devices.append({
        "serial_number": d["serialNumber"], "device_kind": d.get("deviceKind"),
        "display_name": d.get("alias") or d.get("name") or d["serialNumber"],
        "alias": d.get("alias"), "name": d.get("name"), "description": d.get("description"),
        "org_uuid": d.get("orgUuid"),
        "legacy_device_id": meta.integer(resource, "legacyDeviceId", d.get("legacyDeviceId")),
        "site_uuid": _get(d, "site", "uuid"), "lat": number("location", "lat"),
        "lon": number("location", "lon"),
        "sampling_period_s": number("samplingPeriodSeconds"),
        "tx_period_s": number("txPeriodSeconds"), "state": d.get("state"),
        "connection_status": _get(health, "connection", "status"),
        "last_seen": _get(health, "connection", "lastSeen"),
        "next_tx": _get(health, "connection", "nextTxTimestamp"),
        "last_data": _get(health, "sensors", "lastDataTimestamp"),
        "battery_percentage": number("health", "battery", "percentage"),
        "battery_voltage": number("health", "battery", "voltage"),
        "power_source": health.get("powerSource"),
        "signal_quality": _get(health, "connection", "signalStrength", "signalQuality"),
        "tx_success_rate": number("health", "connection", "txSuccessRate"),
        "product": d.get("product"), "hardware_model": _get(d, "hardware", "model"),
        "firmware_version": _get(d, "firmware", "version"), "raw": _raw(d)})
    gnss = d.get("gnss")
    if isinstance(gnss, dict):
        meta.device_gnss_config.append({
            "device_serial_number": d["serialNumber"],
            "processing_mode": gnss.get("processingMode"), "antenna_type": gnss.get("antennaType"),
            "arp_height_m": number("gnss", "arpHeight"), "azimuth_deg": number("gnss", "azimuth"),
            "lever_arm_compensation": gnss.get("enableLeverArmCompensation"),
            "is_base_station": gnss.get("isBaseStation"),
            "base_station_id": meta.integer(resource, "gnss.baseStation.id",
                                            _get(gnss, "baseStation", "id")),
            "base_station_type": _get(gnss, "baseStation", "type"),
            "base_station_name": _get(gnss, "baseStation", "name"), "raw": _raw(gnss)})
    for s in d.get("sensors") or ():
        _add_sensor(meta, d["serialNumber"], s)


def _add_sensor(meta: Metadata, serial: str, s: dict) -> None:
    meta.sensors.append({
        "uuid": s["uuid"], "device_serial_number": s.get("deviceSerialNumber") or serial,
        "type": s.get("type"), "model": s.get("model"), "name": s.get("name"),
        "alias": s.get("alias"),
        "channel_index": meta.integer(f"sensor:{s['uuid']}", "channelIndex",
                                      s.get("channelIndex"), 32),
        "is_active": s.get("isActive"), "connection_type": s.get("connectionType"),
        "last_activated_at": s.get("lastActivatedAt"),
        "last_deactivated_at": s.get("lastDeactivatedAt"), "raw": _raw(s)})
    for p in s.get("parameters") or ():
        _add_parameter(meta, serial, s["uuid"], p)
    for a in s.get("attributes") or ():
        meta.sensor_attributes.append({
            "uuid": a["uuid"], "sensor_uuid": a.get("sensorUuid") or s["uuid"],
            "name": a.get("name"), "unit": a.get("unit"), "value": _attribute_value(meta, a),
            "raw": _raw(a)})


def _add_parameter(meta: Metadata, serial: str, sensor_uuid: str, p: dict) -> None:
    resource = f"parameter:{p['uuid']}"
    meta.parameters.append({
        "uuid": p["uuid"], "device_serial_number": p.get("deviceSerialNumber") or serial,
        "sensor_uuid": p.get("sensorUuid") or sensor_uuid, "name": p.get("name"),
        "alias": p.get("alias"), "parameter_type": p.get("parameterType"),
        "base_unit": p.get("baseUnit"), "display_unit": p.get("displayUnit"),
        "display_precision": meta.integer(resource, "displayPrecision",
                                          p.get("displayPrecision"), 32),
        "source_type": p.get("sourceType"), "formula": p.get("formula"),
        "read_index": meta.integer(resource, "readIndex", p.get("readIndex"), 32),
        "created_at": p.get("createdAt"), "raw": _raw(p)})


def _attribute_value(meta: Metadata, a: dict) -> float | None:
    """The value of a numeric attribute.  The spec gives a number "in the numeric case"
    only: the value of an attribute of another ``valueType`` (text, an option) is no number
    to read, so it is NULL in the column without a problem (its raw JSON keeps it)."""
    value = a.get("value")
    if a.get("valueType") not in (None, "numeric"):
        return None if isinstance(value, str) else read_number(value)[0]
    return meta.number(f"sensor_attribute:{a['uuid']}", "value", a.get("value"))


def _add_group(meta: Metadata, g: dict) -> None:
    meta.device_groups.append({"uuid": g["uuid"], "name": g.get("name"),
                               "description": g.get("description"),
                               "parent_uuid": g.get("parentUuid") or None,
                               "raw": _raw({k: v for k, v in g.items()
                                            if k not in ("devices", "children")})})
    for d in g.get("devices") or ():
        meta.device_group_members.append({"group_uuid": g["uuid"],
                                          "device_serial_number": d["serialNumber"]})
    for child in g.get("children") or ():
        _add_group(meta, child)


def rows_to_arrow(rows: list[dict], columns: list[str]) -> pa.Table:
    """Column-wise Arrow table of ``rows`` (missing keys are NULL)."""
    return pa.table({c: pa.array([r.get(c) for r in rows]) if rows else pa.array([], pa.null())
                     for c in columns})

"""API objects to the mirror's columns: pure Python, no SQL, no HTTP.

Lenient on purpose: a missing optional key, a null, an enum value the spec never showed or
an extra key is stored as it comes (NULL or the text), and every metadata row keeps its whole
raw JSON object, so nothing the service sends is lost even when the schema does not model it.
"""

from __future__ import annotations

from dataclasses import dataclass, field

import json

import orjson
import pyarrow as pa


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


def _num(value) -> float | None:
    return float(value) if isinstance(value, (int, float)) and not isinstance(value, bool) \
        else None


def _int(value, bits: int = 64) -> int | None:
    """A whole number that fits the column (BIGINT, or INTEGER with ``bits=32``); anything
    else is NULL (the row's raw JSON keeps the value as sent)."""
    if not isinstance(value, int) or isinstance(value, bool):
        return None
    return int(value) if -2 ** (bits - 1) <= value < 2 ** (bits - 1) else None


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

    def tables(self) -> dict[str, list[dict]]:
        return {name: getattr(self, name) for name in self.__dataclass_fields__
                if name != "problems"}


def metadata_from_api(sites: list[dict], devices: list[dict], groups: dict) -> Metadata:
    """Flatten GET /sites, GET /devices (with sensors) and GET /device-groups answers."""
    meta = Metadata()
    for s in sites:
        meta.sites.append(site_row(s))
        gnss = s.get("gnss") or {}
        for bs in gnss.get("baseStations") or ():
            meta.base_stations.append({"site_uuid": s["uuid"], "id": _int(bs.get("id")),
                                       "type": bs.get("type"), "name": bs.get("name"),
                                       "status": bs.get("status"), "raw": _raw(bs)})
        for p in gnss.get("projections") or ():
            meta.projections.append(projection_row(s["uuid"], p))
    for d in devices:
        _add_device(meta, d)
    for g in groups.get("grouped") or ():
        _add_group(meta, g)
    return meta


def site_row(s: dict) -> dict:
    return {"uuid": s["uuid"], "org_uuid": s.get("orgUuid"), "name": s.get("name"),
            "description": s.get("description"), "timezone": s.get("timezone"),
            "raw": _raw(s)}  # whole, as given: its device list (includeDevices) included


def projection_row(site_uuid: str, p: dict) -> dict:
    return {"site_uuid": site_uuid, "id": _int(p.get("id")), "label": p.get("label"),
            "projection_type": p.get("projectionType"), "srid": _int(p.get("srid"), 32),
            "proj_string": p.get("projString"), "vertical_datum": p.get("verticalDatum"),
            "height_type": p.get("heightType"), "raw": _raw(p)}


def _add_device(meta: Metadata, d: dict) -> None:
    health = d.get("health") or {}
    legacy = d.get("legacyDeviceId")
    if legacy is not None and _int(legacy) is None:
        meta.problems.append((f"device:{d['serialNumber']}", (
            f"legacyDeviceId {legacy!r} is not a whole number devmon can store (64-bit; the "
            f"spec allows +-9007199254740991): stored as NULL, kept as sent in the device's "
            f"raw JSON")))
    meta.devices.append({
        "serial_number": d["serialNumber"], "device_kind": d.get("deviceKind"),
        "display_name": d.get("alias") or d.get("name") or d["serialNumber"],
        "alias": d.get("alias"), "name": d.get("name"), "description": d.get("description"),
        "org_uuid": d.get("orgUuid"), "legacy_device_id": _int(d.get("legacyDeviceId")),
        "site_uuid": _get(d, "site", "uuid"), "lat": _num(_get(d, "location", "lat")),
        "lon": _num(_get(d, "location", "lon")),
        "sampling_period_s": _num(d.get("samplingPeriodSeconds")),
        "tx_period_s": _num(d.get("txPeriodSeconds")), "state": d.get("state"),
        "connection_status": _get(health, "connection", "status"),
        "last_seen": _get(health, "connection", "lastSeen"),
        "next_tx": _get(health, "connection", "nextTxTimestamp"),
        "last_data": _get(health, "sensors", "lastDataTimestamp"),
        "battery_percentage": _num(_get(health, "battery", "percentage")),
        "battery_voltage": _num(_get(health, "battery", "voltage")),
        "power_source": health.get("powerSource"),
        "signal_quality": _get(health, "connection", "signalStrength", "signalQuality"),
        "tx_success_rate": _num(_get(health, "connection", "txSuccessRate")),
        "product": d.get("product"), "hardware_model": _get(d, "hardware", "model"),
        "firmware_version": _get(d, "firmware", "version"), "raw": _raw(d)})
    gnss = d.get("gnss")
    if isinstance(gnss, dict):
        meta.device_gnss_config.append({
            "device_serial_number": d["serialNumber"],
            "processing_mode": gnss.get("processingMode"), "antenna_type": gnss.get("antennaType"),
            "arp_height_m": _num(gnss.get("arpHeight")), "azimuth_deg": _num(gnss.get("azimuth")),
            "lever_arm_compensation": gnss.get("enableLeverArmCompensation"),
            "is_base_station": gnss.get("isBaseStation"),
            "base_station_id": _int(_get(gnss, "baseStation", "id")),
            "base_station_type": _get(gnss, "baseStation", "type"),
            "base_station_name": _get(gnss, "baseStation", "name"), "raw": _raw(gnss)})
    for s in d.get("sensors") or ():
        _add_sensor(meta, d["serialNumber"], s)


def _add_sensor(meta: Metadata, serial: str, s: dict) -> None:
    meta.sensors.append({
        "uuid": s["uuid"], "device_serial_number": s.get("deviceSerialNumber") or serial,
        "type": s.get("type"), "model": s.get("model"), "name": s.get("name"),
        "alias": s.get("alias"), "channel_index": _int(s.get("channelIndex"), 32),
        "is_active": s.get("isActive"), "connection_type": s.get("connectionType"),
        "last_activated_at": s.get("lastActivatedAt"),
        "last_deactivated_at": s.get("lastDeactivatedAt"), "raw": _raw(s)})
    for p in s.get("parameters") or ():
        meta.parameters.append({
            "uuid": p["uuid"], "device_serial_number": p.get("deviceSerialNumber") or serial,
            "sensor_uuid": p.get("sensorUuid") or s["uuid"], "name": p.get("name"),
            "alias": p.get("alias"), "parameter_type": p.get("parameterType"),
            "base_unit": p.get("baseUnit"), "display_unit": p.get("displayUnit"),
            "display_precision": _int(p.get("displayPrecision"), 32),
            "source_type": p.get("sourceType"), "formula": p.get("formula"),
            "read_index": _int(p.get("readIndex"), 32), "created_at": p.get("createdAt"),
            "raw": _raw(p)})
    for a in s.get("attributes") or ():
        meta.sensor_attributes.append({
            "uuid": a["uuid"], "sensor_uuid": a.get("sensorUuid") or s["uuid"],
            "name": a.get("name"), "unit": a.get("unit"), "value": _num(a.get("value")),
            "raw": _raw(a)})


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

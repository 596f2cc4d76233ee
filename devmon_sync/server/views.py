"""How the world looks on the wire: spec section 2's field names, types and nullability.

Pure functions from world entities (and the clock) to JSON-ready dicts.  Health fields are
computed from the same series the data endpoints serve, so lastSeen, lastDataTimestamp,
connection status and fault counts agree with what a client downloads.
"""

from __future__ import annotations

import math

import numpy as np

from devmon_sync.api_contract import FORMULA_FIELD
from devmon_sync.server import series
from devmon_sync.server.catalogue import GNSS_UNITS
from devmon_sync.server.clock import iso
from devmon_sync.server.gnss import LATLON_SRID
from devmon_sync.server.world import Device, Group, Parameter, Sensor, Site, World

# ----------------------------------------------------------------------------- sites

def projection_view(p) -> dict:
    out = {"id": p.id, "label": p.label, "projectionType": p.projection_type}
    if p.projection_type == "standard":
        out["srid"] = p.srid
    else:
        out["projString"] = p.proj_string
    out["verticalDatum"] = p.vertical_datum
    out["heightType"] = p.height_type
    return out


def base_station_view(bs, enabled: bool | None = None) -> dict:
    out = {"id": bs.id, "type": bs.type, "name": bs.name, "status": bs.status}
    if enabled is not None:
        out["isEnabled"] = enabled
    return out


def site_gnss_view(site: Site) -> dict | None:
    """SiteGnssConfig (its fields are not shown by the spec): base stations and projections."""
    if not site.has_gnss:
        return None
    return {"baseStations": [base_station_view(b) for b in site.base_stations],
            "projections": [projection_view(p) for p in site.projections],
            "defaultProjectionId": site.default_projection_id}


def site_view(site: Site, devices: list[dict] | None = None) -> dict:
    out = {"uuid": site.uuid, "orgUuid": site.org_uuid, "name": site.name,
           "description": site.description, "timezone": site.timezone}
    if devices is not None:
        out["devices"] = devices
    out["gnss"] = site_gnss_view(site)
    return out  # Site.sharedBy is optional and not nullable (spec 2.1): no site is shared


# ----------------------------------------------------------------------------- devices

def connection_status(device: Device, last_seen: int | None, now_s: int) -> str:
    """Spec 3.3: online if on schedule, degraded after one missed transmission, offline
    after two or more, unknown without a schedule or before the first transmission."""
    if device.tx_s is None or last_seen is None:
        return "unknown"
    missed = (now_s - last_seen) // device.tx_s
    return "online" if missed <= 0 else "degraded" if missed == 1 else "offline"


def _last_window_faults(world: World, device: Device, last_seen: int | None) -> list[dict]:
    """Parameter faults of the last transmission, counted on the data actually served."""
    if last_seen is None or device.tx_s is None:
        return []
    errors = []
    for sensor in device.sensors:
        if not sensor.is_active or sensor.deleted or sensor.is_gnss:
            continue
        t = series.sample_times(device, sensor, last_seen - device.tx_s + 1, last_seen, last_seen)
        faults = []
        for p in sensor.params:
            if p.source_type != "raw" or p.fault_rate <= 0 or t.size == 0:
                continue
            bad = int(np.isnan(series.values(world, device, sensor, p, t)).sum())
            if bad:
                faults.append({"parameterAlias": p.alias, "summary": _fault_summary(p, bad, t.size)})
        if faults:
            errors.append({"sensorAlias": sensor.alias, "parameterFaults": faults})
    return errors


def _fault_summary(p: Parameter, bad: int, total: int) -> dict:
    what = "reading outside the sensor range" if p.fault_reason == "out_of_range" \
        else "no value received"
    return {"reason": p.fault_reason, "message": f"{bad} of {total} points: {what}",
            "faultyPointsCount": bad, "totalPointsCount": total}


def _memo(world: World, key: tuple, compute):
    """Cache in the world what depends only on a transmission time, not on the clock."""
    memo = world.memo
    if key not in memo:
        if len(memo) > 100_000:
            memo.clear()
        memo[key] = compute()
    return memo[key]


def health_view(world: World, device: Device, now_s: int) -> dict:
    last_seen = series.last_transmission_s(device, now_s)
    if device.tx_s is None:
        last_data = max((series.data_until_s(device, s, now_s) or 0 for s in device.sensors),
                        default=0) or None
    else:
        last_data = last_seen
    last_data = _memo(world, ("last sample", device.serial, last_data),
                      lambda: _last_sample(device, last_data, now_s))
    status = connection_status(device, last_seen, now_s)
    physical = device.kind == "physical"
    connection = {
        "status": status, "lastSeen": iso(last_seen),
        "signalStrength": device.signal,
        "error": {"code": 408, "message": "No transmission within the expected schedule"}
        if status == "offline" and device.state == "active" else None,
        "txSuccessRate": None if last_seen is None else round(
            99.5 - 3.0 * (device.index % 4) - (20.0 if status != "online" else 0.0), 1),
        "txProtocol": device.tx_protocol,
        "nextTxTimestamp": None if last_seen is None or device.state != "active"
        else iso(_next_tx(device, last_seen, now_s)),
    }
    if physical and any(m["type"] != "lte" for m in device.modems):
        connection["lteTxMode"] = "satellite" if device.index % 3 == 0 else "terrestrial"
    errors = _memo(world, ("faults", device.serial, last_seen),
                   lambda: _last_window_faults(world, device, last_seen))
    out = {"battery": dict(device.battery), "connection": connection,
           "sensors": {"status": "ok", "metadataError": None,
                       "errors": errors or None, "lastDataTimestamp": iso(last_data)}}
    if physical:
        out["powerSource"] = device.power_source
    return out


def _next_tx(device: Device, last_seen: int, now_s: int) -> int:
    k = max(1, math.ceil((now_s - last_seen) / device.tx_s))
    return last_seen + k * device.tx_s


def _last_sample(device: Device, until: int | None, now_s: int) -> int | None:
    """Newest sample time at or before ``until`` over the device's active sensors."""
    if until is None:
        return None
    newest = None
    for sensor in device.sensors:
        if sensor.deleted:
            continue
        t = series.sample_times(device, sensor, until - 3 * 86400, until, now_s)
        if t.size and (newest is None or t[-1] > newest):
            newest = int(t[-1])
    return newest


def parameter_view(device: Device, sensor: Sensor, p: Parameter, formulas: bool,
                   world: World | None = None, now_s: int | None = None) -> dict:
    out = {"uuid": p.uuid, "deviceSerialNumber": device.serial, "sensorUuid": sensor.uuid,
           "alias": p.alias, "name": p.name, "parameterType": p.parameter_type,
           "baseUnit": p.unit, "displayUnit": p.unit, "displayPrecision": p.precision,
           "suppressFaults": False, "sourceType": p.source_type, "readIndex": p.read_index,
           "deviceAlarmSupported": p.source_type == "raw" and not sensor.is_gnss,
           "createdAt": iso(p.created_s), "updatedAt": iso(p.updated_s),
           "parameterPath": {"deviceSerialNumber": device.serial, "sensorName": sensor.name,
                             "parameterName": p.name},
           "status": "ok", "configErrorMessage": ""}
    if p.fault_rate >= 0.01 and world is not None and now_s is not None:
        until = series.data_until_s(device, sensor, now_s)
        fault = _memo(world, ("last fault", p.uuid, until),
                      lambda: _last_fault(world, device, sensor, p, now_s))
        if fault:
            out["lastFaultSummary"], out["lastFaultTimestamp"] = fault
    if formulas and p.source_type == "derived":
        out[FORMULA_FIELD] = p.formula
    return out


def _last_fault(world, device, sensor, p, now_s) -> tuple[dict, str] | None:
    until = series.data_until_s(device, sensor, now_s)
    if until is None:
        return None
    t = series.sample_times(device, sensor, until - 2 * 86400, until, now_s)
    bad = np.isnan(series.values(world, device, sensor, p, t))
    if not bad.any():
        return None
    return _fault_summary(p, 1, 1), iso(int(t[bad][-1]))


def sensor_view(world: World, device: Device, sensor: Sensor, formulas: bool,
                now_s: int) -> dict:
    out = {"uuid": sensor.uuid, "model": sensor.model, "type": sensor.type,
           "physicalSensor": {"uuid": sensor.physical_uuid,
                              "serialNumber": sensor.physical_serial},
           "connectionType": sensor.connection_type, "name": sensor.name, "alias": sensor.alias,
           "deviceSerialNumber": device.serial,
           "parameters": [parameter_view(device, sensor, p, formulas, world, now_s)
                          for p in sensor.params],
           "channelIndex": sensor.index, "isActive": sensor.is_active,
           "health": {"status": "ok", "warnings": [], "errors": []},
           "attributes": list(sensor.attributes) if sensor.attributes else None,
           "lastActivatedAt": iso(sensor.active_from_s),
           "lastDeactivatedAt": iso(sensor.active_until_s)}
    if not sensor.is_active:
        out["health"]["warnings"] = ["Sensor is not active on the device firmware"]
    return out


def visible_sensors(device: Device, include_inactive: bool) -> list[Sensor]:
    return [s for s in device.sensors if not s.deleted and (include_inactive or s.is_active)]


def device_view(world: World, device: Device, now_s: int, *, sensors: bool = False,
                include_inactive: bool = False, formulas: bool = False,
                internal: bool = False, derived: bool = False) -> dict:
    """Device record of spec 2.2.  ``derived`` adds ``derivedParameters`` next to sensors,
    as the device-group and by-serial-number responses do."""
    d = device
    last_seen = series.last_transmission_s(d, now_s)
    out = {"deviceKind": d.kind, "serialNumber": d.serial, "alias": d.alias,
           "description": d.description, "name": d.name, "orgUuid": d.org_uuid,
           "legacyDeviceId": d.legacy_id,
           "site": {"uuid": d.site.uuid, "name": d.site.name} if d.site else None,
           "location": {"lat": round(d.lat, 7), "lon": round(d.lon, 7)} if d.site else None,
           "samplingPeriodSeconds": d.sampling_s, "txPeriodSeconds": d.tx_s,
           "state": d.state, "health": health_view(world, d, now_s),
           "lastTxTimestamp": iso(last_seen), "product": d.role.product if d.kind == "physical"
           else None, "hardware": d.hardware, "modems": list(d.modems),
           "firmware": d.firmware}
    if sensors:
        shown = visible_sensors(d, include_inactive)
        out["sensors"] = [sensor_view(world, d, s, formulas, now_s) for s in shown]
        if derived:
            out["derivedParameters"] = [parameter_view(d, s, p, formulas, world, now_s)
                                        for s in shown for p in s.params
                                        if p.source_type == "derived"]
    out["tags"] = list(d.tags)
    out["queuedCommand"] = d.queued_command
    out["gnss"] = d.gnss_config
    out["sharedBy"] = None
    if internal:
        out["_internal"] = d.internal
    return out


# ----------------------------------------------------------------------------- groups

def group_view(world: World, group: Group, now_s: int, visible, *, devices: bool,
               sensors: bool) -> dict:
    out = {"uuid": group.uuid, "name": group.name, "description": group.description,
           "parentUuid": group.parent_uuid}
    if devices:
        out["devices"] = [device_view(world, world.device_by_serial[sn], now_s, sensors=sensors,
                                      include_inactive=sensors, formulas=sensors,
                                      derived=sensors)
                          for sn in group.device_serials if visible(world.device_by_serial[sn])]
    out["children"] = [group_view(world, world.group_by_uuid[c], now_s, visible,
                                  devices=devices, sensors=sensors)
                       for c in group.children if group_visible(world, world.group_by_uuid[c],
                                                                visible)]
    return out


def group_visible(world: World, group: Group, visible) -> bool:
    """A group is visible to a key when it holds, or nests, a device the key may see."""
    if any(visible(world.device_by_serial[sn]) for sn in group.device_serials):
        return True
    return any(group_visible(world, world.group_by_uuid[c], visible) for c in group.children)


# ----------------------------------------------------------------------------- data items

def series_item(device: Device, sensor: Sensor, p: Parameter, data: list[dict],
                latest: bool) -> dict:
    """Reading series item of spec 2.7 (``latest`` adds that variant's extra fields)."""
    out = {"deviceSerialNumber": device.serial, "deviceAlias": device.display_name}
    if latest:
        out["legacyDeviceId"] = device.legacy_id
    out.update({"sensorUuid": sensor.uuid, "sensorAlias": sensor.alias})
    if latest:
        out["channelIndex"] = sensor.index
    out.update({"sensorStatus": "ok", "parameterUuid": p.uuid, "parameterName": p.name,
                "parameterAlias": p.alias, "parameterSourceType": p.source_type,
                "parameterStatus": "ok"})
    if latest:
        out["displayPrecision"] = p.precision
    out["unit"] = p.unit
    out["data"] = data
    return out


def gnss_item_head(device: Device, sensor: Sensor, base_ids: set[int]) -> dict:
    """GNSS solution item of spec 2.8, all but ``data``."""
    stations = device.site.base_stations if device.site else ()
    current = (device.gnss_config.get("baseStation") or {}).get("id")
    return {"deviceSerialNumber": device.serial, "deviceAlias": device.display_name,
            "legacyDeviceId": device.legacy_id, "sensorUuid": sensor.uuid,
            "sensorAlias": sensor.alias, "channelIndex": sensor.index, "sensorStatus": "ok",
            "srid": LATLON_SRID,
            "projectionMetadata": [projection_view(p) for p in
                                   (device.site.projections if device.site else ())],
            "baseStations": [base_station_view(b, b.id == current) for b in stations
                             if b.id in base_ids or b.id == current],
            "data": [], "units": dict(GNSS_UNITS)}

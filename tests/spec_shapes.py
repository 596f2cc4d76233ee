"""Field names, types, nullability and enumerations of spec section 2, written from the spec.

Independent of the server's code on purpose: the tests compare what the server sends with
what the specification says, not with what the server's own views meant to send.
Each checker returns a list of problems (empty when the object conforms).
"""

from __future__ import annotations

import re
from datetime import datetime

UUID4 = re.compile(r"^[0-9a-f]{8}-[0-9a-f]{4}-4[0-9a-f]{3}-[89ab][0-9a-f]{3}-[0-9a-f]{12}$")
MAX_SAFE = 9007199254740991

DEVICE_KINDS = {"physical", "weather", "virtual"}
DEVICE_STATES = {"testing", "inventory", "unprovisioned", "provisioned", "deployed", "active",
                 "suspended", "overdue", "retired"}
CONNECTION_STATUSES = {"online", "offline", "degraded", "unknown"}
COMMAND_STATUSES = {"processing", "queued", "received", "cancelled", "expired", "failed"}
SIGNAL_QUALITIES = {"no_signal", "weak", "ok", "good"}
FAULT_REASONS = {"null_value", "out_of_range", "evaluation_error"}
SENSOR_TYPES = {
    "absolute_pressure", "gauge_pressure", "absolute_pressure_conductivity", "barometer",
    "weather", "vibrating_wire", "pulse_rain", "pulse_water_meter", "dust", "radar", "ph",
    "soil_moisture", "gauge_pressure_temp", "oxygen_gas", "ultrasonic_flow", "ma420", "wind",
    "ultrasonic_distance", "bubbler_level", "inclinometer", "conductivity", "turbidity",
    "lightning", "orp", "dissolved_oxygen", "conductivity_ph", "linear_displacement"}


def _is(kind: str, v) -> bool:
    if kind == "str":
        return isinstance(v, str)
    if kind == "num":
        return isinstance(v, (int, float)) and not isinstance(v, bool)
    if kind == "int":
        return isinstance(v, int) and not isinstance(v, bool) and abs(v) <= MAX_SAFE
    if kind == "bool":
        return isinstance(v, bool)
    if kind == "obj":
        return isinstance(v, dict)
    if kind == "arr":
        return isinstance(v, list)
    if kind == "uuid":
        return isinstance(v, str) and bool(UUID4.match(v))
    if kind == "time":
        return isinstance(v, str) and v.endswith("Z") and _parses(v)
    if isinstance(kind, (set, frozenset)):
        return v in kind
    raise AssertionError(kind)


def _parses(v: str) -> bool:
    try:
        datetime.fromisoformat(v.replace("Z", "+00:00"))
        return True
    except ValueError:
        return False


def check(obj, fields: dict, where: str, optional: set[str] = frozenset(),
          extra_ok: set[str] = frozenset()) -> list[str]:
    """``fields``: name -> type, or (type, "null") for nullable.  Every non-optional field
    must be present; no field outside ``fields`` and ``extra_ok`` may appear."""
    if not isinstance(obj, dict):
        return [f"{where}: not an object"]
    problems = []
    for name, kind in fields.items():
        nullable = isinstance(kind, tuple)
        kind = kind[0] if nullable else kind
        if name not in obj:
            if name not in optional:
                problems.append(f"{where}.{name}: missing")
            continue
        v = obj[name]
        if v is None:
            if not nullable:
                problems.append(f"{where}.{name}: null but not nullable")
        elif not _is(kind, v):
            problems.append(f"{where}.{name}: {v!r} is not {kind}")
    unknown = set(obj) - set(fields) - set(extra_ok)
    problems += [f"{where}.{k}: not in the spec" for k in sorted(unknown)]
    return problems


N = "null"


def check_site(s: dict) -> list[str]:
    p = check(s, {"uuid": "uuid", "orgUuid": "uuid", "name": "str", "description": ("str", N),
                  "timezone": ("str", N), "devices": ("arr", N), "gnss": ("obj", N),
                  "sharedBy": "obj"}, "site", optional={"devices", "gnss", "sharedBy"})
    for d in s.get("devices") or ():
        p += check_device(d)
    return p


def check_device(d: dict, derived: bool = False) -> list[str]:
    where = f"device {d.get('serialNumber')}"
    p = check(d, {
        "deviceKind": DEVICE_KINDS, "serialNumber": "str", "alias": ("str", N),
        "description": ("str", N), "name": ("str", N), "orgUuid": "uuid",
        "legacyDeviceId": ("int", N), "site": ("obj", N), "location": ("obj", N),
        "samplingPeriodSeconds": ("num", N), "txPeriodSeconds": ("num", N),
        "state": DEVICE_STATES, "health": "obj", "lastTxTimestamp": ("time", N),
        "product": ("str", N), "hardware": ("obj", N), "modems": "arr", "firmware": ("obj", N),
        "sensors": "arr", "tags": "arr", "queuedCommand": ("obj", N), "gnss": ("obj", N),
        "sharedBy": ("obj", N), "_internal": "obj", "derivedParameters": "arr"},
        where, optional={"sensors", "_internal", "derivedParameters"})
    if d.get("site") is not None:
        p += check(d["site"], {"uuid": "uuid", "name": "str"}, f"{where}.site")
    if d.get("location") is not None:
        p += check(d["location"], {"lat": "num", "lon": "num"}, f"{where}.location")
    if d.get("hardware") is not None:
        p += check(d["hardware"], {"model": "str", "revision": "str"}, f"{where}.hardware")
    if d.get("firmware") is not None:
        p += check(d["firmware"], {"string": "str", "version": "str"}, f"{where}.firmware")
    for m in d.get("modems", []):
        p += check(m, {"type": "str", "model": "str", "imei": ("str", N), "iccid": ("str", N),
                       "uuid": ("str", N)}, f"{where}.modem", optional={"imei", "iccid", "uuid"})
    for t in d.get("tags", []):
        p += check(t, {"id": "num", "name": "str", "colour": ("str", N)}, f"{where}.tag")
    if d.get("queuedCommand") is not None:
        p += check(d["queuedCommand"], {"uuid": "uuid", "status": COMMAND_STATUSES,
                                        "createdAt": "time"}, f"{where}.queuedCommand")
    if d.get("gnss") is not None:
        p += check_device_gnss(d["gnss"], where)
    if "_internal" in d:
        p += check(d["_internal"], {"peripheralId": "num", "metadata": ("obj", N),
                                    "config": ("obj", N)}, f"{where}._internal")
    p += check_health(d.get("health"), where)
    for s in d.get("sensors", []):
        p += check_sensor(s)
    for q in d.get("derivedParameters", []):
        p += check_parameter(q)
    return p


def check_device_gnss(g: dict, where: str) -> list[str]:
    p = check(g, {"processingMode": ({"static", "kinematic"}, N), "antennaType": ("str", N),
                  "arpHeight": ("num", N), "azimuth": ("num", N),
                  "enableLeverArmCompensation": "bool", "isBaseStation": "bool",
                  "baseStation": ("obj", N)}, f"{where}.gnss")
    if g.get("baseStation") is not None:
        p += check(g["baseStation"], {"id": "num", "type": {"cors", "private", "device"},
                                      "name": "str", "status": "str"},
                   f"{where}.gnss.baseStation")
    return p


def check_health(h, where: str) -> list[str]:
    p = check(h, {"battery": "obj", "connection": "obj", "sensors": "obj",
                  "powerSource": ({"battery", "external"}, N)}, f"{where}.health",
              optional={"powerSource"})
    if p:
        return p
    p += check(h["battery"], {"voltage": ("num", N), "percentage": ("num", N),
                              "remaining": ("str", N), "isCharging": ("bool", N)},
               f"{where}.battery")
    c = h["connection"]
    p += check(c, {"status": CONNECTION_STATUSES, "lastSeen": ("time", N),
                   "signalStrength": ("obj", N), "error": ("obj", N),
                   "txSuccessRate": ("num", N), "txProtocol": ({"coap", "mqtt"}, N),
                   "lteTxMode": {"terrestrial", "satellite"}, "nextTxTimestamp": ("time", N)},
               f"{where}.connection", optional={"lteTxMode"})
    if c.get("signalStrength") is not None:
        p += check(c["signalStrength"], {"rssi": ("num", N), "rsrp": ("num", N),
                                         "rsrq": ("num", N),
                                         "signalQuality": (SIGNAL_QUALITIES, N)},
                   f"{where}.signalStrength")
    if c.get("error") is not None:
        p += check(c["error"], {"code": "num", "message": ("str", N)}, f"{where}.error")
    s = h["sensors"]
    p += check(s, {"status": "str", "metadataError": ("obj", N), "errors": ("arr", N),
                   "lastDataTimestamp": ("time", N)}, f"{where}.health.sensors")
    for e in s.get("errors") or ():
        p += check(e, {"sensorAlias": "str", "parameterFaults": "arr"}, f"{where}.errors")
        for f in e.get("parameterFaults", []):
            p += check(f, {"parameterAlias": "str", "summary": "obj"}, f"{where}.fault")
            p += check_fault_summary(f.get("summary"), f"{where}.fault.summary")
    return p


def check_fault_summary(s, where: str) -> list[str]:
    return check(s, {"reason": FAULT_REASONS, "message": "str", "faultyPointsCount": "num",
                     "totalPointsCount": "num"}, where)


def check_sensor(s: dict) -> list[str]:
    where = f"sensor {s.get('uuid')}"
    p = check(s, {"uuid": "uuid", "model": "str", "type": SENSOR_TYPES, "physicalSensor": "obj",
                  "connectionType": {"integrated", "external"}, "name": "str", "alias": "str",
                  "deviceSerialNumber": "str", "parameters": "arr", "channelIndex": "num",
                  "isActive": "bool", "health": "obj", "attributes": ("arr", N),
                  "lastActivatedAt": ("time", N), "lastDeactivatedAt": ("time", N)}, where,
              optional={"attributes", "lastActivatedAt", "lastDeactivatedAt"})
    p += check(s.get("health"), {"status": "str", "warnings": "arr", "errors": "arr"},
               f"{where}.health")
    for q in s.get("parameters", []):
        p += check_parameter(q)
    for a in s.get("attributes") or ():
        p += check_attribute(a, where)
    return p


def check_parameter(q: dict) -> list[str]:
    where = f"parameter {q.get('uuid')}"
    p = check(q, {"uuid": "uuid", "deviceSerialNumber": "str", "sensorUuid": "uuid",
                  "alias": "str", "name": "str", "parameterType": "str", "baseUnit": "str",
                  "displayUnit": "str", "displayPrecision": "num", "suppressFaults": "bool",
                  "sourceType": {"raw", "derived"}, "readIndex": "num",
                  "deviceAlarmSupported": "bool", "createdAt": "time", "updatedAt": "time",
                  "parameterPath": "obj", "status": "str", "configErrorMessage": "str",
                  "lastFaultSummary": "obj", "lastFaultTimestamp": "time"}, where,
              optional={"lastFaultSummary", "lastFaultTimestamp"}, extra_ok={"formula"})
    p += check(q.get("parameterPath"), {"deviceSerialNumber": "str", "sensorName": "str",
                                        "parameterName": "str"}, f"{where}.parameterPath")
    if "lastFaultSummary" in q:
        p += check_fault_summary(q["lastFaultSummary"], f"{where}.lastFaultSummary")
    return p


def check_attribute(a: dict, where: str) -> list[str]:
    p = check(a, {"uuid": "uuid", "sensorUuid": "uuid", "physicalSensorUuid": "uuid",
                  "behaviour": "str", "name": "str", "alias": "str", "description": "str",
                  "unit": "str", "valueType": "str", "value": "num", "attributeSource": "str",
                  "function": "str", "parameterType": "str", "timestamp": "time",
                  "updatedAt": "time", "optionSet": "obj", "template": "obj"}, f"{where}.attr")
    p += check(a.get("optionSet"), {"uuid": "uuid", "name": "str", "description": "str",
                                    "orgUuid": "uuid", "optionsType": "str", "options": "arr",
                                    "allowCustomValue": "bool"}, f"{where}.optionSet")
    p += check(a.get("template"), {"uuid": "uuid", "templateName": "str"}, f"{where}.template")
    return p


def check_group(g: dict) -> list[str]:
    where = f"group {g.get('uuid')}"
    p = check(g, {"uuid": "uuid", "name": "str", "description": "str", "parentUuid": "str",
                  "devices": "arr", "children": "arr"}, where, optional={"devices"})
    for d in g.get("devices", []):
        p += check_device(d)
    for c in g.get("children", []):
        p += check_group(c)
    return p


def check_series_item(it: dict, latest: bool) -> list[str]:
    fields = {"deviceSerialNumber": "str", "deviceAlias": "str", "sensorUuid": "uuid",
              "sensorAlias": "str", "sensorStatus": "str", "parameterUuid": "uuid",
              "parameterName": "str", "parameterAlias": "str",
              "parameterSourceType": {"raw", "derived"}, "parameterStatus": "str",
              "unit": "str", "data": "arr"}
    if latest:
        fields.update({"legacyDeviceId": "int", "channelIndex": "num", "displayPrecision": "num"})
    p = check(it, fields, f"series {it.get('parameterUuid')}")
    for point in it.get("data", [])[:50]:
        p += check(point, {"timestamp": "time", "value": ("num", N)}, "point")
    return p


def check_gnss_item(it: dict) -> list[str]:
    where = f"gnss {it.get('deviceSerialNumber')}"
    p = check(it, {"deviceSerialNumber": "str", "deviceAlias": "str", "legacyDeviceId": "int",
                   "sensorUuid": "uuid", "sensorAlias": "str", "channelIndex": "num",
                   "sensorStatus": "str", "srid": "int", "projectionMetadata": "arr",
                   "baseStations": "arr", "data": "arr", "units": "obj"}, where)
    for pm in it.get("projectionMetadata", []):
        common = {"id": "num", "label": "str", "projectionType": {"standard", "proj_string"},
                  "verticalDatum": ("str", N), "heightType": {"orthometric", "ellipsoidal"}}
        extra = {"srid": "int"} if pm.get("projectionType") == "standard" \
            else {"projString": "str"}
        p += check(pm, {**common, **extra}, f"{where}.projection")
    for bs in it.get("baseStations", []):
        p += check(bs, {"id": "num", "type": {"cors", "private", "device"}, "name": "str",
                        "status": "str", "isEnabled": "bool"}, f"{where}.baseStation")
    for ep in it.get("data", [])[:200]:
        p += check_epoch(ep, where)
    return p


def check_epoch(ep: dict, where: str) -> list[str]:
    num = "num"
    p = check(ep, {"id": num, "timestamp": "time", "bs": num, "lat": num, "lon": num, "eh": num,
                   "oh": num, "quality": "obj", "roll": num, "pitch": num, "dE": num, "dN": num,
                   "dU": num, "d2d": num, "d3d": num, "vE": (num, N), "vN": (num, N),
                   "vU": (num, N), "proj": "obj", "debug": "obj"}, f"{where}.epoch")
    p += check(ep.get("quality"), {k: num for k in ("sdn", "sde", "sdu", "q", "ns", "ar")},
               f"{where}.quality")
    for v in (ep.get("proj") or {}).values():
        p += check(v, {"e": num, "n": num, "h": num}, f"{where}.proj")
    p += check(ep.get("debug"), {"ps": "str", "err": ("num", N), "at": "time", "gw": num,
                                 "gd": num, "gt": num, "log": "str"}, f"{where}.debug")
    return p

"""Whether the metadata answers hold everything a mirror keeps, judged from the answers.

The spec names the options of GET /devices and GET /device-groups only by purpose, so a
service may refuse devmon's names for them (400 "Unknown query parameter") or accept and
ignore them.  Either way the list then lacks something the spec says exists: inactive
sensors (whose archived data a mirror keeps), formulas of derived parameters, the devices of
each group, or whole devices a capped list left out.  The answers themselves tell: other
routes the spec offers name what the list should have held, and a derived parameter with no
formula shows the option was ignored.  These pure functions read those signs; the sync
engine then asks the spec's full routes (GET /devices/{sn}, GET /device-groups/{uuid}).
"""

from __future__ import annotations

from collections.abc import Iterable

from devmon_sync.service_profile import FORMULA_FIELD


def listed_serials(devices: list[dict]) -> set[str]:
    return {d["serialNumber"] for d in devices if isinstance(d.get("serialNumber"), str)}


def named_elsewhere(sites: list[dict], groups: dict) -> set[str]:
    """Serial numbers GET /sites?includeDevices=true and GET /device-groups name."""
    out = {d.get("serialNumber") for s in sites for d in s.get("devices") or ()}
    out |= {d.get("serialNumber") for d in groups.get("ungrouped") or ()}
    out |= {d.get("serialNumber") for g in _all_groups(groups.get("grouped") or ())
            for d in g.get("devices") or ()}
    return {sn for sn in out if isinstance(sn, str)}


def without_formulas(devices: list[dict]) -> set[str]:
    """Devices listing a derived parameter without its formula (the option was ignored)."""
    return {d["serialNumber"] for d in devices
            if any(p.get("sourceType") == "derived" and FORMULA_FIELD not in p
                   for s in d.get("sensors") or () for p in s.get("parameters") or ())}


def without_internal(devices: list[dict]) -> bool:
    """True when no device carries ``_internal`` although it was asked for."""
    return bool(devices) and not any("_internal" in d for d in devices)


def groups_without_devices(groups: dict) -> bool:
    """True when groups came without their device lists (includeDevices ignored)."""
    tree = list(_all_groups(groups.get("grouped") or ()))
    return bool(tree) and not any("devices" in g for g in tree)


def unknown_owners(latest_items: list[dict], known_parameters: set[str]) -> set[str]:
    """Devices owning a parameter /sensor-data/latest reports but the device list did not
    hold: sensors the list left out (inactive ones, when the option was ignored)."""
    return {item.get("deviceSerialNumber") for item in latest_items
            if isinstance(item.get("deviceSerialNumber"), str)
            and _parameter_uuid(item) not in known_parameters
            and _parameter_uuid(item) is not None}


def with_full_records(devices: list[dict], full: dict[str, dict]) -> list[dict]:
    """The device list with the records the full route gave put in place (and those it did
    not list added), each as the list would carry it: ``derivedParameters`` sits next to the
    sensors in the full route only, and the list holds derived parameters in its sensors."""
    merged = {d["serialNumber"]: d for d in devices}
    for serial, record in full.items():
        merged[serial] = {k: v for k, v in record.items() if k != "derivedParameters"}
    return [merged[sn] for sn in sorted(merged)]


def _all_groups(groups: Iterable[dict]) -> Iterable[dict]:
    for g in groups:
        if isinstance(g, dict):
            yield g
            yield from _all_groups(g.get("children") or ())


def _parameter_uuid(item: dict) -> str | None:
    value = item.get("parameterUuid")
    return value.lower() if isinstance(value, str) else None

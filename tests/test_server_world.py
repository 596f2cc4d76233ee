"""The reference world over HTTP: spec shapes, richness, consistency, paging, groups."""

from __future__ import annotations

from datetime import datetime, timedelta

from support import NOW, Api, serials_in_groups
from spec_shapes import (
    CONNECTION_STATUSES,
    DEVICE_KINDS,
    DEVICE_STATES,
    check_device,
    check_group,
    check_sensor,
    check_site,
)


def _t(text: str) -> datetime:
    return datetime.fromisoformat(text.replace("Z", "+00:00"))


def test_sites_match_the_spec_with_and_without_devices(api):
    plain = api.ok("get", "/sites")["items"]
    assert len(plain) == 6 and all("devices" not in s for s in plain)
    full = api.ok("get", "/sites", includeDevices="true", includeSensors="true")["items"]
    problems = [p for s in full for p in check_site(s)]
    assert not problems, problems[:20]
    assert any(s["devices"] and "sensors" in s["devices"][0] for s in full)
    only = api.ok("get", "/sites", uuids=[plain[0]["uuid"], plain[2]["uuid"]])["items"]
    assert [s["uuid"] for s in only] == [plain[0]["uuid"], plain[2]["uuid"]]


def test_sites_have_timezones_some_none_and_gnss_projections(api):
    sites = api.ok("get", "/sites")["items"]
    zones = [s["timezone"] for s in sites]
    assert None in zones and any(z and "/" in z for z in zones)
    gnss_sites = [s for s in sites if s["gnss"]]
    assert gnss_sites
    for s in gnss_sites:
        kinds = {p["projectionType"] for p in s["gnss"]["projections"]}
        assert kinds == {"standard", "proj_string"}
        assert {b["type"] for b in s["gnss"]["baseStations"]} == {"cors", "private", "device"}


def test_every_device_matches_the_spec(all_devices):
    problems = [p for d in all_devices for p in check_device(d)]
    assert not problems, problems[:20]


def test_world_shows_every_kind_state_and_status(all_devices):
    assert {d["deviceKind"] for d in all_devices} == DEVICE_KINDS
    assert {d["state"] for d in all_devices} == DEVICE_STATES
    statuses = {d["health"]["connection"]["status"] for d in all_devices}
    assert statuses == CONNECTION_STATUSES
    assert any(d["site"] is None for d in all_devices)
    assert any(d["alias"] is None and d["name"] for d in all_devices)
    assert any({m["type"] for m in d["modems"]} > {"lte"} for d in all_devices)
    assert any(d["queuedCommand"] for d in all_devices)
    assert any(d["tags"] for d in all_devices)
    assert any(d["gnss"] and d["gnss"]["isBaseStation"] for d in all_devices)
    assert any(d["health"]["sensors"]["errors"] for d in all_devices)
    assert any(d["legacyDeviceId"] == 9007199254740991 for d in all_devices)
    types = {s["type"] for d in all_devices for s in d.get("sensors", [])}
    assert len(types) >= 12, types


def test_connection_status_agrees_with_last_seen_and_tx_period(all_devices):
    for d in all_devices:
        c = d["health"]["connection"]
        period = d["txPeriodSeconds"]
        if c["status"] == "unknown":
            assert period is None or c["lastSeen"] is None, d["serialNumber"]
            continue
        missed = (NOW - _t(c["lastSeen"])) // timedelta(seconds=period)
        expected = "online" if missed == 0 else "degraded" if missed == 1 else "offline"
        assert c["status"] == expected, d["serialNumber"]
        assert d["lastTxTimestamp"] == c["lastSeen"]


def test_last_data_timestamp_is_the_newest_point_served(api, all_devices):
    latest = api.ok("post", "/sensor-data/latest", {})["items"]
    newest: dict[str, str] = {}
    for item in latest:
        for point in item["data"]:
            sn = item["deviceSerialNumber"]
            newest[sn] = max(newest.get(sn, ""), point["timestamp"])
    for d in all_devices:
        assert d["health"]["sensors"]["lastDataTimestamp"] == newest.get(d["serialNumber"]), \
            d["serialNumber"]


def test_paging_walks_every_device_once(api):
    everything = api.ok("get", "/devices", limit=500)["items"]
    assert len(everything) == 48
    pages, offset = [], 0
    while True:
        page = api.ok("get", "/devices", limit=7, offset=offset)["items"]
        pages += page
        if len(page) < 7:
            break
        offset += 7
    assert [d["serialNumber"] for d in pages] == [d["serialNumber"] for d in everything]
    assert len({d["serialNumber"] for d in pages}) == 48
    assert len(api.ok("get", "/devices")["items"]) == 48  # default page size 100


def test_device_filters(api, all_devices):
    site = next(d["site"] for d in all_devices if d["site"])
    at_site = api.ok("get", "/devices", siteUuid=site["uuid"], limit=500)["items"]
    assert at_site and all(d["site"]["uuid"] == site["uuid"] for d in at_site)
    physical = api.ok("get", "/devices", deviceKind="physical", limit=500)["items"]
    assert {d["deviceKind"] for d in physical} == {"physical"}
    serials = [all_devices[0]["serialNumber"], all_devices[5]["serialNumber"]]
    chosen = api.ok("get", "/devices", serialNumbers=serials)["items"]
    assert sorted(d["serialNumber"] for d in chosen) == sorted(serials)
    plain = api.ok("get", "/devices", serialNumbers=serials)["items"][0]
    assert "sensors" not in plain and "_internal" not in plain


def test_inactive_sensors_and_formulas_only_when_asked(api, all_devices):
    with_inactive = next(d for d in all_devices if any(not s["isActive"] for s in d["sensors"]))
    sn = with_inactive["serialNumber"]
    default = api.ok("get", "/devices", serialNumbers=sn, includeSensors="true")["items"][0]
    assert all(s["isActive"] for s in default["sensors"])
    assert len(default["sensors"]) < len(with_inactive["sensors"])
    old = next(s for s in with_inactive["sensors"] if not s["isActive"])
    assert old["lastDeactivatedAt"] is not None
    derived = [p for s in default["sensors"] for p in s["parameters"]
               if p["sourceType"] == "derived"]
    assert derived and all("formula" not in p for p in derived)
    assert all(p["formula"] for s in with_inactive["sensors"] for p in s["parameters"]
               if p["sourceType"] == "derived")


def test_device_by_serial_number_is_complete(api, all_devices):
    d = next(d for d in all_devices if any(not s["isActive"] for s in d["sensors"]))
    full = api.ok("get", f"/devices/{d['serialNumber']}")["items"]
    assert len(full) == 1
    problems = check_device(full[0])
    assert not problems, problems
    assert len(full[0]["sensors"]) == len(d["sensors"])
    derived = full[0]["derivedParameters"]
    assert derived and all(p["sourceType"] == "derived" and p["formula"] for p in derived)


def test_sensor_by_uuid_and_attributes(api, all_devices):
    sensors = [s for d in all_devices for s in d["sensors"]]
    with_attrs = next(s for s in sensors if s.get("attributes"))
    got = api.ok("get", f"/sensors/{with_attrs['uuid']}")
    assert not check_sensor(got)
    assert got["attributes"] == with_attrs["attributes"]


def test_groups_nest_and_ungrouped_devices_are_listed(api, all_devices):
    answer = api.ok("get", "/device-groups", includeDevices="true", includeSensors="true",
                    includeUngrouped="true")
    problems = [p for g in answer["grouped"] for p in check_group(g)]
    problems += [p for d in answer["ungrouped"] for p in check_device(d)]
    assert not problems, problems[:20]
    depth = max(_depth(g) for g in answer["grouped"])
    assert depth >= 3
    grouped = serials_in_groups(answer["grouped"])
    ungrouped = {d["serialNumber"] for d in answer["ungrouped"]}
    assert ungrouped and not grouped & ungrouped
    assert grouped | ungrouped == {d["serialNumber"] for d in all_devices}
    assert api.ok("get", "/device-groups")["ungrouped"] == []
    assert all("devices" not in g for g in api.ok("get", "/device-groups")["grouped"])


def test_one_group_by_uuid_and_group_filter(api):
    roots = api.ok("get", "/device-groups")["grouped"]
    site_group = roots[0]["children"][0]
    one = api.ok("get", f"/device-groups/{site_group['uuid']}")
    assert one["uuid"] == site_group["uuid"] and one["parentUuid"] == roots[0]["uuid"]
    assert not check_group(one)
    subtree = serials_in_groups([one])
    listed = api.ok("get", "/devices", groupUuid=site_group["uuid"], limit=500)["items"]
    assert {d["serialNumber"] for d in listed} == subtree
    filtered = api.ok("get", "/device-groups", uuids=site_group["uuid"])["grouped"]
    assert [g["uuid"] for g in filtered] == [site_group["uuid"]]


def _depth(g) -> int:
    return 1 + max((_depth(c) for c in g["children"]), default=0)


def test_large_world_is_generated_lazily_and_serves_both_ends():
    from support import start_server
    with start_server(size=__import__("devmon_sync.server", fromlist=["WorldSize"]).WorldSize(
            sites=40, devices=500, days=730)) as srv:
        api = Api(srv.base_url)
        devices = api.ok("get", "/devices", limit=500)["items"]
        assert len(devices) == 500
        sn = next(d["serialNumber"] for d in devices if d["gnss"] and not d["gnss"]["isBaseStation"]
                  and d["state"] == "active")
        first = api.ok("post", "/sensor-data/gnss", {"deviceSerialNumbers": [sn],
                                                     "startDate": "2024-01-02T00:00:00Z",
                                                     "endDate": "2024-01-20T00:00:00Z"})
        last = api.ok("post", "/sensor-data/gnss", {"deviceSerialNumbers": [sn],
                                                    "startDate": "2025-12-20T00:00:00Z"})
        assert first["items"][0]["data"] and last["items"][0]["data"]

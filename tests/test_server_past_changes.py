"""Issue 27 point 10, the server side: a service whose world changes its past between syncs.

The ``changing-past`` contract's world changes at 06:00 of the clock's day.  Started before
(01:00) and after (12:00), its servers must differ in exactly the six changes that
``past.picks`` names: a late upload fills a recent and an old hole, a correction shifts one
device's readings, a rover is re-solved 4 mm higher, a device moves group, a sensor is
soft-deleted and a device is no longer listed (``tests/test_removed_devices.py``).  Everything else answers as the honest (default-contract) server does at the
same clock, byte for byte.
"""

from __future__ import annotations

import math
from datetime import datetime, timedelta
from types import SimpleNamespace

import pytest
from support import NOW, SMALL, Api, start_server

from devmon_sync.server import past
from devmon_sync.server.clock import DAY_S, iso
from devmon_sync.server.contracts import CONTRACTS, Contract

CHANGING = CONTRACTS["changing-past"]
BEFORE = NOW + timedelta(hours=1)
AFTER = NOW + timedelta(hours=12)
ANCHOR_S = int(NOW.timestamp())  # midnight of the clock's day, for both clocks


@pytest.fixture(scope="module")
def s():
    """The changing world before and after its change, and the honest world at both clocks."""
    with start_server(size=SMALL, now=BEFORE, contract=CHANGING) as before, \
            start_server(size=SMALL, now=AFTER, contract=CHANGING) as after, \
            start_server(size=SMALL, now=BEFORE) as honest_before, \
            start_server(size=SMALL, now=AFTER) as honest_after:
        yield SimpleNamespace(
            before=Api(before.base_url), after=Api(after.base_url),
            honest_before=Api(honest_before.base_url), honest_after=Api(honest_after.base_url),
            picks=past.picks(before.app.world), picks_after=past.picks(after.app.world),
            servers=(before, after, honest_before, honest_after))


def _s(stamp: str) -> int:
    return int(datetime.fromisoformat(stamp).timestamp())


def _points(api: Api, body: dict) -> dict[str, list[tuple[int, float | None]]]:
    """(seconds, value) of each parameter a POST /sensor-data answers, by parameter UUID."""
    items = api.ok("post", "/sensor-data", body)["items"]
    return {it["parameterUuid"]: [(_s(x["timestamp"]), x["value"]) for x in it["data"]]
            for it in items}


def _window(start_s: int, end_s: int, **more) -> dict:
    return {"startDate": iso(start_s), "endDate": iso(end_s), **more}


def _epochs(api: Api, serial: str, start_s: int, end_s: int) -> list[dict]:
    body = {"deviceSerialNumbers": [serial], **_window(start_s, end_s)}
    return api.ok("post", "/sensor-data/gnss", body)["items"][0]["data"]


def _memberships(api: Api) -> dict[str, set[str]]:
    """The serial numbers directly in each device group, by group UUID."""
    out: dict[str, set[str]] = {}

    def walk(groups: list[dict]) -> None:
        for g in groups:
            out[g["uuid"]] = {d["serialNumber"] for d in g["devices"]}
            walk(g["children"])

    walk(api.ok("get", "/device-groups", includeDevices="true")["grouped"])
    return out


def _device_serials(api: Api, **query) -> list[str]:
    return [d["serialNumber"] for d in api.ok("get", "/devices", limit=500, **query)["items"]]


def _sensor_uuids(device: dict) -> set[str]:
    return {x["uuid"] for x in device["sensors"]}


def _all_devices(api: Api) -> dict[str, dict]:
    items = api.ok("get", "/devices", includeSensors="true", includeInactiveSensors="true",
                   includeFormulas="true", includeInternal="true", limit=500)["items"]
    return {d["serialNumber"]: d for d in items}


# ----------------------------------------------------------------------------- the picks

def test_the_picks_name_distinct_devices_the_same_before_and_after(s):
    p = s.picks
    assert p == s.picks_after, "the changes moved the picks: tests could not name them"
    serials = [p.late_serial, p.old_hole_serial, p.corrected_serial, p.rover_serial,
               p.moved_serial, p.deleted_serial, p.removed_serial]
    assert None not in serials and len(set(serials)) == len(serials), p
    assert None not in (p.moved_from_group, p.moved_to_group, p.deleted_sensor_uuid), p
    assert p.moved_from_group != p.moved_to_group
    assert p.late_span == (ANCHOR_S - 3 * DAY_S, ANCHOR_S - DAY_S)
    assert p.old_hole_span == (ANCHOR_S - 18 * DAY_S, ANCHOR_S - 17 * DAY_S)
    assert p.corrected_span == (ANCHOR_S - 9 * DAY_S, ANCHOR_S - 2 * DAY_S)
    assert p.resolved_span == (ANCHOR_S - 16 * DAY_S, ANCHOR_S - 2 * DAY_S)
    assert past.change_s(ANCHOR_S, CHANGING) == ANCHOR_S + 6 * 3600


# ----------------------------------------------------------------------------- 1. late upload

@pytest.mark.parametrize("which", ["late", "old_hole"])
def test_a_late_upload_fills_a_hole_only_after_the_change(s, which):
    serial = getattr(s.picks, f"{which}_serial")
    a, b = getattr(s.picks, f"{which}_span")
    body = {"deviceSerialNumbers": [serial], **_window(a - DAY_S, b + DAY_S)}
    honest = _points(s.honest_before, body)
    assert honest and _points(s.honest_after, body) == honest
    for uuid, series in honest.items():  # the pick has data before, in and after the hole
        assert [t for t, _ in series if t < a] and [t for t, _ in series if t > b], uuid
        assert [t for t, _ in series if a <= t <= b], uuid
    before = _points(s.before, body)
    assert before == {u: [(t, v) for t, v in series if not a <= t <= b]
                      for u, series in honest.items()}
    assert _points(s.after, body) == honest


@pytest.mark.parametrize("which", ["late", "old_hole"])
def test_a_hole_moves_neither_the_newest_point_nor_last_data_timestamp(s, which):
    serial = getattr(s.picks, f"{which}_serial")
    for changing, honest in ((s.before, s.honest_before), (s.after, s.honest_after)):
        body = {"deviceSerialNumbers": [serial]}
        assert changing.post("/sensor-data/latest", body).content == \
            honest.post("/sensor-data/latest", body).content
        assert changing.get(f"/devices/{serial}").content == \
            honest.get(f"/devices/{serial}").content


# ----------------------------------------------------------------------------- 2. correction

def test_a_correction_adds_half_a_unit_inside_its_span_after_the_change(s):
    a, b = s.picks.corrected_span
    body = {"deviceSerialNumbers": [s.picks.corrected_serial], "disableRounding": True,
            **_window(a - DAY_S, b + DAY_S)}
    assert _points(s.before, body) == _points(s.honest_before, body)
    honest, after = _points(s.honest_after, body), _points(s.after, body)
    assert honest and set(after) == set(honest)
    inside = 0
    for uuid, series in honest.items():
        got = after[uuid]
        assert [t for t, _ in got] == [t for t, _ in series], uuid
        for (t, v), (_, w) in zip(series, got, strict=True):
            if v is None or not a <= t <= b:
                assert w == v, (uuid, iso(t))
            else:
                assert w == v + past.CORRECTION, (uuid, iso(t), v, w)
                inside += 1
    assert inside > 100


# ----------------------------------------------------------------------------- 3. re-solved GNSS

HEIGHTS = ("eh", "oh", "dU")


def test_a_rover_re_solved_with_final_orbits_is_4_mm_higher_inside_its_span(s):
    a, b = s.picks.resolved_span
    serial = s.picks.rover_serial
    before = _epochs(s.before, serial, a - DAY_S, b + DAY_S)
    assert before == _epochs(s.honest_before, serial, a - DAY_S, b + DAY_S)
    after = _epochs(s.after, serial, a - DAY_S, b + DAY_S)
    assert [(e["id"], e["timestamp"]) for e in after] == [(e["id"], e["timestamp"])
                                                          for e in before]
    inside = 0
    for old, new in zip(before, after, strict=True):
        if not a <= _s(old["timestamp"]) <= b:
            assert new == old
            continue
        inside += 1
        for name in HEIGHTS:
            assert abs(new[name] - old[name] - past.HEIGHT_CHANGE_M) < 2e-5, (name, old, new)
        for pid, xyz in old["proj"].items():
            assert abs(new["proj"][pid]["h"] - xyz["h"] - past.HEIGHT_CHANGE_M) < 2e-5
            assert (new["proj"][pid]["e"], new["proj"][pid]["n"]) == (xyz["e"], xyz["n"])
        assert abs(new["d3d"] - math.sqrt(new["dE"] ** 2 + new["dN"] ** 2 + new["dU"] ** 2)) \
            < 2e-5
        unchanged = set(old) - set(HEIGHTS) - {"d3d", "proj"}
        assert {k: new[k] for k in unchanged} == {k: old[k] for k in unchanged}
    assert inside > 24 * 10


def test_the_rover_s_field_series_carry_the_same_re_solution(s):
    """POST /sensor-data serves a rover's GNSS fields from the same epochs."""
    a, b = s.picks.resolved_span
    serial = s.picks.rover_serial
    device = s.after.ok("get", f"/devices/{serial}")["items"][0]
    gnss = next(x for x in device["sensors"] if x["type"] == "linear_displacement"
                and x["name"] == "gnss")
    by_name = {p["name"]: p["uuid"] for p in gnss["parameters"]}
    body = {"sensorUuids": [gnss["uuid"]], "disableRounding": True,
            **_window(a - DAY_S, b + DAY_S)}
    before, after = _points(s.before, body), _points(s.after, body)
    for name, uuid in by_name.items():
        for (t, v), (t2, w) in zip(before[uuid], after[uuid], strict=True):
            assert t == t2
            if name in HEIGHTS and a <= t <= b:
                assert abs(w - v - past.HEIGHT_CHANGE_M) < 1e-9, (name, iso(t))
            elif name != "d3d" or not a <= t <= b:
                assert w == v, (name, iso(t))


# ----------------------------------------------------------------------------- 4. group move

def test_a_device_moves_to_another_group_after_the_change(s):
    p = s.picks
    before, after = _memberships(s.before), _memberships(s.after)
    assert before == _memberships(s.honest_before)
    assert p.moved_serial in before[p.moved_from_group]
    assert p.moved_serial not in before[p.moved_to_group]
    assert p.moved_serial in after[p.moved_to_group]
    assert p.moved_serial not in after[p.moved_from_group]
    for uuid in before:  # the removed device leaves its group too (change 6)
        assert after[uuid] - {p.moved_serial} == before[uuid] - {p.moved_serial,
                                                                 p.removed_serial}, uuid
    one = s.after.ok("get", f"/device-groups/{p.moved_to_group}")
    assert p.moved_serial in {d["serialNumber"] for d in one["devices"]}
    assert p.moved_serial in _device_serials(s.before, groupUuid=p.moved_from_group)
    assert p.moved_serial not in _device_serials(s.before, groupUuid=p.moved_to_group)
    assert p.moved_serial in _device_serials(s.after, groupUuid=p.moved_to_group)
    assert p.moved_serial not in _device_serials(s.after, groupUuid=p.moved_from_group)


# ----------------------------------------------------------------------------- 5. deletion

def test_a_soft_deleted_sensor_disappears_from_every_listing_after_the_change(s):
    serial, sensor = s.picks.deleted_serial, s.picks.deleted_sensor_uuid
    for api, listed in ((s.before, True), (s.after, False)):
        one = api.ok("get", f"/devices/{serial}")["items"][0]
        assert (sensor in _sensor_uuids(one)) is listed
        assert (sensor in _sensor_uuids(_all_devices(api)[serial])) is listed
        sites = api.ok("get", "/sites", includeDevices="true", includeSensors="true")["items"]
        on_sites = {x for site in sites for d in site["devices"] if d["serialNumber"] == serial
                    for x in _sensor_uuids(d)}
        assert (sensor in on_sites) is listed
        assert api.get(f"/sensors/{sensor}").status_code == (200 if listed else 404)
    assert _sensor_uuids(_all_devices(s.after)[serial]), "the device keeps its other sensors"


def test_a_soft_deleted_sensor_s_data_is_served_only_when_deleted_data_is_asked_for(s):
    sensor, serial = s.picks.deleted_sensor_uuid, s.picks.deleted_serial
    window = _window(ANCHOR_S - 2 * DAY_S, ANCHOR_S)
    assert s.before.ok("post", "/sensor-data", {"sensorUuids": [sensor], **window})["items"]
    assert not s.after.ok("post", "/sensor-data", {"sensorUuids": [sensor], **window})["items"]
    by_device = s.after.ok("post", "/sensor-data", {"deviceSerialNumbers": [serial], **window})
    assert by_device["items"] and sensor not in {it["sensorUuid"] for it in by_device["items"]}
    latest = {"sensorUuids": [sensor]}
    assert s.before.ok("post", "/sensor-data/latest", latest)["items"]
    assert not s.after.ok("post", "/sensor-data/latest", latest)["items"]
    kept = s.after.ok("post", "/sensor-data/latest", {**latest, "includeDeleted": True})
    assert kept == s.honest_after.ok("post", "/sensor-data/latest", latest)
    assert all(it["data"] for it in kept["items"])


# ----------------------------------------------------------------------------- the rest

def _data_changed(p: past.Picks) -> set[str]:
    return {p.late_serial, p.old_hole_serial, p.corrected_serial, p.rover_serial,
            p.deleted_serial, p.removed_serial}


def test_before_the_change_only_the_holes_differ_from_the_honest_world(s):
    for path, query in (("/devices", {"includeSensors": "true", "limit": 500,
                                      "includeInactiveSensors": "true"}),
                        ("/device-groups", {"includeDevices": "true", "includeSensors": "true",
                                            "includeUngrouped": "true"}),
                        ("/sites", {"includeDevices": "true", "includeSensors": "true"})):
        assert s.before.get(path, **query).content == s.honest_before.get(path, **query).content
    assert s.before.post("/sensor-data/latest", {}).content == \
        s.honest_before.post("/sensor-data/latest", {}).content
    holes = {s.picks.late_serial, s.picks.old_hole_serial}
    _same_data_but(s.before, s.honest_before, holes, int(BEFORE.timestamp()))


def test_after_the_change_only_the_picks_differ_from_the_honest_world(s):
    p = s.picks
    after, honest = _all_devices(s.after), _all_devices(s.honest_after)
    assert p.removed_serial in honest and p.removed_serial not in after
    assert {sn: d for sn, d in after.items() if sn != p.deleted_serial} == \
        {sn: d for sn, d in honest.items() if sn not in (p.deleted_serial, p.removed_serial)}
    assert _sensor_uuids(honest[p.deleted_serial]) - _sensor_uuids(after[p.deleted_serial]) \
        == {p.deleted_sensor_uuid}
    moved_back = _memberships(s.after)
    moved_back[p.moved_to_group].discard(p.moved_serial)
    moved_back[p.moved_from_group].add(p.moved_serial)
    assert moved_back == {g: members - {p.removed_serial}
                          for g, members in _memberships(s.honest_after).items()}
    latest = s.after.ok("post", "/sensor-data/latest", {})["items"]
    honest_latest = s.honest_after.ok("post", "/sensor-data/latest", {})["items"]
    assert latest == [it for it in honest_latest if it["sensorUuid"] != p.deleted_sensor_uuid
                      and it["deviceSerialNumber"] != p.removed_serial]
    _same_data_but(s.after, s.honest_after, _data_changed(p), int(AFTER.timestamp()))


def _same_data_but(changing: Api, honest: Api, changed: set[str], now_s: int) -> None:
    """Every other device's readings and every other rover's epochs are byte-identical."""
    window = _window(ANCHOR_S - 20 * DAY_S, now_s)
    serials = [sn for sn in _device_serials(honest) if sn not in changed]
    assert len(serials) > 20
    for sn in serials:
        body = {"deviceSerialNumbers": [sn], "disableRounding": True, **window}
        assert changing.post("/sensor-data", body).content == \
            honest.post("/sensor-data", body).content, sn
        body = {"deviceSerialNumbers": [sn], **window}
        assert changing.post("/sensor-data/gnss", body).content == \
            honest.post("/sensor-data/gnss", body).content, sn


# ----------------------------------------------------------------------------- honest servers

def test_an_honest_server_has_no_past_to_change(s):
    before, after, honest_before, honest_after = s.servers
    assert honest_before.app.api.past is None and honest_after.app.api.past is None
    assert before.app.api.past is not None and after.app.api.past is not None


def test_a_negative_change_time_is_refused():
    with pytest.raises(ValueError, match="past_changes_h"):
        Contract("odd", past_changes_h=-1)

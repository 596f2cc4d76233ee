"""POST /sensor-data and /sensor-data/latest over HTTP: selectors, windows, rounding,
aggregation, limits, laziness and a clock that moves."""

from __future__ import annotations

from datetime import datetime, timedelta, timezone
from decimal import Decimal

import numpy as np
import pytest
from support import Api, start_server
from spec_shapes import check_series_item

from devmon_sync.api_contract import RANGE_TOO_LONG_PREFIX, TOO_MANY_POINTS_PREFIX

DAY = "2025-12-30T00:00:00Z"
END = "2025-12-31T00:00:00Z"


@pytest.fixture(scope="module")
def piezo(all_devices):
    """The piezometer logger that has a deactivated and a soft-deleted sensor."""
    return next(d for d in all_devices
                if any(not s["isActive"] for s in d["sensors"])
                and any(s["type"] == "vibrating_wire" for s in d["sensors"]))


def _params(device, active=True):
    return [p for s in device["sensors"] if s["isActive"] == active for p in s["parameters"]]


def test_selectors_are_a_union(api, piezo, all_devices):
    sensor = piezo["sensors"][0]
    other = next(d for d in all_devices if d["sensors"] and d is not piezo and d["state"] == "active")
    p_other = other["sensors"][0]["parameters"][0]
    path = {"deviceSerialNumber": piezo["serialNumber"], "sensorName": piezo["sensors"][1]["name"],
            "parameterName": piezo["sensors"][1]["parameters"][0]["name"]}
    body = {"sensorUuids": [sensor["uuid"]], "parameterUuids": [p_other["uuid"],
                                                                sensor["parameters"][0]["uuid"]],
            "parameterPaths": [path], "startDate": DAY, "endDate": END}
    items = api.ok("post", "/sensor-data", body)["items"]
    got = {it["parameterUuid"] for it in items}
    want = {p["uuid"] for p in sensor["parameters"]} | {p_other["uuid"],
                                                       piezo["sensors"][1]["parameters"][0]["uuid"]}
    assert got == want and len(items) == len(want)
    assert not [p for it in items for p in check_series_item(it, latest=False)]
    by_device = api.ok("post", "/sensor-data", {"deviceSerialNumbers": [piezo["serialNumber"]],
                                                "startDate": DAY, "endDate": END})["items"]
    assert {it["parameterUuid"] for it in by_device} == \
        {p["uuid"] for s in piezo["sensors"] for p in s["parameters"]}


def test_window_is_inclusive_ordered_and_desc_reverses(api, piezo):
    pid = _params(piezo)[0]["uuid"]
    body = {"parameterUuids": [pid], "startDate": "2025-12-30T00:00:00Z",
            "endDate": "2025-12-30T06:00:00Z"}
    asc = api.ok("post", "/sensor-data", body)["items"][0]["data"]
    stamps = [p["timestamp"] for p in asc]
    assert stamps[0] == "2025-12-30T00:00:00.000Z" and stamps[-1] == "2025-12-30T06:00:00.000Z"
    assert stamps == sorted(stamps) and len(stamps) == 6 * 4 + 1
    desc = api.ok("post", "/sensor-data", {**body, "orderBy": "desc"})["items"][0]["data"]
    assert desc == asc[::-1]


def test_values_are_rounded_to_display_precision_unless_disabled(api, piezo):
    for p in _params(piezo):
        body = {"parameterUuids": [p["uuid"]], "startDate": DAY, "endDate": END}
        rounded = api.ok("post", "/sensor-data", body)["items"][0]["data"]
        raw = api.ok("post", "/sensor-data", {**body, "disableRounding": True})["items"][0]["data"]
        assert len(raw) == len(rounded) > 0
        digits = [-Decimal(repr(x["value"])).as_tuple().exponent for x in rounded
                  if x["value"] is not None]
        assert max(digits) <= p["displayPrecision"], p["name"]
        pairs = [(a["value"], b["value"]) for a, b in zip(rounded, raw) if a["value"] is not None]
        assert all(abs(a - b) <= 0.5 * 10 ** -p["displayPrecision"] + 1e-12 for a, b in pairs)
        assert any(a != b for a, b in pairs), p["name"]  # full precision really differs


def test_derived_parameters_follow_their_formula(api, piezo):
    sensor = next(s for s in piezo["sensors"] if s["type"] == "vibrating_wire" and s["isActive"])
    body = {"sensorUuids": [sensor["uuid"]], "startDate": DAY, "endDate": END,
            "disableRounding": True}
    series = {it["parameterName"]: it["data"] for it in api.ok("post", "/sensor-data", body)["items"]}
    for p in sensor["parameters"]:
        if p["sourceType"] != "derived":
            continue
        names = {q["name"]: np.array([x["value"] for x in series[q["name"]]], float)
                 for q in sensor["parameters"] if q["sourceType"] == "raw"}
        expected = eval(p["formula"], {"__builtins__": {}}, names)  # formulas are arithmetic
        got = np.array([x["value"] for x in series[p["name"]]], float)
        np.testing.assert_allclose(got, expected, rtol=1e-9, atol=1e-9)


def test_aggregation_matches_the_raw_points(api, piezo):
    pid = _params(piezo)[0]["uuid"]
    body = {"parameterUuids": [pid], "startDate": DAY, "endDate": END, "disableRounding": True}
    raw = api.ok("post", "/sensor-data", body)["items"][0]["data"]
    for function, reducer in (("avg", np.mean), ("max", np.max), ("min", np.min),
                              ("count", len), ("first", lambda v: v[0])):
        agg = api.ok("post", "/sensor-data", {**body, "aggregation": {"interval": "6h",
                                                                      "function": function}})
        points = agg["items"][0]["data"]
        assert [p["timestamp"][11:13] for p in points] == ["00", "06", "12", "18", "00"]
        for point in points[:4]:
            start = datetime.fromisoformat(point["timestamp"].replace("Z", "+00:00"))
            inside = [x["value"] for x in raw if start <= _t(x["timestamp"]) < start +
                      timedelta(hours=6) and x["value"] is not None]
            assert point["value"] == pytest.approx(reducer(np.array(inside))), function
    bad = api.post("/sensor-data", {**body, "aggregation": {"interval": "2h", "function": "avg"}})
    assert bad.status_code == 400 and "15m" in bad.json()["message"]


def _t(text):
    return datetime.fromisoformat(text.replace("Z", "+00:00"))


def test_limits_are_enforced_with_messages_a_client_can_act_on(api, all_devices):
    many = [d["serialNumber"] for d in all_devices if d["state"] == "active"][:30]
    r = api.post("/sensor-data", {"deviceSerialNumbers": many, "startDate": "2025-12-01T00:00:00Z",
                                  "endDate": "2025-12-31T00:00:00Z"})
    assert r.status_code == 400 and r.json()["message"].startswith(TOO_MANY_POINTS_PREFIX)
    r = api.post("/sensor-data", {"deviceSerialNumbers": many[:1],
                                  "startDate": "2025-10-01T00:00:00Z"})
    assert r.status_code == 400 and r.json()["message"].startswith(RANGE_TOO_LONG_PREFIX)
    r = api.post("/sensor-data", {"parameterUuids": ["0b7e5c1a-2f43-4a6e-9d1c-3e5f7a9b1c2d"] * 201})
    assert r.status_code == 400 and "200" in r.json()["message"]


def test_windows_stitch_into_the_same_series(api, piezo):
    """Lazy generation: two half windows give exactly the points of the whole window."""
    pids = [p["uuid"] for p in _params(piezo)]
    whole = api.ok("post", "/sensor-data", {"parameterUuids": pids, "disableRounding": True,
                                            "startDate": "2025-12-20T00:00:00Z", "endDate": END})
    a = api.ok("post", "/sensor-data", {"parameterUuids": pids, "disableRounding": True,
                                        "startDate": "2025-12-20T00:00:00Z",
                                        "endDate": "2025-12-25T11:59:59Z"})
    b = api.ok("post", "/sensor-data", {"parameterUuids": pids, "disableRounding": True,
                                        "startDate": "2025-12-25T12:00:00Z", "endDate": END})
    for w, x, y in zip(whole["items"], a["items"], b["items"]):
        assert w["data"] == x["data"] + y["data"]


def test_deactivated_sensor_serves_its_archive_up_to_deactivation(api, piezo):
    old = next(s for s in piezo["sensors"] if not s["isActive"])
    until = _t(old["lastDeactivatedAt"])
    body = {"sensorUuids": [old["uuid"]], "startDate": (until - timedelta(days=2)).strftime(
        "%Y-%m-%dT%H:%M:%SZ"), "endDate": (until + timedelta(days=2)).strftime("%Y-%m-%dT%H:%M:%SZ")}
    data = api.ok("post", "/sensor-data", body)["items"][0]["data"]
    assert data and _t(data[-1]["timestamp"]) == until


def test_latest_with_empty_body_and_soft_deleted_data(api, piezo):
    latest = api.ok("post", "/sensor-data/latest", {})["items"]
    assert not [p for it in latest for p in check_series_item(it, latest=True)]
    assert all(len(it["data"]) <= 1 for it in latest)
    known = {p["uuid"] for s in piezo["sensors"] for p in s["parameters"]}
    mine = api.ok("post", "/sensor-data/latest", {"deviceSerialNumbers": [piezo["serialNumber"]]})
    with_deleted = api.ok("post", "/sensor-data/latest", {"deviceSerialNumbers": [piezo["serialNumber"]],
                                                         "includeDeleted": True})
    plain_ids = {it["parameterUuid"] for it in mine["items"]}
    deleted_ids = {it["parameterUuid"] for it in with_deleted["items"]} - plain_ids
    assert plain_ids == known
    assert deleted_ids and all(it["data"] for it in with_deleted["items"]
                               if it["parameterUuid"] in deleted_ids)
    by_legacy = api.ok("post", "/sensor-data/latest", {"legacyDeviceIds": [piezo["legacyDeviceId"]]})
    assert {it["parameterUuid"] for it in by_legacy["items"]} == plain_ids


def test_latest_point_is_the_last_point_of_the_series(api, piezo):
    p = _params(piezo)[0]
    newest = api.ok("post", "/sensor-data/latest", {"parameterUuids": [p["uuid"]]})["items"][0]
    series = api.ok("post", "/sensor-data", {"parameterUuids": [p["uuid"]], "startDate": DAY,
                                             "endDate": "2026-01-01T00:00:00Z"})["items"][0]
    assert newest["data"] == series["data"][-1:]
    assert newest["displayPrecision"] == p["displayPrecision"]


def test_nulls_and_gaps_occur(api, all_devices):
    loggers = [d for d in all_devices if d["state"] == "active" and d["samplingPeriodSeconds"]
               and d["deviceKind"] == "physical" and not d["gnss"]][:8]
    nulls = gaps = 0
    for d in loggers:
        p = d["sensors"][0]["parameters"][0]
        for start, end in (("2025-10-05", "2025-11-04"), ("2025-11-04", "2025-12-04")):
            data = api.ok("post", "/sensor-data", {"parameterUuids": [p["uuid"]],
                                                   "startDate": f"{start}T00:00:00Z",
                                                   "endDate": f"{end}T00:00:00Z"})["items"][0]["data"]
            nulls += sum(x["value"] is None for x in data)
            steps = np.diff([_t(x["timestamp"]).timestamp() for x in data])
            gaps += int((steps > d["samplingPeriodSeconds"]).sum())
    assert nulls > 0 and gaps > 0


def test_a_later_clock_adds_data_and_keeps_the_old():
    """Without --now the clock is the wall clock; two fixed clocks two hours apart on the
    same day show the same world, the later with newer points."""
    early = datetime(2026, 1, 1, 10, 0, tzinfo=timezone.utc)
    with start_server(now=early) as a, start_server(now=early + timedelta(hours=2)) as b:
        body = {"deviceSerialNumbers": [], "startDate": "2026-01-01T00:00:00Z",
                "endDate": "2026-01-01T23:00:00Z"}
        sn = Api(a.base_url).ok("get", "/devices", limit=500)["items"]
        sn = next(d["serialNumber"] for d in sn if d["state"] == "active" and d["txPeriodSeconds"]
                  and d["health"]["connection"]["status"] == "online" and not d["gnss"])
        body["deviceSerialNumbers"] = [sn]
        old = Api(a.base_url).ok("post", "/sensor-data", body)["items"]
        new = Api(b.base_url).ok("post", "/sensor-data", body)["items"]
        for x, y in zip(old, new):
            assert len(y["data"]) > len(x["data"]) > 0
            assert y["data"][:len(x["data"])] == x["data"]


def test_wall_clock_server_is_current():
    with start_server(now=None) as srv:
        now = datetime.now(timezone.utc)
        devices = Api(srv.base_url).ok("get", "/devices", limit=500)["items"]
        online = [d for d in devices if d["health"]["connection"]["status"] == "online"]
        assert online
        statuses = {d["health"]["connection"]["status"] for d in devices}
        assert statuses == {"online", "degraded", "offline", "unknown"}
        for d in online:
            seen = _t(d["health"]["connection"]["lastSeen"])
            assert timedelta(0) <= now - seen <= timedelta(seconds=d["txPeriodSeconds"] + 5)


def _series(api, pid, start="2025-11-01T00:00:00Z", end="2025-12-01T00:00:00Z"):
    data = api.ok("post", "/sensor-data", {"parameterUuids": [pid], "startDate": start,
                                           "endDate": end, "disableRounding": True})
    points = data["items"][0]["data"]
    t = np.array([_t(x["timestamp"]).timestamp() for x in points])
    v = np.array([np.nan if x["value"] is None else x["value"] for x in points])
    return t, v


def _param(device, sensor_type, name):
    sensor = next(s for s in device["sensors"] if s["type"] == sensor_type and s["isActive"])
    return next(p["uuid"] for p in sensor["parameters"] if p["name"] == name)


def _daily(t, v, reducer):
    days = (t // 86400).astype(int)
    return np.array([reducer(v[days == d]) for d in np.unique(days)])


def test_piezometers_follow_the_rain_at_their_site(api, all_devices):
    """Days with more rain at the site are days on which pore pressure rises more."""
    for gauge in (d for d in all_devices if d["state"] == "active" and
                  any(s["type"] == "pulse_rain" and s["isActive"] for s in d["sensors"])):
        piezos = [d for d in all_devices if d["site"] == gauge["site"] and d["state"] == "active"
                  and any(s["type"] == "vibrating_wire" and s["isActive"] for s in d["sensors"])]
        if piezos:
            break
    t, pressure = _series(api, _param(piezos[0], "vibrating_wire", "pore_pressure"))
    rain_per_day = _daily(*_series(api, _param(gauge, "pulse_rain", "rainfall")), np.nansum)
    rise_per_day = _daily(t, pressure, lambda v: np.nanmax(v) - v[0])
    n = min(rain_per_day.size, rise_per_day.size)
    assert rain_per_day.sum() > 10  # it rained
    assert np.corrcoef(rain_per_day[:n], rise_per_day[:n])[0, 1] > 0.5


def test_tiltmeters_breathe_with_the_daily_temperature(api, all_devices):
    d = next(d for d in all_devices if d["state"] == "active" and
             any(s["type"] == "inclinometer" for s in d["sensors"]))
    t, tilt = _series(api, _param(d, "inclinometer", "tilt_x"), end="2025-11-08T00:00:00Z")
    _, temp = _series(api, _param(d, "inclinometer", "temperature"), end="2025-11-08T00:00:00Z")
    ok = ~np.isnan(tilt) & ~np.isnan(temp)
    assert np.corrcoef(tilt[ok], temp[ok])[0, 1] > 0.9
    phase = 2 * np.pi * t[ok] / 86400
    design = np.column_stack([np.ones(ok.sum()), np.cos(phase), np.sin(phase), t[ok] - t[0]])
    coef, *_ = np.linalg.lstsq(design, tilt[ok], rcond=None)
    assert np.hypot(coef[1], coef[2]) > 10 * 0.0002  # daily amplitude well above the noise


def test_devices_that_never_sent_data_answer_empty_series(api, all_devices):
    """Sensors of devices never deployed (no site, no transmission) exist but hold no data."""
    idle = [d for d in all_devices if d["site"] is None and d.get("sensors")]
    assert idle
    items = api.ok("post", "/sensor-data", {"deviceSerialNumbers": [d["serialNumber"] for d in idle],
                                            "startDate": "2025-12-01T00:00:00Z"})["items"]
    assert items and all(it["data"] == [] for it in items)

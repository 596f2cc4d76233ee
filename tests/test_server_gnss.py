"""POST /sensor-data/gnss over HTTP: every field of an epoch agrees with every other, the
quality sigmas match the noise, and each scenario shows the deformation it promises.

The geodesy here is written independently of the server (pyproj for ECEF and projections,
the local-frame rotation by hand), so the two must agree, not merely share code.
"""

from __future__ import annotations

from datetime import datetime

import numpy as np
import pytest
from support import Api, device_by_role, start_server
from pyproj import Transformer
from spec_shapes import check_gnss_item

from devmon_sync.api_contract import TOO_MANY_POINTS_PREFIX, ResponseLimits

START = "2025-10-03T00:00:00Z"
WINDOWS = [("2025-10-03T00:00:00Z", "2025-11-02T00:00:00Z"),
           ("2025-11-02T00:00:01Z", "2025-12-02T00:00:00Z"),
           ("2025-12-02T00:00:01Z", "2026-01-01T00:00:00Z")]
TO_ECEF = Transformer.from_crs("EPSG:4979", "EPSG:4978", always_xy=True)


def _t(text):
    return datetime.fromisoformat(text.replace("Z", "+00:00")).timestamp()


@pytest.fixture(scope="module")
def history(api, all_devices):
    """Whole 90-day history of every GNSS rover, fetched in 30-day windows."""
    rovers = [d for d in all_devices if d["gnss"] and not d["gnss"]["isBaseStation"]
              and d["state"] == "active"]
    out = {}
    for d in rovers:
        items = [api.ok("post", "/sensor-data/gnss", {"deviceSerialNumbers": [d["serialNumber"]],
                                                      "startDate": a, "endDate": b})["items"][0]
                 for a, b in WINDOWS]
        head = dict(items[0])
        head["data"] = [e for it in items for e in it["data"]]
        out[d["serialNumber"]] = head
    return out


def cols(item, *names):
    return [np.array([e[n] if e[n] is not None else np.nan for e in item["data"]], float)
            for n in names]


def enu(lat, lon, h, lat0, lon0, h0):
    x, y, z = TO_ECEF.transform(lon, lat, h)
    x0, y0, z0 = TO_ECEF.transform(lon0, lat0, h0)
    dx, dy, dz = x - x0, y - y0, z - z0
    p, l = np.radians(lat0), np.radians(lon0)
    e = -np.sin(l) * dx + np.cos(l) * dy
    n = -np.sin(p) * np.cos(l) * dx - np.sin(p) * np.sin(l) * dy + np.cos(p) * dz
    u = np.cos(p) * np.cos(l) * dx + np.cos(p) * np.sin(l) * dy + np.sin(p) * dz
    return e, n, u


def test_gnss_items_match_the_spec(api, history):
    problems = [p for item in history.values() for p in check_gnss_item(item)]
    assert not problems, problems[:20]
    every = api.ok("post", "/sensor-data/gnss", {"startDate": "2025-12-31T00:00:00Z"})["items"]
    assert {i["deviceSerialNumber"] for i in every} >= set(history)
    assert all(i["units"]["dE"] == "m" and i["units"]["vE"] == "mm/d" for i in every)


def test_displacements_agree_with_coordinates(history):
    for sn, item in history.items():
        lat, lon, eh, de, dn, du, d2, d3 = cols(item, "lat", "lon", "eh", "dE", "dN", "dU",
                                                "d2d", "d3d")
        e, n, u = enu(lat, lon, eh, lat[0], lon[0], eh[0])
        worst = max(np.abs(e - (de - de[0])).max(), np.abs(n - (dn - dn[0])).max(),
                    np.abs(u - (du - du[0])).max())
        assert worst < 2e-4, (sn, worst)  # rounding of the served values only
        np.testing.assert_allclose(d2, np.hypot(de, dn), atol=2e-5)
        np.testing.assert_allclose(d3, np.sqrt(de**2 + dn**2 + du**2), atol=2e-5)


def test_projected_coordinates_agree_with_pyproj(history):
    item = next(iter(history.values()))
    lat, lon, eh, oh = cols(item, "lat", "lon", "eh", "oh")
    for meta in item["projectionMetadata"]:
        crs = f"EPSG:{meta['srid']}" if meta["projectionType"] == "standard" else meta["projString"]
        e, n = Transformer.from_crs("EPSG:4326", crs, always_xy=True).transform(lon, lat)
        key = str(meta["id"])
        pe = np.array([ep["proj"][key]["e"] for ep in item["data"]])
        pn = np.array([ep["proj"][key]["n"] for ep in item["data"]])
        ph = np.array([ep["proj"][key]["h"] for ep in item["data"]])
        assert np.abs(pe - e).max() < 1e-4 and np.abs(pn - n).max() < 1e-4, meta["label"]
        np.testing.assert_allclose(ph, eh if meta["heightType"] == "ellipsoidal" else oh, atol=1e-5)


def test_velocities_are_the_change_over_one_day(history):
    for sn, item in history.items():
        t = np.array([_t(e["timestamp"]) for e in item["data"]])
        de, ve = cols(item, "dE", "vE")
        index = {int(x): i for i, x in enumerate(t)}
        checked = 0
        for i, x in enumerate(t):
            j = index.get(int(x) - 86400)
            if j is not None and not np.isnan(ve[i]):
                assert abs(ve[i] - (de[i] - de[j]) * 1000) < 0.03, sn
                checked += 1
        assert checked > 100
        assert np.isnan(ve).any()  # the first day, and after gaps, has no velocity


def _residuals(t, x, steps=()):
    columns = [np.ones_like(t), t - t.mean()] + [(t >= s).astype(float) for s in steps]
    a = np.column_stack(columns)
    coef, *_ = np.linalg.lstsq(a, x, rcond=None)
    return x - a @ coef, coef


def test_reported_sigmas_match_the_noise(history, all_devices):
    sn = device_by_role(all_devices, "stable")["serialNumber"]
    item = history[sn]
    t = np.array([_t(e["timestamp"]) for e in item["data"]])
    for comp, sig in (("dE", "sde"), ("dN", "sdn"), ("dU", "sdu")):
        x, = cols(item, comp)
        s = np.array([e["quality"][sig] for e in item["data"]])
        r, _ = _residuals(t, x)
        if comp == "dU":  # a millimetre of seasonal breathing in height
            r = r - np.convolve(r, np.ones(49) / 49, mode="same")
        z = r[50:-50] / s[50:-50]
        assert 0.85 < z.std() < 1.15, (comp, z.std())
    q = np.array([e["quality"]["q"] for e in item["data"]])
    sde = np.array([e["quality"]["sde"] for e in item["data"]])
    assert set(q) == {1, 2} and sde[q == 2].mean() > 3 * sde[q == 1].mean()


def _along(item, azimuth_deg):
    de, dn = cols(item, "dE", "dN")
    a = np.radians(azimuth_deg)
    return de * np.sin(a) + dn * np.cos(a)


def test_creep_rate_and_base_station_switch(history, all_devices):
    d = device_by_role(all_devices, "creep")
    item = history[d["serialNumber"]]
    t = np.array([_t(e["timestamp"]) for e in item["data"]])
    bs = np.array([e["bs"] for e in item["data"]])
    switches = t[1:][bs[1:] != bs[:-1]]
    assert len(switches) == 1 and bs[-1] == d["gnss"]["baseStation"]["id"]
    assert {b["id"] for b in item["baseStations"]} == set(bs)
    _, coef = _residuals(t, _along(item, d["gnss"]["azimuth"]), steps=[switches[0]])
    rate_mm_yr = coef[1] * 1000 * 365.25 * 86400
    assert 22 < rate_mm_yr < 28, rate_mm_yr


def test_accelerating_slope_speeds_up_with_falling_inverse_velocity(history, all_devices):
    d = device_by_role(all_devices, "accelerating")
    item = history[d["serialNumber"]]
    t = np.array([_t(e["timestamp"]) for e in item["data"]]) / 86400
    along = _along(item, d["gnss"]["azimuth"]) * 1000
    rates = []
    for lo in np.arange(t[0], t[-1] - 10, 10):
        inside = (t >= lo) & (t < lo + 10)
        rates.append(np.polyfit(t[inside], along[inside], 1)[0])
    rates = np.array(rates)
    assert rates[-1] > 3 * rates[0] > 0
    inverse = 1 / rates[-4:]
    assert np.all(np.diff(inverse) < 0)


def test_antenna_change_step_is_announced_and_seen(history, all_devices):
    d = device_by_role(all_devices, "step")
    event = next(e for e in d["_internal"]["metadata"]["gnssEvents"] if e["type"] == "antenna_change")
    item = history[d["serialNumber"]]
    t = np.array([_t(e["timestamp"]) for e in item["data"]])
    du, = cols(item, "dU")
    at = _t(event["at"])
    before = du[(t >= at - 3 * 86400) & (t < at)].mean()
    after = du[(t >= at) & (t < at + 3 * 86400)].mean()
    assert 0.009 < after - before < 0.015


def test_outliers_gaps_and_soft_deleted_epochs(api, history, all_devices):
    d = device_by_role(all_devices, "outliers")
    item = history[d["serialNumber"]]
    t = np.array([_t(e["timestamp"]) for e in item["data"]])
    de, = cols(item, "dE")
    window = 25
    med = np.array([np.median(de[max(0, i - window):i + window]) for i in range(de.size)])
    assert (np.abs(de - med) > 0.015).sum() >= 5
    assert (np.diff(t) > 86400).sum() >= 2
    plain = len(item["data"])
    with_deleted = sum(len(api.ok("post", "/sensor-data/gnss", {
        "deviceSerialNumbers": [d["serialNumber"]], "startDate": a, "endDate": b,
        "includeDeleted": True})["items"][0]["data"]) for a, b in WINDOWS)
    assert with_deleted == plain + 24


def test_gnss_series_on_sensor_data_match_the_epochs(api, history, all_devices):
    d = device_by_role(all_devices, "creep")
    gnss_sensor = next(s for s in d["sensors"] if s["name"] == "gnss")
    param = next(p for p in gnss_sensor["parameters"] if p["name"] == "dE")
    series = api.ok("post", "/sensor-data", {"parameterUuids": [param["uuid"]],
                                             "startDate": "2025-12-25T00:00:00Z",
                                             "endDate": "2026-01-01T00:00:00Z",
                                             "disableRounding": True})["items"][0]["data"]
    epochs = {e["timestamp"]: e["dE"] for e in history[d["serialNumber"]]["data"]}
    assert series and all(abs(p["value"] - epochs[p["timestamp"]]) < 1e-5 for p in series)


def test_epoch_limit_is_enforced_and_configurable(all_devices):
    rovers = [d["serialNumber"] for d in all_devices if d["gnss"]]
    with start_server(limits=ResponseLimits(max_epochs=1000)) as srv:
        api = Api(srv.base_url)
        r = api.post("/sensor-data/gnss", {"deviceSerialNumbers": rovers, "startDate": START,
                                           "endDate": "2025-11-02T00:00:00Z"})
        assert r.status_code == 400 and "1000 per request" in r.json()["message"]
        assert r.json()["message"].startswith(TOO_MANY_POINTS_PREFIX)
        ok = api.post("/sensor-data/gnss", {"deviceSerialNumbers": rovers[1:2],
                                            "startDate": "2025-12-01T00:00:00Z"})
        assert ok.status_code == 200


def test_epoch_order(api, all_devices):
    rovers = [d["serialNumber"] for d in all_devices if d["gnss"]]
    body = {"deviceSerialNumbers": rovers[1:2], "startDate": "2025-12-30T00:00:00Z"}
    asc = api.ok("post", "/sensor-data/gnss", body)["items"][0]["data"]
    desc = api.ok("post", "/sensor-data/gnss", {**body, "orderBy": "desc"})["items"][0]["data"]
    assert desc == asc[::-1] and asc[0]["timestamp"] < asc[-1]["timestamp"]

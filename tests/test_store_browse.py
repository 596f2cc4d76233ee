"""The GUI's reads (devmon_sync.store.browse) on a real mirror synced from the reference server.

Expectations come from independent SQL on the same file, from the service's JSON kept in the
raw columns, or from numpy on the full-resolution readings: never from hard-coded values.
"""

from __future__ import annotations

import json
import shutil
from collections import Counter
from concurrent.futures import ThreadPoolExecutor
from datetime import datetime, timedelta, timezone

import duckdb
import numpy as np
import pytest

from devmon_sync.server import WorldSize
from devmon_sync.store import Mirror, StoreError, browse, queries

from support import NOW, Api, start_server, synced_mirror

# 22 devices: every role of the reference world (GNSS rovers and a base, virtual and weather
# devices, retired, suspended and unsited ones).
WORLD = WorldSize(sites=3, devices=22, days=60)
UTC = timezone.utc


def _clock_with_faults() -> datetime:
    """The first hour from support's NOW at which the world reports parameter faults for a
    device's last transmission (they come and go with each transmission), found by asking
    the server, so that the device panel has faults to show."""
    for hours in range(72):
        now = NOW + timedelta(hours=hours)
        with start_server(size=WORLD, now=now) as srv:
            items = Api(srv.base_url).ok("get", "/devices", limit=100)["items"]
        if any((d["health"]["sensors"] or {}).get("errors") for d in items):
            return now
    raise AssertionError("no parameter fault in 72 hours of the reference world")


@pytest.fixture(scope="module")
def mirror_path(tmp_path_factory):
    return synced_mirror(tmp_path_factory.mktemp("browse") / "mirror.duckdb", WORLD,
                         now=_clock_with_faults())


@pytest.fixture(scope="module")
def m(mirror_path):
    with Mirror.open(mirror_path, read_only=True) as mirror:
        yield mirror


@pytest.fixture(scope="module")
def con(mirror_path, m):
    """An independent connection for expected values."""
    c = duckdb.connect(str(mirror_path), read_only=True)
    c.execute("SET TimeZone = 'UTC'")
    yield c
    c.close()


@pytest.fixture(scope="module")
def tree(m):
    return browse.device_tree(m)


@pytest.fixture(scope="module")
def faulty_parameter(con) -> str:
    """The parameter with the most faulty (NULL) points: many readings, and NaNs to carry."""
    return con.execute("SELECT parameter_uuid::VARCHAR FROM readings GROUP BY 1 "
                       "ORDER BY count(*) - count(value) DESC, count(*) DESC LIMIT 1"
                       ).fetchall()[0][0]


def raw_devices(con) -> dict[str, dict]:
    return {sn: json.loads(raw) for sn, raw in
            con.execute("SELECT serial_number, raw FROM devices").fetchall()}


def aware(t: np.datetime64) -> datetime:
    return t.astype("datetime64[us]").item().replace(tzinfo=UTC)


def devices_of(tree) -> list:
    return [d for s in tree for d in s.devices]


# =========================================================================== tree

def test_tree_holds_every_device_sensor_and_parameter_exactly_once(tree, con):
    devices = devices_of(tree)
    serials = Counter(d.serial_number for d in devices)
    assert set(serials) == {r[0] for r in con.execute("SELECT serial_number FROM devices")
                            .fetchall()} and max(serials.values()) == 1
    sensors = Counter(s.uuid for d in devices for s in d.sensors)
    assert set(sensors) == {r[0] for r in con.execute("SELECT uuid::VARCHAR FROM sensors")
                            .fetchall()} and max(sensors.values()) == 1
    params = Counter(p.uuid for d in devices for s in d.sensors for p in s.parameters)
    assert set(params) == {r[0] for r in con.execute("SELECT uuid::VARCHAR FROM parameters")
                           .fetchall()} and max(params.values()) == 1


def test_tree_names_follow_alias_then_name_then_serial_and_carry_tags(tree, con):
    raw = raw_devices(con)
    rules = Counter()
    for d in devices_of(tree):
        r = raw[d.serial_number]
        expected = r.get("alias") or r.get("name") or d.serial_number
        rules["alias" if r.get("alias") else "name" if r.get("name") else "serial"] += 1
        assert d.display_name == expected
        assert d.tags == tuple(t["name"] for t in r.get("tags") or [])
        assert (d.state, d.device_kind) == (r["state"], r["deviceKind"])
    assert rules["alias"] and rules["name"] and rules["serial"], rules  # every rule was used


def test_tree_places_devices_at_their_site_and_unsited_ones_last(tree, con):
    sites = {u: (n, tz) for u, n, tz in con.execute(
        "SELECT uuid::VARCHAR, name, timezone FROM sites").fetchall()}
    site_of = dict(con.execute("SELECT serial_number, site_uuid::VARCHAR FROM devices").fetchall())
    assert [s.uuid for s in tree[:-1]] and tree[-1].uuid is None and tree[-1].name == "No site"
    assert {s.uuid for s in tree[:-1]} == set(sites)
    for node in tree:
        if node.uuid is not None:
            assert (node.name, node.timezone) == sites[node.uuid]
        assert all(site_of[d.serial_number] == node.uuid for d in node.devices)
        names = [d.display_name.casefold() for d in node.devices]
        assert names == sorted(names)
    site_names = [s.name.casefold() for s in tree[:-1]]
    assert site_names == sorted(site_names)


def test_tree_counts_readings_and_gnss_epochs_per_parameter(tree, con):
    stats = {u: (n, t0, t1) for u, n, t0, t1 in con.execute(
        "SELECT parameter_uuid::VARCHAR, count(*), min(ts), max(ts) FROM readings GROUP BY 1"
    ).fetchall()}
    epochs = {u: (n, t0, t1) for u, n, t0, t1 in con.execute(
        "SELECT sensor_uuid::VARCHAR, count(*), min(ts), max(ts) FROM gnss_epochs GROUP BY 1"
    ).fetchall()}
    solved = {r[0] for r in con.execute("SELECT sensor_uuid::VARCHAR FROM gnss_solutions")
              .fetchall()}
    rovers = {r[0] for r in con.execute("SELECT device_serial_number FROM device_gnss_config "
                                        "WHERE NOT is_base_station").fetchall()}
    seen_gnss = seen_readings = 0
    for d in devices_of(tree):
        assert d.is_gnss_rover == (d.serial_number in rovers)
        for s in d.sensors:
            for p in s.parameters:
                gnss = s.uuid in solved and (p.parameter_type or "").startswith("gnss_")
                expected = (epochs if gnss else stats).get(s.uuid if gnss else p.uuid,
                                                           (0, None, None))
                assert (p.readings, p.first, p.last) == expected, (d.serial_number, p.name)
                seen_gnss += gnss and p.readings > 0
                seen_readings += not gnss and p.readings > 0
    assert seen_gnss and seen_readings


def test_the_filter_matches_serial_alias_name_and_tags_ignoring_case(tree):
    devices = devices_of(tree)
    tagged = next(d for d in devices if d.tags)
    named = next(d for d in devices if d.name and d.alias)
    tag = tagged.tags[0]
    assert browse.matches(tagged, tag.upper()) and browse.matches(tagged, "")
    assert browse.matches(named, named.alias[1:5].swapcase())
    assert browse.matches(named, named.name[-4:].upper())
    assert browse.matches(named, named.serial_number.lower()[2:])
    assert not browse.matches(named, "no such text anywhere")
    kept = browse.filter_tree(tree, tag)
    needle = tag.casefold()
    assert {d.serial_number for d in devices_of(kept)} == \
        {d.serial_number for d in devices
         if any(needle in text.casefold()
                for text in (d.serial_number, d.alias or "", d.name or "", *d.tags))}
    assert all(s.devices for s in kept)
    assert browse.filter_tree(tree, "  ") == tree and browse.filter_tree(tree, "zzzz") == []


# =========================================================================== groups

def _walk(nodes, depth=0):
    for n in nodes:
        yield n, depth
        yield from _walk(n.children, depth + 1)


def test_group_tree_reproduces_nesting_and_places_every_device(m, con):
    groups = browse.group_tree(m)
    parent = dict(con.execute("SELECT uuid::VARCHAR, parent_uuid::VARCHAR FROM device_groups")
                  .fetchall())
    members = {}
    for g, sn in con.execute("SELECT group_uuid::VARCHAR, device_serial_number "
                             "FROM device_group_members").fetchall():
        members.setdefault(g, set()).add(sn)
    walked = list(_walk(groups.roots))
    assert Counter(n.uuid for n, _ in walked) == Counter(parent.keys())  # each group once
    assert max(depth for _, depth in walked) >= 2  # organisation > site > GNSS
    for node, _ in walked:
        assert {c.uuid for c in node.children} == {u for u, p in parent.items() if p == node.uuid}
        assert set(node.members) == members.get(node.uuid, set())
    assert {n.uuid for n in groups.roots} == {u for u, p in parent.items() if p is None}
    grouped = {sn for n, _ in walked for sn in n.members}
    everyone = {r[0] for r in con.execute("SELECT serial_number FROM devices").fetchall()}
    assert grouped | set(groups.ungrouped) == everyone
    assert not grouped & set(groups.ungrouped) and groups.ungrouped


def test_group_tree_survives_a_parent_cycle_and_a_missing_parent(mirror_path, tmp_path):
    path = tmp_path / "cycle.duckdb"
    shutil.copy(mirror_path, path)
    with Mirror.open(path) as w:
        chain = w.con.execute("""
            SELECT c.uuid::VARCHAR, c.parent_uuid::VARCHAR, p.parent_uuid::VARCHAR
            FROM device_groups c JOIN device_groups p ON p.uuid = c.parent_uuid
            WHERE p.parent_uuid IS NOT NULL LIMIT 1""").fetchall()[0]
        leaf, middle, root = chain
        w.con.execute("UPDATE device_groups SET parent_uuid = ?::UUID WHERE uuid = ?::UUID",
                      [leaf, root])  # root -> leaf -> middle -> root
        orphan = w.con.execute("SELECT uuid::VARCHAR FROM device_groups WHERE uuid NOT IN "
                               "(?::UUID, ?::UUID, ?::UUID) LIMIT 1",
                               [leaf, middle, root]).fetchall()[0][0]
        w.con.execute("UPDATE device_groups SET parent_uuid = gen_random_uuid() "
                      "WHERE uuid = ?::UUID", [orphan])
        count = w._row("SELECT count(*) FROM device_groups")[0]
        groups = browse.group_tree(w)
    walked = [n.uuid for n, _ in _walk(groups.roots)]
    assert len(walked) == count and len(set(walked)) == count
    assert orphan in {n.uuid for n in groups.roots}
    assert {leaf, middle, root} & {n.uuid for n in groups.roots}  # the cycle was cut once


# =========================================================================== device panel

def test_device_details_show_faults_modems_and_queued_commands(m, con):
    raw = raw_devices(con)
    faulty = [sn for sn, r in raw.items() if r["health"]["sensors"].get("errors")]
    two_modems = [sn for sn, r in raw.items() if len(r.get("modems") or []) == 2]
    queued = [sn for sn, r in raw.items() if r.get("queuedCommand")]
    assert faulty and two_modems and queued
    for sn in faulty:
        details = browse.device_details(m, sn)
        expected = [(e["sensorAlias"], f["parameterAlias"], f["summary"]["message"])
                    for e in raw[sn]["health"]["sensors"]["errors"] for f in e["parameterFaults"]]
        assert len(details.faults) == len(expected)
        for line, (sensor, param, message) in zip(details.faults, expected):
            assert sensor in line and param in line and message in line
    for sn in two_modems:
        modems = browse.device_details(m, sn).modems
        assert [(x.type, x.model, x.imei) for x in modems] == \
            [(x["type"], x["model"], x.get("imei")) for x in raw[sn]["modems"]]
    for sn in queued:
        command = browse.device_details(m, sn).queued_command
        source = raw[sn]["queuedCommand"]
        assert (command.uuid, command.status) == (source["uuid"], source["status"])
        assert command.created_at == datetime.fromisoformat(
            source["createdAt"].replace("Z", "+00:00"))


def test_device_details_match_the_typed_columns_and_the_raw_json(m, con):
    raw = raw_devices(con)
    rows = con.execute("""
        SELECT d.serial_number, d.state, d.connection_status, d.last_seen, d.next_tx,
               d.battery_percentage, d.power_source, d.tx_success_rate, d.firmware_version,
               s.name, s.timezone
        FROM devices d LEFT JOIN sites s ON s.uuid = d.site_uuid""").fetchall()
    for sn, state, status, seen, next_tx, battery, power, rate, fw, site, tz in rows:
        d = browse.device_details(m, sn)
        r = raw[sn]
        assert (d.state, d.connection_status, d.last_seen, d.next_tx) == \
            (state, status, seen, next_tx)
        assert (d.battery_pct, d.power_source, d.tx_success_rate_pct, d.firmware_version) == \
            (battery, power, rate, fw)
        assert (d.site_name, d.site_timezone) == (site, tz)
        connection = r["health"]["connection"]
        strength = connection.get("signalStrength") or {}
        assert (d.rssi_dbm, d.rsrp_dbm, d.signal_quality) == \
            (strength.get("rssi"), strength.get("rsrp"), strength.get("signalQuality"))
        assert d.tx_protocol == connection.get("txProtocol")
        assert d.battery_remaining == r["health"]["battery"]["remaining"]
        assert [t.name for t in d.tags] == [t["name"] for t in r["tags"]]
        assert (d.connection_error is None) == (connection.get("error") is None)
        if connection.get("error"):
            assert connection["error"]["message"] in d.connection_error
        if r.get("gnss"):
            g = r["gnss"]
            assert (d.gnss.processing_mode, d.gnss.azimuth_deg, d.gnss.is_base_station) == \
                (g["processingMode"], g["azimuth"], g["isBaseStation"])
            assert d.gnss.base_station_name == (g["baseStation"] or {}).get("name")
        else:
            assert d.gnss is None
        if r.get("hardware"):
            assert (d.hardware_model, d.hardware_revision) == \
                (r["hardware"]["model"], r["hardware"]["revision"])


def test_device_details_of_an_unknown_serial_name_it(m):
    with pytest.raises(StoreError, match="No device 'XX-404'"):
        browse.device_details(m, "XX-404")


def test_older_variant_and_missing_keys_are_tolerated(mirror_path, tmp_path):
    """The older schema variant (``no signal``, a single ``error``) and a device JSON missing
    most optional keys, with no site."""
    path = tmp_path / "variant.duckdb"
    shutil.copy(mirror_path, path)
    sn = "OLD-0001"
    raw = {"serialNumber": sn, "deviceKind": "physical", "alias": None, "name": "old-logger",
           "state": "active",
           "health": {"battery": {"percentage": 50},
                      "connection": {"status": "online",
                                     "signalStrength": {"signalQuality": "no signal"}},
                      "sensors": {"status": "ok", "error": {"code": 7, "message": "Bad config"}}}}
    with Mirror.open(path) as w:
        w.con.execute("INSERT INTO devices (serial_number, device_kind, display_name, name, "
                      "state, connection_status, battery_percentage, signal_quality, raw) "
                      "VALUES (?, 'physical', 'old-logger', 'old-logger', 'active', 'online', "
                      "50, 'no signal', ?)", [sn, json.dumps(raw)])
        d = browse.device_details(w, sn)
        tree = browse.device_tree(w)
        health = browse.site_health(w)
    assert d.display_name == "old-logger" and d.signal_quality == "no_signal"
    assert "Bad config" in d.metadata_error and any("Bad config" in f for f in d.faults)
    assert d.modems == () and d.tags == () and d.queued_command is None and d.gnss is None
    assert d.site_uuid is None and d.rssi_dbm is None and d.readings_in_mirror == 0
    assert sn in {x.serial_number for x in tree[-1].devices} and tree[-1].uuid is None
    row = health.rows[health.column("serial_number").index(sn)]
    assert row[health.keys.index("faults")] == len(d.faults)
    assert row[health.keys.index("signal_quality")] == "no_signal"


# =========================================================================== site health

def test_site_health_has_one_row_per_device_of_the_site(m, con):
    sites = [r[0] for r in con.execute("SELECT uuid::VARCHAR FROM sites").fetchall()]
    for site in sites:
        table = browse.site_health(m, site)
        expected = {r[0] for r in con.execute(
            "SELECT serial_number FROM devices WHERE site_uuid = ?::UUID", [site]).fetchall()}
        serials = table.column("serial_number")
        assert sorted(serials) == sorted(expected) and len(serials) == len(expected)
        assert all(len(row) == len(table.keys) == len(table.labels) for row in table.rows)
    everything = browse.site_health(m)
    assert len(everything.rows) == con.execute("SELECT count(*) FROM devices").fetchall()[0][0]
    assert browse.site_health(m, "00000000-0000-4000-8000-000000000000").rows == []


def test_site_health_values_agree_with_the_panel_and_the_readings(m, con):
    table = browse.site_health(m)
    counts = dict(con.execute("SELECT p.device_serial_number, count(*) FROM readings r "
                              "JOIN parameters p ON p.uuid = r.parameter_uuid GROUP BY 1"
                              ).fetchall())
    epochs = dict(con.execute("SELECT device_serial_number, count(*) FROM gnss_epochs "
                              "GROUP BY 1").fetchall())
    assert any(table.column("faults"))
    for row in table.rows:
        value = dict(zip(table.keys, row))
        d = browse.device_details(m, value["serial_number"])
        assert value["faults"] == len(d.faults)
        assert (value["battery_pct"], value["state"], value["last_seen"]) == \
            (d.battery_pct, d.state, d.last_seen)
        assert value["readings_in_mirror"] == counts.get(d.serial_number, 0) == \
            d.readings_in_mirror
        assert value["epochs_in_mirror"] == epochs.get(d.serial_number, 0) == d.epochs_in_mirror
        assert value["last_reading"] == d.last_reading


# =========================================================================== time series

def test_parameter_info_names_the_series_and_refuses_an_unknown_uuid(m, con, faulty_parameter):
    info = browse.parameter_info(m, faulty_parameter)
    row = con.execute("""
        SELECT p.alias, coalesce(p.display_unit, p.base_unit), p.device_serial_number,
               count(r.ts), min(r.ts), max(r.ts)
        FROM parameters p JOIN readings r ON r.parameter_uuid = p.uuid
        WHERE p.uuid = ?::UUID GROUP BY ALL""", [faulty_parameter]).fetchall()[0]
    assert (info.name, info.unit, info.serial_number, info.readings, info.first, info.last) == row
    assert info.gnss_field is None and info.site_timezone
    for bad in ("00000000-0000-4000-8000-000000000000", "not-a-uuid"):
        with pytest.raises(StoreError, match=f"No parameter '{bad}'"):
            browse.parameter_info(m, bad)
        with pytest.raises(StoreError, match=f"No parameter '{bad}'"):
            browse.readings_decimated(m, bad, None, None, 10)


def test_readings_are_the_full_series_in_time_order(m, con, faulty_parameter):
    full = browse.readings(m, faulty_parameter)
    rows = con.execute("SELECT ts, value FROM readings WHERE parameter_uuid = ?::UUID "
                       "ORDER BY ts", [faulty_parameter]).fetchall()
    assert full["ts"].dtype == np.dtype("datetime64[us]")
    assert full["ts"].tolist() == [t.replace(tzinfo=None) for t, _ in rows]
    assert np.array_equal(full["value"], np.array([np.nan if v is None else v for _, v in rows]),
                          equal_nan=True)
    assert np.isnan(full["value"]).any()  # the faulty points are there, as NaN
    start, end = aware(full["ts"][10]), aware(full["ts"][20])
    part = browse.readings(m, faulty_parameter, start, end)
    assert np.array_equal(part["ts"], full["ts"][10:21])


def _inner_range(ts: np.ndarray, lo: float = 0.1, hi: float = 0.9):
    span = ts[-1] - ts[0]
    return aware(ts[0] + span * lo), aware(ts[0] + span * hi)


def _us(t: datetime) -> int:
    return int(np.datetime64(t.replace(tzinfo=None), "us").astype(np.int64))


def test_decimation_keeps_each_buckets_min_and_max_at_their_own_times(m, faulty_parameter):
    full = browse.readings(m, faulty_parameter)
    start, end = _inner_range(full["ts"])
    buckets = 40
    out = browse.readings_decimated(m, faulty_parameter, start, end, buckets)
    us = full["ts"].astype(np.int64)
    inside = (us >= _us(start)) & (us <= _us(end))
    assert out["decimated"] and out["total"] == inside.sum() > 2 * buckets
    assert len(out["ts"]) <= 2 * buckets + 2 and np.all(np.diff(out["ts"]) > np.timedelta64(0))
    # every point returned is a reading of the series, at its own time
    value_at = dict(zip(full["ts"].tolist(), full["value"].tolist()))
    assert all(value_at[t] == v for t, v in zip(out["ts"].tolist(), out["value"].tolist()))
    # the edges: the nearest valid reading before start and after end
    valid = ~np.isnan(full["value"])
    assert out["ts"][0] == full["ts"][valid & (us < _us(start))][-1]
    assert out["ts"][-1] == full["ts"][valid & (us > _us(end))][0]
    # per equal-width bucket: the min and the max of the full-resolution readings
    width = (_us(end) - _us(start)) // buckets + 1
    full_k = (us[inside] - _us(start)) // width
    out_us = out["ts"][1:-1].astype(np.int64)
    out_k = (out_us - _us(start)) // width
    values = full["value"][inside]
    for k in np.unique(full_k):
        mine = values[full_k == k]
        got = out["value"][1:-1][out_k == k]
        assert 1 <= got.size <= 2
        assert got.min() == np.nanmin(mine) and got.max() == np.nanmax(mine)
    assert set(np.unique(out_k)) <= set(np.unique(full_k))
    assert np.nanmin(values) in out["value"] and np.nanmax(values) in out["value"]


def test_a_small_range_comes_back_unchanged_with_its_edges(m, faulty_parameter):
    full = browse.readings(m, faulty_parameter)
    start, end = _inner_range(full["ts"])
    us = full["ts"].astype(np.int64)
    inside = (us >= _us(start)) & (us <= _us(end))
    buckets = int(inside.sum()) // 2 + 1  # 2 x buckets >= readings in range
    out = browse.readings_decimated(m, faulty_parameter, start, end, buckets)
    assert not out["decimated"] and out["total"] == inside.sum()
    assert np.array_equal(out["ts"][1:-1], full["ts"][inside])
    assert np.array_equal(out["value"][1:-1], full["value"][inside], equal_nan=True)
    assert np.isnan(out["value"][1:-1]).any()  # faulty points kept, as NaN
    assert out["ts"][0] < full["ts"][inside][0] and out["ts"][-1] > full["ts"][inside][-1]


def test_open_ends_cover_the_whole_series(m, faulty_parameter):
    full = browse.readings(m, faulty_parameter)
    out = browse.readings_decimated(m, faulty_parameter, None, None, 25)
    assert out["decimated"] and out["total"] == len(full["ts"]) and len(out["ts"]) <= 50
    assert out["value"].min() == np.nanmin(full["value"])
    assert out["value"].max() == np.nanmax(full["value"])
    assert full["ts"][0] <= out["ts"][0] and out["ts"][-1] <= full["ts"][-1]


def test_an_empty_range_gives_empty_arrays(m, con, faulty_parameter):
    full = browse.readings(m, faulty_parameter)
    after = aware(full["ts"][-1]) + timedelta(days=1)
    for out in (browse.readings_decimated(m, faulty_parameter, after,
                                          after + timedelta(days=1), 100),
                browse.readings_decimated(m, faulty_parameter, after, None, 100)):
        assert out["total"] == 0 and not out["decimated"]
        assert out["ts"].size == out["value"].size == 0
        assert out["ts"].dtype == np.dtype("datetime64[us]") and out["value"].dtype == float
    empty = con.execute("SELECT uuid::VARCHAR FROM parameters WHERE uuid NOT IN "
                        "(SELECT parameter_uuid FROM readings) AND sensor_uuid NOT IN "
                        "(SELECT sensor_uuid FROM gnss_solutions) LIMIT 1").fetchall()[0][0]
    out = browse.readings_decimated(m, empty, None, None, 100)
    assert out["total"] == 0 and out["ts"].size == 0
    assert browse.readings(m, empty)["ts"].size == 0


def test_gnss_fields_are_read_from_the_epochs(m, con):
    serial, uuid = con.execute("""
        SELECT p.device_serial_number, p.uuid::VARCHAR FROM parameters p
        JOIN gnss_solutions g ON g.sensor_uuid = p.sensor_uuid
        WHERE p.parameter_type = 'gnss_de' LIMIT 1""").fetchall()[0]
    epochs = queries.gnss_epochs(m, serial)
    series = browse.readings(m, uuid)
    assert np.array_equal(series["ts"], epochs["ts"])
    assert np.array_equal(series["value"], epochs["de"], equal_nan=True)
    info = browse.parameter_info(m, uuid)
    assert info.gnss_field == "de" and info.readings == len(epochs["ts"]) > 0
    out = browse.readings_decimated(m, uuid, None, None, 10)
    assert out["value"].max() == np.nanmax(epochs["de"])


def test_stats_equal_numpy_on_the_readings(m, faulty_parameter):
    full = browse.readings(m, faulty_parameter)
    start, end = _inner_range(full["ts"], 0.2, 0.7)
    part = browse.readings(m, faulty_parameter, start, end)
    stats = browse.readings_stats(m, faulty_parameter, start, end)
    ok = ~np.isnan(part["value"])
    v, t = part["value"][ok], part["ts"][ok]
    assert stats["count"] == ok.sum() and stats["faulty"] == (~ok).sum() > 0
    assert stats["min"] == v.min() and stats["max"] == v.max()
    assert stats["mean"] == pytest.approx(v.mean(), rel=1e-12)
    assert (stats["first_time"], stats["first_value"]) == (aware(t[0]), v[0])
    assert (stats["last_time"], stats["last_value"]) == (aware(t[-1]), v[-1])
    days = (t - t[0]).astype(np.int64) / 86400e6
    assert stats["rate_per_day"] == pytest.approx(np.polyfit(days, v, 1)[0], rel=1e-6)
    empty = browse.readings_stats(m, faulty_parameter, aware(full["ts"][-1]) +
                                  timedelta(days=1), None)
    assert empty["count"] == 0 and empty["min"] is None and empty["rate_per_day"] is None


# =========================================================================== freshness, GNSS

def test_last_synced_is_the_newest_committed_window_of_the_devices(m, con):
    windows = con.execute("SELECT stream, committed_at FROM sync_windows").fetchall()
    assert browse.last_synced(m) == max(t for _, t in windows)
    streams = {}
    for sn, stream in con.execute(
            "SELECT device_serial_number, 'readings:' || uuid::VARCHAR FROM parameters "
            "UNION ALL SELECT device_serial_number, 'gnss:' || sensor_uuid::VARCHAR "
            "FROM gnss_solutions").fetchall():
        streams.setdefault(sn, set()).add(stream)
    for sn in list(streams)[:6]:
        expected = max((t for s, t in windows if s in streams[sn]), default=None)
        assert browse.last_synced(m, [sn]) == expected
    assert browse.last_synced(m, []) is None and browse.last_synced(m, ["XX-404"]) is None
    assert browse.last_synced(m).tzinfo is not None


def test_gnss_positions_are_the_median_of_each_rovers_last_day(m, con):
    pos = browse.gnss_positions(m)
    rovers = [r[0] for r in con.execute("SELECT device_serial_number FROM device_gnss_config "
                                        "WHERE NOT is_base_station ORDER BY 1").fetchall()]
    assert list(pos["serial_number"]) == rovers
    checked = 0
    for i, sn in enumerate(pos["serial_number"]):
        e = queries.gnss_epochs(m, sn)
        if not len(e["ts"]):
            assert not pos["from_epochs"][i]
            continue
        day = e["ts"] > e["ts"].max() - np.timedelta64(1, "D")
        assert pos["from_epochs"][i] and pos["epochs"][i] == day.sum()
        assert pos["lat"][i] == pytest.approx(np.median(e["lat"][day]), abs=1e-12)
        assert pos["lon"][i] == pytest.approx(np.median(e["lon"][day]), abs=1e-12)
        assert pos["eh"][i] == pytest.approx(np.median(e["eh"][day]), abs=1e-9)
        assert pos["ts"][i] == e["ts"].max()
        checked += 1
    assert checked


# =========================================================================== threads

def test_reads_work_from_another_thread(m, faulty_parameter):
    """Through ``for_thread()``, even with a cursor in another time zone (a thread's cursor
    does not inherit the mirror's UTC setting)."""
    def work():
        mirror = m.for_thread()
        try:
            mirror.con.execute("SET TimeZone = 'America/New_York'")
            start, end = _inner_range(browse.readings(mirror, faulty_parameter)["ts"])
            return (browse.device_tree(mirror),
                    browse.readings_decimated(mirror, faulty_parameter, start, end, 30),
                    browse.device_details(mirror, devices_of(browse.device_tree(mirror))[0]
                                          .serial_number),
                    browse.site_health(mirror).rows, browse.last_synced(mirror))
        finally:
            mirror.close()

    with ThreadPoolExecutor(max_workers=1) as pool:
        tree, out, details, health, synced = pool.submit(work).result()
    start, end = _inner_range(browse.readings(m, faulty_parameter)["ts"])
    here = browse.readings_decimated(m, faulty_parameter, start, end, 30)
    assert tree == browse.device_tree(m)
    assert np.array_equal(out["ts"], here["ts"]) and out["total"] == here["total"]
    assert details == browse.device_details(m, details.serial_number)
    assert health == browse.site_health(m).rows and synced == browse.last_synced(m)

"""Issue 3: the sync against a service that does not answer exactly like the spec's examples.

A small mutating HTTP proxy sits between the sync and the real reference server.  It rewrites
the JSON answers the way a newer or stranger service might (unknown enum values, extra keys on
every object, optional keys left out, nullable fields null, legacy ids at the ends of their
range) or refuses some requests (401, 403), and the tests check what the spec and the issue
ask for: nothing crashes, nothing is lost, a rejected key stops the sync with one clear line,
a 403 on one resource is recorded and skipped while everything else syncs exactly.
"""

from __future__ import annotations

import json
import os
import subprocess

import pytest
from http_stubs import MutatingProxy
from support import KEY, Api, start_server
from support import devmon as run_devmon
from support import DATA_TABLES, sync
from support import rows as query

from devmon_sync import api_contract as contract
from devmon_sync.server import WorldSize

SIZE = WorldSize(sites=3, devices=14, days=5)
# Small answers, so readings and epochs come in several windows each (a refusal can land
# between two commits, and the planner's halving on "too many points" is exercised too).
LIMITS = contract.ResponseLimits(max_points=5000, max_epochs=200)
MAX_ID = 9007199254740991
EXTRA = "zzFutureField"
EXTRA_VALUE = {"since": "v1.1", "values": [1, 2.5, None, "x"], "flag": True}
ENVELOPE_EXTRA = "nextPageHint"
WRONG_KEY = "wrong-key-Zq81xTv0"
DATA_ONLY = ("readings", "gnss_epochs", "gnss_projected")


# ----------------------------------------------------------------------------- the rewrites

class Plan:
    """Which objects of the world get which rewrite, picked from the real server's answers."""

    def __init__(self, api: Api):
        sites = api.ok("get", "/sites")["items"]
        devices = api.ok("get", "/devices", includeSensors="true", includeInactiveSensors="true",
                         limit=500)["items"]
        plain = sorted((d for d in devices if d["deviceKind"] == "physical" and not d["gnss"]),
                       key=lambda d: d["serialNumber"])
        with_attributes = [d for d in plain if any(s.get("attributes") for s in d["sensors"])]
        self.missing = with_attributes[0]["serialNumber"]  # optional keys left out
        rest = [d for d in plain if d["serialNumber"] != self.missing]
        enum_device = next(d for d in rest if d["modems"] and d["health"]["connection"]
                           .get("signalStrength"))
        self.enums = enum_device["serialNumber"]  # enum values the spec never listed
        rest = [d for d in rest if d["serialNumber"] != self.enums]
        self.nulls = rest[0]["serialNumber"]  # every nullable field null
        self.negative_id = rest[1]["serialNumber"]  # legacyDeviceId -9007199254740991
        rovers = sorted((d for d in devices if d["gnss"] and not d["gnss"]["isBaseStation"]),
                        key=lambda d: d["serialNumber"])
        self.big_id = rovers[0]["serialNumber"]  # legacyDeviceId 9007199254740991
        self.gnss_enums = rovers[1]["serialNumber"]  # GNSS config enums
        self.virtual = next(d["serialNumber"] for d in devices if d["deviceKind"] == "virtual")
        self.odd_sensor = enum_device["sensors"][0]["uuid"]  # type laser_scanner
        self.odd_parameter = enum_device["sensors"][0]["parameters"][0]["uuid"]
        gnss_sites = [s for s in sites if s.get("gnss")]
        self.odd_site = gnss_sites[0]["uuid"]  # unknown base station status, projection type
        self.site_without_gnss_key = gnss_sites[1]["uuid"]
        self.null_site = next(s["uuid"] for s in sites
                              if s["uuid"] not in (self.odd_site, self.site_without_gnss_key))
        self.legacy = {self.big_id: MAX_ID, self.negative_id: -MAX_ID}

    # -- the walk: every object of every answer, innermost first

    def __call__(self, method: str, path: str, payload) -> None:
        self._walk(payload, None)
        if isinstance(payload, dict):
            payload[ENVELOPE_EXTRA] = {"unused": True}

    def _walk(self, obj, key) -> None:
        if isinstance(obj, list):
            for item in obj:
                self._walk(item, key)
            return
        if not isinstance(obj, dict):
            return
        for k, v in list(obj.items()):
            self._walk(v, k)
        if key == "proj":  # a map keyed by projection id, not an object with fixed keys
            return
        self._rewrite(obj)
        obj[EXTRA] = dict(EXTRA_VALUE)

    def _rewrite(self, o: dict) -> None:
        serial = o.get("deviceSerialNumber") or o.get("serialNumber")
        if "legacyDeviceId" in o and serial in self.legacy:
            o["legacyDeviceId"] = self.legacy[serial]
        if "deviceKind" in o and "serialNumber" in o:
            self._device(o)
        elif "orgUuid" in o and "timezone" in o:
            self._site(o)
        elif "parameters" in o and "channelIndex" in o:
            self._sensor(o)
        elif "parameterPath" in o:
            self._parameter(o)
        elif "parameterUuid" in o:  # a reading series item
            o["parameterSourceType"] = "computed"
            o["sensorStatus"] = "degraded"
        elif "projectionMetadata" in o and serial == self.gnss_enums:  # a GNSS solution
            for p in o["projectionMetadata"]:
                p["heightType"] = "geoid"
            for b in o["baseStations"]:
                b["status"] = "calibrating"

    def _device(self, d: dict) -> None:
        sn = d["serialNumber"]
        health = d["health"]
        if sn == self.enums:
            d["state"] = "hibernating"
            health["connection"]["status"] = "sleeping"
            health["connection"]["signalStrength"]["signalQuality"] = "excellent"
            health["connection"]["txProtocol"] = "http3"
            health["sensors"]["status"] = "recalibrating"
            health["powerSource"] = "fuel_cell"
            d["modems"][0]["type"] = "starlink"
        elif sn == self.nulls:
            for k in ("alias", "name", "description", "legacyDeviceId", "site", "location",
                      "samplingPeriodSeconds", "txPeriodSeconds", "lastTxTimestamp", "product",
                      "hardware", "firmware", "queuedCommand", "sharedBy"):
                d[k] = None
            for k in health["battery"]:
                health["battery"][k] = None
            for k in ("lastSeen", "signalStrength", "error", "txSuccessRate", "txProtocol",
                      "nextTxTimestamp"):
                health["connection"][k] = None
            health["sensors"].update(lastDataTimestamp=None, metadataError=None, errors=None)
            health["powerSource"] = None
        elif sn == self.missing:
            health.pop("powerSource", None)
            health["connection"].pop("lteTxMode", None)
            d.pop("_internal", None)
            for m in d["modems"]:
                for k in ("imei", "iccid", "uuid"):
                    m.pop(k, None)
        elif sn == self.gnss_enums and isinstance(d.get("gnss"), dict):
            d["gnss"]["processingMode"] = "rtk_float"
            if isinstance(d["gnss"].get("baseStation"), dict):
                d["gnss"]["baseStation"]["type"] = "ntrip"
                d["gnss"]["baseStation"]["status"] = "calibrating"
        elif sn == self.virtual:
            d["deviceKind"] = "simulated"

    def _site(self, s: dict) -> None:
        if s["uuid"] == self.odd_site:
            s["gnss"]["baseStations"][0]["status"] = "calibrating"
            s["gnss"]["baseStations"][0]["type"] = "ntrip"
            p = s["gnss"]["projections"][0]
            p["projectionType"] = "wkt"
            p.pop("srid", None)
            p["wkt"] = 'GEOGCS["WGS 84",DATUM["WGS_1984"]]'
            p["heightType"] = "geoid"
        elif s["uuid"] == self.site_without_gnss_key:
            s.pop("gnss", None)
        elif s["uuid"] == self.null_site:
            s["description"] = None
            s["timezone"] = None
            s["gnss"] = None

    def _sensor(self, s: dict) -> None:
        serial = s.get("deviceSerialNumber")
        if s["uuid"] == self.odd_sensor:
            s["type"] = "laser_scanner"
            s["connectionType"] = "wireless"
            s["health"]["status"] = "drifting"
        if serial == self.missing:
            for k in ("attributes", "lastActivatedAt", "lastDeactivatedAt"):
                s.pop(k, None)
        elif serial == self.nulls:
            s.update(attributes=None, lastActivatedAt=None, lastDeactivatedAt=None)

    def _parameter(self, p: dict) -> None:
        if p["uuid"] == self.odd_parameter:
            p["sourceType"] = "computed"
            p["status"] = "stale"
        if p.get("deviceSerialNumber") == self.missing:
            for k in ("configErrorMessage", "lastFaultSummary", "lastFaultTimestamp",
                      "updatedAt"):
                p.pop(k, None)


# ----------------------------------------------------------------------------- fixtures

@pytest.fixture(scope="module")
def upstream():
    srv = start_server(size=SIZE, limits=LIMITS)
    yield srv
    srv.stop()


@pytest.fixture(scope="module")
def clean(upstream, tmp_path_factory):
    """A sync straight against the reference server: the truth to compare with."""
    db = tmp_path_factory.mktemp("clean") / "clean.duckdb"
    assert sync(upstream.base_url, db).status == "ok"
    return db


@pytest.fixture(scope="module")
def plan(upstream):
    return Plan(Api(upstream.base_url))


@pytest.fixture(scope="module")
def mutated(upstream, plan, tmp_path_factory):
    """A sync through the rewriting proxy: (mirror file, report, proxy with what it sent)."""
    db = tmp_path_factory.mktemp("mutated") / "mutated.duckdb"
    with MutatingProxy(upstream.base_url, mutate=plan) as proxy:
        report = sync(proxy.base_url, db)
    return db, report, proxy


def one(db, sql: str, params=()) -> tuple:
    rows = query(db, sql, params)
    assert len(rows) == 1, (sql, rows)
    return rows[0]


def data_snapshot(db, drop_parameters=(), drop_sensors=()) -> dict[str, list]:
    """The data tables (readings, epochs, projected coordinates), less some streams."""
    out = {name: query(db, DATA_TABLES[name]) for name in DATA_ONLY}
    out["readings"] = [r for r in out["readings"] if r[0] not in drop_parameters]
    for name in ("gnss_epochs", "gnss_projected"):
        out[name] = [r for r in out[name] if str(r[0]) not in drop_sensors]
    return out


def cli(*args: str, timeout: float = 120) -> subprocess.CompletedProcess:
    env = {k: v for k, v in os.environ.items() if k != "DEVMON_API_KEY"}
    return run_devmon(*args, timeout=timeout, env=env)


def cli_sync(base_url: str, db, key: str = KEY, quiet: bool = True):
    return cli("sync", "--base-url", base_url, "--db", str(db), "--api-key", key,
               "--rate-limit", "0", *(["--quiet"] if quiet else []))


# ----------------------------------------------------------------------------- rewritten answers

def test_rewritten_answers_sync_completely_and_lose_no_reading_or_epoch(clean, mutated):
    db, report, proxy = mutated
    assert report.status == "ok" and not report.problems
    # the rewrites reached the sync: every kind of answer went through the proxy
    assert {"GET /sites", "GET /devices", "GET /device-groups", "POST /sensor-data/latest",
            "POST /sensor-data", "POST /sensor-data/gnss"} <= set(proxy.sent)
    truth = data_snapshot(clean)
    assert len(truth["readings"]) > 10_000 and len(truth["gnss_epochs"]) > 300
    assert data_snapshot(db) == truth
    assert query(db, "SELECT uuid FROM parameters ORDER BY 1") == \
        query(clean, "SELECT uuid FROM parameters ORDER BY 1")
    assert query(db, "SELECT uuid FROM sensors ORDER BY 1") == \
        query(clean, "SELECT uuid FROM sensors ORDER BY 1")
    assert query(db, "SELECT serial_number FROM devices ORDER BY 1") == \
        query(clean, "SELECT serial_number FROM devices ORDER BY 1")


def test_unknown_enum_values_are_stored_as_text_in_the_typed_columns(mutated, plan):
    db, _, _ = mutated
    assert one(db, "SELECT state, connection_status, signal_quality, power_source FROM devices "
                   "WHERE serial_number = ?", [plan.enums]) == \
        ("hibernating", "sleeping", "excellent", "fuel_cell")
    assert one(db, "SELECT device_kind FROM devices WHERE serial_number = ?",
               [plan.virtual]) == ("simulated",)
    assert one(db, "SELECT type, connection_type FROM sensors WHERE uuid = ?",
               [plan.odd_sensor]) == ("laser_scanner", "wireless")
    assert one(db, "SELECT source_type FROM parameters WHERE uuid = ?",
               [plan.odd_parameter]) == ("computed",)
    assert one(db, "SELECT processing_mode FROM device_gnss_config WHERE "
                   "device_serial_number = ?", [plan.gnss_enums]) == ("rtk_float",)
    bs = query(db, "SELECT base_station_type FROM device_gnss_config WHERE "
                   "device_serial_number = ? AND base_station_id IS NOT NULL", [plan.gnss_enums])
    assert bs in ([], [("ntrip",)])
    assert ("calibrating", "ntrip") in query(
        db, "SELECT status, type FROM base_stations WHERE site_uuid = ?", [plan.odd_site])
    assert ("wkt", None, "geoid") in query(
        db, "SELECT projection_type, srid, height_type FROM projections WHERE site_uuid = ?",
        [plan.odd_site])
    # enums without a typed column are kept in the raw JSON
    assert one(db, "SELECT raw->>'$.modems[0].type', raw->>'$.health.connection.txProtocol', "
                   "raw->>'$.health.sensors.status' FROM devices WHERE serial_number = ?",
               [plan.enums]) == ("starlink", "http3", "recalibrating")
    assert one(db, "SELECT raw->>'$.health.status' FROM sensors WHERE uuid = ?",
               [plan.odd_sensor]) == ("drifting",)
    assert one(db, "SELECT raw->>'$.wkt' FROM projections WHERE site_uuid = ? AND "
                   "projection_type = 'wkt'", [plan.odd_site])[0].startswith("GEOGCS")
    meta, stations = one(db, "SELECT projection_metadata, base_stations FROM gnss_solutions "
                             "WHERE device_serial_number = ?", [plan.gnss_enums])
    assert {p["heightType"] for p in json.loads(meta)} == {"geoid"}
    assert all(b["status"] == "calibrating" for b in json.loads(stations))


def test_extra_keys_are_kept_in_the_raw_json(mutated):
    db, _, _ = mutated
    expected = json.dumps(EXTRA_VALUE["values"])
    for table in ("sites", "devices", "sensors", "parameters", "sensor_attributes",
                  "device_gnss_config", "base_stations", "projections", "device_groups"):
        count, kept = one(db, f"SELECT count(*), count(*) FILTER (WHERE "
                              f"raw->>'$.{EXTRA}.since' = 'v1.1' AND "
                              f"(raw->'$.{EXTRA}.values')::VARCHAR = ?) FROM {table}",
                          [expected.replace(" ", "")])
        assert count > 0 and kept == count, table
    # nested objects keep theirs too (health, battery, location, a parameter's path)
    assert one(db, f"SELECT count(*), count(*) FILTER (WHERE "
                   f"json_extract(raw, '$.health.battery.{EXTRA}') IS NOT NULL AND "
                   f"(json_type(raw, '$.location') != 'OBJECT' OR "
                   f"json_extract(raw, '$.location.{EXTRA}') IS NOT NULL)) FROM devices") == \
        (len(query(db, "SELECT 1 FROM devices")),) * 2
    assert one(db, f"SELECT count(*) FILTER (WHERE "
                   f"json_extract(raw, '$.parameterPath.{EXTRA}') IS NULL) FROM parameters") == (0,)
    # the GNSS solution's lists and maps, stored as JSON, keep them as well
    for column in ("projection_metadata", "base_stations"):
        for (text,) in query(db, f"SELECT {column} FROM gnss_solutions"):
            assert all(EXTRA in entry for entry in json.loads(text)), column
    assert all(EXTRA in json.loads(u) for (u,) in query(db, "SELECT units FROM gnss_solutions"))


def test_every_metadata_row_keeps_the_whole_object_it_was_given(mutated):
    """Not just the extra key: the raw column is the object exactly as the proxy sent it."""
    db, _, proxy = mutated
    devices = {d["serialNumber"]: d for page in proxy.sent["GET /devices"]
               for d in page["items"]}
    sites = {s["uuid"]: s for s in proxy.sent["GET /sites"][0]["items"]}
    sensors = {s["uuid"]: s for d in devices.values() for s in d["sensors"]}
    parameters = {p["uuid"]: p for s in sensors.values() for p in s["parameters"]}
    for table, key, sent in (("devices", "serial_number", devices), ("sites", "uuid", sites),
                             ("sensors", "uuid", sensors), ("parameters", "uuid", parameters)):
        stored = {str(k): json.loads(raw) for k, raw in
                  query(db, f"SELECT {key}, raw FROM {table}")}
        assert stored.keys() == sent.keys(), table
        for k, obj in sent.items():
            assert stored[k] == obj, (table, k)


def test_missing_optional_keys_and_nulls_become_null(mutated, clean, plan):
    db, _, _ = mutated
    row = one(db, "SELECT alias, name, description, display_name, legacy_device_id, site_uuid, "
                  "lat, lon, sampling_period_s, tx_period_s, last_seen, next_tx, last_data, "
                  "battery_percentage, battery_voltage, power_source, signal_quality, "
                  "tx_success_rate, product, hardware_model, firmware_version, state "
                  "FROM devices WHERE serial_number = ?", [plan.nulls])
    assert row[3] == plan.nulls  # display name falls back to the serial number
    assert row[:3] == (None, None, None) and row[4:21] == (None,) * 17, row
    assert row[21] is not None
    assert query(db, "SELECT last_activated_at, last_deactivated_at FROM sensors WHERE "
                     "device_serial_number = ? AND (last_activated_at IS NOT NULL OR "
                     "last_deactivated_at IS NOT NULL)", [plan.nulls]) == []
    assert one(db, "SELECT description, timezone FROM sites WHERE uuid = ?",
               [plan.null_site]) == (None, None)
    # left out
    assert one(db, "SELECT power_source, raw->'$.health.powerSource', "
                   "raw->'$.health.connection.lteTxMode' FROM devices WHERE serial_number = ?",
               [plan.missing]) == (None, None, None)
    assert query(db, "SELECT uuid FROM sensors WHERE device_serial_number = ? AND "
                     "last_activated_at IS NOT NULL", [plan.missing]) == []
    assert query(db, "SELECT count(*) FROM sensor_attributes a JOIN sensors s ON "
                     "s.uuid = a.sensor_uuid WHERE s.device_serial_number IN (?, ?)",
                 [plan.missing, plan.nulls]) == [(0,)]
    assert query(db, "SELECT count(*) FROM base_stations WHERE site_uuid = ?",
                 [plan.site_without_gnss_key]) == [(0,)]
    assert query(db, "SELECT count(*) FROM projections WHERE site_uuid = ?",
                 [plan.site_without_gnss_key]) == [(0,)]
    # and the devices that were left alone are as in a clean sync
    others = "serial_number NOT IN (?, ?, ?, ?, ?, ?, ?)"
    keep = [plan.nulls, plan.missing, plan.enums, plan.virtual, plan.gnss_enums,
            plan.big_id, plan.negative_id]
    cols = "serial_number, state, connection_status, power_source, legacy_device_id, site_uuid"
    assert query(db, f"SELECT {cols} FROM devices WHERE {others} ORDER BY 1", keep) == \
        query(clean, f"SELECT {cols} FROM devices WHERE {others} ORDER BY 1", keep)


def test_legacy_device_ids_at_the_ends_of_the_range_round_trip_exactly(mutated, plan):
    db, _, _ = mutated
    for serial, value in plan.legacy.items():
        assert one(db, "SELECT legacy_device_id, raw->>'$.legacyDeviceId', "
                       "json_extract(raw, '$.legacyDeviceId')::BIGINT FROM devices "
                       "WHERE serial_number = ?", [serial]) == (value, str(value), value)


# ----------------------------------------------------------------------------- 401

def test_a_rejected_key_stops_the_sync_with_one_clear_line(upstream, tmp_path):
    db = tmp_path / "rejected.duckdb"
    r = cli_sync(upstream.base_url, db, key=WRONG_KEY)
    assert r.returncode == 2, (r.stdout, r.stderr)
    lines = r.stderr.strip().splitlines()
    assert len(lines) == 1, r.stderr
    assert "key" in lines[0].lower() and "rejected" in lines[0].lower(), lines[0]
    assert "Traceback" not in r.stderr + r.stdout
    assert WRONG_KEY not in r.stderr + r.stdout
    if db.exists():  # no data, and the run is recorded as failed without the key
        assert query(db, "SELECT count(*) FROM devices") == [(0,)]
        assert query(db, "SELECT count(*) FROM readings") == [(0,)]
        runs = query(db, "SELECT status, coalesce(message, '') FROM sync_runs")
        assert [status for status, _ in runs] == ["failed"]
        assert WRONG_KEY not in runs[0][1]


def test_a_key_rejected_mid_sync_stops_it_and_leaves_only_whole_windows(upstream, clean,
                                                                       tmp_path):
    """The key is revoked after the first data window: the sync stops at once (exit 2, one
    line), what was committed is whole, and a later run with a good key completes it."""
    def refuse(method, path, body):
        if (method, path) == ("POST", "/sensor-data") and \
                any(x[:2] == (method, path) and x[3] == 200 for x in proxy.requests):
            return 401, {"message": "API key not accepted: check the key or ask for a new one."}
        return None

    db = tmp_path / "revoked.duckdb"
    proxy = MutatingProxy(upstream.base_url, refuse=refuse)
    with proxy:
        r = cli_sync(proxy.base_url, db)
        refused = [x for x in proxy.requests if x[3] == 401]
    assert r.returncode == 2, (r.stdout, r.stderr)
    assert len(r.stderr.strip().splitlines()) == 1 and "rejected" in r.stderr, r.stderr
    assert "Traceback" not in r.stderr and KEY not in r.stderr + r.stdout
    assert len(refused) == 1, "the sync went on after the key was rejected"
    assert query(db, "SELECT status FROM sync_runs") == [("failed",)]
    # one window committed whole: each parameter it moved has exactly the truth up to its
    # cursor, the others have nothing
    # (a cursor is the newest point received: NULL for a stream the window had no point of)
    cursors = dict(query(db, "SELECT key, cursor_ts FROM sync_cursors WHERE kind = 'readings' "
                             "AND cursor_ts IS NOT NULL"))
    assert cursors
    truth = query(clean, "SELECT parameter_uuid::VARCHAR, ts, value FROM readings ORDER BY 1, 2")
    mirrored = query(db, "SELECT parameter_uuid::VARCHAR, ts, value FROM readings ORDER BY 1, 2")
    assert mirrored == [t for t in truth if t[0] in cursors and t[1] <= cursors[t[0]]]
    assert mirrored
    # resuming with a working key gives the clean mirror
    assert cli_sync(upstream.base_url, db).returncode == 0
    assert data_snapshot(db) == data_snapshot(clean)


# ----------------------------------------------------------------------------- 403

def test_a_forbidden_parameter_is_recorded_and_skipped_and_the_rest_syncs(upstream, clean,
                                                                         tmp_path):
    forbidden = query(clean, "SELECT p.uuid::VARCHAR FROM parameters p JOIN readings r ON "
                             "r.parameter_uuid = p.uuid WHERE p.sensor_uuid NOT IN (SELECT "
                             "sensor_uuid FROM gnss_solutions) GROUP BY 1 ORDER BY 1 LIMIT 1")
    forbidden = forbidden[0][0]

    def refuse(method, path, body):
        if (method, path) == ("POST", "/sensor-data") and \
                forbidden in (body or {}).get("parameterUuids", ()):
            return 403, {"message": f"This API key has no access to parameter {forbidden}."}
        return None

    db = tmp_path / "forbidden.duckdb"
    with MutatingProxy(upstream.base_url, refuse=refuse) as proxy:
        r = cli_sync(proxy.base_url, db, quiet=False)
        refused = [x for x in proxy.requests if x[3] == 403]
    assert r.returncode == 0, r.stderr
    assert "Traceback" not in r.stderr
    assert refused and "problem" in r.stdout, r.stdout
    problems = query(db, "SELECT resource, status, message FROM sync_problems")
    assert problems and {(res, st) for res, st, _ in problems} == \
        {(f"readings:{forbidden}", 403)}, problems
    assert one(db, "SELECT status, problems FROM sync_runs")[0] == "ok"
    assert query(db, "SELECT count(*) FROM readings WHERE parameter_uuid = ?",
                 [forbidden]) == [(0,)]
    assert query(db, "SELECT count(*) FROM sync_cursors WHERE stream = ?",
                 [f"readings:{forbidden}"]) == [(0,)], "a skipped stream must not move on"
    assert data_snapshot(db) == data_snapshot(clean, drop_parameters={forbidden})
    status = cli("status", "--db", str(db))
    assert status.returncode == 0, status.stderr
    assert forbidden in status.stdout and "403" in status.stdout, status.stdout


def test_a_forbidden_gnss_device_is_recorded_and_skipped_and_the_rest_syncs(upstream, clean,
                                                                           plan, tmp_path):
    device = plan.gnss_enums
    (sensor,) = one(clean, "SELECT sensor_uuid::VARCHAR FROM gnss_solutions WHERE "
                           "device_serial_number = ?", [device])

    def refuse(method, path, body):
        if (method, path) == ("POST", "/sensor-data/gnss") and \
                device in (body or {}).get("deviceSerialNumbers", ()):
            return 403, {"message": f"This API key has no access to device {device!r}."}
        return None

    db = tmp_path / "forbidden-gnss.duckdb"
    with MutatingProxy(upstream.base_url, refuse=refuse) as proxy:
        report = sync(proxy.base_url, db)
    assert report.status == "ok"
    problems = query(db, "SELECT resource, status FROM sync_problems")
    assert problems and all(st == 403 for _, st in problems)
    assert all(device in res or sensor in res for res, _ in problems), problems
    gnss_params = {u for (u,) in query(clean, "SELECT uuid::VARCHAR FROM parameters WHERE "
                                              "sensor_uuid = ?", [sensor])}
    mine, truth = data_snapshot(db, drop_parameters=gnss_params, drop_sensors={sensor}), \
        data_snapshot(clean, drop_sensors={sensor})
    assert mine == truth


def test_forbidden_device_groups_are_recorded_and_the_rest_syncs(upstream, clean, tmp_path):
    def refuse(method, path, body):
        if (method, path) == ("GET", "/device-groups"):
            return 403, {"message": "This API key has no access to device groups."}
        return None

    db = tmp_path / "no-groups.duckdb"
    with MutatingProxy(upstream.base_url, refuse=refuse) as proxy:
        report = sync(proxy.base_url, db)
    assert report.status == "ok"
    problems = query(db, "SELECT resource, status FROM sync_problems")
    assert len(problems) == 1 and problems[0][1] == 403 and "group" in problems[0][0], problems
    assert query(db, "SELECT serial_number FROM devices ORDER BY 1") == \
        query(clean, "SELECT serial_number FROM devices ORDER BY 1")
    assert data_snapshot(db) == data_snapshot(clean)


def test_a_site_limited_key_syncs_exactly_its_sites_data(upstream, clean, plan, tmp_path):
    """The real server's own scoping (its 403s for what a key may not see) never trips it."""
    site = plan.odd_site
    with start_server(size=SIZE, limits=LIMITS, api_keys={"k2": frozenset({site})}) as srv:
        db = tmp_path / "site.duckdb"
        r = cli_sync(srv.base_url, db, key="k2")
    assert r.returncode == 0, r.stderr
    assert query(db, "SELECT count(*) FROM sync_problems") == [(0,)]
    serials = {s for (s,) in query(clean, "SELECT serial_number FROM devices WHERE "
                                          "site_uuid = ?", [site])}
    assert {s for (s,) in query(db, "SELECT serial_number FROM devices")} == serials
    params = {u for (u,) in query(clean, "SELECT uuid::VARCHAR FROM parameters WHERE "
                                         "device_serial_number NOT IN (SELECT unnest(?))",
                                  [sorted(serials)])}
    sensors = {u for (u,) in query(clean, "SELECT sensor_uuid::VARCHAR FROM gnss_solutions "
                                          "WHERE device_serial_number NOT IN "
                                          "(SELECT unnest(?))", [sorted(serials)])}
    assert data_snapshot(db) == data_snapshot(clean, drop_parameters=params,
                                              drop_sensors=sensors)


@pytest.mark.parametrize("lookback_h,caught", [(6, True), (0, False)])
def test_late_points_are_caught_by_the_lookback(tmp_path, lookback_h, caught):
    """Points that reach the service late (after newer ones were already served) lie inside
    a window the mirror has synced; the look-back re-reads them on the next sync.  (The
    newest point is served: an answer lacking the newest point /latest names is a cut one,
    which the completeness checks follow up at once, lookback or not.)"""
    from datetime import datetime, timedelta, timezone

    start = datetime(2026, 1, 1, 8, tzinfo=timezone.utc)
    late_after = (start - timedelta(hours=2)).strftime("%Y-%m-%dT%H:%M:%S")

    hidden = []

    def hide_recent(method, path, payload):
        if (method, path) == ("POST", "/sensor-data"):
            for item in payload["items"][:3]:  # three parameters' last two hours are late
                kept = [p for p in item["data"][:-1] if p["timestamp"][:19] <= late_after]
                kept += item["data"][-1:]  # ... all but the newest point
                hidden.extend(item["data"][len(kept) - 1:-1])
                item["data"] = kept

    db = tmp_path / f"late-{lookback_h}.duckdb"
    with start_server(size=SIZE, now=start) as srv, \
            MutatingProxy(srv.base_url, mutate=hide_recent) as proxy:
        # One logger only: its parameters share one cursor, so no other stream's older
        # cursor widens the next window and re-reads the late points by accident.
        devices = Api(srv.base_url).ok("get", "/devices", includeSensors="true")["items"]
        logger = next(d["serialNumber"] for d in devices if d["state"] == "active"
                      and not d["gnss"] and d["txPeriodSeconds"] == 3600
                      and d["samplingPeriodSeconds"] == 900
                      and d["health"]["connection"]["status"] == "online")
        assert sync(proxy.base_url, db, devices=(logger,)).status == "ok"
    later = start + timedelta(hours=1)
    with start_server(size=SIZE, now=later) as srv:
        assert sync(srv.base_url, db, lookback=timedelta(hours=lookback_h),
                    devices=(logger,)).status == "ok"
        clean = tmp_path / "clean.duckdb"
        sync(srv.base_url, clean, devices=(logger,))
    assert (data_snapshot(db) == data_snapshot(clean)) is caught
    assert hidden, "the proxy hid no point: the test would prove nothing"

"""Issue 27, point 6: types by meaning.  A service that writes numbers as JSON strings
(``"46.3030235"``, ``"600"``; proto3 JSON writes every int64 so: ``"250000000"``).

What a new user met: every such metadata value NULL in the mirror with no problem recorded,
every GNSS epoch with a string id in quarantine, and ``devmon probe`` ending in a traceback.
Each test runs the reference server with the misbehaviours ``metadata_number_strings`` and
``epoch_id_strings`` (and an honest one of the same world to compare with) over HTTP.

The rule (``store/answers/quarantine.py``, one home): a value is read by its meaning, not by
its JSON type.  A number column takes a JSON number or a string holding exactly a decimal
literal; an integer column takes those when their value is whole (``"600"``, ``"2.0"``,
``"1e3"``), not ``"2.5"``.  What cannot be read (``"abc"``, ``"NaN"``, an integer beyond the
column) is NULL in its column, kept as sent in the row's raw JSON and recorded as a problem.
"""

from __future__ import annotations

import json
import os
import subprocess

import pytest
from http_stubs import MutatingProxy
from support import KEY, NOW, Api, snapshot, start_server, sync
from support import devmon as run_devmon
from support import rows as query

from devmon_sync.server import Misbehaviour, WorldSize
from devmon_sync.store.answers.quarantine import read_integer, read_number

SIZE = WorldSize(sites=3, devices=14, days=3)
STRINGS = Misbehaviour(metadata_number_strings=True, epoch_id_strings=True)
# Every typed metadata column: the mirror must hold the same values whichever way they came.
METADATA = {
    "sites": "uuid", "devices": "serial_number", "sensors": "uuid", "parameters": "uuid",
    "sensor_attributes": "uuid", "device_gnss_config": "device_serial_number",
    "base_stations": "site_uuid, id", "projections": "site_uuid, id",
    "device_groups": "uuid", "device_group_members": "group_uuid, device_serial_number"}
NUMBER_COLUMNS = {  # columns that came from a JSON number: each must hold values
    "devices": ("lat", "lon", "sampling_period_s", "tx_period_s", "battery_voltage",
                "battery_percentage", "tx_success_rate", "legacy_device_id"),
    "sensors": ("channel_index",), "parameters": ("display_precision", "read_index"),
    "sensor_attributes": ("value",), "device_gnss_config": ("arp_height_m",),
    "base_stations": ("id",), "projections": ("id", "srid")}


def metadata(db) -> dict[str, list[tuple]]:
    """Every metadata table's typed columns (not the raw JSON as sent, not the run)."""
    out = {}
    for table, key in METADATA.items():
        cols = [c for (c,) in query(db, "SELECT column_name FROM duckdb_columns() WHERE "
                                        "table_name = ? AND column_name NOT IN "
                                        "('raw', 'last_run_id') ORDER BY column_index", [table])]
        out[table] = query(db, f"SELECT {', '.join(cols)} FROM {table} ORDER BY {key}")
    out["gnss_solutions"] = query(db, "SELECT sensor_uuid, device_serial_number, srid, units "
                                      "FROM gnss_solutions ORDER BY 1")
    return out


@pytest.fixture(scope="module")
def honest(tmp_path_factory):
    """A sync of an honest server of the same world: the truth."""
    db = tmp_path_factory.mktemp("honest") / "honest.duckdb"
    with start_server(size=SIZE) as srv:
        assert sync(srv.base_url, db).status == "ok"
    return db


@pytest.fixture(scope="module")
def strings_server():
    with start_server(size=SIZE, misbehaviour=STRINGS) as srv:
        yield srv


@pytest.fixture(scope="module")
def strings(strings_server, tmp_path_factory):
    """(mirror, report) of a sync of the service writing numbers as strings."""
    db = tmp_path_factory.mktemp("strings") / "strings.duckdb"
    return db, sync(strings_server.base_url, db)


# ----------------------------------------------------------------------------- the server


def test_the_server_writes_metadata_numbers_and_epoch_ids_as_strings(strings_server):
    """Without this the tests below could pass against a server sending numbers."""
    api = Api(strings_server.base_url)
    devices = api.ok("get", "/devices", includeSensors="true", limit=500)
    rover = next(d for d in devices["items"] if d["gnss"] and d["gnss"]["baseStation"])
    assert isinstance(rover["location"]["lat"], str) and float(rover["location"]["lat"])
    assert rover["samplingPeriodSeconds"] == str(int(rover["samplingPeriodSeconds"]))
    assert isinstance(rover["health"]["battery"]["voltage"], str)
    assert isinstance(rover["gnss"]["arpHeight"], str)
    assert isinstance(rover["gnss"]["baseStation"]["id"], str)
    assert isinstance(rover["sensors"][0]["channelIndex"], str)
    assert isinstance(rover["sensors"][0]["parameters"][0]["displayPrecision"], str)
    assert isinstance(rover["gnss"]["enableLeverArmCompensation"], bool)  # not a number
    site = next(s for s in api.ok("get", "/sites")["items"] if s["gnss"])
    assert isinstance(site["gnss"]["projections"][0]["srid"], str)
    gnss = api.ok("post", "/sensor-data/gnss", {"deviceSerialNumbers": [rover["serialNumber"]],
                                                "startDate": "2025-12-31T00:00:00Z",
                                                "endDate": NOW.isoformat()})["items"][0]
    epoch = gnss["data"][0]
    assert isinstance(epoch["id"], str) and isinstance(epoch["bs"], str)
    assert isinstance(epoch["lat"], float)  # the points' values stay numbers
    assert isinstance(gnss["srid"], str)


# ----------------------------------------------------------------------------- the sync


def test_the_mirror_holds_the_same_metadata_as_from_an_honest_service(honest, strings):
    db, report = strings
    assert report.status == "ok" and not report.problems, report.problems
    truth = metadata(honest)
    for table, columns in NUMBER_COLUMNS.items():  # the honest mirror has values to compare
        for column in columns:
            assert query(honest, f"SELECT count({column}) FROM {table}")[0][0] > 0, column
    got = metadata(db)
    for table in truth:
        assert got[table] == truth[table], table


def test_gnss_epochs_with_string_ids_are_read_as_ids_and_none_quarantined(honest, strings):
    db, report = strings
    assert report.quarantined == 0
    assert query(db, "SELECT count(*) FROM quarantine") == [(0,)]
    truth = snapshot(honest)
    assert len(truth["gnss_epochs"]) > 100
    assert snapshot(db) == truth


def test_the_run_says_once_how_many_values_came_as_strings(strings):
    _, report = strings
    said = [n for n in report.notes if "JSON strings" in n]
    assert len(said) == 1, report.notes
    count = int(said[0].split()[0].replace(",", ""))
    assert count >= report.epoch_rows  # every epoch id at least


# ----------------------------------------------------------------------------- the rule


@pytest.mark.parametrize("value, number", [
    ("46.3030235", 46.3030235), ("600", 600.0), ("-1.5e3", -1500.0), (600, 600.0),
    (2.5, 2.5)])
def test_a_number_column_reads_decimal_strings_exactly(value, number):
    assert read_number(value) == (number, None, isinstance(value, str))


@pytest.mark.parametrize("value, whole", [
    ("250000000", 250000000), ("-7", -7), ("2.0", 2), ("1e3", 1000), (6, 6), (6.0, 6),
    ("9223372036854775807", 2**63 - 1)])
def test_an_integer_column_reads_whole_values_however_written(value, whole):
    assert read_integer(value) == (whole, None, isinstance(value, str))


@pytest.mark.parametrize("value, problem", [
    ("2.5", "'2.5' is not a whole number"), (2.5, "2.5 is not a whole number"),
    ("abc", "'abc' is not a number"), ("NaN", "'NaN' is not a number"),
    ("9223372036854775808", "'9223372036854775808' is outside int64"),
    (True, "true is not a number"), ("", "'' is not a number")])
def test_an_integer_column_refuses_what_is_not_a_whole_number(value, problem):
    assert read_integer(value) == (None, problem, False)


# ----------------------------------------------------------------------------- unreadable


SPOILED = {  # where in one device: (the value sent, the table and column left NULL)
    "location.lat": ("abc", "devices", "lat"),
    "samplingPeriodSeconds": ("NaN", "devices", "sampling_period_s"),
    "legacyDeviceId": ("99999999999999999999", "devices", "legacy_device_id"),
    "gnss.arpHeight": (True, "device_gnss_config", "arp_height_m"),
    "sensors[0].channelIndex": ("2.5", "sensors", "channel_index"),
    "sensors[0].parameters[0].readIndex": ("4294967296", "parameters", "read_index")}


class Rewriter:
    """What a proxy (``http_stubs.MutatingProxy``) does to spoil the ``SPOILED`` values of
    one device in every GET answer holding it (/devices, /devices/{sn}, /sites,
    /device-groups)."""

    def __init__(self, serial: str):
        self.serial = serial

    def __call__(self, method: str, path: str, payload) -> None:
        if method == "GET":
            self.spoil(payload)

    def spoil(self, node) -> None:
        if isinstance(node, list):
            for value in node:
                self.spoil(value)
        elif isinstance(node, dict):
            if node.get("serialNumber") == self.serial and "deviceKind" in node:
                self.spoil_device(node)
            for value in node.values():
                self.spoil(value)

    @staticmethod
    def spoil_device(d: dict) -> None:
        d["location"]["lat"] = SPOILED["location.lat"][0]
        d["samplingPeriodSeconds"] = SPOILED["samplingPeriodSeconds"][0]
        d["legacyDeviceId"] = SPOILED["legacyDeviceId"][0]
        d["gnss"]["arpHeight"] = SPOILED["gnss.arpHeight"][0]
        if d.get("sensors"):  # a device list without sensors (sites, groups) has none
            d["sensors"][0]["channelIndex"] = SPOILED["sensors[0].channelIndex"][0]
            d["sensors"][0]["parameters"][0]["readIndex"] = \
                SPOILED["sensors[0].parameters[0].readIndex"][0]


def cli(*args: str) -> subprocess.CompletedProcess:
    env = {k: v for k, v in os.environ.items() if k != "DEVMON_API_KEY"}
    return run_devmon(*args, timeout=300, env={**env, "COLUMNS": "1000"})


def test_a_value_that_cannot_be_read_is_a_recorded_problem_not_a_silent_null(
        strings_server, honest, tmp_path):
    api = Api(strings_server.base_url)
    rover = next(d for d in api.ok("get", "/devices", limit=500)["items"] if d["gnss"])
    serial = rover["serialNumber"]
    db = tmp_path / "spoiled.duckdb"
    with MutatingProxy(strings_server.base_url, mutate=Rewriter(serial)) as proxy:
        run = cli("sync", "--base-url", proxy.base_url, "--db", str(db), "--api-key", KEY,
                  "--rate-limit", "0")
    assert run.returncode == 0, run.stderr
    assert "Traceback" not in run.stderr
    problems = query(db, "SELECT resource, message FROM sync_problems")
    assert f"{len(SPOILED)} problems (see `devmon status`)" in run.stdout, \
        (run.stdout, problems)
    (sensor,), = query(db, "SELECT uuid::VARCHAR FROM sensors WHERE device_serial_number = ? "
                           "AND channel_index IS NULL", [serial])
    (parameter,), = query(db, "SELECT uuid::VARCHAR FROM parameters WHERE "
                              "device_serial_number = ? AND read_index IS NULL", [serial])
    owner = {"devices": f"device:{serial}", "device_gnss_config": f"device:{serial}",
             "sensors": f"sensor:{sensor}", "parameters": f"parameter:{parameter}"}
    key = {"devices": "serial_number", "device_gnss_config": "device_serial_number",
           "sensors": "uuid", "parameters": "uuid"}
    row = {"devices": serial, "device_gnss_config": serial, "sensors": sensor,
           "parameters": parameter}
    status = cli("status", "--db", str(db)).stdout
    for where, (sent, table, column) in SPOILED.items():
        name = where.rsplit(".", 1)[-1]
        stored, raw = query(db, f"SELECT {column}, raw FROM {table} WHERE {key[table]} = ?",
                            [row[table]])[0]
        assert stored is None, where
        assert json.dumps(sent) in raw, (where, raw)  # kept as sent
        said = [m for r, m in problems if r == owner[table] and name in m
                and json.dumps(sent).strip('"') in m]
        assert len(said) == 1, (where, problems)
        assert said[0] in status, status
    # the rest of the same objects was read, strings and all
    assert query(db, "SELECT lon IS NOT NULL, tx_period_s IS NOT NULL FROM devices WHERE "
                     "serial_number = ?", [serial]) == [(True, True)]
    others = "WHERE serial_number != ? ORDER BY 1"
    assert query(db, f"SELECT serial_number, lat, lon, sampling_period_s FROM devices {others}",
                 [serial]) == query(honest, "SELECT serial_number, lat, lon, sampling_period_s "
                                            f"FROM devices {others}", [serial])


# ----------------------------------------------------------------------------- probe


def test_probe_names_numbers_written_as_strings_without_a_traceback(strings_server, tmp_path):
    r = cli("probe", "--base-url", strings_server.base_url, "--api-key", KEY, "--db",
            str(tmp_path / "p.duckdb"), "--rate-limit", "0")
    assert "Traceback" not in r.stderr, r.stderr
    assert r.returncode == 0, r.stdout + r.stderr
    row = next(line for line in r.stdout.splitlines() if line.startswith("numbers as strings"))
    assert "samplingPeriodSeconds" in row and "GNSS epoch id" in row, row
    assert "reads them as numbers" in row, row
    gnss = next(line for line in r.stdout.splitlines()
                if line.startswith("largest GNSS answer"))
    assert "no GNSS devices" not in gnss and "epochs" in gnss, gnss
    reading = next(line for line in r.stdout.splitlines()
                   if line.startswith("largest reading answer"))
    assert "no parameters" not in reading, reading


def test_probe_of_an_honest_service_finds_numbers_as_numbers(tmp_path):
    with start_server(size=SIZE) as srv:
        r = cli("probe", "--base-url", srv.base_url, "--api-key", KEY, "--db",
                str(tmp_path / "p.duckdb"), "--rate-limit", "0")
    assert r.returncode == 0, r.stdout + r.stderr
    row = next(line for line in r.stdout.splitlines() if line.startswith("numbers as strings"))
    assert "none seen" in row, row


def test_devmon_serve_switches_both_misbehaviours_on():
    from devmon_sync import cli
    from devmon_sync.cli.serve import serve_config

    args = cli.build_parser().parse_args(["serve", "--misbehave", "metadata-number-strings=true",
                                          "--misbehave", "epoch-id-strings=yes"])
    assert serve_config(args).misbehaviour == STRINGS
    assert serve_config(args).misbehaviour.active

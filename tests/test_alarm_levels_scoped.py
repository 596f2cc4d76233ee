"""Alarm levels per device, site or group, per component, and the alarm history: real mirrors
synced from the reference server into tmp_path, the store's functions and the real `devmon
alarms` in a subprocess.

The reference world puts each site's GNSS devices in a group "<site>: GNSS", nested in a
group named as the site, nested in the organisation's "... network" group; its other
physical devices are members of the site's group, and weather devices of no group."""

from __future__ import annotations

import shutil
import subprocess
from datetime import datetime, timedelta, timezone

import duckdb
import numpy as np
import pytest

from devmon_sync.server import WorldSize
from devmon_sync.store import Mirror, StoreError, queries
from devmon_sync.store.access import MirrorAccess
from devmon_sync.store.schema import LATEST_VERSION, MIGRATIONS

from support import synced_mirror
from support import devmon as run_devmon

WORLD = WorldSize(sites=2, devices=12, days=3)


def devmon(*args: str) -> subprocess.CompletedProcess:
    return run_devmon(*args, timeout=120)


@pytest.fixture(scope="module")
def synced(tmp_path_factory):
    return synced_mirror(tmp_path_factory.mktemp("levels") / "mirror.duckdb", WORLD)


@pytest.fixture
def db(synced, tmp_path):
    """A fresh copy of the synced mirror for one test."""
    path = tmp_path / "mirror.duckdb"
    shutil.copy(synced, path)
    return path


@pytest.fixture(scope="module")
def world(synced) -> dict:
    """Who is where: a GNSS rover, its site, its GNSS group and the groups above it, a
    device of the site in no group, and a device of another site."""
    con = duckdb.connect(str(synced), read_only=True)
    try:
        rover, site_uuid, site, group_uuid, group = con.execute("""
            SELECT d.serial_number, s.uuid::VARCHAR, s.name, g.uuid::VARCHAR, g.name
            FROM devices d JOIN sites s ON s.uuid = d.site_uuid
            JOIN device_group_members m ON m.device_serial_number = d.serial_number
            JOIN device_groups g ON g.uuid = m.group_uuid
            JOIN device_gnss_config c ON c.device_serial_number = d.serial_number
            WHERE NOT c.is_base_station AND g.name LIKE '%: GNSS'
            ORDER BY d.serial_number LIMIT 1""").fetchone()
        site_group_uuid, site_group, network_uuid, network = con.execute("""
            SELECT p.uuid::VARCHAR, p.name, n.uuid::VARCHAR, n.name FROM device_groups g
            JOIN device_groups p ON p.uuid = g.parent_uuid
            JOIN device_groups n ON n.uuid = p.parent_uuid
            WHERE g.uuid = ?::UUID""", [group_uuid]).fetchone()
        ungrouped = con.execute("""
            SELECT serial_number FROM devices WHERE site_uuid = ?::UUID AND serial_number
            NOT IN (SELECT device_serial_number FROM device_group_members)
            ORDER BY 1 LIMIT 1""", [site_uuid]).fetchone()[0]
        elsewhere = con.execute("""
            SELECT serial_number FROM devices WHERE site_uuid IS DISTINCT FROM ?::UUID
            AND serial_number NOT IN (SELECT device_serial_number FROM device_group_members
                                      WHERE group_uuid = ?::UUID)
            ORDER BY 1 LIMIT 1""", [site_uuid, network_uuid]).fetchone()[0]
    finally:
        con.close()
    return dict(rover=rover, site_uuid=site_uuid, site=site, group_uuid=group_uuid,
                group=group, site_group_uuid=site_group_uuid, site_group=site_group,
                network_uuid=network_uuid, network=network, ungrouped=ungrouped,
                elsewhere=elsewhere)


SITE_3D = {"alert": 30.0, "alarm": 60.0}
SITE_VERTICAL_RATE = {"alert": 3.0}
GROUP_VERTICAL = {"alert": 10.0, "alarm": 20.0}
NETWORK_VERTICAL = {"alert": 5.0, "alarm": 8.0}  # more cautious, but farther up
NETWORK_RATE = {"alert": 1.0, "alarm": 4.0, "emergency": 9.0}
DEVICE_3D = {"alert": 12.0, "alarm": 25.0, "emergency": 50.0}


def _set_everywhere(m: Mirror, w: dict) -> None:
    queries.set_alarm_levels(m, w["site_uuid"], "displacement", SITE_3D, scope="site")
    queries.set_alarm_levels(m, w["site_uuid"], "velocity:vertical", SITE_VERTICAL_RATE,
                             scope="site")
    queries.set_alarm_levels(m, w["group_uuid"], "displacement:vertical", GROUP_VERTICAL,
                             scope="group")
    queries.set_alarm_levels(m, w["network_uuid"], "displacement:vertical", NETWORK_VERTICAL,
                             scope="group")
    queries.set_alarm_levels(m, w["network_uuid"], "velocity", NETWORK_RATE, scope="group")
    queries.set_alarm_levels(m, w["rover"], "displacement", DEVICE_3D)


def test_a_device_follows_its_own_levels_else_its_groups_else_its_sites(db, world):
    w = world
    with Mirror.open(db) as m:
        _set_everywhere(m, w)
        levels = queries.alarm_levels(m, w["rover"])
        sources = queries.alarm_level_sources(m, w["rover"])
        assert levels == {"displacement": DEVICE_3D, "displacement:vertical": GROUP_VERTICAL,
                          "velocity": NETWORK_RATE, "velocity:vertical": SITE_VERTICAL_RATE}
        assert sources == {"displacement": "device",
                           "displacement:vertical": f"group {w['group']}",
                           "velocity": f"group {w['network']}",
                           "velocity:vertical": f"site {w['site']}"}
        assert all(list(v.values()) == sorted(v.values()) for v in levels.values())
        # a device of the site in no group: the site's levels only
        assert queries.alarm_levels(m, w["ungrouped"]) == {
            "displacement": SITE_3D, "velocity:vertical": SITE_VERTICAL_RATE}
        assert set(queries.alarm_level_sources(m, w["ungrouped"]).values()) == \
            {f"site {w['site']}"}
        assert queries.alarm_levels(m, w["elsewhere"]) == {}
        assert queries.alarm_levels(m, "NO-SUCH-DEVICE") == {}
        many = [w["rover"], w["ungrouped"], w["elsewhere"], "NO-SUCH-DEVICE"]
        assert queries.alarm_levels_of_devices(m, many) == \
            {sn: queries.alarm_levels(m, sn) for sn in many}
        # what is set on a scope itself, not what it inherits
        assert queries.alarm_levels_set(m, "group", w["group_uuid"]) == \
            {"displacement:vertical": GROUP_VERTICAL}
        assert queries.alarm_levels_set(m, "device", w["rover"]) == {"displacement": DEVICE_3D}
        # clearing the device's own ladder falls back to the site's
        queries.set_alarm_levels(m, w["rover"], "displacement", {})
        assert queries.alarm_levels(m, w["rover"])["displacement"] == SITE_3D
        assert queries.alarm_level_sources(m, w["rover"])["displacement"] == f"site {w['site']}"


def test_of_equally_near_groups_the_most_cautious_ladder_applies(synced, tmp_path, world):
    """A device in two groups that both set a quantity: the ladder whose lowest threshold is
    lowest applies, whichever group it belongs to first."""
    db = tmp_path / "two-groups.duckdb"
    shutil.copy(synced, db)
    con = duckdb.connect(str(db))
    con.execute("INSERT INTO device_groups (uuid, name) VALUES "
                "('00000000-0000-4000-8000-00000000abcd', 'Dam crest')")
    con.execute("INSERT INTO device_group_members VALUES "
                "('00000000-0000-4000-8000-00000000abcd', ?, NULL)", [world["rover"]])
    con.close()
    with Mirror.open(db) as m:
        crest = queries.alarm_scope(m, "group", "DAM CREST")
        assert crest.scope_id == "00000000-0000-4000-8000-00000000abcd"
        queries.set_alarm_levels(m, world["group_uuid"], "velocity:horizontal",
                                 {"alert": 2.0, "alarm": 3.0}, scope="group")
        queries.set_alarm_levels(m, crest.scope_id, "velocity:horizontal",
                                 {"alert": 1.5, "alarm": 6.0}, scope="group")
        assert queries.alarm_levels(m, world["rover"]) == \
            {"velocity:horizontal": {"alert": 1.5, "alarm": 6.0}}
        assert queries.alarm_level_sources(m, world["rover"]) == \
            {"velocity:horizontal": "group Dam crest"}


def test_scopes_are_named_in_any_case_and_bad_names_list_what_exists(synced, tmp_path, world):
    db = tmp_path / "names.duckdb"
    shutil.copy(synced, db)
    with Mirror.open(db) as m:
        site = queries.alarm_scope(m, "site", world["site"].upper())
        assert (site.scope, site.scope_id, site.name) == \
            ("site", world["site_uuid"], world["site"])
        assert queries.alarm_scope(m, "group", world["group_uuid"].upper()).name == \
            world["group"]
        assert queries.alarm_scope(m, "device", world["rover"]).scope_id == world["rover"]
        with pytest.raises(StoreError, match=r"no site 'Nowhere'.*sites: .*" +
                           world["site"]):
            queries.alarm_scope(m, "site", "Nowhere")
        with pytest.raises(StoreError, match=r"no device 'NOPE'.*serial number"):
            queries.alarm_scope(m, "device", "NOPE")
        with pytest.raises(StoreError, match="per device"):
            queries.set_alarm_levels(m, world["site_uuid"], "parameter:x", {"a": 1.0},
                                     scope="site")
        with pytest.raises(StoreError, match="Unknown alarm quantity 'displacement:sideways'"):
            queries.set_alarm_levels(m, world["rover"], "displacement:sideways", {"a": 1.0})
    con = duckdb.connect(str(db))
    con.execute("INSERT INTO device_groups (uuid, name) VALUES "
                "('00000000-0000-4000-8000-0000000000ef', ?)", [world["group"].lower()])
    con.close()
    r = devmon("alarms", "--db", str(db), "--group", world["group"])
    assert r.returncode == 2 and "Traceback" not in r.stderr, r.stderr
    assert f"2 groups are named {world['group']!r}" in r.stderr, r.stderr
    assert world["group_uuid"] in r.stderr and "0000000000ef" in r.stderr, r.stderr
    r = devmon("alarms", "--db", str(db), "--group", "no such group")
    assert r.returncode == 2 and "no group 'no such group'" in r.stderr, r.stderr
    assert world["network"] in r.stderr and len(r.stderr.strip().splitlines()) == 1, r.stderr


def test_the_command_sets_levels_per_scope_and_shows_where_each_comes_from(db, world):
    w = world
    r = devmon("alarms", "--db", str(db), "--site", w["site"].lower(),
               "--displacement", "alert=30,alarm=60", "--velocity", "vertical:alert=3")
    assert r.returncode == 0, r.stderr
    assert f"Alarm levels set on site {w['site']} ({w['site_uuid']})" in r.stdout, r.stdout
    assert "velocity:vertical  alert >= 3 mm/day" in r.stdout, r.stdout
    r = devmon("alarms", "--db", str(db), "--group", w["group"].upper(),
               "--displacement", "vertical:alert=10,alarm=20",
               "--displacement", "horizontal:alert=15,alarm=30")
    assert r.returncode == 0 and "displacement:horizontal" in r.stdout, r.stderr
    r = devmon("alarms", "--db", str(db), "--device", w["rover"],
               "--displacement", "3d:alert=12,alarm=25,emergency=50",
               "--velocity", "up:alert=0.5,alarm=2")
    assert r.returncode == 0, r.stderr
    lines = {line.split()[0]: line for line in r.stdout.splitlines()[1:]}
    assert lines["displacement"].endswith("set on the device"), r.stdout
    assert "alert >= 12 mm, alarm >= 25 mm, emergency >= 50 mm" in lines["displacement"]
    assert lines["displacement:vertical"].endswith(f"from group {w['group']}"), r.stdout
    assert lines["velocity:up"].endswith("set on the device"), r.stdout
    assert lines["velocity:vertical"].endswith(f"from site {w['site']}"), r.stdout
    assert lines["velocity"].split()[1:] == ["none", "set"], r.stdout
    with Mirror.open(db, read_only=True) as m:
        assert queries.alarm_levels(m, w["rover"])["displacement:horizontal"] == \
            {"alert": 15.0, "alarm": 30.0}
    r = devmon("alarms", "--db", str(db), "--device", w["rover"], "--clear",
               "displacement:vertical", "--clear", "velocity:up", "--clear", "displacement")
    assert r.returncode == 0, r.stderr
    lines = {line.split()[0]: line for line in r.stdout.splitlines()[1:]}
    assert "velocity:up" not in lines, r.stdout  # cleared on the device; none above
    assert lines["displacement:vertical"].endswith(f"from group {w['group']}"), r.stdout
    assert lines["displacement"].endswith(f"from site {w['site']}"), r.stdout
    r = devmon("alarms", "--db", str(db), "--group", w["group"], "--clear",
               "displacement:vertical")
    assert r.returncode == 0 and "displacement:vertical" not in r.stdout, r.stdout


def _schema_5_mirror(path) -> str:
    """A mirror as devmon left it before levels per site and group: migrations 1 to 5,
    with levels in the old per-device table."""
    con = duckdb.connect(str(path))
    for version, description, sql in MIGRATIONS:
        if version <= 5:
            con.execute(sql)
            con.execute("INSERT INTO schema_migrations VALUES (?, ?, now())",
                        [version, description])
    con.execute("INSERT INTO alarm_levels VALUES ('SN-1', 'displacement', 'alert', 10, 'mm', "
                "now()), ('SN-1', 'displacement', 'alarm', 25, 'mm', now()), "
                "('SN-1', 'velocity', 'alert', 0.5, 'mm/day', now()), "
                "('SN-2', 'parameter:3f0c', 'high', 2.5, 'bar', now())")
    con.close()
    return str(path)


@pytest.mark.parametrize("opened_by", ["sync or alarms", "the GUI (read-only)"])
def test_an_older_mirrors_device_levels_are_kept(tmp_path, opened_by):
    path = _schema_5_mirror(tmp_path / "five.duckdb")
    if opened_by == "sync or alarms":
        Mirror.open(path).close()
    else:
        MirrorAccess.open(path)  # what the window does with an older file
    with Mirror.open(path, read_only=True) as m:
        assert m.schema_version() == LATEST_VERSION
        assert queries.alarm_levels(m, "SN-1") == {"displacement": {"alert": 10, "alarm": 25},
                                                   "velocity": {"alert": 0.5}}
        assert queries.alarm_level_sources(m, "SN-1") == {"displacement": "device",
                                                          "velocity": "device"}
        assert queries.parameter_alarm_levels(m, ["3f0c"]) == {"3f0c": {"high": 2.5}}
        assert m._row("SELECT count(*) FROM duckdb_tables() "
                      "WHERE table_name = 'alarm_levels'")[0] == 0


def test_the_migration_run_again_changes_nothing(tmp_path):
    """A file whose schema_migrations row of the last migration was removed (as tests of
    older files do) gets it again: it must not fail, nor lose levels."""
    path = _schema_5_mirror(tmp_path / "again.duckdb")
    Mirror.open(path).close()
    con = duckdb.connect(path)
    con.execute("DELETE FROM schema_migrations WHERE version = ?", [LATEST_VERSION])
    con.close()
    with Mirror.open(path) as m:
        assert m.schema_version() == LATEST_VERSION
        assert queries.alarm_levels(m, "SN-1")["displacement"] == {"alert": 10, "alarm": 25}


def test_alarm_history_round_trip_and_worst_levels(db, world):
    rover, other = world["rover"], world["ungrouped"]
    t0 = datetime(2026, 3, 1, 12, tzinfo=timezone.utc)
    with Mirror.open(db) as m:
        queries.set_alarm_levels(m, rover, "displacement", DEVICE_3D)
        queries.set_alarm_levels(m, rover, "velocity:vertical", {"alert": 1.0, "alarm": 4.0})
        queries.set_alarm_levels(m, other, "displacement", DEVICE_3D)
        rows = [
            {"quantity": "displacement", "level": "alarm", "first_exceeded": t0 + timedelta(2),
             "last_exceeded": t0 + timedelta(5), "exceeded_at_end": True, "peak_value": 31.5,
             "reference": "mean of the first 24 h", "evaluated_until": t0 + timedelta(5)},
            {"quantity": "displacement", "level": "alert",
             "first_exceeded": np.datetime64("2026-03-02T06:00"),  # naive: UTC
             "last_exceeded": np.datetime64("2026-03-06T12:00"), "exceeded_at_end": True,
             "peak_value": np.float64(31.5), "reference": "mean of the first 24 h",
             "evaluated_until": t0 + timedelta(5)},
            {"quantity": "velocity:vertical", "level": "alert", "first_exceeded": t0,
             "last_exceeded": t0 + timedelta(1), "exceeded_at_end": False,
             "peak_value": 1.7, "evaluated_until": t0 + timedelta(5)},
        ]
        queries.replace_alarm_history(m, rover, rows)
        queries.replace_alarm_history(m, other, [
            {"quantity": "displacement", "level": "alert", "first_exceeded": t0,
             "exceeded_at_end": False, "peak_value": float("nan")}])
        history = queries.alarm_history(m, rover)
        assert [(h["quantity"], h["level"]) for h in history] == [
            ("velocity:vertical", "alert"), ("displacement", "alert"), ("displacement", "alarm")]
        alert = history[1]
        assert alert["first_exceeded"] == datetime(2026, 3, 2, 6, tzinfo=timezone.utc)
        assert alert["level_rank"] == 0 and alert["threshold"] == 12.0
        assert alert["unit"] == "mm" and alert["reference"] == "mean of the first 24 h"
        assert history[2]["level_rank"] == 1 and history[2]["threshold"] == 25.0
        assert history[0]["unit"] == "mm/day" and history[0]["reference"] is None
        assert all(h["evaluated_at"] is not None and
                   h["evaluated_until"] == t0 + timedelta(5) for h in history)
        assert queries.alarm_history(m, other)[0]["peak_value"] is None
        assert queries.worst_alarm_levels(m) == {rover: "alarm"}  # other's is over
        assert queries.worst_alarm_levels(m, [other]) == {}
        # a new evaluation replaces the device's history whole
        queries.replace_alarm_history(m, rover, [
            {"quantity": "velocity:vertical", "level": "alarm", "first_exceeded": t0,
             "exceeded_at_end": True, "peak_value": 4.2}])
        assert [h["level"] for h in queries.alarm_history(m, rover)] == ["alarm"]
        assert queries.worst_alarm_levels(m) == {rover: "alarm"}
        with pytest.raises(ValueError, match="given twice"):
            queries.replace_alarm_history(m, rover, [{"quantity": "velocity", "level": "a"}] * 2)
        with pytest.raises(ValueError, match="only fields among"):
            queries.replace_alarm_history(m, rover, [{"quantity": "velocity", "level": "a",
                                                      "colour": "red"}])
        assert len(queries.alarm_history(m, rover)) == 1  # a refused write changed nothing
        queries.replace_alarm_history(m, rover, [])
        assert queries.alarm_history(m, rover) == [] and queries.worst_alarm_levels(m) == {}


def test_the_histories_of_a_batch_are_written_at_once_all_or_nothing(db, world):
    """An evaluation writes a batch of rovers' histories and evaluations in one
    transaction (``replace_alarm_histories``): each device's rows as its own
    ``replace_alarm_history`` writes them, and a malformed row of one device leaves every
    device's history and evaluation as it was."""
    rover, other = world["rover"], world["ungrouped"]
    t0 = datetime(2026, 3, 1, 12, tzinfo=timezone.utc)
    rows = {rover: [{"quantity": "displacement", "level": "alert", "first_exceeded": t0,
                     "exceeded_at_end": True, "peak_value": 14.0}],
            other: [{"quantity": "velocity", "level": "alarm", "first_exceeded": t0,
                     "last_exceeded": t0 + timedelta(1), "exceeded_at_end": False,
                     "peak_value": 3.5, "episodes": 2}]}
    evaluation = {"evaluated_until": t0 + timedelta(3), "rule": "99 %, 6 h"}

    def written(m) -> tuple:
        def without_clock(row: dict) -> dict:
            return {k: v for k, v in row.items() if k != "evaluated_at"}
        return ({sn: [without_clock(h) for h in queries.alarm_history(m, sn)]
                 for sn in (rover, other)},
                m.con.execute("SELECT device_serial_number, evaluated_until, rule, note "
                              "FROM alarm_evaluations ORDER BY 1").fetchall())

    with Mirror.open(db) as m:
        queries.set_alarm_levels(m, rover, "displacement", DEVICE_3D)
        for sn in (rover, other):
            queries.replace_alarm_history(m, sn, rows[sn], evaluation)
        one_by_one = written(m)
        for sn in (rover, other):
            queries.replace_alarm_history(m, sn, [], None)
        queries.replace_alarm_histories(m, [(sn, rows[sn], evaluation) for sn in (rover, other)])
        assert written(m) == one_by_one
        assert one_by_one[0][rover][0]["threshold"] == 12.0 and len(one_by_one[1]) == 2
        with pytest.raises(ValueError, match="only fields among"):
            queries.replace_alarm_histories(m, [
                (rover, [], {"evaluated_until": t0, "rule": "x", "note": "new"}),
                (other, [{"quantity": "velocity", "level": "a", "colour": "red"}], None)])
        assert written(m) == one_by_one


def test_several_ladders_are_set_all_or_nothing(db, world):
    """The app's editor saves every changed row at once: one bad row (a parameter the
    device does not have) leaves every ladder as it was."""
    serial = world["rover"]
    with Mirror.open(db) as m:
        queries.set_alarm_levels(m, serial, "displacement", {"alert": 10.0})
        with pytest.raises(StoreError, match="no parameter"):
            queries.set_alarm_ladders(m, serial, {
                "displacement": {"alert": 3.0}, "velocity:vertical": {"alert": 1.0},
                "parameter:00000000-0000-0000-0000-000000000000": {"alert": 1.0}})
        assert queries.alarm_levels(m, serial) == {"displacement": {"alert": 10.0}}
        queries.set_alarm_ladders(m, serial, {"displacement": {}, "velocity:up": {"a": 2.0}})
        assert queries.alarm_levels(m, serial) == {"velocity:up": {"a": 2.0}}

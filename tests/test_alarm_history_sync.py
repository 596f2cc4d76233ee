"""The alarm history kept in the mirror: evaluated by `devmon sync` for the rovers it brought
new epochs to, and by `devmon alarms` when levels change; shown by `devmon alarms --device`.
A real reference server, real `devmon` processes, real DuckDB files."""

from __future__ import annotations

import subprocess

import pytest

from devmon_sync.server import WorldSize
from devmon_sync.store import Mirror, queries

from support import KEY, rovers_by_scenario, start_server
from support import devmon as run_devmon

WORLD = WorldSize(sites=3, devices=16, days=60)


def devmon(*args: str) -> subprocess.CompletedProcess:
    r = run_devmon(*args, timeout=600)
    assert "Traceback" not in r.stdout + r.stderr, r.stderr
    return r


@pytest.fixture(scope="module")
def server():
    srv = start_server(size=WORLD)
    yield srv
    srv.stop()


def sync(server, db, *extra: str) -> subprocess.CompletedProcess:
    return devmon("sync", "--base-url", server.base_url, "--db", str(db), "--api-key", KEY,
                  "--rate-limit", "0", *extra)


@pytest.fixture(scope="module")
def world(server, tmp_path_factory):
    """The rovers by scenario and their site's name, from a first full mirror."""
    db = tmp_path_factory.mktemp("world") / "m.duckdb"
    assert sync(server, db, "--quiet").returncode == 0
    with Mirror.open(db, read_only=True) as m:
        rovers = rovers_by_scenario(queries.gnss_devices(m))
    return rovers, rovers["accelerating"].site_name


def test_a_sync_evaluates_the_rovers_it_brought_data_to_and_says_which_are_at_a_level(
        server, world, tmp_path):
    rovers, site = world
    acc, stable = rovers["accelerating"].serial_number, rovers["stable"].serial_number
    db = tmp_path / "m.duckdb"
    # a mirror of the stable rover alone, site levels set: only it is evaluated, below them
    assert sync(server, db, "--quiet", "--device", stable).returncode == 0
    r = devmon("alarms", "--db", str(db), "--site", site.upper(),
               "--displacement", "alert=10,alarm=40", "--velocity", "alert=0.5,alarm=2")
    assert r.returncode == 0, r.stderr
    assert "Alarms: 1 rover evaluated." in r.stdout, r.stdout
    with Mirror.open(db, read_only=True) as m:
        assert queries.alarm_evaluation_due(m) == []  # evaluated, nothing new since
        assert queries.alarm_history(m, stable) == []

    # the full sync brings the accelerating rover: evaluated with the site's levels
    r = sync(server, db)
    assert r.returncode == 0, r.stderr
    assert f"{acc}: ALARM by 3D displacement" in r.stdout, r.stdout
    with Mirror.open(db, read_only=True) as m:
        history = {(h["quantity"], h["level"]): h for h in queries.alarm_history(m, acc)}
        assert queries.worst_alarm_levels(m) == {acc: "alarm"}
        assert queries.alarm_evaluation_due(m) == []
    assert {("displacement", "alert"), ("displacement", "alarm")} <= set(history)
    alert, alarm = history[("displacement", "alert")], history[("displacement", "alarm")]
    assert alert["first_exceeded"] < alarm["first_exceeded"] <= alarm["last_exceeded"]
    assert alarm["exceeded_at_end"] and alarm["threshold"] == 40.0 and alarm["episodes"] == 1
    assert alarm["peak_value"] >= 40.0 and alarm["unit"] == "mm"
    assert "24 h" in alarm["reference"] or "start" in alarm["reference"]

    # a quiet sync with nothing new evaluates nothing and says nothing of alarms
    r = sync(server, db, "--quiet")
    assert r.returncode == 0 and "Alarms:" not in r.stdout, r.stdout

    # the device's view shows where its levels come from and its history
    r = devmon("alarms", "--db", str(db), "--device", acc)
    assert r.returncode == 0, r.stderr
    assert f"from site {site}" in r.stdout and "Alarm history" in r.stdout, r.stdout
    assert "displacement alarm (>= 40 mm): first " in r.stdout and "still reached" in r.stdout


def test_changing_levels_evaluates_again_and_removing_them_clears_the_history(
        server, world, tmp_path):
    rovers, _ = world
    acc = rovers["accelerating"].serial_number
    db = tmp_path / "m.duckdb"
    assert sync(server, db, "--quiet").returncode == 0
    r = devmon("alarms", "--db", str(db), "--device", acc, "--displacement",
               "vertical:alert=5", "--displacement", "down:alert=5", "--displacement",
               "up:alert=5")
    assert r.returncode == 0, r.stderr
    with Mirror.open(db, read_only=True) as m:
        reached = {h["quantity"] for h in queries.alarm_history(m, acc)}
    assert reached == {"displacement:vertical", "displacement:down"}  # it sinks: not 'up'
    r = devmon("alarms", "--db", str(db), "--device", acc, "--clear", "displacement:vertical",
               "--clear", "displacement:down", "--clear", "displacement:up")
    assert r.returncode == 0, r.stderr
    assert "no level reached" in r.stdout, r.stdout
    with Mirror.open(db, read_only=True) as m:
        assert queries.alarm_history(m, acc) == []
        assert queries.worst_alarm_levels(m) == {}


def test_evaluate_alone_evaluates_every_rover_with_levels(server, world, tmp_path):
    rovers, _ = world
    db = tmp_path / "m.duckdb"
    assert sync(server, db, "--quiet").returncode == 0
    r = devmon("alarms", "--db", str(db), "--evaluate")
    assert r.returncode == 0 and "No rover has displacement or velocity levels" in r.stdout
    creep = rovers["creep"].serial_number
    assert devmon("alarms", "--db", str(db), "--device", creep, "--displacement",
                  "alert=1").returncode == 0
    r = devmon("alarms", "--db", str(db), "--evaluate")
    assert r.returncode == 0, r.stderr
    assert "Alarms: 1 rover evaluated." in r.stdout and f"{creep}: ALERT" in r.stdout


def test_the_rule_is_the_mirrors_and_a_sooner_rule_reaches_levels_sooner(server, world,
                                                                        tmp_path):
    rovers, _ = world
    acc = rovers["accelerating"].serial_number
    db = tmp_path / "m.duckdb"
    assert sync(server, db, "--quiet").returncode == 0
    assert devmon("alarms", "--db", str(db), "--device", acc, "--displacement",
                  "alert=10").returncode == 0
    with Mirror.open(db, read_only=True) as m:
        (strict,) = queries.alarm_history(m, acc)
    r = devmon("alarms", "--db", str(db), "--confidence", "90", "--min-duration", "1")
    assert r.returncode == 0, r.stderr
    assert "90 % confidence (one-sided) for at least 1 h" in r.stdout, r.stdout
    assert f"{acc}: ALERT" in r.stdout, r.stdout
    with Mirror.open(db, read_only=True) as m:
        (sooner,) = queries.alarm_history(m, acc)
        assert queries.alarm_rule(m) == {"confidence": 0.9, "min_duration_hours": 1.0}
    assert sooner["first_exceeded"] < strict["first_exceeded"]
    r = devmon("analyze", "--db", str(db), "--device", acc)
    assert r.returncode == 0 and "90 % confidence" in r.stdout, r.stdout
    r = devmon("alarms", "--db", str(db), "--device", acc)
    assert "Rule (whole mirror): a level counts as reached when exceeded with 90 %" in r.stdout
    r = devmon("alarms", "--db", str(db), "--confidence", "100")
    assert r.returncode == 2 and "--confidence 100: give a percentage" in r.stderr, r.stderr


def test_devices_are_named_in_any_case_or_by_name(server, world, tmp_path):
    """The user's report: names were case-sensitive on the command line."""
    rovers, _ = world
    acc = rovers["accelerating"]
    db = tmp_path / "m.duckdb"
    assert sync(server, db, "--quiet").returncode == 0
    for text in (acc.serial_number.lower(), acc.display_name.upper()):
        r = devmon("analyze", "--db", str(db), "--device", text)
        assert r.returncode == 0 and r.stdout.startswith(acc.serial_number), (text, r.stderr)
        r = devmon("alarms", "--db", str(db), "--device", text)
        assert r.returncode == 0 and acc.serial_number in r.stdout, (text, r.stderr)
    r = devmon("report", "--db", str(db), "--device", acc.serial_number.lower(), "--out",
               str(tmp_path / "r.pdf"))
    assert r.returncode == 0, r.stderr
    r = devmon("analyze", "--db", str(db), "--device", "no-such-rover")
    assert r.returncode == 2 and "no-such-rover" in r.stderr

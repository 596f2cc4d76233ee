"""`devmon verify`: a point changed behind the mirror's back is found, reported by device,
parameter and time, recorded for the next sync, and repaired by --repair."""

from __future__ import annotations

import shutil
import subprocess

import duckdb
import pytest
from support import KEY, start_server
from support import devmon as run_devmon
from support import snapshot, sync

from devmon_sync import api_contract as contract
from devmon_sync.server import WorldSize
from devmon_sync.store import summary

SIZE = WorldSize(sites=2, devices=8, days=4)
LIMITS = contract.ResponseLimits(max_points=1500, max_epochs=100)  # several windows


@pytest.fixture(scope="module")
def world(tmp_path_factory):
    srv = start_server(size=SIZE, limits=LIMITS)
    db = tmp_path_factory.mktemp("verify") / "mirror.duckdb"
    assert sync(srv.base_url, db, limits=LIMITS).status == "ok"
    yield srv, db
    srv.stop()


def verify(srv, db, *extra) -> subprocess.CompletedProcess:
    return run_devmon("verify", "--db", str(db), "--base-url", srv.base_url, "--api-key", KEY,
                      "--rate-limit", "0", *extra, timeout=180)


def tamper(db) -> tuple[str, str]:
    """Change one reading, drop another, add a foreign one and shift one GNSS epoch; return
    the changed parameter's device serial and name."""
    with duckdb.connect(str(db)) as con:
        uuid, ts = con.execute("SELECT parameter_uuid, ts FROM readings ORDER BY ts DESC, "
                               "parameter_uuid LIMIT 1 OFFSET 500").fetchone()
        con.execute("UPDATE readings SET value = value + 0.5 WHERE parameter_uuid = ? AND ts = ?",
                    [uuid, ts])
        con.execute("DELETE FROM readings WHERE rowid = (SELECT min(rowid) FROM readings)")
        con.execute("INSERT INTO readings SELECT parameter_uuid, ts + INTERVAL 7 SECOND, 1.0 "
                    "FROM readings ORDER BY ts, parameter_uuid LIMIT 1 OFFSET 800")
        con.execute("UPDATE gnss_epochs SET lat = lat + 1e-7 WHERE rowid = "
                    "(SELECT max(rowid) FROM gnss_epochs)")
        return con.execute("SELECT device_serial_number, name FROM parameters WHERE uuid = ?",
                           [uuid]).fetchone()


def test_an_untouched_mirror_matches(world, tmp_path):
    srv, db = world
    copy = tmp_path / "copy.duckdb"
    shutil.copy(db, copy)
    r = verify(srv, copy, "--all")
    assert r.returncode == 0, r.stdout + r.stderr
    assert "matches the service in every point checked" in r.stdout
    assert "Checking" in r.stdout.splitlines()[0] and "requests" in r.stdout.splitlines()[0]


def test_changed_points_are_found_reported_and_repaired(world, tmp_path):
    srv, db = world
    truth = snapshot(db)
    copy = tmp_path / "tampered.duckdb"
    shutil.copy(db, copy)
    device, name = tamper(copy)
    assert snapshot(copy) != truth
    r = verify(srv, copy, "--all")
    assert r.returncode == 1, r.stdout + r.stderr
    assert "Traceback" not in r.stderr
    assert device in r.stdout and name[:28] in r.stdout and "1 changed" in r.stdout
    assert "1 missing" in r.stdout and "1 extra" in r.stdout and "GNSS epochs" in r.stdout
    status = run_devmon("status", "--db", str(copy), timeout=60)
    assert "unverified" in status.stdout and device in status.stdout
    r = verify(srv, copy, "--all", "--repair")
    assert r.returncode == 0, r.stdout + r.stderr
    assert "Repaired" in r.stdout
    assert snapshot(copy) == truth
    r = verify(srv, copy, "--all")
    assert r.returncode == 0 and "matches" in r.stdout, r.stdout


def test_a_point_stored_twice_is_found_and_repaired(world, tmp_path):
    """Exactly once, audited: a reading and a GNSS epoch copied behind the mirror's back
    (the same key, the same values) are reported as extra points, and --repair leaves each
    stored once."""
    srv, db = world
    truth = snapshot(db)
    copy = tmp_path / "doubled.duckdb"
    shutil.copy(db, copy)
    con = duckdb.connect(str(copy))
    try:
        con.execute("INSERT INTO readings SELECT * FROM readings ORDER BY ts, parameter_uuid "
                    "LIMIT 1 OFFSET 300")
        con.execute("INSERT INTO gnss_epochs SELECT * FROM gnss_epochs ORDER BY ts, sensor_uuid "
                    "LIMIT 1 OFFSET 30")
        doubled = con.execute("SELECT (SELECT count(*) FROM readings), "
                              "(SELECT count(*) FROM gnss_epochs)").fetchone()
    finally:
        con.close()
    r = verify(srv, copy, "--all")
    assert r.returncode == 1, r.stdout + r.stderr
    assert r.stdout.count("1 extra") == 2, r.stdout
    r = verify(srv, copy, "--all", "--repair")
    assert r.returncode == 0 and "Repaired" in r.stdout, r.stdout + r.stderr
    assert snapshot(copy) == truth
    con = duckdb.connect(str(copy), read_only=True)
    try:
        after = con.execute("SELECT (SELECT count(*) FROM readings), "
                            "(SELECT count(*) FROM gnss_epochs)").fetchone()
    finally:
        con.close()
    assert after == (doubled[0] - 1, doubled[1] - 1)


def tamper_summaries(db) -> tuple[str, str]:
    """Raise one six-hour summary's highest value and drop another slot's row, the readings
    left as they are; return the first one's device serial and parameter name."""
    with duckdb.connect(str(db)) as con:
        uuid, slot = con.execute("SELECT parameter_uuid, slot FROM readings_summary "
                                 "WHERE valid > 0 ORDER BY slot DESC, parameter_uuid "
                                 "LIMIT 1 OFFSET 20").fetchone()
        con.execute("UPDATE readings_summary SET max_value = max_value + 0.5 "
                    "WHERE parameter_uuid = ? AND slot = ?", [uuid, slot])
        con.execute("DELETE FROM readings_summary WHERE rowid = "
                    "(SELECT min(rowid) FROM readings_summary)")
        return con.execute("SELECT device_serial_number, name FROM parameters WHERE uuid = ?",
                           [uuid]).fetchone()


def summary_mismatches(db) -> int:
    with duckdb.connect(str(db), read_only=True) as con:
        return summary.mismatches(con)


def test_summaries_that_differ_from_their_readings_are_found_and_rebuilt(world, tmp_path):
    """The readings agree with the service but two of their six-hour summaries (what the
    long plots and a report's statistics read) do not agree with the readings: named by
    device and parameter, left as they are without --repair (and the exit status says so),
    rebuilt from the readings with it, without a request more."""
    srv, db = world
    copy = tmp_path / "summaries.duckdb"
    shutil.copy(db, copy)
    truth = snapshot(db)
    device, name = tamper_summaries(copy)
    assert summary_mismatches(copy) == 2
    r = verify(srv, copy, "--all")
    assert r.returncode == 1, r.stdout + r.stderr
    assert "Traceback" not in r.stderr
    assert "six-hour summaries" in r.stdout and device in r.stdout and name[:28] in r.stdout
    assert "devmon verify --repair" in r.stdout
    assert summary_mismatches(copy) == 2
    requests = r.stdout.splitlines()[0]
    r = verify(srv, copy, "--all", "--repair")
    assert r.returncode == 0, r.stdout + r.stderr
    assert "Rebuilt from the readings." in r.stdout
    assert r.stdout.splitlines()[0] == requests  # the same requests planned: none for this
    assert summary_mismatches(copy) == 0
    assert snapshot(copy) == truth
    r = verify(srv, copy, "--all")
    assert r.returncode == 0 and "matches" in r.stdout, r.stdout


def test_the_next_sync_heals_what_verify_found(world, tmp_path):
    srv, db = world
    truth = snapshot(db)
    copy = tmp_path / "healed.duckdb"
    shutil.copy(db, copy)
    tamper(copy)
    assert verify(srv, copy, "--all").returncode == 1
    assert sync(srv.base_url, copy, limits=LIMITS).status == "ok"
    assert snapshot(copy) == truth


def test_a_sample_and_a_budget_bound_the_requests(world, tmp_path):
    srv, db = world
    copy = tmp_path / "sample.duckdb"
    shutil.copy(db, copy)
    con = duckdb.connect(str(copy), read_only=True)
    windows = con.execute("SELECT count(*) FROM (SELECT DISTINCT window_start, window_end, "
                          "run_id, committed_at FROM sync_windows)").fetchone()[0]
    con.close()
    assert windows >= 4
    from devmon_sync.sync.verify import miss_probability, sample_size

    r = verify(srv, copy)  # the default: enough for a stated power
    n = sample_size(windows)
    assert r.returncode == 0 and f"Checking {n} of {windows} committed windows" in r.stdout, \
        r.stdout
    assert "1% of the windows differ from the service is caught with" in r.stdout, r.stdout
    assert 1 - miss_probability(windows, n) >= 0.95
    r = verify(srv, copy, "--share", "3%")  # a small share says how little it proves
    assert r.returncode == 0 and f"Checking 1 of {windows} committed windows" in r.stdout, r.stdout
    assert "for 95%" in r.stdout, r.stdout
    r = verify(srv, copy, "--all", "--budget", "2")
    assert r.returncode == 0 and "Checked 2 windows with 2 requests" in r.stdout, r.stdout


@pytest.mark.parametrize("args,message", [
    (["--budget", "0"], "--budget must be at least 1"),
    (["--share", "2"], "is not a share"),
])
def test_bad_arguments_get_one_clear_line(world, tmp_path, args, message):
    srv, db = world
    r = verify(srv, db, *args)
    assert r.returncode == 2 and message in r.stderr and "Traceback" not in r.stderr


def test_no_mirror_is_a_clear_error(world, tmp_path):
    srv, _ = world
    r = verify(srv, tmp_path / "none.duckdb")
    assert r.returncode == 2 and "no mirror at" in r.stderr and "Traceback" not in r.stderr
    assert not (tmp_path / "none.duckdb").exists()


def test_the_default_sample_has_the_stated_power():
    """Issue 27: the old 3 % sample caught a mirror with 1 % of its windows wrong in 1-2 of
    10 tries; the default now catches it with at least 95 % probability, exactly."""
    import random

    from devmon_sync.sync.verify import miss_probability, sample_size

    for total in (5, 40, 326, 5000):
        n = sample_size(total)
        assert 1 - miss_probability(total, n) >= 0.95 > 1 - miss_probability(total, n - 1)
    total, bad = 326, {3, 97, 301, 150}  # ceil(1 %) = 4 windows differ
    rng = random.Random(7)
    caught = sum(bool(bad & set(rng.sample(range(total), sample_size(total))))
                 for _ in range(2000))
    assert caught / 2000 >= 0.94

"""The sync engine against real reference servers: exact, incremental, fault-tolerant."""

from __future__ import annotations

from datetime import timedelta

import duckdb
import numpy as np
import pytest

from devmon_sync import api_contract as contract
from devmon_sync.client import ApiClient
from devmon_sync.server import FaultConfig
from devmon_sync.store import Mirror
from devmon_sync.sync.engine import SyncEngine

from support import (KEY, NOW, SMALL, Api, one_second_rate_window, snapshot,
                     start_server, sync)

@pytest.fixture(scope="module")
def small_server():
    srv = start_server(size=SMALL)
    yield srv
    srv.stop()


@pytest.fixture(scope="module")
def synced(small_server, tmp_path_factory):
    db = tmp_path_factory.mktemp("mirror") / "mirror.duckdb"
    report = sync(small_server.base_url, db)
    assert report.status == "ok"
    return db, report


def test_full_sync_equals_the_servers_truth(small_server, synced):
    db, report = synced
    api = Api(small_server.base_url)
    con = duckdb.connect(str(db), read_only=True)
    params = con.execute("SELECT uuid::VARCHAR FROM parameters WHERE sensor_uuid NOT IN "
                         "(SELECT sensor_uuid FROM gnss_solutions)").fetchall()
    assert len(params) > 100
    start = (NOW - timedelta(days=SMALL.days + 1)).strftime("%Y-%m-%dT%H:%M:%SZ")
    mid = (NOW - timedelta(days=10)).strftime("%Y-%m-%dT%H:%M:%SZ")
    mid2 = (NOW - timedelta(days=10) + timedelta(seconds=1)).strftime("%Y-%m-%dT%H:%M:%SZ")
    total = 0
    for (uuid,) in params:
        truth = []
        for a, b in ((start, mid), (mid2, NOW.strftime("%Y-%m-%dT%H:%M:%SZ"))):
            item = api.ok("post", "/sensor-data", {"parameterUuids": [uuid], "startDate": a,
                                                   "endDate": b, "disableRounding": True})
            truth += item["items"][0]["data"] if item["items"] else []
        mirrored = con.execute("SELECT strftime(ts, '%Y-%m-%dT%H:%M:%S.%gZ'), value FROM "
                               "readings WHERE parameter_uuid = ? ORDER BY ts", [uuid]).fetchall()
        assert [(p["timestamp"], p["value"]) for p in truth] == mirrored, uuid
        total += len(truth)
    assert total == report.readings_rows > 100_000
    _check_epochs(api, con)
    con.close()


def _check_epochs(api, con):
    sensors = con.execute("SELECT sensor_uuid::VARCHAR, device_serial_number FROM gnss_solutions"
                          ).fetchall()
    assert sensors
    start = (NOW - timedelta(days=SMALL.days + 1)).strftime("%Y-%m-%dT%H:%M:%SZ")
    for sensor, serial in sensors:
        item = api.ok("post", "/sensor-data/gnss", {"deviceSerialNumbers": [serial],
                                                    "startDate": start})["items"][0]
        assert item["sensorUuid"] == sensor
        rows = con.execute("SELECT epoch_id, lat, lon, eh, de, vE_or_null FROM (SELECT *, ve AS "
                           "vE_or_null FROM gnss_epochs) WHERE sensor_uuid = ? ORDER BY ts",
                           [sensor]).fetchall()
        truth = [(e["id"], e["lat"], e["lon"], e["eh"], e["dE"], e["vE"]) for e in item["data"]]
        assert rows == truth, serial
        proj = con.execute("SELECT count(*) FROM gnss_projected WHERE sensor_uuid = ?",
                           [sensor]).fetchone()[0]
        assert proj == sum(len(e["proj"]) for e in item["data"])


def test_mirror_has_no_duplicates(synced):
    db, _ = synced
    con = duckdb.connect(str(db), read_only=True)
    assert con.execute("SELECT count(*) FROM (SELECT parameter_uuid, ts FROM readings "
                       "GROUP BY ALL HAVING count(*) > 1)").fetchone()[0] == 0
    assert con.execute("SELECT count(*) FROM (SELECT sensor_uuid, epoch_id FROM gnss_epochs "
                       "GROUP BY ALL HAVING count(*) > 1)").fetchone()[0] == 0
    con.close()


def test_second_sync_with_nothing_new_is_a_handful_of_requests(small_server, synced, tmp_path):
    db, _ = synced
    copy = tmp_path / "copy.duckdb"
    copy.write_bytes(db.read_bytes())
    before = snapshot(copy)
    report = sync(small_server.base_url, copy)
    assert report.status == "ok"
    assert report.readings_rows == 0 and report.epoch_rows == 0
    assert report.requests <= 6, report.requests
    assert snapshot(copy) == before


def test_a_later_clock_fetches_only_the_new_data(tmp_path):
    early = NOW + timedelta(hours=8)
    db = tmp_path / "m.duckdb"
    with start_server(size=SMALL, now=early) as srv:
        sync(srv.base_url, db)
    with start_server(size=SMALL, now=early + timedelta(hours=3)) as srv:
        report = sync(srv.base_url, db, lookback=timedelta(0))
        assert 0 < report.readings_rows < 20_000 and report.epoch_rows > 0
        assert report.requests <= 12
    with start_server(size=SMALL, now=early + timedelta(hours=3)) as srv:
        clean = tmp_path / "clean.duckdb"
        sync(srv.base_url, clean)
    assert snapshot(db) == snapshot(clean)


def test_faults_do_not_change_the_mirror(synced, tmp_path):
    db, _ = synced
    faults = FaultConfig(error_rate=0.1, drop_rate=0.05, truncate_rate=0.1, seed=3)
    with start_server(size=SMALL, faults=faults) as srv:
        faulty = tmp_path / "faulty.duckdb"
        report = sync(srv.base_url, faulty)
        assert report.status == "ok"
    assert snapshot(faulty) == snapshot(db)


def test_full_precision_is_kept(synced):
    db, _ = synced
    con = duckdb.connect(str(db), read_only=True)
    values = np.array([v for (v,) in con.execute(
        "SELECT value FROM readings WHERE value IS NOT NULL LIMIT 5000").fetchall()])
    con.close()
    assert np.mean(np.abs(values * 1e4 - np.round(values * 1e4)) > 1e-6) > 0.5


def test_sigkill_at_random_moments_then_resume_gives_the_same_mirror(small_server, synced,
                                                                     tmp_path):
    """Kill `devmon sync` (SIGKILL, no chance to clean up) at random moments, several times,
    then let it finish: the mirror equals the one of an uninterrupted run.  A moment is a
    random number of the server's answers into the run, plus a random fraction of one more:
    kills land in metadata, planning, and between and inside window commits however fast or
    slow the machine is."""
    import random
    import signal
    import subprocess
    import sys
    import time

    db, _ = synced
    target = tmp_path / "killed.duckdb"
    # Small answers, each a little slow: a sync of many windows, many answers long,
    # so kills land in metadata, in planning and between and inside window commits.
    limits = contract.ResponseLimits(max_points=8000, max_epochs=400)
    with start_server(size=SMALL, limits=limits,
                      faults=FaultConfig(slow_rate=1.0, slow_s=0.02)) as srv:
        command = [sys.executable, "-m", "devmon_sync", "sync", "--base-url", srv.base_url,
                   "--db", str(target), "--api-key", KEY, "--rate-limit", "0", "--quiet"]
        rng = random.Random(11)
        killed = 0

        def answered() -> int:
            return sum(srv.app.status_counts.values())

        for _ in range(6):
            goal = answered() + rng.randint(2, 9)
            proc = subprocess.Popen(command, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE)
            while proc.poll() is None and answered() < goal:
                time.sleep(0.005)
            time.sleep(rng.uniform(0.0, 0.08))
            if proc.poll() is None:
                proc.send_signal(signal.SIGKILL)
                killed += 1
            proc.wait(30)
        done = subprocess.run(command, capture_output=True, text=True, timeout=300)
    assert killed >= 4
    assert done.returncode == 0, done.stderr
    assert snapshot(target) == snapshot(db)


def test_a_second_writer_gets_a_clear_message(synced):
    import subprocess
    import sys

    db, _ = synced
    with Mirror.open(db):
        r = subprocess.run([sys.executable, "-m", "devmon_sync", "status", "--db", str(db)],
                           capture_output=True, text=True, timeout=60)
        code = ("from devmon_sync.store import Mirror, MirrorLockedError\n"
                "import devmon_sync.store.mirror as store_mirror\n"
                "store_mirror.LOCK_WAIT_S = 0.5\n"  # the writer's wait for the lock: not 10 s
                f"try:\n    Mirror.open({str(db)!r})\nexcept MirrorLockedError as e:\n"
                "    print('LOCKED', e)\n")
        w = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True,
                           timeout=60)
    assert "LOCKED" in w.stdout and "another devmon process" in w.stdout
    assert r.returncode == 2 and "another devmon process" in r.stderr
    assert "Traceback" not in r.stderr


@pytest.mark.parametrize("fmt", ["parquet", "csv"])
def test_export_writes_every_table_partitioned_by_device_and_month(synced, tmp_path, fmt):
    import subprocess
    import sys

    db, _ = synced
    out = tmp_path / fmt
    r = subprocess.run([sys.executable, "-m", "devmon_sync", "export", "--db", str(db),
                        "--format", fmt, "--out", str(out)], capture_output=True, text=True,
                       timeout=120)
    assert r.returncode == 0, r.stderr
    con = duckdb.connect()
    reader = "read_parquet" if fmt == "parquet" else "read_csv"
    exported = con.execute(f"SELECT count(*), count(DISTINCT device_serial_number), "
                           f"count(DISTINCT month) FROM {reader}('{out}/readings/**/*.{fmt}', "
                           f"hive_partitioning = true)").fetchone()
    mirror = duckdb.connect(str(db), read_only=True)
    assert exported[0] == mirror.execute("SELECT count(*) FROM readings").fetchone()[0]
    assert exported[1] > 10 and exported[2] >= 1
    assert (out / "readings").is_dir() and any((out / "readings").glob("device_serial_number=*"))
    assert (out / "devices" / f"data_0.{fmt}").exists()
    assert (out / "sync_runs" / f"data_0.{fmt}").exists()
    mirror.close()


def test_dry_run_prints_the_plan_and_writes_nothing(small_server, synced, tmp_path):
    import subprocess
    import sys

    fresh = tmp_path / "fresh.duckdb"
    base = [sys.executable, "-m", "devmon_sync", "sync", "--base-url", small_server.base_url,
            "--api-key", KEY, "--rate-limit", "200", "--dry-run", "--quiet"]
    r = subprocess.run(base + ["--db", str(fresh)], capture_output=True, text=True, timeout=120)
    assert r.returncode == 0, r.stderr
    assert "Dry run" in r.stdout and "readings" in r.stdout and "requests" in r.stdout
    assert "at least" in r.stdout  # the expected duration at the rate limit
    assert not fresh.exists()
    db, _ = synced
    before = db.read_bytes()
    r = subprocess.run(base + ["--db", str(db)], capture_output=True, text=True, timeout=120)
    assert r.returncode == 0 and "0 requests" in r.stdout.split("readings")[1]
    assert db.read_bytes() == before


def _sync_command(base_url: str, db, *extra: str) -> list[str]:
    import sys

    return [sys.executable, "-m", "devmon_sync", "sync", "--base-url", base_url, "--db",
            str(db), "--api-key", KEY, "--rate-limit", "0", *extra]


def test_progress_on_a_terminal_is_one_rewritten_line_with_requests_rows_and_an_eta(
        small_server, tmp_path):
    """stderr on a real pseudo-terminal, as in a user's shell."""
    import os
    import pty
    import subprocess

    controller, terminal = pty.openpty()
    proc = subprocess.Popen(_sync_command(small_server.base_url, tmp_path / "m.duckdb"),
                            stdout=subprocess.PIPE, stderr=terminal, text=True)
    os.close(terminal)
    shown = b""
    while True:
        try:
            chunk = os.read(controller, 65536)
        except OSError:  # the child closed the terminal
            break
        if not chunk:
            break
        shown += chunk
    out, _ = proc.communicate(timeout=300)
    os.close(controller)
    assert proc.returncode == 0, shown[-2000:]
    text = shown.decode()
    updates = [u for u in text.split("\r") if u.strip()]
    assert len(updates) >= 4 and text.count("\n") <= 2  # one line, rewritten in place
    data = [u for u in updates if u.startswith(("readings", "gnss"))]
    assert data and all(" windows, " in u and " requests, " in u and " rows" in u
                        for u in data)
    assert any(", ETA " in u for u in data[1:])  # known once a window has been timed
    assert out.startswith("Synced ") and " readings and " in out


def test_progress_without_a_terminal_is_one_plain_line_per_phase_and_quiet_is_silent(
        small_server, tmp_path):
    import subprocess

    r = subprocess.run(_sync_command(small_server.base_url, tmp_path / "a.duckdb"),
                       capture_output=True, text=True, timeout=300)
    assert r.returncode == 0 and "\r" not in r.stderr
    phases = [line.split()[0] for line in r.stderr.splitlines()]
    assert phases[0] == "metadata" and "readings" in phases and phases[-1] == "done"
    assert len(phases) == len(set(phases))  # a log file gets a line per phase, not per window
    q = subprocess.run(_sync_command(small_server.base_url, tmp_path / "b.duckdb", "--quiet"),
                       capture_output=True, text=True, timeout=300)
    assert q.returncode == 0 and q.stderr == "" and q.stdout == ""


def test_scope_limits_the_data_to_the_named_devices(small_server, tmp_path):
    api = Api(small_server.base_url)
    devices = api.ok("get", "/devices", includeSensors="true")["items"]
    piezo = next(d for d in devices if d["state"] == "active" and d["sensors"]
                 and not d["gnss"])
    db = tmp_path / "scoped.duckdb"
    report = sync(small_server.base_url, db, devices=(piezo["serialNumber"],))
    assert report.status == "ok" and report.readings_rows > 0 and report.epoch_rows == 0
    con = duckdb.connect(str(db), read_only=True)
    owners = con.execute("SELECT DISTINCT p.device_serial_number FROM readings r JOIN "
                         "parameters p ON p.uuid = r.parameter_uuid").fetchall()
    assert owners == [(piezo["serialNumber"],)]
    assert con.execute("SELECT count(*) FROM devices").fetchone()[0] == len(devices)
    con.close()
    from devmon_sync.sync.engine import ScopeError
    with pytest.raises(ScopeError, match="device NOPE"):
        sync(small_server.base_url, db, devices=("NOPE",))


def test_login_then_sync_with_the_profile_alone(small_server, tmp_path):
    import os
    import subprocess
    import sys

    env = dict(os.environ, PYTHON_KEYRING_BACKEND="keyrings.alt.file.PlaintextKeyring",
               XDG_DATA_HOME=str(tmp_path / "data"), DEVMON_CONFIG_DIR=str(tmp_path / "config"))
    env.pop("DEVMON_API_KEY", None)
    devmon = [sys.executable, "-m", "devmon_sync"]
    r = subprocess.run(devmon + ["login", "--profile", "site-a", "--base-url",
                                 small_server.base_url, "--api-key-stdin",
                                 "--allow-plaintext-keyring"], input=KEY + "\n",
                       capture_output=True, text=True, env=env, timeout=60)
    assert r.returncode == 0, r.stderr
    assert KEY not in r.stdout + r.stderr
    assert KEY not in "".join(p.read_text() for p in (tmp_path / "config").rglob("*")
                              if p.is_file())
    db = tmp_path / "m.duckdb"
    r = subprocess.run(devmon + ["sync", "--profile", "site-a", "--db", str(db), "--rate-limit",
                                 "0", "--device", "NOPE"], capture_output=True, text=True,
                       env=env, timeout=120)
    assert r.returncode == 2 and "device NOPE" in r.stderr and "Traceback" not in r.stderr
    r = subprocess.run(devmon + ["sync", "--db", str(db)], capture_output=True, text=True,
                       env=env, timeout=60)
    assert r.returncode == 2 and "--api-key" in r.stderr and "DEVMON_API_KEY" in r.stderr


def test_the_client_paces_itself_under_the_rate_limit(synced, tmp_path, monkeypatch):
    """A 1-second window stands in for the minute on both sides, so the test takes
    seconds."""
    one_second_rate_window(monkeypatch)
    db, _ = synced
    with start_server(size=SMALL, rate_limit_per_minute=2) as srv:
        paced = tmp_path / "paced.duckdb"
        with ApiClient(srv.base_url, KEY, rate_limit_per_minute=2) as client, \
                Mirror.open(paced) as mirror:
            report = SyncEngine(client, mirror).run()
        assert report.status == "ok" and report.requests >= 6  # 2 per window: paced
        assert srv.app.status_counts[429] == 0
    assert snapshot(paced) == snapshot(db)


def test_rate_limit_answers_are_waited_out(synced, tmp_path, monkeypatch):
    monkeypatch.setattr(contract, "RATE_LIMIT_WINDOW_S", 1.0)
    db, _ = synced
    with start_server(size=SMALL, rate_limit_per_minute=2) as srv:
        eager = tmp_path / "eager.duckdb"
        report = sync(srv.base_url, eager)  # the client's own limiter is off
        assert report.status == "ok"
        assert srv.app.status_counts[429] > 0
    assert snapshot(eager) == snapshot(db)


def test_cancel_between_chunks_keeps_what_was_committed_and_resumes(small_server, synced,
                                                                     tmp_path):
    import threading

    db, _ = synced
    target = tmp_path / "cancelled.duckdb"
    cancel = threading.Event()
    seen = []

    def on_progress(p):
        seen.append(p)
        if p.phase in ("readings", "gnss") and p.done >= 1:
            cancel.set()

    with ApiClient(small_server.base_url, KEY, rate_limit_per_minute=0) as client, \
            Mirror.open(target) as mirror:
        report = SyncEngine(client, mirror, on_progress=on_progress, cancel=cancel).run()
    assert report.status == "cancelled" and 1 <= report.windows < len(report.plan)
    assert any(p.eta_s is not None and p.total > p.done for p in seen)
    assert sync(small_server.base_url, target).status == "ok"
    assert snapshot(target) == snapshot(db)

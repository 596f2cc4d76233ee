"""`devmon verify` checks the metadata and the start of each stream's history too (issue 27,
point 9): a mirror whose groups or sensors drifted from the service, or that lacks the oldest
points the service holds, is not "matching the service".

One ``changing-past`` world (``devmon_sync.server.past``), synced before its change at 06:00:
verified against the same server it must be clean (no false difference); verified against
the server after the change it must name the moved device with both groups and the deleted
sensor with its device.  A mirror missing the start of a stream's history is made by hand
(see ``_cut_history_start``): the CLI makes none except by ``--since``, which is the user's
own floor and which verify respects.
"""

from __future__ import annotations

import re
import shutil
import subprocess
from datetime import timedelta

import duckdb
import pytest
from support import KEY, NOW, SMALL, snapshot, start_server, sync
from support import devmon as run_devmon

from devmon_sync.server import past
from devmon_sync.server.contracts import CONTRACTS

BEFORE, AFTER = NOW + timedelta(hours=1), NOW + timedelta(hours=12)
CHANGING = CONTRACTS["changing-past"]


@pytest.fixture(scope="module")
def world(tmp_path_factory):
    """(the server before the change, a mirror synced from it)."""
    srv = start_server(size=SMALL, now=BEFORE, contract=CHANGING)
    db = tmp_path_factory.mktemp("verify-metadata") / "mirror.duckdb"
    assert sync(srv.base_url, db).status == "ok"
    yield srv, db
    srv.stop()


def verify(srv, db, *extra) -> subprocess.CompletedProcess:
    return run_devmon("verify", "--db", str(db), "--base-url", srv.base_url, "--api-key", KEY,
                      "--rate-limit", "0", *extra, timeout=180)


def _copy(db, tmp_path, name: str):
    out = tmp_path / name
    shutil.copy(db, out)
    return out


def _one(db, sql: str, params=()):
    con = duckdb.connect(str(db), read_only=True)
    try:
        return con.execute(sql, list(params)).fetchone()
    finally:
        con.close()


def _line_with(text: str, *words: str) -> str:
    """The output line that holds every one of ``words`` (an assertion error if none)."""
    found = [line for line in text.splitlines() if all(w in line for w in words)]
    assert found, f"no line with {words} in:\n{text}"
    return found[0]


def test_a_fresh_mirror_matches_in_metadata_and_history_start(world, tmp_path):
    """No false difference: the metadata and the start of every stream, read again from the
    unchanged service, match; the summary says what was checked and what it cost."""
    srv, db = world
    copy = _copy(db, tmp_path, "fresh.duckdb")
    (devices,) = _one(copy, "SELECT count(*) FROM devices")
    r = verify(srv, copy, "--all")
    assert r.returncode == 0, r.stdout + r.stderr
    summary = _line_with(r.stdout, "Checked", "window")
    assert f"the metadata of {devices} devices with" in summary, summary
    streams = re.search(r"the start of history of (\d+) streams? with (\d+) requests?", summary)
    assert streams and int(streams[1]) > 0 and int(streams[2]) > 0, summary
    assert "requests in all" in summary, summary
    assert "matches the service in every point checked" in r.stdout, r.stdout
    assert "in its metadata and at the start of every stream's history" in r.stdout, r.stdout
    assert "history starts before" not in r.stdout and "metadata differ" not in r.stdout


def test_a_group_move_and_a_sensor_deletion_are_reported(world, tmp_path):
    """The service after the change: a device moved to another group and a sensor deleted
    upstream.  verify names both by device, with what the mirror and the service say; the
    next sync follows the service and verify is clean again (the deleted sensor, kept in the
    mirror marked deleted, is no difference)."""
    _, db = world
    copy = _copy(db, tmp_path, "changed.duckdb")
    with start_server(size=SMALL, now=AFTER, contract=CHANGING) as srv:
        p = past.picks(srv.app.world)
        assert p.moved_serial and p.deleted_sensor_uuid, "the world has no change to find"
        (moved_from,) = _one(copy, "SELECT name FROM device_groups WHERE uuid = ?",
                             [p.moved_from_group])
        (moved_to,) = _one(copy, "SELECT name FROM device_groups WHERE uuid = ?",
                           [p.moved_to_group])
        (sensor,) = _one(copy, "SELECT coalesce(alias, name) FROM sensors WHERE uuid = ?",
                         [p.deleted_sensor_uuid])
        r = verify(srv, copy, "--all")
        assert r.returncode == 1, r.stdout + r.stderr
        assert "Traceback" not in r.stderr
        moved = _line_with(r.stdout, p.moved_serial, "groups")
        assert moved_from in moved and moved_to in moved, moved
        assert moved.index(moved_from) < moved.index(moved_to), "mirror first, then service"
        deleted = _line_with(r.stdout, p.deleted_serial, sensor)
        assert "deleted upstream" in deleted, deleted
        assert "devmon sync" in r.stdout
        assert sync(srv.base_url, copy, recheck_share=1.0).status == "ok"
        again = verify(srv, copy, "--all")
    assert again.returncode == 0, again.stdout + again.stderr
    assert p.moved_serial not in again.stdout and p.deleted_serial not in again.stdout


def _cut_history_start(db, days: int = 3) -> list[tuple[str, str]]:
    """Remove the first ``days`` of one logger's readings and of one rover's epochs from the
    mirror, with the ledger rows over them, as if the service had imported those days after
    the mirror's search for the start of history ended (an archive loaded late, a platform
    migration): the mirror's coverage and data then start later than the service's.
    Returns (device serial, kind) of what was cut."""
    con = duckdb.connect(str(db))
    try:
        logger, = con.execute(
            "SELECT p.device_serial_number FROM readings r JOIN parameters p ON "
            "p.uuid = r.parameter_uuid WHERE p.sensor_uuid NOT IN (SELECT sensor_uuid FROM "
            "gnss_solutions) GROUP BY 1 ORDER BY count(*) DESC, 1 LIMIT 1").fetchone()
        rover, sensor = con.execute(
            "SELECT device_serial_number, sensor_uuid FROM gnss_epochs GROUP BY ALL "
            "ORDER BY count(*) DESC, 1 LIMIT 1").fetchone()
        params = [u for (u,) in con.execute(
            "SELECT DISTINCT parameter_uuid FROM readings r JOIN parameters p ON "
            "p.uuid = r.parameter_uuid WHERE p.device_serial_number = ?", [logger]).fetchall()]
        cuts = [("readings", "readings", "parameter_uuid", u) for u in params]
        cuts.append(("gnss", "gnss_epochs", "sensor_uuid", sensor))
        for kind, table, column, key in cuts:
            (first,) = con.execute(f"SELECT min(ts) FROM {table} WHERE {column} = ?",
                                   [key]).fetchone()
            cut = first + timedelta(days=days)
            con.execute(f"DELETE FROM {table} WHERE {column} = ? AND ts < ?", [key, cut])
            if kind == "gnss":
                con.execute("DELETE FROM gnss_projected WHERE sensor_uuid = ? AND ts < ?",
                            [key, cut])
            stream = f"{kind}:{key}"
            con.execute("DELETE FROM sync_windows WHERE stream = ? AND window_end < ?",
                        [stream, cut])
            con.execute("UPDATE sync_windows SET window_start = ? WHERE stream = ? AND "
                        "window_start < ?", [cut, stream, cut])
            con.execute(f"UPDATE stream_stats SET first_ts = (SELECT min(ts) FROM {table} "
                        f"WHERE {column} = ?), rows = (SELECT count(*) FROM {table} WHERE "
                        f"{column} = ?) WHERE kind = ? AND key = ?", [key, key, kind, key])
        return [(logger, "readings"), (rover, "gnss")]
    finally:
        con.close()


def test_history_missing_before_the_oldest_point_is_found_and_the_next_sync_fills_it(
        world, tmp_path):
    srv, db = world
    truth = snapshot(db)
    copy = _copy(db, tmp_path, "cut.duckdb")
    cut = _cut_history_start(copy)
    assert snapshot(copy) != truth
    r = verify(srv, copy, "--all")
    assert r.returncode == 1, r.stdout + r.stderr
    for serial, _ in cut:
        line = _line_with(r.stdout, serial, "history starts before the mirror's oldest point")
        assert re.search(r"the service has \d+ points from \d{4}-\d\d-\d\d", line), line
    assert "GNSS epochs" in _line_with(r.stdout, cut[1][0], "history starts before")
    status = run_devmon("status", "--db", str(copy), timeout=60)
    assert "unverified" in status.stdout and cut[0][0] in status.stdout, status.stdout
    healed = sync(srv.base_url, copy)
    assert healed.status == "ok"
    cut_keys = {k for w in healed.plan if w.side == "heal" for k in w.keys}
    assert cut_keys, "the sync planned no window over the ranges verify recorded"
    assert snapshot(copy) == truth
    again = verify(srv, copy, "--all")
    assert again.returncode == 0 and "history starts before" not in again.stdout, again.stdout


def test_repair_fetches_the_missing_start_of_history_at_once(world, tmp_path):
    srv, db = world
    truth = snapshot(db)
    copy = _copy(db, tmp_path, "repair.duckdb")
    _cut_history_start(copy)
    r = verify(srv, copy, "--all", "--repair")
    assert r.returncode == 0, r.stdout + r.stderr
    assert "history starts before" in r.stdout and "Repaired" in r.stdout, r.stdout
    assert snapshot(copy) == truth


def test_a_mirror_synced_since_a_date_is_not_asked_for_what_lies_before_it(world, tmp_path):
    """``--since`` is the user's floor: verify does not call the history before it missing
    (the next sync would otherwise fetch what the user chose not to mirror)."""
    srv, _ = world
    db = tmp_path / "since.duckdb"
    assert sync(srv.base_url, db, since=BEFORE - timedelta(days=5)).status == "ok"
    r = verify(srv, db, "--all")
    assert r.returncode == 0, r.stdout + r.stderr
    assert "history starts before" not in r.stdout


def _distinct_starts(db) -> tuple[int, int]:
    """(streams with data, distinct oldest points among them): what one request per start
    costs."""
    return _one(db, """
        WITH f AS (SELECT parameter_uuid AS key, min(ts) AS t FROM readings GROUP BY 1
                   UNION ALL SELECT sensor_uuid, min(ts) FROM gnss_epochs GROUP BY 1)
        SELECT count(*), count(DISTINCT t) FROM f""")


def _history_cost(stdout: str) -> tuple[int, int]:
    """(streams whose start of history was checked, requests it took) from the summary."""
    summary = _line_with(stdout, "Checked", "window")
    found = re.search(r"the start of history of (\d+) streams? with (\d+) requests?", summary)
    assert found, summary
    return int(found[1]), int(found[2])


def test_the_start_of_history_is_checked_by_daily_counts(world, tmp_path):
    """The service gives daily counts: streams whose oldest points lie close are checked
    together, one request per 200 devices, not one request per distinct oldest point."""
    srv, db = world
    copy = _copy(db, tmp_path, "counted.duckdb")
    streams, starts = _distinct_starts(copy)
    assert starts > 3, "the world's streams start too alike to show the saving"
    r = verify(srv, copy, "--all")
    assert r.returncode == 0, r.stdout + r.stderr
    checked, requests = _history_cost(r.stdout)
    assert checked == streams and 0 < requests <= 2, r.stdout


def test_without_daily_counts_the_start_of_history_is_asked_span_by_span(world, tmp_path):
    """A service that refuses the aggregation: verify falls back to one span before each
    stream's oldest point and still finds the missing start of history."""
    import dataclasses

    _, db = world
    copy = _copy(db, tmp_path, "refused.duckdb")
    cut = _cut_history_start(copy)
    refusing = dataclasses.replace(CHANGING, name="changing-past-no-aggregation",
                                   aggregation="refused")
    with start_server(size=SMALL, now=BEFORE, contract=refusing) as srv:
        r = verify(srv, copy, "--all")
    assert r.returncode == 1, r.stdout + r.stderr
    for serial, _ in cut:
        _line_with(r.stdout, serial, "history starts before the mirror's oldest point")
    assert "Traceback" not in r.stderr
    assert "does not give daily counts" in _line_with(r.stdout, "Note:"), r.stdout
    streams, starts = _distinct_starts(copy)
    checked, requests = _history_cost(r.stdout)
    assert checked == streams and requests >= starts, r.stdout

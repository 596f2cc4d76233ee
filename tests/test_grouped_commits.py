"""A sync commits its data windows by groups (``Mirror.grouped``): the ledger, statistics
and summaries of several windows written once, in one transaction.  The mirror must be the
one a commit per window gives, row for row, and a process killed anywhere in a group must
leave the group whole or absent, the rest consistent, and a resume must end with the mirror
of an uninterrupted sync.  Real reference servers, real `devmon sync` processes."""

from __future__ import annotations

import signal
import subprocess
import sys
from datetime import timedelta

import duckdb
import pytest

from devmon_sync import api_contract as contract
from devmon_sync.server.misbehave import Misbehaviour
from devmon_sync.store import mirror as store_mirror
from devmon_sync.store import summary

from support import KEY, NOW, SMALL, snapshot, start_server, sync

LIMITS = contract.ResponseLimits(max_points=8000, max_epochs=400)
"""Small answers: a sync of many windows, so of several groups."""

LEDGER = {
    "sync_windows": "SELECT * EXCLUDE (committed_at) FROM sync_windows ORDER BY ALL",
    # (lateness_days: measured from the service's clock as the client reads it, to the ms)
    "sync_cursors": "SELECT * EXCLUDE (lateness_days) FROM sync_cursors ORDER BY ALL",
    "sync_gaps": "SELECT * EXCLUDE (found_at) FROM sync_gaps ORDER BY ALL",
    "sync_runs": "SELECT run_id, status, requests, readings_rows, epoch_rows, problems, "
                 "recheck_requests, rolled_from, rolled_to FROM sync_runs ORDER BY run_id",
    "stream_stats": "SELECT * FROM stream_stats ORDER BY ALL",
    "readings_summary": "SELECT * FROM readings_summary ORDER BY ALL",
    "quarantine": "SELECT * EXCLUDE (noted_at) FROM quarantine ORDER BY ALL",
    "reading_revisions": "SELECT * EXCLUDE (seen_at) FROM reading_revisions ORDER BY ALL",
    "epoch_revisions": "SELECT * EXCLUDE (seen_at) FROM epoch_revisions ORDER BY ALL",
    "sync_problems": "SELECT run_id, resource, status, message FROM sync_problems "
                     "ORDER BY ALL",
}


def _groups(db) -> tuple[int, int]:
    """(readings windows committed, transactions that committed them)."""
    con = duckdb.connect(str(db), read_only=True)
    try:
        return con.execute("SELECT count(DISTINCT (window_start, window_end)), "
                           "count(DISTINCT committed_at) FROM sync_windows "
                           "WHERE stream LIKE 'readings:%'").fetchall()[0]
    finally:
        con.close()


def _overlapping(db) -> int:
    """Windows that start inside an earlier window of their stream (follow-ups, the
    look-back): windows that replace stored rows."""
    con = duckdb.connect(str(db), read_only=True)
    try:
        return con.execute("SELECT count(*) FROM sync_windows a JOIN sync_windows b ON "
                           "a.stream = b.stream AND a.window_start > b.window_start AND "
                           "a.window_start <= b.window_end").fetchall()[0][0]
    finally:
        con.close()


def test_a_grouped_sync_writes_what_a_transaction_a_window_writes(tmp_path, monkeypatch):
    """A first sync and an incremental one (its look-back replaces stored windows) of a
    service that cuts its answers (follow-ups: windows that replace others, inside groups)
    and sends unreadable values (quarantine): grouped, every table is the one a commit per
    window writes, summaries and statistics bit for bit."""
    odd = Misbehaviour(cap_points=5000, nan_rate=0.002, seed=5)
    early = NOW - timedelta(hours=30)
    mirrors = {}
    for mode, windows in (("one by one", 1), ("grouped", store_mirror.GROUP_WINDOWS)):
        monkeypatch.setattr(store_mirror, "GROUP_WINDOWS", windows)
        monkeypatch.setattr(store_mirror, "GROUP_SECONDS", 1e9)  # (not the machine's pace)
        db = tmp_path / f"{mode.replace(' ', '-')}.duckdb"
        for now in (early, early + timedelta(hours=7)):
            with start_server(size=SMALL, now=now, limits=LIMITS, misbehaviour=odd) as srv:
                assert sync(srv.base_url, db).status == "ok"
        mirrors[mode] = db
    one, grouped = mirrors["one by one"], mirrors["grouped"]
    assert snapshot(grouped) == snapshot(one)
    expected, got = snapshot(one, LEDGER), snapshot(grouped, LEDGER)
    for table in LEDGER:
        assert got[table] == expected[table], table
    assert expected["quarantine"], "the service sent no unreadable value: nothing tested"
    assert _overlapping(one), "no window replaced another: nothing tested"
    assert _groups(grouped)[1] < _groups(one)[1]  # grouped indeed: fewer transactions


# ------------------------------------------------------------------------ killed in a group

GROUP = 4  # windows a group in the killed syncs (several groups in the small world)

KILLED_SYNC = f"""
import os, signal, sys
from devmon_sync import cli
from devmon_sync.store import ledger, mirror, summary

mirror.GROUP_WINDOWS, mirror.GROUP_SECONDS = {GROUP}, 1e9
where, at, url, db = sys.argv[1], int(sys.argv[2]), sys.argv[3], sys.argv[4]
calls = []

def killing(real):
    def hooked(*args, **kwargs):
        calls.append(1)
        if len(calls) == at:
            os.kill(os.getpid(), signal.SIGKILL)
        return real(*args, **kwargs)
    return hooked

if where == "queued":  # windows of the group wait in memory
    mirror.Mirror._accept = killing(mirror.Mirror._accept)
elif where == "data":  # the group's transaction holds some of its windows' rows
    summary.Appends.add = killing(summary.Appends.add)
else:  # every row of the group written, none of its ledger
    ledger.record_windows = killing(ledger.record_windows)
sys.exit(cli.main(["sync", "--base-url", url, "--db", db, "--api-key", "{KEY}",
                   "--rate-limit", "0", "--quiet"]))
"""


@pytest.fixture(scope="module")
def many_windows():
    srv = start_server(size=SMALL, limits=LIMITS)
    yield srv
    srv.stop()


@pytest.fixture(scope="module")
def uninterrupted(many_windows, tmp_path_factory):
    db = tmp_path_factory.mktemp("uninterrupted") / "m.duckdb"
    assert sync(many_windows.base_url, db).status == "ok"
    return snapshot(db), snapshot(db, {"stream_stats": LEDGER["stream_stats"]})


INCONSISTENT = {
    "readings outside every committed window": """
        SELECT count(*) FROM readings r WHERE NOT EXISTS (
            SELECT 1 FROM sync_windows w WHERE w.stream = 'readings:' || r.parameter_uuid
            AND r.ts BETWEEN w.window_start AND w.window_end)""",
    "epochs outside every committed window": """
        SELECT count(*) FROM gnss_epochs e WHERE NOT EXISTS (
            SELECT 1 FROM sync_windows w WHERE w.stream = 'gnss:' || e.sensor_uuid
            AND e.ts BETWEEN w.window_start AND w.window_end)""",
    "windows not holding the rows they recorded": """
        SELECT count(*) FROM sync_windows w WHERE w.rows <> CASE
            WHEN w.stream LIKE 'readings:%' THEN (SELECT count(*) FROM readings r
                WHERE 'readings:' || r.parameter_uuid = w.stream
                AND r.ts BETWEEN w.window_start AND w.window_end)
            ELSE (SELECT count(*) FROM gnss_epochs e WHERE 'gnss:' || e.sensor_uuid = w.stream
                  AND e.ts BETWEEN w.window_start AND w.window_end) END""",
    "runs counting other rows than stored": """
        SELECT count(*) FROM sync_runs WHERE readings_rows <> (SELECT count(*) FROM readings)
            OR epoch_rows <> (SELECT count(*) FROM gnss_epochs)""",
    "cursors not at the newest row of their stream, or not covering its windows": """
        SELECT count(*) FROM sync_cursors c WHERE c.kind = 'readings' AND (
            c.cursor_ts IS DISTINCT FROM (SELECT max(ts) FROM readings
                                          WHERE parameter_uuid::VARCHAR = c.key)
            OR c.covered_until IS DISTINCT FROM (SELECT max(window_end) FROM sync_windows
                                                 WHERE stream = c.stream))""",
    "streams with windows and no cursor": """
        SELECT count(DISTINCT stream) FROM sync_windows
        WHERE stream NOT IN (SELECT stream FROM sync_cursors)""",
    "statistics other than the data's": """
        SELECT count(*) FROM (
            (SELECT kind, key, rows, first_ts, last_ts FROM stream_stats WHERE rows > 0
             EXCEPT
             (SELECT 'readings', parameter_uuid, count(*), min(ts), max(ts) FROM readings
              GROUP BY ALL UNION ALL
              SELECT 'gnss', sensor_uuid, count(*), min(ts), max(ts) FROM gnss_epochs
              GROUP BY ALL))
            UNION ALL
            ((SELECT 'readings', parameter_uuid, count(*), min(ts), max(ts) FROM readings
              GROUP BY ALL UNION ALL
              SELECT 'gnss', sensor_uuid, count(*), min(ts), max(ts) FROM gnss_epochs
              GROUP BY ALL)
             EXCEPT
             SELECT kind, key, rows, first_ts, last_ts FROM stream_stats WHERE rows > 0))""",
}


def _inconsistencies(db) -> dict[str, int]:
    """What in the file disagrees with the rest (each figure must be 0)."""
    con = duckdb.connect(str(db), read_only=True)
    try:
        found = {what: con.execute(sql).fetchall()[0][0] for what, sql in INCONSISTENT.items()}
        found["summary slots other than the readings'"] = summary.mismatches(con)
        found["readings"] = -con.execute("SELECT count(*) FROM readings").fetchall()[0][0]
        return found
    finally:
        con.close()


@pytest.mark.parametrize("where, at", [("queued", GROUP + 3), ("data", GROUP + 2),
                                       ("ledger", 2)])
def test_a_sync_killed_in_a_group_leaves_it_whole_or_absent_and_resumes_to_the_same_mirror(
        many_windows, uninterrupted, tmp_path, where, at):
    """SIGKILL while the second group's windows wait in memory (``queued``), while its
    transaction holds some of their rows (``data``), or once all its rows are written but
    none of its ledger (``ledger``): the file holds the first group whole and nothing of
    the second (data, ledger, cursors, counts, statistics and summaries agree); the next
    sync ends with the mirror of an uninterrupted one."""
    db = tmp_path / "m.duckdb"
    killed = subprocess.run([sys.executable, "-c", KILLED_SYNC, where, str(at),
                             many_windows.base_url, str(db)], capture_output=True, text=True,
                            timeout=300)
    assert killed.returncode == -signal.SIGKILL, killed.stderr
    found = _inconsistencies(db)
    stored = -found.pop("readings")
    assert all(n == 0 for n in found.values()), found
    windows, transactions = _groups(db)
    assert stored > 0 and 1 <= transactions < windows, (stored, windows, transactions)
    assert sync(many_windows.base_url, db).status == "ok"
    data, stats = uninterrupted
    assert snapshot(db) == data
    assert snapshot(db, {"stream_stats": LEDGER["stream_stats"]}) == stats
    assert _inconsistencies(db)["summary slots other than the readings'"] == 0

"""``stream_stats`` (issue 18, point 1): rows and time span per parameter and GNSS sensor,
kept by every commit so that opening a 100M-reading mirror reads no data.  It must equal a
count, min and max over the data after every kind of write: a first sync, an incremental
sync that re-reads its lookback, a migration of an older mirror, and replaced windows that
add rows, remove some, or empty the range holding a stream's first or last point."""

from __future__ import annotations

from datetime import timedelta

import pyarrow as pa
import pytest

from devmon_sync.server import WorldSize
from devmon_sync.store import Mirror
from devmon_sync.store.ledger import WindowProof

from support import NOW, start_server, synced_mirror

SMALL = WorldSize(sites=2, devices=8, days=6)
TRUTH = """
    SELECT 'readings' AS kind, parameter_uuid AS key, count(*) AS rows, min(ts) AS first_ts,
           max(ts) AS last_ts FROM readings GROUP BY 2
    UNION ALL
    SELECT 'gnss', sensor_uuid, count(*), min(ts), max(ts) FROM gnss_epochs GROUP BY 2"""


def differences(m: Mirror) -> list:
    """Rows of stream_stats and of the truth that are not in the other (an empty stream
    may stay with 0 rows: it is left out of the comparison)."""
    kept = "SELECT kind, key, rows, first_ts, last_ts FROM stream_stats WHERE rows > 0"
    truth = f"SELECT * FROM ({TRUTH})"
    return m.con.execute(f"({kept} EXCEPT {truth}) UNION ALL ({truth} EXCEPT {kept})"
                         ).fetchall()


@pytest.fixture(scope="module")
def mirror_path(tmp_path_factory):
    return synced_mirror(tmp_path_factory.mktemp("stats") / "m.duckdb", SMALL)


def test_a_sync_and_a_later_incremental_sync_keep_them_equal_to_the_data(tmp_path):
    from devmon_sync.client import ApiClient
    from devmon_sync.sync.engine import SyncEngine, SyncOptions

    from support import KEY

    db = tmp_path / "m.duckdb"
    early = NOW - timedelta(hours=30)
    for now in (early, early + timedelta(hours=7), early + timedelta(hours=7, minutes=20)):
        with start_server(size=SMALL, now=now) as srv, \
                ApiClient(srv.base_url, KEY, rate_limit_per_minute=0) as client, \
                Mirror.open(db) as m:
            assert SyncEngine(client, m, SyncOptions()).run().status == "ok"
            assert m.con.execute("SELECT count(*) FROM stream_stats").fetchone()[0] > 0
            assert differences(m) == []


def _one_stream(m: Mirror):
    uuid, n, t0, t1 = m.con.execute(
        "SELECT key::VARCHAR, rows, first_ts, last_ts FROM stream_stats WHERE kind = "
        "'readings' AND rows > 20 ORDER BY key LIMIT 1").fetchone()
    return uuid, n, t0, t1


def _commit(m: Mirror, uuid: str, start, end, times) -> None:
    """Replace the stream's readings in [start, end] by ``times`` (value 1.0 each)."""
    table = pa.table({"parameter_uuid": pa.array([uuid] * len(times)).dictionary_encode(),
                      "ts": pa.array(times, pa.timestamp("us", tz="UTC")),
                      "value": pa.array([1.0] * len(times), pa.float64())})
    proof = WindowProof("readings", [uuid], start, end, [len(times)],
                        [min(times) if times else None], [max(times) if times else None])
    run = m.begin_run("http://test.invalid/v1", {})
    m.commit_readings(run, proof, table)
    m.finish_run(run, "ok", 0)


def test_replaced_windows_keep_them_exact(mirror_path, tmp_path):
    db = tmp_path / "m.duckdb"
    db.write_bytes(mirror_path.read_bytes())
    with Mirror.open(db) as m:
        uuid, n, t0, t1 = _one_stream(m)
        middle = t0 + (t1 - t0) / 2
        hour = timedelta(hours=1)
        # more rows in the middle (minutes that were not there)
        _commit(m, uuid, middle, middle + hour,
                [middle + timedelta(minutes=k) for k in range(0, 60, 7)])
        assert differences(m) == []
        # the range holding the first point emptied: the first is read from the data
        _commit(m, uuid, t0 - hour, t0 + 3 * hour, [])
        assert differences(m) == []
        # the range holding the last point emptied
        _commit(m, uuid, t1 - 2 * hour, t1 + hour, [])
        assert differences(m) == []
        # a point before the first and after the last
        _commit(m, uuid, t0 - 2 * hour, t0 - hour, [t0 - 90 * timedelta(minutes=1)])
        _commit(m, uuid, t1 + 2 * hour, t1 + 3 * hour, [t1 + 150 * timedelta(minutes=1)])
        assert differences(m) == []
        # everything gone
        _commit(m, uuid, t0 - 3 * hour, t1 + 4 * hour, [])
        assert differences(m) == []
        assert m.con.execute("SELECT rows, first_ts FROM stream_stats WHERE key = ?::UUID",
                             [uuid]).fetchone() == (0, None)


def test_an_older_mirror_gets_them_from_its_data_on_upgrade(mirror_path, tmp_path):
    db = tmp_path / "m.duckdb"
    db.write_bytes(mirror_path.read_bytes())
    with Mirror.open(db) as m:  # as schema 7 left it: no stream_stats
        m.con.execute("DROP TABLE stream_stats")
        m.con.execute("DELETE FROM schema_migrations WHERE version = 8")
    with Mirror.open(db) as m:
        assert differences(m) == []
        assert m.con.execute("SELECT count(*) FROM stream_stats").fetchone()[0] > 0


def _window(uuid: str, start, end, times) -> tuple[WindowProof, pa.Table]:
    table = pa.table({"parameter_uuid": pa.array([uuid] * len(times)).dictionary_encode(),
                      "ts": pa.array(times, pa.timestamp("us", tz="UTC")),
                      "value": pa.array([2.0] * len(times), pa.float64())})
    return WindowProof("readings", [uuid], start, end, [len(times)],
                       [min(times) if times else None], [max(times) if times else None]), table


def test_a_commit_rolled_back_after_its_statistics_leaves_them_equal_to_the_data(
        mirror_path, tmp_path):
    """A run reads stream_stats once and keeps its own copy (issue 31): a window whose
    commit fails after it updated the statistics rolls back, and the run's next window must
    not start from the statistics it undid."""
    db = tmp_path / "m.duckdb"
    db.write_bytes(mirror_path.read_bytes())
    with Mirror.open(db) as m:
        uuid, n, t0, t1 = _one_stream(m)
        middle, hour = t0 + (t1 - t0) / 2, timedelta(hours=1)
        run = m.begin_run("http://test.invalid/v1", {})
        m.commit_readings(run, *_window(uuid, middle, middle + hour,
                                        [middle + timedelta(minutes=k) for k in (1, 9)]))
        assert differences(m) == []
        # a later point, then a quarantine the ledger cannot take: the whole commit fails
        # after the statistics were written in its transaction
        later = _window(uuid, t1 + hour, t1 + 2 * hour, [t1 + 90 * timedelta(minutes=1)])
        with pytest.raises(Exception):
            m.commit_readings(run, *later, quarantine=pa.table({"not": ["a quarantine"]}))
        assert differences(m) == []
        m.commit_readings(run, *_window(uuid, middle - hour, middle - hour / 2,
                                        [middle - 50 * timedelta(minutes=1)]))
        assert differences(m) == []
        assert m.con.execute("SELECT last_ts FROM stream_stats WHERE key = ?::UUID",
                             [uuid]).fetchone()[0] == t1
        m.finish_run(run, "ok", 0)


def test_cursors_are_moved_alike_whether_the_run_knows_their_rows_or_not(tmp_path):
    """Issue 31: a window's cursors of streams the run knows to have a row are moved by an
    UPDATE, the others upserted; a list that is wrong either way (a stream said to have a
    row that has none, or not said to have one it has) leaves the same cursors."""
    from datetime import datetime, timezone

    import numpy as np

    from devmon_sync.store import ledger

    utc = timezone.utc
    keys = [f"00000000-0000-0000-0000-00000000000{i}" for i in range(1, 4)]
    t0 = datetime(2026, 1, 1, tzinfo=utc)

    def proof(start_h: int, end_h: int, last_h: int) -> WindowProof:
        ms = np.full(len(keys), (t0 + timedelta(hours=last_h)).timestamp() * 1000)
        return WindowProof("readings", keys, t0 + timedelta(hours=start_h),
                           t0 + timedelta(hours=end_h), [1] * len(keys), ms, ms,
                           gaps_may_exist=False)

    def cursors(m: Mirror) -> list:
        return m.con.execute("SELECT stream, kind, key, cursor_ts, run_id, covered_until "
                             "FROM sync_cursors ORDER BY stream").fetchall()

    results = []
    for known in (None, set(), {f"readings:{k}" for k in keys}, {f"readings:{keys[0]}"}):
        with Mirror.open(tmp_path / f"c{len(results)}.duckdb") as m:
            m.con.execute("INSERT INTO sync_runs (run_id, status, readings_rows, epoch_rows) "
                          "VALUES (1, 'running', 0, 0)")
            ledger.record_window(m.con, 1, proof(0, 5, 4), known=known)  # no row yet
            ledger.record_window(m.con, 1, proof(5, 9, 8),  # every row there
                                 known={f"readings:{k}" for k in keys})
            ledger.record_window(m.con, 1, proof(2, 6, 3), known=known)  # an older end
            results.append(cursors(m))
    assert len(results[0]) == 3 and all(r == results[0] for r in results)
    assert {(r[3], r[5]) for r in results[0]} == {(t0 + timedelta(hours=8),
                                                   t0 + timedelta(hours=9))}

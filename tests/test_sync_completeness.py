"""Issue 13: a mirror that proves every answer complete, whatever the service silently does.

Each test syncs the same small world from a reference server that misbehaves in one way the
spec does not forbid (``devmon_sync.server.Misbehaviour``: a silent cap, a clipped range, an
exclusive end date) and compares the mirror with one synced from an honest server: they
must hold the same data, and `devmon status` must show what could not be proved.
"""

from __future__ import annotations


import duckdb
import pytest
from support import KEY, start_server
from support import devmon as run_devmon
from support import snapshot, sync

from devmon_sync import api_contract as contract
from devmon_sync.sync.proof import fetcher as proof
from devmon_sync.server import Misbehaviour, WorldSize

SIZE = WorldSize(sites=2, devices=10, days=6)
# The client plans windows of at most 4,000 points / 300 epochs; the servers below refuse
# nothing (their own limits are far above), so a silent cap is all that limits an answer.
CLIENT = contract.ResponseLimits(max_points=4000, max_epochs=300)
GENEROUS = contract.ResponseLimits(max_points=10**7, max_epochs=10**6, max_range_days=400)


@pytest.fixture(scope="module")
def honest(tmp_path_factory):
    """The mirror an honest server gives, and its request count."""
    db = tmp_path_factory.mktemp("honest") / "honest.duckdb"
    with start_server(size=SIZE, limits=GENEROUS) as srv:
        report = sync(srv.base_url, db, limits=CLIENT)
    assert report.status == "ok" and report.readings_rows > 10_000 and report.epoch_rows > 500
    return snapshot(db), report


def _sync_through(tmp_path, name: str, misbehaviour: Misbehaviour, **options):
    db = tmp_path / f"{name}.duckdb"
    with start_server(size=SIZE, limits=GENEROUS, misbehaviour=misbehaviour) as srv:
        report = sync(srv.base_url, db, limits=CLIENT, **options)
    return db, report


def _gaps(db) -> int:
    con = duckdb.connect(str(db), read_only=True)
    try:
        return con.execute("SELECT count(*) FROM sync_gaps").fetchone()[0]
    finally:
        con.close()


SILENT = {
    "cap-oldest": Misbehaviour(cap_points=1500, cap_epochs=120, cap_keep="oldest"),
    "cap-newest": Misbehaviour(cap_points=1500, cap_epochs=120, cap_keep="newest"),
    "cap-first-items": Misbehaviour(cap_points=1500, cap_epochs=120, cap_keep="first_items"),
    "cap-per-series-oldest": Misbehaviour(cap_points=150, cap_epochs=40, cap_per_series=True),
    "cap-per-series-newest": Misbehaviour(cap_points=150, cap_epochs=40, cap_per_series=True,
                                          cap_keep="newest"),
    "thinned": Misbehaviour(cap_points=1500, cap_epochs=120, cap_keep="spread"),
    "thinned-per-series": Misbehaviour(cap_points=150, cap_epochs=40, cap_per_series=True,
                                       cap_keep="spread"),
    "clipped-range": Misbehaviour(clip_range_days=0.5),
    "exclusive-end": Misbehaviour(exclusive_end=True),
}


@pytest.mark.parametrize("name", list(SILENT))
def test_a_silently_cutting_service_gives_the_honest_mirror(honest, tmp_path, name):
    truth, honest_report = honest
    db, report = _sync_through(tmp_path, name, SILENT[name])
    assert report.status == "ok"
    assert snapshot(db) == truth, f"{name}: the mirror differs from the honest one"
    assert _gaps(db) == 0
    if name != "exclusive-end":  # widened dates make an exclusive end cost nothing
        assert report.cut_answers > 0, "no cut answer was noticed: the test proves nothing"


def test_a_stream_sparser_than_its_period_is_proved_sparse_not_cut(honest, tmp_path):
    """Device configs that claim a sampling period four times shorter than the data's make
    every stream look thinned.  A split shows the parts as sparse as the whole: no data is
    lost or doubted, and the check costs a bounded number of requests, once per stream and
    run, not a split down to single points."""
    truth, honest_report = honest
    db, report = _sync_through(tmp_path, "sparse", Misbehaviour(period_claim_divisor=4))
    assert report.status == "ok" and snapshot(db) == truth
    assert _gaps(db) == 0 and report.unproven == 0 and report.cut_answers == 0
    assert report.follow_ups > 0, "nothing looked thinned: the test proves nothing"
    assert report.requests <= 3 * honest_report.requests, (report.requests,
                                                          honest_report.requests)


def _two_syncs(db, misbehaviour: Misbehaviour):
    """A first sync, then one 20 hours later against the same base URL."""
    from datetime import timedelta

    from support import NOW

    with start_server(size=SIZE, limits=GENEROUS, misbehaviour=misbehaviour) as srv:
        first = sync(srv.base_url, db, limits=CLIENT)
        port = srv.port
    with start_server(size=SIZE, limits=GENEROUS, misbehaviour=misbehaviour, port=port,
                      now=NOW + timedelta(hours=20)) as srv:
        second = sync(srv.base_url, db, limits=CLIENT)
    assert first.status == "ok" and second.status == "ok" and second.readings_rows > 0
    return first, second


def test_a_stream_proved_sparse_is_not_split_again_by_the_next_sync(tmp_path):
    """What one sync proved (streams sparser than their claimed period, not thinned) holds
    for the next: a day later, the spacing of their windows proved complete is their
    yardstick, and the incremental sync splits nothing (it asks what an incremental sync
    of the same service with true periods asks, give or take the other signals' smaller
    edge tolerance)."""
    first, second = _two_syncs(tmp_path / "sparse.duckdb", Misbehaviour(period_claim_divisor=4))
    assert first.follow_ups > 0
    _, true_periods = _two_syncs(tmp_path / "true.duckdb", Misbehaviour())
    assert second.follow_ups <= true_periods.follow_ups + 2, (second, true_periods)


def test_an_honest_service_costs_no_follow_up(honest):
    _, report = honest
    assert report.follow_ups == 0 and report.cut_answers == 0 and report.unproven == 0


def test_the_learned_cap_plans_later_windows_within_it(tmp_path):
    """After a first sync proves a cap, the profile stored in the mirror makes the next
    sync plan within it: a later clock's sync needs no follow-up."""
    from datetime import timedelta

    from support import NOW

    db = tmp_path / "learn.duckdb"
    cap = Misbehaviour(cap_points=1500, cap_keep="oldest")
    with start_server(size=SIZE, limits=GENEROUS, misbehaviour=cap) as srv:
        first = sync(srv.base_url, db, limits=CLIENT)
        port = srv.port  # the profile is the service's at this base URL
    assert first.cut_answers > 0
    with start_server(size=SIZE, limits=GENEROUS, misbehaviour=cap, port=port,
                      now=NOW + timedelta(hours=20)) as srv:
        second = sync(srv.base_url, db, limits=CLIENT)
    # more than one capped answer holds: planned as before (4,000 points), it would be cut
    assert second.status == "ok" and second.readings_rows > cap.cap_points
    assert second.cut_answers == 0, "the cap was learned but not used for planning"
    con = duckdb.connect(str(db), read_only=True)
    (profile,) = con.execute("SELECT profile FROM service_profiles").fetchone()
    con.close()
    assert '"silent_cap": 1500' in profile


def test_a_second_sync_heals_what_a_first_could_not_prove(honest, tmp_path, monkeypatch):
    """With no follow-ups allowed, a truncating service leaves gaps: status lists them, and a
    sync against a whole service fetches them first and ends with the honest mirror."""
    truth, _ = honest
    monkeypatch.setattr(proof, "MAX_FOLLOW_UPS", 0)
    db, report = _sync_through(tmp_path, "damaged", Misbehaviour(cap_points=1500))
    assert report.status == "ok" and report.unproven > 0
    assert snapshot(db) != truth
    assert _gaps(db) > 0
    status = run_devmon("status", "--db", str(db), timeout=60)
    assert status.returncode == 0 and "unverified" in status.stdout, status.stdout
    assert "devmon sync" in status.stdout and "Behind the service" in status.stdout
    monkeypatch.setattr(proof, "MAX_FOLLOW_UPS", 400)
    with start_server(size=SIZE, limits=GENEROUS) as srv:
        healed = sync(srv.base_url, db, limits=CLIENT)
    assert healed.status == "ok"
    assert snapshot(db) == truth
    assert _gaps(db) == 0
    status = run_devmon("status", "--db", str(db), timeout=60)
    assert "unverified" not in status.stdout and "Behind" not in status.stdout, status.stdout
    assert KEY not in status.stdout


def _as_made_by_devmon_0_1(db, lose_from_window: int = 1) -> str:
    """Turn a mirror back into schema 3 (no proof, no gaps, no unique epochs) and lose the
    tail of one committed window of one parameter, as an old devmon syncing through a
    truncating service would have; return that parameter's UUID."""
    con = duckdb.connect(str(db))
    try:
        key, start, end = con.execute(
            "SELECT substr(stream, 10), window_start, window_end FROM sync_windows "
            "WHERE stream LIKE 'readings:%' AND rows > 20 ORDER BY window_start, stream "
            "LIMIT 1 OFFSET ?", [lose_from_window]).fetchone()
        cut = start + (end - start) * 0.6
        con.execute("DELETE FROM readings WHERE parameter_uuid = ?::UUID AND ts > ? AND ts <= ?",
                    [key, cut, end])
        # devmon 0.1 never searched before a stream's first point: no such windows
        con.execute("DELETE FROM sync_windows w USING stream_stats s WHERE s.key::VARCHAR = "
                    "substr(w.stream, strpos(w.stream, ':') + 1) AND w.window_end < s.first_ts")
        for column in ("first_ts", "last_ts", "verdict", "reason"):
            con.execute(f"ALTER TABLE sync_windows DROP COLUMN {column}")
        con.execute("ALTER TABLE sync_cursors DROP COLUMN newest_seen")
        for table in ("sync_gaps", "quarantine", "service_profiles"):
            con.execute(f"DROP TABLE {table}")
        for table in ("gnss_epochs", "gnss_projected"):
            con.execute(f"CREATE TABLE {table}_v3 AS SELECT * FROM {table}")
            con.execute(f"DROP TABLE {table}")
            con.execute(f"ALTER TABLE {table}_v3 RENAME TO {table}")
        con.execute("DELETE FROM schema_migrations WHERE version = 4")
        return key
    finally:
        con.close()


def test_an_older_mirror_is_migrated_and_its_unprovable_ranges_healed(honest, tmp_path):
    """A mirror of devmon 0.1 holds windows without proof; opening it with this devmon
    judges them from the stored data, and the sync fetches what cannot be proved first."""
    truth, _ = honest
    db = tmp_path / "old.duckdb"
    with start_server(size=SIZE, limits=GENEROUS) as srv:
        assert sync(srv.base_url, db, limits=CLIENT).status == "ok"
        lost = _as_made_by_devmon_0_1(db)
        assert snapshot(db) != truth
        report = sync(srv.base_url, db, limits=CLIENT)
    assert report.status == "ok"
    healing = [w for w in report.plan if w.side == "heal"]
    assert any(lost in w.keys for w in healing), "the lost range was not fetched again"
    assert snapshot(db) == truth
    con = duckdb.connect(str(db), read_only=True)
    assert con.execute("SELECT count(*) FROM sync_gaps").fetchone()[0] == 0
    assert con.execute("SELECT count(*) FROM sync_windows WHERE verdict = 'legacy'"
                       ).fetchone()[0] == 0
    con.close()


def test_a_commit_that_would_store_a_point_twice_is_rolled_back(honest, tmp_path):
    """Exactly once is checked inside each commit: with the ledger damaged so that a window
    believes nothing is stored in its range, the commit finds the doubled rows, rolls back
    and says so; nothing is written twice."""
    from datetime import timedelta

    from support import NOW

    from devmon_sync.store import StoreError

    db = tmp_path / "doubled.duckdb"
    with start_server(size=SIZE, limits=GENEROUS) as srv:
        assert sync(srv.base_url, db, limits=CLIENT).status == "ok"
        port = srv.port
    before = snapshot(db)
    con = duckdb.connect(str(db))
    con.execute("UPDATE sync_cursors SET covered_until = TIMESTAMPTZ '2000-01-01 00:00Z'")  # damage
    con.close()
    with start_server(size=SIZE, limits=GENEROUS, port=port, now=NOW + timedelta(hours=2)) as srv:
        with pytest.raises(StoreError, match="stored twice"):
            sync(srv.base_url, db, limits=CLIENT)
    assert snapshot(db) == before
    assert _query_runs(db)[-1][0] == "failed"


def _query_runs(db) -> list:
    con = duckdb.connect(str(db), read_only=True)
    try:
        return con.execute("SELECT status, message FROM sync_runs ORDER BY run_id").fetchall()
    finally:
        con.close()


def test_the_command_says_what_the_checks_found(tmp_path):
    """`devmon sync` ends with a line saying the service cut answers and were completed."""
    db = tmp_path / "cli.duckdb"
    with start_server(size=SIZE, limits=contract.ResponseLimits(max_points=1500, max_epochs=100,
                                                                max_range_days=400),
                      misbehaviour=Misbehaviour(cap_points=700, nan_rate=0.01)) as srv:
        r = run_devmon("sync", "--base-url", srv.base_url, "--api-key", KEY, "--db", str(db),
                       "--rate-limit", "0", "--quiet", timeout=300)
    assert r.returncode == 0, r.stderr
    assert "The service cut" in r.stdout and "follow-up request" in r.stdout, r.stdout
    assert "values could not be read and are kept in quarantine" in r.stdout, r.stdout

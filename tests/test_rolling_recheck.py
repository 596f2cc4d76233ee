"""Issue 27, point 3: the past older than the settling window is re-checked too (a rolling
sweep), and the settling window grows for streams seen to change late.

The service here accepts at most 7 days a request, so one daily-aggregate request spans 6
days: the ``changing-past`` world's old hole (17-18 days back), its correction (2-9 days) and
its GNSS re-solution (2-16 days) lie mostly beyond the settling window.  Only a re-check of
the older history finds them.
"""

from __future__ import annotations

import math
from datetime import datetime, timedelta, timezone

import duckdb
import pytest
from support import NOW, SMALL, start_server, sync
from support import rows as _rows

from devmon_sync.api_contract import ResponseLimits
from devmon_sync.server import past
from devmon_sync.server.contracts import CONTRACTS
from devmon_sync.server.world import WorldSize
from devmon_sync.store import Mirror
from devmon_sync.sync import recheck
from devmon_sync.sync.engine import SyncOptions

BEFORE, AFTER = NOW + timedelta(hours=1), NOW + timedelta(hours=12)
WEEK = ResponseLimits(max_range_days=7)
DAY_S = 86_400


@pytest.fixture(scope="module")
def synced_twice(tmp_path_factory):
    """(the mirror synced before and after the change, a fresh mirror of after, the picks)."""
    where = tmp_path_factory.mktemp("rolling")
    twice, fresh = where / "twice.duckdb", where / "fresh.duckdb"
    changing = CONTRACTS["changing-past"]
    with start_server(size=SMALL, now=BEFORE, contract=changing, limits=WEEK) as srv:
        assert sync(srv.base_url, twice, recheck_share=1.0).status == "ok"
        port = srv.port  # the same service: what the first sync learned of it holds
    with start_server(size=SMALL, now=AFTER, contract=changing, limits=WEEK, port=port) as srv:
        again = sync(srv.base_url, twice, recheck_share=1.0)
        assert again.status == "ok"
        assert sync(srv.base_url, fresh).status == "ok"
        picks = past.picks(srv.app.world)
    return twice, fresh, picks, again


def _readings_of(db, serial, span):
    return _rows(db, "SELECT r.parameter_uuid::VARCHAR, epoch_ms(r.ts), r.value FROM readings r "
                     "JOIN parameters p ON p.uuid = r.parameter_uuid WHERE "
                     "p.device_serial_number = ? AND epoch(r.ts) BETWEEN ? AND ? ORDER BY 1, 2",
                 [serial, *span])


def _epochs_of(db, serial, span):
    return _rows(db, "SELECT e.epoch_id, e.eh FROM gnss_epochs e JOIN sensors s ON "
                     "s.uuid = e.sensor_uuid WHERE s.device_serial_number = ? AND "
                     "epoch(e.ts) BETWEEN ? AND ? ORDER BY 1", [serial, *span])


def test_the_changes_lie_beyond_the_settling_window(synced_twice):
    """The premise: a re-check of the settling window alone cannot see the old hole."""
    *_, p, _ = synced_twice
    settle_start = AFTER.timestamp() - 6 * DAY_S
    assert p.old_hole_span[1] < settle_start - 10 * DAY_S
    assert p.corrected_span[0] < settle_start and p.resolved_span[0] < settle_start


def test_an_old_hole_filled_late_is_found_by_the_rolling_re_check(synced_twice):
    twice, fresh, p, _ = synced_twice
    assert _readings_of(twice, p.old_hole_serial, p.old_hole_span) == \
        _readings_of(fresh, p.old_hole_serial, p.old_hole_span) != []


def test_corrections_older_than_the_settling_window_replace_the_old_values(synced_twice):
    twice, fresh, p, _ = synced_twice
    assert _readings_of(twice, p.corrected_serial, p.corrected_span) == \
        _readings_of(fresh, p.corrected_serial, p.corrected_span) != []


def test_epochs_re_solved_beyond_the_settling_window_are_read_again(synced_twice):
    twice, fresh, p, _ = synced_twice
    assert _epochs_of(twice, p.rover_serial, p.resolved_span) == \
        _epochs_of(fresh, p.rover_serial, p.resolved_span) != []


def test_the_run_records_how_far_back_it_re_checked(synced_twice):
    twice, _, p, again = synced_twice
    (rolled_from,), = _rows(twice, "SELECT min(rolled_from) FROM sync_runs WHERE run_id = ?",
                            [again.run_id])
    assert rolled_from is not None and rolled_from.timestamp() <= p.old_hole_span[0]


def test_lateness_seen_widens_that_device_s_settling_window(synced_twice):
    """The old hole came at least 17 days late: its device's settling window now reaches back
    past it, while devices that never changed late keep the default."""
    twice, _, p, _ = synced_twice
    with Mirror.open(twice) as mirror:
        lateness = mirror.lateness_by_device()
    late_days = (BEFORE.timestamp() - p.old_hole_span[1]) / DAY_S
    assert lateness[p.old_hole_serial] >= late_days - 1, lateness
    assert recheck.settle_days_for(lateness[p.old_hole_serial], 6) > late_days
    changed = {p.old_hole_serial, p.late_serial, p.corrected_serial, p.rover_serial}
    assert set(lateness) <= changed, lateness  # the others keep the default window


# ------------------------------------------------------------------ pure parts

def test_the_sweep_walks_back_one_span_a_turn_then_starts_again():
    now_day, span = 20_000, 6
    first = now_day - (span - 1)
    history_day = first - 20
    got, at = [], None
    for _ in range(6):
        days = recheck.rolling_days(at, first, history_day, span)
        got.append((days.start, days.stop))
        at = days.start
    assert got == [(first - 6, first), (first - 12, first - 6), (first - 18, first - 12),
                   (first - 24, first - 18), (first - 6, first), (first - 12, first - 6)]


def test_no_sweep_when_history_is_within_the_settling_window():
    assert not recheck.rolling_days(None, 20_000, 20_001, 6)


def test_learned_settling_days_grow_with_lateness_within_bounds():
    assert recheck.settle_days_for(None, 30) == 30
    assert recheck.settle_days_for(2.0, 30) == 30
    assert recheck.settle_days_for(40.0, 30) == math.ceil(40 * recheck.LATENESS_MARGIN)
    assert recheck.settle_days_for(400.0, 30) == recheck.MAX_SETTLE_DAYS


# ------------------------------------------------------------------ within its share

def test_the_sweep_reaches_the_oldest_history_within_the_share(tmp_path):
    """Syncs every 6 hours in a world of 14 days at the default share: the re-check of older
    history runs and reaches the oldest day, and all re-checking stays within 10 %.  The
    period, worked out: a sync makes 6 requests, so a re-check (2) is earned every fourth
    sync (the full sync earns nothing: the share is of incremental syncs); turns alternate,
    so the sweep goes back 6 days every eighth sync, and its 2 steps over the 8 days before
    the settling window take 16 syncs: 18 are run."""
    size, db = WorldSize(sites=2, devices=8, days=14), tmp_path / "m.duckdb"
    origin, port = NOW - timedelta(days=size.days), 0
    for hours in range(1, 1 + 18 * 6, 6):
        with start_server(size=size, now=NOW + timedelta(hours=hours), limits=WEEK,
                          history_start=origin, port=port) as srv:
            assert sync(srv.base_url, db).status == "ok"
            port = srv.port  # one service, whose limits the first sync learns
    (spent, other, oldest), = _rows(
        db, "SELECT sum(coalesce(recheck_requests, 0)), sum(requests) - "
            "sum(coalesce(recheck_requests, 0)), min(rolled_from) FROM sync_runs "
            "WHERE run_id > 1")  # of the later syncs' own requests, the full one's aside
    assert 0 < spent <= 0.10 * other, (spent, other)
    assert oldest is not None and oldest <= origin + timedelta(days=1), oldest
    assert oldest.tzinfo is not None and oldest >= datetime(2000, 1, 1, tzinfo=timezone.utc)
    # one unchanged world: 18 syncs re-read their look-back and the sweep's days, and
    # nothing of it may pass for a value changed or a point removed
    assert _rows(db, "SELECT (SELECT count(*) FROM reading_revisions) + "
                     "(SELECT count(*) FROM epoch_revisions)") == [(0,)]


def test_a_shorter_range_limit_met_by_the_re_check_is_learned(tmp_path):
    """The service's range limit shrinks between two syncs (or the re-check is the first
    long request a sync makes): the re-check learns the limit from the refusal, asks its
    days in ranges the service accepts, and finds no change where there is none."""
    size, db = WorldSize(sites=2, devices=8, days=20), tmp_path / "m.duckdb"
    with start_server(size=size, now=BEFORE) as srv:
        assert sync(srv.base_url, db).status == "ok"
        port = srv.port
    with start_server(size=size, now=AFTER, limits=WEEK, port=port) as srv:
        again = sync(srv.base_url, db, recheck_share=1.0)
        refused = srv.app.status_counts.get(400, 0)
    assert again.status == "ok" and not again.problems, again.problems
    assert not any("changed its past" in n for n in again.notes), again.notes
    assert 1 <= refused <= 2, refused  # one refusal teaches the limit (two kinds at most)
    (profile,), = _rows(db, "SELECT profile FROM service_profiles")
    assert '"refused_range_days": 7.0' in profile, profile


@pytest.mark.parametrize("name", ["no-aggregation", "raw-aggregation"])
def test_a_service_without_daily_aggregates_is_asked_once(tmp_path, name):
    """What the first sync learned (the service refuses or ignores the aggregation) is kept:
    later syncs do not ask again, and say nothing again."""
    size, db = WorldSize(sites=2, devices=8, days=20), tmp_path / "m.duckdb"
    contract = CONTRACTS[name]
    with start_server(size=size, contract=contract) as srv:
        first = sync(srv.base_url, db)
        port = srv.port
    assert any("does not give a daily count" in n for n in first.notes), first.notes
    with start_server(size=size, contract=contract, port=port,
                      now=NOW + timedelta(hours=5)) as srv:
        second = sync(srv.base_url, db, recheck_share=1.0)
        refused = srv.app.status_counts.get(400, 0)
    assert second.status == "ok" and refused == 0, (refused, second.notes)
    assert not any("does not give a daily count" in n for n in second.notes), second.notes


def test_status_says_how_far_the_re_check_has_come(synced_twice):
    from support import devmon

    twice, *_ = synced_twice
    r = devmon("status", "--db", str(twice))
    assert r.returncode == 0, r.stderr
    text = " ".join(r.stdout.split())
    assert "Past re-checked (the service's daily counts and sums): by 2 runs" in text, text
    assert "Older history: the sweep re-checked" in text
    assert "devices changed late (up to 17 days" in text or \
        "devices changed late (up to 18 days" in text, text


def test_a_scoped_sync_s_sweep_does_not_move_the_whole_mirror_s(tmp_path):
    """A step of the sweep made by a sync of some devices re-checked only those: the next
    sync of the whole mirror (or of other devices) starts from its own last step."""
    size, db = WorldSize(sites=2, devices=8, days=20), tmp_path / "m.duckdb"
    with start_server(size=size, now=BEFORE, limits=WEEK) as srv:
        assert sync(srv.base_url, db).status == "ok"
        port = srv.port
        with Mirror.open(db) as mirror:
            some = sorted({p.device_serial_number for p in mirror.parameters_to_sync()})[:2]
    with start_server(size=size, now=AFTER, limits=WEEK, port=port) as srv:
        scoped = sync(srv.base_url, db, recheck_share=1.0, devices=tuple(some))
    assert scoped.status == "ok"
    with Mirror.open(db) as mirror:
        mine = mirror.rolling_state(scoped.run_id + 1,
                                    SyncOptions(devices=tuple(some)).scope_key)
        whole = mirror.rolling_state(scoped.run_id + 1, SyncOptions().scope_key)
    assert mine[0] is not None, "the scoped sync made no step: the test proves nothing"
    assert whole == (None, 0), whole


def test_points_the_service_no_longer_holds_are_kept_as_revisions(tmp_path):
    """The service drops points from its past (a spike deleted, an epoch withdrawn): the
    re-check reads those days again and the mirror follows, but what it held is kept, marked
    removed, never deleted without a trace."""
    size, db = WorldSize(sites=2, devices=8, days=20), tmp_path / "m.duckdb"
    with start_server(size=size, now=BEFORE) as srv:
        assert sync(srv.base_url, db).status == "ok"
        port = srv.port
    con = duckdb.connect(str(db))
    (key, ts, value), = con.execute(
        "SELECT parameter_uuid, ts + INTERVAL 1 SECOND, 12345.5 FROM readings WHERE value IS "
        "NOT NULL AND ts < ? ORDER BY ts LIMIT 1", [BEFORE - timedelta(days=2)]).fetchall()
    con.execute("INSERT INTO readings VALUES (?, ?, ?)", [key, ts, value])  # the service had it
    (sensor, epoch_id, eh), = con.execute(
        "SELECT sensor_uuid, epoch_id, eh FROM gnss_epochs WHERE ts < ? ORDER BY ts LIMIT 1",
        [BEFORE - timedelta(days=2)]).fetchall()
    con.execute("DELETE FROM gnss_epochs WHERE sensor_uuid = ? AND epoch_id <> ? AND ts = "
                "(SELECT ts FROM gnss_epochs WHERE sensor_uuid = ? AND epoch_id = ?)",
                [sensor, epoch_id, sensor, epoch_id])
    con.execute("INSERT INTO gnss_epochs BY NAME SELECT * REPLACE (epoch_id + 999999999 AS "
                "epoch_id, ts + INTERVAL 1 SECOND AS ts) FROM gnss_epochs WHERE sensor_uuid = ? "
                "AND epoch_id = ?", [sensor, epoch_id])
    con.close()
    with start_server(size=size, now=AFTER, port=port) as srv:
        again = sync(srv.base_url, db, recheck_share=1.0)
    assert again.status == "ok"
    assert _rows(db, "SELECT count(*) FROM readings WHERE parameter_uuid = ? AND ts = ?",
                 [key, ts]) == [(0,)]
    assert _rows(db, "SELECT old_value, new_value, removed FROM reading_revisions WHERE "
                     "parameter_uuid = ? AND ts = ?", [key, ts]) == [(value, None, True)]
    assert _rows(db, "SELECT removed FROM epoch_revisions WHERE sensor_uuid = ? AND "
                     "epoch_id = ?", [sensor, epoch_id + 999999999]) == [(True,)]
    assert any("removed" in line for line in devmon_status(db)), devmon_status(db)


def devmon_status(db) -> list[str]:
    from support import devmon

    r = devmon("status", "--db", str(db))
    assert r.returncode == 0, r.stderr
    return [line for line in r.stdout.splitlines() if "Revised by the service" in line]

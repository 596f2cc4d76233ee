"""Issue 27: the mirror stays exact as the service changes its past between two syncs.

The ``changing-past`` contract (``devmon_sync.server.past``) changes its world at 06:00: a
logger uploads two buffered days (and another an older day), a week of one device is
corrected, two weeks of one rover are re-solved (+4 mm), a device moves to another group,
a sensor is deleted and a device is no longer listed.  A mirror synced at 01:00 and again at
12:00 must equal a fresh sync at 12:00, row for row, apart from what the mirror keeps on
purpose (the archives of the deleted sensor and of the removed device, marked so).
"""

from __future__ import annotations

from datetime import timedelta

import duckdb
import pytest
from support import NOW, SMALL, devmon, needs_poppler, pdf_text, snapshot, start_server, sync
from support import rows as _rows

from devmon_sync.server import past
from devmon_sync.server.contracts import CONTRACTS
from devmon_sync.store import Mirror, summary

BEFORE, AFTER = NOW + timedelta(hours=1), NOW + timedelta(hours=12)
CHANGING = CONTRACTS["changing-past"]


def _server(now):
    return start_server(size=SMALL, now=now, contract=CHANGING)


def _sync(base_url, db):
    """A sync that re-checks the past whatever it costs (the share of requests it may add
    is tested on its own below)."""
    return sync(base_url, db, recheck_share=1.0)


@pytest.fixture(scope="module")
def synced_twice(tmp_path_factory):
    """(the mirror synced before and after the change, a fresh mirror of after, the picks)."""
    where = tmp_path_factory.mktemp("past")
    twice, fresh = where / "twice.duckdb", where / "fresh.duckdb"
    with _server(BEFORE) as srv:
        assert _sync(srv.base_url, twice).status == "ok"
    with _server(AFTER) as srv:
        assert _sync(srv.base_url, twice).status == "ok"
        assert sync(srv.base_url, fresh).status == "ok"
        picks = past.picks(srv.app.world)
    return twice, fresh, picks


def _readings_of(db, serial, span):
    return _rows(db, "SELECT r.parameter_uuid::VARCHAR, epoch_ms(r.ts), r.value FROM readings r "
                     "JOIN parameters p ON p.uuid = r.parameter_uuid WHERE "
                     "p.device_serial_number = ? AND epoch(r.ts) BETWEEN ? AND ? ORDER BY 1, 2",
                 [serial, *span])


def test_a_late_upload_fills_the_hole_at_the_next_sync(synced_twice):
    twice, fresh, p = synced_twice
    assert _readings_of(twice, p.late_serial, p.late_span) == \
        _readings_of(fresh, p.late_serial, p.late_span) != []


def test_an_old_hole_filled_late_is_found_too(synced_twice):
    twice, fresh, p = synced_twice
    assert _readings_of(twice, p.old_hole_serial, p.old_hole_span) == \
        _readings_of(fresh, p.old_hole_serial, p.old_hole_span) != []


def test_corrected_values_replace_the_old_ones(synced_twice):
    twice, fresh, p = synced_twice
    assert _readings_of(twice, p.corrected_serial, p.corrected_span) == \
        _readings_of(fresh, p.corrected_serial, p.corrected_span)


def test_re_solved_epochs_replace_the_old_ones(synced_twice):
    twice, fresh, p = synced_twice
    sql = ("SELECT epoch_id, eh, oh, du FROM gnss_epochs WHERE device_serial_number = ? "
           "AND epoch(ts) BETWEEN ? AND ? ORDER BY 1")
    assert _rows(twice, sql, [p.rover_serial, *p.resolved_span]) == \
        _rows(fresh, sql, [p.rover_serial, *p.resolved_span])


def test_the_whole_mirror_equals_a_fresh_one_but_for_the_deleted_archive(synced_twice):
    twice, fresh, p = synced_twice
    kept = snapshot(twice)
    deleted = set(_rows(twice, "SELECT uuid::VARCHAR FROM parameters WHERE sensor_uuid = ? "
                               "OR device_serial_number = ?",
                        [p.deleted_sensor_uuid, p.removed_serial]))
    removed = {u for (u,) in _rows(twice, "SELECT uuid::VARCHAR FROM sensors WHERE "
                                          "device_serial_number = ?", [p.removed_serial])}
    assert deleted and removed, "nothing deleted or removed: the exceptions hide nothing"
    kept["readings"] = [r for r in kept["readings"] if (r[0],) not in deleted]
    kept["parameters"] = [r for r in kept["parameters"] if (str(r[0]),) not in deleted]
    kept["sensors"] = [r for r in kept["sensors"] if str(r[0]) != p.deleted_sensor_uuid
                       and str(r[0]) not in removed]
    assert kept == snapshot(fresh)


def test_the_readings_summaries_follow_the_changed_past(synced_twice):
    """Late uploads, corrected values and re-checked windows keep the 6-hour summaries of
    both mirrors equal to an aggregate of their readings (``store/summary.py``)."""
    twice, fresh, _ = synced_twice
    for db in (twice, fresh):
        with Mirror.open(db, read_only=True) as m:
            assert m._row("SELECT count(*) FROM readings_summary")[0] > 0
            assert summary.mismatches(m.con) == 0, db.name


def test_a_device_moved_to_another_group_is_a_member_of_the_new_one_only(synced_twice):
    twice, fresh, p = synced_twice
    sql = ("SELECT group_uuid::VARCHAR FROM device_group_members WHERE device_serial_number = ? "
           "ORDER BY 1")
    assert _rows(twice, sql, [p.moved_serial]) == _rows(fresh, sql, [p.moved_serial]) == \
        [(p.moved_to_group,)]


def test_a_sensor_deleted_upstream_is_marked_deleted_and_its_archive_kept(synced_twice):
    twice, _, p = synced_twice
    (deleted_at,), = _rows(twice, "SELECT deleted_at FROM sensors WHERE uuid = ?",
                           [p.deleted_sensor_uuid])
    assert deleted_at is not None
    (rows,), = _rows(twice, "SELECT count(*) FROM readings r JOIN parameters p ON "
                            "p.uuid = r.parameter_uuid WHERE p.sensor_uuid = ?",
                     [p.deleted_sensor_uuid])
    assert rows > 0


def test_the_old_values_are_kept_as_revisions_and_the_run_says_so(tmp_path):
    db = tmp_path / "m.duckdb"
    with _server(BEFORE) as srv:
        assert _sync(srv.base_url, db).status == "ok"
    with _server(AFTER) as srv:
        second = _sync(srv.base_url, db)
        picks = past.picks(srv.app.world)
    assert any("changed its past" in n for n in second.notes), second.notes
    revised = _rows(db, "SELECT new_value - old_value FROM reading_revisions r JOIN parameters "
                        "p ON p.uuid = r.parameter_uuid WHERE p.device_serial_number = ?",
                    [picks.corrected_serial])
    assert revised and all(abs(d - past.CORRECTION) < 1e-9 for (d,) in revised)
    heights = _rows(db, "SELECT new_eh - old_eh FROM epoch_revisions e JOIN gnss_solutions g "
                        "ON g.sensor_uuid = e.sensor_uuid WHERE g.device_serial_number = ?",
                    [picks.rover_serial])
    assert heights and all(abs(d - past.HEIGHT_CHANGE_M) < 1e-6 for (d,) in heights)
    from devmon_sync.store import Mirror
    with Mirror.open(db, read_only=True) as mirror:
        status = mirror.status_text()
    assert f"{len(revised):,} values and {len(heights):,} GNSS epochs changed since" in status, \
        status
    others = _rows(db, "SELECT count(*) FROM reading_revisions r JOIN parameters p ON "
                       "p.uuid = r.parameter_uuid WHERE p.device_serial_number <> ?",
                   [picks.corrected_serial])
    assert others == [(0,)], "values that did not change are not revisions"


def test_an_unchanged_service_costs_two_requests_per_200_devices_more(tmp_path):
    """The re-check of the settling window is one daily count and one daily sum per 200
    devices; an unchanged past fetches nothing again."""
    db = tmp_path / "m.duckdb"
    with start_server(size=SMALL, now=BEFORE) as srv:
        assert sync(srv.base_url, db).status == "ok"
    with start_server(size=SMALL, now=AFTER) as srv:
        again = _sync(srv.base_url, db)
        asked = srv.app.status_counts[200]
    assert not any("changed its past" in n for n in again.notes), again.notes
    assert _rows(db, "SELECT count(*) FROM reading_revisions") == [(0,)]
    assert again.requests == asked


def test_points_stamped_ahead_of_now_are_provisional_and_read_again(tmp_path):
    """A forecast series holds points after now that the service will revise: a stream whose
    newest mirrored point lies ahead of the service's now is read again from now on."""
    db = tmp_path / "m.duckdb"
    with start_server(size=SMALL, now=BEFORE) as srv:
        assert sync(srv.base_url, db).status == "ok"
        (key,), = _rows(db, "SELECT key FROM sync_cursors WHERE kind = 'readings' AND "
                            "cursor_ts IS NOT NULL ORDER BY key LIMIT 1")
        con = duckdb.connect(str(db))
        con.execute("UPDATE sync_cursors SET cursor_ts = ? WHERE kind = 'readings' AND key = ?",
                    [BEFORE + timedelta(days=2), key])
        con.execute("UPDATE sync_cursors SET cursor_ts = ? WHERE kind = 'readings' AND key <> ?",
                    [BEFORE + timedelta(days=400), key])  # a wrong clock, not a forecast
        con.close()
        again = sync(srv.base_url, db)
    planned = [w for w in again.plan if w.kind == "readings"]
    assert any(key in w.keys and w.start <= BEFORE for w in planned), "not read again"
    assert all(w.keys == [key] or key not in w.keys for w in planned)
    assert sum(len(w.keys) for w in planned if w.side == "") == 1


def test_the_re_check_adds_at_most_its_share_of_requests(tmp_path):
    """Over a full sync and eight later ones in one world, the re-check's requests stay
    within 10 % of all the others, and it runs (it is not simply never afforded)."""
    db, origin = tmp_path / "m.duckdb", NOW - timedelta(days=SMALL.days)
    for hours in range(1, 1 + 9 * 3, 3):
        with start_server(size=SMALL, now=NOW + timedelta(hours=hours),
                          history_start=origin) as srv:
            assert sync(srv.base_url, db).status == "ok"
    (spent, other), = _rows(db, "SELECT sum(coalesce(recheck_requests, 0)), sum(requests) - "
                                "sum(coalesce(recheck_requests, 0)) FROM sync_runs")
    assert 0 < spent <= 0.10 * other, (spent, other)


@needs_poppler
def test_a_report_on_revised_epochs_says_so_on_its_cover(synced_twice, tmp_path):
    twice, _, p = synced_twice
    out = tmp_path / "report.pdf"
    r = devmon("report", "--db", str(twice), "--device", p.rover_serial, "--out", str(out))
    assert r.returncode == 0, r.stderr
    text = " ".join(pdf_text(out, 1, 2).split())
    assert "The service revised" in text and "GNSS epochs of these rovers since" in text, text
    assert "revised 0 values" not in text


def test_values_in_quarantine_are_not_taken_for_changes(tmp_path):
    """A service that writes some values as bare NaN (kept in quarantine, never in readings):
    the re-check counts them as the mirror's, so an unchanged past fetches nothing again."""
    from devmon_sync.server import Misbehaviour

    db, odd = tmp_path / "m.duckdb", Misbehaviour(nan_rate=0.01, seed=3)
    with start_server(size=SMALL, now=BEFORE, misbehaviour=odd) as srv:
        first = sync(srv.base_url, db)
    assert first.quarantined > 0, "nothing in quarantine: the test proves nothing"
    with start_server(size=SMALL, now=AFTER, misbehaviour=odd) as srv:
        again = _sync(srv.base_url, db)
    assert not any("changed its past" in n for n in again.notes), again.notes


def test_metadata_changes_are_dated_by_the_service_s_clock(synced_twice):
    """A move and a deletion are dated between the two syncs by the service's clock (what a
    report's period is in), and memberships of the first listing began before the mirror
    knew (NULL), not at the first sync."""
    twice, _, p = synced_twice
    (until,), = _rows(twice, "SELECT member_until FROM device_group_history WHERE "
                             "device_serial_number = ? AND member_until IS NOT NULL",
                      [p.moved_serial])
    (since,), = _rows(twice, "SELECT member_from FROM device_group_history WHERE "
                             "device_serial_number = ? AND member_until IS NULL",
                      [p.moved_serial])
    (deleted_at,), = _rows(twice, "SELECT deleted_at FROM sensors WHERE uuid = ?",
                           [p.deleted_sensor_uuid])
    for t in (until, since, deleted_at):
        assert BEFORE < t <= AFTER + timedelta(minutes=5), (until, since, deleted_at)
    (first_known,), = _rows(twice, "SELECT count(*) FROM device_group_history WHERE "
                                   "member_from IS NOT NULL AND run_id = 1")
    assert first_known == 0


def test_a_gnss_sensor_deleted_upstream_is_no_longer_synced(tmp_path):
    from devmon_sync.store import Mirror

    db = tmp_path / "m.duckdb"
    with start_server(size=SMALL, now=BEFORE) as srv:
        assert sync(srv.base_url, db).status == "ok"
    with Mirror.open(db) as mirror:
        sensors = mirror.gnss_sensors_to_sync()
        gone = sensors[0].sensor_uuid
        mirror.con.execute("UPDATE sensors SET deleted_at = now() WHERE uuid = ?", [gone])
        assert gone not in {g.sensor_uuid for g in mirror.gnss_sensors_to_sync()}
        assert len(mirror.gnss_sensors_to_sync()) == len(sensors) - 1

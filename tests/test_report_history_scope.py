"""Issue 27, point 5: metadata over time in reports.

A report of a group over a past period takes the devices the group held in that period (the
mirror's ``device_group_history``), not today's, and its cover says so when the two differ;
with no period it takes today's.  A sensor deleted upstream keeps its archive, and a report
naming its device labels it "deleted upstream <day>, archive kept".

The mirror is made as a user's is: synced from the ``changing-past`` service before and after
it moves a device to another group and deletes a sensor (``devmon_sync.server.past``).
"""

from __future__ import annotations

from datetime import timedelta

import duckdb
import pytest
from support import (NOW, SMALL, devmon, needs_poppler, pdf_text, section_pages, start_server,
                     sync)

from devmon_sync.report import ReportOptions, build_report, tables
from devmon_sync.report.model import NOT_A_ROVER
from devmon_sync.server import past
from devmon_sync.server.contracts import CONTRACTS
from devmon_sync.store import Mirror, report_queries

BEFORE, AFTER = NOW + timedelta(hours=1), NOW + timedelta(hours=12)
PERIOD = (NOW - timedelta(days=12), NOW)  # the world's data, before the move was seen


@pytest.fixture(scope="module")
def moved(tmp_path_factory):
    """(a mirror synced before and after the service changed its metadata, the picks)."""
    db = tmp_path_factory.mktemp("history") / "mirror.duckdb"
    for now in (BEFORE, AFTER):
        with start_server(size=SMALL, now=now, contract=CONTRACTS["changing-past"]) as srv:
            assert sync(srv.base_url, db).status == "ok"
            picks = past.picks(srv.app.world)
    assert picks.moved_serial and picks.deleted_sensor_uuid, "the world changes nothing"
    return db, picks


def _value(db, sql, params):
    con = duckdb.connect(str(db), read_only=True)
    try:
        (value,), = con.execute(sql, params).fetchall()
        return value
    finally:
        con.close()


def _members(mirror, group, start=None, end=None) -> set[str]:
    return {d.serial_number for d in report_queries.group_devices(mirror, group, start, end)}


def test_a_group_over_a_past_period_holds_the_devices_it_held_then(moved):
    db, p = moved
    left_at = _value(db, "SELECT member_until FROM device_group_history WHERE "
                         "device_serial_number = ? AND group_uuid = ?::UUID",
                     [p.moved_serial, p.moved_from_group])
    assert left_at is not None
    later = (left_at + timedelta(seconds=1), left_at + timedelta(days=30))
    across = (PERIOD[0], left_at + timedelta(days=1))
    with Mirror.open(db, read_only=True) as m:
        old_now, new_now = _members(m, p.moved_from_group), _members(m, p.moved_to_group)
        old_then, new_then = (_members(m, p.moved_from_group, *PERIOD),
                              _members(m, p.moved_to_group, *PERIOD))
        old_later, new_later = (_members(m, p.moved_from_group, *later),
                                _members(m, p.moved_to_group, *later))
        old_across, new_across = (_members(m, p.moved_from_group, *across),
                                  _members(m, p.moved_to_group, *across))
        open_start = _members(m, p.moved_from_group, None, PERIOD[1])
    assert p.moved_serial in new_now and p.moved_serial not in old_now
    assert old_then == old_now | {p.moved_serial}, "the period's members"
    assert new_then == new_now - {p.moved_serial}
    assert (old_later, new_later) == (old_now, new_now), "after the move: today's"
    assert old_across == old_then and new_across == new_now, "both in a period across it"
    assert open_start == old_then


def test_a_report_of_a_past_period_uses_its_members_and_says_one_moved_out(moved):
    db, p = moved
    with Mirror.open(db, read_only=True) as m:
        group = next(g for g in report_queries.groups(m) if g.uuid == p.moved_from_group)
        to_group = next(g for g in report_queries.groups(m) if g.uuid == p.moved_to_group)
        then = build_report(m, ReportOptions(group=group.name, start=PERIOD[0],
                                             end=PERIOD[1]), now=AFTER)
        today = build_report(m, ReportOptions(group=group.name), now=AFTER)
    assert p.moved_serial in {e.serial_number for e in then.entries}
    assert p.moved_serial not in {e.serial_number for e in today.entries}
    note = then.scope.membership
    assert note is not None and "takes the members during the period" in note, note
    assert "1 device since moved out" in note and p.moved_serial in note, note
    assert f'group "{to_group.name}"' in note, note
    assert then.scope.membership_short == "members during the period (1 since moved out)"
    assert today.scope.membership is None and today.scope.membership_short is None


def test_the_cover_of_a_past_period_says_the_group_changed_since(moved):
    """The cover and the summary page as drawn (their matplotlib figures; the PDF of all 33
    pages is the report tests' job)."""
    from matplotlib.text import Text

    from devmon_sync.report import pages

    db, p = moved
    with Mirror.open(db, read_only=True) as m:
        data = build_report(m, ReportOptions(group=p.moved_from_group, start=PERIOD[0],
                                             end=PERIOD[1]), now=AFTER)
    specs = pages.plan_pages(data)

    def drawn(spec) -> str:
        figure, _ = spec.draw()
        return " ".join(" ".join(t.get_text() for t in figure.findobj(Text)).split())

    cover, summary = drawn(specs[0]), drawn(specs[1])
    assert "members during the period (1 since moved out)" in cover, cover
    assert "takes the members during the period" in summary, summary
    assert p.moved_serial in summary, summary


def test_a_sensor_deleted_upstream_is_labelled_and_not_fetched(moved):
    db, p = moved
    with Mirror.open(db, read_only=True) as m:
        rover = next(d for d in report_queries.group_devices(m, p.moved_from_group)
                     if d.is_rover)
        data = build_report(m, ReportOptions(devices=(rover.serial_number, p.deleted_serial)),
                            now=AFTER)
        to_sync = {t.sensor_uuid for t in m.parameters_to_sync()}
    deleted_day = _value(db, "SELECT strftime(deleted_at AT TIME ZONE 'UTC', '%Y-%m-%d') "
                             "FROM sensors WHERE uuid = ?::UUID", [p.deleted_sensor_uuid])
    label = f"deleted upstream {deleted_day}, archive kept"
    row = next(r for r in tables.summary_rows(data) if r.serial_number == p.deleted_serial)
    assert row.merged.startswith(NOT_A_ROVER) and label in row.merged, row.merged
    (entry,) = [e for e in data.entries if e.serial_number == p.deleted_serial]
    assert [s.sensor_uuid for s in entry.deleted_sensors] == [p.deleted_sensor_uuid]
    assert entry.deleted_sensors[0].archived_points > 0, "its archive is kept"
    assert p.deleted_sensor_uuid not in to_sync, "the sync must not fetch it"
    rover_row = next(r for r in tables.summary_rows(data) if r.serial_number == rover.serial_number)
    assert "deleted" not in str(rover_row), "only the device that lost a sensor says so"


@needs_poppler
def test_the_summary_page_labels_the_deleted_sensor(moved, tmp_path):
    db, p = moved
    with Mirror.open(db, read_only=True) as m:
        rover = next(d for d in report_queries.group_devices(m, p.moved_from_group)
                     if d.is_rover)
    out = tmp_path / "devices.pdf"
    r = devmon("report", "--db", str(db), "--device", rover.serial_number, "--device",
               p.deleted_serial, "--out", str(out), "--jobs", "1")
    assert r.returncode == 0, r.stderr
    first, last = section_pages(r.stdout, "Summary")
    text = " ".join(pdf_text(out, first, last).split())  # the cell wraps in the table
    assert "(deleted upstream" in text and "archive" in text, text


def test_a_rover_that_lost_a_sensor_says_so_under_the_summary_and_on_its_pages(moved):
    """The changing-past service deletes a logger's sensor; a rover's lost sensor (its
    archive still analysed) is labelled the same way: the deleted sensor is given to the
    rover's entry here, since no service world deletes a rover's sensor."""
    from dataclasses import replace

    from devmon_sync.report import pages

    db, p = moved
    with Mirror.open(db, read_only=True) as m:
        rover = next(d for d in report_queries.group_devices(m, p.moved_from_group)
                     if d.is_rover)
        data = build_report(m, ReportOptions(devices=(rover.serial_number, p.deleted_serial)),
                            now=AFTER)
    assert tables.deleted_sensor_note(data) is None, "the logger's row says it itself"
    lost = next(e for e in data.entries if e.deleted_sensors).deleted_sensors
    entries = tuple(replace(e, deleted_sensors=lost) if e.analysis is not None else e
                    for e in data.entries)
    note = tables.deleted_sensor_note(replace(data, entries=entries))
    label = tables.deleted_sensor_label(lost[0])
    assert note is not None and rover.serial_number in note and label in note, note
    quality = [b.text for b in pages._quality_blocks(entries[0]) if hasattr(b, "text")]
    assert any(label in t for t in quality), quality

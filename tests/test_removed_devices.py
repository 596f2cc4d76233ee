"""Issue 27, point 5: a device the service no longer lists is marked removed upstream, not
left in the mirror looking live.

The ``changing-past`` service (``devmon_sync.server.past``, change 6) stops listing one
logger at 06:00: GET /devices, /sites and /device-groups leave it out, GET /devices/{sn}
answers 404 and its data is no longer served.  A mirror synced at 01:00 and again at 12:00
marks it removed (dated by the service's clock), keeps its readings as an archive (a re-check
of the past that asked for them would find them gone and drop them), asks the service
nothing more of it and says so in `devmon status`.  Only a device list known whole
marks: a list whose order moved while it was walked, with no total to check it by, marks
nothing.  A scoped sync still reads the whole list (metadata is always mirrored whole), so it
marks the removed device and none of the devices outside its scope.
"""

from __future__ import annotations

import dataclasses
import shutil
from datetime import timedelta

import pytest
from support import NOW, SMALL, Api, start_server, sync
from support import rows as _rows

from devmon_sync.server import past
from devmon_sync.server.contracts import CONTRACTS
from devmon_sync.store import Mirror
from devmon_sync.sync import verify_metadata

BEFORE, AFTER = NOW + timedelta(hours=1), NOW + timedelta(hours=12)
CHANGING = CONTRACTS["changing-past"]
SHUFFLED = dataclasses.replace(CHANGING, paging="offset", page_cap=25, order_shift=7)
"""The same changing world behind a device list that pages by offset with no total while its
order moves (as a list sorted by last contact does): a walk may miss devices unseen."""


class _Spy:
    """Every request a reference server answers (target and body), the server itself
    answering as ever."""

    def __init__(self, srv):
        self.asked: list[str] = []
        self._handle = srv.app.handle
        srv.app.handle = self

    def __call__(self, method, target, headers, raw):
        self.asked.append(f"{method} {target} {raw.decode(errors='replace')}".lower())
        return self._handle(method, target, headers, raw)

    def naming(self, names: set[str]) -> list[str]:
        return [a for a in self.asked if any(n.lower() in a for n in names)]


@pytest.fixture(scope="module")
def synced(tmp_path_factory):
    """The mirror synced before and after the change, a copy of it as it was before, the
    picks, both sync reports, the removed device's names and what the second sync asked."""
    where = tmp_path_factory.mktemp("removed")
    db, before_copy = where / "twice.duckdb", where / "before.duckdb"
    with start_server(size=SMALL, now=BEFORE, contract=CHANGING) as srv:
        first = sync(srv.base_url, db)
        port = srv.port  # the same service: what the first sync learned of it holds
    shutil.copy(db, before_copy)
    with start_server(size=SMALL, now=AFTER, contract=CHANGING, port=port) as srv:
        spy = _Spy(srv)
        again = sync(srv.base_url, db, recheck_share=1.0)  # the re-check reads the past too
        picks = past.picks(srv.app.world)
    assert first.status == again.status == "ok"
    assert picks.removed_serial, "the world removes no device: the tests prove nothing"
    names = {picks.removed_serial} | {u for (u,) in _rows(
        db, "SELECT uuid::VARCHAR FROM parameters WHERE device_serial_number = ? UNION "
            "SELECT uuid::VARCHAR FROM sensors WHERE device_serial_number = ?",
        [picks.removed_serial] * 2)}
    return dataclasses.make_dataclass("Synced", ["db", "before", "picks", "first", "again",
                                                 "names", "spy"])(
        db, before_copy, picks, first, again, names, spy)


def _readings_of(db, serial) -> int:
    (n,), = _rows(db, "SELECT count(*) FROM readings r JOIN parameters p ON "
                      "p.uuid = r.parameter_uuid WHERE p.device_serial_number = ?", [serial])
    return n


def _removed(db) -> dict[str, object]:
    return dict(_rows(db, "SELECT serial_number, removed_at FROM devices "
                          "WHERE removed_at IS NOT NULL"))


# ----------------------------------------------------------------------------- the server

def test_the_service_stops_listing_the_device_and_serving_its_data_after_the_change():
    with start_server(size=SMALL, now=BEFORE, contract=CHANGING) as before, \
            start_server(size=SMALL, now=AFTER, contract=CHANGING) as after:
        p = past.picks(before.app.world)
        assert p == past.picks(after.app.world), "the picks moved with the change"
        others = {p.late_serial, p.old_hole_serial, p.corrected_serial, p.rover_serial,
                  p.moved_serial, p.deleted_serial}
        assert p.removed_serial and p.removed_serial not in others, p
        window = {"startDate": (NOW - timedelta(days=2)).isoformat().replace("+00:00", "Z"),
                  "endDate": NOW.isoformat().replace("+00:00", "Z"),
                  "deviceSerialNumbers": [p.removed_serial]}
        for srv, listed in ((before, True), (after, False)):
            api = Api(srv.base_url)
            devices = api.ok("get", "/devices", limit=500)["items"]
            sites = api.ok("get", "/sites", includeDevices="true")["items"]
            groups = api.get("/device-groups", includeDevices="true",
                             includeUngrouped="true").text
            assert (p.removed_serial in {d["serialNumber"] for d in devices}) is listed
            assert (p.removed_serial in {d["serialNumber"] for s in sites
                                         for d in s["devices"]}) is listed
            assert (p.removed_serial in groups) is listed
            assert api.get(f"/devices/{p.removed_serial}").status_code == \
                (200 if listed else 404)
            assert bool(api.ok("post", "/sensor-data", window)["items"]) is listed
            latest = api.ok("post", "/sensor-data/latest", {})["items"]
            assert (p.removed_serial in {it["deviceSerialNumber"] for it in latest}) is listed


# ----------------------------------------------------------------------------- the mirror

def test_a_device_no_longer_listed_is_marked_removed_between_the_syncs(synced):
    assert _removed(synced.before) == {}, "nothing is removed before the change"
    removed = _removed(synced.db)
    assert set(removed) == {synced.picks.removed_serial}, removed
    assert BEFORE < removed[synced.picks.removed_serial] <= AFTER + timedelta(minutes=5)


def test_the_removed_device_s_readings_are_kept(synced):
    kept = _readings_of(synced.before, synced.picks.removed_serial)
    assert kept > 0, "the device had no data: the test proves nothing"
    assert _readings_of(synced.db, synced.picks.removed_serial) == kept


def test_the_second_sync_asks_nothing_of_the_removed_device(synced):
    keys = synced.names - {synced.picks.removed_serial}
    assert any(set(w.keys) & keys for w in synced.first.plan), "not synced before either"
    assert not [w for w in synced.again.plan if set(w.keys) & keys]
    assert synced.spy.asked, "the spy saw no request"
    assert synced.spy.naming(synced.names) == []


def test_status_counts_the_removed_devices(synced):
    with Mirror.open(synced.db, read_only=True) as mirror:
        text = mirror.status_text()
    with Mirror.open(synced.before, read_only=True) as mirror:
        before = mirror.status_text()
    assert "1 device removed upstream" in text, text
    assert "removed upstream" not in before, before
    line = next(x for x in text.splitlines() if x.strip().startswith(synced.picks.removed_serial))
    assert "removed" in line, line


def test_a_scoped_sync_marks_the_removed_device_and_no_device_outside_its_scope(synced,
                                                                               tmp_path):
    db = tmp_path / "scoped.duckdb"
    shutil.copy(synced.before, db)
    (other,), = _rows(db, "SELECT serial_number FROM devices WHERE serial_number <> ? "
                          "ORDER BY 1 LIMIT 1", [synced.picks.removed_serial])
    with start_server(size=SMALL, now=AFTER, contract=CHANGING) as srv:
        report = sync(srv.base_url, db, devices=(other,))
    assert report.status == "ok"
    (devices,), = _rows(db, "SELECT count(*) FROM devices")
    assert devices > 20
    assert set(_removed(db)) == {synced.picks.removed_serial}


def test_a_device_list_that_cannot_be_known_whole_marks_nothing(synced, tmp_path):
    db = tmp_path / "shuffled.duckdb"
    shutil.copy(synced.before, db)
    with start_server(size=SMALL, now=AFTER, contract=SHUFFLED) as srv:
        report = sync(srv.base_url, db)
    assert any("changed its order" in n for n in report.notes), \
        f"the list's order did not move: the test proves nothing ({report.notes})"
    assert _removed(db) == {}


def test_a_device_listed_again_is_no_longer_marked_removed(synced, tmp_path):
    db = tmp_path / "back.duckdb"
    shutil.copy(synced.db, db)
    with start_server(size=SMALL, now=BEFORE, contract=CHANGING) as srv:  # listed again
        assert sync(srv.base_url, db).status == "ok"
    assert _removed(db) == {}


# ----------------------------------------------------------------------------- verify

def _sides(removed_at, listed: bool):
    mine = verify_metadata.side({"devices": [{"serial_number": "DM-1", "name": "a",
                                              "removed_at": removed_at}]})
    theirs = verify_metadata.side({"devices": [{"serial_number": "DM-1", "name": "a"}]
                                   if listed else []})
    return mine, theirs


def test_verify_takes_a_device_marked_removed_and_not_listed_for_no_difference():
    assert verify_metadata.compare(*_sides(AFTER, listed=False), set(), True) == []
    (held,) = verify_metadata.compare(*_sides(None, listed=False), set(), True)
    assert held.mirror == "held, with its data", held


def test_verify_reports_a_device_marked_removed_that_the_service_lists():
    (diff,) = verify_metadata.compare(*_sides(AFTER, listed=True), set(), True)
    assert (diff.device, diff.what, diff.service) == ("DM-1", "device", "listed"), diff
    assert "removed upstream" in diff.mirror, diff

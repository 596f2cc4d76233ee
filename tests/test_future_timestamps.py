"""Issue 29, item 1: a point stamped in the future must not stop its stream.

Loggers' clocks go wrong: the service holds a point of one parameter dated 2099-01-01 and
one 36 hours ahead of the service's own clock, and a point of another parameter 36 hours
ahead only, and says so in POST /sensor-data/latest (each one's newest point) and in every
POST /sensor-data answer whose range holds them.  A loopback
proxy in front of the reference server adds the two points (and passes the server's ``Date``
through, so devmon knows the service's clock as it would without the proxy).  The mirror is
synced, the world's clock moves on a day, and it is synced again: every point of the day must
arrive, and the two future points must be kept as the service gave them and reported, with a
message that names the stream, the time and what to do.
"""

from __future__ import annotations

import threading
from datetime import UTC, datetime, timedelta
from email.utils import formatdate

import duckdb
import pytest
from http_stubs import MutatingProxy
from support import NOW, SMALL, Api, rows, start_server, sync

from devmon_sync import timestamps

ORIGIN = NOW - timedelta(days=SMALL.days)  # one world for both servers
FIRST, SECOND = NOW + timedelta(hours=1), NOW + timedelta(days=1, hours=1)
FAR = datetime(2099, 1, 1, tzinfo=UTC)
AHEAD = FIRST + timedelta(hours=36)  # still 12 h ahead at the second sync
VALUES = {AHEAD: 41.5, FAR: 99.25}


def _server(now: datetime):
    return start_server(size=SMALL, now=now, history_start=ORIGIN)


def _victims(base_url: str) -> dict[str, tuple[datetime, ...]]:
    """Two parameters (not GNSS, with a point at the end of the world's history), each with
    the future points its logger gives it."""
    items = Api(base_url).ok("post", "/sensor-data/latest", {})["items"]
    far, ahead = sorted(i["parameterUuid"] for i in items if i["sensorAlias"] != "GNSS"
                        and i["data"] and
                        timestamps.parse_timestamp(i["data"][0]["timestamp"]) == NOW)[:2]
    return {far: (AHEAD, FAR), ahead: (AHEAD,)}


class WrongClockLogger:
    """The proxy's rewrites: a victim's newest point is its latest future one, and each data
    answer whose asked range holds a future point carries it (the asked range comes with
    the request, the answer after it, in the same handler thread)."""

    def __init__(self, victims: dict[str, tuple[datetime, ...]]):
        self.victims = victims
        self._asked = threading.local()

    def remember(self, method: str, path: str, body) -> None:
        self._asked.body = body if isinstance(body, dict) else {}

    def rewrite(self, method: str, path: str, payload) -> None:
        if method != "POST" or path not in ("/sensor-data", "/sensor-data/latest"):
            return
        for item in payload.get("items", []):
            future = self.victims.get(item.get("parameterUuid"))
            if not future:
                continue
            if path == "/sensor-data/latest":
                item["data"] = [_point(max(future))]
            else:
                body = self._asked.body
                start = timestamps.parse_timestamp(body["startDate"])
                end = timestamps.parse_timestamp(body["endDate"])
                item["data"] = (item.get("data") or []) + [
                    _point(t) for t in future if start <= t <= end]


def _point(t: datetime) -> dict:
    return {"timestamp": timestamps.format_timestamp(t), "value": VALUES[t]}


def _proxy(srv, logger: WrongClockLogger) -> MutatingProxy:
    """The rewriting proxy, answering with the service's ``Date`` (its clock), not its own."""
    proxy = MutatingProxy(srv.base_url, mutate=logger.rewrite,
                          refuse=lambda m, p, b: logger.remember(m, p, b))
    clock = srv.config.service_clock()
    proxy._httpd.RequestHandlerClass.date_time_string = \
        lambda handler, timestamp=None: formatdate(clock(), usegmt=True)
    return proxy


def _truth(base_url: str, victim: str) -> list[tuple[int, float]]:
    """The victim's points by the service, up to its now (the reference server, asked
    directly: no future points there)."""
    answer = Api(base_url).ok("post", "/sensor-data", {
        "parameterUuids": [victim], "startDate": timestamps.format_timestamp(ORIGIN),
        "endDate": timestamps.format_timestamp(SECOND), "disableRounding": True})
    (item,) = answer["items"]
    return [(int(timestamps.parse_timestamp(p["timestamp"]).timestamp() * 1000), p["value"])
            for p in item["data"]]


def _mirrored(db, victim: str) -> list[tuple[int, float]]:
    return rows(db, "SELECT epoch_ms(ts), value FROM readings WHERE parameter_uuid = ? "
                    "ORDER BY ts", [victim])


def _ms(t: datetime) -> int:
    return int(t.timestamp() * 1000)


@pytest.fixture(scope="module")
def synced(tmp_path_factory):
    """(mirror, victims, first report, second report, each victim's points by the service
    at the second sync)."""
    db = tmp_path_factory.mktemp("future") / "m.duckdb"
    with _server(FIRST) as srv:
        victims = _victims(srv.base_url)
        logger = WrongClockLogger(victims)
        with _proxy(srv, logger) as proxy:
            first = sync(proxy.base_url, db)
    with _server(SECOND) as srv, _proxy(srv, logger) as proxy:
        second = sync(proxy.base_url, db)
        truth = {v: _truth(srv.base_url, v) for v in victims}
    return db, victims, first, second, truth


def test_every_new_point_arrives_after_a_future_point(synced):
    db, victims, first, second, truth = synced
    victim = next(iter(victims))  # the one with a point in 2099
    assert first.status == second.status == "ok"
    new = [p for p in truth[victim] if p[0] > _ms(NOW)]
    assert len(new) >= 20, "the day brought too few points: the test proves little"
    mirrored = [p for p in _mirrored(db, victim) if p[0] <= _ms(SECOND)]
    missing = set(truth[victim]) - set(mirrored)
    assert mirrored == truth[victim], f"{len(missing)} of the service's points " \
                                      f"({len(new)} new ones) are missing"


def test_a_point_36_hours_ahead_loses_nothing_either(tmp_path):
    """Every stream of one device has a point 36 h ahead (within a forecast's reach), and
    the syncs are of that device alone, so no other stream's window covers for it: the
    day between the syncs arrives whole."""
    db = tmp_path / "m.duckdb"
    with _server(FIRST) as srv:
        items = Api(srv.base_url).ok("post", "/sensor-data/latest", {})["items"]
        serial = list(_victims(srv.base_url))[1]
        serial = next(i["deviceSerialNumber"] for i in items if i["parameterUuid"] == serial)
        logger = WrongClockLogger({i["parameterUuid"]: (AHEAD,) for i in items
                                   if i["deviceSerialNumber"] == serial and i["data"]})
        with _proxy(srv, logger) as proxy:
            assert sync(proxy.base_url, db, devices=(serial,)).status == "ok"
    with _server(SECOND) as srv, _proxy(srv, logger) as proxy:
        assert sync(proxy.base_url, db, devices=(serial,)).status == "ok"
        truth = {v: _truth(srv.base_url, v) for v in logger.victims}
    for victim, points in truth.items():
        mirrored = [p for p in _mirrored(db, victim) if p[0] <= _ms(SECOND)]
        missing = set(points) - set(mirrored)
        assert not missing and mirrored == points, f"{len(missing)} points of {victim} missing"


def test_the_future_points_are_kept_as_the_service_gave_them(synced):
    db, victims, *_ = synced
    for victim, future in victims.items():
        kept = [p for p in _mirrored(db, victim) if p[0] > _ms(SECOND)]
        assert kept == [(_ms(t), VALUES[t]) for t in future]


def test_the_future_points_are_reported_with_the_stream_time_and_what_to_do(synced):
    db, victims, first, second, _ = synced
    for victim, future in victims.items():
        latest = timestamps.format_timestamp(max(future))
        for report in (first, second):
            said = [p for p in report.problems if victim in p]
            assert len(said) == 1, report.problems
            assert latest in said[0] and "Set the logger's clock right" in said[0], said[0]
        stored = rows(db, "SELECT message FROM sync_problems WHERE resource = ?",
                      [f"readings:{victim}"])
        assert len(stored) == 2 and latest in stored[0][0], stored
    assert any("2 streams have points stamped after the service's now" in n
               for n in second.notes), second.notes


def test_no_stream_is_left_behind_or_unproved(synced):
    """`devmon status` must not call the streams behind (their newest point by /latest is
    a future one) nor hold unproved ranges for them, sync after sync."""
    db, *_ = synced
    assert rows(db, "SELECT count(*) FROM sync_cursors WHERE newest_seen IS NOT NULL AND "
                    "(cursor_ts IS NULL OR cursor_ts < newest_seen)") == [(0,)]
    assert rows(db, "SELECT count(*) FROM sync_gaps") == [(0,)]


def test_a_far_future_point_costs_no_scan_of_the_years_before_it(synced):
    """The 2099 point is fetched, not the 73 empty years before it, month by month."""
    _, _, first, second, _ = synced
    assert first.requests < 60 and second.requests < 60, (first.requests, second.requests)


def test_a_mirror_an_older_devmon_stuck_on_a_future_cursor_resumes(tmp_path):
    """A mirror synced before the fix holds the cursor at the 2099 point: the next sync
    takes it back to the newest point stored before the service's now and fetches the day."""
    db = tmp_path / "m.duckdb"
    with _server(FIRST) as srv:
        victim = next(iter(_victims(srv.base_url)))
        assert sync(srv.base_url, db).status == "ok"
    con = duckdb.connect(str(db))
    con.execute("UPDATE sync_cursors SET cursor_ts = ?, covered_until = ? WHERE stream = ?",
                [FAR, FAR, f"readings:{victim}"])
    con.close()
    with _server(SECOND) as srv:
        assert sync(srv.base_url, db).status == "ok"
        truth = _truth(srv.base_url, victim)
    assert _mirrored(db, victim) == truth
    (cursor,), = rows(db, "SELECT cursor_ts FROM sync_cursors WHERE stream = ?",
                      [f"readings:{victim}"])
    assert cursor == datetime.fromtimestamp(truth[-1][0] / 1000, tz=UTC)

"""Issue 27, point 8: the service's clock is not devmon's.

A new user's server ran 10 minutes behind devmon.  Its ``Retry-After`` was an HTTP date (RFC
9110 allows one), read against devmon's own clock: "wait 0 s" five times while the message
said "Retry after 8 seconds", and the sync failed.  A service that refuses a startDate in its
future was sent a GNSS discovery window at devmon's now, and the user was told to "change the
request", which no user can.  devmon now keeps the service's clock as its ``Date`` headers
state it (one odd header does not move it), reads a Retry-After date against the service's
own ``Date``, lets a wait stated in the message win over a date already past, sends the
service's now where it sends a now, and asks again within the service's time when a refusal
says a start date is in its future.
"""

from __future__ import annotations

import itertools
import re
import time
from datetime import UTC, datetime, timedelta

import pytest
from http_stubs import FakeClock, stub
from support import KEY, NOW, snapshot, start_server, sync

from devmon_sync import api_contract
from devmon_sync.client import (
    SERVER_WAIT_MARGIN_S,
    ApiClient,
    BadRequestError,
    refusals,
)
from devmon_sync.server import WorldSize
from devmon_sync.server.contracts import CONTRACTS, Contract
from devmon_sync.store import Mirror
from devmon_sync.sync.engine import SyncEngine, SyncOptions

SIZE = WorldSize(sites=2, devices=8, days=10)  # GNSS rovers and base among them
TINY = WorldSize(sites=1, devices=4, days=2)
BEHIND_S = -600
BEHIND = Contract("behind", clock_offset_s=BEHIND_S, retry_after_date=True)
FUTURE_REFUSED = Contract("future-refused", refuse_future_start=True)
_ASKED = re.compile(r"the service asked to wait ([\d.]+) s")


@pytest.fixture(scope="module")
def honest(tmp_path_factory) -> dict:
    """The mirror of the default contract, with the same (fixed) clock."""
    db = tmp_path_factory.mktemp("honest") / "honest.duckdb"
    with start_server(size=SIZE) as srv:
        assert sync(srv.base_url, db).status == "ok"
    return snapshot(db)


def _sync_with(client: ApiClient, db, **options):
    with client, Mirror.open(db) as mirror:
        return SyncEngine(client, mirror, SyncOptions(**options)).run()


# ----------------------------------------------------------------- the figures


def test_a_retry_after_date_of_a_clock_behind_is_waited_as_the_message_says(
        tmp_path, monkeypatch):
    """The first figure, on a wall clock: a service 10 minutes behind devmon, Retry-After as
    a date by its clock, a low rate limit (5 requests in a 4 s window, so waits take
    seconds).  Every wait it asks for is waited as its message states it, and the sync
    succeeds."""
    monkeypatch.setattr(api_contract, "RATE_LIMIT_WINDOW_S", 4.0)  # the server's side only
    waits: list[tuple[float, str]] = []
    with start_server(size=TINY, now=None, contract=BEHIND, rate_limit_per_minute=5) as srv:
        client = ApiClient(srv.base_url, KEY, rate_limit_per_minute=0, max_server_waits=3,
                           on_wait=lambda s, why: waits.append((s, why)))
        report = _sync_with(client, tmp_path / "m.duckdb")
        asked = client.rate_limit_answers
        assert srv.app.status_counts[429] >= 1  # the limit was met, its dates read
    assert report.status == "ok" and not report.problems, report.problems
    said = [refusals.wait_seconds(message) for _, message in asked]
    waited = [float(_ASKED.search(why).group(1)) for _, why in waits if _ASKED.search(why)]
    assert said and all(s >= 1 for s in said), asked
    assert waited == said, (waited, asked)


@pytest.mark.parametrize("contract", [FUTURE_REFUSED, CONTRACTS["clock-behind"]],
                         ids=lambda c: c.name)
def test_a_service_refusing_start_dates_in_its_future_mirrors_as_the_default(
        honest, tmp_path, contract):
    """The second figure: the service's clock (2026-01-01, or 10 minutes before) is months
    behind devmon's; the GNSS discovery window is asked at the service's now, not devmon's,
    and the mirror is the default contract's."""
    db = tmp_path / "m.duckdb"
    with start_server(size=SIZE, contract=contract) as srv:
        report = sync(srv.base_url, db)
    assert report.status == "ok" and not report.problems, report.problems
    assert snapshot(db) == honest


def test_the_client_keeps_the_services_clock_from_its_date_headers():
    with start_server(size=TINY, contract=CONTRACTS["clock-behind"]) as srv, \
            ApiClient(srv.base_url, KEY, rate_limit_per_minute=0) as client:
        before = client.service_now()
        client.sites()
        after = client.service_now()
    assert abs(before - datetime.now(UTC)) < timedelta(minutes=1)  # nothing said yet: ours
    behind = NOW + timedelta(seconds=BEHIND_S)  # the fixed clock, 10 minutes before
    assert behind <= after < behind + timedelta(seconds=30)


def test_a_start_in_the_future_is_told_as_the_services_clock_not_as_a_request_to_change():
    """What a caller that does not ask again sees: the service's clock and what to do."""
    with start_server(size=TINY, contract=CONTRACTS["clock-behind"]) as srv, \
            ApiClient(srv.base_url, KEY, rate_limit_per_minute=0) as client:
        ours = datetime.now(UTC).strftime("%Y-%m-%dT%H:%M:%S.000Z")
        with pytest.raises(BadRequestError) as refused:
            client.gnss({"startDate": ours, "endDate": ours})
    said = str(refused.value)
    assert "refused a start date in its future" in said and "behind devmon's" in said, said
    assert "sync again later" in said and "Change the request" not in said, said


class _FastClock:
    """devmon's wall clock running 10 s ahead at every reading (a machine whose clock
    steps forward between the service's answers)."""

    def __init__(self) -> None:
        self._ticks = itertools.count()

    def __call__(self) -> float:
        return time.time() + 10.0 * next(self._ticks)


def test_a_start_refused_as_in_the_future_is_asked_again_at_the_services_now(
        honest, tmp_path):
    """devmon's clock runs ahead between answers, so its estimate of the service's now is
    ahead too: the discovery is refused as in the future, and asked again at the now the
    refusal states.  Never "change the request"."""
    db = tmp_path / "m.duckdb"
    with start_server(size=SIZE, contract=FUTURE_REFUSED) as srv:
        client = ApiClient(srv.base_url, KEY, rate_limit_per_minute=0, wall_clock=_FastClock())
        report = _sync_with(client, db)
        refused = srv.app.status_counts[400]
    assert refused >= 1  # the refusal was met ...
    assert report.status == "ok" and not report.problems, report.problems  # ... and got over
    assert snapshot(db) == honest


def test_a_data_window_starting_after_the_services_now_is_asked_from_its_now(tmp_path):
    """A second sync, 3 hours after the first, whose windows start (a minute before the
    cursors) after the service's now, its clock 20 days behind its data (further than a
    forecast reaches, so the points are not taken for provisional ones and re-read from its
    now anyway): each is asked from the service's now instead, and the mirror is the one a
    clean sync makes."""
    early = NOW + timedelta(hours=8)
    later = early + timedelta(hours=3)
    behind = Contract("far-behind", refuse_future_start=True,
                      clock_offset_s=-int(timedelta(days=20).total_seconds()))
    db = tmp_path / "m.duckdb"
    with start_server(size=SIZE, now=early) as srv:
        assert sync(srv.base_url, db).status == "ok"
    with start_server(size=SIZE, now=later, contract=behind) as srv:
        report = sync(srv.base_url, db, lookback=timedelta(minutes=1))
        refused = srv.app.status_counts[400]
    assert refused >= 1
    assert report.status == "ok" and not report.problems, report.problems
    clean = tmp_path / "clean.duckdb"
    with start_server(size=SIZE, now=later) as srv:
        assert sync(srv.base_url, clean).status == "ok"
    assert snapshot(db) == snapshot(clean)


# ----------------------------------------------------------------- one answer's wait


def test_a_wait_in_the_message_wins_over_a_date_already_past():
    """A Retry-After date that reads as zero or less (a clock far off, a date in the past)
    says nothing: the message's "Retry after 2 seconds" is waited."""
    clock = FakeClock()
    past = "Thu, 01 Jan 2015 00:00:00 GMT"
    answers = [(429, {"Retry-After": past}, {"message": "Too many requests. Retry after 2 "
                                                        "seconds."}),
               (200, {}, {"items": []})]
    with stub(answers) as (url, _), ApiClient(url, KEY, rate_limit_per_minute=0,
                                              sleep=clock.sleep,
                                              monotonic=clock.monotonic) as client:
        assert client.sites() == []
    assert clock.sleeps == [2 + SERVER_WAIT_MARGIN_S]


# ----------------------------------------------------------------- reading the words


@pytest.mark.parametrize("message", [
    "startDate is in the future: this service's time is 2026-01-01T00:00:00.000Z.",
    "Start date must not be later than the current time",
    "'startDate' cannot be after now",
    "The start time lies in the future.",
    "from must not be in the future",
    "Future start dates are not accepted",
])
def test_a_start_in_the_future_is_read_from_the_words(message):
    assert refusals.start_in_future(message)


@pytest.mark.parametrize("message", [
    "startDate is after endDate: swap them or widen the range.",
    "Date range too long: 40.00 days asked, the limit is 30 days per request.",
    "endDate is in the future",
    "Unknown query parameter 'includeFormulas'",
    None,
])
def test_other_refusals_are_not_a_start_in_the_future(message):
    assert not refusals.start_in_future(message)


def test_a_retry_after_date_is_read_against_the_answers_date():
    ours = datetime(2030, 1, 1, tzinfo=UTC)  # devmon's clock, far from the service's
    assert refusals.retry_after_seconds("Wed, 31 Dec 2025 23:50:08 GMT",
                                        "Wed, 31 Dec 2025 23:50:00 GMT", ours) == 8.0
    service_now = datetime(2025, 12, 31, 23, 50, 3, tzinfo=UTC)  # no Date: the kept clock
    assert refusals.retry_after_seconds("Wed, 31 Dec 2025 23:50:08 GMT", None,
                                        service_now) == 5.0
    assert refusals.retry_after_seconds("12", "Wed, 31 Dec 2025 23:50:00 GMT", ours) == 12.0
    assert refusals.retry_after_seconds("Wed, 31 Dec 2025 23:49:00 GMT",
                                        "Wed, 31 Dec 2025 23:50:00 GMT", ours) == 0.0
    assert refusals.retry_after_seconds("soon", None, ours) is None
    assert refusals.retry_after_seconds(None, None, ours) is None


def test_one_odd_date_header_does_not_move_the_services_clock():
    steady = [-600.2, -600.4, -599.9]
    assert refusals.service_offset_s(steady) == -599.9  # the latest, when it agrees
    assert refusals.service_offset_s(steady + [3600.0]) == -599.9  # one odd: ignored
    assert refusals.service_offset_s([-600.0, 3600.0]) == -600.0  # no majority: the older
    stepped = steady + [-30.0, -30.5, -29.8]  # the service's clock was set right
    assert refusals.service_offset_s(stepped[-5:]) == -29.8
    assert refusals.service_offset_s([]) is None


def test_the_clocks_difference_is_said_in_a_persons_units():
    assert refusals.clock_difference(-600.4) == "10 min behind devmon's"
    assert refusals.clock_difference(45) == "45 s ahead of devmon's"
    assert refusals.clock_difference(-3 * 86400) == "3 days behind devmon's"
    assert refusals.clock_difference(0.3) == "within a second of devmon's"
    assert refusals.clock_difference(None).startswith("unknown")

"""Refusals are read by meaning: any wording, any status (issue 14, point 3).

A service other than devmon's own may word its "too large" refusal differently, carry it by
413 or 422, ask for a wait in words devmon never wrote ("Please wait 10 seconds") or by 403.
Each case here is an answer a real service could give; the stub serves it over real HTTP.
"""

from __future__ import annotations

import pytest

from support import KEY
from devmon_sync.client import (
    ApiClient,
    BadRequestError,
    ForbiddenError,
    RateLimitedError,
    RequestTooLargeError,
)
from devmon_sync.client.refusals import TooLarge, stated_rate_per_minute, too_large, wait_seconds
from http_stubs import FakeClock, stub


@pytest.mark.parametrize("message, seconds", [
    ("Rate limit exceeded: the limit is 200 requests per minute. Retry after 12 seconds.", 12),
    ("Please wait 10 seconds.", 10),
    ("Too many requests - try again in 1 minute", 60),
    ("Slow down: next request available in 7s", 7),
    ("retry in 500 ms", 0.5),
    ("Quota exceeded, wait 3 secs", 3),
])
def test_a_wait_is_read_in_any_words(message, seconds):
    assert wait_seconds(message) == pytest.approx(seconds)


@pytest.mark.parametrize("message", [
    "Too many requests", "The time range may not exceed 30 days",
    "Requested data exceeds the maximum of 50000 data points per request",
    "the limit is 200 requests per minute", "Retry after 2026-11-24T10:00:00Z", ""])
def test_text_that_asks_no_wait_is_not_read_as_one(message):
    assert wait_seconds(message) is None


def test_a_stated_request_rate_is_read_per_minute():
    assert stated_rate_per_minute("the limit is 200 requests per minute") == 200
    assert stated_rate_per_minute("limit: 6000 requests per hour") == 100
    assert stated_rate_per_minute("Please wait 10 seconds.") is None


@pytest.mark.parametrize("status, message, meaning", [
    (400, "Too many points: the request would return up to 123456 points, the limit is "
          "100000 per request.", TooLarge("points", 100000)),
    (400, "Date range too long: 40.00 days asked, the limit is 31 days per request.",
     TooLarge("range", 31)),
    (422, "Requested data exceeds the maximum of 50000 data points per request",
     TooLarge("points", 50000)),
    (422, "Requested data exceeds the maximum of 2000 epochs per request",
     TooLarge("points", 2000)),
    (422, "The time range may not exceed 30 days", TooLarge("range", 30)),
    (400, "Range must not exceed 2 weeks", TooLarge("range", 14)),
    (413, "Payload Too Large", TooLarge("size")),
    (413, "", TooLarge("size")),
    (400, "Response too large; narrow the query", TooLarge("size")),
])
def test_a_too_large_refusal_is_read_in_any_words(status, message, meaning):
    assert too_large(status, message) == meaning


@pytest.mark.parametrize("status, message", [
    (400, "Unknown query parameter 'includeInactiveSensors'; accepted: limit, offset."),
    (400, "Array 'uuids' holds 250 items; the maximum is 200."),  # halving time won't help
    (400, "Query parameter limit must be at most 500"),
    (400, "startDate is after endDate"),
    (403, "Requested data exceeds the maximum of 50000 data points per request"),
    (400, "Rate limit exceeded: the limit is 200 requests per minute. Retry after 5 seconds."),
])
def test_other_refusals_are_not_too_large(status, message):
    assert too_large(status, message) is None


def paced_client(url: str, clock: FakeClock, **kw) -> ApiClient:
    return ApiClient(url, KEY, sleep=clock.sleep, monotonic=clock.monotonic,
                     backoff_base_s=0.01, backoff_max_s=0.05, **kw)


@pytest.mark.parametrize("status", [403, 400, 429, 418])
def test_a_wait_asked_by_any_4xx_is_a_rate_limit_that_is_waited_out(status):
    clock = FakeClock()
    answers = [(status, {}, {"message": "Please wait 10 seconds."}),
               (200, {}, {"items": [{"uuid": "s1"}]})]
    with stub(answers) as (url, seen), paced_client(url, clock) as c:
        assert c.sites() == [{"uuid": "s1"}]
    assert clock.sleeps == [10.5] and len(seen) == 2
    assert c.rate_limit_answers == [(status, "Please wait 10 seconds.")]


def test_a_403_that_keeps_asking_for_a_wait_is_rate_limited_not_forbidden():
    """The issue's figure: 403 'Please wait' taken as 'no permission' skipped 411 streams."""
    clock = FakeClock()
    with stub([(403, {}, {"message": "Please wait 10 seconds."})]) as (url, seen), \
            paced_client(url, clock, max_server_waits=2) as c, \
            pytest.raises(RateLimitedError) as err:
        c.sensor_data({"deviceSerialNumbers": ["A"]})
    assert not isinstance(err.value, ForbiddenError) and err.value.status == 403
    assert "still rate-limited (HTTP 403" in str(err.value) and len(seen) == 3


def test_a_real_403_is_still_forbidden():
    with stub([(403, {}, {"message": "No access to device A."})]) as (url, _), \
            paced_client(url, FakeClock()) as c, pytest.raises(ForbiddenError):
        c.sensor_data({"deviceSerialNumbers": ["A"]})


def test_a_rate_limit_answer_slows_the_client_to_the_rate_it_states():
    clock = FakeClock()
    answers = [(429, {}, {"message": "Limit: 120 requests per minute. Wait 2 seconds."}),
               (200, {}, {"items": []})]
    with stub(answers) as (url, _), paced_client(url, clock) as c:
        c.sites()
        assert c.rate_limit_per_minute == 120


def test_a_rate_limit_answer_stating_no_rate_slows_the_client_by_a_fifth():
    """devmon kept to the pace it knew and was still refused: someone shares the key."""
    clock = FakeClock()
    answers = [(403, {}, {"message": "Please wait 1 seconds."}), (200, {}, {"items": []})]
    with stub(answers) as (url, _), paced_client(url, clock, rate_limit_per_minute=200) as c:
        c.sites()
        assert c.rate_limit_per_minute == 160


@pytest.mark.parametrize("status", [400, 413, 422])
def test_a_too_large_refusal_in_other_words_is_a_request_too_large_error(status):
    message = "Requested data exceeds the maximum of 50000 data points per request"
    with stub([(status, {}, {"message": message})]) as (url, _), \
            paced_client(url, FakeClock()) as c, pytest.raises(RequestTooLargeError) as err:
        c.sensor_data({"deviceSerialNumbers": ["A"]})
    assert err.value.too_large == TooLarge("points", 50000) and err.value.status == status
    assert "shorter time window" in str(err.value)


def test_a_422_that_is_not_about_size_is_a_bad_request():
    with stub([(422, {}, {"message": "orderBy must be asc or desc"})]) as (url, _), \
            paced_client(url, FakeClock()) as c, pytest.raises(BadRequestError) as err:
        c.sensor_data({"orderBy": "up"})
    assert not isinstance(err.value, RequestTooLargeError)


SENT = ["includeSensors", "includeInactiveSensors", "includeFormulas", "includeInternal",
        "limit", "offset"]


@pytest.mark.parametrize("message, refused", [
    ("Unknown query parameter 'includeInactiveSensors'; accepted: deviceKind, includeSensors, "
     "limit, offset.", ["includeInactiveSensors"]),
    ("Unknown query parameters: includeFormulas, includeInternal", ["includeFormulas",
                                                                     "includeInternal"]),
    ("Parameter not allowed: includeFormulas", ["includeFormulas"]),
    ("includeInternal is not supported by this service", ["includeInternal"]),
    ("Unsupported parameter 'includeInternal'. Supported: includeSensors, limit",
     ["includeInternal"]),
    ("Bad request", []),
])
def test_only_the_refused_options_are_read_out_of_a_refusal(message, refused):
    """A refusal that goes on to list what is accepted must not drop the accepted ones: the
    strict-options server's 400 made the client ask without includeSensors and paging."""
    from devmon_sync.client.refusals import refused_names
    assert refused_names(message, SENT) == refused

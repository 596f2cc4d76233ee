"""The API client against real reference servers on loopback, and where its key comes from.

Waits are made fast honestly: either the sleep and clock are fakes (and the test checks what
the client would have waited), or the shared rate-limit window is shrunk for both sides with
monkeypatch (and the client really waits a second).  A tiny local HTTP stub is used only for
what the reference server never does (a wait asked in a 503's message, a redirect).
"""

from __future__ import annotations

import logging
import time

import keyring
import pytest
from keyring.backends import fail

from support import KEY, SITE_KEY, one_second_rate_window, start_server
from http_stubs import FakeClock, stub
from devmon_sync import api_contract, credentials
from devmon_sync.client import (
    ApiClient,
    ApiError,
    AuthError,
    BadRequestError,
    ForbiddenError,
    InsecureUrlError,
    NetworkError,
    NotFoundError,
    RateLimitedError,
    RequestTooLargeError,
    ServiceUnavailableError,
    SlidingWindowLimiter,
)
from devmon_sync.credentials import CredentialsError
from devmon_sync.server import FaultConfig
from devmon_sync.server.config import ResponseLimits

DEVICE_FLAGS = {"includeSensors": "true", "includeInactiveSensors": "true",
                "includeFormulas": "true", "includeInternal": "true"}
GNSS_BODY = {"startDate": "2025-12-31T00:00:00Z", "endDate": "2026-01-01T00:00:00Z"}


def client_for(base_url: str, key: str = KEY, **kw) -> ApiClient:
    """A client that does not pace itself and backs off for milliseconds only."""
    kw = {"rate_limit_per_minute": 0, "backoff_base_s": 0.01, "backoff_max_s": 0.05, **kw}
    return ApiClient(base_url, key, **kw)


@pytest.fixture(scope="module")
def client(server):
    with client_for(server.base_url) as c:
        yield c


@pytest.fixture(scope="module")
def clean_answers(server, api):
    """What a fault-free server answers to the requests the fault tests repeat."""
    some = [d["serialNumber"] for d in api.ok("get", "/devices", limit=500)["items"][:6]]
    return {"devices": api.ok("get", "/devices", limit=500, **DEVICE_FLAGS)["items"],
            "latest": api.ok("post", "/sensor-data/latest", {})["items"],
            "readings": api.ok("post", "/sensor-data", {"deviceSerialNumbers": some})["items"],
            "gnss": api.ok("post", "/sensor-data/gnss", GNSS_BODY)["items"],
            "some": some}


# ---------------------------------------------------------------------------- base URL


@pytest.mark.parametrize("given, kept", [
    ("https://dm.example.com", "https://dm.example.com"),
    ("https://dm.example.com/", "https://dm.example.com"),
    ("https://dm.example.com/v1/", "https://dm.example.com/v1"),
    (" https://dm.example.com/v1 ", "https://dm.example.com/v1"),
    ("https://h.example/api/", "https://h.example/api")])
def test_base_url_is_kept_as_given_without_a_trailing_slash(given, kept):
    """The spec's descriptions differ on /v1: devmon no longer appends it blindly."""
    assert ApiClient(given, KEY).base_url == kept


@pytest.mark.parametrize("suffix", ["", "/"])
def test_an_address_without_v1_finds_the_api_under_v1_once(server, suffix):
    """The reference server answers under /v1 only: the first request finds it there (one
    request more), and every later one goes there directly."""
    given = server.base_url.removesuffix("/v1") + suffix
    with client_for(given) as c:
        assert len(c.sites()) == 6 and c.requests_sent == 2
        assert c.base_url == server.base_url and c.base_given == given.rstrip("/")
        c.sites()
        assert c.requests_sent == 3


def test_an_address_where_no_api_answers_names_both_tried(server):
    given = server.base_url.removesuffix("/v1") + "/api"
    with client_for(given) as c, pytest.raises(NotFoundError) as err:
        c.sites()
    assert f"tried {given} and {given}/v1" in str(err.value) and c.requests_sent == 2


def test_a_located_address_is_used_without_asking(server):
    with client_for(server.base_url.removesuffix("/v1")) as c:
        c.locate(server.base_url)
        c.sites()
        assert c.requests_sent == 1
        c.locate("https://elsewhere.example/v1")  # not a form of the given address: ignored
        assert c.base_url == server.base_url


def test_plain_http_off_the_machine_is_refused():
    with pytest.raises(InsecureUrlError) as err:
        ApiClient("http://example.com/v1", KEY)
    assert "https" in str(err.value) and "--allow-insecure" in str(err.value)
    assert KEY not in str(err.value)
    assert ApiClient("http://example.com", KEY, allow_insecure=True).base_url == \
        "http://example.com"


@pytest.mark.parametrize("url", ["http://127.0.0.1:8787", "http://127.9.8.7/v1",
                                 "http://localhost:8787/v1", "http://[::1]:8787/v1"])
def test_plain_http_to_loopback_is_allowed(url):
    assert ApiClient(url, KEY).base_url == url


@pytest.mark.parametrize("url", ["http://x.localhost:8787/v1", "http://localhost.evil.example/v1",
                                 "http://127.0.0.1.nip.io/v1", "http://[::ffff:10.0.0.1]/v1"])
def test_only_literal_loopback_or_localhost_counts_as_loopback(url):
    """Audit: http://x.localhost was taken for loopback yet resolved through DNS, so the key
    went in clear to whatever DNS answered."""
    with pytest.raises(InsecureUrlError, match="Refusing plain http"):
        ApiClient(url, KEY)


@pytest.mark.parametrize("url, says", [
    ("http://127.0.0.1:99999/v1", "port"), ("https://host:abc/v1", "port"),
    ("http://[::1/v1", "IPv6"), ("https://[not-an-ip]/v1", "IPv6"),
])
def test_an_address_that_cannot_be_parsed_is_one_clear_error(url, says):
    with pytest.raises(ApiError, match=says) as err:
        ApiClient(url, KEY)
    assert "https://monitoring.example.com/v1" in str(err.value)


def test_clear_text_loopback_never_goes_through_a_proxy(server, monkeypatch):
    monkeypatch.setenv("HTTP_PROXY", "http://proxy.invalid:3128")
    monkeypatch.setenv("http_proxy", "http://proxy.invalid:3128")
    with client_for(server.base_url, max_retries=0) as c:
        assert len(c.sites()) == 6


@pytest.mark.parametrize("url", ["", "dm.example.com/v1", "ftp://dm.example.com/v1",
                                 "https://dm.example.com/v1?key=secret-in-url",
                                 "https://me:secret-in-url@dm.example.com/v1",
                                 "secret-in-url"])  # a key given where the URL goes
def test_what_is_not_an_api_address_is_refused_without_echoing_it(url):
    with pytest.raises(ApiError, match="https://") as err:
        ApiClient(url, KEY)
    assert "secret-in-url" not in str(err.value)


# ---------------------------------------------------------------------------- typed helpers


def test_sites_and_devices_are_what_the_server_holds(client, api):
    assert client.sites() == api.ok("get", "/sites")["items"]
    with_devices = client.sites(include_devices=True, include_sensors=True)
    assert with_devices == api.ok("get", "/sites", includeDevices="true",
                                  includeSensors="true")["items"]
    one = with_devices[1]["uuid"]
    assert [s["uuid"] for s in client.sites(uuids=[one])] == [one]
    devices = client.devices()
    assert len(devices) == 48
    assert devices == api.ok("get", "/devices", limit=500, **DEVICE_FLAGS)["items"]
    bare = client.devices(include_sensors=False, include_inactive=False,
                          include_formulas=False, include_internal=False)
    assert bare == api.ok("get", "/devices", limit=500)["items"]
    on_site = client.devices(site_uuid=one)
    assert on_site and all(d["site"]["uuid"] == one for d in on_site)


def test_single_resources_are_what_the_server_holds(client, api):
    sn = next(d["serialNumber"] for d in client.devices() if d["sensors"])
    device = client.device(sn)
    assert device == api.ok("get", f"/devices/{sn}")["items"][0]
    sensor = device["sensors"][0]
    assert client.sensor(sensor["uuid"]) == api.ok("get", f"/sensors/{sensor['uuid']}")
    groups = client.device_groups()
    assert groups == api.ok("get", "/device-groups", includeDevices="true",
                            includeUngrouped="true", includeSensors="false")
    uuid = groups["grouped"][0]["uuid"]
    assert client.device_group(uuid) == api.ok("get", f"/device-groups/{uuid}")
    assert client.device_groups(uuids=[]) == {"grouped": [], "ungrouped": []}


def test_sensor_data_helpers_are_what_the_server_holds(client, clean_answers):
    assert client.sensor_data({"deviceSerialNumbers": clean_answers["some"]}) == \
        clean_answers["readings"]
    assert client.latest() == clean_answers["latest"]
    assert client.gnss(GNSS_BODY) == clean_answers["gnss"]


@pytest.mark.parametrize("page_size, pages, first", [(20, 3, 4),  # 20 + 20 + 8, short last
                                                     (16, 4, 4)])  # 48 = 16 * 3: one empty
def test_devices_walks_every_page(server, clean_answers, monkeypatch, page_size, pages, first):
    """On first contact a page shorter than asked is followed by one more question (a
    service may cap its pages silently); once the empty answer proves a short page the
    last, the client (and the service profile a sync stores) asks no more."""
    monkeypatch.setattr(api_contract, "PAGE_SIZE_MAX", page_size)  # the server's limit
    with client_for(server.base_url) as c:
        c.page_size = page_size  # the client's page (--page-size)
        assert c.devices() == clean_answers["devices"]
        assert c.requests_sent == first
        assert c.devices() == clean_answers["devices"]
        assert c.requests_sent == first + pages


def test_long_serial_lists_go_in_chunks_the_server_accepts(server, api):
    real = [d["serialNumber"] for d in api.ok("get", "/devices", limit=500)["items"]]
    asked = real + [f"NOPE-{i}" for i in range(400)]  # 448 > 200 per request
    with client_for(server.base_url) as c:
        found = c.devices(include_sensors=False, serial_numbers=asked)
        assert c.requests_sent == 3 + 1  # the first chunk's short page is checked once
        assert c.devices(serial_numbers=[]) == [] and c.requests_sent == 4
    assert [d["serialNumber"] for d in found] == real


def test_raw_get_sends_booleans_and_lists_as_the_contract_says(client, api):
    sites = api.ok("get", "/sites")["items"]
    answer = client.get("sites", {"uuids": [sites[0]["uuid"], sites[2]["uuid"]],
                                  "includeDevices": False, "includeSensors": None})
    assert [s["uuid"] for s in answer["items"]] == [sites[0]["uuid"], sites[2]["uuid"]]


# ---------------------------------------------------------------------------- faults and retries


@pytest.mark.parametrize("faults", [FaultConfig(error_rate=0.3, seed=1),
                                    FaultConfig(drop_rate=0.3, seed=2),
                                    FaultConfig(truncate_rate=0.3, seed=3)],
                         ids=["500s", "drops", "truncations"])
def test_retries_give_the_clean_answer(clean_answers, faults):
    waits = []
    with start_server(faults=faults) as srv, \
            client_for(srv.base_url, on_wait=lambda s, why: waits.append(why)) as c:
        assert c.latest() == clean_answers["latest"]
        for _ in range(3):
            assert c.devices() == clean_answers["devices"]
            assert c.sensor_data({"deviceSerialNumbers": clean_answers["some"]}) == \
                clean_answers["readings"]
            assert c.gnss(GNSS_BODY) == clean_answers["gnss"]
        assert c.requests_sent > 10, "the faults should have cost retries"
    # 11 answers without a fault: latest, 3 x (devices, data, GNSS), and the first devices
    # walk's check that its short page is the last
    assert len(waits) == c.requests_sent - 11 and all(w.startswith("retry ") for w in waits)


def test_slow_answers_time_out_and_are_retried(clean_answers):
    faults = FaultConfig(slow_rate=0.5, slow_s=1.0, seed=4)
    with start_server(faults=faults) as srv, \
            client_for(srv.base_url, timeout_s=(2.0, 0.5)) as c:
        for _ in range(4):
            assert c.devices(serial_numbers=clean_answers["some"]) == \
                [d for d in clean_answers["devices"] if d["serialNumber"] in clean_answers["some"]]
        assert c.requests_sent > 4


def test_backoff_is_exponential_with_full_jitter_and_bounded():
    clock = FakeClock()
    with start_server(faults=FaultConfig(error_rate=1.0)) as srv, \
            client_for(srv.base_url, max_retries=6, backoff_base_s=1.0, backoff_max_s=5.0,
                       sleep=clock.sleep, monotonic=clock.monotonic) as c:
        with pytest.raises(ServiceUnavailableError) as err:
            c.sites()
        assert c.requests_sent == 7
    assert len(clock.sleeps) == 6
    assert all(0 <= s <= min(5.0, 2 ** n) for n, s in enumerate(clock.sleeps))
    message = str(err.value)
    assert "GET /sites" in message and "HTTP 500" in message and "try again later" in message
    assert err.value.status == 500 and err.value.method == "GET" and err.value.path == "/sites"


def test_connections_that_always_drop_end_in_a_network_error():
    with start_server(faults=FaultConfig(drop_rate=1.0)) as srv, \
            client_for(srv.base_url, max_retries=2) as c:
        with pytest.raises(NetworkError) as err:
            c.gnss(GNSS_BODY)
        assert c.requests_sent == 3
    assert "POST /sensor-data/gnss" in str(err.value) and "Check the network" in str(err.value)
    assert KEY not in str(err.value) and KEY not in repr(err.value)


def test_nothing_listening_is_a_network_error():
    srv = start_server()
    url = srv.base_url
    srv.stop()
    with client_for(url, max_retries=1) as c, pytest.raises(NetworkError, match="GET /sites"):
        c.sites()


# ---------------------------------------------------------------------------- rate limiting


def test_limiter_allows_at_most_n_per_window():
    clock = FakeClock()
    limiter = SlidingWindowLimiter(3, 60.0, monotonic=clock.monotonic)
    sent = []
    for _ in range(8):
        slot, wait = limiter.try_acquire()
        while slot is None:
            clock.sleep(wait)
            slot, wait = limiter.try_acquire()
        sent.append(clock.now)
        clock.now += 0.2  # the request takes a while; the slot is stamped when it ends
        limiter.release(slot)
    assert all(sent[i + 3] - (sent[i] + 0.2) >= 60.0 for i in range(len(sent) - 3))
    assert max(clock.sleeps) <= 60.0 + 0.011


def test_limiter_says_how_long_the_limit_makes_more_requests_take():
    clock = FakeClock()
    limiter = SlidingWindowLimiter(200, 60.0, monotonic=clock.monotonic)
    for _ in range(150):
        limiter.release(limiter.try_acquire()[0])
    assert limiter.least_seconds_for(50) == 0.0  # 50 slots are still free
    assert limiter.least_seconds_for(450) == pytest.approx(400 / 200 * 60.0)
    clock.now += 61.0  # the window has passed: all 200 slots are free again
    assert limiter.least_seconds_for(200) == 0.0
    assert SlidingWindowLimiter(0).least_seconds_for(10_000) == 0.0  # no limit


def test_client_paces_itself_on_a_fake_clock(server):
    clock, waits, sent = FakeClock(), [], []
    with client_for(server.base_url, rate_limit_per_minute=5, sleep=clock.sleep,
                    monotonic=clock.monotonic, on_wait=lambda s, why: waits.append((s, why))) as c:
        c._session.hooks["response"].append(lambda r, **kw: sent.append(clock.now))
        for _ in range(12):
            c.sites()
    assert len(sent) == 12
    assert all(sent[i + 5] - sent[i] >= 60.0 for i in range(len(sent) - 5))
    assert len(waits) == 2 and all(59.9 <= s <= 60.1 and "5 requests per minute" in why
                                   for s, why in waits)


def test_client_pacing_never_draws_a_429(monkeypatch):
    """Real clocks on both sides; both windows shrunk to 1 s so pacing takes ~2 s."""
    one_second_rate_window(monkeypatch)
    statuses, waits = [], []
    with start_server(rate_limit_per_minute=5) as srv, \
            client_for(srv.base_url, rate_limit_per_minute=5,
                       on_wait=lambda s, why: waits.append(why)) as c:
        c._session.hooks["response"].append(lambda r, **kw: statuses.append(r.status_code))
        for _ in range(12):
            c.sites()
    assert statuses == [200] * 12
    assert len(waits) >= 2 and all("requests per minute" in w for w in waits)


def test_the_wait_the_server_asks_for_is_waited_then_the_request_succeeds(monkeypatch):
    """Client limiter off; the server (window shrunk to 1 s) answers 429 with a 1 s wait."""
    monkeypatch.setattr(api_contract, "RATE_LIMIT_WINDOW_S", 1.0)
    slept, waits = [], []

    def sleep(seconds):
        slept.append(seconds)
        time.sleep(seconds)

    with start_server(rate_limit_per_minute=3) as srv, \
            client_for(srv.base_url, sleep=sleep, on_wait=lambda s, why: waits.append((s, why))) \
            as c:
        answers = [c.sites() for _ in range(4)]
        assert c.requests_sent == 5  # the fourth was refused once, then retried
    assert all(a == answers[0] for a in answers)
    assert len(waits) == 1 and 1.0 < waits[0][0] <= 1.0 + 1.0
    assert "service asked to wait 1 s (HTTP 429)" in waits[0][1]
    assert slept == [waits[0][0]]


def test_server_asked_waits_are_bounded(server):
    """The reference server asks for ~60 s; a fake sleep lets the test see the count and bound."""
    clock, waits = FakeClock(), []
    with start_server(rate_limit_per_minute=3) as srv, \
            client_for(srv.base_url, sleep=clock.sleep, monotonic=clock.monotonic,
                       max_server_waits=3, on_wait=lambda s, why: waits.append(s)) as c:
        for _ in range(3):
            c.sites()
        with pytest.raises(RateLimitedError) as err:
            c.sites()
        assert c.requests_sent == 3 + 1 + 3
    assert len(waits) == 3 and all(55.0 <= s <= 61.0 for s in waits)
    assert err.value.status == 429 and "Rate limit exceeded" in err.value.server_message
    assert "GET /sites" in str(err.value) and "waiting as asked 3 times" in str(err.value)


def test_a_wait_asked_in_any_status_message_is_honoured():
    clock = FakeClock()
    answers = [(503, {}, {"message": "Busy. Please retry after 7 seconds."}),
               (200, {}, {"items": [{"message": "retry after 9 seconds"}]})]
    with stub(answers) as (url, seen), \
            client_for(url, sleep=clock.sleep, monotonic=clock.monotonic) as c:
        assert c.sites() == [{"message": "retry after 9 seconds"}]  # data is never a wait
    assert clock.sleeps == [7.0 + 0.5] and len(seen) == 2


def test_redirects_are_not_followed():
    with stub([(302, {"Location": "https://elsewhere.example/v1/sites"}, {})]) as (url, seen), \
            client_for(url) as c, pytest.raises(ApiError) as err:
        c.sites()
    assert len(seen) == 1 and "elsewhere.example" in str(err.value)
    assert "base URL" in str(err.value)


# ---------------------------------------------------------------------------- typed errors


def test_a_rejected_key_is_an_auth_error_that_never_shows_the_key(server, caplog):
    secret = "s3cret-key-that-must-not-leak"
    caplog.set_level(logging.DEBUG)
    with client_for(server.base_url, key=secret) as c, pytest.raises(AuthError) as err:
        c.sites()
    text = str(err.value)
    assert err.value.status == 401 and "GET /sites" in text
    assert "--api-key" in text and "DEVMON_API_KEY" in text and "devmon login" in text
    for shown in (text, repr(err.value), repr(c), str(vars(err.value)), caplog.text):
        assert secret not in shown


def test_a_key_no_header_can_carry_is_refused_without_showing_it(server):
    with pytest.raises(AuthError) as err:
        ApiClient(server.base_url, "abc\ndef-secret")
    assert "def-secret" not in str(err.value) and "copy it again" in str(err.value)
    with pytest.raises(AuthError, match="DEVMON_API_KEY"):
        ApiClient(server.base_url, "   ")


def test_a_site_limited_key_gets_forbidden_errors(server, api, limited_site_uuid):
    other = next(d["serialNumber"] for d in api.ok("get", "/devices", limit=500)["items"]
                 if d["site"] and d["site"]["uuid"] != limited_site_uuid)
    with client_for(server.base_url, key=SITE_KEY) as c:
        assert {d["site"]["uuid"] for d in c.devices(include_sensors=False)} == \
            {limited_site_uuid}
        with pytest.raises(ForbiddenError) as err:
            c.device(other)
        assert f"device {other}" in str(err.value) and err.value.status == 403
        with pytest.raises(ForbiddenError, match=other):
            c.sensor_data({"deviceSerialNumbers": [other]})


def test_unknown_things_are_not_found_errors_naming_the_request(client):
    with pytest.raises(NotFoundError) as err:
        client.device("NO-SUCH-DEVICE")
    assert "GET /devices/NO-SUCH-DEVICE" in str(err.value) and err.value.status == 404
    with pytest.raises(NotFoundError, match="GET /nothing-here"):
        client.get("/nothing-here")


def test_too_large_requests_are_told_apart_from_bad_ones(client, clean_answers):
    long_range = {"deviceSerialNumbers": clean_answers["some"],
                  "startDate": "2025-11-01T00:00:00Z", "endDate": "2026-01-01T00:00:00Z"}
    with pytest.raises(RequestTooLargeError) as err:
        client.sensor_data(long_range)
    assert err.value.server_message.startswith(api_contract.RANGE_TOO_LONG_PREFIX)
    with pytest.raises(BadRequestError) as err:
        client.get("/sites", {"bogus": 1})
    assert not isinstance(err.value, RequestTooLargeError)
    assert "'bogus'" in str(err.value) and "GET /sites" in str(err.value)


def test_too_many_points_is_a_request_too_large_error(clean_answers):
    with start_server(limits=ResponseLimits(max_points=10)) as srv, \
            client_for(srv.base_url) as c, pytest.raises(RequestTooLargeError) as err:
        c.sensor_data({"deviceSerialNumbers": clean_answers["some"]})
    assert isinstance(err.value, BadRequestError) and err.value.status == 400
    assert err.value.server_message.startswith(api_contract.TOO_MANY_POINTS_PREFIX)
    assert "POST /sensor-data" in str(err.value) and "shorter time window" in str(err.value)


# ---------------------------------------------------------------------------- credentials


def test_a_profile_round_trips_with_its_key_only_in_the_keyring(file_keyring, tmp_path):
    credentials.save_profile("site-a", "https://a.example/v1", "key-of-site-a")
    profile = credentials.load_profile("site-a")
    assert (profile.name, profile.base_url, profile.api_key) == \
        ("site-a", "https://a.example/v1", "key-of-site-a")
    assert "key-of-site-a" not in repr(profile)
    assert credentials.list_profiles() == ["site-a"]
    assert "key-of-site-a" not in credentials.profiles_path().read_text()
    assert credentials.profiles_path().parent == tmp_path / "config"
    assert credentials.resolve_api_key(None, "site-a") == ("key-of-site-a", "https://a.example/v1")
    credentials.delete_profile("site-a")
    assert credentials.list_profiles() == []


def test_the_default_profile_is_used_when_none_is_named(file_keyring):
    credentials.save_profile("other", "https://o.example/v1", "key-o")
    with pytest.raises(CredentialsError):
        credentials.resolve_api_key(None, None)
    credentials.save_profile("default", "https://d.example/v1", "key-d")
    assert credentials.resolve_api_key(None, None) == ("key-d", "https://d.example/v1")


def test_flag_beats_environment_beats_profile(file_keyring, monkeypatch):
    credentials.save_profile("site-a", "https://a.example/v1", "key-of-site-a")
    monkeypatch.setenv(credentials.ENV_API_KEY, " key-from-env\n")
    assert credentials.resolve_api_key(None, "site-a") == ("key-from-env", "https://a.example/v1")
    assert credentials.resolve_api_key("key-from-flag", "site-a") == \
        ("key-from-flag", "https://a.example/v1")
    assert credentials.resolve_api_key("key-from-flag", None) == ("key-from-flag", None)


def test_an_unknown_profile_is_named_with_the_known_ones(file_keyring):
    credentials.save_profile("site-a", "https://a.example/v1", "k-a")
    credentials.save_profile("site-b", "https://b.example/v1", "k-b")
    with pytest.raises(CredentialsError) as err:
        credentials.resolve_api_key(None, "site-c")
    assert "'site-c'" in str(err.value) and "site-a, site-b" in str(err.value)


def test_no_key_anywhere_says_the_three_ways_to_give_one(file_keyring):
    with pytest.raises(CredentialsError) as err:
        credentials.resolve_api_key(None, None)
    text = str(err.value)
    assert "--api-key" in text and "DEVMON_API_KEY" in text and "devmon login" in text


def test_without_a_keyring_profiles_say_to_use_the_environment(file_keyring, monkeypatch):
    credentials.save_profile("site-a", "https://a.example/v1", "key-of-site-a")
    keyring.set_keyring(fail.Keyring())
    for attempt in (lambda: credentials.save_profile("site-b", "https://b.example/v1", "kb"),
                    lambda: credentials.load_profile("site-a")):
        with pytest.raises(CredentialsError) as err:
            attempt()
        text = str(err.value)
        assert "No OS keyring" in text and "DEVMON_API_KEY" in text and "--api-key" in text
        assert "key-of-site-a" not in text
    assert credentials.list_profiles() == ["site-a"]  # the failed save left no half profile
    monkeypatch.setenv(credentials.ENV_API_KEY, "key-from-env")
    assert credentials.resolve_api_key(None, "site-a") == ("key-from-env", "https://a.example/v1")

"""Issue 29, items 10-13: the HTTP client against a hostile service.

- 10: a service that echoes the API key in another form (base64, as in Basic auth, URL-encoded,
  hex) in its errors must not get it into the sync log, the terminal, or the mirror;
- 11: plain http is allowed only to loopback, decided from the address's text alone (no DNS:
  ``localhost.`` asked DNS, and DNS may answer anything);
- 12: a ``Retry-After`` date read against another clock must not turn a short wait into a
  stop;
- 13: a service that drips its answers is given up after two too-slow answers in a row, not
  after nine attempts of two minutes each.

Hostile services are loopback servers in threads (or the reference server behind
``http_stubs.MutatingProxy``); the CLI runs for real where the terminal and the log matter.
"""

from __future__ import annotations

import base64
import os
import socket
import subprocess
import threading
import time
from contextlib import contextmanager
from email.utils import formatdate
from urllib.parse import quote

import duckdb
import orjson
import pytest
from http_stubs import FakeClock, MutatingProxy, stub
from support import KEY, start_server
from support import devmon as run_devmon

from devmon_sync.client import (
    ApiClient,
    InsecureUrlError,
    NetworkError,
    RateLimitedError,
    ServiceUnavailableError,
    normalise_base_url,
)
from devmon_sync.server import WorldSize

TINY = WorldSize(sites=1, devices=4, days=3)
ODD_KEY = "k3y/Odd+chars=~9xQ7"
"""A key whose URL-encoding differs from it (``/``, ``+``, ``=``)."""
PLACEHOLDER = "<api key>"


# ============================================================ 10: the key in another form

def key_forms(key: str) -> dict[str, str]:
    """The forms a service or proxy may echo the key in."""
    raw = key.encode()
    basic = base64.b64encode(b"monitor:" + raw).decode()
    return {
        "base64": base64.b64encode(raw).decode(),
        "base64 unpadded": base64.b64encode(raw).decode().rstrip("="),
        "base64 urlsafe": base64.urlsafe_b64encode(raw).decode(),
        "basic auth": basic,
        "bearer base64": base64.b64encode(b"Bearer " + raw).decode(),
        "url-encoded": quote(key, safe=""),
        "url-encoded lower": quote(key, safe="").replace("%2F", "%2f").replace("%2B", "%2b"),
        "hex": raw.hex(),
        "HEX": raw.hex().upper(),
        "verbatim": key,
    }


def test_the_forms_differ_from_the_key_so_the_test_can_fail():
    forms = key_forms(ODD_KEY)
    assert all(ODD_KEY not in text for name, text in forms.items() if name != "verbatim")
    assert len(set(forms.values())) == len(forms)


def _echo(status_words: str) -> str:
    """An error message that echoes the key in each form (as a careless service does)."""
    forms = key_forms(ODD_KEY)
    return (f"{status_words} for the key {forms['base64']} (Authorization: Basic "
            f"{forms['basic auth']}; token {forms['bearer base64']}, {forms['base64 urlsafe']}, "
            f"{forms['base64 unpadded']}; query key={forms['url-encoded']} "
            f"k={forms['url-encoded lower']}; hex {forms['hex']} {forms['HEX']}).")


def _devmon(tmp_path, *args: str) -> subprocess.CompletedProcess:
    env = {k: v for k, v in os.environ.items() if k != "DEVMON_API_KEY"}
    env.update(DEVMON_LOG_DIR=str(tmp_path / "logs"), DEVMON_CONFIG_DIR=str(tmp_path / "cfg"),
               DEVMON_DATA_DIR=str(tmp_path / "data"))
    return run_devmon(*args, "--api-key", ODD_KEY, "--rate-limit", "0", timeout=300, env=env)


def _mirror_text(db) -> str:
    """Every row of every table of the mirror, as text."""
    con = duckdb.connect(str(db), read_only=True)
    try:
        tables = [t for (t,) in con.execute("SELECT table_name FROM information_schema.tables "
                                            "WHERE table_type = 'BASE TABLE'").fetchall()]
        return "\n".join(f"{t}: {row}" for t in tables
                         for row in con.execute(f'SELECT * FROM "{t}"').fetchall())
    finally:
        con.close()


def test_a_key_echoed_base64_url_or_hex_encoded_is_kept_nowhere(tmp_path):
    """A first sync meets a rate limit and a refusal that echo the key in every form, a
    probe meets the rate limit, and a second sync is refused with them: no form reaches the
    sync log, the terminal, or any table of the mirror (service_profiles, sync_runs, ...)."""
    refused: list[tuple[str, str, int]] = []
    revoked = threading.Event()

    def refuse(method, path, body):
        seen = {(m, p) for m, p, _ in refused}
        if revoked.is_set() and path == "/sites":
            refused.append((method, path, 401))
            return 401, {"message": _echo("API key not accepted")}
        if (method, path) in (("GET", "/sites"), ("POST", "/sensor-data")) \
                and (method, path) not in seen:
            refused.append((method, path, 429))
            return 429, {"message": _echo("Too many requests") + " Retry after 1 second."}
        if (method, path) == ("GET", "/device-groups"):
            refused.append((method, path, 403))
            return 403, {"message": _echo("Not allowed")}
        return None

    db = tmp_path / "mirror.duckdb"
    with start_server(size=TINY, api_keys={ODD_KEY: None}) as upstream, \
            MutatingProxy(upstream.base_url, refuse=refuse) as proxy:
        first = _devmon(tmp_path, "sync", "--base-url", proxy.base_url, "--db", str(db))
        refused.clear()  # the probe meets the rate limit afresh
        probe = _devmon(tmp_path, "probe", "--base-url", proxy.base_url, "--db", str(db))
        revoked.set()
        second = _devmon(tmp_path, "sync", "--base-url", proxy.base_url, "--db", str(db))
    assert first.returncode == 0, first.stderr
    assert second.returncode == 2, second.stderr
    assert "Traceback" not in first.stderr + probe.stderr + second.stderr
    assert any(status == 401 for _, _, status in refused), "the key was never refused"
    outputs = {"first sync": first.stdout + first.stderr, "probe": probe.stdout + probe.stderr,
               "second sync": second.stdout + second.stderr,
               "sync log": (tmp_path / "logs" / "sync.log").read_text(),
               "mirror": _mirror_text(db)}
    leaks = [(form, where) for where, text in outputs.items()
             for form, value in key_forms(ODD_KEY).items() if value in text]
    assert not leaks, sorted({where for _, where in leaks})
    # the messages did come through, with the key in them scrubbed: the test can fail
    assert PLACEHOLDER in outputs["second sync"] and "API key not accepted" in \
        outputs["second sync"], outputs["second sync"]
    assert PLACEHOLDER in outputs["mirror"] and "Too many requests" in outputs["mirror"]
    assert PLACEHOLDER in outputs["probe"], outputs["probe"]


def test_a_key_in_a_body_that_is_not_json_is_scrubbed_too():
    """A proxy's plain-text 200 starting with the key's base64 is named in the message by
    its start: that start must not carry the key."""
    forms = key_forms(ODD_KEY)
    body = f"{forms['base64']} is not allowed here".encode()
    with hostile_server([(200, {}, body)] * 3) as (url, _), \
            ApiClient(url, ODD_KEY, rate_limit_per_minute=0, max_retries=1,
                      backoff_base_s=0.0, backoff_max_s=0.0) as client, \
            pytest.raises(ServiceUnavailableError) as err:
        client.located = True  # past first contact: an unreadable body is retried
        client.sites()
    assert forms["base64"][:12] not in str(err.value), str(err.value)
    assert "not valid JSON" in str(err.value), str(err.value)


# ============================================================ 11: loopback by its text

@pytest.fixture
def no_dns(monkeypatch):
    """Records every name resolution (they still happen): deciding loopback must ask none."""
    asked: list[str] = []
    real = socket.getaddrinfo

    def spy(host, *args, **kwargs):
        asked.append(host)
        return real(host, *args, **kwargs)

    monkeypatch.setattr(socket, "getaddrinfo", spy)
    return asked


@pytest.mark.parametrize("url", [
    "http://localhost.:8080/v1", "http://LOCALHOST.:8080", "http://localhost..:8080",
    "http://localhost.localdomain:8080", "http://x.localhost:8080", "http://127.1:8080",
    "http://127.0.0.1.:8080", "http://0x7f.0.0.1:8080", "http://2130706433:8080",
    "http://example.com/v1", "http://10.0.0.1:8080", "http://[fe80::1]:8080",
    "http://localhost%2e:8080",
])
def test_plain_http_off_a_literal_loopback_is_refused_without_asking_dns(url, no_dns):
    with pytest.raises(InsecureUrlError, match="Refusing plain http"):
        normalise_base_url(url)
    assert no_dns == [], f"DNS was asked for {no_dns} to decide on {url}"


@pytest.mark.parametrize("url", [
    "http://localhost:8080/v1", "http://LOCALHOST:8080", "http://LocalHost:8080/v1/",
    "http://127.0.0.1:8080", "http://127.9.8.7:1", "http://[::1]:8080/v1",
])
def test_plain_http_to_loopback_written_plainly_is_allowed_without_asking_dns(url, no_dns):
    assert normalise_base_url(url).startswith("http://")
    assert no_dns == [], f"DNS was asked for {no_dns} to decide on {url}"


def test_https_to_any_name_is_allowed_and_insecure_only_when_asked(no_dns):
    assert normalise_base_url("https://localhost.:8443/v1") == "https://localhost.:8443/v1"
    assert normalise_base_url("http://localhost.:8080", allow_insecure=True)
    assert no_dns == []


# ============================================================ hostile loopback servers

Answer = tuple[int, dict, bytes]


def hostile_server(answers: list[Answer], date: bool = False):
    """``http_stubs.stub`` sending no ``Date`` of its own unless ``date``: headers say
    exactly what a test gives them.  Yields (base URL, the requests' headers seen)."""
    return stub(answers, date=date)


SITES = orjson.dumps({"items": [{"uuid": "s1"}]})
DAY_S = 86400.0


def _waits_client(url: str, clock: FakeClock, waits: list) -> ApiClient:
    return ApiClient(url, KEY, rate_limit_per_minute=0, sleep=clock.sleep,
                     monotonic=clock.monotonic, max_retries=0,
                     on_wait=lambda s, why: waits.append((s, why)))


def _rate_limited(retry_after: str, message: str, date: str | None = None) -> Answer:
    headers = {"Retry-After": retry_after, **({"Date": date} if date else {})}
    return 429, headers, orjson.dumps({"message": message})


# ============================================================ 12: a clock a day ahead

def test_a_retry_after_date_a_day_off_is_waited_as_the_message_says():
    """A proxy's ``Date`` is right; the service behind it, a day ahead, dates its
    Retry-After by its own clock and says 3 s in words: devmon waits 3 s, not a day (and
    does not stop), and says what the header asked."""
    now = time.time()
    answers = [_rate_limited(formatdate(now + DAY_S + 3, usegmt=True),
                             "Too many requests: 200 per minute. Retry after 3 seconds.",
                             date=formatdate(now, usegmt=True)),
               (200, {}, SITES)]
    clock, waits = FakeClock(), []
    with hostile_server(answers) as (url, seen), _waits_client(url, clock, waits) as client:
        assert client.sites() == [{"uuid": "s1"}]
    assert len(seen) == 2
    assert [round(s, 1) for s, _ in waits] == [3.5], waits
    assert "Retry-After" in waits[0][1] and "3 s" in waits[0][1], waits


def test_a_retry_after_date_with_no_date_to_read_it_against_does_not_stop_the_sync():
    """No ``Date`` in any answer, a Retry-After a day ahead of devmon's clock and no wait in
    words: that may be the service's clock, not its wish; devmon waits a bounded time and
    asks again rather than stopping."""
    now = time.time()
    answers = [_rate_limited(formatdate(now + DAY_S + 2, usegmt=True), "Too many requests."),
               (200, {}, SITES)]
    clock, waits = FakeClock(), []
    with hostile_server(answers) as (url, seen), _waits_client(url, clock, waits) as client:
        assert client.sites() == [{"uuid": "s1"}]
    assert len(seen) == 2
    [(seconds, why)] = waits
    assert 1 <= seconds <= 120, waits
    assert "Retry-After" in why and "clock" in why, why


def test_a_retry_after_date_read_against_the_same_answers_date_is_kept():
    """The service's clock a day ahead, its Date and Retry-After by that clock: 3 s."""
    ahead = time.time() + DAY_S
    answers = [_rate_limited(formatdate(ahead + 3, usegmt=True), "Too many requests.",
                             date=formatdate(ahead, usegmt=True)), (200, {}, SITES)]
    clock, waits = FakeClock(), []
    with hostile_server(answers) as (url, _), _waits_client(url, clock, waits) as client:
        assert client.sites() == [{"uuid": "s1"}]
    assert [round(s, 1) for s, _ in waits] == [3.5], waits


def test_a_long_wait_both_clocks_agree_on_stops_and_says_what_was_asked():
    """Two hours, by the answer's own Date: a real wish; the stop names the header."""
    now = time.time()
    retry_after = formatdate(now + 7200, usegmt=True)
    answers = [_rate_limited(retry_after, "Maintenance.", date=formatdate(now, usegmt=True))]
    clock, waits = FakeClock(), []
    with hostile_server(answers) as (url, _), _waits_client(url, clock, waits) as client, \
            pytest.raises(RateLimitedError) as err:
        client.sites()
    assert waits == []
    assert f"Retry-After: {retry_after}" in str(err.value), str(err.value)
    assert "7200 s" in str(err.value), str(err.value)


# ============================================================ 13: a slow drip

@contextmanager
def drip_server(pattern: str, every_s: float = 0.2):
    """A loopback server whose n-th connection drips (``pattern[n] == "d"``: one byte every
    ``every_s`` from the status line on, until the client hangs up) or answers at once
    (``"o"``); the last letter repeats.  Yields (base URL, connections accepted)."""
    listener = socket.create_server(("127.0.0.1", 0))
    listener.settimeout(0.2)
    stop = threading.Event()
    accepted: list[str] = []
    answer = (b"HTTP/1.1 200 OK\r\nContent-Type: application/json\r\nConnection: close\r\n"
              b"Content-Length: %d\r\n\r\n" % len(SITES)) + SITES

    def serve(conn: socket.socket, kind: str) -> None:
        with conn:
            conn.settimeout(5)
            try:
                conn.recv(65536)
                if kind == "o":
                    conn.sendall(answer)
                    return
                for i in range(len(answer)):
                    if stop.wait(every_s):
                        return
                    conn.sendall(answer[i:i + 1])
            except OSError:
                return

    def accept_loop() -> None:
        while not stop.is_set():
            try:
                conn, _ = listener.accept()
            except (TimeoutError, OSError):
                continue
            kind = pattern[min(len(accepted), len(pattern) - 1)]
            accepted.append(kind)
            threading.Thread(target=serve, args=(conn, kind), daemon=True).start()

    thread = threading.Thread(target=accept_loop, daemon=True)
    thread.start()
    try:
        yield f"http://127.0.0.1:{listener.getsockname()[1]}/v1", accepted
    finally:
        stop.set()
        thread.join()
        listener.close()


SMALL_SLOW = {"slow_grace_s": 0.3, "slow_answers_to_stop": 2, "slow_stop_after_s": 0.0}
"""Small limits for a dripping service: an answer may lag for 0.3 s after its first byte,
and two too-slow answers in a row end the requests however quickly they were cut."""


def _drip_client(url: str, **options) -> ApiClient:
    return ApiClient(url, KEY, rate_limit_per_minute=0, max_retries=8,
                     backoff_base_s=0.01, backoff_max_s=0.01, **{**SMALL_SLOW, **options})


def test_two_too_slow_answers_in_a_row_end_the_requests_with_that_message():
    """Every answer drips: the second cut ends it (not the ninth), in words that say the
    service is too slow to use now; the first-byte allowance (10 s here) is not waited for."""
    with drip_server("d") as (url, accepted), \
            _drip_client(url, timeout_s=(5.0, 5.0)) as client, \
            pytest.raises(NetworkError) as err:
        client.sites()
    assert len(accepted) == 2, f"{len(accepted)} attempts"
    text = str(err.value)
    assert "too slowly" in text and "2 answers in a row" in text, text
    assert "fell below" in text, text  # cut by its rate after the grace, not at 10 s
    assert "try again later" in text.lower(), text


def test_a_whole_answer_between_slow_ones_starts_the_count_again():
    """Drip, answer, drip, answer: each request succeeds on its retry; none is stopped."""
    with drip_server("dodo") as (url, accepted), _drip_client(url) as client:
        assert client.sites() == [{"uuid": "s1"}]
        assert client.sites() == [{"uuid": "s1"}]
    assert accepted == ["d", "o", "d", "o"]


def test_a_sync_from_a_service_that_always_drips_ends_after_two_answers(tmp_path):
    """The reference server drips every answer: the sync ends after two, failed, with the
    message in its run record (not after nine attempts of each request)."""
    from devmon_sync.server import FaultConfig
    from devmon_sync.store import Mirror
    from devmon_sync.sync.engine import SyncEngine, SyncOptions

    db = tmp_path / "m.duckdb"
    faults = FaultConfig(drip_rate=1.0, drip_every_s=0.2)
    with start_server(size=TINY, faults=faults) as srv, \
            _drip_client(srv.base_url, timeout_s=(5.0, 5.0)) as client, \
            Mirror.open(db) as mirror, pytest.raises(NetworkError, match="too slowly"):
        SyncEngine(client, mirror, SyncOptions()).run()
    assert srv.app.faults.decided["drip"] == 2
    con = duckdb.connect(str(db), read_only=True)
    try:
        [(status, message)] = con.execute("SELECT status, message FROM sync_runs").fetchall()
    finally:
        con.close()
    assert status == "failed" and "2 answers in a row too slowly" in message, message

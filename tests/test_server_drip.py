"""The reference server's drip fault (issue 15): headers at once, then the body a few bytes
every ``drip_every_s`` seconds, until the client hangs up.

A drip is what hung `devmon sync` in the audit; the client cuts it at its overall deadline
(``devmon_sync/client/deadline.py``) and retries.  Here: the server really drips (on a raw
socket), stays responsive meanwhile and stops when the client closes; a client with small
timeouts gives up on a server that always drips, in bounded time and in plain words; and a
sync against a server that drips 30 % of its answers ends with the mirror a fault-free
server gives.
"""

from __future__ import annotations

import math
import socket
import threading
import time

import pytest
from support import KEY, Api, start_server
from support import snapshot, sync

from devmon_sync.client import ApiClient, NetworkError
from devmon_sync.client import deadline as deadline_module
from devmon_sync.server import FaultConfig, WorldSize
from devmon_sync.store import Mirror
from devmon_sync.sync.engine import SyncEngine, SyncOptions

TINY = WorldSize(sites=1, devices=4, days=5)


def _request_head(srv, path: str = "/sites") -> bytes:
    return (f"GET {srv.config.contract.prefix}{path} HTTP/1.1\r\nHost: 127.0.0.1\r\n"
            f"x-api-key: {KEY}\r\n\r\n").encode()


def _read_head(sock: socket.socket) -> tuple[bytes, bytes]:
    """The status line and headers, and whatever body bytes came with them."""
    got = b""
    while b"\r\n\r\n" not in got:
        piece = sock.recv(65536)
        assert piece, f"closed before the headers: {got!r}"
        got += piece
    head, _, rest = got.partition(b"\r\n\r\n")
    return head, rest


def _content_length(head: bytes) -> int:
    for line in head.split(b"\r\n")[1:]:
        name, _, value = line.partition(b":")
        if name.strip().lower() == b"content-length":
            return int(value)
    raise AssertionError(head)


def _drip_threads() -> int:
    return sum(1 for t in threading.enumerate() if "process_request_thread" in t.name)


def test_a_dripped_body_comes_in_pieces_over_time():
    with start_server() as honest:
        expected = Api(honest.base_url).get("/sites").content
    every_s, pieces = 0.2, 5
    step = math.ceil(len(expected) / pieces)
    faults = FaultConfig(drip_rate=1.0, drip_every_s=every_s, drip_bytes=step)
    with start_server(faults=faults) as srv, \
            socket.create_connection(("127.0.0.1", srv.port), timeout=10) as sock:
        t0 = time.monotonic()
        sock.sendall(_request_head(srv))
        head, body = _read_head(sock)
        assert head.startswith(b"HTTP/1.1 200"), head
        assert _content_length(head) == len(expected)
        while not body:
            body += sock.recv(65536)
        first = time.monotonic() - t0
        while len(body) < len(expected):
            piece = sock.recv(65536)
            assert piece, "closed mid-drip"
            body += piece
        whole = time.monotonic() - t0
        assert srv.app.faults.decided == {"drip": 1}
    assert body == expected  # a drip is slow, not different
    assert first < 1.0, f"first piece after {first:.2f} s"
    assert whole >= (pieces - 1) * every_s * 0.95, f"whole body after {whole:.2f} s"


def test_the_server_answers_others_while_dripping_and_stops_when_the_client_hangs_up():
    faults = FaultConfig(drip_rate=1.0, drip_every_s=0.1, drip_bytes=1)
    with start_server(faults=faults) as srv:
        before = _drip_threads()
        dripping = socket.create_connection(("127.0.0.1", srv.port), timeout=10)
        dripping.sendall(_request_head(srv))
        _read_head(dripping)
        assert _drip_threads() == before + 1
        t0 = time.monotonic()
        with socket.create_connection(("127.0.0.1", srv.port), timeout=10) as other:
            other.sendall(_request_head(srv, "/devices"))
            head, _ = _read_head(other)  # its headers come at once, the first drip goes on
            assert head.startswith(b"HTTP/1.1 200") and time.monotonic() - t0 < 2.0
        dripping.close()
        deadline = time.monotonic() + 5
        while _drip_threads() > before and time.monotonic() < deadline:
            time.sleep(0.05)
        assert _drip_threads() == before, "the server kept dripping to a closed socket"


def test_a_client_gives_up_on_a_server_that_always_drips_in_bounded_time():
    with start_server() as honest:
        length = len(Api(honest.base_url).get("/sites").content)
    faults = FaultConfig(drip_rate=1.0, drip_every_s=0.5)
    with start_server(faults=faults) as srv, \
            ApiClient(srv.base_url, KEY, rate_limit_per_minute=0, timeout_s=(1.0, 1.0),
                      max_retries=2, backoff_base_s=0.01, backoff_max_s=0.01) as client:
        started = time.monotonic()
        with pytest.raises(NetworkError) as err:
            client.sites()
        took = time.monotonic() - started
        attempts = srv.app.faults.decided["drip"]
    # each attempt: 2 s for the headers, then 2 s plus the length at 1 kB/s for the body
    bound = 3 * (2.0 + 2.0 + length / deadline_module.MIN_BYTES_PER_S) + 3
    assert attempts == 3, attempts
    assert took < bound, f"{took:.1f} s, more than {bound:.1f} s"
    assert "came too slowly" in str(err.value), str(err.value)


def test_a_sync_through_drips_gives_the_fault_free_mirror(tmp_path, monkeypatch):
    """30 % of answers drip; each is cut once it falls behind 1 kB/s after its grace (a
    dripped 100 kB answer is cut in seconds, not after the 100 s its length would allow),
    and asked again."""
    with start_server(size=TINY) as srv:
        clean = tmp_path / "clean.duckdb"
        assert sync(srv.base_url, clean).status == "ok"
    faults = FaultConfig(drip_rate=0.3, drip_every_s=0.5, seed=5)
    dripped = tmp_path / "dripped.duckdb"
    with start_server(size=TINY, faults=faults) as srv, \
            ApiClient(srv.base_url, KEY, rate_limit_per_minute=0, timeout_s=(1.0, 1.0),
                      max_retries=10, backoff_base_s=0.01, backoff_max_s=0.05) as client, \
            Mirror.open(dripped) as mirror:
        report = SyncEngine(client, mirror, SyncOptions()).run()
        drips = srv.app.faults.decided["drip"]
    assert report.status == "ok", report.problems
    assert drips >= 1
    assert snapshot(dripped) == snapshot(clean)

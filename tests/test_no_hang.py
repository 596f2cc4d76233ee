"""Issue 15, point 1: no hang, ever.

The audit's server sent one byte every 20 s and kept `devmon sync` waiting on GET /sites for
good: requests' timeout bounds each socket read, not the answer.  Here real loopback servers
drip their answers (headers or body, with or without Content-Length) faster than the read
timeout yet far slower than any answer should take; every attempt must end at its deadline
and be retried, and a slow but steady large answer must not be cut.
"""

from __future__ import annotations

import socket
import threading
import time
from contextlib import contextmanager

import pytest
from support import KEY

from devmon_sync.client import ApiClient, NetworkError
from devmon_sync.client import deadline as deadline_module

BODY = b'{"items": [{"uuid": "s1"}]}'


def _answer(content_length: bool) -> bytes:
    head = b"HTTP/1.1 200 OK\r\nContent-Type: application/json\r\n"
    if content_length:
        head += b"Content-Length: %d\r\n" % len(BODY)
    else:
        head += b"Connection: close\r\n"
    return head + b"\r\n" + BODY


@contextmanager
def drip_server(drip_headers: bool, content_length: bool, every_s: float = 0.3):
    """A loopback server answering every request one byte every ``every_s`` seconds."""
    listener = socket.create_server(("127.0.0.1", 0))
    listener.settimeout(0.2)
    stop = threading.Event()
    accepted = []

    def serve(conn: socket.socket) -> None:
        with conn:
            conn.settimeout(5)
            try:
                conn.recv(65536)  # the request
                answer = _answer(content_length)
                split = answer.index(b"\r\n\r\n") + 4
                fast, slow = (b"", answer) if drip_headers else (answer[:split], answer[split:])
                conn.sendall(fast)
                for i in range(len(slow)):
                    if stop.is_set():
                        return
                    conn.sendall(slow[i:i + 1])
                    time.sleep(every_s)
            except OSError:
                return

    def accept_loop() -> None:
        while not stop.is_set():
            try:
                conn, _ = listener.accept()
            except (TimeoutError, OSError):
                continue
            accepted.append(conn)
            threading.Thread(target=serve, args=(conn,), daemon=True).start()

    thread = threading.Thread(target=accept_loop, daemon=True)
    thread.start()
    try:
        yield f"http://127.0.0.1:{listener.getsockname()[1]}/v1", accepted
    finally:
        stop.set()
        thread.join()
        listener.close()


@pytest.mark.parametrize("drip_headers", [True, False], ids=["headers", "body"])
@pytest.mark.parametrize("content_length", [True, False], ids=["length", "no-length"])
def test_a_dripping_answer_ends_at_the_deadline_and_is_retried(drip_headers, content_length):
    """Each byte comes 0.3 s after the last, well within the 1 s read timeout; the answer
    (about 90 bytes: 27 s) must not be waited for beyond the 2 s deadline of an attempt."""
    with drip_server(drip_headers, content_length) as (url, accepted), \
            ApiClient(url, KEY, rate_limit_per_minute=0, timeout_s=(1.0, 1.0), max_retries=1,
                      backoff_base_s=0.01, backoff_max_s=0.01) as client:
        started = time.monotonic()
        with pytest.raises(NetworkError) as err:
            client.sites()
        took = time.monotonic() - started
    assert len(accepted) == 2, "the attempt was not retried"
    assert took < 2 * (2.0 + 1.0) + 2, f"{took:.1f} s: the deadline did not hold"
    assert "came too slowly" in str(err.value), str(err.value)
    assert "Traceback" not in str(err.value)


def test_a_slow_steady_large_answer_is_not_cut(monkeypatch):
    """The deadline grows with the answer's length: 90 bytes at 0.05 s a byte (4.5 s) passes
    with a 2 s first-byte allowance when the slowest rate waited for is 10 bytes a second."""
    monkeypatch.setattr(deadline_module, "MIN_BYTES_PER_S", 10.0)
    with drip_server(False, True, every_s=0.05) as (url, accepted), \
            ApiClient(url, KEY, rate_limit_per_minute=0, timeout_s=(1.0, 1.0),
                      max_retries=0) as client:
        assert client.sites() == [{"uuid": "s1"}]
    assert len(accepted) == 1


def test_an_honest_answer_leaves_no_watchdog_behind(server):
    """One watchdog thread per attempt, gone when the attempt ends."""
    before = {t.ident for t in threading.enumerate() if t.name == "devmon-deadline"}
    with ApiClient(server.base_url, KEY, rate_limit_per_minute=0) as client:
        for _ in range(5):
            assert client.sites()
    after = {t.ident for t in threading.enumerate() if t.name == "devmon-deadline"}
    assert after <= before


def _closed_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]  # closed again when this returns: connections are refused


def test_a_service_that_is_down_gets_one_short_line_per_wait(tmp_path):
    """Point 9: nine retries printed urllib3's connection errors (pool names, 'Max retries
    exceeded') before the final message.  Now: one line per wait, the details in the log."""
    import os
    import subprocess
    import sys

    from devmon_sync.logs import LOG_FILE
    from devmon_sync.paths import ENV_LOG_DIR

    env = {**os.environ, ENV_LOG_DIR: str(tmp_path / "logs")}
    r = subprocess.run([sys.executable, "-m", "devmon_sync", "sync", "--db",
                        str(tmp_path / "m.duckdb"), "--base-url",
                        f"http://127.0.0.1:{_closed_port()}/v1", "--api-key", KEY,
                        "--retries", "3"], capture_output=True, text=True, timeout=120, env=env)
    assert r.returncode == 2 and "Traceback" not in r.stderr
    waits = [line for line in r.stderr.splitlines() if "retry" in line and " of 3 in " in line]
    assert len(waits) == 3, r.stderr
    assert all("GET /sites: service unreachable (connection refused); retry" in w
               for w in waits), waits
    for library_words in ("Max retries exceeded", "HTTPConnectionPool", "_Noted", "urllib3",
                          "NewConnectionError"):
        assert library_words not in r.stderr, r.stderr
    assert r.stderr.strip().splitlines()[-1].startswith("devmon sync: error: GET /sites: no "
                                                        "usable answer")
    log = (tmp_path / "logs" / LOG_FILE).read_text()
    assert log.count("GET /sites failed: ConnectionError") == 3, log
    assert KEY not in log


def test_a_large_answer_that_drips_is_cut_after_its_grace_not_its_length():
    """Content-Length announces 1 MB (1,000 s at the slowest rate waited for) but the body
    drips: it has fallen behind 1 kB/s soon after the grace (the first-byte allowance)."""
    listener = socket.create_server(("127.0.0.1", 0))

    def serve() -> None:
        conn, _ = listener.accept()
        with conn:
            conn.recv(65536)
            conn.sendall(b"HTTP/1.1 200 OK\r\nContent-Type: application/json\r\n"
                         b"Content-Length: 1000000\r\n\r\n")
            try:
                for _ in range(200):
                    conn.sendall(b" ")
                    time.sleep(0.3)
            except OSError:
                return

    threading.Thread(target=serve, daemon=True).start()
    url = f"http://127.0.0.1:{listener.getsockname()[1]}/v1"
    try:
        with ApiClient(url, KEY, rate_limit_per_minute=0, timeout_s=(1.0, 1.0),
                       max_retries=0) as client:
            started = time.monotonic()
            with pytest.raises(NetworkError, match="came too slowly"):
                client.sites()
            took = time.monotonic() - started
    finally:
        listener.close()
    assert took < 2.0 + 2.0 + 3.0, f"{took:.1f} s: a drip of an announced 1 MB was waited for"

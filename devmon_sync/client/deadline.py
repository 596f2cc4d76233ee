"""An overall deadline for one HTTP attempt, however slowly the answer trickles in.

requests' ``timeout=(connect, read)`` bounds each socket read, not the answer: a server that
sends one byte every 20 s keeps a read waiting for ever (audit: `devmon sync` hung on GET
/sites).  Here every attempt gets a deadline; a watchdog thread shuts the attempt's socket
down when it passes, so the blocked read fails at once and the attempt is retried like any
dropped connection.  The deadline is scaled to the answer's size: the headers must come
within ``first_byte_s``, then the body may take ``first_byte_s`` more plus its length (from
Content-Length, else the bytes seen so far) at ``MIN_BYTES_PER_S``; and from ``grace_s``
after the answer's first byte (its status line: a drip may begin there) it must keep up that
rate on average: a 6 MB answer on a slow link is not cut, a drip is, in seconds whatever the
length it announced.  The bytes are counted as they come off the socket (the response's
file is wrapped), so headers that drip are seen too.

The socket is found by giving the session connections that note their socket, per thread,
once they have sent a request (urllib3's ``ConnectionCls``), so nothing else of requests
changes.  A request whose connecting hangs is bounded by the connect timeout already.
"""

from __future__ import annotations

import http.client
import io
import socket
import threading
import time
from collections.abc import Callable

from requests.adapters import HTTPAdapter
from urllib3.connection import HTTPConnection, HTTPSConnection
from urllib3.connectionpool import HTTPConnectionPool, HTTPSConnectionPool

MIN_BYTES_PER_S = 1000.0
"""Slowest body devmon waits for: 1 kB/s (a poor mobile link gives several times that)."""

_current = threading.local()


class Deadline:
    """The watchdog of one attempt: ``start``, ``body_started``, ``saw``, ``stop``."""

    def __init__(self, first_byte_s: float, monotonic: Callable[[], float] = time.monotonic,
                 grace_s: float | None = None):
        self.first_byte_s = first_byte_s
        self.grace_s = first_byte_s if grace_s is None else min(grace_s, first_byte_s)
        """How long an answer may lag behind ``MIN_BYTES_PER_S`` after its first byte."""
        self.fired = False
        self.why = ""
        """Why the watchdog cut the attempt, in words (empty while it has not)."""
        self.limit_s = first_byte_s
        self._monotonic = monotonic
        self._started = monotonic()
        self._at = self._started + first_byte_s
        self._sock: socket.socket | None = None
        self._body_from = 0.0
        self._first_byte_at: float | None = None
        self._received = 0
        self._wire = 0
        self._lock = threading.Lock()
        self._wake = threading.Event()
        self._thread = threading.Thread(target=self._watch, name="devmon-deadline", daemon=True)

    def __enter__(self) -> "Deadline":
        _current.deadline = self
        self._thread.start()
        return self

    def __exit__(self, *exc) -> None:
        _current.deadline = None
        with self._lock:
            self._at = None
        self._wake.set()
        self._thread.join()

    def body_started(self, length: int | None) -> None:
        """The headers came: the body may take ``first_byte_s`` more, plus its length (when
        the answer states it) at the slowest rate waited for; and ``grace_s`` after its first
        byte it must keep up that rate on average, so a large answer that drips is cut in
        seconds, not after the hours its length would allow."""
        self._body_from = self.elapsed_s()
        if self._first_byte_at is None:
            self._first_byte_at = self._body_from
        self._extend(length or 0)

    def saw(self, received: int) -> None:
        """``received`` body bytes so far: each earns its share of time (no Content-Length)."""
        self._received = received
        self._extend(received)

    def came(self, size: int) -> None:
        """``size`` more bytes of the answer came off the socket (headers included)."""
        if self._first_byte_at is None:
            self._first_byte_at = self.elapsed_s()
        self._wire += size

    @property
    def wire_bytes(self) -> int:
        """Bytes of the answer that came off the socket so far (headers included, before
        any decoding): what a bound on what one answer may cost counts first."""
        return self._wire

    def _too_slow(self) -> bool:
        """The answer has fallen behind the slowest rate waited for, after its grace time
        from its first byte."""
        if self._first_byte_at is None:
            return False
        late_s = self.elapsed_s() - self._first_byte_at - self.grace_s
        return late_s > 0 and max(self._wire, self._received) < MIN_BYTES_PER_S * late_s

    def elapsed_s(self) -> float:
        return self._monotonic() - self._started

    def _extend(self, size: int) -> None:
        with self._lock:
            if self._at is None or self.fired:
                return
            self.limit_s = max(self.limit_s, self._body_from + self.first_byte_s
                               + size / MIN_BYTES_PER_S)
            self._at = self._started + self.limit_s

    def _noted(self, sock: socket.socket) -> None:
        with self._lock:
            self._sock = sock

    def _watch(self) -> None:
        while True:
            with self._lock:
                at = self._at
            if at is None:
                return
            left = at - self._monotonic()
            if left <= 0 or self._too_slow():
                self.why = f"no whole answer within {self.elapsed_s():.0f} s" if left <= 0 \
                    else f"the answer fell below {MIN_BYTES_PER_S / 1000:g} kB/s"
                self._fire()
                return
            self._wake.wait(min(left, 1.0))

    def _fire(self) -> None:
        with self._lock:
            if self._at is None:
                return
            self.fired = True
            sock = self._sock
        if sock is not None:
            try:
                sock.shutdown(socket.SHUT_RDWR)  # wakes the blocked read in the other thread
            except OSError:
                pass


def _note(sock: socket.socket | None) -> None:
    deadline = getattr(_current, "deadline", None)
    if deadline is not None and sock is not None:
        deadline._noted(sock)


class _CountedBytes(io.RawIOBase):
    """The socket's reading end, telling the attempt's deadline of each piece it reads."""

    def __init__(self, raw: io.RawIOBase, deadline: Deadline) -> None:
        super().__init__()
        self._raw = raw
        self._deadline = deadline

    def readable(self) -> bool:
        return True

    def readinto(self, buffer) -> int | None:
        size = self._raw.readinto(buffer)
        if size:
            self._deadline.came(size)
        return size

    def close(self) -> None:
        self._raw.close()
        super().close()


class _CountedResponse(http.client.HTTPResponse):
    """http.client's response reading through ``_CountedBytes`` while a deadline runs."""

    def __init__(self, sock, *args, **kwargs) -> None:
        super().__init__(sock, *args, **kwargs)
        deadline = getattr(_current, "deadline", None)
        if deadline is not None:  # nothing is read yet: the buffer is empty
            self.fp = io.BufferedReader(_CountedBytes(self.fp.detach(), deadline))


class _NotedHTTPConnection(HTTPConnection):
    response_class = _CountedResponse

    def request(self, *args, **kwargs):  # noqa: D102 - urllib3's
        out = super().request(*args, **kwargs)
        _note(self.sock)  # connected by now; kept, as an answer that closes drops conn.sock
        return out


class _NotedHTTPSConnection(HTTPSConnection):
    response_class = _CountedResponse

    def request(self, *args, **kwargs):  # noqa: D102 - urllib3's
        out = super().request(*args, **kwargs)
        _note(self.sock)
        return out


class _NotedHTTPPool(HTTPConnectionPool):
    ConnectionCls = _NotedHTTPConnection


class _NotedHTTPSPool(HTTPSConnectionPool):
    ConnectionCls = _NotedHTTPSConnection


class DeadlineAdapter(HTTPAdapter):
    """requests' adapter whose connections let a ``Deadline`` find their socket."""

    def init_poolmanager(self, *args, **kwargs) -> None:
        super().init_poolmanager(*args, **kwargs)
        self.poolmanager.pool_classes_by_scheme = {"http": _NotedHTTPPool,
                                                   "https": _NotedHTTPSPool}

    def proxy_manager_for(self, proxy, **proxy_kwargs):
        manager = super().proxy_manager_for(proxy, **proxy_kwargs)
        manager.pool_classes_by_scheme = {"http": _NotedHTTPPool, "https": _NotedHTTPSPool}
        return manager

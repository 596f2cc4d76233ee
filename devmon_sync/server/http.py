"""The reference server's HTTP front: routing, API keys, rate limit and injected faults.

Standard library ``ThreadingHTTPServer`` on purpose: fault injection needs the raw socket (to
drop a connection, cut a body mid-stream or drip it), and the JSON encoding, not the HTTP
parsing, is what costs time.  Responses are HTTP/1.1 with Content-Length, so clients keep
connections alive.
"""

from __future__ import annotations

import dataclasses
import json
import logging
import re
import socket
import sys
import threading
import time
from collections import Counter, deque
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from importlib import resources
from urllib.parse import parse_qs, unquote, urlsplit

import numpy as np
import orjson

from devmon_sync import api_contract as contract
from devmon_sync.server import contracts, misbehave, noise, past
from devmon_sync.server.api import Access, ReadApi
from devmon_sync.server.clock import http_date
from devmon_sync.server.config import ServerConfig
from devmon_sync.server.contracts import Contract
from devmon_sync.server.requests_in import ApiError
from devmon_sync.server.world import build_world

log = logging.getLogger("devmon.server")

_ROUTES = [
    # matched after the contract's prefix (``/v1`` by default) is taken off the path
    ("GET", re.compile(r"^/sites$"), "sites"),
    ("GET", re.compile(r"^/devices$"), "devices"),
    ("GET", re.compile(r"^/devices/([^/]+)$"), "device"),
    ("GET", re.compile(r"^/device-groups$"), "device_groups"),
    ("GET", re.compile(r"^/device-groups/([^/]+)$"), "device_group"),
    ("GET", re.compile(r"^/sensors/([^/]+)$"), "sensor"),
    ("POST", re.compile(r"^/sensor-data$"), "sensor_data"),
    ("POST", re.compile(r"^/sensor-data/latest$"), "latest"),
    ("POST", re.compile(r"^/sensor-data/gnss$"), "gnss"),
]
OPENAPI_NAME = "/openapi.json"
MAX_BODY_BYTES = 1 << 20


class RateLimiter:
    """Sliding one-minute window of accepted requests, per key."""

    def __init__(self, per_minute: int):
        self.per_minute = per_minute
        self._seen: dict[str, deque] = {}
        self._lock = threading.Lock()

    def check(self, key: str) -> int | None:
        """Record a request; return None if allowed, else the whole seconds to wait."""
        if self.per_minute <= 0:
            return None
        now = time.monotonic()
        with self._lock:
            seen = self._seen.setdefault(key, deque())
            while seen and seen[0] <= now - contract.RATE_LIMIT_WINDOW_S:
                seen.popleft()
            if len(seen) >= self.per_minute:
                return max(1, int(np.ceil(seen[0] + contract.RATE_LIMIT_WINDOW_S - now)))
            seen.append(now)
            return None


class FaultPlan:
    """Seeded sequence of fault decisions, one per API request in arrival order."""

    KINDS = ("error", "drop", "truncate", "slow", "drip")  # drawn in this order

    def __init__(self, config):
        self.config = config
        self._count = 0
        self._lock = threading.Lock()
        self._key = noise.stream_key(config.seed, "faults")
        self.decided: Counter = Counter()
        """Faults decided so far, by kind (benchmarks and tests read it)."""

    def next(self) -> str | None:
        c = self.config
        if not c.any:
            return None
        with self._lock:
            n = self._count
            self._count += 1
        u = float(noise.uniform(self._key, np.array([n]))[0])
        # drip last: a plan without drips draws the others exactly as before it existed
        for name, rate in zip(self.KINDS, (c.error_rate, c.drop_rate, c.truncate_rate,
                                           c.slow_rate, c.drip_rate)):
            if u < rate:
                with self._lock:
                    self.decided[name] += 1
                return name
            u -= rate
        return None


class _Handler(BaseHTTPRequestHandler):
    protocol_version = "HTTP/1.1"
    disable_nagle_algorithm = True  # headers and body leave at once, no 40 ms delayed-ACK stall
    server_version = "devmon-reference/1.0"
    server: "_Server"

    def date_time_string(self, timestamp=None) -> str:
        """The ``Date`` header by the service's own clock (``ServerConfig.service_clock``), not
        this machine's: the one its answer computed with when it gave one (a Retry-After
        date is read against it)."""
        if timestamp is not None:
            return super().date_time_string(timestamp)
        return getattr(self, "_date", None) or http_date(self.server.app.service_now())

    def log_message(self, fmt, *args):  # keys are in headers, never in this line
        if self.server.app.config.log_requests:
            log.info("%s %s", self.address_string(), fmt % args)

    def do_GET(self):
        self._dispatch("GET")

    def do_POST(self):
        self._dispatch("POST")

    def do_PUT(self):
        self._dispatch("PUT")

    def do_DELETE(self):
        self._dispatch("DELETE")

    def do_PATCH(self):
        self._dispatch("PATCH")

    def do_OPTIONS(self):
        self._dispatch("OPTIONS")

    def do_TRACE(self):
        self._dispatch("TRACE")

    def do_HEAD(self):
        self._dispatch("HEAD")

    def _dispatch(self, method: str) -> None:
        # Read the whole body first, whatever happens next, so a kept-alive connection never
        # sees the rest of a refused request as the start of the next one.
        try:
            raw = self._read_body()
        except ApiError as err:
            self.close_connection = True
            self._send(err.status, _json({"message": err.message}), {"Connection": "close"})
            return
        try:
            status, payload, extra = self.server.app.handle(method, self.path, self.headers, raw)
        except _Drop:
            self.close_connection = True
            try:
                self.connection.shutdown(socket.SHUT_RDWR)
            except OSError:
                pass
            return
        self._send(status, payload, extra)

    def _read_body(self) -> bytes:
        length = self.headers.get("Content-Length")
        if length is None:
            return b""
        if not length.isdigit() or int(length) > MAX_BODY_BYTES:
            raise ApiError(400, f"Request body too large or malformed length; the limit is "
                                f"{MAX_BODY_BYTES} bytes.")
        return self.rfile.read(int(length))

    def _send(self, status: int, payload: bytes, extra: dict) -> None:
        truncate = extra.pop("_truncate", False)
        drip = extra.pop("_drip", False)
        self._date = extra.pop("Date", None)
        self.send_response(status)
        self.send_header("Content-Type", "application/json")
        self.send_header("Content-Length", str(len(payload)))
        for k, v in extra.items():
            self.send_header(k, v)
        if truncate:
            self.send_header("Connection", "close")
        self.end_headers()
        self._date = None
        if self.command == "HEAD":
            return
        if truncate:
            self.wfile.write(payload[: len(payload) // 2])
            self.wfile.flush()
            self.close_connection = True
            self.connection.shutdown(socket.SHUT_RDWR)
            return
        if drip:
            self._drip(payload)
            return
        self.wfile.write(payload)

    def _drip(self, payload: bytes) -> None:
        """Injected fault: the body a few bytes every ``drip_every_s`` seconds (the headers
        are out already), until it is all sent, the client hangs up or the server stops."""
        faults, stopping = self.server.app.config.faults, self.server.app.stopping
        step = max(1, faults.drip_bytes)
        try:
            for at in range(0, len(payload), step):
                if at and stopping.wait(faults.drip_every_s):
                    break
                self.wfile.write(payload[at:at + step])
            else:
                return  # a patient client got the whole answer; the connection stays usable
        except OSError:  # BrokenPipe, ConnectionReset: the client gave up, as it should
            pass
        self.close_connection = True
        try:
            self.connection.shutdown(socket.SHUT_RDWR)
        except OSError:
            pass


class _Drop(Exception):
    """Injected fault: close the connection without an answer."""


def _json(obj) -> bytes:
    return orjson.dumps(obj)


class App:
    """Everything between a parsed HTTP request and its status and body."""

    def __init__(self, config: ServerConfig):
        self.config = config
        self.now = config.clock()
        self.service_now = config.service_clock()
        self.world = build_world(config.seed, config.anchor_s(), config.size, self.now(),
                                 origin_s=config.origin_s())
        if config.contract.past_changes_h:  # groups and sensors as of the start (past.py)
            self.world = past.as_of(self.world, config.contract, self.now())
        self.api = ReadApi(self.world, config.limits, config.contract)
        self.limiter = RateLimiter(config.rate_limit_per_minute)
        self.faults = FaultPlan(config.faults)
        self.realised = config.contract
        misbehaviour = _with_silent_caps(config.misbehaviour, config.contract)
        # None for an honest server, decided once: its answers never go near misbehave.
        self.misbehaviour = misbehaviour if misbehaviour.active else None
        self.keys = {k: Access(sites) for k, sites in config.api_keys.items()}
        self.status_counts: Counter = Counter()
        self._count_lock = threading.Lock()
        self.stopping = threading.Event()  # set by ReferenceServer.stop: drips end

    def handle(self, method: str, target: str, headers, raw: bytes) -> tuple[int, bytes, dict]:
        """Answer one request, counting answers by status (tests read ``status_counts``)."""
        try:
            status, payload, extra = self._handle(method, target, headers, raw)
        except _Drop:
            self._count("dropped")
            raise
        self._count(status)
        return status, payload, extra

    def _count(self, status) -> None:
        with self._count_lock:
            self.status_counts[status] += 1

    def _handle(self, method: str, target: str, headers, raw: bytes) -> tuple[int, bytes, dict]:
        url = urlsplit(contracts.request_uuids(self.realised, target.encode()).decode())
        raw = contracts.request_uuids(self.realised, raw)
        path = unquote(url.path).rstrip("/") or "/"
        try:
            if path == self.realised.prefix + OPENAPI_NAME and method == "GET":
                return 200, openapi_document(), {}
            name, args = self._route(method, path)
            access, key = self._authenticate(headers)
            wait = self.limiter.check(key)
            if wait is not None:
                raise self.realised.rate_limited(self.limiter.per_minute, wait)
            fault = self.faults.next()
            if fault == "drop":
                raise _Drop()
            if fault == "error":
                raise ApiError(500, "Internal server error (injected fault); retry later.")
            if fault == "slow":
                time.sleep(self.config.faults.slow_s)
            if method == "POST":
                asked = self._body(raw)
                result = getattr(self.api, name)(asked, access, self.now())
            else:
                asked = parse_qs(url.query, keep_blank_values=True)
                result = getattr(self.api, name)(*args, asked, access, self.now())
            extra = {"_truncate": True} if fault == "truncate" else \
                {"_drip": True} if fault == "drip" else {}
            extra.update(contracts.link_header(result, headers.get("Host"), url.path))
            result = contracts.with_migration(self.realised, result, self.world.anchor_s)
            payload = _json(result) if self.misbehaviour is None else \
                misbehave.apply(self.misbehaviour, name, asked, result)
            return 200, contracts.answer_uuids(self.realised, payload), extra
        except ApiError as err:
            extra = self._retry_after(err)
            return err.status, _json({"message": err.message}), extra
        except _Drop:
            raise
        except Exception:  # a bug: say so as the API would, and keep serving
            log.exception("unexpected error serving %s %s", method, path)
            return 500, _json({"message": "Internal server error."}), {}

    def _retry_after(self, err: ApiError) -> dict:
        """The Retry-After of a refusal that asks for a wait: whole seconds, or (a contract's
        choice; RFC 9110 allows both) the HTTP date the wait ends by the service's own clock,
        with the ``Date`` of the same instant."""
        if not err.retry_after_s:
            return {}
        if not self.realised.retry_after_date:
            return {"Retry-After": str(err.retry_after_s)}
        at = self.service_now()
        return {"Date": http_date(at), "Retry-After": http_date(at + err.retry_after_s)}

    def _route(self, method: str, path: str) -> tuple[str, tuple]:
        allowed, prefix = [], self.realised.prefix
        inner = path[len(prefix):] if path.startswith(prefix + "/") else ""
        for m, pattern, name in _ROUTES:
            match = pattern.match(inner)
            if match:
                if m == method:
                    return name, match.groups()
                allowed.append(m)
        if allowed:
            raise ApiError(405, f"{method} is not supported on {path}; use {allowed[0]}.")
        where = f"under {prefix}" if prefix else "at the root"
        raise ApiError(404, f"No endpoint {path}. The API lives {where}; "
                            f"see {prefix + OPENAPI_NAME}.")

    def _authenticate(self, headers) -> tuple[Access, str]:
        key = headers.get(contract.API_KEY_HEADER)  # header lookup ignores case
        if not key:
            raise ApiError(401, f"Missing API key: send it in the {contract.API_KEY_HEADER} "
                                f"header.")
        access = self.keys.get(key)
        if access is None:
            raise ApiError(401, "API key not accepted: check the key or ask for a new one.")
        return access, key

    @staticmethod
    def _body(raw: bytes):
        if not raw.strip():
            return None
        try:
            return json.loads(raw)
        except (ValueError, UnicodeDecodeError):
            raise ApiError(400, "The request body is not valid JSON.") from None
        except RecursionError:
            raise ApiError(400, "The request body is nested too deeply.") from None


def _with_silent_caps(m: misbehave.Misbehaviour, c: Contract) -> misbehave.Misbehaviour:
    """The misbehaviour asked for, plus the caps a contract that truncates silently adds."""
    caps = {name: value for name, value in (("cap_points", c.silent_cap_points),
                                            ("cap_epochs", c.silent_cap_epochs)) if value}
    return dataclasses.replace(m, **caps) if caps else m


def openapi_document() -> bytes:
    return resources.files("devmon_sync.server").joinpath("openapi.json").read_bytes()


class _Server(ThreadingHTTPServer):
    daemon_threads = True
    allow_reuse_address = True
    app: App

    def handle_error(self, request, client_address) -> None:
        """A client that went away mid-answer (killed, timed out) is no server error: no
        traceback on the console for it; anything else is still printed."""
        if isinstance(sys.exc_info()[1], (BrokenPipeError, ConnectionResetError)):
            return
        super().handle_error(request, client_address)


class _Server6(_Server):
    address_family = socket.AF_INET6


class ReferenceServer:
    """The reference Device Monitoring API on a local port.

    ``with ReferenceServer(config) as srv: requests.get(srv.base_url + "/sites", ...)``
    """

    def __init__(self, config: ServerConfig):
        self.config = config
        self.app = App(config)
        server_class = _Server6 if ":" in config.host else _Server
        self._httpd = server_class((config.host, config.port), _Handler)
        self._httpd.app = self.app
        self._thread: threading.Thread | None = None

    @property
    def port(self) -> int:
        return self._httpd.server_address[1]

    @property
    def base_url(self) -> str:
        host = self.config.host
        host = f"[{host}]" if ":" in host else host
        return f"http://{host}:{self.port}{self.config.contract.prefix}"

    def start(self) -> "ReferenceServer":
        """Serve on a background thread (idempotent: a started server is left as it is)."""
        if self._thread is not None:
            return self
        self._thread = threading.Thread(target=self._httpd.serve_forever, args=(0.05,),
                                        name="devmon-serve", daemon=True)
        self._thread.start()
        return self

    def serve_forever(self) -> None:
        self._httpd.serve_forever()

    def stop(self) -> None:
        self.app.stopping.set()
        self._httpd.shutdown()
        self._httpd.server_close()
        if self._thread:
            self._thread.join(timeout=5)
            self._thread = None

    def __enter__(self) -> "ReferenceServer":
        return self.start()

    def __exit__(self, *exc) -> None:
        self.stop()

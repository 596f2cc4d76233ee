"""Small loopback HTTP stand-ins for tests that need answers no reference server gives."""

from __future__ import annotations

import json
import threading
from collections.abc import Callable
from contextlib import contextmanager
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Self

import orjson
import requests

from devmon_sync import api_contract as contract


class FakeClock:
    """A monotonic clock that only sleeping advances; records every sleep."""

    def __init__(self) -> None:
        self.now = 1000.0
        self.sleeps: list[float] = []

    def monotonic(self) -> float:
        return self.now

    def sleep(self, seconds: float) -> None:
        self.sleeps.append(seconds)
        self.now += seconds


@contextmanager
def stub(answers: list[tuple[int, dict, dict | bytes]], date: bool = True):
    """A loopback HTTP server answering (status, headers, body) in turn, the last repeated
    (a body is JSON-encoded, or sent as given when bytes); records the request headers.
    ``date=False``: no ``Date`` (nor ``Server``) of its own: the headers are exactly what a
    test gives."""
    seen: list[dict] = []

    class Handler(BaseHTTPRequestHandler):
        protocol_version = "HTTP/1.1"

        def do_POST(self):
            length = int(self.headers.get("Content-Length") or 0)
            self.rfile.read(length)
            self.do_GET()

        def do_GET(self):
            seen.append(dict(self.headers))
            status, headers, body = answers[min(len(seen), len(answers)) - 1]
            payload = body if isinstance(body, bytes) else json.dumps(body).encode()
            if date:
                self.send_response(status)
            else:
                self.send_response_only(status)
            for k, v in {"Content-Type": "application/json", **headers}.items():
                self.send_header(k, v)
            self.send_header("Content-Length", str(len(payload)))
            self.end_headers()
            self.wfile.write(payload)

        def log_message(self, *args):
            pass

    httpd = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
    httpd.daemon_threads = True
    thread = threading.Thread(target=httpd.serve_forever, daemon=True)
    thread.start()
    try:
        yield f"http://127.0.0.1:{httpd.server_address[1]}/v1", seen
    finally:
        httpd.shutdown()
        httpd.server_close()


Refusal = Callable[[str, str, object], "tuple[int, dict] | None"]
Mutation = Callable[[str, str, object], None]


class LoopbackProxy:
    """A loopback HTTP server in a thread whose GETs and POSTs go to ``self._handle(handler,
    method)``; ``base_url`` ends in the API's prefix, as the service's does.  Subclasses
    forward to the reference server their own way."""

    def __init__(self) -> None:
        proxy = self

        class Handler(BaseHTTPRequestHandler):
            protocol_version = "HTTP/1.1"

            def do_GET(self):
                proxy._handle(self, "GET")

            def do_POST(self):
                proxy._handle(self, "POST")

            def log_message(self, *args):
                pass

        self._httpd = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self._httpd.daemon_threads = True
        self._thread = threading.Thread(target=self._httpd.serve_forever, daemon=True)

    @property
    def base_url(self) -> str:
        return f"http://127.0.0.1:{self._httpd.server_address[1]}{contract.API_PREFIX}"

    def __enter__(self) -> Self:
        self._thread.start()
        return self

    def __exit__(self, *exc) -> None:
        self._httpd.shutdown()
        self._httpd.server_close()

    def _handle(self, h: BaseHTTPRequestHandler, method: str) -> None:
        raise NotImplementedError


class MutatingProxy(LoopbackProxy):
    """A loopback HTTP proxy in a thread: forwards every request to ``upstream`` (the reference
    server's base URL, ending in /v1) with its x-api-key header and body, then may

    - answer itself: ``refuse(method, path, body) -> (status, json) | None``;
    - rewrite a 200 JSON answer in place: ``mutate(method, path, payload)``.

    ``sent`` keeps the rewritten payloads by "METHOD path", so tests can compare what the sync
    was given with what it stored.
    """

    def __init__(self, upstream: str, mutate: Mutation | None = None,
                 refuse: Refusal | None = None):
        self.upstream_root = upstream[: -len(contract.API_PREFIX)]
        self.mutate = mutate
        self.refuse = refuse
        self.sent: dict[str, list] = {}
        self.requests: list[tuple[str, str, object, int]] = []
        self._lock = threading.Lock()
        self._local = threading.local()
        super().__init__()

    def _session(self) -> requests.Session:
        if not hasattr(self._local, "session"):
            self._local.session = requests.Session()
            self._local.session.trust_env = False
        return self._local.session

    def _handle(self, h: BaseHTTPRequestHandler, method: str) -> None:
        length = int(h.headers.get("Content-Length") or 0)
        raw_body = h.rfile.read(length) if length else None
        path = h.path.split("?", 1)[0]
        rel = path.removeprefix(contract.API_PREFIX)
        try:
            body = orjson.loads(raw_body) if raw_body else None
        except orjson.JSONDecodeError:
            body = None
        refused = self.refuse(method, rel, body) if self.refuse else None
        if refused is not None:
            status, payload = refused
            self._reply(h, status, orjson.dumps(payload), "application/json", None)
            with self._lock:
                self.requests.append((method, rel, body, status))
            return
        headers = {k: v for k, v in h.headers.items()
                   if k.lower() in (contract.API_KEY_HEADER, "content-type", "accept")}
        upstream = self._session().request(method, self.upstream_root + h.path,
                                           data=raw_body, headers=headers, timeout=120,
                                           allow_redirects=False)
        content = upstream.content
        ctype = upstream.headers.get("Content-Type", "application/json")
        if upstream.status_code == 200 and self.mutate is not None:
            payload = orjson.loads(content)
            self.mutate(method, rel, payload)
            with self._lock:
                self.sent.setdefault(f"{method} {rel}", []).append(payload)
            content = orjson.dumps(payload)
        with self._lock:
            self.requests.append((method, rel, body, upstream.status_code))
        self._reply(h, upstream.status_code, content, ctype, upstream.headers.get("Retry-After"))

    @staticmethod
    def _reply(h: BaseHTTPRequestHandler, status: int, content: bytes, ctype: str,
               retry_after: str | None) -> None:
        h.send_response(status)
        h.send_header("Content-Type", ctype)
        h.send_header("Content-Length", str(len(content)))
        if retry_after:
            h.send_header("Retry-After", retry_after)
        h.end_headers()
        h.wfile.write(content)

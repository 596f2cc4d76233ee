"""The Device Monitoring API client: the only module of devmon that speaks HTTP.

One ``ApiClient`` holds one ``requests.Session`` (kept-alive connections, the key header set
once) and turns every way a request can go wrong into one exception hierarchy rooted at
``ApiError``, each message naming the request and what to do about it.

Why it is built this way:

- The service allows 200 (spec section 8) requests per minute and a mirror
  sync makes thousands, so the client paces itself with a sliding-window limiter instead of
  discovering the limit by being refused.  When the service (or a proxy) still asks for a wait,
  in a ``Retry-After`` header or in its message, the client waits exactly that long.
- Every endpoint is a read, the three POSTs included (the body only carries the query), so
  every request may be retried safely: on dropped connections, timeouts, bodies cut short and
  5xx answers, with exponential backoff and full jitter so that many clients do not retry in
  step.
- Waits are reported through ``on_wait`` before they happen, so a progress bar can say why
  nothing moves, and ``sleep``/``monotonic`` are injectable so tests need not really wait.
- The API key lives only in the session's headers.  It is never formatted into a message, a
  log line or a repr, and any text that comes back from the server is scrubbed of it too.
  Redirects are not followed: requests would resend the custom key header to whatever host a
  redirect names.
"""

from __future__ import annotations

import ipaddress
import json
import logging
import random
import re
import socket
import threading
import time
import urllib.parse
from collections.abc import Callable, Iterator, Mapping, Sequence
from dataclasses import dataclass
from datetime import UTC, datetime
from email.utils import parsedate_to_datetime
from typing import Any
from urllib.parse import quote, urlsplit, urlunsplit

import orjson
import requests
import urllib3

from devmon_sync import __version__
from devmon_sync import service_profile as assumed
from devmon_sync.client import refusals
from devmon_sync.client.deadline import Deadline, DeadlineAdapter
from devmon_sync.client.paging import PageWalk, PagingError
from devmon_sync.service_profile import ListPaging

log = logging.getLogger("devmon.client")


@dataclass(frozen=True)
class _Answer:
    """One HTTP answer with its whole body (what the rest of the client looks at)."""

    status_code: int
    headers: Mapping[str, str]
    content: bytes


SERVER_WAIT_MARGIN_S = 0.5
"""Added to a wait the server asks for: its count is rounded and our clocks differ a little."""
MAX_SERVER_WAIT_S = 15 * 60.0
"""Longest single wait the client accepts from the server before giving up and saying so."""
LIMITER_MARGIN_S = 0.01
"""Added to client-side limiter waits so a slot is surely free when the request leaves."""
_RETRYABLE_4XX = (408, 429)  # Request Timeout, Too Many Requests (RFC 6585)
MIN_PACE_PER_MINUTE = 10
"""The slowest pace devmon lowers itself to after rate-limit answers (requests per minute)."""
_KEY_PLACEHOLDER = "<api key>"
_MIN_REDACTED_KEY_LEN = 4  # shorter "keys" occur in ordinary text; scrubbing them garbles it

# What makes an attempt worth repeating: the network, not the request, was at fault.
# SSLError is a ConnectionError but is excluded before this tuple is consulted (see _attempt).
_TRANSIENT = (
    requests.exceptions.ConnectionError,
    requests.exceptions.Timeout,
    requests.exceptions.ChunkedEncodingError,
    requests.exceptions.ContentDecodingError,
)


# ---------------------------------------------------------------------------- errors


class ApiError(Exception):
    """Any failure of a request to the Device Monitoring API.

    ``status`` is the HTTP status (None when no answer came), ``method`` and ``path`` name the
    request (``path`` relative to the base URL, without the query), ``server_message`` is the
    service's own ``message`` (scrubbed of the API key), if any.
    """

    def __init__(self, message: str, *, status: int | None = None, method: str | None = None,
                 path: str | None = None, server_message: str | None = None):
        super().__init__(message)
        self.status = status
        self.method = method
        self.path = path
        self.server_message = server_message


class AuthError(ApiError):
    """401: the key is missing, malformed or not accepted."""


class ForbiddenError(ApiError):
    """403: the key is valid but may not see the resource."""


class NotFoundError(ApiError):
    """404: no such resource or endpoint."""


class BadRequestError(ApiError):
    """400: the service refused the request as asked; its message says why."""


class RequestTooLargeError(BadRequestError):
    """A refusal because the answer would be too large (too many points or too long a date
    range), recognised by its words (``devmon_sync.client.refusals``) with status 400, 413 or 422.

    Not a mistake in the request's form: the caller should split it (halve its time window).
    ``too_large`` says what was too large and the limit the message stated, if any.
    """

    def __init__(self, message: str, *, too_large: refusals.TooLarge, **kw):
        super().__init__(message, **kw)
        self.too_large = too_large


class RateLimitedError(ApiError):
    """Still asked to wait (429, or any status whose message asks for a wait) after the
    bounded number of waits, or asked to wait longer than devmon waits unattended."""


class ServiceUnavailableError(ApiError):
    """5xx answers (or unreadable 200 bodies) on every attempt."""


class NetworkError(ApiError):
    """No usable answer on any attempt: connection refused or dropped, timeouts, cut bodies."""


class InsecureUrlError(ApiError):
    """A plain-http base URL to a host other than loopback: the key would travel in clear."""


# ---------------------------------------------------------------------------- rate limiting


class _Slot:
    """One request's place in the limiter window; ``t`` is when it finished (inf: in flight)."""

    __slots__ = ("t",)

    def __init__(self) -> None:
        self.t = float("inf")


class SlidingWindowLimiter:
    """At most ``limit`` requests in any ``window_s`` seconds, counting every attempt.

    A request is stamped with the time its answer (or failure) arrived, not the time it left:
    the server recorded it somewhere in between, so counting from the later instant guarantees
    the server's window has freed the slot too when ours has.  In-flight requests hold a slot.
    """

    def __init__(self, limit: int, window_s: float | None = None, *,
                 monotonic: Callable[[], float] = time.monotonic):
        self.limit = limit
        self.window_s = assumed.RATE_LIMIT_WINDOW_S if window_s is None else window_s
        self._monotonic = monotonic
        self._slots: list[_Slot] = []
        self._lock = threading.Lock()

    @property
    def enabled(self) -> bool:
        return self.limit > 0

    def try_acquire(self) -> tuple[_Slot | None, float]:
        """Take a slot now, or return (None, seconds until one frees)."""
        with self._lock:
            now = self._monotonic()
            self._slots = [s for s in self._slots if s.t > now - self.window_s]
            if len(self._slots) < self.limit:
                slot = _Slot()
                self._slots.append(slot)
                return slot, 0.0
            finished = [s.t for s in self._slots if s.t != float("inf")]
            if not finished:  # every slot is in flight on other threads: look again shortly
                return None, 0.05
            return None, max(min(finished) + self.window_s - now, 0.0) + LIMITER_MARGIN_S

    def least_seconds_for(self, requests: int) -> float:
        """The least time the limit allows ``requests`` more requests to take: the slots free
        now cost nothing, every further ``limit`` of them one more window."""
        if not self.enabled:
            return 0.0
        with self._lock:
            now = self._monotonic()
            free = self.limit - sum(1 for s in self._slots if s.t > now - self.window_s)
        return max(0, requests - free) / self.limit * self.window_s

    def release(self, slot: _Slot | None) -> None:
        """Stamp a slot with the time its request finished."""
        if slot is not None:
            with self._lock:
                slot.t = self._monotonic()


# ---------------------------------------------------------------------------- the client


class _Retry(Exception):
    """Internal: this attempt failed in a way worth repeating; ``final`` is raised at the end."""

    def __init__(self, reason: str, final: ApiError, detail: str | None = None):
        super().__init__(reason)
        self.reason = reason
        """In a person's words ("connection refused"): shown on every wait."""
        self.detail = detail or reason
        """The library's words, for the sync log only."""
        self.final = final


class ApiClient:
    """A paced, retrying, typed client of the Device Monitoring read API (spec section 4).

    ``base_url`` may be given with or without ``/v1`` and a trailing slash: the spec's
    descriptions differ on whether paths carry the prefix, so the first request is sent to the
    address as given and, if nothing answers there as the API would, once more with ``/v1``
    added (or taken off); the address that answered is kept in ``base_url`` (see
    ``locate``).  Plain ``http://``
    is accepted only for loopback addresses unless ``allow_insecure`` is set.  ``timeout_s`` is
    (connect, read) seconds for each attempt.  ``max_retries`` bounds the repeats after a
    failed attempt; waits the server asks for are bounded separately by ``max_server_waits``.
    ``on_wait(seconds, reason)`` is called before every wait.  Use it as a context manager or
    call ``close()``.
    """

    def __init__(self, base_url: str, api_key: str, *,
                 rate_limit_per_minute: int = assumed.RATE_LIMIT_PER_MINUTE,
                 timeout_s: tuple[float, float] = (10.0, 120.0), max_retries: int = 8,
                 backoff_base_s: float = 0.5, backoff_max_s: float = 60.0,
                 allow_insecure: bool = False,
                 on_wait: Callable[[float, str], None] | None = None,
                 sleep: Callable[[float], None] = time.sleep,
                 monotonic: Callable[[], float] = time.monotonic,
                 max_server_waits: int = 5):
        self.base_given = normalise_base_url(base_url, allow_insecure)
        """The address as the user gave it (what a mirror knows the service by)."""
        self.base_url = self.base_given
        """Where the API answers: the given address, or the other form once located."""
        self.located = False
        """True once an answer proved the API answers at ``base_url``."""
        self.list_paging = ListPaging()
        self.refused_options: set[tuple[str, str]] = set()
        """(list path, query parameter) the service refused as unknown: never sent again."""
        self.page_size: int | None = None
        """Items to ask for per list page (None: devmon's default, ``PAGE_SIZE_MAX``)."""
        """What is known of how the service pages lists (the stored service profile's; each
        walk leaves what it learned here)."""
        self._key = _checked_key(api_key)
        self.rate_limit_per_minute = max(0, rate_limit_per_minute)
        self.timeout_s = timeout_s
        self.max_retries = max(0, max_retries)
        self.backoff_base_s = backoff_base_s
        self.backoff_max_s = backoff_max_s
        self.max_server_waits = max(0, max_server_waits)
        self.on_wait = on_wait
        self.requests_sent = 0
        self.rate_limit_answers: list[tuple[int, str]] = []
        """(status, message) of each answer that asked for a wait (a rate limit, whatever its
        status): what the service profile learns its rate-limit wording from."""
        self._sleep = sleep
        self._monotonic = monotonic
        self._rng = random.Random()
        self._count_lock = threading.Lock()
        self._limiter = SlidingWindowLimiter(self.rate_limit_per_minute, monotonic=monotonic)
        self._session = requests.Session()
        self._session.headers.update({
            assumed.API_KEY_HEADER: self._key,
            "Accept": "application/json",
            "User-Agent": f"devmon/{__version__}",
        })
        for scheme in ("http://", "https://"):  # every attempt under an overall deadline
            self._session.mount(scheme, DeadlineAdapter())
        if _clear_text_loopback(self.base_url):
            # An HTTP proxy from the environment would carry the key in clear off the machine
            # (and could not reach our loopback anyway): talk to loopback directly.
            self._session.trust_env = False

    def secrets(self) -> list[str]:
        """What a log must never show (the API key), for a redacting log filter."""
        return [self._key]

    def __repr__(self) -> str:
        return (f"ApiClient(base_url={self.base_url!r}, "
                f"rate_limit_per_minute={self.rate_limit_per_minute}, "
                f"requests_sent={self.requests_sent})")

    def locate(self, api_url: str) -> None:
        """Use ``api_url`` (a form of the given address a service profile remembers) as
        where the API answers, without asking again."""
        if api_url in (self.base_given, *_other_forms(self.base_given)):
            self.base_url, self.located = api_url, True

    def least_seconds_for(self, requests: int) -> float:
        """The least time the rate limit lets ``requests`` more requests take (for ETAs)."""
        return self._limiter.least_seconds_for(requests)

    # -- lifecycle

    def close(self) -> None:
        """Close the pooled connections."""
        self._session.close()

    def __enter__(self) -> ApiClient:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    # -- raw verbs

    def get(self, path: str, params: dict | None = None) -> Any:
        """GET ``base_url + path`` and return the parsed JSON answer.

        Boolean parameter values become ``true``/``false``, lists repeat the key and None
        values are left out (the query conventions devmon assumes, ``service_profile``).
        """
        return self._request("GET", path, params=_query(params), body=None)

    def post(self, path: str, body: dict, decoder: Callable[[bytes], Any] | None = None) -> Any:
        """POST a JSON body to ``base_url + path`` and return the parsed JSON answer.

        ``decoder`` parses a successful answer's bytes instead of orjson (the sync engine
        decodes large data answers straight into typed columns); it raises ValueError for a
        body it cannot read, which is retried like a truncated one.
        """
        return self._request("POST", path, params=None, body=orjson.dumps(body), decoder=decoder)

    # -- typed helpers (spec section 4)

    def sites(self, include_devices: bool = False, include_sensors: bool = False,
              uuids: Sequence[str] | None = None) -> list[dict]:
        """GET /sites; long ``uuids`` lists are sent in chunks the service accepts."""
        params = {"includeDevices": include_devices, "includeSensors": include_sensors}
        return [item for chunk in _chunks(uuids)
                for item in self._items("/sites", {**params, "uuids": chunk})]

    def devices(self, *, include_sensors: bool = True, include_inactive: bool = True,
                include_formulas: bool = True, include_internal: bool = True,
                site_uuid: str | None = None, group_uuid: str | None = None,
                serial_numbers: Sequence[str] | None = None) -> list[dict]:
        """GET /devices, every page: the defaults fetch everything a mirror keeps.

        Long ``serial_numbers`` lists are sent in chunks the service accepts; an empty list
        asks for no device and sends no request.
        """
        q = assumed.DEVICES_QUERY
        params = {q["include_sensors"]: include_sensors,
                  q["include_inactive_sensors"]: include_inactive,
                  q["include_formulas"]: include_formulas,
                  q["include_internal"]: include_internal,
                  q["site_uuid"]: site_uuid, q["group_uuid"]: group_uuid}
        return [device for chunk in _chunks(serial_numbers)
                for device in self._all_pages("/devices", {**params, q["serial_numbers"]: chunk})]

    def refused(self, path: str, name: str) -> bool:
        """Whether the service refused query parameter ``name`` on list ``path`` as unknown."""
        return (path, name) in self.refused_options

    def device(self, serial_number: str) -> dict:
        """GET /devices/{sn}: one device with sensors, derived parameters and formulas."""
        path = f"/devices/{_segment(serial_number)}"
        items = self._items(path, None)
        if not items:
            raise NotFoundError(f"GET {path}: the service answered with no device for serial "
                                f"number {serial_number!r}. Check the serial number.",
                                status=200, method="GET", path=path)
        return items[0]

    def device_groups(self, *, include_devices: bool = True, include_ungrouped: bool = True,
                      include_sensors: bool = False,
                      uuids: Sequence[str] | None = None) -> dict:
        """GET /device-groups: ``{grouped: [root groups with children], ungrouped: [...]}``.

        An empty ``uuids`` list asks for no group and sends no request.
        """
        if uuids is not None and len(uuids) == 0:
            return {"grouped": [], "ungrouped": []}
        q = assumed.DEVICE_GROUPS_QUERY
        answer = self._get_without_refused("/device-groups", {
            q["include_devices"]: include_devices, q["include_ungrouped"]: include_ungrouped,
            q["include_sensors"]: include_sensors, q["uuids"]: _list_or_none(uuids)})
        return _expect_keys(answer, ("grouped", "ungrouped"), "GET", "/device-groups")

    def device_group(self, uuid: str) -> dict:
        """GET /device-groups/{uuid}: one group with its devices and nested groups."""
        path = f"/device-groups/{_segment(uuid)}"
        return _expect_keys(self.get(path), ("uuid",), "GET", path)

    def sensor(self, uuid: str) -> dict:
        """GET /sensors/{uuid}: one sensor with its parameters."""
        path = f"/sensors/{_segment(uuid)}"
        return _expect_keys(self.get(path), ("uuid",), "GET", path)

    def sensor_data(self, body: dict, decoder: Callable[[bytes], Any] | None = None) -> Any:
        """POST /sensor-data: one series item per parameter (or what ``decoder`` makes)."""
        if decoder is not None:
            return self.post("/sensor-data", body, decoder)
        return _items_of(self.post("/sensor-data", body), "POST", "/sensor-data")

    def latest(self, body: dict | None = None) -> list[dict]:
        """POST /sensor-data/latest: the newest point of each parameter (all, with no body)."""
        return _items_of(self.post("/sensor-data/latest", body or {}), "POST",
                         "/sensor-data/latest")

    def gnss(self, body: dict, decoder: Callable[[bytes], Any] | None = None) -> Any:
        """POST /sensor-data/gnss: one item of solution epochs per GNSS sensor (or what
        ``decoder`` makes)."""
        if decoder is not None:
            return self.post("/sensor-data/gnss", body, decoder)
        return _items_of(self.post("/sensor-data/gnss", body), "POST", "/sensor-data/gnss")

    # -- paging

    def _items(self, path: str, params: dict | None) -> list[dict]:
        return _items_of(self.get(path, params), "GET", path)

    def _all_pages(self, path: str, params: dict) -> Iterator[dict]:
        """Every item of a list, however the service pages it (``devmon_sync.client.paging``): an
        item is listed once, and a page that brings nothing new ends the walk."""
        walk = PageWalk(key=_item_key, known=self.list_paging)
        if self.page_size:
            walk.limit = self.page_size
        ask: dict | str | None = walk.first()
        while ask is not None:
            if isinstance(ask, str):  # a link the service gave for the next page
                link_path, link_params = self._own_link(ask, path)
                answer = self.get(link_path, link_params)
            else:
                answer = self._get_without_refused(path, {**params, **ask})
            try:
                items, ask = walk.advance(answer if isinstance(answer, dict) else {})
            except PagingError as err:
                raise ApiError(f"GET {path}: {err}; the list cannot be read to its end. "
                               f"Report this service's paging to devmon.", status=200,
                               method="GET", path=path) from None
            yield from items
        self.list_paging = walk.known

    def _get_without_refused(self, path: str, params: dict) -> Any:
        """GET a list with the optional parameters the service refuses left out: a 400 that
        names one (an include option or a paging parameter, whose names the spec does not
        show) is asked again without it, and the name is never sent to ``path`` again.
        Filters are never dropped: without them the answer would hold other things."""
        while True:
            sent = {k: v for k, v in params.items()
                    if v is not None and (path, k) not in self.refused_options}
            try:
                return self.get(path, sent)
            except RequestTooLargeError:
                raise
            except BadRequestError as err:
                named = refusals.refused_names(err.server_message,
                                               [k for k in sent if k in _OPTIONAL_QUERY])
                if not named:
                    raise
                log.warning("GET %s: the service refuses %s; asking without", path,
                            ", ".join(named))
                self.refused_options.update((path, k) for k in named)

    def _own_link(self, link: str, path: str) -> tuple[str, dict]:
        """A next-page link as (path under the base URL, query): only a link to this very
        service is followed (the API key never goes anywhere else)."""
        base = urllib.parse.urlsplit(self.base_url)
        url = urllib.parse.urlsplit(urllib.parse.urljoin(self.base_url + "/", link))
        if (url.scheme, url.netloc) != (base.scheme, base.netloc) or \
                not url.path.startswith(base.path):
            raise ApiError(f"GET {path}: the next page is at {link!r}, outside this service "
                           f"({self.base_url}); devmon does not send the key there.",
                           status=200, method="GET", path=path)
        query = dict(urllib.parse.parse_qsl(url.query, keep_blank_values=True))
        return url.path[len(base.path):] or "/", query

    # -- one request, with pacing, waits and retries

    def _request(self, method: str, path: str, *, params: dict | None,
                 body: bytes | None, decoder: Callable[[bytes], Any] | None = None) -> Any:
        """One request; on first contact, where the API answers is found first."""
        path = "/" + path.lstrip("/")
        if self.located:
            return self._request_here(method, path, params, body, decoder)
        try:
            answer = self._request_here(method, path, params, body, decoder)
        except NotFoundError as not_here:
            answer = self._request_elsewhere(method, path, params, body, decoder, not_here)
        self.located = True
        return answer

    def _request_elsewhere(self, method: str, path: str, params: dict | None,
                           body: bytes | None, decoder: Callable[[bytes], Any] | None,
                           not_here: NotFoundError) -> Any:
        """The first request again at the other form of the address (with ``/v1`` added, or
        taken off); the original error when the API does not answer there either."""
        given = self.base_url
        for other in _other_forms(given):
            self.base_url = other
            try:
                answer = self._request_here(method, path, params, body, decoder)
            except ApiError:
                continue
            log.debug("the API answers at %s, not at %s as given", other, given)
            return answer
        self.base_url = given
        tried = " and ".join([given, *_other_forms(given)])
        raise NotFoundError(f"{not_here} devmon tried {tried}: give the API's address as its "
                            f"documentation names it.", status=not_here.status,
                            method=not_here.method, path=not_here.path,
                            server_message=not_here.server_message) from None

    def _request_here(self, method: str, path: str, params: dict | None, body: bytes | None,
                      decoder: Callable[[bytes], Any] | None) -> Any:
        failures = server_waits = 0
        while True:
            slot = self._pace()
            try:
                response = self._attempt(method, path, params, body, slot)
                ok = 200 <= response.status_code < 300
                payload = _decode(decoder, response.content) if decoder and ok \
                    else _parse(response.content)
                wait = self._server_wait(response, payload)
                if wait is not None and response.status_code >= 400 \
                        and response.status_code < 500:
                    self._rate_limited(response, payload)
                if wait is not None and server_waits < self.max_server_waits:
                    server_waits += 1
                    self._wait_for_server(wait, method, path, response, payload)
                    continue
                if wait is not None and 400 <= response.status_code < 500:
                    raise self._still_limited(server_waits, method, path, response, payload)
                return self._interpret(response, payload, method, path)
            except _Retry as retry:
                failures += 1
                if failures > self.max_retries:
                    raise retry.final from None
                self._backoff(failures, method, path, retry)

    def _rate_limited(self, response: _Answer, payload: Any) -> None:
        """A 4xx that asks for a wait is a rate-limit answer, whatever its status (the spec
        does not show it): note it, and slow down to the rate it states or, when it states
        none or devmon already kept to it (another program shares the key), by a fifth."""
        message = self._server_message(response, payload)
        self.rate_limit_answers.append((response.status_code, message))
        if not self._limiter.enabled:
            return
        pace, stated = self._limiter.limit, refusals.stated_rate_per_minute(message)
        if stated is not None and 1 <= stated < pace:
            self.set_pace(int(stated))
        else:
            self.set_pace(max(MIN_PACE_PER_MINUTE, min(pace, int(pace * 0.8))))

    def set_pace(self, per_minute: int) -> None:
        """Pace requests to ``per_minute`` from now on (0: no pacing)."""
        self.rate_limit_per_minute = max(0, int(per_minute))
        self._limiter.limit = self.rate_limit_per_minute

    def _pace(self) -> _Slot | None:
        """Block until the client-side limiter has a slot for one more attempt."""
        if not self._limiter.enabled:
            return None
        while True:
            slot, wait = self._limiter.try_acquire()
            if slot is not None:
                return slot
            self._wait(wait, f"pacing to {self.rate_limit_per_minute} requests per minute")

    def _attempt(self, method: str, path: str, params: dict | None, body: bytes | None,
                 slot: _Slot | None) -> _Answer:
        """Send once and read the whole body; network failures become ``_Retry``.

        The body is read in one piece as it arrives (``iter_content(None)``): requests'
        own ``.content`` reads 10 kB at a time, which cost 4x the CPU on the sync's 6 MB
        answers (26 vs 7 ms each, measured).  Truncation, resets and read timeouts still
        surface as requests' exceptions, so they are retried like any network failure."""
        headers = {"Content-Type": "application/json"} if body is not None else None
        with self._count_lock:
            self.requests_sent += 1
        deadline = Deadline(_first_byte_s(self.timeout_s))
        try:
            with deadline, self._session.request(
                    method, self.base_url + path, params=params, data=body, headers=headers,
                    timeout=self.timeout_s, allow_redirects=False, stream=True) as response:
                content = _read_body(response, deadline)
            if deadline.fired:  # cut by the watchdog: what came may look whole, and is not
                raise requests.exceptions.ConnectionError("cut by the deadline")
            return _Answer(response.status_code, response.headers, content)
        except requests.exceptions.SSLError as exc:
            raise NetworkError(
                f"{method} {path}: the TLS certificate of {self._host()} could not be verified "
                f"({self._scrub(_describe(exc))}). Fix the server's certificate, or point "
                f"REQUESTS_CA_BUNDLE at your organisation's CA bundle; devmon never turns "
                f"certificate checks off.", method=method, path=path) from None
        except (*_TRANSIENT, urllib3.exceptions.HTTPError) as exc:
            what = f"{deadline.why}: it came too slowly" if deadline.fired \
                else network_reason(exc)
            raise _Retry(what, detail=self._scrub(_describe(exc)), final=NetworkError(
                f"{method} {path}: no usable answer from {self._host()} after "
                f"{_attempts(self.max_retries + 1)} (last: {what}). Check the network connection "
                f"and that the service is up, then run the command again; on a slow link, a "
                f"longer read timeout may help.", method=method, path=path)) from None
        finally:
            self._limiter.release(slot)

    def _interpret(self, response: _Answer, payload: Any, method: str,
                   path: str) -> Any:
        """The parsed answer of a 2xx, ``_Retry`` for a retryable failure, else a typed error."""
        status = response.status_code
        if 200 <= status < 300:
            if payload is _NOT_JSON and not self.located and \
                    response.content.lstrip()[:1] == b"<":
                what, todo = _body_problem(response.content)
                raise NotFoundError(f"{method} {path}: {self.base_url} answered with {what}, "
                                    f"not the API. {todo}", status=status, method=method,
                                    path=path)
            if payload is _NOT_JSON:
                what, todo = _body_problem(response.content)
                raise _Retry(f"HTTP {status} with {what}", ServiceUnavailableError(
                    f"{method} {path}: the service answered HTTP {status} with {what} on "
                    f"{_attempts(self.max_retries + 1)}. {todo} (Base URL: {self.base_url})",
                    status=status, method=method, path=path))
            return payload
        message = self._server_message(response, payload)
        if status >= 500 or status in _RETRYABLE_4XX:
            raise _Retry(f"HTTP {status}: {message}",
                         self._retries_exhausted(status, method, path, message))
        if 300 <= status < 400:
            raise self._redirected(response, method, path, message)
        raise self._error(status, method, path, message)

    def _retries_exhausted(self, status: int, method: str, path: str,
                           message: str) -> ApiError:
        attempts = _attempts(self.max_retries + 1)
        kw = {"status": status, "method": method, "path": path, "server_message": message}
        if status == 429:
            return RateLimitedError(
                f"{method} {path}: the service kept refusing with HTTP 429 ({message!r}) on "
                f"{attempts}. Another program may be using the same API key: wait a "
                f"minute and try again, or lower the client's rate limit.", **kw)
        return ServiceUnavailableError(
            f"{method} {path}: the service answered HTTP {status} ({message!r}) on "
            f"{attempts}. It is having trouble; try again later, and tell its "
            f"operators if it persists.", **kw)

    def _still_limited(self, waits: int, method: str, path: str, response: _Answer,
                       payload: Any) -> RateLimitedError:
        message = self._server_message(response, payload)
        return RateLimitedError(
            f"{method} {path}: still rate-limited (HTTP {response.status_code}: {message!r}) "
            f"after waiting as "
            f"asked {waits} times. Another program may be using the same API key: wait a "
            f"minute and try again, or lower the client's rate limit.",
            status=response.status_code, method=method, path=path, server_message=message)

    def _redirected(self, response: _Answer, method: str, path: str,
                    message: str) -> ApiError:
        location = self._scrub(response.headers.get("Location", "an unnamed address"))
        return ApiError(
            f"{method} {path}: the service redirected (HTTP {response.status_code}) to "
            f"{location}. devmon does not follow redirects, so the API key is never sent "
            f"elsewhere: use the final address as the base URL.", status=response.status_code,
            method=method, path=path, server_message=message)

    def _error(self, status: int, method: str, path: str, message: str) -> ApiError:
        """The typed error of a final (not retried) 4xx answer."""
        said = f"HTTP {status}: {message!r}"
        kw = {"status": status, "method": method, "path": path, "server_message": message}
        if status == 401:
            return AuthError(
                f"{method} {path}: the API key was rejected ({said}). Give a valid key with "
                f"--api-key, the DEVMON_API_KEY environment variable, or `devmon login`.", **kw)
        if status == 403:
            return ForbiddenError(
                f"{method} {path}: this API key may not see {_resource(method, path)} ({said}). "
                f"Ask the account's administrator for access, or leave it out of the request.",
                **kw)
        if status == 404:
            return NotFoundError(
                f"{method} {path}: not found ({said}). Check the serial number or UUID, and "
                f"that the base URL {self.base_url} is the API's address.", **kw)
        too_large = refusals.too_large(status, message)
        if too_large is not None:
            return RequestTooLargeError(
                f"{method} {path}: the answer would be too large ({said}). Ask for a "
                f"shorter time window or fewer series.", too_large=too_large, **kw)
        if status in (400, 422):
            return BadRequestError(
                f"{method} {path}: the service refused the request ({said}). Change the "
                f"request as the message says.", **kw)
        return ApiError(f"{method} {path}: unexpected answer ({said}). Check the base URL "
                        f"{self.base_url} and that this devmon version suits the service.", **kw)

    # -- waits

    def _server_wait(self, response: _Answer, payload: Any) -> float | None:
        """Seconds an answer asks us to wait: its Retry-After header or its message.

        Any error status counts (a proxy's 503 may ask too); a 2xx only when its body is a bare
        error object, so a wait is never read out of data.
        """
        if 200 <= response.status_code < 300:
            if isinstance(payload, dict) and set(payload) == {"message"}:
                return refusals.wait_seconds(str(payload["message"]))
            return None
        header = _retry_after_seconds(response.headers.get("Retry-After"))
        if header is not None:
            return header
        return refusals.wait_seconds(self._server_message(response, payload))

    def _wait_for_server(self, seconds: float, method: str, path: str,
                         response: _Answer, payload: Any) -> None:
        if seconds > MAX_SERVER_WAIT_S:
            message = self._server_message(response, payload)
            raise RateLimitedError(
                f"{method} {path}: the service asks to wait {seconds:.0f} s (HTTP "
                f"{response.status_code}: {message!r}), longer than the {MAX_SERVER_WAIT_S:.0f} s "
                f"devmon waits unattended. Try again later.", status=response.status_code,
                method=method, path=path, server_message=message)
        log.info("%s %s: the service asked to wait %.1f s (HTTP %d)", method, path, seconds,
                 response.status_code)
        self._wait(seconds + SERVER_WAIT_MARGIN_S,
                   f"the service asked to wait {seconds:g} s (HTTP {response.status_code})")

    def _backoff(self, failures: int, method: str, path: str, retry: _Retry) -> None:
        """Exponential backoff with full jitter: uniform in [0, min(max, base * 2^(n-1))].
        One short line per wait; the library's own words go to the sync log only."""
        ceiling = min(self.backoff_max_s, self.backoff_base_s * 2 ** (failures - 1))
        delay = self._rng.uniform(0.0, ceiling)
        log.info("%s %s failed: %s", method, path, retry.detail, extra=LOG_FILE_ONLY)
        log.warning("%s %s: %s; retry %d of %d in %s s", method, path, retry.reason,
                    failures, self.max_retries, f"{delay:.0f}" if delay >= 1 else f"{delay:.1f}")
        self._wait(delay, f"retry {failures} of {self.max_retries} of {method} {path} "
                          f"after {retry.reason}")

    def _wait(self, seconds: float, reason: str) -> None:
        if self.on_wait is not None:
            self.on_wait(seconds, reason)
        if seconds > 0:
            self._sleep(seconds)

    # -- text that may be shown

    def _server_message(self, response: _Answer, payload: Any) -> str:
        """The ``message`` of an error body (or the start of a non-JSON body), key scrubbed."""
        if isinstance(payload, dict) and isinstance(payload.get("message"), str):
            text = payload["message"]
        else:
            text = response.content[:300].decode("utf-8", "replace").strip() or "no message"
        return self._scrub(text)

    def _scrub(self, text: str) -> str:
        if len(self._key) >= _MIN_REDACTED_KEY_LEN:
            return text.replace(self._key, _KEY_PLACEHOLDER)
        return text

    def _host(self) -> str:
        return urlsplit(self.base_url).netloc


# ---------------------------------------------------------------------------- helpers


def _first_byte_s(timeout_s) -> float:
    """How long an answer may take to begin: the connect and read timeouts together."""
    return float(sum(timeout_s)) if isinstance(timeout_s, tuple) else float(timeout_s)


def _read_body(response: requests.Response, deadline: Deadline) -> bytes:
    """The whole body, read as it arrives (``iter_content(None)``: requests' own
    ``.content`` reads 10 kB at a time, 4x the CPU on 6 MB answers), each piece extending
    the attempt's deadline by its share."""
    length = response.headers.get("Content-Length")
    deadline.body_started(int(length) if length and length.isdigit() else None)
    chunks, received = [], 0
    for chunk in response.iter_content(chunk_size=None):
        chunks.append(chunk)
        received += len(chunk)
        deadline.saw(received)
    return b"".join(chunks)


def normalise_base_url(base_url: str, allow_insecure: bool = False) -> str:
    """``https://host[:port]/path`` without a trailing slash; refuse clear text off-host.

    The key is sent with every request, so plain http is allowed only where it never leaves
    the machine (loopback) unless the caller explicitly accepts the risk.
    """
    text = (base_url or "").strip()
    parts = _split_address(text)
    # The text itself is never echoed: a key passed in the wrong argument would be shown.
    if parts.scheme not in ("http", "https") or not parts.hostname:
        raise ApiError("The base URL is not an API address: give one that starts with "
                       "https://, like https://monitoring.example.com/v1.")
    if parts.query or parts.fragment or parts.username or parts.password:
        raise ApiError(f"The base URL for {parts.hostname} carries a query, a fragment or a "
                       f"user name: give only the API's address, like "
                       f"https://monitoring.example.com/v1 (the key goes in --api-key).")
    if parts.scheme == "http" and not allow_insecure and not _is_loopback(parts.hostname):
        raise InsecureUrlError(
            f"Refusing plain http to {parts.hostname}: the API key would cross the network "
            f"unencrypted. Use an https:// address, or pass --allow-insecure if you accept "
            f"the risk.")
    return urlunsplit((parts.scheme, parts.netloc, parts.path.rstrip("/"), "", ""))


def _split_address(text: str):
    """``urlsplit`` of a base URL whose host and port are checked, or ApiError saying what
    cannot be read (a port out of range or not a number, a broken IPv6 literal)."""
    example = "like https://monitoring.example.com/v1"
    try:
        parts = urlsplit(text)
        parts.port  # noqa: B018 - parsing it is the check
    except ValueError as exc:
        what = "a broken IPv6 address in brackets" if "IPv6" in str(exc) or "[" in text \
            else "a port that is not a number from 1 to 65535"
        raise ApiError(f"The base URL has {what}: give the API's address, {example}.") \
            from None
    host = parts.hostname or ""
    if "[" in parts.netloc and not _is_ip(host):
        raise ApiError(f"The base URL has a broken IPv6 address in brackets: give the API's "
                       f"address, {example}.")
    if parts.port == 0:
        raise ApiError(f"The base URL has a port that is not a number from 1 to 65535: give "
                       f"the API's address, {example}.")
    return parts


def _is_ip(host: str) -> bool:
    try:
        ipaddress.ip_address(host.split("%")[0])
    except ValueError:
        return False
    return True


VERSION_SEGMENT = "/v1"
"""The spec's version segment (section 9): one description ends the base address with it,
others give paths with no prefix."""


def _other_forms(base_url: str) -> list[str]:
    """The other place the API may answer: with the version segment, or without it."""
    if base_url.endswith(VERSION_SEGMENT):
        return [base_url[:-len(VERSION_SEGMENT)]]
    return [base_url + VERSION_SEGMENT]


def _clear_text_loopback(base_url: str) -> bool:
    parts = urlsplit(base_url)
    return parts.scheme == "http" and _is_loopback(parts.hostname or "")


def _is_loopback(host: str) -> bool:
    """Whether the key, sent to ``host``, cannot leave the machine: a literal loopback
    address (127.0.0.0/8, ::1), or the name ``localhost`` when every address it resolves to
    is one.  Other names (``x.localhost`` included) may go through DNS, whose answer nobody
    checked, so they are not loopback."""
    try:
        return ipaddress.ip_address(host.split("%")[0]).is_loopback
    except ValueError:
        pass
    if host.lower().rstrip(".") != "localhost":
        return False
    try:
        found = socket.getaddrinfo(host, None)
    except OSError:
        return False
    return bool(found) and all(ipaddress.ip_address(str(info[4][0]).split("%")[0]).is_loopback
                               for info in found)


def _checked_key(api_key: str) -> str:
    """The key without surrounding whitespace; refuse ones no HTTP header can carry.

    requests would put a bad header value into its exception text, so it is checked here
    first, with a message that never shows the key.
    """
    key = (api_key or "").strip()
    if not key:
        raise AuthError("No API key given. Give one with --api-key, the DEVMON_API_KEY "
                        "environment variable, or `devmon login`.")
    if not key.isprintable() or any(c.isspace() for c in key) or not key.isascii():
        raise AuthError("The API key contains spaces, control or non-ASCII characters, so it "
                        "cannot be sent in a header; copy it again without extra characters.")
    return key


def _query(params: dict | None) -> dict | None:
    """The query conventions devmon assumes (``service_profile``): booleans as
    true/false, None left out."""
    if params is None:
        return None
    out = {}
    for name, value in params.items():
        if value is None:
            continue
        if isinstance(value, bool):
            value = assumed.QUERY_TRUE if value else assumed.QUERY_FALSE
        out[name] = value
    return out


def _chunks(values: Sequence[str] | None) -> Iterator[list[str] | None]:
    """None once (no filter), else the values in slices the service's array limit accepts."""
    if values is None:
        yield None
        return
    size = assumed.DEFAULT_LIMITS.max_selector_items
    values = list(values)
    for start in range(0, len(values), size):
        yield values[start:start + size]


def _list_or_none(values: Sequence[str] | None) -> list[str] | None:
    return None if values is None else list(values)


def _segment(value: str) -> str:
    """One path segment, escaped so that a serial number with '/' or '?' stays one segment."""
    return quote(str(value), safe="")


_NOT_JSON = object()


def _decode(decoder: Callable[[bytes], Any], content: bytes) -> Any:
    """A caller's decoding of a successful body, or ``_NOT_JSON`` when it cannot read it."""
    try:
        return decoder(content)
    except ValueError:
        return _NOT_JSON


def _parse(content: bytes) -> Any:
    """The JSON of a body, or ``_NOT_JSON`` (a cut or foreign body: the caller decides).
    Bare NaN/Infinity tokens, which some servers write, are read (by Python's json) rather
    than refused, so that one odd value never makes a whole answer unreadable."""
    try:
        return orjson.loads(content)
    except orjson.JSONDecodeError:
        pass
    try:
        return json.loads(content)
    except (ValueError, UnicodeDecodeError, RecursionError):
        return _NOT_JSON


_PORTAL_WORDS = re.compile(rb"captive|portal|hotspot|wi-?fi|sign.?in|log.?in|accept.{0,20}terms",
                           re.IGNORECASE)


def _body_problem(content: bytes) -> tuple[str, str]:
    """(what the unreadable body is, what to do) in words."""
    head = content.lstrip()[:2000]
    if not head:
        return "an empty body", "The service or a proxy dropped the answer; try again later."
    if head[:1] == b"<":
        if _PORTAL_WORDS.search(head):
            return ("a web page that looks like a network's sign-in page",
                    "A captive portal (hotel, site or mobile Wi-Fi) may be in the way: sign in "
                    "in a browser, then run the command again.")
        return ("an HTML page, not the API's JSON",
                "A proxy or web server answered instead of the API: check the base URL.")
    return (f"a body that is not valid JSON (it starts {head[:40]!r})",
            "The answer was damaged or cut on the way; if this persists, tell the service's "
            "operators.")


_OPTIONAL_QUERY = frozenset(
    [v for k, v in assumed.DEVICES_QUERY.items() if k.startswith("include") or
     k in ("limit", "offset")] +
    [v for k, v in assumed.DEVICE_GROUPS_QUERY.items() if k.startswith("include")] +
    ["page", "pageSize", "cursor"])
"""Query parameters a list may be asked again without (include options and paging)."""


def _item_key(item: object) -> object:
    """What identifies a list item: its serial number or UUID, else the item itself."""
    if isinstance(item, dict):
        for name in ("serialNumber", "uuid"):
            if isinstance(item.get(name), str):
                return (name, item[name])
    return repr(item)


def _items_of(answer: Any, method: str, path: str) -> list[dict]:
    if not isinstance(answer, dict) or not isinstance(answer.get("items"), list):
        raise _bad_shape(method, path, "an object with an 'items' list")
    return answer["items"]


def _expect_keys(answer: Any, keys: Sequence[str], method: str, path: str) -> dict:
    if not isinstance(answer, dict) or any(k not in answer for k in keys):
        raise _bad_shape(method, path, "an object with " + ", ".join(repr(k) for k in keys))
    return answer


def _bad_shape(method: str, path: str, wanted: str) -> ApiError:
    return ApiError(f"{method} {path}: the answer is not {wanted} as the API specifies. Check "
                    f"that the base URL points at a Device Monitoring API /v1.", status=200,
                    method=method, path=path)


def _resource(method: str, path: str) -> str:
    """A human name for what a path asks for: 'device SN', 'sensor UUID', ..."""
    kinds = {"devices": "device", "device-groups": "device group", "sensors": "sensor"}
    parts = path.strip("/").split("/")
    if len(parts) == 2 and parts[0] in kinds:
        return f"{kinds[parts[0]]} {parts[1]}"
    return f"some of what {method} {path} asked for"


def _retry_after_seconds(value: str | None) -> float | None:
    """A Retry-After header in seconds, whether given as a number or an HTTP date."""
    if not value:
        return None
    try:
        return max(0.0, float(value))
    except ValueError:
        pass
    try:
        when = parsedate_to_datetime(value)
    except (TypeError, ValueError):
        return None
    if when.tzinfo is None:
        when = when.replace(tzinfo=UTC)
    return max(0.0, (when - datetime.now(UTC)).total_seconds())


def _attempts(n: int) -> str:
    return "1 attempt" if n == 1 else f"{n} attempts"


LOG_FILE_ONLY = {"log_file_only": True}
"""``extra`` of a log record meant for the sync log, not the terminal (see devmon_sync.logs)."""


def network_reason(exc: BaseException) -> str:
    """What went wrong with the network, in a person's words, from a requests/urllib3
    exception and the exceptions it wraps (their own texts name pools and retries)."""
    chain, seen = [], set()
    todo: list[BaseException | None] = [exc]
    while todo:
        e = todo.pop()
        if e is None or id(e) in seen:
            continue
        seen.add(id(e))
        chain.append(e)
        todo += [e.__cause__, e.__context__, getattr(e, "reason", None)
                 if isinstance(getattr(e, "reason", None), BaseException) else None]
        todo += [a for a in getattr(e, "args", ()) if isinstance(a, BaseException)]
    text = " ".join(f"{type(e).__name__} {e}" for e in chain).lower()
    for words, says in _NETWORK_REASONS:
        if any(w in text for w in words):
            return says
    return f"{type(exc).__name__}"


_NETWORK_REASONS = (
    (("nameresolution", "name or service not known", "nodename nor servname",
      "failed to resolve", "getaddrinfo", "temporary failure in name resolution"),
     "service unreachable (its host name could not be resolved)"),
    (("connection refused", "connectionrefused"), "service unreachable (connection refused)"),
    (("network is unreachable", "no route to host"), "service unreachable (no route to it)"),
    (("connecttimeout", "connect timeout"), "service unreachable (no connection in time)"),
    (("readtimeout", "read timed out"), "no answer in time"),
    (("connection reset", "connectionreset", "broken pipe"), "connection reset"),
    (("incompleteread", "chunkedencoding", "protocolerror", "prematurely", "remotedisconnected",
      "connection aborted"), "the answer was cut off"),
)


def _describe(exc: BaseException) -> str:
    """A short text for a requests exception (its URL carries no key: the key is a header)."""
    text = str(exc) or type(exc).__name__
    return f"{type(exc).__name__}: {text[:300]}"

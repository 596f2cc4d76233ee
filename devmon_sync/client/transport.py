"""The transport: one request sent, paced, waited for and retried until it has an answer.

``Transport`` holds the ``requests.Session`` (kept-alive connections, the key header set once)
and does everything between a method and path and a parsed answer or a typed ``ApiError``:
finding where the API answers on first contact (with or without ``/v1``), pacing every attempt
through the sliding-window limiter, an overall deadline per attempt (``deadline``), waiting
as long as the service asks (``Retry-After`` or its message), retrying what the network broke
with exponential backoff and full jitter, and scrubbing the key out of any text the server
sends back.  The endpoints (``api.ApiClient``) are built on it and never see HTTP.

Size: over 600 lines because one request's life (pace, send, read, wait, retry, give up, and
every message saying which of these went wrong) is one state machine; the pure parts live
beside it already (``refusals``, ``deadline``, ``key_scrub``, ``body``, ``bounded``,
``pacing``).
"""

from __future__ import annotations

import logging
import random
import threading
import time
from collections import deque
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from datetime import UTC, datetime
from typing import Any, Self
from urllib.parse import urlsplit

import orjson
import requests
import urllib3

from devmon_sync import __version__
from devmon_sync import service_profile as assumed
from devmon_sync.client import refusals
from devmon_sync.client.address import clear_text_loopback, normalise_base_url, other_forms
from devmon_sync.client.body import NOT_JSON, body_problem, decode, parse
from devmon_sync.client.bounded import PastBound, read_body, values_past
from devmon_sync.client.deadline import Deadline, DeadlineAdapter
from devmon_sync.client.errors import (
    AnswerTooLargeError,
    ApiError,
    AuthError,
    BadRequestError,
    ForbiddenError,
    NetworkError,
    NotFoundError,
    RateLimitedError,
    RequestTooLargeError,
    ServiceUnavailableError,
    describe,
    network_reason,
)
from devmon_sync.client.key_scrub import KeyScrubber
from devmon_sync.client.pacing import (MIN_PACE_PER_MINUTE, SlidingWindowLimiter, Slot,
                                       WaitReason)

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
_HEAD_BYTES = 2000  # of a body that is not JSON: what a message may quote from its start
UNSURE_SERVER_WAIT_S = 60.0
"""Waited when a Retry-After names a time beyond ``MAX_SERVER_WAIT_S`` by devmon's clock and
no ``Date`` of the service says what its own clock reads: a clock difference may make a short
wait look like a day, so devmon waits this long and asks again rather than stop."""
_RETRYABLE_4XX = (408, 429)  # Request Timeout, Too Many Requests (RFC 6585)

# What makes an attempt worth repeating: the network, not the request, was at fault.
# SSLError is a ConnectionError but is excluded before this tuple is consulted (see _attempt).
_TRANSIENT = (
    requests.exceptions.ConnectionError,
    requests.exceptions.Timeout,
    requests.exceptions.ChunkedEncodingError,
    requests.exceptions.ContentDecodingError,
)

LOG_FILE_ONLY = {"log_file_only": True}
"""``extra`` of a log record meant for the sync log, not the terminal (see devmon_sync.logs)."""


class _Retry(Exception):
    """Internal: this attempt failed in a way worth repeating; ``final`` is raised at the end."""

    def __init__(self, reason: str, final: ApiError, detail: str | None = None):
        super().__init__(reason)
        self.reason = reason
        """In a person's words ("connection refused"): shown on every wait."""
        self.detail = detail or reason
        """The library's words, for the sync log only."""
        self.final = final


class Transport:
    """Requests to the Device Monitoring API, paced, waited for and retried (the base of
    ``ApiClient``, whose docstring says what the options mean).

    ``get`` and ``post`` are the raw verbs: a path under ``base_url`` in, the parsed JSON
    answer (or a typed ``ApiError``) out.
    """

    def __init__(self, base_url: str, api_key: str, *,
                 rate_limit_per_minute: int = assumed.RATE_LIMIT_PER_MINUTE,
                 timeout_s: tuple[float, float] = (10.0, 120.0), max_retries: int = 8,
                 backoff_base_s: float = 0.5, backoff_max_s: float = 60.0,
                 allow_insecure: bool = False,
                 on_wait: Callable[[float, str], None] | None = None,
                 sleep: Callable[[float], None] = time.sleep,
                 monotonic: Callable[[], float] = time.monotonic,
                 max_server_waits: int = 5,
                 wall_clock: Callable[[], float] = time.time,
                 slow_grace_s: float = assumed.SLOW_ANSWER_GRACE_S,
                 slow_answers_to_stop: int = assumed.SLOW_ANSWERS_TO_STOP,
                 slow_stop_after_s: float = assumed.SLOW_STOP_AFTER_S,
                 max_answer_bytes: int = assumed.MAX_ANSWER_BYTES,
                 max_answer_values: int = assumed.MAX_ANSWER_VALUES):
        self.base_given = normalise_base_url(base_url, allow_insecure)
        """The address as the user gave it (what a mirror knows the service by)."""
        self.base_url = self.base_given
        """Where the API answers: the given address, or the other form once located."""
        self.located = False
        """True once an answer proved the API answers at ``base_url``."""
        self._key = _checked_key(api_key)
        self._scrubber = KeyScrubber(self._key)
        self.rate_limit_per_minute = max(0, rate_limit_per_minute)
        self.timeout_s = timeout_s
        self.max_retries = max(0, max_retries)
        self.backoff_base_s = backoff_base_s
        self.backoff_max_s = backoff_max_s
        self.max_server_waits = max(0, max_server_waits)
        self.slow_grace_s = slow_grace_s
        self.slow_answers_to_stop = max(1, slow_answers_to_stop)
        self.slow_stop_after_s = slow_stop_after_s
        self.max_answer_bytes = max(1, max_answer_bytes)
        """Most bytes read of one answer, as it came and as decoded (``client.bounded``)."""
        self.max_answer_values = max(1, max_answer_values)
        """Most values parsed of one data answer (one a ``decoder`` reads)."""
        self._slow_in_a_row: list[float] = []
        """Seconds each too-slow answer since the last whole one cost (``_too_slow``)."""
        self.on_wait = on_wait
        self.requests_sent = 0
        self.rate_limit_answers: list[tuple[int, str]] = []
        """(status, message) of each answer that asked for a wait (a rate limit, whatever its
        status): what the service profile learns its rate-limit wording from."""
        self._sleep = sleep
        self._monotonic = monotonic
        self._wall_clock = wall_clock
        self._date_offsets_s: deque[float] = deque(maxlen=5)
        """The service's clock minus devmon's, by the ``Date`` of recent answers."""
        self._last_service_date: datetime | None = None
        self._rng = random.Random()
        self._answered = threading.local()  # the headers of each thread's last answer
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
        if clear_text_loopback(self.base_url):
            # An HTTP proxy from the environment would carry the key in clear off the machine
            # (and could not reach our loopback anyway): talk to loopback directly.
            self._session.trust_env = False

    def secrets(self) -> list[str]:
        """What a log must never show (the API key, also base64-, URL- and hex-encoded), for
        a redacting log filter."""
        return [self._key, *(form for form in self._scrubber.forms() if form != self._key)]

    def __repr__(self) -> str:
        return (f"{type(self).__name__}(base_url={self.base_url!r}, "
                f"rate_limit_per_minute={self.rate_limit_per_minute}, "
                f"requests_sent={self.requests_sent})")

    def locate(self, api_url: str) -> None:
        """Use ``api_url`` (a form of the given address a service profile remembers) as
        where the API answers, without asking again."""
        if api_url in (self.base_given, *other_forms(self.base_given)):
            self.base_url, self.located = api_url, True

    def service_now(self) -> datetime:
        """The service's clock now, as its answers' ``Date`` headers tell it (devmon's own
        clock until one does): what "now" must mean in a request, since a service refuses
        or misreads a time in its future, and its clock may be minutes off devmon's."""
        offset = refusals.service_offset_s(list(self._date_offsets_s)) or 0.0
        return datetime.fromtimestamp(self._wall_clock() + offset, UTC)

    def last_service_date(self) -> datetime | None:
        """The ``Date`` of the latest answer that carried one: the service's now as it last
        said it (None before any)."""
        return self._last_service_date

    def _note_service_date(self, value: str | None) -> None:
        said = refusals.http_date(value)
        if said is not None:
            self._date_offsets_s.append(said.timestamp() - self._wall_clock())
            self._last_service_date = said

    def least_seconds_for(self, requests: int) -> float:
        """The least time the rate limit lets ``requests`` more requests take (for ETAs)."""
        return self._limiter.least_seconds_for(requests)

    # -- lifecycle

    def close(self) -> None:
        """Close the pooled connections."""
        self._session.close()

    def __enter__(self) -> Self:
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

    def last_headers(self) -> Mapping[str, str]:
        """The headers of this thread's last answer (case-insensitive): where a list names
        its next page in a ``Link`` header rather than in its body."""
        return getattr(self._answered, "headers", {})

    def post(self, path: str, body: dict, decoder: Callable[[bytes], Any] | None = None) -> Any:
        """POST a JSON body to ``base_url + path`` and return the parsed JSON answer.

        ``decoder`` parses a successful answer's bytes instead of orjson (the sync engine
        decodes large data answers straight into typed columns); it raises ValueError for a
        body it cannot read, which is retried like a truncated one.
        """
        return self._request("POST", path, params=None, body=orjson.dumps(body), decoder=decoder)

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
        for other in other_forms(given):
            self.base_url = other
            try:
                answer = self._request_here(method, path, params, body, decoder)
            except ApiError:
                continue
            log.debug("the API answers at %s, not at %s as given", other, given)
            return answer
        self.base_url = given
        tried = " and ".join([given, *other_forms(given)])
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
                past = values_past(response.content, self.max_answer_values) \
                    if decoder and ok else None  # a data answer: what parsing it costs
                if past is not None:
                    del response  # not kept alive by the exception's traceback (its frame)
                    raise self._past_bound(past, method, path)
                payload = decode(decoder, response.content) if decoder and ok \
                    else parse(response.content)
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
                self._answered.headers = response.headers
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

    def _pace(self) -> Slot | None:
        """Block until the client-side limiter has a slot for one more attempt."""
        if not self._limiter.enabled:
            return None
        while True:
            slot, wait = self._limiter.try_acquire()
            if slot is not None:
                return slot
            self._wait(wait, WaitReason(
                f"pacing to {self.rate_limit_per_minute} requests per minute", "pacing",
                per_minute=self.rate_limit_per_minute))

    def _attempt(self, method: str, path: str, params: dict | None, body: bytes | None,
                 slot: Slot | None) -> _Answer:
        """Send once and read the whole body; network failures become ``_Retry``.

        The body is read in pieces as it arrives and counted against devmon's bound on one
        answer (``bounded.read_body``): an answer past it raises ``AnswerTooLargeError``,
        not retried.  Truncation, resets and read timeouts still surface as requests'
        exceptions, so they are retried like any network failure."""
        headers = {"Content-Type": "application/json"} if body is not None else None
        with self._count_lock:
            self.requests_sent += 1
        deadline = Deadline(_first_byte_s(self.timeout_s), grace_s=self.slow_grace_s)
        try:
            with deadline, self._session.request(
                    method, self.base_url + path, params=params, data=body, headers=headers,
                    timeout=self.timeout_s, allow_redirects=False, stream=True) as response:
                self._note_service_date(response.headers.get("Date"))  # as the headers come
                content = read_body(response, deadline, self.max_answer_bytes)
            if deadline.fired:  # cut by the watchdog: what came may look whole, and is not
                raise requests.exceptions.ConnectionError("cut by the deadline")
            with self._count_lock:
                self._slow_in_a_row.clear()
            return _Answer(response.status_code, response.headers, content)
        except PastBound as past:
            raise self._past_bound(past, method, path) from None
        except requests.exceptions.SSLError as exc:
            raise NetworkError(
                f"{method} {path}: the TLS certificate of {self._host()} could not be verified "
                f"({self._scrub(describe(exc))}). Fix the server's certificate, or point "
                f"REQUESTS_CA_BUNDLE at your organisation's CA bundle; devmon never turns "
                f"certificate checks off.", method=method, path=path) from None
        except (*_TRANSIENT, urllib3.exceptions.HTTPError) as exc:
            if deadline.fired:
                self._too_slow(method, path, deadline)
            what = f"{deadline.why}: it came too slowly" if deadline.fired \
                else network_reason(exc)
            raise _Retry(what, detail=self._scrub(describe(exc)), final=NetworkError(
                f"{method} {path}: no usable answer from {self._host()} after "
                f"{_attempts(self.max_retries + 1)} (last: {what}). Check the network connection "
                f"and that the service is up, then run the command again; on a slow link, a "
                f"longer read timeout may help.", method=method, path=path)) from None
        finally:
            self._limiter.release(slot)

    def _past_bound(self, past: PastBound, method: str, path: str) -> AnswerTooLargeError:
        """An answer past devmon's bound on what one answer may cost, in words: not
        retried (it would cost as much again), the caller asks for less."""
        log.warning("%s %s: %s", method, path, past.what)
        todo = ("Ask for a shorter time window or fewer series (a sync does so itself, in "
                "smaller windows); if answers stay this large, the service sends far more "
                "than asked: tell its operators.") if method == "POST" else \
            ("A list this large is not one devmon expects: a smaller --page-size may help; "
             "if not, the service sends far more than asked: tell its operators.")
        return AnswerTooLargeError(f"{method} {path}: {past.what}. {todo}", bound=past.bound,
                                   method=method, path=path)

    def _too_slow(self, method: str, path: str, deadline: Deadline) -> None:
        """Count an answer cut as too slow; raise NetworkError (no retry) when it is the
        ``slow_answers_to_stop``-th in a row and they cost ``slow_stop_after_s`` together: a
        service that drips is unusable now, and retrying it cost 17 minutes (audit)."""
        with self._count_lock:
            self._slow_in_a_row.append(deadline.elapsed_s())
            count, cost_s = len(self._slow_in_a_row), sum(self._slow_in_a_row)
        if count < self.slow_answers_to_stop or cost_s < self.slow_stop_after_s:
            return
        raise NetworkError(
            f"{method} {path}: {self._host()} sent {count} answers in a row too slowly to use "
            f"(last: {deadline.why}), so devmon stops rather than retry for many minutes. The "
            f"service or the link to it is overloaded: try again later, and tell the "
            f"service's operators if it persists.", method=method, path=path) from None

    def _interpret(self, response: _Answer, payload: Any, method: str,
                   path: str) -> Any:
        """The parsed answer of a 2xx, ``_Retry`` for a retryable failure, else a typed error."""
        status = response.status_code
        if 200 <= status < 300:
            if payload is NOT_JSON and not self.located and \
                    response.content.lstrip()[:1] == b"<":
                what, todo = body_problem(response.content, self._scrub)
                raise NotFoundError(f"{method} {path}: {self.base_url} answered with {what}, "
                                    f"not the API. {todo}", status=status, method=method,
                                    path=path)
            if payload is NOT_JSON:
                what, todo = body_problem(response.content, self._scrub)
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
        if refusals.start_in_future(message):
            return BadRequestError(
                f"{method} {path}: the service refused a start date in its future ({said}); "
                f"its clock is {self._clock_difference()}. devmon asks again at the "
                f"service's time when it can; if this persists, sync again later, and tell "
                f"the service's operators if its clock stays off.", **kw)
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

    def _server_wait(self, response: _Answer, payload: Any) -> refusals.AskedWait | None:
        """The wait an answer asks for: its Retry-After header or its message.

        Any error status counts (a proxy's 503 may ask too); a 2xx only when its body is a bare
        error object, so a wait is never read out of data.  How a Retry-After date, another
        clock and the words are weighed: ``refusals.asked_wait``.
        """
        if 200 <= response.status_code < 300:
            if isinstance(payload, dict) and set(payload) == {"message"}:
                said = refusals.wait_seconds(str(payload["message"]))
                return None if said is None else refusals.AskedWait(said)
            return None
        return refusals.asked_wait(
            response.headers.get("Retry-After"), response.headers.get("Date"),
            self.service_now(), self._last_service_date is not None,
            refusals.wait_seconds(self._server_message(response, payload)),
            MAX_SERVER_WAIT_S, UNSURE_SERVER_WAIT_S)

    def _wait_for_server(self, wait: refusals.AskedWait, method: str, path: str,
                         response: _Answer, payload: Any) -> None:
        status, seconds = response.status_code, wait.seconds
        said = f"; {self._scrub(wait.said)}" if wait.said else ""
        if seconds > MAX_SERVER_WAIT_S:
            message = self._server_message(response, payload)
            raise RateLimitedError(
                f"{method} {path}: the service asks to wait {seconds:.0f} s (HTTP "
                f"{status}: {message!r}{said}), longer than the {MAX_SERVER_WAIT_S:.0f} s "
                f"devmon waits unattended. Try again later.", status=status,
                method=method, path=path, server_message=message)
        if wait.unsure:
            reason = (f"the service named a time too far off to be meant ({self._scrub(wait.said)}"
                      f", HTTP {status}): its clock may differ from devmon's; waiting "
                      f"{seconds:g} s, then asking again")
        else:
            reason = f"the service asked to wait {seconds:g} s (HTTP {status}{said})"
        log.info("%s %s: %s", method, path, reason)
        self._wait(seconds + SERVER_WAIT_MARGIN_S, WaitReason(reason, "asked"))

    def _backoff(self, failures: int, method: str, path: str, retry: _Retry) -> None:
        """Exponential backoff with full jitter: uniform in [0, min(max, base * 2^(n-1))].
        One short line per wait; the library's own words go to the sync log only."""
        ceiling = min(self.backoff_max_s, self.backoff_base_s * 2 ** (failures - 1))
        delay = self._rng.uniform(0.0, ceiling)
        log.info("%s %s failed: %s", method, path, retry.detail, extra=LOG_FILE_ONLY)
        log.warning("%s %s: %s; retry %d of %d in %s s", method, path, retry.reason,
                    failures, self.max_retries, f"{delay:.0f}" if delay >= 1 else f"{delay:.1f}")
        self._wait(delay, WaitReason(f"retry {failures} of {self.max_retries} of {method} "
                                     f"{path} after {retry.reason}", "retry"))

    def _wait(self, seconds: float, reason: WaitReason) -> None:
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
            text = self._scrub(response.content[:_HEAD_BYTES].decode("utf-8", "replace"))
            return text.strip()[:300] or "no message"
        return self._scrub(text)

    def _scrub(self, text: str) -> str:
        """``text`` of the service's without the key in any common form (``key_scrub``):
        every text that came from the service passes here before devmon shows or keeps it."""
        return self._scrubber(text)

    def _clock_difference(self) -> str:
        """How far the service's clock is from devmon's, in words."""
        return refusals.clock_difference(refusals.service_offset_s(list(self._date_offsets_s)))

    def _host(self) -> str:
        return urlsplit(self.base_url).netloc


# ---------------------------------------------------------------------------- helpers


def _first_byte_s(timeout_s) -> float:
    """How long an answer may take to begin: the connect and read timeouts together."""
    return float(sum(timeout_s)) if isinstance(timeout_s, tuple) else float(timeout_s)


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


def _resource(method: str, path: str) -> str:
    """A human name for what a path asks for: 'device SN', 'sensor UUID', ..."""
    kinds = {"devices": "device", "device-groups": "device group", "sensors": "sensor"}
    parts = path.strip("/").split("/")
    if len(parts) == 2 and parts[0] in kinds:
        return f"{kinds[parts[0]]} {parts[1]}"
    return f"some of what {method} {path} asked for"


def _attempts(n: int) -> str:
    return "1 attempt" if n == 1 else f"{n} attempts"


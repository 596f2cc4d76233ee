"""The client's exceptions: one hierarchy rooted at ``ApiError``, and network failures in words.

Callers catch ``ApiError`` for anything that went wrong with a request and the subclasses for
what they can act on (a refused key, a missing resource, an answer too large to split, waits
that never end).  Every message names the request and says what to do, and none carries the
API key: the key is a header, never part of a URL or of these texts.  ``network_reason``
lives here because requests' and urllib3's own texts name pools and retries, not what a
person can check.
"""

from __future__ import annotations

from devmon_sync.client import refusals


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


class AnswerTooLargeError(RequestTooLargeError):
    """An answer past one of devmon's own bounds on what one answer may cost in memory
    (``service_profile.MAX_ANSWER_BYTES``, ``MAX_ANSWER_VALUES``; ``client.bounded``): devmon
    stopped reading or did not parse it.  A "too large" like a service's refusal (the caller
    asks smaller windows), but the service refused nothing: ``status`` is None and there is
    no server message, so nothing of it is learned as the service's limit.  ``bound`` names
    the bound passed in words ("64 MiB decoded", "1,500,000 values")."""

    def __init__(self, message: str, *, bound: str, **kw):
        super().__init__(message, too_large=refusals.TooLarge("size"), **kw)
        self.bound = bound


class RateLimitedError(ApiError):
    """Still asked to wait (429, or any status whose message asks for a wait) after the
    bounded number of waits, or asked to wait longer than devmon waits unattended."""


class ServiceUnavailableError(ApiError):
    """5xx answers (or unreadable 200 bodies) on every attempt."""


class NetworkError(ApiError):
    """No usable answer on any attempt: connection refused or dropped, timeouts, cut bodies."""


class InsecureUrlError(ApiError):
    """A plain-http base URL to a host other than loopback: the key would travel in clear."""



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


def describe(exc: BaseException) -> str:
    """A short text for a requests exception (its URL carries no key: the key is a header)."""
    text = str(exc) or type(exc).__name__
    return f"{type(exc).__name__}: {text[:300]}"

"""The Device Monitoring API client: the only package of devmon that speaks HTTP.

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
  log line or a repr, and any text that comes back from the server is scrubbed of it too,
  in whatever common encoding it is echoed.
  Redirects are not followed: requests would resend the custom key header to whatever host a
  redirect names.

Where each concern lives (one module each; everything callers need is re-exported here):

- ``api``: ``ApiClient``, the nine endpoints, typed, built on the transport;
- ``transport``: one request paced, waited for and retried, first contact;
- ``key_scrub``: the key, verbatim or base64-, URL- or hex-encoded, out of the service's text;
- ``errors``: the ``ApiError`` hierarchy and network failures in a person's words;
- ``pacing``: the sliding-window rate limiter;
- ``address``: checking a base URL, loopback and clear text, the ``/v1`` forms;
- ``body``: parsing answers, naming unreadable ones, the shapes endpoints need;
- ``bounded``: reading an answer within devmon's bounds on its size and values (a huge
  answer or a gzip bomb is cut as it comes, never held whole);
- ``deadline``, ``paging``, ``refusals``: an overall deadline per attempt, walking pages,
  reading the service's refusals.
"""

from devmon_sync.client.address import VERSION_SEGMENT, normalise_base_url
from devmon_sync.client.api import ApiClient
from devmon_sync.client.errors import (
    AnswerTooLargeError,
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
    network_reason,
)
from devmon_sync.client.pacing import LIMITER_MARGIN_S, MIN_PACE_PER_MINUTE, SlidingWindowLimiter
from devmon_sync.client.transport import LOG_FILE_ONLY, MAX_SERVER_WAIT_S, SERVER_WAIT_MARGIN_S

__all__ = [
    "LIMITER_MARGIN_S",
    "LOG_FILE_ONLY",
    "MAX_SERVER_WAIT_S",
    "MIN_PACE_PER_MINUTE",
    "SERVER_WAIT_MARGIN_S",
    "VERSION_SEGMENT",
    "AnswerTooLargeError",
    "ApiClient",
    "ApiError",
    "AuthError",
    "BadRequestError",
    "ForbiddenError",
    "InsecureUrlError",
    "NetworkError",
    "NotFoundError",
    "RateLimitedError",
    "RequestTooLargeError",
    "ServiceUnavailableError",
    "SlidingWindowLimiter",
    "network_reason",
    "normalise_base_url",
]

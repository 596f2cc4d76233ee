"""What a refusal means, read from its words rather than its exact wording or status.

The spec fixes neither the status of a rate-limit answer nor the wording of any error: it
says only that the rate-limit ``message`` "states the limit ... followed by the seconds to
wait".  A real service may say "Retry after 12 seconds", "Please wait 10 seconds" or "try
again in 1 minute", carry it by 429, 403 or 400, and refuse an over-large request with
"Too many points", "Requested data exceeds the maximum of 50000 data points per request" or
"The time range may not exceed 30 days", by 400, 413 or 422.  Matching devmon's own server's
words would make a sync that aborts (or, worse, records a rate limit as "no permission" and
skips the data) against any other service, so the client reads meaning instead:

- an answer that asks for a wait of N seconds (or minutes) is a rate-limit answer, whatever
  its status;
- a 400/413/422 whose message speaks of a maximum, a limit or something too many/long/large,
  about points, epochs, records, a date range or a response, is "request too large": the
  caller halves, and learns the limit when the message states one.

Pure functions on text: no HTTP, no state.
"""

from __future__ import annotations

import re
from collections.abc import Iterable
from dataclasses import dataclass

TOO_LARGE_STATUSES = (400, 413, 422)
"""Statuses a "request too large" refusal comes with (413: Content Too Large, 422: Unprocessable
Content); 413 needs no words to mean it."""

_NUMBER = r"(\d[\d,_']*(?:\.\d+)?)"
_UNIT_S = {"ms": 0.001, "millisecond": 0.001, "s": 1.0, "sec": 1.0, "second": 1.0,
           "min": 60.0, "minute": 60.0}
_WAIT_RE = re.compile(
    r"(?:retry|try\s+again|wait|again\s+in|available\s+in|resets?\s+in|after)"
    r"\D{0,40}?" + _NUMBER + r"\s*(milliseconds?|ms|seconds?|secs?|s|minutes?|mins?)\b",
    re.IGNORECASE)
_PER_MINUTE_RE = re.compile(_NUMBER + r"\s*(?:requests?|calls?)\s*(?:per|/|a|an|each)\s*"
                            r"(minute|min|hour|second|sec|s)\b", re.IGNORECASE)

_SIZE_WORDS = re.compile(
    r"too\s+(?:many|long|large|much|big|wide)|exceed|maximum|\bmax\b|\blimit|at\s+most|"
    r"more\s+than|no\s+more\s+than|not\s+be\s+(?:longer|larger|more)|beyond|allowed",
    re.IGNORECASE)
_POINT_WORDS = re.compile(r"\b(?:data\s*)?(?:points?|values?|readings?|records?|rows?|"
                          r"epochs?|solutions?|samples?|results?|measurements?)\b",
                          re.IGNORECASE)
_RANGE_WORDS = re.compile(r"\b(?:date|time)\s*range|\brange\b|\bperiod\b|\bspan\b|\bwindow\b|"
                          r"\binterval\b|\bdays?\b|\bhours?\b|\bweeks?\b", re.IGNORECASE)
_RESPONSE_WORDS = re.compile(r"\b(?:response|answer|result|payload|data)\b", re.IGNORECASE)
_LIMIT_NUMBER_RE = re.compile(
    r"(?:maximum|\bmax\b\.?|limit(?:ed)?|at\s+most|exceed(?:s|ed)?|more\s+than|allowed|"
    r"up\s+to\s+a\s+maximum)\D{0,25}?" + _NUMBER + r"\s*([a-z]+)?", re.IGNORECASE)
_DAYS_PER = {"day": 1.0, "days": 1.0, "d": 1.0, "hour": 1 / 24, "hours": 1 / 24,
             "h": 1 / 24, "week": 7.0, "weeks": 7.0}


@dataclass(frozen=True)
class TooLarge:
    """A refusal of a request whose answer would be too large."""

    what: str
    """``points`` (too many points or epochs), ``range`` (too long a date range) or
    ``size`` (the answer as a whole: halving helps, no limit learned)."""
    limit: float | None = None
    """The limit the message states: points per request, or days per range; None if none."""


def wait_seconds(message: str | None) -> float | None:
    """Seconds an answer's text asks to wait before asking again, or None if it asks none.

    "Retry after 12 seconds", "Please wait 10 s", "try again in 1 minute" all count; a number
    that is not a duration ("the limit is 200 requests per minute") does not."""
    match = _WAIT_RE.search(message or "")
    if not match:
        return None
    unit = match.group(2).lower()
    unit = unit if unit in _UNIT_S else unit.rstrip("s") or "s"
    return _number(match.group(1)) * _UNIT_S[unit]


def stated_rate_per_minute(message: str | None) -> float | None:
    """The request rate a rate-limit message states ("200 requests per minute"), per minute."""
    match = _PER_MINUTE_RE.search(message or "")
    if not match:
        return None
    per = match.group(2).lower()
    scale = 1.0 if per.startswith("min") else 1 / 60 if per.startswith("h") else 60.0
    return _number(match.group(1)) * scale


def too_large(status: int, message: str | None) -> TooLarge | None:
    """The meaning of a refusal if it says the answer would be too large, else None.

    Array-length limits ("at most 200 items in uuids") are not size refusals: halving a
    time window would not help, so they stay ordinary bad requests."""
    text = message or ""
    if status not in TOO_LARGE_STATUSES or wait_seconds(text) is not None:
        return None
    if not _SIZE_WORDS.search(text):
        return TooLarge("size") if status == 413 else None
    limit, unit = _stated_limit(text)
    if _POINT_WORDS.search(text) and unit not in _DAYS_PER:
        return TooLarge("points", limit)
    if _RANGE_WORDS.search(text):
        days = limit * _DAYS_PER[unit] if limit is not None and unit in _DAYS_PER else None
        return TooLarge("range", days)
    if status == 413 or _RESPONSE_WORDS.search(text):
        return TooLarge("size")
    return None


def _stated_limit(text: str) -> tuple[float | None, str]:
    """The number a limit phrase names and the word after it ("50000", "data")."""
    match = _LIMIT_NUMBER_RE.search(text)
    if not match:
        return None, ""
    return _number(match.group(1)), (match.group(2) or "").lower()


def _number(text: str) -> float:
    return float(re.sub(r"[,_']", "", text))


_ACCEPTED_LIST = re.compile(r"\b(?:accepted|allowed|supported|valid|known|expected|available|"
                            r"permitted|one\s+of|use)\b", re.IGNORECASE)


def refused_names(message: str | None, sent: Iterable[str]) -> list[str]:
    """The query parameters among ``sent`` that a 400 refuses, read from its words.

    A refusal often goes on to list what the service accepts ("Unknown query parameter
    'includeInactiveSensors'; accepted: includeSensors, limit, offset"): the names before such
    a list are the refused ones.  When every name comes after it ("Parameter not allowed:
    includeFormulas"), only the first named is taken, so an accepted option is never dropped
    on a guess (the next refusal names the next one).
    """
    text = message or ""
    where = {name: _position(text, name) for name in sent}
    named = sorted((at, name) for name, at in where.items() if at is not None)
    if not named:
        return []
    cut = _ACCEPTED_LIST.search(text)
    before = [name for at, name in named if cut is None or at < cut.start()]
    return before or [named[0][1]]


def _position(text: str, name: str) -> int | None:
    """Where ``name`` first stands in ``text`` as a whole word (None: nowhere)."""
    found = re.search(rf"(?<![A-Za-z0-9_]){re.escape(name)}(?![A-Za-z0-9_])", text,
                      re.IGNORECASE)
    return None if found is None else found.start()

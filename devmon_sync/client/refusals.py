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
  caller halves, and learns the limit when the message states one;
- a refusal whose message says a start (date, time) is in the future, or later than now,
  refuses a start beyond the service's own clock: the caller asks again within it.

The service's clock is read here too, from its headers: a ``Retry-After`` may be an HTTP date
(RFC 9110), which means something only against the service's own ``Date``, and a clock ten
minutes off devmon's turns "8 seconds" into "0" when read against devmon's.

Pure functions on text and numbers: no HTTP, no state.
"""

from __future__ import annotations

import re
from collections.abc import Iterable, Sequence
from dataclasses import dataclass
from datetime import UTC, datetime
from email.utils import parsedate_to_datetime

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


_START_WORDS = re.compile(r"\bstart(?:[\s_-]*(?:date|time))?|\bfrom\b|\bbegin", re.IGNORECASE)
_FUTURE_WORDS = re.compile(
    r"\bfuture\b|\b(?:later|after|beyond|past|greater|newer)\s+(?:than\s+)?(?:now|today|"
    r"the\s+current|current|the\s+present|the\s+server|this\s+service)|\bnot\s+yet\b|"
    r"\bahead\s+of\b", re.IGNORECASE)


def start_in_future(message: str | None) -> bool:
    """Whether a refusal says the request's start is in the service's future ("startDate is
    in the future", "Start date must not be later than the current time"): the service's
    clock is behind the start asked, and asking again within it will do."""
    text = message or ""
    return bool(_START_WORDS.search(text) and _FUTURE_WORDS.search(text))


def http_date(value: str | None) -> datetime | None:
    """An HTTP-date header (``Date``, ``Retry-After``) as a UTC datetime; None when absent or
    unreadable."""
    if not value:
        return None
    try:
        when = parsedate_to_datetime(value)
    except (TypeError, ValueError, IndexError):
        return None
    return when.replace(tzinfo=UTC) if when.tzinfo is None else when.astimezone(UTC)


def retry_after_seconds(value: str | None, answer_date: str | None,
                        service_now: datetime) -> float | None:
    """Seconds a ``Retry-After`` asks to wait (none below 0); None when absent or unreadable.

    Seconds are seconds.  An HTTP date is read against the service's own clock: the ``Date``
    of the same answer, else ``service_now`` (devmon's estimate of it), never devmon's clock,
    which may be minutes off."""
    reading = _retry_after_reading(value, answer_date, service_now, True)
    return None if reading is None else reading[0]


@dataclass(frozen=True)
class AskedWait:
    """A wait an answer asks for: the seconds devmon waits, and what the answer said."""

    seconds: float
    said: str = ""
    """What the answer said, when it is more than one plain number (a Retry-After date and
    the clock it was read against, a header and words that differ): for the messages."""
    unsure: bool = False
    """The answer named a time too far off to be meant, by a clock that may not be the
    service's: ``seconds`` is devmon's own bounded wait instead (then it asks again)."""


def asked_wait(retry_after: str | None, answer_date: str | None, service_now: datetime,
               service_clock_known: bool, message_s: float | None, longest_s: float,
               unsure_wait_s: float) -> AskedWait | None:
    """The wait an error answer asks for, from its ``Retry-After`` and its words
    (``message_s``); None when it asks none.

    A clock difference must never turn a short wait into a stop: a Retry-After date is read
    against the answer's own ``Date`` (else the service's clock as devmon knows it), and when
    the header and the words disagree (a proxy's clock dated one, the service the other), the
    smaller positive one is waited (a wait too short is asked again; one too long may stop
    the sync).  A date still longer than ``longest_s`` that no ``Date`` of the service
    anchors (devmon's clock is all there is) waits ``unsure_wait_s`` and asks again."""
    header = _retry_after_reading(retry_after, answer_date, service_now, service_clock_known)
    header_s = None if header is None else header[0]
    said = [] if header is None else [header[1]]
    if message_s is not None:
        said.append(f"its message: {message_s:g} s")
    positive = [s for s in (header_s, message_s) if s is not None and s > 0]
    if positive:
        seconds = min(positive)
    elif header_s is None and message_s is None:
        return None
    else:
        seconds = 0.0  # a date already past, or "0": ask again at once
    plain = (header is None or not header[2]) and \
        (header_s is None or message_s is None or header_s == message_s)
    if header is not None and seconds == header_s and seconds > longest_s and header[3]:
        return AskedWait(unsure_wait_s, "; ".join(said), unsure=True)
    return AskedWait(seconds, "" if plain else "; ".join(said))


def _retry_after_reading(value: str | None, answer_date: str | None, service_now: datetime,
                         service_clock_known: bool) -> tuple[float, str, bool, bool] | None:
    """(seconds, what was said, whether it was a date, whether only devmon's clock read it)
    of a Retry-After header; None when absent or unreadable."""
    if not value:
        return None
    try:
        return max(0.0, float(value)), f"Retry-After: {value}", False, False
    except ValueError:
        pass
    when = http_date(value)
    if when is None:
        return None
    own = http_date(answer_date)
    if own is not None:
        now, label = own, "by the answer's Date"
    else:
        now, label = service_now, ("by the service's clock as its answers showed it"
                                   if service_clock_known else "by devmon's clock")
    seconds = max(0.0, (when - now).total_seconds())
    unanchored = own is None and not service_clock_known
    return seconds, f"Retry-After: {value}, {seconds:.0f} s away {label}", True, unanchored


ODD_DATE_S = 60.0
"""A ``Date`` that differs from most recent ones by more than this is taken as odd (a cached
answer, a proxy's clock) until more answers agree with it."""


def service_offset_s(offsets_s: Sequence[float]) -> float | None:
    """The service's clock minus devmon's, from the offsets recent ``Date`` headers showed
    (oldest first): the latest that most of them agree with (one odd header does not move it;
    a clock set right is followed once most answers say so); with no majority, the oldest
    view is kept.  None when no answer carried a readable ``Date``."""
    if not offsets_s:
        return None
    for candidate in reversed(offsets_s):
        agreeing = sum(abs(o - candidate) <= ODD_DATE_S for o in offsets_s)
        if 2 * agreeing > len(offsets_s):
            return candidate
    return offsets_s[0]


def clock_difference(offset_s: float | None) -> str:
    """The service's clock against devmon's, in a person's words ("10 min behind devmon's")."""
    if offset_s is None:
        return "unknown (no answer said its time)"
    size = abs(offset_s)
    if size < 1:
        return "within a second of devmon's"
    amount = f"{size:.0f} s" if size < 120 else f"{size / 60:.0f} min" if size < 7200 \
        else f"{size / 3600:.0f} h" if size < 172800 else f"{size / 86400:.0f} days"
    return f"{amount} {'behind' if offset_s < 0 else 'ahead of'} devmon's"

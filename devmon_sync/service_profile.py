"""What the client knows about the service it talks to: defaults, overridden by what it saw.

The spec leaves response limits "not shown", and a real service may cap an answer silently
(status 200, fewer points) instead of refusing it.  ``api_contract`` holds devmon's *guesses*
(what the reference server enforces); this profile holds what the client *observed* of one
service, per base URL, stored in the mirror so that the next sync plans within it from its
first request.  The client's correctness never depends on the profile being right: every
answer is still checked for completeness (``devmon_sync.sync.proof.judge``); the profile only
saves the requests that a wrong guess would cost.

Pure values: no HTTP, no SQL (``Mirror.load_profile`` / ``save_profile`` store it).
"""

from __future__ import annotations

import dataclasses
import json
from dataclasses import dataclass, field
from datetime import datetime, timedelta, timezone

from devmon_sync import api_contract as contract

KINDS = ("readings", "gnss")

# --- What devmon assumes of a service it has not seen yet -------------------------------------
# api_contract's choices (the reference server's), taken as *defaults* only: every client
# module reads them from here, and what is observed of a service (this profile) overrides
# them.  Nothing the client proves depends on them being right.
DEVICES_QUERY = contract.DEVICES_QUERY
"""GET /devices option names devmon asks with first (the spec shows only includeSensors);
refused ones are dropped, ignored ones detected (``devmon_sync.sync.metadata_check``)."""
DEVICE_GROUPS_QUERY = contract.DEVICE_GROUPS_QUERY
QUERY_TRUE, QUERY_FALSE = contract.QUERY_TRUE, contract.QUERY_FALSE
PAGE_SIZE = contract.PAGE_SIZE_MAX
"""Items asked per list page until the user says otherwise (``--page-size``)."""
DEFAULT_LIMITS = contract.DEFAULT_LIMITS
"""Planning limits for a service that has refused and cut nothing yet."""
ResponseLimits = contract.ResponseLimits
FORMULA_FIELD = contract.FORMULA_FIELD
API_KEY_HEADER = contract.API_KEY_HEADER  # spec section 5
RATE_LIMIT_PER_MINUTE = contract.RATE_LIMIT_PER_MINUTE  # spec section 8
RATE_LIMIT_WINDOW_S = contract.RATE_LIMIT_WINDOW_S
SLOW_ANSWER_GRACE_S = 50.0
"""How long an answer may lag behind the slowest rate devmon waits for (1 kB/s) after its
first byte before it is cut as too slow (the spec shows no speed).  Two such answers take
under two minutes, so a service that drips is told in about that time."""
SLOW_ANSWERS_TO_STOP = 2
"""Too-slow answers in a row (no whole answer between them) that end the requests: a
service that drips is unusable now, and nine attempts of it took 17 minutes (audit)."""
SLOW_STOP_AFTER_S = 60.0
"""...once they have cost at least this long together: answers cut in seconds (short
timeouts, a flaky proxy) are retried as before; minutes lost twice in a row are not."""
MAX_ANSWER_BYTES = 64 * 1024 * 1024
"""Most bytes devmon reads of one answer, counted both as they come off the wire and as
decoded (a gzip bomb is small on the wire): past it, the answer is dropped unread and its
window asked again in smaller windows (``client.transport``).  devmon's answers are a few
MB (100,000 points of readings are 5 MB); a 2 GiB answer took a sync to 2.2 GB and a gzip
bomb to 3 GB (audit).  The spec shows no size: devmon's choice, the same for every
service (a client option, ``max_answer_bytes``, for tests)."""
MAX_ANSWER_VALUES = 1_500_000
"""Most values (points' fields and items, counted by the commas between them) devmon parses
of one data answer: a point read by the decoder's slow path costs about 650 bytes, so 3
million extra points in one answer took a sync to 2.1 GB (audit).  1.5 million is 500,000
points of two fields, five times the most devmon plans an answer for; past it the answer is
dropped unparsed and its window asked smaller, as past ``MAX_ANSWER_BYTES``."""
CLOCK_TOLERANCE = timedelta(minutes=10)
"""How far after the service's own now (its ``Date``) a point may be stamped and still be
taken as stamped by a right clock: loggers' and services' clocks differ by seconds to
minutes.  A later point was stamped by a wrong clock (or is a forecast): it is kept and
reported, and never becomes its stream's cursor (``devmon_sync.sync.future_points``).  The
spec says nothing of it: devmon's choice, the same for every service."""


def daily(function: str) -> dict:
    """The aggregation object devmon asks for one value per UTC day (the spec does not show
    its shape: the reference server's, ``api_contract.AGGREGATION_*``; a service that refuses
    or ignores it is remembered, ``ServiceProfile.aggregation``)."""
    return {"interval": "1d", "function": function}


@dataclass(frozen=True)
class KindProfile:
    """What was observed of one kind of data answer (readings or GNSS epochs)."""

    largest_answer: int = 0
    """Most points (epochs) one answer ever held: an answer that size may have been cut."""
    silent_cap: int | None = None
    """Most points one answer holds, learned when a cut answer was proved short."""
    silent_cap_per_series: int | None = None
    """Most points one series of an answer holds, learned likewise."""
    silent_range_days: float | None = None
    """Longest date range the service answers in full, learned from a clipped answer."""
    cut_answers: int = 0
    """Answers proved short so far (a count, for ``devmon status``)."""
    refused_above: int | None = None
    """Most points (epochs) one answer may hold, as a "too large" refusal stated."""
    refused_range_days: float | None = None
    """Longest date range one request may span, as a "too large" refusal stated."""


@dataclass(frozen=True)
class Refusals:
    """How the service words and carries its refusals (the spec shows neither), as seen."""

    rate_limit_status: int | None = None
    """Status of the last answer that asked for a wait (429, 403, 400, ...)."""
    rate_limit_message: str | None = None
    """Its words, as an example for ``devmon status`` and ``devmon probe``."""
    stated_per_minute: float | None = None
    """The request rate a rate-limit answer stated: the client paces itself to it."""
    too_large_status: int | None = None
    """Status of the last "request too large" refusal (400, 413, 422, ...)."""
    too_large_message: str | None = None


@dataclass(frozen=True)
class UserLimits:
    """Limits the user gave (``--max-points`` ...): they win over defaults and what was
    learned of the service, until the service itself refuses them."""

    max_points: int | None = None
    max_epochs: int | None = None
    max_range_days: float | None = None
    page_size: int | None = None


@dataclass(frozen=True)
class ListPaging:
    """What was observed of how the service pages a list (GET /devices)."""

    style: str | None = None
    """offset | page | cursor | none, as its answers showed (None: not seen yet)."""
    page_cap: int | None = None
    """Most items an offset page holds whatever was asked, learned when a page shorter than
    asked was followed by more."""
    short_page_is_last: bool = False
    """Proved: a page shorter than asked was followed by an empty one."""


@dataclass(frozen=True)
class ServiceProfile:
    """The client's knowledge of one service (one base URL)."""

    base_url: str
    readings: KindProfile = field(default_factory=KindProfile)
    gnss: KindProfile = field(default_factory=KindProfile)
    updated_at: datetime | None = None
    lists: ListPaging = field(default_factory=ListPaging)
    refusals: Refusals = field(default_factory=Refusals)
    api_url: str | None = None
    """Where the API answered: ``base_url`` itself, or it with ``/v1`` added or taken off."""
    refused_options: tuple[tuple[str, str], ...] = ()
    """(list path, query parameter) the service refused as unknown: the next run asks
    without them from its first request (``devmon probe`` measures them afresh)."""
    aggregation: str | None = None
    """Whether the service answers devmon's daily aggregation (``daily``): "daily" (it
    does), "refused" (a 400), "ignored" (raw points came back); None: not asked yet."""

    def of(self, kind: str) -> KindProfile:
        return getattr(self, kind)

    def with_kind(self, kind: str, **changes) -> "ServiceProfile":
        """A copy with ``changes`` applied to one kind's profile."""
        updated = dataclasses.replace(self.of(kind), **changes)
        return dataclasses.replace(self, **{kind: updated},
                                   updated_at=datetime.now(timezone.utc))

    def saw_answer(self, kind: str, points: int) -> "ServiceProfile":
        """Note an answer's size (the largest one is the plateau a silent cap would make)."""
        if points <= self.of(kind).largest_answer:
            return self
        return self.with_kind(kind, largest_answer=points)

    def planning_limits(self, limits: ResponseLimits,
                        user: UserLimits = UserLimits()) -> ResponseLimits:
        """``limits`` tightened by what was learned of this service (caps it cut answers at,
        limits its refusals stated), then replaced by what the user gave."""
        r, g = self.readings, self.gnss
        points = _min(_min(limits.max_points, r.silent_cap), r.refused_above)
        epochs = _min(_min(limits.max_epochs, g.silent_cap), g.refused_above)
        days = min([limits.max_range_days] + [d for d in (
            r.silent_range_days, g.silent_range_days, r.refused_range_days,
            g.refused_range_days) if d])
        return dataclasses.replace(
            limits, max_points=user.max_points or points, max_epochs=user.max_epochs or epochs,
            max_range_days=user.max_range_days or days)

    def refused(self, kind: str, what: str, limit: float | None, status: int,
                message: str) -> "ServiceProfile":
        """Note a "too large" refusal of a ``kind`` request and the limit it stated."""
        profile = dataclasses.replace(self, refusals=dataclasses.replace(
            self.refusals, too_large_status=status, too_large_message=message))
        if limit is None or what not in ("points", "range"):
            return dataclasses.replace(profile, updated_at=datetime.now(timezone.utc))
        if what == "points":
            return profile.with_kind(kind, refused_above=max(1, int(limit)))
        return profile.with_kind(kind, refused_range_days=float(limit))

    def rate_limited(self, status: int, message: str,
                     stated_per_minute: float | None) -> "ServiceProfile":
        """Note a rate-limit answer (and the rate it stated, if any)."""
        refusals = dataclasses.replace(
            self.refusals, rate_limit_status=status, rate_limit_message=message,
            stated_per_minute=stated_per_minute or self.refusals.stated_per_minute)
        return dataclasses.replace(self, refusals=refusals, updated_at=datetime.now(timezone.utc))

    def to_json(self) -> str:
        data = dataclasses.asdict(self)
        data["updated_at"] = self.updated_at.isoformat() if self.updated_at else None
        return json.dumps(data, sort_keys=True)

    @classmethod
    def from_json(cls, base_url: str, text: str | None) -> "ServiceProfile":
        """The stored profile; fields a newer or older devmon wrote are kept or defaulted."""
        if not text:
            return cls(base_url)
        data = json.loads(text)
        kinds = {k: _stored(KindProfile, data.get(k)) for k in KINDS}
        stamp = data.get("updated_at")
        return cls(base_url, updated_at=datetime.fromisoformat(stamp) if stamp else None,
                   api_url=data.get("api_url"), aggregation=data.get("aggregation"),
                   refused_options=tuple(sorted(
                       (str(path), str(name)) for path, name in
                       data.get("refused_options") or ())),
                   lists=_stored(ListPaging, data.get("lists")),
                   refusals=_stored(Refusals, data.get("refusals")), **kinds)

    def describe(self) -> list[str]:
        """Lines for ``devmon status``: what was learned, in words."""
        lines = []
        if self.api_url and self.api_url != self.base_url:
            lines.append(f"  the API answers at {self.api_url} (not at the address given)")
        for kind, unit in (("readings", "points"), ("gnss", "epochs")):
            k = self.of(kind)
            learned = [f"largest answer {k.largest_answer:,} {unit}"]
            if k.silent_cap:
                learned.append(f"cuts answers at {k.silent_cap:,} {unit} without an error")
            if k.silent_cap_per_series:
                learned.append(f"cuts each series at {k.silent_cap_per_series:,} {unit}")
            if k.silent_range_days:
                learned.append(f"answers at most {k.silent_range_days:g} days of a range")
            if k.cut_answers:
                learned.append(f"{k.cut_answers} answers proved short and completed")
            if k.refused_above:
                learned.append(f"refuses answers over {k.refused_above:,} {unit}")
            if k.refused_range_days:
                learned.append(f"refuses ranges over {k.refused_range_days:g} days")
            lines.append(f"  {kind}: " + "; ".join(learned))
        paging = self.lists
        if paging.style:
            how = {"offset": "limit/offset", "page": "page/pageSize with a total",
                   "cursor": "a cursor token", "none": "no paging (all at once)"}[paging.style]
            if paging.page_cap:
                how += f", at most {paging.page_cap:,} items a page whatever is asked"
            elif paging.short_page_is_last:
                how += ", a page shorter than asked is the last"
            lines.append(f"  lists (GET /devices): paged by {how}")
        if self.refused_options:
            lines.append("  options refused as unknown: " + ", ".join(
                f"{name} on {path}" for path, name in self.refused_options))
        said = self.refusals
        if said.rate_limit_status:
            pace = f"; devmon paces to {said.stated_per_minute:g} a minute" \
                if said.stated_per_minute else ""
            lines.append(f"  rate limit: HTTP {said.rate_limit_status} "
                         f"{said.rate_limit_message!r}{pace}")
        if said.too_large_status:
            lines.append(f"  too large: HTTP {said.too_large_status} {said.too_large_message!r}")
        return lines


def _stored(kind, data: dict | None):
    """A stored part of the profile; fields another devmon version wrote are kept or
    defaulted."""
    return kind(**{f.name: (data or {}).get(f.name, f.default) for f in dataclasses.fields(kind)})


def _min(default: int, learned: int | None) -> int:
    return default if learned is None else max(1, min(default, learned))

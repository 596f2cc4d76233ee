"""What the client knows about the service it talks to: defaults, overridden by what it saw.

The spec leaves response limits "not shown", and a real service may cap an answer silently
(status 200, fewer points) instead of refusing it.  ``api_contract`` holds devmon's *guesses*
(what the reference server enforces); this profile holds what the client *observed* of one
service, per base URL, stored in the mirror so that the next sync plans within it from its
first request.  The client's correctness never depends on the profile being right: every
answer is still checked for completeness (``devmon_sync.completeness``); the profile only
saves the requests that a wrong guess would cost.

Pure values: no HTTP, no SQL (``Mirror.load_profile`` / ``save_profile`` store it).
"""

from __future__ import annotations

import dataclasses
import json
from dataclasses import dataclass, field
from datetime import datetime, timezone

from devmon_sync import api_contract as contract

KINDS = ("readings", "gnss")


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

    def planning_limits(self, limits: contract.ResponseLimits) -> contract.ResponseLimits:
        """``limits`` tightened by the caps learned of this service."""
        points = _min(limits.max_points, self.readings.silent_cap)
        epochs = _min(limits.max_epochs, self.gnss.silent_cap)
        days = min([limits.max_range_days] + [d for d in (self.readings.silent_range_days,
                                                          self.gnss.silent_range_days) if d])
        return dataclasses.replace(limits, max_points=points, max_epochs=epochs,
                                   max_range_days=days)

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
        kinds = {k: KindProfile(**{f.name: data.get(k, {}).get(f.name, f.default)
                                   for f in dataclasses.fields(KindProfile)}) for k in KINDS}
        stamp = data.get("updated_at")
        lists = ListPaging(**{f.name: (data.get("lists") or {}).get(f.name, f.default)
                              for f in dataclasses.fields(ListPaging)})
        return cls(base_url, updated_at=datetime.fromisoformat(stamp) if stamp else None,
                   lists=lists, **kinds)

    def describe(self) -> list[str]:
        """Lines for ``devmon status``: what was learned, in words."""
        lines = []
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
        return lines


def _min(default: int, learned: int | None) -> int:
    return default if learned is None else max(1, min(default, learned))

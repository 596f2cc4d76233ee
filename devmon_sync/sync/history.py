"""The start of each stream's history, whatever ``createdAt`` says.

A parameter's ``createdAt`` is when its record was made, not when its data begins: archives
are imported, loggers upload what they buffered before being registered, and a platform
migration re-creates every record with a new date over years of data.  A sync that starts
each stream at ``createdAt`` loses all of that in silence.

So once per stream the sync searches back from its origin: the earliest of its creation,
its oldest mirrored point and the start of the oldest window that proved it.  Each round
asks the span of one request (the longest range the service accepts) before the origin,
streams of one origin packed together (a window never reaches into what is mirrored).  The
search ends once the service is shown to hold nothing of the stream for ``MIN_SILENCE``
before the oldest point found; data found goes in the mirror like any other (the windows are
proved like the plan's) and the next round starts where this one did.  The mirror remembers
where each search ended (``history_searched_to``), so it is never asked again.  The bound,
stated: older history separated from the rest by more than a span of silence is not found.

Pure planning: the engine fetches the windows and tells ``advance`` what the mirror holds.
"""

from __future__ import annotations

import dataclasses
from dataclasses import dataclass, field
from datetime import datetime, timedelta

from devmon_sync import service_profile as assumed
from devmon_sync.sync.plan import HISTORY_SIDE, Stream, Window, pack

_MS = timedelta(milliseconds=1)
SIDE = HISTORY_SIDE
"""Windows of the search carry this ``side``: planned on the guess that they are empty, so a
refusal says that guess was wrong, not that the budget was."""
MIN_SILENCE = timedelta(days=7)
"""Nothing for this long before the oldest point found ends the search."""


@dataclass
class HistorySearch:
    """The search of one kind of stream (readings or GNSS epochs), round by round."""

    kind: str
    span: timedelta
    """How far back one round looks: the longest range one request may span."""
    floor: datetime | None = None
    """Nothing before this is wanted (``--since``)."""
    origin: dict[str, datetime] = field(default_factory=dict)
    """Per stream still searched: where what is proved of it starts."""
    done: dict[str, datetime] = field(default_factory=dict)
    """Per stream whose search ended: where."""
    older: set[str] = field(default_factory=set)
    """Streams found to hold data from before their origin."""

    @classmethod
    def of(cls, kind: str, origins: dict[str, datetime], span: timedelta,
           floor: datetime | None) -> HistorySearch:
        """A search from each stream's origin; one already at the floor is done."""
        s = cls(kind, span, floor)
        for key, t in origins.items():
            if floor is not None and t <= floor:
                s.done[key] = floor
            else:
                s.origin[key] = t
        return s

    @property
    def open(self) -> list[str]:
        return sorted(self.origin)

    def _probe_start(self, key: str) -> datetime:
        start = self.origin[key] - self.span
        return start if self.floor is None else max(start, self.floor)

    def windows(self, limits: assumed.ResponseLimits) -> list[Window]:
        """This round's requests: every open stream over the span before its origin, those
        of one origin packed together, planned empty (a stream found dense is cut by the
        engine)."""
        by_origin: dict[datetime, list[Stream]] = {}
        for k in self.open:
            by_origin.setdefault(self.origin[k], []).append(
                Stream(k, self._probe_start(k), self.origin[k] - _MS, 0.0))
        return [dataclasses.replace(w, side=SIDE) for streams in by_origin.values()
                for w in pack(self.kind, streams, 1.0, limits)]

    def counted(self, key: str, start: datetime, found: bool) -> dict[str, datetime]:
        """Read a counting round: the service's daily counts from ``start`` to the stream's
        origin held data the mirror lacked (``found``: fetched since) or none, which is at
        least ``MIN_SILENCE`` of nothing.  Returns the stream's end of search, if it ended."""
        if found:
            self.older.add(key)
        if found and (self.floor is None or start > self.floor):
            self.origin[key] = start
            return {}
        del self.origin[key]
        self.done[key] = start
        return {key: start}

    def advance(self, first_points: dict[str, datetime]) -> dict[str, datetime]:
        """Read the round's outcome (each stream's oldest point in the mirror now): a stream
        with data before its origin and less than ``MIN_SILENCE`` of nothing before that
        data goes on from this round's start; the others are done.  Returns the streams done
        this round, with where their search ended."""
        ended: dict[str, datetime] = {}
        for key in self.open:
            start = self._probe_start(key)
            first = first_points.get(key)
            found = first is not None and first < self.origin[key]
            if found:
                self.older.add(key)
            if found and first - start < MIN_SILENCE and (self.floor is None
                                                          or start > self.floor):
                self.origin[key] = start
                continue
            ended[key] = start
            del self.origin[key]
        self.done.update(ended)
        return ended


def clusters(origins: dict[str, datetime], reach: timedelta) -> list[list[str]]:
    """The keys of ``origins`` in groups whose origins lie within ``reach`` of each other
    (earliest first): one counting request covers a group."""
    out: list[list[str]] = []
    first = None
    for key in sorted(origins, key=lambda k: (origins[k], k)):
        if first is None or origins[key] - first > reach:
            out.append([])
            first = origins[key]
        out[-1].append(key)
    return out


def origins(rows: list[tuple[str, datetime | None, datetime | None, datetime | None]]
            ) -> dict[str, datetime]:
    """Each stream's origin from (key, creation, oldest point, oldest proved window start);
    a stream with no data and no window yet has none (it is searched once it has some)."""
    out = {}
    for key, created, first, proved in rows:
        if first is None and proved is None:
            continue
        out[key] = min(t for t in (created, first, proved) if t is not None)
    return out

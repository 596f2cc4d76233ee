"""Request planning: pack streams into as few data requests as the server's limits allow.

Pure functions on plain values (no HTTP, no SQL), so the packing can be tested on its own.

A *stream* is one parameter's readings or one GNSS sensor's epochs over [start, end], with
an expected rate from its sampling period.  A *window* is one request: some streams over one
date range.  Every request may name at most ``max_selector_items`` streams, span at most
``max_range_days`` and return at most ``max_points`` (``max_epochs``); a window is planned to
return ``budget`` of that (a fill factor below 1, because sampling periods only estimate how
many points there are), and is cut where its streams are expected to reach the budget.

Two costs are weighed: each batch of streams ends with a part-filled window, so batches
should be large; and a window fetches every stream it names over its whole range, so a
stream whose data before its start is already mirrored (an incremental sync) would be
fetched again from the window's start.  Streams are therefore sorted by start and a batch
stops taking streams when what it would fetch twice exceeds a quarter of a request.
"""

from __future__ import annotations

from dataclasses import dataclass, field, replace
from datetime import datetime, timedelta, timezone

import numpy as np

from devmon_sync import service_profile as assumed

FILL = 0.96  # of a server limit a planned request may use; a refusal halves the window
REFETCH_ALLOWANCE = 0.25  # of a request's budget a batch may spend re-reading mirrored data
MIN_WINDOW_MS = 60_000  # no window is cut shorter than this, whatever the rate
_MS = timedelta(milliseconds=1)
HISTORY_SIDE = "history"
"""``Window.side`` of the search for the start of a stream's history (``sync.history``):
planned empty, before everything known of its streams."""
PLANNED_SIDES = ("", "heal", HISTORY_SIDE)
"""``Window.side`` of the windows the engine plans (the plan, gaps healed, the search for
the start of history), as opposed to the follow-ups a verdict asks for."""


@dataclass(frozen=True)
class Stream:
    """One stream to fetch over [start, end] (the end is its newest point)."""

    key: str
    start: datetime
    end: datetime
    points_per_s: float
    empty_before: bool = False
    """True when the service holds nothing of it before ``start`` (a first sync from the
    parameter's creation): a window starting earlier costs nothing for it."""


@dataclass
class Window:
    """One planned data request: some streams over [start, end]."""

    kind: str  # readings | gnss
    keys: list[str]
    start: datetime
    end: datetime
    cursors: dict[str, datetime]
    expected_points: float
    origins: dict[str, datetime] = field(default_factory=dict)
    """Streams of the window fetched from their origin (nothing exists before it)."""
    side: str = ""
    """Empty for a planned window; the completeness signal that asked for a follow-up."""

    @property
    def signature(self) -> tuple:
        return (self.kind, tuple(self.keys), self.start, self.end)


def pack(kind: str, streams: list[Stream], budget: float,
         limits: assumed.ResponseLimits) -> list[Window]:
    """Windows that fetch every stream from its start to its end, in as few requests as the
    limits allow (see the module docstring for the rules)."""
    max_span = timedelta(days=limits.max_range_days) * 0.999
    windows: list[Window] = []
    batch: list[Stream] = []
    refetch = 0.0
    for s in sorted(streams, key=lambda s: (s.start, s.key)):
        extra = 0.0 if not batch or s.empty_before else \
            s.points_per_s * (s.start - batch[0].start).total_seconds()
        if batch and (len(batch) >= limits.max_selector_items
                      or refetch + extra > REFETCH_ALLOWANCE * budget):
            windows += walk(kind, batch, budget, max_span)
            batch, refetch, extra = [], 0.0, 0.0
        batch.append(s)
        refetch += extra
    if batch:
        windows += walk(kind, batch, budget, max_span)
    return windows


class _Batch:
    """A batch's streams as arrays of Unix milliseconds, to find window ends quickly."""

    def __init__(self, streams: list[Stream]):
        self.streams = streams
        self.start = np.array([_ms(x.start) for x in streams], dtype=np.int64)
        self.end = np.array([_ms(x.end) for x in streams], dtype=np.int64)
        self.rate_per_ms = np.array([x.points_per_s / 1000.0 for x in streams])
        self.empty_before = np.array([x.empty_before for x in streams], dtype=bool)

    def members(self, t: int, stop: int) -> np.ndarray:
        """Streams a window [t, stop] must name: started by its end, not finished before it."""
        return (self.start <= stop) & (self.end >= t)

    def expected(self, t: int, stop: int) -> float:
        """Points a window [t, stop] is expected to return."""
        counted_from = np.where(self.empty_before, np.maximum(self.start, t), t)
        span = np.clip(np.minimum(stop, self.end) - counted_from, 0, None)
        return float(np.sum(self.rate_per_ms * span, where=self.members(t, stop)))

    def stop_for(self, t: int, limit: int, budget: float) -> int:
        """The latest end (at most ``limit``) of a window from ``t`` expected to stay within
        ``budget``, and never less than a minute after ``t`` (unless ``limit`` is sooner)."""
        if self.expected(t, limit) <= budget:
            return limit
        lo, hi = min(limit, t + MIN_WINDOW_MS), limit
        if self.expected(t, lo) > budget:
            return lo
        while hi - lo > 1:  # expected(lo) <= budget < expected(hi)
            mid = (lo + hi) // 2
            lo, hi = (mid, hi) if self.expected(t, mid) <= budget else (lo, mid)
        return lo


def walk(kind: str, streams: list[Stream], budget: float, max_span: timedelta) -> list[Window]:
    """Windows over one batch, from its earliest start to its latest end, each ending where
    the streams it names are expected to reach the budget (or at the longest range)."""
    batch = _Batch(streams)
    t, end, span = int(batch.start.min()), int(batch.end.max()), _ms_of(max_span)
    out = []
    while t <= end:
        t = max(t, int(batch.start[batch.end >= t].min()))  # skip a stretch nobody needs
        limit = min(end, t + span)
        limit = min(limit, int(batch.end[batch.members(t, limit)].max()))  # no idle tail
        stop = batch.stop_for(t, limit, budget)
        names = [streams[i] for i in np.flatnonzero(batch.members(t, stop))]
        out.append(Window(kind, [x.key for x in names], _dt(t), _dt(stop),
                          {x.key: min(_dt(stop), x.end) for x in names},
                          batch.expected(t, stop),
                          {x.key: x.start for x in names if x.empty_before}))
        t = stop + 1
    return out


def split(w: Window) -> list[Window]:
    """Two halves of a window's time range (both keep the window's streams)."""
    mid = w.start + (w.end - w.start) / 2
    mid = mid.replace(microsecond=mid.microsecond // 1000 * 1000)
    first = replace(w, end=mid, cursors={k: min(c, mid) for k, c in w.cursors.items()},
                    expected_points=w.expected_points / 2)
    second = replace(w, start=mid + _MS, cursors=dict(w.cursors),
                     expected_points=w.expected_points / 2)
    return [first, second]


def split_keys(w: Window) -> list[Window]:
    """Two windows over the same range, each with half of the streams."""
    half = -(-len(w.keys) // 2)
    return [replace(w, keys=keys, cursors={k: w.cursors[k] for k in keys},
                    expected_points=w.expected_points / 2,
                    origins={k: t for k, t in w.origins.items() if k in keys})
            for keys in (w.keys[:half], w.keys[half:])]


_EPOCH = datetime(1970, 1, 1, tzinfo=timezone.utc)


def _ms(t: datetime) -> int:
    """Unix milliseconds of ``t``, rounded down."""
    return _ms_of(t - _EPOCH)


def _ms_of(d: timedelta) -> int:
    return d // timedelta(milliseconds=1)


def _dt(ms: int) -> datetime:
    return _EPOCH + timedelta(milliseconds=ms)

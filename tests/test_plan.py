"""Request planning on its own: coverage, limits, and how close to the fewest requests.

Streams here are regular series (a point every ``period`` seconds on the whole-period grid),
so the points a window really returns can be counted exactly and compared with the plan.
"""

from __future__ import annotations

import math
import random
from datetime import datetime, timedelta, timezone

import pytest

from devmon_sync import api_contract as contract
from devmon_sync.sync.plan import Stream, Window, pack

T0 = datetime(2025, 1, 1, tzinfo=timezone.utc)
LIMITS = contract.ResponseLimits(max_points=100_000, max_range_days=31, max_selector_items=200)
BUDGET = 0.96 * LIMITS.max_points
MS = timedelta(milliseconds=1)


def points_in(s: Stream, start: datetime, end: datetime, period_s: float) -> int:
    """Points of a regular stream in [start, end]: only from its start when the service has
    nothing before it, from any time otherwise (data already mirrored is sent again)."""
    lo = max(start, s.start) if s.empty_before else start
    hi = min(end, s.end)
    if hi < lo:
        return 0
    first = math.ceil((lo - T0).total_seconds() / period_s)
    last = math.floor((hi - T0).total_seconds() / period_s)
    return max(0, last - first + 1)


def check_plan(windows: list[Window], streams: list[Stream], periods: dict[str, float]) -> int:
    """Assert coverage and limits; returns the most points any window returns."""
    by_key = {s.key: s for s in streams}
    seen: dict[str, list[Window]] = {}
    most = 0
    for w in windows:
        assert len(w.keys) <= LIMITS.max_selector_items
        assert w.end - w.start <= timedelta(days=LIMITS.max_range_days)
        assert w.start <= w.end
        assert w.start.microsecond % 1000 == 0 and w.end.microsecond % 1000 == 0
        most = max(most, sum(points_in(by_key[k], w.start, w.end, periods[k]) for k in w.keys))
        for k in w.keys:
            seen.setdefault(k, []).append(w)
    for s in streams:
        mine = sorted(seen[s.key], key=lambda w: w.start)
        assert mine[0].start <= s.start, s.key
        assert mine[-1].end >= s.end and mine[-1].cursors[s.key] == s.end
        for a, b in zip(mine, mine[1:]):  # no gap between a stream's windows
            assert b.start <= a.end + MS, (s.key, a.end, b.start)
            assert a.cursors[s.key] <= b.cursors[s.key]
    return most


def fewest_requests(streams: list[Stream], periods: dict[str, float]) -> int:
    """A lower bound: all points at the full limit; every stream's range at 200 streams a
    request; the time the streams cover at 31 days a request."""
    total = sum(points_in(s, s.start, s.end, periods[s.key]) for s in streams)
    spans = sum(math.ceil((s.end - s.start) / timedelta(days=31)) for s in streams)
    covered, reach = timedelta(0), None
    for s in sorted(streams, key=lambda s: s.start):  # the length of the union of the ranges
        lo = s.start if reach is None else max(s.start, reach)
        covered += max(timedelta(0), s.end - lo)
        reach = s.end if reach is None else max(reach, s.end)
    return max(math.ceil(total / LIMITS.max_points),
               math.ceil(spans / LIMITS.max_selector_items),
               math.ceil(covered / timedelta(days=31)))


def first_sync_streams(n: int, days: int, seed: int, stagger_days: int = 0) -> tuple:
    rng = random.Random(seed)
    streams, periods = [], {}
    for i in range(n):
        period = rng.choice([600.0, 900.0, 3600.0, 3600.0, 86400.0])
        start = T0 + timedelta(days=rng.randint(0, stagger_days)) if stagger_days else T0
        end = T0 + timedelta(days=days) - timedelta(seconds=rng.choice([0, 1800, 7200]))
        key = f"p{i:04d}"
        streams.append(Stream(key, start, end, 1.0 / period, empty_before=True))
        periods[key] = period
    return streams, periods


@pytest.mark.parametrize("n, days, stagger", [(782, 365, 0), (300, 120, 100), (40, 20, 0),
                                              (5, 400, 0), (1, 3, 0)])
def test_a_first_sync_covers_every_stream_within_the_limits_in_near_the_fewest_requests(
        n, days, stagger):
    streams, periods = first_sync_streams(n, days, seed=n, stagger_days=stagger)
    windows = pack("readings", streams, BUDGET, LIMITS)
    most = check_plan(windows, streams, periods)
    assert most <= LIMITS.max_points
    fewest = fewest_requests(streams, periods)
    batches = math.ceil(n / LIMITS.max_selector_items)
    # Each window is planned to 96 % of the limit; each batch may end with one part-filled
    # window; nothing else is lost.
    assert len(windows) <= math.ceil(fewest / 0.96) + batches, (len(windows), fewest)


def test_windows_are_cut_where_the_points_reach_the_budget_not_at_a_fixed_length():
    streams, periods = first_sync_streams(200, 365, seed=7)
    windows = pack("readings", streams, BUDGET, LIMITS)
    full = [sum(points_in(s, w.start, w.end, periods[s.key]) for s in streams
                if s.key in w.keys) for w in windows[:-1]]
    assert min(full) >= 0.95 * BUDGET  # every window but the last is full


def test_streams_created_later_join_when_they_begin_and_a_stretch_nobody_needs_is_skipped():
    early = Stream("early", T0, T0 + timedelta(days=10), 1 / 3600, empty_before=True)
    late = Stream("late", T0 + timedelta(days=100), T0 + timedelta(days=120), 1 / 3600,
                  empty_before=True)
    windows = pack("readings", [early, late], BUDGET, LIMITS)
    assert [w.keys for w in windows] == [["early"], ["late"]]
    assert windows[1].start == late.start and windows[0].end == early.end


def test_an_incremental_sync_does_not_refetch_much_of_what_is_mirrored():
    """Streams whose cursors lie days apart are not batched from the earliest one: a batch
    would fetch the others' mirrored days again."""
    now = T0 + timedelta(days=200)
    streams, periods = [], {}
    for i in range(400):
        behind = timedelta(days=30) if i % 100 == 0 else timedelta(hours=30)  # 4 were offline
        key = f"p{i:03d}"
        streams.append(Stream(key, now - behind, now, 1 / 600))
        periods[key] = 600.0
    windows = pack("readings", streams, BUDGET, LIMITS)
    check_plan(windows, streams, periods)
    fetched = sum(points_in(next(s for s in streams if s.key == k), w.start, w.end, 600.0)
                  for w in windows for k in w.keys)
    needed = sum(points_in(s, s.start, s.end, 600.0) for s in streams)
    assert fetched <= needed + 2 * 0.25 * BUDGET  # at most a quarter request per batch
    assert len(windows) <= math.ceil(needed / BUDGET) + 3


def test_a_stream_faster_than_the_budget_gets_windows_of_at_least_a_minute():
    fast = Stream("fast", T0, T0 + timedelta(minutes=5), 10_000.0, empty_before=True)
    windows = pack("readings", [fast], BUDGET, LIMITS)
    assert all(w.end - w.start >= timedelta(seconds=60) for w in windows[:-1])
    assert windows[-1].cursors["fast"] == fast.end

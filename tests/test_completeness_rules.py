"""The completeness rules on hand-made windows (no server): the cases a large misbehaving
service showed (benchmarks/bench_completeness.py) and the small-world tests did not."""

from __future__ import annotations

import numpy as np

from devmon_sync import completeness

H = 3_600_000  # ms


def facts(n: int, *, start=0, end=48 * H, period=None, newest=None, largest=0,
          expected=1000.0, follow_up=False) -> completeness.WindowFacts:
    full = lambda v: np.full(n, np.nan if v is None else float(v))  # noqa: E731
    return completeness.WindowFacts(
        start, end, tuple(f"k{i}" for i in range(n)), full(start), full(end), full(newest),
        full(period), full(None), np.zeros(n, bool), np.ones(n, bool), full(None), largest,
        expected, follow_up, np.zeros(n, bool))


def answer(points: list[list[int]]) -> completeness.Received:
    codes = np.concatenate([np.full(len(p), i) for i, p in enumerate(points)]).astype(np.int64)
    ts = np.concatenate([np.asarray(p, np.int64) for p in points])
    return completeness.received(len(points), codes, ts)


def test_a_starved_stream_of_unknown_period_is_followed_up_at_a_cap():
    """A cap keeping the first items leaves the last stream empty; a stream read by hand
    has no sampling period, so only the cap's mark (an answer as large as before) shows it."""
    f = facts(2, newest=100 * H, largest=6, expected=20.0)
    got = answer([[0, H, 2 * H, 3 * H, 4 * H, 5 * H], []])
    verdict = completeness.judge(f, got)
    assert any("k1" in x.keys and x.side == "empty" for x in verdict.follow_ups), verdict


def test_an_honest_answer_with_an_empty_manual_stream_is_not_followed_up():
    f = facts(2, newest=100 * H, largest=10_000, expected=6.0)
    got = answer([[0, H, 2 * H, 3 * H, 4 * H, 5 * H], []])
    assert completeness.judge(f, got).whole


def test_a_tail_follow_up_asks_no_more_than_the_answer_covered():
    """A clipped answer covers [start, start + clip]: its follow-up carries that span, so a
    stream whose data lies beyond a genuine gap is not asked (and clipped) in one piece."""
    f = facts(2, period=H, newest=100 * H)
    got = answer([list(range(0, 12 * H + 1, H)), list(range(0, 10 * H + 1, H))])
    tail = [x for x in completeness.judge(f, got).follow_ups if x.side == "tail"]
    assert tail and tail[0].span_ms == 12 * H


def test_at_a_cap_needs_an_exact_plateau_or_a_short_record():
    f = facts(1, largest=100, expected=1000.0)
    assert completeness.at_a_cap(f, 100)  # the same size again
    assert completeness.at_a_cap(f, 500)  # a new largest, well under what was planned
    assert not completeness.at_a_cap(f, 950)  # a new largest, about as planned: honest
    assert not completeness.at_a_cap(f, 99)

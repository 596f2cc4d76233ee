"""The completeness rules on hand-made windows (no server): the cases a large misbehaving
service showed (benchmarks/bench_completeness.py) and the small-world tests did not."""

from __future__ import annotations

import numpy as np

from devmon_sync.sync.proof import judge as completeness

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


# ----------------------------------------------------------------------------- thinning

def _with_period(f: completeness.WindowFacts, got: list[list[int]], **extra):
    """The answer ``got`` as received with the facts' sampling periods."""
    codes = np.concatenate([np.full(len(p), i) for i, p in enumerate(got)]).astype(np.int64)
    ts = np.concatenate([np.asarray(p, np.int64) for p in got])
    from dataclasses import replace
    f = replace(f, **extra)
    return f, completeness.received(len(got), codes, ts, f.period_ms)


def _thin(verdict) -> list:
    return [x for x in verdict.follow_ups if x.side == "thin"]


HOURLY = list(range(0, 48 * H + 1, H))


def test_a_stream_thinned_evenly_is_split_and_compared():
    """Every fourth point, first and last kept: no edge check sees it, the count does."""
    f, got = _with_period(facts(2, period=H, newest=48 * H), [HOURLY, HOURLY[::4]])
    (thin,) = _thin(completeness.judge(f, got))
    assert thin.keys == ("k1",) and thin.span_ms == 24 * H  # halves of the window


def test_an_outage_is_not_thinning():
    """Half the points missing in one block: most gaps are one period, so nothing is asked."""
    outage = HOURLY[:12] + HOURLY[36:]
    f, got = _with_period(facts(2, period=H, newest=48 * H, expected=98.0), [HOURLY, outage])
    assert completeness.at_a_cap(f, got.size), "a short first answer: the strictest case"
    assert completeness.judge(f, got).whole
    blocks = HOURLY[:10] + HOURLY[14:20] + HOURLY[24:30] + HOURLY[34:]  # three outages
    f, got = _with_period(facts(2, period=H, newest=48 * H, expected=98.0), [HOURLY, blocks])
    assert completeness.judge(f, got).whole


def test_a_part_holding_no_more_than_its_whole_settles_the_question():
    """The parts of a split that hold no more points than the whole held in their range
    show a sparse stream; a part holding more shows the whole thinned, and is judged."""
    sparse = HOURLY[:25:4]  # the first half of a stream with every fourth point
    f, got = _with_period(facts(1, end=24 * H, period=H, newest=48 * H, follow_up=True),
                          [sparse], whole_count=np.array([7.0]))
    assert not _thin(completeness.judge(f, got))
    denser = HOURLY[:25:2]  # more than the whole had here, still thin: asked again
    f, got = _with_period(facts(1, end=24 * H, period=H, newest=48 * H, follow_up=True),
                          [denser], whole_count=np.array([7.0]))
    assert _thin(completeness.judge(f, got))


def test_a_stream_shown_sparse_this_run_is_not_asked_again():
    f, got = _with_period(facts(1, period=H, newest=48 * H), [HOURLY[::4]],
                          sparse_ok_ms=np.array([4.0 * H]))
    assert not _thin(completeness.judge(f, got))
    f, got = _with_period(facts(1, period=H, newest=48 * H), [HOURLY[::8]],
                          sparse_ok_ms=np.array([4.0 * H]))
    assert _thin(completeness.judge(f, got)), "twice as sparse as shown: asked"


def test_points_missing_one_by_one_are_asked_from_a_tenth_or_at_a_plateau():
    """A cap that thins by a fourth leaves most gaps at one period: only the count of
    points missing one by one shows it.  A tenth of a stream's points is asked anywhere;
    two points at an exact plateau (every answer a cap cuts has that size), but not in
    an ordinary answer, where a flaky stream drops as many."""
    fourth = [t for i, t in enumerate(HOURLY) if i % 4 != 1]
    f, got = _with_period(facts(2, period=H, newest=48 * H, largest=10_000, expected=98.0),
                          [fourth, fourth])
    assert len(_thin(completeness.judge(f, got))) == 1
    few = [t for i, t in enumerate(HOURLY) if i not in (10, 30)]  # two of 49 missing
    for largest, asked in ((2 * len(few), True), (10_000, False)):
        f, got = _with_period(facts(2, period=H, newest=48 * H, largest=largest,
                                    expected=98.0), [few, few])
        assert bool(_thin(completeness.judge(f, got))) == asked, largest


def test_single_points_missing_across_a_plateau_answer_are_asked():
    """A cap on the answer that thins it by a point here and there: each stream lacks one
    point, which alone is an honest dropout; at an exact plateau, two or more such points
    in the answer are the cap's mark."""
    one = [t for i, t in enumerate(HOURLY) if i != 20]
    sizes = 2 * len(one)
    f, got = _with_period(facts(2, period=H, newest=48 * H, largest=sizes), [one, one])
    assert set(_thin(completeness.judge(f, got))[0].keys) == {"k0", "k1"}
    f, got = _with_period(facts(2, period=H, newest=48 * H, largest=10_000), [one, one])
    assert not _thin(completeness.judge(f, got)), "not at a plateau: two honest dropouts"


def test_streams_without_a_period_are_split_where_the_answer_shows_thinning():
    """A hand-read stream has no yardstick of its own; in an answer at a cap that thins
    the periodic streams it is split and compared with them, and a part of it holding
    more than its whole did is split again."""
    thinned = HOURLY[::4]
    manual = [0, 24 * H, 48 * H]
    f = facts(2, period=H, newest=48 * H, largest=len(thinned) + 3)
    f, got = _with_period(f, [thinned, manual], period_ms=np.array([H, np.nan]))
    assert set(_thin(completeness.judge(f, got))[0].keys) == {"k0", "k1"}
    f, got = _with_period(facts(1, end=24 * H, newest=48 * H, follow_up=True), [manual[:2]],
                          whole_count=np.array([1.0]))
    assert _thin(completeness.judge(f, got)), "a part holding more than its whole"
    f, got = _with_period(facts(1, end=24 * H, newest=48 * H, follow_up=True), [manual[:2]],
                          whole_count=np.array([2.0]))
    assert not _thin(completeness.judge(f, got)), "a part holding the same: settled"


def test_nothing_is_asked_before_a_stream_created_in_the_window():
    """A stream created inside the window starts at its creation: there is nothing before
    it to ask for, even where the mirror's coverage of the window's start says it should
    continue earlier data (a part of a split window starts there)."""
    from dataclasses import replace
    f = facts(1, period=H, newest=48 * H)
    f = replace(f, planned_start_ms=np.array([6.0 * H]), from_origin=np.array([True]),
                covered_before=np.array([True]))
    f, got = _with_period(f, [HOURLY[6:]])
    assert not [x for x in completeness.judge(f, got).follow_ups if x.side == "before"]
    f = replace(f, planned_start_ms=np.array([0.0]), from_origin=np.array([False]))
    f, got = _with_period(f, [HOURLY])
    assert [x for x in completeness.judge(f, got).follow_ups if x.side == "before"], \
        "an older stream with nothing stored before the window is asked"

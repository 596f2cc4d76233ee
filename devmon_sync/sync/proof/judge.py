"""Is a data answer whole?  Judge each answer, per stream, before it counts as proof.

A service may cut an answer silently: status 200, fewer points, no error (a cap on the points
of an answer or of a series, keeping the oldest or the newest; a date range clipped to its own
maximum; an exclusive end date).  The client cannot see the cap, so it judges what came back
against what it knows independently of the answer:

* the window it asked for, and each stream's planned part of it;
* each stream's newest point, from POST /sensor-data/latest;
* each stream's sampling period, and the spacing of the points that did come;
* the mirror's own data just before the window (the previous window, or an earlier sync).

Signals, each of which a cut answer shows and an honest one practically never does:

``newest``
    the window was planned to end at the stream's newest point and that point is not there;
``tail``
    the answer as a whole stops well before the end some stream was planned to reach (every
    stream stops early at once: a cut keeping the oldest points, or a clipped range);
``head``
    likewise at the start (a cut keeping the newest points);
``continuity``
    the stream's data ran right up to the window's start and the answer starts late, or the
    answer starts right at the window's start while the stored data stopped well before it,
    and the window that ends at the gap holds as many points for the stream as for any other
    (a cap per series cuts every stream it bites to one count; an outage leaves fewer).  A
    real outage straddles a window boundary; a cut starts or ends exactly at one;
``plateau``
    the answer is as large as the largest answer ever seen (a cap makes every answer it cuts
    that large) and a stream stops short of its planned end or starts late;
``origin``, ``empty``
    a stream fetched from its creation starts late, or a stream that lives through the whole
    window (by its origin and newest point) has no point in it at all;
``thin``
    a stream holds far fewer points than its sampling period predicts between its first and
    last point, spread thin throughout (most of its gaps longer than 1.5 periods: an outage
    leaves one long gap, a service that downsamples leaves them all long), or points missing
    one by one (one in ten; any, in an answer at an exact plateau that lacks two or more so,
    or in a part of a split that already showed the service thins).  Where thinning shows,
    streams with no sampling period (or read by hand) are split and compared too.  Its
    edges are intact, so no other signal sees it.  The follow-up splits the window and
    compares: halves holding no more points than the whole prove the stream sparse (a wrong
    sampling period, a flaky sensor); more prove the whole thinned, and are themselves
    judged the same way.

A suspicious range is never trusted: the engine fetches it again (a follow-up) and only an
answer to that narrower question proves it.  Pure numpy on per-stream arrays: no HTTP, no SQL.
"""

from __future__ import annotations

from dataclasses import dataclass, field

import numpy as np

from devmon_sync.store.staged import grouped_in_order

EDGE_PERIODS = 1.5
"""A gap at a window edge longer than this many sampling periods needs explaining (two
periods would hide one missing point)."""
GAP_SLACK = 1.5
"""... or longer than this many times the stream's own usual spacing in the answer (its
90th percentile, or its longest gap when the answer holds fewer than ``SPARSE`` points)."""
SPARSE = 20
SLOW_PERIOD_MS = 12 * 3_600_000.0
SLOW_TOLERANCE_MS = 7 * 86_400_000.0
"""Readings taken daily or less often, or with no sampling period at all, are often manual:
none on weekends or holidays, days skipped now and then, so such a stream may lack up to a
week at a window's edge.  (A cap on series hardly touches so few points; a cap on whole
answers still shows in the answer-level signals.)"""
MIN_TOLERANCE_MS = 1_000.0


@dataclass(frozen=True)
class WindowFacts:
    """What the client knew of a window's streams before the answer came (ms since 1970;
    NaN where unknown).  Arrays are aligned with ``keys``."""

    start_ms: int
    end_ms: int
    keys: tuple[str, ...]
    planned_start_ms: np.ndarray
    """Where each stream's data in the window may begin: the window's start, or the stream's
    origin when nothing exists before it."""
    planned_end_ms: np.ndarray
    """Where each stream's data in the window is planned to end (its cursor for the window)."""
    newest_ms: np.ndarray
    period_ms: np.ndarray
    before_ms: np.ndarray
    """The newest stored point before ``planned_start_ms`` (NaN when none within reach)."""
    covered_before: np.ndarray
    """True when the mirror's coverage of the stream runs up to ``planned_start_ms``."""
    before_at_cap: np.ndarray
    """True when the stream's previous window held as many points as any stream of that
    window, or that is not known: the mark of a cap on series, which cuts every stream it
    bites to the same count (an outage leaves a stream with fewer points than its peers)."""
    after_ms: np.ndarray
    """The oldest stored point after ``planned_end_ms`` (NaN when none, or not looked up)."""
    largest_before: int
    """The most points any earlier answer of this kind held (0: none yet).  A silent cap
    makes every answer it cuts exactly that large."""
    expected_points: float
    """How many points the window was planned to bring (from the sampling periods)."""
    follow_up: bool
    """True for a follow-up: a narrow question about streams already suspected, most of
    them in an outage, so the answer stopping or starting early as a whole is no news unless
    the answer is as large as a cut one."""
    from_origin: np.ndarray
    """True when ``planned_start_ms`` is the stream's origin (its creation): its data is
    expected from there, and nothing exists before it."""
    sparse_ok_ms: np.ndarray | None = None
    """Per stream, a mean spacing a split window has shown to be the stream's own (NaN or
    None: none): an answer that sparse is not thinned."""
    whole_count: np.ndarray | None = None
    """For the parts of a split (a ``thin`` follow-up), how many points each stream had in
    the part's range in the answer being checked (NaN or None: not a part): a part holding
    no more shows the stream genuinely sparse there, and raises no further question."""


@dataclass(frozen=True)
class Received:
    """What the answer held per stream (points that could not be read but had a readable
    timestamp count: they show where the data is)."""

    count: np.ndarray
    first_ms: np.ndarray
    last_ms: np.ndarray
    spacing_ms: np.ndarray
    """90th percentile of the gaps between consecutive points, or the longest gap when
    there are fewer than ``SPARSE`` points (NaN below three points)."""
    served: int | None = None
    """Points the service put in the answer, before it was cut back to the window (the size
    a silent cap sets); None: the same as ``total``."""
    long_share: np.ndarray | None = None
    """Share of each stream's gaps longer than ``EDGE_PERIODS`` sampling periods (NaN where
    the period is unknown or the stream has fewer than ``THIN_MIN_POINTS`` points)."""
    scattered: np.ndarray | None = None
    """Per stream, how many gaps of at most ``SCATTERED_GAP`` periods lack points, and
    (row 1) how many points they lack: points missing one or a few at a time."""

    @property
    def mean_spacing_ms(self) -> np.ndarray:
        """Each stream's mean gap between its first and last point (NaN below two)."""
        with np.errstate(divide="ignore", invalid="ignore"):
            return np.where(self.count >= 2, (self.last_ms - self.first_ms)
                            / np.maximum(self.count - 1, 1), np.nan)

    @property
    def total(self) -> int:
        return int(self.count.sum())

    @property
    def size(self) -> int:
        """The answer's size as served: what a cap on answers limits."""
        return self.total if self.served is None else self.served


@dataclass(frozen=True)
class FollowUp:
    """A range to fetch again because the answer may have been cut there."""

    side: str  # newest | tail | head | continuity | thin (inside the window) | before (the
    #            previous one)
    keys: tuple[str, ...]
    start_ms: int
    end_ms: int
    reason: str
    span_ms: float | None = None
    """The longest range to ask in one request (None: any): the range the cut answer did
    cover, in case the service clips ranges (an answer over a longer range could be clipped
    too, and come back empty for a stream whose data lies beyond the clip)."""


@dataclass
class Verdict:
    follow_ups: list[FollowUp] = field(default_factory=list)
    unproven: dict[str, list[tuple[int, int, str]]] = field(default_factory=dict)
    """Per stream, the part of this window (from, to, why) an answer has not yet proved."""

    @property
    def whole(self) -> bool:
        return not self.follow_ups


def tolerance_ms(facts: WindowFacts, got: Received) -> np.ndarray:
    """How long an edge gap may be before it needs explaining, per stream (inf: no yardstick,
    the stream is judged by its newest point only)."""
    slow = np.isnan(facts.period_ms) | (facts.period_ms >= SLOW_PERIOD_MS)
    by_period = np.where(slow, np.fmax(EDGE_PERIODS * facts.period_ms, SLOW_TOLERANCE_MS),
                         EDGE_PERIODS * facts.period_ms)
    by_spacing = GAP_SLACK * got.spacing_ms
    tol = np.fmax(by_period, by_spacing)
    return np.maximum(tol, MIN_TOLERANCE_MS)


def judge(facts: WindowFacts, got: Received) -> Verdict:
    """The follow-ups an answer needs before it counts as whole (none: it is whole)."""
    verdict = Verdict()
    tol = tolerance_ms(facts, got)
    has = got.count > 0
    first = np.where(has, got.first_ms, np.nan)
    last = np.where(has, got.last_ms, np.nan)
    _newest(verdict, facts, has, last)
    if has.any() and (not facts.follow_up or at_a_cap(facts, got.size)):
        _answer_tail(verdict, facts, tol, last)
        _answer_head(verdict, facts, tol, first)
    _continuity(verdict, facts, got, tol, has, first)
    _after(verdict, facts, tol, has, last)
    if at_a_cap(facts, got.size):
        _plateau(verdict, facts, tol, has, first, last)
    _origin_and_empty(verdict, facts, tol, has, first)
    _thin(verdict, facts, got)
    return verdict


def _add(verdict: Verdict, side: str, facts: WindowFacts, mask: np.ndarray, lo: np.ndarray,
         hi: np.ndarray, reason: str, span_ms: float | None = None) -> None:
    """One follow-up over [min lo, max hi] of the masked streams, and their unproven ranges.
    A stream another signal already questioned is asked again only for a range that one
    does not cover (two signals may each see a different part cut)."""
    idx = np.flatnonzero(mask & (hi >= lo))
    if idx.size and verdict.unproven:  # (looked at only for the streams asked about)
        covered = [any(r[0] <= lo[i] and hi[i] <= r[1]
                       for r in verdict.unproven.get(facts.keys[i], ())) for i in idx]
        idx = idx[~np.array(covered, dtype=bool)]
    if not idx.size:
        return
    keys = tuple(facts.keys[i] for i in idx)
    verdict.follow_ups.append(FollowUp(side, keys, int(lo[idx].min()), int(hi[idx].max()),
                                       reason, span_ms))
    for i in idx:
        verdict.unproven.setdefault(facts.keys[i], []).append((int(lo[i]), int(hi[i]), reason))


def _newest(verdict: Verdict, facts: WindowFacts, has: np.ndarray, last: np.ndarray) -> None:
    """The window ends at the stream's newest point: that very point must be there."""
    final = np.isfinite(facts.newest_ms) & (facts.planned_end_ms >= facts.newest_ms)
    missing = final & ~(has & (np.nan_to_num(last, nan=-np.inf) >= facts.newest_ms))
    lo = np.where(has, np.nan_to_num(last, nan=0.0) + 1, facts.planned_start_ms)
    _add(verdict, "newest", facts, missing, lo, facts.newest_ms,
         "its newest point (by /sensor-data/latest) is not in the answer")


def _answer_tail(verdict: Verdict, facts: WindowFacts, tol: np.ndarray,
                 last: np.ndarray) -> None:
    """The whole answer stops early: some stream was planned to run well past its last point.
    Every stream is followed up past that point, since a cut spares none of them."""
    stop = np.nanmax(last)
    if not (facts.planned_end_ms > stop + tol).any():
        return
    later = facts.planned_end_ms > stop
    # each stream from just after its own last point: a cap per series cuts each stream at
    # its own time, and a cap on the answer that splits the points at its last instant
    # leaves the streams it cut there with an earlier last point
    lo = np.where(np.isfinite(last), last + 1, stop)  # a stream with nothing: from the cut
    covered = stop - facts.start_ms  # what the answer did cover: ask no more at once
    _add(verdict, "tail", facts, later, np.maximum(lo, facts.planned_start_ms),
         facts.planned_end_ms, "the whole answer stops early (cut, or its range clipped)",
         covered if covered > 0 else None)


def _answer_head(verdict: Verdict, facts: WindowFacts, tol: np.ndarray,
                 first: np.ndarray) -> None:
    """The whole answer starts late: some stream was planned to begin well before its first
    point, and no stream has anything earlier."""
    begin = np.nanmin(first)
    if not (facts.planned_start_ms < begin - tol).any():
        return
    earlier = facts.planned_start_ms < begin
    hi = np.where(np.isfinite(first), first - 1, begin)  # as for the tail
    _add(verdict, "head", facts, earlier, facts.planned_start_ms,
         np.minimum(hi, facts.planned_end_ms), "the whole answer starts late (cut from the start)")


def _continuity(verdict: Verdict, facts: WindowFacts, got: Received, tol: np.ndarray,
                has: np.ndarray, first: np.ndarray) -> None:
    """A gap around the window's start that begins or ends right at it is the window's
    doing (a real outage straddles a boundary; a cut starts or ends exactly at one)."""
    start = facts.planned_start_ms
    before = facts.before_ms
    after = np.where(has, first, facts.planned_end_ms)  # no point: the gap runs to the end
    gap = np.isfinite(before) & np.isfinite(tol) & (after - before > tol)
    at_cap = has & (got.count == got.count.max()) if has.any() else has
    ran_up = gap & (start - before <= tol) & (at_cap | ~has)
    hi = np.where(has, np.nan_to_num(first, nan=0.0) - 1, facts.planned_end_ms)
    _add(verdict, "continuity", facts, ran_up, start, hi,
         "its data ran up to the window's start but the answer starts late")
    # (nothing exists before a stream's creation: a window planned from it has no "before")
    asked = has & (first - start <= tol) & facts.covered_before & facts.before_at_cap \
        & ~facts.from_origin
    began = gap & asked
    _add(verdict, "before", facts, began, before + 1, start - 1,
         "the answer starts at the window's start but the stored data stopped before it")
    no_before = ~np.isfinite(before) & np.isfinite(tol) & asked
    _add(verdict, "before", facts, no_before, start - 4 * np.where(np.isfinite(tol), tol, 0),
         start - 1, "the answer starts at the window's start but nothing is stored before it")


def _after(verdict: Verdict, facts: WindowFacts, tol: np.ndarray, has: np.ndarray,
           last: np.ndarray) -> None:
    """The same at the window's end, where the mirror already holds what follows (a window
    fetched again inside stored data: a follow-up, a healed gap)."""
    end, later = facts.planned_end_ms, facts.after_ms
    before_end = np.where(has, last, facts.planned_start_ms)
    gap = np.isfinite(later) & np.isfinite(tol) & (later - before_end > tol) & (later - end <= tol)
    _add(verdict, "after", facts, gap, before_end + np.where(has, 1, 0), end,
         "the stored data resumes right after the window's end but the answer stops early")


def at_a_cap(facts: WindowFacts, total: int) -> bool:
    """Whether an answer may have been cut at a silent cap: exactly as large as the largest
    answer before it (every answer a cap cuts has that size), or the largest yet while
    holding well under what was planned (the first answer a cap below the plan cuts).  An
    honest answer that sets a new record holds about what was planned."""
    if total <= 0:
        return False
    return total == facts.largest_before or (
        total > facts.largest_before and total < 0.9 * facts.expected_points)


def _plateau(verdict: Verdict, facts: WindowFacts, tol: np.ndarray, has: np.ndarray,
             first: np.ndarray, last: np.ndarray) -> None:
    """An answer as large as the largest ever seen may have been cut at a cap: then a stream
    that stops short of its planned end (or starts after its planned start) is not trusted
    to be in an outage.  (Honest answers rarely reach a new largest size and have such a
    stream at the same time, so this costs few requests.)"""
    start, end = facts.planned_start_ms, facts.planned_end_ms
    short = has & (last < end - tol)
    _add(verdict, "tail", facts, short, np.nan_to_num(last, nan=0.0) + 1, end,
         "the answer is as large as the largest seen and the stream stops short")
    late = has & (first > start + tol) & ~facts.from_origin
    _add(verdict, "head", facts, late, start, np.nan_to_num(first, nan=0.0) - 1,
         "the answer is as large as the largest seen and the stream starts late")
    alive = np.isfinite(facts.newest_ms) & (facts.newest_ms >= start) & (end > start)
    _add(verdict, "empty", facts, ~has & alive, start, end,
         "the answer is as large as the largest seen and the stream has nothing in it")


def _origin_and_empty(verdict: Verdict, facts: WindowFacts, tol: np.ndarray, has: np.ndarray,
                      first: np.ndarray) -> None:
    start, end = facts.planned_start_ms, facts.planned_end_ms
    late = has & facts.from_origin & (first > start + tol)
    _add(verdict, "origin", facts, late, start, np.nan_to_num(first, nan=0.0) - 1,
         "it starts later than its creation")
    alive = np.isfinite(facts.newest_ms) & (facts.newest_ms >= end) & (end - start > tol) \
        & (end - start >= 3 * np.nan_to_num(facts.period_ms, nan=np.inf))
    _add(verdict, "empty", facts, ~has & alive, start, end,
         "it has no point in a window it lives through")


THIN_MIN_POINTS = 2
"""A stream needs a gap between two points to show how thin it is."""
THIN_SHARE = 0.5
"""A stream most of whose gaps are long is spread thin throughout, not in an outage."""
THIN_AT_CAP = 0.9
"""A stream holding less than this share of what its period predicts between its edges (or,
in an answer at an exact plateau, two points less) may have been thinned."""
SCATTERED_GAP = 4.5
"""A gap of at most this many periods lacks a few points, as thinning leaves them; an outage
lacks them in a block."""
DENSER = 1.25
"""A stream shown sparse at one mean spacing is not asked again at one this much wider."""


def _thin(verdict: Verdict, facts: WindowFacts, got: Received) -> None:
    """Streams far sparser than their sampling period, evenly (see the module docstring)."""
    if got.long_share is None:
        return
    n = len(facts.keys)
    whole = facts.whole_count if facts.whole_count is not None else np.full(n, np.nan)
    sparse = _thin_by_period(facts, got, whole)
    # Streams with no yardstick (no sampling period, or read by hand: they skip days and
    # weekends by nature) are split too where thinning shows: in an answer at a cap that
    # thins other streams, and in a part holding more than its whole did.
    unyardsticked = ~(facts.period_ms < SLOW_PERIOD_MS) & (got.count >= 1)
    if sparse.any() and at_a_cap(facts, got.size):
        sparse |= unyardsticked
    sparse |= unyardsticked & (got.count > whole)
    ok = facts.sparse_ok_ms if facts.sparse_ok_ms is not None else np.full(n, np.nan)
    sparse &= ~(got.mean_spacing_ms <= DENSER * ok)  # as sparse as a split showed it to be
    sparse &= ~(got.count <= whole)  # a part holding no more than its whole did: settled
    span = facts.end_ms - facts.start_ms
    shortest = np.fmin(np.nan_to_num(facts.period_ms, nan=SLOW_PERIOD_MS), SLOW_PERIOD_MS)
    if not sparse.any() or span < 2 * shortest[sparse].min():
        return
    _add(verdict, "thin", facts, sparse, facts.planned_start_ms, facts.planned_end_ms,
         "it holds far fewer points than its sampling period predicts, missing one by one "
         "or spread thin throughout (the service may downsample)", span / 2)


def _thin_by_period(facts: WindowFacts, got: Received, whole: np.ndarray) -> np.ndarray:
    """Streams with a sampling period (under ``SLOW_PERIOD_MS``) that lack points spread
    thin throughout, or one by one."""
    n = len(facts.keys)
    period = facts.period_ms
    enough = (got.count >= THIN_MIN_POINTS) & (period < SLOW_PERIOD_MS)  # (NaN: unknown)
    predicted = np.nan_to_num((got.last_ms - got.first_ms) / period + 1)
    throughout = (np.nan_to_num(got.long_share) > THIN_SHARE) & (predicted - got.count >= 2)
    gaps, missing = got.scattered if got.scattered is not None else (np.zeros(n),) * 2
    scattered = (gaps >= 2) & (missing >= np.maximum(2, (1 - THIN_AT_CAP) * predicted))
    # A single point missing is suspect where the service is known to thin: in an answer at
    # an exact plateau lacking two or more points one by one (a cap cuts every answer to
    # one size, however little it cuts; an honest answer that size is usually whole), and
    # in a part of a split that holds more than its whole did.
    plateau = got.size > 0 and got.size == facts.largest_before \
        and missing[enough].sum() >= 2
    scattered |= (plateau | (got.count > whole)) & (missing >= 1)
    return enough & (throughout | scattered)


def received(n_keys: int, codes: np.ndarray, ts_ms: np.ndarray,
             period_ms: np.ndarray | None = None) -> Received:
    """Per-stream counts, edges and usual spacing of an answer's points: ``codes[i]`` is the
    index (into the window's keys) of point i's stream, ``ts_ms[i]`` its time.  With the
    streams' sampling periods, the spacing is worked out only where it can matter (it only
    ever widens the tolerance past 1.5 periods): for streams of unknown period and streams
    more than a tenth of whose gaps are longer than their period."""
    codes, ts = codes.astype(np.int64, copy=False), ts_ms.astype(np.int64, copy=False)
    if codes.size and not (codes.min() >= 0 and codes.max() < n_keys):
        keep = (codes >= 0) & (codes < n_keys)  # points of streams not asked about
        codes, ts = codes[keep], ts[keep]
    count = np.bincount(codes, minlength=n_keys)
    first = np.full(n_keys, np.nan)
    last = np.full(n_keys, np.nan)
    spacing = np.full(n_keys, np.nan)
    gaps, owner = np.zeros(0), np.zeros(0, np.int64)
    if codes.size:
        if not grouped_in_order(codes, ts, count):  # answers usually are: an item a stream
            order = np.lexsort((ts, codes))
            codes, ts = codes[order], ts[order]
        starts = np.flatnonzero(np.r_[True, codes[1:] != codes[:-1]])
        ends = np.r_[starts[1:], codes.size] - 1
        first[codes[starts]] = ts[starts]
        last[codes[ends]] = ts[ends]
        same = codes[1:] == codes[:-1]
        gaps, owner = np.diff(ts)[same].astype(np.float64), codes[1:][same]
    if period_ms is None:
        return Received(count, first, last, _spacing(gaps, owner, count, spacing, None))
    periods = gaps / period_ms[owner]  # each gap in its stream's periods (NaN: unknown)
    spacing = _spacing(gaps, owner, count, spacing, periods)
    share, scattered = _gaps_by_length(periods, owner, count, period_ms)
    return Received(count, first, last, spacing, long_share=share, scattered=scattered)


def _gaps_by_length(periods: np.ndarray, owner: np.ndarray, count: np.ndarray,
                    period_ms: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """Per stream, the share of its gaps longer than ``EDGE_PERIODS`` periods, and the
    gaps of at most ``SCATTERED_GAP`` periods that lack points with how many they lack
    (``periods``: each gap in its stream's sampling periods; ``owner``: its stream)."""
    share = np.full(count.size, np.nan)
    scattered = np.zeros((2, count.size))
    long = np.flatnonzero(periods > EDGE_PERIODS)  # few, in an honest answer
    owner, periods = owner[long], periods[long]
    n_long = np.bincount(owner, minlength=count.size)
    judged = (count >= THIN_MIN_POINTS) & np.isfinite(period_ms)
    share[judged] = n_long[judged] / (count[judged] - 1)
    few = periods <= SCATTERED_GAP
    scattered[0] = np.bincount(owner[few], minlength=count.size)
    scattered[1] = np.bincount(owner[few], weights=np.round(periods[few]) - 1,
                               minlength=count.size)
    return share, scattered


def _spacing(gaps: np.ndarray, owner: np.ndarray, count: np.ndarray, out: np.ndarray,
             periods: np.ndarray | None) -> np.ndarray:
    """90th percentile of each stream's gaps (``gaps`` grouped by stream, ``owner``; with
    ``periods``, each gap in its stream's periods, only where it can matter)."""
    if periods is not None and gaps.size:
        n_keys = count.size
        long = np.bincount(owner[~(periods <= 1.0)], minlength=n_keys)  # NaN counts as long
        total = np.maximum(count - 1, 0)
        needed = (long > 0.1 * total) | (total + 1 < SPARSE)
        keep = needed[owner]
        gaps, owner = gaps[keep], owner[keep]
    if not gaps.size:
        return out
    order = np.lexsort((gaps, owner))
    gaps, owner = gaps[order], owner[order]
    starts = np.flatnonzero(np.r_[True, owner[1:] != owner[:-1]])
    sizes = np.diff(np.r_[starts, owner.size])
    share = np.where(sizes + 1 < SPARSE, 1.0, 0.9)  # few points: the longest gap
    pick = starts + np.floor(share * (sizes - 1)).astype(np.int64)
    enough = sizes >= 2
    out[owner[starts[enough]]] = gaps[pick[enough]]
    return out

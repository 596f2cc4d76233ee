"""Property tests of the completeness judge (``devmon_sync.sync.proof.judge``) on synthetic windows.

No server and no store: a random *world* of streams (sampling grids, device outages, manual
daily readings, streams created inside the window, streams whose final window this is) gives
the honest answer of a window and everything the client knew before it, exactly as
``proof.WindowFetcher._facts`` builds it.  Then:

* honest answers are followed up rarely (the false-alarm rate per scenario is measured and
  bounded; ``-s`` prints it, per signal);
* cut answers (a cap on the whole answer keeping the oldest, the newest, the first items or
  points spread evenly; a cap per series keeping the oldest, the newest or points spread
  evenly; a clipped range; an exclusive end) leave
  no missing point unexamined: each lies in a range that the window's verdict, or the next
  window's (the engine judges it with this window's answer as the stored data before it),
  asks for again;
* ``completeness.received`` matches a straightforward per-stream computation.
"""

from __future__ import annotations

from collections import Counter
from dataclasses import dataclass, fields

import numpy as np
import pytest

from devmon_sync.sync.proof import judge as C

SEC, MIN, HOUR, DAY = 1_000, 60_000, 3_600_000, 86_400_000
PERIODS_S = (60, 600, 900, 3600, 86400)
T0 = 1_767_225_600_000  # 2026-01-01T00:00Z, a Thursday
MAX_POINTS = 30_000  # windows are planned to a budget: no window is larger than this
HISTORY_DAYS = 45  # outages are generated this far back (the stored data's reach)


# ----------------------------------------------------------------------------- the world

@dataclass
class World:
    """Streams on devices (a device's streams share its sampling grid and its outages) and
    three consecutive windows: the previous [sp, s - 1], this one [s, e], the next
    [e + 1, e2]."""

    period_ms: np.ndarray  # the grid (int)
    known_period_ms: np.ndarray  # what the client knows (NaN: no sampling period)
    phase_ms: np.ndarray
    manual: np.ndarray  # daily readings by hand: weekdays only, some days skipped
    device: np.ndarray
    origin_ms: np.ndarray  # creation: no data before it
    until_ms: np.ndarray  # no data after it (newest point: the last one at or before)
    outages: list  # per device: (starts, ends) arrays, [a, b) without data
    sp: int
    s: int
    e: int
    e2: int

    @property
    def n(self) -> int:
        return self.period_ms.size

    def points(self, i: int, lo: float, hi: float) -> np.ndarray:
        """Stream i's points in [lo, hi] (int64 ms, sorted)."""
        lo, hi = max(lo, self.origin_ms[i]), min(hi, self.until_ms[i])
        if hi < lo:
            return np.zeros(0, np.int64)
        p, ph = int(self.period_ms[i]), int(self.phase_ms[i])
        k0, k1 = -(-(int(np.ceil(lo)) - ph) // p), (int(np.floor(hi)) - ph) // p
        t = ph + np.arange(k0, k1 + 1, dtype=np.int64) * p
        starts, ends = self.outages[self.device[i]]
        if starts.size and t.size:
            j = np.searchsorted(starts, t, side="right") - 1
            inside = (j >= 0) & (t < ends[np.maximum(j, 0)])
            t = t[~inside]
        if self.manual[i] and t.size:
            day = t // DAY
            skip = ((day * 2654435761 + i * 40503) % 1000) < 150
            t = t[((day + 3) % 7 < 5) & ~skip]
        return t

    def last_point(self, i: int, before: float, reach: float = HISTORY_DAYS * DAY) -> float:
        """Stream i's newest point at or before ``before`` (and within ``reach``), NaN if none."""
        step = 3 * DAY
        hi = before
        while hi >= before - reach:
            t = self.points(i, max(hi - step, before - reach), hi)
            if t.size:
                return float(t[-1])
            hi -= step + 1
        return np.nan

    def newest(self, i: int) -> float:
        return self.last_point(i, self.until_ms[i], reach=90 * DAY)


def _merge(starts: np.ndarray, ends: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    order = np.argsort(starts)
    starts, ends = starts[order], ends[order]
    out_s, out_e = [], []
    for a, b in zip(starts.tolist(), ends.tolist()):
        if out_e and a <= out_e[-1]:
            out_e[-1] = max(out_e[-1], b)
        else:
            out_s.append(a)
            out_e.append(b)
    return np.array(out_s, np.int64), np.array(out_e, np.int64)


@dataclass(frozen=True)
class Scenario:
    streams: tuple[int, int] = (1, 40)
    periods: tuple[int, ...] = PERIODS_S
    outage_rate: float = 0.025  # outages starting per device and day (the reference server's)
    manual_share: float = 0.5  # of daily devices, read by hand
    p_origin: float = 0.15  # a device created inside the window
    p_final: float = 0.25  # a device whose data ends inside the window (its final window)
    p_aligned_end: float = 0.2  # the window ends exactly on a grid point
    per_device: int = 4


def make_world(rng: np.random.Generator, sc: Scenario) -> World:
    k = int(rng.integers(sc.streams[0], sc.streams[1] + 1))
    sizes = []
    while sum(sizes) < k:
        sizes.append(int(min(rng.integers(1, sc.per_device + 1), k - sum(sizes))))
    device = np.repeat(np.arange(len(sizes)), sizes)
    dev_period = rng.choice(sc.periods, size=len(sizes)) * SEC
    dev_manual = (dev_period == DAY) & (rng.random(len(sizes)) < sc.manual_share)
    dev_phase = np.where(dev_manual, 9 * HOUR + rng.integers(0, 4, len(sizes)) * HOUR,
                         rng.integers(0, dev_period // SEC) * SEC)
    period = dev_period[device].astype(np.int64)
    manual = dev_manual[device]
    known = np.where(manual & (rng.random(k) < 0.7), np.nan, period.astype(float))
    phase = (T0 + dev_phase[device]).astype(np.int64)

    s = T0 + int(rng.integers(0, 365 * DAY))
    if rng.random() < 0.3:
        s -= s % SEC  # a start on a whole second (a cursor, a creation)
    span = np.exp(rng.uniform(np.log(HOUR), np.log(10 * DAY)))
    span = min(span, MAX_POINTS / np.sum(1.0 / period))  # planned within a budget
    span = max(span, 10 * MIN)
    e = s + int(span)
    if rng.random() < sc.p_aligned_end:  # on a grid point of some stream
        i = int(rng.integers(k))
        e = int(phase[i] + (e - phase[i]) // period[i] * period[i])
        e = max(e, s + 1)
    sp = s - int(np.exp(rng.uniform(np.log(HOUR), np.log(10 * DAY))))
    e2 = e + int(np.exp(rng.uniform(np.log(HOUR), np.log(10 * DAY))))

    lo_day, hi_day = (s - HISTORY_DAYS * DAY) // DAY, (e2 + 2 * DAY) // DAY
    outages = []
    for _ in range(len(sizes)):
        days = np.arange(lo_day, hi_day + 1, dtype=np.int64)
        days = days[rng.random(days.size) < sc.outage_rate]
        starts = days * DAY + rng.integers(0, 24, days.size) * HOUR
        ends = starts + rng.integers(2, 49, days.size) * HOUR
        outages.append(_merge(starts, ends))

    dev_origin = np.where(rng.random(len(sizes)) < sc.p_origin,
                          rng.uniform(s, e, len(sizes)), s - 400 * DAY)
    dev_origin = np.floor(dev_origin)
    final = rng.random(len(sizes)) < sc.p_final
    later = e2 + rng.integers(0, 5 * DAY, len(sizes))
    between = rng.random(len(sizes)) < 0.15  # its data ends in the next window
    dev_until = np.where(final, rng.uniform(np.maximum(s, dev_origin), e),
                         np.where(between, rng.uniform(e + 1, e2), later))
    return World(period, known, phase, manual, device, dev_origin[device],
                 np.floor(dev_until[device]), outages, sp, s, e, e2)


# ----------------------------------------------------------------------------- windows

@dataclass
class Answer:
    codes: np.ndarray
    ts: np.ndarray

    def got(self, n: int, period_ms: np.ndarray | None = None) -> C.Received:
        """As the engine receives it: with the streams' known sampling periods."""
        return C.received(n, self.codes, self.ts, period_ms)


def honest(world: World, idx: np.ndarray, lo: int, hi: int) -> Answer:
    pts = [world.points(int(i), lo, hi) for i in idx]
    codes = np.repeat(np.arange(idx.size), [p.size for p in pts])
    ts = np.concatenate(pts) if pts else np.zeros(0, np.int64)
    return Answer(codes.astype(np.int64), ts.astype(np.int64))


def members(world: World, newest: np.ndarray, lo: int, hi: int,
            among: np.ndarray | None = None) -> np.ndarray:
    """Streams a window [lo, hi] names (the planner's rule: started by its end, newest point
    not before its start)."""
    ok = (world.origin_ms <= hi) & np.isfinite(newest) & (newest >= lo)
    if among is not None:
        ok &= np.isin(np.arange(world.n), among)
    return np.flatnonzero(ok)


def keys_of(idx: np.ndarray) -> tuple[str, ...]:
    return tuple(f"s{i}" for i in idx)


def facts(world: World, newest: np.ndarray, idx: np.ndarray, lo: int, hi: int,
          before: np.ndarray, covered: np.ndarray, at_cap: np.ndarray,
          largest: int) -> C.WindowFacts:
    """As ``proof.WindowFetcher._facts`` builds them for a planned window [lo, hi]."""
    origin = np.where(world.origin_ms[idx] > world.s - 300 * DAY, world.origin_ms[idx], -np.inf)
    planned_start = np.maximum(float(lo), origin)
    planned_end = np.minimum(float(hi), newest[idx])
    # the planner's estimate: each stream from its origin (or the window's start) to its
    # end, at its sampling period (a day when it has none)
    plan_period = np.where(np.isnan(world.known_period_ms[idx]), DAY,
                           world.known_period_ms[idx])
    expected = float(np.sum(np.clip(planned_end - planned_start, 0, None) / plan_period))
    known = dict(
        start_ms=lo, end_ms=hi, keys=keys_of(idx), planned_start_ms=planned_start,
        planned_end_ms=planned_end, newest_ms=newest[idx].astype(float),
        period_ms=world.known_period_ms[idx], before_ms=before, covered_before=covered,
        before_at_cap=at_cap, after_ms=np.full(idx.size, np.nan), largest_before=int(largest),
        expected_points=expected, follow_up=False, from_origin=origin >= lo)
    names = {f.name for f in fields(C.WindowFacts)}
    return C.WindowFacts(**{k: v for k, v in known.items() if k in names})


def counts(answer: Answer, n: int) -> np.ndarray:
    return np.bincount(answer.codes, minlength=n)


def at_cap_of(count: np.ndarray) -> np.ndarray:
    """``proof.WindowFetcher._remember``: a stream held as many points as any of its window."""
    peak = count.max() if count.size else 0
    return (count > 0) & (count == peak)


# ----------------------------------------------------------------------------- cuts

CUTS = ("cap-oldest", "cap-newest", "cap-first-items", "cap-spread", "series-oldest",
        "series-newest", "series-spread", "clipped-range", "exclusive-end")


@dataclass(frozen=True)
class Cut:
    """One silent cut, with its size; applied alike to every answer of the service."""

    model: str
    size: float  # points (caps), ms (a clipped range)
    seed: int  # ties and item order

    def __call__(self, answer: Answer, lo: int, hi: int) -> Answer:
        """The cut answer to a request for [lo, hi], sent as [lo - 1 ms, hi + 1 ms] (as
        ``proof.WindowFetcher._ask`` does)."""
        codes, ts = answer.codes, answer.ts
        rng = np.random.default_rng([self.seed, lo])
        n = int(self.size)
        if self.model in ("cap-oldest", "cap-newest") and ts.size > n:
            order = np.lexsort((rng.random(ts.size), ts))  # ties split arbitrarily
            keep = order[:n] if self.model == "cap-oldest" else order[ts.size - n:]
        elif self.model == "cap-first-items" and ts.size > n:
            rank = rng.permutation(int(codes.max()) + 1)  # the service's item order
            order = np.lexsort((ts, rank[codes]))
            keep = order[:n]
        elif self.model == "cap-spread" and ts.size > n:
            order = np.lexsort((ts, codes))  # the service's answer order: item by item
            keep = order[np.unique(np.linspace(0, ts.size - 1, n).round().astype(np.int64))]
        elif self.model == "series-spread":
            order = np.lexsort((ts, codes))
            c = codes[order]
            starts = np.flatnonzero(np.r_[True, c[1:] != c[:-1]])
            sizes = np.diff(np.r_[starts, c.size])
            keep = np.concatenate([order[a + np.unique(np.linspace(0, m - 1, min(m, n))
                                                       .round().astype(np.int64))]
                                   for a, m in zip(starts, sizes)]) if c.size else order
        elif self.model in ("series-oldest", "series-newest"):
            order = np.lexsort((rng.random(ts.size), ts, codes))
            c = codes[order]
            starts = np.flatnonzero(np.r_[True, c[1:] != c[:-1]])
            sizes = np.diff(np.r_[starts, c.size])
            pos = np.arange(c.size) - np.repeat(starts, sizes)
            size = np.repeat(sizes, sizes)
            ok = pos < n if self.model == "series-oldest" else pos >= size - n
            keep = order[ok]
        elif self.model == "clipped-range":
            keep = np.flatnonzero(ts <= lo - 1 + self.size)
        elif self.model == "exclusive-end":
            keep = np.flatnonzero(ts != hi + 1)  # endDate is hi + 1 ms
        elif self.model == "exclusive-end-unwidened":
            keep = np.flatnonzero(ts != hi)  # as if endDate were sent as hi itself
        else:
            return answer
        keep = np.sort(keep)
        return Answer(codes[keep], ts[keep])


def random_cut(rng: np.random.Generator, model: str, answer: Answer, n: int,
               lo: int, hi: int) -> Cut | None:
    """A cut of ``model`` that removes something from ``answer`` (None: it cannot)."""
    total = answer.ts.size
    seed = int(rng.integers(2**31))
    if model.startswith("cap-"):
        if total < 2:
            return None
        return Cut(model, float(np.exp(rng.uniform(0, np.log(total - 1)))) // 1, seed)
    if model.startswith("series-"):
        peak = int(counts(answer, n).max()) if total else 0
        if peak < 2:
            return None
        return Cut(model, float(np.exp(rng.uniform(0, np.log(peak - 1)))) // 1, seed)
    if model == "clipped-range":
        if total == 0 or answer.ts.max() <= lo:
            return None
        return Cut(model, float(rng.uniform(1, answer.ts.max() - lo + 1)), seed)
    if model.startswith("exclusive-end"):
        end = hi if model == "exclusive-end-unwidened" else hi + 1
        if not np.any(answer.ts == end):
            return None
    return Cut(model, 0.0, seed)


# ----------------------------------------------------------------------------- one case

@dataclass
class Case:
    """A window of a world, what the client knew before it, and its honest answer."""

    world: World
    newest: np.ndarray  # per world stream (by /latest)
    idx: np.ndarray  # the window's streams (world indices)
    facts: C.WindowFacts
    truth: Answer

    def describe(self) -> str:
        w, f = self.world, self.facts
        rows = [f"window [{w.s}, {w.e}] ({(w.e - w.s) / HOUR:.2f} h), next ends {w.e2}"]
        for j, i in enumerate(self.idx):
            rows.append(
                f"  s{i}: period {w.period_ms[i] / SEC:g} s (known {f.period_ms[j]}), "
                f"manual {w.manual[i]}, origin {w.origin_ms[i]:.0f}, newest {self.newest[i]:.0f}"
                f", planned [{f.planned_start_ms[j]:.0f}, {f.planned_end_ms[j]:.0f}], before "
                f"{f.before_ms[j]:.0f} (covered {f.covered_before[j]}, at cap "
                f"{f.before_at_cap[j]}), honest points {np.sum(self.truth.codes == j)}")
        rows.append(f"  largest_before {f.largest_before}")
        return "\n".join(rows)


def make_case(rng: np.random.Generator, sc: Scenario, *, history: str = "run",
              largest: int | None = None, cut: Cut | None = None,
              reach: str = "run") -> Case | None:
    """A random window.  ``history``: what the largest earlier answer was ("run": the
    previous window's, as this service answered it; "first": none yet).  ``reach``: where the
    stored data before the window comes from ("run": the previous window of this run,
    "mirror": a lookup as far back as ``proof.WindowFetcher._before`` reaches)."""
    world = make_world(rng, sc)
    newest = np.array([world.newest(i) for i in range(world.n)])
    idx = members(world, newest, world.s, world.e)
    if idx.size == 0:
        return None
    s, e = world.s, world.e
    truth = honest(world, idx, s, e)
    # the previous window, as this service answered it (its at-cap marks)
    pidx = members(world, newest, world.sp, s - 1)
    prev = honest(world, pidx, world.sp, s - 1)
    if cut is not None:
        prev = cut(prev, world.sp, s - 1)
    pcap = dict(zip(pidx.tolist(), at_cap_of(counts(prev, pidx.size)).tolist()))
    at_cap = np.array([pcap.get(int(i), True) for i in idx])
    from_origin = world.origin_ms[idx] >= s
    before = np.full(idx.size, np.nan)
    for j, i in enumerate(idx):
        if not from_origin[j]:
            if reach == "run":
                before[j] = world.last_point(int(i), s - 1)
            else:
                p = world.known_period_ms[i]
                r = min(np.nanmax([3 * DAY, 8 * p]), 31 * DAY)
                before[j] = world.last_point(int(i), s - 1, r)
    if largest is None:  # the largest answer before: the previous window's (as served)
        largest = 0 if history == "first" else prev.ts.size
    f = facts(world, newest, idx, s, e, before, ~from_origin, at_cap, largest)
    return Case(world, newest, idx, f, truth)


def next_facts(case: Case, got: Answer, cut: Cut | None) -> tuple[C.WindowFacts, Answer,
                                                                    np.ndarray]:
    """The next window [e + 1, e2] with this window's (cut) answer as the data before it, as
    the engine's ``_remember`` / ``_before`` hand it on; and its answer from the same service."""
    w, f = case.world, case.facts
    lo, hi = w.e + 1, w.e2
    nidx = members(w, case.newest, lo, hi, among=case.idx)
    rec = got.got(case.idx.size, f.period_ms)
    pos = {int(i): j for j, i in enumerate(case.idx)}
    j = np.array([pos[int(i)] for i in nidx], np.int64)
    before = np.fmax(rec.last_ms[j], f.before_ms[j]) if j.size else np.zeros(0)
    at_cap = at_cap_of(rec.count)[j] if j.size else np.zeros(0, bool)
    largest = max(f.largest_before, rec.total)
    nf = facts(w, case.newest, nidx, lo, hi, before, np.ones(nidx.size, bool), at_cap, largest)
    answer = honest(w, nidx, lo, hi)
    if cut is not None:
        answer = cut(answer, lo, hi)
    return nf, answer, nidx


def covers(verdict: C.Verdict, key: str, t: np.ndarray) -> np.ndarray:
    """Which of the times ``t`` of stream ``key`` the verdict asks for again (or leaves
    unproved)."""
    hit = np.zeros(t.shape, bool)
    for f in verdict.follow_ups:
        if key in f.keys:
            hit |= (t >= f.start_ms) & (t <= f.end_ms)
    for a, b, _ in verdict.unproven.get(key, ()):
        hit |= (t >= a) & (t <= b)
    return hit


def missing(truth: Answer, got: Answer) -> Answer:
    """Points of ``truth`` that ``got`` lacks."""
    lost = ~np.isin(truth.codes << 43 | truth.ts, got.codes << 43 | got.ts)
    return Answer(truth.codes[lost], truth.ts[lost])


def within_tolerance(f: C.WindowFacts, rec: C.Received, lost: Answer) -> np.ndarray:
    """Which lost points lie in an edge gap of the cut answer no longer than the stream's
    tolerance (``completeness.tolerance_ms``): a gap an honest answer may show too (a stream
    may lack up to 1.5 periods, a week when read by hand, at each edge), which the judge
    does not question by design."""
    tol = C.tolerance_ms(f, rec)[lost.codes]
    has = rec.count[lost.codes] > 0
    first, last = rec.first_ms[lost.codes], rec.last_ms[lost.codes]
    start, end = f.planned_start_ms[lost.codes], f.planned_end_ms[lost.codes]
    tail = has & (lost.ts > last) & (end - last <= tol)
    head = has & (lost.ts < first) & (first - start <= tol)
    empty = ~has & (end - start <= tol)
    return tail | head | empty


def thin_tolerance(f: C.WindowFacts, rec: C.Received, lost: Answer, truth: Answer,
                   model: str) -> np.ndarray:
    """For a cut that thins streams (``*-spread``): the lost points of a stream thinned less
    than the judge questions by design (``completeness._thin``), judged by what the cut
    really took between the stream's first and last point received (losses at its edges are
    the other signals' business): a stream with no sampling period or a slow one (read by
    hand, irregular by nature), a single point lost (an honest dropout looks the same), or
    under a tenth of its points lost in an answer not at an exact plateau (honest flaky streams do that, and
    a cap that cuts so little shows at its next answer, which is exactly that large)."""
    if not model.endswith("-spread"):
        return np.zeros(lost.ts.size, bool)
    n = f.period_ms.size
    inside = (lost.ts > rec.first_ms[lost.codes]) & (lost.ts < rec.last_ms[lost.codes])
    lost_n = np.bincount(lost.codes[inside], minlength=n)[lost.codes]  # between its edges
    truth_n = np.bincount(truth.codes, minlength=n)[lost.codes]
    period = f.period_ms[lost.codes]
    plateau = rec.size > 0 and rec.size == f.largest_before
    slight = lost_n < (2 if plateau else np.maximum(2, 0.1 * truth_n))
    return ~(period < C.SLOW_PERIOD_MS) | slight


def answer_tolerance(f: C.WindowFacts, rec: C.Received, lost: Answer, model: str) -> np.ndarray:
    """For a cut of the whole answer at one instant (caps on the answer, a clipped range):
    the lost points when the answer as a whole stops (starts) within every stream's
    tolerance of its planned end (start).  The judge then reads a stream stopping early
    alone as an outage, by design; only the answer stopping early is a cut."""
    tol = C.tolerance_ms(f, rec)
    out = np.zeros(lost.ts.size, bool)
    if model not in ("cap-oldest", "cap-newest", "clipped-range") or rec.total == 0:
        return out
    if model == "cap-newest":
        begin = np.nanmin(rec.first_ms)
        return np.full(lost.ts.size, not (f.planned_start_ms < begin - tol).any())
    stop = np.nanmax(rec.last_ms)
    return np.full(lost.ts.size, not (f.planned_end_ms > stop + tol).any())


# ----------------------------------------------------------------------------- runs

SCENARIOS = {
    "mixed": Scenario(),
    "many streams": Scenario(streams=(20, 40)),
    "one stream": Scenario(streams=(1, 1)),
    "fast streams": Scenario(streams=(20, 40), periods=(60, 600, 900, 3600)),
    "slow streams": Scenario(periods=(86400,)),
    "heavy outages": Scenario(streams=(1, 8), outage_rate=0.3),
    "new and ending": Scenario(streams=(5, 40), p_origin=0.4, p_final=0.5),
}


def honest_alarms(name: str, cases: int, seed: int, history: str = "run") -> tuple[int, Counter]:
    """How many honest windows of a scenario get a follow-up, and from which signals."""
    rng = np.random.default_rng(seed)
    n, alarms = 0, Counter()
    for _ in range(cases):
        case = make_case(rng, SCENARIOS[name], history=history)
        if case is None:
            continue
        n += 1
        verdict = C.judge(case.facts, case.truth.got(case.idx.size, case.facts.period_ms))
        if verdict.follow_ups:
            alarms["any"] += 1
            for side in {f.side for f in verdict.follow_ups}:
                alarms[side] += 1
    return n, alarms


@dataclass
class CutRun:
    model: str
    cases: int = 0
    excused: int = 0  # windows whose only unexamined losses are within tolerance
    failures: list = None

    def __post_init__(self):
        self.failures = []


def cut_run(model: str, cases_per_scenario: int, seed: int, excuse: bool = True) -> CutRun:
    """Cut answers of ``model`` across the scenarios: the lost points each verdict (this
    window's, and the next window's, judged with this answer as the data before it) leaves
    unexamined."""
    rng = np.random.default_rng(seed)
    out = CutRun(model)
    for name, sc in SCENARIOS.items():
        for _ in range(cases_per_scenario):
            state = rng.bit_generator.state
            probe = make_case(rng, sc)
            if probe is None:
                continue
            cut = random_cut(rng, model, probe.truth, probe.idx.size, probe.world.s,
                             probe.world.e)
            if cut is None:
                continue
            after = rng.bit_generator.state
            rng.bit_generator.state = state  # the same window, with this service's history
            case = make_case(rng, sc, cut=cut)
            rng.bit_generator.state = after
            check_cut(case, cut, out, excuse)
    return out


def check_cut(case: Case, cut: Cut, out: CutRun, excuse: bool) -> None:
    got = cut(case.truth, case.world.s, case.world.e)
    lost = missing(case.truth, got)
    if lost.ts.size == 0:
        return
    out.cases += 1
    rec = got.got(case.idx.size, case.facts.period_ms)
    verdict = C.judge(case.facts, rec)
    nf, nanswer, nidx = next_facts(case, got, cut)
    nverdict = C.judge(nf, nanswer.got(nidx.size, nf.period_ms))
    keys = keys_of(case.idx)
    seen = np.zeros(lost.ts.size, bool)
    for j in np.unique(lost.codes):
        m = lost.codes == j
        seen[m] = covers(verdict, keys[j], lost.ts[m]) | covers(nverdict, keys[j], lost.ts[m])
    if excuse:
        fine = within_tolerance(case.facts, rec, lost) | answer_tolerance(
            case.facts, rec, lost, cut.model) | thin_tolerance(case.facts, rec, lost, case.truth,
                                                                cut.model)
        if (~seen & fine).any():
            out.excused += 1
        seen |= fine
    if not seen.all():
        out.failures.append((case.idx.size, int((~seen).sum()), case, cut, rec, verdict,
                             nverdict, Answer(lost.codes[~seen], lost.ts[~seen])))


def counterexample(run: CutRun) -> str:
    """The smallest failing window (fewest streams, then fewest unexamined points)."""
    k, n, case, cut, rec, verdict, nverdict, bad = min(run.failures, key=lambda x: x[:2])
    tol = C.tolerance_ms(case.facts, rec)
    rows = [f"{run.model}: {len(run.failures)} of {run.cases} cut windows leave points "
            f"unexamined; the smallest:", case.describe(), f"  cut {cut}",
            f"  answer total {rec.total}, largest before {case.facts.largest_before}"]
    for j in range(case.idx.size):
        rows.append(f"  s{case.idx[j]}: got {rec.count[j]} [{rec.first_ms[j]:.0f}, "
                    f"{rec.last_ms[j]:.0f}], tolerance {tol[j]:.0f}")
    for j in np.unique(bad.codes):
        t = bad.ts[bad.codes == j]
        rows.append(f"  UNEXAMINED s{case.idx[j]}: {t.size} points {t[:4].tolist()}...")
    rows += [f"  verdict: {f}" for f in verdict.follow_ups]
    rows += [f"  next window's verdict: {f}" for f in nverdict.follow_ups]
    return "\n".join(rows)


# ----------------------------------------------------------------------------- honest answers

# Share of honest windows followed up at least once, per scenario (measured on ~300 windows,
# seed 1, at commit d309415: mixed 6.1 %, many streams 9.7 %, one stream 2.1 %, fast streams
# 15.7 %, slow streams 7.6 %, heavy outages (0.3 outages a day) 33 %, new and ending 6.3 %).
# Every alarm is a genuine outage the judge cannot tell from a cut without asking: a stream
# with no point in a window it lives through (``empty``; short windows of fast streams), a
# new stream whose first data comes late (``origin``), one fast stream in an outage at the
# window's edge while slower streams' points lie within their own tolerance (``tail`` /
# ``head`` of the whole answer).  Slow streams: all ``empty`` from the rule of 92bd5af (an
# answer at a cap has every stream with nothing followed up, whatever its period; manual
# daily streams are often empty in a short window, and their answers fall under 0.9 of the
# plan, so a new largest answer counts as at a cap): 0 % before it.  A follow-up costs one
# request; the bounds leave room for sampling noise (about +-3 points at 300 windows) but
# not for a new class of false alarm.
HONEST_BOUND = {"mixed": 0.10, "many streams": 0.14, "one stream": 0.05,
                "fast streams": 0.21, "slow streams": 0.11, "heavy outages": 0.40,
                "new and ending": 0.10}
HONEST_CASES = 300


@pytest.mark.parametrize("name", list(SCENARIOS))
def test_honest_answers_are_rarely_followed_up(name):
    n, alarms = honest_alarms(name, HONEST_CASES, seed=1)
    rate = alarms["any"] / n
    by_signal = ", ".join(f"{k} {v / n:.1%}" for k, v in sorted(alarms.items()) if k != "any")
    print(f"\nhonest false alarms, {name}: {rate:.1%} of {n} windows ({by_signal})")
    assert rate <= HONEST_BOUND[name], (name, rate, dict(alarms))


@pytest.mark.xfail(reason="by design: a stream in a genuine outage covering a short window "
                          "(empty), at a new stream's creation (origin), or one fast stream "
                          "in an outage at the edge (whole-answer tail/head: its 1.5-period "
                          "tolerance against the answer's first/last point, set by slower "
                          "streams) is followed up; measured about 10 % of honest windows "
                          "with 20-40 streams", strict=True)
def test_honest_windows_with_many_streams_are_practically_never_followed_up():
    n, alarms = honest_alarms("many streams", HONEST_CASES, seed=1)
    assert alarms["any"] / n <= 0.01, dict(alarms)


# ----------------------------------------------------------------------------- cut answers

CUT_CASES = 30  # per scenario and model (7 scenarios)
@pytest.mark.parametrize("model", CUTS)
def test_no_point_a_cut_answer_lacks_is_left_unexamined(model):
    """Every lost point lies in a range this window's verdict or the next window's asks for
    again (or leaves unproved), unless it lies within the tolerance the judge grants an
    honest answer at an edge (printed: windows where that alone hid a loss)."""
    run = cut_run(model, CUT_CASES, seed=11)
    print(f"\n{model}: {run.cases} cut windows, {len(run.failures)} with points left "
          f"unexamined, {run.excused} losing points only within tolerance")
    if model == "exclusive-end":
        # the request is widened by a millisecond at both ends: nothing in the window is lost
        assert run.cases == 0
    else:
        assert run.cases > 100
    if run.failures:
        print(counterexample(run))
    assert not run.failures, counterexample(run)


@pytest.mark.xfail(reason="by design: an edge gap up to the stream's tolerance (1.5 periods; "
                          "a week for daily or unknown periods) is accepted, so a cut removing "
                          "only that much is not questioned (e.g. an end date read as "
                          "exclusive if the request were not widened); a thinning cut that "
                          "takes one point between a stream's edges, or under a tenth of its "
                          "points outside an exact plateau, is not questioned (an honest "
                          "dropout or flaky stream looks the same)", strict=True)
@pytest.mark.parametrize("model", ["cap-oldest", "clipped-range", "exclusive-end-unwidened",
                                   "cap-spread"])
def test_even_losses_within_tolerance_are_examined(model):
    run = cut_run(model, CUT_CASES, seed=11, excuse=False)
    assert not run.failures, counterexample(run)


def test_a_second_signal_for_an_unproven_stream_is_not_dropped():
    """The smallest cap-newest counterexample, by hand: one stream, 900 s, its data ending
    in a genuine outage 17 h before the window's end; a cap keeps its newest 19 points."""
    s, e = 1_781_434_152_918, 1_781_732_901_000
    t = np.arange(1_781_434_101_000 + 900_000, 1_781_671_701_000 + 1, 900_000)
    got = C.received(1, np.zeros(19, np.int64), t[-19:])
    f = C.WindowFacts(**{k: v for k, v in dict(
        start_ms=s, end_ms=e, keys=("s0",), planned_start_ms=np.array([float(s)]),
        planned_end_ms=np.array([float(e)]), newest_ms=np.array([1.781876001e12]),
        period_ms=np.array([900_000.0]), before_ms=np.array([1_781_434_101_000.0]),
        covered_before=np.array([True]), before_at_cap=np.array([True]),
        after_ms=np.array([np.nan]), largest_before=16, expected_points=(e - s) / 900_000,
        follow_up=False, from_origin=np.array([False])).items()
        if k in {x.name for x in fields(C.WindowFacts)}})
    verdict = C.judge(f, got)
    lost = t[:-19]
    hit = covers(verdict, "s0", lost)
    # (found by this module: _add skipped a stream already unproven, so the head and
    # continuity ranges were dropped after the tail one)
    assert hit.all(), f"{(~hit).sum()} of {lost.size} lost points unexamined: {verdict}"


# ----------------------------------------------------------------------------- received

def _straight(n: int, codes: np.ndarray, ts: np.ndarray):
    count, first, last, spacing = (np.zeros(n, int), np.full(n, np.nan), np.full(n, np.nan),
                                   np.full(n, np.nan))
    for k in range(n):
        t = sorted(int(x) for c, x in zip(codes.tolist(), ts.tolist()) if c == k)
        count[k] = len(t)
        if t:
            first[k], last[k] = t[0], t[-1]
        gaps = sorted(b - a for a, b in zip(t, t[1:]))
        if len(gaps) >= 2:
            pick = len(gaps) - 1 if len(t) < C.SPARSE else int(np.floor(0.9 * (len(gaps) - 1)))
            spacing[k] = gaps[pick]
    return count, first, last, spacing


def _random_points(rng: np.random.Generator):
    n = int(rng.integers(1, 8))
    size = int(rng.integers(0, 120))
    codes = rng.integers(-1, n + 1, size)  # some outside the window's keys
    ts = T0 + rng.integers(0, 50, size) * int(rng.choice([1, 1000, 60_000]))
    if rng.random() < 0.5:  # grouped by stream, in time order, as answers usually are
        order = np.lexsort((ts, codes))
        codes, ts = codes[order], ts[order]
    return n, codes.astype(np.int64), ts.astype(np.int64)


def test_received_matches_a_straightforward_count():
    rng = np.random.default_rng(5)
    for _ in range(400):
        n, codes, ts = _random_points(rng)
        got = C.received(n, codes, ts)
        count, first, last, spacing = _straight(n, codes, ts)
        np.testing.assert_array_equal(got.count, count)
        np.testing.assert_array_equal(got.first_ms, first)
        np.testing.assert_array_equal(got.last_ms, last)
        np.testing.assert_array_equal(got.spacing_ms, spacing)
        assert got.total == count.sum()


def test_received_with_periods_keeps_every_tolerance():
    """With the sampling periods, ``received`` skips the spacing where it cannot widen the
    tolerance: the tolerance must be the same as with the spacing worked out everywhere."""
    import inspect
    if "period_ms" not in inspect.signature(C.received).parameters:
        pytest.skip("received takes no periods")
    rng = np.random.default_rng(6)
    bad = []
    for _ in range(400):
        n, codes, ts = _random_points(rng)
        period = rng.choice([np.nan, 1000.0, 60_000.0, 600_000.0], n)
        full = C.received(n, codes, ts)
        quick = C.received(n, codes, ts, period)
        f = C.WindowFacts(**{k: v for k, v in dict(
            start_ms=0, end_ms=1, keys=tuple(map(str, range(n))),
            planned_start_ms=np.zeros(n), planned_end_ms=np.ones(n), newest_ms=np.ones(n),
            period_ms=period, before_ms=np.full(n, np.nan), covered_before=np.zeros(n, bool),
            before_at_cap=np.ones(n, bool), after_ms=np.full(n, np.nan), largest_before=0,
            expected_points=0.0, follow_up=False, from_origin=np.zeros(n, bool)).items()
            if k in {x.name for x in fields(C.WindowFacts)}})
        a, b = C.tolerance_ms(f, full), C.tolerance_ms(f, quick)
        if not np.array_equal(a, b):
            k = int(np.flatnonzero(a != b)[0])
            t = np.sort(ts[codes == k])
            bad.append((t.size, period[k], np.diff(t).tolist(), a[k], b[k]))
    # (found by this test: a sparse stream, whose yardstick is its longest gap, lost its
    # spacing when at most a tenth of its gaps were longer than its period)
    assert not bad, f"{len(bad)} of 400 answers differ; smallest: {min(bad)}"

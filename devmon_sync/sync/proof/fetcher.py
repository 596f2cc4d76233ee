"""Fetch one window of data until the mirror can prove it whole, then commit it.

The sync engine plans windows; this module asks for one, judges the answer per stream
(``devmon_sync.sync.proof.judge``), commits what came with what it proved, and fetches every
range that may have been cut again (a follow-up, itself judged the same way), depth first,
so a cut answer is completed before the next window starts.  A follow-up that finds data
proves the service cuts answers: the service profile learns its cap and later windows are
planned within it.  Ranges nothing could prove are recorded as gaps (``sync_gaps``), shown by
``devmon status`` and fetched first by the next sync.

Its neighbours in ``devmon_sync.sync.proof``: ``arrays`` (an answer as per-stream arrays),
``judge`` (is an answer whole?), ``follow_ups`` (which questions to ask and what their answers
prove), ``caps`` (what a cut teaches and windows planned within it).
"""

from __future__ import annotations

import logging
from dataclasses import dataclass, field, replace
from datetime import datetime, timedelta

import numpy as np
import pyarrow as pa

from devmon_sync.sync.proof import arrays as arr
from devmon_sync import timestamps
from devmon_sync.sync.proof import judge as completeness
from devmon_sync.sync.proof.caps import learned_from_cut, parts_within_caps
from devmon_sync.client import ApiClient
from devmon_sync.sync.proof.follow_ups import (answered, merge_seen, news, pieces, progress, share,
                                    worth_asking)
from devmon_sync.sync.plan import HISTORY_SIDE, PLANNED_SIDES, Window
from devmon_sync.sync.future_points import (FutureSeen, cursor_limit, on_time_last,
                                            reference_now)
from devmon_sync.service_profile import ServiceProfile
from devmon_sync.store import Mirror, answers
from devmon_sync.store.ledger import WindowProof

log = logging.getLogger("devmon.sync")

MAX_FOLLOW_UPS = 400
"""Follow-ups one planned window may spend (a cap of N points needs total/N of them)."""
_TAIL_SIDES = ("tail", "newest", "after")

_HEAD_SIDES = ("head", "continuity", "origin")
_MS = timedelta(milliseconds=1)


@dataclass(frozen=True)
class StreamInfo:
    """What the engine knows of a stream independently of any data answer."""

    period_s: float | None
    newest: datetime | None


@dataclass
class Tally:
    """Counts of one run, for the report."""

    follow_ups: int = 0
    follow_ups_with_data: int = 0
    quarantined: int = 0
    parsed_strings: int = 0
    future: FutureSeen = field(default_factory=FutureSeen)
    """Points stamped after the service's now, per stream (``sync.future_points``)."""


@dataclass
class _Budget:
    left: int = field(default_factory=lambda: MAX_FOLLOW_UPS)


@dataclass
class Fetched:
    """One answer, cut to its window: what is committed and what it shows."""

    table: pa.Table  # readings table, or the GNSS epochs table
    answer: object  # the decoder's result (what is committed)
    quarantine: pa.Table | None
    got: completeness.Received
    rows: np.ndarray  # rows of ``table`` per stream of the window, in its order


class WindowFetcher:
    """Fetches, judges, commits and follows up windows for one sync run."""

    def __init__(self, client: ApiClient, mirror: Mirror, run_id: int,
                 profile: ServiceProfile, info: dict[tuple[str, str], StreamInfo],
                 on_rows, before_request=lambda: None):
        self.client, self.mirror, self.run_id = client, mirror, run_id
        self.profile = profile
        self.info = info
        self.tally = Tally()
        self._on_rows = on_rows  # (kind, rows) after each commit
        self._before_request = before_request  # raises to stop (the sync's cancel)
        self._gaps_may_exist = bool(mirror.gaps_to_heal())
        self._noted: set[tuple[str, str]] = set()
        # per stream: covered to, last point (ms), whether its last window held as many points
        # as any stream of that window (the mark a per-series cap leaves)
        self._edges: dict[tuple[str, str], tuple[int, float, bool]] = {}
        # per stream, the mean spacing (ms) a split showed to be its own, and, while the
        # parts of a split are fetched, the points (ms) of the answer they check
        self._sparse_ok: dict[tuple[str, str], float] = {}
        self._known: dict[str, dict[str, tuple[float, float]]] = {}  # see _stream_arrays
        self._thinner: dict[tuple[str, str], np.ndarray] = {}
        self.data_now: datetime | None = None
        """Where most of the service's data ends (``future_points.data_now``), set by the
        engine: a service whose clock is behind its data is judged by it."""

    # ------------------------------------------------------------------ one window

    def fetch(self, w: Window, budget: _Budget | None = None,
              continuing: bool = False) -> dict[str, tuple]:
        """Fetch ``w`` (split as the learned caps require, unless it continues a cut answer:
        one request), commit it with its proof and complete it by follow-ups.  Returns, per
        stream, (points, first ms, last ms) of its own answer (the parts of a split window
        together)."""
        budget = budget or _Budget()
        parts = [w] if continuing else self._within_caps(w)
        if len(parts) > 1:
            seen: dict[str, tuple] = {}
            for part in parts:
                for key, got in self.fetch(part, budget).items():
                    seen[key] = merge_seen(seen.get(key), got)
            return seen
        self._before_request()
        fetched = self._ask(w)
        facts = self._facts(w)
        verdict = completeness.judge(facts, fetched.got)
        if any(f.side == "thin" for f in verdict.follow_ups) and w.side in PLANNED_SIDES:
            facts, verdict = self._as_sparse_as_proved(w, facts, fetched.got, verdict)
        follow = [f for f in verdict.follow_ups if progress(w, f)
                  and worth_asking(w, facts, fetched.got, f)]
        maybe_cut = completeness.at_a_cap(facts, fetched.got.size)
        for f in verdict.follow_ups:
            if f not in follow and f.side != "newest" and not maybe_cut:
                answered(verdict, f)  # (an answer that may be cut answers nothing)
        unproven = self._unproven(verdict)
        self._commit(w, fetched, unproven)
        self._learn_size(w.kind, fetched.got.size)
        for f in follow:
            if budget.left <= 0:
                log.warning("run %d: follow-up budget spent on %s %s..%s", self.run_id, w.kind,
                            w.start, w.end)
                break
            budget.left -= 1
            self._follow(w, fetched, f, budget)
        got = fetched.got
        seen = {k: (int(got.count[i]), got.first_ms[i], got.last_ms[i])
                for i, k in enumerate(w.keys)}
        if not continuing and (w.side in _TAIL_SIDES or w.side in _HEAD_SIDES):
            self._continue(w, seen, w.side in _TAIL_SIDES, budget)
        return seen

    def _follow(self, parent: Window, fetched: Fetched, f: completeness.FollowUp,
                budget: _Budget) -> None:
        """Fetch a range that may have been cut; data found there proves the parent was cut."""
        self.tally.follow_ups += 1
        start, end = arr.dt(f.start_ms), arr.dt(f.end_ms)
        cursors = {k: min(end, parent.cursors.get(k, end)) for k in f.keys}
        child = Window(parent.kind, list(f.keys), start, end, cursors,
                       share(parent, f), {k: t for k, t in parent.origins.items()
                                           if k in f.keys}, side=f.side)
        log.info("run %d: follow-up (%s) of %d %s streams %s..%s: %s", self.run_id, f.side,
                 len(f.keys), parent.kind, start, end, f.reason)
        seen: dict[str, tuple] = {}
        checked = self._checking_thin(parent, fetched, f)
        try:
            for piece in pieces(child, f.span_ms):
                for key, got in self.fetch(piece, budget).items():
                    seen[key] = merge_seen(seen.get(key), got)
        finally:
            self._restore_thinner(checked)
        if f.side == "thin":
            self._settle_thin(parent, fetched.got, f, seen)
        if news(parent, fetched.got, f, seen):
            self.tally.follow_ups_with_data += 1
            self._learn_cut(parent, fetched, f)

    def _checking_thin(self, parent: Window, fetched: Fetched,
                       f: completeness.FollowUp) -> dict[tuple[str, str], np.ndarray | None]:
        """Before the parts of a split are fetched: each stream's points in the answer they
        check (a part holding no more settles it).  Returns what to restore afterwards."""
        if f.side != "thin":
            return {}
        key_column = "parameter_uuid" if parent.kind == "readings" else "sensor_uuid"
        index = {k: i for i, k in enumerate(parent.keys)}
        codes = arr.key_indices(fetched.table.column(key_column), index)
        ts = arr.ms_array(fetched.table.column("ts"))
        old = {}
        for key in f.keys:
            stream = (parent.kind, key)
            old[stream] = self._thinner.get(stream)
            self._thinner[stream] = np.sort(ts[codes == index[key]])
        return old

    def _restore_thinner(self, old: dict[tuple[str, str], np.ndarray | None]) -> None:
        for stream, points in old.items():
            if points is None:
                self._thinner.pop(stream, None)
            else:
                self._thinner[stream] = points

    def _settle_thin(self, parent: Window, got: completeness.Received,
                     f: completeness.FollowUp, seen: dict[str, tuple]) -> None:
        """A stream whose parts brought no point more than the whole is sparse by nature:
        later windows as sparse raise no question this run."""
        spacing = got.mean_spacing_ms
        for key in f.keys:
            i = parent.keys.index(key)
            if seen.get(key, (0,))[0] <= got.count[i]:
                self._sparse_ok[(parent.kind, key)] = float(spacing[i])

    def _continue(self, child: Window, seen: dict[str, tuple], forward: bool,
                  budget: _Budget) -> None:
        """Continue from the last point received: a stream whose follow-up brought new
        points yet still stops short of its planned end (or starts after its planned start)
        was cut again, as a cap per series cuts every request; ask again from where it got
        to, streams that got to the same point together, until each reaches its end or
        brings nothing new (an outage, then, proved by that very answer)."""
        reached = {k: np.nan for k in child.keys}  # a follow-up's first answer: any point
        while budget.left > 0:
            frontier = self._still_cut(child, seen, reached, forward)
            if not frontier:
                return
            groups: dict[float, list[str]] = {}
            for key, edge in frontier.items():
                groups.setdefault(edge, []).append(key)
            seen, reached = {}, dict(frontier)
            for edge, keys in sorted(groups.items()):
                if budget.left <= 0:
                    break
                budget.left -= 1
                self.tally.follow_ups += 1
                part = self._continuation(child, keys, edge, forward)
                log.info("run %d: continuation of %d %s streams %s..%s", self.run_id,
                         len(keys), child.kind, part.start, part.end)
                got = self.fetch(part, budget, continuing=True)
                seen.update(got)
                if any(count for count, _, _ in got.values()):
                    self.tally.follow_ups_with_data += 1

    def _still_cut(self, child: Window, seen: dict[str, tuple], reached: dict[str, float],
                   forward: bool) -> dict[str, float]:
        """Streams whose answer moved past where they had got to but not to their end."""
        out = {}
        for key, (count, first, last) in seen.items():
            info = self.info.get((child.kind, key)) or StreamInfo(None, None)
            period_ms = info.period_s * 1000.0 if info.period_s else \
                (last - first) / (count - 1) if count > 2 else np.nan  # its mean spacing
            if not count or np.isnan(period_ms):
                continue
            tol = completeness.EDGE_PERIODS * period_ms
            edge, before = (last, reached.get(key)) if forward else (first, reached.get(key))
            moved = before is None or np.isnan(before) or \
                (edge > before if forward else edge < before)
            if forward:
                end = arr.ms(min(child.cursors[key], info.newest) if info.newest else
                          child.cursors[key])
                short = edge < end - tol
            else:
                short = edge > max(arr.ms(child.start), arr.ms(child.origins.get(key, child.start))) + tol
            if moved and short:
                out[key] = edge
        return out

    def _continuation(self, child: Window, keys: list[str], edge: float,
                      forward: bool) -> Window:
        if forward:
            start = arr.dt(edge + 1)
            end = max(child.cursors[k] for k in keys)
        else:
            start, end = child.start, arr.dt(edge - 1)
        return Window(child.kind, keys, start, end, {k: min(end, child.cursors[k]) for k in keys},
                      share(child, completeness.FollowUp("tail", tuple(keys), arr.ms(start),
                                                          arr.ms(end), "")),
                      {k: t for k, t in child.origins.items() if k in keys}, side="tail"
                      if forward else "head")

    # ------------------------------------------------------------------ asking

    def ask(self, w: Window) -> Fetched:
        """The service's answer for ``w`` now, cut to it (nothing committed)."""
        return self._ask(w)

    def _ask(self, w: Window) -> Fetched:
        """One data request for ``w`` (a millisecond wider on both sides, so a service that
        reads either date as exclusive still answers the whole window), cut back to it."""
        body_range = {"startDate": timestamps.format_timestamp(w.start - _MS),
                      "endDate": timestamps.format_timestamp(w.end + _MS)}
        if w.kind == "readings":
            decoded = self.client.sensor_data({"parameterUuids": w.keys, **body_range,
                                               "disableRounding": True},
                                              decoder=answers.readings_from_json)
            served = decoded.table.num_rows + decoded.quarantine.num_rows
            return self._fetched(w, arr.within(decoded.table, w), decoded, "parameter_uuid",
                                 served)
        serials = self.mirror.serials_of_sensors(w.keys)
        whole = self.client.gnss({"deviceSerialNumbers": serials, **body_range},
                                 decoder=answers.gnss_from_json)
        served = whole.epochs.num_rows + whole.quarantine.num_rows  # every device's
        decoded = whole.only(w.keys)
        decoded = replace(decoded, epochs=arr.within(decoded.epochs, w),
                          projected=arr.within(decoded.projected, w))
        return self._fetched(w, decoded.epochs, decoded, "sensor_uuid", served)

    def _fetched(self, w: Window, table: pa.Table, decoded, key_column: str,
                 served: int) -> Fetched:
        quarantine = decoded.quarantine
        self.tally.quarantined += quarantine.num_rows
        self.tally.parsed_strings += decoded.parsed_strings
        self._note_null_series(w.kind, decoded.null_series)
        period, _ = self._stream_arrays(w)
        got, rows = arr.received(w.keys, table.column(key_column), table.column("ts"),
                                 quarantine, period)
        got = replace(got, served=served)
        if w.kind == "readings":
            decoded = table
        return Fetched(table, decoded, quarantine, got, rows)

    def _note_null_series(self, kind: str, keys) -> None:
        """``data: null`` is read as an empty series, and noted once per stream and run."""
        for key in keys:
            if (kind, key) in self._noted:
                continue
            self._noted.add((kind, key))
            self.mirror.record_problem(self.run_id, f"{kind}:{key}", None,
                                       "the service sent `data: null` for this stream; "
                                       "devmon read it as an empty series")

    # ------------------------------------------------------------------ judging

    def _facts(self, w: Window) -> completeness.WindowFacts:
        """What was known of ``w``'s streams before its answer came."""
        n = len(w.keys)
        start_ms = arr.ms(w.start)
        origin = np.array([arr.ms(w.origins[k]) if k in w.origins else -np.inf
                           for k in w.keys]) if w.origins else np.full(n, -np.inf)
        planned_start = np.maximum(float(start_ms), origin)
        period, newest = self._stream_arrays(w)
        if w.side == HISTORY_SIDE:  # before all that is known: no newest point to expect
            newest = np.full(n, np.nan)
        before, covered, before_at_cap = self._before(w, period)
        planned_end = np.fmin(arr.ms_many([w.cursors[k] for k in w.keys]), newest)
        sparse_ok = self._sparse_ok_ms(w)
        whole = np.array([self._whole_count(w, k) for k in w.keys], dtype=np.float64) \
            if w.side == "thin" else np.full(n, np.nan)
        return completeness.WindowFacts(
            start_ms, arr.ms(w.end), tuple(w.keys), planned_start, planned_end, newest,
            period, before, covered, before_at_cap, self._after(w, period),
            self.profile.of(w.kind).largest_answer, w.expected_points,
            w.side not in PLANNED_SIDES,
            origin >= start_ms if n else np.zeros(0, bool), sparse_ok, whole)

    def _as_sparse_as_proved(self, w: Window, facts: completeness.WindowFacts,
                             got: completeness.Received, verdict: completeness.Verdict
                             ) -> tuple[completeness.WindowFacts, completeness.Verdict]:
        """A stream that looks thinned may be as sparse as the service has always answered
        it whole (an earlier sync proved that, or read it complete): judged again with that
        spacing as its own, it raises no question this run."""
        keys = sorted({k for f in verdict.follow_ups if f.side == "thin" for k in f.keys})
        known = self.mirror.proved_spacing_ms(w.kind, keys, w.start)
        if not known:
            return facts, verdict
        for key, spacing in known.items():
            self._sparse_ok.setdefault((w.kind, key), spacing)
        facts = replace(facts, sparse_ok_ms=self._sparse_ok_ms(w))
        return facts, completeness.judge(facts, got)

    def _sparse_ok_ms(self, w: Window) -> np.ndarray:
        """Per stream of ``w``, the spacing shown to be its own (NaN: none)."""
        if not self._sparse_ok:
            return np.full(len(w.keys), np.nan)
        return np.array([self._sparse_ok.get((w.kind, k), np.nan) for k in w.keys])

    def _stream_arrays(self, w: Window) -> tuple[np.ndarray, np.ndarray]:
        """Per stream of ``w``: its sampling period and newest point (ms; NaN: unknown),
        worked out once per stream and run (windows ask for them twice each)."""
        known = self._known.setdefault(w.kind, {})
        values = [known.get(k) or self._know(w.kind, k) for k in w.keys]
        both = np.array(values, dtype=np.float64).reshape(-1, 2)
        return both[:, 0], both[:, 1]

    def _know(self, kind: str, key: str) -> tuple[float, float]:
        info = self.info.get((kind, key)) or StreamInfo(None, None)
        newest = float(arr.ms(info.newest)) if info.newest is not None else np.nan
        self._known[kind][key] = (_period_ms(info), newest)
        return self._known[kind][key]

    def _whole_count(self, w: Window, key: str) -> float:
        """For a part of a split: the stream's points in its range in the answer checked."""
        points = self._thinner.get((w.kind, key)) if w.side == "thin" else None
        if points is None:
            return np.nan
        lo = np.searchsorted(points, arr.ms(w.start), side="left")
        return float(np.searchsorted(points, arr.ms(w.end), side="right") - lo)

    def _after(self, w: Window, period_ms: np.ndarray) -> np.ndarray:
        """The oldest stored point after each stream's planned end, for windows fetched
        inside stored data (follow-ups and healed gaps); NaN for windows walking forward,
        after which nothing is stored yet."""
        after = np.full(len(w.keys), np.nan)
        if not w.side or w.side == HISTORY_SIDE:  # (history: stored data starts right after)
            return after
        reach = timedelta(milliseconds=float(np.nanmax(np.r_[3 * 86_400_000.0,
                                                             8 * period_ms])))
        stored = self.mirror.stored_after(w.kind, list(w.keys), w.end, reach)
        for i, k in enumerate(w.keys):
            if k in stored and stored[k] <= w.cursors[k] + reach:
                after[i] = arr.ms(stored[k])
        return after

    def _before(self, w: Window, period_ms: np.ndarray
                ) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
        """Per stream, the newest stored point before the window and whether the mirror's
        coverage runs up to it: from this run's previous window of the stream when ``w``
        follows it directly, else from the mirror."""
        start_ms = arr.ms(w.start)
        before = np.full(len(w.keys), np.nan)
        covered = np.zeros(len(w.keys), bool)
        at_cap = np.ones(len(w.keys), bool)  # unknown (an earlier run): assume it may be
        ask = []
        for i, k in enumerate(w.keys):
            edge = self._edges.get((w.kind, k))
            if edge is not None and edge[0] == start_ms - 1:
                before[i], covered[i], at_cap[i] = edge[1], True, edge[2]
            else:
                ask.append(i)
        if ask:
            reach_ms = np.nanmax(np.r_[3 * 86_400_000.0, 8 * period_ms[ask]])
            reach = timedelta(milliseconds=float(min(reach_ms, 31 * 86_400_000.0)))
            stored, cov = self.mirror.stored_edges(w.kind, [w.keys[i] for i in ask], w.start,
                                                   reach)
            for i in ask:
                t = stored.get(w.keys[i])
                before[i] = np.nan if t is None else arr.ms(t)
                covered[i] = w.keys[i] in cov
        return before, covered, at_cap

    def _unproven(self, verdict: completeness.Verdict) -> dict[str, tuple]:
        """The verdict's unproved ranges as datetimes; each becomes a gap until a follow-up
        proves it."""
        return {k: [(arr.dt(a), arr.dt(b), why) for a, b, why in ranges]
                for k, ranges in verdict.unproven.items()}

    # ------------------------------------------------------------------ committing

    def _commit(self, w: Window, fetched: Fetched, unproven: dict) -> None:
        got = fetched.got
        now = reference_now(self.client.service_now(), self.data_now)
        limit = cursor_limit(now)
        on_time = None
        if arr.nan_max(got.last_ms) > arr.ms(limit):  # (NaN: no point, never later)
            on_time = self._gather_future(w, fetched.table, limit, now)
        proof = WindowProof(w.kind, list(w.keys), w.start, w.end,
                            fetched.rows.tolist(),
                            got.first_ms, got.last_ms, unproven, self._gaps_may_exist,
                            cursor_limit=limit, on_time_last=on_time)
        self._gaps_may_exist |= bool(unproven)
        start_ms = arr.ms(w.start)
        continues = all(self._edges.get((w.kind, k), (None,))[0] == start_ms - 1
                        for k in w.keys)
        if w.kind == "readings":
            rows = self.mirror.commit_readings(self.run_id, proof, fetched.table,
                                               fetched.quarantine, continues)
        else:
            rows = self.mirror.commit_epochs(self.run_id, proof, fetched.answer,
                                             fetched.quarantine, continues)
        self._on_rows(w.kind, rows)
        self._remember(w, got)

    def _gather_future(self, w: Window, table: pa.Table, limit: datetime,
                       now: datetime) -> np.ndarray:
        """Keep, per stream, the points of ``table`` stamped after ``limit`` (stored as the
        service gave them, reported once at the end of the run); returns each stream's
        newest point at or before it (ms, NaN: none), its cursor."""
        key_column = "parameter_uuid" if w.kind == "readings" else "sensor_uuid"
        codes = arr.key_indices(table.column(key_column), {k: i for i, k in enumerate(w.keys)})
        ts = arr.ms_array(table.column("ts"))
        self.tally.future.add(w.kind, list(w.keys), codes, ts, limit, now)
        return on_time_last(len(w.keys), codes, ts, limit)

    def _remember(self, w: Window, got: completeness.Received) -> None:
        """Keep each stream's newest point and coverage end, so the window that continues
        it is judged without asking the mirror (a window reaching less far changes nothing)."""
        end_ms = arr.ms(w.end)
        peak = int(got.count.max()) if got.count.size else 0
        for i, k in enumerate(w.keys):
            covered, old, _ = self._edges.get((w.kind, k), (-1, np.nan, True))
            if end_ms < covered:
                continue
            at_cap = bool(got.count[i] > 0 and got.count[i] == peak)
            self._edges[(w.kind, k)] = (end_ms, np.fmax(got.last_ms[i], old), at_cap)

    # ------------------------------------------------------------------ learning

    def _within_caps(self, w: Window) -> list[Window]:
        k = self.profile.of(w.kind)
        peak = self._series_peak(w) if k.silent_cap_per_series is not None else 0.0
        return parts_within_caps(k, w, peak)

    def _series_peak(self, w: Window) -> float:
        """The most points one stream of ``w`` is expected to bring."""
        span_s = (w.end - w.start).total_seconds()
        periods = [self.info.get((w.kind, k), StreamInfo(None, None)).period_s for k in w.keys]
        return max([span_s / p for p in periods if p] or [0.0])

    def _learn_size(self, kind: str, points: int) -> None:
        self.profile = self.profile.saw_answer(kind, points)

    def _learn_cut(self, parent: Window, fetched: Fetched, f: completeness.FollowUp) -> None:
        """A follow-up found data where the parent's answer had none: the service cut it
        (``cap_learning``)."""
        changes = learned_from_cut(self.profile.of(parent.kind), parent, fetched.got, f)
        self.profile = self.profile.with_kind(parent.kind, **changes)
        log.warning("run %d: the service cut a %s answer (%s); learned %s", self.run_id,
                    parent.kind, f.reason, changes)


# ----------------------------------------------------------------------------- helpers




def _period_ms(info: StreamInfo | None) -> float:
    return info.period_s * 1000.0 if info is not None and info.period_s else np.nan

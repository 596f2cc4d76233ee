"""Fetch one window of data until the mirror can prove it whole, then commit it.

The sync engine plans windows; this module asks for one, judges the answer per stream
(``devmon_sync.completeness``), commits what came with what it proved, and fetches every
range that may have been cut again (a follow-up, itself judged the same way), depth first,
so a cut answer is completed before the next window starts.  A follow-up that finds data
proves the service cuts answers: the service profile learns its cap and later windows are
planned within it.  Ranges nothing could prove are recorded as gaps (``sync_gaps``), shown by
``devmon status`` and fetched first by the next sync.
"""

from __future__ import annotations

import logging
import math
from dataclasses import dataclass, field, replace
from datetime import datetime, timedelta, timezone

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc

from devmon_sync import api_contract as contract
from devmon_sync import completeness
from devmon_sync.client import ApiClient
from devmon_sync.plan import Window
from devmon_sync.service_profile import ServiceProfile
from devmon_sync.store import Mirror, answers
from devmon_sync.store.ledger import WindowProof

log = logging.getLogger("devmon.sync")

MAX_FOLLOW_UPS = 400
"""Follow-ups one planned window may spend (a cap of N points needs total/N of them)."""
SERIES_FILL = 0.9
"""Of a learned cap (per answer or per series) a planned window may use."""
_TAIL_SIDES = ("tail", "newest", "after")
_HEAD_SIDES = ("head", "continuity", "origin")
_EPOCH = datetime(1970, 1, 1, tzinfo=timezone.utc)
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
    rows: dict[str, int] = field(default_factory=dict)


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
        self._thinner: dict[tuple[str, str], np.ndarray] = {}

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
                    seen[key] = _merge_seen(seen.get(key), got)
            return seen
        self._before_request()
        fetched = self._ask(w)
        facts = self._facts(w)
        verdict = completeness.judge(facts, fetched.got)
        follow = [f for f in verdict.follow_ups if _progress(w, f)
                  and _worth_asking(w, facts, fetched.got, f)]
        maybe_cut = completeness.at_a_cap(facts, fetched.got.size)
        for f in verdict.follow_ups:
            if f not in follow and f.side != "newest" and not maybe_cut:
                _answered(verdict, f)  # (an answer that may be cut answers nothing)
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
        start, end = _dt(f.start_ms), _dt(f.end_ms)
        cursors = {k: min(end, parent.cursors.get(k, end)) for k in f.keys}
        child = Window(parent.kind, list(f.keys), start, end, cursors,
                       _share(parent, f), {k: t for k, t in parent.origins.items()
                                           if k in f.keys}, side=f.side)
        log.info("run %d: follow-up (%s) of %d %s streams %s..%s: %s", self.run_id, f.side,
                 len(f.keys), parent.kind, start, end, f.reason)
        seen: dict[str, tuple] = {}
        checked = self._checking_thin(parent, fetched, f)
        try:
            for piece in _pieces(child, f.span_ms):
                for key, got in self.fetch(piece, budget).items():
                    seen[key] = _merge_seen(seen.get(key), got)
        finally:
            self._restore_thinner(checked)
        if f.side == "thin":
            self._settle_thin(parent, fetched.got, f, seen)
        if _news(parent, fetched.got, f, seen):
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
        codes = _codes(fetched.table.column(key_column), index)
        ts = _ms_array(fetched.table.column("ts"))
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
                end = _ms(min(child.cursors[key], info.newest) if info.newest else
                          child.cursors[key])
                short = edge < end - tol
            else:
                short = edge > max(_ms(child.start), _ms(child.origins.get(key, child.start))) + tol
            if moved and short:
                out[key] = edge
        return out

    def _continuation(self, child: Window, keys: list[str], edge: float,
                      forward: bool) -> Window:
        if forward:
            start = _dt(edge + 1)
            end = max(child.cursors[k] for k in keys)
        else:
            start, end = child.start, _dt(edge - 1)
        return Window(child.kind, keys, start, end, {k: min(end, child.cursors[k]) for k in keys},
                      _share(child, completeness.FollowUp("tail", tuple(keys), _ms(start),
                                                          _ms(end), "")),
                      {k: t for k, t in child.origins.items() if k in keys}, side="tail"
                      if forward else "head")

    # ------------------------------------------------------------------ asking

    def ask(self, w: Window) -> Fetched:
        """The service's answer for ``w`` now, cut to it (nothing committed)."""
        return self._ask(w)

    def _ask(self, w: Window) -> Fetched:
        """One data request for ``w`` (a millisecond wider on both sides, so a service that
        reads either date as exclusive still answers the whole window), cut back to it."""
        body_range = {"startDate": contract.format_timestamp(w.start - _MS),
                      "endDate": contract.format_timestamp(w.end + _MS)}
        if w.kind == "readings":
            decoded = self.client.sensor_data({"parameterUuids": w.keys, **body_range,
                                               "disableRounding": True},
                                              decoder=answers.readings_from_json)
            served = decoded.table.num_rows + decoded.quarantine.num_rows
            return self._fetched(w, _within(decoded.table, w), decoded, "parameter_uuid",
                                 served)
        serials = self.mirror.serials_of_sensors(w.keys)
        whole = self.client.gnss({"deviceSerialNumbers": serials, **body_range},
                                 decoder=answers.gnss_from_json)
        served = whole.epochs.num_rows + whole.quarantine.num_rows  # every device's
        decoded = whole.only(w.keys)
        decoded = replace(decoded, epochs=_within(decoded.epochs, w),
                          projected=_within(decoded.projected, w))
        return self._fetched(w, decoded.epochs, decoded, "sensor_uuid", served)

    def _fetched(self, w: Window, table: pa.Table, decoded, key_column: str,
                 served: int) -> Fetched:
        quarantine = decoded.quarantine
        self.tally.quarantined += quarantine.num_rows
        self.tally.parsed_strings += decoded.parsed_strings
        self._note_null_series(w.kind, decoded.null_series)
        period = np.array([_period_ms(self.info.get((w.kind, k))) for k in w.keys])
        got = replace(_received(w.keys, table.column(key_column), table.column("ts"),
                                quarantine, period), served=served)
        rows = answers.rows_per_key(table.column(key_column)) if table.num_rows else {}
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
        start_ms = _ms(w.start)
        infos = [self.info.get((w.kind, k), StreamInfo(None, None)) for k in w.keys]
        origin = np.array([_ms(w.origins[k]) if k in w.origins else -np.inf for k in w.keys])
        planned_start = np.maximum(float(start_ms), origin)
        period = np.array([_period_ms(i) for i in infos])
        before, covered, before_at_cap = self._before(w, period)
        newest = _ms_many([i.newest for i in infos])
        planned_end = np.fmin(_ms_many([w.cursors[k] for k in w.keys]), newest)
        sparse_ok = np.array([self._sparse_ok.get((w.kind, k), np.nan) for k in w.keys])
        whole = np.array([self._whole_count(w, k) for k in w.keys], dtype=np.float64)
        return completeness.WindowFacts(
            start_ms, _ms(w.end), tuple(w.keys), planned_start, planned_end, newest,
            period, before, covered, before_at_cap, self._after(w, period),
            self.profile.of(w.kind).largest_answer, w.expected_points,
            w.side not in ("", "heal"),
            origin >= start_ms if n else np.zeros(0, bool), sparse_ok, whole)

    def _whole_count(self, w: Window, key: str) -> float:
        """For a part of a split: the stream's points in its range in the answer checked."""
        points = self._thinner.get((w.kind, key)) if w.side == "thin" else None
        if points is None:
            return np.nan
        lo = np.searchsorted(points, _ms(w.start), side="left")
        return float(np.searchsorted(points, _ms(w.end), side="right") - lo)

    def _after(self, w: Window, period_ms: np.ndarray) -> np.ndarray:
        """The oldest stored point after each stream's planned end, for windows fetched
        inside stored data (follow-ups and healed gaps); NaN for windows walking forward,
        after which nothing is stored yet."""
        after = np.full(len(w.keys), np.nan)
        if not w.side:
            return after
        reach = timedelta(milliseconds=float(np.nanmax(np.r_[3 * 86_400_000.0,
                                                             8 * period_ms])))
        stored = self.mirror.stored_after(w.kind, list(w.keys), w.end, reach)
        for i, k in enumerate(w.keys):
            if k in stored and stored[k] <= w.cursors[k] + reach:
                after[i] = _ms(stored[k])
        return after

    def _before(self, w: Window, period_ms: np.ndarray
                ) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
        """Per stream, the newest stored point before the window and whether the mirror's
        coverage runs up to it: from this run's previous window of the stream when ``w``
        follows it directly, else from the mirror."""
        start_ms = _ms(w.start)
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
                before[i] = np.nan if t is None else _ms(t)
                covered[i] = w.keys[i] in cov
        return before, covered, at_cap

    def _unproven(self, verdict: completeness.Verdict) -> dict[str, tuple]:
        """The verdict's unproved ranges as datetimes; each becomes a gap until a follow-up
        proves it."""
        return {k: [(_dt(a), _dt(b), why) for a, b, why in ranges]
                for k, ranges in verdict.unproven.items()}

    # ------------------------------------------------------------------ committing

    def _commit(self, w: Window, fetched: Fetched, unproven: dict) -> None:
        got = fetched.got
        proof = WindowProof(w.kind, list(w.keys), w.start, w.end,
                            [int(fetched.rows.get(k, 0)) for k in w.keys],
                            got.first_ms, got.last_ms, unproven, self._gaps_may_exist)
        self._gaps_may_exist |= bool(unproven)
        start_ms = _ms(w.start)
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

    def _remember(self, w: Window, got: completeness.Received) -> None:
        """Keep each stream's newest point and coverage end, so the window that continues
        it is judged without asking the mirror (a window reaching less far changes nothing)."""
        end_ms = _ms(w.end)
        peak = int(got.count.max()) if got.count.size else 0
        for i, k in enumerate(w.keys):
            covered, old, _ = self._edges.get((w.kind, k), (-1, np.nan, True))
            if end_ms < covered:
                continue
            at_cap = bool(got.count[i] > 0 and got.count[i] == peak)
            self._edges[(w.kind, k)] = (end_ms, np.fmax(got.last_ms[i], old), at_cap)

    # ------------------------------------------------------------------ learning

    def _within_caps(self, w: Window) -> list[Window]:
        """``w`` cut into as few equal parts as the learned caps allow (itself when it
        fits): the fewest requests that keep each part within every cap learned."""
        k = self.profile.of(w.kind)
        span_ms = _ms(w.end) - _ms(w.start)
        parts = 1
        if k.silent_range_days is not None:
            parts = max(parts, math.ceil(span_ms / (k.silent_range_days * 86_400_000.0)))
        if k.silent_cap is not None:
            parts = max(parts, math.ceil(w.expected_points / (SERIES_FILL * k.silent_cap)))
        if k.silent_cap_per_series is not None:
            parts = max(parts, math.ceil(self._series_peak(w)
                                         / (SERIES_FILL * k.silent_cap_per_series)))
        parts = min(parts, max(1, span_ms // 120_000))  # no part shorter than two minutes
        return [w] if parts <= 1 else _pieces(w, math.ceil(span_ms / parts))

    def _series_peak(self, w: Window) -> float:
        """The most points one stream of ``w`` is expected to bring."""
        span_s = (w.end - w.start).total_seconds()
        periods = [self.info.get((w.kind, k), StreamInfo(None, None)).period_s for k in w.keys]
        return max([span_s / p for p in periods if p] or [0.0])

    def _learn_size(self, kind: str, points: int) -> None:
        self.profile = self.profile.saw_answer(kind, points)

    def _learn_cut(self, parent: Window, fetched: Fetched, f: completeness.FollowUp) -> None:
        """A follow-up found data where the parent's answer had none: the service cut it.
        An answer cut as a whole at the largest size ever seen shows a cap on answers; one
        cut below it, a clipped range; streams cut at the answer's largest series count, a
        cap per series.  (What is learned only plans later windows: every answer is still
        judged.)"""
        k = self.profile.of(parent.kind)
        changes: dict = {"cut_answers": k.cut_answers + 1}
        got = fetched.got
        if f.side in ("tail", "head") and got.size > 0:
            if got.size >= k.largest_answer or k.silent_cap is not None:
                changes["silent_cap"] = min(got.size, k.silent_cap or got.size)
            else:
                edge = _nan_max(got.last_ms) if f.side == "tail" else _nan_min(got.first_ms)
                days = abs(edge - (_ms(parent.start) if f.side == "tail" else _ms(parent.end)))
                if days > 0:
                    days /= 86_400_000.0
                    changes["silent_range_days"] = min(days, k.silent_range_days or days)
        elif f.side == "thin":
            changes.update(_thinning_cap(parent, got, f, k))
        elif f.side in ("newest", "continuity", "origin") and parent.keys:
            cut = [int(got.count[parent.keys.index(key)]) for key in f.keys
                   if key in parent.keys]
            peak = max(cut or [0])
            if peak > 0 and peak == int(got.count.max()):
                changes["silent_cap_per_series"] = min(peak, k.silent_cap_per_series or peak)
        self.profile = self.profile.with_kind(parent.kind, **changes)
        log.warning("run %d: the service cut a %s answer (%s); learned %s", self.run_id,
                    parent.kind, f.reason, changes)


# ----------------------------------------------------------------------------- helpers

def _thinning_cap(parent: Window, got: completeness.Received, f: completeness.FollowUp,
                  k) -> dict:
    """What a thinned answer teaches: streams thinned to one count show a cap per series
    (a cap on the answer spreads its points over the streams, unevenly unless they are
    alike, and planning within the per-series count keeps within it too); else a cap on
    the answer, at its size."""
    counts = {int(got.count[parent.keys.index(key)]) for key in f.keys}
    if max(counts) - min(counts) <= 1 and max(counts) > 0:
        return {"silent_cap_per_series": min(max(counts),
                                             k.silent_cap_per_series or max(counts))}
    return {"silent_cap": min(got.size, k.silent_cap or got.size)}


def _progress(w: Window, f: completeness.FollowUp) -> bool:
    """A follow-up must ask something new: never the very window being judged again (a
    split asks the same range in shorter parts: that is new)."""
    if f.span_ms is not None and f.span_ms < _ms(w.end) - _ms(w.start):
        return True
    return (w.kind, tuple(w.keys), w.start, w.end) != (w.kind, f.keys, _dt(f.start_ms),
                                                       _dt(f.end_ms))


def _worth_asking(w: Window, facts: completeness.WindowFacts, got: completeness.Received,
                  f: completeness.FollowUp) -> bool:
    """A follow-up's own answer raises a further question only where it may itself have
    been cut: as large as a cut answer, or a stream holding as many points as any (a cap per
    series), or the newest point still missing, or data before it.  A narrow answer that
    simply has nothing more settles its question (an outage is an outage)."""
    if w.side in ("", "heal") or f.side in ("newest", "before", "thin"):
        return True
    if got.size >= facts.largest_before:  # as large as a cut answer
        return True
    peak = int(got.count.max()) if got.count.size else 0
    index = {k: i for i, k in enumerate(w.keys)}
    return peak > 0 and any(got.count[index[k]] == peak for k in f.keys if k in index)


def _pieces(w: Window, span_ms: float | None) -> list[Window]:
    """``w`` in consecutive pieces no longer than ``span_ms`` (itself when it fits)."""
    if span_ms is None or span_ms <= 0 or _ms(w.end) - _ms(w.start) <= span_ms:
        return [w]
    out, t, end = [], _ms(w.start), _ms(w.end)
    n = math.ceil((end - t) / span_ms)
    bounds = [t + (end - t) * i // n for i in range(n)] + [end + 1]
    for a, b in zip(bounds[:-1], bounds[1:]):
        stop = _dt(b - 1)
        out.append(replace(w, start=_dt(a), end=stop,
                           cursors={k: min(c, stop) for k, c in w.cursors.items()},
                           expected_points=w.expected_points / n))
    return out


def _merge_seen(a: tuple | None, b: tuple) -> tuple:
    if a is None:
        return b
    return (a[0] + b[0], float(np.fmin(a[1], b[1])), float(np.fmax(a[2], b[2])))


def _news(parent: Window, got: completeness.Received, f: completeness.FollowUp,
          seen: dict[str, tuple]) -> bool:
    """Whether a follow-up brought a point the parent's answer lacked, stream by stream
    (a follow-up asks one range for several streams, so it re-reads what some of them had):
    past a stream's last point at the end of the window, before its first at the start;
    anything in a range the parent did not cover or had nothing in."""
    index = {k: i for i, k in enumerate(parent.keys)}
    for key in f.keys:
        count, first, last = seen.get(key, (0, np.nan, np.nan))
        i = index.get(key)
        if not count:
            continue
        if i is None or f.side in ("before", "empty") or not got.count[i]:
            return True
        if f.side == "thin" and count > got.count[i]:
            return True
        if f.side in ("tail", "newest", "after") and last > got.last_ms[i]:
            return True
        if f.side in ("head", "continuity", "origin") and first < got.first_ms[i]:
            return True
    return False


def _answered(verdict: completeness.Verdict, f: completeness.FollowUp) -> None:
    """A follow-up that would ask exactly the question just answered: that answer, to that
    precise question, is the proof (an empty one proves the range empty).  Only a missing
    newest point stays unproved: the service's /latest contradicts its own data."""
    for key in f.keys:
        left = [r for r in verdict.unproven.get(key, ())
                if not (f.start_ms <= r[0] and r[1] <= f.end_ms)]
        if left:
            verdict.unproven[key] = left
        else:
            verdict.unproven.pop(key, None)


def _share(parent: Window, f: completeness.FollowUp) -> float:
    """Expected points of a follow-up: the parent's, pro rata of streams and time."""
    span = max(1.0, (parent.end - parent.start).total_seconds())
    part = max(0.0, (f.end_ms - f.start_ms) / 1000.0) / span
    return parent.expected_points * len(f.keys) / max(1, len(parent.keys)) * min(1.0, part)


def _within(table: pa.Table, w: Window) -> pa.Table:
    """Rows of ``table`` inside [w.start, w.end] (an answer may hold a point on the
    millisecond the request was widened by)."""
    if table.num_rows == 0:
        return table
    ts = table.column("ts")
    bounds = pc.min_max(ts)
    lo, hi = bounds["min"].as_py(), bounds["max"].as_py()
    if lo is not None and lo >= w.start and hi <= w.end:
        return table  # the usual case: nothing to cut
    keep = pc.and_(pc.greater_equal(ts, pa.scalar(w.start, ts.type)),
                   pc.less_equal(ts, pa.scalar(w.end, ts.type)))
    return table.filter(keep)


def _period_ms(info: StreamInfo | None) -> float:
    return info.period_s * 1000.0 if info is not None and info.period_s else np.nan


def _received(keys: list[str], key_column, ts_column, quarantine: pa.Table | None,
              period_ms: np.ndarray) -> completeness.Received:
    """Per-stream counts and edges of the readable points and of quarantined ones whose time
    could be read (they show where data is, even if its value could not be kept)."""
    index = {k: i for i, k in enumerate(keys)}
    codes, ts = _codes(key_column, index), _ms_array(ts_column)
    if quarantine is not None and quarantine.num_rows:
        qkeys = quarantine.column("key").to_pylist()
        qts = [_evidence_ms(t, text) for t, text in zip(quarantine.column("ts").to_pylist(),
                                                       quarantine.column("ts_text").to_pylist())]
        found = [(index.get(k, -1), t) for k, t in zip(qkeys, qts) if t is not None]
        if found:
            qcodes, qms = (np.array(x, np.int64) for x in zip(*found))
            codes, ts = np.r_[codes, qcodes], np.r_[ts, qms]
    return completeness.received(len(keys), codes, ts, period_ms)


def _evidence_ms(ts: datetime | None, text: str | None) -> int | None:
    """Where a quarantined point lies, as evidence that data exists there (never stored):
    its timestamp, or one without a timezone read as UTC."""
    if ts is not None:
        return _ms(ts)
    try:
        t = datetime.fromisoformat(str(text).replace("Z", "+00:00"))
    except ValueError:
        return None
    return _ms(t if t.tzinfo else t.replace(tzinfo=timezone.utc))


def _codes(column, index: dict[str, int]) -> np.ndarray:
    """Index into the window's keys of each row's (dictionary-encoded) key."""
    column = column.combine_chunks() if isinstance(column, pa.ChunkedArray) else column
    if len(column) == 0:
        return np.zeros(0, np.int64)
    if not pa.types.is_dictionary(column.type):
        column = column.cast(pa.string()).dictionary_encode()
    lookup = np.array([index.get(k, -1) for k in column.dictionary.to_pylist()], np.int64)
    return lookup[column.indices.to_numpy(zero_copy_only=False)]


def _ms_array(ts_column) -> np.ndarray:
    if len(ts_column) == 0:
        return np.zeros(0, np.int64)
    us = pc.cast(ts_column, pa.timestamp("us", tz="UTC")).cast(pa.int64())
    return us.to_numpy(zero_copy_only=False) // 1000


def _ms_many(times: list[datetime | None]) -> np.ndarray:
    """Float ms of many datetimes (NaN for None), each distinct one converted once (a
    window's cursors are mostly one and the same end)."""
    seen: dict[datetime, float] = {}
    return np.array([np.nan if t is None else seen.setdefault(t, float(_ms(t)))
                     if t not in seen else seen[t] for t in times], dtype=np.float64)


def _ms(t: datetime) -> int:
    return (t - _EPOCH) // _MS


def _dt(ms: float) -> datetime:
    return _EPOCH + timedelta(milliseconds=int(ms))


def _nan_min(a: np.ndarray) -> float:
    return float(np.nanmin(a)) if np.isfinite(a).any() else np.nan


def _nan_max(a: np.ndarray) -> float:
    return float(np.nanmax(a)) if np.isfinite(a).any() else np.nan

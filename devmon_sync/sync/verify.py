"""`devmon verify`: re-read a sample of committed windows and compare them with the mirror;
check its metadata and the start of each stream's history too.

What an engineer runs before trusting a mirror for a report: it asks the service again for
some of the windows the mirror committed (as many as the stated power needs by default, never
more data requests than a budget, or all of them), compares every point, and reports each
difference by device, parameter and time range.  Differences become unverified ranges
(``sync_gaps``), so the next `devmon sync` heals them; with ``repair`` they are re-synced at
once, through the same fetch-judge-commit path a sync uses.

A service may cut its answers without saying so, as the sync knows (``sync.proof``): a window
is re-read in parts within the caps learned of the service (``proof.caps``, sized by what the
mirror holds of it), and where an answer may still have been cut (it reached a learned cap,
or a stream of it stops short of what the mirror holds) the rest is asked again, as the
sync's follow-ups ask it, before any point is called extra (``_read``).

Two checks a window sample cannot make come after it:

- metadata: the service's sites, devices and groups read as the sync reads them
  (``MetadataReader``, a few list requests, and the full record of a device whose sensors the
  list may not have held whole) and compared with the mirror's (``verify_metadata``);
- the start of history: for each stream of the sampled devices (all with ``check_all``), the
  days before the mirror's oldest point.  Where the service gives daily counts, they are
  asked as the sync's own search by counts asks them (``history_steps``, ``daily_counts``):
  streams whose oldest points lie close in one request per 200 devices, each stream counted
  over at least ``history.MIN_SILENCE`` before its oldest point (the silence that ends the
  sync's search); only streams whose counts show points before it are then asked for them.
  Else (the service refuses or ignores the aggregation) one span of the longest range the
  service accepts before each oldest point, streams of one origin in one request
  (``history.HistorySearch.windows``).  A point there is missing history: recorded as an
  unverified range from it to the oldest point, and the stream's history search reopened, so
  the next sync fetches it and searches on before it.  Nothing is asked before the newest
  sync's ``--since``: the user chose not to mirror it.

Size: about 780 lines: the three checks share one run, its budget and its report.
"""

from __future__ import annotations

import dataclasses
import math
import random
from collections.abc import Callable
from dataclasses import dataclass, field
from datetime import datetime, timedelta

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc

from devmon_sync import service_profile as assumed
from devmon_sync.client import ApiClient, ForbiddenError, RequestTooLargeError
from devmon_sync.service_profile import ServiceProfile
from devmon_sync.store import Mirror, audit, metadata_from_api
from devmon_sync.store.audit import CommittedWindow, StreamDifference
from devmon_sync.store.summary import slot_start
from devmon_sync.sync import history, recheck, verify_metadata
from devmon_sync.sync.daily_counts import DailyCounts, of_devices
from devmon_sync.sync.metadata import MetadataReader
from devmon_sync.sync.metadata_check import with_full_records
from devmon_sync.sync.plan import HISTORY_SIDE, Stream, Window, pack, split
from devmon_sync.sync.proof import arrays as arr
from devmon_sync.sync.proof import judge as completeness
from devmon_sync.sync.proof.caps import MIN_PART_MS, parts_within_caps
from devmon_sync.sync.proof.fetcher import MAX_FOLLOW_UPS, StreamInfo, WindowFetcher
from devmon_sync.sync.proof.follow_ups import pieces
from devmon_sync.sync.verify_metadata import MetadataDifference

_MS = timedelta(milliseconds=1)


BAD_SHARE = 0.01
POWER = 0.95
"""The default sample: large enough that a mirror in which at least ``BAD_SHARE`` of the
committed windows differ from the service is caught with at least ``POWER`` probability."""


def miss_probability(total: int, checked: int, bad_share: float = BAD_SHARE) -> float:
    """The chance that ``checked`` windows drawn at random from ``total`` miss every one of
    the ``ceil(bad_share * total)`` that differ (hypergeometric, exact)."""
    bad = math.ceil(bad_share * total)
    if not total or not bad:
        return 0.0
    miss = 1.0
    for i in range(min(checked, total)):
        if total - bad - i <= 0:
            return 0.0
        miss *= (total - bad - i) / (total - i)
    return miss


def sample_size(total: int, bad_share: float = BAD_SHARE, power: float = POWER) -> int:
    """The fewest windows whose random sample catches ``bad_share`` of ``total`` differing
    with probability ``power`` (about 299 for a large mirror, all of a small one)."""
    n, miss, bad = 0, 1.0, math.ceil(bad_share * total)
    while n < total and miss > 1.0 - power:
        miss *= max(0.0, (total - bad - n) / (total - n))
        n += 1
    return n


@dataclass(frozen=True)
class VerifyOptions:
    share: float | None = None
    """Share of the committed windows to re-read (at least one); None: as many as the
    stated power needs (``sample_size``)."""
    check_all: bool = False
    budget: int | None = None
    """Most data requests to spend (None: no limit beyond the sample)."""
    repair: bool = False
    seed: int | None = None
    """Seed of the sample (None: a new sample each time)."""


@dataclass(frozen=True)
class HistoryStartDifference:
    """Points the service holds of a stream before the mirror's oldest one."""

    kind: str
    key: str
    device: str
    name: str
    points: int
    first: datetime  # the oldest the service gave
    last: datetime  # the newest it gave before the mirror's oldest
    mirror_first: datetime


@dataclass(frozen=True)
class SummaryDifference:
    """A parameter whose six-hour summaries (what long plots and a report's statistics
    read) differ from its readings in ``slots`` slots from ``first`` to ``last``."""

    key: str
    device: str
    name: str
    slots: int
    first: datetime
    last: datetime


@dataclass(frozen=True)
class CountRequest:
    """One daily-count request of the start-of-history check: devices whose streams' oldest
    points lie close, over the days up to the newest of those points."""

    serials: list[str]
    keys: set[str]
    """The parameters it checks (a GNSS sensor's by its lat, lon and eh parameters)."""
    start: datetime
    end: datetime
    days: range


@dataclass
class HistoryPlan:
    """The start-of-history requests: daily counts where the service may give them, else one
    span before each stream's oldest point."""

    windows: list[Window]
    """One span before each stream's oldest point, streams of one start together: the check
    where the service gives no daily counts."""
    starts: dict[tuple[str, str], tuple[str, str, datetime]]
    """(kind, key): (device serial, name, oldest mirrored point) of every stream checked."""
    floor: datetime | None = None
    counts: list[CountRequest] = field(default_factory=list)
    """The daily counts to ask (empty: the service is known to give none)."""
    uncounted: list[Window] = field(default_factory=list)
    """The spans of the streams no daily count checks (a GNSS sensor without its lat, lon
    and eh parameters), asked besides the counts."""
    stream_of: dict[str, tuple[str, str]] = field(default_factory=dict)
    """Parameter counted: its stream (kind, key)."""

    @property
    def streams(self) -> int:
        return len(self.starts)

    @property
    def requests(self) -> int:
        """Requests planned (by counts, the spans of the streams they show earlier points of
        come on top)."""
        return len(self.counts) + len(self.uncounted) if self.counts else len(self.windows)

    def oldest(self, parameter: str) -> datetime:
        """The oldest mirrored point of a counted parameter's stream."""
        return self.starts[self.stream_of[parameter]][2]


@dataclass
class VerifyReport:
    run_id: int
    windows_total: int
    windows_planned: int
    windows_checked: int = 0
    requests: int = 0
    """Every request verify sent (the three checks together)."""
    differences: list[StreamDifference] = field(default_factory=list)
    repaired: int = 0
    refused: list[str] = field(default_factory=list)
    window_requests: int = 0
    metadata_devices: int = 0
    metadata_requests: int = 0
    metadata_differences: list[MetadataDifference] = field(default_factory=list)
    history_streams: int = 0
    """Streams whose start of history was checked (every request for them answered)."""
    history_planned: int = 0
    history_requests: int = 0
    history_differences: list[HistoryStartDifference] = field(default_factory=list)
    summary_differences: list[SummaryDifference] = field(default_factory=list)
    """Parameters whose six-hour summaries differ from their own readings (local: no
    request), in the readings windows checked and found as the service has them."""
    summaries_rebuilt: bool = False
    notes: list[str] = field(default_factory=list)
    """What the metadata reading learned of the service (as a sync's notes)."""

    @property
    def clean(self) -> bool:
        return not (self.differences or self.metadata_differences or
                    self.history_differences or self.summary_differences)

    @property
    def healed_now(self) -> bool:
        """Nothing is left for the next sync: no difference, or a repair took every one the
        data requests can repair (metadata follows the service at the next sync)."""
        return self.clean or not self.metadata_differences and (
            self.summaries_rebuilt or not self.summary_differences)


def sample(windows: list[CommittedWindow], options: VerifyOptions) -> list[CommittedWindow]:
    """The windows to check: all, or a random share (at least one), at most ``budget``."""
    chosen = list(windows)
    if not options.check_all:
        n = sample_size(len(windows)) if options.share is None else \
            max(1, math.ceil(options.share * len(windows))) if windows else 0
        chosen = sorted(random.Random(options.seed).sample(windows, min(n, len(windows))),
                        key=lambda w: (w.start, w.kind))
    if options.budget is not None:
        chosen = chosen[:options.budget]
    return chosen


class Verifier:
    def __init__(self, client: ApiClient, mirror: Mirror, options: VerifyOptions,
                 on_window: Callable[[int, int], None] | None = None):
        self.client, self.mirror, self.options = client, mirror, options
        self.on_window = on_window or (lambda done, total: None)
        self.profile = mirror.load_profile(client.base_given)
        self._history: HistoryPlan | None = None
        self._sent0 = 0
        self._not_data = 0  # requests sent that are no data requests (the metadata's)
        self._asks_left = MAX_FOLLOW_UPS  # requests the window being re-read may still send
        self._day_counts: _DayCounts | None = None  # planned with the history check

    def plan(self) -> tuple[list[CommittedWindow], int]:
        """(the windows to check, how many the mirror committed).  Streams of sensors
        deleted upstream are left out: the service no longer serves their data, the mirror
        keeps it as their archive."""
        deleted = audit.deleted_streams(self.mirror.con)
        windows = [cw for cw in (_without(cw, deleted) for cw in
                                 self.mirror.committed_windows()) if cw.keys]
        return sample(windows, self.options), len(windows)

    def history_plan(self, chosen: list[CommittedWindow]) -> HistoryPlan:
        """The start-of-history requests for the streams of the devices of ``chosen`` (of
        every device with ``check_all``): planned once, as the sync plans its history
        search (``history.HistorySearch``), from each stream's oldest mirrored point."""
        if self._history is None:
            self._history = self._plan_history(chosen)
        return self._history

    def run(self, chosen: list[CommittedWindow], total: int) -> VerifyReport:
        run_id = self.mirror.begin_run(self.client.base_url, {
            "verify": True, "repair": self.options.repair, "windows": len(chosen)})
        report = VerifyReport(run_id, total, len(chosen))
        if self.profile.api_url:
            self.client.locate(self.profile.api_url)
        fetcher = WindowFetcher(self.client, self.mirror, run_id, self.profile,
                                self._stream_info(), lambda kind, rows: None)
        self._sent0 = self.client.requests_sent
        status = "failed"
        try:
            checked = []
            for i, cw in enumerate(chosen):
                if self._spent():
                    break
                self.on_window(i, len(chosen))
                if self._check(fetcher, self._window(cw), report):
                    report.windows_checked += 1
                    checked.append(cw)
            report.window_requests = self.client.requests_sent - self._sent0
            self._check_summaries(checked, report)
            if report.repaired:
                self._history = None  # a repair may have fetched a stream's oldest points
            self._check_metadata(report)
            self._check_history(fetcher, self.history_plan(chosen), report)
            status = "verified" if report.clean else \
                "repaired" if self.options.repair and report.healed_now else "differences"
        finally:
            report.requests = self.client.requests_sent - self._sent0
            self.mirror.finish_run(run_id, status, report.requests, _summary(report))
        return report

    def _check_summaries(self, checked: list[CommittedWindow], report: VerifyReport) -> None:
        """The six-hour summaries of the readings windows checked, against their own
        readings (no request).  Each commit keeps them in its transaction, so a difference
        means the file was changed outside devmon, or a bug: the long plots and a report's
        statistics would read figures its readings do not give.  Streams that differ from
        the service are left out (a repair re-syncs them, summaries included; else their
        readings are what is wrong).  ``--repair`` rebuilds the slots from the readings."""
        wrong = {d.key for d in report.differences if d.kind == "readings"}
        slots: dict[tuple[str, int], tuple[str, str]] = {}
        for cw in checked:
            keys = [k for k in dict.fromkeys(cw.keys) if k not in wrong]
            if cw.kind == "readings" and keys:
                for key, slot, device, name in self.mirror.summary_slots_differing(
                        keys, cw.start, cw.end):
                    slots[(key, slot)] = (device, name)
        if not slots:
            return
        by_key: dict[str, list[int]] = {}
        for key, slot in sorted(slots):
            by_key.setdefault(key, []).append(slot)
        report.summary_differences = [
            SummaryDifference(key, *slots[(key, found[0])], len(found),
                              slot_start(found[0]), slot_start(found[-1] + 1))
            for key, found in by_key.items()]
        if self.options.repair:
            self.mirror.rebuild_summary_slots(sorted(slots))
            report.summaries_rebuilt = True

    def _spent(self) -> bool:
        """Whether the data requests (the windows' and the history's) reached the budget."""
        budget = self.options.budget
        return budget is not None and \
            self.client.requests_sent - self._sent0 - self._not_data >= budget

    def _stream_info(self) -> dict[tuple[str, str], StreamInfo]:
        """Sampling periods for the completeness judgement of a repair."""
        return {(kind, key): StreamInfo(period, None)
                for kind, key, period in self.mirror.stream_periods()}

    @staticmethod
    def _window(cw: CommittedWindow) -> Window:
        """The request that re-reads ``cw``, each stream once (the ledger may hold a stream
        more than once for one commit; an answer's counts are per stream)."""
        keys = list(dict.fromkeys(cw.keys))
        return Window(cw.kind, keys, cw.start, cw.end, {k: cw.end for k in keys},
                      float(cw.rows), side="verify")

    def _check(self, fetcher: WindowFetcher, w: Window, report: VerifyReport) -> bool:
        """Compare one window with the service's points of it, read whole
        (``_service_points``); False when it could not be read whole (the budget ran out,
        or the service's answers kept being cut): not compared, since a part read would
        show false differences."""
        self._asks_left = MAX_FOLLOW_UPS
        where = f"{w.kind} {w.start:%Y-%m-%d %H:%M}..{w.end:%Y-%m-%d %H:%M}"
        try:
            answer = self._service_points(fetcher, w)
        except ForbiddenError:
            report.refused.append(where)
            return True
        except _NotRead as err:
            if err.follow_ups:
                report.notes.append(
                    f"{where} was not compared: the service's answers were still cut after "
                    f"{MAX_FOLLOW_UPS} requests; run `devmon sync` (it learns where the "
                    f"service cuts answers) and `devmon verify` again.")
            return False
        found = self.mirror.differences(w.kind, w.keys, w.start, w.end, answer)
        report.differences += found
        if not found:
            return True
        keys = [d.key for d in found]
        if self.options.repair:
            part = Window(w.kind, keys, w.start, w.end, {k: w.end for k in keys},
                          w.expected_points * len(keys) / max(1, len(w.keys)), side="verify")
            fetcher.fetch(part)
            report.repaired += len(keys)
        else:
            self.mirror.record_gaps(report.run_id, w.kind, {
                d.key: (d.first, d.last, _differ_reason(d.points)) for d in found})
        return True

    # ------------------------------------------------------------------ re-reading a window

    def _service_points(self, fetcher: WindowFetcher, w: Window) -> pa.Table:
        """The service's points of ``w`` (as ``_as_answer`` gives them), asked as the sync
        asks: in parts within the caps learned of the service, sized by what the mirror
        holds of each stream (``proof.caps.parts_within_caps``), each part read whole
        (``_read``)."""
        mine = audit.stream_extents(self.mirror.con, w.kind, list(w.keys), w.start, w.end)
        counts = [mine[k][0] for k in w.keys if k in mine]
        sized = dataclasses.replace(w, expected_points=float(sum(counts)))
        parts = parts_within_caps(self.profile.of(w.kind), sized, float(max(counts, default=0)))
        if len(parts) == 1:
            return self._read(fetcher, sized, mine)
        return _concat([self._service_points(fetcher, part) for part in parts])

    def _read(self, fetcher: WindowFetcher, w: Window,
              mine: dict[str, tuple[int, datetime, datetime]]) -> pa.Table:
        """One request for ``w`` and, where its answer may have been cut, the rest asked
        again as the sync's follow-ups ask it: the streams that stop short of what the
        mirror holds of them (or, in an answer at a learned cap, of the window's edges)
        after their last point and before their first, together (``_rest``); streams an
        answer at a cap holds fewer points of than the mirror, in halves (a service may thin
        what it cuts).  Only an answer to a narrower question settles a stream: the mirror's
        points beyond what the service then gives are truly extra."""
        self._may_ask()
        try:
            fetched = fetcher.ask(w)
        except RequestTooLargeError:
            return _concat([self._service_points(fetcher, half) for half in split(w)])
        cut = self._at_a_cap(w.kind, fetched.got)
        tail, head = _short(w, fetched.got, mine, cut)
        answer = _concat([_as_answer(fetched.table, w.kind),
                          self._rest(fetcher, w, tail, after=True),
                          self._rest(fetcher, w, head, after=False)])
        return self._halved(fetcher, w, answer, mine) if cut else answer

    def _may_ask(self) -> None:
        """Raise ``_NotRead`` when the budget is spent or the window has asked enough."""
        if self._spent():
            raise _NotRead(follow_ups=False)
        if self._asks_left <= 0:
            raise _NotRead(follow_ups=True)
        self._asks_left -= 1

    def _at_a_cap(self, kind: str, got: completeness.Received) -> bool:
        """Whether an answer reached a cap learned of the service (every answer a silent
        cap cuts is that large): it may have been cut whatever the mirror holds."""
        k = self.profile.of(kind)
        if got.size <= 0:
            return False
        peak = int(got.count.max()) if got.count.size else 0
        return (k.silent_cap is not None and got.size >= k.silent_cap) or \
            (k.silent_cap_per_series is not None and peak >= k.silent_cap_per_series)

    def _rest(self, fetcher: WindowFetcher, w: Window, edges: dict[str, float],
              after: bool) -> pa.Table | None:
        """The service's points of the streams of ``edges`` after (before) each one's edge
        (ms) in ``w``: one question for them all, each stream's answer cut to its own rest
        (a cap cuts each stream at its own last point); the streams the answer held nothing
        of apart when that question would be ``w`` itself; None when it is (its answer is
        what it is)."""
        if not edges:
            return None
        keys = [k for k in w.keys if k in edges]
        start, end = (arr.dt(min(edges.values()) + 1), w.end) if after else \
            (w.start, arr.dt(max(edges.values()) - 1))
        if end < start:
            return None
        if keys == list(w.keys) and (start, end) == (w.start, w.end):
            reached = {k: t for k, t in edges.items() if t >= arr.ms(w.start)}
            if not reached or len(reached) == len(edges):
                return None
            nothing = {k: t for k, t in edges.items() if k not in reached}
            return _concat([self._rest(fetcher, w, reached, after),
                            self._rest(fetcher, w, nothing, after)])
        rest = Window(w.kind, keys, start, end, {k: end for k in keys}, 0.0, side="verify")
        return _beyond(self._service_points(fetcher, rest), edges, after)

    def _halved(self, fetcher: WindowFetcher, w: Window, answer: pa.Table,
                mine: dict[str, tuple[int, datetime, datetime]]) -> pa.Table:
        """``answer`` (at a cap) with the streams it holds fewer points of than the mirror
        read again in two halves, each read as any window (a service may thin the answers
        it cuts; halves too short to split settle it)."""
        held = _point_counts(answer)
        thin = [k for k in w.keys if held.get(k, 0) < mine.get(k, (0,))[0]]
        span_ms = arr.ms(w.end) - arr.ms(w.start)
        if not thin or span_ms < 2 * MIN_PART_MS:
            return answer
        part = Window(w.kind, thin, w.start, w.end, {k: w.end for k in thin}, 0.0,
                      side="verify")
        halves = [self._service_points(fetcher, half) for half in pieces(part, span_ms / 2)]
        kept = answer.filter(pc.invert(pc.is_in(answer.column("key"),
                                                value_set=pa.array(thin, pa.string()))))
        return _concat([kept, *halves])

    # ------------------------------------------------------------------ metadata

    def _check_metadata(self, report: VerifyReport) -> None:
        """Read the metadata as the sync does (its reader and parser, with what earlier
        runs learned of the service's paging and options) and compare it with the
        mirror's; the full record of a device whose sensors the listing may have left out
        decides before a sensor is called deleted."""
        sent = self.client.requests_sent
        self.client.list_paging = self.profile.lists
        self.client.refused_options |= set(self.profile.refused_options)
        reader = MetadataReader(self.client, report.notes, lambda resource, err:
                                report.refused.append(f"{resource} ({err})"))
        try:
            sites, devices, groups = reader.read()
            mine = verify_metadata.side(audit.metadata_rows(self.mirror.con))
            meta = metadata_from_api(sites, devices, groups, whole=True)
            theirs = verify_metadata.side(meta.tables())
            confirm = verify_metadata.to_confirm(mine, theirs, set(meta.sensors_listed))
            full = reader.full_records(sorted(confirm)) if confirm else {}
            if full:
                meta = metadata_from_api(sites, with_full_records(devices, full), groups,
                                         whole=True)
                theirs = verify_metadata.side(meta.tables())
            report.metadata_differences = verify_metadata.compare(
                mine, theirs, set(meta.sensors_listed), reader.groups_whole)
            report.metadata_devices = len(set(mine.devices) | set(theirs.devices))
            if not reader.groups_whole:
                report.notes.append("Group memberships were not compared: the service refused "
                                    "(part of) the group listing to this key.")
        finally:
            report.metadata_requests = self.client.requests_sent - sent
            self._not_data += report.metadata_requests

    # ------------------------------------------------------------------ start of history

    def _plan_history(self, chosen: list[CommittedWindow]) -> HistoryPlan:
        limits = self.profile.planning_limits(assumed.DEFAULT_LIMITS)
        span = timedelta(days=limits.max_range_days) * 0.999
        floor = audit.data_floor(self.mirror.con)
        device_of = self._streams()
        if not self.options.check_all:
            devices = {device_of.get((cw.kind, k)) for cw in chosen for k in cw.keys}
            device_of = {s: sn for s, sn in device_of.items() if sn in devices}
        plan = HistoryPlan([], {}, floor)
        for kind in ("readings", "gnss"):
            keys = sorted(k for (kd, k) in device_of if kd == kind)
            oldest = audit.oldest_points(self.mirror.con, kind, keys)
            search = history.HistorySearch.of(kind, {k: v[2] for k, v in oldest.items()},
                                              span, floor)
            plan.starts.update(((kind, k), oldest[k]) for k in search.open)
            plan.windows += search.windows(limits)
        if self.profile.aggregation not in ("refused", "ignored"):
            self._plan_counts(plan, device_of, limits, span)
        return plan

    def _plan_counts(self, plan: HistoryPlan, device_of: dict[tuple[str, str], str],
                     limits: assumed.ResponseLimits, span: timedelta) -> None:
        """The daily counts of ``plan``'s streams, clustered as the sync's search by counts
        clusters them (``history_steps``): streams whose oldest points lie within a settling
        window less ``history.MIN_SILENCE`` of each other in one request per 200 devices,
        over the days from a settling window before the newest of them to its day, so each
        stream is counted over at least ``MIN_SILENCE`` before its oldest point.  None
        planned where they would not save requests (a service accepting short ranges only:
        the spans then look further back for no more)."""
        counter = self._day_counts = _DayCounts(self.client, self.mirror, self.profile, limits)
        fields: dict[str, list[str]] = {}
        for parameter, sensor in self.mirror.gnss_field_parameters().items():
            fields.setdefault(sensor, []).append(parameter)
        serial_of: dict[str, str] = {}
        origin: dict[str, datetime] = {}
        uncounted: dict[str, dict[str, datetime]] = {}
        for (kind, key), (_, _, first) in plan.starts.items():
            parameters = [key] if kind == "readings" else sorted(fields.get(key, ()))
            if not parameters:
                uncounted.setdefault(kind, {})[key] = first
            for parameter in parameters:
                plan.stream_of[parameter] = (kind, key)
                serial_of[parameter], origin[parameter] = device_of[(kind, key)], first
        window = timedelta(days=counter._settle_days() - 1)
        reach = max(timedelta(0), window - history.MIN_SILENCE)
        for keys in history.clusters(origin, reach):
            last_day = recheck.day_of(max(origin[k] for k in keys))
            start = recheck.day_start(last_day - window.days)
            if plan.floor is not None:
                start = max(start, plan.floor)
            end = recheck.day_start(last_day + 1) - _MS
            days = range(recheck.day_of(start), last_day + 1)
            serials = sorted({serial_of[k] for k in keys})
            plan.counts += [CountRequest(chunk, of_devices(keys, serial_of, chunk), start, end,
                                         days)
                            for chunk in counter._device_chunks(serials, len(days))]
        for kind, firsts in uncounted.items():
            plan.uncounted += history.HistorySearch.of(kind, firsts, span,
                                                       plan.floor).windows(limits)
        if len(plan.counts) + len(plan.uncounted) >= len(plan.windows):
            plan.counts, plan.uncounted = [], []  # (a short range limit: spans cost no more)

    def _streams(self) -> dict[tuple[str, str], str]:
        """(kind, key): device serial of every stream the sync syncs (sensors deleted
        upstream left out)."""
        deleted = audit.deleted_streams(self.mirror.con)
        out = {("readings", p.uuid): p.device_serial_number
               for p in self.mirror.parameters_to_sync()}
        out.update((("gnss", g.sensor_uuid), g.device_serial_number)
                   for g in self.mirror.gnss_sensors_to_sync())
        return {s: sn for s, sn in out.items() if s not in deleted}

    def _check_history(self, fetcher: WindowFetcher, plan: HistoryPlan,
                       report: VerifyReport) -> None:
        sent = self.client.requests_sent
        report.history_planned = plan.streams
        try:
            confirm = self._count_history(fetcher, plan, report) if plan.counts else None
            if confirm is None:  # no daily counts: one span before each stream's start
                report.history_streams = 0
                self._ask_history(fetcher, plan.windows, plan, report, confirming=False)
            else:
                self._ask_history(fetcher, plan.uncounted, plan, report, confirming=False)
                self._ask_history(fetcher, confirm, plan, report, confirming=True)
            if self._spent() and report.history_streams < plan.streams:
                report.notes.append(
                    f"The budget was spent before the start of history of "
                    f"{plan.streams - report.history_streams} streams was checked.")
        finally:
            report.history_requests = self.client.requests_sent - sent

    def _ask_history(self, fetcher: WindowFetcher, windows: list[Window], plan: HistoryPlan,
                     report: VerifyReport, confirming: bool) -> None:
        """Ask each span before streams' oldest points and report what it holds; a span
        ``confirming`` what daily counts showed checks streams already counted as checked
        (one that could not be asked un-counts them)."""
        for i, w in enumerate(windows):
            if self._spent():
                break
            self.on_window(i, len(windows))
            found: dict[str, list] = {}
            whole = self._ask_before(fetcher, w, found, report)
            if whole != confirming:
                report.history_streams += len(w.keys) if whole else -len(w.keys)
            self._history_found(fetcher, w, found, plan, report)

    def _count_history(self, fetcher: WindowFetcher, plan: HistoryPlan,
                       report: VerifyReport) -> list[Window] | None:
        """Ask the planned daily counts (``daily_counts``, as the sync asks them); the spans
        that fetch what they show before a stream's oldest point (the points a difference
        reports), or None when the service gives no daily counts (noted)."""
        counter = self._day_counts
        counter._fetcher, counter.report = fetcher, report
        checked: set[tuple[str, str]] = set()
        before: dict[tuple[str, str], int] = {}  # the first day with points before the oldest
        for i, ask in enumerate(plan.counts):
            if self._spent():
                break
            self.on_window(i, len(plan.counts))
            try:
                changed = counter._changed_days(ask.serials, ask.keys, ask.start, ask.end,
                                                ask.days, sums=False)  # data or none
            except ForbiddenError as err:
                report.refused.append(f"daily counts of {len(ask.serials)} devices ({err})")
                continue
            if changed is None:
                return None
            checked |= {plan.stream_of[k] for k in ask.keys}
            for key, day in changed:
                if day <= recheck.day_of(plan.oldest(key)):
                    stream = plan.stream_of[key]
                    before[stream] = min(day, before.get(stream, day))
        report.history_streams += len(checked)
        return self._spans_counted(plan, before)

    def _spans_counted(self, plan: HistoryPlan, before: dict[tuple[str, str], int]
                       ) -> list[Window]:
        """For each stream whose count differs on a day up to its oldest point's: the span
        from that day (not before the floor) to just before its oldest point (on the oldest
        point's own day the difference may lie after it: the span then holds nothing)."""
        limits = self.profile.planning_limits(assumed.DEFAULT_LIMITS)
        spans: dict[tuple[str, datetime, datetime], list[Stream]] = {}
        for (kind, key), day in sorted(before.items()):
            oldest = plan.starts[(kind, key)][2]
            start = recheck.day_start(day)
            if plan.floor is not None:
                start = max(start, plan.floor)
            if start < oldest:
                spans.setdefault((kind, start, oldest), []).append(
                    Stream(key, start, oldest - _MS, 0.0))
        return [dataclasses.replace(w, side=HISTORY_SIDE)
                for (kind, _, _), streams in spans.items()
                for w in pack(kind, streams, 1.0, limits)]

    def _ask_before(self, fetcher: WindowFetcher, w: Window, found: dict[str, list],
                    report: VerifyReport) -> bool:
        """Ask ``w`` (halved while the service finds it too large) and add each stream's
        points in it to ``found`` ([count, first, last]); False when part of it could not
        be asked (refused, or the budget spent)."""
        try:
            fetched = fetcher.ask(w)
        except RequestTooLargeError:
            whole = True
            for half in reversed(split(w)):  # the newer half first: next to the mirror's
                whole = not self._spent() and self._ask_before(fetcher, half, found,
                                                               report) and whole
            return whole
        except ForbiddenError:
            report.refused.append(f"{w.kind} of {len(w.keys)} streams before "
                                  f"{w.end:%Y-%m-%d %H:%M}")
            return False
        answer = _as_answer(fetched.table, w.kind)
        if answer.num_rows:
            counted = answer.group_by("key").aggregate(
                [("ts", "count"), ("ts", "min"), ("ts", "max")]).to_pylist()
            for row in counted:
                seen = found.setdefault(row["key"], [0, row["ts_min"], row["ts_max"]])
                seen[0] += row["ts_count"]
                seen[1], seen[2] = min(seen[1], row["ts_min"]), max(seen[2], row["ts_max"])
        return True

    def _history_found(self, fetcher: WindowFetcher, w: Window, found: dict[str, list],
                       plan: HistoryPlan, report: VerifyReport) -> None:
        """Report each stream of ``w`` with points before its oldest one; record the range
        for the next sync (or, with ``repair``, fetch it now) and reopen its history search,
        so the sync searches on before what was found."""
        diffs = [HistoryStartDifference(w.kind, key, *plan.starts[(w.kind, key)][:2], n,
                                        first, last, plan.starts[(w.kind, key)][2])
                 for key, (n, first, last) in sorted(found.items())
                 if (w.kind, key) in plan.starts and n]
        if not diffs:
            return
        report.history_differences += diffs
        keys = [d.key for d in diffs]
        if self.options.repair:
            fetcher.fetch(dataclasses.replace(
                w, keys=keys, cursors={k: w.cursors[k] for k in keys},
                expected_points=float(sum(d.points for d in diffs)), origins={}))
            report.repaired += len(keys)
        else:
            self.mirror.record_gaps(report.run_id, w.kind, {
                d.key: (d.first, d.mirror_first - _MS, _before_reason(d.points))
                for d in diffs})
        self.mirror.note_history_searched(w.kind, {k: None for k in keys})  # search again


def _without(cw: CommittedWindow, streams: set[tuple[str, str]]) -> CommittedWindow:
    """``cw`` without ``streams``."""
    if not streams:
        return cw
    return dataclasses.replace(cw, keys=tuple(k for k in cw.keys
                                              if (cw.kind, k) not in streams))


def _differ_reason(points: int) -> str:
    return f"devmon verify: {points} points differ from the service"


def _before_reason(points: int) -> str:
    return f"devmon verify: the service holds {points} points before the mirror's oldest point"


def _summary(report: VerifyReport) -> str:
    """The run's message in the mirror's run list."""
    parts = [f"{len(report.differences)} streams differ" if report.differences else "",
             f"{len(report.metadata_differences)} metadata differences"
             if report.metadata_differences else "",
             f"{len(report.history_differences)} streams hold history before the mirror's"
             if report.history_differences else "",
             f"{len(report.summary_differences)} parameters' summaries differ from their "
             f"readings" + (" (rebuilt)" if report.summaries_rebuilt else "")
             if report.summary_differences else ""]
    return ", ".join(p for p in parts if p)


class _NotRead(Exception):
    """A window could not be read whole: the budget ran out, or (``follow_ups``) it asked
    ``MAX_FOLLOW_UPS`` requests and its answers were still cut."""

    def __init__(self, follow_ups: bool):
        super().__init__()
        self.follow_ups = follow_ups


class _DayCounts(DailyCounts):
    """The sync's daily-count requests (``daily_counts.DailyCounts``) as verify asks them:
    that mixin with the attributes of the engine it reads (``report`` and ``_fetcher`` are
    set when the counts are asked)."""

    NO_AGGREGATION_NOTE = (
        "The service does not give daily counts as devmon asks ({why}): the start of "
        "history was checked with one request per distinct oldest point instead.")

    def __init__(self, client: ApiClient, mirror: Mirror, profile: ServiceProfile,
                 limits: assumed.ResponseLimits):
        self.client, self.mirror, self.profile, self._limits = client, mirror, profile, limits
        self.report: VerifyReport | None = None
        self._fetcher: WindowFetcher | None = None


def _short(w: Window, got: completeness.Received,
           mine: dict[str, tuple[int, datetime, datetime]], cut: bool
           ) -> tuple[dict[str, float], dict[str, float]]:
    """Per stream of ``w`` whose answer may have been cut: the edge (ms) after which its rest
    is asked (its last point; with none, just before the window) and the one before which
    (its first point).  A stream is short where the mirror holds points of it beyond the
    answer's, or, in an answer at a cap (``cut``), wherever it does not reach the window's
    edge."""
    start, end = arr.ms(w.start), arr.ms(w.end)
    tail: dict[str, float] = {}
    head: dict[str, float] = {}
    for i, key in enumerate(w.keys):
        held = mine.get(key)
        if not got.count[i]:
            if held or cut:
                tail[key] = float(start - 1)
            continue
        first, last = float(got.first_ms[i]), float(got.last_ms[i])
        if (held and arr.ms(held[2]) > last) or (cut and last < end):
            tail[key] = last
        if (held and arr.ms(held[1]) < first) or (cut and first > start):
            head[key] = first
    return tail, head


def _beyond(table: pa.Table, edges: dict[str, float], after: bool) -> pa.Table:
    """The rows of ``table`` (as ``_as_answer`` gives them) of the streams of ``edges``,
    after (before) their stream's edge (ms)."""
    if not table.num_rows:
        return table
    codes = arr.key_indices(table.column("key"), {k: i for i, k in enumerate(edges)})
    ts = arr.ms_array(table.column("ts"))
    edge = np.array(list(edges.values()), dtype=np.float64)
    keep = np.zeros(codes.size, bool)
    known = codes >= 0
    own = edge[codes[known]]
    keep[known] = ts[known] > own if after else ts[known] < own
    return table.filter(pa.array(keep))


def _point_counts(answer: pa.Table) -> dict[str, int]:
    """Distinct timestamps per stream of an answer (as the mirror's are counted)."""
    if not answer.num_rows:
        return {}
    rows = answer.group_by("key").aggregate([("ts", "count_distinct")]).to_pylist()
    return {row["key"]: int(row["ts_count_distinct"]) for row in rows}


def _concat(tables: list[pa.Table | None]) -> pa.Table | None:
    """The tables of one window's answers as one (None: a question not asked; so is the
    whole when none was)."""
    present = [t for t in tables if t is not None]
    if len(present) <= 1:
        return present[0] if present else None
    return pa.concat_tables(present, promote_options="permissive")


def _as_answer(table: pa.Table, kind: str) -> pa.Table:
    """A fetched table with its stream key as text in ``key`` (what audit compares)."""
    column = "parameter_uuid" if kind == "readings" else "sensor_uuid"
    key = pc.cast(table.column(column), pa.string())
    return table.drop_columns([column]).append_column("key", key)

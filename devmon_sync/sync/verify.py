"""`devmon verify`: re-read a sample of committed windows and compare them with the mirror;
check its metadata and the start of each stream's history too.

What an engineer runs before trusting a mirror for a report: it asks the service again for
some of the windows the mirror committed (as many as the stated power needs by default, never
more data requests than a budget, or all of them), compares every point, and reports each
difference by device, parameter and time range.  Differences become unverified ranges
(``sync_gaps``), so the next `devmon sync` heals them; with ``repair`` they are re-synced at
once, through the same fetch-judge-commit path a sync uses.

Two checks a window sample cannot make come after it:

- metadata: the service's sites, devices and groups read as the sync reads them
  (``MetadataReader``, a few list requests, and the full record of a device whose sensors the
  list may not have held whole) and compared with the mirror's (``verify_metadata``);
- the start of history: for each stream of the sampled devices (all with ``check_all``), one
  span of the longest range the service accepts before the mirror's oldest point, asked as
  the sync's own history search asks it (``history.HistorySearch.windows``: streams of one
  origin in one request).  A point there is missing history: recorded as an unverified range
  from it to the oldest point, and the stream's history search reopened, so the next sync
  fetches it and searches on before it.  Nothing is asked before the newest sync's
  ``--since``: the user chose not to mirror it.
"""

from __future__ import annotations

import dataclasses
import math
import random
from collections.abc import Callable
from dataclasses import dataclass, field
from datetime import datetime, timedelta

import pyarrow as pa
import pyarrow.compute as pc

from devmon_sync import service_profile as assumed
from devmon_sync.client import ApiClient, ForbiddenError, RequestTooLargeError
from devmon_sync.store import Mirror, audit, metadata_from_api
from devmon_sync.store.audit import CommittedWindow, StreamDifference
from devmon_sync.sync import history, verify_metadata
from devmon_sync.sync.metadata import MetadataReader
from devmon_sync.sync.metadata_check import with_full_records
from devmon_sync.sync.plan import Window, split
from devmon_sync.sync.proof.fetcher import StreamInfo, WindowFetcher
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


@dataclass
class HistoryPlan:
    """The start-of-history requests: one span before each stream's oldest point."""

    windows: list[Window]
    starts: dict[tuple[str, str], tuple[str, str, datetime]]
    """(kind, key): (device serial, name, oldest mirrored point) of every stream checked."""

    @property
    def streams(self) -> int:
        return len({(w.kind, k) for w in self.windows for k in w.keys})


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
    notes: list[str] = field(default_factory=list)
    """What the metadata reading learned of the service (as a sync's notes)."""

    @property
    def clean(self) -> bool:
        return not (self.differences or self.metadata_differences or
                    self.history_differences)

    @property
    def healed_now(self) -> bool:
        """Nothing is left for the next sync: no difference, or a repair took every one the
        data requests can repair (metadata follows the service at the next sync)."""
        return self.clean or not self.metadata_differences


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
            for i, cw in enumerate(chosen):
                if self._spent():
                    break
                self.on_window(i, len(chosen))
                self._check(fetcher, self._window(cw), report)
                report.windows_checked += 1
            report.window_requests = self.client.requests_sent - self._sent0
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
        return Window(cw.kind, list(cw.keys), cw.start, cw.end, {k: cw.end for k in cw.keys},
                      float(cw.rows), side="verify")

    def _check(self, fetcher: WindowFetcher, w: Window, report: VerifyReport) -> None:
        """Compare one window (halved if the service now finds it too large)."""
        try:
            fetched = fetcher.ask(w)
        except RequestTooLargeError:
            for half in split(w):
                if not self._spent():
                    self._check(fetcher, half, report)
            return
        except ForbiddenError:
            report.refused.append(f"{w.kind} {w.start:%Y-%m-%d %H:%M}..{w.end:%Y-%m-%d %H:%M}")
            return
        found = self.mirror.differences(w.kind, w.keys, w.start, w.end,
                                        _as_answer(fetched.table, w.kind))
        report.differences += found
        if not found:
            return
        keys = [d.key for d in found]
        if self.options.repair:
            part = Window(w.kind, keys, w.start, w.end, {k: w.end for k in keys},
                          w.expected_points * len(keys) / max(1, len(w.keys)), side="verify")
            fetcher.fetch(part)
            report.repaired += len(keys)
        else:
            self.mirror.record_gaps(report.run_id, w.kind, {
                d.key: (d.first, d.last, _differ_reason(d.points)) for d in found})

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
        windows: list[Window] = []
        starts: dict[tuple[str, str], tuple[str, str, datetime]] = {}
        for kind in ("readings", "gnss"):
            keys = sorted(k for (kd, k) in device_of if kd == kind)
            oldest = audit.oldest_points(self.mirror.con, kind, keys)
            search = history.HistorySearch.of(kind, {k: v[2] for k, v in oldest.items()},
                                              span, floor)
            starts.update(((kind, k), oldest[k]) for k in search.open)
            windows += search.windows(limits)
        return HistoryPlan(windows, starts)

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
            for i, w in enumerate(plan.windows):
                if self._spent():
                    report.notes.append(
                        f"The budget was spent before the start of history of "
                        f"{plan.streams - report.history_streams} streams was checked.")
                    break
                self.on_window(i, len(plan.windows))
                found: dict[str, list] = {}
                if self._ask_before(fetcher, w, found, report):
                    report.history_streams += len(w.keys)
                self._history_found(fetcher, w, found, plan, report)
        finally:
            report.history_requests = self.client.requests_sent - sent

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
             if report.history_differences else ""]
    return ", ".join(p for p in parts if p)


def _as_answer(table: pa.Table, kind: str) -> pa.Table:
    """A fetched table with its stream key as text in ``key`` (what audit compares)."""
    column = "parameter_uuid" if kind == "readings" else "sensor_uuid"
    key = pc.cast(table.column(column), pa.string())
    return table.drop_columns([column]).append_column("key", key)

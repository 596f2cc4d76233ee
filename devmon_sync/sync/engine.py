"""The sync engine: mirror everything a key can see, incrementally and exactly once.

A library first: the CLI and the GUI both construct a ``SyncEngine`` and call ``run()``; it
reports through an ``on_progress`` callback and stops between chunks when ``cancel`` is set.
It speaks HTTP only through ``devmon_sync.client`` and SQL only through ``devmon_sync.store``.

Order: metadata (sites, devices with all sensors and formulas, groups), then the newest point
of every parameter (one POST /sensor-data/latest) to skip whatever has nothing new, then
readings in windows packed with many parameters, then GNSS epochs in windows packed with many
devices.  Every window commits with its cursors in one transaction.

Size: over 600 lines; the run's phases share one engine's state (report, limits learned,
scope, the fetcher), and what stands alone already lives in ``plan``, ``metadata``,
``inventory``, ``history`` and ``proof``; the search for history before ``createdAt`` and
the re-check of the past are its parts in ``history_steps`` and ``recheck_steps``.
"""

from __future__ import annotations

import dataclasses
import json
import logging
import math
import threading
import time
from dataclasses import dataclass, field
from datetime import UTC, datetime, timedelta
from typing import Callable

from devmon_sync import service_profile as assumed
from devmon_sync import timestamps
from devmon_sync.client import (
    AnswerTooLargeError,
    ApiClient,
    BadRequestError,
    ForbiddenError,
    RequestTooLargeError,
)
from devmon_sync.sync.plan import FILL, Stream, Window, pack, split, split_keys, walk
from devmon_sync.sync import future_points
from devmon_sync.sync.future_points import FORECAST_REACH, cursor_limit
from devmon_sync.sync.metadata_check import unknown_owners
from devmon_sync.sync import history, inventory
from devmon_sync.sync.history_steps import HistoryStarts
from devmon_sync.sync.recheck_steps import PastRecheck
from devmon_sync.sync.metadata import MetadataReader, removed_note
from devmon_sync.sync.proof.fetcher import StreamInfo, WindowFetcher
from devmon_sync.client.refusals import start_in_future, stated_rate_per_minute
from devmon_sync.service_profile import UserLimits
from devmon_sync.store import Mirror, answers, interrupted_by_signal, latest, metadata_from_api

log = logging.getLogger("devmon.sync")
log.propagate = False  # for the sync log file only: the console has the progress bar

DAY = timedelta(days=1)
STORED_REACH = timedelta(days=36525)
"""How far before the service's now a cursor past it is taken back to (the newest point
stored in that reach; none: the stream is fetched as a new one)."""
FUTURE_START_TRIES = 3  # asks of a discovery window whose start the service calls future


@dataclass(frozen=True)
class SyncOptions:
    since: datetime | None = None
    """Earliest data to mirror (default: each parameter's creation)."""
    lookback: timedelta = timedelta(hours=6)
    """Re-read this much before each cursor, to catch points that arrived late."""
    recheck_share: float = 0.10
    """Of the requests of the syncs, the share the re-check of the past may add (its
    daily counts and sums, ``sync.recheck``); 1.0 re-checks at every sync, 0 never."""
    limits: assumed.ResponseLimits = assumed.DEFAULT_LIMITS
    """devmon's defaults for a service it knows nothing of (the learned profile tightens
    them)."""
    user_limits: UserLimits = UserLimits()
    """What the user said of the service (``--max-points`` ...): wins over the profile."""
    dry_run: bool = False
    """Plan only: stop before the data requests (give the engine a ``Mirror.scratch_copy``
    so that not even the metadata is written)."""
    sites: tuple[str, ...] = ()
    groups: tuple[str, ...] = ()
    devices: tuple[str, ...] = ()
    """Scope: mirror the data of these sites, groups (with nested ones) and devices only
    (metadata is always mirrored whole: it is small and the GUI browses it)."""

    @property
    def scoped(self) -> bool:
        return bool(self.sites or self.groups or self.devices)

    @property
    def scope_key(self) -> str | None:
        """The scope as the run's options keep it (None: the whole mirror): what a scoped
        run re-checked, another scope's runs have not (``sync.recheck_steps``)."""
        if not self.scoped:
            return None
        return json.dumps({"sites": sorted(self.sites), "groups": sorted(self.groups),
                           "devices": sorted(self.devices)}, sort_keys=True)


@dataclass
class Progress:
    phase: str
    requests: int
    rows: int
    done: int
    total: int
    eta_s: float | None
    message: str = ""


@dataclass
class SyncReport:
    run_id: int | None
    status: str
    requests: int
    readings_rows: int = 0
    epoch_rows: int = 0
    windows: int = 0
    problems: list[str] = field(default_factory=list)
    plan: list[Window] = field(default_factory=list)
    seconds: float = 0.0
    follow_ups: int = 0
    """Requests spent re-asking ranges an answer may have cut."""
    cut_answers: int = 0
    """Follow-ups that found data: answers the service had cut."""
    quarantined: int = 0
    """Values that could not be read, kept in the quarantine table."""
    parsed_strings: int = 0
    unproven: int = 0
    """Stream ranges this run left unproved (gaps the next sync fetches first)."""
    notes: list[str] = field(default_factory=list)
    """What the run learned of the service that the user should know (not problems)."""


class ScopeError(Exception):
    """The --site/--group/--device scope names something the key cannot see."""


class Cancelled(Exception):
    """The sync was asked to stop; everything committed so far stays."""


class Terminated(KeyboardInterrupt):
    """The process was asked to end (SIGTERM): it stops as Ctrl-C stops it, everything
    committed so far stays and the run is recorded ``cancelled``."""


class SyncEngine(HistoryStarts, PastRecheck):
    def __init__(self, client: ApiClient, mirror: Mirror, options: SyncOptions = SyncOptions(),
                 on_progress: Callable[[Progress], None] | None = None,
                 cancel: threading.Event | None = None):
        self.client = client
        self.mirror = mirror
        self.options = options
        self.on_progress = on_progress or (lambda p: None)
        self.cancel = cancel or threading.Event()
        self.report = SyncReport(None, "running", 0)
        self._t0 = time.monotonic()
        self._accepted = {"readings": math.inf, "gnss": math.inf}  # largest window not refused
        self._data_t0: float | None = None  # when the first data window started
        self._scope: set[str] | None = None
        self.profile = mirror.load_profile(client.base_given)
        if self.profile.api_url:
            client.locate(self.profile.api_url)  # found on an earlier run: no asking again
        self._limits = self.profile.planning_limits(options.limits, options.user_limits)
        self._keep_to_stated_rate()
        if options.user_limits.page_size:
            client.page_size = options.user_limits.page_size
        self._info: dict[tuple[str, str], StreamInfo] = {}
        self._fetcher: WindowFetcher | None = None
        self._far: list[Window] = []  # newest points beyond the forecast reach, one each
        self._serials: dict[tuple[str, str], str] = {}  # each planned stream's device
        self._latest_limit: datetime | None = None  # the cursor limit when /latest answered
        self._data_now: datetime | None = None  # where most data ends, by /latest

    def _keep_to_stated_rate(self) -> None:
        """Pace to the rate the service's rate-limit answers stated, when slower than the
        client's (a user's lower --rate-limit, or 0 for none, is kept)."""
        stated = self.profile.refusals.stated_per_minute
        pace = self.client.rate_limit_per_minute
        if stated and pace and stated < pace:
            self.client.set_pace(int(stated))

    # ------------------------------------------------------------------ the run

    def run(self) -> SyncReport:
        opts = {"since": self.options.since, "lookback_s": self.options.lookback.total_seconds(),
                "dry_run": self.options.dry_run, "scope": self.options.scope_key}
        run_id = self.mirror.begin_run(self.client.base_url, opts,
                                       requests=lambda: self.client.requests_sent)
        self.report.run_id = run_id
        log.info("run %d: sync of %s from %s (since %s, look-back %.0f s%s%s)", run_id,
                 self.mirror.path, self.client.base_url, self.options.since or "the start",
                 self.options.lookback.total_seconds(),
                 ", dry run" if self.options.dry_run else "",
                 ", scoped" if self.options.scoped else "")
        try:
            try:
                self._sync(run_id)
                self.report.status = "planned" if self.options.dry_run else "ok"
            except Cancelled:
                self.report.status = "cancelled"
            self._finish(run_id, "")
        except BaseException as err:
            self._record_stop_or_failure(run_id, err)
            raise
        return self.report

    def _record_stop_or_failure(self, run_id: int, err: BaseException) -> None:
        """Record a run an exception ended.  A stop asked for (Ctrl-C, SIGTERM, the cancel
        event) is ``cancelled`` whatever error the cut-short work raised on its way out: a
        signal can land inside DuckDB, Arrow or urllib3, which report it in their own words
        or as some other error.  Anything else is ``failed``.  A run whose end was already
        written (the signal came after) keeps it: ``finish_run`` writes a running run only."""
        if isinstance(err, KeyboardInterrupt) or self.cancel.is_set():
            self.report.status = "cancelled"
            if not isinstance(err, KeyboardInterrupt) and not interrupted_by_signal(err):
                log.info("run %d: stopped; the work cut short said: %s", run_id, err)
            self._finish_after_error(run_id, str(err) if isinstance(err, KeyboardInterrupt)
                                     and str(err) else "interrupted")
        else:
            self.report.status = "failed"
            self._finish_after_error(run_id, str(err) or type(err).__name__)

    def _finish_after_error(self, run_id: int, message: str) -> None:
        """Record how the run ended while an error is on its way to the caller, without
        replacing it by another.  After a fatal DuckDB error (a full disk during a
        checkpoint) the connection is dead and is not written again: the file is opened
        afresh for the record.  When even that fails (the disk is still full), the run is
        left to the next open of the mirror, which marks it ``interrupted``."""
        try:
            if self.mirror.broken:
                self.mirror.reopen()
            self._finish(run_id, message)
        except Exception as err:  # noqa: BLE001 - the error already raised is the one to tell
            self.mirror.abandon_run(run_id)
            log.warning("run %d: %s; its end could not be recorded (%s): the next open of "
                        "the mirror marks it interrupted", run_id, message, err)

    def _finish(self, run_id: int, message: str) -> None:
        if self._fetcher is not None:
            t = self._fetcher.tally
            r = self.report
            r.follow_ups, r.cut_answers, r.quarantined = t.follow_ups, t.follow_ups_with_data, \
                t.quarantined
            r.parsed_strings += t.parsed_strings
            r.unproven = self.mirror.gaps_found_by(run_id)
            self._report_future(run_id, t.future)
            # the fetcher learned the refusals and caps; the engine what aggregation gives
            self.profile = dataclasses.replace(self._fetcher.profile,
                                               aggregation=self.profile.aggregation)
        if self.report.parsed_strings:
            self.report.notes.append(
                f"{self.report.parsed_strings:,} numbers came as JSON strings (\"600\" for 600) "
                f"in records or data; devmon read them as numbers.")
        self._note_rate_limits()
        if self._fetcher is not None:
            if not self.options.dry_run:
                self.mirror.save_profile(self.profile)
        self.report.requests = self.client.requests_sent
        self.report.seconds = time.monotonic() - self._t0
        self.mirror.finish_run(run_id, self.report.status, self.client.requests_sent, message)
        r = self.report
        log.info("run %d: %s after %.1f s, %d requests, %d readings, %d epochs, %d windows, "
                 "%d follow-ups (%d found cut data), %d quarantined, %d unproved, "
                 "%d problems%s", run_id, r.status, r.seconds, r.requests, r.readings_rows,
                 r.epoch_rows, r.windows, r.follow_ups, r.cut_answers, r.quarantined,
                 r.unproven, len(r.problems), f": {message}" if message else "")

    def _report_future(self, run_id: int, seen: future_points.FutureSeen) -> None:
        """Each stream with points stamped after the service's now, once a run: a problem
        (which stream, the latest time, what to do), and one line in the notes."""
        for (kind, key), points in sorted(seen.points_ms.items()):
            message = future_points.problem(kind, key, self._serials.get((kind, key)), points,
                                            seen.service_now[(kind, key)])
            self.mirror.record_problem(run_id, f"{kind}:{key}", None, message)
            log.warning("run %d: %s:%s: %s", run_id, kind, key, message)
            self.report.problems.append(f"{kind}:{key}: {message}")
        if seen.points_ms:
            self.report.notes.append(future_points.note(
                len(seen.points_ms), max(max(p) for p in seen.points_ms.values())))

    def _note_where_the_api_answers(self) -> None:
        """Say so when the API answered elsewhere than at the address given."""
        if self.client.base_url != self.client.base_given and \
                self.profile.api_url != self.client.base_url:
            self.report.notes.append(
                f"The API answers at {self.client.base_url}, not at {self.client.base_given} "
                f"as given; devmon will use that address for this service from now on.")
            log.info("the API answers at %s (given %s)", self.client.base_url,
                     self.client.base_given)

    def _note_rate_limits(self) -> None:
        """Keep in the profile how the service words and carries its rate limit."""
        for status, message in self.client.rate_limit_answers[-1:]:
            self.profile = self.profile.rate_limited(status, message,
                                                     stated_rate_per_minute(message))

    def _sync(self, run_id: int) -> None:
        self._progress("metadata", 0, 3, "reading sites, devices and groups")
        self.client.list_paging = self.profile.lists  # what earlier runs learned of paging
        self.client.refused_options |= set(self.profile.refused_options)
        reader = MetadataReader(self.client, self.report.notes, self._problem_of(run_id))
        self._save_metadata(run_id, *reader.read(), whole=reader.groups_whole,
                            devices_whole=reader.devices_whole)
        self._note_where_the_api_answers()
        self.profile = dataclasses.replace(
            self.profile, lists=self.client.list_paging, api_url=self.client.base_url,
            refused_options=tuple(sorted(self.client.refused_options)))
        self._scope = self._resolve_scope()
        if not self.options.dry_run:  # what lateness seen by the next run is measured from
            self.mirror.note_service_start(run_id, self._service_now())
        legacy = self.mirror.audit_legacy(run_id)
        if legacy:
            log.info("run %d: %d streams synced by an older devmon have unproved ranges",
                     run_id, legacy)
        self._discover_gnss(run_id)
        self._check_cancel()
        self._progress("latest", 0, 1, "asking what is new")
        answer = self._newest(run_id)
        params, sensors = self.mirror.parameters_to_sync(), self.mirror.gnss_sensors_to_sync()
        ends = self._stream_ends(params, sensors, answer)
        planned = self._plan_readings(params, ends) + self._plan_gnss(sensors, ends)
        plan = self._plan_healing() + planned  # after planning: it needs each stream's info
        self.report.plan = plan
        if self.options.dry_run:
            return
        self._fetcher = WindowFetcher(self.client, self.mirror, run_id, self.profile,
                                      self._info, self._count_rows,
                                      before_request=self._check_cancel)
        self._fetcher.data_now = self._data_now
        with self.mirror.grouped():  # a few windows a transaction (``Mirror.grouped``)
            for i, window in enumerate(plan):
                self._check_cancel()
                self._progress(window.kind, i, len(plan), f"{len(window.keys)} streams, "
                               f"{window.start:%Y-%m-%d} to {window.end:%Y-%m-%d}")
                self._fetch(run_id, window)
        self._search_history_starts(run_id)
        self._recheck_past(run_id)
        self._note_newest(answer.newest)  # again: streams new to the mirror have ledger rows
        self._progress("done", len(plan), len(plan), "")

    def _save_metadata(self, run_id: int, sites: list[dict], devices: list[dict],
                       groups: dict, whole: bool = False, devices_whole: bool = False) -> None:
        """``whole``: the full listings, which memberships and sensor deletions follow;
        ``devices_whole``: the device list is known whole, which device removals follow."""
        meta = metadata_from_api(sites, devices, groups, whole, devices_whole)
        removed = self.mirror.save_metadata(run_id, meta, self._service_now())
        if removed:
            self.report.notes.append(removed_note(removed))
        self.report.parsed_strings += meta.parsed_strings
        for resource, message in meta.problems:
            self._problem(run_id, resource, ValueError(message))

    def _problem_of(self, run_id: int) -> Callable[[str, Exception], None]:
        return lambda resource, err: self._problem(run_id, resource, err)

    def _count_rows(self, kind: str, rows: int) -> None:
        if kind == "readings":
            self.report.readings_rows += rows
        else:
            self.report.epoch_rows += rows

    def _newest(self, run_id: int) -> latest.LatestAnswer:
        """Each parameter's newest point by one POST /sensor-data/latest, remembered in the
        mirror; a point whose time cannot be read is left out and noted."""
        items = self.client.latest({})
        self._complete_sensors(run_id, items)
        answer = latest.newest_from_latest(items)
        self._data_now = future_points.data_now(answer.newest.values())
        self._latest_limit = cursor_limit(self._reference_now())
        for uuid, text in answer.unreadable[:20]:
            self._problem(run_id, f"latest:{uuid}", ValueError(
                f"the newest point's time {text!r} cannot be read; the parameter is synced "
                f"from its cursor"))
        self._note_newest(answer.newest)
        return answer

    def _stream_ends(self, params: list, sensors: list,
                     answer: latest.LatestAnswer) -> inventory.Inventory:
        """Where each stream ends, from /latest and the devices' last data
        (``sync.inventory``); what /latest left out goes in the run's notes."""
        by_sensor = self._newest_by_sensor(answer.newest)
        sensor_of = self.mirror.parameter_sensors()
        newest = {("readings", k): t for k, t in answer.newest.items()}
        newest.update((("gnss", k), t) for k, t in by_sensor.items())
        named = {("readings", k) for k in answer.named}
        named |= {("gnss", sensor_of[k]) for k in answer.named if k in sensor_of}
        hints = [inventory.StreamHint("readings", p.uuid, p.device_serial_number,
                                      p.device_last_data) for p in params]
        hints += [inventory.StreamHint("gnss", g.sensor_uuid, g.device_serial_number,
                                       g.device_last_data) for g in sensors]
        found = inventory.stream_ends([h for h in hints if self._in_scope(h.serial)], newest,
                                      named, self._service_now())
        self.report.notes += found.notes()
        return found

    def _complete_sensors(self, run_id: int, latest_items: list[dict]) -> None:
        """Parameters /latest reports that the device list did not hold belong to sensors
        the list left out (a service ignoring includeInactiveSensors): their devices are
        read again in full (GET /devices/{sn}) and the run says so."""
        owners = unknown_owners(latest_items, set(self.mirror.parameter_sensors()))
        if not owners:
            return
        reader = MetadataReader(self.client, self.report.notes, self._problem_of(run_id))
        full = reader.full_records(sorted(owners))
        self.report.notes.append(
            f"The device list left out sensors of {len(owners)} devices that have data "
            f"(/sensor-data/latest names their parameters): devmon read those devices one "
            f"by one (GET /devices/{{sn}}).")
        self._save_metadata(run_id, [], list(full.values()), {"grouped": []})

    def _note_newest(self, newest: dict[str, datetime]) -> None:
        """Remember each stream's newest point by /latest (what `devmon status` compares
        the cursors with); GNSS sensors take their fields' newest.  A point stamped after
        the service's now says nothing the cursors can reach (``sync.future_points``): none
        is kept, so `devmon status` does not call the stream behind for good."""
        limit = self._latest_limit or datetime.max.replace(tzinfo=UTC)
        for kind, times in (("readings", newest), ("gnss", self._newest_by_sensor(newest))):
            self.mirror.note_newest(kind, {k: None if t > limit else t
                                           for k, t in times.items()})

    def _newest_by_sensor(self, newest: dict[str, datetime]) -> dict[str, datetime]:
        """A GNSS sensor's newest epoch: the newest point of any of its fields."""
        out: dict[str, datetime] = {}
        for uuid, sensor in self.mirror.parameter_sensors().items():
            if uuid in newest:
                out[sensor] = max(newest[uuid], out.get(sensor, newest[uuid]))
        return out

    def _resolve_scope(self) -> set[str] | None:
        o = self.options
        if not o.scoped:
            return None
        devices, unknown = self.mirror.devices_in_scope(list(o.sites), list(o.groups),
                                                        list(o.devices))
        if unknown:
            raise ScopeError(f"Nothing this key can see matches {', '.join(unknown)}: check the "
                             f"--site, --group and --device values (`devmon status` lists "
                             f"what is mirrored).")
        return devices

    def _service_now(self) -> datetime:
        """Now by the service's clock, which may differ from this machine's (as its answers'
        ``Date`` headers tell it: ``ApiClient.service_now``)."""
        return self.client.service_now()

    def _reference_now(self) -> datetime:
        """The service's now, or where most of its data ends when its clock is behind it
        (``future_points.reference_now``): what no point may be stamped after."""
        return future_points.reference_now(self._service_now(), self._data_now)

    def _in_scope(self, serial: str) -> bool:
        return self._scope is None or serial in self._scope

    def _check_cancel(self) -> None:
        if self.cancel.is_set():
            raise Cancelled()

    def _progress(self, phase: str, done: int, total: int, message: str) -> None:
        """Report progress; in the data phases with an ETA (see ``_eta_s``)."""
        eta = self._eta_s(done, total) if phase in ("readings", "gnss") else None
        self.on_progress(Progress(phase, self.client.requests_sent,
                                  self.report.readings_rows + self.report.epoch_rows,
                                  done, total, eta, message))

    def _eta_s(self, done: int, total: int) -> float | None:
        """Seconds left: the windows left at the pace of those done so far in this run, and
        never less than the rate limit allows for them.  None before the first window, when
        nothing is known of the pace and the limit is all there is to go by."""
        remaining = max(0, total - done)
        floor = self.client.least_seconds_for(remaining)
        if self._data_t0 is None:
            self._data_t0 = time.monotonic()
        if done == 0:
            return floor or None
        pace = (time.monotonic() - self._data_t0) / done
        return max(remaining * pace, floor)

    # ------------------------------------------------------------------ GNSS sensors

    def _discover_gnss(self, run_id: int) -> None:
        """Learn which sensor of each GNSS device carries its solutions (one small request
        per 200 devices, only for devices not seen before)."""
        known = {g.device_serial_number for g in self.mirror.gnss_sensors_to_sync()}
        todo = [sn for sn in self.mirror.gnss_devices() if sn not in known and self._in_scope(sn)]
        size = self.options.limits.max_selector_items
        for i in range(0, len(todo), size):
            self._discover_gnss_of(run_id, todo[i:i + size])

    def _discover_gnss_of(self, run_id: int, serials: list[str]) -> None:
        """One empty-window GNSS request for ``serials``; halves on a 403 down to the device
        refused, which is recorded and skipped."""
        try:
            answer = self._empty_gnss_window(serials)
        except ForbiddenError as err:
            if len(serials) == 1:
                self._problem(run_id, f"gnss-device:{serials[0]}", err)
                return
            half = math.ceil(len(serials) / 2)
            self._discover_gnss_of(run_id, serials[:half])
            self._discover_gnss_of(run_id, serials[half:])
            return
        self.mirror.save_solutions(run_id, answer.solutions)

    def _empty_gnss_window(self, serials: list[str]) -> answers.GnssAnswer:
        """The GNSS answer for ``serials`` over one instant: the service's now, in whole
        seconds (devmon's own now may be in the service's future, which it may refuse).  A
        start refused as in the future is asked again at the now the refusal's ``Date``
        states: never a "change the request" the user cannot act on."""
        at = self._service_now().replace(microsecond=0)
        for attempt in range(1, FUTURE_START_TRIES + 1):
            try:
                return self.client.gnss({"deviceSerialNumbers": serials, "startDate": _iso(at),
                                         "endDate": _iso(at)}, decoder=answers.gnss_from_json)
            except BadRequestError as err:
                said = self.client.last_service_date()
                if attempt == FUTURE_START_TRIES or not start_in_future(err.server_message) \
                        or said is None or said >= at:
                    raise
                log.info("the service refused %s as in its future; asking at its now, %s",
                         _iso(at), _iso(said))
                at = said
        raise AssertionError("unreachable")

    def _problem(self, run_id: int, resource: str, err: Exception) -> None:
        self.mirror.record_problem(run_id, resource, getattr(err, "status", None), str(err))
        log.warning("run %d: %s: %s", run_id, resource, err)
        self.report.problems.append(f"{resource}: {err}")

    # ------------------------------------------------------------------ planning

    def _stream(self, kind: str, key: str, serial: str, cursor: datetime | None,
                created: datetime | None, end: datetime | None,
                period: float | None) -> Stream | None:
        """One stream to fetch, or None when it is out of scope or has nothing newer than its
        cursor (its newest point, else the end of what was last fetched of it).  It starts a
        look-back before its cursor; with no cursor, at ``since`` or the parameter's
        creation (its newest point, if older: an archive), whichever is later (the history
        before it is searched once, ``sync.history``), or a day before its newest point when
        neither is known.  Points stamped after the service's now: ``_ahead``."""
        if not self._in_scope(serial):
            return None
        self._serials[(kind, key)] = serial
        period_s = period or (86400.0 if kind == "readings" else 3600.0)
        cursor, end = self._ahead(kind, key, cursor, end, period)
        if end is None or (cursor is not None and end <= cursor):
            return None
        if cursor is not None:
            return Stream(key, cursor - self.options.lookback, end, 1.0 / period_s)
        since = self.options.since
        if created is not None and (since is None or created >= since):
            begins = min(created, end)  # data before its creation: an archive, a migration
            return Stream(key, begins, end, 1.0 / period_s, empty_before=True)
        return Stream(key, since or end - DAY, end, 1.0 / period_s)

    def _ahead(self, kind: str, key: str, cursor: datetime | None, end: datetime | None,
               period: float | None) -> tuple[datetime | None, datetime | None]:
        """The cursor and end of a stream with points stamped after the service's now
        (``sync.future_points``).  Up to the forecast reach they may be a forecast: read
        again up to the newest, which the service may have revised or withdrawn since.  A
        newest point further ahead is a wrong clock: read on its own (``_far``), the stream
        up to the reach, no point of it expected (its newest is unknown).  A cursor past
        the service's now (an older devmon's, or the service's clock went back) goes back
        to the newest point stored before it, so what came since is not skipped."""
        now = self._reference_now()
        newest = end
        if end is not None and end > now + FORECAST_REACH:
            self._far.append(future_points.far_window(kind, key, end))
            end, newest = now + FORECAST_REACH, None
        self._info[(kind, key)] = StreamInfo(period, newest)
        limit = cursor_limit(now)
        if cursor is None or cursor <= limit:
            return cursor, end
        if cursor <= now + FORECAST_REACH:
            end = max(end or cursor, cursor)
        stored, _ = self.mirror.stored_edges(kind, [key], limit, STORED_REACH)
        return stored.get(key), end

    def _plan_readings(self, params: list, found: inventory.Inventory) -> list[Window]:
        streams = [self._stream("readings", p.uuid, p.device_serial_number,
                                p.cursor or p.covered_until, p.created_at,
                                found.ends.get(("readings", p.uuid)), p.sampling_period_s)
                   for p in params]
        budget = FILL * self._limits.max_points
        return pack("readings", [s for s in streams if s], budget, self._limits) + \
            [w for w in self._far if w.kind == "readings"]

    def _plan_healing(self) -> list[Window]:
        """Windows over every range the mirror could not prove (gaps of earlier runs, or of a
        mirror made before completeness checks), planned first so that they heal first."""
        by_kind: dict[str, list[Stream]] = {"readings": [], "gnss": []}
        for kind, key, start, end in self.mirror.gaps_to_heal():
            info = self._info.get((kind, key))
            if kind not in by_kind or info is None:
                continue  # a stream out of scope, or no longer offered by the service
            if info.newest is not None:
                end = min(end, info.newest)  # nothing is due after the newest point
            if end < start:
                continue
            rate = 1.0 / (info.period_s or (86400.0 if kind == "readings" else 3600.0))
            by_kind[kind].append(Stream(key, start, end, rate))
        budgets = {"readings": self._limits.max_points, "gnss": self._limits.max_epochs}
        return [dataclasses.replace(w, side="heal") for kind, streams in by_kind.items()
                if streams for w in pack(kind, streams, FILL * budgets[kind], self._limits)]

    def _plan_gnss(self, sensors: list, found: inventory.Inventory) -> list[Window]:
        streams = [self._stream("gnss", g.sensor_uuid, g.device_serial_number,
                                g.cursor or g.covered_until, g.created_at,
                                found.ends.get(("gnss", g.sensor_uuid)), g.sampling_period_s)
                   for g in sensors]
        budget = FILL * self._limits.max_epochs
        return pack("gnss", [s for s in streams if s], budget, self._limits) + \
            [w for w in self._far if w.kind == "gnss"]

    # ------------------------------------------------------------------ fetching

    def _fetch(self, run_id: int, w: Window) -> None:
        """Fetch and commit one window until it is proved whole (``proof.WindowFetcher``);
        halve it when the server says it is too large, and remember that, so the next
        windows are cut to the size the server accepted."""
        too_long = w.end - w.start > timedelta(days=self._limits.max_range_days)
        if (too_long or w.expected_points > self._accepted[w.kind]) and w.end > w.start:
            for part in self._cut(w):
                self._fetch(run_id, part)
            return
        try:
            self._fetcher.fetch(w)
            self.report.windows += 1
        except RequestTooLargeError as err:
            if w.end <= w.start:
                raise
            self._learn_refusal(w, err)
            for part in self._cut(w):
                self._fetch(run_id, part)
        except ForbiddenError as err:
            if len(w.keys) == 1:
                self._problem(run_id, f"{w.kind}:{w.keys[0]}", err)
                return
            for part in split_keys(w):
                self._fetch(run_id, part)
        except BadRequestError as err:
            moved = self._from_service_now(w, err)
            if moved is None:
                raise
            self._fetch(run_id, moved)

    def _from_service_now(self, w: Window, err: BadRequestError) -> Window | None:
        """``w`` asked from the service's now, when the service refused its start as in its
        future (its clock is behind its own data): what it holds after its now comes all the
        same, and the answer replaces the range asked.  None for any other refusal, or when
        starting earlier would not help."""
        said = self.client.last_service_date()
        if not start_in_future(err.server_message) or said is None or said >= w.start:
            return None
        log.info("%s window %s..%s: its start is in the service's future; asking from the "
                 "service's now, %s", w.kind, _iso(w.start), _iso(w.end), _iso(said))
        note = ("The service refused start dates in its future: its clock is behind its "
                "newest data. devmon asked such windows from the service's now instead.")
        if note not in self.report.notes:
            self.report.notes.append(note)
        return dataclasses.replace(w, start=said)


    def _cut(self, w: Window) -> list[Window]:
        """A window too large (or too long) for what is now known, planned again as the plan
        was made: the planner's walk over its streams, each at its own rate, to the budget
        learned.  A window planned for 100,000 points meeting a 3,000-point limit becomes 35
        requests, not the 64 halving to below the limit would make.  Halves when the walk
        finds no cut (the estimate was wrong, not the budget)."""
        kind, budget = w.kind, self._accepted[w.kind]
        limit = self._limits.max_points if kind == "readings" else self._limits.max_epochs
        streams = [Stream(k, max(w.start, w.origins.get(k, w.start)), w.cursors[k],
                          self._rate_per_s(kind, k), empty_before=w.origins.get(k, w.start) >=
                          w.start and k in w.origins) for k in w.keys]
        parts = walk(kind, [x for x in streams if x.end >= x.start],
                     min(budget, FILL * limit), timedelta(days=self._limits.max_range_days) * 0.999)
        if len(parts) < 2:
            return split(w)
        return [dataclasses.replace(p, side=w.side) for p in parts]

    def _rate_per_s(self, kind: str, key: str) -> float:
        """Points a second a stream is planned at (as ``_stream`` plans it)."""
        info = self._info.get((kind, key))
        period_s = info.period_s if info is not None and info.period_s else \
            (86400.0 if kind == "readings" else 3600.0)
        return 1.0 / period_s

    def _learn_refusal(self, w: Window, err: RequestTooLargeError) -> None:
        """Remember what a "too large" refusal taught: the limit it stated (for this run
        and, through the profile, the next), else that half this window is the most to try.
        An answer past devmon's own bound (``AnswerTooLargeError``) teaches nothing of the
        service's limits: it is said in the run's notes, and the window halved."""
        said = err.too_large
        if isinstance(err, AnswerTooLargeError):
            self._past_bound(w, err)
        else:
            self._fetcher.profile = self._fetcher.profile.refused(
                w.kind, said.what, said.limit, err.status or 0, err.server_message or "")
        if w.side == history.SIDE and said.what != "range":
            return  # planned empty: the guess was wrong, not the budget (``_cut`` sizes it)
        if said.what == "range" and said.limit:
            days = min(self._limits.max_range_days, said.limit)
            self._limits = dataclasses.replace(self._limits, max_range_days=days)
            return
        ceiling = w.expected_points / 2
        if said.what == "points" and said.limit:
            ceiling = min(w.expected_points, FILL * said.limit)
        self._accepted[w.kind] = min(self._accepted[w.kind], ceiling)

    def _past_bound(self, w: Window, err: AnswerTooLargeError) -> None:
        """One line in the run's notes for each bound an answer passed (the client said
        what it dropped as it did; this says what the sync did about it)."""
        log.info("%s window %s..%s: %s; asking it in smaller windows", w.kind, _iso(w.start),
                 _iso(w.end), err)
        note = (f"{err.method} {err.path}: an answer passed {err.bound}, devmon's bound on what "
                f"one answer may cost; devmon dropped it and asked for its data in smaller "
                f"windows. The service sent far more than asked: if this persists, tell its "
                f"operators.")
        if note not in self.report.notes:
            self.report.notes.append(note)


# ----------------------------------------------------------------------------- helpers

def _iso(t: datetime) -> str:
    """API form of a window bound: UTC with milliseconds and Z."""
    return timestamps.format_timestamp(t)

"""What a report says, gathered before anything is drawn: the scope, one analysis per rover,
the site plans and how fresh the data are.

Scope resolution reads the mirror through ``devmon_sync.store.report_queries``, every
analysis is ``devmon_sync.analyze.rovers.analyze_device`` (the call ``devmon analyze`` and the GUI
make, so the report shows their numbers), and the site plans are
``devmon_sync.analyze.site_plans.site_plans`` (the GUI's plan view places its points with the
same call).  Nothing
here draws or keeps global state: the GUI calls ``build_report`` from a worker thread with
its own ``mirror.for_thread()``.
"""

from __future__ import annotations

import re
from collections.abc import Callable
from dataclasses import dataclass, field, replace
from datetime import datetime, timedelta, timezone

import numpy as np

from analysis import figures
from analysis.pipeline import AnalysisOptions, RoverAnalysis
from analysis.displacement import DEFAULT_REFERENCE
from devmon_sync import __version__
from devmon_sync.analyze import pool as analyze_pool
from devmon_sync.analyze.device_kinds import not_a_rover
from devmon_sync.analyze.rovers import (StoreInputs, analyze_device, batches, by_batch,
                                         store_inputs)
from devmon_sync.analyze.site_plans import PlanRover, SitePlan, site_plans
from devmon_sync.report.details import ReportDetails
from devmon_sync.report.errors import ReportError
from devmon_sync.report.points import point_numbers
from devmon_sync.store import Mirror, StoreError, browse, queries, report_queries
from devmon_sync.store.report_queries import (DeletedSensor, MembershipChange, Place,
                                              ScopeDevice)

#: The cover warns when the last sync is older than this before the report was made (the
#: service may hold newer data), or when the newest epoch is older than this before the
#: last sync (the rovers stopped sending, or their data did not reach the mirror).
STALE_SYNC = timedelta(days=2)
STALE_DATA = timedelta(days=2)
NOT_A_ROVER = "not a GNSS rover: no displacement analysis"
CHANGES_NAMED = 6  # group membership changes named in the summary; more are counted


def utc(value: datetime | None) -> datetime | None:
    """A datetime as UTC-aware (a naive one taken as UTC); None stays None."""
    if value is None:
        return None
    return (value.replace(tzinfo=timezone.utc) if value.tzinfo is None
            else value.astimezone(timezone.utc))


def utc_text(value: datetime | np.datetime64 | None, missing: str = "unknown") -> str:
    """``2025-12-31 23:00 UTC`` (the figures' format), or ``missing``."""
    if value is None:
        return missing
    if isinstance(value, datetime):
        value = np.datetime64(utc(value).replace(tzinfo=None), "us")
    return figures.format_time(value, None)


@dataclass(frozen=True)
class ReportOptions:
    """The user's choices.  Exactly one scope: ``devices`` (serial numbers), ``site`` or
    ``group`` (a uuid, or an exact name).  ``start``/``end`` bound the period (UTC-aware;
    None: the whole record); ``frame``, ``reference`` and ``method`` are ``devmon analyze``'s
    --projection, --reference and --method.  ``command_line`` is printed on the methods
    page (None: the report was made through the Python API).  ``details``: the title
    block, comments and point numbers (``details.ReportDetails``)."""

    devices: tuple[str, ...] = ()
    site: str | None = None
    group: str | None = None
    start: datetime | None = None
    end: datetime | None = None
    frame: str = "enu"
    reference: str = DEFAULT_REFERENCE
    method: str = "midas"
    title: str | None = None
    command_line: str | None = None
    details: ReportDetails = ReportDetails()

    def analysis_options(self) -> AnalysisOptions:
        """The options of every analysis; a ReportError saying what to write instead."""
        try:
            return AnalysisOptions.build(reference=self.reference, method=self.method,
                                         frame=self.frame)
        except ValueError as err:
            raise ReportError(str(err)) from None

    def check(self) -> None:
        """A ReportError for a scope that is not exactly one of devices, site or group, or
        a period that ends before it starts."""
        given = [name for name, value in (("devices", self.devices), ("site", self.site),
                                          ("group", self.group)) if value]
        if len(given) != 1:
            raise ReportError("give exactly one scope: devices (--device SN, repeatable), a "
                              "site (--site UUID) or a group (--group UUID)"
                              + (f"; got {' and '.join(given)}" if given else ""))
        if self.start and self.end and utc(self.end) <= utc(self.start):
            raise ReportError("the period ends before it starts: --to must be later than "
                              "--from")


@dataclass(frozen=True)
class Scope:
    """The devices a report covers, and what the user named to get them.  ``changes``: for
    a group over a period, how its members then (the ``devices``) differ from today's."""

    kind: str  # "devices", "site" or "group"
    place: Place | None  # the site or group; None for a list of devices
    devices: tuple[ScopeDevice, ...]
    changes: tuple[MembershipChange, ...] = ()

    def describe(self) -> str:
        """``site "Illgraben slope"``, ``group "..."`` or ``3 devices``: for the cover."""
        if self.place is not None:
            return f'{self.kind} "{self.place.name}"'
        return f"{len(self.devices)} device{'s' if len(self.devices) != 1 else ''}"

    @property
    def membership_short(self) -> str | None:
        """``members during the period (1 since moved out)``, for the cover's devices line
        (kept to one line: the cover's contents must fit; ``membership`` names them), when
        the group's members in the period are not today's; else None."""
        if not self.changes:
            return None
        left, joined = self._changed("left"), self._changed("joined")
        parts = ([f"{len(left)} since moved out"] if left else []) + \
            ([f"{len(joined)} joined since"] if joined else [])
        return f"members during the period ({', '.join(parts)})"

    @property
    def membership(self) -> str | None:
        """What the summary says when the group's members in the period are not today's:
        each device moved out since (in the report) and in since (not in it), with where
        it is now and when a sync saw it move; None when they are the same, or without a
        period."""
        if not self.changes:
            return None
        left, joined = self._changed("left"), self._changed("joined")
        parts = []
        if left:
            parts.append(f"{_count(left)} since moved out, kept in this report: "
                         + _listed([_left_text(c) for c in left]))
        if joined:
            parts.append(f"{_count(joined)} joined since, left out of this report: "
                         + _listed([_joined_text(c) for c in joined]))
        return (f"During the period the {self.kind} held other devices than it does today; "
                f"this report takes the members during the period. " + "; ".join(parts)
                + ".")

    def _changed(self, change: str) -> list[MembershipChange]:
        return [c for c in self.changes if c.change == change]


def _count(changes: list) -> str:
    return f"{len(changes)} device{'s' if len(changes) != 1 else ''}"


def _listed(texts: list[str]) -> str:
    more = len(texts) - CHANGES_NAMED
    return ", ".join(texts[:CHANGES_NAMED]) + (f" and {more} more" if more > 0 else "")


def _device_name(change: MembershipChange) -> str:
    return (change.serial_number if change.display_name == change.serial_number
            else f"{change.display_name} ({change.serial_number})")


def _day(at: datetime | None) -> str:
    """The UTC day a sync saw a membership change, or 'at a time not recorded'."""
    return f"on {utc(at).date().isoformat()}" if at else "at a time not recorded"


def _left_text(change: MembershipChange) -> str:
    if not change.groups_now:
        return f"{_device_name(change)} left {_day(change.at)} (in no group now)"
    where = ", ".join(f'group "{g}"' for g in change.groups_now)
    return f"{_device_name(change)} moved to {where} {_day(change.at)}"


def _joined_text(change: MembershipChange) -> str:
    return f"{_device_name(change)} joined {_day(change.at)}"


@dataclass(frozen=True)
class DeviceEntry:
    """One device of the scope: its analysis, or why it has none (``problem``)."""

    device: ScopeDevice
    analysis: RoverAnalysis | None = None
    problem: str | None = None
    alarm_levels: dict = field(default_factory=dict)  # queries.alarm_levels
    alarm_level_sources: dict = field(default_factory=dict)  # queries.alarm_level_sources
    epochs_in_mirror: int = 0
    first_epoch_in_mirror: datetime | None = None
    last_epoch_in_mirror: datetime | None = None
    point_number: str | None = None  # the site's, from the report details
    setup: report_queries.PointSetup | None = None
    deleted_sensors: tuple[DeletedSensor, ...] = ()  # deleted upstream, archive kept

    @property
    def serial_number(self) -> str:
        return self.device.serial_number

    @property
    def label(self) -> str:
        """``name (SN)``, or the serial number alone when it is the name; after the point
        number when the report details give one."""
        d = self.device
        name = (d.serial_number if d.display_name == d.serial_number
                else f"{d.display_name} ({d.serial_number})")
        return f"{self.point_number} {name}" if self.point_number else name


def natural_key(text: str) -> tuple:
    """``text`` compared as people read it: runs of digits by their value, the rest in any
    case (P2 before P10, "rover 9" before "rover 10")."""
    return tuple((0, int(part), "") if part.isdigit() else (1, 0, part.casefold())
                 for part in re.split(r"(\d+)", text) if part)


def report_order(entry: DeviceEntry) -> tuple:
    """Where a device stands in every list of a report (contents, summary, register, rover
    pages, plans): the rovers (the monitoring points) by point number (the site plan's),
    then those without one, then the scope's other devices; ties by name, both in natural
    order; the serial number last, so the order is total.  Engineers read a report by point
    number."""
    number = entry.point_number
    return (entry.problem == NOT_A_ROVER, number is None, natural_key(number or ""),
            natural_key(entry.device.display_name), entry.serial_number)


@dataclass(frozen=True)
class ReportData:
    """Everything a report shows, computed; ``write_report`` only draws it."""

    options: ReportOptions
    scope: Scope
    entries: tuple[DeviceEntry, ...]
    plans: tuple[SitePlan, ...]
    mirror_path: str
    generated_at: datetime  # UTC-aware: when the report was made
    last_synced: datetime | None  # when a sync last committed data of the rovers in scope
    newest_epoch: datetime | None  # newest epoch of those rovers in the mirror
    warnings: tuple[str, ...]
    version: str = __version__

    @property
    def analyses(self) -> list[RoverAnalysis]:
        return [e.analysis for e in self.entries if e.analysis is not None]

    @property
    def analysed(self) -> list[DeviceEntry]:
        return [e for e in self.entries if e.analysis is not None]

    @property
    def title(self) -> str:
        if self.options.title:
            return self.options.title
        return f"GNSS deformation report: {self.scope_name}"

    @property
    def footer_title(self) -> str:
        """The title each page's footer carries, after the report number and revision
        when they are given (how a page torn from the report is traced back)."""
        d = self.options.details
        number = " ".join(v for v in (d.report_number,
                                      f"rev. {d.revision}" if d.revision else None) if v)
        return f"{number}  ·  {self.title}" if number else self.title

    @property
    def scope_name(self) -> str:
        if self.scope.place is not None:
            return self.scope.place.name
        names = [e.device.display_name for e in self.entries]
        if len(names) == 1:
            return names[0]
        sites = {e.device.site_name for e in self.entries}
        site = sites.pop() if len(sites) == 1 else None
        # devices of several sites (or none): the project they belong to, when given
        where = site or self.options.details.project
        return f"{where} ({len(names)} devices)" if where else f"{len(names)} devices"

    def span(self) -> tuple[np.datetime64 | None, np.datetime64 | None]:
        """First and last epoch analysed, over every rover (naive UTC datetime64)."""
        firsts = [a.displacement.t[0] for a in self.analyses if a.displacement.t.size]
        lasts = [a.displacement.t[-1] for a in self.analyses if a.displacement.t.size]
        return (min(firsts) if firsts else None, max(lasts) if lasts else None)


# ----------------------------------------------------------------------------- scope

def _pick(places: list[Place], text: str, what: str, mirror: Mirror) -> Place:
    """The site or group named by uuid (any case) or by its exact name (any case)."""
    needle = text.strip().casefold()
    hits = [p for p in places if p.uuid.casefold() == needle] or \
           [p for p in places if p.name.casefold() == needle]
    if len(hits) == 1:
        return hits[0]
    known = "; ".join(f"{p.name} ({p.uuid})" for p in places[:10]) or "none"
    more = ", ..." if len(places) > 10 else ""
    if hits:
        raise ReportError(f"{len(hits)} {what}s are named {text!r} in {mirror.path}: give "
                          f"the uuid of one ({'; '.join(p.uuid for p in hits)})")
    raise ReportError(f"no {what} {text!r} in {mirror.path}: give a {what} uuid or name "
                      f"({what}s: {known}{more}), or run `devmon sync` if it is new")


def resolve_scope(mirror: Mirror, options: ReportOptions) -> Scope:
    """The devices of the scope the options name, by display name (a list of devices in
    the order given); a group's over a period are those it held at any time in the period
    (``report_queries.group_devices``), with how they differ from today's.  A ReportError
    for an unknown device, site or group, or an empty scope."""
    options.check()
    if options.devices:
        named = {text: queries.resolve_serial(mirror, text) for text in options.devices}
        found = report_queries.devices_by_serial(mirror, [sn for sn in named.values() if sn])
        known = {d.serial_number for d in found}
        unknown = [text for text, sn in named.items() if sn not in known]
        if unknown:
            raise ReportError(f"no device {', '.join(map(repr, unknown))} in {mirror.path}: "
                              f"check the serial number (`devmon status --db {mirror.path}` "
                              f"lists them)")
        return Scope("devices", None, tuple(found))
    start, end = utc(options.start), utc(options.end)
    changes: list[MembershipChange] = []
    if options.site:
        place = _pick(report_queries.sites(mirror), options.site, "site", mirror)
        devices = report_queries.site_devices(mirror, place.uuid)
        kind = "site"
    else:
        place = _pick(report_queries.groups(mirror), options.group, "group", mirror)
        devices = report_queries.group_devices(mirror, place.uuid, start, end)
        if start or end:
            changes = report_queries.group_changes(mirror, place.uuid, start, end)
        kind = "group"
    if not devices:
        when = " in the period" if kind == "group" and (start or end) else ""
        raise ReportError(f'{kind} "{place.name}" holds no device{when} in {mirror.path}: '
                          f"choose another {kind}{' or period' if when else ''}, or run "
                          f"`devmon sync` if its devices are new")
    return Scope(kind, place, tuple(devices), tuple(changes))


# ----------------------------------------------------------------------------- gathering

def build_report(mirror: Mirror, options: ReportOptions, *, now: datetime | None = None,
                 progress: Callable[[int, int, str], None] | None = None,
                 jobs: int | None = 1) -> ReportData:
    """Resolve the scope, analyse each rover in it and gather the site plans and the data's
    freshness.  ``now`` (UTC-aware) is the report's creation time (default: the clock);
    give it to make two reports identical.  ``progress(done, total, what)`` is called
    before each device (a GUI worker may raise from it to cancel), or, when a pool
    analyses them, as each one is done.  ``jobs``: worker processes for the analyses
    (``devmon_sync.analyze.pool``: None every core, 1 this process, the default; a pool
    needs the mirror open read-only), the same report either way.  A device that is not a
    GNSS rover, or a rover whose data cannot support an analysis in the period, is kept
    with its reason; a ReportError when nothing in the scope can be analysed.  The devices
    are in ``report_order`` (by point number), which every part of the report follows."""
    generated_at = utc(now) if now is not None else datetime.now(timezone.utc)
    analysis_options = options.analysis_options()
    scope = resolve_scope(mirror, options)
    rovers = [d for d in scope.devices if d.is_rover]
    if not rovers and scope.kind == "devices" and len(scope.devices) == 1:
        raise ReportError(not_a_rover(mirror, scope.devices[0].serial_number))
    if not rovers:
        names = ", ".join(d.display_name for d in scope.devices[:8])
        raise ReportError(f"no GNSS rover in {scope.describe()} ({names}"
                          f"{', ...' if len(scope.devices) > 8 else ''}): a report analyses "
                          f"the displacement of GNSS rovers; choose a scope holding one")
    start, end = utc(options.start), utc(options.end)
    gnss = {d.serial_number: d for d in queries.gnss_devices(mirror)}
    setups = report_queries.point_setups(mirror, [d.serial_number for d in rovers])
    deleted = report_queries.deleted_sensors(mirror, [d.serial_number for d in scope.devices])
    found = _analysed(mirror, [(device, gnss.get(device.serial_number))
                               for device in scope.devices],
                      analysis_options, start, end, jobs, progress)
    numbers = point_numbers(mirror, options.details)
    entries = []
    for device, entry in zip(scope.devices, found):
        if isinstance(entry, analyze_pool.Failed):
            entry.reraise()  # not a rover's data (those are kept with their reason): a fault
        entries.append(replace(entry, setup=setups.get(device.serial_number),
                               point_number=numbers.by_serial.get(device.serial_number),
                               deleted_sensors=deleted.get(device.serial_number, ())))
    entries.sort(key=report_order)
    if not any(e.analysis is not None for e in entries):
        raise ReportError(_nothing_analysed(entries, start, end))
    serials = [d.serial_number for d in rovers]
    newest = max((e.last_epoch_in_mirror for e in entries if e.last_epoch_in_mirror),
                 default=None)
    last_synced = utc(browse.last_synced(mirror, serials))
    plans = _plans(mirror, [e for e in entries if e.analysis is not None])
    warnings = _warnings(generated_at, last_synced, newest, entries)
    revised = browse.revisions(mirror, serials)
    if revised.any:
        warnings.append(f"The service revised {revised.what} of these rovers since "
                        f"{utc_text(revised.first_seen)} (last {utc_text(revised.last_seen)}): "
                        f"this report uses the revised ones; reports issued before may rest "
                        f"on the old ones (kept in the mirror).")
    warnings += numbers.warnings
    return ReportData(options, scope, tuple(entries), tuple(plans), str(mirror.path),
                      generated_at, last_synced, newest, tuple(warnings))


def _analysed(mirror: Mirror, devices: list[tuple], options: AnalysisOptions,
              start: datetime | None, end: datetime | None, jobs: int | None,
              progress) -> list:
    """Each (scope device, its GNSS device or None) analysed: a ``DeviceEntry``, or the
    pool's ``Failed``.  By batch (``rovers.batches``): each batch's epochs, levels and their
    sources read in one query each, not a query each a rover (issue 31); in the process
    pool when it pays.  ``progress(done, total, text)`` counts devices."""
    analysed = sum(1 for _, g in devices if g is not None and g.epochs)
    workers = analyze_pool.worker_count(jobs, analysed)
    if workers:
        def finished(done: int, total: int, batch: list) -> None:
            if progress is not None:
                progress(done, total, f"analysed {batch[-1][0].display_name}")

        return by_batch(_entries, devices, (options, start, end), jobs=jobs, mirror=mirror,
                        workers=workers, progress=finished)
    found: list = []
    for part in batches(devices, workers):
        def before(k: int, device, offset: int = len(found)) -> None:
            if progress is not None:
                progress(offset + k, len(devices), f"analysing {device.display_name}")
        found += _entries(mirror, part, options, start, end, before=before)
    return found


def _entries(mirror: Mirror, devices: list[tuple], options: AnalysisOptions,
             start: datetime | None, end: datetime | None, *, before=None
             ) -> list[DeviceEntry]:
    """In a pool worker or here: ``_entry`` of each (scope device, GNSS device) of a batch,
    its rovers' store inputs read at once; ``before(k, device)`` is called before each."""
    rovers = [g for d, g in devices if d.is_rover and g is not None]
    inputs = store_inputs(mirror, rovers, start, end) if rovers else None
    out = []
    for k, (device, gnss) in enumerate(devices):
        if before is not None:
            before(k, device)
        out.append(_entry(mirror, device, gnss, options, start, end, inputs))
    return out


def _entry(mirror: Mirror, device: ScopeDevice, gnss: queries.GnssDevice | None,
           options: AnalysisOptions, start: datetime | None,
           end: datetime | None, inputs: StoreInputs | None) -> DeviceEntry:
    if not device.is_rover or gnss is None:
        return DeviceEntry(device, problem=NOT_A_ROVER)
    serial = device.serial_number
    common = dict(alarm_levels=inputs.levels[serial],
                  alarm_level_sources=inputs.level_sources[serial],
                  epochs_in_mirror=int(gnss.epochs), first_epoch_in_mirror=utc(gnss.first),
                  last_epoch_in_mirror=utc(gnss.last))
    if not gnss.epochs:
        return DeviceEntry(device, problem="no epochs in the mirror: run `devmon sync`, or "
                                           "check the rover", **common)
    try:
        analysis = analyze_device(mirror, gnss, options, start, end, inputs=inputs)
    except (ValueError, StoreError) as err:
        text = str(err)
        prefix = f"{device.serial_number}: "
        return DeviceEntry(device, problem=text[len(prefix):] if text.startswith(prefix)
                           else text, **common)
    return DeviceEntry(device, analysis=analysis, **common)


def _nothing_analysed(entries: list[DeviceEntry], start: datetime | None,
                      end: datetime | None) -> str:
    rovers = [e for e in entries if e.problem != NOT_A_ROVER]
    reasons = "; ".join(f"{e.label}: {e.problem}" for e in rovers[:6])
    firsts = [e for e in rovers if e.epochs_in_mirror]
    if (start or end) and firsts:
        newest = max(e.last_epoch_in_mirror for e in firsts)
        return (f"no rover in scope has enough epochs between {utc_text(start, 'the start')} "
                f"and {utc_text(end, 'the end')} ({reasons}); their newest epoch is "
                f"{utc_text(newest)}: choose a period with data (--from/--to), or run "
                f"`devmon sync`")
    return f"no rover in scope could be analysed ({reasons})"


def _warnings(generated_at: datetime, last_synced: datetime | None,
              newest: datetime | None, entries: list[DeviceEntry]) -> list[str]:
    """What the cover must say about the data's age and the rovers left out."""
    out = []
    if last_synced is None:
        out.append("The mirror has never synced data of these rovers: run `devmon sync`.")
    elif generated_at - last_synced > STALE_SYNC:
        out.append(f"The mirror was last synced {_days(generated_at - last_synced)} before "
                   f"this report: the service may hold newer data. Run `devmon sync` and "
                   f"make the report again.")
    if newest is not None and last_synced is not None and last_synced - newest > STALE_DATA:
        out.append(f"The newest epoch ({utc_text(newest)}) is {_days(last_synced - newest)} "
                   f"older than the last sync: the rovers have sent no data since. Check "
                   f"them and their data link.")
    failed = [e for e in entries if e.problem and e.problem != NOT_A_ROVER]
    if failed:
        out.append(f"{len(failed)} rover{'s' if len(failed) > 1 else ''} could not be "
                   f"analysed: " + "; ".join(f"{e.label}: {e.problem}" for e in failed))
    return out


def _days(delta: timedelta) -> str:
    days = delta.total_seconds() / 86400.0
    return f"{days:.1f} days" if days < 10 else f"{days:.0f} days"


# ----------------------------------------------------------------------------- site plans

def _plans(mirror: Mirror, entries: list[DeviceEntry]) -> list[SitePlan]:
    """One plan per site holding analysed rovers (``devmon_sync.analyze.site_plans``, which
    the GUI's plan view uses too): each rover named by its label, numbered by its point
    number."""
    return site_plans(mirror, [PlanRover(e.analysis, e.device.site_uuid, e.device.site_name,
                                         e.label, e.point_number) for e in entries])

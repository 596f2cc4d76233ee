"""The GNSS view's work, run on a worker thread: analyse the checked rovers through
``devmon_sync.analyze.rovers`` and gather what the plots need (alarm levels, and the site
plans through ``devmon_sync.analyze.site_plans``, as the report places them).  The GUI thread
only draws what comes back: it never reads the mirror for a figure."""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field
from datetime import datetime

from analysis.pipeline import AnalysisOptions, RoverAnalysis
from devmon_sync.analyze.rovers import BATCH, analyze_device, store_inputs
from devmon_sync.analyze.site_plans import PlanRover, SitePlan, site_plans
from devmon_sync.report.details import ReportDetails
from devmon_sync.report.points import point_numbers
from devmon_sync.store import Mirror, StoreError, queries
from gui.workers import TaskState


# ----------------------------------------------------------------------------- the work

@dataclass(frozen=True)
class GnssRequest:
    """One analysis run: rovers, options, and the period (UTC; None: the whole record)."""

    serials: tuple[str, ...]
    options: AnalysisOptions
    start: datetime | None = None
    end: datetime | None = None


@dataclass
class GnssResult:
    """What a run returns to the GUI thread: the analyses that succeeded (in the order
    asked), a message per rover that could not be analysed, the rovers as the mirror knows
    them now, the alarm levels of the analysed ones, and the site plans of the analysed
    rovers (``site_plans``) numbered as ``details`` number them."""

    request: GnssRequest
    analyses: list[RoverAnalysis]
    errors: list[str]
    devices: dict[str, queries.GnssDevice]
    alarm_levels: dict[str, dict] = field(default_factory=dict)
    plans: list[SitePlan] = field(default_factory=list)
    details: ReportDetails = ReportDetails()


def point_numbers_of(mirror: Mirror, details: ReportDetails) -> dict[str, str]:
    """{serial: point number} as the report numbers the devices from ``details``
    (``report.points.point_numbers``; a mirror that cannot resolve them: none, the report
    will say why).  Reads the mirror: worker threads only."""
    if not details.point_numbers:
        return {}
    try:
        return point_numbers(mirror, details).by_serial
    except StoreError:
        return {}


def plans_of(mirror: Mirror, analyses: list[RoverAnalysis],
             devices: dict[str, queries.GnssDevice],
             details: ReportDetails) -> list[SitePlan]:
    """The site plans of ``analyses`` (one per site, ``analyze.site_plans.site_plans``: the
    report's placement), each rover numbered as the report numbers it from ``details``
    (``report.points.point_numbers``; a mirror that cannot resolve them: no numbers, the
    report will say why).  Reads the mirror: worker threads only."""
    numbers = point_numbers_of(mirror, details)
    rovers = [PlanRover(a, devices[a.serial_number].site_uuid,
                        devices[a.serial_number].site_name, a.display_name,
                        numbers.get(a.serial_number)) for a in analyses]
    return site_plans(mirror, rovers)


def run_analyses(mirror: Mirror, state: TaskState, request: GnssRequest,
                 details: ReportDetails = ReportDetails()) -> GnssResult:
    """The worker task: ``analyze_device`` for each requested rover, with progress per
    rover, then the site plans (``plans_of``, numbered from ``details``).  A rover whose
    data cannot support an analysis (a ValueError: too few epochs, none in the period, no
    such projection at its site) becomes a message and the others are still analysed.
    The rovers' epochs, levels and rule are read by batch (``rovers.store_inputs``: a query
    each for up to ``rovers.BATCH`` rovers, not one each a rover; issue 31)."""
    devices = {d.serial_number: d for d in queries.gnss_devices(mirror)}
    analyses, errors, levels = [], [], {}
    asked = list(request.serials)
    for first in range(0, len(asked), BATCH):
        state.check()
        batch = [devices[sn] for sn in asked[first:first + BATCH] if sn in devices]
        inputs = store_inputs(mirror, batch, request.start, request.end) if batch else None
        for i, serial in enumerate(asked[first:first + BATCH], start=first):
            state.check()
            device = devices.get(serial)
            if device is None:
                errors.append(f"{serial}: no longer a GNSS rover of this mirror")
                continue
            state.set_progress(100.0 * i / len(asked),
                               f"Analysing {device.display_name} ({i + 1} of {len(asked)})…")
            try:
                analyses.append(analyze_device(mirror, device, request.options, request.start,
                                               request.end, inputs=inputs))
            except ValueError as err:
                errors.append(f"{device.display_name}: {err}")
                continue
            levels[serial] = inputs.levels[serial]
    state.check()
    plans = plans_of(mirror, analyses, devices, details)
    state.set_progress(100.0, "Drawing…")
    return GnssResult(request, analyses, errors, devices, levels, plans, details)


def analysis_task(request: GnssRequest, details: ReportDetails = ReportDetails()
                  ) -> Callable[[Mirror, TaskState], GnssResult]:
    """The ``TaskRunner`` task of a request: ``run_analyses`` on the analysis thread, the
    plans numbered from ``details`` (the report details remembered for the mirror)."""
    def task(mirror: Mirror, state: TaskState) -> GnssResult:
        return run_analyses(mirror, state, request, details)
    return task


def plans_task(result: GnssResult, details: ReportDetails
               ) -> Callable[[Mirror, TaskState], list[SitePlan]]:
    """The ``TaskRunner`` task that numbers ``result``'s plans again from ``details`` (the
    report details changed): ``plans_of`` its analyses on a worker."""
    analyses, devices = list(result.analyses), dict(result.devices)

    def task(mirror: Mirror, state: TaskState) -> list[SitePlan]:
        state.check()
        return plans_of(mirror, analyses, devices, details)
    return task

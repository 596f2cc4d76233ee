"""The GNSS view's work, run on a worker thread: analyse the checked rovers through
``devmon_sync.analyze.rovers`` and gather what the plots need (alarm levels, plan positions)."""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field
from datetime import datetime

import numpy as np

from analysis.pipeline import AnalysisOptions, RoverAnalysis
from devmon_sync.analyze.rovers import analyze_device
from devmon_sync.store import Mirror, browse, queries
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
    them now, and the alarm levels and latest positions of the analysed ones."""

    request: GnssRequest
    analyses: list[RoverAnalysis]
    errors: list[str]
    devices: dict[str, queries.GnssDevice]
    alarm_levels: dict[str, dict] = field(default_factory=dict)
    positions: dict[str, tuple[float, float, float]] = field(default_factory=dict)


def plan_positions(mirror: Mirror, serials: list[str]) -> dict[str, tuple[float, float, float]]:
    """Where the plan view draws each rover: ``browse.gnss_positions`` (the median position
    of its last day of epochs) as (lat, lon, ellipsoidal height; NaN when unknown)."""
    cols = browse.gnss_positions(mirror)
    wanted = set(serials)
    return {sn: (float(lat), float(lon), float(h))
            for sn, lat, lon, h in zip(cols["serial_number"], cols["lat"], cols["lon"],
                                       cols["eh"])
            if sn in wanted and np.isfinite(lat) and np.isfinite(lon)}


def run_analyses(mirror: Mirror, state: TaskState, request: GnssRequest) -> GnssResult:
    """The worker task: ``analyze_device`` for each requested rover, with progress per
    rover.  A rover whose data cannot support an analysis (a ValueError: too few epochs,
    none in the period, no such projection at its site) becomes a message and the others
    are still analysed."""
    devices = {d.serial_number: d for d in queries.gnss_devices(mirror)}
    analyses, errors, levels = [], [], {}
    for i, serial in enumerate(request.serials):
        state.check()
        device = devices.get(serial)
        if device is None:
            errors.append(f"{serial}: no longer a GNSS rover of this mirror")
            continue
        state.set_progress(100.0 * i / len(request.serials),
                           f"Analysing {device.display_name} ({i + 1} of "
                           f"{len(request.serials)})…")
        try:
            analyses.append(analyze_device(mirror, device, request.options, request.start,
                                           request.end))
        except ValueError as err:
            errors.append(f"{device.display_name}: {err}")
            continue
        levels[serial] = queries.alarm_levels(mirror, serial)
    state.check()
    positions = plan_positions(mirror, [a.serial_number for a in analyses])
    state.set_progress(100.0, "Drawing…")
    return GnssResult(request, analyses, errors, devices, levels, positions)


def analysis_task(request: GnssRequest) -> Callable[[Mirror, TaskState], GnssResult]:
    """The ``TaskRunner`` task of a request: ``run_analyses`` on the analysis thread."""
    def task(mirror: Mirror, state: TaskState) -> GnssResult:
        return run_analyses(mirror, state, request)
    return task

"""Analyses of mirrored rovers: load through the store, compute through ``analysis``.

The one place that joins the two, so that ``devmon analyze``, the GUI and the reports load the
same epochs, the same known events and alarm levels, and get the same numbers.
"""

from __future__ import annotations

from dataclasses import replace
from datetime import datetime

import numpy as np

from analysis.pipeline import AnalysisOptions, Frame, RoverAnalysis, analyze_rover
from devmon_sync.analyze import pool as analyze_pool
from devmon_sync.store import Mirror, queries


def _naive_utc(t: datetime | None):
    return None if t is None else np.datetime64(t.replace(tzinfo=None), "us")


def analyze_device(mirror: Mirror, device: queries.GnssDevice, options: AnalysisOptions,
                   start: datetime | None = None, end: datetime | None = None) -> RoverAnalysis:
    """One rover over [start, end] (default: all its mirrored epochs), its alarms judged
    by the mirror's rule (`devmon alarms --confidence/--min-duration`)."""
    rule = queries.alarm_rule(mirror)
    if rule:
        options = replace(options, alarm_rule=replace(options.alarm_rule, **rule))
    epochs = queries.gnss_epochs(mirror, device.serial_number, start, end)
    frame = Frame.resolve(options.frame, device.projections)
    projected = None
    if frame.projection_id is not None:
        projected = queries.gnss_projected(mirror, device.serial_number, frame.projection_id,
                                           start, end)
        if not np.array_equal(projected["epoch_id"], epochs["epoch_id"]):
            projected = None  # not every epoch has it: no epoch-by-epoch check
    return analyze_rover(
        epochs, serial_number=device.serial_number, display_name=device.display_name,
        options=options, projections=device.projections, events=device.events,
        azimuth_deg=device.azimuth_deg, sampling_period_s=device.sampling_period_s,
        period=(_naive_utc(start), _naive_utc(end)),
        alarm_levels=queries.alarm_levels(mirror, device.serial_number),
        service_projected=projected)


def rovers_to_analyze(mirror: Mirror, serial_numbers: list[str]) -> list[queries.GnssDevice]:
    """The named rovers (default: every rover with epochs), in serial-number order.  A
    ValueError names an unknown device, or says there is no rover with epochs."""
    if serial_numbers:
        return [queries.gnss_device(mirror, sn) for sn in serial_numbers]
    devices = [d for d in queries.gnss_devices(mirror) if d.epochs]
    if not devices:
        raise ValueError(f"no GNSS rover in {mirror.path} has epochs: run `devmon sync` "
                         f"first, or check its scope")
    return devices


def analyze_devices(mirror: Mirror, serial_numbers: list[str], options: AnalysisOptions,
                    start: datetime | None = None, end: datetime | None = None, *,
                    jobs: int | None = 1) -> list[RoverAnalysis]:
    """The named rovers (default: every rover with epochs), in serial-number order.  A
    ValueError names an unknown device or a period without epochs (the first rover's, in
    that order, that has none).  ``jobs``: worker processes (``analyze_pool``; None: every
    core; 1: in this process), the same analyses either way."""
    devices = rovers_to_analyze(mirror, serial_numbers)
    if not analyze_pool.worker_count(jobs, len(devices)):
        return [analyze_device(mirror, d, options, start, end) for d in devices]
    outcomes = analyze_pool.run(analyze_device, [(d, options, start, end) for d in devices],
                                jobs=jobs, mirror=mirror)
    for outcome in outcomes:
        if isinstance(outcome, analyze_pool.Failed):
            outcome.reraise()
    return outcomes

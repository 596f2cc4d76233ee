"""Analyses of mirrored rovers: load through the store, compute through ``analysis``.

The one place that joins the two, so that ``devmon analyze``, the GUI and the reports load the
same epochs, the same known events and alarm levels, and get the same numbers.
"""

from __future__ import annotations

from dataclasses import dataclass, replace
from datetime import datetime

import numpy as np

from analysis.pipeline import AnalysisOptions, Frame, RoverAnalysis, analyze_rover
from devmon_sync.analyze import pool as analyze_pool
from devmon_sync.store import Mirror, queries


def _naive_utc(t: datetime | None):
    return None if t is None else np.datetime64(t.replace(tzinfo=None), "us")


BATCH = 64
"""Rovers whose epochs and alarm levels one query reads (a scan of gnss_epochs for them
all, not one a rover), bounding the epochs held at once."""


@dataclass(frozen=True)
class StoreInputs:
    """What the store gives the analyses of some rovers, read for them all at once."""

    rule: dict[str, float]  # the mirror's alarm rule (``queries.alarm_rule``)
    levels: dict[str, dict[str, dict[str, float]]]  # per serial (``alarm_levels``)
    epochs: dict[str, dict[str, np.ndarray]]  # per serial (``gnss_epochs``)
    level_sources: dict[str, dict[str, str]]  # per serial (``alarm_level_sources``)


def store_inputs(mirror: Mirror, devices: list[queries.GnssDevice],
                 start: datetime | None = None, end: datetime | None = None) -> StoreInputs:
    """The rule, levels (and where they come from) and epochs of ``devices``, in three
    queries."""
    serials = [d.serial_number for d in devices]
    levels, sources = queries.alarm_levels_and_sources(mirror, serials)
    return StoreInputs(queries.alarm_rule(mirror), levels,
                       queries.gnss_epochs_of_devices(mirror, serials, start, end), sources)


def analyze_device(mirror: Mirror, device: queries.GnssDevice, options: AnalysisOptions,
                   start: datetime | None = None, end: datetime | None = None, *,
                   inputs: StoreInputs | None = None) -> RoverAnalysis:
    """One rover over [start, end] (default: all its mirrored epochs), its alarms judged
    by the mirror's rule (`devmon alarms --confidence/--min-duration`).  ``inputs``: read
    beforehand for many rovers (``store_inputs``, same period); else read here."""
    if inputs is None:
        inputs = store_inputs(mirror, [device], start, end)
    if inputs.rule:
        options = replace(options, alarm_rule=replace(options.alarm_rule, **inputs.rule))
    epochs = inputs.epochs[device.serial_number]
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
        alarm_levels=inputs.levels[device.serial_number],
        service_projected=projected)


def analyze_batch(mirror: Mirror, devices: list[queries.GnssDevice], options: AnalysisOptions,
                  start: datetime | None = None, end: datetime | None = None
                  ) -> list[RoverAnalysis]:
    """``analyze_device`` of each rover in order, their store inputs read at once; the
    first rover's error, in that order, is raised."""
    inputs = store_inputs(mirror, devices, start, end)
    return [analyze_device(mirror, d, options, start, end, inputs=inputs) for d in devices]


def rovers_to_analyze(mirror: Mirror, serial_numbers: list[str]) -> list[queries.GnssDevice]:
    """The named rovers (default: every rover with epochs), in serial-number order.  A
    ValueError names an unknown device, or says there is no rover with epochs."""
    if serial_numbers:
        return rovers_named(mirror, serial_numbers)
    devices = [d for d in queries.gnss_devices(mirror) if d.epochs]
    if not devices:
        raise ValueError(f"no GNSS rover in {mirror.path} has epochs: run `devmon sync` "
                         f"first, or check its scope")
    return devices


def rovers_named(mirror: Mirror, serial_numbers: list[str]) -> list[queries.GnssDevice]:
    """The rovers of these serial numbers, in that order, from one read of the rovers (not
    one a rover: issue 31); a name or a device that is no rover goes through
    ``queries.gnss_device`` (resolved, or refused with the known ones)."""
    by_serial = {d.serial_number: d for d in queries.gnss_devices(mirror)}
    return [by_serial[sn] if sn in by_serial else queries.gnss_device(mirror, sn)
            for sn in serial_numbers]


def analyze_devices(mirror: Mirror, serial_numbers: list[str], options: AnalysisOptions,
                    start: datetime | None = None, end: datetime | None = None, *,
                    jobs: int | None = 1) -> list[RoverAnalysis]:
    """The named rovers (default: every rover with epochs), in serial-number order.  A
    ValueError names an unknown device or a period without epochs (the first rover's, in
    that order, that has none).  ``jobs``: worker processes (``analyze_pool``; None: every
    core; 1: in this process), the same analyses either way."""
    devices = rovers_to_analyze(mirror, serial_numbers)
    return raised(by_batch(analyze_batch, devices, (options, start, end), jobs=jobs,
                           mirror=mirror))


def by_batch(work, items: list, args: tuple = (), *, jobs: int | None, mirror: Mirror | None,
             workers: int | None = None, progress=None) -> list:
    """``work(mirror, batch, *args)`` over ``items`` in consecutive batches (``batches``;
    each returns a list, one result an item), in the process pool when it pays
    (``workers``: ``analyze_pool.worker_count`` of the items unless given): one outcome an
    item, in order, a failed batch's ``analyze_pool.Failed`` standing for each of its
    items.  ``progress(done, total, batch)`` counts items, after each batch (the list).
    The one way ``devmon analyze``, the reports and ``analyze_devices`` spread rovers over
    the cores."""
    workers = analyze_pool.worker_count(jobs, len(items)) if workers is None else workers
    parts = batches(items, workers)
    done = 0

    def finished(_done: int, _total: int, index: int) -> None:
        nonlocal done
        done += len(parts[index])
        progress(done, len(items), parts[index])

    per_batch = analyze_pool.run(work, [(part, *args) for part in parts], jobs=jobs,
                                 mirror=mirror, workers=workers,
                                 progress=None if progress is None else finished)
    out: list = []
    for outcome, part in zip(per_batch, parts):
        out += [outcome] * len(part) if isinstance(outcome, analyze_pool.Failed) else outcome
    return out


def raised(outcomes: list) -> list:
    """``outcomes`` of ``by_batch`` where none failed; else the first failure raised again
    (a fault, not a rover's data: those come back as results)."""
    for outcome in outcomes:
        if isinstance(outcome, analyze_pool.Failed):
            outcome.reraise()
    return outcomes


def batches(devices: list, workers: int) -> list[list]:
    """``devices`` in consecutive batches for ``workers`` processes (0 or 1: serial, one
    batch of at most ``BATCH``): at most ``BATCH`` each, and with a pool at least four a
    worker (so it keeps every worker busy to the end)."""
    size = BATCH if workers <= 1 else max(1, min(BATCH, -(-len(devices) // (4 * workers))))
    return [devices[i:i + size] for i in range(0, len(devices), size)]

"""Alarm evaluation of mirrored rovers, kept in the mirror: when each level was first and
last reached, as an instrument's alarm log keeps it.

Why stored, when ``analysis.alarms`` can recompute it: a list of devices (the GUI's tree,
`devmon status`, a site overview) must show each one's worst level at a glance without
analysing every rover; and the log of when a level was first reached belongs with the data
a report is made from.  The evaluation uses the default analysis (reference: the first
24 h, local ENU) over each rover's whole record, with the levels that apply to it.  It is
run after each sync and whenever levels change, for the rovers whose data or levels are
newer than their last evaluation.
"""

from __future__ import annotations

import logging
from dataclasses import dataclass

from analysis.alarms import AlarmRule
from analysis.pipeline import AnalysisOptions
from devmon_sync.analyze.device_kinds import GNSS_LEVELS, is_rover, not_a_rover
from devmon_sync.analyze import pool as analyze_pool
from devmon_sync.analyze.rovers import (BATCH, StoreInputs, analyze_device, batches,
                                        rovers_named, store_inputs)
from devmon_sync.client import LOG_FILE_ONLY
from devmon_sync.store import Mirror, StoreError, queries, report_queries

log = logging.getLogger("devmon.alarms")


def _rows(analysis) -> list[dict]:
    alarm = analysis.alarm
    if alarm is None:
        return []
    reference = analysis.options.reference.describe()
    rows = []
    for h in alarm.history:
        key = alarm.keys[h.key]
        rows.append({"quantity": h.key, "level": h.level,
                     "level_rank": key.levels.names.index(h.level),
                     "threshold": key.levels.thresholds[key.levels.names.index(h.level)],
                     "first_exceeded": h.first_exceeded, "last_exceeded": h.last_exceeded,
                     "exceeded_at_end": h.exceeded_at_end, "peak_value": h.peak_value,
                     "episodes": h.episodes, "unit": h.unit, "reference": reference,
                     "evaluated_until": _last_epoch(analysis)})
    return rows


def _last_epoch(analysis):
    return analysis.t_all[-1] if analysis.t_all.size else None


def evaluate_alarms(mirror: Mirror, serial_numbers: list[str] | None = None, *,
                    only_stale: bool = True, jobs: int | None = 1
                    ) -> list[tuple[str, object]]:
    """Evaluate the GNSS alarm levels of the rovers named (default: every rover with
    levels), or only those whose data or levels changed since their last evaluation, and
    store their history.  Returns (serial number, ``PointAlarms`` or the reason in words
    the rover could not be evaluated).

    By batch: each batch's epochs and levels read in one query (issue 31).  ``jobs``
    (``analyze_pool``; None: every core; 1: here): the analyses on every core, even on a
    mirror open for writing (as after a sync): this process reads each batch's inputs and
    sends them, the workers never open the file; this process then stores the results."""
    serials = queries.alarm_evaluation_due(mirror, serial_numbers, only_stale=only_stale)
    options = AnalysisOptions()
    rovers = rovers_named(mirror, serials)
    workers = analyze_pool.worker_count(jobs, len(rovers))
    out = []
    for part in _rounds(rovers, workers):
        tasks = [(batch, options, store_inputs(mirror, batch))
                 for batch in batches(part, workers)]
        if workers:
            found = analyze_pool.run(_analyses, tasks, jobs=jobs, workers=workers)
        else:
            found = [_analyses(None, *task) for task in tasks]
        for (batch, _, _), outcome in zip(tasks, found):
            if isinstance(outcome, analyze_pool.Failed):
                outcome.reraise()  # not a rover's data: a fault
            out += _store(mirror, batch, options, outcome)
    return out


def _rounds(rovers: list, workers: int) -> list[list]:
    """The rovers in rounds whose inputs are held at once: a batch when serial, four
    batches a worker with a pool (``rovers.batches``)."""
    size = BATCH * 4 * workers if workers else BATCH
    return [rovers[i:i + size] for i in range(0, len(rovers), size)]


def _analyses(_mirror, batch: list[queries.GnssDevice], options: AnalysisOptions,
              inputs: StoreInputs) -> list:
    """In a pool worker or here: each rover's analysis from its inputs (no read of the
    mirror: the default frame is local ENU), or the ValueError saying why none."""
    out = []
    for device in batch:
        try:
            out.append(analyze_device(None, device, options, inputs=inputs))
        except ValueError as err:  # too few epochs: nothing to evaluate yet
            out.append(err)
    return out


def _store(mirror: Mirror, batch: list[queries.GnssDevice], options: AnalysisOptions,
           results: list) -> list[tuple[str, object]]:
    """A batch's evaluations stored in one transaction: (serial, ``PointAlarms`` or why
    none) each."""
    histories, out = [], []
    for device, result in zip(batch, results):
        serial = device.serial_number
        if isinstance(result, ValueError):  # too few epochs: nothing to evaluate yet
            histories.append((serial, [], {"evaluated_until": device.last,
                                           "rule": options.alarm_rule.describe(),
                                           "note": str(result)}))
            out.append((serial, str(result)))
            continue
        histories.append((serial, _rows(result), {
            "evaluated_until": _last_epoch(result),
            "rule": result.options.alarm_rule.describe()}))
        out.append((serial, result.alarm))
    queries.replace_alarm_histories(mirror, histories)
    for serial, alarm in out:
        if not isinstance(alarm, str):
            log.info("alarms of %s evaluated: %s", serial,
                     alarm.describe() if alarm else "no levels", extra=LOG_FILE_ONLY)
    return out


def after_sync(mirror: Mirror, jobs: int | None = 1) -> list[str]:
    """Evaluate the rovers a sync brought new epochs to (or whose levels changed) and say,
    in lines for the user, which are at a level now (``jobs``: as ``evaluate_alarms``; a
    sync holds the mirror open for writing, which the pool allows).  An evaluation that
    fails must not undo a sync that succeeded: the failure is logged and said in one
    line."""
    try:
        results = evaluate_alarms(mirror, jobs=jobs)
    except Exception as err:  # noqa: BLE001 - the synced data stay; the user is told
        log.exception("alarm evaluation after the sync failed")
        return [f"  Alarm evaluation failed ({err}); the synced data are kept. Run "
                f"`devmon alarms --evaluate` to try again."]
    return level_lines(results)


def level_lines(results: list[tuple[str, object]]) -> list[str]:
    """'Alarms: N rovers evaluated', then one line per rover at a level now."""
    if not results:
        return []
    from analysis.alarms import quantity_words

    lines = [f"Alarms: {len(results)} rover{'s' if len(results) != 1 else ''} evaluated."]
    for serial, alarm in results:
        if isinstance(alarm, str):
            lines.append(f"  {serial}: not evaluated ({alarm})")
        elif alarm is not None and alarm.overall:
            lines.append(f"  {serial}: {alarm.overall.upper()} by "
                         f"{quantity_words(alarm.overall_quantity)} "
                         f"({alarm.keys[alarm.overall_quantity].describe()})")
    return lines


@dataclass(frozen=True)
class ScopeAlarms:
    """The alarm levels of a device, site or group after a change (``change_levels``):
    what a person checks the change by.  ``levels``: for a device those that apply to it,
    with ``sources`` saying where each comes from, and its stored ``history``; for a site or
    group those set on it (``sources`` empty, ``history`` None).  ``evaluated``: the rovers
    evaluated again, as ``evaluate_alarms`` returns them."""

    target: queries.AlarmScope
    levels: dict[str, dict[str, float]]
    sources: dict[str, str]
    history: list[dict] | None
    rule: AlarmRule
    evaluated: list[tuple[str, object]]
    #: for a device that is no GNSS rover: why no displacement or velocity level applies
    #: (its site's or group's reach rovers only), else ""
    not_for_gnss: str = ""


def scope_serials(mirror: Mirror, target: queries.AlarmScope) -> list[str]:
    """The devices a device, site or group covers (a group's nested groups too)."""
    if target.scope == "device":
        return [target.scope_id]
    devices = (report_queries.site_devices if target.scope == "site"
               else report_queries.group_devices)(mirror, target.scope_id)
    return [d.serial_number for d in devices]


def change_levels(mirror: Mirror, scope: str, name: str,
                  changes: dict[str, dict[str, float]], *,
                  evaluate: bool = False, jobs: int | None = 1) -> ScopeAlarms:
    """Set ``changes`` ({quantity: levels}, ``{}`` clears one) on the device, site or group
    ``name`` names (``queries.alarm_scope``), all or nothing; then, when levels changed or
    ``evaluate`` asks, evaluate every rover of the scope again (a cleared level leaves no
    newer row to tell them by, so not only the stale ones).  A StoreError in words for a
    scope or parameter that is not there.  ``jobs``: as ``evaluate_alarms``."""
    target = queries.alarm_scope(mirror, scope, name)
    _refuse_gnss_levels_off_rovers(mirror, target, changes)
    if changes:
        queries.set_alarm_ladders(mirror, target.scope_id, changes, scope=target.scope)
    device = target.scope == "device"
    evaluated = evaluate_alarms(mirror, scope_serials(mirror, target), only_stale=False,
                                jobs=jobs) if changes or evaluate else []
    if device:  # the levels that apply and where each comes from: one query
        levels, sources = (per[target.scope_id] for per in
                           queries.alarm_levels_and_sources(mirror, [target.scope_id]))
    else:
        levels, sources = queries.alarm_levels_set(mirror, target.scope, target.scope_id), {}
    not_for_gnss = ""
    if device and not is_rover(mirror, target.scope_id):  # its site's GNSS levels: not its
        levels, sources = ({q: v for q, v in given.items() if not _is_gnss(q)}
                           for given in (levels, sources))
        not_for_gnss = not_a_rover(mirror, target.scope_id, GNSS_LEVELS)
    return ScopeAlarms(
        target, levels=levels, sources=sources,
        history=queries.alarm_history(mirror, target.scope_id) if device else None,
        rule=AlarmRule(**queries.alarm_rule(mirror)), evaluated=evaluated,
        not_for_gnss=not_for_gnss)


def _is_gnss(quantity: str) -> bool:
    """A displacement or velocity quantity (of any component), read by the GNSS analysis."""
    return quantity.partition(":")[0] in ("displacement", "velocity")


def _refuse_gnss_levels_off_rovers(mirror: Mirror, target, changes) -> None:
    """A StoreError for displacement or velocity levels set on a device that is no GNSS
    rover: no analysis would ever read them (a site's or group's reach its rovers only)."""
    gnss = [q for q, levels in changes.items() if levels and _is_gnss(q)]
    if gnss and target.scope == "device" and not is_rover(mirror, target.scope_id):
        raise StoreError(not_a_rover(mirror, target.scope_id, GNSS_LEVELS))


def change_rule(mirror: Mirror, *, jobs: int | None = 1, **rule: float
                ) -> tuple[AlarmRule, list[tuple[str, object]]]:
    """Set the mirror's alarm rule (``confidence``, ``min_duration_hours``; those not given
    stay) and evaluate every rover with levels by it (``jobs``: as ``evaluate_alarms``):
    (the rule now, the evaluations)."""
    queries.set_alarm_rule(mirror, **rule)
    now = AlarmRule(**queries.alarm_rule(mirror))
    return now, evaluate_alarms(mirror, None, only_stale=False, jobs=jobs)

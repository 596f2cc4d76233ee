"""The report's tables as text: every cell formatted from ``RoverAnalysis.summary()``.

Kept apart from the drawing so that a test (and the GUI) can read exactly what a table
says, and check it against the analysis, without parsing a PDF.  Precision is that of
``devmon analyze``: displacements 0.1 mm, velocities 0.001 mm/day and 0.1 mm/yr,
accelerations 0.0001 mm/day².
"""

from __future__ import annotations

from dataclasses import dataclass, field

import numpy as np

from analysis import alarms, figures
from analysis.alarms import (COMPONENTS, QUANTITIES, PointAlarms, quantity_words,
                             split_key, value_text)
from analysis.pipeline import RECENT_WINDOW_DAYS, RoverAnalysis, plus_minus
from devmon_sync.report.model import DeviceEntry, ReportData, report_order
from devmon_sync.store import browse
from devmon_sync.store.report_queries import DeletedSensor

METHOD_NAMES = {"midas": "MIDAS", "ols": "least squares"}
QUANTITY_SHORT = {"displacement": "displ.", "velocity": "velocity"}
#: A level key's component in the summary's alarm cell ("alert (downward velocity)").
COMPONENT_SHORT = {"horizontal": "2D", "vertical": "vertical", "up": "upward",
                   "down": "downward", "along": "along-slope", "across": "cross-slope"}
#: Digits of an alarm value by unit (the report's precision for displacement and velocity).


@dataclass(frozen=True)
class Column:
    """A table column: ``key`` of its cells, ``header`` (may hold a line break), ``width``
    as a share of the table's width, ``align`` of its cells."""

    key: str
    header: str
    width: float
    align: str = "right"


@dataclass(frozen=True)
class Row:
    """A table row: cell texts by column key; ``level`` the alarm level reached (None:
    none) and ``rank`` its position among the device's levels (1 = the first), which
    colour the row; ``merged`` a text spanning every column after the first (a device
    without an analysis); ``lights`` the cells lit in a level's own colour (a point's H
    and V lights)."""

    serial_number: str
    cells: dict[str, str]
    level: str | None = None
    rank: int = 0
    merged: str | None = None
    lights: dict = field(default_factory=dict)  # column key -> (level, rank): a lit cell


# ----------------------------------------------------------------------------- formats

def iso_text(iso: str | None) -> str:
    """``2025-12-31T23:00:00Z`` as ``2025-12-31 23:00``; ``-`` when missing."""
    return "-" if not iso else iso[:16].replace("T", " ")


def device_cell(entry: DeviceEntry) -> str:
    """``P7  gnss-creep-003`` over the serial number: the point number first when the
    report details give one; the serial number alone when it is the name."""
    d = entry.device
    name = d.display_name if entry.point_number is None \
        else f"{entry.point_number}  {d.display_name}"
    return name if d.display_name == d.serial_number and entry.point_number is None \
        else f"{name}\n{d.serial_number}"


def alarm_rank(analysis: RoverAnalysis) -> int:
    """The analysis' ``PointAlarms.rank`` (0 without levels)."""
    return analysis.alarm.rank if analysis.alarm is not None else 0


def alarm_text(analysis: RoverAnalysis) -> str:
    alarm = analysis.alarm
    if alarm is None:
        return "no levels set"
    if not alarm.overall:
        return "below levels"
    return f"{alarm.overall}\n({key_short(alarm.overall_quantity)})"


def key_short(key: str | None) -> str:
    """A level key in a narrow cell: ``displacement`` -> "displ." (3D, as the table's
    other columns), ``velocity:down`` -> "downward velocity", ``displacement:horizontal``
    -> "2D displ."."""
    quantity, _, component = (key or "").partition(":")
    short = QUANTITY_SHORT.get(quantity, quantity)
    return f"{COMPONENT_SHORT.get(component, component)} {short}" if component else short


def level_colour(level: str | None, rank: int) -> str | None:
    """The alarm level's colour in every figure (``analysis.figures``), None below levels."""
    return figures.level_colour(level, rank - 1) if level and rank else None


def forecast_text(summary: dict) -> str:
    """The Voight fit's date; without one, the linear forecast's warning when it gives
    one (its date, "imminent" or "within N days", marked linear), else "none"."""
    forecast = summary.get("forecast")
    if forecast and forecast["supported"]:
        return iso_text(forecast["failure_time"])
    linear = summary.get("linear_forecast")
    if not linear or linear["state"] not in ("dated", "imminent", "accelerating, not dated"):
        return "none"
    if linear["state"] == "dated":
        return f"{iso_text(linear['failure_time'])}\n(linear)"
    if linear["state"] == "imminent":
        return "imminent (linear)"
    n = max(round(linear["within_days"]), 1)
    return f"within {n} day{'s' * (n != 1)}\n(linear)"


# ----------------------------------------------------------------------------- summary

SUMMARY_COLUMNS = (
    Column("device", "Device", 0.17, "left"),
    Column("east", "E\nmm", 0.06), Column("north", "N\nmm", 0.06), Column("up", "U\nmm", 0.06),
    Column("horizontal", "2D\nmm", 0.06), Column("3d", "3D\nmm", 0.06),
    Column("velocity", f"3D velocity\nlast {RECENT_WINDOW_DAYS:g} days\nmm/day", 0.10),
    Column("acceleration", "Acceleration\n\nmm/day²", 0.09),
    # the alarm lights go here (``light_columns``)
    Column("completeness", "Epochs\nreceived /\nexpected", 0.09),
    Column("last_epoch", "Last\nepoch\n(UTC)", 0.09, "center"),
)

#: When no rover of a report has any level: these lights, each "not set", say so.
UNSET_DIRECTIONS = ("H", "V")


def light_directions(entries) -> list[str]:
    """The directions (``alarms.DIRECTIONS``: H, V, 3D) whose levels any analysed entry
    has, in that order: a light per direction in use (limits are usually set on H and V
    apart); ``UNSET_DIRECTIONS`` when none has any."""
    used = set()
    for e in entries:
        if e.analysis is not None:
            lights = alarms.direction_lights(e.analysis.alarm)
            used |= {d for d, key in lights.items() if key is not None}
    return [d for d in alarms.DIRECTIONS if d in used] or list(UNSET_DIRECTIONS)


def light_columns(directions) -> list[Column]:
    return [Column(f"light:{d}", f"{d}\nlevel", 0.075, "center") for d in directions]


def summary_columns(entries) -> tuple[Column, ...]:
    """``SUMMARY_COLUMNS`` with a light per direction in use before the completeness."""
    cut = [c.key for c in SUMMARY_COLUMNS].index("completeness")
    return (*SUMMARY_COLUMNS[:cut], *light_columns(light_directions(entries)),
            *SUMMARY_COLUMNS[cut:])


def light_cells(analysis: RoverAnalysis, directions) -> tuple[dict[str, str], dict]:
    """Each direction's light of a point: the cell text (the level now and the quantity
    that reached it, "below" its levels, or "not set") and the lit cells {column key:
    (level, rank)}."""
    lights = alarms.direction_lights(analysis.alarm)
    cells, lit = {}, {}
    for d in directions:
        key = lights.get(d)
        column = f"light:{d}"
        if key is None:
            cells[column] = "not set"
        elif key.current_level is None:
            cells[column] = "below"
        else:
            quantity = QUANTITY_SHORT.get(key.quantity, key.quantity)
            cells[column] = f"{key.current_level}\n{quantity}"
            lit[column] = (key.current_level, key.rank)
    return cells, lit


VELOCITY_COLUMNS = (
    Column("device", "Device", 0.20, "left"),
    Column("east", "East\nmm/yr ± 1σ", 0.115), Column("north", "North\nmm/yr ± 1σ", 0.115),
    Column("up", "Up\nmm/yr ± 1σ", 0.115), Column("horizontal", "Horizontal\nmm/yr ± 1σ", 0.115),
    Column("along", "Along azimuth\nmm/yr ± 1σ", 0.13),
    Column("forecast", "Failure forecast\n(UTC)", 0.21, "center"),
)


def summary_row(entry: DeviceEntry, directions=UNSET_DIRECTIONS) -> Row:
    """One device's row of the summary table: total displacement at the end of the period
    (E, N, U, 2D, 3D), the current (last-7-days) 3D velocity, the acceleration along the
    motion, the alarm level, completeness and the last epoch."""
    a = entry.analysis
    if a is None:
        return Row(entry.serial_number, {"device": device_cell(entry)},
                   merged="; ".join([entry.problem or "",
                                     *deleted_sensor_texts(entry)]).strip("; "))
    s = a.summary()
    d = s["displacement_mm"]
    completeness = (f"{s['epochs_received']} / {s['epochs_expected']}\n"
                    f"{s['completeness'] * 100:.1f} %"
                    if s["epochs_expected"] and s["completeness"] is not None
                    and np.isfinite(s["completeness"]) else f"{s['epochs_received']} / -")
    rank = alarm_rank(a)
    lit_cells, lit = light_cells(a, directions)
    return Row(entry.serial_number, {
        "device": device_cell(entry),
        "east": f"{d['east']:+.1f}", "north": f"{d['north']:+.1f}", "up": f"{d['up']:+.1f}",
        "horizontal": f"{d['horizontal']:.1f}", "3d": f"{d['3d']:.1f}",
        "velocity": plus_minus(s["recent_velocity_mm_per_day"].get("3d"), 3, False, "\n"),
        "acceleration": plus_minus(s["acceleration_mm_per_day2"], 4, True, "\n"),
        **lit_cells,
        "completeness": completeness,
        "last_epoch": iso_text(s["last_epoch"]).replace(" ", "\n"),
    }, a.alarm.overall if a.alarm is not None else None, rank, lights=lit)


def deleted_sensor_label(sensor: DeletedSensor) -> str:
    """``Logger internals (deleted upstream 2026-11-20, archive kept)``: the GUI's label
    (``browse.deleted_upstream_label``), so the tree and the report say the same."""
    return f"{sensor.name} ({browse.deleted_upstream_label(sensor.deleted_at)})"


def deleted_sensor_texts(entry: DeviceEntry) -> list[str]:
    """``sensor Logger internals (deleted upstream 2026-11-20, archive kept)`` for each
    sensor of the device the service no longer lists."""
    return [f"sensor {deleted_sensor_label(s)}" for s in entry.deleted_sensors]


def deleted_sensor_note(data: ReportData) -> str | None:
    """Under the summary: the analysed rovers that lost a sensor upstream, each sensor
    labelled, and what that means for the report; None when none did (a device without an
    analysis says it in its own row)."""
    lost = [e for e in data.analysed if e.deleted_sensors]
    if not lost:
        return None
    return ("Sensors deleted upstream: " + "; ".join(
        f"{e.label}: {', '.join(deleted_sensor_texts(e))}" for e in lost)
        + ". The service no longer lists them; the mirror keeps their data, which this "
          "report uses, and devmon no longer fetches them.")


def velocity_row(entry: DeviceEntry) -> Row:
    """One device's row of the period-velocity table (the chosen estimator, mm/yr)."""
    a = entry.analysis
    if a is None:
        return Row(entry.serial_number, {"device": device_cell(entry)}, merged=entry.problem)
    s = a.summary()
    v = s["velocity_mm_per_yr"]
    return Row(entry.serial_number, {
        "device": device_cell(entry),
        "east": plus_minus(v.get("east"), 1), "north": plus_minus(v.get("north"), 1),
        "up": plus_minus(v.get("up"), 1),
        "horizontal": plus_minus(v.get("horizontal"), 1, False),
        "along": plus_minus(v.get("along"), 1),
        "forecast": forecast_text(s),
    }, a.alarm.overall if a.alarm is not None else None, alarm_rank(a))


def summary_rows(data: ReportData) -> list[Row]:
    """The summary table, one row per device of the scope, in the report's order
    (``report_order``): the rovers by point number, a rover that could not be analysed in
    its place with its reason, then the other devices."""
    directions = light_directions(data.analysed)
    return [summary_row(e, directions) for e in sorted(data.entries, key=report_order)]


def velocity_rows(data: ReportData) -> list[Row]:
    """The period-velocity table: one row per analysed rover, in the report's order."""
    return [velocity_row(e) for e in sorted(data.analysed, key=report_order)]


# ----------------------------------------------------------------------------- one device

NUMBER_COLUMNS = (
    Column("component", "Component", 0.25, "left"),
    Column("total", "Total\nmm", 0.13),
    Column("velocity_day", "Velocity over the period\nmm/day ± 1σ", 0.22),
    Column("velocity_yr", "\nmm/yr ± 1σ", 0.17),
    Column("recent", f"Last {RECENT_WINDOW_DAYS:g} days\nmm/day ± 1σ", 0.23),
)
COMPONENT_ROWS = ("east", "north", "up", "horizontal", "3d", "along", "across")


def number_rows(analysis: RoverAnalysis) -> list[Row]:
    """The device page's table: per component the total displacement and the velocities
    (``devmon analyze``'s table)."""
    s = analysis.summary()
    rows = []
    for c in COMPONENT_ROWS:
        if c not in s["displacement_mm"]:
            continue
        signed = c not in ("horizontal", "3d")
        rows.append(Row(analysis.serial_number, {
            "component": figures.component_label(analysis, c, long=True),
            "total": f"{s['displacement_mm'][c]:{'+' if signed else ''}.1f}",
            "velocity_day": plus_minus(s["velocity_mm_per_day"].get(c), 3, signed),
            "velocity_yr": plus_minus(s["velocity_mm_per_yr"].get(c), 1, signed),
            "recent": plus_minus(s["recent_velocity_mm_per_day"].get(c), 3, signed)}))
    return rows


def key_facts(analysis: RoverAnalysis) -> list[tuple[str, str]]:
    """Label and text of the device's other headline numbers: acceleration, alarm state,
    failure forecast, grid factors and the check against the service."""
    s = analysis.summary()
    out = [("Acceleration", f"{plus_minus(s['acceleration_mm_per_day2'], 4)} mm/day² (1σ) "
                            f"along the direction of motion" if s["acceleration_mm_per_day2"]
            else "not computed (see the notes)")]
    alarm = analysis.alarm
    if alarm is None:
        out.append(("Alarm level", "no alarm levels set for this device"))
    else:
        reached = (f"{alarm.overall} ({quantity_words(alarm.overall_quantity)})"
                   if alarm.overall else "below its levels")
        out.append(("Alarm level", f"{reached} at the end of the period; now: "
                                   + alarm_values_text(alarm)))
        out.append(("Alarm history", history_text(alarm) if alarm.history
                    else "no level reached in the period"))
    forecast = s["forecast"]
    if forecast and forecast["supported"]:
        lo, hi = forecast["interval"]
        out.append(("Failure forecast", f"{iso_text(forecast['failure_time'])} UTC "
                                        f"({100 * forecast['confidence']:g} %: "
                                        f"{iso_text(lo)} to {iso_text(hi)}), R² "
                                        f"{forecast['r2']:.2f}"))
    elif forecast:
        out.append(("Failure forecast", f"none: {forecast['reason']}"))
    linear = s.get("linear_forecast")
    if linear:
        out.append(("Linear forecast", linear["statement"]))
        out.append(("Forecasts agree?", linear["agreement"]["text"]))
    if s["grid"]:
        g = s["grid"]
        out.append(("Grid factors", f"scale factor {g['scale_factor']:.7f}, meridian "
                                    f"convergence {g['convergence_deg']:+.4f}°, combined "
                                    f"factor {g['combined_factor']:.7f}"))
    if s["consistency_mm"]:
        out.append(("Check", "largest disagreement with the service's own values: " +
                    ", ".join(f"{k} {v:.2f} mm" for k, v in s["consistency_mm"].items())))
    return out


def alarm_values_text(alarm: PointAlarms) -> str:
    """Each evaluated key's value at the end ± 1σ and the level it reaches, in words:
    ``3D displacement 51.5 ± 0.7 mm: alarm; 3D velocity 1.865 ± 0.067 mm/day: alert``."""
    parts = [k.words() for k in alarm.keys.values()]
    return "; ".join(parts) if parts else "no level evaluated"


def history_text(alarm: PointAlarms) -> str:
    """The levels reached, per key, in a sentence (times UTC): ``3D displacement: alert
    since 2026-10-18 06:00, alarm since 2026-11-08 11:00; 3D velocity: alert 2026-10-29
    05:00 to 2026-11-02 10:00 (2 episodes)`` (details in the alarm section's table)."""
    parts = []
    for k in alarm.keys.values():
        if not k.history:
            continue
        levels = []
        for h in k.history:
            when = (f"since {_time(h.first_exceeded)}" if h.exceeded_at_end
                    else f"{_time(h.first_exceeded)} to {_time(h.last_exceeded)}")
            episodes = f" ({h.episodes} episodes)" if h.episodes > 1 else ""
            levels.append(f"{h.level} {when}{episodes}")
        parts.append(f"{quantity_words(k.key)}: {', '.join(levels)}")
    return "; ".join(parts) + " (UTC)"


def quality_notes(analysis: RoverAnalysis, max_gaps: int = 8) -> list[str]:
    """Data-quality notes of one analysis, one sentence each: epochs and completeness,
    the quality filter, outliers, gaps, known and detected steps, and the analysis notes."""
    s = analysis.summary()
    notes = [f"Epochs: {s['epochs_used']} used of {s['epochs_received']} received from "
             f"{iso_text(s['first_epoch'])} to {iso_text(s['last_epoch'])} UTC"
             + (f"; {analysis.completeness.describe()} at the sampling period of "
                f"{analysis.completeness.expected_period_s / 60:g} min"
                if analysis.completeness is not None else "") + "."]
    notes.append(f"Quality filter: {analysis.quality.describe()}.")
    notes.append(f"Outliers: {s['outliers']} epoch{'s' if s['outliers'] != 1 else ''} removed "
                 f"as robust outliers (not used in any number or fit).")
    if analysis.gaps:
        listed = "; ".join(
            f"{iso_text(_iso(g.start))} to {iso_text(_iso(g.end))} "
            f"({g.duration_s / 86400:.1f} days, {g.missing_epochs} epochs missing)"
            for g in analysis.gaps[:max_gaps])
        more = f"; and {len(analysis.gaps) - max_gaps} more" if len(analysis.gaps) > max_gaps \
            else ""
        notes.append(f"Gaps: {len(analysis.gaps)} outage{'s' if len(analysis.gaps) > 1 else ''}"
                     f": {listed}{more}.")
    else:
        notes.append("Gaps: none.")
    if s["known_step_corrections_mm"]:
        notes.append("Known steps (announced events, base-station changes), offset removed "
                     "from the displacement: " + "; ".join(
                         f"{iso_text(c['time'])} (E {c['east']:+.1f}, N {c['north']:+.1f}, "
                         f"U {c['up']:+.1f} mm)" for c in s["known_step_corrections_mm"]) + ".")
    elif s["known_steps"]:
        notes.append("Known steps: " + ", ".join(map(iso_text, s["known_steps"])) + ".")
    else:
        notes.append("Known steps: none in the period.")
    if analysis.detected_steps:
        notes.append("Detected steps (no known event explains them; left in the "
                     "displacement, as they may be real motion): " + "; ".join(
                         f"{iso_text(_iso(st.time))} ({st.size_m * 1000:+.1f} ± "
                         f"{st.sigma_m * 1000:.1f} mm)" for st in analysis.detected_steps) + ".")
    else:
        notes.append("Detected steps: none.")
    notes += [n[0].upper() + n[1:] + ("" if n.endswith(".") else ".") for n in s["notes"]]
    return notes


def _iso(t) -> str:
    return str(np.datetime_as_string(np.datetime64(t, "s"), unit="s")) + "Z"


def _time(t) -> str:
    """A UTC datetime64 as ``2026-10-18 06:00`` (the tables' times)."""
    return iso_text(_iso(t))


# ----------------------------------------------------------------------------- alarms

HISTORY_COLUMNS = (  # widths fit "gnss-accelerating-003" and "2026-10-18 06:00" at 7 pt
    Column("device", "Device", 0.171, "left"),
    Column("quantity", "Quantity", 0.141, "left"),
    Column("level", "Level", 0.088, "left"),
    Column("threshold", "Threshold", 0.116),
    Column("first", "First reached\n(UTC)", 0.138, "center"),
    Column("last", "Last reached\n(UTC)", 0.138, "center"),
    Column("peak", "Peak", 0.123),
    Column("episodes", "Episodes", 0.085),
)

LEVEL_COLUMNS = (
    Column("quantity", "Quantity", 0.20, "left"),
    Column("levels", "Levels", 0.30, "left"),
    Column("source", "Set on", 0.16, "left"),
    Column("rovers", "Rovers", 0.34, "left"),
)


def key_order(key: str) -> tuple[int, int]:
    """Displacement before velocity, 3D first, then the components in ``alarms``' order
    (the order ``PointAlarms.keys`` holds them); an unknown key last."""
    try:
        quantity, component = split_key(key)
    except ValueError:
        return len(QUANTITIES), 0
    return list(QUANTITIES).index(quantity), COMPONENTS.index(component)


def gnss_levels(entry: DeviceEntry) -> dict[str, dict[str, float]]:
    """The displacement and velocity levels that apply to the device (not a parameter's),
    in ``key_order``."""
    keys = [k for k in entry.alarm_levels if k.split(":")[0] in QUANTITIES
            and entry.alarm_levels[k]]
    return {k: entry.alarm_levels[k] for k in sorted(keys, key=key_order)}


def history_rows(data: ReportData) -> list[Row]:
    """The alarm history, per rover and level key (``PointAlarms.keys``' order) and level
    (ladder order): threshold, when first and last reached (or still reached), the peak
    value while reached and the number of separate episodes.  Rows are tinted by the level;
    the device is named on its first row only.  Rovers that reached no level have no row."""
    rows = []
    for e in data.analysed:
        alarm = e.analysis.alarm
        if alarm is None:
            continue
        first = True
        for k in alarm.keys.values():
            thresholds = dict(zip(k.levels.names, k.levels.thresholds))
            for h in k.history:
                rank = k.levels.names.index(h.level) + 1
                rows.append(Row(e.serial_number, {
                    "device": device_cell(e) if first else "",
                    "quantity": quantity_words(h.key),
                    "level": h.level,
                    "threshold": f"≥ {thresholds[h.level]:g} {h.unit}",
                    "first": _time(h.first_exceeded),
                    "last": "still reached" if h.exceeded_at_end else _time(h.last_exceeded),
                    "peak": value_text(h.peak_value, h.unit),
                    "episodes": str(h.episodes)}, h.level, rank))
                first = False
    return rows


def quiet_rovers(data: ReportData) -> list[DeviceEntry]:
    """Analysed rovers with levels evaluated that reached none of them in the period."""
    return [e for e in data.analysed
            if e.analysis.alarm is not None and not e.analysis.alarm.history]


def level_rows(data: ReportData) -> list[Row]:
    """The levels in force: one row per level key, ladder and where it is set (device,
    group or site), with the rovers it applies to (rovers sharing them share a row)."""
    groups: dict[tuple, list[DeviceEntry]] = {}
    for e in data.analysed:
        for key, ladder in gnss_levels(e).items():
            unit = QUANTITIES[key.split(":")[0]]
            text = ", ".join(f"{name} ≥ {v:g}" for name, v in ladder.items()) + f" {unit}"
            source = e.alarm_level_sources.get(key, "")
            groups.setdefault((key_order(key), key, text, source), []).append(e)
    rows = []
    for (_, key, text, source), entries in sorted(groups.items(), key=lambda g: g[0][:2]):
        names = ", ".join(_rover_name(e, key) for e in entries)
        rows.append(Row(entries[0].serial_number, {
            "quantity": quantity_words(key), "levels": text,
            "source": source or "-", "rovers": names}))
    return rows


def _rover_name(entry: DeviceEntry, key: str) -> str:
    """A rover in the levels table; a key that could not be evaluated says why."""
    alarm = entry.analysis.alarm
    if alarm is not None and key in alarm.keys:
        return entry.label
    component = key.partition(":")[2]
    why = "no azimuth set" if component in ("along", "across") else "not evaluated"
    return f"{entry.label} ({why})"


def rovers_without_levels(data: ReportData) -> list[DeviceEntry]:
    return [e for e in data.analysed if not gnss_levels(e)]

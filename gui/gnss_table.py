"""The velocity table of the GNSS view, with the numbers of ``devmon analyze``
(``RoverAnalysis.summary()``) at the CLI's precision, rows tinted by alarm level, each
rover's H, V and 3D lights in words in its level's tooltip (the table has no room for
more at 1400 px), and the alarm history of the rover selected in it.
``mark_rover_levels`` gives the GNSS tab's rover list each rover's level now and its
lights (an icon, and words in its tooltip), before any analysis."""

from __future__ import annotations

import html
from collections.abc import Callable
from typing import NamedTuple

import numpy as np
from PySide6.QtCore import Qt
from PySide6.QtGui import QBrush, QColor
from PySide6.QtWidgets import (QAbstractItemView, QHeaderView, QLabel, QListWidget,
                               QScrollArea, QTableWidget, QTableWidgetItem)

from analysis import figures
from analysis.alarms import direction_lights, quantity_words, value_text
from analysis.pipeline import RECENT_WINDOW_DAYS, RoverAnalysis, plus_minus
from gui.browser import LIGHTS_ICON_SIZE, lights_icon, lights_tip
from gui.compact_header import CompactHeader
from gui.gnss_controls import ALARM_TINTS, METHOD_SHORT, SORT_ROLE


# ----------------------------------------------------------------------------- formatting

def _when(iso: str, tz_name: str | None) -> str:
    """A UTC time of ``summary()`` (``2026-01-13T01:42:00Z``) as the figures write it:
    ``2026-01-13 02:42 CET`` in the site's zone."""
    return figures.format_time(np.datetime64(iso.rstrip("Z")), tz_name)


def _alarm_text(analysis: RoverAnalysis) -> str:
    alarm = analysis.alarm
    if alarm is None:
        return "no levels set"
    return alarm.overall or "below levels"  # by which quantity: in the cell's tooltip



def _time(t, tz_name: str | None) -> str:
    """An alarm history time (UTC datetime64) as the figures write it, in the site's zone."""
    return figures.format_time(np.datetime64(t, "s"), tz_name)


def alarm_history_lines(analysis: RoverAnalysis, tz_name: str | None) -> list[str]:
    """Each level reached in the period, one line each: ``alarm (3D displacement, ≥ 25 mm):
    first reached 2026-11-08 12:00 CET, still reached; peak 51.7 mm``."""
    alarm = analysis.alarm
    if alarm is None:
        return []
    lines = []
    for key in alarm.keys.values():
        thresholds = dict(zip(key.levels.names, key.levels.thresholds))
        for h in key.history:
            last = ("still reached" if h.exceeded_at_end
                    else f"last reached {_time(h.last_exceeded, tz_name)}")
            episodes = f", {h.episodes} episodes" if h.episodes > 1 else ""
            lines.append(f"{h.level} ({quantity_words(h.key)}, ≥ {thresholds[h.level]:g} "
                         f"{h.unit}): first reached {_time(h.first_exceeded, tz_name)}, "
                         f"{last}{episodes}; peak {value_text(h.peak_value, h.unit)}")
    return lines


def alarm_values_lines(analysis: RoverAnalysis) -> list[str]:
    """Each evaluated level key now, in words: ``3D velocity 1.865 ± 0.067 mm/day: alert``."""
    alarm = analysis.alarm
    if alarm is None:
        return []
    return [k.words() for k in alarm.keys.values()]


def alarm_tooltip(analysis: RoverAnalysis, tz_name: str | None) -> str:
    """The alarm cell's tooltip: the level reached and by which quantity, each key's value
    now (``PointAlarms.describe()`` in words), the history of the levels reached and the
    rule they are judged by."""
    alarm = analysis.alarm
    if alarm is None:
        return "No alarm levels set for this rover (set them with `devmon alarms`)."
    head = (f"Reached now: {alarm.overall} ({quantity_words(alarm.overall_quantity)})"
            if alarm.overall else "Below all levels now")
    history = alarm_history_lines(analysis, tz_name)
    lights = lights_tip(direction_lights(alarm)).splitlines()
    return "\n".join([head, "", "Lights:", *(f"  {line}" for line in lights),
                      "", "Now:", *(f"  {line}" for line in alarm_values_lines(analysis)),
                      "", "History:" if history else "History: no level reached in the period",
                      *(f"  {line}" for line in history),
                      "", f"Rule: a level counts as reached when {alarm.rule.describe()}."])


def forecast_text(summary: dict, tz_name: str | None) -> str:
    """One sentence about the inverse-velocity failure forecast, times in the site's zone."""
    forecast = summary.get("forecast")
    if not forecast:
        return "No failure forecast: the inverse velocity could not be computed."
    if not forecast["supported"]:
        return f"No failure forecast: {forecast['reason']}"
    lo, hi = (_when(x, tz_name) for x in forecast["interval"])
    return (f"Failure forecast (inverse velocity): {_when(forecast['failure_time'], tz_name)}"
            f", 95 % interval {lo} .. {hi}, R² {forecast['r2']:.2f}")


def linear_forecast_text(summary: dict, tz_name: str | None) -> str:
    """The classic linear inverse-velocity forecast (``analysis.forecast_linear``), times
    in the site's zone, and whether it agrees with the Voight fit; empty without one."""
    linear = summary.get("linear_forecast")
    if not linear:
        return ""
    state = linear["state"]
    if state == "dated":
        lo, hi = (_when(x, tz_name) for x in linear["interval"])
        what = (f"zero at {_when(linear['failure_time'], tz_name)}, "
                f"{100 * linear['confidence']:g} % interval {lo} .. {hi}")
    elif state == "imminent":
        what = (f"the line reached zero at {_when(linear['failure_time'], tz_name)}, before "
                f"the last data: failure may be imminent (a safe-side signal, not a date)")
    else:
        what = linear["statement"]
    return (f"Linear inverse velocity (Fukuzono): {what}\n"
            f"{linear['agreement']['text']}")


def _linear_cell(summary: dict, tz_name: str | None) -> tuple[str, object] | None:
    """When the Voight fit gives no date: the linear forecast's warning on two lines
    (its date, "imminent" or "<= N days"), None when it gives none."""
    linear = summary.get("linear_forecast")
    if not linear or linear["state"] not in ("dated", "imminent", "accelerating, not dated"):
        return None
    if linear["state"] == "dated":
        return (_when(linear["failure_time"], tz_name).replace(" ", "\n", 1) + " (linear)",
                linear["failure_time"])
    if linear["state"] == "imminent":
        return "imminent\n(linear)", linear["failure_time"]
    n = max(round(linear["within_days"]), 1)
    return f"≤ {n} day{'s' * (n != 1)}\n(linear)", None


def _forecast_cell(summary: dict, tz_name: str | None) -> tuple[str, object]:
    """The forecast time on two lines (date, then time and zone): the column stays narrow.
    Without a Voight date, the linear forecast's warning when it gives one."""
    forecast = summary.get("forecast")
    if not forecast or not forecast["supported"]:
        return _linear_cell(summary, tz_name) or ("none", None)
    return (_when(forecast["failure_time"], tz_name).replace(" ", "\n", 1),
            forecast["failure_time"])


def _first(pair):
    return pair[0] if pair else None


def _velocity(component: str, signed: bool):
    """Velocity cell: mm/day over mm/yr (the units in the header), each ± 1σ, at the CLI's
    precision; sorted by mm/day."""
    def cell(a, s, tz):
        per_day = s["velocity_mm_per_day"].get(component)
        per_yr = s["velocity_mm_per_yr"].get(component)
        if not per_day:
            return "-", None
        return (f"{plus_minus(per_day, 3, signed)}\n{plus_minus(per_yr, 1, signed)}",
                per_day[0])
    return cell


def _recent_velocity(a, s, tz):
    """The current 3D velocity (the last 7 days, the value the 3D velocity levels judge)
    ± 1σ, mm/day; sorted by mm/day."""
    pair = s["recent_velocity_mm_per_day"].get("3d")
    if not pair:
        return "-", None
    return _stacked(plus_minus(pair, 3, False)), pair[0]


def _stacked(value: str) -> str:
    """``2.555 ± 0.099`` as two lines, the uncertainty under the value: a column of one
    number is then as narrow as the two-line velocity columns beside it."""
    return value.replace(" ± ", "\n± ")


class Column(NamedTuple):
    """One column of the velocity table.  The header is short, units on a line of their
    own, so that the table fits a laptop's window; ``keys`` name what the cell's lines show
    in ``rows()`` (one key: the whole cell), whatever the header's wording."""

    keys: tuple[str, ...]
    header: str
    tip: str
    cell: Callable  # (analysis, summary, tz) -> (text, sort key)
    numeric: bool = False


#: The velocity table.  Every number is from ``RoverAnalysis.summary()``, at the precision
#: ``devmon analyze`` prints.
TABLE_COLUMNS = (
    Column(("Rover",), "Rover", "display name and serial number; the notes of the analysis "
           "in the tooltip",
           lambda a, s, tz: (f"{a.display_name}\n{a.serial_number}", a.display_name.lower())),
    Column(("Method", "Frame"), "Method\nframe", "velocity estimator (first line) and frame "
           "of the displacements and velocities (second line)",
           lambda a, s, tz: (f"{METHOD_SHORT.get(s['method'], s['method'])}\n{s['frame']}",
                             (s["method"], s["frame"]))),
    Column(("Horizontal velocity",), "Horizontal\nmm/day\nmm/yr",
           "horizontal velocity over the period ± 1σ: mm/day (first line), mm/yr (second)",
           _velocity("horizontal", False), True),
    Column(("Along azimuth",), "Along azim.\nmm/day\nmm/yr",
           "velocity along the device azimuth over the period ± 1σ (positive towards the "
           "azimuth): mm/day (first line), mm/yr (second)", _velocity("along", True), True),
    Column((f"3D velocity\nlast {RECENT_WINDOW_DAYS:g} days\nmm/day",),
           f"3D velocity\nlast {RECENT_WINDOW_DAYS:g} days\nmm/day",
           f"3D velocity over the last {RECENT_WINDOW_DAYS:g} days ± 1σ (the noise measured "
           f"on the series allowed for), mm/day: the value the 3D velocity levels judge",
           _recent_velocity, True),
    Column(("3D displ.\nmm",), "3D\ndispl.\nmm",
           "3D displacement at the end of the period from the reference, mm",
           lambda a, s, tz: (f"{s['displacement_mm']['3d']:.1f}", s["displacement_mm"]["3d"]),
           True),
    Column(("Acceleration\nmm/day²",), "Accel.\nmm/day²",
           "acceleration along the motion ± 1σ, mm/day²",
           lambda a, s, tz: (_stacked(plus_minus(s["acceleration_mm_per_day2"], 4)),
                             _first(s["acceleration_mm_per_day2"])), True),
    Column(("Alarm level",), "Alarm level",
           "alarm level reached now; by which quantity, the values, the history and the rule "
           "in the cell's tooltip (the history of the selected rover under the table)",
           lambda a, s, tz: (_alarm_text(a), (a.alarm.rank if a.alarm else 0))),
    Column(("Failure forecast",), "Failure\nforecast",
           "inverse-velocity failure forecast, in the site's time zone; the interval and R² "
           "in the cell's tooltip", lambda a, s, tz: _forecast_cell(s, tz)),
)
ROVER_COLUMN, METHOD_COLUMN = 0, 1
ALARM_COLUMN, FORECAST_COLUMN = len(TABLE_COLUMNS) - 2, len(TABLE_COLUMNS) - 1


class _SortItem(QTableWidgetItem):
    """A read-only table cell that sorts by a number or time rather than by its text."""

    def __init__(self, text: str, key=None) -> None:
        super().__init__(text)
        self.setData(SORT_ROLE, key)
        self.setFlags(self.flags() & ~Qt.ItemFlag.ItemIsEditable)

    def __lt__(self, other) -> bool:
        a, b = self.data(SORT_ROLE), other.data(SORT_ROLE)
        if a is None or b is None:  # a missing number sorts after every number
            return a is not None
        return a < b


class VelocityTable(QTableWidget):
    """One row per analysed rover, sortable by any column, tinted by its alarm level.  It
    fits the window: numbers and words take their width, the rover's name the rest, elided in
    the middle (whole in its tooltip) when short of room."""

    def __init__(self, parent=None) -> None:
        super().__init__(0, len(TABLE_COLUMNS), parent)
        self.setHorizontalHeader(CompactHeader(Qt.Orientation.Horizontal, self))
        self.horizontalHeader().setSectionsClickable(True)  # a header Qt did not make is not
        for col, column in enumerate(TABLE_COLUMNS):
            item = QTableWidgetItem(column.header)
            item.setToolTip(column.tip)
            self.setHorizontalHeaderItem(col, item)
        self.setSortingEnabled(True)
        self.setSelectionBehavior(QAbstractItemView.SelectionBehavior.SelectRows)
        self.setWordWrap(False)  # lines are explicit; a line too long is elided, not wrapped
        self.setTextElideMode(Qt.TextElideMode.ElideMiddle)  # "Illgrab…creep 02": names share
        # their site's prefix, the end tells them apart
        self.verticalHeader().setVisible(False)
        header = self.horizontalHeader()
        header.setSectionResizeMode(QHeaderView.ResizeMode.ResizeToContents)
        header.setSectionResizeMode(ROVER_COLUMN, QHeaderView.ResizeMode.Stretch)
        header.setDefaultAlignment(Qt.AlignmentFlag.AlignCenter)
        self.sortByColumn(0, Qt.SortOrder.AscendingOrder)

    def fill(self, analyses: list[RoverAnalysis],
             tz_of: Callable[[str], str | None]) -> None:
        """Rows of ``analyses``; ``tz_of(serial)`` is the site timezone of a rover."""
        self.setSortingEnabled(False)
        self.setRowCount(len(analyses))
        for row, analysis in enumerate(analyses):
            self._fill_row(row, analysis, analysis.summary(), tz_of(analysis.serial_number))
        self.setSortingEnabled(True)
        self._hide_what_every_row_says()
        self.resizeRowsToContents()

    def _hide_what_every_row_says(self) -> None:
        """The method and frame column only when rows differ in them: the same words on
        every row are said once under the table (the view's line "analysed in local ENU,
        ..., MIDAS velocities"), and the rover's name gets their room."""
        said = {self.item(r, METHOD_COLUMN).text() for r in range(self.rowCount())}
        self.setColumnHidden(METHOD_COLUMN, len(said) <= 1)

    def _fill_row(self, row: int, analysis: RoverAnalysis, summary: dict,
                  tz_name: str | None) -> None:
        rank = analysis.alarm.rank if analysis.alarm else 0
        tint = QBrush(QColor(ALARM_TINTS[min(rank, len(ALARM_TINTS)) - 1])) if rank else None
        for col, column in enumerate(TABLE_COLUMNS):
            text, key = column.cell(analysis, summary, tz_name)
            item = _SortItem(text, key)
            if column.numeric:
                item.setTextAlignment(Qt.AlignmentFlag.AlignRight |
                                      Qt.AlignmentFlag.AlignVCenter)
            if tint is not None:
                item.setBackground(tint)
            self.setItem(row, col, item)
        notes = "\n".join(summary["notes"]) or "no notes"
        self.item(row, ROVER_COLUMN).setToolTip(
            f"{analysis.display_name}\n{analysis.serial_number}\n\n{notes}")
        self.item(row, FORECAST_COLUMN).setToolTip("\n\n".join(
            x for x in (forecast_text(summary, tz_name),
                        linear_forecast_text(summary, tz_name)) if x))
        self.item(row, ALARM_COLUMN).setToolTip(alarm_tooltip(analysis, tz_name))

    def serial_at(self, row: int) -> str | None:
        """The serial number of the rover in ``row`` as sorted now."""
        item = self.item(row, ROVER_COLUMN)
        return item.text().rsplit("\n", 1)[-1] if item is not None else None

    def selected_serial(self) -> str | None:
        rows = {i.row() for i in self.selectedIndexes()}
        return self.serial_at(min(rows)) if rows else None

    def row_of(self, serial: str) -> int | None:
        return next((r for r in range(self.rowCount()) if self.serial_at(r) == serial), None)

    def rows(self) -> list[dict[str, str]]:
        """The table as shown, each row by its columns' keys (a column of several keys
        gives one line to each) (tests; copying)."""
        return [self._row(r) for r in range(self.rowCount())]

    def _row(self, row: int) -> dict[str, str]:
        out = {}
        for col, column in enumerate(TABLE_COLUMNS):
            text = self.item(row, col).text()
            lines = text.split("\n") if len(column.keys) > 1 else [text]
            out.update(zip(column.keys, lines))
        return out


#: Where ``mark_rover_levels`` keeps a rover item's own tooltip (the list's, before the
#: levels were added to it), so that marking again does not add them twice.
_OWN_TIP_ROLE = Qt.ItemDataRole.UserRole + 20


def mark_rover_levels(rover_list: QListWidget, points: list, lights: dict | None) -> None:
    """The GNSS tab's rover list (items carrying their serial number as user data), each
    rover with its lights as an icon (boxes H, V, 3D in their levels' colours) and, added
    to its tooltip, the level it is at now and each light in words.  ``points``: the
    rovers with levels (``browse.levelled_points``); ``lights``: as the window judged
    them (None: not yet).  The items' text and check state are left alone."""
    by_serial = {p.serial_number: p for p in points}
    rover_list.setIconSize(LIGHTS_ICON_SIZE)
    # an icon or a tooltip is no change of the rovers checked: the list's itemChanged, which
    # the GNSS tab takes as one, would analyse them all again
    was_blocked = rover_list.blockSignals(True)
    try:
        _mark(rover_list, by_serial, lights)
    finally:
        rover_list.blockSignals(was_blocked)
    rover_list.viewport().update()


def _mark(rover_list: QListWidget, by_serial: dict, lights: dict | None) -> None:
    """Each item's icon and tooltip (its own tooltip kept apart, so marking again does not
    add the levels twice)."""
    for row in range(rover_list.count()):
        item = rover_list.item(row)
        own = item.data(_OWN_TIP_ROLE)
        if own is None:
            own = item.toolTip()
            item.setData(_OWN_TIP_ROLE, own)
        point = by_serial.get(item.data(Qt.ItemDataRole.UserRole))
        item.setIcon(lights_icon(None if point is None or lights is None
                                 else lights.get(point.serial_number)))
        item.setToolTip(f"{own}\n\n{_levels_words(point, lights)}")


def _levels_words(point, lights: dict | None) -> str:
    """A rover's level now and its lights, in words, for its tooltip in the rover list."""
    if point is None:
        return "No alarm levels set for this rover (Alarms → Alarm levels… sets them)."
    now = (f"alarm level now: {point.level} (by {quantity_words(point.quantity)})"
           if point.level else "alarm level now: none, below its levels")
    if lights is None or point.serial_number not in lights:
        return f"{now}\nLights: judging…"
    return f"{now}\n{lights_tip(lights[point.serial_number])}"


class AlarmHistoryPanel(QScrollArea):
    """The alarm history of one rover, under the velocity table: its levels now and each
    level reached in the period (when first and last reached, peak, episodes), rows tinted
    by the level, and the rule.  ``text()`` is the plain text shown (tests; copying)."""

    COLUMNS = ("Quantity", "Level", "Threshold", "First reached", "Last reached", "Peak",
               "Episodes")

    def __init__(self, parent=None) -> None:
        super().__init__(parent)
        self.label = QLabel()
        self.label.setTextFormat(Qt.TextFormat.RichText)
        self.label.setWordWrap(True)
        self.label.setAlignment(Qt.AlignmentFlag.AlignTop | Qt.AlignmentFlag.AlignLeft)
        self.label.setTextInteractionFlags(Qt.TextInteractionFlag.TextSelectableByMouse)
        self.label.setContentsMargins(6, 4, 6, 4)
        self.setWidget(self.label)
        self.setWidgetResizable(True)
        self.setFrameShape(QScrollArea.Shape.NoFrame)
        self._plain = ""
        self.show_analysis(None)

    def text(self) -> str:
        return self._plain

    def show_analysis(self, analysis: RoverAnalysis | None, tz_name: str | None = None
                      ) -> None:
        if analysis is None:
            self._set("<i>Select a rover in the table to see its alarm history.</i>",
                      "Select a rover in the table to see its alarm history.")
            return
        name = f"{analysis.display_name} ({analysis.serial_number})"
        alarm = analysis.alarm
        if alarm is None:
            text = f"Alarm history of {name}: no alarm levels set (`devmon alarms`)."
            self._set(f"<b>Alarm history of {html.escape(name)}</b>: no alarm levels set "
                      f"(set them with <code>devmon alarms</code>).", text)
            return
        now = (f"reached now: {alarm.overall} ({quantity_words(alarm.overall_quantity)})"
               if alarm.overall else "below all levels now")
        values = alarm_values_lines(analysis)
        rows = self._rows(analysis, tz_name)
        rule = f"Rule: a level counts as reached when {alarm.rule.describe()}."
        plain = [f"Alarm history of {name}: {now}", "Now: " + "; ".join(values)]
        parts = [f"<p><b>Alarm history of {html.escape(name)}</b>: {html.escape(now)}<br>"
                 f"Now: {html.escape('; '.join(values))}</p>"]
        if rows:
            head = "".join(f"<th align='left'>{c}</th>" for c in self.COLUMNS)
            body = "".join(
                f"<tr style='background-color:{tint}'>"
                + "".join(f"<td>{html.escape(cell)}</td>" for cell in cells) + "</tr>"
                for cells, tint in rows)
            parts.append(f"<table cellspacing='0' cellpadding='3'><tr>{head}</tr>{body}"
                         f"</table>")
            plain += ["\t".join(self.COLUMNS)] + ["\t".join(cells) for cells, _ in rows]
        else:
            parts.append("<p><i>No level reached in the period.</i></p>")
            plain.append("No level reached in the period.")
        parts.append(f"<p style='color:#616161'>{html.escape(rule)}</p>")
        plain.append(rule)
        self._set("".join(parts), "\n".join(plain))

    @staticmethod
    def _rows(analysis: RoverAnalysis, tz_name: str | None) -> list[tuple[list[str], str]]:
        out = []
        for key in analysis.alarm.keys.values():
            thresholds = dict(zip(key.levels.names, key.levels.thresholds))
            for h in key.history:
                rank = key.levels.names.index(h.level) + 1
                out.append(([quantity_words(h.key), h.level,
                             f"≥ {thresholds[h.level]:g} {h.unit}",
                             _time(h.first_exceeded, tz_name),
                             "still reached" if h.exceeded_at_end
                             else _time(h.last_exceeded, tz_name),
                             value_text(h.peak_value, h.unit), str(h.episodes)],
                            ALARM_TINTS[min(rank, len(ALARM_TINTS)) - 1]))
        return out

    def _set(self, rich: str, plain: str) -> None:
        self.label.setText(rich)
        self._plain = plain

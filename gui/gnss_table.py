"""The velocity table of the GNSS view, with the numbers of ``devmon analyze``
(``RoverAnalysis.summary()``) at the CLI's precision, rows tinted by alarm level."""

from __future__ import annotations

from collections.abc import Callable

import numpy as np
from PySide6.QtCore import Qt
from PySide6.QtGui import QBrush, QColor
from PySide6.QtWidgets import QAbstractItemView, QHeaderView, QTableWidget, QTableWidgetItem

from analysis import figures
from analysis.pipeline import RoverAnalysis, plus_minus
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


def _forecast_cell(summary: dict, tz_name: str | None) -> tuple[str, object]:
    forecast = summary.get("forecast")
    if not forecast or not forecast["supported"]:
        return "none", None
    return _when(forecast["failure_time"], tz_name), forecast["failure_time"]


def _first(pair):
    return pair[0] if pair else None


def _velocity(component: str, signed: bool):
    """Velocity cell: mm/day over mm/yr, each ± 1σ, at the CLI's precision; sorted by
    mm/day."""
    def cell(a, s, tz):
        per_day = s["velocity_mm_per_day"].get(component)
        per_yr = s["velocity_mm_per_yr"].get(component)
        if not per_day:
            return "-", None
        return (f"{plus_minus(per_day, 3, signed)} mm/day\n{plus_minus(per_yr, 1, signed)} mm/yr",
                per_day[0])
    return cell


#: The velocity table: (header, tooltip, cell(analysis, summary, tz) -> (text, sort key)).
#: Every number is from ``RoverAnalysis.summary()``, at the precision ``devmon analyze``
#: prints.
TABLE_COLUMNS = (
    ("Rover", "display name and serial number; the notes of the analysis in the tooltip",
     lambda a, s, tz: (f"{a.display_name}\n{a.serial_number}", a.display_name.lower())),
    ("Method", "velocity estimator",
     lambda a, s, tz: (METHOD_SHORT.get(s["method"], s["method"]), s["method"])),
    ("Frame", "frame of the displacements and velocities",
     lambda a, s, tz: (s["frame"], s["frame"])),
    ("Horizontal velocity", "horizontal velocity over the period ± 1σ",
     _velocity("horizontal", False)),
    ("Along azimuth", "velocity along the device azimuth over the period ± 1σ (positive "
                      "towards the azimuth)", _velocity("along", True)),
    ("3D displ.\nmm", "3D displacement at the end of the period from the reference, mm",
     lambda a, s, tz: (f"{s['displacement_mm']['3d']:.1f}", s["displacement_mm"]["3d"])),
    ("Acceleration\nmm/day²", "acceleration along the motion ± 1σ, mm/day²",
     lambda a, s, tz: (plus_minus(s["acceleration_mm_per_day2"], 4),
                       _first(s["acceleration_mm_per_day2"]))),
    ("Alarm level", "alarm level reached now; by which quantity in the cell's tooltip",
     lambda a, s, tz: (_alarm_text(a), (a.alarm.rank if a.alarm else 0))),
    ("Failure forecast", "inverse-velocity failure forecast, in the site's time zone; the "
                         "interval and R² in the cell's tooltip",
     lambda a, s, tz: _forecast_cell(s, tz)),
)
NUMERIC_COLUMNS = range(3, 7)


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
    """One row per analysed rover, sortable by any column, tinted by its alarm level."""

    def __init__(self, parent=None) -> None:
        super().__init__(0, len(TABLE_COLUMNS), parent)
        for col, (header, tip, _) in enumerate(TABLE_COLUMNS):
            item = QTableWidgetItem(header)
            item.setToolTip(tip)
            self.setHorizontalHeaderItem(col, item)
        self.setSortingEnabled(True)
        self.setSelectionBehavior(QAbstractItemView.SelectionBehavior.SelectRows)
        self.setWordWrap(True)
        self.verticalHeader().setVisible(False)
        header = self.horizontalHeader()
        header.setSectionResizeMode(QHeaderView.ResizeMode.Interactive)
        header.setStretchLastSection(True)
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
        self.resizeColumnsToContents()
        frame_col = [c[0] for c in TABLE_COLUMNS].index("Frame")
        self.setColumnWidth(frame_col, min(self.columnWidth(frame_col), 150))
        self.resizeRowsToContents()

    def _fill_row(self, row: int, analysis: RoverAnalysis, summary: dict,
                  tz_name: str | None) -> None:
        rank = analysis.alarm.rank if analysis.alarm else 0
        tint = QBrush(QColor(ALARM_TINTS[min(rank, len(ALARM_TINTS)) - 1])) if rank else None
        for col, (_, _, cell) in enumerate(TABLE_COLUMNS):
            text, key = cell(analysis, summary, tz_name)
            item = _SortItem(text, key)
            if col in NUMERIC_COLUMNS:
                item.setTextAlignment(Qt.AlignmentFlag.AlignRight |
                                      Qt.AlignmentFlag.AlignVCenter)
            if tint is not None:
                item.setBackground(tint)
            self.setItem(row, col, item)
        self.item(row, 0).setToolTip("\n".join(summary["notes"]) or "no notes")
        self.item(row, len(TABLE_COLUMNS) - 1).setToolTip(forecast_text(summary, tz_name))
        if analysis.alarm is not None:
            self.item(row, len(TABLE_COLUMNS) - 2).setToolTip(analysis.alarm.describe())

    def rows(self) -> list[dict[str, str]]:
        """The table as shown, each row by column header (tests; copying)."""
        headers = [c[0] for c in TABLE_COLUMNS]
        return [{h: self.item(r, c).text() for c, h in enumerate(headers)}
                for r in range(self.rowCount())]

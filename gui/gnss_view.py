"""The GNSS deformation view: displacement, trajectory, velocity, plan view, inverse velocity
and a velocity table of the rovers the user checks.

Every number comes from ``devmon_sync.analyze.analyze_device`` (the call ``devmon analyze``
makes, so the table shows the command's numbers) and every plot from the builders of
``analysis.figures`` (so reports draw the same figures).  This module gathers the user's
choices, runs the analyses on the window's ``TaskRunner`` (slot ``"gnss"``: a newer request
supersedes an older one, so a slow answer never overwrites a newer one) and shows what comes
back.  Invalid choices (an unreadable EPSG code, a reference that is not a date) are reported
under their field with the analysis' own message, and the plots of the last run stay.
"""

from __future__ import annotations

import logging
from collections.abc import Callable
from dataclasses import dataclass, field
from datetime import datetime, timezone

import numpy as np
from matplotlib.backends.backend_qtagg import FigureCanvasQTAgg, NavigationToolbar2QT
from matplotlib.figure import Figure
from PySide6.QtCore import QDateTime, Qt, QTimer, QTimeZone, Signal
from PySide6.QtGui import QBrush, QColor
from PySide6.QtWidgets import (QAbstractItemView, QCheckBox, QComboBox, QDateTimeEdit,
                               QFormLayout, QGridLayout, QGroupBox, QHBoxLayout, QHeaderView,
                               QLabel, QLineEdit, QListWidget, QListWidgetItem, QProgressBar,
                               QPushButton, QScrollArea, QSizePolicy, QSplitter, QTableWidget,
                               QTableWidgetItem, QTabWidget, QVBoxLayout, QWidget)

from analysis import figures
from analysis.geodesy import geodetic_to_enu
from analysis.pipeline import AnalysisOptions, RoverAnalysis
from analysis.projections import project
from devmon_sync.analyze import analyze_device
from devmon_sync.store import Mirror, browse, queries
from gui.timefmt import local_text, zone_label
from gui.workers import TaskState

log = logging.getLogger(__name__)

#: (component key of the analysis and the figure builders, label of its checkbox)
COMPONENTS: tuple[tuple[str, str], ...] = (
    ("east", "East"), ("north", "North"), ("up", "Up"), ("horizontal", "2D (horizontal)"),
    ("3d", "3D"), ("along", "Along azimuth"), ("across", "Across azimuth"))
DEFAULT_COMPONENTS = ("east", "north", "up")
METHODS = (("midas", "MIDAS (robust)"), ("ols", "Least squares"))
METHOD_SHORT = {"midas": "MIDAS", "ols": "Least squares"}
ENU = "enu"
CUSTOM = "custom"
SLOT = "gnss"
DEBOUNCE_MS = 500  # pause after the last change of a control before analysing again
REFERENCE_HINT = "first, a date (2026-01-05) or a window 2026-01-01..2026-01-07, UTC"
CRS_HINT = "EPSG:32632 or a PROJ string"
#: Light row tints by the rank of the alarm level reached (1 = the first level): the text
#: stays readable, and the order follows figures.LEVEL_RAMP (amber, orange, red).
ALARM_TINTS = ("#fff1c2", "#ffd9bf", "#ffc7cc")
ERROR_STYLE = "color: #b71c1c;"
HINT_STYLE = "color: #616161;"
SORT_ROLE = Qt.ItemDataRole.UserRole + 1
FIGURE_TABS = (("displacement", "Displacement"), ("trajectory", "Trajectory"),
               ("velocity", "Velocity"), ("plan", "Plan view"),
               ("inverse", "Inverse velocity"))


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


# ----------------------------------------------------------------------------- formatting

def _pm(pair, digits: int, signed: bool = True) -> str:
    """``+1.234 ± 0.012`` as the CLI writes it; ``-`` when the number is missing."""
    if not pair:
        return "-"
    value, sigma = pair
    return f"{value:{'+' if signed else ''}.{digits}f} ± {sigma:.{digits}f}"


def _when(iso: str, tz_name: str | None) -> str:
    """A UTC time of ``summary()`` (``2026-01-13T01:42:00Z``) as the figures write it:
    ``2026-01-13 02:42 CET`` in the site's zone."""
    return figures.format_time(np.datetime64(iso.rstrip("Z")), tz_name)


def alarm_rank(alarm) -> int:  # an analysis.warning.AlarmState, or None
    """0 below every level (or none set), 1 at the first level, and so on."""
    if alarm is None or not alarm.overall or not alarm.overall_quantity:
        return 0
    quantity = getattr(alarm, alarm.overall_quantity, None)
    return quantity.rank if quantity is not None else 1


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
        return (f"{_pm(per_day, 3, signed)} mm/day\n{_pm(per_yr, 1, signed)} mm/yr",
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
     lambda a, s, tz: (_pm(s["acceleration_mm_per_day2"], 4),
                       _first(s["acceleration_mm_per_day2"]))),
    ("Alarm level", "alarm level reached now; by which quantity in the cell's tooltip",
     lambda a, s, tz: (_alarm_text(a), alarm_rank(a.alarm))),
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
        rank = alarm_rank(analysis.alarm)
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


# ----------------------------------------------------------------------------- figures

class FigurePane(QWidget):
    """One tab: a matplotlib canvas with its navigation toolbar, a placeholder while there
    is nothing to show, and a note line under the plot.

    Each new figure gets a new canvas and toolbar: a canvas sizes its figure to itself and
    to the screen's pixel ratio when it is made, and a toolbar's zoom history belongs to
    the figure it was made for, so swapping the figure of a live canvas would have to redo
    both by hand."""

    def __init__(self, placeholder: str, parent=None) -> None:
        super().__init__(parent)
        self.figure: Figure | None = None
        self.canvas: FigureCanvasQTAgg | None = None
        self.toolbar: NavigationToolbar2QT | None = None
        self.placeholder = QLabel(placeholder)
        self.placeholder.setAlignment(Qt.AlignmentFlag.AlignCenter)
        self.placeholder.setWordWrap(True)
        self.placeholder.setStyleSheet(HINT_STYLE)
        self.note = QLabel()
        self.note.setWordWrap(True)
        self.note.setTextInteractionFlags(Qt.TextInteractionFlag.TextSelectableByMouse)
        self.note.setStyleSheet("padding: 2px 6px; background: #f3f3f3; border-radius: 3px;")
        self.note.hide()
        self._layout = QVBoxLayout(self)
        self._layout.setContentsMargins(2, 2, 2, 2)
        self._layout.addWidget(self.placeholder, 1)
        self._layout.addWidget(self.note)

    def set_figure(self, figure: Figure | None, placeholder: str = "") -> None:
        """Show ``figure``, or (None) the placeholder text."""
        for widget in (self.toolbar, self.canvas):
            if widget is not None:
                self._layout.removeWidget(widget)
                widget.hide()
                widget.deleteLater()
        self.canvas = self.toolbar = None
        self.figure = figure
        if figure is None:
            if placeholder:
                self.placeholder.setText(placeholder)
            self.placeholder.show()
            return
        self.placeholder.hide()
        self.canvas = FigureCanvasQTAgg(figure)
        self.canvas.setSizePolicy(QSizePolicy.Policy.Expanding, QSizePolicy.Policy.Expanding)
        self.toolbar = NavigationToolbar2QT(self.canvas, self)
        self._layout.insertWidget(0, self.toolbar)
        self._layout.insertWidget(1, self.canvas, 1)
        # no draw here: the canvas draws once the layout has given it its size (drawing at
        # the figure's own size first would cost a second full draw on the GUI thread)

    def set_note(self, text: str) -> None:
        self.note.setText(text)
        self.note.setVisible(bool(text))


# ----------------------------------------------------------------------------- controls

def _hint_label(text: str = "", style: str = HINT_STYLE) -> QLabel:
    label = QLabel(text)
    label.setWordWrap(True)
    label.setStyleSheet(style)
    label.setTextInteractionFlags(Qt.TextInteractionFlag.TextSelectableByMouse)
    label.setVisible(bool(text))
    return label


def _error_label() -> QLabel:
    return _hint_label(style=ERROR_STYLE)


def _is_projection_id(frame: str) -> bool:
    """A site projection id (``101``), as ``Frame.resolve`` tells them from EPSG codes."""
    return frame.isdigit() and len(frame) < 4


class AnalysisControls(QWidget):
    """The user's choices: rovers, frame, reference, method, components and period.

    ``changed(valid)`` says that the analysis choices changed (the view re-analyses after a
    pause when they are valid, and forgets a pending run when not); ``components_changed``
    that only the plotted components did (a redraw, no new analysis).  ``request()`` turns
    the choices into a ``GnssRequest``, validated by ``AnalysisOptions.build``, whose
    messages are written for users."""

    changed = Signal(bool)
    components_changed = Signal()
    analyse_clicked = Signal()

    def __init__(self, settings=None, parent=None) -> None:
        super().__init__(parent)
        self.settings = settings
        self.devices: dict[str, queries.GnssDevice] = {}
        layout = QVBoxLayout(self)
        layout.setContentsMargins(4, 4, 4, 4)
        layout.addWidget(self._rovers_box(), 1)
        layout.addWidget(self._frame_box())
        layout.addWidget(self._options_box())
        layout.addWidget(self._components_box())
        layout.addWidget(self._period_box())
        self.analyse_button = QPushButton("Analyse")
        self.analyse_button.setToolTip("Analyse the checked rovers now (a change of the "
                                       "choices above re-analyses them after a moment)")
        layout.addWidget(self.analyse_button)
        self._restore()
        # a remembered site projection (an id) can only be chosen once a rover of that site
        # is checked: it waits here until then, or until the user picks another frame
        saved = str(self._setting("frame", ENU) or ENU)
        self._pending_frame = saved if _is_projection_id(saved) else None
        self._update_frame_choices(saved)
        self._connect()

    # ------------------------------------------------------------------ building

    def _rovers_box(self) -> QGroupBox:
        box = QGroupBox("Rovers")
        self.rover_list = QListWidget()
        self.rover_list.setSelectionMode(QAbstractItemView.SelectionMode.NoSelection)
        self.rover_list.setTextElideMode(Qt.TextElideMode.ElideRight)
        self.rover_list.setHorizontalScrollBarPolicy(Qt.ScrollBarPolicy.ScrollBarAlwaysOff)
        self.rover_list.setMinimumHeight(110)
        self.all_button, self.none_button = QPushButton("Check all"), QPushButton("None")
        buttons = QHBoxLayout()
        buttons.addWidget(self.all_button)
        buttons.addWidget(self.none_button)
        buttons.addStretch(1)
        layout = QVBoxLayout(box)
        layout.addWidget(self.rover_list, 1)
        layout.addLayout(buttons)
        return box

    def _frame_box(self) -> QGroupBox:
        box = QGroupBox("Frame")
        self.frame_combo = QComboBox()
        self.frame_combo.setSizeAdjustPolicy(
            QComboBox.SizeAdjustPolicy.AdjustToMinimumContentsLengthWithIcon)
        self.frame_combo.setMinimumContentsLength(16)
        self.crs_edit = QLineEdit()
        self.crs_edit.setPlaceholderText(CRS_HINT)
        self.crs_edit.setToolTip("A projected coordinate reference system: an EPSG code "
                                 "(EPSG:32632 or 32632) or a PROJ string (+proj=tmerc …); "
                                 "press Enter to analyse")
        self.crs_edit.setClearButtonEnabled(True)
        self.frame_message = _error_label()
        layout = QVBoxLayout(box)
        layout.addWidget(self.frame_combo)
        layout.addWidget(self.crs_edit)
        layout.addWidget(self.frame_message)
        return box

    def _options_box(self) -> QGroupBox:
        box = QGroupBox("Reference and velocity")
        self.reference_edit = QLineEdit()
        self.reference_edit.setPlaceholderText("first")
        self.reference_edit.setToolTip("Zero of displacement: " + REFERENCE_HINT)
        self.reference_edit.setClearButtonEnabled(True)
        self.reference_message = _error_label()
        self.method_combo = QComboBox()
        for key, label in METHODS:
            self.method_combo.addItem(label, key)
        form = QFormLayout(box)
        form.setFieldGrowthPolicy(QFormLayout.FieldGrowthPolicy.AllNonFixedFieldsGrow)
        form.addRow("Reference:", self.reference_edit)
        form.addRow(_hint_label(REFERENCE_HINT))
        form.addRow(self.reference_message)
        form.addRow("Velocity:", self.method_combo)
        return box

    def _components_box(self) -> QGroupBox:
        box = QGroupBox("Components plotted")
        self.component_boxes: dict[str, QCheckBox] = {}
        grid = QGridLayout(box)
        for i, (key, label) in enumerate(COMPONENTS):
            check = QCheckBox(label)
            self.component_boxes[key] = check
            grid.addWidget(check, i // 2, i % 2)
        return box

    def _period_box(self) -> QGroupBox:
        box = QGroupBox("Period")
        self.whole_record = QCheckBox("Whole record", checked=True)
        self.start_edit, self.end_edit = QDateTimeEdit(), QDateTimeEdit()
        for edit in (self.start_edit, self.end_edit):
            edit.setCalendarPopup(True)
            edit.setDisplayFormat("yyyy-MM-dd HH:mm")
            edit.setEnabled(False)
        self.period_zone = _hint_label("times in UTC")
        self.period_message = _error_label()
        form = QFormLayout(box)
        form.setFieldGrowthPolicy(QFormLayout.FieldGrowthPolicy.AllNonFixedFieldsGrow)
        form.addRow(self.whole_record)
        form.addRow("From:", self.start_edit)
        form.addRow("To:", self.end_edit)
        form.addRow(self.period_zone)
        form.addRow(self.period_message)
        return box

    def _connect(self) -> None:
        self.rover_list.itemChanged.connect(lambda _: self._rovers_changed())
        self.all_button.clicked.connect(lambda: self.check(None))
        self.none_button.clicked.connect(lambda: self.check([]))
        self.frame_combo.currentIndexChanged.connect(lambda _: self._frame_changed())
        self.crs_edit.textChanged.connect(lambda _: self._choice_changed())
        self.crs_edit.returnPressed.connect(self.analyse_clicked)
        self.reference_edit.textChanged.connect(lambda _: self._choice_changed())
        self.reference_edit.returnPressed.connect(self.analyse_clicked)
        self.method_combo.currentIndexChanged.connect(lambda _: self._choice_changed())
        for check in self.component_boxes.values():
            check.toggled.connect(lambda _: self._components_toggled())
        self.whole_record.toggled.connect(self._whole_record_toggled)
        for edit in (self.start_edit, self.end_edit):
            edit.dateTimeChanged.connect(lambda _: self._choice_changed())
        self.analyse_button.clicked.connect(self.analyse_clicked)

    # ------------------------------------------------------------------ settings

    def _setting(self, key: str, default):
        return default if self.settings is None else self.settings.value(f"gnss/{key}", default)

    def _remember(self) -> None:
        """Keep the choices for the next start (frame, reference, method, components)."""
        if self.settings is None:
            return
        self.settings.set_value("gnss/frame", self.frame_text() or ENU)
        self.settings.set_value("gnss/reference", self.reference_edit.text().strip())
        self.settings.set_value("gnss/method", self.method_combo.currentData())
        self.settings.set_value("gnss/components", ",".join(self.components()))

    def _restore(self) -> None:
        self.reference_edit.setText(str(self._setting("reference", "") or ""))
        self.method_combo.setCurrentIndex(
            max(self.method_combo.findData(str(self._setting("method", "midas"))), 0))
        saved = str(self._setting("components", ",".join(DEFAULT_COMPONENTS)) or "")
        chosen = {c for c in saved.split(",") if c in self.component_boxes}
        for key, check in self.component_boxes.items():
            check.setChecked(key in (chosen or set(DEFAULT_COMPONENTS)))

    # ------------------------------------------------------------------ rovers

    def set_devices(self, devices: list[queries.GnssDevice]) -> None:
        """List these rovers (those without epochs greyed out); checked rovers that are
        still listed stay checked.  Emits nothing: the view decides whether to analyse."""
        checked = set(self.checked_serials())
        self.devices = {d.serial_number: d for d in devices}
        self.rover_list.blockSignals(True)
        self.rover_list.clear()
        for device in sorted(devices, key=lambda d: (d.site_name or "", d.display_name)):
            self.rover_list.addItem(self._rover_item(device, device.serial_number in checked))
        self.rover_list.blockSignals(False)
        self._rovers_changed(emit=False)

    @staticmethod
    def _rover_item(device: queries.GnssDevice, checked: bool) -> QListWidgetItem:
        item = QListWidgetItem(f"{device.display_name}  ·  {device.serial_number}")
        item.setData(Qt.ItemDataRole.UserRole, device.serial_number)
        site = device.site_name or "no site"
        if device.epochs:
            item.setFlags(item.flags() | Qt.ItemFlag.ItemIsUserCheckable)
            item.setCheckState(Qt.CheckState.Checked if checked else Qt.CheckState.Unchecked)
            item.setToolTip(f"{device.display_name} ({device.serial_number}), {site}\n"
                            f"{device.epochs:,} epochs from "
                            f"{local_text(device.first, device.site_timezone)} to "
                            f"{local_text(device.last, device.site_timezone)}")
        else:
            item.setFlags(item.flags() & ~Qt.ItemFlag.ItemIsEnabled)
            item.setToolTip(f"{device.display_name} ({device.serial_number}), {site}: no "
                            f"epochs mirrored")
        return item

    def _items(self) -> list[QListWidgetItem]:
        return [self.rover_list.item(i) for i in range(self.rover_list.count())]

    def checked_serials(self) -> list[str]:
        return [item.data(Qt.ItemDataRole.UserRole) for item in self._items()
                if item.checkState() == Qt.CheckState.Checked]

    def checked_devices(self) -> list[queries.GnssDevice]:
        return [self.devices[s] for s in self.checked_serials() if s in self.devices]

    def check(self, serials: list[str] | None, emit: bool = True) -> None:
        """Check exactly these rovers (None: every rover with epochs)."""
        self.rover_list.blockSignals(True)
        for item in self._items():
            if item.flags() & Qt.ItemFlag.ItemIsUserCheckable:
                on = serials is None or item.data(Qt.ItemDataRole.UserRole) in serials
                item.setCheckState(Qt.CheckState.Checked if on else Qt.CheckState.Unchecked)
        self.rover_list.blockSignals(False)
        self._rovers_changed(emit=emit)

    def tz_name(self) -> str | None:
        """The site timezone of the first checked rover (the period is entered in it)."""
        checked = self.checked_devices()
        return checked[0].site_timezone if checked else None

    def _rovers_changed(self, emit: bool = True) -> None:
        self._update_frame_choices(self._pending_frame or self.frame_text() or ENU)
        self._update_period_zone()
        if self.whole_record.isChecked():
            self._fill_period_from_data()
        if emit:
            self._choice_changed()

    # ------------------------------------------------------------------ frame

    def frame_text(self) -> str:
        """The frame as ``AnalysisOptions`` takes it: ``enu``, a projection id of the site,
        or what is typed in the free field."""
        data = self.frame_combo.currentData()
        if data == CUSTOM:
            return self.crs_edit.text().strip()
        return data or ENU

    def set_frame(self, text: str) -> None:
        """Choose a frame as the user would: ``enu``, a projection id of the checked
        rovers' site, or anything else into the free EPSG/PROJ field."""
        text = (text or ENU).strip()
        index = self.frame_combo.findData(ENU if text.lower() == ENU else text)
        if index < 0:
            self.crs_edit.setText(text)
            index = self.frame_combo.findData(CUSTOM)
        self.frame_combo.setCurrentIndex(index)

    def _update_frame_choices(self, current: str) -> None:
        """Local ENU, the projections of the checked rovers' sites by label, and the free
        field; keeps ``current`` when it is still offered."""
        projections: dict[str, str] = {}
        for device in self.checked_devices():
            for entry in device.projections:
                key = str(entry.get("id"))
                projections.setdefault(key, str(entry.get("label") or f"projection {key}"))
        self.frame_combo.blockSignals(True)
        self.frame_combo.clear()
        self.frame_combo.addItem("Local east / north / up (ENU)", ENU)
        for key, label in projections.items():
            self.frame_combo.addItem(label, key)
            self.frame_combo.setItemData(self.frame_combo.count() - 1,
                                         f"{label}: projection {key} of the site",
                                         Qt.ItemDataRole.ToolTipRole)
        self.frame_combo.addItem("Other: EPSG code or PROJ string…", CUSTOM)
        index = self.frame_combo.findData(ENU if current.lower() == ENU else current)
        if index >= 0 and current == self._pending_frame:
            self._pending_frame = None
        if index < 0 and _is_projection_id(current):
            index = 0  # a projection of a site no longer checked: back to ENU
        if index < 0:
            index = self.frame_combo.findData(CUSTOM)
            self.crs_edit.setText(current)
        self.frame_combo.setCurrentIndex(index)
        self.frame_combo.blockSignals(False)
        self.crs_edit.setVisible(self.frame_combo.currentData() == CUSTOM)

    def _frame_changed(self) -> None:
        self._pending_frame = None  # the user chose
        custom = self.frame_combo.currentData() == CUSTOM
        self.crs_edit.setVisible(custom)
        if custom and not self.crs_edit.text():
            self.crs_edit.setFocus()
        self._choice_changed()

    # ------------------------------------------------------------------ period

    def _whole_record_toggled(self, whole: bool) -> None:
        for edit in (self.start_edit, self.end_edit):
            edit.setEnabled(not whole)
        self._choice_changed()

    def _update_period_zone(self) -> None:
        """The period fields show and take times in the checked rovers' site zone."""
        name = zone_label(self.tz_name())
        qzone = QTimeZone.utc() if name == "UTC" else QTimeZone(name.encode())
        for edit in (self.start_edit, self.end_edit):
            edit.blockSignals(True)
            edit.setTimeZone(qzone if qzone.isValid() else QTimeZone.utc())
            edit.blockSignals(False)
        self.period_zone.setText(f"times in {name}")

    def _fill_period_from_data(self) -> None:
        """Set the period fields to the checked rovers' mirrored span."""
        spans = [(d.first, d.last) for d in self.checked_devices() if d.first and d.last]
        if not spans:
            return
        for edit, t in ((self.start_edit, min(s[0] for s in spans)),
                        (self.end_edit, max(s[1] for s in spans))):
            t = t if t.tzinfo else t.replace(tzinfo=timezone.utc)
            edit.blockSignals(True)
            edit.setDateTime(QDateTime.fromSecsSinceEpoch(int(t.timestamp()), edit.timeZone()))
            edit.blockSignals(False)

    def set_period(self, start: datetime | None, end: datetime | None) -> None:
        """A period (aware datetimes), or the whole record when both are None."""
        if start is None and end is None:
            self.whole_record.setChecked(True)
            return
        for edit, t in ((self.start_edit, start), (self.end_edit, end)):
            edit.blockSignals(True)
            edit.setDateTime(QDateTime.fromSecsSinceEpoch(int(t.timestamp()), edit.timeZone()))
            edit.blockSignals(False)
        if self.whole_record.isChecked():
            self.whole_record.setChecked(False)
        else:
            self._choice_changed()

    def period(self) -> tuple[datetime | None, datetime | None]:
        """(start, end) in UTC, or (None, None) for the whole record."""
        if self.whole_record.isChecked():
            return None, None
        start, end = (datetime.fromtimestamp(e.dateTime().toSecsSinceEpoch(), timezone.utc)
                      for e in (self.start_edit, self.end_edit))
        return start, end

    # ------------------------------------------------------------------ choices

    def components(self) -> list[str]:
        return [key for key, check in self.component_boxes.items() if check.isChecked()]

    def _components_toggled(self) -> None:
        self._remember()
        self.components_changed.emit()

    def _choice_changed(self) -> None:
        """Validate as the user types (the reason under the field), remember valid
        choices, and say whether they make a request."""
        valid = self.request() is not None
        if valid:
            self._remember()
        self.changed.emit(valid)

    def problems(self) -> dict[str, str]:
        """What is wrong with the choices, by field (frame, reference, period)."""
        problems = {}
        frame = self.frame_text()
        if not frame:
            problems["frame"] = f"Type an EPSG code or a PROJ string, e.g. {CRS_HINT}."
        else:
            try:
                AnalysisOptions.build(frame=frame)
            except ValueError as err:
                problems["frame"] = str(err)
        try:
            AnalysisOptions.build(reference=self.reference_edit.text().strip() or "first")
        except ValueError as err:
            problems["reference"] = str(err)
        start, end = self.period()
        if start is not None and end <= start:
            problems["period"] = "The end of the period must be after its start."
        return problems

    def request(self) -> GnssRequest | None:
        """The request the choices describe, or None with the reasons shown under the
        fields."""
        problems = self.problems()
        for key, label in (("frame", self.frame_message), ("reference", self.reference_message),
                           ("period", self.period_message)):
            label.setText(problems.get(key, ""))
            label.setVisible(key in problems)
        if problems:
            return None
        options = AnalysisOptions.build(reference=self.reference_edit.text().strip() or "first",
                                        method=self.method_combo.currentData(),
                                        frame=self.frame_text())
        start, end = self.period()
        return GnssRequest(tuple(self.checked_serials()), options, start, end)


# ----------------------------------------------------------------------------- the view

class GnssView(QWidget):
    """Deformation analysis of the checked rovers: the choices on the left; figure tabs and
    the velocity table on the right, with the rover the per-rover tabs show above them.

    The main window calls ``set_devices`` after opening a mirror or a sync,
    ``show_devices`` when rovers are selected in the browser, and ``current_figure`` /
    ``current_csv_rows`` for its exports."""

    #: a short line for the window's status bar
    status = Signal(str)
    #: the results of a run are shown: the list of RoverAnalysis
    analysed = Signal(list)
    #: a run was refused or ended without anything to show: the message
    failed = Signal(str)

    def __init__(self, runner, settings=None, parent=None) -> None:
        super().__init__(parent)
        self.runner = runner
        self.result: GnssResult | None = None
        self._dirty: set[str] = set()  # figure tabs whose figure is out of date
        self._wanted_shown: str | None = None  # the rover show_devices asked for
        self._task = None  # the TaskState of the latest run
        self._debounce = QTimer(self, singleShot=True, interval=DEBOUNCE_MS)
        self._debounce.timeout.connect(self.analyse)
        self.controls = AnalysisControls(settings)
        self._build()
        self.controls.changed.connect(self._choices_changed)
        self.controls.components_changed.connect(lambda: self._redraw({"displacement"}))
        self.controls.analyse_clicked.connect(self.analyse)
        self.device_combo.currentIndexChanged.connect(
            lambda _: self._redraw({key for key, _ in FIGURE_TABS}))
        self.tabs.currentChanged.connect(lambda _: self._refresh_current())

    def _build(self) -> None:
        scroll = QScrollArea()
        scroll.setWidgetResizable(True)
        scroll.setWidget(self.controls)
        scroll.setHorizontalScrollBarPolicy(Qt.ScrollBarPolicy.ScrollBarAlwaysOff)
        scroll.setFrameShape(QScrollArea.Shape.NoFrame)
        scroll.setMinimumWidth(max(self.controls.minimumSizeHint().width(), 300) + 16)
        splitter = QSplitter(Qt.Orientation.Horizontal)
        splitter.addWidget(scroll)
        splitter.addWidget(self._build_results())
        splitter.setStretchFactor(0, 0)
        splitter.setStretchFactor(1, 1)
        splitter.setCollapsible(0, True)  # drag the handle left to give the plots all room
        splitter.setCollapsible(1, False)
        splitter.setSizes([330, 1000])
        layout = QVBoxLayout(self)
        layout.setContentsMargins(4, 4, 4, 4)
        layout.addWidget(splitter)

    def _build_results(self) -> QWidget:
        self.device_combo = QComboBox()
        self.device_combo.setSizeAdjustPolicy(QComboBox.SizeAdjustPolicy.AdjustToContents)
        self.device_combo.setToolTip("The rover the displacement, trajectory, velocity and "
                                     "inverse-velocity tabs show; the plan view shows its "
                                     "site")
        self.progress = QProgressBar()
        self.progress.setRange(0, 100)
        self.progress.setFixedWidth(160)
        self.progress.setTextVisible(False)
        self.progress.hide()
        self.progress_label = _hint_label()
        top = QHBoxLayout()
        top.addWidget(QLabel("Shown rover:"))
        top.addWidget(self.device_combo)
        top.addStretch(1)
        top.addWidget(self.progress_label)
        top.addWidget(self.progress)
        hint = "Check one or more rovers on the left: they are analysed by themselves."
        self.panes = {key: FigurePane(hint) for key, _ in FIGURE_TABS}
        self.table = VelocityTable()
        self.tabs = QTabWidget()
        for key, title in FIGURE_TABS:
            self.tabs.addTab(self.panes[key], title)
        self.tabs.addTab(self.table, "Velocity table")
        self.message = _hint_label()
        box = QWidget()
        layout = QVBoxLayout(box)
        layout.setContentsMargins(4, 0, 0, 0)
        layout.addLayout(top)
        layout.addWidget(self.tabs, 1)
        layout.addWidget(self.message)
        return box

    # ------------------------------------------------------------------ public API

    def set_devices(self, devices: list[queries.GnssDevice]) -> None:
        """The rovers of the open mirror (after opening it, or after a sync).  Checked rovers
        that are still there stay checked and are analysed again (a sync adds epochs); an
        empty list clears the view."""
        self.controls.set_devices(devices)
        if not devices:
            self._clear("Open a mirror with GNSS rovers to analyse their deformation.")
        elif self.controls.checked_serials():
            self.analyse()

    def show_devices(self, serials: list[str]) -> None:
        """Show these rovers (a selection in the browser).  One rover that is already
        analysed is just shown; otherwise exactly these rovers are checked and analysed now,
        the first one shown.  Serials that are not rovers with epochs are ignored."""
        devices = self.controls.devices
        wanted = [s for s in serials if s in devices and devices[s].epochs]
        if not wanted:
            return
        if len(wanted) == 1 and self.device_combo.findData(wanted[0]) >= 0 \
                and wanted[0] in self.controls.checked_serials():
            self.set_shown_device(wanted[0])
            return
        self._wanted_shown = wanted[0]
        self.controls.check(wanted, emit=False)
        self.analyse()

    def current_figure(self) -> Figure | None:
        """The figure of the visible tab (None on the table tab or before an analysis)."""
        pane = self.tabs.currentWidget()
        if not isinstance(pane, FigurePane):
            return None
        self._refresh_current()
        return pane.figure

    def current_csv_rows(self) -> tuple[list[str], list[list]] | None:
        """(header, rows) of the shown rover's displacement: every received epoch with its
        time (UTC, ISO 8601), east/north/up in mm in the analysed frame (empty for an epoch
        the analysis did not use) and whether it was kept, an outlier, or rejected by the
        quality filter.  None before an analysis."""
        analysis = self.shown_analysis()
        if analysis is None:
            return None
        frame, d = analysis.frame, analysis.displacement
        header = ["time_utc", f"east_mm ({frame.label})", f"north_mm ({frame.label})",
                  f"up_mm ({frame.height_type} height)", "status"]
        kept_index = np.cumsum(analysis.kept) - 1
        times = np.datetime_as_string(analysis.t_all.astype("datetime64[s]"), unit="s")
        rows = []
        for i, time in enumerate(times):
            if analysis.kept[i]:
                j = kept_index[i]
                rows.append([time + "Z", round(float(d.east_m[j]) * 1e3, 3),
                             round(float(d.north_m[j]) * 1e3, 3),
                             round(float(d.up_m[j]) * 1e3, 3), "kept"])
            else:
                status = "outlier" if analysis.outliers[i] else "rejected by quality filter"
                rows.append([time + "Z", "", "", "", status])
        return header, rows

    def analyses(self) -> list[RoverAnalysis]:
        """The analyses shown now, in the order of the rover list."""
        return list(self.result.analyses) if self.result else []

    def shown_analysis(self) -> RoverAnalysis | None:
        """The analysis of the rover the per-rover tabs show."""
        serial = self.device_combo.currentData()
        return next((a for a in self.analyses() if a.serial_number == serial), None)

    def set_shown_device(self, serial: str) -> None:
        """Show this analysed rover in the per-rover tabs."""
        index = self.device_combo.findData(serial)
        if index >= 0:
            self.device_combo.setCurrentIndex(index)

    def busy(self) -> bool:
        return not self.progress.isHidden()

    # ------------------------------------------------------------------ running

    def _choices_changed(self, valid: bool) -> None:
        """Re-analyse a moment after the last valid change (typing an EPSG code passes
        through invalid and unintended valid codes: only where the typing stops counts)."""
        if valid and self.controls.checked_serials():
            self._debounce.start()
        else:
            self._debounce.stop()

    def analyse(self) -> None:
        """Analyse the checked rovers now, on the worker pool."""
        self._debounce.stop()
        request = self.controls.request()
        if request is None:
            text = "Not analysed: " + " ".join(self.controls.problems().values())
            if self.result is not None:
                text += " The plots and the table still show the last analysis."
            return self._refuse(text)
        if not request.serials:
            self._say("Check one or more rovers to analyse.")
            return
        if self.runner.mirror is None:
            return self._refuse("Open a mirror first.")
        self.progress.setValue(0)
        self.progress.show()
        self.progress_label.setText("Analysing…")
        self.progress_label.show()
        self._task = self.runner.submit(
            analysis_task(request),
            on_done=self._show_result, on_error=self._task_failed,
            on_progress=self._task_progress, on_cancelled=self._task_cancelled, slot=SLOT,
            label="GNSS analysis")

    def _refuse(self, text: str) -> None:
        self._say(text, error=True)
        self.failed.emit(text)

    def _task_progress(self, percent: float, message: str) -> None:
        self.progress.setValue(int(percent))
        self.progress_label.setText(message)

    def _task_cancelled(self) -> None:
        """A superseded run ends quietly (the newer one still shows its progress); a run
        stopped for good (the mirror closed) clears the progress."""
        if self._task is None or self._task.cancelled:
            self._task_finished()

    def _task_finished(self) -> None:
        self.progress.hide()
        self.progress_label.hide()

    def _task_failed(self, message: str) -> None:
        self._task_finished()
        self._refuse(f"The analysis failed: {message}")

    def _show_result(self, result: GnssResult) -> None:
        self._task_finished()
        if not result.analyses:
            return self._refuse("No rover could be analysed: " + "; ".join(result.errors))
        self.result = result
        self._fill_device_combo(result.analyses)
        self.table.fill(result.analyses, self._tz_name)
        options = result.request.options
        text = (f"{len(result.analyses)} rover(s) analysed in {result.analyses[0].frame.label}, "
                f"reference {options.reference.describe()}, {METHOD_SHORT[options.method]} "
                f"velocities.")
        if result.errors:
            text += " Not analysed: " + "; ".join(result.errors)
        self._say(text, error=bool(result.errors))
        self.status.emit(text)
        self._redraw({key for key, _ in FIGURE_TABS})
        self.analysed.emit(list(result.analyses))

    def _fill_device_combo(self, analyses: list[RoverAnalysis]) -> None:
        wanted = self._wanted_shown or self.device_combo.currentData()
        self._wanted_shown = None
        self.device_combo.blockSignals(True)
        self.device_combo.clear()
        for analysis in analyses:
            self.device_combo.addItem(f"{analysis.display_name}  ·  {analysis.serial_number}",
                                      analysis.serial_number)
        self.device_combo.setCurrentIndex(max(self.device_combo.findData(wanted), 0))
        self.device_combo.blockSignals(False)

    def _say(self, text: str, error: bool = False) -> None:
        self.message.setText(text)
        self.message.setStyleSheet(ERROR_STYLE if error else HINT_STYLE)
        self.message.setVisible(bool(text))

    def _clear(self, text: str) -> None:
        self.result = None
        self.device_combo.clear()
        self.table.setRowCount(0)
        for pane in self.panes.values():
            pane.set_figure(None, text)
            pane.set_note("")
        self._dirty.clear()
        self._say("")

    def _tz_name(self, serial: str) -> str | None:
        """The site timezone of a rover; None (UTC) when it has none or an unknown one."""
        devices = self.result.devices if self.result else self.controls.devices
        device = devices.get(serial)
        name = device.site_timezone if device else None
        return name if zone_label(name) != "UTC" else None

    # ------------------------------------------------------------------ the figures

    def _redraw(self, keys: set[str]) -> None:
        self._dirty |= keys
        self._refresh_current()

    def _refresh_current(self) -> None:
        """Build the visible tab's figure when its inputs changed: only what is looked at is
        drawn, so a run over many rovers does not draw five figures nobody sees."""
        pane = self.tabs.currentWidget()
        key = next((k for k, p in self.panes.items() if p is pane), None)
        analysis = self.shown_analysis()
        if key not in self._dirty or analysis is None:
            return
        self._dirty.discard(key)
        try:
            figure, note = self._build_figure(key, analysis)
        except Exception as err:  # a plotting bug must not take the view down
            log.exception("drawing the %s figure failed", key)
            pane.set_figure(None, f"Could not draw this plot: {type(err).__name__}: {err}")
            pane.set_note("")
            return
        pane.set_figure(figure, note)  # no figure: the note is the placeholder
        pane.set_note(note if figure is not None else "")

    def _build_figure(self, key: str, analysis: RoverAnalysis) -> tuple[Figure | None, str]:
        tz = self._tz_name(analysis.serial_number)
        levels = self.result.alarm_levels.get(analysis.serial_number, {})
        if key == "displacement":
            components = self.controls.components() or list(DEFAULT_COMPONENTS)
            if analysis.azimuth_deg is None:
                components = [c for c in components if c not in ("along", "across")] or \
                    list(DEFAULT_COMPONENTS)
            return figures.displacement_figure(
                analysis, components=components, tz=tz,
                alarm_levels_mm=levels.get("displacement") or None), ""
        if key == "trajectory":
            return figures.trajectory_figure(analysis, tz=tz), ""
        if key == "velocity":
            return figures.velocity_figure(
                analysis, tz=tz, alarm_levels_mm_per_day=levels.get("velocity") or None), ""
        if key == "inverse":
            return (figures.inverse_velocity_figure(analysis, tz=tz),
                    forecast_text(analysis.summary(), tz))
        return self._plan_figure(analysis)

    def _plan_figure(self, shown: RoverAnalysis) -> tuple[Figure | None, str]:
        """The analysed rovers of the shown rover's site at their latest positions in the
        analysis frame: projected when it is a grid, else local east/north from the
        rovers' centroid (the axis names say which)."""
        devices = self.result.devices
        site = devices[shown.serial_number].site_uuid
        of_site = [a for a in self.result.analyses if devices[a.serial_number].site_uuid == site]
        placed = [a for a in of_site if a.serial_number in self.result.positions]
        if not placed:
            return None, "No position is known for these rovers."
        lat, lon, h = (np.array([self.result.positions[a.serial_number][i] for a in placed])
                       for i in range(3))
        # a rover placed at its device location has no height: the others' mean is as good
        # for a plan (it moves east/north by micrometres)
        h = np.where(np.isfinite(h), h, np.nanmean(h) if np.isfinite(h).any() else 0.0)
        if shown.frame.crs is not None:
            x, y = project(lat, lon, shown.frame.crs)
            label, axes = shown.frame.label, ("grid easting", "grid northing")
        else:
            x, y, _ = geodetic_to_enu(lat, lon, h, (float(lat.mean()), float(lon.mean()),
                                                    float(h.mean())))
            label = "local ENU"
            axes = ("east of the rovers' centroid", "north of the rovers' centroid")
        points = figures.plan_points(placed, {a.serial_number: (float(xi), float(yi))
                                              for a, xi, yi in zip(placed, x, y)})
        site_name = devices[shown.serial_number].site_name or "Site plan"
        missing = len(of_site) - len(placed)
        note = f"{missing} rover(s) without a known position are not drawn." if missing else ""
        return figures.plan_view_figure(points, frame_label=label, axis_names=axes,
                                        title=f"{site_name}: horizontal displacement"), note

"""The GNSS deformation view: displacement, trajectory, velocity, plan view, inverse velocity
and a velocity table of the rovers the user checks.

Every number comes from ``devmon_sync.analyze.analyze_device`` (the same call ``devmon
analyze`` makes, so the table equals the command's output) and every plot from the builders
of ``analysis.figures`` (so reports draw the same figures).  This module only gathers the
user's choices, runs the analyses on the window's ``TaskRunner`` (slot ``"gnss"``: a newer
request supersedes an older one) and shows what comes back.  Invalid choices (an unreadable
EPSG code, a reference date that is not a date) are reported under the field with the
analysis' own message, and the previous plots stay.
"""

from __future__ import annotations

import logging
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
from devmon_sync.store import queries
from gui.timefmt import local_text, zone, zone_label

log = logging.getLogger(__name__)

#: (key of RoverAnalysis.velocity / the figure builders, label of the checkbox)
COMPONENTS: tuple[tuple[str, str], ...] = (
    ("east", "East"), ("north", "North"), ("up", "Up"), ("horizontal", "2D (horizontal)"),
    ("3d", "3D"), ("along", "Along azimuth"), ("across", "Across azimuth"))
DEFAULT_COMPONENTS = ("east", "north", "up")
METHODS = (("midas", "MIDAS (robust)"), ("ols", "Least squares"))
ENU = "enu"
CUSTOM = "custom"
DEBOUNCE_MS = 500  # pause after the last change of a control before re-analysing
SLOT = "gnss"
REFERENCE_HINT = "first, 2026-01-05 or 2026-01-01..2026-01-07"
CRS_HINT = "EPSG:32632 or +proj=utm +zone=32 +datum=WGS84"
#: Row tints by the rank of the alarm level reached (1 = first level); light, so text stays
#: readable.
ALARM_TINTS = ("#fff3bf", "#ffd8a8", "#ffc9c9")
ERROR_STYLE = "color: #c62828;"
SORT_ROLE = Qt.ItemDataRole.UserRole + 1


# ----------------------------------------------------------------------------- the work

@dataclass(frozen=True)
class GnssRequest:
    """What one analysis run is asked for: rovers, options and the period (UTC, or None for
    the whole record)."""

    serials: tuple[str, ...]
    options: AnalysisOptions
    start: datetime | None = None
    end: datetime | None = None


@dataclass
class GnssResult:
    """What a run returns to the GUI thread: the analyses that succeeded (in the order asked),
    one message per rover that could not be analysed, and what the plots need besides."""

    request: GnssRequest
    analyses: list[RoverAnalysis]
    errors: list[str]
    devices: dict[str, queries.GnssDevice]
    alarm_levels: dict[str, dict] = field(default_factory=dict)
    positions: dict[str, tuple[float, float, float]] = field(default_factory=dict)


def _positions(mirror, devices: list[queries.GnssDevice]) -> dict[str, tuple[float, float, float]]:
    """Each rover's latest mirrored position (lat, lon, ellipsoidal height), where the plan
    view places it."""
    out = {}
    for device in devices:
        if device.last is None:
            continue
        last = queries.gnss_epochs(mirror, device.serial_number, device.last, None)
        if last["lat"].size:
            out[device.serial_number] = (float(last["lat"][-1]), float(last["lon"][-1]),
                                         float(last["eh"][-1]))
    return out


def run_analyses(mirror, state, request: GnssRequest) -> GnssResult:
    """The worker task: ``analyze_device`` for each requested rover, progress per rover.  A
    rover whose data cannot support an analysis (a ValueError: too few epochs, none in the
    period) becomes a message; the others are still analysed."""
    devices = {d.serial_number: d for d in queries.gnss_devices(mirror)}
    analyses, errors, levels = [], [], {}
    for i, serial in enumerate(request.serials):
        state.check()
        device = devices.get(serial)
        if device is None:
            errors.append(f"{serial}: not a GNSS rover of this mirror (any more)")
            continue
        state.set_progress(100.0 * i / len(request.serials),
                           f"Analysing {device.display_name} ({i + 1} of "
                           f"{len(request.serials)})")
        try:
            analyses.append(analyze_device(mirror, device, request.options, request.start,
                                           request.end))
        except ValueError as err:
            errors.append(f"{device.display_name}: {err}")
            continue
        levels[serial] = queries.alarm_levels(mirror, serial)
    state.check()
    site_ids = {devices[a.serial_number].site_uuid for a in analyses}
    site_rovers = [d for d in devices.values() if d.site_uuid in site_ids]
    state.set_progress(100.0, "Done")
    return GnssResult(request, analyses, errors, devices, levels, _positions(mirror, site_rovers))


# ----------------------------------------------------------------------------- formatting

def _pm(pair, digits: int, signed: bool = True) -> str:
    """``+1.234 ± 0.012`` (the CLI's form); ``-`` when the number is missing."""
    if not pair:
        return "-"
    value, sigma = pair
    sign = "+" if signed else ""
    return f"{value:{sign}.{digits}f} ± {sigma:.{digits}f}"


def _utc_datetime(iso: str | None) -> datetime | None:
    if not iso:
        return None
    return datetime.fromisoformat(iso.replace("Z", "+00:00"))


def _alarm_rank(alarm) -> int:
    """0 below every level (or none set), 1 at the first level, ..."""
    if alarm is None or not alarm.overall or not alarm.overall_quantity:
        return 0
    quantity = getattr(alarm, alarm.overall_quantity, None)
    return quantity.rank if quantity is not None else 1


def _alarm_text(analysis: RoverAnalysis) -> str:
    alarm = analysis.alarm
    if alarm is None:
        return "no levels set"
    if not alarm.overall:
        return "below levels"
    return f"{alarm.overall} ({alarm.overall_quantity})"


def forecast_text(summary: dict, tz_name: str | None) -> str:
    """One line about the inverse-velocity failure forecast, times in the site's zone."""
    forecast = summary.get("forecast")
    if not forecast:
        return "No failure forecast: the inverse velocity could not be computed."
    if not forecast["supported"]:
        return f"No failure forecast: {forecast['reason']}"
    lo, hi = (local_text(_utc_datetime(x), tz_name) for x in forecast["interval"])
    return (f"Failure forecast (inverse velocity): "
            f"{local_text(_utc_datetime(forecast['failure_time']), tz_name)} "
            f"(95 %: {lo} .. {hi}), R² {forecast['r2']:.2f}")


class _SortItem(QTableWidgetItem):
    """A table cell that sorts by a number (or time) rather than by its text."""

    def __init__(self, text: str, key=None) -> None:
        super().__init__(text)
        self.setData(SORT_ROLE, key)
        self.setFlags(self.flags() & ~Qt.ItemFlag.ItemIsEditable)

    def __lt__(self, other) -> bool:
        a, b = self.data(SORT_ROLE), other.data(SORT_ROLE)
        if a is None or b is None:  # missing numbers sort after the others
            return a is not None
        return a < b


def _first(pair):
    return None if not pair else pair[0]


#: (header, cell from (analysis, summary, tz)) of the velocity table, in column order
TABLE_COLUMNS = (
    ("Device", lambda a, s, tz: (f"{a.display_name}\n{a.serial_number}", a.display_name)),
    ("Method", lambda a, s, tz: (dict(METHODS).get(s["method"], s["method"]), s["method"])),
    ("Frame", lambda a, s, tz: (f"{s['frame']}", s["frame"])),
    ("Horizontal\nmm/day", lambda a, s, tz: (
        _pm(s["velocity_mm_per_day"].get("horizontal"), 3, signed=False),
        _first(s["velocity_mm_per_day"].get("horizontal")))),
    ("Horizontal\nmm/yr", lambda a, s, tz: (
        _pm(s["velocity_mm_per_yr"].get("horizontal"), 1, signed=False),
        _first(s["velocity_mm_per_yr"].get("horizontal")))),
    ("Along azimuth\nmm/day", lambda a, s, tz: (
        _pm(s["velocity_mm_per_day"].get("along"), 3),
        _first(s["velocity_mm_per_day"].get("along")))),
    ("Along azimuth\nmm/yr", lambda a, s, tz: (
        _pm(s["velocity_mm_per_yr"].get("along"), 1),
        _first(s["velocity_mm_per_yr"].get("along")))),
    ("3D displacement\nmm", lambda a, s, tz: (
        f"{s['displacement_mm']['3d']:.1f}", s["displacement_mm"]["3d"])),
    ("Acceleration\nmm/day²", lambda a, s, tz: (
        _pm(s["acceleration_mm_per_day2"], 4), _first(s["acceleration_mm_per_day2"]))),
    ("Alarm level", lambda a, s, tz: (_alarm_text(a), _alarm_rank(a.alarm))),
    ("Failure forecast", lambda a, s, tz: _forecast_cell(s, tz)),
)


def _forecast_cell(summary: dict, tz_name: str | None) -> tuple[str, object]:
    forecast = summary.get("forecast")
    if not forecast or not forecast["supported"]:
        return "none", None
    return (local_text(_utc_datetime(forecast["failure_time"]), tz_name),
            forecast["failure_time"])


# ----------------------------------------------------------------------------- widgets

class FigurePane(QWidget):
    """One tab: a matplotlib canvas with its navigation toolbar, a placeholder while there is
    nothing to show, and an optional note line under the plot.

    Each new figure gets a new canvas and toolbar: the canvas sizes the figure to itself and
    to the screen's pixel ratio when it is made, and the toolbar's zoom history belongs to the
    old figure, so swapping the figure of a live canvas would have to redo both by hand."""

    def __init__(self, placeholder: str, parent=None) -> None:
        super().__init__(parent)
        self.figure: Figure | None = None
        self.canvas: FigureCanvasQTAgg | None = None
        self.toolbar: NavigationToolbar2QT | None = None
        self.placeholder = QLabel(placeholder)
        self.placeholder.setAlignment(Qt.AlignmentFlag.AlignCenter)
        self.placeholder.setWordWrap(True)
        self.placeholder.setStyleSheet("color: #616161;")
        self.note = QLabel()
        self.note.setWordWrap(True)
        self.note.setTextInteractionFlags(Qt.TextInteractionFlag.TextSelectableByMouse)
        self.note.hide()
        self._layout = QVBoxLayout(self)
        self._layout.setContentsMargins(2, 2, 2, 2)
        self._layout.addWidget(self.placeholder, 1)
        self._layout.addWidget(self.note)

    def set_figure(self, figure: Figure | None, placeholder: str = "") -> None:
        """Show ``figure`` (None: the placeholder text instead)."""
        for widget in (self.toolbar, self.canvas):
            if widget is not None:
                self._layout.removeWidget(widget)
                widget.hide()
                widget.deleteLater()
        self.canvas = self.toolbar = None
        self.figure = figure
        if figure is None:
            self.placeholder.setText(placeholder or self.placeholder.text())
            self.placeholder.show()
            return
        self.placeholder.hide()
        self.canvas = FigureCanvasQTAgg(figure)
        self.canvas.setSizePolicy(QSizePolicy.Policy.Expanding, QSizePolicy.Policy.Expanding)
        self.toolbar = NavigationToolbar2QT(self.canvas, self)
        self._layout.insertWidget(0, self.toolbar)
        self._layout.insertWidget(1, self.canvas, 1)
        self.canvas.draw_idle()

    def set_note(self, text: str) -> None:
        self.note.setText(text)
        self.note.setVisible(bool(text))


class GnssView(QWidget):
    """Deformation analysis of the checked rovers: controls on the left, figure tabs and the
    velocity table on the right.

    The main window calls ``set_devices`` after opening a mirror or a sync,
    ``show_devices`` when rovers are selected in the browser, and ``current_figure`` /
    ``current_csv_rows`` for its exports."""

    #: a short line for the window's status bar
    status = Signal(str)
    #: after the results of a run are shown (tests wait on it); the list of RoverAnalysis
    analysed = Signal(list)
    #: a run ended without results to show: a message (invalid choice, no rover, failure)
    failed = Signal(str)

    def __init__(self, runner, settings=None, parent=None) -> None:
        super().__init__(parent)
        self.runner = runner
        self.settings = settings
        self.devices: dict[str, queries.GnssDevice] = {}
        self.result: GnssResult | None = None
        self._saved_frame = self._setting("frame", ENU)
        self._dirty: set[str] = set()
        self._wanted_shown: str | None = None  # the rover show_devices asked to show
        self._debounce = QTimer(self, singleShot=True, interval=DEBOUNCE_MS)
        self._debounce.timeout.connect(self.analyse)
        self._build()
        self._restore_choices()
        self._connect()
        self._update_frame_choices()

    # ------------------------------------------------------------------ building

    def _build(self) -> None:
        controls = self._build_controls()
        scroll = QScrollArea()
        scroll.setWidgetResizable(True)
        scroll.setWidget(controls)
        scroll.setHorizontalScrollBarPolicy(Qt.ScrollBarPolicy.ScrollBarAlwaysOff)
        scroll.setMinimumWidth(controls.sizeHint().width() + 24)
        splitter = QSplitter(Qt.Orientation.Horizontal)
        splitter.addWidget(scroll)
        splitter.addWidget(self._build_results())
        splitter.setStretchFactor(0, 0)
        splitter.setStretchFactor(1, 1)
        splitter.setChildrenCollapsible(False)
        layout = QVBoxLayout(self)
        layout.setContentsMargins(4, 4, 4, 4)
        layout.addWidget(splitter)

    def _build_controls(self) -> QWidget:
        panel = QWidget()
        layout = QVBoxLayout(panel)
        layout.setContentsMargins(4, 4, 4, 4)
        layout.addWidget(self._rovers_box(), 1)
        layout.addWidget(self._frame_box())
        layout.addWidget(self._options_box())
        layout.addWidget(self._components_box())
        layout.addWidget(self._period_box())
        self.analyse_button = QPushButton("Analyse")
        self.analyse_button.setDefault(True)
        self.analyse_button.setToolTip("Analyse the checked rovers now (changes of the "
                                       "controls re-analyse by themselves after a moment)")
        layout.addWidget(self.analyse_button)
        return panel

    def _rovers_box(self) -> QGroupBox:
        box = QGroupBox("Rovers")
        self.rover_list = QListWidget()
        self.rover_list.setSelectionMode(QAbstractItemView.SelectionMode.NoSelection)
        self.rover_list.setMinimumHeight(120)
        self.all_button, self.none_button = QPushButton("All"), QPushButton("None")
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
        self.frame_combo.setMinimumContentsLength(18)
        self.crs_edit = QLineEdit()
        self.crs_edit.setPlaceholderText(CRS_HINT)
        self.crs_edit.setToolTip("An EPSG code (EPSG:32632 or 32632) or a PROJ string of a "
                                 "projected coordinate reference system")
        self.frame_message = _error_label()
        layout = QVBoxLayout(box)
        layout.addWidget(self.frame_combo)
        layout.addWidget(self.crs_edit)
        layout.addWidget(self.frame_message)
        return box

    def _options_box(self) -> QGroupBox:
        box = QGroupBox("Reference and velocity")
        self.reference_edit = QLineEdit()
        self.reference_edit.setPlaceholderText(REFERENCE_HINT)
        self.reference_edit.setToolTip("Zero of displacement: the first epoch, the epoch "
                                       "nearest a date (UTC), or the mean of a window "
                                       "DATE..DATE")
        self.reference_message = _error_label()
        self.method_combo = QComboBox()
        for key, label in METHODS:
            self.method_combo.addItem(label, key)
        form = QFormLayout(box)
        form.setFieldGrowthPolicy(QFormLayout.FieldGrowthPolicy.AllNonFixedFieldsGrow)
        form.addRow("Reference:", self.reference_edit)
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
        self.period_zone = QLabel("times in UTC")
        self.period_zone.setStyleSheet("color: #616161;")
        self.period_message = _error_label()
        form = QFormLayout(box)
        form.setFieldGrowthPolicy(QFormLayout.FieldGrowthPolicy.AllNonFixedFieldsGrow)
        form.addRow(self.whole_record)
        form.addRow("From:", self.start_edit)
        form.addRow("To:", self.end_edit)
        form.addRow(self.period_zone)
        form.addRow(self.period_message)
        return box

    def _build_results(self) -> QWidget:
        self.device_combo = QComboBox()
        self.device_combo.setSizeAdjustPolicy(QComboBox.SizeAdjustPolicy.AdjustToContents)
        self.device_combo.setToolTip("The rover the displacement, trajectory, velocity and "
                                     "inverse-velocity tabs show")
        self.progress = QProgressBar()
        self.progress.setRange(0, 100)
        self.progress.setMaximumWidth(220)
        self.progress.setTextVisible(False)
        self.progress.hide()
        self.progress_label = QLabel()
        self.progress_label.setStyleSheet("color: #616161;")
        top = QHBoxLayout()
        top.addWidget(QLabel("Shown rover:"))
        top.addWidget(self.device_combo)
        top.addStretch(1)
        top.addWidget(self.progress_label)
        top.addWidget(self.progress)
        hint = "Check one or more rovers on the left; they are analysed by themselves."
        self.panes = {key: FigurePane(hint) for key in
                      ("displacement", "trajectory", "velocity", "plan", "inverse")}
        self.table = QTableWidget(0, len(TABLE_COLUMNS))
        self.table.setHorizontalHeaderLabels([c[0] for c in TABLE_COLUMNS])
        self.table.setSortingEnabled(True)
        self.table.setSelectionBehavior(QAbstractItemView.SelectionBehavior.SelectRows)
        self.table.setWordWrap(True)
        self.table.verticalHeader().setVisible(False)
        self.table.horizontalHeader().setSectionResizeMode(
            QHeaderView.ResizeMode.ResizeToContents)
        self.table.horizontalHeader().setStretchLastSection(True)
        self.tabs = QTabWidget()
        for key, title in (("displacement", "Displacement"), ("trajectory", "Trajectory"),
                           ("velocity", "Velocity"), ("plan", "Plan view"),
                           ("inverse", "Inverse velocity")):
            self.tabs.addTab(self.panes[key], title)
        self.tabs.addTab(self.table, "Velocity table")
        self.message = QLabel()
        self.message.setWordWrap(True)
        self.message.setTextInteractionFlags(Qt.TextInteractionFlag.TextSelectableByMouse)
        self.message.hide()
        box = QWidget()
        layout = QVBoxLayout(box)
        layout.setContentsMargins(4, 0, 0, 0)
        layout.addLayout(top)
        layout.addWidget(self.tabs, 1)
        layout.addWidget(self.message)
        return box

    def _connect(self) -> None:
        self.rover_list.itemChanged.connect(self._rovers_changed)
        self.all_button.clicked.connect(lambda: self._check_all(True))
        self.none_button.clicked.connect(lambda: self._check_all(False))
        self.frame_combo.currentIndexChanged.connect(self._frame_changed)
        self.crs_edit.textEdited.connect(lambda _: self._choice_changed())
        self.crs_edit.returnPressed.connect(self.analyse)
        self.reference_edit.textEdited.connect(lambda _: self._choice_changed())
        self.reference_edit.returnPressed.connect(self.analyse)
        self.method_combo.currentIndexChanged.connect(lambda _: self._choice_changed())
        for check in self.component_boxes.values():
            check.toggled.connect(lambda _: self._components_changed())
        self.whole_record.toggled.connect(self._whole_record_toggled)
        for edit in (self.start_edit, self.end_edit):
            edit.dateTimeChanged.connect(lambda _: self._choice_changed())
        self.analyse_button.clicked.connect(self.analyse)
        self.device_combo.currentIndexChanged.connect(lambda _: self._shown_device_changed())
        self.tabs.currentChanged.connect(lambda _: self._refresh_current())

    # ------------------------------------------------------------------ settings

    def _setting(self, key: str, default):
        return default if self.settings is None else self.settings.value(f"gnss/{key}", default)

    def _remember(self) -> None:
        if self.settings is None:
            return
        self.settings.set_value("gnss/frame", self.frame_text())
        self.settings.set_value("gnss/reference", self.reference_edit.text().strip())
        self.settings.set_value("gnss/method", self.method_combo.currentData())
        self.settings.set_value("gnss/components", ",".join(self.components()))

    def _restore_choices(self) -> None:
        self.reference_edit.setText(str(self._setting("reference", "") or ""))
        method = self.method_combo.findData(str(self._setting("method", "midas")))
        self.method_combo.setCurrentIndex(max(method, 0))
        saved = str(self._setting("components", ",".join(DEFAULT_COMPONENTS)) or "")
        chosen = {c for c in saved.split(",") if c in self.component_boxes} or \
            set(DEFAULT_COMPONENTS)
        for key, check in self.component_boxes.items():
            check.setChecked(key in chosen)

    # ------------------------------------------------------------------ public API

    def set_devices(self, devices: list[queries.GnssDevice]) -> None:
        """The rovers of the open mirror (after opening it or a sync).  Checked rovers that
        are still there stay checked and are analysed again (their data may have grown);
        an empty list clears the view."""
        checked = set(self.checked_serials())
        self.devices = {d.serial_number: d for d in devices}
        self.rover_list.blockSignals(True)
        self.rover_list.clear()
        for device in sorted(devices, key=lambda d: (d.site_name or "", d.display_name)):
            item = QListWidgetItem(f"{device.display_name}  ·  {device.serial_number}")
            item.setData(Qt.ItemDataRole.UserRole, device.serial_number)
            if device.epochs:
                item.setFlags(item.flags() | Qt.ItemFlag.ItemIsUserCheckable)
                state = device.serial_number in checked
                item.setCheckState(Qt.CheckState.Checked if state else Qt.CheckState.Unchecked)
                item.setToolTip(f"{device.site_name or 'no site'} · {device.epochs:,} epochs "
                                f"from {local_text(device.first, device.site_timezone)} to "
                                f"{local_text(device.last, device.site_timezone)}")
            else:
                item.setFlags(item.flags() & ~Qt.ItemFlag.ItemIsEnabled)
                item.setToolTip(f"{device.site_name or 'no site'} · no epochs mirrored")
            self.rover_list.addItem(item)
        self.rover_list.blockSignals(False)
        self._rovers_changed()
        if not devices:
            self._clear_results("Open a mirror with GNSS rovers to analyse their deformation.")
        elif self.checked_serials():
            self.analyse()

    def show_devices(self, serials: list[str]) -> None:
        """Check exactly these rovers (others in the list are ignored) and analyse them now;
        the first one is the rover shown."""
        wanted = [s for s in serials if s in self.devices and self.devices[s].epochs]
        if not wanted:
            return
        self.rover_list.blockSignals(True)
        for item in self._items():
            serial = item.data(Qt.ItemDataRole.UserRole)
            if item.flags() & Qt.ItemFlag.ItemIsUserCheckable:
                item.setCheckState(Qt.CheckState.Checked if serial in wanted
                                   else Qt.CheckState.Unchecked)
        self.rover_list.blockSignals(False)
        self._wanted_shown = wanted[0]
        self._rovers_changed(schedule=False)
        self.analyse()

    def current_figure(self) -> Figure | None:
        """The figure of the visible tab (None on the table tab or before any analysis)."""
        pane = self.tabs.currentWidget()
        if not isinstance(pane, FigurePane):
            return None
        self._refresh_current()
        return pane.figure

    def current_csv_rows(self) -> tuple[list[str], list[list]] | None:
        """(header, rows) of the shown rover's displacement: every received epoch with its
        time (UTC, ISO), east/north/up in mm in the analysed frame (empty for an epoch that
        was not used) and whether it was kept, an outlier or failed the quality filter."""
        analysis = self.shown_analysis()
        if analysis is None:
            return None
        frame = analysis.frame.label
        header = ["time_utc", f"east_mm ({frame})", f"north_mm ({frame})",
                  f"up_mm ({analysis.frame.height_type} height)", "status"]
        d = analysis.displacement
        kept_index = np.cumsum(analysis.kept) - 1
        rows = []
        for i, t in enumerate(analysis.t_all):
            time = str(np.datetime_as_string(np.datetime64(t, "s"), unit="s")) + "Z"
            if analysis.kept[i]:
                j = kept_index[i]
                rows.append([time, round(float(d.east_m[j]) * 1e3, 3),
                             round(float(d.north_m[j]) * 1e3, 3),
                             round(float(d.up_m[j]) * 1e3, 3), "kept"])
            else:
                status = "outlier" if analysis.outliers[i] else "rejected by quality filter"
                rows.append([time, "", "", "", status])
        return header, rows

    def analyses(self) -> list[RoverAnalysis]:
        """The analyses shown now (in the order of the rover list)."""
        return list(self.result.analyses) if self.result else []

    def shown_analysis(self) -> RoverAnalysis | None:
        serial = self.device_combo.currentData()
        for analysis in self.analyses():
            if analysis.serial_number == serial:
                return analysis
        return None

    def set_shown_device(self, serial: str) -> None:
        """Show this analysed rover in the per-rover tabs."""
        index = self.device_combo.findData(serial)
        if index >= 0:
            self.device_combo.setCurrentIndex(index)

    def checked_serials(self) -> list[str]:
        return [item.data(Qt.ItemDataRole.UserRole) for item in self._items()
                if item.checkState() == Qt.CheckState.Checked]

    def frame_text(self) -> str:
        """The frame as ``AnalysisOptions`` takes it: ``enu``, a projection id, or the text
        of the free field."""
        data = self.frame_combo.currentData()
        if data == CUSTOM:
            return self.crs_edit.text().strip()
        return data or ENU

    def components(self) -> list[str]:
        return [key for key, check in self.component_boxes.items() if check.isChecked()]

    def set_frame(self, text: str) -> None:
        """Choose a frame as the user would: ``enu``, a projection id of the checked rovers'
        site, or anything else into the free EPSG/PROJ field (validated when analysed)."""
        text = (text or ENU).strip()
        index = self.frame_combo.findData(ENU if text.lower() == ENU else text)
        if index < 0:
            index = self.frame_combo.findData(CUSTOM)
            self.crs_edit.setText(text)
        self.frame_combo.setCurrentIndex(index)
        self._frame_changed()

    # ------------------------------------------------------------------ reacting to controls

    def _items(self) -> list[QListWidgetItem]:
        return [self.rover_list.item(i) for i in range(self.rover_list.count())]

    def _check_all(self, checked: bool) -> None:
        self.rover_list.blockSignals(True)
        for item in self._items():
            if item.flags() & Qt.ItemFlag.ItemIsUserCheckable:
                item.setCheckState(Qt.CheckState.Checked if checked else Qt.CheckState.Unchecked)
        self.rover_list.blockSignals(False)
        self._rovers_changed()

    def _checked_devices(self) -> list[queries.GnssDevice]:
        return [self.devices[s] for s in self.checked_serials() if s in self.devices]

    def _tz_name(self, serial: str | None = None) -> str | None:
        """The site timezone of a rover (default: the first checked one)."""
        device = self.devices.get(serial) if serial else None
        if device is None:
            checked = self._checked_devices()
            device = checked[0] if checked else None
        return device.site_timezone if device else None

    def _rovers_changed(self, *_args, schedule: bool = True) -> None:
        self._update_frame_choices()
        self._update_period_zone()
        if schedule:
            self._choice_changed()

    def _update_frame_choices(self) -> None:
        """Local ENU, the projections of the checked rovers' sites (by label), and the free
        field; keeps the current choice when it is still offered."""
        current = self.frame_text() if self.frame_combo.count() else self._saved_frame
        projections: dict[str, str] = {}
        for device in self._checked_devices():
            for entry in device.projections:
                key = str(entry.get("id"))
                projections.setdefault(key, str(entry.get("label") or f"projection {key}"))
        self.frame_combo.blockSignals(True)
        self.frame_combo.clear()
        self.frame_combo.addItem("Local east / north / up (ENU)", ENU)
        for key, label in projections.items():
            self.frame_combo.addItem(f"{label}  (site projection {key})", key)
        self.frame_combo.addItem("Other: EPSG code or PROJ string", CUSTOM)
        index = self.frame_combo.findData(ENU if current.lower() == ENU else current)
        if index < 0 and current.isdigit() and len(current) < 4:
            index = 0  # a projection of a site no longer checked: back to ENU
        if index < 0:
            index = self.frame_combo.findData(CUSTOM)
            self.crs_edit.setText(current)
        self.frame_combo.setCurrentIndex(index)
        self.frame_combo.blockSignals(False)
        self.crs_edit.setVisible(self.frame_combo.currentData() == CUSTOM)

    def _frame_changed(self, *_args) -> None:
        custom = self.frame_combo.currentData() == CUSTOM
        self.crs_edit.setVisible(custom)
        if custom:
            self.crs_edit.setFocus()
        self._choice_changed()

    def _whole_record_toggled(self, whole: bool) -> None:
        for edit in (self.start_edit, self.end_edit):
            edit.setEnabled(not whole)
        if not whole:
            self._fill_period_from_data()
        self._choice_changed()

    def _update_period_zone(self) -> None:
        tz_name = self._tz_name()
        qzone = QTimeZone(zone_label(tz_name).encode()) if zone_label(tz_name) != "UTC" \
            else QTimeZone.utc()
        for edit in (self.start_edit, self.end_edit):
            edit.blockSignals(True)
            edit.setTimeZone(qzone if qzone.isValid() else QTimeZone.utc())
            edit.blockSignals(False)
        self.period_zone.setText(f"times in {zone_label(tz_name)}")

    def _fill_period_from_data(self) -> None:
        """Start the period fields at the checked rovers' mirrored span."""
        spans = [(d.first, d.last) for d in self._checked_devices() if d.first and d.last]
        if not spans:
            return
        first, last = min(s[0] for s in spans), max(s[1] for s in spans)
        for edit, t in ((self.start_edit, first), (self.end_edit, last)):
            if t.tzinfo is None:
                t = t.replace(tzinfo=timezone.utc)
            edit.blockSignals(True)
            edit.setDateTime(QDateTime.fromSecsSinceEpoch(int(t.timestamp()),
                                                          edit.timeZone()))
            edit.blockSignals(False)

    def _period(self) -> tuple[datetime | None, datetime | None]:
        if self.whole_record.isChecked():
            return None, None
        start, end = (datetime.fromtimestamp(e.dateTime().toSecsSinceEpoch(), timezone.utc)
                      for e in (self.start_edit, self.end_edit))
        return start, end

    def _choice_changed(self) -> None:
        """Validate as the user types (messages under the fields) and re-analyse after a
        pause when the choices are valid."""
        if self._request(report=True) is not None:
            self._remember()
            if self.checked_serials():
                self._debounce.start()
        else:
            self._debounce.stop()

    def _components_changed(self) -> None:
        """Components only change what the displacement plot shows: no new analysis."""
        self._remember()
        self._dirty.add("displacement")
        self._refresh_current()

    def _shown_device_changed(self) -> None:
        self._dirty |= {"displacement", "trajectory", "velocity", "inverse", "plan"}
        self._refresh_current()

    # ------------------------------------------------------------------ running

    def _request(self, report: bool = True) -> GnssRequest | None:
        """The request the controls describe, or None with the reason under the field (the
        analysis' own ValueError messages, which are written for users)."""
        frame = self.frame_text()
        reference = self.reference_edit.text().strip() or "first"
        method = self.method_combo.currentData()
        problems = {}
        if not frame:
            problems["frame"] = "Type an EPSG code or a PROJ string, e.g. " + CRS_HINT
        else:
            try:
                AnalysisOptions.build(frame=frame)
            except ValueError as err:
                problems["frame"] = str(err)
        try:
            AnalysisOptions.build(reference=reference)
        except ValueError as err:
            problems["reference"] = str(err)
        start, end = self._period()
        if start is not None and end <= start:
            problems["period"] = "The end of the period must be after its start."
        if report:
            for key, label in (("frame", self.frame_message),
                               ("reference", self.reference_message),
                               ("period", self.period_message)):
                label.setText(problems.get(key, ""))
                label.setVisible(key in problems)
        if problems:
            return None
        options = AnalysisOptions.build(reference=reference, method=method, frame=frame)
        return GnssRequest(tuple(self.checked_serials()), options, start, end)

    def analyse(self) -> None:
        """Analyse the checked rovers now (on the worker pool)."""
        self._debounce.stop()
        request = self._request(report=True)
        if request is None:
            messages = [m.text() for m in (self.frame_message, self.reference_message,
                                           self.period_message) if m.isVisible()]
            self._say("Not analysed: " + " ".join(messages), error=True)
            self.failed.emit(" ".join(messages))
            return
        if not request.serials:
            self._say("Check one or more rovers to analyse.")
            return
        if self.runner.mirror is None:
            self._say("Open a mirror first.", error=True)
            self.failed.emit("no mirror")
            return
        self._remember()
        self.progress.setValue(0)
        self.progress.show()
        self.progress_label.setText("Analysing…")
        self.analyse_button.setEnabled(False)
        self.runner.submit(lambda mirror, state: run_analyses(mirror, state, request),
                           on_done=self._show_result, on_error=self._task_failed,
                           on_progress=self._task_progress, slot=SLOT,
                           label="GNSS analysis")

    def _task_progress(self, percent: float, message: str) -> None:
        self.progress.setValue(int(percent))
        self.progress_label.setText(message)

    def _task_finished(self) -> None:
        self.progress.hide()
        self.progress_label.setText("")
        self.analyse_button.setEnabled(True)

    def _task_failed(self, message: str) -> None:
        self._task_finished()
        self._say(f"The analysis failed: {message}", error=True)
        self.failed.emit(message)

    def _show_result(self, result: GnssResult) -> None:
        self._task_finished()
        if not result.analyses:
            text = "No rover could be analysed: " + "; ".join(result.errors)
            self._say(text, error=True)
            self.failed.emit(text)
            return
        self.result = result
        wanted = self._wanted_shown or self.device_combo.currentData()
        self.device_combo.blockSignals(True)
        self.device_combo.clear()
        for analysis in result.analyses:
            self.device_combo.addItem(f"{analysis.display_name}  ·  {analysis.serial_number}",
                                      analysis.serial_number)
        index = self.device_combo.findData(wanted)
        self.device_combo.setCurrentIndex(max(index, 0))
        self.device_combo.blockSignals(False)
        self._wanted_shown = None
        self._fill_table(result)
        options = result.request.options
        text = (f"Analysed {len(result.analyses)} rover(s) in {result.analyses[0].frame.label}, "
                f"reference {options.reference.describe()}, "
                f"{dict(METHODS)[options.method]}.")
        if result.errors:
            text += " Not analysed: " + "; ".join(result.errors)
        self._say(text, error=bool(result.errors))
        self.status.emit(text)
        self._dirty = {"displacement", "trajectory", "velocity", "plan", "inverse"}
        self._refresh_current()
        self.analysed.emit(list(result.analyses))

    def _say(self, text: str, error: bool = False) -> None:
        self.message.setText(text)
        self.message.setStyleSheet(ERROR_STYLE if error else "color: #424242;")
        self.message.setVisible(bool(text))

    def _clear_results(self, text: str) -> None:
        self.result = None
        self.device_combo.clear()
        self.table.setRowCount(0)
        for pane in self.panes.values():
            pane.set_figure(None, text)
            pane.set_note("")
        self._dirty.clear()
        self._say("")

    # ------------------------------------------------------------------ the table

    def _fill_table(self, result: GnssResult) -> None:
        self.table.setSortingEnabled(False)
        self.table.setRowCount(len(result.analyses))
        for row, analysis in enumerate(result.analyses):
            summary = analysis.summary()
            tz_name = self._tz_name(analysis.serial_number)
            rank = _alarm_rank(analysis.alarm)
            tint = QBrush(QColor(ALARM_TINTS[min(rank, len(ALARM_TINTS)) - 1])) if rank else None
            for col, (_, cell) in enumerate(TABLE_COLUMNS):
                text, key = cell(analysis, summary, tz_name)
                item = _SortItem(text, key)
                if tint is not None:
                    item.setBackground(tint)
                item.setData(Qt.ItemDataRole.UserRole, analysis.serial_number)
                self.table.setItem(row, col, item)
            self.table.item(row, 0).setToolTip("\n".join(summary["notes"]) or "no notes")
            self.table.item(row, len(TABLE_COLUMNS) - 1).setToolTip(
                forecast_text(summary, tz_name))
            if analysis.alarm is not None:
                self.table.item(row, len(TABLE_COLUMNS) - 2).setToolTip(
                    analysis.alarm.describe())
        self.table.setSortingEnabled(True)
        self.table.resizeRowsToContents()

    def table_rows(self) -> list[dict[str, str]]:
        """The table as shown, by column header (tests and copying)."""
        headers = [c[0] for c in TABLE_COLUMNS]
        return [{h: self.table.item(r, c).text() for c, h in enumerate(headers)}
                for r in range(self.table.rowCount())]

    # ------------------------------------------------------------------ the figures

    def _refresh_current(self) -> None:
        """Build the visible tab's figure if its inputs changed: only what is looked at is
        drawn, so a run over many rovers does not draw five figures nobody sees."""
        pane = self.tabs.currentWidget()
        key = next((k for k, p in self.panes.items() if p is pane), None)
        if key is None or key not in self._dirty or self.result is None:
            return
        self._dirty.discard(key)
        analysis = self.shown_analysis()
        if analysis is None:
            return
        try:
            figure, note = self._build_figure(key, analysis)
        except Exception as err:  # a plotting bug must not take the view down
            log.exception("drawing the %s figure failed", key)
            pane.set_figure(None, f"Could not draw this plot: {type(err).__name__}: {err}")
            return
        pane.set_figure(figure)
        pane.set_note(note)

    def _build_figure(self, key: str, analysis: RoverAnalysis) -> tuple[Figure | None, str]:
        tz = self._tz_name(analysis.serial_number)
        if key == "displacement":
            levels = self.result.alarm_levels.get(analysis.serial_number, {})
            return figures.displacement_figure(
                analysis, components=self.components() or list(DEFAULT_COMPONENTS), tz=tz,
                alarm_levels_mm=levels.get("displacement") or None), ""
        if key == "trajectory":
            return figures.trajectory_figure(analysis, tz=tz), ""
        if key == "velocity":
            levels = self.result.alarm_levels.get(analysis.serial_number, {})
            return figures.velocity_figure(
                analysis, tz=tz, alarm_levels_mm_per_day=levels.get("velocity") or None), ""
        if key == "inverse":
            return (figures.inverse_velocity_figure(analysis, tz=tz),
                    forecast_text(analysis.summary(), tz))
        return self._plan_figure(analysis)

    def _plan_figure(self, shown: RoverAnalysis) -> tuple[Figure | None, str]:
        """All analysed rovers of the shown rover's site at their latest positions, in the
        analysis frame: projected when it is a grid, else local east/north from the
        centroid of the rovers drawn (the axis names say which)."""
        site = self.result.devices[shown.serial_number].site_uuid
        placed = [a for a in self.result.analyses
                  if self.result.devices[a.serial_number].site_uuid == site
                  and a.serial_number in self.result.positions]
        if not placed:
            return None, "No position is known for these rovers."
        lat, lon, h = (np.array([self.result.positions[a.serial_number][i] for a in placed])
                       for i in range(3))
        frame = shown.frame
        if frame.crs is not None:
            x, y = project(lat, lon, frame.crs)
            label, axes = frame.label, ("grid easting", "grid northing")
        else:
            centroid = (float(lat.mean()), float(lon.mean()), float(h.mean()))
            x, y, _ = geodetic_to_enu(lat, lon, h, centroid)
            label = "local ENU"
            axes = ("east of the rovers' centroid", "north of the rovers' centroid")
        positions = {a.serial_number: (float(xi), float(yi)) for a, xi, yi in zip(placed, x, y)}
        points = figures.plan_points(placed, positions)
        site_name = self.result.devices[shown.serial_number].site_name or "Site plan"
        missing = len([a for a in self.result.analyses
                       if self.result.devices[a.serial_number].site_uuid == site]) - len(placed)
        note = f"{missing} rover(s) without a known position are not drawn." if missing else ""
        return figures.plan_view_figure(points, frame_label=label, axis_names=axes,
                                        title=f"{site_name}: horizontal displacement"), note


def _error_label() -> QLabel:
    label = QLabel()
    label.setWordWrap(True)
    label.setStyleSheet(ERROR_STYLE)
    label.setTextInteractionFlags(Qt.TextInteractionFlag.TextSelectableByMouse)
    label.hide()
    return label

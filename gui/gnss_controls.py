"""The GNSS view's controls: rovers, frame, reference, method, components and period,
validated by ``analysis`` itself (its ValueErrors are the messages under the fields)."""

from __future__ import annotations

from datetime import datetime, timezone

from PySide6.QtCore import QDateTime, QSize, Qt, QTimeZone, Signal
from PySide6.QtWidgets import (QAbstractItemView, QCheckBox, QComboBox, QDateTimeEdit,
                               QFormLayout, QGridLayout, QGroupBox, QHBoxLayout, QLabel,
                               QLineEdit, QListWidget, QListWidgetItem, QPushButton, QVBoxLayout,
                               QWidget)

from analysis.displacement import DEFAULT_REFERENCE
from analysis.pipeline import AnalysisOptions
from devmon_sync.store import queries
from gui.timefmt import local_text, zone_label
from gui.gnss_work import GnssRequest


#: (component key of the analysis and the figure builders, label of its checkbox)
COMPONENTS: tuple[tuple[str, str], ...] = (
    ("east", "East"), ("north", "North"), ("up", "Up"), ("horizontal", "2D (horizontal)"),
    ("3d", "3D"), ("along", "Along azimuth"), ("across", "Across azimuth"))
#: east, north, up and the 3D length: the alarm levels judge the 3D length by default, so
#: its panel (with the levels' lines) is shown without asking
DEFAULT_COMPONENTS = ("east", "north", "up", "3d")
METHODS = (("midas", "MIDAS (robust)"), ("ols", "Least squares"))
METHOD_SHORT = {"midas": "MIDAS", "ols": "Least squares"}
ENU = "enu"
CUSTOM = "custom"
SLOT = "gnss"
DEBOUNCE_MS = 500  # pause after the last change of a control before analysing again
REFERENCE_HINT = ("start (first 24 h), start:48h, first, a date (2026-01-05) or a window "
                  "2026-01-01..2026-01-07, UTC")
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


class _RoverList(QListWidget):
    """The rover list, asking for little height and given what is left: the controls sit in
    a scroll area, which scrolls once the panel's preferred height is more than the window
    gives it; a list asking its default ~190 px hid the Analyse button below the fold in the
    default window (issue 30)."""

    PREFERRED_PX = 110

    def sizeHint(self) -> QSize:
        return QSize(super().sizeHint().width(), self.PREFERRED_PX)


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
        self.rover_list = _RoverList()
        self.rover_list.setSelectionMode(QAbstractItemView.SelectionMode.NoSelection)
        self.rover_list.setTextElideMode(Qt.TextElideMode.ElideRight)
        self.rover_list.setHorizontalScrollBarPolicy(Qt.ScrollBarPolicy.ScrollBarAlwaysOff)
        self.rover_list.setMinimumHeight(_RoverList.PREFERRED_PX)
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
        self.reference_edit.setPlaceholderText(DEFAULT_REFERENCE)
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
        """The site timezone of the checked rovers (the period is entered in it); None (UTC)
        when they are in different zones: no site's zone is right for all of them."""
        zones = {d.site_timezone for d in self.checked_devices()}
        return zones.pop() if len(zones) == 1 else None

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
        """Set the period fields to the checked rovers' mirrored span (none checked: every
        listed rover's), never a placeholder date the data do not have."""
        spans = [(d.first, d.last) for d in (self.checked_devices() or self.devices.values())
                 if d.first and d.last]
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
            AnalysisOptions.build(reference=self.reference_edit.text().strip() or DEFAULT_REFERENCE)
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
        reference = self.reference_edit.text().strip() or DEFAULT_REFERENCE
        options = AnalysisOptions.build(reference=reference,
                                        method=self.method_combo.currentData(),
                                        frame=self.frame_text())
        start, end = self.period()
        return GnssRequest(tuple(self.checked_serials()), options, start, end)

"""The Overview tab: every site at a glance when a mirror opens (what a monitoring desk
opens on): its devices and their connection, the rovers at each alarm level now, the devices
whose data stopped, its newest data, and where the mirror comes from (the service of its
last sync, and when).  A row tinted by the worst level reached; double-clicking a row shows
that site's health.  Under it, every point with alarm levels, the most severe first (then
by name as people count: P2 before P10), with its horizontal and vertical lights (and 3D
where set) coloured as the plots colour a level, the value in words as each light's
tooltip: one click opens the rover (what the desk looks at first).

With no mirror, or one that holds nothing yet, the tab says what to do instead (run the
demo, open a mirror, sync one), with a button for each: the packaged app's first screen."""

from __future__ import annotations

import html

from PySide6.QtCore import Qt, Signal
from PySide6.QtGui import QBrush, QColor
from PySide6.QtWidgets import (QAbstractItemView, QHBoxLayout, QHeaderView, QLabel,
                               QPushButton, QTableWidget, QTableWidgetItem, QVBoxLayout,
                               QWidget)

from analysis.alarms import direction_lights, quantity_words
from analysis.figure_style import level_colour
from gui.browser import LIGHTS, light_colour, light_text, light_tip
from gui.timefmt import local_text

COLUMNS = ("Site", "Devices", "Online", "Offline", "At a level now", "Stale (no data for 24 h)",
           "Newest data")
POINT_COLUMNS = ("Level", "Point", *LIGHTS, "Serial number", "Site", "Reached by")
#: The usual ladder, worst last: what orders "At a level now" and tints a row.
LADDER = ("alert", "alarm", "emergency")
TINT_ALPHA = 60  # a row's tint: its level's colour, light enough to read black text on
NO_MIRROR_HINT = (
    "<p style='font-size:14pt'><b>No mirror open</b></p>"
    "<p>New here? <b>Run the demo</b>: it syncs a realistic world from the built-in "
    "server (no account, no network), analyses its GNSS rovers and writes a report.</p>"
    "<p>Or <b>Open a mirror…</b> you already have (File → Open mirror…), or <b>Sync…</b> "
    "a new one from your monitoring service (File → Sync…).</p>")
EMPTY_MIRROR_HINT = (
    "<p style='font-size:14pt'><b>This mirror holds no devices yet</b></p>"
    "<p><b>Sync…</b> it from your monitoring service (File → Sync…): its sites, devices "
    "and data appear here.</p><p>Or <b>Open a mirror…</b> that holds data, or "
    "<b>Run the demo</b> to see devmon at work on a realistic world.</p>")


def _levels_text(levels: dict) -> str:
    ordered = sorted(levels.items(), key=lambda kv: -_rank(kv[0]))
    return ", ".join(f"{n} {name}" for name, n in ordered) or "-"


def _rank(level: str) -> int:
    return LADDER.index(level) if level in LADDER else -1


def _tint(level: str, rank: int) -> QBrush:
    tint = QColor(level_colour(level, max(rank, 0)))
    tint.setAlpha(TINT_ALPHA)
    return QBrush(tint)


def _table(columns: tuple[str, ...]) -> QTableWidget:
    """A read-only table selecting whole rows, columns sized to their contents."""
    table = QTableWidget(0, len(columns))
    table.setHorizontalHeaderLabels(list(columns))
    table.setEditTriggers(QAbstractItemView.EditTrigger.NoEditTriggers)
    table.setSelectionBehavior(QAbstractItemView.SelectionBehavior.SelectRows)
    table.verticalHeader().setVisible(False)
    table.horizontalHeader().setSectionResizeMode(QHeaderView.ResizeMode.ResizeToContents)
    table.horizontalHeader().setStretchLastSection(True)
    return table


def light_item(direction: str, key) -> QTableWidgetItem:
    """A light's cell: its word, filled with its level's colour (white bold text), green
    text below its levels, grey "not set"; its value in words as tooltip."""
    item = QTableWidgetItem(light_text(key))
    item.setTextAlignment(Qt.AlignmentFlag.AlignCenter)
    item.setToolTip(light_tip(direction, key))
    colour = light_colour(key)
    if key is not None and key.current_level:
        item.setBackground(QBrush(QColor(colour)))
        item.setForeground(QBrush(QColor("white")))
        font = item.font()
        font.setBold(True)
        item.setFont(font)
    else:
        item.setForeground(QBrush(QColor(colour or "#757575")))
    return item


def read_point_lights(mirror, state, serials: list[str]) -> dict:
    """On a worker: each rover's H, V and 3D lights (``analysis.alarms.direction_lights``)
    as the mirror's evaluation judges them (the default analysis under the mirror's rule,
    as ``devmon_sync.analyze.alarm_history`` stores it), {serial: {direction: KeyAlarm or
    None}}, or the reason in words a rover could not be judged (too few epochs)."""
    from analysis.pipeline import AnalysisOptions
    from devmon_sync.analyze.rovers import analyze_device, rovers_named

    out: dict = {}
    rovers: list | None = None
    for i, serial in enumerate(serials):
        state.check()  # closing the mirror stops it between rovers
        if rovers is None:  # the rovers read once (after the check), not once a rover
            rovers = rovers_named(mirror, serials)
        state.set_progress(100.0 * i / max(len(serials), 1), "judging the points' lights")
        try:
            analysis = analyze_device(mirror, rovers[i], AnalysisOptions())
        except ValueError as err:
            out[serial] = str(err)
            continue
        finally:
            if hasattr(mirror, "access"):  # the window's mirror, opened per read: let a
                mirror.close()  # sync or a save waiting for the file in between rovers
        out[serial] = direction_lights(analysis.alarm)
    return out


def _hint_button(text: str) -> QPushButton:
    button = QPushButton(text)
    button.setAutoDefault(False)
    return button


class OverviewView(QWidget):
    """The table of ``browse.site_overview`` rows, with a line on the mirror above it, and
    the points with alarm levels (``browse.levelled_points``) under it with their lights."""

    site_activated = Signal(str)  # uuid of the site whose row was double-clicked
    device_activated = Signal(str)  # serial number of a point at a level, clicked
    demo_requested = Signal()  # the hint's buttons
    open_requested = Signal()
    sync_requested = Signal()

    def __init__(self, parent=None) -> None:
        super().__init__(parent)
        self.header = QLabel()
        self.header.setWordWrap(True)
        self.header.setTextInteractionFlags(Qt.TextInteractionFlag.TextSelectableByMouse)
        self.table = _table(COLUMNS)
        self.table.horizontalHeader().setSectionResizeMode(
            len(COLUMNS) - 2, QHeaderView.ResizeMode.Stretch)
        self.table.cellDoubleClicked.connect(self._activated)
        self.points_label = QLabel()
        self.points = _table(POINT_COLUMNS)
        self.points.cellClicked.connect(self._point_clicked)
        self.content = QWidget()
        layout = QVBoxLayout(self.content)
        layout.setContentsMargins(0, 0, 0, 0)
        layout.addWidget(self.header)
        layout.addWidget(self.table, 1)
        layout.addWidget(self.points_label)
        layout.addWidget(self.points, 1)
        outer = QVBoxLayout(self)
        outer.addWidget(self._build_hint(), 1)
        outer.addWidget(self.content, 1)
        self._uuids: list[str | None] = []
        self._serials: list[str] = []
        self._points: list = []
        self._lights: dict = {}
        self.show_hint(NO_MIRROR_HINT)

    def _build_hint(self) -> QWidget:
        """The centred words and buttons shown instead of empty tables."""
        self.hint = QWidget()
        self.hint_label = QLabel()
        self.hint_label.setWordWrap(True)
        self.hint_label.setAlignment(Qt.AlignmentFlag.AlignCenter)
        self.hint_label.setFixedWidth(560)  # a wrapped label needs its width to know its
        # height: centred at its size hint's width it was cut after two lines
        self.demo_button = _hint_button("Run the demo")
        self.open_button = _hint_button("Open a mirror…")
        self.sync_button = _hint_button("Sync…")
        for button, signal in ((self.demo_button, self.demo_requested),
                               (self.open_button, self.open_requested),
                               (self.sync_button, self.sync_requested)):
            button.clicked.connect(lambda _=False, s=signal: s.emit())
        buttons = QHBoxLayout()
        buttons.addStretch(1)
        for button in (self.demo_button, self.open_button, self.sync_button):
            buttons.addWidget(button)
        buttons.addStretch(1)
        layout = QVBoxLayout(self.hint)
        layout.addStretch(1)
        layout.addWidget(self.hint_label, 0, Qt.AlignmentFlag.AlignHCenter)
        layout.addLayout(buttons)
        layout.addStretch(2)
        return self.hint

    def show_hint(self, text: str) -> None:
        """Say what to do instead of showing empty tables (rich text)."""
        self.hint_label.setText(text)
        self.content.hide()
        self.hint.show()

    def show_overview(self, sites: list, last_synced, revisions=None, points=None,
                      source=None) -> None:
        """Show ``browse.site_overview`` rows; ``last_synced`` from ``browse.last_synced``,
        ``revisions`` from ``browse.revisions`` (what the service changed in its past),
        ``points`` from ``browse.levelled_points`` (default: the sites' points at a level),
        ``source`` from ``browse.source_service``.  A mirror without devices shows the
        hint of what to do instead."""
        if not any(s.devices for s in sites):
            self.show_hint(EMPTY_MIRROR_HINT)
            return
        self.hint.hide()
        self.content.show()
        self.header.setText(self._header_text(sites, last_synced, revisions, source))
        self.table.setRowCount(len(sites))
        self._uuids = [s.uuid for s in sites]
        for row, s in enumerate(sites):
            self._site_row(row, s)
        if points is None:
            points = [p for s in sites for p in s.at_level]
        self._show_points(points, {p.serial_number: s.name for s in sites for p in s.at_level})

    @staticmethod
    def _header_text(sites: list, last_synced, revisions, source) -> str:
        """The line on the mirror: its sites, where and when it was last synced from, who
        is at a level, whose data stopped, and what the service revised."""
        at_level = sum(sum(s.levels.values()) for s in sites)
        stale = sum(len(s.stale) for s in sites)
        revised = revisions.sentence(local_text) if revisions is not None else ""
        synced = local_text(last_synced) if last_synced else "never"
        origin = (f"synced from <b>{html.escape(source.base_url)}</b>, last "
                  if source is not None else "last synced ")
        return (f"<b>{len(sites)} site{'s' * (len(sites) != 1)}</b> · {origin}{synced} · "
                f"{at_level} device{'s' * (at_level != 1)} at an alarm level now · "
                f"{stale} without data for 24 h. Double-click a site for its health."
                + (f"<br><b>Revised:</b> {html.escape(revised)}." if revised else ""))

    def _site_row(self, row: int, s) -> None:
        values = (s.name, s.devices, s.online, s.offline, _levels_text(s.levels),
                  ", ".join(s.stale) or "-", local_text(s.newest_data)
                  if s.newest_data else "-")
        worst = max(s.levels, key=_rank, default=None)
        for column, value in enumerate(values):
            item = QTableWidgetItem(str(value))
            if isinstance(value, int):
                item.setTextAlignment(Qt.AlignmentFlag.AlignRight
                                      | Qt.AlignmentFlag.AlignVCenter)
            if worst is not None:
                item.setBackground(_tint(worst, _rank(worst)))
            if column == COLUMNS.index("Stale (no data for 24 h)") and s.stale:
                item.setToolTip("\n".join(s.stale))
            self.table.setItem(row, column, item)

    def _show_points(self, points: list, site_of: dict) -> None:
        """The points with alarm levels, in the order given (the store's: the most severe
        first, then by name as people count), each row tinted by its level; their lights
        as known (``show_lights``)."""
        self._points = list(points)
        self._serials = [p.serial_number for p in points]
        at_level = sum(1 for p in points if p.level)
        self.points_label.setText(
            f"<b>Points with alarm levels</b> ({len(points)}): {at_level} at a level now, "
            f"the most severe first. Click one to open it." if points else
            "<b>No point has alarm levels</b>: set them with Alarms → Alarm levels….")
        self.points.setVisible(bool(points))
        self.points.setRowCount(len(points))
        for row, p in enumerate(points):
            site = getattr(p, "site_name", None) or site_of.get(p.serial_number, "")
            values = (p.level or "below levels", p.display_name, *("",) * len(LIGHTS),
                      p.serial_number, site, quantity_words(p.quantity) if p.level else "-")
            for column, value in enumerate(values):
                item = QTableWidgetItem(value)
                if p.level:
                    item.setBackground(_tint(p.level, p.rank))
                item.setToolTip(f"Open {p.display_name} in the GNSS deformation tab")
                self.points.setItem(row, column, item)
        self._fill_lights()

    def show_lights(self, lights: dict) -> None:
        """Each point's lights, {serial: {direction: KeyAlarm or None} or why none}, as
        ``read_point_lights`` judges them."""
        self._lights = dict(lights)
        self._fill_lights()

    def _fill_lights(self) -> None:
        """A light known: its cell; not known yet: "…" where a level of that direction is
        set (``keys``), "not set" where none is.  The 3D column only where a point has a
        3D level: limits are usually set on H and V."""
        from analysis.alarms import DIRECTIONS, split_key

        has_3d = False
        for row, p in enumerate(self._points):
            set_in = {d for key in getattr(p, "keys", ()) for d, components in
                      DIRECTIONS.items() if split_key(key)[1] in components}
            lights = self._lights.get(p.serial_number)
            for direction in LIGHTS:
                column = POINT_COLUMNS.index(direction)
                if isinstance(lights, dict):
                    key = lights.get(direction)
                    item = light_item(direction, key)
                    has_3d |= direction == "3D" and key is not None
                elif isinstance(lights, str):
                    item = QTableWidgetItem("no value")
                    item.setToolTip(f"Not judged: {lights}")
                elif direction in set_in:
                    item = QTableWidgetItem("…")
                    item.setToolTip("Judging this light…")
                    has_3d |= direction == "3D"
                else:
                    item = light_item(direction, None)
                self.points.setItem(row, column, item)
        self.points.setColumnHidden(POINT_COLUMNS.index("3D"), not has_3d)

    def _point_clicked(self, row: int, _column: int) -> None:
        if 0 <= row < len(self._serials):
            self.device_activated.emit(self._serials[row])

    def _activated(self, row: int, _column: int) -> None:
        if 0 <= row < len(self._uuids) and self._uuids[row]:
            self.site_activated.emit(self._uuids[row])

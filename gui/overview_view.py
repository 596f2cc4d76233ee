"""The Overview tab: every site at a glance when a mirror opens (what a monitoring desk
opens on): its devices and their connection, the rovers at each alarm level now, the devices
whose data stopped, its newest data and the mirror's last sync.  A row tinted by the worst
level reached; double-clicking a row shows that site's health.  Under it, the points at an
alarm level now, worst first, by name: one click opens the rover (what the desk looks at
first)."""

from __future__ import annotations

import html

from PySide6.QtCore import Qt, Signal
from PySide6.QtGui import QBrush, QColor
from PySide6.QtWidgets import (QAbstractItemView, QHeaderView, QLabel, QTableWidget,
                               QTableWidgetItem, QVBoxLayout, QWidget)

from analysis.alarms import quantity_words
from analysis.figure_style import level_colour
from gui.timefmt import local_text

COLUMNS = ("Site", "Devices", "Online", "Offline", "At a level now", "Stale (no data for 24 h)",
           "Newest data")
POINT_COLUMNS = ("Level", "Point", "Serial number", "Site", "Reached by")
#: The usual ladder, worst last: what orders "At a level now" and tints a row.
LADDER = ("alert", "alarm", "emergency")


def _levels_text(levels: dict) -> str:
    ordered = sorted(levels.items(), key=lambda kv: -_rank(kv[0]))
    return ", ".join(f"{n} {name}" for name, n in ordered) or "-"


def _rank(level: str) -> int:
    return LADDER.index(level) if level in LADDER else -1


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


class OverviewView(QWidget):
    """The table of ``browse.site_overview`` rows, with a line on the mirror above it."""

    site_activated = Signal(str)  # uuid of the site whose row was double-clicked
    device_activated = Signal(str)  # serial number of a point at a level, clicked

    def __init__(self, parent=None) -> None:
        super().__init__(parent)
        self.header = QLabel()
        self.header.setWordWrap(True)
        self.table = _table(COLUMNS)
        self.table.horizontalHeader().setSectionResizeMode(
            len(COLUMNS) - 2, QHeaderView.ResizeMode.Stretch)
        self.table.cellDoubleClicked.connect(self._activated)
        self.points_label = QLabel()
        self.points = _table(POINT_COLUMNS)
        self.points.cellClicked.connect(self._point_clicked)
        layout = QVBoxLayout(self)
        layout.addWidget(self.header)
        layout.addWidget(self.table, 1)
        layout.addWidget(self.points_label)
        layout.addWidget(self.points, 1)
        self._uuids: list[str | None] = []
        self._serials: list[str] = []

    def show_overview(self, sites: list, last_synced, revisions=None) -> None:
        """Show ``browse.site_overview`` rows; ``last_synced`` from ``browse.last_synced``,
        ``revisions`` from ``browse.revisions`` (what the service changed in its past)."""
        at_level = sum(sum(s.levels.values()) for s in sites)
        stale = sum(len(s.stale) for s in sites)
        revised = revisions.sentence(local_text) if revisions is not None else ""
        self.header.setText(
            f"<b>{len(sites)} site{'s' * (len(sites) != 1)}</b> · last synced "
            f"{local_text(last_synced) if last_synced else 'never'} · "
            f"{at_level} device{'s' * (at_level != 1)} at an alarm level now · "
            f"{stale} without data for 24 h. Double-click a site for its health."
            + (f"<br><b>Revised:</b> {html.escape(revised)}." if revised else ""))
        self.table.setRowCount(len(sites))
        self._uuids = [s.uuid for s in sites]
        for row, s in enumerate(sites):
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
                    tint = QColor(level_colour(worst, max(_rank(worst), 0)))
                    tint.setAlpha(60)
                    item.setBackground(QBrush(tint))
                if column == COLUMNS.index("Stale (no data for 24 h)") and s.stale:
                    item.setToolTip("\n".join(s.stale))
                self.table.setItem(row, column, item)

        self._show_points([p for s in sites for p in s.at_level], sites)

    def _show_points(self, points: list, sites: list) -> None:
        """The points at a level now, worst first (then by name), each row tinted."""
        site_of = {p.serial_number: s.name for s in sites for p in s.at_level}
        points = sorted(points, key=lambda p: (-p.rank, p.display_name.casefold()))
        self._serials = [p.serial_number for p in points]
        self.points_label.setText(
            f"<b>Points at an alarm level now</b> ({len(points)}): click one to open it."
            if points else "<b>No point is at an alarm level now.</b>")
        self.points.setVisible(bool(points))
        self.points.setRowCount(len(points))
        for row, p in enumerate(points):
            values = (p.level, p.display_name, p.serial_number, site_of[p.serial_number],
                      quantity_words(p.quantity))
            tint = QColor(level_colour(p.level, max(p.rank, 0)))
            tint.setAlpha(60)
            for column, value in enumerate(values):
                item = QTableWidgetItem(value)
                item.setBackground(QBrush(tint))
                item.setToolTip(f"Open {p.display_name} in the GNSS deformation tab")
                self.points.setItem(row, column, item)

    def _point_clicked(self, row: int, _column: int) -> None:
        if 0 <= row < len(self._serials):
            self.device_activated.emit(self._serials[row])

    def _activated(self, row: int, _column: int) -> None:
        if 0 <= row < len(self._uuids) and self._uuids[row]:
            self.site_activated.emit(self._uuids[row])

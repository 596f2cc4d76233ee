"""The site health table: one row per device, the most severe alarm level first, then by
name as people count (P2 before P10), as the store orders them, each row tinted by its
level; sortable by any column (numbers as numbers, times as times, levels by severity,
names as people count).  Beside the level now, each rover's horizontal and vertical
lights (and 3D where set), coloured as the plots colour a level, the value in words as
tooltip; the connection status coloured; a low battery flagged
(``gui.browser.LOW_BATTERY_PCT``).  It fits a laptop's window: two-line headers, the less
used columns hidden until chosen from the header's right-click menu, and times in the
site's zone named once in their header rather than in every cell.  With nothing to show
it says what to do, in the middle of the table."""

from __future__ import annotations

from dataclasses import replace
from datetime import datetime

from PySide6.QtCore import QSortFilterProxyModel, Qt
from PySide6.QtGui import QBrush, QColor, QPainter, QStandardItem, QStandardItemModel
from PySide6.QtWidgets import QAbstractItemView, QHeaderView, QMenu, QTableView

from analysis.figure_style import level_colour
from devmon_sync.store.browse import natural_key
from gui.browser import (LIGHTS, LOW_BATTERY_COLOUR, battery_low, battery_tip, light_colour,
                         light_text, light_tip, status_brush)
from gui.compact_header import CompactHeader
from gui.device_panel import format_value
from gui.timefmt import zone, zone_label

SORT_ROLE = Qt.ItemDataRole.UserRole + 10
#: Columns hidden until the user shows them (header menu): kept in the table for sorting
#: and export, but what a daily look at a site needs fits without them (the next
#: transmission gave its room to the H and V lights: the last one seen says more).
HIDDEN_BY_DEFAULT = ("device_kind", "state", "power_source", "readings_in_mirror",
                     "epochs_in_mirror", "signal_quality", "next_tx")
LIGHT_KEYS = tuple(f"light_{d}" for d in LIGHTS)  # the lights' columns, after the level
POINT_KEY = "point_number"  # the report's point number (details), first when given
TINT_ALPHA = 60  # as the Overview tints a row
NO_MIRROR_TEXT = ("No mirror open.\nRun the demo (Help → Run the demo), open a mirror "
                  "(File → Open mirror…) or sync one (File → Sync…).")
EMPTY_MIRROR_TEXT = ("This mirror holds no devices yet.\nSync it from your monitoring "
                     "service (File → Sync…): its devices and their health appear here.")


def _sort_key(value):
    if value is None:
        return float("-inf")
    if isinstance(value, datetime):
        return value.timestamp()
    if isinstance(value, (int, float)):
        return float(value)
    return natural_key(str(value))


class HealthView(QTableView):
    """Rows of ``browse.site_health``; the connection column is coloured by status."""

    def __init__(self, parent=None) -> None:
        super().__init__(parent)
        self.model_ = QStandardItemModel()
        self.proxy = QSortFilterProxyModel()
        self.proxy.setSourceModel(self.model_)
        self.proxy.setSortRole(SORT_ROLE)
        self.setModel(self.proxy)
        self.setHorizontalHeader(CompactHeader(Qt.Orientation.Horizontal, self))
        self.horizontalHeader().setSectionsClickable(True)  # a header Qt did not make is not
        self.setSortingEnabled(True)
        # no column sorted until the user clicks one: the store's order (severity, then
        # name) stands; Qt's default indicator (the first column, descending) listed Z→A
        self.horizontalHeader().setSortIndicator(-1, Qt.SortOrder.AscendingOrder)
        self.setAlternatingRowColors(True)
        self.setSelectionBehavior(QAbstractItemView.SelectionBehavior.SelectRows)
        self.setEditTriggers(QAbstractItemView.EditTrigger.NoEditTriggers)
        self.setHorizontalScrollMode(QAbstractItemView.ScrollMode.ScrollPerPixel)
        self.setTextElideMode(Qt.TextElideMode.ElideMiddle)
        header = self.horizontalHeader()
        header.setSectionResizeMode(QHeaderView.ResizeMode.ResizeToContents)
        header.setContextMenuPolicy(Qt.ContextMenuPolicy.CustomContextMenu)
        header.customContextMenuRequested.connect(
            lambda pos: self.column_menu().exec(header.mapToGlobal(pos)))
        self.verticalHeader().setVisible(False)
        self._hidden: set[str] = set(HIDDEN_BY_DEFAULT)  # the user's choice, by key
        self._keys: tuple[str, ...] = ()
        self._lights: dict = {}
        self.empty_text = NO_MIRROR_TEXT

    def column_menu(self) -> QMenu:
        """A checkable entry per column: what the header's right-click shows."""
        menu = QMenu(self)
        for column, key in enumerate(self._keys):
            title = self.model_.headerData(column, Qt.Orientation.Horizontal).split("\n")[0]
            action = menu.addAction(title)
            action.setCheckable(True)
            action.setChecked(not self.isColumnHidden(column))
            action.toggled.connect(lambda on, c=column, k=key: self._show_column(c, k, on))
        return menu

    def _show_column(self, column: int, key: str, shown: bool) -> None:
        (self._hidden.discard if shown else self._hidden.add)(key)
        self.setColumnHidden(column, not shown)

    def show_table(self, table, tz_name: str | None = None,
                   points: dict[str, str] | None = None) -> None:
        """Show a ``browse.HealthTable`` (its ``labels`` as two-line headers, times in
        ``tz_name``'s zone, named in their headers), each rover's lights beside its level
        (as known: ``show_lights``).  ``points``: {serial: point number} of the report's
        details: a first column "Point" then (P2 before P10 when sorted by it)."""
        # clear() deletes the header items too, but PySide keeps alive any wrapper it made of
        # one (``horizontalHeaderItem``) with the model: a stale wrapper whose address a new
        # QAction could take (the window crashed on closing, 2026-11-28); hence setHeaderData
        self.model_.clear()
        if not table.rows:  # every device of the mirror: none yet
            self.empty_text = EMPTY_MIRROR_TEXT
        if points:
            table = _with_points(table, points)
        keys, labels = _with_lights(tuple(table.keys), tuple(table.labels))
        self._keys = keys
        self.model_.setHorizontalHeaderLabels([_header(label, tz_name) for label in labels])
        for column, key in enumerate(keys):  # no wrapper of a header item is kept: see below
            if key in LIGHT_KEYS:
                self.model_.setHeaderData(column, Qt.Orientation.Horizontal,
                                          _light_header_tip(key), Qt.ItemDataRole.ToolTipRole)
        ranks = tuple(table.alarm_ranks) or (None,) * len(table.rows)
        for row, rank in zip(table.rows, ranks):
            self.model_.appendRow(self._row(dict(zip(table.keys, row)), rank, tz_name))
        for column, key in enumerate(self._keys):
            self.setColumnHidden(column, key in self._hidden)
        self._lights_beside_the_level()
        if "display_name" in self._keys:  # the name takes the room the others leave
            self.horizontalHeader().setSectionResizeMode(
                self._keys.index("display_name"), QHeaderView.ResizeMode.Stretch)
        self._fill_lights()
        self.viewport().update()

    def _lights_beside_the_level(self) -> None:
        """The lights' columns, last in the model (a column of the store's table keeps its
        index), are shown right after the level now."""
        if "alarm_level" not in self._keys:
            return
        header = self.horizontalHeader()
        anchor = self._keys.index("alarm_level")
        for i, key in enumerate(LIGHT_KEYS):
            target = header.visualIndex(anchor) + 1 + i
            where = header.visualIndex(self._keys.index(key))
            if where != target:
                header.moveSection(where, target)

    def _row(self, values: dict, rank: int | None, tz_name: str | None) -> list:
        """One device's cells, tinted by its level now (the lights keep their own colour)."""
        level = values.get("alarm_level")
        tint = None
        if level:
            colour = QColor(level_colour(level, max(rank or 0, 0)))
            colour.setAlpha(TINT_ALPHA)
            tint = QBrush(colour)
        items = []
        for key in self._keys:
            item = (QStandardItem("") if key in LIGHT_KEYS
                    else self._cell(key, values.get(key), values, rank, tz_name))
            if key in LIGHT_KEYS:
                item.setData(values["serial_number"], Qt.ItemDataRole.UserRole)
            if tint is not None:
                item.setBackground(tint)
            items.append(item)
        return items

    @staticmethod
    def _cell(key: str, value, values: dict, rank: int | None,
              tz_name: str | None) -> QStandardItem:
        item = QStandardItem(_cell_text(value, tz_name))
        item.setData(_sort_key(value), SORT_ROLE)
        if key == "display_name":
            item.setToolTip(str(value))
        elif key == "alarm_level":  # by severity, not by the spelling of the level
            item.setData(-1 if rank is None or not value else rank, SORT_ROLE)
        elif key == "battery_pct" and battery_low(value):
            item.setText(f"{item.text()} low")
            item.setForeground(QBrush(QColor(LOW_BATTERY_COLOUR)))
            item.setToolTip(battery_tip(value))
            font = item.font()
            font.setBold(True)
            item.setFont(font)
        if isinstance(value, (int, float)) and not isinstance(value, bool):
            item.setTextAlignment(Qt.AlignmentFlag.AlignRight | Qt.AlignmentFlag.AlignVCenter)
        if key.lower().startswith("connection"):
            item.setForeground(status_brush(value))
        return item

    def show_lights(self, lights: dict) -> None:
        """Each rover's lights, {serial: {direction: KeyAlarm or None} or why none}."""
        self._lights = dict(lights)
        self._fill_lights()

    def _fill_lights(self) -> None:
        """The lights' cells of the rovers judged; a device that is no rover with levels
        keeps empty cells (no light applies to it)."""
        columns = [(c, k[len("light_"):]) for c, k in enumerate(self._keys) if k in LIGHT_KEYS]
        if not columns:
            return
        has_3d = False
        for row in range(self.model_.rowCount()):
            serial = self.model_.item(row, columns[0][0]).data(Qt.ItemDataRole.UserRole)
            lights = self._lights.get(serial)
            for column, direction in columns:
                item = self.model_.item(row, column)
                if isinstance(lights, dict):
                    key = lights.get(direction)
                    _light_cell(item, direction, key)
                    has_3d |= direction == "3D" and key is not None
                elif isinstance(lights, str):
                    item.setText("no value")
                    item.setToolTip(f"Not judged: {lights}")
        self.setColumnHidden(self._keys.index("light_3D"),
                             not has_3d or "light_3D" in self._hidden)

    def paintEvent(self, event) -> None:
        """The table, or in its middle what to do when it has no row."""
        super().paintEvent(event)
        if self.proxy.rowCount():
            return
        painter = QPainter(self.viewport())
        painter.setPen(self.palette().placeholderText().color())
        painter.drawText(self.viewport().rect().adjusted(24, 24, -24, -24),
                         int(Qt.AlignmentFlag.AlignCenter | Qt.TextFlag.TextWordWrap),
                         self.empty_text)
        painter.end()


def _with_points(table, points: dict[str, str]):
    """``table`` with a first column, the report's point number of each device ("-", as
    any empty cell, for a device the details do not number)."""
    serial = table.keys.index("serial_number")
    return replace(table, keys=(POINT_KEY,) + tuple(table.keys),
                   labels=("Point",) + tuple(table.labels),
                   rows=[[points.get(row[serial])] + list(row) for row in table.rows])


def _with_lights(keys: tuple[str, ...], labels: tuple[str, ...]) -> tuple[tuple, tuple]:
    """The table's keys and labels, then the lights' columns (shown after the level now:
    ``HealthView._lights_beside_the_level``)."""
    return keys + LIGHT_KEYS, labels + LIGHTS


def _light_header_tip(key: str) -> str:
    direction = key[len("light_"):]
    words = {"H": "horizontal", "V": "vertical", "3D": "3D"}[direction]
    return (f"The {words} light of a rover: the level its {words} displacement or velocity "
            f"is at now, 'below' its levels, or 'not set' (no {words} level applies).")


def _light_cell(item: QStandardItem, direction: str, key) -> None:
    """A light's cell: its word, filled with its level's colour, green below its levels,
    grey "not set"; the value in words as tooltip; sorted by the level's rank."""
    item.setText(light_text(key))
    item.setToolTip(light_tip(direction, key))
    item.setTextAlignment(Qt.AlignmentFlag.AlignCenter)
    item.setData(-1 if key is None else key.rank, SORT_ROLE)
    colour = light_colour(key)
    if key is not None and key.current_level:
        item.setBackground(QBrush(QColor(colour)))
        item.setForeground(QBrush(QColor("white")))
    else:
        item.setForeground(QBrush(QColor(colour or "#757575")))


def _header(label: str, tz_name: str | None) -> str:
    """``Last seen (UTC)`` as ``Last seen`` over ``(Europe/Zurich)``: the zone the cells are
    in; any other ``Name (unit)`` on two lines."""
    label = label.replace("(UTC)", f"({zone_label(tz_name)})")
    name, sep, rest = label.partition(" (")
    return f"{name}\n({rest}" if sep else label


def _cell_text(value, tz_name: str | None) -> str:
    """A time without its zone (the header names it); anything else as ``format_value``."""
    if isinstance(value, datetime):
        return value.astimezone(zone(tz_name)).strftime("%Y-%m-%d %H:%M")
    return format_value(value, "", tz_name)

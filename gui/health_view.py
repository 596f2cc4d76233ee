"""The site health table: one row per device, sortable by any column (numbers as numbers,
times as times), connection status coloured.  It fits a laptop's window: two-line headers,
the less used columns hidden until chosen from the header's right-click menu, and times in
the site's zone named once in their header rather than in every cell."""

from __future__ import annotations

from datetime import datetime

from PySide6.QtCore import QSortFilterProxyModel, Qt
from PySide6.QtGui import QStandardItem, QStandardItemModel
from PySide6.QtWidgets import QAbstractItemView, QHeaderView, QMenu, QTableView

from gui.browser import status_brush
from gui.compact_header import CompactHeader
from gui.device_panel import format_value
from gui.timefmt import zone, zone_label

SORT_ROLE = Qt.ItemDataRole.UserRole + 10
#: Columns hidden until the user shows them (header menu): kept in the table for sorting
#: and export, but what a daily look at a site needs fits without them.
HIDDEN_BY_DEFAULT = ("device_kind", "state", "power_source", "readings_in_mirror",
                     "epochs_in_mirror", "signal_quality")


def _sort_key(value):
    if value is None:
        return float("-inf")
    if isinstance(value, datetime):
        return value.timestamp()
    if isinstance(value, (int, float)):
        return float(value)
    return str(value).lower()


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
        self.setSortingEnabled(True)
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

    def show_table(self, table, tz_name: str | None = None) -> None:
        """Show a ``browse.HealthTable`` (its ``labels`` as two-line headers, times in
        ``tz_name``'s zone, named in their headers)."""
        self.model_.clear()
        self._keys = tuple(table.keys)
        self.model_.setHorizontalHeaderLabels([_header(label, tz_name)
                                               for label in table.labels])
        for row in table.rows:
            items = []
            for column, value in zip(table.keys, row):
                item = QStandardItem(_cell_text(value, tz_name))
                if column == "display_name":
                    item.setToolTip(str(value))
                item.setData(_sort_key(value), SORT_ROLE)
                if isinstance(value, (int, float)) and not isinstance(value, bool):
                    item.setTextAlignment(Qt.AlignmentFlag.AlignRight
                                          | Qt.AlignmentFlag.AlignVCenter)
                if column.lower().startswith("connection"):
                    item.setForeground(status_brush(value))
                items.append(item)
            self.model_.appendRow(items)
        for column, key in enumerate(self._keys):
            self.setColumnHidden(column, key in self._hidden)
        if "display_name" in self._keys:  # the name takes the room the others leave
            self.horizontalHeader().setSectionResizeMode(
                self._keys.index("display_name"), QHeaderView.ResizeMode.Stretch)


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

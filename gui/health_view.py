"""The site health table: one row per device, sortable by any column (numbers as numbers,
times as times), connection status coloured."""

from __future__ import annotations

from datetime import datetime

from PySide6.QtCore import QSortFilterProxyModel, Qt
from PySide6.QtGui import QStandardItem, QStandardItemModel
from PySide6.QtWidgets import QAbstractItemView, QHeaderView, QTableView

from gui.browser import status_brush
from gui.device_panel import format_value

SORT_ROLE = Qt.ItemDataRole.UserRole + 10


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
        self.setSortingEnabled(True)
        self.setAlternatingRowColors(True)
        self.setSelectionBehavior(QAbstractItemView.SelectionBehavior.SelectRows)
        self.setEditTriggers(QAbstractItemView.EditTrigger.NoEditTriggers)
        self.horizontalHeader().setSectionResizeMode(QHeaderView.ResizeMode.ResizeToContents)
        self.verticalHeader().setVisible(False)

    def show_table(self, table, tz_name: str | None = None) -> None:
        """Show a ``browse.HealthTable`` (its ``labels`` as headers)."""
        self.model_.clear()
        self.model_.setHorizontalHeaderLabels(list(table.labels))
        for row in table.rows:
            items = []
            for column, value in zip(table.keys, row):
                item = QStandardItem(format_value(value, "", tz_name))
                item.setData(_sort_key(value), SORT_ROLE)
                if isinstance(value, (int, float)) and not isinstance(value, bool):
                    item.setTextAlignment(Qt.AlignmentFlag.AlignRight
                                          | Qt.AlignmentFlag.AlignVCenter)
                if column.lower().startswith("connection"):
                    item.setForeground(status_brush(value))
                items.append(item)
            self.model_.appendRow(items)

"""A sortable table header whose sections are only as wide as their text: the GNSS velocity
table and Site health share it so both fit a laptop's window."""

from __future__ import annotations

from PySide6.QtCore import QSize
from PySide6.QtWidgets import QHeaderView, QStyle


class CompactHeader(QHeaderView):
    """A sortable header whose sections are as wide as their text.  Qt widens every section
    of a sortable header by the header's height for the sort arrow (some 50 px for a
    three-line header, 500 px over the table); only the sorted section shows the arrow, in a
    box half the header's height."""

    def sectionSizeFromContents(self, logical: int) -> QSize:
        size = super().sectionSizeFromContents(logical)
        if self.isSortIndicatorShown():
            margin = self.style().pixelMetric(QStyle.PixelMetric.PM_HeaderMargin, None, self)
            arrow = size.height() // 2 + 2 * margin if logical == self.sortIndicatorSection() \
                else 0
            text = str(self.model().headerData(logical, self.orientation()) or "")
            needed = max(self.fontMetrics().horizontalAdvance(line)
                         for line in text.split("\n")) + 2 * margin + arrow
            size.setWidth(max(size.width() - size.height() - margin + arrow, needed))
        return size

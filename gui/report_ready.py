"""A written report, as the app announces it: where it is, buttons to open it or its folder,
and (after the demo) the rovers it covers, fastest first.

Why a dialog and not just a status-bar line: the report is what the engineer came for; it
must be one click away, and if no PDF viewer can be started they must be told where the file
is instead of seeing nothing happen.
"""

from __future__ import annotations

from pathlib import Path

from PySide6.QtCore import Qt
from PySide6.QtWidgets import (QAbstractItemView, QDialog, QDialogButtonBox, QHeaderView,
                               QLabel, QPushButton, QTableWidget, QTableWidgetItem,
                               QVBoxLayout)

from analysis.pipeline import plus_minus
from devmon_sync.demo import MOVING_MIN_MM_PER_YR, failure_forecast_text, is_moving
from gui.desktop import SystemOpener

#: (header, tooltip) of the rover table's columns.
ROVER_COLUMNS = (
    ("Rover", "the device's name"), ("Serial", "the device's serial number"),
    ("State", f"moving: horizontal rate above {MOVING_MIN_MM_PER_YR:g} mm/yr and above twice "
              f"its uncertainty"),
    ("Velocity (mm/yr)", "horizontal velocity over the whole record (MIDAS), ± 1 sigma"),
    ("Displacement (mm)", "3D displacement from the first epoch to the last"),
    ("Alarm", "the highest alarm level reached"),
    ("Failure forecast (UTC)", "inverse-velocity (Fukuzono) forecast, where the rover "
                               "accelerates"))


def rover_row(summary: dict) -> tuple[str, ...]:
    """One rover's row in the table, from ``RoverAnalysis.summary()``."""
    return (summary["display_name"], summary["serial_number"],
            "moving" if is_moving(summary) else "stable",
            plus_minus(summary["velocity_mm_per_yr"].get("horizontal"), 1, signed=False),
            f"{summary['displacement_mm']['3d']:.1f}", summary["alarm_level"] or "none",
            failure_forecast_text(summary) or "-")


class ReportReadyDialog(QDialog):
    """Non-modal: the report at ``pdf``, with Open report / Show folder / Close."""

    def __init__(self, title: str, summary: str, pdf: Path, parent=None,
                 rovers: list[dict] | None = None) -> None:
        super().__init__(parent)
        self.setWindowTitle(title)
        self.setAttribute(Qt.WidgetAttribute.WA_DeleteOnClose)
        self.pdf = Path(pdf)
        self.opener = SystemOpener(self)
        self.opener.finished.connect(self._opened)
        layout = QVBoxLayout(self)
        text = QLabel(summary)
        text.setWordWrap(True)
        text.setTextInteractionFlags(Qt.TextInteractionFlag.TextSelectableByMouse)
        layout.addWidget(text)
        if rovers:
            self.table = _rover_table(rovers)
            layout.addWidget(self.table)
        self.problem = QLabel()
        self.problem.setWordWrap(True)
        self.problem.setStyleSheet("color: #b00020;")
        self.problem.setTextInteractionFlags(Qt.TextInteractionFlag.TextSelectableByMouse)
        self.problem.hide()
        layout.addWidget(self.problem)
        buttons = QDialogButtonBox(QDialogButtonBox.StandardButton.Close)
        self.open_button = QPushButton("&Open report")
        self.folder_button = QPushButton("Show &folder")
        buttons.addButton(self.open_button, QDialogButtonBox.ButtonRole.ActionRole)
        buttons.addButton(self.folder_button, QDialogButtonBox.ButtonRole.ActionRole)
        self.open_button.clicked.connect(self.open_report)
        self.folder_button.clicked.connect(self.show_folder)
        buttons.rejected.connect(self.reject)
        layout.addWidget(buttons)
        self.open_button.setDefault(True)
        self.open_button.setFocus()
        self.resize(980 if rovers else 560, self.sizeHint().height())

    def open_report(self) -> None:
        """The PDF in the system's viewer; ``opener.finished`` tells how it went."""
        self.opener.open(self.pdf)

    def show_folder(self) -> None:
        self.opener.open(self.pdf.parent)

    def _opened(self, _path: str, problem: str) -> None:
        if not problem:
            self.problem.hide()
        elif not self.pdf.exists():
            self._tell(f"{self.pdf} is gone (moved or deleted since it was written).")
        else:
            self._tell(f"Not opened: {problem}.")

    def _tell(self, text: str) -> None:
        self.problem.setText(text)
        self.problem.show()


def _rover_table(rovers: list[dict]) -> QTableWidget:
    table = QTableWidget(len(rovers), len(ROVER_COLUMNS))
    for col, (header, tip) in enumerate(ROVER_COLUMNS):
        item = QTableWidgetItem(header)
        item.setToolTip(tip)
        table.setHorizontalHeaderItem(col, item)
    table.setEditTriggers(QAbstractItemView.EditTrigger.NoEditTriggers)
    table.verticalHeader().hide()
    for row, summary in enumerate(rovers):
        for col, value in enumerate(rover_row(summary)):
            item = QTableWidgetItem(value)
            if col >= 3:
                item.setTextAlignment(Qt.AlignmentFlag.AlignRight | Qt.AlignmentFlag.AlignVCenter)
            table.setItem(row, col, item)
    table.horizontalHeader().setSectionResizeMode(QHeaderView.ResizeMode.ResizeToContents)
    table.setMinimumHeight(min(420, 30 + 26 * len(rovers)))
    return table

"""The Report details dialog of File → Export report: the title block (project, client,
report number, revision, date, prepared by, checked by), the engineer's comments and a
details file (the TOML file ``devmon report --details`` reads, which also gives the site's
point numbers).

What is typed here wins over the file field by field (``ReportDetails.over``, as the
command's options win over ``--details``).  Loading a file fills the fields that are empty
(or that the file loaded before had filled); a field left empty stays empty and the report
leaves its box to fill in by hand.  A file that cannot be read is said in the dialog in the
words of its ``ReportError``, and OK waits until it is fixed or its path cleared.

What was given is remembered per mirror (``Settings.report_details``), except what the
file supplied, so that a later change to the file shows next time; the date is not
remembered (it belongs to one issue of a report).  ``remembered_details`` is what the
GNSS tab's plan view numbers its points with.
"""

from __future__ import annotations

from datetime import date, datetime, timezone
from pathlib import Path

from PySide6.QtCore import QDate, QEvent, Qt, Signal
from PySide6.QtWidgets import (QCheckBox, QDateEdit, QDialog, QDialogButtonBox, QFileDialog,
                               QFormLayout, QHBoxLayout, QLabel, QLineEdit, QPlainTextEdit,
                               QPushButton, QVBoxLayout)

from devmon_sync.report.details import TITLE_FIELDS, ReportDetails, load_details
from devmon_sync.report.errors import ReportError
from gui.gnss_controls import ERROR_STYLE, HINT_STYLE
from gui.settings import Settings

#: The one-line text fields, in the order of the cover's title block (its labels).
LINE_FIELDS = tuple((key, label) for key, label in TITLE_FIELDS if key != "date")
TEXT_KEYS = tuple(key for key, _ in LINE_FIELDS) + ("comments",)
DATE_LABEL = dict(TITLE_FIELDS)["date"]
FILE_FILTER = "Report details (*.toml);;All files (*)"


def typed_details(values: dict[str, str]) -> ReportDetails:
    """The ``ReportDetails`` of texts by field name (``Settings.report_details``); an empty
    text is not given."""
    return ReportDetails(**{key: (values.get(key) or "").strip() or None for key in TEXT_KEYS})


def remembered_details(settings: Settings | None, mirror_path: str | None) -> ReportDetails:
    """The details last given for this mirror over those of its details file; a file that
    cannot be read now adds nothing (the dialog says why when it is next opened)."""
    if settings is None:
        return ReportDetails()
    values = settings.report_details(mirror_path)
    try:
        base = load_details(values["file"]) if values["file"] else ReportDetails()
    except ReportError:
        base = ReportDetails()
    return typed_details(values).over(base)


def _today_utc() -> date:
    return datetime.now(timezone.utc).date()


class ReportDetailsDialog(QDialog):
    """Window-modal, not blocking: ``chosen`` carries the ``ReportDetails`` when OK is
    pressed (and the values are remembered for ``mirror_path``); Cancel: nothing."""

    chosen = Signal(object)  # a devmon_sync.report.details.ReportDetails

    def __init__(self, settings: Settings, mirror_path: str | None, parent=None) -> None:
        super().__init__(parent)
        self.setWindowTitle("Report details")
        self.settings = settings
        self.mirror_path = mirror_path
        self.file_details = ReportDetails()  # of the file loaded last (none: empty)
        self._build()
        self._fill(settings.report_details(mirror_path))

    # ------------------------------------------------------------------ building

    def _build(self) -> None:
        self.file_edit = QLineEdit()
        self.file_edit.setPlaceholderText("optional: a TOML file of the site or project")
        self.file_edit.setToolTip(
            "The file devmon report --details reads: project, client, report_number, "
            "revision, author, checker, date, comments and a [points] table of device "
            "name or serial = point number. Enter loads it.")
        self.browse_button = QPushButton("Browse…")
        self.browse_button.setAutoDefault(False)
        self.browse_button.clicked.connect(self.browse)
        self.file_edit.installEventFilter(self)  # Enter: load the file
        file_row = QHBoxLayout()
        file_row.addWidget(self.file_edit, 1)
        file_row.addWidget(self.browse_button)
        self.problem = QLabel()
        self.problem.setWordWrap(True)
        self.problem.setStyleSheet(ERROR_STYLE)
        self.problem.setTextInteractionFlags(Qt.TextInteractionFlag.TextSelectableByMouse)
        self.problem.hide()
        self.file_note = QLabel()
        self.file_note.setWordWrap(True)
        self.file_note.setStyleSheet(HINT_STYLE)
        self.file_note.hide()

        self.edits: dict[str, QLineEdit] = {key: QLineEdit() for key, _ in LINE_FIELDS}
        self.date_edit = QDateEdit()
        self.date_edit.setCalendarPopup(True)
        self.date_edit.setDisplayFormat("yyyy-MM-dd")
        self.made_box = QCheckBox("the day the report is made")
        self.made_box.setToolTip("Unticked: the date typed here is the report's date as "
                                 "issued.")
        self.made_box.toggled.connect(self._made_toggled)
        date_row = QHBoxLayout()
        date_row.addWidget(self.date_edit)
        date_row.addWidget(self.made_box, 1)
        self.comments_edit = QPlainTextEdit()
        self.comments_edit.setPlaceholderText(
            "The engineer's assessment (a blank line starts a paragraph). Left empty, the "
            "report has a ruled box to write it in by hand.")
        self.comments_edit.setTabChangesFocus(True)

        form = QFormLayout()
        form.addRow("Details file:", file_row)
        form.addRow("", self.problem)
        form.addRow("", self.file_note)
        for key, label in LINE_FIELDS:
            if key == "author":  # the date comes after the revision, as on the cover
                form.addRow(f"{DATE_LABEL}:", date_row)
            form.addRow(f"{label}:", self.edits[key])
        form.addRow("Comments:", self.comments_edit)
        hint = QLabel("A field left empty is an empty box in the report, to fill in by hand. "
                      "What is typed here wins over the details file.")
        hint.setWordWrap(True)
        hint.setStyleSheet(HINT_STYLE)
        self.buttons = QDialogButtonBox(QDialogButtonBox.StandardButton.Ok
                                        | QDialogButtonBox.StandardButton.Cancel)
        self.ok_button = self.buttons.button(QDialogButtonBox.StandardButton.Ok)
        self.cancel_button = self.buttons.button(QDialogButtonBox.StandardButton.Cancel)
        self.buttons.accepted.connect(self.accept)
        self.buttons.rejected.connect(self.reject)
        layout = QVBoxLayout(self)
        layout.addLayout(form, 1)
        layout.addWidget(hint)
        layout.addWidget(self.buttons)
        self.resize(620, 600)

    def _fill(self, values: dict[str, str]) -> None:
        """The values remembered for this mirror; then the details file's where they are
        empty (a file that cannot be read now is said at once)."""
        for key, edit in self.edits.items():
            edit.setText(values.get(key, ""))
        self.comments_edit.setPlainText(values.get("comments", ""))
        self.made_box.setChecked(True)  # the date is not remembered
        self.file_edit.setText(values.get("file", ""))
        if self.file_edit.text():
            self.load_file()
        self.edits["project"].setFocus()

    def _made_toggled(self, made_day: bool) -> None:
        self.date_edit.setEnabled(not made_day)
        if made_day:
            self.date_edit.setDate(_qdate(_today_utc()))

    # ------------------------------------------------------------------ the details file

    def browse(self) -> None:
        current = self.file_edit.text().strip()
        start = (str(Path(current).parent) if current
                 else str(Path(self.mirror_path).resolve().parent) if self.mirror_path else "")
        path, _ = QFileDialog.getOpenFileName(self, "Report details file", start, FILE_FILTER)
        if path:
            self.file_edit.setText(path)
            self.load_file()

    def load_file(self) -> bool:
        """Read the file named (none: no file); its values fill the fields that are empty
        or that the previous file filled.  False, and its message shown, when it cannot
        be read."""
        path = self.file_edit.text().strip()
        try:
            new = load_details(path) if path else ReportDetails()
        except ReportError as err:
            self.problem.setText(str(err))
            self.problem.show()
            self.file_note.hide()
            return False
        self.problem.hide()
        old = self.file_details
        for key in TEXT_KEYS:
            shown = self._text(key)
            if not shown or shown == (getattr(old, key) or ""):
                self._set_text(key, getattr(new, key) or "")
        if self.made_box.isChecked() or self._date() == old.date:
            self.made_box.setChecked(new.date is None)
            if new.date is not None:
                self.date_edit.setDate(_qdate(new.date))
        self.file_details = new
        count = len(new.point_numbers)
        self.file_note.setText(f"{count} point number{'s' if count != 1 else ''} from "
                               f"{Path(path).name}." if path else "")
        self.file_note.setVisible(bool(path))
        return True

    def _text(self, key: str) -> str:
        if key == "comments":
            return self.comments_edit.toPlainText().strip()
        return self.edits[key].text().strip()

    def _set_text(self, key: str, text: str) -> None:
        if key == "comments":
            self.comments_edit.setPlainText(text)
        else:
            self.edits[key].setText(text)

    def _date(self) -> date | None:
        """The date typed; None: the day the report is made."""
        if self.made_box.isChecked():
            return None
        d = self.date_edit.date()
        return date(d.year(), d.month(), d.day())

    # ------------------------------------------------------------------ the answer

    def details(self) -> ReportDetails:
        """What is typed over what the file gives (point numbers: the file's)."""
        typed = ReportDetails(**{key: self._text(key) or None for key in TEXT_KEYS},
                              date=self._date())
        return typed.over(self.file_details)

    def remembered_values(self) -> dict[str, str]:
        """What to remember: the fields the file did not supply, and the file."""
        values = {key: self._text(key) for key in TEXT_KEYS
                  if self._text(key) != (getattr(self.file_details, key) or "")}
        values["file"] = self.file_edit.text().strip()
        return values

    def eventFilter(self, watched, event) -> bool:
        """Enter in the file's field loads the file; it does not also press OK (a line
        edit passes Enter on to the dialog's default button)."""
        if (watched is self.file_edit and event.type() == QEvent.Type.KeyPress
                and event.key() in (Qt.Key.Key_Return, Qt.Key.Key_Enter)):
            self.load_file()
            return True
        return super().eventFilter(watched, event)

    def accept(self) -> None:
        """OK: the file read again (it may have changed); the dialog stays open with the
        message when it cannot be read."""
        if not self.load_file():
            self.file_edit.setFocus()
            return
        self.settings.set_report_details(self.remembered_values(), self.mirror_path)
        details = self.details()
        super().accept()
        self.chosen.emit(details)


def _qdate(d: date) -> QDate:
    return QDate(d.year, d.month, d.day)

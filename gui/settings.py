"""What the app remembers between runs (QSettings): window layout, recent files, the last
selections.  One small wrapper so keys and types are decided in one place."""

from __future__ import annotations

import hashlib
import os
from pathlib import Path

from PySide6.QtCore import QByteArray, QSettings, QStandardPaths

MAX_RECENT = 8
#: What is remembered of a report's details, per mirror: the text fields of
#: ``devmon_sync.report.details.ReportDetails`` and the details file (not the date, which
#: belongs to one issue of a report).
REPORT_DETAIL_KEYS = ("project", "client", "report_number", "revision", "author", "checker",
                      "comments", "file")
ENV_SETTINGS_FILE = "DEVMON_GUI_SETTINGS"  # an .ini path: tests and portable installs


class Settings:
    """Typed access to the app's QSettings (an .ini file at ``path`` when given)."""

    def __init__(self, path: str | Path | None = None) -> None:
        path = path or os.environ.get(ENV_SETTINGS_FILE)
        if path:
            self.qs = QSettings(str(path), QSettings.Format.IniFormat)
        else:
            self.qs = QSettings(QSettings.Format.IniFormat, QSettings.Scope.UserScope,
                                "devmon", "devmon")

    # ------------------------------------------------------------------ files

    def recent_files(self) -> list[str]:
        value = self.qs.value("files/recent", [])
        items = [value] if isinstance(value, str) else list(value or [])
        return [str(v) for v in items if v]

    def add_recent_file(self, path: str) -> None:
        path = str(Path(path).resolve())
        items = [path] + [p for p in self.recent_files() if p != path]
        self.qs.setValue("files/recent", items[:MAX_RECENT])

    def remove_recent_file(self, path: str) -> None:
        self.qs.setValue("files/recent", [p for p in self.recent_files() if p != path])

    def last_file(self) -> str | None:
        recent = self.recent_files()
        return recent[0] if recent else None

    def export_folder(self, mirror_path: str | None = None) -> str:
        """Where the next export is offered: the folder of the last export made from this
        mirror, else the mirror's own folder (where a project's files live) when it can be
        written, else Documents (never the working directory, which for a desktop launcher
        is arbitrary)."""
        folder = self.value(_export_key(mirror_path))
        if folder and Path(folder).is_dir():
            return str(folder)
        if mirror_path:
            beside = Path(mirror_path).resolve().parent
            if beside.is_dir() and os.access(beside, os.W_OK):
                return str(beside)
        documents = QStandardPaths.writableLocation(
            QStandardPaths.StandardLocation.DocumentsLocation)
        return documents if documents and Path(documents).is_dir() else str(Path.home())

    def set_export_folder(self, path: str, mirror_path: str | None = None) -> None:
        self.qs.setValue(_export_key(mirror_path), str(Path(path).resolve().parent))

    # ------------------------------------------------------------------ report details

    def report_details(self, mirror_path: str | None = None) -> dict[str, str]:
        """What the Report details dialog was last given for this mirror: the text of each
        of ``REPORT_DETAIL_KEYS`` (``ReportDetails``' field names, and ``file``: the details
        file), ``""`` where nothing was given."""
        key = _mirror_key("report_details", mirror_path)
        return {name: str(self.value(f"{key}/{name}", "") or "") for name in REPORT_DETAIL_KEYS}

    def set_report_details(self, values: dict[str, str], mirror_path: str | None = None) -> None:
        """Remember ``values`` (as ``report_details`` returns them) for this mirror; a key
        left out or empty is forgotten."""
        key = _mirror_key("report_details", mirror_path)
        for name in REPORT_DETAIL_KEYS:
            text = (values.get(name) or "").strip()
            if text:
                self.qs.setValue(f"{key}/{name}", text)
            else:
                self.qs.remove(f"{key}/{name}")

    # ------------------------------------------------------------------ layout and choices

    def window_state(self) -> tuple[QByteArray | None, QByteArray | None]:
        return self.qs.value("window/geometry"), self.qs.value("window/state")

    def save_window_state(self, geometry: QByteArray, state: QByteArray) -> None:
        self.qs.setValue("window/geometry", geometry)
        self.qs.setValue("window/state", state)

    def value(self, key: str, default=None):
        """A remembered choice (``selection/...``, ``gnss/...``); ``default`` when unset."""
        value = self.qs.value(key, default)
        return default if value is None else value

    def set_value(self, key: str, value) -> None:
        self.qs.setValue(key, value)

    def sync(self) -> None:
        self.qs.sync()


def _export_key(mirror_path: str | None) -> str:
    """The setting holding the last export folder of one mirror (by its resolved path)."""
    return _mirror_key("files/export_folder", mirror_path)


def _mirror_key(prefix: str, mirror_path: str | None) -> str:
    """``prefix`` for one mirror (by its resolved path); ``prefix`` alone without one."""
    if not mirror_path:
        return prefix
    digest = hashlib.sha1(str(Path(mirror_path).resolve()).encode()).hexdigest()[:16]
    return f"{prefix}/{digest}"

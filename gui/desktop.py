"""The desktop around the app: opening files in the system's programs, the app's icon."""

from __future__ import annotations

import os
from importlib import resources

from PySide6.QtCore import QUrl
from PySide6.QtGui import QDesktopServices, QIcon

from devmon_sync.external_apps import system_library_environment


def open_in_system(path: str | os.PathLike) -> bool:
    """Open a file (the PDF viewer) or folder (the file manager) the way the desktop does;
    False when no program could be started.  From the frozen app the program gets the
    system's libraries, not the app's (``devmon_sync.external_apps``)."""
    with system_library_environment():
        return bool(QDesktopServices.openUrl(QUrl.fromLocalFile(os.fspath(path))))


def app_icon() -> QIcon:
    """devmon's icon (``gui/resources/devmon.png``, drawn by ``packaging/make_icon.py``), for
    the windows and the task bar."""
    return QIcon(str(resources.files("gui") / "resources" / "devmon.png"))

"""The desktop around the app: opening files in the system's programs, the app's icon."""

from __future__ import annotations

import os
import threading
from importlib import resources

from PySide6.QtCore import QObject, Signal
from PySide6.QtGui import QIcon

from devmon_sync.external_apps import open_with_system


class SystemOpener(QObject):
    """Opens a file (the PDF viewer) or folder (the file manager) in the system's program,
    off the GUI thread: the opener takes a moment to say whether it found a program (on a
    desktop without one it says so only by its exit status, which Qt's own opener does not
    wait for), and the window must not freeze meanwhile.  From the frozen app the program
    gets the system's libraries, not the app's (``devmon_sync.external_apps``)."""

    finished = Signal(str, str)  # the path, and why it was not opened ('' when it was)

    def open(self, path: str | os.PathLike) -> None:
        threading.Thread(target=self._run, args=(os.fspath(path),), daemon=True,
                         name="devmon-open").start()

    def _run(self, path: str) -> None:
        self.finished.emit(path, open_with_system(path) or "")


def app_icon() -> QIcon:
    """devmon's icon (``gui/resources/devmon.png``, drawn by ``packaging/make_icon.py``), for
    the windows and the task bar."""
    return QIcon(str(resources.files("gui") / "resources" / "devmon.png"))

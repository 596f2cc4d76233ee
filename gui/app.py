"""Start the desktop app: one QApplication, one main window."""

from __future__ import annotations

import gc
import signal
import sys

from PySide6.QtCore import QTimer
from PySide6.QtWidgets import QApplication

#: Windows' identity of the app for the task bar; packaging/windows/devmon.iss gives its
#: shortcuts the same one.
APP_USER_MODEL_ID = "devmon.devmon"


def make_app() -> QApplication:
    """The QApplication (created once; reused in tests and when already running)."""
    app = QApplication.instance() or QApplication(sys.argv[:1])
    app.setApplicationName("devmon")
    app.setOrganizationName("devmon")
    app.setApplicationDisplayName("devmon")
    app.setDesktopFileName("devmon")  # Wayland: the menu entry packaging/linux/devmon.desktop
    from gui.desktop import app_icon

    app.setWindowIcon(app_icon())
    if sys.platform == "win32":  # the task bar groups and badges devmon, not python.exe
        import ctypes

        ctypes.windll.shell32.SetCurrentProcessExplicitAppUserModelID(APP_USER_MODEL_ID)
    return app


def run(db_path: str | None = None) -> int:
    """Open the main window on ``db_path`` (else the last file) and run until it closes."""
    app = make_app()
    from gui.main_window import MainWindow

    window = MainWindow()
    window.show()
    window.open_initial(db_path)
    waker = _close_on_signals(window)  # noqa: F841 - kept alive while the loop runs
    status = app.exec()
    gc.unfreeze()  # let the interpreter free everything at exit (see MainWindow)
    return status


def _close_on_signals(window) -> QTimer:
    """SIGTERM (a session ending, `kill`) and Ctrl-C close the window as its close button
    does: settings saved, running tasks stopped, the mirror left whole.  Python handles a
    signal only when it runs, so a timer wakes it twice a second inside Qt's loop."""
    def close(signum, frame) -> None:
        window.close()
        QApplication.quit()

    for signum in (signal.SIGTERM, signal.SIGINT):
        signal.signal(signum, close)
    waker = QTimer()
    waker.timeout.connect(lambda: None)
    waker.start(500)
    return waker

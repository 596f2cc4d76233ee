"""``devmon gui`` and the ``devmon-gui`` launcher.

Loaded by ``devmon_sync.cli`` by name (see ``COMMAND_PLUGINS``): this module imports no Qt at
import time, so ``devmon`` works where PySide6 is not installed and says what to install when
the GUI is asked for.
"""

from __future__ import annotations

import os
import sys
from ctypes.util import find_library

from devmon_sync.cli.args import UsageError

#: Qt platforms that need no display server (tests, screenshots, remote frame buffers).
HEADLESS_PLATFORMS = ("offscreen", "minimal", "vnc", "linuxfb", "eglfs", "vkkhrdisplay")


def add_commands(sub) -> None:
    p = sub.add_parser("gui", help="open the desktop app on a mirror",
                       description="Browse, plot and analyse a mirror offline in the desktop "
                                   "app; sync it from the app's Sync dialog.")
    p.add_argument("--db", metavar="FILE",
                   help="mirror to open (default: the last one opened)")
    p.set_defaults(func=run_gui)


def why_no_window(environ=os.environ, platform: str = sys.platform,
                  frozen: bool = getattr(sys, "frozen", False)) -> str | None:
    """Why Qt could not open a window here, in words with what to do; None when it can.
    Checked before Qt starts: Qt aborts the process (exit 134, "Reinstalling the
    application may fix this problem") when it finds no display or misses libxcb-cursor0,
    the X11 library Qt 6.5+ needs and pip cannot install."""
    if not platform.startswith("linux"):
        return None
    chosen = environ.get("QT_QPA_PLATFORM", "").split(":")[0]
    if chosen in HEADLESS_PLATFORMS:
        return None
    if not environ.get("DISPLAY") and not environ.get("WAYLAND_DISPLAY"):
        return ("the desktop app needs a display, and there is none here (DISPLAY and "
                "WAYLAND_DISPLAY are not set: an SSH session without -X, a service, a "
                "container). Run it on the machine's desktop, or connect with `ssh -X`; "
                "`devmon sync`, `devmon analyze` and `devmon report` work without a display")
    uses_x11 = chosen == "xcb" or (not chosen and not environ.get("WAYLAND_DISPLAY"))
    if uses_x11 and not frozen and find_library("xcb-cursor") is None:
        return ("the desktop app needs the system library libxcb-cursor0 (Qt loads its X11 "
                "support only with it, and pip cannot install it): install it, e.g. `sudo "
                "apt install libxcb-cursor0` (Debian, Ubuntu) or `sudo dnf install "
                "xcb-util-cursor` (Fedora), then run `devmon gui` again")
    return None


def run_gui(args) -> int:
    reason = why_no_window()
    if reason:
        raise UsageError(reason)
    try:
        from gui.app import run
    except ImportError as err:
        raise UsageError(f"the desktop app needs PySide6 and matplotlib ({err}): install them "
                         f"with `python3 -m pip install 'devmon[gui]'`") from None
    return run(args.db)


def main() -> int:
    """The ``devmon-gui`` launcher: ``devmon gui`` with the same options."""
    from devmon_sync.cli import main as devmon_main

    return devmon_main(["gui", *sys.argv[1:]])

"""``devmon gui`` and the ``devmon-gui`` launcher.

Loaded by ``devmon_sync.cli`` by name (see ``COMMAND_PLUGINS``): this module imports no Qt at
import time, so ``devmon`` works where PySide6 is not installed and says what to install when
the GUI is asked for.
"""

from __future__ import annotations

import sys

from devmon_sync.cli_common import UsageError


def add_commands(sub) -> None:
    p = sub.add_parser("gui", help="open the desktop app on a mirror",
                       description="Browse, plot and analyse a mirror offline in the desktop "
                                   "app; sync it from the app's Sync dialog.")
    p.add_argument("--db", metavar="FILE",
                   help="mirror to open (default: the last one opened)")
    p.set_defaults(func=run_gui)


def run_gui(args) -> int:
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

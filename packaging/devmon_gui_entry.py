"""Entry script of the frozen ``devmon-gui`` executable (windowed): the desktop app."""

import multiprocessing
import sys

from gui.commands import main

if __name__ == "__main__":
    multiprocessing.freeze_support()
    sys.exit(main())

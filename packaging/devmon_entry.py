"""Entry script of the frozen ``devmon`` executable (console): the whole CLI."""

import multiprocessing
import sys

from devmon_sync.cli import main

if __name__ == "__main__":
    multiprocessing.freeze_support()
    sys.exit(main())

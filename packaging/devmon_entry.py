"""Entry script of the frozen ``devmon`` executable (console): the whole CLI."""

import multiprocessing
import sys

from devmon_sync.paths import keep_matplotlib_cache

if getattr(sys, "frozen", False):  # here, before freeze_support: report workers run it too
    keep_matplotlib_cache()

from devmon_sync.cli import main  # noqa: E402 (after the cache folder is set)

if __name__ == "__main__":
    multiprocessing.freeze_support()
    sys.exit(main())

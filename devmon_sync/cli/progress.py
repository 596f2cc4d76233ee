"""What the ``devmon`` commands share on the way out: progress on the terminal.

Progress goes to stderr, so that stdout (a summary, JSON, a plan) stays what a script reads:
on a terminal one line rewritten in place, elsewhere (a log, a pipe) a plain line now and
then.  ``Bar`` shows a sync's progress (``devmon sync``, ``devmon demo``), ``Counter`` the
windows ``devmon verify`` checks.
"""

from __future__ import annotations

import sys


class Bar:
    """One self-rewriting progress line on a terminal; occasional plain lines otherwise.
    Called with the sync engine's progress (phase, windows, requests, rows, ETA)."""

    def __init__(self, quiet: bool):
        self.quiet = quiet
        self.tty = sys.stderr.isatty()
        self._last = ""

    def __call__(self, p) -> None:
        if self.quiet:
            return
        eta = f", ETA {format_duration(p.eta_s)}" if p.eta_s is not None else ""
        windows = f"{p.done}/{p.total} windows, " if p.phase in ("readings", "gnss") else ""
        line = f"{p.phase:9} {windows}{p.requests} requests, {p.rows:,} rows{eta}  {p.message}"
        if self.tty:
            sys.stderr.write("\r" + line[:150].ljust(len(self._last)))
            self._last = line[:150]
        elif p.phase != self._last:
            sys.stderr.write(line + "\n")
            self._last = p.phase
        sys.stderr.flush()

    def close(self) -> None:
        """End the rewritten line (once), so other output starts on a line of its own."""
        if self.tty and self._last and not self.quiet:
            sys.stderr.write("\n")
            self._last = ""


class Counter:
    """``window N of TOTAL``, rewritten in place on a terminal (nothing elsewhere: a log
    gets the report at the end)."""

    def __init__(self, quiet: bool):
        self.quiet = quiet

    def __call__(self, done: int, total: int) -> None:
        if not self.quiet and sys.stderr.isatty():
            sys.stderr.write(f"\r  window {done + 1} of {total}")
            sys.stderr.flush()

    def close(self) -> None:
        """End the counter's line on a terminal, so the report starts on a line of its own."""
        if not self.quiet and sys.stderr.isatty():
            sys.stderr.write("\n")


def format_duration(seconds: float) -> str:
    """``1h05m`` from an hour on, else ``4m09s``."""
    seconds = int(seconds)
    return f"{seconds // 3600}h{seconds % 3600 // 60:02d}m" if seconds >= 3600 else \
        f"{seconds // 60}m{seconds % 60:02d}s"

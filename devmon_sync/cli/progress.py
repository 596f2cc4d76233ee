"""What the ``devmon`` commands share on the way out: the guard on stdout and stderr, and
progress on the terminal.

Every write of a command passes through ``PrintableStream`` (``printable_output``, set up by
``devmon_sync.cli.main``): text from the service (names, messages) may hold escape
sequences, bidi overrides and carriage returns, which are shown as visible escapes
(``devmon_sync.printable``) instead of acting on the user's terminal, whichever path printed
them.  Newlines pass, as the commands' own line breaks; the code that builds a line around a
name escapes a newline inside it (``printable(name)``).

Progress goes to stderr, so that stdout (a summary, JSON, a plan) stays what a script reads:
on a terminal one line rewritten in place, elsewhere (a log, a pipe) a plain line now and
then.  ``Bar`` shows a sync's progress (``devmon sync``, ``devmon demo``) and the client's
long waits for the rate limit, ``Counter`` the windows ``devmon verify`` checks.  Names in
columns: ``printable.fit``; counts in words: ``analysis.words.counted``.
"""

from __future__ import annotations

import sys
from collections.abc import Iterator
from contextlib import contextmanager
from typing import TextIO

from analysis.words import counted
from devmon_sync.printable import printable


class PrintableStream:
    """A text stream that writes ``printable(text, newlines=True)`` to the stream it wraps;
    everything else (``isatty``, ``fileno``, ``encoding``, ``flush``) is the wrapped one's.
    ``raw`` is the wrapped stream, for the one control devmon writes on purpose: the
    carriage return that rewrites a progress line."""

    def __init__(self, raw: TextIO) -> None:
        self.raw = raw

    def write(self, text: str) -> int:
        self.raw.write(printable(text, newlines=True))
        return len(text)

    def writelines(self, lines) -> None:
        for line in lines:
            self.write(line)

    def __getattr__(self, name: str):
        return getattr(self.raw, name)


@contextmanager
def printable_output() -> Iterator[None]:
    """stdout and stderr guarded by ``PrintableStream`` while the block runs (once: a
    command run inside another, as ``devmon demo`` runs ``devmon sync``, is guarded
    already)."""
    saved = sys.stdout, sys.stderr
    if not isinstance(sys.stdout, PrintableStream):
        sys.stdout = PrintableStream(sys.stdout)
    if not isinstance(sys.stderr, PrintableStream):
        sys.stderr = PrintableStream(sys.stderr)
    try:
        yield
    finally:
        sys.stdout, sys.stderr = saved


def _carriage_return() -> None:
    """A carriage return to the terminal itself, past the guard (which would show it as
    an escape)."""
    stream = sys.stderr
    (stream.raw if isinstance(stream, PrintableStream) else stream).write("\r")


WAIT_NOTE_S = 5.0
"""A wait for the rate limit at least this long gets a line: shorter ones pass unnoticed."""



class Bar:
    """One self-rewriting progress line on a terminal; occasional plain lines otherwise.
    Called with the sync engine's progress (phase, windows, requests, rows, ETA), and given
    to the client as its ``on_wait`` (``waiting``), so that a long wait for the rate limit
    is said instead of a line that stands still (issue 30.9)."""

    def __init__(self, quiet: bool):
        self.quiet = quiet
        self.tty = sys.stderr.isatty()
        self._last = ""
        self._line = ""  # the last progress line, which a wait's words follow on a terminal
        self._phase = ""

    def __call__(self, p) -> None:
        if self.quiet:
            return
        eta = f", ETA {format_duration(p.eta_s)}" if p.eta_s is not None else ""
        windows = f"{p.done}/{p.total} windows, " if p.phase in ("readings", "gnss") else ""
        self._line = (f"{p.phase:9} {windows}{counted(p.requests, 'request')}, "
                      f"{counted(p.rows, 'row')}{eta}")
        if self.tty:
            self._rewrite(f"{self._line}  {printable(p.message or '')}")
        elif p.phase != self._phase:
            sys.stderr.write(f"{self._line}  {printable(p.message or '')}\n")
            self._phase = p.phase
        sys.stderr.flush()

    def waiting(self, seconds: float, reason) -> None:
        """The client's ``on_wait`` (``reason``: a ``client.pacing.WaitReason``): a wait of its
        pacer (kind "pacing") of ``WAIT_NOTE_S`` or more is said,
        "waiting 38 s for the rate limit (20 requests/minute)", on the progress line of a
        terminal, else as a line of its own."""
        if self.quiet or getattr(reason, "kind", None) != "pacing" or seconds < WAIT_NOTE_S:
            return
        words = f"waiting {seconds:.0f} s for the rate limit ({reason.per_minute} requests/minute)"
        if self.tty:
            self._rewrite(f"{self._line}  {words}" if self._line else words)
        else:
            sys.stderr.write(words + "\n")
        sys.stderr.flush()

    def _rewrite(self, line: str) -> None:
        _carriage_return()
        sys.stderr.write(line[:150].ljust(len(self._last)))
        self._last = line[:150]

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
            _carriage_return()
            sys.stderr.write(f"  window {done + 1} of {total}")
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

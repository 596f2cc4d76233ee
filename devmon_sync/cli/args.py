"""What every ``devmon`` command shares: the usage error and argument types."""

from __future__ import annotations

import argparse
import os
import sys
from datetime import datetime

from devmon_sync.timestamps import parse_timestamp


class UsageError(Exception):
    """A problem with what the user asked for; its message says what to change."""


def timestamp_arg(text: str) -> datetime:
    """An ISO 8601 date-time with a timezone (or a plain date, taken as UTC midnight)."""
    if len(text) == 10 and text[4] == "-" and text[7] == "-":
        text += "T00:00:00Z"
    try:
        return parse_timestamp(text)
    except ValueError:
        raise argparse.ArgumentTypeError(
            f"{text!r} is not an ISO 8601 date-time with a timezone, e.g. 2026-01-01T00:00:00Z"
        ) from None


def check_base_url(text: str) -> None:
    """A UsageError for a base URL that is no address at all: not http(s) with a host, a
    port that is not a number from 1 to 65535, a broken IPv6 literal; checked before any
    client is built or request sent.  The text is not echoed: a key pasted into the wrong
    option would be shown.  (What the client refuses beyond this, such as plain http off
    the machine, it says itself.)"""
    from urllib.parse import urlsplit

    example = "like https://monitoring.example.com/v1"
    try:
        parts = urlsplit(text.strip())
        port = parts.port
    except ValueError as err:
        what = "a broken IPv6 address in brackets" if "IPv6" in str(err) else \
            "a port that is not a number from 1 to 65535"
        raise UsageError(f"the base URL has {what}: give the API's address, {example}") \
            from None
    if parts.scheme not in ("http", "https") or not parts.hostname:
        raise UsageError(f"the base URL is not an API address: give one that starts with "
                         f"https://, {example}")
    if port == 0:
        raise UsageError(f"the base URL has a port that is not a number from 1 to 65535: "
                         f"give the API's address, {example}")


def add_db_argument(parser, help_text: str = "mirror file") -> None:
    """``--db``: the mirror; by default the one in the user data folder
    (``devmon_sync.paths.default_mirror()``), so a new user needs no path at all."""
    from devmon_sync.paths import default_mirror

    parser.add_argument("--db", default=str(default_mirror()), metavar="FILE",
                        help=f"{help_text} (default: {default_mirror()})")


def open_existing_mirror(path: str, read_only: bool = True):
    """The mirror at ``path`` for a command that reads one: a UsageError, not a new empty
    file, when there is none, and a UsageError with the store's message when it cannot be
    opened (damaged, foreign, newer, locked)."""
    from devmon_sync.store import Mirror, StoreError

    if not os.path.exists(path):
        raise UsageError(f"no mirror at {path}: run `devmon sync --db {path}` first")
    try:
        return Mirror.open(path, read_only=read_only)
    except StoreError as err:
        raise UsageError(str(err)) from None


def add_open_argument(parser) -> None:
    """``--open``: show the written PDF in the system's viewer (``open_written``)."""
    parser.add_argument("--open", action="store_true",
                        help="open the PDF in the system's PDF viewer once it is written")


def open_written(path, command: str) -> None:
    """Open a written file for ``--open``; when no program can be started, say so (the file
    is written all the same, so this is not an error)."""
    from devmon_sync.external_apps import open_with_system

    problem = open_with_system(path)
    if problem:
        print(f"{command}: cannot open the PDF: {problem}", file=sys.stderr)

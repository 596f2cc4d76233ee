"""The mirror's errors, each saying what to do, and how DuckDB's failures are recognised
(a full disk, a dead connection, a statement cut short by a signal).

Apart from ``mirror`` so that the store's other modules (the export) raise the same errors
without importing the Mirror class they are called with."""

from __future__ import annotations

import duckdb


class StoreError(Exception):
    """A problem with the mirror file; the message says what to do."""


class MirrorLockedError(StoreError):
    """Another process has the mirror open for writing."""


class OlderSchemaError(StoreError):
    """A mirror an older devmon made, opened read-only: a read-write open upgrades it."""


class DiskFullError(StoreError):
    """The disk holding the mirror is full; everything committed before stays."""


_DISK_FULL = ("no space left on device", "not enough space on the disk", "disk is full",
              "disk full")


def _chain(err: BaseException | None) -> list[BaseException]:
    """``err`` and the exceptions it was raised during or from."""
    out: list[BaseException] = []
    while err is not None and err not in out:
        out.append(err)
        err = err.__cause__ or err.__context__
    return out


def _is_disk_full(err: BaseException) -> bool:
    return any(sign in str(e).lower() for e in _chain(err) for sign in _DISK_FULL)


def _is_fatal(err: BaseException) -> bool:
    """Whether DuckDB has given up on the database: every later use of the connection fails
    ("database has been invalidated"), so nothing may be written through it again."""
    return any(isinstance(e, (duckdb.FatalException, duckdb.ConnectionException))
               or "invalidated" in str(e) for e in _chain(err))


def interrupted_by_signal(err: BaseException) -> bool:
    """Whether ``err`` is DuckDB's own report of a statement cut short by a signal (Ctrl-C,
    or SIGTERM handled by raising): DuckDB swallows the exception the signal handler raised
    and raises this instead, so the caller that asked to stop must recognise it."""
    return any(isinstance(e, (RuntimeError, duckdb.InterruptException))
               and "interrupted" in str(e).lower() for e in _chain(err))


def _disk_full_error(path: str) -> DiskFullError:
    return DiskFullError(f"the disk holding {path} is full; free space and run the same "
                         f"command to resume (everything committed so far is kept)")

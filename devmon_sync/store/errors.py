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


class DamagedMirrorError(StoreError):
    """The mirror file is damaged (a block fails DuckDB's checksum, or the file is shorter
    than its contents): devmon reads no further and never writes to it."""


#: DuckDB's words for a damaged file: a block whose checksum does not match, a file cut
#: short (a header it cannot read is ``Mirror.open``'s "damaged or of another kind")
_DAMAGE = {"corrupt database file": "a block of data that fails its check",
           "could not read enough bytes": "the file cut short, shorter than the data it holds"}


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


def damage_of(err: BaseException) -> str | None:
    """What DuckDB found damaged in a file, in words (None: ``err`` is not damage)."""
    for e in _chain(err):
        text = str(e).lower()
        for sign, words in _DAMAGE.items():
            if sign in text:
                return words
    return None


class ForeignFileError(StoreError):
    """The file given as the mirror is another kind of file (Parquet, CSV, SQLite): DuckDB
    would open a Parquet or CSV file as an empty database in memory (a sync would write
    there and lose it all), or say so in its own words."""


#: The first bytes of files people give as --db by mistake, and what each is in words.
_FOREIGN_MAGIC = ((b"PAR1", "a Parquet file"), (b"SQLite format 3\x00", "an SQLite database"),
                  (b"PK\x03\x04", "a ZIP archive"), (b"\x1f\x8b", "a gzip-compressed file"),
                  (b"%PDF", "a PDF document"))
_DUCKDB_MAGIC_AT, _DUCKDB_MAGIC = 8, b"DUCK"


def foreign_kind(head: bytes) -> str | None:
    """What a file is, from its first bytes, when it is surely no DuckDB file: "a Parquet
    file", "an SQLite database", "a text file (CSV, JSON?)"; None for a DuckDB file, an
    empty one, or bytes nothing is known of (DuckDB's own open says what it finds)."""
    if not head or head[_DUCKDB_MAGIC_AT:_DUCKDB_MAGIC_AT + 4] == _DUCKDB_MAGIC:
        return None
    for magic, words in _FOREIGN_MAGIC:
        if head.startswith(magic):
            return words
    try:
        text = head.decode("utf-8")
    except UnicodeDecodeError:
        return None
    return "a text file (CSV, JSON?)" if "\x00" not in text else None


def foreign_file_error(path: str, kind: str) -> ForeignFileError:
    """The one line a file of another kind gets: what it is, that devmon leaves it as it
    is, and what to give instead."""
    query = f" (to query it, DuckDB reads it as it is: SELECT * FROM '{path}')" \
        if kind.startswith(("a Parquet", "a text")) else ""
    return ForeignFileError(
        f"{path} is {kind}, not a devmon mirror (a DuckDB database file); devmon leaves it "
        f"as it is. Give the mirror with --db (by default {_default_mirror()}), or a new file "
        f"name such as mirror.duckdb to start one with `devmon sync`{query}.")


def _default_mirror() -> str:
    from devmon_sync.paths import default_mirror

    return str(default_mirror())


def damaged_error(path: str, what: str) -> DamagedMirrorError:
    """The one line a damaged mirror gets: what is wrong, that nothing is written, what to
    do (the file is left as it is, for a restore or a copy-out by someone who can)."""
    return DamagedMirrorError(
        f"The mirror {path} is damaged: DuckDB found {what}. devmon reads no further and "
        f"writes nothing to it. Restore the file from a copy (a backup), or start a new "
        f"mirror with `devmon sync --db NEW.duckdb` (a full sync); the damaged file is left "
        f"as it is.")

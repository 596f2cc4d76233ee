"""Whether a mirror file is sound, checked before devmon writes to it.

DuckDB checks a block's checksum only when something reads that block, so a sync that never
reads the damaged part of a file would write on it in silence and leave a mirror that is no
longer the service's truth.  ``check`` reads every column of every table once (each block
read is checked); a damaged file raises ``DamagedMirrorError`` and is never opened for
writing.  The check costs one scan of the file (``benchmarks/bench_integrity.py``), so it is
paid only when the file may have changed since devmon last checked it or wrote it itself:
``remember_sound`` keeps the file's size and modification time in devmon's data folder
(never beside the mirror, which may be on a read-only share), and ``known_sound`` compares
them.  A copy, a restore, another program or a disk that rewrites the file changes them; a
bit that rots in place does not, and is found when it is read.

What it cannot see is what DuckDB's checksums cannot: a block's checksum XORs a hash of
each 8-byte word, so a change that alters an even number of EQUAL words in the same way
(32 zero bytes inverted; a zero-filled stretch turned to 0xFF, as an erased flash page
reads) cancels out, and DuckDB returns the altered values without an error (found on a
test mirror, DuckDB 2.0.1).  Scattered flipped bytes, a torn or cut file are caught.
"""

from __future__ import annotations

import hashlib
import json
import os
from pathlib import Path

import duckdb

from devmon_sync.paths import data_dir
from devmon_sync.store.errors import damage_of, damaged_error, foreign_file_error, foreign_kind

CHECKED_FOLDER = "checked"  # in ``paths.data_dir()``: one small JSON file per mirror


def _record_file(path: str) -> Path:
    key = hashlib.sha256(str(Path(path).resolve()).encode()).hexdigest()[:32]
    return data_dir() / CHECKED_FOLDER / f"{key}.json"


def _fingerprint(path: str) -> dict | None:
    """Size and modification time of the file; None while a write-ahead log lies beside it
    (its replay will change the file)."""
    if Path(f"{path}.wal").exists():
        return None
    st = os.stat(path)
    return {"size": st.st_size, "mtime_ns": st.st_mtime_ns}


def known_sound(path: str) -> bool:
    """Whether the file is as devmon last checked or wrote it (so need not be read again)."""
    try:
        fingerprint = _fingerprint(path)
        return fingerprint is not None and json.loads(
            _record_file(path).read_text(encoding="utf-8")) == fingerprint
    except (OSError, ValueError):
        return False


def remember_sound(path: str) -> None:
    """Remember the file as sound as it is now.  Best effort: a folder devmon cannot write
    costs a check at the next open, nothing else."""
    try:
        fingerprint = _fingerprint(path)
        if fingerprint is None:
            return
        record = _record_file(path)
        record.parent.mkdir(parents=True, exist_ok=True)
        record.write_text(json.dumps(fingerprint), encoding="utf-8")
    except OSError:
        pass


def check(con: duckdb.DuckDBPyConnection, path: str, database: str | None = None) -> None:
    """Read every column of every table of ``database`` (default: ``con``'s own) once;
    ``DamagedMirrorError`` when DuckDB finds a block damaged or missing.  Read through a
    connection of its own (``attach_and_check``): another connection of this process to the
    same file would share its cached blocks and hide a block damaged since they were read."""
    db = database or con.execute("SELECT current_database()").fetchone()[0]
    tables = con.execute("SELECT schema_name, table_name FROM duckdb_tables() "
                         "WHERE NOT internal AND database_name = ? ORDER BY ALL", [db]).fetchall()
    columns = con.execute("SELECT schema_name, table_name, column_name FROM duckdb_columns() "
                          "WHERE NOT internal AND database_name = ? ORDER BY ALL",
                          [db]).fetchall()
    for schema, table in tables:
        names = [c for s, t, c in columns if (s, t) == (schema, table)]
        reads = ", ".join(["count(*)"] + [f'sum(hash("{_ident(c)}"))' for c in names])
        try:
            con.execute(f'SELECT {reads} FROM "{_ident(db)}"."{_ident(schema)}".'
                        f'"{_ident(table)}"').fetchall()
        except duckdb.Error as err:
            what = damage_of(err)
            if what is None:
                raise
            raise damaged_error(path, what) from None


def attach_and_check(path: str, memory_limit: str) -> bool:
    """``check`` the file through a fresh in-memory DuckDB that attaches it read-only (its
    own file handle and cache: never blocks this process read before).  False when it
    cannot be attached for another reason than damage (this process or another writes it,
    or it is not a DuckDB file): the open that follows says which; True once checked.  A
    file that is surely of another kind (Parquet, CSV, SQLite: ``errors.foreign_kind``) is a
    ``ForeignFileError`` before DuckDB sees it: it would open a Parquet or CSV file as an
    empty database in memory.  ``memory_limit``: DuckDB's, as for the mirror."""
    refuse_foreign(path)
    mem = duckdb.connect(":memory:")
    # the mirror's budget here too: unset, DuckDB cached what the scan read, up to 80 % of
    # the RAM (2.0 GB for a 2 GB mirror of 100M readings, 2026-11-28)
    mem.execute(f"SET memory_limit = '{_literal(memory_limit)}'")
    try:
        try:
            mem.execute(f"ATTACH '{_literal(path)}' AS checked_mirror (READ_ONLY)")
        except duckdb.Error as err:
            if damage_of(err):
                raise damaged_error(path, damage_of(err)) from None
            return False
        check(mem, path, "checked_mirror")
        return True
    finally:
        mem.close()


def refuse_foreign(path: str) -> None:
    """A ``ForeignFileError`` when the file at ``path`` is surely no DuckDB file (its first
    bytes say what it is); nothing for a DuckDB file, a missing or unreadable one."""
    try:
        with open(path, "rb") as f:
            head = f.read(64)
    except OSError:
        return
    kind = foreign_kind(head)
    if kind is not None:
        raise foreign_file_error(path, kind)


def _literal(text: str) -> str:
    return text.replace("'", "''")


def _ident(name: str) -> str:
    return name.replace('"', '""')

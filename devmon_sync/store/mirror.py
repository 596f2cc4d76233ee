"""The mirror: one DuckDB file, and every SQL statement devmon runs on it.

Exactly once: each chunk of data replaces the server's truth for its streams and window and
moves their cursors, in one transaction (a ledger of windows per stream), with the other
chunks of its group during a sync (``Mirror.grouped``: the ledger, statistics and summaries
of a group written once).  A crash at any moment leaves the file as it was after the last
committed group; running the sync again resumes from the cursors and ends with the same
mirror an uninterrupted run gives.

Size: over 800 lines, because ``Mirror`` is the store's one writer: opening and migrating
the file, the transaction that commits a group of windows with their ledger rows and
cursors, runs and the status text share one connection and one failure handling
(``_writes``, and ``_settled`` for the reads that must see the group).  What only
reads lives in ``queries``, ``browse`` and ``report_queries``; the ledger's SQL in ``ledger``,
the errors in ``errors``, the export in ``export``.
"""

from __future__ import annotations

import functools
import json
import os
import socket
import time
from collections.abc import Callable
from contextlib import contextmanager
from dataclasses import dataclass
from datetime import datetime, timedelta, timezone
from pathlib import Path

import duckdb
import pyarrow as pa

from analysis.words import counted
from devmon_sync import __version__
from devmon_sync.printable import fit, printable_lines
from devmon_sync.service_profile import ServiceProfile
from devmon_sync.store import (answers, audit, integrity, ledger, records, staged,
                               stream_stats, summary)
from devmon_sync.store.errors import (MirrorLockedError, OlderSchemaError, StoreError,
                                      _disk_full_error, _is_disk_full, _is_fatal, damage_of,
                                      damaged_error)
from devmon_sync.store.schema import LATEST_VERSION, MIGRATION_STEPS, MIGRATIONS

METADATA_KEYS = {
    "sites": ["uuid"], "devices": ["serial_number"], "device_groups": ["uuid"],
    "device_group_members": ["group_uuid", "device_serial_number"], "sensors": ["uuid"],
    "parameters": ["uuid"], "sensor_attributes": ["uuid"],
    "device_gnss_config": ["device_serial_number"], "base_stations": ["site_uuid", "id"],
    "projections": ["site_uuid", "id"],
}


MEMORY_LIMIT = "256MB"


def _writes(method=None, *, settle: bool = True):
    """A Mirror method that writes the file: DuckDB's failures to write it (a full disk, an
    I/O error, the fatal error after which the connection is dead) become one StoreError
    that says what to do.  Once the connection is dead it is never used again: every later
    call raises the same StoreError at once (``Mirror.reopen`` starts afresh).  The windows
    a group holds are committed first (``settle``; not by the commits that join it), so
    that writes keep their order."""
    def decorate(method):
        @functools.wraps(method)
        def guarded(self: "Mirror", *args, **kwargs):
            if self._broken is not None:
                raise type(self._broken)(str(self._broken))
            try:
                if settle and self._pending:
                    self._flush()
                return method(self, *args, **kwargs)
            except duckdb.Error as err:
                error = self._write_error(err)
                if error is None:
                    raise
                raise error from None
        return guarded
    return decorate(method) if method is not None else decorate


def _settled(method):
    """A Mirror method that reads what data commits write (data, ledger, statistics): the
    windows a group holds are committed first (``Mirror.grouped``), so it reads them."""
    @functools.wraps(method)
    def settled(self: "Mirror", *args, **kwargs):
        if self._pending:
            self._settle()
        return method(self, *args, **kwargs)
    return settled


def _settled_for(method):
    """``_settled`` for a read of some streams only (``method(self, kind, keys, ...)``): the
    group is committed first only when one of its windows holds one of them (a window of
    other streams changes nothing such a read sees), so that a window of new streams does
    not cut a group short."""
    @functools.wraps(method)
    def settled(self: "Mirror", kind: str, keys: list[str], *args, **kwargs):
        if self._pending and self._holds(kind, keys):
            self._settle()
        return method(self, kind, keys, *args, **kwargs)
    return settled


GROUP_WINDOWS = 8
"""Data windows committed in one transaction at most while a sync groups them
(``Mirror.grouped``): the ledger, statistics and summaries of a group are written once, and
one COMMIT pays for all (a COMMIT and a statement per table cost ~14 ms a window of
84,000 readings, issue 31).  A crash loses at most the group's windows, never part of one:
the next sync fetches them again."""
GROUP_ROWS = 600_000
"""Rows a group holds at most (its answers' tables wait in memory: ~20 MB)."""
GROUP_SECONDS = 2.0
"""A group is committed with the first window that arrives this long after its oldest (a
slow service fills groups slowly: a kill then loses few windows' requests).  It is looked
at as windows arrive: while the next window is fetched (a rate limit's wait, a retry's
back-off) the windows held wait, and a kill then costs their requests again, never a
half-written window."""


@dataclass(frozen=True)
class _Window:
    """A data window ``commit_readings``/``commit_epochs`` accepted: what its commit
    writes."""

    kind: str
    run_id: int
    proof: ledger.WindowProof
    data: object  # readings: the Arrow table; gnss: the ``answers.GnssAnswer``
    quarantine: pa.Table | None
    continues: bool

    @property
    def rows(self) -> int:
        return int(sum(self.proof.rows))


_LIVE_RUNS: set[tuple[str, int]] = set()
"""(mirror file, run id) of the runs this process has begun and not finished: the only runs
of a file this process has open that may still be running (DuckDB lets one process write a
file at a time, so no other process is running one)."""

INTERRUPTED = ("its process ended before the run finished (killed, or the machine stopped); "
               "counts are as of its last commit. Run the same command to resume.")


def _file_key(path: str) -> str:
    return os.path.realpath(path)


@dataclass(frozen=True)
class ParameterToSync:
    uuid: str
    device_serial_number: str
    sensor_uuid: str
    sampling_period_s: float | None
    created_at: datetime | None
    cursor: datetime | None
    covered_until: datetime | None = None
    """End of the last window committed for it (a stream with no point yet has no cursor)."""
    device_last_data: datetime | None = None
    """Its device's ``lastDataTimestamp``: the newest point of any of its sensors."""
    first_ts: datetime | None = None
    """Its oldest point in the mirror."""
    history_searched: bool = False
    """True when the search for the start of its history is done (``sync.history``)."""


@dataclass(frozen=True)
class GnssSensorToSync:
    sensor_uuid: str
    device_serial_number: str
    sampling_period_s: float | None
    created_at: datetime | None
    cursor: datetime | None
    covered_until: datetime | None = None
    device_last_data: datetime | None = None
    first_ts: datetime | None = None
    history_searched: bool = False


def _sql_path(path: Path) -> str:
    """A path as a SQL string literal's content (quotes doubled)."""
    return str(path).replace("'", "''")


def _key_indices(table: pa.Table, column: str) -> tuple[pa.Table, list[str]]:
    """``table`` with its dictionary-encoded ``column`` replaced by ``key_index`` (int32),
    and the keys it indexes.  Casting each distinct UUID once and picking it by index
    (``(?::UUID[])[key_index + 1]``) costs a quarter of casting the text of every row."""
    keys = table.unify_dictionaries().column(column).combine_chunks()
    if not pa.types.is_dictionary(keys.type):
        keys = keys.dictionary_encode()
    at = table.schema.get_field_index(column)
    return table.set_column(at, "key_index", keys.indices), keys.dictionary.to_pylist()


_NO_CURSOR = object()  # (a stream without a cursor row, in ``Mirror._covered``)

LOCK_WAIT_S = 10.0
"""How long a read-write open waits for the file's lock: the desktop app reads the mirror in
short read-only opens, and a scheduled sync must not fail for starting during one."""


def _connect(path: str, read_only: bool) -> duckdb.DuckDBPyConnection:
    """``duckdb.connect``; a read-write open waits up to ``LOCK_WAIT_S`` for a lock held by
    another process (a read-only open does not wait: it is what the window does, and it
    says at once that a sync is writing)."""
    give_up = time.monotonic() + (0.0 if read_only else LOCK_WAIT_S)
    while True:
        try:
            return duckdb.connect(path, read_only=read_only)
        except duckdb.IOException as err:
            if "lock" not in str(err).lower() or time.monotonic() >= give_up:
                raise
            time.sleep(0.2)


def _check_file(path: str) -> None:
    """``integrity.attach_and_check`` (read-only: nothing written before the file is known
    sound), then remember it sound.  A file that cannot be attached (written by another
    connection, not a DuckDB file) is left to the open that follows, which says why."""
    if integrity.attach_and_check(path, MEMORY_LIMIT):
        integrity.remember_sound(path)


def _utcnow() -> datetime:
    return datetime.now(timezone.utc)


class Mirror:
    """An open mirror file.  One writer at a time (DuckDB's rule); readers may be many."""

    def __init__(self, con: duckdb.DuckDBPyConnection, path: str):
        self.con = con
        self.path = path
        self._broken: StoreError | None = None
        """Set when DuckDB invalidated the connection (a fatal error): never used again."""
        self._read_only = False
        self._run_requests: dict[int, object] = {}
        """Per run begun here, what tells its requests so far (kept up to date at commits)."""
        self._stats: dict[str, stream_stats.Stats] = {}
        """Per kind, ``stream_stats`` as this connection's commits left it: read once a run,
        dropped at each run's start and at any rollback (``_held_stats``)."""
        self._covered: dict[str, datetime | None] | None = None
        """Per stream with a cursor row, its ``covered_until``, kept the same way
        (``_stored_since``)."""
        self._tails: dict[str, tuple] | None = None
        """Per parameter, the summary this connection's commits last wrote of its last
        slot, kept the same way (``summary.Appends``)."""
        self._sensor_devices: dict[str, str] | None = None
        """Every sensor's device, kept the same way (``serials_of_sensors``; dropped by a
        metadata commit too)."""
        self._solutions: dict[str, tuple] = {}
        """Per GNSS sensor, the ``gnss_solutions`` row this run wrote (``_upsert_solutions``:
        a GNSS answer repeats every device's, unchanged)."""
        self._threads_before: int | None = None
        """DuckDB's threads setting while a run writes on one (``_one_thread``)."""
        self._pending: list[_Window] = []
        """Data windows accepted and not yet committed (``grouped``)."""
        self._grouping = False
        self._pending_since = 0.0  # (monotonic) when the oldest pending window came

    # ------------------------------------------------------------------ opening

    @classmethod
    def open(cls, path: str | Path, read_only: bool = False,
             check: bool | None = None,
             on_upgrade: Callable[[int, int], None] | None = None) -> "Mirror":
        """Open the mirror file at ``path`` (created when writing and there is none).

        ``check``: read the whole file first (``store.integrity``) unless devmon knows it
        unchanged since it last checked or wrote it; by default when writing, so that a
        damaged file is never written to (``DamagedMirrorError``).  ``on_upgrade(from, to)``
        is called before a file of an older schema is upgraded (once; a minute or more for
        a mirror of a billion readings), so that a command can say so first."""
        path = str(path)
        if read_only and not Path(path).exists():
            raise StoreError(f"No mirror at {path}: run `devmon sync --db {path}` first.")
        if not read_only:
            try:  # the default mirror's folder (the user data dir) may not exist yet
                Path(path).parent.mkdir(parents=True, exist_ok=True)
            except OSError as err:
                raise StoreError(f"Cannot create the folder of {path}: {err.strerror}. Choose "
                                 f"another file with --db.") from None
        if Path(path).is_dir():
            raise StoreError(f"{path} is a folder, not a mirror file: give a file name with "
                             f"--db, e.g. {Path(path) / 'mirror.duckdb'}.")
        if (not read_only if check is None else check) and Path(path).is_file() \
                and not integrity.known_sound(path):
            _check_file(path)
        try:
            con = _connect(path, read_only)
        except duckdb.Error as err:
            if _is_disk_full(err):
                raise _disk_full_error(path) from None
            if damage_of(err):
                raise damaged_error(path, damage_of(err)) from None
            if not isinstance(err, duckdb.IOException):
                raise StoreError(f"{path} is not a usable DuckDB mirror ({err}). Choose "
                                 f"another file with --db, or move this one aside.") from None
            if "not a valid duckdb" in str(err).lower():
                raise StoreError(f"{path} is not a usable DuckDB mirror (the file is damaged "
                                 f"or of another kind). Choose another file with --db, or "
                                 f"move this one aside.") from None
            if "lock" in str(err).lower():
                waited = "" if read_only else f" (waited {LOCK_WAIT_S:g} s)"
                raise MirrorLockedError(
                    f"The mirror {path} is in use by another devmon process{waited}: DuckDB "
                    f"lets one program write a file, or several read it. Wait for the other "
                    f"(a sync?) to finish, then run the command again.") from None
            raise StoreError(f"Cannot open the mirror {path}: {err}") from None
        con.execute("SET TimeZone = 'UTC'")
        # DuckDB would otherwise keep every block it writes (up to 80% of RAM): a fixed
        # budget keeps the sync's memory flat however large the mirror grows.
        con.execute(f"SET memory_limit = '{MEMORY_LIMIT}'")
        mirror = cls(con, path)
        mirror._read_only = read_only
        try:
            mirror._refuse_foreign_database()
            if not read_only:
                mirror.migrate(on_upgrade)
                mirror.mark_interrupted()
            else:
                version = mirror.schema_version()
                if version > LATEST_VERSION:
                    raise mirror._newer_schema(version)
                if version < LATEST_VERSION:
                    raise OlderSchemaError(
                        f"The mirror {path} has schema version {version}; this devmon needs "
                        f"{LATEST_VERSION}: run `devmon sync` on it once.")
        except BaseException as err:
            con.close()  # a refused file stays closed, so nothing holds its lock
            if damage_of(err):
                raise damaged_error(path, damage_of(err)) from None
            raise
        return mirror

    def _refuse_foreign_database(self) -> None:
        """A DuckDB file with tables but no devmon schema is someone else's database: never
        add the mirror's tables to it."""
        if self.schema_version() == 0 and self._row("SELECT count(*) FROM duckdb_tables()")[0]:
            raise StoreError(f"{self.path} is a DuckDB database but not a devmon mirror. Choose "
                             f"another file with --db, or a new file name to start a mirror.")

    def for_thread(self) -> "Mirror":
        """The same open mirror through a connection of its own (a DuckDB cursor), for use
        in another thread: DuckDB connections are not shared across threads, but cursors of
        one database are, each with its own transactions.  Close it when the thread is done;
        that leaves this mirror open."""
        cursor = self.con.cursor()
        cursor.execute("SET TimeZone = 'UTC'")  # a session setting: cursors do not inherit it
        view = Mirror(cursor, self.path)
        view._read_only = self._read_only  # a cursor of a read-only connection only reads
        return view

    @classmethod
    def scratch_copy(cls, path: str | Path) -> "Mirror":
        """An in-memory mirror holding the file's metadata and cursors but none of its data:
        what a dry run plans against, so that it writes nothing to the file."""
        scratch = cls(duckdb.connect(":memory:"), ":memory:")
        scratch.con.execute("SET TimeZone = 'UTC'")
        scratch.migrate()
        if Path(path).exists():
            try:
                source = cls.open(path, read_only=True)
            except OlderSchemaError:  # a file of an older devmon: copied as it is, the
                source = cls._open_older(path)  # columns it lacks left NULL
            try:
                for table in set(scratch._table_names()) & set(source._table_names()):
                    if table not in ("readings", "readings_summary", "gnss_epochs",
                                     "gnss_projected", "sync_windows", "schema_migrations"):
                        scratch._copy_table_from(source, table)
            finally:
                source.close()
        return scratch

    @classmethod
    def _open_older(cls, path: str | Path) -> "Mirror":
        """A read-only view of a mirror of an older schema, for a scratch copy only."""
        con = _connect(str(path), True)
        con.execute("SET TimeZone = 'UTC'")
        mirror = cls(con, str(path))
        mirror._read_only = True
        return mirror

    def _copy_table_from(self, source: "Mirror", table: str) -> None:
        """Copy ``table``'s rows from ``source``, the columns both have."""
        mine = set(self._types(table))
        columns = [c for c in source._types(table) if c in mine]
        names = ", ".join(f'"{c}"' for c in columns)
        arrow = source.con.sql(f"SELECT {names} FROM {table}").to_arrow_table()
        self.con.register("copied", arrow)
        try:
            self.con.execute(f"INSERT INTO {table} ({names}) SELECT {names} FROM copied")
        finally:
            self.con.unregister("copied")

    def close(self) -> None:
        """Close the connection.  A dead one (``_broken``) or a full disk (DuckDB writes the
        log into the file on closing) is no reason to fail: the log is kept, and the next
        open replays it."""
        try:
            self.con.close()
        except duckdb.Error:
            return  # the log stays beside the file: nothing committed is lost
        if not self._read_only and self._broken is None and self.path != ":memory:":
            integrity.remember_sound(self.path)  # as devmon wrote it: no check next time

    def reopen(self) -> None:
        """After DuckDB invalidated the connection (``_broken``): close it and open the file
        afresh (DuckDB replays its log), so that the run can still be recorded.  A
        StoreError when the file cannot be opened again."""
        try:
            self.con.close()
        except duckdb.Error:
            pass
        fresh = Mirror.open(self.path, read_only=self._read_only)
        self.con, self._broken = fresh.con, None

    @property
    def broken(self) -> bool:
        """Whether the connection is dead (a fatal DuckDB error): ``reopen`` to go on."""
        return self._broken is not None

    def _write_error(self, err: duckdb.Error) -> StoreError | None:
        """The StoreError a failure to write the file is (None: another kind of error).
        A fatal one marks the connection dead."""
        if self._broken is not None:
            return type(self._broken)(str(self._broken))
        if _is_disk_full(err):
            error: StoreError = _disk_full_error(self.path)
        elif damage_of(err):
            error = damaged_error(self.path, damage_of(err))
            self._broken = error  # never written to again
            return error
        elif _is_fatal(err) or isinstance(err, duckdb.IOException):
            first = str(err).strip().splitlines()[0] if str(err).strip() else type(err).__name__
            error = StoreError(f"Cannot write the mirror {self.path} ({first}): check the disk, "
                               f"then run the same command to resume (everything committed "
                               f"so far is kept).")
        else:
            return None
        if _is_fatal(err):
            self._broken = error
        return error

    def __enter__(self) -> "Mirror":
        return self

    def __exit__(self, *exc) -> None:
        self.close()

    @contextmanager
    def _transaction(self):
        """All statements inside commit together or not at all.  A COMMIT that fails (a
        full disk) has ended the transaction already: there is nothing to roll back."""
        self.con.execute("BEGIN TRANSACTION")
        try:
            yield
        except BaseException as err:
            self._drop_run_copies()  # (they may hold what the rollback undid)
            self._rollback(err)
            raise
        try:
            self.con.execute("COMMIT")
        except BaseException:
            self._drop_run_copies()
            raise

    def _drop_run_copies(self) -> None:
        """Forget what this connection keeps of the ledger for a run (read again when
        needed): at a run's start, and whenever a transaction did not commit."""
        self._stats.clear()
        self._covered = None
        self._tails = None
        self._sensor_devices = None
        self._solutions.clear()

    def _rollback(self, cause: BaseException) -> None:
        """Roll back after ``cause``; when DuckDB has given up on the connection, leave it
        alone (it rolls back itself) and let ``cause`` tell what happened."""
        if _is_fatal(cause):
            return
        try:
            self.con.execute("ROLLBACK")
        except duckdb.Error as err:
            if not (_is_fatal(err) or "no transaction is active" in str(err)):
                raise

    def _row(self, sql: str, params: list | None = None) -> tuple | None:
        """The first row of a query that returns at most one.  The result is read to its end:
        DuckDB 2 refuses further work on a connection (``sql()``, Arrow reads) while a result
        is unfinished, which ``fetchone()`` leaves behind."""
        rows = self.con.execute(sql, params or []).fetchall()
        return rows[0] if rows else None

    @property
    def read_only(self) -> bool:
        """Whether this connection may only read (other processes may then read the file
        too: a pool of analysis workers opens it beside this one)."""
        return self._read_only

    def schema_version(self) -> int:
        if not self._row("SELECT 1 FROM duckdb_tables() WHERE table_name = 'schema_migrations'"):
            return 0
        return self._row("SELECT coalesce(max(version), 0) FROM schema_migrations")[0]

    def _newer_schema(self, version: int) -> StoreError:
        """A file a later devmon has migrated: neither reading nor `devmon sync` can use it,
        only a newer devmon can (the same words for both paths)."""
        return StoreError(f"The mirror {self.path} was made by a newer devmon (schema "
                          f"{version}; this devmon {__version__} knows up to schema "
                          f"{LATEST_VERSION}): upgrade devmon to use it.")

    @_writes
    def migrate(self, on_upgrade: Callable[[int, int], None] | None = None) -> None:
        """Apply every migration the file has not had, in order, each in its own
        transaction (``on_upgrade``: see ``open``)."""
        current = self.schema_version()
        if current > LATEST_VERSION:
            raise self._newer_schema(current)
        if on_upgrade is not None and 0 < current < LATEST_VERSION:
            on_upgrade(current, LATEST_VERSION)
        applied = {v for (v,) in self.con.execute(
            "SELECT version FROM schema_migrations").fetchall()} if current else set()
        for version, description, sql in MIGRATIONS:
            if version in applied:
                continue
            with self._transaction():
                self.con.execute(sql)
                if version in MIGRATION_STEPS:
                    MIGRATION_STEPS[version](self.con)
                self.con.execute("INSERT INTO schema_migrations VALUES (?, ?, ?)",
                                 [version, description, _utcnow()])

    # ------------------------------------------------------------------ runs

    @_writes
    def begin_run(self, base_url: str, options: dict, requests=None) -> int:
        """A new run, ``running`` and owned by this process (its pid and host are kept, for
        the user's information).  ``requests()``, when given, tells the requests sent so
        far: each commit keeps the run's count up to date with it, so that a run that never
        finishes (killed) still shows what it did."""
        self._drop_run_copies()  # another connection may have committed since: read again
        run_id = self._row("SELECT coalesce(max(run_id), 0) + 1 FROM sync_runs")[0]
        self.con.execute("INSERT INTO sync_runs (run_id, started_at, status, base_url, options, "
                         "requests, readings_rows, epoch_rows, problems, pid, host) "
                         "VALUES (?, ?, 'running', ?, ?, 0, 0, 0, 0, ?, ?)",
                         [run_id, _utcnow(), base_url, json.dumps(options, default=str),
                          os.getpid(), socket.gethostname()])
        _LIVE_RUNS.add((_file_key(self.path), run_id))
        if requests is not None:
            self._run_requests[run_id] = requests
        self._one_thread()
        return run_id

    def _one_thread(self) -> None:
        """DuckDB on one thread while a run writes: a run commits a window (or a group) at a
        time, paced by the network, and on pieces that small DuckDB's second thread only
        adds the CPU of waking and joining it: a full sync took 0.91x the CPU on one
        thread, its wall time unchanged (docs/benchmarks.md, issue 31).  The setting is the
        database's: the GUI's reads during its in-app sync (cursors of this connection) run
        on one thread too.  ``abandon_run`` (every end of a run) gives DuckDB its setting
        back for the reads after it."""
        if self._threads_before is None:
            self._threads_before = self._row("SELECT current_setting('threads')")[0]
            self.con.execute("SET threads = 1")

    def _threads_back(self) -> None:
        if self._threads_before is not None and self._broken is None:
            try:
                self.con.execute(f"SET threads = {int(self._threads_before)}")
            except duckdb.Error:  # a connection the failure ended: nothing to give back
                return
        self._threads_before = None

    def finish_run(self, run_id: int, status: str, requests: int, message: str = "") -> None:
        """Write how a run ended, once: the end of a run already written is kept (a stop
        that lands after a run finished does not turn ``ok`` into ``cancelled``)."""
        self.abandon_run(run_id)  # it has ended, whether or not the record below is written
        self._record_end(run_id, status, requests, message)

    @_writes
    def _record_end(self, run_id: int, status: str, requests: int, message: str) -> None:
        self.con.execute(
            "UPDATE sync_runs SET finished_at = ?, status = ?, requests = ?, message = ?, "
            "problems = (SELECT count(*) FROM sync_problems WHERE run_id = ?) "
            "WHERE run_id = ? AND status = 'running'",
            [_utcnow(), status, requests, message, run_id, run_id])

    def abandon_run(self, run_id: int) -> None:
        """Give up a run this process began and cannot record the end of (the disk is
        full): it is no longer running, so the next open marks it ``interrupted``."""
        self._run_requests.pop(run_id, None)
        _LIVE_RUNS.discard((_file_key(self.path), run_id))
        self._threads_back()

    def _requests_so_far(self, run_id: int) -> int | None:
        requests = self._run_requests.get(run_id)
        return requests() if requests is not None else None

    def _not_running_sql(self) -> tuple[str, list]:
        """SQL true for a run left ``running`` that no process is running any more, and its
        parameters.  This process has the file open, so no other process is writing it
        (DuckDB's lock: one writer, and no readers beside it): a ``running`` run that is
        not one this process has begun and not finished (``_LIVE_RUNS``) has lost its
        process, whatever pid it names (pids are reused)."""
        own = [run_id for path, run_id in _LIVE_RUNS if path == _file_key(self.path)]
        return "status = 'running' AND NOT list_contains(?::BIGINT[], run_id)", [own]

    @_writes
    def mark_interrupted(self) -> int:
        """Mark the runs no process is running any more ``interrupted`` (their counts are
        those of their last commit); how many.  Done on every read-write open."""
        where, params = self._not_running_sql()
        if not self._row(f"SELECT count(*) FROM sync_runs WHERE {where}", params)[0]:
            return 0  # the usual case: nothing to write
        return self._row(
            f"UPDATE sync_runs SET status = 'interrupted', message = ?, problems = "
            f"(SELECT count(*) FROM sync_problems p WHERE p.run_id = sync_runs.run_id) "
            f"WHERE {where}", [INTERRUPTED, *params])[0]

    @_writes
    def record_problem(self, run_id: int, resource: str, status: int | None, message: str) -> None:
        self.con.execute("INSERT INTO sync_problems VALUES (?, ?, ?, ?, ?)",
                         [run_id, _utcnow(), resource, status, message])

    # ------------------------------------------------------------------ metadata

    @_writes
    def save_metadata(self, run_id: int, meta: records.Metadata,
                      seen_at: datetime | None = None) -> list[str]:
        """Insert or replace every metadata row, all tables in one transaction.  ``seen_at``
        dates the memberships, deletions and removals it finds (the service's clock, which a
        report's period is in; default: this machine's).  Returns the serial numbers of the
        devices it newly marked removed upstream, for the run to say so."""
        seen_at = seen_at or _utcnow()
        self._sensor_devices = None  # (sensors change here)
        with self._transaction():
            if meta.groups_whole:
                self._end_memberships(meta.device_group_members, run_id, seen_at)
            for table, rows in meta.tables().items():
                if rows:
                    self._upsert(table, rows, run_id)
            self._mark_deleted_sensors(meta, seen_at)
            removed = self._mark_removed_devices(meta, seen_at)
            requests = self._requests_so_far(run_id)
            if requests is not None:
                self.con.execute("UPDATE sync_runs SET requests = ? WHERE run_id = ?",
                                 [requests, run_id])
        return removed

    def _end_memberships(self, members: list[dict], run_id: int, now: datetime) -> None:
        """Make the memberships those of a full group listing: the ones it no longer holds
        end now (kept in ``device_group_history``), new ones begin now; those of the first
        full listing began before the mirror knew (NULL)."""
        first = not self._row("SELECT count(*) FROM device_group_history")[0]
        listed = pa.table({"g": pa.array([m["group_uuid"] for m in members], pa.string()),
                           "d": pa.array([m["device_serial_number"] for m in members],
                                         pa.string())})
        self.con.register("listed_members", listed)
        try:
            self.con.execute(
                "UPDATE device_group_history h SET member_until = ? WHERE member_until IS NULL "
                "AND NOT EXISTS (SELECT 1 FROM listed_members l WHERE l.g::UUID = h.group_uuid "
                "AND l.d = h.device_serial_number)", [now])
            self.con.execute(
                "INSERT INTO device_group_history SELECT DISTINCT l.g::UUID, l.d, ?, NULL, ? "
                "FROM listed_members l WHERE NOT EXISTS (SELECT 1 FROM device_group_history h "
                "WHERE h.member_until IS NULL AND h.group_uuid = l.g::UUID AND "
                "h.device_serial_number = l.d)", [None if first else now, run_id])
            self.con.execute(
                "DELETE FROM device_group_members m WHERE NOT EXISTS (SELECT 1 FROM "
                "listed_members l WHERE l.g::UUID = m.group_uuid AND "
                "l.d = m.device_serial_number)")
        finally:
            self.con.unregister("listed_members")

    def _mark_deleted_sensors(self, meta: records.Metadata, now: datetime) -> None:
        """Sensors of devices whose full sensor list came that the list no longer holds are
        marked deleted (their archive stays); a listed one is not deleted."""
        listed = [s["uuid"] for s in meta.sensors]
        if listed:
            self.con.execute("UPDATE sensors SET deleted_at = NULL WHERE deleted_at IS NOT NULL "
                             "AND list_contains(?::UUID[], uuid)", [listed])
        if meta.sensors_listed:
            self.con.execute(
                "UPDATE sensors SET deleted_at = ? WHERE deleted_at IS NULL AND "
                "list_contains(?::VARCHAR[], device_serial_number) AND "
                "NOT list_contains(?::UUID[], uuid)", [now, meta.sensors_listed, listed])

    def _mark_removed_devices(self, meta: records.Metadata, now: datetime) -> list[str]:
        """A device listed is not removed; when the device list is known whole, a mirrored
        device it lacks is marked removed upstream (its archive stays, no longer synced).
        A partial list (a completion of a few devices, a walk that may have missed some)
        marks nothing.  Returns the serial numbers newly marked."""
        listed = [d["serial_number"] for d in meta.devices]
        if listed:
            self.con.execute("UPDATE devices SET removed_at = NULL WHERE removed_at IS NOT NULL "
                             "AND list_contains(?::VARCHAR[], serial_number)", [listed])
        if not (meta.devices_whole and listed):
            return []
        return [r[0] for r in self.con.execute(
            "UPDATE devices SET removed_at = ? WHERE removed_at IS NULL AND "
            "NOT list_contains(?::VARCHAR[], serial_number) RETURNING serial_number",
            [now, listed]).fetchall()]

    def _upsert(self, table: str, rows: list[dict], run_id: int) -> None:
        types = self._types(table)
        columns = [c for c in types if c != "last_run_id"]
        staging = records.rows_to_arrow(rows, columns)
        self.con.register("staging_meta", staging)
        try:
            keys = METADATA_KEYS[table]
            cast = ", ".join(f"CAST(s.{c} AS {types[c]}) AS {c}" for c in columns)
            match = " AND ".join(f"t.{k} = CAST(s.{k} AS {types[k]})" for k in keys)
            self.con.execute(f"DELETE FROM {table} t WHERE EXISTS "
                             f"(SELECT 1 FROM staging_meta s WHERE {match})")
            self.con.execute(f"INSERT INTO {table} ({', '.join(columns)}, last_run_id) "
                             f"SELECT DISTINCT ON ({', '.join(keys)}) *, ? FROM "
                             f"(SELECT {cast} FROM staging_meta s)", [run_id])
        finally:
            self.con.unregister("staging_meta")

    def _types(self, table: str) -> dict[str, str]:
        rows = self.con.execute("SELECT column_name, data_type FROM duckdb_columns() "
                                "WHERE table_name = ? ORDER BY column_index", [table]).fetchall()
        return dict(rows)

    # ------------------------------------------------------------------ what to sync

    @_settled
    def parameters_to_sync(self) -> list[ParameterToSync]:
        """Every mirrored parameter with its device's sampling period and its cursor.  The
        fields of GNSS sensors are mirrored as epochs, so they are left out here, and so are
        sensors deleted and devices removed upstream (their archive is kept, not synced)."""
        sql = """
            SELECT p.uuid::VARCHAR, p.device_serial_number, p.sensor_uuid::VARCHAR,
                   d.sampling_period_s, p.created_at, c.cursor_ts, c.covered_until,
                   d.last_data, t.first_ts, c.history_searched_to IS NOT NULL
            FROM parameters p
            JOIN devices d ON d.serial_number = p.device_serial_number
            LEFT JOIN sensors s ON s.uuid = p.sensor_uuid
            LEFT JOIN sync_cursors c ON c.stream = 'readings:' || p.uuid::VARCHAR
            LEFT JOIN stream_stats t ON t.kind = 'readings' AND t.key = p.uuid
            WHERE s.deleted_at IS NULL AND d.removed_at IS NULL
              AND p.sensor_uuid NOT IN (SELECT sensor_uuid FROM gnss_solutions)
            ORDER BY p.device_serial_number, s.channel_index, p.read_index"""
        return [ParameterToSync(*r) for r in self.con.execute(sql).fetchall()]

    @_settled
    def gnss_sensors_to_sync(self) -> list[GnssSensorToSync]:
        """Every known GNSS sensor (from earlier GNSS answers) with its cursor, but those
        deleted upstream and those of devices removed upstream (their archive is kept, not
        synced)."""
        sql = """
            SELECT g.sensor_uuid::VARCHAR, g.device_serial_number, d.sampling_period_s,
                   (SELECT min(created_at) FROM parameters p WHERE p.sensor_uuid = g.sensor_uuid),
                   c.cursor_ts, c.covered_until, d.last_data, t.first_ts,
                   c.history_searched_to IS NOT NULL
            FROM gnss_solutions g
            JOIN devices d ON d.serial_number = g.device_serial_number
            LEFT JOIN sync_cursors c ON c.stream = 'gnss:' || g.sensor_uuid::VARCHAR
            LEFT JOIN stream_stats t ON t.kind = 'gnss' AND t.key = g.sensor_uuid
            WHERE d.removed_at IS NULL
              AND NOT EXISTS (SELECT 1 FROM sensors s WHERE s.uuid = g.sensor_uuid
                              AND s.deleted_at IS NOT NULL)
            ORDER BY g.device_serial_number"""
        return [GnssSensorToSync(*r) for r in self.con.execute(sql).fetchall()]

    def gnss_devices(self) -> list[str]:
        """Serial numbers of devices with a GNSS configuration that solve positions (not
        those removed upstream: the service no longer serves them)."""
        return [r[0] for r in self.con.execute(
            "SELECT device_serial_number FROM device_gnss_config c "
            "WHERE NOT coalesce(is_base_station, false) AND NOT EXISTS (SELECT 1 FROM devices "
            "d WHERE d.serial_number = c.device_serial_number AND d.removed_at IS NOT NULL) "
            "ORDER BY 1").fetchall()]

    def devices_in_scope(self, sites: list[str], groups: list[str],
                         serials: list[str]) -> tuple[set[str], list[str]]:
        """Serial numbers of the devices at ``sites``, in ``groups`` (and their nested
        groups) or named in ``serials``; and the scope items that matched nothing."""
        found: set[str] = set()
        unknown: list[str] = []
        for site in sites:
            rows = self.con.execute("SELECT serial_number FROM devices WHERE site_uuid::VARCHAR "
                                    "= lower(?)", [site]).fetchall()
            found |= {r[0] for r in rows}
            unknown += [] if rows else [f"site {site}"]
        for group in groups:
            rows = self.con.execute("""
                WITH RECURSIVE tree(uuid) AS (
                    SELECT uuid FROM device_groups WHERE uuid::VARCHAR = lower(?)
                    UNION SELECT g.uuid FROM device_groups g JOIN tree t ON g.parent_uuid = t.uuid)
                SELECT DISTINCT device_serial_number FROM device_group_members
                WHERE group_uuid IN (SELECT uuid FROM tree)""", [group]).fetchall()
            found |= {r[0] for r in rows}
            unknown += [] if rows else [f"group {group}"]
        for serial in serials:
            hit = self._row("SELECT count(*) FROM devices WHERE serial_number = ?", [serial])[0]
            found |= {serial} if hit else set()
            unknown += [] if hit else [f"device {serial}"]
        return found, unknown

    def parameter_sensors(self) -> dict[str, str]:
        """Parameter UUID to sensor UUID, for every mirrored parameter."""
        return dict(self.con.execute("SELECT uuid::VARCHAR, sensor_uuid::VARCHAR FROM parameters"
                                     ).fetchall())

    def serials_of_sensors(self, sensor_uuids: list[str]) -> list[str]:
        """The devices of ``sensor_uuids``, sorted: from this run's copy of every sensor's
        device (read once a run, not once a GNSS window: 3 ms a window)."""
        if self._sensor_devices is None:
            self._sensor_devices = dict(self.con.execute(
                "SELECT uuid::VARCHAR, device_serial_number FROM sensors").fetchall())
        found = {self._sensor_devices[u] for u in map(str.lower, sensor_uuids)
                 if u in self._sensor_devices}
        return sorted(found - {None}) + ([None] if None in found else [])

    @_writes
    def save_solutions(self, run_id: int, solutions: list[dict]) -> None:
        if solutions:
            self._upsert_solutions(solutions, run_id)

    @_settled
    def cursor(self, stream: str) -> datetime | None:
        row = self._row("SELECT cursor_ts FROM sync_cursors WHERE stream = ?", [stream])
        return row[0] if row else None

    # ------------------------------------------------------------------ data chunks

    @_writes(settle=False)
    def commit_readings(self, run_id: int, proof: ledger.WindowProof, table: pa.Table,
                        quarantine: pa.Table | None = None, continues: bool = False) -> int:
        """Replace the readings of ``proof.keys`` in [start, end] by ``table`` (columns of
        ``answers.readings_from_json``), keep what could not be read in quarantine, and record
        what the answer proved (cursors move to the newest point received), in one
        transaction: this window's alone, or its group's (``grouped``).  Returns rows
        inserted.  ``continues``: this process committed the window just before this one for
        every stream of it, so the range it leaves undeleted is known to be empty and needs
        no check (``_refuse_doubles``)."""
        return self._accept(_Window("readings", run_id, proof, table, quarantine, continues))

    @_writes(settle=False)
    def commit_epochs(self, run_id: int, proof: ledger.WindowProof, answer: answers.GnssAnswer,
                      quarantine: pa.Table | None = None, continues: bool = False) -> int:
        """Replace the epochs (and projected coordinates) of the GNSS sensors ``proof.keys``
        in [start, end] by ``answer``'s, keep what could not be read in quarantine, and record
        what the answer proved, in one transaction (this window's, or its group's).  Returns
        epochs inserted."""
        return self._accept(_Window("gnss", run_id, proof, answer, quarantine, continues))

    # ------------------------------------------------------------------ groups of windows

    @contextmanager
    def grouped(self):
        """Inside, data windows commit by groups (``GROUP_WINDOWS``, ``GROUP_ROWS``,
        ``GROUP_SECONDS``): each group in one transaction, whole or not at all, its ledger,
        statistics and summaries written once.  Whatever reads or writes the ledger or the
        data commits the group first (``_settled``, ``_writes``), and so does leaving, also
        on an error or a stop (the windows accepted are whole: they are kept, as they would
        have been one by one).  A group that fails to commit is lost whole: its cursors did
        not move, the next sync fetches it again."""
        self._grouping = True
        try:
            yield self
        except BaseException:
            self._grouping = False
            self._settle_quietly()
            raise
        self._grouping = False
        self._settle()
        self.checkpoint()

    @_writes
    def checkpoint(self) -> None:
        """Move the write-ahead log into the file now, while a command can still say that
        the disk is full (closing would do it too, but a failure there is only logged).  A
        group's rows mostly go to the file directly (DuckDB writes whole row groups of a
        large transaction there), so the log seldom reaches DuckDB's own threshold during a
        sync: without this, a sync's checkpoint would wait for the close."""
        try:
            self.con.execute("CHECKPOINT")
        except duckdb.TransactionException:
            pass  # another cursor's transaction is open (the app reading): the close does it

    def _accept(self, window: _Window) -> int:
        """Take a window into the group (commit it at once outside ``grouped``); its rows."""
        if self._pending and self._pending[0].run_id != window.run_id:
            self._flush()
        if not self._pending:
            self._pending_since = time.monotonic()
        self._pending.append(window)
        if not self._grouping or len(self._pending) >= GROUP_WINDOWS \
                or sum(w.rows for w in self._pending) >= GROUP_ROWS \
                or time.monotonic() - self._pending_since >= GROUP_SECONDS:
            self._flush()
        return window.rows

    def _holds(self, kind: str, keys: list[str]) -> bool:
        """Whether a window the group holds is of one of these streams."""
        return any(w.kind == kind and not set(w.proof.keys).isdisjoint(keys)
                   for w in self._pending)

    @_writes(settle=False)
    def _settle(self) -> None:
        """Commit the windows the group holds."""
        self._flush()

    def _settle_quietly(self) -> None:
        """``_settle`` while another error is on its way out: a group that cannot be
        committed now (the disk is full, the connection dead) is dropped, and that error is
        the one the caller sees."""
        if self._broken is not None:
            self._pending = []
            return
        try:
            self._settle()
        except Exception:  # noqa: BLE001 - the error already raised is the one to tell
            self._pending = []

    def _flush(self) -> None:
        """One transaction for the windows held, in their order: each window's data as its
        own commit would write it, then the statistics, the summaries' last rows and the
        ledger of all of them once.  The group leaves the queue first: if its commit fails,
        it is dropped whole."""
        windows, self._pending = self._pending, []
        if not windows:
            return
        with self._transaction():
            self._write_group(windows)

    def _write_group(self, windows: list[_Window]) -> None:
        if self._tails is None:
            self._tails = {}
        appends = summary.Appends(self.con, self._tails)
        existing: dict[str, set[str]] = {}  # per kind, the streams with a stream_stats row
        changed: dict[str, stream_stats.Stats] = {}
        for w in windows:
            if w.kind not in existing:
                existing[w.kind] = set(self._held_stats(w.kind))
                changed[w.kind] = {}
            if w.kind == "readings":
                before, now = self._write_readings(w, appends)
            else:
                before, now = self._write_epochs(w)
            held, p = self._stats[w.kind], w.proof
            rows = stream_stats.fold(self.con, w.kind, p.keys, p.start, p.end, before, now,
                                     held)
            held.update(rows)
            changed[w.kind].update(rows)
            ledger.record_quarantine(self.con, w.run_id, w.kind, w.quarantine)
            self._cover(p)
        appends.write()
        for kind, rows in changed.items():
            stream_stats.write(self.con, kind, rows, existing[kind])
        ledger.record_windows(self.con, windows[0].run_id, [w.proof for w in windows],
                              self._requests_so_far(windows[0].run_id))

    def _write_readings(self, w: _Window, appends: summary.Appends
                        ) -> tuple[stream_stats.Stats, stream_stats.Stats]:
        """One readings window's rows (and revisions), its summary (``appends`` when it only
        adds rows, else at once: it reads the file's edge slots); returns the streams' rows
        in the window before and after (``stream_stats.fold``)."""
        proof = w.proof
        keys, start, end = proof.keys, proof.start, proof.end
        # read by name in the SQL below (a DuckDB replacement scan of this local variable,
        # a third of registering it as a view and dropping that: see ``staged.py``)
        staging_readings, key_list = _key_indices(w.data, "parameter_uuid")
        replaced = self._stored_since("readings", keys, start)
        before = {}
        if replaced:
            before = stream_stats.stored_in_window(self.con, "readings", keys, start, end)
            if before:
                self._keep_reading_revisions(w.run_id, keys, staging_readings, key_list,
                                             start, end)
            self.con.execute("DELETE FROM readings WHERE list_contains(?::UUID[], "
                             "parameter_uuid) AND ts BETWEEN ? AND ?", [keys, start, end])
        inserted = self.con.execute(
            "INSERT INTO readings SELECT (?::UUID[])[key_index + 1], ts, value "
            "FROM staging_readings WHERE ts BETWEEN ? AND ?",
            [key_list, start, end]).fetchall()[0][0]
        if not (replaced or w.continues):
            self._refuse_doubles("readings", "parameter_uuid", keys, start, end, inserted)
        rows = staged.readings(staging_readings, key_list, keys, start, end)
        if replaced:
            appends.write()  # (the appends before it first: it reads their slots)
            summary.replace_window(self.con, keys, rows, start, end, self._tails)
        else:
            appends.add(keys, rows, start, end, w.continues)
        return before, stream_stats.of_staged(keys, rows)

    def _keep_reading_revisions(self, run_id: int, keys: list[str],
                                staging_readings: pa.Table, key_list: list[str],
                                start: datetime, end: datetime) -> None:
        """Before a window replaces stored readings: keep each whose value the answer
        changes (same parameter and time, another value), with the new value, and each the
        answer no longer holds, marked ``removed`` (``staging_readings``: read by name)."""
        self.con.execute(
            "INSERT INTO reading_revisions (parameter_uuid, ts, old_value, new_value, seen_at, "
            "run_id, removed) SELECT r.parameter_uuid, r.ts, r.value, n.value, ?, ?, "
            "n.ts IS NULL FROM readings r LEFT JOIN (SELECT (?::UUID[])[key_index + 1] AS "
            "parameter_uuid, ts, value FROM staging_readings WHERE ts BETWEEN ? AND ?) n "
            "USING (parameter_uuid, ts) WHERE list_contains(?::UUID[], r.parameter_uuid) AND "
            "r.ts BETWEEN ? AND ? AND (n.ts IS NULL OR r.value IS DISTINCT FROM n.value)",
            [_utcnow(), run_id, key_list, start, end, keys, start, end])

    def _keep_epoch_revisions(self, run_id: int, keys: list[str], epoch_keys: list[str],
                              start: datetime, end: datetime) -> None:
        """The same for GNSS epochs whose position the answer changes or that it no longer
        holds."""
        self.con.execute(
            "INSERT INTO epoch_revisions (sensor_uuid, epoch_id, ts, old_lat, old_lon, old_eh, "
            "new_lat, new_lon, new_eh, seen_at, run_id, removed) SELECT r.sensor_uuid, "
            "r.epoch_id, r.ts, r.lat, r.lon, r.eh, n.lat, n.lon, n.eh, ?, ?, n.epoch_id IS NULL "
            "FROM gnss_epochs r LEFT JOIN (SELECT (?::UUID[])[key_index + 1] AS sensor_uuid, "
            "epoch_id, lat, lon, eh FROM staging_epochs WHERE ts BETWEEN ? AND ?) n "
            "USING (sensor_uuid, epoch_id) WHERE list_contains(?::UUID[], r.sensor_uuid) AND "
            "r.ts BETWEEN ? AND ? AND (n.epoch_id IS NULL OR r.lat IS DISTINCT FROM n.lat OR "
            "r.lon IS DISTINCT FROM n.lon OR r.eh IS DISTINCT FROM n.eh)",
            [_utcnow(), run_id, epoch_keys, start, end, keys, start, end])

    def _revision_lines(self) -> list[str]:
        """What the service changed in its past, as devmon saw it (for ``devmon status``);
        a report issued before may rest on the values replaced."""
        readings, epochs, first, last = self._row(
            "SELECT (SELECT count(*) FROM reading_revisions), (SELECT count(*) FROM "
            "epoch_revisions), least((SELECT min(seen_at) FROM reading_revisions), "
            "(SELECT min(seen_at) FROM epoch_revisions)), greatest((SELECT max(seen_at) FROM "
            "reading_revisions), (SELECT max(seen_at) FROM epoch_revisions))")
        if not (readings or epochs):
            return []
        deleted = self._row("SELECT count(*) FROM sensors WHERE deleted_at IS NOT NULL")[0]
        removed = self._row("SELECT (SELECT count(*) FROM reading_revisions WHERE removed) + "
                            "(SELECT count(*) FROM epoch_revisions WHERE removed)")[0]
        gone = f", {removed:,} of them removed (no longer held by the service)" if removed \
            else ""
        return ["", f"Revised by the service: {readings:,} values and {epochs:,} GNSS epochs "
                    f"changed{gone} since {first:%Y-%m-%d %H:%M} UTC (last seen "
                    f"{last:%Y-%m-%d %H:%M}); reports issued before may rest on the old values "
                    f"(kept in reading_revisions and epoch_revisions)."] + (
            [f"  {deleted} sensors deleted upstream: their archive is kept, marked deleted."]
            if deleted else [])

    @_settled
    def recheck_credit(self, share: float, run_id: int) -> float:
        """Requests the re-check of the past may spend now: ``share`` of the other requests
        of every sync before ``run_id`` but the first (a full mirror's requests would pay for
        many re-checks of incremental syncs; verify's runs are not syncs), less what
        re-checks spent (``sync.recheck``)."""
        spent, other = self._row(
            "SELECT coalesce(sum(recheck_requests), 0), coalesce(sum(requests), 0) - "
            f"coalesce(sum(recheck_requests), 0) FROM sync_runs WHERE requests > 0 "
            f"AND {ledger.SYNCS_ONLY} AND run_id < ? AND run_id > (SELECT min(run_id) FROM "
            f"sync_runs WHERE requests > 0)", [run_id])
        return share * other - spent

    @_writes
    def note_recheck_requests(self, run_id: int, requests: int) -> None:
        self.con.execute("UPDATE sync_runs SET recheck_requests = coalesce(recheck_requests, "
                         "0) + ? WHERE run_id = ?", [requests, run_id])

    @_writes
    def note_lateness(self, kind: str, lateness_days: dict[str, float]) -> None:
        """See ``ledger.note_lateness``."""
        ledger.note_lateness(self.con, kind, lateness_days)

    @_settled
    def lateness_by_device(self) -> dict[str, float]:
        """See ``ledger.lateness_by_device``."""
        return ledger.lateness_by_device(self.con)

    @_writes
    def note_rolled(self, run_id: int, start: datetime, end: datetime) -> None:
        """See ``ledger.note_rolled``."""
        ledger.note_rolled(self.con, run_id, start, end)

    @_settled
    def rolling_state(self, run_id: int, scope: str | None = None
                      ) -> tuple[datetime | None, int]:
        """See ``ledger.rolling_state``."""
        return ledger.rolling_state(self.con, run_id, scope)

    @_writes
    def note_service_start(self, run_id: int, service_now: datetime) -> None:
        """See ``ledger.note_service_start``."""
        ledger.note_service_start(self.con, run_id, service_now)

    @_settled
    def previous_run_start(self, run_id: int) -> datetime | None:
        """See ``ledger.previous_run_start``."""
        return ledger.previous_run_start(self.con, run_id)

    @_settled
    def revisions_since(self, since: datetime | None = None) -> tuple[int, int]:
        """(readings, epochs) the service revised that devmon saw since ``since`` (all)."""
        return self._row(
            "SELECT (SELECT count(*) FROM reading_revisions WHERE seen_at >= ?), "
            "(SELECT count(*) FROM epoch_revisions WHERE seen_at >= ?)",
            [since or datetime.min.replace(tzinfo=timezone.utc)] * 2)

    def _held_stats(self, kind: str) -> stream_stats.Stats:
        """This run's copy of ``stream_stats`` of ``kind`` (read once a run, not once a
        window); the commits keep it, and it is dropped if one rolls back
        (``_transaction``)."""
        if kind not in self._stats:
            self._stats[kind] = stream_stats.stored(self.con, kind)
        return self._stats[kind]

    def _refuse_doubles(self, table: str, key: str, keys: list[str], start: datetime,
                        end: datetime, inserted: int) -> None:
        """Exactly once, checked by the database inside the commit's transaction: after a
        window is written, its streams hold exactly the rows it inserted in its range, or
        the whole window rolls back.  (Each row lies in the range of the commit that wrote
        it, so no row is ever stored twice.)  A window that deleted its range first holds
        that by construction; one that skipped the delete, because the ledger says nothing
        is stored there yet, is checked.  A PRIMARY KEY would say the same, but DuckDB's
        index made reading inserts 6.5-8.5x slower and the file 5.5x larger, and epoch inserts
        1.8x slower (docs/benchmarks.md); this count costs a few milliseconds."""
        stored = self._row(f"SELECT count(*) FROM {table} WHERE list_contains(?::UUID[], {key}) "
                           f"AND ts BETWEEN ? AND ?", [keys, start, end])[0]
        if stored != inserted:
            raise StoreError(
                f"Refusing to commit {table} {start:%Y-%m-%d %H:%M} to {end:%Y-%m-%d %H:%M}: "
                f"the range would hold {stored} rows, not the {inserted} just received (rows "
                f"stored twice). Nothing was written; please report this.")

    def _write_epochs(self, w: _Window) -> tuple[stream_stats.Stats, stream_stats.Stats]:
        """One GNSS window's epochs and projected coordinates (and revisions); returns the
        streams' epochs in the window before and after (``stream_stats.fold``)."""
        proof, answer = w.proof, w.data
        keys, start, end = proof.keys, proof.start, proof.end
        epochs, epoch_keys = _key_indices(answer.epochs, "sensor_uuid")
        projected, projected_keys = _key_indices(answer.projected, "sensor_uuid")
        self.con.register("staging_epochs", epochs)
        self.con.register("staging_projected", projected)
        try:
            if answer.solutions:
                self._upsert_solutions(answer.solutions, w.run_id)
            replaced = self._stored_since("gnss", keys, start)
            before = {}
            if replaced:
                before = stream_stats.stored_in_window(self.con, "gnss", keys, start, end)
                if before:
                    self._keep_epoch_revisions(w.run_id, keys, epoch_keys, start, end)
                where = "list_contains(?::UUID[], sensor_uuid) AND ts BETWEEN ? AND ?"
                self.con.execute(f"DELETE FROM gnss_epochs WHERE {where}", [keys, start, end])
                self.con.execute(f"DELETE FROM gnss_projected WHERE {where}",
                                 [keys, start, end])
            inserted = self._row(
                "INSERT INTO gnss_epochs BY NAME SELECT * EXCLUDE (key_index), "
                "(?::UUID[])[key_index + 1] AS sensor_uuid FROM staging_epochs "
                "WHERE ts BETWEEN ? AND ?", [epoch_keys, start, end])[0]
            if not (replaced or w.continues):
                self._refuse_doubles("gnss_epochs", "sensor_uuid", keys, start, end, inserted)
            inserted = self._row(
                "INSERT INTO gnss_projected BY NAME SELECT * EXCLUDE (key_index), "
                "(?::UUID[])[key_index + 1] AS sensor_uuid FROM staging_projected "
                "WHERE ts BETWEEN ? AND ? AND projection_id IS NOT NULL",
                [projected_keys, start, end])[0]
            if not (replaced or w.continues):
                self._refuse_doubles("gnss_projected", "sensor_uuid", keys, start, end,
                                     inserted)
            return before, stream_stats.staged(epochs, epoch_keys, start, end)
        finally:
            self.con.unregister("staging_epochs")
            self.con.unregister("staging_projected")

    # ------------------------------------------------------------------ coverage

    @_settled_for
    def stored_edges(self, kind: str, keys: list[str], start: datetime,
                     reach: timedelta) -> tuple[dict[str, datetime], set[str]]:
        """See ``ledger.stored_edges``."""
        return ledger.stored_edges(self.con, kind, keys, start, reach)

    @_settled_for
    def proved_spacing_ms(self, kind: str, keys: list[str], before: datetime
                          ) -> dict[str, float]:
        """See ``ledger.proved_spacing_ms``."""
        return ledger.proved_spacing_ms(self.con, kind, keys, before)

    @_settled_for
    def stored_after(self, kind: str, keys: list[str], end: datetime,
                     reach: timedelta) -> dict[str, datetime]:
        return ledger.stored_after(self.con, kind, keys, end, reach)

    @_settled
    def gaps_found_by(self, run_id: int) -> int:
        """Unproved ranges a run found and left open."""
        return self._row("SELECT count(*) FROM sync_gaps WHERE found_run_id = ?", [run_id])[0]

    @_settled
    def gaps_to_heal(self) -> list[tuple[str, str, datetime, datetime]]:
        return ledger.gaps_to_heal(self.con)

    @_writes
    def note_newest(self, kind: str, newest: dict[str, datetime]) -> None:
        ledger.note_newest(self.con, kind, newest)

    @_writes
    def note_history_searched(self, kind: str, searched_to: dict[str, datetime]) -> None:
        """See ``ledger.note_history_searched``."""
        if not searched_to:
            return  # (no empty transaction: its commit costs as much as a small one)
        with self._transaction():
            ledger.note_history_searched(self.con, kind, searched_to)

    @_settled_for
    def proved_starts(self, kind: str, keys: list[str]) -> dict[str, datetime]:
        """Each stream's oldest window proved complete: from where the mirror knows it."""
        return ledger.proved_starts(self.con, kind, keys)

    @_settled_for
    def first_points(self, kind: str, keys: list[str]) -> dict[str, datetime]:
        """Each stream's oldest point in the mirror (streams with none are left out)."""
        return ledger.first_points(self.con, kind, keys)

    @_writes
    def audit_legacy(self, run_id: int) -> int:
        """See ``ledger.audit_legacy``; a no-op on a mirror with no legacy window."""
        if not self._row("SELECT count(*) FROM sync_windows WHERE verdict = 'legacy'")[0]:
            return 0
        with self._transaction():
            return ledger.audit_legacy(self.con, run_id)

    @_writes
    def record_gaps(self, run_id: int, kind: str,
                    unproven: dict[str, tuple[datetime, datetime, str]]) -> None:
        with self._transaction():
            ledger.open_gaps(self.con, run_id, kind, unproven)

    @_settled
    def committed_windows(self) -> list[audit.CommittedWindow]:
        return audit.committed_windows(self.con)

    @_settled
    def summary_slots_differing(self, keys: list[str], start: datetime, end: datetime
                                ) -> list[tuple[str, int, str, str]]:
        """See ``summary.slots_differing``."""
        return summary.slots_differing(self.con, keys, start, end)

    @_writes
    def rebuild_summary_slots(self, slots: list[tuple[str, int]]) -> None:
        """The summary of these (parameter, slot) again from their readings, in one
        transaction; the run's copy of the newest slots read again at its next commit."""
        with self._transaction():
            summary.rebuild_slots(self.con, slots)
        self._tails = None

    @_settled
    def differences(self, kind: str, keys: list[str], start: datetime, end: datetime,
                    answer: pa.Table) -> list[audit.StreamDifference]:
        return audit.differences(self.con, kind, keys, start, end, answer)

    @_settled
    def daily_values(self, parameter_uuids: list[str], start: datetime, end: datetime,
                     height_tol_m: float, degree_tol: float
                     ) -> dict[tuple[str, int], tuple[float, float | None, float, float, float]]:
        """See ``audit.daily_values``."""
        return audit.daily_values(self.con, parameter_uuids, start, end, height_tol_m,
                                  degree_tol)

    def parameters_per_device(self) -> dict[str, int]:
        """How many series a device's data answers hold (its sensors not deleted)."""
        return dict(self.con.execute(
            "SELECT p.device_serial_number, count(*) FROM parameters p JOIN sensors s ON "
            "s.uuid = p.sensor_uuid WHERE s.deleted_at IS NULL GROUP BY 1").fetchall())

    def gnss_field_parameters(self) -> dict[str, str]:
        """Parameter UUID of each GNSS sensor's lat, lon and eh fields, to its sensor."""
        return dict(self.con.execute(
            "SELECT p.uuid::VARCHAR, p.sensor_uuid::VARCHAR FROM parameters p JOIN "
            "gnss_solutions g ON g.sensor_uuid = p.sensor_uuid JOIN sensors s ON "
            "s.uuid = p.sensor_uuid WHERE s.deleted_at IS NULL AND lower(p.name) IN "
            "('lat', 'lon', 'eh')").fetchall())

    def stream_periods(self) -> list[tuple[str, str, float | None]]:
        """(kind, key, sampling period s) of every stream the mirror syncs."""
        return self.con.execute("""
            SELECT 'readings', p.uuid::VARCHAR, d.sampling_period_s FROM parameters p
            JOIN devices d ON d.serial_number = p.device_serial_number
            UNION ALL
            SELECT 'gnss', g.sensor_uuid::VARCHAR, d.sampling_period_s FROM gnss_solutions g
            JOIN devices d ON d.serial_number = g.device_serial_number""").fetchall()

    def load_profile(self, base_url: str) -> ServiceProfile:
        return ServiceProfile.from_json(base_url, ledger.load_profile(self.con, base_url))

    @_writes
    def save_profile(self, profile: ServiceProfile) -> None:
        ledger.save_profile(self.con, profile.base_url, profile.to_json())

    def _upsert_solutions(self, solutions: list[dict], run_id: int) -> None:
        """Insert or replace the GNSS sensors' solution rows, but those this run wrote
        already as they are (every GNSS answer repeats them: 3 ms a window to rewrite)."""
        columns = ["sensor_uuid", "device_serial_number", "srid", "units",
                   "projection_metadata", "base_stations"]
        rows = {s.get("sensor_uuid"): (run_id, *(s.get(c) for c in columns))
                for s in solutions}
        changed = [s for s in solutions if self._solutions.get(s.get("sensor_uuid"))
                   != rows[s.get("sensor_uuid")]]
        if not changed:
            return
        self._solutions.update((s.get("sensor_uuid"), rows[s.get("sensor_uuid")])
                               for s in changed)
        table = records.rows_to_arrow(changed, columns)
        self.con.register("staging_solutions", table)
        try:
            self.con.execute("DELETE FROM gnss_solutions WHERE sensor_uuid IN "
                             "(SELECT CAST(sensor_uuid AS UUID) FROM staging_solutions)")
            self.con.execute("INSERT INTO gnss_solutions SELECT CAST(sensor_uuid AS UUID), "
                             "device_serial_number, srid, units, projection_metadata, "
                             "base_stations, ? FROM staging_solutions", [run_id])
        finally:
            self.con.unregister("staging_solutions")

    def _stored_since(self, kind: str, keys: list[str], start: datetime) -> bool:
        """Whether any of the streams may already hold rows at or after ``start``: only then
        must a window delete before it inserts (a first sync walking forward never does).
        From the run's copy of the cursors' coverage (read once a run, not a window)."""
        if self._covered is None:
            self._covered = dict(self.con.execute(
                "SELECT stream, covered_until FROM sync_cursors").fetchall())
        covered = self._covered
        return any((t := covered.get(s, _NO_CURSOR)) is not _NO_CURSOR
                   and (t is None or t >= start) for s in (f"{kind}:{k}" for k in keys))

    def _cover(self, proof: ledger.WindowProof) -> None:
        """The run's copy of the coverage moved as the window's cursors move
        ``covered_until`` (the greater of the old and the window's end)."""
        if self._covered is not None:
            for stream in (f"{proof.kind}:{k}" for k in proof.keys):
                old = self._covered.get(stream)
                self._covered[stream] = proof.end if old is None else max(old, proof.end)

    # ------------------------------------------------------------------ export

    @_writes
    def export(self, out_dir: str | Path, fmt: str) -> "ExportReport":  # noqa: F821
        """Write every table under ``out_dir``: data tables partitioned by device and month
        (Hive layout ``device_serial_number=.../month=YYYY-MM/``), metadata one file each,
        and ``_manifest.json``; only what changed since the last export to the folder.  The
        report maps each table to its folder or file.  See ``store.export``."""
        from devmon_sync.store.export import export_mirror

        return export_mirror(self, out_dir, fmt)

    def _table_names(self) -> list[str]:
        return [r[0] for r in self.con.execute(
            "SELECT table_name FROM duckdb_tables() WHERE schema_name = 'main' ORDER BY 1"
        ).fetchall()]

    # ------------------------------------------------------------------ status

    def _removed_lines(self) -> list[str]:
        """How many devices the service no longer lists (``devmon status``), so a person
        knows why they get no new data and that their old data are still there."""
        n, first = self._row("SELECT count(*), min(removed_at) FROM devices "
                             "WHERE removed_at IS NOT NULL")
        if not n:
            return []
        one = n == 1
        return [(f"  {n} device{'' if one else 's'} removed upstream since {first:%Y-%m-%d} "
                 f"(no longer listed by the service, or out of this key's reach; 'removed' "
                 f"below): {'its' if one else 'their'} archive is kept, no longer synced.")]

    @_settled
    def status_text(self) -> str:
        """A plain-text summary for ``devmon status``: contents, freshness, last runs; the
        service's names and messages in it ``printable`` (a name cannot start a line)."""
        q = self.con.execute
        counts = self._row("SELECT (SELECT count(*) FROM sites), (SELECT count(*) FROM devices), "
                           "(SELECT count(*) FROM parameters), (SELECT count(*) FROM readings), "
                           "(SELECT count(*) FROM gnss_epochs)")
        lines = [f"Mirror {self.path} (schema {self.schema_version()})",
                 (f"  {counts[0]} sites, {counts[1]} devices, {counts[2]} parameters, "
                  f"{counts[3]:,} readings, {counts[4]:,} GNSS epochs"), *self._removed_lines(),
                 "", "Freshness per device (newest mirrored point, UTC):"]
        fresh = q("""
            WITH r AS (SELECT p.device_serial_number sn, max(c.cursor_ts) t FROM sync_cursors c
                       JOIN parameters p ON c.stream = 'readings:' || p.uuid::VARCHAR GROUP BY 1),
                 g AS (SELECT s.device_serial_number sn, max(c.cursor_ts) t FROM sync_cursors c
                       JOIN gnss_solutions s ON c.stream = 'gnss:' || s.sensor_uuid::VARCHAR
                       GROUP BY 1)
            SELECT d.serial_number, d.display_name,
                   CASE WHEN d.removed_at IS NULL THEN d.connection_status ELSE 'removed' END,
                   strftime(r.t, '%Y-%m-%d %H:%M'), strftime(g.t, '%Y-%m-%d %H:%M')
            FROM devices d LEFT JOIN r ON r.sn = d.serial_number
            LEFT JOIN g ON g.sn = d.serial_number ORDER BY d.serial_number""").fetchall()
        lines += [f"  {sn:14} {fit(name, 30)} {status or '-':9} readings {rt or '-':16} "
                  f"gnss {gt or '-'}" for sn, name, status, rt, gt in fresh]
        lines += ["", "Last runs:"]
        # a run no process is running any more shows as interrupted before a read-write
        # open marks it so (``mark_interrupted``)
        lost, params = self._not_running_sql()
        for row in q(f"SELECT run_id, strftime(started_at, '%Y-%m-%d %H:%M:%S'), CASE WHEN "
                     f"{lost} THEN 'interrupted' ELSE status END, requests, readings_rows, "
                     f"epoch_rows, problems, CASE WHEN {lost} THEN ? ELSE coalesce(message, "
                     f"'') END FROM sync_runs ORDER BY run_id DESC LIMIT 5",
                     [*params, *params, INTERRUPTED]).fetchall():
            lines.append(f"  #{row[0]} {row[1]} {row[2]:11} {counted(row[3], 'request')}, "
                         f"{counted(row[4], 'reading')}, {counted(row[5], 'epoch')}, "
                         f"{counted(row[6], 'problem')} {row[7]}")
        lines += ledger.coverage_lines(self.con)
        lines += ledger.recheck_lines(self.con)
        lines += self._revision_lines()
        profiles = q("SELECT base_url, profile FROM service_profiles ORDER BY 1").fetchall()
        for base_url, text in profiles:
            lines += ["", f"Learned of the service at {base_url}:"]
            lines += ServiceProfile.from_json(base_url, text).describe()
        problems = q("SELECT DISTINCT resource, status, message FROM sync_problems WHERE "
                     "run_id = (SELECT max(run_id) FROM sync_runs) ORDER BY 1 LIMIT 20"
                     ).fetchall()
        if problems:
            lines += ["", "Problems of the last run:"]
            lines += [f"  {r} ({st}): {m}" for r, st, m in problems]
        return printable_lines(lines)

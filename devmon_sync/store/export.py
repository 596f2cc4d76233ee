"""The export: every table of a mirror as files that Spark, Trino and DuckDB all read,
rewritten only where the mirror changed since the last export to the same folder.

An export folder (layout ``LAYOUT``)::

    _manifest.json         written last, atomically: what the folder holds (``_write_manifest``)
    readings/device_serial_number=DM24-33757/month=2026-01/data_0.parquet
    gnss_epochs/...        the same Hive partitions: by device, and by month of ``ts`` in UTC
    gnss_projected/...
    sites/data_0.parquet   every other table of the mirror, one file in a folder of its own
                           (Trino and Hive map a table to a folder, never to a file)

Types every engine reads: UUIDs as text (Spark 4 refuses Parquet's UUID logical type,
``PARQUET_TYPE_ILLEGAL``), JSON as text, and timestamps as Parquet
``TIMESTAMP(isAdjustedToUTC=true, MICROS)``: instants, which Spark reads as ``TimestampType``
and DuckDB as ``TIMESTAMP WITH TIME ZONE``.  The partition columns live in the folder names
only (Hive style), as text.  A serial number too long for a folder name (``_folder_value``:
more than ``MAX_NAME_BYTES`` percent-encoded, where file systems allow 255 bytes) is
written as its start and a hash of the whole; the manifest gives the full serial number of
each such partition, and the export's report says how many there are.

Incremental: the mirror keeps, per export folder, what it last wrote there (tables
``export_folders`` and ``export_partitions``), and each export rewrites only the partitions
whose data differ from that (``_fingerprints`` says why the comparison is enough), deletes the
partitions whose rows are gone, and rewrites a metadata table only when it changed.  Each file
is written into ``_devmon_staging/`` inside the folder (one file system, so a rename is
atomic; Spark, Hive and Trino skip names starting with ``_``) and renamed into place, so a
reader never sees half a file; the manifest comes last.

Whose folder it is (``_claim``): the manifest names the export (``export_id``) and the run
that wrote it (``token``); the mirror remembers both.  An export continues only the folder
this mirror wrote last; it rewrites the whole folder when the folder is its own but no longer
as it left it (a copy of the mirror exported there since, an interrupted run, another
layout), or when it holds an export without a manifest (an older devmon's).  It
refuses a folder another mirror exports to, one in another format, and one holding anything
else: never two mirrors into one folder.

Size: about 710 lines for one job whose steps (claim, fingerprints, staged writes, sweep,
manifest) share the folder's state and its failure handling; split, each part would need
the others' private details.
"""

from __future__ import annotations

import hashlib
import json
import os
import shutil
import socket
import time
import uuid
from collections.abc import Iterator, Mapping
from dataclasses import dataclass, field
from typing import TYPE_CHECKING
from datetime import datetime, timezone
from pathlib import Path
from urllib.parse import unquote

import duckdb
import pyarrow as pa

from devmon_sync import __version__
from devmon_sync.paths import MAX_NAME_BYTES, file_name_part, fits_folder_name
from devmon_sync.store.errors import StoreError, _is_disk_full

if TYPE_CHECKING:  # the mirror calls the export (Mirror.export): no import back at run time
    from devmon_sync.store.mirror import Mirror

LAYOUT = 3
"""Version of the folder's layout; 1 was devmon's export before the manifest (UUIDs as
Parquet UUIDs, everything rewritten each time); 2 wrote the metadata tables as files at the
top (``devices.parquet``), which Trino cannot declare as tables."""

FORMATS = ("parquet", "csv")
MANIFEST = "_manifest.json"
METADATA_FILE = "data_0.{fmt}"
"""The one file of a metadata table, in the table's folder."""
STAGING = "_devmon_staging"
HIVE_NULL = "__HIVE_DEFAULT_PARTITION__"
BOOKKEEPING = ("export_folders", "export_partitions")
"""The export's own record: not exported (the manifest says the same)."""
DERIVED = ("readings_summary",)
"""Figures devmon derives from exported tables for its own reads (the readings' 6-hour
summaries): not exported; a reader aggregates the readings."""

_COPY_OPTIONS = {"parquet": "FORMAT parquet, COMPRESSION zstd", "csv": "FORMAT csv, HEADER"}
_MOD_64 = "18446744073709551616"  # 2**64: a fingerprint is a sum of row hashes modulo this


@dataclass(frozen=True)
class _Partitioned:
    """A table written in Hive partitions by device and month.  ``join`` finds a row's
    device when the table lacks it (``{t}``: the alias of the table's rows)."""

    table: str
    key: str  # what rows are grouped by before their device is known (aggregate, then join)
    join: str = ""
    device: str = "{t}.device_serial_number"

    def join_on(self, alias: str) -> str:
        return self.join.format(t=alias)

    def device_of(self, alias: str) -> str:
        return self.device.format(t=alias)


PARTITIONED = (
    _Partitioned("readings", "parameter_uuid",
                 "JOIN parameters d ON d.uuid = {t}.parameter_uuid", "d.device_serial_number"),
    _Partitioned("gnss_epochs", "device_serial_number"),
    _Partitioned("gnss_projected", "sensor_uuid",
                 "JOIN gnss_solutions d ON d.sensor_uuid = {t}.sensor_uuid",
                 "d.device_serial_number"),
)
PARTITION_COLUMNS = ("device_serial_number", "month")


def _folder_value(serial: str | None) -> str | None:
    """What a device's partition folders say it is: its serial number, or for one too long
    for a folder name, the serial's start and a hash of it (unique, bounded)."""
    if serial is None or fits_folder_name(serial):
        return serial
    return file_name_part(serial, MAX_NAME_BYTES, always_hash=True)


@dataclass(frozen=True)
class _Part:
    """One partition (a metadata table: one whole table, device and month None) as the
    mirror holds it now, or as the last export wrote it."""

    rows: int
    fingerprint: int
    first_ts: datetime | None = None
    last_ts: datetime | None = None
    month_start: datetime | None = None
    files: tuple[str, ...] = ()  # relative to the table's folder
    written_at: datetime | None = None


_Key = tuple[str, str | None, str | None]  # (table, device, month)


@dataclass(frozen=True)
class TableCounts:
    written: int = 0
    unchanged: int = 0
    deleted: int = 0


@dataclass(frozen=True, eq=False)
class ExportReport(Mapping):
    """What an export did.  As a mapping, table name -> path of its folder (what
    ``Mirror.export`` has always returned; a file at the top before layout 3)."""

    folder: Path
    format: str
    paths: dict[str, str]
    partitions: dict[str, TableCounts]
    """Per partitioned table: partitions written, unchanged, deleted."""
    other_written: int
    other_unchanged: int
    rows_written: int
    files_written: int
    rewrote_all: str | None
    """Why every partition was written (None: only what changed)."""
    manifest: Path
    seconds: float
    shortened: tuple[str, ...] = ()
    """Serial numbers too long for a folder name, written as ``_folder_value`` says."""

    def __getitem__(self, table: str) -> str:
        return self.paths[table]

    def __iter__(self) -> Iterator[str]:
        return iter(self.paths)

    def __len__(self) -> int:
        return len(self.paths)

    @property
    def written(self) -> int:
        return sum(c.written for c in self.partitions.values())

    @property
    def unchanged(self) -> int:
        return sum(c.unchanged for c in self.partitions.values())

    @property
    def deleted(self) -> int:
        return sum(c.deleted for c in self.partitions.values())


@dataclass
class _Claim:
    """Whose the folder is, and what this export may rely on."""

    export_id: str
    previous: dict[_Key, _Part] = field(default_factory=dict)
    rewrite_all: str | None = None


def export_mirror(mirror: Mirror, out_dir: str | Path, fmt: str) -> ExportReport:
    """Export every table of ``mirror`` under ``out_dir`` (see the module's docstring);
    StoreError with what to do when the folder cannot be used or written."""
    if fmt not in FORMATS:
        raise StoreError(f"Unknown export format {fmt!r}: use parquet or csv.")
    if mirror._read_only:
        raise StoreError(f"The mirror {mirror.path} is open read-only, and an export records "
                         f"in it what it wrote: open it for writing.")
    out = Path(out_dir)
    try:
        return _export(mirror, out, fmt)
    except OSError as err:  # what the steps below did not name more precisely
        raise _cannot_write(out, err, into=True) from None


def _export(mirror: Mirror, out: Path, fmt: str) -> ExportReport:
    started = time.monotonic()
    _prepare(out)
    claim = _claim(mirror, out, fmt)
    _remember_claim(mirror, out, fmt, claim.export_id)
    token = uuid.uuid4().hex
    staging = out / STAGING / token
    try:
        staging.mkdir(parents=True)
    except OSError as err:
        raise _cannot_write(out, err, into=True) from None
    now = datetime.now(timezone.utc)
    con = mirror.con
    state: dict[_Key, _Part] = {}
    counts: dict[str, TableCounts] = {}
    rows_written = files_written = 0
    try:
        for spec in PARTITIONED:
            current = _fingerprints(con, spec)
            done, counts[spec.table], rows, files = _write_partitions(
                con, spec, out, staging, fmt, current, claim.previous, now)
            state.update(done)
            rows_written += rows
            files_written += files
        other = _write_metadata(con, out, staging, fmt, claim.previous, now)
        state.update(other)
        other_written = sum(1 for p in other.values() if p.written_at == now)
        files_written += other_written
        _sweep(out, state, claim.previous)
        manifest = _write_manifest(mirror, out, staging, fmt, claim.export_id, token, state,
                                   now)
    finally:
        shutil.rmtree(out / STAGING, ignore_errors=True)
    _record(mirror, out, fmt, claim.export_id, token, state, now)
    paths = {spec.table: str(out / spec.table) for spec in PARTITIONED}
    paths.update({k[0]: str(out / k[0]) for k in sorted(other)})
    shortened = tuple(sorted({k[1] for k in state if k[1] and _folder_value(k[1]) != k[1]}))
    return ExportReport(out, fmt, paths, counts, other_written, len(other) - other_written,
                        rows_written, files_written, claim.rewrite_all, manifest,
                        time.monotonic() - started, shortened)


# ---------------------------------------------------------------------- the folder


def _prepare(out: Path) -> None:
    if out.exists() and not out.is_dir():
        raise StoreError(f"{out} is a file, not a folder: choose another folder with --out.")
    try:
        out.mkdir(parents=True, exist_ok=True)
    except OSError as err:
        raise _cannot_write(out, err, into=True) from None


def _remember_claim(mirror: Mirror, out: Path, fmt: str, export_id: str) -> None:
    """Record a new export's id in the mirror before any file is written (token empty:
    nothing written yet).  The manifest naming it is in the folder before the mirror's
    ``_record`` commits: an export killed between the two left a folder whose export the
    mirror did not know, refused ever after as "another mirror's"; known here, it is this
    mirror's, changed since (its token differs), and rewritten whole."""
    with mirror._transaction():
        mirror.con.execute("INSERT INTO export_folders VALUES (?, ?, ?, '', ?, NULL) "
                           "ON CONFLICT DO NOTHING",
                           [export_id, str(out.resolve()), fmt, mirror.schema_version()])


def _claim(mirror: Mirror, out: Path, fmt: str) -> _Claim:
    """Whether this mirror may export into ``out``, and from what state (see the module's
    docstring for the rules)."""
    mine = {row[0]: row[1:] for row in mirror.con.execute(
        "SELECT export_id, format, token, schema_version FROM export_folders").fetchall()}
    path = out / MANIFEST
    if not path.exists():
        entries = sorted(p.name for p in out.iterdir() if p.name != STAGING)
        if not entries:
            return _Claim(uuid.uuid4().hex, rewrite_all="first export to this folder")
        tables = set(_mirror_tables(mirror.con))
        strangers = [name for name in entries if not _older_export_entry(out / name, tables)]
        if strangers:
            raise StoreError(f"{out} is not empty and holds no devmon export (it has "
                             f"{strangers[0]!r}): choose an empty or new folder with --out.")
        return _Claim(uuid.uuid4().hex, rewrite_all="the folder held an export without a "
                      "manifest (an older devmon's, or an interrupted first export)")
    try:
        manifest = json.loads(path.read_text(encoding="utf-8"))
        export_id, token = str(manifest["export_id"]), str(manifest["token"])
        folder_format = manifest.get("file_format")
    except (OSError, ValueError, KeyError, TypeError, AttributeError):
        raise StoreError(f"{path} cannot be read as a devmon export manifest: choose another "
                         f"folder with --out, or delete that folder to export into it.") from None
    if export_id not in mine:
        source = manifest.get("mirror") if isinstance(manifest.get("mirror"), dict) else {}
        raise StoreError(
            f"{out} holds the export of another mirror ({source.get('path', '?')} on "
            f"{source.get('host', '?')}, exported {manifest.get('exported_at', '?')}); two "
            f"mirrors never export into one folder. Choose another folder with --out, or "
            f"delete that one to give it to this mirror.")
    known_token = mine[export_id][1]
    if folder_format != fmt:
        raise StoreError(f"{out} holds this mirror's export as {folder_format}, not {fmt}: "
                         f"export {fmt} into another folder with --out.")
    if token != known_token:
        why = ("the folder changed since this mirror last exported to it (an interrupted "
               "export, or a copy of this mirror exported there)")
    elif manifest.get("layout") != LAYOUT:
        why = f"the folder has export layout {manifest.get('layout')}, this devmon writes {LAYOUT}"
    else:
        return _Claim(export_id, _previous(mirror.con, export_id))
    return _Claim(export_id, rewrite_all=why)


def _older_export_entry(path: Path, tables: set[str]) -> bool:
    """Whether ``path``, found at the top of a folder without a manifest, is something an
    export wrote there (an older devmon's, or an interrupted first one: a folder named
    after one of the mirror's ``tables``), so that the folder may be replaced whole."""
    if path.name.startswith("."):
        return True  # .DS_Store and the like
    if path.is_dir():
        return path.name in tables
    return path.suffix in (".parquet", ".csv")


def _previous(con: duckdb.DuckDBPyConnection, export_id: str) -> dict[_Key, _Part]:
    rows = con.execute(
        "SELECT table_name, device_serial_number, month, rows, fingerprint, first_ts, last_ts, "
        "files, written_at FROM export_partitions WHERE export_id = ?", [export_id]).fetchall()
    return {(t, d, m): _Part(n, fp, lo, hi, None, tuple(files), at)
            for t, d, m, n, fp, lo, hi, files, at in rows}


def _io(action, target: Path):
    """``action()``, which writes ``target``; an OSError becomes a StoreError that names the
    file and says what to do."""
    try:
        return action()
    except OSError as err:
        raise _cannot_write(target, err) from None


def _cannot_write(target: Path, err: BaseException, into: bool = False) -> StoreError:
    """The StoreError for a failure to write ``target`` (``into``: a folder): a full disk
    asks for space, anything else (no permission, a read-only disk) for another folder."""
    if _is_disk_full(err):
        return StoreError(f"Cannot write {target} (the disk is full): free space, or choose "
                          f"another folder with --out.")
    if isinstance(err, OSError) and err.strerror:
        why = err.strerror
    else:
        why = str(err).strip().splitlines()[0] if str(err).strip() else type(err).__name__
    where = f"into {target}" if into else str(target)
    return StoreError(f"Cannot write {where}: {why}. Choose another folder with --out.")


def _copy(con: duckdb.DuckDBPyConnection, source: str, target: Path, options: str,
          params: list | None = None) -> None:
    literal = str(target).replace("'", "''")
    try:
        con.execute(f"COPY ({source}) TO '{literal}' ({options})", params or [])
    except duckdb.IOException as err:
        raise _cannot_write(target, err) from None


def _replace(source: Path, target: Path) -> None:
    """Move a written file into place in one step: a reader sees the old file or the new
    one, never half of one."""
    try:
        target.parent.mkdir(parents=True, exist_ok=True)
        os.replace(source, target)
    except OSError as err:
        raise _cannot_write(target, err) from None


# ---------------------------------------------------------------------- columns


def _columns(con: duckdb.DuckDBPyConnection, table: str) -> list[tuple[str, str]]:
    return con.execute(
        "SELECT column_name, data_type FROM duckdb_columns() WHERE schema_name = 'main' "
        "AND table_name = ? ORDER BY column_index", [table]).fetchall()


def _exported(alias: str, name: str, data_type: str) -> str:
    """A column as the export writes it: UUID and JSON as text; timestamps as UTC instants
    in microseconds (a zone-less one is taken as UTC, as the mirror stores every time)."""
    column = f'{alias}."{name}"'
    if data_type in ("UUID", "JSON"):
        return f'{column}::VARCHAR AS "{name}"'
    if data_type.startswith("TIMESTAMP") and data_type != "TIMESTAMP WITH TIME ZONE":
        return f"timezone('UTC', {column}::TIMESTAMP) AS \"{name}\""
    return f'{column} AS "{name}"'


def _row_hash(alias: str, columns: list[tuple[str, str]]) -> str:
    return "hash(" + ", ".join(f'{alias}."{name}"' for name, _ in columns) + ")"


def _with_columns(fingerprint: int, columns: list[tuple[str, str]]) -> int:
    """A fingerprint that changes with the table's columns too (a column added, renamed or
    retyped by a migration changes every file of the table; a migration of other tables
    changes none of its fingerprints)."""
    signature = ";".join(f"{name} {data_type}" for name, data_type in columns).encode()
    return (fingerprint + int.from_bytes(hashlib.sha256(signature).digest()[:8], "big")) % 2**64


# ---------------------------------------------------------------------- partitioned tables


def _fingerprints(con: duckdb.DuckDBPyConnection, spec: _Partitioned
                  ) -> dict[_Key, _Part]:
    """Per partition of ``spec.table`` (device, month): its rows, and a fingerprint, the sum
    modulo 2**64 of a 64-bit hash of every column of every row.

    Why that is enough to tell a partition that changed: the partition's file holds exactly
    these rows and columns (its device and month are its folder's names), and a change to any
    of them changes the pair: a row added or removed (a sync's new data, a re-sync's
    deletion, a point moved to quarantine) changes the count; a corrected value or
    timestamp changes its row's hash and so the sum, except by a 1 in 2**64 chance; a
    parameter or GNSS sensor moved to another device moves its rows between two partitions,
    changing both; a column added, renamed or retyped changes every fingerprint of the table
    (``_with_columns``).  Markers a writer leaves (a run id, the newest timestamp, the count)
    would miss a correction that keeps the count, or a writer that forgets to leave one;
    this looks at the data themselves.  Its cost is one read of the table, grouped by
    parameter (or sensor) and month before the join that finds the device: seconds at 100M
    readings, against minutes to rewrite them.  A DuckDB whose hash function differs makes
    every partition look changed once: the next export rewrites everything, correctly."""
    columns = _columns(con, spec.table)
    rows = con.execute(f"""
        SELECT {spec.device_of('f')}, strftime(f.month_start, '%Y-%m'), f.month_start,
               sum(f.n)::BIGINT, (sum(f.h) % {_MOD_64})::UBIGINT, min(f.lo), max(f.hi)
        FROM (SELECT t.{spec.key}, date_trunc('month', t.ts) AS month_start,
                     count(*) AS n, sum({_row_hash('t', columns)}) AS h,
                     min(t.ts) AS lo, max(t.ts) AS hi
              FROM {spec.table} t GROUP BY ALL) f
        {spec.join_on('f')}
        GROUP BY ALL""").fetchall()
    return {(spec.table, device, month): _Part(n, _with_columns(fp, columns), lo, hi, start)
            for device, month, start, n, fp, lo, hi in rows}


def _unchanged(table_folder: Path, now_part: _Part, before: _Part | None) -> bool:
    return (before is not None and before.rows == now_part.rows
            and before.fingerprint == now_part.fingerprint and bool(before.files)
            and all((table_folder / f).is_file() for f in before.files))


def _write_partitions(con: duckdb.DuckDBPyConnection, spec: _Partitioned, out: Path,
                      staging: Path, fmt: str, current: dict[_Key, _Part],
                      previous: dict[_Key, _Part], now: datetime
                      ) -> tuple[dict[_Key, _Part], TableCounts, int, int]:
    """Write the partitions of ``spec.table`` that changed, delete those that are gone.
    Returns the state of every partition, the counts, rows written, files written."""
    folder = out / spec.table
    done: dict[_Key, _Part] = {}
    changed: dict[_Key, _Part] = {}
    for key, part in current.items():
        before = previous.get(key)
        if _unchanged(folder, part, before):
            done[key] = _Part(part.rows, part.fingerprint, part.first_ts, part.last_ts,
                              part.month_start, before.files, before.written_at)
        else:
            changed[key] = part
    files_written = 0
    if changed:
        written = _copy_partitions(con, spec, staging / spec.table, fmt, changed,
                                   every=len(changed) == len(current))
        for key, part in changed.items():
            files = written.get(key, ())
            for rel in files:
                _replace(staging / spec.table / rel, folder / rel)
            before = previous.get(key)
            for rel in set(before.files if before else ()) - set(files):
                _remove(folder, rel)
            done[key] = _Part(part.rows, part.fingerprint, part.first_ts, part.last_ts,
                              part.month_start, tuple(files), now)
            files_written += len(files)
    gone = [k for k in previous if k[0] == spec.table and k not in current]
    for key in gone:
        for rel in previous[key].files:
            _remove(folder, rel)
    counts = TableCounts(len(changed), len(current) - len(changed), len(gone))
    return done, counts, sum(p.rows for p in changed.values()), files_written


def _copy_partitions(con: duckdb.DuckDBPyConnection, spec: _Partitioned, target: Path,
                     fmt: str, changed: dict[_Key, _Part], every: bool
                     ) -> dict[_Key, tuple[str, ...]]:
    """Write the ``changed`` partitions of the table under ``target``, and return each
    partition's files, relative to ``target``.  One DuckDB partitioned COPY holds a buffer
    per partition it writes: a whole 100M-reading mirror's (thousands of device-months) ran
    out of the connection's memory budget (``docs/benchmarks.md``, issue 31).  So at most
    ``PARTITIONS_PER_COPY`` partitions a COPY, grouped by month (each COPY reads only its
    months); every partition is still written by exactly one COPY."""
    groups = _month_groups(changed)
    for i, group in enumerate(groups):
        _copy_group(con, spec, target, fmt, group, every and len(groups) == 1, first=i == 0)
    return _files_of(spec, target, fmt, changed)


PARTITIONS_PER_COPY = 50
"""Partitions one COPY writes at most: 200 device-months of readings fit a 64 MB budget
where 2,040 did not (a 10M-reading mirror, 2026-11-28); the mirror's budget is 256 MB."""


def _month_groups(changed: dict[_Key, _Part]) -> list[dict[_Key, _Part]]:
    """``changed`` in groups of whole months, in month order, of at most
    ``PARTITIONS_PER_COPY`` partitions each (one month of more devices: a group alone)."""
    by_month: dict = {}
    for key, part in changed.items():
        by_month.setdefault(part.month_start, {})[key] = part
    groups: list[dict[_Key, _Part]] = [{}]
    for month in sorted(by_month, key=lambda m: (m is None, m)):
        parts = by_month[month]
        if groups[-1] and len(groups[-1]) + len(parts) > PARTITIONS_PER_COPY:
            groups.append({})
        groups[-1].update(parts)
    return groups


def _copy_group(con: duckdb.DuckDBPyConnection, spec: _Partitioned, target: Path, fmt: str,
                changed: dict[_Key, _Part], every: bool, first: bool) -> None:
    """One partitioned COPY of ``changed`` (all of the table when ``every``) under
    ``target``; a COPY after the first adds its partitions beside the ones written (no two
    COPYs write the same partition)."""
    columns = [c for c in _columns(con, spec.table) if c[0] not in PARTITION_COLUMNS]
    standins = {k[1]: _folder_value(k[1]) for k in changed if _folder_value(k[1]) != k[1]}
    device = (f"coalesce(v.folder, {spec.device_of('t')})" if standins
              else spec.device_of("t"))
    select = (", ".join(_exported("t", name, data_type) for name, data_type in columns)
              + f", {device} AS device_serial_number, strftime(t.ts, '%Y-%m') AS month")
    source = f"SELECT {select} FROM {spec.table} t {spec.join_on('t')}"
    if standins:  # serial numbers too long for a folder name: their stand-ins instead
        con.register("export_folder_values", pa.table({
            "serial": pa.array(list(standins), pa.string()),
            "folder": pa.array(list(standins.values()), pa.string())}))
        source += f" LEFT JOIN export_folder_values v ON v.serial = {spec.device_of('t')}"
    params: list = []
    if not every:  # only the changed partitions; their months bound the rows read
        starts = [p.month_start for p in changed.values()]
        keys = pa.table({"device_serial_number": pa.array([k[1] for k in changed], pa.string()),
                         "month_start": pa.array(starts, pa.timestamp("us", tz="UTC"))})
        con.register("export_changed", keys)
        source += (f" SEMI JOIN export_changed c ON c.device_serial_number IS NOT DISTINCT "
                   f"FROM {spec.device_of('t')} AND c.month_start = date_trunc('month', t.ts) "
                   f"WHERE t.ts >= ? AND t.ts < ? + INTERVAL 1 MONTH")
        params = [min(starts), max(starts)]
    beside = "" if first else ", OVERWRITE_OR_IGNORE true"
    try:
        _copy(con, source, target,
              f"{_COPY_OPTIONS[fmt]}, PARTITION_BY (device_serial_number, month){beside}",
              params)
    finally:
        if not every:
            con.unregister("export_changed")
        if standins:
            con.unregister("export_folder_values")


def _files_of(spec: _Partitioned, target: Path, fmt: str, changed: dict[_Key, _Part]
              ) -> dict[_Key, tuple[str, ...]]:
    """Each partition's files under ``target`` (relative to it), by partition key; a
    folder named by a serial number's stand-in is read back as the serial number."""
    standins = {k[1]: _folder_value(k[1]) for k in changed if _folder_value(k[1]) != k[1]}
    serial_of = {folder: serial for serial, folder in standins.items()}
    found: dict[_Key, list[str]] = {}
    for path in sorted(target.rglob(f"*.{fmt}")):
        rel = path.relative_to(target)
        values = [unquote(part.partition("=")[2]) for part in rel.parts[:2]]
        device, month = (None if v == HIVE_NULL else v for v in values)
        device = serial_of.get(device, device)
        found.setdefault((spec.table, device, month), []).append(rel.as_posix())
    return {k: tuple(v) for k, v in found.items()}


def _remove(folder: Path, rel: str) -> None:
    """Delete a partition's file, then its folders as they become empty."""
    path = folder / rel
    try:
        path.unlink(missing_ok=True)
        for parent in path.parents:
            if parent == folder or not parent.is_relative_to(folder):
                break
            if any(parent.iterdir()):
                break
            parent.rmdir()
    except OSError as err:
        raise _cannot_write(path, err) from None


# ---------------------------------------------------------------------- metadata tables


def _mirror_tables(con: duckdb.DuckDBPyConnection) -> list[str]:
    """The mirror's tables, by name."""
    return [t for (t,) in con.execute(
        "SELECT table_name FROM duckdb_tables() WHERE schema_name = 'main' ORDER BY 1"
    ).fetchall()]


def _write_metadata(con: duckdb.DuckDBPyConnection, out: Path, staging: Path, fmt: str,
                    previous: dict[_Key, _Part], now: datetime) -> dict[_Key, _Part]:
    """Every other table, one file in a folder of its own (``METADATA_FILE``), rewritten
    when its rows changed (the same fingerprint as a partition's, over the whole table)."""
    partitioned = {spec.table for spec in PARTITIONED}
    skipped = set(BOOKKEEPING + DERIVED) | partitioned
    tables = [t for t in _mirror_tables(con) if t not in skipped]
    done: dict[_Key, _Part] = {}
    for table in tables:
        columns = _columns(con, table)
        n, fingerprint = con.execute(
            f"SELECT count(*), (coalesce(sum({_row_hash('t', columns)}), 0) % {_MOD_64})"
            f"::UBIGINT FROM {table} t").fetchall()[0]
        key, name = (table, None, None), METADATA_FILE.format(fmt=fmt)
        fingerprint = _with_columns(fingerprint, columns)
        part = _Part(n, fingerprint, files=(name,))
        before = previous.get(key)
        if _unchanged(out / table, part, before) and before.files == (name,):
            done[key] = _Part(n, fingerprint, files=(name,), written_at=before.written_at)
            continue
        select = ", ".join(_exported("t", c, data_type) for c, data_type in columns)
        staged = staging / f"{table}.{fmt}"
        _copy(con, f"SELECT {select} FROM {table} t", staged, _COPY_OPTIONS[fmt])
        _io(lambda: (out / table).mkdir(exist_ok=True), out / table)
        _replace(staged, out / table / name)
        done[key] = _Part(n, fingerprint, files=(name,), written_at=now)
    return done


# ---------------------------------------------------------------------- manifest, record


def _sweep(out: Path, state: dict[_Key, _Part], previous: dict[_Key, _Part]) -> None:
    """Delete what the folder holds beyond this export: files in a table's folder (a table
    exported now or last time) that the export does not list, and table files at its top
    (an older layout's, an older export's, or those of a partition an interrupted run
    wrote)."""
    keep = {f"{key[0]}/{f}" for key, part in state.items() for f in part.files}
    # a table's folder stays while the table does (Trino's table over it needs it, empty
    # or not); the folder of a table the mirror no longer has goes with its last file
    tables = {spec.table for spec in PARTITIONED} | {key[0] for key in state}
    for table in sorted(tables | {key[0] for key in previous}):
        folder = out / table
        if not folder.is_dir():
            continue
        for path in sorted(folder.rglob("*"), reverse=True):  # files before their folders
            rel = path.relative_to(out).as_posix()
            if path.is_file() and rel not in keep:
                _remove(folder, path.relative_to(folder).as_posix())
            elif path.is_dir() and not any(path.iterdir()):
                _io(path.rmdir, path)
        if table not in tables and not any(folder.iterdir()):
            _io(folder.rmdir, folder)
    for path in out.iterdir():
        if path.is_file() and path.suffix in (".parquet", ".csv"):
            _io(path.unlink, path)


def _iso(t: datetime | None) -> str | None:
    return None if t is None else t.astimezone(timezone.utc).isoformat().replace("+00:00", "Z")


def _write_manifest(mirror: Mirror, out: Path, staging: Path, fmt: str, export_id: str,
                    token: str, state: dict[_Key, _Part], now: datetime) -> Path:
    """``_manifest.json``: the tables, their columns and types, each partition with its rows
    and files (relative to the folder), who wrote it and when.  Written last and renamed
    into place, so that it always describes a complete export."""
    tables: dict[str, dict] = {}
    for spec in PARTITIONED:
        parts = sorted(((k, p) for k, p in state.items() if k[0] == spec.table),
                       key=lambda kp: (kp[0][1] or "", kp[0][2] or ""))
        tables[spec.table] = {
            "partitioned_by": list(PARTITION_COLUMNS),
            "rows": sum(p.rows for _, p in parts),
            "columns": _manifest_columns(mirror.con, spec.table, partitioned=True),
            "partitions": [{"device_serial_number": k[1], "month": k[2], "rows": p.rows,
                            "first_ts": _iso(p.first_ts), "last_ts": _iso(p.last_ts),
                            "files": [f"{spec.table}/{f}" for f in p.files],
                            **({"device_serial_number_in_folder": _folder_value(k[1])}
                               if _folder_value(k[1]) != k[1] else {})}
                           for k, p in parts]}
    for key, part in sorted((k, p) for k, p in state.items() if k[1:] == (None, None)):
        tables[key[0]] = {"rows": part.rows, "files": [f"{key[0]}/{f}" for f in part.files],
                          "columns": _manifest_columns(mirror.con, key[0])}
    manifest = {
        "devmon_export": True, "layout": LAYOUT, "file_format": fmt,
        "export_id": export_id, "token": token, "exported_at": _iso(now),
        "devmon_version": __version__,
        "mirror": {"path": os.path.realpath(mirror.path), "host": socket.gethostname(),
                   "schema_version": mirror.schema_version()},
        "timestamps": "UTC instants: Parquet TIMESTAMP(isAdjustedToUTC=true, MICROS)",
        "tables": tables,
    }
    staged, target = staging / MANIFEST, out / MANIFEST
    try:
        with open(staged, "w", encoding="utf-8") as f:
            json.dump(manifest, f, indent=1)
            f.flush()
            os.fsync(f.fileno())
    except OSError as err:
        raise _cannot_write(target, err) from None
    _replace(staged, target)
    return target


def _manifest_columns(con: duckdb.DuckDBPyConnection, table: str,
                      partitioned: bool = False) -> list[dict[str, str]]:
    """The columns as written, with their type (DuckDB's name for it)."""
    columns = [c for c in _columns(con, table) if not partitioned or c[0] not in PARTITION_COLUMNS]
    select = ", ".join(_exported("t", name, data_type) for name, data_type in columns)
    described = con.execute(f"DESCRIBE SELECT {select} FROM {table} t").fetchall()
    out = [{"name": row[0], "type": row[1]} for row in described]
    if partitioned:
        out += [{"name": c, "type": "VARCHAR", "partition": True} for c in PARTITION_COLUMNS]
    return out


def _record(mirror: Mirror, out: Path, fmt: str, export_id: str, token: str,
            state: dict[_Key, _Part], now: datetime) -> None:
    """What the folder now holds, in the mirror, in one transaction: the next export to the
    folder starts from it."""
    keys = list(state)
    parts = [state[k] for k in keys]
    ts = pa.timestamp("us", tz="UTC")
    table = pa.table({
        "table_name": pa.array([k[0] for k in keys], pa.string()),
        "device_serial_number": pa.array([k[1] for k in keys], pa.string()),
        "month": pa.array([k[2] for k in keys], pa.string()),
        "rows": pa.array([p.rows for p in parts], pa.int64()),
        "fingerprint": pa.array([p.fingerprint for p in parts], pa.uint64()),
        "first_ts": pa.array([p.first_ts for p in parts], ts),
        "last_ts": pa.array([p.last_ts for p in parts], ts),
        "files": pa.array([list(p.files) for p in parts], pa.list_(pa.string())),
        "written_at": pa.array([p.written_at for p in parts], ts),
    })
    con = mirror.con
    con.register("export_state", table)
    try:
        with mirror._transaction():
            con.execute("DELETE FROM export_partitions WHERE export_id = ?", [export_id])
            con.execute("INSERT INTO export_partitions BY NAME SELECT ? AS export_id, * "
                        "FROM export_state", [export_id])
            con.execute("INSERT OR REPLACE INTO export_folders VALUES (?, ?, ?, ?, ?, ?)",
                        [export_id, str(out.resolve()), fmt, token, mirror.schema_version(),
                         now])
    finally:
        con.unregister("export_state")

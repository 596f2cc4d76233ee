"""`devmon export` as other engines read it: Spark in local mode (one session for the module)
and DuckDB read every table with the mirror's row counts, UUIDs as text and timestamps as the
same UTC instants, and a filter on device and month reads one partition.  A second export
rewrites only the partitions whose data changed, deletes those whose rows are gone, and its
manifest lists exactly the files present.  A folder it must not use gets one clear line.

A real reference server, a real sync, the real CLI in a subprocess."""

from __future__ import annotations

import errno
import json
import os
import shutil
import subprocess
from datetime import timedelta
from pathlib import Path
from urllib.parse import unquote

import duckdb
import pyarrow.parquet as pq
import pytest

from devmon_sync.server import WorldSize
from devmon_sync.server.misbehave import Misbehaviour
from devmon_sync.store import Mirror, StoreError

from support import NOW, synced_mirror
from support import devmon as run_devmon

WORLD = WorldSize(sites=2, devices=12, days=20)  # 6 GNSS rovers; December and January
EARLY = NOW + timedelta(hours=8)
PARTITIONED = ("readings", "gnss_epochs", "gnss_projected")
BOOKKEEPING = ("export_folders", "export_partitions",
               "readings_summary")  # and what devmon derives for its own reads
SPARK_TYPES = {"UUID": "string", "JSON": "string", "VARCHAR": "string",
               "TIMESTAMP WITH TIME ZONE": "timestamp", "DOUBLE": "double", "BIGINT": "long",
               "INTEGER": "integer", "BOOLEAN": "boolean"}
"""What Spark must read each mirror column type as (a type not listed fails the test: decide
how the export writes it)."""
DUCKDB_TYPES = {"UUID": "VARCHAR", "JSON": "VARCHAR"}  # every other type reads back as itself
# The rows of a partitioned table as the export writes them, from the mirror.
SHAPED = {
    "readings": "SELECT r.* REPLACE (r.parameter_uuid::VARCHAR AS parameter_uuid), "
                "p.device_serial_number, strftime(r.ts, '%Y-%m') AS month "
                "FROM readings r JOIN parameters p ON p.uuid = r.parameter_uuid",
    "gnss_epochs": "SELECT * REPLACE (sensor_uuid::VARCHAR AS sensor_uuid), "
                   "strftime(ts, '%Y-%m') AS month FROM gnss_epochs",
    "gnss_projected": "SELECT g.* REPLACE (g.sensor_uuid::VARCHAR AS sensor_uuid), "
                      "s.device_serial_number, strftime(g.ts, '%Y-%m') AS month "
                      "FROM gnss_projected g JOIN gnss_solutions s USING (sensor_uuid)",
}


def devmon(*args: str) -> subprocess.CompletedProcess:
    return run_devmon(*args, timeout=300)


def export(db, out, fmt: str = "parquet") -> subprocess.CompletedProcess:
    return devmon("export", "--db", str(db), "--out", str(out), "--format", fmt)


def exported_ok(db, out, fmt: str = "parquet") -> str:
    r = export(db, out, fmt)
    assert r.returncode == 0, r.stderr
    assert "Traceback" not in r.stderr
    return r.stdout


def query(db, sql: str, params=None) -> list[tuple]:
    con = duckdb.connect(str(db), read_only=True)
    try:
        con.execute("SET TimeZone = 'UTC'")
        return con.execute(sql, params or []).fetchall()
    finally:
        con.close()


def mirror_tables(db) -> dict[str, list[tuple[str, str]]]:
    """Every table of the mirror but the export's own record and the readings' summaries,
    with its (column, type)s."""
    rows = query(db, "SELECT table_name, column_name, data_type FROM duckdb_columns() "
                     "WHERE table_oid IN (SELECT table_oid FROM duckdb_tables() WHERE "
                     "schema_name = 'main') ORDER BY table_name, column_index")
    out: dict[str, list[tuple[str, str]]] = {}
    for table, column, data_type in rows:
        if table not in BOOKKEEPING:
            out.setdefault(table, []).append((column, data_type))
    return out


def partition_of(rel: str) -> tuple[str, str, str] | None:
    """(table, device, month) of a file's path relative to the export folder."""
    parts = rel.split("/")
    if len(parts) != 4 or parts[0] not in PARTITIONED:
        return None
    return parts[0], unquote(parts[1].partition("=")[2]), unquote(parts[2].partition("=")[2])


def stamps(out: Path) -> dict[str, tuple[int, int]]:
    """(inode, mtime in ns) of every file of the export but its manifest."""
    return {p.relative_to(out).as_posix(): (p.stat().st_ino, p.stat().st_mtime_ns)
            for p in out.rglob("*") if p.is_file() and p.name != "_manifest.json"}


def check_manifest(out: Path, fmt: str = "parquet") -> dict:
    """The manifest lists exactly the files present, each partition and table with the rows
    its files hold; no staging file is left behind."""
    manifest = json.loads((out / "_manifest.json").read_text())
    listed: set[str] = set()
    for table, entry in manifest["tables"].items():
        for part in entry.get("partitions", [entry]):
            listed |= set(part["files"])
            if fmt == "parquet":
                assert sum(pq.ParquetFile(out / f).metadata.num_rows
                           for f in part["files"]) == part["rows"], (table, part)
    present = {p.relative_to(out).as_posix() for p in out.rglob("*") if p.is_file()}
    assert present - {"_manifest.json"} == listed
    assert not (out / "_devmon_staging").exists()
    return manifest


def changed_partitions(db, out: Path) -> set[tuple[str, str, str]]:
    """The partitions whose rows in the export folder differ from the mirror's now (rows
    compared one by one, both ways): what an export must write or delete, nothing else."""
    con = duckdb.connect()
    try:
        con.execute("SET TimeZone = 'UTC'")
        con.execute(f"ATTACH '{db}' AS m (READ_ONLY)")
        con.execute("USE m")
        found = set()
        for table, shaped in SHAPED.items():
            files = f"{out}/{table}/**/*.parquet"
            if list((out / table).rglob("*.parquet")):
                exported = (f"SELECT * FROM read_parquet('{files}', hive_partitioning = true, "
                            f"hive_types = {{'device_serial_number': VARCHAR, 'month': VARCHAR}})")
                columns = ", ".join(f'"{c}"' for (c, *_) in
                                    con.execute(f"DESCRIBE {exported}").fetchall())
            else:
                columns = ", ".join(f'"{c}"' for (c, *_) in
                                    con.execute(f"DESCRIBE {shaped}").fetchall())
                exported = f"SELECT {columns} FROM ({shaped}) WHERE false"
            a, b = f"SELECT {columns} FROM ({exported})", f"SELECT {columns} FROM ({shaped})"
            found |= {(table, d, m) for d, m in con.execute(
                f"SELECT DISTINCT device_serial_number, month FROM (({a} EXCEPT ALL {b}) "
                f"UNION ALL ({b} EXCEPT ALL {a}))").fetchall()}
        return found
    finally:
        con.close()


def written_and_deleted(before: dict, after: dict) -> tuple[set, set]:
    """Partitions with a file written (new inode or mtime), and partitions gone."""
    def parts(files):
        return {partition_of(f) for f in files} - {None}
    rewritten = {partition_of(f) for f, stamp in after.items()
                 if partition_of(f) and before.get(f) != stamp}
    return rewritten, parts(before) - parts(after)


def one_error_line(r: subprocess.CompletedProcess, *words: str) -> str:
    assert r.returncode == 2, (r.stdout, r.stderr)
    assert "Traceback" not in r.stderr + r.stdout, r.stderr
    lines = r.stderr.strip().splitlines()
    assert len(lines) == 1, r.stderr
    for word in words:
        assert word in lines[0], lines[0]
    return lines[0]


# ----------------------------------------------------------------------------- fixtures

@pytest.fixture(scope="module")
def pristine(tmp_path_factory) -> Path:
    """A mirror synced in full at EARLY, never exported."""
    return synced_mirror(tmp_path_factory.mktemp("pristine") / "mirror.duckdb", WORLD,
                         now=EARLY)


@pytest.fixture
def mirror(pristine, tmp_path) -> Path:
    """A copy of the pristine mirror this test may change."""
    copy = tmp_path / "mirror.duckdb"
    shutil.copy(pristine, copy)
    return copy


@pytest.fixture(scope="module")
def shared(pristine, tmp_path_factory) -> tuple[Path, Path]:
    """(mirror, export folder): one export, which the engines read."""
    folder = tmp_path_factory.mktemp("shared")
    db = folder / "mirror.duckdb"
    shutil.copy(pristine, db)
    out = folder / "export"
    exported_ok(db, out)
    return db, out


@pytest.fixture(scope="module")
def spark():
    """One local Spark for the module: one core, little memory, no web UI.  Its session time
    zone is not UTC, so that instants read as wall times would show."""
    if not (shutil.which("java") or os.environ.get("JAVA_HOME")):
        pytest.skip("no Java runtime: `bash .ci/install-system-packages` installs "
                    "openjdk-17-jre-headless, which Spark needs")
    from pyspark.sql import SparkSession

    session = (SparkSession.builder.master("local[1]").appName("devmon-export-test")
               .config("spark.ui.enabled", "false")
               .config("spark.driver.memory", "512m")
               .config("spark.driver.host", "127.0.0.1")
               .config("spark.driver.bindAddress", "127.0.0.1")
               .config("spark.sql.shuffle.partitions", "1")
               .config("spark.sql.adaptive.enabled", "false")  # the scan's metrics in the plan
               .config("spark.sql.sources.parallelPartitionDiscovery.threshold", "100000")
               .config("spark.sql.session.timeZone", "America/New_York")
               .getOrCreate())
    session.sparkContext.setLogLevel("ERROR")
    yield session
    session.stop()


def spark_table(spark, out: Path, table: str):
    """Every table is a folder, partitioned or not (as Trino's Hive connector needs)."""
    return spark.read.parquet(str(out / table))


# ----------------------------------------------------------------------------- Spark

def test_spark_reads_every_table_with_the_mirrors_counts_types_and_instants(spark, shared):
    db, out = shared
    tables = mirror_tables(db)
    assert set(PARTITIONED) <= set(tables) and len(tables) > 20
    for table, columns in tables.items():
        df = spark_table(spark, out, table)
        types = {f.name: f.dataType.typeName() for f in df.schema.fields}
        expected = {name: SPARK_TYPES.get(data_type, f"? {data_type}")
                    for name, data_type in columns}
        if table in PARTITIONED:
            expected.update(device_serial_number="string", month="string")
        assert types == expected, table
        stamps_ = [name for name, data_type in columns if SPARK_TYPES.get(data_type) ==
                   "timestamp"]
        # rows, and each timestamp column as instants: count, first, last and a checksum
        # of the microseconds since 1970 (zone-free on both sides)
        spark_row = df.selectExpr("count(*)", *[
            e for c in stamps_ for e in (f"count({c})", f"min(unix_micros({c}))",
                                         f"max(unix_micros({c}))",
                                         f"sum(unix_micros({c}) % 999983)")]).collect()[0]
        source = f"({SHAPED[table]})" if table in PARTITIONED else table
        duck_row = query(db, "SELECT count(*)" + "".join(
            f", count({c}), min(epoch_us({c})), max(epoch_us({c})), "
            f"sum(epoch_us({c}) % 999983)" for c in stamps_) + f" FROM {source}")[0]
        assert tuple(spark_row) == duck_row, table
        if table in PARTITIONED:
            assert duck_row[0] == query(db, f"SELECT count(*) FROM {table}")[0][0] > 0


def test_spark_filter_on_device_and_month_reads_one_partition(spark, shared):
    db, out = shared
    manifest = check_manifest(out)
    partitions = manifest["tables"]["readings"]["partitions"]
    months = {p["month"] for p in partitions}
    assert len(partitions) > 10 and len(months) >= 2
    part = max(partitions, key=lambda p: (p["month"] == "2025-12", p["rows"]))
    device, month = part["device_serial_number"], part["month"]
    selected = (spark.read.parquet(str(out / "readings"))
                .filter(f"device_serial_number = '{device}' AND month = '{month}'")
                .selectExpr("parameter_uuid", "unix_micros(ts)", "value"))
    got = sorted(tuple(r) for r in selected.collect())
    expected = query(db, "SELECT r.parameter_uuid::VARCHAR, epoch_us(r.ts), r.value "
                         "FROM readings r JOIN parameters p ON p.uuid = r.parameter_uuid "
                         "WHERE p.device_serial_number = ? AND strftime(r.ts, '%Y-%m') = ? "
                         "ORDER BY 1, 2", [device, month])
    assert got == expected and len(got) == part["rows"] > 0
    plan = selected._jdf.queryExecution().executedPlan()
    scans = [leaf for leaf in _seq(plan.collectLeaves())
             if leaf.getClass().getSimpleName() == "FileSourceScanExec"]
    assert len(scans) == 1, plan.toString()
    filters = " ".join(f.sql() for f in _seq(scans[0].partitionFilters()))
    assert "device_serial_number" in filters and "month" in filters, filters
    metrics = scans[0].metrics()
    assert metrics.apply("numPartitions").value() == 1
    assert metrics.apply("numFiles").value() == len(part["files"])


def _seq(scala_seq) -> list:
    return [scala_seq.apply(i) for i in range(scala_seq.size())]


# ----------------------------------------------------------------------------- DuckDB

def test_duckdb_reads_the_export_with_the_mirrors_rows_and_types(shared):
    db, out = shared
    assert changed_partitions(db, out) == set()  # every row, one by one
    con = duckdb.connect()
    try:
        for table, columns in mirror_tables(db).items():
            source = (f"read_parquet('{out}/{table}/**/*.parquet', hive_partitioning = true)"
                      if table in PARTITIONED else f"read_parquet('{out}/{table}/*.parquet')")
            described = {c: t for (c, t, *_) in con.execute(f"DESCRIBE FROM {source}")
                         .fetchall()}
            expected = {c: DUCKDB_TYPES.get(t, t) for c, t in columns}
            if table in PARTITIONED:
                expected.update(device_serial_number="VARCHAR", month="VARCHAR")
            assert described == expected, table
            assert con.execute(f"SELECT count(*) FROM {source}").fetchone()[0] == \
                query(db, f"SELECT count(*) FROM {table}")[0][0], table
    finally:
        con.close()


def test_every_file_holds_text_uuids_and_utc_microsecond_instants(shared):
    """What the Parquet files declare, whichever engine reads them: no UUID or JSON logical
    type, no fixed-length binary, every timestamp an instant (isAdjustedToUTC) in
    microseconds."""
    db, out = shared
    timestamps = {(t, c) for t, cols in mirror_tables(db).items() for c, data_type in cols
                  if data_type == "TIMESTAMP WITH TIME ZONE"}
    files = sorted(out.rglob("*.parquet"))
    assert len(files) > 30
    seen = set()
    for path in files:
        table = path.relative_to(out).parts[0]
        schema = pq.ParquetFile(path).schema
        for i in range(len(schema)):
            column = schema.column(i)
            logical = json.loads(column.logical_type.to_json())
            assert column.physical_type != "FIXED_LEN_BYTE_ARRAY", (path, column.name)
            assert logical["Type"] not in ("UUID", "JSON"), (path, column.name)
            if (table, column.name) in timestamps:
                seen.add((table, column.name))
                assert column.physical_type == "INT64"
                assert logical["Type"] == "Timestamp" and logical["isAdjustedToUTC"] is True \
                    and logical["timeUnit"] == "microseconds", (path, column.name, logical)
    assert seen == timestamps


def test_the_manifest_says_what_the_folder_holds(shared):
    db, out = shared
    manifest = check_manifest(out)
    assert manifest["layout"] == 3 and manifest["file_format"] == "parquet"
    assert manifest["mirror"]["path"] == os.path.realpath(db)
    assert manifest["mirror"]["schema_version"] == query(
        db, "SELECT max(version) FROM schema_migrations")[0][0]
    assert manifest["exported_at"].endswith("Z") and manifest["devmon_version"]
    assert set(manifest["tables"]) == set(mirror_tables(db))
    readings = manifest["tables"]["readings"]
    assert readings["rows"] == query(db, "SELECT count(*) FROM readings")[0][0]
    assert readings["partitioned_by"] == ["device_serial_number", "month"]
    assert {c["name"]: c["type"] for c in readings["columns"]}["parameter_uuid"] == "VARCHAR"


def test_every_table_is_a_folder_of_its_own(shared):
    """Trino's and Hive's tables are folders (``external_location``), never files: at the
    top of the export only the manifest and one folder per table; a metadata table's folder
    holds its one file, a partitioned table's only Hive partitions (name=value folders)."""
    db, out = shared
    top = {p.name: p.is_dir() for p in out.iterdir()}
    assert top.pop("_manifest.json") is False
    assert set(top) == set(mirror_tables(db)) and all(top.values()), top
    for table in top:
        files = sorted(p.relative_to(out / table).as_posix()
                       for p in (out / table).rglob("*") if p.is_file())
        if table in PARTITIONED:
            assert files and all(f.startswith("device_serial_number=") and "/month=" in f
                                 for f in files), (table, files[:3])
        else:
            assert files == ["data_0.parquet"], (table, files)


# ----------------------------------------------------------------------------- incremental

def test_a_second_export_with_nothing_new_rewrites_nothing(mirror, tmp_path):
    out = tmp_path / "export"
    first = exported_ok(mirror, out)
    manifest = check_manifest(out)
    partitions = sum(len(manifest["tables"][t]["partitions"]) for t in PARTITIONED)
    assert f"{partitions} partitions written, 0 unchanged, 0 deleted" in first
    before = stamps(out)
    second = exported_ok(mirror, out)
    assert f"0 partitions written, {partitions} unchanged, 0 deleted" in second, second
    assert "0 written" in second  # the other tables too
    assert stamps(out) == before
    check_manifest(out)
    # the folder is known by its manifest, not its path: moved (or mounted elsewhere), the
    # same
    moved = tmp_path / "moved"
    out.rename(moved)
    assert f"0 partitions written, {partitions} unchanged" in exported_ok(mirror, moved)
    assert stamps(moved) == before


@pytest.mark.parametrize("misbehaviour", [None, Misbehaviour(nan_rate=0.3, seed=1)],
                         ids=["new-data", "re-read-points-quarantined"])
def test_an_export_after_a_sync_rewrites_only_the_partitions_it_changed(mirror, tmp_path,
                                                                         misbehaviour):
    """Three more hours synced: new points in January, and the 6 h the sync reads again
    (re-written with the same rows, or, from a server that now sends some as NaN, moved to
    quarantine): exactly the partitions whose rows differ are written."""
    out = tmp_path / "export"
    exported_ok(mirror, out)
    before = stamps(out)
    quarantined = query(mirror, "SELECT count(*) FROM quarantine")[0][0]
    options = {"misbehaviour": misbehaviour} if misbehaviour else {}
    synced_mirror(mirror, WORLD, now=EARLY + timedelta(hours=3), **options)
    expected = changed_partitions(mirror, out)
    assert expected and {m for _, _, m in expected} == {"2026-01"}
    if misbehaviour:  # rows stored before are gone from the mirror
        assert query(mirror, "SELECT count(*) FROM quarantine")[0][0] > quarantined
    stdout = exported_ok(mirror, out)
    rewritten, deleted = written_and_deleted(before, stamps(out))
    assert rewritten | deleted == expected
    assert f"{len(rewritten)} partitions written" in stdout and len(rewritten) > 1, stdout
    assert changed_partitions(mirror, out) == set()
    manifest = check_manifest(out)
    unchanged = sum(len(manifest["tables"][t]["partitions"]) for t in PARTITIONED) - \
        len(rewritten)
    assert unchanged > len(rewritten) and f"{unchanged} unchanged" in stdout


def test_rows_removed_or_corrected_in_the_mirror_are_exported_next_time(mirror, tmp_path):
    """A partition whose rows are all gone is deleted (its folders too); one whose value was
    corrected (the same rows and times) is rewritten; nothing else is."""
    out = tmp_path / "export"
    exported_ok(mirror, out)
    before = stamps(out)
    parts = check_manifest(out)["tables"]["readings"]["partitions"]
    december = [p for p in parts if p["month"] == "2025-12"]
    gone, corrected = december[0], december[1]
    con = duckdb.connect(str(mirror))
    con.execute("SET TimeZone = 'UTC'")
    of_partition = ("parameter_uuid IN (SELECT uuid FROM parameters WHERE "
                    "device_serial_number = ?) AND strftime(ts, '%Y-%m') = ?")
    con.execute(f"DELETE FROM readings WHERE {of_partition}",
                [gone["device_serial_number"], gone["month"]])
    key = con.execute(f"SELECT parameter_uuid, ts FROM readings WHERE {of_partition} AND "
                      f"value IS NOT NULL ORDER BY ts LIMIT 1",
                      [corrected["device_serial_number"], corrected["month"]]).fetchall()[0]
    con.execute("UPDATE readings SET value = value + 1 WHERE parameter_uuid = ? AND ts = ?",
                list(key))
    con.close()
    assert changed_partitions(mirror, out) == {
        ("readings", gone["device_serial_number"], "2025-12"),
        ("readings", corrected["device_serial_number"], "2025-12")}
    stdout = exported_ok(mirror, out)
    rewritten, deleted = written_and_deleted(before, stamps(out))
    assert rewritten == {("readings", corrected["device_serial_number"], "2025-12")}
    assert deleted == {("readings", gone["device_serial_number"], "2025-12")}
    assert "1 partition written" in stdout and "1 deleted" in stdout, stdout
    gone_folder = out / Path(gone["files"][0]).parent
    assert not gone_folder.exists()
    if not any(p["device_serial_number"] == gone["device_serial_number"] for p in parts
               if p is not gone):
        assert not gone_folder.parent.exists()
    assert changed_partitions(mirror, out) == set()
    manifest = check_manifest(out)
    assert gone["files"][0] not in {f for p in manifest["tables"]["readings"]["partitions"]
                                    for f in p["files"]}


def test_a_column_added_to_a_table_rewrites_that_table_only(mirror, tmp_path):
    """As a later migration might: every partition of gnss_projected is rewritten with the new
    column, the other tables' files stay."""
    out = tmp_path / "export"
    exported_ok(mirror, out)
    before = stamps(out)
    projected = {k for k in map(partition_of, before) if k and k[0] == "gnss_projected"}
    con = duckdb.connect(str(mirror))
    con.execute("ALTER TABLE gnss_projected ADD COLUMN quality DOUBLE")
    con.close()
    stdout = exported_ok(mirror, out)
    rewritten, deleted = written_and_deleted(before, stamps(out))
    assert rewritten == projected and not deleted
    assert f"{len(projected)} partitions written" in stdout and "0 written" in stdout, stdout
    con = duckdb.connect()
    described = [c for (c, *_) in con.execute(
        f"DESCRIBE FROM read_parquet('{out}/gnss_projected/**/*.parquet')").fetchall()]
    con.close()
    assert "quality" in described


def test_a_table_the_mirror_no_longer_has_leaves_the_export_with_its_folder(mirror, tmp_path):
    """As a later migration dropping a table might: its folder goes, the others stay; a
    table that is still there but has no rows keeps its folder (a Trino table over it
    needs the folder to exist)."""
    out = tmp_path / "export"
    con = duckdb.connect(str(mirror))
    con.execute("CREATE TABLE site_notes AS SELECT 'a note' AS note")
    con.close()
    exported_ok(mirror, out)
    assert (out / "site_notes" / "data_0.parquet").is_file()
    before = stamps(out)
    con = duckdb.connect(str(mirror))
    con.execute("DROP TABLE site_notes")
    con.execute("DELETE FROM gnss_projected")
    con.close()
    exported_ok(mirror, out)
    assert not (out / "site_notes").exists()
    manifest = check_manifest(out)
    assert "site_notes" not in manifest["tables"]
    assert (out / "gnss_projected").is_dir() and not any((out / "gnss_projected").iterdir())
    assert manifest["tables"]["gnss_projected"]["partitions"] == []
    kept = {k: v for k, v in before.items() if not k.startswith(("site_notes/", "gnss_projected/"))}
    assert kept == {k: v for k, v in stamps(out).items() if k in kept}


def test_an_older_devmons_export_is_replaced_whole(mirror, tmp_path):
    """A folder without a manifest that holds only what an export writes (here as devmon
    wrote it before: UUID columns, a partition since gone) is rewritten entirely."""
    out = tmp_path / "export"
    out.mkdir()
    con = duckdb.connect(str(mirror), read_only=True)
    con.execute(f"COPY (SELECT r.*, p.device_serial_number, strftime(r.ts, '%Y-%m') AS month "
                f"FROM readings r JOIN parameters p ON p.uuid = r.parameter_uuid) TO "
                f"'{out}/readings' (FORMAT parquet, PARTITION_BY (device_serial_number, month))")
    (out / "readings" / "device_serial_number=OLD" / "month=2020-01").mkdir(parents=True)
    con.execute(f"COPY (SELECT * FROM readings LIMIT 5) TO "
                f"'{out}/readings/device_serial_number=OLD/month=2020-01/data_0.parquet'")
    con.execute(f"COPY devices TO '{out}/devices.parquet'")
    con.close()
    stdout = exported_ok(mirror, out)
    assert "(everything: the folder held an export without a manifest" in stdout, stdout
    assert not (out / "readings" / "device_serial_number=OLD").exists()
    check_manifest(out)
    assert changed_partitions(mirror, out) == set()
    for path in out.rglob("*.parquet"):
        schema = pq.ParquetFile(path).schema
        assert all(schema.column(i).logical_type.type != "UUID" for i in range(len(schema)))


def test_a_layout_2_export_is_rewritten_into_folders(mirror, tmp_path):
    """An export of devmon before layout 3 (the metadata tables as files at the top, which
    Trino cannot declare) is rewritten whole: one folder per table, no file left at the top."""
    out = tmp_path / "export"
    exported_ok(mirror, out)
    manifest = json.loads((out / "_manifest.json").read_text())
    metadata = [t for t in manifest["tables"] if t not in PARTITIONED]
    for table in metadata:  # back to layout 2
        (out / table / "data_0.parquet").rename(out / f"{table}.parquet")
        (out / table).rmdir()
        manifest["tables"][table]["files"] = [f"{table}.parquet"]
    manifest["layout"] = 2
    (out / "_manifest.json").write_text(json.dumps(manifest))
    stdout = exported_ok(mirror, out)
    assert "(everything: the folder has export layout 2, this devmon writes 3)" in stdout, stdout
    assert not list(out.glob("*.parquet"))
    assert check_manifest(out)["layout"] == 3
    assert all((out / t / "data_0.parquet").is_file() for t in metadata)
    assert changed_partitions(mirror, out) == set()


def test_csv_exports_are_incremental_too(mirror, tmp_path):
    out = tmp_path / "csv"
    exported_ok(mirror, out, "csv")
    before = stamps(out)
    manifest = check_manifest(out, "csv")
    assert manifest["file_format"] == "csv"
    assert all(f.endswith(".csv") for f in before)
    partitions = sum(len(manifest["tables"][t]["partitions"]) for t in PARTITIONED)
    assert f"0 partitions written, {partitions} unchanged, 0 deleted" in \
        exported_ok(mirror, out, "csv")
    assert stamps(out) == before


# ----------------------------------------------------------------------------- refusals

def test_a_folder_another_mirror_exports_to_is_refused(pristine, mirror, tmp_path):
    out = tmp_path / "export"
    other = tmp_path / "other.duckdb"
    shutil.copy(pristine, other)
    exported_ok(other, out)
    before = stamps(out), (out / "_manifest.json").read_text()
    line = one_error_line(export(mirror, out), "another mirror", str(other.resolve()), "--out")
    assert "two mirrors never export into one folder" in line
    assert (stamps(out), (out / "_manifest.json").read_text()) == before


@pytest.mark.parametrize("case", ["strangers", "manifest", "format"])
def test_a_folder_the_export_must_not_use_gets_one_line(mirror, tmp_path, case):
    """(A file named as the folder, or a folder under a file: tests/test_bad_arguments.py.)"""
    out = tmp_path / "export"
    if case == "strangers":
        out.mkdir()
        (out / "notes.txt").write_text("mine")
        words = ["holds no devmon export", "'notes.txt'", "--out"]
    elif case == "manifest":
        out.mkdir()
        (out / "_manifest.json").write_text("{not json")
        words = ["cannot be read as a devmon export manifest", "--out"]
    else:
        exported_ok(mirror, out, "csv")
        words = ["as csv, not parquet", "--out"]
    before = sorted(p.relative_to(out) for p in out.rglob("*")), stamps(out)
    one_error_line(export(mirror, out), *words)
    assert (sorted(p.relative_to(out) for p in out.rglob("*")), stamps(out)) == before


@pytest.fixture
def small_disk(small_tmpfs):
    """A folder on a 256 kB tmpfs of its own, and its remount."""
    return small_tmpfs("256k")


def test_a_full_disk_is_one_line_and_the_same_command_completes_later(mirror, small_disk):
    disk, remount = small_disk
    out = disk / "export"
    one_error_line(export(mirror, out), "(the disk is full): free space", "--out")
    remount("size=64m")
    exported_ok(mirror, out)
    check_manifest(out)
    assert changed_partitions(mirror, out) == set()


def test_a_read_only_folder_is_one_line(mirror, small_disk):
    disk, remount = small_disk
    remount("ro")
    one_error_line(export(mirror, disk / "export"), "Cannot write into",
                   "Read-only file system", "--out")
    one_error_line(export(mirror, disk), "Cannot write into", "--out")


def test_a_full_disk_anywhere_is_a_store_error_that_says_so(mirror, tmp_path, monkeypatch):
    """The same without a tmpfs: the rename of a written file fails as a full disk does."""
    def full(*_args, **_kwargs):
        raise OSError(errno.ENOSPC, "No space left on device")

    monkeypatch.setattr(os, "replace", full)
    with Mirror.open(mirror) as m, pytest.raises(StoreError) as err:
        m.export(tmp_path / "export", "parquet")
    assert "(the disk is full): free space, or choose another folder with --out" in \
        str(err.value)
    monkeypatch.undo()
    exported_ok(mirror, tmp_path / "export")
    check_manifest(tmp_path / "export")

"""``devmon export``: a mirror's tables as Parquet or CSV files (``Mirror.export``), for
Spark, Trino and DuckDB."""

from __future__ import annotations

from devmon_sync.cli.args import UsageError, add_db_argument, open_existing_mirror


def add_export(sub) -> None:
    p = sub.add_parser("export", help="write a mirror's tables to Parquet or CSV files",
                       description="Write every table of a mirror to files that Spark, Trino "
                                   "and DuckDB read: readings and GNSS epochs partitioned by "
                                   "device and month (Hive layout), metadata one file per "
                                   "table, and _manifest.json. Run again, it rewrites only "
                                   "what changed since the last export to the folder.")
    add_db_argument(p, "mirror file")
    p.add_argument("--format", choices=("parquet", "csv"), default="parquet")
    p.add_argument("--out", required=True,
                   help="output folder (created if missing), this mirror's alone")
    p.set_defaults(func=run_export)


def run_export(args) -> int:
    from devmon_sync.store import StoreError

    try:  # read-write: the mirror records what the export wrote
        with open_existing_mirror(args.db, read_only=False) as mirror:
            report = mirror.export(args.out, args.format)
    except StoreError as err:
        raise UsageError(str(err)) from None
    for line in export_lines(report):
        print(line)
    return 0


def export_lines(report) -> list[str]:
    """What ``devmon export`` did, for people: per partitioned table the partitions written,
    unchanged and deleted, then the totals."""
    lines = [f"Exported to {report.folder} as {report.format} in {report.seconds:.1f} s"
             + (f" (everything: {report.rewrote_all})" if report.rewrote_all else "") + ":"]
    for table, c in report.partitions.items():
        lines.append(f"  {table:15} {_partitions(c.written)} written, {c.unchanged} unchanged, "
                     f"{c.deleted} deleted")
    lines.append(f"  {'other tables':15} {report.other_written} written, "
                 f"{report.other_unchanged} unchanged")
    files = "1 file" if report.files_written == 1 else f"{report.files_written} files"
    lines.append(f"{_partitions(report.written)} written, {report.unchanged} unchanged, "
                 f"{report.deleted} deleted ({report.rows_written:,} rows, {files}); "
                 f"manifest {report.manifest}")
    if report.shortened:
        n = len(report.shortened)
        lines.append(f"Note: serial numbers too long for a folder name ({n} device"
                     f"{'s' if n != 1 else ''}): their partition folders give the start of "
                     f"each and a hash (...~HASH); _manifest.json gives the full serial number "
                     f"of each partition.")
    return lines


def _partitions(n: int) -> str:
    return "1 partition" if n == 1 else f"{n} partitions"

"""The export writes a table's partitions in groups of months, at most
``export.PARTITIONS_PER_COPY`` a COPY (issue 31): one COPY of a whole 100M-reading table held
a buffer per device-month and ran out of the mirror's memory budget
(``benchmarks/bench_scaling.py``; ``docs/benchmarks.md``: at 100M under a 128 MB budget it
failed after 42 s, grouped it completes in 79 s).  The failure needs thousands of
partitions, too large a mirror for a test; what is tested here is that the groups write
every partition once and the same files as one COPY, and that an export after them writes
nothing."""

from __future__ import annotations

import duckdb
import pytest

from devmon_sync.server import WorldSize
from devmon_sync.store import Mirror, export

from support import synced_mirror

WORLD = WorldSize(sites=1, devices=6, days=75)  # 3 months: dozens of device-months


@pytest.fixture(scope="module")
def mirror(tmp_path_factory):
    return synced_mirror(tmp_path_factory.mktemp("export-groups") / "mirror.duckdb", WORLD)


def _exported(db, out, monkeypatch, per_copy: int):
    """The export of a copy of ``db`` with ``per_copy`` partitions a COPY: its report,
    {relative file: rows}, the copy, and how many COPY statements it took."""
    monkeypatch.setattr(export, "PARTITIONS_PER_COPY", per_copy)
    copies, copy_one = [], export._copy
    monkeypatch.setattr(export, "_copy", lambda *a, **k: (copies.append(a[2]),
                                                         copy_one(*a, **k))[1])
    copy = out.with_suffix(".duckdb")
    copy.write_bytes(db.read_bytes())
    with Mirror.open(copy) as m:
        report = m.export(out, "parquet")

    con = duckdb.connect()
    files = {str(p.relative_to(out)): con.execute(
        f"SELECT count(*) FROM read_parquet('{p}')").fetchone()[0]
        for p in sorted(out.rglob("*.parquet"))}
    return report, files, copy, len(copies)


def test_groups_of_months_write_what_one_copy_writes(mirror, tmp_path, monkeypatch):
    one, whole, _, one_copies = _exported(mirror, tmp_path / "one", monkeypatch, 100_000)
    grouped, parts, copy, copies = _exported(mirror, tmp_path / "grouped", monkeypatch, 3)
    assert copies > one_copies + 4  # several COPYs a table, not one
    assert parts == whole and sum(whole.values()) > 0
    assert (grouped.rows_written, grouped.files_written) == (one.rows_written,
                                                             one.files_written)
    with duckdb.connect(str(copy), read_only=True) as con:
        readings = con.execute("SELECT count(*) FROM readings").fetchone()[0]
    assert sum(n for f, n in parts.items() if f.startswith("readings")) == readings
    with Mirror.open(copy) as m:  # nothing changed since: nothing written again
        again = m.export(tmp_path / "grouped", "parquet")
    assert again.files_written == 0

"""A mirror file of another schema version: a newer devmon's file asks for an upgrade of devmon,
an older one for one `devmon sync`.  Real DuckDB files in tmp_path, the real CLI."""

from __future__ import annotations

import subprocess

import duckdb
import pytest

from devmon_sync.store import Mirror, StoreError
from devmon_sync.store.schema import LATEST_VERSION

from support import devmon as run_devmon

READERS = [["status"], ["analyze"], ["report", "--site", "x", "--out", "never.pdf"]]


def devmon(*args: str, cwd) -> subprocess.CompletedProcess:
    return run_devmon(*args, timeout=300, cwd=cwd)


def current_mirror(path) -> str:
    """An empty mirror made by this devmon."""
    Mirror.open(path).close()
    return str(path)


@pytest.fixture(scope="module")
def newer_mirror(tmp_path_factory) -> str:
    """A mirror whose schema a later devmon has migrated one step further."""
    path = current_mirror(tmp_path_factory.mktemp("newer") / "mirror.duckdb")
    con = duckdb.connect(path)
    con.execute("INSERT INTO schema_migrations VALUES (?, 'a later devmon', now())",
                [LATEST_VERSION + 1])
    con.close()
    return path


@pytest.mark.parametrize("args", READERS, ids=lambda a: a[0])
def test_a_newer_devmons_mirror_asks_to_upgrade_devmon(newer_mirror, args, tmp_path):
    r = devmon(args[0], "--db", newer_mirror, *args[1:], cwd=tmp_path)
    assert r.returncode == 2, r.stderr
    assert "Traceback" not in r.stderr
    assert "newer devmon" in r.stderr and f"schema {LATEST_VERSION + 1}" in r.stderr, r.stderr
    assert "upgrade devmon" in r.stderr, r.stderr
    assert "devmon sync" not in r.stderr, "a sync cannot help: it refuses a newer file too"
    assert not (tmp_path / "never.pdf").exists()


def test_sync_and_the_readers_give_the_same_advice_for_a_newer_mirror(newer_mirror):
    with pytest.raises(StoreError) as read:
        Mirror.open(newer_mirror, read_only=True)
    with pytest.raises(StoreError) as write:
        Mirror.open(newer_mirror)
    assert str(read.value) == str(write.value)


def test_the_newer_mirror_is_left_as_it_was(newer_mirror):
    con = duckdb.connect(newer_mirror, read_only=True)
    try:
        assert con.execute("SELECT max(version) FROM schema_migrations").fetchone()[0] == \
            LATEST_VERSION + 1
    finally:
        con.close()


def _older_file(tmp_path, kind: str) -> tuple[str, int]:
    """An empty DuckDB file (schema 0), or this devmon's mirror stepped back one version (its
    last migration's row removed, as an older devmon would have left it)."""
    path = tmp_path / f"{kind}.duckdb"
    if kind == "empty":
        duckdb.connect(str(path)).close()
        return str(path), 0
    current_mirror(path)
    con = duckdb.connect(str(path))
    con.execute("DELETE FROM schema_migrations WHERE version = ?", [LATEST_VERSION])
    con.close()
    return str(path), LATEST_VERSION - 1


@pytest.mark.parametrize("kind", ["empty", "one-version-older"])
@pytest.mark.parametrize("args", READERS, ids=lambda a: a[0])
def test_an_older_file_is_still_told_to_sync_once(args, kind, tmp_path):
    path, version = _older_file(tmp_path, kind)
    r = devmon(args[0], "--db", path, *args[1:], cwd=tmp_path)
    assert r.returncode == 2, r.stderr
    assert "Traceback" not in r.stderr
    assert f"schema version {version};" in r.stderr, r.stderr
    assert "run `devmon sync` on it once" in r.stderr and "newer devmon" not in r.stderr, r.stderr


def test_a_dry_run_plans_on_a_mirror_of_the_schema_before_and_leaves_it(tmp_path):
    """An upgraded devmon's first command may be a dry run: it plans on a scratch copy of the
    older file (its tables without the columns the last migration adds), writes nothing,
    and is not told to run a real sync first."""
    from support import KEY, start_server, sync

    from devmon_sync.server import WorldSize

    path = tmp_path / "m.duckdb"
    with start_server(size=WorldSize(sites=1, devices=4, days=3)) as srv:
        assert sync(srv.base_url, path).status == "ok"
        con = duckdb.connect(str(path))
        for table, column in (("sync_runs", "rolled_from"), ("sync_runs", "rolled_to"),
                              ("sync_runs", "service_started_at"),
                              ("sync_cursors", "lateness_days")):
            con.execute(f"ALTER TABLE {table} DROP COLUMN {column}")
        con.execute("DELETE FROM schema_migrations WHERE version >= 14")
        con.close()
        before = path.read_bytes()
        r = run_devmon("sync", "--base-url", srv.base_url, "--api-key", KEY, "--db", str(path),
                       "--dry-run", "--rate-limit", "0", timeout=300, cwd=tmp_path)
    assert r.returncode == 0 and "Traceback" not in r.stderr, r.stderr
    assert "Dry run" in r.stdout, r.stdout
    assert path.read_bytes() == before

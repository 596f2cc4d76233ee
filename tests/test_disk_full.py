"""A full disk under the mirror: one clear message, exit 2, a file that still opens, and a
resume (once there is room) that ends with the mirror of a clean sync.

Two ways: a real, small tmpfs (where this machine lets the tests mount one), and DuckDB's
"No space left on device" raised in-process, so that the behaviour is tested everywhere."""

from __future__ import annotations

import re
import shutil
import subprocess

import duckdb
import pytest

from devmon_sync import cli
from devmon_sync.server import WorldSize
from devmon_sync.store import Mirror, ledger, queries
from devmon_sync.store import mirror as store_mirror

from support import KEY, start_server
from support import devmon as run_devmon
from support import snapshot, sync

# Large enough that a sync's write-ahead log passes DuckDB's checkpoint threshold (16 MB), so
# that a full disk can strike in a commit's log write or in a checkpoint.
WORLD = WorldSize(sites=4, devices=30, days=60)
FULL = re.compile(r"the disk holding (\S+) is full; free space and run the same command to "
                  r"resume")


@pytest.fixture(scope="module")
def world_server():
    srv = start_server(size=WORLD)
    yield srv
    srv.stop()


@pytest.fixture(scope="module")
def clean(world_server, tmp_path_factory):
    db = tmp_path_factory.mktemp("clean") / "clean.duckdb"
    assert sync(world_server.base_url, db).status == "ok"
    return snapshot(db)


def devmon(*args: str, timeout: float = 300) -> subprocess.CompletedProcess:
    return run_devmon(*args, timeout=timeout)


def sync_args(base_url: str, db) -> list[str]:
    return ["sync", "--base-url", base_url, "--db", str(db), "--api-key", KEY,
            "--rate-limit", "0", "--quiet"]


def run_statuses(db) -> list[str]:
    con = duckdb.connect(str(db), read_only=True)
    try:
        return [s for (s,) in con.execute("SELECT status FROM sync_runs ORDER BY run_id")
                .fetchall()]
    finally:
        con.close()


# ----------------------------------------------------------------------------- a real tmpfs

@pytest.fixture
def small_disk(small_tmpfs):
    """A folder on a 4 MB tmpfs of its own, and a function resizing it (``"18m"``)."""
    disk, remount = small_tmpfs("4m")
    return disk, lambda size: remount(f"size={size}")


@pytest.mark.parametrize("size", ["6m", "18m"], ids=["in-a-commit", "in-a-checkpoint"])
def test_a_full_disk_ends_the_sync_with_one_message_and_a_resume_completes_it(
        world_server, clean, small_disk, size):
    """6 MB fills up in a commit's write to the log; 18 MB in the checkpoint that moves the
    log into the file, after which DuckDB refuses all further work on that connection."""
    disk, resize = small_disk
    resize(size)
    db = disk / "mirror.duckdb"
    r = devmon(*sync_args(world_server.base_url, db))
    assert r.returncode == 2, (r.stdout, r.stderr)
    assert "Traceback" not in r.stderr + r.stdout, r.stderr
    lines = r.stderr.strip().splitlines()
    assert len(lines) == 1, r.stderr
    assert FULL.search(lines[0]) and str(db) in lines[0], lines[0]
    # the file still opens, and says what became of the run
    status = devmon("status", "--db", str(db), timeout=120)
    assert status.returncode == 0, status.stderr
    # the end is written when a few hundred bytes are left; when not even that (how full
    # the last page of the log is decides), the run stays for the next write to mark, and
    # until then every reader shows it interrupted
    stored = run_statuses(db)
    assert stored in (["failed"], ["interrupted"]) or \
        (stored == ["running"] and " interrupted " in status.stdout), (stored, status.stdout)
    assert " running " not in status.stdout
    # room again: the same command resumes and ends with the clean mirror
    resize("256m")
    r = devmon(*sync_args(world_server.base_url, db))
    assert r.returncode == 0, r.stderr
    assert run_statuses(db)[0] in ("failed", "interrupted")
    assert run_statuses(db)[-1] == "ok"
    assert snapshot(db) == clean


# ----------------------------------------------------------------------------- simulated

def _fill_the_disk_after(monkeypatch, commits: int, fatal: bool) -> None:
    """Let ``commits`` data commits go through, then fail the next one's write as a full disk
    does: an IOException inside the transaction, or (``fatal``) a FatalException after which
    the connection is dead (closed here, so that any further use of it fails too).  A commit
    is a group of two windows (``Mirror.grouped``), so that this small world makes several."""
    monkeypatch.setattr(store_mirror, "GROUP_WINDOWS", 2)
    real = ledger.record_windows
    seen = []

    def record_windows(con, *args, **kwargs):
        seen.append(1)
        if len(seen) > commits:
            text = 'Could not write file "mirror.duckdb.wal": No space left on device'
            if fatal:
                con.close()
                raise duckdb.FatalException(f"FATAL Error: Failed to create checkpoint because "
                                            f"of error: {text}")
            raise duckdb.IOException(f"IO Error: {text}")
        return real(con, *args, **kwargs)

    monkeypatch.setattr(ledger, "record_windows", record_windows)


@pytest.mark.parametrize("fatal", [False, True], ids=["io-error", "fatal-error"])
def test_a_simulated_full_disk_gives_one_message_and_records_the_run(
        world_server, clean, tmp_path, monkeypatch, capsys, fatal):
    db = tmp_path / "mirror.duckdb"
    _fill_the_disk_after(monkeypatch, 2, fatal)
    code = cli.main(sync_args(world_server.base_url, db))
    out, err = capsys.readouterr()
    assert code == 2, err
    assert "Traceback" not in out + err
    lines = err.strip().splitlines()
    assert len(lines) == 1 and FULL.search(lines[0]) and str(db) in lines[0], err
    monkeypatch.undo()
    # the file opens, holds whole windows only, and the run is recorded as failed
    assert run_statuses(db) == ["failed"]
    with Mirror.open(db, read_only=True) as mirror:
        assert "failed" in mirror.status_text()
    assert sync(world_server.base_url, db).status == "ok"
    assert snapshot(db) == clean


def test_alarm_levels_on_a_full_disk_are_one_message_and_change_nothing(small_disk, tmp_path):
    """`devmon alarms` writes the mirror too: a full disk there was a DuckDB traceback."""
    disk, resize = small_disk
    source = tmp_path / "small.duckdb"
    with start_server(size=WorldSize(sites=1, devices=3, days=3)) as srv:
        assert sync(srv.base_url, source).status == "ok"
    resize(f"{source.stat().st_size // 2**20 + 8}m")
    db = disk / "mirror.duckdb"
    shutil.copy(source, db)
    with Mirror.open(db, read_only=True) as m:
        serial = queries.gnss_devices(m)[0].serial_number  # displacement levels: a rover's
    filler = disk / "filler"
    with open(filler, "wb") as out:  # take every byte left on the disk
        try:
            while True:
                out.write(b"\0" * 65536)
                out.flush()
        except OSError:
            pass
    r = devmon("alarms", "--db", str(db), "--device", serial, "--displacement", "alert=5,alarm=20")
    assert r.returncode == 2 and "Traceback" not in r.stdout + r.stderr, r.stderr[-2000:]
    assert FULL.search(r.stderr) and len(r.stderr.strip().splitlines()) == 1, r.stderr
    filler.unlink()
    again = devmon("alarms", "--db", str(db), "--device", serial, "--displacement",
                   "alert=5,alarm=20")
    assert again.returncode == 0 and "alert >= 5 mm" in again.stdout, again.stderr

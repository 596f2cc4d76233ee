"""A damaged mirror file: one line saying so, what to do, and not a byte written (issue 29,
items 2 and 7).

Disks and copies damage files: a few flipped bytes in a data block (DuckDB's block checksum
no longer matches) or a file cut short.  Before, `devmon sync` on a flipped file exited 0,
said nothing and wrote to it; `verify` wrote to it too; `status`, `analyze`, `report`,
`export` and `verify` gave DuckDB tracebacks; on a truncated file sync/export/verify said
"check the disk ... run the same command to resume", which failed the same way.

The damaged files are made from a real synced mirror: the flipped one in a block of the
``readings`` table that DuckDB's own ``storage_info`` names, so the damage is where data is.
"""

from __future__ import annotations

import hashlib
import shutil

import pytest

from devmon_sync import cli
from devmon_sync.server import WorldSize
from devmon_sync.store import DamagedMirrorError, Mirror, queries

from support import KEY, block_offset, flip_block_bytes, start_server, synced_mirror

WORLD = WorldSize(sites=1, devices=4, days=10)
@pytest.fixture(scope="module")
def server():
    with start_server(size=WORLD) as srv:
        yield srv


@pytest.fixture(scope="module")
def good(tmp_path_factory, server):
    return synced_mirror(tmp_path_factory.mktemp("good") / "mirror.duckdb", WORLD)


@pytest.fixture(scope="module")
def rover(good) -> str:
    with Mirror.open(good, read_only=True) as m:
        return next(d.serial_number for d in queries.gnss_devices(m) if d.epochs)


def _flipped(good, tmp_path):
    path = tmp_path / "flipped.duckdb"
    shutil.copyfile(good, path)
    flip_block_bytes(path, "readings")
    return path


def _truncated(good, tmp_path):
    path = tmp_path / "truncated.duckdb"
    shutil.copyfile(good, path)
    with open(path, "r+b") as f:
        f.truncate(block_offset(path, "readings"))
    return path


def _sha(path) -> str:
    return hashlib.sha256(path.read_bytes()).hexdigest()


def _commands(path, server, tmp_path, rover) -> dict[str, list[str]]:
    db = ["--db", str(path)]
    service = ["--base-url", server.base_url, "--api-key", KEY]
    return {
        "status": ["status", *db],
        "analyze": ["analyze", *db],
        "report": ["report", *db, "--device", rover, "--out", str(tmp_path / "r.pdf")],
        "export": ["export", *db, "--out", str(tmp_path / "export")],
        "verify": ["verify", *db, *service],
        "sync": ["sync", *db, *service],
    }


def _run(argv, capsys) -> tuple[int, str]:
    code = cli.main(argv)
    out = capsys.readouterr()
    return code, out.out + out.err


def _assert_refused(path, before: str, code: int, said: str, command: str) -> None:
    assert code != 0, f"{command}: exit 0 on a damaged mirror: {said}"
    assert "damaged" in said, f"{command}: {said}"
    assert "Traceback" not in said and "IO Error" not in said and "checksum" not in said, said
    assert "restore" in said.lower() and "--db" in said, f"{command}: no way out named: {said}"
    assert _sha(path) == before, f"{command} wrote to the damaged file"


@pytest.mark.parametrize("command", ["status", "analyze", "report", "export", "verify", "sync"])
def test_a_flipped_block_is_named_and_never_written(command, good, rover, server, tmp_path, capsys):
    path = _flipped(good, tmp_path)
    before = _sha(path)
    code, said = _run(_commands(path, server, tmp_path, rover)[command], capsys)
    _assert_refused(path, before, code, said, command)


@pytest.mark.parametrize("command", ["status", "export", "verify", "sync"])
def test_a_truncated_file_is_named_and_never_written(command, good, rover, server, tmp_path,
                                                     capsys):
    path = _truncated(good, tmp_path)
    before = _sha(path)
    code, said = _run(_commands(path, server, tmp_path, rover)[command], capsys)
    _assert_refused(path, before, code, said, command)
    assert "check the disk" not in said and "resume" not in said, said


def test_a_sound_mirror_still_syncs(good, rover, server, tmp_path, capsys):
    """The check before writing passes a sound file (and a copy of one)."""
    path = tmp_path / "copy.duckdb"
    shutil.copyfile(good, path)
    code, said = _run(_commands(path, server, tmp_path, rover)["sync"], capsys)
    assert code == 0, said


def test_a_block_cached_by_another_connection_does_not_hide_the_damage(good, tmp_path):
    """DuckDB shares one database (and its block cache) between the connections of a
    process to one file: the check must read the file itself, not blocks read before the
    damage (found when the window's test ran beside others in one process)."""
    path = tmp_path / "cached.duckdb"
    shutil.copyfile(good, path)
    with Mirror.open(path, read_only=True) as holder:
        holder.con.execute("SELECT count(*), sum(hash(value)) FROM readings").fetchall()
        flip_block_bytes(path, "readings")
        with pytest.raises(DamagedMirrorError, match="is damaged"):
            Mirror.open(path, read_only=True, check=True)

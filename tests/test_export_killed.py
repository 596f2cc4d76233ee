"""An export killed at its worst moment leaves a folder the next export takes up (issue 29,
item 3).

After SIGKILLs during `devmon export`, the next export of the same mirror failed with "holds
the export of another mirror": the first export's manifest was in the folder, but the
process died before the mirror recorded that export, so the mirror did not know its own
folder, and the user's shared folder was stuck.  Here each export is killed (a real SIGKILL,
sent by the process to itself) at the moment the folder is most ahead of the mirror: right
after the manifest is in place, before the mirror records what it wrote; and once before
the manifest.  The next export must finish, and the folder must then read as the mirror.
"""

from __future__ import annotations

import json
import subprocess
import sys

import duckdb
import pytest

from devmon_sync.server import WorldSize

from support import synced_mirror

WORLD = WorldSize(sites=1, devices=3, days=5)

#: run `devmon export` with a SIGKILL at ``where``: "record" (after the manifest, before
#: the mirror's record) or "manifest" (after the data files, before the manifest)
KILLED_EXPORT = """
import os, signal, sys
from devmon_sync.store import export
where = sys.argv[1]
name = {"record": "_record", "manifest": "_write_manifest"}[where]
def die(*args, **kwargs):
    os.kill(os.getpid(), signal.SIGKILL)
setattr(export, name, die)
from devmon_sync.cli import main
sys.exit(main(sys.argv[2:]))
"""


@pytest.fixture(scope="module")
def mirror(tmp_path_factory):
    return synced_mirror(tmp_path_factory.mktemp("export-killed") / "mirror.duckdb", WORLD)


def _export(mirror, out, killed_at: str | None = None) -> subprocess.CompletedProcess:
    argv = ["export", "--db", str(mirror), "--out", str(out)]
    cmd = ([sys.executable, "-c", KILLED_EXPORT, killed_at, *argv] if killed_at
           else [sys.executable, "-m", "devmon_sync", *argv])
    return subprocess.run(cmd, capture_output=True, text=True, timeout=300)


@pytest.mark.parametrize("killed_at", [["record"], ["manifest"]])
def test_an_export_killed_is_taken_up_by_the_next(killed_at, mirror, tmp_path):
    out = tmp_path / "shared"
    for where in killed_at:
        r = _export(mirror, out, where)
        assert r.returncode == -9, (where, r.returncode, r.stderr[-1000:])
    r = _export(mirror, out)
    assert r.returncode == 0, r.stderr[-2000:]
    manifest = json.loads((out / "_manifest.json").read_text())
    con = duckdb.connect(str(mirror), read_only=True)
    truth = con.execute("SELECT count(*) FROM readings").fetchone()[0]
    con.close()
    exported = duckdb.connect().execute(
        f"SELECT count(*) FROM read_parquet('{out}/readings/**/*.parquet')").fetchone()[0]
    assert exported == truth > 0
    assert manifest["export_id"]
    # and a later export goes on incrementally, with nothing to rewrite
    r = _export(mirror, out)
    assert r.returncode == 0, r.stderr[-2000:]

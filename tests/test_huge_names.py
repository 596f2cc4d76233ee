"""A name the size of a file: bounded, reported, and the sync goes on (issue 29, item 5).

A hostile or broken service answered GET /devices with a device named by 100 MB of text:
the metadata commit ran out of DuckDB's memory budget and the sync ended in a traceback
(``TransactionException: Current transaction is aborted``).  No device has such a name; one
that long cannot be shown, printed or used.  devmon stores its first
``records.MAX_TEXT_CHARS`` characters (in the column and in the raw JSON), records the
whole value's length and SHA-256 as a problem of the device, and syncs everything else.
"""

from __future__ import annotations

import hashlib

import duckdb

from devmon_sync.server import WorldSize
from devmon_sync.store import records

from http_stubs import MutatingProxy
from support import start_server, sync

WORLD = WorldSize(sites=1, devices=3, days=3)
HUGE = 30_000_000  # characters: over DuckDB's 256 MB budget once staged, copied and kept raw
LONG = 10_000  # a long but usable name: kept whole


def _rename(names: list[str], chosen: dict[str, str]):
    """Rename the first devices the service lists, in order, to ``names`` (``chosen``:
    serial number -> the name given, filled as it goes)."""
    def mutate(method, path, payload):
        if method != "GET" or not path.endswith("/devices"):
            return
        for item in payload if isinstance(payload, list) else payload.get("items", ()):
            serial = item.get("serialNumber")
            if serial not in chosen and len(chosen) < len(names):
                chosen[serial] = names[len(chosen)]
            if serial in chosen:
                item["name"] = chosen[serial]
    return mutate


def test_a_huge_name_is_bounded_and_reported_and_the_sync_completes(tmp_path):
    huge, long_ = "h" * (HUGE - 1) + "!", "L" * LONG
    chosen: dict[str, str] = {}
    with start_server(size=WORLD) as srv:
        with MutatingProxy(srv.base_url, mutate=_rename([huge, long_], chosen)) as proxy:
            report = sync(proxy.base_url, tmp_path / "m.duckdb")
        sync(srv.base_url, tmp_path / "truth.duckdb")
    serials = list(chosen)
    assert report.status == "ok", report
    con = duckdb.connect(str(tmp_path / "m.duckdb"), read_only=True)
    stored = dict(con.execute("SELECT serial_number, name FROM devices").fetchall())
    raw_len = con.execute("SELECT max(length(raw)) FROM devices").fetchone()[0]
    readings = con.execute("SELECT count(*) FROM readings").fetchone()[0]
    problems = [r[0] for r in con.execute("SELECT message FROM sync_problems").fetchall()]
    con.close()
    assert stored[serials[0]] == huge[:records.MAX_TEXT_CHARS]
    assert raw_len < 2 * records.MAX_TEXT_CHARS
    assert stored[serials[1]] == long_  # a long name under the bound is kept whole
    said = [p for p in problems if serials[0] in p or f"{HUGE:,}" in p]
    assert said, problems
    assert f"{HUGE:,} characters" in said[0]
    assert hashlib.sha256(huge.encode()).hexdigest() in said[0]
    # everything else synced as from the service itself
    con = duckdb.connect(str(tmp_path / "truth.duckdb"), read_only=True)
    assert readings == con.execute("SELECT count(*) FROM readings").fetchone()[0] > 0
    con.close()

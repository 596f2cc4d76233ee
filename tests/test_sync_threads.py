"""A sync runs DuckDB on one thread, and gives the mirror back with DuckDB's own setting.

Why (issue 31, point 1): a sync writes in pieces paced by the network (a window at a time,
200 requests a minute), where DuckDB's second thread only adds CPU to wake and join it;
on one thread the same full sync took ~0.91x the CPU, wall time unchanged
(docs/benchmarks.md).  The reads after it (the alarm evaluation, the GUI's plots of a
billion readings) scan whole tables and keep every core."""

from __future__ import annotations

from devmon_sync.client import ApiClient
from devmon_sync.server import WorldSize
from devmon_sync.store import Mirror
from devmon_sync.sync.engine import SyncEngine, SyncOptions

from support import KEY, start_server


def _threads(mirror: Mirror) -> int:
    return int(mirror.con.execute("SELECT current_setting('threads')").fetchone()[0])


def test_a_sync_writes_on_one_thread_and_gives_the_setting_back(tmp_path):
    seen: list[int] = []
    with start_server(size=WorldSize(sites=1, devices=3, days=2)) as srv, \
            ApiClient(srv.base_url, KEY, rate_limit_per_minute=0) as client, \
            Mirror.open(tmp_path / "m.duckdb") as mirror:
        mirror.con.execute("SET threads = 3")  # what DuckDB chose on this machine, say
        engine = SyncEngine(client, mirror, SyncOptions(),
                            on_progress=lambda p: seen.append(_threads(mirror)))
        assert engine.run().status == "ok"
        after = _threads(mirror)
        rows = mirror.con.execute("SELECT count(*) FROM readings").fetchone()[0]
    assert rows > 0
    assert seen and set(seen) == {1}  # every phase of the run, the data's included
    assert after == 3


def test_a_failed_sync_gives_the_setting_back_too(tmp_path):
    with start_server(size=WorldSize(sites=1, devices=2, days=1)) as srv, \
            ApiClient(srv.base_url, "not-the-key", rate_limit_per_minute=0) as client, \
            Mirror.open(tmp_path / "m.duckdb") as mirror:
        mirror.con.execute("SET threads = 3")
        try:
            SyncEngine(client, mirror, SyncOptions()).run()
        except Exception:  # the service refuses the key: the run ends failed
            pass
        else:
            raise AssertionError("a sync with a wrong key ended well")
        assert _threads(mirror) == 3
        status = mirror.con.execute("SELECT status FROM sync_runs").fetchone()[0]
    assert status == "failed"

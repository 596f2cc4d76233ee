"""Helpers both benchmark scripts use: the benchmark key and clock, timestamps, a free port."""

from __future__ import annotations

import socket
from datetime import UTC, datetime

KEY = "bench-key"
NOW = datetime(2026, 1, 1, tzinfo=UTC)


def iso(dt: datetime) -> str:
    return dt.strftime("%Y-%m-%dT%H:%M:%SZ")


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def sync_world(path, size) -> tuple[float, tuple]:
    """A mirror at ``path`` of ``size`` synced from an in-process reference server: the
    seconds it took and the counts of devices, parameters, readings and epochs."""
    import time

    from devmon_sync.client import ApiClient
    from devmon_sync.server import ReferenceServer, ServerConfig
    from devmon_sync.store import Mirror
    from devmon_sync.sync import SyncEngine, SyncOptions

    t = time.perf_counter()
    config = ServerConfig(port=0, api_keys={KEY: None}, now=NOW, rate_limit_per_minute=0,
                          size=size)
    with ReferenceServer(config).start() as srv, \
            ApiClient(srv.base_url, KEY, rate_limit_per_minute=0) as client, \
            Mirror.open(path) as m:
        assert SyncEngine(client, m, SyncOptions()).run().status == "ok"
    synced = time.perf_counter() - t
    with Mirror.open(path, read_only=True) as m:
        counts = m._row("SELECT (SELECT count(*) FROM devices), (SELECT count(*) FROM "
                        "parameters), (SELECT count(*) FROM readings), "
                        "(SELECT count(*) FROM gnss_epochs)")
    return synced, counts

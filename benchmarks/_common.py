"""Helpers the benchmark scripts share: the benchmark key and clock, timestamps, a free port,
a synced world, a row-for-row comparison of two mirrors, and a script run against another
checkout."""

from __future__ import annotations

import json
import os
import resource
import socket
import subprocess
import sys
from datetime import UTC, datetime
from pathlib import Path

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
    from devmon_sync.sync.engine import SyncEngine, SyncOptions

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


NOT_DATA = ("schema_migrations", "service_profiles", "quarantine", "alarm_levels")
LEFT_OUT = ("last_run_id",)  # which run wrote a row: numbering, not data


def differences(reference: Path, other: Path) -> dict[str, tuple[int, int, int]]:
    """Per data table: (rows in the reference, rows only there, rows only in ``other``),
    compared with EXCEPT ALL both ways in DuckDB (duplicates count)."""
    import duckdb

    con = duckdb.connect()
    try:
        con.execute(f"ATTACH '{reference}' AS a (READ_ONLY)")
        con.execute(f"ATTACH '{other}' AS b (READ_ONLY)")
        tables = [t for (t,) in con.execute(
            "SELECT table_name FROM duckdb_tables() WHERE database_name = 'a' "
            "AND table_name NOT LIKE 'sync%' ORDER BY table_name").fetchall()
            if t not in NOT_DATA]
        out = {}
        for table in tables:
            cols = [c for (c,) in con.execute(
                "SELECT column_name FROM duckdb_columns() WHERE database_name = 'a' AND "
                "table_name = ? ORDER BY column_index", [table]).fetchall() if c not in LEFT_OUT]
            select = ", ".join(f'"{c}"' for c in cols)
            a, b = (f"SELECT {select} FROM {db}.{table}" for db in "ab")
            total = con.execute(f"SELECT count(*) FROM a.{table}").fetchone()[0]
            only_a = con.execute(f"SELECT count(*) FROM ({a} EXCEPT ALL {b})").fetchone()[0]
            only_b = con.execute(f"SELECT count(*) FROM ({b} EXCEPT ALL {a})").fetchone()[0]
            out[table] = (total, only_a, only_b)
        return out
    finally:
        con.close()


def verdict(diff: dict[str, tuple[int, int, int]]) -> str:
    bad = {t: d for t, d in diff.items() if d[1] or d[2]}
    if not bad:
        return "IDENTICAL"
    return "DIFFERS: " + ", ".join(f"{t} -{a}/+{b}" for t, (_, a, b) in bad.items())


def children_cpu_s() -> float:
    """CPU seconds (user + system) of this process's children that have ended and been
    waited for, so far: the difference across a ``subprocess.run`` is that child's (and
    its own children's, which it waited for)."""
    usage = resource.getrusage(resource.RUSAGE_CHILDREN)
    return usage.ru_utime + usage.ru_stime


def run_in_tree(tree: Path, script: str, *args: str) -> dict:
    """``python -c script args`` importing devmon from ``tree`` (a checkout, e.g. an earlier
    commit's git worktree), run in it: the JSON object its last printed line holds."""
    out = subprocess.run([sys.executable, "-c", script, *args], cwd=tree, check=True,
                         env=dict(os.environ, PYTHONPATH=str(tree)), capture_output=True,
                         text=True)
    return json.loads(out.stdout.strip().splitlines()[-1])

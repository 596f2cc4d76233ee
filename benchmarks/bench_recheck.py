#!/usr/bin/env python3
"""The re-check of the past over many later syncs: what it adds, how often it runs, how long
the rolling sweep takes to re-check the whole history.

One reference server world (``history_start`` fixed, so each later sync sees the same
history plus what is new), served on one loopback port (the same service: what the first
sync learned of it holds): a full sync, then ``--later`` syncs every ``--every-h`` hours at
devmon's default share (``SyncOptions.recheck_share``, 10 %).  For each later sync it prints
the requests, those the re-check spent, and the step of the sweep; then the figures the
issue asks for:

* the re-check's requests as a share of the later syncs' own (the promise: at most 10 %);
* how many syncs apart the settling window is re-checked, and a sweep step made;
* how far back the sweep reached, and the period of a whole sweep, in syncs, worked out
  from the steps seen (history older than the settling window / days a step x syncs a step).

Counts of requests only: nothing timed, so the machine's load does not matter.

    python benchmarks/bench_recheck.py                      # 48 devices, 180 days, 40 daily syncs
    python benchmarks/bench_recheck.py --devices 200 --days 365 --later 60
"""

from __future__ import annotations

import argparse
import math
import sys
import tempfile
from datetime import datetime, timedelta, timezone
from pathlib import Path

import duckdb

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from devmon_sync.client import ApiClient  # noqa: E402
from devmon_sync.server import ReferenceServer, ServerConfig  # noqa: E402
from devmon_sync.server.world import WorldSize  # noqa: E402
from devmon_sync.store import Mirror  # noqa: E402
from devmon_sync.sync.engine import SyncEngine, SyncOptions  # noqa: E402

KEY = "bench-recheck-key"
NOW = datetime(2026, 1, 1, tzinfo=timezone.utc)


def one_sync(size: WorldSize, now: datetime, origin: datetime, port: int, db: Path
             ) -> tuple[int, int]:
    """Sync ``db`` from a server of the world as of ``now``; (run id, port)."""
    config = ServerConfig(port=port, api_keys={KEY: None}, now=now, rate_limit_per_minute=0,
                          size=size, history_start=origin)
    with ReferenceServer(config).start() as srv, \
            ApiClient(srv.base_url, KEY, rate_limit_per_minute=0) as client, \
            Mirror.open(db) as mirror:
        report = SyncEngine(client, mirror, SyncOptions()).run()
        if report.status != "ok":
            raise SystemExit(f"sync at {now:%Y-%m-%d %H:%M} ended {report.status}: "
                             f"{report.problems[:3]}")
        return report.run_id, srv.port


def runs(db: Path) -> list[tuple]:
    con = duckdb.connect(str(db), read_only=True)
    try:
        return con.execute(
            "SELECT run_id, requests, coalesce(recheck_requests, 0), rolled_from, rolled_to "
            "FROM sync_runs ORDER BY run_id").fetchall()
    finally:
        con.close()


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--devices", type=int, default=48)
    p.add_argument("--days", type=int, default=180, help="history of the world")
    p.add_argument("--later", type=int, default=40, help="syncs after the full one")
    p.add_argument("--every-h", type=float, default=24.0, help="hours between syncs")
    args = p.parse_args(argv)
    size = WorldSize(sites=max(1, args.devices // 8), devices=args.devices, days=args.days)
    origin = NOW - timedelta(days=args.days)
    with tempfile.TemporaryDirectory() as tmp:
        db, port = Path(tmp) / "mirror.duckdb", 0
        for i in range(args.later + 1):
            _, port = one_sync(size, NOW + timedelta(hours=1 + i * args.every_h), origin,
                               port, db)
        rows = runs(db)
    print(f"world: {args.devices} devices, {args.days} days; a full sync, then {args.later} "
          f"syncs every {args.every_h:g} h at the default share")
    print(f"full sync: {rows[0][1]} requests")
    print("run  requests  re-check  sweep step")
    for run_id, requests, spent, start, end in rows[1:]:
        step = f"{start:%Y-%m-%d}..{end:%Y-%m-%d}" if start else ""
        print(f"{run_id:>3}  {requests:>8}  {spent:>8}  {step}")
    summarise(rows, args)
    return 0


def summarise(rows: list[tuple], args) -> None:
    later = rows[1:]
    own = sum(r[1] - r[2] for r in later)
    spent = sum(r[2] for r in later)
    checks = [i for i, r in enumerate(later) if r[2] > 0]
    steps = [r for r in later if r[3] is not None]
    print(f"re-check: {spent} requests over {len(later)} later syncs, {spent / own:.1%} of "
          f"their own {own} (all syncs, the full one included: "
          f"{spent / sum(r[1] - r[2] for r in rows):.1%})")
    if len(checks) > 1:
        print(f"a re-check every {(checks[-1] - checks[0]) / (len(checks) - 1):.1f} syncs "
              f"({len(checks)} re-checks, {len(steps)} of them sweep steps)")
    if steps:
        reach = min(r[3] for r in steps)
        days = (steps[0][4] - steps[0][3]).total_seconds() / 86400 + 1 / 86400
        start = NOW - timedelta(days=args.days)
        print(f"the sweep reached back to {reach:%Y-%m-%d} (history starts {start:%Y-%m-%d})")
        if len(steps) > 1:
            gap = (later.index(steps[-1]) - later.index(steps[0])) / (len(steps) - 1)
            older = max(0.0, args.days - days)
            period = math.ceil(older / days) * gap
            print(f"a sweep step every {gap:.1f} syncs, {days:.0f} days each: a whole sweep "
                  f"of this history takes about {period:.0f} syncs "
                  f"({period * args.every_h / 24:.0f} days at one sync every "
                  f"{args.every_h:g} h)")


if __name__ == "__main__":
    raise SystemExit(main())

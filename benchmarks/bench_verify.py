#!/usr/bin/env python3
"""`devmon verify`'s default run on a large mirror: how many windows, what power, how many
requests of each check, and the time that takes at the service's rate limit.

A reference-server world (``--devices`` x ``--days``) is synced in full into a temporary
mirror, then verified three times with devmon's defaults (a new random sample each time):
the windows the sample takes for 95 % power against 1 % of windows differing, the requests
of the window check, the metadata and the start of history, and the floor of its run time
at 200 requests/minute (the spec's rate limit: what a real service allows).  Counts only
(the floor is requests / 200 minutes), so the machine's load does not matter.

    python benchmarks/bench_verify.py                          # 48 devices, 180 days
    python benchmarks/bench_verify.py --devices 200 --days 365
"""

from __future__ import annotations

import argparse
import sys
import tempfile
from datetime import datetime, timezone
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from devmon_sync.client import ApiClient  # noqa: E402
from devmon_sync.server import ReferenceServer, ServerConfig  # noqa: E402
from devmon_sync.server.world import WorldSize  # noqa: E402
from devmon_sync.store import Mirror  # noqa: E402
from devmon_sync.sync.engine import SyncEngine, SyncOptions  # noqa: E402
from devmon_sync.sync.verify import Verifier, VerifyOptions, miss_probability  # noqa: E402

KEY = "bench-verify-key"
NOW = datetime(2026, 1, 1, tzinfo=timezone.utc)
RATE_PER_MIN = 200


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--devices", type=int, default=48)
    p.add_argument("--days", type=int, default=180)
    p.add_argument("--runs", type=int, default=3, help="verify runs (samples)")
    args = p.parse_args(argv)
    size = WorldSize(sites=max(1, args.devices // 8), devices=args.devices, days=args.days)
    config = ServerConfig(port=0, api_keys={KEY: None}, now=NOW, rate_limit_per_minute=0,
                          size=size)
    with tempfile.TemporaryDirectory() as tmp, ReferenceServer(config).start() as srv:
        db = Path(tmp) / "mirror.duckdb"
        with ApiClient(srv.base_url, KEY, rate_limit_per_minute=0) as client, \
                Mirror.open(db) as mirror:
            synced = SyncEngine(client, mirror, SyncOptions()).run()
        print(f"world: {args.devices} devices, {args.days} days; full sync "
              f"{synced.requests} requests, {synced.readings_rows:,} readings, "
              f"{synced.epoch_rows:,} epochs")
        print("run  windows (of)   power  window-req  metadata-req  history-req (streams)  "
              "all  at 200/min")
        for i in range(args.runs):
            with ApiClient(srv.base_url, KEY, rate_limit_per_minute=0) as client, \
                    Mirror.open(db) as mirror:
                verifier = Verifier(client, mirror, VerifyOptions())
                chosen, total = verifier.plan()
                r = verifier.run(chosen, total)
            power = 1.0 - miss_probability(total, r.windows_checked)
            print(f"{i + 1:>3}  {r.windows_checked:>7} ({total:>5})  {power:6.1%}  "
                  f"{r.window_requests:>10}  {r.metadata_requests:>12}  "
                  f"{r.history_requests:>11} ({r.history_streams:>5})  {r.requests:>4}  "
                  f"{r.requests / RATE_PER_MIN:5.1f} min  {'clean' if r.clean else 'DIFFERS'}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())

#!/usr/bin/env python3
"""What meeting another realisation of the spec costs: requests per contract profile.

For each contract profile of the reference server (``devmon serve --contract NAME``), the
same world is mirrored twice into one file: a first sync (the service unknown) and a second
one three days later on the same address (the service profile known).  Printed per profile:
requests of each run against the default profile's (the ratio), the refusals each run met
(4xx answers that were not a rate limit), whether the mirror after the first run holds
the default one's rows (the reference world's past shifts a little with its clock, so the
second run's rows are not compared), and the notes the run left.  A "tight" server (3,000
points, 400 epochs, 20 days per request) is run with and without the user's limits, to show
what learning a refusal costs.

The machine is shared: only request counts are read here, and those do not depend on speed.

    python benchmarks/bench_contracts.py            # about 1 minute
"""

from __future__ import annotations

import argparse
import sys
import tempfile
from datetime import timedelta
from pathlib import Path

import duckdb

sys.path.insert(0, str(Path(__file__).resolve().parent))
from _common import KEY, NOW, free_port  # noqa: E402

from devmon_sync import api_contract as contract  # noqa: E402
from devmon_sync.client import ApiClient  # noqa: E402
from devmon_sync.server import ReferenceServer, ServerConfig, WorldSize  # noqa: E402
from devmon_sync.server.contracts import CONTRACTS  # noqa: E402
from devmon_sync.service_profile import UserLimits  # noqa: E402
from devmon_sync.store import Mirror  # noqa: E402
from devmon_sync.sync.engine import SyncEngine, SyncOptions  # noqa: E402

TIGHT = contract.ResponseLimits(max_points=3000, max_epochs=400, max_range_days=20)
TABLES = ("devices", "sensors", "parameters", "readings", "gnss_epochs", "device_groups")


def run(size: WorldSize, contract_name: str, db: Path, port: int, days_later: int,
        limits=contract.DEFAULT_LIMITS, user: UserLimits = UserLimits()) -> dict:
    """One sync of ``db`` from a fresh server: requests, refusals, notes."""
    config = ServerConfig(port=port, api_keys={KEY: None}, now=NOW + timedelta(days=days_later),
                          rate_limit_per_minute=0, size=size, limits=limits,
                          contract=CONTRACTS[contract_name])
    with ReferenceServer(config).start() as srv:
        url = srv.base_url + ("/v1" if contract_name == "no-v1" else "")
        with ApiClient(url, KEY, rate_limit_per_minute=0) as client, Mirror.open(db) as m:
            report = SyncEngine(client, m, SyncOptions(user_limits=user)).run()
        refused = sum(n for status, n in srv.app.status_counts.items()
                      if isinstance(status, int) and 400 <= status < 500 and status != 429)
    return dict(status=report.status, requests=report.requests, refused=refused,
                notes=report.notes, problems=report.problems)


def counts(db: Path) -> tuple:
    con = duckdb.connect(str(db), read_only=True)
    try:
        return tuple(con.execute(f"SELECT count(*) FROM {t}").fetchone()[0] for t in TABLES)
    finally:
        con.close()


def profile_runs(size: WorldSize, name: str, folder: Path, **kw) -> tuple[dict, dict, tuple]:
    db, port = folder / f"{name}-{len(list(folder.iterdir()))}.duckdb", free_port()
    first = run(size, name, db, port, 0, **kw)
    after_first = counts(db)
    second = run(size, name, db, port, 3, **kw)
    return first, second, after_first


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--devices", type=int, default=40)
    p.add_argument("--days", type=int, default=60)
    p.add_argument("--only", nargs="*", help="these profiles only (and default)")
    p.add_argument("--no-tight", action="store_true", help="skip the tight-server runs")
    args = p.parse_args()
    size = WorldSize(sites=3, devices=args.devices, days=args.days)
    print(f"bench_contracts: {args.devices} devices, {args.days} days; first sync, then "
          f"three days later on the same address")
    with tempfile.TemporaryDirectory() as tmp:
        folder = Path(tmp)
        base_first, base_second, base_counts = profile_runs(size, "default", folder)
        print("default mirror rows after the first run: " + ", ".join(f"{t} {n:,}" for t, n in
                                                 zip(TABLES, base_counts)))
        rows = [("default", base_first, base_second, base_counts)]
        for name in (n for n in CONTRACTS if n != "default" and n in (args.only or CONTRACTS)):
            rows.append((name, *profile_runs(size, name, folder)))
        print(f"{'profile':18} {'1st req':>8} {'ratio':>6} {'refused':>8} {'2nd req':>8} "
              f"{'ratio':>6} {'refused':>8}  mirror   notes (1st run)")
        for name, first, second, got in rows:
            same = "equal" if got[:5] == base_counts[:5] else f"DIFFERS {got}"
            bad = [r["status"] for r in (first, second) if r["status"] != "ok" or r["problems"]]
            print(f"{name:18} {first['requests']:8d} "
                  f"{first['requests'] / base_first['requests']:6.2f} {first['refused']:8d} "
                  f"{second['requests']:8d} "
                  f"{second['requests'] / base_second['requests']:6.2f} {second['refused']:8d}"
                  f"  {same:8} {len(first['notes'])}{' ' + str(bad) if bad else ''}")
        if args.no_tight:
            return
        print()
        print("tight server (3,000 points, 400 epochs, 20 days a request):")
        for label, user in (("learned from refusals", UserLimits()),
                            ("given by the user", UserLimits(3000, 400, 20))):
            for name in ("default", "plain-refusals"):
                first, second, got = profile_runs(size, name, folder, limits=TIGHT, user=user)
                print(f"  {label:22} {name:15} 1st {first['requests']:4d} requests, "
                      f"{first['refused']} refused; 2nd {second['requests']:4d} requests, "
                      f"{second['refused']} refused; mirror "
                      f"{'equal' if got[:5] == base_counts[:5] else f'DIFFERS {got}'}")


if __name__ == "__main__":
    main()

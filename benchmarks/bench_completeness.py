#!/usr/bin/env python3
"""What proving every answer whole costs, against services that cut answers silently.

One world (60 devices, 120 days by default) is mirrored from an honest reference server and
from servers that misbehave in one way each (``devmon serve --misbehave``: silent caps per
answer or per series, keeping the oldest, the newest or the first items; a clipped range; an
exclusive end date; bad values).  For each it prints the requests used against the honest
sync's, the follow-ups, the answers found cut, what the service profile learned, the ranges
left unproved and whether the mirror's data equal the honest mirror's (readings, epochs and
projected coordinates, compared row by row in DuckDB).

Both sides run in this process over loopback with no rate limit; the requests are what the
rate limit would make slow (0.3 s each at 200/minute).

    python benchmarks/bench_completeness.py            # about a minute
    python benchmarks/bench_completeness.py --days 30  # quicker
"""

from __future__ import annotations

import argparse
import logging
import sys
import tempfile
import time
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO))

import duckdb  # noqa: E402

from devmon_sync import api_contract as contract  # noqa: E402
from devmon_sync.client import ApiClient  # noqa: E402
from devmon_sync.server import Misbehaviour, ReferenceServer, ServerConfig, WorldSize  # noqa: E402
from devmon_sync.store import Mirror  # noqa: E402
from devmon_sync.sync.engine import SyncEngine, SyncOptions  # noqa: E402

from _common import KEY, NOW  # noqa: E402

# The servers refuse nothing (limits far above what the client plans), so a silent cap is
# all that limits an answer; the client plans as usual (100,000 points, 10,000 epochs).
GENEROUS = contract.ResponseLimits(max_points=10**8, max_epochs=10**7, max_range_days=4000)
CASES = {
    "honest": Misbehaviour(),
    "cap 20,000 points / 2,000 epochs, oldest kept": Misbehaviour(cap_points=20_000,
                                                                   cap_epochs=2_000),
    "cap 20,000 points / 2,000 epochs, newest kept": Misbehaviour(
        cap_points=20_000, cap_epochs=2_000, cap_keep="newest"),
    "cap 20,000 points / 2,000 epochs, first items kept": Misbehaviour(
        cap_points=20_000, cap_epochs=2_000, cap_keep="first_items"),
    "cap 500 points / 100 epochs per series, oldest kept": Misbehaviour(
        cap_points=500, cap_epochs=100, cap_per_series=True),
    "cap 500 points / 100 epochs per series, newest kept": Misbehaviour(
        cap_points=500, cap_epochs=100, cap_per_series=True, cap_keep="newest"),
    "cap 20,000 points / 2,000 epochs, spread (thinned)": Misbehaviour(
        cap_points=20_000, cap_epochs=2_000, cap_keep="spread"),
    "cap 500 points / 100 epochs per series, spread": Misbehaviour(
        cap_points=500, cap_epochs=100, cap_per_series=True, cap_keep="spread"),
    "sampling periods claimed 4x too short (honest data)": Misbehaviour(
        period_claim_divisor=4),
    "range clipped to 3 days": Misbehaviour(clip_range_days=3),
    "exclusive end date": Misbehaviour(exclusive_end=True),
    "1 % NaN, 1 % strings, 1 % naive timestamps": Misbehaviour(
        nan_rate=0.01, string_number_rate=0.01, naive_timestamp_rate=0.01),
}
TABLES = {"readings": "parameter_uuid, ts, value",
          "gnss_epochs": "sensor_uuid, epoch_id, ts, lat, lon, eh",
          "gnss_projected": "sensor_uuid, epoch_id, projection_id, e, n, h"}


def sync_once(db: Path, size: WorldSize, misbehaviour: Misbehaviour) -> tuple:
    config = ServerConfig(port=0, api_keys={KEY: None}, now=NOW, rate_limit_per_minute=0,
                          size=size, limits=GENEROUS, misbehaviour=misbehaviour)
    with ReferenceServer(config) as srv, \
            ApiClient(srv.base_url, KEY, rate_limit_per_minute=0) as client, \
            Mirror.open(db) as mirror:
        t0 = time.perf_counter()
        report = SyncEngine(client, mirror, SyncOptions()).run()
        seconds = time.perf_counter() - t0
        learned = "; ".join(line.strip() for line in mirror.load_profile(client.base_url)
                            .describe() if "cuts" in line or "answers at most" in line)
    return report, seconds, learned


def differing_rows(db: Path, honest: Path) -> int:
    """Rows in either mirror's data tables that the other lacks (0: the same data)."""
    con = duckdb.connect(str(db), read_only=True)
    try:
        con.execute(f"ATTACH '{honest}' AS honest (READ_ONLY)")
        return sum(con.execute(
            f"SELECT count(*) FROM ((SELECT {cols} FROM {t} EXCEPT ALL "
            f"SELECT {cols} FROM honest.{t}) UNION ALL (SELECT {cols} FROM honest.{t} "
            f"EXCEPT ALL SELECT {cols} FROM {t}))").fetchone()[0] for t, cols in TABLES.items())
    finally:
        con.close()


def main() -> int:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--devices", type=int, default=60)
    p.add_argument("--days", type=int, default=120)
    args = p.parse_args()
    logging.getLogger("devmon.sync").addHandler(logging.NullHandler())  # no log file here
    size = WorldSize(sites=6, devices=args.devices, days=args.days)
    print(f"bench_completeness: {args.devices} devices, {args.days} days; client plans "
          f"{contract.DEFAULT_LIMITS.max_points:,} points / "
          f"{contract.DEFAULT_LIMITS.max_epochs:,} epochs per request")
    print(f"{'service':52} {'requests':>8} {'x honest':>8} {'follow-ups':>10} {'cut':>5} "
          f"{'unproved':>8} {'quarantined':>11} {'rows differ':>11} {'wall s':>7}  learned")
    with tempfile.TemporaryDirectory() as tmp:
        honest = Path(tmp) / "honest.duckdb"
        base = None
        for i, (name, misbehaviour) in enumerate(CASES.items()):
            db = honest if name == "honest" else Path(tmp) / f"case{i}.duckdb"
            report, seconds, learned = sync_once(db, size, misbehaviour)
            base = base or report.requests
            differ = 0 if db == honest else differing_rows(db, honest)
            print(f"{name:52} {report.requests:8} {report.requests / base:8.2f} "
                  f"{report.follow_ups:10} {report.cut_answers:5} {report.unproven:8} "
                  f"{report.quarantined:11} {differ:11} {seconds:7.1f}  {learned or '-'}")
    print("rows differ: readings, epochs and projected rows in one mirror and not the other "
          "(bad values are quarantined, so they differ by design in the last case)")
    return 0


if __name__ == "__main__":
    sys.exit(main())

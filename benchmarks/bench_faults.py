#!/usr/bin/env python3
"""A full mirror through a failing service: retries, faults by kind, time, and the mirror.

The reference server runs in-process with seeded injected faults (``FaultConfig``): HTTP 500,
dropped connections, bodies cut in half, answers 2 s late, and drips (headers at once, then the
body one byte every 0.5 s, for ever).  A 100-device, 60-day world is mirrored fault-free (the
reference), then with 20 % and 50 % of requests faulty (the five kinds in equal shares), each
into a fresh file.  Printed per run: requests, retries (requests beyond the fault-free run's),
faults the server's plan decided by kind, the server's answers by status, wall time, and
whether the mirror is IDENTICAL to the reference: every data table compared row for row in
DuckDB (both files attached, ``EXCEPT ALL`` both ways, every column but ``last_run_id``),
with the rows found on one side only, per table.

One more run keeps the real pace: client and server at 200 requests per minute, 20 % faults,
on a 12-day world with tight limits (2,000 points a request) so that the run needs more than
200 requests and the pace binds (its mirror is compared with a fault-free run of it).  The
server notes when each request arrived; the table says the most it saw in any 60 s and how
many 429s it sent (none expected: the client counts every attempt, failed ones too, against
its own limit).

The client is devmon's ``ApiClient`` as a sync uses it, with small timeouts so a drip is cut
within seconds: ``timeout_s=(2, 5)`` (the headers within 7 s), up to 12 retries, backoff from
0.05 s to at most 0.5 s.  Its deadline gives a body 7 s of grace, then it must keep up
1 kB/s on average (``deadline.MIN_BYTES_PER_S``), so a drip is cut some 7 s after its headers
whatever length it announced.

    python benchmarks/bench_faults.py            # about 3.5 minutes on 2 shared cores
    python benchmarks/bench_faults.py --quick    # 30 devices, 20 days: about 30 s
"""

from __future__ import annotations

import argparse
import bisect
import logging
import sys
import tempfile
import threading
import time
from collections import Counter
from pathlib import Path

import duckdb

sys.path.insert(0, str(Path(__file__).resolve().parent))
from _common import KEY, NOW, differences, free_port, verdict  # noqa: E402

from devmon_sync import api_contract as contract  # noqa: E402
from devmon_sync.client import ApiClient  # noqa: E402
from devmon_sync.client import deadline  # noqa: E402
from devmon_sync.server import FaultConfig, ReferenceServer, ServerConfig, WorldSize  # noqa: E402
from devmon_sync.server.http import FaultPlan  # noqa: E402
from devmon_sync.store import Mirror  # noqa: E402
from devmon_sync.sync.engine import SyncEngine, SyncOptions  # noqa: E402

TIMEOUT_S = (2.0, 5.0)
MAX_RETRIES = 12
BACKOFF_S = (0.05, 0.5)
PACE = contract.RATE_LIMIT_PER_MINUTE  # 200
PACED_LIMITS = contract.ResponseLimits(max_points=2000, max_epochs=400, max_range_days=20)
SHORT = {"error": "err", "drop": "drop", "truncate": "trunc", "slow": "slow", "drip": "drip"}


def mix(share: float, seed: int) -> FaultConfig:
    """``share`` of requests faulty, the five kinds in equal parts."""
    each = share / len(FaultPlan.KINDS)
    return FaultConfig(error_rate=each, drop_rate=each, truncate_rate=each, slow_rate=each,
                       slow_s=2.0, drip_rate=each, drip_every_s=0.5, drip_bytes=1, seed=seed)


def run(db: Path, size: WorldSize, faults: FaultConfig = FaultConfig(), pace: int = 0,
        limits: contract.ResponseLimits = contract.DEFAULT_LIMITS) -> dict:
    """One full sync of a fresh ``db``; ``pace`` requests per minute on both sides (0: none)."""
    config = ServerConfig(port=free_port(), api_keys={KEY: None}, now=NOW,
                          rate_limit_per_minute=pace, size=size, limits=limits, faults=faults)
    arrivals: list[float] = []
    lock = threading.Lock()
    with ReferenceServer(config).start() as srv:
        handle = srv.app.handle

        def noted(*args):  # when each request reached the app, whatever became of it
            with lock:
                arrivals.append(time.monotonic())
            return handle(*args)

        srv.app.handle = noted
        t = time.perf_counter()
        with ApiClient(srv.base_url, KEY, rate_limit_per_minute=pace, timeout_s=TIMEOUT_S,
                       max_retries=MAX_RETRIES, backoff_base_s=BACKOFF_S[0],
                       backoff_max_s=BACKOFF_S[1]) as client, Mirror.open(db) as m:
            report = SyncEngine(client, m, SyncOptions()).run()
        wall = time.perf_counter() - t
        statuses = Counter(srv.app.status_counts)
        decided = Counter(srv.app.faults.decided)
    return dict(status=report.status, requests=report.requests, problems=report.problems,
                unproven=report.unproven, wall=wall, statuses=statuses, decided=decided,
                arrivals=len(arrivals), most_in_window=most_within(sorted(arrivals), 60.0))


def most_within(times: list[float], window_s: float) -> int:
    """The most of ``times`` (sorted) in any half-open window of ``window_s`` seconds."""
    return max((bisect.bisect_left(times, t + window_s) - i for i, t in enumerate(times)),
               default=0)


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--quick", action="store_true", help="30 devices, 20 days (and 10 paced)")
    p.add_argument("--verbose", action="store_true", help="show the client's retry lines")
    args = p.parse_args()
    if not args.verbose:
        logging.getLogger("devmon").setLevel(logging.ERROR)
    devices, days, paced_days = (30, 20, 10) if args.quick else (100, 60, 12)
    size = WorldSize(devices=devices, days=days)
    paced_size = WorldSize(devices=devices, days=paced_days)
    print(f"bench_faults: {devices} devices, {days} days; client timeout_s={TIMEOUT_S}, "
          f"max_retries={MAX_RETRIES}, backoff {BACKOFF_S[0]}-{BACKOFF_S[1]} s, bodies at "
          f"least {deadline.MIN_BYTES_PER_S / 1e3:,.0f} kB/s after a 7 s grace; faults: error, "
          f"drop, truncate, slow (2 s), drip (1 byte / 0.5 s) in equal shares")
    with tempfile.TemporaryDirectory() as tmp:
        folder = Path(tmp)
        plans = [("fault-free", size, FaultConfig(), 0, contract.DEFAULT_LIMITS, None),
                 ("20 % faults", size, mix(0.2, 1), 0, contract.DEFAULT_LIMITS, "fault-free"),
                 ("50 % faults", size, mix(0.5, 2), 0, contract.DEFAULT_LIMITS, "fault-free"),
                 ("paced, fault-free", paced_size, FaultConfig(), 0, PACED_LIMITS, None),
                 (f"paced {PACE}/min, 20 %", paced_size, mix(0.2, 3), PACE, PACED_LIMITS,
                  "paced, fault-free")]
        done, rows = {}, []
        for name, world, faults, pace, limits, reference in plans:
            db = folder / f"{len(done)}.duckdb"
            r = run(db, world, faults, pace, limits)
            done[name] = (db, r)
            base = done[reference][1]["requests"] if reference else r["requests"]
            diff = differences(done[reference][0], db) if reference else None
            rows.append((name, r, r["requests"] - base, diff))
            print(f"  {name}: {r['status']}, {r['requests']} requests, {r['wall']:.1f} s",
                  file=sys.stderr, flush=True)
        ref_db = done["fault-free"][0]
        with duckdb.connect(str(ref_db), read_only=True) as con:
            counts = {t: con.execute(f"SELECT count(*) FROM {t}").fetchone()[0]
                      for t in ("devices", "parameters", "readings", "gnss_epochs")}
    print("fault-free mirror: " + ", ".join(f"{t} {n:,}" for t, n in counts.items()))
    print()
    kinds = " ".join(f"{SHORT[k]:>5}" for k in FaultPlan.KINDS)
    print(f"{'':42}{'faults the server decided':^29}  {'server answers':^16}")
    print(f"{'run':22} {'status':6} {'req':>5} {'retry':>5}  {kinds}  {'500':>4} {'none':>5} "
          f"{'429':>5} {'max/60s':>7} {'wall s':>7}  mirror")
    for name, r, retries, diff in rows:
        s = r["statuses"]
        fault_counts = " ".join(f"{r['decided'][k]:5d}" for k in FaultPlan.KINDS)
        print(f"{name:22} {r['status']:6} {r['requests']:5d} {retries:5d}  {fault_counts}  "
              f"{s[500]:4d} {s['dropped']:5d} {s[429]:5d} {r['most_in_window']:7d} "
              f"{r['wall']:7.1f}  {verdict(diff) if diff else 'reference'}")
    print("req: requests the sync sent; retry: req beyond the fault-free run's; faults: the "
          "seeded plan's decisions (a slow answer still counts); server answers: HTTP 500, none "
          "(connection closed unanswered), 429; max/60s: most requests the server saw in any "
          "60 s")
    print()
    for name, r, _, diff in rows:
        if diff is None:
            continue
        tables = ", ".join(f"{t} {n:,}" for t, (n, _, _) in diff.items() if n)
        print(f"{name}: {len(diff)} tables compared ({tables}); rows only in the reference / "
              f"only in this run: {sum(d[1] for d in diff.values())} / "
              f"{sum(d[2] for d in diff.values())}; unproved ranges {r['unproven']}"
              + (f"; problems: {r['problems']}" if r["problems"] else ""))
    paced = rows[-1][1]
    print(f"paced run: {paced['arrivals']} requests reached the server, at most "
          f"{paced['most_in_window']} in any 60 s (limit {PACE}), "
          f"{paced['statuses'][429]} answered 429: "
          f"{'within the limit' if paced['most_in_window'] <= PACE else 'OVER THE LIMIT'}")


if __name__ == "__main__":
    main()

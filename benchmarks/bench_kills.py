#!/usr/bin/env python3
"""Killed syncs: 20 SIGKILLs and 20 SIGTERMs at random moments of a 100-device sync.

A reference server (in this process, on a free loopback port) serves a 100-device world.  A
clean `devmon sync` mirrors it once: the reference, and the time T a whole sync takes.  Then
four rounds each start an empty mirror and run `devmon sync` on it ten times, SIGKILL and
SIGTERM in turn, each killed at a random moment within the time it still needs (start-up plus
T scaled by the share of rows still missing), every run resuming what the last left; a
last, unkilled sync finishes the round, and the mirror is compared row for row with the
reference (every data table, in DuckDB, EXCEPT ALL both ways).

Printed: per signal, how the killed processes ended (exit code 143 and the message for
SIGTERM, -9 for SIGKILL, or finished before the signal came), the runs `devmon status` lists by
state (none may stay `running`: killed runs are `interrupted`, stopped ones `cancelled`), the
requests and time each round's last sync still needed, and the verdict per round.

    python benchmarks/bench_kills.py             # about 4 minutes on 2 shared cores
    python benchmarks/bench_kills.py --quick     # 40 devices, 2 rounds of 6: about 1 minute
"""

from __future__ import annotations

import argparse
import os
import random
import re
import signal
import subprocess
import sys
import tempfile
import time
from collections import Counter
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))
from _common import KEY, NOW, differences, verdict  # noqa: E402

from devmon_sync.api_contract import ResponseLimits  # noqa: E402
from devmon_sync.server import ReferenceServer, ServerConfig, WorldSize  # noqa: E402

LIMITS = ResponseLimits(max_points=20_000, max_epochs=2_000)
"""Smaller answers than the default, so a sync is many commits a kill can fall between."""


def sync_command(db: Path, url: str) -> list[str]:
    return [sys.executable, "-m", "devmon_sync", "sync", "--db", str(db), "--base-url", url,
            "--api-key", KEY, "--rate-limit", "0", "--quiet"]


def run_to_end(db: Path, url: str) -> tuple[float, str]:
    started = time.perf_counter()
    r = subprocess.run(sync_command(db, url), capture_output=True, text=True, timeout=900)
    if r.returncode != 0:
        raise SystemExit(f"a sync to the end failed ({r.returncode}): {r.stderr[-2000:]}")
    return time.perf_counter() - started, r.stdout + r.stderr


def killed_run(db: Path, url: str, sig: int, after_s: float) -> tuple[str, str]:
    """One sync, sent ``sig`` ``after_s`` seconds after it started: how it ended, and the
    last line it printed."""
    proc = subprocess.Popen(sync_command(db, url), stdout=subprocess.PIPE,
                            stderr=subprocess.PIPE, text=True)
    try:
        proc.wait(timeout=after_s)
        ended = "finished before the signal"
    except subprocess.TimeoutExpired:
        proc.send_signal(sig)
        proc.wait(timeout=120)
        ended = f"exit {proc.returncode}"
    out, err = proc.communicate()
    lines = [line for line in (out + err).splitlines() if line.strip()]
    return ended, lines[-1] if lines else ""


def rows(db: Path) -> int:
    """Readings and epochs in a mirror (0 before it exists): how far a sync has come."""
    if not db.exists():
        return 0
    import duckdb

    with duckdb.connect(str(db), read_only=True) as con:
        try:
            return con.execute("SELECT (SELECT count(*) FROM readings) + "
                               "(SELECT count(*) FROM gnss_epochs)").fetchone()[0]
        except duckdb.Error:
            return 0


def run_states(db: Path) -> Counter:
    """Runs by state, as `devmon status` lists them."""
    r = subprocess.run([sys.executable, "-m", "devmon_sync", "status", "--db", str(db)],
                       capture_output=True, text=True, timeout=120)
    if r.returncode != 0:
        raise SystemExit(f"devmon status failed: {r.stderr[-2000:]}")
    states = Counter()
    for word in ("running", "interrupted", "cancelled", "failed", "ok"):
        states[word] = len(re.findall(rf"\b{word}\b", r.stdout))
    return states


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--quick", action="store_true", help="40 devices, 2 rounds of 6 kills")
    p.add_argument("--seed", type=int, default=1)
    args = p.parse_args()
    devices, days, rounds, kills = (40, 20, 2, 6) if args.quick else (100, 60, 4, 10)
    rng = random.Random(args.seed)
    config = ServerConfig(port=0, api_keys={KEY: None}, now=NOW, rate_limit_per_minute=0,
                          size=WorldSize(devices=devices, days=days), limits=LIMITS)
    with tempfile.TemporaryDirectory() as tmp, ReferenceServer(config).start() as srv:
        folder = Path(tmp)
        reference = folder / "reference.duckdb"
        whole_s, _ = run_to_end(reference, srv.base_url)
        idle_s, _ = run_to_end(reference, srv.base_url)  # start-up and metadata: nothing new
        total_rows = rows(reference)
        print(f"bench_kills: {devices} devices, {days} days ({total_rows:,} readings and "
              f"epochs), answers of at most {LIMITS.max_points:,} points; server in process, "
              f"syncs as `devmon sync --rate-limit 0` subprocesses; a whole sync takes "
              f"{whole_s:.1f} s, one with nothing new {idle_s:.1f} s; {rounds} rounds of {kills} "
              f"kills, each at a random moment within the time the sync still needs")
        endings: dict[str, Counter] = {"SIGKILL": Counter(), "SIGTERM": Counter()}
        said: Counter = Counter()
        states_total: Counter = Counter()
        for n in range(rounds):
            db = folder / f"round{n}.duckdb"
            for k in range(kills):
                sig = signal.SIGKILL if k % 2 == 0 else signal.SIGTERM
                left = 1.0 - rows(db) / total_rows
                needs_s = idle_s + left * max(whole_s - idle_s, 0.0)
                ended, last = killed_run(db, srv.base_url, sig,
                                         rng.uniform(0.05, 0.95) * needs_s)
                endings[sig.name][ended] += 1
                if sig == signal.SIGTERM and ended == "exit 143":
                    said[last[:90]] += 1
            states = run_states(db)
            rest_s, _ = run_to_end(db, srv.base_url)
            states_total.update(states)
            diff = differences(reference, db)
            compared = sum(t for t, _, _ in diff.values())
            print(f"round {n + 1}: before the last sync, devmon status lists "
                  f"{dict(states)}; the last sync took {rest_s:.1f} s; "
                  f"{len(diff)} tables, {compared:,} rows: {verdict(diff)}")
        print()
        for name, counts in endings.items():
            print(f"{name}: " + ", ".join(f"{how} x{c}" for how, c in counts.most_common()))
        for line, c in said.most_common(3):
            print(f"  SIGTERM's last line (x{c}): {line}")
        print(f"runs left 'running' in any status: {states_total['running']}")
        if os.environ.get("BENCH_KEEP"):
            print(f"files kept in {folder}")


if __name__ == "__main__":
    main()

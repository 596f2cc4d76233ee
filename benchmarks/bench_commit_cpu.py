#!/usr/bin/env python3
"""CPU of a run of readings commits through ``Mirror.commit_readings``, no HTTP, no decoding:
what a sync's windows cost the store (statistics, summaries, ledger, COMMIT).

24 consecutive windows of 100 parameters x ~840 readings each (10-minute spacing, each
window continuing the one before, as a first sync walks), into a fresh file, in a process of
its own; CPU (``time.process_time``, every thread) of the 24 commits, by groups as a sync
commits them (``Mirror.grouped``, where the tree has it; ``GROUPED=0``: one by one).
``--other TREE`` alternates with another devmon tree (a git worktree), the same windows,
and prints the medians of both (this machine is shared: read the ratio); ``--floor`` also
alternates the same tables appended by bare INSERTs and a CHECKPOINT (what writing the rows
costs with no summary, statistic, ledger or check).

    python benchmarks/bench_commit_cpu.py --repeats 5
    git worktree add /tmp/wt_before main && \\
        python benchmarks/bench_commit_cpu.py --other /tmp/wt_before --repeats 5
    python benchmarks/bench_commit_cpu.py --floor --repeats 5
"""

from __future__ import annotations

import argparse
import contextlib
import json
import os
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

REPO = Path(__file__).resolve().parent.parent
STREAMS, WINDOWS, STEP_S = 100, 24, 600


def child(tree: str) -> None:
    sys.path.insert(0, tree)
    from datetime import datetime, timedelta, timezone

    import numpy as np
    import pyarrow as pa

    from devmon_sync.store import Mirror
    from devmon_sync.store.ledger import WindowProof

    keys = [f"00000000-0000-0000-0000-{i:012d}" for i in range(1, STREAMS + 1)]
    rng = np.random.default_rng(1)

    def window(start: datetime, n: int):
        times = int(start.timestamp() * 1e6) + np.arange(n, dtype=np.int64) * STEP_S * 10**6
        codes = np.repeat(np.arange(STREAMS, dtype=np.int32), n)
        table = pa.table({
            "parameter_uuid": pa.DictionaryArray.from_arrays(pa.array(codes), pa.array(keys)),
            "ts": pa.array(np.tile(times, STREAMS), pa.timestamp("us", tz="UTC")),
            "value": pa.array(rng.normal(0, 1, len(codes)), pa.float64())})
        end = start + timedelta(seconds=STEP_S * n) - timedelta(milliseconds=1)
        first, last = np.full(STREAMS, times[0] / 1000.0), np.full(STREAMS, times[-1] / 1000.0)
        return WindowProof("readings", keys, start, end, [n] * STREAMS, first, last,
                           gaps_may_exist=False), table

    windows, start = [], datetime(2025, 9, 3, 1, 30, tzinfo=timezone.utc)
    for i in range(WINDOWS):
        proof, table = window(start, 840 + (i % 3) * 7)
        windows.append((proof, table))
        start = proof.end + timedelta(milliseconds=1)
    if tree == "floor":
        print("RESULT " + json.dumps({"cpu_s": floor(windows)}))
        return
    with tempfile.TemporaryDirectory() as work, Mirror.open(Path(work) / "m.duckdb") as m:
        m.con.execute("INSERT INTO parameters (uuid) SELECT unnest(?::UUID[])", [keys])
        run = m.begin_run("http://bench.invalid/v1", {})
        # as a sync commits them: by groups where the tree has them (``Mirror.grouped``)
        grouped = getattr(m, "grouped", None) if os.environ.get("GROUPED", "1") == "1" \
            else None
        c0 = time.process_time()
        with grouped() if grouped else contextlib.nullcontext():
            for i, (proof, table) in enumerate(windows):
                m.commit_readings(run, proof, table, continues=i > 0)
        cpu = time.process_time() - c0
        m.finish_run(run, "ok", 0)
    print("RESULT " + json.dumps({"cpu_s": cpu}))


def floor(windows: list) -> float:
    """CPU of the same windows' tables appended by bare INSERTs (one transaction each, the
    keys cast from text) into a table of the same columns, then a CHECKPOINT (devmon's
    grouped commits end with one): what writing the rows costs with nothing else kept."""
    import duckdb

    with tempfile.TemporaryDirectory() as work:
        con = duckdb.connect(str(Path(work) / "floor.duckdb"))
        con.execute("CREATE TABLE readings (parameter_uuid UUID NOT NULL, "
                    "ts TIMESTAMPTZ NOT NULL, value DOUBLE)")
        c0 = time.process_time()
        for _, answer in windows:
            con.execute("INSERT INTO readings SELECT * FROM answer")
        con.execute("CHECKPOINT")
        cpu = time.process_time() - c0
        con.close()
    return cpu


def once(tree: Path | str) -> float:
    """One child's CPU: a devmon tree's commits, or (``"floor"``) the bare INSERTs."""
    where = REPO if tree == "floor" else tree
    out = subprocess.run([sys.executable, __file__, "--child", str(tree)], cwd=where,
                         capture_output=True, text=True, check=True,
                         env={**os.environ, "PYTHONPATH": str(where)})
    line = [x for x in out.stdout.splitlines() if x.startswith("RESULT ")][-1]
    return json.loads(line[len("RESULT "):])["cpu_s"]


def main() -> int:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--repeats", type=int, default=5)
    p.add_argument("--other", help="another devmon tree, alternated with this one")
    p.add_argument("--floor", action="store_true",
                   help="also the bare INSERTs of the same rows, alternated")
    p.add_argument("--child", help=argparse.SUPPRESS)
    args = p.parse_args()
    if args.child:
        child(args.child)
        return 0
    trees = {"this tree": REPO}
    if args.other:
        trees[args.other] = Path(args.other).resolve()
    if args.floor:
        trees["floor (bare INSERTs)"] = "floor"
    cpu: dict[str, list[float]] = {name: [] for name in trees}
    for _ in range(args.repeats):
        for name, tree in trees.items():
            cpu[name].append(once(tree))
    print(f"{WINDOWS} commits of {STREAMS} parameters x ~840 readings, CPU s, median of "
          f"{args.repeats} (alternated):")
    for name, values in cpu.items():
        print(f"  {name:30s} {statistics.median(values):.3f}  "
              f"({', '.join(f'{v:.3f}' for v in values)}; "
              f"{1000 * statistics.median(values) / WINDOWS:.1f} ms a window)")
    first = statistics.median(cpu["this tree"])
    for name, values in list(cpu.items())[1:]:
        print(f"  this tree / {name}: {first / statistics.median(values):.2f}")
    return 0


if __name__ == "__main__":
    sys.exit(main())

#!/usr/bin/env python3
"""CPU of a full mirror, devmon against its contenders, side by side in one run.

One reference server (``devmon serve --rate-limit 0``, fixed clock) serves one world.  A
devmon sync of it records the data requests it sent (POST /sensor-data and
/sensor-data/gnss, bodies as sent).  Then, alternating, each contender mirrors the same world
into a fresh DuckDB file, each in a process of its own, its CPU counted after its imports
(``time.process_time``: every thread, DuckDB's included; the server's CPU is not counted):

* ``devmon``: this tree's ``SyncEngine(...).run()`` (what ``devmon sync --rate-limit 0``
  does), with every proof, statistic, ledger row and check, and the mirror's close (its
  checkpoint: the floor's close is counted too);
* ``baseline``: the same at another commit (``--baseline REV``, a git worktree);
* ``floor``: the recorded requests replayed by a bare script (``sync_floor.py``): the same
  answers' bytes decoded with msgspec into Arrow and appended to DuckDB, nothing checked;
* ``dlt``: dlt's Arrow path fed as its users write a resource (``response.json()``, dicts,
  ``pa.Table.from_pylist``), and ``dlt-msgspec``: dlt fed the floor's decoded tables (what
  its loading alone adds).  ``--dlt-python``: a venv with ``dlt[duckdb]``, msgspec, numpy
  and requests; optional, as the Spark test's pyspark.

All contenders receive the same answers (the replays send devmon's requests), so their CPU
seconds compare directly; per reading uses the rows devmon mirrored.  The machine is shared:
read the ratios, measured in the same run, alternated, median of ``--repeats``.

    python benchmarks/bench_sync_contenders.py --devices 60 --days 120
    python benchmarks/bench_sync_contenders.py --devices 200 --days 365 --baseline 0ac290f \\
        --dlt-python /work/dlt-venv/bin/python
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

HERE = Path(__file__).resolve().parent
REPO = HERE.parent
TREE = Path(os.environ.get("DEVMON_TREE", REPO))  # which devmon the child imports
sys.path.insert(0, str(TREE))
sys.path.insert(1, str(HERE))

from _common import KEY, NOW  # noqa: E402

DATA_PATHS = ("/sensor-data", "/sensor-data/gnss")


def child(args) -> int:
    """One devmon sync (this tree or ``DEVMON_TREE``'s); with ``--record``, the data requests
    it sent, one JSON line each.  Prints ``RESULT {json}`` last."""
    from devmon_sync.client import ApiClient
    from devmon_sync.store import Mirror
    try:
        from devmon_sync.sync.engine import SyncEngine, SyncOptions
    except ImportError:  # an older tree: one module devmon_sync/sync.py
        from devmon_sync.sync import SyncEngine, SyncOptions

    sent: list[str] = []
    client = ApiClient(args.url, KEY, rate_limit_per_minute=0)
    mirror = Mirror.open(args.db)
    with client:
        if args.record:
            request = client._session.request

            def recording(method, url, **kw):
                path = url[len(args.url):]
                if method == "POST" and path in DATA_PATHS:
                    sent.append(json.dumps({"path": path, "body": json.loads(kw["data"])}))
                return request(method, url, **kw)
            client._session.request = recording
        engine = SyncEngine(client, mirror, SyncOptions())
        c0, w0, t0 = time.process_time(), time.perf_counter(), time.thread_time()
        report = engine.run()
        run_cpu = time.process_time() - c0
        mirror.close()  # (its checkpoint counted, as the floor's close is)
        cpu, wall = time.process_time() - c0, time.perf_counter() - w0
        main_thread = time.thread_time() - t0
    if args.record:
        Path(args.record).write_text("\n".join(sent) + "\n")
    print("RESULT " + json.dumps({"status": report.status, "requests": report.requests,
                                  "rows": report.readings_rows + report.epoch_rows,
                                  "readings": report.readings_rows,
                                  "epochs": report.epoch_rows, "cpu_s": cpu,
                                  "run_cpu_s": run_cpu, "wall_s": wall,
                                  "main_thread_cpu_s": main_thread}))
    return 0


def run(cmd: list[str], env: dict | None = None) -> dict:
    out = subprocess.run(cmd, cwd=REPO, capture_output=True, text=True, env=env, check=False)
    lines = [x for x in out.stdout.splitlines() if x.startswith("RESULT ")]
    if out.returncode != 0 or not lines:
        raise RuntimeError(f"{cmd[:3]} failed ({out.returncode}):\n{out.stderr[-3000:]}")
    return json.loads(lines[-1][len("RESULT "):])


class Contenders:
    """The commands of each contender, on a fresh database file per run."""

    def __init__(self, url: str, work: Path, requests_file: Path, baseline: Path | None,
                 dlt_python: str | None):
        self.url, self.work, self.requests_file = url, work, requests_file
        self.commands = {"devmon": self._devmon(REPO), "floor": self._replay(sys.executable,
                                                                              "floor")}
        if baseline:
            self.commands["baseline"] = self._devmon(baseline)
        if dlt_python:
            self.commands["dlt"] = self._replay(dlt_python, "dlt")
            self.commands["dlt-msgspec"] = self._replay(dlt_python, "dlt-msgspec")
        self.runs = 0

    def _devmon(self, tree: Path):
        def command(db: Path) -> tuple[list[str], dict]:
            return ([sys.executable, str(Path(__file__).resolve()), "--child", "--url",
                     self.url, "--db", str(db)], {**os.environ, "DEVMON_TREE": str(tree)})
        return command

    def _replay(self, python: str, which: str):
        def command(db: Path) -> tuple[list[str], dict]:
            return ([python, str(HERE / "sync_floor.py"), which, "--url", self.url, "--key",
                     KEY, "--requests", str(self.requests_file), "--db", str(db), "--work",
                     str(db.parent / f"{db.stem}-dlt")], dict(os.environ))
        return command

    def once(self, name: str) -> dict:
        self.runs += 1
        db = self.work / f"{name}-{self.runs}.duckdb"
        cmd, env = self.commands[name](db)
        try:
            return run(cmd, env)
        finally:
            db.unlink(missing_ok=True)
            shutil.rmtree(db.parent / f"{db.stem}-dlt", ignore_errors=True)


def worktree(rev: str, parent: Path) -> Path:
    path = parent / f"baseline-{rev}"
    subprocess.run(["git", "worktree", "add", "--detach", str(path), rev], cwd=REPO,
                   check=True, capture_output=True)
    return path


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--devices", type=int, default=60)
    p.add_argument("--days", type=int, default=120)
    p.add_argument("--repeats", type=int, default=3)
    p.add_argument("--baseline", help="a commit to run as a third contender (git worktree)")
    p.add_argument("--dlt-python", help="python of a venv with dlt[duckdb], msgspec, requests")
    p.add_argument("--child", action="store_true", help=argparse.SUPPRESS)
    p.add_argument("--url", help=argparse.SUPPRESS)
    p.add_argument("--db", help=argparse.SUPPRESS)
    p.add_argument("--record", help=argparse.SUPPRESS)
    args = p.parse_args(argv)
    if args.child:
        return child(args)
    from bench_sync import Server  # (not in a child: it puts this tree first on the path)

    work = Path(tempfile.mkdtemp(prefix="devmon-contenders-"))
    base = worktree(args.baseline, work) if args.baseline else None
    try:
        with Server(args.devices, args.days, NOW) as server:
            recorded = work / "requests.jsonl"
            first = run([sys.executable, str(Path(__file__).resolve()), "--child", "--url",
                         server.base_url, "--db", str(work / "record.duckdb"), "--record",
                         str(recorded)])
            print(f"world: {args.devices} devices x {args.days} days ({server.command})")
            print(f"devmon's full mirror: {first['readings']:,} readings + {first['epochs']:,} "
                  f"GNSS epochs in {first['requests']} requests, "
                  f"{len(recorded.read_text().splitlines())} of them data requests (replayed)")
            contenders = Contenders(server.base_url, work, recorded, base, args.dlt_python)
            results = alternate(contenders, args.repeats)
        report(results, first["rows"], args)
    finally:
        if base:
            subprocess.run(["git", "worktree", "remove", "--force", str(base)], cwd=REPO,
                           check=False, capture_output=True)
        shutil.rmtree(work, ignore_errors=True)
    return 0


def alternate(contenders: Contenders, repeats: int) -> dict[str, list[dict]]:
    """Each contender once per round, the order rotated each round."""
    names = list(contenders.commands)
    results: dict[str, list[dict]] = {n: [] for n in names}
    for r in range(repeats):
        for name in names[r % len(names):] + names[:r % len(names)]:
            results[name].append(contenders.once(name))
    return results


def report(results: dict[str, list[dict]], rows: int, args) -> None:
    cpu = {n: statistics.median(x["cpu_s"] for x in v) for n, v in results.items()}
    print(f"\nCPU seconds, median of {args.repeats} (alternated), and us of CPU per row "
          f"devmon mirrored ({rows:,}):")
    for name, values in results.items():
        each = ", ".join(f"{x['cpu_s']:.2f}" for x in values)
        print(f"  {name:9s} {cpu[name]:7.2f} s  {1e6 * cpu[name] / rows:6.2f} us/row  "
              f"(runs: {each}; rows kept {values[0]['rows']:,})")
    for name, values in results.items():
        if "run_cpu_s" in values[0]:
            print(f"  {name:9s} {statistics.median(x['run_cpu_s'] for x in values):7.2f} s  "
                  f"without its close (run() alone)")
    print("\nratios (same run):")
    print(f"  devmon / floor            {cpu['devmon'] / cpu['floor']:.2f}   (goal <= 1.3)")
    if "dlt" in cpu:
        print(f"  dlt / devmon              {cpu['dlt'] / cpu['devmon']:.2f}   (goal >= 2.0)")
        print(f"  dlt-msgspec / devmon      {cpu['dlt-msgspec'] / cpu['devmon']:.2f}")
    if "baseline" in cpu:
        print(f"  devmon / {args.baseline:16s} {cpu['devmon'] / cpu['baseline']:.2f}   "
              f"(goal <= 1.0)")
        if "dlt" in cpu:
            print(f"  dlt / {args.baseline:19s} {cpu['dlt'] / cpu['baseline']:.2f}")


if __name__ == "__main__":
    sys.exit(main())

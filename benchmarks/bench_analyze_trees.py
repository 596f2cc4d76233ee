#!/usr/bin/env python3
"""``devmon analyze`` end to end, this tree against another checkout, alternated in one run:
rovers per second (wall) and CPU seconds (the command and its worker processes), with
``--jobs 1`` and ``--jobs 2``, and whether both trees print the same analysis.

Each run is ``python -m devmon_sync analyze --db MIRROR --jobs J`` in a fresh process whose
``PYTHONPATH`` is one tree; its CPU is the child's and its workers' (``os.wait4``).  The
mirror is the issue's 500-device, 62-day world (134 rovers with epochs), synced once through
a real sync and kept under ``~/.cache/devmon-bench`` (``$DEVMON_BENCH_CACHE``).  The machine
is shared: read the ratios of the same run.

    git worktree add ../before <commit>
    python benchmarks/bench_analyze_trees.py --other ../before
    python benchmarks/bench_analyze_trees.py --other ../before --command alarms

``--command alarms`` times ``devmon alarms --evaluate`` instead (every rover with levels
evaluated again and its history stored) on a copy of the mirror with displacement and
velocity levels set on every site (made once beside it); a tree without ``devmon alarms
--jobs`` runs its one way only.  ``--command gui`` times the GUI's analysis task
(``gui.gnss_work.run_analyses`` of every rover, on that copy: what the GNSS view runs on
its worker thread when a whole network is checked; one thread, so ``--jobs 1`` only) in a
fresh process of each tree, and compares the summaries and levels it returns.

    python benchmarks/bench_analyze_trees.py --other ../before --command gui
"""

from __future__ import annotations

import argparse
import os
import re
import shlex
import statistics
import subprocess
import sys
import time
from pathlib import Path

HERE = Path(__file__).resolve().parent
REPO = HERE.parent
sys.path.insert(0, str(REPO))
sys.path.insert(1, str(HERE))
from _common import children_cpu_s  # noqa: E402


def cache_dir() -> Path:
    return Path(os.environ.get("DEVMON_BENCH_CACHE", Path.home() / ".cache" / "devmon-bench"))


def world_mirror(devices: int, days: int) -> Path:
    """The synced mirror of a ``devices``-device, ``days``-day world (made once)."""
    from _common import sync_world

    from devmon_sync.server import WorldSize

    path = cache_dir() / f"analyze-{devices}x{days}.duckdb"
    if not path.exists():
        path.parent.mkdir(parents=True, exist_ok=True)
        partial = path.with_suffix(".partial")
        partial.unlink(missing_ok=True)
        took, counts = sync_world(partial, WorldSize(sites=6, devices=devices, days=days))
        partial.rename(path)
        print(f"(synced {path}: {counts[0]} devices, {counts[3]:,} GNSS epochs in {took:.0f} s)")
    return path


def with_levels(mirror: Path) -> Path:
    """A copy of ``mirror`` with displacement and velocity levels on every site (made
    once): what ``devmon alarms --evaluate`` evaluates."""
    from devmon_sync.store import Mirror, queries

    path = mirror.with_name(mirror.stem + "-levels.duckdb")
    if not path.exists():
        partial = path.with_suffix(".partial")
        partial.write_bytes(mirror.read_bytes())
        with Mirror.open(partial) as m:
            sites = m.con.execute("SELECT DISTINCT site_uuid FROM devices "
                                  "WHERE site_uuid IS NOT NULL").fetchall()
            for (site,) in sites:
                queries.set_alarm_levels(m, site, "displacement",
                                         {"alert": 10.0, "alarm": 40.0}, scope="site")
                queries.set_alarm_levels(m, site, "velocity",
                                         {"alert": 1.0, "alarm": 5.0}, scope="site")
        partial.rename(path)
    return path


def has_alarm_jobs(tree: Path) -> bool:
    """Whether the tree's ``devmon alarms`` takes ``--jobs``."""
    env = {**os.environ, "PYTHONPATH": str(tree)}
    done = subprocess.run([sys.executable, "-m", "devmon_sync", "alarms", "--help"], cwd=tree,
                          env=env, capture_output=True, text=True, check=False)
    return "--jobs" in done.stdout


def analyze(tree: Path, mirror: Path, jobs: int, extra: list[str], command: str = "analyze"
            ) -> tuple[float, float, bytes]:
    """(wall s, CPU s of the process and its workers, stdout) of one ``devmon analyze``
    (or ``devmon alarms --evaluate``).  The CPU is the growth of this process's
    RUSAGE_CHILDREN: the child's own, and its workers' (it waits for them, so theirs is
    added to its children's, then to ours)."""
    env = {**os.environ, "PYTHONPATH": str(tree)}
    args = ["analyze", "--db", str(mirror), "--jobs", str(jobs)] if command == "analyze" \
        else ["alarms", "--db", str(mirror), "--evaluate"] + (
            ["--jobs", str(jobs)] if has_alarm_jobs(tree) else [])
    before = children_cpu_s()
    t0 = time.perf_counter()
    done = subprocess.run([sys.executable, "-m", "devmon_sync", *args, *extra], cwd=tree,
                          env=env, capture_output=True, check=False)
    wall = time.perf_counter() - t0
    if done.returncode:
        raise RuntimeError(f"devmon {command} ({tree}) failed:\n{done.stderr.decode()[-2000:]}")
    return wall, children_cpu_s() - before, done.stdout


# the GUI's analysis task of every rover, run with a tree's code (its PYTHONPATH): what
# it returns, as JSON (the summaries and the levels the GNSS view draws)
GUI_TASK = """
import json, os, sys
os.environ.setdefault("QT_QPA_PLATFORM", "offscreen")
from analysis.pipeline import AnalysisOptions
from devmon_sync.store import Mirror, queries
from gui import gnss_work

class State:  # what run_analyses uses of gui.workers.TaskState
    def check(self): pass
    def set_progress(self, percent, text=""): pass

with Mirror.open(sys.argv[1], read_only=True) as m:
    serials = tuple(d.serial_number for d in queries.gnss_devices(m) if d.epochs)
    found = gnss_work.run_analyses(m, State(), gnss_work.GnssRequest(
        serials, AnalysisOptions.build()))
json.dump({"analysed": len(found.analyses), "errors": found.errors,
           "summaries": [a.summary() for a in found.analyses],
           "levels": found.alarm_levels}, sys.stdout, default=str)
"""


def gui_task(tree: Path, mirror: Path) -> tuple[float, float, bytes]:
    """(wall s, CPU s, stdout) of the GUI's analysis task (``GUI_TASK``) run by ``tree``."""
    env = {**os.environ, "PYTHONPATH": str(tree), "QT_QPA_PLATFORM": "offscreen"}
    before = children_cpu_s()
    t0 = time.perf_counter()
    done = subprocess.run([sys.executable, "-c", GUI_TASK, str(mirror)], cwd=tree, env=env,
                          capture_output=True, check=False)
    wall = time.perf_counter() - t0
    if done.returncode:
        raise RuntimeError(f"the GUI task ({tree}) failed:\n{done.stderr.decode()[-2000:]}")
    return wall, children_cpu_s() - before, done.stdout


def rovers_in(mirror: Path) -> int:
    from devmon_sync.store import Mirror, queries

    with Mirror.open(mirror, read_only=True) as m:
        return sum(1 for d in queries.gnss_devices(m) if d.epochs)


def main() -> int:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--other", type=Path, required=True, help="the other checkout")
    p.add_argument("--devices", type=int, default=500)
    p.add_argument("--days", type=int, default=62)
    p.add_argument("--repeat", type=int, default=3)
    p.add_argument("--args", default="", help="more arguments of devmon analyze, e.g. "
                   "\"--device SN1 --device SN2\" (shell words)")
    p.add_argument("--command", choices=("analyze", "alarms", "gui"), default="analyze",
                   help="alarms: time devmon alarms --evaluate (levels on every site); gui: "
                        "the GUI's analysis task of every rover (same mirror)")
    args = p.parse_args()
    extra = shlex.split(args.args)
    mirror = world_mirror(args.devices, args.days)
    if args.command in ("alarms", "gui"):
        mirror = with_levels(mirror)
    n = rovers_in(mirror)
    trees = {"this tree": REPO, "other": args.other.resolve()}
    runs: dict[tuple[str, int], list[tuple[float, float]]] = {}
    outputs: dict[str, bytes] = {}
    for r in range(args.repeat):
        for jobs in (1, 2):
            order = list(trees.items())[::1 if r % 2 == 0 else -1]
            for name, tree in order:
                if jobs == 2 and (args.command == "gui" or args.command == "alarms"
                                  and not has_alarm_jobs(tree)):
                    continue  # the GUI's task is one thread; that tree evaluates one way
                wall, cpu, out = (gui_task(tree, mirror) if args.command == "gui" else
                                  analyze(tree, mirror, jobs, extra, args.command))
                runs.setdefault((name, jobs), []).append((wall, cpu))
                outputs.setdefault(name, out)
    said = re.search(rb"(?:Analysed|Alarms:) (\d+) rover", outputs["this tree"])
    n = int(said.group(1)) if said else n  # (the rovers of the scope asked)
    what = {"analyze": "devmon analyze", "alarms": "devmon alarms --evaluate",
            "gui": "the GUI's analysis task (gui.gnss_work.run_analyses)"}[args.command]
    print(f"{what} --db {mirror.name} {args.args} ({n} rovers), median of "
          f"{args.repeat}, alternated; other = {args.other}")
    for jobs in (1, 2) if args.command != "gui" else (1,):
        med = {name: (statistics.median(w for w, _ in runs[(name, jobs)]),
                      statistics.median(c for _, c in runs[(name, jobs)]))
               for name in trees if (name, jobs) in runs}
        for name, (wall, cpu) in med.items():
            print(f"  --jobs {jobs} {name:9s}: {wall:6.2f} s wall, {n / wall:6.1f} rovers/s, "
                  f"CPU {cpu:6.2f} s ({1e3 * cpu / n:.1f} ms a rover)")
        if len(med) == 2:
            (w1, c1), (w2, c2) = med["this tree"], med["other"]
            print(f"  --jobs {jobs} this/other: wall {w1 / w2:.2f}x, CPU {c1 / c2:.2f}x")
    same = outputs["this tree"] == outputs["other"]
    print(f"same output: {'yes' if same else 'NO'} ({len(outputs['this tree']):,} bytes)")
    return 0


if __name__ == "__main__":
    sys.exit(main())

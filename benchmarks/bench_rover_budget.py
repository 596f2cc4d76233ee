#!/usr/bin/env python3
"""What a rover's analysis may cost for issue 31's point 3 goals, measured on this machine:
``devmon analyze`` end to end >= 100 rovers/s on 2 cores (the 500-device, 62-day world: 134
rovers) and ``bench_many_rovers`` 5,000 rovers < 30 s.

A rate on 2 cores is a CPU budget: N rovers at 100 rovers/s is N / 100 s of wall time, so at
most 2 N / 100 CPU seconds in all (both cores busy the whole time, which the pool does not
quite reach).  From it go the fixed costs the command pays whatever the analysis costs:

1. the command's own start and reads (``devmon analyze --jobs 1`` CPU minus its rovers'
   analysis CPU, both measured here);
2. a worker's start (a fresh Python importing what a pool worker imports and opening the
   mirror read-only; ``analyze.pool``'s workers are spawned);
3. with ``--numba-python PY`` (a Python with numba installed, in its own venv: numba is not a
   devmon dependency), what a compiled kernel would add to every process: ``import numba``
   and the first call of a kernel loaded from numba's on-disk cache (compiled beforehand).

What is left, divided by N, is the most the analysis may cost a rover; printed beside what it
costs now (``analyze_rover`` of the world's rovers in this process, CPU).

    python benchmarks/bench_rover_budget.py
    python3 -m venv ../numba-venv && ../numba-venv/bin/pip install numba
    python benchmarks/bench_rover_budget.py --numba-python ../numba-venv/bin/python
"""

from __future__ import annotations

import argparse
import os
import statistics
import subprocess
import sys
import tempfile
import textwrap
import time
from pathlib import Path

HERE = Path(__file__).resolve().parent
REPO = HERE.parent
sys.path.insert(0, str(REPO))
sys.path.insert(1, str(HERE))

from _common import children_cpu_s  # noqa: E402

GOAL_ROVERS_PER_S = 100.0
CORES = 2
MANY_ROVERS, MANY_GOAL_S = 5_000, 30.0

# what a spawned pool worker of ``devmon analyze`` does before its first rover
WORKER_START = """
import sys
from devmon_sync.analyze import pool, rovers  # noqa: F401 (what unpickling a task imports)
from devmon_sync.cli import analyze  # noqa: F401 (the command's work function)
from devmon_sync.store import Mirror
Mirror.open(sys.argv[1], read_only=True).close()
"""

# a running sum: the smallest kernel; the first call of any cached kernel in a process
# pays numba's own start (its type system and LLVM), later kernels ~ms each
NUMBA_KERNEL = """
import numpy as np
from numba import njit

@njit(cache=True, nogil=True)
def running_sum(x, w):
    out = np.empty(x.size)
    s = 0.0
    for i in range(x.size):
        s += x[i]
        if i >= w:
            s -= x[i - w]
        out[i] = s
    return out
"""

NUMPY_START = """
import numpy as np
np.cumsum(np.ones(100))
"""

NUMBA_START = """
import numpy as np
import numba  # noqa: F401
import kernel
kernel.running_sum(np.ones(100), 5)
"""


def child_cpu(argv: list[str], cwd: Path | None = None) -> float:
    """CPU seconds (user + system) of one child process run to its end."""
    before = children_cpu_s()
    done = subprocess.run(argv, cwd=cwd, capture_output=True, check=False,
                          env={**os.environ, "PYTHONPATH": str(REPO)})
    if done.returncode:
        raise RuntimeError(f"{argv[:3]} failed:\n{done.stderr.decode()[-2000:]}")
    return children_cpu_s() - before


def analysis_cpu(mirror: Path, repeats: int) -> tuple[int, list[float]]:
    """(rovers, CPU s of each pass) of ``analyze_device`` of every rover of ``mirror`` in
    this process, their inputs read beforehand; a first pass warms up, untimed."""
    from analysis.pipeline import AnalysisOptions
    from devmon_sync.analyze import rovers
    from devmon_sync.store import Mirror, queries

    with Mirror.open(mirror, read_only=True) as m:
        devices = [d for d in queries.gnss_devices(m) if d.epochs]
        inputs = rovers.store_inputs(m, devices)
        options = AnalysisOptions.build()
        took = []
        for _ in range(repeats + 1):
            t = time.process_time()
            for d in devices:
                rovers.analyze_device(m, d, options, inputs=inputs)
            took.append(time.process_time() - t)
    return len(devices), took[1:]


def numba_start_cpu(python: str, repeats: int) -> list[float]:
    """CPU s that numba adds to a process: one importing numba and calling a cached kernel
    (compiled into a temporary cache by a first, untimed run) less one of the same Python
    importing numpy alone (alternated)."""
    python = os.path.abspath(python)  # not resolved: a venv's python is a link
    with tempfile.TemporaryDirectory() as tmp:
        Path(tmp, "kernel.py").write_text(textwrap.dedent(NUMBA_KERNEL))
        Path(tmp, "start.py").write_text(textwrap.dedent(NUMBA_START))
        Path(tmp, "numpy_only.py").write_text(textwrap.dedent(NUMPY_START))
        child_cpu([python, "start.py"], cwd=Path(tmp))  # compiles, fills the cache
        return [child_cpu([python, "start.py"], cwd=Path(tmp))
                - child_cpu([python, "numpy_only.py"], cwd=Path(tmp)) for _ in range(repeats)]


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--repeats", type=int, default=5)
    parser.add_argument("--numba-python", help="a Python with numba (optional)")
    args = parser.parse_args()
    from bench_analyze_trees import world_mirror

    mirror = world_mirror(500, 62)
    jobs1, worker, analysed = [], [], []
    with tempfile.TemporaryDirectory() as tmp:
        copy = Path(tmp, "world.duckdb")
        copy.write_bytes(mirror.read_bytes())
        command = [sys.executable, "-m", "devmon_sync", "analyze", "--db", str(copy)]
        for _ in range(args.repeats):  # alternated: the machine's pace drifts
            n, passes = analysis_cpu(copy, 1)
            analysed += passes
            jobs1.append(child_cpu(command + ["--jobs", "1"]))
            worker.append(child_cpu([sys.executable, "-c", WORKER_START, str(copy)]))
    per_rover = statistics.median(analysed) / n
    fixed = statistics.median(j - a for j, a in zip(jobs1, analysed))
    start = statistics.median(worker)
    print(f"The 500-device, 62-day world: {n} rovers.  Analysis now: {per_rover * 1e3:.1f} ms "
          f"of CPU a rover (in-process; {', '.join(f'{a / n * 1e3:.1f}' for a in analysed)}).")
    print(f"`devmon analyze --jobs 1`: CPU {', '.join(f'{c:.2f}' for c in jobs1)} s; its "
          f"fixed part (less the same run's analysis) median {fixed:.2f} s.")
    print(f"A pool worker's start: CPU median {start:.2f} s "
          f"({', '.join(f'{c:.2f}' for c in worker)}).")
    budget = CORES * n / GOAL_ROVERS_PER_S
    rows = [("numpy (today)", 0.0)]
    if args.numba_python:
        nb = numba_start_cpu(args.numba_python, args.repeats)
        print(f"numba's own start in a process (import + first cached kernel, less "
              f"numpy's): CPU median {statistics.median(nb):.2f} s "
              f"({', '.join(f'{c:.2f}' for c in nb)}).")
        rows.append(("with a numba kernel", statistics.median(nb)))
    print(f"\n{GOAL_ROVERS_PER_S:.0f} rovers/s on {CORES} cores: {n} rovers in "
          f"{n / GOAL_ROVERS_PER_S:.2f} s, at most {budget:.2f} CPU s in all.")
    for label, extra in rows:
        left = budget - fixed - (CORES - 1) * start - CORES * extra
        print(f"  {label}: the analysis may cost at most {left / n * 1e3:.1f} ms a rover "
              f"(now {per_rover * 1e3:.1f}: {per_rover / max(left / n, 1e-9):.2f}x too much)")
        many = CORES * MANY_GOAL_S - (CORES - 1) * start - CORES * extra
        print(f"  {label}: {MANY_ROVERS:,} rovers in {MANY_GOAL_S:.0f} s (simulated, in a "
              f"script): at most {many / MANY_ROVERS * 1e3:.1f} ms a rover, its generation "
              f"included")


if __name__ == "__main__":
    main()

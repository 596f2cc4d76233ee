#!/usr/bin/env python3
"""Rover analysis of this tree against another checkout (an earlier commit in a git worktree),
on the same mirror, alternated in the same run: CPU seconds per pass and whether the two
give the same numbers.

Each measurement is a fresh child process that imports one tree (``PYTHONPATH``), opens the
mirror read-only, analyses every GNSS rover once untimed (imports, caches), then ``--passes``
times timed (``time.process_time``: CPU, not wall, so a busy machine disturbs it less), and
prints the CPU per pass and a digest of every rover's summary numbers.  Trees alternate,
``--repeat`` times each; min and median are printed, and the ratio of the medians.

    git worktree add ../before <commit>
    python benchmarks/bench_analysis_trees.py --other ../before --mirror devmon-demo/mirror.duckdb

``--real DIR`` also compares the two trees' velocity estimators on the real daily series of
``DIR`` (``../shared/reference-data``: PBO P156, NGL LHAS): OLS and MIDAS velocities with
their sigmas, acceleration, and 90-day sliding velocities, as the largest relative difference.
"""

from __future__ import annotations

import argparse
import statistics
import sys
from pathlib import Path

from _common import run_in_tree

HERE = Path(__file__).resolve().parents[1]

CHILD = r"""
import hashlib, json, sys, time
from analysis.pipeline import AnalysisOptions
from devmon_sync.store import Mirror, queries
try:
    from devmon_sync.analyze.rovers import analyze_device
except ImportError:  # a tree from before devmon_sync/analyze/ (issue 26)
    from devmon_sync.analyze import analyze_device
mirror = Mirror.open(sys.argv[1], read_only=True)
rovers = [d for d in queries.gnss_devices(mirror) if d.epochs]
options = AnalysisOptions()
def run():
    return [analyze_device(mirror, d, options) for d in rovers]
first = run()
start = time.process_time()
for _ in range(int(sys.argv[2])):
    run()
cpu = (time.process_time() - start) / int(sys.argv[2])
digest = hashlib.sha256(json.dumps([r.summary() for r in first], sort_keys=True,
                                   default=str).encode()).hexdigest()[:16]
print(json.dumps({"cpu_s": cpu, "rovers": len(rovers), "digest": digest}))
"""


REAL = r"""
import json, sys
from pathlib import Path
import numpy as np
from analysis import formats, trends
out = {}
for path in sorted(Path(sys.argv[1]).iterdir()):
    if path.suffix not in (".pos", ".tenv3"):
        continue
    d = formats.read_pbo_pos(path) if path.suffix == ".pos" else formats.read_tenv3(path)
    for k in (("de", "dn", "du") if "de" in d else ("e", "n", "u")):
        o = trends.ols_velocity(d["t"], d[k], annual=True, semiannual=True)
        m = trends.midas_velocity(d["t"], d[k])
        a = trends.acceleration(d["t"], d[k])
        s = trends.sliding_velocity(d["t"], d[k], window_days=90.0, method="ols")
        out[f"{path.stem}.{k}"] = [o.velocity_m_per_yr, o.sigma_m_per_yr, m.velocity_m_per_yr,
                                   m.sigma_m_per_yr, a.acceleration_m_per_yr2, a.sigma_m_per_yr2,
                                   *s.velocity_m_per_yr.tolist(), *s.sigma_m_per_yr.tolist()]
print(json.dumps(out))
"""


def real_series(tree: Path, folder: Path) -> dict:
    return run_in_tree(tree, REAL, str(folder))


def largest_difference(a: dict, b: dict) -> tuple[float, str]:
    """The largest relative difference of two trees' numbers, and the series it is on."""
    import numpy as np

    worst = (0.0, "")
    for name in a:
        x, y = np.array(a[name], float), np.array(b[name], float)
        both = np.isfinite(x) & np.isfinite(y)
        assert np.array_equal(np.isfinite(x), np.isfinite(y)), f"{name}: NaNs differ"
        rel = np.abs(x - y)[both] / np.maximum(np.maximum(np.abs(x), np.abs(y))[both], 1e-300)
        if rel.size and rel.max() > worst[0]:
            worst = (float(rel.max()), name)
    return worst


def measure(tree: Path, mirror: Path, passes: int) -> dict:
    return run_in_tree(tree, CHILD, str(mirror), str(passes))


def main() -> int:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--other", type=Path, required=True, help="the other checkout")
    p.add_argument("--mirror", type=Path, required=True, help="a synced mirror")
    p.add_argument("--passes", type=int, default=3, help="timed passes per measurement")
    p.add_argument("--repeat", type=int, default=5, help="measurements per tree")
    p.add_argument("--real", type=Path, help="a folder of real daily series (.pos, .tenv3)")
    args = p.parse_args()
    trees = {"this tree": HERE, "other": args.other.resolve()}
    cpu = {name: [] for name in trees}
    digests = {}
    for _ in range(args.repeat):
        for name, tree in trees.items():
            r = measure(tree, args.mirror.resolve(), args.passes)
            cpu[name].append(r["cpu_s"])
            digests[name] = (r["digest"], r["rovers"])
    for name in trees:
        print(f"{name:10s} {digests[name][1]} rovers: CPU per pass min {min(cpu[name]):.3f} s, "
              f"median {statistics.median(cpu[name]):.3f} s (summary digest {digests[name][0]})")
    ratio = statistics.median(cpu["this tree"]) / statistics.median(cpu["other"])
    same = digests["this tree"][0] == digests["other"][0]
    print(f"this tree / other: {ratio:.2f}x CPU; summaries {'identical' if same else 'DIFFER'}")
    if args.real:
        ours = real_series(HERE, args.real.resolve())
        theirs = real_series(args.other.resolve(), args.real.resolve())
        worst, where = largest_difference(ours, theirs)
        print(f"real series ({', '.join(sorted(ours))}): velocities, sigmas, accelerations and "
              f"90-day sliding velocities differ by at most {worst:.1e} relative ({where})")
    return 0


if __name__ == "__main__":
    sys.exit(main())

#!/usr/bin/env python3
"""A report's drawing CPU, this tree against another checkout (an earlier commit in a git
worktree), on the same mirror, alternated in the same run.

Each measurement is a fresh child process importing one tree (``PYTHONPATH``): it builds the
report of every rover of the mirror as ``devmon demo`` does (fixed creation time), then
draws it with its PNG figures in this process (``write_report(..., jobs=1)``), timed with
``time.process_time`` (CPU, so a busy machine disturbs it less).  Printed per run: CPU
seconds, pages, a digest of the PDF's words (``pdftotext``) and of the PNGs' pixels, so a
change that should not move a pixel is seen not to; then the ratio of the medians.

    python -m devmon_sync demo                       # writes devmon-demo/mirror.duckdb
    git worktree add --detach ../before <commit>
    python benchmarks/bench_report_trees.py --other ../before --mirror devmon-demo/mirror.duckdb
"""

from __future__ import annotations

import argparse
import statistics
import sys
from pathlib import Path

from _common import run_in_tree

HERE = Path(__file__).resolve().parents[1]

CHILD = r"""
import hashlib, json, subprocess, sys, tempfile, time
from datetime import datetime, timezone
from pathlib import Path
import numpy as np
from PIL import Image
from devmon_sync.report import ReportOptions, build_report, write_report
from devmon_sync.store import Mirror, queries
now = datetime(2026, 11, 1, 12, tzinfo=timezone.utc)
with Mirror.open(sys.argv[1], read_only=True) as mirror:
    rovers = tuple(d.serial_number for d in queries.gnss_devices(mirror) if d.epochs)
    data = build_report(mirror, ReportOptions(devices=rovers, title="devmon demo",
                                              command_line="devmon demo"), now=now)
with tempfile.TemporaryDirectory() as folder:
    start = time.process_time()
    result = write_report(data, Path(folder) / "r.pdf", png_dir=Path(folder) / "png", jobs=1)
    cpu = time.process_time() - start
    words = subprocess.run(["pdftotext", "-layout", str(result.path), "-"],
                           capture_output=True, check=True).stdout
    pixels = hashlib.sha256()
    for png in result.png_paths:
        pixels.update(np.asarray(Image.open(png)).tobytes())
print(json.dumps({"cpu_s": cpu, "pages": result.pages, "pngs": len(result.png_paths),
                  "words": hashlib.sha256(words).hexdigest()[:12],
                  "pixels": pixels.hexdigest()[:12]}))
"""


def measure(tree: Path, mirror: Path) -> dict:
    return run_in_tree(tree, CHILD, str(mirror.resolve()))


def main() -> int:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--other", type=Path, required=True, help="the other checkout")
    p.add_argument("--mirror", type=Path, required=True, help="a synced mirror")
    p.add_argument("--repeat", type=int, default=3, help="measurements per tree")
    args = p.parse_args()
    trees = {"this": HERE, "other": args.other.resolve()}
    runs: dict[str, list[dict]] = {name: [] for name in trees}
    for i in range(args.repeat):
        for name, tree in (trees.items() if i % 2 == 0 else reversed(trees.items())):
            r = measure(tree, args.mirror)
            runs[name].append(r)
            print(f"{name:5s} {r['cpu_s']:7.2f} CPU-s  {r['pages']} pages, {r['pngs']} PNGs,"
                  f" words {r['words']}, pixels {r['pixels']}", flush=True)
    median = {name: statistics.median(r["cpu_s"] for r in rs) for name, rs in runs.items()}
    print(f"median CPU: this {median['this']:.2f} s, other {median['other']:.2f} s, "
          f"ratio {median['this'] / median['other']:.3f}")
    same = {(r["words"], r["pixels"]) for rs in runs.values() for r in rs}
    print("same words and pixels in every run" if len(same) == 1
          else f"DIFFERENT outputs: {sorted(same)}")
    return 0


if __name__ == "__main__":
    sys.exit(main())

#!/usr/bin/env python3
"""Each report page drawn once, not twice: ``render.settle_layout`` against matplotlib's
own way (a figure with a layout engine is drawn a whole time to place it before the real
draw).

The demo world's largest site (the world ``devmon demo`` syncs: 6 sites, 48 devices, 90
days, seed 42; synced in-process, or ``--mirror``, kept) is reported once, then its pages
are drawn into a PDF in this process with the layout settled and with
``settle_layout`` switched off, alternated ``--repeat`` times.  Printed: pages, CPU seconds
(``time.process_time``: less sensitive than wall time to the other work of a shared
machine) each way per run, the ratio of the medians, and whether the two PDFs hold the
same words.

    python benchmarks/bench_report_layout.py --repeat 3     # ~3 min
"""

from __future__ import annotations

import argparse
import os
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))
sys.path.insert(0, str(Path(__file__).resolve().parent))

from _common import sync_world  # noqa: E402

from devmon_sync.report import ReportOptions, build_report, render  # noqa: E402
from devmon_sync.server import WorldSize  # noqa: E402
from devmon_sync.store import Mirror, queries  # noqa: E402

DEMO_WORLD = WorldSize(sites=6, devices=48, days=90)


def largest_site(path: Path) -> str:
    """The uuid of the site with the most rovers with epochs."""
    with Mirror.open(path, read_only=True) as m:
        sites = [d.site_uuid for d in queries.gnss_devices(m) if d.epochs]
    return max(set(sites), key=sites.count)


def arguments(name: str, doc: str) -> argparse.Namespace:
    """``--repeat`` and ``--mirror`` of a demo-site report benchmark, its header printed."""
    ap = argparse.ArgumentParser(description=doc.split("\n\n")[0])
    ap.add_argument("--repeat", type=int, default=3)
    ap.add_argument("--mirror", type=Path, help="keep (or reuse) the synced mirror here")
    args = ap.parse_args()
    print(f"{name}: {os.cpu_count()} cores; load average "
          f"{'/'.join(f'{x:.1f}' for x in os.getloadavg())}")
    return args


def demo_site_report(mirror: Path | None, tmp: str):
    """The report data of the demo world's largest site, from ``mirror`` (synced there
    first when it does not exist; a temporary one when None)."""
    path = mirror or Path(tmp) / "demo.duckdb"
    if not path.exists():
        took, _ = sync_world(path, DEMO_WORLD)
        print(f"synced the demo world in {took:.0f} s")
    with Mirror.open(path, read_only=True) as m:
        return build_report(m, ReportOptions(site=largest_site(path)), jobs=1)


def drawn(data, out: Path, settle: bool) -> float:
    """CPU seconds to draw the report into ``out`` with the layout settled or not."""
    real = render.settle_layout
    render.settle_layout = real if settle else (lambda fig: None)
    try:
        start = time.process_time()
        render.write_report(data, out, jobs=1)
        return time.process_time() - start
    finally:
        render.settle_layout = real


def pdf_text(path: Path) -> str:
    try:
        return subprocess.run(["pdftotext", str(path), "-"], capture_output=True, text=True,
                              check=True).stdout
    except (OSError, subprocess.CalledProcessError):
        return "(pdftotext not installed)"


def main() -> None:
    args = arguments("bench_report_layout", __doc__)
    with tempfile.TemporaryDirectory() as tmp:
        data = demo_site_report(args.mirror, tmp)
        once, twice = [], []
        for i in range(args.repeat):
            once.append(drawn(data, Path(tmp) / "once.pdf", True))
            twice.append(drawn(data, Path(tmp) / "twice.pdf", False))
            print(f"run {i + 1}: settled {once[-1]:.1f} s CPU, matplotlib's way "
                  f"{twice[-1]:.1f} s CPU")
        pages = render.write_report(data, Path(tmp) / "once.pdf", jobs=1).pages
        # the same words (their order in the text layer follows positions, which move by
        # fractions of a point: the layout is measured by another renderer)
        same = sorted(pdf_text(Path(tmp) / "once.pdf").split()) == \
            sorted(pdf_text(Path(tmp) / "twice.pdf").split())
        print(f"{pages} pages: median {statistics.median(once):.1f} s settled, "
              f"{statistics.median(twice):.1f} s matplotlib's way: "
              f"{statistics.median(once) / statistics.median(twice):.2f}x the CPU; "
              f"same words: {'yes' if same else 'NO'}")


if __name__ == "__main__":
    main()

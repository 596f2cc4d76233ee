#!/usr/bin/env python3
"""Drawing a report's pages in this process against worker processes (``devmon report
--jobs``; ``devmon_sync.report.render``).

Drawing is most of a report's time: the pages are matplotlib figures saved as vector PDF.
A reference-server world (300 devices, 60 days: 43 GNSS rovers on its largest site) is
synced in-process into a temporary mirror (or ``--mirror``, kept), the report data of the
site's first 2, 4, 8, 16 and all rovers is built once, then drawn with ``jobs=1`` (this
process) and on 2 workers (the pool forced even below ``MIN_PAGES_PER_WORKER``),
alternated and repeated.  Printed per report: pages, seconds (min of ``--repeat``) each way,
their ratio, whether the two files are the same bytes, and the file size against a single
part (the fonts each part embeds): where the pool starts to pay is what
``MIN_PAGES_PER_WORKER`` encodes.

    python benchmarks/bench_report_pages.py            # ~4 min
    python benchmarks/bench_report_pages.py --quick    # 2, 4, 8 rovers; ~1 min
"""

from __future__ import annotations

import argparse
import os
import platform
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


def site_rovers(path: Path) -> list[str]:
    """Serial numbers of the rovers with epochs on the site that has the most."""
    with Mirror.open(path, read_only=True) as m:
        rovers = [d for d in queries.gnss_devices(m) if d.epochs]
    by_site: dict[str, list[str]] = {}
    for d in rovers:
        by_site.setdefault(d.site_uuid, []).append(d.serial_number)
    return max(by_site.values(), key=len)


def timed_write(data, out: Path, jobs: int) -> float:
    start = time.perf_counter()
    render.write_report(data, out, jobs=jobs)
    return time.perf_counter() - start


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--quick", action="store_true")
    ap.add_argument("--repeat", type=int, default=2)
    ap.add_argument("--mirror", type=Path, help="keep (or reuse) the synced mirror here")
    args = ap.parse_args()
    print(f"bench_report_pages: {platform.machine()} {platform.system()}, {os.cpu_count()} "
          f"cores, Python {platform.python_version()}; load average "
          f"{'/'.join(f'{x:.1f}' for x in os.getloadavg())}")
    with tempfile.TemporaryDirectory() as tmp:
        path = args.mirror or Path(tmp) / "world-300.duckdb"
        if not path.exists():
            took, _ = sync_world(path, WorldSize(sites=6, devices=300, days=60))
            print(f"synced {path.name} in {took:.0f} s")
        serials = site_rovers(path)
        sizes = [2, 4, 8] if args.quick else [2, 4, 8, 16, len(serials)]
        render.MIN_PAGES_PER_WORKER = 1  # the pool whenever jobs allows: find the break-even
        print(f"{'rovers':>6} {'pages':>6} {'here s':>8} {'2 workers s':>12} "
              f"{'here/pool':>10} {'same bytes':>11} {'size MB':>8} {'one part MB':>12}")
        for n in sizes:
            with Mirror.open(path, read_only=True) as m:
                data = build_report(m, ReportOptions(devices=tuple(serials[:n])))
            here, pool = [], []
            for _ in range(args.repeat):
                here.append(timed_write(data, Path(tmp) / "here.pdf", 1))
                pool.append(timed_write(data, Path(tmp) / "pool.pdf", 2))
            same = (Path(tmp) / "here.pdf").read_bytes() == (Path(tmp) / "pool.pdf").read_bytes()
            saved, render.PAGES_PER_PART = render.PAGES_PER_PART, 10**9
            pages = render.write_report(data, Path(tmp) / "one.pdf", jobs=1).pages
            render.PAGES_PER_PART = saved
            size = (Path(tmp) / "here.pdf").stat().st_size / 1e6
            one = (Path(tmp) / "one.pdf").stat().st_size / 1e6
            print(f"{n:6d} {pages:6d} {min(here):8.2f} {min(pool):12.2f} "
                  f"{min(here) / min(pool):9.2f}x {'yes' if same else 'NO':>11} "
                  f"{size:8.2f} {one:12.2f}")
    print(f"(the report uses workers from {2 * 16} pages on 2 cores: "
          f"render.MIN_PAGES_PER_WORKER = 16; parts of render.PAGES_PER_PART = "
          f"{render.PAGES_PER_PART} pages)")


if __name__ == "__main__":
    main()

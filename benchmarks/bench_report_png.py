#!/usr/bin/env python3
"""A report's PNG figures drawn once and cropped by their pixels (``report/png.py``)
against matplotlib's ``bbox_inches="tight"`` (every artist measured at the PNG's resolution,
then the figure drawn).

The demo world's largest site (the world ``devmon demo`` syncs: 6 sites, 48 devices, 90
days, seed 42; synced in-process, or ``--mirror``, kept) is reported once and its pages
built; each page that has a PNG is then written both ways at the default resolution,
alternated, ``--repeat`` times.  Printed: PNGs, CPU seconds (``time.process_time``) each
way per run, the ratio of the medians, and how far the two crops differ (pixels).

    python benchmarks/bench_report_png.py --repeat 3     # ~4 min with the sync
"""

from __future__ import annotations

import statistics
import sys
import tempfile
import time
from pathlib import Path

import matplotlib
from PIL import Image

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))
sys.path.insert(0, str(Path(__file__).resolve().parent))

from bench_report_layout import arguments, demo_site_report  # noqa: E402

from devmon_sync.report import layout, render  # noqa: E402
from devmon_sync.report.model import utc_text  # noqa: E402
from devmon_sync.report.pages import plan_pages  # noqa: E402
from devmon_sync.report.png import PAD_IN, write_png  # noqa: E402
from devmon_sync.report.resolution import PNG_DPI  # noqa: E402


def figures(data) -> list:
    """Every page that has a PNG, built and laid out, its header and footer hidden."""
    specs = plan_pages(data)
    chrome = layout.Chrome(data.footer_title, utc_text(data.generated_at), len(specs))
    out = []
    with matplotlib.rc_context(render.RC):
        for page, spec in enumerate(specs, 1):
            if spec.png_name:
                fig, heading = spec.draw()
                for artist in chrome.draw(fig, page, spec.label, heading):
                    artist.set_visible(False)
                render.settle_layout(fig)
                out.append((spec.png_name, fig))
    return out


def tight(fig, path: Path) -> None:
    fig.savefig(path, format="png", dpi=PNG_DPI, bbox_inches="tight", pad_inches=PAD_IN,
                facecolor="white")


def timed(pages, folder: Path, write) -> float:
    folder.mkdir(exist_ok=True)
    start = time.process_time()
    with matplotlib.rc_context(render.RC):
        for name, fig in pages:
            write(fig, folder / name)
    return time.process_time() - start


def main() -> None:
    args = arguments("bench_report_png", __doc__)
    with tempfile.TemporaryDirectory() as tmp:
        pages = figures(demo_site_report(args.mirror, tmp))
        cropped, matplotlibs = [], []
        for i in range(args.repeat):
            cropped.append(timed(pages, Path(tmp) / "cropped",
                                 lambda fig, p: write_png(fig, p, PNG_DPI)))
            matplotlibs.append(timed(pages, Path(tmp) / "tight", tight))
            print(f"run {i + 1}: cropped by pixels {cropped[-1]:.1f} s CPU, "
                  f"bbox_inches='tight' {matplotlibs[-1]:.1f} s CPU")
        sizes = []
        for name, _ in pages:
            with Image.open(Path(tmp) / "cropped" / name) as a, \
                    Image.open(Path(tmp) / "tight" / name) as b:
                sizes.append(max(abs(a.width - b.width), abs(a.height - b.height)))
        print(f"{len(pages)} PNGs at {PNG_DPI} dpi: median {statistics.median(cropped):.1f} s "
              f"cropped, {statistics.median(matplotlibs):.1f} s tight: "
              f"{statistics.median(cropped) / statistics.median(matplotlibs):.2f}x the CPU; "
              f"sizes differ by at most {max(sizes)} px")


if __name__ == "__main__":
    main()

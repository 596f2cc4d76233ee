#!/usr/bin/env python3
"""Laying out a crowded plan's labels: the GUI draws its plan again on every zoom, pan and
resize, and ``analysis.plan_layout.PlanLayout`` places every label at each draw.

A synthetic 40-rover site (``tests/test_plan_labels_30._crowded_site``: 900 m across, 2-30 mm
in all directions, six close pairs, long names) drawn at the GNSS tab's pane size (6.9 x 5.6
in, 100 dpi) with this tree's ``analysis.plan_figure`` and with the one of ``--against``
(a git revision, its module read with ``git show``), alternated ``--repeat`` times.  Printed:
CPU seconds (``time.process_time``) per redraw each way, the ratio of the medians, and how
many labels each placed off the axes or over another label.

    python benchmarks/bench_plan_labels.py --against 8c86bb5 --repeat 5    # ~1 min
"""

from __future__ import annotations

import argparse
import importlib.util
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))
sys.path.insert(0, str(ROOT / "tests"))

from matplotlib.backends.backend_agg import FigureCanvasAgg  # noqa: E402
from matplotlib.text import Text  # noqa: E402

from analysis import plan_figure  # noqa: E402
from test_plan_labels_30 import GUI_PANE_IN, _crowded_site  # noqa: E402


def module_at(revision: str):
    """``analysis.plan_figure`` as it was at ``revision``."""
    source = subprocess.run(["git", "show", f"{revision}:analysis/plan_figure.py"], cwd=ROOT,
                            check=True, capture_output=True, text=True).stdout
    path = Path(tempfile.mkdtemp()) / "plan_figure_then.py"
    path.write_text(source)
    spec = importlib.util.spec_from_file_location("plan_figure_then", path)
    module = importlib.util.module_from_spec(spec)
    sys.modules[spec.name] = module  # its dataclasses look their module up
    spec.loader.exec_module(module)
    return module


def drawn(module):
    points = [module.PlanPoint(**{k: getattr(p, k) for k in p.__dataclass_fields__})
              for p in _crowded_site(numbered=False)]
    fig = module.plan_view_figure(points, frame_label="CH1903+ / LV95")
    fig.set_size_inches(*GUI_PANE_IN)
    FigureCanvasAgg(fig)
    fig.canvas.draw()
    return fig


def redraw_cpu_s(fig) -> float:
    start = time.process_time()
    fig.canvas.draw()
    return time.process_time() - start


def faults(fig) -> tuple[int, int]:
    """(labels reaching off the axes, pairs of overlapping labels)."""
    renderer = fig.canvas.get_renderer()
    labels = fig.findobj(lambda a: str(a.get_gid() or "").startswith("label:"))
    boxes = [Text.get_window_extent(t, renderer) for t in labels]
    frame = labels[0].axes.bbox
    off = sum(not (frame.contains(b.x0, b.y0) and frame.contains(b.x1, b.y1)) for b in boxes)
    pairs = sum(a.overlaps(b) for i, a in enumerate(boxes) for b in boxes[i + 1:])
    return off, pairs


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--against", default="HEAD", help="git revision to compare with")
    parser.add_argument("--repeat", type=int, default=5)
    args = parser.parse_args()
    ways = {"this tree": plan_figure, args.against: module_at(args.against)}
    figs = {name: drawn(m) for name, m in ways.items()}
    times: dict[str, list[float]] = {name: [] for name in ways}
    for _ in range(args.repeat):
        for name, fig in figs.items():
            times[name].append(redraw_cpu_s(fig))
    for name, fig in figs.items():
        off, pairs = faults(fig)
        print(f"{name:>12}: median redraw {statistics.median(times[name]):.3f} CPU s "
              f"({', '.join(f'{t:.3f}' for t in times[name])}); labels off the axes: {off}, "
              f"overlapping pairs: {pairs}")
    then, now = (statistics.median(times[n]) for n in (args.against, "this tree"))
    print(f"ratio this tree / {args.against}: {now / then:.2f}")


if __name__ == "__main__":
    main()

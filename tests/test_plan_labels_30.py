"""Issue 30: a plan of a crowded site (40 rovers) keeps every label inside its axes, off the
other labels and off the other points, each one naming its own point (by its side or with a
leader line): where a full name does not fit, the label is shortened (the point number, or
the shortest distinctive end of the name) rather than run off the plot or onto a neighbour."""

from __future__ import annotations

import math

import numpy as np
import pytest
from matplotlib.backends.backend_agg import FigureCanvasAgg
from matplotlib.text import Text

from analysis import plan_figure as P

GUI_PANE_IN = (6.9, 5.6)  # the GNSS tab's plan at 1400x900 (100 dpi)


def _crowded_site(numbered: bool) -> list[P.PlanPoint]:
    """40 rovers scattered over a 900 m slope, 2-30 mm in all directions, some close pairs."""
    rng = np.random.default_rng(40)
    xy = rng.uniform(0.0, 900.0, size=(40, 2)) + [2614200.0, 1127400.0]
    xy[20:26] = xy[:6] + rng.uniform(-25.0, 25.0, size=(6, 2))  # pairs 20-50 m apart
    size = rng.uniform(2.0, 30.0, 40)
    bearing = rng.uniform(0.0, 2 * math.pi, 40)
    ids = rng.choice(np.arange(100, 200), 40, replace=False)
    return [P.PlanPoint(f"Illgraben GNSS rover {n}", x, y, s * math.sin(b), s * math.cos(b),
                        1.0, 0.8, 0.1, "alert" if s > 25 else None,
                        number=f"P{i + 1}" if numbered else None)
            for i, (n, (x, y), s, b) in enumerate(zip(ids, xy, size, bearing))]


def _labels(fig) -> dict[str, object]:
    return {a.get_gid().split(":", 1)[1]: a for a in fig.findobj(
        lambda a: str(a.get_gid() or "").startswith("label:"))}


@pytest.mark.parametrize("numbered", [True, False], ids=["numbered", "unnumbered"])
@pytest.mark.parametrize("figsize", [GUI_PANE_IN, (9.0, 8.0)], ids=["gui", "report"])
def test_a_crowded_plan_keeps_every_label_inside_clear_and_its_own(numbered, figsize):
    points = _crowded_site(numbered)
    fig = P.plan_view_figure(points, frame_label="CH1903+ / LV95", title="Illgraben slope")
    fig.set_size_inches(*figsize)
    FigureCanvasAgg(fig)
    fig.canvas.draw()
    renderer = fig.canvas.get_renderer()
    labels = _labels(fig)
    assert len(labels) == len(points)
    ax = labels[points[0].label].axes
    frame = ax.bbox
    at = ax.transData.transform([(p.easting_m, p.northing_m) for p in points])
    boxes = {name: Text.get_window_extent(t, renderer) for name, t in labels.items()}
    marker = 3.5 * fig.dpi / 72  # a point marker's radius
    for i, p in enumerate(points):
        text, box = labels[p.label].get_text(), boxes[p.label]
        # it names this point: its number, or the name or an end of it ("rover 123")
        short = p.label.split()[-2:]
        assert text in ({p.number, f"{p.number} {p.label}"} if numbered
                        else {p.label, " ".join(short)}), text
        assert frame.x0 <= box.x0 and box.x1 <= frame.x1, (p.label, "off the axes")
        assert frame.y0 <= box.y0 and box.y1 <= frame.y1, (p.label, "off the axes")
        for q, other in boxes.items():
            assert q == p.label or not box.overlaps(other), (p.label, q)
        for j, (x, y) in enumerate(at):
            covers = box.x0 - marker < x < box.x1 + marker and box.y0 - marker < y < box.y1 + marker
            assert j == i or not covers, (p.label, "covers", points[j].label)
        # by its own point, or joined to it
        own = at[i]
        gap = math.hypot(max(box.x0 - own[0], 0, own[0] - box.x1),
                         max(box.y0 - own[1], 0, own[1] - box.y1))
        leader = [a for a in fig.findobj(lambda a: a.get_gid() == f"leader:{p.label}")]
        assert gap <= 20 * fig.dpi / 72 or leader[0].get_visible(), (p.label, gap)
    shortened = sum(labels[p.label].get_text() != (f"{p.number} {p.label}" if numbered
                                                    else p.label) for p in points)
    assert shortened < len(points), "some full names fit on a 40-rover plan"

"""Issue 30, point 2: the demo's Illgraben plan in the GUI's figure pane named the wrong point
("Illgraben GNSS outliers 06" printed beside the red emergency dot of
gnss-accelerating-003).  The plan's points are the demo world's (``devmon demo``, seed 42:
what ``devmon_sync.analyze.site_plans`` placed for the GNSS tab), drawn by the report's
builder in a real ``FigurePane`` at the sizes the GNSS tab gives it; no mirror is synced, so
the test stays cheap."""

from __future__ import annotations

import pytest

from analysis.plan_figure import PlanPoint, plan_view_figure

pytest.importorskip("pytestqt")
pytestmark = pytest.mark.filterwarnings(
    r"ignore:Enum value 'Qt..ApplicationAttribute\.AA_UseHighDpiPixmaps':DeprecationWarning")

from PySide6.QtWidgets import QApplication
from qt_input import clipped_texts, unlinked_plan_labels

from gui.figure_pane import FigurePane

# (label, easting m, northing m, d east mm, d north mm, sigma east mm, sigma north mm,
#  correlation, level), the Illgraben plan of the demo mirror as the GNSS tab received it
DEMO_ILLGRABEN = (
    ("Illgraben GNSS creep 02", -134.87, -343.14, -3.10, -5.92, 0.747, 0.407, -0.378, None),
    ("Illgraben GNSS outliers 06", 123.84, 192.43, -1.03, 3.65, 0.534, 0.469, -0.367, None),
    ("Illgraben GNSS rover 24", -188.48, -34.90, -4.41, 1.62, 0.551, 0.502, 0.219, None),
    ("Illgraben GNSS rover 30", 300.71, -208.11, -0.79, 0.03, 0.555, 0.565, 0.216, None),
    ("Illgraben GNSS rover 39", 339.73, -162.91, 4.85, -3.03, 0.578, 0.534, 0.075, None),
    ("Illgraben GNSS rover 45", -126.04, -311.96, -0.42, -0.41, 0.434, 0.343, -0.086, None),
    ("Illgraben GNSS seasonal 04", -49.94, 277.68, 8.68, -1.76, 0.712, 0.550, -0.099, None),
    ("Illgraben GNSS stable 01", -203.83, 234.30, 1.38, 1.17, 0.601, 0.493, 0.160, None),
    ("Illgraben GNSS step 05", 192.39, 177.57, -0.82, 2.31, 0.676, 0.510, 0.018, None),
    ("gnss-accelerating-003", -253.49, 179.08, -70.80, -32.50, 0.551, 0.472, -0.487,
     "emergency"),
)
# the plan pane's size in the main window at its default 1400 x 900, and maximized on a
# 1920 x 1080 screen
PANE_SIZES = ((700, 745), (1220, 925))


@pytest.mark.parametrize("size", PANE_SIZES, ids=lambda s: f"{s[0]}x{s[1]}")
def test_each_label_of_the_demo_plan_is_by_its_own_point_or_joined_to_it(qtbot, size):
    figure = plan_view_figure([PlanPoint(*p) for p in DEMO_ILLGRABEN],
                              frame_label="local ENU",
                              axis_names=("east of the rovers' centroid",
                                          "north of the rovers' centroid"),
                              title="Illgraben slope: horizontal displacement")
    pane = FigurePane("")
    qtbot.addWidget(pane)
    pane.resize(*size)
    pane.show()
    pane.set_figure(figure)
    QApplication.processEvents()
    assert pane.canvas.width() > 0.8 * size[0]  # drawn at the pane's size
    assert unlinked_plan_labels(figure) == []


def _crowded_figure():
    """A figure as the builders make one (``new_figure``, ``figure_legend``), with a title
    and a legend made for a wider figure than it is drawn at."""
    from analysis.figure_style import figure_legend, new_figure

    figure = new_figure((10.0, 7.0))
    ax = figure.add_subplot()
    for i in range(7):
        ax.plot([0, 1], [i, i + 1], label=f"series {i}: a legend entry of some length")
    ax.set_title("a title of the kind the inverse velocity has, " * 4, loc="left")
    figure_legend(figure, [ax])
    figure.set_size_inches(6.5, 5.0)  # the size it is drawn at
    return figure


def test_a_settled_report_page_keeps_its_fitted_title_and_legend_inside():
    """The report settles a page's layout once and detaches its engine
    (``render.settle_layout``) before the page is drawn: the titles and the legend must be
    fitted with that layout, not afterwards, or a wrapped title and a taller legend would
    run over the axes and off the page."""
    from matplotlib.backends.backend_agg import FigureCanvasAgg

    from devmon_sync.report.render import settle_layout

    figure = _crowded_figure()
    FigureCanvasAgg(figure)
    settle_layout(figure)
    assert figure.get_layout_engine() is None
    figure.canvas.draw()
    assert clipped_texts(figure) == []
    legend = figure.legends[0].get_window_extent()
    axes = figure.axes[0].get_tightbbox()  # the tick labels and the x label too
    title = figure.axes[0]._left_title.get_window_extent()
    assert legend.y1 <= axes.y0 and title.y0 >= figure.axes[0].bbox.y1
    assert figure.axes[0]._left_title.get_text().count("\n") >= 2  # wrapped to fit

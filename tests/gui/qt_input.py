"""What the GUI tests share to drive the real widgets: real mouse, wheel and key input on
the window's browser, tab bars and matplotlib canvases and toolbars, finding drawn artists
by their gid, and measuring what a person reads on a figure (texts inside the canvas, each
plan label by its own point).  A plain module (not a conftest, not a test module), imported
by name from the GUI tests."""

from __future__ import annotations

import math

from PySide6.QtCore import QEvent, QPoint, QPointF, Qt
from PySide6.QtGui import QKeyEvent, QWheelEvent
from PySide6.QtTest import QTest
from PySide6.QtWidgets import QApplication, QTabWidget, QToolButton

from gui.browser import KEY_ROLE

WAIT_MS = 30000


# ----------------------------------------------------------------------------- the window

def open_mirror(qtbot, window, path, *, wait_idle: bool = False) -> None:
    """Open the mirror at ``path`` in the main window and wait until it is open; with
    ``wait_idle`` also until the window's reads after opening are done."""
    with qtbot.waitSignal(window.opened, timeout=WAIT_MS):
        assert window.open_file(str(path))
    if wait_idle:
        qtbot.waitUntil(lambda: not window.runner.busy(), timeout=WAIT_MS)


def click_tab(tabs: QTabWidget, title: str) -> None:
    """A real click on the tab bar's tab ``title``."""
    bar = tabs.tabBar()
    index = [tabs.tabText(i) for i in range(tabs.count())].index(title)
    QTest.mouseClick(bar, Qt.MouseButton.LeftButton, pos=bar.tabRect(index).center())
    assert tabs.currentIndex() == index


def click_tree_item(qtbot, window, key: str, groups: bool = False):
    """Click the row of ``key`` (serial number or uuid) in the browser's Sites (or Groups)
    tree, switching the browser's tab by a click on its tab bar first; returns the view
    and the row's rectangle."""
    browser = window.browser
    bar = browser.tabs.tabBar()
    QTest.mouseClick(bar, Qt.MouseButton.LeftButton, pos=bar.tabRect(int(groups)).center())
    model, proxy, view = ((browser.groups_model, browser.groups_proxy, browser.groups_view)
                          if groups else
                          (browser.sites_model, browser.sites_proxy, browser.sites_view))
    (match,) = model.match(model.index(0, 0), KEY_ROLE, key, 1,
                           Qt.MatchFlag.MatchRecursive | Qt.MatchFlag.MatchExactly)
    index = proxy.mapFromSource(match)
    view.scrollTo(index)
    rect = view.visualRect(index)
    assert rect.isValid(), "the row is not shown"
    QTest.mouseClick(view.viewport(), Qt.MouseButton.LeftButton, pos=rect.center())
    assert view.currentIndex() == index
    return view, rect


def open_site_health(qtbot, window, site_uuid: str, site_name: str):
    """Click the site in the browser's tree, wait for its Site health tab to be named, and
    click that tab: the Site health view."""
    click_tree_item(qtbot, window, site_uuid)
    title = f"Site health: {site_name}"
    qtbot.waitUntil(lambda: window.tabs.tabText(window.tabs.indexOf(window.health)) == title,
                    timeout=WAIT_MS)
    click_tab(window.tabs, title)
    return window.health


def show_tab(qtbot, view, title: str) -> None:
    """Show the tab ``title`` of a view's ``tabs`` (the GNSS view's figure tabs)."""
    index = [view.tabs.tabText(i) for i in range(view.tabs.count())].index(title)
    view.tabs.setCurrentIndex(index)
    qtbot.wait(50)


# ----------------------------------------------------------------------------- plots

def artists(figure, prefix: str) -> list:
    """The figure's artists whose gid starts with ``prefix``."""
    return [a for a in figure.findobj() if str(a.get_gid() or "").startswith(prefix)]


def button(toolbar, name: str) -> QToolButton:
    """The toolbar's button of a matplotlib tool ('zoom', 'pan', 'home', 'back')."""
    action = toolbar._actions[name]
    return toolbar.widgetForAction(action)


def data_point(canvas, ax, fx: float, fy: float) -> QPoint:
    """The widget position of the axes point at fractions (fx, fy) of its box (y up)."""
    box = ax.get_window_extent()
    ratio = canvas.device_pixel_ratio
    x = (box.x0 + fx * box.width) / ratio
    y = canvas.height() - (box.y0 + fy * box.height) / ratio
    return QPoint(int(x), int(y))


def drag(canvas, start: QPoint, end: QPoint, button=Qt.MouseButton.LeftButton) -> None:
    """A drag on the canvas: press, several moves as a hand makes them, release."""
    QTest.mousePress(canvas, button, Qt.KeyboardModifier.NoModifier, start)
    for k in range(1, 6):
        QTest.mouseMove(canvas, start + (end - start) * (k / 5))
    QTest.mouseRelease(canvas, button, Qt.KeyboardModifier.NoModifier, end)


def wheel(canvas, at: QPoint, steps: int = 1) -> None:
    """Wheel steps (positive: away from the user, i.e. zoom in) with the pointer at ``at``."""
    event = QWheelEvent(QPointF(at), QPointF(canvas.mapToGlobal(at)), QPoint(0, 0),
                        QPoint(0, 120 * steps), Qt.MouseButton.NoButton,
                        Qt.KeyboardModifier.NoModifier, Qt.ScrollPhase.NoScrollPhase, False)
    QApplication.sendEvent(canvas, event)


def post_key(widget, text: str) -> None:
    """A key press and release of ``text`` queued for ``widget``: the GUI thread's event loop
    delivers it (safe to call from any thread), as it delivers a key the user types."""
    key = Qt.Key(ord(text.upper()))
    for kind in (QEvent.Type.KeyPress, QEvent.Type.KeyRelease):
        QApplication.postEvent(widget, QKeyEvent(kind, key, Qt.KeyboardModifier.NoModifier,
                                                 text))


# ----------------------------------------------------------------------------- reading

def _drawn(figure):
    """The renderer of ``figure`` as last drawn on its canvas (drawn now if it changed
    since: a draw places the plan's labels and fits the legends)."""
    if figure.stale:
        figure.canvas.draw()
    return figure.canvas.get_renderer()


def clipped_texts(figure) -> list[tuple[str, tuple]]:
    """The legends and titles (figure and axes) of a drawn ``figure`` that reach outside its
    canvas, as (text, extent in pixels): what a person sees cut at the edge."""
    renderer = _drawn(figure)
    frame = figure.bbox
    items = [(" / ".join(t.get_text() for t in legend.get_texts()), legend)
             for legend in figure.legends]
    titles = [figure._suptitle] + [t for ax in figure.axes
                                   for t in (ax.title, ax._left_title, ax._right_title)]
    items += [(t.get_text(), t) for t in titles if t is not None and t.get_text()]
    out = []
    for text, artist in items:
        box = artist.get_window_extent(renderer)
        if box.x0 < frame.x0 - 0.5 or box.x1 > frame.x1 + 0.5 or \
                box.y0 < frame.y0 - 0.5 or box.y1 > frame.y1 + 0.5:
            out.append((text, tuple(round(v) for v in box.extents)))
    return out


def _box_distance(box, p) -> float:
    return math.hypot(max(box.x0 - p[0], 0.0, p[0] - box.x1),
                      max(box.y0 - p[1], 0.0, p[1] - box.y1))


def unlinked_plan_labels(figure, ratio: float = 2.0) -> list[tuple]:
    """The point labels of a drawn site plan a person could read as another point's: a label
    is linked to its point by a visible leader line that starts at the point and ends on the
    label, or else by nearness (every other point's marker at least ``ratio`` times as far
    from the label's box as its own point).  Returns (label, own distance, (nearest other
    distance, its name)) of the others, in pixels."""
    from matplotlib.text import Text

    renderer = _drawn(figure)
    gids = {str(a.get_gid()): a for a in figure.findobj() if a.get_gid()}
    markers = {g.split(":", 1)[1]: a for g, a in gids.items() if g.startswith("point:")}
    if not markers:
        return []
    ax = next(iter(markers.values())).axes
    at = {name: ax.transData.transform((m.get_xdata()[0], m.get_ydata()[0]))
          for name, m in markers.items()}
    marker_px = renderer.points_to_pixels(7.0)  # the leader starts by the marker
    out = []
    for name, p in at.items():
        box = Text.get_window_extent(gids[f"label:{name}"], renderer)
        own = _box_distance(box, p)
        leader = gids.get(f"leader:{name}")
        if leader is not None and leader.get_visible() and len(leader.get_xdata()) == 2:
            ends = ax.transData.transform(list(zip(leader.get_xdata(), leader.get_ydata())))
            if math.dist(ends[0], p) <= marker_px and _box_distance(box, ends[1]) <= 1.0:
                continue
        nearest = min(((_box_distance(box, q), other) for other, q in at.items()
                       if other != name), default=None)
        if nearest is not None and nearest[0] < ratio * own:
            out.append((name, round(own, 1), (round(nearest[0], 1), nearest[1])))
    return out

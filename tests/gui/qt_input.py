"""What the GUI tests share to drive the real widgets: real mouse and key input on the
window's browser, tab bars and matplotlib toolbars, and finding drawn artists by their gid.
A plain module (not a conftest, not a test module), imported by name from the GUI tests."""

from __future__ import annotations

from PySide6.QtCore import QPoint, Qt
from PySide6.QtTest import QTest
from PySide6.QtWidgets import QTabWidget, QToolButton

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

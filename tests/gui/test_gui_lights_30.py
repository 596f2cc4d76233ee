"""Issue 30 in the window: separate H and V lights (and 3D where set) per point in the
Overview, Site health, the Device tab and the GNSS rover list and table, coloured as the
plots colour a level, the value in words as tooltip (1); the level now in the Device tab
and the GNSS lists, Site health by severity then by name as people count, each row tinted
by its level, low battery flagged (7); a clear hint of what to do where a view has nothing
to show (12).

One small world synced once (2 sites, 12 devices, 60 days): horizontal and vertical levels
on three rovers and a 3D level on a fourth, chosen so that two rovers are at emergency by
their horizontal displacement (the demo's case: two at emergency), one of them at alarm
vertically, one below both, one with only a 3D light.  The truth is what
``analysis.alarms.direction_lights`` says of each rover.  Real widgets (offscreen), real
clicks, hovers and header clicks."""

from __future__ import annotations

import pytest

from analysis.alarms import direction_lights
from analysis.figure_style import level_colour
from analysis.pipeline import AnalysisOptions
from devmon_sync.analyze.alarm_history import evaluate_alarms
from devmon_sync.analyze.rovers import analyze_device
from devmon_sync.server import WorldSize
from devmon_sync.store import Mirror, browse, queries

from support import rovers_by_scenario, synced_mirror

pytest.importorskip("pytestqt")

from PySide6.QtCore import QPoint, Qt  # noqa: E402
from PySide6.QtTest import QTest  # noqa: E402
from PySide6.QtWidgets import QApplication, QFileDialog, QToolTip  # noqa: E402

from qt_input import click_tab, click_tree_item, open_mirror, open_site_health  # noqa: E402

WORLD = WorldSize(sites=2, devices=12, days=60)
WAIT_MS = 30000
# The accelerating rover ends 45.9 ± 1.6 mm horizontally and 17.3 ± 1.8 mm vertically from
# its reference, the seasonal one 6.6 ± 0.8 and 5.0 ± 1.8, the creeping one 3.9 ± 0.8 and
# 1.3 ± 2.1: judged at 99.9 % confidence, the first two are at emergency horizontally, the
# first at alarm vertically, the creeping one below both.
HORIZONTAL = {"alert": 2.0, "alarm": 3.0, "emergency": 3.5}
VERTICAL = {"alert": 4.0, "alarm": 8.0, "emergency": 30.0}
DIRECTIONS = ("H", "V", "3D")


@pytest.fixture(scope="module")
def mirror_path(tmp_path_factory):
    path = synced_mirror(tmp_path_factory.mktemp("lights") / "mirror.duckdb", WORLD)
    with Mirror.open(path) as m:
        rovers = rovers_by_scenario(queries.gnss_devices(m))
        for scenario in ("accelerating", "seasonal", "creep"):
            serial = rovers[scenario].serial_number
            queries.set_alarm_levels(m, serial, "displacement:horizontal", HORIZONTAL)
            queries.set_alarm_levels(m, serial, "displacement:vertical", VERTICAL)
        queries.set_alarm_levels(m, rovers["outliers"].serial_number, "displacement",
                                 {"alert": 100.0})
        evaluate_alarms(m)  # as `devmon alarms` does after setting levels
    return path


@pytest.fixture(scope="module")
def truth(mirror_path) -> dict:
    """The world's rovers by scenario, the points with levels as the store orders them, and
    each one's lights as the analysis gives them."""
    with Mirror.open(mirror_path, read_only=True) as m:
        rovers = rovers_by_scenario(queries.gnss_devices(m))
        points = browse.levelled_points(m)
        lights = {p.serial_number: direction_lights(analyze_device(
            m, queries.gnss_device(m, p.serial_number), AnalysisOptions()).alarm)
            for p in points}
        health = browse.site_health(m)
    return {"rovers": rovers, "points": points, "lights": lights, "health": health}


def open_lit(qtbot, window, db) -> None:
    """Open the mirror and wait until the window has shown every point's lights."""
    with qtbot.waitSignal(window.lights_shown, timeout=WAIT_MS):
        open_mirror(qtbot, window, db)


def headers_of(table) -> list[str]:
    return [table.horizontalHeaderItem(c).text() for c in range(table.columnCount())]


def word(key) -> str:
    """What a light's cell says: its level, "below" its levels, or "not set"."""
    if key is None:
        return "not set"
    return key.current_level or "below"


def colour_of(key) -> str:
    return level_colour(key.current_level, key.rank - 1).lower()


def test_the_world_has_the_case_the_tests_need(truth):
    lights, rovers = truth["lights"], truth["rovers"]
    acc, seasonal = (rovers[s].serial_number for s in ("accelerating", "seasonal"))
    assert [word(lights[acc][d]) for d in DIRECTIONS] == ["emergency", "alarm", "not set"]
    assert [word(lights[seasonal][d]) for d in DIRECTIONS] == ["emergency", "below", "not set"]
    creep, outliers = (rovers[s].serial_number for s in ("creep", "outliers"))
    assert [word(lights[creep][d]) for d in DIRECTIONS] == ["below", "below", "not set"]
    assert [word(lights[outliers][d]) for d in DIRECTIONS] == ["not set", "not set", "below"]
    assert rovers["stable"].serial_number not in lights  # no level of any direction


def test_natural_order_counts_numbers_as_people_do():
    names = ["P10", "p2", "P1", "Rover 10b", "Rover 9", "rover 10a"]
    assert sorted(names, key=browse.natural_key) == ["P1", "p2", "P10", "Rover 9", "rover 10a",
                                                     "Rover 10b"]


def test_every_view_shows_the_level_now_and_separate_h_and_v_lights(qtbot, window, db,
                                                                      truth):
    """One window opened once (a test is cheap), then each view as a person goes through
    them: the Overview, a site's health, the Device tab, the GNSS tab."""
    open_lit(qtbot, window, db)
    overview_shows_each_points_lights(qtbot, window, truth)
    site_health_puts_emergencies_first_tinted_with_lights_and_low_batteries(qtbot, window,
                                                                             truth)
    device_tab_shows_the_level_now_its_lights_and_a_low_battery(qtbot, window, truth)
    gnss_rover_list_and_table_show_the_level_now_and_the_lights(qtbot, window, truth)


def overview_shows_each_points_lights(qtbot, window, truth) -> None:
    """The user's report: one worst level per point, never separate H and V lights."""
    points, lights, rovers = truth["points"], truth["lights"], truth["rovers"]
    click_tab(window.tabs, "Overview")
    table = window.overview_view.points
    headers = headers_of(table)
    assert table.isVisible() and {"H", "V", "3D"} <= set(headers)
    assert not table.isColumnHidden(headers.index("3D"))  # a point has a 3D level
    names = [table.item(r, headers.index("Point")).text() for r in range(table.rowCount())]
    assert names == [p.display_name for p in points]
    assert names[:2] == sorted([rovers["accelerating"].display_name,
                                rovers["seasonal"].display_name], key=browse.natural_key)
    for row, point in enumerate(points):
        for direction in DIRECTIONS:
            key = lights[point.serial_number][direction]
            cell = table.item(row, headers.index(direction))
            assert cell.text() == word(key), (point.display_name, direction)
            if key is None:  # not "ok": no level of that direction is set
                words = {"H": "horizontal", "V": "vertical", "3D": "3D"}[direction]
                assert cell.toolTip().startswith(f"No {words} alarm level is set"), \
                    cell.toolTip()
                continue
            assert cell.toolTip() == key.words()
            if key.current_level:
                assert cell.background().color().name() == colour_of(key)
    acc_row = names.index(rovers["accelerating"].display_name)
    cell = table.item(acc_row, headers.index("V"))
    rect = table.visualItemRect(cell)
    QTest.mouseMove(table.viewport(), rect.center())  # a person hovers the light
    qtbot.waitUntil(QToolTip.isVisible, timeout=5000)
    assert QToolTip.text() == lights[rovers["accelerating"].serial_number]["V"].words()
    assert "vertical displacement 17.3" in QToolTip.text()


def site_health_puts_emergencies_first_tinted_with_lights_and_low_batteries(
        qtbot, window, truth) -> None:
    """The user's report: Site health sorted Z→A, its emergency row not tinted, low battery
    not flagged."""
    rovers, lights = truth["rovers"], truth["lights"]
    acc = rovers["accelerating"]
    view = open_site_health(qtbot, window, acc.site_uuid, acc.site_name)
    headers = [view.model_.headerData(c, Qt.Orientation.Horizontal).split("\n")[0]
               for c in range(view.model_.columnCount())]

    def shown(column: str) -> list[str]:
        c = headers.index(column)
        return [view.proxy.index(r, c).data() for r in range(view.proxy.rowCount())]

    names = shown("Device")
    emergencies = sorted([acc.display_name, rovers["seasonal"].display_name],
                         key=browse.natural_key)
    assert names[:2] == emergencies, names
    assert names[2:] == sorted(names[2:], key=browse.natural_key)
    assert shown("Alarm level")[:2] == ["emergency", "emergency"]
    tint = view.proxy.index(0, headers.index("Device")).data(Qt.ItemDataRole.BackgroundRole)
    assert tint is not None and tint.color().name() == level_colour("emergency", 2).lower()
    plain = view.proxy.index(len(names) - 1, headers.index("Device")).data(
        Qt.ItemDataRole.BackgroundRole)
    assert plain is None or plain.style() == Qt.BrushStyle.NoBrush  # at no level: not tinted
    by_name = dict(zip(names, range(len(names))))
    for scenario in ("accelerating", "seasonal", "creep", "outliers"):
        device = rovers[scenario]
        for direction in DIRECTIONS:
            index = view.proxy.index(by_name[device.display_name], headers.index(direction))
            key = lights[device.serial_number][direction]
            assert index.data() == word(key), (scenario, direction)
            if key is not None:
                assert index.data(Qt.ItemDataRole.ToolTipRole) == key.words()
    battery = headers.index("Battery")
    pct = dict(zip(truth["health"].column("display_name"),
                   truth["health"].column("battery_pct")))
    low = [n for n in names if pct[n] is not None and pct[n] < 20]
    assert low, "the world has devices under 20 %"
    for name in names:
        index = view.proxy.index(by_name[name], battery)
        flagged = "low" in index.data()
        assert flagged == (name in low), (name, index.data())
        if flagged:
            assert "20 %" in index.data(Qt.ItemDataRole.ToolTipRole)
    # a person hovering the V light's header reads what the light says
    header = view.horizontalHeader()
    column = headers.index("V")
    QTest.mouseMove(header.viewport(), QPoint(
        header.sectionViewportPosition(column) + header.sectionSize(column) // 2,
        header.height() // 2))
    qtbot.waitUntil(QToolTip.isVisible, timeout=5000)
    assert QToolTip.text().startswith("The vertical light of a rover"), QToolTip.text()
    QToolTip.hideText()
    # a click on the Device header sorts by name as people count, and back
    column = headers.index("Device")
    centre = QPoint(header.sectionViewportPosition(column) + header.sectionSize(column) // 2,
                    header.height() // 2)
    QTest.mouseClick(header.viewport(), Qt.MouseButton.LeftButton, pos=centre)
    names = shown("Device")
    assert names in (sorted(names, key=browse.natural_key),
                     sorted(names, key=browse.natural_key, reverse=True))


def device_tab_shows_the_level_now_its_lights_and_a_low_battery(qtbot, window,
                                                                truth) -> None:
    """The user's report: the Device tab showed no alarm level."""
    rovers, lights = truth["rovers"], truth["lights"]
    panel = window.device_panel
    for scenario in ("accelerating", "seasonal"):
        device = rovers[scenario]
        click_tree_item(qtbot, window, device.serial_number)
        click_tab(window.tabs, "Device")
        qtbot.waitUntil(lambda d=device: d.serial_number in panel.title.text()
                        and "alarm_level" in panel.values, timeout=WAIT_MS)
        assert panel.values["alarm_level"].startswith("emergency"), panel.values
        assert "horizontal displacement" in panel.values["alarm_level"]
        for direction in DIRECTIONS:
            key = lights[device.serial_number][direction]
            text = panel.values[f"light_{direction}"]
            assert text == (key.words() if key is not None else "not set"), (scenario, text)
    assert "low" in panel.values["battery_pct"] and "20 %" in panel.values["battery_pct"]
    stable = rovers["stable"]
    click_tree_item(qtbot, window, stable.serial_number)
    qtbot.waitUntil(lambda: stable.serial_number in panel.title.text(), timeout=WAIT_MS)
    assert panel.values["alarm_level"].startswith("no alarm levels"), panel.values
    assert all(panel.values[f"light_{d}"] == "not set" for d in DIRECTIONS)


def gnss_rover_list_and_table_show_the_level_now_and_the_lights(qtbot, window,
                                                                truth) -> None:
    """The user's report: the GNSS rover list showed no level."""
    rovers, lights = truth["rovers"], truth["lights"]
    acc = rovers["accelerating"]
    click_tab(window.tabs, "GNSS deformation")
    items = {window.gnss.controls.rover_list.item(i).data(Qt.ItemDataRole.UserRole):
             window.gnss.controls.rover_list.item(i)
             for i in range(window.gnss.controls.rover_list.count())}
    item = items[acc.serial_number]
    assert not item.icon().isNull()
    for direction in ("H", "V"):
        assert lights[acc.serial_number][direction].words() in item.toolTip()
    assert "alarm level now: emergency" in item.toolTip()
    assert "No alarm levels set" in items[rovers["stable"].serial_number].toolTip()
    # one click on the point in the Overview opens it in the GNSS tab, analysed
    click_tab(window.tabs, "Overview")
    points = window.overview_view.points
    row = [points.item(r, headers_of(points).index("Serial number")).text()
           for r in range(points.rowCount())].index(acc.serial_number)
    with qtbot.waitSignal(window.gnss.analysed, timeout=WAIT_MS):
        QTest.mouseClick(points.viewport(), Qt.MouseButton.LeftButton,
                         pos=points.visualItemRect(points.item(row, 1)).center())
    click_tab(window.gnss.tabs, "Velocity table")
    table = window.gnss.table
    cell = table.item(table.row_of(acc.serial_number), headers_of(table).index("Alarm level"))
    assert cell.text() == "emergency"
    for direction in ("H", "V"):
        assert lights[acc.serial_number][direction].words() in cell.toolTip()


def test_without_a_mirror_and_with_an_empty_one_the_views_say_what_to_do(
        qtbot, window, tmp_path, monkeypatch):
    """The user's report: the packaged app's empty state was blank tables, the hint only in
    the status bar."""
    overview = window.overview_view
    assert overview.hint.isVisible() and not overview.table.isVisible()
    text = overview.hint_label.text()
    assert "Run the demo" in text and "Open" in text and "Sync" in text
    assert all(b.isVisible() for b in (overview.demo_button, overview.open_button,
                                       overview.sync_button))
    assert "Run the demo" in window.health.empty_text
    empty = tmp_path / "empty.duckdb"
    Mirror.open(empty).close()
    monkeypatch.setattr(QFileDialog, "getOpenFileName",
                        staticmethod(lambda *a, **k: (str(empty), "")))
    with qtbot.waitSignal(window.opened, timeout=WAIT_MS):
        QTest.mouseClick(overview.open_button, Qt.MouseButton.LeftButton)
    assert overview.hint.isVisible()
    assert "holds no devices yet" in overview.hint_label.text()
    assert "Sync" in window.health.empty_text
    assert "Sync" in window.device_panel.title.text()
    QTest.mouseClick(overview.sync_button, Qt.MouseButton.LeftButton)
    qtbot.waitUntil(lambda: getattr(window, "sync_dialog", None) is not None
                    and window.sync_dialog.isVisible(), timeout=5000)
    window.sync_dialog.close()
    QApplication.processEvents()

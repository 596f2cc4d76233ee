"""Issue 17, daily use at the 1400 px a laptop gives the window: the GNSS velocity table fits
without horizontal scrolling, and a long status-bar message stays readable beside the
permanent labels.  The real window on a mirror of the demo's world (its size, its seed, its
example alarm levels), real clicks."""

from __future__ import annotations

import pytest

from devmon_sync.demo import DEMO_DISPLACEMENT_MM, DEMO_VELOCITY_MM_PER_DAY
from devmon_sync.server import WorldSize
from devmon_sync.store import Mirror, queries

from support import synced_mirror

pytest.importorskip("pytestqt")

from PySide6.QtCore import Qt  # noqa: E402
from PySide6.QtGui import QFontMetrics  # noqa: E402
from PySide6.QtTest import QTest  # noqa: E402
from PySide6.QtWidgets import QApplication, QSizeGrip, QWidget  # noqa: E402

from qt_input import click_tab, open_mirror, open_site_health  # noqa: E402

WAIT_MS = 30000


@pytest.fixture(scope="module")
def mirror_path(tmp_path_factory):
    """The demo's world (6 sites, 48 devices, 90 days, seed 42) with the demo's example
    alarm levels on every rover's site, so the table shows every level's words (the analysis
    judges them itself: no stored evaluation needed, which would cost 4 s)."""
    path = synced_mirror(tmp_path_factory.mktemp("daily_fit") / "mirror.duckdb", WorldSize())
    with Mirror.open(path) as m:
        sites = {d.site_uuid for d in queries.gnss_devices(m) if d.epochs and d.site_uuid}
        for site in sorted(sites):
            queries.set_alarm_levels(m, site, "displacement", DEMO_DISPLACEMENT_MM, "site")
            queries.set_alarm_levels(m, site, "velocity", DEMO_VELOCITY_MM_PER_DAY, "site")
    return path


def test_the_velocity_table_of_every_rover_fits_a_1400_px_window(qtbot, window, db):
    """The user's report: the alarm and forecast columns were cut off at 1400 px."""
    open_mirror(qtbot, window, db)
    assert window.width() == 1400
    click_tab(window.tabs, "GNSS deformation")
    with qtbot.waitSignal(window.gnss.analysed, timeout=WAIT_MS):
        QTest.mouseClick(window.gnss.controls.all_button, Qt.MouseButton.LeftButton)
    click_tab(window.gnss.tabs, "Velocity table")
    QApplication.processEvents()
    table, header = window.gnss.table, window.gnss.table.horizontalHeader()
    assert table.rowCount() >= 10
    assert table.horizontalScrollBar().maximum() == 0
    shown = [c for c in range(table.columnCount()) if not header.isSectionHidden(c)]
    assert len(shown) >= table.columnCount() - 1  # at most the column every row agrees on
    for col in shown:
        left = header.sectionViewportPosition(col)
        name = table.horizontalHeaderItem(col).text()
        assert 0 <= left and left + header.sectionSize(col) <= table.viewport().width(), name
    for col in shown[1:]:  # numbers and words whole; only the rover's name may elide
        assert table.sizeHintForColumn(col) <= header.sectionSize(col), \
            table.horizontalHeaderItem(col).text()
    assert header.sectionSize(0) >= 100  # room for a name to be told apart
    alarm = [table.horizontalHeaderItem(c).text() for c in range(header.count())].index(
        "Alarm level")
    assert "emergency" in {table.item(r, alarm).text() for r in range(table.rowCount())}
    for row in range(table.rowCount()):  # an elided rover name is whole in its tooltip
        name, serial = table.item(row, 0).text().split("\n")
        assert name in table.item(row, 0).toolTip() and serial in table.item(row, 0).toolTip()


def _message_width(bar) -> int:
    """The width QStatusBar paints its message in: from its left edge to the first visible
    permanent widget (``QStatusBarPrivate::messageRect``)."""
    permanent = [w for w in bar.children() if isinstance(w, QWidget) and w.isVisible()
                 and not isinstance(w, QSizeGrip)]
    right = min([w.x() for w in permanent] + [bar.width() - 12]) - 2
    return right - 6


def test_a_long_status_message_is_readable_beside_the_permanent_labels(qtbot, window, db):
    """The user's report: the alarm level editor's "at a level now: ..." was cut off by the
    file, last-sync and connection labels."""
    open_mirror(qtbot, window, db)
    qtbot.waitUntil(lambda: "checking" not in window.net_label.text(), timeout=10000)
    bar = window.statusBar()
    text = ("Levels saved on Illgraben slope: 3D displacement alert 10, alarm 25, emergency "
            "50 mm; at a level now: Illgraben GNSS accelerating 03 (emergency), Folkestone "
            "GNSS rover 34 (alarm), La Sarraz GNSS rover 26 (alert)")
    text = (text + " " + "x" * 200)[:200]
    bar.showMessage(text)
    QApplication.processEvents()
    needed = QFontMetrics(bar.font()).horizontalAdvance(text[:120])
    assert _message_width(bar) >= needed, (_message_width(bar), needed)
    assert bar.toolTip() == text  # the whole of it, on hovering the bar
    for label in (window.file_label, window.sync_label, window.net_label):
        assert label.width() <= 240, label.text()
    assert window.net_label.text().endswith("…")  # elided, whole in the tooltip
    assert window.net_label.toolTip().startswith(window.net_label.text()[:-1])


def test_site_health_fits_and_its_time_headers_name_the_site_zone(qtbot, window, db):
    """The health table was 1,952 px of columns in a 1,033 px view, and said "(UTC)" over
    times shown in the site's zone.  Now it fits (less used columns hidden, chosen from the
    header's menu) and each time header names the zone its cells are in."""
    open_mirror(qtbot, window, db)
    site = next(s for s in window.overview["sites"] if getattr(s, "timezone", None)
                and s.timezone != "UTC")
    view = open_site_health(qtbot, window, site.uuid, site.name)
    qtbot.waitUntil(lambda: view.model_.rowCount() > 0, timeout=WAIT_MS)
    QApplication.processEvents()
    assert view.horizontalScrollBar().maximum() == 0
    headers = [view.model_.headerData(c, Qt.Orientation.Horizontal)
               for c in range(view.model_.columnCount())]
    times = [h for h in headers if h.startswith(("Last seen", "Next transmission",
                                                 "Last reading"))]
    assert len(times) == 3 and all(site.timezone in h and "UTC" not in h for h in times)
    column = headers.index(times[0])
    cell = view.model_.item(0, column).text()
    assert cell == "-" or (cell[:4].isdigit() and site.timezone not in cell)
    shown = [h for c, h in enumerate(headers) if not view.isColumnHidden(c)]
    for name in ("Device", "Connection", "Alarm level", "Battery", "Faults"):
        assert any(h.startswith(name) for h in shown), name
    hidden = [c for c in range(len(headers)) if view.isColumnHidden(c)]
    assert hidden, "every column shown cannot fit"
    header = view.horizontalHeader()
    menu = view.column_menu()
    action = next(a for a in menu.actions() if a.text() == headers[hidden[0]].split("\n")[0])
    action.trigger()  # the header's context menu: show a hidden column again
    assert not view.isColumnHidden(hidden[0])
    assert header.sectionSize(hidden[0]) > 0


def test_the_period_is_in_utc_when_the_checked_rovers_are_in_different_zones(qtbot, window,
                                                                              db):
    """The period boxes said "times in Europe/London" for a Folkestone and an Illgraben
    rover together (the first one's zone): UTC is the one zone right for both."""
    open_mirror(qtbot, window, db)
    click_tab(window.tabs, "GNSS deformation")
    controls = window.gnss.controls
    rovers = window.overview["gnss"]
    zones: dict[str, str] = {}
    for d in rovers:
        if d.epochs and d.site_timezone:
            zones.setdefault(d.site_timezone, d.serial_number)
    assert len(zones) >= 2, zones
    (zone_a, sn_a), (zone_b, sn_b) = list(zones.items())[:2]
    listing = controls.rover_list

    def toggle(serial: str) -> None:
        row = next(i for i in range(listing.count())
                   if serial in listing.item(i).text())
        rect = listing.visualItemRect(listing.item(row))
        QTest.mouseClick(listing.viewport(), Qt.MouseButton.LeftButton, pos=rect.center())
        QTest.keyClick(listing.viewport(), Qt.Key.Key_Space)

    toggle(sn_a)
    assert controls.checked_serials() == [sn_a]
    assert controls.period_zone.text() == f"times in {zone_a}"
    toggle(sn_b)
    assert sorted(controls.checked_serials()) == sorted([sn_a, sn_b])
    assert controls.period_zone.text() == "times in UTC"
    toggle(sn_a)
    assert controls.period_zone.text() == f"times in {zone_b}"

"""Issue 27, point 5: a sensor deleted upstream stays in the device tree with its archive,
labelled "deleted upstream <day>, archive kept", and its archived data still plot.

The mirror is synced from the ``changing-past`` service before and after it deletes a sensor
(``devmon_sync.server.past``), as a user's would be.  Screenshots go to ``tmp_path`` (and to
``$DEVMON_SCREENSHOTS`` when set, for review).
"""

from __future__ import annotations

import os
import shutil
from datetime import UTC

import pytest
from qt_input import WAIT_MS, click_tree_item, open_mirror

from devmon_sync.store import Mirror, browse

pytest.importorskip("pytestqt")

from PySide6.QtCore import Qt
from PySide6.QtTest import QTest

from gui.browser import KEY_ROLE

REVIEW = os.environ.get("DEVMON_SCREENSHOTS")


@pytest.fixture(scope="module")
def mirror_path(changed_past):
    return changed_past[0]


@pytest.fixture(scope="module")
def picks(changed_past):
    picks = changed_past[1]
    assert picks.deleted_sensor_uuid, "the world deletes no sensor: the test proves nothing"
    return picks


def _item(window, key: str):
    model = window.browser.sites_model
    (match,) = model.match(model.index(0, 0), KEY_ROLE, key, 1,
                           Qt.MatchFlag.MatchRecursive | Qt.MatchFlag.MatchExactly)
    return model.itemFromIndex(match)


def _shot(widget, tmp_path, name: str) -> None:
    out = tmp_path / f"{name}.png"
    assert widget.grab().save(str(out))
    if REVIEW:
        os.makedirs(REVIEW, exist_ok=True)
        shutil.copy(out, os.path.join(REVIEW, out.name))


def test_a_deleted_sensor_is_labelled_and_its_archive_plots(qtbot, window, db, picks,
                                                            tmp_path):
    with Mirror.open(db, read_only=True) as m:
        (deleted_at,) = m.con.execute("SELECT deleted_at FROM sensors WHERE uuid = ?::UUID",
                                      [picks.deleted_sensor_uuid]).fetchone()
        device = next(d for s in browse.device_tree(m) for d in s.devices
                      if d.serial_number == picks.deleted_serial)
    sensor = next(s for s in device.sensors if s.uuid == picks.deleted_sensor_uuid)
    kept = next(s for s in device.sensors if s.uuid != picks.deleted_sensor_uuid)
    param = max(sensor.parameters, key=lambda p: p.readings)
    assert param.readings > 0, "the archive is kept in the mirror"
    label = f"deleted upstream {deleted_at.astimezone(UTC).date().isoformat()}, archive kept"

    open_mirror(qtbot, window, db, wait_idle=True)
    view, _ = click_tree_item(qtbot, window, picks.deleted_serial)
    QTest.keyClick(view, Qt.Key.Key_Right)  # expand the device: its sensors show
    qtbot.waitUntil(lambda: view.isExpanded(view.currentIndex()), timeout=WAIT_MS)
    click_tree_item(qtbot, window, sensor.uuid)
    item = _item(window, sensor.uuid)
    assert label in item.text() and sensor.name in item.text(), item.text()
    assert "no longer fetches" in item.toolTip() and f"{param.readings:,}" in item.toolTip(), \
        item.toolTip()
    assert "deleted" not in _item(window, kept.uuid).text(), "a listed sensor is not labelled"
    _shot(window.browser, tmp_path, "tree-with-deleted-sensor")

    QTest.keyClick(view, Qt.Key.Key_Right)  # expand the sensor: its parameters show
    qtbot.waitUntil(lambda: view.isExpanded(view.currentIndex()), timeout=WAIT_MS)
    _, rect = click_tree_item(qtbot, window, param.uuid)
    with qtbot.waitSignal(window.plot.redrawn, timeout=WAIT_MS):
        QTest.mouseDClick(view.viewport(), Qt.MouseButton.LeftButton, pos=rect.center())
    (line,) = window.plot._lines(param.uuid)
    assert len(line.get_xdata()) > 0, "the archived data plot"
    assert window.plot.params[param.uuid].stats["count"] == param.readings
    _shot(window, tmp_path, "plot-of-deleted-sensor")

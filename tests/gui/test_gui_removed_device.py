"""Issue 27, point 5: a device the service no longer lists stays in the device tree with its
archive, labelled "removed upstream <day>, archive kept", and is not shown as a live device.

The mirror is synced from the ``changing-past`` service before and after it stops listing a
device (``devmon_sync.server.past``), as a user's would be.  Screenshots go to ``tmp_path``
(and to ``$DEVMON_SCREENSHOTS`` when set, for review).
"""

from __future__ import annotations

import os
import shutil
from datetime import UTC

import pytest
from qt_input import click_tree_item, open_mirror

from devmon_sync.store import Mirror

pytest.importorskip("pytestqt")

from PySide6.QtCore import Qt

from gui.browser import KEY_ROLE, STATUS_COLOURS

REVIEW = os.environ.get("DEVMON_SCREENSHOTS")


@pytest.fixture(scope="module")
def mirror_path(changed_past):
    return changed_past[0]


@pytest.fixture(scope="module")
def picks(changed_past):
    picks = changed_past[1]
    assert picks.removed_serial, "the world removes no device: the test proves nothing"
    return picks


def _item(window, key: str, groups: bool = False):
    model = window.browser.groups_model if groups else window.browser.sites_model
    (match,) = model.match(model.index(0, 0), KEY_ROLE, key, 1,
                           Qt.MatchFlag.MatchRecursive | Qt.MatchFlag.MatchExactly)
    return model.itemFromIndex(match)


def _shot(widget, tmp_path, name: str) -> None:
    out = tmp_path / f"{name}.png"
    assert widget.grab().save(str(out))
    if REVIEW:
        os.makedirs(REVIEW, exist_ok=True)
        shutil.copy(out, os.path.join(REVIEW, out.name))


def test_a_removed_device_is_labelled_in_both_trees(qtbot, window, db, picks, tmp_path):
    with Mirror.open(db, read_only=True) as m:
        (removed_at, readings), = m.con.execute(
            "SELECT d.removed_at, (SELECT count(*) FROM readings r JOIN parameters p ON "
            "p.uuid = r.parameter_uuid WHERE p.device_serial_number = d.serial_number) "
            "FROM devices d WHERE d.serial_number = ?", [picks.removed_serial]).fetchall()
    assert removed_at is not None and readings > 0
    label = f"removed upstream {removed_at.astimezone(UTC).date().isoformat()}, archive kept"

    open_mirror(qtbot, window, db, wait_idle=True)
    click_tree_item(qtbot, window, picks.removed_serial)
    item = _item(window, picks.removed_serial)
    assert label in item.text(), item.text()
    assert "no longer lists" in item.toolTip() and "no longer fetches" in item.toolTip(), \
        item.toolTip()
    assert item.font().italic()
    assert item.foreground().color().name() == STATUS_COLOURS["unknown"]
    live = _item(window, picks.late_serial)
    assert "removed" not in live.text() and not live.font().italic(), "a listed device is not"
    click_tree_item(qtbot, window, picks.late_serial)  # the removed one as it shows unselected
    _shot(window.browser, tmp_path, "tree-with-removed-device")

    click_tree_item(qtbot, window, picks.removed_serial, groups=True)
    assert label in _item(window, picks.removed_serial, groups=True).text()
    _shot(window.browser, tmp_path, "groups-with-removed-device")

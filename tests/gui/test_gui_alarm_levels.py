"""Issue 16, point 3: alarm levels set from the GUI, per device, site or group, kept in the
mirror.  A real window (offscreen) on a real DuckDB mirror synced from the reference server;
the dialog is opened through the menu bar, the keyboard shortcut or the browser's context
menu, thresholds are typed into the cells and Save is clicked, all with real input events.
The mirror is then read read-only to check what was stored and that the rovers' alarm
history was evaluated again."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest
from support import synced_mirror

from devmon_sync.server import WorldSize
from devmon_sync.store import Mirror, browse, queries

pytest.importorskip("pytestqt")

from PySide6.QtCore import Qt  # noqa: E402
from PySide6.QtGui import QContextMenuEvent  # noqa: E402
from PySide6.QtTest import QTest  # noqa: E402
from PySide6.QtWidgets import QApplication, QLineEdit  # noqa: E402
from shiboken6 import isValid  # noqa: E402

from gui.alarm_levels_dialog import INHERITED_ROLE, INVALID_BRUSH, QUANTITY_KEYS  # noqa: E402
from qt_input import click_tree_item, open_mirror  # noqa: E402

WORLD = WorldSize(sites=2, devices=10, days=20)
WAIT_MS = 30000
SCREENSHOT = Path("/tmp/alarm-levels-dialog.png")


@pytest.fixture(scope="module")
def mirror_path(tmp_path_factory):
    return synced_mirror(tmp_path_factory.mktemp("alarm_levels") / "mirror.duckdb", WORLD)


@pytest.fixture(scope="module")
def world(mirror_path):
    """The site with rovers, its rovers with epochs (by scenario word) and its groups."""
    with Mirror.open(mirror_path, read_only=True) as m:
        sites = browse.device_tree(m)
        groups = browse.group_tree(m)
        with_epochs = {d.serial_number for d in queries.gnss_devices(m) if d.epochs}
    site = next(s for s in sites if any(d.is_gnss_rover for d in s.devices))
    rovers = {d.display_name: d.serial_number for d in site.devices
              if d.serial_number in with_epochs}
    return {"site": site, "rovers": rovers, "groups": groups}


def rover(world, word: str) -> str:
    return next(sn for name, sn in world["rovers"].items() if word in name)


@pytest.fixture
def window(qtbot, window):
    """The main window (conftest's), exposed before a test clicks in it."""
    qtbot.waitExposed(window)
    return window


# ----------------------------------------------------------------------------- real input

def _open_by_menu(qtbot, window):
    """Alarms → Alarm levels… clicked on the menu bar, then in the menu."""
    bar = window.menuBar()
    (alarms,) = [a for a in bar.actions() if a.text() == "&Alarms"]
    QTest.mouseClick(bar, Qt.MouseButton.LeftButton, pos=bar.actionGeometry(alarms).center())
    menu = alarms.menu()
    qtbot.waitUntil(menu.isVisible, timeout=WAIT_MS)
    QTest.mouseClick(menu, Qt.MouseButton.LeftButton,
                     pos=menu.actionGeometry(window.alarm_levels_action).center())
    return _loaded_dialog(qtbot, window)


def _open_by_shortcut(qtbot, window):
    window.activateWindow()
    qtbot.waitUntil(window.isActiveWindow, timeout=WAIT_MS)
    QTest.keyClick(window, Qt.Key.Key_L, Qt.KeyboardModifier.ControlModifier)
    return _loaded_dialog(qtbot, window)


def _loaded_dialog(qtbot, window):
    qtbot.waitUntil(lambda: getattr(window, "alarm_levels_dialog", None) is not None,
                    timeout=WAIT_MS)
    dialog = window.alarm_levels_dialog
    qtbot.waitUntil(lambda: dialog.isVisible() and dialog.loaded_levels is not None,
                    timeout=WAIT_MS)
    return dialog


def _cell(dialog, key: str, level: str):
    row = QUANTITY_KEYS.index(key)
    return dialog.table.item(row, 2 + dialog.level_names.index(level))


def _type(qtbot, dialog, key: str, level: str, text: str, how: str = "double-click") -> None:
    """Edit one cell as a user does: double-click it (or click it and press F2), type,
    press Enter."""
    table = dialog.table
    item = _cell(dialog, key, level)
    table.scrollToItem(item)
    center = table.visualItemRect(item).center()
    QTest.mouseClick(table.viewport(), Qt.MouseButton.LeftButton, pos=center)
    if how == "double-click":  # QTest's double click is the second press and release
        QTest.mouseDClick(table.viewport(), Qt.MouseButton.LeftButton, pos=center)
    else:
        QTest.keyClick(table, Qt.Key.Key_F2)
    index = table.indexFromItem(item)
    qtbot.waitUntil(lambda: isinstance(table.indexWidget(index), QLineEdit), timeout=WAIT_MS)
    editor = table.indexWidget(index)  # the cell's editor, open
    editor.selectAll()
    QTest.keyClicks(editor, text)
    QTest.keyClick(editor, Qt.Key.Key_Return)  # commits once the event loop runs
    qtbot.waitUntil(lambda: table.state() != table.State.EditingState, timeout=WAIT_MS)
    assert item.text() == text


def _save(qtbot, window, dialog) -> str:
    """Click Save; wait for the dialog's answer and the window's refresh after it."""
    with qtbot.waitSignal(window.opened, timeout=WAIT_MS), \
            qtbot.waitSignal(dialog.saved, timeout=WAIT_MS) as saved:
        QTest.mouseClick(dialog.save_button, Qt.MouseButton.LeftButton)
    return saved.args[0]


def _stored(db, scope: str, key: str) -> dict:
    with Mirror.open(db, read_only=True) as m:
        return queries.alarm_levels_set(m, scope, key)


# ----------------------------------------------------------------------------- tests

def test_site_levels_typed_in_the_dialog_are_saved_and_the_rovers_evaluated(
        qtbot, window, db, world):
    site = world["site"]
    open_mirror(qtbot, window, db, wait_idle=True)
    click_tree_item(qtbot, window, site.uuid)
    dialog = _open_by_menu(qtbot, window)
    assert dialog.target().scope == "site" and dialog.target().key == site.uuid
    assert [dialog.table.item(r, 0).text() for r in range(3)] == \
        ["3D displacement", "3D velocity", "Horizontal displacement"]
    assert dialog.table.rowCount() == len(QUANTITY_KEYS) == 14
    _type(qtbot, dialog, "displacement", "alert", "2")
    _type(qtbot, dialog, "displacement", "alarm", "10", how="F2")
    _type(qtbot, dialog, "displacement", "emergency", "500")
    _type(qtbot, dialog, "velocity:vertical", "alert", "2,5")  # a decimal comma is fine
    said = _save(qtbot, window, dialog)

    assert _stored(db, "site", site.uuid) == {
        "displacement": {"alert": 2.0, "alarm": 10.0, "emergency": 500.0},
        "velocity:vertical": {"alert": 2.5}}
    rovers = sorted(world["rovers"].values())
    with Mirror.open(db, read_only=True) as m:
        assert queries.alarm_evaluation_due(m, rovers) == []  # evaluated with the new levels
        evaluated = m.con.execute("SELECT count(*) FROM alarm_evaluations").fetchone()[0]
        moving = queries.alarm_history(m, rover(world, "accelerating"))
        worst = queries.worst_alarm_levels(m, rovers)
    assert evaluated == len(rovers)
    assert moving and moving[0]["quantity"] == "displacement"
    assert said.startswith(f"Alarm levels saved for site {site.name}; {len(rovers)} rovers "
                           f"evaluated; at a level now: ")
    for serial, level in worst.items():
        name = next(n for n, sn in world["rovers"].items() if sn == serial)
        assert f"{name} {level} (" in said
    assert not (isValid(dialog) and dialog.isVisible())  # closed
    assert window.statusBar().currentMessage() == said  # after the refresh, still said


def test_a_device_shows_the_site_levels_it_inherits_and_may_override_them(
        qtbot, window, db, world):
    site = world["site"]
    serial = rover(world, "creep")
    with Mirror.open(db) as m:
        queries.set_alarm_levels(m, site.uuid, "displacement",
                                 {"alert": 10, "alarm": 25, "emergency": 50}, scope="site")
    open_mirror(qtbot, window, db, wait_idle=True)
    click_tree_item(qtbot, window, serial)
    dialog = _open_by_shortcut(qtbot, window)
    assert (dialog.target().scope, dialog.target().key) == ("device", serial)
    applies = dialog.table.columnCount() - 1
    assert dialog.table.horizontalHeaderItem(applies).text() == "Applies now"
    row = QUANTITY_KEYS.index("displacement")
    assert dialog.table.item(row, applies).text() == f"from site {site.name}"
    for level, value in (("alert", 10), ("alarm", 25), ("emergency", 50)):
        cell = _cell(dialog, "displacement", level)
        assert cell.text() == "" and cell.data(INHERITED_ROLE) == value  # greyed, not own
    assert dialog.table.item(QUANTITY_KEYS.index("velocity"), applies).text() == "no levels"
    _type(qtbot, dialog, "velocity:horizontal", "alert", "0.8")
    dialog.table.clearSelection()
    QApplication.processEvents()
    assert dialog.grab().save(str(SCREENSHOT))
    assert dialog.table.item(QUANTITY_KEYS.index("velocity:horizontal"),
                             applies).text() == "own levels"
    _type(qtbot, dialog, "displacement", "alert", "5")  # its own ladder now
    assert dialog.table.item(row, applies).toolTip() == f"instead of those of site {site.name}"
    said = _save(qtbot, window, dialog)
    assert _stored(db, "device", serial) == {"displacement": {"alert": 5.0},
                                             "velocity:horizontal": {"alert": 0.8}}
    assert _stored(db, "site", site.uuid)["displacement"] == \
        {"alert": 10.0, "alarm": 25.0, "emergency": 50.0}  # the site's stay as they were
    assert said.startswith(f"Alarm levels saved for device {serial} (")
    assert "; 1 rover evaluated;" in said
    with Mirror.open(db, read_only=True) as m:
        assert queries.alarm_evaluation_due(m, [serial]) == []
        assert queries.alarm_level_sources(m, serial) == {"displacement": "device",
                                                          "velocity:horizontal": "device"}


def test_an_invalid_ladder_is_marked_and_nothing_is_saved(qtbot, window, db, world):
    serial = rover(world, "stable")
    open_mirror(qtbot, window, db, wait_idle=True)
    click_tree_item(qtbot, window, serial)
    dialog = _open_by_menu(qtbot, window)
    _type(qtbot, dialog, "velocity", "alert", "1")  # a valid row: not saved either
    _type(qtbot, dialog, "displacement", "alert", "10")
    _type(qtbot, dialog, "displacement", "alarm", "5")  # below the alert
    _type(qtbot, dialog, "displacement:up", "emergency", "lots")
    failed = []
    dialog.failed.connect(failed.append)
    QTest.mouseClick(dialog.save_button, Qt.MouseButton.LeftButton)
    assert failed, "no message"
    text = dialog.message.text()
    assert dialog.isVisible() and dialog.message.isVisible()
    assert text.startswith("Nothing saved. Correct the marked rows, or clear them:")
    assert "3D displacement: alarm thresholds must be strictly ascending: 'alarm' (5) must " \
           "be above 'alert' (10)" in text
    assert "Upward displacement: emergency 'lots' is not a number: type a threshold in mm" \
        in text
    for key in ("displacement", "displacement:up"):
        assert _cell(dialog, key, "alert").background() == INVALID_BRUSH
    assert _cell(dialog, "velocity", "alert").background() != INVALID_BRUSH
    assert _stored(db, "device", serial) == {}
    assert dialog.grab().save("/tmp/alarm-levels-invalid.png")
    # corrected, it saves
    _type(qtbot, dialog, "displacement", "alarm", "15")
    _type(qtbot, dialog, "displacement:up", "emergency", "40")
    _save(qtbot, window, dialog)
    assert _stored(db, "device", serial) == {"displacement": {"alert": 10.0, "alarm": 15.0},
                                             "displacement:up": {"emergency": 40.0},
                                             "velocity": {"alert": 1.0}}


def test_escape_changes_nothing(qtbot, window, db, world):
    site = world["site"]
    open_mirror(qtbot, window, db, wait_idle=True)
    click_tree_item(qtbot, window, site.uuid)
    dialog = _open_by_menu(qtbot, window)
    _type(qtbot, dialog, "displacement", "alert", "3")
    refreshed = []
    window.opened.connect(refreshed.append)
    QTest.keyClick(dialog.table, Qt.Key.Key_Escape)
    qtbot.waitUntil(lambda: not (isValid(dialog) and dialog.isVisible()), timeout=WAIT_MS)
    QApplication.processEvents()
    assert _stored(db, "site", site.uuid) == {}
    with Mirror.open(db, read_only=True) as m:
        assert m.con.execute("SELECT count(*) FROM alarm_evaluations").fetchone()[0] == 0
    assert not refreshed


def test_levels_of_a_group_from_the_browser_context_menu(qtbot, window, db, world):
    group = next(c for r in world["groups"].roots for c in r.children
                 if any(g.members for g in c.children))  # "Illgraben slope" and its GNSS
    open_mirror(qtbot, window, db, wait_idle=True)
    view, rect = click_tree_item(qtbot, window, group.uuid, groups=True)
    QApplication.sendEvent(view.viewport(), QContextMenuEvent(
        QContextMenuEvent.Reason.Mouse, rect.center(), view.viewport().mapToGlobal(
            rect.center())))
    menu = window.tree_menu
    qtbot.waitUntil(menu.isVisible, timeout=WAIT_MS)
    (action,) = menu.actions()
    assert action.text() == "Alarm levels of this group…"
    QTest.mouseClick(menu, Qt.MouseButton.LeftButton, pos=menu.actionGeometry(action).center())
    dialog = _loaded_dialog(qtbot, window)
    assert (dialog.target().scope, dialog.target().key) == ("group", group.uuid)
    assert dialog.name_combo.currentText().endswith(f"› {group.name}")
    assert "Applies now" not in [dialog.table.horizontalHeaderItem(c).text()
                                 for c in range(dialog.table.columnCount())]
    _type(qtbot, dialog, "velocity:vertical", "alert", "0.5")
    _type(qtbot, dialog, "velocity:vertical", "alarm", "3")
    said = _save(qtbot, window, dialog)
    assert _stored(db, "group", group.uuid) == {
        "velocity:vertical": {"alert": 0.5, "alarm": 3.0}}
    rovers = sorted(world["rovers"].values())  # all in the group's nested GNSS group
    assert f"Alarm levels saved for group {group.name}; {len(rovers)} rovers evaluated" in said
    with Mirror.open(db, read_only=True) as m:
        assert queries.alarm_evaluation_due(m, rovers) == []
        assert {queries.alarm_level_sources(m, sn)["velocity:vertical"] for sn in rovers} \
            == {f"group {group.name}"}


def test_the_gnss_tab_shows_the_new_levels_after_saving(qtbot, window, db, world):
    serial = rover(world, "accelerating")
    open_mirror(qtbot, window, db, wait_idle=True)
    window.tabs.setCurrentWidget(window.gnss)
    with qtbot.waitSignal(window.gnss.analysed, timeout=WAIT_MS):
        click_tree_item(qtbot, window, serial)  # selecting a rover analyses it
    table = window.gnss.table
    alarm_col = [table.horizontalHeaderItem(c).text()
                 for c in range(table.columnCount())].index("Alarm level")
    assert table.item(table.row_of(serial), alarm_col).text() == "no levels set"
    dialog = _open_by_menu(qtbot, window)
    assert dialog.target().key == serial
    name = dialog.names[serial]
    _type(qtbot, dialog, "displacement", "alert", "1")
    with qtbot.waitSignal(window.gnss.analysed, timeout=WAIT_MS):
        said = _save(qtbot, window, dialog)
    assert table.item(table.row_of(serial), alarm_col).text() == "alert"
    assert "alert (3D displacement" in window.gnss.alarm_history.text()
    assert f"at a level now: {name} alert (3D displacement)" in said
    assert window.statusBar().currentMessage() == said  # not the GNSS tab's own line


def test_a_mirror_another_program_writes_is_said_and_save_may_be_retried(
        qtbot, window, db, world, monkeypatch):
    from devmon_sync.store import mirror as mirror_module

    monkeypatch.setattr(mirror_module, "LOCK_WAIT_S", 1.0)  # the store's wait, shorter
    site = world["site"]
    open_mirror(qtbot, window, db, wait_idle=True)
    click_tree_item(qtbot, window, site.uuid)
    dialog = _open_by_menu(qtbot, window)
    _type(qtbot, dialog, "displacement:horizontal", "alert", "4")
    # another process holds the file for writing (as `devmon sync` does) until told to stop;
    # a connection in this process would share DuckDB's instance and hold no lock against it
    holder = subprocess.Popen(
        [sys.executable, "-c", "import sys, duckdb; con = duckdb.connect(sys.argv[1]); "
         "print('holding', flush=True); sys.stdin.readline(); con.close()", str(db)],
        stdin=subprocess.PIPE, stdout=subprocess.PIPE, text=True)
    try:
        assert holder.stdout.readline().strip() == "holding"
        with qtbot.waitSignal(dialog.failed, timeout=WAIT_MS) as failed:
            QTest.mouseClick(dialog.save_button, Qt.MouseButton.LeftButton)
        assert failed.args[0].startswith("Not saved: another program (a `devmon sync`?) is "
                                         "writing the mirror")
        assert "click Save again when it has finished" in failed.args[0]
        assert "Traceback" not in failed.args[0]
        assert dialog.isVisible() and dialog.save_button.isEnabled()
        assert _cell(dialog, "displacement:horizontal", "alert").text() == "4"  # kept
    finally:
        holder.communicate("\n", timeout=30)
    _save(qtbot, window, dialog)
    assert _stored(db, "site", site.uuid) == {"displacement:horizontal": {"alert": 4.0}}


def test_on_read_only_media_the_dialog_says_it_cannot_save(qtbot, window, read_only_copy,
                                                             world):
    open_mirror(qtbot, window, read_only_copy, wait_idle=True)
    click_tree_item(qtbot, window, world["site"].uuid)
    dialog = _open_by_menu(qtbot, window)
    assert dialog.read_only_label.isVisible()
    assert dialog.read_only_label.text().startswith(
        f"These levels cannot be saved: it is on read-only media ({read_only_copy.parent})")
    assert "copy the mirror to a writable folder" in dialog.read_only_label.text()
    assert not dialog.save_button.isEnabled()
    center = dialog.table.visualItemRect(_cell(dialog, "displacement", "alert")).center()
    QTest.mouseClick(dialog.table.viewport(), Qt.MouseButton.LeftButton, pos=center)
    QTest.mouseDClick(dialog.table.viewport(), Qt.MouseButton.LeftButton, pos=center)
    assert not isinstance(QApplication.focusWidget(), QLineEdit)  # no editor opens
    QTest.keyClick(dialog, Qt.Key.Key_Escape)
    qtbot.waitUntil(lambda: not (isValid(dialog) and dialog.isVisible()), timeout=WAIT_MS)
    assert window.last_error is None


def test_the_dialog_offers_every_rover_site_and_group_by_its_combos(qtbot, window, db, world):
    open_mirror(qtbot, window, db, wait_idle=True)
    dialog = _open_by_menu(qtbot, window)
    combo = dialog.scope_combo
    assert combo.currentData() == "device"
    QTest.keyClicks(combo, "S")  # the keyboard picks "Site"
    assert combo.currentData() == "site"
    qtbot.waitUntil(lambda: dialog.loaded_levels is not None
                    and dialog.loaded_levels.target.scope == "site", timeout=WAIT_MS)
    names = [dialog.name_combo.itemText(i) for i in range(dialog.name_combo.count())]
    assert world["site"].name in names
    assert dialog.loaded_levels.target.rovers  # the rovers its levels apply to


def test_saving_levels_is_the_windows_own_write_not_another_programs(qtbot, window, db, world,
                                                                      monkeypatch):
    """The save wrote through the file's plain writer: the mirror watch, looking at every
    turn of the event loop, took the checkpoint DuckDB writes on closing for another
    program's update ("Mirror updated by another program") and read the mirror twice.
    Closing a writer is made to take a while after the file is written, as the checkpoint
    of a big write does, so the watch surely looks in between."""
    import time

    from devmon_sync.store import Mirror as StoreMirror

    close = StoreMirror.close

    def slow_close(self):
        close(self)
        if not self._read_only:
            time.sleep(0.3)

    monkeypatch.setattr(StoreMirror, "close", slow_close)
    site = world["site"]
    open_mirror(qtbot, window, db, wait_idle=True)
    window.watch.timer.setInterval(0)
    said: list[str] = []
    window.statusBar().messageChanged.connect(said.append)
    updated: list[int] = []
    window.watch.updated.connect(lambda: updated.append(1))
    click_tree_item(qtbot, window, site.uuid)
    dialog = _open_by_menu(qtbot, window)
    _type(qtbot, dialog, "displacement:horizontal", "alert", "40")
    _save(qtbot, window, dialog)
    qtbot.wait(400)  # the watch keeps looking
    assert _stored(db, "site", site.uuid) == {"displacement:horizontal": {"alert": 40.0}}
    assert not [m for m in said if "another program" in m], said
    assert not updated

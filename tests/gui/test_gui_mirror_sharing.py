"""Issue 15, point 8: the window must not lock the mirror.

It held the file read-write for as long as it was open: no scheduled `devmon sync` could run
beside it, and a mirror on read-only media could not be browsed.  Here a real `devmon sync`
process writes the file while a real window has it open, another process holds it for
writing for a while (the window says so, then reads it again), and a mirror on a read-only
filesystem is browsed and plotted.
"""

from __future__ import annotations

import gc
import subprocess
import sys
import time
import weakref
from datetime import timedelta
from pathlib import Path

import pytest
from support import KEY, NOW, start_server, synced_mirror
from support import devmon as run_devmon

from devmon_sync.server import WorldSize
from devmon_sync.store import Mirror, browse

pytest.importorskip("pytestqt")

import shiboken6  # noqa: E402
from PySide6.QtCore import Qt  # noqa: E402
from PySide6.QtGui import QStandardItem  # noqa: E402
from PySide6.QtTest import QTest  # noqa: E402
from qt_input import open_mirror  # noqa: E402

WORLD = WorldSize(sites=1, devices=4, days=5)
REVIEW_DIR = Path("/tmp/gui-review")  # screenshots for a person to look at
WAIT_MS = 30000


@pytest.fixture(scope="module")
def mirror_path(tmp_path_factory):
    return synced_mirror(tmp_path_factory.mktemp("share") / "mirror.duckdb", WORLD)


@pytest.fixture
def window(window):
    """The main window (conftest's) with the two-second watch faster for the test."""
    window.watch.timer.setInterval(200)
    return window


def _devmon(*args: str) -> subprocess.CompletedProcess:
    return run_devmon(*args, timeout=180)


def test_a_cli_sync_runs_beside_the_window_which_then_shows_its_data(qtbot, window, db):
    open_mirror(qtbot, window, db)
    before = window.overview["last_synced"]
    updated = []
    window.watch.updated.connect(lambda: updated.append(1))
    with start_server(size=WORLD, now=NOW + timedelta(days=1)) as srv:  # a day of news
        r = _devmon("sync", "--db", str(db), "--base-url", srv.base_url, "--api-key", KEY,
                    "--rate-limit", "0", "--quiet")
    assert r.returncode == 0, r.stdout + r.stderr  # refused before: the window held the file
    qtbot.waitUntil(lambda: window.overview["last_synced"] != before, timeout=WAIT_MS)
    assert updated, "the window did not notice the sync"
    assert window.statusBar().currentMessage().startswith(
        "Mirror updated by another program, read again: 4 devices in 1 site")
    with Mirror.open(db, read_only=True) as m:
        assert window.overview["last_synced"] == browse.last_synced(m)


def test_a_program_writing_the_mirror_is_waited_for_then_read(qtbot, window, db):
    """Another process holds the file for writing for a few seconds: the window says so
    once, keeps what it shows, and reads the mirror again when the other has finished."""
    open_mirror(qtbot, window, db)
    busy, updated = [], []
    window.watch.busy.connect(busy.append)
    window.watch.updated.connect(lambda: updated.append(1))
    holder = subprocess.Popen(
        [sys.executable, "-c",
         "import sys, time; from devmon_sync.store import Mirror; m = Mirror.open(sys.argv[1]); "
         "m.con.execute('CREATE TABLE scratch_note AS SELECT 1 AS x'); print('open', flush=True)"
         "; time.sleep(3); m.con.execute('DROP TABLE scratch_note'); m.close()", str(db)],
        stdout=subprocess.PIPE, text=True)
    try:
        assert holder.stdout.readline().strip() == "open"
        qtbot.waitUntil(lambda: bool(busy), timeout=WAIT_MS)
        assert "in use by another" in busy[0]
        assert "Another program is writing the mirror" in window.statusBar().currentMessage()
        assert window.overview is not None  # what was shown stays shown
        REVIEW_DIR.mkdir(parents=True, exist_ok=True)
        assert window.grab().save(str(REVIEW_DIR / "mirror-written-elsewhere.png"))
        qtbot.waitUntil(lambda: bool(updated), timeout=WAIT_MS)
    finally:
        holder.wait(timeout=30)
    assert len(busy) == 1, "said once, not at every look"


class _Cycle:
    """An object in a reference cycle: only the garbage collector frees it."""

    def __init__(self) -> None:
        self.me = self


def _items_held(model) -> set[int]:
    """The C++ addresses of every item in ``model``'s rows, nested ones included."""
    held, todo = set(), [model.invisibleRootItem()]
    while todo:
        parent = todo.pop()
        for row in range(parent.rowCount()):
            for col in range(parent.columnCount()):
                child = parent.child(row, col)
                if child is not None:
                    held.add(shiboken6.getCppPointer(child)[0])
                    todo.append(child)
    return held


def _item_wrappers() -> list:
    """Every live QStandardItem wrapper; what the window froze is frozen again after (what
    is alive then with it), as the window left it."""
    frozen = gc.get_freeze_count() > 0
    gc.unfreeze()  # frozen objects are not listed
    gc.collect()
    wrappers = [o for o in gc.get_objects() if isinstance(o, QStandardItem)]
    if frozen:
        gc.freeze()
    return wrappers


def _wrappers_of_items_gone(window, earlier: set[int]) -> int:
    """Python wrappers of QStandardItems, made since ``earlier`` (ids of those alive then:
    other tests' windows), that no model of the window holds: PySide keeps the address of
    each, and a new Qt object made there after Qt deleted the item comes back as it."""
    held = set()
    for model in (window.browser.sites_model, window.browser.groups_model,
                  window.health.model_):
        held |= _items_held(model)
    return sum(shiboken6.getCppPointer(o)[0] not in held for o in _item_wrappers()
               if id(o) not in earlier)


def _click_menu(qtbot, window, menu_text: str, action_text: str) -> None:
    """``menu_text`` clicked on the menu bar, then ``action_text`` in its menu."""
    qtbot.waitExposed(window)
    bar = window.menuBar()
    (entry,) = [a for a in bar.actions() if a.text() == menu_text]
    QTest.mouseClick(bar, Qt.MouseButton.LeftButton, pos=bar.actionGeometry(entry).center())
    menu = entry.menu()
    qtbot.waitUntil(menu.isVisible, timeout=WAIT_MS)
    (action,) = [a for a in menu.actions() if a.text() == action_text]
    QTest.mouseClick(menu, Qt.MouseButton.LeftButton, pos=menu.actionGeometry(action).center())


def test_what_the_window_froze_is_collected_at_the_next_reading_and_at_closing(
        qtbot, window, db):
    """The window freezes what is alive after each reading of the mirror (out of the
    collector's full passes).  Something frozen that became garbage later must be collected
    at the next reading and when the mirror closes, before new Qt objects are made; and no
    wrapper of an item Qt deletes may be kept (header items' were).  Left alive, a wrapper
    whose C++ object Qt had deleted stayed in PySide's map of addresses, and the next QAction
    made at that address came back as that stale QStandardItem (the window crashed on
    closing after a re-reading, 2026-11-27 and 2026-11-28)."""
    earlier = {id(o) for o in _item_wrappers()}
    first = _Cycle()
    open_mirror(qtbot, window, db, wait_idle=True)  # `first` frozen alive with the tree
    gone_first = weakref.ref(first)
    del first  # garbage now, but frozen
    updated = []
    window.watch.updated.connect(lambda: updated.append(1))
    writer = subprocess.run([sys.executable, "-c",  # another program writes the mirror
                             "import sys; from devmon_sync.store import Mirror; "
                             "m = Mirror.open(sys.argv[1]); m.con.execute('CHECKPOINT'); "
                             "m.con.execute('CREATE TABLE scratch_note AS SELECT 1 AS x'); "
                             "m.con.execute('DROP TABLE scratch_note'); m.close()", str(db)],
                            capture_output=True, text=True, timeout=120)
    assert writer.returncode == 0, writer.stderr
    second = _Cycle()  # alive through the re-reading: frozen again with the new tree
    qtbot.waitUntil(lambda: bool(updated) and window.statusBar().currentMessage().startswith(
        "Mirror updated by another program, read again"), timeout=WAIT_MS)
    qtbot.waitUntil(lambda: not window.runner.busy(), timeout=WAIT_MS)
    assert gone_first() is None, "garbage frozen at the first reading outlived the second"
    assert _wrappers_of_items_gone(window, earlier) == 0, "a Qt wrapper outlived its item"
    gone_second = weakref.ref(second)
    del second
    _click_menu(qtbot, window, "&File", "&Quit")
    qtbot.waitUntil(lambda: not window.isVisible(), timeout=WAIT_MS)
    assert gone_second() is None, "garbage frozen at the last reading outlived closing"


def test_the_window_holds_no_lock_while_idle(qtbot, window, db):
    open_mirror(qtbot, window, db)
    qtbot.waitUntil(lambda: not window.runner.busy(), timeout=WAIT_MS)
    r = _devmon("status", "--db", str(db))  # opens read-only: fine either way
    assert r.returncode == 0, r.stderr
    held = subprocess.run([sys.executable, "-c", "import sys; from devmon_sync.store import "
                           "Mirror; Mirror.open(sys.argv[1]).close(); print('written')",
                           str(db)], capture_output=True, text=True, timeout=60)
    assert held.stdout.strip() == "written", held.stderr


def test_a_mirror_on_read_only_media_is_browsed_and_plotted(qtbot, window, read_only_copy):
    with pytest.raises(OSError):
        (read_only_copy.parent / "probe").write_text("x")  # the medium is read-only indeed
    open_mirror(qtbot, window, read_only_copy)
    assert sum(len(s.devices) for s in window.overview["sites"]) == WORLD.devices
    with Mirror.open(read_only_copy, read_only=True) as m:
        uuid = m._row("SELECT uuid::VARCHAR FROM parameters WHERE uuid IN "
                      "(SELECT parameter_uuid FROM readings) LIMIT 1")[0]
    with qtbot.waitSignal(window.plot.redrawn, timeout=WAIT_MS):
        window.plot.add_parameters([uuid])
    assert window.plot.params[uuid].t.size > 0
    assert window.last_error is None
    time.sleep(0.5)  # a few watch ticks: nothing changes, nothing is said
    assert "Another program" not in window.statusBar().currentMessage()


def test_a_mirror_an_older_devmon_made_is_upgraded_and_opened(qtbot, window, db):
    """Reading read-only, the window would refuse an older file ("run devmon sync on it
    once"); it upgrades it first, as its read-write open always did."""
    import duckdb

    from devmon_sync.store.schema import LATEST_VERSION

    con = duckdb.connect(str(db))
    con.execute("DELETE FROM schema_migrations WHERE version = ?", [LATEST_VERSION])
    con.close()
    open_mirror(qtbot, window, db)
    assert sum(len(s.devices) for s in window.overview["sites"]) == WORLD.devices
    with Mirror.open(db, read_only=True) as m:
        assert m.schema_version() == LATEST_VERSION


def test_a_sync_that_starts_during_a_read_waits_for_it(db):
    """The window reads in short read-only opens; a scheduled sync that starts during one
    waits for its lock instead of failing."""
    reader = subprocess.Popen(
        [sys.executable, "-c", "import sys, time; from devmon_sync.store import Mirror; "
         "m = Mirror.open(sys.argv[1], read_only=True); print('reading', flush=True); "
         "time.sleep(2); m.close()", str(db)], stdout=subprocess.PIPE, text=True)
    try:
        assert reader.stdout.readline().strip() == "reading"
        started = time.monotonic()
        writer = subprocess.run([sys.executable, "-c", "import sys; from devmon_sync.store "
                                 "import Mirror; Mirror.open(sys.argv[1]).close(); "
                                 "print('written')", str(db)],
                                capture_output=True, text=True, timeout=60)
        waited = time.monotonic() - started
    finally:
        reader.wait(timeout=30)
    assert writer.stdout.strip() == "written", writer.stderr
    assert waited > 0.5, "the read had already ended: nothing was waited for"


def _full_collections_while(action) -> int:
    """How many full passes of the garbage collector ``action`` asked for (automatic ones
    held off meanwhile, so only the window's own ``gc.collect()`` calls count)."""
    full = []

    def count(phase: str, info: dict) -> None:
        if phase == "start" and info["generation"] == 2:
            full.append(1)

    gc.disable()
    gc.callbacks.append(count)
    try:
        action()
    finally:
        gc.callbacks.remove(count)
        gc.enable()
    return len(full)


def test_a_first_opening_runs_one_full_collection_and_a_reopening_two(qtbot, window, db):
    """A full pass costs ~0.1-0.3 s on the GUI thread (every live object visited).  With
    nothing frozen there is nothing a freeze kept from the collector, so opening the first
    mirror of a window needs only the pass before its freeze (it ran two); opening another
    also collects what the first freeze held (the old tree)."""
    gc.unfreeze()  # as a new window finds it: nothing frozen yet
    first = _full_collections_while(lambda: open_mirror(qtbot, window, db, wait_idle=True))
    assert gc.get_freeze_count() > 0  # the tree was frozen
    again = _full_collections_while(lambda: open_mirror(qtbot, window, db, wait_idle=True))
    assert (first, again) == (1, 2)

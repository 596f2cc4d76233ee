"""Fixtures of the GUI tests, over the mirror each test module syncs as its own
``mirror_path`` (module scope): a private copy of it (``db``), the main window (``window``),
and for the views tested alone the mirror open (``mirror``), its GNSS rovers (``devices``)
and a task runner on it (``runner``).  Helpers that tests import by name are in
``qt_input.py`` (input and figures) and ``tests/support.py``; this file holds fixtures only."""

from __future__ import annotations

import shutil

import pytest

from devmon_sync.store import Mirror, queries


@pytest.fixture
def db(mirror_path, tmp_path):
    """A private copy: the window opens its file read-write."""
    path = tmp_path / "mirror.duckdb"
    shutil.copy(mirror_path, path)
    return path


@pytest.fixture
def window(qtbot, tmp_path, monkeypatch):
    """The main window, 1400 x 900, shown, without profiles or an API key."""
    from gui.main_window import MainWindow
    from gui.settings import Settings

    monkeypatch.setenv("DEVMON_CONFIG_DIR", str(tmp_path / "config"))  # no profiles
    monkeypatch.delenv("DEVMON_API_KEY", raising=False)
    w = MainWindow(Settings(tmp_path / "settings.ini"))
    qtbot.addWidget(w)
    w.resize(1400, 900)
    w.show()
    yield w
    w.close()


@pytest.fixture
def read_only_copy(mirror_path, small_tmpfs):
    """A copy of the mirror on a filesystem mounted read-only (a tmpfs remounted ro)."""
    disk, remount = small_tmpfs("64m")
    shutil.copy(mirror_path, disk / "mirror.duckdb")
    remount("ro")
    return disk / "mirror.duckdb"


@pytest.fixture(scope="module")
def mirror(mirror_path):
    m = Mirror.open(mirror_path)
    yield m
    m.close()


@pytest.fixture(scope="module")
def devices(mirror) -> list[queries.GnssDevice]:
    return queries.gnss_devices(mirror)


@pytest.fixture(scope="module")
def runner(qapp, mirror):
    from gui.workers import TaskRunner

    r = TaskRunner(mirror)
    yield r
    r.shutdown()
    r.pool.shutdown(wait=True)
    r.mirror = None


@pytest.fixture(scope="session")
def changed_past(tmp_path_factory):
    """(a mirror synced before and after the ``changing-past`` service changed its past and
    metadata: a sensor deleted, a device no longer listed, ...; the service's picks), made
    once for the modules that look at what it changed (they only read it)."""
    from datetime import timedelta

    from support import NOW, SMALL, start_server, sync

    from devmon_sync.server import past
    from devmon_sync.server.contracts import CONTRACTS

    db = tmp_path_factory.mktemp("changed-past") / "changed.duckdb"
    for hours in (1, 12):
        with start_server(size=SMALL, now=NOW + timedelta(hours=hours),
                          contract=CONTRACTS["changing-past"]) as srv:
            assert sync(srv.base_url, db).status == "ok"
            picks = past.picks(srv.app.world)
    return db, picks

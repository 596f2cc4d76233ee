"""The Sync dialog and the connectivity probe, driven like a user would, against real reference
servers over loopback HTTP, a real DuckDB mirror file and a file-backed keyring in tmp_path."""

from __future__ import annotations

import os

os.environ.setdefault("QT_QPA_PLATFORM", "offscreen")  # before Qt is imported

import shutil
import socket
import time
from datetime import datetime, timezone
from pathlib import Path

import keyring
import pytest
from keyring.backends import fail
from PySide6.QtCore import QPoint, Qt, QTimer

from devmon_sync import credentials
from devmon_sync.server import FaultConfig, WorldSize
from devmon_sync.store import Mirror, StoreError
from devmon_sync.store.access import MirrorAccess
from gui.connectivity import Reachability, probe, probe_task, status_text
from gui.settings import Settings
from gui.sync_dialog import STOPPING, SyncDialog
from gui.workers import TaskRunner

from support import KEY, NOW, start_server, synced_mirror

SIZE = WorldSize(sites=2, devices=16, days=60)  # about 230,000 readings: a second of syncing
SLOW_SIZE = WorldSize(sites=2, devices=8, days=90)  # 6 data windows
SLOW = FaultConfig(slow_rate=1.0, slow_s=0.25)  # every answer a quarter second late
REVIEW_DIR = Path("/tmp/gui-review")
WAIT_MS = 60_000


# ----------------------------------------------------------------------------- fixtures


@pytest.fixture(autouse=True)
def isolated(file_keyring, tmp_path, monkeypatch):
    """``file_keyring`` (a plaintext keyring and a config dir in tmp_path) and a settings
    file there too: the user's own keyring, profiles and GUI settings are never touched."""
    monkeypatch.setenv("DEVMON_GUI_SETTINGS", str(tmp_path / "gui.ini"))
    return file_keyring


@pytest.fixture(scope="module")
def server():
    srv = start_server(size=SIZE)
    yield srv
    srv.stop()


@pytest.fixture(scope="module")
def slow_server():
    srv = start_server(size=SLOW_SIZE, faults=SLOW)
    yield srv
    srv.stop()


@pytest.fixture
def runner(tmp_path, qtbot):
    """What the main window has: a mirror held by nobody between reads (MirrorAccess) and a
    TaskRunner on it; the sync takes it for writing while it runs."""
    Mirror.open(tmp_path / "mirror.duckdb").close()
    runner = TaskRunner(MirrorAccess(tmp_path / "mirror.duckdb"),
                        expected_errors=(StoreError,))
    yield runner
    runner.shutdown()


def dialog_for(qtbot, runner, **kw) -> tuple[SyncDialog, list]:
    dialog = SyncDialog(runner, rate_limit_per_minute=0, **kw)
    qtbot.addWidget(dialog)
    reports: list = []
    dialog.synced.connect(reports.append)
    dialog.show()
    return dialog, reports


def sync_and_wait(qtbot, dialog) -> None:
    qtbot.mouseClick(dialog.sync_button, Qt.MouseButton.LeftButton)
    assert dialog.is_syncing()
    qtbot.waitUntil(lambda: not dialog.is_syncing(), timeout=WAIT_MS)


def closed_port_url() -> str:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]
    return f"http://127.0.0.1:{port}/v1"


def count(mirror, table: str) -> int:
    """Rows of ``table``, read from the file itself (``mirror``: its access or a Mirror)."""
    with Mirror.open(mirror.path, read_only=True) as m:
        return m._row(f"SELECT count(*) FROM {table}")[0]


def per_key(mirror, sql: str) -> dict[str, int]:
    with Mirror.open(mirror.path, read_only=True) as m:
        return {k: n for k, n in m.con.execute(sql).fetchall()}


READINGS_PER_PARAMETER = "SELECT parameter_uuid::VARCHAR, count(*) FROM readings GROUP BY 1"
EPOCHS_PER_SENSOR = "SELECT sensor_uuid::VARCHAR, count(*) FROM gnss_epochs GROUP BY 1"


def shot(dialog, tmp_path, name: str) -> Path:
    """Save a screenshot for review (tmp_path and /tmp/gui-review/)."""
    path = tmp_path / f"{name}.png"
    assert dialog.grab().save(str(path))
    REVIEW_DIR.mkdir(parents=True, exist_ok=True)
    shutil.copy(path, REVIEW_DIR / path.name)
    return path


# ----------------------------------------------------------------------------- profiles


def test_a_new_profile_keeps_its_key_in_the_keyring_not_in_the_file(qtbot, runner, isolated,
                                                                     tmp_path):
    dialog, _ = dialog_for(qtbot, runner)
    assert dialog.form_box.isVisible(), "with no profile yet, the form is open"
    assert not dialog.sync_button.isEnabled()
    shot(dialog, tmp_path, "sync-dialog-new-profile")
    qtbot.keyClicks(dialog.name_edit, "site-a")
    qtbot.keyClicks(dialog.url_edit, "http://127.0.0.1:9/v1")
    qtbot.keyClicks(dialog.key_edit, "secret-key-a")
    assert dialog.key_edit.echoMode() == dialog.key_edit.EchoMode.Password
    # the test keyring is a plaintext file: saving there needs the user's explicit consent
    assert dialog.plaintext_check.isVisible() and "keyring.cfg" in dialog.form_message.text()
    box = dialog.plaintext_check
    qtbot.mouseClick(box, Qt.MouseButton.LeftButton, pos=QPoint(8, box.height() // 2))
    assert dialog.plaintext_check.isChecked()
    qtbot.mouseClick(dialog.save_button, Qt.MouseButton.LeftButton)
    assert keyring.get_password(credentials.KEYRING_SERVICE, "site-a") == "secret-key-a"
    text = credentials.profiles_path().read_text()
    assert "127.0.0.1:9/v1" in text and "secret-key-a" not in text
    assert dialog.profile_combo.currentData() == "site-a"
    assert not dialog.form_box.isVisible() and dialog.key_edit.text() == ""
    assert dialog.sync_button.isEnabled()
    assert "Saved profile 'site-a'" in dialog.result_label.text()
    assert "keyring.cfg, as plain text" in dialog.result_label.text()  # never "the OS keyring"


def test_a_plaintext_keyring_is_not_used_without_consent(qtbot, runner, isolated):
    """Issue 15, point 6: the app saved the key to keyrings.alt's plaintext file and said
    "its key is in the OS keyring"."""
    dialog, _ = dialog_for(qtbot, runner)
    qtbot.keyClicks(dialog.name_edit, "site-a")
    qtbot.keyClicks(dialog.url_edit, "http://127.0.0.1:9/v1")
    qtbot.keyClicks(dialog.key_edit, "secret-key-a")
    qtbot.mouseClick(dialog.save_button, Qt.MouseButton.LeftButton)
    assert keyring.get_password(credentials.KEYRING_SERVICE, "site-a") is None
    assert not credentials.profiles_path().exists() or \
        "site-a" not in credentials.profiles_path().read_text()
    said = dialog.form_message.text()
    assert said.startswith("Nothing was saved: this machine has no OS keyring")
    assert "DEVMON_API_KEY" in said and "keyring.cfg" in said


def test_without_a_keyring_the_form_says_to_use_the_environment_variable(qtbot, runner):
    keyring.set_keyring(fail.Keyring())
    dialog, _ = dialog_for(qtbot, runner)
    dialog.name_edit.setText("site-a")
    dialog.url_edit.setText("https://a.example/v1")
    dialog.key_edit.setText("secret-key-a")
    qtbot.mouseClick(dialog.save_button, Qt.MouseButton.LeftButton)
    assert credentials.ENV_API_KEY in dialog.form_message.text()
    # the whole message is shown, not cut after its first line (the user's report)
    qtbot.wait(50)
    label = dialog.form_message
    assert label.height() >= label.heightForWidth(label.width()) > 1.5 * \
        label.fontMetrics().height(), (label.height(), label.heightForWidth(label.width()))
    assert not credentials.profiles_path().exists()
    assert dialog.profile_combo.count() == 0


def test_a_bad_address_is_refused_before_anything_is_saved(qtbot, runner):
    dialog, _ = dialog_for(qtbot, runner)
    dialog.name_edit.setText("site-a")
    dialog.url_edit.setText("http://monitoring.example.com/v1")  # the key would go in clear
    dialog.key_edit.setText("secret-key-a")
    assert not dialog.save_new_profile()
    assert "plain http" in dialog.form_message.text()
    assert credentials.list_profiles() == []


# ----------------------------------------------------------------------------- syncing


def test_a_full_sync_fills_the_mirror_and_the_gui_stays_responsive(qtbot, runner, server,
                                                                   tmp_path):
    credentials.save_profile("local", server.base_url, KEY)
    settings = Settings(tmp_path / "gui.ini")
    dialog, reports = dialog_for(qtbot, runner, settings=settings)
    assert dialog.profile_combo.currentData() == "local" and not dialog.form_box.isVisible()
    values: list[int] = []
    dialog.progress.valueChanged.connect(values.append)
    ticks: list[float] = []
    timer = QTimer()
    timer.setInterval(10)
    timer.timeout.connect(lambda: ticks.append(time.perf_counter()))
    timer.start()
    t0 = time.perf_counter()
    sync_and_wait(qtbot, dialog)
    elapsed = time.perf_counter() - t0
    timer.stop()
    gaps = [b - a for a, b in zip(ticks, ticks[1:])]
    print(f"\nGUI thread during a {elapsed:.2f} s sync: {len(ticks)} ticks of a 10 ms timer, "
          f"longest gap {max(gaps) * 1000:.0f} ms")
    assert len(ticks) >= 20 and max(gaps) < 0.25

    [report] = reports
    assert report.status == "ok" and report.readings_rows > 100_000 and report.epoch_rows > 0
    assert count(runner.mirror, "readings") == report.readings_rows
    assert count(runner.mirror, "gnss_epochs") == report.epoch_rows
    assert dialog.progress.value() == dialog.progress.maximum() == 100
    assert any(0 < v < 100 for v in values), "the bar moved through the windows"
    result = dialog.result_label.text()
    assert f"Synced {report.readings_rows:,} readings and {report.epoch_rows:,} epochs" in result
    assert settings.value("sync/profile") == "local"
    shot(dialog, tmp_path, "sync-dialog-done")

    sync_and_wait(qtbot, dialog)  # again: nothing new
    assert reports[-1].status == "ok" and reports[-1].windows == 0
    assert dialog.result_label.text().startswith("Up to date")


def test_cancel_keeps_whole_chunks_and_a_second_sync_completes_the_mirror(qtbot, runner,
                                                                          slow_server, tmp_path):
    credentials.save_profile("slow", slow_server.base_url, KEY)
    dialog, reports = dialog_for(qtbot, runner)
    qtbot.mouseClick(dialog.sync_button, Qt.MouseButton.LeftButton)
    # the first data window is committed once the bar shows the second one
    qtbot.waitUntil(lambda: dialog.progress.maximum() == 100 and dialog.progress.value() > 0,
                    timeout=WAIT_MS)
    assert "window 2 of" in dialog.detail_label.text() and "rows" in dialog.detail_label.text()
    shot(dialog, tmp_path, "sync-dialog-mid-sync")
    qtbot.mouseClick(dialog.cancel_button, Qt.MouseButton.LeftButton)
    assert dialog.detail_label.text().startswith(STOPPING)
    assert not dialog.cancel_button.isEnabled()
    qtbot.waitUntil(lambda: not dialog.is_syncing(), timeout=WAIT_MS)
    shot(dialog, tmp_path, "sync-dialog-cancelled")

    [report] = reports
    assert report.status == "cancelled" and 1 <= report.windows < len(report.plan)
    assert dialog.result_label.text().startswith(
        "Cancelled: everything committed so far is kept")
    assert "Sync again to resume" in dialog.result_label.text()
    mirror = runner.mirror
    # nothing half-written: each stream holds exactly the rows its committed windows recorded
    ledger = "SELECT substr(stream, {n}), sum(rows) FROM sync_windows WHERE stream LIKE " \
             "'{kind}:%' GROUP BY 1 HAVING sum(rows) > 0"
    assert per_key(mirror, READINGS_PER_PARAMETER) == \
        per_key(mirror, ledger.format(n=len("readings:") + 1, kind="readings"))
    assert per_key(mirror, EPOCHS_PER_SENSOR) == \
        per_key(mirror, ledger.format(n=len("gnss:") + 1, kind="gnss"))
    assert 0 < count(mirror, "readings") or 0 < count(mirror, "gnss_epochs")

    sync_and_wait(qtbot, dialog)
    assert reports[-1].status == "ok"
    fresh = Mirror.open(synced_mirror(tmp_path / "fresh.duckdb", SLOW_SIZE), read_only=True)
    try:
        assert per_key(mirror, READINGS_PER_PARAMETER) == per_key(fresh, READINGS_PER_PARAMETER)
        assert per_key(mirror, EPOCHS_PER_SENSOR) == per_key(fresh, EPOCHS_PER_SENSOR)
    finally:
        fresh.close()


def test_closing_while_syncing_asks_then_stops_and_still_reports(qtbot, runner, slow_server,
                                                                 monkeypatch):
    credentials.save_profile("slow", slow_server.base_url, KEY)
    dialog, reports = dialog_for(qtbot, runner)
    asked = []
    monkeypatch.setattr(dialog, "confirm_stop", lambda: asked.append(1) or False)
    qtbot.mouseClick(dialog.sync_button, Qt.MouseButton.LeftButton)
    dialog.close()
    assert asked and dialog.isVisible() and not dialog.state.cancelled, "'No' keeps it open"
    monkeypatch.setattr(dialog, "confirm_stop", lambda: True)
    dialog.close()
    assert not dialog.isVisible()
    qtbot.waitUntil(lambda: bool(reports), timeout=WAIT_MS)
    assert reports[0].status == "cancelled"


def test_a_refused_key_says_so_and_leaves_the_mirror_unchanged(qtbot, runner, server,
                                                               tmp_path):
    credentials.save_profile("bad", server.base_url, "not-the-key")
    dialog, reports = dialog_for(qtbot, runner)
    sync_and_wait(qtbot, dialog)
    text = dialog.result_label.text()
    assert "refused the key of profile 'bad'" in text and server.base_url in text
    assert "Traceback" not in text and "not-the-key" not in text
    assert "c62828" in dialog.result_label.styleSheet()
    shot(dialog, tmp_path, "sync-dialog-refused")
    for table in ("sites", "devices", "readings", "gnss_epochs", "sync_windows"):
        assert count(runner.mirror, table) == 0, table
    assert reports[0].status == "failed"


def test_an_unreachable_server_says_no_connection(qtbot, runner):
    url = closed_port_url()
    credentials.save_profile("gone", url, KEY)
    dialog, _ = dialog_for(qtbot, runner, client_options={"max_retries": 1,
                                                          "backoff_base_s": 0.01})
    sync_and_wait(qtbot, dialog)
    text = dialog.result_label.text()
    assert text.startswith(f"No connection to {url}") and "Traceback" not in text
    assert count(runner.mirror, "readings") == 0


def test_cancel_cuts_a_retry_wait_short(qtbot, runner):
    """The client's backoff waits (up to a minute with the default 8 retries) end on Cancel."""
    credentials.save_profile("gone", closed_port_url(), KEY)
    dialog, reports = dialog_for(qtbot, runner, client_options={"backoff_base_s": 30.0})
    qtbot.mouseClick(dialog.sync_button, Qt.MouseButton.LeftButton)
    qtbot.waitUntil(lambda: "Waiting" in dialog.detail_label.text() or not dialog.is_syncing(),
                    timeout=WAIT_MS)
    t0 = time.perf_counter()
    qtbot.mouseClick(dialog.cancel_button, Qt.MouseButton.LeftButton)
    qtbot.waitUntil(lambda: not dialog.is_syncing(), timeout=5000)
    assert time.perf_counter() - t0 < 2.0
    assert reports[-1].status == "cancelled"
    assert dialog.result_label.text().startswith("Cancelled")


def test_the_environment_key_syncs_with_an_address_and_no_profile(qtbot, runner, server,
                                                                  monkeypatch):
    monkeypatch.setenv(credentials.ENV_API_KEY, KEY)
    dialog, reports = dialog_for(qtbot, runner)
    assert dialog.profile_combo.count() == 1 and dialog.profile_combo.currentData() is None
    assert dialog.address_edit.isVisible() and not dialog.form_box.isVisible()
    dialog.address_edit.setText(server.base_url)
    sync_and_wait(qtbot, dialog)
    assert reports[-1].status == "ok", dialog.result_label.text()


# ----------------------------------------------------------------------------- connectivity


def test_the_probe_finds_a_reachable_server(server, qtbot, runner):
    credentials.save_profile("local", server.base_url, KEY)
    result = probe("local")
    assert result == Reachability(True, f"Online: {server.base_url} (profile 'local')",
                                  server.base_url)
    done = []
    runner.submit(probe_task("local"), on_done=done.append)  # as the main window runs it
    qtbot.waitUntil(lambda: bool(done), timeout=WAIT_MS)
    assert done[0].reachable


def test_offline_the_probe_answers_at_once_and_names_the_address(qtbot):
    url = closed_port_url()
    credentials.save_profile("gone", url, KEY)
    t0 = time.perf_counter()
    result = probe("gone")
    assert time.perf_counter() - t0 < 2.0
    assert not result.reachable
    assert result.message == f"Offline: no connection to {url}; browsing the mirror as of its " \
                             f"last sync"
    text = status_text(result, datetime(2025, 12, 29, 8, 30, tzinfo=timezone.utc), now=NOW)
    assert url in text and "as of its last sync (2025-12-29 08:30 UTC, 3 days ago)" in text
    assert "never synced" in status_text(result, None)


def test_the_probe_names_a_refused_key_and_a_missing_profile(server):
    assert probe().message.startswith("No service profile yet")
    credentials.save_profile("bad", server.base_url, "not-the-key")
    result = probe("bad")
    assert not result.reachable
    assert result.message.startswith("The key of profile 'bad' was refused")
    assert "never synced" in status_text(result, None)
    online = status_text(Reachability(True, "Online: x", "x"),
                         datetime(2026, 1, 1, tzinfo=timezone.utc), now=NOW)
    assert online == "Online: x · last sync 2026-01-01 00:00 UTC, just now"


def test_an_in_app_sync_is_the_windows_own_says_online_lists_every_rover_at_a_level(
        qtbot, server, tmp_path, monkeypatch):
    """The user's reports: after a successful sync from the app the status bar still said
    "Not connected" (the probe at opening had no profile to probe with), and the window never
    showed the service the mirror comes from; the app called its own sync "Mirror updated by
    another program"; and it listed 1 of the 2 rovers at emergency (only those its sync
    evaluated again: a sync that brings nothing new listed none)."""
    from devmon_sync.analyze.alarm_history import evaluate_alarms
    from devmon_sync.store import queries
    from gui.main_window import MainWindow
    from gui.settings import Settings

    from support import rovers_by_scenario

    monkeypatch.setenv(credentials.ENV_API_KEY, KEY)
    db = tmp_path / "window.duckdb"
    Mirror.open(db).close()
    window = MainWindow(Settings(tmp_path / "settings.ini"))
    qtbot.addWidget(window)
    window.show()
    window.watch.timer.setInterval(0)  # it looks at every turn of the event loop: it cannot
    # miss the moment DuckDB writes the file while closing it after the sync
    said: list[str] = []
    window.statusBar().messageChanged.connect(said.append)
    updated: list[int] = []
    window.watch.updated.connect(lambda: updated.append(1))
    with qtbot.waitSignal(window.opened, timeout=WAIT_MS):
        assert window.open_file(str(db))
    qtbot.waitUntil(lambda: "checking" not in window.net_label.text(), timeout=WAIT_MS)
    assert "Online" not in window.net_label.text()
    window.open_sync_dialog()
    dialog = window.sync_dialog
    dialog.address_edit.setText(server.base_url)
    with qtbot.waitSignal(window.opened, timeout=WAIT_MS):  # the window reads it again
        sync_and_wait(qtbot, dialog)
    assert dialog.job.outcome.report.status == "ok", dialog.result_label.text()
    qtbot.waitUntil(lambda: "checking" not in window.net_label.text(), timeout=WAIT_MS)
    qtbot.wait(300)  # the watch keeps looking
    assert not [m for m in said if "another program" in m], said
    assert not updated
    assert window.net_label.text().startswith("Online"), window.net_label.toolTip()
    assert server.base_url.split("/v1")[0] in window.net_label.toolTip()
    assert server.base_url in window.overview_view.header.text()  # the mirror's service
    assert server.base_url in window.sync_label.toolTip()

    rovers = rovers_by_scenario(window.overview["gnss"])
    at_emergency = [rovers["accelerating"], rovers["seasonal"]]
    from gui.mirror_watch import own_write

    with own_write(window.mirror) as m:  # as the Alarm levels dialog writes them
        for rover in at_emergency:
            queries.set_alarm_levels(m, rover.serial_number, "displacement:horizontal",
                                     {"alert": 2.0, "alarm": 3.0, "emergency": 3.5})
        evaluate_alarms(m)
    sync_and_wait(qtbot, dialog)  # nothing new: no rover evaluated again
    text = dialog.result_label.text()
    assert text.startswith("Up to date"), text
    for rover in at_emergency:
        line = next((x for x in text.splitlines() if rover.display_name in x), "")
        assert rover.serial_number in line and "emergency" in line, text
    label = dialog.result_label
    assert label.height() >= label.heightForWidth(label.width())  # every line shown
    shot(dialog, tmp_path, "sync-dialog-levels")
    dialog.close()
    window.close()

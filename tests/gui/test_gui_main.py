"""The main window on a mirror synced from the reference server: real widgets (offscreen),
real DuckDB files, screenshots of the main views saved for review.

Size: about 1000 lines, because the window's tests share the one mirror this module syncs
(a second module would sync it again, which the CI budget cannot afford)."""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
import time
from datetime import datetime, timedelta, timezone
from pathlib import Path

import numpy as np
import pytest

from devmon_sync.server import WorldSize
from devmon_sync.store import Mirror, browse

from support import flip_block_bytes, rovers_by_scenario, synced_mirror
from support import devmon as run_devmon

pytest.importorskip("pytestqt")

from PySide6.QtCore import QPointF, Qt  # noqa: E402
from PySide6.QtGui import QDropEvent  # noqa: E402
from PySide6.QtTest import QTest  # noqa: E402
from PySide6.QtWidgets import QApplication, QLabel, QPushButton  # noqa: E402

from gui.browser import KEY_ROLE  # noqa: E402
from gui.health_view import SORT_ROLE  # noqa: E402
from gui.main_window import MainWindow  # noqa: E402
from gui.settings import Settings  # noqa: E402
from qt_input import button, click_tab, data_point, drag, open_mirror, wheel  # noqa: E402

WORLD = WorldSize(sites=3, devices=16, days=60)
REVIEW = os.environ.get("DEVMON_SCREENSHOTS")  # also copy screenshots here when set


@pytest.fixture(scope="module")
def mirror_path(tmp_path_factory):
    return synced_mirror(tmp_path_factory.mktemp("gui") / "mirror.duckdb", WORLD)


def _open_and_plot(qtbot, window, db, param=None):
    """Open the mirror and plot one parameter (``_a_parameter``'s unless given)."""
    param = param or _a_parameter(db)
    open_mirror(qtbot, window, db)
    with qtbot.waitSignal(window.plot.redrawn, timeout=20000):
        window.plot.add_parameters([param.uuid])
    return param


def _shot(widget, tmp_path, name: str) -> None:
    from PySide6.QtWidgets import QApplication

    QApplication.processEvents()  # pending layouts (the status bar) first
    out = tmp_path / f"{name}.png"
    assert widget.grab().save(str(out))
    assert out.stat().st_size > 10_000  # a drawn view, not an empty grab
    if REVIEW:
        os.makedirs(REVIEW, exist_ok=True)
        shutil.copy(out, os.path.join(REVIEW, out.name))


def _expected(db):
    with Mirror.open(db, read_only=True) as m:
        return browse.device_tree(m)


def test_opening_a_mirror_fills_the_browser_and_health_table(qtbot, window, db, tmp_path):
    sites = _expected(db)
    open_mirror(qtbot, window, db)
    devices = sum(len(s.devices) for s in sites)
    assert window.browser.visible_device_count() == devices == WORLD.devices
    assert window.health.model_.rowCount() == devices
    window.browser.filter_box.setText(sites[0].devices[0].serial_number)
    assert window.browser.visible_device_count() == 1
    window.browser.filter_box.clear()
    assert "last synced" in window.sync_label.text()
    # no profile, no network: the status bar says the mirror is browsed as of its last sync
    qtbot.waitUntil(lambda: "checking" not in window.net_label.text(), timeout=10000)
    assert "browsing the mirror as of its last sync" in window.net_label.toolTip()
    _shot(window, tmp_path, "main-window")


def test_selecting_a_device_shows_its_details(qtbot, window, db, tmp_path):
    device = _expected(db)[0].devices[0]
    open_mirror(qtbot, window, db)
    window.tabs.setCurrentWidget(window.device_panel)
    window.show_device(device.serial_number)
    qtbot.waitUntil(lambda: device.serial_number in window.device_panel.title.text(),
                    timeout=10000)
    assert window.device_panel.values["connection_status"] == (device.connection_status
                                                               or "-")
    _shot(window, tmp_path, "device-panel")


def _a_parameter(db, min_readings: int = 500, with_device: bool = False):
    for site in _expected(db):
        for device in site.devices:
            for sensor in device.sensors:
                for p in sensor.parameters:
                    if p.readings >= min_readings:
                        return (device, p) if with_device else p
    raise AssertionError("no parameter with readings")


def _truth(db, uuid: str, *window_range):
    """A parameter's readings read from the file itself, not through the window."""
    with Mirror.open(db, read_only=True) as m:
        return browse.readings(m, uuid, *window_range)


def test_plotting_a_parameter_draws_exactly_the_mirrors_data(qtbot, window, db, tmp_path):
    param = _a_parameter(db)
    open_mirror(qtbot, window, db)
    with qtbot.waitSignal(window.plot.redrawn, timeout=20000):
        window.browser.parameters_activated.emit([param.uuid])
    (line,) = window.plot._lines(param.uuid)
    full = _truth(db, param.uuid)
    plotted = window.plot.params[param.uuid]
    if full["ts"].size <= 2 * window.plot._buckets():  # small enough to draw undecimated
        np.testing.assert_array_equal(plotted.t, full["ts"])
        np.testing.assert_array_equal(line.get_ydata(), full["value"])
    else:  # decimated: the extremes of the whole series are drawn
        assert np.nanmax(line.get_ydata()) == np.nanmax(full["value"])
        assert np.nanmin(line.get_ydata()) == np.nanmin(full["value"])
    assert param.unit in window.plot.axes()[0].get_ylabel()
    _shot(window, tmp_path, "plot")


def test_zooming_requeries_the_visible_range(qtbot, window, db):
    param = _open_and_plot(qtbot, window, db)
    start, end = window.plot.current_range()
    queries = window.plot._queries
    with qtbot.waitSignal(window.plot.redrawn, timeout=20000):
        window.plot.show_last(timedelta(days=7))
    assert window.plot._queries == queries + 1
    lo, hi = window.plot.current_range()
    assert hi - lo == pytest.approx(timedelta(days=7), abs=timedelta(seconds=1))
    visible = _truth(db, param.uuid, lo, hi)
    plotted = window.plot.params[param.uuid]
    inside = (plotted.t >= visible["ts"][0]) & (plotted.t <= visible["ts"][-1])
    np.testing.assert_array_equal(plotted.t[inside], visible["ts"])  # 7 days: full resolution
    assert window.plot.params[param.uuid].stats["count"] == visible["ts"].size
    # a pan through matplotlib (as the toolbar does) re-queries after a short pause
    ax = window.plot.axes()[0]
    x0, x1 = ax.get_xlim()
    with qtbot.waitSignal(window.plot.redrawn, timeout=20000):
        ax.set_xlim(x0 - 1, x1 - 1)
    assert window.plot._queries == queries + 2


def test_exports_write_png_pdf_and_csv(qtbot, window, db, tmp_path):
    param = _open_and_plot(qtbot, window, db)
    window.tabs.setCurrentWidget(window.plot)
    for name in ("plot.png", "plot.pdf"):
        assert window.export_plot(str(tmp_path / name)), window.last_error
        assert (tmp_path / name).stat().st_size > 5000
    assert (tmp_path / "plot.pdf").read_bytes().startswith(b"%PDF")
    assert window.export_csv(str(tmp_path / "data.csv")), window.last_error
    lines = (tmp_path / "data.csv").read_text().splitlines()
    assert lines[0] == "time_utc,device,parameter,value,unit"
    assert len(lines) - 1 == _truth(db, param.uuid)["ts"].size


def test_bad_files_get_clear_messages_and_the_window_keeps_going(qtbot, window, db,
                                                                 tmp_path):
    missing = tmp_path / "nope.duckdb"
    assert not window.open_file(str(missing))
    assert "There is no file at" in window.last_error and str(missing) in window.last_error
    corrupt = tmp_path / "corrupt.duckdb"
    corrupt.write_bytes(os.urandom(64 * 1024))
    assert not window.open_file(str(corrupt))
    assert "not a usable DuckDB mirror" in window.last_error
    newer = tmp_path / "newer.duckdb"
    shutil.copy(db, newer)
    with Mirror.open(newer) as m:
        m.con.execute("INSERT INTO schema_migrations VALUES (999, 'future', now())")
    assert not window.open_file(str(newer))
    assert "newer devmon" in window.last_error
    open_mirror(qtbot, window, db)  # and a good file still opens afterwards
    assert window.mirror is not None


def test_a_damaged_file_is_named_and_never_written(qtbot, window, db, tmp_path):
    """A copy whose readings block fails DuckDB's checksum (a disk's damage): refused at
    opening in the store's one line, the file not changed; a good file opens after."""
    damaged = tmp_path / "damaged.duckdb"
    shutil.copy(db, damaged)
    flip_block_bytes(damaged, "readings")
    before = damaged.read_bytes()
    assert not window.open_file(str(damaged))
    assert "is damaged" in window.last_error and "Restore the file" in window.last_error
    assert "Corrupt" not in window.last_error and "Unexpected" not in window.last_error
    assert damaged.read_bytes() == before
    open_mirror(qtbot, window, db)
    assert window.mirror is not None


def test_a_file_locked_by_another_process_is_named(qtbot, window, db):
    code = ("import sys, time; from devmon_sync.store import Mirror; "
            "m = Mirror.open(sys.argv[1]); print('open', flush=True); time.sleep(30)")
    holder = subprocess.Popen([sys.executable, "-c", code, str(db)], stdout=subprocess.PIPE,
                              text=True)
    try:
        assert holder.stdout.readline().strip() == "open"
        assert not window.open_file(str(db))
        assert "in use by another devmon process" in window.last_error
    finally:
        holder.kill()
        holder.wait()


def test_recent_files_and_layout_are_remembered(qtbot, db, tmp_path):
    settings_file = tmp_path / "settings.ini"
    param = _a_parameter(db)
    first = MainWindow(Settings(settings_file))
    qtbot.addWidget(first)
    open_mirror(qtbot, first, db)
    first.tabs.setCurrentIndex(2)
    device = first.overview["sites"][0].devices[0].serial_number
    first.show_device(device)
    with qtbot.waitSignal(first.plot.redrawn, timeout=20000):
        first.plot.add_parameters([param.uuid])
    first.close()
    second = MainWindow(Settings(settings_file))
    qtbot.addWidget(second)
    assert second.settings.last_file() == str(db.resolve())
    assert second.tabs.currentIndex() == 2
    assert [a.text() for a in second.recent_menu.actions()] == [str(db.resolve())]
    with qtbot.waitSignal(second.plot.redrawn, timeout=20000):  # the same plot again
        second.open_initial(None)
    assert second.mirror is not None and second.mirror.path == str(db.resolve())
    assert list(second.plot.params) == [param.uuid]
    qtbot.waitUntil(lambda: device in second.device_panel.title.text(), timeout=10000)
    second.close()


def test_devmon_gui_without_qt_says_what_to_install(tmp_path):
    """The CLI plugin imports no Qt until the command runs (the sync runs without it)."""
    code = ("import sys; sys.modules['PySide6'] = None; "
            "from devmon_sync.cli import main; sys.exit(main(['gui', '--db', 'x.duckdb']))")
    r = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True,
                       timeout=60)
    assert r.returncode == 2 and "pip install" in r.stderr and "Traceback" not in r.stderr
    r = subprocess.run([sys.executable, "-c", "import sys; from devmon_sync.cli import "
                        "build_parser; build_parser(); print(sorted(m for m in sys.modules "
                        "if m.startswith('PySide6')))"], capture_output=True, text=True,
                       timeout=60)
    assert r.stdout.strip() == "[]", r.stdout[-300:] + r.stderr[-300:]


def test_parameter_alarm_levels_set_by_command_are_drawn(qtbot, window, db):
    device, param = _a_parameter(db, with_device=True)
    with Mirror.open(db, read_only=True) as m:
        values = browse.readings(m, param.uuid)["value"]
    alert, alarm = (float(np.nanpercentile(values, q)) for q in (80, 95))
    r = run_devmon("alarms", "--db", str(db), "--device", device.serial_number, "--parameter",
                   f"{param.uuid}:alert={alert!r},alarm={alarm!r}", timeout=60)
    assert r.returncode == 0 and f"parameter:{param.uuid}" in r.stdout, r.stderr
    _open_and_plot(qtbot, window, db, param)
    drawn = {line.get_gid(): line.get_ydata()[0] for ax in window.plot.axes()
             for line in ax.get_lines() if str(line.get_gid()).startswith("threshold:")}
    unit = param.unit or ""
    assert drawn == {f"threshold:{unit}:alert": alert, f"threshold:{unit}:alarm": alarm}


def test_the_shared_cursor_reads_out_the_plotted_value(qtbot, window, db):
    from matplotlib import dates as mdates
    from matplotlib.backend_bases import MouseEvent

    window.tabs.setCurrentWidget(window.plot)
    param = _open_and_plot(qtbot, window, db)
    with qtbot.waitSignal(window.plot.redrawn, timeout=20000):
        window.plot.show_last(timedelta(days=2))  # full resolution: one reading per pixel or less
    plotted = window.plot.params[param.uuid]
    inside = np.flatnonzero(plotted.t >= plotted.t[-1] - np.timedelta64(1, "D"))
    i = int(inside[inside.size // 2])
    ax = window.plot.axes()[0]
    window.plot.canvas.draw()
    px, py = ax.transData.transform((mdates.date2num(plotted.t[i]), plotted.values[i]))
    event = MouseEvent("motion_notify_event", window.plot.canvas, px, py)
    window.plot.canvas.callbacks.process("motion_notify_event", event)
    assert f"{param.name} = {plotted.values[i]:.6g}" in window.plot.readout.text()
    assert all(line.get_gid() == "cursor" for line in window.plot._cursor_lines)


def test_the_custom_range_shows_exactly_that_period(qtbot, window, db):
    from PySide6.QtCore import QDateTime

    _open_and_plot(qtbot, window, db)
    start, end = window.plot.current_range()
    lo = start + (end - start) / 3
    hi = lo + timedelta(days=3)
    for edit, t in ((window.plot.start_edit, lo), (window.plot.end_edit, hi)):
        edit.setDateTime(QDateTime.fromSecsSinceEpoch(int(t.timestamp()), edit.timeZone()))
    with qtbot.waitSignal(window.plot.redrawn, timeout=20000):
        window.plot._apply_custom_range()
    shown = window.plot.current_range()
    assert abs(shown[0] - lo) < timedelta(minutes=1) and abs(shown[1] - hi) < timedelta(minutes=1)


def _parameters_of_two_devices(db):
    """Two parameters with readings on two different devices, of different units if any."""
    found = []
    for site in _expected(db):
        for device in site.devices:
            for sensor in device.sensors:
                for p in sensor.parameters:
                    if p.readings >= 100 and all(d is not device for d, _ in found):
                        if not found or p.unit != found[0][1].unit:
                            found.append((device, p))
                    if len(found) == 2:
                        return found
    raise AssertionError("no two parameters of two devices")


def test_parameters_dragged_from_two_devices_stack_on_linked_time_axes(qtbot, window, db,
                                                                       tmp_path):
    (d1, p1), (d2, p2) = _parameters_of_two_devices(db)
    open_mirror(qtbot, window, db)
    window.tabs.setCurrentWidget(window.plot)
    model = window.browser.sites_model
    indexes = [model.match(model.index(0, 0), Qt.ItemDataRole.UserRole + 2, p.uuid, 1,
                           Qt.MatchFlag.MatchRecursive | Qt.MatchFlag.MatchExactly)[0]
               for p in (p1, p2)]
    mime = model.mimeData(indexes)  # what dragging the two rows carries
    drop = QDropEvent(QPointF(200, 200), Qt.DropAction.CopyAction, mime,
                      Qt.MouseButton.LeftButton, Qt.KeyboardModifier.NoModifier)
    with qtbot.waitSignal(window.plot.redrawn, timeout=20000):
        window.plot.canvas.dropEvent(drop)
    assert set(window.plot.params) == {p1.uuid, p2.uuid}
    axes = window.plot.axes()
    assert len(axes) == 2  # two units, stacked
    assert axes[1] in axes[0].get_shared_x_axes().get_siblings(axes[0])  # linked time axes
    labels = " ".join(ax.get_ylabel() for ax in axes)
    assert (p1.unit or "") in labels and (p2.unit or "") in labels
    with qtbot.waitSignal(window.plot.redrawn, timeout=20000):
        window.plot.show_last(timedelta(days=3))
    assert axes[1].get_xlim() == axes[0].get_xlim()
    _shot(window, tmp_path, "plot-two-devices")


def test_the_health_table_sorts_numbers_as_numbers(qtbot, window, db, tmp_path):
    open_mirror(qtbot, window, db)
    window.tabs.setCurrentWidget(window.health)
    health = window.overview["health"]
    column = health.keys.index("battery_pct")
    window.health.sortByColumn(column, Qt.SortOrder.DescendingOrder)
    shown = [window.health.proxy.index(r, column).data(SORT_ROLE)
             for r in range(window.health.proxy.rowCount())]
    assert shown == sorted(shown, reverse=True)
    values = [v for v in health.column("battery_pct") if v is not None]
    assert max(values) == shown[0]
    _shot(window, tmp_path, "site-health")


def test_the_groups_view_nests_groups_and_lists_ungrouped_devices(qtbot, window, db,
                                                                   tmp_path):
    with Mirror.open(db, read_only=True) as m:
        groups = browse.group_tree(m)
    open_mirror(qtbot, window, db)
    model = window.browser.groups_model

    def count(node) -> int:
        return 1 + sum(count(c) for c in node.children)

    roots = [model.item(r) for r in range(model.rowCount())]
    expected_roots = [g.name for g in groups.roots] + (
        [f"Ungrouped devices ({len(groups.ungrouped)})"] if groups.ungrouped else [])
    assert [r.text() for r in roots] == expected_roots
    nested = [g for g in groups.roots if g.children]
    assert nested, "the reference world has nested groups"
    item = roots[groups.roots.index(nested[0])]
    child_names = [item.child(r).text() for r in range(item.rowCount())]
    assert [c.name for c in nested[0].children] == child_names[:len(nested[0].children)]
    window.browser.tabs.setCurrentWidget(window.browser.groups_view)
    window.browser.groups_view.expandAll()
    _shot(window, tmp_path, "groups")


def test_selecting_a_rover_in_the_browser_analyses_it_in_the_gnss_tab(qtbot, window, db,
                                                                      tmp_path):
    rover = next(d for s in _expected(db) for d in s.devices
                 if d.is_gnss_rover and "creep" in d.display_name)
    open_mirror(qtbot, window, db)
    window.tabs.setCurrentWidget(window.gnss)
    with qtbot.waitSignal(window.gnss.analysed, timeout=30000):
        window.browser.devices_selected.emit([rover.serial_number])
    shown = window.gnss.shown_analysis()
    assert shown is not None and shown.serial_number == rover.serial_number
    assert window.export_plot(str(tmp_path / "gnss.pdf")), window.last_error
    assert window.export_csv(str(tmp_path / "gnss.csv")), window.last_error
    rows = (tmp_path / "gnss.csv").read_text().splitlines()
    assert len(rows) - 1 == shown.t_all.size  # one row per received epoch
    # File → Export report: devmon report with the tab's choices, made on a worker
    options = window.report_options()
    assert options.devices == (rover.serial_number,) and options.method == "midas"
    with qtbot.waitSignal(window.report_written, timeout=120000) as written:
        assert window.export_report(str(tmp_path / "report.pdf"), str(tmp_path / "png"))
    result = written.args[0]
    assert (tmp_path / "report.pdf").read_bytes().startswith(b"%PDF") and result.pages >= 4
    assert any(rover.serial_number in p.name for p in result.png_paths)
    assert {s.kind for s in result.sections} >= {"cover", "summary", "device", "methods"}
    dialog = window.result_dialog  # the report announced, one click from being opened
    assert dialog.isVisible() and dialog.pdf == tmp_path / "report.pdf"
    assert str(tmp_path / "report.pdf") in dialog.findChildren(QLabel)[0].text()
    dialog.close()
    _shot(window, tmp_path, "main-window-gnss")


def test_devmon_gui_opens_the_file_and_closes_cleanly(db, tmp_path):
    """The real entry point, in its own process: `devmon gui --db FILE` opens the mirror
    (remembered in the settings file) and the process ends without a crash when the window
    closes (the PySide6 6.12.0 refcount bug aborted here)."""
    code = (
        "import sys; from PySide6.QtCore import QTimer; from gui.app import make_app; "
        "app = make_app(); "
        "QTimer.singleShot(4000, lambda: [w.close() for w in app.topLevelWidgets()]); "
        "from devmon_sync.cli import main; sys.exit(main(['gui', '--db', sys.argv[1]]))")
    env = {**os.environ, "DEVMON_GUI_SETTINGS": str(tmp_path / "settings.ini"),
           "DEVMON_CONFIG_DIR": str(tmp_path / "config"), "QT_QPA_PLATFORM": "offscreen"}
    r = subprocess.run([sys.executable, "-c", code, str(db)], capture_output=True, text=True,
                       timeout=120, env=env)
    assert r.returncode == 0, r.stderr[-2000:]
    assert "Traceback" not in r.stderr and "Fatal" not in r.stderr
    assert str(db.resolve()) in (tmp_path / "settings.ini").read_text()


def test_sigterm_closes_the_app_as_its_close_button_does(db, tmp_path):
    """A session ending sends SIGTERM: the window closes (settings saved) and the process
    ends cleanly, instead of dying mid-write or ignoring it."""
    import signal

    env = {**os.environ, "DEVMON_GUI_SETTINGS": str(tmp_path / "settings.ini"),
           "DEVMON_CONFIG_DIR": str(tmp_path / "config"), "QT_QPA_PLATFORM": "offscreen"}
    proc = subprocess.Popen([sys.executable, "-m", "devmon_sync", "gui", "--db", str(db)],
                            stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, env=env)
    settings = tmp_path / "settings.ini"
    deadline = time.monotonic() + 60
    while not (settings.exists() and str(db.resolve()) in settings.read_text()):
        assert proc.poll() is None and time.monotonic() < deadline, proc.stderr.read()[-2000:]
        time.sleep(0.2)
    proc.send_signal(signal.SIGTERM)
    _, err = proc.communicate(timeout=60)
    assert proc.returncode == 0, err[-2000:]
    assert "Traceback" not in err, err
    assert "window/geometry" in settings.read_text() or "geometry" in settings.read_text()


def test_the_demo_runs_from_the_help_menu_and_opens_its_mirror(qtbot, window, tmp_path,
                                                               monkeypatch):
    """A new user with no mirror: Help → Run the demo syncs the built-in server's world,
    writes the report and opens the result, on a worker (the window stays usable)."""
    import devmon_sync.demo as demo

    real = demo.demo_pipeline
    monkeypatch.setattr(demo, "demo_pipeline",  # a smaller world than the menu's, for time
                        lambda out, **kw: real(out, 1, 4, 20, 42, **kw))
    action = next(a for a in window.menuBar().actions()[-1].menu().actions()
                  if "demo" in a.text())
    ticks = []
    from PySide6.QtCore import QTimer
    timer = QTimer(interval=10)
    timer.timeout.connect(lambda: ticks.append(time.perf_counter()))
    timer.start()
    import gui.main_window as main_window

    monkeypatch.setattr(main_window, "data_dir", lambda: tmp_path)  # the demo in tmp_path/demo
    with qtbot.waitSignal(window.demo_finished, timeout=300000) as done:
        action.trigger()
        with qtbot.waitSignal(window.opened, timeout=300000):
            pass
    timer.stop()
    result = done.args[0]
    assert result.report_pdf.read_bytes().startswith(b"%PDF") and result.pages > 3
    assert window.mirror is not None and window.mirror.path == str(result.mirror_path)
    assert window.browser.visible_device_count() == 4
    assert len(ticks) > 50  # the GUI thread kept ticking while the demo ran
    assert result.mirror_path == tmp_path / "demo" / "mirror.duckdb"
    # the result: a dialog with the report one click away and the rovers, fastest first
    dialog = window.result_dialog
    assert dialog.isVisible() and dialog.pdf == result.report_pdf
    summary = dialog.findChildren(QLabel)[0].text()
    assert result.readings_rows > 0 and f"{result.readings_rows:,} readings" in summary
    assert "1 site, 4 devices, 20 days" in summary and str(result.report_pdf) in summary
    assert dialog.table.rowCount() == len(result.rovers) > 0
    names = [dialog.table.item(r, 1).text() for r in range(dialog.table.rowCount())]
    assert names == [r["serial_number"] for r in result.rovers]
    rates = [r["velocity_mm_per_yr"]["horizontal"][0] for r in result.rovers]
    assert rates == sorted(rates, reverse=True)
    # ... and the fastest rover analysed in the GNSS tab, its details in the device panel
    fastest = result.rovers[0]["serial_number"]
    qtbot.waitUntil(lambda: (window.gnss.shown_analysis() is not None
                             and window.gnss.shown_analysis().serial_number == fastest),
                    timeout=30000)
    assert window.tabs.currentWidget() is window.gnss
    qtbot.waitUntil(lambda: fastest in window.device_panel.title.text(), timeout=10000)
    _shot(dialog, tmp_path, "demo-finished")
    dialog.close()


def test_stop_ends_the_demo_without_an_error_and_hides_the_progress(qtbot, window, tmp_path,
                                                                     monkeypatch):
    """The status bar's Stop during the demo: the demo ends before its next stage, as
    stopped (no error box, no result), and the bar goes away."""
    import threading

    import devmon_sync.demo as demo
    import gui.main_window as main_window

    real = demo.demo_pipeline
    clicked = threading.Event()

    def pipeline(out, **kw):
        def on_stage(name):  # hold the demo at its sync until the test has clicked Stop
            kw_stage(name)
            if name == "sync":
                assert clicked.wait(30)
        kw_stage = kw.pop("on_stage")
        return real(out, 2, 12, 20, 42, on_stage=on_stage, **kw)

    monkeypatch.setattr(demo, "demo_pipeline", pipeline)
    monkeypatch.setattr(main_window, "data_dir", lambda: tmp_path)
    progress = window.task_progress
    messages = []
    window.statusBar().messageChanged.connect(messages.append)
    window.run_demo()
    assert progress.isVisible() and progress.bar.maximum() == 0  # busy until a percentage
    qtbot.waitUntil(lambda: any("syncing its world" in m for m in messages), timeout=30000)
    qtbot.mouseClick(progress.stop_button, Qt.MouseButton.LeftButton)
    assert not progress.stop_button.isEnabled()
    clicked.set()
    qtbot.waitUntil(lambda: not progress.isVisible(), timeout=60000)
    assert window.last_error is None and "Demo stopped." in messages
    assert not hasattr(window, "result_dialog")


def test_closing_the_window_stops_a_running_demo(qtbot, tmp_path, monkeypatch):
    """No mirror open, the demo running, the window closed: the demo stops with it (its
    threads would otherwise keep the process alive, windowless, until the demo ends)."""
    import gui.main_window as main_window

    monkeypatch.setattr(main_window, "data_dir", lambda: tmp_path)
    monkeypatch.setenv("DEVMON_DATA_DIR", str(tmp_path / "data"))
    w = MainWindow(Settings(tmp_path / "settings.ini"))
    qtbot.addWidget(w)
    w.show()
    finished = []
    w.demo_finished.connect(finished.append)
    w.run_demo()  # the full demo world: about 40 s if it were not stopped
    qtbot.wait(1500)
    assert w.runner.busy()
    started = time.perf_counter()
    w.close()
    assert not w.runner.busy() and time.perf_counter() - started < 30
    qtbot.wait(200)
    assert finished == [] and w.last_error is None


def test_stop_ends_a_report_and_leaves_no_pdf(qtbot, window, db, tmp_path):
    rover = next(d for s in _expected(db) for d in s.devices if d.is_gnss_rover)
    open_mirror(qtbot, window, db)
    with qtbot.waitSignal(window.gnss.analysed, timeout=30000):
        window.browser.devices_selected.emit([rover.serial_number])
    out = tmp_path / "stopped.pdf"
    assert window.export_report(str(out))
    assert window.task_progress.isVisible()
    qtbot.mouseClick(window.task_progress.stop_button, Qt.MouseButton.LeftButton)
    qtbot.waitUntil(lambda: not window.task_progress.isVisible(), timeout=60000)
    assert not out.exists() and not list(tmp_path.glob(".stopped.pdf.*"))
    assert window.last_error is None
    assert "Report stopped" in window.statusBar().currentMessage()


@pytest.mark.skipif((os.cpu_count() or 1) < 2, reason="worker processes need 2 cores")
def test_a_long_report_is_drawn_on_every_core_and_stop_still_ends_it(qtbot, window, db, tmp_path,
                                                                     page_pool_runs):
    """File → Export report draws a long report's pages in worker processes, as the command
    does (here any report is 'long': low thresholds); Stop during that ends the workers and
    leaves no PDF and no part files."""
    from pypdf import PdfReader

    from devmon_sync.report import render

    pools = page_pool_runs
    rover = next(d for s in _expected(db) for d in s.devices if d.is_gnss_rover)
    open_mirror(qtbot, window, db)
    with qtbot.waitSignal(window.gnss.analysed, timeout=30000):
        window.browser.devices_selected.emit([rover.serial_number])
    folder = tmp_path / "reports"
    folder.mkdir()
    out = folder / "pooled.pdf"
    assert window.export_report(str(out))
    qtbot.waitUntil(lambda: not window.task_progress.isVisible(), timeout=120000)
    assert window.last_error is None and pools == [2]
    assert len(PdfReader(out).pages) > 2 * render.PAGES_PER_PART
    assert window.export_report(str(folder / "stopped.pdf"))
    qtbot.waitUntil(lambda: len(pools) == 2, timeout=60000)  # the workers are drawing
    qtbot.mouseClick(window.task_progress.stop_button, Qt.MouseButton.LeftButton)
    qtbot.waitUntil(lambda: not window.task_progress.isVisible(), timeout=60000)
    assert "Report stopped" in window.statusBar().currentMessage()
    assert sorted(p.name for p in folder.iterdir()) == ["pooled.pdf"]


@pytest.mark.skipif(not sys.platform.startswith("linux"), reason="xdg-open stand-in: Linux")
def test_the_report_dialog_opens_the_pdf_or_says_why_not(qtbot, tmp_path, monkeypatch):
    """Open report / Show folder hand the file to the desktop's opener (a stand-in
    xdg-open here) without freezing the window; where it finds no program, or there is no
    opener, or the file is gone, the dialog says so and names the file."""
    from gui.report_ready import ReportReadyDialog

    pdf = tmp_path / "report.pdf"
    pdf.write_bytes(b"%PDF-1.4\n")
    bin_dir = tmp_path / "bin"
    bin_dir.mkdir()
    opener = bin_dir / "xdg-open"
    opener.write_text(f'#!/bin/sh\necho "$1" >> {tmp_path}/opened.txt\n'
                      f'[ -e {tmp_path}/no-handler ] && exit 3\nexit 0\n')
    opener.chmod(0o755)
    monkeypatch.setenv("PATH", f"{bin_dir}{os.pathsep}/usr/bin{os.pathsep}/bin")
    dialog = ReportReadyDialog("Report written", "saved", pdf)
    qtbot.addWidget(dialog)
    dialog.show()
    assert dialog.open_button.isDefault()

    def press(button) -> str:
        with qtbot.waitSignal(dialog.opener.finished, timeout=10000) as done:
            qtbot.mouseClick(button, Qt.MouseButton.LeftButton)
        return done.args[1]

    assert press(dialog.open_button) == "" and press(dialog.folder_button) == ""
    assert (tmp_path / "opened.txt").read_text().split() == [str(pdf), str(tmp_path)]
    assert not dialog.problem.isVisible()
    (tmp_path / "no-handler").touch()
    assert "found no program" in press(dialog.open_button)
    assert dialog.problem.isVisible() and str(pdf) in dialog.problem.text()
    monkeypatch.setenv("PATH", str(tmp_path / "empty"))
    assert "xdg-open is not installed" in press(dialog.open_button)
    pdf.unlink()
    press(dialog.open_button)
    assert "is gone" in dialog.problem.text()


@pytest.mark.skipif(not sys.platform.startswith("linux"), reason="xdg-open: Linux")
def test_help_shows_the_log_folder_or_names_it(qtbot, window, tmp_path, monkeypatch):
    monkeypatch.setenv("DEVMON_LOG_DIR", str(tmp_path / "logs"))
    monkeypatch.setenv("PATH", str(tmp_path / "empty"))  # no opener at all
    action = next(a for a in window.menuBar().actions()[-1].menu().actions()
                  if "log folder" in a.text())
    with qtbot.waitSignal(window.error_shown, timeout=10000) as shown:
        action.trigger()
    assert "xdg-open is not installed" in shown.args[0]
    assert str(tmp_path / "logs") in shown.args[0] and (tmp_path / "logs").is_dir()


def test_a_newly_opened_mirror_asks_for_a_device_not_for_the_demo(qtbot, db, tmp_path,
                                                                  monkeypatch):
    """The first-start hint goes once a mirror is open; the title is the file (Qt adds the
    app's name) and the window carries devmon's icon."""
    monkeypatch.setenv("DEVMON_DATA_DIR", str(tmp_path / "data"))
    w = MainWindow(Settings(tmp_path / "settings.ini"))
    qtbot.addWidget(w)
    w.open_initial(None)
    assert "Run the demo" in w.device_panel.title.text()
    open_mirror(qtbot, w, db)
    assert w.device_panel.title.text() == "Select a device in the browser."
    assert w.windowTitle() == db.name
    from gui.app import make_app

    app = make_app()  # what `devmon gui` starts with (the tests' app is pytest-qt's)
    assert [s.width() for s in app.windowIcon().availableSizes()] == [256]
    w.close()


def test_a_first_start_without_any_mirror_points_to_the_demo(qtbot, tmp_path, monkeypatch):
    monkeypatch.setenv("DEVMON_DATA_DIR", str(tmp_path / "data"))  # no default mirror either
    w = MainWindow(Settings(tmp_path / "settings.ini"))
    qtbot.addWidget(w)
    w.open_initial(None)
    assert w.mirror is None and w.last_error is None  # no error box for a first start
    assert "Help → Run the demo" in w.device_panel.title.text()
    assert "Run the demo" in w.statusBar().currentMessage()
    w.close()


# ----------------------------------------------------------------------------- the mouse
# The Plots tab answers the mouse as a plot should: the toolbar's zoom rectangle, its pan,
# the wheel, home; each change of the time range re-queries the mirror.  Real mouse events
# (press, move, release) on the real canvas.

def _settle(qtbot, plot, queries_before: int) -> None:
    """The change of range re-queried the mirror (after the short pause), and the answer
    was drawn."""
    with qtbot.waitSignal(plot.redrawn, timeout=20000):
        qtbot.waitUntil(lambda: plot._queries > queries_before, timeout=20000)


def test_the_toolbars_zoom_rectangle_and_pan_change_the_range_and_requery(qtbot, window, db):
    _open_and_plot(qtbot, window, db)
    window.tabs.setCurrentWidget(window.plot)
    plot = window.plot
    QApplication.processEvents()
    ax = plot.axes()[0]
    before = ax.get_xlim()
    queries = plot._queries
    QTest.mouseClick(button(plot.toolbar, "zoom"), Qt.MouseButton.LeftButton)
    drag(plot.canvas, data_point(plot.canvas, ax, 0.3, 0.2),
          data_point(plot.canvas, ax, 0.6, 0.8))
    ax = plot.axes()[0]
    lo, hi = ax.get_xlim()
    assert hi - lo == pytest.approx(0.3 * (before[1] - before[0]), rel=0.1), (before, lo, hi)
    _settle(qtbot, plot, queries)
    # pan: drag to the right moves the range earlier
    zoomed = plot.axes()[0].get_xlim()
    queries = plot._queries
    QTest.mouseClick(button(plot.toolbar, "pan"), Qt.MouseButton.LeftButton)
    ax = plot.axes()[0]
    drag(plot.canvas, data_point(plot.canvas, ax, 0.4, 0.5),
          data_point(plot.canvas, ax, 0.6, 0.5))
    lo, hi = plot.axes()[0].get_xlim()
    assert lo < zoomed[0] and hi - lo == pytest.approx(zoomed[1] - zoomed[0], rel=1e-6)
    _settle(qtbot, plot, queries)
    # home: back to the first view
    queries = plot._queries
    QTest.mouseClick(button(plot.toolbar, "home"), Qt.MouseButton.LeftButton)
    assert plot.axes()[0].get_xlim() == pytest.approx(before)
    _settle(qtbot, plot, queries)


def test_the_mouse_wheel_zooms_the_time_axis_about_the_pointer(qtbot, window, db):
    _open_and_plot(qtbot, window, db)
    window.tabs.setCurrentWidget(window.plot)
    plot = window.plot
    QApplication.processEvents()
    ax = plot.axes()[0]
    lo, hi = ax.get_xlim()
    at = data_point(plot.canvas, ax, 0.75, 0.5)
    queries = plot._queries
    wheel(plot.canvas, at)
    new_lo, new_hi = plot.axes()[0].get_xlim()
    assert new_hi - new_lo < 0.9 * (hi - lo)  # zoomed in
    pointer = lo + 0.75 * (hi - lo)
    assert new_lo < pointer < new_hi  # about the pointer: it stays in view, at its place
    assert (pointer - new_lo) / (new_hi - new_lo) == pytest.approx(0.75, abs=0.02)
    _settle(qtbot, plot, queries)


def test_the_first_plot_fits_the_canvas(qtbot, window, db):
    """The first figure, plotted while the Plots tab is shown, is drawn at the canvas's
    size, not at the builder's fixed 10 x 7 in (a stale strip stayed until a resize)."""
    window.tabs.setCurrentWidget(window.plot)
    QApplication.processEvents()
    _open_and_plot(qtbot, window, db)
    QApplication.processEvents()
    canvas = window.plot.canvas
    w_in, h_in = canvas.figure.get_size_inches()
    dpi = canvas.figure.dpi / canvas.device_pixel_ratio
    assert w_in * dpi == pytest.approx(canvas.width(), abs=2)
    assert h_in * dpi == pytest.approx(canvas.height(), abs=2)



def test_the_date_boxes_follow_the_range_shown_and_the_loading_message_goes(qtbot, window,
                                                                           db):
    """The user's report: "Loading 1 parameter(s)…" stayed in the status bar, and the
    date boxes did not follow the 7 d / 30 d buttons."""
    _open_and_plot(qtbot, window, db)
    window.tabs.setCurrentWidget(window.plot)
    plot = window.plot
    assert "Loading" not in window.statusBar().currentMessage()
    assert "plotted" in window.statusBar().currentMessage()
    seven = next(b for b in plot.findChildren(QPushButton) if b.text() == "7 d")
    with qtbot.waitSignal(plot.redrawn, timeout=20000):
        QTest.mouseClick(seven, Qt.MouseButton.LeftButton)
    lo, hi = plot.current_range()
    shown = [datetime.fromtimestamp(e.dateTime().toSecsSinceEpoch(), timezone.utc)
             for e in (plot.start_edit, plot.end_edit)]
    assert abs(shown[0] - lo) < timedelta(minutes=1) and abs(shown[1] - hi) < timedelta(minutes=1)
    assert shown[1] - shown[0] == pytest.approx(timedelta(days=7), abs=timedelta(minutes=1))


def test_the_tree_shows_each_devices_alarm_level_with_a_legend(qtbot, window, db):
    """Status at a glance: a rover at a level carries a badge in the level's colour (its
    name keeps the connection colour), said in its tooltip; the legend says both."""
    from devmon_sync.analyze.alarm_history import evaluate_alarms
    from devmon_sync.store import queries
    from gui.browser import ALARM_ROLE

    with Mirror.open(db) as m:
        rovers = [d for d in queries.gnss_devices(m) if d.epochs]
        moving = rovers_by_scenario(rovers)["accelerating"]
        queries.set_alarm_levels(m, moving.serial_number, "displacement",
                                 {"alert": 0.5, "alarm": 1000.0})
        evaluate_alarms(m)
        expected = queries.worst_alarm_levels(m)
    open_mirror(qtbot, window, db)
    model = window.browser.sites_model
    for serial in (d.serial_number for d in rovers):
        (index,) = model.match(model.index(0, 0), KEY_ROLE, serial, 1,
                               Qt.MatchFlag.MatchRecursive | Qt.MatchFlag.MatchExactly)
        level = expected.get(serial)
        assert index.data(ALARM_ROLE) == level
        assert (f"alarm level now: {level}" in index.data(Qt.ItemDataRole.ToolTipRole)) \
            == bool(level)
    assert expected, "the rover with a 0.5 mm alert level should be at it"
    legend = window.browser.legend.text()
    assert "alert" in legend and "emergency" in legend and "connection" in legend


def test_save_dialogs_offer_the_mirrors_folder_then_the_last_one_used(qtbot, window, db,
                                                                     tmp_path, monkeypatch):
    """The user's report: save dialogs opened in the home folder, not beside the mirror.
    The modal dialog itself is replaced by a recorder of what it was offered."""
    from PySide6.QtWidgets import QFileDialog

    _open_and_plot(qtbot, window, db)
    window.tabs.setCurrentWidget(window.plot)
    offered, answers = [], []

    def fake_dialog(parent, title, offer, filters):
        offered.append(Path(offer))
        return (answers.pop(0) if answers else "", filters)

    monkeypatch.setattr(QFileDialog, "getSaveFileName", staticmethod(fake_dialog))
    assert not window.export_plot()  # cancelled
    assert offered[-1].parent == db.parent and offered[-1].name.startswith("mirror-plot-")
    elsewhere = tmp_path / "exports"
    elsewhere.mkdir()
    answers.append(str(elsewhere / "chosen.png"))
    assert window.export_plot()
    assert (elsewhere / "chosen.png").stat().st_size > 5000
    window.export_plot()
    assert offered[-1].parent == elsewhere  # the last folder used for this mirror


def test_site_health_follows_the_site_clicked_and_shows_alarm_levels(qtbot, window, db):
    """The user's report: site health listed all 48 devices whatever site was selected,
    with no alarm column."""
    from devmon_sync.analyze.alarm_history import evaluate_alarms
    from devmon_sync.store import queries

    with Mirror.open(db) as m:
        rover = rovers_by_scenario(queries.gnss_devices(m))["accelerating"]
        queries.set_alarm_levels(m, rover.serial_number, "displacement", {"alert": 0.5})
        evaluate_alarms(m)
    open_mirror(qtbot, window, db)
    view = window.browser.sites_view
    proxy = view.model()
    row = next(r for r in range(proxy.rowCount())
               if proxy.index(r, 0).data().startswith(rover.site_name))
    rect = view.visualRect(proxy.index(row, 0))
    with qtbot.waitSignal(window.browser.site_selected, timeout=5000):
        QTest.mouseClick(view.viewport(), Qt.MouseButton.LeftButton, pos=rect.center())
    title = f"Site health: {rover.site_name}"
    qtbot.waitUntil(lambda: window.tabs.tabText(window.tabs.indexOf(window.health)) == title,
                    timeout=20000)
    model = window.health.model_
    headers = [model.headerData(c, Qt.Orientation.Horizontal) for c in range(model.columnCount())]
    serials = {model.item(r, headers.index("Serial number")).text()
               for r in range(model.rowCount())}
    with Mirror.open(db, read_only=True) as m:
        expected = {r[1] for r in browse.site_health(m, rover.site_uuid).rows}
    assert serials == expected and rover.serial_number in serials
    assert len(serials) < len(window.browser.devices)  # one site, not every device
    level = model.item(next(r for r in range(model.rowCount())
                            if model.item(r, headers.index("Serial number")).text()
                            == rover.serial_number), headers.index("Alarm level")).text()
    assert level == "alert"


def test_opening_a_mirror_shows_every_site_at_a_glance(qtbot, window, db, tmp_path):
    """The Overview tab, first: per site the devices, who is at an alarm level now, whose
    data stopped, the newest data; double-clicking a site shows its health."""
    from devmon_sync.analyze.alarm_history import evaluate_alarms
    from devmon_sync.store import queries

    with Mirror.open(db) as m:
        rover = rovers_by_scenario(queries.gnss_devices(m))["accelerating"]
        queries.set_alarm_levels(m, rover.serial_number, "displacement", {"alarm": 0.5})
        evaluate_alarms(m)
        truth = browse.site_overview(m)
    open_mirror(qtbot, window, db)
    assert window.tabs.currentWidget() is window.overview_view
    table = window.overview_view.table
    assert table.rowCount() == len(truth)
    rows = {table.item(r, 0).text(): r for r in range(table.rowCount())}
    for site in truth:
        r = rows[site.name]
        assert table.item(r, 1).text() == str(site.devices)
        assert table.item(r, 5).text() == (", ".join(site.stale) or "-")
    r = rows[rover.site_name]
    assert table.item(r, 4).text() == "1 alarm"
    assert "1 device at an alarm level now" in window.overview_view.header.text()
    rect = table.visualItemRect(table.item(r, 0))
    QTest.mouseClick(table.viewport(), Qt.MouseButton.LeftButton, pos=rect.center())
    QTest.mouseDClick(table.viewport(), Qt.MouseButton.LeftButton, pos=rect.center())
    qtbot.waitUntil(lambda: window.tabs.currentWidget() is window.health, timeout=5000)
    qtbot.waitUntil(lambda: window.tabs.tabText(window.tabs.indexOf(window.health))
                    == f"Site health: {rover.site_name}", timeout=20000)
    _shot(window.overview_view, tmp_path, "overview")


def test_the_rover_at_a_level_is_one_click_from_the_overview(qtbot, window, db):
    """The Overview lists the points at an alarm level now, worst first, by name; one click
    on the row opens the rover in the GNSS tab and selects it in the tree."""
    from devmon_sync.analyze.alarm_history import evaluate_alarms
    from devmon_sync.store import queries

    with Mirror.open(db) as m:
        rover = rovers_by_scenario(queries.gnss_devices(m))["accelerating"]
        queries.set_alarm_levels(m, rover.serial_number, "displacement",
                                 {"alert": 0.2, "alarm": 0.3, "emergency": 0.5})
        evaluate_alarms(m)
    open_mirror(qtbot, window, db)
    points = window.overview_view.points
    assert points.isVisible() and points.rowCount() >= 1
    cells = [points.item(0, c).text() for c in range(points.columnCount())]
    assert "emergency" in cells and rover.display_name in cells, cells
    assert rover.serial_number in cells
    rect = points.visualItemRect(points.item(0, 0))
    QTest.mouseClick(points.viewport(), Qt.MouseButton.LeftButton, pos=rect.center())
    qtbot.waitUntil(lambda: window.tabs.currentWidget() is window.gnss, timeout=5000)
    qtbot.waitUntil(lambda: window.gnss.controls.checked_serials() == [rover.serial_number],
                    timeout=20000)
    current = window.browser.sites_view.currentIndex()
    assert current.data(KEY_ROLE) == rover.serial_number


# ----------------------------------------------------------------------------- issue 30

def _quick(plot, text: str) -> QPushButton:
    return next(b for b in plot.findChildren(QPushButton) if b.text() == text)


def _unfitted_axes(plot) -> list[str]:
    """The axes whose y range does not fit the plotted data in view: data off the axes, or
    the data filling less than 80 % of the y range (no alarm levels are drawn here)."""
    out = []
    for ax in plot.axes():
        lo, hi = ax.get_xlim()
        lines = [line for line in ax.get_lines() if str(line.get_gid()).startswith("series:")]
        ys = np.concatenate([line.get_ydata()[(line.get_xdata() >= lo) & (line.get_xdata() <= hi)]
                             for line in lines])
        if not ys.size:
            continue
        y0, y1 = ax.get_ylim()
        if ys.min() < y0 or ys.max() > y1 or np.ptp(ys) < 0.8 * (y1 - y0):
            out.append(f"{ax.get_ylabel()}: data {ys.min():.4g}..{ys.max():.4g}, "
                       f"axis {y0:.4g}..{y1:.4g}")
    return out


def test_a_quick_range_after_a_zoom_fits_y_to_its_data_and_drops_a_readout_out_of_view(
        qtbot, window, db):
    """Issue 30, point 4: after a zoom rectangle, the quick ranges (24 h / 7 d / 30 d / All)
    kept its y limits (the series ran off the axes until Home), and the cursor readout kept
    a time no longer in view."""
    _open_and_plot(qtbot, window, db)
    click_tab(window.tabs, "Plots")
    plot = window.plot
    QApplication.processEvents()
    ax = plot.axes()[0]
    queries = plot._queries
    QTest.mouseClick(button(plot.toolbar, "zoom"), Qt.MouseButton.LeftButton)
    drag(plot.canvas, data_point(plot.canvas, ax, 0.2, 0.45),
         data_point(plot.canvas, ax, 0.5, 0.55))
    QTest.mouseClick(button(plot.toolbar, "zoom"), Qt.MouseButton.LeftButton)  # zoom off
    _settle(qtbot, plot, queries)
    assert _unfitted_axes(plot)  # the zoom rectangle's narrow y band leaves data outside
    QTest.mouseMove(plot.canvas, data_point(plot.canvas, plot.axes()[0], 0.1, 0.5))
    read = plot.readout.text()
    assert " = " in read  # the readout shows a time and the value there
    assert plot.toolbar.locLabel.text()  # and the toolbar the pointer's (x, y)
    for text in ("24 h", "All"):
        with qtbot.waitSignal(plot.redrawn, timeout=20000):
            QTest.mouseClick(_quick(plot, text), Qt.MouseButton.LeftButton)
        problems = _unfitted_axes(plot)
        if text == "24 h" and (read.split("  ·  ")[0] in plot.readout.text()
                               or plot._cursor_lines):  # the time read out is before the day
            problems.append(f"the readout still reads {plot.readout.text()!r}")
        if text == "24 h" and plot.toolbar.locLabel.text():  # the pointer's (x, y) there
            problems.append(f"the toolbar still reads {plot.toolbar.locLabel.text()!r}")
        assert problems == [], text


def test_the_range_boxes_say_there_is_no_plot_until_one_is_drawn(qtbot, window, db):
    """Issue 30, point 12: before anything was plotted the custom range showed
    "2000-01-01 00:00" (Qt's default date), read as the data's range."""
    open_mirror(qtbot, window, db)
    click_tab(window.tabs, "Plots")
    plot = window.plot
    for edit in (plot.start_edit, plot.end_edit):
        assert edit.text() == "no plot yet" and not edit.isEnabled()
    assert not plot.apply_button.isEnabled()
    with qtbot.waitSignal(plot.redrawn, timeout=20000):
        plot.add_parameters([_a_parameter(db).uuid])
    shown = [datetime.fromtimestamp(e.dateTime().toSecsSinceEpoch(), timezone.utc)
             for e in (plot.start_edit, plot.end_edit)]
    lo, hi = plot.current_range()
    assert abs(shown[0] - lo) < timedelta(minutes=1) and abs(shown[1] - hi) < timedelta(minutes=1)
    assert plot.start_edit.text() == plot.start_edit.dateTime().toString("yyyy-MM-dd HH:mm")
    assert plot.apply_button.isEnabled()
    QTest.mouseClick(next(b for b in plot.findChildren(QPushButton) if b.text() == "Clear"),
                     Qt.MouseButton.LeftButton)
    assert plot.start_edit.text() == "no plot yet" and not plot.apply_button.isEnabled()


def test_the_window_opens_within_the_screen_so_its_status_bar_shows(qtbot, tmp_path):
    """Issue 30, point 6: at its default 1400 x 900 the window was taller than a 1400 x 900
    screen, and its status bar (the file, the last sync, the messages) fell below it."""
    w = MainWindow(Settings(tmp_path / "settings.ini"))
    qtbot.addWidget(w)
    w.show()
    QApplication.processEvents()
    room = w.screen().availableGeometry()  # offscreen: 800 x 800, no title bar
    assert w.height() <= room.height() - 40, (w.height(), room)
    bar = w.statusBar()
    assert bar.isVisible() and w.rect().contains(bar.geometry())

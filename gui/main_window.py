"""The main window: the browser dock, the device / health / plot / GNSS tabs, the Sync dialog,
exports, recent files and the status bar.

It opens the mirror read-write (DuckDB allows one writing process, and the Sync dialog and the
alarm levels write in-process); every read after that runs on the window's ``TaskRunner``.

Size: about 910 lines, because the window is where the app's parts meet: its menus,
the tabs' wiring, opening and watching a mirror, exports and the status bar each need the
others' state.  Each tab's content lives in its own module (``*_view.py``, ``browser``,
``device_panel``); what is left here is the wiring.
"""

from __future__ import annotations

import csv
import gc
from datetime import datetime, timezone
from pathlib import Path

from PySide6.QtCore import Qt, Signal
from PySide6.QtGui import QAction, QKeySequence, QPainter
from PySide6.QtWidgets import (QDockWidget, QFileDialog, QLabel, QMainWindow, QMenu,
                               QMessageBox, QStatusBar, QStyle, QStyleOption, QTabWidget)

from analysis.displacement import DEFAULT_REFERENCE
from devmon_sync import __version__
from devmon_sync.demo import is_moving
from devmon_sync.paths import data_dir, default_mirror, log_dir
from devmon_sync.store import Mirror, StoreError, browse
from devmon_sync.store.access import MirrorAccess
from gui.browser import KEY_ROLE, KIND_ROLE, Browser
from gui.desktop import SystemOpener
from gui.device_panel import DevicePanel
from gui.gnss_table import mark_rover_levels
from gui.gnss_view import GnssView
from gui.gnss_work import point_numbers_of
from gui.health_view import HealthView
from gui.overview_view import OverviewView
from gui.mirror_watch import MirrorWatch
from gui.plot_view import PlotView
from gui.report_ready import ReportReadyDialog
from gui.settings import Settings
from gui.task_progress import TaskProgress
from gui.timefmt import local_text
from gui.workers import TaskRunner

FILE_FILTER = "devmon mirrors (*.duckdb *.db);;All files (*)"
PICK_A_DEVICE = "Select a device in the browser."
NO_DEVICES = ("This mirror holds no devices yet: sync it (File → Sync…), or try Help → Run "
              "the demo.")
#: What the status bar says in each stage of the demo (devmon_sync.demo.STAGES).
DEMO_STAGES = {"server": "starting the built-in server", "sync": "syncing its world",
               "analysis": "analysing the GNSS rovers", "report": "writing the report"}


def _load_overview(mirror, state) -> dict:
    """Everything the window shows right after opening a file (one worker task)."""
    out = {}
    for i, (key, what, read) in enumerate(browse.OPENING_READS):
        state.set_progress(100 * i / len(browse.OPENING_READS), f"reading the {what}")
        out[key] = read(mirror)
    return out


def _short(text: str, limit: int = 60) -> str:
    """The first clause of a status text, cut at a word if still longer than ``limit``."""
    first = text.split("; ")[0]
    if len(first) <= limit:
        return first
    return first[:limit].rsplit(" ", 1)[0].rstrip(",.:;…") + "…"


def _set_label(label: QLabel, text: str) -> None:
    """A status-bar label wide enough for its text (the bar would squeeze it to nothing)."""
    label.setText(text)
    label.setMinimumWidth(label.sizeHint().width())


class _StatusLabel(QLabel):
    """A permanent status-bar label at most ``max_px`` wide: a longer text is elided with
    "…" and given whole as the tooltip, unless the caller set a fuller tooltip of its own
    (the file's path, the whole connection status).  Why: the bar gives its temporary
    message only the room the permanent labels leave."""

    def __init__(self, max_px: int) -> None:
        super().__init__()
        self.setMaximumWidth(max_px)
        self._own_tip: str | None = None  # the tooltip this label gave itself

    def setText(self, text: str) -> None:
        if self._own_tip is not None and self.toolTip() == self._own_tip:
            self.setToolTip("")
        room = self.maximumWidth() - 2 * self.margin() - 6
        shown = self.fontMetrics().elidedText(text, Qt.TextElideMode.ElideRight, room)
        super().setText(shown)
        self._own_tip = text if shown != text and not self.toolTip() else None
        if self._own_tip is not None:
            self.setToolTip(text)


class _StatusBar(QStatusBar):
    """A status bar whose message, when longer than the room the permanent widgets leave,
    ends in "…" short of them instead of running into them; the whole message is the bar's
    tooltip.  ``currentMessage()`` stays the whole message."""

    def __init__(self) -> None:
        super().__init__()
        self._permanent: list = []
        self.messageChanged.connect(self._message_changed)

    def addPermanentWidget(self, widget, stretch: int = 0) -> None:
        super().addPermanentWidget(widget, stretch)
        self._permanent.append(widget)

    def _message_changed(self, text: str) -> None:
        self.setToolTip(text)

    def _message_rect(self):
        """Where QStatusBar paints the message (``QStatusBarPrivate::messageRect``): from
        6 px to just left of the first visible permanent widget."""
        right = min([w.x() for w in self._permanent if w.isVisible()] + [self.width() - 12])
        return self.rect().adjusted(6, 0, right - 2 - self.width(), 0)

    def paintEvent(self, event) -> None:
        message, room = self.currentMessage(), self._message_rect()
        metrics = self.fontMetrics()
        if not message or metrics.horizontalAdvance(message) <= room.width():
            return super().paintEvent(event)
        painter = QPainter(self)
        option = QStyleOption()
        option.initFrom(self)
        self.style().drawPrimitive(QStyle.PrimitiveElement.PE_PanelStatusBar, option, painter,
                                   self)
        for widget in (w for w in self._permanent if w.isVisible()):  # as QStatusBar does
            frame = QStyleOption()
            frame.rect, frame.palette = widget.geometry().adjusted(-2, -1, 2, 1), self.palette()
            self.style().drawPrimitive(QStyle.PrimitiveElement.PE_FrameStatusBarItem, frame,
                                       painter, widget)
        painter.setPen(self.palette().windowText().color())
        shown = metrics.elidedText(message, Qt.TextElideMode.ElideRight, room.width() - 8)
        painter.drawText(room, int(Qt.AlignmentFlag.AlignLeading | Qt.AlignmentFlag.AlignVCenter
                                   | Qt.TextFlag.TextSingleLine), shown)


def _collect_what_was_frozen() -> None:
    """Unfreeze and collect: what was frozen at a reading and has become garbage since
    (an earlier tree's wrappers among it) goes now, not at some later full pass.  Nothing
    frozen (a window's first mirror, or collected at the last closing): nothing to do, the
    collector sees all garbage itself; a full pass visits every live object (~0.1-0.3 s)."""
    if gc.get_freeze_count():
        gc.unfreeze()
        gc.collect()


def _freeze_what_is_alive() -> None:
    """Keep the tree's ~100k wrappers, alive as long as the mirror is open, out of the
    garbage collector's full passes, which otherwise stall the GUI thread ~100 ms.
    Collect first, the earlier freeze's objects included: a Qt wrapper that is garbage but
    frozen stays in PySide's map of C++ addresses after Qt deleted its object, and a new
    QAction made at that address came back as a stale QStandardItem wrapper (a window
    crashed on closing, 2026-11-27, and again after a re-reading, 2026-11-28: the
    collection before the freeze did not reach what the earlier freeze held)."""
    gc.unfreeze()
    gc.collect()  # frozen or not: nothing that is garbage now may be frozen
    gc.freeze()


class MainWindow(QMainWindow):
    """devmon's desktop window."""

    opened = Signal(str)  # path, once the overview of a newly opened mirror is shown
    error_shown = Signal(str)
    demo_finished = Signal(object)  # a devmon_sync.demo.DemoResult
    report_written = Signal(object)  # a devmon_sync.report.ReportResult
    lights_shown = Signal()  # every point's H, V and 3D lights judged and shown

    def __init__(self, settings: Settings | None = None) -> None:
        super().__init__()
        self.settings = settings or Settings()
        self.mirror: MirrorAccess | None = None  # holds no connection between reads
        self.runner = TaskRunner(None, expected_errors=(StoreError,))
        self._reading_their_update = False
        self._said_after_refresh: str | None = None  # the status line after a change here
        self._say_after_analysis: str | None = None
        self.watch = MirrorWatch(self.runner)
        self.watch.updated.connect(self._updated_elsewhere)
        self.watch.busy.connect(self._written_elsewhere)
        self.last_error: str | None = None
        self.overview: dict | None = None
        self.lights: dict = {}  # {serial: {"H"|"V"|"3D": KeyAlarm or None} or why none}
        self.setWindowTitle("devmon")
        # 1400 x 900 within the screen's free area less a title bar: on a 1400 x 900 screen
        # the window's bottom, with the status bar, fell off the screen (issue 30).  The
        # primary screen: asking the window for its screen makes its native window early
        from PySide6.QtWidgets import QApplication

        room = QApplication.primaryScreen().availableGeometry()
        self.resize(min(1400, room.width()), min(900, room.height() - 40))
        self._build()
        self._restore()

    # ------------------------------------------------------------------ building

    def _build(self) -> None:
        self.browser = Browser()
        dock = QDockWidget("Browser", self)
        dock.setObjectName("browser-dock")
        dock.setWidget(self.browser)
        self.addDockWidget(Qt.DockWidgetArea.LeftDockWidgetArea, dock)
        self.overview_view = OverviewView()
        self.device_panel = DevicePanel()
        self.health = HealthView()
        self.plot = PlotView(self.runner)
        self.gnss = GnssView(self.runner, self.settings)
        self.tabs = QTabWidget()
        for widget, title in ((self.overview_view, "Overview"), (self.device_panel, "Device"),
                              (self.health, "Site health"),
                              (self.plot, "Plots"), (self.gnss, "GNSS deformation")):
            self.tabs.addTab(widget, title)
        self.setCentralWidget(self.tabs)
        self.opener = SystemOpener(self)
        self.opener.finished.connect(self._log_folder_opened)
        self._build_status_bar()
        self.browser.device_selected.connect(self.show_device)
        self.browser.site_selected.connect(self.show_site_health)
        self.overview_view.site_activated.connect(self._site_row_activated)
        self.overview_view.device_activated.connect(self.open_rover)
        self.overview_view.demo_requested.connect(lambda: self.run_demo())
        self.overview_view.open_requested.connect(self._choose_file)
        self.overview_view.sync_requested.connect(self.open_sync_dialog)
        self.browser.devices_selected.connect(self._devices_selected)
        self.browser.parameters_activated.connect(self._plot_parameters)
        self.plot.status.connect(self.statusBar().showMessage)
        self.gnss.status.connect(self.statusBar().showMessage)
        self.gnss.analysed.connect(self._gnss_done)
        self.gnss.failed.connect(self._gnss_done)
        for view in (self.browser.sites_view, self.browser.groups_view):
            view.setContextMenuPolicy(Qt.ContextMenuPolicy.CustomContextMenu)
            view.customContextMenuRequested.connect(
                lambda pos, v=view: self._tree_context_menu(v, pos))
        self._build_menus()

    def _build_status_bar(self) -> None:
        """The task's progress and the file, last-sync and connection labels on the right,
        each at most a few words wide (elided, the whole in its tooltip), so that a long
        message on the left (the levels reached after saving alarm levels) keeps some 130
        characters at 1400 px, elided beyond, whole in the bar's tooltip."""
        bar = _StatusBar()
        self.setStatusBar(bar)
        self.task_progress = TaskProgress()
        bar.addPermanentWidget(self.task_progress)
        self.file_label, self.sync_label, self.net_label = (
            _StatusLabel(160), _StatusLabel(230), _StatusLabel(240))
        for label in (self.file_label, self.sync_label, self.net_label):
            bar.addPermanentWidget(label)

    def _action(self, menu, text: str, slot, shortcut=None) -> QAction:
        action = QAction(text, self)
        if shortcut is not None:
            action.setShortcut(shortcut)
        action.triggered.connect(lambda _checked=False: slot())  # not `checked` as an argument
        menu.addAction(action)
        return action

    def _build_menus(self) -> None:
        file_menu = self.menuBar().addMenu("&File")
        self._action(file_menu, "&Open mirror…", self._choose_file, QKeySequence.StandardKey.Open)
        self.recent_menu = file_menu.addMenu("Open &recent")
        file_menu.addSeparator()
        self._action(file_menu, "&Sync…", self.open_sync_dialog, "Ctrl+Shift+S")
        file_menu.addSeparator()
        self._action(file_menu, "Export plot as &PNG or PDF…", self.export_plot, "Ctrl+E")
        self._action(file_menu, "Export plotted data as &CSV…", self.export_csv)
        self._action(file_menu, "Export &report (PDF)…", self.export_report, "Ctrl+R")
        file_menu.addSeparator()
        self._action(file_menu, "&Quit", self.close, QKeySequence.StandardKey.Quit)
        alarms_menu = self.menuBar().addMenu("&Alarms")
        self.alarm_levels_action = self._action(alarms_menu, "Alarm &levels…",
                                                self.open_alarm_levels, "Ctrl+L")
        help_menu = self.menuBar().addMenu("&Help")
        self._action(help_menu, "Run the &demo (built-in server, no account)", self.run_demo)
        self._action(help_menu, "Show the &log folder (for support)", self.show_log_folder)
        self._action(help_menu, "&About devmon", self._about)
        self._fill_recent_menu()

    def _fill_recent_menu(self) -> None:
        self.recent_menu.clear()
        for path in self.settings.recent_files():
            self._action(self.recent_menu, path, lambda _=False, p=path: self.open_file(p))
        self.recent_menu.setEnabled(bool(self.settings.recent_files()))

    def _restore(self) -> None:
        geometry, state = self.settings.window_state()
        if geometry is not None:
            self.restoreGeometry(geometry)
        if state is not None:
            self.restoreState(state)
        self.tabs.setCurrentIndex(int(self.settings.value("window/tab", 0)))

    # ------------------------------------------------------------------ files

    def open_initial(self, path: str | None) -> None:
        """At start: the file asked for, else the last one; otherwise say how to begin."""
        default = default_mirror()
        path = path or self.settings.last_file() or (str(default) if default.is_file() else None)
        if path:
            self.open_file(path)
        else:
            self.statusBar().showMessage("No mirror yet: try Help → Run the demo, open one "
                                         "(File → Open) or sync one (File → Sync).")
            self.device_panel.show_message("No mirror open. New here? Help → Run the demo "
                                           "syncs a realistic world from the built-in server "
                                           "and writes a report, with no account.")

    def _choose_file(self) -> None:
        path, _ = QFileDialog.getOpenFileName(self, "Open a devmon mirror", "", FILE_FILTER)
        if path:
            self.open_file(path)

    def open_file(self, path: str) -> bool:
        """Open a mirror; a missing, corrupt, newer-schema or locked file gets a message and
        leaves the window as it was."""
        if not Path(path).is_file():
            self.settings.remove_recent_file(str(Path(path).resolve()))
            self._fill_recent_menu()
            return self.show_error("Cannot open the mirror",
                                   f"There is no file at {path}. Choose another file, or sync "
                                   f"a new mirror with File → Sync.")
        try:
            mirror = MirrorAccess.open(path)
        except StoreError as err:
            return self.show_error("Cannot open the mirror", str(err))
        self._close_mirror()
        self.mirror = mirror
        self.runner.mirror = mirror
        self.watch.watch(mirror)
        self.settings.add_recent_file(path)
        self._fill_recent_menu()
        self.setWindowTitle(Path(path).name)  # Qt adds " — devmon" where the platform does
        _set_label(self.file_label, Path(path).name)
        self.file_label.setToolTip(str(Path(path).resolve()))
        self.refresh()
        return True

    def _close_mirror(self) -> None:
        _collect_what_was_frozen()  # before new Qt objects: see _freeze_what_is_alive
        if self.mirror is not None:
            self.watch.watch(None)
            self.runner.shutdown()
            self.plot.clear()
            self.mirror.close()
            self.mirror = None
            self.runner.mirror = None

    def refresh(self) -> None:
        """Re-read the overview (after opening or a sync)."""
        self.statusBar().showMessage("Reading the mirror…")
        self.runner.submit(_load_overview, on_done=self._show_overview,
                           on_error=lambda m: self.show_error("Cannot read the mirror", m),
                           slot="overview", label="overview")

    def _show_overview(self, overview: dict) -> None:
        self.overview = overview
        self.watch.accept_current()
        self.browser.populate(overview["sites"], overview["groups"], overview["alarms"])
        site, self._health_site = getattr(self, "_health_site", None), None
        if site is not None:  # the site shown before the refresh, read again
            self.show_site_health(site)
        else:
            self.health.show_table(overview["health"])
            if self._remembered_details().point_numbers:
                self._number_health_points()
        self.gnss.set_devices(overview["gnss"])
        mark_rover_levels(self.gnss.controls.rover_list, overview["levelled_points"],
                          self.lights or None)
        self.overview_view.show_overview(overview["sites_at_a_glance"], overview["last_synced"],
                                         overview.get("revisions"), overview["levelled_points"],
                                         overview["source"])
        synced = overview["last_synced"]
        _set_label(self.sync_label, f"last synced {local_text(synced)}" if synced
                                else "never synced")
        source = overview["source"]  # the mirror's service, whole where the label is short
        self.sync_label.setToolTip(f"Synced from {source.base_url}, last {local_text(synced)}"
                                   if source is not None and synced else "")
        devices = sum(len(s.devices) for s in overview["sites"])
        sites = len(overview["sites"])
        said = f"{devices} device{'s' * (devices != 1)} in {sites} site{'s' * (sites != 1)}"
        if self._reading_their_update:  # the refresh after another program's sync
            said = f"Mirror updated by another program, read again: {said}"
            self._reading_their_update = False
        if self._said_after_refresh:  # what a change made here did (alarm levels saved)
            said, self._said_after_refresh = self._said_after_refresh, None
            if self.gnss.busy():  # re-analysing the checked rovers: said again after it
                self._say_after_analysis = said
        self.statusBar().setToolTip("")
        self.statusBar().showMessage(said, 15000)
        self._probe_service(synced)
        self._restore_selections(overview)
        self._read_lights(overview["levelled_points"])
        _freeze_what_is_alive()
        self.opened.emit(self.mirror.path if self.mirror else "")

    def _read_lights(self, points: list) -> None:
        """Judge the H, V and 3D lights of every point with levels on a worker (an analysis
        of each: seconds for dozens of rovers), then show them in every view that has them."""
        from gui.overview_view import read_point_lights

        serials = [p.serial_number for p in points]
        self.runner.submit(lambda m, state: read_point_lights(m, state, serials),
                           on_done=self._show_lights,
                           on_error=lambda m: self.statusBar().showMessage(
                               f"Cannot judge the points' alarm lights: {m}", 15000),
                           slot="lights", label="alarm lights")

    def _show_lights(self, lights: dict) -> None:
        self.lights = lights
        self.overview_view.show_lights(lights)
        self.health.show_lights(lights)
        self.device_panel.show_lights(lights)
        mark_rover_levels(self.gnss.controls.rover_list,
                          (self.overview or {}).get("levelled_points", []), lights)
        self.lights_shown.emit()

    def _gnss_done(self, *_args) -> None:
        """After the GNSS tab's re-analysis (its own line is in the tab), the line of the
        change that caused it, again."""
        text, self._say_after_analysis = self._say_after_analysis, None
        if text:
            self.statusBar().showMessage(text, 30000)

    def _updated_elsewhere(self) -> None:
        """Another program (a scheduled `devmon sync`) wrote the mirror and has finished."""
        self._reading_their_update = True
        self.refresh()
        self.statusBar().showMessage("Mirror updated by another program: reading it again…")

    def _written_elsewhere(self, message: str) -> None:
        synced = (self.overview or {}).get("last_synced")
        as_of = f": shown as of {local_text(synced)}" if synced else ""
        self.statusBar().showMessage(f"Another program is writing the mirror{as_of}")
        self.statusBar().setToolTip(f"{message}\nThe window reads the mirror again when the "
                                    f"other program has finished.")

    def _probe_service(self, last_synced) -> None:
        """Is the service reachable?  The answer (online, or offline and browsing the mirror
        as of its last sync) goes in the status bar; nothing else waits for it."""
        from gui.connectivity import PROFILE_SETTING, probe_task, startup_profile, status_text

        profile = startup_profile(self.settings.value(PROFILE_SETTING))
        _set_label(self.net_label, "checking the connection…")

        def show(text: str) -> None:  # short in the bar, whole in the tooltip
            self.net_label.setToolTip(text)
            _set_label(self.net_label, _short(text))

        source = (self.overview or {}).get("source")  # the mirror's service, when no
        url = source.base_url if source is not None and profile is None else None  # profile
        self.runner.submit(probe_task(profile, url),
                           on_done=lambda r: show(status_text(r, last_synced)),
                           on_error=show, slot="probe", label="probe")

    # ------------------------------------------------------------------ selections

    def _restore_selections(self, overview: dict) -> None:
        """The device shown and the parameters plotted last time, where this mirror has them
        (after a sync's refresh the current ones stay)."""
        if self.plot.params:
            return
        known = {d.serial_number: d for s in overview["sites"] for d in s.devices}
        device = self.settings.value("selection/device")
        if device in known:
            self.show_device(device)
        else:
            self.device_panel.show_message(PICK_A_DEVICE if known else NO_DEVICES)
        uuids = {p.uuid for d in known.values() for s in d.sensors for p in s.parameters}
        remembered = self.settings.value("selection/parameters", [])
        remembered = [remembered] if isinstance(remembered, str) else list(remembered or [])
        plotted = [u for u in remembered if u in uuids]
        if plotted:
            self.plot.add_parameters(plotted)

    def _site_row_activated(self, site_uuid: str) -> None:
        self.show_site_health(site_uuid)
        self.tabs.setCurrentWidget(self.health)

    def show_site_health(self, site_uuid: str | None) -> None:
        """The Site health tab lists the devices of the site selected in the browser (of a
        selected device's site), with the tab's title naming it; every device before."""
        if site_uuid is None or site_uuid == getattr(self, "_health_site", None):
            return
        self._health_site = site_uuid
        names = {s.uuid: s for s in (self.overview or {}).get("sites", [])}
        site = names.get(site_uuid)
        title = f"Site health: {site.name}" if site is not None else "Site health"
        tz = getattr(site, "timezone", None)

        details = self._remembered_details()

        def show(read) -> None:
            table, points = read
            self.health.show_table(table, tz, points)
            self.tabs.setTabText(self.tabs.indexOf(self.health), title)

        self.runner.submit(lambda m, s: (browse.site_health(m, site_uuid),
                                         point_numbers_of(m, details)),
                           on_done=show, on_error=self.statusBar().showMessage,
                           slot="health", label="site health")

    def _number_health_points(self, _details=None) -> None:
        """The Site health table read again with the report's point numbers (remembered for
        this mirror), when it shows every device or when the details change."""
        site, self._health_site = getattr(self, "_health_site", None), None
        if site is not None:
            self.show_site_health(site)
            return
        details = self._remembered_details()

        def show(read) -> None:
            table, points = read
            self.health.show_table(table, None, points)

        self.runner.submit(lambda m, s: (browse.site_health(m), point_numbers_of(m, details)),
                           on_done=show, on_error=self.statusBar().showMessage,
                           slot="health", label="site health")

    def _remembered_details(self):
        """The report's details remembered for this mirror (title block, point numbers)."""
        from gui.report_details_dialog import remembered_details

        return remembered_details(self.settings, self._mirror_path())

    def show_device(self, serial: str) -> None:
        self.settings.set_value("selection/device", serial)
        self.runner.submit(lambda m, s: browse.device_details(m, serial),
                           on_done=self.device_panel.show_details,
                           on_error=self.device_panel.show_message, slot="device",
                           label="device details")

    def _devices_selected(self, serials: list[str]) -> None:
        gnss = {d.serial_number for d in (self.overview or {}).get("gnss", [])}
        rovers = [s for s in serials if s in gnss]
        if rovers:
            self.gnss.show_devices(rovers)
            if self.tabs.currentWidget() is self.gnss or len(rovers) == len(serials) > 1:
                self.tabs.setCurrentWidget(self.gnss)

    def open_rover(self, serial: str) -> None:
        """A device chosen outside the tree (the Overview's points at a level): selected in
        the tree (device sheet, site health follow) and, for a rover, analysed in the GNSS
        tab, which comes to the front."""
        self.browser.select_key(serial)
        if any(d.serial_number == serial for d in (self.overview or {}).get("gnss", [])):
            self.gnss.show_devices([serial])
            self.tabs.setCurrentWidget(self.gnss)
        else:
            self.tabs.setCurrentWidget(self.device_panel)

    def _plot_parameters(self, uuids: list[str]) -> None:
        self.plot.add_parameters(uuids)
        self.tabs.setCurrentWidget(self.plot)

    # ------------------------------------------------------------------ sync

    def open_sync_dialog(self) -> None:
        from gui.sync_dialog import SyncDialog

        if self.mirror is None:
            path, _ = QFileDialog.getSaveFileName(self, "New mirror file", "mirror.duckdb",
                                                  FILE_FILTER)
            if not path or not self._create_mirror(path):
                return
        dialog = getattr(self, "sync_dialog", None)
        if dialog is None or dialog.runner is not self.runner:
            dialog = SyncDialog(self.runner, self)
            dialog.synced.connect(lambda report, d=dialog: self._after_in_app_sync(d, report))
            self.sync_dialog = dialog
        dialog.show()  # the same dialog again: a running sync keeps its window
        dialog.raise_()
        dialog.activateWindow()

    def _after_in_app_sync(self, dialog, report) -> None:
        """Read the mirror again; a sync that reached the service also says the window is
        online (the status bar said "Not connected" from the probe at opening)."""
        self.refresh()
        job = getattr(dialog, "job", None)
        url = getattr(getattr(job, "outcome", None), "api_url", None)
        if report.status == "ok" and url:
            text = f"Online: {url} (synced {local_text(datetime.now(timezone.utc))})"
            self.net_label.setToolTip(text)
            _set_label(self.net_label, _short(text))

    def _create_mirror(self, path: str) -> bool:
        try:
            Mirror.open(path).close()
        except StoreError as err:
            return self.show_error("Cannot create the mirror", str(err))
        return self.open_file(path)

    # ------------------------------------------------------------------ alarm levels

    def _tree_context_menu(self, view, pos) -> None:
        index = view.indexAt(pos)
        kind, key = index.data(KIND_ROLE), index.data(KEY_ROLE)
        if kind not in ("site", "group", "device") or not key:
            return
        menu = QMenu(view)
        menu.setAttribute(Qt.WidgetAttribute.WA_DeleteOnClose)
        action = menu.addAction(f"Alarm levels of this {kind}…")
        action.triggered.connect(lambda _=False: self.open_alarm_levels((kind, key)))
        self.tree_menu = menu
        menu.popup(view.viewport().mapToGlobal(pos))

    def _tree_selection(self) -> tuple[str, str] | None:
        """(kind, key) of the site, group or device current in the browser's visible tree;
        a device that is not a GNSS rover stands for its site."""
        view = self.browser.tabs.currentWidget()
        index = view.currentIndex() if view is not None else None
        if index is None or not index.isValid():
            return None
        kind, key = index.data(KIND_ROLE), index.data(KEY_ROLE)
        if kind == "device":
            device = self.browser.devices.get(key)
            if device is not None and not device.is_gnss_rover:
                return ("site", device.site_uuid) if device.site_uuid else None
        return (kind, key) if kind in ("site", "group", "device") and key else None

    def open_alarm_levels(self, target: tuple[str, str] | None = None) -> None:
        """The Alarm levels dialog for ``target`` (kind, key), else what is selected in
        the browser; after a save, the window says what changed and reads the mirror
        again (the GNSS tab's alarm column and history with it)."""
        from gui.alarm_levels_dialog import AlarmLevelsDialog, targets_of

        if self.mirror is None or self.overview is None:
            self.show_error("No mirror open", "Open a mirror first (File → Open mirror), or "
                            "try Help → Run the demo, then set its alarm levels.")
            return
        dialog = AlarmLevelsDialog(self.runner, self.mirror.path, targets_of(self.overview),
                                   target or self._tree_selection(), self)
        dialog.setAttribute(Qt.WidgetAttribute.WA_DeleteOnClose)
        dialog.setWindowModality(Qt.WindowModality.WindowModal)
        dialog.saved.connect(self._alarm_levels_saved)
        self.alarm_levels_dialog = dialog
        dialog.show()

    def _alarm_levels_saved(self, text: str, written: bool) -> None:
        self.statusBar().showMessage(text, 30000)
        if not written:
            return
        self._said_after_refresh = text
        self.refresh()

    # ------------------------------------------------------------------ the demo

    def run_demo(self, folder: str | None = None, show_result: bool = True) -> None:
        """``devmon demo`` from the app: the built-in server, a sync, the analyses and the
        report on a worker; then the demo's mirror opened here on its fastest rover, and the
        report announced (``show_result``) with a button to open it."""
        from devmon_sync.demo import DemoError, demo_pipeline

        out = Path(folder) if folder else data_dir() / "demo"
        target = (out / "mirror.duckdb").resolve()
        if self.mirror is not None and Path(self.mirror.path).resolve() == target:
            self._close_mirror()  # the demo starts its mirror over

        def work(_mirror, state):
            def progress(p) -> None:
                state.set_progress(100.0 * p.done / max(p.total, 1),
                                   f"Demo: syncing ({p.phase}, {p.rows:,} rows)…")

            def stage(name: str) -> None:
                state.set_progress(-1.0, f"Demo: {DEMO_STAGES[name]}…")
            try:
                return demo_pipeline(out, say=lambda _line: None, on_progress=progress,
                                     on_stage=stage, cancel=state.cancel_event)
            except DemoError:
                state.check()  # stopped by the user: no error box
                raise

        self.statusBar().showMessage("Demo: starting the built-in server…")
        state = self.runner.submit(
            work, on_done=lambda r: self._demo_done(r, show_result),
            on_error=lambda m: self.show_error("The demo failed", m),
            on_progress=lambda _pct, msg: self.statusBar().showMessage(msg),
            on_cancelled=lambda: self.statusBar().showMessage("Demo stopped.", 10000),
            slot="demo", label="demo")
        self.task_progress.track(state, "the demo")

    def _demo_done(self, result, show_result: bool) -> None:
        if result.rovers:  # shown once the mirror's overview is in (it restores selections)
            self.settings.set_value("selection/device", result.rovers[0]["serial_number"])
        self.opened.connect(self._show_demo_rover, Qt.ConnectionType.SingleShotConnection)
        if not self.open_file(str(result.mirror_path)):
            self.opened.disconnect(self._show_demo_rover)
        self.statusBar().showMessage(f"Demo done in {result.seconds:.0f} s: report "
                                     f"{result.report_pdf} ({result.pages} pages)", 15000)
        if show_result:
            moving = sum(is_moving(r) for r in result.rovers)
            self.result_dialog = ReportReadyDialog(
                "Demo finished",
                f"In {result.seconds:.0f} s the demo synced {result.readings_rows:,} "
                f"readings and {result.epoch_rows:,} GNSS epochs from the built-in "
                f"reference server ({result.world}; no account, no network) into "
                f"{result.mirror_path}, now open here.\n\nThe report ({result.pages} pages, "
                f"{len(result.png_paths)} figures also as PNG) is {result.report_pdf}.\n"
                f"{moving} of {len(result.rovers)} GNSS rovers are moving, the fastest "
                f"first; it is open in the GNSS deformation tab.", result.report_pdf, self,
                rovers=result.rovers)
            self.result_dialog.show()
        self.demo_finished.emit(result)

    def _show_demo_rover(self, _path: str = "") -> None:
        """The demo's fastest rover, analysed in the GNSS deformation tab."""
        serial = self.settings.value("selection/device")
        if any(d.serial_number == serial for d in (self.overview or {}).get("gnss", [])):
            self.gnss.show_devices([serial])
            self.tabs.setCurrentWidget(self.gnss)

    # ------------------------------------------------------------------ exports

    def current_figure(self):
        if self.tabs.currentWidget() is self.gnss:
            return self.gnss.current_figure()
        return self.plot.figure if self.plot.params else None

    def _ask_save_path(self, title: str, name: str, filters: str) -> str | None:
        """A save dialog offering ``<mirror>-<name>-<today>``, in the folder of the last
        export from this mirror, else beside the mirror (``Settings.export_folder``); None
        when cancelled."""
        from datetime import date

        mirror = str(self.mirror.path) if self.mirror is not None else None
        stem = Path(mirror).stem if mirror else "devmon"
        base, ext = Path(name).stem, Path(name).suffix
        folder = Path(self.settings.export_folder(mirror))
        offer = folder / f"{stem}-{base}-{date.today():%Y-%m-%d}{ext}"
        path, _ = QFileDialog.getSaveFileName(self, title, str(offer), filters)
        if not path:
            return None
        self.settings.set_export_folder(path, mirror)
        return path

    def export_plot(self, path: str | None = None) -> bool:
        figure = self.current_figure()
        if figure is None:
            return self.show_error("Nothing to export", "Plot something first: double-click "
                                   "a parameter, or analyse a GNSS device.")
        path = path or self._ask_save_path("Export plot", "plot.png",
                                           "PNG image (*.png);;PDF document (*.pdf)")
        if not path:
            return False
        if Path(path).suffix.lower() not in (".png", ".pdf"):
            path = str(Path(path).with_suffix(".png"))
        try:
            figure.savefig(path, dpi=200)
        except OSError as err:
            return self.show_error("Cannot write the file", f"{path}: {err.strerror or err}")
        self.statusBar().showMessage(f"Saved {path}", 5000)
        return True

    def export_csv(self, path: str | None = None) -> bool:
        if self.tabs.currentWidget() is self.gnss:
            table = self.gnss.current_csv_rows()
        elif self.plot.params and self.mirror is not None:
            view = self.mirror.for_thread()
            try:
                table = self.plot.csv_rows(view)
            except StoreError as err:
                return self.show_error("Cannot read the mirror", str(err))
            finally:
                view.close()
        else:
            table = None
        if not table or not table[1]:
            return self.show_error("Nothing to export", "Plot something first.")
        path = path or self._ask_save_path("Export data", "data.csv", "CSV (*.csv)")
        if not path:
            return False
        try:
            with open(path, "w", newline="", encoding="utf-8") as out:
                writer = csv.writer(out)
                writer.writerow(table[0])
                writer.writerows(table[1])
        except OSError as err:
            return self.show_error("Cannot write the file", f"{path}: {err.strerror or err}")
        self.statusBar().showMessage(f"Saved {len(table[1]):,} rows to {path}", 5000)
        return True

    def report_options(self, details=None):
        """``devmon report``'s options from the GNSS tab's current choices (checked rovers,
        frame, reference, method, period) and ``details`` (title block, comments, point
        numbers; default: those remembered for this mirror); None when no rover is
        checked."""
        from devmon_sync.report import ReportOptions

        controls = self.gnss.controls
        serials = tuple(controls.checked_serials())
        if not serials or controls.request() is None:
            return None
        if details is None:
            details = self._remembered_details()
        start, end = controls.period()
        return ReportOptions(devices=serials, start=start, end=end, frame=controls.frame_text(),
                             reference=controls.reference_edit.text().strip() or DEFAULT_REFERENCE,
                             method=controls.method_combo.currentData(),
                             command_line="devmon gui: File → Export report", details=details)

    def _mirror_path(self) -> str | None:
        return str(self.mirror.path) if self.mirror is not None else None

    def export_report(self, path: str | None = None, png_dir: str | None = None,
                      details=None) -> bool:
        """The report of ``devmon report`` with the GUI's choices, made on a worker.

        ``details`` (a ``ReportDetails``): the title block, comments and point numbers.
        Given neither them nor ``path`` (File → Export report), the Report details dialog
        asks for them first and its OK goes on here (True: the dialog is open); Cancel
        writes nothing.  With a ``path`` and no ``details``, those remembered for this
        mirror are used, without asking (scripts and tests)."""
        from devmon_sync.report import build_report, check_output, write_report

        options = self.report_options(details) if self.mirror is not None else None
        if options is None:
            return self.show_error("Nothing to report", "Check one or more GNSS rovers in the "
                                   "GNSS deformation tab (their frame, reference, method and "
                                   "period are the report's).")
        if details is None and path is None:
            return self._ask_report_details(png_dir)
        path = path or self._ask_save_path("Export report", "report.pdf",
                                           "PDF document (*.pdf)")
        if not path:
            return False
        try:
            check_output(path, png_dir)
        except ValueError as err:
            return self.show_error("Cannot write the report", str(err))
        self.statusBar().showMessage(f"Writing the report of {len(options.devices)} rover(s)…")

        def work(mirror, state):
            def progress(done: int, total: int, what: str) -> None:
                state.check()  # Stop: no PDF is left behind
                state.set_progress(100.0 * done / max(total, 1), f"Report: {what}…")
            data = build_report(mirror, options, jobs=None)  # many rovers: every core
            return (write_report(data, path, png_dir=png_dir, progress=progress, jobs=None),
                    data.warnings)

        state = self.runner.submit(
            work, on_done=self._report_written,
            on_error=lambda m: self.show_error("Cannot make the report", m),
            on_progress=lambda _pct, msg: self.statusBar().showMessage(msg),
            on_cancelled=lambda: self.statusBar().showMessage("Report stopped: nothing "
                                                              "written.", 10000),
            slot="report", label="report")
        self.task_progress.track(state, "the report")
        return True

    def _ask_report_details(self, png_dir: str | None) -> bool:
        """The Report details dialog (window-modal, not blocking); OK: the report with
        them, the GNSS plan renumbered."""
        from gui.report_details_dialog import ReportDetailsDialog

        dialog = ReportDetailsDialog(self.settings, self._mirror_path(), self)
        dialog.setAttribute(Qt.WidgetAttribute.WA_DeleteOnClose)
        dialog.setWindowModality(Qt.WindowModality.WindowModal)
        dialog.chosen.connect(self.gnss.point_numbers_changed)
        dialog.chosen.connect(self._number_health_points)
        dialog.chosen.connect(lambda details: self.export_report(png_dir=png_dir,
                                                                 details=details))
        self.report_details_dialog = dialog
        dialog.show()
        return True

    def _report_written(self, done) -> None:
        result, warnings = done
        self.statusBar().showMessage(f"Saved {result.path} ({result.pages} pages)", 10000)
        pngs = f", its {len(result.png_paths)} figures as PNG" if result.png_paths else ""
        notes = "".join(f"\n\nNote: {w}" for w in warnings)  # as devmon report warns
        self.result_dialog = ReportReadyDialog(
            "Report written", f"The report ({result.pages} pages{pngs}) is saved as "
            f"{result.path}.{notes}", Path(result.path), self)
        self.result_dialog.show()
        self.report_written.emit(result)

    def show_log_folder(self) -> None:
        """The folder of ``sync.log`` in the file manager: what support asks for (the
        folder named in a message where no file manager can be started)."""
        folder = log_dir()
        folder.mkdir(parents=True, exist_ok=True)
        self.opener.open(folder)

    def _log_folder_opened(self, path: str, problem: str) -> None:
        if problem:
            self.show_error("Cannot show the log folder", f"Not opened: {problem}.")

    # ------------------------------------------------------------------ messages, closing

    def show_error(self, title: str, text: str) -> bool:
        """Tell the user (a non-blocking message box and the status bar); returns False."""
        self.last_error = text
        self.statusBar().showMessage(text, 10000)
        box = QMessageBox(QMessageBox.Icon.Warning, title, text, QMessageBox.StandardButton.Ok,
                          self)
        box.setAttribute(Qt.WidgetAttribute.WA_DeleteOnClose)
        box.open()
        self.error_shown.emit(text)
        return False

    def _about(self) -> None:
        QMessageBox.about(self, "About devmon", f"devmon {__version__}\nOffline sync and GNSS "
                          f"deformation analysis for device monitoring data.")

    def closeEvent(self, event) -> None:
        self.settings.save_window_state(self.saveGeometry(), self.saveState())
        self.settings.set_value("window/tab", self.tabs.currentIndex())
        if self.plot.params:
            self.settings.set_value("selection/parameters", list(self.plot.params))
        self.settings.sync()
        self._close_mirror()
        # tasks without a mirror (the demo) too: the process must not outlive its window
        # by a demo nobody can see
        self.runner.shutdown()
        super().closeEvent(event)

"""The GNSS deformation view: displacement, trajectory, velocity, plan view, inverse velocity
and a velocity table of the rovers the user checks, with the alarm history of the rover
selected in it.

Every number comes from ``devmon_sync.analyze.rovers.analyze_device`` (the call ``devmon analyze``
makes, so the table shows the command's numbers) and every plot from the builders of
``analysis.figures`` (so reports draw the same figures).  This module gathers the user's
choices, runs the analyses on the window's ``TaskRunner`` (slot ``"gnss"``: a newer request
supersedes an older one, so a slow answer never overwrites a newer one) and shows what comes
back.  Invalid choices (an unreadable EPSG code, a reference that is not a date) are reported
under their field with the analysis' own message, and the plots of the last run stay.

The mirror is read on the worker only: the run returns the site plans too
(``devmon_sync.analyze.site_plans``, the report's placement and numbering), and renumbering
them after the report details change is a worker task of its own (slot ``"gnss-plan"``);
the GUI thread only builds figures from what came back.
"""

from __future__ import annotations

import logging

import numpy as np
from matplotlib.figure import Figure
from PySide6.QtCore import Qt, QTimer, Signal
from PySide6.QtWidgets import (QComboBox, QHBoxLayout, QLabel, QProgressBar,
                               QScrollArea, QSplitter, QTabWidget, QVBoxLayout, QWidget)

from analysis import figures, plan_figure
from analysis.pipeline import RoverAnalysis
from devmon_sync.analyze.site_plans import SitePlan, plan_of_site
from devmon_sync.report.details import ReportDetails
from devmon_sync.store import queries
from gui.timefmt import zone_label
from gui.figure_pane import FigurePane
from gui.gnss_controls import (DEBOUNCE_MS, DEFAULT_COMPONENTS, ERROR_STYLE, FIGURE_TABS,
                               HINT_STYLE, METHOD_SHORT, SLOT, AnalysisControls, _hint_label)
from gui.gnss_table import (AlarmHistoryPanel, VelocityTable, forecast_text,
                            linear_forecast_text)
from gui.gnss_work import GnssResult, analysis_task, plans_task

log = logging.getLogger(__name__)

PLAN_SLOT = "gnss-plan"  # renumbering the plans: a newer request supersedes an older one


# ----------------------------------------------------------------------------- the view

class GnssView(QWidget):
    """Deformation analysis of the checked rovers: the choices on the left; figure tabs and
    the velocity table on the right, with the rover the per-rover tabs show above them.

    The main window calls ``set_devices`` after opening a mirror or a sync,
    ``show_devices`` when rovers are selected in the browser, and ``current_figure`` /
    ``current_csv_rows`` for its exports."""

    #: a short line for the window's status bar
    status = Signal(str)
    #: the results of a run are shown: the list of RoverAnalysis
    analysed = Signal(list)
    #: a run was refused or ended without anything to show: the message
    failed = Signal(str)

    def __init__(self, runner, settings=None, parent=None) -> None:
        super().__init__(parent)
        self.runner = runner
        self.result: GnssResult | None = None
        self._dirty: set[str] = set()  # figure tabs whose figure is out of date
        self._wanted_shown: str | None = None  # the rover show_devices asked for
        self._task = None  # the TaskState of the latest run
        self._debounce = QTimer(self, singleShot=True, interval=DEBOUNCE_MS)
        self._debounce.timeout.connect(self.analyse)
        self.controls = AnalysisControls(settings)
        self._build()
        self.controls.changed.connect(self._choices_changed)
        self.controls.components_changed.connect(lambda: self._redraw({"displacement"}))
        self.controls.analyse_clicked.connect(self.analyse)
        self.device_combo.currentIndexChanged.connect(
            lambda _: (self._redraw({key for key, _ in FIGURE_TABS}),
                       self._show_alarm_history()))
        self.table.itemSelectionChanged.connect(self._table_selection_changed)
        self.tabs.currentChanged.connect(lambda _: self._refresh_current())

    def _build(self) -> None:
        scroll = QScrollArea()
        scroll.setWidgetResizable(True)
        scroll.setWidget(self.controls)
        scroll.setHorizontalScrollBarPolicy(Qt.ScrollBarPolicy.ScrollBarAlwaysOff)
        scroll.setFrameShape(QScrollArea.Shape.NoFrame)
        scroll.setMinimumWidth(max(self.controls.minimumSizeHint().width(), 300) + 16)
        splitter = QSplitter(Qt.Orientation.Horizontal)
        splitter.addWidget(scroll)
        splitter.addWidget(self._build_results())
        splitter.setStretchFactor(0, 0)
        splitter.setStretchFactor(1, 1)
        splitter.setCollapsible(0, True)  # drag the handle left to give the plots all room
        splitter.setCollapsible(1, False)
        splitter.setSizes([330, 1000])
        layout = QVBoxLayout(self)
        layout.setContentsMargins(4, 4, 4, 4)
        layout.addWidget(splitter)

    def _build_results(self) -> QWidget:
        self.device_combo = QComboBox()
        self.device_combo.setSizeAdjustPolicy(QComboBox.SizeAdjustPolicy.AdjustToContents)
        self.device_combo.setToolTip("The rover the displacement, trajectory, velocity and "
                                     "inverse-velocity tabs show; the plan view shows its "
                                     "site")
        self.progress = QProgressBar()
        self.progress.setRange(0, 100)
        self.progress.setFixedWidth(160)
        self.progress.setTextVisible(False)
        self.progress.hide()
        self.progress_label = _hint_label()
        top = QHBoxLayout()
        top.addWidget(QLabel("Shown rover:"))
        top.addWidget(self.device_combo)
        top.addStretch(1)
        top.addWidget(self.progress_label)
        top.addWidget(self.progress)
        hint = "Check one or more rovers on the left: they are analysed by themselves."
        self.panes = {key: FigurePane(hint) for key, _ in FIGURE_TABS}
        self.table = VelocityTable()
        self.alarm_history = AlarmHistoryPanel()
        self.alarm_history.setToolTip("The alarm history of the rover selected in the table "
                                      "(or shown above): each level reached in the period, "
                                      "when first and last, in the site's time zone")
        table_split = QSplitter(Qt.Orientation.Vertical)
        table_split.addWidget(self.table)
        table_split.addWidget(self.alarm_history)
        table_split.setStretchFactor(0, 3)
        table_split.setStretchFactor(1, 2)
        table_split.setCollapsible(0, False)
        table_split.setSizes([420, 280])  # the history's rows visible without scrolling
        self.tabs = QTabWidget()
        for key, title in FIGURE_TABS:
            self.tabs.addTab(self.panes[key], title)
        self.tabs.addTab(table_split, "Velocity table")
        self.message = _hint_label()
        box = QWidget()
        layout = QVBoxLayout(box)
        layout.setContentsMargins(4, 0, 0, 0)
        layout.addLayout(top)
        layout.addWidget(self.tabs, 1)
        layout.addWidget(self.message)
        return box

    # ------------------------------------------------------------------ public API

    def set_devices(self, devices: list[queries.GnssDevice]) -> None:
        """The rovers of the open mirror (after opening it, or after a sync).  Checked rovers
        that are still there stay checked and are analysed again (a sync adds epochs); an
        empty list clears the view."""
        self.controls.set_devices(devices)
        if not devices:
            self._clear("Open a mirror with GNSS rovers to analyse their deformation.")
        elif self.controls.checked_serials():
            self.analyse()

    def show_devices(self, serials: list[str]) -> None:
        """Show these rovers (a selection in the browser).  One rover that is already
        analysed is just shown; otherwise exactly these rovers are checked and analysed now,
        the first one shown.  Serials that are not rovers with epochs are ignored."""
        devices = self.controls.devices
        wanted = [s for s in serials if s in devices and devices[s].epochs]
        if not wanted:
            return
        if len(wanted) == 1 and self.device_combo.findData(wanted[0]) >= 0 \
                and wanted[0] in self.controls.checked_serials():
            self.set_shown_device(wanted[0])
            return
        self._wanted_shown = wanted[0]
        self.controls.check(wanted, emit=False)
        self.analyse()

    def current_figure(self) -> Figure | None:
        """The figure of the visible tab (None on the table tab or before an analysis)."""
        pane = self.tabs.currentWidget()
        if not isinstance(pane, FigurePane):
            return None
        self._refresh_current()
        return pane.figure

    def current_csv_rows(self) -> tuple[list[str], list[list]] | None:
        """(header, rows) of the shown rover's displacement: every received epoch with its
        time (UTC, ISO 8601), east/north/up in mm in the analysed frame (empty for an epoch
        the analysis did not use) and whether it was kept, an outlier, or rejected by the
        quality filter.  None before an analysis."""
        analysis = self.shown_analysis()
        if analysis is None:
            return None
        frame, d = analysis.frame, analysis.displacement
        header = ["time_utc", f"east_mm ({frame.label})", f"north_mm ({frame.label})",
                  f"up_mm ({frame.height_type} height)", "status"]
        kept_index = np.cumsum(analysis.kept) - 1
        times = np.datetime_as_string(analysis.t_all.astype("datetime64[s]"), unit="s")
        rows = []
        for i, time in enumerate(times):
            if analysis.kept[i]:
                j = kept_index[i]
                rows.append([time + "Z", round(float(d.east_m[j]) * 1e3, 3),
                             round(float(d.north_m[j]) * 1e3, 3),
                             round(float(d.up_m[j]) * 1e3, 3), "kept"])
            else:
                status = "outlier" if analysis.outliers[i] else "rejected by quality filter"
                rows.append([time + "Z", "", "", "", status])
        return header, rows

    def analyses(self) -> list[RoverAnalysis]:
        """The analyses shown now, in the order of the rover list."""
        return list(self.result.analyses) if self.result else []

    def shown_analysis(self) -> RoverAnalysis | None:
        """The analysis of the rover the per-rover tabs show."""
        serial = self.device_combo.currentData()
        return next((a for a in self.analyses() if a.serial_number == serial), None)

    def set_shown_device(self, serial: str) -> None:
        """Show this analysed rover in the per-rover tabs."""
        index = self.device_combo.findData(serial)
        if index >= 0:
            self.device_combo.setCurrentIndex(index)

    def _table_selection_changed(self) -> None:
        """A rover selected in the table: its alarm history under the table, and it becomes
        the shown rover of the per-rover tabs."""
        serial = self.table.selected_serial()
        if serial is not None and serial != self.device_combo.currentData():
            self.set_shown_device(serial)  # shows its history through the combo
        else:
            self._show_alarm_history()

    def _show_alarm_history(self) -> None:
        """The alarm history of the rover selected in the table, else of the shown one."""
        serial = self.table.selected_serial() or self.device_combo.currentData()
        analysis = next((a for a in self.analyses() if a.serial_number == serial), None)
        self.alarm_history.show_analysis(
            analysis, self._tz_name(serial) if analysis is not None else None)

    def busy(self) -> bool:
        return not self.progress.isHidden()

    # ------------------------------------------------------------------ running

    def _choices_changed(self, valid: bool) -> None:
        """Re-analyse a moment after the last valid change (typing an EPSG code passes
        through invalid and unintended valid codes: only where the typing stops counts)."""
        if valid and self.controls.checked_serials():
            self._debounce.start()
        else:
            self._debounce.stop()

    def analyse(self) -> None:
        """Analyse the checked rovers now, on the worker pool."""
        self._debounce.stop()
        request = self.controls.request()
        if request is None:
            text = "Not analysed: " + " ".join(self.controls.problems().values())
            if self.result is not None:
                text += " The plots and the table still show the last analysis."
            return self._refuse(text)
        if not request.serials:
            self._say("Check one or more rovers to analyse.")
            return
        if self.runner.mirror is None:
            return self._refuse("Open a mirror first.")
        self.progress.setValue(0)
        self.progress.show()
        self.progress_label.setText("Analysing…")
        self.progress_label.show()
        self._task = self.runner.submit(
            analysis_task(request, self._details()),
            on_done=self._show_result, on_error=self._task_failed,
            on_progress=self._task_progress, on_cancelled=self._task_cancelled, slot=SLOT,
            label="GNSS analysis")

    def _refuse(self, text: str) -> None:
        self._say(text, error=True)
        self.failed.emit(text)

    def _task_progress(self, percent: float, message: str) -> None:
        self.progress.setValue(int(percent))
        self.progress_label.setText(message)

    def _task_cancelled(self) -> None:
        """A superseded run ends quietly (the newer one still shows its progress); a run
        stopped for good (the mirror closed) clears the progress."""
        if self._task is None or self._task.cancelled:
            self._task_finished()

    def _task_finished(self) -> None:
        self.progress.hide()
        self.progress_label.hide()

    def _task_failed(self, message: str) -> None:
        self._task_finished()
        self._refuse(f"The analysis failed: {message}")

    def _show_result(self, result: GnssResult) -> None:
        self._task_finished()
        if not result.analyses:
            return self._refuse("No rover could be analysed: " + "; ".join(result.errors))
        self.result = result
        self._fill_device_combo(result.analyses)
        self.table.fill(result.analyses, self._tz_name)
        self._show_alarm_history()
        options = result.request.options
        text = (f"{len(result.analyses)} rover(s) analysed in {result.analyses[0].frame.label}, "
                f"reference {options.reference.describe()}, {METHOD_SHORT[options.method]} "
                f"velocities.")
        if result.errors:
            text += " Not analysed: " + "; ".join(result.errors)
        self._say(text, error=bool(result.errors))
        self.status.emit(text)
        self._redraw({key for key, _ in FIGURE_TABS})
        self.analysed.emit(list(result.analyses))
        self.point_numbers_changed()  # if they changed while the run was on its way

    def _fill_device_combo(self, analyses: list[RoverAnalysis]) -> None:
        wanted = self._wanted_shown or self.device_combo.currentData()
        self._wanted_shown = None
        self.device_combo.blockSignals(True)
        self.device_combo.clear()
        for analysis in analyses:
            self.device_combo.addItem(f"{analysis.display_name}  ·  {analysis.serial_number}",
                                      analysis.serial_number)
        self.device_combo.setCurrentIndex(max(self.device_combo.findData(wanted), 0))
        self.device_combo.blockSignals(False)

    def _say(self, text: str, error: bool = False) -> None:
        self.message.setText(text)
        self.message.setStyleSheet(ERROR_STYLE if error else HINT_STYLE)
        self.message.setVisible(bool(text))

    def _clear(self, text: str) -> None:
        self.result = None
        self.device_combo.clear()
        self.table.setRowCount(0)
        self.alarm_history.show_analysis(None)
        for pane in self.panes.values():
            pane.set_figure(None, text)
            pane.set_note("")
        self._dirty.clear()
        self._say("")

    def _tz_name(self, serial: str) -> str | None:
        """The site timezone of a rover; None (UTC) when it has none or an unknown one."""
        devices = self.result.devices if self.result else self.controls.devices
        device = devices.get(serial)
        name = device.site_timezone if device else None
        return name if zone_label(name) != "UTC" else None

    # ------------------------------------------------------------------ the figures

    def _redraw(self, keys: set[str]) -> None:
        self._dirty |= keys
        self._refresh_current()

    def _refresh_current(self) -> None:
        """Build the visible tab's figure when its inputs changed: only what is looked at is
        drawn, so a run over many rovers does not draw five figures nobody sees."""
        pane = self.tabs.currentWidget()
        key = next((k for k, p in self.panes.items() if p is pane), None)
        analysis = self.shown_analysis()
        if key not in self._dirty or analysis is None:
            return
        self._dirty.discard(key)
        try:
            figure, note = self._build_figure(key, analysis)
        except Exception as err:  # a plotting bug must not take the view down
            log.exception("drawing the %s figure failed", key)
            pane.set_figure(None, f"Could not draw this plot: {type(err).__name__}: {err}")
            pane.set_note("")
            return
        pane.set_figure(figure, note)  # no figure: the note is the placeholder
        pane.set_note(note if figure is not None else "")

    def _build_figure(self, key: str, analysis: RoverAnalysis) -> tuple[Figure | None, str]:
        tz = self._tz_name(analysis.serial_number)
        levels = self.result.alarm_levels.get(analysis.serial_number, {})
        if key == "displacement":
            components = self.controls.components() or list(DEFAULT_COMPONENTS)
            if analysis.azimuth_deg is None:
                components = [c for c in components if c not in ("along", "across")] or \
                    list(DEFAULT_COMPONENTS)
            # a component an alarm level judges is always shown, with its ladder
            components = figures.panels_with_levels(analysis, components)
            return figures.displacement_figure(
                analysis, components=components, tz=tz,
                alarm_levels_mm=levels.get("displacement") or None), ""
        if key == "trajectory":
            return figures.trajectory_figure(analysis, tz=tz), ""
        if key == "velocity":
            return figures.velocity_figure(
                analysis, tz=tz, alarm_levels_mm_per_day=levels.get("velocity") or None), ""
        if key == "inverse":
            summary = analysis.summary()
            return (figures.inverse_velocity_figure(analysis, tz=tz),
                    "\n".join(x for x in (forecast_text(summary, tz),
                                          linear_forecast_text(summary, tz)) if x))
        return self._plan_figure(analysis)

    def point_numbers_changed(self, *_args) -> None:
        """The report details remembered for this mirror changed: when their point numbers
        are not those the plans have, number the plans again on a worker (resolving the
        numbers reads the mirror), then redraw the plan."""
        result = self.result
        if result is None or self.runner.mirror is None:
            return
        details = self._details()
        if details.point_numbers == result.details.point_numbers:
            return
        self.runner.submit(plans_task(result, details),
                           on_done=lambda plans: self._plans_numbered(result, details, plans),
                           slot=PLAN_SLOT, label="numbering the site plan")

    def _plans_numbered(self, result: GnssResult, details: ReportDetails,
                        plans: list[SitePlan]) -> None:
        if result is not self.result:  # a newer run came back first: it has its own
            return
        result.plans, result.details = plans, details
        self._redraw({"plan"})

    def _details(self) -> ReportDetails:
        """The report details remembered for this mirror (File → Export report): what
        numbers the plan's points, as in the report."""
        from gui.report_details_dialog import remembered_details

        mirror = self.runner.mirror
        if mirror is None:
            return ReportDetails()
        return remembered_details(self.controls.settings, mirror.path)

    def _plan_figure(self, shown: RoverAnalysis) -> tuple[Figure | None, str]:
        """The plan of the shown rover's site, as the run placed it (``result.plans``, the
        report's ``site_plans``): its analysed rovers at their latest positions in the
        analysis frame (projected when it is a grid, else local east/north from the rovers'
        centroid; the axis names say which), numbered as the report details remembered for
        this mirror number them (File → Export report)."""
        device = self.result.devices[shown.serial_number]
        plan = plan_of_site(self.result.plans, device.site_uuid)
        if plan is None:
            return None, "No position is known for these rovers."
        missing = len(plan.unplaced)
        note = f"{missing} rover(s) without a known position are not drawn." if missing else ""
        site_name = device.site_name or "Site plan"
        return plan_figure.plan_view_figure(list(plan.points), frame_label=plan.frame_label,
                                        axis_names=plan.axis_names,
                                        title=f"{site_name}: horizontal displacement"), note

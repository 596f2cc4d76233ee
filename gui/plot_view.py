"""Parameters against time: several series, stacked or together, that stay fluid with years
of data.

Every draw asks the store for a *decimated* series of the visible range (min and max per pixel
column, ``browse.readings_decimated``) on a worker; zooming or panning re-queries after a short
pause, and the newest query supersedes any older one still running.  The figure itself comes
from ``analysis.figures.timeseries_figure`` so that reports draw the same plot; the mouse
wheel's zoom is the figure pane's (``figure_pane.wheel_zoom``), as in the GNSS figures.
"""

from __future__ import annotations

from dataclasses import dataclass
from datetime import datetime, timedelta, timezone

import numpy as np
from matplotlib.backends.backend_qtagg import FigureCanvasQTAgg
from matplotlib import dates as mdates
from matplotlib.figure import Figure
from PySide6.QtCore import QDateTime, Qt, QTimeZone, QTimer, Signal
from PySide6.QtWidgets import (QCheckBox, QDateTimeEdit, QHBoxLayout, QLabel, QPushButton,
                               QVBoxLayout, QWidget)

from analysis.figures import Series, timeseries_figure
from devmon_sync.store import browse, queries
from gui.browser import PARAMETER_MIME
from gui.figure_pane import FigurePane
from gui.timefmt import zone, zone_label

QUICK_RANGES = (("24 h", timedelta(hours=24)), ("7 d", timedelta(days=7)),
                ("30 d", timedelta(days=30)), ("All", None))
REQUERY_DELAY_MS = 120  # pause after the last zoom/pan step before re-querying
NO_RANGE = "no plot yet"  # what the range boxes show before anything is plotted


@dataclass
class PlottedParameter:
    info: object  # browse.ParameterInfo
    t: np.ndarray  # datetime64[us], UTC, what the line shows now
    values: np.ndarray
    decimated: bool = False
    total: int = 0
    levels: dict | None = None  # alarm levels on its values {name: threshold}, its unit


def _utc(t: datetime) -> datetime:
    return t if t.tzinfo else t.replace(tzinfo=timezone.utc)


def _num_to_utc(x: float) -> datetime:
    return mdates.num2date(x).astimezone(timezone.utc)


class _Canvas(FigureCanvasQTAgg):
    """The plot's canvas; parameters dropped from the browser are added to the plot."""

    dropped = Signal(list)

    def __init__(self, figure) -> None:
        super().__init__(figure)
        self.setAcceptDrops(True)

    def dragEnterEvent(self, event) -> None:
        if event.mimeData().hasFormat(PARAMETER_MIME):
            event.acceptProposedAction()

    dragMoveEvent = dragEnterEvent

    def dropEvent(self, event) -> None:
        data = bytes(event.mimeData().data(PARAMETER_MIME)).decode()
        self.dropped.emit([u for u in data.split("\n") if u])
        event.acceptProposedAction()


class PlotView(QWidget):
    """Stacked or overlaid time series with linked axes, a shared cursor, quick ranges, a
    statistics readout of the visible range and decimated re-queries on zoom."""

    status = Signal(str)
    redrawn = Signal()  # after a (re-)query has been drawn: tests wait on it

    def __init__(self, runner, parent=None) -> None:
        super().__init__(parent)
        self.runner = runner
        self.params: dict[str, PlottedParameter] = {}
        self.tz_name: str | None = None
        # the canvas and its toolbar: a new pair for each figure (``FigurePane``'s rule)
        self.pane = FigurePane("", canvas_class=_Canvas)
        self.pane.set_figure(self._build_figure())
        self._queries = 0  # re-queries done (zoom tests count them)
        self.stacked = QCheckBox("Stacked", checked=True)
        self.readout = QLabel(" ")
        self.stats = QLabel(" ")
        for label in (self.readout, self.stats):
            label.setTextInteractionFlags(Qt.TextInteractionFlag.TextSelectableByMouse)
            label.setWordWrap(True)
        self.start_edit, self.end_edit = QDateTimeEdit(), QDateTimeEdit()
        for edit in (self.start_edit, self.end_edit):
            edit.setCalendarPopup(True)
            edit.setDisplayFormat("yyyy-MM-dd HH:mm")
            edit.setTimeZone(QDateTime.currentDateTimeUtc().timeZone())
        self._build_layout()
        self._show_no_range()
        self._timer = QTimer(self, singleShot=True, interval=REQUERY_DELAY_MS)
        self._timer.timeout.connect(self.requery)
        self._cursor_lines: list = []
        self._cursor_x: float | None = None  # where the readout reads (matplotlib date)
        self._span: tuple[datetime, datetime] | None = None  # the data's whole span
        self.stacked.toggled.connect(lambda _: self._rebuild())
        self._connect_canvas()

    def _build_layout(self) -> None:
        bar = QHBoxLayout()
        for text, span in QUICK_RANGES:
            button = QPushButton(text)
            button.setToolTip(f"show the last {text} of the data" if span else "show all data")
            button.clicked.connect(lambda _=False, s=span: self.show_last(s))
            bar.addWidget(button)
        bar.addWidget(QLabel("from"))
        bar.addWidget(self.start_edit)
        bar.addWidget(QLabel("to"))
        bar.addWidget(self.end_edit)
        self.apply_button = QPushButton("Apply")
        self.apply_button.clicked.connect(self._apply_custom_range)
        bar.addWidget(self.apply_button)
        bar.addStretch(1)
        bar.addWidget(self.stacked)
        clear = QPushButton("Clear")
        clear.clicked.connect(self.clear)
        bar.addWidget(clear)
        layout = QVBoxLayout(self)
        layout.addLayout(bar)
        layout.addWidget(self.pane, 1)
        layout.addWidget(self.readout)
        layout.addWidget(self.stats)

    @property
    def figure(self) -> Figure:
        return self.pane.figure

    @property
    def canvas(self) -> _Canvas:
        return self.pane.canvas

    @property
    def toolbar(self):
        return self.pane.toolbar

    # ------------------------------------------------------------------ series

    def add_parameters(self, uuids: list[str]) -> None:
        """Plot these parameters (any devices) over the current range, or their whole span."""
        new = [u for u in dict.fromkeys(uuids) if u not in self.params]
        if not new:
            return
        self.status.emit(f"Loading {len(new)} parameter(s)…")
        self.runner.submit(lambda m, s: ([browse.parameter_info(m, u) for u in new],
                                         queries.parameter_alarm_levels(m, new)),
                           on_done=self._infos_loaded, on_error=self.status.emit,
                           label="parameter info")

    def _infos_loaded(self, loaded: tuple) -> None:
        infos, levels = loaded
        for info in infos:
            self.params[info.uuid] = PlottedParameter(info, np.array([], "datetime64[us]"),
                                                      np.array([]), levels=levels.get(info.uuid))
        spans = [(p.info.first, p.info.last) for p in self.params.values() if p.info.first]
        self._span = ((min(_utc(a) for a, _ in spans), max(_utc(b) for _, b in spans))
                      if spans else None)
        self.tz_name = getattr(infos[0], "site_timezone", None) if infos else self.tz_name
        if self._span is not None:  # the custom range starts as the data's whole span
            self._set_range_boxes(*self._span)
        self._rebuild()
        if self._span is not None:
            # fix the time axis on the data before anything draws: an empty axes would
            # autoscale to 1970 and its re-query would supersede this first one
            self._set_xlim(*self._span)
        self._timer.stop()
        self.requery(initial=True)

    def clear(self) -> None:
        self.params.clear()
        self._span = None
        self._rebuild()
        self._show_no_range()

    def _series(self) -> list[Series]:
        return [Series(label=f"{p.info.device_name}: {p.info.name}",
                       unit=p.info.unit or "", t=p.t, values=p.values, gid=uuid)
                for uuid, p in self.params.items()]

    def _rebuild(self) -> None:
        """A fresh figure for the current set of series (their data are refreshed by
        ``requery``): the builder decides the axes, so the GUI and reports agree.  The pane
        gives it a canvas and a toolbar of its own (``FigurePane.set_figure``: a figure
        swapped onto a live canvas lost the toolbar's zoom and pan), so the view's handlers
        are connected to the new canvas again."""
        old = self.current_range()
        self.pane.set_figure(self._build_figure())
        self._cursor_lines, self._cursor_x = [], None
        self._connect_canvas()
        if old is not None and self.params:
            self._set_xlim(*old)
        self.toolbar.update()  # its history starts at this view: Home comes back to it
        self.canvas.draw_idle()

    def _connect_canvas(self) -> None:
        """What the view listens to on its canvas: drops, the pointer, and every change of
        the time range (zoom, pan, the wheel, home, back) for a re-query.  (The wheel's zoom
        is the pane's.)"""
        self.canvas.dropped.connect(self.add_parameters)
        self.canvas.mpl_connect("motion_notify_event", self._on_motion)
        for ax in self.figure.axes:
            ax.callbacks.connect("xlim_changed", lambda _ax: self._range_changed())

    def _range_changed(self) -> None:
        """The time range changed: re-query after a short pause, and drop a cursor readout
        whose time is no longer in view (it would read out a time nobody sees)."""
        self._timer.start()
        if self._cursor_x is None or not self.axes():
            return
        lo, hi = self.axes()[0].get_xlim()
        if not lo <= self._cursor_x <= hi:
            self._clear_cursor()

    def _clear_cursor(self) -> None:
        """No readout: the cursor lines, the readout and the toolbar's coordinates go (the
        toolbar's stayed at the pointer's last place in the old view)."""
        for line in self._cursor_lines:
            line.remove()
        self._cursor_lines, self._cursor_x = [], None
        self.readout.setText(" ")
        if self.toolbar is not None:
            self.toolbar.set_message("")

    def _build_figure(self) -> Figure:
        series = self._series() if hasattr(self, "params") else []
        if not series:
            figure = Figure(figsize=(10, 7))
            figure.text(0.5, 0.5, "Double-click a parameter in the browser, or drag it here",
                        ha="center", va="center", color="0.4", fontsize=12)
            return figure
        try:
            return timeseries_figure(series, stacked=self.stacked.isChecked(), tz=self.tz_name,
                                     thresholds=self.thresholds())
        except ValueError as err:  # e.g. a third unit on one axes: stack them instead
            self.status.emit(f"{err}; drawing them stacked")
            return timeseries_figure(series, stacked=True, tz=self.tz_name,
                                     thresholds=self.thresholds())

    def thresholds(self) -> dict[str, dict[str, float]]:
        """Alarm levels of the plotted parameters by unit (the first parameter of a unit with
        levels decides: one set of lines per axes)."""
        out: dict[str, dict[str, float]] = {}
        for p in self.params.values():
            if p.levels:
                out.setdefault(p.info.unit or "", dict(p.levels))
        return out

    # ------------------------------------------------------------------ ranges

    def axes(self) -> list:
        return list(self.figure.axes)

    def current_range(self) -> tuple[datetime, datetime] | None:
        axes = self.axes()
        if not axes or not self.params:
            return None
        lo, hi = axes[0].get_xlim()
        return _num_to_utc(lo), _num_to_utc(hi)

    def _set_xlim(self, start: datetime, end: datetime) -> None:
        axes = self.axes()
        if axes:
            axes[0].set_xlim(mdates.date2num(_utc(start)), mdates.date2num(_utc(end)))

    def show_range(self, start: datetime, end: datetime) -> None:
        """Show ``start``..``end`` (a quick range, the custom range): the time axis set, and
        every y axis fitted again to what the new range holds once its data are drawn,
        whatever a zoom rectangle set before (series ran off the axes until Home)."""
        if end <= start:
            self.status.emit("The end of the range must be after its start.")
            return
        for ax in self.axes():
            ax.set_autoscaley_on(True)
        self._set_xlim(start, end)
        self._timer.stop()
        self.requery()

    def show_last(self, span: timedelta | None) -> None:
        """A quick range: the last ``span`` of the plotted data (``None``: all of it)."""
        if self._span is None:
            return
        start, end = self._span
        if span is not None:
            start = max(start, end - span)
        if end <= start:
            end = start + timedelta(hours=1)
        self.show_range(start, end)

    def _show_range_in_boxes(self) -> None:
        """The date boxes show the range in view, whatever set it (a quick range, zoom,
        pan, the wheel), so Apply starts from what is seen."""
        shown = self.current_range()
        if shown is not None:
            self._set_range_boxes(*shown)

    def _set_range_boxes(self, start: datetime, end: datetime) -> None:
        for edit, t in zip((self.start_edit, self.end_edit), (start, end)):
            edit.setDateTime(QDateTime.fromSecsSinceEpoch(int(t.timestamp()), edit.timeZone()))
        for widget in (self.start_edit, self.end_edit, self.apply_button):
            widget.setEnabled(True)

    def _show_no_range(self) -> None:
        """Before anything is plotted the range boxes say so (``NO_RANGE``, greyed, as is
        Apply): a date there (Qt's default, 2000-01-01) was read as the data's range.  The
        boxes' earliest time shows as that text (``setSpecialValueText``)."""
        for edit in (self.start_edit, self.end_edit):
            edit.setMinimumDateTime(QDateTime.fromSecsSinceEpoch(0, QTimeZone.utc()))
            edit.setSpecialValueText(NO_RANGE)
            edit.setDateTime(edit.minimumDateTime())
        for widget in (self.start_edit, self.end_edit, self.apply_button):
            widget.setEnabled(False)

    def _apply_custom_range(self) -> None:
        start, end = (datetime.fromtimestamp(e.dateTime().toSecsSinceEpoch(), timezone.utc)
                      for e in (self.start_edit, self.end_edit))
        self.show_range(start, end)

    # ------------------------------------------------------------------ queries

    def _buckets(self) -> int:
        return max(100, int(self.canvas.width()))

    def requery(self, initial: bool = False) -> None:
        """Fetch every series' decimated data for the visible range (on a worker)."""
        if not self.params:
            return
        if initial or self.current_range() is None:
            start, end = self._span if self._span else (None, None)
        else:
            start, end = self.current_range()
        uuids, buckets = list(self.params), self._buckets()
        self._queries += 1

        def work(mirror, state):
            out = {}
            for uuid in uuids:
                state.check()
                out[uuid] = (browse.readings_decimated(mirror, uuid, start, end, buckets),
                             browse.readings_stats(mirror, uuid, start, end))
            return start, end, out

        self.runner.submit(work, on_done=lambda r: self._draw(r, initial),
                           on_error=self.status.emit, slot=f"plot-{id(self)}",
                           label="plot query")

    def _draw(self, result, initial: bool) -> None:
        start, end, data = result
        for uuid, (series, stats) in data.items():
            p = self.params.get(uuid)
            if p is None:
                continue
            p.t, p.values = series["ts"], series["value"]
            p.decimated, p.total = bool(series.get("decimated")), int(series.get("total", 0))
            p.stats = stats
            for line in self._lines(uuid):
                line.set_data(mdates.date2num(p.t) if p.t.size else [], p.values)
        for ax in self.axes():
            ax.relim()
            ax.autoscale_view(scalex=False, scaley=True)
        if initial and start is not None and end is not None:
            self._set_xlim(start, end)
        self._timer.stop()  # the limits set here are the ones just queried
        self._show_range_in_boxes()
        if initial:  # replaces "Loading…"
            self.status.emit(f"{len(self.params)} parameter(s) plotted")
        self._show_stats()
        self.canvas.draw_idle()
        self.redrawn.emit()

    def _lines(self, uuid: str) -> list:
        return [line for ax in self.axes() for line in ax.get_lines()
                if line.get_gid() == f"series:{uuid}"]

    # ------------------------------------------------------------------ readouts

    def _show_stats(self) -> None:
        parts = []
        for p in self.params.values():
            s = getattr(p, "stats", None)
            if not s or not s.get("count"):
                parts.append(f"{p.info.name}: no readings in view")
                continue
            unit = p.info.unit or ""
            rate = s.get("rate_per_day")
            parts.append(f"{p.info.name}: min {s['min']:.4g}, max {s['max']:.4g}, mean "
                         f"{s['mean']:.4g} {unit}, rate "
                         + (f"{rate:+.3g} {unit}/day" if rate is not None and np.isfinite(rate)
                            else "-")
                         + f" ({s['count']:,} readings"
                         + (", drawn decimated" if p.decimated else "") + ")")
        self.stats.setText("Visible range: " + " · ".join(parts) if parts else " ")

    def _on_motion(self, event) -> None:
        if event.inaxes is None or event.xdata is None or not self.params:
            return
        x = self._cursor_x = float(event.xdata)
        if not self._cursor_lines:
            self._cursor_lines = [ax.axvline(x, color="0.4", lw=0.8, gid="cursor")
                                  for ax in self.axes()]
        for line in self._cursor_lines:
            line.set_xdata([x, x])
        t = _num_to_utc(x)
        parts = [t.astimezone(zone(self.tz_name)).strftime("%Y-%m-%d %H:%M:%S ")
                 + zone_label(self.tz_name)]
        for p in self.params.values():
            value = self.value_at(p, t)
            parts.append(f"{p.info.name} = "
                         + (f"{value:.6g} {p.info.unit or ''}" if value is not None else "-"))
        self.readout.setText("  ·  ".join(parts))
        self.canvas.draw_idle()

    @staticmethod
    def value_at(p: PlottedParameter, t: datetime) -> float | None:
        """The plotted value nearest to ``t`` (None without data)."""
        if not p.t.size:
            return None
        target = np.datetime64(t.astimezone(timezone.utc).replace(tzinfo=None), "us")
        i = int(np.clip(np.searchsorted(p.t, target), 1, p.t.size - 1)) if p.t.size > 1 else 0
        if p.t.size > 1 and abs(p.t[i - 1] - target) <= abs(p.t[i] - target):
            i -= 1
        return float(p.values[i])

    # ------------------------------------------------------------------ export

    def csv_rows(self, mirror) -> tuple[list[str], list[list]]:
        """Full-resolution readings of every plotted parameter in the visible range."""
        rng = self.current_range() or (None, None)
        rows = []
        for uuid, p in self.params.items():
            data = browse.readings(mirror, uuid, *rng)
            times = np.datetime_as_string(data["ts"], unit="s")
            rows += [[f"{t}Z", p.info.serial_number, p.info.name, v,
                      p.info.unit or ""] for t, v in zip(times, data["value"].tolist())]
        return ["time_utc", "device", "parameter", "value", "unit"], rows

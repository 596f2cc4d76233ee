#!/usr/bin/env python3
"""The desktop GUI (gui/), offscreen: opening a 200-device mirror to the first plot, zoom
redraws of one 10-million-reading series, and the GUI thread's responsiveness during a sync.

    /work/venv/bin/python benchmarks/bench_gui.py [--quick] [--repeat 3] [--days 7]
        [--readings 10000000] [--parts open,zoom,sync]

Qt runs on the ``offscreen`` platform (no display); every window is a real ``MainWindow`` at
1400x900, shown, driven through its own methods and signals, as the tests drive it.  Settings,
the profiles directory (``DEVMON_CONFIG_DIR``) and the keyring (a plaintext file) live in a
temporary directory, so the user's own are never read or touched.

1. Open to first plot: a ``WorldSize(sites=8, devices=200, days=--days)`` world synced from
   the reference server (in-process, loopback) into a fresh mirror.  Each repeat is a fresh
   window: ``open_file`` -> ``opened`` (tree, groups, health table filled), then the parameter
   with the most readings is activated as a double-click in the browser does
   (``parameters_activated``) -> ``plot.redrawn`` -> a forced ``canvas.draw()``.
2. Zoom redraw: bench_browse's fixture (one parameter, ``--readings`` readings every 30 s),
   opened in a window and plotted (the first full-range draw is timed too), then zoomed
   whole range -> 1 year -> 1 month -> 1 week -> 1 day -> whole range again with
   ``plot.show_range`` (each window ends at 3/4 of the series, as in bench_browse), each timed
   from the call to ``redrawn`` (query on the worker + ``_draw``) plus a forced
   ``canvas.draw()``.  The bare ``canvas.draw()`` of the same figure right after (best of 3)
   is what matplotlib alone costs; ``/draw`` is the zoom against it, ``/1 s`` against the
   target.  ``store`` is the worker's two store calls for that range (decimated series and
   statistics) made directly, for how much of ``query->redrawn`` is DuckDB.  The pending
   ``draw_idle`` that ``_draw`` queued runs after each measurement, untimed.
3. Responsiveness during a sync: a fresh mirror opened in a window, the Sync dialog (rate
   limit 0, the key from ``DEVMON_API_KEY``, the server's address typed into the dialog)
   runs ``sync_now`` while a 10 ms ``QTimer`` on the GUI thread records each tick.  Gaps
   between ticks are reported from ``sync_now`` to ``synced`` (the sync) and from there to
   the window's ``opened`` (the views re-read after the sync, as ``open_sync_dialog`` wires
   it).  Twice: with the reference server on a thread of this process (its CPU competes for
   the GIL) and as ``python -m devmon_sync serve --port 0`` in a subprocess.  ``max GC`` is
   the longest garbage collection during the sync (it stops every thread).

Times are best and median of ``--repeat`` (sync: every run listed).  ``--quick``: a 2-day
world, 1,000,000 readings, a 16-device sync world, 2 repeats.

PySide6/shiboken6 6.12.0 drop a reference to ``None`` on every call of a Qt method returning
nothing (``setData``, ``setObjectName``, ...) and one to ``True`` on every ``Signal.emit``:
the process dies with "Fatal Python error: none_dealloc" (or ``bool_dealloc``) once their
counts are used up; 6.11.3 does neither, and pyproject.toml excludes 6.12.  The script
checks for the leak at start and refuses to measure a GUI that would crash.
"""

from __future__ import annotations

import os

os.environ.setdefault("QT_QPA_PLATFORM", "offscreen")  # before Qt is imported

import argparse
import gc
import platform
import statistics
import subprocess
import sys
import tempfile
import time
from datetime import UTC, datetime, timedelta
from pathlib import Path

import numpy as np

REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO))

import bench_browse  # noqa: E402  (beside this script: its fixture builder)
from _common import KEY, NOW, iso, sync_world  # noqa: E402

TARGET_S = 1.0  # a zoom should be drawn within a second
MISSED = ("the whole-span query took longer than REQUERY_DELAY_MS and was superseded by the "
          "re-query that the first draw of the still empty axes (their default 1970 limits) "
          "set off: a GUI bug, the plot stays on that range until a zoom or 'All'")
GAP_LIMIT_S = 0.100  # a GUI-thread stall the user notices
TICK_MS = 10


# ----------------------------------------------------------------------------- helpers


def singleton_refs_lost() -> tuple[float, float]:
    """References lost per call of a void Qt method (to None) and per ``Signal.emit`` (to
    True): (0, 0) with a sound PySide6."""
    from PySide6.QtCore import QObject, Signal

    class Probe(QObject):
        ping = Signal()

    obj, n = Probe(), 1000
    obj.ping.connect(lambda: None)
    none, true = sys.getrefcount(None), sys.getrefcount(True)
    for _ in range(n):
        obj.setObjectName("x")
    for _ in range(n):
        obj.ping.emit()
    return (none - sys.getrefcount(None)) / n, (true - sys.getrefcount(True)) / n


def quiet_offscreen_warnings() -> None:
    """Drop the offscreen platform's 'does not support propagateSizeHints()' lines."""
    from PySide6.QtCore import qInstallMessageHandler

    previous = None

    def handler(mode, context, message) -> None:
        if "propagateSizeHints" in message:
            return
        if previous is not None:
            previous(mode, context, message)
        else:
            sys.stderr.write(message + "\n")

    previous = qInstallMessageHandler(handler)


def isolate(tmp: Path) -> None:
    """Profiles, GUI settings and the keyring in ``tmp``; no key from the environment."""
    import keyring
    from keyrings.alt.file import PlaintextKeyring

    from devmon_sync import credentials

    os.environ[credentials.ENV_CONFIG_DIR] = str(tmp / "config")
    os.environ["DEVMON_GUI_SETTINGS"] = str(tmp / "gui.ini")
    os.environ.pop(credentials.ENV_API_KEY, None)
    ring = PlaintextKeyring()
    ring.file_path = str(tmp / "keyring.cfg")
    keyring.set_keyring(ring)


class Gui:
    """The QApplication and small helpers to drive windows without pytest."""

    def __init__(self) -> None:
        from gui.app import make_app

        self.app = make_app()
        self.n = 0

    def flush(self, rounds: int = 3) -> None:
        """Run what is queued (a pending ``draw_idle``, paints, deferred deletes)."""
        from PySide6.QtCore import QCoreApplication, QEvent

        for _ in range(rounds):
            self.app.processEvents()
            QCoreApplication.sendPostedEvents(None, QEvent.Type.DeferredDelete)

    def wait(self, signal, trigger=None, timeout_s: float = 300.0, what: str = "") -> float:
        """Connect to ``signal``, call ``trigger``, run the event loop until the signal comes;
        returns ``perf_counter()`` at the emission."""
        from PySide6.QtCore import QEventLoop, QTimer

        loop = QEventLoop()
        got: list[float] = []

        def on_signal(*_args) -> None:
            got.append(time.perf_counter())
            loop.quit()

        signal.connect(on_signal)
        timer = QTimer(singleShot=True)
        timer.timeout.connect(loop.quit)
        try:
            if trigger is not None:
                trigger()
            if not got:
                timer.start(int(timeout_s * 1000))
                loop.exec()
        finally:
            timer.stop()
            signal.disconnect(on_signal)
        if not got:
            raise RuntimeError(f"timed out after {timeout_s:.0f} s waiting for {what}")
        return got[0]

    def window(self, tmp: Path):
        from gui.main_window import MainWindow
        from gui.settings import Settings

        self.n += 1
        w = MainWindow(Settings(tmp / f"settings-{self.n}.ini"))
        w.resize(1400, 900)
        w.show()
        self.flush()
        return w

    def open(self, w, path: Path) -> float:
        """Open ``path`` in ``w``; seconds from ``open_file`` to ``opened``."""
        t0 = time.perf_counter()
        t1 = self.wait(w.opened, lambda: w.open_file(str(path)) or _failed(w),
                       what=f"{path.name} to open")
        return t1 - t0

    def close(self, w) -> None:
        w.close()
        w.deleteLater()
        self.flush()


def _failed(w) -> None:
    raise RuntimeError(f"open_file failed: {w.last_error}")


def series_line(w, uuid: str):
    (line,) = w.plot._lines(uuid)
    return line


def best_median(values) -> tuple[float, float]:
    return min(values), statistics.median(values)


def ms(seconds: float) -> str:
    return f"{seconds * 1e3:8.0f}"


def bm_text(values) -> str:
    """'best / median' in ms, fixed width."""
    best, med = best_median(values)
    return f"{best * 1e3:6.0f} / {med * 1e3:6.0f}"


# ----------------------------------------------------------------------------- 1. open


def bench_open(gui: Gui, tmp: Path, args) -> None:
    from devmon_sync.server import WorldSize

    size = WorldSize(sites=8, devices=200, days=args.days)
    path = tmp / "world.duckdb"
    synced, counts = sync_world(path, size)
    print(f"\n1. Open to first plot: world {size}: synced in {synced:.1f} s; {counts[0]} "
          f"devices, {counts[1]:,} parameters, {counts[2]:,} readings, {counts[3]:,} epochs; "
          f"{path.stat().st_size / 1e6:.0f} MB")
    phases: dict[str, list[float]] = {"open_file -> opened": [], "activate -> redrawn": [],
                                      "forced canvas.draw()": [], "total": []}
    none_lost: list[int] = []
    missed = 0  # first plots that did not show the parameter's whole span
    picked = points = buckets = None
    for _ in range(args.repeat):
        w = gui.window(tmp)
        try:
            refs = sys.getrefcount(None)
            t0 = time.perf_counter()
            opened = gui.open(w, path)
            none_lost.append(refs - sys.getrefcount(None))
            if picked is None:
                picked = max((p for s in w.overview["sites"] for d in s.devices
                              for x in d.sensors for p in x.parameters),
                             key=lambda p: p.readings)
                assert w.browser.visible_device_count() == counts[0]
            t1 = time.perf_counter()
            t2 = gui.wait(w.plot.redrawn,
                          lambda: w.browser.parameters_activated.emit([picked.uuid]),
                          what="the first plot")
            w.plot.canvas.draw()
            t3 = time.perf_counter()
            points, buckets = len(series_line(w, picked.uuid).get_xdata()), w.plot._buckets()
            missed += w.plot.params[picked.uuid].total < picked.readings
            for key, value in zip(phases, (opened, t2 - t1, t3 - t2, t3 - t0)):
                phases[key].append(value)
        finally:
            gui.close(w)
    print(f"plotted: {picked.name!r} ({picked.readings:,} readings, {points:,} points drawn, "
          f"{buckets} buckets); fresh window each time, {args.repeat} repeats")
    print(f"{'phase':24} {'best ms':>8} {'median':>8} {'1st run':>8}")
    for key, values in phases.items():
        best, med = best_median(values)
        print(f"{key:24} {ms(best)} {ms(med)} {ms(values[0])}")
    if missed:
        print(f"NOTE: {missed} of {args.repeat} first plots showed a wrong range ({MISSED})")
    if args.none_leak:
        print(f"references to None lost per open_file -> opened: "
              f"{statistics.median(none_lost):,.0f} (median)")


# ----------------------------------------------------------------------------- 2. zoom


def zoom_sequence(first: datetime, last: datetime):
    """(label, start, end): whole range, 1 year ... 1 day ending at 3/4 of the series, whole
    range again (widths not shorter than the series are left out)."""
    span = last - first
    end = first + span * 3 / 4
    levels = [("all", first, last)]
    for label, width in (("1 year", timedelta(days=365)), ("1 month", timedelta(days=30)),
                         ("1 week", timedelta(days=7)), ("1 day", timedelta(days=1))):
        if width < span:
            levels.append((label, end - width, end))
    return levels + [("all again", first, last)]


def bare_draw(gui: Gui, canvas, repeat: int = 3) -> float:
    best = float("inf")
    for _ in range(repeat):
        t = time.perf_counter()
        canvas.draw()
        best = min(best, time.perf_counter() - t)
    gui.flush(1)
    return best


def store_alone(mirror, uuid: str, start, end, buckets: int, repeat: int) -> float:
    """Best time of what the plot's worker asks the store for one range (decimated series and
    statistics), called directly on the window's connection while the window is idle."""
    from devmon_sync.store import browse

    best = float("inf")
    for _ in range(repeat):
        t = time.perf_counter()
        browse.readings_decimated(mirror, uuid, start, end, buckets)
        browse.readings_stats(mirror, uuid, start, end)
        best = min(best, time.perf_counter() - t)
    return best


def bench_zoom(gui: Gui, tmp: Path, args) -> None:
    path = tmp / "series.duckdb"
    built = bench_browse.build_fixture(path, args.readings, 0)
    uuid = bench_browse.PARAMETER
    print(f"\n2. Zoom redraw: bench_browse fixture, {args.readings:,} readings every "
          f"{bench_browse.STEP_S} s, built in {built:.1f} s, {path.stat().st_size / 1e6:.0f} MB")
    w = gui.window(tmp)
    try:
        opened = gui.open(w, path)
        w.tabs.setCurrentWidget(w.plot)
        gui.flush()
        canvas = w.plot.canvas
        t0 = time.perf_counter()
        t1 = gui.wait(w.plot.redrawn, lambda: w.plot.add_parameters([uuid]),
                      what="the first plot")
        canvas.draw()
        t2 = time.perf_counter()
        gui.flush()
        p = w.plot.params[uuid]
        first_points = len(series_line(w, uuid).get_xdata())
        first_bare = bare_draw(gui, canvas)
        print(f"opened in {opened * 1e3:.0f} ms; canvas {canvas.width()}x{canvas.height()} px, "
              f"{w.plot._buckets()} buckets; {args.repeat} repeats of the sequence")
        print(f"first full-range plot: add_parameters -> redrawn {(t1 - t0) * 1e3:.0f} ms + "
              f"forced draw {(t2 - t1) * 1e3:.0f} ms = {(t2 - t0) * 1e3:.0f} ms; "
              f"{p.total:,} readings -> {first_points:,} points; bare draw "
              f"{first_bare * 1e3:.0f} ms")
        if p.total < p.info.readings:
            lo, hi = w.plot.current_range()
            print(f"NOTE: that first plot shows {lo:%Y-%m-%d %H:%M} to {hi:%Y-%m-%d %H:%M} UTC, "
                  f"not the series ({p.info.first:%Y-%m-%d} to {p.info.last:%Y-%m-%d}), after "
                  f"{w.plot._queries} queries: {MISSED}")
            t0 = time.perf_counter()
            t1 = gui.wait(w.plot.redrawn, lambda: w.plot.show_last(None), what="'All'")
            canvas.draw()
            t2 = time.perf_counter()
            gui.flush()
            print(f"      the 'All' button then (show_last(None)): -> redrawn "
                  f"{(t1 - t0) * 1e3:.0f} ms + forced draw {(t2 - t1) * 1e3:.0f} ms = "
                  f"{(t2 - t0) * 1e3:.0f} ms; {p.total:,} readings -> "
                  f"{len(series_line(w, uuid).get_xdata()):,} points")
        levels = zoom_sequence(p.info.first, p.info.last)
        rows: dict[str, dict[str, list]] = {label: {"query": [], "draw": [], "total": [],
                                                    "bare": []} for label, _, _ in levels}
        meta: dict[str, tuple[int, int]] = {}
        for _ in range(args.repeat):
            for label, start, end in levels:
                t0 = time.perf_counter()
                t1 = gui.wait(w.plot.redrawn, lambda s=start, e=end: w.plot.show_range(s, e),
                              what=f"the {label} zoom")
                canvas.draw()
                t2 = time.perf_counter()
                gui.flush()  # the draw_idle queued by _draw, untimed
                r = rows[label]
                r["query"].append(t1 - t0)
                r["draw"].append(t2 - t1)
                r["total"].append(t2 - t0)
                r["bare"].append(bare_draw(gui, canvas))
                meta[label] = (w.plot.params[uuid].total, len(series_line(w, uuid).get_xdata()))
        store = {label: store_alone(w.mirror, uuid, start, end, w.plot._buckets(), args.repeat)
                 for label, start, end in levels}
    finally:
        gui.close(w)
    print(f"{'zoom':10} {'in range':>11} {'points':>7} {'query->redrawn':>15} {'store':>5} "
          f"{'forced draw':>15} {'total':>15} {'bare draw':>9} {'/draw':>6} {'/1 s':>5}")
    print(f"{'':10} {'':>11} {'':>7} {'best / median':>15} {'best':>5} {'best / median':>15} "
          f"{'best / median':>15} {'best ms':>9}")
    for label, r in rows.items():
        total_best = min(r["total"])
        bare = min(r["bare"])
        print(f"{label:10} {meta[label][0]:11,} {meta[label][1]:7,} {bm_text(r['query']):>15} "
              f"{store[label] * 1e3:5.0f} {bm_text(r['draw']):>15} {bm_text(r['total']):>15} "
              f"{bare * 1e3:9.0f} {total_best / bare:5.1f}x {total_best / TARGET_S:5.2f}")


# ----------------------------------------------------------------------------- 3. sync


class InProcessServer:
    """The reference server on a thread of this process."""

    label = "server in-process (thread)"

    def __init__(self, size) -> None:
        from devmon_sync.server import ReferenceServer, ServerConfig

        t = time.perf_counter()
        self.srv = ReferenceServer(ServerConfig(port=0, api_keys={KEY: None}, now=NOW,
                                                rate_limit_per_minute=0, size=size)).start()
        self.startup_s = time.perf_counter() - t
        self.base_url = self.srv.base_url
        self.command = "ReferenceServer(ServerConfig(...)).start()"

    def stop(self) -> None:
        self.srv.stop()


class SubprocessServer:
    """``python -m devmon_sync serve --port 0`` in a subprocess; the base URL it prints."""

    label = "server in a subprocess"

    def __init__(self, size) -> None:
        cmd = [sys.executable, "-m", "devmon_sync", "serve", "--port", "0", "--api-key", KEY,
               "--sites", str(size.sites), "--devices", str(size.devices), "--days",
               str(size.days), "--rate-limit", "0", "--now", iso(NOW)]
        self.command = "python " + " ".join(cmd[1:])
        t = time.perf_counter()
        self.stderr = tempfile.TemporaryFile("w+")  # a pipe nobody reads could fill up
        self.proc = subprocess.Popen(cmd, cwd=REPO, stdout=subprocess.PIPE,
                                     stderr=self.stderr, text=True)
        self.base_url = None
        for line in self.proc.stdout:
            if line.startswith("Base URL:"):
                self.base_url = line.split(":", 1)[1].strip()
                break
        if self.base_url is None:
            self.proc.wait(10)
            self.stderr.seek(0)
            err = self.stderr.read()[-2000:]
            self.stop()
            raise RuntimeError(f"server did not start: {self.command}\n{err}")
        self.startup_s = time.perf_counter() - t  # it prints the URL once it listens

    def stop(self) -> None:
        if self.proc.poll() is None:
            self.proc.terminate()
            try:
                self.proc.wait(10)
            except subprocess.TimeoutExpired:
                self.proc.kill()
                self.proc.wait()
        self.proc.stdout.close()
        self.stderr.close()


def gap_stats(ticks: list[float], start: float, end: float) -> tuple[float, float, int, int]:
    """Max and 99th-percentile gap (s), gaps over the limit, ticks: between the ticks in
    [start, end], with start and end themselves as the outer edges."""
    times = [start] + [t for t in ticks if start < t < end] + [end]
    gaps = np.diff(times)
    return (float(gaps.max()), float(np.percentile(gaps, 99)), int((gaps > GAP_LIMIT_S).sum()),
            len(times) - 2)


class GcPauses:
    """Start and length of every garbage collection (it holds the GIL: every thread waits)."""

    def __init__(self) -> None:
        self.pauses: list[tuple[float, float]] = []
        self._start = 0.0

    def __call__(self, phase: str, _info: dict) -> None:
        if phase == "start":
            self._start = time.perf_counter()
        else:
            self.pauses.append((self._start, time.perf_counter() - self._start))

    def longest(self, start: float, end: float) -> float:
        return max((d for t, d in self.pauses if start <= t <= end), default=0.0)

    def __enter__(self) -> "GcPauses":
        gc.callbacks.append(self)
        return self

    def __exit__(self, *exc) -> None:
        gc.callbacks.remove(self)


def one_sync(gui: Gui, tmp: Path, base_url: str, run: int):
    from PySide6.QtCore import Qt, QTimer

    from devmon_sync import credentials
    from devmon_sync.store import Mirror
    from gui.sync_dialog import SyncDialog

    path = tmp / f"sync-{run}.duckdb"
    Mirror.open(path).close()
    w = gui.window(tmp)
    dialog = None
    os.environ[credentials.ENV_API_KEY] = KEY
    try:
        gui.open(w, path)
        dialog = SyncDialog(w.runner, w, rate_limit_per_minute=0)
        dialog.synced.connect(lambda _report: w.refresh())  # as open_sync_dialog wires it
        dialog.show()
        dialog.address_edit.setText(base_url)
        reports: list = []
        dialog.synced.connect(reports.append)
        gui.flush()
        ticks: list[float] = []
        timer = QTimer()
        timer.setTimerType(Qt.TimerType.PreciseTimer)
        timer.setInterval(TICK_MS)
        timer.timeout.connect(lambda: ticks.append(time.perf_counter()))
        with GcPauses() as gcp:
            timer.start()
            t0 = time.perf_counter()
            t1 = gui.wait(dialog.synced, dialog.sync_now, what="the sync")
            t2 = gui.wait(w.opened, what="the views to re-read the mirror after the sync")
            timer.stop()
        (report,) = reports
        if report.status != "ok":
            raise RuntimeError(f"sync {report.status}: {dialog.result_label.text()}")
        return (t1 - t0, report.readings_rows + report.epoch_rows,
                gap_stats(ticks, t0, t1), gcp.longest(t0, t1), t2 - t1, gap_stats(ticks, t1, t2))
    finally:
        os.environ.pop(credentials.ENV_API_KEY, None)
        if dialog is not None:
            dialog.close()
        gui.close(w)


def bench_sync(gui: Gui, tmp: Path, args) -> None:
    from devmon_sync.server import WorldSize

    size = (WorldSize(sites=2, devices=16, days=30) if args.quick
            else WorldSize(sites=6, devices=48, days=30))
    print(f"\n3. GUI thread during a sync from the Sync dialog: world {size}, rate limit 0, "
          f"a {TICK_MS} ms QTimer on the GUI thread; gaps from sync_now to synced, then to the "
          f"views re-read (opened); a fresh mirror and window per run")
    print(f"{'server':28} {'run':>3} {'sync s':>6} {'rows':>9} {'rows/s':>8} {'max gap':>7} "
          f"{'p99':>5} {'>100ms':>6} {'ticks':>5} {'max GC':>6} | {'re-read':>7} "
          f"{'max gap':>7} {'>100ms':>6}")
    for kind in (InProcessServer, SubprocessServer):
        server = kind(size)
        try:
            print(f"{server.label} (up in {server.startup_s:.1f} s): {server.command}")
            for run in range(args.repeat):
                secs, rows, (gmax, p99, over, n), gc_max, reread, (rmax, _, rover, _) = \
                    one_sync(gui, tmp / f"{kind.__name__}", server.base_url, run)
                print(f"{'':28} {run + 1:3} {secs:6.2f} {rows:9,} {rows / secs:8,.0f} "
                      f"{gmax * 1e3:5.0f}ms {p99 * 1e3:3.0f}ms {over:6} {n:5} "
                      f"{gc_max * 1e3:4.0f}ms | {reread * 1e3:5.0f}ms {rmax * 1e3:5.0f}ms "
                      f"{rover:6}")
        finally:
            server.stop()


# ----------------------------------------------------------------------------- main


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--quick", action="store_true",
                    help="2-day world, 1,000,000 readings, 16-device sync, 2 repeats")
    ap.add_argument("--repeat", type=int, default=None, help="repeats (default 3; quick 2)")
    ap.add_argument("--days", type=int, default=None,
                    help="days of history of the 200-device world (default 7; quick 2)")
    ap.add_argument("--readings", type=int, default=None,
                    help="readings of the zoomed series (default 10,000,000; quick 1,000,000)")
    ap.add_argument("--parts", default="open,zoom,sync",
                    help="comma-separated subset of open,zoom,sync (default all)")
    args = ap.parse_args()
    args.repeat = args.repeat or (2 if args.quick else 3)
    args.days = args.days or (2 if args.quick else 7)
    args.readings = args.readings or (1_000_000 if args.quick else 10_000_000)
    parts = {p.strip() for p in args.parts.split(",") if p.strip()}
    if not parts <= {"open", "zoom", "sync"}:
        ap.error(f"--parts: unknown {sorted(parts - {'open', 'zoom', 'sync'})}")

    import duckdb
    import matplotlib
    import PySide6
    import shiboken6
    from PySide6.QtCore import qVersion

    t_start = time.perf_counter()
    print(f"bench_gui: {platform.machine()} {platform.system()}, {os.cpu_count()} cores, "
          f"Python {platform.python_version()}, load average {os.getloadavg()[0]:.1f}, "
          f"{datetime.now(UTC):%Y-%m-%d %H:%M} UTC")
    print(f"PySide6 {PySide6.__version__} (Qt {qVersion()}, QT_QPA_PLATFORM="
          f"{os.environ.get('QT_QPA_PLATFORM')}), matplotlib {matplotlib.__version__}, "
          f"DuckDB {duckdb.__version__}, numpy {np.__version__}; window 1400x900")
    print("command: " + " ".join(["python", "benchmarks/bench_gui.py"] + sys.argv[1:]))
    quiet_offscreen_warnings()
    refs = sys.getrefcount(None), sys.getrefcount(True)
    lost_none, lost_true = singleton_refs_lost()
    args.none_leak = lost_none > 0
    if lost_none or lost_true:
        print(f"ERROR: shiboken6 {shiboken6.__version__} drops a reference to None per call of "
              f"a void Qt method ({lost_none:.2f}) and to True per Signal.emit ({lost_true:.2f});"
              f" they had {refs[0]:,} and {refs[1]:,} here. A GUI session aborts ('Fatal Python "
              f"error: none_dealloc / bool_dealloc') once they are used up: install the version "
              f"pyproject.toml asks for (python3 -m pip install .) and run again.")
        return 2
    with tempfile.TemporaryDirectory(prefix="bench_gui_") as tmp:
        tmp = Path(tmp)
        isolate(tmp)
        gui = Gui()
        if "open" in parts:
            bench_open(gui, tmp, args)
        if "zoom" in parts:
            bench_zoom(gui, tmp, args)
        if "sync" in parts:
            for kind in ("InProcessServer", "SubprocessServer"):
                (tmp / kind).mkdir()
            bench_sync(gui, tmp, args)
    print(f"\ndone in {time.perf_counter() - t_start:.0f} s; load average "
          f"{os.getloadavg()[0]:.1f}")
    return 0



if __name__ == "__main__":
    sys.exit(main())

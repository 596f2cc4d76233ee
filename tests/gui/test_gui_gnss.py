"""The GNSS deformation view on a mirror synced from the reference server: real widgets
(offscreen), a real TaskRunner on a real DuckDB file, and the numbers checked against
``devmon_sync.analyze.rovers.analyze_device`` (what ``devmon analyze`` prints).  Screenshots
of every tab are saved for review.

Size: about 750 lines, because every test of the view shares the one mirror this module
syncs (a second module would sync it again, which the CI budget cannot afford)."""

from __future__ import annotations

import os

os.environ.setdefault("QT_QPA_PLATFORM", "offscreen")

import itertools  # noqa: E402
import re  # noqa: E402
from dataclasses import astuple  # noqa: E402
import shutil  # noqa: E402
import threading  # noqa: E402
from datetime import datetime, timezone  # noqa: E402
from pathlib import Path  # noqa: E402

import numpy as np  # noqa: E402
import pytest  # noqa: E402

from pyproj import CRS  # noqa: E402

from analysis.pipeline import AnalysisOptions  # noqa: E402
from devmon_sync.analyze.rovers import analyze_device  # noqa: E402
from devmon_sync.server import WorldSize  # noqa: E402
from devmon_sync.store import Mirror, queries  # noqa: E402

from support import count_calls, rovers_by_scenario, synced_mirror  # noqa: E402

pytest.importorskip("pytestqt")
# matplotlib's Qt toolbar asks PySide6 6.12 for a deprecated attribute on every toolbar made
pytestmark = pytest.mark.filterwarnings(
    r"ignore:Enum value 'Qt..ApplicationAttribute\.AA_UseHighDpiPixmaps':DeprecationWarning")

from PySide6.QtCore import Qt  # noqa: E402
from PySide6.QtTest import QTest  # noqa: E402
from PySide6.QtWidgets import QApplication, QLineEdit  # noqa: E402

import gui.gnss_controls as gnss_controls  # noqa: E402
import gui.gnss_work as gnss_work  # noqa: E402
from gui.gnss_controls import ALARM_TINTS, CUSTOM  # noqa: E402
from gui.gnss_table import FORECAST_COLUMN  # noqa: E402
from gui.gnss_view import GnssView  # noqa: E402
from gui.settings import Settings  # noqa: E402
from gui.workers import Cancelled, TaskRunner  # noqa: E402
from qt_input import (artists, button, click_tab, clipped_texts, data_point, drag,  # noqa: E402
                      open_mirror, post_key, show_tab, unlinked_plan_labels, wheel)

WORLD = WorldSize(sites=3, devices=16, days=60)
SCENARIOS = ("creep", "accelerating", "step", "outliers", "stable", "seasonal")
REVIEW = Path("/tmp/gui-review/gnss")
WAIT_MS = 30000
# The accelerating rover ends ~50 mm from its reference: "alarm" reached, "emergency" not.
SEASONAL_H_LEVELS_MM = {"alert": 400.0, "alarm": 800.0}
LEVELS_MM = {"alert": 10.0, "alarm": 25.0, "emergency": 100.0}
DEBOUNCE_WAIT_MS = gnss_controls.DEBOUNCE_MS + 300  # long enough for a debounced run to start
NUMBER = re.compile(r"[-+]?\d+(?:\.\d+)?")


@pytest.fixture(scope="module")
def mirror_path(tmp_path_factory):
    path = synced_mirror(tmp_path_factory.mktemp("gui_gnss") / "mirror.duckdb", WORLD)
    with Mirror.open(path) as m:
        accelerating = next(d for d in queries.gnss_devices(m)
                            if "accelerating" in d.display_name)
        queries.set_alarm_levels(m, accelerating.serial_number, "displacement", LEVELS_MM)
        seasonal = next(d for d in queries.gnss_devices(m) if "seasonal" in d.display_name)
        queries.set_alarm_levels(m, seasonal.serial_number, "displacement:horizontal",
                                 SEASONAL_H_LEVELS_MM)  # far above its motion: never reached
    return path


@pytest.fixture(scope="module")
def rovers(devices) -> dict[str, queries.GnssDevice]:
    """Rovers with epochs by scenario (named in their display name)."""
    return rovers_by_scenario(devices)


@pytest.fixture
def view(qtbot, runner, devices, tmp_path):
    v = GnssView(runner, Settings(tmp_path / "settings.ini"))
    qtbot.addWidget(v)
    v.resize(1400, 900)
    v.show()
    v.set_devices(devices)
    yield v
    runner.shutdown(10000)  # no task of this test outlives its view


def expected(mirror, device, start=None, end=None, **options):
    """What ``devmon analyze`` computes for the same choices."""
    return analyze_device(mirror, device, AnalysisOptions.build(**options), start, end)


def analyse(qtbot, view, action) -> list:
    """Run ``action`` and wait for the view to show the results of the analysis it starts."""
    with qtbot.waitSignal(view.analysed, timeout=WAIT_MS) as blocker:
        action()
    return blocker.args[0]


def row_of(view, device) -> dict[str, str]:
    rows = [r for r in view.table.rows() if r["Rover"].endswith(device.serial_number)]
    assert len(rows) == 1, view.table.rows()
    return rows[0]


def numbers(text: str) -> list[float]:
    return [float(x) for x in NUMBER.findall(text)]


def close(shown: float, value: float, digits: int) -> bool:
    """Equal to the shown precision (the cell rounds to ``digits`` decimals)."""
    return abs(shown - value) <= 0.5 * 10 ** -digits + 1e-9


def assert_row_matches(row: dict[str, str], analysis) -> None:
    """The table row shows ``analysis.summary()`` to the digits it prints."""
    s = analysis.summary()
    assert row["Frame"] == s["frame"]
    for column, key in (("Horizontal velocity", "horizontal"), ("Along azimuth", "along")):
        if key not in s["velocity_mm_per_day"]:
            assert row[column] == "-", (column, row[column])
            continue
        day_v, day_s, yr_v, yr_s = numbers(row[column])
        assert close(day_v, s["velocity_mm_per_day"][key][0], 3), (column, row[column], s)
        assert close(day_s, s["velocity_mm_per_day"][key][1], 3), (column, row[column], s)
        assert close(yr_v, s["velocity_mm_per_yr"][key][0], 1), (column, row[column], s)
        assert close(yr_s, s["velocity_mm_per_yr"][key][1], 1), (column, row[column], s)
    assert close(float(row["3D displ.\nmm"]), s["displacement_mm"]["3d"], 1)
    if s["acceleration_mm_per_day2"] is None:
        assert row["Acceleration\nmm/day²"] == "-"
        return
    acc_v, acc_s = numbers(row["Acceleration\nmm/day²"])
    assert close(acc_v, s["acceleration_mm_per_day2"][0], 4)
    assert close(acc_s, s["acceleration_mm_per_day2"][1], 4)


def line(figure, gid: str):
    (found,) = [a for a in figure.findobj() if a.get_gid() == gid]
    return found


def save_screenshot(view, tmp_path, name: str) -> Path:
    """The view as the user sees it, in tmp_path and copied to REVIEW for a person to look
    at."""
    out = tmp_path / f"{name}.png"
    assert view.grab().save(str(out))
    assert out.stat().st_size > 10_000  # a drawn view, not an empty grab
    REVIEW.mkdir(parents=True, exist_ok=True)
    shutil.copy(out, REVIEW / out.name)
    return out



# ----------------------------------------------------------------------------- numbers

def test_creep_table_and_displacement_equal_the_analysis(qtbot, view, mirror, rovers):
    creep = rovers["creep"]
    analyse(qtbot, view, lambda: view.show_devices([creep.serial_number]))
    truth = expected(mirror, creep)
    row = row_of(view, creep)
    assert_row_matches(row, truth)
    assert row["Method"] == "MIDAS" and row["Frame"] == "local ENU"
    figure = view.current_figure()
    east = line(figure, "data:east")
    np.testing.assert_allclose(np.asarray(east.get_ydata(), float),
                               truth.displacement.east_m * 1000.0, atol=1e-9)
    assert len(east.get_xdata()) == int(truth.kept.sum())
    header, rows = view.current_csv_rows()
    assert header[0] == "time_utc" and header[-1] == "status"
    kept = [r for r in rows if r[-1] == "kept"]
    np.testing.assert_allclose([r[1] for r in kept], truth.displacement.east_m * 1000, atol=6e-4)
    assert len(rows) == truth.t_all.size and rows[0][0].endswith("Z")


def test_outliers_are_marked_in_the_plot_and_the_csv(qtbot, view, mirror, rovers):
    rover = rovers["outliers"]
    analyse(qtbot, view, lambda: view.show_devices([rover.serial_number]))
    truth = expected(mirror, rover)
    assert truth.outliers.sum() >= 10
    marks = line(view.current_figure(), "outliers:east")
    assert len(marks.get_xdata()) == int(truth.outliers.sum())
    _, rows = view.current_csv_rows()
    assert sum(r[-1] == "outlier" for r in rows) == int(truth.outliers.sum())
    assert all(r[1] == "" for r in rows if r[-1] == "outlier")


def test_a_site_projection_and_an_epsg_code_rerun_in_that_frame(qtbot, view, mirror, rovers):
    creep = rovers["creep"]
    analyse(qtbot, view, lambda: view.show_devices([creep.serial_number]))
    projection = creep.projections[0]
    combo = view.controls.frame_combo
    index = combo.findText(projection["label"])
    assert index > 0, [combo.itemText(i) for i in range(combo.count())]
    analyse(qtbot, view, lambda: combo.setCurrentIndex(index))  # debounced re-run
    truth = expected(mirror, creep, frame=str(projection["id"]))
    assert_row_matches(row_of(view, creep), truth)
    assert truth.frame.projection_id == projection["id"]

    def type_epsg():
        combo.setCurrentIndex(combo.findData(CUSTOM))
        qtbot.keyClicks(view.controls.crs_edit, "EPSG:32632")

    analyse(qtbot, view, type_epsg)
    truth = expected(mirror, creep, frame="EPSG:32632")
    assert_row_matches(row_of(view, creep), truth)
    assert truth.frame.height_type == "ellipsoidal"  # an EPSG code: not the site's entry
    assert view.controls.frame_message.isHidden()


def test_a_bad_epsg_code_is_named_under_the_field_and_keeps_the_plots(qtbot, view, rovers,
                                                                      tmp_path):
    creep = rovers["creep"]
    analyse(qtbot, view, lambda: view.show_devices([creep.serial_number]))
    figure = view.current_figure()
    rows = view.table.rows()
    combo = view.controls.frame_combo
    combo.setCurrentIndex(combo.findData(CUSTOM))
    qtbot.keyClicks(view.controls.crs_edit, "EPSG:999999")
    message = view.controls.frame_message
    assert message.isVisible() and "999999" in message.text(), message.text()
    with qtbot.waitSignal(view.failed, timeout=5000) as blocker:
        view.controls.analyse_button.click()
    assert "999999" in blocker.args[0]
    qtbot.wait(DEBOUNCE_WAIT_MS)
    assert view.current_figure() is figure and view.table.rows() == rows
    assert "999999" in view.message.text()
    save_screenshot(view, tmp_path, "gnss_bad_epsg_code")


def test_a_bad_reference_is_explained_and_a_good_one_is_used(qtbot, view, mirror, rovers):
    creep = rovers["creep"]
    analyse(qtbot, view, lambda: view.show_devices([creep.serial_number]))
    qtbot.keyClicks(view.controls.reference_edit, "last tuesday")
    assert "last tuesday" in view.controls.reference_message.text()
    view.controls.reference_edit.clear()
    analyse(qtbot, view, lambda: qtbot.keyClicks(view.controls.reference_edit,
                                                 "2025-11-10..2025-11-12"))
    assert view.controls.reference_message.isHidden()
    truth = expected(mirror, creep, reference="2025-11-10..2025-11-12")
    assert_row_matches(row_of(view, creep), truth)


def test_a_rover_without_epochs_in_the_period_is_reported_and_the_others_shown(
        qtbot, view, mirror, rovers):
    """The outliers rover has a 5-day outage; over 3 days inside it, it cannot be analysed
    but the creep rover still can."""
    outage = max(expected(mirror, rovers["outliers"]).gaps, key=lambda g: g.duration_s)
    start = _aware(outage.start) + (_aware(outage.end) - _aware(outage.start)) / 5
    end = start + (_aware(outage.end) - _aware(outage.start)) / 2
    start, end = (t.replace(second=0, microsecond=0) for t in (start, end))
    serials = [rovers["creep"].serial_number, rovers["outliers"].serial_number]
    analyse(qtbot, view, lambda: view.show_devices(serials))
    method = view.controls.method_combo
    analyse(qtbot, view, lambda: method.setCurrentIndex(method.findData("ols")))
    found = analyse(qtbot, view, lambda: view.controls.set_period(start, end))
    assert [a.serial_number for a in found] == [rovers["creep"].serial_number]
    assert rovers["outliers"].display_name in view.message.text()
    assert "epochs" in view.message.text()
    truth = expected(mirror, rovers["creep"], start, end, method="ols")
    assert truth.summary()["first_epoch"] >= start.strftime("%Y-%m-%dT%H:%M")
    assert_row_matches(row_of(view, rovers["creep"]), truth)


def _aware(t) -> datetime:
    return datetime.fromtimestamp(np.datetime64(t, "s").astype(np.int64), timezone.utc)


def test_ols_method_and_components_redraw(qtbot, view, mirror, rovers):
    creep = rovers["creep"]
    analyse(qtbot, view, lambda: view.show_devices([creep.serial_number]))
    combo = view.controls.method_combo
    analyse(qtbot, view, lambda: combo.setCurrentIndex(combo.findData("ols")))
    assert_row_matches(row_of(view, creep), expected(mirror, creep, method="ols"))
    view.controls.component_boxes["along"].setChecked(True)
    view.controls.component_boxes["up"].setChecked(False)
    figure = view.current_figure()
    assert artists(figure, "data:along") and not artists(figure, "data:up")


# ----------------------------------------------------------------------------- warning

def test_accelerating_rover_has_a_forecast_and_the_stable_one_says_none(
        qtbot, view, mirror, rovers):
    acc, stable = rovers["accelerating"], rovers["stable"]
    analyse(qtbot, view, lambda: view.show_devices([acc.serial_number, stable.serial_number]))
    show_tab(qtbot, view, "Inverse velocity")
    figure = view.current_figure()
    assert artists(figure, "forecast:failure_time")
    note = view.panes["inverse"].note
    assert note.isVisible() and note.text().startswith("Failure forecast"), note.text()
    assert "CET" in note.text()  # the site's zone, Europe/Zurich
    view.set_shown_device(stable.serial_number)
    figure = view.current_figure()
    assert artists(figure, "forecast:none") and not artists(figure, "forecast:failure_time")
    assert view.panes["inverse"].note.text().startswith("No failure forecast")
    assert row_of(view, stable)["Failure forecast"] == "none"
    truth = expected(mirror, acc).summary()
    assert row_of(view, acc)["Failure forecast"].startswith(truth["forecast"]["failure_time"][:8])


def test_the_alarm_level_reached_tints_the_row(qtbot, view, rovers):
    acc, stable = rovers["accelerating"], rovers["stable"]
    analyse(qtbot, view, lambda: view.show_devices([acc.serial_number, stable.serial_number]))
    assert row_of(view, acc)["Alarm level"] == "alarm"
    alarm_col = [view.table.horizontalHeaderItem(c).text()
                 for c in range(view.table.columnCount())].index("Alarm level")
    assert row_of(view, stable)["Alarm level"] == "no levels set"
    table = view.table
    for r in range(table.rowCount()):
        colour = table.item(r, 0).background().color().name()
        if table.item(r, 0).text().endswith(acc.serial_number):
            assert colour == ALARM_TINTS[1]  # the second level
            assert "displacement" in table.item(r, alarm_col).toolTip()
        else:
            assert colour != ALARM_TINTS[1]
    show_tab(qtbot, view, "Displacement")
    view.controls.component_boxes["3d"].setChecked(True)
    assert artists(view.current_figure(), "threshold:alarm")


# ----------------------------------------------------------------------------- plan view

def test_plan_view_has_one_arrow_per_analysed_rover(qtbot, view, mirror, rovers):
    analysed = analyse(qtbot, view, lambda: (view.controls.check(None, emit=False),
                                             view.analyse()))
    assert len(analysed) == len([d for d in view.controls.devices.values() if d.epochs])
    show_tab(qtbot, view, "Plan view")
    figure = view.current_figure()
    assert len(artists(figure, "arrow:")) == len(analysed)
    creep = rovers["creep"]
    # analysed in local ENU, the plan is in the site's own grid (issue 30.10): a national one
    grids = {CRS.from_epsg(p["srid"]).name for p in creep.projections if p.get("srid")}
    xlabel = figure.axes[0].get_xlabel()
    assert "centroid" not in xlabel and any(grid in xlabel for grid in grids), xlabel
    analyse(qtbot, view, lambda: view.controls.set_frame(str(creep.projections[0]["id"])))
    figure = view.current_figure()
    assert len(artists(figure, "arrow:")) == len(analysed)
    assert "grid easting" in figure.axes[0].get_xlabel()
    assert creep.projections[0]["label"] in figure.axes[0].get_title(loc="left")


def _number_the_rovers(view, mirror, tmp_path, numbers: dict[str, str]) -> None:
    """Remember report details for the view's mirror whose file numbers these rovers
    ({display name: point number}), as File → Export report does."""
    details = tmp_path / "points.toml"
    details.write_text("[points]\n" + "".join(f'"{name}" = "{number}"\n'
                                               for name, number in numbers.items()))
    view.controls.settings.set_report_details({"file": str(details)}, str(mirror.path))


def _spy_on_the_store(monkeypatch) -> list[tuple[str, threading.Thread]]:
    """Every call of a function of the store's query modules, with the thread it ran on."""
    from devmon_sync.store import browse, report_queries

    calls: list[tuple[str, threading.Thread]] = []
    for module in (browse, queries, report_queries):
        for name, fn in list(vars(module).items()):
            if callable(fn) and getattr(fn, "__module__", None) == module.__name__ \
                    and not isinstance(fn, type) and not name.startswith("_"):
                def spy(*args, _fn=fn, _name=f"{module.__name__}.{name}", **kwargs):
                    calls.append((_name, threading.current_thread()))
                    return _fn(*args, **kwargs)
                monkeypatch.setattr(module, name, spy)
    return calls


def test_the_plan_reads_the_mirror_on_workers_only(qtbot, view, mirror, rovers, tmp_path,
                                                   monkeypatch):
    """The plan's positions and point numbers are read by the analysis task and, when the
    report details change, by a task of their own: drawing the plan and numbering it again
    call no store query on the GUI thread."""
    calls = _spy_on_the_store(monkeypatch)
    creep = rovers["creep"]
    analyse(qtbot, view, lambda: view.show_devices([creep.serial_number]))
    show_tab(qtbot, view, "Plan view")
    (label,) = artists(view.current_figure(), f"label:{creep.display_name}")
    assert label.get_text() == creep.display_name
    assert "devmon_sync.store.browse.gnss_positions" in {name for name, _ in calls}
    on_gui = [name for name, thread in calls if thread is threading.main_thread()]
    assert on_gui == [], on_gui

    calls.clear()
    _number_the_rovers(view, mirror, tmp_path, {creep.display_name: "P3"})
    view.point_numbers_changed()
    qtbot.waitUntil(lambda: artists(view.current_figure(), f"label:{creep.display_name}")[0]
                    .get_text() == f"P3 {creep.display_name}", timeout=WAIT_MS)
    view.panes["plan"].canvas.draw()  # the whole plan drawn, on the GUI thread
    names = {name for name, _ in calls}
    assert {"devmon_sync.store.browse.gnss_positions",
            "devmon_sync.store.queries.serials_named"} <= names, names
    on_gui = [name for name, thread in calls if thread is threading.main_thread()]
    assert on_gui == [], on_gui


def test_the_gui_plan_places_the_points_the_report_places(qtbot, view, mirror, rovers,
                                                          tmp_path):
    """The plan view and the report's site plan: one computation
    (``devmon_sync.analyze.site_plans``), so the same rovers at the same positions with the
    same numbers, and the figure draws them there."""
    from devmon_sync.report import ReportOptions, build_report
    from devmon_sync.report.details import load_details

    creep = rovers["creep"]
    _number_the_rovers(view, mirror, tmp_path, {creep.display_name: "P3",
                                                rovers["step"].serial_number: "P11"})
    analysed = analyse(qtbot, view, lambda: (view.controls.check(None, emit=False),
                                             view.analyse()))
    view.set_shown_device(creep.serial_number)
    show_tab(qtbot, view, "Plan view")
    figure = view.current_figure()
    (gui_plan,) = [p for p in view.result.plans if p.site_uuid == creep.site_uuid]

    data = build_report(mirror, ReportOptions(site=creep.site_uuid,
                                              details=load_details(tmp_path / "points.toml")))
    (report_plan,) = data.plans
    # the same rovers (each lists them in the order it analysed them), each at the same
    # position with the same displacement, uncertainty, level and number
    gui_points = dict(zip(gui_plan.serial_numbers, gui_plan.points))
    report_points = dict(zip(report_plan.serial_numbers, report_plan.points))
    assert report_points.keys() == gui_points.keys()
    assert len(gui_points) == len([a for a in analysed if a.serial_number in gui_points]) >= 2
    for sn, p in report_points.items():
        q = gui_points[sn]
        assert (p.label, p.number, p.alarm_level) == (q.label, q.number, q.alarm_level)
        assert astuple(p)[1:8] == pytest.approx(astuple(q)[1:8], rel=1e-12, abs=1e-9,
                                                nan_ok=True), sn
    assert (report_plan.frame_label, report_plan.axis_names) == (gui_plan.frame_label,
                                                                 gui_plan.axis_names)
    numbered = {p.label: p.number for p in gui_plan.points if p.number}
    step = rovers["step"]
    assert numbered == {creep.display_name: "P3", **(
        {step.display_name: "P11"} if step.site_uuid == creep.site_uuid else {})}
    for p in report_plan.points:
        (marker,) = artists(figure, f"point:{p.label}")
        # the same positions; the centroid they are east/north of is summed in the order
        # each analysed the rovers (the report's: by point number), so equal to ~1e-15
        assert (marker.get_xdata()[0], marker.get_ydata()[0]) == pytest.approx(
            (p.easting_m, p.northing_m), rel=1e-12, abs=1e-9)
        (label,) = artists(figure, f"label:{p.label}")
        assert label.get_text() == (f"{p.number} {p.label}" if p.number else p.label)


# ----------------------------------------------------------------------------- threads

def test_work_runs_off_the_gui_thread_and_the_gui_stays_responsive(
        qtbot, view, monkeypatch):
    """Every store read and every analysis runs on a worker, and the GUI thread handles the
    user's input while they run: the first analysis waits until a key posted to a line edit
    (as a key the user types) has been handled by the GUI thread.  Were the analysis on the
    GUI thread, nothing could handle the key: the test asserts what each thread did, not how
    long anything took (issue 30: a 1.0 s bound on the GUI's largest pause failed on a
    loaded machine)."""
    calls = _spy_on_the_store(monkeypatch)
    analysed_on: list[threading.Thread] = []
    typed = threading.Event()  # set by the GUI thread when it has handled the key
    handled_on: list[threading.Thread] = []
    probe = QLineEdit()
    qtbot.addWidget(probe)
    probe.show()
    probe.textChanged.connect(lambda _: (handled_on.append(threading.current_thread()),
                                         typed.set()))
    waited: list[bool] = []

    def recording(*args, **kwargs):
        analysed_on.append(threading.current_thread())
        if len(analysed_on) == 1:  # the GUI must handle input while this analysis runs
            post_key(probe, "x")
            waited.append(typed.wait(WAIT_MS / 1000))
        return analyze_device(*args, **kwargs)

    monkeypatch.setattr(gnss_work, "analyze_device", recording)
    analysed = analyse(qtbot, view, lambda: (view.controls.check(None, emit=False),
                                             view.analyse()))
    assert len(analysed_on) == len(analysed) >= 6
    assert waited == [True] and probe.text() == "x"
    assert handled_on == [threading.main_thread()]
    assert threading.main_thread() not in analysed_on
    reads = [name for name, _ in calls]
    # the rovers' epochs read on a worker, all at once (issue 31: a query each a rover)
    assert reads.count("devmon_sync.store.queries.gnss_epochs_of_devices") == 1, reads
    on_gui = [name for name, thread in calls if thread is threading.main_thread()]
    assert on_gui == [], on_gui


def test_the_analysis_task_reads_the_rovers_by_batch(mirror, rovers, monkeypatch):
    """The GUI's analysis of many rovers reads their epochs, alarm levels and rule in one
    query each for the whole batch, not a query each a rover (issue 31: the reads cost as
    much as the analyses), and gives what a rover analysed alone gives: the same numbers,
    the same levels, a message in its place for a serial that is no rover, progress before
    each rover, and a cancel between two rovers still stops it."""
    serials = sorted(d.serial_number for d in rovers.values())
    asked = serials[:2] + ["NO-SUCH-ROVER"] + serials[2:]
    request = gnss_work.GnssRequest(tuple(asked), AnalysisOptions.build())
    steps: list[str] = []
    state = gnss_work.TaskState()
    state.set_progress = lambda _percent, text: steps.append(text)
    reads = count_calls(monkeypatch, queries, "gnss_epochs_of_devices", "_applied")
    result = gnss_work.run_analyses(mirror, state, request)
    assert len(serials) >= 6 and reads == {"gnss_epochs_of_devices": 1, "_applied": 1}, reads
    monkeypatch.undo()
    assert [a.serial_number for a in result.analyses] == serials
    assert result.errors == ["NO-SUCH-ROVER: no longer a GNSS rover of this mirror"]
    by_serial = {d.serial_number: d for d in rovers.values()}
    for a in result.analyses:
        alone = expected(mirror, by_serial[a.serial_number])
        assert a.summary() == alone.summary()
        assert result.alarm_levels[a.serial_number] == queries.alarm_levels(mirror,
                                                             a.serial_number)
    assert any(result.alarm_levels.values())
    assert [s for s in steps if s.startswith("Analysing")] == [
        f"Analysing {by_serial[sn].display_name} ({asked.index(sn) + 1} of {len(asked)})…"
        for sn in serials]

    stopping = gnss_work.TaskState()
    stopping.set_progress = lambda _percent, text: (
        stopping.cancel() if text.startswith("Analysing") and "(2 of" in text else None)
    with pytest.raises(Cancelled):
        gnss_work.run_analyses(mirror, stopping, request)


def test_repeated_analyses_in_projected_frames_do_not_crash(qtbot, runner, view, mirror,
                                                            rovers):
    """pyproj frees a thread's PROJ context with its Python thread state, which a Qt pool
    thread gets afresh for every task: the second projected analysis on a pool thread used
    to crash the process (a segfault).  More runs than the pool has threads, every frame."""
    creep = rovers["creep"]
    analyse(qtbot, view, lambda: view.show_devices([creep.serial_number]))
    frames = [str(p["id"]) for p in creep.projections] + ["EPSG:32632", "EPSG:2056"]
    runs = max(len(frames), runner.pool._max_workers + 1)
    for frame in itertools.islice(itertools.cycle(frames), runs):
        analyse(qtbot, view, lambda f=frame: view.controls.set_frame(f))
        assert view.analyses()[0].frame.label == expected(mirror, creep, frame=frame).frame.label


def test_a_newer_request_supersedes_an_older_one(qtbot, view, rovers):
    first, second = rovers["creep"].serial_number, rovers["step"].serial_number
    view.show_devices([first])
    found = analyse(qtbot, view, lambda: view.show_devices([second]))
    qtbot.wait(300)
    assert [a.serial_number for a in found] == [second]
    assert [a.serial_number for a in view.analyses()] == [second]


# ----------------------------------------------------------------------------- settings

def test_choices_are_remembered(qtbot, runner, devices, rovers, tmp_path):
    settings = Settings(tmp_path / "remember.ini")
    first = GnssView(runner, settings)
    qtbot.addWidget(first)
    first.set_devices(devices)
    first.controls.check([rovers["creep"].serial_number], emit=False)
    first.controls.set_frame("EPSG:32632")
    first.controls.method_combo.setCurrentIndex(first.controls.method_combo.findData("ols"))
    first.controls.reference_edit.setText("2025-11-10")
    first.controls.component_boxes["3d"].setChecked(True)
    first.controls.component_boxes["up"].setChecked(False)
    settings.sync()
    again = GnssView(runner, Settings(tmp_path / "remember.ini"))
    qtbot.addWidget(again)
    again.set_devices(devices)
    assert again.controls.frame_text() == "EPSG:32632"
    assert again.controls.method_combo.currentData() == "ols"
    assert again.controls.reference_edit.text() == "2025-11-10"
    assert again.controls.components() == ["east", "north", "3d"]
    runner.shutdown(10000)


def test_a_remembered_site_projection_is_chosen_once_a_rover_of_the_site_is_checked(
        qtbot, runner, devices, rovers, tmp_path):
    creep = rovers["creep"]
    projection = creep.projections[-1]
    settings = Settings(tmp_path / "projection.ini")
    settings.set_value("gnss/frame", str(projection["id"]))
    v = GnssView(runner, settings)
    qtbot.addWidget(v)
    v.set_devices(devices)
    assert v.controls.frame_text() == "enu"  # nothing checked: the site's projections wait
    analyse(qtbot, v, lambda: v.show_devices([creep.serial_number]))
    assert v.controls.frame_text() == str(projection["id"])
    assert v.controls.frame_combo.currentText() == projection["label"]
    assert v.analyses()[0].frame.projection_id == projection["id"]
    runner.shutdown(10000)


def test_no_mirror_and_no_rovers_are_said_not_raised(qtbot, devices, rovers):
    runner = TaskRunner(None)
    v = GnssView(runner)
    qtbot.addWidget(v)
    v.set_devices(devices)
    with qtbot.waitSignal(v.failed, timeout=2000):
        v.show_devices([rovers["creep"].serial_number])
    assert "Open a mirror" in v.message.text()
    v.set_devices([])
    assert v.current_figure() is None and v.current_csv_rows() is None


# ----------------------------------------------------------------------------- screenshots

def test_screenshots_of_every_tab(qtbot, view, rovers, tmp_path):
    analyse(qtbot, view, lambda: (view.controls.check(None, emit=False), view.analyse()))
    saved = []
    for scenario in ("step", "accelerating", "seasonal"):
        view.set_shown_device(rovers[scenario].serial_number)
        for i in range(view.tabs.count()):
            view.tabs.setCurrentIndex(i)
            qtbot.wait(150)
            name = view.tabs.tabText(i).lower().replace(" ", "_")
            saved.append(save_screenshot(view, tmp_path, f"gnss_{scenario}_{i}_{name}"))
    assert len(saved) == 3 * view.tabs.count()


def test_the_toolbars_zoom_and_pan_work_on_the_gnss_plots(qtbot, view, rovers):
    """Real mouse events on the Displacement tab's canvas: the zoom rectangle narrows the
    time range, a pan drag moves it, Home restores it (issue 17 asks it of both tabs)."""
    analyse(qtbot, view, lambda: view.show_devices([rovers["creep"].serial_number]))
    show_tab(qtbot, view, "Displacement")
    pane = view.panes["displacement"]
    QApplication.processEvents()
    ax = pane.figure.axes[0]
    before = ax.get_xlim()
    QTest.mouseClick(button(pane.toolbar, "zoom"), Qt.MouseButton.LeftButton)
    drag(pane.canvas, data_point(pane.canvas, ax, 0.2, 0.2),
          data_point(pane.canvas, ax, 0.5, 0.8))
    lo, hi = ax.get_xlim()
    assert hi - lo == pytest.approx(0.3 * (before[1] - before[0]), rel=0.1), (before, lo, hi)
    QTest.mouseClick(button(pane.toolbar, "pan"), Qt.MouseButton.LeftButton)
    drag(pane.canvas, data_point(pane.canvas, ax, 0.4, 0.5),
          data_point(pane.canvas, ax, 0.6, 0.5))
    moved = ax.get_xlim()
    assert moved[0] < lo and moved[1] - moved[0] == pytest.approx(hi - lo, rel=1e-6)
    QTest.mouseClick(button(pane.toolbar, "home"), Qt.MouseButton.LeftButton)
    assert ax.get_xlim() == pytest.approx(before)



def test_the_period_boxes_show_the_datas_span_before_any_rover_is_checked(view, devices):
    """The user's report: the date boxes showed 2000-01-01 before a rover was checked."""
    controls = view.controls
    assert not controls.checked_serials()
    first = min(d.first for d in devices if d.first)
    last = max(d.last for d in devices if d.last)
    shown = [datetime.fromtimestamp(e.dateTime().toSecsSinceEpoch(), timezone.utc)
             for e in (controls.start_edit, controls.end_edit)]
    as_utc = [t if t.tzinfo else t.replace(tzinfo=timezone.utc) for t in (first, last)]
    assert [abs(a - b).total_seconds() < 60 for a, b in zip(shown, as_utc)] == [True, True]


def test_the_inverse_velocity_tab_shows_both_forecasts_and_whether_they_agree(
        qtbot, view, mirror, rovers):
    """Issue 28: the classic linear inverse-velocity forecast (Fukuzono) beside the Voight
    fit, in the figure (its line and zero) and in the note under it, with their agreement;
    the tab chosen by a real click on the tab bar."""
    acc, stable = rovers["accelerating"], rovers["stable"]
    analyse(qtbot, view, lambda: view.show_devices([acc.serial_number, stable.serial_number]))
    click_tab(view.tabs, "Inverse velocity")
    qtbot.waitUntil(lambda: view.current_figure() is not None, timeout=WAIT_MS)
    figure = view.current_figure()
    assert artists(figure, "linear:fit") and artists(figure, "linear:failure_time")
    truth = expected(mirror, acc).summary()["linear_forecast"]
    note = view.panes["inverse"].note.text()
    assert "Linear inverse velocity (Fukuzono): zero at" in note, note
    assert truth["agreement"]["text"] in note and "CET" in note
    (row,) = [r for r in range(view.table.rowCount())
              if view.table.serial_at(r) == acc.serial_number]
    tip = view.table.item(row, FORECAST_COLUMN).toolTip()
    assert tip.startswith("Failure forecast") and "Linear inverse velocity" in tip, tip
    view.set_shown_device(stable.serial_number)
    note = view.panes["inverse"].note.text()
    assert "Linear inverse velocity (Fukuzono): No acceleration" in note, note
    assert not artists(view.current_figure(), "linear:fit")
    REVIEW.mkdir(parents=True, exist_ok=True)
    view.set_shown_device(acc.serial_number)
    qtbot.wait(200)
    view.grab().save(str(REVIEW / "inverse_velocity_both_forecasts.png"))


def test_without_a_voight_date_the_forecast_cell_shows_the_linear_warning():
    """Issue 28: a daily prism whose Voight fit gives no date but whose linear forecast
    warns must not read "none" in the table."""
    from gui.gnss_table import _forecast_cell, linear_forecast_text

    voight = {"supported": False, "reason": "only 6 velocity values usable; need 8"}
    agreement = {"agree": False, "text": "They disagree: only the linear method warns."}
    accelerating = {"state": "accelerating, not dated", "within_days": 2.4,
                    "statement": "Accelerating; failure possible within 2 days (...).",
                    "agreement": agreement}
    imminent = {"state": "imminent", "failure_time": "2026-03-23T11:56:00Z",
                "statement": "Failure may be imminent: ...", "agreement": agreement}
    for linear, cell in ((accelerating, "≤ 2 days\n(linear)"), (imminent, "imminent\n(linear)"),
                         ({**accelerating, "state": "no acceleration"}, "none")):
        summary = {"forecast": voight, "linear_forecast": linear}
        assert _forecast_cell(summary, "Europe/Zurich")[0] == cell
    text = linear_forecast_text({"forecast": voight, "linear_forecast": imminent},
                                "Europe/Zurich")
    assert text.startswith("Linear inverse velocity (Fukuzono): the line reached zero at "
                           "2026-03-23 12:56 CET, before the last data") and \
        text.endswith(agreement["text"])


# ----------------------------------------------------------------------------- issue 30

VELOCITY_LEVELS = {"alert": 0.5, "alarm": 2.0}  # the demo's (mm/day)


def test_at_the_default_window_size_no_legend_or_title_is_cut_and_plan_labels_name_their_points(
        qtbot, window, db, rovers):
    """Issue 30, points 2 and 6: in the main window at its default size the GNSS figures'
    legends and titles lay outside the canvas (the velocity legend cut at both ends, the
    inverse-velocity title at the right, the trajectory's legend), and on the plan of the
    crowded site labels sat nearer to another point than twice their own distance, without
    a leader line (in the demo "Illgraben GNSS outliers 06" beside gnss-accelerating-003's
    red dot).  All rovers are analysed as a user does it: "Check all"; the accelerating
    rover has velocity levels too, so its velocity legend holds them."""
    accelerating = rovers["accelerating"]
    with Mirror.open(db) as m:
        queries.set_alarm_levels(m, accelerating.serial_number, "velocity", VELOCITY_LEVELS)
    open_mirror(qtbot, window, db, wait_idle=True)
    click_tab(window.tabs, "GNSS deformation")
    view = window.gnss
    analyse(qtbot, view, lambda: QTest.mouseClick(view.controls.all_button,
                                                  Qt.MouseButton.LeftButton))
    view.set_shown_device(accelerating.serial_number)  # the plan: its site, the crowded one
    clipped = []
    for _, title in gnss_controls.FIGURE_TABS:
        click_tab(view.tabs, title)
        QApplication.processEvents()  # the canvas takes the pane's size and draws
        clipped += [f"{title}: {text[:60]!r} at {box}"
                    for text, box in clipped_texts(view.current_figure())]
    assert not clipped, "\n".join(clipped)
    plan = view.panes["plan"].figure
    assert len(artists(plan, "label:")) >= 6  # the crowded site's plan
    assert unlinked_plan_labels(plan) == []


def test_the_wheel_zooms_the_gnss_figures_as_it_zooms_the_plots(qtbot, view, rovers):
    """Issue 30, point 12: the wheel zoomed only in Plots.  On the displacement its time
    axis (all panels) zooms about the pointer, as in Plots; on the plan both axes; the
    toolbar's Back returns to the view before."""
    analyse(qtbot, view, lambda: view.show_devices([rovers["creep"].serial_number]))
    click_tab(view.tabs, "Displacement")
    pane = view.panes["displacement"]
    QApplication.processEvents()
    ax = pane.figure.axes[0]
    lo, hi = ax.get_xlim()
    ylim = ax.get_ylim()
    wheel(pane.canvas, data_point(pane.canvas, ax, 0.75, 0.5))
    new_lo, new_hi = ax.get_xlim()
    assert new_hi - new_lo == pytest.approx(0.8 * (hi - lo), rel=0.02)
    pointer = lo + 0.75 * (hi - lo)
    assert (pointer - new_lo) / (new_hi - new_lo) == pytest.approx(0.75, abs=0.02)
    assert [a.get_xlim() for a in pane.figure.axes] == [(new_lo, new_hi)] * len(
        pane.figure.axes)  # the panels share the time axis
    assert ax.get_ylim() == ylim
    QTest.mouseClick(button(pane.toolbar, "back"), Qt.MouseButton.LeftButton)
    assert ax.get_xlim() == pytest.approx((lo, hi))

    click_tab(view.tabs, "Plan view")
    pane = view.panes["plan"]
    QApplication.processEvents()
    ax = pane.figure.axes[0]
    (x0, x1), (y0, y1) = ax.get_xlim(), ax.get_ylim()
    wheel(pane.canvas, data_point(pane.canvas, ax, 0.25, 0.5), steps=2)
    (u0, u1), (v0, v1) = ax.get_xlim(), ax.get_ylim()
    assert u1 - u0 == pytest.approx(0.64 * (x1 - x0), rel=0.02)
    assert v1 - v0 == pytest.approx(0.64 * (y1 - y0), rel=0.02)
    px = x0 + 0.25 * (x1 - x0)
    assert (px - u0) / (u1 - u0) == pytest.approx(0.25, abs=0.02)


def test_3d_is_plotted_by_default(qtbot, view, rovers):
    """Issue 30, point 12: the default components left out the 3D displacement, the length
    the alarm levels judge."""
    assert view.controls.components() == ["east", "north", "up", "3d"]
    analyse(qtbot, view, lambda: view.show_devices([rovers["creep"].serial_number]))
    click_tab(view.tabs, "Displacement")
    assert artists(view.current_figure(), "data:3d")


def test_a_component_with_levels_is_drawn_with_its_ladder_even_when_unticked(qtbot, view,
                                                                           rovers):
    """Issue 30, point 1: horizontal levels set, the 2D box unticked (the default): the
    displacement figure still shows the horizontal panel, with its ladder."""
    assert "horizontal" not in view.controls.components()
    analyse(qtbot, view, lambda: view.show_devices([rovers["seasonal"].serial_number]))
    click_tab(view.tabs, "Displacement")
    figure = view.current_figure()
    (panel,) = artists(figure, "data:horizontal")
    for name, value in SEASONAL_H_LEVELS_MM.items():
        (line,) = artists(figure, f"threshold:{name}")
        assert line.axes is panel.axes and line.get_ydata()[0] == value


def test_the_analyse_button_shows_without_scrolling_in_the_default_window(qtbot, window):
    """The window's default height on a 1400 x 900 screen is 860 px (its title bar takes
    the rest): the GNSS controls' Analyse button was below the fold of their scroll area,
    whose rover list asked for ~190 px."""
    window.resize(1400, 860)
    click_tab(window.tabs, "GNSS deformation")
    QApplication.processEvents()
    controls = window.gnss.controls
    viewport = controls.parentWidget()  # the scroll area's viewport
    at = controls.analyse_button.mapTo(viewport, controls.analyse_button.rect().bottomLeft())
    assert viewport.rect().contains(at), (at, viewport.size())

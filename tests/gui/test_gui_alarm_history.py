"""The GNSS view's alarm information (issue 16): the alarm cell's tooltip (levels now, the
history, the rule), the current 7-day velocity column, and the alarm history panel under
the velocity table, driven by a real click on a rover's row.  Real widgets (offscreen), a
real TaskRunner on a DuckDB mirror synced from the reference server, with 3D and component
levels set on the accelerating rover.  Screenshots are saved for review."""

from __future__ import annotations

import os

os.environ.setdefault("QT_QPA_PLATFORM", "offscreen")

import re  # noqa: E402
import shutil  # noqa: E402
from pathlib import Path  # noqa: E402

import pytest  # noqa: E402

from analysis.alarms import AlarmRule, quantity_words  # noqa: E402
from analysis.figures import format_time  # noqa: E402
from analysis.pipeline import AnalysisOptions  # noqa: E402
from devmon_sync.analyze.rovers import analyze_device  # noqa: E402
from devmon_sync.server import WorldSize  # noqa: E402
from devmon_sync.store import Mirror, queries  # noqa: E402

from support import synced_mirror  # noqa: E402

pytest.importorskip("pytestqt")
pytestmark = pytest.mark.filterwarnings(
    r"ignore:Enum value 'Qt..ApplicationAttribute\.AA_UseHighDpiPixmaps':DeprecationWarning")

from PySide6.QtCore import Qt  # noqa: E402
from PySide6.QtTest import QTest  # noqa: E402

from gui.gnss_view import GnssView  # noqa: E402
from gui.settings import Settings  # noqa: E402

WORLD = WorldSize(sites=3, devices=16, days=60)
REVIEW = Path("/tmp/gui-review/gnss")
WAIT_MS = 30000
# The accelerating rover ends ~50 mm from its reference and ~1.9 mm/day: the 3D
# displacement reaches "alarm", the horizontal velocity "alert"; nothing else is reached.
LEVELS = {"displacement": {"alert": 10.0, "alarm": 25.0, "emergency": 100.0},
          "velocity:horizontal": {"alert": 0.5, "alarm": 50.0}}
NUMBER = re.compile(r"[-+]?\d+(?:\.\d+)?")


@pytest.fixture(scope="module")
def mirror_path(tmp_path_factory):
    path = synced_mirror(tmp_path_factory.mktemp("gui_alarms") / "mirror.duckdb", WORLD)
    with Mirror.open(path) as m:
        acc = next(d for d in queries.gnss_devices(m) if "accelerating" in d.display_name
                   and d.epochs)
        for key, levels in LEVELS.items():
            queries.set_alarm_levels(m, acc.serial_number, key, levels)
    return path


@pytest.fixture(scope="module")
def pair(devices):
    """The accelerating rover (with levels) and the stable one (without)."""
    def find(word):
        return next(d for d in devices if word in d.display_name and d.epochs)
    return find("accelerating"), find("stable")


@pytest.fixture
def view(qtbot, runner, devices, pair, tmp_path):
    v = GnssView(runner, Settings(tmp_path / "settings.ini"))
    qtbot.addWidget(v)
    v.resize(1400, 900)
    v.show()
    v.set_devices(devices)
    with qtbot.waitSignal(v.analysed, timeout=WAIT_MS):
        v.show_devices([d.serial_number for d in pair])
    yield v
    runner.shutdown(10000)


def expected(mirror, device):
    return analyze_device(mirror, device, AnalysisOptions())


def show_table_tab(qtbot, view) -> None:
    index = [view.tabs.tabText(i) for i in range(view.tabs.count())].index("Velocity table")
    view.tabs.setCurrentIndex(index)
    qtbot.wait(100)


def click_row(qtbot, view, serial: str) -> None:
    """A real left click in the middle of the rover's first cell."""
    table = view.table
    row = table.row_of(serial)
    assert row is not None, table.rows()
    rect = table.visualRect(table.model().index(row, 0))
    assert rect.isValid() and table.viewport().rect().contains(rect.center())
    QTest.mouseClick(table.viewport(), Qt.MouseButton.LeftButton,
                     Qt.KeyboardModifier.NoModifier, rect.center())
    qtbot.wait(50)


def column(view, header: str) -> int:
    headers = [view.table.horizontalHeaderItem(c).text()
               for c in range(view.table.columnCount())]
    return headers.index(header)


def save(view, name: str) -> Path:
    REVIEW.mkdir(parents=True, exist_ok=True)
    out = REVIEW / f"{name}.png"
    assert view.grab().save(str(out))
    assert out.stat().st_size > 10_000
    return out


def test_clicking_a_rover_row_shows_its_alarm_history(qtbot, view, mirror, pair, tmp_path):
    acc, stable = pair
    truth = expected(mirror, acc).alarm
    assert [(h.key, h.level) for h in truth.history] and truth.overall == "alarm"
    show_table_tab(qtbot, view)
    click_row(qtbot, view, stable.serial_number)
    assert view.table.selected_serial() == stable.serial_number
    assert "no alarm levels set" in view.alarm_history.text()
    click_row(qtbot, view, acc.serial_number)
    assert view.table.selected_serial() == acc.serial_number
    assert view.device_combo.currentData() == acc.serial_number  # the shown rover follows
    text = view.alarm_history.text()
    assert acc.serial_number in text and "reached now: alarm (3D displacement)" in text
    tz = view._tz_name(acc.serial_number)
    lines = text.splitlines()
    for h in truth.history:
        first = format_time(h.first_exceeded.astype("datetime64[s]"), tz)
        (row,) = [line for line in lines
                  if line.startswith(f"{quantity_words(h.key)}\t{h.level}\t")]
        cells = row.split("\t")
        assert cells[3] == first, (cells, first)
        assert cells[4] == ("still reached" if h.exceeded_at_end else cells[4])
        assert cells[6] == str(h.episodes)
    assert f"{100 * AlarmRule().confidence:g} % confidence" in text and "at least 6 h" in text
    assert view.alarm_history.isVisible() and view.alarm_history.label.isVisible()
    shot = save(view, "gnss_alarm_history_accelerating")
    shutil.copy(shot, tmp_path / shot.name)
    # the panel is for a person: its rich text holds the same first-reached time
    first = format_time(truth.history[0].first_exceeded.astype("datetime64[s]"), tz)
    assert first in view.alarm_history.label.text()


def test_the_alarm_tooltip_has_the_values_the_history_and_the_rule(qtbot, view, mirror, pair):
    acc, stable = pair
    truth = expected(mirror, acc).alarm
    table = view.table
    tip = table.item(table.row_of(acc.serial_number), column(view, "Alarm level")).toolTip()
    assert tip.startswith("Reached now: alarm (3D displacement)")
    assert "3D displacement" in tip and "horizontal velocity" in tip
    for h in truth.history:
        assert f"{h.level} ({quantity_words(h.key)}" in tip, (h, tip)
    assert (f"Rule: a level counts as reached when exceeded with "
            f"{100 * AlarmRule().confidence:g} % confidence") in tip
    plain = table.item(table.row_of(stable.serial_number), column(view, "Alarm level"))
    assert "No alarm levels set" in plain.toolTip()


def test_the_current_velocity_column_is_the_7_day_value_with_its_sigma(qtbot, view, mirror,
                                                                        pair):
    header = "3D velocity\nlast 7 days\nmm/day"
    for device in pair:
        s = expected(mirror, device).summary()
        value, sigma = s["recent_velocity_mm_per_day"]["3d"]
        cell = view.table.item(view.table.row_of(device.serial_number), column(view, header))
        shown = [float(x) for x in NUMBER.findall(cell.text())]
        assert shown == [round(value, 3), round(sigma, 3)], (cell.text(), value, sigma)
        assert "±" in cell.text()

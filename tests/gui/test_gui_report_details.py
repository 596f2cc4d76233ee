"""File → Export report asks for the report's details first (title block, comments, a
details file with the site's point numbers), driven here with real key and mouse events on
a window over a mirror synced from the reference server; the PDF is read back with
pdftotext.  The GNSS tab's plan view numbers its points from the same details."""

from __future__ import annotations

import shutil
import subprocess

import pytest

from devmon_sync.server import WorldSize

from support import synced_mirror
from qt_input import artists, open_mirror, open_site_health, show_tab

pytest.importorskip("pytestqt")
pytestmark = pytest.mark.filterwarnings(
    r"ignore:Enum value 'Qt..ApplicationAttribute\.AA_UseHighDpiPixmaps':DeprecationWarning")

from PySide6.QtCore import Qt  # noqa: E402
from PySide6.QtGui import QAction  # noqa: E402
from PySide6.QtTest import QTest  # noqa: E402

WORLD = WorldSize(sites=1, devices=6, days=30)  # one site, five rovers: seconds to sync
CREEP = "Illgraben GNSS creep 02"
LEFT = Qt.MouseButton.LeftButton


@pytest.fixture(scope="module")
def mirror_path(tmp_path_factory):
    return synced_mirror(tmp_path_factory.mktemp("gui_details") / "mirror.duckdb", WORLD)


@pytest.fixture
def ready(qtbot, window, db, monkeypatch):
    """The window on the mirror with the creep rover analysed in the GNSS tab, and the save
    dialog answered by ``saves`` (a list of paths, None: Cancel) instead of a person."""
    open_mirror(qtbot, window, db)
    serial = next(d.serial_number for d in window.overview["gnss"] if d.display_name == CREEP)
    window.tabs.setCurrentWidget(window.gnss)
    with qtbot.waitSignal(window.gnss.analysed, timeout=30000):
        window.browser.devices_selected.emit([serial])
    saves: list = []
    asked: list = []

    def ask(*args):
        asked.append(args)
        return saves.pop(0) if saves else None

    monkeypatch.setattr(window, "_ask_save_path", ask)
    window.saves, window.asked = saves, asked
    return window


def _details_dialog(qtbot, main):
    """File → Export report (PDF)… as the menu triggers it: the dialog, shown."""
    (action,) = [a for a in main.findChildren(QAction) if a.text().startswith("Export &report")]
    action.trigger()
    dialog = main.report_details_dialog
    qtbot.waitUntil(dialog.isVisible, timeout=5000)
    return dialog


def _pages(pdf) -> list[str]:
    out = subprocess.run(["pdftotext", "-layout", str(pdf), "-"], capture_output=True,
                         text=True, check=True).stdout
    return out.split("\f")


@pytest.mark.skipif(shutil.which("pdftotext") is None, reason="needs poppler's pdftotext")
def test_typed_details_are_on_the_cover_and_the_comments_page(qtbot, ready, tmp_path):
    out = tmp_path / "report.pdf"
    ready.saves.append(str(out))
    dialog = _details_dialog(qtbot, ready)
    assert dialog.made_box.isChecked() and not dialog.date_edit.isEnabled()
    QTest.keyClicks(dialog.edits["project"], "Illgraben slope monitoring")
    QTest.keyClicks(dialog.edits["report_number"], "IG-2026-047")
    QTest.keyClicks(dialog.edits["author"], "A. Engineer")
    QTest.keyClicks(dialog.comments_edit, "Creep on the lower slope continued steadily.")
    with qtbot.waitSignal(ready.report_written, timeout=120000):
        QTest.mouseClick(dialog.ok_button, LEFT)
    pages = _pages(out)
    cover = pages[0]
    assert "Illgraben slope monitoring" in cover and "IG-2026-047" in cover
    assert "A. Engineer" in cover
    comments = [p for p in pages if "Creep on the lower slope continued steadily." in p]
    assert len(comments) == 1 and "Engineer" in comments[0] and comments[0] is not cover
    assert "IG-2026-047" in pages[1]  # the footer of every page carries the number
    ready.result_dialog.close()


def test_values_are_remembered_and_cancel_or_a_bad_file_write_nothing(qtbot, ready,
                                                                       tmp_path, monkeypatch):
    """Cancel in the save dialog, a bad details file, then Cancel in the details dialog:
    no report task is ever started and no PDF written; the values typed are remembered.
    (The details saved start refreshes of the point numbers, which may run a while on a
    loaded machine: the test waits for them instead of asserting an idle runner 200 ms
    after the click.)"""
    started: list[str] = []
    submit = ready.runner.submit

    def recording(*args, **kwargs):
        started.append(kwargs.get("label", ""))
        return submit(*args, **kwargs)

    monkeypatch.setattr(ready.runner, "submit", recording)
    dialog = _details_dialog(qtbot, ready)
    QTest.keyClicks(dialog.edits["client"], "Canton of Valais")
    QTest.keyClicks(dialog.edits["revision"], "B")
    QTest.mouseClick(dialog.ok_button, LEFT)  # then Cancel in the save dialog
    assert len(ready.asked) == 1 and not list(tmp_path.glob("*.pdf"))

    dialog = _details_dialog(qtbot, ready)  # pre-filled for this mirror
    assert dialog.edits["client"].text() == "Canton of Valais"
    assert dialog.edits["revision"].text() == "B" and dialog.edits["project"].text() == ""
    bad = tmp_path / "details.toml"
    bad.write_text('project = "Illgraben"\ncheker = "B. Checker"\n')
    QTest.keyClicks(dialog.file_edit, str(bad))
    QTest.keyClick(dialog.file_edit, Qt.Key.Key_Return)
    assert dialog.isVisible() and dialog.problem.isVisible()
    assert "unknown key cheker" in dialog.problem.text() and "Traceback" not in \
        dialog.problem.text()
    QTest.mouseClick(dialog.ok_button, LEFT)  # refused while the file is bad
    assert dialog.isVisible() and dialog.problem.isVisible() and len(ready.asked) == 1
    QTest.mouseClick(dialog.cancel_button, LEFT)
    qtbot.waitUntil(lambda: not dialog.isVisible(), timeout=5000)
    qtbot.waitUntil(lambda: not ready.runner.busy(), timeout=60000)  # what was started ended
    assert len(ready.asked) == 1 and not list(tmp_path.glob("*.pdf"))
    assert "report" not in started, started


def test_a_details_file_fills_the_fields_and_numbers_the_plan(qtbot, ready, tmp_path):
    show_tab(qtbot, ready.gnss, "Plan view")
    (label,) = artists(ready.gnss.current_figure(), f"label:{CREEP}")
    assert label.get_text() == CREEP  # no details yet: no number
    details = tmp_path / "illgraben.toml"
    details.write_text('project = "Illgraben slope monitoring"\nclient = "Canton of Valais"\n'
                       'date = 2026-11-26\n\n[points]\n"illgraben gnss creep 02" = "P7"\n')
    dialog = _details_dialog(qtbot, ready)
    QTest.keyClicks(dialog.edits["client"], "Typed client")
    QTest.keyClicks(dialog.file_edit, str(details))
    QTest.keyClick(dialog.file_edit, Qt.Key.Key_Return)  # loads; does not press OK
    assert dialog.isVisible() and not dialog.problem.isVisible()
    assert dialog.edits["project"].text() == "Illgraben slope monitoring"  # empty: filled
    assert dialog.edits["client"].text() == "Typed client"  # typed: kept
    assert not dialog.made_box.isChecked() and dialog.date_edit.date().toString(
        Qt.DateFormat.ISODate) == "2026-11-26"
    assert "1 point number from illgraben.toml" in dialog.file_note.text()
    chosen = []
    dialog.chosen.connect(chosen.append)
    QTest.mouseClick(dialog.ok_button, LEFT)  # then Cancel in the save dialog
    (details_given,) = chosen
    assert details_given.project == "Illgraben slope monitoring"
    assert details_given.client == "Typed client"
    assert dict(details_given.point_numbers) == {"illgraben gnss creep 02": "P7"}
    remembered = ready.settings.report_details(str(ready.mirror.path))
    assert remembered["file"] == str(details) and remembered["client"] == "Typed client"
    assert remembered["project"] == ""  # the file's: a later change to it shows
    # numbered again on a worker (the numbers are resolved against the mirror there)
    qtbot.waitUntil(lambda: artists(ready.gnss.current_figure(), f"label:{CREEP}")[0]
                    .get_text() != CREEP, timeout=10000)
    (label,) = artists(ready.gnss.current_figure(), f"label:{CREEP}")
    assert label.get_text() == f"P7 {CREEP}"


def test_site_health_shows_the_details_point_numbers_and_sorts_by_them(qtbot, ready,
                                                                       tmp_path):
    """Issue 30: Site health ignored the report's point numbers.  Given in the details
    (typed through the dialog), they are its first column, and a click on its header
    sorts by them as people count (P2 before P10)."""
    from PySide6.QtCore import QPoint

    from qt_input import click_tab

    rovers = [d for d in ready.overview["gnss"] if d.epochs]
    creep = next(d for d in rovers if d.display_name == CREEP)
    other = next(d for d in rovers if d is not creep and d.site_uuid == creep.site_uuid)
    view = open_site_health(qtbot, ready, creep.site_uuid, creep.site_name)

    def headers() -> list[str]:
        return [view.model_.headerData(c, Qt.Orientation.Horizontal).split("\n")[0]
                for c in range(view.model_.columnCount())]

    assert "Point" not in headers()  # no details yet: no column
    details = tmp_path / "points.toml"
    details.write_text(f'project = "Illgraben"\n\n[points]\n"{CREEP.lower()}" = "P10"\n'
                       f'"{other.serial_number}" = "P2"\n')
    dialog = _details_dialog(qtbot, ready)
    QTest.keyClicks(dialog.file_edit, str(details))
    QTest.keyClick(dialog.file_edit, Qt.Key.Key_Return)
    QTest.mouseClick(dialog.ok_button, LEFT)  # then Cancel in the save dialog
    click_tab(ready.tabs, f"Site health: {creep.site_name}")
    qtbot.waitUntil(lambda: "Point" in headers(), timeout=10000)
    point, name = headers().index("Point"), headers().index("Device")

    def shown() -> list[tuple[str, str]]:
        return [(view.proxy.index(r, point).data(), view.proxy.index(r, name).data())
                for r in range(view.proxy.rowCount())]

    assert (("P10", CREEP) in shown()) and (("P2", other.display_name) in shown())
    assert sum(p != "-" for p, _ in shown()) == 2, shown()  # the others unnumbered: "-"
    header = view.horizontalHeader()
    centre = QPoint(header.sectionViewportPosition(point) + header.sectionSize(point) // 2,
                    header.height() // 2)
    QTest.mouseClick(header.viewport(), LEFT, pos=centre)
    numbered = [p for p, _ in shown() if p != "-"]
    if numbered != ["P2", "P10"]:  # a second click: the other way round
        assert numbered == ["P10", "P2"], numbered
        QTest.mouseClick(header.viewport(), LEFT, pos=centre)
        numbered = [p for p, _ in shown() if p != "-"]
    assert numbered == ["P2", "P10"], numbered  # as people count, not as text

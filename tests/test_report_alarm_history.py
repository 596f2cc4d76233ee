"""The report's alarm section (issue 16): the rule stated once, the alarm history per rover,
key and level (threshold, first and last reached, peak, episodes), the levels in force with
where each is set, and the summary's alarm cell for component keys.  Real PDFs read back
with poppler's ``pdftotext``; a page is also rendered to PNG for a person to look at."""

from __future__ import annotations

import shutil
import subprocess
from datetime import timedelta
from pathlib import Path
from types import SimpleNamespace

import pytest

from analysis.alarms import quantity_words
from devmon_sync.report import ReportOptions, build_report, tables, write_report
from devmon_sync.server import WorldSize
from devmon_sync.store import Mirror, browse, queries

from support import rovers_by_scenario, synced_mirror

WORLD = WorldSize(sites=3, devices=16, days=60)
POPPLER = all(shutil.which(tool) for tool in ("pdftotext", "pdftoppm"))
needs_poppler = pytest.mark.skipif(not POPPLER, reason="poppler-utils (pdftotext) not installed")
REVIEW = Path("/tmp/report-review")
# the accelerating rover (~50 mm, ~1.9 mm/day at the end) reaches 3D displacement "alarm"
# and horizontal velocity "alert", set on the device; the site's horizontal displacement
# levels apply to every rover of the site without its own
DEVICE_LEVELS = {"displacement": {"alert": 10.0, "alarm": 40.0, "emergency": 100.0},
                 "velocity:horizontal": {"alert": 0.5, "alarm": 50.0}}
SITE_LEVELS = {"displacement:horizontal": {"alert": 30.0, "alarm": 200.0}}


def pdf_text(path, first: int | None = None, last: int | None = None) -> str:
    pages = (["-f", str(first)] if first else []) + (["-l", str(last)] if last else [])
    return subprocess.run(["pdftotext", "-layout", *pages, str(path), "-"], check=True,
                          capture_output=True, text=True).stdout


@pytest.fixture(scope="module")
def mirror_path(tmp_path_factory, rovers_in):
    return rovers_in[0]


@pytest.fixture(scope="module")
def rovers_in(tmp_path_factory):
    path = synced_mirror(tmp_path_factory.mktemp("report_alarms") / "mirror.duckdb", WORLD)
    with Mirror.open(path) as m:
        rovers = rovers_by_scenario(queries.gnss_devices(m))
        acc = rovers["accelerating"].serial_number
        for key, levels in DEVICE_LEVELS.items():
            queries.set_alarm_levels(m, acc, key, levels)
        for key, levels in SITE_LEVELS.items():
            queries.set_alarm_levels(m, rovers["accelerating"].site_uuid, key, levels,
                                     scope="site")
    return path, rovers


@pytest.fixture(scope="module")
def rovers(rovers_in):
    return rovers_in[1]


@pytest.fixture(scope="module")
def data(mirror_path, rovers):
    with Mirror.open(mirror_path, read_only=True) as m:
        synced = browse.last_synced(m, [d.serial_number for d in rovers.values()])
        return build_report(m, ReportOptions(site=rovers["accelerating"].site_uuid),
                            now=synced + timedelta(hours=1))


@pytest.fixture(scope="module")
def written(data, tmp_path_factory):
    return write_report(data, tmp_path_factory.mktemp("written") / "report.pdf")


def entry_of(data, device):
    (entry,) = [e for e in data.analysed if e.serial_number == device.serial_number]
    return entry


def test_history_rows_are_the_analysis_history(data, rovers):
    acc = entry_of(data, rovers["accelerating"])
    history = acc.analysis.summary()["alarm_history"]  # what `devmon analyze` reports
    assert {(h["quantity"], h["level"]) for h in history} >= {
        ("displacement", "alert"), ("displacement", "alarm"), ("velocity:horizontal", "alert")}
    rows = [r for r in tables.history_rows(data) if r.serial_number == acc.serial_number]
    assert len(rows) == len(history)
    assert rows[0].cells["device"] and not any(r.cells["device"] for r in rows[1:])
    by_key = {(r.cells["quantity"], r.cells["level"]): r for r in rows}
    for h in history:
        row = by_key[(quantity_words(h["quantity"]), h["level"])]
        threshold = {**DEVICE_LEVELS, **SITE_LEVELS}[h["quantity"]][h["level"]]
        assert row.cells["threshold"] == f"≥ {threshold:g} {h['unit']}"
        assert row.cells["first"] == tables.iso_text(h["first_exceeded"])
        assert row.cells["last"] == ("still reached" if h["exceeded_at_end"]
                                     else tables.iso_text(h["last_exceeded"]))
        digits = 1 if h["unit"] == "mm" else 3
        assert row.cells["peak"] == f"{h['peak']:.{digits}f} {h['unit']}"
        assert row.cells["episodes"] == str(h["episodes"])
        assert row.level == h["level"] and row.rank == (1 if h["level"] == "alert" else 2)
    # the stable rover has the site's levels and reached none: it is named under the table
    stable = entry_of(data, rovers["stable"])
    assert stable.analysis.alarm is not None and not stable.analysis.alarm.history
    assert stable in tables.quiet_rovers(data)


def test_levels_in_force_say_where_each_is_set(data, rovers):
    acc = rovers["accelerating"]
    rows = {(r.cells["quantity"], r.cells["source"]): r for r in tables.level_rows(data)}
    device = rows[("3D displacement", "device")]
    assert device.cells["levels"] == "alert ≥ 10, alarm ≥ 40, emergency ≥ 100 mm"
    assert acc.serial_number in device.cells["rovers"]
    assert rows[("horizontal velocity", "device")].cells["levels"] == \
        "alert ≥ 0.5, alarm ≥ 50 mm/day"
    (site,) = [r for (q, src), r in rows.items() if q == "horizontal displacement"]
    assert site.cells["source"].startswith("site ")
    assert all(d.serial_number in site.cells["rovers"] for d in rovers.values())


def test_the_alarm_cell_reads_well_for_component_keys():
    def analysis(overall, key):
        return SimpleNamespace(alarm=SimpleNamespace(overall=overall, overall_quantity=key))

    assert tables.alarm_text(analysis("alarm", "displacement")) == "alarm\n(displ.)"
    assert tables.alarm_text(analysis("alert", "velocity:down")) == \
        "alert\n(downward velocity)"
    assert tables.alarm_text(analysis("alert", "displacement:horizontal")) == \
        "alert\n(2D displ.)"
    assert tables.alarm_text(analysis("alert", "velocity:along")) == \
        "alert\n(along-slope velocity)"
    assert tables.alarm_text(analysis(None, None)) == "below levels"
    assert tables.alarm_text(SimpleNamespace(alarm=None)) == "no levels set"


@needs_poppler
def test_the_pdf_has_the_alarm_section_with_the_rule_once_and_the_history(written, data,
                                                                          rovers):
    (section,) = [s for s in written.sections if s.kind == "alarms"]
    assert [s.kind for s in written.sections][:3] == ["cover", "summary", "alarms"]
    page = pdf_text(written.path, section.first_page, section.first_page + section.pages - 1)
    flat = " ".join(page.split())
    assert "Alarm status and history" in page and "Alarm history" in page
    assert "Levels in force" in page
    rule = entry_of(data, rovers["accelerating"]).analysis.alarm.rule.describe()
    assert f"a level counts as reached when {rule}" in flat
    whole = " ".join(pdf_text(written.path).split())
    assert whole.count(rule) == 1  # stated once in the whole report
    acc = entry_of(data, rovers["accelerating"])
    for h in acc.analysis.summary()["alarm_history"]:  # the cell may wrap date / time
        day, time = tables.iso_text(h["first_exceeded"]).split(" ")
        assert day in page and time in page, h
    assert "still reached" in page
    assert "No level reached:" in flat and rovers["stable"].serial_number in flat
    assert "site " in page  # where the horizontal displacement levels are set
    # the device page's key facts carry the rover's history in a sentence
    device = next(s for s in written.sections if s.title == acc.label)
    text = " ".join(pdf_text(written.path, device.first_page,
                             device.first_page + device.pages - 1).split())
    assert "Alarm history" in text and "3D displacement: alert since" in text
    # for a person to look at
    REVIEW.mkdir(parents=True, exist_ok=True)
    subprocess.run(["pdftoppm", "-r", "80", "-f", str(section.first_page), "-l",
                    str(section.first_page), "-png", str(written.path),
                    str(REVIEW / "alarms")], check=True)


def test_a_report_without_any_level_has_no_alarm_section(mirror_path, rovers, tmp_path):
    creep = rovers["creep"]  # no device levels; the site's horizontal ones apply
    with Mirror.open(mirror_path, read_only=True) as m:
        data = build_report(m, ReportOptions(devices=(creep.serial_number,)))
    assert any(s.kind == "alarms" for s in _kinds(data))
    empty = data.__class__(**{**data.__dict__, "entries": tuple(
        e.__class__(**{**e.__dict__, "alarm_levels": {}, "alarm_level_sources": {}})
        for e in data.entries)})
    assert not any(s.kind == "alarms" for s in _kinds(empty))


@needs_poppler
def test_no_level_reached_is_one_line(mirror_path, rovers, tmp_path):
    stable = rovers["stable"]
    with Mirror.open(mirror_path, read_only=True) as m:
        data = build_report(m, ReportOptions(devices=(stable.serial_number,)))
    assert tables.history_rows(data) == []
    result = write_report(data, tmp_path / "stable.pdf")
    (section,) = [s for s in result.sections if s.kind == "alarms"]
    page = " ".join(pdf_text(result.path, section.first_page, section.first_page).split())
    assert "No level was reached between" in page
    assert "First reached" not in page  # no empty table


def _kinds(data):
    from devmon_sync.report.pages import plan_pages

    return plan_pages(data)

"""The report's layout (issue 30, points 3, 5 and the report's half of 6): every report lists
its whole contents (the cover's list continued on the next page when it does not fit), one
order everywhere (by point number, then by name in natural order: P2 before P10), and no
table splits a word or lets a text out of its cell.

One small world is synced (6 rovers on one site, levels low enough that one rover reaches
emergency); the demo's 13 rovers and a site of 40 are that data with its rovers repeated
under new names and numbers, not synced.  Only the pages looked at are drawn (the cover, the
summary), read back with ``pdftotext``; the tables are drawn on a figure of their own and
each text's extent, measured by a renderer, compared with its cell."""

from __future__ import annotations

import io
import re
from dataclasses import replace
from datetime import date

import pytest
from matplotlib.backends.backend_pdf import PdfFile, RendererPdf
from matplotlib.figure import Figure

from devmon_sync.analyze.site_plans import PlanRover, place_rovers
from devmon_sync.report import ReportOptions, Scope, build_report, layout, register, tables
from devmon_sync.report.details import ReportDetails
from devmon_sync.report.model import ReportData, report_order
from devmon_sync.report.pages import plan_pages, plan_rows
from devmon_sync.report.render import sections_of, write_pages
from devmon_sync.server import WorldSize
from devmon_sync.store import Mirror, queries

from support import POPPLER, needs_poppler, pdf_text, rovers_by_scenario, synced_mirror

WORLD = WorldSize(sites=1, devices=10, days=20)
# low enough that the accelerating rover reaches emergency (~14 mm in the 20 days): the
# history's "emergency" is the word the tables split
SITE_LEVELS = {"displacement": {"alert": 1.0, "alarm": 2.0, "emergency": 3.0},
               "velocity": {"alert": 0.3, "alarm": 2.0}}
DEVICE_LEVELS = {"velocity:down": {"alert": 0.1, "alarm": 2.0}}
# point numbers out of the names' order; two rovers without one
NUMBERS = {"seasonal": "P1", "creep": "P2", "accelerating": "P7", "stable": "P10"}
EXPECTED_ORDER = ("seasonal", "creep", "accelerating", "stable", "outliers", "step")
PROJECT = "Illgraben and coastal slopes monitoring programme"  # a long title-block value
TITLE_BLOCK = {"project": PROJECT, "client": "Canton of Valais",
               "report_number": "IG-2026-047", "author": "A. Engineer",
               "checker": "B. Checker", "revision": "B", "date": date(2026, 11, 20)}
PT_SLACK = 0.3  # points a text may pass its box by (rounding), a tenth of a millimetre


def flat(text: str) -> str:
    return re.sub(r"\s+", " ", text)


@pytest.fixture(scope="module")
def mirror_path(tmp_path_factory):
    path = synced_mirror(tmp_path_factory.mktemp("layout30") / "mirror.duckdb", WORLD)
    with Mirror.open(path) as m:
        rovers = rovers_by_scenario(queries.gnss_devices(m))
        site = rovers["creep"].site_uuid
        for key, levels in SITE_LEVELS.items():
            queries.set_alarm_levels(m, site, key, levels, scope="site")
        for key, levels in DEVICE_LEVELS.items():
            queries.set_alarm_levels(m, rovers["accelerating"].serial_number, key, levels)
    return path


@pytest.fixture(scope="module")
def data(mirror_path, rovers) -> ReportData:
    """The site's report with a full title block and point numbers (by display name)."""
    details = ReportDetails(**TITLE_BLOCK, point_numbers=tuple(
        (rovers[s].display_name, n) for s, n in NUMBERS.items()))
    with Mirror.open(mirror_path, read_only=True) as m:
        return build_report(m, ReportOptions(site=rovers["creep"].site_uuid, details=details))


def with_rovers(data: ReportData, n: int) -> ReportData:
    """``data`` as a report of ``n`` rovers, chosen by serial number in the GUI (its title
    then "GNSS deformation report: <project> (n devices)", over two lines): the analysed
    rovers repeated as "Illgraben GNSS rover k" (P1 to Pn, every fifth unnumbered) at made-up
    positions on one plan, with a point-number warning on the cover."""
    base = data.analysed
    entries, positions = [], {}
    for k in range(1, n + 1):
        src = base[k % len(base)]
        sn, name = f"DM30-{k:05d}", f"Illgraben GNSS rover {k}"
        entries.append(replace(src, device=replace(src.device, serial_number=sn,
                                                   display_name=name),
                               analysis=replace(src.analysis, serial_number=sn,
                                                display_name=name),
                               point_number=None if k % 5 == 0 else f"P{k}"))
        positions[sn] = (46.30 + 0.0004 * (k % 7), 7.62 + 0.0005 * (k // 7), 1200.0)
    entries.sort(key=report_order)
    plans = place_rovers([PlanRover(e.analysis, e.device.site_uuid, e.device.site_name,
                                    e.label, e.point_number) for e in entries], positions)
    options = replace(data.options, site=None, devices=tuple(e.serial_number for e in entries),
                      details=replace(data.options.details, point_numbers=()))
    warning = ("Point numbers in illgraben.toml name no device of the mirror: P99. Check the "
               "spelling (a device's name or serial number).")
    return replace(data, options=options, scope=Scope("devices", None,
                                                      tuple(e.device for e in entries)),
                   entries=tuple(entries), plans=tuple(plans), warnings=(warning,))


@pytest.fixture(scope="module")
def site_specs(data):
    """The site report's page plan (nothing drawn)."""
    return plan_pages(data)


@pytest.fixture(scope="module", params=[13, 40], ids=["13-rovers", "40-rovers"])
def wide(request, data, tmp_path_factory):
    """(data, its page plan, the text of the pages up to the summary) for a report of 13
    (the demo's) and of 40 rovers."""
    wide = with_rovers(data, request.param)
    specs = plan_pages(wide)
    summary = next(i for i, s in enumerate(specs) if s.kind == "summary")
    out = tmp_path_factory.mktemp("wide") / f"front-{request.param}.pdf"
    write_pages(wide, specs, 0, summary + 1, out)
    return wide, specs, pdf_text(out) if POPPLER else None


# ----------------------------------------------------------------------------- contents

@needs_poppler
def test_every_section_is_in_the_contents_by_the_summary(wide):
    """Point 3: with 13 rovers and a title over two lines the cover dropped its contents
    ("(more in the summary)") and the summary had none; now the cover's list goes on at
    the top of the summary (a few lines) or on a page of its own (40 rovers), and every
    section is listed with its first page."""
    _, specs, text = wide
    sections = sections_of(specs)
    lines = text.splitlines()
    missing = [f"{s.title} ... {s.first_page}" for s in sections[1:]
               if not any(re.search(rf"{re.escape(s.title)}\s*\.*\s+{s.first_page}$",
                                    line.strip()) for line in lines)]
    assert not missing, f"{len(missing)} of {len(sections) - 1} sections not in the " \
                        f"contents, e.g. {missing[:3]}"
    assert "more in the summary" not in text
    assert sections[0].kind == "cover" and sections[1].kind == "summary"


@needs_poppler
def test_the_cover_shows_the_title_and_title_block_whole(wide):
    """Nothing cut on the cover: the long project name and the title over two lines."""
    data, _, text = wide
    cover = flat(text.split("\f")[0])
    assert PROJECT in cover and "…" not in cover, cover[:400]
    assert flat(data.title) in cover


def pdf_renderer(fig: Figure) -> RendererPdf:
    """A renderer measuring text as the PDF places it: the font's own advances, unhinted,
    in points (a raster renderer's hinting widens small text at low resolution)."""
    fig.set_dpi(72)
    width, height = (72 * v for v in layout.PAGE_IN)
    return RendererPdf(PdfFile(io.BytesIO()), 72, height, width)


def test_nothing_on_the_front_pages_runs_off_the_page(wide):
    """Every text of the cover (and its contents' continuation) and of the summary stays
    within the page's margins, and above the footer: measured as drawn."""
    data, specs, _ = wide
    chrome = layout.Chrome(data.footer_title, "2026-11-20 08:00 UTC", len(specs))
    right, bottom = (layout.PAGE_IN[0] - layout.MARGIN_IN) * 72, layout.PAGE_IN[1] * 72
    for page, spec in enumerate(specs, 1):
        if spec.kind not in ("cover", "summary"):
            break
        fig, heading = spec.draw()
        chrome.draw(fig, page, spec.label, heading)
        renderer = pdf_renderer(fig)
        for t in fig.texts:
            box = t.get_window_extent(renderer)
            where = (page, t.get_text()[:60], box.x0, box.x1)
            assert layout.MARGIN_IN * 72 - PT_SLACK <= box.x0 and box.x1 <= right + PT_SLACK, \
                where
            assert 0 <= box.y0 and box.y1 <= bottom, where
            if t.get_gid() is None or not t.get_gid().startswith("chrome:"):
                top = (layout.PAGE_IN[1] - layout.CONTENT_BOTTOM_IN) * 72
                assert box.y0 >= top - PT_SLACK, ("over the footer", where)


# ----------------------------------------------------------------------------- order

def serials_in_order(data: ReportData, rovers) -> list[str]:
    return [rovers[s].serial_number for s in EXPECTED_ORDER]


def test_one_order_everywhere_by_point_number_then_name(data, site_specs, rovers):
    """Point 5: contents, summary and rover pages followed the names, the register the
    point numbers; now every table and section of the report lists the points alike."""
    expected = serials_in_order(data, rovers)
    numbered = {rovers[s].serial_number for s in NUMBERS}
    specs = site_specs
    by_label = {e.label: e.serial_number for e in data.entries}
    summary = [r.serial_number for r in tables.summary_rows(data)]
    # the site's other devices (its base station, sensors), not points: after the rovers
    assert summary[len(expected):] == [e.serial_number for e in data.entries
                                       if e.serial_number not in expected]
    orders = {
        "entries": [e.serial_number for e in data.entries][:len(expected)],
        "rover sections": list(dict.fromkeys(by_label[s.section] for s in specs
                                             if s.kind == "device")),
        "summary": summary[:len(expected)],
        "velocity": [r.serial_number for r in tables.velocity_rows(data)],
        "register": [r.serial_number for p in data.plans
                     for r in register.register_rows(data, p)],
        "change": [r.serial_number for r in register.change_rows(data)],
        "plan": [r.serial_number for p in data.plans for r in plan_rows(data, p)],
    }
    wrong = {name: order for name, order in orders.items() if order != expected}
    assert not wrong, f"expected {expected} everywhere; {wrong}"
    history = list(dict.fromkeys(r.serial_number for r in tables.history_rows(data)))
    assert history == [sn for sn in expected if sn in history]
    assert numbered == set(expected[:4])


@needs_poppler
def test_the_drawn_contents_and_summary_follow_the_point_numbers(data, site_specs, rovers,
                                                                 tmp_path):
    """What a reader sees: the contents' rover lines and the summary's rows in point order."""
    specs = site_specs
    end = max(i for i, s in enumerate(specs) if s.kind == "summary") + 1
    out = tmp_path / "front.pdf"
    write_pages(data, specs, 0, end, out)
    pages = pdf_text(out).split("\f")
    expected = serials_in_order(data, rovers)
    contents = pages[0][pages[0].index("Contents"):]  # the alarm status names rovers too
    summary = "".join(pages[1:])
    for where, text in (("contents", contents), ("summary", summary)):
        found = sorted(expected, key=lambda sn: text.index(sn))
        assert found == expected, f"{where}: {found}"


def test_ties_and_unnumbered_points_go_by_name_in_natural_order(data):
    """P2 before P10, numbered points before the others, and names compared as people
    read them: rover 9 before rover 10."""
    entries = list(with_rovers(data, 12).entries)
    shuffled = entries[::-1]
    labels = [e.label for e in sorted(shuffled, key=report_order)]
    assert labels[:3] == ["P1 Illgraben GNSS rover 1 (DM30-00001)",
                          "P2 Illgraben GNSS rover 2 (DM30-00002)",
                          "P3 Illgraben GNSS rover 3 (DM30-00003)"]
    assert labels.index("P9 Illgraben GNSS rover 9 (DM30-00009)") < \
        labels.index("P11 Illgraben GNSS rover 11 (DM30-00011)")
    assert labels[-2:] == ["Illgraben GNSS rover 5 (DM30-00005)",
                           "Illgraben GNSS rover 10 (DM30-00010)"]


# ----------------------------------------------------------------------------- tables

def report_tables(specs) -> list[tuple[str, layout.Table]]:
    """(kind of page, table) of every table a report's pages draw."""
    return [(spec.kind, block) for spec in specs for block in spec.blocks
            if isinstance(block, layout.Table)]


def check_cells(table: layout.Table) -> list[str]:
    """What is wrong with the table as drawn: a word split over lines, a text outside its
    cell."""
    fig = Figure(figsize=layout.PAGE_IN)
    cells = table.draw_cells(fig, layout.MARGIN_IN, layout.CONTENT_TOP_IN,
                             layout.CONTENT_WIDTH_IN)
    words = {w for c in table.columns for w in c.header.split()}
    words |= {w for r in table.rows for text in [*r.cells.values(), r.merged or ""]
              for w in text.split()}
    renderer = pdf_renderer(fig)
    dpi, height = fig.dpi, layout.PAGE_IN[1]
    wrong = []
    for cell in cells:
        text = cell.text.get_text()
        split = [w for w in text.split() if w not in words]
        if split:
            wrong.append(f"{text!r}: {split} is part of a word")
        box = cell.text.get_window_extent(renderer)
        if box.x0 < cell.left_in * dpi - PT_SLACK or box.x1 > cell.right_in * dpi + PT_SLACK:
            wrong.append(f"{text!r} runs out of its cell: x {box.x0:.1f}-{box.x1:.1f} pt, "
                         f"cell {cell.left_in * dpi:.1f}-{cell.right_in * dpi:.1f} pt")
        if box.y1 > (height - cell.top_in) * dpi + PT_SLACK or \
                box.y0 < (height - cell.bottom_in) * dpi - PT_SLACK:
            wrong.append(f"{text!r} runs out of its row")
    return wrong


def assert_tables_whole(specs) -> None:
    found = report_tables(specs)
    assert {"summary", "alarms", "register", "plan", "device"} <= {k for k, _ in found}
    wrong = {f"{kind} table {[c.key for c in t.columns]}": problems
             for kind, t in found if (problems := check_cells(t))}
    assert not wrong, wrong


def test_no_table_splits_a_word_or_leaves_its_cell(site_specs):
    """Point 6: "emergenc y" and "displacemen t" were split in the alarm tables; now every
    column is at least as wide as its longest word (or its font smaller) and each text
    stays in its cell: the summary, alarm, register, plan and rover tables."""
    assert_tables_whole(site_specs)


@pytest.mark.parametrize("wide", [13], ids=["13-rovers"], indirect=True)
def test_no_table_splits_a_word_with_the_demos_13_rovers(wide):
    """The same with the demo's 13 rovers (longer lists of rovers in the levels table,
    tables continued over pages; a site of 40 has the same words, in longer tables)."""
    assert_tables_whole(wide[1])


def test_a_heading_goes_to_the_next_page_with_the_table_it_heads(data):
    """A heading with room for itself but not for its table's header and first row went
    on without it ("Change over the last 7 and 30 days" alone at the foot of a page)."""
    table = layout.Table(register.change_columns(), register.change_rows(data), size=7.0)
    heading = layout.Heading("Change over the last 7 and 30 days")
    room = heading.height(layout.CONTENT_WIDTH_IN) + 0.6 + 0.05  # the heading's own rule
    fill = layout.CONTENT_BOTTOM_IN - layout.CONTENT_TOP_IN - room - heading.space_before_in
    pages = layout.paginate([layout.Spacer(fill), heading, table])
    assert table.split(room - heading.height(layout.CONTENT_WIDTH_IN),
                       layout.CONTENT_WIDTH_IN) is None  # the table cannot start there
    assert [type(b).__name__ for b in pages[0].blocks] == ["Spacer"], pages[0].blocks
    assert pages[1].blocks[0] is heading

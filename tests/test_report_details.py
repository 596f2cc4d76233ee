"""What a consultancy's report carries besides the data (issue 17, point 4): the title block
(project, client, report number, revision, date, author, checker) from a TOML details file
and options, the engineer's comments (text, a file, or a ruled box to fill in), the point
register with the site's point numbers, and each point's change over the last 7 and 30
days.  The real command on a mirror synced from the reference server; the PDF read back
with pdftotext."""

from __future__ import annotations

import re
from datetime import date

import pytest

from analysis.change import recent_change
from devmon_sync.report import ReportOptions, build_report
from devmon_sync.report import register
from devmon_sync.report.details import ReportDetails, details_from_mapping, load_details
from devmon_sync.report.errors import ReportError
from devmon_sync.report.pages import plan_pages
from devmon_sync.report.render import write_pages
from devmon_sync.server import WorldSize
from devmon_sync.store import Mirror, browse

from support import synced_mirror
from support import devmon, needs_poppler, pdf_pages, pdf_text, section_pages

WORLD = WorldSize(sites=1, devices=10, days=45)
DETAILS = '''
project = "Illgraben slope monitoring"
client = "Canton of Valais"
report_number = "IG-2026-047"
author = "A. Engineer"
checker = "B. Checker"
revision = "B"
date = 2026-11-20
comments = """
Creep on the lower slope went on at about 0.1 mm/day.

The accelerating point needs a site visit this week.
"""

[points]
"{creep}" = "P2"
"{accelerating}" = "P10"
"{stable_sn}" = "P1"
'''


def flat(text: str) -> str:
    return re.sub(r"\s+", " ", text)


@pytest.fixture(scope="module")
def mirror_path(tmp_path_factory):
    return synced_mirror(tmp_path_factory.mktemp("details") / "mirror.duckdb", WORLD)


@pytest.fixture(scope="module")
def details_file(rovers, tmp_path_factory):
    """Points named by display name (any case) and by serial number."""
    path = tmp_path_factory.mktemp("details-file") / "illgraben.toml"
    path.write_text(DETAILS.format(creep=rovers["creep"].display_name.upper(),
                                   accelerating=rovers["accelerating"].display_name,
                                   stable_sn=rovers["stable"].serial_number))
    return path


@pytest.fixture(scope="module")
def site(rovers) -> str:
    return rovers["creep"].site_name


@pytest.fixture(scope="module")
def command(mirror_path, details_file, site, tmp_path_factory):
    """``devmon report`` with the details file, an option over it and a comments file."""
    out = tmp_path_factory.mktemp("cmd") / "report.pdf"
    r = devmon("report", "--db", str(mirror_path), "--site", site, "--out", str(out),
               "--details", str(details_file), "--author", "C. Consultant")
    assert r.returncode == 0, r.stderr
    return r, out


@pytest.fixture(scope="module")
def data(mirror_path, details_file, site):
    with Mirror.open(mirror_path, read_only=True) as m:
        return build_report(m, ReportOptions(site=site, details=load_details(details_file)))


# ----------------------------------------------------------------------------- title block

@needs_poppler
def test_the_cover_has_the_title_block_and_every_footer_the_report_number(command):
    r, out = command
    assert "Traceback" not in r.stderr and "warning: Point numbers" not in r.stderr
    cover = flat(pdf_text(out, 1, 1))
    for label, value in (("Project", "Illgraben slope monitoring"),
                         ("Client", "Canton of Valais"), ("Report no.", "IG-2026-047"),
                         ("Revision", "B"), ("Date", "2026-11-20"),
                         ("Prepared by", "C. Consultant"),  # the option over the file
                         ("Checked by", "B. Checker")):
        assert label in cover and value in cover, label
    assert "A. Engineer" not in cover
    pages = pdf_pages(out)
    for page in range(1, pages + 1):
        footer = pdf_text(out, page, page).strip().splitlines()[-1]
        assert footer.lstrip().startswith("IG-2026-047 rev. B"), (page, footer)
        assert f"page {page} of {pages}" in footer


@needs_poppler
def test_the_comments_page_holds_the_given_text_in_paragraphs_and_who_signed(command):
    r, out = command
    section = section_pages(r.stdout, "Engineer's comments")
    text = pdf_text(out, *section)
    assert "about 0.1 mm/day." in text and "needs a site visit" in text
    assert "Prepared by: C. Consultant" in flat(text) and "Checked by: B. Checker" in flat(text)


def test_without_details_the_boxes_and_the_comments_box_are_left_to_fill(mirror_path, rovers):
    """Nothing invented: empty title-block boxes (the date is the day the report was made)
    and a ruled box for hand-written comments."""
    with Mirror.open(mirror_path, read_only=True) as m:
        data = build_report(m, ReportOptions(devices=(rovers["stable"].serial_number,)))
    specs = plan_pages(data)
    cover_fig, _ = specs[0].draw()
    filled = {t.get_gid(): t.get_text() for t in cover_fig.texts
              if (t.get_gid() or "").startswith("title-block:")}
    assert filled == {"title-block:Date": data.generated_at.date().isoformat()}
    (comments,) = [s for s in specs if s.kind == "comments"]
    fig, _ = comments.draw()
    assert any(a.get_gid() == "comments:box" for a in fig.artists)
    assert any("No comments were given" in t.get_text() for t in fig.texts)
    assert data.footer_title == data.title


# ----------------------------------------------------------------------------- register

def test_point_numbers_lead_the_register_the_plan_and_the_contents(data, rovers):
    order = [e.point_number for e in register.register_rovers(data)]
    assert order[:3] == ["P1", "P2", "P10"]  # natural order, P2 before P10
    assert all(n is None for n in order[3:])
    plan = data.plans[0]
    numbers = {sn: p.number for sn, p in zip(plan.serial_numbers, plan.points)}
    assert numbers[rovers["accelerating"].serial_number] == "P10"
    assert numbers[rovers["creep"].serial_number] == "P2"  # named in another case
    sections = {s.section for s in plan_pages(data)}
    assert f"P10 {rovers['accelerating'].display_name} " \
           f"({rovers['accelerating'].serial_number})" in sections


def test_the_register_gives_each_point_its_plan_position_and_setup(data, mirror_path, rovers):
    plan = data.plans[0]
    rows = {r.serial_number: r for r in register.register_rows(data, plan)}
    creep = rovers["creep"].serial_number
    i = plan.serial_numbers.index(creep)
    cells = rows[creep].cells
    assert cells["x"] == f"{plan.points[i].easting_m:.3f}"
    assert cells["y"] == f"{plan.points[i].northing_m:.3f}"
    with Mirror.open(mirror_path, read_only=True) as m:
        positions = browse.gnss_positions(m)
    k = list(positions["serial_number"]).index(creep)
    assert cells["h"] == f"{positions['eh'][k]:.3f}"
    setup = next(e.setup for e in data.entries if e.serial_number == creep)
    assert setup.antenna_type and setup.antenna_type in cells["antenna"]
    assert f"{setup.arp_height_m:.3f} m" in cells["antenna"]
    assert setup.base_station_name in cells["base"]
    assert cells["sampling"] in ("1 h", "10 min", "15 min", "30 min")
    assert re.fullmatch(r"\d{4}-\d\d-\d\d", cells["since"])


def test_the_change_over_7_and_30_days_is_the_analysis_own(data, rovers):
    """The table's cells are ``recent_change`` of the analysis at the table's precision;
    the accelerating point moved more over 30 days than over 7, both more than a point at
    rest."""
    by_sn = {e.serial_number: e for e in data.analysed}
    acc = by_sn[rovers["accelerating"].serial_number]
    row = register.change_row(acc)
    for days in (7, 30):
        c = recent_change(acc.analysis.estimates, days)
        h, sh = c.horizontal_mm()
        assert row.cells[f"h{days}"].startswith(f"{h:.1f}\n± {sh:.1f}")
        assert row.cells[f"v{days}"].startswith(f"{c.change_mm['up']:+.1f}\n± ")
    h7, h30 = (recent_change(acc.analysis.estimates, d).horizontal_mm()[0] for d in (7, 30))
    stable = recent_change(by_sn[rovers["stable"].serial_number].analysis.estimates, 30)
    assert h30 > h7 > 3 * max(stable.horizontal_mm()[0], 0.5)


@needs_poppler
def test_the_register_pages_show_both_tables(command, data, rovers):
    r, out = command
    text = flat(pdf_text(out, *section_pages(r.stdout, "Point register")))
    assert "Change over the last 7 and 30 days" in text
    assert "Ellipsoidal" in text and "Base station" in text
    acc = next(e for e in data.analysed
               if e.serial_number == rovers["accelerating"].serial_number)
    h30 = register.change_row(acc).cells["h30"].split("\n")[0]
    assert h30 in text
    for sn in (rovers["creep"].serial_number, rovers["stable"].serial_number):
        assert sn in text


# ----------------------------------------------------------------------------- files and errors

def test_same_details_same_bytes(mirror_path, rovers, details_file, tmp_path):
    sn = rovers["stable"].serial_number
    details = load_details(details_file)
    with Mirror.open(mirror_path, read_only=True) as m:
        first = build_report(m, ReportOptions(devices=(sn,), details=details))
        again = build_report(m, ReportOptions(devices=(sn,), details=details),
                             now=first.generated_at)
    # the pages the details are written on (the footers too are on every page): the whole
    # report drawn twice cost CI 12 s, and that the rest draws the same bytes is
    # test_report's
    pages = [i for i, spec in enumerate(plan_pages(first))
             if spec.kind in ("cover", "summary", "comments", "register")]
    assert len(pages) == 4
    for data, name in ((first, "a"), (again, "b")):
        specs = plan_pages(data)
        for i in pages:
            write_pages(data, specs, i, i + 1, tmp_path / f"{name}{i}.pdf")
    for i in pages:
        assert (tmp_path / f"a{i}.pdf").read_bytes() == (tmp_path / f"b{i}.pdf").read_bytes()


@pytest.mark.parametrize("text, message", [
    ('projct = "X"', "unknown key projct; the keys are"),
    ("project = Illgraben", "is not valid TOML"),
    ("date = 2026-13-01", "is not valid TOML"),
    ('date = "26.11.2026"', "is not a date: write it as YYYY-MM-DD"),
    ("client = [1, 2]", "client must be text"),
    ('[points]\n"A" = ""', "the point number of 'A' must be text"),
    ('[points]\n"A" = "a-very-long-point-number"', "longer than 12 characters"),
    ('points = "P1"', "points must be a table"),
])
def test_a_bad_details_file_is_refused_with_where_and_what(tmp_path, text, message):
    path = tmp_path / "d.toml"
    path.write_text(text)
    with pytest.raises(ReportError) as err:
        load_details(path)
    assert message in str(err.value) and str(path) in str(err.value)


def test_options_win_over_the_file_and_numbers_merge():
    base = details_from_mapping({"project": "P", "author": "A", "points": {"x": "1"}}, "f")
    over = ReportDetails(author="B", point_numbers=(("y", "2"),))
    merged = over.over(base)
    assert (merged.project, merged.author) == ("P", "B")
    assert dict(merged.point_numbers) == {"x": "1", "y": "2"}
    assert details_from_mapping({"date": date(2026, 1, 2), "report_number": 47},
                                "f").report_number == "47"


@pytest.mark.parametrize("extra, message", [
    (["--details", "{missing}"], "no report details file"),
    (["--details", "{bad}"], "unknown key"),
    (["--date", "yesterday"], "--date 'yesterday' is not a date"),
    (["--comments-file", "{missing}"], "cannot read the comments file"),
])
def test_the_command_refuses_bad_details_before_any_analysis(mirror_path, site, tmp_path,
                                                             extra, message):
    bad = tmp_path / "bad.toml"
    bad.write_text('author = "A"\nchecked_by = "B"\n')
    extra = [a.format(missing=tmp_path / "nothing.toml", bad=bad) for a in extra]
    r = devmon("report", "--db", str(mirror_path), "--site", site,
               "--out", str(tmp_path / "r.pdf"), *extra)
    assert r.returncode == 2 and message in r.stderr, r.stderr
    assert "Traceback" not in r.stderr and not (tmp_path / "r.pdf").exists()


def test_point_numbers_naming_no_device_are_warned(mirror_path, rovers, tmp_path):
    details = ReportDetails(point_numbers=(("Illgraben GNSS crepe 02", "P2"),), source="f.toml")
    with Mirror.open(mirror_path, read_only=True) as m:
        data = build_report(m, ReportOptions(devices=(rovers["stable"].serial_number,),
                                             details=details))
    (warning,) = [w for w in data.warnings if "Point numbers" in w]
    assert "f.toml" in warning and "Illgraben GNSS crepe 02" in warning


def renamed_copy(mirror_path, tmp_path, **aliases) -> str:
    """A copy of the mirror where the given devices (serial number -> alias) carry a new
    alias, as the service would send after someone renamed them."""
    import shutil

    import duckdb

    copy = tmp_path / "renamed.duckdb"
    shutil.copy(mirror_path, copy)
    con = duckdb.connect(str(copy))
    for serial, alias in aliases.items():
        con.execute("UPDATE devices SET alias = ?, display_name = ? WHERE serial_number = ?",
                    [alias, alias, serial])
    con.close()
    return str(copy)


def test_a_point_name_two_devices_share_numbers_neither_and_says_so(mirror_path, rovers,
                                                                     tmp_path):
    """A name two devices share cannot say which point the number is for: the report is
    still made, neither device gets the number, and a warning names the file, the name, the
    devices and what to do (key it by serial number)."""
    stable, creep = rovers["stable"].serial_number, rovers["creep"].serial_number
    path = renamed_copy(mirror_path, tmp_path, **{stable: "Twin", creep: "Twin"})
    details = ReportDetails(point_numbers=(("twin", "P9"), (creep, "P2")), source="f.toml")
    with Mirror.open(path, read_only=True) as m:
        data = build_report(m, ReportOptions(devices=(stable, creep), details=details))
    numbers = {e.serial_number: e.point_number for e in data.entries}
    assert numbers == {stable: None, creep: "P2"}
    (warning,) = [w for w in data.warnings if "twin" in w]
    assert "f.toml" in warning and stable in warning and creep in warning
    assert "serial number" in warning


def test_a_point_keyed_by_a_devices_name_under_its_alias_gets_its_number(mirror_path, rovers):
    """The keys match a device as ``--device`` does (serial number, display name, alias or
    name): a device shown by its alias is numbered by its name too."""
    import duckdb

    stable = rovers["stable"].serial_number
    con = duckdb.connect(str(mirror_path), read_only=True)
    (name, shown), = con.execute("SELECT name, display_name FROM devices WHERE serial_number "
                                 "= ?", [stable]).fetchall()
    con.close()
    assert name and name != shown  # the alias is what the device is shown as
    details = ReportDetails(point_numbers=((name.upper(), "P1"),), source="f.toml")
    with Mirror.open(mirror_path, read_only=True) as m:
        data = build_report(m, ReportOptions(devices=(stable,), details=details))
    assert [e.point_number for e in data.entries] == ["P1"]
    assert not [w for w in data.warnings if "Point number" in w]


def test_one_number_given_to_two_points_is_warned(mirror_path, rovers):
    stable, creep = rovers["stable"].serial_number, rovers["creep"].serial_number
    details = ReportDetails(point_numbers=((stable, "P1"), (creep, "p1")), source="f.toml")
    with Mirror.open(mirror_path, read_only=True) as m:
        data = build_report(m, ReportOptions(devices=(stable, creep), details=details))
    (warning,) = [w for w in data.warnings if "P1" in w]
    assert stable in warning and creep in warning and "f.toml" in warning


def test_devices_of_several_sites_are_titled_by_the_project(mirror_path, rovers, tmp_path):
    """A device list spanning sites (here one rover moved out of any site) has no site to
    name: the title names the project when one is given, else the count alone."""
    import shutil

    import duckdb

    stable, creep = rovers["stable"].serial_number, rovers["creep"].serial_number
    path = tmp_path / "two-places.duckdb"
    shutil.copy(mirror_path, path)
    con = duckdb.connect(str(path))
    con.execute("UPDATE devices SET site_uuid = NULL, raw = json_merge_patch(raw, "
                "'{\"site\": null}') WHERE serial_number = ?", [stable])
    con.close()
    titles = []
    for details in (ReportDetails(project="Illgraben slope monitoring"), ReportDetails()):
        with Mirror.open(path, read_only=True) as m:
            data = build_report(m, ReportOptions(devices=(stable, creep), details=details))
        titles.append(data.title)
    assert titles == ["GNSS deformation report: Illgraben slope monitoring (2 devices)",
                      "GNSS deformation report: 2 devices"]

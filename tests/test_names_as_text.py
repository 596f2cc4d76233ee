"""Names from the service are drawn as text, never as mathtext (issue 29, item 6).

matplotlib parses a string with two unescaped dollar signs as TeX: a device called
``rover $\\undefinedmacro{x}$`` made `devmon report` exit with a traceback and the GUI's
figure fail.  Each figure builder, the report's own pages and the GUI's empty plot share
``analysis.figure_style.TextFigure``; these tests draw them with such names, from a real
mirror, and check the name comes out as written.
"""

from __future__ import annotations

import dataclasses
import io
import shutil

import numpy as np
import pytest
from matplotlib.text import Text

from analysis import figures as F
from analysis import plan_figure as P
from devmon_sync.report import ReportOptions, build_report, write_report
from devmon_sync.server import WorldSize
from devmon_sync.store import Mirror, report_queries

from support import pdf_text, synced_mirror

# an even number of dollars (mathtext then parses the text), an undefined macro, carets
NAME = r"rover $\undefinedmacro{x}$ ^_^"
WORLD = WorldSize(sites=1, devices=4, days=20)


@pytest.fixture(scope="module")
def named(tmp_path_factory):
    """A site report's data from a real mirror, every rover renamed ``NAME`` plus its
    serial number (in the scope, the entries, the analyses and the site plan), and the
    directory to write into."""
    root = tmp_path_factory.mktemp("names")
    path = synced_mirror(root / "mirror.duckdb", WORLD)
    with Mirror.open(path, read_only=True) as m:
        site = report_queries.sites(m)[0]
        data = build_report(m, ReportOptions(site=site.uuid))
    assert data.plans and data.plans[0].points, "the site report should draw a plan"

    def name(sn: str) -> str:
        return f"{NAME} {sn}"

    entries = tuple(dataclasses.replace(
        e, device=dataclasses.replace(e.device, display_name=name(e.device.serial_number)),
        analysis=e.analysis and dataclasses.replace(
            e.analysis, display_name=name(e.device.serial_number))) for e in data.entries)
    scope = dataclasses.replace(data.scope, devices=tuple(
        dataclasses.replace(d, display_name=name(d.serial_number)) for d in data.scope.devices))
    plans = tuple(dataclasses.replace(p, points=tuple(
        dataclasses.replace(pt, label=name(sn)) for pt, sn in zip(p.points, p.serial_numbers)))
        for p in data.plans)
    return dataclasses.replace(data, entries=entries, scope=scope, plans=plans), root


def _drawn(fig) -> list[str]:
    """Render ``fig`` (PNG, as the GUI's Agg canvas does) and return its texts."""
    fig.savefig(io.BytesIO(), format="png")
    return [t.get_text() for t in fig.findobj(Text)]


def test_every_rover_figure_draws_the_name_as_written(named):
    data, _ = named
    r = next(e.analysis for e in data.entries if e.analysis is not None)
    for build in (lambda: F.displacement_figure(r), lambda: F.trajectory_figure(r),
                  lambda: F.velocity_figure(r), lambda: F.inverse_velocity_figure(r)):
        texts = _drawn(build())
        assert any(NAME in t for t in texts), texts


def test_the_plan_and_the_time_series_draw_the_name_as_written(named):
    data, _ = named
    r = next(e.analysis for e in data.entries if e.analysis is not None)
    plan = P.plan_view_figure(P.plan_points([r], {r.serial_number: (100.0, 200.0)}),
                              frame_label="local", title=NAME)
    assert any(NAME in t for t in _drawn(plan))
    t = np.array(["2026-01-01T00", "2026-01-02T00"], dtype="datetime64[ns]")
    series = F.Series(label=NAME, unit="mm", t=t, values=np.array([1.0, 2.0]), gid="x")
    assert any(NAME in t for t in _drawn(F.timeseries_figure([series], title=NAME)))


def test_the_report_is_written_with_the_name_as_written(named):
    data, root = named
    pdf = write_report(data, root / "report.pdf").path
    assert pdf.stat().st_size > 0
    if shutil.which("pdftotext"):  # poppler-utils, from .ci/install-system-packages
        assert NAME in " ".join(pdf_text(pdf).split())


def test_a_name_of_ten_thousand_characters_is_drawn_as_its_start(named):
    """A hostile service's 10,000-character name: drawn whole and wrapped it cost seconds a
    figure (minutes a report); a line is drawn up to MAX_LINE_CHARS, then an ellipsis."""
    from analysis.figure_style import MAX_LINE_CHARS

    data, _ = named
    r = next(e.analysis for e in data.entries if e.analysis is not None)
    long_name = "S" * 10_000
    texts = _drawn(F.displacement_figure(dataclasses.replace(r, display_name=long_name)))
    title = next(t for t in texts if t.startswith("S" * 100))
    assert max(len(line) for line in title.split("\n")) <= MAX_LINE_CHARS
    assert title.endswith("…") or "…" in title

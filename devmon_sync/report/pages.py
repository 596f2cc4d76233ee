"""The report's pages: each a function returning a matplotlib ``Figure`` (A4) and its heading.

``plan_pages`` lays the whole report out before anything is drawn (text is measured, tables
are split over pages), so the page count, the contents on the cover and the page numbers
are known up front; ``render.write_report`` then draws and saves one page at a time.  Plots
are the builders of ``analysis.figures`` (the GUI's), built at A4 size with their layout
confined to the page's content area; text pages are flowed blocks of ``layout``.

Pages: cover (with the title block and the contents, continued at the top of the summary
or on pages of their own when long); summary (two tables, continued as needed); alarms;
the engineer's comments; the point register and each point's change over the last 7 and 30
days; per analysed rover: displacement,
trajectory with its numbers, velocity with the data-quality notes, inverse velocity where
relevant (a supported forecast, or a significant acceleration); a site plan per site
(its table of points continued over pages for a large site); methods.  Every list of
devices follows the report's order (``model.report_order``: by point number).

Size: about 950 lines, one function per kind of page, kept together because they share the
page plan (``plan_pages``) and its measured layout; the text they format is in ``tables``,
``register`` and ``front_matter``, the page machinery in ``layout``.
"""

from __future__ import annotations

import inspect
import sys
from dataclasses import dataclass, field
from typing import Callable

import matplotlib
import numpy as np
import pyproj
from matplotlib.figure import Figure

from analysis import (alarms, cleaning, figures, forecast, forecast_linear, inverse_velocity,
                      pipeline, plan_figure, window_noise)
from analysis.alarms import quantity_words
from analysis.plan_figure import confidence_scale, error_ellipse
from analysis.pipeline import plus_minus
from analysis.projections import LATLON_CRS
from devmon_sync.paths import file_name_part
from devmon_sync.report import front_matter, layout, register, tables
from devmon_sync.report.layout import (CONTENT_BOTTOM_IN, CONTENT_TOP_IN, CONTENT_WIDTH_IN,
                                       MARGIN_IN, PAGE_IN, SIZE, Block, Callout, Heading,
                                       KeyValues, Paragraph, Table)
from devmon_sync.report.model import DeviceEntry, ReportData, SitePlan, utc_text
from devmon_sync.report.tables import Column, Row

#: A rover's plots need at least this much height under the text that shares their page.
MIN_FIGURE_IN = 4.3
#: The inverse-velocity page is shown for an acceleration this many sigmas above zero.
ACCELERATION_SIGMAS = 2.0
PLAN_CONFIDENCE = 0.95  # plan_view_figure's default ellipse
TEXT_GAP_IN = 0.2  # between a figure (its legend) and the text under it
COVER_DEVICES = 6  # more are counted on the cover, so the contents stay on it


@dataclass
class PageSpec:
    """One page to draw: ``section`` (contents, ``ReportResult``), ``kind``, the small
    ``label`` over its heading, ``draw()`` -> (Figure, heading), and ``png_name`` when the
    page is also a figure of its own (``--png-dir``); ``blocks``: the text blocks it draws
    (its tables among them), so they can be looked at without drawing the page."""

    section: str
    kind: str
    label: str
    draw: Callable[[], tuple[Figure, str]]
    png_name: str | None = None
    blocks: list[Block] = field(default_factory=list)


@dataclass
class Contents:
    """Sections and their first pages, filled in once every page is planned."""

    entries: list[tuple[str, int]] = field(default_factory=list)


def file_part(text: str) -> str:
    """``text`` made safe for a file name (letters, digits, ``.``, ``_``, ``-``) and
    bounded: ``devmon_sync.paths.file_name_part``."""
    return file_name_part(text)


# ----------------------------------------------------------------------------- planning

def plan_pages(data: ReportData) -> list[PageSpec]:
    """Every page of the report, in order (nothing is drawn yet)."""
    contents = Contents()
    specs = alarm_pages(data)
    specs += comments_pages(data)
    specs += register_pages(data)
    for i, entry in enumerate(data.analysed, 1):
        specs += device_pages(data, entry, i, len(data.analysed))
    for plan in data.plans:
        specs += plan_specs(data, plan)
    specs += methods_pages(data)
    specs = front_specs(data, contents, 1 + len({s.section for s in specs})) + specs
    names: set[str] = set()
    for spec in specs:  # two sites of one name: their plans still get a file each
        if spec.png_name:
            stem, n = spec.png_name.removesuffix(".png"), 2
            while spec.png_name in names:
                spec.png_name, n = f"{stem}-{n}.png", n + 1
            names.add(spec.png_name)
    seen: set[str] = set()
    for page, spec in enumerate(specs, 1):
        if spec.section not in seen:
            seen.add(spec.section)
            contents.entries.append((spec.section, page))
    return specs


def _flow_specs(blocks: list[Block], section: str, kind: str, label: str, heading: str,
                png_stem: str | None = None) -> list[PageSpec]:
    """Text pages of ``blocks``, continued over as many pages as they need."""
    pages = layout.paginate(blocks)
    specs = []
    for i, page in enumerate(pages):
        head = heading if i == 0 else f"{heading} (continued)"
        png = None if png_stem is None else (f"{png_stem}.png" if i == 0
                                             else f"{png_stem}-{i + 1}.png")
        specs.append(PageSpec(section, kind, label,
                              lambda page=page, head=head: _flow_page(page, head), png,
                              page.blocks))
    return specs


def _flow_page(page: layout.FlowPage, heading: str) -> tuple[Figure, str]:
    fig = layout.new_page()
    layout.draw_flow(fig, page)
    return fig, heading


# ----------------------------------------------------------------------------- cover

COVER_TITLE_TOP_IN = 1.55
COVER_TITLE_LINES = 3
COVER_TITLE_MIN_PT = 16.0  # a longer title is set smaller, down to this, to fit its lines


#: The contents' lines the cover has no room for go at the top of the summary when they
#: take at most this much of its page (a few lines), else on pages of their own.
CONTENTS_IN_SUMMARY_IN = 2.0


def front_specs(data: ReportData, contents: Contents, sections: int) -> list[PageSpec]:
    """The cover and the summary, with every section in the contents whatever the report's
    length (never "more in the summary" with nothing there): the contents the cover has no
    room for (a report of many rovers, or with a long title, a full title block and
    warnings) go on at the top of the summary when they are a few lines, else on pages of
    their own before it.  ``sections``: how many the contents list (the summary's among
    them; their pages are filled in once every page is planned)."""
    cover, rest = cover_specs(data, contents, sections)
    tail = [b for page in rest for b in page.blocks if not _is_contents_heading(b)]
    if tail and all(isinstance(b, _ContentsBlock) for b in tail) \
            and _text_height(tail) <= CONTENTS_IN_SUMMARY_IN:
        return cover + summary_pages(data, [Heading("Contents (continued)",
                                                    space_before_in=0.0), *tail,
                                            layout.Spacer(0.25)])
    for page in rest:
        page.blocks = [b for b in page.blocks if not _is_contents_heading(b)]
        heading = ("Contents" if isinstance(page.blocks[0], _ContentsBlock)
                   else f"{data.title} (continued)")
        cover.append(PageSpec("Cover", "cover", "Report",
                              lambda page=page, heading=heading: _flow_page(page, heading),
                              blocks=page.blocks))
    return cover + summary_pages(data)


def _is_contents_heading(block: Block) -> bool:
    """The cover's "Contents" heading (moved off the cover with the list it heads)."""
    return isinstance(block, Heading) and block.text == "Contents"


def cover_specs(data: ReportData, contents: Contents, sections: int
                ) -> tuple[list[PageSpec], list[layout.FlowPage]]:
    """The cover, and what it has no room for: its contents listing ``sections`` sections
    (their pages filled in once every page is planned), split between entries."""
    title, size, subtitle, top = _cover_heading(data)
    details = data.options.details
    blocks: list[Block] = [
        front_matter.TitleBlock(front_matter.title_values(details, data.generated_at.date())),
        KeyValues(_cover_facts(data), key_width_in=1.85, space_before_in=0.2)]
    if data.warnings:
        blocks.append(Callout("Check before relying on this report", list(data.warnings)))
    blocks += [Heading("Alarm status"), Paragraph(_alarm_status(data)),
               Heading("Contents"), _ContentsBlock(contents, 0, sections)]
    pages = layout.paginate(blocks, first_top_in=top)
    cover = pages[0]

    def draw_cover() -> tuple[Figure, str]:
        fig = layout.new_page()
        layout.put_rect(fig, 0, 0, PAGE_IN[0], 0.16, fill=layout.ACCENT)
        y = COVER_TITLE_TOP_IN
        for line in title:
            layout.put_text(fig, MARGIN_IN, y, line, size, weight="bold", gid="title")
            y += layout.line_height_in(size)
        y += 0.08
        y += layout.put_lines(fig, MARGIN_IN, y, subtitle, SIZE["subtitle"],
                              color=layout.MUTED)
        layout.put_rule(fig, y + 0.15, color=layout.ACCENT, lw=1.2)
        layout.draw_flow(fig, cover, top_in=top)
        return fig, ""

    return [PageSpec("Cover", "cover", "Report", draw_cover, blocks=cover.blocks)], pages[1:]


def _cover_heading(data: ReportData) -> tuple[list[str], float, list[str], float]:
    """The cover's title (lines and size: smaller for a long one, so that it fits
    ``COVER_TITLE_LINES``), its subtitle's lines, and where the text under them starts."""
    title, size = layout.fit_lines(data.title, CONTENT_WIDTH_IN, SIZE["title"], "bold",
                                   max_lines=COVER_TITLE_LINES, min_size=COVER_TITLE_MIN_PT)
    scope = data.scope.describe()
    subtitle = layout.wrap(f"{scope[0].upper()}{scope[1:]}: {_rover_count(data)}",
                           CONTENT_WIDTH_IN, SIZE["subtitle"])
    top = (COVER_TITLE_TOP_IN + len(title) * layout.line_height_in(size) + 0.08
           + len(subtitle) * layout.line_height_in(SIZE["subtitle"]) + 0.35)
    return title, size, subtitle, top


def _rover_count(data: ReportData) -> str:
    n = len(data.entries)
    rovers = len(data.analysed)
    text = f"{rovers} GNSS rover{'s' if rovers != 1 else ''} analysed"
    if n > rovers:
        text += f" of {n} device{'s' if n != 1 else ''}"
    return text


def _cover_facts(data: ReportData) -> list[tuple[str, str]]:
    o = data.options
    first, last = data.span()
    scope = data.scope
    where = (f"{scope.kind} {scope.place.name} ({scope.place.uuid})" if scope.place
             else "devices chosen by serial number")
    names = [e.label for e in data.entries]
    devices = ", ".join(names) if len(names) <= COVER_DEVICES else \
        f"{len(names)} devices, each listed in the summary"
    if scope.membership_short:  # the summary names them
        devices = (f"{', '.join(names)}; {scope.membership_short}"
                   if len(names) <= COVER_DEVICES else
                   f"{len(names)} {scope.membership_short}, each listed in the summary")
    requested = ("the whole record" if not (o.start or o.end) else
                 f"requested {utc_text(o.start, 'the first epoch')} to "
                 f"{utc_text(o.end, 'the last epoch')}")
    frame = data.analyses[0].frame
    method = tables.METHOD_NAMES.get(o.method, o.method)
    newest = data.newest_epoch
    return [
        ("Scope", where),
        ("Devices", devices),
        ("Period", f"{utc_text(first)} to {utc_text(last)} ({requested})"),
        ("Frame", f"{frame.label}, {frame.height_type} heights"),
        ("Reference epoch", data.analyses[0].options.reference.describe()),
        ("Velocity estimator", f"{method} (current velocity: least squares over the last "
                               f"{pipeline.RECENT_WINDOW_DAYS:g} days; 2D and 3D rates are "
                               f"lengths corrected for the components' noise, zero when "
                               f"within it)"),
        ("Report made", utc_text(data.generated_at)),
        ("Last synced", f"{utc_text(data.last_synced, 'never')}: when the mirror last "
                        f"fetched data of these rovers from the service"),
        ("Newest epoch", f"{utc_text(newest, 'none')} (newest data of these rovers in "
                         f"the mirror)"),
        ("Mirror", data.mirror_path),
    ]


def _alarm_status(data: ReportData) -> str:
    reached = [e for e in data.analysed if e.analysis.alarm is not None
               and e.analysis.alarm.overall]
    with_levels = [e for e in data.analysed if e.analysis.alarm is not None]
    if not with_levels:
        return ("No alarm levels are set for these rovers (set them with `devmon alarms`); "
                "the summary lists their displacements and velocities.")
    parts = [f"{e.label}: {e.analysis.alarm.overall} "
             f"({quantity_words(e.analysis.alarm.overall_quantity)})"
             for e in reached]
    below = len(with_levels) - len(reached)
    text = ("Levels reached: " + "; ".join(parts) + "." if parts
            else "No rover has reached an alarm level.")
    if reached and below:
        text += f" {below} other rover{'s' if below != 1 else ''} below their levels."
    unset = len(data.analysed) - len(with_levels)
    if unset:
        text += f" {unset} rover{'s' if unset != 1 else ''} without alarm levels."
    return text


class _ContentsBlock(Block):
    """Entries ``first`` to ``first + count - 1`` of the contents (the cover's own entry
    not counted), with dotted leaders to the page numbers (known only once every page is
    planned, so they are read when drawn).  It splits between entries, the part that stays
    saying where the list goes on."""

    space_before_in = 0.04
    STEP_IN = layout.line_height_in(SIZE["body"]) * 1.08

    def __init__(self, contents: Contents, first: int, count: int, more: bool = False):
        self.contents = contents  # filled by plan_pages before the cover is drawn
        self.first, self.count, self.more = first, count, more

    def height(self, width_in: float) -> float:
        return (self.count + self.more) * self.STEP_IN

    def split(self, room_in: float, width_in: float):
        fit = int((room_in + 1e-9) // self.STEP_IN) - 1  # a line for "continued"
        if fit < 2 or fit >= self.count:
            return None
        return (_ContentsBlock(self.contents, self.first, fit, more=True),
                _ContentsBlock(self.contents, self.first + fit, self.count - fit))

    def draw(self, fig, x_in, y_in, width_in) -> None:
        step = self.STEP_IN
        entries = self.contents.entries[1:][self.first:self.first + self.count]
        for i, (title, page) in enumerate(entries):
            y = y_in + i * step
            text = layout.fit(title, width_in - 0.8, SIZE["body"])
            layout.put_text(fig, x_in, y, text, SIZE["body"])
            dots_from = x_in + layout.text_width_in(text, SIZE["body"]) + 0.08
            dots = "." * max(0, int((x_in + width_in - 0.35 - dots_from)
                                    / layout.text_width_in(".", SIZE["body"])) - 1)
            layout.put_text(fig, dots_from, y, dots, SIZE["body"], color="#9A9A9A")
            layout.put_text(fig, x_in + width_in, y, str(page), SIZE["body"], ha="right")
        if self.more:
            layout.put_text(fig, x_in, y_in + len(entries) * step,
                            "(continued on the next page)", SIZE["body"], style="italic",
                            color=layout.MUTED)


# ----------------------------------------------------------------------------- summary

SUMMARY_NOTE = (
    "Displacements (E, N, U and the 2D and 3D lengths) are from the reference to the end of "
    "the period (a linear fit over the last day, so one noisy epoch does not set them). The "
    "3D velocity is the least-squares velocity over the last {recent:g} days; acceleration "
    "is along the direction of motion; uncertainties are 1σ. Epochs received / expected "
    "counts the epochs in the period against the rover's sampling period. Rows are coloured "
    "by the alarm level reached, in the colours of the plots.")


def summary_pages(data: ReportData, lead: list[Block] | None = None) -> list[PageSpec]:
    """The summary's tables, after ``lead`` (the end of the contents, when the cover had no
    room for it)."""
    method = tables.METHOD_NAMES.get(data.options.method, data.options.method)
    frame = data.analyses[0].frame
    first, last = data.span()
    blocks: list[Block] = [
        *(lead or []),
        Paragraph(f"{_rover_count(data)}; period {utc_text(first)} to {utc_text(last)}; "
                  f"{frame.label}, reference {data.analyses[0].options.reference.describe()}.",
                  color=layout.MUTED, space_before_in=0.0),
        Heading("Displacement, current velocity and alarm level"),
        Table(tables.summary_columns(data.analysed), tables.summary_rows(data), size=7.0),
        _LevelKey(data),
        Paragraph(SUMMARY_NOTE.format(recent=pipeline.RECENT_WINDOW_DAYS), size=SIZE["small"],
                  color=layout.MUTED, space_before_in=0.08),
        *[Paragraph(note, size=SIZE["small"], color=layout.MUTED, space_before_in=0.04)
          for note in (data.scope.membership, tables.deleted_sensor_note(data)) if note],
        Heading(f"Velocity over the period ({method})"),
        Table(tables.VELOCITY_COLUMNS, tables.velocity_rows(data)),
        Paragraph(f"Velocities of each component over the whole period by {method}, ± 1σ. "
                  f"Along azimuth: positive towards the device's azimuth, where one is "
                  f"set. Failure forecast: the inverse-velocity forecast, where the "
                  f"data support one (see the rover's pages).", size=SIZE["small"],
                  color=layout.MUTED, space_before_in=0.08),
    ]
    return _flow_specs(blocks, "Summary", "summary", "Summary", "Summary", "summary")


class _LevelKey(Block):
    """The alarm level colours used in the tables, as swatches."""

    space_before_in = 0.08

    def __init__(self, data: ReportData):
        seen: dict[str, str] = {}
        for e in data.analysed:
            a = e.analysis
            if a.alarm is None:
                continue
            for quantity in a.alarm.keys.values():
                for rank, name in enumerate(quantity.levels.names):
                    seen.setdefault(name, figures.level_colour(name, rank))
        self.items = list(seen.items())

    def height(self, width_in: float) -> float:
        return layout.line_height_in(SIZE["small"]) if self.items else 0.0

    def draw(self, fig, x_in, y_in, width_in) -> None:
        if not self.items:
            return
        x = x_in
        layout.put_text(fig, x, y_in, "Alarm levels:", SIZE["small"], color=layout.MUTED)
        x += layout.text_width_in("Alarm levels:", SIZE["small"]) + 0.12
        for name, colour in self.items:
            layout.put_rect(fig, x, y_in + 0.01, 0.22, 0.09, fill=layout._tint(colour, 0.2))
            layout.put_rect(fig, x, y_in + 0.01, 0.04, 0.09, fill=colour)
            layout.put_text(fig, x + 0.28, y_in, name, SIZE["small"])
            x += 0.28 + layout.text_width_in(name, SIZE["small"]) + 0.25


# ----------------------------------------------------------------------------- comments

def comments_pages(data: ReportData) -> list[PageSpec]:
    """The engineer's comments (given text, else a ruled box to fill in), signed."""
    details = data.options.details
    blocks = front_matter.comment_blocks(details) + front_matter.signature_line(details)
    return _flow_specs(blocks, "Engineer's comments", "comments", "Comments",
                       "Engineer's comments")


# ----------------------------------------------------------------------------- points

CHANGE_NOTE = (
    "How far each point moved over the last 7 and 30 days of the period, and since the "
    "reference: 2D is the length of the horizontal change (corrected for the components' "
    "noise, zero when within it), vertical is the change of height (up positive). Each end "
    "is the position of a line fitted over the trailing day, as for the alarm levels, so "
    "one noisy epoch does not set it; ± 1σ allows for the noise measured on the series. "
    "Rows are coloured by the alarm level reached.")


def register_pages(data: ReportData) -> list[PageSpec]:
    """The point register (per site, in its plan's frame) and the change of each point
    over the last 7 and 30 days."""
    blocks: list[Block] = []
    plans = list(data.plans) + [None]
    for plan in plans:
        rows = register.register_rows(data, plan)
        if not rows:
            continue
        title = (f"{plan.site_name} ({plan.frame_label})" if plan is not None
                 else "Points on no plan")
        blocks += [Heading(title, space_before_in=0.0 if not blocks else 0.16),
                   Table(register.register_columns(plan), rows, size=7.0)]
    blocks.append(Paragraph(
        "Position: the median of the point's last day of epochs (the site plan's); heights "
        "ellipsoidal. Data since: the first epoch of the point in the mirror (the mirror "
        "may start after the installation). Antenna, base station and sampling period: the "
        "service's GNSS configuration of the device.", size=SIZE["small"],
        color=layout.MUTED, space_before_in=0.08))
    blocks += [Heading("Change over the last 7 and 30 days"),
               Table(register.change_columns(tables.light_directions(data.analysed)),
                     register.change_rows(data), size=7.0),
               Paragraph(CHANGE_NOTE, size=SIZE["small"], color=layout.MUTED,
                         space_before_in=0.08)]
    blocks += [Paragraph(n, size=SIZE["small"], color=layout.MUTED, space_before_in=0.04)
               for n in register.change_notes(data)]
    return _flow_specs(blocks, "Point register", "register", "Points",
                       "Point register and recent change", "register")


# ----------------------------------------------------------------------------- alarms

def alarm_pages(data: ReportData) -> list[PageSpec]:
    """The alarm section, where any analysed rover has displacement or velocity levels: the
    status, the rule a level is judged by (stated once), the history of every level
    reached in the period, and the levels in force with where each is set."""
    if not any(tables.gnss_levels(e) for e in data.analysed):
        return []
    blocks: list[Block] = [Paragraph(_alarm_status(data), space_before_in=0.0)]
    blocks += _rule_blocks(data)
    blocks.append(Heading("Alarm history"))
    first, last = data.span()
    rows = tables.history_rows(data)
    quiet = tables.quiet_rovers(data)
    period = f"between {utc_text(first)} and {utc_text(last)}"
    if not rows:
        blocks.append(Paragraph(f"No level was reached {period}."))
    else:
        blocks.append(Table(tables.HISTORY_COLUMNS, rows, size=7.0, space_before_in=0.04,
                            widths_in=tuple(c.width * CONTENT_WIDTH_IN
                                            for c in tables.HISTORY_COLUMNS)))
        notes = [f"Each level reached {period}: first reached is the first epoch it counted "
                 f"as reached (held for the rule's minimum duration), last reached the last "
                 f"epoch it was still exceeded; still reached: at the end of the period. "
                 f"Peak: the largest value while reached. Episodes: separate periods "
                 f"reached."]
        if quiet:
            notes.append(f"No level reached: {_names(quiet)}.")
        blocks += [Paragraph(n, size=SIZE["small"], color=layout.MUTED,
                             space_before_in=0.08) for n in notes]
    blocks.append(Heading("Levels in force"))
    blocks.append(Table(tables.LEVEL_COLUMNS, tables.level_rows(data), space_before_in=0.04))
    unset = tables.rovers_without_levels(data)
    notes = ["Set on: the device itself, else its group's, else its site's (`devmon alarms "
             "--device SERIAL` shows a device's). Displacement levels apply to the "
             "displacement from the reference, velocity levels to the current velocity; "
             "without a component to the 3D length, 2D to the horizontal length, vertical "
             "to the size of the height change, upward and downward to heave or settlement "
             "only, along-slope and cross-slope to the parts along and across the device "
             "azimuth."]
    if unset:
        notes.append(f"No displacement or velocity levels set: {_names(unset)}.")
    blocks += [Paragraph(n, size=SIZE["small"], color=layout.MUTED, space_before_in=0.08)
               for n in notes]
    return _flow_specs(blocks, "Alarms", "alarms", "Alarms", "Alarm status and history",
                       "alarms")


def _rule_blocks(data: ReportData) -> list[Block]:
    """The alarm rule, once (one per rover only if the rovers' rules differ)."""
    rules: dict[str, list[DeviceEntry]] = {}
    for e in data.analysed:
        if e.analysis.alarm is not None:
            rules.setdefault(e.analysis.alarm.rule.describe(), []).append(e)
    lead = ("The value's uncertainty allows for the noise measured on the series itself; "
            "a level clears only once the value itself has been under it for as long, so a "
            "point just past a level does not flap in and out of it, and "
            "one noisy epoch or outlier never reaches a level.")
    if len(rules) <= 1:
        rule = next(iter(rules), None)
        return [Paragraph(f"Alarm rule: a level counts as reached when {rule}." if rule else
                          "Alarm rule: no level could be evaluated.", weight="bold",
                          space_before_in=0.1),
                Paragraph(lead, size=SIZE["small"], color=layout.MUTED)]
    return [Paragraph("Alarm rule: a level counts as reached when (per rover):",
                      weight="bold", space_before_in=0.1),
            KeyValues([(_names(entries), f"{rule}") for rule, entries in rules.items()],
                      key_width_in=1.85, size=SIZE["small"]),
            Paragraph(lead, size=SIZE["small"], color=layout.MUTED)]


def _names(entries: list[DeviceEntry], most: int = 30) -> str:
    names = [e.label for e in entries]
    return ", ".join(names[:most]) + (f" and {len(names) - most} more" if len(names) > most
                                      else "")


# ----------------------------------------------------------------------------- a rover

def _relevant_inverse_velocity(entry: DeviceEntry) -> bool:
    """A supported failure forecast, or an acceleration significantly above zero: then the
    inverse-velocity plot says something."""
    a = entry.analysis
    if a.forecast is not None and a.forecast.supported:
        return True
    if a.linear_forecast is not None and a.linear_forecast.warns:
        return True
    acc = a.acceleration
    return bool(acc is not None and acc.acceleration_mm_per_day2 > 0
                and acc.acceleration_mm_per_day2 > ACCELERATION_SIGMAS * acc.sigma_mm_per_day2)


def device_pages(data: ReportData, entry: DeviceEntry, index: int, count: int
                 ) -> list[PageSpec]:
    """The pages of one analysed rover."""
    a = entry.analysis
    section = entry.label
    label = f"Rover {index} of {count}"
    stem = file_part(entry.serial_number)
    specs = [PageSpec(section, "device", label, lambda: displacement_page(entry),
                      f"{stem}_displacement.png")]
    specs += _figure_with_text(section, label, f"{stem}_trajectory.png",
                               lambda: figures.trajectory_figure(a, figsize=PAGE_IN),
                               _numbers_blocks(entry))
    specs += _figure_with_text(section, label, f"{stem}_velocity.png",
                               lambda: figures.velocity_figure(a, figsize=PAGE_IN),
                               _quality_blocks(entry))
    if _relevant_inverse_velocity(entry):
        specs += _figure_with_text(section, label, f"{stem}_inverse_velocity.png",
                                   lambda: figures.inverse_velocity_figure(a, figsize=PAGE_IN),
                                   _forecast_blocks(entry))
    return specs


def displacement_page(entry: DeviceEntry) -> tuple[Figure, str]:
    """East, north, up and the 3D length against time (and each other component an alarm
    level is set on: horizontal, along, across), with the trend, steps, gaps, the outliers
    removed and the displacement alarm levels on the panels they judge."""
    panels = figures.panels_with_levels(entry.analysis, ("east", "north", "up", "3d"))
    fig = figures.displacement_figure(entry.analysis, panels, figsize=PAGE_IN)
    return fig, layout.adopt_builder_figure(fig)


def _figure_with_text(section: str, label: str, png: str, build: Callable[[], Figure],
                      blocks: list[Block], kind: str = "device",
                      min_figure_in: float = MIN_FIGURE_IN) -> list[PageSpec]:
    """A builder's figure over the upper part of a page and ``blocks`` under it: the
    figure takes what the text leaves, at least ``min_figure_in``; text that does not fit
    continues on a page of its own."""
    fig_bottom = max(CONTENT_TOP_IN + min_figure_in,
                     CONTENT_BOTTOM_IN - _text_height(blocks) - TEXT_GAP_IN)
    pages = layout.paginate(blocks, first_top_in=fig_bottom + TEXT_GAP_IN)
    first = pages[0]  # may be empty: then all the text continues on the next page

    def draw() -> tuple[Figure, str]:
        fig = build()
        heading = layout.adopt_builder_figure(fig, bottom_in=fig_bottom)
        layout.draw_flow(fig, first, top_in=fig_bottom + TEXT_GAP_IN)
        return fig, heading

    specs = [PageSpec(section, kind, label, draw, png, first.blocks)]
    for page in pages[1:]:
        specs.append(PageSpec(section, kind, label,
                              lambda page=page: _flow_page(page, f"{section} (continued)"),
                              blocks=page.blocks))
    return specs


def _text_height(blocks: list[Block]) -> float:
    """Height of blocks one under the other (the first one's space before is not used)."""
    return sum(b.height(CONTENT_WIDTH_IN) + (b.space_before_in if i else 0.0)
               for i, b in enumerate(blocks))


def _numbers_blocks(entry: DeviceEntry) -> list[Block]:
    a = entry.analysis
    method = tables.METHOD_NAMES.get(a.options.method, a.options.method)
    return [Heading(f"Displacement and velocity ({method}; {a.frame.label})",
                    space_before_in=0.0),
            Table(tables.NUMBER_COLUMNS, tables.number_rows(a)),
            KeyValues(tables.key_facts(a), key_width_in=1.3, size=SIZE["small"],
                      space_before_in=0.12)]


def _quality_blocks(entry: DeviceEntry) -> list[Block]:
    blocks: list[Block] = [Heading("Data quality", space_before_in=0.0)]
    notes = tables.quality_notes(entry.analysis)
    notes += [f"{text[0].upper()}{text[1:]}: the service no longer lists it; its data kept "
              f"in the mirror are used here, and devmon no longer fetches it."
              for text in tables.deleted_sensor_texts(entry)]
    blocks += [Paragraph(n, size=SIZE["small"], bullet=True, space_before_in=0.03)
               for n in notes]
    return blocks


def _forecast_blocks(entry: DeviceEntry) -> list[Block]:
    a = entry.analysis
    s = a.summary()
    f = s["forecast"]
    if f and f["supported"]:
        lo, hi = f["interval"]
        text = (f"Voight's law fitted to the displacement along the motion since the onset "
                f"of acceleration (alpha {f['alpha']:.2f}) puts the inverse velocity at zero "
                f"at {tables.iso_text(f['failure_time'])} UTC "
                f"({100 * f['confidence']:g} % interval {tables.iso_text(lo)} to "
                f"{tables.iso_text(hi)}; R² {f['r2']:.2f}).")
    elif f:
        text = f"No failure forecast: {f['reason']}"
    else:
        text = "No failure forecast: the inverse velocity could not be computed."
    acc = s["acceleration_mm_per_day2"]
    blocks: list[Block] = [Heading("Failure forecast", space_before_in=0.0), Paragraph(text)]
    blocks += _linear_forecast_blocks(s)
    if acc:
        blocks.append(Paragraph(f"Acceleration along the motion over the period: "
                                f"{plus_minus(acc, 4)} mm/day² (1σ)."))
    blocks.append(Paragraph(
        "The forecast assumes that the acceleration goes on as it did (Fukuzono 1985; "
        "Voight 1989). It is one input to an engineer's judgement, never the only one: "
        "check it against the site, the other instruments and the trend of the coming "
        "days.", size=SIZE["small"], color=layout.MUTED, style="italic"))
    return blocks


def _linear_forecast_blocks(s: dict) -> list[Block]:
    """The classic linear inverse-velocity forecast beside the Voight fit: its statement
    (a date, "imminent", or "accelerating; failure possible within N days") and whether
    the two agree."""
    linear = s.get("linear_forecast")
    if not linear:
        return []
    return [Paragraph(f"Linear inverse velocity (Fukuzono 1985): {linear['statement']}"),
            Paragraph(f"The two forecasts: {linear['agreement']['text']}", weight="bold")]


# ----------------------------------------------------------------------------- site plan

PLAN_COLUMNS = (
    Column("device", "Rover", 0.26, "left"),
    Column("x", "{x}", 0.13), Column("y", "{y}", 0.13),  # SitePlan.coordinate_headers
    Column("east", "E\nmm", 0.08), Column("north", "N\nmm", 0.08),
    Column("horizontal", "2D\nmm", 0.08),
    Column("ellipse", "95 % ellipse\nsemi-axes mm", 0.12),
    Column("alarm", "Alarm\nlevel", 0.12, "center"),
)


def plan_rows(data: ReportData, plan: SitePlan) -> list[Row]:
    """One row per rover on the plan: position, the horizontal displacement drawn (the
    analysis' end displacement, as the arrows) and its error ellipse."""
    by_sn = {e.serial_number: e for e in data.analysed}
    rows = []
    for sn, p in zip(plan.serial_numbers, plan.points):
        e = by_sn[sn]
        if np.isfinite(p.sigma_east_mm) and np.isfinite(p.sigma_north_mm):
            major, minor, _ = error_ellipse(p.sigma_east_mm, p.sigma_north_mm, p.correlation,
                                            PLAN_CONFIDENCE)
            ellipse = f"{major / 2:.1f} × {minor / 2:.1f}"
        else:
            ellipse = "-"
        rows.append(Row(sn, {
            "device": tables.device_cell(e), "x": f"{p.easting_m:.1f}",
            "y": f"{p.northing_m:.1f}", "east": f"{p.d_east_mm:+.1f}",
            "north": f"{p.d_north_mm:+.1f}",
            "horizontal": f"{np.hypot(p.d_east_mm, p.d_north_mm):.1f}",
            "ellipse": ellipse, "alarm": tables.alarm_text(e.analysis)},
            p.alarm_level, tables.alarm_rank(e.analysis)))
    return rows


def plan_specs(data: ReportData, plan: SitePlan) -> list[PageSpec]:
    """The site's rovers at their latest positions with their displacement as arrows and
    error ellipses, and the numbers drawn; under the plan the table of its points, whose
    rows continue on the next page when the site has more than the page holds.  A table
    that cannot fit under the plan leaves it the whole page (many points: their labels
    need the room) and starts on the next."""
    blocks = _plan_blocks(data, plan)
    fits = _text_height(blocks) <= CONTENT_BOTTOM_IN - CONTENT_TOP_IN - MIN_FIGURE_IN \
        - TEXT_GAP_IN

    def build() -> Figure:
        return plan_figure.plan_view_figure(list(plan.points), frame_label=plan.frame_label,
                                            axis_names=plan.axis_names,
                                            title=f"{plan.site_name}: horizontal "
                                                  f"displacement", figsize=PAGE_IN)

    return _figure_with_text(f"Site plan: {plan.site_name}", "Site plan",
                             f"site-{file_part(plan.site_name)}_plan.png", build, blocks,
                             kind="plan", min_figure_in=MIN_FIGURE_IN if fits
                             else CONTENT_BOTTOM_IN - CONTENT_TOP_IN - TEXT_GAP_IN)


def _plan_blocks(data: ReportData, plan: SitePlan) -> list[Block]:
    """The plan's table of points and its notes."""
    x_name, y_name = plan.coordinate_headers  # the register's, naming the site's grid
    columns = tuple(Column(c.key, c.header.format(x=x_name, y=y_name), c.width, c.align)
                    for c in PLAN_COLUMNS)
    notes = [f"Positions: the median of each rover's last day of epochs in the mirror. "
             f"Arrows: the horizontal displacement at the end of the period (the summary's E "
             f"and N); ellipses: its {100 * PLAN_CONFIDENCE:g} % confidence region "
             f"({confidence_scale(PLAN_CONFIDENCE):.3f}σ) from the scatter of the last day "
             f"(white noise: a lower bound)."]
    if plan.unplaced:
        notes.append(f"Not drawn (no position known): {', '.join(plan.unplaced)}.")
    blocks: list[Block] = [Table(columns, plan_rows(data, plan), space_before_in=0.0)]
    blocks += [Paragraph(n, size=SIZE["small"], color=layout.MUTED, space_before_in=0.08)
               for n in notes]
    return blocks


# ----------------------------------------------------------------------------- methods

def _default(function, name: str):
    """A keyword default of an analysis function: the report states the value in use,
    never a copy of it."""
    return inspect.signature(function).parameters[name].default


def methods_pages(data: ReportData) -> list[PageSpec]:
    o = data.options
    a0 = data.analyses[0]
    frame = a0.frame
    q = a0.options.quality
    blocks: list[Block] = [Heading("Coordinates", space_before_in=0.0)]
    if frame.crs is None:
        blocks.append(Paragraph(
            f"Positions are the service's GNSS solutions: latitude and longitude in degrees "
            f"({LATLON_CRS}) with ellipsoidal heights. Displacements are local east, north "
            f"and up (ENU, metres converted to millimetres) in the topocentric frame at each "
            f"rover's reference position; heights are ellipsoidal."))
    else:
        blocks.append(Paragraph(
            f"Positions are the service's GNSS solutions ({LATLON_CRS}), projected to "
            f"{frame.label} ({frame.crs.name}). Displacements are grid easting and northing "
            f"and {frame.height_type} height, in millimetres. Grid distances differ from "
            f"ground distances by the combined factor, and grid north from true north by the "
            f"meridian convergence, both listed on each rover's page."))
    blocks.append(Paragraph(
        f"Reference (zero of displacement): {a0.options.reference.describe()}. Total "
        f"displacement: the value at the last epoch of a linear fit over the last "
        f"{pipeline.END_WINDOW_DAYS * 24:g} hours of data. Uncertainties are 1σ unless "
        f"stated otherwise."))
    blocks.append(Heading("Estimators"))
    if o.method == "midas":
        blocks.append(Paragraph(
            "Velocity over the period: MIDAS (Blewitt et al. 2016, J. Geophys. Res. 121, "
            "2054-2068), the median of the slopes of pairs of epochs one year apart (half the "
            "longest step-free stretch for shorter records), pairs never spanning a known "
            "step; robust to outliers, unknown steps and seasonal motion. Its uncertainty is "
            "the published conservative formula, 1σ."))
    else:
        blocks.append(Paragraph(
            f"Velocity over the period: least squares of offset and rate, with an offset at "
            f"each known step, and annual and semiannual terms from "
            f"{pipeline.SEASONAL_MIN_SPAN_YR:g} years of data on. Noise model: white plus "
            f"flicker noise fitted to the residuals' semivariogram (Williams et al. 2004) and "
            f"propagated exactly to the rate, so the 1σ uncertainty allows for the "
            f"time-correlated noise of GNSS series."))
    blocks.append(Paragraph(
        f"Current velocity: least squares over the last {pipeline.RECENT_WINDOW_DAYS:g} days, "
        f"per component and as the length of the 3D vector (each component corrected for its "
        f"own noise, so none hides another's motion). Acceleration: a quadratic fitted "
        f"along the direction of motion with the same white plus flicker noise model. "
        f"Inverse velocity (the figure): least-squares velocities over "
        f"{pipeline.INVERSE_VELOCITY_SMOOTHING_DAYS:g}-day windows (longer on sparse data, "
        f"so that each holds {inverse_velocity.MIN_WINDOW_POINTS} readings)."))
    blocks.append(Paragraph(_linear_forecast_text()))
    blocks.append(Paragraph(_forecast_text()))
    blocks.append(Paragraph(
        "Periods shorter than a year cannot separate seasonal motion from the trend."))
    blocks.append(Heading("Data quality"))
    blocks.append(KeyValues([
        ("Quality filter", f"an epoch is rejected with a horizontal 1σ above "
                           f"{_mm(q.max_sigma_h_m)}, a vertical 1σ above "
                           f"{_mm(q.max_sigma_v_m)}, "
                           + ("a float or worse solution, " if q.require_fixed else "")
                           + f"fewer than {q.min_satellites} satellites or an ambiguity ratio "
                             f"below {q.min_ratio:g}"),
        ("Outliers", f"an epoch more than "
                     f"{_default(cleaning.mad_outliers, 'threshold'):g} scaled median absolute "
                     f"deviations from the local median (a "
                     f"{_default(cleaning.mad_outliers, 'window_days'):g}-day window, looked "
                     f"at centred, before and after) in east, north or up; not used"),
        ("Gaps", f"a spacing longer than {_default(cleaning.find_gaps, 'min_gap_factor'):g} "
                 f"sampling periods"),
        ("Known steps", f"announced events and changes of base station; the offset, fitted "
                        f"over {pipeline.STEP_FIT_DAYS:g} days either side, is removed from "
                        f"the displacement"),
        ("Detected steps", f"offsets of at least "
                           f"{_default(cleaning.detect_steps, 'min_step_m') * 1000:g} mm and "
                           f"{_default(cleaning.detect_steps, 'threshold'):g} times their "
                           f"noise that no known event explains; left in the displacement"),
        ("Completeness", "epochs received in the period against those the rover's sampling "
                         "period expects"),
    ], key_width_in=1.3))
    blocks.append(Heading("Alarm levels"))
    blocks.append(Paragraph(_alarm_text(a0.options.alarm_rule), space_before_in=0.0))
    blocks.append(Heading("This report"))
    blocks.append(KeyValues([
        ("Software", f"devmon {data.version} (Python {sys.version.split()[0]}, matplotlib "
                     f"{matplotlib.__version__}, numpy {np.__version__}, pyproj "
                     f"{pyproj.__version__})"),
        ("Data", f"the mirror {data.mirror_path}, last synced "
                 f"{utc_text(data.last_synced, 'never')}"),
        ("Times", "UTC throughout"),
        ("Command", o.command_line or "made through the Python API (devmon_sync.report)"),
    ], key_width_in=1.3))
    return _flow_specs(blocks, "Methods", "methods", "Methods", "Methods and settings")


def _linear_forecast_text() -> str:
    """The classic linear inverse-velocity forecast as ``analysis.forecast_linear`` makes
    it, with its constants (the pipeline calls it with its defaults)."""
    fl = forecast_linear
    return (f"Linear inverse-velocity forecast (Fukuzono 1985; Carlà et al. 2017), shown "
            f"beside the one below: a straight line through the inverse velocities from the "
            f"onset of acceleration (the window that best splits them into a steady part and "
            f"a falling line, at least {fl.MIN_PHASE_POINTS} values on the line, within the "
            f"last {fl.PHASE_WINDOW_DAYS:g} days), by least squares weighted by each value's "
            f"noise; the failure where it reaches zero, with a {100 * fl.CONFIDENCE:g} % "
            f"interval (Fieller) that allows for the scatter about the line and the "
            f"correlation of its residuals. It is used only once the slope accelerates: a "
            f"quadratic, or a line whose slope changes {fl.HINGE_DAYS:g} days before the "
            f"end, through the daily medians of the last {fl.ACCELERATION_WINDOW_DAYS:g} "
            f"days, along its motion of those days, with the noise of the "
            f"{fl.NOISE_WINDOW_DAYS:g} days before, must show a velocity and an acceleration "
            f"both above zero at one-sided {100 * fl.ACCELERATION_CONFIDENCE:g} % (shared "
            f"between the two). It then gives a date and its interval; "
            f"or, when the line is already at zero before the last data, \"failure may be "
            f"imminent\"; or, when the line cannot be bounded, \"accelerating; failure "
            f"possible within N days\", N where the line reaches zero when it falls as "
            f"steeply as the data allow (one-sided {100 * fl.CONFIDENCE:g} %). The rover's "
            f"page says whether the two forecasts agree. A straight line assumes Voight's "
            f"alpha = 2: for a sharper acceleration (alpha above 2) it comes late, for a "
            f"gentler one early.")


def _forecast_text() -> str:
    """The failure forecast as ``analysis.forecast`` makes it, with the numbers it runs
    with: the module's constants and the defaults the pipeline calls it with."""
    def used(name: str):
        return _default(forecast.forecast_from_displacement, name)

    lo, hi = forecast.ALPHA_RANGE
    return (f"Failure forecast (Voight 1988; Fukuzono 1985 is its alpha = 2): steady creep "
            f"until an onset, then a velocity growing as a power of the inverse of the time "
            f"left to failure, its exponent alpha fitted within {lo:g} to {hi:g} (an "
            f"assumption stated, not a finding; the interval carries alpha's uncertainty, "
            f"and a slope whose alpha lies outside that range is forecast with a bias), "
            f"fitted to the positions "
            f"of the last {used('window_days'):g} days themselves, reduced to medians of "
            f"{forecast.BIN_DAYS * 24:g}-hour bins (bins more than "
            f"{forecast.ROBUST_SIGMAS:g} robust σ from the fit dropped) with correlated "
            f"noise between bins. The {100 * used('confidence'):g} % interval of the failure "
            f"time holds the times whose profile likelihood stays within its threshold, the "
            f"threshold scaled by {forecast.CALIBRATION:g} times the excess of long-memory "
            f"(flicker) noise measured on the residuals (that factor chosen on slopes with the "
            f"real noise of one GNSS station, LHAS, and scored on another, P156). Plan on the "
            f"interval's early end, not the forecast: the forecast itself may come late. "
            f"A forecast needs at least "
            f"{used('min_points')} windowed velocities {used('min_velocity_snr'):g}σ above "
            f"their noise, at least {forecast.MIN_BINS} bins, an acceleration the positions "
            f"prefer to a steady velocity, and an interval ending within "
            f"{used('max_horizon_days'):g} days of the last data; otherwise the rover's page "
            f"says why there is none.")


def _alarm_text(rule: alarms.AlarmRule) -> str:
    """Alarm evaluation as ``analysis.alarms`` and ``analysis.window_noise`` do it, with the
    rule in use and their constants."""
    return (f"Levels are evaluated at every epoch, not only at the end: the displacement of "
            f"each component from a line fitted over the trailing "
            f"{_days(rule.displacement_window_days)}, the velocity as the least-squares "
            f"slope over the trailing {rule.velocity_window_days:g} days (windows widened "
            f"to hold at least {alarms.DISPLACEMENT_MIN_EPOCHS} and "
            f"{alarms.VELOCITY_MIN_EPOCHS} readings where readings are sparser, and never "
            f"spanning a known or detected step). Each value's 1σ uncertainty is the point's "
            f"own noise measured on its record up to that epoch: for the velocity, the "
            f"spread of the differences of successive windows over the trailing "
            f"{window_noise.NOISE_HISTORY_DAYS:g} days; for the displacement, the growth of "
            f"second differences with their lag (1 to {int(window_noise.LAGS[-1])} days, over "
            f"the trailing {window_noise.POSITION_HISTORY_DAYS:g} days) extended along a "
            f"power law to the time since the reference, so that the slow wander of GNSS "
            f"positions is allowed for; the margin is Student's quantile for the number of "
            f"samples behind it, and a level is not evaluated until at least "
            f"{window_noise.MIN_NOISE_SAMPLES} exist. 2D and 3D values are lengths corrected "
            f"for the components' noise. A level is reached when the value minus its "
            f"one-sided {100 * rule.confidence:g} % margin ({rule.z:.2f}σ) is at or above it "
            f"for {rule.min_duration_hours:g} hours, and cleared once the value itself has "
            f"stayed below it as long; the levels in force and the history of each level "
            f"reached are in the Alarms section. The level shown is the most severe reached "
            f"at the end of the period, ladders compared by position. Levels are set per "
            f"device, site or group with `devmon alarms`.")


def _days(days: float) -> str:
    return f"{days:g} day" if days == 1 else f"{days:g} days"


def _mm(value_m: float | None) -> str:
    return "-" if value_m is None else f"{value_m * 1000:g} mm"


__all__ = ["PageSpec", "plan_pages", "plan_rows", "file_part"]

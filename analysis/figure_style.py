"""The look every devmon figure shares: sizes, colours (one per component, one per alarm
level), font sizes, the time axis in the site's zone, one legend outside the axes, and the
helpers that apply them to a matplotlib ``Figure``.

Apart from the builders (``analysis.figures``, ``analysis.plan_figure``) so that each builder
module takes its conventions from here, and a figure looks the same whatever draws it: every
size, colour and font is set on the artist itself, never through matplotlib's global
settings.

Fitting titles and legends needs four names matplotlib does not make public (none has a
public equivalent): ``Figure._get_renderer`` (the renderer of whatever canvas draws),
``Axes._left_title``/``_right_title`` and ``Figure._suptitle`` (the title artists; the
public getters give their text only), and ``Legend._ncols``.  The tests draw every figure
through them, so a matplotlib that renames one fails there first; pyproject.toml keeps
matplotlib below 4.
"""

from __future__ import annotations

import math
import textwrap
from datetime import datetime, timezone, tzinfo
from typing import Iterable, Iterator, Sequence
from zoneinfo import ZoneInfo, ZoneInfoNotFoundError

import matplotlib.dates as mdates
import numpy as np
from matplotlib.artist import Artist
from matplotlib.axis import Axis
from matplotlib.figure import Figure
from matplotlib.layout_engine import ConstrainedLayoutEngine
from matplotlib.text import Text

from analysis.timebase import as_datetime64

# ----------------------------------------------------------------------------- style table

DEFAULT_FIGSIZE = (10.0, 7.0)  # inches: fits an A4 page (landscape, or portrait with margins)
PLAN_FIGSIZE = (9.0, 8.0)  # the plan and trajectory views have equal axes

COMPONENTS = ("east", "north", "up", "horizontal", "3d", "along", "across")
# colour-blind safe (Okabe & Ito 2008), the same component always in the same colour
COLOURS = {
    "east": "#0072B2", "north": "#D55E00", "up": "#009E73", "horizontal": "#CC79A7",
    "3d": "#3B3B3B", "along": "#E69F00", "across": "#56B4E9",
    "fit": "#111111", "outliers": "#C0143C", "rejected": "#8C8C8C", "gap": "#EDEDED",
    "known_step": "#505050", "detected_step": "#7B2CBF", "reference": "#505050",
    "recent": "#D55E00", "forecast": "#C0143C", "muted": "#A0A0A0", "grid": "#DDDDDD",
    "point": "#3B3B3B", "ellipse": "#0072B2",
}
# alarm levels by name; other names take the colour of their rank in LEVEL_RAMP
LEVEL_COLOURS = {"alert": "#E6A100", "warning": "#E6A100", "alarm": "#E8590C",
                 "emergency": "#C0143C", "critical": "#C0143C"}
LEVEL_RAMP = ("#E6A100", "#E8590C", "#C0143C", "#7A0A24")
# one colour per series of a time-series figure, in the order given (Okabe-Ito, then more)
SERIES_COLOURS = ("#0072B2", "#D55E00", "#009E73", "#CC79A7", "#E69F00", "#56B4E9",
                  "#3B3B3B", "#8C6D31", "#7B2CBF", "#B8860B")
FONT = {"title": 10.0, "suptitle": 11.5, "label": 9.0, "tick": 8.0, "legend": 8.0, "note": 8.0}
STYLE = {
    "data": dict(linestyle="none", marker=".", markersize=2.6, alpha=0.75),
    "fit": dict(color=COLOURS["fit"], linewidth=1.3, zorder=4),
    "outliers": dict(linestyle="none", marker="x", markersize=5, markeredgewidth=1.1,
                     color=COLOURS["outliers"], zorder=5, clip_on=False),
    "rejected": dict(linestyle="none", marker="|", markersize=6, markeredgewidth=0.8,
                     color=COLOURS["rejected"], zorder=5, clip_on=False),
    "gap": dict(color=COLOURS["gap"], linewidth=0, zorder=0),
    "known_step": dict(color=COLOURS["known_step"], linestyle="--", linewidth=1.1, zorder=3),
    "detected_step": dict(color=COLOURS["detected_step"], linestyle="-.", linewidth=1.1,
                          zorder=3),
    "threshold": dict(linestyle=(0, (6, 3)), linewidth=1.3, zorder=3),
    "reference": dict(color=COLOURS["reference"], linestyle="--", linewidth=1.1, zorder=3),
}
NEXT_LEVEL_REACH = 2.5  # the next alarm level is in view when below 2.5 x the largest value
OUTLIER_Y = 0.035  # axes fraction at which the outlier and rejected markers sit
REJECTED_Y = 0.012


# ----------------------------------------------------------------------------- helpers

def time_zone(tz: str | None) -> tuple[tzinfo, str]:
    """The zone of ``tz`` (an IANA name, or None/"UTC" for UTC) and its name for labels; a
    ValueError names a zone that does not exist."""
    if tz is None or str(tz).upper() in ("UTC", "Z"):
        return timezone.utc, "UTC"
    try:
        return ZoneInfo(str(tz)), str(tz)
    except (ZoneInfoNotFoundError, ValueError):
        raise ValueError(f"unknown time zone {tz!r}: use an IANA name such as "
                         f"Europe/Zurich, or None for UTC") from None


def format_time_axis(ax, tz: str | None = None, *, label: bool = True) -> None:
    """Date ticks in ``tz`` (concise: only what changes between ticks, the rest in the offset
    text) and the label ``time (<zone>)``; shared x axes share these tickers.  Every builder
    formats its time axes with this."""
    zone, name = time_zone(tz)
    locator = mdates.AutoDateLocator(tz=zone, minticks=4, maxticks=10)
    # day ticks name their month ("Nov 15") and the offset is the year: matplotlib's
    # "15" ticks with the offset "2026-Dec" (the last tick's month) read as "this axis is
    # December" on a three-month axis (issue 30.12)
    formatter = mdates.ConciseDateFormatter(
        locator, tz=zone, formats=["%Y", "%b", "%b %d", "%H:%M", "%H:%M", "%S.%f"],
        offset_formats=["", "%Y", "%Y", "%Y-%b-%d", "%Y-%b-%d", "%Y-%b-%d %H:%M"])
    ax.xaxis.set_major_locator(locator)
    ax.xaxis.set_major_formatter(formatter)
    if label:
        ax.set_xlabel(f"time ({name})", fontsize=FONT["label"])


def format_time(t, tz: str | None = None) -> str:
    """A UTC datetime64 as ``2026-01-13 02:42 CET`` in the zone ``tz``."""
    zone, _ = time_zone(tz)
    return to_datetime(t).astimezone(zone).strftime("%Y-%m-%d %H:%M %Z")


def to_datetime(t) -> datetime:
    ns = int(as_datetime64(np.asarray(t)).astype(np.int64))
    return datetime.fromtimestamp(ns // 1_000_000_000, tz=timezone.utc).replace(
        microsecond=(ns % 1_000_000_000) // 1000)


def iso_utc(t) -> str:
    return str(np.datetime_as_string(np.datetime64(t, "s"), unit="s")) + "Z"


class TextFigure(Figure):
    """A ``Figure`` whose texts are drawn as written, never parsed as mathtext.

    Names come from the monitoring service: two dollar signs in one (``rover $x$``, or a
    macro matplotlib does not know) would otherwise be parsed as TeX, drawn as something
    else or fail the whole figure, the GUI's pane and the report.  Every text of the figure
    (titles, labels, legends, annotations, those added after it was built) is switched to
    plain text as the figure draws; tick labels and axis offsets are left to their
    formatters (numbers; a log axis would need mathtext).  Per figure, so matplotlib's
    global settings are not touched.

    A line longer than ``MAX_LINE_CHARS`` (no page or pane shows that many on one line: a
    10,000-character name from a hostile service) is drawn as its start and an ellipsis:
    wrapped and drawn whole it cost seconds a figure, and a report minutes.

    The titles and the legend fit the size the figure is drawn at, which a builder does not
    know (a GUI pane, a page): every title wraps at the figure's edge (``_wrap_titles``),
    and a legend made by ``fitted_legend`` takes fewer columns when its row would be wider
    than the figure (``_fit_legends``; issue 30: at the GUI's default window size the
    velocity legend was cut at both ends and the inverse-velocity title at the right)."""

    _drawing = False  # in ``draw``: its layout engine runs with the texts prepared

    def draw(self, renderer) -> None:
        # a figure without a layout engine has been laid out for good (the report settles
        # each page's layout, ``render.settle_layout``): its texts keep the size they had
        self.prepare_texts(renderer, fit=self.get_layout_engine() is not None)
        self._drawing = True
        try:
            super().draw(renderer)
        finally:
            self._drawing = False

    def prepare_texts(self, renderer, fit: bool = True) -> None:
        """The texts as they are drawn: plain, bounded and (``fit``) fitted to the figure's
        size.  Before the layout is computed: ``draw`` and ``FittingLayout.execute`` (a
        layout run by itself) call it."""
        if fit:
            _wrap_titles(self, renderer)
            _fit_legends(self, renderer)
        for text in _worded_texts(self):
            text.set_parse_math(False)
            shown = _bounded_lines(text.get_text())
            if shown is not None:
                text.set_text(shown)
            if text.get_wrap() and type(text) is Text:
                text.__class__ = _WrappedPlainText


class FittingLayout(ConstrainedLayoutEngine):
    """Constrained layout that lays out the texts as they will be drawn: a layout run by
    itself, not by a draw (the report's ``render.settle_layout`` runs it once and detaches
    it), first prepares a ``TextFigure``'s texts (plain, titles wrapped, legends fitted:
    ``TextFigure.prepare_texts``), which a draw otherwise does just before its layout.
    Without it a page's title wrapped after its layout was fixed and ran off the page."""

    def execute(self, fig):
        if isinstance(fig, TextFigure) and not fig._drawing:
            fig.prepare_texts(fig._get_renderer())
        return super().execute(fig)


class _WrappedPlainText(Text):
    """A wrapped text measured as plain text: matplotlib 3.11 measures the lines of a
    wrapped text as mathtext whenever they hold two dollar signs, ``parse_math`` or not
    (``Text._get_rendered_text_width``), and fails on a name it cannot parse."""

    def _get_rendered_text_width(self, text: str) -> int:
        width, _, _ = self._renderer.get_text_width_height_descent(
            text, self.get_fontproperties(), ismath=False)
        return math.ceil(width)


MAX_LINE_CHARS = 500


def _bounded_lines(text: str) -> str | None:
    """``text`` with each line over ``MAX_LINE_CHARS`` cut to its start and "…" (None when
    no line is that long: the text is drawn as it is)."""
    if len(text) <= MAX_LINE_CHARS:
        return None
    lines = text.split("\n")
    if all(len(line) <= MAX_LINE_CHARS for line in lines):
        return None
    return "\n".join(line if len(line) <= MAX_LINE_CHARS
                     else line[:MAX_LINE_CHARS - 1] + "…" for line in lines)


TITLE_PAD_PT = 4.0  # room kept between a title and the figure's edge


def _wrap_titles(fig: Figure, renderer) -> None:
    """Every title of ``fig`` (axes titles, the figure's) broken into lines that fit
    between its position and the figure's edge, from the text the builder gave it (kept on
    the title, so a wider figure draws it on fewer lines again).  Done here once a draw,
    and again only when the room changed: matplotlib's own wrapping measures every word
    each time the layout asks for the title's size (it tripled the inverse-velocity
    figure's drawing time)."""
    titles = [t for ax in fig.axes for t in (ax.title, ax._left_title, ax._right_title)]
    pad = renderer.points_to_pixels(TITLE_PAD_PT)
    for text in [t for t in titles + [fig._suptitle] if t is not None and t.get_text()]:
        given, shown, key = getattr(text, "_devmon_given", (None, None, None))
        if text.get_text() != shown:  # new (or changed since): this is the given text
            given, key = text.get_text(), None
        x = text.get_transform().transform(text.get_unitless_position())[0]
        room = {"left": fig.bbox.x1 - x, "right": x - fig.bbox.x0}.get(
            text.get_horizontalalignment(), 2 * min(x - fig.bbox.x0, fig.bbox.x1 - x)) - pad
        if key != (round(room), text.get_fontsize()):
            font = text.get_fontproperties()
            shown = _wrapped(given, lambda line, font=font: renderer.get_text_width_height_descent(
                line, font, ismath=False)[0], room)
            text.set_text(shown)
        text._devmon_given = (given, shown, (round(room), text.get_fontsize()))


def _wrapped(text: str, width, room: float) -> str:
    """``text`` with each line wider than ``room`` (``width(line)``: its width) broken at
    spaces into lines that fit (a word wider than the room stays whole).  The characters a
    line may hold are estimated from its measured width, then lowered until every piece
    fits: a few measurements a line, not one a word."""
    out = []
    for line in text.split("\n"):
        wide = width(line)
        if wide <= room or " " not in line.strip():
            out.append(line)
            continue
        chars = max(1, int(len(line) * room / wide))
        while True:
            parts = textwrap.wrap(line, chars, break_long_words=False,
                                  break_on_hyphens=False) or [line]
            if chars == 1 or all(width(part) <= room for part in parts):
                break
            chars = max(1, chars - max(1, chars // 20))
        out += parts
    return "\n".join(out)


LEGEND_PAD_PT = 4.0  # room kept between a fitted legend and the figure's edges


def _fit_legends(fig: Figure, renderer) -> None:
    """Each legend made by ``fitted_legend`` with the most columns (up to the number it was
    made with) whose row fits the figure's width; it is made again when that changes."""
    room = fig.bbox.width - 2 * renderer.points_to_pixels(LEGEND_PAD_PT)
    for legend in list(fig.legends):
        made = getattr(legend, "_devmon_made", None)
        if made is None:
            continue
        handles, labels, options = made
        ncols = options["ncols"]
        while ncols > 1 and _legend_width_px(legend, renderer, ncols) > room:
            ncols -= 1
        if ncols != legend._ncols:
            legend.remove()
            again = fig.legend(handles, labels, **{**options, "ncols": ncols})
            again._devmon_made = made


def _legend_width_px(legend, renderer, ncols: int) -> float:
    """The width (pixels) of ``legend`` laid out in ``ncols`` columns, as matplotlib lays
    them out: the entries split into columns in order (``numpy.array_split``), each column
    as wide as its widest entry (handle, gap, text), columns apart by the column spacing."""
    font_px = renderer.points_to_pixels(legend.prop.get_size_in_points())
    entries = np.array([(legend.handlelength + legend.handletextpad) * font_px
                        + text.get_window_extent(renderer).width for text in legend.texts])
    columns = [c for c in np.array_split(entries, ncols) if c.size]
    return (sum(float(c.max()) for c in columns)
            + (len(columns) - 1) * legend.columnspacing * font_px
            + 2 * legend.borderpad * font_px)


def fitted_legend(fig: Figure, handles: Sequence, labels: Sequence[str], **options) -> None:
    """``fig.legend(handles, labels, **options)`` (``ncols`` given) that takes fewer columns
    when the figure is drawn too narrow for them (``TextFigure``, ``_fit_legends``)."""
    legend = fig.legend(handles, labels, **options)
    legend._devmon_made = (list(handles), list(labels), dict(options))


def _worded_texts(artist: Artist) -> Iterator[Text]:
    """Every text under ``artist`` but the tick labels and offset texts (numbers, left to
    their formatters).  An axis gives its label alone, its ticks are not visited:
    ``findobj`` would ask each axis for its ticks, which runs its locator and formatter
    (an ``AutoDateLocator`` is dear) in every draw and every layout, and the draw computes
    them again anyway (7 % of a report's CPU, ``benchmarks/bench_report_trees.py``)."""
    if isinstance(artist, Axis):
        yield artist.label
        return
    if isinstance(artist, Text):
        yield artist
    for child in artist.get_children():
        yield from _worded_texts(child)


def new_figure(figsize) -> Figure:
    return TextFigure(figsize=figsize or DEFAULT_FIGSIZE,
                      layout=FittingLayout(h_pad=0.06, w_pad=0.06, hspace=0.03, wspace=0.03))


def style_axes(ax) -> None:
    ax.grid(True, color=COLOURS["grid"], linewidth=0.6)
    ax.set_axisbelow(True)
    ax.tick_params(labelsize=FONT["tick"])
    ax.xaxis.label.set_fontsize(FONT["label"])
    ax.yaxis.label.set_fontsize(FONT["label"])
    for side in ("top", "right"):
        ax.spines[side].set_visible(False)


def figure_legend(fig: Figure, axes: Iterable, first: Sequence = ()) -> None:
    """One legend for the whole figure, below the axes (it never covers data); entries are
    unique by label, in the order they were first drawn (after the proxy artists ``first``);
    labels starting with '_' skipped.  At most ``legend_columns`` columns, fewer when the
    figure is drawn narrower than that (``TextFigure``)."""
    handles, labels = list(first), [h.get_label() for h in first]
    for ax in axes:
        for h, lab in zip(*ax.get_legend_handles_labels()):
            if lab not in labels:
                handles.append(h)
                labels.append(lab)
    if handles:
        fitted_legend(fig, handles, labels, loc="outside lower center",
                      fontsize=FONT["legend"], ncols=legend_columns(fig, labels),
                      frameon=False, markerscale=1.6)


def legend_columns(fig: Figure, labels: Sequence[str]) -> int:
    """The most legend columns (at most 4) whose entries fit the figure's width: matplotlib
    fills the columns in turn, each as wide as its longest label plus the handle and gaps
    (~6 characters; a character of the legend font is ~0.55 em)."""
    char_in = 0.55 * FONT["legend"] / 72.0
    room = 0.95 * fig.get_figwidth() / char_in
    for ncols in range(min(len(labels), 4), 1, -1):
        rows = -(-len(labels) // ncols)
        columns = [labels[i:i + rows] for i in range(0, len(labels), rows)]
        if sum(max(map(len, col)) + 6 for col in columns) <= room:
            return ncols
    return 1


def no_data(ax, text: str, gid: str) -> None:
    ax.text(0.5, 0.5, textwrap.fill(text, 80), transform=ax.transAxes, ha="center",
            va="center", fontsize=FONT["label"], color="#333333", gid=gid,
            bbox=dict(boxstyle="round,pad=0.5", facecolor="white", edgecolor="#BBBBBB"))


def level_colour(name: str, rank: int) -> str:
    """Colour of an alarm level: by its name when known (alert, alarm, emergency...), else
    by its rank (0 the mildest)."""
    return LEVEL_COLOURS.get(name.lower(), LEVEL_RAMP[min(rank, len(LEVEL_RAMP) - 1)])

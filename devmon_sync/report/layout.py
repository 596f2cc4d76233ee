"""A4 pages with matplotlib: page chrome (header, footer, page number), text that flows
over pages, and simple tables, all placed in inches from the top left of the page.

Text is wrapped by measured glyph widths (the font's own advances, cached per character),
so a paragraph never runs into the margin, and blocks know their height before they are
drawn: the report can count its pages (for "page n of N" and the contents) before drawing
any.  Every artist is set on a ``Figure`` of its own: no pyplot, no global state.

Size: about 750 lines of page machinery (chrome, measured text, flowing blocks, tables
sized to their words) that share the measurement of text; the pages themselves are in
``pages``.
"""

from __future__ import annotations

import textwrap
from bisect import bisect_right
from dataclasses import dataclass, field
from functools import lru_cache
from itertools import accumulate

from matplotlib.figure import Figure
from matplotlib.font_manager import FontProperties
from matplotlib.lines import Line2D
from matplotlib.patches import Rectangle
from matplotlib.text import Text
from matplotlib.textpath import text_to_path

from analysis.figure_style import TextFigure
from devmon_sync.report.tables import Column, Row, level_colour

PAGE_IN = (8.27, 11.69)  # A4 portrait, inches
MARGIN_IN = 0.6  # left and right
CONTENT_TOP_IN = 1.05  # below the page header
CONTENT_BOTTOM_IN = PAGE_IN[1] - 0.7  # above the footer
CONTENT_WIDTH_IN = PAGE_IN[0] - 2 * MARGIN_IN
FAMILY = "DejaVu Sans"  # matplotlib's own font: present wherever matplotlib is
SIZE = {"body": 8.5, "small": 7.5, "table": 7.5, "heading": 10.5, "page": 13.0,
        "title": 22.0, "subtitle": 12.0, "chrome": 7.5}
INK = "#1A1A1A"
MUTED = "#5F5F5F"
RULE = "#B8B8B8"
ACCENT = "#0072B2"  # the figures' east blue
WARN_EDGE, WARN_FILL = "#C0143C", "#FDECEF"
TABLE_HEAD_FILL = "#EEF2F6"
LINE_FACTOR = 1.32  # line height / font size
WRAP_SLACK = 0.985  # share of a line's width text is wrapped to (kerning and rounding)
MAX_TOKEN_LINES = 4  # lines a word longer than a line may take (``_cut_token``)
MIN_TABLE_SIZE = 6.0  # pt: a table column's text is set no smaller to fit its longest word
FOOTER_MIN_PT = 6.5  # a long title in the footer is set down to this, then cut


# ----------------------------------------------------------------------------- measuring

@lru_cache(maxsize=8)
def _props(size: float, weight: str = "normal", style: str = "normal") -> FontProperties:
    return FontProperties(family=FAMILY, size=size, weight=weight, style=style)


@lru_cache(maxsize=4096)
def _advance_pt(char: str, weight: str) -> float:
    """Advance of one character at 1 pt (measured at 100 pt)."""
    w, _, _ = text_to_path.get_text_width_height_descent(char if char != " " else "a a",
                                                         _props(100.0, weight), ismath=False)
    if char == " ":
        w -= 2 * _advance_pt("a", weight) * 100.0
    return w / 100.0


def text_width_in(text: str, size: float, weight: str = "normal") -> float:
    """Width of one line of text, inches (sum of glyph advances; kerning ignored)."""
    return sum(_advance_pt(c, weight) for c in text) * size / 72.0


def line_height_in(size: float) -> float:
    return size * LINE_FACTOR / 72.0


def _prefix_widths_in(text: str, size: float, weight: str) -> list[float]:
    """Width of each prefix of ``text`` (``text[:i + 1]``), inches: one pass, so a cut in a
    long text (a 10,000-character name) is found by bisection, not by measuring it again
    for each character removed."""
    scale = size / 72.0
    return list(accumulate(_advance_pt(c, weight) * scale for c in text))


def fit(text: str, width_in: float, size: float, weight: str = "normal") -> str:
    """``text`` on one line of ``width_in``, cut with an ellipsis when it is too long."""
    if text_width_in(text, size, weight) <= width_in:
        return text
    room = width_in - text_width_in("…", size, weight)
    keep = bisect_right(_prefix_widths_in(text, size, weight), room)
    return text[:keep].rstrip() + "…"


def fit_end(text: str, width_in: float, size: float, weight: str = "normal") -> str:
    """The end of ``text`` on one line of ``width_in``, after an ellipsis when cut."""
    if text_width_in(text, size, weight) <= width_in:
        return text
    room = width_in - text_width_in("…", size, weight)
    keep = bisect_right(_prefix_widths_in(text[::-1], size, weight), room)
    return "…" + text[len(text) - keep:].lstrip() if keep else "…"


def fit_lines(text: str, width_in: float, size: float, weight: str = "normal", *,
              max_lines: int = 1, min_size: float | None = None) -> tuple[list[str], float]:
    """(lines, size) of ``text`` wrapped to at most ``max_lines`` lines of ``width_in``: at
    ``size``, else half a point smaller at a time down to ``min_size``; still too long
    there, the last line ends with an ellipsis.  A title or a value in a box is set smaller
    rather than cut, and never loses words without a mark."""
    smallest = size if min_size is None else min_size
    while True:
        lines = wrap(text, width_in, size, weight)
        if len(lines) <= max_lines:
            return lines, size
        if size - 0.5 < smallest - 1e-9:
            break
        size -= 0.5
    kept = lines[:max_lines]
    kept[-1] = fit(" ".join(lines[max_lines - 1:]), width_in * WRAP_SLACK, size, weight)
    return kept, size


def wrap(text: str, width_in: float, size: float, weight: str = "normal") -> list[str]:
    """Lines of ``text`` no wider than ``width_in`` (its own line breaks kept); a word
    longer than a line is cut."""
    room = width_in * WRAP_SLACK
    lines: list[str] = []
    for para in text.split("\n"):
        words = para.split(" ")
        line = ""
        for word in words:
            candidate = f"{line} {word}" if line else word
            if text_width_in(candidate, size, weight) <= room:
                line = candidate
                continue
            if line:
                lines.append(line)
            if word and text_width_in(word, size, weight) > room:  # a very long token: cut
                pieces = _cut_token(word, room, size, weight)
                lines += pieces[:-1]
                word = pieces[-1]
            line = word
        lines.append(line)
    return lines


def _cut_token(word: str, room_in: float, size: float, weight: str) -> list[str]:
    """``word`` cut into pieces no wider than ``room_in`` (at least one character each),
    from one pass over its widths; at most ``MAX_TOKEN_LINES``, the last one the word's end
    after "…" (a 10,000-character serial number is shown by its start and its end, where
    two such differ, not over pages)."""
    widths = _prefix_widths_in(word, size, weight)
    pieces, start, offset = [], 0, 0.0
    while start < len(word):
        end = max(start + 1, bisect_right(widths, offset + room_in, lo=start))
        pieces.append(word[start:end])
        offset, start = widths[end - 1], end
        if len(pieces) == MAX_TOKEN_LINES - 1 and start < len(word):
            rest = word[start:]
            if text_width_in(rest, size, weight) > room_in:
                return pieces + [fit_end(rest, room_in, size, weight)]
    return pieces


# ----------------------------------------------------------------------------- drawing

def _fx(x_in: float) -> float:
    return x_in / PAGE_IN[0]


def _fy(y_in: float) -> float:
    return 1.0 - y_in / PAGE_IN[1]


def put_text(fig: Figure, x_in: float, y_in: float, text: str, size: float, *,
             weight: str = "normal", style: str = "normal", color: str = INK,
             ha: str = "left", gid: str | None = None):
    """One line of text whose top is at ``y_in`` from the top of the page."""
    return fig.text(_fx(x_in), _fy(y_in), text, fontproperties=_props(size, weight, style),
                    color=color, ha=ha, va="top", parse_math=False, gid=gid)


def put_lines(fig: Figure, x_in: float, y_in: float, lines: list[str], size: float, *,
              weight: str = "normal", style: str = "normal", color: str = INK,
              ha: str = "left") -> float:
    """Lines one under the other from ``y_in``; returns the height used (inches)."""
    put_line_texts(fig, x_in, y_in, lines, size, weight=weight, style=style, color=color,
                   ha=ha)
    return line_height_in(size) * len(lines)


def put_line_texts(fig: Figure, x_in: float, y_in: float, lines: list[str], size: float,
                   **kw) -> list[Text]:
    """``put_lines``, returning the texts drawn (an empty line draws none)."""
    step = line_height_in(size)
    return [put_text(fig, x_in, y_in + i * step, line, size, **kw)
            for i, line in enumerate(lines) if line]


def put_rect(fig: Figure, x_in: float, y_in: float, w_in: float, h_in: float, *,
             fill: str | None = None, edge: str | None = None, lw: float = 0.0,
             zorder: float = 0.0, gid: str | None = None) -> Rectangle:
    rect = Rectangle((_fx(x_in), _fy(y_in + h_in)), w_in / PAGE_IN[0], h_in / PAGE_IN[1],
                     transform=fig.transFigure, facecolor=fill or "none",
                     edgecolor=edge or "none", linewidth=lw, zorder=zorder, gid=gid)
    fig.add_artist(rect)
    return rect


def put_rule(fig: Figure, y_in: float, x0_in: float = MARGIN_IN,
             x1_in: float = PAGE_IN[0] - MARGIN_IN, color: str = RULE, lw: float = 0.6):
    line = Line2D([_fx(x0_in), _fx(x1_in)], [_fy(y_in)] * 2, transform=fig.transFigure,
                  color=color, linewidth=lw)
    fig.add_artist(line)
    return line


def new_page() -> Figure:
    """A blank A4 page for text and tables (no layout engine: everything is placed); its
    texts drawn as written (names are never mathtext: ``TextFigure``)."""
    return TextFigure(figsize=PAGE_IN)


def builder_rect(top_in: float = CONTENT_TOP_IN, bottom_in: float = CONTENT_BOTTOM_IN
                 ) -> tuple[float, float, float, float]:
    """The constrained-layout rectangle (figure fractions) holding a figure builder's
    axes, legend and colour bar between ``top_in`` and ``bottom_in`` of an A4 page."""
    left = (MARGIN_IN - 0.1) / PAGE_IN[0]
    return (left, 1.0 - bottom_in / PAGE_IN[1], 1.0 - 2 * left,
            (bottom_in - top_in) / PAGE_IN[1])


def adopt_builder_figure(fig: Figure, top_in: float = CONTENT_TOP_IN,
                         bottom_in: float = CONTENT_BOTTOM_IN) -> str:
    """Make a figure builder's ``Figure`` (built at ``PAGE_IN``) a report page: its layout
    confined between ``top_in`` and ``bottom_in`` (room for the page header, the footer and
    anything drawn below it), and its suptitle taken off to become the page heading, which
    is returned."""
    fig.set_size_inches(*PAGE_IN)
    heading = fig.get_suptitle()
    if heading:
        title = fig.suptitle("")
        title.set_visible(False)
        title.set_in_layout(False)
    # The builders' legends sit "outside lower center": at the bottom of the whole figure,
    # which constrained layout would leave there (over the footer).  Each is anchored at
    # the bottom of the content area instead, and the layout kept above it.
    for legend in list(fig.legends):
        legend = _refit_legend(fig, legend, 1.0 - bottom_in / PAGE_IN[1])
        bottom_in -= legend.get_window_extent().height / fig.dpi + 0.1
    _fit_titles(fig)
    fig.get_layout_engine().set(rect=builder_rect(top_in, bottom_in))
    return heading


def _refit_legend(fig: Figure, legend, y_frac: float):
    """The legend anchored (lower centre) at ``y_frac`` of the page, redrawn with fewer
    columns when it is wider than the content (the builders size it for the whole figure
    width; matplotlib cannot change a legend's columns once made)."""
    handles = list(legend.legend_handles)
    labels = [t.get_text() for t in legend.texts]
    size = legend.texts[0].get_fontsize() if legend.texts else SIZE["small"]
    frame = legend.get_frame_on()
    legend.remove()
    for ncols in range(min(4, len(labels)), 0, -1):
        new = fig.legend(handles, labels, loc="lower center", ncols=ncols, fontsize=size,
                         frameon=frame, bbox_to_anchor=(0.5, y_frac),
                         bbox_transform=fig.transFigure)
        if ncols == 1 or new.get_window_extent().width / fig.dpi <= CONTENT_WIDTH_IN + 0.3:
            return new
        new.remove()
    return new  # pragma: no cover - the loop always returns


def _fit_titles(fig: Figure) -> None:
    """Axes titles wider than the content (a forecast's long caption) set smaller, to at
    least 6.5 pt, so none runs into the page margin."""
    for ax in fig.axes:
        titles = {ax.get_title(loc) for loc in ("center", "left", "right")} - {""}
        for title in ax.get_children():
            if not isinstance(title, Text) or title.get_text() not in titles:
                continue
            text = title.get_text()
            size = title.get_fontsize()
            widest = max(text_width_in(line, size) for line in text.split("\n"))
            room = CONTENT_WIDTH_IN - 0.5
            if widest > room:
                title.set_fontsize(max(6.5, size * room / widest))


@dataclass
class Chrome:
    """What every page carries: its section label and heading at the top, the report's
    title, creation time and the page number at the bottom."""

    title: str
    generated: str  # "2026-01-02 08:00 UTC"
    n_pages: int

    def draw(self, fig: Figure, page: int, section: str, heading: str) -> list:
        """Header (unless ``heading`` is empty: the cover has its own) and footer on
        ``fig`` (pages from 1); the artists, so they can be hidden when the page is saved
        as a figure (PNG)."""
        w, h = PAGE_IN
        artists = []
        if heading:
            artists.append(put_text(fig, MARGIN_IN, 0.38, section.upper(), SIZE["chrome"],
                                    color=ACCENT, weight="bold", gid="chrome:section"))
            size = SIZE["page"]
            lines = wrap(heading, CONTENT_WIDTH_IN, size, "bold")
            if len(lines) > 1:
                lines, size = fit_lines(heading, CONTENT_WIDTH_IN, size - 1.5, "bold",
                                        max_lines=2, min_size=9.0)
            y = 0.56 if len(lines) == 1 else 0.53
            for i, line in enumerate(lines):
                artists.append(put_text(fig, MARGIN_IN, y + i * line_height_in(size) * 0.95,
                                        line, size, weight="bold", gid="chrome:heading"))
            artists.append(put_rule(fig, 0.93))
        artists.append(put_rule(fig, h - 0.55))
        stamp = f"  ·  generated {self.generated}"
        line_in = CONTENT_WIDTH_IN - 1.0  # the page number's room kept
        size = SIZE["chrome"]  # smaller for a long title, before it is cut
        while size > FOOTER_MIN_PT and text_width_in(self.title + stamp, size) > line_in:
            size -= 0.5
        footer = fit(self.title, line_in - text_width_in(stamp, size), size) + stamp
        artists.append(put_text(fig, MARGIN_IN, h - 0.47, footer, size, color=MUTED,
                                gid="chrome:footer"))
        artists.append(put_text(fig, w - MARGIN_IN, h - 0.47,
                                f"page {page} of {self.n_pages}", SIZE["chrome"],
                                color=MUTED, ha="right", gid="chrome:page"))
        return artists


# ----------------------------------------------------------------------------- flowing blocks

class Block:
    """A piece of a text page: knows its height at a width, draws itself, and may split
    (a table by rows) when a page has no room for all of it."""

    space_before_in = 0.0

    def height(self, width_in: float) -> float:
        raise NotImplementedError

    def draw(self, fig: Figure, x_in: float, y_in: float, width_in: float) -> None:
        raise NotImplementedError

    def split(self, room_in: float, width_in: float) -> tuple["Block", "Block"] | None:
        """(what fits in ``room_in``, the rest), or None when it cannot be split."""
        return None


@dataclass
class Spacer(Block):
    size_in: float

    def height(self, width_in: float) -> float:
        return self.size_in

    def draw(self, fig, x_in, y_in, width_in) -> None:
        pass


@dataclass
class Heading(Block):
    text: str
    size: float = SIZE["heading"]
    color: str = INK
    space_before_in: float = 0.16

    def height(self, width_in: float) -> float:
        return len(wrap(self.text, width_in, self.size, "bold")) * line_height_in(self.size) \
            + 0.05

    def draw(self, fig, x_in, y_in, width_in) -> None:
        put_lines(fig, x_in, y_in, wrap(self.text, width_in, self.size, "bold"), self.size,
                  weight="bold", color=self.color)


@dataclass
class Paragraph(Block):
    text: str
    size: float = SIZE["body"]
    color: str = INK
    weight: str = "normal"
    style: str = "normal"
    bullet: bool = False
    space_before_in: float = 0.04

    def _lines(self, width_in: float) -> list[str]:
        indent = 0.16 if self.bullet else 0.0
        return wrap(self.text, width_in - indent, self.size, self.weight)

    def height(self, width_in: float) -> float:
        return len(self._lines(width_in)) * line_height_in(self.size)

    def draw(self, fig, x_in, y_in, width_in) -> None:
        indent = 0.16 if self.bullet else 0.0
        if self.bullet:
            put_text(fig, x_in + 0.03, y_in, "•", self.size, color=self.color)
        put_lines(fig, x_in + indent, y_in, self._lines(width_in), self.size,
                  weight=self.weight, style=self.style, color=self.color)

    def split(self, room_in, width_in):
        lines = self._lines(width_in)
        fit = int(room_in // line_height_in(self.size))
        if fit < 2 or fit >= len(lines) or len(lines) - fit < 2:
            return None
        head = " ".join(lines[:fit])
        tail = " ".join(lines[fit:])
        return (Paragraph(head, self.size, self.color, self.weight, self.style, self.bullet,
                          self.space_before_in),
                Paragraph(tail, self.size, self.color, self.weight, self.style, False, 0.0))


@dataclass
class KeyValues(Block):
    """Label: value lines, labels in a column of their own."""

    pairs: list[tuple[str, str]]
    key_width_in: float = 1.7
    size: float = SIZE["body"]
    space_before_in: float = 0.04
    row_gap_in: float = 0.035

    def _rows(self, width_in: float) -> list[tuple[list[str], list[str]]]:
        return [(wrap(k, self.key_width_in - 0.1, self.size, "bold"),
                 wrap(v, width_in - self.key_width_in, self.size)) for k, v in self.pairs]

    def height(self, width_in: float) -> float:
        step = line_height_in(self.size)
        return sum(max(len(k), len(v)) * step + self.row_gap_in
                   for k, v in self._rows(width_in))

    def draw(self, fig, x_in, y_in, width_in) -> None:
        step = line_height_in(self.size)
        for k, v in self._rows(width_in):
            put_lines(fig, x_in, y_in, k, self.size, weight="bold", color=MUTED)
            put_lines(fig, x_in + self.key_width_in, y_in, v, self.size)
            y_in += max(len(k), len(v)) * step + self.row_gap_in

    def split(self, room_in, width_in):
        rows = self._rows(width_in)
        step = line_height_in(self.size)
        used, n = 0.0, 0
        for k, v in rows:
            h = max(len(k), len(v)) * step + self.row_gap_in
            if used + h > room_in:
                break
            used, n = used + h, n + 1
        if n == 0 or n == len(rows):
            return None
        return (KeyValues(self.pairs[:n], self.key_width_in, self.size, self.space_before_in),
                KeyValues(self.pairs[n:], self.key_width_in, self.size, 0.0))


@dataclass
class Callout(Block):
    """Paragraphs in a coloured box: the cover's warnings."""

    title: str
    items: list[str]
    edge: str = WARN_EDGE
    fill: str = WARN_FILL
    size: float = SIZE["body"]
    space_before_in: float = 0.14
    pad_in: float = 0.1

    def _lines(self, width_in: float) -> list[list[str]]:
        inner = width_in - 2 * self.pad_in - 0.16
        return [wrap(item, inner, self.size) for item in self.items]

    def height(self, width_in: float) -> float:
        step = line_height_in(self.size)
        return (2 * self.pad_in + line_height_in(self.size + 0.5) + 0.04
                + sum(len(lines) * step + 0.04 for lines in self._lines(width_in)))

    def draw(self, fig, x_in, y_in, width_in) -> None:
        put_rect(fig, x_in, y_in, width_in, self.height(width_in), fill=self.fill,
                 edge=self.edge, lw=1.0, gid="callout")
        put_rect(fig, x_in, y_in, 0.06, self.height(width_in), fill=self.edge)
        y = y_in + self.pad_in
        put_text(fig, x_in + self.pad_in + 0.05, y, self.title, self.size + 0.5,
                 weight="bold", color=self.edge)
        y += line_height_in(self.size + 0.5) + 0.04
        for lines in self._lines(width_in):
            put_text(fig, x_in + self.pad_in + 0.07, y, "•", self.size)
            y += put_lines(fig, x_in + self.pad_in + 0.23, y, lines, self.size) + 0.04


@dataclass(frozen=True)
class Cell:
    """A text a table drew and the box of its cell (inches from the page's top left)."""

    text: Text
    left_in: float
    right_in: float
    top_in: float
    bottom_in: float


@dataclass
class Table(Block):
    """Columns and rows of cell texts; rows are tinted by their alarm level with a bar of
    the level's colour at the left; a row with ``merged`` text spans every column after the
    first.

    Column widths follow their content (the widest line of header and cells), any room
    left shared out.  When the content is too wide the columns wrap, the left-aligned
    (text) columns first, but none narrower than its longest word: a word is never split
    over lines ("emergenc / y").  When even the longest words do not fit side by side, the
    column whose longest word takes the most room is set smaller, half a point at a time
    down to ``MIN_TABLE_SIZE``.  ``widths_in`` given: those widths, each widened to its
    longest word at the expense of the others' spare room.  Widths and sizes are fixed
    before a table is split, so its pages line up."""

    columns: tuple[Column, ...]
    rows: list[Row]
    size: float = SIZE["table"]
    space_before_in: float = 0.06
    pad_in: float = 0.04
    zebra: bool = True
    widths_in: tuple[float, ...] | None = None
    sizes_pt: tuple[float, ...] | None = None  # of each column; None: ``size``, or smaller
    _layouts: dict = field(default_factory=dict, init=False, repr=False, compare=False)

    # ------------------------------------------------------------------ column widths

    def _layout(self, width_in: float) -> tuple[list[float], list[float]]:
        """(width, font size) of each column in a table ``width_in`` wide."""
        if self.widths_in is not None and self.sizes_pt is not None:
            return list(self.widths_in), list(self.sizes_pt)
        if width_in not in self._layouts:
            sizes = list(self.sizes_pt or [self.size] * len(self.columns))
            least = self._least_widths(sizes)
            while sum(least) > width_in:
                smaller = [i for i, s in enumerate(sizes) if s > MIN_TABLE_SIZE]
                if not smaller:  # words too long for any size (a huge name): they are cut
                    least = _squeezed(least, width_in)
                    break
                widest = max(smaller, key=lambda i: least[i])
                sizes[widest] = max(MIN_TABLE_SIZE, sizes[widest] - 0.5)
                least = self._least_widths(sizes)
            wanted = (list(self.widths_in) if self.widths_in is not None
                      else self._natural_widths(sizes))
            self._layouts[width_in] = (self._share(wanted, self._body_widths(sizes), least,
                                                   width_in), sizes)
        widths, sizes = self._layouts[width_in]
        return list(widths), list(sizes)

    def _column_lines(self, i: int) -> list[tuple[str, str]]:
        """(line, weight) of the header and every cell of column ``i`` (a merged row's
        first cell only)."""
        c = self.columns[i]
        lines = [(line, "bold") for line in c.header.split("\n")]
        return lines + [(line, "normal") for r in self.rows if r.merged is None or i == 0
                        for line in r.cells.get(c.key, "").split("\n")]

    def _room_for(self, text_in: float) -> float:
        """The column width in which a line ``text_in`` wide fits (``_cell_lines``)."""
        return text_in / WRAP_SLACK + 2 * self.pad_in + 0.03

    def _natural_widths(self, sizes: list[float]) -> list[float]:
        """Each column as wide as its widest line."""
        return [self._room_for(max(text_width_in(t, size, w)
                                   for t, w in self._column_lines(i)))
                for i, size in enumerate(sizes)]

    def _body_widths(self, sizes: list[float]) -> list[float]:
        """Each column as wide as its widest cell line, its header wrapped to its longest
        word."""
        out = []
        for i, size in enumerate(sizes):
            header = self.columns[i].header.split("\n")
            widths = [text_width_in(word, size, "bold") for t in header for word in t.split()]
            widths += [text_width_in(t, size, w) for t, w in self._column_lines(i)[len(header):]]
            out.append(self._room_for(max(widths, default=0.0)))
        return out

    def _least_widths(self, sizes: list[float]) -> list[float]:
        """Each column as wide as its longest word."""
        return [self._room_for(max(text_width_in(word, size, w)
                                   for t, w in self._column_lines(i) for word in t.split(" ")))
                for i, size in enumerate(sizes)]

    def _share(self, wanted: list[float], body: list[float], least: list[float],
               width_in: float) -> list[float]:
        """Widths summing to ``width_in``: ``wanted`` (each at least its ``least``) scaled
        up when it is narrower; else the columns narrowed, in proportion to what each can
        give: first their headers wrapped (down to ``body``, the widest cell), then the text
        columns wrapped (they wrap the most readably), then any column, never below its
        ``least``."""
        out = [max(w, low) for w, low in zip(wanted, least)]
        if sum(out) <= width_in:
            return [w * width_in / sum(out) for w in out]
        every = range(len(out))
        text = [i for i, c in enumerate(self.columns) if c.align == "left"]
        for group, floor in ((every, body), (text, least), (every, least)):
            excess = sum(out) - width_in
            low = [max(f, lo) for f, lo in zip(floor, least)]
            spare = {i: out[i] - low[i] for i in group if out[i] > low[i]}
            give = sum(spare.values())
            if excess <= 1e-9 or give <= 0:
                continue
            for i, room in spare.items():
                out[i] -= room * min(1.0, excess / give)
        return out

    # ------------------------------------------------------------------ rows

    def _cell_lines(self, text: str, width_in: float, size: float,
                    weight: str = "normal") -> list[str]:
        return wrap(text, width_in - 2 * self.pad_in - 0.02, size, weight)

    def _row_lines(self, row: Row, widths: list[float], sizes: list[float]
                   ) -> list[list[str]]:
        if row.merged is not None:
            first = self._cell_lines(row.cells.get(self.columns[0].key, ""), widths[0],
                                     sizes[0])
            return [first, self._cell_lines(row.merged, sum(widths[1:]), self.size)]
        return [self._cell_lines(row.cells.get(c.key, ""), w, s)
                for c, w, s in zip(self.columns, widths, sizes)]

    def _header_height(self, widths: list[float], sizes: list[float]) -> float:
        return max(len(self._cell_lines(c.header, w, s, "bold")) * line_height_in(s)
                   for c, w, s in zip(self.columns, widths, sizes)) + 2 * self.pad_in

    def _row_height(self, row: Row, widths: list[float], sizes: list[float]) -> float:
        lines = self._row_lines(row, widths, sizes)
        row_sizes = [sizes[0], self.size] if row.merged is not None else sizes
        return max(len(cell) * line_height_in(s) for cell, s in zip(lines, row_sizes)) \
            + 2 * self.pad_in

    def height(self, width_in: float) -> float:
        widths, sizes = self._layout(width_in)
        return self._header_height(widths, sizes) + sum(self._row_height(r, widths, sizes)
                                                        for r in self.rows)

    def split(self, room_in, width_in):
        widths, sizes = self._layout(width_in)
        used = self._header_height(widths, sizes)
        n = 0
        for r in self.rows:
            used += self._row_height(r, widths, sizes)
            if used > room_in:
                break
            n += 1
        if n == 0 or n == len(self.rows):
            return None
        fixed = {"size": self.size, "pad_in": self.pad_in, "zebra": self.zebra,
                 "widths_in": tuple(widths), "sizes_pt": tuple(sizes)}
        return (Table(self.columns, self.rows[:n], space_before_in=self.space_before_in,
                      **fixed),
                Table(self.columns, self.rows[n:], space_before_in=0.0, **fixed))

    def draw(self, fig, x_in, y_in, width_in) -> None:
        self.draw_cells(fig, x_in, y_in, width_in)

    def draw_cells(self, fig: Figure, x_in: float, y_in: float, width_in: float
                   ) -> list[Cell]:
        """Draw the table; each text drawn with the box of its cell (header cells too), so
        that what is drawn can be measured against where it must stay."""
        cells: list[Cell] = []
        widths, sizes = self._layout(width_in)
        lefts = [x_in + sum(widths[:i]) for i in range(len(widths))]
        hh = self._header_height(widths, sizes)
        put_rect(fig, x_in, y_in, width_in, hh, fill=TABLE_HEAD_FILL)
        for c, left, w, s in zip(self.columns, lefts, widths, sizes):
            lines = self._cell_lines(c.header, w, s, "bold")
            texts = self._put_cell(fig, lines, c.align, left, w, y_in + self.pad_in, s,
                                   weight="bold", color="#333333")
            cells += [Cell(t, left, left + w, y_in, y_in + hh) for t in texts]
        put_rule(fig, y_in + hh, x_in, x_in + width_in, color="#7A7A7A", lw=0.8)
        y = y_in + hh
        for i, row in enumerate(self.rows):
            rh = self._row_height(row, widths, sizes)
            colour = level_colour(row.level, row.rank)
            if colour:
                put_rect(fig, x_in, y, width_in, rh, fill=_tint(colour, 0.20),
                         gid=f"row:{row.serial_number}:{row.level}")
                put_rect(fig, x_in, y, 0.05, rh, fill=colour)
            elif self.zebra and i % 2 == 1:
                put_rect(fig, x_in, y, width_in, rh, fill="#F7F7F7")
            self._light_cells(fig, row, lefts, widths, y, rh)
            lines = self._row_lines(row, widths, sizes)
            if row.merged is not None:
                texts = self._put_cell(fig, lines[0], self.columns[0].align, lefts[0],
                                       widths[0], y + self.pad_in, sizes[0])
                cells += [Cell(t, lefts[0], lefts[0] + widths[0], y, y + rh) for t in texts]
                texts = self._put_cell(fig, lines[1], "left", lefts[1], sum(widths[1:]),
                                       y + self.pad_in, self.size, style="italic",
                                       color=MUTED)
                cells += [Cell(t, lefts[1], x_in + width_in, y, y + rh) for t in texts]
            else:
                for c, cell, left, w, s in zip(self.columns, lines, lefts, widths, sizes):
                    texts = self._put_cell(fig, cell, c.align, left, w, y + self.pad_in, s)
                    cells += [Cell(t, left, left + w, y, y + rh) for t in texts]
            y += rh
            put_rule(fig, y, x_in, x_in + width_in, color="#D5D5D5", lw=0.5)
        return cells

    def _light_cells(self, fig, row: Row, lefts, widths, y: float, height: float) -> None:
        """The row's lit cells (a point's H and V lights) filled in their level's colour,
        stronger than the row's tint (``light:<serial>:<direction>:<level>``)."""
        keys = [c.key for c in self.columns]
        for key, (level, rank) in row.lights.items():
            colour = level_colour(level, rank)
            if colour and key in keys:
                i = keys.index(key)
                put_rect(fig, lefts[i], y, widths[i], height, fill=_tint(colour, 0.55),
                         gid=f"light:{row.serial_number}:{key.split(':', 1)[1]}:{level}")

    def _put_cell(self, fig, lines, align, left, width, y, size, **kw) -> list[Text]:
        x = {"left": left + self.pad_in + 0.03,
             "right": left + width - self.pad_in,
             "center": left + width / 2}[align]
        return put_line_texts(fig, x, y, lines, size, ha=align, **kw)


def _squeezed(widths: list[float], total_in: float) -> list[float]:
    """``widths`` made to sum to ``total_in`` by narrowing only the widest, all to one
    width: the narrow columns keep their room (a huge name cuts its own column, not the
    others')."""
    cap = total_in / len(widths)
    for n_wide, width in enumerate(sorted(widths, reverse=True), 1):
        narrow = sorted(widths, reverse=True)[n_wide:]
        cap = (total_in - sum(narrow)) / n_wide
        if not narrow or cap >= narrow[0]:
            break
    return [min(w, cap) for w in widths]


def _tint(colour: str, share: float) -> tuple[float, float, float]:
    """``colour`` mixed with white: ``share`` of the colour (a light row background on which
    black text stays readable)."""
    from matplotlib.colors import to_rgb

    r, g, b = to_rgb(colour)
    return (1 - share * (1 - r), 1 - share * (1 - g), 1 - share * (1 - b))


@dataclass
class FlowPage:
    """The blocks of one page, as ``paginate`` placed them."""

    blocks: list[Block] = field(default_factory=list)


def paginate(blocks: list[Block], width_in: float = CONTENT_WIDTH_IN,
             top_in: float = CONTENT_TOP_IN, bottom_in: float = CONTENT_BOTTOM_IN,
             first_top_in: float | None = None) -> list[FlowPage]:
    """Blocks laid out top to bottom over as many pages as they need; a block that does not
    fit is split when it can (tables by rows, paragraphs by lines) or moved to the next
    page; a heading is never left alone at the bottom of a page."""
    pages = [FlowPage()]
    y = first_top_in if first_top_in is not None else top_in
    queue = list(blocks)
    while queue:
        block = queue.pop(0)
        gap = block.space_before_in if pages[-1].blocks else 0.0
        h = block.height(width_in)
        room = bottom_in - y - gap
        keep_with_next = isinstance(block, Heading) and queue
        need = h + (min(queue[0].height(width_in), 0.6) if keep_with_next else 0.0)
        if need <= room + 1e-6:
            pages[-1].blocks.append(block)
            y += gap + h
            continue
        parts = None if keep_with_next else block.split(room, width_in)
        if parts is not None:
            pages[-1].blocks.append(parts[0])
            queue.insert(0, parts[1])
        elif not pages[-1].blocks and y == top_in:
            pages[-1].blocks.append(block)  # taller than a page, cannot split: draw it anyway
            y += h
            continue
        else:
            queue.insert(0, block)
            if len(pages[-1].blocks) > 1 and isinstance(pages[-1].blocks[-1], Heading):
                queue.insert(0, pages[-1].blocks.pop())  # the heading goes with its block
        pages.append(FlowPage())
        y = top_in
    return pages


def draw_flow(fig: Figure, page: FlowPage, x_in: float = MARGIN_IN,
              width_in: float = CONTENT_WIDTH_IN, top_in: float = CONTENT_TOP_IN) -> float:
    """Draw a page's blocks from ``top_in``; returns where they end (inches)."""
    y = top_in
    for i, block in enumerate(page.blocks):
        if i:
            y += block.space_before_in
        block.draw(fig, x_in, y, width_in)
        y += block.height(width_in)
    return y


def dedent(text: str) -> str:
    """A triple-quoted paragraph as one line (for the methods page's long texts)."""
    return " ".join(textwrap.dedent(text).split())

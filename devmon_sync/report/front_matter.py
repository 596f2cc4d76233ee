"""The parts of a report a consultancy adds around the data: the title block on the cover
(project, client, report number, revision, date, prepared by, checked by) and the
engineer's comments.

A field not given is drawn as an empty box, and comments not given as a ruled box, so the
printed report can be completed and signed by hand; nothing is invented.
"""

from __future__ import annotations

from datetime import date

from devmon_sync.report import layout
from devmon_sync.report.details import TITLE_FIELDS, ReportDetails
from devmon_sync.report.layout import SIZE, Block, Paragraph

CELL_H_IN = 0.40  # one title-block cell: label line and value line
CELL_PAD_IN = 0.07
VALUE_MIN_PT = 7.0  # a title-block value is set down to this on one line, then on two
VALUE_SMALLEST_PT = 6.5
BOX_EDGE = "#9A9A9A"
COMMENT_LINES = 14  # ruled lines of an empty comments box
COMMENT_LINE_IN = 0.34


def title_values(details: ReportDetails, made: date) -> list[tuple[str, str]]:
    """(label, value) of each title-block field; the date is the one given, else the day
    the report was made; a field not given is ``""`` (its box is left to fill in)."""
    out = []
    for key, label in TITLE_FIELDS:
        value = getattr(details, key)
        if key == "date":
            value = (value or made).isoformat()
        out.append((label, value or ""))
    return out


class TitleBlock(Block):
    """The title block: boxes two or three to a row, each with a small label over its
    value.  A value too long for its box is set smaller, then over two lines (its row
    grows), and only then cut with an ellipsis: a long project name stays whole."""

    space_before_in = 0.0

    def __init__(self, values: list[tuple[str, str]]):
        self.values = values

    def _rows(self) -> list[list[tuple[str, str]]]:
        """Project and client; report number, revision and date; prepared and checked by
        (the order of ``TITLE_FIELDS``)."""
        v = self.values
        return [v[0:2], v[2:5], v[5:7]]

    @staticmethod
    def _value_lines(value: str, cell_w_in: float) -> tuple[list[str], float]:
        """(lines, size) of a value in a box ``cell_w_in`` wide: one line down to
        ``VALUE_MIN_PT``, else two lines, smaller still if need be."""
        room = cell_w_in - 2 * CELL_PAD_IN
        lines, size = layout.fit_lines(value, room, SIZE["body"], "bold",
                                       min_size=VALUE_MIN_PT)
        if len(layout.wrap(value, room, size, "bold")) == 1:
            return lines, size
        return layout.fit_lines(value, room, VALUE_MIN_PT, "bold", max_lines=2,
                                min_size=VALUE_SMALLEST_PT)

    def _row_height(self, row: list[tuple[str, str]], width_in: float) -> float:
        """A cell's height, and a line more for a value over two lines."""
        extra = 0.0
        for _, value in row:
            lines, size = self._value_lines(value, width_in / len(row))
            extra = max(extra, (len(lines) - 1) * layout.line_height_in(size))
        return CELL_H_IN + extra

    def height(self, width_in: float) -> float:
        return sum(self._row_height(row, width_in) for row in self._rows())

    def draw(self, fig, x_in, y_in, width_in) -> None:
        y = y_in
        for row in self._rows():
            cell_w, cell_h = width_in / len(row), self._row_height(row, width_in)
            for c, (label, value) in enumerate(row):
                x = x_in + c * cell_w
                layout.put_rect(fig, x, y, cell_w, cell_h, edge=BOX_EDGE, lw=0.6)
                layout.put_text(fig, x + CELL_PAD_IN, y + 0.04, label, SIZE["chrome"],
                                color=layout.MUTED)
                if value:
                    lines, size = self._value_lines(value, cell_w)
                    step = layout.line_height_in(size)
                    for i, line in enumerate(lines):
                        layout.put_text(fig, x + CELL_PAD_IN, y + 0.19 + i * step, line, size,
                                        weight="bold", gid=f"title-block:{label}")
            y += cell_h


class RuledBox(Block):
    """An empty box with ruled lines, for comments written by hand on the printed page."""

    space_before_in = 0.1

    def __init__(self, lines: int = COMMENT_LINES):
        self.lines = lines

    def height(self, width_in: float) -> float:
        return (self.lines + 0.5) * COMMENT_LINE_IN

    def draw(self, fig, x_in, y_in, width_in) -> None:
        layout.put_rect(fig, x_in, y_in, width_in, self.height(width_in), edge=BOX_EDGE,
                        lw=0.8, gid="comments:box")
        for i in range(1, self.lines + 1):
            layout.put_rule(fig, y_in + i * COMMENT_LINE_IN, x_in + 0.12,
                            x_in + width_in - 0.12, color="#D0D0D0", lw=0.5)


def comment_blocks(details: ReportDetails) -> list[Block]:
    """The comments as paragraphs (a blank line starts a new one), or a ruled box."""
    text = (details.comments or "").strip()
    if not text:
        return [Paragraph("No comments were given with this report (--comments or "
                          "--comments-file, or comments in the details file); the box is "
                          "left for the engineer's hand-written assessment.",
                          size=SIZE["small"], color=layout.MUTED, style="italic",
                          space_before_in=0.0),
                RuledBox()]
    paragraphs = [" ".join(p.split()) for p in text.replace("\r\n", "\n").split("\n\n")]
    return [Paragraph(p, space_before_in=0.0 if i == 0 else 0.1)
            for i, p in enumerate(paragraphs) if p]


def signature_line(details: ReportDetails) -> list[Block]:
    """Who wrote and checked the comments, under them (blank names: lines to sign)."""
    return [Paragraph(f"Prepared by: {details.author or '____________________'}      "
                      f"Checked by: {details.checker or '____________________'}",
                      size=SIZE["small"], space_before_in=0.3)]

"""What a consultancy's report states besides the data: the title block (project, client,
report number, author, checker, revision, date), the engineer's comments and the site's
point numbers.

They come from a small TOML file kept per site or project (``--details FILE``), and from
command-line options that override it; the GUI fills the same ``ReportDetails``.  TOML
because Python reads it without a dependency (``tomllib``) and an engineer edits it by
hand.  A file devmon cannot read, or a key it does not know, is a ``ReportError`` naming
the file, the key and what is expected: a misspelt ``cheker`` must not silently leave the
checker's box empty.

Example::

    project = "Illgraben slope monitoring"
    client = "Canton of Valais"
    report_number = "IG-2026-047"
    author = "A. Engineer"
    checker = "B. Checker"
    revision = "B"
    date = 2026-11-26
    comments = '''
    Creep on the lower slope continued at about 1 mm/day.
    '''

    [points]  # device name or serial number = point number
    "gnss-creep-001" = "P1"
    DM24-33757 = "P7"
"""

from __future__ import annotations

import tomllib
from dataclasses import dataclass, field, fields, replace
from datetime import date, datetime
from pathlib import Path

from devmon_sync.report.errors import ReportError

#: Title-block fields in the order the cover shows them, with their labels.
TITLE_FIELDS = (("project", "Project"), ("client", "Client"),
                ("report_number", "Report no."), ("revision", "Revision"),
                ("date", "Date"), ("author", "Prepared by"), ("checker", "Checked by"))
_TEXT_KEYS = ("project", "client", "report_number", "author", "checker", "revision",
              "comments")
MAX_POINT_NUMBER_CHARS = 12  # drawn beside the marker on a plan


@dataclass(frozen=True)
class ReportDetails:
    """The title block, comments and point numbers of a report; None or empty: not given
    (the cover then leaves the box to fill in by hand).  ``date`` is the report's date as
    issued (default: the day it was made).  ``point_numbers`` maps a device's name or
    serial number (any case) to its point number."""

    project: str | None = None
    client: str | None = None
    report_number: str | None = None
    author: str | None = None
    checker: str | None = None
    revision: str | None = None
    date: date | None = None
    comments: str | None = None
    point_numbers: tuple[tuple[str, str], ...] = ()
    source: str | None = field(default=None, compare=False)  # the file read, for messages

    def over(self, base: "ReportDetails") -> "ReportDetails":
        """These details where given, ``base``'s elsewhere (options over a file); point
        numbers merged, these winning."""
        given = {f.name: getattr(self, f.name) for f in fields(self)
                 if f.name not in ("point_numbers", "source")
                 and getattr(self, f.name) not in (None, "")}
        numbers = dict(base.point_numbers)
        numbers.update(self.point_numbers)
        return replace(base, **given, point_numbers=tuple(numbers.items()),
                       source=self.source or base.source)


def load_details(path: str | Path) -> ReportDetails:
    """The details in a TOML file; a ReportError saying what is wrong and where."""
    path = Path(path)
    try:
        with path.open("rb") as f:
            doc = tomllib.load(f)
    except FileNotFoundError:
        raise ReportError(f"no report details file {path}: give the path of an existing "
                          f"TOML file, or none") from None
    except OSError as err:
        raise ReportError(f"cannot read {path}: {err.strerror or err}") from None
    except (tomllib.TOMLDecodeError, UnicodeDecodeError) as err:
        raise ReportError(f"{path} is not valid TOML ({err}): fix the file; text values "
                          f'need quotes, e.g. client = "Canton of Valais"') from None
    return details_from_mapping(doc, str(path))


def details_from_mapping(doc: dict, source: str) -> ReportDetails:
    """``ReportDetails`` from a parsed TOML document; a ReportError for an unknown key or a
    value of the wrong kind."""
    known = set(_TEXT_KEYS) | {"date", "points"}
    unknown = sorted(set(doc) - known)
    if unknown:
        raise ReportError(f"{source}: unknown key{'s' if len(unknown) > 1 else ''} "
                          f"{', '.join(unknown)}; the keys are {', '.join(sorted(known))}")
    values: dict = {}
    for key in _TEXT_KEYS:
        if key in doc:
            values[key] = _text(doc[key], key, source)
    if "date" in doc:
        values["date"] = _date(doc["date"], source)
    if "points" in doc:
        values["point_numbers"] = _points(doc["points"], source)
    return ReportDetails(**values, source=source)


def _text(value, key: str, source: str) -> str | None:
    if isinstance(value, (int, float)) and not isinstance(value, bool):
        return str(value)  # report_number = 47, revision = 2
    if not isinstance(value, str):
        raise ReportError(f"{source}: {key} must be text, e.g. {key} = \"...\"")
    return value.strip() or None


def _date(value, source: str) -> date:
    if isinstance(value, datetime):
        return value.date()
    if isinstance(value, date):
        return value
    if isinstance(value, str):
        return parse_date(value, f"{source}: date")
    raise ReportError(f"{source}: date must be a date, e.g. date = 2026-11-26")


def parse_date(text: str, what: str = "the report date") -> date:
    """``YYYY-MM-DD`` as a date; a ReportError naming ``what`` otherwise."""
    try:
        return date.fromisoformat(text.strip())
    except ValueError:
        raise ReportError(f"{what} {text!r} is not a date: write it as YYYY-MM-DD, e.g. "
                          f"2026-11-26") from None


def _points(table, source: str) -> tuple[tuple[str, str], ...]:
    if not isinstance(table, dict):
        raise ReportError(f'{source}: points must be a table of device = "number" lines '
                          f'under [points]')
    out = []
    for device, number in table.items():
        if isinstance(number, int) and not isinstance(number, bool):
            number = str(number)
        if not isinstance(number, str) or not number.strip():
            raise ReportError(f'{source}: the point number of {device!r} must be text, e.g. '
                              f'"{device}" = "P1"')
        if len(number.strip()) > MAX_POINT_NUMBER_CHARS:
            raise ReportError(f"{source}: the point number of {device!r} ({number!r}) is "
                              f"longer than {MAX_POINT_NUMBER_CHARS} characters: a plan "
                              f"shows it beside the marker; shorten it")
        out.append((device.strip(), number.strip()))
    return tuple(out)

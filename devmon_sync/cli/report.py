"""``devmon report``: a PDF report of GNSS deformation, a thin wrapper over
``devmon_sync.report`` (which the GUI calls too).

Options are parsed and checked here, before anything slow runs (the output path is checked
before the analyses); every number and page comes from ``build_report`` and
``write_report``.
"""

from __future__ import annotations

import shlex
import sys
from datetime import datetime, timezone

from devmon_sync.cli.args import (UsageError, add_analysis_arguments, add_db_argument,
                                  add_jobs_argument, add_open_argument, open_existing_mirror,
                                  open_written, png_dpi, timestamp)
from devmon_sync.printable import printable
from devmon_sync.report.resolution import PNG_DPI


def add_report(sub) -> None:
    p = sub.add_parser(
        "report", help="PDF report of the deformation of GNSS rovers",
        description="Write an A4 PDF report of the mirrored GNSS rovers of a site, a device "
                    "group or a list of devices: cover with the data's age, summary table, "
                    "per rover displacement, trajectory, velocity and (where relevant) "
                    "inverse velocity with data-quality notes, a site plan, and the methods. "
                    "Every number is the one `devmon analyze` prints.")
    add_db_argument(p, "mirror file")
    scope = p.add_mutually_exclusive_group(required=True)
    scope.add_argument("--device", action="append", metavar="SERIAL",
                       help="a device's serial number (repeatable)")
    scope.add_argument("--site", metavar="UUID|NAME", help="every device of a site")
    scope.add_argument("--group", metavar="UUID|NAME",
                       help="every device of a device group and of its nested groups")
    p.add_argument("--out", required=True, metavar="FILE.pdf", help="the PDF to write")
    p.add_argument("--png-dir", metavar="DIR",
                   help="also write each figure as a PNG into this folder")
    p.add_argument("--png-dpi", type=png_dpi, default=PNG_DPI, metavar="DPI",
                   help=f"resolution of those PNGs (default {PNG_DPI}; 300 for print, 100 "
                        "for a web page or an e-mail)")
    p.add_argument("--from", dest="start", type=timestamp,
                   help="first epoch to use (default: the first in the mirror)")
    p.add_argument("--to", dest="end", type=timestamp,
                   help="last epoch to use (default: the newest in the mirror)")
    p.add_argument("--projection", default="enu", metavar="ID|EPSG:CODE|enu",
                   help="frame of the displacements: a projection id of the site, an EPSG "
                        "code or PROJ string, or enu (local east-north-up; default)")
    add_analysis_arguments(p)
    p.add_argument("--title", help="the report's title (default: GNSS deformation report: "
                                   "<site, group or device>)")
    _add_details_arguments(p)
    add_open_argument(p)
    add_jobs_argument(p, pages=True)
    p.set_defaults(func=run_report)


#: Title-block options: (option, ReportDetails field, help).
DETAIL_OPTIONS = (
    ("--project", "project", "the project's name, on the cover's title block"),
    ("--client", "client", "the client the report is for"),
    ("--report-number", "report_number", "the report's number (also in every page's footer)"),
    ("--revision", "revision", "the report's revision, e.g. A or 2"),
    ("--author", "author", "who prepared the report"),
    ("--checker", "checker", "who checked it"),
)


def _add_details_arguments(p) -> None:
    g = p.add_argument_group(
        "title block and comments",
        "Given as options, or in a TOML file per site or project (--details); options win "
        "over the file. A field not given is left as an empty box to fill in by hand. The "
        "file takes the keys project, client, report_number, revision, author, checker, "
        "date, comments and a [points] table of device name or serial = point number.")
    g.add_argument("--details", metavar="FILE.toml",
                   help="the report details file (title block, comments, point numbers)")
    for option, _field, text in DETAIL_OPTIONS:
        g.add_argument(option, help=text)
    g.add_argument("--date", dest="report_date", metavar="YYYY-MM-DD",
                   help="the report's date as issued (default: the day it is made)")
    comments = g.add_mutually_exclusive_group()
    comments.add_argument("--comments", metavar="TEXT",
                          help="the engineer's comments (a blank line starts a paragraph)")
    comments.add_argument("--comments-file", metavar="FILE",
                          help="the engineer's comments, read from a text file")


def details_of(args):
    """The report details of the options over those of ``--details``; a ReportError for a
    file that cannot be read or a bad date."""
    from devmon_sync.report.details import ReportDetails, load_details, parse_date

    base = load_details(args.details) if args.details else ReportDetails()
    given = {field: getattr(args, field) for _option, field, _text in DETAIL_OPTIONS}
    if args.report_date:
        given["date"] = parse_date(args.report_date, "--date")
    given["comments"] = args.comments or (_read_comments(args.comments_file)
                                          if args.comments_file else None)
    return ReportDetails(**given).over(base)


def _read_comments(path: str) -> str:
    from devmon_sync.report import ReportError
    try:
        with open(path, encoding="utf-8") as f:
            return f.read()
    except OSError as err:
        raise ReportError(f"cannot read the comments file {path}: {err.strerror or err}; "
                          f"give a text file") from None
    except UnicodeDecodeError:
        raise ReportError(f"the comments file {path} is not UTF-8 text: save it as UTF-8"
                          ) from None


def _iso(t: datetime) -> str:
    return t.astimezone(timezone.utc).strftime("%Y-%m-%dT%H:%M:%SZ")


def command_line(args) -> str:
    """The command as the methods page states it: every option in effect, in a fixed
    order, so the same request always reads the same."""
    parts = ["devmon", "report", "--db", args.db]
    for serial in args.device or ():
        parts += ["--device", serial]
    for option, value in (("--site", args.site), ("--group", args.group),
                          ("--out", args.out), ("--png-dir", args.png_dir)):
        if value:
            parts += [option, value]
    if args.png_dir and args.png_dpi != PNG_DPI:
        parts += ["--png-dpi", str(args.png_dpi)]
    if args.start:
        parts += ["--from", _iso(args.start)]
    if args.end:
        parts += ["--to", _iso(args.end)]
    parts += ["--projection", args.projection, "--reference", args.reference,
              "--method", args.method]
    if args.title:
        parts += ["--title", args.title]
    for option, dest in ([("--details", "details")]
                         + [(o, f) for o, f, _ in DETAIL_OPTIONS]
                         + [("--date", "report_date"), ("--comments-file", "comments_file")]):
        if getattr(args, dest, None):
            parts += [option, getattr(args, dest)]
    if getattr(args, "comments", None):
        parts += ["--comments", "(the text on the comments page)"]
    return shlex.join(parts)


def run_report(args) -> int:
    from devmon_sync.report import (ReportError, ReportOptions, build_report, check_output,
                                    write_report)
    from devmon_sync.store import StoreError

    try:
        options = ReportOptions(
            devices=tuple(args.device or ()), site=args.site, group=args.group,
            start=args.start, end=args.end, frame=args.projection, reference=args.reference,
            method=args.method, title=args.title or None, command_line=command_line(args),
            details=details_of(args))
        options.check()
        options.analysis_options()
        check_output(args.out, args.png_dir)
        with open_existing_mirror(args.db) as mirror:
            data = build_report(mirror, options, jobs=args.jobs)
        result = write_report(data, args.out, args.png_dir, png_dpi=args.png_dpi,
                              jobs=args.jobs)
    except (ReportError, StoreError) as err:
        raise UsageError(str(err)) from None
    except KeyboardInterrupt:  # the pool's workers are stopped by now
        print("\nInterrupted: no report written.", file=sys.stderr)
        return 130
    for warning in data.warnings:
        print(f"devmon report: warning: {printable(warning)}", file=sys.stderr)
    n = len(data.analysed)
    print(f"Wrote {result.path}: {result.pages} pages ({n} rover{'s' if n != 1 else ''} analysed, "
          f"data last synced {_when(data.last_synced)}).")
    for section in result.sections:
        print(f"  p. {section.first_page:>3}  {printable(section.title)}")
    if result.png_paths:
        print(f"Wrote {len(result.png_paths)} PNG figures to {args.png_dir}.")
    if args.open:
        open_written(result.path, "devmon report")
    return 0


def _when(t: datetime | None) -> str:
    return "never" if t is None else t.astimezone(timezone.utc).strftime("%Y-%m-%d %H:%M UTC")

"""What the ``devmon`` commands share on the way in: the usage error, every argument type,
and the options several commands take (``--db``, the connection, the service limits,
``--jobs``, ``--open``).

Why one module: a value of one kind is refused in the same words by every command.  A type
refuses with ``refused(text, what, give)``, which argparse prints as one line:
``devmon CMD: error: argument --X: 'TEXT' is not WHAT[: GIVE]``.  Plain numbers (``type=int``
or ``float``: seeds, ``--confidence``) keep argparse's own words, ``invalid int value``.
"""

from __future__ import annotations

import argparse
import math
import os
import re
import sys
from collections.abc import Callable
from datetime import datetime
from typing import TypeVar

from analysis.displacement import DEFAULT_REFERENCE
from devmon_sync.timestamps import parse_timestamp

T = TypeVar("T")


class UsageError(Exception):
    """A problem with what the user asked for; its message says what to change."""


# ------------------------------------------------------------------------ argument types


def refused(text: str, what: str, give: str = "") -> argparse.ArgumentTypeError:
    """The one wording of a refused value: ``'TEXT' is not WHAT[: GIVE]`` (argparse adds
    ``argument --X:`` before it)."""
    return argparse.ArgumentTypeError(f"{text!r} is not {what}" + (f": {give}" if give else ""))


def from_library(parse: Callable[[str], T]) -> Callable[[str], T]:
    """An argument type of a library's parser (``devmon serve --contract``, ``--misbehave``,
    ``--api-key``): its ValueError, in the library's words, as argparse's one line."""
    def checked(text: str) -> T:
        try:
            return parse(text)
        except ValueError as err:
            raise argparse.ArgumentTypeError(str(err)) from None
    checked.__name__ = parse.__name__
    return checked


def _whole(text: str) -> int | None:
    try:
        return int(text)
    except ValueError:
        return None


def _number(text: str) -> float:
    """The finite number ``text`` is, else NaN (which every check below refuses)."""
    try:
        value = float(text)
    except ValueError:
        return math.nan
    return value if math.isfinite(value) else math.nan


def positive_int(text: str) -> int:
    """A count or a limit: a whole number from 1 (sites, devices, points, a budget)."""
    value = _whole(text)
    if value is None or value < 1:
        raise refused(text, "a whole number of at least 1")
    return value


def png_dpi(text: str) -> int:
    """The resolution of PNG figures: a whole number of dots per inch in ``PNG_DPI_RANGE``."""
    from devmon_sync.report.resolution import PNG_DPI_RANGE

    value = _whole(text)
    low, high = PNG_DPI_RANGE
    if value is None or not low <= value <= high:
        raise refused(text, f"a whole number of dots per inch from {low} to {high}")
    return value


def positive_number(text: str) -> float:
    """A finite number above 0 (a range in days)."""
    value = _number(text)
    if not value > 0:
        raise refused(text, "a number above 0")
    return value


def duration(unit: str) -> Callable[[str], float]:
    """A type for a span in ``unit`` (seconds, hours): a finite number, 0 or more."""
    def span(text: str) -> float:
        value = _number(text)
        if not value >= 0:
            raise refused(text, f"a number of {unit}, 0 or more")
        return value
    span.__name__ = unit
    return span


def port(text: str) -> int:
    """A TCP port to listen on: 0 to 65535 (0: any free)."""
    value = _whole(text)
    if value is None or not 0 <= value <= 65535:
        raise refused(text, "a port number from 0 to 65535")
    return value


def share(text: str) -> float:
    """A share of requests from 0 to 1 (the reference server's fault rates)."""
    value = _number(text)
    if not 0.0 <= value <= 1.0:
        raise refused(text, "a share between 0 and 1")
    return value


def sample_share(text: str) -> float:
    """A share of a sample, above 0 and at most 1, as a fraction or a percentage (5%)."""
    value = _number(text.rstrip("%")) / (100.0 if text.endswith("%") else 1.0)
    if not 0.0 < value <= 1.0:
        raise refused(text, "a share like 0.05 or 5%")
    return value


def rate_limit(text: str) -> int:
    """Requests per minute to stay under: a whole number, 0 for no limit."""
    value = _whole(text)
    if value is None or value < 0:
        raise refused(text, "a number of requests per minute",
                      "give a whole number, 0 (no limit) or more")
    return value


def retries(text: str) -> int:
    """Times a request is tried again: 0 to 100 (more would wait for hours)."""
    value = _whole(text)
    if value is None or not 0 <= value <= 100:
        raise refused(text, "a whole number from 0 to 100")
    return value


def jobs(text: str) -> int:
    """``--jobs N``: worker processes, a whole number from 1 (1: serial, in this process)."""
    from devmon_sync.analyze.pool import default_jobs

    value = _whole(text)
    if value is None or value < 1:
        raise refused(text, "a number of processes",
                      f"give a whole number from 1 (1 analyses in this process, one rover "
                      f"after the other), e.g. --jobs {default_jobs()} (this computer's "
                      f"cores, the default)")
    return value


def timestamp(text: str) -> datetime:
    """An ISO 8601 date-time with a timezone (or a plain date, taken as UTC midnight).  A
    date of the right shape that names no day says which part does not exist (month 13,
    2026-02-30): "not an ISO 8601 date-time" would send the user looking at the format."""
    given = text
    if len(text) == 10 and text[4] == "-" and text[7] == "-":
        text += "T00:00:00Z"
    try:
        return parse_timestamp(text)
    except ValueError as err:
        example = "give one like 2026-01-01 or 2026-01-01T00:00:00Z"
        no_such = _no_such_time(text, str(err))
        if no_such:
            part, words = no_such
            what = "a real date" if part in ("month", "day") else "a real time of day"
            raise refused(given, what, f"{words}; {example}") from None
        if "without a timezone" in str(err):
            raise refused(given, "a date-time with a timezone",
                          "add Z for UTC or an offset like +01:00, e.g. 2026-01-01T00:00:00Z"
                          ) from None
        raise refused(given, "an ISO 8601 date or date-time", example) from None


#: Python's words for a part of a date-time out of its range, and the part.
_OUT_OF_RANGE = {"month must be": "month", "day is out of range": "day",
                 "hour must be": "hour", "minute must be": "minute",
                 "second must be": "second"}
_DATE_TIME = re.compile(r"(\d{4})-(\d{2})-(\d{2})(?:T(\d{2})(?::(\d{2})(?::(\d{2}))?)?)?")


def _no_such_time(text: str, error: str) -> tuple[str, str] | None:
    """("month", "there is no month 13 (months run 1 to 12)"): which part of a well-formed
    date-time does not exist, from Python's words for it; None for any other fault."""
    part = next((p for words, p in _OUT_OF_RANGE.items() if words in error), None)
    shape = _DATE_TIME.match(text)
    if part is None or shape is None:
        return None
    year, month, day, hour, minute, second = shape.groups()
    if part == "day":
        return part, f"{year}-{month} has no day {int(day)}"
    value = {"month": month, "hour": hour, "minute": minute, "second": second}[part]
    limits = {"month": "1 to 12", "hour": "0 to 23", "minute": "0 to 59", "second": "0 to 59"}
    return part, f"there is no {part} {int(value or 0)} ({part}s run {limits[part]})"


def alarm_levels(option: str) -> Callable[[str], dict[str, float]]:
    """A type for ``alert=10,alarm=25``: {name: threshold}, checked by ``analysis`` (names,
    ascending positive thresholds); ``option`` names it in the example."""
    def levels(text: str) -> dict[str, float]:
        from analysis.alarms import AlarmLevels

        out: dict[str, float] = {}
        for item in filter(None, (s.strip() for s in text.split(","))):
            name, sep, value = item.partition("=")
            try:
                out[name.strip()] = float(value)
            except ValueError:
                sep = ""
            if not sep:
                raise refused(item, "NAME=NUMBER", f"give e.g. {option} alert=10,alarm=25")
        try:
            AlarmLevels(out)
        except ValueError as err:
            raise argparse.ArgumentTypeError(str(err)) from None
        return out
    return levels


def gnss_levels(base: str) -> Callable[[str], tuple[str, dict[str, float]]]:
    """A type for ``--displacement``/``--velocity`` ``[COMPONENT:]NAME=VALUE,...``: (the
    quantity, e.g. ``displacement:vertical``, its levels); without a component (or with
    ``3d``) the quantity is ``base`` itself, the 3D length."""
    option = f"--{base}"

    def quantity_levels(text: str) -> tuple[str, dict[str, float]]:
        from devmon_sync.store import queries

        head, sep, rest = text.partition(":")
        component = None
        if sep and "=" not in head:
            component, text = head.strip().lower(), rest
            if component not in ("3d", *queries.ALARM_COMPONENTS):
                raise refused(head.strip(), "a component",
                              f"give one of 3d, {', '.join(queries.ALARM_COMPONENTS)}, e.g. "
                              f"{option} vertical:alert=5,alarm=15")
        return queries.alarm_quantity(base, component), alarm_levels(option)(text)
    quantity_levels.__name__ = base
    return quantity_levels


def parameter_levels(text: str) -> tuple[str, dict[str, float]]:
    """``--parameter UUID:NAME=VALUE,...``: (the parameter's quantity, its levels)."""
    from devmon_sync.store import queries

    uuid, sep, rest = text.partition(":")
    if not sep or not uuid.strip():
        raise refused(text, "UUID:NAME=VALUE,...",
                      "give e.g. --parameter 1b6f...:alert=1.5,alarm=2")
    return queries.PARAMETER_QUANTITY + uuid.strip(), alarm_levels("--parameter")(rest)


def alarm_quantity(text: str) -> str:
    """``--clear QUANTITY``: a GNSS quantity (``velocity:up``) or ``parameter:UUID``, as the
    store keys it."""
    from devmon_sync.store import StoreError, queries

    quantity = text.strip()
    if quantity.startswith(queries.PARAMETER_QUANTITY):
        return quantity
    try:
        return queries.alarm_quantity(*queries.split_alarm_quantity(quantity))
    except StoreError as err:
        raise argparse.ArgumentTypeError(str(err)) from None


# ------------------------------------------------------------------ shared options


def add_db_argument(parser, help_text: str = "mirror file") -> None:
    """``--db``: the mirror; by default the one in the user data folder
    (``devmon_sync.paths.default_mirror()``), so a new user needs no path at all."""
    from devmon_sync.paths import default_mirror

    parser.add_argument("--db", default=str(default_mirror()), metavar="FILE",
                        help=f"{help_text} (default: {default_mirror()})")


def open_existing_mirror(path: str, read_only: bool = True):
    """The mirror at ``path`` for a command that reads one: a UsageError, not a new empty
    file, when there is none, and a UsageError with the store's message when it cannot be
    opened (damaged, foreign, newer, locked).  The file is checked whole first unless devmon
    knows it unchanged since its last check or write (``store.integrity``): a command a
    user runs says the file is damaged even when its own reads would miss the damaged part
    (the window's frequent read-only opens do not check)."""
    from devmon_sync.store import Mirror, StoreError

    if not os.path.exists(path):
        raise UsageError(f"no mirror at {path}: run `devmon sync --db {path}` first")
    try:
        return Mirror.open(path, read_only=read_only, check=True, on_upgrade=say_upgrade)
    except StoreError as err:
        raise UsageError(str(err)) from None


def add_jobs_argument(p, pages: bool = False, what: str = "analyse rovers") -> None:
    """``--jobs N``: worker processes for many rovers (``devmon_sync.analyze.pool``) and,
    with ``pages``, a report's pages (``devmon_sync.report.render``); ``what`` they do,
    in the help."""
    from devmon_sync.analyze.pool import MIN_ROVERS_PER_WORKER

    drawn = " and draw a long report's pages" if pages else ""
    p.add_argument("--jobs", type=jobs, default=None, metavar="N",
                   help=f"{what}{drawn} in N processes at once (default: one per "
                        f"core; 1: one after the other in this process). Fewer than "
                        f"{2 * MIN_ROVERS_PER_WORKER} rovers are analysed in this process "
                        f"anyway: starting the processes would cost more than it saves")


def add_analysis_arguments(p) -> None:
    """``--reference`` and ``--method``: how a rover is analysed, the same for ``devmon
    analyze`` and ``devmon report`` (so a report says what the analysis says)."""
    p.add_argument("--reference", default=DEFAULT_REFERENCE,
                   metavar="start|first|DATE|DATE..DATE",
                   help="zero of displacement: the mean of the first 24 h (start, default; "
                        "start:48h for another span), the first epoch, the epoch nearest a "
                        "date, or the mean of a window")
    p.add_argument("--method", choices=("midas", "ols"), default="midas",
                   help="velocity estimator: midas (robust, default) or ols (least squares)")


def add_open_argument(parser) -> None:
    """``--open``: show the written PDF in the system's viewer (``open_written``)."""
    parser.add_argument("--open", action="store_true",
                        help="open the PDF in the system's PDF viewer once it is written")


def open_written(path, command: str) -> None:
    """Open a written file for ``--open``; when no program can be started, say so (the file
    is written all the same, so this is not an error)."""
    from devmon_sync.external_apps import open_with_system

    problem = open_with_system(path)
    if problem:
        print(f"{command}: cannot open the PDF: {problem}", file=sys.stderr)


# ------------------------------------------------- reaching the service (sync, probe, verify)


def add_connection_arguments(p) -> None:
    """How a command reaches the service: address, key, profile, pace (``client_from_args``)."""
    p.add_argument("--base-url", help="service base URL, with or without /v1 (or from --profile)")
    p.add_argument("--api-key", help="API key (else DEVMON_API_KEY, else --profile)")
    p.add_argument("--profile", help="named profile saved with `devmon login`")
    p.add_argument("--rate-limit", type=rate_limit, default=200,
                   help="requests per minute to stay under (default 200; 0: no limit)")
    p.add_argument("--allow-insecure", action="store_true",
                   help="allow plain http:// to a non-loopback host")
    p.add_argument("--retries", type=retries, default=8, metavar="N",
                   help="times a request is tried again after a network fault or a 5xx, with "
                        "growing waits (default 8: about a minute in all; 0 fails at once)")


def add_service_limit_arguments(p) -> None:
    """What the user knows of the service's limits; they win over devmon's defaults and over
    what it learned (``devmon status`` shows both), until the service refuses them."""
    g = p.add_argument_group("service limits (default: devmon's defaults, then what it "
                             "learned of this service)")
    g.add_argument("--max-points", type=positive_int, metavar="N",
                   help="most reading points the service returns in one answer")
    g.add_argument("--max-epochs", type=positive_int, metavar="N",
                   help="most GNSS epochs the service returns in one answer")
    g.add_argument("--max-range-days", type=positive_number, metavar="DAYS",
                   help="longest date range one data request may span")
    g.add_argument("--page-size", type=positive_int, metavar="N",
                   help="devices to ask for per page of GET /devices")


def user_limits(args):
    """The ``UserLimits`` the service-limit flags give."""
    from devmon_sync.service_profile import UserLimits

    return UserLimits(max_points=args.max_points, max_epochs=args.max_epochs,
                      max_range_days=args.max_range_days, page_size=args.page_size)


def check_base_url(text: str) -> None:
    """A UsageError for a base URL that is no address at all: not http(s) with a host, a
    port that is not a number from 1 to 65535, a broken IPv6 literal; checked before any
    client is built or request sent.  The text is not echoed: a key pasted into the wrong
    option would be shown.  (What the client refuses beyond this, such as plain http off
    the machine, it says itself.)"""
    from urllib.parse import urlsplit

    example = "like https://monitoring.example.com/v1"
    try:
        parts = urlsplit(text.strip())
        port_number = parts.port
    except ValueError as err:
        what = "a broken IPv6 address in brackets" if "IPv6" in str(err) else \
            "a port that is not a number from 1 to 65535"
        raise UsageError(f"the base URL has {what}: give the API's address, {example}") \
            from None
    if parts.scheme not in ("http", "https") or not parts.hostname:
        raise UsageError(f"the base URL is not an API address: give one that starts with "
                         f"https://, {example}")
    if port_number == 0:
        raise UsageError(f"the base URL has a port that is not a number from 1 to 65535: "
                         f"give the API's address, {example}")


def client_from_args(args):
    """The API client the connection flags describe (a usage error if they cannot)."""
    from devmon_sync.client import ApiClient, ApiError
    from devmon_sync.credentials import CredentialsError, resolve_api_key

    try:
        key, profile_url = resolve_api_key(args.api_key, args.profile)
    except CredentialsError as err:
        raise UsageError(str(err)) from None
    base_url = args.base_url or profile_url
    if not base_url:
        raise UsageError("give the service address with --base-url URL (with or without /v1), "
                         "or a --profile saved with `devmon login`")
    check_base_url(base_url)
    try:
        return ApiClient(base_url, key, rate_limit_per_minute=args.rate_limit,
                         allow_insecure=args.allow_insecure,
                         max_retries=getattr(args, "retries", 8))
    except ApiError as err:  # the address refused (plain http off the machine, ...)
        raise UsageError(str(err)) from None
    except ValueError as err:
        raise UsageError(f"the base URL cannot be used ({err}): give the API's address, like "
                         f"https://monitoring.example.com/v1") from None


def say_upgrade(old: int, new: int) -> None:
    """Said (on stderr) before a mirror of an older devmon is upgraded: once, but a minute
    or more for a large mirror, which would otherwise look like a hang."""
    print(f"Upgrading the mirror from schema {old} to {new}, once (a mirror of a billion "
          f"readings takes about a minute)…", file=sys.stderr, flush=True)

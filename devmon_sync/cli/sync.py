"""``devmon sync`` and ``devmon status``: thin wrappers over the sync engine and the store."""

from __future__ import annotations

import math
import signal
import sys
import threading
from datetime import timedelta

from devmon_sync.cli.args import (UsageError, add_db_argument, check_base_url,
                                    open_existing_mirror, timestamp_arg)


def add_sync(sub) -> None:
    p = sub.add_parser("sync", help="mirror the service into a local DuckDB file",
                       description="Mirror everything the API key can see into one DuckDB "
                                   "file, incrementally; safe to interrupt and run again.")
    add_db_argument(p, "mirror file, created if missing")
    add_connection_arguments(p)
    p.add_argument("--since", type=timestamp_arg, help="earliest data to mirror (default: all)")
    p.add_argument("--site", action="append", default=[], metavar="UUID",
                   help="mirror the data of this site only (repeatable)")
    p.add_argument("--group", action="append", default=[], metavar="UUID",
                   help="mirror the data of this device group and its nested groups (repeatable)")
    p.add_argument("--device", action="append", default=[], metavar="SERIAL",
                   help="mirror the data of this device (repeatable)")
    p.add_argument("--lookback-hours", type=float, default=6.0,
                   help="re-read this much before each cursor for late points (default 6)")
    p.add_argument("--dry-run", action="store_true",
                   help="print the request plan and the expected duration; change nothing")
    p.add_argument("--quiet", action="store_true", help="no progress output")
    add_service_limit_arguments(p)
    p.set_defaults(func=run_sync)


def add_service_limit_arguments(p) -> None:
    """What the user knows of the service's limits; they win over devmon's defaults and over
    what it learned (``devmon status`` shows both), until the service refuses them."""
    g = p.add_argument_group("service limits (default: devmon's defaults, then what it "
                             "learned of this service)")
    g.add_argument("--max-points", type=_positive_int, metavar="N",
                   help="most reading points the service returns in one answer")
    g.add_argument("--max-epochs", type=_positive_int, metavar="N",
                   help="most GNSS epochs the service returns in one answer")
    g.add_argument("--max-range-days", type=_positive_float, metavar="DAYS",
                   help="longest date range one data request may span")
    g.add_argument("--page-size", type=_positive_int, metavar="N",
                   help="devices to ask for per page of GET /devices")


def user_limits(args):
    """The ``UserLimits`` the service-limit flags give."""
    from devmon_sync.service_profile import UserLimits

    return UserLimits(max_points=args.max_points, max_epochs=args.max_epochs,
                      max_range_days=args.max_range_days, page_size=args.page_size)


def _positive_int(text: str) -> int:
    import argparse

    try:
        value = int(text)
    except ValueError:
        value = 0
    if value < 1:
        raise argparse.ArgumentTypeError(f"must be a whole number of 1 or more, not {text!r}")
    return value


def _positive_float(text: str) -> float:
    import argparse

    try:
        value = float(text)
    except ValueError:
        value = math.nan
    if not (value > 0 and math.isfinite(value)):
        raise argparse.ArgumentTypeError(f"must be a number above 0, not {text!r}")
    return value


def add_connection_arguments(p) -> None:
    """How a command reaches the service: address, key, profile, pace (``_client``)."""
    p.add_argument("--base-url", help="service base URL, with or without /v1 (or from --profile)")
    p.add_argument("--api-key", help="API key (else DEVMON_API_KEY, else --profile)")
    p.add_argument("--profile", help="named profile saved with `devmon login`")
    p.add_argument("--rate-limit", type=_rate_limit, default=200,
                   help="requests per minute to stay under (default 200; 0: no limit)")
    p.add_argument("--allow-insecure", action="store_true",
                   help="allow plain http:// to a non-loopback host")
    p.add_argument("--retries", type=_retries, default=8, metavar="N",
                   help="times a request is tried again after a network fault or a 5xx, with "
                        "growing waits (default 8: about a minute in all; 0 fails at once)")


def _rate_limit(text: str) -> int:
    import argparse

    if not text.isdigit():
        raise argparse.ArgumentTypeError(f"expected requests per minute, a whole number of 0 "
                                         f"(no limit) or more, not {text!r}")
    return int(text)


def _retries(text: str) -> int:
    import argparse

    if not text.isdigit() or int(text) > 100:
        raise argparse.ArgumentTypeError(f"expected a whole number from 0 to 100, not {text!r}")
    return int(text)


def add_login(sub) -> None:
    p = sub.add_parser("login", help="save a named profile: base URL here, key in the OS keyring",
                       description="Save a profile so that `devmon sync --profile NAME` needs "
                                   "no key on the command line. The key is asked for without "
                                   "echo (or read from standard input) and kept in the OS "
                                   "keyring. A keyring backend that is no OS keyring (such as "
                                   "keyrings.alt's plaintext file) is refused unless "
                                   "--allow-plaintext-keyring is given; without a keyring, set "
                                   "DEVMON_API_KEY instead.")
    p.add_argument("--profile", default="default", help="profile name (default: default)")
    p.add_argument("--base-url", required=True, help="service base URL, with or without /v1")
    p.add_argument("--api-key-stdin", action="store_true",
                   help="read the key from standard input instead of prompting")
    p.add_argument("--allow-insecure", action="store_true",
                   help="allow plain http:// to a non-loopback host")
    p.add_argument("--allow-plaintext-keyring", action="store_true",
                   help="save the key even when the keyring backend is no OS keyring but a file "
                        "(keyrings.alt): devmon then names the file that holds it")
    p.set_defaults(func=run_login)


def run_login(args) -> int:
    import getpass

    from devmon_sync.client import ApiError, normalise_base_url
    from devmon_sync.credentials import CredentialsError, key_store, save_profile

    try:
        base_url = normalise_base_url(args.base_url, args.allow_insecure)
    except ApiError as err:  # not an address, a bad port or IPv6 literal, plain http off-host
        raise UsageError(str(err)) from None
    try:  # before asking for the key: a refused keyring is known up front
        store = key_store(allow_plaintext=args.allow_plaintext_keyring)
    except CredentialsError as err:
        raise UsageError(str(err)) from None
    key = sys.stdin.readline().strip() if args.api_key_stdin else \
        getpass.getpass(f"API key for profile {args.profile!r}: ").strip()
    if not key:
        raise UsageError("no API key given: nothing saved")
    try:
        save_profile(args.profile, base_url, key)
    except CredentialsError as err:
        raise UsageError(str(err)) from None
    print(f"Saved profile {args.profile!r} for {base_url}; its key is in {store.describe()}. "
          f"Use: devmon sync --profile {args.profile} --db mirror.duckdb")
    return 0


def add_status(sub) -> None:
    p = sub.add_parser("status", help="what a mirror holds and how fresh it is")
    add_db_argument(p, "mirror file")
    p.set_defaults(func=run_status)


def add_export(sub) -> None:
    p = sub.add_parser("export", help="write a mirror's tables to Parquet or CSV files",
                       description="Write every table of a mirror to files that Spark, Trino "
                                   "and DuckDB read: readings and GNSS epochs partitioned by "
                                   "device and month (Hive layout), metadata one file per "
                                   "table, and _manifest.json. Run again, it rewrites only "
                                   "what changed since the last export to the folder.")
    add_db_argument(p, "mirror file")
    p.add_argument("--format", choices=("parquet", "csv"), default="parquet")
    p.add_argument("--out", required=True,
                   help="output folder (created if missing), this mirror's alone")
    p.set_defaults(func=run_export)


def run_export(args) -> int:
    from devmon_sync.store import StoreError

    try:  # read-write: the mirror records what the export wrote
        with open_existing_mirror(args.db, read_only=False) as mirror:
            report = mirror.export(args.out, args.format)
    except StoreError as err:
        raise UsageError(str(err)) from None
    for line in export_lines(report):
        print(line)
    return 0


def export_lines(report) -> list[str]:
    """What ``devmon export`` did, for people: per partitioned table the partitions written,
    unchanged and deleted, then the totals."""
    lines = [f"Exported to {report.folder} as {report.format} in {report.seconds:.1f} s"
             + (f" (everything: {report.rewrote_all})" if report.rewrote_all else "") + ":"]
    for table, c in report.partitions.items():
        lines.append(f"  {table:15} {_partitions(c.written)} written, {c.unchanged} unchanged, "
                     f"{c.deleted} deleted")
    lines.append(f"  {'other tables':15} {report.other_written} written, "
                 f"{report.other_unchanged} unchanged")
    files = "1 file" if report.files_written == 1 else f"{report.files_written} files"
    lines.append(f"{_partitions(report.written)} written, {report.unchanged} unchanged, "
                 f"{report.deleted} deleted ({report.rows_written:,} rows, {files}); "
                 f"manifest {report.manifest}")
    return lines


def _partitions(n: int) -> str:
    return "1 partition" if n == 1 else f"{n} partitions"


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


class _Bar:
    """One self-rewriting progress line on a terminal; occasional plain lines otherwise."""

    def __init__(self, quiet: bool):
        self.quiet = quiet
        self.tty = sys.stderr.isatty()
        self._last = ""

    def __call__(self, p) -> None:
        if self.quiet:
            return
        eta = f", ETA {_duration(p.eta_s)}" if p.eta_s is not None else ""
        windows = f"{p.done}/{p.total} windows, " if p.phase in ("readings", "gnss") else ""
        line = f"{p.phase:9} {windows}{p.requests} requests, {p.rows:,} rows{eta}  {p.message}"
        if self.tty:
            sys.stderr.write("\r" + line[:150].ljust(len(self._last)))
            self._last = line[:150]
        elif p.phase != self._last:
            sys.stderr.write(line + "\n")
            self._last = p.phase
        sys.stderr.flush()

    def close(self) -> None:
        """End the rewritten line (once), so other output starts on a line of its own."""
        if self.tty and self._last and not self.quiet:
            sys.stderr.write("\n")
            self._last = ""


def _duration(seconds: float) -> str:
    seconds = int(seconds)
    return f"{seconds // 3600}h{seconds % 3600 // 60:02d}m" if seconds >= 3600 else \
        f"{seconds // 60}m{seconds % 60:02d}s"


def run_sync(args) -> int:
    from devmon_sync.client import ApiError
    from devmon_sync.logs import close_sync_log, open_sync_log
    from devmon_sync.store import Mirror, StoreError
    from devmon_sync.analyze.alarm_history import after_sync
    from devmon_sync.sync.engine import ScopeError, SyncEngine, SyncOptions, Terminated

    if args.lookback_hours < 0:
        raise UsageError("--lookback-hours must be 0 or more")
    client = client_from_args(args)
    options = SyncOptions(since=args.since, lookback=timedelta(hours=args.lookback_hours),
                          dry_run=args.dry_run, sites=tuple(args.site),
                          groups=tuple(args.group), devices=tuple(args.device),
                          user_limits=user_limits(args))
    bar = _Bar(args.quiet)
    sync_log = open_sync_log(client.secrets())
    stop = _StopSignals()
    try:
        with stop:
            opened = Mirror.scratch_copy(args.db) if args.dry_run else Mirror.open(args.db)
            with client, opened as mirror:
                report = SyncEngine(client, mirror, options, on_progress=bar,
                                    cancel=stop.asked).run()
                alarm_lines = [] if args.dry_run or report.status != "ok" \
                    else after_sync(mirror)
    except BaseException as err:
        bar.close()
        if stop.asked.is_set() or isinstance(err, KeyboardInterrupt):
            return stop.stopped(isinstance(err, Terminated))
        if isinstance(err, (ApiError, StoreError, ScopeError)):
            raise UsageError(str(err)) from None
        raise
    finally:
        close_sync_log(sync_log)
    bar.close()
    if stop.asked.is_set():  # the engine stopped between two windows
        return stop.stopped()
    if args.dry_run:
        _print_plan(report, args.rate_limit)
    elif not args.quiet:
        print(f"Synced {args.db}: {report.readings_rows:,} readings and {report.epoch_rows:,} "
              f"GNSS epochs in {report.windows} windows, {report.requests} requests, "
              f"{report.seconds:.1f} s" + (f"; {len(report.problems)} problems (see "
                                           f"`devmon status`)" if report.problems else ""))
    for line in report.notes:
        print("  " + line)
    if not args.dry_run:
        for line in _proof_lines(report):  # even with --quiet: they are about the data
            print(line)
    # the count only when not quiet; a rover at a level always (a scheduled sync's output
    # is what its owner gets mailed)
    for line in alarm_lines[1 if args.quiet else 0:]:
        print(line)
    return 0


class _StopSignals:
    """While in effect, SIGTERM (a service manager, `kill`, a container stopping) stops the
    sync as Ctrl-C does: the exception is raised where the sync is (a wait or a request is
    cut short), the transaction in progress rolls back, the run is recorded ``cancelled``.
    ``asked`` is set as well, the engine's cancel event: DuckDB reports a statement a signal
    cut short in its own words (``interrupted_by_signal``), swallowing the exception, and
    the event still tells that a stop was asked.  One SIGTERM is enough: a second does not
    cut the clean-up short."""

    def __init__(self):
        self.asked = threading.Event()
        self.signal: int | None = None
        self._previous: dict[int, object] = {}

    def __enter__(self) -> "_StopSignals":
        if threading.current_thread() is threading.main_thread():  # where handlers live
            for signum in (signal.SIGTERM, signal.SIGINT):
                self._previous[signum] = signal.signal(signum, self._stop)
        return self

    def __exit__(self, *exc) -> None:
        for signum, handler in self._previous.items():
            signal.signal(signum, handler)

    def stopped(self, terminated: bool = False) -> int:
        """Say that the sync was stopped; the exit status (128 + the signal's number)."""
        by_term = terminated or self.signal == signal.SIGTERM
        print(f"{'Stopped by SIGTERM' if by_term else 'Interrupted'}: everything committed so "
              f"far is kept; run the same command to resume.", file=sys.stderr)
        return 128 + (signal.SIGTERM if by_term else signal.SIGINT)

    def _stop(self, signum, frame) -> None:
        from devmon_sync.sync.engine import Terminated

        self.signal = self.signal or signum
        self.asked.set()
        if signum == signal.SIGTERM:
            signal.signal(signal.SIGTERM, signal.SIG_IGN)
            raise Terminated("stopped by SIGTERM")
        raise KeyboardInterrupt


def _proof_lines(report) -> list[str]:
    """What the completeness checks found, when they found anything."""
    lines = []
    if report.cut_answers:
        lines.append(f"  The service cut {report.cut_answers} answers without saying so; "
                     f"{report.follow_ups} follow-up requests fetched the rest.")
    if report.quarantined:
        lines.append(f"  {report.quarantined} values could not be read and are kept in "
                     f"quarantine (see `devmon status`).")
    if report.unproven:
        lines.append(f"  {report.unproven} ranges could not be proved complete; the next "
                     f"`devmon sync` fetches them first (see `devmon status`).")
    return lines


def _print_plan(report, rate_limit: int) -> None:
    """The request plan of a dry run, and how long it will take: the requests at the pace
    this run's own requests were answered, and never less than the rate limit allows (the
    client may send ``rate_limit`` requests in any minute, so N take (ceil(N/limit) - 1)
    minutes at least)."""
    windows = report.plan
    requests = report.requests + len(windows)
    print("Dry run: nothing was written.")
    for kind, label in (("readings", "parameters"), ("gnss", "GNSS sensors")):
        ws = [w for w in windows if w.kind == kind]
        points = sum(w.expected_points for w in ws)
        line = f"  {kind:8}: {len(ws)} requests, about {points:,.0f} points"
        if ws:
            streams = {k for w in ws for k in w.keys}
            line += (f", {len(streams)} {label}, {min(w.start for w in ws):%Y-%m-%d %H:%M} to "
                     f"{max(w.end for w in ws):%Y-%m-%d %H:%M} UTC")
        print(line)
    print(f"  {report.requests} requests for metadata and planning (already made)")
    answer_s = report.seconds / max(1, report.requests)
    floor_s = max(0, math.ceil(len(windows) / rate_limit) - 1) * 60.0 if rate_limit > 0 else 0.0
    limit = (f"the limit of {rate_limit} requests/minute needs at least {_duration(floor_s)}"
             if rate_limit > 0 else "no rate limit set")
    print(f"Expected: {len(windows)} more requests, about "
          f"{_duration(max(floor_s, len(windows) * answer_s))} ({answer_s:.1f} s an answer as "
          f"in this run; {limit}); {requests} requests in all.")


def run_status(args) -> int:
    with open_existing_mirror(args.db) as mirror:
        print(mirror.status_text())
    return 0

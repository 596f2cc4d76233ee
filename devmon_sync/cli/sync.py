"""``devmon sync``: a thin wrapper over the sync engine and the store (``devmon status``,
what the syncs left in the mirror, is ``cli.status``)."""

from __future__ import annotations

import math
import signal
import sys
import threading
from datetime import timedelta

from analysis.words import counted
from devmon_sync.cli.args import (
    UsageError,
    add_connection_arguments,
    add_db_argument,
    add_jobs_argument,
    add_service_limit_arguments,
    client_from_args,
    duration,
    say_upgrade,
    timestamp,
    user_limits,
)
from devmon_sync.cli.progress import Bar, format_duration
from devmon_sync.printable import printable


def add_sync(sub) -> None:
    p = sub.add_parser("sync", help="mirror the service into a local DuckDB file",
                       description="Mirror everything the API key can see into one DuckDB "
                                   "file, incrementally; safe to interrupt and run again.")
    add_db_argument(p, "mirror file, created if missing")
    add_connection_arguments(p)
    p.add_argument("--since", type=timestamp, help="earliest data to mirror (default: all)")
    p.add_argument("--site", action="append", default=[], metavar="UUID",
                   help="mirror the data of this site only (repeatable)")
    p.add_argument("--group", action="append", default=[], metavar="UUID",
                   help="mirror the data of this device group and its nested groups (repeatable)")
    p.add_argument("--device", action="append", default=[], metavar="SERIAL",
                   help="mirror the data of this device (repeatable)")
    p.add_argument("--lookback-hours", type=duration("hours"), default=6.0,
                   help="re-read this much before each cursor for late points (default 6)")
    p.add_argument("--dry-run", action="store_true",
                   help="print the request plan and the expected duration; change nothing")
    p.add_argument("--quiet", action="store_true", help="no progress output")
    add_service_limit_arguments(p)
    add_jobs_argument(p, what="evaluate the alarm levels of the rovers the sync brought "
                              "epochs to")
    p.set_defaults(func=run_sync)


def run_sync(args) -> int:
    from devmon_sync.analyze.alarm_history import after_sync
    from devmon_sync.client import ApiError
    from devmon_sync.logs import close_sync_log, open_sync_log
    from devmon_sync.store import Mirror, StoreError
    from devmon_sync.store.integrity import refuse_foreign
    from devmon_sync.sync.engine import ScopeError, SyncEngine, SyncOptions, Terminated

    try:  # before a request: a Parquet or CSV file would open as a database in memory
        refuse_foreign(args.db)
    except StoreError as err:
        raise UsageError(str(err)) from None
    client = client_from_args(args)
    options = SyncOptions(since=args.since, lookback=timedelta(hours=args.lookback_hours),
                          dry_run=args.dry_run, sites=tuple(args.site),
                          groups=tuple(args.group), devices=tuple(args.device),
                          user_limits=user_limits(args))
    bar = Bar(args.quiet)
    client.on_wait = bar.waiting  # a long wait for the rate limit is said
    sync_log = open_sync_log(client.secrets())
    stop = _StopSignals()
    try:
        with stop:
            opened = Mirror.scratch_copy(args.db) if args.dry_run else Mirror.open(
                args.db, on_upgrade=say_upgrade)
            with client, opened as mirror:
                report = SyncEngine(client, mirror, options, on_progress=bar,
                                    cancel=stop.asked).run()
                alarm_lines = [] if args.dry_run or report.status != "ok" \
                    else after_sync(mirror, jobs=args.jobs)
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
        print(f"Synced {args.db}: {counted(report.readings_rows, 'reading')} and "
              f"{counted(report.epoch_rows, 'GNSS epoch')} in {counted(report.windows, 'window')}, "
              f"{counted(report.requests, 'request')}, {report.seconds:.1f} s"
              + (f"; {counted(len(report.problems), 'problem')} (see `devmon status`)"
                 if report.problems else ""))
    for line in report.notes:  # the service's words in them: one line each
        print("  " + printable(line))
    if not args.dry_run:
        for line in _proof_lines(report):  # even with --quiet: they are about the data
            print(printable(line))
    # the count only when not quiet; a rover at a level always (a scheduled sync's output
    # is what its owner gets mailed)
    for line in alarm_lines[1 if args.quiet else 0:]:
        print(printable(line))
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
        lines.append(f"  The service cut {counted(report.cut_answers, 'answer')} without saying "
                     f"so; {counted(report.follow_ups, 'follow-up request')} fetched the rest.")
    if report.quarantined:
        lines.append(f"  {counted(report.quarantined, 'value')} could not be read and "
                     f"{'is' if report.quarantined == 1 else 'are'} kept in quarantine (see "
                     f"`devmon status`).")
    if report.unproven:
        lines.append(f"  {counted(report.unproven, 'range')} could not be proved complete; the "
                     f"next `devmon sync` fetches {'it' if report.unproven == 1 else 'them'} "
                     f"first (see `devmon status`).")
    return lines


def _print_plan(report, rate_limit: int) -> None:
    """The request plan of a dry run, and how long it will take: the requests at the pace
    this run's own requests were answered, and never less than the rate limit allows (the
    client may send ``rate_limit`` requests in any minute, so N take (ceil(N/limit) - 1)
    minutes at least)."""
    windows = report.plan
    requests = report.requests + len(windows)
    print("Dry run: nothing was written.")
    for kind, label in (("readings", "parameter"), ("gnss", "GNSS sensor")):
        ws = [w for w in windows if w.kind == kind]
        points = sum(w.expected_points for w in ws)
        line = f"  {kind:8}: {counted(len(ws), 'request')}, about {points:,.0f} points"
        if ws:
            streams = {k for w in ws for k in w.keys}
            line += (f", {counted(len(streams), label)}, "
                     f"{min(w.start for w in ws):%Y-%m-%d %H:%M} to "
                     f"{max(w.end for w in ws):%Y-%m-%d %H:%M} UTC")
        print(line)
    print(f"  {counted(report.requests, 'request')} for metadata and planning (already made)")
    answer_s = report.seconds / max(1, report.requests)
    floor_s = max(0, math.ceil(len(windows) / rate_limit) - 1) * 60.0 if rate_limit > 0 else 0.0
    limit = (f"the limit of {rate_limit} requests/minute needs at least "
             f"{format_duration(floor_s)}" if rate_limit > 0 else "no rate limit set")
    print(f"Expected: {len(windows)} more {'request' if len(windows) == 1 else 'requests'}, "
          f"about {format_duration(max(floor_s, len(windows) * answer_s))} ({answer_s:.1f} s "
          f"an answer as in this run; {limit}); {counted(requests, 'request')} in all.")

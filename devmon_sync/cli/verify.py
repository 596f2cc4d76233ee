"""``devmon verify``: audit a mirror against the service before trusting it for a report."""

from __future__ import annotations

import math
import sys

from analysis.words import counted
from devmon_sync.cli.args import (
    UsageError,
    add_connection_arguments,
    add_db_argument,
    client_from_args,
    open_existing_mirror,
    sample_share,
)
from devmon_sync.cli.progress import Counter
from devmon_sync.printable import fit, printable


def add_verify(sub) -> None:
    p = sub.add_parser(
        "verify", help="re-read a sample of synced windows and compare them with the mirror",
        description="Ask the service again for a sample of the windows the mirror committed "
                    "(by default as many as catch a mirror in which 1%% of the windows differ "
                    "with 95%% probability; --all for every one), compare every point, and "
                    "report each difference by device, parameter and time range. It also "
                    "compares the metadata (devices, sites, groups, sensors, parameters) with "
                    "the service's and checks, for each stream of the devices checked, the "
                    "days before the mirror's oldest point (by the service's daily counts "
                    "where it gives them, else one span before each oldest point), and the "
                    "six-hour summaries of the readings checked (what long plots and report "
                    "statistics read) against the readings themselves. "
                    "Differences are recorded so the next `devmon sync` heals them; --repair "
                    "re-syncs the data now and rebuilds differing summaries.")
    add_db_argument(p, "mirror file")
    add_connection_arguments(p)
    p.add_argument("--share", type=sample_share, default=None,
                   help="share of the committed windows to check, e.g. 0.05 or 5%% "
                        "(default: enough to catch 1%% of windows differing with 95%% "
                        "probability)")
    p.add_argument("--all", dest="check_all", action="store_true",
                   help="check every committed window")
    p.add_argument("--budget", type=int, metavar="N",
                   help="use at most N data requests (the metadata's few list "
                        "requests come on top)")
    p.add_argument("--repair", action="store_true",
                   help="re-sync the ranges that differ (else the next sync does)")
    p.add_argument("--seed", type=int, help="seed of the sample, to repeat a check")
    p.add_argument("--quiet", action="store_true", help="no progress output")
    p.set_defaults(func=run_verify)


def run_verify(args) -> int:
    from devmon_sync.client import ApiError
    from devmon_sync.store import StoreError
    from devmon_sync.sync.verify import Verifier, VerifyOptions

    if args.budget is not None and args.budget < 1:
        raise UsageError("--budget must be at least 1 request")
    open_existing_mirror(args.db).close()  # a clear message when there is no mirror
    client = client_from_args(args)
    options = VerifyOptions(args.share, args.check_all, args.budget, args.repair, args.seed)
    counter = Counter(args.quiet)
    try:
        from devmon_sync.store import Mirror

        with client, Mirror.open(args.db) as mirror:
            verifier = Verifier(client, mirror, options, None if args.quiet else counter)
            chosen, total = verifier.plan()
            _announce(chosen, total, verifier.history_plan(chosen), args)
            report = verifier.run(chosen, total)
    except (ApiError, StoreError) as err:
        raise UsageError(str(err)) from None
    except KeyboardInterrupt:
        print("\nInterrupted: what was repaired so far is kept.", file=sys.stderr)
        return 130
    counter.close()
    _print_report(report, args)
    return 0 if report.clean or (args.repair and report.healed_now) else 1


def _announce(chosen, total: int, history, args) -> None:
    from devmon_sync.sync.verify import BAD_SHARE, miss_probability

    requests = len(chosen) + history.requests
    checked = min(len(chosen), args.budget or len(chosen))
    floor_s = max(0, math.ceil(requests / args.rate_limit) - 1) * 60 if args.rate_limit else 0
    print(f"Checking {len(chosen)} of {counted(total, 'committed window')}, the metadata and "
          f"the start of history of {counted(history.streams, 'stream')}: about "
          f"{counted(requests, 'request')}"
          + (f" (at most {args.budget})" if args.budget else "")
          + " and the metadata's list requests"
          + (f", at least {floor_s // 60} min at {args.rate_limit} requests/minute"
             if floor_s else "") + ".", flush=True)
    if total and not args.check_all:
        power = 1.0 - miss_probability(total, checked)
        print(f"A mirror in which {BAD_SHARE:.0%} of the windows differ from the service is "
              f"caught with {power:.1%} probability by this sample"
              + ("" if power >= 0.95 else " (give --all, or a larger --share or --budget, "
                                          "for 95%)") + ".", flush=True)


def _print_report(report, args) -> None:
    print(_checked(report))
    if report.refused:
        print(f"  {len(report.refused)} could not be checked (the key may not see them): "
              + printable(", ".join(report.refused[:5])))
    for note in report.notes:
        print(f"  Note: {printable(note)}")
    if report.clean:
        print("The mirror matches the service in every point checked, in its metadata and at "
              "the start of every stream's history checked.")
        return
    _print_points(report)
    _print_metadata(report)
    _print_history(report)
    _print_summaries(report)
    if args.repair and (report.differences or report.history_differences):
        print(f"Repaired: {report.repaired} streams re-synced from the service.")
    elif report.differences or report.history_differences:
        print("Recorded as unverified ranges: run `devmon sync` (or `devmon verify --repair`) "
              "to fetch them again.")
    if report.metadata_differences:
        print("The next `devmon sync` reads the metadata again and follows the service (a "
              "device the service no longer lists stays in the mirror with its data).")


def _checked(report) -> str:
    """What was checked, at what cost: the summary's first line."""
    from devmon_sync.sync.verify import BAD_SHARE, miss_probability

    power = 1.0 - miss_probability(report.windows_total, report.windows_checked)
    caught = "every committed window" if report.windows_checked >= report.windows_total \
        else f"{power:.1%} power against {BAD_SHARE:.0%} of the windows differing"
    history = counted(report.history_streams, "stream")
    if report.history_streams < report.history_planned:
        history = f"{report.history_streams} of {counted(report.history_planned, 'stream')}"
    return (f"Checked {counted(report.windows_checked, 'window')} with "
            f"{counted(report.window_requests, 'request')} ({caught}), the metadata of "
            f"{counted(report.metadata_devices, 'device')} with "
            f"{counted(report.metadata_requests, 'request')} and the start of history of "
            f"{history} with {counted(report.history_requests, 'request')}: "
            f"{counted(report.requests, 'request')} in all.")


SHOWN = 40  # differences listed of each kind; the rest counted


def _print_list(title: str, lines: list[str]) -> None:
    """The title, then the first ``SHOWN`` lines (names and values from the service in them
    ``printable``: a newline in a name does not start a line)."""
    if not lines:
        return
    print(title)
    for line in lines[:SHOWN]:
        print(f"  {printable(line)}")
    if len(lines) > SHOWN:
        print(f"  ... and {len(lines) - SHOWN} more")


def _print_points(report) -> None:
    _print_list(f"{len(report.differences)} streams differ from the service:", [
        f"{d.device:14} {fit(printable(d.name), 28)} {d.first:%Y-%m-%d %H:%M} to "
        f"{d.last:%Y-%m-%d %H:%M} UTC: {d.missing} missing, {d.extra} extra, {d.changed} changed"
        for d in report.differences])


def _print_metadata(report) -> None:
    found = report.metadata_differences
    _print_list(f"{len(found)} metadata differ from the service (device, what: mirror / "
                f"service):", [f"{d.device:14} {d.what}: {d.mirror} / {d.service}"
                               for d in found])


def _print_summaries(report) -> None:
    found = report.summary_differences
    _print_list(f"{len(found)} parameters' six-hour summaries (what long plots and a "
                f"report's statistics read) differ from their own readings:", [
        f"{d.device:14} {fit(printable(d.name), 28)} {counted(d.slots, 'slot')} from "
        f"{d.first:%Y-%m-%d %H:%M} to {d.last:%Y-%m-%d %H:%M} UTC" for d in found])
    if found:
        print("Rebuilt from the readings." if report.summaries_rebuilt else
              "Run `devmon verify --repair` to rebuild them from the readings (no request; "
              "a sync does not rewrite them).")


def _print_history(report) -> None:
    found = report.history_differences
    _print_list(f"{len(found)} streams hold history before the mirror's oldest point:", [
        f"{d.device:14} {fit(printable(d.name), 28)} history starts before the mirror's oldest "
        f"point ({d.mirror_first:%Y-%m-%d %H:%M} UTC): the service has {d.points} points from "
        f"{d.first:%Y-%m-%d %H:%M} UTC" for d in found])

"""``devmon verify``: audit a mirror against the service before trusting it for a report."""

from __future__ import annotations

import math
import sys

from devmon_sync.cli.args import (UsageError, add_connection_arguments, add_db_argument,
                                  client_from_args, open_existing_mirror, sample_share)
from devmon_sync.cli.progress import Counter


def add_verify(sub) -> None:
    p = sub.add_parser(
        "verify", help="re-read a sample of synced windows and compare them with the mirror",
        description="Ask the service again for a sample of the windows the mirror committed "
                    "(by default as many as catch a mirror in which 1%% of the windows differ "
                    "with 95%% probability; --all for every one), compare every point, and "
                    "report each difference by device, parameter and time range. Differences "
                    "are recorded so the next `devmon sync` heals them; --repair re-syncs them "
                    "now.")
    add_db_argument(p, "mirror file")
    add_connection_arguments(p)
    p.add_argument("--share", type=sample_share, default=None,
                   help="share of the committed windows to check, e.g. 0.05 or 5%% "
                        "(default: enough to catch 1%% of windows differing with 95%% "
                        "probability)")
    p.add_argument("--all", dest="check_all", action="store_true",
                   help="check every committed window")
    p.add_argument("--budget", type=int, metavar="N",
                   help="use at most N data requests")
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
            _announce(chosen, total, args)
            report = verifier.run(chosen, total)
    except (ApiError, StoreError) as err:
        raise UsageError(str(err)) from None
    except KeyboardInterrupt:
        print("\nInterrupted: what was repaired so far is kept.", file=sys.stderr)
        return 130
    counter.close()
    _print_report(report, args)
    return 0 if report.clean or args.repair else 1


def _announce(chosen, total: int, args) -> None:
    from devmon_sync.sync.verify import BAD_SHARE, miss_probability

    requests = len(chosen)
    checked = min(requests, args.budget or requests)
    floor_s = max(0, math.ceil(requests / args.rate_limit) - 1) * 60 if args.rate_limit else 0
    print(f"Checking {len(chosen)} of {total} committed windows: about {requests} requests"
          + (f" (at most {args.budget})" if args.budget else "")
          + (f", at least {floor_s // 60} min at {args.rate_limit} requests/minute"
             if floor_s else "") + ".", flush=True)
    if total and not args.check_all:
        power = 1.0 - miss_probability(total, checked)
        print(f"A mirror in which {BAD_SHARE:.0%} of the windows differ from the service is "
              f"caught with {power:.1%} probability by this sample"
              + ("" if power >= 0.95 else " (give --all, or a larger --share or --budget, "
                                          "for 95%)") + ".", flush=True)


def _print_report(report, args) -> None:
    print(f"Checked {report.windows_checked} windows with {report.requests} requests.")
    if report.refused:
        print(f"  {len(report.refused)} could not be checked (the key may not see them): "
              + ", ".join(report.refused[:5]))
    if report.clean:
        print("The mirror matches the service in every point checked.")
        return
    print(f"{len(report.differences)} streams differ from the service:")
    for d in report.differences[:40]:
        print(f"  {d.device:14} {d.name[:28]:28} {d.first:%Y-%m-%d %H:%M} to "
              f"{d.last:%Y-%m-%d %H:%M} UTC: {d.missing} missing, {d.extra} extra, "
              f"{d.changed} changed")
    if len(report.differences) > 40:
        print(f"  ... and {len(report.differences) - 40} more")
    if args.repair:
        print(f"Repaired: {report.repaired} streams re-synced from the service.")
    else:
        print("Recorded as unverified ranges: run `devmon sync` (or `devmon verify --repair`) "
              "to fetch them again.")

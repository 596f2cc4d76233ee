"""``devmon probe``: measure a service's contract and keep what was learned in the mirror."""

from __future__ import annotations

import shutil
import textwrap

from devmon_sync.cli.args import (UsageError, add_connection_arguments, add_db_argument,
                                  add_service_limit_arguments, client_from_args, user_limits)
from devmon_sync.printable import printable

COLUMNS = ("", "spec says", "this service does", "devmon will do")


def add_probe(sub) -> None:
    p = sub.add_parser(
        "probe", help="measure how a service realises what the spec leaves unshown",
        description="In at most 15 requests (and one more for each option the service "
                    "refuses as unknown), measure the service's contract: where the API "
                    "answers, its key check, paging, response caps and range limit (by asking "
                    "for more than devmon's defaults), timestamp form, numbers written as "
                    "strings, which options it honours. Prints what the spec says, what this service does and what "
                    "devmon will do; stores what was learned in the mirror, so the first sync "
                    "plans within it. Exits 1 when something blocks an exact sync.")
    add_db_argument(p, "mirror file to store the service profile in (created if missing)")
    add_connection_arguments(p)
    add_service_limit_arguments(p)
    p.set_defaults(func=run_probe)


def run_probe(args) -> int:
    from devmon_sync import service_profile as assumed
    from devmon_sync.client import ApiError
    from devmon_sync.sync.probe import Probe
    from devmon_sync.store import Mirror, StoreError

    client = client_from_args(args)
    limits = _limits(assumed.DEFAULT_LIMITS, user_limits(args))
    try:
        with client, Mirror.open(args.db) as mirror:
            result = Probe(client, mirror.load_profile(client.base_given), limits).run()
            mirror.save_profile(result.profile)
    except (ApiError, StoreError) as err:
        raise UsageError(str(err)) from None
    print(f"devmon probe of {client.base_given}: {result.requests} requests")
    print(format_table([(f.topic, f.spec, f.service, f.devmon) for f in result.findings]))
    blocking = [f for f in result.findings if f.blocking]
    if blocking:
        print(f"\nBlocks an exact sync: {'; '.join(f.topic for f in blocking)}.")
        return 1
    print(f"\nNothing that blocks an exact sync among what is checked above. Not checked "
          f"here: the rate limit's wording (learned by the first sync that meets it) and what "
          f"the service changes in its past later (each sync re-checks the last 30 days). "
          f"What was learned is kept in {args.db} (`devmon status` shows it); `devmon sync` "
          f"plans within it.")
    return 0


def _limits(defaults, user):
    import dataclasses

    return dataclasses.replace(
        defaults, max_points=user.max_points or defaults.max_points,
        max_epochs=user.max_epochs or defaults.max_epochs,
        max_range_days=user.max_range_days or defaults.max_range_days)


def format_table(rows: list[tuple[str, str, str, str]]) -> str:
    """Rows as a four-column text table that fits the terminal, cells wrapped."""
    width = max(80, shutil.get_terminal_size((120, 24)).columns)
    first = min(40, max(len(r[0]) for r in rows))
    rest = (width - first - 6) // 3
    widths = (first, rest, rest, rest)
    lines = [_row(COLUMNS, widths), "  ".join("-" * w for w in widths)]
    for row in rows:
        lines.append(_row(row, widths))
    return "\n".join(lines)


def _row(cells, widths) -> str:
    """One row, its cells (the service's words among them) ``printable`` and wrapped."""
    wrapped = [textwrap.wrap(printable(c), w) or [""] for c, w in zip(cells, widths)]
    height = max(len(w) for w in wrapped)
    return "\n".join("  ".join((w[i] if i < len(w) else "").ljust(n)
                               for w, n in zip(wrapped, widths)).rstrip()
                     for i in range(height))

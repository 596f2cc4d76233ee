"""``devmon status``: what a mirror holds, how fresh it is, and which rovers are at an alarm
level now.

The store writes the contents, freshness and runs (``Mirror.status_text``); the alarm levels
are those the mirror keeps after each sync and each change of levels
(``devmon_sync.analyze.alarm_history``), read here, not evaluated again, so the command stays
as quick as the rest of the status (issue 30.7: two rovers at emergency, and status said
nothing of it).
"""

from __future__ import annotations

from analysis.words import counted
from devmon_sync.cli.args import add_db_argument, open_existing_mirror
from devmon_sync.printable import fit, printable, printable_lines

NAME_WIDTH = 28
"""The name column, as wide as the freshness table's."""


def add_status(sub) -> None:
    p = sub.add_parser("status", help="what a mirror holds, how fresh it is, alarm levels now",
                       description="What a mirror holds, how fresh each device is, the last "
                                   "runs, what the sync learned of the service, and the "
                                   "rovers at an alarm level now (as the last sync or "
                                   "`devmon alarms` evaluated them).")
    add_db_argument(p, "mirror file")
    p.set_defaults(func=run_status)


def run_status(args) -> int:
    with open_existing_mirror(args.db) as mirror:
        print(mirror.status_text())
        print(alarm_text(mirror))
    return 0


def alarm_text(mirror) -> str:
    """The rovers at an alarm level now, each with every level it is at (worst first) and
    the quantity that reached it, then a count line; names ``printable``."""
    from devmon_sync.store import queries, report_queries

    with_levels = queries.alarm_evaluation_due(mirror, None, only_stale=False)
    at_level = queries.worst_alarm_levels(mirror)
    if not with_levels and not at_level:
        return printable_lines(["", ("Alarm levels: no rover has any (set them with `devmon "
                                     "alarms --site NAME --displacement alert=10,...`).")])
    names = {d.serial_number: d.display_name
             for d in report_queries.devices_by_serial(mirror, list(at_level))}
    lines = ["", "Alarm levels reached now (as last evaluated):"]
    histories = queries.alarm_histories(mirror, list(at_level))
    for serial in at_level:
        reached = _levels_reached(histories[serial])
        lines.append(f"  {serial:14} {fit(printable(names.get(serial, serial)), NAME_WIDTH)} "
                     f"{reached}")
    lines.append("  " + _count_line(at_level, len(set(with_levels) | set(at_level))))
    return printable_lines(lines)


def _levels_reached(history: list[dict]) -> str:
    """"emergency (horizontal displacement); alert (vertical displacement)": per quantity
    the highest level still reached at the end of the evaluation, the worst first."""
    from analysis.alarms import quantity_words

    highest: dict[str, dict] = {}
    for row in history:
        if not row["exceeded_at_end"]:
            continue
        kept = highest.get(row["quantity"])
        if kept is None or (row["level_rank"] or 0) > (kept["level_rank"] or 0):
            highest[row["quantity"]] = row
    worst_first = sorted(highest.values(), key=lambda r: (-(r["level_rank"] or 0),
                                                          r["quantity"]))
    return "; ".join(f"{r['level']} ({quantity_words(r['quantity'])})" for r in worst_first)


def _count_line(at_level: dict[str, str], rovers: int) -> str:
    """"1 of 8 rovers with alarm levels is at a level now: 1 emergency." (by level, in the
    order of the rovers' worst levels)."""
    if not at_level:
        return f"None of the {counted(rovers, 'rover')} with alarm levels is at a level now."
    by_level: dict[str, int] = {}
    for level in at_level.values():
        by_level[level] = by_level.get(level, 0) + 1
    counts = ", ".join(f"{n} {level}" for level, n in by_level.items())
    verb = "is" if len(at_level) == 1 else "are"
    return (f"{len(at_level)} of {counted(rovers, 'rover')} with alarm levels {verb} at a level "
            f"now: {counts}.")

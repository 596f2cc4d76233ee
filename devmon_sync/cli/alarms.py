"""``devmon alarms``: show or set the alarm levels of a device, site or group, and the
mirror's alarm rule.

The options are parsed here (their types in ``args``); setting levels or the rule and
evaluating the rovers concerned is ``devmon_sync.analyze.alarm_history``'s, reading and
keeping them the store's; this module says what the options mean and prints.
"""

from __future__ import annotations

import argparse

from devmon_sync.cli.args import (UsageError, add_db_argument, add_jobs_argument,
                                  alarm_quantity, gnss_levels,
                                  open_existing_mirror, parameter_levels)
from devmon_sync.printable import printable, printable_lines


_COMPONENTS_EPILOG = "COMPONENTS"  # replaced by the store's list when help is shown


class _AlarmsHelp(argparse.HelpFormatter):
    """Lists the components the store knows (``queries.ALARM_COMPONENTS``) below the help,
    importing the store (DuckDB) only when help is shown, not when any command starts."""

    def _fill_text(self, text: str, width: int, indent: str) -> str:
        if text != _COMPONENTS_EPILOG:
            return super()._fill_text(text, width, indent)
        from devmon_sync.store.queries import ALARM_COMPONENTS

        return "\n".join([f"{indent}COMPONENT (a displacement or velocity level on one part; "
                          f"none: the 3D length):",
                          *(f"{indent}  {name:11} {meaning}"
                            for name, meaning in ALARM_COMPONENTS.items())])


def add_alarms(sub) -> None:
    p = sub.add_parser(
        "alarms", help="show or set the alarm levels of a device, site or group",
        description="Show or set threshold alarm levels, kept in the mirror (a sync never "
                    "changes them), on a device, a site or a device group. For each "
                    "quantity a device follows its own levels, else its groups' (the "
                    "nearest group; the most cautious levels when several), else its "
                    "site's. Displacement levels are in mm, velocity levels in mm/day: "
                    "without a COMPONENT on the length of the 3D displacement from the "
                    "reference or of the 3D velocity, with one on that part alone.",
        epilog=_COMPONENTS_EPILOG, formatter_class=_AlarmsHelp)
    add_db_argument(p, "mirror file")
    scope = p.add_mutually_exclusive_group()
    scope.add_argument("--device", metavar="SERIAL",
                       help="a device's serial number; shown: the levels that apply to it "
                            "and where each comes from")
    scope.add_argument("--site", metavar="UUID|NAME",
                       help="a site (its name in any case), for its devices")
    scope.add_argument("--group", metavar="UUID|NAME",
                       help="a device group (its name in any case), for its devices and "
                            "those of its nested groups")
    p.add_argument("--displacement", action="append", default=[],
                   type=gnss_levels("displacement"),
                   metavar="[COMPONENT:]NAME=MM,...",
                   help="levels in mm, ascending, e.g. alert=10,alarm=25,emergency=50 (3D) "
                        "or vertical:alert=5,alarm=15 (repeatable, once per component)")
    p.add_argument("--velocity", action="append", default=[], type=gnss_levels("velocity"),
                   metavar="[COMPONENT:]NAME=MM_PER_DAY,...",
                   help="levels in mm/day, ascending, e.g. alert=1,alarm=5 (3D) or "
                        "horizontal:alert=0.5,alarm=2 (repeatable, once per component)")
    p.add_argument("--parameter", action="append", default=[], type=parameter_levels,
                   metavar="UUID:NAME=VALUE,...",
                   help="levels on a parameter's values, in its unit, e.g. "
                        "1b6f...:alert=1.5,alarm=2 (with --device only; repeatable; shown as "
                        "threshold lines in the GUI's plots)")
    p.add_argument("--clear", action="append", default=[], type=alarm_quantity,
                   metavar="QUANTITY",
                   help="remove the levels of displacement, velocity, "
                        "displacement:COMPONENT, velocity:COMPONENT or parameter:UUID "
                        "(repeatable)")
    p.add_argument("--confidence", metavar="PERCENT", type=float,
                   help="the alarm rule, for every rover of the mirror: a level counts as "
                        "reached when the value is beyond it with this one-sided "
                        "confidence (default 99; 95 alarms sooner and falsely more often: "
                        "docs/benchmarks.md)")
    p.add_argument("--min-duration", metavar="HOURS", type=float,
                   help="the alarm rule: hours a level must stay exceeded before it counts "
                        "(and stay under it before it clears); default 6")
    p.add_argument("--evaluate", action="store_true",
                   help="evaluate the alarm levels of every rover with levels again over "
                        "its whole record and store the history (a sync, and a change of "
                        "levels, evaluate the rovers concerned by themselves)")
    add_jobs_argument(p)
    p.set_defaults(func=run_alarms)


def run_alarms(args) -> int:
    from devmon_sync.analyze.alarm_history import change_levels
    from devmon_sync.store import StoreError

    changes = _level_changes(args)
    rule = _rule_change(args)
    scope, name = _scope(args)
    if scope is None:
        if rule:
            return _set_rule(args.db, rule, args.jobs)
        if changes or not args.evaluate:
            raise UsageError("one of --device SERIAL, --site NAME or --group NAME is "
                             "required: the levels' device, site or group (or --evaluate "
                             "alone, to evaluate every rover again)")
        return _evaluate_all(args.db, args.jobs)
    if rule:
        raise UsageError("--confidence and --min-duration set the rule of the whole mirror: "
                         "give them without --device, --site or --group")
    with open_existing_mirror(args.db, read_only=not (changes or args.evaluate)) as mirror:
        try:
            shown = change_levels(mirror, scope, name, changes, evaluate=args.evaluate,
                                  jobs=args.jobs)
        except StoreError as err:
            raise UsageError(str(err)) from None
    _print_levels(shown)
    return 0


def _scope(args) -> tuple[str | None, str | None]:
    """("device", "site" or "group", the name given), or (None, None): the whole mirror."""
    return next(((scope, getattr(args, scope)) for scope in ("device", "site", "group")
                 if getattr(args, scope) is not None), (None, None))


def _level_changes(args) -> dict[str, dict[str, float]]:
    """{quantity: levels} of --displacement, --velocity, --parameter and --clear (``{}``
    clears); a UsageError for a quantity given twice or levels on a parameter without the
    parameter's device."""
    changes: dict[str, dict[str, float]] = {}
    for option, given in (("--displacement", args.displacement),
                          ("--velocity", args.velocity), ("--parameter", args.parameter),
                          ("--clear", [(quantity, {}) for quantity in args.clear])):
        for quantity, levels in given:
            if option == "--parameter" and not args.device:
                raise UsageError("--parameter: levels on a parameter are set per device: give "
                                 "the parameter's device with --device")
            if quantity in changes:
                raise UsageError(f"{option}: {quantity} is given more than once: give each "
                                 f"quantity's levels (or --clear) once")
            changes[quantity] = levels
    return changes


def _print_levels(shown) -> None:
    """The levels of the scope (with a device's history), the rule, the evaluations."""
    from devmon_sync.analyze.alarm_history import level_lines

    print(format_alarm_levels(shown.target, shown.levels, shown.sources, shown.not_for_gnss))
    if shown.history is not None:
        print(format_alarm_history(shown.history))
    print(f"Rule (whole mirror): a level counts as reached when {shown.rule.describe()}.")
    for line in level_lines(shown.evaluated):
        print(printable(line))


def _rule_change(args) -> dict[str, float]:
    """The rule's new confidence (a fraction) and/or duration, checked by ``analysis``."""
    from analysis.alarms import AlarmRule

    change = {}
    if args.confidence is not None:
        change["confidence"] = args.confidence / 100.0
    if args.min_duration is not None:
        change["min_duration_hours"] = args.min_duration
    if change:
        try:
            AlarmRule(**change)
        except ValueError as err:
            text = str(err)
            if "confidence" in change and "confidence" in text:
                text = (f"--confidence {args.confidence:g}: give a percentage from 50 to "
                        f"below 100, e.g. 95 or 99")
            raise UsageError(text) from None
    return change


def _set_rule(db, rule: dict[str, float], jobs: int | None) -> int:
    """Set the mirror's alarm rule and evaluate every rover with levels by it."""
    from devmon_sync.analyze.alarm_history import change_rule, level_lines
    from devmon_sync.store import StoreError

    with open_existing_mirror(db, read_only=False) as mirror:
        try:
            now, evaluated = change_rule(mirror, jobs=jobs, **rule)
        except StoreError as err:
            raise UsageError(str(err)) from None
    print(f"Alarm rule of {db}: a level counts as reached when {now.describe()}.")
    for line in level_lines(evaluated):
        print(printable(line))
    return 0


def _evaluate_all(db, jobs: int | None) -> int:
    """Evaluate every rover with levels (or a history) again over its whole record."""
    from devmon_sync.analyze.alarm_history import evaluate_alarms, level_lines
    from devmon_sync.store import StoreError

    with open_existing_mirror(db, read_only=False) as mirror:
        try:
            lines = level_lines(evaluate_alarms(mirror, None, only_stale=False, jobs=jobs))
        except StoreError as err:
            raise UsageError(str(err)) from None
    print(printable_lines(lines) if lines else "No rover has displacement or velocity levels: "
          "set some with `devmon alarms --device SERIAL --displacement alert=10,...`.")
    return 0


def format_alarm_history(rows: list[dict]) -> str:
    """The stored alarm history of a device: one line per quantity and level reached."""
    if not rows:
        return "Alarm history: no level reached (as last evaluated)."
    lines = ["Alarm history (as last evaluated, until "
             f"{_utc_minutes(rows[0]['evaluated_until'])}):"]
    for r in rows:
        still = "still reached" if r["exceeded_at_end"] else \
            f"last {_utc_minutes(r['last_exceeded'])}"
        episodes = r.get("episodes") or 1
        level = f" (>= {r['threshold']:g} {r['unit']})" if r["threshold"] is not None else ""
        lines.append(f"  {r['quantity']} {r['level']}{level}: "
                     f"first {_utc_minutes(r['first_exceeded'])}, {still}; peak "
                     f"{r['peak_value']:.1f} {r['unit']}; {episodes} "
                     f"episode{'s' if episodes != 1 else ''}")
    return printable_lines(lines)


def _utc_minutes(t) -> str:
    return "-" if t is None else t.strftime("%Y-%m-%d %H:%MZ")


def format_alarm_levels(target, levels: dict[str, dict[str, float]],
                        sources: dict[str, str], not_for_gnss: str = "") -> str:
    """The levels of a device (with where each comes from) or set on a site or group, one
    quantity a line; the 3D displacement and velocity always shown, but for a device that
    is no GNSS rover (``not_for_gnss`` says why none applies).  Names ``printable``."""
    always = [] if not_for_gnss else ["displacement", "velocity"]
    quantities = [*always, *sorted(q for q in levels if q not in always)]
    quantities.sort(key=lambda q: (q.startswith("parameter:"), q))
    rows = []
    for quantity in quantities:
        unit = {"displacement": "mm", "velocity": "mm/day"}.get(quantity.partition(":")[0], "")
        text = ", ".join(f"{name} >= {value:g} {unit}".rstrip()
                         for name, value in levels.get(quantity, {}).items())
        source = sources.get(quantity)
        origin = "" if not source else \
            "set on the device" if source == "device" else f"from {printable(source)}"
        rows.append((quantity, text or "none set", origin))
    if not rows:  # a device that is no rover, without levels on its parameters
        rows.append(("parameters", "none set", ""))
    width = max(len(q) for q, _, _ in rows)
    text_width = max(len(t) for _, t, _ in rows)
    if target.scope == "device":
        head = f"Alarm levels that apply to {target.describe()}:"
        tail = [f"No displacement or velocity level: {not_for_gnss}"] if not_for_gnss else []
    else:
        whose = f"the devices of {target.scope} {target.name}" + \
            (" and of its nested groups" if target.scope == "group" else "")
        head = f"Alarm levels set on {target.scope} {target.name} ({target.scope_id}):"
        nearer = "a nearer group" if target.scope == "group" else "one of its groups"
        tail = [f"They apply to {whose}, for each quantity a device sets no levels of, "
                f"nor gets from {nearer} (`devmon alarms --device SERIAL` shows a "
                f"device's)."]
    lines = [head, *(f"  {q:{width}}  {t:{text_width}}  {o}".rstrip() if o else
                     f"  {q:{width}}  {t}" for q, t, o in rows), *tail]
    return printable_lines(lines)

"""``devmon analyze`` and ``devmon alarms``: thin wrappers over the store and ``analysis``.

The mirror is read through ``devmon_sync.store.queries``; every number is computed by
``analysis.pipeline``; this module only parses options and prints.
"""

from __future__ import annotations

import argparse
import json
import sys

from analysis.displacement import DEFAULT_REFERENCE
from analysis.pipeline import plus_minus
from devmon_sync.cli.args import UsageError, add_db_argument, open_existing_mirror, timestamp_arg


def add_analyze(sub) -> None:
    p = sub.add_parser(
        "analyze", help="displacement, velocity and early warning of GNSS rovers",
        description="Analyse the mirrored epochs of GNSS rovers: total displacement, velocity "
                    "with its uncertainty, acceleration, inverse-velocity forecast and alarm "
                    "level, per device.")
    add_db_argument(p, "mirror file")
    p.add_argument("--device", action="append", default=[], metavar="SERIAL",
                   help="rover serial number (repeatable; default: every rover with epochs)")
    p.add_argument("--projection", action="append", default=[], metavar="ID|EPSG:CODE|enu",
                   help="frame of the displacements: a projection id of the site, an EPSG code "
                        "or PROJ string, or enu (local east-north-up; default). Repeat it to "
                        "see several frames side by side; the first one drives the rest of "
                        "the table")
    p.add_argument("--reference", default=DEFAULT_REFERENCE,
                   metavar="start|first|DATE|DATE..DATE",
                   help="zero of displacement: the mean of the first 24 h (start, default; "
                        "start:48h for another span), the first epoch, the epoch nearest a "
                        "date, or the mean of a window")
    p.add_argument("--method", choices=("midas", "ols"), default="midas",
                   help="velocity estimator: midas (robust, default) or ols (least squares)")
    p.add_argument("--from", dest="start", type=timestamp_arg, help="first epoch to use")
    p.add_argument("--to", dest="end", type=timestamp_arg, help="last epoch to use")
    p.add_argument("--json", action="store_true", help="print JSON for machines")
    add_jobs_argument(p)
    p.set_defaults(func=run_analyze)


def add_jobs_argument(p, pages: bool = False) -> None:
    """``--jobs N``: worker processes for many rovers (``devmon_sync.analyze.pool``) and,
    with ``pages``, a report's pages (``devmon_sync.report.render``)."""
    from devmon_sync.analyze.pool import MIN_ROVERS_PER_WORKER, jobs_arg

    drawn = " and draw a long report's pages" if pages else ""
    p.add_argument("--jobs", type=jobs_arg, default=None, metavar="N",
                   help=f"analyse rovers{drawn} in N processes at once (default: one per "
                        f"core; 1: one after the other in this process). Fewer than "
                        f"{2 * MIN_ROVERS_PER_WORKER} rovers are analysed in this process "
                        f"anyway: starting the processes would cost more than it saves")


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
                   metavar="[COMPONENT:]NAME=MM,...",
                   help="levels in mm, ascending, e.g. alert=10,alarm=25,emergency=50 (3D) "
                        "or vertical:alert=5,alarm=15 (repeatable, once per component)")
    p.add_argument("--velocity", action="append", default=[],
                   metavar="[COMPONENT:]NAME=MM_PER_DAY,...",
                   help="levels in mm/day, ascending, e.g. alert=1,alarm=5 (3D) or "
                        "horizontal:alert=0.5,alarm=2 (repeatable, once per component)")
    p.add_argument("--parameter", action="append", default=[], metavar="UUID:NAME=VALUE,...",
                   help="levels on a parameter's values, in its unit, e.g. "
                        "1b6f...:alert=1.5,alarm=2 (with --device only; repeatable; shown as "
                        "threshold lines in the GUI's plots)")
    p.add_argument("--clear", action="append", default=[], metavar="QUANTITY",
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
    p.set_defaults(func=run_alarms)


def parse_levels(text: str, option: str) -> dict[str, float]:
    """``alert=10,alarm=25`` as {name: threshold}; validated by ``analysis`` (names,
    ascending positive thresholds)."""
    from analysis.warning import AlarmLevels

    levels: dict[str, float] = {}
    for item in filter(None, (s.strip() for s in text.split(","))):
        name, sep, value = item.partition("=")
        try:
            levels[name.strip()] = float(value)
        except ValueError:
            sep = ""
        if not sep:
            raise UsageError(f"{option}: {item!r} is not NAME=NUMBER; write e.g. "
                             f"{option} alert=10,alarm=25")
    try:
        AlarmLevels(levels)
    except ValueError as err:
        raise UsageError(f"{option}: {err}") from None
    return levels


def parse_component_levels(text: str, base: str) -> tuple[str, dict[str, float]]:
    """``vertical:alert=5,alarm=15`` as (``displacement:vertical``, {name: threshold});
    without a component (or with ``3d``) the quantity is ``base`` itself, the 3D length."""
    from devmon_sync.store import queries

    option = f"--{base}"
    head, sep, rest = text.partition(":")
    component = None
    if sep and "=" not in head:
        component, text = head.strip().lower(), rest
        if component not in ("3d", *queries.ALARM_COMPONENTS):
            raise UsageError(f"{option}: no component {head.strip()!r}: use one of 3d, "
                             f"{', '.join(queries.ALARM_COMPONENTS)}, e.g. {option} "
                             f"vertical:alert=5,alarm=15")
    return queries.alarm_quantity(base, component), parse_levels(text, option)


def run_alarms(args) -> int:
    from devmon_sync.store import StoreError, queries

    changes: dict[str, dict[str, float]] = {}

    def change(quantity: str, levels: dict[str, float], option: str) -> None:
        if quantity in changes:
            raise UsageError(f"{option}: {quantity} is given more than once: give each "
                             f"quantity's levels (or --clear) once")
        changes[quantity] = levels

    for base in ("displacement", "velocity"):
        for text in getattr(args, base):
            change(*parse_component_levels(text, base), f"--{base}")
    for item in args.parameter:
        uuid, sep, text = item.partition(":")
        if not sep or not uuid.strip():
            raise UsageError(f"--parameter: {item!r} is not UUID:NAME=VALUE,...; write e.g. "
                             f"--parameter 1b6f...:alert=1.5,alarm=2")
        if not args.device:
            raise UsageError("--parameter: levels on a parameter are set per device: give "
                             "the parameter's device with --device")
        change(queries.PARAMETER_QUANTITY + uuid.strip(), parse_levels(text, "--parameter"),
               "--parameter")
    for quantity in (q.strip() for q in args.clear):
        if not quantity.startswith(queries.PARAMETER_QUANTITY):
            try:
                quantity = queries.alarm_quantity(*queries.split_alarm_quantity(quantity))
            except StoreError as err:
                raise UsageError(f"--clear: {err}") from None
        change(quantity, {}, "--clear")
    rule = _rule_change(args)
    scope, name = next(((s, getattr(args, s)) for s in ("device", "site", "group")
                        if getattr(args, s) is not None), (None, None))
    if scope is None:
        if rule:
            return _set_rule(args.db, rule)
        if changes or not args.evaluate:
            raise UsageError("one of --device SERIAL, --site NAME or --group NAME is "
                             "required: the levels' device, site or group (or --evaluate "
                             "alone, to evaluate every rover again)")
        return _evaluate_all(args.db)
    if rule:
        raise UsageError("--confidence and --min-duration set the rule of the whole mirror: "
                         "give them without --device, --site or --group")
    with open_existing_mirror(args.db, read_only=not (changes or args.evaluate)) as mirror:
        try:
            target = queries.alarm_scope(mirror, scope, name)
            queries.set_alarm_ladders(mirror, target.scope_id, changes, scope=target.scope)
            if scope == "device":
                levels = queries.alarm_levels(mirror, target.scope_id)
                sources = queries.alarm_level_sources(mirror, target.scope_id)
            else:
                levels, sources = queries.alarm_levels_set(mirror, scope, target.scope_id), {}
            # levels changed: the rovers of the scope again (a cleared level leaves no newer
            # row to tell them by)
            evaluated = _evaluate(mirror, _scope_serials(mirror, target), only_stale=False) \
                if changes or args.evaluate else []
            history = queries.alarm_history(mirror, target.scope_id) \
                if scope == "device" else None
            rule = queries.alarm_rule(mirror)
        except StoreError as err:
            raise UsageError(str(err)) from None
    print(format_alarm_levels(target, levels, sources))
    if history is not None:
        print(format_alarm_history(history))
    from analysis.alarms import AlarmRule

    print(f"Rule (whole mirror): a level counts as reached when {AlarmRule(**rule).describe()}.")
    for line in evaluated:
        print(line)
    return 0


def _scope_serials(mirror, target) -> list[str]:
    """The devices a device, site or group scope covers (a group's nested groups too)."""
    from devmon_sync.store import report_queries

    if target.scope == "device":
        return [target.scope_id]
    devices = (report_queries.site_devices if target.scope == "site"
               else report_queries.group_devices)(mirror, target.scope_id)
    return [d.serial_number for d in devices]


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


def _set_rule(db, rule: dict[str, float]) -> int:
    """Set the mirror's alarm rule and evaluate every rover with levels by it."""
    from analysis.alarms import AlarmRule
    from devmon_sync.store import StoreError, queries

    with open_existing_mirror(db, read_only=False) as mirror:
        try:
            queries.set_alarm_rule(mirror, **rule)
            now = AlarmRule(**queries.alarm_rule(mirror))
            lines = _evaluate(mirror, None, only_stale=False)
        except StoreError as err:
            raise UsageError(str(err)) from None
    print(f"Alarm rule of {db}: a level counts as reached when {now.describe()}.")
    for line in lines:
        print(line)
    return 0


def _evaluate(mirror, serials: list[str] | None, only_stale: bool) -> list[str]:
    """Evaluate the rovers named (default all) with levels or a history, or only those
    whose levels or data changed since their last evaluation."""
    from devmon_sync.analyze.alarm_history import evaluate_alarms, level_lines

    return level_lines(evaluate_alarms(mirror, serials, only_stale=only_stale))


def _evaluate_all(db) -> int:
    from devmon_sync.store import StoreError

    with open_existing_mirror(db, read_only=False) as mirror:
        try:
            lines = _evaluate(mirror, None, only_stale=False)
        except StoreError as err:
            raise UsageError(str(err)) from None
    print("\n".join(lines) if lines else "No rover has displacement or velocity levels: "
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
    return "\n".join(lines)


def _utc_minutes(t) -> str:
    return "-" if t is None else t.strftime("%Y-%m-%d %H:%MZ")


def format_alarm_levels(target, levels: dict[str, dict[str, float]],
                        sources: dict[str, str]) -> str:
    """The levels of a device (with where each comes from) or set on a site or group, one
    quantity a line; the 3D displacement and velocity always shown."""
    quantities = ["displacement", "velocity", *sorted(q for q in levels
                                                       if q not in ("displacement", "velocity"))]
    quantities.sort(key=lambda q: (q.startswith("parameter:"), q))
    rows = []
    for quantity in quantities:
        unit = {"displacement": "mm", "velocity": "mm/day"}.get(quantity.partition(":")[0], "")
        text = ", ".join(f"{name} >= {value:g} {unit}".rstrip()
                         for name, value in levels.get(quantity, {}).items())
        source = sources.get(quantity)
        origin = "" if not source else \
            "set on the device" if source == "device" else f"from {source}"
        rows.append((quantity, text or "none set", origin))
    width = max(len(q) for q, _, _ in rows)
    text_width = max(len(t) for _, t, _ in rows)
    if target.scope == "device":
        head = f"Alarm levels that apply to {target.describe()}:"
        tail = []
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
    return "\n".join(lines)


def run_analyze(args) -> int:
    from analysis.pipeline import AnalysisOptions
    from devmon_sync.analyze import pool as analyze_pool
    from devmon_sync.analyze.rovers import analyze_devices, rovers_to_analyze

    frames = list(dict.fromkeys(args.projection)) or ["enu"]
    try:
        options = [AnalysisOptions.build(reference=args.reference, method=args.method,
                                         frame=frame) for frame in frames]
    except ValueError as err:
        raise UsageError(str(err)) from None
    if args.start and args.end and args.end <= args.start:
        raise UsageError("--to must be later than --from")
    from devmon_sync.store import StoreError

    with open_existing_mirror(args.db) as mirror:
        try:
            devices = rovers_to_analyze(mirror, args.device)
            if analyze_pool.worker_count(args.jobs, len(devices)):
                outputs = _outputs_in_pool(mirror, devices, options, args)
            else:
                per_frame = [analyze_devices(mirror, args.device, o, args.start, args.end)
                             for o in options]
                # one tuple per device: its analysis in each frame
                outputs = [_output(analyses, args.json) for analyses in zip(*per_frame)]
        except (ValueError, StoreError) as err:
            raise UsageError(str(err)) from None
        except KeyboardInterrupt:  # the pool's workers are stopped by now
            print("\nInterrupted: nothing printed.", file=sys.stderr)
            return 130
    if args.json:
        json.dump(outputs, sys.stdout, indent=2, default=str)
        print()
    else:
        print("\n\n".join(outputs))
    return 0


def _output(analyses, as_json: bool):
    """What ``devmon analyze`` prints of one rover analysed in each frame asked for: its
    JSON summary, or its table and the frames side by side."""
    if as_json:
        return _json_summary(analyses)
    return format_analysis(analyses[0]) + format_side_by_side(analyses)


def _outputs_in_pool(mirror, devices, options, args) -> list:
    """Each rover's output computed in the process pool (``_rover_output``); the error a
    serial run raises first (frames in turn, each over every rover) is raised."""
    from devmon_sync.analyze import pool as analyze_pool

    outcomes = analyze_pool.run(
        _rover_output, [(d, options, args.start, args.end, args.json) for d in devices],
        jobs=args.jobs, mirror=mirror)
    for outcome in outcomes:
        if isinstance(outcome, analyze_pool.Failed):
            outcome.reraise()  # not a rover's data: a fault
    failures = [(frame, i, err) for i, (frame, err, _) in enumerate(outcomes) if err]
    if failures:
        raise min(failures, key=lambda f: f[:2])[2]
    return [output for _, _, output in outcomes]


def _rover_output(mirror, device, options, start, end, as_json: bool):
    """In a pool worker: one rover analysed in each frame and formatted, as (None, None,
    output), or (frame index, error, None) for the first frame whose analysis refused
    (a ValueError or StoreError, which a serial run raises)."""
    from devmon_sync.analyze.rovers import analyze_device
    from devmon_sync.store import StoreError

    analyses = []
    for frame, frame_options in enumerate(options):
        try:
            analyses.append(analyze_device(mirror, device, frame_options, start, end))
        except (ValueError, StoreError) as err:
            return frame, err, None
    return None, None, _output(analyses, as_json)


def _json_summary(analyses) -> dict:
    """The first frame's summary, plus ``frames``: the frame-dependent numbers of every
    requested frame, in the order asked (a stable shape whether one frame or several)."""
    return {**analyses[0].summary(), "frames": [a.frame_summary() for a in analyses]}


def format_side_by_side(analyses) -> str:
    """Total displacement and velocity of one rover in each requested frame, as columns
    (empty when only one frame was asked for).  Projected east/north are grid axes: they
    differ from local ENU by the meridian convergence and the grid scale factor."""
    if len(analyses) < 2:
        return ""
    frames = [a.frame_summary() for a in analyses]
    width = 26
    lines = ["", "  side by side (total mm | velocity mm/yr):",
             "  " + " " * 11 + "".join(f"{f['frame'][:width - 1]:>{width}}" for f in frames)]
    for row in ROWS:
        if not all(row in f["displacement_mm"] for f in frames):
            continue
        cells = "".join(f"{f['displacement_mm'][row]:>10.1f} | "
                        f"{plus_minus(f['velocity_mm_per_yr'].get(row), 1):>13}" for f in frames)
        lines.append(f"  {row:11}{cells}")
    return "\n".join(lines)


ROWS = ("east", "north", "up", "horizontal", "3d", "along", "across")


def _corrections(s: dict) -> str:
    return ", ".join(f"{c['time']} (removed E {c['east']:+.1f} N {c['north']:+.1f} "
                     f"U {c['up']:+.1f} mm)" for c in s["known_step_corrections_mm"])


def _alarm_lines(result, s: dict) -> list[str]:
    """The level reached now (by which quantity), the rule, and when each level was
    reached in the period."""
    alarm = result.alarm
    if alarm is None:
        return ["  alarm level: no levels set (`devmon alarms` sets them)"]
    from analysis.alarms import quantity_words

    now = f"{s['alarm_level']} (by {quantity_words(s['alarm_by'])})" if s["alarm_level"] \
        else "below all levels"
    lines = [f"  alarm level: {now}; " + "; ".join(k.describe() for k in alarm.keys.values()),
             f"  alarm rule: {s['alarm_rule']}"]
    for h in s["alarm_history"]:
        still = "still reached" if h["exceeded_at_end"] else f"last {h['last_exceeded']}"
        lines.append(f"  reached {h['quantity']} {h['level']}: first {h['first_exceeded']}, "
                     f"{still}; peak {h['peak']:.1f} {h['unit']}")
    if not s["alarm_history"]:
        lines.append("  no level reached in the period")
    return lines


def format_analysis(result) -> str:
    """A plain-text table of one rover's analysis (``RoverAnalysis.summary()``)."""
    s = result.summary()
    received, used, expected = s["epochs_received"], s["epochs_used"], s["epochs_expected"]
    ratio = f", {s['completeness'] * 100:.1f} % of {expected} expected" if expected else ""
    lines = [f"{s['serial_number']}  {s['display_name']}",
             f"  period {s['first_epoch']} .. {s['last_epoch']} (UTC); frame {s['frame']}, "
             f"heights {s['height_type']}; reference {s['reference']}; method {s['method']}",
             f"  epochs: {used} used of {received} received{ratio}; {s['rejected_by_quality']} "
             f"failed the quality filter, {s['outliers']} outliers, {s['gaps']} gaps",
             f"  steps: known {_corrections(s) or 'none'}; detected "
             f"{', '.join(s['detected_steps']) or 'none'} (left in the displacement)",
             f"  {'component':11} {'total mm':>12}  {'velocity mm/day':>17}  {'mm/yr':>15}  "
             f"{'last 7 d mm/day':>17}"]
    sigmas = s["displacement_sigma_mm"]
    for row in ROWS:
        if row not in s["displacement_mm"]:
            continue
        total = plus_minus([s["displacement_mm"][row], sigmas[row]], 1) if row in sigmas \
            else f"{s['displacement_mm'][row]:.1f}"
        lines.append(f"  {row:11} {total:>12}  "
                     f"{plus_minus(s['velocity_mm_per_day'].get(row), 3):>17}  "
                     f"{plus_minus(s['velocity_mm_per_yr'].get(row), 1):>15}  "
                     f"{plus_minus(s['recent_velocity_mm_per_day'].get(row), 3):>17}")
    if s["acceleration_mm_per_day2"]:
        lines.append(f"  acceleration along the motion: "
                     f"{plus_minus(s['acceleration_mm_per_day2'], 4)} mm/day²")
    lines += _alarm_lines(result, s)
    forecast = s["forecast"]
    if forecast and forecast["supported"]:
        lo, hi = forecast["interval"]
        lines.append(f"  failure forecast (Voight alpha 2 fit): {forecast['failure_time']} "
                     f"(95 %: {lo} .. {hi}), R² {forecast['r2']:.2f}")
    elif forecast:
        lines.append(f"  failure forecast: none ({forecast['reason']})")
    if s["grid"]:
        g = s["grid"]
        lines.append(f"  grid at the rover: scale factor {g['scale_factor']:.7f}, meridian "
                     f"convergence {g['convergence_deg']:+.4f}°, combined factor "
                     f"{g['combined_factor']:.7f} (ground distance = grid / combined)")
    if s["consistency_mm"]:
        lines.append("  check against the service's own values: largest disagreement " + ", ".join(
            f"{k} {v:.2f} mm" for k, v in s["consistency_mm"].items()))
    lines += [f"  note: {n}" for n in s["notes"]]
    return "\n".join(lines)

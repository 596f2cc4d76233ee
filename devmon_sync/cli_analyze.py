"""``devmon analyze`` and ``devmon alarms``: thin wrappers over the store and ``analysis``.

The mirror is read through ``devmon_sync.store.queries``; every number is computed by
``analysis.pipeline``; this module only parses options and prints.
"""

from __future__ import annotations

import json
import sys

from analysis.displacement import DEFAULT_REFERENCE
from analysis.pipeline import plus_minus
from devmon_sync.cli_common import UsageError, add_db_argument, open_existing_mirror, timestamp_arg


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
    p.set_defaults(func=run_analyze)


def add_alarms(sub) -> None:
    p = sub.add_parser(
        "alarms", help="show or set a device's alarm levels",
        description="Show or set the threshold alarm levels of a device, kept in the mirror "
                    "(a sync never changes them). Displacement levels are in mm (length of "
                    "the 3D displacement from the reference), velocity levels in mm/day.")
    add_db_argument(p, "mirror file")
    p.add_argument("--device", required=True, metavar="SERIAL", help="device serial number")
    p.add_argument("--displacement", metavar="NAME=MM,...",
                   help="levels in mm, ascending, e.g. alert=10,alarm=25,emergency=50")
    p.add_argument("--velocity", metavar="NAME=MM_PER_DAY,...",
                   help="levels in mm/day, ascending, e.g. alert=1,alarm=5")
    p.add_argument("--parameter", action="append", default=[], metavar="UUID:NAME=VALUE,...",
                   help="levels on a parameter's values, in its unit, e.g. "
                        "1b6f...:alert=1.5,alarm=2 (repeatable; shown as threshold lines in "
                        "the GUI's plots)")
    p.add_argument("--clear", action="append", default=[], metavar="QUANTITY",
                   help="remove the levels of displacement, velocity or parameter:UUID")
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


def run_alarms(args) -> int:
    from devmon_sync.store import StoreError, queries

    changes = {q: parse_levels(getattr(args, q), f"--{q}")
               for q in ("displacement", "velocity") if getattr(args, q)}
    for item in args.parameter:
        uuid, sep, text = item.partition(":")
        if not sep or not uuid.strip():
            raise UsageError(f"--parameter: {item!r} is not UUID:NAME=VALUE,...; write e.g. "
                             f"--parameter 1b6f...:alert=1.5,alarm=2")
        changes[queries.PARAMETER_QUANTITY + uuid.strip()] = parse_levels(text, "--parameter")
    changes.update({q: {} for q in args.clear})
    with open_existing_mirror(args.db, read_only=not changes) as mirror:
        try:
            if not queries.device_exists(mirror, args.device):
                raise UsageError(f"no device {args.device!r} in {args.db}: check the serial "
                                 f"number (`devmon status --db {args.db}` lists them)")
            for quantity, levels in changes.items():
                queries.set_alarm_levels(mirror, args.device, quantity, levels)
            levels = queries.alarm_levels(mirror, args.device)
        except StoreError as err:
            raise UsageError(str(err)) from None
    units = dict(queries.ALARM_QUANTITIES)
    print(f"Alarm levels of {args.device}:")
    for quantity in ("displacement", "velocity", *sorted(q for q in levels if q not in units)):
        text = ", ".join(f"{name} >= {value:g} {units.get(quantity, '')}".rstrip()
                         for name, value in levels.get(quantity, {}).items())
        print(f"  {quantity:12} {text or 'none set'}")
    return 0


def run_analyze(args) -> int:
    from analysis.pipeline import AnalysisOptions
    from devmon_sync.analyze import analyze_devices

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
            per_frame = [analyze_devices(mirror, args.device, o, args.start, args.end)
                         for o in options]
        except (ValueError, StoreError) as err:
            raise UsageError(str(err)) from None
    by_device = list(zip(*per_frame))  # one tuple per device: its analysis in each frame
    if args.json:
        json.dump([_json_summary(analyses) for analyses in by_device], sys.stdout, indent=2,
                  default=str)
        print()
    else:
        print("\n\n".join(format_analysis(a[0]) + format_side_by_side(a) for a in by_device))
    return 0


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
             f"  {'component':11} {'total mm':>9}  {'velocity mm/day':>17}  {'mm/yr':>15}  "
             f"{'last 7 d mm/day':>17}"]
    for row in ROWS:
        if row not in s["displacement_mm"]:
            continue
        lines.append(f"  {row:11} {s['displacement_mm'][row]:9.1f}  "
                     f"{plus_minus(s['velocity_mm_per_day'].get(row), 3):>17}  "
                     f"{plus_minus(s['velocity_mm_per_yr'].get(row), 1):>15}  "
                     f"{plus_minus(s['recent_velocity_mm_per_day'].get(row), 3):>17}")
    if s["acceleration_mm_per_day2"]:
        lines.append(f"  acceleration along the motion: "
                     f"{plus_minus(s['acceleration_mm_per_day2'], 4)} mm/day²")
    lines.append(f"  alarm level: {s['alarm_level'] or 'none reached (or no levels set)'}")
    forecast = s["forecast"]
    if forecast and forecast["supported"]:
        lo, hi = forecast["interval"]
        lines.append(f"  failure forecast (inverse velocity): {forecast['failure_time']} "
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

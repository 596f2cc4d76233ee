"""``devmon analyze``: a thin wrapper over the store and ``analysis``.

The mirror is read through ``devmon_sync.store.queries``; every number is computed by
``analysis.pipeline``; this module only parses options and prints: each rover's table, then
one summary line (how many, which are at a level, the fastest), since a site's output runs to
hundreds of lines.  A device that is no rover is named with its kind and the commands that
read it (``not_a_rover``), not as "no GNSS rover".
"""

from __future__ import annotations

import json
import sys

from analysis.words import counted
from devmon_sync.cli.args import (
    UsageError,
    add_analysis_arguments,
    add_db_argument,
    add_jobs_argument,
    open_existing_mirror,
    timestamp,
)
from devmon_sync.printable import printable, printable_lines


def add_analyze(sub) -> None:
    p = sub.add_parser(
        "analyze", help="displacement, velocity and early warning of GNSS rovers",
        description="Analyse the mirrored epochs of GNSS rovers: total displacement, velocity "
                    "with its uncertainty, acceleration, inverse-velocity forecast and alarm "
                    "level, per device.")
    add_db_argument(p, "mirror file")
    scope = p.add_mutually_exclusive_group()
    scope.add_argument("--device", action="append", default=[], metavar="SERIAL",
                       help="rover serial number or name (repeatable; default: every rover "
                            "with epochs)")
    scope.add_argument("--site", metavar="UUID|NAME",
                       help="the rovers of a site (its name in any case)")
    scope.add_argument("--group", metavar="UUID|NAME",
                       help="the rovers of a device group and of its nested groups")
    p.add_argument("--projection", action="append", default=[], metavar="ID|EPSG:CODE|enu",
                   help="frame of the displacements: a projection id of the site, an EPSG code "
                        "or PROJ string, or enu (local east-north-up; default). Repeat it to "
                        "see several frames side by side; the first one drives the rest of "
                        "the table")
    add_analysis_arguments(p)
    p.add_argument("--from", dest="start", type=timestamp, help="first epoch to use")
    p.add_argument("--to", dest="end", type=timestamp, help="last epoch to use")
    p.add_argument("--json", action="store_true", help="print JSON for machines")
    add_jobs_argument(p)
    p.set_defaults(func=run_analyze)


def run_analyze(args) -> int:
    from analysis.pipeline import AnalysisOptions
    from devmon_sync.analyze.rovers import rovers_to_analyze

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
            serials, scope = _serials_asked(mirror, args)
            outputs = _outputs(mirror, rovers_to_analyze(mirror, serials), options, args)
        except (ValueError, StoreError) as err:
            raise UsageError(str(err)) from None
        except KeyboardInterrupt:  # the pool's workers are stopped by now
            print("\nInterrupted: nothing printed.", file=sys.stderr)
            return 130
    if args.json:
        json.dump([output for output, _ in outputs], sys.stdout, indent=2, default=str)
        print()
    else:
        print("\n\n".join(output for output, _ in outputs))
        print("\n" + summary_line([brief for _, brief in outputs], scope))
    return 0


def _serials_asked(mirror, args) -> tuple[list[str], str]:
    """The serial numbers to analyse ([]: every rover with epochs) and the scope in words
    for the summary line.  A site or group: its rovers with epochs (a UsageError naming
    its devices when it holds none); a device that is no rover: ``not_a_rover``."""
    from devmon_sync.analyze.alarm_history import scope_serials
    from devmon_sync.analyze.device_kinds import not_a_rover
    from devmon_sync.store import queries

    if args.device:
        rovers = {d.serial_number for d in queries.gnss_devices(mirror)}
        for text in args.device:
            serial = queries.resolve_serial(mirror, text)
            if serial is not None and serial not in rovers:
                raise UsageError(not_a_rover(mirror, serial))
        return list(args.device), ""
    if not (args.site or args.group):
        return [], ""
    target = queries.alarm_scope(mirror, "site" if args.site else "group",
                                 args.site or args.group)
    members = scope_serials(mirror, target)
    serials = [d.serial_number for d in queries.gnss_devices(mirror)
               if d.epochs and d.serial_number in members]
    if not serials:
        raise UsageError(f"{target.describe()} holds no GNSS rover with epochs in "
                         f"{mirror.path} ({counted(len(members), 'device')}): `devmon analyze` "
                         f"analyses GNSS rovers; choose another {target.scope}, or see "
                         f"`devmon status --db {mirror.path}` for what it holds")
    return serials, f" ({target.describe()})"


def _output(analyses, as_json: bool):
    """What ``devmon analyze`` prints of one rover analysed in each frame asked for: its
    JSON summary, or its table and the frames side by side; with what the summary line
    needs of it (``_brief``)."""
    brief = _brief(analyses[0].summary())
    if as_json:
        return _json_summary(analyses), brief
    return format_analysis(analyses[0]) + format_side_by_side(analyses), brief


def _brief(s: dict) -> dict:
    """Of one rover's summary, what the summary line tells: its level now, its horizontal
    rate, whether a failure is forecast."""
    rate = s["velocity_mm_per_yr"].get("horizontal")
    forecast = s.get("forecast") or {}
    return {"serial": s["serial_number"], "name": s["display_name"],
            "level": s["alarm_level"],
            "rate_mm_per_yr": abs(rate[0]) if rate and rate[0] is not None else None,
            "forecast": bool(forecast.get("supported"))}


def summary_line(briefs: list[dict], scope: str = "") -> str:
    """The last line of the table: "Analysed 8 rovers (site Illgraben slope): 1 at an alarm
    level (emergency: DM24-33757); no failure forecast; fastest DM24-33757
    (gnss-accelerating-003), 196 mm/yr horizontal"."""
    levels: dict[str, list[str]] = {}
    for b in briefs:
        if b["level"]:
            levels.setdefault(b["level"], []).append(b["serial"])
    at_level = sum(len(v) for v in levels.values())
    parts = [f"{at_level} at an alarm level ("
             + "; ".join(f"{level}: {', '.join(serials)}" for level, serials in levels.items())
             + ")" if at_level else "none at an alarm level"]
    forecast = [b["serial"] for b in briefs if b["forecast"]]
    parts.append(f"a failure forecast for {', '.join(forecast)}" if forecast
                 else "no failure forecast")
    moving = [b for b in briefs if b["rate_mm_per_yr"] is not None]
    if moving:
        fastest = max(moving, key=lambda b: b["rate_mm_per_yr"])
        parts.append(f"fastest {fastest['serial']} ({printable(fastest['name'])}), "
                     f"{fastest['rate_mm_per_yr']:.0f} mm/yr horizontal")
    return f"Analysed {counted(len(briefs), 'rover')}{scope}: " + "; ".join(parts) + "."


def _outputs(mirror, devices, options, args) -> list:
    """Each rover's output (``_rover_outputs``, by batch), in the process pool when it pays
    (``rovers.by_batch``), else here; the error first in order (frames in turn, each over
    every rover) is raised."""
    from devmon_sync.analyze.rovers import by_batch, raised

    outcomes = raised(by_batch(_rover_outputs, devices, (options, args.start, args.end,
                                                         args.json),
                               jobs=args.jobs, mirror=mirror))
    failures = [(frame, i, err) for i, (frame, err, _) in enumerate(outcomes) if err]
    if failures:
        raise min(failures, key=lambda f: f[:2])[2]
    return [output for _, _, output in outcomes]


def _rover_outputs(mirror, devices, options, start, end, as_json: bool) -> list:
    """In a pool worker or here: each rover of a batch analysed in each frame, formatted, as
    (None, None, (output, brief)), or (frame index, error, None) for the first frame whose
    analysis refused (a ValueError or StoreError, which a serial run raises).  The batch's
    epochs, levels and rule are read at once (``store_inputs``), for every frame."""
    from devmon_sync.analyze.rovers import analyze_device, store_inputs
    from devmon_sync.store import StoreError

    inputs = store_inputs(mirror, devices, start, end)
    out = []
    for device in devices:
        analyses, refused = [], None
        for frame, frame_options in enumerate(options):
            try:
                analyses.append(analyze_device(mirror, device, frame_options, start, end,
                                               inputs=inputs))
            except (ValueError, StoreError) as err:
                refused = (frame, err, None)
                break
        out.append(refused or (None, None, _output(analyses, as_json)))
    return out


def _json_summary(analyses) -> dict:
    """The first frame's summary, plus ``frames``: the frame-dependent numbers of every
    requested frame, in the order asked (a stable shape whether one frame or several)."""
    return {**analyses[0].summary(), "frames": [a.frame_summary() for a in analyses]}


def format_side_by_side(analyses) -> str:
    """Total displacement and velocity of one rover in each requested frame, as columns
    (empty when only one frame was asked for).  Projected east/north are grid axes: they
    differ from local ENU by the meridian convergence and the grid scale factor."""
    from analysis.pipeline import plus_minus

    if len(analyses) < 2:
        return ""
    frames = [a.frame_summary() for a in analyses]
    width = 26
    lines = ["", "  side by side (total mm | velocity mm/yr):",
             "  " + " " * 11 + "".join(f"{printable(f['frame'])[:width - 1]:>{width}}"
                                     for f in frames)]
    for row in ROWS:
        if not all(row in f["displacement_mm"] for f in frames):
            continue
        cells = "".join(f"{f['displacement_mm'][row]:>10.1f} | "
                        f"{plus_minus(f['velocity_mm_per_yr'].get(row), 1):>13}" for f in frames)
        lines.append(f"  {row:11}{cells}")
    return printable_lines(lines + _grid_rows(frames, width))


def _grid_rows(frames: list[dict], width: int) -> list[str]:
    """Each frame's grid scale factor and meridian convergence at the rover ("-" for local
    ENU, which has none): what turns and scales a projection's east and north (the README
    promises the table prints them)."""
    if not any(f.get("grid") for f in frames):
        return []
    rows = []
    for label, key, fmt in (("scale factor", "scale_factor", "{:.7f}"),
                            ("convergence", "convergence_deg", "{:+.4f}°")):
        cells = "".join(f"{fmt.format(f['grid'][key]) if f.get('grid') else '-':>{width}}"
                        for f in frames)
        rows.append(f"  {label:11}{cells}")
    return rows


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


def _linear_forecast_lines(s: dict) -> list[str]:
    """The classic linear inverse-velocity forecast beside the Voight fit: its statement
    (a date, "imminent", or "accelerating; failure possible within N days") and whether
    the two agree."""
    linear = s.get("linear_forecast")
    if not linear:
        return []
    return [f"  linear inverse-velocity forecast (Fukuzono): {linear['statement']}",
            f"  the two forecasts: {linear['agreement']['text']}"]


def format_analysis(result) -> str:
    """A plain-text table of one rover's analysis (``RoverAnalysis.summary()``), its names
    and notes ``printable`` line by line."""
    from analysis.pipeline import plus_minus

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
        alpha = f", alpha {forecast['alpha']:.2f}" if forecast.get("alpha") else ""
        lines.append(f"  failure forecast (Voight fit{alpha}): {forecast['failure_time']} "
                     f"({100 * forecast['confidence']:g} %: {lo} .. {hi}), "
                     f"R² {forecast['r2']:.2f}")
    elif forecast:
        lines.append(f"  failure forecast: none ({forecast['reason']})")
    lines += _linear_forecast_lines(s)
    if s["grid"]:
        g = s["grid"]
        lines.append(f"  grid at the rover: scale factor {g['scale_factor']:.7f}, meridian "
                     f"convergence {g['convergence_deg']:+.4f}°, combined factor "
                     f"{g['combined_factor']:.7f} (ground distance = grid / combined)")
    if s["consistency_mm"]:
        lines.append("  check against the service's own values: largest disagreement " + ", ".join(
            f"{k} {v:.2f} mm" for k, v in s["consistency_mm"].items()))
    lines += [f"  note: {n}" for n in s["notes"]]
    return printable_lines(lines)

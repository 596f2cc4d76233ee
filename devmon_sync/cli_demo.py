"""``devmon demo``: all of devmon in one command, on the built-in reference server.

No account and no network: the reference server starts in this process on a free loopback
port, a realistic world is synced into ``./devmon-demo/mirror.duckdb`` through the real client
and sync engine (at the real service's 200 requests/minute), the GNSS rovers are analysed and
a PDF report with its PNG figures is written.  ``--gui`` then opens the desktop app on it.
"""

from __future__ import annotations

import shutil
import time
from pathlib import Path

from devmon_sync.cli_common import UsageError

DEMO_KEY = "devmon-demo-key"
#: Example alarm levels set on every demo rover, so the report and the GUI show them at work.
DEMO_DISPLACEMENT_MM = {"alert": 10.0, "alarm": 25.0, "emergency": 50.0}
DEMO_VELOCITY_MM_PER_DAY = {"alert": 0.5, "alarm": 2.0}
MOVING_MIN_MM_PER_YR = 2.0  # a rover moves if its horizontal rate exceeds this and 2 sigma


def add_demo(sub) -> None:
    p = sub.add_parser(
        "demo", help="sync, analyse and report a realistic world from the built-in server",
        description="Start the reference server in-process, sync its world into "
                    "DIR/mirror.duckdb, analyse the GNSS rovers, write DIR/report.pdf and its "
                    "PNG figures, and print a summary. No account, no network.")
    p.add_argument("--dir", default="devmon-demo", help="output folder (default %(default)s)")
    p.add_argument("--gui", action="store_true", help="open the desktop app on the result")
    p.add_argument("--sites", type=int, default=6, help="sites in the world (default 6)")
    p.add_argument("--devices", type=int, default=48, help="devices (default 48)")
    p.add_argument("--days", type=int, default=90, help="days of history (default 90)")
    p.add_argument("--seed", type=int, default=42, help="world seed (default 42)")
    p.set_defaults(func=run_demo)


def run_demo(args) -> int:
    if min(args.sites, args.devices, args.days) < 1:
        raise UsageError("--sites, --devices and --days must be at least 1")
    out = Path(args.dir)
    mirror_path = out / "mirror.duckdb"
    _fresh_folder(out)
    started = time.monotonic()
    with _server(args) as server:
        print(f"devmon demo: reference server on {server.base_url} (seed {args.seed}, "
              f"{args.sites} sites, {args.devices} devices, {args.days} days of history); "
              f"no account, no network", flush=True)
        report = _sync(server.base_url, mirror_path)
    print(f"Synced {mirror_path}: {report.readings_rows:,} readings and {report.epoch_rows:,} "
          f"GNSS epochs, {report.requests} requests in {report.seconds:.1f} s", flush=True)
    analyses = _analyse(mirror_path)
    _print_rovers(analyses)
    pdf, pngs, pages = _report(mirror_path, out, [a.serial_number for a in analyses])
    print(f"\nReport: {pdf} ({pages} pages); {len(pngs)} figures as PNG in {out / 'figures'}")
    print(f"Done in {time.monotonic() - started:.0f} s. Browse it: devmon gui --db {mirror_path}"
          + ("" if args.gui else "   (or: devmon demo --gui)"), flush=True)
    if args.gui:
        from devmon_sync.cli import main

        return main(["gui", "--db", str(mirror_path)])
    return 0


def _fresh_folder(out: Path) -> None:
    """The demo starts over each time: its world follows the wall clock."""
    if out.exists() and not out.is_dir():
        raise UsageError(f"{out} exists and is not a folder: choose another with --dir")
    for name in ("mirror.duckdb", "mirror.duckdb.wal", "report.pdf"):
        (out / name).unlink(missing_ok=True)
    shutil.rmtree(out / "figures", ignore_errors=True)
    try:
        (out / "figures").mkdir(parents=True, exist_ok=True)
    except OSError as err:
        raise UsageError(f"cannot create {out}: {err.strerror}; choose another --dir") from None


def _server(args):
    from devmon_sync.server import ReferenceServer, ServerConfig, WorldSize

    config = ServerConfig(host="127.0.0.1", port=0, seed=args.seed, api_keys={DEMO_KEY: None},
                          size=WorldSize(args.sites, args.devices, args.days))
    return ReferenceServer(config).start()


def _sync(base_url: str, mirror_path: Path):
    """The real client and engine, at the real service's rate limit, with the progress bar
    of ``devmon sync``."""
    from devmon_sync.cli_sync import _Bar
    from devmon_sync.client import ApiClient
    from devmon_sync.store import Mirror
    from devmon_sync.sync import SyncEngine, SyncOptions

    bar = _Bar(quiet=False)
    try:
        with ApiClient(base_url, DEMO_KEY) as client, Mirror.open(mirror_path) as mirror:
            report = SyncEngine(client, mirror, SyncOptions(), on_progress=bar).run()
    finally:
        bar.close()
    return report


def _analyse(mirror_path: Path) -> list:
    """Every rover with epochs, MIDAS in local ENU from the first epoch, after setting the
    example alarm levels."""
    from analysis.pipeline import AnalysisOptions
    from devmon_sync.analyze import analyze_devices
    from devmon_sync.store import Mirror, queries

    with Mirror.open(mirror_path) as mirror:
        rovers = [d.serial_number for d in queries.gnss_devices(mirror) if d.epochs]
        for serial in rovers:
            queries.set_alarm_levels(mirror, serial, "displacement", DEMO_DISPLACEMENT_MM)
            queries.set_alarm_levels(mirror, serial, "velocity", DEMO_VELOCITY_MM_PER_DAY)
        analyses = analyze_devices(mirror, rovers, AnalysisOptions.build())
    levels = ", ".join(f"{k} {v:g}" for k, v in DEMO_DISPLACEMENT_MM.items())
    rates = ", ".join(f"{k} {v:g}" for k, v in DEMO_VELOCITY_MM_PER_DAY.items())
    print(f"Example alarm levels set on the {len(rovers)} GNSS rovers: displacement {levels} "
          f"mm; velocity {rates} mm/day (change them with `devmon alarms`)")
    return analyses


def is_moving(summary: dict) -> bool:
    """Horizontal rate above ``MOVING_MIN_MM_PER_YR`` and above twice its uncertainty."""
    rate = summary["velocity_mm_per_yr"].get("horizontal")
    return bool(rate) and rate[0] > max(MOVING_MIN_MM_PER_YR, 2.0 * rate[1])


def _print_rovers(analyses: list) -> None:
    summaries = sorted((a.summary() for a in analyses),
                       key=lambda s: -s["velocity_mm_per_yr"].get("horizontal", [0.0])[0])
    print("\nGNSS rovers (MIDAS velocity over the whole record, local ENU, from the first "
          "epoch):")
    for s in summaries:
        rate, sigma = s["velocity_mm_per_yr"].get("horizontal", [float("nan")] * 2)
        forecast = s["forecast"] or {}
        when = str(forecast.get("failure_time", ""))[:16].replace("T", " ")
        extra = f"; failure forecast {when} UTC" if forecast.get("supported") else ""
        print(f"  {'moving' if is_moving(s) else 'stable':7} {s['display_name'][:30]:30} "
              f"{s['serial_number']:11} {rate:7.1f} ± {sigma:4.1f} mm/yr, "
              f"{s['displacement_mm']['3d']:6.1f} mm total, alarm level "
              f"{s['alarm_level'] or 'none'}{extra}")
    moving = sum(is_moving(s) for s in summaries)
    print(f"  {moving} of {len(summaries)} rovers are moving.")


def _report(mirror_path: Path, out: Path, rovers: list[str]) -> tuple[Path, list, int]:
    """The report of ``devmon report`` over every rover, with its PNG figures."""
    from devmon_sync.report import ReportOptions, build_report, write_report
    from devmon_sync.store import Mirror

    pdf = out / "report.pdf"
    options = ReportOptions(devices=tuple(rovers), title="devmon demo: GNSS deformation",
                            command_line="devmon demo")
    with Mirror.open(mirror_path, read_only=True) as mirror:
        data = build_report(mirror, options)
    result = write_report(data, pdf, png_dir=out / "figures")
    return pdf, list(result.png_paths), result.pages

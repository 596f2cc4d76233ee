"""The demo: all of devmon on the built-in reference server, as ``devmon demo`` and the app's
Help → Run the demo both run it.

No account and no network: the reference server starts in this process on a free loopback
port, a realistic world is synced into ``OUT/mirror.duckdb`` through the real client and sync
engine (at the real service's 200 requests/minute), the GNSS rovers are analysed and a PDF
report with its PNG figures is written.  Like ``devmon serve``, it may start the server.
"""

from __future__ import annotations

import math
import shutil
import threading
import time
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path

from analysis.words import counted


class DemoError(ValueError):
    """The demo cannot run as asked; the message says what to change."""


DEMO_KEY = "devmon-demo-key"
#: Example alarm levels set on every demo rover, so the report and the GUI show them at work.
DEMO_DISPLACEMENT_MM = {"alert": 10.0, "alarm": 25.0, "emergency": 50.0}
DEMO_VELOCITY_MM_PER_DAY = {"alert": 0.5, "alarm": 2.0}
#: The demo's stages, in order, as ``on_stage`` names them.
STAGES = ("server", "sync", "analysis", "report")
MOVING_MIN_MM_PER_YR = 2.0  # a rover moves if its horizontal rate exceeds this and 2 sigma


@dataclass
class DemoResult:
    """Where the demo put things: what the GUI opens and the CLI prints."""

    mirror_path: Path
    report_pdf: Path
    png_paths: list[Path]
    pages: int
    seconds: float
    #: The rovers' ``RoverAnalysis.summary()`` dicts, fastest horizontal rate first.
    rovers: list[dict]
    #: What was synced: rows of readings and of GNSS epochs, and the world's size.
    readings_rows: int = 0
    epoch_rows: int = 0
    world: str = ""


def demo_pipeline(out: Path, sites: int = 6, devices: int = 48, days: int = 90, seed: int = 42,
                  *, say: Callable[[str], None] = print,
                  on_progress: Callable | None = None,
                  on_stage: Callable[[str], None] | None = None,
                  cancel: threading.Event | None = None) -> DemoResult:
    """The whole demo into ``out``: what ``devmon demo`` and the app's Help → Run the demo
    both run.  ``say`` receives the summary lines, ``on_progress`` the sync's progress,
    ``on_stage`` each stage's name as it starts (one of ``STAGES``), ``cancel`` stops the
    demo (the sync after its current chunk, else before the next stage) with a DemoError.
    A DemoError (a ValueError) says what to change."""
    def stage(name: str) -> None:
        if cancel is not None and cancel.is_set():
            raise DemoError("the demo was stopped; run it again to start over")
        if on_stage is not None:
            on_stage(name)

    mirror_path = out / "mirror.duckdb"
    stage("server")
    _fresh_folder(out)
    started = time.monotonic()
    with _server(sites, devices, days, seed) as server:
        say(f"devmon demo: reference server on {server.base_url} (seed {seed}, "
            f"{_world_words(sites, devices, days)} of history); no account, no network")
        stage("sync")
        report = _sync(server.base_url, mirror_path, on_progress, cancel)
    say(f"Synced {mirror_path}: {counted(report.readings_rows, 'reading')} and "
        f"{counted(report.epoch_rows, 'GNSS epoch')}, {counted(report.requests, 'request')} in "
        f"{report.seconds:.1f} s")
    stage("analysis")  # a stopped sync ends here, as stopped
    if report.status != "ok":
        raise DemoError(f"the demo's sync ended {report.status}: run the demo again")
    analyses = _analyse(mirror_path, say)
    rovers = rovers_by_rate(analyses)
    _print_rovers(rovers, say)
    stage("report")
    pdf, pngs, pages = _report(mirror_path, out, [a.serial_number for a in analyses])
    say(f"\nReport: {pdf} ({pages} pages); {len(pngs)} figures as PNG in {out / 'figures'}")
    return DemoResult(mirror_path, pdf, pngs, pages, time.monotonic() - started, rovers,
                      report.readings_rows, report.epoch_rows,
                      f"{_world_words(sites, devices, days)} of history")


def _fresh_folder(out: Path) -> None:
    """The demo starts over each time: its world follows the wall clock."""
    if out.exists() and not out.is_dir():
        raise DemoError(f"{out} exists and is not a folder: choose another folder (--dir)")
    try:  # a folder under a file, or one that cannot be written: one message, not a trace
        for name in ("mirror.duckdb", "mirror.duckdb.wal", "report.pdf"):
            (out / name).unlink(missing_ok=True)
        shutil.rmtree(out / "figures", ignore_errors=True)
        (out / "figures").mkdir(parents=True, exist_ok=True)
    except OSError as err:
        raise DemoError(f"cannot use {out}: {err.strerror}; choose another folder "
                        f"(--dir)") from None


def _world_words(sites: int, devices: int, days: int) -> str:
    """ "1 site, 6 devices, 10 days": the demo world in words."""
    return f"{counted(sites, 'site')}, {counted(devices, 'device')}, {counted(days, 'day')}"


def _server(sites: int, devices: int, days: int, seed: int):
    from devmon_sync.server import ReferenceServer, ServerConfig, WorldSize

    config = ServerConfig(host="127.0.0.1", port=0, seed=seed, api_keys={DEMO_KEY: None},
                          size=WorldSize(sites, devices, days))
    return ReferenceServer(config).start()


def _sync(base_url: str, mirror_path: Path, on_progress=None, cancel=None):
    """The real client and engine, at the real service's rate limit."""
    from devmon_sync.client import ApiClient
    from devmon_sync.store import Mirror
    from devmon_sync.sync.engine import SyncEngine, SyncOptions

    with ApiClient(base_url, DEMO_KEY) as client, Mirror.open(mirror_path) as mirror:
        return SyncEngine(client, mirror, SyncOptions(), on_progress=on_progress,
                          cancel=cancel).run()


def _analyse(mirror_path: Path, say: Callable[[str], None]) -> list:
    """Every rover with epochs, MIDAS in local ENU from the first day's mean, after setting
    the example alarm levels on their sites (on a rover without a site, on the rover) and
    evaluating them into the mirror's alarm history, as a sync would."""
    from analysis.pipeline import AnalysisOptions
    from devmon_sync.analyze.alarm_history import evaluate_alarms
    from devmon_sync.analyze.rovers import analyze_devices
    from devmon_sync.store import Mirror, queries

    with Mirror.open(mirror_path) as mirror:
        devices = [d for d in queries.gnss_devices(mirror) if d.epochs]
        targets = {(("site", d.site_uuid) if d.site_uuid else ("device", d.serial_number))
                   for d in devices}
        for scope, scope_id in sorted(targets):
            for quantity, ladder in (("displacement", DEMO_DISPLACEMENT_MM),
                                     ("velocity", DEMO_VELOCITY_MM_PER_DAY)):
                queries.set_alarm_levels(mirror, scope_id, quantity, ladder, scope=scope)
        evaluate_alarms(mirror)
        rovers = [d.serial_number for d in devices]
        analyses = analyze_devices(mirror, rovers, AnalysisOptions.build())
    levels = ", ".join(f"{k} {v:g}" for k, v in DEMO_DISPLACEMENT_MM.items())
    rates = ", ".join(f"{k} {v:g}" for k, v in DEMO_VELOCITY_MM_PER_DAY.items())
    sites = sum(scope == "site" for scope, _ in targets)
    where = "the site" if sites == 1 else f"the {sites} sites"
    rule = AnalysisOptions.build().alarm_rule
    say(f"Example alarm levels set on {where} of the {counted(len(rovers), 'GNSS rover')}: 3D "
        f"displacement {levels} mm; 3D velocity {rates} mm/day; reached when exceeded with "
        f"{100 * rule.confidence:g} % confidence for {rule.min_duration_hours:g} h (change "
        f"them with `devmon alarms`)")
    return analyses


def is_moving(summary: dict) -> bool:
    """Horizontal rate above ``MOVING_MIN_MM_PER_YR`` and above twice its uncertainty."""
    rate = summary["velocity_mm_per_yr"].get("horizontal")
    return bool(rate) and rate[0] > max(MOVING_MIN_MM_PER_YR, 2.0 * rate[1])


def rovers_by_rate(analyses: list) -> list[dict]:
    """The analyses' summaries, fastest horizontal rate first (what to look at first)."""
    return sorted((a.summary() for a in analyses),
                  key=lambda s: -s["velocity_mm_per_yr"].get("horizontal", [0.0])[0])


def failure_forecast_text(summary: dict) -> str:
    """The inverse-velocity failure forecast as ``YYYY-MM-DD HH:MM`` UTC, '' when none."""
    forecast = summary["forecast"] or {}
    if not forecast.get("supported"):
        return ""
    return str(forecast.get("failure_time", ""))[:16].replace("T", " ")


def _level_text(summary: dict) -> str:
    """The level reached now and since when (the history's first time for that level)."""
    level = summary["alarm_level"]
    if not level:
        return "none"
    since = [h["first_exceeded"] for h in summary["alarm_history"]
             if h["level"] == level and h["quantity"] == summary["alarm_by"]]
    return f"{level} since {since[0][:10]}" if since else level


def _print_rovers(summaries: list[dict], say: Callable[[str], None]) -> None:
    say("\nGNSS rovers (MIDAS velocity over the whole record, local ENU, from the mean of "
        "the first 24 h):")
    for s in summaries:
        when = failure_forecast_text(s)
        extra = f"; failure forecast {when} UTC" if when else ""
        say(f"  {'moving' if is_moving(s) else 'stable':7} {s['display_name'][:30]:30} "
            f"{s['serial_number']:11} {_rate_text(s)}, "
            f"{s['displacement_mm']['3d']:6.1f} mm total, alarm level "
            f"{_level_text(s)}{extra}")
    moving = sum(is_moving(s) for s in summaries)
    say(f"  {moving} of {len(summaries)} rovers are moving.")


def _rate_text(summary: dict) -> str:
    """The horizontal MIDAS rate and its uncertainty, or that the record gave none: MIDAS
    wants 10 days paired a year apart (half the record apart in a short one), which a
    record of under about 20 days cannot give (``analysis.trends.midas_velocity``).  Never
    "nan ± nan"."""
    rate, sigma = summary["velocity_mm_per_yr"].get("horizontal", [float("nan")] * 2)
    if not (math.isfinite(rate) and math.isfinite(sigma)):
        return f"{'no rate (record too short)':>20}"
    return f"{rate:7.1f} ± {sigma:4.1f} mm/yr"


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

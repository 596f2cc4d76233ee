#!/usr/bin/env python3
"""The failure-time forecast on REAL slope failures (issue 28, point 6): for each record in
``benchmarks/data/`` (listed, with its source, licence and known failure time, in
``benchmarks/data/SOURCES.md``), the data are cut 30, 14, 7, 3 and 1 days before the known
failure and each forecast method is run on what is left, as the pipeline runs it.

What this measures and what it does not.  Nothing here is fitted or tuned: the forecast's
constants were calibrated on synthetic slopes (``benchmarks/bench_forecast.py``); these
real records only score it.  The records are few and NOT independent (all three shipped so
far are prisms of one pit-wall failure, Century Mine, 23 Feb 2014), so the table is a set of
anecdotes with numbers, not a coverage rate.  The Century failure is known to the day only
(local date): the truth is the middle of that day with +- 12 h, an interval "covers" when
it overlaps that day, and the error is forecast minus the middle of the day (negative =
early = the safe side).  The Century records end on 20 Feb 2014 (the export's own end), so
the 1-day cut holds the same data as the 3-day cut; the table says so.

Methods are columns: ``METHODS`` is a list of (name, callable); a callable takes the times
(``datetime64[ns]``, UTC) and the displacement (mm, along the motion) of the record up to a
cut and returns an ``Outcome``.  ``devmon`` is ``analysis.inverse_velocity.inverse_velocity(t,
displacement_m, smoothing_days=analysis.pipeline.INVERSE_VELOCITY_SMOOTHING_DAYS).forecast()``
exactly as ``analysis.pipeline.analyze_rover`` calls it.

Per record it also prints the sampling (median spacing), the span and the scatter: the MAD
of second differences of the displacement, and the white-noise sigma it implies
(1.4826 MAD / sqrt(6): for white noise of sigma s, a second difference has variance 6 s^2;
real motion between readings adds to it, so it is an upper bound on the reading noise).

    python benchmarks/bench_real_failures.py
"""

from __future__ import annotations

import argparse
import csv
import re
import sys
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path

import numpy as np

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))
from analysis.forecast_linear import linear_forecast_from_displacement  # noqa: E402
from analysis.inverse_velocity import inverse_velocity  # noqa: E402
from analysis.pipeline import INVERSE_VELOCITY_SMOOTHING_DAYS  # noqa: E402

DATA_DIR = Path(__file__).resolve().parent / "data"
SOURCES = DATA_DIR / "SOURCES.md"
DAYS_BEFORE = (30.0, 14.0, 7.0, 3.0, 1.0)
# a record shorter than two days (a field experiment of hours) is cut hours before instead
HOURS_BEFORE_SHORT = tuple(h / 24.0 for h in (3.0, 2.0, 1.0, 0.5, 0.25))
CASE_COLUMNS = ("file", "case", "event", "failure_time_utc", "failure_uncertainty_hours")
_NS_HOUR = 3_600e9


@dataclass(frozen=True)
class Case:
    """One record of a real failure: its CSV, a short name, the failure event it belongs to
    (records of one event are not independent), the known failure time (UTC) and how well
    it is known (hours either side)."""

    file: str
    name: str
    event: str
    failure_time: np.datetime64
    uncertainty_hours: float


@dataclass(frozen=True)
class Record:
    """A record's readings in time order: UTC times and displacement along the motion (mm)."""

    t: np.ndarray
    displacement_mm: np.ndarray


@dataclass(frozen=True)
class Outcome:
    """What a forecast method said: supported or not (``reason`` says why not), and when
    supported the forecast failure time and its interval (UTC)."""

    supported: bool
    reason: str = ""
    failure_time: np.datetime64 | None = None
    interval: tuple[np.datetime64, np.datetime64] | None = None
    warning: str = ""  # a warning without a date ("imminent", "within 2 days")


def load_cases(sources: Path = SOURCES) -> list[Case]:
    """The records listed in the machine-readable table of ``SOURCES.md`` (the one whose
    header is ``CASE_COLUMNS``): why a table there - the failure time lives beside the
    prose that says where it comes from, so the two cannot drift apart."""
    rows = _table_rows(sources.read_text(encoding="utf-8"))
    return [Case(r["file"], r["case"], r["event"], _utc(r["failure_time_utc"]),
                 float(r["failure_uncertainty_hours"])) for r in rows]


def _table_rows(text: str) -> list[dict[str, str]]:
    lines = [ln.strip() for ln in text.splitlines()]
    for i, line in enumerate(lines):
        if _cells(line) == list(CASE_COLUMNS):
            body = []
            for row in lines[i + 2:]:
                if not row.startswith("|"):
                    break
                body.append(dict(zip(CASE_COLUMNS, _cells(row), strict=True)))
            return body
    raise ValueError(f"{SOURCES.name} has no table with the columns {', '.join(CASE_COLUMNS)}"
                     f": add one row per CSV there")


def _cells(line: str) -> list[str]:
    return [c.strip().strip("`") for c in line.strip().strip("|").split("|")]


def _utc(text: str) -> np.datetime64:
    if not re.fullmatch(r"\d{4}-\d\d-\d\dT\d\d:\d\d(:\d\d)?Z", text):
        raise ValueError(f"time {text!r} is not ISO-8601 UTC (YYYY-MM-DDTHH:MM[:SS]Z)")
    return np.datetime64(text[:-1], "ns")


def load_record(path: Path) -> Record:
    """A record's CSV (``time_utc``, ``displacement_mm``, optional ``note``)."""
    with path.open(newline="", encoding="utf-8") as fh:
        rows = list(csv.DictReader(fh))
    t = np.array([_utc(r["time_utc"]) for r in rows], dtype="datetime64[ns]")
    x = np.array([float(r["displacement_mm"]) for r in rows])
    order = np.argsort(t, kind="stable")
    return Record(t[order], x[order])


def devmon_forecast(t: np.ndarray, displacement_mm: np.ndarray) -> Outcome:
    """devmon's forecast as the pipeline makes it (``analysis.pipeline.analyze_rover``)."""
    iv = inverse_velocity(t, displacement_mm / 1000.0,
                          smoothing_days=INVERSE_VELOCITY_SMOOTHING_DAYS)
    fc = iv.forecast()
    if not fc.supported:
        return Outcome(False, fc.reason)
    return Outcome(True, "", fc.failure_time, fc.interval)


def linear_forecast(t: np.ndarray, displacement_mm: np.ndarray) -> Outcome:
    """The classic linear inverse-velocity forecast as the pipeline makes it
    (``analysis.forecast_linear``): dated, or a warning without a date, or none."""
    f = linear_forecast_from_displacement(t, displacement_mm / 1000.0)
    if f.state == "dated":
        return Outcome(True, "", f.failure_time, f.interval)
    if f.state == "imminent":
        return Outcome(False, f.statement, warning="imminent")
    if f.state == "accelerating, not dated":
        return Outcome(False, f.statement, warning=f"within {f.within_days:.1f} d")
    return Outcome(False, f.statement)


METHODS: list[tuple[str, Callable[[np.ndarray, np.ndarray], Outcome]]] = [
    ("Voight", devmon_forecast),
    ("linear 1/v", linear_forecast),
]


def record_stats(rec: Record) -> dict[str, float]:
    """Readings, span (days), median spacing (hours), MAD of second differences (mm) and
    the white-noise sigma that MAD implies (mm)."""
    hours = np.diff(rec.t).astype(np.int64) / _NS_HOUR
    d2 = np.diff(rec.displacement_mm, 2)
    mad = float(np.median(np.abs(d2 - np.median(d2)))) if d2.size else float("nan")
    return {"n": float(rec.t.size),
            "span_days": float((rec.t[-1] - rec.t[0]) / np.timedelta64(1, "D")),
            "median_spacing_h": float(np.median(hours)) if hours.size else float("nan"),
            "mad_d2_mm": mad, "sigma_mm": 1.4826 * mad / np.sqrt(6.0)}


def _hours(a: np.datetime64, b: np.datetime64) -> float:
    return float((a - b).astype("timedelta64[ns]").astype(np.int64) / _NS_HOUR)


def score(case: Case, out: Outcome) -> tuple[str, str, str, str]:
    """Forecast, interval, covers (the interval overlaps the failure time +- its
    uncertainty), error in hours (forecast minus truth; negative = early, the safe side)."""
    if not out.supported:
        return "-", "-", "-", "-"
    lo, hi = out.interval
    u = np.timedelta64(int(case.uncertainty_hours * _NS_HOUR), "ns")
    covers = lo <= case.failure_time + u and hi >= case.failure_time - u
    return (_short(out.failure_time), f"{_short(lo)}..{_short(hi)}",
            "yes" if covers else "no", f"{_hours(out.failure_time, case.failure_time):+.0f}")


def _short(t: np.datetime64) -> str:
    return str(np.datetime_as_string(t, unit="h")).replace("T", " ") + "h"


def run_case(case: Case, rec: Record, methods=METHODS) -> list[list[str]]:
    """One row per cut: days before, the last reading kept, readings kept, then per method
    supported (or the footnote of its refusal), forecast, interval, covers, error (h)."""
    rows, previous_end = [], None
    span_days = float((rec.t[-1] - rec.t[0]) / np.timedelta64(1, "s")) / 86400.0
    cuts = DAYS_BEFORE if span_days >= 2 * DAYS_BEFORE[-1] else HOURS_BEFORE_SHORT
    for days in cuts:
        cut = case.failure_time - np.timedelta64(int(days * 24 * _NS_HOUR), "ns")
        keep = rec.t <= cut
        if keep.sum() < 3:
            rows.append([_before(days), "-", str(int(keep.sum()))] + ["too few readings"]
                        + ["-"] * (5 * len(methods) - 1))
            continue
        t, x = rec.t[keep], rec.displacement_mm[keep]
        end = _short(t[-1]) + (" (same data)" if previous_end == t[-1] else "")
        previous_end = t[-1]
        row = [_before(days), end, str(t.size)]
        for _, method in methods:
            out = method(t, x)
            said = ("yes" if out.supported else f"warns: {out.warning}" if out.warning
                    else f"no: {out.reason}")
            row += [said, *score(case, out)]
        rows.append(row)
    return rows


def _before(days: float) -> str:
    return f"{days:g} d" if days >= 1 else f"{days * 24:g} h"


def print_table(header: list[str], rows: list[list[str]], notes: list[str]) -> None:
    """A plain-text table; long refusal reasons become numbered notes under it."""
    shown = []
    for row in rows:
        cells = []
        for cell in row:
            if cell.startswith("no: "):
                notes.append(cell[4:])
                cell = f"no [{len(notes)}]"
            cells.append(cell)
        shown.append(cells)
    widths = [max(len(r[i]) for r in [header, *shown]) for i in range(len(header))]
    for r in [header, ["-" * w for w in widths], *shown]:
        print("  ".join(c.ljust(w) for c, w in zip(r, widths, strict=True)).rstrip())


def main(argv: list[str] | None = None) -> int:
    argparse.ArgumentParser(description=__doc__.split("\n\n")[0]).parse_args(argv)
    cases = load_cases()
    header = ["before", "data end (UTC)", "n"]
    for name, _ in METHODS:
        header += [f"{name}: supported", "forecast (UTC)", "interval", "covers", "err h"]
    notes: list[str] = []
    for case in cases:
        rec = load_record(DATA_DIR / case.file)
        s = record_stats(rec)
        print(f"\n{case.name}  [{case.file}; event {case.event}]")
        print(f"  failure {_short(case.failure_time)} +- {case.uncertainty_hours:g} h; "
              f"{s['n']:.0f} readings over {s['span_days']:.1f} days, median spacing "
              f"{s['median_spacing_h']:.1f} h; scatter: MAD of second differences "
              f"{s['mad_d2_mm']:.1f} mm (white sigma <= {s['sigma_mm']:.1f} mm); "
              f"displacement {rec.displacement_mm[0]:.1f} -> {rec.displacement_mm[-1]:.1f} mm")
        print_table(header, run_case(case, rec), notes)
    if notes:
        print("\nRefusal reasons:")
        for i, note in enumerate(notes, 1):
            print(f"  [{i}] {note}")
    events = sorted({c.event for c in cases})
    print(f"\n{len(cases)} records of {len(events)} failure event(s): {', '.join(events)}. "
          f"Records of one event are not independent.")
    return 0


if __name__ == "__main__":
    sys.exit(main())

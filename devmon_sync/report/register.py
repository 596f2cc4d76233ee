"""The point register and the recent-change table as text (``tables`` does the same for the
summary): what each monitoring point is and where, and how far it moved over the last 7
and 30 days, the figure a client compares with the previous report.

Positions are the site plan's (the median of the rover's last day of epochs, in the plan's
frame); the setup is the service's GNSS configuration; changes are
``analysis.change.recent_change`` of the analysis the rest of the report shows.
"""

from __future__ import annotations

import numpy as np

from analysis.change import RecentChange, recent_change
from devmon_sync.report.model import (
    NOT_A_ROVER,
    DeviceEntry,
    ReportData,
    SitePlan,
    report_order,
)
from devmon_sync.report.tables import (UNSET_DIRECTIONS, Column, Row, alarm_rank, device_cell,
                                       light_cells, light_columns, light_directions)

CHANGE_DAYS = (7, 30)
#: A change whose start lies further than this from its nominal day is marked (a gap in the
#: data there moved it).
SPAN_MARK_HOURS = 6.0
MISSING = "-"


def register_rovers(data: ReportData) -> list[DeviceEntry]:
    """The monitoring points: every rover of the scope (analysed or not), in the report's
    order (``report_order``: by point number, P2 before P10, then by name)."""
    return sorted((e for e in data.entries if e.problem != NOT_A_ROVER), key=report_order)


# ----------------------------------------------------------------------------- register

def register_columns(plan: SitePlan | None) -> tuple[Column, ...]:
    """The register's columns, the coordinate headers naming the plan's axes (the site's
    grid: "CH1903+ / LV95 E (m)"; ``SitePlan.coordinate_headers``)."""
    x, y = ("Easting\nm", "Northing\nm") if plan is None else plan.coordinate_headers
    return (Column("point", "Point", 0.25, "left"),
            Column("x", x, 0.10), Column("y", y, 0.10),
            Column("h", "Ellipsoidal\nheight m", 0.08),
            Column("since", "Data since\n(UTC)", 0.10, "center"),
            Column("antenna", "Antenna\n(ARP height)", 0.17, "left"),
            Column("base", "Base station", 0.12, "left"),
            Column("sampling", "Sampling", 0.08, "center"))


def register_row(entry: DeviceEntry, plan: SitePlan | None) -> Row:
    """One point: where it is (the plan's position; ``-`` when it is on no plan), since
    when the mirror holds its data, its antenna, base station and sampling period."""
    x = y = h = MISSING
    if plan is not None and entry.serial_number in plan.serial_numbers:
        i = plan.serial_numbers.index(entry.serial_number)
        p = plan.points[i]
        x, y = f"{p.easting_m:.3f}", f"{p.northing_m:.3f}"
        height = plan.heights_m[i] if i < len(plan.heights_m) else float("nan")
        h = f"{height:.3f}" if np.isfinite(height) else MISSING
    s = entry.setup
    since = entry.first_epoch_in_mirror
    return Row(entry.serial_number, {
        "point": device_cell(entry), "x": x, "y": y, "h": h,
        "since": since.strftime("%Y-%m-%d") if since else MISSING,
        "antenna": _antenna(s), "base": _base(s),
        "sampling": _period(s.sampling_period_s if s else None)})


def _antenna(setup) -> str:
    if setup is None or (setup.antenna_type is None and setup.arp_height_m is None):
        return MISSING
    arp = "" if setup.arp_height_m is None else f"({setup.arp_height_m:.3f} m)"
    return f"{setup.antenna_type or 'type not given'}\n{arp}".strip()


def _base(setup) -> str:
    if setup is None or setup.base_station_name is None:
        return MISSING
    kind = {"cors": "CORS", "private": "private", "device": "device"}.get(
        setup.base_station_type or "", setup.base_station_type or "")
    return f"{setup.base_station_name}\n{kind}".strip()


def _period(seconds: float | None) -> str:
    if seconds is None or not np.isfinite(seconds) or seconds <= 0:
        return MISSING
    if seconds % 3600 == 0:
        return f"{seconds / 3600:g} h"
    if seconds % 60 == 0:
        return f"{seconds / 60:g} min"
    return f"{seconds:g} s"


def plan_of(data: ReportData, entry: DeviceEntry) -> SitePlan | None:
    """The site plan the entry's site has (None: no plan, e.g. no rover there analysed)."""
    for plan in data.plans:
        if plan.site_uuid == entry.device.site_uuid:
            return plan
    return None


# ----------------------------------------------------------------------------- change

def change_columns(directions=UNSET_DIRECTIONS) -> tuple[Column, ...]:
    """Where a point is going: 2D and vertical change over ``CHANGE_DAYS`` and since the
    reference, and its light per direction (``tables.light_columns``)."""
    cols = [Column("point", "Point", 0.22, "left"),
            Column("end", "Last epoch\n(UTC)", 0.09, "center")]
    for days in CHANGE_DAYS:
        cols += [Column(f"h{days}", f"Last {days} days\n2D mm", 0.09),
                 Column(f"v{days}", f"Last {days} days\nvertical mm", 0.10)]
    cols += [Column("h_total", "Since reference\n2D mm", 0.09),
             Column("v_total", "Since reference\nvertical mm", 0.10)]
    return tuple(cols + light_columns(directions))


def changes(entry: DeviceEntry) -> dict[int, RecentChange | None]:
    """The entry's change over each of ``CHANGE_DAYS`` (None: its data do not reach back
    that far, or have a gap there)."""
    est = entry.analysis.estimates if entry.analysis is not None else None
    return {days: recent_change(est, days) for days in CHANGE_DAYS}


def register_rows(data: ReportData, plan: SitePlan | None) -> list[Row]:
    """The register of the points of one site (``plan``'s), or of every point without a
    plan when ``plan`` is None."""
    return [register_row(e, plan) for e in register_rovers(data)
            if plan_of(data, e) is plan]


def change_rows(data: ReportData) -> list[Row]:
    directions = light_directions(data.analysed)
    return [change_row(e, directions) for e in register_rovers(data)]


def change_row(entry: DeviceEntry, directions=UNSET_DIRECTIONS) -> Row:
    """How far a point moved: 2D (noise-corrected length) and vertical (up positive), over
    the last 7 and 30 days and since the reference, ± 1σ; a cell marked † spans more or
    fewer days than its column says (``change_notes``)."""
    a = entry.analysis
    if a is None:
        return Row(entry.serial_number, {"point": device_cell(entry)}, merged=entry.problem)
    cells = {"point": device_cell(entry)}
    for days, change in changes(entry).items():
        cells[f"h{days}"], cells[f"v{days}"] = _change_cells(change)
    s = a.summary()
    d, sd = s["displacement_mm"], a.frame_summary()["displacement_sigma_mm"]
    cells["h_total"] = _pm(d["horizontal"], sd.get("horizontal"), signed=False)
    cells["v_total"] = _pm(d["up"], sd.get("up"))
    cells["end"] = (s["last_epoch"] or MISSING)[:16].replace("T", "\n")
    lit_cells, lit = light_cells(a, directions)
    return Row(entry.serial_number, cells | lit_cells,
               a.alarm.overall if a.alarm is not None else None, alarm_rank(a), lights=lit)


def _change_cells(change: RecentChange | None) -> tuple[str, str]:
    if change is None:
        return MISSING, MISSING
    mark = " †" if abs(change.span_days - change.days) * 24 > SPAN_MARK_HOURS else ""
    h, sh = change.horizontal_mm()
    return (_pm(h, sh, signed=False) + mark,
            _pm(change.change_mm["up"], change.sigma_mm["up"]) + mark)


def _pm(value: float | None, sigma: float | None, signed: bool = True) -> str:
    if value is None or not np.isfinite(value):
        return MISSING
    text = f"{value:+.1f}" if signed else f"{value:.1f}"
    return text if sigma is None or not np.isfinite(sigma) else f"{text}\n± {sigma:.1f}"


def change_notes(data: ReportData) -> list[str]:
    """What the change table's marks and dashes mean, for the rovers they apply to."""
    notes = []
    shifted, short = [], []
    for e in data.analysed:
        for days, change in changes(e).items():
            if change is None:
                short.append(f"{device_cell(e).splitlines()[0]} ({days} days)")
            elif abs(change.span_days - change.days) * 24 > SPAN_MARK_HOURS:
                shifted.append(f"{device_cell(e).splitlines()[0]}: {change.span_days:.1f} "
                               f"days for {days}")
    if shifted:
        notes.append("† A gap in the data moves the start of the change: " +
                     "; ".join(shifted) + ".")
    if short:
        notes.append("- The data do not reach back that far, or have a gap then: " +
                     ", ".join(short) + ".")
    return notes

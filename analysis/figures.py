"""Figures of an analysis: plain matplotlib ``Figure`` objects shared by the GUI and the reports.

Every builder is a pure function of its inputs (a ``RoverAnalysis`` from
``analysis.pipeline``, or arrays) and returns a new ``matplotlib.figure.Figure``: no pyplot,
no backend, no I/O, no change to matplotlib's global settings (every size, colour and font
size is set on the artist itself, so the figures look the same whatever the user's rcParams
and are safe to build off the GUI thread).  The GUI puts the Figure in a FigureCanvasQTAgg;
a report calls ``fig.savefig(file, format="pdf")``.  The same input gives the same figure.

Conventions: displacements in mm, velocities in mm/day (mm/yr also stated), inverse velocity
in day/mm, plan positions in metres; every time axis is shown in the time zone ``tz`` (an
IANA name such as ``"Europe/Zurich"``, or None for UTC) and labelled ``time (<zone>)``; one
colour per component (``COLOURS``) in every figure; one legend per figure, outside the axes.

Builders: ``displacement_figure``, ``trajectory_figure``, ``velocity_figure``,
``inverse_velocity_figure`` and ``timeseries_figure`` (with ``Series``); the site plan,
which builds on this module's conventions, is ``analysis.plan_figure.plan_view_figure``
(with ``PlanPoint`` and ``plan_points``).

Artist ids (``artist.get_gid()``), so the GUI and the tests can find and update what carries
data.  ``<c>`` is a component (``east``, ``north``, ``up``, ``horizontal``, ``3d``,
``along``, ``across``), ``<iso>`` a UTC time ``2025-12-05T00:00:00Z``; artists marked (*) are
present only when there is something to draw.

* displacement: ``data:<c>`` (Line2D of the kept epochs: x the epoch times, y mm),
  ``fit:<c>`` (Line2D: the trend model at the kept epochs, mm; none for horizontal/3d,
  whose velocity is a length), ``outliers:<c>`` (*) and ``rejected:<c>`` (*) (Line2D of
  markers at the bottom of the axes at the times of the robust outliers and of the epochs
  the quality filter rejected: their displacement is not in the analysis), ``gap:<iso>`` (*)
  (span of an outage starting at <iso>), ``known_step:<iso>`` (*) and
  ``detected_step:<iso>`` (*) (vertical lines, on every axes), ``threshold:<level>`` (*)
  (horizontal line, on the horizontal and 3d axes) and ``threshold_band:<level>`` (*)
  (the span from that level to the next one, or to the top of the view).
* trajectory: ``data:trajectory`` (PathCollection: east, north in mm, coloured by time),
  ``path:trajectory`` (the median of each UTC day, joined), ``start`` (the reference,
  0/0), ``end`` (the end displacement of the analysis), ``azimuth`` (*) (the arrow of the
  device's azimuth).
* velocity: ``data:velocity`` (Line2D: sliding-window velocity, mm/day, at window centres),
  ``band:velocity`` (its 1-sigma band), ``reference:velocity`` (the whole-period 3D velocity),
  ``recent:velocity`` (*) (the last-7-days velocity along the same direction, over its
  window: on the last window when the windows are 7 days),
  ``threshold:<level>`` (*) and ``threshold_band:<level>`` (*) (velocity alarm levels).
* inverse velocity: ``data:inverse_velocity`` (Line2D, all finite values, day/mm),
  ``unresolved:inverse_velocity`` (*) (values whose velocity is under the forecast's noise
  limit), ``fit_points:inverse_velocity`` (*) (the values the forecast fitted),
  ``fit:inverse_velocity`` (*) (the fitted line from the onset to its zero crossing),
  ``forecast:failure_time`` (*), ``forecast:interval`` (*), ``forecast:last_data`` (*),
  ``forecast:none`` (*) (the text ``Voight fit, no forecast: <reason>``: named, since the
  linear forecast beside it may still warn); the classic linear forecast
  (``analysis.forecast_linear``, drawn in ``LINEAR_COLOUR``): ``linear:points`` (*) (rings on
  the values on its line), ``linear:fit`` (*) (its line, from the onset to the zero or half
  the record's span past the last data), ``linear:failure_time`` (*) and
  ``linear:interval`` (*) (dated), ``linear:imminent`` (*) (where the line reached zero,
  before the last data), ``linear:within`` (*) (the N days of "failure possible within N
  days").
* plan view, per point label ``<p>``: ``point:<p>``, ``arrow:<p>`` (a Quiver of the true
  displacement; all share one scale but a shortened arrow's), ``ellipse:<p>`` (*) (Ellipse
  at the drawn head), ``label:<p>``, ``leader:<p>`` (Line2D, visible when the label had to
  move away), ``break:<p>`` (*) and ``shortened:<p>`` (*) (a shortened arrow's mark and
  its true value); and ``scale``
  (the QuiverKey: the scale arrow and its mm value), ``scale_note`` (the scale in words),
  ``north_arrow``.
* time series: ``series:<gid>`` (Line2D of each ``Series``, which the GUI updates with
  ``set_data``), ``threshold:<unit>:<level>`` (*).

Size: about 700 lines of builders that share the artist-id scheme above and the helpers of
a rover's components; their look (colours, fonts, the time axis, legends) is
``analysis.figure_style``, and the site plan, the largest figure, ``analysis.plan_figure``.
"""

from __future__ import annotations

import math
import textwrap
from dataclasses import dataclass
from typing import Mapping, Sequence

import matplotlib.dates as mdates
import numpy as np
from matplotlib.colors import Normalize
from matplotlib.figure import Figure
from matplotlib.lines import Line2D

from analysis.figure_style import (  # noqa: F401 (the style names are offered here too)
    DEFAULT_FIGSIZE, PLAN_FIGSIZE, COMPONENTS, COLOURS, LEVEL_COLOURS, LEVEL_RAMP,
    SERIES_COLOURS, FONT, STYLE, NEXT_LEVEL_REACH, OUTLIER_Y, REJECTED_Y, time_zone,
    format_time_axis, format_time, to_datetime, iso_utc, new_figure, style_axes,
    figure_legend, legend_columns, no_data, level_colour
)
from analysis import alarms
from analysis.forecast import MIN_VELOCITY_SNR
from analysis.pipeline import RECENT_WINDOW_DAYS, RoverAnalysis, _components, motion_direction
from analysis.timebase import as_datetime64, days_since

def _suptitle(fig: Figure, analysis: RoverAnalysis, what: str) -> None:
    name = analysis.display_name
    who = name if name == analysis.serial_number else f"{name} ({analysis.serial_number})"
    fig.suptitle(f"{who}: {what}", fontsize=FONT["suptitle"], fontweight="bold",
                 wrap=True)  # a long name in a narrow pane wraps instead of being cut


#: The alarm keys' components each displacement panel carries, with the signs their lines
#: are drawn at: a size (vertical, along, across) both ways, upward heave above zero and
#: settlement below it; east and north carry none (no level is set on them).
PANEL_LADDERS = {
    "3d": (("3d", (1.0,)),),
    "horizontal": (("horizontal", (1.0,)),),
    "up": (("vertical", (1.0, -1.0)), ("up", (1.0,)), ("down", (-1.0,))),
    "along": (("along", (1.0, -1.0)),),
    "across": (("across", (1.0, -1.0)),),
}
_LADDER_WORDS = {"3d": "", "horizontal": "horizontal", "vertical": "vertical",
                 "up": "upward", "down": "downward", "along": "along-slope",
                 "across": "cross-slope"}


@dataclass(frozen=True)
class Ladder:
    """One alarm key's levels as a panel draws them: ascending (name, threshold) pairs,
    the signs of its lines (+1 above zero, -1 below) and the words naming its component."""

    component: str
    levels: tuple[tuple[str, float], ...]
    signs: tuple[float, ...]

    def label(self, name: str, value: float, unit: str) -> str:
        words = _LADDER_WORDS[self.component]
        head = f"{words} {name}" if words else name
        either = " either way" if len(self.signs) == 2 else ""
        return f"{head} ≥ {value:g} {unit}{either}"


def _own_levels(analysis: RoverAnalysis, key: str) -> list[tuple[str, float]]:
    """The ladder of one alarm key (``displacement:horizontal``) as the analysis judged it,
    ascending; empty when that key has no levels."""
    qa = analysis.alarm.keys.get(key) if analysis.alarm is not None else None
    return [] if qa is None else list(zip(qa.levels.names, qa.levels.thresholds))


def _levels(given: Mapping[str, float] | None, analysis: RoverAnalysis | None,
            quantity: str) -> list[tuple[str, float]]:
    """Alarm levels in ascending order: those given, or the analysis's own."""
    if given is None and analysis is not None and analysis.alarm is not None:
        qa = getattr(analysis.alarm, quantity, None)
        if qa is not None:
            given = dict(zip(qa.levels.names, qa.levels.thresholds))
    return sorted(((str(k), float(v)) for k, v in (given or {}).items()), key=lambda p: p[1])


def panel_ladders(analysis: RoverAnalysis, quantity: str, panel: str,
                  given_3d: Mapping[str, float] | None = None) -> list[Ladder]:
    """The ladders a ``quantity`` panel of component ``panel`` draws: the analysis's own
    levels of each key that applies to it (``PANEL_LADDERS``); the 3D panel takes
    ``given_3d`` instead when given.  A 3D ladder is never drawn on another panel: it judges
    the 3D length, not the component shown."""
    out = []
    for component, signs in PANEL_LADDERS.get(panel, ()):
        levels = (_levels(given_3d, analysis, quantity) if component == "3d"
                  else _own_levels(analysis, alarms.level_key(quantity, component)))
        if levels:
            out.append(Ladder(component, tuple(levels), signs))
    return out


def panels_with_levels(analysis: RoverAnalysis, components: Sequence[str]) -> tuple[str, ...]:
    """``components`` plus each displacement panel that carries a ladder of the analysis
    and is missing (a horizontal ladder adds the horizontal panel), in ``COMPONENTS``
    order: an alarm judged on a component is always shown on it."""
    wanted = set(components)
    for panel in PANEL_LADDERS:
        if panel not in wanted and panel_ladders(analysis, "displacement", panel):
            if panel not in ("along", "across") or analysis.azimuth_deg is not None:
                wanted.add(panel)
    return tuple(c for c in COMPONENTS if c in wanted)


def _y_view(lo: float, hi: float, levels: Sequence[Ladder] = (), *,
            strip: float = 0.0) -> tuple[float, float]:
    """View limits holding the values [lo, hi] and, with alarm levels, zero, the levels
    reached and the next level beyond the values when it is within ``NEXT_LEVEL_REACH``
    times the largest value (a level far beyond would squash the data; it is left off
    scale, and its legend entry says so), on each side a ladder is drawn, padded by 6 %,
    plus ``strip`` (a fraction of the range) free at the bottom for the epoch markers."""
    if levels:
        lo, hi = min(lo, 0.0), max(hi, 0.0)
        above = sorted(v for ld in levels if 1.0 in ld.signs for _, v in ld.levels)
        below = sorted(v for ld in levels if -1.0 in ld.signs for _, v in ld.levels)
        hi = _reach(hi, above)
        lo = -_reach(-lo, below)
    span = (hi - lo) or 1.0
    return lo - (0.06 + strip) * span, hi + 0.06 * span


def _reach(extent: float, values: list[float]) -> float:
    """How far one side of a view goes for the data's ``extent`` (>= 0) and the ascending
    level ``values`` on that side."""
    reached = [v for v in values if v < extent]
    beyond = [v for v in values if v >= extent]
    if beyond and beyond[0] <= NEXT_LEVEL_REACH * extent:
        return beyond[0]
    return max(extent, reached[-1]) if reached else extent


def _draw_thresholds(ax, ladders: Sequence[Ladder], unit: str, view: tuple[float, float],
                     gid_prefix: str = "threshold") -> None:
    """Alarm levels as dashed horizontal lines (on each side a ladder's signs say), each
    with a light band out to the next level (the last one to the edge of the ``view``);
    levels beyond the view say so in the legend."""
    for ladder in ladders:
        values = [v for _, v in ladder.levels]
        edges = {sign: view[1] if sign > 0 else -view[0] for sign in ladder.signs}
        for rank, (name, value) in enumerate(ladder.levels):
            colour = level_colour(name, rank)
            off = all(value > edge for edge in edges.values())
            label = ladder.label(name, value, unit) + (" (off scale)" if off else "")
            for sign, edge in edges.items():  # one legend entry for both sides
                ax.axhline(sign * value, color=colour, gid=f"{gid_prefix}:{name}",
                           label=label if sign == ladder.signs[0] else "_" + label,
                           **STYLE["threshold"])
                outer = values[rank + 1] if rank + 1 < len(values) else edge
                if value <= edge and outer > value:
                    ax.axhspan(sign * value, sign * outer, color=colour, alpha=0.07,
                               linewidth=0, zorder=0, gid=f"{gid_prefix}_band:{name}")


def _finite_range(*arrays) -> tuple[float, float]:
    values = np.concatenate([np.asarray(a, np.float64).ravel() for a in arrays])
    values = values[np.isfinite(values)]
    return (float(values.min()), float(values.max())) if values.size else (0.0, 1.0)


def _velocity_text(v, method: str | None = None) -> str:
    """``+25.1 ± 0.8 mm/yr (+0.069 ± 0.002 mm/day, 1σ)`` from a pipeline Velocity: mm/day
    at the digits of the tables and ``devmon analyze`` (``alarms.UNIT_DIGITS``)."""
    mm_yr, s_yr = v.m_per_yr * 1e3, v.sigma_m_per_yr * 1e3
    digits = alarms.UNIT_DIGITS["mm/day"]
    text = (f"{mm_yr:+.1f} ± {s_yr:.1f} mm/yr ({v.mm_per_day:+.{digits}f} ± "
            f"{v.sigma_mm_per_day:.{digits}f} mm/day, 1σ")
    return text + (f", {method.upper()})" if method else ")")


# ----------------------------------------------------------------------------- components

def component_series_m(analysis: RoverAnalysis) -> dict[str, np.ndarray]:
    """Displacement series (metres, at ``analysis.displacement.t``) of every component the
    analysis has: east, north, up, along/across (when the azimuth is known, as the pipeline
    computes them: in a grid, along the grid bearing), horizontal and 3d."""
    d = analysis.displacement
    out = dict(_components(d, analysis.azimuth_deg, analysis.grid))
    out["horizontal"] = d.horizontal_m
    out["3d"] = d.length_3d_m
    return out


def grid_bearing_deg(analysis: RoverAnalysis) -> float | None:
    """The device azimuth (a true azimuth) as a bearing in the analysis frame: in a grid it
    is the azimuth minus the meridian convergence, as ``pipeline._components`` uses it."""
    if analysis.azimuth_deg is None:
        return None
    gamma = float(analysis.grid.convergence_deg) if analysis.grid is not None else 0.0
    return float(analysis.azimuth_deg) - gamma


def component_label(analysis: RoverAnalysis, component: str, *, long: bool = False) -> str:
    """The name of a component in the analysis frame (without unit): short for an axis
    label, ``long`` for a title."""
    grid = analysis.frame.crs is not None
    if component in ("east", "north"):
        return f"grid {component}" if grid else component
    if component == "up":
        return (f"{analysis.frame.height_type} height" if grid else "up")
    if component == "along":
        return f"along azimuth {analysis.azimuth_deg:g}°" if long else "along"
    if component == "across":
        return "across azimuth" if long else "across"
    if long:
        return {"horizontal": "horizontal length", "3d": "3D length"}[component]
    return {"horizontal": "horizontal", "3d": "3D"}[component]


def _frame_text(analysis: RoverAnalysis) -> str:
    return (f"{analysis.frame.label}, reference {analysis.options.reference.describe()}")


# ----------------------------------------------------------------------------- displacement

def displacement_figure(analysis: RoverAnalysis,
                        components: Sequence[str] = ("east", "north", "up"), *,
                        tz: str | None = None,
                        alarm_levels_mm: Mapping[str, float] | None = None,
                        show_rejected: bool = True, show_gaps: bool = True,
                        figsize=DEFAULT_FIGSIZE) -> Figure:
    """Displacement (mm) against time, one axes per component, sharing the time axis: the
    kept epochs as dots, the velocity trend over them (with its velocity in the axes title),
    outliers and quality-rejected epochs marked at their times along the bottom, outages
    shaded, known steps (events) and detected steps as vertical lines, and on the horizontal
    and 3d axes the displacement alarm levels (``alarm_levels_mm`` {name: mm}, default the
    analysis's own).  ``components`` from ``COMPONENTS``; along/across need the azimuth."""
    components = tuple(components)
    if not components:
        raise ValueError("give at least one component")
    series = component_series_m(analysis)
    for c in components:
        if c not in COMPONENTS:
            raise ValueError(f"unknown component {c!r}: use {', '.join(COMPONENTS)}")
        if c not in series:
            raise ValueError(f"no {c} component: the device has no azimuth to measure "
                             f"along/across")
    fig = new_figure(figsize)
    axes = fig.subplots(len(components), 1, sharex=True, squeeze=False)[:, 0]
    t = analysis.displacement.t
    for ax, c in zip(axes, components):
        style_axes(ax)
        y = series[c] * 1e3
        ax.plot(t, y, color=COLOURS[c], gid=f"data:{c}", label="_epochs", **STYLE["data"])
        fit = analysis.trends.get(c)
        model = fit.model(t) * 1e3 if fit is not None else np.empty(0)
        if fit is not None:
            ax.plot(t, model, gid=f"fit:{c}", label="velocity trend", **STYLE["fit"])
        marked = _mark_epochs(ax, analysis, c, show_rejected)
        mine = panel_ladders(analysis, "displacement", c, alarm_levels_mm)
        view = _y_view(*_finite_range(y, model), mine, strip=0.08 if marked else 0.0)
        ax.set_ylim(*view)
        _draw_thresholds(ax, mine, "mm", view)
        if show_gaps:
            for gap in analysis.gaps:
                ax.axvspan(gap.start, gap.end, gid=f"gap:{iso_utc(gap.start)}",
                           label="data gap", **STYLE["gap"])
        for step in analysis.known_steps:
            ax.axvline(step, gid=f"known_step:{iso_utc(step)}",
                       label="known step (event), offset removed", **STYLE["known_step"])
        for step in analysis.detected_steps:
            ax.axvline(step.time, gid=f"detected_step:{iso_utc(step.time)}",
                       label="detected step", **STYLE["detected_step"])
        ax.set_ylabel(f"{component_label(analysis, c)} (mm)")
        v = analysis.velocity.get(c)
        method = fit.method if fit is not None else None
        head = component_label(analysis, c, long=True)
        ax.set_title(f"{head}: velocity {_velocity_text(v, method)}" if v is not None
                     else f"{head}: no velocity", loc="left", fontsize=FONT["title"])
    format_time_axis(axes[-1], tz)
    _suptitle(fig, analysis, f"displacement, {_frame_text(analysis)}")
    epochs = Line2D([], [], color=COLOURS["muted"], label=f"epochs used ({t.size})",
                    **STYLE["data"])
    figure_legend(fig, axes, first=[epochs])
    return fig


def _mark_epochs(ax, analysis: RoverAnalysis, component: str, show_rejected: bool) -> bool:
    """Outliers (and quality-rejected epochs) at their times along the bottom of the axes
    (the analysis keeps the displacement of the used epochs only); whether any were."""
    where = ax.get_xaxis_transform()  # x in data (time), y in axes fraction
    t_out = analysis.t_all[analysis.outliers]
    if t_out.size:
        ax.plot(t_out, np.full(t_out.size, OUTLIER_Y), transform=where,
                gid=f"outliers:{component}",
                label=f"outlier, not used ({t_out.size}; time only)", **STYLE["outliers"])
    if show_rejected:
        t_rej = analysis.t_all[~analysis.quality.keep]
        if t_rej.size:
            ax.plot(t_rej, np.full(t_rej.size, REJECTED_Y), transform=where,
                    gid=f"rejected:{component}",
                    label=f"rejected by quality filter ({t_rej.size}; time only)",
                    **STYLE["rejected"])
            return True
    return bool(t_out.size)


# ----------------------------------------------------------------------------- trajectory

def _time_colour_ticks(cbar, span_days: float, zone) -> None:
    """Date ticks on a colour bar of time, each label telling its tick apart: whole days
    (at least 3 ticks, so 4 days or more always tick daily or coarser) labelled by date;
    shorter spans by date and time.  (With 4 ticks at least and 8 at most, 95 hours found
    no hourly step: matplotlib warned and ticked every 12 h under date-only labels.)"""
    cbar.locator = mdates.AutoDateLocator(tz=zone, minticks=3, maxticks=9)
    cbar.formatter = mdates.DateFormatter("%Y-%m-%d" if span_days >= 4 else "%m-%d %H:%M",
                                          tz=zone)


def trajectory_figure(analysis: RoverAnalysis, *, tz: str | None = None,
                      figsize=PLAN_FIGSIZE) -> Figure:
    """Plan view of one rover's motion: north against east (mm, equal scale) of every kept
    epoch coloured by time, the daily medians joined as the path, the reference (0, 0) and
    the end displacement of the analysis marked, and the device's azimuth as an arrow when
    known."""
    d = analysis.displacement
    e, n = d.east_m * 1e3, d.north_m * 1e3
    fig = new_figure(figsize)
    ax = fig.subplots()
    style_axes(ax)
    zone, name = time_zone(tz)
    tnum = mdates.date2num(d.t)
    points = ax.scatter(e, n, c=tnum, cmap="viridis", s=7, linewidths=0, zorder=2,
                        norm=Normalize(float(tnum.min()), float(tnum.max())),
                        gid="data:trajectory", label="epoch (colour: time)")
    day_e, day_n = daily_medians(d.t, e, n)
    ax.plot(day_e, day_n, color="black", linewidth=1.0, marker="o", markersize=2.5,
            alpha=0.8, zorder=3, gid="path:trajectory", label="daily median, joined")
    end_e = analysis.end_displacement_m["east"] * 1e3
    end_n = analysis.end_displacement_m["north"] * 1e3
    ax.plot([0.0], [0.0], linestyle="none", marker="o", markersize=9, markerfacecolor="white",
            markeredgecolor="black", markeredgewidth=1.6, zorder=5, gid="start",
            label="reference (0, 0)")
    ax.plot([end_e], [end_n], linestyle="none", marker="s", markersize=8,
            markerfacecolor=COLOURS["forecast"], markeredgecolor="black", zorder=5, gid="end",
            label=f"end: E {end_e:+.1f} mm, N {end_n:+.1f} mm (last-day fit)")
    ax.set_aspect("equal", adjustable="datalim")
    bearing = grid_bearing_deg(analysis)
    if bearing is not None:
        finite = np.isfinite(e) & np.isfinite(n)
        reach = float(np.max(np.hypot(e[finite], n[finite]))) if finite.any() else 1.0
        length = 0.6 * max(reach, 1.0)
        b = math.radians(bearing)
        tip = (length * math.sin(b), length * math.cos(b))
        ax.annotate("", xy=tip, xytext=(0.0, 0.0), gid="azimuth", zorder=4,
                    arrowprops=dict(arrowstyle="-|>", color=COLOURS["along"], linewidth=2.0,
                                    mutation_scale=16, shrinkA=0, shrinkB=0))
        ax.plot([], [], color=COLOURS["along"], linewidth=2.0,
                label=f"device azimuth {analysis.azimuth_deg:g}°")
    cbar = fig.colorbar(points, ax=ax, shrink=0.85, pad=0.02)
    _time_colour_ticks(cbar, float(tnum.max() - tnum.min()), zone)
    cbar.set_label(f"time ({name})", fontsize=FONT["label"])
    cbar.ax.tick_params(labelsize=FONT["tick"])
    east, north = component_label(analysis, "east"), component_label(analysis, "north")
    ax.set_xlabel(f"{east} (mm)")
    ax.set_ylabel(f"{north} (mm)")
    ax.set_title(f"{analysis.frame.label}; reference {analysis.options.reference.describe()}",
                 loc="left", fontsize=FONT["title"])
    _suptitle(fig, analysis, "horizontal trajectory")
    figure_legend(fig, [ax])
    return fig


def daily_medians(t, *values) -> list[np.ndarray]:
    """The median of each of ``values`` over each UTC day that has finite data, in time
    order: a readable path through hourly noise."""
    day = as_datetime64(t).astype("datetime64[D]")
    ok = np.all([np.isfinite(v) for v in values], axis=0)
    days, index = np.unique(day[ok], return_inverse=True)
    out = []
    for v in values:
        v = np.asarray(v, np.float64)[ok]
        out.append(np.array([np.median(v[index == i]) for i in range(days.size)]))
    return out


# ----------------------------------------------------------------------------- velocity

def recent_along_motion(analysis: RoverAnalysis) -> tuple[float, float] | None:
    """The current velocity along the velocity chart's direction (mm/day, 1-sigma): the
    recent east, north and up velocities (the last ``RECENT_WINDOW_DAYS``, those the alarms
    judge) projected on ``pipeline.motion_direction``, the sigma propagated from theirs.
    A least-squares slope is linear in the data, so this is the slope of the chart's own
    series over the same window ending at the same epoch: it sits on the last window when
    the windows are ``RECENT_WINDOW_DAYS`` long (a record of 70 days or more) and the
    alarms' window is the plain last week (not cut at a step nor widened for sparse
    readings).  Not the 3D length: a length corrected for
    noise reads below a projection when a component is within its noise (0.000 against
    windows at 0.1 mm/day on a creeping rover), so the chart would contradict itself.
    None without a direction or a recent velocity of every component."""
    unit = motion_direction(analysis.displacement)
    parts = [analysis.recent_velocity.get(c) for c in ("east", "north", "up")]
    if unit is None or any(p is None for p in parts):
        return None
    value = sum(u * p.mm_per_day for u, p in zip(unit, parts))
    sigma = math.sqrt(sum((u * p.sigma_mm_per_day) ** 2 for u, p in zip(unit, parts)))
    return float(value), sigma


def velocity_figure(analysis: RoverAnalysis, *, tz: str | None = None,
                    alarm_levels_mm_per_day: Mapping[str, float] | None = None,
                    figsize=DEFAULT_FIGSIZE) -> Figure:
    """Sliding-window velocity (mm/day) along the direction of motion (the pipeline's: the
    direction from the reference to the last day), with its 1-sigma band, the whole-period
    3D velocity and the recent (``RECENT_WINDOW_DAYS``) velocity along the same direction
    (``recent_along_motion``) as reference lines, the 3D velocity alarm levels (default the
    analysis's own), and the acceleration in the title.  Each other velocity key the alarm
    judged (horizontal, vertical, ...) gets a panel below: its value as the alarm compared
    it, with its sigma and its ladder, so every level set is drawn where it applies."""
    judged = [k for k in (analysis.alarm.keys.values() if analysis.alarm else ())
              if k.quantity == "velocity" and k.component != "3d"]
    fig = new_figure(figsize)
    axes = fig.subplots(1 + len(judged), 1, sharex=True, squeeze=False,
                        height_ratios=[2] + [1] * len(judged))[:, 0]
    ax = axes[0]
    style_axes(ax)
    s = analysis.sliding
    if s is None:
        note = next((x for x in analysis.notes if x.startswith("sliding")),
                    "not enough data")
        no_data(ax, f"no sliding velocity: {note}", "velocity:none")
    else:
        _draw_sliding_velocity(ax, analysis, alarm_levels_mm_per_day)
    ax.set_ylabel("velocity (mm/day)")
    title = "velocity along the direction of motion"
    a = analysis.acceleration
    if a is not None:
        title += (f"; acceleration {a.acceleration_mm_per_day2:+.4f} ± "
                  f"{a.sigma_mm_per_day2:.4f} mm/day² (1σ)")
    ax.set_title(title, loc="left", fontsize=FONT["title"])
    for panel, key in zip(axes[1:], judged):
        _draw_judged_velocity(panel, key, analysis)
    format_time_axis(axes[-1], tz)
    _suptitle(fig, analysis, f"velocity, {analysis.frame.label}")
    figure_legend(fig, axes)
    return fig


def _draw_sliding_velocity(ax, analysis: RoverAnalysis,
                           given_3d: Mapping[str, float] | None) -> None:
    """The main velocity panel: sliding windows, the whole period, the recent week, the 3D
    ladder."""
    s = analysis.sliding
    v, sig = s.velocity_mm_per_day, s.sigma_mm_per_day
    colour = COLOURS["3d"]
    ax.fill_between(s.t, v - sig, v + sig, color=colour, alpha=0.18, linewidth=0,
                    gid="band:velocity", label="±1σ (white noise: a lower bound)")
    ax.plot(s.t, v, color=colour, linewidth=1.3, marker="o", markersize=3.5,
            gid="data:velocity",
            label=f"{s.window_days:.3g}-day windows every {s.step_days:.3g} days "
                  f"({s.method.upper()})")
    ax.axhline(0.0, color="#777777", linewidth=0.7, zorder=1)
    whole = analysis.velocity.get("3d")
    if whole is not None:
        ax.axhline(whole.mm_per_day, gid="reference:velocity",
                   label=f"whole period, 3D: {whole.mm_per_day:.3f} ± "
                         f"{whole.sigma_mm_per_day:.3f} mm/day", **STYLE["reference"])
    recent = recent_along_motion(analysis)
    if recent is not None:
        t1 = analysis.displacement.t[-1]
        t0 = t1 - np.timedelta64(int(RECENT_WINDOW_DAYS * 86400), "s")
        ax.plot([t0, t1], [recent[0]] * 2, color=COLOURS["recent"],
                linewidth=2.2, gid="recent:velocity", zorder=5,
                label=f"last {RECENT_WINDOW_DAYS:g} days along the motion: "
                      f"{recent[0]:.3f} ± {recent[1]:.3f} mm/day")
    ladders = panel_ladders(analysis, "velocity", "3d", given_3d)
    if ladders:
        view = _y_view(*_finite_range(v + sig, v - sig), ladders)
        ax.set_ylim(*view)
        _draw_thresholds(ax, ladders, "mm/day", view)


def _draw_judged_velocity(ax, key: "alarms.KeyAlarm", analysis: RoverAnalysis) -> None:
    """One velocity key as the alarm judged it (``data:<key>``: the value compared with the
    levels, a size or, for up/down, the motion that way; ``band:<key>``: ±1σ), with its
    ladder."""
    style_axes(ax)
    colour = COLOURS.get({"vertical": "up", "down": "up"}.get(key.component, key.component),
                         COLOURS["3d"])
    ax.fill_between(key.t, key.value - key.sigma, key.value + key.sigma, color=colour,
                    alpha=0.18, linewidth=0, gid=f"band:{key.key}", label="_band")
    ax.plot(key.t, key.value, color=colour, linewidth=1.1, gid=f"data:{key.key}",
            label="_judged")
    ladder = Ladder(key.component, tuple(zip(key.levels.names, key.levels.thresholds)),
                    (1.0,))
    view = _y_view(*_finite_range(key.value - key.sigma, key.value + key.sigma), [ladder])
    ax.set_ylim(*view)
    _draw_thresholds(ax, [ladder], "mm/day", view)
    est = analysis.estimates
    window = (est.windows_days[1] if est is not None
              else analysis.alarm.rule.velocity_window_days)
    ax.set_ylabel("mm/day")
    ax.set_title(f"{key.words()} (trailing {window:g}-day lines, as the alarm judges it)",
                 loc="left", fontsize=FONT["title"])


# ----------------------------------------------------------------------------- inverse velocity

def forecast_points(analysis: RoverAnalysis) -> tuple[np.ndarray, np.ndarray]:
    """Masks over ``analysis.inverse_velocity.t``: the values resolved above the forecast's
    noise limit (velocity at least ``forecast.MIN_VELOCITY_SNR`` sigmas), and those the
    forecast fitted (resolved, from its onset to its last value).  Empty masks without a
    forecast."""
    iv = analysis.inverse_velocity
    if iv is None:
        return np.zeros(0, bool), np.zeros(0, bool)
    y = iv.inverse_velocity_day_per_mm
    v, sig = iv.velocity_mm_per_day, iv.velocity_sigma_mm_per_day
    with np.errstate(invalid="ignore"):
        resolved = (np.isfinite(y) & (y > 0) & (v >= MIN_VELOCITY_SNR * sig) & (sig > 0))
    f = analysis.forecast
    if f is None or f.onset is None or f.last_time is None:
        return resolved, np.zeros(y.shape, bool)
    return resolved, resolved & (iv.t >= f.onset) & (iv.t <= f.last_time)


def inverse_velocity_figure(analysis: RoverAnalysis, *, tz: str | None = None,
                            figsize=DEFAULT_FIGSIZE) -> Figure:
    """Inverse velocity (day/mm) against time (Fukuzono 1985): every window's value, the
    values the forecast fitted highlighted, the fitted line to its zero crossing, the
    forecast failure time and its interval; or the text ``Voight fit, no forecast: <reason>``."""
    fig = new_figure(figsize)
    ax = fig.subplots()
    style_axes(ax)
    iv, f = analysis.inverse_velocity, analysis.forecast
    if iv is None:
        note = next((x for x in analysis.notes if x.startswith("inverse")), "not enough data")
        no_data(ax, f"no inverse velocity: {note}", "forecast:none")
    else:
        y = iv.inverse_velocity_day_per_mm
        resolved, used = forecast_points(analysis)
        finite = np.isfinite(y)
        ax.plot(iv.t[finite], y[finite], color=COLOURS["3d"], linewidth=0.9, marker="o",
                markersize=4, markerfacecolor=COLOURS["3d"], gid="data:inverse_velocity",
                label=f"1/velocity, {iv.smoothing_days:.2g}-day windows")
        noisy = finite & ~resolved
        if noisy.any():
            ax.plot(iv.t[noisy], y[noisy], linestyle="none", marker="o", markersize=7,
                    markerfacecolor="white", markeredgecolor=COLOURS["muted"], zorder=4,
                    gid="unresolved:inverse_velocity",
                    label=f"velocity under {MIN_VELOCITY_SNR:g}σ of its noise (not used)")
        if used.any():
            ax.plot(iv.t[used], y[used], linestyle="none", marker="o", markersize=7,
                    markerfacecolor=COLOURS["forecast"], markeredgecolor="black", zorder=5,
                    gid="fit_points:inverse_velocity",
                    label=f"fitted ({int(used.sum())} values since the onset)")
        ax.axhline(0.0, color="#777777", linewidth=0.8, zorder=1)
        supported = f is not None and f.supported
        if supported:
            _draw_forecast(ax, f, tz)
        else:
            reason = f.reason if f is not None else next(
                (x for x in analysis.notes if x.startswith("failure")), "no forecast computed")
            ax.text(0.5, 0.97, textwrap.fill(f"Voight fit, no forecast: {reason}", 90),
                    transform=ax.transAxes, ha="center", va="top", fontsize=FONT["label"],
                    gid="forecast:none", zorder=6,
                    bbox=dict(boxstyle="round,pad=0.4", facecolor="white",
                              edgecolor="#BBBBBB"))
        _draw_linear(ax, analysis.linear_forecast, iv, tz)
        top = np.nanmax(y) if finite.any() else 1.0
        # headroom for the no-forecast text, so it covers no value
        ax.set_ylim(0.0, (1.12 if supported else 1.4) * top if top > 0 else 1.0)
    format_time_axis(ax, tz)
    ax.set_ylabel("inverse velocity (day/mm)")
    # short lines: the title is fitted to the pane's width, and every line it wraps into
    # is taken from the plot's height (issue 30: nine lines in the GUI's default window)
    lines = ["inverse velocity along the direction of motion"]
    if f is not None and f.supported:
        lo, hi = f.interval
        lines = [f"Voight forecast {format_time(f.failure_time, tz)} "
                 f"({100 * f.confidence:g} %: {format_time(lo, tz)} to {format_time(hi, tz)}), "
                 f"{f.lead_days:.1f} days after the last data",
                 f"fit: {f.n_points} values over {f.span_days:.1f} days since "
                 f"{format_time(f.onset, tz)}, R² {f.r2:.2f}; assumes the acceleration "
                 f"continues: one input to judgement"]
    title = "\n".join(lines) + _linear_title(analysis.linear_forecast, tz)
    ax.set_title(title, loc="left", fontsize=FONT["title"])
    _suptitle(fig, analysis, "inverse velocity and failure forecast")
    figure_legend(fig, [ax])
    return fig


FIT_CURVE_SAMPLES = 120  # enough for the bend of alpha 1.5-2.5 to read as a curve


def _draw_forecast(ax, f, tz) -> None:
    """The fitted Voight curve (``FailureForecast.inverse_velocity_at``, its own alpha: a
    straight line only at alpha 2) from the onset to its zero at the failure time, the
    failure time and its interval."""
    span_ns = (f.failure_time - f.onset).astype("timedelta64[ns]").astype(np.int64)
    steps = np.linspace(0.0, 1.0, FIT_CURVE_SAMPLES)
    t_curve = f.onset.astype("datetime64[ns]") + (steps * span_ns).astype("timedelta64[ns]")
    t_curve[-1] = f.failure_time
    ax.plot(t_curve, f.inverse_velocity_at(t_curve), color=COLOURS["forecast"],
            linewidth=1.5, linestyle="--", zorder=4, gid="fit:inverse_velocity",
            label=f"Voight fit (alpha {f.alpha:.2f}) to zero")
    lo, hi = f.interval
    ax.axvspan(lo, hi, color=COLOURS["forecast"], alpha=0.12, linewidth=0, zorder=0,
               gid="forecast:interval", label=f"{100 * f.confidence:g} % interval")
    ax.axvline(f.failure_time, color=COLOURS["forecast"], linewidth=1.6, zorder=3,
               gid="forecast:failure_time",
               label=f"forecast failure {format_time(f.failure_time, tz)}")
    ax.axvline(f.last_time, color="#555555", linewidth=1.0, linestyle=":", zorder=3,
               gid="forecast:last_data", label="last value")


# the linear forecast's colour: Okabe-Ito blue, apart from the Voight fit's crimson
LINEAR_COLOUR = "#0072B2"


def _draw_linear(ax, lin, iv, tz) -> None:
    """The classic linear forecast (``analysis.forecast_linear``): the values on its line
    (rings), the line from its onset to its zero (at most half the record's span past the
    last data), and on the time axis its zero and interval (dated), where the line reached
    zero (imminent) or the N days of "failure possible within N days"."""
    if lin is None:
        return
    colour = LINEAR_COLOUR
    end = lin.data_end
    if lin.line is not None:
        used = lin.line.used
        ax.plot(iv.t[used], iv.inverse_velocity_day_per_mm[used], linestyle="none",
                marker="o", markersize=11, markerfacecolor="none", markeredgecolor=colour,
                markeredgewidth=1.2, zorder=5, gid="linear:points",
                label=f"linear: {int(used.sum())} values since the onset")
        reach = 0.5 * float(days_since(end, iv.t[0])) if iv.t.size else 0.0
        stop = min(lin.line.zero_days(), max(reach, 1.0))
        t_line = np.array([lin.onset, end + np.timedelta64(round(stop * 86_400e9), "ns")],
                          dtype="datetime64[ns]")
        ax.plot(t_line, lin.line_at(t_line), color=colour, linewidth=1.5, linestyle="-.",
                zorder=4, gid="linear:fit", label="linear 1/v line (Fukuzono), least squares")
    band = {"linewidth": 7, "alpha": 0.35, "solid_capstyle": "butt", "color": colour,
            "zorder": 3}
    if lin.state == "dated":
        lo, hi = lin.interval
        ax.plot([lo, hi], [0.0, 0.0], gid="linear:interval",
                label=f"linear: {100 * lin.confidence:g} % interval", **band)
    if lin.state in ("dated", "imminent"):
        what = "zero" if lin.state == "dated" else "zero before the last data (imminent)"
        ax.plot([lin.failure_time], [0.0], linestyle="none", marker="v", markersize=10,
                color=colour, markeredgecolor="black", zorder=6, clip_on=False,
                gid=f"linear:{'failure_time' if lin.state == 'dated' else 'imminent'}",
                label=f"linear: {what} {format_time(lin.failure_time, tz)}")
    elif lin.state == "accelerating, not dated":
        n = max(round(lin.within_days), 1)
        ax.plot([end, end + np.timedelta64(n, "D")], [0.0, 0.0], gid="linear:within",
                label=f"accelerating: failure possible within {n} day{'s' * (n != 1)}",
                **band)


def _linear_title(lin, tz) -> str:
    """The linear forecast in one line of the title."""
    if lin is None:
        return ""
    head = "\nlinear 1/v line (Fukuzono): "
    if lin.state == "dated":
        lo, hi = lin.interval
        return (f"{head}zero at {format_time(lin.failure_time, tz)} "
                f"({100 * lin.confidence:g} %: {format_time(lo, tz)} to {format_time(hi, tz)})")
    if lin.state == "imminent":
        return f"{head}at zero before the last data: failure may be imminent"
    if lin.state == "accelerating, not dated":
        n = max(round(lin.within_days), 1)
        return f"{head}accelerating; failure possible within {n} day{'s' * (n != 1)}"
    return f"{head}{lin.state}"


# ----------------------------------------------------------------------------- time series

@dataclass(frozen=True)
class Series:
    """One sensor parameter to plot: ``t`` datetime64 (UTC), ``values`` in ``unit``; ``gid``
    names its line (``series:<gid>``) for the GUI."""

    label: str
    unit: str
    t: np.ndarray
    values: np.ndarray
    gid: str


def timeseries_figure(series: Sequence[Series], *, stacked: bool = False,
                      tz: str | None = None,
                      thresholds: Mapping[str, Mapping[str, float]] | None = None,
                      title: str | None = None, figsize=DEFAULT_FIGSIZE) -> Figure:
    """Sensor parameters against time.  ``stacked``: one axes per distinct unit, sharing the
    time axis; otherwise one axes, with a second y axis on the right for a second unit (a
    third unit needs ``stacked``).  ``thresholds`` {unit: {level: value}} are drawn as
    horizontal lines on the axes of their unit."""
    series = list(series)
    if not series:
        raise ValueError("no series to draw")
    for s in series:
        if np.shape(s.t) != np.shape(s.values):
            raise ValueError(f"series {s.label!r}: {np.size(s.t)} times but "
                             f"{np.size(s.values)} values")
    units = list(dict.fromkeys(s.unit for s in series))
    fig = new_figure(figsize)
    if stacked:
        axes = list(fig.subplots(len(units), 1, sharex=True, squeeze=False)[:, 0])
    else:
        if len(units) > 2:
            raise ValueError(f"{len(units)} units ({', '.join(units)}) on one axes: at most "
                             f"two (a second y axis); use stacked=True")
        axes = [fig.subplots()]
        if len(units) == 2:
            axes.append(axes[0].twinx())
    by_unit = dict(zip(units, axes))
    for ax in axes:
        style_axes(ax)
    if len(axes) == 2 and not stacked:
        axes[1].spines["right"].set_visible(True)
        axes[1].grid(False)
    for i, s in enumerate(series):
        ax = by_unit[s.unit]
        ax.plot(as_datetime64(s.t), np.asarray(s.values, np.float64),
                color=SERIES_COLOURS[i % len(SERIES_COLOURS)], linewidth=1.1,
                label=f"{s.label} ({s.unit})" + (" (right axis)" if not stacked and
                                                   s.unit == units[-1] and len(units) == 2
                                                   else ""),
                gid=f"series:{s.gid}")
    for unit, ax in by_unit.items():
        mine = [s for s in series if s.unit == unit]
        ax.set_ylabel(f"{mine[0].label} ({unit})" if len(mine) == 1 else f"value ({unit})",
                      fontsize=FONT["label"])
        for rank, (name, value) in enumerate(sorted((thresholds or {}).get(unit, {}).items(),
                                                    key=lambda p: p[1])):
            ax.axhline(float(value), color=level_colour(name, rank), gid=f"threshold:{unit}:"
                       f"{name}", label=f"{name}: {float(value):g} {unit}",
                       **STYLE["threshold"])
    format_time_axis(axes[-1] if stacked else axes[0], tz)
    if title:
        fig.suptitle(title, fontsize=FONT["suptitle"], fontweight="bold", wrap=True)
    figure_legend(fig, axes)
    return fig


__all__ = ["COLOURS", "COMPONENTS", "DEFAULT_FIGSIZE", "PLAN_FIGSIZE", "STYLE", "Series",
           "component_label", "component_series_m", "daily_medians", "displacement_figure",
           "forecast_points", "format_time", "format_time_axis", "grid_bearing_deg",
           "inverse_velocity_figure", "level_colour", "time_zone", "timeseries_figure",
           "trajectory_figure", "velocity_figure"]  # and _PLAN_NAMES, from plan_figure

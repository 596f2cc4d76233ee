"""The site plan: every rover at its position with its horizontal displacement as an arrow
and an error ellipse, on one readable scale, labels placed without overlap (split from
``analysis.figures``, whose conventions, colours and artist ids it follows; ``figures``
still offers these names).

The arrow scale comes from the largest displacement that is not an outlier (more than
``PLAN_OUTLIER`` times the moving points' median), so moving points are a readable share of
the site; an outlier is drawn shortened with a break mark and its true value; the scale key
sits inside the axes; labels are placed at draw time (``plan_layout.PlanLayout``) for the
canvas and size they are drawn at.
"""

from __future__ import annotations

import math
from dataclasses import dataclass, replace
from typing import Iterable, Mapping, Sequence

import numpy as np
from matplotlib.axes import Axes
from matplotlib.figure import Figure
from matplotlib.lines import Line2D
from matplotlib.markers import MarkerStyle
from matplotlib.patches import Ellipse, Patch
from matplotlib.path import Path
from matplotlib.ticker import ScalarFormatter
from matplotlib.transforms import Affine2D

from analysis.figure_style import (COLOURS, FONT, PLAN_FIGSIZE, fitted_legend, legend_columns,
                                   level_colour, new_figure, style_axes)
from analysis.pipeline import END_WINDOW_DAYS, RoverAnalysis
from analysis.plan_layout import PlanLayout, distinctive_ends, nice
from analysis.timebase import days_since


@dataclass(frozen=True)
class PlanPoint:
    """One device on a site plan: its position (m, in the plan's frame), its horizontal
    displacement (mm, in the same frame's east/north) with 1-sigma and the east-north
    correlation, and its alarm level (None: no level reached, or none set)."""

    label: str
    easting_m: float
    northing_m: float
    d_east_mm: float
    d_north_mm: float
    sigma_east_mm: float
    sigma_north_mm: float
    correlation: float = 0.0
    alarm_level: str | None = None
    number: str | None = None  # the site's point number, shown before the label


def end_displacement_covariance_mm2(analysis: RoverAnalysis) -> np.ndarray:
    """2x2 covariance (mm²) of the end displacement (east, north) of ``analysis``.

    The end displacement is the pipeline's local line over the last ``END_WINDOW_DAYS``
    evaluated at the last epoch, minus the reference (one epoch, or a window's mean).  Its
    covariance is the scatter S of the last day's epochs about their line (the 2x2
    covariance of the east and north residuals, n - 2 degrees of freedom) times
    (1/n + (t_end - t_mean)² / Σ(t - t_mean)²) for the line's value at the end, plus S / m
    for a reference of m epochs (the same noise assumed there).  White noise is assumed:
    the day-to-day (flicker) part of GNSS noise is not in one day's scatter, so this is a
    lower bound of the uncertainty.  NaN when the last day has fewer than 3 epochs."""
    d = analysis.displacement
    days = days_since(d.t, d.t[-1])
    use = (days >= -END_WINDOW_DAYS) & np.isfinite(d.east_m) & np.isfinite(d.north_m)
    n = int(use.sum())
    if n < 3 or np.ptp(days[use]) <= 0:
        return np.full((2, 2), np.nan)
    x = days[use]
    design = np.column_stack([np.ones(n), x])
    ys = np.column_stack([d.east_m[use], d.north_m[use]]) * 1e3
    coef, *_ = np.linalg.lstsq(design, ys, rcond=None)
    res = ys - design @ coef
    scatter = res.T @ res / (n - 2)
    xm = x.mean()
    factor = 1.0 / n + (0.0 - xm) ** 2 / float(np.sum((x - xm) ** 2))
    m = int(d.reference.mask(d.t).sum())
    return scatter * (factor + 1.0 / max(m, 1))


def plan_points(analyses: Iterable[RoverAnalysis],
                positions: Mapping[str, tuple[float, float]]) -> list[PlanPoint]:
    """PlanPoints of rovers at ``positions`` ({serial number: (easting_m, northing_m)} in the
    frame of the plan, which the store provides): the end displacement of each analysis and
    its uncertainty (``end_displacement_covariance_mm2``), labelled with the display name,
    coloured by the analysis's alarm level.  The displacements are in the analyses' frame:
    local east/north drawn on a grid are ``turned`` by the convergence first (site_plans).
    A ValueError names the rovers without a position."""
    analyses = list(analyses)
    missing = [a.serial_number for a in analyses if a.serial_number not in positions]
    if missing:
        raise ValueError(f"no plan position for {', '.join(missing)}")
    out = []
    for a in analyses:
        cov = end_displacement_covariance_mm2(a)
        se, sn = math.sqrt(cov[0, 0]), math.sqrt(cov[1, 1])
        rho = float(cov[0, 1] / (se * sn)) if se > 0 and sn > 0 else 0.0
        x, y = positions[a.serial_number]
        out.append(PlanPoint(a.display_name, float(x), float(y),
                             a.end_displacement_m["east"] * 1e3,
                             a.end_displacement_m["north"] * 1e3, se, sn,
                             0.0 if not np.isfinite(rho) else rho,
                             getattr(a.alarm, "overall", None)))
    return out


def turned(point: PlanPoint, clockwise_deg: float) -> PlanPoint:
    """``point`` with its displacement and its uncertainty in axes turned ``clockwise_deg``
    from its own (local east/north drawn on a grid: the total convergence, from
    ``projections.GridFactors``, whose ``enu_to_grid`` this rotation is without the ppm
    scale: an arrow keeps its ground length)."""
    if not clockwise_deg:
        return point
    g = math.radians(clockwise_deg)
    rot = np.array([[math.cos(g), -math.sin(g)], [math.sin(g), math.cos(g)]])
    east, north = rot @ [point.d_east_mm, point.d_north_mm]
    c = point.correlation * point.sigma_east_mm * point.sigma_north_mm
    cov = rot @ np.array([[point.sigma_east_mm ** 2, c], [c, point.sigma_north_mm ** 2]]) @ rot.T
    se, sn = math.sqrt(cov[0, 0]), math.sqrt(cov[1, 1])
    rho = float(cov[0, 1] / (se * sn)) if se > 0 and sn > 0 else 0.0
    return replace(point, d_east_mm=float(east), d_north_mm=float(north), sigma_east_mm=se,
                   sigma_north_mm=sn, correlation=rho if math.isfinite(rho) else 0.0)


def confidence_scale(confidence: float) -> float:
    """k with P(chi-square, 2 dof <= k²) = confidence: the error ellipse is k sigma."""
    if not 0.0 < confidence < 1.0:
        raise ValueError(f"confidence must be between 0 and 1, not {confidence}")
    return math.sqrt(-2.0 * math.log(1.0 - confidence))


def error_ellipse(sigma_east: float, sigma_north: float, correlation: float,
                  confidence: float = 0.95) -> tuple[float, float, float]:
    """Full axes (width along ``angle``, height across it, same unit as the sigmas) and
    angle (degrees counter-clockwise from east, as matplotlib's Ellipse takes it) of the
    ``confidence`` ellipse of a 2D normal with these sigmas and correlation."""
    c = correlation * sigma_east * sigma_north
    cov = np.array([[sigma_east ** 2, c], [c, sigma_north ** 2]])
    values, vectors = np.linalg.eigh(cov)  # ascending
    k = confidence_scale(confidence)
    major, minor = (2.0 * k * math.sqrt(max(v, 0.0)) for v in values[::-1])
    angle = math.degrees(math.atan2(vectors[1, 1], vectors[0, 1])) % 180.0
    return major, minor, angle


PLAN_MOVING_MM = 3.0  # a point moving at least this much has an arrow to read (GNSS noise
#                      of a daily horizontal solution is 1-3 mm)
PLAN_OUTLIER = 4.0  # moving points beyond this times the moving points' median set no scale
PLAN_FIT = 0.4  # the longest arrow that sets the scale: 16-40 % of the site's extent
PLAN_LONGEST = 0.45  # arrows longer than this fraction of the extent are drawn shortened


def _plan_reference_mm(sizes: np.ndarray) -> float:
    """The displacement (mm) that sets a plan's arrow scale: the largest one, unless it is
    an outlier among the moving points (over ``PLAN_OUTLIER`` times their median; fewer
    than half of them can be), then the largest of the others.  0 with nothing moving."""
    sizes = sizes[np.isfinite(sizes) & (sizes > 0)]
    if not sizes.size:
        return 0.0
    moving = sizes[sizes >= PLAN_MOVING_MM]
    if moving.size:
        bulk = moving[moving <= PLAN_OUTLIER * float(np.median(moving))]
        return float(bulk.max())
    return float(sizes.max())


class _PlanAxes(Axes):
    """The axes of a plan (equal aspect, "datalim"): while its view is automatic (not zoomed
    or panned) the aspect is applied afresh to the autoscaled view each time.  Matplotlib
    applies it to the current view, so a figure drawn at several sizes (the report adopting
    it, a resized GUI pane) would otherwise keep widening its view and shrink the plan."""

    def apply_aspect(self, position=None):
        if self.get_autoscalex_on() and self.get_autoscaley_on():
            self.autoscale_view()
        super().apply_aspect(position)


def _break_marker(angle_deg: float) -> MarkerStyle:
    """Two parallel slashes across a shaft at ``angle_deg``: the mark of a shortened arrow."""
    path = Path([(-0.45, -1.0), (-0.05, 1.0), (0.05, -1.0), (0.45, 1.0)],
                [Path.MOVETO, Path.LINETO, Path.MOVETO, Path.LINETO])
    return MarkerStyle(path, transform=Affine2D().rotate_deg(angle_deg))


def plan_view_figure(points: Sequence[PlanPoint], *, frame_label: str,
                     scale_mm: float | None = None, confidence: float = 0.95,
                     arrow_m_per_mm: float | None = None,
                     axis_names: tuple[str, str] = ("easting", "northing"),
                     title: str | None = None, figsize=PLAN_FIGSIZE) -> Figure:
    """Site plan: each point at its position (m), labelled (its number and name), its
    displacement as an arrow with its ``confidence`` error ellipse at the head, a scale
    arrow of ``scale_mm`` in the lower right corner and the scale in words.

    Arrows are drawn at ``arrow_m_per_mm`` metres of plan per mm of displacement.  By
    default a 1-2-5 value making the reference displacement's arrow 16-40 % of the site's
    extent: the largest displacement, unless it is an outlier among the moving points (at
    least ``PLAN_MOVING_MM``; over ``PLAN_OUTLIER`` times their median), then the largest of
    the others, so that one fast point does not shrink the others to dots (the moving
    points' median arrow is then at least 4 % of the extent).  An arrow that would be
    longer than ``PLAN_LONGEST`` of the extent is drawn at that length, with a break mark
    across it and its true value written beside the mark ("83.9 mm, shortened"); its ellipse
    at the drawn head, at the plan's scale.  A given ``arrow_m_per_mm`` is used as given
    (nothing shortened).  The scale key (default: the 1-2-5 value nearest the reference
    displacement whose arrow is at most ``plan_layout.PLAN_KEY_MAX`` of the axes width) and the
    labels are placed when the figure is drawn (``plan_layout.PlanLayout``), for its final size."""
    points = list(points)
    if not points:
        raise ValueError("no points to draw")
    k_conf = confidence_scale(confidence)
    xs = np.array([p.easting_m for p in points])
    ys = np.array([p.northing_m for p in points])
    de = np.array([p.d_east_mm for p in points])
    dn = np.array([p.d_north_mm for p in points])
    size = np.hypot(de, dn)
    reference = _plan_reference_mm(size)
    extent = max(float(np.ptp(xs)), float(np.ptp(ys)), 20.0)
    auto_key = scale_mm is None
    shorten = arrow_m_per_mm is None
    if arrow_m_per_mm is None:
        arrow_m_per_mm = nice(PLAN_FIT * extent / reference) if reference > 0 else 1.0
    if scale_mm is None:
        scale_mm = nice(reference) if reference > 0 else 1.0
    scale = 1.0 / arrow_m_per_mm  # quiver: arrow length (data units) = U / scale
    longest = PLAN_LONGEST * extent

    fig = new_figure(figsize)
    ax = fig.add_subplot(axes_class=_PlanAxes)
    style_axes(ax)
    ax.set_aspect("equal", adjustable="datalim")
    reach_x, reach_y = [xs.min(), xs.max()], [ys.min(), ys.max()]
    quiver = None
    levels_seen: dict[str, str] = {}
    labels, arrows, ellipses = [], [], []
    short_names = distinctive_ends([p.label for p in points])
    shortened = 0
    for i, p in enumerate(points):
        colour = COLOURS["point"]
        if p.alarm_level:
            colour = levels_seen.setdefault(p.alarm_level,
                                            level_colour(p.alarm_level, len(levels_seen)))
        ax.plot([p.easting_m], [p.northing_m], linestyle="none", marker="o", markersize=7,
                markerfacecolor=colour, markeredgecolor="white", markeredgewidth=1.0,
                zorder=5, gid=f"point:{p.label}")
        drawn_m = size[i] * arrow_m_per_mm if np.isfinite(size[i]) else 0.0
        cut = shorten and drawn_m > longest
        factor = longest / drawn_m if cut else 1.0
        q = ax.quiver([p.easting_m], [p.northing_m], [p.d_east_mm], [p.d_north_mm],
                      angles="xy", scale_units="xy", scale=scale / factor,
                      color=COLOURS["3d"], width=0.004, headwidth=4.0, headlength=5.0,
                      headaxislength=4.5, zorder=4, gid=f"arrow:{p.label}")
        if not cut:
            quiver = quiver or q
        hx = p.easting_m + p.d_east_mm * arrow_m_per_mm * factor
        hy = p.northing_m + p.d_north_mm * arrow_m_per_mm * factor
        if np.isfinite(hx) and np.isfinite(hy):
            reach_x.append(hx)
            reach_y.append(hy)
            arrows.append(((p.easting_m, p.northing_m), (hx, hy)))
        if np.isfinite(p.sigma_east_mm) and np.isfinite(p.sigma_north_mm):
            w, h, angle = error_ellipse(p.sigma_east_mm, p.sigma_north_mm, p.correlation,
                                        confidence)
            ellipses.append(ax.add_patch(Ellipse(
                (hx, hy), w * arrow_m_per_mm, h * arrow_m_per_mm, angle=angle,
                facecolor=COLOURS["ellipse"], alpha=0.25, edgecolor=COLOURS["ellipse"],
                linewidth=0.9, zorder=3, gid=f"ellipse:{p.label}")))
            r = 0.5 * w * arrow_m_per_mm
            reach_x += [hx - r, hx + r]
            reach_y += [hy - r, hy + r]
        away = np.array([-p.d_east_mm, -p.d_north_mm])
        text = f"{p.number} {p.label}" if p.number else p.label
        label = ax.annotate(text, (p.easting_m, p.northing_m), xytext=(6.0, 6.0),
                            textcoords="offset points", fontsize=FONT["label"], zorder=6,
                            gid=f"label:{p.label}", annotation_clip=False)
        leader, = ax.plot([], [], color="#666666", linewidth=0.6, zorder=5.5, visible=False,
                          gid=f"leader:{p.label}")
        for artist in (label, leader):
            artist.set_in_layout(False)
        wordings = tuple(dict.fromkeys((text, p.number or short_names[i])))
        labels.append((label, (p.easting_m, p.northing_m), away, i, leader, wordings))
        if cut:
            shortened += 1
            angle = math.degrees(math.atan2(p.d_north_mm, p.d_east_mm))
            mid = (p.easting_m + 0.5 * (hx - p.easting_m), p.northing_m + 0.5 * (hy - p.northing_m))
            for edge, width in (("white", 3.2), (COLOURS["3d"], 1.3)):
                ax.plot(*mid, linestyle="none", marker=_break_marker(angle), markersize=11,
                        markerfacecolor="none", markeredgecolor=edge,
                        markeredgewidth=width, zorder=4.5,
                        gid=f"break:{p.label}" if edge != "white" else None)
            note = ax.annotate(f"{size[i]:.1f} mm, shortened", mid, xytext=(6.0, 6.0),
                               textcoords="offset points", fontsize=FONT["note"],
                               color=COLOURS["3d"], fontstyle="italic", zorder=6,
                               gid=f"shortened:{p.label}", annotation_clip=False)
            note.set_in_layout(False)
            labels.append((note, mid, np.array([p.d_north_mm, -p.d_east_mm]),
                           len(points) + i, None, (note.get_text(),)))
    # the view holds the points, the arrow heads and the ellipses (a quiver does not count
    # its arrows in the data limits); equal aspect then widens one direction
    ax.update_datalim(np.column_stack([reach_x, reach_y]))
    ax.margins(0.12)
    ax.autoscale_view()
    for axis in (ax.xaxis, ax.yaxis):
        fmt = ScalarFormatter(useOffset=False)
        fmt.set_scientific(False)
        axis.set_major_formatter(fmt)
    ax.set_xlabel(f"{axis_names[0]} (m)")
    ax.set_ylabel(f"{axis_names[1]} (m)")
    key = ax.quiverkey(quiver or q, 0.86, 0.05, scale_mm, f"{scale_mm:g} mm", labelpos="N",
                       coordinates="axes", fontproperties={"size": FONT["label"]},
                       color=COLOURS["3d"])
    key.set_gid("scale")
    north = ax.annotate("N", xy=(0.05, 0.95), xytext=(0.05, 0.83), xycoords="axes fraction",
                        ha="center", va="center", fontsize=FONT["label"], fontweight="bold",
                        gid="north_arrow",
                        arrowprops=dict(arrowstyle="-|>", color="black", linewidth=1.2))
    ax.add_artist(PlanLayout(key, labels, np.column_stack([xs, ys]), arrows, ellipses,
                              north, reference if auto_key and reference > 0 else None,
                              arrow_m_per_mm))
    cut_note = (f"\nbreak mark: arrow shortened to {100 * PLAN_LONGEST:g} % of the site, "
                f"true value beside it" if shortened else "")
    ax.set_title(f"{frame_label}\narrows: 1 mm of displacement = {arrow_m_per_mm:g} m on the "
                 f"plan; ellipses: {100 * confidence:g} % confidence ({k_conf:.3f}σ)"
                 f"{cut_note}", loc="left", fontsize=FONT["title"], gid="scale_note")
    handles = [Line2D([], [], color=COLOURS["3d"], linewidth=1.5, label="displacement"),
               Patch(facecolor=COLOURS["ellipse"], alpha=0.25, edgecolor=COLOURS["ellipse"],
                     label=f"{100 * confidence:g} % error ellipse")]
    handles += [Line2D([], [], linestyle="none", marker="o", markersize=7,
                       markerfacecolor=c, markeredgecolor="white", label=f"level: {name}")
                for name, c in levels_seen.items()]
    names = [h.get_label() for h in handles]
    fitted_legend(fig, handles, names, loc="outside lower center",
                  ncols=legend_columns(fig, names), fontsize=FONT["legend"], frameon=False)
    fig.suptitle(title or "Site plan: horizontal displacement", fontsize=FONT["suptitle"],
                 fontweight="bold", wrap=True)
    return fig

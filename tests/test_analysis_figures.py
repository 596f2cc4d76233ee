"""The figures of ``analysis.figures`` draw the analysis's own numbers.

Real analyses of a 60-day mirror synced from the reference server (its named GNSS scenario
rovers, as in tests/test_analyze.py) and synthetic arrays with known answers: every plotted
value is read back from the artists (found by their gid) and compared with the analysis, and
every figure renders to PNG and PDF through matplotlib's own canvases (no pyplot).

Set DEVMON_FIGURE_DIR to a directory to get a copy of the PNGs written by
``test_every_figure_renders_to_png_and_pdf`` there, to look at them.
"""

from __future__ import annotations

import ast
import dataclasses
import io
import math
import os
import shutil
import subprocess
import sys
from pathlib import Path

import matplotlib.dates as mdates
import numpy as np
import pytest
from matplotlib.figure import Figure

from analysis import figures as F
from analysis import plan_figure as P
from analysis.pipeline import AnalysisOptions, analyze_rover
from analysis.projections import parse_crs, project
from devmon_sync.analyze.rovers import analyze_devices
from devmon_sync.server import WorldSize
from devmon_sync.store import Mirror, queries

from support import synced_mirror

WORLD = WorldSize(sites=3, devices=16, days=60)
SCENARIOS = ("creep", "accelerating", "step", "outliers", "stable", "seasonal")
ZURICH = "Europe/Zurich"
LEVELS_MM = {"alert": 20.0, "alarm": 40.0, "emergency": 100.0}


@pytest.fixture(scope="module")
def mirror_path(tmp_path_factory):
    return synced_mirror(tmp_path_factory.mktemp("figures") / "mirror.duckdb", WORLD)


@pytest.fixture(scope="module")
def accelerating_with_levels(mirror_path, rovers, tmp_path_factory):
    """The accelerating rover analysed from a copy of the mirror in which its alarm levels
    were set through the store, as `devmon alarms` sets them."""
    db = tmp_path_factory.mktemp("levels") / "mirror.duckdb"
    shutil.copyfile(mirror_path, db)
    sn = rovers["accelerating"].serial_number
    with Mirror.open(db) as m:
        queries.set_alarm_levels(m, sn, "displacement", LEVELS_MM)
        queries.set_alarm_levels(m, sn, "velocity", {"alert": 1.0, "alarm": 5.0})
        (r,) = analyze_devices(m, [sn], AnalysisOptions())
    assert r.alarm is not None and r.alarm.overall == "alarm", r.alarm
    return r


@pytest.fixture(scope="module")
def unannounced_step(mirror_path, rovers):
    """The step rover analysed without its antenna-change event (and without the base
    station ids): the pipeline must detect the step itself."""
    dev = rovers["step"]
    with Mirror.open(mirror_path, read_only=True) as m:
        epochs = queries.gnss_epochs(m, dev.serial_number)
    epochs.pop("base_station_id")
    r = analyze_rover(epochs, serial_number=dev.serial_number, display_name=dev.display_name,
                      events=[], azimuth_deg=dev.azimuth_deg)
    assert r.known_steps.size == 0 and len(r.detected_steps) == 1, r.detected_steps
    return r


@pytest.fixture(scope="module")
def positions(mirror_path, rovers) -> dict[str, tuple[float, float]]:
    """UTM 32N position of each rover (its first day's mean), as the store would give."""
    crs = parse_crs("EPSG:32632")
    out = {}
    with Mirror.open(mirror_path, read_only=True) as m:
        for d in rovers.values():
            ep = queries.gnss_epochs(m, d.serial_number)
            e, n = project(np.nanmean(ep["lat"][:24]), np.nanmean(ep["lon"][:24]), crs)
            out[d.serial_number] = (float(e), float(n))
    return out


# ----------------------------------------------------------------------------- helpers

def by_gid(fig: Figure, gid: str) -> list:
    return fig.findobj(lambda a: a.get_gid() == gid)


def one(fig_or_ax, gid: str):
    found = fig_or_ax.findobj(lambda a: a.get_gid() == gid)
    assert len(found) == 1, (gid, found)
    return found[0]


def gids(fig: Figure, prefix: str) -> list[str]:
    return sorted({a.get_gid() for a in fig.findobj(lambda a: str(a.get_gid() or "")
                                                    .startswith(prefix))})


def xnum(values) -> np.ndarray:
    """Line x data (datetime64 or date numbers) as matplotlib date numbers."""
    arr = np.asarray(values)
    return mdates.date2num(arr) if arr.dtype.kind == "M" else arr.astype(np.float64)


def iso(t) -> str:
    return str(np.datetime_as_string(np.datetime64(t, "s"), unit="s")) + "Z"


def data_axes(fig: Figure) -> list:
    return [ax for ax in fig.axes if ax.get_label() != "<colorbar>"]


def render(fig: Figure, fmt: str) -> bytes:
    buf = io.BytesIO()
    fig.savefig(buf, format=fmt, dpi=100, metadata={"CreationDate": None} if fmt == "pdf"
                else None)
    return buf.getvalue()


# ----------------------------------------------------------------------------- displacement

def test_displacement_lines_are_the_analysis_displacements_and_trends(results):
    r = results["step"]
    comps = ("east", "north", "up", "along", "across", "horizontal", "3d")
    fig = F.displacement_figure(r, comps, tz=ZURICH)
    d = r.displacement
    along, across = d.along_across(r.azimuth_deg)  # local ENU: the azimuth is the bearing
    expected = {"east": d.east_m, "north": d.north_m, "up": d.up_m, "along": along,
                "across": across, "horizontal": d.horizontal_m, "3d": d.length_3d_m}
    assert len(data_axes(fig)) == len(comps)
    for c in comps:
        line = one(fig, f"data:{c}")
        assert line.get_linestyle() == "None"  # epochs as markers, never joined over gaps
        np.testing.assert_array_equal(np.asarray(line.get_xdata()), d.t)
        np.testing.assert_allclose(line.get_ydata(), expected[c] * 1000.0, rtol=0, atol=1e-9)
        ax = line.axes
        assert ax.get_ylabel().endswith("(mm)")
        v = r.velocity[c]
        # at the precision of the tables (mm/day: 3 decimals, as `devmon analyze`), not 4
        assert f"{v.m_per_yr * 1e3:+.1f} ± {v.sigma_m_per_yr * 1e3:.1f} mm/yr" in \
            ax.get_title(loc="left")
        assert f"({v.mm_per_day:+.3f} ± {v.sigma_mm_per_day:.3f} mm/day" in \
            ax.get_title(loc="left")
        if c in r.trends:
            fit = one(fig, f"fit:{c}")
            np.testing.assert_allclose(fit.get_ydata(), r.trends[c].model(d.t) * 1000.0,
                                       rtol=0, atol=1e-9)
            assert fit.axes is ax
        else:  # a length has a velocity but no trend model to draw
            assert not by_gid(fig, f"fit:{c}")
    # the antenna change: one dashed line per axes at its time
    (step,) = r.known_steps
    lines = by_gid(fig, f"known_step:{iso(step)}")
    assert len(lines) == len(comps) and {ln.axes for ln in lines} == set(data_axes(fig))
    for ln in lines:
        assert np.allclose(xnum(ln.get_xdata()), mdates.date2num(step))
    assert not gids(fig, "detected_step:")
    assert data_axes(fig)[-1].get_xlabel() == "time (Europe/Zurich)"
    assert r.display_name in fig.get_suptitle() and "local ENU" in fig.get_suptitle()


def test_a_long_title_in_a_narrow_figure_wraps_inside_it(results):
    """A GUI pane narrower than the title: the title wraps, nothing is cut at the edges."""
    from matplotlib.backends.backend_agg import FigureCanvasAgg

    fig = F.displacement_figure(results["step"], tz=ZURICH, figsize=(4.5, 5.0))
    FigureCanvasAgg(fig).draw()  # layout and wrapping happen when drawn
    title = fig.get_suptitle()
    assert len(title) > 60  # long enough to need two lines at this width
    box = fig._suptitle.get_window_extent()
    one_line = fig.text(0, 0, "Xg", fontsize=F.FONT["suptitle"], fontweight="bold")
    line_height = one_line.get_window_extent().height
    assert box.x0 >= 0 and box.x1 <= fig.bbox.x1
    assert box.height > 1.5 * line_height  # on two lines or more


def test_outliers_rejected_epochs_and_gaps_are_marked_at_their_times(results):
    r = results["outliers"]
    fig = F.displacement_figure(r)
    t_out = r.t_all[r.outliers]
    t_rej = r.t_all[~r.quality.keep]
    assert t_out.size == int(r.outliers.sum()) >= 10 and t_rej.size > 0
    for c in ("east", "north", "up"):
        out = one(fig, f"outliers:{c}")
        np.testing.assert_array_equal(np.asarray(out.get_xdata()), t_out)
        assert out.get_linestyle() == "None" and out.get_marker() == "x"  # not connected
        rej = one(fig, f"rejected:{c}")
        np.testing.assert_array_equal(np.asarray(rej.get_xdata()), t_rej)
        # markers along the bottom of the axes, in a strip the data do not reach
        ax = out.axes
        assert out.get_transform() == ax.get_xaxis_transform()
        y = one(fig, f"data:{c}").get_ydata()
        lo, hi = ax.get_ylim()
        assert (np.nanmin(y) - lo) / (hi - lo) > max(out.get_ydata()) + 0.02
    assert len(gids(fig, "gap:")) == len(r.gaps) >= 2
    assert {f"gap:{iso(g.start)}" for g in r.gaps} == set(gids(fig, "gap:"))
    assert not by_gid(F.displacement_figure(r, show_rejected=False), "rejected:east")


def test_a_detected_step_is_drawn_apart_from_known_ones(unannounced_step):
    r = unannounced_step
    fig = F.displacement_figure(r, ("east", "up"))
    (step,) = r.detected_steps
    lines = by_gid(fig, f"detected_step:{iso(step.time)}")
    assert len(lines) == 2
    assert all(np.allclose(xnum(ln.get_xdata()), mdates.date2num(step.time)) for ln in lines)
    assert lines[0].get_linestyle() == "-." and not gids(fig, "known_step:")
    labels = [t.get_text() for t in fig.legends[0].get_texts()]
    assert "detected step" in labels


def test_horizontal_levels_of_their_own_are_drawn_on_the_horizontal_axes(
        mirror_path, rovers, tmp_path):
    """A rover with a horizontal (2D) ladder besides the 3D one: the 2D axes show the 2D
    ladder, the 3D axes the 3D one."""
    db = tmp_path / "mirror.duckdb"
    shutil.copyfile(mirror_path, db)
    sn = rovers["accelerating"].serial_number
    with Mirror.open(db) as m:
        queries.set_alarm_levels(m, sn, "displacement", LEVELS_MM)
        queries.set_alarm_levels(m, sn, "displacement:horizontal", {"watch": 7.0})
        (r,) = analyze_devices(m, [sn], AnalysisOptions())
    fig = F.displacement_figure(r, ("horizontal", "3d"))
    (watch,) = by_gid(fig, "threshold:watch")
    assert watch.axes is one(fig, "data:horizontal").axes
    assert np.allclose(watch.get_ydata(), 7.0)
    assert {ln.axes for ln in by_gid(fig, "threshold:alert")} == {one(fig, "data:3d").axes}


def test_3d_alarm_levels_are_drawn_on_the_3d_length_only(accelerating_with_levels):
    r = accelerating_with_levels
    fig = F.displacement_figure(r, ("east", "horizontal", "3d"))  # levels from the store
    for name, value in LEVELS_MM.items():
        (line,) = by_gid(fig, f"threshold:{name}")
        assert line.axes is one(fig, "data:3d").axes
        assert np.allclose(line.get_ydata(), value)
    ax3 = one(fig, "data:3d").axes
    end_3d = r.end_displacement_m["3d"] * 1000
    assert 40 < end_3d < 100
    # the view shows the data and the next level not yet reached (100 mm: near enough)
    assert ax3.get_ylim()[1] >= 100.0 > 0.9 * ax3.get_ylim()[1]
    assert len(by_gid(fig, "threshold_band:alert")) == 1
    # levels given explicitly replace the store's; one far above is drawn off scale
    fig = F.displacement_figure(r, ("3d",), alarm_levels_mm={"alert": 10, "alarm": 5000})
    assert gids(fig, "threshold:") == ["threshold:alarm", "threshold:alert"]
    top = one(fig, "data:3d").axes.get_ylim()[1]
    assert np.nanmax(r.displacement.length_3d_m) * 1e3 < top < 80
    labels = [t.get_text() for t in fig.legends[0].get_texts()]
    assert "alarm ≥ 5000 mm (off scale)" in labels and "alert ≥ 10 mm" in labels


def test_components_are_checked_with_the_choices_named(results):
    r = results["stable"]
    with pytest.raises(ValueError, match="at least one"):
        F.displacement_figure(r, ())
    with pytest.raises(ValueError, match="use east, north, up"):
        F.displacement_figure(r, ("sideways",))
    with pytest.raises(ValueError, match="no along component"):
        F.displacement_figure(dataclasses.replace(r, azimuth_deg=None), ("along",))


# ----------------------------------------------------------------------------- time zones

def test_time_axes_are_in_the_chosen_zone(results):
    r = results["creep"]
    stacked = data_axes(F.displacement_figure(r))
    assert [ax.get_xlabel() for ax in stacked] == ["", "", "time (UTC)"]  # one label, below
    utc = F.displacement_figure(r, ("east",))
    zurich = F.displacement_figure(r, ("east",), tz=ZURICH)
    assert data_axes(utc)[0].get_xlabel() == "time (UTC)"
    assert data_axes(zurich)[0].get_xlabel() == "time (Europe/Zurich)"
    for fig, hour in ((utc, 0), (zurich, 23)):  # daily ticks at local midnight: 23:00 UTC
        ax = data_axes(fig)[0]
        ax.set_xlim(mdates.date2num(np.datetime64("2025-12-01")),
                    mdates.date2num(np.datetime64("2025-12-08")))
        ticks = ax.xaxis.get_major_locator()()
        assert len(ticks) >= 4
        assert {mdates.num2date(x).hour for x in ticks} == {hour}, ticks
        assert isinstance(ax.xaxis.get_major_formatter(), mdates.ConciseDateFormatter)
    assert F.format_time(np.datetime64("2026-01-13T01:42:56"), ZURICH) == "2026-01-13 02:42 CET"
    assert F.format_time(np.datetime64("2026-07-13T01:42:56")) == "2026-07-13 01:42 UTC"
    with pytest.raises(ValueError, match="unknown time zone 'Mars/Olympus'"):
        F.velocity_figure(r, tz="Mars/Olympus")


# ----------------------------------------------------------------------------- trajectory

def test_trajectory_shows_the_path_in_time_colours_and_the_azimuth(results):
    r = results["accelerating"]
    fig = F.trajectory_figure(r, tz=ZURICH)
    d = r.displacement
    pts = one(fig, "data:trajectory")
    np.testing.assert_allclose(pts.get_offsets(), np.column_stack([d.east_m, d.north_m]) * 1e3,
                               rtol=0, atol=1e-9)
    np.testing.assert_allclose(pts.get_array(), mdates.date2num(d.t))
    # the path: the median of each UTC day
    path = one(fig, "path:trajectory")
    days = d.t.astype("datetime64[D]")
    for k in (0, 17, -1):
        day = np.unique(days)[k]
        assert path.get_xdata()[k] == pytest.approx(np.median(d.east_m[days == day]) * 1e3)
        assert path.get_ydata()[k] == pytest.approx(np.median(d.north_m[days == day]) * 1e3)
    assert len(path.get_xdata()) == np.unique(days).size
    start, end = one(fig, "start"), one(fig, "end")
    assert (start.get_xdata()[0], start.get_ydata()[0]) == (0.0, 0.0)
    assert end.get_xdata()[0] == pytest.approx(r.end_displacement_m["east"] * 1e3)
    assert end.get_ydata()[0] == pytest.approx(r.end_displacement_m["north"] * 1e3)
    arrow = one(fig, "azimuth")
    dx, dy = np.subtract(arrow.xy, arrow.xyann)
    assert math.degrees(math.atan2(dx, dy)) % 360 == pytest.approx(r.azimuth_deg)
    # the slope moves along its azimuth: the end lies within 10° of the arrow
    end_dir = math.degrees(math.atan2(end.get_xdata()[0], end.get_ydata()[0])) % 360
    assert abs(end_dir - r.azimuth_deg) < 10
    ax = pts.axes
    assert (ax.get_xlabel(), ax.get_ylabel()) == ("east (mm)", "north (mm)")
    assert ax.get_aspect() == 1.0
    cbar = [a for a in fig.axes if a.get_label() == "<colorbar>"]
    assert len(cbar) == 1 and cbar[0].get_ylabel() == "time (Europe/Zurich)"
    assert not by_gid(F.trajectory_figure(dataclasses.replace(r, azimuth_deg=None)), "azimuth")


@pytest.mark.parametrize("hours", [10, 60, 80, 95, 30 * 24])
def test_the_time_colour_bar_labels_each_tick_apart_for_any_span(results, hours):
    """A rover with a few days of data (95 h: no hourly step gave at most 8 ticks, and
    matplotlib fell back to 12-hourly ticks labelled by date alone: '2025-12-31' twice, and
    a warning on the command line): every tick label differs, and no warning."""
    import warnings

    r = results["accelerating"]
    d = r.displacement
    keep = d.t <= d.t[0] + np.timedelta64(hours, "h")
    short = dataclasses.replace(r, displacement=dataclasses.replace(
        d, t=d.t[keep], east_m=d.east_m[keep], north_m=d.north_m[keep], up_m=d.up_m[keep]))
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        fig = F.trajectory_figure(short)
        render(fig, "png")
    (cbar,) = [a for a in fig.axes if a.get_label() == "<colorbar>"]
    labels = [t.get_text() for t in cbar.get_yticklabels() if t.get_text()]
    assert len(labels) >= 3 and len(set(labels)) == len(labels), labels


def test_a_grid_frame_is_named_and_the_azimuth_turned_by_the_convergence(mirror_path, rovers):
    creep = rovers["creep"]
    utm = next(p for p in creep.projections if "UTM" in p["label"])
    with Mirror.open(mirror_path, read_only=True) as m:
        (r,) = analyze_devices(m, [creep.serial_number],
                               AnalysisOptions.build(frame=str(utm["id"])))
    assert r.grid is not None and abs(r.grid.convergence_deg) > 0.1
    fig = F.trajectory_figure(r)
    ax = one(fig, "data:trajectory").axes
    assert (ax.get_xlabel(), ax.get_ylabel()) == ("grid east (mm)", "grid north (mm)")
    assert r.frame.label in ax.get_title(loc="left")
    arrow = one(fig, "azimuth")
    dx, dy = np.subtract(arrow.xy, arrow.xyann)
    assert math.degrees(math.atan2(dx, dy)) % 360 == pytest.approx(
        (r.azimuth_deg - r.grid.convergence_deg) % 360)
    fig = F.displacement_figure(r, ("along", "up"))
    along_grid = r.displacement.along_across(r.azimuth_deg - r.grid.convergence_deg)[0]
    np.testing.assert_allclose(one(fig, "data:along").get_ydata(), along_grid * 1e3)
    np.testing.assert_allclose(one(fig, "fit:along").get_ydata(),
                               r.trends["along"].model(r.displacement.t) * 1e3)
    assert one(fig, "data:up").axes.get_ylabel() == f"{r.frame.height_type} height (mm)"


# ----------------------------------------------------------------------------- velocity

def test_velocity_figure_draws_the_sliding_velocity_and_the_reference(results):
    r = results["accelerating"]
    fig = F.velocity_figure(r, tz=ZURICH)
    s = r.sliding
    line = one(fig, "data:velocity")
    np.testing.assert_array_equal(np.asarray(line.get_xdata()), s.t)
    np.testing.assert_allclose(line.get_ydata(), s.velocity_mm_per_day, equal_nan=True)
    band = one(fig, "band:velocity")
    lo_hi = band.get_paths()[0].vertices[:, 1]
    finite = np.isfinite(s.sigma_mm_per_day)
    assert lo_hi.min() == pytest.approx(np.min((s.velocity_mm_per_day - s.sigma_mm_per_day)
                                               [finite]))
    assert lo_hi.max() == pytest.approx(np.max((s.velocity_mm_per_day + s.sigma_mm_per_day)
                                               [finite]))
    ref = one(fig, "reference:velocity")
    assert np.allclose(ref.get_ydata(), r.velocity["3d"].mm_per_day)
    recent = one(fig, "recent:velocity")
    # along the chart's direction, as its windows (tests/test_vector_rates.py)
    assert np.allclose(recent.get_ydata(), F.recent_along_motion(r)[0])
    assert np.asarray(recent.get_xdata())[-1] == r.displacement.t[-1]
    ax = line.axes
    assert ax.get_ylabel() == "velocity (mm/day)"
    assert ax.get_xlabel() == "time (Europe/Zurich)"
    a = r.acceleration
    assert f"acceleration {a.acceleration_mm_per_day2:+.4f} ± {a.sigma_mm_per_day2:.4f} " \
           f"mm/day²" in ax.get_title(loc="left")
    # the slope accelerates: the last window is faster than the whole-period velocity
    assert s.velocity_mm_per_day[-1] > 2 * r.velocity["3d"].mm_per_day


def test_velocity_levels_come_from_the_store(accelerating_with_levels):
    fig = F.velocity_figure(accelerating_with_levels)
    assert np.allclose(one(fig, "threshold:alert").get_ydata(), 1.0)
    assert np.allclose(one(fig, "threshold:alarm").get_ydata(), 5.0)


# ----------------------------------------------------------------------------- inverse velocity

def test_inverse_velocity_forecast_of_the_accelerating_slope(results):
    r = results["accelerating"]
    f = r.forecast
    assert f.supported, f
    fig = F.inverse_velocity_figure(r, tz=ZURICH)
    iv = r.inverse_velocity
    data = one(fig, "data:inverse_velocity")
    finite = np.isfinite(iv.inverse_velocity_day_per_mm)
    np.testing.assert_array_equal(np.asarray(data.get_xdata()), iv.t[finite])
    np.testing.assert_allclose(data.get_ydata(), iv.inverse_velocity_day_per_mm[finite])
    # the fitted points: as many as the forecast fitted, from its onset to its last value
    used = one(fig, "fit_points:inverse_velocity")
    t_used = np.asarray(used.get_xdata())
    assert t_used.size == f.n_points
    assert t_used[0] == f.onset and t_used[-1] == f.last_time
    # the fitted curve reaches zero at the failure time, from the onset: Voight's law as
    # fitted (its alpha), not a straight line
    fit = one(fig, "fit:inverse_velocity")
    tx = np.asarray(fit.get_xdata())
    assert tx[0] == f.onset and tx[-1] == f.failure_time
    y = fit.get_ydata()
    assert y[-1] == 0.0
    np.testing.assert_allclose(y, f.inverse_velocity_at(tx))
    assert f"alpha {f.alpha:.2f}" in fit.get_label()
    failure = one(fig, "forecast:failure_time")
    assert np.allclose(xnum(failure.get_xdata()), mdates.date2num(f.failure_time))
    span = one(fig, "forecast:interval")
    x0, x1 = span.get_x(), span.get_x() + span.get_width()
    assert (x0, x1) == pytest.approx(tuple(mdates.date2num(np.array(f.interval))))
    assert np.allclose(xnum(one(fig, "forecast:last_data").get_xdata()),
                       mdates.date2num(f.last_time))
    title = failure.axes.get_title(loc="left")
    assert F.format_time(f.failure_time, ZURICH) in title and "CET" in title
    assert f"R² {f.r2:.2f}" in title
    assert not by_gid(fig, "forecast:none")
    assert failure.axes.get_ylabel() == "inverse velocity (day/mm)"
    assert failure.axes.get_xlim()[1] >= mdates.date2num(f.interval[1])


def test_the_fit_is_drawn_as_the_curve_of_its_alpha(results):
    """At alpha 2.3 the inverse velocity bends (q = 1/(alpha-1) < 1): the drawn fit follows
    the curve the forecast fitted, not the chord from the onset to the failure time."""
    r = results["accelerating"]
    f = dataclasses.replace(r.forecast, alpha=2.3)
    fit = one(F.inverse_velocity_figure(dataclasses.replace(r, forecast=f)),
              "fit:inverse_velocity")
    tx, y = np.asarray(fit.get_xdata()), np.asarray(fit.get_ydata())
    assert tx.size >= 50
    np.testing.assert_allclose(y, f.inverse_velocity_at(tx))
    chord = y[0] * (f.failure_time - tx) / (f.failure_time - tx[0])
    assert np.max(np.abs(y - chord)) > 0.05 * y[0]


def test_the_reports_forecast_paragraph_names_the_fit_it_drew(results):
    """The rover page's words match the figure: Voight's law with its fitted alpha and the
    forecast's own confidence, not "a straight line" (that is the linear forecast's)."""
    from devmon_sync.report import pages
    from devmon_sync.report.model import DeviceEntry
    from devmon_sync.store.report_queries import ScopeDevice

    r = results["accelerating"]
    entry = DeviceEntry(ScopeDevice(r.serial_number, r.serial_number, None, None, "ROVER"), r)
    (text,) = [b.text for b in pages._forecast_blocks(entry)
               if getattr(b, "text", "").startswith("Voight")]
    assert f"alpha {r.forecast.alpha:.2f}" in text
    assert f"{100 * r.forecast.confidence:g} % interval" in text
    assert "straight line" not in text


def test_a_stable_point_says_why_there_is_no_forecast(results):
    r = results["stable"]
    assert r.forecast is not None and not r.forecast.supported
    fig = F.inverse_velocity_figure(r)
    text = one(fig, "forecast:none")
    assert text.get_text().replace("\n", " ") == f"Voight fit, no forecast: {r.forecast.reason}"
    for gid in ("fit:inverse_velocity", "forecast:failure_time", "forecast:interval",
                "fit_points:inverse_velocity"):
        assert not by_gid(fig, gid)
    # its velocities are all within their noise: drawn, and shown as not used
    unresolved = one(fig, "unresolved:inverse_velocity")
    resolved, _ = F.forecast_points(r)
    assert np.asarray(unresolved.get_xdata()).size == int(
        (np.isfinite(r.inverse_velocity.inverse_velocity_day_per_mm) & ~resolved).sum()) > 0
    # the text sits in headroom above every value
    ax = text.axes
    fig.canvas.draw()
    box = text.get_window_extent().transformed(ax.transData.inverted())
    assert box.y0 > np.nanmax(r.inverse_velocity.inverse_velocity_day_per_mm)


# ----------------------------------------------------------------------------- plan view

def test_error_ellipse_matches_the_chi_square_formula():
    # sigma 2 and 1 mm, correlation 0.5: covariance [[4, 1], [1, 1]]
    a, b, c = 4.0, 1.0, 1.0
    lam1 = (a + c) / 2 + math.sqrt(((a - c) / 2) ** 2 + b ** 2)
    lam2 = (a + c) / 2 - math.sqrt(((a - c) / 2) ** 2 + b ** 2)
    k = math.sqrt(-2 * math.log(1 - 0.95))
    assert k == pytest.approx(2.4477, abs=1e-4)
    angle = math.degrees(0.5 * math.atan2(2 * b, a - c))
    w, h, ang = P.error_ellipse(2.0, 1.0, 0.5, 0.95)
    assert (w, h, ang) == pytest.approx((2 * k * math.sqrt(lam1), 2 * k * math.sqrt(lam2),
                                         angle))
    # uncorrelated: axes along east and north; a negative correlation leans the other way
    assert P.error_ellipse(1.0, 3.0, 0.0, 0.95) == pytest.approx((6 * k, 2 * k, 90.0))
    assert P.error_ellipse(2.0, 1.0, -0.5, 0.95)[2] == pytest.approx(180.0 - angle)
    assert P.confidence_scale(0.3934693402873666) == pytest.approx(1.0)  # 1 sigma in 2D
    with pytest.raises(ValueError):
        P.confidence_scale(1.0)


def test_plan_view_arrows_ellipses_and_scale_agree():
    pts = [P.PlanPoint("P1", 1000.0, 2000.0, 30.0, -40.0, 2.0, 1.0, 0.5, "alarm"),
           P.PlanPoint("P2", 1200.0, 2100.0, 5.0, 0.0, 1.0, 1.0, 0.0),
           P.PlanPoint("P3", 1100.0, 1900.0, 0.0, 0.0, float("nan"), float("nan"))]
    fig = P.plan_view_figure(pts, frame_label="CH1903+ / LV95", confidence=0.95)
    k = math.sqrt(-2 * math.log(0.05))
    note = one(fig, "scale_note").get_text()
    # default arrow scale: a 1-2-5 value; the longest arrow (50 mm) 15-40 % of the extent
    m_per_mm = float(note.split("1 mm of displacement = ")[1].split(" m")[0])
    mantissa = m_per_mm / 10 ** math.floor(math.log10(m_per_mm))
    assert mantissa in (1.0, 2.0, 5.0)
    assert 0.15 * 200 <= 50 * m_per_mm <= 0.4 * 200
    key = one(fig, "scale")
    for p in pts:
        q = one(fig, f"arrow:{p.label}")
        assert (q.U[0], q.V[0]) == (p.d_east_mm, p.d_north_mm)
        assert (q.X[0], q.Y[0]) == (p.easting_m, p.northing_m)
        assert q.scale == pytest.approx(1 / m_per_mm) and q.scale_units == "xy"
        assert one(fig, f"label:{p.label}").get_text() == p.label
    assert key.Q.scale == pytest.approx(1 / m_per_mm)
    scale_mm = key.U
    assert key.text.get_text() == f"{scale_mm:g} mm" and scale_mm == 50.0
    e1 = one(fig, "ellipse:P1")
    w, h, ang = P.error_ellipse(2.0, 1.0, 0.5, 0.95)
    assert e1.center == pytest.approx((1000 + 30 * m_per_mm, 2000 - 40 * m_per_mm))
    assert (e1.width, e1.height, e1.angle) == pytest.approx((w * m_per_mm, h * m_per_mm, ang))
    e2 = one(fig, "ellipse:P2")
    assert (e2.width, e2.height) == pytest.approx((2 * k * m_per_mm, 2 * k * m_per_mm))
    assert not by_gid(fig, "ellipse:P3")  # no uncertainty known: no ellipse
    assert "95 % confidence" in note and "CH1903+ / LV95" in note
    ax = e1.axes
    assert (ax.get_xlabel(), ax.get_ylabel()) == ("easting (m)", "northing (m)")
    # every point, arrow head and whole ellipse is in view
    fig.canvas.draw()
    (x0, x1), (y0, y1) = ax.get_xlim(), ax.get_ylim()
    for e in (e1, e2):
        r = max(e.width, e.height) / 2
        assert x0 < e.center[0] - r and e.center[0] + r < x1
        assert y0 < e.center[1] - r and e.center[1] + r < y1
    assert all(x0 < p.easting_m < x1 and y0 < p.northing_m < y1 for p in pts)
    # given scales are used as given
    fig = P.plan_view_figure(pts, frame_label="x", scale_mm=10, arrow_m_per_mm=2.5)
    assert one(fig, "scale").U == 10 and one(fig, "scale").text.get_text() == "10 mm"
    assert one(fig, "arrow:P1").scale == pytest.approx(0.4)
    assert "1 mm of displacement = 2.5 m" in one(fig, "scale_note").get_text()
    with pytest.raises(ValueError, match="no points"):
        P.plan_view_figure([], frame_label="x")


def test_plan_points_carry_the_end_displacement_and_its_uncertainty(results, positions):
    analyses = list(results.values())
    pts = P.plan_points(analyses, positions)
    for r, p in zip(analyses, pts):
        assert p.label == r.display_name
        assert (p.easting_m, p.northing_m) == positions[r.serial_number]
        assert p.d_east_mm == pytest.approx(r.end_displacement_m["east"] * 1e3)
        assert p.d_north_mm == pytest.approx(r.end_displacement_m["north"] * 1e3)
        assert -1 < p.correlation < 1 and p.alarm_level is None
        # independently: the last day's scatter about its line, the line's value at the
        # end, and the reference's mean of m epochs (the first day's, by default)
        d = r.displacement
        days = (d.t - d.t[-1]) / np.timedelta64(1, "D")
        last = days >= -1.0
        n = int(last.sum())
        res_e = d.east_m[last] - np.polyval(np.polyfit(days[last], d.east_m[last], 1), days[last])
        s2 = float(np.sum((res_e * 1e3) ** 2)) / (n - 2)
        x = days[last]
        m = int(d.reference.mask(d.t).sum())
        factor = 1 / n + x.mean() ** 2 / np.sum((x - x.mean()) ** 2) + 1.0 / m
        assert p.sigma_east_mm == pytest.approx(math.sqrt(s2 * factor), rel=1e-9)
        # GNSS noise of a few mm per epoch: under a millimetre or two with a day's reference
        assert 0.2 < p.sigma_east_mm < 2 and 0.2 < p.sigma_north_mm < 2
    fig = P.plan_view_figure(pts, frame_label="WGS 84 / UTM zone 32N")
    assert len(gids(fig, "arrow:")) == len(pts) == len(gids(fig, "ellipse:"))
    with pytest.raises(ValueError, match=analyses[0].serial_number):
        P.plan_points(analyses, {})


def test_plan_points_take_the_alarm_level(accelerating_with_levels, positions):
    (p,) = P.plan_points([accelerating_with_levels], positions)
    assert p.alarm_level == "alarm"
    fig = P.plan_view_figure([p], frame_label="x")
    colour = one(fig, f"point:{p.label}").get_markerfacecolor()
    assert colour == F.level_colour("alarm", 0)


def _slope_site() -> list:
    """Ten rovers over a 200 m slope, some of them 15-25 m apart: one at 80 mm (a debris
    scarp), nine at 3-10 mm, all moving roughly downslope (south-east)."""
    spots = [(2614000.0, 1125200.0), (2614020.0, 1125185.0), (2614060.0, 1125150.0),
             (2614075.0, 1125165.0), (2614110.0, 1125090.0), (2614140.0, 1125060.0),
             (2614150.0, 1125078.0), (2614185.0, 1125030.0), (2614200.0, 1125010.0),
             (2614040.0, 1125040.0)]
    sizes = [80.0, 3.0, 4.0, 5.0, 6.0, 7.0, 8.0, 9.0, 10.0, 3.5]
    bearings = [140.0, 120.0, 150.0, 135.0, 160.0, 125.0, 145.0, 130.0, 155.0, 170.0]
    return [P.PlanPoint(f"Illgraben R{i + 1:02d}", x, y, s * math.sin(math.radians(b)),
                        s * math.cos(math.radians(b)), 0.8, 0.6, 0.2,
                        "alarm" if s > 50 else None)
            for i, ((x, y), s, b) in enumerate(zip(spots, sizes, bearings))]


def _drawn(fig: Figure, figsize=None):
    """The figure on an Agg canvas (as the report's and a Qt canvas draw it), drawn."""
    from matplotlib.backends.backend_agg import FigureCanvasAgg
    if figsize is not None:
        fig.set_size_inches(*figsize)
    FigureCanvasAgg(fig)
    fig.canvas.draw()
    return fig.canvas.get_renderer()


def _key_span(fig: Figure) -> tuple[float, float]:
    """Axes fractions of the scale key arrow's two ends (its label above the middle)."""
    key = one(fig, "scale")
    frac = key.U / key.Q.scale / key.Q.axes.viewLim.width
    return key.X - frac / 2, key.X + frac / 2


def _label_boxes(fig: Figure, renderer) -> dict:
    from matplotlib.text import Text
    return {a.get_gid(): Text.get_window_extent(a, renderer)
            for a in fig.findobj(lambda a: str(a.get_gid() or "").startswith(
                ("label:", "shortened:")))}


@pytest.mark.parametrize("figsize", [None, (8.27, 7.0), (6.0, 4.5)])
def test_plan_view_of_a_site_with_one_fast_rover_reads(figsize, tmp_path):
    """Issue 17: one rover at 80 mm among nine at 3-10 mm must not make the others dots;
    labels sit by their points without overlapping, and the scale key stays inside."""
    pts = _slope_site()
    extent = 200.0
    fig = P.plan_view_figure(pts, frame_label="CH1903+ / LV95", title="Illgraben slope")
    renderer = _drawn(fig, figsize)
    note = one(fig, "scale_note").get_text()
    m_per_mm = float(note.split("1 mm of displacement = ")[1].split(" m")[0])
    assert m_per_mm / 10 ** math.floor(math.log10(m_per_mm)) in (1.0, 2.0, 5.0)
    assert "shortened" in note
    for p in pts:
        q = one(fig, f"arrow:{p.label}")
        size = math.hypot(p.d_east_mm, p.d_north_mm)
        assert (q.U[0], q.V[0]) == (p.d_east_mm, p.d_north_mm)  # the true displacement
        drawn = math.hypot(q.U[0], q.V[0]) / q.scale
        assert drawn >= 0.04 * extent, (p.label, size, drawn)  # every moving point readable
        assert drawn <= 0.45 * extent * 1.001
        if size > 50:  # the fast one: shortened, marked and labelled with its true value
            assert drawn < size * m_per_mm * 0.5
            assert one(fig, f"shortened:{p.label}").get_text() == f"{size:.1f} mm, shortened"
            assert one(fig, f"break:{p.label}").get_visible()
        else:
            assert q.scale == pytest.approx(1 / m_per_mm)
            assert not by_gid(fig, f"shortened:{p.label}")
    # labels: none overlapping another, each by its point or joined to it by a leader line
    boxes = _label_boxes(fig, renderer)
    assert len(boxes) == len(pts) + 1
    names = sorted(boxes)
    for i, a in enumerate(names):
        for b in names[i + 1:]:
            assert not boxes[a].overlaps(boxes[b]), (a, b)
    ax = one(fig, "point:Illgraben R01").axes
    near = 60 * fig.dpi / 72
    for p in pts:
        box = boxes[f"label:{p.label}"]
        px, py = ax.transData.transform((p.easting_m, p.northing_m))
        gap = math.hypot(max(box.x0 - px, 0, px - box.x1), max(box.y0 - py, 0, py - box.y1))
        leader = by_gid(fig, f"leader:{p.label}")
        assert gap <= near or (leader and leader[0].get_visible()), (p.label, gap)
        assert ax.bbox.contains(*box.p0) and ax.bbox.contains(*box.p1), p.label
    # the scale key: inside the axes, at most a quarter of its width, 1-2-5 mm
    key = one(fig, "scale")
    lo, hi = _key_span(fig)
    assert 0 <= lo and hi <= 1 and hi - lo <= 0.25, (lo, hi)
    assert key.text.get_text() == f"{key.U:g} mm"
    assert key.U / 10 ** math.floor(math.log10(key.U)) in (1.0, 2.0, 5.0)
    assert key.Q.scale == pytest.approx(1 / m_per_mm)
    fig.savefig(tmp_path / "plan.png", dpi=80)


@pytest.mark.parametrize("figsize", [None, (8.27, 7.0), (6.0, 4.5)])
def test_plan_view_of_one_rover_keeps_the_scale_key_inside(figsize):
    p = P.PlanPoint("Solo", 2600000.0, 1200000.0, 30.0, -40.0, 1.5, 1.2, 0.0)
    fig = P.plan_view_figure([p], frame_label="x")
    _drawn(fig, figsize)
    lo, hi = _key_span(fig)
    assert 0 <= lo and hi <= 1 and hi - lo <= 0.25, (lo, hi)
    key = one(fig, "scale")
    assert key.text.get_text() == f"{key.U:g} mm"
    q = one(fig, "arrow:Solo")
    assert key.Q.scale == q.scale  # the key's arrow is at the plan's scale
    # a given scale is used as given (the key is moved inside as far as it goes)
    fig = P.plan_view_figure([p], frame_label="x", scale_mm=20)
    _drawn(fig, figsize)
    assert one(fig, "scale").U == 20


def test_plan_view_labels_take_the_point_number():
    p = P.PlanPoint("Solo", 10.0, 20.0, 3.0, 4.0, 1.0, 1.0, number="7")
    assert P.PlanPoint("Solo", 10.0, 20.0, 3.0, 4.0, 1.0, 1.0).number is None
    fig = P.plan_view_figure([p], frame_label="x")
    assert one(fig, "label:Solo").get_text() == "7 Solo"


# ----------------------------------------------------------------------------- time series

def _series():
    t = np.arange("2025-11-01", "2025-12-01", np.timedelta64(1, "h"),
                  dtype="datetime64[ns]")
    d = np.arange(t.size) / 24.0
    return [F.Series("air temperature", "°C", t, 5 + 6 * np.sin(2 * np.pi * d), "temp"),
            F.Series("crack A", "mm", t, 0.02 * d, "crackA"),
            F.Series("crack B", "mm", t[::24], 0.01 * d[::24], "crackB"),
            F.Series("rain", "mm/h", t, np.clip(np.sin(d / 3), 0, None), "rain")]


def test_timeseries_lines_stacked_by_unit_with_thresholds():
    series = _series()
    fig = F.timeseries_figure(series, stacked=True, tz=ZURICH,
                              thresholds={"mm": {"alarm": 0.8, "alert": 0.5}})
    assert len(data_axes(fig)) == 3  # °C, mm, mm/h
    for s in series:
        line = one(fig, f"series:{s.gid}")
        np.testing.assert_array_equal(np.asarray(line.get_xdata()), s.t)
        np.testing.assert_array_equal(line.get_ydata(), s.values)
        assert s.unit in line.axes.get_ylabel()
    assert one(fig, "series:crackA").axes is one(fig, "series:crackB").axes
    alert = one(fig, "threshold:mm:alert")
    assert np.allclose(alert.get_ydata(), 0.5) and alert.axes is one(fig, "series:crackA").axes
    assert np.allclose(one(fig, "threshold:mm:alarm").get_ydata(), 0.8)
    assert data_axes(fig)[-1].get_xlabel() == "time (Europe/Zurich)"
    # the GUI replaces a line's data after re-querying on zoom: the figure still renders
    line = one(fig, "series:temp")
    line.set_data(series[0].t[::10], series[0].values[::10])
    assert len(render(fig, "png")) > 10_000


def test_timeseries_on_one_axes_takes_two_units_at_most():
    series = _series()
    fig = F.timeseries_figure(series[:2])
    assert len(fig.axes) == 2  # the second unit on a right-hand axis
    left, right = one(fig, "series:temp").axes, one(fig, "series:crackA").axes
    assert left is not right and right.get_shared_x_axes().joined(left, right)
    assert left.get_ylabel() == "air temperature (°C)" and right.get_ylabel() == "crack A (mm)"
    assert len(F.timeseries_figure(series[1:3]).axes) == 1
    with pytest.raises(ValueError, match="use stacked=True"):
        F.timeseries_figure(series)
    with pytest.raises(ValueError, match="no series"):
        F.timeseries_figure([])
    bad = F.Series("x", "mm", series[0].t, series[0].values[:-1], "x")
    with pytest.raises(ValueError, match="times but"):
        F.timeseries_figure([bad])


# ----------------------------------------------------------------------------- rendering

def _all_figures(results, positions, name: str) -> dict[str, Figure]:
    r = results[name]
    pts = P.plan_points(results.values(), positions)
    return {
        "displacement": F.displacement_figure(r, tz=ZURICH),
        "displacement-lengths": F.displacement_figure(r, ("along", "across", "horizontal",
                                                          "3d"), tz=ZURICH),
        "trajectory": F.trajectory_figure(r, tz=ZURICH),
        "velocity": F.velocity_figure(r, tz=ZURICH),
        "inverse-velocity": F.inverse_velocity_figure(r, tz=ZURICH),
        "plan-view": P.plan_view_figure(pts, frame_label="WGS 84 / UTM zone 32N"),
        "timeseries": F.timeseries_figure(_series(), stacked=True, tz=ZURICH,
                                          thresholds={"mm": {"alert": 0.5}}),
    }


@pytest.mark.parametrize("name", ["step", "accelerating", "seasonal"])
def test_every_figure_renders_to_png_and_pdf(results, positions, name, tmp_path):
    review = os.environ.get("DEVMON_FIGURE_DIR")
    for kind, fig in _all_figures(results, positions, name).items():
        assert isinstance(fig, Figure)
        assert tuple(fig.get_size_inches()) in (F.DEFAULT_FIGSIZE, F.PLAN_FIGSIZE)
        png = render(fig, "png")
        assert png[:8] == b"\x89PNG\r\n\x1a\n" and len(png) > 30_000, (kind, len(png))
        width, height = int.from_bytes(png[16:20], "big"), int.from_bytes(png[20:24], "big")
        assert (width, height) == tuple(round(x * 100) for x in fig.get_size_inches())
        pdf = render(fig, "pdf")
        assert pdf[:5] == b"%PDF-" and len(pdf) > 10_000, (kind, len(pdf))
        path = tmp_path / f"{name}-{kind}.png"
        path.write_bytes(png)
        if review:
            Path(review).mkdir(parents=True, exist_ok=True)
            shutil.copy(path, Path(review) / path.name)


def test_the_same_input_gives_the_same_figure(results):
    r = results["accelerating"]
    for build in (lambda: F.displacement_figure(r, ("east", "3d"), tz=ZURICH),
                  lambda: F.inverse_velocity_figure(r), lambda: F.trajectory_figure(r)):
        assert render(build(), "png") == render(build(), "png")


def test_figures_need_neither_pyplot_nor_a_gui_backend():
    source = Path(F.__file__).read_text()
    imported = set()
    for node in ast.walk(ast.parse(source)):
        if isinstance(node, ast.Import):
            imported |= {a.name for a in node.names}
        elif isinstance(node, ast.ImportFrom) and node.module:
            imported.add(node.module)
    assert not {m for m in imported if m == "matplotlib.pyplot" or "backend" in m
                or m.startswith(("PySide", "PyQt"))}, imported
    # and at run time: building and saving a figure loads neither
    code = ("import sys, io, numpy as np; from analysis import figures as F; "
            "t = np.arange('2025-01-01', '2025-01-03', np.timedelta64(1, 'h'), "
            "dtype='datetime64[ns]'); "
            "fig = F.timeseries_figure([F.Series('a', 'mm', t, np.arange(t.size) * 1.0, 'a')]); "
            "fig.savefig(io.BytesIO(), format='png'); fig.savefig(io.BytesIO(), format='pdf'); "
            "bad = [m for m in sys.modules if m == 'matplotlib.pyplot' or 'qt' in m.lower()]; "
            "print(bad); sys.exit(1 if bad else 0)")
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True,
                         cwd=Path(F.__file__).parents[1], timeout=120)
    assert out.returncode == 0, out.stdout + out.stderr


def test_a_known_step_never_drives_the_velocity_of_the_weeks_after_it(mirror_path, rovers,
                                                                      tmp_path):
    """The user's case (demo world, 'Illgraben GNSS step 05', velocity alert 0.1 mm/day): a
    known antenna step of a few mm put the rover at alert by velocity from three days after
    the step to the end of the record, five weeks, peak 0.48 mm/day, while its 7-day velocity
    was 0.0 +- 0.15.  No window may span the step (the windows of the half week after it
    have no velocity: before the fix they spanned it, and this test failed there), and the
    rover stays below the level."""
    db = tmp_path / "mirror.duckdb"
    shutil.copyfile(mirror_path, db)
    sn = rovers["step"].serial_number
    with Mirror.open(db) as m:
        queries.set_alarm_levels(m, sn, "velocity", {"alert": 0.1})
        (r,) = analyze_devices(m, [sn], AnalysisOptions())
    (step,) = r.known_steps
    assert [h for h in r.alarm.history if h.key == "velocity"] == [], r.alarm.history
    est = r.estimates
    half_week = (est.t >= step) & (est.t < step + np.timedelta64(84, "h"))
    assert half_week.any() and not np.isfinite(est.velocity_m_per_day["up"][half_week]).any()


# ----------------------------------------------------------------------------- H and V levels

HV_LEVELS_MM = {"alert": 5.0, "alarm": 15.0, "emergency": 30.0}
HV_LEVELS_MM_PER_DAY = {"alert": 0.3, "alarm": 1.0, "emergency": 3.0}


@pytest.fixture(scope="module")
def accelerating_hv(mirror_path, rovers, tmp_path_factory):
    """The accelerating rover with horizontal and vertical levels only (the usual practice:
    no 3D ladder), displacement and velocity, set through the store."""
    db = tmp_path_factory.mktemp("hv") / "mirror.duckdb"
    shutil.copyfile(mirror_path, db)
    sn = rovers["accelerating"].serial_number
    with Mirror.open(db) as m:
        for key in ("displacement:horizontal", "displacement:vertical"):
            queries.set_alarm_levels(m, sn, key, HV_LEVELS_MM)
        for key in ("velocity:horizontal", "velocity:vertical"):
            queries.set_alarm_levels(m, sn, key, HV_LEVELS_MM_PER_DAY)
        (r,) = analyze_devices(m, [sn], AnalysisOptions())
    assert r.alarm is not None and "displacement" not in r.alarm.keys, r.alarm
    return r


def test_with_only_h_and_v_levels_the_report_panels_gain_the_horizontal_one(accelerating_hv):
    """The report draws east, north, up and 3D; a horizontal ladder adds the horizontal
    panel, which carries it (the point's alarm is by its horizontal displacement)."""
    panels = F.panels_with_levels(accelerating_hv, ("east", "north", "up", "3d"))
    assert panels == ("east", "north", "up", "horizontal", "3d")
    fig = F.displacement_figure(accelerating_hv, panels)
    ax_h = one(fig, "data:horizontal").axes
    for name, value in HV_LEVELS_MM.items():
        on_h = [ln for ln in by_gid(fig, f"threshold:{name}") if ln.axes is ax_h]
        assert len(on_h) == 1 and np.allclose(on_h[0].get_ydata(), value), name


def test_the_up_panel_draws_the_vertical_ladder_both_ways(accelerating_hv):
    fig = F.displacement_figure(accelerating_hv, ("up", "3d"))
    ax_up = one(fig, "data:up").axes
    for name, value in HV_LEVELS_MM.items():
        lines = by_gid(fig, f"threshold:{name}")
        assert {ln.axes for ln in lines} == {ax_up}, name  # no 3D ladder: the 3D panel bare
        assert sorted(float(ln.get_ydata()[0]) for ln in lines) == [-value, value]
    labels = [t.get_text() for t in fig.legends[0].get_texts()]
    assert any(lab.startswith("vertical alert") for lab in labels), labels


def test_the_horizontal_panel_never_draws_the_3d_ladder(accelerating_with_levels):
    fig = F.displacement_figure(accelerating_with_levels, ("horizontal", "3d"))
    ax_3d = one(fig, "data:3d").axes
    for name in LEVELS_MM:
        assert {ln.axes for ln in by_gid(fig, f"threshold:{name}")} == {ax_3d}, name


def test_velocity_levels_of_a_component_get_a_panel_of_that_component(accelerating_hv):
    """The alarm judged the horizontal and vertical velocities: the figure shows each as the
    alarm evaluated it, with its ladder (the vertical one as a size, up or down)."""
    fig = F.velocity_figure(accelerating_hv)
    for component in ("horizontal", "vertical"):
        key = f"velocity:{component}"
        judged = accelerating_hv.alarm.keys[key]
        line = one(fig, f"data:{key}")
        assert np.allclose(line.get_ydata(), judged.value, equal_nan=True)
        for name, value in HV_LEVELS_MM_PER_DAY.items():
            on_panel = [ln for ln in by_gid(fig, f"threshold:{name}") if ln.axes is line.axes]
            assert len(on_panel) == 1 and np.allclose(on_panel[0].get_ydata(), value)


def test_the_reports_displacement_page_draws_the_horizontal_ladder(accelerating_hv, tmp_path):
    """The report's displacement page, rendered to PDF and read back: with only H and V
    levels the horizontal panel and its ladder are on it, and the up panel's vertical one."""
    from devmon_sync.report import pages
    from devmon_sync.report.model import DeviceEntry
    from devmon_sync.store.report_queries import ScopeDevice
    from support import pdf_text

    r = accelerating_hv
    entry = DeviceEntry(ScopeDevice(r.serial_number, r.serial_number, None, None, "ROVER"), r)
    fig, _ = pages.displacement_page(entry)
    fig.savefig(tmp_path / "page.pdf", format="pdf")
    text = " ".join(pdf_text(tmp_path / "page.pdf").split())
    assert "horizontal (mm)" in text
    for name, value in HV_LEVELS_MM.items():
        assert f"horizontal {name} ≥ {value:g} mm" in text, name
        assert f"vertical {name} ≥ {value:g} mm either way" in text, name


def test_the_report_tables_give_each_direction_its_own_light(accelerating_hv):
    """Summary and register: one light per direction whose levels are set (H and V here,
    no 3D), each the level of that direction's worst key now, its cell in the level's
    colour; the row keeps the overall level's tint."""
    from analysis import alarms
    from devmon_sync.report import layout, register, tables
    from devmon_sync.report.model import DeviceEntry
    from devmon_sync.store.report_queries import ScopeDevice

    r = accelerating_hv
    entry = DeviceEntry(ScopeDevice(r.serial_number, r.serial_number, None, None, "ROVER"), r)
    assert tables.light_directions([entry]) == ["H", "V"]
    row = tables.summary_row(entry, ["H", "V"])
    change = register.change_row(entry, ["H", "V"])
    for direction, components in (("H", ("horizontal",)), ("V", ("vertical",))):
        keys = [k for k in r.alarm.keys.values() if k.component in components]
        worst = max(keys, key=lambda k: k.rank)
        expected = worst.current_level or "below"
        for cells in (row.cells, change.cells):
            assert cells[f"light:{direction}"].split("\n")[0] == expected, direction
        if worst.current_level:
            assert row.lights[f"light:{direction}"] == (worst.current_level, worst.rank)
    assert alarms.direction_lights(r.alarm)["3D"] is None and "light:3D" not in row.cells
    headers = [c.header for c in tables.summary_columns([entry])]
    assert "H\nlevel" in headers and "V\nlevel" in headers and "Alarm\nlevel" not in headers
    fig = Figure(figsize=(8.27, 11.69))
    layout.Table(tables.summary_columns([entry]), [row], size=7.0).draw(fig, 0.6, 1.0, 7.0)
    lit = {p.get_gid() for p in fig.findobj(lambda a: str(a.get_gid()).startswith("light:"))}
    assert lit == {f"light:{r.serial_number}:{d}:{row.lights[f'light:{d}'][0]}"
                   for d in ("H", "V") if f"light:{d}" in row.lights}


def test_a_months_long_time_axis_names_its_year_not_its_last_month():
    """Month ticks (Sep, Oct, Nov, Dec) with the offset "2026-Dec" floating at the right
    read as "this is December" (issue 30.12): the offset of month ticks is the year."""
    from analysis.figure_style import format_time_axis, new_figure

    fig = new_figure((8, 3))
    ax = fig.subplots()
    t = np.arange(np.datetime64("2026-08-29"), np.datetime64("2026-11-27"),
                  np.timedelta64(1, "D"))
    ax.plot(t, np.arange(t.size))
    format_time_axis(ax)
    render(fig, "png")
    assert ax.xaxis.get_offset_text().get_text() == "2026"
    labels = [lab.get_text() for lab in ax.get_xticklabels() if lab.get_text()]
    assert all(any(m in lab for m in ("Sep", "Oct", "Nov")) for lab in labels), labels

"""One rover's whole analysis, from its epochs to the numbers an engineer reports.

The command line, the GUI and the reports all call ``analyze_rover`` so that they show the
same numbers: quality filter, robust outlier rejection, displacement from the chosen reference
in the chosen frame, gaps and steps (known events and detected ones), velocity per component
by the chosen estimator with its uncertainty, acceleration, the recent velocity, the
inverse-velocity forecast where the data support one, and the alarm levels reached.
Pure numpy in, frozen dataclasses out.
"""

from __future__ import annotations

from dataclasses import dataclass, field, replace

import numpy as np

from analysis import alarms, cleaning, forecast_linear, trends
from analysis.displacement import Displacement, Reference, displacement_enu, largest_disagreement
from analysis.inverse_velocity import inverse_velocity
from analysis.projections import (crs_from_projection, grid_factors, parse_crs, project,
                                  require_projected)
from analysis.timebase import as_datetime64, days_since

COMPONENTS = ("east", "north", "up")
# "current" velocity: the last week, long enough to beat hourly noise (the alarm rule's)
RECENT_WINDOW_DAYS = alarms.AlarmRule().velocity_window_days
END_WINDOW_DAYS = 1.0  # total displacement: a local linear fit over the last day, at its end
# Inverse velocity from least-squares velocities over 4-day windows: with hourly epochs and
# millimetre noise, 2-day windows left the reference server's accelerating slope too noisy
# to fit (R² 0.46) while 4 days found its failure within a day (R² 0.85).
INVERSE_VELOCITY_SMOOTHING_DAYS = 4.0
STEP_FIT_DAYS = 3.0  # the offset of a known step is fitted over this many days either side
MIN_EPOCHS = 10
SHORT_SPAN_DAYS = 365.0  # below this a trend cannot be told from an annual signal
SEASONAL_MIN_SPAN_YR = 2.0  # least squares fits annual + semiannual terms from two years on


@dataclass(frozen=True)
class Frame:
    """Where displacements are expressed: ``crs`` None means local east-north-up."""

    label: str
    crs: object | None = None
    height_type: str = "ellipsoidal"
    projection_id: int | None = None

    @classmethod
    def resolve(cls, text: str | None, projections: list[dict] | None = None) -> "Frame":
        """``enu``, a projection id among ``projections`` (the service's projectionMetadata),
        an EPSG code or a PROJ string; a ValueError naming the choices otherwise."""
        text = (text or "enu").strip()
        if text.lower() == "enu":
            return cls("local ENU")
        projections = projections or []
        if text.isdigit() and len(text) < 4:
            for entry in projections:
                if str(entry.get("id")) == text:
                    return cls(entry.get("label") or f"projection {text}",
                               crs_from_projection(entry), entry.get("heightType") or
                               "ellipsoidal", int(entry["id"]))
            known = ", ".join(f"{p.get('id')} ({p.get('label')})" for p in projections) or "none"
            raise ValueError(f"no projection {text} for this device (its site has: {known}); "
                             f"use one of those ids, an EPSG code such as EPSG:32632, or enu")
        crs = require_projected(parse_crs(text))
        return cls(crs.name, crs, "ellipsoidal")


@dataclass(frozen=True)
class AnalysisOptions:
    """The user's choices; the defaults are what a careful engineer would pick."""

    reference: Reference = field(default_factory=Reference)
    method: str = "midas"
    frame: str = "enu"
    quality: cleaning.QualityThresholds = field(default_factory=cleaning.QualityThresholds)
    detect_steps: bool = True
    alarm_rule: alarms.AlarmRule = field(default_factory=alarms.AlarmRule)

    @classmethod
    def build(cls, *, reference: str | None = None, method: str = "midas",
              frame: str | None = "enu") -> "AnalysisOptions":
        """Options from the user's words, each checked with a message saying what to write."""
        if method not in ("midas", "ols"):
            raise ValueError(f"unknown method {method!r}: use midas or ols")
        if frame and frame.strip().lower() != "enu" and not frame.strip().isdigit():
            require_projected(parse_crs(frame))  # fail early, before any data is read
        return cls(Reference.parse(reference), method, (frame or "enu").strip())


@dataclass(frozen=True)
class Velocity:
    """A velocity (m/yr) with its 1-sigma, from the trend of one displacement component."""

    m_per_yr: float
    sigma_m_per_yr: float

    @property
    def mm_per_day(self) -> float:
        return self.m_per_yr * 1000.0 / 365.25

    @property
    def sigma_mm_per_day(self) -> float:
        return self.sigma_m_per_yr * 1000.0 / 365.25


@dataclass(frozen=True)
class RoverAnalysis:
    """Everything computed for one rover over one period."""

    serial_number: str
    display_name: str
    options: AnalysisOptions
    frame: Frame
    t_all: np.ndarray
    kept: np.ndarray  # epochs used: passed the quality filter and not outliers
    quality: object
    outliers: np.ndarray
    displacement: Displacement  # of the kept epochs
    gaps: list
    completeness: object | None
    known_steps: np.ndarray
    detected_steps: list
    trends: dict  # component name -> trends.TrendResult
    velocity: dict  # east/north/up/along/across/horizontal/3d -> Velocity
    acceleration: object | None
    recent_velocity: dict  # same keys as velocity, over the last RECENT_WINDOW_DAYS
    estimates: object | None  # alarms.Estimates: trailing-window values at every epoch
    sliding: object | None
    inverse_velocity: object | None
    forecast: object | None
    end_displacement_m: dict  # component -> metres at the end of the period
    azimuth_deg: float | None
    alarm: object | None  # alarms.PointAlarms
    step_corrections_m: list  # (time, d_east, d_north, d_up) removed at each known step
    grid: object | None  # projections.GridFactors at the mean position, in a projected frame
    consistency_m: dict  # check against the service's own values -> largest disagreement, m
    notes: list[str]
    linear_forecast: object | None = None  # forecast_linear.LinearForecast, beside ``forecast``

    def summary(self) -> dict:
        """The numbers of a summary row (CLI, JSON, reports), in mm, mm/day and mm/yr."""
        t = self.displacement.t
        out = {
            "serial_number": self.serial_number, "display_name": self.display_name,
            "reference": self.options.reference.describe(), "method": self.options.method,
            "first_epoch": _iso(t[0]) if t.size else None,
            "last_epoch": _iso(t[-1]) if t.size else None,
            "epochs_received": int(self.t_all.size), "epochs_used": int(self.kept.sum()),
            "epochs_expected": getattr(self.completeness, "expected", None),
            "completeness": getattr(self.completeness, "ratio", None),
            "rejected_by_quality": int((~self.quality.keep).sum()),
            "outliers": int(self.outliers.sum()), "gaps": len(self.gaps),
            "known_steps": [_iso(s) for s in self.known_steps],
            "known_step_corrections_mm": [
                {"time": _iso(t), "east": e * 1e3, "north": n * 1e3, "up": u * 1e3}
                for t, e, n, u in self.step_corrections_m],
            "detected_steps": [_iso(s.time) for s in self.detected_steps],
            "recent_velocity_mm_per_day": {k: [v.mm_per_day, v.sigma_mm_per_day]
                                           for k, v in self.recent_velocity.items()},
            "acceleration_mm_per_day2": (
                [self.acceleration.acceleration_mm_per_day2, self.acceleration.sigma_mm_per_day2]
                if self.acceleration else None),
            "alarm_level": getattr(self.alarm, "overall", None),
            "alarm_by": getattr(self.alarm, "overall_quantity", None),
            "alarm_rule": self.options.alarm_rule.describe(),
            "alarm_history": [_history_summary(h) for h in getattr(self.alarm, "history", ())],
            "forecast": _forecast_summary(self.forecast),
            "linear_forecast": _linear_summary(self.linear_forecast, self.forecast),
            "notes": list(self.notes),
        }
        out.update(self.frame_summary())
        return out

    def frame_summary(self) -> dict:
        """The numbers that depend on the frame (displacements, velocities, grid factors, the
        check against the service): what ``devmon analyze`` shows side by side when asked
        for several frames."""
        return {
            "frame": self.frame.label, "height_type": self.frame.height_type,
            "displacement_mm": {k: v * 1000.0 for k, v in self.end_displacement_m.items()},
            "displacement_sigma_mm": self._end_sigma_mm(),
            "reference_sigma_mm": ({k: v * 1000.0 for k, v in
                                    self.estimates.reference_sigma_m.items()}
                                   if self.estimates is not None else {}),
            "velocity_mm_per_day": {k: [v.mm_per_day, v.sigma_mm_per_day]
                                    for k, v in self.velocity.items()},
            "velocity_mm_per_yr": {k: [v.m_per_yr * 1000.0, v.sigma_m_per_yr * 1000.0]
                                   for k, v in self.velocity.items()},
            "consistency_mm": {k: v * 1000.0 for k, v in self.consistency_m.items()},
            "grid": None if self.grid is None else {
                "scale_factor": float(self.grid.scale_factor),
                "convergence_deg": float(self.grid.convergence_deg),
                "combined_factor": float(self.grid.combined_factor)},
        }


    def _end_sigma_mm(self) -> dict:
        """The 1-sigma of each end displacement (the last day's line and the reference,
        with their measured noise inflation), mm; lengths by ``alarms.component_series``."""
        est = self.estimates
        if est is None or not est.t.size:
            return {}
        out = {k: float(v[-1]) * 1000.0 for k, v in est.displacement_sigma_m.items()}
        for name in ("horizontal", "3d"):
            out[name] = float(alarms.component_series(est, "displacement", name)[1][-1])
        return {k: v for k, v in out.items() if np.isfinite(v)}  # unmeasured noise: none


def _history_summary(h) -> dict:
    return {"quantity": h.key, "level": h.level, "first_exceeded": _iso(h.first_exceeded),
            "last_exceeded": _iso(h.last_exceeded), "exceeded_at_end": h.exceeded_at_end,
            "episodes": h.episodes, "peak": h.peak_value, "unit": h.unit}


def plus_minus(pair, digits: int, signed: bool = True, sep: str = " ") -> str:
    """A ``[value, sigma]`` pair of ``RoverAnalysis.summary()`` as text, ``+1.234 ± 0.012``
    (``-`` when missing): one format for the CLI table, the GUI and the reports."""
    if not pair:
        return "-"
    value, sigma = pair
    return f"{value:{'+' if signed else ''}.{digits}f}{sep}± {sigma:.{digits}f}"


def _iso(t) -> str:
    return str(np.datetime_as_string(np.datetime64(t, "s"), unit="s")) + "Z"


def _linear_summary(linear, voight) -> dict | None:
    """The linear inverse-velocity forecast's state, its statement for a user, its date,
    interval or "within N days" where it gives one, and whether it agrees with the Voight
    fit (``forecast_linear.compare``)."""
    if linear is None:
        return None
    agreement = forecast_linear.compare(linear, voight)
    return {"state": linear.state, "statement": linear.statement,
            "failure_time": _iso(linear.failure_time) if linear.failure_time is not None
            else None,
            "interval": [_iso(x) for x in linear.interval] if linear.interval else None,
            "within_days": linear.within_days if np.isfinite(linear.within_days) else None,
            "onset": _iso(linear.onset) if linear.onset is not None else None,
            "n_points": linear.n_points, "confidence": linear.confidence,
            "agreement": {"agree": agreement.agree, "text": agreement.text}}


def _forecast_summary(forecast) -> dict | None:
    if forecast is None:
        return None
    if not forecast.supported:
        return {"supported": False, "reason": forecast.reason}
    alpha = forecast.alpha
    return {"supported": True, "failure_time": _iso(forecast.failure_time),
            "interval": [_iso(x) for x in forecast.interval], "r2": forecast.r2,
            "confidence": forecast.confidence,
            "alpha": float(alpha) if np.isfinite(alpha) else None}


# ----------------------------------------------------------------------------- the analysis

def analyze_rover(epochs: dict[str, np.ndarray], *, serial_number: str, display_name: str = "",
                  options: AnalysisOptions = AnalysisOptions(), projections: list[dict] = (),
                  events: list[dict] = (), azimuth_deg: float | None = None,
                  sampling_period_s: float | None = None, period: tuple | None = None,
                  alarm_levels: dict | None = None,
                  service_projected: dict[str, np.ndarray] | None = None) -> RoverAnalysis:
    """Analyse one rover's epochs (the columns of ``store.queries.gnss_epochs``: ``ts``,
    ``lat``, ``lon`` in degrees, ``eh``/``oh`` and ``sde``/``sdn``/``sdu`` in metres, ``q``,
    ``ns``, ``ar``, ``base_station_id``, the service's ``de``/``dn``/``du`` in metres).

    ``period`` (start, end) is what completeness is counted against (None, or a None end:
    the epochs' span); ``alarm_levels`` is {"displacement": {name: mm}, "velocity": {name: mm/day}};
    ``service_projected`` the service's ``e``/``n`` of the same epochs in the chosen
    projection, for the consistency check.  A ValueError says why when the epochs cannot
    support an analysis (too few, none passing the quality filter)."""
    frame = Frame.resolve(options.frame, list(projections))
    t_all = as_datetime64(epochs["ts"])
    if t_all.size < MIN_EPOCHS:
        raise ValueError(f"{serial_number}: {t_all.size} epochs in the period; at least "
                         f"{MIN_EPOCHS} are needed for an analysis: widen --from/--to")
    quality = cleaning.quality_mask(epochs.get("sde"), epochs.get("sdn"), epochs.get("sdu"),
                                    epochs.get("q"), epochs.get("ns"), epochs.get("ar"),
                                    options.quality)
    if quality.keep.sum() < MIN_EPOCHS:
        raise ValueError(f"{serial_number}: only {int(quality.keep.sum())} of {t_all.size} "
                         f"epochs pass the quality filter ({_reasons(quality)}); too few to "
                         f"analyse")
    outliers = _outliers(t_all, epochs, quality.keep)
    kept = quality.keep & ~outliers
    disp, grid_en = _displacement(t_all, epochs, kept, frame, options.reference)
    notes = []
    known = _known_steps(t_all, epochs, events)
    # checked against the service before known steps are removed (its values keep them)
    consistency = _consistency(epochs, kept, disp, grid_en, service_projected)
    disp, corrections = _correct_known_steps(disp, known, notes)
    detected = _detected_steps(disp, known) if options.detect_steps else []
    steps = np.sort(np.concatenate([known, np.array([s.time for s in detected],
                                                    dtype="datetime64[ns]")]))
    grid = _grid(epochs, kept, frame)
    series = _components(disp, azimuth_deg, grid)
    fits = _trends(disp.t, series, steps, options.method, notes)
    velocity = _velocities(fits)
    _short_span_note(disp.t, notes)
    est = alarms.estimate(disp.t, series, disp.reference.mask(disp.t), options.alarm_rule,
                         steps=steps)
    _widened_windows_note(est, options.alarm_rule, notes)
    recent = _recent_velocities(est)
    main = _main_motion(disp)
    accel = _safe(lambda: trends.acceleration(disp.t, main), notes, "acceleration")
    sliding = _safe(lambda: trends.sliding_velocity(disp.t, main, _sliding_window(disp.t)),
                    notes, "sliding velocity")
    inv = _safe(lambda: inverse_velocity(
        disp.t, main, smoothing_days=INVERSE_VELOCITY_SMOOTHING_DAYS), notes, "inverse velocity")
    forecast = _safe(inv.forecast, notes, "failure forecast") if inv is not None else None
    linear = _safe(lambda: _linear_forecast(disp, inv), notes, "linear forecast") \
        if inv is not None else None
    end = _end_displacement(disp, series)
    start, stop = period or (None, None)
    period_s = sampling_period_s or cleaning.median_period_s(t_all)
    start = t_all[0] if start is None else as_datetime64(start)
    # completeness counts [start, stop): by default the period ends one sampling period
    # after the last epoch, so that epoch counts
    stop = (t_all[-1] + np.timedelta64(int(period_s * 1e9), "ns") if stop is None
            else as_datetime64(stop))
    complete = cleaning.completeness(t_all, start, stop, period_s)
    alarm = _safe(lambda: alarms.evaluate(est, alarm_levels or {}, options.alarm_rule),
                  notes, "alarm levels")
    return RoverAnalysis(serial_number, display_name or serial_number, options, frame, t_all,
                         kept, quality, outliers, disp, cleaning.find_gaps(
                             t_all, expected_period_s=sampling_period_s), complete, known,
                         detected, fits, velocity, accel, recent, est, sliding, inv, forecast, end,
                         azimuth_deg, alarm, corrections, grid,
                         consistency, notes, linear_forecast=linear)


def _widened_windows_note(est: alarms.Estimates, rule: alarms.AlarmRule, notes: list[str]
                          ) -> None:
    """Say so when the readings are too sparse for the rule's windows, which were widened to
    hold enough readings for a line (``alarms.effective_windows``)."""
    wd, wv = est.windows_days
    if (wd, wv) != (rule.displacement_window_days, rule.velocity_window_days):
        notes.append(f"readings too sparse for the alarm windows of "
                     f"{rule.displacement_window_days:g} and {rule.velocity_window_days:g} "
                     f"days: displacement judged over the last {wd:g} days and velocity over "
                     f"the last {wv:g} days (at least "
                     f"{alarms.DISPLACEMENT_MIN_EPOCHS} and {alarms.VELOCITY_MIN_EPOCHS} "
                     f"readings)")


def _reasons(quality) -> str:
    return ", ".join(f"{n} {reason}" for reason, n in quality.rejected.items() if n) or "none"


def _safe(compute, notes: list[str], what: str):
    """``compute()``, or None with a note when the data cannot support it (a ValueError)."""
    try:
        return compute()
    except ValueError as err:
        notes.append(f"{what}: {err}")
        return None


def _outliers(t: np.ndarray, epochs: dict, keep: np.ndarray) -> np.ndarray:
    """Robust outliers among the epochs that passed the quality filter (MAD of each of east,
    north and up about its running median, in a frame at the first good epoch)."""
    lat, lon, h = (np.asarray(epochs[k], np.float64)[keep] for k in ("lat", "lon", "eh"))
    d = displacement_enu(t[keep], lat, lon, h)
    flagged = np.zeros(t.shape, bool)
    flagged[np.flatnonzero(keep)] = cleaning.mad_outliers_enu(t[keep], d.east_m, d.north_m,
                                                              d.up_m)
    return flagged


def _displacement(t: np.ndarray, epochs: dict, kept: np.ndarray, frame: Frame,
                  reference: Reference) -> tuple[Displacement, tuple | None]:
    """Displacement of the kept epochs in the frame, and in a projected frame also their
    absolute (easting, northing), which the consistency check compares with the service's."""
    lat, lon = (np.asarray(epochs[k], np.float64)[kept] for k in ("lat", "lon"))
    height_key = "oh" if frame.height_type == "orthometric" else "eh"
    if frame.crs is None:
        return displacement_enu(t[kept], lat, lon, np.asarray(epochs["eh"], np.float64)[kept],
                                reference), None
    easting, northing = project(lat, lon, frame.crs)
    ref = reference.mask(t[kept])
    h = np.asarray(epochs[height_key], np.float64)[kept]
    e, n, u = (x - reference.centre(x, ref) for x in (easting, northing, h))
    return (Displacement(t[kept], e, n, u, frame.label, frame.height_type, reference),
            (easting, northing))


def _known_steps(t: np.ndarray, epochs: dict, events) -> np.ndarray:
    """Announced events (antenna change, base-station switch) and changes of the base
    station the solution used, inside the epochs' span."""
    times = [cleaning.steps_from_events(events)]
    if epochs.get("base_station_id") is not None:
        times.append(cleaning.steps_from_base_station(t, epochs["base_station_id"]))
    steps = np.unique(np.concatenate(times).astype("datetime64[ns]"))
    return steps[(steps > t[0]) & (steps <= t[-1])]


def _correct_known_steps(disp: Displacement, known: np.ndarray, notes: list[str]
                         ) -> tuple[Displacement, list]:
    """The displacement with the offset of each known step removed: an antenna change or a
    base-station switch moves the solution, not the ground, and must not count as motion
    (nor trip an alarm).  Each offset is fitted locally (offset + rate + step over the
    ``STEP_FIT_DAYS`` either side), so curvature or seasons elsewhere do not bias it.
    Detected steps are left in: an unexplained jump may be real motion (a slip)."""
    comps = [disp.east_m.copy(), disp.north_m.copy(), disp.up_m.copy()]
    corrections = []
    half = np.timedelta64(int(STEP_FIT_DAYS * 86400), "s")
    for step in known:
        near = np.abs(disp.t - step) <= half
        after = disp.t >= step
        if (near & after).sum() < MIN_EPOCHS or (near & ~after).sum() < MIN_EPOCHS:
            notes.append(f"known step at {_iso(step)}: too few epochs around it to measure "
                         f"its offset; left in the displacement")
            continue
        offsets = []
        for c in comps:
            fit = trends.ols_velocity(disp.t[near], c[near], steps=[step])
            offsets.append(float(fit.step_offsets_m[0]) if fit.step_offsets_m.size else 0.0)
        for c, offset in zip(comps, offsets):
            c[after] -= offset
        corrections.append((step, *offsets))
    if not corrections:
        return disp, corrections
    ref = disp.reference.mask(disp.t)
    e, n, u = (c - disp.reference.centre(c, ref) for c in comps)
    return replace(disp, east_m=e, north_m=n, up_m=u), corrections


def _detected_steps(disp: Displacement, known: np.ndarray) -> list:
    """Steps the detector finds in east, north or up that no known event explains (one per
    day: the same step seen in two components is one step)."""
    found = cleaning.detect_steps_enu(disp.t, disp.east_m, disp.north_m, disp.up_m)
    found.sort(key=lambda s: s.time)
    day = np.timedelta64(1, "D")
    out: list = []
    for step in found:
        near_known = known.size and np.min(np.abs(known - step.time)) <= day
        if not near_known and not (out and step.time - out[-1].time <= day):
            out.append(step)
    return out


def _components(disp: Displacement, azimuth_deg: float | None, grid) -> dict[str, np.ndarray]:
    """East, north, up, and along/across the device's azimuth (a true azimuth: in a grid it
    becomes the grid bearing azimuth - convergence)."""
    series = {"east": disp.east_m, "north": disp.north_m, "up": disp.up_m}
    if azimuth_deg is not None:
        bearing = azimuth_deg - (float(grid.convergence_deg) if grid is not None else 0.0)
        series["along"], series["across"] = disp.along_across(bearing)
    return series


def _trends(t: np.ndarray, series: dict[str, np.ndarray], steps: np.ndarray, method: str,
            notes: list[str]) -> dict:
    """Each component's trend: MIDAS (insensitive to seasons by its pairing; the components
    share its pairs), or least squares with annual and semiannual terms once the span can
    separate them from the rate.  None, with a note, where the data cannot give one."""
    if method == "midas":
        fits = trends.midas_velocities(t, series, steps=steps)
        for name, fit in fits.items():
            if isinstance(fit, ValueError):
                notes.append(f"{name} velocity: {fit}")
                fits[name] = None
        return fits
    seasonal = days_since(t[-1:], t[0])[0] / 365.25 >= SEASONAL_MIN_SPAN_YR
    return {name: _safe(lambda: trends.ols_velocity(t, x, steps=steps, annual=seasonal,
                                                    semiannual=seasonal), notes,
                        f"{name} velocity") for name, x in series.items()}


def _short_span_note(t: np.ndarray, notes: list[str]) -> None:
    """A trend over less than a year folds any seasonal (thermal, hydrological) motion into
    the rate; neither estimator can separate them, so the table says so."""
    span_days = float(days_since(t[-1:], t[0])[0])
    if span_days < SHORT_SPAN_DAYS:
        notes.append(f"the period spans {span_days:.0f} days, less than a year: seasonal motion "
                     f"cannot be told from the trend and may be part of the velocity; compare "
                     f"the last-7-days velocity, or analyse a longer period")


def _magnitude(parts: list[Velocity]) -> Velocity:
    """Length of a velocity vector, corrected for the noise of its components (a plain
    length of noisy rates reads a stable point as moving: ``trends.vector_rate``)."""
    return Velocity(*trends.vector_rate([p.m_per_yr for p in parts],
                                        [p.sigma_m_per_yr for p in parts]))


def _velocities(fits: dict) -> dict[str, Velocity]:
    return _with_lengths({k: Velocity(f.velocity_m_per_yr, f.sigma_m_per_yr)
                          for k, f in fits.items() if f})


def _with_lengths(out: dict[str, Velocity]) -> dict[str, Velocity]:
    """The components' velocities and, from them, the horizontal and 3D lengths."""
    if "east" in out and "north" in out:
        out["horizontal"] = _magnitude([out["east"], out["north"]])
        if "up" in out:
            out["3d"] = _magnitude([out["east"], out["north"], out["up"]])
    return out


def _recent_velocities(est: alarms.Estimates) -> dict[str, Velocity]:
    """Each component's velocity over the last ``velocity_window_days`` (7) of cleaned
    epochs, with its sigma, the point's own noise at that scale (``alarms``): the "current"
    velocity of an early-warning table, the very value its alarms evaluate.  None of a
    component whose noise is not measured yet (a young record): a velocity without an
    honest uncertainty is not shown (the alarm's words say why)."""
    if not est.t.size:
        return {}
    sigma = est.velocity_sigma_m_per_day
    fits = {name: Velocity(float(v[-1]) * 365.25, float(sigma[name][-1]) * 365.25)
            for name, v in est.velocity_m_per_day.items()
            if np.isfinite(v[-1]) and np.isfinite(sigma[name][-1])}
    return _with_lengths(fits)


def _end_displacement(disp: Displacement, series: dict[str, np.ndarray]) -> dict[str, float]:
    """Displacement at the last epoch from a local linear fit over the last
    ``END_WINDOW_DAYS`` (one epoch carries millimetres of noise; a day's mean would lag a
    fast-moving point by half a day of motion)."""
    days = days_since(disp.t, disp.t[-1])
    last = days >= -END_WINDOW_DAYS
    out = {}
    for name, x in series.items():
        use = last & np.isfinite(x)
        if use.sum() >= 3 and np.ptp(days[use]) > 0:
            out[name] = float(np.polyval(np.polyfit(days[use], x[use], 1), 0.0))
        else:
            out[name] = float(x[-1])
    out["horizontal"] = float(np.hypot(out["east"], out["north"]))
    out["3d"] = float(np.sqrt(out["east"] ** 2 + out["north"] ** 2 + out["up"] ** 2))
    return out


def motion_direction(disp: Displacement) -> np.ndarray | None:
    """Unit vector (east, north, up) of the direction the point has moved in: from the
    reference to the mean of the last day; None when that mean is the reference or not
    finite.  The one home of the direction the velocity chart, the acceleration and the
    inverse velocity follow (``_main_motion``), so the chart's current-velocity line can
    follow it too."""
    last = days_since(disp.t, disp.t[-1]) >= -END_WINDOW_DAYS
    vec = np.array([np.nanmean(c[last]) for c in (disp.east_m, disp.north_m, disp.up_m)])
    norm = float(np.linalg.norm(vec))
    return None if norm == 0 or not np.isfinite(norm) else vec / norm


def _main_motion(disp: Displacement) -> np.ndarray:
    """Displacement along the direction the point has moved in (``motion_direction``): one
    signed series for acceleration and inverse velocity (the 3D length when the point is
    back at its reference)."""
    unit = motion_direction(disp)
    if unit is None:
        return disp.length_3d_m
    return disp.east_m * unit[0] + disp.north_m * unit[1] + disp.up_m * unit[2]


def _linear_forecast(disp: Displacement, inv) -> forecast_linear.LinearForecast:
    """The classic linear inverse-velocity forecast through the figure's values ``inv``;
    whether the slope accelerates is tested along its last 30 days' motion
    (``forecast_linear.acceleration_along_motion``: along the last day's direction a stable
    point's noise reads as acceleration)."""
    acc = forecast_linear.acceleration_along_motion(disp.t, disp.east_m, disp.north_m,
                                                    disp.up_m)
    return forecast_linear.linear_forecast(inv, acceleration=acc)


def _sliding_window(t: np.ndarray) -> float:
    """Sliding-velocity window: a week, or a tenth of a shorter span."""
    return float(min(RECENT_WINDOW_DAYS, max(days_since(t[-1:], t[0])[0] / 10.0, 1.0)))


def _grid(epochs: dict, kept: np.ndarray, frame: Frame):
    """Scale factor, meridian convergence and combined (scale x elevation) factor at the
    rover's mean position, so grid distances can be told from ground distances."""
    if frame.crs is None:
        return None
    lat, lon, h = (float(np.nanmean(np.asarray(epochs[k], np.float64)[kept]))
                   for k in ("lat", "lon", "eh"))
    return grid_factors(lat, lon, frame.crs, h_m=h)


def _consistency(epochs: dict, kept: np.ndarray, disp: Displacement, grid_en: tuple | None,
                 service_projected: dict | None) -> dict[str, float]:
    """Largest disagreement (m) with the service's own displacements (ENU: dE, dN, dU, whose
    reference is the service's) or projected coordinates (absolute e, n)."""
    if grid_en is None:
        return {name: largest_disagreement(ours, np.asarray(epochs[key], np.float64)[kept])
                for name, ours, key in (("east", disp.east_m, "de"), ("north", disp.north_m, "dn"),
                                        ("up", disp.up_m, "du")) if epochs.get(key) is not None}
    if not service_projected:
        return {}
    e, n = grid_en
    return {"easting": float(np.nanmax(np.abs(e - service_projected["e"][kept]))),
            "northing": float(np.nanmax(np.abs(n - service_projected["n"][kept])))}

"""Alarm evaluation an engineer can trust: every epoch, with a stated confidence, a minimum
duration, and the history of when each level was exceeded.

Why not compare the latest value with the level.  A displacement or a 7-day velocity is an
estimate with an error; comparing the estimate itself alarms whenever noise carries it over
the level, and GNSS noise is time-correlated (flicker), so a formal least-squares sigma is
several times too small at a week's scale.  Here, at every epoch:

* the **displacement** of each component is the value at that epoch of a line fitted to the
  epochs of the trailing ``displacement_window_days`` (1 day), minus the reference (the
  mean of the reference window);
* the **velocity** of each component is the least-squares slope over the trailing
  ``velocity_window_days`` (7 days) of cleaned epochs (the MAD outlier filter has removed
  the outliers; a window must span at least half its length);
* windows are time spans: where readings are too sparse for a line (daily prisms: one a
  day) a window is widened to hold ``DISPLACEMENT_MIN_EPOCHS`` / ``VELOCITY_MIN_EPOCHS``
  readings at the record's interval (``effective_windows``; the pipeline says so), and no
  window spans a known or detected step (the weeks after an antenna change are not
  "moving");
* each sigma is the **point's own noise at that window's scale**, measured on its record up
  to the epoch (``analysis.window_noise``: successive windows' velocity differences; the
  growth of position differences with their lag, extended to the time since the
  reference), with Student's factor for the samples behind it; the formal sigma is a floor.
  Until the noise is measured a key has no value, and ``KeyAlarm.unavailable`` says why;
* 2D and 3D values are the noise-corrected lengths of ``trends.noise_corrected_lengths``
  (per component, so no component hides another's motion), with the sigma of a length;
* a level is **exceeded** at an epoch when the value is beyond it with the rule's one-sided
  ``confidence`` (value - z sigma >= threshold), and **reached** once it has been exceeded
  at every epoch for ``min_duration_hours`` (6 h), as instruments' alarm logic asks for K
  consecutive epochs: a single outlier or a noise excursion never alarms.  It is
  **cleared** once the value itself has been under the level for as long (hysteresis: a
  point just past a level does not flap; clearing cannot ask for confidence, which a
  point whose noise is wider than the level never reaches).

The levels are per quantity (displacement in mm, velocity in mm/day) and component:
``3d``, ``horizontal`` (2D), ``vertical`` (either way), ``up`` (heave only), ``down``
(settlement only), ``along`` / ``across`` the device azimuth (size).  Keys are written
``displacement`` / ``velocity`` for 3D (the historical meaning) and ``velocity:vertical``
and so on for the others, as the mirror stores them.

Pure numpy: times ``datetime64`` (UTC), displacements in metres in, mm and mm/day out.

Size: about 630 lines, one module because the levels, the estimates at every epoch and
their evaluation are one rule that is read together (the noise measure itself lives in
``analysis.window_noise``).
"""

from __future__ import annotations

import math
from dataclasses import dataclass, field
from typing import Mapping, Sequence

import numpy as np

from analysis import window_noise
from analysis.lines import window_lines
from analysis.stats import median, normal_quantile

#: The quantities levels are set on, with their unit; alone, a key means the 3D length.
QUANTITIES = {"displacement": "mm", "velocity": "mm/day"}
#: What a displacement or velocity level may be set on besides the 3D length, as the key
#: ``displacement:<component>`` or ``velocity:<component>`` (same unit), with its meaning.
COMPONENT_MEANINGS = {
    "horizontal": "length of the horizontal (2D) part",
    "vertical": "size of the height change, up or down",
    "up": "upward height change only (heave)",
    "down": "downward height change only (settlement)",
    "along": "size of the part along the device azimuth",
    "across": "size of the part across the device azimuth",
}
COMPONENTS = ("3d", *COMPONENT_MEANINGS)
SIGNED = {"up": 1.0, "down": -1.0}  # one direction only; the others compare sizes
# the fewest readings a window's line needs: a position (3: the line and one degree of
# freedom) and a velocity (4); sparser readings widen the window instead
DISPLACEMENT_MIN_EPOCHS = 3
VELOCITY_MIN_EPOCHS = 4
_NS_PER_DAY = 86_400e9


@dataclass(frozen=True)
class AlarmRule:
    """When a level counts as reached: exceeded with one-sided ``confidence`` for at least
    ``min_duration_hours``.  Default 99.9 %: a month holds about four independent weekly
    velocities per component, each tested every hour, and real GNSS noise has heavier
    tails than a normal law.  With each point's own noise measured (``window_noise``),
    points at rest built from real station residuals reached a level in 5.7 % of
    point-months at 99 %, 2.6 % at 99.5 % and 0 % at 99.9 % (hourly, real noise x1, 16
    points x 12 months; ``benchmarks/bench_alarms.py --noise-levels --quick``; goal 1 %).
    The price is a later alarm on a noisier point, printed there per noise level.  The
    windows set what "current" means: the displacement is fitted over the last
    ``displacement_window_days``, the velocity over the last ``velocity_window_days``
    (widened for sparse readings: ``effective_windows``)."""

    confidence: float = 0.999
    min_duration_hours: float = 6.0
    displacement_window_days: float = 1.0
    velocity_window_days: float = 7.0

    def __post_init__(self) -> None:
        if not 0.5 <= self.confidence < 1.0:
            raise ValueError(f"alarm confidence must be at least 0.5 and below 1, not "
                             f"{self.confidence:g} (0.95 is usual)")
        if not (math.isfinite(self.min_duration_hours) and self.min_duration_hours >= 0):
            raise ValueError(f"alarm minimum duration must be 0 or more hours, not "
                             f"{self.min_duration_hours:g}")
        for name in ("displacement_window_days", "velocity_window_days"):
            value = getattr(self, name)
            if not (math.isfinite(value) and value > 0):
                raise ValueError(f"{name.replace('_', ' ')} must be positive, not {value:g}")

    @property
    def z(self) -> float:
        """The one-sided normal quantile of ``confidence`` (0 at 0.5: the plain value)."""
        return normal_quantile(self.confidence)

    def describe(self) -> str:
        return (f"exceeded with {100 * self.confidence:g} % confidence (one-sided) for at "
                f"least {self.min_duration_hours:g} h; displacement from a line over the "
                f"last {self.displacement_window_days:g} day(s), velocity over the last "
                f"{self.velocity_window_days:g} days")


def split_key(key: str) -> tuple[str, str]:
    """``velocity:vertical`` -> (``velocity``, ``vertical``); ``displacement`` -> 3d."""
    quantity, _, component = key.partition(":")
    component = component or "3d"
    if quantity not in QUANTITIES or component not in COMPONENTS:
        raise ValueError(f"unknown alarm quantity {key!r}: use displacement or velocity, "
                         f"optionally with :{' :'.join(COMPONENTS[1:])}")
    return quantity, component


def level_key(quantity: str, component: str) -> str:
    return quantity if component == "3d" else f"{quantity}:{component}"


#: Digits of an alarm value by unit (``devmon analyze``'s precision), for the GUI and reports.
UNIT_DIGITS = {"mm": 1, "mm/day": 3}


def value_text(value: float, unit: str) -> str:
    """An alarm value or threshold with its unit, at the precision of its unit."""
    return f"{value:.{UNIT_DIGITS.get(unit, 2)}f} {unit}"


def quantity_words(key: str | None) -> str:
    """A key in words: ``velocity:down`` -> "downward velocity", ``displacement`` -> "3D
    displacement"; an unknown key as given."""
    try:
        quantity, component = split_key(key or "")
    except ValueError:
        return key or ""
    words = {"3d": "3D", "up": "upward", "down": "downward", "along": "along-slope",
             "across": "cross-slope"}
    return f"{words.get(component, component)} {quantity}"


# ----------------------------------------------------------------------------- levels

@dataclass(frozen=True, init=False)
class AlarmLevels:
    """Ordered alarm levels of one quantity: ``names[i]`` is reached when the size of the
    quantity is at least ``thresholds[i]`` (in ``unit``: mm for displacement, mm/day for
    velocity, as the mirror stores them).  Built from ``{name: threshold}`` or
    ``[(name, threshold), ...]`` in ascending order of severity:
    ``AlarmLevels({"alert": 10, "alarm": 25, "emergency": 50}, "mm")``.

    Validated, with a ValueError saying what is wrong: at least one level, names non-empty
    and distinct, thresholds finite, positive and strictly ascending (each level more
    severe than the one before; levels given out of order are refused rather than sorted,
    since a swapped pair is more likely a typing error than an intent)."""

    names: tuple[str, ...]
    thresholds: tuple[float, ...]
    unit: str

    def __init__(self, levels: Mapping[str, float] | Sequence[tuple[str, float]],
                 unit: str = "") -> None:
        if isinstance(levels, Mapping):
            pairs = list(levels.items())
        else:
            pairs = list(levels or ())
            if not all(isinstance(p, (tuple, list)) and len(p) == 2 for p in pairs):
                raise ValueError(f"alarm levels: give {{name: threshold}} or "
                                 f"[(name, threshold), ...], not {levels!r}")
        if not pairs:
            raise ValueError("alarm levels: give at least one level (name and threshold)")
        names = tuple(p[0] for p in pairs)
        for name in names:
            if not isinstance(name, str) or not name.strip():
                raise ValueError(f"alarm level names must be non-empty text, not {name!r}")
        if len(set(names)) != len(names):
            raise ValueError(f"alarm level names must be distinct: {list(names)}")
        thresholds = []
        for name, value in pairs:
            try:
                value = float(value)
            except (TypeError, ValueError):
                raise ValueError(f"alarm level {name!r}: threshold must be a number, not "
                                 f"{value!r}") from None
            if not (math.isfinite(value) and value > 0):
                raise ValueError(f"alarm level {name!r}: threshold must be a positive "
                                 f"number, not {value:g}")
            thresholds.append(value)
        for (n1, v1), (n2, v2) in zip(zip(names, thresholds), zip(names[1:], thresholds[1:])):
            if not v2 > v1:
                raise ValueError(f"alarm thresholds must be strictly ascending: {n2!r} "
                                 f"({v2:g}) must be above {n1!r} ({v1:g})")
        object.__setattr__(self, "names", names)
        object.__setattr__(self, "thresholds", tuple(thresholds))
        object.__setattr__(self, "unit", str(unit))

    def index(self, values) -> np.ndarray:
        """For each value, 0 when below every level, else 1 + the index of the highest
        level reached (|value| >= threshold); NaN gives 0."""
        v = np.abs(np.asarray(values, dtype=np.float64))
        idx = np.searchsorted(np.asarray(self.thresholds), v, side="right")
        return np.where(np.isfinite(v), idx, 0)


def alarm_state(value: float, levels: AlarmLevels) -> str | None:
    """The highest level whose threshold the size of ``value`` reaches (>=), or None.

    The size (absolute value) is compared, whatever the sign: a settlement of -30 mm
    reaches a 25 mm displacement level.  NaN (no value) reaches nothing."""
    i = int(levels.index(float(value)))
    return levels.names[i - 1] if i else None


def alarm_states(values, levels: AlarmLevels) -> np.ndarray:
    """``alarm_state`` of each value: an object array of level names and None."""
    names = np.array((None,) + levels.names, dtype=object)
    return names[levels.index(values)]


# ----------------------------------------------------------------------------- estimates

@dataclass(frozen=True)
class Estimates:
    """Per component (east, north, up, along, across) at every epoch ``t``: the trailing
    window's value and slope, and their sigmas (the point's own noise at the window's
    scale), in metres and m/day; NaN where a window holds too little data or the noise is
    not yet measured.  ``windows_days``: the displacement and velocity windows used (the
    rule's, widened for sparse readings); ``reference_sigma_m``: the reference's own error
    per component."""

    t: np.ndarray
    displacement_m: dict
    displacement_sigma_m: dict
    velocity_m_per_day: dict
    velocity_sigma_m_per_day: dict
    windows_days: tuple[float, float]
    reference_sigma_m: dict
    displacement_dof: dict | None = None  # degrees of freedom of each sigma (window_noise)
    velocity_dof: dict | None = None


def _segment_start(days: np.ndarray, step_days: np.ndarray) -> np.ndarray:
    """For each epoch, the index of the first epoch at or after the latest step at or
    before it (0 before any step): where its trailing windows may begin."""
    if not step_days.size:
        return np.zeros(days.size, np.int64)
    latest = np.searchsorted(step_days, days, side="right") - 1
    first = np.searchsorted(days, step_days, side="left")
    return np.where(latest >= 0, first[np.maximum(latest, 0)], 0)


def _trailing_lines(days: np.ndarray, x: np.ndarray, window: float, min_epochs: int,
                    min_span: float, start: np.ndarray) -> tuple[np.ndarray, ...]:
    """For each epoch i, the least-squares line (``lines.window_lines``) through the epochs
    in (days[i] - window, days[i]] since ``start[i]`` (the last step: a window never spans
    one): its value at days[i], slope, and their formal sigmas (white noise, from the
    scatter about the line); NaN where the window holds fewer than ``min_epochs`` or spans
    less than ``min_span`` days.  ``x``: one series, or components x epochs (one pass)."""
    lo = np.maximum(np.searchsorted(days, days - window, side="right"), start)
    lines = window_lines(days, x, lo, np.arange(1, days.size + 1))
    span = days - days[lo] if days.size else days
    ok = (lines.n >= min_epochs) & (span >= min_span) & np.isfinite(lines.slope)
    nan = np.full(np.shape(x), np.nan)
    return (np.where(ok, lines.value_at(days), nan), np.where(ok, lines.slope, nan),
            np.where(ok, lines.value_sigma_at(days), nan),
            np.where(ok, lines.slope_sigma, nan))


def effective_windows(days: np.ndarray, rule: "AlarmRule") -> tuple[float, float]:
    """The displacement and velocity windows (days) at this record's reading interval: the
    rule's spans, widened where they would hold fewer readings than a line needs
    (``DISPLACEMENT_MIN_EPOCHS``, ``VELOCITY_MIN_EPOCHS``): daily readings get a 3-day
    displacement window, weekly ones a 28-day velocity window."""
    gaps = np.diff(days)
    gaps = gaps[gaps > 0]
    spacing = median(gaps) if gaps.size else 0.0
    return (max(rule.displacement_window_days, DISPLACEMENT_MIN_EPOCHS * spacing),
            max(rule.velocity_window_days, VELOCITY_MIN_EPOCHS * spacing))


def estimate(t: np.ndarray, series: dict[str, np.ndarray], reference_mask: np.ndarray,
             rule: AlarmRule = AlarmRule(), steps=None) -> Estimates:
    """Trailing-window displacement and velocity of each component at every epoch, with the
    point's own noise at each window's scale (``analysis.window_noise``), and the
    reference's sigma.  ``steps``: times (datetime64) no window may span (known steps,
    corrected or not, and detected ones)."""
    days = (t - t[0]).astype("timedelta64[ns]").astype(np.float64) / _NS_PER_DAY if t.size \
        else np.empty(0)
    wd, wv = effective_windows(days, rule)
    step_ns = np.asarray(steps if steps is not None else [], "datetime64[ns]")
    step_days = np.sort((step_ns - t[0]).astype(np.float64) / _NS_PER_DAY) if t.size \
        else np.empty(0)
    start = _segment_start(days, step_days)
    ref = days[reference_mask]
    ref_day = float(ref.mean()) if ref.size else 0.0
    out: dict = {k: {} for k in ("d", "sd", "v", "sv", "ref", "dd", "dv")}
    names = list(series)
    xs = np.array([np.asarray(series[name], np.float64) for name in names]).reshape(
        len(names), days.size)  # every component's lines in one pass a window
    values, _, sigma_values, _ = _trailing_lines(days, xs, wd, DISPLACEMENT_MIN_EPOCHS,
                                                 0.25 * wd, start)
    _, slopes, _, sigma_slopes = _trailing_lines(days, xs, wv, VELOCITY_MIN_EPOCHS,
                                                 0.5 * wv, start)
    # every component's noise in one pass too
    sd, ref_part, dd = window_noise.position_sigma(days, values, sigma_values, ref_day)
    sv, dv = window_noise.velocity_sigma(days, slopes, sigma_slopes, wv)
    for c, name in enumerate(names):
        out["d"][name], out["v"][name] = values[c], slopes[c]
        out["sd"][name], out["ref"][name], out["dd"][name] = sd[c], float(ref_part[c]), dd[c]
        out["sv"][name], out["dv"][name] = sv[c], dv[c]
    return Estimates(t, out["d"], out["sd"], out["v"], out["sv"], (wd, wv), out["ref"],
                     out["dd"], out["dv"])


def noise_corrected_length(parts: list[np.ndarray], sigmas: list[np.ndarray]
                           ) -> tuple[np.ndarray, np.ndarray]:
    """Noise-corrected length sqrt(sum max(v^2 - s^2, 0)) of the components and its sigma,
    at every epoch: ``trends.noise_corrected_lengths``, the formula's one home (the rule
    and why are there)."""
    from analysis.trends import noise_corrected_lengths

    return noise_corrected_lengths(parts, sigmas)


def component_dof(est: Estimates, quantity: str, component: str) -> np.ndarray | None:
    """The degrees of freedom of a compared value's sigma at every epoch: the fewest of the
    components it is made of; None when the estimates carry none (a normal margin)."""
    dofs = est.displacement_dof if quantity == "displacement" else est.velocity_dof
    if not dofs:
        return None
    names = (("east", "north", "up") if component == "3d" else ("east", "north")
             if component == "horizontal" else
             ("up",) if component in ("vertical", "up", "down") else (component,))
    parts = [dofs[c] for c in names if c in dofs]
    return np.minimum.reduce(parts) if parts else None


def component_series(est: Estimates, quantity: str, component: str
                     ) -> tuple[np.ndarray, np.ndarray] | None:
    """The value compared with a level (mm or mm/day; signed for up/down, else a size) and
    its sigma at every epoch; None when the component is not available (along/across
    without an azimuth)."""
    values = est.displacement_m if quantity == "displacement" else est.velocity_m_per_day
    sigmas = est.displacement_sigma_m if quantity == "displacement" \
        else est.velocity_sigma_m_per_day
    if component in ("3d", "horizontal"):
        names = ("east", "north", "up") if component == "3d" else ("east", "north")
        value, sigma = noise_corrected_length([values[c] for c in names],
                                              [sigmas[c] for c in names])
    else:
        name = "up" if component in ("vertical", "up", "down") else component
        if name not in values:
            return None
        value = values[name] * SIGNED.get(component, 1.0)
        value = value if component in SIGNED else np.abs(value)
        sigma = sigmas[name]
    return 1000.0 * value, 1000.0 * sigma


# ----------------------------------------------------------------------------- evaluation

@dataclass(frozen=True)
class LevelHistory:
    """When one level of one key was reached: ``first_exceeded`` (the first epoch it counted
    as reached), ``last_exceeded`` (the last epoch it was exceeded in a reached episode),
    ``exceeded_at_end`` (reached at the last epoch), ``episodes`` (separate reached
    periods), ``peak_value`` (the largest value while reached, in the key's unit)."""

    key: str
    level: str
    unit: str
    first_exceeded: np.datetime64
    last_exceeded: np.datetime64
    exceeded_at_end: bool
    episodes: int
    peak_value: float


@dataclass(frozen=True)
class KeyAlarm:
    """One key's evaluation: the series (``t``, ``value``, ``sigma``), the level reached at
    the end (``current_level``, None below all), and the history of its levels."""

    key: str
    quantity: str
    component: str
    unit: str
    levels: AlarmLevels
    t: np.ndarray
    value: np.ndarray
    sigma: np.ndarray
    current_value: float
    current_sigma: float
    current_level: str | None
    history: tuple[LevelHistory, ...]
    unavailable: str = ""  # why the last epoch has no value to compare ("" when it has)

    @property
    def rank(self) -> int:
        return self.levels.names.index(self.current_level) + 1 if self.current_level else 0

    @property
    def max_rank(self) -> int:
        reached = {h.level for h in self.history}
        return max((i + 1 for i, n in enumerate(self.levels.names) if n in reached), default=0)

    def describe(self) -> str:
        if self.unavailable:
            return f"{self.key} not evaluated at the end: {self._unavailable_words()}"
        return (f"{self.key} {self.current_value:.1f} ± {self.current_sigma:.1f} {self.unit}: "
                f"{self.current_level or 'below all levels'}")

    def words(self) -> str:
        """The value now in words, for tables and tooltips: ``3D velocity 1.865 ± 0.067
        mm/day: alert``, or why there is none (``3D velocity not evaluated at the end: ...``)."""
        if self.unavailable:
            return (f"{quantity_words(self.key)} not evaluated at the end: "
                    f"{self._unavailable_words()}")
        digits = UNIT_DIGITS.get(self.unit, 2)
        return (f"{quantity_words(self.key)} {self.current_value:.{digits}f} ± "
                f"{self.current_sigma:.{digits}f} {self.unit}: "
                f"{self.current_level or 'below its levels'}")

    def _unavailable_words(self) -> str:
        """The reason, and the level still held from the last evaluated epoch (a level is
        never dropped because the data thinned out)."""
        held_level = (f"; {self.current_level} still reached since its last value"
                      if self.current_level else "")
        return self.unavailable + held_level


@dataclass(frozen=True)
class PointAlarms:
    """Alarm state of a point: each key evaluated, the worst level reached at the end
    (``overall``, by ``overall_quantity``, the key), the worst ever reached
    (``overall_max``), and every level's history in time order.  Ladders are compared by
    position (the second level of one is as severe as the second of another); a tie goes
    to the first key (displacement before velocity, 3D first)."""

    keys: dict[str, KeyAlarm]
    rule: AlarmRule
    overall: str | None
    overall_quantity: str | None
    overall_max: str | None
    history: tuple[LevelHistory, ...] = field(default=())

    @property
    def rank(self) -> int:
        key = self.keys.get(self.overall_quantity or "")
        return key.rank if key is not None else 0

    @property
    def displacement(self) -> KeyAlarm | None:
        return self.keys.get("displacement")

    @property
    def velocity(self) -> KeyAlarm | None:
        return self.keys.get("velocity")

    def describe(self) -> str:
        parts = [k.describe() for k in self.keys.values()]
        return "; ".join(parts) if parts else "no alarm levels evaluated"


def held(t: np.ndarray, condition: np.ndarray, min_duration_hours: float) -> np.ndarray:
    """Whether ``condition`` has held at every epoch of its current run for at least
    ``min_duration_hours`` (0 h: at once)."""
    if t.size == 0:
        return condition.astype(bool)
    start = np.flatnonzero(condition & ~np.concatenate([[False], condition[:-1]]))
    run_start = np.full(t.size, -1, np.int64)
    run_start[start] = start
    run_start = np.maximum.accumulate(run_start)
    span = (t - t[np.maximum(run_start, 0)]).astype("timedelta64[ns]").astype(np.float64)
    return condition & (run_start >= 0) & (span >= min_duration_hours * 3600e9)


def reached(t: np.ndarray, exceeded: np.ndarray, below: np.ndarray,
            min_duration_hours: float) -> np.ndarray:
    """Whether a level counts as reached at each epoch: set once ``exceeded`` (beyond the
    level with the rule's confidence) has held ``min_duration_hours``, cleared only once
    ``below`` (the value itself under the level) has held as long.  The band between the two
    (z sigma wide) keeps a point moving just past a level from flapping in and out of it;
    clearing does not ask for confidence, which a point whose noise is wider than the level
    never reaches (on real noise a 3-sigma excursion then held an alert for months)."""
    index = np.arange(t.size)
    last_set = np.maximum.accumulate(np.where(held(t, exceeded, min_duration_hours),
                                              index, -1)) if t.size else index
    last_clear = np.maximum.accumulate(np.where(held(t, below, min_duration_hours),
                                                index, -1)) if t.size else index
    return (last_set >= 0) & (last_set > last_clear)


def _history(key: str, unit: str, levels: AlarmLevels, t: np.ndarray, value: np.ndarray,
             hit: np.ndarray) -> list[LevelHistory]:
    """One level's history per level name from ``hit`` (epochs x levels, reached)."""
    out = []
    for j, name in enumerate(levels.names):
        on = hit[:, j]
        if not on.any():
            continue
        # an episode: a run of reached epochs; it lasts while the level stays exceeded
        starts = on & ~np.concatenate([[False], on[:-1]])
        idx = np.flatnonzero(on)
        out.append(LevelHistory(key, name, unit, t[idx[0]], t[idx[-1]], bool(on[-1]),
                                int(starts.sum()), float(np.nanmax(value[idx]))))
    return out


def evaluate_key(est: Estimates, key: str, levels: AlarmLevels, rule: AlarmRule
                 ) -> KeyAlarm | None:
    """One key against its ladder at every epoch, with the rule's confidence and duration."""
    quantity, component = split_key(key)
    series = component_series(est, quantity, component)
    if series is None:
        return None
    value, sigma = series
    dof = component_dof(est, quantity, component)
    margin = (np.full(value.shape, rule.z) if dof is None
              else window_noise.student_quantile(dof, rule.confidence))
    thresholds = np.asarray(levels.thresholds)
    # an epoch with no estimate (a gap in its window) neither starts nor breaks a run
    valid = np.isfinite(value) & np.isfinite(sigma) & np.isfinite(margin)
    t, value, sigma, margin = est.t[valid], value[valid], sigma[valid], margin[valid]
    # one-sided bounds: the value is beyond a level with the rule's confidence (Student's
    # quantile at the sigma's degrees of freedom)
    exceeded = (value - margin * sigma)[:, None] >= thresholds[None, :]
    below = value[:, None] < thresholds[None, :]
    hit = np.column_stack([reached(t, exceeded[:, j], below[:, j], rule.min_duration_hours)
                           for j in range(thresholds.size)]) if t.size else \
        np.zeros((0, thresholds.size), bool)
    current = None
    if t.size and hit[-1].any():
        current = levels.names[int(np.flatnonzero(hit[-1])[-1])]
    unit = QUANTITIES[quantity]
    return KeyAlarm(key, quantity, component, unit, levels, t, value, sigma,
                    float(value[-1]) if t.size else math.nan,
                    float(sigma[-1]) if t.size else math.nan, current,
                    tuple(_history(key, unit, levels, t, value, hit)),
                    "" if valid.size and valid[-1] else _why_unavailable(est, quantity))


def _why_unavailable(est: Estimates, quantity: str) -> str:
    """Why the last epoch has no value to compare with a level, in words a user can act on:
    too few readings in the window, or the point's own noise not yet measured."""
    window = est.windows_days[0 if quantity == "displacement" else 1]
    need = DISPLACEMENT_MIN_EPOCHS if quantity == "displacement" else VELOCITY_MIN_EPOCHS
    values = est.displacement_m if quantity == "displacement" else est.velocity_m_per_day
    if not est.t.size or not all(np.isfinite(v[-1]) for v in values.values()):
        return (f"fewer than {need} readings in the last {window:g} days since any step "
                f"(a {quantity} is a line through them)")
    days = (est.t - est.t[0]) / np.timedelta64(1, "s") / 86400.0
    span, grid = float(days[-1]), window_noise.grid_days(days)
    needed = ((window_noise.MIN_NOISE_SAMPLES + 1) * window if quantity == "velocity"
              else window + (window_noise.MIN_NOISE_SAMPLES + 2) * grid)
    return (f"the point's own noise is not measured yet ({span:.1f} days of record; a "
            f"{quantity} level needs about {needed:g})")


def evaluate(est: Estimates, levels: dict[str, dict[str, float]],
             rule: AlarmRule = AlarmRule()) -> PointAlarms | None:
    """Every key of ``levels`` ({key: {level name: threshold}}, keys as the mirror stores
    them; parameter levels are ignored here) at every epoch of ``est``; None without any
    GNSS level."""
    keys: dict[str, KeyAlarm] = {}
    for key in sorted((k for k in levels if k.split(":")[0] in QUANTITIES and levels[k]),
                      key=_key_order):
        ladder = AlarmLevels(levels[key], QUANTITIES[split_key(key)[0]])
        evaluated = evaluate_key(est, key, ladder, rule)
        if evaluated is not None:
            keys[key] = evaluated
    if not keys:
        return None
    ordered = list(keys.values())
    worst = max(ordered, key=lambda k: k.rank)
    worst_max = max(ordered, key=lambda k: k.max_rank)
    history = sorted((h for k in ordered for h in k.history), key=lambda h: h.first_exceeded)
    return PointAlarms(keys, rule, worst.current_level if worst.rank else None,
                       worst.key if worst.rank else None,
                       worst_max.levels.names[worst_max.max_rank - 1] if worst_max.max_rank
                       else None, tuple(history))


#: The lights an engineer reads a point by, and the components each gathers: horizontal
#: (the 2D length and its parts along/across the slope), vertical (either way, heave,
#: settlement) and the 3D length.  Limits are usually set on H and V apart.
DIRECTIONS = {"H": ("horizontal", "along", "across"), "V": ("vertical", "up", "down"),
              "3D": ("3d",)}


def direction_lights(alarm: PointAlarms | None) -> dict[str, KeyAlarm | None]:
    """For each of ``DIRECTIONS``, the key of that direction at the most severe level now
    (ties: the first key, displacement before velocity), or None when no level of that
    direction is set: a light below its levels (``current_level`` None) differs from no
    light at all."""
    out: dict[str, KeyAlarm | None] = {}
    for direction, components in DIRECTIONS.items():
        keys = [k for k in (alarm.keys.values() if alarm else ()) if k.component in components]
        out[direction] = max(keys, key=lambda k: k.rank) if keys else None
    return out


def _key_order(key: str) -> tuple[int, int]:
    quantity, component = split_key(key)
    return list(QUANTITIES).index(quantity), COMPONENTS.index(component)


__all__ = ["AlarmLevels", "alarm_state", "alarm_states", "COMPONENT_MEANINGS", "AlarmRule",
           "Estimates", "estimate", "component_series", "evaluate",
           "evaluate_key", "held", "reached", "KeyAlarm", "PointAlarms", "LevelHistory",
           "split_key", "level_key", "quantity_words", "value_text", "UNIT_DIGITS",
           "COMPONENTS", "QUANTITIES", "DIRECTIONS", "direction_lights"]

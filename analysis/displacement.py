"""Displacement of a point from a chosen reference: components, lengths, direction, slope axes.

An engineer reads displacement against a reference they chose: the first epoch, the mean of a
quiet baseline period, or the epoch of a given date (the day the instrument was accepted, the
start of the reporting period).  Components are east/north/up in the local frame (or grid
easting/northing/height in a projection), plus what a drawing needs: horizontal (2D) and 3D
length, the horizontal direction, and the components along and across a chosen azimuth (the
"downslope" and "cross-slope" of a slope, the "upstream-downstream" of a dam).
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from analysis.geodesy import geodetic_to_enu, normalize_longitude
from analysis.timebase import as_datetime64


START_HOURS = 24.0
"""The default reference: the mean of the first day of data."""

DEFAULT_REFERENCE = "start"
"""What ``--reference`` and the app use unless told otherwise."""


@dataclass(frozen=True)
class Reference:
    """Which epochs define the zero of displacement.

    ``kind`` is ``"start"`` (the default: the mean of the epochs of the first ``hours`` of
    data; the analysis removes outliers before, and a mean, unlike a median per component,
    is the same point in every frame), ``"first"`` (the first epoch), ``"date"`` (the epoch
    nearest ``start``) or ``"window"`` (the mean of the epochs in [start, end]).  One epoch
    carries its noise into every displacement that follows (about 7 mm in 3D, mostly
    height): measured with
    ``benchmarks/bench_alarms.py``, a single-epoch reference put 18.5 % of the months of
    points at rest at the 10 mm alert; a day's mean takes that noise out."""

    kind: str = "start"
    start: np.datetime64 | None = None
    end: np.datetime64 | None = None
    hours: float = START_HOURS

    @classmethod
    def parse(cls, text: str | None) -> "Reference":
        """``start`` (``start:48h`` for another span), ``first``, a date or date-time
        (``2026-01-05``), or a window ``DATE..DATE``."""
        text = (text or DEFAULT_REFERENCE).strip()
        if text == "first":
            return cls("first")
        if text == "start" or (text.startswith("start:") and text.endswith("h")):
            hours = START_HOURS if text == "start" else _hours(text[6:-1])
            if hours is None:
                raise ValueError(f"reference {text!r} not understood: use 'start', or "
                                 f"'start:48h' for the first 48 hours")
            return cls("start", hours=hours)
        try:
            if ".." in text:
                a, b = text.split("..", 1)
                start, end = _parse_time(a), _parse_time(b, end_of_day=True)
                if end < start:
                    raise ValueError("the window ends before it starts")
                return cls("window", start, end)
            return cls("date", _parse_time(text))
        except ValueError as err:
            raise ValueError(f"reference {text!r} not understood ({err}): use 'first', a date "
                             f"such as 2026-01-05, a window such as 2026-01-01..2026-01-07, "
                             f"or 'start' (the mean of the first 24 h; 'start:48h')"
                             ) from None

    def describe(self) -> str:
        if self.kind == "start":
            return f"mean of the first {self.hours:g} h"
        if self.kind == "first":
            return "first epoch"
        if self.kind == "date":
            return f"epoch nearest {np.datetime_as_string(self.start, unit='m')}Z"
        return (f"mean of {np.datetime_as_string(self.start, unit='m')}Z.."
                f"{np.datetime_as_string(self.end, unit='m')}Z")

    def mask(self, t) -> np.ndarray:
        """Boolean mask of the epochs of ``t`` (sorted) that form the reference; a
        ``ValueError`` saying why when there are none."""
        t = as_datetime64(t)
        if t.size == 0:
            raise ValueError("no epochs to take a reference from")
        mask = np.zeros(t.shape, bool)
        if self.kind == "start":
            mask = t <= t[0] + np.timedelta64(int(self.hours * 3600e9), "ns")
        elif self.kind == "first":
            mask[0] = True
        elif self.kind == "date":
            mask[int(np.argmin(np.abs(t - as_datetime64(self.start))))] = True
        else:
            mask = (t >= as_datetime64(self.start)) & (t <= as_datetime64(self.end))
            if not mask.any():
                raise ValueError(f"no epoch in the reference window {self.describe()[8:]} "
                                 f"(data span {_span(t)}): choose a window inside the data")
        return mask


    def centre(self, x: np.ndarray, mask: np.ndarray) -> float:
        """The zero of one component: the mean of its reference epochs."""
        return float(np.nanmean(x[mask]))


def _hours(text: str) -> float | None:
    try:
        value = float(text)
    except ValueError:
        return None
    return value if 0 < value < 1e6 else None


def _parse_time(text: str, end_of_day: bool = False) -> np.datetime64:
    text = text.strip().rstrip("Zz")
    value = np.datetime64(text, "ns")
    if end_of_day and len(text) == 10:
        value = value + np.timedelta64(1, "D") - np.timedelta64(1, "ns")
    return value


def _span(t: np.ndarray) -> str:
    return (f"{np.datetime_as_string(t[0], unit='m')}Z.."
            f"{np.datetime_as_string(t[-1], unit='m')}Z")


@dataclass(frozen=True)
class Displacement:
    """Displacement components (metres) of each epoch from the reference, in one frame.

    ``frame`` is ``"enu"`` (local east/north/up at the reference point) or the name of a
    projected CRS (grid easting/northing; ``up_m`` is then the change of height).
    ``height_type`` says which height the vertical component is a change of."""

    t: np.ndarray
    east_m: np.ndarray
    north_m: np.ndarray
    up_m: np.ndarray
    frame: str
    height_type: str
    reference: Reference

    @property
    def horizontal_m(self) -> np.ndarray:
        """Horizontal (2D) length, m."""
        return np.hypot(self.east_m, self.north_m)

    @property
    def length_3d_m(self) -> np.ndarray:
        """3D length, m."""
        return np.sqrt(self.east_m ** 2 + self.north_m ** 2 + self.up_m ** 2)

    @property
    def direction_deg(self) -> np.ndarray:
        """Horizontal direction of the displacement, degrees clockwise from (grid) north,
        in [0, 360); NaN where the point has not moved horizontally."""
        d = np.degrees(np.arctan2(self.east_m, self.north_m)) % 360.0
        return np.where(self.horizontal_m > 0, d, np.nan)

    def along_across(self, azimuth_deg: float) -> tuple[np.ndarray, np.ndarray]:
        """Components along the azimuth (positive towards it: an engineer's "downslope") and
        across it (positive 90 degrees clockwise of it), metres."""
        return along_across(self.east_m, self.north_m, azimuth_deg)

    def select(self, keep: np.ndarray) -> "Displacement":
        """The same displacement restricted to the epochs where ``keep`` is True."""
        return Displacement(self.t[keep], self.east_m[keep], self.north_m[keep], self.up_m[keep],
                            self.frame, self.height_type, self.reference)


def along_across(east_m, north_m, azimuth_deg: float) -> tuple[np.ndarray, np.ndarray]:
    """Horizontal components along ``azimuth_deg`` (clockwise from north) and across it
    (positive to the right of the azimuth), metres."""
    az = np.radians(float(azimuth_deg))
    east, north = np.asarray(east_m, np.float64), np.asarray(north_m, np.float64)
    along = east * np.sin(az) + north * np.cos(az)
    across = east * np.cos(az) - north * np.sin(az)
    return along, across


def relative_to_reference(t, x_m, reference: Reference) -> np.ndarray:
    """``x_m`` minus its value at the reference (the mean over a reference window)."""
    x = np.asarray(x_m, np.float64)
    return x - reference.centre(x, reference.mask(t))


def displacement_enu(t, lat_deg, lon_deg, h_m, reference: Reference = Reference(), *,
                     height_type: str = "ellipsoidal") -> Displacement:
    """East/north/up displacement (m) in the local frame at the reference position.

    ``h_m`` should be the ellipsoidal height (the ECEF conversion needs it); with an
    orthometric height and a constant geoid undulation over the site, the result differs by
    far less than a micrometre, and ``height_type`` records which was given.
    The frame is set up at the first reference epoch; positions are then shifted so the
    reference (one epoch or a window's mean) is zero.  Over metres of motion the frame's
    orientation at the first reference epoch and at the window's mean differ by ~1e-7 rad,
    under a micrometre of displacement."""
    t = as_datetime64(t)
    mask = reference.mask(t)
    i0 = int(np.flatnonzero(mask)[0])
    lon = normalize_longitude(lon_deg)
    lat, h = np.asarray(lat_deg, np.float64), np.asarray(h_m, np.float64)
    e, n, u = geodetic_to_enu(lat, lon, h, ref=(lat[i0], lon[i0], h[i0]))
    e, n, u = (c - reference.centre(c, mask) for c in (e, n, u))
    return Displacement(t, e, n, u, "enu", height_type, reference)


def largest_disagreement(ours_m, theirs_m) -> float:
    """Largest absolute difference (m) between two displacement series of the same epochs,
    after removing the constant offset between their references (the service's reference
    position is its own): the check that both describe the same motion."""
    diff = np.asarray(ours_m, np.float64) - np.asarray(theirs_m, np.float64)
    diff = diff[np.isfinite(diff)]
    if diff.size == 0:
        return float("nan")
    return float(np.max(np.abs(diff - np.median(diff))))

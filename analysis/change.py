"""How far a point moved over the last days: the figure a periodic report gives as "change
since the last report" (7 and 30 days), beside the displacement since the reference.

Both ends are the alarm estimates' trailing-window positions (``alarms.estimate``: a line
over the trailing day, its sigma inflated by the noise measured on the series), so one
noisy epoch does not set the change, and its uncertainty is the one the alarm levels are
judged with.  The reference's own sigma cancels in a difference and is taken out.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from analysis.alarms import Estimates, noise_corrected_length

#: The epoch a change is measured from is the one nearest its nominal time (the end less the
#: days) within this share of the days, at least ``MIN_TOLERANCE_DAYS``: a short outage
#: there moves the start a little (``span_days`` says by how much); a longer one leaves no
#: change rather than one over days it does not say.
TOLERANCE_SHARE = 0.1
MIN_TOLERANCE_DAYS = 1.0
COMPONENTS = ("east", "north", "up")


@dataclass(frozen=True)
class RecentChange:
    """The change of each component (mm, 1-sigma) from the epoch ``start`` to ``end``
    (naive UTC datetime64), over the nominal ``days`` (``span_days`` the actual span)."""

    days: float
    start: np.datetime64
    end: np.datetime64
    change_mm: dict  # east/north/up -> mm
    sigma_mm: dict  # east/north/up -> mm

    @property
    def span_days(self) -> float:
        """Days actually spanned (``days`` within the tolerance)."""
        return float((self.end - self.start) / np.timedelta64(1, "s")) / 86400.0

    def horizontal_mm(self) -> tuple[float, float]:
        """Length of the east/north change (noise-corrected: zero while within the noise,
        as the report's other 2D lengths) and its sigma, mm."""
        return self._length(("east", "north"))

    def length_3d_mm(self) -> tuple[float, float]:
        """Length of the 3D change (noise-corrected) and its sigma, mm."""
        return self._length(COMPONENTS)

    def _length(self, names: tuple[str, ...]) -> tuple[float, float]:
        value, sigma = noise_corrected_length(
            [np.array([self.change_mm[n]]) for n in names],
            [np.array([self.sigma_mm[n]]) for n in names])
        return float(value[0]), float(sigma[0])


def recent_change(est: Estimates | None, days: float) -> RecentChange | None:
    """The change over the last ``days`` of a series: from the epoch with a position
    estimate nearest ``days`` before the last such epoch, to that last one.  None when the
    series is shorter than ``days`` or has no estimate within the tolerance of the start."""
    if est is None or not est.t.size:
        return None
    finite = np.logical_and.reduce([np.isfinite(est.displacement_m[c]) for c in COMPONENTS])
    idx = np.flatnonzero(finite)
    if not idx.size:
        return None
    end = int(idx[-1])
    nominal = est.t[end] - np.timedelta64(int(round(days * 86400e6)), "us")
    if est.t[idx[0]] > nominal + _tolerance(days):
        return None  # the series is shorter than the days
    offset = np.abs((est.t[idx] - nominal) / np.timedelta64(1, "s")) / 86400.0
    nearest = int(np.argmin(offset))
    if offset[nearest] > _tolerance(days) / np.timedelta64(1, "D"):
        return None
    start = int(idx[nearest])
    change, sigma = {}, {}
    for c in COMPONENTS:
        value, sd = est.displacement_m[c], est.displacement_sigma_m[c]
        ref = est.reference_sigma_m.get(c, 0.0)
        own = np.sqrt(np.maximum(sd[[start, end]] ** 2 - ref ** 2, 0.0))
        change[c] = 1000.0 * float(value[end] - value[start])
        sigma[c] = 1000.0 * float(np.hypot(*own))
    return RecentChange(float(days), est.t[start], est.t[end], change, sigma)


def _tolerance(days: float) -> np.timedelta64:
    hours = max(MIN_TOLERANCE_DAYS, TOLERANCE_SHARE * days) * 24.0
    return np.timedelta64(int(round(hours * 3600)), "s")

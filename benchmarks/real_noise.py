"""Real GNSS noise for benchmarks: daily position residuals of two permanent stations, as
stable-point noise that nobody on this project made (issue 28).

Source: ``../shared/reference-data/`` (PBO P156, EarthScope/UNAVCO, ITRF2008 ``.pos``; NGL
LHAS ``tenv3``; see its README).  Per station and component (east, north, up) the daily
positions are fitted by least squares with an offset, a rate, annual and semiannual terms and
steps at the known equipment changes and at the offsets found by ``cleaning.detect_steps``
on the daily series (each one printed by ``describe()``); days more than ``OUTLIER_MADS``
scaled MADs off in any component are dropped (``describe()`` counts them); what is left
noise: white, flicker and whatever else a real receiver, antenna, atmosphere and monument
give, at real amplitudes (not scaled to any model).

A *stable point* is one year (``BLOCK_DAYS``) of those residuals from one station, its
three components taken together (their correlation kept), starting at a whole number of
``STRIDE_DAYS`` into the record.  ``hourly()`` interpolates a block linearly to hourly
epochs (a gap longer than ``MAX_GAP_DAYS`` stays a gap) for the alarm benchmark, whose
points are hourly; ``daily()`` gives the block as it is (daily data: prisms, total stations,
daily GNSS solutions).  The caller adds its own white noise and scale.

Calibration and scoring.  No constant of devmon is fitted here; a benchmark that tunes a
constant on real noise must use one station (``CALIBRATION_STATION``) and score on the other
(``EVALUATION_STATION``), and say so.
"""

from __future__ import annotations

from dataclasses import dataclass
from functools import lru_cache
from pathlib import Path

import numpy as np

from analysis.cleaning import detect_steps
from analysis.formats import read_pbo_pos, read_tenv3

# ``../shared/reference-data`` beside the checkout, else where this machine keeps it (a clone
# or worktree elsewhere, as .ci/run makes)
_BESIDE = Path(__file__).resolve().parents[1].parent / "shared" / "reference-data"
DATA_DIR = _BESIDE if _BESIDE.is_dir() else Path("/work/shared/reference-data")
BLOCK_DAYS = 365
STRIDE_DAYS = 91
MAX_GAP_DAYS = 3.0
OUTLIER_MADS = 5.0
CALIBRATION_STATION = "LHAS"
EVALUATION_STATION = "P156"
#: Equipment changes named in the data's README (LHAS: antenna height 0.0000 -> 0.0580 m).
KNOWN_STEPS = {"LHAS": ("2007-01-01",), "P156": ()}
_DAY_NS = 86_400_000_000_000


@dataclass(frozen=True)
class StationNoise:
    """One station's daily residuals in mm: ``day`` (datetime64[D]) and ``enu`` (3 x n)."""

    station: str
    day: np.ndarray
    enu: np.ndarray
    steps: tuple[np.datetime64, ...]
    outlier_days: int

    def describe(self) -> str:
        scatter = ", ".join(f"{c} {s:.2f}" for c, s in zip("enu", self.enu.std(axis=1)))
        return (f"{self.station}: {self.day.size} days {self.day[0]}..{self.day[-1]}, "
                f"residual s.d. (mm) {scatter}; steps {[str(s) for s in self.steps]}; "
                f"{self.outlier_days} outlier days dropped")


def _read(station: str) -> tuple[np.ndarray, np.ndarray]:
    if station == "P156":
        d = read_pbo_pos(DATA_DIR / "P156.pbo.final_igs08.pos")
        enu = np.vstack([d["de"], d["dn"], d["du"]])
    elif station == "LHAS":
        d = read_tenv3(DATA_DIR / "LHAS.tenv3")
        enu = np.vstack([d["e"], d["n"], d["u"] - d["antenna_m"]])
    else:
        raise ValueError(f"unknown station {station!r}: use P156 or LHAS")
    return d["t"].astype("datetime64[D]"), 1000.0 * (enu - enu[:, :1])


def _design(years: np.ndarray, step_years: list[float]) -> np.ndarray:
    w = 2 * np.pi * years
    cols = [np.ones_like(years), years, np.sin(w), np.cos(w), np.sin(2 * w), np.cos(2 * w)]
    cols += [(years >= s).astype(float) for s in step_years]
    return np.column_stack(cols)


@lru_cache(maxsize=None)
def station_noise(station: str) -> StationNoise:
    """The station's residuals after trend, seasonal terms and steps (known and detected)."""
    day, enu = _read(station)
    years = (day - day[0]).astype(np.float64) / 365.25
    steps = {np.datetime64(s, "D") for s in KNOWN_STEPS[station]}
    t_ns = day.astype("datetime64[ns]")
    for x in enu:
        found = detect_steps(t_ns, x / 1000.0, window_days=20.0, min_step_m=0.003)
        steps |= {np.datetime64(s.time, "D") for s in found}
    steps = sorted(s for s in steps if day[0] < s <= day[-1])
    step_years = [float((s - day[0]).astype(np.float64) / 365.25) for s in steps]
    a = _design(years, step_years)
    resid = np.vstack([x - a @ np.linalg.lstsq(a, x, rcond=None)[0] for x in enu])
    keep = np.all(_inliers(resid), axis=0)
    return StationNoise(station, day[keep], resid[:, keep], tuple(steps), int((~keep).sum()))


def _inliers(resid: np.ndarray) -> np.ndarray:
    """Days within ``OUTLIER_MADS`` scaled MADs of the component's median (a bad daily
    solution, such as P156's -220 mm north in 2012, would become a two-day bump of 48
    hourly epochs once interpolated, which no hourly receiver shows)."""
    med = np.median(resid, axis=1, keepdims=True)
    mad = 1.4826 * np.median(np.abs(resid - med), axis=1, keepdims=True)
    return np.abs(resid - med) <= OUTLIER_MADS * mad


def blocks(station: str) -> list[tuple[str, int]]:
    """(station, start day index) of every one-year block that starts a whole number of
    strides into the record and fits in it."""
    noise = station_noise(station)
    span = (noise.day - noise.day[0]).astype(np.int64)
    starts = range(0, int(span[-1]) - BLOCK_DAYS + 1, STRIDE_DAYS)
    return [(station, int(np.searchsorted(span, s))) for s in starts]


def daily(block: tuple[str, int]) -> tuple[np.ndarray, np.ndarray]:
    """A block's daily residuals: days since its first day (float) and enu (3 x n, mm)."""
    noise = station_noise(block[0])
    day0 = noise.day[block[1]]
    keep = (noise.day >= day0) & (noise.day < day0 + BLOCK_DAYS)
    days = (noise.day[keep] - day0).astype(np.float64)
    return days, noise.enu[:, keep]


def hourly(block: tuple[str, int], hours: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """A block's residuals linearly interpolated at ``hours`` (hours since the block's first
    day, noon of a daily solution being its time): enu (3 x n, mm) and whether each hour
    has data (False inside a gap longer than ``MAX_GAP_DAYS``)."""
    days, enu = daily(block)
    t = hours / 24.0 - 0.5
    enu_h = np.vstack([np.interp(t, days, x) for x in enu])
    after = np.clip(np.searchsorted(days, t), 1, days.size - 1)
    gap = days[after] - days[after - 1]
    has = (gap <= MAX_GAP_DAYS) & (t >= days[0]) & (t <= days[-1])
    return enu_h, has


if __name__ == "__main__":
    for name in ("LHAS", "P156"):
        print(station_noise(name).describe(), f"{len(blocks(name))} blocks")

"""Failure time of an accelerating slope from its displacement: Voight's law with alpha = 2
(Fukuzono's linear inverse velocity) fitted to the positions themselves, with a profile-
likelihood interval under time-correlated noise.

Why not a line through windowed inverse velocities (the method this replaced)?  Measured
on the reference server's slope and on synthetic slopes with white + flicker noise
(``benchmarks/bench_forecast.py``): (1) a least-squares velocity over a window on a convex
displacement curve is biased, the more so near failure; (2) the windows end at the last
epoch, so moving the data end by 2 h re-cuts every window and moved the forecast by up to
60 h; (3) inverse velocities are a non-linear function of noisy velocities and their
errors are correlated (flicker noise), which Fieller's interval, built for independent
Gaussian errors, does not know.  Its 95 % interval held the truth in 72 % of trials 3 days
before failure.

The model.  Steady creep until an onset ``ta``, then velocity ``b / (tf - t)``:

    x(t) = a + c min(t - ta, 0) + b log((tf - ta) / (tf - max(t, ta)))

(the inverse velocity after the onset is (tf - t) / b: a straight line reaching zero at the
failure ``tf``; Voight 1988 alpha = 2, which is the reference server's physics).  For given
(ta, tf) it is linear in (a, c, b); (ta, tf) are profiled on a grid: ``ta`` over the record
(or fixed when the onset is given), ``tf`` over lead times from minutes to beyond
``max_horizon_days`` and infinity (where the model becomes a velocity step: no failure).

The data.  Positions are reduced to robust (median) bins of 6 hours on a UTC grid - so
moving the data end re-cuts at most the last bin - and bins far from the fit (5 robust
sigmas) are dropped.  Noise: an AR(1) process between bins (its correlation estimated from
the residuals, irregular spacing allowed), the fit done by generalised least squares on the
whitened series; what is left of longer-memory (flicker) noise is measured by the variance
of block means of the whitened residuals (for white residuals m times the variance of means
of m is their variance; flicker makes it grow) and the likelihood-ratio threshold is scaled
by it.  The interval is the set of ``tf`` whose profile residual sum of squares stays
within (1 + k q^2 / (n - p)) of the best, q Student's quantile, k that scale: asymmetric,
longer on the far side.

Refusals: fewer than ``MIN_BINS`` bins; no acceleration (the best fit is a steady velocity,
or the velocity falls), and a failure time that the data cannot bound (the profile never
leaves the interval before ``max_horizon_days``).  ``forecast_from_displacement`` adds the
refusals of a motion not resolved above its noise (fewer than ``MIN_POINTS`` windowed
velocities of at least ``MIN_VELOCITY_SNR`` sigmas, ``analysis.inverse_velocity``) and of
an interval reaching beyond ``MAX_HORIZON_DAYS``, and states the result
(``FailureForecast``).  Alpha is fixed at 2: the physics of the reference server and of the
synthetic slopes is alpha = 2, and fitting alpha as well widened the intervals (the forecast
is then hardly bounded 14 days ahead); for alpha > 2 the forecast comes early (the safe side).
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from typing import TYPE_CHECKING

import numpy as np

from analysis.stats import student_t_quantile
from analysis.timebase import as_datetime64

if TYPE_CHECKING:
    from analysis.inverse_velocity import InverseVelocity

# What ``forecast_from_displacement`` (the forecast the pipeline and the report use) needs:
# MIN_POINTS independent windowed velocities (16 days at 2-day windows: a slope, its scatter
# and its fit mean something from 6 degrees of freedom on), each at least MIN_VELOCITY_SNR
# sigmas (below, an inverse velocity is noise); the positions of the last WINDOW_DAYS; an
# interval at CONFIDENCE ending no more than MAX_HORIZON_DAYS after the data (the method is
# a short-term forecast: a crossing further ahead says only that none is imminent).
MIN_POINTS = 8
MIN_VELOCITY_SNR = 2.0
CONFIDENCE = 0.95
MAX_HORIZON_DAYS = 365.0
WINDOW_DAYS = 180.0
MIN_BINS = 12  # bins of positions the five-parameter model needs to leave residual freedom
_NS_PER_DAY = 86_400e9

BIN_DAYS = 0.25
ROBUST_SIGMAS = 5.0
ONSET_CANDIDATES = 40
LEAD_GRID = 320
# The block-mean measure of flicker noise sees only what the fitted curve has not absorbed:
# on synthetic slopes with white + flicker noise the likelihood ratio at the true failure
# time needed 1.5-2.8 times that measure for 95 % coverage (benchmarks/bench_forecast.py),
# so the threshold is raised by this factor.
CALIBRATION = 2.5
FINE_GRID = 64


@dataclass(frozen=True)
class DisplacementFit:
    """The result of ``fit_failure``: ``ok`` False with ``why`` ('no acceleration',
    'unbounded', 'too few') when there is no bounded forecast.  Times in days on the caller's
    axis; ``b_mm`` the acceleration amplitude (velocity = b / (tf - t) after the onset)."""

    ok: bool
    why: str = ""
    tf: float = math.nan
    lo: float = math.nan
    hi: float = math.nan
    ta: float = math.nan
    b_mm: float = math.nan
    rho: float = math.nan
    inflation: float = math.nan
    n_bins: int = 0
    lr_velocity_step: float = math.nan  # the likelihood-ratio figure of "no failure"
    threshold: float = math.nan


def bin_series(ns: np.ndarray, x_mm: np.ndarray, bin_days: float = BIN_DAYS
               ) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """Median of ``x_mm`` and mean time (days since the first bin's start, a UTC grid) per
    bin of ``bin_days``; ``ns``: int64 nanoseconds since the Unix epoch.  Returns times
    (days, relative to the returned origin), medians, counts, after a check on the median
    spacing: a bin must hold at least half its expected epochs (at least 1)."""
    width = int(round(bin_days * 86_400e9))
    key = ns // width  # ``ns`` is in time order, so bins are contiguous runs
    uniq, start, count = np.unique(key, return_index=True, return_counts=True)
    spacing = np.diff(ns)
    spacing = float(np.median(spacing[spacing > 0])) if (spacing > 0).any() else float(width)
    need = max(1, int(math.ceil(0.5 * width / spacing)))
    origin = int(uniq[0]) * width if uniq.size else 0
    xs = x_mm[np.lexsort((x_mm, key))]  # sorted by value within each bin
    med = 0.5 * (xs[start + (count - 1) // 2] + xs[start + count // 2])
    sums = np.add.reduceat((ns - origin).astype(np.float64), start) if uniq.size else start
    tmean = sums / count / 86_400e9
    keep = count >= need
    return tmean[keep], med[keep], count[keep]


def _whiten(z: np.ndarray, phi: np.ndarray) -> np.ndarray:
    """Exact AR(1) whitening along the last axis with per-step correlations ``phi``
    (phi[k] between elements k-1 and k; phi[0] unused)."""
    out = np.empty_like(z)
    out[..., 0] = z[..., 0]
    s = np.sqrt(1.0 - phi[1:] ** 2)
    out[..., 1:] = (z[..., 1:] - phi[1:] * z[..., :-1]) / s
    return out


def _suffix_sums(z: np.ndarray) -> np.ndarray:
    """Sums of ``z`` along its last axis from each index to the end, with a final 0 (index n:
    nothing left)."""
    out = np.zeros(z.shape[:-1] + (z.shape[-1] + 1,))
    out[..., :-1] = np.cumsum(z[..., ::-1], axis=-1)[..., ::-1]
    return out


def _profile(t: np.ndarray, y: np.ndarray, phi: np.ndarray, ta_grid: np.ndarray,
             tf_grid: np.ndarray) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """Residual sums of squares (ta x tf) of the whitened fit, the amplitude b, and (ta,)
    sums of the no-failure (velocity step, tf = infinity) fits.

    For each (ta, tf) the model's columns are 1, h = min(t - ta, 0) and g = log((tf - ta) /
    (tf - max(t, ta))); b comes from the Schur complement of (1, h) in the normal
    equations.  g is zero before the onset and, from the first epoch k0 at or after it,
    L(tf, t) - c(tf, ta) with L = log((tf - t0) / (tf - t)) and c = L at ta; whitening is
    linear and h is zero from k0 on, so every product of whitened g with whitened 1, h, y
    and g is the k0 term plus suffix sums (from k0 + 1) of products with whitened L, which
    do not depend on the onset.  One (tf x epochs) pass then serves every onset: ~10x less
    work than whitening g per onset, as the first version did (the forecast was most of a
    creeping rover's analysis; tests/test_forecast_profile.py holds both to 1e-9)."""
    n = t.size
    ph = phi.copy()
    ph[0] = 0.0
    sd = np.ones(n)
    sd[1:] = np.sqrt(1.0 - ph[1:] ** 2)
    yw = _whiten(y, ph)
    one = _whiten(np.ones(n), ph)
    with np.errstate(divide="ignore", invalid="ignore"):
        lg = np.log((tf_grid[:, None] - t[0]) / (tf_grid[:, None] - t[None, :]))  # (tf, n)
        cp = np.log((tf_grid[None, :] - t[0]) / (tf_grid[None, :] - ta_grid[:, None]))
    lw = _whiten(lg, ph)
    suf_ll = _suffix_sums(lw * lw)
    suf_l1 = _suffix_sums(lw * one)
    suf_ly = _suffix_sums(lw * yw)
    suf_11 = _suffix_sums(one * one)
    suf_1y = _suffix_sums(one * yw)
    k0 = np.searchsorted(t, ta_grid, side="left")  # first epoch at or after each onset
    k0c = np.minimum(k0, n - 1)
    nxt = np.minimum(k0 + 1, n)
    hw = _whiten(np.minimum(t[None, :] - ta_grid[:, None], 0.0), ph)  # (ta, n)
    st = _whiten(np.maximum(t[None, :] - ta_grid[:, None], 0.0), ph)
    eps = 1e-9
    a11 = np.empty((ta_grid.size, 2, 2))
    a11[:, 0, 0] = one @ one
    a11[:, 0, 1] = a11[:, 1, 0] = hw @ one
    hh = np.einsum("ij,ij->i", hw, hw)
    a11[:, 1, 1] = hh + eps * (1.0 + hh)
    inv11 = np.linalg.inv(a11)
    r1 = np.stack([np.full(ta_grid.size, one @ yw), hw @ yw], axis=1)  # (ta, 2)
    rss0 = yw @ yw - np.einsum("ti,tij,tj->t", r1, inv11, r1)
    # the whitened g at k0, then its products with 1, h, y and itself: (ta, tf)
    g0 = (lg[:, k0c].T - cp) / sd[k0c][:, None]
    ll, l1, ly = suf_ll[:, nxt].T, suf_l1[:, nxt].T, suf_ly[:, nxt].T
    c11, c1y = suf_11[nxt][:, None], suf_1y[nxt][:, None]
    a22 = g0 * g0 + ll - 2.0 * cp * l1 + cp * cp * c11
    a12 = np.stack([g0 * one[k0c][:, None] + l1 - cp * c11,
                    g0 * hw[np.arange(ta_grid.size), k0c][:, None]])  # (2, ta, tf)
    r2 = g0 * yw[k0c][:, None] + ly - cp * c1y
    kk = np.einsum("ptf,tpq->qtf", a12, inv11)  # a12 inv11
    s = a22 - np.einsum("qtf,qtf->tf", kk, a12)
    num = r2 - np.einsum("qtf,tq->tf", kk, r1)
    with np.errstate(divide="ignore", invalid="ignore"):
        b = num / s
    r = rss0[:, None] - np.where(s > 0, num * b, 0.0)
    valid = (s > 0) & (b > 0) & (k0 < n)[:, None]
    rss = np.where(valid, np.maximum(r, 0.0), np.inf)
    bb = np.where(valid, b, np.nan)
    # velocity step at ta: x = a + c min(t - ta, 0) + d max(t - ta, 0)
    xs = np.stack([np.broadcast_to(one, hw.shape), hw, st], axis=1)  # (ta, 3, n)
    m = np.einsum("tin,tjn->tij", xs, xs)
    m[:, 1, 1] += eps * (1.0 + hh)
    rhs = xs @ yw  # (ta, 3)
    coef = np.linalg.solve(m, rhs[:, :, None])[:, :, 0]
    rss_step = yw @ yw - np.einsum("ti,ti->t", coef, rhs)
    return rss, bb, rss_step


def _inflation(res: np.ndarray, max_block: int) -> float:
    """Long-memory scale of whitened residuals: the largest m var(means of m) / var over
    block sizes m = 2, 4, ... up to ``max_block`` (1 for white residuals), at least 1."""
    v = float(np.mean(res * res))
    if not v > 0:
        return 1.0
    best = 1.0
    m = 2
    while m <= max_block and res.size // m >= 6:
        k = res.size // m
        means = res[: k * m].reshape(k, m).mean(axis=1)
        best = max(best, m * float(np.mean(means * means)) / v)
        m *= 2
    return best


def fit_failure(ns: np.ndarray, x_mm: np.ndarray, *, end_ns: int, confidence: float,
                max_horizon_days: float, onset_ns: int | None = None,
                bin_days: float = BIN_DAYS) -> tuple[DisplacementFit, int]:
    """Fit the alpha = 2 displacement model to ``x_mm`` at times ``ns`` (int64 ns since the
    Unix epoch, in time order) and bound its failure time.  Returns the fit (times in days
    since the returned origin, int64 ns) and that origin."""
    tb, yb, _ = bin_series(ns, x_mm, bin_days)
    width = int(round(bin_days * 86_400e9))
    origin = int(ns[0] // width * width)
    t_end = (end_ns - origin) / 86_400e9
    if tb.size < MIN_BINS:
        return DisplacementFit(False, "too few", n_bins=int(tb.size)), origin
    span = tb[-1] - tb[0]

    def grids(n_lead: int, n_onset: int) -> tuple[np.ndarray, np.ndarray]:
        lead = np.geomspace(0.01, 2.0 * max_horizon_days, n_lead)
        if onset_ns is None:
            latest = tb[-1] - max(4.0, 0.05 * span)
            ta = np.linspace(tb[0], max(latest, tb[0]), n_onset)
        else:
            ta = np.array([max((onset_ns - origin) / 86_400e9, tb[0])])
        return lead, ta

    # outliers and the AR(1) correlation on a coarse grid, then the profile on a fine one
    lead, ta_grid = grids(LEAD_GRID // 4, ONSET_CANDIDATES // 2)
    tf_grid = t_end + lead
    keep = np.ones(tb.size, bool)
    rho = 0.0
    for _ in range(3):
        t, y = tb[keep], yb[keep]
        phi = np.concatenate([[0.0], rho ** (np.diff(t) / bin_days)])
        rss, bb, rss_step = _profile(t, y, phi, ta_grid, tf_grid)
        i, j = np.unravel_index(int(np.argmin(rss)), rss.shape)
        if not np.isfinite(rss[i, j]):
            return DisplacementFit(False, "no acceleration", n_bins=int(t.size)), origin
        # residuals of the best fit, unwhitened, to estimate rho and flag outliers
        res_all = _residuals(tb, yb, ta_grid[i], tf_grid[j], keep)
        r = res_all[keep]
        mad = 1.4826 * float(np.median(np.abs(r - np.median(r))))
        new_keep = np.abs(res_all) <= ROBUST_SIGMAS * max(mad, 1e-9)
        dt = np.diff(tb[keep])
        adj = dt <= 1.5 * bin_days
        rr = r[1:][adj] @ r[:-1][adj]
        rho_new = float(np.clip(rr / max(float(r @ r) * adj.mean(), 1e-300), 0.0, 0.95))
        if np.array_equal(new_keep, keep) and abs(rho_new - rho) < 0.02:
            break
        keep, rho = new_keep, rho_new
    lead, ta_grid = grids(LEAD_GRID, ONSET_CANDIDATES)
    tf_grid = t_end + lead
    t, y = tb[keep], yb[keep]
    n, p = t.size, 5  # a, c, b, ta, tf
    phi = np.concatenate([[0.0], rho ** (np.diff(t) / bin_days)])
    rss, bb, rss_step = _profile(t, y, phi, ta_grid, tf_grid)
    prof = rss.min(axis=0)
    j = int(np.argmin(prof))
    i = int(np.argmin(rss[:, j]))
    best = float(prof[j])
    if not np.isfinite(best):
        return DisplacementFit(False, "no acceleration", n_bins=int(n)), origin
    xw = _whiten(_residuals(t, y, ta_grid[i], tf_grid[j], np.ones(n, bool)), phi)
    phase_bins = int((t >= ta_grid[i]).sum())
    k = CALIBRATION * _inflation(xw, max(2, phase_bins // 4))
    q = student_t_quantile(0.5 + 0.5 * confidence, max(n - p, 1))
    thr = k * q * q / max(n - p, 1)
    step_ratio = float(rss_step.min()) / best - 1.0
    inside = prof / best - 1.0 <= thr
    lo_j, hi_j = _run(inside, j)
    # a finer grid over the interval (and one coarse step either side) for its edges
    fine = np.geomspace(lead[max(lo_j - 1, 0)], lead[min(hi_j + 1, lead.size - 1)], FINE_GRID)
    rss_f, bb_f, _ = _profile(t, y, phi, ta_grid, t_end + fine)
    prof_f = rss_f.min(axis=0)
    jf = int(np.argmin(prof_f))
    if prof_f[jf] < best:
        best, i, j = float(prof_f[jf]), int(np.argmin(rss_f[:, jf])), jf
        b_mm = float(bb_f[i, jf])
        step_ratio = float(rss_step.min()) / best - 1.0
    else:
        b_mm = float(bb[i, j])
        jf = int(np.argmin(np.abs(np.log(fine) - np.log(lead[j]))))
    ratio_f = prof_f / best - 1.0
    fit = dict(ta=float(ta_grid[i]), b_mm=b_mm, rho=rho, inflation=k, n_bins=int(n),
               lr_velocity_step=step_ratio / thr if thr > 0 else math.inf, threshold=thr)
    tf = t_end + math.exp(_refine(np.log(fine), ratio_f, jf))
    if tf - t_end > max_horizon_days or step_ratio <= 0.0:
        return DisplacementFit(False, "no acceleration", tf=tf, **fit), origin
    if step_ratio <= thr or inside[-1]:
        return DisplacementFit(False, "unbounded", tf=tf, **fit), origin
    inside_f = ratio_f <= thr
    a, b = _run(inside_f, jf)
    lo = (t_end if lo_j == 0 and a == 0
          else t_end + (_cross(fine, ratio_f, a - 1, a, thr) if a > 0 else fine[0]))
    hi = t_end + (_cross(fine, ratio_f, b, b + 1, thr) if b < fine.size - 1 else fine[-1])
    return DisplacementFit(True, tf=tf, lo=lo, hi=hi, **fit), origin


def _run(inside: np.ndarray, j: int) -> tuple[int, int]:
    """First and last index of the run of True in ``inside`` around ``j``."""
    a = j
    while a > 0 and inside[a - 1]:
        a -= 1
    b = j
    while b < inside.size - 1 and inside[b + 1]:
        b += 1
    return a, b


def _residuals(t, y, ta, tf, keep) -> np.ndarray:
    """Residuals (all points) of the ordinary least-squares fit on ``keep`` at (ta, tf)."""
    tm = np.maximum(t, ta)
    x = np.stack([np.ones_like(t), np.minimum(t - ta, 0.0),
                  np.log((tf - ta) / (tf - tm))], axis=1)
    if not (x[keep, 1] != 0).any():
        x = x[:, [0, 2]]
    coef, *_ = np.linalg.lstsq(x[keep], y[keep], rcond=None)
    return y - x @ coef


def _refine(u: np.ndarray, r: np.ndarray, j: int) -> float:
    """Parabolic refinement of the minimum of ``r`` over the grid ``u`` at index ``j``."""
    if 0 < j < u.size - 1 and np.isfinite(r[j - 1:j + 2]).all():
        u0, u1, u2 = u[j - 1:j + 2]
        r0, r1, r2 = r[j - 1:j + 2]
        den = (u0 - u1) * (u0 - u2) * (u1 - u2)
        aa = (u2 * (r1 - r0) + u1 * (r0 - r2) + u0 * (r2 - r1)) / den
        bb = (u2 * u2 * (r0 - r1) + u1 * u1 * (r2 - r0) + u0 * u0 * (r1 - r2)) / den
        if aa > 0:
            return float(np.clip(-bb / (2 * aa), u0, u2))
    return float(u[j])


def _cross(lead: np.ndarray, ratio: np.ndarray, i: int, k: int, thr: float) -> float:
    """Lead time where ``ratio`` crosses ``thr`` between grid points i and k (log-linear)."""
    r0, r1 = ratio[i], ratio[k]
    if not (np.isfinite(r0) and np.isfinite(r1)) or r0 == r1:
        return float(lead[k] if ratio[i] <= thr else lead[i])
    f = (thr - r0) / (r1 - r0)
    return float(math.exp(math.log(lead[i]) + f * (math.log(lead[k]) - math.log(lead[i]))))


# ----------------------------------------------------------------------------- the forecast

@dataclass(frozen=True)
class FailureForecast:
    """The inverse-velocity forecast of the time of failure, or the reason there is none.

    ``supported`` False: no forecast can honestly be made, ``reason`` says why in words;
    the fit figures that were computed are still given, for the report.  When supported:
    ``failure_time`` where the fitted inverse velocity reaches zero, and ``interval`` its
    ``confidence`` interval (profile likelihood allowing for correlated noise).
    ``onset``: the first resolved inverse-velocity value at or after the fitted onset,
    ``onset_automatic`` whether the onset was fitted (not given); ``n_points`` resolved
    values from it over ``span_days``; ``r2``: how well the fitted line (tf - t) / b
    explains them; ``slope_per_mm``: d(1/v)/dt = -1 / b, 1/mm (negative when accelerating);
    ``lag1_autocorrelation``: the AR(1) correlation of the position residuals and the
    ``effective_points`` the uncertainty stands for; ``last_time``: the latest resolved
    inverse-velocity value in the phase; ``data_end``: the last epoch; ``lead_days``:
    failure time minus ``data_end``.  ``method``: "displacement" (Voight's law fitted to the
    positions, ``forecast_from_displacement``); ``alpha`` Voight's exponent used (2:
    Fukuzono's straight inverse velocity); ``noise_inflation``: the factor by which the
    interval's threshold was raised for correlated (flicker) noise."""

    supported: bool
    reason: str
    failure_time: np.datetime64 | None = None
    interval: tuple[np.datetime64, np.datetime64] | None = None
    confidence: float = CONFIDENCE
    onset: np.datetime64 | None = None
    onset_automatic: bool = True
    n_points: int = 0
    span_days: float = float("nan")
    r2: float = float("nan")
    slope_per_mm: float = float("nan")
    lag1_autocorrelation: float = float("nan")
    effective_points: float = float("nan")
    last_time: np.datetime64 | None = None
    lead_days: float = float("nan")
    method: str = "displacement"
    alpha: float = 2.0
    data_end: np.datetime64 | None = None
    noise_inflation: float = float("nan")

    def describe(self) -> str:
        """One sentence for a report."""
        if not self.supported:
            return f"No failure-time forecast: {self.reason}."
        lo, hi = self.interval
        return (f"Inverse velocity reaches zero at {_iso(self.failure_time)} "
                f"({self.lead_days:.1f} days after the last data; "
                f"{100 * self.confidence:g} % interval {_iso(lo)} to {_iso(hi)}), from "
                f"the displacement since {_iso(self.onset)} fitted by Voight's law with "
                f"alpha = {self.alpha:g} (inverse velocity falling linearly), the "
                f"interval allowing for correlated noise; the {self.n_points} "
                f"inverse-velocity values since the onset agree with it to R² "
                f"{self.r2:.2f}.")


def _days(t, t0: np.datetime64) -> np.ndarray:
    return (as_datetime64(t) - t0).astype("timedelta64[ns]").astype(np.float64) / _NS_PER_DAY


def _at(t0: np.datetime64, days: float) -> np.datetime64:
    return t0 + np.timedelta64(int(round(days * _NS_PER_DAY)), "ns")


def _iso(t: np.datetime64 | None) -> str:
    return "-" if t is None else str(np.datetime_as_string(t, unit="m")) + "Z"


def forecast_from_displacement(iv: InverseVelocity, *, start=None,
                               min_points: int = MIN_POINTS, confidence: float = CONFIDENCE,
                               max_horizon_days: float = MAX_HORIZON_DAYS,
                               min_velocity_snr: float = MIN_VELOCITY_SNR,
                               window_days: float = WINDOW_DAYS) -> FailureForecast:
    """Failure time from the displacement behind ``iv`` (``iv.data_t``, ``iv.data_mm``):
    Voight's law with alpha = 2 (velocity b / (tf - t) after an onset, steady creep before;
    the inverse velocity falls linearly to zero at tf, Fukuzono 1985) fitted to the
    positions of the last ``window_days``, with a profile-likelihood interval of tf that
    allows for time-correlated noise (``fit_failure``) - or a refusal saying why not.

    The windowed inverse velocities of ``iv`` are used only to say whether the motion is
    resolved at all (at least ``min_points`` values with a velocity of ``min_velocity_snr``
    sigmas: below that an inverse velocity is noise), and for the figures: ``onset`` is the
    first of them at or after the fitted onset, ``last_time`` the last, ``n_points`` their
    count, ``r2`` how well the fitted inverse-velocity line (tf - t) / b explains them
    (weighted by their delta-method variance), ``slope_per_mm`` = -1 / b.

    ``start``: the onset, when known (else it is fitted).  Refusals: too few resolved
    velocity values (or in the phase since ``start``); no acceleration (a steady velocity,
    or a velocity step, fits as well: steady creep or no motion); a failure time the data
    cannot bound at ``confidence``; an interval reaching beyond ``max_horizon_days``."""
    if not 0.5 < confidence < 1.0:
        raise ValueError(f"confidence must be between 0.5 and 1, not {confidence}")
    if min_points < 3:
        raise ValueError(f"min_points must be at least 3, not {min_points}")
    cl = f"{100 * confidence:g} %"
    y, v, sig = (iv.inverse_velocity_day_per_mm, iv.velocity_mm_per_day,
                 iv.velocity_sigma_mm_per_day)
    with np.errstate(invalid="ignore"):
        resolved = np.isfinite(y) & (y > 0) & (v >= min_velocity_snr * sig) & (sig > 0)
    usable = int(resolved.sum())
    unresolved = int((np.isfinite(y) & (y > 0) & ~resolved).sum())
    t_data = as_datetime64(iv.data_t)
    last = t_data[-1] if t_data.size else None
    base = dict(confidence=confidence, method="displacement", alpha=2.0, data_end=last,
                onset_automatic=start is None)
    if usable < min_points:
        extra = (f" ({unresolved} more with a velocity under {min_velocity_snr:g} sigma "
                 f"of its noise)" if unresolved else "")
        return FailureForecast(False, f"only {usable} velocity values usable{extra}; "
                               f"need {min_points}: velocity not resolved above noise, or "
                               f"too short a series", n_points=usable, last_time=last, **base)
    onset_ns = None
    if start is not None:
        start = as_datetime64(start)
        in_phase = resolved & (iv.t >= start)
        if int(in_phase.sum()) < min_points:
            return FailureForecast(False, f"only {int(in_phase.sum())} points in the "
                                   f"accelerating phase (since {_iso(start)}); need "
                                   f"{min_points}", onset=start, n_points=int(in_phase.sum()),
                                   last_time=last, **base)
        onset_ns = int(start.astype("datetime64[ns]").astype(np.int64))
    ns = t_data.astype("datetime64[ns]").astype(np.int64)
    end_ns = int(ns[-1])
    recent = ns >= end_ns - int(window_days * _NS_PER_DAY)
    fit, origin = fit_failure(ns[recent], np.asarray(iv.data_mm)[recent], end_ns=end_ns,
                              confidence=confidence, max_horizon_days=max_horizon_days,
                              onset_ns=onset_ns)
    t_origin = np.datetime64(origin, "ns")
    extra = dict(lag1_autocorrelation=fit.rho, noise_inflation=fit.inflation)
    if np.isfinite(fit.ta):
        onset_t = _at(t_origin, fit.ta)
        used = resolved & (iv.t >= onset_t)
        onset_shown = iv.t[used][0] if used.any() else onset_t
        last_shown = iv.t[used][-1] if used.any() else last
        extra.update(onset=onset_shown, n_points=int(used.sum()), last_time=last_shown,
                     span_days=float((last_shown - onset_shown) / np.timedelta64(1, "D")))
        if np.isfinite(fit.b_mm) and np.isfinite(fit.tf):
            extra.update(slope_per_mm=-1.0 / fit.b_mm,
                         r2=_line_r2(iv, used, fit.tf, fit.b_mm, t_origin))
    else:
        extra.update(last_time=last)
    if not fit.ok:
        if fit.why == "too few":
            reason = (f"only {fit.n_bins} six-hour bins of positions in the last "
                      f"{window_days:g} days: too short a series")
        elif fit.why == "no acceleration":
            reason = ("no onset of acceleration: a steady velocity (steady creep or no "
                      "motion) fits the displacement as well as an acceleration towards failure"
                      if start is None else
                      f"the displacement since {_iso(start)} shows no acceleration (inverse "
                      f"velocity not decreasing): a steady velocity fits as well")
        else:
            reason = (f"the acceleration is not significantly different from a steady "
                      f"velocity at {cl} once correlated noise is allowed for: the failure "
                      f"time cannot be bounded")
        return FailureForecast(False, reason, **{**base, **extra})
    t_end = (end_ns - origin) / _NS_PER_DAY
    if fit.hi - t_end > max_horizon_days:
        return FailureForecast(False, f"the {cl} interval of the failure time reaches "
                               f"{fit.hi - t_end:.0f} days beyond the last data (more than "
                               f"{max_horizon_days:g}): too uncertain to state",
                               **{**base, **extra})
    return FailureForecast(True, "", failure_time=_at(t_origin, fit.tf),
                           interval=(_at(t_origin, fit.lo), _at(t_origin, fit.hi)),
                           lead_days=float(fit.tf - t_end),
                           effective_points=float(fit.n_bins) / max(fit.inflation, 1.0),
                           **{**base, **extra})


def _line_r2(iv: InverseVelocity, used: np.ndarray, tf_days: float, b_mm: float,
             t_origin: np.datetime64) -> float:
    """Weighted R² of the inverse velocities ``used`` about the line (tf - t) / b."""
    if int(used.sum()) < 3:
        return float("nan")
    x = _days(iv.t[used], t_origin)
    y = iv.inverse_velocity_day_per_mm[used]
    line = np.maximum((tf_days - x) / b_mm, 1e-6)
    w = _weights(iv.velocity_sigma_mm_per_day[used], line)
    w = w / w.sum()
    ym = float(w @ y)
    tss = float(w @ (y - ym) ** 2)
    return 1.0 - float(w @ (y - line) ** 2) / tss if tss > 0 else float("nan")



def _weights(sigma_v: np.ndarray, inv: np.ndarray) -> np.ndarray:
    """Least-squares weights of inverse velocities: 1 / their variance, which by the delta
    method is (sigma_v * inv^2)^2 (the inverse of a velocity of 2 +- 0.7 mm/day is 0.5 +-
    0.18 day/mm, of 8 +- 0.7 is 0.125 +- 0.011: a creep-phase value is worth ~1/250 of a
    late one).  ``inv`` is the fitted line, so a value is not favoured for having come out
    low."""
    return 1.0 / (sigma_v * inv * inv) ** 2


__all__ = ["FailureForecast", "forecast_from_displacement", "fit_failure", "DisplacementFit",
           "bin_series", "BIN_DAYS", "CALIBRATION", "CONFIDENCE", "MAX_HORIZON_DAYS",
           "MIN_BINS", "MIN_POINTS", "MIN_VELOCITY_SNR", "ROBUST_SIGMAS", "WINDOW_DAYS"]

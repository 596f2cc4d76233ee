"""Failure time of an accelerating slope from its displacement: Voight's law, alpha fitted
(profiled), fitted to the positions themselves, with a profile-likelihood interval under
time-correlated noise that carries the uncertainty of alpha.

Why not a line through windowed inverse velocities (the method this replaced in issue 16)?
Measured on the reference server's slope and on synthetic slopes with white + flicker noise
(``benchmarks/bench_forecast.py``): (1) a least-squares velocity over a window on a convex
displacement curve is biased, the more so near failure; (2) the windows end at the last
epoch, so moving the data end by 2 h re-cuts every window and moved the forecast by up to
60 h; (3) inverse velocities are a non-linear function of noisy velocities and their
errors are correlated (flicker noise), which Fieller's interval, built for independent
Gaussian errors, does not know.  Its 95 % interval held the truth in 72 % of trials 3 days
before failure.

Why alpha is fitted (issue 28).  Until then alpha was fixed at 2 (Fukuzono's straight
inverse velocity, the reference server's physics) and the interval knew nothing else.  On
the benchmark's slopes with real noise (P156, ``--real-noise 1``), 3 days before failure,
its 95 % interval held the truth in 96.5 % of trials at alpha = 2 but 13 % at 2.1, 10.5 %
at 1.9, 3 % at 2.3 and 0.5 % at 1.7; for alpha > 2 it came LATE (median +38 h at 2.1,
+128 h at 2.3, late in all trials) - not early, as this docstring then said.

The model.  Steady creep until an onset ``ta``, then Voight's (1988) dv/dt = A v^alpha:
velocity ``b (tf - t)^(-1 / (alpha - 1))`` (v^-(alpha - 1) falls linearly to zero at the
failure ``tf``; at alpha = 2 the inverse velocity (tf - t) / b itself is a straight line):

    x(t) = a + c min(t - ta, 0) + b ((tf - ta)^p - (tf - max(t, ta))^p) / p,
    p = (alpha - 2) / (alpha - 1),   b log((tf - ta) / (tf - max(t, ta))) at alpha = 2.

For given (ta, tf, alpha) it is linear in (a, c, b); (ta, tf, alpha) are profiled: ``ta``
on a grid over the record (or fixed when the onset is given), ``tf`` over lead times from
minutes to beyond ``max_horizon_days`` and infinity (where the model becomes a velocity
step: no failure), alpha over ``ALPHA_RANGE`` (1.5-2.5) on a grid refined by bisection for
each ``tf`` (``_valley``).  For each ``tf`` the least residual sum of squares over onset and
alpha is its profile; the interval is the run of ``tf`` whose profile stays within
(1 + k q^2 / (n - p)) of the best, q Student's quantile, p = 6 parameters, k the noise
scale below: asymmetric, longer on the far side, and as wide as the alphas the data allow
make it (``FailureForecast.alpha_interval`` gives those alphas).

The data.  Positions are reduced to robust (median) bins of 6 hours on a UTC grid - so
moving the data end re-cuts at most the last bin - and bins far from the fit (5 robust
sigmas) are dropped.  Noise: an AR(1) process between bins (its correlation estimated from
the residuals, irregular spacing allowed), the fit done by generalised least squares on the
whitened series; what is left of longer-memory (flicker) noise is measured by the variance
of block means of the whitened residuals (for white residuals m times the variance of means
of m is their variance; flicker makes it grow), and k is that measure times
``CALIBRATION``, tuned on the real noise of one GNSS station (LHAS) and scored on another
(P156) and on simulated flicker noise (see the constant; figures in docs/benchmarks.md).

Which side it errs on (measured, ``bench_forecast.py``, 200 slopes per alpha and horizon,
alpha 1.7-2.3).  Three days before failure the 95 % interval held the failure in 97.5-100 %
of trials on P156 real noise and in 97.5-100 % on simulated flicker noise; the forecast
itself erred early more often than late: median error -0.5 to -9 h (P156) and -1 to -4 h
(simulated), 36-48 % of forecasts after the failure.  Further ahead the errors are larger: 14 days before failure the median
error was -9 to -57 h, 30 days before -75 to -311 h (early) on P156 and simulated noise,
but +34 h and +129 h at alpha = 2.3 on the calibration station's noise (LHAS, 100
slopes); and a single forecast can be days late - the demo's rover 12 days before failure: 96 h late, its interval from 4 days
before the failure.  The safe-side date is therefore the interval's early end, not the
forecast: it lay after the failure in at most 2.5 % (P156) and 3.2 % (simulated) of the
supported forecasts, at every alpha and horizon.  Outside ``ALPHA_RANGE`` the
forecast is biased towards the range's end: a slope of alpha = 2.7 was forecast late
(+64 h in the median 3 days before failure, late in 97 %, the interval holding the failure
in 35 %), one of alpha = 1.3 early (-44 h, interval holding it in none).

Refusals: fewer than ``MIN_BINS`` bins; no acceleration (the best fit is a steady velocity,
or the velocity falls), and a failure time that the data cannot bound (the profile never
leaves the interval before ``max_horizon_days``).  ``forecast_from_displacement`` adds the
refusals of a motion not resolved above its noise (fewer than ``MIN_POINTS`` windowed
velocities of at least ``MIN_VELOCITY_SNR`` sigmas, ``analysis.inverse_velocity``) and of
an interval reaching beyond ``MAX_HORIZON_DAYS``, and states the result
(``FailureForecast``).  30 days before failure 28-66 % of the P156 slopes were forecast
(32-66 % with alpha fixed: the acceleration has barely begun).  Fitting alpha costs width
(3 days before failure a median interval of 60-165 h on P156, against 16-111 h with alpha
fixed) and time: ~1.5 times the alpha = 2 fit's on accelerating slopes (a median of 18-31
ms per forecast against 12-20 ms, ``bench_forecast.py``'s ms column) and 2.5 times on
steady creep, the moving rover the pipeline meets most, where every pass runs before the
refusal (22 ms against 9, ``bench_forecast.py --creep 200``).

Size: ~880 lines, one module because the profile machinery (``_Profiler``, ``_valley``),
the fit (``fit_failure``) and the forecast the pipeline states (``FailureForecast``,
``forecast_from_displacement``) share the model, its grids and its constants; split, each
part would import the others' private pieces.
"""
from __future__ import annotations

import math
from dataclasses import dataclass
from typing import TYPE_CHECKING

import numpy as np

from analysis.stats import median, student_t_quantile
from analysis.timebase import as_datetime64
from analysis.words import counted

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
MIN_BINS = 12  # bins of positions the six-parameter model needs to leave residual freedom
N_PARAMETERS = 6  # a, c, b, onset, failure time, alpha
_NS_PER_DAY = 86_400e9

BIN_DAYS = 0.25
ROBUST_SIGMAS = 5.0
ONSET_CANDIDATES = 40
# Voight's alpha is profiled over ALPHA_RANGE (an assumption, not a finding: 1.5-2.5 around
# Fukuzono's 2, the value most often reported for slopes; outside it the forecast is biased,
# measured above): a grid every SCAN_ALPHA_STEP / ALPHA_STEP, then bisection per failure
# time (SCAN_LEVELS / FINE_LEVELS rounds: 0.1 / 2^4 = 0.006, as the valley of the fit
# across alpha at a given failure time was ~0.01 wide three days before failure).  Lead times: LEAD_GRID of them from 15 minutes to twice
# the horizon for the scan, FINE_GRID over the scan's run within SCAN_SLACK times the
# threshold (widened by FINE_WIDEN scan steps while the interval reaches its end).
ALPHA_RANGE = (1.5, 2.5)
SCAN_ALPHA_STEP = ALPHA_STEP = 0.1
SCAN_LEVELS = FINE_LEVELS = 4
LEAD_GRID = 48
FINE_GRID = 48
SCAN_SLACK = 2.0
FINE_WIDEN = 4
CLEANING_ALPHAS = (2.0,)  # outliers and the AR(1) correlation: an alpha = 2 fit is enough
CLEANING_LEADS = 80
# The block-mean measure of flicker noise sees only what the fitted curve has not absorbed
# (with alpha, onset and failure time free the curve absorbs much of a slow wander), so the
# threshold is raised by CALIBRATION.  Tuned on real noise of the calibration station only
# (LHAS, benchmarks/real_noise.py): the smallest of 2, 2.5, 3, ... with which the 95 %
# interval covered >= 95 % of all supported forecasts and >= 90 % in every (alpha, days
# before failure) cell, alpha 1.7-2.3 at 30/14/7/3 days, 100 trials per cell:
#   python benchmarks/bench_forecast.py --alpha --real-noise 1 --station LHAS \
#       --trials 100 --workers 1 --calibrate 2 2.5 3 3.5 4 5
# (2: 95.8 % pooled, 89.5 % at alpha 1.9 and 7 days; 2.5: 97.5 %, least cell 94.1 %).
# Scored on the evaluation station (P156) and on simulated flicker noise: docs/benchmarks.md.
CALIBRATION = 2.5


@dataclass(frozen=True)
class DisplacementFit:
    """The result of ``fit_failure``: ``ok`` False with ``why`` ('no acceleration',
    'unbounded', 'too few') when there is no bounded forecast.  Times in days on the caller's
    axis; ``b_mm`` the acceleration amplitude (velocity = b (tf - t)^(-1 / (alpha - 1))
    after the onset; b / (tf - t) at alpha = 2); ``alpha`` the best fit's Voight exponent,
    [``alpha_lo``, ``alpha_hi``] the alphas within the interval's threshold.  The
    interval is the run of failure times whose profile ratio (residual sum of squares over
    the best, minus 1) stays within ``threshold`` = ``threshold_unit`` x the calibration;
    ``profile_lead_days`` and ``profile_ratio`` give that ratio over lead times after the
    data end (for benchmarks: the calibration a trial's truth needed)."""

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
    alpha: float = math.nan
    alpha_lo: float = math.nan
    alpha_hi: float = math.nan
    threshold_unit: float = math.nan
    profile_lead_days: np.ndarray | None = None
    profile_ratio: np.ndarray | None = None


def bin_series(ns: np.ndarray, x_mm: np.ndarray, bin_days: float = BIN_DAYS
               ) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """Median of ``x_mm`` and mean time (days since the first bin's start, a UTC grid) per
    bin of ``bin_days``; ``ns``: int64 nanoseconds since the Unix epoch.  Returns times
    (days, relative to the returned origin), medians, counts, after a check on the median
    spacing: a bin must hold at least half its expected epochs (at least 1)."""
    width = round(bin_days * 86_400e9)
    key = ns // width  # ``ns`` is in time order, so bins are contiguous runs
    uniq, start, count = np.unique(key, return_index=True, return_counts=True)
    spacing = np.diff(ns)
    spacing = median(spacing[spacing > 0]) if (spacing > 0).any() else float(width)
    need = max(1, math.ceil(0.5 * width / spacing))
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


def _shape(tf, t, t0: float, p: float):
    """Voight's displacement after the onset up to a scale and an offset: ((tf - t0)^p -
    (tf - t)^p) / p, p = (alpha - 2) / (alpha - 1), and log((tf - t0) / (tf - t)) at p = 0
    (alpha = 2); zero at ``t0`` (the first epoch: the columns stay small)."""
    if abs(p) < 1e-6:  # the log form; (A^p - B^p) / p differs from it by O(p log^2)
        return np.log((tf - t0) / (tf - t))
    return (np.expm1(p * np.log(tf - t0)) - np.expm1(p * np.log(tf - t))) / p


def _shape_from_logs(log_t0, log_t, p):
    """``_shape`` from log(tf - t0) and log(tf - t); ``p`` a number or an array that
    broadcasts.  expm1 keeps (A^p - B^p) / p exact to rounding for any p != 0 (p = 1e-12
    stands for 0: it differs from the log form by ~1e-11 relative)."""
    p = np.where(p == 0.0, 1e-12, p)
    return (np.expm1(p * log_t0) - np.expm1(p * log_t)) / p


def _exponent(alpha: float) -> float:
    """p = (alpha - 2) / (alpha - 1) of ``_shape`` (exactly 0 at alpha = 2)."""
    return (alpha - 2.0) / (alpha - 1.0)


def _profile(t: np.ndarray, y: np.ndarray, phi: np.ndarray, ta_grid: np.ndarray,
             tf_grid: np.ndarray, p: float = 0.0
             ) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """``_profiles`` at one exponent ``p``: (ta, tf) sums and amplitudes, (ta,) step sums."""
    rss, bb, rss_step = _profiles(t, y, phi, ta_grid, tf_grid, np.array([p]))
    return rss[0], bb[0], rss_step


def _segment_suffix(z: np.ndarray, starts: np.ndarray) -> np.ndarray:
    """Sums of ``z`` along its last axis from each of ``starts`` (sorted, unique, < n) to
    the end, with a final 0 (nothing left): one pass over ``z`` (``np.add.reduceat``) and a
    cumulative sum over the segments, not over every element."""
    seg = np.add.reduceat(z, starts, axis=-1)
    out = np.zeros(z.shape[:-1] + (starts.size + 1,))
    out[..., :-1] = np.cumsum(seg[..., ::-1], axis=-1)[..., ::-1]
    return out


def _profiles(t: np.ndarray, y: np.ndarray, phi: np.ndarray, ta_grid: np.ndarray,
              tf_grid: np.ndarray, exponents: np.ndarray
              ) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """Residual sums of squares (exponent x ta x tf) of the whitened fit, the amplitude b,
    and (ta,) sums of the no-failure (velocity step, tf = infinity) fits (``_Profiler``).
    ``exponents``: (E,), or (E, tf) for an exponent per failure time."""
    prof = _Profiler(t, y, phi, ta_grid)
    rss, bb = prof.sums(prof.logs(tf_grid), exponents)
    return rss, bb, prof.rss_step


@dataclass(frozen=True)
class _Logs:
    """log(tf - t) (tf, n), log(tf - t0) (tf,) and log(tf - ta) (ta, tf) of a tf grid."""

    tf: np.ndarray
    t: np.ndarray
    t0: np.ndarray
    ta: np.ndarray


class _Profiler:
    """Residual sums of squares of the whitened fit over (exponent, onset, failure time).

    For each (ta, tf) and exponent p the model's columns are 1, h = min(t - ta, 0) and
    g = ``_shape``(tf, max(t, ta), ta, p); b comes from the Schur complement of (1, h) in
    the normal equations.  g is zero before the onset and, from the first epoch k0 at or
    after it, L(tf, t) - c(tf, ta) with L = ``_shape``(tf, t, t0, p) and c = L at ta;
    whitening is linear and h is zero from k0 on, so every product of whitened g with
    whitened 1, h, y and g is the k0 term plus suffix sums (from k0 + 1) of products with
    whitened L, which do not depend on the onset.  One (tf x epochs) pass per exponent
    then serves every onset: ~10x less work than whitening g per onset, as the first
    version did; the suffix sums are needed at the onsets only, so they are sums over the
    segments between onsets (tests/test_forecast_profile.py holds this to the first
    version, per onset and exponent, to 1e-9).  What depends only on the data and the
    onsets is computed once (here), log(tf - t) once per tf grid (``logs``), and the rest
    per exponent (``sums``): the forecast makes ~10 passes over the same data."""

    def __init__(self, t: np.ndarray, y: np.ndarray, phi: np.ndarray, ta_grid: np.ndarray):
        n = t.size
        ph = phi.copy()
        ph[0] = 0.0
        self.t, self.ta_grid, self.ph = t, ta_grid, ph
        self.sd = np.ones(n)
        self.sd[1:] = np.sqrt(1.0 - ph[1:] ** 2)
        self.yw = yw = _whiten(y, ph)
        self.one = one = _whiten(np.ones(n), ph)
        k0 = np.searchsorted(t, ta_grid, side="left")  # first epoch at or after each onset
        self.k0c = k0c = np.minimum(k0, n - 1)
        self.has_phase = (k0 < n)[:, None]
        nxt = np.minimum(k0 + 1, n)
        self.starts = np.unique(nxt[nxt < n])
        self.at = np.searchsorted(self.starts, nxt)  # nxt's suffix (starts.size: the 0)
        hw = _whiten(np.minimum(t[None, :] - ta_grid[:, None], 0.0), ph)  # (ta, n)
        st = _whiten(np.maximum(t[None, :] - ta_grid[:, None], 0.0), ph)
        eps = 1e-9
        a11 = np.empty((ta_grid.size, 2, 2))
        a11[:, 0, 0] = one @ one
        a11[:, 0, 1] = a11[:, 1, 0] = hw @ one
        hh = np.einsum("ij,ij->i", hw, hw)
        a11[:, 1, 1] = hh + eps * (1.0 + hh)
        self.inv11 = np.linalg.inv(a11)
        self.r1 = np.stack([np.full(ta_grid.size, one @ yw), hw @ yw], axis=1)  # (ta, 2)
        self.rss0 = yw @ yw - np.einsum("ti,tij,tj->t", self.r1, self.inv11, self.r1)
        self.c11 = self._suffix(one * one)[:, None]
        self.c1y = self._suffix(one * yw)[:, None]
        self.one_k0 = one[k0c][:, None]
        self.h_k0 = hw[np.arange(ta_grid.size), k0c][:, None]
        self.y_k0 = yw[k0c][:, None]
        # velocity step at ta: x = a + c min(t - ta, 0) + d max(t - ta, 0)
        xs = np.stack([np.broadcast_to(one, hw.shape), hw, st], axis=1)  # (ta, 3, n)
        mm = np.einsum("tin,tjn->tij", xs, xs)
        mm[:, 1, 1] += eps * (1.0 + hh)
        rhs = xs @ yw  # (ta, 3)
        coef = np.linalg.solve(mm, rhs[:, :, None])[:, :, 0]
        self.rss_step = yw @ yw - np.einsum("ti,ti->t", coef, rhs)

    def _suffix(self, z: np.ndarray) -> np.ndarray:
        """Sums of ``z`` along its last axis from each onset's k0 + 1 to the end (onset
        last axis)."""
        if not self.starts.size:
            return np.zeros(z.shape[:-1] + (self.ta_grid.size,))
        return _segment_suffix(z, self.starts)[..., self.at]

    def logs(self, tf_grid: np.ndarray) -> _Logs:
        """The logs of a tf grid that every exponent uses."""
        with np.errstate(divide="ignore", invalid="ignore"):
            return _Logs(tf_grid, np.log(tf_grid[:, None] - self.t[None, :]),
                         np.log(tf_grid - self.t[0]),
                         np.log(tf_grid[None, :] - self.ta_grid[:, None]))

    def sums(self, logs: _Logs, exponents: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
        """Residual sums of squares and amplitudes (E, ta, tf): inf and NaN where the fit
        does not accelerate (b <= 0) or has no epoch after the onset."""
        shape = (len(exponents), self.ta_grid.size, logs.tf.size)
        rss, bb = np.empty(shape), np.empty(shape)
        prods = np.empty((3,) + logs.t.shape)
        for m, p in enumerate(exponents):
            p_row = np.broadcast_to(p, logs.tf.shape)
            with np.errstate(divide="ignore", invalid="ignore"):
                lg = _shape_from_logs(logs.t0[:, None], logs.t, p_row[:, None])  # (tf, n)
                cp = _shape_from_logs(logs.t0[None, :], logs.ta, p_row[None, :])  # (ta, tf)
            lw = _whiten(lg, self.ph)
            np.multiply(lw, lw, out=prods[0])
            np.multiply(lw, self.one, out=prods[1])
            np.multiply(lw, self.yw, out=prods[2])
            ll, l1, ly = (z.T for z in self._suffix(prods))  # each (ta, tf)
            # the whitened g at k0, then its products with 1, h, y and itself: (ta, tf)
            g0 = (lg[:, self.k0c].T - cp) / self.sd[self.k0c][:, None]
            a22 = g0 * g0 + ll - 2.0 * cp * l1 + cp * cp * self.c11
            a12 = np.stack([g0 * self.one_k0 + l1 - cp * self.c11, g0 * self.h_k0])
            r2 = g0 * self.y_k0 + ly - cp * self.c1y
            kk = np.einsum("ptf,tpq->qtf", a12, self.inv11)  # a12 inv11
            s = a22 - np.einsum("qtf,qtf->tf", kk, a12)
            num = r2 - np.einsum("qtf,tq->tf", kk, self.r1)
            with np.errstate(divide="ignore", invalid="ignore"):
                b = num / s
            r = self.rss0[:, None] - np.where(s > 0, num * b, 0.0)
            valid = (s > 0) & (b > 0) & self.has_phase
            rss[m] = np.where(valid, np.maximum(r, 0.0), np.inf)
            bb[m] = np.where(valid, b, np.nan)
        return rss, bb


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


@dataclass(frozen=True)
class _Valley:
    """The fit's profile over failure times ``tf_grid``: for each, the least residual sum
    of squares over onsets and alpha (``rss``), the alpha, onset index and amplitude that
    give it; the alpha grid's sums (alpha x tf, least over onsets)."""

    rss: np.ndarray
    alpha: np.ndarray
    onset: np.ndarray
    b_mm: np.ndarray
    alphas: np.ndarray
    grid_rss: np.ndarray


def _valley(prof: _Profiler, tf_grid: np.ndarray, step: float, levels: int) -> _Valley:
    """Least sums over onsets and alpha for each failure time: alpha on a grid of ``step``
    over ``ALPHA_RANGE``, then ``levels`` rounds of bisection around each failure time's
    best (the sum was unimodal in alpha at a given failure time wherever looked at, but its
    valley is narrow: at 3 days' lead a change of 0.05 in alpha moved the best failure time
    by ~0.7 day), and a parabola through the last three.  Each round is one pass at two
    alphas per failure time (``_Profiler.sums`` with an exponent per failure time); the
    forecasts matched a denser computation (alpha every 0.025 refined twice, 320 lead
    times) within 5 % + 1 h of the forecast and of each interval end in 71 of 72 LHAS-noise
    trials (the other: a flat profile 30 days ahead, forecast 308 h against 290 h)."""
    alphas = _alpha_grid(step)
    logs = prof.logs(tf_grid)
    rss, bb = prof.sums(logs, _exponent(alphas))
    cols = np.arange(tf_grid.size)
    grid = rss.min(axis=1)  # (alpha, tf)
    m = np.argmin(grid, axis=0)
    onset = np.argmin(rss[m, :, cols], axis=1)
    best_a, best_r, best_b = alphas[m], grid[m, cols], bb[m, onset, cols]
    h = step
    below = above = np.full(tf_grid.size, np.inf)
    for _ in range(levels):
        h /= 2.0
        tries = np.clip(best_a[None, :] + np.array([[-h], [h]]), *ALPHA_RANGE)
        rr, bt = prof.sums(logs, _exponent(tries))
        r = rr.min(axis=1)  # (2, tf)
        on = np.argmin(rr, axis=1)  # (2, tf)
        pick = np.argmin(np.vstack([best_r, r]), axis=0)  # 0: stay, 1: -h, 2: +h
        moved = pick > 0
        k = np.maximum(pick - 1, 0)
        below = np.where(moved, np.where(pick == 1, np.inf, best_r), r[0])
        above = np.where(moved, np.where(pick == 2, np.inf, best_r), r[1])
        best_a = np.where(moved, tries[k, cols], best_a)
        best_b = np.where(moved, bt[k, on[k, cols], cols], best_b)
        onset = np.where(moved, on[k, cols], onset)
        best_r = np.where(moved, r[k, cols], best_r)
    # the parabola through the best and its neighbours h either side, where both are known
    curv = below - 2.0 * best_r + above
    with np.errstate(invalid="ignore"):
        ok = np.isfinite(curv) & (curv > 0)
        vertex = best_r - np.where(ok, (below - above) ** 2 / (8.0 * np.where(ok, curv, 1.0)),
                                   0.0)
    return _Valley(np.maximum(vertex, 0.0), best_a, onset, best_b, alphas, grid)


def _outliers_and_correlation(tb: np.ndarray, yb: np.ndarray, ta_grid: np.ndarray,
                               tf_grid: np.ndarray, alphas: np.ndarray, bin_days: float
                               ) -> tuple[np.ndarray, float] | None:
    """Bins to keep (within ``ROBUST_SIGMAS`` of the best fit) and the AR(1) correlation
    between adjacent bins of its residuals, by up to three rounds of fitting on a coarse
    grid; None when no accelerating fit exists at all."""
    keep = np.ones(tb.size, bool)
    rho = 0.0
    for _ in range(3):
        t, y = tb[keep], yb[keep]
        phi = np.concatenate([[0.0], rho ** (np.diff(t) / bin_days)])
        rss, _, _ = _profiles(t, y, phi, ta_grid, tf_grid, _exponent(alphas))
        m, i, j = np.unravel_index(int(np.argmin(rss)), rss.shape)
        if not np.isfinite(rss[m, i, j]):
            return None
        # residuals of the best fit, unwhitened, to estimate rho and flag outliers
        res_all = _residuals(tb, yb, ta_grid[i], tf_grid[j], keep, _exponent(alphas[m]))
        r = res_all[keep]
        mad = 1.4826 * median(np.abs(r - median(r)))
        new_keep = np.abs(res_all) <= ROBUST_SIGMAS * max(mad, 1e-9)
        adj = np.diff(tb[keep]) <= 1.5 * bin_days
        rr = r[1:][adj] @ r[:-1][adj]
        rho_new = float(np.clip(rr / max(float(r @ r) * adj.mean(), 1e-300), 0.0, 0.95))
        if np.array_equal(new_keep, keep) and abs(rho_new - rho) < 0.02:
            break
        keep, rho = new_keep, rho_new
    return keep, rho


def fit_failure(ns: np.ndarray, x_mm: np.ndarray, *, end_ns: int, confidence: float,
                max_horizon_days: float, onset_ns: int | None = None,
                bin_days: float = BIN_DAYS, calibration: float = CALIBRATION
                ) -> tuple[DisplacementFit, int]:
    """Fit Voight's displacement model to ``x_mm`` at times ``ns`` (int64 ns since the Unix
    epoch, in time order), onset and alpha profiled (alpha over ``ALPHA_RANGE``), and bound
    its failure time; ``calibration``: the factor on the measured flicker excess in the
    threshold (``CALIBRATION``; benchmarks try others).  Returns the fit (times in days
    since the returned origin, int64 ns) and that origin.

    Three passes: outliers and the AR(1) correlation (``_outliers_and_correlation``, coarse
    grids, alpha in ``CLEANING_ALPHAS``); a scan of every lead time (``LEAD_GRID`` of them,
    alpha every ``SCAN_ALPHA_STEP`` refined per lead time, ``_valley``) for the best fit,
    the noise threshold and the run of lead times within ``SCAN_SLACK`` times that
    threshold; and a fine pass over that run (``_fine_pass``) for the best fit, the
    interval's edges and alpha's own interval."""
    tb, yb, _ = bin_series(ns, x_mm, bin_days)
    width = round(bin_days * 86_400e9)
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

    lead, ta_grid = grids(CLEANING_LEADS, ONSET_CANDIDATES // 2)
    cleaned = _outliers_and_correlation(tb, yb, ta_grid, t_end + lead,
                                        np.asarray(CLEANING_ALPHAS), bin_days)
    if cleaned is None:
        return DisplacementFit(False, "no acceleration", n_bins=int(tb.size)), origin
    keep, rho = cleaned
    lead, ta_grid = grids(LEAD_GRID, ONSET_CANDIDATES)
    t, y = tb[keep], yb[keep]
    n = t.size
    phi = np.concatenate([[0.0], rho ** (np.diff(t) / bin_days)])
    # the scan: every lead time, alpha on a coarse grid refined per lead time
    profiler = _Profiler(t, y, phi, ta_grid)
    scan = _valley(profiler, t_end + lead, SCAN_ALPHA_STEP, SCAN_LEVELS)
    j = int(np.argmin(scan.rss))
    best = float(scan.rss[j])
    if not np.isfinite(best):
        return DisplacementFit(False, "no acceleration", n_bins=int(n)), origin
    i = int(scan.onset[j])
    xw = _whiten(_residuals(t, y, ta_grid[i], t_end + lead[j], np.ones(n, bool),
                            _exponent(scan.alpha[j])), phi)
    phase_bins = int((t >= ta_grid[i]).sum())
    k = calibration * _inflation(xw, max(2, phase_bins // 4))
    q = student_t_quantile(0.5 + 0.5 * confidence, max(n - N_PARAMETERS, 1))
    unit = q * q / max(n - N_PARAMETERS, 1)
    thr = k * unit
    lo_j, hi_j = _run(scan.rss / best - 1.0 <= SCAN_SLACK * thr, j)
    fine, val, lo_j = _fine_pass(profiler, t_end, lead, lo_j, hi_j, best, thr)
    jf = int(np.argmin(val.rss))
    best = min(best, float(val.rss[jf]))
    step_ratio = float(profiler.rss_step.min()) / best - 1.0
    ratio_f = val.rss / best - 1.0
    order = np.argsort(np.concatenate([lead, fine]))
    fit = dict(ta=float(ta_grid[val.onset[jf]]), b_mm=float(val.b_mm[jf]), rho=rho,
               inflation=k, n_bins=int(n), threshold=thr, threshold_unit=k / calibration * unit,
               lr_velocity_step=step_ratio / thr if thr > 0 else math.inf,
               **_alpha_figures(val, best, thr, jf),
               profile_lead_days=np.concatenate([lead, fine])[order],
               profile_ratio=np.concatenate([scan.rss / best - 1.0, ratio_f])[order])
    tf = t_end + math.exp(_refine(np.log(fine), ratio_f, jf))
    if tf - t_end > max_horizon_days or step_ratio <= 0.0:
        return DisplacementFit(False, "no acceleration", tf=tf, **fit), origin
    if step_ratio <= thr or scan.rss[-1] / best - 1.0 <= thr:
        return DisplacementFit(False, "unbounded", tf=tf, **fit), origin
    a, b = _run(ratio_f <= thr, jf)
    lo = (t_end if lo_j == 0 and a == 0
          else t_end + (_cross(fine, ratio_f, a - 1, a, thr) if a > 0 else fine[0]))
    hi = t_end + (_cross(fine, ratio_f, b, b + 1, thr) if b < fine.size - 1 else fine[-1])
    return DisplacementFit(True, tf=tf, lo=lo, hi=hi, **fit), origin


def _fine_pass(profiler: _Profiler, t_end: float, lead: np.ndarray, lo_j: int, hi_j: int,
               best: float, thr: float) -> tuple[np.ndarray, _Valley, int]:
    """The profile on ``FINE_GRID`` lead times over the scan's run [lo_j, hi_j] and one
    scan step either side, widened by ``FINE_WIDEN`` scan steps while the interval reaches
    an end of it short of the scan's ends (the scan's threshold had slack, but its alphas
    are coarser).  Returns the lead times, their profile and the scan index it starts at."""
    lo_j, hi_j = max(lo_j - 1, 0), min(hi_j + 1, lead.size - 1)
    while True:
        fine = np.geomspace(lead[lo_j], lead[hi_j], FINE_GRID)
        val = _valley(profiler, t_end + fine, ALPHA_STEP, FINE_LEVELS)
        jf = int(np.argmin(val.rss))
        a, b = _run(val.rss / min(best, float(val.rss[jf])) - 1.0 <= thr, jf)
        wider = (a == 0 and lo_j > 0, b == fine.size - 1 and hi_j < lead.size - 1)
        if not any(wider):
            return fine, val, lo_j
        lo_j = max(lo_j - FINE_WIDEN, 0) if wider[0] else lo_j
        hi_j = min(hi_j + FINE_WIDEN, lead.size - 1) if wider[1] else hi_j


def _alpha_figures(val: _Valley, best: float, thr: float, jf: int) -> dict:
    """The best fit's alpha and alpha's interval: the alphas of the valley within the
    threshold, and those of the grid whose least sum over failure times is within it."""
    ratio = val.rss / best - 1.0
    grid_ratio = val.grid_rss.min(axis=1) / best - 1.0
    inside = np.concatenate([val.alphas[grid_ratio <= thr], val.alpha[ratio <= thr],
                             val.alpha[jf:jf + 1]])
    return {"alpha": float(val.alpha[jf]), "alpha_lo": float(inside.min()),
            "alpha_hi": float(inside.max())}


def _alpha_grid(step: float) -> np.ndarray:
    """Alpha from ``ALPHA_RANGE[0]`` to ``ALPHA_RANGE[1]`` every ``step``."""
    count = round((ALPHA_RANGE[1] - ALPHA_RANGE[0]) / step) + 1
    return np.linspace(ALPHA_RANGE[0], ALPHA_RANGE[1], count)


def _run(inside: np.ndarray, j: int) -> tuple[int, int]:
    """First and last index of the run of True in ``inside`` around ``j``."""
    a = j
    while a > 0 and inside[a - 1]:
        a -= 1
    b = j
    while b < inside.size - 1 and inside[b + 1]:
        b += 1
    return a, b


def _residuals(t, y, ta, tf, keep, p: float = 0.0) -> np.ndarray:
    """Residuals (all points) of the ordinary least-squares fit on ``keep`` at (ta, tf)."""
    tm = np.maximum(t, ta)
    x = np.stack([np.ones_like(t), np.minimum(t - ta, 0.0),
                  _shape(tf, tm, ta, p)], axis=1)
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
    """The failure-time forecast (Voight's law fitted to the displacement), or the reason
    there is none.

    ``supported`` False: no forecast can honestly be made, ``reason`` says why in words;
    the fit figures that were computed are still given, for the report.  When supported:
    ``failure_time`` where the fitted inverse velocity reaches zero, and ``interval`` its
    ``confidence`` interval (profile likelihood over the failure time, the onset and alpha
    profiled out, allowing for correlated noise).  ``alpha``: Voight's exponent fitted
    (within ``ALPHA_RANGE``; 2 is Fukuzono's straight inverse velocity), NaN when nothing
    was fitted; ``alpha_interval``: the alphas the data allow at ``confidence`` (the
    interval's own threshold), None when nothing was fitted.
    ``onset``: the first resolved inverse-velocity value at or after the fitted onset,
    ``onset_automatic`` whether the onset was fitted (not given); ``n_points`` resolved
    values from it over ``span_days``; ``r2``: how well the fitted inverse-velocity curve
    (``inverse_velocity_at``) explains them; ``slope_per_mm``: the mean slope d(1/v)/dt of
    that curve from ``onset`` to ``failure_time``, 1/mm (negative when accelerating; the
    straight line from the curve's value at the onset to zero at the failure time; at
    alpha = 2 the curve is that line, slope -1 / b); ``amplitude_mm``: b of the velocity
    b (tf - t)^(-1 / (alpha - 1)) after the onset (mm day^(-p), p = (alpha - 2) /
    (alpha - 1): mm at alpha = 2); ``lag1_autocorrelation``: the AR(1) correlation of the
    position residuals and the ``effective_points`` the uncertainty stands for;
    ``last_time``: the latest resolved inverse-velocity value in the phase; ``data_end``:
    the last epoch; ``lead_days``: failure time minus ``data_end``.  ``method``:
    "displacement" (Voight's law fitted to the positions, ``forecast_from_displacement``);
    ``noise_inflation``: the factor by which the interval's threshold was raised for
    correlated (flicker) noise, ``CALIBRATION`` included."""

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
    alpha: float = float("nan")
    data_end: np.datetime64 | None = None
    noise_inflation: float = float("nan")
    alpha_interval: tuple[float, float] | None = None
    amplitude_mm: float = float("nan")

    def inverse_velocity_at(self, t) -> np.ndarray:
        """The fitted inverse velocity (day/mm) at times ``t`` (datetime64): (tf - t)^q / b,
        q = 1 / (alpha - 1), zero from the failure time on; NaN without a forecast."""
        t = as_datetime64(t)
        if not self.supported or not self.amplitude_mm > 0:
            return np.full(np.shape(t), np.nan)
        left = np.maximum(_days(self.failure_time, t), 0.0)
        return left ** (1.0 / (self.alpha - 1.0)) / self.amplitude_mm

    def describe(self) -> str:
        """One sentence for a report."""
        if not self.supported:
            return f"No failure-time forecast: {self.reason}."
        lo, hi = self.interval
        a_lo, a_hi = self.alpha_interval
        return (f"Inverse velocity reaches zero at {_iso(self.failure_time)} "
                f"({self.lead_days:.1f} days after the last data; "
                f"{100 * self.confidence:g} % interval {_iso(lo)} to {_iso(hi)}), from "
                f"the displacement since {_iso(self.onset)} fitted by Voight's law with "
                f"alpha fitted as {self.alpha:.2f} ({a_lo:.2f} to {a_hi:.2f} allowed; "
                f"alpha = 2 is Fukuzono's straight inverse velocity), the interval allowing "
                f"for correlated noise and for the uncertainty of alpha; the "
                f"{self.n_points} inverse-velocity values since the onset agree with the "
                f"fitted curve to R² {self.r2:.2f}.")


def _days(t, t0: np.datetime64) -> np.ndarray:
    return (as_datetime64(t) - t0).astype("timedelta64[ns]").astype(np.float64) / _NS_PER_DAY


def _at(t0: np.datetime64, days: float) -> np.datetime64:
    return t0 + np.timedelta64(round(days * _NS_PER_DAY), "ns")


def _iso(t: np.datetime64 | None) -> str:
    return "-" if t is None else str(np.datetime_as_string(t, unit="m")) + "Z"


def forecast_from_displacement(iv: InverseVelocity, *, start=None,
                               min_points: int = MIN_POINTS, confidence: float = CONFIDENCE,
                               max_horizon_days: float = MAX_HORIZON_DAYS,
                               min_velocity_snr: float = MIN_VELOCITY_SNR,
                               window_days: float = WINDOW_DAYS,
                               calibration: float = CALIBRATION) -> FailureForecast:
    """Failure time from the displacement behind ``iv`` (``iv.data_t``, ``iv.data_mm``):
    Voight's law with alpha fitted within ``ALPHA_RANGE`` (velocity b (tf - t)^(-1 / (alpha
    - 1)) after an onset, steady creep before; at alpha = 2 the inverse velocity falls
    linearly to zero at tf, Fukuzono 1985) fitted to the positions of the last
    ``window_days``, with a profile-likelihood interval of tf that allows for
    time-correlated noise and for the uncertainty of alpha (``fit_failure``) - or a refusal
    saying why not.  The interval's early end, not the forecast, is the safe side: three
    days before failure 36-48 % of forecasts came after the failure, and further ahead one
    can be days late (measured: the module's docstring);
    ``calibration`` as in ``fit_failure``.

    The windowed inverse velocities of ``iv`` are used only to say whether the motion is
    resolved at all (at least ``min_points`` values with a velocity of ``min_velocity_snr``
    sigmas: below that an inverse velocity is noise), and for the figures: ``onset`` is the
    first of them at or after the fitted onset, ``last_time`` the last, ``n_points`` their
    count, ``r2`` how well the fitted inverse-velocity curve (tf - t)^(1 / (alpha - 1)) / b
    explains them (weighted by their delta-method variance), ``slope_per_mm`` the mean
    slope of that curve from ``onset`` to tf (-1 / b at alpha = 2).

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
    base = {"confidence": confidence, "method": "displacement", "data_end": last,
            "onset_automatic": start is None}
    if usable < min_points:
        extra = (f" ({unresolved} more with a velocity under {min_velocity_snr:g} sigma "
                 f"of its noise)" if unresolved else "")
        return FailureForecast(False, f"only {counted(usable, 'velocity value')} usable{extra}; "
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
                              onset_ns=onset_ns, calibration=calibration)
    t_origin = np.datetime64(origin, "ns")
    extra = {"lag1_autocorrelation": fit.rho, "noise_inflation": fit.inflation,
             "alpha": fit.alpha, "amplitude_mm": fit.b_mm,
             "alpha_interval": ((fit.alpha_lo, fit.alpha_hi) if np.isfinite(fit.alpha)
                                else None)}
    if np.isfinite(fit.ta):
        onset_t = _at(t_origin, fit.ta)
        used = resolved & (iv.t >= onset_t)
        onset_shown = iv.t[used][0] if used.any() else onset_t
        last_shown = iv.t[used][-1] if used.any() else last
        extra.update(onset=onset_shown, n_points=int(used.sum()), last_time=last_shown,
                     span_days=float((last_shown - onset_shown) / np.timedelta64(1, "D")))
        if np.isfinite(fit.b_mm) and np.isfinite(fit.tf):
            q = 1.0 / (fit.alpha - 1.0)
            before = max(fit.tf - float(_days(onset_shown, t_origin)), 1e-9)
            extra.update(slope_per_mm=-before ** (q - 1.0) / fit.b_mm,
                         r2=_curve_r2(iv, used, fit.tf, fit.b_mm, q, t_origin))
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


def _curve_r2(iv: InverseVelocity, used: np.ndarray, tf_days: float, b_mm: float, q: float,
              t_origin: np.datetime64) -> float:
    """Weighted R² of the inverse velocities ``used`` about the fitted curve
    (tf - t)^q / b (a line at alpha = 2, q = 1)."""
    if int(used.sum()) < 3:
        return float("nan")
    x = _days(iv.t[used], t_origin)
    y = iv.inverse_velocity_day_per_mm[used]
    curve = np.maximum(np.maximum(tf_days - x, 0.0) ** q / b_mm, 1e-6)
    w = _weights(iv.velocity_sigma_mm_per_day[used], curve)
    w = w / w.sum()
    ym = float(w @ y)
    tss = float(w @ (y - ym) ** 2)
    return 1.0 - float(w @ (y - curve) ** 2) / tss if tss > 0 else float("nan")


def _weights(sigma_v: np.ndarray, inv: np.ndarray) -> np.ndarray:
    """Least-squares weights of inverse velocities: 1 / their variance, which by the delta
    method is (sigma_v * inv^2)^2 (the inverse of a velocity of 2 +- 0.7 mm/day is 0.5 +-
    0.18 day/mm, of 8 +- 0.7 is 0.125 +- 0.011: a creep-phase value is worth ~1/250 of a
    late one).  ``inv`` is the fitted curve, so a value is not favoured for having come out
    low."""
    return 1.0 / (sigma_v * inv * inv) ** 2


__all__ = [
    "BIN_DAYS",
    "CALIBRATION",
    "CONFIDENCE",
    "MAX_HORIZON_DAYS",
    "MIN_BINS",
    "MIN_POINTS",
    "MIN_VELOCITY_SNR",
    "ROBUST_SIGMAS",
    "WINDOW_DAYS",
    "DisplacementFit",
    "FailureForecast",
    "bin_series",
    "fit_failure",
    "forecast_from_displacement",
]

"""Cleaning a GNSS monitoring series before it is analysed: quality filter, outliers, gaps,
completeness and steps.

Every estimate an engineer reports (a velocity, a displacement, a forecast) is only as good
as the epochs that go into it.  This module decides which epochs those are and says why the
others were left out, in words a data-quality note can quote ("12 epochs not fixed, 3 with
fewer than 6 satellites"):

* ``quality_mask``: the receiver's own quality fields (formal sigmas, fixed ambiguities,
  satellites, ratio test) against documented thresholds.
* ``mad_outliers``: epochs far from the robust local level of the series, in units of the
  scaled median absolute deviation.  The local level follows genuine steps and fast smooth
  trends, so neither is mistaken for outliers.
* ``find_gaps`` and ``completeness``: outages, and epochs received versus expected.
* ``detect_steps``: unknown offsets (an unannounced antenna swap, a change of processing),
  and ``steps_from_events`` / ``steps_from_base_station`` for the known ones.

Times are numpy ``datetime64`` (UTC, see ``analysis.timebase``); positions in metres.
Everything is vectorised: running medians are computed on blocks of rows of a padded window
matrix, one single-pivot partition a block (a loop over blocks of a few thousand windows,
never over epochs).

Size: about 830 lines because the four steps share the robust statistics they are built on
(running medians on padded window blocks, MAD scales) and run in this order on one series.
"""

from __future__ import annotations

import inspect
from dataclasses import dataclass
from datetime import datetime, timezone
from typing import Callable, Iterable, Mapping

import numpy as np

from analysis.stats import median
from analysis.timebase import as_datetime64, finite_in_time_order

MAD_TO_SIGMA = 1.4826  # 1 / Phi^-1(3/4): scaled MAD = sigma for Gaussian noise
_MEDIAN_EFFICIENCY = np.sqrt(np.pi / 2.0)  # sd(median of n) ~ 1.2533 sigma / sqrt(n)
_MAX_WINDOW_POINTS = 151  # a running median uses at most this many evenly spread points
_BLOCK_ELEMENTS = 1 << 14  # cells sorted at once: 128 kB, each temporary under glibc's
# default mmap threshold, so blocks reuse heap memory instead of faulting in fresh pages
# (1 << 16 cost 30 % more in the cleaning of a rover: docs/benchmarks.md, issue 31)


# ------------------------------------------------------------------------ quality filter

@dataclass(frozen=True)
class QualityThresholds:
    """Limits on the receiver's per-epoch quality fields; an epoch failing any is rejected.

    Defaults, for a monitoring rover on a short baseline (< ~10 km) with hourly or faster
    solutions, where fixed epochs report 1-3 mm horizontal and 2-6 mm vertical sigma:

    * ``max_sigma_h_m`` 0.010: horizontal 1-sigma (root sum of squares of ``sde`` and
      ``sdn``, the receivers' "horizontal precision") above 10 mm is 3-5 times the normal
      value: multipath, obstruction (snow, vegetation) or a poor geometry.
    * ``max_sigma_v_m`` 0.020: the same for ``sdu``; height is ~2x worse than horizontal.
    * ``require_fixed`` True: a float solution (``q`` != 1) can be decimetres off while
      reporting centimetre sigmas; deformation monitoring uses fixed epochs only.
    * ``min_satellites`` 6: 4 give a position with no redundancy; RTK practice asks for at
      least 5-6 for a reliable fix and a meaningful ratio test.
    * ``min_ratio`` 3.0: the ratio-test value above which ambiguities are accepted as
      reliably fixed (the usual threshold, RTKLIB's default).

    ``None`` disables a criterion."""

    max_sigma_h_m: float | None = 0.010
    max_sigma_v_m: float | None = 0.020
    require_fixed: bool = True
    min_satellites: int | None = 6
    min_ratio: float | None = 3.0

    def __post_init__(self) -> None:
        for name in ("max_sigma_h_m", "max_sigma_v_m", "min_satellites", "min_ratio"):
            value = getattr(self, name)
            if value is not None and not (np.isfinite(value) and value > 0):
                raise ValueError(f"quality threshold {name} must be a positive number or "
                                 f"None (disabled), not {value!r}")


QUALITY_REASONS = ("sigma_h", "sigma_v", "not_fixed", "few_satellites", "low_ratio")


@dataclass(frozen=True)
class QualityResult:
    """Which epochs pass the quality filter, and why the others do not.

    ``keep``: boolean mask, True for epochs used.  ``rejected``: the number of epochs failing
    each criterion (keys of ``QUALITY_REASONS``); an epoch may fail several, so the counts
    can add up to more than ``n_rejected``, the number of epochs rejected.  ``reasons``: the
    mask of each criterion.  ``missing_fields``: quality fields not reported at all (None or
    all NaN), which were therefore not checked."""

    keep: np.ndarray
    n_epochs: int
    n_rejected: int
    rejected: dict[str, int]
    reasons: dict[str, np.ndarray]
    missing_fields: tuple[str, ...]
    thresholds: QualityThresholds

    def describe(self) -> str:
        """One sentence for a data-quality note."""
        th = self.thresholds
        words = {"sigma_h": f"with horizontal sigma above {_mm(th.max_sigma_h_m)}",
                 "sigma_v": f"with vertical sigma above {_mm(th.max_sigma_v_m)}",
                 "not_fixed": "not fixed (float or worse)",
                 "few_satellites": f"with fewer than {th.min_satellites} satellites",
                 "low_ratio": f"with ratio below {th.min_ratio:g}"}
        parts = [f"{n} {words[k]}" for k, n in self.rejected.items() if n]
        text = (f"{self.n_rejected} of {self.n_epochs} epochs rejected"
                + (f": {', '.join(parts)}" if parts else ""))
        if self.missing_fields:
            text += f" ({', '.join(self.missing_fields)} not reported, not checked)"
        return text


def _mm(value_m: float | None) -> str:
    return "-" if value_m is None else f"{value_m * 1000:g} mm"


def _field(values, n: int) -> np.ndarray | None:
    """A quality field as float64, or None when it is not reported (None or all NaN)."""
    if values is None:
        return None
    arr = np.asarray(values, dtype=np.float64)
    if arr.ndim == 0:
        arr = np.full(n, float(arr))
    if arr.shape != (n,):
        raise ValueError(f"quality field of shape {arr.shape} for {n} epochs")
    return None if not np.isfinite(arr).any() else arr


def quality_mask(sde_m, sdn_m, sdu_m, q, ns, ar,
                 thresholds: QualityThresholds = QualityThresholds(), *,
                 n_epochs: int | None = None) -> QualityResult:
    """Keep-mask of the epochs whose quality fields pass ``thresholds``.

    ``sde_m``, ``sdn_m``, ``sdu_m``: 1-sigma (m); ``q``: 1 fixed, 2 float (others: worse);
    ``ns``: satellites used; ``ar``: ambiguity ratio-test value.  A field that is None or
    all NaN is not reported and not checked; a NaN in one epoch of a reported field is not a
    reason to reject that epoch either (an absent value is not a bad value).  Where only one
    of ``sde``/``sdn`` is reported, the horizontal sigma is taken as sqrt(2) times it.
    ``n_epochs`` is needed only when no field is an array (then every epoch is kept)."""
    given = [x for x in (sde_m, sdn_m, sdu_m, q, ns, ar) if x is not None and np.ndim(x)]
    if given:
        n = int(np.shape(given[0])[0])
    elif n_epochs is not None:
        n = int(n_epochs)
    else:
        raise ValueError("no quality field is an array: pass n_epochs (how many epochs)")
    fields = dict(sde=_field(sde_m, n), sdn=_field(sdn_m, n), sdu=_field(sdu_m, n),
                  q=_field(q, n), ns=_field(ns, n), ar=_field(ar, n))
    missing = tuple(k for k, v in fields.items() if v is None)
    nan = np.full(n, np.nan)
    sde, sdn = (fields[k] if fields[k] is not None else nan for k in ("sde", "sdn"))
    both = np.isfinite(sde) & np.isfinite(sdn)
    one = np.where(np.isfinite(sde), sde, sdn) * np.sqrt(2.0)
    sigma_h = np.where(both, np.hypot(sde, sdn), one)
    th = thresholds

    def fails(values: np.ndarray | None, test: Callable[[np.ndarray], np.ndarray],
              active: bool) -> np.ndarray:
        if values is None or not active:
            return np.zeros(n, bool)
        with np.errstate(invalid="ignore"):
            return np.isfinite(values) & test(values)

    reasons = {
        "sigma_h": fails(sigma_h, lambda v: v > th.max_sigma_h_m, th.max_sigma_h_m is not None),
        "sigma_v": fails(fields["sdu"], lambda v: v > th.max_sigma_v_m,
                         th.max_sigma_v_m is not None),
        "not_fixed": fails(fields["q"], lambda v: v != 1, th.require_fixed),
        "few_satellites": fails(fields["ns"], lambda v: v < th.min_satellites,
                                th.min_satellites is not None),
        "low_ratio": fails(fields["ar"], lambda v: v < th.min_ratio, th.min_ratio is not None),
    }
    bad = np.zeros(n, bool)
    for mask in reasons.values():
        bad |= mask
    return QualityResult(keep=~bad, n_epochs=n, n_rejected=int(bad.sum()),
                         rejected={k: int(v.sum()) for k, v in reasons.items()},
                         reasons=reasons, missing_fields=missing, thresholds=thresholds)


# ------------------------------------------------------------------------ running medians

@dataclass(frozen=True)
class _Windows:
    """The layout of a set of index windows [lo[r], hi[r]) for their medians
    (``_window_medians``).

    Each row holds the window's values (at most ``max_points``, evenly spread) preceded by
    ``lead[r]`` cells of -inf and followed by +inf, so that the upper median of every row,
    whatever its length, sits in the same column ``kth``: one single-pivot partition of a
    block of rows (numpy's vectorised select; a partition at several pivots, or a median,
    is ~10x slower) then finds it, and the lower median is the largest value left of it."""

    lo: np.ndarray
    count: np.ndarray  # indices in each window
    used: np.ndarray  # values per row (0: empty window)
    lead: np.ndarray  # -inf cells before a row's values
    kth: int
    width: int
    sampled: bool  # some window has more than max_points indices


def _windows(lo: np.ndarray, hi: np.ndarray, max_points: int = _MAX_WINDOW_POINTS
             ) -> _Windows:
    lo = np.asarray(lo, np.int64)
    count = np.asarray(hi, np.int64) - lo
    used = np.clip(count, 0, max_points)
    upper = used // 2  # index of the upper median among a row's sorted values
    kth = int(upper.max()) if used.size else 0
    width = kth + int((used - upper).max()) if used.size else 0
    return _Windows(lo, count, used, kth - upper, kth, width, bool((count > max_points).any()))


def _window_medians(lo: np.ndarray, hi: np.ndarray,
                    gather: Callable[[np.ndarray, Callable], np.ndarray], *,
                    max_points: int = _MAX_WINDOW_POINTS) -> np.ndarray:
    """Median, for each row r, of the values ``gather`` gives over the indices j in
    [lo[r], hi[r]).

    ``gather(rows, take)`` returns the rows' values (a new array: it is modified),
    ``take(a)`` being the array ``a`` at each row's window indices (rows x width; ``rows`` a
    column of row numbers), so a window's values may depend on its row (a detrended
    window).  A window of more than ``max_points`` indices uses ``max_points`` evenly
    spread ones (the median of a systematic sample: its noise is 1.25 sigma /
    sqrt(max_points), negligible).  Rows are processed in blocks of about
    ``_BLOCK_ELEMENTS`` cells, small enough to stay in the CPU cache; empty windows give
    NaN."""
    w = _windows(lo, hi, max_points)
    n = w.lo.size
    out = np.full(n, np.nan)
    if n == 0 or w.width == 0 or not w.used.any():
        return out
    width, kth = w.width, w.kth
    k = np.arange(width)
    # the padding of a row depends on its count alone (lead = kth - count // 2): one row
    # of this table per count, 0 over the values; a contiguous window's cells are a row of
    # a sliding view of the (zero-padded) values: no index matrix
    counts = np.arange(width + 1)[:, None]
    lead_of = kth - counts // 2
    pads = np.where(k < lead_of, -np.inf, np.where(k >= lead_of + counts, np.inf, 0.0))
    padded: dict[int, np.ndarray] = {}

    def sliding_values(values: np.ndarray) -> np.ndarray:
        if id(values) not in padded:
            padded[id(values)] = _sliding(np.concatenate([np.zeros(width), values,
                                                          np.zeros(width)]), width)
        return padded[id(values)]

    rows_per_block = max(1, _BLOCK_ELEMENTS // width)
    for a in range(0, n, rows_per_block):
        b = min(n, a + rows_per_block)
        lead, used = w.lead[a:b], w.used[a:b]
        if not w.sampled:
            first = w.lo[a:b] - lead + width  # each row's first cell, in the padded values

            def take(values: np.ndarray, first=first) -> np.ndarray:
                return sliding_values(values)[first]
        else:
            rel = k[None, :] - lead[:, None]
            cols = w.lo[a:b, None] + (rel * np.maximum(w.count[a:b, None], 1)
                                      ) // np.maximum(used[:, None], 1)
            cols = np.where((rel >= 0) & (rel < used[:, None]), cols, 0)

            def take(values: np.ndarray, cols=cols) -> np.ndarray:
                return values[cols]

        values = gather(np.arange(a, b)[:, None], take)
        values += pads[used]
        values.partition(kth, axis=1)
        upper = values[:, kth]
        if kth > 64:
            lower = values[:, :kth].max(axis=1)
        elif kth:  # narrow rows: column by column (a row-wise max costs ~30 ns a row)
            lower = np.maximum.reduce([values[:, j] for j in range(kth)])
        else:
            lower = upper
        with np.errstate(invalid="ignore"):  # an empty row: -inf + inf
            med = np.where(used % 2 == 1, 0.5 * (upper + upper), 0.5 * (lower + upper))
        out[a:b] = np.where(used > 0, med, np.nan)
    return out


def _sliding(values: np.ndarray, width: int) -> np.ndarray:
    return np.lib.stride_tricks.sliding_window_view(values, width)


def _in_rows(lo: np.ndarray, hi: np.ndarray, rows: int, size: int
             ) -> tuple[np.ndarray, np.ndarray]:
    """The windows [lo, hi) of one series, repeated for each of ``rows`` series of
    ``size`` values laid end to end (components x epochs flattened): one batch of
    ``_window_medians`` for them all, row after row."""
    shift = (np.arange(rows) * size)[:, None]
    return ((np.asarray(lo)[None, :] + shift).ravel(),
            (np.asarray(hi)[None, :] + shift).ravel())


def _shared_epochs(t, comps: list) -> tuple[np.ndarray, np.ndarray, np.ndarray] | None:
    """Components finite at the same epochs (the usual case): (indices into the input in
    time order, days since the first, components x those epochs' values); None when
    they differ, and each must be taken alone."""
    t_ns = as_datetime64(t)
    xs = [np.asarray(c, np.float64) for c in comps]
    if not (t_ns.ndim == 1 and all(x.shape == t_ns.shape for x in xs)
            and all(np.array_equal(np.isfinite(x), np.isfinite(xs[0])) for x in xs[1:])):
        return None
    order, days, _ = _prepare(t_ns, xs[0])
    return order, days, np.stack([x[order] for x in xs])


def _median_times(tt: np.ndarray, lo: np.ndarray, hi: np.ndarray) -> np.ndarray:
    """Median of the sorted times ``tt`` over each index range [lo, hi) (NaN if empty)."""
    count = hi - lo
    i1 = np.clip(lo + (count - 1) // 2, 0, tt.size - 1)
    i2 = np.clip(lo + count // 2, 0, tt.size - 1)
    return np.where(count > 0, 0.5 * (tt[i1] + tt[i2]), np.nan)


def _prepare(t, x_m) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """Finite epochs in time order: (indices into the input, days since the first, values)."""
    t, x, order = finite_in_time_order(t, x_m)
    if order.size == 0:
        return order, np.empty(0), np.empty(0)
    days = (t[order] - t[order[0]]).astype("timedelta64[ns]").astype(np.float64) / 86_400e9
    return order, days, x[order]


def _median_spacing_days(days: np.ndarray) -> float:
    d = np.diff(days)
    d = d[d > 0]
    return median(d) if d.size else float("nan")


# ------------------------------------------------------------------------ outliers

def mad_outliers(t, x_m, *, window_days: float = 1.0, threshold: float = 5.0,
                 scale_window_days: float | None = 10.0, min_side_points: int = 5,
                 min_scale_m: float = 0.0005) -> np.ndarray:
    """True for the epochs of ``x_m`` (one component, metres) that are outliers.

    Method: each epoch's residual from a robust local level, divided by a robust local noise
    scale (1.4826 x the median absolute deviation of the residuals), compared with
    ``threshold``.  The local level is the median of the epochs within ``window_days`` of it,
    taken three ways, and the epoch is judged against the one it agrees with best:

    * centred, on the series detrended by its local slope (the slope between the medians of
      the window's two halves): follows smooth trends, fast ones included, to the ends of
      the series, where a plain running median lags by a quarter window of motion;
    * the half window before the epoch, and the half window after it (each holding the
      epoch, each detrended by its own slope): an epoch just after a genuine step agrees
      with the level after the step, so a step is never taken for a run of outliers.

    So an epoch is an outlier only when it disagrees with the local level whichever way one
    looks.  NaN values are never outliers.  Times may be irregular, with gaps: windows are
    time windows (widened to hold ``2 * min_side_points - 1`` epochs at the median spacing,
    so daily data get an ~9-day window), and a level from fewer than ``min_side_points``
    epochs is not used; an epoch with no usable level is not flagged (not enough data to
    judge it).

    Defaults and why:

    * ``threshold`` 5 (scaled MADs).  Leys et al. (2013, J. Exp. Soc. Psychol. 49:764)
      recommend 2.5 (3 "very conservative") for general data.  A GNSS series is different:
      ~2,000 hourly epochs per quarter per component, time-correlated noise with heavier than
      Gaussian tails, and the outliers that matter (multipath, wrong fixes: centimetres) are
      far beyond 5 sigma of millimetre noise.  At 3, a clean quarter would lose ~0.3 % of its
      epochs per component to the Gaussian tail alone.  5 scaled MADs is close to the
      3 x IQR rule of Hector's removeoutliers (Bos et al. 2013), 4.7 sigma.
    * ``window_days`` 1: long enough for a stable median at hourly sampling (25 epochs), and
      it spans the daily multipath and thermal cycles; short enough to follow real motion.
    * ``scale_window_days`` 10 (at least 5 windows): the noise changes (snow on the antenna,
      ionosphere, float periods), so the scale is the running MAD of the centred residuals
      over that window (``None``: one scale for the whole series).  Floored at
      ``min_scale_m`` (0.5 mm): a smaller scale means quantised or constant values, not a
      real GNSS precision.

    Limits: right after a genuine step or sudden jump at the *end* of the series, the first
    epochs at the new level (fewer than ``min_side_points``) cannot be told from outliers and
    may be flagged until later epochs confirm the level: run the filter again as data
    arrive (the flags of the newest epochs are provisional).
    Also at the end of the series, a trend whose velocity changes by more than about
    ``40 * threshold * scale / window_days**2`` per day (some 600 mm/day per day for 3 mm
    noise and a 1-day window) outruns the local line.  A run of consecutive outliers longer
    than half a half-window (6 hourly epochs by default) is partly taken for a level (a run
    of 7 bad hours is flagged 5 of 7, of 9 only 2): such runs are rather a bad period to
    cut by the quality fields or by hand.
    """
    order, days, x = _prepare(t, x_m)
    out = np.zeros(np.shape(x_m), bool)
    out[order] = _mad_flags(days, x[None, :], window_days=window_days, threshold=threshold,
                            scale_window_days=scale_window_days,
                            min_side_points=min_side_points, min_scale_m=min_scale_m)[0]
    return out


def _mad_flags(days: np.ndarray, xs: np.ndarray, *, window_days: float, threshold: float,
               scale_window_days: float | None, min_side_points: int, min_scale_m: float
               ) -> np.ndarray:
    """``mad_outliers``' flags of each row of ``xs`` (components x epochs: finite values at
    the common sorted ``days``).  The components share every window, so each batch of
    medians is one call over all of them (their windows side by side in the flattened
    rows, offset by a row's length): a call per component cost a third of the cleaning in
    numpy's per-call overheads."""
    k, n = xs.shape
    if n < min_side_points:
        return np.zeros((k, n), bool)
    spacing = _median_spacing_days(days)
    w = max(float(window_days), (2 * min_side_points - 2) * spacing)
    half = 0.5 * w
    i = np.arange(n)
    lo = np.searchsorted(days, days - half, "left")
    hi = np.searchsorted(days, days + half, "right")
    # Dense series (more than ~2 sampled medians' worth of epochs per window): the levels are
    # computed at anchor epochs a small fraction of a window apart and interpolated between
    # them; they vary over a window, so this changes nothing but the cost.
    stride = max(1, int(np.median(hi - lo)) // (2 * _MAX_WINDOW_POINTS))
    a = np.arange(0, n, stride)
    if a[-1] != n - 1:
        a = np.append(a, n - 1)
    lo_a, hi_a = lo[a], hi[a]
    ta = days[a]
    x_flat, days_flat = xs.ravel(), np.tile(days, k)

    def each(lo_: np.ndarray, hi_: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
        return _in_rows(lo_, hi_, k, n)

    # Three levels at each anchor, each the median of a window detrended by the slope
    # between the medians of two half windows [slo, split) and [split, shi): centred (the
    # slope from the window's own halves), before and after the epoch (the slope from the
    # whole window before / after it: a longer baseline, so a steadier slope, and one that
    # never reaches across the epoch, so a step beside it does not tilt it).  The six half
    # windows are one batch of medians, the levels two more (a call per window costs more
    # than the medians of a short series).
    before = np.searchsorted(days, ta - w, "left")
    after = np.searchsorted(days, ta + w, "right")
    slo = np.stack([lo_a, before, a])
    split = np.stack([(lo_a + hi_a) // 2, lo_a, hi_a])
    shi = np.stack([hi_a, a + 1, after])
    first, last = np.concatenate([slo, split]).ravel(), np.concatenate([split, shi]).ravel()
    # many of these windows are others' (at regular sampling a third: the window before
    # an epoch is the first half of the centred window of the epoch half a window earlier,
    # the second half of the centred window the first of the window after): each once
    key, back = _distinct(first * (n + 1) + last)
    medians = _window_medians(*each(key // (n + 1), key % (n + 1)),
                              lambda rows, take: take(x_flat)).reshape(k, -1)
    m1, m2 = np.moveaxis(medians[:, back].reshape(k, 2, 3, -1), 1, 0)
    tau1, tau2 = _median_times(days, first, last).reshape(2, 3, -1)
    with np.errstate(invalid="ignore", divide="ignore"):
        slope = np.where((tau2 > tau1) & (split - slo >= 2) & (shi - split >= 2),
                         (m2 - m1) / (tau2 - tau1), 0.0)  # components x 3 x anchors

    def detrended(slopes: np.ndarray, levels_at: np.ndarray):
        def gather(rows, take):
            return take(x_flat) - slopes[rows] * (take(days_flat) - levels_at[rows])
        return gather

    # the centred windows are twice as wide as the others: a batch of their own
    centred = _window_medians(*each(lo_a, hi_a),
                              detrended(slope[:, 0].ravel(), np.tile(ta, k)))
    sides = _window_medians(*each(np.concatenate([lo_a, a]), np.concatenate([a + 1, hi_a])),
                            detrended(slope[:, 1:].reshape(-1), np.tile(ta, 2 * k)))
    levels = np.concatenate([centred.reshape(k, 1, -1), sides.reshape(k, 2, -1)], axis=1)
    if stride > 1:
        ok = np.isfinite(levels)
        levels = np.array([[np.interp(days, ta[kk], level[kk]) if kk.any()
                            else np.full(n, np.nan) for level, kk in zip(row, row_ok)]
                           for row, row_ok in zip(levels, ok)])
    level_c, level_l, level_r = np.moveaxis(levels, 1, 0)  # each components x epochs
    r_c = xs - level_c
    big = np.inf
    res_c = np.where(hi - lo >= min_side_points, np.abs(r_c), big)
    res_l = np.where(i + 1 - lo >= min_side_points, np.abs(xs - level_l), big)
    res_r = np.where(hi - i >= min_side_points, np.abs(xs - level_r), big)
    residual = np.minimum(np.minimum(res_c, res_l), res_r)

    scale = _running_scale(days, np.abs(r_c), hi - lo >= min_side_points, w,
                           scale_window_days)
    scale = np.maximum(scale, min_scale_m)
    return np.isfinite(residual) & (residual > threshold * scale)


def _distinct(keys: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """``np.unique(keys, return_inverse=True)`` for keys made of a few sorted runs: a
    stable sort merges the runs (~30 % faster here than np.unique)."""
    order = np.argsort(keys, kind="stable")
    ordered = keys[order]
    new = np.concatenate([[True], ordered[1:] != ordered[:-1]])
    back = np.empty(keys.size, np.int64)
    back[order] = np.cumsum(new) - 1
    return ordered[new], back


def _running_scale(days: np.ndarray, abs_res: np.ndarray, usable: np.ndarray, w: float,
                   scale_window_days: float | None) -> np.ndarray:
    """1.4826 x the running median of |residual| over ``scale_window_days`` (at least 5
    windows ``w``), evaluated at anchors half a window apart and interpolated between them
    (the noise level changes slowly); one global value when ``scale_window_days`` is None.
    ``abs_res``: components x epochs (one batch of medians for all), as the result."""
    r = abs_res[:, usable]
    dd = days[usable]
    k, m = r.shape
    if m == 0:
        return np.full(abs_res.shape, np.nan)
    if scale_window_days is None:
        return np.repeat(MAD_TO_SIGMA * np.median(r, axis=1)[:, None], days.size, axis=1)
    sw = max(float(scale_window_days), 5.0 * w)
    anchors = np.arange(dd[0], dd[-1] + 0.5 * w, 0.5 * w)
    lo = np.searchsorted(dd, anchors - 0.5 * sw, "left")
    hi = np.searchsorted(dd, anchors + 0.5 * sw, "right")
    flat = r.ravel()
    med = _window_medians(*_in_rows(lo, hi, k, m), lambda rows, take: take(flat),
                          max_points=4 * _MAX_WINDOW_POINTS).reshape(k, -1)
    out = np.empty(abs_res.shape)
    for c in range(k):
        ok = np.isfinite(med[c])
        out[c] = (MAD_TO_SIGMA * np.interp(days, anchors[ok], med[c][ok]) if ok.any()
                  else MAD_TO_SIGMA * float(np.median(r[c])))
    return out


_MAD_DEFAULTS = {name: p.default for name, p in
                 inspect.signature(mad_outliers).parameters.items()
                 if p.kind is p.KEYWORD_ONLY}


def mad_outliers_enu(t, east_m, north_m, up_m, **kwargs) -> np.ndarray:
    """True for epochs that are outliers in any of east, north, up (``mad_outliers`` on each,
    same keyword arguments): a bad epoch is bad as a whole position.  Components finite at
    the same epochs (the usual case) are judged in one pass: they share every window."""
    comps = [c for c in (east_m, north_m, up_m) if c is not None]
    shared = _shared_epochs(t, comps) if len(comps) > 1 else None
    if shared is not None:
        order, days, xs = shared
        out = np.zeros(np.shape(comps[0]), bool)
        out[order] = _mad_flags(days, xs, **{**_MAD_DEFAULTS, **kwargs}).any(axis=0)
        return out
    mask = mad_outliers(t, east_m, **kwargs)
    for comp in (north_m, up_m):
        if comp is not None:
            mask |= mad_outliers(t, comp, **kwargs)
    return mask



# ------------------------------------------------------------------------ gaps, completeness

@dataclass(frozen=True)
class Gap:
    """An outage: no epoch between ``start`` (the last epoch received before it) and ``end``
    (the first epoch after it).  ``duration_s`` = end - start, seconds; ``missing_epochs``:
    how many epochs the expected period would have put in between."""

    start: np.datetime64
    end: np.datetime64
    duration_s: float
    missing_epochs: int


def _sorted_unique_times(t) -> np.ndarray:
    t = as_datetime64(t).ravel()
    return np.unique(t[~np.isnat(t)])


def median_period_s(t) -> float:
    """The median spacing (s) of the distinct epochs of ``t``: the sampling period of a
    series that mostly follows its schedule (NaN for fewer than two epochs)."""
    t = _sorted_unique_times(t)
    if t.size < 2:
        return float("nan")
    return median(np.diff(t).astype("timedelta64[ns]").astype(np.float64)) / 1e9


def find_gaps(t, *, expected_period_s: float | None = None,
              min_gap_factor: float = 1.5) -> list[Gap]:
    """Outages in the epochs ``t``: spacings longer than ``min_gap_factor`` x the expected
    period (default: the median spacing).  1.5 means one missing epoch is a gap (the
    spacing is then twice the period) while receiver timing jitter is not."""
    if not min_gap_factor > 1.0:
        raise ValueError(f"min_gap_factor must be above 1 (a spacing of one period is no gap), "
                         f"not {min_gap_factor}")
    t = _sorted_unique_times(t)
    period = expected_period_s if expected_period_s is not None else median_period_s(t)
    if t.size < 2 or not np.isfinite(period) or period <= 0:
        return []
    spacing_s = np.diff(t).astype("timedelta64[ns]").astype(np.float64) / 1e9
    idx = np.flatnonzero(spacing_s > min_gap_factor * period)
    missing = np.maximum(np.rint(spacing_s[idx] / period).astype(np.int64) - 1, 1)
    return [Gap(t[k], t[k + 1], float(spacing_s[k]), int(m)) for k, m in zip(idx, missing)]


@dataclass(frozen=True)
class Completeness:
    """Epochs received versus expected in [start, end): ``expected`` = (end - start) /
    ``expected_period_s`` rounded to whole epochs; ``ratio`` = received / expected (NaN when
    nothing was expected)."""

    start: np.datetime64
    end: np.datetime64
    expected_period_s: float
    received: int
    expected: int
    ratio: float

    def describe(self) -> str:
        pct = "n/a" if not np.isfinite(self.ratio) else f"{100 * self.ratio:.1f} %"
        return f"{self.received} epochs received of {self.expected} expected ({pct})"


def completeness(t, start, end, expected_period_s: float | None = None) -> Completeness:
    """Epochs received versus expected over the reporting period [start, end) (UTC).

    Distinct timestamps count once.  ``expected_period_s`` is the device's sampling period;
    when None, the median spacing of the epochs in the period (which cannot see a period
    that was never sampled at all: pass the configured period when it is known)."""
    t = _sorted_unique_times(t)
    start, end = as_datetime64(start), as_datetime64(end)
    if end <= start:
        raise ValueError(f"the period ends ({end}) before it starts ({start})")
    inside = t[(t >= start) & (t < end)]
    period = expected_period_s if expected_period_s is not None else median_period_s(inside)
    if period is not None and np.isfinite(period) and period <= 0:
        raise ValueError(f"expected_period_s must be positive, not {period}")
    span_s = float((end - start).astype("timedelta64[ns]").astype(np.float64)) / 1e9
    expected = int(np.floor(span_s / period + 0.5)) if np.isfinite(period) else 0
    ratio = inside.size / expected if expected > 0 else float("nan")
    return Completeness(start, end, float(period), int(inside.size), expected, float(ratio))


# ------------------------------------------------------------------------ steps

@dataclass(frozen=True)
class Step:
    """An offset in a series: the level changes by ``size_m`` (new minus old, metres) between
    ``last_before`` and ``time`` (the first epoch at the new level).  ``sigma_m``: 1-sigma of
    the size.  ``score``: the detection statistic, the window-median estimate of the size
    over its noise (what ``threshold`` is compared with).  ``index``: position of ``time``
    in the arrays given."""

    time: np.datetime64
    last_before: np.datetime64
    size_m: float
    sigma_m: float
    score: float
    index: int


def detect_steps(t, x_m, *, window_days: float = 1.0, min_step_m: float = 0.003,
                 threshold: float = 6.0, min_window_points: int = 12,
                 max_steps: int = 20) -> list[Step]:
    """Unknown steps (offsets) in one component ``x_m`` (metres), largest first found.

    Method.  For each candidate epoch k (the first epoch after a possible step), four
    adjacent windows of N epochs (N = ``window_days`` at the median spacing, at least
    ``min_window_points``): two before k, two after.  Their medians (robust to outliers)
    at their median times are fitted by two levels with one common slope (the local trend,
    from the change within each side): the step is the difference of the two levels at the
    step time.  A linear or quadratic trend cancels exactly and a seasonal signal nearly (its
    third derivative times the window cubed), while a step of size D gives D.  The estimate
    is divided by its noise, the robust spread (1.4826 MAD) of the same estimator over the
    whole series, which includes time-correlated noise and what the local line leaves of the
    signal, and never less than white noise predicts (from the first differences).  The
    epoch with the largest score above ``threshold`` and a size of at least ``min_step_m``
    is a step; its time is refined to the split that best separates two levels (least
    absolute deviations over +-N epochs of the detrended series); its size is re-estimated
    there by least squares over +-2N epochs (level, slope, offset, and a daily sinusoid for
    sub-daily data: thermal and multipath cycles; outliers trimmed), which is ~30 % less
    noisy; it is removed from the series, and the search repeats (at most ``max_steps``).

    Defaults: ``window_days`` 1 (24 hourly epochs: the daily multipath and thermal cycles
    average out); ``threshold`` 6: with ~1 independent test per window, a 90-day series
    makes ~100 tests, and 6 keeps false steps from Gaussian noise below one in 10^6 series
    while leaving margin for real noise, which is time-correlated; ``min_step_m`` 3 mm:
    smaller offsets are at the level of the hourly noise and of no engineering weight.  With
    hourly data, a 1 cm step in 1.5 mm noise scores ~12 and a 5 cm step in 3 mm noise ~30.

    Limits.  A step in the first or last two windows (2N epochs) of the series is not
    detected: it needs two windows on each side to tell it from an acceleration, so a new
    step is reported once two windows of data follow it.  Two steps closer than two windows
    are resolved poorly (the larger one is found first, with a biased size).  A step inside
    a long gap cannot be separated from motion during the gap (the local slope is
    extrapolated across it).  A burst of outliers filling more than half a window looks
    like a pair of steps: remove outliers first.  Sharp accelerations (a change of velocity
    within a window) look like steps of the size of the velocity change times the window.
    """
    return _search_steps(t, *_prepare(t, x_m), None, window_days=window_days,
                         min_step_m=min_step_m, threshold=threshold,
                         min_window_points=min_window_points, max_steps=max_steps)


def detect_steps_enu(t, east_m, north_m, up_m, **kwargs) -> list[Step]:
    """``detect_steps`` of each of east, north and up (same keyword arguments), their steps
    in that order.  Components finite at the same epochs (the usual case) get their first
    search's window medians in one batch (they share every window); the rest of each
    search is the component's own, so the steps are exactly those of three calls."""
    comps = [east_m, north_m, up_m]
    shared = _shared_epochs(t, comps)
    if shared is None:
        return [s for c in comps for s in detect_steps(t, c, **kwargs)]
    opts = {**_STEP_DEFAULTS, **kwargs}
    order, days, ys = shared
    nw = _step_window(days, opts["window_days"], opts["min_window_points"])
    first = _step_estimates(days, ys, nw) if nw else None
    found = []
    for c, y in enumerate(ys):
        own = None if first is None else (first[0][c], first[1], first[2][c], first[3][c])
        found += _search_steps(t, order, days, y, own, **opts)
    return found


def _step_window(days: np.ndarray, window_days: float, min_window_points: int) -> int:
    """Epochs a step window holds (``detect_steps``), or 0 when the series is too short to
    search (fewer than three windows)."""
    n = days.size
    if n < 3 * min_window_points:
        return 0
    nw = max(int(min_window_points), int(round(window_days / _median_spacing_days(days))))
    return nw if n >= 3 * nw else 0


def _search_steps(t, order: np.ndarray, days: np.ndarray, x: np.ndarray, first, *,
                  window_days: float, min_step_m: float, threshold: float,
                  min_window_points: int, max_steps: int) -> list[Step]:
    """``detect_steps``' search on the finite epochs in time order (``order`` into ``t``,
    their ``days`` and values ``x``); ``first``: the first round's ``_step_estimates``
    when already computed (with other components'), else None."""
    t_all = as_datetime64(t)
    n = days.size
    nw = _step_window(days, window_days, min_window_points)
    if not nw:
        return []
    y = x.copy()
    sigma_white = MAD_TO_SIGMA * _mad(np.diff(y)) / np.sqrt(2.0)
    excluded = np.zeros(n + 1, bool)
    steps: list[Step] = []
    for _ in range(max_steps):
        delta, coef, slope, valid = first if first is not None else \
            _step_estimates(days, y, nw)
        first = None  # the series changes once a step is removed
        u = np.where(valid, delta / coef, np.nan)
        spread = MAD_TO_SIGMA * _mad(u[valid]) if valid.any() else np.nan
        floor = _MEDIAN_EFFICIENCY * sigma_white / np.sqrt(nw)
        noise = max(spread, floor) if np.isfinite(spread) else floor
        if not (np.isfinite(noise) and noise > 0):
            break
        z = u / noise
        ok = valid & ~excluded & (np.abs(z) >= threshold) & (np.abs(delta) >= min_step_m)
        if not ok.any():
            break
        k = int(np.flatnonzero(ok)[np.argmax(np.abs(z[ok]))])
        k0 = _refine_split(days, y, k, nw, slope[k])
        score = z[k0]
        if not (valid[k0] and abs(score) >= threshold and abs(delta[k0]) >= min_step_m):
            excluded[max(0, k - nw):k + nw + 1] = True  # cannot be confirmed: do not retry
            continue
        # Size: least squares over 2 windows either side; its formal sigma scaled up by how
        # much worse than white the noise behaves at the window's scale.
        size, sigma = _fit_step(days, y, k0, nw, slope[k0], delta[k0])
        sigma *= max(1.0, noise / floor) if floor > 0 else 1.0
        y[k0:] -= size
        excluded[max(0, k0 - 1):k0 + 2] = True
        steps.append(Step(time=t_all[order[k0]], last_before=t_all[order[k0 - 1]],
                          size_m=float(size), sigma_m=float(sigma), score=float(abs(score)),
                          index=int(order[k0])))
    return steps


_STEP_DEFAULTS = {name: p.default for name, p in
                  inspect.signature(detect_steps).parameters.items()
                  if p.kind is p.KEYWORD_ONLY}


def _mad(v: np.ndarray) -> float:
    v = v[np.isfinite(v)]
    return median(np.abs(v - median(v))) if v.size else float("nan")


def _step_estimates(days: np.ndarray, y: np.ndarray, nw: int
                    ) -> tuple[np.ndarray, np.ndarray, np.ndarray, np.ndarray]:
    """For each candidate k in 0..n (the first epoch after the step): the step estimate, the
    root sum of squares of its coefficients on the window medians (its noise in units of one
    median's noise), the local slope, and whether the estimate exists.  ``y``: one series,
    or components x epochs (one batch of medians; the coefficients, which depend on the
    times alone, are shared)."""
    n = days.size
    starts = np.arange(n - nw + 1)
    ys = y.reshape(-1, n)
    flat = ys.ravel()
    med = _window_medians(*_in_rows(starts, starts + nw, ys.shape[0], n),
                          lambda rows, take: take(flat)).reshape(y.shape[:-1] + (-1,))
    tau = _median_times(days, starts, starts + nw)
    k = np.arange(n + 1)

    def window(offset: int) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
        s = k + offset
        ok = (s >= 0) & (s + nw <= n)
        sc = np.clip(s, 0, n - nw)
        return np.where(ok, med[..., sc], np.nan), np.where(ok, tau[sc], np.nan), ok

    mb1, tb1, okb1 = window(-nw)
    mb2, tb2, okb2 = window(-2 * nw)
    ma1, ta1, oka1 = window(0)
    ma2, ta2, oka2 = window(nw)
    # All four windows: with three, a curvature (acceleration) would pass for a step.
    valid = okb1 & oka1 & okb2 & oka2
    t_step = 0.5 * (days[np.clip(k - 1, 0, n - 1)] + days[np.clip(k, 0, n - 1)])
    # pooled slope: separate level each side, common slope, from the pairs that exist
    db = np.where(okb2, tb1 - tb2, 0.0)
    da = np.where(oka2, ta2 - ta1, 0.0)
    den = db ** 2 + da ** 2
    with np.errstate(invalid="ignore", divide="ignore"):
        num = np.where(okb2, db * (mb1 - mb2), 0.0) + np.where(oka2, da * (ma2 - ma1), 0.0)
        slope = np.where(den > 0, num / den, 0.0)
        nb = 1.0 + okb2
        na = 1.0 + oka2
        mean_mb = np.where(okb2, 0.5 * (mb1 + mb2), mb1)
        mean_tb = np.where(okb2, 0.5 * (tb1 + tb2), tb1)
        mean_ma = np.where(oka2, 0.5 * (ma1 + ma2), ma1)
        mean_ta = np.where(oka2, 0.5 * (ta1 + ta2), ta1)
        delta = (mean_ma + slope * (t_step - mean_ta)) - (mean_mb + slope * (t_step - mean_tb))
        # coefficients of delta on each window median: +-1/n_side + (tau - mean) * g / D,
        # with D = sum of squared time deviations = den / 2
        g = 2.0 * (mean_tb - mean_ta)
        cb1 = -1.0 / nb + np.where(okb2, (tb1 - mean_tb) * g / den, 0.0)
        cb2 = np.where(okb2, -1.0 / nb + (tb2 - mean_tb) * g / den, 0.0)
        ca1 = 1.0 / na + np.where(oka2, (ta1 - mean_ta) * g / den, 0.0)
        ca2 = np.where(oka2, 1.0 / na + (ta2 - mean_ta) * g / den, 0.0)
        coef = np.sqrt(cb1 ** 2 + cb2 ** 2 + ca1 ** 2 + ca2 ** 2)
    valid = valid & np.isfinite(delta) & np.isfinite(coef) & (den > 0)
    return delta, coef, slope, valid


def _fit_step(days: np.ndarray, y: np.ndarray, k0: int, nw: int, slope: float,
              size: float) -> tuple[float, float]:
    """Least-squares offset (and its formal 1-sigma) between epochs k0-1 and k0 of a level +
    slope + offset model (+ a daily sinusoid for sub-daily sampling: thermal and multipath
    cycles) over the epochs k0 +- 2 windows, after trimming epochs beyond 4 scaled MADs of
    the robust model (``slope``, ``size``)."""
    n = days.size
    a, b = max(0, k0 - 2 * nw), min(n, k0 + 2 * nw)
    tt = days[a:b] - 0.5 * (days[k0 - 1] + days[k0])
    after = (np.arange(a, b) >= k0).astype(np.float64)
    r0 = y[a:b] - slope * tt - size * after
    dev = np.abs(r0 - median(r0))
    keep = dev <= 4.0 * max(MAD_TO_SIGMA * median(dev), 1e-12)
    columns = [np.ones(keep.sum()), tt[keep], after[keep]]
    if median(np.diff(days[a:b])) < 0.25:  # sub-daily: fit the daily cycle along
        columns += [np.sin(2 * np.pi * tt[keep]), np.cos(2 * np.pi * tt[keep])]
    design = np.column_stack(columns)
    p = design.shape[1]
    if design.shape[0] <= p + 2 or not (0 < after[keep].sum() < keep.sum()):
        return float(size), float("nan")
    coef, _, rank, _ = np.linalg.lstsq(design, y[a:b][keep], rcond=None)
    if rank < p:
        return float(size), float("nan")
    resid = y[a:b][keep] - design @ coef
    s2 = float(resid @ resid) / (design.shape[0] - p)
    cov = s2 * np.linalg.inv(design.T @ design)
    return float(coef[2]), float(np.sqrt(cov[2, 2]))


def _refine_split(days: np.ndarray, y: np.ndarray, k: int, nw: int, slope: float) -> int:
    """The split in k +- nw/2 that best separates two levels in the epochs k +- nw (the
    series detrended by ``slope``): least sum of absolute deviations from each side's
    median.  A step found by window medians is located to within half a window; this puts
    it on the epoch."""
    n = days.size
    a, b = max(0, k - nw), min(n, k + nw)
    seg = y[a:b] - slope * (days[a:b] - days[min(k, n - 1)])
    splits = np.arange(max(a + 1, k - nw // 2), min(b - 1, k + nw // 2) + 1)
    if splits.size == 0:
        return k
    rel = splits - a
    m = seg.size
    left = _window_medians(np.zeros_like(rel), rel, lambda rows, take: take(seg),
                           max_points=m)
    right = _window_medians(rel, np.full_like(rel, m), lambda rows, take: take(seg),
                            max_points=m)
    j = np.arange(m)[None, :]
    level = np.where(j < rel[:, None], left[:, None], right[:, None])
    cost = np.abs(seg[None, :] - level).sum(axis=1)
    return int(splits[np.argmin(cost)])


# ------------------------------------------------------------------------ known steps

def steps_from_events(events: Iterable[Mapping] | None,
                      kinds: tuple[str, ...] = ("antenna_change", "base_station_switch")
                      ) -> np.ndarray:
    """Times (datetime64[ns], UTC, sorted, distinct) of the device's known events of the
    given ``kinds``: the service's ``_internal.metadata.gnssEvents`` list of
    ``{"type": ..., "at": ISO 8601 string}``.  An antenna change or a base-station switch
    shifts the solution, so a trend estimator must allow an offset there.

    Events of other kinds are ignored; an event of a wanted kind with a missing or
    unreadable time raises ``ValueError`` (silently dropping a known step would bias every
    velocity across it)."""
    times = []
    for event in events or []:
        if not isinstance(event, Mapping) or event.get("type") not in kinds:
            continue
        text = event.get("at")
        try:
            times.append(_parse_iso_utc(text))
        except (TypeError, ValueError):
            raise ValueError(f"GNSS event {dict(event)!r} has no readable time 'at' (ISO 8601 "
                             f"such as 2026-01-05T10:00:00Z expected)") from None
    return np.unique(np.array(times, dtype="datetime64[ns]"))


def _parse_iso_utc(text: str) -> np.datetime64:
    value = datetime.fromisoformat(str(text).strip().replace("z", "Z"))
    if value.tzinfo is not None:
        value = value.astimezone(timezone.utc).replace(tzinfo=None)
    return np.datetime64(value, "ns")


def steps_from_base_station(t, base_station_id) -> np.ndarray:
    """Times (datetime64[ns]) of the first epoch solved against a different base station
    than the previous epoch: each switch moves the solution by the error of the base
    stations' coordinates, a step.  Epochs without an id (None, NaN) are skipped, so an
    outage of the id is not a switch.  ``t`` is sorted into time order first."""
    t = as_datetime64(t)
    ids = np.asarray(base_station_id)
    if ids.shape != t.shape:
        raise ValueError(f"times {t.shape} and base station ids {ids.shape} differ in shape")
    if ids.dtype.kind == "f":
        present = np.isfinite(ids)
    elif ids.dtype == object:
        present = np.array([v is not None and not (isinstance(v, float) and np.isnan(v))
                            for v in ids.tolist()], bool)
    else:
        present = np.ones(ids.shape, bool)
    idx = np.flatnonzero(present & ~np.isnat(t))
    idx = idx[np.argsort(t[idx], kind="stable")]
    if idx.size < 2:
        return np.empty(0, "datetime64[ns]")
    seq = ids[idx]
    change = np.flatnonzero(seq[1:] != seq[:-1]) + 1
    return t[idx[change]]


__all__ = ["QualityThresholds", "QualityResult", "quality_mask", "QUALITY_REASONS",
           "mad_outliers", "mad_outliers_enu", "Gap", "find_gaps", "median_period_s",
           "Completeness", "completeness", "Step", "detect_steps", "detect_steps_enu",
           "steps_from_events",
           "steps_from_base_station", "MAD_TO_SIGMA"]

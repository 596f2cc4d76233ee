"""Least-squares lines over many windows of one series at once: the one home of the
windowed line fit behind sliding velocities (``trends``), inverse velocities
(``inverse_velocity``) and the alarm rule's trailing displacement and velocity (``alarms``).

Why prefix sums: the alarm rule fits a line at every epoch (a week of hourly data each),
so a fit per window would cost n x width; cumulative sums of 1, t, t^2, x, t x, x^2 give
every window's sums in O(n).  Why anchored: a cumulative sum of t^2 over years of data
dwarfs one window's spread about its mean, and the difference of two such sums then loses
digits.  So the sums are taken per block of the series (no longer than the longest
window) about the block's first epoch, and a window, which then spans at most two blocks,
is assembled from the two parts shifted to its own first epoch: every number stays at the
scale of one window, as precise as summing the window's deviations directly.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np


@dataclass(frozen=True)
class WindowLines:
    """The line ``x = x_mean + slope (t - t_mean)`` through each window, in the caller's
    units (``slope`` in x per unit of t).  ``n``: epochs in the window; ``stt``: the sum
    of squared time deviations (0 when all times coincide); ``residual_variance``: the
    scatter about the line, rss / (n - 2).  ``slope`` is NaN where the times do not define
    a line (``stt`` not above 1e-12 n: coincident times, where rounding alone would give a
    slope); ``slope_sigma``, the formal (white-noise) 1-sigma, is NaN there and with fewer
    than 3 epochs (no scatter to measure)."""

    n: np.ndarray
    t_mean: np.ndarray
    x_mean: np.ndarray
    slope: np.ndarray
    slope_sigma: np.ndarray
    stt: np.ndarray
    residual_variance: np.ndarray

    def value_at(self, t: np.ndarray) -> np.ndarray:
        """Each window's line at the time ``t`` (one per window)."""
        return self.x_mean + self.slope * (t - self.t_mean)

    def value_sigma_at(self, t: np.ndarray) -> np.ndarray:
        """Formal 1-sigma of ``value_at(t)``: s^2 (1/n + (t - t_mean)^2 / stt)."""
        with np.errstate(divide="ignore", invalid="ignore"):
            return np.sqrt(self.residual_variance
                           * (1.0 / self.n + (t - self.t_mean) ** 2 / self.stt))


def window_lines(t: np.ndarray, x: np.ndarray, lo: np.ndarray, hi: np.ndarray
                 ) -> WindowLines:
    """Least-squares line of ``x`` against ``t`` (float, ascending) over each index window
    [lo, hi) (windows may overlap; an empty one gives n = 0 and NaN).

    ``x`` may hold several series of the same times (components x epochs, as east, north
    and up): their lines come from one pass (the sums of the times are shared), each
    exactly as a call of its own gives it, in fields of components x windows (``n``,
    ``t_mean`` and ``stt`` per window)."""
    t = np.asarray(t, np.float64)
    x = np.asarray(x, np.float64)
    lo = np.asarray(lo, np.int64)
    hi = np.asarray(hi, np.int64)
    nonempty = hi > lo
    n, su, sy, suu, suy, syy = _anchored_sums(t, x, lo, hi)
    with np.errstate(divide="ignore", invalid="ignore"):
        um, ym = su / n, sy / n
        ctt = suu - su * um
        cty = suy - su * ym
        cyy = syy - sy * ym
        slope = cty / ctt
        s2 = np.maximum(cyy - slope * cty, 0.0) / (n - 2.0)
        sigma = np.sqrt(s2 / ctt)
    line = ctt > 1e-12 * np.maximum(n, 1.0)
    anchor = np.where(nonempty, lo, 0)
    t0 = np.where(nonempty, t[anchor], np.nan) if t.size else np.full(lo.size, np.nan)
    x0 = np.where(nonempty, x[..., anchor], np.nan) if t.size \
        else np.full(x.shape[:-1] + lo.shape, np.nan)
    return WindowLines(n, t0 + um, x0 + ym, np.where(line, slope, np.nan),
                       np.where(line & (n > 2), sigma, np.nan), ctt,
                       np.where(n > 2, s2, np.nan))


def _anchored_sums(t: np.ndarray, x: np.ndarray, lo: np.ndarray, hi: np.ndarray
                   ) -> tuple[np.ndarray, ...]:
    """n and the sums of u, y, u^2, u y, y^2 over each window [lo, hi), u = t - t[lo] and
    y = x - x[lo] (the window's first epoch).  The series is cut into blocks of at most as
    many epochs as the longest window, and also at every gap longer than the longest
    window's span (which no window crosses, and which would put a block's anchor far from
    the windows after it); so a window covers the tail of one block and the head of the
    next.  Cumulative sums restart in each block (a row of a matrix) about the block's
    first epoch, and each part is shifted to the window's anchor.  ``x`` of several
    series (components x epochs): n and the sums of u are per window, the others per
    component and window."""
    m, size = lo.size, t.size
    lead = x.shape[:-1]  # () for one series, (k,) for k
    count = np.where(hi > lo, hi - lo, 0)
    if m == 0 or size == 0 or not count.any():
        nan = np.full(m, np.nan)
        nan_x = np.full(lead + (m,), np.nan)
        return (count.astype(np.float64), nan, nan_x, nan, nan_x, nan_x)
    width = int(count.max())
    block_start = _blocks(t, lo, hi, count, width)
    rows = block_start.size
    starts = np.zeros(size, np.int64)
    starts[block_start] = 1
    block = np.cumsum(starts) - 1  # each epoch's block
    col = np.arange(size) - block_start[block]
    k = int(np.prod(lead, dtype=np.int64))
    xs = x.reshape(k, size)
    tp = np.zeros((rows, width))
    xp = np.zeros((k, rows, width))
    tp[block, col] = t - t[block_start][block]
    xp[:, block, col] = xs - xs[:, block_start][:, block]
    real = np.zeros((rows, width), bool)
    real[block, col] = True
    # per column, cumulative sums restarting in each block: csum[c, k, j] is the sum over
    # the first j epochs of block k (a zero column first); flat for one-index gathers.
    # Channels: 1, u, u^2, then y, u y, y^2 of each series
    csum = np.zeros((3 + 3 * k, rows, width + 1))
    values = np.concatenate([np.stack([real.astype(np.float64), tp, tp * tp]), xp,
                             tp * xp, xp * xp])
    np.cumsum(values, axis=2, out=csum[:, :, 1:])
    flat = csum.reshape(3 + 3 * k, -1)
    lo_c = np.where(count > 0, lo, 0)
    hi_c = lo_c + count
    k0 = block[lo_c]
    block_end = np.append(block_start[1:], size)
    split = np.minimum(hi_c, block_end[k0])
    t0, x0 = t[lo_c], xs[:, lo_c]

    def part(kb: np.ndarray, a: np.ndarray, b: np.ndarray) -> np.ndarray:
        """Sums over [a, b) inside block ``kb`` (a == b: nothing), about the window
        anchor: n, su, suu (a row each), then sy, suy, syy (k rows each)."""
        start = block_start[kb]
        row = kb * (width + 1) - start  # epoch i of block kb: flat index row + i
        sums = np.take(flat, row + b, axis=1) - np.take(flat, row + a, axis=1)
        n, su, suu = sums[:3]
        sy, suy, syy = sums[3:3 + k], sums[3 + k:3 + 2 * k], sums[3 + 2 * k:]
        du, dy = t[start] - t0, xs[:, start] - x0  # block anchor minus window anchor
        return np.concatenate([[n, su + n * du, suu + du * (2.0 * su + n * du)],
                               sy + n * dy, suy + du * sy + dy * (su + n * du),
                               syy + dy * (2.0 * sy + n * dy)])

    total = part(k0, lo_c, split)
    spill = hi_c > split  # the window reaches into the next block
    if spill.any():
        t0, x0 = t0[spill], x0[:, spill]
        total[:, spill] += part(k0[spill] + 1, split[spill], hi_c[spill])
    total[1:, count == 0] = np.nan
    n, su, suu = total[:3]
    sy, suy, syy = (total[3 + j * k:3 + (j + 1) * k].reshape(lead + (m,)) for j in range(3))
    return n, su, sy, suu, suy, syy


def _blocks(t: np.ndarray, lo: np.ndarray, hi: np.ndarray, count: np.ndarray, width: int
            ) -> np.ndarray:
    """First epoch of each block: runs between gaps longer than the longest window's span,
    cut into pieces of ``width`` epochs.  Without the cut at gaps when the runs' short last
    pieces would more than double the matrix (many gaps): precision is then that of a
    block's span, still far from the whole series'."""
    size = t.size
    used = count > 0
    span = float(np.max(t[hi[used] - 1] - t[lo[used]]))
    runs = np.concatenate([[0], np.flatnonzero(np.diff(t) > span) + 1])
    lengths = np.diff(np.append(runs, size))
    pieces = -(-lengths // width)
    if int(pieces.sum()) * width > 2 * size + width:
        runs, pieces = np.array([0]), np.array([-(-size // width)])
        lengths = np.array([size])
    first = np.repeat(runs, pieces)
    within = np.arange(int(pieces.sum())) - np.repeat(np.cumsum(pieces) - pieces, pieces)
    return first + within * width


__all__ = ["WindowLines", "window_lines"]

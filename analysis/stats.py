"""Quantiles of the normal and Student's t distributions: the one home of both; and
``median``, np.median of one series without its per-call overhead.

Why not scipy: the analysis is numpy only (a frozen desktop build carries no scipy), and
only these two quantiles are needed, by the trend intervals (``trends``), the failure
forecast's profile threshold (``forecast``) and the alarm rule's one-sided margin
(``alarms``).  Both are exact to ~1e-12, far below any figure a report prints.
"""

from __future__ import annotations

import math
from functools import lru_cache

import numpy as np


def normal_quantile(p: float) -> float:
    """Phi^-1(p) for 0 < p < 1 (0 exactly at 0.5): bisection on the upper tail
    erfc(z / sqrt(2)) / 2, which keeps its relative precision near p = 1 where 1 + erf
    would round; 80 halvings of [0, 10] reach the float's resolution."""
    if not 0.0 < p < 1.0:
        raise ValueError(f"need 0 < p < 1 (got p={p})")
    if p < 0.5:
        return -normal_quantile(1.0 - p)
    tail = 1.0 - p
    lo, hi = 0.0, 10.0
    for _ in range(80):
        mid = 0.5 * (lo + hi)
        if 0.5 * math.erfc(mid / math.sqrt(2.0)) > tail:
            lo = mid
        else:
            hi = mid
    return 0.5 * (lo + hi) if p > 0.5 else 0.0


def _betacf(a: float, b: float, x: float) -> float:
    """Continued fraction of the incomplete beta function (modified Lentz)."""
    tiny = 1e-300
    c, d = 1.0, 1.0 - (a + b) * x / (a + 1.0)
    d = 1.0 / (d if abs(d) > tiny else tiny)
    h = d
    for m in range(1, 500):
        for aa in (m * (b - m) * x / ((a + 2 * m - 1) * (a + 2 * m)),
                   -(a + m) * (a + b + m) * x / ((a + 2 * m) * (a + 2 * m + 1))):
            d = 1.0 + aa * d
            d = 1.0 / (d if abs(d) > tiny else tiny)
            c = 1.0 + aa / c
            c = c if abs(c) > tiny else tiny
            h *= d * c
        if abs(d * c - 1.0) < 1e-15:
            break
    return h


def _t_upper_tail(q: float, dof: float) -> float:
    """P(T > q) for Student's t with ``dof`` degrees of freedom, q >= 0 (regularised
    incomplete beta function I_{dof/(dof+q^2)}(dof/2, 1/2) / 2)."""
    a, b, x = dof / 2.0, 0.5, dof / (dof + q * q)
    if x >= 1.0:
        return 0.5
    log_front = (math.lgamma(a + b) - math.lgamma(a) - math.lgamma(b) + a * math.log(x)
                 + b * math.log1p(-x))
    if x < (a + 1.0) / (a + b + 2.0):
        return 0.5 * math.exp(log_front) * _betacf(a, b, x) / a
    return 0.5 * (1.0 - math.exp(log_front) * _betacf(b, a, 1.0 - x) / b)


@lru_cache(maxsize=256)
def student_t_quantile(p: float, dof: float) -> float:
    """The ``p`` quantile (0.5 <= p < 1) of Student's t with ``dof`` > 0 degrees of freedom
    (real, not necessarily whole; ``inf`` gives ``normal_quantile``).  Newton's method on
    the exact CDF from the Cornish-Fisher approximation (a few evaluations of the incomplete
    beta function; bisection took ~40), bisection where Newton does not settle; accurate to
    ~1e-12."""
    if not 0.5 <= p < 1.0 or not dof > 0:
        raise ValueError(f"need 0.5 <= p < 1 and dof > 0 (got p={p}, dof={dof})")
    if math.isinf(dof):
        return normal_quantile(p)
    dof = float(dof)

    def upper_tail(q: float) -> float:
        return _t_upper_tail(q, dof)

    tail = 1.0 - p
    z = normal_quantile(p)
    # Cornish-Fisher expansion of the t quantile in 1/dof (Abramowitz & Stegun 26.7.5)
    q = z + (z ** 3 + z) / (4 * dof) + (5 * z ** 5 + 16 * z ** 3 + 3 * z) / (96 * dof ** 2)
    log_norm = (math.lgamma((dof + 1) / 2) - math.lgamma(dof / 2)
                - 0.5 * math.log(dof * math.pi))
    for _ in range(20):
        density = math.exp(log_norm - (dof + 1) / 2 * math.log1p(q * q / dof))
        step = (upper_tail(q) - tail) / density
        if not (math.isfinite(step) and q + step > 0):
            break
        q += step
        if abs(step) <= 1e-10 * q:  # quadratic convergence: exact but for the CDF's rounding
            return q
    return _bisect_quantile(upper_tail, tail)


def _bisect_quantile(upper_tail, tail: float) -> float:
    """The q > 0 with upper_tail(q) = tail, by bisection (to 1e-12 relative)."""
    lo, hi = 0.0, 1.0
    while upper_tail(hi) > tail:
        lo, hi = hi, 2.0 * hi
    while hi - lo > 1e-12 * hi:
        mid = 0.5 * (lo + hi)
        lo, hi = (mid, hi) if upper_tail(mid) > tail else (lo, mid)
    return 0.5 * (lo + hi)


def median(values) -> float:
    """``np.median`` of the values (flattened), the same number bit for bit, NaN when one
    is NaN or there are none (without numpy's warning), in a third of the time on the short
    series the analysis takes hundreds of medians of per rover (~3 us against ~10 us: one
    partition, none of np.median's generic axis handling)."""
    v = np.asarray(values, dtype=np.float64).ravel()
    n = v.size
    if n == 0:
        return math.nan
    h = n // 2
    p = np.partition(v, (h, n - 1) if n % 2 else (h - 1, h, n - 1))
    if math.isnan(p[-1]):  # numpy's NaN check: the largest slot holds any NaN
        return math.nan
    return float(p[h]) if n % 2 else float((p[h - 1] + p[h]) / 2.0)


__all__ = ["normal_quantile", "student_t_quantile", "median"]

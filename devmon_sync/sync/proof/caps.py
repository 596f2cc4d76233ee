"""What a cut answer teaches about the service's silent caps, and windows planned within them.

A follow-up that finds data proves the service cut its parent's answer; how it was cut says
which cap: a whole answer stopped at the largest size ever seen, a cap on answers; one stopped
below it, a clipped range; streams cut at one count, a cap per series.  What is learned only
plans later windows (every answer is still judged), so a wrong guess costs requests, never
data.
"""

from __future__ import annotations

import math

from devmon_sync.sync.proof import arrays as arr
from devmon_sync.sync.proof import judge as completeness
from devmon_sync.sync.proof.follow_ups import pieces
from devmon_sync.sync.plan import Window
from devmon_sync.service_profile import KindProfile

CAP_FILL = 0.9
"""Of a learned cap (per answer or per series) a planned window may use."""
MIN_PART_MS = 120_000
"""No part of a window is planned shorter than two minutes."""
DAY_MS = 86_400_000.0


def parts_within_caps(k: KindProfile, w: Window, series_peak: float) -> list[Window]:
    """``w`` cut into as few equal parts as the learned caps allow (itself when it fits):
    the fewest requests that keep each part within every cap learned.  ``series_peak``:
    the most points one stream of ``w`` is expected to bring."""
    span_ms = arr.ms(w.end) - arr.ms(w.start)
    parts = 1
    if k.silent_range_days is not None:
        parts = max(parts, math.ceil(span_ms / (k.silent_range_days * DAY_MS)))
    if k.silent_cap is not None:
        parts = max(parts, math.ceil(w.expected_points / (CAP_FILL * k.silent_cap)))
    if k.silent_cap_per_series is not None:
        parts = max(parts, math.ceil(series_peak / (CAP_FILL * k.silent_cap_per_series)))
    parts = min(parts, max(1, span_ms // MIN_PART_MS))
    return [w] if parts <= 1 else pieces(w, math.ceil(span_ms / parts))


def learned_from_cut(k: KindProfile, parent: Window, got: completeness.Received,
                     f: completeness.FollowUp) -> dict:
    """The profile changes a follow-up ``f`` that found data teaches, ``got`` being the
    parent's answer."""
    changes: dict = {"cut_answers": k.cut_answers + 1}
    if f.side in ("tail", "head") and got.size > 0:
        if got.size >= k.largest_answer or k.silent_cap is not None:
            changes["silent_cap"] = min(got.size, k.silent_cap or got.size)
        else:
            edge = arr.nan_max(got.last_ms) if f.side == "tail" else arr.nan_min(got.first_ms)
            start, end = arr.ms(parent.start), arr.ms(parent.end)
            days = abs(edge - (start if f.side == "tail" else end)) / DAY_MS
            if days > 0:
                changes["silent_range_days"] = min(days, k.silent_range_days or days)
    elif f.side == "thin":
        changes.update(_thinning_cap(parent, got, f, k))
    elif f.side in ("newest", "continuity", "origin") and parent.keys:
        cut = [int(got.count[parent.keys.index(key)]) for key in f.keys
               if key in parent.keys]
        peak = max(cut or [0])
        if peak > 0 and peak == int(got.count.max()):
            changes["silent_cap_per_series"] = min(peak, k.silent_cap_per_series or peak)
    return changes


def _thinning_cap(parent: Window, got: completeness.Received, f: completeness.FollowUp,
                  k: KindProfile) -> dict:
    """What a thinned answer teaches: streams thinned to one count show a cap per series
    (a cap on the answer spreads its points over the streams, unevenly unless they are
    alike, and planning within the per-series count keeps within it too); else a cap on
    the answer, at its size."""
    counts = {int(got.count[parent.keys.index(key)]) for key in f.keys}
    if max(counts) - min(counts) <= 1 and max(counts) > 0:
        return {"silent_cap_per_series": min(max(counts),
                                             k.silent_cap_per_series or max(counts))}
    return {"silent_cap": min(got.size, k.silent_cap or got.size)}

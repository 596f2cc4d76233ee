"""Follow-ups: which questions about a possibly cut answer are worth asking, how to ask
them, and what their answers prove.

Pure functions on windows, verdicts and per-stream counts; the window fetcher
(``devmon_sync.sync.proof.fetcher``) asks and commits.
"""

from __future__ import annotations

import math
from dataclasses import replace

import numpy as np

from devmon_sync.sync.proof import arrays as arr
from devmon_sync.sync.proof import judge as completeness
from devmon_sync.sync.plan import PLANNED_SIDES, Window


def progress(w: Window, f: completeness.FollowUp) -> bool:
    """A follow-up must ask something new: never the very window being judged again (a
    split asks the same range in shorter parts: that is new)."""
    if f.span_ms is not None and f.span_ms < arr.ms(w.end) - arr.ms(w.start):
        return True
    return (w.kind, tuple(w.keys), w.start, w.end) != (w.kind, f.keys, arr.dt(f.start_ms),
                                                       arr.dt(f.end_ms))


def worth_asking(w: Window, facts: completeness.WindowFacts, got: completeness.Received,
                 f: completeness.FollowUp) -> bool:
    """A follow-up's own answer raises a further question only where it may itself have
    been cut: as large as a cut answer, or a stream holding as many points as any (a cap per
    series), or the newest point still missing, or data before it.  A narrow answer that
    simply has nothing more settles its question (an outage is an outage)."""
    if w.side in PLANNED_SIDES or f.side in ("newest", "before", "thin"):
        return True
    if got.size >= facts.largest_before:  # as large as a cut answer
        return True
    peak = int(got.count.max()) if got.count.size else 0
    index = {k: i for i, k in enumerate(w.keys)}
    return peak > 0 and any(got.count[index[k]] == peak for k in f.keys if k in index)


def pieces(w: Window, span_ms: float | None) -> list[Window]:
    """``w`` in consecutive pieces no longer than ``span_ms`` (itself when it fits)."""
    if span_ms is None or span_ms <= 0 or arr.ms(w.end) - arr.ms(w.start) <= span_ms:
        return [w]
    out, t, end = [], arr.ms(w.start), arr.ms(w.end)
    n = math.ceil((end - t) / span_ms)
    bounds = [t + (end - t) * i // n for i in range(n)] + [end + 1]
    for a, b in zip(bounds[:-1], bounds[1:]):
        stop = arr.dt(b - 1)
        out.append(replace(w, start=arr.dt(a), end=stop,
                           cursors={k: min(c, stop) for k, c in w.cursors.items()},
                           expected_points=w.expected_points / n))
    return out


def merge_seen(a: tuple | None, b: tuple) -> tuple:
    """Two (points, first ms, last ms) of one stream, as one."""
    if a is None:
        return b
    return (a[0] + b[0], float(np.fmin(a[1], b[1])), float(np.fmax(a[2], b[2])))


def news(parent: Window, got: completeness.Received, f: completeness.FollowUp,
          seen: dict[str, tuple]) -> bool:
    """Whether a follow-up brought a point the parent's answer lacked, stream by stream
    (a follow-up asks one range for several streams, so it re-reads what some of them had):
    past a stream's last point at the end of the window, before its first at the start;
    anything in a range the parent did not cover or had nothing in."""
    index = {k: i for i, k in enumerate(parent.keys)}
    for key in f.keys:
        count, first, last = seen.get(key, (0, np.nan, np.nan))
        i = index.get(key)
        if not count:
            continue
        if i is None or f.side == "empty" or not got.count[i]:
            return True
        if f.side == "before" and first < got.first_ms[i]:
            return True
        if f.side == "thin" and count > got.count[i]:
            return True
        if f.side in ("tail", "newest", "after") and last > got.last_ms[i]:
            return True
        if f.side in ("head", "continuity", "origin") and first < got.first_ms[i]:
            return True
    return False


def answered(verdict: completeness.Verdict, f: completeness.FollowUp) -> None:
    """A follow-up that would ask exactly the question just answered: that answer, to that
    precise question, is the proof (an empty one proves the range empty).  Only a missing
    newest point stays unproved: the service's /latest contradicts its own data."""
    for key in f.keys:
        left = [r for r in verdict.unproven.get(key, ())
                if not (f.start_ms <= r[0] and r[1] <= f.end_ms)]
        if left:
            verdict.unproven[key] = left
        else:
            verdict.unproven.pop(key, None)


def share(parent: Window, f: completeness.FollowUp) -> float:
    """Expected points of a follow-up: the parent's, pro rata of streams and time."""
    span = max(1.0, (parent.end - parent.start).total_seconds())
    part = max(0.0, (f.end_ms - f.start_ms) / 1000.0) / span
    return parent.expected_points * len(f.keys) / max(1, len(parent.keys)) * min(1.0, part)

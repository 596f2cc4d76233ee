"""Re-reading the past where it can change: late data, holes filled, corrections, re-solutions.

A real service has no change feed and changes its past: a logger uploads what it buffered
while offline (filling a hole the mirror took for an outage), an engineer corrects a week of
values, GNSS epochs are solved again with final orbits.  Re-reading weeks of raw points every
sync would cost many requests; instead, each sync asks the service for one value per stream
and UTC day over the settling window (the last ``SETTLE_DAYS``), twice: the count of values
and their sum (``service_profile.daily``), for up to 200 devices a request.  The mirror
computes the same from what it holds; a day whose count or sum differs is fetched again in
full and replaces the mirrored one (the commit keeps the values it changes as revisions).

What it cannot see, stated: a late point whose value is null (a count counts values), a
correction smaller than the comparison's tolerance (``REL_TOL`` of the day's sum of
magnitudes), changes older than the settling window (``devmon verify`` checks those).  A
service that refuses or ignores the aggregation is remembered and the check is skipped, with
a note.

Pure: the engine sends the requests and the store computes the mirror's side.
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from datetime import datetime, timedelta, timezone

import numpy as np
import pyarrow as pa

SETTLE_DAYS = 30
"""Days re-checked each sync: one request spans them (the spec's services accept 31)."""
REL_TOL = 1e-9
"""Of a day's sum of magnitudes, the difference in sums taken for a change (float sums in
another order differ by far less; a correction of 0.1 mm in 1,000 m heights by far more)."""
DAY_MS = 86_400_000
GNSS_FIELDS = ("lat", "lon", "eh")
"""GNSS epoch fields compared (a re-solution moves the position); their parameters carry
these names."""
HEIGHT_TOL_M = 1e-4
"""An epoch's height may differ by this between the epochs answer (rounded) and the field
series (full precision): a re-solution moving a day's heights by 0.1 mm on average or less
is not seen."""
DEGREE_TOL = 2e-9
"""Likewise for latitude and longitude (about 0.2 mm)."""
_EPOCH = datetime(1970, 1, 1, tzinfo=timezone.utc)


@dataclass(frozen=True)
class DayValues:
    """One stream's value count and sum on one UTC day."""

    count: float
    total: float | None
    magnitude: float = 0.0
    """Sum of absolute values (the scale of the tolerance); the service side has none."""
    tolerance: float = 0.0
    """What the sum may differ by for rounding alone (GNSS epochs are rounded, the field
    series are not)."""
    quarantined: float = 0.0
    """The mirror's points of that day in quarantine: the service's count may hold them
    (a point with a readable time) or not (a NaN value is no value)."""


def day_of(t: datetime) -> int:
    """The UTC day number (days since 1970-01-01) of ``t``."""
    return (t - _EPOCH) // timedelta(days=1)


def day_start(day: int) -> datetime:
    return _EPOCH + timedelta(days=day)


def service_days(count: pa.Table, total: pa.Table | None, key_column: str
                 ) -> dict[tuple[str, int], DayValues] | None:
    """The service's daily counts and sums by (key, day) from two aggregated answers (tables
    of ``answers.readings_from_json``; without ``total``, counts only); None when an answer
    is not aggregated by UTC day (a point off midnight, or two on one day: the service
    ignores the aggregation)."""
    out: dict[tuple[str, int], list] = {}
    for table, slot in ((count, 0), (total, 1)):
        if table is None:
            continue
        keys = table.column(key_column).to_pylist()
        ms = table.column("ts").cast(pa.int64()).to_numpy(zero_copy_only=False) // 1000
        if ms.size and np.any(ms % DAY_MS):
            return None
        values = table.column("value").to_pylist()
        for key, t, v in zip(keys, (ms // DAY_MS).tolist(), values, strict=True):
            cell = out.setdefault((key, t), [0.0, None, 0])
            if cell[2] & (1 << slot):
                return None  # two values on one day
            cell[2] |= 1 << slot
            cell[slot] = (v or 0.0) if slot == 0 else v
    return {k: DayValues(c[0], c[1]) for k, c in out.items()}


def unreadable_days(quarantine: pa.Table) -> set[tuple[str, int]]:
    """(key, day) of an aggregated answer's values that could not be read: those days the
    service said nothing comparable of."""
    if quarantine is None or not quarantine.num_rows:
        return set()
    keys = quarantine.column("key").to_pylist()
    stamps = quarantine.column("ts").to_pylist()
    return {(k, day_of(t)) for k, t in zip(keys, stamps, strict=True) if t is not None}


def changed_days(service: dict[tuple[str, int], DayValues],
                 mirror: dict[tuple[str, int], DayValues], keys: set[str],
                 days: range, sums: bool = True,
                 unknown: set[tuple[str, int]] = frozenset()) -> list[tuple[str, int]]:
    """(key, day) of ``keys`` over ``days`` whose count (or, with ``sums``, sum) differs;
    ``unknown`` days (the service's value unreadable) are not compared."""
    out = []
    for key in sorted(keys):
        for day in days:
            if (key, day) in unknown:
                continue
            s, m = service.get((key, day)), mirror.get((key, day))
            if _differ(s, m, sums):
                out.append((key, day))
    return out


def _differ(s: DayValues | None, m: DayValues | None, sums: bool) -> bool:
    s_count = s.count if s else 0.0
    m_count = m.count if m else 0.0
    extra = m.quarantined if m else 0.0
    if not m_count <= s_count <= m_count + extra:
        return True
    if not s_count or not sums or m is None or math.isinf(m.tolerance):
        return False  # (a day with values in quarantine has no comparable sum)
    a, b = s.total, m.total
    if a is None or b is None:
        return (a is None) != (b is None)
    return abs(a - b) > max(REL_TOL * max(m.magnitude, abs(b), 1.0), m.tolerance)

"""Re-reading the past where it can change: late data, holes filled, corrections, re-solutions.

A real service has no change feed and changes its past: a logger uploads what it buffered
while offline (filling a hole the mirror took for an outage), an engineer corrects a week of
values, GNSS epochs are solved again with final orbits.  Re-reading weeks of raw points every
sync would cost many requests; instead, each sync asks the service for one value per stream
and UTC day over the settling window (the last ``SETTLE_DAYS``), twice: the count of values
and their sum (``service_profile.daily``), for up to 200 devices a request.  The mirror
computes the same from what it holds; a day whose count or sum differs is fetched again in
full and replaces the mirrored one (the commit keeps the values it changes as revisions).

Older history is re-checked too, a span a turn (a rolling sweep from the settling window
back to the oldest point, then again; ``rolling_days``), so every day is re-checked once a
sweep; turns alternate with the settling window's.  A device whose data was seen to change
late gets a longer settling window (``settle_days_for``: the lateness seen, with a margin,
up to ``MAX_SETTLE_DAYS``).

What it cannot see, stated: a late point whose value is null (a count counts values), a
correction smaller than the comparison's tolerance (``REL_TOL`` of the day's sum of
magnitudes), a change older than the settling window until the sweep comes by (``devmon
verify`` checks any window on demand).  A service that refuses or ignores the aggregation is
remembered and the check is skipped, with a note.

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
MAX_SETTLE_DAYS = 92
"""The longest settling window lateness can earn a device (three requests of 31 days); what
changes later than that is the rolling sweep's to find."""
LATENESS_MARGIN = 1.25
"""A device seen to change ``d`` days late is re-checked ``d`` times this each turn."""
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


def settle_days_for(lateness_days: float | None, default_days: int) -> int:
    """Days a device's settling window spans: the default, or its lateness seen with a
    margin, up to ``MAX_SETTLE_DAYS``."""
    if not lateness_days:
        return default_days
    wanted = math.ceil(lateness_days * LATENESS_MARGIN)
    return max(default_days, min(MAX_SETTLE_DAYS, wanted))


def rolling_days(at_day: int | None, settle_first_day: int, history_first_day: int,
                 span_days: int) -> range:
    """The days of the sweep's next step: the ``span_days`` before ``at_day`` (where the last
    step began), or before the settling window when the sweep starts again (no step yet, or
    the last reached the oldest history); empty when all history lies in the settling
    window."""
    if history_first_day >= settle_first_day:
        return range(0)
    end = at_day if at_day is not None and history_first_day < at_day <= settle_first_day \
        else settle_first_day
    return range(end - span_days, end)


def lateness_of(changed: list[tuple[str, int]], seen_before: datetime | None
                ) -> dict[str, float]:
    """Per key, how late the service changed a day at least: the days between the end of
    the day and ``seen_before`` (the start of the sync before, which had read that day as it
    was); days it had not read yet tell nothing."""
    if seen_before is None:
        return {}
    out: dict[str, float] = {}
    for key, day in changed:
        late = (seen_before - day_start(day + 1)) / timedelta(days=1)
        if late > 0:
            out[key] = max(out.get(key, 0.0), late)
    return out

"""Points stamped after the service's now: kept as the service gave them, never a cursor.

A logger whose clock goes wrong uploads points dated hours or decades ahead, and the service
serves them as it serves any other: as the stream's newest point by /sensor-data/latest, and
in every answer whose range holds them.  Were the stream's cursor to move to such a point,
the next sync would ask only after it, and every point the logger sends with a right clock
would be missed, at that sync and every later one.  So:

- a stream's cursor never passes what the service could have had when the window was
  committed: its now (its ``Date``, ``ApiClient.service_now``) plus
  ``service_profile.CLOCK_TOLERANCE`` (``cursor_limit``; ``ledger.record_window`` applies
  it); a cursor an older devmon moved past it is taken back to the newest point stored
  before it (``SyncEngine._ahead``), so a mirror stuck by one resumes;
- unless the service's clock is behind its own data: when most streams' newest points
  (by /latest) lie after it, the wrong clock is the service's, not the loggers', and their
  median stands for its now (``data_now``, ``reference_now``);
- the points later than that are stored as the service gave them and gathered per stream
  (``FutureSeen``); the run reports each stream once (``problem``), in ``sync_problems`` and
  its report, with the latest such time, the service's now and what to do;
- a stream whose newest point lies further ahead than a forecast reaches (``FORECAST_REACH``)
  is read up to that reach as usual, and its newest point on its own (one instant,
  ``far_window``): not the decades before it, month by month.

Pure: no HTTP, no SQL.
"""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass, field
from datetime import datetime, timedelta

import numpy as np

from devmon_sync import service_profile as assumed
from devmon_sync import timestamps
from devmon_sync.sync.plan import Window
from devmon_sync.sync.proof import arrays as arr

FORECAST_REACH = timedelta(days=16)
"""Points stamped up to this far ahead of the service's now (forecasts reach 10-16 days)
may be a forecast: read again at each sync up to the newest.  Further ahead is a wrong
clock: only the newest point is read (``far_window``)."""


def cursor_limit(now: datetime) -> datetime:
    """The latest time a stream's cursor may take: the service's now (``reference_now``)
    and the tolerance."""
    return now + assumed.CLOCK_TOLERANCE


def data_now(newest: Iterable[datetime]) -> datetime | None:
    """The median of the streams' newest points (by /latest): where most of the service's
    data ends.  One logger with a wrong clock does not move it; a service whose own clock is
    behind all its data does (None: no stream has a point)."""
    times = sorted(newest)
    return times[(len(times) - 1) // 2] if times else None


def reference_now(service_now: datetime, data_end: datetime | None) -> datetime:
    """What a point may not be stamped after: the service's now, or where most of its data
    ends when that is later (its clock is behind its data: ``data_now``)."""
    return service_now if data_end is None else max(service_now, data_end)


def far_window(kind: str, key: str, newest: datetime) -> Window:
    """One instant, the stream's newest point, when it lies beyond ``FORECAST_REACH``."""
    return Window(kind, [key], newest, newest, {key: newest}, 1.0)


@dataclass
class FutureSeen:
    """Per stream of one run, the points committed after the cursor limit (ms since 1970),
    and the service's now when the first of them came."""

    points_ms: dict[tuple[str, str], set[int]] = field(default_factory=dict)
    service_now: dict[tuple[str, str], datetime] = field(default_factory=dict)

    def add(self, kind: str, keys: list[str], key_codes: np.ndarray, ts_ms: np.ndarray,
            limit: datetime, service_now: datetime) -> None:
        """Gather the points of one committed answer (``key_codes``: each point's index in
        ``keys``) stamped after ``limit``."""
        late = (ts_ms > arr.ms(limit)) & (key_codes >= 0)
        for code, t in zip(key_codes[late].tolist(), ts_ms[late].tolist()):
            stream = (kind, keys[code])
            self.points_ms.setdefault(stream, set()).add(int(t))
            self.service_now.setdefault(stream, service_now)


def on_time_last(streams: int, key_codes: np.ndarray, ts_ms: np.ndarray,
                 limit: datetime) -> np.ndarray:
    """Per stream (``key_codes``: each point's index), its newest point at or before
    ``limit`` (float ms, NaN: none): where its cursor goes."""
    out = np.full(streams, -np.inf)
    keep = (ts_ms <= arr.ms(limit)) & (key_codes >= 0)
    np.maximum.at(out, key_codes[keep], ts_ms[keep].astype(np.float64))
    return np.where(np.isfinite(out), out, np.nan)


def problem(kind: str, key: str, serial: str | None, points_ms: set[int],
            service_now: datetime) -> str:
    """What the run says of one stream with points after the service's now: which stream,
    how many points, the latest one, and what to do."""
    latest = timestamps.format_timestamp(arr.dt(max(points_ms)))
    now = timestamps.format_timestamp(service_now)
    what = "readings of parameter" if kind == "readings" else "GNSS epochs of sensor"
    device = f" (device {serial})" if serial else ""
    n = len(points_ms)
    beyond = arr.dt(max(points_ms)) - service_now > FORECAST_REACH
    unsearched = (f" Of a stream dated that far ahead devmon reads only the newest point "
                  f"(and up to {FORECAST_REACH.days} days ahead), not the time between."
                  if beyond else "")
    them = "it" if n == 1 else "them"
    return (f"{n} {'point' if n == 1 else 'points'} of the {what} {key}{device} "
            f"{'is' if n == 1 else 'are'} stamped after the service's now ({now}), the "
            f"latest at {latest}: the logger's clock is wrong, unless the parameter holds "
            f"forecasts. devmon keeps {them} as the service gave {them} and syncs the stream "
            f"on from its newest point before that now, so later points still arrive."
            f"{unsearched} Set the logger's clock right and have the service correct or "
            f"delete {them} (each `devmon sync` reads {them} again).")


def note(streams: int, latest_ms: int) -> str:
    """The run's one line on all such streams (each is a problem of its own)."""
    latest = timestamps.format_timestamp(arr.dt(latest_ms))
    return (f"{streams} {'stream has' if streams == 1 else 'streams have'} points stamped "
            f"after the service's now (the latest at {latest}): kept as the service gave "
            f"them, listed as problems (`devmon status`); newer points still arrive.")

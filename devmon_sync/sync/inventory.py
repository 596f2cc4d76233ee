"""Which streams the service holds and where each ends: every source, /latest one hint.

A stream is one parameter's readings or one GNSS sensor's epochs; the device list says which
exist.  Where each ends comes from, in order:

- POST /sensor-data/latest: the newest point of each parameter it names.  A parameter it
  names with no point has no data; one it leaves out, it says nothing of (the spec does not
  say what an empty body returns, nor that the answer is whole: services answer ``{}`` with
  nothing, or cap the answer);
- the device's ``health.sensors.lastDataTimestamp``: the newest point of any of its sensors,
  so a stream /latest left out is fetched up to it;
- the service's clock: once /latest is shown incomplete (it left out a stream whose device
  reports data, or named none at all), a stream with no other hint is asked up to the
  service's now.

Pure: the engine gathers the hints and plans windows with the ends.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from datetime import datetime


@dataclass(frozen=True)
class StreamHint:
    """What the listings say of one stream."""

    kind: str  # readings | gnss
    key: str  # parameter UUID, or GNSS sensor UUID (canonical)
    serial: str  # its device's
    device_last_data: datetime | None


@dataclass
class Inventory:
    """Where each stream ends, and what /latest left out."""

    ends: dict[tuple[str, str], datetime] = field(default_factory=dict)
    latest_left_out: int = 0
    """Streams /latest did not name although their device reports data."""
    asked_to_now: int = 0
    """Streams with no hint at all, asked up to the service's now (/latest being shown
    incomplete)."""

    def notes(self) -> list[str]:
        """What the user should know of the service's /latest, in the run's notes."""
        if not self.latest_left_out:
            return [f"POST /sensor-data/latest named no stream: devmon asked all "
                    f"{self.asked_to_now} up to the service's now."] if self.asked_to_now else []
        more = (f"; {self.asked_to_now} more with no hint of their last data were asked up "
                f"to the service's now") if self.asked_to_now else ""
        return [f"POST /sensor-data/latest left out {self.latest_left_out} streams whose "
                f"devices report data (lastDataTimestamp): devmon fetched them anyway, up to "
                f"their device's last data{more}."]


def stream_ends(hints: list[StreamHint], newest: dict[tuple[str, str], datetime],
                named: set[tuple[str, str]], now: datetime) -> Inventory:
    """Each stream's end by the rules of the module docstring.  ``newest`` and ``named``:
    what /latest said, by (kind, key)."""
    out = Inventory()
    unhinted = []
    for h in hints:
        k = (h.kind, h.key)
        if k in newest:
            out.ends[k] = newest[k]
        elif k in named:
            continue  # named with no point: the service says it has no data
        elif h.device_last_data is not None:
            out.ends[k] = h.device_last_data
            out.latest_left_out += 1
        else:
            unhinted.append(k)
    if out.latest_left_out or not named:
        out.ends.update((k, now) for k in unhinted)
        out.asked_to_now = len(unhinted)
    return out

"""POST /sensor-data/latest answers: each parameter's newest point, read leniently.

One unreadable point (a bare NaN, a timestamp without timezone) must not stop the sync from
learning what every other parameter holds: the client reads bare NaN (``client._parse``), and
each timestamp is read here on its own.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from datetime import datetime

from devmon_sync.identifiers import canonical_uuid
from devmon_sync.timestamps import parse_timestamp


@dataclass
class LatestAnswer:
    """What one /latest answer said, by canonical parameter UUID."""

    newest: dict[str, datetime] = field(default_factory=dict)
    """Each parameter's newest point."""
    named: set[str] = field(default_factory=set)
    """Every parameter the answer has an item for (with or without a point): a parameter
    named with no point is one the service says has no data; one not named, the answer says
    nothing of."""
    unreadable: list[tuple[str, str]] = field(default_factory=list)
    """(UUID, timestamp text) of points whose time could not be read."""


def newest_from_latest(items: list) -> LatestAnswer:
    """Read a /latest answer's items (anything that is not an item is skipped)."""
    out = LatestAnswer()
    for item in items if isinstance(items, list) else ():
        if not isinstance(item, dict) or not isinstance(item.get("parameterUuid"), str):
            continue
        uuid = canonical_uuid(item["parameterUuid"])
        out.named.add(uuid)
        data = item.get("data") or ()
        times = []
        for text in (p.get("timestamp") for p in data if isinstance(p, dict)):
            try:
                times.append(parse_timestamp(text))
            except ValueError:
                out.unreadable.append((uuid, str(text)))
        if times:
            out.newest[uuid] = max(times + ([out.newest[uuid]] if uuid in out.newest else []))
    return out

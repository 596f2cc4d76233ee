"""POST /sensor-data/latest answers: each parameter's newest point, read leniently.

One unreadable point (a bare NaN, a timestamp without timezone) must not stop the sync from
learning what every other parameter holds: the client reads bare NaN (``client._parse``), and
each timestamp is read here on its own.
"""

from __future__ import annotations

from datetime import datetime

from devmon_sync.timestamps import parse_timestamp


def newest_from_latest(items: list) -> tuple[dict[str, datetime], list[tuple[str, str]]]:
    """(parameter UUID -> newest point's time, [(UUID, timestamp text) that could not be
    read])."""
    newest: dict[str, datetime] = {}
    unreadable: list[tuple[str, str]] = []
    for item in items if isinstance(items, list) else ():
        if not isinstance(item, dict) or not isinstance(item.get("parameterUuid"), str):
            continue
        data = item.get("data") or ()
        stamps = [p.get("timestamp") for p in data if isinstance(p, dict)]
        times = []
        for text in stamps:
            try:
                times.append(parse_timestamp(text))
            except ValueError:
                unreadable.append((item["parameterUuid"], str(text)))
        if times:
            newest[item["parameterUuid"]] = max(times)
    return newest, unreadable

"""Times as the user reads them: in the site's timezone where it has one, else UTC, and
always labelled with the zone."""

from __future__ import annotations

from datetime import datetime, timezone
from zoneinfo import ZoneInfo, ZoneInfoNotFoundError


def zone(name: str | None):
    """The site's zone, or UTC when it has none or an unknown one."""
    if not name:
        return timezone.utc
    try:
        return ZoneInfo(name)
    except (ZoneInfoNotFoundError, ValueError):
        return timezone.utc


def zone_label(name: str | None) -> str:
    return "UTC" if zone(name) is timezone.utc else str(name)


def local_text(t: datetime | None, tz_name: str | None = None, seconds: bool = False) -> str:
    """``2026-01-05 14:00 Europe/Zurich`` (or ``… UTC``); ``-`` for no time."""
    if t is None:
        return "-"
    if t.tzinfo is None:
        t = t.replace(tzinfo=timezone.utc)
    fmt = "%Y-%m-%d %H:%M:%S" if seconds else "%Y-%m-%d %H:%M"
    return f"{t.astimezone(zone(tz_name)).strftime(fmt)} {zone_label(tz_name)}"

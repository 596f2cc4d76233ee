"""Timestamps as the spec writes them: ISO 8601 with an offset, UTC with ``Z`` in requests.

A spec fact, not a choice, so both the reference server and the client read it here.
"""

from __future__ import annotations

from datetime import datetime, timezone


def format_timestamp(dt: datetime) -> str:
    """ISO 8601 UTC with milliseconds and ``Z``, the form every response uses."""
    dt = dt.astimezone(timezone.utc)
    return dt.strftime("%Y-%m-%dT%H:%M:%S.") + f"{dt.microsecond // 1000:03d}Z"


def parse_timestamp(text: str) -> datetime:
    """Parse an ISO 8601 timestamp that names its offset (``Z`` or ``+hh:mm``) to UTC.

    Raises ValueError for text that is not such a timestamp: a timestamp without an offset is
    ambiguous and refused rather than guessed.
    """
    if not isinstance(text, str) or "T" not in text:
        raise ValueError(f"not an ISO 8601 date-time: {text!r}")
    dt = datetime.fromisoformat(text.replace("z", "Z").replace("Z", "+00:00"))
    if dt.tzinfo is None:
        raise ValueError(f"date-time without a timezone: {text!r} (add Z for UTC)")
    try:
        return dt.astimezone(timezone.utc)
    except OverflowError:  # 0001-01-01T00:00+01:00 has no UTC equivalent
        raise ValueError(f"date-time out of range: {text!r}") from None

"""Time on the server: integer Unix seconds inside, the API's timestamp text outside."""

from __future__ import annotations

from datetime import UTC, datetime
from email.utils import formatdate

import numpy as np

from devmon_sync.api_contract import format_timestamp

HOUR_S = 3600
DAY_S = 86400


def iso(ts: int | None) -> str | None:
    """The API's timestamp text of Unix seconds (None stays None)."""
    return None if ts is None else format_timestamp(datetime.fromtimestamp(ts, tz=UTC))


def iso_array(t: np.ndarray) -> list[str]:
    """``iso`` for many timestamps (int64 seconds) at once."""
    text = np.datetime_as_string(t.astype("datetime64[s]").astype("datetime64[ms]"), unit="ms")
    return [s + "Z" for s in text.tolist()]


def http_date(ts: float) -> str:
    """The HTTP-date (RFC 9110, IMF-fixdate) of Unix seconds: a ``Date`` or ``Retry-After``
    header's text."""
    return formatdate(ts, usegmt=True)

"""POST /sensor-data/latest answers: each parameter's newest point, read leniently.

One unreadable point (a bare NaN, a timestamp without timezone) must not stop the sync from
learning what every other parameter holds, so the body is parsed leniently (as data answers
are, ``answers.lenient_loads``) when the strict parser refuses it, and each timestamp is read
on its own.
"""

from __future__ import annotations

from datetime import datetime
from typing import Any

import orjson

from devmon_sync.api_contract import parse_timestamp
from devmon_sync.store import answers


def lenient_json(body: bytes) -> Any:
    """The JSON of ``body``; bare NaN/Infinity tokens are accepted.  Raises ValueError for a
    body that is not JSON at all (the client treats it as a damaged answer)."""
    try:
        return orjson.loads(body)
    except orjson.JSONDecodeError:
        return answers.lenient_loads(body)


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

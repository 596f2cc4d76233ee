"""Validation of what clients send: query strings and JSON bodies.

Every refusal is an ``ApiError`` with a message that names the offending input and says what
would be accepted, as the spec's ``{message}`` error bodies.
"""

from __future__ import annotations

import re
from dataclasses import dataclass

from devmon_sync.api_contract import QUERY_FALSE, QUERY_TRUE, parse_timestamp

UUID4_RE = re.compile(r"^[0-9a-f]{8}-[0-9a-f]{4}-4[0-9a-f]{3}-[89ab][0-9a-f]{3}-[0-9a-f]{12}$",
                      re.IGNORECASE)
MAX_SAFE_INT = 9007199254740991


@dataclass
class ApiError(Exception):
    status: int
    message: str
    retry_after_s: int | None = None


def bad_request(message: str) -> ApiError:
    return ApiError(400, message)


class Query:
    """Query parameters of one GET request; unknown names are refused, not ignored."""

    def __init__(self, params: dict[str, list[str]], allowed: set[str], max_items: int,
                 ignored: set[str] = frozenset(), read_as_false: set[str] = frozenset()):
        """``ignored``: names accepted and never read (a contract that pages otherwise);
        ``read_as_false``: flags accepted and read as false whatever they say (a contract
        that ignores an option without a word)."""
        unknown = sorted(set(params) - allowed - ignored)
        if unknown:
            known = ", ".join(sorted(allowed)) or "none"
            raise bad_request(f"Unknown query parameter {unknown[0]!r}; accepted: {known}.")
        self.params = params
        self.max_items = max_items
        self.read_as_false = read_as_false

    def flag(self, name: str) -> bool:
        values = self.params.get(name)
        if not values or name in self.read_as_false:
            return False
        if len(values) > 1 or values[0] not in (QUERY_TRUE, QUERY_FALSE):
            raise bad_request(f"Query parameter {name!r} must be 'true' or 'false', "
                              f"not {','.join(values)!r}.")
        return values[0] == QUERY_TRUE

    def strings(self, name: str) -> list[str] | None:
        """An array parameter: repeated keys, or one comma-separated value."""
        values = self.params.get(name)
        if values is None:
            return None
        items = [v for raw in values for v in raw.split(",") if v != ""]
        if not items:
            raise bad_request(f"Query parameter {name!r} is empty; give at least one value.")
        if len(items) > self.max_items:
            raise bad_request(f"Query parameter {name!r} has {len(items)} values; "
                              f"the limit is {self.max_items}.")
        return items

    def uuids(self, name: str) -> list[str] | None:
        """UUIDs, lower-cased: the world's UUIDs are, and UUIDs compare without case."""
        items = self.strings(name)
        return None if items is None else [check_uuid(u, f"query parameter {name!r}")
                                           for u in items]

    def one(self, name: str) -> str | None:
        values = self.params.get(name)
        if values is None:
            return None
        if len(values) != 1 or values[0] == "":
            raise bad_request(f"Query parameter {name!r} takes exactly one value.")
        return values[0]

    def integer(self, name: str, default: int, lo: int, hi: int) -> int:
        text = self.one(name)
        if text is None:
            return default
        if not re.fullmatch(r"\d+", text) or not lo <= int(text) <= hi:
            raise bad_request(f"Query parameter {name!r} must be an integer from {lo} to {hi}, "
                              f"not {text!r}.")
        return int(text)


def check_uuid(value: object, where: str) -> str:
    if not isinstance(value, str) or not UUID4_RE.match(value):
        raise bad_request(f"{where[0].upper()}{where[1:]} must be a version-4 UUID, "
                          f"not {value!r}.")
    return value.lower()


class Body:
    """A JSON request body: an object whose fields are all known and well typed."""

    def __init__(self, body: object, allowed: set[str], max_items: int, endpoint: str):
        if body is None:
            body = {}
        if not isinstance(body, dict):
            raise bad_request(f"The body of {endpoint} must be a JSON object.")
        unknown = sorted(set(body) - allowed)
        if unknown:
            raise bad_request(f"Unknown field {unknown[0]!r} in the body of {endpoint}; "
                              f"accepted: {', '.join(sorted(allowed))}.")
        self.body = body
        self.max_items = max_items

    def array(self, name: str, kind: str) -> list | None:
        value = self.body.get(name)
        if value is None:
            return None
        if not isinstance(value, list):
            raise bad_request(f"Field {name!r} must be an array.")
        if len(value) > self.max_items:
            raise bad_request(f"Field {name!r} has {len(value)} items; the limit is "
                              f"{self.max_items}: split the request.")
        return [self._item(name, kind, v) for v in value]

    def _item(self, name: str, kind: str, v: object):
        if kind == "uuid":
            return check_uuid(v, f"each item of {name!r}")
        if kind == "string":
            if not isinstance(v, str) or not v:
                raise bad_request(f"Each item of {name!r} must be a non-empty string.")
            return v
        if kind == "int":
            if isinstance(v, bool) or not isinstance(v, int) or abs(v) > MAX_SAFE_INT:
                raise bad_request(f"Each item of {name!r} must be an integer within "
                                  f"±{MAX_SAFE_INT}.")
            return v
        if kind == "path":
            keys = ("deviceSerialNumber", "sensorName", "parameterName")
            if not isinstance(v, dict) or set(v) != set(keys) or \
                    not all(isinstance(v[k], str) for k in keys):
                raise bad_request(f"Each item of {name!r} must be an object with exactly the "
                                  f"string fields {', '.join(keys)}.")
            return (v["deviceSerialNumber"], v["sensorName"], v["parameterName"])
        raise AssertionError(kind)

    def boolean(self, name: str) -> bool:
        value = self.body.get(name, False)
        if not isinstance(value, bool):
            raise bad_request(f"Field {name!r} must be true or false.")
        return value

    def order(self) -> str:
        value = self.body.get("orderBy", "asc")
        if value not in ("asc", "desc"):
            raise bad_request(f"Field 'orderBy' must be 'asc' or 'desc', not {value!r}.")
        return value

    def timestamp(self, name: str, require_z: bool) -> float | None:
        value = self.body.get(name)
        if value is None:
            return None
        if not isinstance(value, str):
            raise bad_request(f"Field {name!r} must be an ISO 8601 date-time string.")
        if require_z and not value.endswith("Z"):
            raise bad_request(f"Field {name!r} must be UTC with a Z suffix, "
                              f"e.g. 2026-01-01T00:00:00Z; got {value!r}.")
        try:
            dt = parse_timestamp(value)
        except ValueError:
            raise bad_request(f"Field {name!r} is not an ISO 8601 date-time: {value!r}; "
                              f"write e.g. 2026-01-01T00:00:00Z.") from None
        if not 1970 <= dt.year <= 9999:
            raise bad_request(f"Field {name!r} is out of range: {value!r}.")
        return dt.timestamp()

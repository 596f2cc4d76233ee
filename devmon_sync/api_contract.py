"""Every choice the API specification leaves open, decided once.

The Device Monitoring API specification (``shared/spec/device-monitoring-api.md``) does not show
paging parameters, filter names, response limits, the rate-limit status or the aggregation shape.
Both sides of devmon read this module: the reference server enforces these values and the sync
client relies on them, so a guess is never made twice or in two different ways.  The README's
"Assumptions where the spec is silent" table lists the same decisions for users.

Nothing here is mutable state: constants, frozen dataclasses and pure functions only.
"""

from __future__ import annotations

from dataclasses import dataclass

from devmon_sync.timestamps import format_timestamp, parse_timestamp  # noqa: F401

API_PREFIX = "/v1"
API_KEY_HEADER = "x-api-key"
OPENAPI_PATH = "/v1/openapi.json"

# --- GET /devices: filter and paging parameter names (spec 4.2 shows only includeSensors) ---
DEVICES_QUERY = {
    "device_kind": "deviceKind",  # only allowed value: physical
    "group_uuid": "groupUuid",
    "site_uuid": "siteUuid",
    "serial_numbers": "serialNumbers",
    "include_sensors": "includeSensors",
    "include_inactive_sensors": "includeInactiveSensors",
    "include_formulas": "includeFormulas",
    "include_internal": "includeInternal",
    "limit": "limit",
    "offset": "offset",
}
# --- GET /device-groups option names (spec 4.4 shows none) ---
DEVICE_GROUPS_QUERY = {
    "uuids": "uuids",
    "include_sensors": "includeSensors",
    "include_devices": "includeDevices",
    "include_ungrouped": "includeUngrouped",
}
# Name of the derived-parameter formula field when formulas are asked for (spec 2.4: not shown).
FORMULA_FIELD = "formula"

# Array query parameters are sent as repeated keys (?uuids=a&uuids=b); a comma-separated
# single value is accepted too.  Boolean query parameters are the strings "true"/"false".
QUERY_TRUE = "true"
QUERY_FALSE = "false"

# --- Paging of GET /devices ---
# Offset paging: ``limit`` (page size) and ``offset`` (items to skip).  The response stays
# ``{items: [...]}``: a page shorter than ``limit`` is the last page.
PAGE_SIZE_DEFAULT = 100
PAGE_SIZE_MAX = 500

# --- Aggregation object of POST /sensor-data (spec 4.7: shape not shown) ---
# {"interval": one of AGGREGATION_INTERVALS_S, "function": one of AGGREGATION_FUNCTIONS}
# Buckets are aligned to the Unix epoch in UTC; each point is stamped with its bucket's start.
AGGREGATION_INTERVALS_S = {"15m": 900, "1h": 3600, "6h": 21600, "1d": 86400, "7d": 604800}
AGGREGATION_FUNCTIONS = ("avg", "min", "max", "sum", "count", "first", "last")

# --- Rate limit (spec 7 and 8) ---
RATE_LIMIT_PER_MINUTE = 200
RATE_LIMIT_WINDOW_S = 60.0
RATE_LIMIT_STATUS = 429
RATE_LIMIT_MESSAGE = (
    "Rate limit exceeded: the limit is {limit} requests per minute. "
    "Retry after {seconds} seconds."
)


def rate_limit_message(limit: int, seconds: int) -> str:
    """The rate-limit error message: states the limit, then the seconds to wait (spec 7)."""
    return RATE_LIMIT_MESSAGE.format(limit=limit, seconds=seconds)


@dataclass(frozen=True)
class ResponseLimits:
    """Largest answers the service gives; asking for more is a 400 naming the limit.

    A sync client sizes its requests by these, and halves a window when told it is too large.
    """

    max_range_days: float = 31.0
    """Longest startDate..endDate span of one POST /sensor-data or /sensor-data/gnss."""
    max_points: int = 100_000
    """Most reading points one POST /sensor-data may return (all series together)."""
    max_epochs: int = 10_000
    """Most GNSS epochs one POST /sensor-data/gnss may return (all devices together).

    About 6.5 MB of JSON; the reference server builds it in about one rate-limit slot (0.3 s).
    """
    max_selector_items: int = 200
    """Longest array accepted in any selector or filter."""
    default_range_days: float = 1.0
    """Span used when startDate is omitted: the day before endDate."""


DEFAULT_LIMITS = ResponseLimits()

# Messages of the 400 answers a client may adapt to (matched by their fixed opening words).
TOO_MANY_POINTS_PREFIX = "Too many points"
RANGE_TOO_LONG_PREFIX = "Date range too long"

# --- Timestamps ---
# Responses write UTC with millisecond precision and a Z suffix: 2026-01-01T00:00:00.000Z.
# startDate and endDate are both inclusive.  The reading of timestamps is the spec's (ISO 8601
# with an offset), not a choice, so it lives in ``devmon_sync.timestamps`` for both sides
# (imported above, so ``api_contract.parse_timestamp`` keeps working).

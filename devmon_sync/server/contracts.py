"""Contract profiles: other realisations of what the spec leaves unshown.

The spec does not show how GET /devices pages its answer, how a too-large request or a rate
limit is worded and carried, which optional query parameters a service honours, whether it
caps answers without saying so, nor whether its paths begin with ``/v1``.  devmon's own
choices (``api_contract``) are one realisation; a real service may page by page number with a
total or by a cursor, refuse with 422 in other words, ask for a wait by 403, refuse or ignore
an option, truncate silently, or serve at the root.  A client that only works against
devmon's choices is a toy, so the reference server can answer as any of these (``devmon serve
--contract NAME``) and tests prove the client copes.

``default`` keeps the server's answers byte-identical to those before contract profiles.
"""

from __future__ import annotations

import base64
import re
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from urllib.parse import urlencode

from devmon_sync import api_contract as contract
from devmon_sync.api_contract import DEVICES_QUERY as DQ
from devmon_sync.server.clock import iso
from devmon_sync.server.requests_in import ApiError, bad_request

PAGING = ("offset", "page", "cursor", "none", "link", "meta", "token")
TOO_LARGE_WORDING = ("default", "plain")
RATE_LIMIT_WORDING = ("default", "wait")
UUID_CASES = ("lower", "upper")
AGGREGATIONS = ("daily", "refused", "ignored")
LATEST_UNFILTERED = ("all", "none")
_UUID = re.compile(rb"[0-9a-fA-F]{8}-[0-9a-fA-F]{4}-[0-9a-fA-F]{4}-[0-9a-fA-F]{4}-"
                   rb"[0-9a-fA-F]{12}")
OPTIONS = frozenset({DQ["include_inactive_sensors"], DQ["include_formulas"],
                     DQ["include_internal"], "includeDevices", "includeUngrouped"})
"""The optional GET parameters a contract may refuse or ignore (GET /devices, /device-groups)."""


@dataclass(frozen=True)
class Contract:
    """How the server realises the unshown parts of the API."""

    name: str = "default"
    paging: str = "offset"
    """offset: ``limit``/``offset``; page: ``page``/``pageSize`` answered with ``page``,
    ``pageSize`` and ``total``; cursor: ``cursor`` answered with ``nextCursor`` (null on the
    last page); none: every item in one answer, paging parameters ignored; link: ``page``/
    ``per_page``, the next page named only in an RFC 8288 ``Link: <URL>; rel="next"`` header
    (an absolute URL on the same host), no paging keys in the body; meta: ``page`` answered
    with ``{items, meta: {total, hasMore, nextPage}}``; token: ``pageToken``/``pageSize``
    answered with ``nextPageToken`` ("" on the last page, Google AIP-158)."""
    page_cap: int = 0
    """The most items a page holds whatever was asked (0: as asked, up to the usual maximum)."""
    order_shift: int = 0
    """Each GET /devices answer lists the devices rotated by this many places more than the
    answer before it (a service sorting by lastSeen, whose devices report between two
    requests): a walk by offset or page number misses some and repeats others (0: a steady
    order)."""
    prefix: str = contract.API_PREFIX
    """What every path begins with ("" : the API answers at the root)."""
    too_large_status: int = 400
    too_large_wording: str = "default"
    """default: api_contract's "Too many points: ..." / "Date range too long: ..."; plain:
    "Requested data exceeds the maximum of N data points per request", "The time range may
    not exceed D days"."""
    rate_limit_status: int = contract.RATE_LIMIT_STATUS
    rate_limit_wording: str = "default"
    """default: api_contract's message; wait: "Please wait N seconds." and nothing more."""
    retry_after_header: bool = True
    retry_after_date: bool = False
    """Retry-After as the HTTP date the wait ends, by the service's own clock (RFC 9110
    allows a date), instead of seconds."""
    clock_offset_s: int = 0
    """Seconds the service's own clock is off the world's (negative: behind): its ``Date``
    headers, Retry-After dates and what it calls now say so; the data keep the world's."""
    refuse_future_start: bool = False
    """POST /sensor-data and /sensor-data/gnss refuse (400) a startDate later than the
    service's now."""
    refused_options: frozenset[str] = field(default_factory=frozenset)
    """Options of ``OPTIONS`` answered with 400 "Unknown query parameter ..."."""
    ignored_options: frozenset[str] = field(default_factory=frozenset)
    """Options of ``OPTIONS`` accepted and read as false, without a word."""
    silent_cap_points: int = 0
    """POST /sensor-data answers hold at most this many points, oldest kept, unsaid (0: off)."""
    silent_cap_epochs: int = 0
    """POST /sensor-data/gnss answers hold at most this many epochs, oldest kept (0: off)."""
    uuid_case: str = "lower"
    """lower: UUIDs as the spec's examples write them; upper: every UUID of every answer in
    upper case (as SQL Server renders GUIDs; RFC 9562 reads hex digits case-insensitively),
    and UUIDs in requests read in either case."""
    latest_unfiltered: str = "all"
    """What POST /sensor-data/latest answers to a body with no selector: all (every parameter
    the key sees) or none (``{items: []}``: the spec says the body "may be" empty, not what
    such a body returns)."""
    latest_cap: int = 0
    """POST /sensor-data/latest answers hold at most this many items, unsaid (0: off)."""
    migrated_days_ago: float = 0
    """Every record's createdAt is at least this many days before the clock's day (a platform
    migration re-created the records) while the data keep their older history (0: off)."""
    aggregation: str = "daily"
    """daily: POST /sensor-data aggregates as api_contract says (the spec does not show its
    shape); refused: a body with ``aggregation`` is a 400 naming the field; ignored: it is
    read as absent, raw points come back, unsaid."""
    past_changes_h: float = 0
    """Hours after the clock's day start (a UTC midnight) at which the world changes its
    past as a real service does between two syncs: a late upload, a correction, re-solved
    GNSS epochs, a group move, a deleted sensor (``past.py`` says which and where; 0: off)."""

    def __post_init__(self) -> None:
        for name, value, choices in (("paging", self.paging, PAGING),
                                     ("too_large_wording", self.too_large_wording,
                                      TOO_LARGE_WORDING),
                                     ("rate_limit_wording", self.rate_limit_wording,
                                      RATE_LIMIT_WORDING),
                                     ("uuid_case", self.uuid_case, UUID_CASES),
                                     ("aggregation", self.aggregation, AGGREGATIONS),
                                     ("latest_unfiltered", self.latest_unfiltered,
                                      LATEST_UNFILTERED)):
            if value not in choices:
                raise ValueError(f"{name} must be one of {', '.join(choices)}, not {value!r}")
        for name in ("page_cap", "order_shift", "silent_cap_points", "silent_cap_epochs",
                     "latest_cap", "migrated_days_ago", "past_changes_h"):
            if getattr(self, name) < 0:
                raise ValueError(f"{name} must be 0 (off) or positive, not "
                                 f"{getattr(self, name)}")
        unknown = (self.refused_options | self.ignored_options) - OPTIONS
        if unknown:
            raise ValueError(f"only these options can be refused or ignored: "
                             f"{', '.join(sorted(OPTIONS))}; not {', '.join(sorted(unknown))}")
        if self.prefix and not self.prefix.startswith("/") or self.prefix.endswith("/"):
            raise ValueError(f"prefix must be empty or like /v1, not {self.prefix!r}")

    @property
    def query_names(self) -> set[str]:
        """The paging parameters this contract reads (others are ignored, not refused)."""
        return {"offset": {DQ["limit"], DQ["offset"]}, "page": {"page", "pageSize"},
                "cursor": {"cursor", DQ["limit"]}, "none": set(),
                "link": {"page", "per_page"}, "meta": {"page"},
                "token": {"pageToken", "pageSize"}}[self.paging]


    def too_many_points(self, asked: int, limit: int) -> ApiError:
        """The refusal of a POST /sensor-data that would return ``asked`` points."""
        return self._too_many(asked, limit, "points", "data points", "parameters")

    def too_many_epochs(self, asked: int, limit: int) -> ApiError:
        """The refusal of a POST /sensor-data/gnss that would return ``asked`` epochs."""
        return self._too_many(asked, limit, "epochs", "epochs", "devices")

    def _too_many(self, asked: int, limit: int, unit: str, plain_unit: str,
                  fewer: str) -> ApiError:
        if self.too_large_wording == "plain":
            return ApiError(self.too_large_status, f"Requested data exceeds the maximum of "
                                                   f"{limit} {plain_unit} per request")
        return ApiError(self.too_large_status,
                        f"{contract.TOO_MANY_POINTS_PREFIX}: the request would return up to "
                        f"{asked} {unit}, the limit is {limit} per request. "
                        f"Ask for a shorter date range or fewer {fewer}.")

    def range_too_long(self, asked_days: float, limit_days: float) -> ApiError:
        """The refusal of a startDate..endDate span longer than ``limit_days``."""
        if self.too_large_wording == "plain":
            return ApiError(self.too_large_status,
                            f"The time range may not exceed {limit_days:g} days")
        return ApiError(self.too_large_status,
                        f"{contract.RANGE_TOO_LONG_PREFIX}: {asked_days:.2f} days asked, "
                        f"the limit is {limit_days:g} days per request. "
                        f"Split the range into shorter windows.")

    def rate_limited(self, per_minute: int, wait_s: int) -> ApiError:
        """The answer to a request over the rate limit (``wait_s``: whole seconds to wait)."""
        message = f"Please wait {wait_s} seconds." if self.rate_limit_wording == "wait" \
            else contract.rate_limit_message(per_minute, wait_s)
        return ApiError(self.rate_limit_status, message,
                        wait_s if self.retry_after_header else None)

    def start_in_future(self, now_s: int) -> ApiError:
        """The refusal of a startDate later than the service's now (``now_s``)."""
        return bad_request(f"startDate is in the future: this service's time is "
                           f"{iso(now_s)}. Ask for data up to now.")

    def option_names(self, names: set[str]) -> tuple[set[str], set[str]]:
        """``names`` an endpoint reads, as (accepted, read-as-false) under this contract."""
        return names - self.refused_options, names & self.ignored_options


CONTRACTS: dict[str, Contract] = {
    "default": Contract(),
    "page-total": Contract("page-total", paging="page", page_cap=25),
    "cursor": Contract("cursor", paging="cursor", page_cap=25),
    "unpaged": Contract("unpaged", paging="none"),
    "capped-pages": Contract("capped-pages", paging="offset", page_cap=25),
    "link-header": Contract("link-header", paging="link", page_cap=25),
    "meta-envelope": Contract("meta-envelope", paging="meta", page_cap=25),
    "page-token": Contract("page-token", paging="token", page_cap=25),
    "shuffled": Contract("shuffled", paging="offset", page_cap=25, order_shift=7),
    "plain-refusals": Contract("plain-refusals", too_large_status=422,
                               too_large_wording="plain"),
    "wait-403": Contract("wait-403", rate_limit_status=403, rate_limit_wording="wait",
                         retry_after_header=False),
    "no-v1": Contract("no-v1", prefix=""),
    "strict-options": Contract("strict-options", refused_options=OPTIONS),
    "ignored-options": Contract("ignored-options", ignored_options=OPTIONS),
    "silent-truncation": Contract("silent-truncation", silent_cap_points=20_000,
                                  silent_cap_epochs=2_000),
    "upper-uuids": Contract("upper-uuids", uuid_case="upper"),
    "clock-behind": Contract("clock-behind", clock_offset_s=-600, retry_after_date=True,
                             refuse_future_start=True),
    "latest-empty": Contract("latest-empty", latest_unfiltered="none"),
    "latest-capped": Contract("latest-capped", latest_cap=100),
    "migrated": Contract("migrated", migrated_days_ago=5),
    "changing-past": Contract("changing-past", past_changes_h=6),
    "no-aggregation": Contract("no-aggregation", aggregation="refused"),
    "raw-aggregation": Contract("raw-aggregation", aggregation="ignored"),
}


SUMMARIES: dict[str, str] = {
    "default": "offset/limit, devmon's wording, 429 with Retry-After, paths under /v1",
    "page-total": "page/pageSize with a total, 25 a page",
    "cursor": "nextCursor, 25 a page",
    "unpaged": "all devices at once",
    "capped-pages": "offset/limit, 25 a page whatever is asked",
    "link-header": "page/per_page, the next page in an RFC 8288 Link header, 25 a page",
    "meta-envelope": "{items, meta: {total, hasMore, nextPage}} by page, 25 a page",
    "page-token": "pageToken in, nextPageToken out ('' at the end), 25 a page",
    "shuffled": "offset/limit, 25 a page, the order moves 7 places each request",
    "plain-refusals": "422 'Requested data exceeds the maximum of N ...'",
    "wait-403": "403 'Please wait N seconds.', no Retry-After",
    "no-v1": "paths at the root",
    "strict-options": "400 for includeInactiveSensors, includeFormulas, ...",
    "ignored-options": "the same options read as false, unsaid",
    "silent-truncation": "answers cut at 20,000 points / 2,000 epochs, unsaid",
    "upper-uuids": "every UUID in upper case (as SQL Server writes GUIDs)",
    "clock-behind": "clock 10 min behind: Date and Retry-After as dates by it, 400 for a "
                    "startDate after its now",
    "latest-empty": "POST /sensor-data/latest with an empty body answers {items: []}",
    "latest-capped": "POST /sensor-data/latest answers at most 100 items, unsaid",
    "migrated": "records re-created 5 days ago: createdAt after most of the data",
    "changing-past": "at 06:00 UTC the past changes: a late upload, a correction, re-solved "
                     "GNSS, a group move, a deleted sensor",
    "no-aggregation": "400 for a POST /sensor-data body with aggregation",
    "raw-aggregation": "aggregation read as absent: raw points back, unsaid",
}
"""One line per contract, for ``devmon serve --help``."""


def contract_named(name: str) -> Contract:
    """The contract ``devmon serve --contract NAME`` names; ValueError naming the choices."""
    try:
        return CONTRACTS[name]
    except KeyError:
        raise ValueError(f"unknown contract {name!r}; choose one of "
                         f"{', '.join(CONTRACTS)}") from None


def cursor_token(offset: int) -> str:
    """An opaque token for the page that starts at ``offset``."""
    return base64.urlsafe_b64encode(f"devices:{offset}".encode()).decode().rstrip("=")


def cursor_offset(token: str) -> int | None:
    """The offset a token stands for; None when it is not one of ours."""
    try:
        text = base64.urlsafe_b64decode(token + "=" * (-len(token) % 4)).decode()
    except (ValueError, UnicodeDecodeError):
        return None
    prefix, _, number = text.partition(":")
    return int(number) if prefix == "devices" and number.isdigit() else None


class LinkedPage(dict):
    """A page whose next page is named only in a Link header (``link_header``), never in
    its body: ``next_query`` is that page's query string ("" on the last page)."""

    def __init__(self, items: list, next_query: str):
        super().__init__(items=items)
        self.next_query = next_query


def link_header(answer: object, host: str | None, path: str) -> dict[str, str]:
    """The RFC 8288 header naming the next page of ``answer``: an absolute URL on the host
    the request was sent to (``path``: the request's path), or, with no Host header, a
    reference relative to the request.  Nothing for any other answer."""
    if not isinstance(answer, LinkedPage) or not answer.next_query:
        return {}
    where = f"http://{host}" if host else ""
    return {"Link": f'<{where}{path}?{answer.next_query}>; rel="next"'}


def paged(c: Contract, q, chosen: Sequence, render: Callable[[Sequence], list],
          turn: int = 0) -> dict:
    """The answer for one page of ``chosen`` as contract ``c`` pages it (``q``: the request's
    ``Query``; ``render``: the items of a page as JSON objects; ``turn``: how many list
    answers came before this one, which an order that moves moves with)."""
    chosen = _moved(chosen, turn * c.order_shift)
    cap = c.page_cap or contract.PAGE_SIZE_MAX
    if c.paging == "none":
        return {"items": render(chosen)}
    if c.paging in ("page", "meta", "link"):
        return _numbered_page(c, q, chosen, render, cap)
    if c.paging == "token":
        return _token_page(q, chosen, render, cap)
    limit = min(q.integer(DQ["limit"], min(contract.PAGE_SIZE_DEFAULT, cap), 1,
                          contract.PAGE_SIZE_MAX), cap)
    if c.paging == "cursor":
        token = q.one("cursor")
        offset = 0 if token is None else cursor_offset(token)
        if offset is None:
            raise bad_request(f"Query parameter 'cursor' is not a cursor this service gave: "
                              f"{token!r}.")
        end = offset + limit
        return {"items": render(chosen[offset:end]),
                "nextCursor": cursor_token(end) if end < len(chosen) else None}
    offset = q.integer(DQ["offset"], 0, 0, 10**9)
    return {"items": render(chosen[offset:offset + limit])}


def _numbered_page(c: Contract, q, chosen: Sequence, render: Callable[[Sequence], list],
                   cap: int) -> dict:
    """A page by number, told as page-total (echo and total), the meta envelope, or only a
    Link header does."""
    page = q.integer("page", 1, 1, 10**9)
    size_name = {"page": "pageSize", "link": "per_page"}.get(c.paging)
    size = min(q.integer(size_name, cap, 1, 10**4), cap) if size_name else cap
    end = page * size
    items = render(chosen[end - size:end])
    if c.paging == "page":
        return {"items": items, "page": page, "pageSize": size, "total": len(chosen)}
    more = end < len(chosen)
    if c.paging == "meta":
        return {"items": items, "meta": {"total": len(chosen), "hasMore": more,
                                         "nextPage": page + 1 if more else None}}
    return LinkedPage(items, _next_query(q, page + 1) if more else "")


def _next_query(q, page: int) -> str:
    """The query of page ``page``: the request's own, its page replaced (the offset paging
    names it ignored left out)."""
    dropped = {"page", DQ["limit"], DQ["offset"]}
    kept = [(k, v) for k, values in q.params.items() if k not in dropped for v in values]
    return urlencode([*kept, ("page", page)])


def _token_page(q, chosen: Sequence, render: Callable[[Sequence], list], cap: int) -> dict:
    token = q.one("pageToken")
    offset = 0 if token is None else cursor_offset(token)
    if offset is None:
        raise bad_request(f"Query parameter 'pageToken' is not a page token this service "
                          f"gave: {token!r}.")
    end = offset + min(q.integer("pageSize", cap, 1, 10**4), cap)
    return {"items": render(chosen[offset:end]),
            "nextPageToken": cursor_token(end) if end < len(chosen) else ""}


def _moved(chosen: Sequence, places: int) -> Sequence:
    """``chosen`` rotated left by ``places``: the order of a list that moves."""
    if not chosen or not places:
        return chosen
    k = places % len(chosen)
    return [*chosen[k:], *chosen[:k]]


def request_uuids(c: Contract, text: bytes) -> bytes:
    """A request's path, query or body with its UUIDs in the case the world keeps (lower):
    a service writing upper case reads either case."""
    if c.uuid_case == "lower":
        return text
    return _UUID.sub(lambda m: m.group(0).lower(), text)


def answer_uuids(c: Contract, payload: bytes) -> bytes:
    """An answer's bytes with every UUID written in the contract's case."""
    if c.uuid_case == "lower":
        return payload
    return _UUID.sub(lambda m: m.group(0).upper(), payload)


def with_migration(c: Contract, answer: object, anchor_s: int) -> object:
    """``answer`` as a migrated service tells it: every parameter's createdAt (and
    updatedAt) no earlier than the migration, whatever the data's history."""
    if not c.migrated_days_ago:
        return answer
    moved = iso(anchor_s - int(c.migrated_days_ago * 86400))

    def walk(node: object) -> None:
        if isinstance(node, list):
            for item in node:
                walk(item)
        elif isinstance(node, dict):
            if "parameterPath" in node and isinstance(node.get("createdAt"), str):
                for key in ("createdAt", "updatedAt"):
                    node[key] = max(node.get(key) or moved, moved)
            for value in node.values():
                walk(value)
    walk(answer)
    return answer


def latest_chosen(c: Contract, chosen: list, selected: bool) -> list:
    """What POST /sensor-data/latest answers of the parameters ``chosen`` (``selected``: the
    body named some): none for an empty body under ``latest_unfiltered="none"``; at most
    ``latest_cap`` items."""
    if not selected and c.latest_unfiltered == "none":
        return []
    return chosen[:c.latest_cap] if c.latest_cap else chosen

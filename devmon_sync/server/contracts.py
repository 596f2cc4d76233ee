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
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field

from devmon_sync import api_contract as contract
from devmon_sync.api_contract import DEVICES_QUERY as DQ
from devmon_sync.server.requests_in import ApiError, bad_request

PAGING = ("offset", "page", "cursor", "none")
TOO_LARGE_WORDING = ("default", "plain")
RATE_LIMIT_WORDING = ("default", "wait")
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
    last page); none: every item in one answer, paging parameters ignored."""
    page_cap: int = 0
    """The most items a page holds whatever was asked (0: as asked, up to the usual maximum)."""
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
    refused_options: frozenset[str] = field(default_factory=frozenset)
    """Options of ``OPTIONS`` answered with 400 "Unknown query parameter ..."."""
    ignored_options: frozenset[str] = field(default_factory=frozenset)
    """Options of ``OPTIONS`` accepted and read as false, without a word."""
    silent_cap_points: int = 0
    """POST /sensor-data answers hold at most this many points, oldest kept, unsaid (0: off)."""
    silent_cap_epochs: int = 0
    """POST /sensor-data/gnss answers hold at most this many epochs, oldest kept (0: off)."""

    def __post_init__(self) -> None:
        for name, value, choices in (("paging", self.paging, PAGING),
                                     ("too_large_wording", self.too_large_wording,
                                      TOO_LARGE_WORDING),
                                     ("rate_limit_wording", self.rate_limit_wording,
                                      RATE_LIMIT_WORDING)):
            if value not in choices:
                raise ValueError(f"{name} must be one of {', '.join(choices)}, not {value!r}")
        for name in ("page_cap", "silent_cap_points", "silent_cap_epochs"):
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
                "cursor": {"cursor", DQ["limit"]}, "none": set()}[self.paging]


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

    def option_names(self, names: set[str]) -> tuple[set[str], set[str]]:
        """``names`` an endpoint reads, as (accepted, read-as-false) under this contract."""
        return names - self.refused_options, names & self.ignored_options


CONTRACTS: dict[str, Contract] = {
    "default": Contract(),
    "page-total": Contract("page-total", paging="page", page_cap=25),
    "cursor": Contract("cursor", paging="cursor", page_cap=25),
    "unpaged": Contract("unpaged", paging="none"),
    "capped-pages": Contract("capped-pages", paging="offset", page_cap=25),
    "plain-refusals": Contract("plain-refusals", too_large_status=422,
                               too_large_wording="plain"),
    "wait-403": Contract("wait-403", rate_limit_status=403, rate_limit_wording="wait",
                         retry_after_header=False),
    "no-v1": Contract("no-v1", prefix=""),
    "strict-options": Contract("strict-options", refused_options=OPTIONS),
    "ignored-options": Contract("ignored-options", ignored_options=OPTIONS),
    "silent-truncation": Contract("silent-truncation", silent_cap_points=20_000,
                                  silent_cap_epochs=2_000),
}


SUMMARIES: dict[str, str] = {
    "default": "offset/limit, devmon's wording, 429 with Retry-After, paths under /v1",
    "page-total": "page/pageSize with a total, 25 a page",
    "cursor": "nextCursor, 25 a page",
    "unpaged": "all devices at once",
    "capped-pages": "offset/limit, 25 a page whatever is asked",
    "plain-refusals": "422 'Requested data exceeds the maximum of N ...'",
    "wait-403": "403 'Please wait N seconds.', no Retry-After",
    "no-v1": "paths at the root",
    "strict-options": "400 for includeInactiveSensors, includeFormulas, ...",
    "ignored-options": "the same options read as false, unsaid",
    "silent-truncation": "answers cut at 20,000 points / 2,000 epochs, unsaid",
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


def paged(c: Contract, q, chosen: Sequence, render: Callable[[Sequence], list]) -> dict:
    """The answer for one page of ``chosen`` as contract ``c`` pages it (``q``: the request's
    ``Query``; ``render``: the items of a page as JSON objects)."""
    cap = c.page_cap or contract.PAGE_SIZE_MAX
    if c.paging == "none":
        return {"items": render(chosen)}
    if c.paging == "page":
        page = q.integer("page", 1, 1, 10**9)
        size = min(q.integer("pageSize", cap, 1, 10**4), cap)
        return {"items": render(chosen[(page - 1) * size:page * size]), "page": page,
                "pageSize": size, "total": len(chosen)}
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

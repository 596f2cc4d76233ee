"""Contract profiles: other realisations of what the spec leaves unshown.

The spec does not show how GET /devices pages its answer.  devmon's own choice (offset and
limit, ``api_contract``) is one realisation; a real service may page by page number with a
total, hand out a cursor token, cap its pages below what was asked, or not page at all.  A
client that only works against devmon's choice is a toy, so the reference server can answer
with any of these (``devmon serve --contract NAME``) and tests prove the client copes.

``default`` keeps the server's answers byte-identical to those before contract profiles.
"""

from __future__ import annotations

import base64
from collections.abc import Callable, Sequence
from dataclasses import dataclass

from devmon_sync import api_contract as contract
from devmon_sync.api_contract import DEVICES_QUERY as DQ
from devmon_sync.server.requests_in import bad_request

PAGING = ("offset", "page", "cursor", "none")


@dataclass(frozen=True)
class Contract:
    """How the server realises the unshown parts of the API (paging, for now)."""

    name: str = "default"
    paging: str = "offset"
    """offset: ``limit``/``offset``; page: ``page``/``pageSize`` answered with ``page``,
    ``pageSize`` and ``total``; cursor: ``cursor`` answered with ``nextCursor`` (null on the
    last page); none: every item in one answer, paging parameters ignored."""
    page_cap: int = 0
    """The most items a page holds whatever was asked (0: as asked, up to the usual maximum)."""

    def __post_init__(self) -> None:
        if self.paging not in PAGING:
            raise ValueError(f"paging must be one of {', '.join(PAGING)}, not {self.paging!r}")
        if self.page_cap < 0:
            raise ValueError(f"page_cap must be 0 (off) or positive, not {self.page_cap}")

    @property
    def query_names(self) -> set[str]:
        """The paging parameters this contract reads (others are ignored, not refused)."""
        return {"offset": {DQ["limit"], DQ["offset"]}, "page": {"page", "pageSize"},
                "cursor": {"cursor", DQ["limit"]}, "none": set()}[self.paging]


CONTRACTS: dict[str, Contract] = {
    "default": Contract(),
    "page-total": Contract("page-total", paging="page", page_cap=25),
    "cursor": Contract("cursor", paging="cursor", page_cap=25),
    "unpaged": Contract("unpaged", paging="none"),
    "capped-pages": Contract("capped-pages", paging="offset", page_cap=25),
}


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

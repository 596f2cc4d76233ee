"""Walking a list however the service pages it.

The spec does not show how GET /devices pages its answer.  devmon asks in its own way
(``limit``/``offset``, ``service_profile``) and then reads what came back: a ``total`` with
``page``/``pageSize``, or a ``meta`` (or ``pagination``) envelope with ``total``, ``hasMore``
and ``nextPage`` (page numbers); a ``nextCursor``/``next``/``links.next`` token or link, a
``nextPageToken`` (Google AIP-158: sent back as ``pageToken``, "" or absent at the end), or an
RFC 8288 ``Link: <URL>; rel="next"`` header with nothing in the body (a cursor); more items
than asked (no paging at all); or a plain short page (offset paging).

Items already seen are never listed twice, and a page that brings nothing new ends the walk,
so no answer can make the client ask for the same page forever.  A walk also notes what
says it may have missed something: a page that lists again some items an earlier page had
(the service's order moved while it was walked: a list sorted by lastSeen), or fewer items
than the ``total`` the service stated.  Such a walk is ``doubtful``; the client walks the
list again and keeps the union (``ListReading``).  Pure logic: the client
(``devmon_sync.client``) sends the requests this decides.
"""

from __future__ import annotations

import re
from collections.abc import Callable
from dataclasses import dataclass, field, replace

from devmon_sync import service_profile as assumed
from devmon_sync.service_profile import ListPaging

MAX_PAGES = 10_000
"""A list needing more pages than this is taken for a service that never says it is done."""
CURSOR_KEYS = {"nextCursor": "cursor", "next_cursor": "cursor", "next": "cursor",
               "nextPageToken": "pageToken", "next_page_token": "page_token"}
"""Answer keys that carry the next page's token, and the query parameter it goes back in."""
ENVELOPES = ("meta", "pagination", "paging")
"""Objects some services keep their paging fields in, beside ``items``."""
_TOTAL_KEYS = ("total", "totalCount", "total_count", "totalItems")
_LINK = re.compile(r"<([^>]*)>((?:\s*;\s*[^;,]*)*)")


class PagingError(ValueError):
    """The service's pages cannot be walked to an end."""


@dataclass
class PageWalk:
    """The state of one walk through a list; ``advance`` reads each answer."""

    key: Callable[[dict], object]
    """What identifies an item (a device's serial number)."""
    limit: int = field(default_factory=lambda: assumed.PAGE_SIZE)  # read when made
    style: str | None = None
    """offset | page | cursor | none: how the service pages, read from its first answer."""
    known: ListPaging = field(default_factory=ListPaging)
    """What an earlier walk learned of this service (the stored service profile); the walk
    leaves what it learned here too."""
    seen: set = field(default_factory=set)
    pages: int = 0
    offset: int = 0
    total: int | None = None
    """How many items the service said the list holds (its last word), if it said."""
    moved: bool = False
    """A page listed again some items an earlier page had: the order moved during the walk,
    so items may have slipped past unlisted."""
    _checking: int | None = None  # a short page's size, while asking whether more follow
    _last_page: list | None = None  # the previous page's keys, in order

    def first(self) -> dict:
        """The paging parameters of the first request."""
        q = assumed.DEVICES_QUERY
        return {q["limit"]: self.limit, q["offset"]: 0}

    @property
    def doubtful(self) -> bool:
        """Whether the walk may have missed items: its order moved, or it listed fewer than
        the service said the list holds."""
        return self.moved or (self.total is not None and len(self.seen) < self.total)

    def advance(self, answer: dict, next_link: str | None = None
                ) -> tuple[list[dict], dict | str | None]:
        """The new items of ``answer`` and what to ask next: paging parameters, a URL or
        path the service gave (a cursor link; ``next_link``: the one a ``Link`` header
        named), or None when the list is done."""
        items = answer.get("items")
        if not isinstance(items, list):
            raise PagingError("the answer has no list of items")
        new = self._new(items)
        self.pages += 1
        fields = paging_fields(answer)
        if isinstance(fields.get("total"), int):
            self.total = fields["total"]
        if self.style is None:
            self.style = paging_style(answer, len(items), self.limit, next_link)
            self.known = replace(self.known, style=self.style)
        if self._checking is not None:  # the page after a short one
            self._learn(short=self._checking, more=bool(new))
        if not new:
            return new, None  # nothing new: the end, or a service ignoring the paging
        if self.pages >= MAX_PAGES:
            raise PagingError(f"the list did not end after {MAX_PAGES} pages")
        return new, self._next(fields, len(items), next_link)

    def _new(self, items: list) -> list[dict]:
        """The items not listed before (each once), noting a page that repeats only some
        listed items, or repeats them in another order than the page before: the same page
        again is a service ignoring the paging, anything else a moved order."""
        keys = [self.key(item) for item in items]
        new, fresh = [], set()
        for item, k in zip(items, keys):
            if k not in self.seen and k not in fresh:
                fresh.add(k)
                new.append(item)
        repeated = len(fresh) < len(set(keys))
        if repeated and keys != self._last_page:
            self.moved = True
        self.seen |= fresh
        self._last_page = keys
        return new

    def _next(self, fields: dict, size: int, next_link: str | None) -> dict | str | None:
        if self.style == "cursor":
            return next_cursor(fields) or next_link
        if self.style == "page":
            return self._next_page(fields)
        if self.style == "none" or not self._more_after(size):
            return None  # everything at once, or the last offset page
        self.offset += size
        q = assumed.DEVICES_QUERY
        return {q["limit"]: self.limit, q["offset"]: self.offset}

    def _next_page(self, fields: dict) -> dict | None:
        """The next page number's parameters; None where the answer says it was the last.
        The page size goes back only where the service named it: asking a size the first
        page did not have would shift every later page."""
        if fields.get("hasMore") is False or ("nextPage" in fields and
                                              fields["nextPage"] is None):
            return None
        if self.total is not None and len(self.seen) >= self.total:
            return None
        page, named = fields.get("page"), fields.get("nextPage")
        page = named if isinstance(named, int) else \
            page + 1 if isinstance(page, int) else self.pages + 1
        page_size = fields.get("pageSize")
        return {"page": page, "pageSize": page_size} if isinstance(page_size, int) \
            else {"page": page}

    def _more_after(self, size: int) -> bool:
        """Whether an offset page of ``size`` items may be followed by more.  A full page
        may; a shorter one is the last where that was proved, or where it is shorter than
        the service's learned page cap; on first contact one more page is asked to learn
        which (a service may cap its pages below what was asked, silently)."""
        cap = self.known.page_cap
        if size >= self.limit or (cap is not None and size >= cap):
            return True
        if cap is not None or self.known.short_page_is_last:
            return False
        self._checking = size
        return True

    def _learn(self, short: int, more: bool) -> None:
        self._checking = None
        self.known = replace(self.known, page_cap=short) if more else \
            replace(self.known, short_page_is_last=True)


@dataclass(frozen=True)
class ListReading:
    """What the walks of one list showed, for the run's notes and cross-checks."""

    listed: int
    """Items the walks listed (the union, each once)."""
    total: int | None = None
    """How many the service said the list holds, if it said."""
    moved: bool = False
    """The order moved while it was walked."""
    walks: int = 1

    @property
    def short(self) -> int:
        """Items the service's total counts that no walk listed."""
        return max(0, self.total - self.listed) if self.total is not None else 0


def paging_fields(answer: dict) -> dict:
    """The paging fields of an answer, wherever it keeps them: beside ``items`` or in an
    envelope (``meta``, ``pagination``), under the common names of each."""
    out = dict(answer)
    for name in ENVELOPES:
        if isinstance(answer.get(name), dict):
            out.update(answer[name])
    for names, plain in ((_TOTAL_KEYS, "total"), (("has_more", "hasMore"), "hasMore"),
                         (("next_page", "nextPage"), "nextPage")):
        for name in names:
            if name in out:
                out[plain] = out[name]
    for name in ("total", "page", "pageSize", "nextPage"):
        if isinstance(out.get(name), str) and out[name].isdigit():
            out[name] = int(out[name])  # a count written as a JSON string ("40")
    return out


def paging_style(answer: dict, size: int, limit: int, next_link: str | None = None) -> str:
    """How a list answer says it is paged (``next_link``: a ``Link`` header's next page)."""
    fields = paging_fields(answer)
    if next_cursor(fields) is not None or any(k in fields for k in CURSOR_KEYS) or next_link:
        return "cursor"
    numbered = "page" in fields or "pageSize" in fields
    if any(k in fields for k in ("nextPage", "hasMore")) or \
            (numbered and isinstance(fields.get("total"), int)):
        return "page"
    if size > limit:
        return "none"  # more than asked: the service ignores the paging parameters
    return "offset"


def next_cursor(answer: dict) -> dict | str | None:
    """The next page's cursor: parameters ``{cursor: token}`` (``{pageToken: token}``...),
    or a link (URL or path)."""
    links = answer.get("links")
    candidates = [(answer.get(k), name) for k, name in CURSOR_KEYS.items()]
    if isinstance(links, dict):
        candidates.append((links.get("next"), "cursor"))
    for value, name in candidates:
        if isinstance(value, str) and value:
            return value if value.startswith(("http://", "https://", "/")) \
                else {name: value}
    return None


def link_next(header: str | None) -> str | None:
    """The target of the ``rel="next"`` link of an RFC 8288 ``Link`` header, if any
    (relation types compare without case; a link may name several, space-separated)."""
    for match in _LINK.finditer(header or ""):
        for param in match.group(2).split(";"):
            name, _, value = param.partition("=")
            if name.strip().lower() == "rel" and \
                    "next" in value.strip().strip('"').lower().split():
                return match.group(1).strip()
    return None

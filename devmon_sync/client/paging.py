"""Walking a list however the service pages it.

The spec does not show how GET /devices pages its answer.  devmon asks in its own way
(``limit``/``offset``, ``service_profile``) and then reads what came back: a ``total`` with
``page``/``pageSize`` (page numbers), a ``nextCursor``/``next``/``links.next`` token (a
cursor), more items than asked (no paging at all), or a plain short page (offset paging).
Items already seen are never listed twice, and a page that brings nothing new ends the
walk, so no answer can make the client ask for the same page forever.  Pure logic: the
client (``devmon_sync.client``) sends the requests this decides.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field, replace

from devmon_sync import service_profile as assumed
from devmon_sync.service_profile import ListPaging

MAX_PAGES = 10_000
"""A list needing more pages than this is taken for a service that never says it is done."""
CURSOR_KEYS = ("nextCursor", "next_cursor", "next")


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
    _checking: int | None = None  # a short page's size, while asking whether more follow

    def first(self) -> dict:
        """The paging parameters of the first request."""
        q = assumed.DEVICES_QUERY
        return {q["limit"]: self.limit, q["offset"]: 0}

    def advance(self, answer: dict) -> tuple[list[dict], dict | str | None]:
        """The new items of ``answer`` and what to ask next: paging parameters, a URL or
        path the service gave (a cursor link), or None when the list is done."""
        items = answer.get("items")
        if not isinstance(items, list):
            raise PagingError("the answer has no list of items")
        new = [item for item in items if self.key(item) not in self.seen]
        self.seen.update(self.key(item) for item in new)
        self.pages += 1
        if self.style is None:
            self.style = paging_style(answer, len(items), self.limit)
            self.known = replace(self.known, style=self.style)
        if self._checking is not None:  # the page after a short one
            self._learn(short=self._checking, more=bool(new))
        if not new:
            return new, None  # nothing new: the end, or a service ignoring the paging
        if self.pages >= MAX_PAGES:
            raise PagingError(f"the list did not end after {MAX_PAGES} pages")
        return new, self._next(answer, len(items))

    def _next(self, answer: dict, size: int) -> dict | str | None:
        if self.style == "cursor":
            return next_cursor(answer)
        if self.style == "page":
            total = answer.get("total")
            if isinstance(total, int) and len(self.seen) >= total:
                return None
            page = answer.get("page")
            page = page + 1 if isinstance(page, int) else self.pages + 1
            page_size = answer.get("pageSize")
            return {"page": page, "pageSize": page_size if isinstance(page_size, int) else size}
        if self.style == "none" or not self._more_after(size):
            return None  # everything at once, or the last offset page
        self.offset += size
        q = assumed.DEVICES_QUERY
        return {q["limit"]: self.limit, q["offset"]: self.offset}


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


def paging_style(answer: dict, size: int, limit: int) -> str:
    """How a list answer says it is paged."""
    if next_cursor(answer) is not None or any(k in answer for k in CURSOR_KEYS):
        return "cursor"
    if isinstance(answer.get("total"), int) and ("page" in answer or "pageSize" in answer):
        return "page"
    if size > limit:
        return "none"  # more than asked: the service ignores the paging parameters
    return "offset"


def next_cursor(answer: dict) -> dict | str | None:
    """The next page's cursor: parameters ``{cursor: token}``, or a link (URL or path)."""
    links = answer.get("links")
    candidates = [answer.get(k) for k in CURSOR_KEYS]
    if isinstance(links, dict):
        candidates.append(links.get("next"))
    for value in candidates:
        if isinstance(value, str) and value:
            return value if value.startswith(("http://", "https://", "/")) \
                else {"cursor": value}
    return None

"""``ApiClient``: the nine read endpoints of the Device Monitoring API (spec section 4), typed.

Each method asks through the transport it is built on (``transport.Transport``: pacing,
waits, retries, where the API answers) and checks the answer's shape (``body``), so callers
get lists and objects, never HTTP.  Lists are walked to their end however the service pages
them (``paging``); long selector lists are sent in chunks the service accepts; optional
query parameters the service refuses as unknown are left out from then on.
"""

from __future__ import annotations

import logging
import urllib.parse
from collections.abc import Callable, Iterator, Sequence
from typing import Any
from urllib.parse import quote

from devmon_sync import service_profile as assumed
from devmon_sync.client import refusals
from devmon_sync.client.body import expect_keys, items_of
from devmon_sync.client.errors import (
    ApiError,
    BadRequestError,
    NotFoundError,
    RequestTooLargeError,
)
from devmon_sync.client.paging import ListReading, PageWalk, PagingError, link_next
from devmon_sync.client.transport import Transport
from devmon_sync.service_profile import ListPaging

log = logging.getLogger("devmon.client")


class ApiClient(Transport):
    """A paced, retrying, typed client of the Device Monitoring read API (spec section 4).

    ``base_url`` may be given with or without ``/v1`` and a trailing slash: the spec's
    descriptions differ on whether paths carry the prefix, so the first request is sent to the
    address as given and, if nothing answers there as the API would, once more with ``/v1``
    added (or taken off); the address that answered is kept in ``base_url`` (see
    ``locate``).  Plain ``http://``
    is accepted only for loopback addresses unless ``allow_insecure`` is set.  ``timeout_s`` is
    (connect, read) seconds for each attempt.  ``max_retries`` bounds the repeats after a
    failed attempt; waits the server asks for are bounded separately by ``max_server_waits``.
    ``on_wait(seconds, reason)`` is called before every wait (``reason``: a
    ``pacing.WaitReason``, its words and its kind).  An answer that lags behind
    1 kB/s for ``slow_grace_s`` after its first byte is cut as too slow, and
    ``slow_answers_to_stop`` such answers in a row that cost ``slow_stop_after_s`` together
    end the requests (``service_profile`` holds the defaults).  Use it as a context manager
    or call ``close()``.
    """

    def __init__(self, base_url: str, api_key: str, **options: Any) -> None:
        """``options`` are the keyword arguments of ``Transport`` (described above), passed
        through so that pacing and retries are set in one place."""
        super().__init__(base_url, api_key, **options)
        self.list_paging = ListPaging()
        """What is known of how the service pages lists (the stored service profile's; each
        walk leaves what it learned here)."""
        self.refused_options: set[tuple[str, str]] = set()
        """(list path, query parameter) the service refused as unknown: never sent again."""
        self.page_size: int | None = None
        """Items to ask for per list page (None: devmon's default, ``PAGE_SIZE_MAX``)."""
        self.list_reading: ListReading | None = None
        """What the walks of the last list read showed (items, the service's total, whether
        its order moved, walks made): the sync's cross-checks and notes read it."""

    # -- typed helpers (spec section 4)

    def sites(self, include_devices: bool = False, include_sensors: bool = False,
              uuids: Sequence[str] | None = None) -> list[dict]:
        """GET /sites; long ``uuids`` lists are sent in chunks the service accepts."""
        params = {"includeDevices": include_devices, "includeSensors": include_sensors}
        return [item for chunk in _chunks(uuids)
                for item in self._items("/sites", {**params, "uuids": chunk})]

    def devices(self, *, include_sensors: bool = True, include_inactive: bool = True,
                include_formulas: bool = True, include_internal: bool = True,
                site_uuid: str | None = None, group_uuid: str | None = None,
                serial_numbers: Sequence[str] | None = None, walks: int = 2) -> list[dict]:
        """GET /devices, every page: the defaults fetch everything a mirror keeps.

        Long ``serial_numbers`` lists are sent in chunks the service accepts; an empty list
        asks for no device and sends no request.  A walk that may have missed devices is
        walked again, up to ``walks`` walks in all (``_all_pages``).
        """
        q = assumed.DEVICES_QUERY
        params = {q["include_sensors"]: include_sensors,
                  q["include_inactive_sensors"]: include_inactive,
                  q["include_formulas"]: include_formulas,
                  q["include_internal"]: include_internal,
                  q["site_uuid"]: site_uuid, q["group_uuid"]: group_uuid}
        return [device for chunk in _chunks(serial_numbers)
                for device in self._all_pages("/devices", {**params, q["serial_numbers"]: chunk},
                                              walks)]

    def refused(self, path: str, name: str) -> bool:
        """Whether the service refused query parameter ``name`` on list ``path`` as unknown."""
        return (path, name) in self.refused_options

    def device(self, serial_number: str) -> dict:
        """GET /devices/{sn}: one device with sensors, derived parameters and formulas."""
        path = f"/devices/{_segment(serial_number)}"
        items = self._items(path, None)
        if not items:
            raise NotFoundError(f"GET {path}: the service answered with no device for serial "
                                f"number {serial_number!r}. Check the serial number.",
                                status=200, method="GET", path=path)
        return items[0]

    def device_groups(self, *, include_devices: bool = True, include_ungrouped: bool = True,
                      include_sensors: bool = False,
                      uuids: Sequence[str] | None = None) -> dict:
        """GET /device-groups: ``{grouped: [root groups with children], ungrouped: [...]}``.

        An empty ``uuids`` list asks for no group and sends no request.
        """
        if uuids is not None and len(uuids) == 0:
            return {"grouped": [], "ungrouped": []}
        q = assumed.DEVICE_GROUPS_QUERY
        answer = self._get_without_refused("/device-groups", {
            q["include_devices"]: include_devices, q["include_ungrouped"]: include_ungrouped,
            q["include_sensors"]: include_sensors, q["uuids"]: _list_or_none(uuids)})
        return expect_keys(answer, ("grouped", "ungrouped"), "GET", "/device-groups")

    def device_group(self, uuid: str) -> dict:
        """GET /device-groups/{uuid}: one group with its devices and nested groups."""
        path = f"/device-groups/{_segment(uuid)}"
        return expect_keys(self.get(path), ("uuid",), "GET", path)

    def sensor(self, uuid: str) -> dict:
        """GET /sensors/{uuid}: one sensor with its parameters."""
        path = f"/sensors/{_segment(uuid)}"
        return expect_keys(self.get(path), ("uuid",), "GET", path)

    def sensor_data(self, body: dict, decoder: Callable[[bytes], Any] | None = None) -> Any:
        """POST /sensor-data: one series item per parameter (or what ``decoder`` makes)."""
        if decoder is not None:
            return self.post("/sensor-data", body, decoder)
        return items_of(self.post("/sensor-data", body), "POST", "/sensor-data")

    def latest(self, body: dict | None = None) -> list[dict]:
        """POST /sensor-data/latest: the newest point of each parameter (all, with no body)."""
        return items_of(self.post("/sensor-data/latest", body or {}), "POST",
                         "/sensor-data/latest")

    def gnss(self, body: dict, decoder: Callable[[bytes], Any] | None = None) -> Any:
        """POST /sensor-data/gnss: one item of solution epochs per GNSS sensor (or what
        ``decoder`` makes)."""
        if decoder is not None:
            return self.post("/sensor-data/gnss", body, decoder)
        return items_of(self.post("/sensor-data/gnss", body), "POST", "/sensor-data/gnss")

    # -- paging

    def _items(self, path: str, params: dict | None) -> list[dict]:
        return items_of(self.get(path, params), "GET", path)

    def _all_pages(self, path: str, params: dict, walks: int = 2) -> Iterator[dict]:
        """Every item of a list, however the service pages it (``devmon_sync.client.paging``): an
        item is listed once, and a page that brings nothing new ends the walk.

        A walk that may have missed items (a page repeated some an earlier page had: the
        order moved, as a list sorted by lastSeen does; or fewer items than the total the
        service stated) is walked again, up to ``walks`` walks, and every item any walk
        listed is kept: an item no other route names (a device in no site or group) can
        only be found so.  What the walks showed is left in ``list_reading``."""
        listed: set = set()
        reading = ListReading(0, walks=0)
        while reading.walks < max(1, walks):
            walk = PageWalk(key=_item_key, known=self.list_paging)
            if self.page_size:
                walk.limit = self.page_size
            for item in self._walk(walk, path, params):
                if _item_key(item) not in listed:
                    listed.add(_item_key(item))
                    yield item
            self.list_paging = walk.known
            total = reading.total if walk.total is None else walk.total
            reading = ListReading(len(listed), total, reading.moved or walk.moved,
                                  reading.walks + 1)
            self.list_reading = reading
            if not walk.doubtful or reading.listed >= (total or 0) > 0:
                return
            log.info("GET %s: walk %d listed %d items%s%s", path, reading.walks,
                     len(walk.seen), f" of {total}" if total else "",
                     ", its order moved" if walk.moved else "")

    def _walk(self, walk: PageWalk, path: str, params: dict) -> Iterator[dict]:
        """One walk through a list, page by page, as ``walk`` decides."""
        ask: dict | str | None = walk.first()
        while ask is not None:
            if isinstance(ask, str):  # a link the service gave for the next page
                link_path, link_params = self._own_link(ask, path)
                answer = self.get(link_path, link_params)
            else:
                answer = self._get_without_refused(path, {**params, **ask})
            try:
                items, ask = walk.advance(answer if isinstance(answer, dict) else {},
                                          link_next(self.last_headers().get("Link")))
            except PagingError as err:
                raise ApiError(f"GET {path}: {err}; the list cannot be read to its end. "
                               f"Report this service's paging to devmon.", status=200,
                               method="GET", path=path) from None
            yield from items

    def _get_without_refused(self, path: str, params: dict) -> Any:
        """GET a list with the optional parameters the service refuses left out: a 400 that
        names one (an include option or a paging parameter, whose names the spec does not
        show) is asked again without it, and the name is never sent to ``path`` again.
        Filters are never dropped: without them the answer would hold other things."""
        while True:
            sent = {k: v for k, v in params.items()
                    if v is not None and (path, k) not in self.refused_options}
            try:
                return self.get(path, sent)
            except RequestTooLargeError:
                raise
            except BadRequestError as err:
                named = refusals.refused_names(err.server_message,
                                               [k for k in sent if k in _OPTIONAL_QUERY])
                if not named:
                    raise
                log.warning("GET %s: the service refuses %s; asking without", path,
                            ", ".join(named))
                self.refused_options.update((path, k) for k in named)

    def _own_link(self, link: str, path: str) -> tuple[str, dict]:
        """A next-page link as (path under the base URL, query): only a link to this very
        service is followed (the API key never goes anywhere else)."""
        base = urllib.parse.urlsplit(self.base_url)
        url = urllib.parse.urlsplit(urllib.parse.urljoin(self.base_url + "/", link))
        if (url.scheme, url.netloc) != (base.scheme, base.netloc) or \
                not url.path.startswith(base.path):
            raise ApiError(f"GET {path}: the next page is at {self._scrub(link)!r}, outside "
                           f"this service "
                           f"({self.base_url}); devmon does not send the key there.",
                           status=200, method="GET", path=path)
        query: dict[str, list[str]] = {}
        for name, value in urllib.parse.parse_qsl(url.query, keep_blank_values=True):
            query.setdefault(name, []).append(value)  # a repeated key is a list (filters)
        return url.path[len(base.path):] or "/", \
            {name: values[0] if len(values) == 1 else values for name, values in query.items()}


# ---------------------------------------------------------------------------- helpers


def _chunks(values: Sequence[str] | None) -> Iterator[list[str] | None]:
    """None once (no filter), else the values in slices the service's array limit accepts."""
    if values is None:
        yield None
        return
    size = assumed.DEFAULT_LIMITS.max_selector_items
    values = list(values)
    for start in range(0, len(values), size):
        yield values[start:start + size]


def _list_or_none(values: Sequence[str] | None) -> list[str] | None:
    return None if values is None else list(values)


def _segment(value: str) -> str:
    """One path segment, escaped so that a serial number with '/' or '?' stays one segment."""
    return quote(str(value), safe="")


_OPTIONAL_QUERY = frozenset(
    [v for k, v in assumed.DEVICES_QUERY.items() if k.startswith("include") or
     k in ("limit", "offset")] +
    [v for k, v in assumed.DEVICE_GROUPS_QUERY.items() if k.startswith("include")] +
    ["page", "pageSize", "cursor"])
"""Query parameters a list may be asked again without (include options and paging)."""


def _item_key(item: object) -> object:
    """What identifies a list item: its serial number or UUID, else the item itself."""
    if isinstance(item, dict):
        for name in ("serialNumber", "uuid"):
            if isinstance(item.get(name), str):
                return (name, item[name])
    return repr(item)


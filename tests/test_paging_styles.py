"""Issue 27 point 7: every common paging style of GET /devices, and lists whose order moves.

A new user met services paging in ways devmon did not read: an RFC 8288 ``Link`` header, a
``{items, meta: {total, hasMore, nextPage}}`` envelope, a ``nextPageToken`` (Google AIP-158).
Each walk took a page repeated for the short last one and lost devices unsaid; the sites and
groups cross-check brought back all but one that belongs to no site or group.  A service
sorting by lastSeen (its order moves while it is walked) lost one device of 40 although its
``total`` said 40.  The reference server realises each (``--contract NAME``); the client must
list every device, and a full sync must give the mirror the default contract gives.
"""

from __future__ import annotations

import pytest
import requests
from support import KEY, Api, snapshot, start_server, sync

from devmon_sync.client import ApiClient
from devmon_sync.client.paging import PageWalk
from devmon_sync.server import WorldSize
from devmon_sync.server.contracts import CONTRACTS, Contract, cursor_token

SIZE = WorldSize(sites=4, devices=40, days=3)  # two pages of 25
NEW_STYLES = ("link-header", "meta-envelope", "page-token", "shuffled")


def _serials(devices: list[dict]) -> list[str]:
    return [d["serialNumber"] for d in devices]


def _listed(size: WorldSize, contract: Contract) -> tuple[list[str], ApiClient]:
    with start_server(size=size, contract=contract) as srv, \
            ApiClient(srv.base_url, KEY, rate_limit_per_minute=0) as client:
        return _serials(client.devices()), client


@pytest.fixture(scope="module")
def honest_serials() -> list[str]:
    serials, _ = _listed(SIZE, CONTRACTS["default"])
    assert len(serials) == 40
    return serials


def _in_no_site_or_group(srv) -> set[str]:
    """Devices only GET /devices names: in no site and in no device group."""
    world = srv.app.world
    grouped = {sn for g in world.groups for sn in g.device_serials}
    return {d.serial for d in world.devices if d.site is None and d.serial not in grouped}


def _device_rows(db) -> list:
    import duckdb

    con = duckdb.connect(str(db), read_only=True)
    try:
        return con.execute("SELECT serial_number, site_uuid::VARCHAR, display_name "
                           "FROM devices ORDER BY 1").fetchall()
    finally:
        con.close()


# ----------------------------------------------------------------------------- the server

def test_each_new_contract_pages_as_it_says(honest_serials):
    with start_server(size=SIZE, contract=CONTRACTS["link-header"]) as srv:
        first = Api(srv.base_url).get("/devices", includeSensors="false")
        assert set(first.json()) == {"items"}, "no paging keys in the body"
        assert first.headers["Link"] == \
            f'<{srv.base_url}/devices?includeSensors=false&page=2>; rel="next"'
        last = Api(srv.base_url).get("/devices", page=2)
        assert _serials(last.json()["items"]) == honest_serials[25:]
        assert "Link" not in last.headers
    with start_server(size=SIZE, contract=CONTRACTS["meta-envelope"]) as srv:
        first = Api(srv.base_url).ok("get", "/devices")
        assert first["meta"] == {"total": 40, "hasMore": True, "nextPage": 2}
        last = Api(srv.base_url).ok("get", "/devices", page=2)
        assert last["meta"] == {"total": 40, "hasMore": False, "nextPage": None}
    with start_server(size=SIZE, contract=CONTRACTS["page-token"]) as srv:
        first = Api(srv.base_url).ok("get", "/devices")
        assert first["nextPageToken"] == cursor_token(25) and len(first["items"]) == 25
        last = Api(srv.base_url).ok("get", "/devices", pageToken=cursor_token(25))
        assert last["nextPageToken"] == "" and _serials(last["items"]) == honest_serials[25:]
        assert Api(srv.base_url).get("/devices", pageToken="nonsense").status_code == 400
    with start_server(size=SIZE, contract=CONTRACTS["shuffled"]) as srv:
        api = Api(srv.base_url)
        first, again = (_serials(api.ok("get", "/devices", limit=25)["items"]) for _ in "12")
        assert first == honest_serials[:25] and again == honest_serials[7:32]


# ----------------------------------------------------------------------------- the client

@pytest.mark.parametrize("name", NEW_STYLES)
def test_the_client_lists_every_device_in_each_style(honest_serials, name):
    got, client = _listed(SIZE, CONTRACTS[name])
    assert len(got) == len(set(got)), f"{name}: a device listed twice"
    if name == "shuffled":  # its order is its own; every device, once
        assert sorted(got) == sorted(honest_serials), \
            f"{name}: {len(set(got) & set(honest_serials))} of {len(honest_serials)} devices"
    else:
        assert got == honest_serials, f"{name}: {len(got)} of {len(honest_serials)} devices"
    assert client.list_reading.listed == 40


@pytest.mark.parametrize("devices", [30, 40, 48, 60])
def test_two_walks_of_the_shuffled_list_find_every_device(devices):
    """A walk by offset over an order that moves misses some devices (the precondition is
    asserted), and says its order moved; the second walk's union finds them all."""
    size = WorldSize(sites=4, devices=devices, days=1)
    honest, _ = _listed(size, CONTRACTS["default"])
    with start_server(size=size, contract=CONTRACTS["shuffled"]) as srv:
        api, naive, offset = Api(srv.base_url), [], 0
        while True:
            page = _serials(api.ok("get", "/devices", limit=25, offset=offset)["items"])
            naive += page
            offset += 25
            if len(page) < 25:
                break
    assert set(naive) != set(honest), "the order does not move: this test proves nothing"
    got, client = _listed(size, CONTRACTS["shuffled"])
    assert sorted(got) == sorted(honest)
    assert client.list_reading.moved and client.list_reading.walks == 2


def test_page_total_with_an_order_that_moves_lists_what_total_says():
    """The new user's 39 of 40: a service paging by page number with a total, sorting by
    lastSeen (one device reports between two requests, so the order moves by one).  Page 2
    repeats one device of page 1 and the one pushed across the page border is never
    listed; a page bringing nothing new then ended the walk, whatever ``total`` said."""
    moving = Contract("page-total-moving", paging="page", page_cap=25, order_shift=1)
    honest, _ = _listed(SIZE, CONTRACTS["default"])
    got, client = _listed(SIZE, moving)
    assert sorted(got) == sorted(honest), f"{len(set(got))} of 40 although total said 40"
    assert client.list_reading.total == 40 and client.list_reading.walks == 2


@pytest.mark.parametrize("name", NEW_STYLES)
def test_a_sync_through_each_style_gives_the_same_mirror(tmp_path, name):
    with start_server(size=SIZE) as srv:
        assert sync(srv.base_url, tmp_path / "honest.duckdb").status == "ok"
    with start_server(size=SIZE, contract=CONTRACTS[name]) as srv:
        report = sync(srv.base_url, tmp_path / f"{name}.duckdb")
    assert report.status == "ok" and not report.problems, report.problems
    assert _device_rows(tmp_path / f"{name}.duckdb") == _device_rows(tmp_path / "honest.duckdb")
    assert snapshot(tmp_path / f"{name}.duckdb") == snapshot(tmp_path / "honest.duckdb")


def test_a_device_in_no_site_or_group_is_found_by_walking_the_moving_list_again(tmp_path):
    """Only the walk can find a device that belongs to no site and no group and has no data
    (/sensor-data/latest names no parameter of it): no cross-check can name it.  A first
    walk of the shuffled list misses one such device (asserted); the sync walks again,
    mirrors it, and says why it walked twice."""
    size = WorldSize(sites=4, devices=30, days=2)
    with start_server(size=size, contract=CONTRACTS["shuffled"]) as srv:
        api = Api(srv.base_url)
        with_data = {i["deviceSerialNumber"]
                     for i in api.ok("post", "/sensor-data/latest", {})["items"]}
        only_listed = _in_no_site_or_group(srv) - with_data
        walked = set()
        for offset in (0, 25):  # the first walk's two requests, as the client sends them
            walked |= set(_serials(api.ok("get", "/devices", limit=500,
                                          offset=offset)["items"]))
        every = {d.serial for d in srv.app.world.devices}
    lost = (every - walked) & only_listed
    assert lost, "no device only the list names is missed: this test proves nothing"
    with start_server(size=size) as srv:
        assert sync(srv.base_url, tmp_path / "honest.duckdb").status == "ok"
    with start_server(size=size, contract=CONTRACTS["shuffled"]) as srv:
        report = sync(srv.base_url, tmp_path / "shuffled.duckdb")
    assert report.status == "ok" and not report.problems, report.problems
    mirrored = {row[0] for row in _device_rows(tmp_path / "shuffled.duckdb")}
    assert lost <= mirrored, f"{sorted(lost - mirrored)} lost"
    assert _device_rows(tmp_path / "shuffled.duckdb") == _device_rows(tmp_path / "honest.duckdb")
    assert any("changed its order" in note for note in report.notes), report.notes


def test_devices_the_walks_never_list_are_read_one_by_one_and_named(tmp_path):
    """An order that moves a whole page each request: two walks list only 27 of 48.  The
    devices the sites and groups name are read one by one and named in the notes; the one
    only the list could name is counted against the total the service gave, not lost unsaid."""
    size = WorldSize(sites=4, devices=48, days=2)
    drifting = Contract("drifting", paging="page", page_cap=25, order_shift=25)
    with start_server(size=size, contract=drifting) as srv:
        orphans = _in_no_site_or_group(srv)
        report = sync(srv.base_url, tmp_path / "m.duckdb")
    mirrored = {row[0] for row in _device_rows(tmp_path / "m.duckdb")}
    assert report.status == "ok", report.problems
    every = {d.serial for d in srv.app.world.devices}
    unnamed = every - mirrored
    assert unnamed and unnamed <= orphans, "only devices no site or group names are lost"
    notes = " ".join(report.notes)
    read_alone = (every - unnamed) - _walked_twice(drifting, size)
    assert read_alone, "the two walks found every device: this test proves nothing"
    for serial in read_alone:
        assert serial in notes, f"{serial} read one by one but not named: {report.notes}"
    assert f"said it holds {len(every)} devices" in notes, report.notes
    assert f"{len(unnamed)} device" in notes, report.notes


def _walked_twice(contract: Contract, size: WorldSize) -> set[str]:
    got, client = _listed(size, contract)
    assert client.list_reading.walks == 2
    return set(got)


# ----------------------------------------------------------------------------- pure walks

def _walk(answers, links=None) -> tuple[list, int, PageWalk]:
    """Items a PageWalk lists from canned answers (and Link headers), and its requests."""
    walk, items, asked = PageWalk(key=lambda d: d["serialNumber"], limit=3), [], 0
    ask = walk.first()
    while ask is not None:
        new, ask = walk.advance(answers(ask, asked), next_link=(links or {}).get(asked))
        items += new
        asked += 1
        assert asked < 50, "the walk loops"
    return items, asked, walk


def _devices(*serials) -> list[dict]:
    return [{"serialNumber": s} for s in serials]


@pytest.mark.parametrize("header, link", [
    ('<https://api.example/v1/devices?page=2>; rel="next"',
     "https://api.example/v1/devices?page=2"),
    ('<https://a.example/d?page=1>; rel="prev", <https://a.example/d?page=3>; rel=next',
     "https://a.example/d?page=3"),
    ('<https://a.example/d?page=9>; rel="last", <https://a.example/d?page=2>; '
     + 'rel="next nofollow"; title="Next"', "https://a.example/d?page=2"),
    ('</v1/devices?page=2>; REL="Next"', "/v1/devices?page=2"),
    ('<https://a.example/d?page=9>; rel="last"', None),
    ("", None),
    (None, None),
])
def test_a_link_header_names_the_next_page(header, link):
    from devmon_sync.client.paging import link_next

    assert link_next(header) == link


def test_a_link_header_walk_follows_the_header():
    pages = {0: _devices("A", "B", "C"), 1: _devices("D")}
    items, asked, walk = _walk(lambda ask, i: {"items": pages[i]},
                               links={0: '</v1/devices?page=2>; rel="next"'})
    assert [d["serialNumber"] for d in items] == list("ABCD") and asked == 2
    assert walk.style == "cursor"


@pytest.mark.parametrize("end", [{"nextPageToken": ""}, {}])
def test_a_page_token_walk_ends_when_the_token_is_empty_or_absent(end):
    pages = {0: {"items": _devices("A", "B", "C"), "nextPageToken": "t2"},
             1: {"items": _devices("D"), **end}}
    asks = []
    items, asked, _ = _walk(lambda ask, i: asks.append(ask) or pages[i])
    assert [d["serialNumber"] for d in items] == list("ABCD") and asked == 2
    assert asks[1] == {"pageToken": "t2"}


def test_a_meta_envelope_walk_asks_the_next_page_it_names():
    pages = {1: _devices("A", "B", "C"), 2: _devices("D", "E", "F"), 3: _devices("G")}
    asks = []

    def answer(ask, i):
        asks.append(ask)
        page = ask.get("page", 1)
        return {"items": pages[page], "meta": {"total": 7, "hasMore": page < 3,
                                               "nextPage": page + 1 if page < 3 else None}}
    items, asked, walk = _walk(answer)
    assert [d["serialNumber"] for d in items] == list("ABCDEFG") and asked == 3
    assert asks[1:] == [{"page": 2}, {"page": 3}] and walk.total == 7 and not walk.doubtful


def test_a_page_repeating_some_listed_items_means_the_order_moved():
    pages = {0: _devices("A", "B", "C"), 1: _devices("C", "E", "F"), 2: _devices()}
    _, _, walk = _walk(lambda ask, i: {"items": pages[i]})
    assert walk.moved and walk.doubtful


def test_the_same_page_again_means_paging_is_ignored_not_a_moved_order():
    _, asked, walk = _walk(lambda ask, i: {"items": _devices("A", "B")})
    assert asked == 2 and not walk.moved and not walk.doubtful


def test_a_walk_short_of_the_total_it_was_told_is_doubtful():
    pages = {1: _devices("A", "B", "C"), 2: _devices("C", "D", "E")}
    _, _, walk = _walk(lambda ask, i: {"items": pages.get(ask.get("page", 1), []),
                                       "page": ask.get("page", 1), "pageSize": 3,
                                       "total": 7})
    assert walk.total == 7 and len(walk.seen) == 5 and walk.doubtful


def test_a_link_to_another_host_is_never_followed(honest_serials):
    """The Link header is the service's word like any body: the key never leaves it."""
    from devmon_sync.client import ApiError

    with start_server(size=SIZE) as srv, ApiClient(srv.base_url, KEY,
                                                   rate_limit_per_minute=0) as client:
        with pytest.raises(ApiError, match="outside this service"):
            client._own_link("https://elsewhere.example/v1/devices?page=2", "/devices")
        assert client._own_link(srv.base_url + "/devices?serialNumbers=A&serialNumbers=B",
                                "/devices") == ("/devices", {"serialNumbers": ["A", "B"]})


def test_the_link_header_carries_the_filters_of_the_first_request(honest_serials):
    """A next page asked through the link is the same list: its filters stay."""
    with start_server(size=SIZE, contract=CONTRACTS["link-header"]) as srv, \
            ApiClient(srv.base_url, KEY, rate_limit_per_minute=0) as client:
        wanted = honest_serials[3:33]
        got = _serials(client.devices(serial_numbers=wanted))
        direct = requests.get(srv.base_url + "/devices", headers={"x-api-key": KEY},
                              params={"serialNumbers": wanted}, timeout=30)
    assert got == wanted
    assert 'rel="next"' in direct.headers["Link"] and "serialNumbers=" in direct.headers["Link"]

"""Issue 14: services that realise the spec's unshown points differently (contract profiles).

The reference server answers GET /devices as each contract pages it (``devmon serve
--contract NAME``); the client must mirror every device whatever the paging, and never loop.
"""

from __future__ import annotations

import subprocess
import sys

import pytest
from support import KEY, Api, start_server
from support import snapshot, sync

from devmon_sync.client import ApiClient
from devmon_sync.server import WorldSize
from devmon_sync.server.contracts import CONTRACTS, cursor_token

SIZE = WorldSize(sites=3, devices=60, days=2)  # more devices than one capped page (25)


@pytest.fixture(scope="module")
def honest_serials() -> list[str]:
    with start_server(size=SIZE) as srv, ApiClient(srv.base_url, KEY,
                                                   rate_limit_per_minute=0) as client:
        serials = [d["serialNumber"] for d in client.devices()]
    assert len(serials) > 50
    return serials


# ----------------------------------------------------------------------------- the server

def test_the_default_contract_answers_as_before():
    """``--contract default`` is today's offset paging, byte for byte."""
    with start_server(size=SIZE) as a, start_server(size=SIZE, contract=CONTRACTS["default"]) as b:
        for params in ({}, {"limit": 7, "offset": 3}, {"limit": 500}):
            ra, rb = Api(a.base_url).get("/devices", **params), Api(b.base_url).get(
                "/devices", **params)
            assert ra.status_code == rb.status_code == 200 and ra.content == rb.content


def test_each_contract_pages_as_it_says(honest_serials):
    n = len(honest_serials)
    with start_server(size=SIZE, contract=CONTRACTS["page-total"]) as srv:
        page = Api(srv.base_url).ok("get", "/devices", page=2, pageSize=500)
        assert (page["page"], page["pageSize"], page["total"]) == (2, 25, n)
        assert [d["serialNumber"] for d in page["items"]] == honest_serials[25:50]
        ignored = Api(srv.base_url).ok("get", "/devices", limit=500, offset=25)
        assert [d["serialNumber"] for d in ignored["items"]] == honest_serials[:25]
    with start_server(size=SIZE, contract=CONTRACTS["cursor"]) as srv:
        first = Api(srv.base_url).ok("get", "/devices")
        assert len(first["items"]) == 25 and first["nextCursor"] == cursor_token(25)
        last = Api(srv.base_url).ok("get", "/devices", cursor=cursor_token(50))
        assert len(last["items"]) == n - 50 and last["nextCursor"] is None
        assert Api(srv.base_url).get("/devices", cursor="nonsense").status_code == 400
    with start_server(size=SIZE, contract=CONTRACTS["unpaged"]) as srv:
        everything = Api(srv.base_url).ok("get", "/devices", limit=5, offset=40)
        assert [d["serialNumber"] for d in everything["items"]] == honest_serials
    with start_server(size=SIZE, contract=CONTRACTS["capped-pages"]) as srv:
        capped = Api(srv.base_url).ok("get", "/devices", limit=500, offset=10)
        assert [d["serialNumber"] for d in capped["items"]] == honest_serials[10:35]


def test_an_unknown_contract_is_one_clear_line():
    r = subprocess.run([sys.executable, "-m", "devmon_sync", "serve", "--contract", "soap"],
                       capture_output=True, text=True, timeout=60)
    assert r.returncode == 2 and "Traceback" not in r.stderr
    assert "unknown contract 'soap'" in r.stderr and "page-total" in r.stderr


# ----------------------------------------------------------------------------- the client

@pytest.mark.parametrize("name", [n for n in CONTRACTS if n != "default"])
def test_the_client_lists_every_device_whatever_the_paging(honest_serials, name):
    with start_server(size=SIZE, contract=CONTRACTS[name]) as srv, \
            ApiClient(srv.base_url, KEY, rate_limit_per_minute=0) as client:
        got = [d["serialNumber"] for d in client.devices()]
        requests = client.requests_sent
        refusals = srv.app.status_counts[400]  # one per option the service does not know
    walks = 1
    if CONTRACTS[name].order_shift:  # the order moves while it is walked: a second walk,
        walks, got = 2, sorted(got)  # and the order is the service's of the moment
    assert got == honest_serials, f"{name}: {len(got)} of {len(honest_serials)} devices"
    assert refusals <= len(CONTRACTS[name].refused_options)
    assert requests <= walks * (len(honest_serials) // 25 + 2) + refusals, \
        f"{name}: {requests} requests"


@pytest.mark.parametrize("name", ["page-total", "unpaged", "capped-pages"])
def test_a_sync_through_another_paging_gives_the_same_mirror(tmp_path, name):
    with start_server(size=SIZE) as srv:
        assert sync(srv.base_url, tmp_path / "honest.duckdb").status == "ok"
    with start_server(size=SIZE, contract=CONTRACTS[name]) as srv:
        assert sync(srv.base_url, tmp_path / f"{name}.duckdb").status == "ok"
    assert snapshot(tmp_path / f"{name}.duckdb") == snapshot(tmp_path / "honest.duckdb")


# ----------------------------------------------------------------------------- no loop

def _walk(answers) -> tuple[list, int]:
    """Items a PageWalk lists from canned answers, and the requests it made."""
    from devmon_sync.client.paging import PageWalk

    walk, items, asked = PageWalk(key=lambda d: d["serialNumber"], limit=3), [], 0
    ask = walk.first()
    while ask is not None:
        new, ask = walk.advance(answers(ask, asked))
        items += new
        asked += 1
        assert asked < 50, "the walk loops"
    return items, asked


def _devices(*serials) -> list[dict]:
    return [{"serialNumber": s} for s in serials]


def test_a_service_ignoring_limit_and_offset_is_read_once_not_forever():
    """One big page, whatever is asked: the second answer brings nothing new and ends it."""
    items, asked = _walk(lambda ask, i: {"items": _devices(*"ABCDEFG")})
    assert [d["serialNumber"] for d in items] == list("ABCDEFG") and asked == 1


def test_a_page_that_repeats_ends_the_walk_without_doubles():
    """A service that answers every offset with the first full page."""
    items, asked = _walk(lambda ask, i: {"items": _devices("A", "B", "C")})
    assert [d["serialNumber"] for d in items] == ["A", "B", "C"] and asked == 2


def test_a_cursor_that_never_ends_stops_when_nothing_is_new():
    items, asked = _walk(lambda ask, i: {"items": _devices("A", "B"), "nextCursor": "again"})
    assert len(items) == 2 and asked == 2


def test_a_link_to_another_host_is_not_followed():
    """A next-page link must stay on the service: the key is never sent elsewhere."""
    from devmon_sync.client import ApiError

    with start_server(size=SIZE) as srv, ApiClient(srv.base_url, KEY,
                                                   rate_limit_per_minute=0) as client:
        with pytest.raises(ApiError, match="outside this service"):
            client._own_link("https://elsewhere.example/v1/devices?cursor=x", "/devices")
        assert client._own_link(srv.base_url + "/devices?cursor=x", "/devices") == \
            ("/devices", {"cursor": "x"})


def test_a_silent_page_cap_is_learned_once_and_kept_in_the_mirror(tmp_path):
    """First contact with a service that caps offset pages at 25 whatever is asked: after the
    first short page one more is asked, the cap is learned and stored with the service
    profile, and `devmon status` says so.  Against an honest service the same question
    proves a short page the last, once: the next sync asks for one page."""
    db = tmp_path / "capped.duckdb"
    with start_server(size=SIZE, contract=CONTRACTS["capped-pages"]) as srv:
        first = sync(srv.base_url, db)
        port = srv.port
    with start_server(size=SIZE, contract=CONTRACTS["capped-pages"], port=port) as srv:
        second = sync(srv.base_url, db)
    assert first.status == second.status == "ok"
    status = subprocess.run([sys.executable, "-m", "devmon_sync", "status", "--db", str(db)],
                            capture_output=True, text=True, timeout=60)
    assert "at most 25 items a page" in status.stdout, status.stdout
    with start_server(size=SIZE) as srv:  # an honest service: a short page is proved last
        db2 = tmp_path / "honest.duckdb"
        sync(srv.base_url, db2)
        again = sync(srv.base_url, db2)
    assert again.requests == 4, "sites, devices, groups, latest: no second devices page"
    status = subprocess.run([sys.executable, "-m", "devmon_sync", "status", "--db", str(db2)],
                            capture_output=True, text=True, timeout=60)
    assert "a page shorter than asked is the last" in status.stdout, status.stdout


def _offset_service(serials: str, cap: int):
    """Canned answers of an offset service that holds at most ``cap`` items a page."""
    def answer(ask, i):
        offset, limit = ask["offset"], ask["limit"]
        return {"items": _devices(*serials[offset:offset + min(limit, cap)])}
    return answer


def test_a_short_page_is_checked_once_then_known():
    from devmon_sync.client.paging import PageWalk

    capped = PageWalk(key=lambda d: d["serialNumber"], limit=3)
    asked, ask, items = 0, capped.first(), []
    while ask is not None:
        new, ask = capped.advance(_offset_service("ABCDEFG", cap=2)(ask, asked))
        items += new
        asked += 1
    assert [d["serialNumber"] for d in items] == list("ABCDEFG")
    assert capped.known.page_cap == 2 and asked == 4  # pages of 2, 2, 2 and 1
    items, asked = _walk(_offset_service("AB", cap=10))
    assert len(items) == 2 and asked == 2  # the short page, and the empty one proving it last

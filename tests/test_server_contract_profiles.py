"""Issue 14, point 7: the reference server realises the spec's unshown points in other ways.

Beyond paging (tests/test_contracts.py): refusals worded otherwise and carried by 422, waits
asked by 403 without Retry-After, paths without ``/v1``, options refused or silently
ignored, answers silently truncated.  Each is checked here over HTTP, and ``default`` is
checked to answer byte for byte as before.
"""

from __future__ import annotations

from urllib.parse import urlsplit

import pytest
import requests
from support import Api, start_server

from devmon_sync import api_contract as contract
from devmon_sync.server import WorldSize
from devmon_sync.server.contracts import CONTRACTS, OPTIONS, SUMMARIES, Contract

SIZE = WorldSize(sites=2, devices=8, days=40)
SMALL = contract.ResponseLimits(max_points=3000, max_epochs=400, max_range_days=20)
START, END = "2025-12-01T00:00:00.000Z", "2025-12-31T00:00:00.000Z"  # 30 days: too long


def _one_parameter(api: Api) -> str:
    devices = api.ok("get", "/devices", includeSensors="true")["items"]
    return next(p["uuid"] for d in devices for s in d["sensors"] for p in s["parameters"])


def _refusals(base_url: str) -> dict[str, requests.Response]:
    api = Api(base_url)
    uuid = _one_parameter(api)
    return {
        "range": api.post("/sensor-data", {"parameterUuids": [uuid], "startDate": START,
                                           "endDate": END}),
        "points": api.post("/sensor-data", {"deviceSerialNumbers": [
                                                d["serialNumber"] for d in
                                                api.ok("get", "/devices")["items"]],
                                            "startDate": "2025-12-12T00:00:00.000Z",
                                            "endDate": END}),
        "epochs": api.post("/sensor-data/gnss", {"startDate": "2025-12-12T00:00:00.000Z",
                                                 "endDate": END}),
    }


def test_default_refusals_are_worded_as_before():
    with start_server(size=SIZE, limits=SMALL) as srv:
        got = _refusals(srv.base_url)
    assert {k: r.status_code for k, r in got.items()} == {"range": 400, "points": 400,
                                                          "epochs": 400}
    assert got["range"].json()["message"] == (
        "Date range too long: 30.00 days asked, the limit is 20 days per request. "
        "Split the range into shorter windows.")
    assert got["points"].json()["message"].startswith("Too many points: the request would "
                                                      "return up to ")
    assert got["points"].json()["message"].endswith(
        " points, the limit is 3000 per request. Ask for a shorter date range or fewer "
        "parameters.")
    assert got["epochs"].json()["message"].endswith(
        " epochs, the limit is 400 per request. Ask for a shorter date range or fewer devices.")


def test_plain_refusals_come_as_422_in_other_words():
    with start_server(size=SIZE, limits=SMALL, contract=CONTRACTS["plain-refusals"]) as srv:
        got = _refusals(srv.base_url)
    assert {k: r.status_code for k, r in got.items()} == {"range": 422, "points": 422,
                                                          "epochs": 422}
    assert got["range"].json() == {"message": "The time range may not exceed 20 days"}
    assert got["points"].json() == {
        "message": "Requested data exceeds the maximum of 3000 data points per request"}
    assert got["epochs"].json() == {
        "message": "Requested data exceeds the maximum of 400 epochs per request"}


@pytest.mark.parametrize("name, status, message, header", [
    ("default", 429, "Rate limit exceeded: the limit is 2 requests per minute. Retry after ",
     True),
    ("wait-403", 403, "Please wait ", False),
])
def test_a_rate_limit_is_carried_as_the_contract_says(name, status, message, header):
    with start_server(size=SIZE, rate_limit_per_minute=2, contract=CONTRACTS[name]) as srv:
        api = Api(srv.base_url)
        answers = [api.get("/sites") for _ in range(3)]
    assert [r.status_code for r in answers] == [200, 200, status]
    refused = answers[-1]
    assert refused.json()["message"].startswith(message)
    assert refused.json()["message"].endswith(" seconds." if name == "wait-403" else "seconds.")
    assert ("Retry-After" in refused.headers) is header


def test_no_v1_serves_at_the_root_and_says_so_elsewhere():
    with start_server(size=SIZE, contract=CONTRACTS["no-v1"]) as srv:
        assert urlsplit(srv.base_url).path == ""
        root = Api(srv.base_url)
        assert len(root.ok("get", "/sites")["items"]) == 2
        assert root.get("/openapi.json").status_code == 200
        wrong = root.get("/v1/sites")
    assert wrong.status_code == 404
    assert wrong.json()["message"] == ("No endpoint /v1/sites. The API lives at the root; "
                                       "see /openapi.json.")
    with start_server(size=SIZE) as srv:
        host = srv.base_url.removesuffix("/v1")
        wrong = Api(host).get("/sites")
    assert wrong.json()["message"] == ("No endpoint /sites. The API lives under /v1; "
                                       "see /v1/openapi.json.")


def _devices(srv, **params) -> requests.Response:
    return Api(srv.base_url).get("/devices", includeSensors="true", **params)


def test_strict_options_refuse_each_option_by_name():
    with start_server(size=SIZE, contract=CONTRACTS["strict-options"]) as srv:
        api = Api(srv.base_url)
        assert _devices(srv).status_code == 200
        refused = _devices(srv, includeInactiveSensors="true")
        groups = api.get("/device-groups", includeDevices="true")
        sites = api.get("/sites", includeDevices="true")  # the spec shows this one
    assert refused.status_code == 400
    assert refused.json()["message"].startswith(
        "Unknown query parameter 'includeInactiveSensors'; accepted: ")
    assert groups.status_code == 400 and "'includeDevices'" in groups.json()["message"]
    assert sites.status_code == 200


def test_ignored_options_answer_as_if_not_asked():
    asked = dict(includeInactiveSensors="true", includeFormulas="true", includeInternal="true")
    with start_server(size=SIZE) as srv:
        honest_with, honest_without = _devices(srv, **asked), _devices(srv)
        honest_groups = Api(srv.base_url).get("/device-groups", includeDevices="true",
                                              includeUngrouped="true")
    with start_server(size=SIZE, contract=CONTRACTS["ignored-options"]) as srv:
        ignored = _devices(srv, **asked)
        groups = Api(srv.base_url).get("/device-groups", includeDevices="true",
                                       includeUngrouped="true")
        bare_groups = Api(srv.base_url).get("/device-groups")
    assert ignored.status_code == 200 and honest_with.content != honest_without.content
    assert ignored.content == honest_without.content
    assert groups.status_code == 200 and groups.content == bare_groups.content
    assert groups.content != honest_groups.content


def test_silent_truncation_keeps_the_oldest_and_says_nothing():
    body = {"startDate": "2025-12-12T00:00:00.000Z", "endDate": END}
    with start_server(size=SIZE) as srv:
        api = Api(srv.base_url)
        serials = [d["serialNumber"] for d in api.ok("get", "/devices")["items"]]
        full = api.ok("post", "/sensor-data", {"deviceSerialNumbers": serials, **body})
        full_gnss = api.ok("post", "/sensor-data/gnss", body)
    truncating = Contract("t", silent_cap_points=500, silent_cap_epochs=100)
    with start_server(size=SIZE, contract=truncating) as srv:
        api = Api(srv.base_url)
        cut = api.ok("post", "/sensor-data", {"deviceSerialNumbers": serials, **body})
        cut_gnss = api.ok("post", "/sensor-data/gnss", body)
    points = sum(len(i["data"] or []) for i in full["items"])
    epochs = sum(len(i["data"] or []) for i in full_gnss["items"])
    assert points > 500 and epochs > 100
    assert sum(len(i["data"] or []) for i in cut["items"]) == 500
    assert sum(len(i["data"] or []) for i in cut_gnss["items"]) == 100
    assert set(cut) == set(full)  # no field says the answer was cut


def test_every_contract_named_in_the_issue_exists_and_is_described():
    assert {"default", "page-total", "cursor", "capped-pages", "silent-truncation",
            "strict-options", "plain-refusals", "wait-403", "no-v1"} <= set(CONTRACTS)
    assert CONTRACTS["default"] == Contract()
    assert list(SUMMARIES) == list(CONTRACTS)  # devmon serve --help names each


@pytest.mark.parametrize("bad, says", [
    (dict(too_large_wording="rude"), "too_large_wording must be one of default, plain"),
    (dict(rate_limit_wording="x"), "rate_limit_wording must be one of default, wait"),
    (dict(refused_options=frozenset({"limit"})), "only these options"),
    (dict(prefix="v1"), "prefix must be empty or like /v1"),
    (dict(silent_cap_points=-1), "silent_cap_points must be 0 (off) or positive"),
])
def test_a_contract_that_makes_no_sense_is_refused(bad, says):
    with pytest.raises(ValueError, match=says.replace("(", r"\(").replace(")", r"\)")):
        Contract(**bad)


def test_options_that_can_be_refused_are_the_optional_ones():
    assert OPTIONS == {"includeInactiveSensors", "includeFormulas", "includeInternal",
                       "includeDevices", "includeUngrouped"}

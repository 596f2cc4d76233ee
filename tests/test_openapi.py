"""The reference server's OpenAPI document: valid OpenAPI 3, served as is, and true to the server.

Schemathesis generates requests for every operation from the document (valid and invalid ones),
sends them to a live reference server on a loopback port, and checks every answer against the
document: no 5xx, only documented status codes, content types and headers, and bodies as the
schemas describe.  Random UUIDs and serial numbers never reach real entities, so a second set of
hand-written requests does (every device, group and kind of sensor), together with the 401,
403, 404 and 429 answers, through the same checks.

Where the server contradicts the specification the document keeps the specification's word and
each known server bug has ``xfail(strict=True)`` tests naming it, which fail only in exactly the
way that bug makes them fail: fixing the server turns them into XPASS failures, the cue to drop
the marks.  The generated requests count the examples that meet a known bug (and nothing else)
instead of stopping there, so they keep looking for other problems in the same operation.
"""

from __future__ import annotations

import json
from datetime import datetime, timedelta, timezone
from pathlib import Path

import jsonschema_rs
import pytest
import requests
import schemathesis
from support import KEY, NOW, SITE_KEY, device_by_role, start_server
from schemathesis.checks import not_a_server_error
from devmon_sync.client.refusals import wait_seconds
from schemathesis.core import NOT_SET
from schemathesis.specs.openapi.checks import (
    content_type_conformance,
    response_headers_conformance,
    response_schema_conformance,
    status_code_conformance,
)

import devmon_sync.server
from devmon_sync import api_contract as contract

DOC_PATH = Path(devmon_sync.server.__file__).with_name("openapi.json")
DOC = json.loads(DOC_PATH.read_text(encoding="utf-8"))
MAX_EXAMPLES = 40  # per operation, on top of schemathesis' boundary ("coverage") cases
CHECKS = [not_a_server_error, status_code_conformance, content_type_conformance,
          response_schema_conformance, response_headers_conformance]
OPERATIONS = {("GET", "/sites"), ("GET", "/devices"), ("GET", "/devices/{sn}"),
              ("GET", "/device-groups"), ("GET", "/device-groups/{uuid}"),
              ("GET", "/sensors/{uuid}"), ("POST", "/sensor-data"),
              ("POST", "/sensor-data/latest"), ("POST", "/sensor-data/gnss")}
HEADER = contract.API_KEY_HEADER


def _load(doc: dict):
    config = schemathesis.Config()
    config.projects.default.generation.update(
        max_examples=MAX_EXAMPLES, deterministic=True, database="none")
    # Methods the document does not declare are probed only where the server answers them
    # itself (405 with a JSON message); test_undeclared_methods_get_a_json_error has the rest.
    config.projects.default.phases.coverage.unexpected_methods = {
        "get", "post", "put", "delete", "patch"}
    return schemathesis.openapi.from_dict(doc, config=config)


schema = _load(DOC)


# --------------------------------------------------------------------------- fixtures

@pytest.fixture(scope="module")
def live():
    """A reference server with a fixed clock and no rate limit, on a free loopback port.

    Two keys: one that sees everything, one that sees only the second site.
    """
    with start_server() as probe:
        second_site = requests.get(probe.base_url + "/sites", headers={HEADER: KEY},
                                   timeout=60).json()["items"][1]["uuid"]
    srv = start_server(api_keys={KEY: None, SITE_KEY: frozenset({second_site})})
    srv.second_site = second_site
    yield srv
    srv.stop()


def call(live, method: str, path: str, *, key: str | None = KEY, path_parameters=None,
         query=None, body=NOT_SET, checks=CHECKS):
    """One request built from the document's operation, sent and checked like generated ones."""
    case = schema[path][method].Case(path_parameters=path_parameters, query=query, body=body,
                                     media_type="application/json" if method == "POST"
                                     else None)
    return case.call_and_validate(base_url=live.base_url, headers={HEADER: key} if key else {},
                                  checks=checks, timeout=60)


@pytest.fixture(scope="module")
def world(live):
    """Real entities of the live server, read without checks (the tests check them)."""
    s = requests.Session()
    s.headers[HEADER] = KEY
    base = live.base_url

    def get(path, **params):
        r = s.get(base + path, params=params, timeout=60)
        r.raise_for_status()
        return r.json()

    def post(path, body):
        r = s.post(base + path, json=body, timeout=60)
        r.raise_for_status()
        return r.json()

    devices = get("/devices", includeSensors="true", includeInactiveSensors="true",
                  includeFormulas="true", includeInternal="true",
                  limit=contract.PAGE_SIZE_MAX)["items"]
    groups = get("/device-groups", includeDevices="true")["grouped"]
    visible = {i["sensorUuid"] for i in post("/sensor-data/latest", {})["items"]}
    with_deleted = {i["sensorUuid"] for i in post("/sensor-data/latest",
                                                  {"includeDeleted": True})["items"]}
    return {"devices": devices, "groups": groups, "deleted_sensors": sorted(with_deleted - visible),
            "second_site": live.second_site}


def _sensors(world):
    return [s for d in world["devices"] for s in d.get("sensors", [])]


def _gnss_rover(world, scenario="stable"):
    return device_by_role(world["devices"], f"GNSS {scenario}")


def _gnss_params(device, names=("lat", "lon", "eh", "dE")):
    sensor = next(s for s in device["sensors"] if s["name"] == "gnss")
    return [p for p in sensor["parameters"] if p["name"] in names]


def _outside(world) -> dict:
    """A device the restricted key may not see (not at the second site)."""
    return next(d for d in world["devices"] if d["site"] and d["site"]["uuid"] !=
                world["second_site"] and d.get("sensors"))


def _iso(dt: datetime) -> str:
    return dt.strftime("%Y-%m-%dT%H:%M:%SZ")


# --------------------------------------------------------------------------- the document

def test_document_is_valid_openapi_3():
    assert DOC["openapi"] == "3.0.3"
    assert DOC["info"]["version"] == "1.0.0"
    assert [s["url"] for s in DOC["servers"]] == [contract.API_PREFIX]
    schema.validate()  # against the OpenAPI 3.0 meta-schema; raises on any violation
    broken = json.loads(json.dumps(DOC))
    del broken["paths"]["/sites"]["get"]["responses"]["200"]["description"]
    with pytest.raises(jsonschema_rs.ValidationError):
        _load(broken).validate()

    def refs(node):
        if isinstance(node, dict):
            yield from ([node["$ref"]] if "$ref" in node else [])
            for value in node.values():
                yield from refs(value)
        elif isinstance(node, list):
            for value in node:
                yield from refs(value)

    for ref in set(refs(DOC)):  # every reference resolves inside the document
        target = DOC
        for part in ref.removeprefix("#/").split("/"):
            target = target[part]
        assert isinstance(target, dict), ref


def test_document_covers_every_operation_with_the_api_key():
    assert {(m.upper(), p) for p, item in DOC["paths"].items() for m in item} == OPERATIONS
    assert DOC["security"] == [{"ApiKeyAuth": []}]
    scheme = DOC["components"]["securitySchemes"]["ApiKeyAuth"]
    assert (scheme["type"], scheme["in"], scheme["name"]) == ("apiKey", "header", HEADER)
    for path, item in DOC["paths"].items():
        for method, operation in item.items():
            assert "security" not in operation, (method, path)
            assert {"200", "400", "401", "429", "500"} <= set(operation["responses"])


def test_document_states_the_contract_choices():
    """Parameter names, bounds and limits are api_contract's, so the two cannot drift."""
    params = DOC["components"]["parameters"]

    def names(path):
        return {params[p["$ref"].rsplit("/", 1)[1]]["name"]
                for p in DOC["paths"][path]["get"].get("parameters", [])}

    assert names("/devices") == set(contract.DEVICES_QUERY.values())
    assert names("/device-groups") == set(contract.DEVICE_GROUPS_QUERY.values())
    assert names("/sites") == {"uuids", "includeDevices", "includeSensors"}
    limit, offset = params["DevicesLimit"]["schema"], params["DevicesOffset"]["schema"]
    assert (limit["minimum"], limit["maximum"], limit["default"]) == (
        1, contract.PAGE_SIZE_MAX, contract.PAGE_SIZE_DEFAULT)
    assert (offset["minimum"], offset["default"]) == (0, 0)
    for p in params.values():
        if p["schema"].get("type") == "array":
            assert (p["style"], p["explode"]) == ("form", True)
            assert p["schema"]["maxItems"] == contract.DEFAULT_LIMITS.max_selector_items
        if p["name"].startswith("include"):
            assert p["schema"]["enum"] == [contract.QUERY_TRUE, contract.QUERY_FALSE]
    schemas = DOC["components"]["schemas"]
    aggregation = schemas["Aggregation"]["properties"]
    assert aggregation["interval"]["enum"] == list(contract.AGGREGATION_INTERVALS_S)
    assert aggregation["function"]["enum"] == list(contract.AGGREGATION_FUNCTIONS)
    for name in ("SensorDataQuery", "LatestQuery", "GnssQuery", "Aggregation"):
        assert schemas[name]["additionalProperties"] is False
    limited = DOC["components"]["responses"]["TooManyRequests"]
    assert limited["headers"]["Retry-After"]["required"] is True
    assert str(contract.RATE_LIMIT_PER_MINUTE) in limited["description"]
    for item in DOC["paths"].values():
        for operation in item.values():
            assert operation["responses"]["429"]["$ref"].endswith("/TooManyRequests")
            assert str(contract.RATE_LIMIT_STATUS) in operation["responses"]


def test_document_is_served_without_a_key_and_equals_the_file(live):
    r = requests.get(live.base_url + "/openapi.json", timeout=60)
    assert r.status_code == 200
    assert r.headers["Content-Type"].startswith("application/json")
    assert r.content == DOC_PATH.read_bytes()
    assert r.json() == DOC


# --------------------------------------------------------------------------- generated requests

@schema.parametrize()
def test_generated_requests_conform(case, live):
    case.call_and_validate(base_url=live.base_url, headers={HEADER: KEY}, checks=CHECKS,
                           timeout=60)


# --------------------------------------------------------------------------- real entities

def test_device_lists_conform_and_show_every_optional_key(live, world):
    everything = {"includeSensors": "true", "includeInactiveSensors": "true",
                  "includeFormulas": "true", "includeInternal": "true",
                  "limit": str(contract.PAGE_SIZE_MAX)}
    items = call(live, "GET", "/devices", query=everything).json()["items"]
    text = json.dumps(items)
    # The document's optional and nullable keys all occur, so the checks above saw them.
    for key in ('"lteTxMode"', '"powerSource"', '"_internal"', f'"{contract.FORMULA_FIELD}"',
                '"lastFaultSummary"', '"lastFaultTimestamp"', '"queuedCommand": {',
                '"errors": [{', '"error": {', '"isActive": false', '"attributes": [{',
                '"serialNumber": null', '"gnss": {', '"baseStation": {', '"metadata": {'):
        assert key in text, key
    assert {d["deviceKind"] for d in items} == {"physical", "weather", "virtual"}
    assert {m["type"] for d in items for m in d["modems"]} == {"lte", "iridium", "myriota"}
    call(live, "GET", "/devices")
    page = call(live, "GET", "/devices", query={"limit": "5", "offset": "5"}).json()["items"]
    assert [d["serialNumber"] for d in page] == [d["serialNumber"] for d in items[5:10]]
    group = world["groups"][0]
    site = next(d["site"]["uuid"] for d in items if d["site"])
    serials = [d["serialNumber"] for d in items[:3]]
    chosen = call(live, "GET", "/devices", query={
        "deviceKind": "physical", "groupUuid": group["uuid"], "siteUuid": site,
        "serialNumbers": serials, "includeSensors": "true"}).json()["items"]
    assert {d["serialNumber"] for d in chosen} <= set(serials)
    assert call(live, "GET", "/devices", query={"limit": "0"}).status_code == 400
    assert call(live, "GET", "/devices", query={"nope": "1"}).status_code == 400


def test_every_device_conforms(live, world):
    for d in world["devices"]:
        r = call(live, "GET", "/devices/{sn}", path_parameters={"sn": d["serialNumber"]})
        [item] = r.json()["items"]
        assert item["serialNumber"] == d["serialNumber"]
    assert call(live, "GET", "/devices/{sn}", path_parameters={"sn": "NO-SUCH-1"}
                ).status_code == 404
    outside = _outside(world)["serialNumber"]
    assert call(live, "GET", "/devices/{sn}", key=SITE_KEY, path_parameters={"sn": outside}
                ).status_code == 403


def test_device_groups_conform(live, world):
    flags = {"includeSensors": "true", "includeDevices": "true", "includeUngrouped": "true"}
    body = call(live, "GET", "/device-groups", query=flags).json()
    assert body["grouped"] and body["ungrouped"]
    call(live, "GET", "/device-groups")
    child = world["groups"][0]["children"][0]["uuid"]
    picked = call(live, "GET", "/device-groups",
                  query={"uuids": [child, world["groups"][1]["uuid"]]}).json()["grouped"]
    assert [g["uuid"] for g in picked] == [child, world["groups"][1]["uuid"]]
    call(live, "GET", "/device-groups", key=SITE_KEY, query=flags)
    for root in world["groups"]:
        call(live, "GET", "/device-groups/{uuid}", path_parameters={"uuid": root["uuid"]})
    call(live, "GET", "/device-groups/{uuid}", path_parameters={"uuid": child})
    visible = {g["uuid"] for g in call(live, "GET", "/device-groups", key=SITE_KEY
                                       ).json()["grouped"]}
    hidden = next(g["uuid"] for g in world["groups"] if g["uuid"] not in visible)
    assert call(live, "GET", "/device-groups/{uuid}", key=SITE_KEY,
                path_parameters={"uuid": hidden}).status_code == 403
    assert call(live, "GET", "/device-groups/{uuid}",
                path_parameters={"uuid": "00000000-0000-4000-8000-000000000000"}
                ).status_code == 404
    assert call(live, "GET", "/device-groups/{uuid}", path_parameters={"uuid": "not-a-uuid"}
                ).status_code == 400


def test_every_kind_of_sensor_conforms(live, world):
    sensors = _sensors(world)
    picks = {
        "attributes": next(s for s in sensors if s["attributes"]),
        "no physical sensor": next(s for s in sensors if s["physicalSensor"]["uuid"] is None),
        "inactive": next(s for s in sensors if not s["isActive"]),
        "gnss": next(s for s in sensors if s["name"] == "gnss"),
        "derived": next(s for s in sensors
                        if any(p["sourceType"] == "derived" for p in s["parameters"])),
    }
    for what, sensor in picks.items():
        got = call(live, "GET", "/sensors/{uuid}", path_parameters={"uuid": sensor["uuid"]})
        assert got.json()["uuid"] == sensor["uuid"], what
    assert world["deleted_sensors"]
    assert call(live, "GET", "/sensors/{uuid}",
                path_parameters={"uuid": world["deleted_sensors"][0]}).status_code == 404
    outside = _outside(world)["sensors"][0]["uuid"]
    assert call(live, "GET", "/sensors/{uuid}", key=SITE_KEY,
                path_parameters={"uuid": outside}).status_code == 403


def test_sensor_data_conforms(live, world):
    rover = _gnss_rover(world)
    lat_lon = _gnss_params(rover)
    end = NOW - timedelta(hours=1)
    window = {"startDate": _iso(end - timedelta(days=2)), "endDate": _iso(end)}
    items = call(live, "POST", "/sensor-data", body={
        "parameterUuids": [p["uuid"] for p in lat_lon], "orderBy": "desc",
        "disableRounding": True, **window}).json()["items"]
    assert len(items) == len(lat_lon) and all(i["data"] for i in items)
    logger = device_by_role(world["devices"], "Piezometer")
    counted = call(live, "POST", "/sensor-data", body={
        "deviceSerialNumbers": [logger["serialNumber"]],
        "parameterPaths": [lat_lon[0]["parameterPath"]],
        "aggregation": {"interval": "6h", "function": "count"}, **window}).json()["items"]
    assert len(counted) > 1 and any(i["data"] for i in counted)
    assert all(isinstance(pt["value"], (int, float)) for i in counted for pt in i["data"])
    assert call(live, "POST", "/sensor-data", body={}).status_code == 400
    assert call(live, "POST", "/sensor-data", body={
        "sensorUuids": [rover["sensors"][0]["uuid"]], "startDate": "2025-01-01T00:00:00Z",
        "endDate": "2025-06-01T00:00:00Z"}).status_code == 400
    outside = _outside(world)["serialNumber"]
    assert call(live, "POST", "/sensor-data", key=SITE_KEY,
                body={"deviceSerialNumbers": [outside]}).status_code == 403


def test_latest_sensor_data_conforms(live, world):
    rover = _gnss_rover(world)
    params = _gnss_params(rover)
    items = call(live, "POST", "/sensor-data/latest", body={
        "parameterUuids": [params[0]["uuid"]],
        "parameterPaths": [p["parameterPath"] for p in params[1:]]}).json()["items"]
    assert len(items) == len(params) and all(len(i["data"]) == 1 for i in items)
    base = device_by_role(world["devices"], "GNSS base")  # a GNSS base has no epochs
    items = call(live, "POST", "/sensor-data/latest", body={
        "legacyDeviceIds": [base["legacyDeviceId"]],
        "sensorUuids": [s["uuid"] for s in base["sensors"] if s["name"] == "gnss"]}
                 ).json()["items"]
    assert items and not any(i["data"] for i in items if i["sensorAlias"] == "GNSS")
    outside = _outside(world)["serialNumber"]
    assert call(live, "POST", "/sensor-data/latest", key=SITE_KEY,
                body={"deviceSerialNumbers": [outside]}).status_code == 403
    assert call(live, "POST", "/sensor-data/latest", body={"nope": 1}).status_code == 400


def test_gnss_solutions_conform(live, world):
    items = call(live, "POST", "/sensor-data/gnss", body={}).json()["items"]
    assert items and any(i["data"] for i in items)
    outliers = _gnss_rover(world, "outliers")
    start = (NOW - timedelta(days=40)).astimezone(timezone(timedelta(hours=2)))
    items = call(live, "POST", "/sensor-data/gnss", body={
        "deviceSerialNumbers": [outliers["serialNumber"]], "includeDeleted": True,
        "orderBy": "desc", "startDate": start.isoformat(),
        "endDate": _iso(NOW - timedelta(days=10))}).json()["items"]
    assert len(items) == 1 and len(items[0]["data"]) > 100
    edge = call(live, "POST", "/sensor-data/gnss",
                body={"legacyDeviceIds": [9007199254740991]}).json()["items"]
    assert [i["legacyDeviceId"] for i in edge] == [9007199254740991]
    assert call(live, "POST", "/sensor-data/gnss", key=SITE_KEY,
                body={"deviceSerialNumbers": [outliers["serialNumber"]]}).status_code == 403
    assert call(live, "POST", "/sensor-data/gnss",
                body={"endDate": "2026-01-01T00:00:00"}).status_code == 400


@pytest.mark.parametrize("method,path", sorted(OPERATIONS))
def test_missing_or_wrong_key_is_401(live, method, path):
    params = {"sn": "DM24-10000", "uuid": "00000000-0000-4000-8000-000000000000"}
    path_parameters = {k: v for k, v in params.items() if "{" + k + "}" in path} or None
    body = {} if method == "POST" else NOT_SET
    for key in (None, "not-a-key"):
        r = call(live, method, path, key=key, path_parameters=path_parameters, body=body)
        assert r.status_code == 401
        assert r.json()["message"]


def test_rate_limit_is_429_with_retry_after():
    srv = start_server(rate_limit_per_minute=1)
    try:
        assert call(srv, "GET", "/devices", query={"limit": "1"}).status_code == 200
        r = call(srv, "GET", "/devices", query={"limit": "1"})
        assert r.status_code == contract.RATE_LIMIT_STATUS
        [wait] = r.headers["retry-after"]  # schemathesis: lower-case names, lists of values
        assert wait_seconds(r.json()["message"]) == int(wait) >= 1
    finally:
        srv.stop()


# --------------------------------------------------------------------------- regressions
# Server bugs the generated run once found, each pinned by a test of its own.

@pytest.mark.parametrize("query", [None, {"includeDevices": "true", "includeSensors": "true"}],
                         ids=["plain", "with-devices-and-sensors"])
def test_sites_conform(live, query):
    """Site.sharedBy is optional and not nullable: a server once sent null."""
    call(live, "GET", "/sites", query=query)


def test_sensor_data_of_a_faulty_sample_conforms(live, world):
    """The newest faulty sample of a parameter, asked for alone: a null value, documented."""
    p = next(p for s in _sensors(world) for p in s["parameters"] if "lastFaultTimestamp" in p)
    at = p["lastFaultTimestamp"].replace(".000Z", "Z")
    r = call(live, "POST", "/sensor-data",
             body={"parameterUuids": [p["uuid"]], "startDate": at, "endDate": at})
    assert r.json()["items"][0]["data"][0]["value"] is None


def test_latest_of_everything_conforms(live):
    """Every parameter's newest point; one of them is a faulty (null) sample in this world."""
    call(live, "POST", "/sensor-data/latest", body={})


@pytest.mark.parametrize("interval", [[], {}], ids=["array", "object"])
def test_aggregation_interval_of_the_wrong_type_is_400(live, world, interval):
    sn = world["devices"][0]["serialNumber"]
    r = call(live, "POST", "/sensor-data", body={
        "deviceSerialNumbers": [sn], "aggregation": {"interval": interval, "function": "avg"}})
    assert r.status_code == 400


@pytest.mark.parametrize("field,value", [("endDate", "9999-12-31T23:59:59-01:00"),
                                         ("startDate", "0001-01-01T00:00:00+01:00")])
def test_gnss_date_out_of_range_is_400(live, field, value):
    r = call(live, "POST", "/sensor-data/gnss", body={field: value})
    assert r.status_code == 400


def test_deeply_nested_body_is_400(live):
    depth = 100_000
    r = requests.post(live.base_url + "/sensor-data/latest", data="[" * depth + "]" * depth,
                      headers={HEADER: KEY, "Content-Type": "application/json"}, timeout=60)
    assert r.status_code == 400 and r.json()["message"]


@pytest.mark.parametrize("body", [{"parameterPaths": {}}, {"parameterUuids": ""},
                                  {"legacyDeviceIds": 0}, {"sensorUuids": False}],
                         ids=["object", "string", "number", "boolean"])
def test_latest_refuses_selectors_of_the_wrong_type(live, body):
    r = requests.post(live.base_url + "/sensor-data/latest", json=body, headers={HEADER: KEY},
                      timeout=60)
    assert r.status_code == 400 and r.json()["message"]


@pytest.mark.parametrize("method", ["HEAD", "OPTIONS", "TRACE"])
def test_undeclared_methods_get_a_json_error(live, method):
    """PUT, DELETE and PATCH get 405 with a JSON message (probed by the generated tests)."""
    r = requests.request(method, live.base_url + "/sites", headers={HEADER: KEY}, timeout=60)
    assert r.status_code == 405
    if method != "HEAD":
        assert r.headers["Content-Type"].startswith("application/json")
        assert r.json()["message"]


def test_sites_filter_matches_upper_case_uuids(live):
    uuid = live.second_site
    r = requests.get(live.base_url + "/sites", params={"uuids": uuid.upper()},
                     headers={HEADER: KEY}, timeout=60)
    assert r.status_code == 200
    assert [s["uuid"] for s in r.json()["items"]] == [uuid]

"""The reference server's HTTP behaviour: keys, errors, rate limit, faults, determinism, CLI."""

from __future__ import annotations

import socket
import subprocess
import sys
import time

import pytest
import requests
from support import KEY, SITE_KEY, Api, serials_in_groups, start_server

from devmon_sync.api_contract import RATE_LIMIT_STATUS
from devmon_sync.client.refusals import wait_seconds
from devmon_sync.server import FaultConfig


def test_missing_or_unknown_key_is_401_with_a_message(server):
    for key in (None, "not-a-key"):
        r = Api(server.base_url, key).get("/sites")
        assert r.status_code == 401
        assert set(r.json()) == {"message"} and "key" in r.json()["message"].lower()


def test_key_header_name_is_case_insensitive(server):
    r = requests.get(server.base_url + "/sites", headers={"X-API-KEY": KEY}, timeout=10)
    assert r.status_code == 200 and r.json()["items"]


@pytest.mark.parametrize("method,path,body,status", [
    ("get", "/devices/NO-SUCH-DEVICE", None, 404),
    ("get", "/sensors/0b7e5c1a-2f43-4a6e-9d1c-3e5f7a9b1c2d", None, 404),
    ("get", "/device-groups/0b7e5c1a-2f43-4a6e-9d1c-3e5f7a9b1c2d", None, 404),
    ("get", "/sensors/not-a-uuid", None, 400),
    ("get", "/device-groups/not-a-uuid", None, 400),
    ("get", "/no-such-endpoint", None, 404),
    ("post", "/sensor-data", {"parameterUuids": ["bad"]}, 400),
    ("post", "/sensor-data", {"deviceSerialNumbers": ["X"], "startDate": "yesterday"}, 400),
    ("post", "/sensor-data", {"deviceSerialNumbers": ["X"], "startDate": "2026-01-01T00:00:00"}, 400),
    ("post", "/sensor-data", {"deviceSerialNumbers": ["X"], "orderBy": "newest"}, 400),
    ("post", "/sensor-data", {"deviceSerialNumbers": "X"}, 400),
    ("post", "/sensor-data", {"deviceSerialNumbers": ["X"], "disableRounding": "yes"}, 400),
    ("post", "/sensor-data", {"deviceSerialNumbers": ["X"], "colour": "red"}, 400),
    ("post", "/sensor-data", {}, 400),
    ("post", "/sensor-data", [1, 2], 400),
    ("post", "/sensor-data/gnss", {"legacyDeviceIds": [9007199254740992]}, 400),
    ("post", "/sensor-data/gnss", {"startDate": "2026-01-02T00:00:00Z",
                                   "endDate": "2026-01-01T00:00:00Z"}, 400),
    ("post", "/sensor-data/latest", {"includeDeleted": 1}, 400),
])
def test_bad_requests_get_clear_errors(api, method, path, body, status):
    r = api.post(path, body) if method == "post" else api.get(path)
    assert r.status_code == status, r.text
    message = r.json()["message"]
    assert isinstance(message, str) and len(message) > 15


def test_bad_query_values_are_400(api):
    assert api.get("/devices", limit="0").status_code == 400
    assert api.get("/devices", limit="100000").status_code == 400
    assert api.get("/devices", deviceKind="weather").status_code == 400
    assert api.get("/devices", includeSensors="yes").status_code == 400
    assert api.get("/devices", pageSize="10").status_code == 400  # unknown parameter
    assert api.get("/sites", uuids="not-a-uuid").status_code == 400


def test_malformed_json_body_is_400_and_connection_stays_usable(api):
    r = api.session.post(api.base_url + "/sensor-data", data=b"{not json",
                         headers={"Content-Type": "application/json"}, timeout=10)
    assert r.status_code == 400 and "JSON" in r.json()["message"]
    assert api.get("/sites").status_code == 200


def test_refused_post_body_does_not_poison_a_kept_alive_connection(server):
    s = requests.Session()  # no key: 401 before the body is looked at
    r = s.post(server.base_url + "/sensor-data", json={"deviceSerialNumbers": ["A"] * 50})
    assert r.status_code == 401
    s.headers["x-api-key"] = KEY
    assert s.get(server.base_url + "/sites").status_code == 200


def test_site_limited_key_sees_only_its_site(server, api, limited_site_uuid, all_devices):
    limited = Api(server.base_url, SITE_KEY)
    sites = limited.ok("get", "/sites")["items"]
    assert [s["uuid"] for s in sites] == [limited_site_uuid]
    devices = limited.ok("get", "/devices", limit=500)["items"]
    assert devices and all(d["site"]["uuid"] == limited_site_uuid for d in devices)
    elsewhere = next(d for d in all_devices if d["site"] and d["site"]["uuid"] != limited_site_uuid)
    assert limited.get(f"/devices/{elsewhere['serialNumber']}").status_code == 403
    sensor = elsewhere["sensors"][0]
    assert limited.get(f"/sensors/{sensor['uuid']}").status_code == 403
    r = limited.post("/sensor-data", {"parameterUuids": [sensor["parameters"][0]["uuid"]]})
    assert r.status_code == 403 and sensor["parameters"][0]["uuid"] in r.json()["message"]
    groups = limited.ok("get", "/device-groups", includeDevices="true")["grouped"]
    seen = serials_in_groups(groups)
    assert seen and seen <= {d["serialNumber"] for d in devices}
    hidden = [g for g in api.ok("get", "/device-groups")["grouped"]
              if g["uuid"] not in {x["uuid"] for x in groups}]
    assert hidden and limited.get(f"/device-groups/{hidden[0]['uuid']}").status_code == 403


def test_rate_limit_states_the_limit_and_the_wait():
    with start_server(rate_limit_per_minute=5, api_keys={KEY: None, "other": None}) as srv:
        api = Api(srv.base_url)
        statuses = [api.get("/sites").status_code for _ in range(6)]
        assert statuses == [200] * 5 + [RATE_LIMIT_STATUS]
        r = api.get("/sites")
        message = r.json()["message"]
        assert "5 requests per minute" in message
        wait = wait_seconds(message)
        assert wait is not None and 1 <= wait <= 60
        assert int(r.headers["Retry-After"]) == wait
        assert Api(srv.base_url, "other").get("/sites").status_code == 200  # per key


def test_injected_errors_follow_a_seeded_sequence():
    def statuses():
        with start_server(faults=FaultConfig(error_rate=0.3, seed=7)) as srv:
            api = Api(srv.base_url)
            return [api.get("/sites").status_code for _ in range(30)]
    first = statuses()
    assert 500 in first and 200 in first
    assert statuses() == first


def test_injected_drops_truncations_and_delays():
    with start_server(faults=FaultConfig(drop_rate=1.0)) as srv:
        with pytest.raises(requests.ConnectionError):
            requests.get(srv.base_url + "/sites", headers={"x-api-key": KEY}, timeout=10)
    with start_server(faults=FaultConfig(truncate_rate=1.0)) as srv:
        with pytest.raises((requests.exceptions.ChunkedEncodingError,
                            requests.exceptions.ConnectionError)):
            requests.get(srv.base_url + "/sites", headers={"x-api-key": KEY}, timeout=10)
    with start_server(faults=FaultConfig(slow_rate=1.0, slow_s=0.4)) as srv:
        t0 = time.monotonic()
        assert Api(srv.base_url).get("/sites").status_code == 200
        assert time.monotonic() - t0 >= 0.4


def test_same_seed_and_clock_give_byte_identical_answers(server):
    requests_to_make = [("get", "/sites", {"includeDevices": "true", "includeSensors": "true"}),
                        ("get", "/devices", {"includeSensors": "true", "limit": "500"}),
                        ("get", "/device-groups", {"includeDevices": "true"}),
                        ("post", "/sensor-data/latest", {}),
                        ("post", "/sensor-data/gnss", {"startDate": "2025-12-25T00:00:00Z"})]
    with start_server() as twin, start_server(seed=43) as other:
        for method, path, arg in requests_to_make:
            a, b, c = (_raw(s, method, path, arg) for s in (server, twin, other))
            assert a == b, path
            assert a != c, path


def _raw(srv, method, path, arg) -> bytes:
    api = Api(srv.base_url)
    r = api.post(path, arg) if method == "post" else api.get(path, **arg)
    assert r.status_code == 200
    return r.content


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def test_cli_serve_prints_base_url_and_key_and_serves():
    port = _free_port()
    proc = subprocess.Popen([sys.executable, "-m", "devmon_sync", "serve", "--port", str(port),
                             "--api-key", "cli-key", "--now", "2026-01-01T00:00:00Z",
                             "--devices", "25", "--days", "10"],
                            stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    try:
        lines = [proc.stdout.readline() for _ in range(3)]
        base = f"http://127.0.0.1:{port}/v1"
        assert any(f"Base URL: {base}" in line for line in lines), lines
        assert any("cli-key" in line and "x-api-key" in line for line in lines), lines
        r = requests.get(base + "/devices", headers={"x-api-key": "cli-key"}, timeout=10)
        assert r.status_code == 200 and len(r.json()["items"]) == 25
    finally:
        proc.terminate()
        proc.wait(10)


def test_cli_port_in_use_is_a_clear_error_without_traceback():
    with socket.socket() as busy:
        busy.bind(("127.0.0.1", 0))
        busy.listen()
        port = busy.getsockname()[1]
        r = subprocess.run([sys.executable, "-m", "devmon_sync", "serve", "--port", str(port)],
                           capture_output=True, text=True, timeout=60)
    assert r.returncode == 2
    assert "--port" in r.stderr and "Traceback" not in r.stderr


@pytest.mark.parametrize("args", [["--now", "tomorrow"], ["--fault-error-rate", "2"],
                                  ["--devices", "0"], ["--api-key", ":site"]])
def test_cli_bad_options_are_clear_errors(args):
    r = subprocess.run([sys.executable, "-m", "devmon_sync", "serve", "--port", "0", *args],
                       capture_output=True, text=True, timeout=60)
    assert r.returncode == 2 and "Traceback" not in r.stderr and "error" in r.stderr

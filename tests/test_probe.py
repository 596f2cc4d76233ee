"""Issue 14, point 6: `devmon probe` measures a service's contract in a handful of requests.

Each test starts a reference server realising the unshown points one way, runs the real
command, and reads its table: the service column must say what that server does.
"""

from __future__ import annotations

import os
import subprocess

import pytest
from support import KEY, start_server
from support import devmon as run_devmon

from devmon_sync import api_contract as contract
from devmon_sync.server import Misbehaviour, WorldSize
from devmon_sync.server.contracts import CONTRACTS

SIZE = WorldSize(sites=2, devices=12, days=40)
MAX_REQUESTS = 15  # the most the command says it asks


def probe(base_url: str, db, *extra, key: str = KEY) -> subprocess.CompletedProcess:
    """The command on a terminal wide enough that no cell wraps (COLUMNS sets the width)."""
    return run_devmon("probe", "--base-url", base_url, "--api-key", key, "--db", str(db),
                      "--rate-limit", "0", *extra, timeout=180,
                      env={**os.environ, "COLUMNS": "1000"})


def row(table: str, topic: str) -> str:
    """The line of one row of the table."""
    return next(line for line in table.splitlines() if line.startswith(topic))


def requests_made(out: str) -> int:
    return int(out.split(": ", 1)[1].split(" requests")[0])


def test_an_honest_service_is_measured_and_nothing_blocks(tmp_path):
    with start_server(size=SIZE) as srv:
        r = probe(srv.base_url.removesuffix("/v1"), tmp_path / "m.duckdb")
    assert r.returncode == 0, r.stderr
    out = r.stdout
    assert requests_made(out) <= MAX_REQUESTS
    assert f"uses {srv.base_url} (not the address given)" in row(out, "API address")
    assert "limit/offset" in row(out, "paging of GET /devices")
    assert "12 devices listed; sites and groups agree" in row(out, "device count")
    assert "honoured" in row(out, "/devices includeFormulas")
    assert "HTTP 400" in row(out, "largest reading answer") and \
        "100,000 points" in row(out, "largest reading answer")
    assert "31 days" in row(out, "longest date range")
    assert "Z (UTC, milliseconds)" in row(out, "timestamps")
    assert "Nothing that blocks an exact sync among what is checked above" in out
    assert "Not checked here: the rate limit" in out and "Traceback" not in r.stderr
    assert "names all" in row(out, "/sensor-data/latest")
    assert "lower case" in row(out, "UUID case")
    assert "7 days before the earliest createdAt" in row(out, "history before createdAt")
    status = run_devmon("status", "--db", str(tmp_path / "m.duckdb"), timeout=60).stdout
    assert "refuses ranges over 31 days" in status, status


def test_a_silent_cap_is_proved_by_asking_the_window_in_halves(tmp_path):
    limits = contract.ResponseLimits(max_points=10**7, max_epochs=10**6, max_range_days=400)
    with start_server(size=SIZE, limits=limits,
                      misbehaviour=Misbehaviour(cap_points=20_000, cap_epochs=900)) as srv:
        r = probe(srv.base_url, tmp_path / "m.duckdb")
    assert r.returncode == 0, r.stderr
    assert "cuts answers at 20,000 points without an error" in row(r.stdout,
                                                                 "largest reading answer")
    assert "cuts answers at 900 epochs" in row(r.stdout, "largest GNSS answer")
    assert requests_made(r.stdout) <= MAX_REQUESTS


def test_a_rejected_key_blocks_and_says_what_to_do(tmp_path):
    with start_server(size=SIZE) as srv:
        r = probe(srv.base_url, tmp_path / "m.duckdb", key="wrong-key")
    assert r.returncode == 1 and "Traceback" not in r.stderr
    assert "key refused" in row(r.stdout, "authentication")
    assert "Blocks an exact sync: authentication" in r.stdout


def test_an_address_with_no_api_blocks(tmp_path):
    with start_server(size=SIZE) as srv:
        r = probe(srv.base_url + "/nothing", tmp_path / "m.duckdb")
    assert r.returncode == 1 and "Blocks an exact sync: API address" in r.stdout


@pytest.mark.parametrize("name, topic, says", [
    ("page-total", "paging of GET /devices", "page/pageSize with a total"),
    ("cursor", "paging of GET /devices", "a cursor token"),
    ("unpaged", "paging of GET /devices", "no paging"),
    ("capped-pages", "paging of GET /devices", "at most 25 a page"),
])
def test_each_paging_contract_is_named(tmp_path, name, topic, says):
    with start_server(size=WorldSize(sites=2, devices=40, days=3),
                      contract=CONTRACTS[name]) as srv:
        r = probe(srv.base_url, tmp_path / "m.duckdb")
    assert r.returncode == 0, r.stdout + r.stderr
    assert says in row(r.stdout, topic), r.stdout


TIGHT = contract.ResponseLimits(max_points=3000, max_epochs=400, max_range_days=20)


def test_refusals_in_other_words_and_status_are_measured(tmp_path):
    with start_server(size=SIZE, limits=TIGHT, contract=CONTRACTS["plain-refusals"]) as srv:
        r = probe(srv.base_url, tmp_path / "m.duckdb")
    assert r.returncode == 0, r.stdout + r.stderr
    assert "HTTP 422: 'The time range may not exceed 20 days'" in row(r.stdout,
                                                                      "longest date range")
    assert "plans within it (20 days)" in row(r.stdout, "longest date range")
    assert "refuses over 3,000 points (HTTP 422)" in row(r.stdout, "largest reading answer")
    assert "refuses over 400 epochs (HTTP 422)" in row(r.stdout, "largest GNSS answer")
    assert requests_made(r.stdout) <= MAX_REQUESTS


def test_a_wait_asked_by_403_is_named_as_the_rate_limit(tmp_path, monkeypatch):
    monkeypatch.setattr(contract, "RATE_LIMIT_WINDOW_S", 1.0)  # the server's: waits of 1 s
    # 2 requests a second: a refusal comes however slowly a busy machine sends them
    with start_server(size=SIZE, rate_limit_per_minute=2,
                      contract=CONTRACTS["wait-403"]) as srv:
        r = probe(srv.base_url, tmp_path / "m.duckdb")
    assert r.returncode == 0, r.stdout + r.stderr
    assert "HTTP 403: 'Please wait 1 seconds.'" in row(r.stdout, "rate limit")
    assert "Blocks" not in r.stdout


def test_a_service_without_v1_is_found_at_the_root(tmp_path):
    with start_server(size=SIZE, contract=CONTRACTS["no-v1"]) as srv:
        r = probe(srv.base_url + "/v1", tmp_path / "m.duckdb")
    assert r.returncode == 0, r.stdout + r.stderr
    assert f"uses {srv.base_url} (not the address given)" in row(r.stdout, "API address")


@pytest.mark.parametrize("name, says", [
    ("strict-options", "refused as unknown (HTTP 400)"),
    ("ignored-options", "ignored"),
])
def test_options_refused_or_ignored_are_each_named(tmp_path, name, says):
    """The command states its budget: 15 requests, and one for each option refused (a
    refusal names one)."""
    with start_server(size=SIZE, contract=CONTRACTS[name]) as srv:
        r = probe(srv.base_url, tmp_path / "m.duckdb")
        refused_options = srv.app.status_counts[400] - r.stdout.count("refuses with HTTP 400") \
            - r.stdout.count("(HTTP 400); under that")
    assert r.returncode == 0, r.stdout + r.stderr
    for topic in ("/devices includeFormulas", "/device-groups includeDevices",
                  "/devices includeInactiveSensors", "/devices includeInternal"):
        assert says in row(r.stdout, topic), r.stdout
    assert "GET /devices/{sn}" in r.stdout and "GET /device-groups/{uuid}" in r.stdout
    assert refused_options <= len(CONTRACTS[name].refused_options)
    assert requests_made(r.stdout) <= MAX_REQUESTS + refused_options


def test_silent_truncation_under_the_refusal_limit_is_proved(tmp_path):
    """The service refuses over 100,000 points yet cuts answers at 20,000: the probe asks
    again under the stated limit and finds the cut."""
    with start_server(size=SIZE, contract=CONTRACTS["silent-truncation"]) as srv:
        r = probe(srv.base_url, tmp_path / "m.duckdb")
    assert r.returncode == 0, r.stdout + r.stderr
    reading = row(r.stdout, "largest reading answer")
    assert "refuses over 100,000 points" in reading and "cuts answers at 20,000" in reading
    assert "cuts answers at 2,000 epochs" in row(r.stdout, "largest GNSS answer")
    assert requests_made(r.stdout) <= MAX_REQUESTS


@pytest.mark.parametrize("name,topic,said", [
    ("latest-empty", "/sensor-data/latest", "leaves out"),
    ("latest-capped", "/sensor-data/latest", "leaves out"),
    ("upper-uuids", "UUID case", "upper case"),
    ("migrated", "history before createdAt", "data in the 7 days before"),
])
def test_probe_says_what_the_sync_must_work_around(tmp_path, name, topic, said):
    """Issue 27: a /latest that leaves streams out, UUIDs in upper case, data older than
    createdAt: probe finds each (the sync copes with each, so none blocks)."""
    with start_server(size=SIZE, contract=CONTRACTS[name]) as srv:
        r = probe(srv.base_url, tmp_path / "m.duckdb")
    assert r.returncode == 0 and "Traceback" not in r.stderr, r.stderr
    assert said in row(r.stdout, topic), r.stdout

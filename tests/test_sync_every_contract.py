"""Issue 14, "done when": every contract profile mirrors exactly, or says what it could not.

One honest mirror (the default contract), then a sync against each other realisation of the
spec's unshown points; each must end ``ok`` with no problem and the same rows.  Where a
service refuses or ignores an option, the rows still match (devmon reads the same data
through the other routes the spec offers) and the run's notes name each option and the
route taken.  A second sync against the same service starts from what the first learned:
no option refused again, no address tried twice.
"""

from __future__ import annotations


import pytest
from support import start_server
from support import devmon as run_devmon
from support import CREATED_AT_AS_SAID, snapshot, sync

from devmon_sync.server import WorldSize
from devmon_sync.server.contracts import CONTRACTS, Contract

SIZE = WorldSize(sites=2, devices=10, days=40)  # an inactive sensor, a formula, groups


@pytest.fixture(scope="module")
def honest_db(tmp_path_factory):
    """The mirror of the default contract (the honest service)."""
    db = tmp_path_factory.mktemp("honest") / "honest.duckdb"
    with start_server(size=SIZE) as srv:
        report = sync(srv.base_url, db)
    assert report.status == "ok" and not report.problems and not report.notes
    return db


@pytest.fixture(scope="module")
def honest(honest_db) -> dict:
    return snapshot(honest_db)


@pytest.fixture(scope="module")
def honest_as_said(honest_db) -> dict:
    """The honest mirror without the parameters' creation dates."""
    return snapshot(honest_db, CREATED_AT_AS_SAID)


NOTES = {  # what the run must tell the user, by contract
    "no-v1": ["The API answers at"],
    "strict-options": ["refuses includeDevices", "refuses includeInactiveSensors",
                       "refuses includeInternal", "GET /devices/{sn}",
                       "GET /device-groups/{uuid}"],
    "ignored-options": ["ignores includeDevices", "ignores includeFormulas",
                        "ignores includeInternal", "GET /device-groups/{uuid}"],
    "no-aggregation": ["does not give a daily count and sum as devmon asks (it refused it"],
    "raw-aggregation": ["does not give a daily count and sum as devmon asks (it sent raw"],
}


SAME_WORLD = [n for n in CONTRACTS if n != "default" and not CONTRACTS[n].past_changes_h]
"""Contracts whose world is the honest one (``changing-past`` changes its past on purpose:
tests/test_past_changes.py syncs it before and after)."""


@pytest.mark.parametrize("name", SAME_WORLD)
def test_every_contract_mirrors_exactly_and_says_what_it_met(honest, honest_as_said,
                                                              tmp_path, name):
    db = tmp_path / "m.duckdb"
    with start_server(size=SIZE, contract=CONTRACTS[name]) as srv:
        given = srv.base_url + ("/v1" if name == "no-v1" else "")  # the spec's form, wrong here
        first = sync(given, db)
        port = srv.port
    assert first.status == "ok" and not first.problems, (first.status, first.problems)
    if CONTRACTS[name].migrated_days_ago:  # the service's own word on creation dates differs
        assert snapshot(db, CREATED_AT_AS_SAID) == honest_as_said, \
            f"{name}: the mirror differs from the honest one"
    else:
        assert snapshot(db) == honest, f"{name}: the mirror differs from the honest one"
    notes = " ".join(first.notes)
    for said in NOTES.get(name, []):
        assert said in notes, f"{name}: no note saying {said!r} in {first.notes}"
    with start_server(size=SIZE, contract=CONTRACTS[name], port=port) as srv:
        second = sync(given, db)
        refused = {s: n for s, n in srv.app.status_counts.items() if s in (400, 404)}
    assert second.status == "ok" and not refused, f"{name}: asked again what it knew: {refused}"
    if CONTRACTS[name].migrated_days_ago:
        assert snapshot(db, CREATED_AT_AS_SAID) == honest_as_said
    else:
        assert snapshot(db) == honest


@pytest.mark.parametrize("option", ["includeInactiveSensors", "includeFormulas"])
@pytest.mark.parametrize("how", ["refused_options", "ignored_options"])
def test_one_option_missing_is_made_up_by_another_route(honest, tmp_path, option, how):
    """The issue's figure: a service ignoring an option lost inactive sensors' archived data
    and formulas without a word.  One missing option at a time, each way."""
    db = tmp_path / "m.duckdb"
    with start_server(size=SIZE, contract=Contract("one", **{how: frozenset({option})})) as srv:
        report = sync(srv.base_url, db)
    assert report.status == "ok" and not report.problems
    assert snapshot(db) == honest
    verb = "refuses" if how == "refused_options" else "ignores"
    said = " ".join(report.notes)
    assert "GET /devices/{sn}" in said, report.notes
    assert f"{verb} {option}" in said or (option == "includeInactiveSensors" and verb ==
                                          "ignores" and "left out sensors" in said), report.notes


def test_status_shows_the_options_a_service_refused(tmp_path):
    db = tmp_path / "m.duckdb"
    with start_server(size=SIZE, contract=CONTRACTS["strict-options"]) as srv:
        assert sync(srv.base_url, db).status == "ok"
    r = run_devmon("status", "--db", str(db), timeout=60)
    assert r.returncode == 0, r.stderr
    line = next(ln for ln in r.stdout.splitlines() if "options refused as unknown" in ln)
    for name in ("includeFormulas on /devices", "includeDevices on /device-groups"):
        assert name in line, line

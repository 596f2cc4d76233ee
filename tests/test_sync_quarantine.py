"""Issue 13: values devmon cannot read are quarantined, never blocking, never silently changed.

A reference server that writes some points badly (bare NaN / Infinity, numbers as strings,
timestamps without a timezone, repeated points and epochs, ids beyond 64 bits, `data: null`)
is synced, and the mirror is compared with one synced from an honest server: every readable
value is there, every unreadable one is in the quarantine table with its raw text and reason,
and `devmon status` says so.
"""

from __future__ import annotations

import json

import duckdb
import pytest
from support import start_server
from support import devmon as run_devmon
from support import snapshot, sync

from devmon_sync import api_contract as contract
from devmon_sync.server import Misbehaviour, WorldSize

SIZE = WorldSize(sites=2, devices=8, days=4)
LIMITS = contract.ResponseLimits(max_points=5000, max_epochs=300)


@pytest.fixture(scope="module")
def honest(tmp_path_factory):
    db = tmp_path_factory.mktemp("honest") / "honest.duckdb"
    with start_server(size=SIZE, limits=LIMITS) as srv:
        assert sync(srv.base_url, db, limits=LIMITS).status == "ok"
    return snapshot(db)


def _through(tmp_path, name: str, misbehaviour: Misbehaviour):
    db = tmp_path / f"{name}.duckdb"
    with start_server(size=SIZE, limits=LIMITS, misbehaviour=misbehaviour) as srv:
        report = sync(srv.base_url, db, limits=LIMITS)
    return db, report


def _query(db, sql: str, params=None) -> list:
    con = duckdb.connect(str(db), read_only=True)
    try:
        return con.execute(sql, params or []).fetchall()
    finally:
        con.close()


def _status(db) -> str:
    r = run_devmon("status", "--db", str(db), timeout=60)
    assert r.returncode == 0, r.stderr
    return r.stdout


UNREADABLE = {
    "nan": (Misbehaviour(nan_rate=0.01, seed=3), "NaN"),
    "infinity": (Misbehaviour(infinity_rate=0.01, seed=4), "Infinity"),
    "naive-timestamps": (Misbehaviour(naive_timestamp_rate=0.01, seed=5), "timezone"),
}


@pytest.mark.parametrize("name", list(UNREADABLE))
def test_unreadable_values_are_quarantined_and_everything_else_is_mirrored(honest, tmp_path,
                                                                            name):
    misbehaviour, word = UNREADABLE[name]
    db, report = _through(tmp_path, name, misbehaviour)
    assert report.status == "ok", report
    assert report.quarantined > 0
    rows = _query(db, "SELECT kind, key, ts_text, raw, reason FROM quarantine")
    assert len(rows) == report.quarantined
    assert all(word.lower() in (raw + reason).lower() for *_, raw, reason in rows), rows[:3]
    # readings: the honest mirror less exactly the quarantined points
    lost = {(k, t[:19]) for kind, k, t, _, _ in rows if kind == "readings"}
    mirrored = snapshot(db)
    assert len(lost) > 0
    expected = [r for r in honest["readings"]
                if (r[0], _iso_s(r[1])) not in lost]
    assert mirrored["readings"] == expected
    # GNSS: the epochs of quarantined points are missing, the rest equal
    lost_epochs = {(k, t[:19]) for kind, k, t, _, _ in rows if kind == "gnss"}
    assert len(mirrored["gnss_epochs"]) == len(honest["gnss_epochs"]) - len(lost_epochs)
    assert _query(db, "SELECT count(*) FROM sync_gaps") == [(0,)]
    assert f"Quarantine: {report.quarantined} values could not be read" in _status(db)


def _iso_s(epoch_ms: int) -> str:
    from datetime import datetime, timezone

    return datetime.fromtimestamp(epoch_ms / 1000, timezone.utc).strftime("%Y-%m-%dT%H:%M:%S")


def test_numbers_sent_as_strings_are_parsed_and_counted(honest, tmp_path):
    db, report = _through(tmp_path, "strings", Misbehaviour(string_number_rate=0.05, seed=6))
    assert report.status == "ok" and report.parsed_strings > 0 and report.quarantined == 0
    assert snapshot(db) == honest  # not one NULL where a number was sent


def test_repeated_points_are_stored_once(honest, tmp_path):
    db, report = _through(tmp_path, "dups", Misbehaviour(duplicate_rate=0.02, seed=7))
    assert report.status == "ok" and report.quarantined == 0
    assert snapshot(db) == honest


def test_conflicting_repeats_keep_the_last_and_quarantine_the_other(honest, tmp_path):
    db, report = _through(tmp_path, "conflicts", Misbehaviour(duplicate_rate=0.02, seed=7,
                                                               duplicate_conflict=True))
    assert report.status == "ok" and report.quarantined > 0
    conflicts = _query(db, "SELECT key, strftime(ts, '%Y-%m-%dT%H:%M:%S') FROM quarantine "
                           "WHERE kind = 'readings'")
    changed = set(conflicts)
    mirrored = {(r[0], _iso_s(r[1])): r[2] for r in snapshot(db)["readings"]}
    truth = {(r[0], _iso_s(r[1])): r[2] for r in honest["readings"]}
    assert mirrored.keys() == truth.keys()
    for key, value in truth.items():
        if key in changed and value is not None:
            assert mirrored[key] == pytest.approx(value + 1.0), key  # the repeat came last
        elif key not in changed:
            assert mirrored[key] == value or (value is None and mirrored[key] is None), key


def test_epoch_ids_beyond_64_bits_are_quarantined(honest, tmp_path):
    db, report = _through(tmp_path, "huge-ids", Misbehaviour(huge_epoch_id_rate=0.02, seed=8))
    assert report.status == "ok" and report.quarantined > 0
    rows = _query(db, "SELECT raw FROM quarantine WHERE kind = 'gnss'")
    assert rows and all(json.loads(raw)["id"] >= 2**63 for (raw,) in rows)  # kept exactly
    assert len(snapshot(db)["gnss_epochs"]) == len(honest["gnss_epochs"]) - len(rows)
    assert snapshot(db)["readings"] == honest["readings"]


def test_legacy_ids_beyond_64_bits_are_kept_raw_with_a_problem(honest, tmp_path):
    db, report = _through(tmp_path, "huge-legacy", Misbehaviour(huge_legacy_ids=True))
    assert report.status == "ok"
    assert snapshot(db) == honest
    assert _query(db, "SELECT count(*) FROM devices WHERE legacy_device_id IS NOT NULL") == [(0,)]
    raw = _query(db, "SELECT raw FROM devices WHERE raw LIKE '%9223372036854775808%'")
    assert raw, "the id as sent is not kept in the raw JSON"
    problems = _query(db, "SELECT resource, message FROM sync_problems")
    assert any("legacyDeviceId" in m for _, m in problems), problems
    assert "legacyDeviceId" in _status(db)


def test_data_null_is_an_empty_series(honest, tmp_path):
    """A service that also starves the last items of an answer (a cap keeping the first
    items), so that some streams come back with nothing: it sends them as `data: null`."""
    db, report = _through(tmp_path, "null-data", Misbehaviour(
        null_data_empty=True, cap_points=1500, cap_epochs=100, cap_keep="first_items"))
    assert report.status == "ok"
    assert snapshot(db) == honest
    notes = _query(db, "SELECT resource, message FROM sync_problems WHERE message LIKE "
                       "'%data: null%'")
    assert notes, "no stream was sent as `data: null`: the test proves nothing"
    assert len(notes) == len({r for r, _ in notes})  # noted once per stream and run
    kinds = {r.split(":", 1)[0] for r, _ in notes}
    assert kinds <= {"readings", "gnss"}, kinds
    assert all("empty series" in m for _, m in notes)

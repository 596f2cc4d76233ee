"""Issue 27: the mirror finds every stream, whatever /sensor-data/latest says, from the true
start of its history, whatever ``createdAt`` says.

Each contract below is a plausible service (``devmon serve --contract NAME``): /latest that
answers an empty body with nothing, or caps its answer; UUIDs in upper case; records
re-created by a migration after most of their data.  A full sync through each must give the
mirror an honest service gives, point for point.
"""

from __future__ import annotations

import duckdb
import pytest
from support import SMALL, snapshot, start_server, sync

from devmon_sync.server.contracts import CONTRACTS

DATA = ("readings", "gnss_epochs", "gnss_projected")


@pytest.fixture(scope="module")
def honest(tmp_path_factory):
    """The data tables of a mirror synced from the default contract."""
    db = tmp_path_factory.mktemp("honest") / "honest.duckdb"
    with start_server(size=SMALL) as srv:
        assert sync(srv.base_url, db).status == "ok"
    return {k: v for k, v in snapshot(db).items() if k in DATA}


def _synced(tmp_path, name: str):
    db = tmp_path / f"{name}.duckdb"
    with start_server(size=SMALL, contract=CONTRACTS[name]) as srv:
        report = sync(srv.base_url, db)
    assert report.status == "ok", report.problems
    return db, report


def _data(db) -> dict[str, list]:
    return {k: v for k, v in snapshot(db).items() if k in DATA}


def _counts(data: dict[str, list]) -> dict[str, int]:
    return {k: len(v) for k, v in data.items()}


@pytest.mark.parametrize("name", ["latest-empty", "latest-capped", "upper-uuids", "migrated"])
def test_every_stream_is_mirrored_whatever_latest_and_created_at_say(tmp_path, honest, name):
    db, _ = _synced(tmp_path, name)
    data = _data(db)
    assert _counts(data) == _counts(honest)
    assert data == honest


@pytest.mark.parametrize("name", ["latest-empty", "latest-capped"])
def test_a_latest_that_leaves_streams_out_is_said(tmp_path, name):
    """The run's notes say that /latest did not name every stream the device list holds, and
    that devmon fetched them anyway."""
    _, report = _synced(tmp_path, name)
    said = " ".join(report.notes)
    assert "/sensor-data/latest" in said and "fetched" in said, report.notes


def test_history_before_created_at_is_found_and_said(tmp_path):
    db, report = _synced(tmp_path, "migrated")
    said = " ".join(report.notes)
    assert "createdAt" in said, report.notes
    con = duckdb.connect(str(db), read_only=True)
    try:
        before = con.execute("SELECT count(*) FROM readings r JOIN parameters p "
                             "ON p.uuid = r.parameter_uuid WHERE r.ts < p.created_at").fetchone()[0]
    finally:
        con.close()
    assert before > 0

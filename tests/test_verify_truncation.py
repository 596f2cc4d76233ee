"""`devmon verify` against a service that cuts its answers without saying so
(``silent-truncation``: at most 20,000 points / 2,000 epochs an answer).

The sync copes with such a service (it proves each answer whole, completes cut ones and
learns the caps into the stored service profile); verify's re-read must cope too: an exact
mirror is clean (no point of it called "extra" because the service's answer to the re-read
was cut), and a real difference is still found.
"""

from __future__ import annotations

import shutil
import subprocess
import sys

import duckdb
import pytest
from support import KEY, SMALL, start_server, sync

from devmon_sync.server.contracts import CONTRACTS


@pytest.fixture(scope="module")
def world(tmp_path_factory):
    srv = start_server(size=SMALL, contract=CONTRACTS["silent-truncation"])
    db = tmp_path_factory.mktemp("verify-truncation") / "mirror.duckdb"
    assert sync(srv.base_url, db).status == "ok"
    yield srv, db
    srv.stop()


def verify(srv, db, *extra) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, "-m", "devmon_sync", "verify", "--db", str(db),
                           "--base-url", srv.base_url, "--api-key", KEY, "--rate-limit", "0",
                           "--quiet", *extra], check=False, capture_output=True, text=True,
                          timeout=180)


def _learned_cut(db) -> bool:
    """Whether the sync learned that the service cuts answers (else the test proves little)."""
    from devmon_sync.service_profile import ServiceProfile

    con = duckdb.connect(str(db), read_only=True)
    try:
        rows = con.execute("SELECT base_url, profile FROM service_profiles").fetchall()
    finally:
        con.close()
    profiles = [ServiceProfile.from_json(url, text) for url, text in rows]
    return any(p.of(kind).silent_cap or p.of(kind).silent_cap_per_series
               for p in profiles for kind in ("readings", "gnss"))


@pytest.mark.parametrize("forget_caps", [False, True], ids=["caps-learned", "caps-forgotten"])
def test_an_exact_mirror_is_clean_against_a_truncating_service(world, tmp_path, forget_caps):
    """With the caps the sync learned, verify re-reads within them; without (the stored
    profile lost, or a service that began to cut since), it completes each cut answer as
    the sync's follow-ups do, before it calls any point extra."""
    srv, db = world
    assert _learned_cut(db), "the sync learned no cap: the world is too small to be cut"
    copy = tmp_path / "exact.duckdb"
    shutil.copy(db, copy)
    if forget_caps:
        con = duckdb.connect(str(copy))
        con.execute("DELETE FROM service_profiles")
        con.close()
        assert not _learned_cut(copy)
    r = verify(srv, copy, "--all")
    assert r.returncode == 0, r.stdout + r.stderr
    assert "matches the service in every point checked" in r.stdout, r.stdout
    assert "extra" not in r.stdout, r.stdout


def _tamper_past_the_cut(db) -> tuple[str, str]:
    """Change the newest value of the densest parameter (beyond where the service cut the
    sync's answer over its first window: only a re-read past the cut sees it) and add a
    foreign reading to it one second after its newest but one; return that parameter's
    device serial and name."""
    con = duckdb.connect(str(db))
    try:
        uuid, = con.execute("SELECT parameter_uuid FROM readings GROUP BY 1 "
                            "ORDER BY count(*) DESC, 1 LIMIT 1").fetchone()
        newest, before = [t for (t,) in con.execute(
            "SELECT ts FROM readings WHERE parameter_uuid = ? ORDER BY ts DESC LIMIT 2",
            [uuid]).fetchall()]
        con.execute("UPDATE readings SET value = value + 0.5 WHERE parameter_uuid = ? AND "
                    "ts = ?", [uuid, newest])
        con.execute("INSERT INTO readings SELECT parameter_uuid, ts + INTERVAL 1 SECOND, 1.0 "
                    "FROM readings WHERE parameter_uuid = ? AND ts = ?", [uuid, before])
        return con.execute("SELECT device_serial_number, name FROM parameters WHERE uuid = ?",
                           [uuid]).fetchone()
    finally:
        con.close()


def test_a_real_difference_is_still_found_against_a_truncating_service(world, tmp_path):
    srv, db = world
    copy = tmp_path / "tampered.duckdb"
    shutil.copy(db, copy)
    device, name = _tamper_past_the_cut(copy)
    r = verify(srv, copy, "--all")
    assert r.returncode == 1, r.stdout + r.stderr
    assert "Traceback" not in r.stderr
    lines = [line for line in r.stdout.splitlines() if device in line and name[:28] in line]
    assert lines, r.stdout
    assert "0 missing, 1 extra, 1 changed" in lines[0], r.stdout
    differing = [line for line in r.stdout.splitlines() if "missing" in line and
                 "extra" in line and "changed" in line]
    assert len(differing) == 1, r.stdout  # nothing else called different

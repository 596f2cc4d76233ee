"""What tests share, imported by name (``from support import ...``): reference servers on
loopback ports, a tiny HTTP helper, synced mirrors, the sync and PDF helpers.

Fixtures live in ``conftest.py`` files; tests never import from ``conftest`` or from each
other's modules (a conftest module is not a module to import: pytest loads several).
"""

from __future__ import annotations

import re
import shutil
import subprocess
import sys
from datetime import datetime, timezone
from pathlib import Path

import duckdb
import pytest
import requests

from devmon_sync.server import ReferenceServer, ServerConfig, WorldSize

ROOT = Path(__file__).resolve().parents[1]  # the repository

NOW = datetime(2026, 1, 1, tzinfo=timezone.utc)
KEY = "test-key-full"
SITE_KEY = "test-key-one-site"


class Api:
    """A tiny HTTP helper for tests: one session, the key in the header."""

    def __init__(self, base_url: str, key: str | None = KEY):
        self.base_url = base_url
        self.session = requests.Session()
        if key:
            self.session.headers["x-api-key"] = key

    def get(self, path: str, **params) -> requests.Response:
        return self.session.get(self.base_url + path, params=params, timeout=60)

    def post(self, path: str, body=None, **kw) -> requests.Response:
        return self.session.post(self.base_url + path, json=body, timeout=60, **kw)

    def ok(self, method: str, path: str, *args, **kw):
        r = getattr(self, method)(path, *args, **kw)
        assert r.status_code == 200, (r.status_code, r.text[:500])
        return r.json()


def count_calls(monkeypatch, owner, *names: str) -> dict[str, int]:
    """Count the calls of ``owner``'s functions ``names`` (a module's, patched for the test):
    {name: calls so far}, the functions still doing what they did.  For tests that a command
    reads the store by batch, not once a device."""
    calls = dict.fromkeys(names, 0)
    for name in names:
        real = getattr(owner, name)

        def counted(*args, _real=real, _name=name, **kwargs):
            calls[_name] += 1
            return _real(*args, **kwargs)
        monkeypatch.setattr(owner, name, counted)
    return calls


def one_second_rate_window(monkeypatch) -> None:
    """Shrink the rate limit's window from a minute to a second on BOTH sides, so pacing
    takes seconds: the server's choice (``api_contract``) and the client's own assumption
    (``service_profile``), which are kept apart on purpose."""
    from devmon_sync import api_contract, service_profile

    monkeypatch.setattr(api_contract, "RATE_LIMIT_WINDOW_S", 1.0)
    monkeypatch.setattr(service_profile, "RATE_LIMIT_WINDOW_S", 1.0)


def start_server(**overrides) -> ReferenceServer:
    config = dict(port=0, api_keys={KEY: None}, now=NOW, rate_limit_per_minute=0)
    config.update(overrides)
    return ReferenceServer(ServerConfig(**config)).start()


def device_by_role(devices: list[dict], text: str) -> dict:
    """The first device whose alias or name mentions ``text`` (e.g. 'accelerating')."""
    for d in devices:
        if text in (d["alias"] or "") or text in (d["name"] or ""):
            return d
    raise LookupError(text)


def serials_in_groups(groups: list[dict]) -> set[str]:
    """Serial numbers of the devices in nested device groups (spec 2.6)."""
    out = set()
    for g in groups:
        out |= {d["serialNumber"] for d in g.get("devices", [])} | serials_in_groups(g["children"])
    return out


def synced_mirror(path, size, **server_options):
    """A mirror at ``path`` synced in full from a reference server of world ``size``."""
    from devmon_sync.client import ApiClient
    from devmon_sync.store import Mirror
    from devmon_sync.sync.engine import SyncEngine, SyncOptions

    with start_server(size=size, **server_options) as srv, \
            ApiClient(srv.base_url, KEY, rate_limit_per_minute=0) as client, \
            Mirror.open(path) as mirror:
        assert SyncEngine(client, mirror, SyncOptions()).run().status == "ok"
    return path


GNSS_SCENARIOS = ("creep", "accelerating", "step", "outliers", "stable", "seasonal")


def rovers_by_scenario(devices) -> dict:
    """The reference world's GNSS rovers with epochs, by the scenario their display name
    carries ('Illgraben GNSS creep 02' is the creep one); every scenario must be there."""
    out = {}
    for scenario in GNSS_SCENARIOS:
        for d in devices:
            if d.epochs and scenario in d.display_name:
                out.setdefault(scenario, d)
    assert set(GNSS_SCENARIOS) <= set(out), out.keys()
    return out



# ----------------------------------------------------------------- sync

SMALL = WorldSize(sites=4, devices=30, days=20)
DATA_TABLES = {
    "readings": "SELECT parameter_uuid::VARCHAR, epoch_ms(ts), value FROM readings ORDER BY 1, 2",
    "gnss_epochs": "SELECT * EXCLUDE (debug_at) FROM gnss_epochs ORDER BY sensor_uuid, epoch_id",
    "gnss_projected": "SELECT * FROM gnss_projected ORDER BY 1, 2, 3",
    "parameters": "SELECT * EXCLUDE (raw, last_run_id) FROM parameters ORDER BY uuid",
    "sensors": "SELECT * EXCLUDE (raw, last_run_id) FROM sensors ORDER BY uuid",
}


CREATED_AT_AS_SAID = {**DATA_TABLES, "parameters": "SELECT * EXCLUDE (raw, last_run_id, "
                      "created_at) FROM parameters ORDER BY uuid"}
"""``DATA_TABLES`` for a service that says other creation dates (a migration re-created the
records): the parameters' ``created_at`` is the service's word, the rest must match."""


def sync(base_url: str, db, **options) -> "SyncReport":  # noqa: F821
    from devmon_sync.client import ApiClient
    from devmon_sync.store import Mirror
    from devmon_sync.sync.engine import SyncEngine, SyncOptions

    with ApiClient(base_url, KEY, rate_limit_per_minute=0) as client, Mirror.open(db) as mirror:
        return SyncEngine(client, mirror, SyncOptions(**options)).run()


def rows(db, sql: str, params=()) -> list[tuple]:
    """The rows of one query on the mirror file ``db``, opened read-only for it."""
    con = duckdb.connect(str(db), read_only=True)
    try:
        return con.execute(sql, list(params)).fetchall()
    finally:
        con.close()


def snapshot(db, tables: dict[str, str] = DATA_TABLES) -> dict[str, list]:
    con = duckdb.connect(str(db), read_only=True)
    try:
        return {name: con.execute(sql).fetchall() for name, sql in tables.items()}
    finally:
        con.close()


# ----------------------------------------------------------------- reports

POPPLER = all(shutil.which(tool) for tool in ("pdftotext", "pdfinfo", "pdffonts"))
needs_poppler = pytest.mark.skipif(not POPPLER, reason="poppler-utils (pdftotext) not installed")

_forks = None


def devmon(*args: str, **options) -> subprocess.CompletedProcess:
    """``devmon ARGS`` in a process of its own, captured as ``subprocess.run`` gives it
    (``options``: ``cwd``, ``env``, ``input``, ``text``, ``timeout``), forked from one warm
    process of this test process (``cli_forks``) rather than a fresh interpreter."""
    global _forks
    if _forks is None:
        import atexit

        from cli_forks import Forks

        _forks = Forks()
        atexit.register(_forks.close)
    return _forks.run(list(args), **options)


def pdf_text(path, first: int | None = None, last: int | None = None) -> str:
    pages = (["-f", str(first)] if first else []) + (["-l", str(last)] if last else [])
    return subprocess.run(["pdftotext", "-layout", *pages, str(path), "-"], check=True,
                          capture_output=True, text=True).stdout


def section_pages(stdout: str, title: str) -> tuple[int, int]:
    """(first, last) page of a section from the command's listing of its sections."""
    listing = [(int(m.group(1)), m.group(2)) for m in
               re.finditer(r"p\.\s+(\d+)\s+(.+)", stdout)]
    i = next(i for i, (_, t) in enumerate(listing) if t.strip() == title)
    last = listing[i + 1][0] - 1 if i + 1 < len(listing) else listing[i][0]
    return listing[i][0], last


def pdf_pages(path) -> int:
    info = subprocess.run(["pdfinfo", str(path)], check=True, capture_output=True,
                          text=True).stdout
    return int(re.search(r"^Pages:\s+(\d+)", info, re.M).group(1))


def bench_module(name: str):
    """A script of ``benchmarks/`` imported as a module (its generators are the tests'
    fixtures: the same noise the benchmark measures), once per session."""
    import importlib.util

    if name in sys.modules:
        return sys.modules[name]
    spec = importlib.util.spec_from_file_location(
        name, Path(__file__).resolve().parent.parent / "benchmarks" / f"{name}.py")
    module = importlib.util.module_from_spec(spec)
    sys.modules[name] = module
    spec.loader.exec_module(module)
    return module


# ----------------------------------------------------------------- damaged files

DUCKDB_HEADER_BYTES = 3 * 4096  # DuckDB's file header and two database headers, then the blocks


def block_offset(path, table: str) -> int:
    """Where in the file the data of ``table`` lie: inside the largest stored segment of its
    last column's values (not a validity mask, not a constant segment), which every read of
    that column reads."""
    con = duckdb.connect(str(path), read_only=True)
    try:
        block_size = int(con.execute("SELECT block_size FROM pragma_database_size()")
                         .fetchone()[0])
        rows = con.execute(
            f"SELECT block_id, block_offset FROM pragma_storage_info('{table}') "
            f"WHERE persistent AND block_id >= 0 AND segment_type <> 'VALIDITY' "
            f"AND lower(compression) <> 'constant' "
            f"AND column_id = (SELECT max(column_id) FROM pragma_storage_info('{table}')) "
            f"ORDER BY count DESC, block_id LIMIT 1").fetchall()
    finally:
        con.close()
    assert rows, f"no stored data segment of {table}"
    block_id, offset = rows[0]
    return DUCKDB_HEADER_BYTES + block_id * block_size + 8 + offset + 64


def flip_block_bytes(path, table: str, n: int = 3) -> None:
    """Damage the mirror at ``path`` as a disk does: ``n`` bytes inverted in a block of
    ``table``'s data, so its checksum no longer matches.  A few bytes inside one 8-byte
    word: DuckDB's block checksum XORs a hash of each word, so inverting an even number of
    EQUAL words (32 bytes of zeros) cancels out and goes unseen (a limit of DuckDB's
    checksum, noted in ``devmon_sync/store/integrity.py``)."""
    at = block_offset(path, table)
    with open(path, "r+b") as f:
        f.seek(at)
        chunk = f.read(n)
        f.seek(at)
        f.write(bytes(b ^ 0xFF for b in chunk))

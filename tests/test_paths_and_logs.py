"""Where files go (user directories, not the install folder) and the sync log (rotating,
useful, and with no secret in it)."""

from __future__ import annotations

import os

from devmon_sync.logs import RedactSecrets
from devmon_sync.paths import default_mirror

from support import KEY, start_server
from support import devmon as run_devmon


def _devmon(*args, env):
    return run_devmon(*args, timeout=300, env=env)


def test_a_sync_without_db_goes_to_the_user_data_folder_and_logs_without_the_key(tmp_path):
    env = {**os.environ, "DEVMON_DATA_DIR": str(tmp_path / "data"),
           "DEVMON_LOG_DIR": str(tmp_path / "logs"), "DEVMON_CONFIG_DIR": str(tmp_path / "cfg"),
           "DEVMON_API_KEY": KEY}
    with start_server() as srv:
        r = _devmon("sync", "--base-url", srv.base_url, "--quiet", "--rate-limit", "0", env=env)
    assert r.returncode == 0, r.stderr
    assert (tmp_path / "data" / "mirror.duckdb").is_file()  # created with its folder
    log = (tmp_path / "logs" / "sync.log").read_text()
    assert "run 1: sync of" in log and "run 1: ok after" in log and srv.base_url in log
    assert KEY not in log
    r = _devmon("status", env=env)  # and every command finds it without --db
    assert r.returncode == 0 and "Last runs" in r.stdout, r.stderr


def test_the_default_mirror_is_in_a_user_folder_not_the_install_folder(monkeypatch):
    monkeypatch.delenv("DEVMON_DATA_DIR", raising=False)
    import devmon_sync

    install = os.path.dirname(os.path.dirname(devmon_sync.__file__))
    assert not str(default_mirror()).startswith(install)
    assert "devmon" in str(default_mirror())


def test_the_filter_masks_keys_and_key_headers():
    import logging

    record = logging.LogRecord("devmon", logging.INFO, __file__, 1,
                               "sent %s with {'x-api-key': 'abc123'} and key=%s",
                               ("GET /sites", "s3cret-key"), None)
    RedactSecrets(["s3cret-key"]).filter(record)
    text = record.getMessage()
    assert "s3cret-key" not in text and "abc123" not in text and "GET /sites" in text


def test_a_first_report_on_a_fresh_machine_prints_no_library_chatter(tmp_path):
    """On a machine where matplotlib has never run (an empty config folder: the first
    ``devmon demo`` or report), making its font list logs "generated new fontManager" at
    INFO; the terminal shows devmon's lines, not a library's timestamped notes."""
    import subprocess
    import sys

    from devmon_sync.server import WorldSize
    from support import ROOT, synced_mirror

    mirror = synced_mirror(tmp_path / "m.duckdb", WorldSize(sites=1, devices=6, days=3))
    serial = next(d.serial_number for d in _gnss_devices(mirror) if d.epochs)
    env = {**os.environ, "MPLCONFIGDIR": str(tmp_path / "fresh-matplotlib"),
           "PYTHONPATH": str(ROOT)}
    done = subprocess.run([sys.executable, "-m", "devmon_sync", "report", "--db", str(mirror),
                           "--device", serial, "--out", str(tmp_path / "r.pdf")],
                          env=env, capture_output=True, text=True, timeout=300)
    assert done.returncode == 0, done.stderr[-3000:]
    assert list((tmp_path / "fresh-matplotlib").glob("fontlist-*.json"))  # it was made
    assert "matplotlib" not in done.stderr, done.stderr


def _gnss_devices(path):
    from devmon_sync.store import Mirror, queries

    with Mirror.open(path, read_only=True) as m:
        return queries.gnss_devices(m)


def test_matplotlibs_lasting_folder_is_the_cache_folders_or_left_alone(tmp_path, monkeypatch):
    """``keep_matplotlib_cache`` (the desktop app's entry scripts): matplotlib's folder in
    devmon's cache folder; one that cannot be made leaves matplotlib's own as it was."""
    from devmon_sync.paths import keep_matplotlib_cache

    monkeypatch.setenv("MPLCONFIGDIR", str(tmp_path / "given"))
    monkeypatch.setenv("DEVMON_CACHE_DIR", str(tmp_path / "no" / "such"))
    (tmp_path / "no").write_text("a file where a folder should be")
    assert keep_matplotlib_cache() is None
    assert os.environ["MPLCONFIGDIR"] == str(tmp_path / "given")
    monkeypatch.setenv("DEVMON_CACHE_DIR", str(tmp_path / "cache"))
    assert keep_matplotlib_cache() == tmp_path / "cache" / "matplotlib"
    assert os.environ["MPLCONFIGDIR"] == str(tmp_path / "cache" / "matplotlib")
    assert [p.name for p in (tmp_path / "cache" / "matplotlib").iterdir()] == []  # no probe

"""Shared fixtures: real reference servers on loopback ports, spoken to over HTTP.

Helpers that tests import by name live in ``support.py``; this file holds fixtures only."""

from __future__ import annotations

import os

# GUI tests draw real Qt widgets without a display (set before any Qt import).
os.environ.setdefault("QT_QPA_PLATFORM", "offscreen")

import pytest  # noqa: E402

from support import KEY, SITE_KEY, Api, rovers_by_scenario, start_server  # noqa: E402


def pytest_xdist_auto_num_workers(config) -> int:
    """``-n auto``: one worker more than the cores this process may use.  Tests wait on
    loopback servers, child processes, locks and timers, and a core idles while its one
    worker waits: on 2 cores 3 workers ran the suite in 773 s against 843 s for 2 (the
    machine otherwise idle; 4 were slower again, docs/benchmarks.md)."""
    return len(os.sched_getaffinity(0)) + 1 if hasattr(os, "sched_getaffinity") \
        else (os.cpu_count() or 1) + 1


@pytest.fixture(scope="session")
def limited_site_uuid() -> str:
    """The one site the restricted key may see (the second site of the default world)."""
    with start_server() as probe:
        return Api(probe.base_url).ok("get", "/sites")["items"][1]["uuid"]


@pytest.fixture(scope="session")
def server(limited_site_uuid):
    srv = start_server(api_keys={KEY: None, SITE_KEY: frozenset({limited_site_uuid})})
    yield srv
    srv.stop()


@pytest.fixture(scope="session")
def api(server) -> Api:
    return Api(server.base_url)


@pytest.fixture(scope="session")
def all_devices(api) -> list[dict]:
    """Every device with its sensors (inactive ones too) and formulas, one page at a time."""
    out, offset = [], 0
    while True:
        page = api.ok("get", "/devices", includeSensors="true", includeInactiveSensors="true",
                      includeFormulas="true", includeInternal="true", limit=20,
                      offset=offset)["items"]
        out += page
        if len(page) < 20:
            return out
        offset += 20


@pytest.fixture(scope="module")
def rovers(mirror_path) -> dict:
    """Rovers with epochs by scenario (named in their display name, e.g. 'GNSS creep 02'),
    of the mirror the test module syncs as its ``mirror_path`` fixture."""
    from devmon_sync.store import Mirror, queries

    with Mirror.open(mirror_path, read_only=True) as m:
        return rovers_by_scenario(queries.gnss_devices(m))


@pytest.fixture(scope="module")
def results(mirror_path, rovers) -> dict:
    """``analyze_devices`` of every scenario rover with the default options, by scenario."""
    from analysis.pipeline import AnalysisOptions
    from devmon_sync.analyze.rovers import analyze_devices
    from devmon_sync.store import Mirror

    with Mirror.open(mirror_path, read_only=True) as m:
        found = analyze_devices(m, [d.serial_number for d in rovers.values()], AnalysisOptions())
    return {name: r for name, r in zip(rovers, found)}


@pytest.fixture
def file_keyring(tmp_path, monkeypatch):
    """A plaintext keyring file and a config dir in tmp_path; the real keyring is untouched."""
    import keyring
    from keyrings.alt.file import PlaintextKeyring

    from devmon_sync import credentials

    monkeypatch.setenv(credentials.ENV_CONFIG_DIR, str(tmp_path / "config"))
    monkeypatch.delenv(credentials.ENV_API_KEY, raising=False)
    previous = keyring.get_keyring()
    ring = PlaintextKeyring()
    ring.file_path = str(tmp_path / "keyring.cfg")
    keyring.set_keyring(ring)
    yield ring
    keyring.set_keyring(previous)


@pytest.fixture
def small_tmpfs(tmp_path):
    """A factory: ``small_tmpfs("4m")`` mounts a tmpfs of that size on a folder of its own and
    returns (folder, remount), ``remount("size=18m")`` or ``remount("ro")`` changing its
    options; unmounted after the test.  Skipped where mounting is not allowed (not root, no
    tmpfs, a container without CAP_SYS_ADMIN): a real full disk, not a simulated one."""
    import shutil
    import subprocess
    import sys

    if sys.platform != "linux" or os.geteuid() != 0 or not shutil.which("mount"):
        pytest.skip("mounting a small tmpfs needs Linux and root")
    mounted = []

    def mount(size: str):
        disk = tmp_path / f"disk{len(mounted) or ''}"
        disk.mkdir()
        done = subprocess.run(["mount", "-t", "tmpfs", "-o", f"size={size}", "tmpfs", str(disk)],
                              capture_output=True, text=True)
        if done.returncode != 0:
            pytest.skip(f"cannot mount a tmpfs here: {done.stderr.strip()}")
        mounted.append(disk)

        def remount(options: str) -> None:
            subprocess.run(["mount", "-o", f"remount,{options}", str(disk)], check=True)

        return disk, remount

    yield mount
    for disk in mounted:
        subprocess.run(["umount", "-l", str(disk)], capture_output=True)


@pytest.fixture
def page_pool_runs(monkeypatch):
    """Long-report thresholds lowered (a worker for every page, parts of 2 pages), so that a
    test's short report is drawn as a long one would be; returns the list of the ``workers``
    each ``analyze_pool.run`` call was given (None: its own rule), to tell the pool was used."""
    from devmon_sync.analyze import pool as analyze_pool
    from devmon_sync.report import render

    runs = []
    real_run = analyze_pool.run

    def spy(*args, **kwargs):
        runs.append(kwargs.get("workers"))
        return real_run(*args, **kwargs)

    monkeypatch.setattr(analyze_pool, "run", spy)
    monkeypatch.setattr(render, "MIN_PAGES_PER_WORKER", 1)
    monkeypatch.setattr(render, "PAGES_PER_PART", 2)
    return runs

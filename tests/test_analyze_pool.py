"""``devmon analyze --jobs`` and ``devmon report --jobs``: rovers analysed in a process pool
(``devmon_sync.analyze.pool``) give what a serial run gives, in the same order, with the
same errors, and Ctrl+C or SIGTERM leaves neither a worker nor a traceback behind.

The pool starts only from ``MIN_ROVERS_PER_WORKER`` rovers a worker; this world has six
rovers, so the tests lower the threshold to make the pool run.
"""

from __future__ import annotations

import argparse
import json
import dataclasses
import os
import signal
import subprocess
import sys
import textwrap
import time
from datetime import datetime, timedelta, timezone
from pathlib import Path

import numpy as np
import pytest

from analysis.cleaning import find_gaps
from analysis.pipeline import AnalysisOptions
from devmon_sync.analyze import pool as analyze_pool
from devmon_sync.analyze.rovers import analyze_devices
from devmon_sync.cli import build_parser
from devmon_sync.cli.args import jobs as jobs_arg
from devmon_sync.report import ReportOptions, build_report
from devmon_sync.server import WorldSize
from devmon_sync.store import Mirror, browse, queries

from support import rovers_by_scenario, synced_mirror

ROOT = Path(__file__).resolve().parents[1]
WORLD = WorldSize(sites=3, devices=16, days=60)


@pytest.fixture(scope="module")
def mirror_path(tmp_path_factory):
    return synced_mirror(tmp_path_factory.mktemp("pool") / "mirror.duckdb", WORLD)


@pytest.fixture
def pool_runs(monkeypatch) -> list:
    """The pool for any number of rovers; the list collects the worker counts it ran with
    (so a test knows the pool ran, not the serial path)."""
    monkeypatch.setattr(analyze_pool, "MIN_ROVERS_PER_WORKER", 1)
    runs = []
    real = analyze_pool._run_pool

    def spy(work, tasks, workers, mirror, progress):
        runs.append(workers)
        return real(work, tasks, workers, mirror, progress)

    monkeypatch.setattr(analyze_pool, "_run_pool", spy)
    return runs


def devmon(*args: str) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, "-m", "devmon_sync", *args], capture_output=True,
                          text=True, timeout=120)


def test_the_pool_analyses_every_rover_as_a_serial_run_does(mirror_path, pool_runs):
    with Mirror.open(mirror_path, read_only=True) as m:
        serial = analyze_devices(m, [], AnalysisOptions(), jobs=1)
        assert not pool_runs
        pooled = analyze_devices(m, [], AnalysisOptions(), jobs=2)
    assert pool_runs == [2]
    assert [a.serial_number for a in pooled] == [a.serial_number for a in serial]
    assert len(serial) == 6
    for a, b in zip(serial, pooled):
        assert json.dumps(a.summary(), default=str) == json.dumps(b.summary(), default=str)
        assert np.array_equal(a.kept, b.kept) and np.array_equal(a.outliers, b.outliers)
        for name in ("east_m", "north_m", "up_m"):
            assert np.array_equal(getattr(a.displacement, name), getattr(b.displacement, name))
        assert a.velocity == b.velocity and a.recent_velocity == b.recent_velocity
        assert {k: v.sigma_m_per_yr for k, v in a.trends.items()} == \
            {k: v.sigma_m_per_yr for k, v in b.trends.items()}


def _pid_once_two_work(mirror, folder: str, k: int) -> tuple[int, int]:
    """A task that notes which process ran it, then waits (up to a minute) until two
    processes have run tasks: so the calling process and a worker each run some."""
    Path(folder, str(os.getpid())).touch()
    deadline = time.monotonic() + 60
    while len(os.listdir(folder)) < 2 and time.monotonic() < deadline:
        time.sleep(0.01)
    return k, os.getpid()


def test_the_calling_process_works_beside_the_workers(tmp_path):
    """With two jobs, one worker is spawned and the calling process takes chunks from the
    same list meanwhile (it no longer waits idle for the workers to start): both run tasks,
    the outcomes come back in task order, and progress is reported on the calling thread,
    once a task, counting up."""
    import threading

    seen = []
    outcomes = analyze_pool.run(
        _pid_once_two_work, [(str(tmp_path), k) for k in range(40)], jobs=2, workers=2,
        progress=lambda done, total, index: seen.append((done, total, threading.get_ident())))
    assert [k for k, _ in outcomes] == list(range(40))
    pids = {pid for _, pid in outcomes}
    assert os.getpid() in pids and len(pids) == 2, pids
    assert {p.name for p in tmp_path.iterdir()} == {str(p) for p in pids}
    assert [d for d, _, _ in seen] == list(range(1, 41)) and {t for _, t, _ in seen} == {40}
    assert {ident for _, _, ident in seen} == {threading.get_ident()}


def test_a_rover_without_epochs_in_the_period_fails_the_same_way(mirror_path, pool_runs):
    """The error a serial run raises first (the first rover, in serial-number order, with
    too few epochs in the period) is the one raised, whichever worker met it."""
    with Mirror.open(mirror_path, read_only=True) as m:
        devices = [d for d in queries.gnss_devices(m) if d.epochs]
        end = max(d.last for d in devices)
        start = end - timedelta(hours=6)  # 6 hourly epochs: fewer than an analysis needs
        errors = []
        for jobs in (1, 2):
            with pytest.raises(ValueError) as err:
                analyze_devices(m, [], AnalysisOptions(), start, end, jobs=jobs)
            errors.append(str(err.value))
    assert pool_runs == [2]
    assert errors[0] == errors[1] and "epochs in the period" in errors[0]


def run_cli(argv: list[str], capsys) -> tuple[int, str]:
    args = build_parser().parse_args(argv)
    code = args.func(args)
    return code, capsys.readouterr().out


def test_devmon_analyze_prints_the_same_bytes_with_two_jobs(mirror_path, pool_runs, capsys):
    """Text and JSON, two frames side by side, through the command's own code."""
    for extra in ([], ["--json"], ["--projection", "enu", "--projection", "EPSG:32632"]):
        argv = ["analyze", "--db", str(mirror_path), *extra]
        one = run_cli([*argv, "--jobs", "1"], capsys)
        two = run_cli([*argv, "--jobs", "2"], capsys)
        assert one == two and one[0] == 0
    assert pool_runs == [2, 2, 2]
    assert len(json.loads(run_cli([*argv[:3], "--json", "--jobs", "2"], capsys)[1])) == 6


def test_a_report_built_with_two_jobs_is_the_same_report(mirror_path, pool_runs):
    """build_report with jobs=2 (the pool analyses, the progress reports each finished
    rover) gives the same report data, byte for byte, as with jobs=1 at the same creation
    time;
    rovers the period leaves without enough data keep the same reasons."""
    with Mirror.open(mirror_path, read_only=True) as m:
        rovers = rovers_by_scenario(queries.gnss_devices(m))
        chosen = tuple(rovers[s].serial_number for s in ("creep", "step", "stable"))
        now = browse.last_synced(m, list(chosen)) + timedelta(days=1)
        serial = build_report(m, ReportOptions(devices=chosen), now=now, jobs=1)
        steps = []
        pooled = build_report(m, ReportOptions(devices=chosen), now=now, jobs=2,
                              progress=lambda done, total, what: steps.append((done, total,
                                                                                what)))
        # a period inside one of the outlier rover's outages: it has no epochs there
        epochs = queries.gnss_epochs(m, rovers["outliers"].serial_number)
        gap = max(find_gaps(epochs["ts"]), key=lambda g: g.duration_s)
        start = gap.start.astype("datetime64[us]").item().replace(tzinfo=timezone.utc)
        period = ReportOptions(devices=tuple(d.serial_number for d in rovers.values()),
                               start=start + timedelta(hours=1),
                               end=start + timedelta(hours=gap.duration_s / 3600 - 1))
        partial = [build_report(m, period, now=now, jobs=jobs) for jobs in (1, 2)]
    assert pool_runs == [2, 2]
    assert [s[:2] for s in steps] == [(1, 3), (2, 3), (3, 3)]
    assert all(what.startswith("analysed ") for _, _, what in steps)
    # the same report data, field by field and array by array: the same PDF follows, since
    # the same data draws the same bytes here and in workers (test_report's test of that);
    # drawing both here cost CI 25 s
    assert differences(serial, pooled) == []
    assert [e.problem for e in partial[0].entries] == [e.problem for e in partial[1].entries]
    assert sum(bool(e.problem) for e in partial[0].entries) == 1
    assert [e.analysis.summary() if e.analysis else None for e in partial[0].entries] == \
        [e.analysis.summary() if e.analysis else None for e in partial[1].entries]


def differences(a, b, where: str = "data", seen: set | None = None) -> list[str]:
    """Where two report data differ (dataclasses, mappings, sequences and objects field by
    field; arrays exactly, NaN equal to NaN); [] when they are the same."""
    seen = set() if seen is None else seen
    if (id(a), id(b)) in seen:
        return []
    seen.add((id(a), id(b)))
    if type(a) is not type(b):
        return [f"{where}: {type(a).__name__} vs {type(b).__name__}"]
    if isinstance(a, np.ndarray):
        same = a.shape == b.shape and np.array_equal(a, b, equal_nan=a.dtype.kind in "fc")
        return [] if same else [f"{where}: arrays differ"]
    if isinstance(a, float):
        return [] if a == b or (a != a and b != b) else [f"{where}: {a!r} vs {b!r}"]
    if isinstance(a, dict):
        if list(a) != list(b):
            return [f"{where}: keys {list(a)} vs {list(b)}"]
        return [d for k in a for d in differences(a[k], b[k], f"{where}[{k!r}]", seen)]
    if isinstance(a, (list, tuple)):
        if len(a) != len(b):
            return [f"{where}: {len(a)} vs {len(b)} items"]
        return [d for i, (x, y) in enumerate(zip(a, b))
                for d in differences(x, y, f"{where}[{i}]", seen)]
    if dataclasses.is_dataclass(a):
        return [d for f in dataclasses.fields(a)
                for d in differences(getattr(a, f.name), getattr(b, f.name),
                                     f"{where}.{f.name}", seen)]
    if hasattr(a, "__dict__") and not callable(a):
        return differences(vars(a), vars(b), where, seen)
    return [] if a == b else [f"{where}: {a!r} vs {b!r}"]


@pytest.mark.parametrize("command", ["analyze", "report"])
@pytest.mark.parametrize("value", ["0", "-2", "two"])
def test_jobs_must_be_a_whole_number_from_one(command, value):
    args = ["--db", "never.duckdb", "--jobs", value]
    if command == "report":
        args += ["--site", "x", "--out", "never.pdf"]
    out = devmon(command, *args)
    assert out.returncode == 2
    assert (f"devmon {command}: error: argument --jobs: {value!r} is not a number of "
            f"processes: give a whole number from 1") in out.stderr
    assert "Traceback" not in out.stderr


def test_jobs_chooses_the_pool_only_when_it_pays():
    n = analyze_pool.MIN_ROVERS_PER_WORKER
    assert analyze_pool.worker_count(1, 10_000) == 0  # --jobs 1: in this process
    assert analyze_pool.worker_count(8, 2 * n - 1) == 0  # too few for two workers
    assert analyze_pool.worker_count(8, 2 * n) == 2
    assert analyze_pool.worker_count(4, 10_000) == 4
    cores = os.cpu_count() or 1
    assert analyze_pool.worker_count(None, 10_000) == (cores if cores > 1 else 0)
    assert build_parser().parse_args(["analyze", "--db", "x"]).jobs is None
    with pytest.raises(argparse.ArgumentTypeError):
        jobs_arg("1.5")


INTERRUPTED = textwrap.dedent("""
    import os, signal, sys, time
    sys.path.insert(0, {root!r})
    from devmon_sync.analyze import pool as analyze_pool

    def stopped(signum, frame):
        print("Stopped by SIGTERM.", file=sys.stderr)
        raise SystemExit(128 + signum)

    def slow(mirror, folder, k):
        open(os.path.join(folder, str(os.getpid())), "w").close()
        time.sleep(60)

    if __name__ == "__main__":
        # as in a terminal: a shell that started the tests in the background (CI under
        # nohup ... &) ignores SIGINT, and that is inherited, so Python never raises
        # KeyboardInterrupt; devmon run from a terminal always gets it.
        signal.signal(signal.SIGINT, signal.default_int_handler)
        signal.signal(signal.SIGTERM, stopped)
        try:
            analyze_pool.run(slow, [({folder!r}, k) for k in range(8)], jobs=2, workers=2)
        except KeyboardInterrupt:
            print("Interrupted.", file=sys.stderr)
            sys.exit(130)
""")


@pytest.mark.parametrize("how", ["ctrl-c", "sigterm"])
def test_ctrl_c_and_sigterm_stop_the_workers_without_a_traceback(tmp_path, how):
    """Ctrl+C reaches the whole process group (as a terminal sends it); SIGTERM only the
    parent (as a scheduler sends it).  Either way the run ends at once with its message and
    code, no traceback from the parent or a worker, and no worker left running."""
    folder = tmp_path / "pids"
    folder.mkdir()
    script = tmp_path / "interrupted.py"
    script.write_text(INTERRUPTED.format(root=str(ROOT), folder=str(folder)))
    proc = subprocess.Popen([sys.executable, str(script)], stdout=subprocess.PIPE,
                            stderr=subprocess.PIPE, text=True, start_new_session=True)
    try:
        deadline = time.monotonic() + 60
        while len(list(folder.iterdir())) < 2 and time.monotonic() < deadline:
            time.sleep(0.1)
        workers = [int(p.name) for p in folder.iterdir()]
        assert len(workers) == 2, "the workers did not start"
        if how == "ctrl-c":
            os.killpg(proc.pid, signal.SIGINT)
        else:
            proc.send_signal(signal.SIGTERM)
        _, stderr = proc.communicate(timeout=30)
    finally:
        if proc.poll() is None:
            os.killpg(proc.pid, signal.SIGKILL)
    assert proc.returncode == (130 if how == "ctrl-c" else 143), stderr
    assert "Traceback" not in stderr and "KeyboardInterrupt" not in stderr, stderr
    assert stderr.strip() == ("Interrupted." if how == "ctrl-c" else "Stopped by SIGTERM.")
    deadline = time.monotonic() + 10
    alive = workers
    while alive and time.monotonic() < deadline:
        alive = [pid for pid in workers if _running(pid)]
        time.sleep(0.1)
    assert not alive, f"workers left running: {alive}"


def _running(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    try:  # a zombie (exited, not yet reaped by init) is not running
        with open(f"/proc/{pid}/stat") as f:
            return f.read().split(")")[-1].split()[0] != "Z"
    except OSError:
        return True


def test_report_of_a_read_write_mirror_stays_in_this_process(mirror_path, pool_runs):
    """Workers cannot open a file another connection writes (DuckDB): then no pool."""
    with Mirror.open(mirror_path) as m:
        rovers = rovers_by_scenario(queries.gnss_devices(m))
        data = build_report(m, ReportOptions(devices=(rovers["stable"].serial_number,
                                                      rovers["creep"].serial_number)),
                            now=datetime(2026, 1, 2, tzinfo=timezone.utc), jobs=2)
    assert not pool_runs and len(data.analysed) == 2


def test_alarms_evaluated_by_the_pool_on_a_mirror_open_for_writing(mirror_path, pool_runs,
                                                                    tmp_path):
    """``devmon alarms --evaluate --jobs 2`` (and a sync's evaluation) holds the mirror
    open for writing, which no worker could open: the workers get each batch's inputs
    from this process instead, and the stored histories and results are the serial run's;
    the command says the same with either --jobs."""
    import shutil

    from devmon_sync.analyze.alarm_history import evaluate_alarms

    copy = tmp_path / "mirror.duckdb"
    shutil.copy(mirror_path, copy)
    with Mirror.open(copy) as m:
        rovers = [d.serial_number for d in queries.gnss_devices(m) if d.epochs]
        for sn in rovers:
            queries.set_alarm_levels(m, sn, "displacement", {"alert": 3.0, "alarm": 20.0})
            queries.set_alarm_levels(m, sn, "velocity", {"alert": 0.3, "alarm": 2.0})
        def stored_now() -> dict:  # each row but when it was written
            return {sn: [{k: v for k, v in row.items() if k != "evaluated_at"}
                         for row in queries.alarm_history(m, sn)] for sn in rovers}

        serial = evaluate_alarms(m, None, only_stale=False, jobs=1)
        stored = stored_now()
        assert not pool_runs
        pooled = evaluate_alarms(m, None, only_stale=False, jobs=2)
        assert pool_runs == [2]
        assert stored_now() == stored
    assert len(serial) == len(rovers) >= 4
    assert [(sn, getattr(a, "overall", a)) for sn, a in pooled] == \
        [(sn, getattr(a, "overall", a)) for sn, a in serial]
    assert any(rows for rows in stored.values())
    said = {jobs: devmon("alarms", "--db", str(copy), "--evaluate", "--jobs", jobs)
            for jobs in ("1", "2")}
    assert said["1"].returncode == said["2"].returncode == 0, said["2"].stderr
    assert said["1"].stdout == said["2"].stdout and "rovers evaluated" in said["1"].stdout


def test_a_syncs_alarm_evaluation_runs_on_the_pool_with_the_writing_mirror(mirror_path,
                                                                          pool_runs,
                                                                          tmp_path):
    """``devmon sync --jobs``: the evaluation after a sync (``after_sync``), with the
    mirror still open for writing, uses the pool and says what a serial one says."""
    import shutil

    from devmon_sync.analyze.alarm_history import after_sync

    lines = {}
    for jobs in (1, 2):
        copy = tmp_path / f"mirror-{jobs}.duckdb"
        shutil.copy(mirror_path, copy)
        with Mirror.open(copy) as m:
            for d in queries.gnss_devices(m):
                if d.epochs:
                    queries.set_alarm_levels(m, d.serial_number, "displacement",
                                             {"alert": 3.0, "alarm": 20.0})
            lines[jobs] = after_sync(m, jobs=jobs)
    assert pool_runs == [2]
    assert lines[1] == lines[2] and lines[1][0].startswith("Alarms: ")
    assert "failed" not in " ".join(lines[1])


def _sleepy(mirror, k: int) -> int:
    time.sleep(0.3)
    return k


def test_a_cancelled_pool_run_leaves_no_thread_behind():
    """A GUI cancels a long run by raising from ``progress``: the run stops with that
    error, and its thread that collects the workers' results ends too (it would otherwise
    wait for ever, one more thread in the window's process at every cancel)."""
    import threading

    class Cancelled(Exception):
        pass

    def progress(done: int, total: int, index: int) -> None:
        if done >= 2:
            raise Cancelled

    with pytest.raises(Cancelled):
        analyze_pool.run(_sleepy, [(k,) for k in range(40)], jobs=2, workers=2,
                         progress=progress)
    deadline = time.monotonic() + 10
    while time.monotonic() < deadline and any(
            t.name == "devmon-pool-results" for t in threading.enumerate()):
        time.sleep(0.05)
    assert not [t for t in threading.enumerate() if t.name == "devmon-pool-results"]

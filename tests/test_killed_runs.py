"""A `devmon sync` that is stopped from outside: SIGTERM stops it as Ctrl-C does (a message,
exit 143, the run recorded `cancelled`); SIGKILL leaves no chance to say anything, so the
next open of the mirror marks the run `interrupted` with its counts so far.  Real `devmon
sync` processes against a real reference server; real DuckDB files."""

from __future__ import annotations

import os
import re
import signal
import subprocess
import sys
import threading
import time

import duckdb
import pytest

from devmon_sync import api_contract as contract
from devmon_sync import cli
from devmon_sync.server import FaultConfig
from devmon_sync.store import Mirror, ledger

from support import KEY, start_server
from support import SMALL, snapshot, sync

RUN_LINE = re.compile(r"#(\d+) \S+ \S+ (\w+)\s+([\d,]+) requests?, ([\d,]+) readings?, "
                      r"([\d,]+) epochs?\b")


LIMITS = contract.ResponseLimits(max_points=8000, max_epochs=400)


@pytest.fixture(scope="module")
def slow_server():
    """Small answers, each a little slow: a sync of many windows that lasts several
    seconds (as in test_sync's SIGKILL test)."""
    srv = start_server(size=SMALL, limits=LIMITS, faults=FaultConfig(slow_rate=1.0, slow_s=0.1))
    yield srv
    srv.stop()


@pytest.fixture(scope="module")
def clean(tmp_path_factory):
    """What an uninterrupted sync of the slow server's world mirrors (the same answers,
    without the slowness, which only makes a sync last long enough to be stopped)."""
    db = tmp_path_factory.mktemp("clean") / "clean.duckdb"
    with start_server(size=SMALL, limits=LIMITS) as srv:
        assert sync(srv.base_url, db).status == "ok"
    return snapshot(db)


def devmon(*args: str) -> list[str]:
    return [sys.executable, "-m", "devmon_sync", *args]


def sync_command(base_url: str, db) -> list[str]:
    return devmon("sync", "--base-url", base_url, "--db", str(db), "--api-key", KEY,
                  "--rate-limit", "0")


# `devmon sync` that creates the file argv[1] once it has committed a group of windows
# holding readings (``Mirror._flush``), then goes on: a kill after it is a kill after a data commit,
# whatever the machine's pace (a fixed wait missed the first group on a loaded machine)
SYNC_MARKING_ITS_FIRST_COMMIT = """
import sys
from pathlib import Path
from devmon_sync import cli
from devmon_sync.store import mirror

mark, real = Path(sys.argv[1]), mirror.Mirror._flush

def flush(self, *args, **kwargs):
    held = any(w.kind == "readings" for w in self._pending)
    out = real(self, *args, **kwargs)
    if held:
        mark.touch()
    return out

mirror.Mirror._flush = flush
sys.exit(cli.main(sys.argv[2:]))
"""


def start_until_data_committed(command: list[str], mark):
    """``command`` (a `devmon sync`) running as ``SYNC_MARKING_ITS_FIRST_COMMIT``, once it
    has committed data (its mark exists; 120 s at most), and its stderr read by a thread."""
    argv = [sys.executable, "-c", SYNC_MARKING_ITS_FIRST_COMMIT, str(mark), *command[3:]]
    proc = subprocess.Popen(argv, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    lines: list[str] = []
    reader = threading.Thread(target=lambda: lines.extend(proc.stderr), daemon=True)
    reader.start()
    deadline = time.monotonic() + 120
    while not mark.exists() and proc.poll() is None and time.monotonic() < deadline:
        time.sleep(0.02)
    assert mark.exists(), "".join(lines)
    assert proc.poll() is None, "the sync ended before it could be stopped"
    return proc, reader, lines


def runs_shown(db) -> dict[int, tuple[str, int, int, int]]:
    """`devmon status`'s last runs: run id -> (status, requests, readings, epochs)."""
    r = subprocess.run(devmon("status", "--db", str(db)), capture_output=True, text=True,
                       timeout=120)
    assert r.returncode == 0, r.stderr
    return {int(m[1]): (m[2], int(m[3].replace(",", "")), int(m[4].replace(",", "")),
                        int(m[5].replace(",", "")))
            for m in RUN_LINE.finditer(r.stdout)}


def stored_runs(db) -> list[tuple]:
    con = duckdb.connect(str(db), read_only=True)
    try:
        return con.execute("SELECT run_id, status, requests, readings_rows, message "
                           "FROM sync_runs ORDER BY run_id").fetchall()
    finally:
        con.close()


def test_sigterm_stops_like_ctrl_c_and_sigkill_is_marked_interrupted_with_its_counts(
        slow_server, clean, tmp_path):
    db = tmp_path / "mirror.duckdb"
    command = sync_command(slow_server.base_url, db)

    # SIGTERM: a message, exit 143, the run cancelled with what it committed (sent once a
    # group holding readings is committed: 1.5 s into the data phase had none on a busy
    # machine)
    proc, reader, lines = start_until_data_committed(command, tmp_path / "before-term")
    proc.send_signal(signal.SIGTERM)
    proc.wait(60)
    reader.join(10)
    err = "".join(lines)
    assert proc.returncode == 143, (proc.returncode, err)
    assert "Traceback" not in err, err
    assert "SIGTERM" in err and "everything committed so far is kept" in err, err
    assert "run the same command to resume" in err, err
    status, requests, readings, _ = runs_shown(db)[1]
    assert status == "cancelled" and requests > 0 and readings > 0, (stored_runs(db), err)

    # SIGKILL: nothing is said; the next look at the mirror shows the run interrupted, with
    # the requests and rows of its last commit
    proc, reader, lines = start_until_data_committed(command, tmp_path / "before-kill")
    proc.send_signal(signal.SIGKILL)
    proc.wait(60)
    shown = runs_shown(db)
    status, requests, readings, _ = shown[2]
    assert status == "interrupted", shown
    assert requests > 0 and readings > 0, shown
    assert shown[1][0] == "cancelled"

    # the next sync marks it in the file too, and resumes to the clean mirror
    r = subprocess.run(command + ["--quiet"], capture_output=True, text=True, timeout=300)
    assert r.returncode == 0, r.stderr
    runs = stored_runs(db)
    assert [s for _, s, *_ in runs] == ["cancelled", "interrupted", "ok"], runs
    assert runs[1][2:4] == (requests, readings)
    assert "resume" in runs[1][4]
    assert snapshot(db) == clean


def _leave_a_run_running(db) -> None:
    """A process that begins a run and dies without a word (``os._exit``)."""
    code = ("import os\nfrom devmon_sync.store import Mirror\n"
            f"m = Mirror.open({str(db)!r})\n"
            "m.begin_run('http://127.0.0.1:1/v1', {})\n"
            "os._exit(9)\n")
    r = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True,
                       timeout=120)
    assert r.returncode == 9, r.stderr


def test_a_run_no_process_owns_is_shown_interrupted_and_marked_at_the_next_write(tmp_path):
    db = tmp_path / "m.duckdb"
    _leave_a_run_running(db)
    assert [r[1] for r in stored_runs(db)] == ["running"]
    assert runs_shown(db)[1][0] == "interrupted"  # read-only: shown, not yet written
    with Mirror.open(db) as mirror:  # read-write: written
        assert [r[1] for r in stored_runs_of(mirror)] == ["interrupted"]
        run = mirror.begin_run("http://127.0.0.1:1/v1", {})
        with Mirror.open(db) as again:  # this process's own run is alive: left running
            assert dict((r[0], r[1]) for r in stored_runs_of(again))[run] == "running"
        mirror.finish_run(run, "ok", 0)


def stored_runs_of(mirror) -> list[tuple]:
    return mirror.con.execute("SELECT run_id, status FROM sync_runs ORDER BY 1").fetchall()


def test_a_sigterm_that_duckdb_swallows_still_stops_the_sync(slow_server, clean, tmp_path,
                                                              monkeypatch, capsys):
    """A signal that lands while DuckDB runs a statement: DuckDB cuts the statement short,
    swallows the exception the handler raised and raises RuntimeError('Query interrupted')
    instead (as a real DuckDB does).  The sync still stops as asked: the message, 143, the
    run cancelled, a resume to the clean mirror."""
    real, commits = ledger.record_windows, []

    def record_windows(con, *args, **kwargs):
        commits.append(1)
        if len(commits) == 2:
            try:
                os.kill(os.getpid(), signal.SIGTERM)  # its handler runs before this returns
                time.sleep(5)
            except KeyboardInterrupt:
                raise RuntimeError("Query interrupted") from None
        return real(con, *args, **kwargs)

    def not_handled(signum, frame):  # should the sync not handle SIGTERM, fail, not die
        raise AssertionError("the sync left SIGTERM to its previous handler")

    monkeypatch.setattr(ledger, "record_windows", record_windows)
    previous = signal.signal(signal.SIGTERM, not_handled)
    db = tmp_path / "m.duckdb"
    try:
        code = cli.main(["sync", "--base-url", slow_server.base_url, "--db", str(db),
                         "--api-key", KEY, "--rate-limit", "0", "--quiet"])
    finally:
        assert signal.signal(signal.SIGTERM, previous) is not_handled  # put back as it was
    err = capsys.readouterr().err
    assert code == 143, err
    assert "Stopped by SIGTERM" in err and "everything committed so far is kept" in err, err
    assert "Traceback" not in err
    monkeypatch.undo()
    runs = stored_runs(db)
    assert [r[1] for r in runs] == ["cancelled"] and runs[0][3] > 0, runs
    assert sync(slow_server.base_url, db).status == "ok"
    assert snapshot(db) == clean


def _sigterm_here(then=None):
    """Send this process SIGTERM; its handler raises at once.  ``then(exc)``, when given,
    stands for a library that turns the exception into one of its own."""
    try:
        os.kill(os.getpid(), signal.SIGTERM)
        time.sleep(5)
    except KeyboardInterrupt as exc:
        if then is None:
            raise
        raise then(exc) from None


def _sync_in_process(slow_server, db, capsys) -> tuple[int, str]:
    previous = signal.getsignal(signal.SIGTERM)
    try:
        code = cli.main(["sync", "--base-url", slow_server.base_url, "--db", str(db),
                         "--api-key", KEY, "--rate-limit", "0", "--quiet"])
    finally:
        signal.signal(signal.SIGTERM, previous)
    return code, capsys.readouterr().err


def test_a_sigterm_while_the_run_ends_is_recorded_cancelled_not_left_running(
        slow_server, clean, tmp_path, monkeypatch, capsys):
    """The full suite once stored a SIGTERM-stopped run as `failed`, and a stress loop
    (90 random SIGTERMs) left one `running`: a stop landing while the finished sync saves
    what it learned of the service escaped the run's bookkeeping."""
    real = Mirror.save_profile

    def save_profile(self, profile):
        _sigterm_here()
        return real(self, profile)

    monkeypatch.setattr(Mirror, "save_profile", save_profile)
    db = tmp_path / "m.duckdb"
    code, err = _sync_in_process(slow_server, db, capsys)
    assert code == 143 and "Stopped by SIGTERM" in err and "Traceback" not in err, err
    monkeypatch.undo()
    assert [r[1] for r in stored_runs(db)] == ["cancelled"], stored_runs(db)
    assert sync(slow_server.base_url, db).status == "ok"
    assert snapshot(db) == clean


def test_a_sigterm_a_library_reports_as_another_error_is_still_a_stop(
        slow_server, tmp_path, monkeypatch, capsys):
    """A signal landing inside a library that swallows the exception and raises its own
    (here: a connection error) still ends the run `cancelled`, as asked, not `failed`."""
    real, commits = ledger.record_windows, []

    def record_windows(con, *args, **kwargs):
        commits.append(1)
        if len(commits) == 2:
            _sigterm_here(lambda exc: ConnectionResetError("connection reset by peer"))
        return real(con, *args, **kwargs)

    monkeypatch.setattr(ledger, "record_windows", record_windows)
    db = tmp_path / "m.duckdb"
    code, err = _sync_in_process(slow_server, db, capsys)
    assert code == 143 and "Stopped by SIGTERM" in err and "Traceback" not in err, err
    monkeypatch.undo()
    runs = stored_runs(db)
    assert [r[1] for r in runs] == ["cancelled"] and runs[0][3] > 0, runs


def test_a_sigterm_after_the_run_is_recorded_keeps_it_ok(slow_server, clean, tmp_path,
                                                         monkeypatch, capsys):
    """A stop that lands after the run's end was written does not rewrite it: the mirror
    is complete and says so."""
    real = Mirror.finish_run

    def finish_run(self, *args, **kwargs):
        real(self, *args, **kwargs)
        _sigterm_here()

    monkeypatch.setattr(Mirror, "finish_run", finish_run)
    db = tmp_path / "m.duckdb"
    code, err = _sync_in_process(slow_server, db, capsys)
    assert code == 143 and "Traceback" not in err, err
    monkeypatch.undo()
    assert [r[1] for r in stored_runs(db)] == ["ok"], stored_runs(db)
    assert snapshot(db) == clean

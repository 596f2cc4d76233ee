"""Every `devmon` command given bad arguments: exit status 2, one clear line saying what was
wrong (argparse's usage lines may come before it), and never a traceback.  The real CLI in a
process of its own, with real files in tmp_path (a mirror, a folder, a file that is no
mirror): each command in a fork of one warm process (``cli_forks``: a hundred commands
without a hundred Python start-ups, CI's budget), the login cases through `python -m
devmon_sync` itself.

`devmon gui` is only given bad options here: with good ones it would open a window."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest

from devmon_sync.cli import build_parser
from devmon_sync.server import WorldSize

from cli_forks import Forks
from support import synced_mirror

DEAD_URL = "http://127.0.0.1:9/v1"  # loopback, nothing listens: never reached by these cases
KEY = ["--api-key", "k", "--retries", "0"]  # and should one be, it fails at once

# (command and its arguments, what stderr's last line must say); {db} is a real mirror,
# {dir} a folder, {text} a file that is no mirror, {missing} a path where nothing is (and
# nothing must be left).
CASES = [
    # sync: bad base URLs (issue: each printed a traceback)
    (["sync", "--db", "{missing}", *KEY, "--base-url", "http://example.com/v1"],
     ["plain http", "--allow-insecure", "https://"]),
    (["sync", "--db", "{missing}", *KEY, "--base-url", "not a url"],
     ["base URL", "https://"]),
    (["sync", "--db", "{missing}", *KEY, "--base-url", "http://127.0.0.1:99999/v1"],
     ["base URL", "port", "1 to 65535"]),
    (["sync", "--db", "{missing}", *KEY, "--base-url", "https://host:abc/v1"],
     ["base URL", "port", "1 to 65535"]),
    (["sync", "--db", "{missing}", *KEY, "--base-url", "http://[::1/v1"],
     ["base URL", "IPv6"]),
    (["sync", "--db", "{missing}", *KEY, "--base-url", "ftp://example.com/v1"],
     ["base URL", "https://"]),
    (["sync", "--db", "{missing}", *KEY], ["--base-url"]),
    (["sync", "--db", "{missing}", "--base-url", DEAD_URL], ["--api-key", "DEVMON_API_KEY"]),
    (["sync", "--db", "{missing}", "--base-url", DEAD_URL, "--profile", "nope"],
     ["profile", "nope", "devmon login"]),
    # sync: the mirror file
    (["sync", "--db", "{dir}", *KEY, "--base-url", DEAD_URL], ["folder", "--db"]),
    (["sync", "--db", "{text}", *KEY, "--base-url", DEAD_URL],
     ["is a text file", "not a devmon mirror", "--db"]),
    (["sync", "--db", "{text}/m.duckdb", *KEY, "--base-url", DEAD_URL],
     ["Cannot create the folder", "--db"]),
    # sync: numbers and options
    (["sync", "--db", "{missing}", *KEY, "--base-url", DEAD_URL, "--lookback-hours", "-1"],
     ["--lookback-hours", "0 or more"]),
    (["sync", "--db", "{missing}", *KEY, "--base-url", DEAD_URL, "--lookback-hours", "x"],
     ["--lookback-hours"]),
    (["sync", "--db", "{missing}", *KEY, "--base-url", DEAD_URL, "--lookback-hours", "nan"],
     ["--lookback-hours", "0 or more"]),  # was a traceback (timedelta of NaN)
    (["sync", "--db", "{missing}", *KEY, "--base-url", DEAD_URL, "--lookback-hours", "inf"],
     ["--lookback-hours", "0 or more"]),
    (["sync", "--db", "{missing}", *KEY, "--base-url", DEAD_URL, "--rate-limit", "abc"],
     ["--rate-limit"]),
    (["sync", "--db", "{missing}", *KEY, "--base-url", DEAD_URL, "--rate-limit", "-5"],
     ["--rate-limit", "0"]),
    (["sync", "--db", "{missing}", *KEY, "--base-url", DEAD_URL, "--retries", "-1"],
     ["--retries"]),
    (["sync", "--db", "{missing}", *KEY, "--base-url", DEAD_URL, "--retries", "101"],
     ["--retries", "0 to 100"]),
    (["sync", "--db", "{missing}", *KEY, "--base-url", DEAD_URL, "--max-points", "0"],
     ["--max-points", "at least 1"]),
    (["sync", "--db", "{missing}", *KEY, "--base-url", DEAD_URL, "--max-range-days", "nan"],
     ["--max-range-days", "above 0"]),
    (["sync", "--db", "{missing}", *KEY, "--base-url", DEAD_URL, "--since", "garbage"],
     ["--since", "ISO 8601"]),
    (["sync", "--db", "{missing}", *KEY, "--base-url", DEAD_URL, "--bogus"],
     ["unrecognized arguments: --bogus"]),
    # status, export
    (["status", "--db", "{missing}"], ["no mirror", "devmon sync"]),
    (["status", "--db", "{dir}"], ["folder", "--db"]),
    (["status", "--db", "{text}"], ["is a text file", "not a devmon mirror", "--db"]),
    (["status", "--db", "{db}", "--bogus"], ["unrecognized arguments: --bogus"]),
    (["export", "--db", "{missing}", "--out", "{missing}"], ["no mirror", "devmon sync"]),
    (["export", "--db", "{text}", "--out", "{missing}"],
     ["is a text file", "not a devmon mirror", "--db"]),
    (["export", "--db", "{db}", "--out", "{text}"], ["is a file, not a folder", "--out"]),
    (["export", "--db", "{db}", "--out", "{text}/sub"], ["Cannot write into", "--out"]),
    (["export", "--db", "{db}", "--format", "xml", "--out", "{missing}"],
     ["--format", "invalid choice"]),
    (["export", "--db", "{db}"], ["--out", "required"]),
    # login (the key is never read: every case fails before)
    (["login", "--api-key-stdin"], ["--base-url", "required"]),
    (["login", "--base-url", "http://example.com/v1", "--api-key-stdin"],
     ["plain http", "--allow-insecure"]),
    # serve
    (["serve", "--port", "99999"], ["--port", "0 to 65535"]),
    (["serve", "--port", "abc"], ["--port"]),
    (["serve", "--sites", "0"], ["--sites", "at least 1"]),
    (["serve", "--days", "-3"], ["--days"]),
    (["serve", "--rate-limit", "-1"], ["--rate-limit"]),
    (["serve", "--rate-limit", "abc"], ["--rate-limit", "0 (no limit) or more"]),
    (["serve", "--max-points", "0"], ["--max-points"]),
    (["serve", "--max-range-days", "-1"], ["--max-range-days", "above 0"]),
    (["serve", "--fault-error-rate", "2"], ["--fault-error-rate", "between 0 and 1"]),
    (["serve", "--fault-slow-seconds", "-1"], ["--fault-slow-seconds", "0 or more"]),
    (["serve", "--fault-error-rate", "0.6", "--fault-drop-rate", "0.6"], ["fault rates"]),
    (["serve", "--fault-error-rate", "0.6", "--fault-drip-rate", "0.6"], ["fault rates"]),
    (["serve", "--fault-drip-rate", "x"], ["--fault-drip-rate"]),
    (["serve", "--misbehave", "nope=1"], ["--misbehave", "NAME=VALUE"]),
    (["serve", "--contract", "nope"], ["--contract", "nope"]),
    (["serve", "--api-key", ":"], ["--api-key"]),
    (["serve", "--now", "garbage"], ["--now", "ISO 8601"]),
    # probe
    (["probe", "--db", "{missing}", *KEY, "--base-url", "not a url"], ["base URL", "https://"]),
    (["probe", "--db", "{missing}", *KEY, "--base-url", "http://127.0.0.1:99999/v1"],
     ["base URL", "port"]),
    (["probe", "--db", "{missing}", *KEY, "--base-url", "http://example.com/v1"],
     ["plain http", "--allow-insecure"]),
    (["probe", "--db", "{dir}", *KEY, "--base-url", DEAD_URL], ["folder", "--db"]),
    (["probe", "--db", "{missing}", *KEY, "--base-url", DEAD_URL, "--max-epochs", "0"],
     ["--max-epochs"]),
    # verify
    (["verify", "--db", "{db}", *KEY, "--base-url", "not a url"], ["base URL", "https://"]),
    (["verify", "--db", "{db}", *KEY, "--base-url", "https://host:abc/v1"],
     ["base URL", "port"]),
    (["verify", "--db", "{db}", *KEY, "--base-url", "http://[::1/v1"], ["base URL", "IPv6"]),
    (["verify", "--db", "{missing}", *KEY, "--base-url", DEAD_URL], ["no mirror"]),
    (["verify", "--db", "{db}", *KEY, "--base-url", DEAD_URL, "--share", "2"],
     ["--share", "0.05"]),
    (["verify", "--db", "{db}", *KEY, "--base-url", DEAD_URL, "--budget", "0"],
     ["--budget", "at least 1"]),
    (["verify", "--db", "{db}", *KEY, "--base-url", DEAD_URL, "--share", "0"],
     ["--share", "0.05"]),
    (["verify", "--db", "{db}", *KEY, "--base-url", DEAD_URL, "--seed", "abc"], ["--seed"]),
    # analyze
    (["analyze", "--db", "{missing}"], ["no mirror", "devmon sync"]),
    (["analyze", "--db", "{dir}"], ["folder", "--db"]),
    (["analyze", "--db", "{text}"], ["is a text file", "not a devmon mirror", "--db"]),
    (["analyze", "--db", "{db}", "--from", "garbage"], ["--from", "ISO 8601"]),
    (["analyze", "--db", "{db}", "--from", "2026-13-01"], ["--from", "'2026-13-01'", "month 13"]),
    (["analyze", "--db", "{db}", "--to", "2026-02-30"], ["--to", "2026-02 has no day 30"]),
    (["analyze", "--db", "{db}", "--from", "2026-01-02", "--to", "2026-01-01"],
     ["--to", "later than --from"]),
    (["analyze", "--db", "{db}", "--method", "xyz"], ["--method", "invalid choice"]),
    (["analyze", "--db", "{db}", "--reference", "garbage"], ["reference", "first"]),
    (["analyze", "--db", "{db}", "--projection", "bogus"], ["bogus", "EPSG"]),
    (["analyze", "--db", "{db}", "--device", "NOPE"], ["NOPE", "serial number"]),
    # alarms
    (["alarms", "--db", "{db}"], ["--device", "required"]),
    (["alarms", "--db", "{missing}", "--device", "X"], ["no mirror"]),
    (["alarms", "--db", "{db}", "--device", "NOPE"], ["no device", "NOPE"]),
    (["alarms", "--db", "{db}", "--device", "X", "--displacement", "alert=x"],
     ["--displacement", "NAME=NUMBER"]),
    (["alarms", "--db", "{db}", "--device", "X", "--velocity", "alarm=5,alert=1"],
     ["--velocity", "ascending"]),
    (["alarms", "--db", "{db}", "--device", "X", "--parameter", "nouuid"],
     ["--parameter", "UUID:NAME=VALUE"]),
    (["alarms", "--db", "{db}", "--device", "X", "--parameter", ":alert=1"],
     ["--parameter", "UUID:NAME=VALUE"]),
    (["alarms", "--db", "{db}", "--device", "X", "--site", "Y"],
     ["--site", "not allowed with argument --device"]),
    (["alarms", "--db", "{db}", "--site", "NOPE"], ["no site", "NOPE", "sites:"]),
    (["alarms", "--db", "{db}", "--group", "NOPE", "--velocity", "alert=1"],
     ["no group", "NOPE", "groups:"]),
    (["alarms", "--db", "{db}", "--device", "X", "--displacement", "sideways:alert=1"],
     ["--displacement", "sideways", "vertical"]),
    (["alarms", "--db", "{db}", "--site", "x", "--velocity", "up:alert=2,alarm=1"],
     ["--velocity", "ascending"]),
    (["alarms", "--db", "{db}", "--confidence", "100"], ["--confidence 100", "percentage"]),
    (["alarms", "--db", "{db}", "--confidence", "ninety"], ["--confidence", "invalid float"]),
    (["alarms", "--db", "{db}", "--min-duration", "-2"], ["duration", "0 or more hours"]),
    (["alarms", "--db", "{db}", "--device", "X", "--confidence", "95"],
     ["--confidence", "whole mirror", "without --device"]),
    (["alarms", "--db", "{db}", "--device", "X", "--velocity", "up:alert=1", "--velocity",
      "up:alert=2"], ["velocity:up", "more than once"]),
    (["alarms", "--db", "{db}", "--device", "X", "--clear", "displacement:sideways"],
     ["--clear", "Unknown alarm quantity", "vertical"]),
    (["alarms", "--db", "{db}", "--group", "x", "--parameter", "1b6f:alert=1"],
     ["--parameter", "per device", "--device"]),
    # report
    (["report", "--db", "{db}", "--out", "{missing}"], ["--device --site --group", "required"]),
    (["report", "--db", "{db}", "--site", "x"], ["--out", "required"]),
    (["report", "--db", "{db}", "--site", "x", "--out", "{missing}.pdf", "--png-dpi", "20"],
     ["--png-dpi", "'20'", "from 50 to 600"]),
    (["report", "--db", "{missing}", "--site", "x", "--out", "{missing}.pdf"], ["no mirror"]),
    (["report", "--db", "{db}", "--site", "NOPE", "--out", "{missing}.pdf"], ["no site", "NOPE"]),
    (["report", "--db", "{db}", "--site", "x", "--out", "{missing}/sub/r.pdf"],
     ["does not exist", "output path"]),
    (["report", "--db", "{db}", "--site", "x", "--out", "{dir}"], ["directory", "file name"]),
    (["report", "--db", "{db}", "--site", "x", "--out", "{missing}.pdf", "--png-dir", "{text}"],
     ["PNG folder", "is a file"]),
    (["report", "--db", "{db}", "--site", "x", "--out", "{missing}.pdf", "--from", "nope"],
     ["--from", "ISO 8601"]),
    (["report", "--db", "{db}", "--device", "X", "--out", "{missing}.pdf", "--projection",
      "bogus"], ["bogus", "EPSG"]),
    # demo (nothing is synced: every case fails before the world is built)
    (["demo", "--sites", "0", "--dir", "{missing}"], ["--sites", "at least 1"]),
    (["demo", "--days", "abc", "--dir", "{missing}"], ["--days"]),
    (["demo", "--devices", "0", "--dir", "{missing}"], ["--devices", "at least 1"]),
    (["demo", "--dir", "{text}"], ["not a folder", "--dir"]),
    (["demo", "--dir", "{text}/sub"], ["not a folder", "--dir"]),
    # gui: bad options only (good ones open a window)
    (["gui", "--bogus"], ["unrecognized arguments: --bogus"]),
    # no such command
    (["nosuchcommand"], ["invalid choice", "nosuchcommand"]),
]


def _case_id(case) -> str:
    args = case[0]
    return " ".join(a for a in args if a not in KEY)[:70]


@pytest.fixture(scope="module")
def places(tmp_path_factory) -> dict[str, str]:
    root = tmp_path_factory.mktemp("places")
    (root / "folder").mkdir()
    (root / "notes.txt").write_text("not a mirror\n")
    return {"db": str(synced_mirror(root / "mirror.duckdb", WorldSize(sites=1, devices=6,
                                                                       days=3))),
            "dir": str(root / "folder"), "text": str(root / "notes.txt")}


@pytest.fixture(scope="module")
def env(tmp_path_factory) -> dict[str, str]:
    """No key, profile, keyring or default mirror of the user's is seen."""
    home = tmp_path_factory.mktemp("home")
    env = dict(os.environ, DEVMON_CONFIG_DIR=str(home / "config"),
               XDG_DATA_HOME=str(home / "data"), XDG_CONFIG_HOME=str(home / "xdg-config"),
               PYTHON_KEYRING_BACKEND="keyring.backends.fail.Keyring",
               QT_QPA_PLATFORM="offscreen")
    env.pop("DEVMON_API_KEY", None)
    return env


def test_the_table_covers_every_command():
    sub = next(a for a in build_parser()._actions if a.dest == "command")
    assert set(sub.choices) <= {case[0][0] for case in CASES}


@pytest.fixture(scope="module")
def forks(env):
    """``run(argv, cwd)``: a CompletedProcess of `devmon` with ``argv`` in a fork of one warm
    process, in ``env`` (``cli_forks``)."""
    warm = Forks(env)

    def run(argv: list[str], cwd: Path) -> subprocess.CompletedProcess:
        return warm.run(argv, cwd=cwd, env=env)

    yield run
    warm.close()


def check_one_clear_line(r: subprocess.CompletedProcess, says, places, tmp_path) -> None:
    assert "Traceback" not in r.stdout + r.stderr, r.stderr
    assert r.returncode == 2, (r.returncode, r.stdout, r.stderr)
    lines = r.stderr.strip().splitlines()
    assert lines, "nothing said"
    if not lines[0].startswith("usage:"):  # argparse shows its usage first; others say one line
        assert len(lines) == 1, r.stderr
    last = lines[-1]
    assert last.startswith(("devmon ", "devmon:")) and " error: " in last, last
    for text in says:
        assert text.format(**places) in last, (text, last)
    assert not any(tmp_path.iterdir()), "a failed command left a file behind"


@pytest.mark.parametrize("args, says", CASES, ids=[_case_id(c) for c in CASES])
def test_bad_arguments_give_one_clear_line_and_exit_2(args, says, places, forks, tmp_path):
    places = dict(places, missing=str(tmp_path / "nothing-here"))
    argv = [a.format(**places) for a in args]
    check_one_clear_line(forks(argv, tmp_path), says, places, tmp_path)


@pytest.mark.parametrize("url", ["not a url", "http://127.0.0.1:99999/v1", "http://[::1/v1"])
def test_login_with_a_bad_base_url_gives_one_clear_line(url, places, env, tmp_path):
    """Through `python -m devmon_sync` as a user runs it (the entry point the forks skip)."""
    argv = ["login", "--base-url", url, "--api-key-stdin"]
    r = subprocess.run([sys.executable, "-m", "devmon_sync", *argv], capture_output=True,
                       text=True, timeout=120, env=env, cwd=tmp_path, stdin=subprocess.DEVNULL)
    check_one_clear_line(r, ["base URL"], dict(places, missing=str(tmp_path / "nothing")),
                         tmp_path)

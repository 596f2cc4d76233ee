"""Issue 30, the command line: what a new user met in `devmon sync`, `status` and `analyze`.

- 30.9: a rate-limited sync was silent (no line while the pacer waited ~40 s) and its ETA
  ("0m06s") left out how long the limit makes the remaining requests wait;
- 30.7: `devmon status` said nothing of the rovers at an alarm level, and cut long names
  without a mark;
- 30.12: `devmon analyze` had no summary line, no --site/--group, and never printed the grid
  scale factor of its side-by-side frames; a Parquet file given as --db got DuckDB's words;
  a date with month 13 was "not an ISO 8601 date-time"; a crack meter given to analyze was
  "No GNSS rover"; "1 requests", "1 windows".

Real reference servers on loopback ports, real mirrors in tmp_path, the commands run in this
process (``devmon_sync.cli.main``) so their output is read with capsys.
"""

from __future__ import annotations

import json
import re

import duckdb
import pytest

from devmon_sync.cli import main, progress
from devmon_sync.client import ApiClient
from devmon_sync.client.pacing import SlidingWindowLimiter
from devmon_sync.server import WorldSize
from devmon_sync.store import Mirror
from devmon_sync.sync.engine import SyncEngine, SyncOptions

from http_stubs import FakeClock, MutatingProxy
from support import (KEY, SMALL, count_calls, one_second_rate_window, start_server,
                     sync)

TINY = WorldSize(sites=1, devices=4, days=2)


# ----------------------------------------------------------------- 30.9: rate-limited sync


def test_the_eta_floor_waits_for_the_oldest_requests_to_leave_the_window():
    """20 requests a minute, all 20 sent in the last 20 s: the next one waits until the
    oldest leaves the window, 40 s and more; "requests left / rate" said 6 s for two."""
    clock = FakeClock()
    limiter = SlidingWindowLimiter(20, 60.0, monotonic=clock.monotonic)
    start = clock.now
    for _ in range(20):
        slot, wait = limiter.try_acquire()
        assert slot is not None and wait == 0.0
        limiter.release(slot)
        clock.sleep(1.0)
    assert clock.now - start == 20.0
    assert limiter.least_seconds_for(0) == 0.0
    assert limiter.least_seconds_for(1) == pytest.approx(40.0)   # the first slot frees at 60
    assert limiter.least_seconds_for(2) == pytest.approx(41.0)
    assert limiter.least_seconds_for(21) == pytest.approx(100.0)  # one more window after them
    _, wait = limiter.try_acquire()
    assert wait == pytest.approx(40.0, abs=0.02)  # what the pacer then really waits


def test_the_eta_is_never_less_than_the_wait_before_the_next_request(tmp_path):
    """A sync at 3 requests a minute on a clock that only the pacer's waits move (the
    requests themselves go to a reference server): at every data window the ETA is at least
    the wait the pacer then makes before that window's request leaves."""
    clock = FakeClock()
    waits: list[tuple[int, float]] = []  # (requests sent before the wait, seconds)
    progress_seen: list = []
    with start_server(size=TINY) as srv, \
            ApiClient(srv.base_url, KEY, rate_limit_per_minute=3, sleep=clock.sleep,
                      monotonic=clock.monotonic) as client, \
            Mirror.open(tmp_path / "m.duckdb") as mirror:
        client.on_wait = lambda seconds, reason: waits.append((client.requests_sent, seconds))
        report = SyncEngine(client, mirror, SyncOptions(), on_progress=progress_seen.append).run()
    assert report.status == "ok"
    data = [p for p in progress_seen if p.phase in ("readings", "gnss")]
    assert len(data) >= 2 and sum(s for _, s in waits) > 60
    for p in data:
        before_next = sum(s for sent, s in waits if sent == p.requests)
        assert p.eta_s is not None and p.eta_s >= before_next - 0.05, (p, before_next)
    assert max(sum(s for sent, s in waits if sent == p.requests) for p in data) > 30


def test_a_rate_limited_sync_says_that_it_waits_for_the_rate_limit(tmp_path, monkeypatch,
                                                                     capsys):
    """The limit's window shrunk to a second on both sides (support.one_second_rate_window),
    and the line's threshold with it: the pacer's waits are said, as the limit they keep."""
    one_second_rate_window(monkeypatch)
    monkeypatch.setattr(progress, "WAIT_NOTE_S", 0.3, raising=False)
    with start_server(size=TINY) as srv:
        status = main(["sync", "--db", str(tmp_path / "m.duckdb"), "--base-url", srv.base_url,
                       "--api-key", KEY, "--rate-limit", "3"])
    err = capsys.readouterr().err
    assert status == 0, err
    said = re.findall(r"waiting (\d+) s for the rate limit \(3 requests/minute\)", err)
    assert said, err


def test_counts_of_one_are_said_in_the_singular(tmp_path, capsys):
    """"1 requests", "1 windows": the plan of a dry run and a sync of one window."""
    with start_server(size=TINY) as srv:
        db = str(tmp_path / "m.duckdb")
        base = ["--db", db, "--base-url", srv.base_url, "--api-key", KEY]
        assert main(["sync", *base, "--dry-run"]) == 0
        plan = capsys.readouterr().out
        assert main(["sync", *base, "--device", "DM24-33757", "--since",
                     "2025-12-31T12:00:00Z"]) == 0
        synced = capsys.readouterr().out
    assert re.search(r"readings: 1 request, ", plan), plan
    assert not re.search(r"\b1 (requests|windows|parameters|GNSS sensors)\b", plan + synced), \
        plan + synced
    assert re.search(r"in \d+ windows?, \d+ requests, ", synced), synced


# ----------------------------------------------------------------- 30.7: status and alarms

LONG_NAME = "Illgraben GNSS accelerating slope, north flank 003"  # over the 28-character column


@pytest.fixture(scope="module")
def world(tmp_path_factory) -> dict:
    """A small world synced through a proxy that gives the accelerating rover a long alias,
    with horizontal displacement levels on its site low enough that it reaches emergency
    (set and evaluated by `devmon alarms`, as a user would)."""
    from devmon_sync.cli import main as devmon_main

    renamed: list[str] = []

    def long_alias(method, path, payload):
        def walk(node):
            if isinstance(node, dict):
                names = f"{node.get('alias') or ''} {node.get('name') or ''}"
                if "accelerating" in names and node.get("serialNumber"):
                    node["alias"] = LONG_NAME
                    renamed.append(node["serialNumber"])
                for value in node.values():
                    walk(value)
            elif isinstance(node, list):
                for value in node:
                    walk(value)
        if method == "GET":
            walk(payload)

    db = tmp_path_factory.mktemp("cli30") / "mirror.duckdb"
    with start_server(size=SMALL) as srv, MutatingProxy(srv.base_url, mutate=long_alias) as proxy:
        assert sync(proxy.base_url, db).status == "ok"
    assert devmon_main(["alarms", "--db", str(db), "--site", "Illgraben slope",
                        "--displacement", "horizontal:alert=2,alarm=4,emergency=6"]) == 0
    return {"db": str(db), "accelerating": renamed[0]}


def test_status_lists_the_rovers_at_an_alarm_level_now(world, capsys):
    assert main(["status", "--db", world["db"]]) == 0
    out = capsys.readouterr().out
    lines = out.splitlines()
    at_level = [line for line in lines if line.strip().startswith(world["accelerating"])
                and "emergency" in line]
    assert at_level, out
    assert "emergency (horizontal displacement)" in at_level[0], at_level
    assert LONG_NAME[:27] + "…" in at_level[0], at_level  # cut where the column ends, marked
    count = [line for line in lines if re.search(r"\b1 of \d+ rovers with alarm levels\b", line)]
    assert count and "1 emergency" in count[0], out


def test_status_reads_the_histories_of_the_rovers_at_a_level_at_once(world, tmp_path,
                                                                     monkeypatch, capsys):
    """`devmon status` read the alarm history of each rover at a level in a query of its
    own (issue 31: no per-device query left); one query for them all now, and the same
    lines: every rover of a site whose levels all of them exceed, each level it is at."""
    import shutil

    from devmon_sync.store import queries

    db = str(tmp_path / "levels.duckdb")
    shutil.copy(world["db"], db)
    # a rule that calls a level reached at even odds: most rovers are at one
    assert main(["alarms", "--db", db, "--confidence", "50", "--min-duration", "1"]) == 0
    assert main(["alarms", "--db", db, "--site", "Illgraben slope",
                 "--displacement", "3d:alert=0.001,alarm=0.002"]) == 0
    reads = count_calls(monkeypatch, queries, "alarm_history", "alarm_histories")
    capsys.readouterr()
    assert main(["status", "--db", db]) == 0
    out = capsys.readouterr().out
    at_level = [line for line in out.splitlines() if "(3D displacement)" in line]
    assert len(at_level) >= 4, out
    assert reads == {"alarm_history": 0, "alarm_histories": 1}, reads


def test_every_status_table_marks_a_cut_name_and_counts_in_words(world, capsys):
    """The freshness table cut names at 28 characters without a mark, and "Last runs" said
    "1 problems"; every table of `devmon status` marks a cut name with "…"."""
    assert main(["status", "--db", world["db"]]) == 0
    out = capsys.readouterr().out
    rows = [line for line in out.splitlines() if line.strip().startswith(world["accelerating"])]
    assert rows and all(LONG_NAME not in row for row in rows), rows
    assert all("…" in row for row in rows), rows  # the alarm list and the freshness table
    assert not re.search(r"\b1 (requests|problems|readings|epochs)\b", out), out


# ----------------------------------------------------------------- 30.12: analyze


def test_analyze_ends_with_a_summary_line(world, capsys):
    """255 lines and no summary: the last line now says how many rovers, which are at a
    level, and which moves fastest."""
    assert main(["analyze", "--db", world["db"], "--jobs", "1"]) == 0
    last = capsys.readouterr().out.strip().splitlines()[-1]
    assert last.startswith("Analysed 8 rovers"), last
    assert "1 at an alarm level (emergency: " + world["accelerating"] in last, last
    assert "fastest" in last and world["accelerating"] in last, last


@pytest.mark.parametrize("scope", [["--site", "illgraben SLOPE"],
                                   ["--group", "Illgraben slope: GNSS"]])
def test_analyze_takes_a_site_or_a_group(world, scope, capsys):
    assert main(["analyze", "--db", world["db"], *scope, "--json"]) == 0
    serials = {r["serial_number"] for r in json.loads(capsys.readouterr().out)}
    assert world["accelerating"] in serials and len(serials) == 8, serials
    assert main(["analyze", "--db", world["db"], "--site", "Mattmark dam"]) == 2
    err = capsys.readouterr().err
    assert "Mattmark dam" in err and "no GNSS rover" in err and "Traceback" not in err, err


def test_analyze_side_by_side_prints_each_frames_grid_scale_factor(world, capsys):
    """The README: east and north of a projection are "scaled by the grid scale factor,
    which the table also prints"; with local ENU first it never was."""
    assert main(["analyze", "--db", world["db"], "--device", world["accelerating"],
                 "--projection", "enu", "--projection", "101"]) == 0
    out = capsys.readouterr().out
    side = out[out.index("side by side"):]
    row = [line for line in side.splitlines() if "scale factor" in line]
    assert row and re.search(r"-\s+0\.99\d{5}", row[0]), side
    assert any("convergence" in line and "°" in line for line in side.splitlines()), side


def test_a_crack_meter_given_to_analyze_is_named_as_one(world, capsys):
    assert main(["analyze", "--db", world["db"], "--device", "Mattmark Crackmeter 12"]) == 2
    err = capsys.readouterr().err.strip().splitlines()[-1]
    assert "is a crack meter, not a GNSS rover" in err, err
    assert "devmon export" in err and "devmon gui" in err, err
    assert "No GNSS rover" not in err, err


def test_a_crack_meter_given_to_report_is_named_as_one(world, capsys, tmp_path):
    """It said "no GNSS rover in 1 device (Mattmark Crackmeter 12)"."""
    out = tmp_path / "r.pdf"
    assert main(["report", "--db", world["db"], "--device", "Mattmark Crackmeter 12",
                 "--out", str(out)]) == 2
    err = capsys.readouterr().err.strip().splitlines()[-1]
    assert "is a crack meter, not a GNSS rover" in err, err
    assert "in 1 device" not in err and not out.exists(), err


def test_gnss_levels_on_a_crack_meter_are_refused_and_nothing_is_set(world, capsys):
    """`devmon alarms --device <crack meter> --displacement ...` set them silently: levels
    no analysis of that device will ever read."""
    for option, levels in (("--displacement", "alert=10,alarm=20"),
                           ("--velocity", "horizontal:alert=1")):
        assert main(["alarms", "--db", world["db"], "--device", "Mattmark Crackmeter 12",
                     option, levels]) == 2
        err = capsys.readouterr().err.strip().splitlines()[-1]
        assert "is a crack meter, not a GNSS rover" in err, err
        assert "--parameter" in err, err
    assert main(["alarms", "--db", world["db"], "--device", "Mattmark Crackmeter 12"]) == 0
    assert "set on the device" not in capsys.readouterr().out


def test_a_crack_meter_shows_no_gnss_level_of_its_site_as_applying(world, capsys):
    """Its site's displacement levels were listed as applying to the crack meter ("from site
    Mattmark dam"), which no analysis of it would ever read."""
    site = ["alarms", "--db", world["db"], "--site", "Mattmark dam"]
    assert main([*site, "--displacement", "alert=10,alarm=20"]) == 0
    try:
        capsys.readouterr()
        assert main(["alarms", "--db", world["db"], "--device", "Mattmark Crackmeter 12"]) == 0
        out = capsys.readouterr().out
    finally:
        assert main([*site, "--clear", "displacement"]) == 0
    levels = out.split("Rule (whole mirror)")[0]
    assert "alert >= 10 mm" not in levels and "from site" not in levels, levels
    assert "No displacement or velocity level: " in levels, levels
    assert "is a crack meter, not a GNSS rover" in levels, levels


def test_a_month_13_is_named_as_the_reason(world, capsys):
    with pytest.raises(SystemExit) as stop:
        main(["analyze", "--db", world["db"], "--from", "2026-13-01"])
    assert stop.value.code == 2
    err = capsys.readouterr().err.strip().splitlines()[-1]
    assert "'2026-13-01'" in err and "month 13" in err, err
    assert "ISO 8601 date-time with a timezone" not in err, err


# ----------------------------------------------------------------- 30.12: files that are no mirror


def test_a_parquet_file_given_as_the_mirror_is_named_as_one(tmp_path, capsys):
    """DuckDB opens a Parquet file as an empty database in memory: status printed
    "Catalog Error: Cannot launch in-memory database in read-only mode!", and a sync would
    have written into memory and lost it all."""
    parquet = tmp_path / "readings.parquet"
    duckdb.connect().execute(f"COPY (SELECT 1 AS a) TO '{parquet}' (FORMAT parquet)")
    before = parquet.read_bytes()
    assert main(["status", "--db", str(parquet)]) == 2
    err = capsys.readouterr().err.strip()
    assert len(err.splitlines()) == 1 and "is a Parquet file, not a devmon mirror" in err, err
    assert "Catalog Error" not in err and "--db" in err, err
    for dry_run in ([], ["--dry-run"]):  # refused before any request: none could be answered
        assert main(["sync", "--db", str(parquet), "--base-url", "http://127.0.0.1:9/v1",
                     "--api-key", KEY, "--retries", "0", *dry_run]) == 2
        err = capsys.readouterr().err
        assert "is a Parquet file, not a devmon mirror" in err, err
    assert parquet.read_bytes() == before


def test_the_bar_knows_a_rate_limit_wait_by_its_kind_not_its_wording(capsys):
    """The bar read the client's words ("pacing to N requests per minute") with a regular
    expression: reworded, a wait would pass unsaid.  The client says what kind of wait it
    is (``WaitReason``); the words are only for people."""
    from devmon_sync.cli.progress import Bar
    from devmon_sync.client.pacing import WaitReason

    bar = Bar(quiet=False)
    bar.waiting(38.0, WaitReason("keeping under the service's limit", "pacing", per_minute=20))
    bar.waiting(38.0, WaitReason("pacing to 20 requests per minute", "retry"))
    assert capsys.readouterr().err.splitlines() == [
        "waiting 38 s for the rate limit (20 requests/minute)"]

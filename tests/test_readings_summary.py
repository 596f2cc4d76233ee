"""Issue 31, point 4: a long plot and its statistics read the readings' 6-hour summaries.

A year plot in a 1B-reading mirror scanned every parameter's readings of the year (1.0 s for
the decimated series alone, as much again for the side panel's statistics).  Each commit now
keeps a summary per parameter and 6-hour slot (``store/summary.py``), and a long range is
read from the slots it covers whole plus the raw readings of its partial ends.  Here, on a
mirror synced from the reference server: the summary equals an aggregate of the readings
after a sync and after re-syncs that replace windows; the statistics from it equal the raw
ones; its decimation keeps every reading's extremes bucket by bucket (buckets of whole
slots), the range's total and the nearest points outside; a migrated older mirror gets it.
"""

from __future__ import annotations

import shutil
from datetime import datetime, timedelta, timezone

import numpy as np
import pytest
from support import KEY, NOW, SMALL, devmon, start_server, sync, synced_mirror

from devmon_sync.store import Mirror, browse, summary
from devmon_sync.store.schema import MIGRATIONS

UTC = timezone.utc


@pytest.fixture(scope="module")
def mirror_path(tmp_path_factory):
    return synced_mirror(tmp_path_factory.mktemp("summary") / "mirror.duckdb", SMALL)


@pytest.fixture(scope="module")
def mirror(mirror_path):
    with Mirror.open(mirror_path, read_only=True) as m:
        yield m


def _busiest(mirror, n: int = 3) -> list[str]:
    """The parameters with the most readings, faulty ones first among equals."""
    return [r[0] for r in mirror.con.execute(
        "SELECT parameter_uuid::VARCHAR FROM readings GROUP BY 1 "
        "ORDER BY count(*) - count(value) DESC, count(*) DESC, 1 LIMIT ?", [n]).fetchall()]


def _ranges(mirror, key: str) -> list[tuple[datetime | None, datetime | None]]:
    """Open ends, slot-aligned ends, ends inside a slot, a range past the last reading."""
    first, last = mirror._row("SELECT min(ts), max(ts) FROM readings WHERE parameter_uuid = ?",
                              [key])
    first, last = first.astimezone(UTC), last.astimezone(UTC)
    aligned = summary.slot_start(summary.slot_of(first) + 2)
    return [(None, None), (aligned, aligned + timedelta(days=9)),
            (first + timedelta(hours=7, minutes=13, microseconds=5),
             last - timedelta(hours=3, minutes=1)),
            (first - timedelta(days=3), last + timedelta(days=3))]


def test_the_summary_equals_an_aggregate_of_the_readings_after_a_sync(mirror):
    assert mirror._row("SELECT count(*) FROM readings_summary")[0] > 0
    assert summary.mismatches(mirror.con) == 0


def test_resyncs_that_replace_windows_keep_the_summary_exact(mirror_path, tmp_path):
    """A day later, then the same day again with every window re-read (the past re-checked
    whole), then the mirror's oldest days changed by hand and synced back."""
    db = tmp_path / "m.duckdb"
    shutil.copy(mirror_path, db)  # the module's full sync, a copy this test may change
    with start_server(size=SMALL, now=NOW + timedelta(days=1, hours=5)) as srv:
        assert sync(srv.base_url, db).status == "ok"
        assert sync(srv.base_url, db, recheck_share=1.0).status == "ok"
    with Mirror.open(db) as m:
        assert summary.mismatches(m.con) == 0
        m.con.execute("UPDATE readings_summary SET max_value = max_value + 1 WHERE slot = "
                      "(SELECT min(slot) FROM readings_summary)")
        assert summary.mismatches(m.con) > 0  # the check sees a wrong slot


def test_statistics_from_the_summary_equal_the_raw_ones(mirror):
    for key in _busiest(mirror):
        for start, end in _ranges(mirror, key):
            raw = browse.readings_stats(mirror, key, start, end, via_summary=False)
            fast = browse.readings_stats(mirror, key, start, end, via_summary=True)
            assert raw["count"] > 0
            for name in ("count", "faulty", "min", "max", "first_time", "first_value",
                         "last_time", "last_value"):
                assert fast[name] == raw[name], (name, start, end)
            for name in ("mean", "rate_per_day"):
                assert fast[name] == pytest.approx(raw[name], rel=1e-9, abs=1e-12), name


def _slot_buckets(ts_us: np.ndarray, start_us: int, a: int, width: int) -> np.ndarray:
    """The summary's bucket of each reading: -1 before the first whole slot ``a``, then
    ``width`` slots a bucket."""
    k = (ts_us // summary.SLOT_US - a) // width
    return np.where(ts_us < a * summary.SLOT_US, -1, k)


def test_decimation_from_the_summary_keeps_each_buckets_extremes(mirror):
    buckets = 25
    for key in _busiest(mirror):
        for start, end in _ranges(mirror, key)[1:3]:
            raw = browse.readings(mirror, key, start, end)
            fast = browse.readings_decimated(mirror, key, start, end, buckets,
                                             via_summary=True)
            assert fast["decimated"] and fast["total"] == len(raw["ts"])
            ts_us = raw["ts"].astype("datetime64[us]").astype(np.int64)
            start_us = int(np.datetime64(start.replace(tzinfo=None), "us").astype(np.int64))
            a = -(-start_us // summary.SLOT_US)
            span = (int(np.datetime64(end.replace(tzinfo=None), "us").astype(np.int64)) + 1
                    ) // summary.SLOT_US - a
            width = max(1, -(-span // buckets))
            k = _slot_buckets(ts_us, start_us, a, width)
            got = set(zip(fast["ts"].astype(np.int64).tolist(), fast["value"].tolist()))
            valid = ~np.isnan(raw["value"])
            for bucket in np.unique(k[valid]):
                sel = valid & (k == bucket)
                values = raw["value"][sel]
                lo = (int(ts_us[sel][np.argmin(values)]), float(values.min()))
                hi = (int(ts_us[sel][np.argmax(values)]), float(values.max()))
                assert lo in got and hi in got, (bucket, start, end)
            inside = fast["ts"][(fast["ts"] >= raw["ts"][0]) & (fast["ts"] <= raw["ts"][-1])]
            assert len(inside) <= 2 * (span // width + 3)
            assert np.all(np.diff(fast["ts"].astype(np.int64)) > 0)  # in time order


@pytest.mark.parametrize("near", [summary.NEAR_SLOTS, 0], ids=["near", "searched-further"])
@pytest.mark.parametrize("shift", [timedelta(0), timedelta(minutes=1)],
                         ids=["ends-on-slots", "ends-inside-slots"])
def test_the_nearest_points_outside_the_range_come_from_the_summary_too(mirror, monkeypatch,
                                                                        near, shift):
    """From the raw readings of the end's slot, else the nearest summarised slot (looked
    for within NEAR_SLOTS first, then further)."""
    monkeypatch.setattr(summary, "NEAR_SLOTS", near)
    key = _busiest(mirror, 1)[0]
    _, (start, end), _, _ = _ranges(mirror, key)
    start, end = start + shift, end - shift
    every = browse.readings(mirror, key)
    valid = ~np.isnan(every["value"])
    t, v = every["ts"][valid], every["value"][valid]
    s64, e64 = (np.datetime64(x.replace(tzinfo=None), "us") for x in (start, end))
    before, after = np.flatnonzero(t < s64)[-1], np.flatnonzero(t > e64)[0]
    fast = browse.readings_decimated(mirror, key, start, end, 10, via_summary=True)
    assert (fast["ts"][0], fast["value"][0]) == (t[before], v[before])
    assert (fast["ts"][-1], fast["value"][-1]) == (t[after], v[after])


def test_a_range_with_few_readings_comes_back_whole(mirror):
    key = _busiest(mirror, 1)[0]
    _, (start, _), _, _ = _ranges(mirror, key)
    end = start + timedelta(hours=13)
    fast = browse.readings_decimated(mirror, key, start, end, 1500, via_summary=True)
    raw = browse.readings_decimated(mirror, key, start, end, 1500, via_summary=False)
    assert not fast["decimated"]
    assert np.array_equal(fast["ts"], raw["ts"])
    assert np.array_equal(fast["value"], raw["value"], equal_nan=True)


def test_only_a_long_range_of_a_large_mirror_pays(mirror, monkeypatch):
    key = _busiest(mirror, 1)[0]
    assert not summary.pays(mirror.con, datetime(2025, 1, 1, tzinfo=UTC), NOW)  # 115k rows
    monkeypatch.setattr(summary, "RAW_SCAN_ROWS", 1000)
    assert summary.pays(mirror.con, datetime(2025, 1, 1, tzinfo=UTC), NOW)
    assert not summary.pays(mirror.con, NOW - timedelta(hours=11), NOW)  # under two slots
    found = browse.readings_decimated(mirror, key, None, None, 20)  # chosen on its own
    assert found["decimated"] and len(found["ts"]) <= 2 * 20 + 2


def _schema_before_summaries(mirror_path, tmp_path) -> tuple:
    """A copy of the mirror as the devmon before the summaries left it, and the version of
    the migration that adds them."""
    older = tmp_path / "older.duckdb"
    older.write_bytes(mirror_path.read_bytes())
    version = next(v for v, _, sql in MIGRATIONS if "readings_summary" in sql)
    with Mirror.open(older) as m:
        m.con.execute("DROP TABLE readings_summary")
        m.con.execute("DELETE FROM schema_migrations WHERE version = ?", [version])
    return older, version


def test_a_mirror_of_the_schema_before_gets_the_summary_by_its_migration(mirror_path,
                                                                         tmp_path):
    older, version = _schema_before_summaries(mirror_path, tmp_path)
    with Mirror.open(older) as m:  # upgraded on opening
        assert m._row("SELECT count(*) FROM readings_summary")[0] > 0
        assert summary.mismatches(m.con) == 0


def test_the_estimate_holds_at_a_billion_readings(tmp_path):
    """The streams of a 1B-reading mirror (1,902 parameters x 10 years of 10-minute
    readings): the estimate's product overflowed 64-bit integers in DuckDB."""
    with Mirror.open(tmp_path / "big.duckdb") as m:
        m.con.execute("INSERT INTO stream_stats SELECT 'readings', uuid(), 525888, "
                      "TIMESTAMPTZ '2016-01-01 00:00:00+00', TIMESTAMPTZ '2026-01-01 00:00:00+00' "
                      "FROM range(1902)")
        assert summary.pays(m.con, datetime(2025, 1, 1, tzinfo=UTC), NOW)  # ~100M readings
        assert not summary.pays(m.con, datetime(2025, 12, 12, tzinfo=UTC), NOW)  # ~5M


def _window(keys: list[str], start: datetime, end: datetime, step_s: int, values) -> tuple:
    """(proof, table) of readings of ``keys`` every ``step_s`` in [start, end], as a sync
    commits them: ``values(n)`` gives the values (NaN: a faulty point)."""
    import pyarrow as pa

    from devmon_sync.store.ledger import WindowProof

    first_us, last_us = int(start.timestamp() * 1e6), int(end.timestamp() * 1e6)
    times = np.arange(first_us, last_us + 1, step_s * 10**6, dtype=np.int64)
    codes = np.repeat(np.arange(len(keys), dtype=np.int32), len(times))
    value = values(len(codes))
    table = pa.table({
        "parameter_uuid": pa.DictionaryArray.from_arrays(pa.array(codes), pa.array(keys)),
        "ts": pa.array(np.tile(times, len(keys)), pa.timestamp("us", tz="UTC")),
        "value": pa.array(value, pa.float64(), mask=np.isnan(value))})
    ms = np.full(len(keys), times[0] / 1000.0)
    proof = WindowProof("readings", keys, start, end, [len(times)] * len(keys), ms,
                        np.full(len(keys), times[-1] / 1000.0), gaps_may_exist=True)
    return proof, table


def test_ties_faulty_points_appends_and_replacements_keep_the_summary_exact(tmp_path):
    """Values on a 0.5 grid (ties for every extreme), 10 % faulty, windows that end inside
    a slot (the next one merges the slot's kept summary), then a window replacing part of
    them (its edge slots read again): the summary equals the SQL aggregate throughout."""
    rng = np.random.default_rng(7)

    def quantised(n):
        v = np.round(rng.normal(0, 2, n) * 2) / 2
        v[rng.random(n) < 0.1] = np.nan
        return v

    keys = [str(__import__("uuid").UUID(int=i + 1)) for i in range(3)]
    t0 = datetime(2026, 1, 1, tzinfo=UTC)
    with Mirror.open(tmp_path / "ties.duckdb") as m:
        m.con.execute("INSERT INTO sync_runs (run_id, status) VALUES (1, 'running')")
        m.con.execute("INSERT INTO parameters (uuid) SELECT unnest(?::UUID[])", [keys])
        for start, end in ((t0, t0 + timedelta(hours=10, minutes=3)),
                           (t0 + timedelta(hours=10, minutes=4), t0 + timedelta(days=2)),
                           (t0 + timedelta(hours=20, minutes=30), t0 + timedelta(days=1))):
            m.commit_readings(1, *_window(keys, start, end, 60, quantised))
            assert summary.mismatches(m.con) == 0, (start, end)
        raw = browse.readings_stats(m, keys[0], t0, t0 + timedelta(days=2), via_summary=False)
        fast = browse.readings_stats(m, keys[0], t0, t0 + timedelta(days=2), via_summary=True)
        assert fast["count"] == raw["count"] and fast["max"] == raw["max"]


def test_points_an_answer_holds_outside_its_window_are_not_stored(tmp_path):
    """A table holding points before and after its window (as a service may send them):
    only the window's are inserted and counted, the stored points beside it are untouched,
    the summary stays exact; a table holding only the window's points is stored whole."""
    keys = [str(__import__("uuid").UUID(int=i + 1)) for i in range(2)]
    t0 = datetime(2026, 1, 1, tzinfo=UTC)
    ones = np.ones
    with Mirror.open(tmp_path / "edges.duckdb") as m:
        m.con.execute("INSERT INTO sync_runs (run_id, status) VALUES (1, 'running')")
        m.con.execute("INSERT INTO parameters (uuid) SELECT unnest(?::UUID[])", [keys])
        first = _window(keys, t0, t0 + timedelta(hours=6), 600, ones)
        assert m.commit_readings(1, *first) == 2 * 37
        proof, _ = _window(keys, t0 + timedelta(hours=7), t0 + timedelta(hours=8), 600,
                           ones)
        _, wider = _window(keys, t0 + timedelta(hours=5), t0 + timedelta(hours=10), 600,
                           lambda n: np.full(n, 2.0))
        assert m.commit_readings(1, proof, wider) == 2 * 7  # 07:00 to 08:00, every 10 min
        stored = m.con.execute(
            "SELECT count(*), count(*) FILTER (value = 2), min(ts) FILTER (value = 2), "
            "max(ts) FILTER (value = 2) FROM readings").fetchone()
        assert stored == (2 * (37 + 7), 2 * 7, t0 + timedelta(hours=7),
                          t0 + timedelta(hours=8))
        assert summary.mismatches(m.con) == 0


def test_an_answer_with_its_streams_in_another_order_gives_the_same_summary(tmp_path):
    """The same rows committed with the answer's streams in the window's order, reversed
    (left grouped, not sorted), and shuffled point by point (sorted): the same summaries
    and statistics to the last bit, each equal to the SQL aggregate."""
    import pyarrow as pa

    keys = [str(__import__("uuid").UUID(int=i + 1)) for i in range(4)]
    t0 = datetime(2026, 1, 1, tzinfo=UTC)
    rng = np.random.default_rng(3)

    def values(n):
        v = np.round(rng.normal(0, 2, n) * 4) / 4
        v[rng.random(n) < 0.05] = np.nan
        return v

    windows = [_window(keys, t0 + timedelta(hours=13 * i),
                       t0 + timedelta(hours=13 * i + 13) - timedelta(milliseconds=1), 300,
                       values) for i in range(3)]
    orders = {"as asked": lambda n, k: np.arange(n), "reversed": lambda n, k: np.concatenate(
        [np.flatnonzero(k == key) for key in range(len(keys) - 1, -1, -1)]),
              "shuffled": lambda n, k: rng.permutation(n)}
    seen = []
    for name, order in orders.items():
        with Mirror.open(tmp_path / f"{name}.duckdb") as m:
            m.con.execute("INSERT INTO sync_runs (run_id, status) VALUES (1, 'running')")
            m.con.execute("INSERT INTO parameters (uuid) SELECT unnest(?::UUID[])", [keys])
            for i, (proof, table) in enumerate(windows):
                codes = table.column("parameter_uuid").combine_chunks().indices.to_numpy()
                taken = table.take(pa.array(order(table.num_rows, codes)))
                m.commit_readings(1, proof, taken, continues=i > 0)
            assert summary.mismatches(m.con) == 0, name
            seen.append([m.con.execute(f"SELECT * FROM {t} ORDER BY ALL").fetchall()
                         for t in ("readings_summary", "stream_stats")])
    assert seen[0] == seen[1] == seen[2]
    assert len(seen[0][0]) > 3 * len(keys)  # several slots a stream


def test_appends_that_continue_merge_the_slot_their_run_wrote_without_reading_it(
        tmp_path, monkeypatch):
    """Issue 31: a window that continues the one its run committed just before merges the
    kept summary of its start's slot from what that commit wrote (no read of
    ``readings_summary``); rows staged out of order, a window of fewer streams and a commit
    rolled back (what it wrote must not be merged afterwards) leave the summary and the
    statistics exact."""
    import pyarrow as pa

    from test_stream_stats import differences

    reads = []
    stored_pieces = summary._stored_pieces
    monkeypatch.setattr(summary, "_stored_pieces",
                        lambda *a: reads.append(a[2]) or stored_pieces(*a))
    rng = np.random.default_rng(3)

    def noisy(n):
        v = rng.normal(0, 1, n)
        v[rng.random(n) < 0.1] = np.nan
        return v

    keys = [str(__import__("uuid").UUID(int=i + 1)) for i in range(3)]
    t0 = datetime(2026, 1, 1, 1, 30, tzinfo=UTC)
    edges = [t0 + timedelta(hours=h, minutes=m) for h, m in
             ((0, 0), (10, 3), (20, 31), (33, 7), (40, 0), (47, 59))]
    with Mirror.open(tmp_path / "tails.duckdb") as m:
        run = m.begin_run("http://test.invalid/v1", {})
        for i, (a, b) in enumerate(zip(edges, edges[1:])):
            proof, table = _window(keys, a if i == 0 else a + timedelta(milliseconds=1), b,
                                   60, noisy)
            if i == 1:  # the rows out of stream and time order
                table = table.take(pa.array(rng.permutation(table.num_rows)))
            m.commit_readings(run, proof, table, continues=i > 0)
            assert summary.mismatches(m.con) == 0 and differences(m) == [], (a, b)
        assert reads == [summary.slot_of(edges[0])]  # the first window's only
        # fewer streams: what the copy holds of the others is not needed
        a = edges[-1] + timedelta(milliseconds=1)
        proof, table = _window(keys[:2], a, a + timedelta(hours=5), 60, noisy)
        m.commit_readings(run, proof, table, continues=True)
        assert summary.mismatches(m.con) == 0 and differences(m) == []
        assert len(reads) == 1
        # a commit that fails after its summary was written rolls back: the next append
        # merges what the file holds, not what the failed commit wrote
        b = a + timedelta(hours=5, milliseconds=1)
        failed = _window(keys[:2], b, b + timedelta(hours=3), 60, noisy)
        with pytest.raises(Exception):
            m.commit_readings(run, *failed, quarantine=pa.table({"not": ["a quarantine"]}),
                              continues=True)
        proof, table = _window(keys[:2], b, b + timedelta(hours=4), 60, noisy)
        m.commit_readings(run, proof, table, continues=True)
        assert summary.mismatches(m.con) == 0 and differences(m) == []
        assert len(reads) == 2
        m.finish_run(run, "ok", 0)


def test_readings_before_1970_fall_in_the_same_slots_in_sql_and_in_the_commits(tmp_path):
    """DuckDB's ``//`` truncates where Python's rounds down: a reading before 1970 (a
    logger's unset clock) must be summed in the same slot by both."""
    keys = [str(__import__("uuid").UUID(int=9))]
    start = datetime(1969, 12, 31, 1, 30, tzinfo=UTC)
    with Mirror.open(tmp_path / "old.duckdb") as m:
        m.con.execute("INSERT INTO sync_runs (run_id, status) VALUES (1, 'running')")
        m.commit_readings(1, *_window(keys, start, start + timedelta(hours=30), 600,
                                      lambda n: np.arange(n, dtype=float)))
        assert summary.mismatches(m.con) == 0
        slots = [r[0] for r in m.con.execute("SELECT slot FROM readings_summary ORDER BY 1")
                 .fetchall()]
        assert slots[0] == summary.slot_of(start) == -4


def test_devmon_sync_says_it_upgrades_an_older_mirror_before_doing_so(mirror_path, tmp_path):
    """The upgrade that builds the summaries takes about a minute at 1B readings: the
    command says so first instead of seeming to hang."""
    older, version = _schema_before_summaries(mirror_path, tmp_path)
    with start_server(size=SMALL) as srv:
        said = devmon("sync", "--db", str(older), "--base-url", srv.base_url, "--api-key", KEY,
                      "--rate-limit", "0", "--quiet")
    assert said.returncode == 0, said.stderr
    assert f"Upgrading the mirror from schema {version - 1} to {version}, once" in said.stderr
    with Mirror.open(older, read_only=True) as m:
        assert summary.mismatches(m.con) == 0

#!/usr/bin/env python3
"""How the cost of what users do grows with the mirror's size (issue 31, point 4): at 10M,
100M and 1B readings, the opening of the desktop window, a year plot, ``devmon status``, the
analysis of one site's rovers, the commit of one day's sync and ``devmon export``, each with
its wall and CPU seconds and its peak memory.

The mirrors are NOT made by a sync (a 1B-reading sync would take hours): each is created by
``Mirror.open`` (devmon's schema) and filled with plain SQL through ``duckdb.connect``, with
metadata that joins as a sync leaves it (sites, devices, sensors, parameters, groups, GNSS
configurations and solutions, site alarm levels), readings from ``generate_series``-like
``range()`` (N parameters x one reading every 10 minutes over 10 years, N = size / 525,888:
19 at 10M, 190 at 100M, 1,902 at 1B; 4 per device, 6 sites), inserted in time order in
chunks of about 50M rows (each row group then holds a few hours of every parameter, as daily
syncs leave it), a fixed GNSS part in every mirror (3 sites x 4 rovers, hourly epochs over
the 10 years, near 46.3N 7.6E, creeping a few mm a year), ``stream_stats`` rebuilt from the
data as migration 8 does, and one sync run with its cursors and one ledger window per
stream and week.  They are built once and cached under ``$DEVMON_BENCH_CACHE`` (default
``~/.cache/devmon-bench``) as ``scale-<size>.duckdb`` (with ``scale-<size>.json``: its
counts and build time), written as ``.partial`` and renamed when complete.

Each measurement runs in a fresh process (this script with ``--child OP --db PATH``), which
prints one ``RESULT {json}`` line: wall seconds, CPU seconds (``time.process_time``: every
thread, DuckDB's included) and peak memory (VmHWM, reset through ``/proc/self/clear_refs``
after the imports and the open, so it is the operation's peak; the open of ``open`` is the
operation).  Only the operation is timed:

* ``open``: ``Mirror.open(path, read_only=True)``, then every read of
  ``browse.OPENING_READS`` (what ``gui.main_window`` runs, as ``bench_open_large.py`` does);
* ``year_plot``: what the plot of one parameter's last 365 days reads (``gui/plot_view.py``):
  ``browse.readings_decimated`` to 1500 buckets (the canvas width in pixels) and
  ``browse.readings_stats`` (its side panel), from the readings' 6-hour summaries where
  ``browse`` chooses them; ``year_plot_raw``: the same from the raw readings (the baseline,
  as before the summaries);
* ``status``: what ``devmon status`` prints: ``Mirror.status_text()`` and
  ``cli.status.alarm_text``;
* ``analyze``: ``analyze_devices`` of the 4 rovers of one site (``AnalysisOptions.build()``,
  in this process);
* ``commit``: the mirror opened read-write in place (no copy), one new day after the last
  reading for every parameter, committed by ``Mirror.commit_readings`` in windows of at
  most 100,000 rows (a batch of parameters over the whole day), between ``begin_run`` and
  ``finish_run``; then the day is deleted and ``stream_stats``/``sync_cursors`` restored, so
  the cached file holds the same data again;
* ``export``: ``Mirror.export(dir, "parquet")`` (``devmon export``) into an empty folder,
  deleted afterwards with the bookkeeping rows it left in the mirror; skipped where the
  smaller size measured before predicts more than ``--export-limit`` seconds or more disk
  than is free (said so in the output).

A run that fails prints its error as its result (the export of the 100M mirror sometimes
runs out of the 256 MB DuckDB memory devmon sets); the table counts the runs that succeeded
and says how many failed.

    python benchmarks/bench_scaling.py                          # 10M, 100M, 1B: builds once
    python benchmarks/bench_scaling.py --sizes 1M,10M --repeat 1   # a quick look
    python benchmarks/bench_scaling.py --plot /tmp/scaling.png

Goals, checked at the largest size (1B): open < 0.5 s, year plot < 0.3 s, commit of one
day's sync < 2 s, peak memory < 1 GiB.  The machine is shared: read medians and growth.
"""

from __future__ import annotations

import argparse
import json
import math
import os
import platform
import shlex
import shutil
import statistics
import subprocess
import sys
import time
from dataclasses import dataclass
from datetime import UTC, datetime, timedelta
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO))

import duckdb  # noqa: E402

from devmon_sync.store import Mirror, summary  # noqa: E402
from devmon_sync.store.schema import LATEST_VERSION  # noqa: E402

END = datetime(2026, 1, 1, tzinfo=UTC)  # the newest data ends 10 minutes before it
PERIOD_DAYS = 3652  # 10 years
STEP_S = 600  # one reading every 10 minutes
PER_PARAMETER = PERIOD_DAYS * 86400 // STEP_S  # 525,888 readings
PARAMS_PER_DEVICE = 4
SITES = 6
GNSS_SITES, ROVERS_PER_SITE = 3, 4
EPOCH_STEP_S = 3600
CHUNK_ROWS = 50_000_000
BUCKETS = 1500  # the plot's width in pixels (gui/plot_view.py: the canvas width)
WINDOW_ROWS = 100_000  # rows a sync commits at most in one window
BASE_URL = "http://devmon-bench.invalid/v1"

OPS = ("open", "year_plot", "year_plot_raw", "status", "analyze", "commit", "export")
GOALS_S = {"open": 0.5, "year_plot": 0.3, "commit": 2.0}
MEMORY_GOAL_MIB = 1024.0
BUILD_DISK_FACTOR = 1.2  # free disk wanted: 1.2 x the file's expected size (12x 100M at 1B)
EXPORT_DISK_FACTOR = 1.5


# ============================================================================ sizes

def parse_size(text: str) -> int:
    """'10M' -> 10,000,000 ('k', 'M', 'B' or 'G'); a plain number as it is."""
    text = text.strip().upper()
    scale = {"K": 10**3, "M": 10**6, "B": 10**9, "G": 10**9}.get(text[-1:], 1)
    number = float(text[:-1] if scale != 1 else text)
    if number <= 0:
        raise argparse.ArgumentTypeError(f"a size must be positive, not {text}")
    return int(number * scale)


def size_label(n: int) -> str:
    """10,000,000 -> '10M': the cache file's name and the table's column."""
    for unit, scale in (("B", 10**9), ("M", 10**6), ("k", 10**3)):
        if n >= scale and n % scale == 0:
            return f"{n // scale}{unit}"
    return str(n)


@dataclass(frozen=True)
class Shape:
    """What a mirror of ``size`` readings holds: ``parameters`` series of 10-minute readings
    over 10 years, 4 a device, plus the fixed GNSS part."""

    size: int

    @property
    def parameters(self) -> int:
        return max(1, round(self.size / PER_PARAMETER))

    @property
    def loggers(self) -> int:
        return -(-self.parameters // PARAMS_PER_DEVICE)

    @property
    def rovers(self) -> int:
        return GNSS_SITES * ROVERS_PER_SITE

    @property
    def readings(self) -> int:
        return self.parameters * PER_PARAMETER

    @property
    def epochs(self) -> int:
        return self.rovers * PERIOD_DAYS * 86400 // EPOCH_STEP_S


# ============================================================================ building

def cache_root() -> Path:
    return Path(os.environ.get("DEVMON_BENCH_CACHE", Path.home() / ".cache" / "devmon-bench"))


def cached_mirror(size: int) -> Path:
    """The mirror of ``size`` readings, built on first use (minutes at 1B) and kept."""
    root = cache_root()
    path = root / f"scale-{size_label(size)}.duckdb"
    if path.exists():
        return path
    root.mkdir(parents=True, exist_ok=True)
    check_disk_for(size)
    partial = path.with_name(path.name + ".partial")
    for stale in (partial, Path(f"{partial}.wal"), Path(f"{partial}.tmp")):
        if stale.is_dir():
            shutil.rmtree(stale)
        stale.unlink(missing_ok=True)
    shape = Shape(size)
    print(f"building {path.name} directly in DuckDB (not by a sync): {shape.parameters:,} "
          f"parameters x {PER_PARAMETER:,} readings = {shape.readings:,} readings, "
          f"{shape.epochs:,} GNSS epochs...", flush=True)
    t = time.perf_counter()
    build(partial, shape)
    seconds = time.perf_counter() - t
    partial.rename(path)
    info = {"readings": shape.readings, "parameters": shape.parameters,
            "epochs": shape.epochs, "build_s": round(seconds, 1), "bytes": path.stat().st_size,
            "built_at": datetime.now(UTC).isoformat(timespec="seconds")}
    path.with_suffix(".json").write_text(json.dumps(info, indent=1))
    print(f"  built in {seconds:.0f} s: {path.stat().st_size / 1e9:.2f} GB", flush=True)
    return path


def check_disk_for(size: int) -> None:
    """Refuse to build a mirror the disk cannot hold: 1.2 x its expected size free (12 x
    the 100M file at 1B), the expected size scaled from the largest smaller cached one."""
    known = [(p.stat().st_size / Shape(parse_size(p.stem[6:])).readings, p)
             for p in cache_root().glob("scale-*.duckdb")]
    if not known:
        return  # nothing to scale from: small sizes come first
    per_reading, ref = max(known, key=lambda k: k[1].stat().st_size)
    needed = BUILD_DISK_FACTOR * per_reading * Shape(size).readings
    free = shutil.disk_usage(cache_root()).free
    if free < needed:
        raise SystemExit(f"Not building scale-{size_label(size)}.duckdb: it needs about "
                         f"{needed / 1e9:.1f} GB free ({BUILD_DISK_FACTOR:g} x "
                         f"{per_reading:.1f} bytes a reading, as {ref.name}), and "
                         f"{cache_root()} has {free / 1e9:.1f} GB. Free some space or set "
                         f"DEVMON_BENCH_CACHE to a larger disk.")


def build(path: Path, shape: Shape) -> None:
    """devmon's schema by ``Mirror.open``, then every table filled with plain SQL."""
    Mirror.open(path).close()
    con = duckdb.connect(str(path))
    try:
        con.execute("SET threads = 2")
        con.execute("SET memory_limit = '2GB'")
        build_metadata(con, shape)
        build_gnss(con, shape)
        build_readings(con, shape)
        build_stream_stats(con)
        summary.build(con)  # as the migration that added it does
        build_ledger(con)
        build_alarm_levels(con)
        con.execute("CHECKPOINT")
    finally:
        con.close()


def _uid(kind: str, index: str) -> str:
    """SQL of a deterministic UUID of ``kind`` and an SQL integer expression."""
    return f"md5('{kind}-' || ({index}))::UUID"


def _ts(dt: datetime) -> str:
    """A TIMESTAMPTZ literal (the build's statements run as one script, without parameters)."""
    return f"TIMESTAMPTZ '{dt.isoformat()}'"


def _serial(prefix: str, index: str) -> str:
    return f"'{prefix}' || lpad(({index})::VARCHAR, 5, '0')"


def build_metadata(con: duckdb.DuckDBPyConnection, shape: Shape) -> None:
    """Sites, groups (one a site), loggers with one sensor of 4 parameters, rovers with a
    GNSS sensor and its lat/lon/eh parameters, as the device tree and health join them."""
    start, end = _ts(END - timedelta(days=PERIOD_DAYS)), _ts(END)
    con.execute(f"""
        INSERT INTO sites (uuid, org_uuid, name, timezone, last_run_id)
        SELECT {_uid('site', 'i')}, {_uid('org', '0')}, 'Site ' || (i + 1), 'Europe/Zurich', 1
        FROM range({SITES}) t(i);
        INSERT INTO device_groups (uuid, name, last_run_id)
        SELECT {_uid('group', 'i')}, 'Group of site ' || (i + 1), 1 FROM range({SITES}) t(i);
        CREATE TEMP TABLE bench_devices AS
        SELECT {_serial('DM', 'i')} AS sn, 'Logger ' || i AS name, i % {SITES} AS site,
               {_uid('sensor', 'i')} AS sensor, 'tiltmeter' AS type, {STEP_S}.0 AS period
        FROM range({shape.loggers}) t(i)
        UNION ALL
        SELECT {_serial('GN', 'i')}, 'Rover ' || i, i // {ROVERS_PER_SITE},
               {_uid('gnss-sensor', 'i')}, 'gnss', {EPOCH_STEP_S}.0
        FROM range({shape.rovers}) t(i);
        INSERT INTO devices (serial_number, device_kind, display_name, name, site_uuid, lat,
                             lon, sampling_period_s, tx_period_s, state, connection_status,
                             last_seen, last_data, battery_percentage, power_source,
                             last_run_id)
        SELECT sn, 'physical', name, name, {_uid('site', 'site')}, 46.3 + site * 0.01,
               7.6 + site * 0.01, period, 3600, 'active', 'online', {end}, {end}, 87.5,
               'battery', 1 FROM bench_devices;
        INSERT INTO device_group_members SELECT {_uid('group', 'site')}, sn, 1 FROM bench_devices;
        INSERT INTO device_group_history SELECT {_uid('group', 'site')}, sn, NULL, NULL, 1
        FROM bench_devices;
        INSERT INTO sensors (uuid, device_serial_number, type, name, channel_index, is_active,
                             last_run_id)
        SELECT sensor, sn, type, type, 0, true, 1 FROM bench_devices;
        INSERT INTO parameters (uuid, device_serial_number, sensor_uuid, name, parameter_type,
                                base_unit, display_unit, display_precision, source_type,
                                read_index, created_at, last_run_id)
        SELECT {_uid('param', 'i')}, {_serial('DM', f'i // {PARAMS_PER_DEVICE}')},
               {_uid('sensor', f'i // {PARAMS_PER_DEVICE}')},
               ['tilt_x', 'tilt_y', 'temperature', 'voltage'][i % 4 + 1],
               ['tilt', 'tilt', 'temperature', 'voltage'][i % 4 + 1],
               ['mm/m', 'mm/m', 'degC', 'V'][i % 4 + 1], ['mm/m', 'mm/m', 'degC', 'V'][i % 4 + 1],
               3, 'sensor', i % 4, {start}, 1
        FROM range({shape.parameters}) t(i)
        UNION ALL
        SELECT {_uid('gnss-param', 'i')}, {_serial('GN', 'i // 3')},
               {_uid('gnss-sensor', 'i // 3')},
               ['lat', 'lon', 'eh'][i % 3 + 1], ['gnss_lat', 'gnss_lon', 'gnss_eh'][i % 3 + 1],
               ['deg', 'deg', 'm'][i % 3 + 1], ['deg', 'deg', 'm'][i % 3 + 1], 8, 'sensor',
               i % 3, {start}, 1
        FROM range({shape.rovers * 3}) t(i)""")


def build_gnss(con: duckdb.DuckDBPyConnection, shape: Shape) -> None:
    """The rovers' configurations and solutions, and hourly epochs over the 10 years in time
    order: fixed, 14 satellites, mm sigmas, each rover creeping 0-15 mm a year east and
    sinking a little, with a few mm of deterministic noise."""
    per_rover = PERIOD_DAYS * 86400 // EPOCH_STEP_S
    first_s = int((END - timedelta(days=PERIOD_DAYS)).timestamp())
    n = shape.rovers
    con.execute(f"""
        INSERT INTO device_gnss_config (device_serial_number, processing_mode, antenna_type,
                                        arp_height_m, azimuth_deg, lever_arm_compensation,
                                        is_base_station, last_run_id)
        SELECT {_serial('GN', 'i')}, 'static', 'LEIAR10', 0.0, 135.0, false, false, 1
        FROM range({n}) t(i);
        INSERT INTO gnss_solutions (sensor_uuid, device_serial_number, srid,
                                    projection_metadata, last_run_id)
        SELECT {_uid('gnss-sensor', 'i')}, {_serial('GN', 'i')}, 4326, '[]', 1
        FROM range({n}) t(i);
        INSERT INTO gnss_epochs (sensor_uuid, epoch_id, device_serial_number, ts, lat, lon, eh,
                                 sde, sdn, sdu, q, ns, ar)
        SELECT {_uid('gnss-sensor', 'rover')}, k, {_serial('GN', 'rover')},
               to_timestamp({first_s} + k * {EPOCH_STEP_S}),
               46.3 + rover // {ROVERS_PER_SITE} * 0.01 + rover % {ROVERS_PER_SITE} * 0.001
                   + 0.002 * sin(k * 1.7 + rover) / 111320,
               7.6 + rover // {ROVERS_PER_SITE} * 0.01
                   + (rover % {ROVERS_PER_SITE} * 0.005 * k / 8766
                      + 0.002 * cos(k * 2.3 + rover)) / (111320 * cos(radians(46.3))),
               1500 + rover * 10 - 0.001 * k / 8766 + 0.004 * sin(k * 0.9 + rover),
               0.002, 0.002, 0.004, 1, 14, 9.0
        FROM (SELECT r // {n} AS k, r % {n} AS rover FROM range({n * per_rover}) t(r))""")


def build_readings(con: duckdb.DuckDBPyConnection, shape: Shape) -> None:
    """Readings in time order (every parameter's reading of one time, then the next), in
    chunks of about 50M rows (whole time steps); values a slow sine per parameter, an
    offset and a trend, to 3 decimals."""
    n, steps = shape.parameters, PER_PARAMETER
    first_s = int((END - timedelta(days=PERIOD_DAYS)).timestamp())
    con.execute(f"CREATE TEMP TABLE bench_ids AS SELECT list({_uid('param', 'i')} ORDER BY i) "
                f"AS ids FROM range({n}) t(i)")
    per_chunk = max(1, CHUNK_ROWS // n)
    t = time.perf_counter()
    for k0 in range(0, steps, per_chunk):
        k1 = min(steps, k0 + per_chunk)
        con.execute(f"""
            INSERT INTO readings
            SELECT ids[r % {n} + 1], to_timestamp({first_s} + r // {n} * {STEP_S}),
                   round(5 * sin(r // {n} * 0.0436 + r % {n}) + r % {n} % 50
                         + r // {n} * 2e-6, 3)
            FROM range({k0 * n}, {k1 * n}) t(r), bench_ids""")
        done = k1 * n
        print(f"  readings {done:,} of {shape.readings:,} ({time.perf_counter() - t:.0f} s)",
              flush=True)


def build_stream_stats(con: duckdb.DuckDBPyConnection) -> None:
    """``stream_stats`` from the data, as migration 8 builds it."""
    con.execute("""
        INSERT OR REPLACE INTO stream_stats
            SELECT 'readings', parameter_uuid, count(*), min(ts), max(ts) FROM readings GROUP BY 2
            UNION ALL
            SELECT 'gnss', sensor_uuid, count(*), min(ts), max(ts) FROM gnss_epochs GROUP BY 2""")


def build_ledger(con: duckdb.DuckDBPyConnection) -> None:
    """One finished sync run, a cursor per stream at its newest point, and one ledger window
    per stream and week (``complete``): what the status and a commit read."""
    con.execute(f"""
        INSERT INTO sync_runs (run_id, started_at, finished_at, status, base_url, options,
                               requests, readings_rows, epoch_rows, problems, message, pid,
                               host, service_started_at)
        SELECT 1, {_ts(END)}, {_ts(END)} + INTERVAL 5 MINUTE, 'ok', '{BASE_URL}', '{{}}', 0,
               (SELECT count(*) FROM readings), (SELECT count(*) FROM gnss_epochs), 0, '',
               0, 'bench', {_ts(END)};
        INSERT INTO sync_cursors (stream, kind, key, cursor_ts, run_id, covered_until,
                                  newest_seen, history_searched_to)
        SELECT kind || ':' || key::VARCHAR, kind, key::VARCHAR, last_ts, 1, last_ts, last_ts,
               first_ts FROM stream_stats;
        INSERT INTO sync_windows (stream, window_start, window_end, rows, run_id, committed_at,
                                  first_ts, last_ts, verdict)
        SELECT kind || ':' || key::VARCHAR, w0, least(w0 + INTERVAL 7 DAY, last_ts),
               rows * 7 // (date_diff('day', first_ts, last_ts) + 1), 1, {_ts(END)}, w0,
               least(w0 + INTERVAL 7 DAY, last_ts), 'complete'
        FROM stream_stats, LATERAL (SELECT unnest(generate_series(first_ts, last_ts,
                                                                  INTERVAL 7 DAY)) AS w0)
        """)


def build_alarm_levels(con: duckdb.DuckDBPyConnection) -> None:
    """Displacement levels on the GNSS sites, so the analysis evaluates alarms and the
    window lists the levelled points."""
    con.execute(f"""
        INSERT INTO alarm_level_settings
        SELECT 'site', {_uid('site', 'i')}::VARCHAR, 'displacement', level, threshold, 'mm',
               {_ts(END)}
        FROM range({GNSS_SITES}) t(i),
             (VALUES ('alert', 20.0), ('alarm', 50.0), ('emergency', 100.0)) l(level, threshold)
        """)


# ============================================================================ the child

def peak_mib() -> float:
    """Peak resident memory of this process since the last ``reset_peak``, MiB."""
    with open("/proc/self/status") as f:
        for line in f:
            if line.startswith("VmHWM:"):
                return int(line.split()[1]) / 1024.0
    return float("nan")


def reset_peak() -> None:
    """Make VmHWM the current RSS (Linux: ``clear_refs`` 5), so the peak is the operation's
    and not the imports' or the open's."""
    try:
        with open("/proc/self/clear_refs", "w") as f:
            f.write("5")
    except OSError:
        pass  # then the peak includes what came before


class Measure:
    """Times a block: wall (``perf_counter``), CPU (``process_time``), peak RSS."""

    def __enter__(self) -> "Measure":
        reset_peak()
        self.wall, self.cpu = time.perf_counter(), time.process_time()
        return self

    def __exit__(self, *exc) -> None:
        self.wall = time.perf_counter() - self.wall
        self.cpu = time.process_time() - self.cpu
        self.peak = peak_mib()

    def result(self, **extra) -> dict:
        return {"wall_s": self.wall, "cpu_s": self.cpu, "peak_mib": self.peak, **extra}


def op_open(db: Path) -> dict:
    """The window's opening: the read-only open and every read of ``OPENING_READS``."""
    from devmon_sync.store import browse

    parts = {}
    with Measure() as m:
        t = time.perf_counter()
        mirror = Mirror.open(db, read_only=True)
        parts["open the file"] = time.perf_counter() - t
        for _key, name, read in browse.OPENING_READS:
            t = time.perf_counter()
            read(mirror)
            parts[name] = time.perf_counter() - t
    mirror.close()
    return m.result(parts=parts)


def op_year_plot(db: Path, via_summary: bool | None = None) -> dict:
    """One parameter's last 365 days as the plot asks for them: decimated to its width,
    and the side panel's statistics (``gui/plot_view.py`` reads both); the readings'
    summaries used where ``browse`` chooses them (``via_summary`` None)."""
    from devmon_sync.store import browse

    with Mirror.open(db, read_only=True) as mirror:
        key, last = mirror._row("SELECT key::VARCHAR, last_ts FROM stream_stats WHERE kind = "
                                "'readings' ORDER BY key LIMIT 1")
        start = last - timedelta(days=365)
        with Measure() as m:
            series = browse.readings_decimated(mirror, key, start, last, BUCKETS,
                                               via_summary=via_summary)
            stats = browse.readings_stats(mirror, key, start, last, via_summary=via_summary)
    return m.result(points=len(series["ts"]), total=series["total"], count=stats["count"])


def op_year_plot_raw(db: Path) -> dict:
    """The same from the raw readings (as before the summaries): the baseline."""
    return op_year_plot(db, via_summary=False)


def op_status(db: Path) -> dict:
    """What ``devmon status`` prints."""
    from devmon_sync.cli.status import alarm_text

    with Mirror.open(db, read_only=True) as mirror:
        with Measure() as m:
            text = mirror.status_text() + "\n" + alarm_text(mirror)
    return m.result(lines=text.count("\n") + 1)


def op_analyze(db: Path) -> dict:
    """The rovers of the first GNSS site, analysed in this process."""
    from analysis.pipeline import AnalysisOptions
    from devmon_sync.analyze.rovers import analyze_devices
    from devmon_sync.store import queries

    with Mirror.open(db, read_only=True) as mirror:
        rovers = queries.gnss_devices(mirror)
        site = min(d.site_uuid for d in rovers)
        serials = [d.serial_number for d in rovers if d.site_uuid == site]
        with Measure() as m:
            analyses = analyze_devices(mirror, serials, AnalysisOptions.build())
    return m.result(rovers=len(analyses), epochs=sum(len(a.t_all) for a in analyses))


def day_windows(keys: list[str], day: datetime) -> list[tuple]:
    """(proof, table) of one day of 10-minute readings of every parameter, in windows of at
    most ``WINDOW_ROWS`` rows (a batch of parameters over the day), as answers give them:
    parameter_uuid dictionary-encoded, ts timestamp[us, UTC], value float64."""
    import numpy as np
    import pyarrow as pa

    from devmon_sync.store.ledger import WindowProof

    per_day = 86400 // STEP_S
    offsets = np.arange(per_day, dtype=np.int64) * STEP_S * 10**6
    day_us = int(day.timestamp()) * 10**6
    batch = max(1, WINDOW_ROWS // per_day)
    out = []
    for i in range(0, len(keys), batch):
        chunk = keys[i:i + batch]
        codes = np.repeat(np.arange(len(chunk), dtype=np.int32), per_day)
        ts = np.tile(day_us + offsets, len(chunk))
        table = pa.table({
            "parameter_uuid": pa.DictionaryArray.from_arrays(pa.array(codes), pa.array(chunk)),
            "ts": pa.array(ts, pa.timestamp("us", tz="UTC")),
            "value": pa.array(np.sin(np.arange(len(ts)) * 0.01), pa.float64())})
        first_ms = np.full(len(chunk), day_us / 1000.0)
        proof = WindowProof("readings", chunk, day, day + timedelta(days=1, milliseconds=-1),
                            [per_day] * len(chunk), first_ms, first_ms + offsets[-1] / 1000.0,
                            gaps_may_exist=True)
        out.append((proof, table))
    return out


def op_commit(db: Path) -> dict:
    """One new day of every parameter committed in windows, in place; then removed again
    (one DELETE) with the run, its ledger rows, and ``stream_stats``/``sync_cursors`` as
    they were."""
    with Mirror.open(db, check=False) as mirror:
        last = mirror._row("SELECT max(last_ts) FROM stream_stats WHERE kind = 'readings'")[0]
        keys = [k for (k,) in mirror.con.execute(
            "SELECT key::VARCHAR FROM stream_stats WHERE kind = 'readings' ORDER BY 1"
        ).fetchall()]
        day = last + timedelta(seconds=STEP_S)
        windows = day_windows(keys, day)
        mirror.con.execute("CREATE TEMP TABLE kept_stats AS FROM stream_stats")
        mirror.con.execute("CREATE TEMP TABLE kept_cursors AS FROM sync_cursors")
        per_window = []
        with Measure() as m:
            run = mirror.begin_run(BASE_URL, {"bench": "scaling"})
            for proof, table in windows:
                t = time.perf_counter()
                mirror.commit_readings(run, proof, table)
                per_window.append(time.perf_counter() - t)
            mirror.finish_run(run, "ok", 0)
        rows = sum(t.num_rows for _, t in windows)
        t = time.perf_counter()
        restore_after_commit(mirror, run, last)
        cleanup = time.perf_counter() - t
    return m.result(windows=len(windows), rows=rows, per_window_s=per_window,
                    cleanup_s=cleanup)


def restore_after_commit(mirror: Mirror, run: int, last: datetime) -> None:
    """Leave the cached mirror as it was: the day's readings, the run and its ledger rows
    deleted, the streams' statistics and cursors as before."""
    con = mirror.con
    con.execute("BEGIN TRANSACTION")
    con.execute("DELETE FROM readings WHERE ts > ?", [last])
    summary.resummarise(con, last)
    for table in ("sync_windows", "sync_runs", "sync_problems"):
        con.execute(f"DELETE FROM {table} WHERE run_id = ?", [run])
    con.execute("UPDATE stream_stats s SET rows = k.rows, first_ts = k.first_ts, "
                "last_ts = k.last_ts FROM kept_stats k WHERE s.kind = k.kind AND s.key = k.key")
    con.execute("UPDATE sync_cursors c SET cursor_ts = k.cursor_ts, run_id = k.run_id, "
                "covered_until = k.covered_until, newest_seen = k.newest_seen "
                "FROM kept_cursors k WHERE c.stream = k.stream")
    con.execute("COMMIT")


def op_export(db: Path) -> dict:
    """``devmon export --format parquet`` into an empty folder (removed afterwards, with the
    bookkeeping rows the export left in the mirror)."""
    out = db.with_name(db.stem + "-export")
    shutil.rmtree(out, ignore_errors=True)
    with Mirror.open(db, check=False) as mirror:
        try:
            with Measure() as m:
                report = mirror.export(out, "parquet")
            size = sum(f.stat().st_size for f in out.rglob("*") if f.is_file())
        finally:
            shutil.rmtree(out, ignore_errors=True)
            mirror.con.execute("DELETE FROM export_partitions")
            mirror.con.execute("DELETE FROM export_folders")
    return m.result(rows=report.rows_written, files=report.files_written, bytes=size)


CHILD_OPS = {"open": op_open, "year_plot": op_year_plot, "year_plot_raw": op_year_plot_raw,
             "status": op_status,
             "analyze": op_analyze, "commit": op_commit, "export": op_export}


# ============================================================================ the parent

def upgrade_cached(db: Path) -> None:
    """A mirror cached by an older devmon upgraded in place, as a user's is on opening
    (the one-off cost said, with its peak memory)."""
    with duckdb.connect(str(db), read_only=True) as con:
        version = con.execute("SELECT max(version) FROM schema_migrations").fetchall()[0][0]
    if version >= LATEST_VERSION:
        return
    t, cpu = time.perf_counter(), time.process_time()
    Mirror.open(db).close()
    print(f"  {db.name}: upgraded from schema {version} to {LATEST_VERSION} in "
          f"{time.perf_counter() - t:.1f} s ({time.process_time() - cpu:.1f} CPU-s), peak "
          f"{peak_mib():.0f} MiB (this process)", flush=True)


def run_child(op: str, db: Path) -> dict:
    """One measurement in a fresh process; its RESULT line."""
    cmd = [sys.executable, str(Path(__file__).resolve()), "--child", op, "--db", str(db)]
    done = subprocess.run(cmd, cwd=REPO, capture_output=True, text=True)
    for line in done.stdout.splitlines():
        if line.startswith("RESULT "):
            return json.loads(line[len("RESULT "):])
    raise RuntimeError(f"{op} on {db.name} failed (exit {done.returncode}):\n"
                       f"{done.stderr[-3000:]}")


def export_skip(size: int, measured: dict[int, dict[str, list[dict]]],
                failures: dict[int, dict[str, str]], limit_s: float, db: Path) -> str | None:
    """Why the export is not measured at ``size`` (None: measure it): it failed at a smaller
    size, or the largest smaller size measured in this run, scaled by readings, predicts too
    long or too large."""
    smaller = [s for s in measured if s < size and measured[s].get("export")]
    failed = [s for s in measured if s < size and "export" in failures.get(s, {})
              and "export" not in measured[s]]
    if failed:
        return f"every run failed at {size_label(max(failed))} already"
    if not smaller:
        return None if size < 10**9 else "no smaller size exported in this run to predict it"
    ref = max(smaller)
    ratio = Shape(size).readings / Shape(ref).readings
    runs = measured[ref]["export"]
    seconds = statistics.median(r["wall_s"] for r in runs) * ratio
    disk = max(r["bytes"] for r in runs) * ratio * EXPORT_DISK_FACTOR
    free = shutil.disk_usage(db.parent).free
    if seconds > limit_s:
        return (f"predicted {seconds / 60:.0f} min a run ({size_label(ref)}'s x {ratio:.0f}), "
                f"over the --export-limit of {limit_s / 60:.0f} min")
    if disk > free:
        return f"predicted {disk / 1e9:.1f} GB with margin, {free / 1e9:.1f} GB free"
    return None


def measure_size(size: int, repeat: int, measured: dict, skips: dict,
                 export_limit_s: float) -> None:
    """Every operation ``repeat`` times on the mirror of ``size`` (into ``measured``: the
    runs that succeeded), and why any was skipped or how many runs failed (into ``skips``)."""
    db = cached_mirror(size)
    upgrade_cached(db)
    runs: dict[str, list[dict]] = {}
    skipped: dict[str, str] = {}
    measured[size], skips[size] = runs, skipped
    for op in OPS:
        if op == "export":
            why = export_skip(size, measured, skips, export_limit_s, db)
            if why:
                skipped[op] = why
                print(f"  {size_label(size):>5} {op:10} skipped: {why}", flush=True)
                continue
        done = [run_child(op, db) for _ in range(repeat)]
        failed = [r["error"] for r in done if "error" in r]
        if failed:
            skipped[op] = f"{len(failed)} of {repeat} runs failed: {failed[0]}"
            print(f"  {size_label(size):>5} {op:10} {skipped[op]}", flush=True)
        if len(failed) == len(done):
            continue
        runs[op] = [r for r in done if "error" not in r]
        walls = [r["wall_s"] for r in runs[op]]
        print(f"  {size_label(size):>5} {op:10} wall {min(walls):8.3f} min "
              f"{statistics.median(walls):8.3f} median s", flush=True)


def median(runs: list[dict], key: str) -> float:
    return statistics.median(r[key] for r in runs)


def print_table(measured: dict[int, dict[str, list[dict]]],
                skipped: dict[int, dict[str, str]]) -> None:
    print(f"\n{'operation':10} {'size':>5} {'readings':>15} {'wall min s':>11} "
          f"{'wall med s':>11} {'CPU med s':>10} {'peak MiB':>9}")
    for op in OPS:
        for size, runs in measured.items():
            head = f"{op:10} {size_label(size):>5} {Shape(size).readings:>15,}"
            if op not in runs:
                why = skipped.get(size, {}).get(op, "")
                print(f"{head} {'FAILED' if ' failed: ' in why else 'skipped':>11}")
                continue
            r = runs[op]
            failed = "  (some runs failed: below)" if op in skipped.get(size, {}) else ""
            print(f"{head} {min(x['wall_s'] for x in r):11.3f} {median(r, 'wall_s'):11.3f} "
                  f"{median(r, 'cpu_s'):10.3f} {max(x['peak_mib'] for x in r):9.0f}{failed}")
    print("(peak MiB: the highest of the runs)")


def print_details(measured: dict[int, dict[str, list[dict]]]) -> None:
    """Where the time goes: each opening read, the commit's windows, the plot's points."""
    sizes = [s for s in measured if "open" in measured[s]]
    if sizes:
        print(f"\nopening reads, median s: {'  '.join(f'{size_label(s):>8}' for s in sizes)}")
        for name in measured[sizes[0]]["open"][0]["parts"]:
            cells = [statistics.median(r["parts"][name] for r in measured[s]["open"])
                     for s in sizes]
            print(f"  {name:30} {'  '.join(f'{c:8.3f}' for c in cells)}")
    print("commit of one day, per window (median over runs of each run's median; max):")
    for s in (s for s in measured if "commit" in measured[s]):
        r = measured[s]["commit"]
        med = statistics.median(statistics.median(x["per_window_s"]) for x in r)
        worst = max(max(x["per_window_s"]) for x in r)
        print(f"  {size_label(s):>5}: {r[0]['windows']} windows, {r[0]['rows']:,} rows: "
              f"{med:.3f} s a window, slowest {worst:.3f} s; clean-up after "
              f"{median(r, 'cleanup_s'):.2f} s (not counted)")
    print("what each run did:")
    for s, runs in measured.items():
        what = []
        if "year_plot" in runs:
            plot = runs["year_plot"][0]
            what.append(f"year plot {plot['total']:,} readings -> {plot['points']:,} points")
        if "analyze" in runs:
            what.append(f"analyze {runs['analyze'][0]['rovers']} rovers, "
                        f"{runs['analyze'][0]['epochs']:,} epochs")
        if "export" in runs:
            e = runs["export"][0]
            what.append(f"export {e['rows']:,} rows, {e['files']:,} files, "
                        f"{e['bytes'] / 1e9:.2f} GB")
        print(f"  {size_label(s):>5}: {'; '.join(what)}")


def print_goals(measured: dict[int, dict[str, list[dict]]]) -> None:
    size = max(measured)
    runs = measured[size]
    note = "" if size >= 10**9 else "  (not 1B: the largest size of this run)"
    print(f"\nGoals at {size_label(size)} (median wall){note}:")
    for op, goal in GOALS_S.items():
        if op not in runs:
            print(f"  {op:28} {'-':>8}     goal < {goal:g} s: NOT met (not measured)")
            continue
        value = median(runs[op], "wall_s")
        print(f"  {op:28} {value:8.3f} s   goal < {goal:g} s: "
              f"{'met' if value < goal else 'NOT met'}")
    worst_op = max(runs, key=lambda op: max(r["peak_mib"] for r in runs[op]))
    worst = max(r["peak_mib"] for r in runs[worst_op])
    print(f"  {'peak memory (' + worst_op + ')':28} {worst:8.0f} MiB goal < "
          f"{MEMORY_GOAL_MIB:g} MiB: {'met' if worst < MEMORY_GOAL_MIB else 'NOT met'}"
          f" (of the operations measured)")


def plot(measured: dict[int, dict[str, list[dict]]], path: Path) -> None:
    """Median wall seconds against readings, log-log, one line per operation, and a dashed
    line of slope 1 (cost proportional to the size) for reference."""
    from matplotlib.figure import Figure

    fig = Figure(figsize=(9, 5))
    ax = fig.add_subplot()
    sizes = sorted(measured)
    xs = [Shape(s).readings for s in sizes]
    for op in OPS:
        points = [(x, median(measured[s][op], "wall_s"))
                  for s, x in zip(sizes, xs) if op in measured[s]]
        if points:
            ax.plot(*zip(*points), marker="o", label=op)
    lows = [median(measured[sizes[0]][op], "wall_s") for op in OPS if op in measured[sizes[0]]]
    y0 = math.exp(statistics.mean(math.log(v) for v in lows))
    ax.plot(xs, [y0 * x / xs[0] for x in xs], "k--", linewidth=1, label="slope 1 (reference)")
    ax.set_xscale("log")
    ax.set_yscale("log")
    ax.set_xlabel("readings in the mirror")
    ax.set_ylabel("median wall time, s")
    ax.set_title("devmon: cost against mirror size (bench_scaling.py)")
    ax.grid(True, which="both", alpha=0.3)
    ax.legend(fontsize=8, loc="upper left", bbox_to_anchor=(1.02, 1.0))
    fig.tight_layout()
    fig.savefig(path, dpi=120)
    print(f"plot: {path}")


def print_cache(sizes: list[int]) -> None:
    print("\ncached mirrors (built directly in DuckDB, not by a sync):")
    for s in sizes:
        path = cache_root() / f"scale-{size_label(s)}.duckdb"
        info = json.loads(path.with_suffix(".json").read_text()) \
            if path.with_suffix(".json").exists() else {}
        print(f"  {path}: {path.stat().st_size / 1e9:.2f} GB, {info.get('parameters', '?')} "
              f"parameters, built in {info.get('build_s', '?')} s")


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--sizes", default="10M,100M,1B",
                    help="readings per mirror, comma-separated (e.g. 1M,10M)")
    ap.add_argument("--repeat", type=int, default=3)
    ap.add_argument("--plot", type=Path, help="save a log-log plot (PNG) here")
    ap.add_argument("--export-limit", type=float, default=600.0,
                    help="skip the export where it is predicted to take longer (s)")
    ap.add_argument("--child", choices=OPS, help=argparse.SUPPRESS)
    ap.add_argument("--db", type=Path, help=argparse.SUPPRESS)
    args = ap.parse_args(argv)
    # devmon remembers the files it checked in its data folder: keep that out of the user's
    os.environ.setdefault("DEVMON_DATA_DIR", str(cache_root() / "devmon-data"))
    if args.child:
        try:
            result = CHILD_OPS[args.child](args.db)
        except Exception as err:  # a failure is a result too (the export's memory limit)
            first = str(err).strip().splitlines()[0] if str(err).strip() else ""
            result = {"error": f"{type(err).__name__}: {first}"}
        print("RESULT " + json.dumps(result), flush=True)
        return 0
    sizes = sorted({parse_size(s) for s in args.sizes.split(",") if s.strip()})
    print(f"bench_scaling: {platform.machine()} {platform.system()}, {os.cpu_count()} cores, "
          f"Python {platform.python_version()}, DuckDB {duckdb.__version__}; sizes "
          f"{', '.join(size_label(s) for s in sizes)}; {args.repeat} runs each, every run in a "
          f"fresh process; mirrors built directly in DuckDB (not by a sync), 10 years of "
          f"10-minute readings, {Shape(1).rovers} rovers with hourly epochs", flush=True)
    measured: dict[int, dict[str, list[dict]]] = {}
    skipped: dict[int, dict[str, str]] = {}
    for size in sizes:
        measure_size(size, args.repeat, measured, skipped, args.export_limit)
    print_table(measured, skipped)
    print_details(measured)
    for size, why in skipped.items():
        for op, reason in why.items():
            print(f"  {op} at {size_label(size)}: {reason}")
    print_goals(measured)
    print_cache(sizes)
    if args.plot:
        plot(measured, args.plot)
    here = Path(__file__).resolve().relative_to(REPO)
    print("\ncommands:\n  python " + shlex.join([str(here), *(argv or sys.argv[1:])]))
    print(f"  each run: python {here} --child OP --db FILE   (OP: {', '.join(OPS)})")
    return 0


if __name__ == "__main__":
    sys.exit(main())

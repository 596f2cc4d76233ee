#!/usr/bin/env python3
"""The sync engine against the reference server: requests, time, CPU per reading, memory.

The server runs as ``python -m devmon_sync serve --rate-limit 0`` in a subprocess on a free
loopback port.  Each sync runs in a subprocess of its own too (this script started again with
``--child``): the same calls as ``devmon sync --rate-limit 0 --quiet`` (ApiClient with
``rate_limit_per_minute=0``, ``Mirror.open``, ``SyncEngine(...).run()``), with timers around
the HTTP calls, the decoders and the commits, so the engine's own time is told apart from the
time spent waiting for the server.  The child reports its CPU time (``time.process_time``,
every thread of the process, DuckDB's included) and its peak resident memory (VmHWM).

What it measures:

* a full mirror of a 200-device, 365-day world: requests used against the least the server's
  limits allow for the data actually mirrored; wall time against the rate-limit floor
  (requests / 200 per minute) and the engine's own share of it; readings per CPU-second;
  peak memory;
* the same full mirror of a 90-day world of the same devices: does peak memory, or CPU per
  reading, grow with the size of the mirror?
* incremental syncs of the 365-day mirror (each on a fresh copy of it): nothing new (same
  server clock), and one day new (the server restarted with ``--now`` one day later);
* the decode + insert path alone, on full answers captured during the full sync:
  ``answers.readings_from_json`` and ``Mirror.commit_readings`` into an empty mirror and into
  a copy of the 365-day mirror.

The machine is shared: read ratios and rates, not absolute seconds.

    python benchmarks/bench_sync.py              # about 5 minutes
    python benchmarks/bench_sync.py --quick      # 60 devices, 120/30 days: about 1 minute
    python benchmarks/bench_sync.py --profile    # plus one cProfiled 90-day sync (top costs)
"""

from __future__ import annotations

import argparse
import cProfile
import http.client
import io
import json
import math
import os
import platform
import pstats
import shlex
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Self

REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO))

from devmon_sync import api_contract as contract

from _common import KEY, NOW, free_port, iso  # noqa: E402  (beside this script)
from devmon_sync.sync.engine import FILL  # share of a limit a planned window may use

LIMITS = contract.DEFAULT_LIMITS
SLOT_S = 60.0 / contract.RATE_LIMIT_PER_MINUTE  # 0.3 s: one request at 200/min

META_MIN = 4  # GET /sites, GET /devices (one page of 500), GET /device-groups, POST .../latest


def cpu_of_pid(pid: int) -> float:
    """utime + stime of a process, seconds (from /proc/<pid>/stat)."""
    with open(f"/proc/{pid}/stat") as f:
        fields = f.read().rsplit(")", 1)[1].split()
    return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")


def vm_hwm_mib(field: str = "VmHWM") -> float:
    """A memory figure of this process from /proc/self/status (peak RSS by default), MiB."""
    with open("/proc/self/status") as f:
        for line in f:
            if line.startswith(field + ":"):
                return int(line.split()[1]) / 1024.0
    return float("nan")


# ----------------------------------------------------------------------------- server

class Server:
    """``devmon serve`` in a subprocess, unlimited rate, fixed clock."""

    def __init__(self, devices: int, days: int, now: datetime, port: int = 0):
        """``port``: the address of an earlier server to restart on (the same service, as a
        mirror knows it by its base URL); 0: any free port."""
        self.devices, self.days, self.now = devices, days, now
        self.proc: subprocess.Popen | None = None
        self.wanted_port = port
        self.port = 0
        self.command = ""

    @property
    def base_url(self) -> str:
        return f"http://127.0.0.1:{self.port}/v1"

    def __enter__(self) -> Self:
        for attempt in range(3):  # the probed port may be taken before the server binds it
            self.port = self.wanted_port if self.wanted_port and attempt == 0 else free_port()
            cmd = [sys.executable, "-m", "devmon_sync", "serve", "--port", str(self.port),
                   "--now", iso(self.now), "--api-key", KEY, "--devices", str(self.devices),
                   "--days", str(self.days), "--rate-limit", "0",
                   # one world whatever the day: a day later has one day more of it
                   "--history-start", iso(NOW - timedelta(days=self.days))]
            self.command = shlex.join(["python"] + cmd[1:])
            self.proc = subprocess.Popen(cmd, cwd=REPO, stdout=subprocess.DEVNULL,
                                         stderr=subprocess.PIPE)
            if self._ready():
                return self
            err = self.proc.stderr.read().decode(errors="replace")[-2000:]
            self.__exit__()
            if "cannot listen" not in err:
                raise RuntimeError(f"server did not start: {self.command}\n{err}")
        raise RuntimeError("no free port for the server")

    def _ready(self, timeout_s: float = 120.0) -> bool:
        t0 = time.monotonic()
        while time.monotonic() - t0 < timeout_s:
            if self.proc.poll() is not None:
                return False
            try:
                conn = http.client.HTTPConnection("127.0.0.1", self.port, timeout=5)
                conn.request("GET", "/v1/sites", headers={contract.API_KEY_HEADER: KEY})
                ok = conn.getresponse().status == 200
                conn.close()
                if ok:
                    return True
            except OSError:
                pass
            time.sleep(0.05)
        return False

    def cpu_s(self) -> float:
        return cpu_of_pid(self.proc.pid)

    def __exit__(self, *exc) -> None:
        if self.proc is not None and self.proc.poll() is None:
            self.proc.terminate()
            try:
                self.proc.wait(timeout=10)
            except subprocess.TimeoutExpired:
                self.proc.kill()
                self.proc.wait()
        if self.proc is not None and self.proc.stderr:
            self.proc.stderr.close()


# ----------------------------------------------------------------------------- the child

def child(args) -> int:
    """One sync, instrumented; prints ``RESULT {json}`` as its last line."""
    import pyarrow as pa  # noqa: F401  (imported before the clock starts)

    from devmon_sync.client import ApiClient
    from devmon_sync.store import Mirror, answers
    from devmon_sync.sync.engine import SyncEngine, SyncOptions

    timers: dict[str, list[float]] = {}  # name: [calls, wall s, cpu s]
    paths: dict[str, int] = {}
    readings_per_request: list[int] = []
    epochs_per_request: list[int] = []
    capture_dir = Path(args.capture) if args.capture else None
    captured: list[dict] = []
    last_body: dict = {}

    def timed(name, fn):
        def wrapper(*a, **kw):
            w0, c0 = time.perf_counter(), time.process_time()
            try:
                return fn(*a, **kw)
            finally:
                t = timers.setdefault(name, [0, 0.0, 0.0])
                t[0] += 1
                t[1] += time.perf_counter() - w0
                t[2] += time.process_time() - c0
        return wrapper

    decode = answers.readings_from_json

    def decode_and_capture(body: bytes):
        answer = decode(body)
        table = answer.table
        readings_per_request.append(table.num_rows)
        if capture_dir and len(captured) < args.capture_count \
                and table.num_rows > 0.8 * LIMITS.max_points:
            name = f"answer{len(captured)}.json"
            (capture_dir / name).write_bytes(body)
            captured.append({"file": name, "request": last_body.get("readings")})
        return answer

    answers.readings_from_json = timed("  decode (readings_from_json)", decode_and_capture)
    gnss_from_json = answers.gnss_from_json

    def epochs_counted(body: bytes):
        out = gnss_from_json(body)
        epochs_per_request.append(out.epochs.num_rows)
        return out

    answers.gnss_from_json = timed("  decode (gnss_from_json)", epochs_counted)
    memory: list[tuple[float, float]] = []  # (VmRSS, VmHWM) after each commit, MiB

    def noting_memory(fn):
        def wrapper(*a, **kw):
            try:
                return fn(*a, **kw)
            finally:
                memory.append((vm_hwm_mib("VmRSS"), vm_hwm_mib()))
        return wrapper

    Mirror.commit_readings = timed("commit readings (commit_readings)",
                                   noting_memory(Mirror.commit_readings))
    Mirror.commit_epochs = timed("commit GNSS (commit_epochs)",
                                 noting_memory(Mirror.commit_epochs))
    Mirror.save_metadata = timed("save metadata (save_metadata)", Mirror.save_metadata)

    with ApiClient(args.url, KEY, rate_limit_per_minute=0) as client, \
            Mirror.open(args.db) as mirror:
        session_request = client._session.request
        http_timers = {"POST /sensor-data": timed("  HTTP", session_request),
                       "POST /sensor-data/gnss": timed("  HTTP ", session_request)}
        other_http = timed("HTTP of metadata, latest (GET, POST)", session_request)

        def request(method, url, **kw):
            path = f"{method} {url.split('/v1', 1)[1]}"
            paths[path] = paths.get(path, 0) + 1
            return http_timers.get(path, other_http)(method, url, **kw)

        client._session.request = request
        sensor_data = client.sensor_data

        def sensor_data_noting(body, decoder=None):
            last_body["readings"] = body
            return sensor_data(body, decoder)

        client.sensor_data = timed("POST /sensor-data (client)", sensor_data_noting)
        client.gnss = timed("POST /sensor-data/gnss (client)", client.gnss)
        engine = SyncEngine(client, mirror, SyncOptions())
        fetch = engine._fetch
        spans: dict[str, dict] = {"readings": {}, "gnss": {}}
        leaves: list[list] = []  # [kind, streams, days, expected points, rows] per fetched window

        def fetch_noting(run_id, w):
            windows, rows = engine.report.windows, engine.report.readings_rows \
                + engine.report.epoch_rows
            fetch(run_id, w)
            for key in w.keys:  # each stream's whole span in this run
                first, last = spans[w.kind].get(key, (w.start, w.end))
                spans[w.kind][key] = (min(first, w.start), max(last, w.end))
            if engine.report.windows == windows + 1:  # a leaf: fetched whole, not split
                leaves.append([w.kind, len(w.keys), (w.end - w.start).total_seconds() / 86400,
                               w.expected_points, engine.report.readings_rows
                               + engine.report.epoch_rows - rows])

        engine._fetch = fetch_noting
        profiler = cProfile.Profile() if args.profile else None
        w0, c0 = time.perf_counter(), time.process_time()
        if profiler:
            profiler.enable()
        report = engine.run()
        if profiler:
            profiler.disable()
        wall, cpu = time.perf_counter() - w0, time.process_time() - c0
    if profiler:
        profiler.dump_stats(args.profile)
    if capture_dir:
        (capture_dir / "captured.json").write_text(json.dumps(captured))
    result = {"status": report.status, "requests": report.requests,
              "follow_ups": report.follow_ups, "cut_answers": report.cut_answers,
              "unproven": report.unproven, "quarantined": report.quarantined,
              "readings": report.readings_rows, "epochs": report.epoch_rows,
              "windows": report.windows, "plan": len(report.plan),
              "plan_readings": sum(w.kind == "readings" for w in report.plan),
              "plan_gnss": sum(w.kind == "gnss" for w in report.plan),
              "wall_s": wall, "cpu_s": cpu, "timers": timers, "paths": paths,
              "readings_per_request": readings_per_request, "memory": memory,
              "epochs_per_request": epochs_per_request,
              "leaves": leaves,
              "spans_s": {k: [(a.timestamp(), b.timestamp()) for a, b in v.values()]
                             for k, v in spans.items()},
              "vm_hwm_mib": vm_hwm_mib(), "db_mb": os.path.getsize(args.db) / 1e6}
    print("RESULT " + json.dumps(result))
    return 0


def run_sync(url: str, db: Path, server: Server, capture: Path | None = None,
             profile: Path | None = None) -> dict:
    cmd = [sys.executable, str(Path(__file__).resolve()), "--child", "--url", url,
           "--db", str(db)]
    if capture:
        cmd += ["--capture", str(capture)]
    if profile:
        cmd += ["--profile-out", str(profile)]
    server_cpu0 = server.cpu_s()
    out = subprocess.run(cmd, check=False, cwd=REPO, capture_output=True, text=True)
    if out.returncode != 0:
        raise RuntimeError(f"sync failed ({out.returncode}):\n{out.stderr[-3000:]}")
    line = next(x for x in reversed(out.stdout.splitlines()) if x.startswith("RESULT "))
    result = json.loads(line[len("RESULT "):])
    result["server_cpu_s"] = server.cpu_s() - server_cpu0
    if result["status"] != "ok":
        raise RuntimeError(f"sync ended {result['status']}")
    return result


def cli_command(url: str, db: str) -> str:
    return (f"python -m devmon_sync sync --base-url {url} --db {db} --api-key {KEY} "
            f"--rate-limit 0 --quiet")


# ----------------------------------------------------------------------------- minimum

def minimum_requests(db: Path) -> dict:
    """The fewest requests the server's limits allow for the data this mirror holds.

    points bound:  ceil(readings / max_points) + ceil(epochs / max_epochs): every request
                   returns at most that many;
    range bound:   a request spans at most max_range_days and names at most
                   max_selector_items streams, so a stream spanning S days occupies at least
                   ceil(S / 31) of the 200 selector slots of some request:
                   ceil(sum over streams of ceil(S_i / 31) / 200), readings and GNSS apart;
                   and the time the streams cover together (the union of their spans)
                   takes at least ceil(U / 31) requests;
    data minimum:  max(points bound, range bound) per kind (both must hold);
    plus META_MIN: sites, devices (<= 500 per page), device groups, latest.
    """
    import duckdb

    con = duckdb.connect(str(db), read_only=True)
    try:
        readings = con.execute("SELECT count(*) FROM readings").fetchone()[0]
        epochs = con.execute("SELECT count(*) FROM gnss_epochs").fetchone()[0]
        span = "epoch(min(ts)), epoch(max(ts))"
        r_spans = con.execute(f"SELECT {span} FROM readings GROUP BY parameter_uuid").fetchall()
        g_spans = con.execute(f"SELECT {span} FROM gnss_epochs GROUP BY sensor_uuid").fetchall()
    finally:
        con.close()
    day = 86400.0
    r_points = math.ceil(readings / LIMITS.max_points)
    g_points = math.ceil(epochs / LIMITS.max_epochs)
    r_range, g_range = range_bound(r_spans), range_bound(g_spans)
    return {"readings": readings, "epochs": epochs, "r_streams": len(r_spans),
            "g_streams": len(g_spans), "r_days": sum(b - a for a, b in r_spans) / day,
            "g_days": sum(b - a for a, b in g_spans) / day, "r_points": r_points,
            "g_points": g_points,
            "r_range": r_range, "g_range": g_range,
            "data_min": max(r_points, r_range) + max(g_points, g_range),
            "total_min": META_MIN + max(r_points, r_range) + max(g_points, g_range)}


def run_minimum(r: dict) -> int:
    """The same bound for what one run fetched: its rows, and each stream's span in the run."""
    def kind(rows, limit, spans):
        return max(math.ceil(rows / limit), range_bound(spans)) if rows or spans else 0

    return META_MIN + kind(r["readings"], LIMITS.max_points, r["spans_s"]["readings"]) \
        + kind(r["epochs"], LIMITS.max_epochs, r["spans_s"]["gnss"])


def range_bound(spans_s: list[tuple[float, float]]) -> int:
    """Least requests for streams over these (start, end) spans in Unix seconds: each
    request spans <= max_range_days and names <= 200 streams."""
    per = LIMITS.max_range_days * 86400.0
    slots = math.ceil(sum(max(1, math.ceil((b - a) / per)) for a, b in spans_s)
                      / LIMITS.max_selector_items)
    covered, reach = 0.0, -math.inf
    for a, b in sorted(spans_s):  # the length of the union of the spans
        covered += max(0.0, b - max(a, reach))
        reach = max(reach, b)
    return max(slots, math.ceil(covered / per))


# ----------------------------------------------------------------------------- decode + insert

def decode_insert(capture: Path, big_db: Path, work: Path, repeats: int) -> list[dict]:
    """Time readings_from_json and Mirror.commit_readings on the captured answers.

    Each commit writes the answer under fresh parameter UUIDs (the first 8 hex digits
    replaced), so it is a pure insert of new streams, as in a first sync, into an empty
    mirror and into a copy of the full mirror."""
    import pyarrow as pa
    import pyarrow.compute as pc

    from devmon_sync.store import Mirror, answers
    from devmon_sync.store.ledger import WindowProof

    captured = json.loads((capture / "captured.json").read_text())
    bodies = [(capture / c["file"]).read_bytes() for c in captured]
    requests = [c["request"] for c in captured]
    rows = []

    # decode: best of `repeats` per answer
    dec_cpu, dec_wall, n_rows = 0.0, 0.0, 0
    tables = []
    for body in bodies:
        best_cpu = best_wall = math.inf
        for _ in range(repeats):
            w0, c0 = time.perf_counter(), time.process_time()
            table = answers.readings_from_json(body).table
            best_cpu = min(best_cpu, time.process_time() - c0)
            best_wall = min(best_wall, time.perf_counter() - w0)
        tables.append(table)
        dec_cpu, dec_wall = dec_cpu + best_cpu, dec_wall + best_wall
        n_rows += table.num_rows
    mb = sum(len(b) for b in bodies) / 1e6
    rows.append({"name": f"readings_from_json ({len(bodies)} answers, {mb:.0f} MB)",
                 "rows": n_rows, "cpu_s": dec_cpu, "wall_s": dec_wall})

    empty = work / "empty.duckdb"
    big = work / "big-copy.duckdb"
    shutil.copyfile(big_db, big)
    for label, path in (("empty mirror", empty), (f"{mirror_rows(big_db) / 1e6:.1f}M-row mirror",
                                                  big)):
        with Mirror.open(path) as mirror:
            run_id = mirror.begin_run("bench", {})
            samples_cpu, samples_wall = [], []
            for rep in range(repeats):
                cpu = wall = 0.0
                for table, req in zip(tables, requests):
                    prefix = f"{0xbe00 + rep:04x}{len(samples_cpu):04x}"
                    keys = table.column("parameter_uuid").combine_chunks()
                    uuids = pa.DictionaryArray.from_arrays(
                        keys.indices, pc.utf8_replace_slice(keys.dictionary, 0, 8, prefix))
                    fresh = table.set_column(0, "parameter_uuid", uuids)
                    start = contract.parse_timestamp(req["startDate"])
                    end = contract.parse_timestamp(req["endDate"])
                    keys = [prefix + k[8:] for k in req["parameterUuids"]]
                    counts = answers.rows_per_key(fresh.column("parameter_uuid"))
                    proof = WindowProof("readings", keys, start, end,
                                        [counts.get(k, 0) for k in keys], [None] * len(keys),
                                        [None] * len(keys))
                    w0, c0 = time.perf_counter(), time.process_time()
                    mirror.commit_readings(run_id, proof, fresh)
                    cpu += time.process_time() - c0
                    wall += time.perf_counter() - w0
                samples_cpu.append(cpu)
                samples_wall.append(wall)
            rows.append({"name": f"commit_readings into {label}", "rows": n_rows,
                         "cpu_s": statistics.median(samples_cpu),
                         "wall_s": statistics.median(samples_wall)})
    rows.append({"name": "decode + commit (empty mirror)", "rows": n_rows,
                 "cpu_s": rows[0]["cpu_s"] + rows[1]["cpu_s"],
                 "wall_s": rows[0]["wall_s"] + rows[1]["wall_s"]})
    rows.append({"name": "decode + commit (full mirror)", "rows": n_rows,
                 "cpu_s": rows[0]["cpu_s"] + rows[2]["cpu_s"],
                 "wall_s": rows[0]["wall_s"] + rows[2]["wall_s"]})
    big.unlink()
    return rows


def mirror_rows(db: Path) -> int:
    import duckdb

    con = duckdb.connect(str(db), read_only=True)
    try:
        return con.execute("SELECT count(*) FROM readings").fetchone()[0]
    finally:
        con.close()


# ----------------------------------------------------------------------------- printing

def rate(n: float, s: float) -> str:
    return f"{n / s:,.0f}" if s > 0 else "-"


def http_s(r: dict) -> float:
    return sum(v[1] for k, v in r["timers"].items() if "HTTP" in k)


def print_full(label: str, r: dict, mins: dict | None) -> None:
    floor = r["requests"] * SLOT_S
    own = r["wall_s"] - http_s(r)
    print(f"\n{label}: {r['readings']:,} readings, {r['epochs']:,} GNSS epochs, "
          f"{r['requests']} requests ({r['plan_readings']} readings + {r['plan_gnss']} GNSS "
          f"windows planned, {r['windows']} fetched), mirror {r['db_mb']:.0f} MB")
    other = {k: v for k, v in r["paths"].items()
             if k not in ("POST /sensor-data", "POST /sensor-data/gnss")}
    print(f"  requests by path: POST /sensor-data {r['paths'].get('POST /sensor-data', 0)}, "
          f"POST /sensor-data/gnss {r['paths'].get('POST /sensor-data/gnss', 0)}, other "
          f"{sum(other.values())} ({', '.join(f'{k} {v}' for k, v in sorted(other.items()))})")
    print(f"  completeness: {r.get('follow_ups', 0)} follow-up requests, "
          f"{r.get('cut_answers', 0)} answers found cut, {r.get('unproven', 0)} ranges left "
          f"unproved, {r.get('quarantined', 0)} values quarantined")
    if r["memory"]:
        marks = [r["memory"][min(len(r["memory"]) - 1, int(q * len(r["memory"])))]
                 for q in (0.1, 0.25, 0.5, 0.75, 1.0)]
        print("  memory after 10/25/50/75/100 % of the windows: RSS "
              + " / ".join(f"{m[0]:.0f}" for m in marks) + " MiB, peak so far "
              + " / ".join(f"{m[1]:.0f}" for m in marks) + " MiB")
    if mins:
        rpr, epr = r["readings_per_request"], r["epochs_per_request"]
        print(f"  minimum: readings max(points {mins['r_points']}, range {mins['r_range']}) + "
              f"GNSS max(points {mins['g_points']}, range {mins['g_range']}) + {META_MIN} "
              f"metadata/latest = {mins['total_min']}  =>  used/minimum "
              f"{r['requests'] / mins['total_min']:.2f}x")
        print(f"  fill: readings per /sensor-data answer mean {statistics.mean(rpr):,.0f} "
              f"({statistics.mean(rpr) / LIMITS.max_points:.0%} of {LIMITS.max_points:,}), "
              f"median {statistics.median(rpr):,.0f}; epochs per /gnss answer mean "
              f"{statistics.mean(epr):,.0f} ({statistics.mean(epr) / LIMITS.max_epochs:.0%} of "
              f"{LIMITS.max_epochs:,})")
        for kind, limit in (("readings", LIMITS.max_points), ("gnss", LIMITS.max_epochs)):
            leaves = [x for x in r["leaves"] if x[0] == kind]
            if not leaves:
                continue
            span = [x for x in leaves if x[2] >= 0.99 * LIMITS.max_range_days]
            short = [x for x in leaves if x[2] < 0.99 * LIMITS.max_range_days]
            expected, got = sum(x[3] for x in leaves), sum(x[4] for x in leaves)

            def mean(xs, i):
                return statistics.mean(x[i] for x in xs) if xs else 0

            print(f"  {kind} windows: planned {expected / len(leaves) / limit:.0%} of the "
                  f"limit on average (budget {FILL:.0%}), got {got / len(leaves) / limit:.0%} "
                  f"(actual/expected {got / expected:.2f}); {len(span)} of 31 days: expected "
                  f"{mean(span, 3):,.0f}, got {mean(span, 4):,.0f}, {mean(span, 1):.0f} streams; "
                  f"{len(short)} shorter ({mean(short, 2):.1f} days): expected "
                  f"{mean(short, 3):,.0f}, got {mean(short, 4):,.0f}, {mean(short, 1):.0f} streams")
    print(f"  wall {r['wall_s']:.1f} s at unlimited rate; rate-limit floor {r['requests']} x "
          f"{SLOT_S:.1f} s = {floor:.1f} s  =>  wall/floor {r['wall_s'] / floor:.2f}")
    print(f"  engine's own wall time (wall - HTTP) {own:.1f} s = {own / floor:.0%} of the floor; "
          f"HTTP (send + server + receive) {http_s(r):.1f} s; server CPU {r['server_cpu_s']:.1f} s")
    rows_total = r["readings"] + r["epochs"]
    print(f"  sync process CPU {r['cpu_s']:.1f} s  =>  {rate(r['readings'], r['cpu_s'])} "
          f"readings per CPU-second ({rate(rows_total, r['cpu_s'])} readings+epochs); "
          f"peak memory (VmHWM) {r['vm_hwm_mib']:.0f} MiB")
    print(f"  {'where the sync process spends its time':<40} {'calls':>6} {'wall s':>7} "
          f"{'CPU s':>7} {'CPU %':>6}")
    t = r["timers"]
    zero = [0, 0.0, 0.0]
    top = ["POST /sensor-data (client)", "commit readings (commit_readings)",
           "POST /sensor-data/gnss (client)", "commit GNSS (commit_epochs)",
           "save metadata (save_metadata)",
           "HTTP of metadata, latest (GET, POST)"]
    nested = {"POST /sensor-data (client)": ["  HTTP", "  decode (readings_from_json)"],
              "POST /sensor-data/gnss (client)": ["  HTTP ", "  decode (gnss_from_json)"]}

    def line(name, calls, wall, cpu):
        print(f"  {name:<40} {calls:>6} {wall:>7.1f} {cpu:>7.1f} {cpu / r['cpu_s']:>6.0%}")

    for name in top:
        calls, wall, cpu = t.get(name, zero)
        line(name, calls, wall, cpu)
        subs = nested.get(name, [])
        for sub in subs:
            line(sub.rstrip() + (" (send, server, receive)" if "HTTP" in sub else ""),
                 *t.get(sub, zero))
        if subs:
            rest = [calls - 0, wall - sum(t.get(x, zero)[1] for x in subs),
                    cpu - sum(t.get(x, zero)[2] for x in subs)]
            line("  rest: body JSON, orjson parse, retries", rest[0], rest[1], rest[2])
    cpu_rest = r["cpu_s"] - sum(t.get(x, zero)[2] for x in top)
    wall_rest = r["wall_s"] - sum(t.get(x, zero)[1] for x in top)
    line("rest: planning, parsing metadata, SQL", 0, wall_rest, cpu_rest)


def commit_cpu_per_reading(r: dict) -> float:
    return r["timers"]["commit readings (commit_readings)"][2] / r["readings"]


def print_profile(path: Path, top: int = 25) -> None:
    text = io.StringIO()
    pstats.Stats(str(path), stream=text).sort_stats("tottime").print_stats(top)
    lines = text.getvalue().splitlines()
    start = next((i for i, x in enumerate(lines) if "ncalls" in x), 0)
    print("\n--- cProfile of the sync (own time; cProfile adds overhead to small Python calls)")
    print(next((x for x in lines if "function calls" in x), "").strip())
    print("\n".join(x[:150] for x in lines[start:] if x.strip()))


# ----------------------------------------------------------------------------- main

def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--devices", type=int, default=200)
    p.add_argument("--days", type=int, default=365, help="history of the large world")
    p.add_argument("--small-days", type=int, default=90, help="history of the control world")
    p.add_argument("--repeats", type=int, default=3, help="repeats of the incremental syncs "
                   "and of the decode/insert timings (default %(default)s)")
    p.add_argument("--quick", action="store_true", help="60 devices, 120 and 30 days, 2 repeats")
    p.add_argument("--profile", action="store_true",
                   help="also sync the control world once more under cProfile, print top costs")
    p.add_argument("--keep", help="keep the mirrors in this folder (default: a temp folder)")
    p.add_argument("--child", action="store_true", help=argparse.SUPPRESS)
    p.add_argument("--url", help=argparse.SUPPRESS)
    p.add_argument("--db", help=argparse.SUPPRESS)
    p.add_argument("--capture", help=argparse.SUPPRESS)
    p.add_argument("--capture-count", type=int, default=4, help=argparse.SUPPRESS)
    p.add_argument("--profile-out", dest="profile_path", help=argparse.SUPPRESS)
    args = p.parse_args(argv)
    if args.child:
        args.profile = args.profile_path
        return child(args)
    if args.quick:
        args.devices, args.days, args.small_days, args.repeats = 60, 120, 30, 2

    t_start = time.perf_counter()
    work = Path(args.keep or tempfile.mkdtemp(prefix="bench_sync_"))
    work.mkdir(parents=True, exist_ok=True)
    capture = work / "captured"
    capture.mkdir(exist_ok=True)
    load = os.getloadavg()
    print(f"bench_sync: {platform.machine()} {platform.system()}, {os.cpu_count()} cores, "
          f"Python {platform.python_version()}, load average {load[0]:.1f}, "
          f"{datetime.now(UTC):%Y-%m-%d %H:%M} UTC")
    print("Commands (server and sync; every sync below is this CLI call, run in-process in a "
          "child with timers):")
    big_db, small_db = work / "full.duckdb", work / "control.duckdb"
    for path in (big_db, small_db):
        for f in (path, Path(str(path) + ".wal")):
            f.unlink(missing_ok=True)

    # 1. full mirror of the large world
    with Server(args.devices, args.days, NOW) as srv:
        full_port = srv.port
        print(f"  {srv.command}")
        print(f"  {cli_command(srv.base_url, str(big_db))}")
        full = run_sync(srv.base_url, big_db, srv, capture=capture)
        mins = minimum_requests(big_db)
        # 2. nothing new, same clock, each on a fresh copy of the full mirror
        nothing = []
        for i in range(args.repeats):
            copy = work / f"incr-nothing-{i}.duckdb"
            shutil.copyfile(big_db, copy)
            nothing.append(run_sync(srv.base_url, copy, srv))
            copy.unlink()
    # 3. one day new: the same service (same base URL), its clock one day later
    with Server(args.devices, args.days, NOW + timedelta(days=1), port=full_port) as srv:
        print(f"  {srv.command}   (one day later)")
        one_day = []
        for i in range(args.repeats):
            copy = work / f"incr-day-{i}.duckdb"
            shutil.copyfile(big_db, copy)
            one_day.append(run_sync(srv.base_url, copy, srv))
            copy.unlink()
    # 4. control world: same devices, shorter history
    with Server(args.devices, args.small_days, NOW) as srv:
        print(f"  {srv.command}   (control world)")
        small = run_sync(srv.base_url, small_db, srv)
        if args.profile:  # a separate run: cProfile's overhead stays out of the figures
            run_sync(srv.base_url, work / "profiled.duckdb", srv, profile=work / "sync.prof")
    # 5. decode + insert alone
    dec = decode_insert(capture, big_db, work, args.repeats)

    print(f"\n=== Full mirror, {args.devices} devices, {args.days} days (server and client "
          f"unlimited rate) ===")
    print_full(f"{args.days}-day world", full, mins)
    print(f"  streams: {mins['r_streams']} parameters over {mins['r_days']:,.0f} stream-days, "
          f"{mins['g_streams']} GNSS sensors over {mins['g_days']:,.0f} stream-days")
    print_full(f"{args.small_days}-day control world", small, None)
    print(f"\n  {args.days} vs {args.small_days} days: readings x"
          f"{full['readings'] / small['readings']:.2f}, mirror x"
          f"{full['db_mb'] / small['db_mb']:.2f}, peak memory "
          f"{full['vm_hwm_mib']:.0f} vs {small['vm_hwm_mib']:.0f} MiB "
          f"(x{full['vm_hwm_mib'] / small['vm_hwm_mib']:.2f}), CPU per reading x"
          f"{(full['cpu_s'] / full['readings']) / (small['cpu_s'] / small['readings']):.2f}, "
          f"commit CPU per reading x"
          f"{commit_cpu_per_reading(full) / commit_cpu_per_reading(small):.2f}")

    print(f"\n=== Incremental syncs of the {args.days}-day mirror (each on a fresh copy; "
          f"median of {args.repeats}) ===")
    print(f"{'case':<26} {'requests':>8} {'readings':>9} {'epochs':>7} {'wall s':>7} "
          f"{'(min-max)':>12} {'CPU s':>6} {'HTTP s':>6} {'floor s':>7} {'peak MiB':>8}")
    for label, runs in (("nothing new", nothing), ("one day new (--now +1 d)", one_day)):
        walls = [r["wall_s"] for r in runs]
        r = runs[0]
        print(f"{label:<26} {r['requests']:>8} {r['readings']:>9,} {r['epochs']:>7,} "
              f"{statistics.median(walls):>7.2f} {f'{min(walls):.2f}-{max(walls):.2f}':>12} "
              f"{statistics.median(x['cpu_s'] for x in runs):>6.2f} "
              f"{statistics.median(http_s(x) for x in runs):>6.2f} "
              f"{r['requests'] * SLOT_S:>7.1f} "
              f"{statistics.median(x['vm_hwm_mib'] for x in runs):>8.0f}")
        print(f"{'':<26} requests: " + ", ".join(f"{k} {v}" for k, v in sorted(r["paths"].items()))
              + f"; minimum for these rows {run_minimum(r)} (used/minimum "
              f"{r['requests'] / run_minimum(r):.1f}x)")

    answers = len(json.loads((capture / "captured.json").read_text()))
    print(f"\n=== Decode + insert alone, on {answers} full answers captured during the full "
          f"sync (decode best of {args.repeats}, commit median of {args.repeats}) ===")
    print(f"{'path':<44} {'rows':>9} {'CPU s':>7} {'wall s':>7} {'rows/CPU-s':>11}")
    for row in dec:
        print(f"{row['name']:<44} {row['rows']:>9,} {row['cpu_s']:>7.3f} {row['wall_s']:>7.3f} "
              f"{rate(row['rows'], row['cpu_s']):>11}")
    if args.profile:
        print_profile(work / "sync.prof")
    print(f"\nbench_sync finished in {time.perf_counter() - t_start:.0f} s "
          f"(load average now {os.getloadavg()[0]:.1f}); files in {work}")
    if not args.keep:
        shutil.rmtree(work, ignore_errors=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())

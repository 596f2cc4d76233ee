#!/usr/bin/env python3
"""Throughput and memory of the reference server, measured over HTTP from another process.

The server runs as ``python -m devmon_sync serve`` in a subprocess on a free loopback port, so
this script's own work (reading bodies, counting points) never competes with it for the GIL.
Each timed request is sent on a kept-alive ``http.client`` connection and timed from the send
to the last byte of the body; the body is parsed only afterwards, outside the timing.

What it measures (each repeated ``--repeats`` times, min and median shown):

* POST /sensor-data close to the max_points limit: rounded, ``disableRounding`` and
  ``orderBy: desc``; and GNSS fields served as plain series (one series per field);
* POST /sensor-data/gnss over 31 days for every rover of the world, up to the max_epochs
  limit (the small world has 13 rovers, ~9,400 epochs; the large world fills the limit);
* small requests (GET /devices/{sn}, POST /sensor-data/latest for one parameter) as requests
  per second, against the 200 requests/minute rate limit a sync has to live with;
* the share of a large answer's time spent in building the objects and in ``orjson.dumps``,
  timed in this process on the same request bodies, alternating with the HTTP requests;
* a large world (``--devices 500 --days 730``): start-up time and resident memory after
  large requests, next to the small world and a 500-device world with 90 days of history.

The machine is shared: read rates and ratios, not absolute times.

    python benchmarks/bench_server.py            # about 45 s
    python benchmarks/bench_server.py --quick    # fewer repeats, no control world
    python benchmarks/bench_server.py --profile  # also print cProfile top costs (in-process)
"""

from __future__ import annotations

import argparse
import cProfile
import http.client
import io
import os
import platform
import pstats
import shlex
import statistics
import subprocess
import sys
import tempfile
import time
from dataclasses import dataclass, field
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Self

import orjson

REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO))

from devmon_sync import api_contract as contract

from _common import KEY, NOW, free_port, iso  # noqa: E402  (beside this script)

RATE_LIMIT_PER_S = contract.RATE_LIMIT_PER_MINUTE / 60.0
LIMITS = contract.DEFAULT_LIMITS


# ----------------------------------------------------------------------------- server process

class ServerProcess:
    """``devmon serve`` in a subprocess; ``startup_s`` runs from spawn to the first answer."""

    def __init__(self, devices: int, days: int, sites: int, python: str):
        self.size = (sites, devices, days)
        self.python = python
        self.proc: subprocess.Popen | None = None
        self.port = 0
        self.startup_s = 0.0
        self.command = ""
        self._err = None  # the server's stderr, shown if it fails to start

    def __enter__(self) -> Self:
        sites, devices, days = self.size
        for _attempt in range(3):  # the free port may be taken between our probe and its bind
            self.port = free_port()
            cmd = [self.python, "-m", "devmon_sync", "serve", "--port", str(self.port),
                   "--now", iso(NOW), "--rate-limit", "0", "--api-key", KEY,
                   "--sites", str(sites), "--devices", str(devices), "--days", str(days)]
            self.command = shlex.join(cmd)
            self._err = tempfile.TemporaryFile()  # closed in __exit__
            t0 = time.perf_counter()
            self.proc = subprocess.Popen(cmd, cwd=REPO, stdout=subprocess.DEVNULL,
                                         stderr=self._err)
            if self._wait_ready(t0):
                self.startup_s = time.perf_counter() - t0
                return self
            self._err.seek(0)
            message = self._err.read().decode(errors="replace")[-2000:]
            self.__exit__()
            if "cannot listen" not in message:
                raise RuntimeError(f"server did not start: {self.command}\n{message}")
        raise RuntimeError("no free port found for the server")

    def _wait_ready(self, t0: float, timeout_s: float = 120.0) -> bool:
        while time.perf_counter() - t0 < timeout_s:
            if self.proc.poll() is not None:
                return False
            try:
                conn = http.client.HTTPConnection("127.0.0.1", self.port, timeout=5)
                conn.request("GET", contract.API_PREFIX + "/sites",
                             headers={contract.API_KEY_HEADER: KEY})
                if conn.getresponse().status == 200:
                    conn.close()
                    return True
                conn.close()
            except OSError:
                pass
            time.sleep(0.02)
        return False

    def memory_mib(self) -> tuple[float, float]:
        """(VmRSS, VmHWM) of the server process in MiB: now, and the peak so far."""
        fields = {}
        with open(f"/proc/{self.proc.pid}/status") as f:
            for line in f:
                name, _, value = line.partition(":")
                if name in ("VmRSS", "VmHWM"):
                    fields[name] = int(value.split()[0]) / 1024.0
        return fields["VmRSS"], fields["VmHWM"]

    def __exit__(self, *exc) -> None:
        if self.proc is not None and self.proc.poll() is None:
            self.proc.terminate()
            try:
                self.proc.wait(timeout=10)
            except subprocess.TimeoutExpired:
                self.proc.kill()
                self.proc.wait()
        if self._err is not None:
            self._err.close()


class Client:
    """One kept-alive connection; ``call`` returns (status, body bytes, seconds to last byte)."""

    def __init__(self, port: int):
        self.conn = http.client.HTTPConnection("127.0.0.1", port, timeout=300)

    def call(self, method: str, path: str, body: object = None) -> tuple[int, bytes, float]:
        headers = {contract.API_KEY_HEADER: KEY}
        data = None
        if body is not None:
            data = orjson.dumps(body)
            headers["Content-Type"] = "application/json"
        t0 = time.perf_counter()
        self.conn.request(method, contract.API_PREFIX + path, body=data, headers=headers)
        resp = self.conn.getresponse()
        raw = resp.read()
        return resp.status, raw, time.perf_counter() - t0

    def ok(self, method: str, path: str, body: object = None) -> tuple[bytes, float]:
        status, raw, seconds = self.call(method, path, body)
        if status != 200:
            raise RuntimeError(f"{method} {path} -> {status}: {raw[:300]!r}")
        return raw, seconds

    def close(self) -> None:
        self.conn.close()


# ----------------------------------------------------------------------------- request bodies

@dataclass
class Catalogue:
    devices: list[dict]
    seconds: float  # time of the GET /devices?includeSensors=true pages
    size: int

    def online(self) -> list[dict]:
        return [d for d in self.devices if d["state"] == "active"
                and d["health"]["connection"]["status"] == "online"
                and d["samplingPeriodSeconds"]]

    def rovers(self) -> list[dict]:
        return [d for d in self.online() if d["gnss"] and not d["gnss"].get("isBaseStation")]


def discover(client: Client) -> Catalogue:
    devices, seconds, size, offset = [], 0.0, 0, 0
    while True:
        raw, dt = client.ok("GET", f"/devices?includeSensors=true&limit={contract.PAGE_SIZE_MAX}"
                                   f"&offset={offset}")
        page = orjson.loads(raw)["items"]
        devices += page
        seconds += dt
        size += len(raw)
        if len(page) < contract.PAGE_SIZE_MAX:
            return Catalogue(devices, seconds, size)
        offset += len(page)


def pick_series(cat: Catalogue, span_s: int, gnss_fields: bool, budget: int) -> list[str]:
    """Parameter UUIDs of online devices whose full-window points add up to at most
    ``budget`` (the server's own count can only be lower: outages, late installs)."""
    chosen, total = [], 0
    for d in cat.online():
        n = span_s // int(d["samplingPeriodSeconds"]) + 1
        for s in d.get("sensors") or ():
            for p in s["parameters"]:
                if p["parameterType"].startswith("gnss_") != gnss_fields:
                    continue
                if total + n <= budget and len(chosen) < LIMITS.max_selector_items:
                    chosen.append(p["uuid"])
                    total += n
    return chosen


def pick_rovers(cat: Catalogue, span_s: int, budget: int) -> list[str]:
    chosen, total = [], 0
    for d in cat.rovers():
        n = span_s // int(d["samplingPeriodSeconds"]) + 1
        if total + n <= budget:
            chosen.append(d["serialNumber"])
            total += n
    return chosen


def sensor_data_body(uuids: list[str], start: datetime, end: datetime, **extra) -> dict:
    return {"parameterUuids": uuids, "startDate": iso(start), "endDate": iso(end), **extra}


def gnss_body(serials: list[str], start: datetime, end: datetime) -> dict:
    return {"deviceSerialNumbers": serials, "startDate": iso(start), "endDate": iso(end)}


def count_points(raw: bytes) -> tuple[int, int]:
    items = orjson.loads(raw)["items"]
    return sum(len(i["data"]) for i in items), len(items)


# ----------------------------------------------------------------------------- measurements

@dataclass
class Row:
    name: str
    unit: str  # what ``count`` counts: points, epochs, requests
    count: int
    items: int
    size: int
    times: list[float] = field(default_factory=list)

    @property
    def best(self) -> float:
        return min(self.times)

    @property
    def median(self) -> float:
        return statistics.median(self.times)


def measure_large(client: Client, name: str, unit: str, path: str, body: dict,
                  repeats: int) -> Row:
    raw, dt = client.ok("POST", path, body)  # warm-up (imports, caches), not counted
    count, items = count_points(raw)
    row = Row(name, unit, count, items, len(raw))
    for _ in range(repeats):
        raw2, dt = client.ok("POST", path, body)
        assert len(raw2) == len(raw), "the server's answer changed between repeats"
        row.times.append(dt)
    return row


def measure_small(client: Client, name: str, method: str, path: str, body: object,
                  repeats: int, seconds: float) -> Row:
    raw, _ = client.ok(method, path, body)
    row = Row(name, "requests", 0, 0, len(raw))
    for _ in range(repeats):
        n, t0 = 0, time.perf_counter()
        while n < 10 or time.perf_counter() - t0 < seconds:
            client.ok(method, path, body)
            n += 1
        row.times.append((time.perf_counter() - t0) / n)  # seconds per request
        row.count = n
    return row


def in_process_app(size: tuple[int, int, int]):
    from devmon_sync.server import ServerConfig, WorldSize
    from devmon_sync.server.http import App

    sites, devices, days = size
    return App(ServerConfig(port=0, api_keys={KEY: None}, now=NOW, rate_limit_per_minute=0,
                            size=WorldSize(sites, devices, days)))


def in_process_split(client: Client, size: tuple[int, int, int],
                     calls: list[tuple[str, str, str, dict]],
                     repeats: int) -> dict[str, tuple[float, float, float]]:
    """Fastest (build s, orjson.dumps s, HTTP s) of each (label, ReadApi method, path, body).

    Build and dumps run in this process, on the same request the server answers; they
    alternate with the HTTP request so that load from other work on the machine hits both
    alike."""
    from devmon_sync.server.api import Access

    app = in_process_app(size)
    now_s = app.now()
    out = {}
    for label, endpoint, path, body in calls:
        build, encode, over_http = [], [], []
        getattr(app.api, endpoint)(body, Access(), now_s)  # warm-up
        for _ in range(max(repeats, 3)):
            over_http.append(client.ok("POST", path, body)[1])
            t0 = time.perf_counter()
            result = getattr(app.api, endpoint)(body, Access(), now_s)
            t1 = time.perf_counter()
            orjson.dumps(result)
            t2 = time.perf_counter()
            build.append(t1 - t0)
            encode.append(t2 - t1)
            del result
        out[label] = (min(build), min(encode), min(over_http))
    return out


def profile(size: tuple[int, int, int], calls: list[tuple[str, str, dict]], top: int) -> None:
    """cProfile of the in-process build + encode of each call: top functions by own time.

    ``calls`` are (label, ReadApi method, body or query dict): every ReadApi method takes
    (body-or-params, access, now_s)."""
    from devmon_sync.server.api import Access

    app = in_process_app(size)
    now_s = app.now()
    for label, endpoint, body in calls:
        getattr(app.api, endpoint)(body, Access(), now_s)
        prof = cProfile.Profile()
        prof.enable()
        orjson.dumps(getattr(app.api, endpoint)(body, Access(), now_s))
        prof.disable()
        text = io.StringIO()
        pstats.Stats(prof, stream=text).sort_stats("tottime").print_stats(top)
        lines = text.getvalue().splitlines()
        print(f"\n--- cProfile: {label} (own time; cProfile inflates many small Python calls)")
        print(next((line for line in lines if "function calls" in line), "").strip())
        start = next(i for i, line in enumerate(lines) if "ncalls" in line)
        print("\n".join(line[:160] for line in lines[start:] if line.strip()))


# ----------------------------------------------------------------------------- reporting

def fmt_rate(x: float) -> str:
    return f"{x:,.0f}" if x >= 100 else f"{x:,.1f}"


def print_large(rows: list[Row]) -> None:
    print(f"{'large answer':<40} {'count':>7} {'items':>5} {'MB':>5} {'s min':>6} {'s med':>6}"
          f" {'per s (best)':>20} {'per s (med)':>12} {'MB/s med':>8}")
    for r in rows:
        best = f"{fmt_rate(r.count / r.best)} {r.unit}"
        print(f"{r.name:<40} {r.count:>7} {r.items:>5} {r.size / 1e6:>5.2f} {r.best:>6.3f} "
              f"{r.median:>6.3f} {best:>20} {fmt_rate(r.count / r.median):>12} "
              f"{r.size / 1e6 / r.median:>8.1f}")


def print_small(rows: list[Row]) -> None:
    print(f"{'small request (sequential, kept alive)':<40} {'bytes':>7} {'ms min':>7} "
          f"{'ms med':>7} {'req/s med':>9} {'x 200/min':>9}")
    for r in rows:
        rps = 1.0 / r.median
        print(f"{r.name:<40} {r.size:>7} {r.best * 1e3:>7.2f} {r.median * 1e3:>7.2f} "
              f"{rps:>9.0f} {rps / RATE_LIMIT_PER_S:>9.0f}")


# ----------------------------------------------------------------------------- main

def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0],
                                 formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--repeats", type=int, default=5, help="timed runs per measurement (5)")
    ap.add_argument("--small-seconds", type=float, default=0.6,
                    help="length of one run of small requests (0.6 s)")
    ap.add_argument("--window-days", type=float, default=28.0,
                    help="window of the POST /sensor-data requests (28 days)")
    ap.add_argument("--large-devices", type=int, default=500,
                    help="devices of the large world (500)")
    ap.add_argument("--large-days", type=int, default=730,
                    help="days of history of the large world (730)")
    ap.add_argument("--no-large-world", action="store_true", help="skip the large-world check")
    ap.add_argument("--no-control", action="store_true",
                    help="skip the control world (large-devices devices, 90 days)")
    ap.add_argument("--quick", action="store_true",
                    help="--repeats 2 --small-seconds 0.3 --no-control")
    ap.add_argument("--profile", action="store_true",
                    help="also profile the large requests in-process with cProfile")
    ap.add_argument("--python", default=sys.executable,
                    help="interpreter that runs the server (default: this one)")
    args = ap.parse_args(argv)
    if args.quick:
        args.repeats, args.small_seconds, args.no_control = 2, 0.3, True

    this_command = shlex.join([sys.executable, *sys.argv])
    started = time.perf_counter()
    print(f"# devmon reference server benchmark, {datetime.now(UTC):%Y-%m-%d %H:%M} UTC")
    print(f"# {platform.python_implementation()} {platform.python_version()}, "
          f"{os.cpu_count()} CPUs, load average {os.getloadavg()[0]:.2f}, "
          f"{platform.machine()} {platform.system()}")
    print(f"# command: {this_command}")

    span_s = int(args.window_days * 86400)
    end = NOW
    sd_start = end - timedelta(seconds=span_s)
    gnss_start = end - timedelta(days=LIMITS.max_range_days)
    gnss_span = int(LIMITS.max_range_days * 86400)

    # ---- small world: throughput
    small = (6, 48, 90)
    with ServerProcess(small[1], small[2], small[0], args.python) as srv:
        print(f"# server: {srv.command}")
        mem_small_start = srv.memory_mib()
        client = Client(srv.port)
        cat = discover(client)
        series_uuids = pick_series(cat, span_s, False, LIMITS.max_points)
        gnss_field_uuids = pick_series(cat, span_s, True, LIMITS.max_points)
        rovers = pick_rovers(cat, gnss_span, LIMITS.max_epochs)
        days = f"{args.window_days:g} d"
        calls = [
            (f"sensor-data {len(series_uuids)} params {days}", "sensor_data",
             sensor_data_body(series_uuids, sd_start, end)),
            ("  same, disableRounding", "sensor_data",
             sensor_data_body(series_uuids, sd_start, end, disableRounding=True)),
            ("  same, orderBy desc", "sensor_data",
             sensor_data_body(series_uuids, sd_start, end, orderBy="desc")),
            (f"sensor-data {len(gnss_field_uuids)} GNSS fields {days}", "sensor_data",
             sensor_data_body(gnss_field_uuids, sd_start, end)),
            (f"sensor-data/gnss {len(rovers)} rovers 31 d", "gnss",
             gnss_body(rovers, gnss_start, end)),
        ]
        large = [measure_large(client, label, "epochs" if ep == "gnss" else "points",
                               "/sensor-data/gnss" if ep == "gnss" else "/sensor-data",
                               body, args.repeats)
                 for label, ep, body in calls]
        piezo = next(d for d in cat.online()
                     if any(p["sourceType"] == "derived"
                            for s in d["sensors"] for p in s["parameters"]))
        one_param = piezo["sensors"][0]["parameters"][0]["uuid"]
        small_rows = [
            measure_small(client, f"GET /devices/{piezo['serialNumber']}", "GET",
                          f"/devices/{piezo['serialNumber']}", None, args.repeats,
                          args.small_seconds),
            measure_small(client, "POST /sensor-data/latest, 1 parameter", "POST",
                          "/sensor-data/latest", {"parameterUuids": [one_param]},
                          args.repeats, args.small_seconds),
            measure_small(client, "POST /sensor-data, 1 parameter, 1 day", "POST",
                          "/sensor-data", sensor_data_body([one_param], end - timedelta(days=1),
                                                           end), args.repeats,
                          args.small_seconds),
        ]
        mem_small_end = srv.memory_mib()
        split = in_process_split(
            client, small, [(label, ep, "/sensor-data/gnss" if ep == "gnss" else "/sensor-data",
                             body) for label, ep, body in calls
                            if "GNSS fields" not in label and "same," not in label],
            args.repeats)
        client.close()

    print()
    print(f"Small world {small[1]} devices, {small[2]} days (limits: {LIMITS.max_points} points,"
          f" {LIMITS.max_epochs} epochs per request; times are send to last byte)")
    print_large(large)
    print()
    print(f"{'in-process vs HTTP (alternated, fastest)':<40} {'build s':>8} {'dumps s':>8} "
          f"{'dumps %':>8} {'HTTP s':>7} {'in-proc/HTTP':>12}")
    by_name = {r.name: r for r in large}
    for label, (build_s, encode_s, http_s) in split.items():
        print(f"{label:<40} {build_s:>8.3f} {encode_s:>8.3f} "
              f"{100 * encode_s / (build_s + encode_s):>8.0f} {http_s:>7.3f} "
              f"{100 * (build_s + encode_s) / http_s:>11.0f}%")
    print("   dumps % = orjson.dumps share of build + dumps; the HTTP time adds freeing the "
          "result, socket I/O and reading the body")
    print()
    print(f"Discovery: GET /devices?includeSensors=true ({len(cat.devices)} devices) "
          f"{cat.size / 1e6:.2f} MB in {cat.seconds:.3f} s")
    print_small(small_rows)
    worst = max(r.median for r in small_rows)
    print(f"=> the slowest small request still runs {1 / worst / RATE_LIMIT_PER_S:.0f}x faster "
          f"than the rate limit ({contract.RATE_LIMIT_PER_MINUTE}/min = {RATE_LIMIT_PER_S:.2f}/s)")
    slot = 1 / RATE_LIMIT_PER_S
    for row, limit in ((by_name[calls[0][0]], LIMITS.max_points),
                       (next(r for r in large if r.unit == "epochs"), LIMITS.max_epochs)):
        full = limit * row.median / row.count
        bound = "the rate limit" if full < slot else "the server"
        print(f"=> {fmt_rate(row.count / row.median)} {row.unit}/s: a full {limit}-{row.unit[:-1]} "
              f"answer takes ~{full:.2f} s against a {slot:.2f} s rate-limit slot "
              f"(slot/server {slot / full:.1f}x): a sync of such answers is bound by {bound}")

    # ---- large world: start-up and memory
    worlds = [("small", small, srv.startup_s, mem_small_start, mem_small_end, None)]
    if not args.no_large_world:
        sizes = [("large", (6, args.large_devices, args.large_days))]
        if not args.no_control:
            sizes.append(("control", (6, args.large_devices, 90)))
        for tag, size in sizes:
            worlds.append(memory_run(tag, size, args, span_s))
        print()
        print(f"{'world':<8} {'devices':>7} {'days':>5} {'start s':>7} {'RSS start':>9} "
              f"{'RSS after':>9} {'peak':>7}  large requests served (s)")
        for tag, size, startup, m0, m1, served in worlds:
            print(f"{tag:<8} {size[1]:>7} {size[2]:>5} {startup:>7.2f} {m0[0]:>7.0f}Mi "
                  f"{m1[0]:>7.0f}Mi {m1[1]:>5.0f}Mi  {served or 'the throughput runs above'}")
        if len(worlds) > 2:
            large_w, control_w = worlds[1], worlds[2]
            print(f"=> {args.large_days} vs 90 days of history at {args.large_devices} devices: "
                  f"RSS after {large_w[4][0]:.0f} vs {control_w[4][0]:.0f} MiB "
                  f"(x{large_w[4][0] / control_w[4][0]:.2f}), "
                  f"start-up {large_w[2]:.2f} vs {control_w[2]:.2f} s")

    if args.profile:
        profile(small, [calls[0], next(c for c in calls if c[1] == "gnss"),
                        next(c for c in calls if "GNSS fields" in c[0]),
                        ("GET /devices?includeSensors=true (48 devices)", "devices",
                         {"includeSensors": ["true"], "limit": [str(contract.PAGE_SIZE_MAX)]})],
                18)

    print(f"\n# total {time.perf_counter() - started:.0f} s; command: {this_command}")
    return 0


def memory_run(tag: str, size: tuple[int, int, int], args, span_s: int):
    """Start a world, serve a few large requests at the end of its history and at its oldest
    (where every device is installed), and read the server's memory before and after."""
    sites, devices, days = size
    with ServerProcess(devices, days, sites, args.python) as srv:
        m0 = srv.memory_mib()
        client = Client(srv.port)
        cat = discover(client)
        served = [f"devices {cat.seconds:.2f}"]
        series = pick_series(cat, span_s, False, LIMITS.max_points)
        rovers = pick_rovers(cat, int(LIMITS.max_range_days * 86400), LIMITS.max_epochs)
        # every device is installed 20 days after the world's origin at the latest
        first = NOW - timedelta(days=days - 20 - LIMITS.max_range_days)
        for label, end in (("end", NOW), ("oldest", first)):
            start = end - timedelta(seconds=span_s)
            raw, dt = client.ok("POST", "/sensor-data", sensor_data_body(series, start, end))
            served.append(f"data@{label} {count_points(raw)[0]}pt {len(raw) / 1e6:.1f}MB {dt:.2f}")
            g_start = end - timedelta(days=LIMITS.max_range_days)
            raw, dt = client.ok("POST", "/sensor-data/gnss", gnss_body(rovers, g_start, end))
            served.append(f"gnss@{label} {count_points(raw)[0]}ep {len(raw) / 1e6:.1f}MB {dt:.2f}")
        m1 = srv.memory_mib()
        client.close()
        return tag, size, srv.startup_s, m0, m1, ", ".join(served)


if __name__ == "__main__":
    sys.exit(main())

#!/usr/bin/env python3
"""Peak memory of a sync through hostile answers (issue 29, item 4): what one answer may cost.

A reference server (in this process) sits behind a loopback proxy that answers the sync's
first POST /sensor-data itself, as a hostile or broken service would, and forwards every
other request; the sync is ``devmon sync`` in a subprocess, whose peak resident memory
(``VmHWM`` of that very program, written as it exits) is the figure.  The answers:

- ``huge``: a valid JSON opening, then 2 GiB of spaces (sent as it is made, no length stated);
- ``stated``: the same with its length in a ``Content-Length``;
- ``bomb``: a gzip bomb, 10 MB compressed (``Content-Encoding: gzip``) that decode to 10 GiB
  of spaces inside a valid JSON answer;
- ``points``: 3 million extra points (the asked parameter, stamped at the window's start,
  values as numeric strings: the slow path of the decoder);
- ``dense``: 1 million points under devmon's byte bound but over its bound on the values of
  one answer.

The bare baseline is a sync of the same world through the same proxy answering nothing
itself.  Each hostile sync must end ``ok`` with the same rows as the baseline (the data
come in smaller windows), and stay under 1 GiB.

    python benchmarks/bench_answer_memory.py            # the figures at the default bounds
    python benchmarks/bench_answer_memory.py --quick    # smaller answers (a quick look)

The answers' makers and the measured subprocess are shared with
``tests/test_answer_memory.py`` (``support.bench_module``).
"""

from __future__ import annotations

import argparse
import os
import struct
import subprocess
import sys
import tempfile
import threading
import time
import zlib
from collections.abc import Callable, Iterable, Iterator
from dataclasses import dataclass
from http.server import BaseHTTPRequestHandler
from pathlib import Path

import orjson

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))
sys.path.insert(0, str(ROOT / "tests"))
from http_stubs import MutatingProxy  # noqa: E402

from devmon_sync import api_contract as contract  # noqa: E402

MiB = 1 << 20
GiB = 1 << 30
PIECE = MiB
"""Bytes the proxy writes at a time (of the decoded answer, for the bomb)."""

Answer = Callable[[dict], "tuple[dict[str, str], Iterable[bytes]]"]
"""A hostile answer: (headers, pieces of the body) for a POST /sensor-data request body."""


# ------------------------------------------------------------------ hostile answers

def _opening(request: dict) -> bytes:
    """The start of a valid POST /sensor-data answer for the request's first parameter."""
    uuid = (request.get("parameterUuids") or ["00000000-0000-4000-8000-000000000000"])[0]
    return b'{"items":[{"parameterUuid":' + orjson.dumps(uuid) + b',"data":['


_CLOSING = b"]}]}"


def huge(body_bytes: int, stated: bool = False) -> Answer:
    """A valid answer padded with ``body_bytes`` of spaces, sent as made; its length in a
    ``Content-Length`` when ``stated`` (else none: it ends when the connection closes)."""
    def answer(request: dict) -> tuple[dict, Iterator[bytes]]:
        count = body_bytes // PIECE

        def pieces() -> Iterator[bytes]:
            yield _opening(request)
            spaces = b" " * PIECE
            for _ in range(count):
                yield spaces
            yield _CLOSING
        length = len(_opening(request)) + count * PIECE + len(_CLOSING)
        return ({"Content-Length": str(length)} if stated else {}), pieces()
    return answer


def bomb(decoded_bytes: int) -> Answer:
    """A gzip stream of a valid answer padded with ``decoded_bytes`` of spaces: each MiB of
    spaces is one deflate segment compressed once (flushed whole, so the same bytes repeat),
    about 1 kB on the wire; the trailer's CRC is counted only once every segment was taken
    (a client that stops early never costs it)."""
    spaces = b" " * PIECE
    raw = zlib.compressobj(9, zlib.DEFLATED, -15)
    segment = raw.compress(spaces) + raw.flush(zlib.Z_FULL_FLUSH)

    def answer(request: dict) -> tuple[dict, Iterator[bytes]]:
        def pieces() -> Iterator[bytes]:
            opening = _opening(request)
            head = zlib.compressobj(9, zlib.DEFLATED, 31)  # the gzip header and the opening
            yield head.compress(opening) + head.flush(zlib.Z_FULL_FLUSH)
            count = decoded_bytes // PIECE
            for _ in range(count):
                yield segment
            crc, size = zlib.crc32(opening), len(opening) + count * PIECE
            for _ in range(count):
                crc = zlib.crc32(spaces, crc)
            tail = zlib.compressobj(9, zlib.DEFLATED, -15)
            yield tail.compress(_CLOSING) + tail.flush() + struct.pack(
                "<II", zlib.crc32(_CLOSING, crc), (size + len(_CLOSING)) & 0xFFFFFFFF)
        return {"Content-Encoding": "gzip"}, pieces()
    return answer


def points(count: int) -> Answer:
    """``count`` points of the asked parameter, all at the window's start, each value a
    numeric string ("1.5": read, but by the decoder's slow path, one dict a point)."""
    def answer(request: dict) -> tuple[dict, Iterator[bytes]]:
        point = b'{"timestamp":' + orjson.dumps(request.get("startDate")) + \
            b',"value":"1.5"}'
        per_piece = 10_000

        def pieces() -> Iterator[bytes]:
            yield _opening(request) + point
            run = (b"," + point) * per_piece
            left = count - 1
            while left > 0:
                yield run if left >= per_piece else (b"," + point) * left
                left -= per_piece
            yield _CLOSING
        return {}, pieces()
    return answer


# ------------------------------------------------------------------ the hostile service

class HostileProxy(MutatingProxy):
    """``MutatingProxy`` (the reference server behind it) whose first ``times`` POST
    /sensor-data requests get ``answer`` instead (status 200, the body streamed, the
    connection closed after it): a service that misbehaves, then behaves."""

    def __init__(self, upstream: str, answer: Answer | None, times: int = 1):
        super().__init__(upstream)
        self.answer = answer
        self.times = times
        self.hostile_sent: list[int] = []
        """Bytes written of each hostile answer before it ended or the client hung up."""
        self._count_lock = threading.Lock()

    def _handle(self, h: BaseHTTPRequestHandler, method: str) -> None:
        rel = h.path.split("?", 1)[0].removeprefix(contract.API_PREFIX)
        with self._count_lock:
            hostile = self.answer is not None and (method, rel) == ("POST", "/sensor-data") \
                and len(self.hostile_sent) < self.times
            if hostile:
                self.hostile_sent.append(0)
                index = len(self.hostile_sent) - 1
        if not hostile:
            super()._handle(h, method)
            return
        length = int(h.headers.get("Content-Length") or 0)
        request = orjson.loads(h.rfile.read(length)) if length else {}
        headers, body = self.answer(request)
        h.send_response(200)
        for name, value in {"Content-Type": "application/json", "Connection": "close",
                            **headers}.items():
            h.send_header(name, value)
        h.end_headers()
        h.close_connection = True
        try:
            for piece in body:
                h.wfile.write(piece)
                self.hostile_sent[index] += len(piece)
        except (BrokenPipeError, ConnectionResetError):
            pass  # the client stopped reading: what the bound is for


# ------------------------------------------------------------------ the measured sync

@dataclass(frozen=True)
class Measured:
    returncode: int
    stdout: str
    stderr: str
    peak_rss_bytes: int
    seconds: float


#: ``devmon`` run so that it writes its own peak resident memory (``VmHWM`` of
#: /proc/self/status, of the program after exec) to argv[1] as it exits.  ``ru_maxrss`` of
#: the child is not enough: Linux carries the parent's high-water mark over the fork into
#: it, so a child of a large process (a pytest worker of 1 GB) read 963 MiB doing nothing.
PEAK_WRITER = """
import atexit, runpy, sys
out = sys.argv.pop(1)
def peak():
    try:
        for line in open("/proc/self/status"):
            if line.startswith("VmHWM:"):
                open(out, "w").write(str(int(line.split()[1]) * 1024))
    except OSError:
        pass
atexit.register(peak)
sys.argv[0] = "devmon"
runpy.run_module("devmon_sync", run_name="__main__")
"""


def measured_sync(base_url: str, key: str, db: Path, home: Path,
                  timeout_s: float = 600.0) -> Measured:
    """``devmon sync`` in a subprocess; its own peak resident memory (``VmHWM`` as it
    exits, ``PEAK_WRITER``; where there is no /proc, ``ru_maxrss`` by ``os.wait4``)."""
    env = {k: v for k, v in os.environ.items() if k != "DEVMON_API_KEY"}
    env.update(DEVMON_LOG_DIR=str(home / "logs"), DEVMON_CONFIG_DIR=str(home / "cfg"),
               DEVMON_DATA_DIR=str(home / "data"))
    home.mkdir(parents=True, exist_ok=True)
    out_path, err_path = home / "stdout.txt", home / "stderr.txt"
    started = time.perf_counter()
    with open(out_path, "wb") as out, open(err_path, "wb") as err:
        peak_path = home / "peak_rss_bytes.txt"
        proc = subprocess.Popen(
            [sys.executable, "-c", PEAK_WRITER, str(peak_path), "sync", "--base-url",
             base_url, "--db",
             str(db), "--api-key", key, "--rate-limit", "0", "--quiet"],
            stdout=out, stderr=err, env=env)
    timer = threading.Timer(timeout_s, proc.kill)
    timer.start()
    try:
        _, status, usage = os.wait4(proc.pid, 0)
    finally:
        timer.cancel()
    proc.returncode = os.waitstatus_to_exitcode(status)  # reaped here, not by Popen
    peak = (int(peak_path.read_text()) if peak_path.exists() and peak_path.read_text()
            else usage.ru_maxrss * 1024)
    return Measured(proc.returncode, out_path.read_text(errors="replace"),
                    err_path.read_text(errors="replace"), peak,
                    time.perf_counter() - started)


# ------------------------------------------------------------------ the benchmark

def _mirror_rows(db: Path) -> dict:
    sys.path.insert(0, str(ROOT / "tests"))
    from support import snapshot

    return snapshot(db)


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--quick", action="store_true", help="answers a tenth as large")
    args = parser.parse_args()
    from devmon_sync.server import ReferenceServer, ServerConfig, WorldSize
    from devmon_sync.service_profile import MAX_ANSWER_BYTES, MAX_ANSWER_VALUES

    scale = 10 if args.quick else 1
    cases = {
        "huge": (f"{2 * GiB // scale / GiB:g} GiB of spaces", huge(2 * GiB // scale)),
        "stated": ("the same, its length stated", huge(2 * GiB // scale, stated=True)),
        "bomb": (f"gzip bomb to {10 * GiB // scale / GiB:g} GiB", bomb(10 * GiB // scale)),
        "points": (f"{3_000_000 // scale:,} extra points", points(3_000_000 // scale)),
        "dense": ("1,000,000 points under the byte bound", points(1_000_000)),
    }
    key = "bench-key"
    size = WorldSize(sites=1, devices=6, days=10)
    config = ServerConfig(port=0, api_keys={key: None}, now=contract_now(),
                          rate_limit_per_minute=0, size=size)
    print(f"devmon's bounds: {MAX_ANSWER_BYTES / MiB:g} MiB an answer (raw and decoded), "
          f"{MAX_ANSWER_VALUES:,} values an answer")
    print(f"world: {size}; peak RSS of `devmon sync` in a subprocess (its own VmHWM)")
    with tempfile.TemporaryDirectory() as tmp, ReferenceServer(config).start() as srv:
        folder = Path(tmp)
        with HostileProxy(srv.base_url, None) as proxy:
            base = measured_sync(proxy.base_url, key, folder / "clean.duckdb", folder / "clean")
        assert base.returncode == 0, base.stderr
        clean = _mirror_rows(folder / "clean.duckdb")
        print(f"{'baseline (well-behaved)':<40} {base.peak_rss_bytes / MiB:8.0f} MiB "
              f"{base.seconds:6.1f} s")
        worst = base.peak_rss_bytes
        for name, (what, answer) in cases.items():
            db = folder / f"{name}.duckdb"
            with HostileProxy(srv.base_url, answer) as proxy:
                got = measured_sync(proxy.base_url, key, db, folder / name)
                sent = proxy.hostile_sent[0] if proxy.hostile_sent else 0
            same = got.returncode == 0 and _mirror_rows(db) == clean
            said = next((line.strip() for line in got.stdout.splitlines()
                         if "devmon" in line and "bound" in line), "(no line names a bound)")
            print(f"{name + ': ' + what:<40} {got.peak_rss_bytes / MiB:8.0f} MiB "
                  f"{got.seconds:6.1f} s  exit {got.returncode}, mirror "
                  f"{'same as baseline' if same else 'DIFFERS'}, {sent / MiB:,.1f} MiB sent")
            print(f"    {said[:200]}")
            worst = max(worst, got.peak_rss_bytes)
            if got.returncode != 0:
                print(got.stderr[-2000:])
    print(f"worst peak: {worst / MiB:.0f} MiB ({'under' if worst < GiB else 'OVER'} 1 GiB)")
    return 0 if worst < GiB else 1


def contract_now():
    from datetime import UTC, datetime

    return datetime(2026, 1, 1, tzinfo=UTC)


if __name__ == "__main__":
    raise SystemExit(main())

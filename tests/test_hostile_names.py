"""Names from the service are data, never terminal commands nor file names as they are
(issue 29, items 8 and 9).

A service (through a loopback proxy) names its sites, devices, groups and sensors with ANSI
escape sequences, a bell, Unicode bidi overrides, a carriage return and a newline followed by
a line that looks like devmon's own output: every command that prints those names shows them
escaped (``\\x1b``, ``\\u202e``, ``\\n``), recognisable, on the line they belong to, and
the sync log gets no forged line either.  Another service gives two GNSS rovers serial
numbers of 10,000 characters that differ only in their last one, and a site a name as long:
``devmon report`` and ``devmon export`` still write every file, with bounded names, one
each per device.
"""

from __future__ import annotations

import json
import os
import re
import shutil
import subprocess
from http.server import BaseHTTPRequestHandler
from pathlib import Path
from urllib.parse import quote, quote_plus

import pytest
from PIL import Image
import requests
from http_stubs import LoopbackProxy, MutatingProxy
from support import KEY, Api, start_server
from support import devmon as run_devmon

from devmon_sync import api_contract as contract
from devmon_sync.server import WorldSize

#: the smallest world with the creep and stable rovers the tests name (one site, ten days:
#: the names are the point, not the data)
WORLD = WorldSize(sites=1, devices=6, days=10)

#: What a hostile service appends to every name: colour, bell, a right-to-left override, a
#: first-strong isolate, a carriage return and a forged line.
HOSTILE = "\x1b[31m\x07\u202e\u2066RED\r\nFORGED line"
RAW = {"ESC": "\x1b", "BEL": "\x07", "RLO": "\u202e", "FSI": "\u2066", "CR": "\r"}
ESCAPED = r"\x1b[31m\x07\u202e\u2066RED\r\nFORGED line"
LONG = 10_000


def cli(folder: Path, *args: str) -> tuple[int, str, str]:
    """``devmon ARGS`` in a process of its own (its log in ``folder``), with stdout and stderr
    as the bytes written, decoded: no universal-newline translation hiding a carriage
    return."""
    env = {k: v for k, v in os.environ.items() if k != "DEVMON_API_KEY"}
    env.update(DEVMON_LOG_DIR=str(folder / "logs"), DEVMON_DATA_DIR=str(folder / "data"))
    r = run_devmon(*args, timeout=600, env=env, text=False)
    return r.returncode, r.stdout.decode("utf-8"), r.stderr.decode("utf-8")


def assert_printable(text: str, where: str) -> None:
    """No raw control or bidi character, no line starting with the forged text."""
    raw = [name for name, char in RAW.items() if char in text]
    assert not raw, f"{where}: raw {raw} reached the terminal:\n{text[:3000]!r}"
    forged = [line for line in text.splitlines() if line.lstrip().startswith("FORGED")]
    assert not forged, f"{where}: forged lines {forged[:3]}:\n{text[:3000]}"


def _hostile_names(method: str, path: str, payload) -> None:
    """Every ``name`` and ``alias`` in an answer, with ``HOSTILE`` appended."""
    if isinstance(payload, dict):
        for key, value in payload.items():
            if key in ("name", "alias") and isinstance(value, str):
                payload[key] = value + HOSTILE
            else:
                _hostile_names(method, path, value)
    elif isinstance(payload, list):
        for item in payload:
            _hostile_names(method, path, item)


def _refuse_once(method: str, path: str, body, seen=[]):  # noqa: B006 (one fixture's)
    """The first POST /sensor-data refused with a 503 whose message carries ``HOSTILE``:
    the service's own words reach the sync log and the terminal through the retry."""
    if method == "POST" and path == "/sensor-data" and not seen:
        seen.append(path)
        return 503, {"statusCode": 503, "message": f"busy{HOSTILE}", "error": "Unavailable"}
    return None


def _items(answer) -> list[dict]:
    return answer["items"] if isinstance(answer, dict) else answer


# ----------------------------------------------------------------------------- hostile names


@pytest.fixture(scope="module")
def hostile(tmp_path_factory):
    """A mirror synced by ``devmon sync`` through the renaming proxy; the outputs of sync,
    probe and verify, and the world's (unrenamed) GNSS rovers."""
    folder = tmp_path_factory.mktemp("hostile")
    db = str(folder / "hostile.duckdb")
    with start_server(size=WORLD) as srv, \
            MutatingProxy(srv.base_url, mutate=_hostile_names, refuse=_refuse_once) as proxy:
        client = ("--base-url", proxy.base_url, "--api-key", KEY, "--rate-limit", "0")
        runs = {"sync": cli(folder, "sync", "--db", db, *client),
                "probe": cli(folder, "probe", *client),
                "verify": cli(folder, "verify", "--db", db, *client)}
        devices = _items(Api(srv.base_url).ok("get", "/devices"))
        sites = _items(Api(srv.base_url).ok("get", "/sites"))
    creep = next(d for d in devices if "creep" in (d["alias"] or d["name"] or ""))
    return {"folder": folder, "db": db, "runs": runs, "creep": creep, "sites": sites}


def test_sync_probe_and_verify_print_no_raw_control_character(hostile):
    for command, (code, out, err) in hostile["runs"].items():
        assert code == 0, (command, out, err)
        assert_printable(out + err, f"devmon {command}")


def test_the_sync_log_gets_no_forged_line(hostile):
    log = (hostile["folder"] / "logs" / "sync.log").read_text(encoding="utf-8")
    assert "busy\\x1b[31m" in log, log[-3000:]  # the refusal's message, escaped
    assert_printable(log, "sync.log")


def test_status_shows_the_names_escaped_and_recognisable(hostile):
    code, out, err = cli(hostile["folder"], "status", "--db", hostile["db"])
    assert code == 0, err
    assert_printable(out + err, "devmon status")
    assert "Illgraben GNSS creep 02\\x1b[" in out, out  # cut at 28 characters


def test_analyze_shows_the_rovers_name_escaped_on_its_own_line(hostile):
    serial = hostile["creep"]["serialNumber"]
    code, out, err = cli(hostile["folder"], "analyze", "--db", hostile["db"], "--device", serial)
    assert code == 0, err
    assert_printable(out + err, "devmon analyze")
    assert out.splitlines()[0].startswith(f"{serial}  Illgraben GNSS creep 02{ESCAPED}"), out


def test_alarms_show_the_device_and_site_names_escaped(hostile):
    serial = hostile["creep"]["serialNumber"]
    code, out, err = cli(hostile["folder"], "alarms", "--db", hostile["db"], "--device", serial,
                         "--displacement", "alert=10,alarm=20")
    assert code == 0, err
    assert_printable(out + err, "devmon alarms --device")
    assert f"Illgraben GNSS creep 02{ESCAPED}" in out, out
    site = next(s for s in hostile["sites"] if s["name"] == "Illgraben slope")
    code, out, err = cli(hostile["folder"], "alarms", "--db", hostile["db"], "--site", site["uuid"])
    assert code == 0, err
    assert_printable(out + err, "devmon alarms --site")
    assert f"Illgraben slope{ESCAPED}" in out, out


def test_an_error_quoting_the_names_is_one_line(hostile):
    """The sites listed when a site is not found: one line on stderr, the names escaped."""
    code, out, err = cli(hostile["folder"], "alarms", "--db", hostile["db"], "--site", "nosuch")
    assert code == 2
    assert_printable(out + err, "devmon alarms --site nosuch")
    assert len(err.strip().splitlines()) == 1 and f"Illgraben slope{ESCAPED}" in err, err


def test_report_lists_its_sections_with_the_names_escaped(hostile, tmp_path):
    serial = hostile["creep"]["serialNumber"]
    code, out, err = cli(hostile["folder"], "report", "--db", hostile["db"], "--device", serial,
                         "--out", str(tmp_path / "r.pdf"), "--png-dir", str(tmp_path / "png"))
    assert code == 0, err
    assert_printable(out + err, "devmon report")
    assert f"Illgraben GNSS creep 02{ESCAPED}" in out, out
    for png in (tmp_path / "png").iterdir():
        assert png.name.isascii() and png.name.isprintable(), png.name


def test_printable_keeps_letters_and_escapes_controls():
    from devmon_sync.printable import printable

    kept = "Zürich Ωmega 東京 مرحبا naïve café \\ back\\slash\ttab"
    assert printable(kept, newlines=True) == kept
    assert printable("a\x1b[2Jb\x07\u202ec\u061c\u200e\u200f\u2069\x85\x7f\nd\re") == \
        "a\\x1b[2Jb\\x07\\u202ec\\u061c\\u200e\\u200f\\u2069\\x85\\x7f\\nd\\re"
    assert printable("one\ntwo", newlines=True) == "one\ntwo"
    assert printable("\U000e0041 tag") == "\\U000e0041 tag"


# ----------------------------------------------------------------------------- long names


class SerialRenamingProxy(LoopbackProxy):
    """A loopback proxy in front of the reference server that gives devices other serial
    numbers (``renamed``: serial -> new serial): in every answer, and back in every request
    (path, query, body), so the service still finds its devices."""

    def __init__(self, upstream: str, renamed: dict[str, str]):
        self.root = upstream[: -len(contract.API_PREFIX)]
        self.answers = [(f'"{old}"'.encode(), json.dumps(new).encode())
                        for old, new in renamed.items()]
        self.asks = [(json.dumps(new).encode(), f'"{old}"'.encode())
                     for old, new in renamed.items()]
        self.paths = [(quote(new, safe=""), old) for old, new in renamed.items()] + \
            [(quote(new), old) for old, new in renamed.items()] + \
            [(quote_plus(new), old) for old, new in renamed.items()]
        super().__init__()

    @staticmethod
    def _swap(data: bytes | str, pairs):
        for old, new in pairs:
            data = data.replace(old, new)
        return data

    def _handle(self, h: BaseHTTPRequestHandler, method: str) -> None:
        length = int(h.headers.get("Content-Length") or 0)
        body = self._swap(h.rfile.read(length), self.asks) if length else None
        headers = {k: v for k, v in h.headers.items()
                   if k.lower() in (contract.API_KEY_HEADER, "content-type", "accept")}
        with requests.Session() as session:
            session.trust_env = False
            answer = session.request(method, self.root + self._swap(h.path, self.paths),
                                     data=body, headers=headers, timeout=120,
                                     allow_redirects=False)
        content = self._swap(answer.content, self.answers)
        h.send_response(answer.status_code)
        h.send_header("Content-Type", answer.headers.get("Content-Type", "application/json"))
        h.send_header("Content-Length", str(len(content)))
        h.end_headers()
        h.wfile.write(content)


@pytest.fixture(scope="module")
def long_names(tmp_path_factory):
    """A mirror in which two GNSS rovers (creep, stable) have serial numbers of 10,000
    characters differing in the last one only: (folder, mirror, {scenario: serial})."""
    folder = tmp_path_factory.mktemp("long")
    db = str(folder / "long.duckdb")
    with start_server(size=WORLD) as srv:
        devices = _items(Api(srv.base_url).ok("get", "/devices"))
        rovers = {s: next(d["serialNumber"] for d in devices if s in (d["alias"] or ""))
                  for s in ("creep", "stable")}
        renamed = {rovers["creep"]: "S" * LONG + "1", rovers["stable"]: "S" * LONG + "2"}
        with SerialRenamingProxy(srv.base_url, renamed) as proxy:
            code, out, err = cli(folder, "sync", "--db", db, "--base-url", proxy.base_url,
                                 "--api-key", KEY, "--rate-limit", "0", "--quiet")
    assert code == 0, (out, err[-2000:])
    return folder, db, {s: renamed[sn] for s, sn in rovers.items()}


def _bounded(path: Path, root: Path) -> None:
    for part in path.relative_to(root).parts:
        assert len(part.encode()) <= 160, f"{len(part.encode())} bytes: {part[:80]}..."


def test_export_writes_every_device_with_a_long_serial_number(long_names, tmp_path):
    folder, db, serials = long_names
    out = tmp_path / "export"
    code, stdout, err = cli(folder, "export", "--db", db, "--out", str(out))
    assert code == 0, err[-1500:]
    files = [p for p in out.rglob("*") if p.is_file()]
    for path in files:
        _bounded(path, out)
    manifest = json.loads((out / "_manifest.json").read_text())
    for table in ("readings", "gnss_epochs"):
        parts = manifest["tables"][table]["partitions"]
        for serial in serials.values():
            mine = [p for p in parts if p["device_serial_number"] == serial]
            assert mine, f"{table}: no partition of the long serial number"
            assert all((out / f).is_file() for p in mine for f in p["files"])
        folders = {Path(f).parent.parent for p in parts for f in p["files"]
                   if p["device_serial_number"] in serials.values()}
        assert len(folders) == 2, folders  # one folder per device, not one for both
    assert "too long" in stdout, stdout  # said, not silent
    code, stdout, err = cli(folder, "export", "--db", db, "--out", str(out))
    assert code == 0, err[-1500:]
    assert "0 partitions written" in stdout, stdout  # found again: nothing rewritten


def test_report_of_devices_with_long_serial_numbers_writes_bounded_unique_pngs(long_names,
                                                                                tmp_path):
    folder, db, serials = long_names
    pngs = tmp_path / "png"
    code, _, err = cli(folder, "report", "--db", db, "--device", serials["creep"],
                         "--device", serials["stable"], "--out", str(tmp_path / "r.pdf"),
                         "--png-dir", str(pngs), "--png-dpi", "50", "--jobs", "1")
    assert code == 0, err[-1500:]
    names = sorted(p.name for p in pngs.iterdir())
    for path in pngs.iterdir():
        _bounded(path, pngs)
    displacement = [n for n in names if n.endswith("_displacement.png")]
    assert len(displacement) == 2, names
    for path in pngs.iterdir():  # at the resolution asked for, written in the file (pHYs)
        with Image.open(path) as image:
            assert [round(d) for d in image.info["dpi"]] == [50, 50], path.name
    # a word longer than a line takes a few lines, its end the last (where the two differ):
    # the whole serial wrapped made cells and the cover hundreds of lines long (3.6 s a page)
    if shutil.which("pdftotext"):
        text = subprocess.run(["pdftotext", str(tmp_path / "r.pdf"), "-"], check=True,
                              capture_output=True, text=True).stdout
        runs = re.findall(r"S{200,}", text.replace("\n", ""))
        assert sum(map(len, runs)) < LONG, [len(r) for r in runs]  # never drawn whole
        assert re.search(r"…S*1\b", text) and re.search(r"…S*2\b", text)


def test_a_pdf_name_too_long_fails_before_any_work(tmp_path):
    """``check_output`` (called before the analyses) refuses a name the file system cannot
    hold, with the reason and what to do."""
    from devmon_sync.report import ReportError, check_output

    with pytest.raises(ReportError, match="too long"):
        check_output(tmp_path / ("r" * 250 + ".pdf"))

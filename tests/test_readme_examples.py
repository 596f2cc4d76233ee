"""The README's examples run as written on the demo's mirror (the world `devmon demo` and
`devmon serve` give: seed 42, 6 sites, 48 devices, up to the real now; 30 days of it rather
than 90: the examples name its sites, groups, devices and relative dates, which a shorter
history keeps, and drawing two more months of epochs in three reports tested nothing more).

First report: the `devmon analyze`, `alarms` and `report` examples named a serial, a
projection and dates the demo mirror does not have.  Issue 30.11: the curl GNSS call got 400
"Date range too long: 330.07 days" and the DuckDB example for month 2026-01 returned 0 rows:
fixed dates rot, so the examples use relative ones, and the reference server here keeps the
wall clock as `devmon serve` does.  Covered: the curl calls (against the reference server as
`devmon serve` starts it), the sync example (which makes the mirror every other example
uses), `status`, `export`, `analyze`, `alarms`, `report`, and the DuckDB queries of the
shared export.  Not run: commands for a real service (`--profile site-a`: no such service
here), the install, test and build commands, the GUI, and Spark and Trino (Spark reads the
export in tests/test_export_engines.py; Trino is not installable here).
"""

from __future__ import annotations

import json
import re
import shlex
import subprocess
from pathlib import Path

import duckdb
import pytest

from devmon_sync.demo import DEMO_KEY
from devmon_sync.server import WorldSize

from support import devmon, start_server

README = Path(__file__).resolve().parents[1] / "README.md"
DEMO_DB = "devmon-demo/mirror.duckdb"
MIRROR = "mirror.duckdb"  # the examples' mirror: the one the README's sync example makes
SERVE_URL = "http://127.0.0.1:8787"  # where `devmon serve` listens by default
SHARED = "/srv/shared/devmon-export"  # the shared export folder of the examples
DEMO_WORLD = WorldSize(6, 48, 30)


def shell_blocks() -> list[str]:
    """The README's ```sh blocks, continuation lines joined."""
    return [re.sub(r"\\\n\s*", " ", block)
            for block in re.findall(r"```sh\n(.*?)```", README.read_text(), re.DOTALL)]


def readme_commands() -> list[list[str]]:
    """Every `devmon analyze|alarms|report|status|export` command of the README's shell blocks
    that uses the demo mirror or the examples' mirror (not a real service's profile), its
    comment dropped."""
    out = []
    for block in shell_blocks():
        for line in block.splitlines():
            words = shlex.split(line, comments=True)
            if words[:1] == ["devmon"] and words[1:2] in (
                    ["analyze"], ["alarms"], ["report"], ["status"], ["export"]) \
                    and (DEMO_DB in words or MIRROR in words) and "--profile" not in words:
                out.append(words)
    return out


def the_sync_example() -> list[str]:
    """The README's `devmon sync` against the reference server (`devmon serve`)."""
    for block in shell_blocks():
        for line in block.splitlines():
            words = shlex.split(line, comments=True)
            if words[:2] == ["devmon", "sync"] and any(w.startswith(SERVE_URL) for w in words):
                return words
    raise AssertionError("no `devmon sync --base-url http://127.0.0.1:8787/v1 ...` example")


def the_curl_block() -> str:
    [block] = [b for b in shell_blocks() if "curl " in b]
    return block


def the_duckdb_queries() -> str:
    """The ```sql block of the DuckDB example (the one that reads the export's Parquet)."""
    [sql] = [b for b in re.findall(r"```sql\n(.*?)```", README.read_text(), re.DOTALL)
             if "read_parquet(" in b]
    return sql


@pytest.fixture(scope="module")
def demo_server():
    """The reference server as `devmon serve` starts it: the demo's world and key, the
    service's rate limit, and the wall clock (the examples' dates are relative to now)."""
    srv = start_server(size=DEMO_WORLD, seed=42, now=None, api_keys={DEMO_KEY: None},
                       rate_limit_per_minute=200)
    yield srv
    srv.stop()


def run(args: list[str], cwd: Path) -> subprocess.CompletedProcess:
    return devmon(*args, timeout=600, cwd=cwd)


@pytest.fixture(scope="module")
def demo_mirror(tmp_path_factory, demo_server) -> Path:
    """The mirror the README's sync example makes against that server."""
    folder = tmp_path_factory.mktemp("readme")
    root = demo_server.base_url.rsplit("/v1", 1)[0]
    args = [w.replace(SERVE_URL, root) for w in the_sync_example()[1:]]
    r = run(args, folder)
    assert r.returncode == 0, (args, r.stderr[-2000:])
    return folder / MIRROR


@pytest.fixture(scope="module")
def shared_export(demo_mirror, tmp_path_factory) -> Path:
    """The shared export folder, written by the README's export example to it."""
    out = tmp_path_factory.mktemp("shared") / "devmon-export"
    [command] = [c for c in readme_commands() if c[1] == "export" and SHARED in c]
    r = run([str(demo_mirror) if w == MIRROR else str(out) if w == SHARED else w
             for w in command[1:]], demo_mirror.parent)
    assert r.returncode == 0, r.stderr[-2000:]
    return out


def test_the_readme_has_such_examples():
    kinds = {c[1] for c in readme_commands()}
    assert kinds == {"analyze", "alarms", "report", "status", "export"}, kinds


@pytest.mark.parametrize("command", readme_commands(), ids=lambda c: " ".join(c[1:5]))
def test_each_readme_example_runs_on_the_demo_mirror(command, demo_mirror, tmp_path, request):
    """Each command as written; its mirror is the demo's, its files go to tmp_path, and a
    Parquet export goes to the shared folder (then only what changed is written again:
    cheap)."""
    args = [str(demo_mirror) if w in (DEMO_DB, MIRROR) else w for w in command[1:]]
    args = [str(tmp_path / w) if w.endswith((".pdf",)) or w in ("figures", "export-csv/") else
            str(request.getfixturevalue("shared_export")) if w in (SHARED, "export/") else
            str(README.parent / w) if w.endswith(".toml") else w for w in args]
    r = run(args, tmp_path)
    assert r.returncode == 0, (args, r.stderr[-2000:])
    assert "Traceback" not in r.stdout + r.stderr
    assert "name no device" not in r.stderr  # the example's point names are the demo's


def test_the_curl_examples_get_data(demo_server, demo_mirror, tmp_path):
    """The curl calls, run by the shell as written (the date arithmetic in it too), against
    the server on its own port: each answers items, the GNSS call some epochs (it got 400
    "Date range too long: 330.07 days" with a fixed start date)."""
    root = demo_server.base_url.rsplit("/v1", 1)[0]
    r = subprocess.run(["bash", "-euo", "pipefail", "-c",
                        the_curl_block().replace(SERVE_URL, root)],
                       capture_output=True, text=True, timeout=120, cwd=tmp_path, check=False)
    assert r.returncode == 0, r.stderr
    answers, text, decoder = [], r.stdout.strip(), json.JSONDecoder()
    while text:
        answer, end = decoder.raw_decode(text)
        answers.append(answer)
        text = text[end:].strip()
    assert len(answers) == the_curl_block().count("curl "), r.stdout[:500]
    for answer in answers:
        assert answer.get("items"), str(answer)[:500]
    assert sum(len(item["data"]) for item in answers[-1]["items"]) > 0, str(answers[-1])[:500]


def test_the_duckdb_queries_of_the_shared_export_find_data(shared_export):
    """The DuckDB example on the export as the README's export example wrote it: its query
    of one device's recent months finds points (for month 2026-01 it found none: the demo's
    data are the last 90 days up to now), and the devices table reads."""
    sql = the_duckdb_queries().replace(SHARED, str(shared_export))
    statements = [s.strip() for s in sql.split(";") if s.strip()]
    assert len(statements) == 2, statements
    con = duckdb.connect()
    points = con.execute(statements[0]).fetchall()
    assert points and all(row[-1] > 0 for row in points), points
    assert con.execute(statements[1]).fetchall()

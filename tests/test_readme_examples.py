"""The README's `devmon analyze`, `alarms` and `report` examples run as written on the demo's
mirror (the world `devmon demo` syncs: seed 42, 6 sites, 48 devices, 90 days): the user's
report was that they named a serial, a projection and dates the demo mirror does not have."""

from __future__ import annotations

import re
import shlex
import subprocess
import sys
from pathlib import Path

import pytest

from devmon_sync.server import WorldSize

from support import synced_mirror

README = Path(__file__).resolve().parents[1] / "README.md"
DEMO_DB = "devmon-demo/mirror.duckdb"


def readme_commands() -> list[list[str]]:
    """Every `devmon analyze|alarms|report` command of the README's shell blocks that uses
    the demo mirror, with its continuation lines joined and its comment dropped."""
    out = []
    for block in re.findall(r"```sh\n(.*?)```", README.read_text(), re.S):
        joined = re.sub(r"\\\n\s*", " ", block)
        for line in joined.splitlines():
            words = shlex.split(line, comments=True)
            if words[:1] == ["devmon"] and words[1:2] in (["analyze"], ["alarms"], ["report"]) \
                    and DEMO_DB in words:
                out.append(words)
    return out


@pytest.fixture(scope="module")
def demo_mirror(tmp_path_factory) -> Path:
    folder = tmp_path_factory.mktemp("readme")
    return synced_mirror(folder / "mirror.duckdb", WorldSize(6, 48, 90), seed=42)


def test_the_readme_has_such_examples():
    kinds = {c[1] for c in readme_commands()}
    assert kinds == {"analyze", "alarms", "report"}, kinds


@pytest.mark.parametrize("command", readme_commands(), ids=lambda c: " ".join(c[1:5]))
def test_each_readme_example_runs_on_the_demo_mirror(command, demo_mirror, tmp_path):
    args = [str(demo_mirror) if w == DEMO_DB else w for w in command[1:]]
    args = [str(tmp_path / w) if w.endswith((".pdf",)) or w == "figures" else
            str(README.parent / w) if w.endswith(".toml") else w for w in args]
    r = subprocess.run([sys.executable, "-m", "devmon_sync", *args], capture_output=True,
                       text=True, timeout=600, cwd=tmp_path)
    assert r.returncode == 0, (args, r.stderr[-2000:])
    assert "Traceback" not in r.stdout + r.stderr
    assert "name no device" not in r.stderr  # the example's point names are the demo's

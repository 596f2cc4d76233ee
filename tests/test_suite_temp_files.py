"""The suite's own temporary files: a run writes ~6 GB of mirrors, reports and a desktop
build under the system's temporary folder, and pytest kept the last three runs' (~18 GB):
a second run on a laptop whose /tmp is a RAM disk (tmpfs, the default on several Linux
distributions) failed with "No space left on device", which it did here on a shared disk.
So a test that passes leaves nothing behind, a test that fails keeps its folder to look
at (the project's pytest settings, read from pyproject.toml as every run does)."""

from __future__ import annotations

import os
import subprocess
import sys
import textwrap
from pathlib import Path

from support import ROOT

TESTS = textwrap.dedent("""
    def test_passes(tmp_path):
        (tmp_path / "mirror.duckdb").write_bytes(b"x" * 1000)

    def test_fails(tmp_path):
        (tmp_path / "kept.txt").write_text("look at me")
        assert False, "fails on purpose"
""")


def _run(tmp_path: Path, selection: str) -> tuple[subprocess.CompletedProcess, list[Path]]:
    """One of the two tests above (``test_<selection>``) run by pytest with the project's settings
    and a temporary folder of their own; what they left in it."""
    folder = tmp_path / selection
    (folder / "temp").mkdir(parents=True)
    (folder / "test_inner.py").write_text(TESTS)
    done = subprocess.run(
        [sys.executable, "-m", "pytest", "-q", "-p", "no:cacheprovider",
         "-c", str(ROOT / "pyproject.toml"), "--rootdir", str(folder),
         f"{folder / 'test_inner.py'}::test_{selection}"],
        cwd=folder, capture_output=True, text=True, timeout=120,
        env={**os.environ, "TMPDIR": str(folder / "temp"), "PYTEST_ADDOPTS": ""})
    return done, sorted(p for p in (folder / "temp").rglob("*") if p.is_file())


def test_a_passing_run_leaves_no_temporary_files(tmp_path):
    done, left = _run(tmp_path, "passes")
    assert done.returncode == 0, done.stdout + done.stderr
    assert left == [], f"left behind: {left}"


def test_a_failing_test_keeps_its_folder_to_look_at(tmp_path):
    done, left = _run(tmp_path, "fails")
    assert done.returncode == 1, done.stdout + done.stderr
    assert [p.name for p in left] == ["kept.txt"], left

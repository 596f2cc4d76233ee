"""Opening files in the system's programs: the frozen app's library path must not reach them,
and a missing viewer is a message, not a crash.  (The frozen app itself is checked in
tests/test_packaging.py.)"""

from __future__ import annotations

import os
import sys

import pytest

from devmon_sync import external_apps
from devmon_sync.external_apps import (open_with_system, system_environment,
                                       system_library_environment)

BUNDLE = os.path.join(os.sep, "opt", "devmon", "_internal")


def test_the_system_environment_restores_the_users_library_path_and_drops_the_bundle():
    sep = os.pathsep
    env = {"LD_LIBRARY_PATH": f"{BUNDLE}{sep}/opt/user-libs", "LD_LIBRARY_PATH_ORIG": "/opt/user-libs",
           "PATH": f"/usr/bin{sep}{BUNDLE}{sep}/bin", "QT_PLUGIN_PATH": f"{BUNDLE}/PySide6/plugins",
           "PWD": BUNDLE, "LANG": "C.UTF-8", "_PYI_ARCHIVE_FILE": "/opt/devmon/devmon",
           "_PYI_PARENT_PROCESS_LEVEL": "0"}
    out = system_environment(env, BUNDLE)
    assert out["LD_LIBRARY_PATH"] == "/opt/user-libs" and "LD_LIBRARY_PATH_ORIG" not in out
    assert out["PATH"] == f"/usr/bin{sep}/bin"
    assert "QT_PLUGIN_PATH" not in out  # only the bundle in it: gone
    assert out["PWD"] == BUNDLE and out["LANG"] == "C.UTF-8"  # where the user is: kept
    assert not [k for k in out if k.startswith("_PYI")]  # the bootloader's own: gone
    # no LD_LIBRARY_PATH before the app started: none for the system program
    assert "LD_LIBRARY_PATH" not in system_environment({"LD_LIBRARY_PATH": BUNDLE}, BUNDLE)


def test_the_context_changes_nothing_from_source_and_restores_the_frozen_environment(
        monkeypatch):
    monkeypatch.setenv("LD_LIBRARY_PATH", BUNDLE)
    with system_library_environment():
        assert os.environ["LD_LIBRARY_PATH"] == BUNDLE  # not frozen: left alone
    if sys.platform == "win32":
        pytest.skip("the frozen branch calls SetDllDirectoryW: checked by the frozen app")
    monkeypatch.setattr(sys, "frozen", True, raising=False)
    monkeypatch.setattr(sys, "_MEIPASS", BUNDLE, raising=False)
    monkeypatch.setenv("LD_LIBRARY_PATH_ORIG", "/opt/user-libs")
    before = dict(os.environ)
    with system_library_environment():
        assert os.environ["LD_LIBRARY_PATH"] == "/opt/user-libs"
        assert "LD_LIBRARY_PATH_ORIG" not in os.environ
    assert dict(os.environ) == before  # the app's own search path is back


@pytest.mark.skipif(not sys.platform.startswith("linux"), reason="xdg-open: Linux")
def test_open_runs_xdg_open_on_the_file_and_reports_a_missing_viewer(tmp_path, monkeypatch):
    pdf = tmp_path / "report.pdf"
    pdf.write_bytes(b"%PDF-1.4\n")
    bin_dir = tmp_path / "bin"
    bin_dir.mkdir()
    opener = bin_dir / "xdg-open"
    opener.write_text(f'#!/bin/sh\necho "$1" > {tmp_path}/opened.txt\nexit "${{EXIT:-0}}"\n')
    opener.chmod(0o755)
    monkeypatch.setenv("PATH", f"{bin_dir}{os.pathsep}/usr/bin{os.pathsep}/bin")
    assert open_with_system(pdf) is None
    assert (tmp_path / "opened.txt").read_text().strip() == str(pdf.resolve())
    monkeypatch.setenv("EXIT", "3")  # xdg-open: no program for this kind of file
    problem = open_with_system(pdf)
    assert "found no program" in problem and str(pdf.resolve()) in problem
    monkeypatch.setenv("PATH", str(tmp_path / "empty"))
    assert "xdg-open is not installed" in open_with_system(pdf)
    assert "there is no" in open_with_system(tmp_path / "missing.pdf")


@pytest.mark.skipif(not sys.platform.startswith("linux"), reason="xdg-open: Linux")
def test_report_open_prints_why_the_pdf_was_not_opened_and_still_succeeds(tmp_path,
                                                                          monkeypatch, capsys):
    from devmon_sync.cli.args import open_written

    pdf = tmp_path / "r.pdf"
    pdf.write_bytes(b"%PDF-1.4\n")
    monkeypatch.setenv("PATH", str(tmp_path / "empty"))
    monkeypatch.setattr(external_apps, "OPENER_WAIT_S", 1.0)
    open_written(pdf, "devmon report")
    err = capsys.readouterr().err
    assert err.startswith("devmon report: cannot open the PDF:") and str(pdf.resolve()) in err

"""`devmon gui` where Qt cannot open a window (no display: an SSH session; no
libxcb-cursor0: a pip install on a bare system) says so in one line and exits 2, instead of
Qt's abort (exit 134, "Reinstalling the application may fix this problem")."""

from __future__ import annotations

import os
import subprocess
import sys

import pytest

import gui.commands as commands


def test_without_a_display_devmon_gui_says_so_and_exits_2(tmp_path):
    env = {k: v for k, v in os.environ.items()
           if k not in ("DISPLAY", "WAYLAND_DISPLAY", "QT_QPA_PLATFORM")}
    env["DEVMON_CONFIG_DIR"] = str(tmp_path)
    r = subprocess.run([sys.executable, "-m", "devmon_sync", "gui", "--db",
                        str(tmp_path / "m.duckdb")], capture_output=True, text=True,
                       timeout=120, env=env)
    if not sys.platform.startswith("linux"):
        pytest.skip("the check is for Linux desktops")
    assert r.returncode == 2, (r.returncode, r.stderr)
    lines = r.stderr.strip().splitlines()
    assert len(lines) == 1 and "needs a display" in lines[0] and "ssh -X" in lines[0], r.stderr
    assert "Reinstalling" not in r.stderr and "Traceback" not in r.stderr


def test_a_missing_xcb_cursor_library_is_named_with_how_to_install_it(monkeypatch):
    """The library cannot be taken away from this machine: its lookup is."""
    monkeypatch.setattr(commands, "find_library", lambda name: None)
    reason = commands.why_no_window({"DISPLAY": ":0"}, "linux", frozen=False)
    assert "libxcb-cursor0" in reason and "apt install libxcb-cursor0" in reason
    # the packaged app bundles it; Wayland and headless platforms do not need it
    assert commands.why_no_window({"DISPLAY": ":0"}, "linux", frozen=True) is None
    assert commands.why_no_window({"WAYLAND_DISPLAY": "wayland-0", "DISPLAY": ":0"},
                                  "linux", frozen=False) is None
    assert commands.why_no_window({"QT_QPA_PLATFORM": "offscreen"}, "linux") is None
    assert commands.why_no_window({}, "win32") is None


def test_this_machine_has_what_the_app_needs():
    """Here (the CI's system packages) the library is found: no false refusal."""
    if not sys.platform.startswith("linux"):
        pytest.skip("Linux only")
    assert commands.why_no_window({"DISPLAY": ":0"}, "linux", frozen=False) is None
